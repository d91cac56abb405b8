//! Who a request comes from: a borrowed view of the request ([`RequestInfo`]), the connection's
//! address ([`PeerAddr`]), the client IP, and the network prefixes the room counts by.
//!
//! # Where the client IP comes from
//!
//! From the first source that is configured, and only from it:
//!
//! 1. your extractor, [`client_ip_with`](crate::WaitingRoomBuilder::client_ip_with);
//! 2. else a trusted header, [`client_ip_header`](crate::WaitingRoomBuilder::client_ip_header):
//!    the **right-most** address in it (the one your own proxy appended), so that addresses a
//!    client writes into the header itself are ignored. A request without a usable address in
//!    that header has no IP: the room does not fall back to the connection, whose address behind
//!    a proxy is the proxy's, one shared budget that a single bot could use up for everyone;
//! 3. else (the default) the connection, from the request's extensions, the first present of:
//!    a [`PeerAddr`]; axum's `ConnectInfo<SocketAddr>` (with the `axum` cargo feature, on by
//!    default); a plain [`SocketAddr`].
//!
//! **Served directly** (no reverse proxy in front), the connection's address is the client's,
//! and the default finds it once the server puts it in the extensions:
//!
//! - **axum**: serve with connect info; with the `axum` feature that is all:
//!
//!   ```no_run
//!   # async fn run(app: axum::Router) -> std::io::Result<()> {
//!   use std::net::SocketAddr;
//!
//!   let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await?;
//!   axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
//!   # }
//!   ```
//!
//!   Plain `axum::serve(listener, app)` puts no address anywhere, and the room finds none.
//!   (Nor does `axum::serve` ever hang up on a slow client: the README's minimal example serves
//!   with this crate's `serve::serve` instead, hyper's connection builder with a header-read
//!   timeout among its limits, which inserts a [`PeerAddr`] into each request itself.)
//!   Without the `axum` feature (or with another axum version than 0.8), pass it yourself:
//!
//!   ```
//!   use std::net::SocketAddr;
//!   use axum::extract::ConnectInfo;
//!   use tower_waiting_room::WaitingRoomLayer;
//!
//!   let builder = WaitingRoomLayer::builder("shop").client_ip_with(|req| {
//!       req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip())
//!   });
//!   # let _ = builder;
//!   ```
//! - **hyper** (or any server of your own): insert a [`PeerAddr`] with the address `accept`
//!   returned into each request; `serve::serve` (feature `serve`, on by default), which the
//!   examples serve with, does it in the service of each connection.
//!
//! **Behind a reverse proxy** (nginx, a load balancer, a CDN), every connection comes from the
//! proxy: configure the header it appends the client's address to,
//! `client_ip_header("x-forwarded-for")`. **A header is only as trustworthy as the proxy that sets it.** Configure `client_ip_header`
//! only when every request reaches the service through a proxy that overwrites or appends to
//! that header; otherwise anyone can send `X-Forwarded-For: <random address>` and get a fresh
//! budget with every request. Behind several proxies, skip your own ones' addresses in a
//! `client_ip_with` extractor.
//!
//! **No IP, no limit.** When no address can be found, the new-visitor limit does not apply to
//! that request. One shared bucket for every such request would let a single bot lock every new
//! visitor out, and would turn a forgotten `ConnectInfo` into an outage; the poll limit (per
//! session) applies either way. The room says so in its log (with [`tracing`]):
//!
//! - at `build()`, at `INFO`, where the room will look for the client IP (it cannot know yet
//!   whether the server puts anything there);
//! - at the first request without an IP, **once** per room, at `WARN`, with what to change.
//!
//! Install a subscriber (for example `tracing_subscriber::fmt::init()`; the demo does) to see
//! them.
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
/// into each request's extensions, so that the per-IP limit sees the client (see
/// [where the client IP comes from](crate::client#where-the-client-ip-comes-from)):
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
            ClientIp::Peer => connection_ip(req.extensions()),
        }
    }

    /// Where this room looks for the client IP, for the log at start-up.
    pub(crate) fn source(&self) -> String {
        match self {
            ClientIp::With(_) => "your client_ip_with extractor".to_owned(),
            ClientIp::Header(name) => format!(
                "the right-most address of the {name} header (only behind a proxy that sets it)"
            ),
            ClientIp::Peer if cfg!(feature = "axum") => "the connection: a PeerAddr, axum's \
                ConnectInfo<SocketAddr> or a SocketAddr in each request's extensions"
                .to_owned(),
            ClientIp::Peer => "the connection: a PeerAddr or a SocketAddr in each request's \
                extensions (axum's ConnectInfo is not read: the `axum` feature is off)"
                .to_owned(),
        }
    }

    /// Logs, at start-up, where the room `room` looks for the client IP: at `INFO` where it
    /// is the crate's choice (the connection, a header), at `DEBUG` for an extractor of the
    /// caller's own, who knows it (a gateway's, whose users never wrote one).
    pub(crate) fn log_source(&self, room: &str) {
        if matches!(self, ClientIp::With(_)) {
            tracing::debug!(room, "the client IP comes from {}", self.source());
        } else {
            tracing::info!(room, "the client IP comes from {}", self.source());
        }
    }

    /// What to change when no client IP was found for a request, for the warning.
    pub(crate) fn remedy(&self) -> String {
        match self {
            ClientIp::With(_) => "your client_ip_with extractor returned None".to_owned(),
            ClientIp::Header(name) => format!(
                "no address in its {name} header (client_ip_header): does every request come \
                 through the proxy that sets it?"
            ),
            ClientIp::Peer => {
                let axum = if cfg!(feature = "axum") {
                    "axum, serve `app.into_make_service_with_connect_info::<SocketAddr>()`"
                } else {
                    "axum, turn on this crate's `axum` feature and serve \
                     `app.into_make_service_with_connect_info::<SocketAddr>()`"
                };
                format!(
                    "nothing in its extensions gives the connection's address. Served directly \
                     with {axum}; with hyper, insert a PeerAddr into each request. Behind a \
                     reverse proxy: set client_ip_header(\"x-forwarded-for\") (or the header \
                     it appends the client's address to)"
                )
            }
        }
    }

    /// Logs, once per room (the caller keeps the flag), that a request came without a client IP.
    pub(crate) fn warn_not_found(&self, room: &str) {
        tracing::warn!(
            room,
            "no client IP for a request, so the per-IP limit on new visitors does not apply to \
             such requests (said once): {}",
            self.remedy()
        );
    }
}

/// The connection's address, from the extensions: a [`PeerAddr`], axum's
/// `ConnectInfo<SocketAddr>` (with the `axum` feature) or a [`SocketAddr`], the first present.
fn connection_ip(extensions: &Extensions) -> Option<IpAddr> {
    if let Some(peer) = extensions.get::<PeerAddr>() {
        return Some(peer.0.ip());
    }
    #[cfg(feature = "axum")]
    if let Some(info) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0.ip());
    }
    extensions.get::<SocketAddr>().map(SocketAddr::ip)
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

    fn from(extensions: Extensions) -> Option<IpAddr> {
        let mut req = http::Request::new(());
        *req.extensions_mut() = extensions;
        ClientIp::Peer.find(&RequestInfo::new(&req))
    }

    #[test]
    fn the_connection_address_first_peer_addr_then_connect_info_then_socket_addr() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        let mut ext = Extensions::new();
        assert_eq!(from(ext.clone()), None);
        ext.insert(addr("192.0.2.3:1"));
        assert_eq!(from(ext.clone()), "192.0.2.3".parse().ok());
        #[cfg(feature = "axum")]
        {
            ext.insert(axum::extract::ConnectInfo(addr("192.0.2.2:1")));
            assert_eq!(from(ext.clone()), "192.0.2.2".parse().ok());
        }
        ext.insert(PeerAddr(addr("192.0.2.1:1")));
        assert_eq!(from(ext.clone()), "192.0.2.1".parse().ok());
    }

    #[cfg(feature = "axum")]
    #[test]
    fn axum_connect_info_alone_is_the_client_ip() {
        let mut ext = Extensions::new();
        ext.insert(axum::extract::ConnectInfo(
            "[2001:db8::7]:443".parse::<SocketAddr>().unwrap(),
        ));
        assert_eq!(from(ext), "2001:db8::7".parse().ok());
    }

    #[test]
    fn the_warning_says_what_to_change() {
        let peer = ClientIp::Peer.remedy();
        assert!(peer.contains("into_make_service_with_connect_info::<SocketAddr>()"));
        assert!(peer.contains("PeerAddr") && peer.contains("client_ip_header"));
        assert_eq!(peer.contains("`axum` feature"), !cfg!(feature = "axum"));
        let header = ClientIp::Header(HeaderName::from_static("x-real-ip")).remedy();
        assert!(header.contains("x-real-ip") && header.contains("proxy"));
    }
}
