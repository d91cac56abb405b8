//! The Redis/Valkey store: several gateways share one queue.
//!
//! The whole state machine of a room runs as **one Lua library** (`script/*.lua`, a Redis
//! Functions library, one function per operation, loaded with `FUNCTION LOAD REPLACE` and called
//! with `FCALL`; Redis 7.0+ or Valkey 7.2+), atomically inside Redis, with the exact semantics of the [`MemoryStore`](super::MemoryStore).
//! Time is Redis `TIME`, so every gateway shares one clock. All keys of a room share the hash tag
//! `{room}` (`{prefix}:{room}:line`, …), so in a Redis Cluster they live in one slot.
//!
//! ```no_run
//! use tower_waiting_room::store::RedisStore;
//! use tower_waiting_room::WaitingRoomLayer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Single node (or `redis+sentinel://host:26379/mymaster` for the primary named by Redis
//! // Sentinel, or `.cluster_nodes([...])` for a Redis Cluster).
//! let store = RedisStore::builder().url("redis://127.0.0.1:6379/").build()?;
//! // Optional: fail at start-up on an unreachable Redis, an ACL without scripting, a replica or
//! // an eviction policy that could drop the line.
//! let server = store.check().await?;
//! println!("waiting room store: {server}");
//! let room = WaitingRoomLayer::builder("launch")
//!     .capacity(500)
//!     .secret(
//!         std::env::var("WAITING_ROOM_SECRET")
//!             .map_err(|_| "set WAITING_ROOM_SECRET to a secret of at least 32 bytes")?,
//!     )
//!     .store(store)
//!     .build()?;
//! # let _ = room;
//! # Ok(())
//! # }
//! ```
//!
//! # Bad days
//!
//! The error model, in full in `docs/redis.md`:
//!
//! - Every call has its own deadline ([`RedisStoreBuilder::timeout`], default 250 ms), enforced
//!   with a Tokio timeout, not left to the client library.
//! - Errors are classified by code, never by message text (Valkey's texts differ):
//!   - unreachable (I/O errors, refused or dropped connections) and failover in progress
//!     (`READONLY` from a demoted primary, `LOADING`, `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`,
//!     `NOREPLICAS`) are [`Unavailable`](super::StoreErrorKind::Unavailable), a missed deadline
//!     is [`Timeout`](super::StoreErrorKind::Timeout): the room's fail policy decides what new
//!     visitors get, and the circuit breaker opens;
//!   - `OOM` and `BUSY` (another script runs too long) are [`Busy`](super::StoreErrorKind::Busy):
//!     visitors are told to try again soon, under either fail policy; a full or busy Redis is
//!     never taken for a dead one, and the breaker stays closed (Redis answered at once); so
//!     is `WRSETTINGS`, the room's settings written by a version this one cannot read (a
//!     [version mix](super::StoreError::is_version_mix), logged at `ERROR` once per room);
//!   - configuration faults (`NOPERM`, failed authentication, `WRONGTYPE` under the room's
//!     prefix, `MISCONF`, a function not found that survives loading its library, a master
//!     name the sentinels do not know) are [`Misconfigured`](super::StoreErrorKind::Misconfigured): the
//!     fail policy applies, the breaker opens so requests do not each ask a Redis that will
//!     refuse them, and the store logs at `ERROR`;
//!   - anything else (a generic `ERR`, an unexpected reply) is
//!     [`Protocol`](super::StoreErrorKind::Protocol): the fail policy applies; the breaker is
//!     left alone.
//!
//!   Visitors with a valid admission token keep getting through whatever the kind.
//! - A **circuit breaker** shared by every clone: after an error that opens it the store is not
//!   called for [`RedisStoreBuilder::breaker_cooldown`] (default 3 s); then one probe goes
//!   through. Every outcome of the probe ends the half-open state: success or any quick answer
//!   (`OOM`, `BUSY`, a protocol error) closes the breaker, another opening error re-opens it,
//!   and a probe whose future is dropped (the client left) lets the next call probe.
//! - Logs say what changed, never one line per request: the breaker opening (with the error
//!   class) and closing (with the calls skipped meanwhile), and each error class when first
//!   seen, then at most once a minute with its count. [`RedisStore::metrics`] counts calls by
//!   error class.
//! - A room function not found after a restart, a failover or `FUNCTION FLUSH` is answered by
//!   loading the library (`FUNCTION LOAD REPLACE`, on every primary of a cluster) and retrying
//!   once (the single-use tickets' and the capacity controller's functions are in the same
//!   library); matching's library
//!   (`twr_match_v1`) likewise.
//! - The connection is made lazily: a Redis that is down when the process starts does not stop
//!   it from starting. [`RedisStore::check`] is the opposite, on request: a start-up check of the
//!   server (reachable, library loaded, not a replica, no `allkeys-*` eviction).
//! - Behind Redis Sentinel (`redis+sentinel://`), a failover is followed: after a connection
//!   error, a timeout or `READONLY` the next call asks the sentinels for the primary again, and a
//!   watcher asks them every second, so a planned failover is followed before the old primary
//!   is demoted. A failed call forgets only the connection it used: a late timeout of a call
//!   sent to the old primary keeps the connection another call has made to the new one.

mod auto;
mod batch;
mod breaker;
mod builder;
mod calls;
mod check;
mod checked_in;
mod early;
mod found;
mod protocol;
mod sentinel;
mod tickets;
mod url;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, RedisResult, ToRedisArgs};

pub use self::breaker::RedisStoreMetrics;
use self::breaker::{Breaker, ErrorClass};
pub use self::builder::RedisStoreBuilder;
pub(crate) use self::calls::{
    visitor_call, JOIN_FUNCTION as ROOM_JOIN_FUNCTION, LIBRARY as ROOM_LIBRARY_NAME,
};
use self::calls::{AdmitNext, Ban, Call, Configure, Stats, Sync, Visitor, VisitorOp};
pub use self::check::{RedisCheckError, RedisServerInfo};
pub(crate) use self::protocol::packed_numbers as protocol_numbers;
pub(crate) use self::protocol::SCRIPT as ROOM_LIBRARY;
pub(crate) use self::protocol::{bloom_bits, member};
use self::protocol::{decision, non_negative, protocol_error, reply, Op};
use self::sentinel::SentinelConnection;
use super::{
    AutoStore, Decision, MintFor, Minted, Redeemed, RoomSnapshot, RoomStats, SeenWaiters,
    SettingsChange, SettingsUpdate, SnapshotStore, Store, StoreError, StoreErrorKind, StoreFuture,
    TicketNonce, TicketStore, HISTORY_MINUTES, MAX_ADMIT_NEXT_PER_CALL,
};
use crate::clock::SharedClock;
use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::limits::LATEST_MS;

#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    /// The primary named by Redis Sentinel.
    Sentinel(SentinelConnection),
}

/// A [`Store`] on Redis or Valkey: single node, primary behind Redis Sentinel, or cluster.
/// Clones share one multiplexed connection and one circuit breaker.
#[derive(Clone)]
pub struct RedisStore {
    conn: Connection,
    prefix: Arc<str>,
    timeout: Duration,
    clock: Option<SharedClock>,
    /// Whether `clock` is a manual clock moved by hand (tests): sent as such, the library takes
    /// it as it is instead of holding it to the server's time.
    manual_clock: bool,
    breaker: Arc<Breaker>,
    /// The waiters this gateway already found in line, per room, in their abandon epoch.
    found: Arc<found::FoundInLine>,
    /// The liveness bits this gateway set in each room's current epochs (`checked_in.rs`).
    checked_in: Arc<checked_in::CheckedIn>,
    /// The rooms found with settings of a version this store cannot read, reported once.
    version_mixes: Arc<VersionMixes>,
    /// The newcomers gathered for each room's next batch of joins (`batch.rs`).
    join_batches: Arc<batch::JoinBatches>,
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
        self.breaker.metrics()
    }

    /// The keys of `room`, in the script's order.
    pub(crate) fn keys(&self, room: &str) -> [String; protocol::KEY_COUNT] {
        protocol::keys(&self.prefix, room)
    }

    /// The arguments every room function takes first ([`Call`]).
    fn call_arg(&self, policy: &RoomPolicy) -> Call {
        let [line_numbers, room_numbers] = protocol::packed_numbers(policy);
        Call {
            now: self.call_now(),
            line_numbers,
            room_numbers,
            // This store could not reach Redis within the last queue_ttl, so the waiters'
            // check-ins failed meanwhile: nobody is skipped or swept for silence now.
            excused: self.breaker.failed_within(policy.queue_ttl_ms),
        }
    }

    /// The room's keys, then, for release and ban, `ticket_of`'s single-use ticket record,
    /// which they end in the same step (its key in the room's hash tag, so a Cluster keeps it
    /// in the room's slot).
    fn room_keys(&self, policy: &RoomPolicy, ticket_of: Option<SessionId>) -> Vec<String> {
        let mut keys = self.keys(&policy.room).to_vec();
        keys.extend(ticket_of.map(|s| tickets::ticket_key(&self.prefix, &policy.room, s)));
        keys
    }

    /// A visitor's call ([`Visitor`]).
    fn visit(
        &self,
        op: VisitorOp,
        policy: &RoomPolicy,
        session: SessionId,
    ) -> StoreFuture<Vec<i64>> {
        // Only an enter (or join) places anyone, so only its schedule carries a draw.
        let draw = match op {
            VisitorOp::Enter | VisitorOp::Join => Op::Enter,
            VisitorOp::Poll | VisitorOp::Heartbeat | VisitorOp::Release => Op::Poll,
        };
        let args = Visitor {
            call: self.call_arg(policy),
            session,
            schedule: protocol::schedule_arg(draw, policy, Some(session)),
        }
        .argv();
        let ticket_of = (op == VisitorOp::Release).then_some(session);
        self.run_room(
            op.function(),
            policy,
            self.room_keys(policy, ticket_of),
            args,
        )
    }

    /// The key prefix, shared by every script of this store (the room's, matching's).
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key prefix of this store (`{prefix}` in the room's keys, `wr` unless the builder
    /// set another): the namespace another library's keys on the same server take too, so
    /// that one prefix keeps one deployment's keys apart from another's.
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The time argument this store's calls send, as the shared Lua reader of it
    /// (`script/time.lua`, [`TIME_LUA`](crate::store::redis_script::TIME_LUA)) takes it: `0`
    /// for the server's `TIME` (no injected clock), the injected clock's milliseconds (held to
    /// the server's within a second by the reader), or `m<ms>` for a manual clock (taken as it
    /// is). Another library's functions run through [`run_function`](Self::run_function) send
    /// it to decide by the same clock as the room's.
    pub fn time_arg(&self) -> String {
        self.call_now().to_string()
    }

    /// The time a room function's call names: the server's, the injected clock's (held to
    /// the server's by the library), or a manual clock's (taken as it is).
    pub(crate) fn call_now(&self) -> calls::Now {
        match &self.clock {
            None => calls::Now::Server,
            Some(c) if self.manual_clock => calls::Now::Manual(c.now_ms()),
            Some(c) => calls::Now::Sent(c.now_ms()),
        }
    }

    /// Runs the room function `function` (`FCALL`, the tickets' too) on the room of `policy`
    /// with `keys` and `args` under this store's deadline and circuit breaker, with its error
    /// classification: the one way the room's calls reach Redis, on a single node, a cluster or
    /// behind Sentinel alike.
    fn run_room<T, A>(
        &self,
        function: &'static str,
        policy: &RoomPolicy,
        keys: Vec<String>,
        args: Vec<A>,
    ) -> StoreFuture<T>
    where
        T: redis::FromRedisValue + Send + 'static,
        A: redis::ToRedisArgs + Send + 'static,
    {
        self.run(Callee::Room(function, policy.room.clone()), keys, args)
    }

    /// Runs `function` of another Redis function library than the room's (`FCALL function`
    /// with `keys` and `args`) on this store's connection (single node, Redis Cluster or
    /// Sentinel), under its deadline and circuit breaker, with its error classification, as
    /// the room's own calls run: the extension point of a library that shares the room's store
    /// (matching's, `tower-waiting-room-matching`). When the server has no such function,
    /// `library` (the library's whole source, `#!lua name=...` first) is loaded with
    /// `FUNCTION LOAD REPLACE` and the call retried once. The answer is the reply as the
    /// server gave it.
    ///
    /// Its keys should begin with [`key_prefix`](Self::key_prefix) (and, on a cluster, share a
    /// hash tag).
    pub fn run_function(
        &self,
        library: &'static str,
        function: &'static str,
        keys: Vec<String>,
        args: Vec<Vec<u8>>,
    ) -> StoreFuture<Vec<redis::Value>> {
        self.run(Callee::Function(library, function), keys, args)
    }

    fn run<T, A>(&self, callee: Callee, keys: Vec<String>, args: Vec<A>) -> StoreFuture<T>
    where
        T: redis::FromRedisValue + Send + 'static,
        A: redis::ToRedisArgs + Send + 'static,
    {
        let store = self.clone();
        let args: Vec<Vec<u8>> = args.iter().flat_map(ToRedisArgs::to_redis_args).collect();
        Box::pin(async move {
            // Held across the call: a probe whose future is dropped frees the half-open state.
            let permit = store.breaker.allow()?;
            // Behind Sentinel, the generation of the connection this call got, if it got one:
            // a failure forgets that connection only, not one made since by another call.
            let mut used = None;
            let run = async {
                match store.conn.clone() {
                    Connection::Single(mut c) => callee.invoke::<T, _>(&mut c, &keys, &args).await,
                    Connection::Cluster(mut c) => callee.invoke::<T, _>(&mut c, &keys, &args).await,
                    Connection::Sentinel(s) => {
                        let (mut c, generation) = s.get_with_generation().await?;
                        used = Some(generation);
                        callee.invoke::<T, _>(&mut c, &keys, &args).await
                    }
                }
            };
            let result = match tokio::time::timeout(store.timeout, run).await {
                Ok(Ok(reply)) => Ok(reply),
                Ok(Err(e)) => Err(protocol::classify(e)),
                Err(_) => Err((
                    ErrorClass::Timeout,
                    StoreError::with_source(
                        StoreErrorKind::Timeout,
                        format!("no answer within {:?}", store.timeout),
                    ),
                )),
            };
            if let (Err((class, _)), Connection::Sentinel(s)) = (&result, &store.conn) {
                // The node is gone or no longer the primary: ask the sentinels next time, unless
                // the connection this call used was replaced meanwhile (a call that timed out on
                // the old primary after another one connected to the new) or the call got none.
                if matches!(
                    class,
                    ErrorClass::Connection | ErrorClass::Timeout | ErrorClass::Failover
                ) {
                    s.forget(used);
                }
            }
            match result {
                Ok(reply) => {
                    permit.finish(Ok(()));
                    Ok(reply)
                }
                Err((class, e)) => {
                    permit.finish(Err(class));
                    if let (ErrorClass::VersionMix, Callee::Room(_, room)) = (class, &callee) {
                        store.version_mixes.report(room, &e);
                    }
                    Err(e)
                }
            }
        })
    }

    fn decide(
        &self,
        op: VisitorOp,
        policy: &RoomPolicy,
        session: SessionId,
    ) -> StoreFuture<Decision> {
        let call = self.visit(op, policy, session);
        Box::pin(async move { decision(&call.await?) })
    }
}

/// What a call runs: a room function (`FCALL` of the function named, its library loaded when
/// the server has no such function) on a room, or a function of another library (its source,
/// and the function's name), likewise.
enum Callee {
    Room(&'static str, Arc<str>),
    Function(&'static str, &'static str),
}

/// The rooms whose settings this store (and its clones) found written by a version it cannot
/// read, each reported once: the first call that meets it logs at `ERROR`, the others count
/// (`RedisStoreMetrics::version_mix`, the layer's metric), so a rolling upgrade's mix is told
/// loudly and once, not on every request.
#[derive(Default)]
struct VersionMixes(std::sync::Mutex<std::collections::HashSet<Arc<str>>>);

impl VersionMixes {
    fn report(&self, room: &Arc<str>, e: &StoreError) {
        let first = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(Arc::clone(room));
        if first {
            tracing::error!(
                room = &**room,
                error = %e,
                "the room's settings were written by a version of tower-waiting-room this \
                 gateway cannot read: it answers visitors \"busy\" (nobody let in, nobody's \
                 place lost) until it runs that version (see docs/redis.md, \"Settings\")"
            );
        }
    }
}

impl Callee {
    async fn invoke<T, C>(&self, con: &mut C, keys: &[String], args: &[Vec<u8>]) -> RedisResult<T>
    where
        T: FromRedisValue,
        C: ConnectionLike,
    {
        match self {
            Callee::Room(function, _) => fcall(con, protocol::SCRIPT, function, keys, args).await,
            Callee::Function(library, function) => fcall(con, library, function, keys, args).await,
        }
    }
}

/// `FCALL function` with `keys` and `args`; when the server has no such function, `library`
/// (the source of the library that defines it) is loaded and the call retried once.
async fn fcall<T, C>(
    con: &mut C,
    library: &str,
    function: &str,
    keys: &[String],
    args: &[Vec<u8>],
) -> RedisResult<T>
where
    T: FromRedisValue,
    C: ConnectionLike,
{
    let mut fcall = redis::cmd("FCALL");
    fcall.arg(function).arg(keys.len()).arg(keys);
    for arg in args {
        fcall.arg(arg);
    }
    match fcall.query_async::<T>(con).await {
        Err(e) if protocol::is_function_not_found(&e) => {
            // A flushed or restarted server, a failover to a replica that missed the load: load
            // the library (on every primary of a cluster, as redis-rs routes FUNCTION LOAD) and
            // retry once.
            load_library(con, library).await?;
            fcall.query_async::<T>(con).await
        }
        other => other,
    }
}

/// `FUNCTION LOAD REPLACE` of the library whose source is `library` (the room's, named
/// [`calls::LIBRARY`], or matching's): its name. In a cluster redis-rs sends it to every primary (and answers once
/// all succeeded).
async fn load_library<C: ConnectionLike>(con: &mut C, library: &str) -> RedisResult<String> {
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(library)
        .query_async(con)
        .await
}

impl Store for RedisStore {
    fn enter(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.decide(VisitorOp::Enter, policy, session)
    }

    /// An enter sent as `join` (`script/fast_path.lua`: the fast path takes a number first
    /// and looks for the caller's place only when the join finds one; main answers it as an
    /// enter).
    ///
    /// Newcomers who arrive while this store's join call for the room is in flight gather for
    /// the next, and one call places them all, in their order (`batch.rs`).
    fn join(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.join_in_batch(policy, session)
    }

    fn poll(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.decide(VisitorOp::Poll, policy, session)
    }

    fn heartbeat(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.decide(VisitorOp::Heartbeat, policy, session)
    }

    fn release(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<bool> {
        let call = self.visit(VisitorOp::Release, policy, session);
        Box::pin(async move {
            match *call.await? {
                [reply::RELEASED, released, ..] => Ok(released == 1),
                ref other => Err(protocol_error(other)),
            }
        })
    }

    fn stats(&self, policy: &RoomPolicy) -> StoreFuture<RoomStats> {
        let args = Stats {
            call: self.call_arg(policy),
            history_minutes: HISTORY_MINUTES as u64,
            schedule: protocol::schedule_arg(Op::Stats, policy, None),
        }
        .argv();
        let call: StoreFuture<Vec<i64>> =
            self.run_room(Stats::FUNCTION, policy, self.room_keys(policy, None), args);
        Box::pin(async move { protocol::stats(&call.await?) })
    }

    fn configure(
        &self,
        policy: &RoomPolicy,
        change: SettingsChange,
    ) -> StoreFuture<SettingsUpdate> {
        let schedule = protocol::schedule_arg(Op::Configure, policy, None);
        let args = protocol::configure(self.call_arg(policy), &change, schedule).argv();
        let call: StoreFuture<Vec<i64>> = self.run_room(
            Configure::FUNCTION,
            policy,
            self.room_keys(policy, None),
            args,
        );
        Box::pin(async move {
            match *call.await? {
                [reply::SETTINGS, c, r, p, o, c0, r0, p0, o0] => Ok(SettingsUpdate::new(
                    protocol::settings(&[c0, r0, p0, o0])?,
                    protocol::settings(&[c, r, p, o])?,
                )),
                ref other => Err(protocol_error(other)),
            }
        })
    }

    fn admit_next(&self, policy: &RoomPolicy, count: u32) -> StoreFuture<u64> {
        let count = count.min(MAX_ADMIT_NEXT_PER_CALL);
        let args = AdmitNext {
            call: self.call_arg(policy),
            count: u64::from(count),
            schedule: protocol::schedule_arg(Op::AdmitNext, policy, None),
        }
        .argv();
        let call: StoreFuture<Vec<i64>> = self.run_room(
            AdmitNext::FUNCTION,
            policy,
            self.room_keys(policy, None),
            args,
        );
        Box::pin(async move {
            match *call.await? {
                [reply::ADMITTED_NEXT, n] => Ok(non_negative(n)),
                ref other => Err(protocol_error(other)),
            }
        })
    }

    fn ban(&self, policy: &RoomPolicy, session: SessionId, until_ms: u64) -> StoreFuture<bool> {
        let args = Ban {
            call: self.call_arg(policy),
            session,
            // The script refuses a later end (`WRARGS`): a ban "for ever" is kept as the
            // latest time a store holds, as the embedded store keeps it.
            until_ms: i64::try_from(until_ms.min(LATEST_MS)).unwrap_or(i64::MAX),
            schedule: protocol::schedule_arg(Op::Ban, policy, Some(session)),
        }
        .argv();
        let call: StoreFuture<Vec<i64>> = self.run_room(
            Ban::FUNCTION,
            policy,
            self.room_keys(policy, Some(session)),
            args,
        );
        Box::pin(async move {
            match *call.await? {
                [reply::BANNED_NOW, had] => Ok(had == 1),
                ref other => Err(protocol_error(other)),
            }
        })
    }

    fn tickets(self: Arc<Self>) -> Option<Arc<dyn TicketStore>> {
        Some(self)
    }

    /// The capacity controller's record and functions (`auto.rs`, `script/auto.lua`).
    fn auto(self: Arc<Self>) -> Option<Arc<dyn AutoStore>> {
        Some(self)
    }

    fn snapshots(self: Arc<Self>) -> Option<Arc<dyn SnapshotStore>> {
        Some(self)
    }
}

impl TicketStore for RedisStore {
    fn mint_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
        mint_for: MintFor,
    ) -> StoreFuture<Minted> {
        self.mint(policy, session, fresh, expires_at_ms, mint_for)
    }

    fn redeem_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        nonce: TicketNonce,
    ) -> StoreFuture<Redeemed> {
        self.redeem(policy, session, nonce)
    }
}

impl SnapshotStore for RedisStore {
    fn sync(&self, policy: &RoomPolicy, seen: SeenWaiters) -> StoreFuture<RoomSnapshot> {
        let now = self.clock.as_ref().map_or_else(
            || crate::config::unix_ms(std::time::SystemTime::now()),
            |c| c.now_ms(),
        );
        let at = found::Epochs {
            now_ms: now,
            width_ms: crate::store::LivenessRule::for_abandon(policy).width_ms,
            max_queue_len: policy.max_queue_len,
        };
        // The turn horizon as the script keeps it, a whole number (floored: more count as
        // behind it, never fewer); one it cannot keep (a registrant's score, below 0) puts
        // everyone ahead of it, so every turn check-in is written.
        let horizon = seen
            .horizon()
            .filter(|h| *h >= 0.0 && *h < protocol::MAX_SAFE_SCORE)
            .map(|h| h.floor() as u64);
        let (mut near, behind) = seen.into_parts();
        let behind = if horizon.is_some() {
            behind
        } else {
            near.extend(behind);
            Vec::new()
        };
        // The sessions found in line in their abandon epoch are not looked up again (found.rs).
        let (mut look_up, known) = self.found.split(&policy.room, at, near);
        let (look_up_behind, known_behind) = self.found.split(&policy.room, at, behind);
        let ahead = look_up.len();
        // Of those, the ones whose bits this gateway set in a ring's current epoch already are
        // sent apart, so the script writes them only if that epoch has ended (checked_in.rs);
        // behind the horizon, so are those looked up whose bits are set: looked up only, last.
        let bits = protocol::bloom_bits(policy.max_queue_len);
        let troubles = self.breaker.troubles();
        // Near the abandon ring's next epoch, the found ones due are written into it early
        // (early.rs); once it began, what was written early counts as set in it.
        let early = self.checked_in.early(
            &policy.room,
            bits,
            troubles,
            early::Window {
                now_ms: now,
                width_ms: at.width_ms,
            },
            known.iter().chain(&known_behind),
        );
        let (look_up_behind, set_behind) =
            self.checked_in
                .split_set(&policy.room, bits, troubles, look_up_behind);
        look_up.extend(look_up_behind);
        let written = look_up.len();
        look_up.extend(set_behind);
        let plan = self.checked_in.plan(
            &policy.room,
            bits,
            troubles,
            protocol::offsets_of(&known, bits),
            protocol::offsets_of(&known_behind, bits)
                .chain(protocol::offsets_of(&look_up[written..], bits)),
        );
        // The ids of the sessions to look up (the first `ahead` of them ahead of the horizon)
        // and their two Bloom offsets each (computed here: the script only looks them up);
        // the two offsets of each of the others, whose bits are set without a lookup, by what
        // this gateway set already.
        let [turn_epoch, abandon_epoch] = plan.named;
        let args = Sync {
            call: self.call_arg(policy),
            sessions: protocol::seen_arg(&look_up),
            both: protocol::offsets_arg(plan.both),
            turn_epoch,
            abandon_epoch,
            turn_only: protocol::offsets_arg(plan.turn_only),
            neither: protocol::offsets_arg(plan.neither),
            offsets: protocol::offsets_arg(protocol::offsets_of(&look_up[..written], bits)),
            abandon_only: protocol::offsets_arg(plan.abandon_only),
            behind_set: protocol::offsets_arg(plan.behind_set),
            horizon: horizon.map_or_else(Vec::new, |h| {
                format!("{ahead} {h} {}", look_up.len() - written).into_bytes()
            }),
            early: protocol::offsets_arg(early.iter().copied()),
            schedule: protocol::schedule_arg(Op::Sync, policy, None),
        }
        .argv();
        let call: StoreFuture<Vec<redis::Value>> =
            self.run_room(Sync::FUNCTION, policy, self.room_keys(policy, None), args);
        let (found, checked_in, breaker) = (
            Arc::clone(&self.found),
            Arc::clone(&self.checked_in),
            Arc::clone(&self.breaker),
        );
        let room = policy.room.clone();
        Box::pin(async move {
            let protocol::SyncReply {
                snapshot,
                epochs,
                early: early_epoch,
            } = protocol::snapshot(&call.await?)?;
            found.found(&room, at, &look_up, &snapshot.unknown);
            // Now set in both rings' current epochs: every session sent ahead of the horizon
            // but those looked up and found without a place; in the abandon ring's, those
            // behind it (a looked-up one the script found ahead of it got its turn bits too,
            // which the copy need not know).
            let unknown: std::collections::HashSet<&SessionId> = snapshot.unknown.iter().collect();
            let placed = |sessions: &[SessionId]| -> Vec<SessionId> {
                sessions
                    .iter()
                    .filter(|s| !unknown.contains(s))
                    .copied()
                    .collect()
            };
            // Those looked up only were sent with the found ones behind it: set, placed or not.
            let (placed_ahead, placed_behind) =
                (placed(&look_up[..ahead]), placed(&look_up[ahead..written]));
            checked_in.confirm(
                &room,
                bits,
                (troubles, breaker.troubles()),
                epochs,
                protocol::offsets_of(&known, bits).chain(protocol::offsets_of(&placed_ahead, bits)),
                protocol::offsets_of(&known_behind, bits)
                    .chain(protocol::offsets_of(&placed_behind, bits))
                    .chain(protocol::offsets_of(&look_up[written..], bits)),
            );
            checked_in.confirm_early(
                &room,
                bits,
                (troubles, breaker.troubles()),
                early_epoch,
                early.into_iter(),
            );
            Ok(snapshot)
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
                    Connection::Sentinel(_) => "sentinel",
                },
            )
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}
