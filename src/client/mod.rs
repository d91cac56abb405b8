//! Who a request comes from: a borrowed view of the request ([`RequestInfo`]), the connection's
//! address ([`PeerAddr`]), the client IP, and the network prefixes the room counts by.
//!
//! # Where the client IP comes from
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
//! # IPv6 clients are grouped by /64
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

pub(crate) mod network;

use std::net::{IpAddr, SocketAddr};

use http::{Extensions, HeaderMap, HeaderName, Method, Uri};

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

#[cfg(test)]
mod tests {
    use super::*;

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
