//! The risk decision for each new visitor: who joins the line at once, who solves the
//! proof-of-work challenge first, and who is refused.
//!
//! A visitor without a queue cookie (stage 1, where every new place is minted) is given a
//! [`Risk`]:
//!
//! - [`Risk::Low`]: straight to the line. With [proof of work](super::proof_of_work) on, the
//!   queue cookie is issued already cleared, so the visitor never sees a challenge.
//! - [`Risk::Medium`]: with proof of work on, the visitor solves the challenge before joining
//!   (the queue cookie is issued unproven); without it, there is no challenge to give, and the
//!   visitor joins like a low one.
//! - [`Risk::High`]: refused, `403` with JSON `{"state":"refused",...}` (a page for browsers)
//!   and `Retry-After`; no cookie, no store call, nothing counted against the per-IP limit.
//!
//! Who decides: the app's hook, [`WaitingRoomBuilder::risk`](crate::WaitingRoomBuilder::risk),
//! when it gives one; otherwise, with proof of work on or
//! [`risky_networks`](crate::WaitingRoomBuilder::risky_networks) listed, the default scorer,
//! [`NewVisitor::default_risk`]; otherwise nobody (everyone joins, as without this module).
//! The decisions are counted in the metric
//! [`RISK_DECISIONS_TOTAL`](crate::telemetry::RISK_DECISIONS_TOTAL).
//!
//! # The default scorer
//!
//! Passive signals of the request, none of which costs the visitor anything (each a method of
//! [`NewVisitor`]):
//!
//! - the client IP is in one of the [`risky_networks`](crate::WaitingRoomBuilder::risky_networks)
//!   the operator lists (data centres, known bots): **high**;
//! - no `User-Agent`, no `Accept-Language`, or headers in an order no browser sends (`Host`, when
//!   sent, not first; `Accept-Encoding` before `Accept`): **medium**;
//! - none of these: **low**.
//!
//! Every browser sends a `User-Agent` and an `Accept-Language`, `Host` first over HTTP/1.1 and
//! `Accept` before `Accept-Encoding`; curl sends no `Accept-Language`, Python's `requests` sends
//! `Accept-Encoding` before `Accept`, Python's `urllib` puts `Host` second. The order is the one
//! the server received (hyper keeps it); a layer in front of the room that removes headers, or
//! a proxy that reorders them, can change it: behind such a proxy, decide with a hook of your
//! own. These signals are spoofable: they sort honest scripts from browsers, and send the
//! scripts to the challenge; a bot that copies a browser's headers is scored low. **To challenge
//! everyone**, as proof of work did before the risk decision, give a hook that says medium:
//!
//! ```
//! use tower_waiting_room::defences::risk::Risk;
//! use tower_waiting_room::{ProofOfWork, WaitingRoomLayer};
//!
//! let room = WaitingRoomLayer::builder("drop")
//!     .capacity(500)
//!     .secret([7u8; 32])
//!     .proof_of_work(ProofOfWork::new(18))
//!     .risk(|_| Risk::Medium) // everyone solves the challenge
//!     .build();
//! assert!(room.is_ok());
//! ```
//!
//! A hook of the app's own can use anything the request carries, and the default's verdict:
//!
//! ```
//! use tower_waiting_room::defences::risk::Risk;
//! use tower_waiting_room::{ProofOfWork, WaitingRoomLayer};
//!
//! let room = WaitingRoomLayer::builder("drop")
//!     .capacity(500)
//!     .secret([7u8; 32])
//!     .proof_of_work(ProofOfWork::new(18))
//!     .risky_networks(["192.0.2.0/24", "2001:db8::/32"])
//!     .risk(|visitor| {
//!         // Partners' apps, known by a header the app's own proxy sets: never challenged.
//!         if visitor.request().headers().contains_key("x-partner-verified") {
//!             return Risk::Low;
//!         }
//!         visitor.default_risk()
//!     })
//!     .build();
//! assert!(room.is_ok());
//! ```

use std::net::IpAddr;

use http::header::{self, HeaderName};

use crate::client::RequestInfo;

/// How risky a new visitor looks; see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Risk {
    /// Joins the line at once (no challenge, even with proof of work on).
    Low,
    /// Solves the proof-of-work challenge before joining, when proof of work is on.
    Medium,
    /// Refused: `403`, state `refused`.
    High,
}

impl Risk {
    /// The name, as in the metric's `risk` label: `low`, `medium` or `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
        }
    }
}

/// A new visitor, as the risk decision sees it: the request, the client IP, and whether the IP
/// is in the room's [`risky_networks`](crate::WaitingRoomBuilder::risky_networks).
#[derive(Clone, Copy, Debug)]
pub struct NewVisitor<'a> {
    request: RequestInfo<'a>,
    client_ip: Option<IpAddr>,
    listed: bool,
}

impl<'a> NewVisitor<'a> {
    /// A new visitor whose request is `request`, from `client_ip` (as the room finds it: see
    /// [`client`](crate::client)), whose address is or is not in a listed network. The room
    /// makes these; this is for the tests of a hook.
    pub fn new(request: RequestInfo<'a>, client_ip: Option<IpAddr>, listed: bool) -> Self {
        Self {
            request,
            client_ip,
            listed,
        }
    }

    /// The request.
    pub fn request(&self) -> &RequestInfo<'a> {
        &self.request
    }

    /// The client IP, if the room found one.
    pub fn client_ip(&self) -> Option<IpAddr> {
        self.client_ip
    }

    /// Whether the client IP is in one of the room's
    /// [`risky_networks`](crate::WaitingRoomBuilder::risky_networks).
    pub fn in_listed_network(&self) -> bool {
        self.listed
    }

    /// The request has no `User-Agent` header (a signal of the default scorer).
    pub fn no_user_agent(&self) -> bool {
        !self.request.headers().contains_key(header::USER_AGENT)
    }

    /// The request has no `Accept-Language` header (a signal of the default scorer).
    pub fn no_accept_language(&self) -> bool {
        !self.request.headers().contains_key(header::ACCEPT_LANGUAGE)
    }

    /// The headers came in an order no browser sends: `Host`, when sent, not first, or
    /// `Accept-Encoding` before `Accept` (a signal of the default scorer).
    pub fn unusual_header_order(&self) -> bool {
        unusual_order(self.request.headers().keys())
    }

    /// The default scorer's decision: high for a client IP in a
    /// [listed network](Self::in_listed_network), medium for any other signal
    /// ([`no_user_agent`](Self::no_user_agent), [`no_accept_language`](Self::no_accept_language),
    /// [`unusual_header_order`](Self::unusual_header_order)), low for none.
    pub fn default_risk(&self) -> Risk {
        if self.listed {
            Risk::High
        } else if self.no_user_agent() || self.no_accept_language() || self.unusual_header_order() {
            Risk::Medium
        } else {
            Risk::Low
        }
    }
}

/// Whether header names, in the order received, are in an order no browser sends: `Host` (when
/// sent) not first, or `Accept-Encoding` before `Accept`.
fn unusual_order<'h>(names: impl Iterator<Item = &'h HeaderName>) -> bool {
    let mut seen_encoding = false;
    for (i, name) in names.enumerate() {
        if *name == header::HOST && i > 0 {
            return true;
        }
        if *name == header::ACCEPT_ENCODING {
            seen_encoding = true;
        } else if *name == header::ACCEPT && seen_encoding {
            return true;
        }
    }
    false
}

/// The hook of the app's: the risk of a new visitor.
pub(crate) type RiskFn = dyn Fn(&NewVisitor<'_>) -> Risk + Send + Sync + 'static;

/// Who made a decision (the metric's `by` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecidedBy {
    /// The default scorer.
    Default,
    /// The app's hook.
    Hook,
}

impl DecidedBy {
    /// The metric's `by` label (only the `metrics` feature exports it).
    #[cfg(feature = "metrics")]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DecidedBy::Default => "default",
            DecidedBy::Hook => "hook",
        }
    }
}

/// The room's risk decision: the app's hook, or the default scorer, and the listed networks.
pub(crate) struct RiskGate {
    hook: Option<Box<RiskFn>>,
    networks: Networks,
}

impl RiskGate {
    pub(crate) fn new(hook: Option<Box<RiskFn>>, networks: Networks) -> Self {
        Self { hook, networks }
    }

    /// The risk of a new visitor whose request is `request`, from `client_ip`, and who decided.
    pub(crate) fn decide(
        &self,
        request: RequestInfo<'_>,
        client_ip: Option<IpAddr>,
    ) -> (Risk, DecidedBy) {
        let listed = client_ip.is_some_and(|ip| self.networks.contains(ip));
        let visitor = NewVisitor::new(request, client_ip, listed);
        match &self.hook {
            Some(hook) => (hook(&visitor), DecidedBy::Hook),
            None => (visitor.default_risk(), DecidedBy::Default),
        }
    }
}

/// Address ranges, as sorted, disjoint intervals of each family: a lookup is a binary search,
/// however long the operator's list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Networks {
    v4: Vec<(u128, u128)>,
    v6: Vec<(u128, u128)>,
}

impl Networks {
    /// The networks of `texts` (see [`parse_network`]), or the first text that is none.
    pub(crate) fn parse<'t>(texts: impl IntoIterator<Item = &'t str>) -> Result<Self, &'t str> {
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for text in texts {
            match parse_network(text).ok_or(text)? {
                Network::V4(lo, hi) => v4.push((lo, hi)),
                Network::V6(lo, hi) => v6.push((lo, hi)),
            }
        }
        Ok(Self {
            v4: merged(v4),
            v6: merged(v6),
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// Whether `ip` is in one of the networks (an IPv4-mapped IPv6 address as its IPv4 address).
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        match ip.to_canonical() {
            IpAddr::V4(v4) => within(&self.v4, u128::from(u32::from(v4))),
            IpAddr::V6(v6) => within(&self.v6, u128::from(v6)),
        }
    }
}

/// One network: its first and last address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Network {
    V4(u128, u128),
    V6(u128, u128),
}

/// An address (`203.0.113.7`, `2001:db8::1`: that address alone) or a range in CIDR notation
/// (`203.0.113.0/24`, `2001:db8::/32`), with no bits set past the prefix length (a typo there
/// would list another range than meant). Surrounding spaces are ignored. An IPv4-mapped IPv6
/// entry is its IPv4 one: `::ffff:192.0.2.7` is `192.0.2.7`, `::ffff:192.0.2.0/120` is
/// `192.0.2.0/24`.
fn parse_network(text: &str) -> Option<Network> {
    let text = text.trim();
    let (addr, prefix) = match text.split_once('/') {
        Some((addr, prefix)) => (addr, Some(prefix)),
        None => (text, None),
    };
    let prefix = match prefix {
        // Canonical decimal only: no sign, no leading zero.
        Some(p) if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) => {
            return None
        }
        Some(p) if p.len() > 1 && p.starts_with('0') => return None,
        Some(p) => Some(p.parse::<u32>().ok()?),
        None => None,
    };
    match addr.parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) => {
            let (lo, hi) = range(u128::from(u32::from(v4)), prefix.unwrap_or(32), 32)?;
            Some(Network::V4(lo, hi))
        }
        IpAddr::V6(v6) => {
            let prefix = prefix.unwrap_or(128);
            if let Some(v4) = v6.to_ipv4_mapped() {
                // A client IP is looked up as IPv4 when it is one, mapped or not (see
                // `Networks::contains`), so a mapped entry must be listed as IPv4 too: among
                // the IPv6 ranges it would never match. A prefix shorter than 96 is refused
                // rather than read as "all of IPv4 and more": such a range reaches past the
                // mapped block into other IPv6 space, and one short prefix would then refuse
                // every IPv4 visitor, far more than a mapped entry suggests. (Its `ffff` also
                // lies past the prefix, which is refused for any range.)
                let (lo, hi) = range(u128::from(u32::from(v4)), prefix.checked_sub(96)?, 32)?;
                return Some(Network::V4(lo, hi));
            }
            // A plain IPv6 range that happens to contain the mapped block (`::/0`, `::/80`)
            // lists IPv6 clients only: an operator listing "all of IPv6" does not mean to
            // refuse every IPv4 visitor.
            let (lo, hi) = range(u128::from(v6), prefix, 128)?;
            Some(Network::V6(lo, hi))
        }
    }
}

/// The first and last address of `addr/prefix` in a family of `bits` bits, if `prefix` fits and
/// `addr` has no bit set past it.
fn range(addr: u128, prefix: u32, bits: u32) -> Option<(u128, u128)> {
    if prefix > bits {
        return None;
    }
    let host_bits = bits - prefix;
    let host_mask = if host_bits == 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    };
    (addr & host_mask == 0).then_some((addr, addr | host_mask))
}

/// Intervals sorted by their start, overlapping and adjacent ones merged.
fn merged(mut ranges: Vec<(u128, u128)>) -> Vec<(u128, u128)> {
    ranges.sort_unstable();
    let mut out: Vec<(u128, u128)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if last.1.checked_add(1).is_none_or(|next| lo <= next) => {
                last.1 = last.1.max(hi)
            }
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// Whether `x` lies in one of the sorted, disjoint `ranges`.
fn within(ranges: &[(u128, u128)], x: u128) -> bool {
    // The last range starting at or before `x`.
    let after = ranges.partition_point(|&(lo, _)| lo <= x);
    after > 0 && x <= ranges[after - 1].1
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn nets(texts: &[&str]) -> Networks {
        Networks::parse(texts.iter().copied()).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_parse_canonically_and_refuse_the_rest() {
        for good in [
            "203.0.113.0/24",
            " 203.0.113.0/24 ",
            "203.0.113.7",
            "0.0.0.0/0",
            "2001:db8::/32",
            "::/0",
            "2001:db8::1",
            "2001:db8::1/128",
            "::ffff:203.0.113.0/120",
        ] {
            assert!(parse_network(good).is_some(), "{good}");
        }
        for bad in [
            "",
            "/24",
            "203.0.113.7/24", // bits past the prefix
            "203.0.113.0/33",
            "203.0.113.0/",
            "203.0.113.0/024",
            "203.0.113.0/+24",
            "203.0.113.0/24/8",
            "203.0.113.0/-1",
            "2001:db8::/129",
            "2001:db8::1/32",
            "example.com",
            "203.0.113",
            "203.0.113.0/4294967320",
        ] {
            assert_eq!(parse_network(bad), None, "{bad:?}");
        }
        assert_eq!(Networks::parse(["10.0.0.0/8", "bad"]), Err("bad"));
    }

    #[test]
    fn an_address_is_in_a_network_exactly_when_it_should_be() {
        let n = nets(&[
            "203.0.113.0/24",
            "198.51.100.7",
            "10.0.0.0/8",
            "10.1.0.0/16", // inside the /8: merged
            "2001:db8::/32",
        ]);
        for inside in [
            "203.0.113.0",
            "203.0.113.255",
            "198.51.100.7",
            "10.0.0.1",
            "10.255.255.255",
            "::ffff:203.0.113.9", // IPv4-mapped: counts as IPv4
            "2001:db8::1",
            "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
        ] {
            assert!(n.contains(ip(inside)), "{inside}");
        }
        for outside in [
            "203.0.112.255",
            "203.0.114.0",
            "198.51.100.6",
            "198.51.100.8",
            "11.0.0.0",
            "9.255.255.255",
            "2001:db9::",
            "2001:db7:ffff::",
            "::203.0.113.9", // the deprecated compatible form is IPv6
        ] {
            assert!(!n.contains(ip(outside)), "{outside}");
        }
        assert_eq!(n.v4.len(), 3, "the /16 inside the /8 is merged: {:?}", n.v4);
        assert!(Networks::default().is_empty());
        let all = nets(&["0.0.0.0/0", "::/0"]);
        assert!(all.contains(ip("255.255.255.255")) && all.contains(ip("::")));
    }

    #[test]
    fn a_mapped_address_is_listed_as_its_ipv4_address() {
        let n = nets(&["::ffff:192.0.2.7"]);
        assert_eq!(n.v4, [(0xc000_0207, 0xc000_0207)]);
        assert!(n.v6.is_empty(), "{:?}", n.v6);
        assert!(n.contains(ip("192.0.2.7")));
        assert!(n.contains(ip("::ffff:192.0.2.7")));
        assert!(!n.contains(ip("192.0.2.8")));
        assert!(
            !n.contains(ip("::192.0.2.7")),
            "the compatible form is IPv6"
        );
        assert_eq!(
            parse_network("::ffff:192.0.2.7/128"),
            parse_network("192.0.2.7")
        );
    }

    #[test]
    fn a_mapped_range_is_listed_as_its_ipv4_range() {
        let n = nets(&["::ffff:127.0.0.0/104"]);
        assert_eq!(n, nets(&["127.0.0.0/8"]));
        for inside in [
            "127.1.2.3",
            "127.0.0.0",
            "127.255.255.255",
            "::ffff:127.1.2.3",
        ] {
            assert!(n.contains(ip(inside)), "{inside}");
        }
        for outside in [
            "126.255.255.255",
            "128.0.0.0",
            "::ffff:128.0.0.1",
            "::127.1.2.3",
        ] {
            assert!(!n.contains(ip(outside)), "{outside}");
        }
        // A client IP in mapped form, as a dual-stack listener reports one, is refused too.
        let req = Request::get("/").body(()).unwrap();
        let gate = RiskGate::new(None, n);
        for client in ["127.1.2.3", "::ffff:127.1.2.3"] {
            assert_eq!(
                gate.decide(RequestInfo::new(&req), Some(ip(client))),
                (Risk::High, DecidedBy::Default),
                "{client}"
            );
        }
        // The whole mapped block is the whole of IPv4; bits past the prefix are refused as for
        // any range.
        assert_eq!(nets(&["::ffff:0.0.0.0/96"]), nets(&["0.0.0.0/0"]));
        assert_eq!(
            parse_network("::ffff:192.0.2.0/120"),
            parse_network("192.0.2.0/24")
        );
        assert_eq!(parse_network("::ffff:192.0.2.7/120"), None);
        assert_eq!(parse_network("::ffff:192.0.2.0/129"), None);
    }

    #[test]
    fn a_mapped_range_shorter_than_96_is_refused_and_wider_ipv6_lists_no_ipv4() {
        for bad in [
            "::ffff:0.0.0.0/95",
            "::ffff:0:0/80",
            "::ffff:127.0.0.0/64",
            "::ffff:0:0/0",
        ] {
            assert_eq!(parse_network(bad), None, "{bad}");
            assert_eq!(Networks::parse(["10.0.0.0/8", bad]), Err(bad));
        }
        // A plain IPv6 range around the mapped block stays IPv6: it lists no IPv4 client.
        let v6 = nets(&["::/0"]);
        assert!(v6.v4.is_empty());
        assert!(v6.contains(ip("2001:db8::1")) && v6.contains(ip("::127.0.0.1")));
        assert!(!v6.contains(ip("127.0.0.1")) && !v6.contains(ip("::ffff:127.0.0.1")));
    }

    #[test]
    fn mapped_and_ordinary_entries_list_together() {
        let n = nets(&[
            "10.0.0.0/8",
            "::ffff:10.1.0.0/112", // inside the /8: merged
            "::ffff:11.0.0.0/104", // adjacent to the /8: merged
            "198.51.100.7",
            "2001:db8::/32",
        ]);
        assert_eq!(n.v4.len(), 2, "{:?}", n.v4);
        assert_eq!(n.v6.len(), 1, "{:?}", n.v6);
        for inside in ["10.1.2.3", "11.255.0.1", "198.51.100.7", "2001:db8::1"] {
            assert!(n.contains(ip(inside)), "{inside}");
        }
        for outside in ["12.0.0.0", "198.51.100.8", "2001:db9::"] {
            assert!(!n.contains(ip(outside)), "{outside}");
        }
    }

    #[test]
    fn adjacent_and_overlapping_ranges_merge() {
        assert_eq!(
            merged(vec![(5, 9), (0, 4), (20, 30), (25, 26)]),
            [(0, 9), (20, 30)]
        );
        assert_eq!(merged(vec![(0, u128::MAX), (7, 8)]), [(0, u128::MAX)]);
        assert_eq!(merged(vec![(0, 3), (5, 6)]), [(0, 3), (5, 6)]);
    }

    /// The signals a visitor shows, as its methods tell them.
    #[derive(Debug, Default, PartialEq)]
    struct Signals {
        listed_network: bool,
        no_user_agent: bool,
        no_accept_language: bool,
        unusual_header_order: bool,
    }

    fn visitor_risk(headers: &[(&str, &str)], listed: bool) -> (Signals, Risk) {
        let mut req = Request::get("/");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(()).unwrap();
        let v = NewVisitor::new(RequestInfo::new(&req), None, listed);
        let signals = Signals {
            listed_network: v.in_listed_network(),
            no_user_agent: v.no_user_agent(),
            no_accept_language: v.no_accept_language(),
            unusual_header_order: v.unusual_header_order(),
        };
        (signals, v.default_risk())
    }

    /// The headers of a navigation of Chromium 156 over HTTP/1.1, in their order.
    const CHROMIUM: &[(&str, &str)] = &[
        ("host", "shop.example"),
        ("connection", "keep-alive"),
        ("upgrade-insecure-requests", "1"),
        (
            "user-agent",
            "Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0.0.0 Safari/537.36",
        ),
        ("accept", "text/html,*/*;q=0.8"),
        ("sec-fetch-mode", "navigate"),
        ("accept-encoding", "gzip, deflate, br, zstd"),
        ("accept-language", "en-US,en;q=0.9"),
    ];

    /// Safari's order: `Accept-Language` before `User-Agent`, still `Host` first and `Accept`
    /// before `Accept-Encoding`.
    const SAFARI: &[(&str, &str)] = &[
        ("host", "shop.example"),
        ("accept", "text/html,*/*;q=0.8"),
        ("sec-fetch-site", "none"),
        ("accept-language", "en-GB,en;q=0.9"),
        (
            "user-agent",
            "Mozilla/5.0 (Macintosh) Version/17.4 Safari/605.1.15",
        ),
        ("accept-encoding", "gzip, deflate, br"),
        ("connection", "keep-alive"),
    ];

    #[test]
    fn browsers_are_low_risk() {
        for browser in [CHROMIUM, SAFARI] {
            assert_eq!(
                visitor_risk(browser, false),
                (Signals::default(), Risk::Low)
            );
        }
        // Over HTTP/2 there is no `Host` header at all.
        assert_eq!(visitor_risk(&CHROMIUM[1..], false).1, Risk::Low);
    }

    #[test]
    fn each_signal_makes_a_visitor_medium_and_a_listed_network_high() {
        let without = |name: &str| -> Vec<(&str, &str)> {
            CHROMIUM
                .iter()
                .copied()
                .filter(|(n, _)| *n != name)
                .collect()
        };
        let (s, r) = visitor_risk(&without("user-agent"), false);
        assert!(s.no_user_agent && !s.no_accept_language && !s.unusual_header_order);
        assert_eq!(r, Risk::Medium);
        let (s, r) = visitor_risk(&without("accept-language"), false);
        assert!(s.no_accept_language && !s.no_user_agent && !s.unusual_header_order);
        assert_eq!(r, Risk::Medium);
        // curl: no Accept-Language.
        let curl = [
            ("host", "shop.example"),
            ("user-agent", "curl/8.5.0"),
            ("accept", "*/*"),
        ];
        assert_eq!(visitor_risk(&curl, false).1, Risk::Medium);
        // Python's requests: Accept-Encoding before Accept.
        let requests = [
            ("host", "shop.example"),
            ("user-agent", "python-requests/2.31.0"),
            ("accept-encoding", "gzip, deflate"),
            ("accept", "*/*"),
            ("accept-language", "en"),
        ];
        let (s, r) = visitor_risk(&requests, false);
        assert!(s.unusual_header_order, "{s:?}");
        assert_eq!(r, Risk::Medium);
        // Python's urllib: Host second.
        let urllib = [
            ("accept-encoding", "identity"),
            ("host", "shop.example"),
            ("user-agent", "Python-urllib/3.11"),
            ("accept-language", "en"),
        ];
        assert!(visitor_risk(&urllib, false).0.unusual_header_order);
        // A browser from a listed network: high, whatever its headers.
        let (s, r) = visitor_risk(CHROMIUM, true);
        assert!(s.listed_network);
        assert_eq!(r, Risk::High);
    }

    #[test]
    fn the_hook_decides_when_given_and_sees_the_listing() {
        let req = Request::get("/").body(()).unwrap();
        let listed = nets(&["192.0.2.0/24"]);
        let default = RiskGate::new(None, listed.clone());
        let from = |s: &str| Some(ip(s));
        assert_eq!(
            default.decide(RequestInfo::new(&req), from("192.0.2.1")),
            (Risk::High, DecidedBy::Default)
        );
        assert_eq!(
            default.decide(RequestInfo::new(&req), from("198.51.100.1")),
            (Risk::Medium, DecidedBy::Default)
        );
        assert_eq!(
            default.decide(RequestInfo::new(&req), None),
            (Risk::Medium, DecidedBy::Default)
        );
        let hook = RiskGate::new(
            Some(Box::new(|v: &NewVisitor<'_>| {
                if v.in_listed_network() {
                    Risk::Medium
                } else {
                    Risk::Low
                }
            })),
            listed,
        );
        assert_eq!(
            hook.decide(RequestInfo::new(&req), from("192.0.2.1")),
            (Risk::Medium, DecidedBy::Hook)
        );
        assert_eq!(
            hook.decide(RequestInfo::new(&req), from("198.51.100.1")),
            (Risk::Low, DecidedBy::Hook)
        );
    }
}
