//! Reading the room's values from `Cookie` headers and writing `Set-Cookie` headers.

use http::{HeaderMap, HeaderValue};

use crate::config::CookieSettings;
use crate::encoding::push_u64;

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
        let bytes = header.as_bytes();
        // Nearly every `Cookie` header is valid UTF-8 (visible ASCII): there, jump from one
        // occurrence of the name to the next instead of splitting every pair of a long header.
        let found = match std::str::from_utf8(bytes) {
            Ok(text) if !name.is_empty() => scan_text(text, name, &mut accept, &mut tried),
            _ => scan_bytes(bytes, name, &mut accept, &mut tried),
        };
        match found {
            Scan::Found(found) => return Some(found),
            Scan::GiveUp => return None,
            Scan::NotHere => {}
        }
    }
    None
}

enum Scan<T> {
    Found(T),
    /// [`MAX_CANDIDATES`] values of the name were refused.
    GiveUp,
    NotHere,
}

/// One value of the cookie: accepted, or counted as tried.
fn offer<T>(value: &str, accept: &mut impl FnMut(&str) -> Option<T>, tried: &mut usize) -> Scan<T> {
    if let Some(found) = accept(value.trim().trim_matches('"')) {
        return Scan::Found(found);
    }
    *tried += 1;
    if *tried >= MAX_CANDIDATES {
        Scan::GiveUp
    } else {
        Scan::NotHere
    }
}

/// [`scan_bytes`] for a header that is valid UTF-8, with the same result: a pair is
/// `[ws] name [ws] = value` between semicolons. Cookie names never hold `;`, `=` or
/// whitespace, so each occurrence of the name lies inside one pair, and it is that pair's key
/// exactly when only whitespace stands before it in the pair and whitespace then `=` after it.
fn scan_text<T>(
    text: &str,
    name: &str,
    accept: &mut impl FnMut(&str) -> Option<T>,
    tried: &mut usize,
) -> Scan<T> {
    let mut from = 0;
    while let Some(i) = text[from..].find(name) {
        let start = from + i;
        from = start + name.len();
        let pair_start = text[..start].rfind(';').map_or(0, |j| j + 1);
        if !text.as_bytes()[pair_start..start]
            .iter()
            .all(u8::is_ascii_whitespace)
        {
            continue;
        }
        let Some(after_eq) = text[from..].trim_ascii_start().strip_prefix('=') else {
            continue;
        };
        let value = after_eq.split(';').next().unwrap_or_default();
        from = text.len() - after_eq.len() + value.len();
        match offer(value, accept, tried) {
            Scan::NotHere => {}
            done => return done,
        }
    }
    Scan::NotHere
}

/// Any header: split the raw bytes. Other cookies of the site may hold non-ASCII bytes
/// (browsers send UTF-8 as is), and must not hide the room's cookies in the same header.
fn scan_bytes<T>(
    bytes: &[u8],
    name: &str,
    accept: &mut impl FnMut(&str) -> Option<T>,
    tried: &mut usize,
) -> Scan<T> {
    for pair in bytes.split(|&b| b == b';') {
        let Some(eq) = pair.iter().position(|&b| b == b'=') else {
            continue;
        };
        if pair[..eq].trim_ascii() != name.as_bytes() {
            continue;
        }
        let Ok(value) = std::str::from_utf8(&pair[eq + 1..]) else {
            // A value that is not UTF-8 is tried, and refused.
            *tried += 1;
            if *tried >= MAX_CANDIDATES {
                return Scan::GiveUp;
            }
            continue;
        };
        match offer(value, accept, tried) {
            Scan::NotHere => {}
            done => return done,
        }
    }
    Scan::NotHere
}

/// A `Set-Cookie` value with the room's attributes; always `HttpOnly`.
pub(crate) fn set_cookie(
    settings: &CookieSettings,
    name: &str,
    value: &str,
    max_age_secs: u64,
) -> HeaderValue {
    let domain = settings.domain.as_deref();
    let mut s = String::with_capacity(
        80 + name.len() + value.len() + settings.path.len() + domain.map_or(0, |d| d.len() + 9),
    );
    // Pieces pushed one by one: no formatting machinery on the first-visit path.
    for piece in [name, "=", value, "; Path=", &settings.path, "; Max-Age="] {
        s.push_str(piece);
    }
    push_u64(&mut s, max_age_secs);
    s.push_str("; HttpOnly; SameSite=");
    s.push_str(settings.same_site.as_str());
    if settings.secure {
        s.push_str("; Secure");
    }
    if let Some(domain) = domain {
        s.push_str("; Domain=");
        s.push_str(domain);
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

    /// Every value of `name` offered to `accept`, in order (at most [`MAX_CANDIDATES`]).
    fn offered(header: &[u8], name: &str) -> Vec<String> {
        let mut headers = HeaderMap::new();
        headers.append("cookie", HeaderValue::from_bytes(header).unwrap());
        let mut seen = Vec::new();
        let none: Option<()> = find_valid(&headers, name, |v| {
            seen.push(v.to_owned());
            None
        });
        assert!(none.is_none());
        seen
    }

    /// The same, always through the byte-splitting path.
    fn offered_by_bytes(header: &[u8], name: &str) -> Vec<String> {
        let mut seen = Vec::new();
        let mut tried = 0;
        let _ = scan_bytes(
            header,
            name,
            &mut |v: &str| -> Option<()> {
                seen.push(v.to_owned());
                None
            },
            &mut tried,
        );
        seen
    }

    #[test]
    fn the_text_scan_finds_exactly_what_splitting_finds() {
        let cases: &[&[u8]] = &[
            b"a=1",
            b" a = 1 ; b=2",
            b"xa=1; a=2",
            b"ab=1; a=2",
            b"b=a=1; a=3",
            b"b=a; a=3",
            b"a; a=4",
            b"a=; a=\"q\"",
            b"c=1;a=2;a=3;a=4;a=5;a=6",
            b"a=1;a",
            b"\ta=tab;\t a=tab2",
            b"a a=1; a=2",
            b"aa=1; aaa=2; a=3; a=a=a",
            b"=a; a==; ;a=;",
            b"_site=v; wr_bench_a=tok; wr_bench_q=q",
            b"theme=caf\xc3\xa9; a=ok",
        ];
        for case in cases {
            for name in ["a", "aa", "wr_bench_a", "b"] {
                assert_eq!(
                    offered(case, name),
                    offered_by_bytes(case, name),
                    "{name} in {:?}",
                    String::from_utf8_lossy(case)
                );
            }
        }
        assert_eq!(offered(b"xa=1; a=2; a = 3 ", "a"), ["2", "3"]);
        assert_eq!(offered(b"b=a=1; a=3", "a"), ["3"]);
        assert_eq!(offered(b"a=1;a=2;a=3;a=4;a=5", "a").len(), MAX_CANDIDATES);
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

    #[test]
    fn set_cookie_is_exact() {
        let mut c = settings();
        assert_eq!(
            set_cookie(&c, "wr_q", "q1.k1.x", 86_400),
            "wr_q=q1.k1.x; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax; Secure"
        );
        c.secure = false;
        c.same_site = SameSite::Strict;
        c.path = "/shop".into();
        c.domain = Some("example.com".into());
        assert_eq!(
            clear_cookie(&c, "wr_a"),
            "wr_a=; Path=/shop; Max-Age=0; HttpOnly; SameSite=Strict; Domain=example.com"
        );
    }
}
