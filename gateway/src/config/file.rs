//! The gateway's file as TOML writes it: every key, with the line it stands on kept for the
//! errors that come after parsing (a bad URL, a room the store refuses).

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::rooms::RoomEntry;

/// The whole file. Unknown keys are refused, so a typo is an error, not a default.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GatewayFile {
    /// Where visitors connect: `"0.0.0.0:8080"`.
    pub listen: Option<Spanned<String>>,
    /// Serving threads; one per core without it.
    pub workers: Option<Spanned<usize>>,
    /// The app, one URL.
    pub upstream: Option<Spanned<String>>,
    /// The app, several URLs (requests take turns).
    pub upstreams: Option<Spanned<Vec<Spanned<String>>>>,
    /// Redis or Valkey shared by every gateway of a fleet; the embedded store without it.
    pub redis: Option<Spanned<String>>,
    /// The environment variable holding the Redis URL, for a URL that carries a password.
    pub redis_env: Option<Spanned<String>>,
    /// A Redis Cluster: some of its nodes' URLs.
    pub redis_cluster: Option<Spanned<Vec<Spanned<String>>>>,
    /// The environment variable holding the cluster's nodes' URLs (commas or spaces between).
    pub redis_cluster_env: Option<Spanned<String>>,
    /// Prefix of every key in Redis (`twr` without it).
    pub redis_prefix: Option<Spanned<String>>,
    /// Deadline of one store call.
    pub redis_timeout: Option<Spanned<Readable>>,
    /// Proxies in front of the gateway whose `X-Forwarded-For` is believed.
    #[serde(default)]
    pub trusted_proxies: Vec<Spanned<String>>,
    /// The gateway's own paths.
    #[serde(default)]
    pub paths: PathsFile,
    /// Serving limits.
    #[serde(default)]
    pub limits: LimitsFile,
    /// The admin API and dashboard.
    pub admin: Option<Spanned<TokenFile>>,
    /// A token for the metrics.
    pub metrics: Option<Spanned<TokenFile>>,
    /// The rooms, each with the routes it covers.
    #[serde(default)]
    pub rooms: Vec<Spanned<RoomEntry>>,
}

/// `[paths]`: where the gateway answers itself, never proxied and never queued.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct PathsFile {
    pub health: Spanned<String>,
    /// `""` turns the metrics off.
    pub metrics: Spanned<String>,
    pub admin: Spanned<String>,
}

impl Default for PathsFile {
    fn default() -> Self {
        Self {
            health: Spanned::new(0..0, "/__gateway/health".to_owned()),
            metrics: Spanned::new(0..0, "/__gateway/metrics".to_owned()),
            admin: Spanned::new(0..0, "/__gateway/admin".to_owned()),
        }
    }
}

/// `[limits]`: what a client and the app may hold, in readable durations.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsFile {
    pub header_read_timeout: Option<Spanned<Readable>>,
    pub request_timeout: Option<Spanned<Readable>>,
    pub send_timeout: Option<Spanned<Readable>>,
    pub upstream_timeout: Option<Spanned<Readable>>,
    pub connect_timeout: Option<Spanned<Readable>>,
    pub body_timeout: Option<Spanned<Readable>>,
    pub grace: Option<Spanned<Readable>>,
    pub shutdown_delay: Option<Spanned<Readable>>,
    pub max_connections: Option<Spanned<usize>>,
    pub max_connections_per_ip: Option<Spanned<usize>>,
    pub max_body_bytes: Option<Spanned<u64>>,
    pub max_header_bytes: Option<Spanned<usize>>,
    pub max_headers: Option<Spanned<usize>>,
    pub upstream_idle_connections: Option<Spanned<usize>>,
    pub upstream_idle_timeout: Option<Spanned<Readable>>,
}

/// `[admin]`, `[metrics]`: a bearer token's place (never the token).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenFile {
    pub token_env: Option<String>,
    pub token_file: Option<String>,
}

/// A readable duration (`"250ms"`, `"2s"`), kept with its line.
#[derive(Debug)]
pub(crate) struct Readable(pub Duration);

impl<'de> Deserialize<'de> for Readable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tower_waiting_room::config::readable_duration(d).map(Readable)
    }
}
