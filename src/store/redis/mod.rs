//! The Redis/Valkey store: several gateways share one queue.
//!
//! The whole state machine of a room runs as **one Lua script** ([`SCRIPT`], `room.lua`),
//! atomically inside Redis, with the exact semantics of the [`MemoryStore`](super::MemoryStore).
//! Time is Redis `TIME`, so every gateway shares one clock. All keys of a room share the hash tag
//! `{room}` (`{prefix}:{room}:line`, …), so in a Redis Cluster they live in one slot.
//!
//! ```no_run
//! use tower_waiting_room::store::RedisStore;
//! use tower_waiting_room::WaitingRoomLayer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Single node (or `.cluster_nodes([...])` for a Redis Cluster).
//! let store = RedisStore::builder().url("redis://127.0.0.1:6379/").build()?;
//! let room = WaitingRoomLayer::builder("launch")
//!     .capacity(500)
//!     .secret(std::env::var("WAITING_ROOM_SECRET")?)
//!     .store(store)
//!     .build()?;
//! # let _ = room;
//! # Ok(())
//! # }
//! ```
//!
//! # Bad days
//!
//! - Every call has its own deadline ([`RedisStoreBuilder::timeout`], default 250 ms), enforced
//!   with a Tokio timeout, not left to the client library.
//! - Errors are classified by code, never by message text: `OOM` is
//!   [`Busy`](super::StoreErrorKind::Busy) (visitors are told to try again soon; a full Redis is
//!   never taken for a dead one); I/O errors, refused or dropped connections and `LOADING`,
//!   `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN` are [`Unavailable`](super::StoreErrorKind::Unavailable);
//!   a missed deadline is [`Timeout`](super::StoreErrorKind::Timeout). The room's fail policy
//!   decides what new visitors get; visitors with a valid admission token keep getting through.
//! - A **circuit breaker** shared by every clone: after a transport failure the store is not
//!   called for [`RedisStoreBuilder::breaker_cooldown`] (default 3 s); then one probe goes
//!   through, and its success closes the breaker.
//! - A `NOSCRIPT` after a restart or failover is answered by loading the script and retrying
//!   (`redis::Script::invoke_async`).
//! - The connection is made lazily: a Redis that is down when the process starts does not stop
//!   it from starting.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{ErrorKind, RedisError, Script, ServerErrorKind};

use super::{
    AdmissionCounts, Decision, RoomStats, Store, StoreError, StoreErrorKind, StoreFuture,
    ADMISSION_BUCKETS, ADMISSION_BUCKET_MS, FIVE_MINUTE_BUCKETS, MAX_PROMOTIONS_PER_CALL,
    MAX_SWEEP_PER_CALL, MINUTE_BUCKETS,
};
use crate::clock::{Clock, SharedClock};
use crate::config::RoomPolicy;
use crate::session::SessionId;

/// The room script, loaded with `include_str!`.
pub const SCRIPT: &str = include_str!("room.lua");

/// Default deadline of one store call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// Default time the circuit breaker stays open after a transport failure.
pub const DEFAULT_BREAKER_COOLDOWN: Duration = Duration::from_secs(3);
/// Default key prefix.
pub const DEFAULT_PREFIX: &str = "twr";

#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// A [`Store`] on Redis or Valkey, single node or cluster. Clones share one multiplexed
/// connection, one script and one circuit breaker.
#[derive(Clone)]
pub struct RedisStore {
    conn: Connection,
    script: Arc<Script>,
    prefix: Arc<str>,
    timeout: Duration,
    clock: Option<SharedClock>,
    breaker: Arc<Breaker>,
}

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
    /// A single node: `redis://[:password@]host:port[/db]` or `rediss://…`.
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

    /// Sends this clock's time to the script instead of using Redis `TIME`. For tests that move
    /// time by hand; in production every gateway should share Redis's clock.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Builds the store. The connection is made on first use, so this must run inside a Tokio
    /// runtime but does not need Redis to be up.
    pub fn build(self) -> Result<RedisStore, StoreError> {
        let timeout = self.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let config_error = |msg: &'static str| StoreError::with_source(StoreErrorKind::Config, msg);
        if timeout.is_zero() {
            return Err(config_error("the store timeout must be longer than zero"));
        }
        let prefix = self.prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_owned());
        if prefix.is_empty() || prefix.contains(['{', '}']) {
            return Err(config_error(
                "the key prefix must be non-empty and without braces",
            ));
        }
        let conn = match (self.url, self.cluster_nodes.is_empty()) {
            (Some(url), true) => {
                let client = redis::Client::open(url).map_err(config)?;
                let manager_config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(1);
                Connection::Single(
                    client
                        .get_connection_manager_lazy(manager_config)
                        .map_err(config)?,
                )
            }
            (None, false) => {
                let client = ClusterClient::builder(self.cluster_nodes)
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(2)
                    .build()
                    .map_err(config)?;
                Connection::Cluster(
                    client.get_pending_async_connection_with_config(
                        redis::cluster::ClusterConfig::new()
                            .set_connection_timeout(timeout)
                            .set_response_timeout(timeout),
                    ),
                )
            }
            _ => return Err(config_error("give either a URL or cluster nodes")),
        };
        Ok(RedisStore {
            conn,
            script: Arc::new(Script::new(SCRIPT)),
            prefix: prefix.into(),
            timeout,
            clock: self.clock,
            breaker: Arc::new(Breaker::new(
                self.breaker_cooldown.unwrap_or(DEFAULT_BREAKER_COOLDOWN),
            )),
        })
    }
}

impl RedisStore {
    /// Starts configuring a store.
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder::default()
    }

    /// A single-node store with the defaults; see [`RedisStoreBuilder::build`].
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        Self::builder().url(url).build()
    }

    /// Counters of this store's calls, shared by its clones.
    pub fn metrics(&self) -> RedisStoreMetrics {
        let b = &self.breaker;
        RedisStoreMetrics {
            attempts: b.attempts.load(Ordering::Relaxed),
            skipped: b.skipped.load(Ordering::Relaxed),
            transport_failures: b.failures.load(Ordering::Relaxed),
            breaker_open: b.open_until.load(Ordering::Acquire) != 0,
        }
    }

    /// The keys of `room`, in the script's order.
    pub fn keys(&self, room: &str) -> [String; 7] {
        [
            "seq", "line", "seen", "active", "granted", "bucket", "admitted",
        ]
        .map(|k| format!("{}:{{{room}}}:{k}", self.prefix))
    }

    fn call(
        &self,
        op: &'static str,
        policy: &RoomPolicy,
        session: Option<SessionId>,
    ) -> StoreFuture<Vec<i64>> {
        let store = self.clone();
        let keys = self.keys(&policy.room);
        let session = session.map(|s| s.to_string()).unwrap_or_default();
        let now = self.clock.as_ref().map_or(0, |c| c.now_ms());
        let numbers = [
            u64::from(policy.capacity),
            u64::from(policy.admission_rate.unwrap_or(0)),
            policy.active_ttl_ms,
            policy.grant_ttl_ms,
            policy.queue_ttl_ms,
            policy.max_queue_len,
            u64::from(MAX_PROMOTIONS_PER_CALL),
            u64::from(MAX_SWEEP_PER_CALL),
            ADMISSION_BUCKET_MS,
            ADMISSION_BUCKETS,
            MINUTE_BUCKETS,
            FIVE_MINUTE_BUCKETS,
        ];
        Box::pin(async move {
            if !store.breaker.allow() {
                store.breaker.skipped.fetch_add(1, Ordering::Relaxed);
                return Err(StoreError::with_source(
                    StoreErrorKind::Unavailable,
                    "circuit breaker open after a recent store failure",
                ));
            }
            store.breaker.attempts.fetch_add(1, Ordering::Relaxed);
            let mut invocation = store.script.prepare_invoke();
            for key in &keys {
                invocation.key(key);
            }
            invocation.arg(op).arg(&session).arg(now);
            for n in numbers {
                invocation.arg(n);
            }
            let run = async {
                match store.conn.clone() {
                    Connection::Single(mut c) => invocation.invoke_async::<Vec<i64>>(&mut c).await,
                    Connection::Cluster(mut c) => invocation.invoke_async::<Vec<i64>>(&mut c).await,
                }
            };
            let result = match tokio::time::timeout(store.timeout, run).await {
                Ok(Ok(reply)) => Ok(reply),
                Ok(Err(e)) => Err(classify(e)),
                Err(_) => Err(StoreError::with_source(
                    StoreErrorKind::Timeout,
                    format!("no answer within {:?}", store.timeout),
                )),
            };
            match &result {
                Err(e) if is_transport(e) => store.breaker.trip(),
                Err(_) => {}
                Ok(_) => store.breaker.success(),
            }
            result
        })
    }

    fn decide(
        &self,
        op: &'static str,
        policy: &RoomPolicy,
        session: SessionId,
    ) -> StoreFuture<Decision> {
        let call = self.call(op, policy, Some(session));
        Box::pin(async move { decision(&call.await?) })
    }
}

fn is_transport(e: &StoreError) -> bool {
    matches!(
        e.kind(),
        StoreErrorKind::Unavailable | StoreErrorKind::Timeout
    )
}

fn protocol(reply: &[i64]) -> StoreError {
    StoreError::with_source(
        StoreErrorKind::Protocol,
        format!("unexpected script reply {reply:?}"),
    )
}

fn non_negative(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn decision(reply: &[i64]) -> Result<Decision, StoreError> {
    match *reply {
        [1, expires_at_ms, ..] => Ok(Decision::Admitted {
            expires_at_ms: non_negative(expires_at_ms),
        }),
        [2, position, waiting, minute, five] => Ok(Decision::Waiting {
            position: non_negative(position),
            waiting: non_negative(waiting),
            recent: AdmissionCounts::new(non_negative(minute), non_negative(five)),
        }),
        [3, _, waiting, ..] => Ok(Decision::Full {
            waiting: non_negative(waiting),
        }),
        [0, ..] => Ok(Decision::Unknown),
        _ => Err(protocol(reply)),
    }
}

impl Store for RedisStore {
    fn enter(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.decide("enter", policy, session)
    }

    fn poll(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.decide("poll", policy, session)
    }

    fn heartbeat(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.decide("heartbeat", policy, session)
    }

    fn release(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<bool> {
        let call = self.call("release", policy, Some(session));
        Box::pin(async move {
            match *call.await? {
                [4, released, ..] => Ok(released == 1),
                ref reply => Err(protocol(reply)),
            }
        })
    }

    fn stats(&self, policy: &RoomPolicy) -> StoreFuture<RoomStats> {
        let call = self.call("stats", policy, None);
        let capacity = u64::from(policy.capacity);
        Box::pin(async move {
            match *call.await? {
                [5, admitted, granted, waiting, minute, five] => Ok(RoomStats {
                    admitted: non_negative(admitted),
                    granted: non_negative(granted),
                    waiting: non_negative(waiting),
                    capacity,
                    recent: AdmissionCounts::new(non_negative(minute), non_negative(five)),
                }),
                ref reply => Err(protocol(reply)),
            }
        })
    }
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field(
                "backend",
                &match self.conn {
                    Connection::Single(_) => "single",
                    Connection::Cluster(_) => "cluster",
                },
            )
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

fn config(e: RedisError) -> StoreError {
    StoreError::with_source(StoreErrorKind::Config, e)
}

/// Classifies a Redis error by its kind and code, never by its message.
fn classify(e: RedisError) -> StoreError {
    let kind = match e.kind() {
        ErrorKind::Extension if e.code() == Some("OOM") => StoreErrorKind::Busy,
        ErrorKind::Io if e.is_timeout() => StoreErrorKind::Timeout,
        ErrorKind::Io | ErrorKind::ClusterConnectionNotFound => StoreErrorKind::Unavailable,
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown,
        ) => StoreErrorKind::Unavailable,
        _ if e.is_connection_dropped() || e.is_connection_refusal() => StoreErrorKind::Unavailable,
        _ => StoreErrorKind::Protocol,
    };
    StoreError::with_source(kind, e)
}

/// Counters of a [`RedisStore`]'s calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisStoreMetrics {
    /// Calls sent to Redis.
    pub attempts: u64,
    /// Calls not sent because the circuit breaker was open.
    pub skipped: u64,
    /// Calls that failed for lack of a connection or an answer in time.
    pub transport_failures: u64,
    /// Whether the breaker is open (or half-open) now.
    pub breaker_open: bool,
}

/// The circuit breaker shared by every clone of a store, with the store's counters.
struct Breaker {
    attempts: AtomicU64,
    skipped: AtomicU64,
    failures: AtomicU64,
    cooldown: Duration,
    start: Instant,
    /// Milliseconds since `start` until which calls are skipped; 0 when closed.
    open_until: AtomicU64,
    /// A probe is in flight after the cooldown.
    probing: AtomicBool,
}

impl Breaker {
    fn new(cooldown: Duration) -> Self {
        Self {
            attempts: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            cooldown,
            start: Instant::now(),
            open_until: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    fn now(&self) -> u64 {
        // +1 so that 0 always means "closed".
        self.start.elapsed().as_millis() as u64 + 1
    }

    /// Whether a call may go to the store now.
    fn allow(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return true;
        }
        if self.now() < until {
            return false;
        }
        // Half-open: exactly one probe.
        self.probing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn trip(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let until = self.now() + self.cooldown.as_millis() as u64;
        self.open_until.store(until, Ordering::Release);
        self.probing.store(false, Ordering::Release);
        tracing::warn!(cooldown = ?self.cooldown, "waiting room store unreachable; circuit breaker open");
    }

    fn success(&self) {
        if self.open_until.swap(0, Ordering::AcqRel) != 0 {
            tracing::info!("waiting room store reachable again; circuit breaker closed");
        }
        self.probing.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaker_skips_then_lets_one_probe_through() {
        let b = Breaker::new(Duration::from_millis(40));
        assert!(b.allow());
        b.trip();
        assert!(!b.allow());
        std::thread::sleep(Duration::from_millis(60));
        assert!(b.allow(), "one probe after the cooldown");
        assert!(!b.allow(), "only one probe at a time");
        b.success();
        assert!(b.allow() && b.allow());
    }

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
    fn keys_share_the_room_hash_tag() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let store = RedisStore::from_url("redis://127.0.0.1:1/").unwrap();
        let keys = store.keys("shop");
        assert!(keys.iter().all(|k| k.starts_with("twr:{shop}:")));
        assert_eq!(keys.len(), 7);
    }

    #[test]
    fn replies_map_to_decisions() {
        assert_eq!(
            decision(&[1, 5, 0]).unwrap(),
            Decision::Admitted { expires_at_ms: 5 }
        );
        assert_eq!(
            decision(&[2, 3, 9, 4, 20]).unwrap(),
            Decision::Waiting {
                position: 3,
                waiting: 9,
                recent: AdmissionCounts::new(4, 20),
            }
        );
        assert_eq!(
            decision(&[2, 3, 9]).unwrap_err().kind(),
            StoreErrorKind::Protocol,
            "a waiting reply without counts is from another script version"
        );
        assert_eq!(decision(&[3, 0, 9]).unwrap(), Decision::Full { waiting: 9 });
        assert_eq!(decision(&[0, 0, 0]).unwrap(), Decision::Unknown);
        assert_eq!(decision(&[7]).unwrap_err().kind(), StoreErrorKind::Protocol);
    }
}
