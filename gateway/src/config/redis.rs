//! Where a fleet's lines live: one Redis or Valkey (a node, a Unix socket, Sentinel) or a Redis
//! Cluster, with the key prefix and the deadline of a call, from the file's `redis*` keys.

use std::time::Duration;

use toml::Spanned;
use tower_waiting_room::__private::shown_variable;
use tower_waiting_room::store::{RedisStore, StoreError};

use super::error::Lines;
use super::file::GatewayFile;
use super::FileError;

/// The store every gateway of a fleet shares. Its `Debug` names no URL: they may carry a
/// password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisSettings {
    /// One server's URL, or a cluster's nodes.
    pub nodes: RedisNodes,
    /// Prefix of every key (`twr` without it): two fleets, or a staging and a production
    /// gateway, on one Redis keep apart by it.
    pub prefix: Option<String>,
    /// Deadline of one store call (the crate's default without it).
    pub timeout: Option<Duration>,
}

/// One server or a cluster.
#[derive(Clone, PartialEq, Eq)]
pub enum RedisNodes {
    /// `redis://`, `redis+unix://`, `unix://` or `redis+sentinel://`.
    Url(String),
    /// Some of a Redis Cluster's nodes (`redis://` each); the rest are found from them.
    Cluster(Vec<String>),
}

impl std::fmt::Debug for RedisNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedisNodes::Url(_) => f.write_str("Url(<redacted>)"),
            RedisNodes::Cluster(nodes) => write!(f, "Cluster(<{} URLs, redacted>)", nodes.len()),
        }
    }
}

impl RedisSettings {
    /// The store (its connection is made on first use).
    pub fn store(&self) -> Result<RedisStore, StoreError> {
        let mut builder = RedisStore::builder();
        builder = match &self.nodes {
            RedisNodes::Url(url) => builder.url(url),
            RedisNodes::Cluster(nodes) => builder.cluster_nodes(nodes.iter().cloned()),
        };
        if let Some(prefix) = &self.prefix {
            builder = builder.prefix(prefix);
        }
        if let Some(timeout) = self.timeout {
            builder = builder.timeout(timeout);
        }
        builder.build()
    }

    /// What `--check` says of it.
    pub fn describe(&self) -> String {
        let prefix = self.prefix.as_deref().unwrap_or("twr");
        match &self.nodes {
            RedisNodes::Url(_) => format!("redis (keys `{prefix}:*`)"),
            RedisNodes::Cluster(nodes) => {
                format!(
                    "redis cluster of {} nodes given (keys `{prefix}:*`)",
                    nodes.len()
                )
            }
        }
    }
}

/// A value of the file, or of the variable a `*_env` key names (its span is the key's).
fn from_env(
    lines: &Lines<'_>,
    key: &str,
    var: &Spanned<String>,
) -> Result<Spanned<String>, FileError> {
    match std::env::var(var.get_ref()) {
        Ok(value) => Ok(Spanned::new(var.span(), value)),
        Err(_) => Err(lines.at(
            var,
            format!(
                "{key}: the environment variable {} is not set",
                shown_variable(var.get_ref())
            ),
        )),
    }
}

impl Lines<'_> {
    /// The file's store: `redis` or `redis_env` (one URL), or `redis_cluster` or
    /// `redis_cluster_env` (nodes), at most one of the four; `redis_prefix` and `redis_timeout`
    /// with either. `None`: the embedded store.
    pub(super) fn redis(&self, file: &GatewayFile) -> Result<Option<RedisSettings>, FileError> {
        let given: Vec<(&str, std::ops::Range<usize>)> = [
            ("redis", file.redis.as_ref().map(Spanned::span)),
            ("redis_env", file.redis_env.as_ref().map(Spanned::span)),
            (
                "redis_cluster",
                file.redis_cluster.as_ref().map(Spanned::span),
            ),
            (
                "redis_cluster_env",
                file.redis_cluster_env.as_ref().map(Spanned::span),
            ),
        ]
        .into_iter()
        .filter_map(|(key, span)| Some((key, span?)))
        .collect();
        if let [(first, _), (second, span), ..] = given.as_slice() {
            return Err(self.at(
                &Spanned::new(span.clone(), ()),
                format!("`{first}` and `{second}` both given: keep one"),
            ));
        }
        let nodes = if let Some(url) = &file.redis {
            Some(self.url("redis", url.clone())?)
        } else if let Some(var) = &file.redis_env {
            Some(self.url("redis", from_env(self, "redis_env", var)?)?)
        } else if let Some(nodes) = &file.redis_cluster {
            Some(self.cluster("redis_cluster", nodes.span(), nodes.get_ref().clone())?)
        } else if let Some(var) = &file.redis_cluster_env {
            // One variable, the nodes' URLs separated by commas or white space (a secret file's
            // newline among them).
            let value = from_env(self, "redis_cluster_env", var)?;
            let nodes = value
                .get_ref()
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|node| !node.is_empty())
                .map(|node| Spanned::new(var.span(), node.to_owned()))
                .collect();
            Some(self.cluster("redis_cluster_env", var.span(), nodes)?)
        } else {
            None
        };
        let Some(nodes) = nodes else {
            for (key, value) in [
                (
                    "redis_prefix",
                    file.redis_prefix.as_ref().map(Spanned::span),
                ),
                (
                    "redis_timeout",
                    file.redis_timeout.as_ref().map(Spanned::span),
                ),
            ] {
                if let Some(span) = value {
                    return Err(self.at(
                        &Spanned::new(span, ()),
                        format!(
                            "{key}: no Redis to apply it to: give `redis` or `redis_cluster` \
                             (the embedded store has no keys)"
                        ),
                    ));
                }
            }
            return Ok(None);
        };
        let prefix = match &file.redis_prefix {
            Some(prefix) => {
                let p = prefix.get_ref();
                if p.is_empty() || p.contains(['{', '}', ':']) || p.chars().any(char::is_whitespace)
                {
                    return Err(self.at(
                        prefix,
                        "redis_prefix: a word without spaces, braces or colons (keys are \
                         `{prefix}:{room}:…`)",
                    ));
                }
                Some(p.clone())
            }
            None => None,
        };
        let timeout = match &file.redis_timeout {
            Some(timeout) if timeout.get_ref().0.is_zero() => {
                return Err(self.at(
                    timeout,
                    "redis_timeout: longer than zero, e.g. \"250ms\" or \"1s\"",
                ))
            }
            Some(timeout) => Some(timeout.get_ref().0),
            None => None,
        };
        // (Each URL was checked as the store checks it; building the store itself needs the
        // runtime the gateway starts later.)
        Ok(Some(RedisSettings {
            nodes,
            prefix,
            timeout,
        }))
    }

    fn url(&self, key: &str, url: Spanned<String>) -> Result<RedisNodes, FileError> {
        if url.get_ref().trim().is_empty() {
            return Err(self.at(
                &url,
                format!("{key}: empty; leave the key out for the embedded store"),
            ));
        }
        RedisStore::builder()
            .url(url.get_ref())
            .check()
            .map_err(|e| self.at(&url, format!("{key}: {e}")))?;
        Ok(RedisNodes::Url(url.into_inner()))
    }

    fn cluster(
        &self,
        key: &str,
        span: std::ops::Range<usize>,
        nodes: Vec<Spanned<String>>,
    ) -> Result<RedisNodes, FileError> {
        if nodes.is_empty() {
            return Err(self.at(
                &Spanned::new(span, ()),
                format!("{key}: no node; give some of the cluster's redis:// URLs"),
            ));
        }
        for node in &nodes {
            // Each node alone must be a URL a store takes, and not Sentinel's.
            if node
                .get_ref()
                .get(..17)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("redis+sentinel://"))
            {
                return Err(self.at(
                    node,
                    format!("{key}: a cluster node is a redis:// URL; Sentinel goes in `redis`"),
                ));
            }
            RedisStore::builder()
                .cluster_nodes([node.get_ref()])
                .check()
                .map_err(|e| self.at(node, format!("{key}: {e}")))?;
        }
        // And together (the same password and database on each, no socket among them).
        let nodes: Vec<String> = nodes.into_iter().map(Spanned::into_inner).collect();
        RedisStore::builder()
            .cluster_nodes(nodes.iter().cloned())
            .check()
            .map_err(|e| self.at(&Spanned::new(span, ()), format!("{key}: {e}")))?;
        Ok(RedisNodes::Cluster(nodes))
    }
}
