//! Requests a gateway refuses before anything else sees them: those that name no site, or
//! another than their `Host`.
//!
//! The framing is settled before this runs: hyper refuses a malformed head, a
//! `Transfer-Encoding` that does not end in `chunked` and conflicting `Content-Length`s, and
//! the serving loop (`tower_waiting_room::serve`) a head with both `Content-Length` and
//! `Transfer-Encoding`, the way requests are smuggled past a proxy. This adds, each a `400`
//! with the connection closed: no `Host` in HTTP/1.1 or more than one, a `Host` that is not a
//! host and port, and an absolute target whose authority is not the `Host`. `CONNECT` is a
//! `405`: a gateway in front of one site is not a tunnel.

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
    if let Some(value) = host {
        let authority = value
            .to_str()
            .ok()
            .filter(|s| !s.is_empty() && !s.contains('@'))
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
        for bad in ["", "a b", "user@host", "exa mple.com", "a/b"] {
            let r = req("GET", "/", &[("host", bad)]);
            assert_eq!(check(&r).unwrap_err().status(), 400, "{bad:?}");
        }
        let other = req("GET", "http://evil.example/", &[("host", "shop.example")]);
        assert_eq!(check(&other).unwrap_err().status(), 400);
        let same = req("GET", "http://shop.example/x", &[("host", "SHOP.example")]);
        assert_eq!(check(&same), Ok(()));
        let connect = req(
            "CONNECT",
            "shop.example:443",
            &[("host", "shop.example:443")],
        );
        assert_eq!(check(&connect).unwrap_err().status(), 405);
    }
}
