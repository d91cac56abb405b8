//! Defences in process memory: bypass rules, the per-client limit on new queue entries and the
//! per-session limit on status polls. None of them costs a store call.
//!
//! - **Bypass** ([`WaitingRoomBuilder::bypass`](crate::WaitingRoomBuilder::bypass)): a predicate
//!   on the request; matching requests skip the room entirely (no cookie, no
//!   [`Admission`](crate::Admission), no store call, not counted).
//! - **New visitors per client IP**
//!   ([`new_visitor_limit`](crate::WaitingRoomBuilder::new_visitor_limit), default
//!   [`defaults::NEW_VISITORS_PER_IP`]): how many fresh queue cookies (stage 1, the only place a
//!   new place in line is minted) one client gets per window. Over it: `429` with
//!   `Retry-After` and no cookie. A client is an IPv4 address, or an IPv6 **/64** (see
//!   [below](#ipv6-clients-are-grouped-by-64)).
//! - **Polls per session** ([`poll_limit`](crate::WaitingRoomBuilder::poll_limit), default
//!   [`defaults::POLLS_PER_SESSION`]): how many store questions (the status endpoint, and stage 3
//!   for a visitor in line) one session may cause per window. Over it: `429` with `Retry-After`,
//!   and no store call.
//!
//! Both limits count in a sliding window approximated by two generations of counters, and keep
//! at most [`MAX_TRACKED`] keys per generation: a flood of distinct clients rotates the
//! generations early instead of growing memory.
//!
//! ## Where the client IP comes from
//!
//! In this order, the first that is configured or present:
//!
//! 1. your extractor, [`client_ip_with`](crate::WaitingRoomBuilder::client_ip_with);
//! 2. a trusted header, [`client_ip_header`](crate::WaitingRoomBuilder::client_ip_header): the
//!    **right-most** address in it (the one your own proxy appended), so that addresses a client
//!    writes into the header itself are ignored;
//! 3. the connection: a [`PeerAddr`] or a plain [`SocketAddr`] in the request's extensions.
//!
//! axum keeps the peer in `ConnectInfo<SocketAddr>`, a type this crate cannot name without
//! depending on axum; pass it with one line:
//!
//! ```
//! use std::net::SocketAddr;
//! use axum::extract::ConnectInfo;
//! use tower_waiting_room::WaitingRoomLayer;
//!
//! let builder = WaitingRoomLayer::builder("shop").client_ip_with(|req| {
//!     req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip())
//! });
//! // ... serve with `app.into_make_service_with_connect_info::<SocketAddr>()`.
//! # let _ = builder;
//! ```
//!
//! A plain hyper server inserts a [`PeerAddr`] with the address `accept` returned.
//!
//! **A header is only as trustworthy as the proxy that sets it.** Configure `client_ip_header`
//! only when every request reaches the service through a proxy that overwrites or appends to
//! that header; otherwise anyone can send `X-Forwarded-For: <random address>` and get a fresh
//! budget with every request.
//!
//! **No IP, no limit.** When no address can be found (no extractor, no header, nothing in the
//! extensions), the new-visitor limit does not apply, and the room logs one warning. One shared
//! bucket for every such request would let a single bot lock every new visitor out, and would
//! turn a forgotten `ConnectInfo` into an outage; the poll limit (per session) applies either way.
//!
//! ## IPv6 clients are grouped by /64
//!
//! The new-visitor limit counts per client, and a client is:
//!
//! - an IPv4 address, as it is;
//! - an IPv4-mapped IPv6 address (`::ffff:203.0.113.7`, what a dual-stack socket reports for an
//!   IPv4 peer) as that IPv4 address, so that one client does not get two budgets depending on
//!   how the server listens;
//! - any other IPv6 address by its **/64** prefix (the last 64 bits ignored).
//!
//! An IPv6 client usually controls a whole /64, often more: the /64 is the smallest network a
//! home line, a mobile device or a rented server is given, and the host picks the last 64 bits
//! itself (privacy extensions change them every day). Counted per address, one such client could
//! take a new address for every request and get a fresh budget with each; counted per /64, it has
//! one budget, like one IPv4 address. The price: hosts that share one /64 (a few hosting
//! providers put several customers in one) share one budget, as people behind one IPv4 NAT do.
//! A client with a /56 or /48 can still spread over its /64s (256 or 65 536 budgets); that is
//! no worse than a botnet over many IPv4 addresses, which this limit does not stop either.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use http::{Extensions, HeaderMap, HeaderName, Method, Uri};

use crate::clock::duration_ms;

/// Most keys a limiter tracks per generation; it holds at most twice this many.
pub const MAX_TRACKED: usize = 65_536;

/// The documented defaults of the limits.
pub mod defaults {
    use std::time::Duration;

    use super::RateLimit;

    /// New queue entries per client (an IPv4 address or an IPv6 /64): 60 a minute. Real
    /// visitors mint one queue cookie per browser, but many of them can share one address
    /// (offices, universities, mobile carriers' NAT); a bot on one address mints thousands a
    /// minute. Sites whose audience sits behind carrier NAT or other big NATs may want to raise
    /// it with [`new_visitor_limit`](crate::WaitingRoomBuilder::new_visitor_limit).
    pub const NEW_VISITORS_PER_IP: RateLimit = RateLimit::per_minute(60);
    /// Store questions per session: 3 a second on average, counted over 10 s, so a burst of
    /// up to 30 passes (a page whose admission token just expired may ask for a few resources
    /// at once). The waiting page asks every 2 to 30 s.
    pub const POLLS_PER_SESSION: RateLimit = RateLimit::new(30, Duration::from_secs(10));
}

/// At most `max` events per `per`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    max: u32,
    per: Duration,
}

impl RateLimit {
    /// At most `max` per `per` (`max` at least 1, `per` at least 1 ms; checked by the builder).
    pub const fn new(max: u32, per: Duration) -> Self {
        Self { max, per }
    }

    /// At most `max` a second.
    pub const fn per_second(max: u32) -> Self {
        Self::new(max, Duration::from_secs(1))
    }

    /// At most `max` a minute.
    pub const fn per_minute(max: u32) -> Self {
        Self::new(max, Duration::from_secs(60))
    }

    /// How many.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Per how long.
    pub fn per(&self) -> Duration {
        self.per
    }

    pub(crate) fn is_valid(&self) -> bool {
        self.max > 0 && self.per.as_millis() > 0 && duration_ms(self.per) < u64::MAX / 4
    }
}

/// The peer address of the connection a request came on. Servers that do not use axum insert it
/// into each request's extensions, so that the per-IP limit sees the client:
///
/// ```
/// use std::net::SocketAddr;
/// use tower_waiting_room::PeerAddr;
///
/// let peer: SocketAddr = "203.0.113.7:52100".parse().unwrap();
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(PeerAddr(peer));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerAddr(pub SocketAddr);

/// A borrowed view of a request, whatever its body type: what bypass rules and IP extractors
/// see.
#[derive(Clone, Copy, Debug)]
pub struct RequestInfo<'a> {
    method: &'a Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
}

impl<'a> RequestInfo<'a> {
    /// A view of `req`.
    pub fn new<B>(req: &'a http::Request<B>) -> Self {
        Self {
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            extensions: req.extensions(),
        }
    }

    /// The method.
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The URI.
    pub fn uri(&self) -> &'a Uri {
        self.uri
    }

    /// The path of the URI.
    pub fn path(&self) -> &'a str {
        self.uri.path()
    }

    /// The headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The extensions (where servers put the peer address).
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}

/// A bypass rule.
pub(crate) type BypassFn = dyn Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static;
/// A client IP extractor.
pub(crate) type ClientIpFn = dyn Fn(&RequestInfo<'_>) -> Option<IpAddr> + Send + Sync + 'static;

/// Where the client IP comes from.
pub(crate) enum ClientIp {
    /// The user's extractor.
    With(Box<ClientIpFn>),
    /// The right-most address of a trusted header.
    Header(HeaderName),
    /// The connection's peer address in the extensions.
    Peer,
}

impl ClientIp {
    pub(crate) fn find(&self, req: &RequestInfo<'_>) -> Option<IpAddr> {
        match self {
            ClientIp::With(f) => f(req),
            ClientIp::Header(name) => right_most_ip(req.headers(), name),
            ClientIp::Peer => req
                .extensions()
                .get::<PeerAddr>()
                .map(|p| p.0.ip())
                .or_else(|| req.extensions().get::<SocketAddr>().map(SocketAddr::ip)),
        }
    }
}

/// The right-most address in the last line of header `name`: `1.2.3.4`, `1.2.3.4:80`, `::1` or
/// `[::1]:80`. Anything else is no address.
pub(crate) fn right_most_ip(headers: &HeaderMap, name: &HeaderName) -> Option<IpAddr> {
    let line = headers.get_all(name).iter().next_back()?.to_str().ok()?;
    let item = line.rsplit(',').next()?.trim();
    parse_ip(item)
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    s.parse::<SocketAddr>().ok().map(|a| a.ip())
}

/// The room's in-memory defences, as built from the builder.
pub(crate) struct Defences {
    pub(crate) bypass: Vec<Box<BypassFn>>,
    pub(crate) client_ip: ClientIp,
    pub(crate) new_visitors: Option<Limiter<IpAddr>>,
    pub(crate) polls: Option<Limiter<crate::session::SessionId>>,
    pub(crate) warned_no_ip: std::sync::atomic::AtomicBool,
}

impl Defences {
    /// Whether a bypass rule matches.
    pub(crate) fn bypasses(&self, req: &RequestInfo<'_>) -> bool {
        self.bypass.iter().any(|rule| rule(req))
    }
}

/// The client an address counts as for the new-visitor limit: an IPv4 address as it is, an
/// IPv4-mapped IPv6 address as its IPv4 address, any other IPv6 address as its /64 (the last 64
/// bits zeroed).
pub(crate) fn client_group(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & (u128::MAX << 64))),
    }
}

/// Counts events per key in a sliding window approximated by two generations, with a bounded
/// number of keys.
pub(crate) struct Limiter<K> {
    limit: RateLimit,
    window_ms: u64,
    max_keys: usize,
    state: Mutex<Generations<K>>,
}

struct Generations<K> {
    start_ms: u64,
    current: HashMap<K, u32>,
    previous: HashMap<K, u32>,
}

impl<K: Hash + Eq> Limiter<K> {
    pub(crate) fn new(limit: RateLimit, max_keys: usize) -> Self {
        Self {
            limit,
            window_ms: duration_ms(limit.per).max(1),
            max_keys: max_keys.max(1),
            state: Mutex::new(Generations {
                start_ms: 0,
                current: HashMap::new(),
                previous: HashMap::new(),
            }),
        }
    }

    /// Counts one event for `key` at `now_ms` if it is within the limit; otherwise counts
    /// nothing and says how long to wait.
    pub(crate) fn check(&self, key: K, now_ms: u64) -> Result<(), Duration> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let w = self.window_ms;
        let elapsed = now_ms.saturating_sub(g.start_ms);
        if elapsed >= 2 * w {
            g.current.clear();
            g.previous.clear();
            g.start_ms = now_ms;
        } else if elapsed >= w {
            g.previous = std::mem::take(&mut g.current);
            g.start_ms += w;
        }
        let elapsed = now_ms.saturating_sub(g.start_ms).min(w);
        let current = g.current.get(&key).copied().unwrap_or(0);
        let previous = g.previous.get(&key).copied().unwrap_or(0);
        // The previous window's events, weighted by how much of it still overlaps the sliding
        // window ending now.
        let carried = u64::from(previous) * (w - elapsed) / w;
        if carried + u64::from(current) >= u64::from(self.limit.max) {
            let wait_ms = (w - elapsed).max(1);
            return Err(Duration::from_millis(wait_ms));
        }
        if current == 0 && g.current.len() >= self.max_keys {
            // Full: the oldest generation goes, memory stays bounded.
            g.previous = std::mem::take(&mut g.current);
            g.start_ms = now_ms;
        }
        *g.current.entry(key).or_insert(0) += 1;
        Ok(())
    }

    /// Keys tracked in both generations.
    pub(crate) fn len(&self) -> usize {
        let g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        g.current.len() + g.previous.len()
    }
}

impl Limiter<IpAddr> {
    /// [`check`](Self::check) for the client `ip` belongs to (see [`client_group`]): an IPv4
    /// address, or an IPv6 /64, so that a client rotating addresses within its /64 has one
    /// budget.
    pub(crate) fn check_client(&self, ip: IpAddr, now_ms: u64) -> Result<(), Duration> {
        self.check(client_group(ip), now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_within_a_window_and_recovers() {
        let l = Limiter::new(RateLimit::per_second(3), 100);
        let t = 1_000_000;
        for _ in 0..3 {
            assert!(l.check(1u8, t).is_ok());
        }
        assert_eq!(l.check(1u8, t), Err(Duration::from_millis(1000)));
        assert!(l.check(2u8, t).is_ok(), "other keys are not affected");
        // Two windows later everything is forgotten.
        assert!(l.check(1u8, t + 2_000).is_ok());
    }

    #[test]
    fn sliding_window_carries_the_previous_generation() {
        let l = Limiter::new(RateLimit::per_second(4), 100);
        let t = 1_000_000;
        for _ in 0..4 {
            assert!(l.check(1u8, t).is_ok());
        }
        // 100 ms into the next window 90 % of the previous still counts: 3.6 -> 3, one more.
        assert!(l.check(1u8, t + 1_100).is_ok());
        assert!(l.check(1u8, t + 1_100).is_err());
    }

    #[test]
    fn memory_is_bounded() {
        let l = Limiter::new(RateLimit::per_minute(60), 1_000);
        for i in 0..100_000u32 {
            assert!(l.check(i, 5_000).is_ok());
        }
        assert!(l.len() <= 2_000, "{}", l.len());
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn client_groups() {
        assert_eq!(client_group(ip("203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(client_group(ip("::ffff:203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(
            client_group(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
            ip("2001:db8:1:2::")
        );
        assert_eq!(client_group(ip("2001:db8:1:2::")), ip("2001:db8:1:2::"));
        assert_eq!(client_group(ip("::1")), ip("::"));
        // Only the mapped form is IPv4; the deprecated compatible form `::a.b.c.d` is IPv6.
        assert_eq!(client_group(ip("::203.0.113.7")), ip("::"));
    }

    #[test]
    fn addresses_in_one_ipv6_64_share_a_budget() {
        let l = Limiter::new(RateLimit::per_minute(3), 100);
        let t = 1_000_000;
        assert!(l.check_client(ip("2001:db8:1:2::1"), t).is_ok());
        assert!(l.check_client(ip("2001:db8:1:2::2"), t).is_ok());
        assert!(l
            .check_client(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"), t)
            .is_ok());
        assert_eq!(
            l.check_client(ip("2001:db8:1:2:1234:5678:9abc:def0"), t),
            Err(Duration::from_secs(60)),
            "a fourth address in the same /64"
        );
        assert_eq!(l.len(), 1, "one key for the whole /64");
    }

    #[test]
    fn different_ipv6_64s_have_their_own_budgets() {
        let l = Limiter::new(RateLimit::per_minute(1), 100);
        let t = 1_000_000;
        assert!(l.check_client(ip("2001:db8:1:2::1"), t).is_ok());
        assert!(l.check_client(ip("2001:db8:1:2::2"), t).is_err());
        // The neighbouring /64s, and one that differs only in its first bits.
        assert!(l.check_client(ip("2001:db8:1:3::1"), t).is_ok());
        assert!(l.check_client(ip("2001:db8:1:1::1"), t).is_ok());
        assert!(l.check_client(ip("3001:db8:1:2::1"), t).is_ok());
        assert_eq!(l.len(), 4);
    }

    #[test]
    fn a_mapped_ipv4_address_is_that_ipv4_address() {
        let l = Limiter::new(RateLimit::per_minute(2), 100);
        let t = 1_000_000;
        assert!(l.check_client(ip("203.0.113.7"), t).is_ok());
        assert!(l.check_client(ip("::ffff:203.0.113.7"), t).is_ok());
        assert!(l.check_client(ip("203.0.113.7"), t).is_err());
        assert!(
            l.check_client(ip("::ffff:cb00:7107"), t).is_err(),
            "hex form"
        );
        // IPv4 addresses are not grouped: the neighbour has its own budget.
        assert!(l.check_client(ip("203.0.113.8"), t).is_ok());
        assert!(l.check_client(ip("::ffff:203.0.113.9"), t).is_ok());
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn the_generic_check_still_keys_on_the_full_address() {
        let l = Limiter::new(RateLimit::per_minute(1), 100);
        let t = 1_000_000;
        assert!(l.check(ip("2001:db8:1:2::1"), t).is_ok());
        assert!(l.check(ip("2001:db8:1:2::2"), t).is_ok());
    }

    #[test]
    fn right_most_address_of_a_header() {
        let name = HeaderName::from_static("x-forwarded-for");
        let mut h = HeaderMap::new();
        assert_eq!(right_most_ip(&h, &name), None);
        h.append(&name, "6.6.6.6, 10.0.0.1".parse().unwrap());
        h.append(&name, "203.0.113.9, 198.51.100.2:4711".parse().unwrap());
        assert_eq!(right_most_ip(&h, &name), "198.51.100.2".parse().ok());
        h.insert(&name, "[2001:db8::1]:443".parse().unwrap());
        assert_eq!(right_most_ip(&h, &name), "2001:db8::1".parse().ok());
        h.insert(&name, "unknown".parse().unwrap());
        assert_eq!(right_most_ip(&h, &name), None);
    }
}
