//! Requests a gateway refuses before anything else sees them: those that name no site, or
//! another than their `Host`.
//!
//! The framing is settled before this runs: hyper refuses a malformed head, a
//! `Transfer-Encoding` that does not end in `chunked` and conflicting `Content-Length`s, and
//! the serving loop (`tower_waiting_room::serve`) a head with both `Content-Length` and
//! `Transfer-Encoding`, the way requests are smuggled past a proxy. This adds, each a `400`
//! with the connection closed: no `Host` in HTTP/1.1 or more than one, a `Host` that is not a
//! host and port, an absolute target whose authority is not the `Host`, a method with a
//! lower-case letter (`post`, which a gate on `POST` does not match but an app may serve as
//! one), and a path with a `.` or `..` segment. `CONNECT` is a `405`: a gateway in front of
//! one site is not a tunnel.
//!
//! Dot segments: clients resolve them before sending (RFC 3986, section 5.2.4), browsers
//! always, so only a hand-made request has one. The rooms, their gates and the bypass rules
//! match the path as it comes, while an app (or a server in front of it) may resolve it: with
//! `bypass = ["/static"]`, `/static/../checkout` would pass the room as a static file and be
//! served as `/checkout`. So a segment that is `.` or `..`, written plainly or percent-encoded,
//! or followed by `;` (`..;`, which Java servers read as `..`) or by encoded spaces, tabs or
//! NULs (`..%20`, which IIS reads as `..`), between slashes, backslashes or their
//! percent-encodings, is refused.

use http::header::HOST;
use http::{Method, Request, Version};

use crate::pages::Problem;

/// `Err` with the answer when `req` must not go further.
pub fn check<B>(req: &Request<B>) -> Result<(), Problem> {
    if req.method() == Method::CONNECT {
        return Err(Problem::MethodNotAllowed);
    }
    let mut hosts = req.headers().get_all(HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => return Err(Problem::BadRequest("A request has one Host header.")),
        (None, _) if req.version() >= Version::HTTP_11 => {
            return Err(Problem::BadRequest("A request needs a Host header."))
        }
        (None, _) => None,
        (Some(value), None) => Some(value),
    };
    // Methods are case-sensitive and hyper takes `post` as a method of its own, which a gate on
    // `POST /checkout` does not match; an app that upper-cases methods (Django, Werkzeug)
    // would serve it as `POST`, past the gate. nginx refuses such methods too.
    if req
        .method()
        .as_str()
        .bytes()
        .any(|b| b.is_ascii_lowercase())
    {
        return Err(Problem::BadRequest(
            "The request's method has a lower-case letter.",
        ));
    }
    if has_dot_segment(req.uri().path().as_bytes()) {
        return Err(Problem::BadRequest(
            "The request's path has a `.` or `..` segment.",
        ));
    }
    if let Some(value) = host {
        let authority = value
            .to_str()
            .ok()
            .filter(|s| is_host_and_port(s))
            .and_then(|s| s.parse::<http::uri::Authority>().ok())
            .ok_or(Problem::BadRequest("The Host header is not a host name."))?;
        if let Some(target) = req.uri().authority() {
            if !target.as_str().eq_ignore_ascii_case(authority.as_str()) {
                return Err(Problem::BadRequest(
                    "The request's target names another host than its Host header.",
                ));
            }
        }
    }
    Ok(())
}

/// Whether `host` is a host name, an IPv4 address or a bracketed IPv6 address, then an optional
/// port from 1 to 65535. A URI's authority takes far more (`a,b`, `x;for=1.2.3.4`, `.a`, an
/// empty port), which the rooms' `hosts` rules would not match and an app, or a framework
/// reading `X-Forwarded-Host`, would read as a host by its first or its last part: a way past
/// a room that covers a host. A name is labels of letters, digits, `-` and `_` (1 to 63 each,
/// 253 in all), with at most one dot at its end.
fn is_host_and_port(host: &str) -> bool {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let Some((ip, after)) = rest.split_once(']') else {
            return false;
        };
        if ip.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        let port = match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(port) => Some(port),
                None => return false,
            },
        };
        (None, port)
    } else {
        match host.split_once(':') {
            Some((name, port)) => (Some(name), Some(port)),
            None => (Some(host), None),
        }
    };
    let port_ok = port.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 5
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| (1..=65_535).contains(&n))
    });
    let name_ok = name.is_none_or(|n| {
        let n = n.strip_suffix('.').unwrap_or(n);
        !n.is_empty()
            && n.len() <= 253
            && n.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
    });
    port_ok && name_ok
}

/// Whether `path` has a segment that is one or two dots (see the [module docs](self)).
fn has_dot_segment(path: &[u8]) -> bool {
    let mut at = 0;
    while at <= path.len() {
        // At the start of a segment: count its dots, plain or `%2e`.
        let mut dots = 0;
        loop {
            if path.get(at) == Some(&b'.') {
                at += 1;
            } else if encoded(path, at, b'e') {
                at += 3;
            } else {
                break;
            }
            dots += 1;
        }
        // Then spaces, tabs or NULs, percent-encoded: a server that trims them from a segment
        // (IIS, Windows' file names) or cuts at a NUL reads `..%20` as `..`.
        let mut end = at;
        while let Some(len) = blank(path, end) {
            end += len;
        }
        if (1..=2).contains(&dots)
            && (end == path.len() || path[end] == b';' || separator(path, end).is_some())
        {
            return true;
        }
        // On to the next segment.
        loop {
            if at >= path.len() {
                return false;
            }
            if let Some(len) = separator(path, at) {
                at += len;
                break;
            }
            at += 1;
        }
    }
    false
}

/// The length of the segment separator at `at` (`/`, `\`, `%2f`, `%5c`), if there is one.
fn separator(path: &[u8], at: usize) -> Option<usize> {
    match path.get(at) {
        Some(b'/' | b'\\') => Some(1),
        _ if encoded(path, at, b'f') => Some(3),
        _ if path
            .get(at..at + 3)
            .is_some_and(|b| b.eq_ignore_ascii_case(b"%5c")) =>
        {
            Some(3)
        }
        _ => None,
    }
}

/// The length of a percent-encoded space, tab or NUL at `at` (`%20`, `%09`, `%00`), if there is
/// one.
fn blank(path: &[u8], at: usize) -> Option<usize> {
    path.get(at..at + 3)
        .filter(|b| matches!(*b, b"%20" | b"%09" | b"%00"))
        .map(|_| 3)
}

/// Whether `path` has `%2` and `hex` (either case) at `at`.
fn encoded(path: &[u8], at: usize, hex: u8) -> bool {
    path.get(at..at + 3)
        .is_some_and(|b| b[0] == b'%' && b[1] == b'2' && b[2].eq_ignore_ascii_case(&hex))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, uri: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn hostless_or_misdirected_requests_are_refused() {
        let ok = req("GET", "/", &[("host", "shop.example:8080")]);
        assert_eq!(check(&ok), Ok(()));
        assert_eq!(check(&req("GET", "/", &[])).unwrap_err().status(), 400);
        let two = req("GET", "/", &[("host", "a"), ("host", "b")]);
        assert_eq!(check(&two).unwrap_err().status(), 400);
        for bad in [
            "",
            "a b",
            "user@host",
            "exa mple.com",
            "a/b",
            "launch.example,evil",
            "evil,launch.example",
            "x;for=6.6.6.6",
            ".launch.example",
            "launch.example..",
            "launch..example",
            "[launch.example]",
            "[::1",
            "[::1]x",
            "[::1]:",
            "other:abc",
            "other:",
            "other:0",
            "launch.example:99999",
            "launch.example:443:443",
            "::1",
            "a*b",
            "\u{e9}t\u{e9}.example",
        ] {
            let r = req("GET", "/", &[("host", bad)]);
            assert_eq!(check(&r).unwrap_err().status(), 400, "{bad:?}");
        }
        let other = req("GET", "http://evil.example/", &[("host", "shop.example")]);
        assert_eq!(check(&other).unwrap_err().status(), 400);
        let same = req("GET", "http://shop.example/x", &[("host", "SHOP.example")]);
        assert_eq!(check(&same), Ok(()));
        for fine in [
            "shop.example",
            "shop.example.",
            "shop.example:8080",
            "127.0.0.1",
            "127.0.0.1:65535",
            "[::1]",
            "[2001:db8::1]:443",
            "localhost",
            "my_host-1.internal",
            "xn--bcher-kva.example",
        ] {
            let r = req("GET", "/", &[("host", fine)]);
            assert_eq!(check(&r), Ok(()), "{fine:?}");
        }
        for lower in ["post", "Get", "pOST"] {
            let r = req(lower, "/checkout", &[("host", "shop.example")]);
            assert_eq!(check(&r).unwrap_err().status(), 400, "{lower:?}");
        }
        let extension = req("PURGE", "/x", &[("host", "shop.example")]);
        assert_eq!(check(&extension), Ok(()));
        let connect = req(
            "CONNECT",
            "shop.example:443",
            &[("host", "shop.example:443")],
        );
        assert_eq!(check(&connect).unwrap_err().status(), 405);
    }

    #[test]
    fn paths_with_dot_segments_are_refused() {
        for bad in [
            "/static/../checkout",
            "/static/..",
            "/./checkout",
            "/static/%2e%2e/checkout",
            "/static/%2E./checkout",
            "/static/..%2fcheckout",
            "/static/..%5Ccheckout",
            "/static/..;/checkout",
            "/static/.;x/checkout",
            "/static%2f..%2fcheckout",
            "/..",
            "/.",
            "/static/..%20/checkout",
            "/static/..%09/checkout",
            "/static/..%00/checkout",
            "/static/.%20%20/checkout",
            "/static/..%20",
        ] {
            let r = req("GET", bad, &[("host", "shop.example")]);
            assert_eq!(check(&r).unwrap_err().status(), 400, "{bad:?}");
        }
        for fine in [
            "/",
            "/static/app.js",
            "/.well-known/security.txt",
            "/a..b/c",
            "/...",
            "/x/.../y",
            "/file.",
            "/%2e%2e%2e",
            "/static/..x",
            "/checkout?next=/../x",
            "/static/..%20x/y",
            "/static/%20../y",
        ] {
            let r = req("GET", fine, &[("host", "shop.example")]);
            assert_eq!(check(&r), Ok(()), "{fine:?}");
        }
    }
}
