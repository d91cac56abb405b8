//! Headers that belong to one connection, not to the request or the response: removed on the
//! way through, as RFC 9110, section 7.6.1 asks of a proxy.

use http::header::{self, HeaderMap, HeaderName};
use http::Method;

/// The hop-by-hop headers every proxy removes, besides those a `Connection` header names.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// Headers the gateway writes into every request itself (the forwarding headers, the request
/// id) and `Host`: a client's `Connection` header may name them, but what they hold by then is
/// this gateway's word to the app, not the client's hop-by-hop value. Removing them would let a
/// client strip the client address the app is told it can believe (`Connection:
/// x-forwarded-for, x-real-ip, forwarded`), leaving the app to see the gateway's.
const WRITTEN_HERE: [HeaderName; 7] = [
    HeaderName::from_static("x-forwarded-for"),
    HeaderName::from_static("x-forwarded-proto"),
    HeaderName::from_static("x-forwarded-host"),
    header::FORWARDED,
    HeaderName::from_static("x-real-ip"),
    HeaderName::from_static("x-request-id"),
    header::HOST,
];

/// Whether the request is a WebSocket handshake, the one switch of protocols passed on: a
/// `GET` with `Connection: upgrade` and one `Upgrade: websocket`.
///
/// Any other upgrade goes on as a plain request, its `Upgrade` removed (as nginx does unless
/// told otherwise). Above all `h2c`: an app that took it would join the client to itself in
/// HTTP/2 on a connection the gateway no longer reads, and every request sent on it would
/// pass no room, gate or bypass rule (on a bypassed path, without ever being admitted).
pub(crate) fn is_upgrade(method: &Method, headers: &HeaderMap) -> bool {
    let mut upgrade = headers.get_all(header::UPGRADE).iter();
    let websocket = match (upgrade.next(), upgrade.next()) {
        (Some(only), None) => only
            .as_bytes()
            .trim_ascii()
            .eq_ignore_ascii_case(b"websocket"),
        _ => false,
    };
    websocket
        && method == Method::GET
        && connection_tokens(headers).any(|t| t.eq_ignore_ascii_case("upgrade"))
}

fn connection_tokens(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Removes the hop-by-hop headers from `headers`. With `upgrade`, the handshake's `Upgrade` and
/// `Connection: upgrade` are put back, since a proxy that passes an upgrade on must pass them.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    // Most requests and answers carry none of them: one look at each name (a comparison of
    // standard names) instead of a removal, with its hashing, per name of the list.
    let any = headers
        .keys()
        .any(|name| name == header::UPGRADE || HOP_BY_HOP.contains(name));
    if !any && !upgrade {
        return;
    }
    // The names a `Connection` header lists are this hop's too (a client's own
    // `Connection: x-secret` must not reach the app). The usual tokens, `keep-alive` and
    // `upgrade`, name headers dealt with below: only the others are collected, and never
    // one the gateway wrote itself.
    let named: Vec<HeaderName> = connection_tokens(headers)
        .filter(|t| !t.eq_ignore_ascii_case("keep-alive") && !t.eq_ignore_ascii_case("upgrade"))
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .filter(|name| !WRITTEN_HERE.contains(name))
        .collect();
    for name in named {
        if name != header::UPGRADE || !upgrade {
            headers.remove(&name);
        }
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
    if upgrade {
        headers.insert(
            header::CONNECTION,
            header::HeaderValue::from_static("upgrade"),
        );
    } else {
        headers.remove(header::UPGRADE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_removed() {
        let mut h = headers(&[
            ("connection", "keep-alive, x-secret"),
            ("keep-alive", "timeout=5"),
            ("x-secret", "1"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("proxy-authorization", "Basic abc"),
            ("upgrade", "websocket"),
            ("accept", "text/html"),
        ]);
        remove_hop_by_hop(&mut h, false);
        let left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["accept"]);
    }

    #[test]
    fn connection_cannot_name_away_what_the_gateway_wrote() {
        let mut h = headers(&[
            (
                "connection",
                "X-Forwarded-For, x-real-ip, forwarded, x-forwarded-proto, x-forwarded-host, \
                 x-request-id, host, x-secret",
            ),
            ("x-forwarded-for", "127.0.0.1"),
            ("x-real-ip", "127.0.0.1"),
            ("forwarded", "for=127.0.0.1;proto=http"),
            ("x-forwarded-proto", "http"),
            ("x-forwarded-host", "shop.example"),
            ("x-request-id", "abc"),
            ("host", "shop.example"),
            ("x-secret", "1"),
        ]);
        remove_hop_by_hop(&mut h, false);
        let mut left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(
            left,
            [
                "forwarded",
                "host",
                "x-forwarded-for",
                "x-forwarded-host",
                "x-forwarded-proto",
                "x-real-ip",
                "x-request-id"
            ]
        );
    }

    #[test]
    fn an_upgrade_keeps_its_handshake() {
        let mut h = headers(&[
            ("connection", "Upgrade, x-secret"),
            ("upgrade", "websocket"),
            ("x-secret", "1"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ]);
        assert!(is_upgrade(&Method::GET, &h));
        remove_hop_by_hop(&mut h, true);
        assert_eq!(h["connection"], "upgrade");
        assert_eq!(h["upgrade"], "websocket");
        assert!(!h.contains_key("x-secret"));
        assert!(h.contains_key("sec-websocket-key"));
    }

    #[test]
    fn upgrade_needs_both_headers() {
        let get = Method::GET;
        assert!(!is_upgrade(&get, &headers(&[("upgrade", "websocket")])));
        assert!(!is_upgrade(&get, &headers(&[("connection", "upgrade")])));
        assert!(is_upgrade(
            &get,
            &headers(&[
                ("connection", "keep-alive, Upgrade"),
                ("upgrade", "websocket")
            ])
        ));
        assert!(is_upgrade(
            &get,
            &headers(&[("connection", "upgrade"), ("upgrade", " WebSocket ")])
        ));
    }

    #[test]
    fn only_a_websocket_handshake_is_an_upgrade() {
        let asked = |method: Method, upgrade: &[&str]| {
            let mut h = headers(&[("connection", "Upgrade, HTTP2-Settings")]);
            for protocol in upgrade {
                h.append(header::UPGRADE, HeaderValue::from_str(protocol).unwrap());
            }
            is_upgrade(&method, &h)
        };
        assert!(asked(Method::GET, &["websocket"]));
        for (method, upgrade) in [
            (Method::GET, &["h2c"][..]),
            (Method::GET, &["websocket, h2c"]),
            (Method::GET, &["h2c, websocket"]),
            (Method::GET, &["websocket", "h2c"]),
            (Method::GET, &["websocket", "websocket"]),
            (Method::GET, &["TLS/1.2"]),
            (Method::GET, &["websocketx"]),
            (Method::POST, &["websocket"]),
            (Method::OPTIONS, &["websocket"]),
        ] {
            assert!(!asked(method.clone(), upgrade), "{method} {upgrade:?}");
        }
    }

    #[test]
    fn an_upgrade_not_passed_on_loses_its_upgrade_header() {
        let mut h = headers(&[
            ("connection", "Upgrade, HTTP2-Settings"),
            ("upgrade", "h2c"),
            ("http2-settings", "AAMAAABkAARAAAAAAAIAAAAA"),
            ("accept", "*/*"),
        ]);
        assert!(!is_upgrade(&Method::GET, &h));
        remove_hop_by_hop(&mut h, false);
        let left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["accept"]);
    }
}
