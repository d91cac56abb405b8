//! [`RedisStoreBuilder`]: where Redis is, and how long to wait for it.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::cluster::ClusterClient;
use redis::{AsyncConnectionConfig, RedisError};

use super::breaker::Breaker;
use super::sentinel::SentinelConnection;
use super::url::{self, Target};
use super::{Connection, RedisStore};
use crate::clock::{Clock, SharedClock};
use crate::store::{StoreError, StoreErrorKind};

/// Default deadline of one store call.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// Default time the circuit breaker stays open after a transport failure.
pub(crate) const DEFAULT_BREAKER_COOLDOWN: Duration = Duration::from_secs(3);
/// Default key prefix.
pub(crate) const DEFAULT_PREFIX: &str = "twr";

/// Configures a [`RedisStore`].
#[derive(Default)]
#[must_use]
pub struct RedisStoreBuilder {
    url: Option<String>,
    cluster_nodes: Vec<String>,
    prefix: Option<String>,
    timeout: Option<Duration>,
    breaker_cooldown: Option<Duration>,
    clock: Option<SharedClock>,
    manual_clock: bool,
}

impl std::fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // URLs may carry passwords: show only whether they are set.
        f.debug_struct("RedisStoreBuilder")
            .field("url", &self.url.as_ref().map(|_| "<set>"))
            .field("cluster_nodes", &self.cluster_nodes.len())
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RedisStoreBuilder {
    /// A single node, `redis://[[user]:password@]host[:port][/db]` (or `valkey://`,
    /// `unix:///path`; `rediss://` is refused, as redis-rs is built without TLS here), or the
    /// primary named by Redis Sentinel,
    /// `redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/<master name>[/db]`
    /// (sentinels' default port 26379; the credentials are the primary's): a failover is
    /// followed as soon as the sentinels promote a replica.
    ///
    /// A URL that does not parse is a [`Config`](StoreErrorKind::Config) error of
    /// [`build`](Self::build) naming the URL (password removed) and what is wrong with it.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// A Redis Cluster, by some of its nodes' URLs.
    pub fn cluster_nodes<I, U>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = U>,
        U: Into<String>,
    {
        self.cluster_nodes = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Prefix of every key (default `twr`): keys are `{prefix}:{room}:…`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Deadline of one store call (default 250 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How long the store is skipped after a transport failure (default 3 s).
    pub fn breaker_cooldown(mut self, cooldown: Duration) -> Self {
        self.breaker_cooldown = Some(cooldown);
        self
    }

    /// Sends this clock's time to the script instead of using Redis `TIME`. The server holds it
    /// to its own: a room call whose time is more than a second from the server's `TIME` is
    /// refused (a [`Protocol`](crate::store::StoreErrorKind::Protocol) error: nobody is let in
    /// by it), so a gateway whose clock runs ahead can never expire the others' slots and
    /// places. In production every gateway should share Redis's clock (the default); tests
    /// that move time by hand use `manual_clock` (feature `testing`).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self.manual_clock = false;
        self
    }

    /// Sends a manual clock's time to the script, taken as it is, whatever the server's
    /// `TIME`: for tests that move time by hand (a
    /// [`ManualClock`](crate::testing::ManualClock)). Never for a gateway in production: a
    /// clock far ahead expires every slot and place of the room.
    #[cfg(feature = "testing")]
    pub fn manual_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self.manual_clock = true;
        self
    }

    /// What [`build`](Self::build) would refuse, found without building: the URL (or each
    /// cluster node's), the key prefix and the deadline. Needs no runtime and makes no
    /// connection, so a configuration can be checked where it is read (`--check`).
    pub fn check(&self) -> Result<(), StoreError> {
        let config_error = |msg: &'static str| StoreError::with_source(StoreErrorKind::Config, msg);
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(config_error("the store timeout must be longer than zero"));
        }
        if self
            .prefix
            .as_ref()
            .is_some_and(|p| p.is_empty() || p.contains(['{', '}']))
        {
            return Err(config_error(
                "the key prefix must be non-empty and without braces",
            ));
        }
        match (&self.url, self.cluster_nodes.is_empty()) {
            (Some(url), true) => {
                if let Target::Node = checked(url)? {
                    redis::Client::open(url.as_str()).map_err(refused(url))?;
                }
                Ok(())
            }
            (None, false) => {
                for node in &self.cluster_nodes {
                    if let Target::Sentinel(_) = checked(node)? {
                        return Err(config_error(
                            "a cluster node is a redis:// URL; redis+sentinel:// goes to url(..)",
                        ));
                    }
                    redis::Client::open(node.as_str()).map_err(refused(node))?;
                }
                // What only the nodes together can be refused for (a socket URL among them,
                // passwords or databases that differ): redis-rs's builder checks it without
                // connecting.
                ClusterClient::builder(self.cluster_nodes.clone())
                    .build()
                    .map_err(|e| {
                        StoreError::with_source(
                            StoreErrorKind::Config,
                            format!("the cluster's nodes: {e}"),
                        )
                    })?;
                Ok(())
            }
            _ => Err(config_error("give either a URL or cluster nodes")),
        }
    }

    /// Builds the store. The connection is made on first use, so this must run inside a Tokio
    /// runtime but does not need Redis to be up.
    pub fn build(self) -> Result<RedisStore, StoreError> {
        self.check()?;
        let timeout = self.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let prefix = self.prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_owned());
        let conn = match (self.url, self.cluster_nodes.is_empty()) {
            (Some(url), true) => match checked(&url)? {
                Target::Node => {
                    let client = redis::Client::open(url.as_str()).map_err(refused(&url))?;
                    let manager_config = ConnectionManagerConfig::new()
                        .set_connection_timeout(Some(timeout))
                        .set_response_timeout(Some(timeout))
                        .set_number_of_retries(1);
                    Connection::Single(
                        client
                            .get_connection_manager_lazy(manager_config)
                            .map_err(refused(&url))?,
                    )
                }
                Target::Sentinel(target) => {
                    let config = AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(timeout))
                        .set_response_timeout(Some(timeout));
                    Connection::Sentinel(
                        SentinelConnection::new(target, config, timeout).map_err(refused(&url))?,
                    )
                }
            },
            (None, false) => {
                let client = ClusterClient::builder(self.cluster_nodes)
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(2)
                    .build()
                    .map_err(|e| StoreError::with_source(StoreErrorKind::Config, e))?;
                Connection::Cluster(
                    client.get_pending_async_connection_with_config(
                        redis::cluster::ClusterConfig::new()
                            .set_connection_timeout(timeout)
                            .set_response_timeout(timeout),
                    ),
                )
            }
            _ => {
                return Err(StoreError::with_source(
                    StoreErrorKind::Config,
                    "give either a URL or cluster nodes",
                ))
            }
        };
        let prefix: Arc<str> = prefix.into();
        Ok(RedisStore {
            conn,
            prefix: prefix.clone(),
            timeout,
            clock: self.clock,
            manual_clock: self.manual_clock,
            found: Arc::default(),
            checked_in: Arc::default(),
            version_mixes: Arc::default(),
            join_batches: Arc::default(),
            // A probe that has not finished within two deadlines was never polled to its end.
            breaker: Arc::new(
                Breaker::new(
                    self.breaker_cooldown.unwrap_or(DEFAULT_BREAKER_COOLDOWN),
                    timeout * 2,
                )
                .named(prefix),
            ),
        })
    }
}

/// Checks `url` with this crate's parser, so that a mistake is named with the URL (password
/// removed).
fn checked(url: &str) -> Result<Target, StoreError> {
    url::parse(url).map_err(|what| {
        StoreError::with_source(
            StoreErrorKind::Config,
            format!("invalid Redis URL `{}`: {what}", url::redact(url)),
        )
    })
}

/// redis-rs refused a URL this crate's parser took (a TLS URL without TLS support, a bad
/// socket path…).
fn refused(url: &str) -> impl Fn(RedisError) -> StoreError + '_ {
    move |e| {
        StoreError::with_source(
            StoreErrorKind::Config,
            format!("invalid Redis URL `{}`: {e}", url::redact(url)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_configuration_is_a_config_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let kind = |b: RedisStoreBuilder| b.build().unwrap_err().kind();
        assert_eq!(kind(RedisStore::builder()), StoreErrorKind::Config);
        assert_eq!(
            kind(RedisStore::builder().url("nonsense://x")),
            StoreErrorKind::Config
        );
        assert_eq!(
            kind(RedisStore::builder().cluster_nodes(["redis://h:1", "redis://h:99999"])),
            StoreErrorKind::Config
        );
        assert_eq!(
            kind(
                RedisStore::builder()
                    .url("redis://127.0.0.1/")
                    .prefix("a{b")
            ),
            StoreErrorKind::Config
        );
        assert_eq!(
            kind(
                RedisStore::builder()
                    .url("redis://127.0.0.1/")
                    .timeout(Duration::ZERO)
            ),
            StoreErrorKind::Config
        );
    }

    #[test]
    fn url_errors_name_the_url_without_its_password_and_what_is_wrong() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let message = |url: &str| {
            let e = RedisStore::builder().url(url).build().unwrap_err();
            assert_eq!(e.kind(), StoreErrorKind::Config);
            let m = e.to_string();
            assert!(!m.contains("hunter2"), "the password leaked: {m}");
            m
        };
        let m = message("http://:hunter2@localhost:6379/");
        assert!(m.contains("`http://:***@localhost:6379/`"), "{m}");
        assert!(m.contains("scheme `http`"), "{m}");
        let m = message("redis//:hunter2@localhost");
        assert!(m.contains("`redis//:***@localhost`"), "{m}");
        assert!(m.contains("missing `:`"), "{m}");
        let m = message("redis://:hunter2@localhost:99999");
        assert!(m.contains("`redis://:***@localhost:99999`"), "{m}");
        assert!(m.contains("port 99999 is out of range"), "{m}");
        let m = message("rediss://:hunter2@localhost");
        assert!(
            m.contains("`rediss://:***@localhost`") && m.contains("TLS"),
            "{m}"
        );
        let m = message("redis:/localhost");
        assert!(m.contains("missing `//`"), "{m}");
        let m = message("redis+sentinel://:hunter2@localhost:26379");
        assert!(m.contains("no master name"), "{m}");
        let m = RedisStore::builder()
            .cluster_nodes(["redis://a:hunter2@h:1", "redis://a:hunter2@h:99999"])
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("`redis://a:***@h:99999`") && m.contains("out of range"),
            "{m}"
        );
        assert!(RedisStore::builder()
            .url("redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/shop/0")
            .build()
            .is_ok());
    }
}
