//! [`Limits`]: what a slow, idle or oversized client may hold.

use std::time::Duration;

/// hyper's smallest read buffer (`http1::Builder::max_buf_size` panics below it): the least
/// [`Limits::max_header_bytes`] takes.
const MIN_HEADER_BYTES: usize = 8192;

/// What a slow, idle or oversized client may hold; see the [module docs](super).
///
/// Built from [`Limits::new`] (the same as `Limits::default()`) with a setter per limit, each
/// taking and returning the limits; read back with the `get_` getters:
///
/// ```
/// use std::time::Duration;
/// use tower_waiting_room::serve::Limits;
///
/// let limits = Limits::new()
///     .request_timeout(Duration::from_secs(60))
///     .max_connections(20_000);
/// assert_eq!(limits.get_request_timeout(), Duration::from_secs(60));
/// assert_eq!(limits.get_header_read_timeout(), Duration::from_secs(10)); // the default
/// println!("serving within limits: {}", limits.describe());
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Limits {
    header_read_timeout: Duration,
    request_timeout: Duration,
    send_timeout: Duration,
    max_connections: usize,
    max_connections_per_ip: Option<usize>,
    grace: Duration,
    max_header_bytes: usize,
    max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self::new()
    }
}

impl Limits {
    /// The defaults: 10 s to send a request header, 30 s to answer a request, 60 s for a
    /// client to take each part of an answer, at most 10 000 connections, 10 s of grace at
    /// shutdown, request heads of at most 64 KiB and 100 headers.
    pub const fn new() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_connections_per_ip: None,
            grace: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
            max_headers: 100,
        }
    }

    /// Time a client has to send a whole request header, and a kept-alive connection to send
    /// its next one, before the connection is closed (hyper's `header_read_timeout`). Default
    /// 10 s.
    pub const fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Time the service has to answer a request (its response's head: a streamed body, such as
    /// the room's event stream, is not cut) before the client gets `503` with `Retry-After: 5`;
    /// `408` instead, the connection closed, when it was the client that had not sent the rest
    /// of the request's body (a body trickled slower than the request may take). Default 30 s.
    pub const fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Time a client has to take the next part of an answer: when it reads nothing of what
    /// the connection has to send (its socket's buffers full) for this long, the connection is
    /// closed. nginx's `send_timeout`, with its default: counted between two writes, not over
    /// the whole answer, so a large download at any steady pace, or an event stream quiet for
    /// minutes, is never cut; a client that stops reading no longer holds its connection (and
    /// its place under [`max_connections`](Self::max_connections)) for ever. Applies to an
    /// upgraded connection's writes too. A client that takes a byte now and then, just within
    /// it, is not closed (the connection cap bounds how many can). Zero closes a connection at
    /// the first write that has to wait. Default 60 s.
    pub const fn send_timeout(mut self, timeout: Duration) -> Self {
        self.send_timeout = timeout;
        self
    }

    /// Most connections open at once (an upgraded one counts until it is dropped); more wait in
    /// the kernel's accept queue until one closes. Keep it below the process's open-file limit
    /// (`ulimit -n`), with room for the app's own files and its store's connections, and above
    /// the room's `max_event_streams`: a waiter listening for events holds a connection.
    /// At least 1 (0 is taken as 1). Default 10 000.
    pub const fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = if connections == 0 { 1 } else { connections };
        self
    }

    /// Most connections one client address holds open at once (an IPv6 address's `/64` counts
    /// as one address): a connection past it is closed as soon as it is accepted, so that a
    /// few clients cannot take every place under [`max_connections`](Self::max_connections).
    /// Counted across every [`serve`](super::serve) of the process. Off by default (`0` turns
    /// it off): behind a load balancer or a CDN every connection comes from their few
    /// addresses, and a cap would refuse them; set it where clients connect directly (nginx's
    /// `limit_conn` is the same idea). Browsers open up to six connections a site.
    pub const fn max_connections_per_ip(mut self, connections: usize) -> Self {
        self.max_connections_per_ip = if connections == 0 {
            None
        } else {
            Some(connections)
        };
        self
    }

    /// How long open connections get to finish their requests once the shutdown future
    /// completes; those still open then are closed. Default 10 s.
    pub const fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Most bytes of a request's head (its request line and headers); a head over it is
    /// answered `431 Request Header Fields Too Large` by hyper, and the connection closed. It is
    /// also hyper's read buffer size (`max_buf_size`), which hyper refuses below 8192 bytes: a
    /// smaller value is **raised to 8192** (clamped, not refused). Default 64 KiB (65 536).
    pub const fn max_header_bytes(mut self, bytes: usize) -> Self {
        self.max_header_bytes = if bytes < MIN_HEADER_BYTES {
            MIN_HEADER_BYTES
        } else {
            bytes
        };
        self
    }

    /// Most headers in a request (hyper's `max_headers`); a request with more is answered
    /// `431 Request Header Fields Too Large` by hyper. Up to 100 hyper parses them on the stack,
    /// above that on the heap. Default 100.
    pub const fn max_headers(mut self, headers: usize) -> Self {
        self.max_headers = headers;
        self
    }

    /// See [`header_read_timeout`](Self::header_read_timeout).
    pub const fn get_header_read_timeout(&self) -> Duration {
        self.header_read_timeout
    }

    /// See [`request_timeout`](Self::request_timeout).
    pub const fn get_request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// See [`send_timeout`](Self::send_timeout).
    pub const fn get_send_timeout(&self) -> Duration {
        self.send_timeout
    }

    /// See [`max_connections`](Self::max_connections).
    pub const fn get_max_connections(&self) -> usize {
        self.max_connections
    }

    /// See [`max_connections_per_ip`](Self::max_connections_per_ip): `None` when off.
    pub const fn get_max_connections_per_ip(&self) -> Option<usize> {
        self.max_connections_per_ip
    }

    /// See [`grace`](Self::grace).
    pub const fn get_grace(&self) -> Duration {
        self.grace
    }

    /// See [`max_header_bytes`](Self::max_header_bytes) (at least 8192).
    pub const fn get_max_header_bytes(&self) -> usize {
        self.max_header_bytes
    }

    /// See [`max_headers`](Self::max_headers).
    pub const fn get_max_headers(&self) -> usize {
        self.max_headers
    }

    /// The limits in words, for a start-up line.
    pub fn describe(&self) -> String {
        let per_ip = match self.max_connections_per_ip {
            Some(n) => format!(" ({n} per address)"),
            None => String::new(),
        };
        format!(
            "{} s to send a request header, {} s to answer one, {} s to take each part of an \
             answer, at most {} connections{per_ip}, request heads of at most {} bytes and {} \
             headers, {} s for open connections to finish at shutdown",
            self.header_read_timeout.as_secs_f64(),
            self.request_timeout.as_secs_f64(),
            self.send_timeout.as_secs_f64(),
            self.max_connections,
            self.max_header_bytes,
            self.max_headers,
            self.grace.as_secs_f64(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_documented_ones() {
        let l = Limits::default();
        assert_eq!(l.get_header_read_timeout(), Duration::from_secs(10));
        assert_eq!(l.get_request_timeout(), Duration::from_secs(30));
        assert_eq!(l.get_send_timeout(), Duration::from_secs(60));
        assert_eq!(l.get_max_connections(), 10_000);
        assert_eq!(l.get_max_connections_per_ip(), None);
        assert_eq!(l.get_grace(), Duration::from_secs(10));
        assert_eq!(l.get_max_header_bytes(), 65_536);
        assert_eq!(l.get_max_headers(), 100);
        assert_eq!(
            l.describe(),
            "10 s to send a request header, 30 s to answer one, 60 s to take each part of an \
             answer, at most 10000 connections, request heads of at most 65536 bytes and 100 \
             headers, 10 s for open connections to finish at shutdown"
        );
    }

    #[test]
    fn each_setter_sets_its_limit_alone() {
        let l = Limits::new()
            .header_read_timeout(Duration::from_millis(1500))
            .request_timeout(Duration::from_secs(60))
            .send_timeout(Duration::from_secs(7))
            .max_connections(3)
            .max_connections_per_ip(8)
            .grace(Duration::from_secs(2))
            .max_header_bytes(16_384)
            .max_headers(20);
        assert_eq!(l.get_header_read_timeout(), Duration::from_millis(1500));
        assert_eq!(l.get_request_timeout(), Duration::from_secs(60));
        assert_eq!(l.get_send_timeout(), Duration::from_secs(7));
        assert_eq!(l.get_max_connections(), 3);
        assert_eq!(l.get_max_connections_per_ip(), Some(8));
        assert!(l
            .describe()
            .contains("at most 3 connections (8 per address)"));
        assert_eq!(
            l.max_connections_per_ip(0).get_max_connections_per_ip(),
            None
        );
        assert_eq!(l.get_grace(), Duration::from_secs(2));
        assert_eq!(l.get_max_header_bytes(), 16_384);
        assert_eq!(l.get_max_headers(), 20);
        assert!(l.describe().starts_with("1.5 s to send a request header"));
    }

    #[test]
    fn a_head_limit_below_hypers_minimum_is_raised_to_it() {
        assert_eq!(
            Limits::new().max_header_bytes(100).get_max_header_bytes(),
            8192
        );
        assert_eq!(
            Limits::new().max_header_bytes(8192).get_max_header_bytes(),
            8192
        );
        assert_eq!(Limits::new().max_connections(0).get_max_connections(), 1);
    }
}
