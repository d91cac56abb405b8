//! Reading the room's values from `Cookie` headers and writing `Set-Cookie` headers.

use http::{HeaderMap, HeaderValue};

use crate::config::{CookieName, CookieSettings};
use crate::encoding::Digits;

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

    /// The first value, in header order.
    pub(crate) fn first(&self) -> Option<&'h str> {
        self.first
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
/// read with work linear in the headers' length: each header once, for every wanted name at
/// once.
///
/// A pair is `[ws] name [ws] = value`; the value is trimmed of ASCII whitespace and double
/// quotes. A value that is not UTF-8 cannot be the room's and counts as absent. Other pairs may
/// hold anything (browsers send UTF-8 as is): they never hide the room's cookies.
pub(crate) fn read<'h, const N: usize>(
    headers: &'h HeaderMap,
    wanted: [Wanted<'_>; N],
) -> [Candidates<'h>; N] {
    #[cfg(test)]
    steps::count_read();
    let mut found = std::array::from_fn(|_| Candidates::default());
    let mut offer = |key: &[u8], value: &'h [u8]| {
        // Names differ in length more often than not: the length is compared first.
        let wanted_here = wanted.iter().zip(found.iter_mut());
        for (w, candidates) in wanted_here.filter(|(w, _)| w.name.len() == key.len()) {
            if key != w.name.as_bytes() {
                continue;
            }
            // Trimmed as bytes (ASCII whitespace, what HTTP allows around a value) before the
            // one UTF-8 check: `str::trim` brings Unicode's tables into every request.
            let Ok(value) = std::str::from_utf8(value.trim_ascii()) else {
                continue;
            };
            let value = unquote(value);
            candidates.present = true;
            if (w.could_be)(value) {
                candidates.push(value);
            }
        }
    };
    let firsts = FirstBytes::of(wanted.iter().map(|w| w.name.as_str()));
    for header in headers.get_all(http::header::COOKIE) {
        match &firsts {
            Some(firsts) => for_each_named_pair(header.as_bytes(), firsts, &mut offer),
            None => for_each_pair(header.as_bytes(), &mut offer),
        }
    }
    found
}

/// The distinct first bytes of up to three names, none of them a byte that could stand
/// around a key (whitespace, `;`, `=`): what [`for_each_named_pair`] jumps to with `memchr`.
/// Room cookie names all begin alike (`wr_`), so a room's two or three names have one.
struct FirstBytes {
    bytes: [u8; 3],
    len: usize,
}

impl FirstBytes {
    fn of<'n>(names: impl Iterator<Item = &'n str>) -> Option<Self> {
        let mut firsts = FirstBytes {
            bytes: [0; 3],
            len: 0,
        };
        for name in names {
            let &b = name.as_bytes().first()?;
            if b.is_ascii_whitespace() || b == b';' || b == b'=' {
                return None;
            }
            if !firsts.bytes[..firsts.len].contains(&b) {
                *firsts.bytes.get_mut(firsts.len)? = b;
                firsts.len += 1;
            }
        }
        (firsts.len > 0).then_some(firsts)
    }

    /// Where one of the bytes next occurs in `hay`.
    fn find_in(&self, hay: &[u8]) -> Option<usize> {
        let b = self.bytes;
        match self.len {
            1 => memchr::memchr(b[0], hay),
            2 => memchr::memchr2(b[0], b[1], hay),
            _ => memchr::memchr3(b[0], b[1], b[2], hay),
        }
    }
}

/// The pairs of a header whose key begins with one of `firsts`, as [`for_each_pair`] gives
/// them, found by jumping from one occurrence of those bytes to the next (`memchr`, fast over
/// a long header of other cookies) instead of splitting every pair. An occurrence begins a key
/// exactly when only whitespace stands between it and the header's start or the `;` before
/// it; the key then runs to the pair's first `=` (names hold neither `=` nor `;`). Linear:
/// the searches only go forward, and the whitespace walked back over before an occurrence lies
/// after the one before it.
fn for_each_named_pair<'h>(
    bytes: &'h [u8],
    firsts: &FirstBytes,
    pair: &mut impl FnMut(&'h [u8], &'h [u8]),
) {
    let mut from = 0;
    while let Some(i) = firsts.find_in(&bytes[from..]) {
        let at = from + i;
        steps::count(i + 1);
        let ws = bytes[..at]
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        steps::count(ws);
        let pair_start = at - ws;
        if pair_start > 0 && bytes[pair_start - 1] != b';' {
            // Inside a key or a value: not a key's start.
            from = at + 1;
            continue;
        }
        let rest = &bytes[at..];
        let end = memchr::memchr(b';', rest).unwrap_or(rest.len());
        let this = &rest[..end];
        steps::count(end + 1);
        if let Some(eq) = memchr::memchr(b'=', this) {
            pair(this[..eq].trim_ascii(), &this[eq + 1..]);
        }
        from = at + end;
        if from >= bytes.len() {
            return;
        }
    }
}

/// Every `key = value` pair of a header, split at `;` and at each pair's first `=` (a pair
/// without one is skipped), the key trimmed of ASCII whitespace, the value as written. The
/// splitting works on bytes: a header's other cookies may hold non-ASCII bytes (browsers send
/// UTF-8 as is) and never hide the room's. For names [`FirstBytes`] cannot jump to.
fn for_each_pair<'h>(bytes: &'h [u8], pair: &mut impl FnMut(&'h [u8], &'h [u8])) {
    let mut rest = bytes;
    loop {
        let end = memchr::memchr(b';', rest).unwrap_or(rest.len());
        let (this, after) = rest.split_at(end);
        steps::count(this.len() + 1);
        if let Some(eq) = memchr::memchr(b'=', this) {
            steps::count(eq + 1);
            pair(this[..eq].trim_ascii(), &this[eq + 1..]);
        }
        match after.split_first() {
            Some((_, next)) => rest = next,
            None => return,
        }
    }
}

/// `value` without the double quotes at its start and end (however many): what
/// `trim_matches('"')` says, without the searcher it builds to look for quotes all through
/// the value. The cuts are at ASCII bytes, so on character boundaries.
fn unquote(value: &str) -> &str {
    let b = value.as_bytes();
    let start = b.iter().position(|&c| c != b'"').unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|&c| c != b'"')
        .map_or(start, |last| last + 1);
    &value[start..end]
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
///
/// Written from its pieces into one buffer of exactly its length, which becomes the header
/// value's bytes as it is: no `String` grown on the way, and no second allocation for the
/// bytes' shared header (which `Bytes` makes for a buffer with spare capacity).
pub(crate) fn set_cookie(
    settings: &CookieSettings,
    name: &str,
    value: &[u8],
    max_age_secs: u64,
) -> HeaderValue {
    let max_age = Digits::of(max_age_secs);
    let secure: &[u8] = if settings.secure { b"; Secure" } else { b"" };
    let (domain_attr, domain): (&[u8], &[u8]) = match settings.domain.as_deref() {
        Some(domain) => (b"; Domain=", domain.as_bytes()),
        None => (b"", b""),
    };
    let pieces: [&[u8]; 12] = [
        name.as_bytes(),
        b"=",
        value,
        b"; Path=",
        settings.path.as_bytes(),
        b"; Max-Age=",
        max_age.as_bytes(),
        b"; HttpOnly; SameSite=",
        settings.same_site.as_str().as_bytes(),
        secure,
        domain_attr,
        domain,
    ];
    let mut s = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum());
    for piece in pieces {
        s.extend_from_slice(piece);
    }
    HeaderValue::try_from(s).expect("cookie names and attributes are validated at build time")
}

/// A `Set-Cookie` value that removes the cookie.
pub(crate) fn clear_cookie(settings: &CookieSettings, name: &str) -> HeaderValue {
    set_cookie(settings, name, b"", 0)
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
            edge_name: CookieName::new("e".into()),
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
                if let Ok(v) = std::str::from_utf8(pair[eq + 1..].trim_ascii()) {
                    out.push(v.trim_matches('"').to_owned());
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
            // Only ASCII whitespace is trimmed: a no-break space stays part of the value.
            b"a=\xc2\xa0ok; a=ok\xc2\xa0",
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
        /// Any header over a small alphabet (names, separators, spaces, quotes, tabs): the scan
        /// reads exactly what the obvious splitting reads, for names that overlap each other.
        #[test]
        fn reads_what_the_obvious_splitting_reads(
            header in "[ab=; \t\"x]{0,40}",
            name in proptest::sample::select(vec!["a", "ab", "aa", "b"]),
        ) {
            proptest::prop_assert_eq!(
                offered(&[header.as_bytes()], name),
                naive(&[header.as_bytes()], name)
            );
        }
    }

    /// Every value of each of `names` that one `read` for all of them keeps, in order.
    fn offered_together<const N: usize>(header: &[u8], names: [&str; N]) -> [Vec<String>; N] {
        let mut map = HeaderMap::new();
        map.append("cookie", HeaderValue::from_bytes(header).unwrap());
        let names = names.map(|n| CookieName::new(n.to_owned()));
        let found = read(
            &map,
            std::array::from_fn(|i| Wanted {
                name: &names[i],
                could_be: any,
            }),
        );
        found.map(|f| f.values().map(str::to_owned).collect())
    }

    proptest::proptest! {
        /// Several names read at once, by jumping to their first bytes (two of them) or, with
        /// more first bytes than the jump takes (four), by splitting every pair: each name's
        /// values are what the obvious splitting reads for it alone.
        #[test]
        fn names_read_together_read_what_each_reads_alone(header in "[abxt=; \t\"]{0,40}") {
            let h = header.as_bytes();
            let [a, ab, b] = offered_together(h, ["a", "ab", "b"]);
            proptest::prop_assert_eq!(a, naive(&[h], "a"));
            proptest::prop_assert_eq!(ab, naive(&[h], "ab"));
            proptest::prop_assert_eq!(b, naive(&[h], "b"));
            let [a, b, x, t] = offered_together(h, ["a", "b", "x", "t"]);
            proptest::prop_assert_eq!(a, naive(&[h], "a"));
            proptest::prop_assert_eq!(b, naive(&[h], "b"));
            proptest::prop_assert_eq!(x, naive(&[h], "x"));
            proptest::prop_assert_eq!(t, naive(&[h], "t"));
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
    fn unquoting_is_trimming_quotes() {
        for v in [
            "",
            "\"",
            "\"\"",
            "a",
            "\"a\"",
            "\"\"a\"",
            "a\"b",
            "\"caf\u{e9}\"",
            "\u{e9}\"\"",
        ] {
            assert_eq!(unquote(v), v.trim_matches('"'), "{v:?}");
        }
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
        let v = set_cookie(&settings(), "a", b"v", 10);
        let v = v.to_str().unwrap();
        assert!(v.starts_with("a=v; Path=/; Max-Age=10"));
        assert!(v.contains("HttpOnly") && v.contains("SameSite=Lax") && v.contains("Secure"));
        let mut insecure = settings();
        insecure.secure = false;
        assert!(!set_cookie(&insecure, "a", b"v", 1)
            .to_str()
            .unwrap()
            .contains("Secure"));
    }

    #[test]
    fn set_cookie_is_exact() {
        let mut c = settings();
        assert_eq!(
            set_cookie(&c, "wr_q", b"q1.k1.x", 86_400),
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
