//! [`Rule`]: which requests go to a room, or are gated by one.

use std::fmt;
use std::sync::Arc;

use http::{header, Method, Request};

use super::loose_path::{loose, trimmed};
use crate::client::RequestInfo;

/// A predicate over a request, for what the structured parts of a rule cannot say.
type Predicate = dyn Fn(&RequestInfo<'_>) -> bool + Send + Sync;

/// Which requests a room takes (or a gate covers): a path, a host, methods, or a predicate, and
/// any combination of them (a request matches when every part given matches).
///
/// | part | made with | matches |
/// |---|---|---|
/// | path prefix | [`path_prefix`](Self::path_prefix), [`with_path_prefix`](Self::with_path_prefix) | the path and everything under it, by segments: `/vip` matches `/vip` and `/vip/x`, not `/vipers`; `/` matches every path |
/// | path | [`path`](Self::path), [`get`](Self::get), [`post`](Self::post), [`with_path`](Self::with_path) | exactly that path; a pattern ending in `*` matches every path that starts with what is before the `*` (`/api/orders/*` matches `/api/orders/7`, not `/api/orders`) |
/// | host | [`host`](Self::host), [`with_host`](Self::with_host) | the request's host (`Host` header, or the URI's authority), case-insensitive, port ignored |
/// | methods | [`method`](Self::method), [`methods`](Self::methods), [`with_methods`](Self::with_methods) | any of them |
/// | predicate | [`when`](Self::when), [`and_when`](Self::and_when) | whatever the closure says |
///
/// As a **gate** ([`WaitingRoomsBuilder::gate`](crate::routing::WaitingRoomsBuilder::gate),
/// [`WaitingRoomBuilder::gate`](crate::WaitingRoomBuilder::gate)) a rule matches more: its path
/// and the request's are also compared as the most lenient app reads them (percent-escapes
/// decoded, `;` parameters, repeated and trailing slashes, trailing dots and dot segments
/// dropped, case ignored), so that `/Checkout/`, `/checkout;x`, `//checkout` and `/%63heckout`
/// are all behind a gate on `/checkout`: an app that serves one of them as that route (Express
/// ignores case and a trailing slash by default, Java servers drop `;` parameters) would
/// otherwise serve it to anyone. A room's own rules and bypass rules match the path as it
/// comes.
///
/// [`WaitingRoomsBuilder::build`](crate::routing::WaitingRoomsBuilder::build) refuses two rules of
/// different rooms (or two gates to different rooms) that can match the same request, so the
/// order rules are given in never decides which room a request goes to. That check knows the
/// structured parts only: rules with a predicate are not checked, and are tried after every
/// rule without one, in the order given.
///
/// ```
/// use http::Method;
/// use tower_waiting_room::routing::Rule;
///
/// let vip = Rule::path_prefix("/vip");
/// let orders = Rule::path("/api/orders/*").with_methods([Method::POST, Method::PUT]);
/// let checkout = Rule::post("/checkout");
/// let launch = Rule::host("launch.example.com").with_path_prefix("/shop");
/// let beta = Rule::when(|req| req.headers().contains_key("x-beta"));
/// # let _ = (vip, orders, checkout, launch, beta);
/// ```
#[derive(Clone)]
pub struct Rule {
    host: Option<String>,
    path: PathMatch,
    methods: Option<Vec<Method>>,
    predicate: Option<Arc<Predicate>>,
}

/// The path part of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PathMatch {
    /// Any path.
    Any,
    /// The path or anything under it, by segments. Kept without a trailing `/`, so the root
    /// (`/`) is the empty string, under which every path is.
    Prefix(String),
    /// Exactly this path.
    Exact(String),
    /// Every path that starts with this text (a pattern that ended in `*`).
    Starts(String),
    /// A path prefix that names no path (empty, or not starting with `/`), as given: refused
    /// by the builder.
    Malformed(String),
}

impl Rule {
    /// Every request (on its own, the same as a default room; a start for combinations).
    pub fn any() -> Self {
        Self {
            host: None,
            path: PathMatch::Any,
            methods: None,
            predicate: None,
        }
    }

    /// The path `prefix` and everything under it, by segments: `/vip` matches `/vip`,
    /// `/vip/` and `/vip/x`, not `/vipers`.
    pub fn path_prefix(prefix: impl Into<String>) -> Self {
        Self::any().with_path_prefix(prefix)
    }

    /// Exactly the path `pattern`, or, when it ends in `*`, every path that starts with what
    /// is before the `*` (`/api/orders/*` matches `/api/orders/7` and `/api/orders/`, not
    /// `/api/orders`).
    pub fn path(pattern: impl Into<String>) -> Self {
        Self::any().with_path(pattern)
    }

    /// `GET` (and `HEAD`) requests to the path `pattern` (as in [`path`](Self::path)).
    pub fn get(pattern: impl Into<String>) -> Self {
        Self::path(pattern).with_methods([Method::GET, Method::HEAD])
    }

    /// `POST` requests to the path `pattern` (as in [`path`](Self::path)).
    pub fn post(pattern: impl Into<String>) -> Self {
        Self::path(pattern).with_methods([Method::POST])
    }

    /// Requests for `host` (case-insensitive, port ignored).
    pub fn host(host: impl Into<String>) -> Self {
        Self::any().with_host(host)
    }

    /// Requests with this method.
    pub fn method(method: Method) -> Self {
        Self::any().with_methods([method])
    }

    /// Requests with any of these methods.
    pub fn methods(methods: impl IntoIterator<Item = Method>) -> Self {
        Self::any().with_methods(methods)
    }

    /// Requests for which `predicate` returns `true`. Not checked for overlaps: rules with a
    /// predicate are tried after all the others, in the order given. Keep it cheap: it runs on
    /// every request that no other rule took.
    pub fn when<F>(predicate: F) -> Self
    where
        F: Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static,
    {
        Self::any().and_when(predicate)
    }

    /// The same rule, only for `host` (replacing any host it had).
    pub fn with_host(mut self, host: impl Into<String>) -> Self {
        let raw = host.into();
        // Anything but a host and a port is kept as given, for the builder to refuse.
        let host = if has_plain_port(&raw) {
            normalize_host(&raw)
        } else {
            raw.trim()
        };
        self.host = Some(host.to_ascii_lowercase());
        self
    }

    /// The same rule, only under the path `prefix` (replacing any path it had).
    pub fn with_path_prefix(mut self, prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        self.path = if prefix.starts_with('/') {
            PathMatch::Prefix(prefix.trim_end_matches('/').to_owned())
        } else {
            PathMatch::Malformed(prefix)
        };
        self
    }

    /// The same rule, only for the path `pattern` (as in [`path`](Self::path); replacing any
    /// path it had).
    pub fn with_path(mut self, pattern: impl Into<String>) -> Self {
        let pattern = pattern.into();
        self.path = match pattern.strip_suffix('*') {
            Some(start) => PathMatch::Starts(start.to_owned()),
            None => PathMatch::Exact(pattern),
        };
        self
    }

    /// The same rule, only for these methods (replacing any it had).
    pub fn with_methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.methods = Some(methods.into_iter().collect());
        self
    }

    /// The same rule, and only when `predicate` returns `true` too (replacing any predicate it
    /// had). A rule with a predicate is not checked for overlaps; see [`when`](Self::when).
    pub fn and_when<F>(mut self, predicate: F) -> Self
    where
        F: Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static,
    {
        self.predicate = Some(Arc::new(predicate));
        self
    }

    /// Whether the rule is well formed: paths start with `/` and hold no `*` but a trailing
    /// one, the host is a plain name or address, at least one method. Checked by the builder.
    pub(crate) fn is_valid(&self) -> bool {
        let path_ok = match &self.path {
            PathMatch::Any => true,
            PathMatch::Prefix(p) => p.is_empty() || valid_path(p),
            PathMatch::Exact(p) | PathMatch::Starts(p) => valid_path(p),
            PathMatch::Malformed(_) => false,
        };
        let host_ok = self.host.as_deref().is_none_or(valid_host);
        let methods_ok = self.methods.as_ref().is_none_or(|m| !m.is_empty());
        path_ok && host_ok && methods_ok
    }

    /// Whether the rule has a predicate (and so is not checked for overlaps).
    pub(crate) fn has_predicate(&self) -> bool {
        self.predicate.is_some()
    }

    /// Whether `req` matches every part of the rule.
    pub(crate) fn matches<B>(&self, req: &Request<B>) -> bool {
        self.matches_by(req, PathMatch::matches, |m| m.contains(req.method()))
    }

    /// Whether `req` matches every part of the rule as a gate: its path compared as the most
    /// lenient app reads it (`loose_path.rs`: `/Checkout/`, `/checkout;x`, `//checkout` and
    /// `/%63heckout` are `/checkout`), so that no spelling an app serves as a gated route gets
    /// past the gate; and its method as an app may take it too: a `GET` gate holds for `HEAD`
    /// (servers answer it with the `GET` handler), and `overridden`, the method an override
    /// header names ([`override_method`]), counts as the request's.
    pub(crate) fn matches_gate<B>(&self, req: &Request<B>, overridden: Option<&Method>) -> bool {
        self.matches_by(req, PathMatch::matches_loosely, |m| {
            m.contains(req.method())
                || (*req.method() == Method::HEAD && m.contains(&Method::GET))
                || overridden.is_some_and(|o| m.contains(o))
        })
    }

    /// Whether `req` matches the rule as a gate by the method its override header names: the
    /// method an app that honours the header acts on, whose gate comes before any other.
    pub(crate) fn matches_overridden<B>(&self, req: &Request<B>, overridden: &Method) -> bool {
        self.methods.is_some()
            && self.matches_by(req, PathMatch::matches_loosely, |m| m.contains(overridden))
    }

    /// Whether `req` matches every part of the rule, its path by `path_matches` and its methods
    /// (if the rule names some) by `methods_match`.
    fn matches_by<B>(
        &self,
        req: &Request<B>,
        path_matches: fn(&PathMatch, &str) -> bool,
        methods_match: impl Fn(&[Method]) -> bool,
    ) -> bool {
        if let Some(methods) = &self.methods {
            if !methods_match(methods) {
                return false;
            }
        }
        if !path_matches(&self.path, req.uri().path()) {
            return false;
        }
        if let Some(host) = &self.host {
            if !request_host(req).is_some_and(|h| h.eq_ignore_ascii_case(host)) {
                return false;
            }
        }
        self.predicate
            .as_ref()
            .is_none_or(|p| p(&RequestInfo::new(req)))
    }

    /// Whether some request can match both rules, by their structured parts (predicates are
    /// not looked at: the caller skips rules that have one).
    pub(crate) fn may_overlap(&self, other: &Rule) -> bool {
        let hosts = match (&self.host, &other.host) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        let methods = match (&self.methods, &other.methods) {
            (Some(a), Some(b)) => a.iter().any(|m| b.contains(m)),
            _ => true,
        };
        hosts && methods && self.path.may_overlap(&other.path)
    }
}

/// The method a request's override header names (`X-HTTP-Method-Override`, `X-HTTP-Method`,
/// `X-Method-Override`, which frameworks honour: a `POST` with `DELETE` in one is a `DELETE` to
/// them), if it names one. Read once per request by the gates.
pub(crate) fn override_method<B>(req: &Request<B>) -> Option<Method> {
    [
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
    ]
    .iter()
    .find_map(|name| req.headers().get(*name))
    .and_then(|v| v.to_str().ok())
    .and_then(|v| Method::from_bytes(v.trim().to_ascii_uppercase().as_bytes()).ok())
}

impl PathMatch {
    fn matches(&self, path: &str) -> bool {
        match self {
            PathMatch::Any => true,
            PathMatch::Prefix(p) => under(path, p),
            PathMatch::Exact(p) => path == p,
            PathMatch::Starts(p) => path.starts_with(p.as_str()),
            PathMatch::Malformed(_) => false,
        }
    }

    /// [`matches`](Self::matches), or the same with `path` and the rule's own read as the most
    /// lenient app reads them (`loose_path.rs`).
    fn matches_loosely(&self, path: &str) -> bool {
        if self.matches(path) {
            return true;
        }
        let path = loose(path);
        match self {
            PathMatch::Any => true,
            PathMatch::Prefix(p) => p.is_empty() || under(&path, &loose(trimmed(p))),
            PathMatch::Exact(p) => *path == *loose(trimmed(p)),
            // `/api/orders/*`: what lies under `/api/orders` (not that path itself, which the
            // pattern leaves out); `/api/ord*`: what starts with `/api/ord`.
            PathMatch::Starts(p) => {
                let prefix = loose(trimmed(p));
                if !p.ends_with('/') {
                    // The pattern's own last characters as written (`/files/report.*` must not
                    // become `/files/report`, over `/files/reports`), case aside.
                    let tail = p.rsplit('/').next().unwrap_or_default();
                    let head = loose(trimmed(&p[..p.len() - tail.len()]));
                    let head = head.trim_end_matches('/');
                    path.strip_prefix(head)
                        .and_then(|rest| rest.strip_prefix('/'))
                        .and_then(|rest| rest.get(..tail.len()))
                        .is_some_and(|t| t.eq_ignore_ascii_case(tail))
                } else if prefix == "/" {
                    true
                } else {
                    path.strip_prefix(&*prefix)
                        .is_some_and(|rest| rest.starts_with('/'))
                }
            }
            PathMatch::Malformed(_) => false,
        }
    }

    /// Whether some path matches both.
    fn may_overlap(&self, other: &PathMatch) -> bool {
        use PathMatch::*;
        match (self, other) {
            (Malformed(_), _) | (_, Malformed(_)) => false,
            (Any, _) | (_, Any) => true,
            (Exact(a), b) | (b, Exact(a)) => b.matches(a),
            (Prefix(a), Prefix(b)) => under(a, b) || under(b, a),
            // Every path that starts with `s` and is under `p`: `s` itself is under `p`, or
            // `s` is short enough that `p` (which matches itself) starts with it.
            (Prefix(p), Starts(s)) | (Starts(s), Prefix(p)) => {
                under(s, p) || p.starts_with(s.as_str()) || (p.is_empty() && s.starts_with('/'))
            }
            (Starts(a), Starts(b)) => a.starts_with(b.as_str()) || b.starts_with(a.as_str()),
        }
    }
}

/// Whether `path` is `prefix` or under it, by segments (`prefix` without a trailing `/`; the
/// empty prefix is the root, under which every path is).
fn under(path: &str, prefix: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// A path a rule can name: starts with `/`, no whitespace or controls, no `*` (a trailing one
/// was taken off already), no `?` or `#`: a request's path holds neither (the query is not
/// part of it), so a rule naming one would never match, and a gate written so would leave its
/// route open to everyone.
fn valid_path(path: &str) -> bool {
    path.starts_with('/')
        && path
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"*?#".contains(&b))
}

/// Whether `raw` is `host`, `host:port`, `[v6]` or `[v6]:port`, a port being digits: what
/// [`normalize_host`] takes the port off. `https://shop.example` is not (read so, it would be
/// the host `https`, and the rule would cover nothing anyone asks for).
fn has_plain_port(raw: &str) -> bool {
    let raw = raw.trim();
    let port_ok = |port: &str| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    if raw.starts_with('[') {
        raw.find(']').is_some_and(|end| {
            let rest = &raw[end + 1..];
            rest.is_empty() || rest.strip_prefix(':').is_some_and(port_ok)
        })
    } else {
        raw.split_once(':').is_none_or(|(_, port)| port_ok(port))
    }
}

/// A host a rule can name (without its port): a name of letters, digits, `-`, `.`, `_`, or an
/// IPv6 address in brackets.
fn valid_host(host: &str) -> bool {
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => {
            !v6.is_empty()
                && v6
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b".:".contains(&b))
        }
        None => {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        }
    }
}

/// The request's host: the `Host` header, or (HTTP/2) the URI's authority; without its port.
fn request_host<B>(req: &Request<B>) -> Option<&str> {
    let raw = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))?;
    Some(normalize_host(raw))
}

/// `host[:port]` or `[v6][:port]` without the port, and without a trailing dot.
fn normalize_host(raw: &str) -> &str {
    let raw = raw.trim();
    let host = if raw.starts_with('[') {
        raw.find(']').map_or(raw, |end| &raw[..=end])
    } else {
        raw.rsplit_once(':').map_or(raw, |(host, _)| host)
    };
    host.strip_suffix('.').unwrap_or(host)
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Rule {
    /// The rule in words, for errors and `Debug`.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(host) = &self.host {
            parts.push(format!("host {host}"));
        }
        match &self.path {
            PathMatch::Any => {}
            PathMatch::Prefix(p) if p.is_empty() => parts.push("path prefix /".to_owned()),
            PathMatch::Prefix(p) => parts.push(format!("path prefix {p}")),
            PathMatch::Exact(p) => parts.push(format!("path {p}")),
            PathMatch::Starts(p) => parts.push(format!("path {p}*")),
            PathMatch::Malformed(p) => parts.push(format!("path prefix {p:?}")),
        }
        if let Some(methods) = &self.methods {
            let names: Vec<&str> = methods.iter().map(Method::as_str).collect();
            parts.push(format!("methods {}", names.join("|")));
        }
        if self.predicate.is_some() {
            parts.push("a predicate".to_owned());
        }
        if parts.is_empty() {
            "any request".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method, host: &str, path: &str) -> Request<()> {
        Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, host)
            .body(())
            .unwrap()
    }

    fn get(path: &str) -> Request<()> {
        req(Method::GET, "shop.example", path)
    }

    #[test]
    fn a_gate_matches_every_spelling_of_its_path_and_nothing_beside_it() {
        let orders = Rule::path("/api/orders/*");
        for yes in [
            "/api/orders/7",
            "/API/Orders/7",
            "/api/orders;x/7",
            "/api//orders/7/",
        ] {
            assert!(orders.matches_gate(&get(yes), None), "{yes}");
        }
        // (`/api/orders/` starts with the pattern as written, and matches.)
        for no in ["/api/orders", "/api/ordersx/7", "/api/order/7", "/"] {
            assert!(!orders.matches_gate(&get(no), None), "{no}");
        }
        let ord = Rule::path("/api/ord*");
        assert!(ord.matches_gate(&get("/API/ORDERS"), None));
        assert!(!ord.matches_gate(&get("/api/or"), None));
        let shop = Rule::path_prefix("/shop");
        for yes in ["/Shop", "/shop/", "//shop/x", "/%73hop/x", "/x/../shop"] {
            assert!(shop.matches_gate(&get(yes), None), "{yes}");
            assert!(
                !Rule::path_prefix("/other").matches_gate(&get(yes), None),
                "{yes}"
            );
        }
        assert!(!shop.matches_gate(&get("/shopping"), None));
        assert!(Rule::path_prefix("/").matches_gate(&get("/Anything;x"), None));
        let checkout = Rule::post("/Checkout");
        assert!(checkout.matches_gate(&req(Method::POST, "shop.example", "/checkout/"), None));
        assert!(!checkout.matches_gate(&req(Method::GET, "shop.example", "/checkout"), None));
        // The method as an app may take it: HEAD for GET, an override header's.
        let orders = Rule::path("/orders").with_methods([Method::GET]);
        assert!(orders.matches_gate(&req(Method::HEAD, "shop.example", "/orders"), None));
        assert!(!orders.matches(&req(Method::HEAD, "shop.example", "/orders")));
        let delete = Rule::path("/api/orders/*").with_methods([Method::DELETE]);
        for header in [
            "x-http-method-override",
            "X-HTTP-Method",
            "x-method-override",
        ] {
            let mut r = req(Method::POST, "shop.example", "/api/orders/7");
            r.headers_mut().insert(header, " delete".parse().unwrap());
            assert!(
                delete.matches_gate(&r, override_method(&r).as_ref()),
                "{header}"
            );
            assert!(delete.matches_overridden(&r, &Method::DELETE), "{header}");
            assert!(!delete.matches(&r), "{header}");
        }
        assert!(!delete.matches_gate(&req(Method::POST, "shop.example", "/api/orders/7"), None));
        // A pattern's own tail is not read loosely: `report.*` is not `report*`.
        let report = Rule::path("/files/report.*");
        assert!(report.matches_gate(&get("/Files/REPORT.pdf"), None));
        assert!(report.matches_gate(&get("//files/report.pdf"), None));
        assert!(!report.matches_gate(&get("/files/reports"), None));
        assert!(!report.matches_gate(&get("/files/report-summary"), None));
        // A room's own rules (and bypass rules) match the path as it comes.
        assert!(!shop.matches(&get("/Shop")));
    }

    #[test]
    fn prefixes_match_by_segments() {
        let vip = Rule::path_prefix("/vip");
        for yes in ["/vip", "/vip/", "/vip/x", "/vip/x/y"] {
            assert!(vip.matches(&get(yes)), "{yes}");
        }
        for no in ["/vipers", "/", "/vi", "/x/vip"] {
            assert!(!vip.matches(&get(no)), "{no}");
        }
        assert!(Rule::path_prefix("/vip/").matches(&get("/vip")));
        let root = Rule::path_prefix("/");
        assert!(root.matches(&get("/")) && root.matches(&get("/anything")));
    }

    #[test]
    fn paths_are_exact_or_trailing_star_patterns() {
        let exact = Rule::path("/checkout");
        assert!(exact.matches(&get("/checkout")));
        assert!(!exact.matches(&get("/checkout/x")) && !exact.matches(&get("/checkouts")));
        let orders = Rule::path("/api/orders/*");
        assert!(orders.matches(&get("/api/orders/7")) && orders.matches(&get("/api/orders/")));
        assert!(!orders.matches(&get("/api/orders")));
    }

    #[test]
    fn hosts_ignore_case_and_port_and_methods_must_be_listed() {
        let rule = Rule::host("Shop.Example").with_methods([Method::POST]);
        assert!(rule.matches(&req(Method::POST, "shop.example:8080", "/")));
        assert!(rule.matches(&req(Method::POST, "SHOP.EXAMPLE.", "/x")));
        assert!(!rule.matches(&req(Method::GET, "shop.example", "/")));
        assert!(!rule.matches(&req(Method::POST, "other.example", "/")));
        let v6 = Rule::host("[::1]");
        assert!(v6.matches(&req(Method::GET, "[::1]:3000", "/")));
        let no_host = Request::builder().uri("/").body(()).unwrap();
        assert!(!Rule::host("shop.example").matches(&no_host));
        // HTTP/2: the authority.
        let h2 = Request::builder()
            .uri("https://shop.example:443/x")
            .body(())
            .unwrap();
        assert!(Rule::host("shop.example").matches(&h2));
    }

    #[test]
    fn predicates_combine_with_the_rest() {
        let rule = Rule::path_prefix("/beta").and_when(|r| r.headers().contains_key("x-beta"));
        let mut yes = get("/beta/x");
        yes.headers_mut()
            .insert("x-beta", http::HeaderValue::from_static("1"));
        assert!(rule.matches(&yes));
        assert!(!rule.matches(&get("/beta/x")));
    }

    #[test]
    fn overlaps() {
        let overlapping = [
            (Rule::path_prefix("/vip"), Rule::path_prefix("/vip/gold")),
            (Rule::path_prefix("/"), Rule::path("/x")),
            (Rule::path_prefix("/vip"), Rule::path("/vip")),
            (Rule::path_prefix("/vip"), Rule::path("/vi*")),
            (Rule::path_prefix("/vip"), Rule::path("/vip/a*")),
            (Rule::path("/a/*"), Rule::path("/a/b*")),
            (Rule::any(), Rule::host("x.example")),
            (Rule::post("/x"), Rule::path("/x")),
            (Rule::host("a.example"), Rule::host("A.example:80")),
        ];
        for (a, b) in &overlapping {
            assert!(a.may_overlap(b) && b.may_overlap(a), "{a:?} / {b:?}");
        }
        let disjoint = [
            (Rule::path_prefix("/vip"), Rule::path_prefix("/vipers")),
            (Rule::path_prefix("/vip"), Rule::path("/vipx*")),
            (Rule::path_prefix("/vip"), Rule::path("/v")),
            (Rule::path("/a/*"), Rule::path("/b/*")),
            (Rule::post("/x"), Rule::get("/x")),
            (Rule::host("a.example"), Rule::host("b.example")),
        ];
        for (a, b) in &disjoint {
            assert!(!a.may_overlap(b) && !b.may_overlap(a), "{a:?} / {b:?}");
        }
    }

    #[test]
    fn bad_rules_are_invalid() {
        for bad in [
            Rule::path_prefix(""),
            Rule::path_prefix("vip"),
            Rule::path("vip"),
            Rule::path("/a*b*"),
            Rule::path("/a b"),
            Rule::host(""),
            Rule::host("a/b"),
            Rule::methods([]),
            // Never in a request's path: a gate so written would never hold.
            Rule::path("/checkout?x=1"),
            Rule::path("/pay#now"),
            Rule::path_prefix("/shop?x"),
            Rule::path("/api?x/*"),
            // A URL, or an IPv6 address out of brackets, is no host.
            Rule::host("https://launch.example"),
            Rule::host("launch.example/shop"),
            Rule::host("user@launch.example"),
            Rule::host("::1"),
            Rule::host("launch.example:http"),
            Rule::host("[::1"),
            Rule::host("[]"),
        ] {
            assert!(!bad.is_valid(), "{bad:?}");
        }
        assert!(Rule::path_prefix("/").is_valid() && Rule::path("/*").is_valid());
        for good in [
            "launch.example",
            "Launch.Example:8443",
            "[::1]",
            "[::1]:8080",
            "10.0.0.1:80",
        ] {
            assert!(Rule::host(good).is_valid(), "{good}");
        }
        assert_eq!(
            Rule::host("Launch.Example:8443").describe(),
            "host launch.example"
        );
    }
}
