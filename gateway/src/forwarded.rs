//! Who the client is, and what the app is told about it.
//!
//! The connection's address ([`PeerAddr`]) is the client, unless it is one of the configured
//! trusted proxies (a load balancer, a CDN): then `X-Forwarded-For` is read from the right, past
//! every trusted address, and the first untrusted one is the client. An address a client wrote
//! itself sits to the left of what the trusted proxies appended, so it is never believed.
//!
//! Towards the app, as a proxy should: the connection's address is appended to
//! `X-Forwarded-For` and `Forwarded` (RFC 7239); `X-Forwarded-Proto` and `X-Forwarded-Host` are
//! kept from a trusted proxy and otherwise set from this hop; `X-Real-IP` is the client. From a
//! connection that is not a trusted proxy, whatever it sent in these headers is dropped first:
//! the app can believe them.
//!
//! The client found is put in the request's extensions as a [`ClientAddr`], where every room
//! reads it (its limit on new visitors per IP, its network binding).

use std::io::Write;
use std::net::IpAddr;

use http::header::{HeaderName, HeaderValue, FORWARDED, HOST};
use http::Request;
use ipnet::IpNet;
use tower_waiting_room::PeerAddr;

use crate::values::written;

/// The client's address as the gateway found it (in a request's extensions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// Finds the client and rewrites the forwarding headers of `req` (see the [module docs](self)).
pub fn forward<B>(req: &mut Request<B>, trusted: &[IpNet]) {
    let peer = req
        .extensions()
        .get::<PeerAddr>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |p| canonical(p.0.ip()));
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    let headers = req.headers_mut();
    let from_proxy = is_trusted(&peer);
    let client = if from_proxy {
        client_behind(peer, headers, &is_trusted)
    } else {
        for name in [
            X_FORWARDED_FOR,
            X_FORWARDED_PROTO,
            X_FORWARDED_HOST,
            FORWARDED,
        ] {
            headers.remove(name);
        }
        peer
    };
    headers.remove(X_REAL_IP);

    let host = headers.get(HOST).cloned();
    if !headers.contains_key(X_FORWARDED_PROTO) {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
    }
    if let (Some(host), false) = (&host, headers.contains_key(X_FORWARDED_HOST)) {
        headers.insert(X_FORWARDED_HOST, host.clone());
    }
    // Each value written once, on the stack, then copied into the header's own bytes.
    let xff = written(|w| {
        prior(headers, &X_FORWARDED_FOR, w)?;
        write!(w, "{peer}")
    });
    let forwarded = written(|w| {
        prior(headers, &FORWARDED, w)?;
        match peer {
            IpAddr::V4(v4) => write!(w, "for={v4}")?,
            IpAddr::V6(v6) => write!(w, "for=\"[{v6}]\"")?,
        }
        if let Some(host) = host.as_ref().and_then(|h| h.to_str().ok()) {
            // The guard let only a valid authority through: no quote or backslash to escape.
            write!(w, ";host=\"{host}\"")?;
        }
        w.write_all(b";proto=http")
    });
    let real = written(|w| write!(w, "{client}"));
    for (name, value) in [
        (X_FORWARDED_FOR, xff),
        (FORWARDED, forwarded),
        (X_REAL_IP, real),
    ] {
        if let Some(value) = value {
            headers.insert(name, value);
        }
    }
    req.extensions_mut().insert(ClientAddr(client));
}

/// Writes the list in `name` so far (one header, comma-separated, as proxies write it),
/// followed by `, ` if it has entries: where this hop's entry goes.
fn prior(headers: &http::HeaderMap, name: &HeaderName, w: &mut dyn Write) -> std::io::Result<()> {
    for value in headers.get_all(name) {
        if let Ok(value) = value.to_str() {
            w.write_all(value.as_bytes())?;
            w.write_all(b", ")?;
        }
    }
    Ok(())
}

/// The client behind a trusted `peer`: `X-Forwarded-For` read right to left, past trusted
/// addresses; an entry that is not an address ends the walk at the last address known good.
fn client_behind(
    peer: IpAddr,
    headers: &http::HeaderMap,
    is_trusted: &impl Fn(&IpAddr) -> bool,
) -> IpAddr {
    let entries: Vec<&str> = headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    let mut client = peer;
    for entry in entries.iter().rev() {
        let Some(ip) = parse_entry(entry) else {
            break;
        };
        client = ip;
        if !is_trusted(&ip) {
            break;
        }
    }
    client
}

/// An address as proxies write it in `X-Forwarded-For`: bare, or with a port (`1.2.3.4:5678`,
/// `[::1]:5678`).
fn parse_entry(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    entry
        .parse::<std::net::SocketAddr>()
        .ok()
        .map(|s| canonical(s.ip()))
}

/// An IPv4 client seen through an IPv6 socket (`::ffff:1.2.3.4`) is that IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn request(peer: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut req = Request::builder().uri("/");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut req = req.body(()).unwrap();
        req.extensions_mut()
            .insert(PeerAddr(peer.parse::<SocketAddr>().unwrap()));
        req
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_and_its_headers_are_dropped() {
        let mut req = request(
            "203.0.113.9:5000",
            &[
                ("host", "shop.example"),
                ("x-forwarded-for", "1.1.1.1"),
                ("x-forwarded-proto", "https"),
                ("forwarded", "for=1.1.1.1"),
                ("x-real-ip", "1.1.1.1"),
            ],
        );
        forward(&mut req, &nets(&["10.0.0.0/8"]));
        let h = req.headers();
        assert_eq!(
            req.extensions().get::<ClientAddr>().unwrap().0.to_string(),
            "203.0.113.9"
        );
        assert_eq!(h["x-forwarded-for"], "203.0.113.9");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(h["x-forwarded-host"], "shop.example");
        assert_eq!(h["x-real-ip"], "203.0.113.9");
        assert_eq!(
            h["forwarded"],
            "for=203.0.113.9;host=\"shop.example\";proto=http"
        );
    }

    #[test]
    fn behind_trusted_proxies_the_first_untrusted_address_from_the_right_is_the_client() {
        let mut req = request(
            "10.0.0.2:5000",
            &[
                ("host", "shop.example"),
                ("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.0.0.1"),
                ("x-forwarded-proto", "https"),
            ],
        );
        forward(&mut req, &nets(&["10.0.0.0/8"]));
        assert_eq!(
            req.extensions().get::<ClientAddr>().unwrap().0.to_string(),
            "198.51.100.7"
        );
        let h = req.headers();
        assert_eq!(
            h["x-forwarded-for"],
            "6.6.6.6, 198.51.100.7, 10.0.0.1, 10.0.0.2"
        );
        assert_eq!(
            h["x-forwarded-proto"], "https",
            "a trusted proxy's scheme is kept"
        );
        assert_eq!(h["x-real-ip"], "198.51.100.7");
    }

    #[test]
    fn garbage_in_the_list_stops_the_walk_at_the_last_good_address() {
        let mut req = request("10.0.0.2:5000", &[("x-forwarded-for", "1.2.3.4, nonsense")]);
        forward(&mut req, &nets(&["10.0.0.0/8"]));
        assert_eq!(
            req.extensions().get::<ClientAddr>().unwrap().0.to_string(),
            "10.0.0.2"
        );
        let mut req = request(
            "[::ffff:10.0.0.2]:5000",
            &[("x-forwarded-for", "[2001:db8::5]:443")],
        );
        forward(&mut req, &nets(&["10.0.0.0/8"]));
        assert_eq!(
            req.extensions().get::<ClientAddr>().unwrap().0.to_string(),
            "2001:db8::5"
        );
        assert!(req.headers()["forwarded"]
            .to_str()
            .unwrap()
            .starts_with("for=10.0.0.2"));
    }
}
