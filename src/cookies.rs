//! Reading the room's values from `Cookie` headers and writing `Set-Cookie` headers.

use std::fmt::Write as _;

use http::{HeaderMap, HeaderValue};

use crate::config::CookieSettings;

/// How many cookies of the same name are tried (a sibling subdomain can plant a second one).
const MAX_CANDIDATES: usize = 4;

/// The first value of cookie `name` that `accept` takes, trying each cookie of that name.
/// Allocates nothing.
pub(crate) fn find_valid<T>(
    headers: &HeaderMap,
    name: &str,
    mut accept: impl FnMut(&str) -> Option<T>,
) -> Option<T> {
    let mut tried = 0;
    for header in headers.get_all(http::header::COOKIE) {
        // Split the raw bytes: other cookies of the site may hold non-ASCII bytes (browsers send
        // UTF-8 as is), and must not hide the room's cookies in the same header.
        for pair in header.as_bytes().split(|&b| b == b';') {
            let Some(eq) = pair.iter().position(|&b| b == b'=') else {
                continue;
            };
            if pair[..eq].trim_ascii() != name.as_bytes() {
                continue;
            }
            let value = std::str::from_utf8(&pair[eq + 1..]).ok();
            if let Some(found) = value.and_then(|v| accept(v.trim().trim_matches('"'))) {
                return Some(found);
            }
            tried += 1;
            if tried >= MAX_CANDIDATES {
                return None;
            }
        }
    }
    None
}

/// A `Set-Cookie` value with the room's attributes; always `HttpOnly`.
pub(crate) fn set_cookie(
    settings: &CookieSettings,
    name: &str,
    value: &str,
    max_age_secs: u64,
) -> HeaderValue {
    let mut s = String::with_capacity(96 + value.len());
    let _ = write!(
        s,
        "{name}={value}; Path={}; Max-Age={max_age_secs}; HttpOnly; SameSite={}",
        settings.path,
        settings.same_site.as_str()
    );
    if settings.secure {
        s.push_str("; Secure");
    }
    if let Some(domain) = &settings.domain {
        let _ = write!(s, "; Domain={domain}");
    }
    HeaderValue::try_from(s).expect("cookie names and attributes are validated at build time")
}

/// A `Set-Cookie` value that removes the cookie.
pub(crate) fn clear_cookie(settings: &CookieSettings, name: &str) -> HeaderValue {
    set_cookie(settings, name, "", 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SameSite;

    fn settings() -> CookieSettings {
        CookieSettings {
            queue_name: "q".into(),
            admission_name: "a".into(),
            path: "/".into(),
            domain: None,
            secure: true,
            same_site: SameSite::Lax,
        }
    }

    #[test]
    fn finds_the_first_accepted_value_across_headers() {
        let mut headers = HeaderMap::new();
        headers.append("cookie", HeaderValue::from_static("x=1; a=bad"));
        headers.append("cookie", HeaderValue::from_static("a = good ; y=2"));
        let got = find_valid(&headers, "a", |v| (v == "good").then(|| v.to_owned()));
        assert_eq!(got.as_deref(), Some("good"));
        assert_eq!(find_valid(&headers, "zz", |v| Some(v.to_owned())), None);
    }

    #[test]
    fn non_ascii_headers_are_skipped_not_fatal() {
        let mut headers = HeaderMap::new();
        headers.append("cookie", HeaderValue::from_bytes(b"a=\xff\xfe").unwrap());
        headers.append("cookie", HeaderValue::from_static("a=ok"));
        assert_eq!(
            find_valid(&headers, "a", |v| Some(v.to_owned())).as_deref(),
            Some("ok")
        );
    }

    #[test]
    fn non_ascii_neighbours_do_not_hide_a_cookie() {
        let mut headers = HeaderMap::new();
        headers.append(
            "cookie",
            HeaderValue::from_bytes(b"theme=caf\xc3\xa9; a=ok; b=\xff").unwrap(),
        );
        assert_eq!(
            find_valid(&headers, "a", |v| Some(v.to_owned())).as_deref(),
            Some("ok")
        );
        assert_eq!(find_valid(&headers, "b", |v| Some(v.to_owned())), None);
    }

    #[test]
    fn set_cookie_has_secure_defaults() {
        let v = set_cookie(&settings(), "a", "v", 10);
        let v = v.to_str().unwrap();
        assert!(v.starts_with("a=v; Path=/; Max-Age=10"));
        assert!(v.contains("HttpOnly") && v.contains("SameSite=Lax") && v.contains("Secure"));
        let mut insecure = settings();
        insecure.secure = false;
        assert!(!set_cookie(&insecure, "a", "v", 1)
            .to_str()
            .unwrap()
            .contains("Secure"));
    }
}
