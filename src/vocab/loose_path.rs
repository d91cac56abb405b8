//! A path as the most lenient app could read it, for the gates: a gated route must hold for
//! every spelling an app may serve as that route, or a visitor without an admission reaches it
//! by another spelling.
//!
//! Apps and the servers in front of them read paths loosely: Express ignores case and a
//! trailing slash by default, Java servers drop `;` parameters, nginx merges slashes, most
//! decode percent-escapes (`/%63heckout`), IIS trims trailing dots and spaces, and a path with
//! `..` is resolved. A gate is refusal unless admitted, so matching more spellings than an app
//! serves costs nothing but a `403` for a path nobody links to; matching fewer lets people
//! past it. Rooms' own rules and bypass rules match the path as it comes (a bypass matched
//! loosely would let people past a room).

use std::borrow::Cow;

/// `path` read as leniently as any app would: percent-escapes decoded (once), `\` as `/`, each
/// segment cut at its first `;`, its trailing dots and spaces trimmed, `.` and `..` resolved,
/// empty segments (`//`, a trailing `/`) dropped, ASCII letters in lower case. Always starts
/// with `/`; the root is `/`.
pub(crate) fn loose(path: &str) -> Cow<'_, str> {
    if is_loose(path) {
        return Cow::Borrowed(path);
    }
    // Decoded until nothing more is (`%2563` is `%63` once, `c` twice: some apps decode twice),
    // at most three times.
    let mut decoded = decode(path.as_bytes());
    for _ in 0..2 {
        let again = decode(&decoded);
        if again == decoded {
            break;
        }
        decoded = again;
    }
    let text = String::from_utf8_lossy(&decoded);
    let mut segments: Vec<String> = Vec::new();
    for segment in text.split(['/', '\\']) {
        // Trailing blanks first: a server that trims them reads `..%20` as `..`.
        let segment = segment.split(';').next().unwrap_or_default();
        let segment = segment.trim_end_matches(BLANKS);
        match segment {
            "." => continue,
            ".." => {
                segments.pop();
                continue;
            }
            _ => {}
        }
        let segment = segment.trim_end_matches(|c| c == '.' || BLANKS.contains(&c));
        if !segment.is_empty() {
            segments.push(segment.to_ascii_lowercase());
        }
    }
    let mut out = String::with_capacity(path.len());
    for segment in &segments {
        out.push('/');
        out.push_str(segment);
    }
    if out.is_empty() {
        out.push('/');
    }
    Cow::Owned(out)
}

/// Whether `path` is under `prefix` as the most lenient app reads both, by segments: a path
/// under a room's endpoints as it comes (`/__waitingroom/main/..%2f..%2fcheckout`) may not be
/// under them once read, and is then no endpoint (and not exempt from the gates).
pub(crate) fn loose_under(path: &str, prefix: &str) -> bool {
    let (path, prefix) = (loose(path), loose(trimmed(prefix)));
    prefix == "/"
        || path
            .strip_prefix(&*prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// What a server may trim from the end of a path's segment (IIS, Windows' file names) or cut
/// at (a NUL, in C).
const BLANKS: [char; 3] = [' ', '\t', '\0'];

/// `pattern` without its trailing slashes (which [`loose`] drops), `/` for the root: a rule's
/// pattern so trimmed is usually loose already, and reading it allocates nothing.
pub(crate) fn trimmed(pattern: &str) -> &str {
    match pattern.trim_end_matches('/') {
        "" => "/",
        kept => kept,
    }
}

/// Whether `path` is already as [`loose`] makes it: most are (lower-case letters, digits, `-`,
/// `_`, `~` and dots inside segments, single slashes), and then nothing is allocated.
fn is_loose(path: &str) -> bool {
    if path == "/" {
        return true;
    }
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    rest.split('/').all(|segment| {
        let b = segment.as_bytes();
        !b.is_empty()
            && b.last() != Some(&b'.')
            && b.iter()
                .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"-_.~".contains(&c))
    })
}

/// `bytes` with each `%` and two hex digits replaced by the byte they name.
fn decode(bytes: &[u8]) -> Vec<u8> {
    let hex = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            ) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::loose;

    #[test]
    fn every_spelling_an_app_may_serve_as_a_path_reads_as_it() {
        for spelling in [
            "/checkout",
            "/checkout/",
            "/checkout;x",
            "/checkout;jsessionid=1/",
            "//checkout",
            "/Checkout",
            "/CHECKOUT",
            "/%63heckout",
            "/%43heckout",
            "/checkout%2f",
            "/checkout%2F",
            "/checkout.",
            "/checkout%3bx",
            "/checkout%20",
            "/checkout. .",
            "/shop/../checkout",
            "/shop/%2e%2e/checkout",
            "/shop/..%2fcheckout",
            "/./checkout",
            "\\checkout",
            "/shop\\..\\checkout",
        ] {
            assert_eq!(loose(spelling), "/checkout", "{spelling:?}");
        }
        for spelling in [
            "/shop/..%20/checkout",
            "/shop/..%09/checkout",
            "/shop/..%00/checkout",
            "/%2563heckout",
            "/%252563heckout",
            "/shop/%252e%252e/checkout",
        ] {
            assert_eq!(loose(spelling), "/checkout", "{spelling:?}");
        }
        assert_eq!(loose("/api//Orders;x/7/"), "/api/orders/7");
        assert_eq!(loose("/"), "/");
        assert_eq!(loose(""), "/");
        assert_eq!(loose("//"), "/");
        assert_eq!(loose("/.."), "/");
        assert_eq!(loose("/%zz"), "/%zz");
        assert_eq!(loose("/caf%C3%A9"), "/café");
    }

    #[test]
    fn a_path_already_loose_is_not_copied() {
        for path in [
            "/",
            "/checkout",
            "/api/orders/7",
            "/a-b_c/1",
            "/static/app.js",
            "/~x/a.b",
        ] {
            assert!(
                matches!(loose(path), std::borrow::Cow::Borrowed(_)),
                "{path}"
            );
        }
    }
}
