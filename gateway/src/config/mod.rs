//! The gateway's one TOML file: read, checked, and turned into a [`Config`], with every error
//! naming the line it is about.
//!
//! The rooms' settings are the crate's own room file ([`RoomFile`]): every key a room's file
//! takes, with the same names, readable durations and refusals, in a `[[rooms]]` table, with
//! the routes the room covers beside them. `examples/gateway.toml` is annotated key by key;
//! `docs/gateway.md` has the reference.

mod error;
mod file;
mod redis;
mod rooms;

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use toml::Spanned;
use tower_waiting_room::__private::shown_variable;
use tower_waiting_room::config::RoomFile;

pub use error::FileError;
use error::Lines;
use file::GatewayFile;
pub use redis::{RedisNodes, RedisSettings};

/// The checked configuration of a gateway.
#[derive(Debug)]
pub struct Config {
    /// The file it was read from.
    pub path: PathBuf,
    /// Where visitors connect.
    pub listen: SocketAddr,
    /// Serving threads, each with a runtime of its own (see `workers.rs`).
    pub workers: NonZeroUsize,
    /// The app's addresses (requests take turns among them).
    pub upstreams: Vec<Upstream>,
    /// The Redis or Valkey every gateway of a fleet shares (from `redis`, `redis_cluster` or
    /// the variable their `*_env` names, with `redis_prefix` and `redis_timeout`); `None`: the
    /// embedded store.
    pub redis: Option<RedisSettings>,
    /// Proxies in front of the gateway whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<IpNet>,
    /// The gateway's own paths.
    pub paths: Paths,
    /// The admin's bearer token, when the admin is on.
    pub admin_token: Option<BearerToken>,
    /// The metrics' bearer token (`[metrics]`); `None`: the metrics need none.
    pub metrics_token: Option<BearerToken>,
    /// Serving limits.
    pub limits: Limits,
    /// The rooms, in the file's order.
    pub rooms: Vec<RoomPlan>,
}

/// More serving threads than any machine this runs on has cores: a typo, not a plan.
const MAX_WORKERS: usize = 1024;

/// One upstream: `http://host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// `http`.
    pub scheme: http::uri::Scheme,
    /// `host:port`.
    pub authority: http::uri::Authority,
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.scheme, self.authority)
    }
}

impl Upstream {
    /// Reads an upstream URL: `http://host:port`, nothing after the authority but an optional
    /// `/`.
    pub fn parse(url: &str) -> Result<Self, String> {
        // A password in the URL (refused below) is never repeated in an error.
        let shown = shown_url(url);
        let uri: http::Uri = url.parse().map_err(|e| {
            format!("`{shown}` is not a URL ({e}); write e.g. http://127.0.0.1:8000")
        })?;
        let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
            return Err(format!(
                "`{shown}` is not an absolute URL; write e.g. http://127.0.0.1:8000"
            ));
        };
        if scheme == &http::uri::Scheme::HTTPS {
            return Err(format!(
                "`{shown}`: https upstreams are not supported; reach the app over http on a \
                 private network or loopback"
            ));
        }
        if scheme != &http::uri::Scheme::HTTP {
            return Err(format!("`{shown}`: the scheme must be http"));
        }
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() || url.contains('#') {
            return Err(format!(
                "`{shown}`: an upstream is a scheme and an address only; requests keep their own path"
            ));
        }
        if authority.as_str().contains('@') {
            return Err(format!(
                "`{shown}`: credentials in an upstream URL are not supported"
            ));
        }
        // A port the URL names must be one a connection can use (1 to 65535), and a host there.
        let after_host = authority.as_str().rsplit(']').next().unwrap_or_default();
        let port_ok = after_host
            .split_once(':')
            .is_none_or(|(_, port)| port.parse::<u16>().is_ok_and(|p| p != 0));
        if authority.host().is_empty() || !port_ok {
            return Err(format!(
                "`{shown}`: not a host and a port from 1 to 65535; write e.g. http://127.0.0.1:8000"
            ));
        }
        Ok(Self {
            scheme: scheme.clone(),
            authority: authority.clone(),
        })
    }
}

/// `url` as an error may show it: a user and password before the host (`http://u:pw@host`)
/// replaced by `***`.
fn shown_url(url: &str) -> std::borrow::Cow<'_, str> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.into();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://***@{host}{}", &rest[end..]).into(),
        None => url.into(),
    }
}

/// The gateway's own paths: answered by the gateway, never proxied, never queued.
#[derive(Clone, Debug)]
pub struct Paths {
    /// The health check for load balancers.
    pub health: String,
    /// Prometheus' text format; `None`: off.
    pub metrics: Option<String>,
    /// The admin API and dashboard (when a token is configured).
    pub admin: String,
}

/// A bearer token (the admin's, the metrics'); its `Debug` shows only its length.
#[derive(Clone)]
pub struct BearerToken(pub(crate) Vec<u8>);

impl BearerToken {
    /// Whether `header` (an `Authorization` value) is `Bearer <this token>`, compared in time
    /// that does not depend on where they differ.
    pub(crate) fn admits(&self, header: Option<&http::HeaderValue>) -> bool {
        let given = header
            .map(http::HeaderValue::as_bytes)
            .and_then(|v| v.strip_prefix(b"Bearer "))
            .unwrap_or_default();
        let differ = self
            .0
            .iter()
            .zip(given)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(differ) == 0 && given.len() == self.0.len()
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes, redacted>", self.0.len())
    }
}

/// What clients and the app may hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The serving loop's limits (header read, request timeout, connections, grace, head size).
    pub serve: tower_waiting_room::serve::Limits,
    /// Time the app has to answer a request's head before the visitor gets `504`.
    pub upstream_timeout: Duration,
    /// Time to open a connection to the app before the visitor gets `502`.
    pub connect_timeout: Duration,
    /// Longest a request body may go without sending anything.
    pub body_timeout: Duration,
    /// Largest request body passed to the app (`413` beyond).
    pub max_body_bytes: u64,
    /// How long the health check says "draining" before the gateway stops accepting.
    pub shutdown_delay: Duration,
    /// Idle keep-alive connections kept to each upstream.
    pub upstream_idle_connections: usize,
    /// How long an idle keep-alive connection to the app is kept: shorter than the app's own
    /// keep-alive timeout, or the app may close one just as a request is sent on it.
    pub upstream_idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            serve: tower_waiting_room::serve::Limits::new()
                .request_timeout(Duration::from_secs(60)),
            upstream_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(30),
            max_body_bytes: 10 * 1024 * 1024,
            shutdown_delay: Duration::ZERO,
            upstream_idle_connections: 256,
            upstream_idle_timeout: Duration::from_secs(60),
        }
    }
}

/// One room and the routes it covers.
#[derive(Debug)]
pub struct RoomPlan {
    /// The line of its `[[rooms]]` table, for errors found when it is built.
    pub line: usize,
    /// Its settings, as the crate reads a room's file.
    pub settings: RoomFile,
    /// Path prefixes it covers; with no hosts either, it is the default room (every path no
    /// other room covers).
    pub paths: Vec<String>,
    /// Hosts it covers.
    pub hosts: Vec<String>,
    /// Routes it gates: `(methods, path pattern)`.
    pub gates: Vec<(Vec<http::Method>, String)>,
    /// Path prefixes that skip it.
    pub bypass: Vec<String>,
}

impl RoomPlan {
    /// The room covers every path no other room's rule takes.
    pub fn is_default(&self) -> bool {
        self.hosts.is_empty() && (self.paths.is_empty() || self.paths.iter().all(|p| p == "/"))
    }
}

/// Command-line values that take the place of the file's.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--listen ADDR`.
    pub listen: Option<String>,
    /// `--upstream URL`: the file's one upstream (or its list) replaced by this one.
    pub upstream: Option<String>,
}

impl Config {
    /// Reads and checks the file at `path`; the room secrets and the admin token are read too.
    pub fn load(path: &Path, overrides: &Overrides) -> Result<Config, FileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| FileError::whole(path, format!("cannot read it: {e}")))?;
        Self::parse(&text, path, overrides)
    }

    /// [`load`](Self::load), from the file's text; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path, overrides: &Overrides) -> Result<Config, FileError> {
        let lines = Lines::new(text, path);
        let file: GatewayFile = toml::from_str(text).map_err(|e| lines.toml(&e))?;
        lines.check(file, overrides)
    }
}

impl Lines<'_> {
    fn check(&self, file: GatewayFile, overrides: &Overrides) -> Result<Config, FileError> {
        let listen = match (&overrides.listen, &file.listen) {
            (Some(addr), _) => parse_listen(addr).map_err(|m| self.flag("--listen", m))?,
            (None, Some(addr)) => parse_listen(addr.get_ref()).map_err(|m| self.at(addr, m))?,
            (None, None) => parse_listen("127.0.0.1:8080").expect("a valid default"),
        };
        let workers = match &file.workers {
            Some(n) => NonZeroUsize::new(*n.get_ref())
                .filter(|n| n.get() <= MAX_WORKERS)
                .ok_or_else(|| {
                    self.at(
                        n,
                        format!("workers: from 1 to {MAX_WORKERS}; leave it out for one per core"),
                    )
                })?,
            None => std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
        };
        let upstreams = self.upstreams(&file, overrides)?;
        let redis = self.redis(&file)?;
        let trusted_proxies = file
            .trusted_proxies
            .iter()
            .map(|net| parse_net(net.get_ref()).map_err(|m| self.at(net, m)))
            .collect::<Result<_, _>>()?;
        let paths = self.paths(&file)?;
        let admin_token = match &file.admin {
            Some(admin) => Some(self.token(admin, "admin")?),
            None => None,
        };
        let metrics_token = match &file.metrics {
            Some(metrics) => Some(self.token(metrics, "metrics")?),
            None => None,
        };
        let limits = self.limits(&file)?;
        let mut rooms = Vec::with_capacity(file.rooms.len());
        for entry in file.rooms {
            rooms.push(self.room(entry)?);
        }
        if rooms.iter().filter(|r| r.is_default()).count() > 1 {
            let second = rooms.iter().filter(|r| r.is_default()).nth(1).expect("two");
            return Err(self.line(
                second.line,
                "a second room covering every path: give each room but one `paths` or `hosts`",
            ));
        }
        Ok(Config {
            path: self.path().to_owned(),
            listen,
            workers,
            upstreams,
            redis,
            trusted_proxies,
            paths,
            admin_token,
            metrics_token,
            limits,
            rooms,
        })
    }

    fn upstreams(
        &self,
        file: &GatewayFile,
        overrides: &Overrides,
    ) -> Result<Vec<Upstream>, FileError> {
        if let Some(url) = &overrides.upstream {
            return Ok(vec![
                Upstream::parse(url).map_err(|m| self.flag("--upstream", m))?
            ]);
        }
        let list: Vec<&Spanned<String>> =
            match (&file.upstream, &file.upstreams) {
                (Some(_), Some(list)) => {
                    return Err(self.at(list, "`upstream` and `upstreams` both given: keep one"))
                }
                (Some(one), None) => vec![one],
                (None, Some(list)) if list.get_ref().is_empty() => {
                    return Err(self.at(list, "upstreams: the list is empty"))
                }
                (None, Some(list)) => list.get_ref().iter().collect(),
                (None, None) => return Err(self.whole(
                    "no upstream: add `upstream = \"http://127.0.0.1:8000\"` (the app's address) \
                     or pass --upstream URL",
                )),
            };
        list.into_iter()
            .map(|url| Upstream::parse(url.get_ref()).map_err(|m| self.at(url, m)))
            .collect()
    }

    fn paths(&self, file: &GatewayFile) -> Result<Paths, FileError> {
        let own = |p: &Spanned<String>, key: &str| -> Result<String, FileError> {
            let path = p.get_ref();
            // Checked as it will be used, its trailing slashes gone: `//` would be no path at
            // all, which every request's path starts with.
            let kept = path.trim_end_matches('/');
            if !path.starts_with('/') || kept.len() < 2 || path.contains(['?', '#', ' ']) {
                return Err(self.at(
                    p,
                    format!("paths.{key}: `{path}` is not a path such as /__gateway/{key}"),
                ));
            }
            Ok(kept.to_owned())
        };
        let health = own(&file.paths.health, "health")?;
        let metrics = match file.paths.metrics.get_ref().as_str() {
            "" => None,
            _ => Some(own(&file.paths.metrics, "metrics")?),
        };
        let admin = own(&file.paths.admin, "admin")?;
        let mut all = vec![&health, &admin];
        all.extend(metrics.as_ref());
        for (i, a) in all.iter().enumerate() {
            if all[..i].contains(a) {
                return Err(self.at(&file.paths.admin, format!("paths: `{a}` is used twice")));
            }
        }
        Ok(Paths {
            health,
            metrics,
            admin,
        })
    }

    /// The bearer token of the table `[name]`, read from where it says.
    fn token(
        &self,
        table: &Spanned<file::TokenFile>,
        name: &str,
    ) -> Result<BearerToken, FileError> {
        let a = table.get_ref();
        let token = match (&a.token_env, &a.token_file) {
            (Some(_), Some(_)) => {
                return Err(self.at(
                    table,
                    format!("{name}: token_env and token_file both given"),
                ))
            }
            (None, None) => {
                return Err(self.at(
                    table,
                    format!(
                    "{name}: name where the token is, token_env = \"VAR\" or token_file = \"PATH\""
                ),
                ))
            }
            (Some(var), None) => std::env::var(var).map_err(|_| {
                self.at(
                    table,
                    format!(
                        "{name}: the environment variable {} is not set",
                        shown_variable(var)
                    ),
                )
            })?,
            (None, Some(path)) => std::fs::read_to_string(path)
                .map(|t| t.strip_suffix('\n').unwrap_or(&t).to_owned())
                .map_err(|e| self.at(table, format!("{name}: cannot read {path}: {e}")))?,
        };
        if token.len() < 32 || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(self.at(
                table,
                format!(
                    "{name}: the token must be at least 32 visible ASCII characters (it has {})",
                    token.len()
                ),
            ));
        }
        Ok(BearerToken(token.into_bytes()))
    }

    fn limits(&self, file: &GatewayFile) -> Result<Limits, FileError> {
        let f = &file.limits;
        // Every duration given must be more than zero; the error names its line.
        for (name, given) in [
            ("header_read_timeout", &f.header_read_timeout),
            ("request_timeout", &f.request_timeout),
            ("send_timeout", &f.send_timeout),
            ("upstream_timeout", &f.upstream_timeout),
            ("connect_timeout", &f.connect_timeout),
            ("body_timeout", &f.body_timeout),
            ("upstream_idle_timeout", &f.upstream_idle_timeout),
        ] {
            if let Some(d) = given.as_ref().filter(|d| d.get_ref().0.is_zero()) {
                return Err(self.at(d, format!("limits.{name}: must be more than 0")));
            }
        }
        let duration =
            |given: &Option<Spanned<file::Readable>>| given.as_ref().map(|d| d.get_ref().0);
        let mut limits = Limits::default();
        let mut serve = limits.serve;
        if let Some(d) = duration(&f.header_read_timeout) {
            serve = serve.header_read_timeout(d);
        }
        if let Some(d) = duration(&f.request_timeout) {
            serve = serve.request_timeout(d);
        }
        if let Some(d) = duration(&f.send_timeout) {
            serve = serve.send_timeout(d);
        }
        if let Some(d) = duration(&f.grace) {
            serve = serve.grace(d);
        }
        if let Some(n) = &f.max_connections {
            if *n.get_ref() == 0 {
                return Err(self.at(n, "limits.max_connections: at least 1"));
            }
            serve = serve.max_connections(*n.get_ref());
        }
        if let Some(n) = &f.max_connections_per_ip {
            serve = serve.max_connections_per_ip(*n.get_ref());
        }
        if let Some(n) = &f.max_header_bytes {
            if *n.get_ref() < 8192 {
                return Err(self.at(n, "limits.max_header_bytes: at least 8192"));
            }
            serve = serve.max_header_bytes(*n.get_ref());
        }
        if let Some(n) = &f.max_headers {
            if *n.get_ref() == 0 {
                return Err(self.at(n, "limits.max_headers: at least 1"));
            }
            serve = serve.max_headers(*n.get_ref());
        }
        limits.serve = serve;
        if let Some(d) = duration(&f.upstream_timeout) {
            limits.upstream_timeout = d;
        }
        if let Some(d) = duration(&f.connect_timeout) {
            limits.connect_timeout = d;
        }
        if let Some(d) = duration(&f.body_timeout) {
            limits.body_timeout = d;
        }
        if let Some(d) = duration(&f.upstream_idle_timeout) {
            limits.upstream_idle_timeout = d;
        }
        if let Some(d) = duration(&f.shutdown_delay) {
            limits.shutdown_delay = d;
        }
        if let Some(n) = &f.max_body_bytes {
            limits.max_body_bytes = *n.get_ref();
        }
        if let Some(n) = &f.upstream_idle_connections {
            limits.upstream_idle_connections = *n.get_ref();
        }
        if limits.upstream_timeout >= limits.serve.get_request_timeout() {
            let message = format!(
                "limits.upstream_timeout ({:?}) must be shorter than limits.request_timeout ({:?}), \
                 so that a slow app is answered 504 before the request's own timeout",
                limits.upstream_timeout,
                limits.serve.get_request_timeout()
            );
            // At the line of whichever of the two the file gives (the upstream's first).
            return Err(
                match f.upstream_timeout.as_ref().or(f.request_timeout.as_ref()) {
                    Some(given) => self.at(given, message),
                    None => self.whole(message),
                },
            );
        }
        Ok(limits)
    }

    fn room(&self, entry: Spanned<rooms::RoomEntry>) -> Result<RoomPlan, FileError> {
        let line = self.line_of(entry.span().start);
        let rooms::RoomEntry { settings, routes } = entry.into_inner();
        let list = |v: Option<Spanned<Vec<String>>>| v.map(Spanned::into_inner).unwrap_or_default();
        let room = settings.room().to_owned();
        let check_paths = |v: &Option<Spanned<Vec<String>>>, key: &str| -> Result<(), FileError> {
            if let Some(v) = v {
                for p in v.get_ref() {
                    if !p.starts_with('/') {
                        return Err(self.at(
                            v,
                            format!("room `{room}`: {key}: `{p}` is not a path (it starts with /)"),
                        ));
                    }
                    if let Some(c) = p.chars().find(|c| "?#*".contains(*c)) {
                        return Err(self.at(
                            v,
                            format!(
                                "room `{room}`: {key}: `{p}` holds `{c}`: a prefix of the path \
                                 alone (no query, no `*`; `/static` covers what is under it)"
                            ),
                        ));
                    }
                }
            }
            Ok(())
        };
        check_paths(&routes.paths, "paths")?;
        check_paths(&routes.bypass, "bypass")?;
        let gates = match &routes.gates {
            Some(g) => g
                .get_ref()
                .iter()
                .map(|gate| parse_gate(gate).map_err(|m| self.at(g, format!("room `{room}`: {m}"))))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok(RoomPlan {
            line,
            settings,
            paths: list(routes.paths),
            hosts: list(routes.hosts),
            gates,
            bypass: list(routes.bypass),
        })
    }
}

fn parse_listen(addr: &str) -> Result<SocketAddr, String> {
    addr.parse().map_err(|_| {
        format!("listen: `{addr}` is not an address and port such as 0.0.0.0:8080 or [::]:8080")
    })
}

fn parse_net(text: &str) -> Result<IpNet, String> {
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| {
            format!("trusted_proxies: `{text}` is not an address or a network such as 10.0.0.0/8")
        })
}

/// `"POST /checkout"`, `"GET /api/*"` or `"/api/orders/*"` (every method). `GET` brings `HEAD`
/// with it, as the crate's `Rule::get` does: a `HEAD` is a `GET` without the body, and the app
/// answers it all the same, so a gate on `GET` that let `HEAD` through ungated would be
/// narrower than it reads.
fn parse_gate(text: &str) -> Result<(Vec<http::Method>, String), String> {
    let bad = || format!("gates: `{text}` is not a route such as \"POST /checkout\" or \"/api/*\"");
    let (methods, path) = match text.trim().split_once(' ') {
        Some((methods, path)) => (methods, path.trim()),
        None => ("", text.trim()),
    };
    // A request's path holds no query or fragment: a gate naming one would never hold, and
    // its route would be open to everyone.
    if !path.starts_with('/') || path.contains(['?', '#']) {
        return Err(bad());
    }
    let methods = methods
        .split(',')
        .filter(|m| !m.is_empty())
        .map(|m| {
            m.parse::<http::Method>()
                .ok()
                .filter(|_| m.bytes().all(|b| b.is_ascii_uppercase()))
                .ok_or_else(bad)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut methods = methods;
    if methods.contains(&http::Method::GET) && !methods.contains(&http::Method::HEAD) {
        methods.push(http::Method::HEAD);
    }
    Ok((methods, path.to_owned()))
}

#[cfg(test)]
mod tests;
