//! Reading the room's values from `Cookie` headers and writing `Set-Cookie` headers.

use http::{HeaderMap, HeaderValue};

use crate::config::{CookieName, CookieSettings};
use crate::encoding::push_u64;

/// A cookie the room reads: its name, and a cheap test (no parsing, no HMAC) of whether a value
/// could be the room's at all, so that junk under the name is never kept or verified.
#[derive(Clone, Copy)]
pub(crate) struct Wanted<'n> {
    pub(crate) name: &'n CookieName,
    pub(crate) could_be: fn(&str) -> bool,
}

/// The values of one of the room's cookies in a request, in header order, that could be the
/// room's. Every one of them is kept, however many there are: a sibling subdomain can plant
/// cookies of the same name before the visitor's own, and stopping after a few would let it send
/// the visitor to the back of the line. The header's size bounds how many there are.
#[derive(Debug, Default)]
pub(crate) struct Candidates<'h> {
    /// The first one, kept without allocating: nearly every request has at most one.
    first: Option<&'h str>,
    more: Vec<&'h str>,
    /// Whether the name came with any UTF-8 value at all, one that could not be the room's
    /// included.
    present: bool,
}

impl<'h> Candidates<'h> {
    fn push(&mut self, value: &'h str) {
        match self.first {
            None => self.first = Some(value),
            Some(_) => self.more.push(value),
        }
    }

    /// Whether the request sent this cookie at all (any UTF-8 value).
    pub(crate) fn is_present(&self) -> bool {
        self.present
    }

    /// Every value, in header order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &'h str> + '_ {
        self.first.into_iter().chain(self.more.iter().copied())
    }

    /// The first value `accept` takes, trying them in order.
    pub(crate) fn find_valid<T>(&self, accept: impl FnMut(&'h str) -> Option<T>) -> Option<T> {
        self.first
            .into_iter()
            .chain(self.more.iter().copied())
            .find_map(accept)
    }
}

/// The values of the `wanted` cookies in all the request's `Cookie` headers, in header order,
/// read with work linear in the headers' length (a header is read once per wanted name, and a
/// request's headers once).
///
/// A pair is `[ws] name [ws] = value`; the value is trimmed of whitespace and double quotes. A
/// value that is not UTF-8 cannot be the room's and counts as absent. Other pairs may hold
/// anything (browsers send UTF-8 as is): they never hide the room's cookies.
pub(crate) fn read<'h, const N: usize>(
    headers: &'h HeaderMap,
    wanted: [Wanted<'_>; N],
) -> [Candidates<'h>; N] {
    #[cfg(test)]
    steps::count_read();
    let mut found = std::array::from_fn(|_| Candidates::default());
    for header in headers.get_all(http::header::COOKIE) {
        let bytes = header.as_bytes();
        // Once per header, not once per wanted name.
        let text = std::str::from_utf8(bytes);
        for (w, candidates) in wanted.iter().zip(found.iter_mut()) {
            let mut offer = |value: &'h str| {
                let value = value.trim().trim_matches('"');
                candidates.present = true;
                if (w.could_be)(value) {
                    candidates.push(value);
                }
            };
            // Nearly every `Cookie` header is valid UTF-8 (visible ASCII): there, jump from one
            // occurrence of the name to the next (`str::find`, fast) instead of splitting every
            // pair of a long header of other cookies.
            match text {
                Ok(text) if !w.name.is_empty() => scan_text(text, w.name, &mut offer),
                _ => scan_bytes(bytes, w.name.as_str(), &mut offer),
            }
        }
    }
    found
}

/// [`scan_bytes`] for a header that is valid UTF-8, with the same values. Cookie names never
/// hold `;`, `=` or whitespace, so each occurrence of the name lies inside one pair, and it is
/// that pair's key exactly when only whitespace stands before it in the pair and whitespace then
/// `=` after it. Linear: the search never goes back before where the previous one ended (the
/// start of the current pair is found in the stretch just searched), and a pair's leading
/// whitespace is checked for its first occurrence of the name only (a later one in the same pair
/// has the first one's letters before it, so it is not the key).
fn scan_text<'h>(text: &'h str, name: &CookieName, offer: &mut impl FnMut(&'h str)) {
    let bytes = text.as_bytes();
    let mut from = 0;
    let mut pair_start = 0;
    let mut pair_judged = false;
    while let Some(i) = name.find_in(&text[from..]) {
        let start = from + i;
        steps::count(2 * i + name.len());
        if let Some(j) = text[from..start].rfind(';') {
            pair_start = from + j + 1;
            pair_judged = false;
        }
        from = start + name.len();
        if std::mem::replace(&mut pair_judged, true) {
            continue;
        }
        steps::count(start - pair_start);
        if !bytes[pair_start..start].iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Some(after_eq) = text[from..].trim_ascii_start().strip_prefix('=') else {
            continue;
        };
        let value_start = text.len() - after_eq.len();
        let value_end = after_eq.find(';').map_or(text.len(), |k| value_start + k);
        steps::count(value_end - from);
        offer(&text[value_start..value_end]);
        // At the `;` that ends the pair (or the end): the next search starts a new pair there.
        from = value_end;
    }
}

/// Any header: split the raw bytes at `;`, each pair at its first `=`. Other cookies of the site
/// may hold non-ASCII bytes (browsers send UTF-8 as is), and must not hide the room's cookies in
/// the same header.
fn scan_bytes<'h>(bytes: &'h [u8], name: &str, offer: &mut impl FnMut(&'h str)) {
    for pair in bytes.split(|&b| b == b';') {
        steps::count(pair.len() + 1);
        let eq = pair.iter().position(|&b| b == b'=');
        steps::count(eq.map_or(pair.len(), |eq| eq + 1));
        let Some(eq) = eq else {
            continue;
        };
        if pair[..eq].trim_ascii() != name.as_bytes() {
            continue;
        }
        if let Ok(value) = std::str::from_utf8(&pair[eq + 1..]) {
            offer(value);
        }
    }
}

/// A count of the bytes the scan walks (and of the scans), in tests: the evidence that its work
/// is linear in the header's length and that a request is read once. Nothing outside tests.
mod steps {
    #[cfg(test)]
    thread_local! {
        static STEPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        static READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// `n` more bytes walked: to find a pair's end, its `=`, and (for the room's names) to read
    /// its value. Trimming and comparing a key walk at most as far as finding its `=` did.
    #[inline(always)]
    pub(super) fn count(_n: usize) {
        #[cfg(test)]
        STEPS.with(|s| s.set(s.get() + _n));
    }

    #[cfg(test)]
    pub(super) fn count_read() {
        READS.with(|r| r.set(r.get() + 1));
    }

    /// Bytes walked and scans on this thread so far.
    #[cfg(test)]
    pub(crate) fn so_far() -> (usize, usize) {
        (STEPS.with(|s| s.get()), READS.with(|r| r.get()))
    }
}

#[cfg(test)]
pub(crate) use steps::so_far as steps_so_far;

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
            queue_name: CookieName::new("q".into()),
            admission_name: CookieName::new("a".into()),
            ticket_name: CookieName::new("t".into()),
            path: "/".into(),
            domain: None,
            secure: true,
            same_site: SameSite::Lax,
        }
    }

    fn any(_: &str) -> bool {
        true
    }

    /// Every value of `name` that `read` keeps from these headers, in order.
    fn offered(headers: &[&[u8]], name: &str) -> Vec<String> {
        let mut map = HeaderMap::new();
        for h in headers {
            map.append("cookie", HeaderValue::from_bytes(h).unwrap());
        }
        let [found] = read(
            &map,
            [Wanted {
                name: &CookieName::new(name.to_owned()),
                could_be: any,
            }],
        );
        let mut seen = Vec::new();
        let none: Option<()> = found.find_valid(|v| {
            seen.push(v.to_owned());
            None
        });
        assert!(none.is_none());
        seen
    }

    /// The obvious reading, for comparison: split every header at `;`, every pair at its first
    /// `=`.
    fn naive(headers: &[&[u8]], name: &str) -> Vec<String> {
        let mut out = Vec::new();
        for h in headers {
            for pair in h.split(|&b| b == b';') {
                let Some(eq) = pair.iter().position(|&b| b == b'=') else {
                    continue;
                };
                if pair[..eq].trim_ascii() != name.as_bytes() {
                    continue;
                }
                if let Ok(v) = std::str::from_utf8(&pair[eq + 1..]) {
                    out.push(v.trim().trim_matches('"').to_owned());
                }
            }
        }
        out
    }

    #[test]
    fn finds_the_first_accepted_value_across_headers() {
        let mut headers = HeaderMap::new();
        headers.append("cookie", HeaderValue::from_static("x=1; a=bad"));
        headers.append("cookie", HeaderValue::from_static("a = good ; y=2"));
        let [a, zz] = read(
            &headers,
            [
                Wanted {
                    name: &CookieName::new("a".into()),
                    could_be: any,
                },
                Wanted {
                    name: &CookieName::new("zz".into()),
                    could_be: any,
                },
            ],
        );
        let got = a.find_valid(|v| (v == "good").then(|| v.to_owned()));
        assert_eq!(got.as_deref(), Some("good"));
        assert!(a.is_present());
        assert_eq!(zz.find_valid(|v| Some(v.to_owned())), None);
        assert!(!zz.is_present());
    }

    #[test]
    fn non_ascii_values_are_absent_and_non_ascii_neighbours_hide_nothing() {
        assert_eq!(offered(&[b"a=\xff\xfe", b"a=ok"], "a"), ["ok"]);
        assert_eq!(offered(&[b"theme=caf\xc3\xa9; a=ok; b=\xff"], "a"), ["ok"]);
        assert!(offered(&[b"theme=caf\xc3\xa9; a=ok; b=\xff"], "b").is_empty());
        let mut headers = HeaderMap::new();
        headers.append("cookie", HeaderValue::from_bytes(b"a=\xff").unwrap());
        let [a] = read(
            &headers,
            [Wanted {
                name: &CookieName::new("a".into()),
                could_be: any,
            }],
        );
        assert!(!a.is_present(), "a value that is not UTF-8 is no value");
    }

    #[test]
    fn values_that_could_not_be_the_rooms_are_present_but_not_kept() {
        let mut headers = HeaderMap::new();
        headers.append("cookie", HeaderValue::from_static("a=junk; a=; a=q1.real"));
        let [a] = read(
            &headers,
            [Wanted {
                name: &CookieName::new("a".into()),
                could_be: |v| v.starts_with("q1."),
            }],
        );
        assert!(a.is_present());
        let mut kept = Vec::new();
        let _: Option<()> = a.find_valid(|v| {
            kept.push(v);
            None
        });
        assert_eq!(kept, ["q1.real"]);
    }

    #[test]
    fn reads_exactly_what_splitting_finds() {
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
            b"a=\xff; a=after",
        ];
        for case in cases {
            for name in ["a", "aa", "wr_bench_a", "b"] {
                assert_eq!(
                    offered(&[case], name),
                    naive(&[case], name),
                    "{name} in {:?}",
                    String::from_utf8_lossy(case)
                );
            }
        }
        assert_eq!(offered(&[b"xa=1; a=2; a = 3 "], "a"), ["2", "3"]);
        assert_eq!(offered(&[b"b=a=1; a=3"], "a"), ["3"]);
        assert_eq!(
            offered(&[b"a=1;a=2;a=3;a=4;a=5", b"a=6"], "a"),
            ["1", "2", "3", "4", "5", "6"],
            "every copy is kept, however many"
        );
    }

    proptest::proptest! {
        /// Any header over a small alphabet (names, separators, spaces, quotes, tabs): the jumping
        /// scan reads exactly what splitting every pair reads, for names that overlap each other.
        #[test]
        fn jumping_reads_what_splitting_reads(
            header in "[ab=; \t\"x]{0,40}",
            name in proptest::sample::select(vec!["a", "ab", "aa", "b"]),
        ) {
            proptest::prop_assert_eq!(
                offered(&[header.as_bytes()], name),
                naive(&[header.as_bytes()], name)
            );
        }
    }

    /// Bytes walked reading `header` for two names.
    fn steps_for(header: &str) -> usize {
        let mut headers = HeaderMap::new();
        headers.append("cookie", HeaderValue::from_str(header).unwrap());
        let (before, _) = steps_so_far();
        let (q, a) = (
            CookieName::new("wr_x_q".into()),
            CookieName::new("wr_x_a".into()),
        );
        let wanted = |name| Wanted {
            name,
            could_be: any,
        };
        let _ = read(&headers, [wanted(&q), wanted(&a)]);
        steps_so_far().0 - before
    }

    #[test]
    fn the_scan_is_linear_in_the_header_length() {
        /// A header of about `n` bytes.
        type Shape = fn(usize) -> String;
        let shapes: [(&str, Shape); 5] = [
            ("names without separators", |n| "wr_x_q".repeat(n / 6)),
            ("names after spaces", |n| {
                format!("{}{}", " ".repeat(n / 2), "wr_x_a ".repeat(n / 14))
            }),
            ("pairs", |n| "wr_x_q=v;".repeat(n / 9)),
            ("separators only", |n| ";".repeat(n)),
            ("one long value", |n| format!("wr_x_q={}", "v".repeat(n))),
        ];
        for (what, make) in shapes {
            let small = make(100_000);
            let large = make(400_000);
            let (s, l) = (steps_for(&small), steps_for(&large));
            // At most three steps per byte (a pair's end, its `=`, its value), and four times the
            // bytes take four times the steps.
            assert!(
                s <= 3 * small.len() + 3 && l <= 3 * large.len() + 3,
                "{what}: {s} {l}"
            );
            assert!(
                l * 100 <= 4 * s * 101,
                "{what}: 100 kB took {s} steps, 400 kB {l}"
            );
        }
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
