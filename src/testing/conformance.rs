//! The store conformance suite: the semantics of [`crate::store`] as test cases that any
//! [`Store`] implementation can run, including your own.
//!
//! Available with the `testing` feature:
//!
//! ```toml
//! [dev-dependencies]
//! tower-waiting-room = { version = "0.1", features = ["testing"] }
//! ```
//!
//! Every case is a `pub async fn(&Harness)` that panics on failure. A [`Harness`] is a store
//! and the [`ManualClock`] it decides by. There are three ways to run the suite:
//!
//! - [`conformance_tests!`](crate::conformance_tests) in a test file: one `#[test]` per case,
//!   each on a fresh harness, reported by name. This is how the crate tests its own stores.
//! - [`run_all`]: every case in turn on one harness, from any async test.
//! - [`CASES`]: the list behind both, to pick cases or run them your own way; or call a case
//!   function such as [`fifo_order`] directly.
//!
//! ```
//! use std::sync::Arc;
//!
//! use tower_waiting_room::testing::ManualClock;
//! use tower_waiting_room::store::MemoryStore;
//! use tower_waiting_room::testing::conformance::{self, Harness, START_MS};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // The store must decide by the harness clock (or be sent its time): the cases move time.
//! let clock = ManualClock::new(START_MS);
//! let harness = Harness::new(Arc::new(MemoryStore::with_clock(clock.clone())), clock);
//!
//! // One case...
//! conformance::fifo_order(&harness).await;
//! // ...or all of them, in the order of `CASES`.
//! conformance::run_all(&harness).await;
//! # }
//! ```
//!
//! The `heals_*` cases check that a store answers, and repairs what it can, after its room was
//! damaged behind its back (a key lost to eviction, a value of the wrong type, a number damaged
//! into `inf` or `2.5`, a lost check-in: see [`Damage`]). They need a harness that can do the damage, given with
//! [`Harness::with_damage`]; damage a harness cannot do (it answers `Err(reason)`) is skipped,
//! and the reason printed on stderr. The crate's `MemoryStore` does what applies to typed Rust
//! values through a hidden test hook; the Redis harness uses real commands (`DEL`, `SET`,
//! `HSET`, `ZREM`, `ZADD`) on the room's keys.
//!
//! Rules for the cases (so that a shared, external store such as Redis can run them too):
//! - time only moves through `harness.clock.advance(..)` (the store must read that clock, or be
//!   sent its time); nothing ever sleeps;
//! - every case works in rooms of its own, named by [`Harness::policy`], which are unique across
//!   processes and runs, so cases can share one store and run in parallel.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
pub use crate::store::damage::{BadNumber, Damage, Field, Part};
use crate::store::{
    AdmissionCounts, Decision, RoomSnapshot, RoomStats, SeenWaiters, SnapshotStore, Store,
    TicketStore, ADMISSION_BUCKET_MS, MAX_PROMOTIONS_PER_CALL, MAX_SWEEP_PER_CALL,
};
use crate::testing::ManualClock;
use crate::{RoomPolicy, SessionId};

mod numbers;
mod operations;
mod pace;
mod schedule;
mod snapshot;
mod tickets;
pub use self::numbers::*;
pub use self::operations::*;
pub use self::pace::*;
pub use self::schedule::*;
pub use self::snapshot::*;
pub use self::tickets::*;

/// A good time for a harness clock to start at: 2026-01-01T00:00:00Z.
pub const START_MS: u64 = super::TEST_EPOCH_MS;

/// Slot lifetime of the suite's rooms.
pub const ACTIVE_TTL: Duration = Duration::from_secs(60);
/// Grant lifetime of the suite's rooms.
pub const GRANT_TTL: Duration = Duration::from_secs(10);
/// Queue check-in lifetime of the suite's rooms.
pub const QUEUE_TTL: Duration = Duration::from_secs(30);

/// Abandonment time of the suite's rooms: a waiter silent for longer is dropped from anywhere in
/// the line.
pub const ABANDON_AFTER: Duration = Duration::from_secs(300);

const ACTIVE_MS: u64 = ACTIVE_TTL.as_millis() as u64;
const GRANT_MS: u64 = GRANT_TTL.as_millis() as u64;
const QUEUE_MS: u64 = QUEUE_TTL.as_millis() as u64;
const ABANDON_MS: u64 = ABANDON_AFTER.as_millis() as u64;

/// What every case runs against: a store, the clock it reads and, for the cases that check a
/// store heals, a way to damage a room behind the store's back ([`Harness::with_damage`]).
pub struct Harness {
    /// The store under test.
    pub store: Arc<dyn Store>,
    /// The clock the store decides by; the only way time moves.
    pub clock: ManualClock,
    damage: Option<Arc<DamageHook>>,
}

impl fmt::Debug for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Harness")
            .field("clock", &self.clock)
            .field("damage", &self.damage.is_some())
            .finish_non_exhaustive()
    }
}

/// The future a damage hook returns: `Err(reason)` when the harness's store cannot suffer that
/// damage (for example, a value of the wrong type in a store of typed Rust values); the case
/// then skips that damage, saying why.
pub type DamageFuture = Pin<Box<dyn Future<Output = Result<(), &'static str>> + Send + 'static>>;

/// Does [`Damage`] to a room of the harness's store: see [`Harness::with_damage`].
pub type DamageHook = dyn Fn(&RoomPolicy, Damage) -> DamageFuture + Send + Sync;

static ROOM_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Harness {
    /// A harness for `store`, which must read (or be sent the time of) `clock`.
    pub fn new(store: Arc<dyn Store>, clock: ManualClock) -> Self {
        Self {
            store,
            clock,
            damage: None,
        }
    }

    /// Gives the harness a way to damage a room's state behind the store's back, for the cases
    /// that check the store heals (`heals_*`). Without it those cases skip every damage (and say
    /// so on stderr).
    pub fn with_damage<F>(mut self, hook: F) -> Self
    where
        F: Fn(&RoomPolicy, Damage) -> DamageFuture + Send + Sync + 'static,
    {
        self.damage = Some(Arc::new(hook));
        self
    }

    /// Does `damage` to the room of `policy`: `true` if done, `false` if the harness cannot do
    /// it (the reason goes to stderr, and the case skips that damage).
    pub async fn damage(&self, policy: &RoomPolicy, damage: Damage) -> bool {
        let Some(hook) = &self.damage else {
            eprintln!("skipped {damage:?}: the harness has no damage hook");
            return false;
        };
        match hook(policy, damage).await {
            Ok(()) => true,
            Err(why) => {
                eprintln!("skipped {damage:?}: {why}");
                false
            }
        }
    }

    /// A room id no other case, process or earlier run uses.
    pub fn room_id(&self) -> String {
        let n = ROOM_COUNTER.fetch_add(1, Ordering::Relaxed);
        let random = SessionId::random().to_string();
        format!("conf-{n}-{}", &random[..16])
    }

    /// A fresh room of `capacity` with the suite's TTLs and abandonment time, no admission rate,
    /// default max line.
    pub fn policy(&self, capacity: u32) -> RoomPolicy {
        RoomPolicy::new(&self.room_id(), capacity)
            .with_ttls(ACTIVE_TTL, GRANT_TTL, QUEUE_TTL)
            .with_abandon_after(ABANDON_AFTER)
    }

    /// The store clock's time.
    pub fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Moves the clock forward by `ms`.
    pub fn advance_ms(&self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
    }

    /// `enter`, failing the test on a store error.
    pub async fn enter(&self, policy: &RoomPolicy, session: SessionId) -> Decision {
        self.store
            .enter(policy, session)
            .await
            .unwrap_or_else(|e| panic!("enter failed: {e}"))
    }

    /// `poll`, failing the test on a store error.
    pub async fn poll(&self, policy: &RoomPolicy, session: SessionId) -> Decision {
        self.store
            .poll(policy, session)
            .await
            .unwrap_or_else(|e| panic!("poll failed: {e}"))
    }

    /// `heartbeat`, failing the test on a store error.
    pub async fn heartbeat(&self, policy: &RoomPolicy, session: SessionId) -> Decision {
        self.store
            .heartbeat(policy, session)
            .await
            .unwrap_or_else(|e| panic!("heartbeat failed: {e}"))
    }

    /// `release`, failing the test on a store error.
    pub async fn release(&self, policy: &RoomPolicy, session: SessionId) -> bool {
        self.store
            .release(policy, session)
            .await
            .unwrap_or_else(|e| panic!("release failed: {e}"))
    }

    /// `stats`, failing the test on a store error.
    pub async fn stats(&self, policy: &RoomPolicy) -> RoomStats {
        self.store
            .stats(policy)
            .await
            .unwrap_or_else(|e| panic!("stats failed: {e}"))
    }

    /// The store's single-use tickets ([`Store::tickets`]), or `None` if it keeps none: the
    /// cases of tickets then skip them (and say so on stderr).
    pub fn tickets(&self) -> Option<Arc<dyn TicketStore>> {
        let tickets = Arc::clone(&self.store).tickets();
        if tickets.is_none() {
            eprintln!("skipped: the store keeps no single-use tickets (Store::tickets)");
        }
        tickets
    }

    /// The store's snapshots (`Store::snapshots`), or `None` if it keeps none: the cases of
    /// snapshots and of the sweep (which only `sync` does) then skip them (and say so on
    /// stderr).
    pub fn snapshots(&self) -> Option<Arc<dyn SnapshotStore>> {
        let snapshots = Arc::clone(&self.store).snapshots();
        if snapshots.is_none() {
            eprintln!("skipped: the store keeps no snapshots (Store::snapshots)");
        }
        snapshots
    }

    /// `sync` (a gateway's refresh of its snapshot, reporting `seen` as checked in), failing
    /// the test on a store error, or if the store keeps no snapshots (a case asks
    /// [`snapshots`](Self::snapshots) first).
    pub async fn sync(&self, policy: &RoomPolicy, seen: impl Into<SeenWaiters>) -> RoomSnapshot {
        Arc::clone(&self.store)
            .snapshots()
            .expect("sync: the store keeps no snapshots")
            .sync(policy, seen.into())
            .await
            .unwrap_or_else(|e| panic!("sync failed: {e}"))
    }

    /// Asserts the room's counts.
    #[track_caller]
    pub fn check_stats(stats: RoomStats, admitted: u64, granted: u64, waiting: u64) {
        assert_eq!(
            (stats.admitted, stats.granted, stats.waiting),
            (admitted, granted, waiting),
            "stats (admitted, granted, waiting), got {stats:?}"
        );
    }

    /// Enters `n` fresh sessions, expecting each to join the line; returns them in order.
    pub async fn enter_waiters(&self, policy: &RoomPolicy, n: u64) -> Vec<SessionId> {
        let before = self.stats(policy).await.waiting;
        let mut out = Vec::new();
        for i in 1..=n {
            let s = SessionId::random();
            let d = self.enter(policy, s).await;
            waiting(d, before + i, before + i, &format!("waiter #{i} entering"));
            out.push(s);
        }
        out
    }

    /// Enters a fresh session, expecting it to be admitted at once with a full slot.
    pub async fn enter_admitted(&self, policy: &RoomPolicy) -> SessionId {
        let s = SessionId::random();
        let d = self.enter(policy, s).await;
        assert_eq!(
            d,
            Decision::Admitted {
                expires_at_ms: self.now() + policy.active_ttl_ms
            },
            "a newcomer with a free slot and nobody waiting is admitted for active_ttl"
        );
        s
    }
}

/// The slot expiry of an `Admitted`, or a panic naming `what`.
#[track_caller]
fn admitted(d: Decision, what: &str) -> u64 {
    match d {
        Decision::Admitted { expires_at_ms } => expires_at_ms,
        other => panic!("{what}: expected Admitted, got {other:?}"),
    }
}

/// Asserts a `Waiting` with this position and line length (whatever the admission counts).
#[track_caller]
fn waiting(d: Decision, position: u64, waiting: u64, what: &str) {
    match d {
        Decision::Waiting {
            position: p,
            waiting: w,
            ..
        } => assert_eq!((p, w), (position, waiting), "{what}: (position, waiting)"),
        other => panic!("{what}: expected Waiting, got {other:?}"),
    }
}

/// Asserts a `Waiting` (whatever it says), or a panic naming `what`.
#[track_caller]
fn is_waiting(d: Decision, what: &str) {
    assert!(
        matches!(d, Decision::Waiting { .. }),
        "{what}: expected Waiting, got {d:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Capacity
// ---------------------------------------------------------------------------------------------

/// Never more than `capacity` admitted at once: the first `capacity` newcomers get in, the next
/// ones wait.
pub async fn capacity_is_never_exceeded(h: &Harness) {
    let p = h.policy(3);
    for _ in 0..3 {
        h.enter_admitted(&p).await;
    }
    for i in 1..=5 {
        let d = h.enter(&p, SessionId::random()).await;
        waiting(d, i, i, "a newcomer to a full room waits");
    }
    let stats = h.stats(&p).await;
    Harness::check_stats(stats, 3, 0, 5);
    assert_eq!(stats.capacity, 3);
}

/// Granted-but-unclaimed slots count against capacity: a slot granted to the head of the line is
/// not given to anyone else before it is claimed or expires.
pub async fn granted_slots_count_against_capacity(h: &Harness) {
    let p = h.policy(2);
    let a = h.enter_admitted(&p).await;
    let _b = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 2).await;
    assert!(h.release(&p, a).await);
    // w[0] now holds a granted slot without having come back.
    Harness::check_stats(h.stats(&p).await, 1, 1, 1);
    let n = SessionId::random();
    waiting(
        h.enter(&p, n).await,
        2,
        2,
        "a newcomer waits while the free slot is granted to someone else",
    );
    waiting(
        h.poll(&p, w[1]).await,
        1,
        2,
        "the second waiter does not get the granted slot",
    );
    Harness::check_stats(h.stats(&p).await, 1, 1, 2);
    // Time passing within grant_ttl changes nothing.
    h.advance_ms(GRANT_MS / 2);
    Harness::check_stats(h.stats(&p).await, 1, 1, 2);
    admitted(h.enter(&p, w[0]).await, "the grantee claims");
    Harness::check_stats(h.stats(&p).await, 2, 0, 2);
}

// Long by design: one seeded random walk over every operation, with the reference model of
// capacity and line kept beside it and checked after each step.
/// Random enters, polls, heartbeats, releases and clock moves never leave more than `capacity`
/// sessions holding a live slot, and every answer is consistent with what the store said before.
pub async fn capacity_holds_under_random_operations(h: &Harness) {
    let cap = 4u64;
    let p = h.policy(cap as u32);
    let sessions: Vec<SessionId> = (0..24).map(|_| SessionId::random()).collect();
    // What each session was last told it holds: (expires_at_ms, claimed).
    let mut held: HashMap<SessionId, (u64, bool)> = HashMap::new();
    let mut rng = super::case::Rng(0x9e37_79b9_7f4a_7c15);
    for step in 0..3000 {
        let s = sessions[rng.below(sessions.len() as u64) as usize];
        let now = h.now();
        let live = held.get(&s).copied().filter(|&(e, _)| e > now);
        match rng.below(100) {
            0..=39 => match h.enter(&p, s).await {
                Decision::Admitted { expires_at_ms } => {
                    assert_eq!(expires_at_ms, now + p.active_ttl_ms, "step {step}: enter");
                    held.insert(s, (expires_at_ms, true));
                }
                Decision::Waiting {
                    position, waiting, ..
                } => {
                    assert!(
                        live.is_none(),
                        "step {step}: a slot holder was told to wait"
                    );
                    assert!(
                        (1..=waiting).contains(&position),
                        "step {step}: {position}/{waiting}"
                    );
                    held.remove(&s);
                }
                other => panic!("step {step}: enter answered {other:?}"),
            },
            40..=64 => match h.poll(&p, s).await {
                Decision::Admitted { expires_at_ms } => {
                    assert!(expires_at_ms > now, "step {step}: poll of an expired slot");
                    match live {
                        Some((e, claimed)) => {
                            assert_eq!(expires_at_ms, e, "step {step}: poll changed the expiry");
                            held.insert(s, (e, claimed));
                        }
                        None => {
                            assert!(
                                expires_at_ms <= now + p.grant_ttl_ms,
                                "step {step}: a new grant lasts at most grant_ttl"
                            );
                            held.insert(s, (expires_at_ms, false));
                        }
                    }
                }
                Decision::Waiting {
                    position, waiting, ..
                } => {
                    assert!(
                        live.is_none(),
                        "step {step}: a slot holder was told to wait"
                    );
                    assert!(
                        (1..=waiting).contains(&position),
                        "step {step}: {position}/{waiting}"
                    );
                    held.remove(&s);
                }
                Decision::Unknown => {
                    assert!(live.is_none(), "step {step}: a slot holder is unknown");
                    held.remove(&s);
                }
                other => panic!("step {step}: poll answered {other:?}"),
            },
            65..=74 => match h.heartbeat(&p, s).await {
                Decision::Admitted { expires_at_ms } => {
                    assert_eq!(
                        expires_at_ms,
                        now + p.active_ttl_ms,
                        "step {step}: heartbeat"
                    );
                    held.insert(s, (expires_at_ms, true));
                }
                Decision::Unknown => {
                    assert!(live.is_none(), "step {step}: heartbeat lost a live slot");
                    held.remove(&s);
                }
                other => panic!("step {step}: heartbeat answered {other:?}"),
            },
            75..=89 => {
                let released = h.release(&p, s).await;
                assert!(
                    released || live.is_none(),
                    "step {step}: release of a live slot said false"
                );
                held.remove(&s);
            }
            _ => h.advance_ms(rng.below(4_000)),
        }
        let now = h.now();
        let holders = held.values().filter(|&&(e, _)| e > now).count() as u64;
        let stats = h.stats(&p).await;
        assert!(
            holders <= cap,
            "step {step}: {holders} sessions hold a live slot"
        );
        assert!(
            stats.admitted + stats.granted <= cap,
            "step {step}: stats over capacity: {stats:?}"
        );
        assert!(
            stats.admitted + stats.granted >= holders,
            "step {step}: {holders} known live slots but stats {stats:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Order
// ---------------------------------------------------------------------------------------------

/// First come, first served: many waiters, released one slot at a time, are admitted strictly in
/// arrival order, and everyone's position is exact at every step.
pub async fn fifo_order(h: &Harness) {
    let p = h.policy(1);
    let mut holder = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 15).await;
    let n = line.len() as u64;
    for (i, &next) in line.iter().enumerate() {
        let i = i as u64;
        assert!(h.release(&p, holder).await, "release of the holder");
        admitted(h.poll(&p, next).await, "the head of the line gets the slot");
        for (j, &behind) in line.iter().enumerate().skip(i as usize + 1) {
            let j = j as u64;
            waiting(
                h.poll(&p, behind).await,
                j - i,
                n - i - 1,
                "the rest keep waiting in order",
            );
        }
        admitted(h.enter(&p, next).await, "the grantee claims");
        holder = next;
    }
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
}

/// FIFO also holds when several slots free at once: the freed slots go to the first in line.
pub async fn fifo_order_several_slots(h: &Harness) {
    let p = h.policy(3);
    let inside = [
        h.enter_admitted(&p).await,
        h.enter_admitted(&p).await,
        h.enter_admitted(&p).await,
    ];
    let line = h.enter_waiters(&p, 6).await;
    assert!(h.release(&p, inside[1]).await);
    assert!(h.release(&p, inside[2]).await);
    admitted(h.poll(&p, line[0]).await, "first in line");
    admitted(h.poll(&p, line[1]).await, "second in line");
    for (j, &w) in line.iter().enumerate().skip(2) {
        waiting(h.poll(&p, w).await, j as u64 - 1, 4, "the rest wait");
    }
    Harness::check_stats(h.stats(&p).await, 1, 2, 4);
}

/// No queue jumping: a newcomer waits while someone is waiting, even right after a slot frees
/// (by release or by expiry); the freed slot goes to the head of the line.
pub async fn no_queue_jumping(h: &Harness) {
    // Freed by release.
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    assert!(h.release(&p, a).await);
    let n = SessionId::random();
    waiting(
        h.enter(&p, n).await,
        1,
        1,
        "a newcomer after a release waits",
    );
    admitted(h.poll(&p, w).await, "the head got the freed slot");

    // Freed by expiry, and the newcomer's call is the first one after it.
    let p = h.policy(1);
    let _a = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    for _ in 0..2 {
        h.advance_ms(ACTIVE_MS / 3);
        waiting(h.poll(&p, w).await, 1, 1, "still waiting");
    }
    h.advance_ms(ACTIVE_MS / 3 - 1);
    waiting(h.poll(&p, w).await, 1, 1, "1 ms before the slot ends");
    h.advance_ms(2);
    let n = SessionId::random();
    waiting(
        h.enter(&p, n).await,
        1,
        1,
        "a newcomer arriving as a slot expires waits",
    );
    admitted(h.poll(&p, w).await, "the head got the expired slot");
    Harness::check_stats(h.stats(&p).await, 0, 1, 1);
}

/// Re-entering keeps the old place: same position, no duplicate entry, for waiters; no second
/// slot for holders.
pub async fn reentering_keeps_place(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    h.advance_ms(1_000);
    waiting(h.enter(&p, line[1]).await, 2, 3, "re-entering, middle");
    waiting(h.enter(&p, line[1]).await, 2, 3, "re-entering again");
    waiting(h.enter(&p, line[0]).await, 1, 3, "re-entering, head");
    waiting(h.enter(&p, line[2]).await, 3, 3, "re-entering, tail");
    Harness::check_stats(h.stats(&p).await, 1, 0, 3);
    let late = h.enter_waiters(&p, 1).await[0];
    waiting(
        h.enter(&p, line[1]).await,
        2,
        4,
        "re-entering after newcomers",
    );
    waiting(h.poll(&p, late).await, 4, 4, "the newcomer is behind");

    // The holder re-entering keeps (and extends) its one slot.
    h.advance_ms(1_000);
    let e = admitted(h.enter(&p, a).await, "the holder re-enters");
    assert_eq!(e, h.now() + ACTIVE_MS, "re-entering extends the slot");
    Harness::check_stats(h.stats(&p).await, 1, 0, 4);
    waiting(
        h.poll(&p, line[0]).await,
        1,
        4,
        "nobody moved up: no slot was taken twice or freed",
    );
}

/// Positions are 1-based, `waiting` is the length of the line, and positions move up as people
/// ahead leave or get in.
pub async fn positions_move_up(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 5).await;
    for (i, &w) in line.iter().enumerate() {
        waiting(h.poll(&p, w).await, i as u64 + 1, 5, "initial positions");
    }
    // The third leaves.
    assert!(h.release(&p, line[2]).await);
    waiting(h.poll(&p, line[0]).await, 1, 4, "ahead of the leaver");
    waiting(h.poll(&p, line[1]).await, 2, 4, "ahead of the leaver");
    waiting(h.poll(&p, line[3]).await, 3, 4, "behind the leaver");
    waiting(h.poll(&p, line[4]).await, 4, 4, "behind the leaver");
    assert_eq!(
        h.poll(&p, line[2]).await,
        Decision::Unknown,
        "the leaver is gone"
    );
    // The head gets in.
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, line[0]).await, "the head is promoted");
    waiting(h.poll(&p, line[1]).await, 1, 3, "moved up");
    waiting(h.poll(&p, line[3]).await, 2, 3, "moved up");
    waiting(h.poll(&p, line[4]).await, 3, 3, "moved up");
    Harness::check_stats(h.stats(&p).await, 0, 1, 3);
}

// ---------------------------------------------------------------------------------------------
// Poll
// ---------------------------------------------------------------------------------------------

/// Poll of an unknown session is `Unknown` and creates nothing: no place, no slot, no count.
pub async fn poll_unknown_creates_nothing(h: &Harness) {
    // In a fresh room with free capacity.
    let p = h.policy(1);
    let x = SessionId::random();
    assert_eq!(h.poll(&p, x).await, Decision::Unknown);
    assert_eq!(h.poll(&p, x).await, Decision::Unknown, "still unknown");
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    h.enter_admitted(&p).await;

    // In a busy room.
    let p = h.policy(2);
    h.enter_admitted(&p).await;
    h.enter_admitted(&p).await;
    h.enter_waiters(&p, 2).await;
    let before = h.stats(&p).await;
    let y = SessionId::random();
    assert_eq!(h.poll(&p, y).await, Decision::Unknown);
    assert_eq!(
        h.stats(&p).await,
        before,
        "poll of an unknown changed the room"
    );
    waiting(
        h.enter(&p, y).await,
        3,
        3,
        "after the poll, entering joins at the back",
    );
}

/// A waiter who keeps polling keeps their place for as long as they poll, far beyond queue_ttl.
pub async fn polling_waiter_is_not_skipped(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    for _ in 0..10 {
        h.advance_ms(QUEUE_MS / 3);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        waiting(h.poll(&p, line[0]).await, 1, 2, "head keeps polling");
        waiting(h.poll(&p, line[1]).await, 2, 2, "second keeps polling");
    }
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, line[0]).await, "the polling head gets the slot");
    waiting(h.poll(&p, line[1]).await, 1, 1, "second moves up");
}

/// A waiter silent for longer than queue_ttl is skipped when their turn comes: the slot goes to
/// the next live waiter, and the silent one has lost their place.
pub async fn silent_waiter_is_skipped(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    let (silent, live) = (line[0], line[1]);
    for _ in 0..4 {
        h.advance_ms(QUEUE_MS / 3);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        assert!(
            matches!(h.poll(&p, live).await, Decision::Waiting { .. }),
            "the live waiter waits"
        );
    }
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, live).await, "the live waiter gets the slot");
    assert_eq!(
        h.poll(&p, silent).await,
        Decision::Unknown,
        "the silent waiter lost their place"
    );
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);
    waiting(
        h.enter(&p, silent).await,
        1,
        1,
        "coming back, the silent one joins at the back and gets no slot",
    );
}

/// A waiter silent for longer than queue_ttl (but not abandon_after) who comes back before their
/// turn keeps their place: from the middle of the line, and from its head while no slot has
/// freed yet.
pub async fn returning_waiter_keeps_place(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    // The head and the second go away for twice queue_ttl; the third keeps polling.
    for _ in 0..6 {
        h.advance_ms(QUEUE_MS / 3);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        waiting(h.poll(&p, line[2]).await, 3, 3, "the absent still count");
    }
    Harness::check_stats(h.stats(&p).await, 1, 0, 3);
    waiting(
        h.poll(&p, line[1]).await,
        2,
        3,
        "back in the middle: same place",
    );
    waiting(
        h.poll(&p, line[0]).await,
        1,
        3,
        "back at the head before any slot freed: same place",
    );
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, line[0]).await, "the returned head gets the slot");
    waiting(
        h.poll(&p, line[1]).await,
        1,
        2,
        "the returned second moves up",
    );
    waiting(h.poll(&p, line[2]).await, 2, 2, "the third moves up");
}

/// A waiter who went silent in the middle of the line and is still silent (for longer than
/// queue_ttl) when their turn comes is skipped then: the slot goes to the next live waiter.
pub async fn silent_at_their_turn_is_skipped(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    let (first, silent, last) = (line[0], line[1], line[2]);
    for _ in 0..4 {
        h.advance_ms(QUEUE_MS / 3);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        waiting(h.poll(&p, first).await, 1, 3, "the head polls");
        waiting(h.poll(&p, last).await, 3, 3, "the tail polls");
    }
    assert!(h.release(&p, a).await);
    admitted(
        h.enter(&p, first).await,
        "the live head gets the slot and claims",
    );
    waiting(
        h.poll(&p, last).await,
        2,
        2,
        "the silent one is at the head now, but it is not their turn",
    );
    assert!(h.release(&p, first).await);
    admitted(
        h.poll(&p, last).await,
        "at the silent one's turn, the slot goes to the next live waiter",
    );
    assert_eq!(
        h.poll(&p, silent).await,
        Decision::Unknown,
        "the silent one lost their place"
    );
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);
}

/// A waiter silent for longer than abandon_after is dropped from anywhere in the line by the
/// sweep of [`SnapshotStore::sync`] (liveness is to the epoch: seen within abandon_after, kept;
/// silent for longer than 3/2 of it, swept): the positions of those behind and the line's
/// length no longer count them. No other call sweeps. On a store that keeps snapshots.
pub async fn abandoned_waiters_are_swept(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 4).await;
    let entered = h.now();
    // line[1] and line[2] go silent; the head and the tail keep polling, the holder stays, so
    // nobody is promoted or skipped at the head.
    let step = QUEUE_MS / 3;
    while h.now() + step < entered + ABANDON_MS {
        h.advance_ms(step);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        waiting(h.poll(&p, line[0]).await, 1, 4, "the head polls");
        waiting(
            h.poll(&p, line[3]).await,
            4,
            4,
            "before abandon_after, the silent still count",
        );
        assert_eq!(
            h.sync(&p, Vec::new()).await.waiting,
            4,
            "seen within abandon_after: not swept"
        );
    }
    // Changed for store v2: liveness is to the epoch, so the silent are certainly swept only
    // once silent for longer than 3/2 of abandon_after (was: just past abandon_after), and only
    // by `sync` (was: by any call).
    while h.now() + step < entered + ABANDON_MS * 3 / 2 + 1_000 {
        h.advance_ms(step);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        h.poll(&p, line[0]).await;
        h.poll(&p, line[3]).await;
    }
    h.advance_ms(entered + ABANDON_MS * 3 / 2 + 1_000 - h.now());
    admitted(h.heartbeat(&p, a).await, "the holder stays");
    Harness::check_stats(h.stats(&p).await, 1, 0, 4);
    waiting(
        h.poll(&p, line[3]).await,
        4,
        4,
        "only sync sweeps: the silent still count before it",
    );
    assert_eq!(h.sync(&p, Vec::new()).await.waiting, 2, "swept by sync");
    Harness::check_stats(h.stats(&p).await, 1, 0, 2);
    waiting(h.poll(&p, line[0]).await, 1, 2, "the head stays");
    waiting(h.poll(&p, line[3]).await, 2, 2, "the tail moved up");
    assert_eq!(h.poll(&p, line[1]).await, Decision::Unknown, "swept");
    assert_eq!(h.poll(&p, line[2]).await, Decision::Unknown, "swept");
}

/// The sweep of abandoned waiters is bounded: at most 100 per `sync` call
/// (no other call sweeps), and no waiter silent for less than abandon_after is swept with them.
pub async fn abandoned_sweep_is_bounded(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let per_call = u64::from(MAX_SWEEP_PER_CALL);
    let n = 2 * per_call + 50;
    let hour = Duration::from_secs(3_600);
    let p = h
        .policy(1)
        .with_ttls(hour, GRANT_TTL, QUEUE_TTL)
        .with_abandon_after(ABANDON_AFTER);
    let _a = h.enter_admitted(&p).await;
    h.enter_waiters(&p, n).await;
    // Changed for store v2: the abandoned are silent for longer than 3/2 of abandon_after
    // (liveness is to the epoch), the live one for less than abandon_after; the sweep is
    // `sync`'s, so the calls counted are syncs (was: stats).
    h.advance_ms(ABANDON_MS);
    let live = h.enter_waiters(&p, 1).await[0];
    h.advance_ms(ABANDON_MS * 3 / 5 + 1_000);
    let mut left = n + 1;
    assert_eq!(h.stats(&p).await.waiting, left, "stats does not sweep");
    waiting(h.poll(&p, live).await, left, left, "poll does not sweep");
    for call in 1..=3 {
        let now_left = h.sync(&p, Vec::new()).await.waiting;
        assert!(
            now_left < left && now_left + per_call >= left,
            "call {call} swept {} abandoned waiters; at most {per_call} allowed",
            left as i64 - now_left as i64
        );
        left = now_left;
    }
    assert_eq!(left, 1, "only the live waiter is left");
    waiting(h.poll(&p, live).await, 1, 1, "the live waiter moved up");
}

// ---------------------------------------------------------------------------------------------
// Grants and slots
// ---------------------------------------------------------------------------------------------

/// A promoted visitor who does not come back within grant_ttl loses the slot; it goes to the
/// next in line.
pub async fn unclaimed_grant_expires_to_next(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    let (b, c) = (line[0], line[1]);
    assert!(h.release(&p, a).await);
    let granted_at = h.now();
    let e = admitted(h.poll(&p, b).await, "b is promoted");
    assert_eq!(e, granted_at + GRANT_MS, "a grant lasts grant_ttl");
    Harness::check_stats(h.stats(&p).await, 0, 1, 1);
    h.advance_ms(GRANT_MS / 2);
    waiting(h.poll(&p, c).await, 1, 1, "c waits while b may still claim");
    h.advance_ms(GRANT_MS / 2 + 1);
    let e = admitted(h.poll(&p, c).await, "b's grant expired; c is promoted");
    assert_eq!(e, h.now() + GRANT_MS, "c's grant lasts grant_ttl");
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);
    assert_eq!(h.poll(&p, b).await, Decision::Unknown, "b lost the slot");
    assert_eq!(
        h.heartbeat(&p, b).await,
        Decision::Unknown,
        "b has no slot to extend"
    );
    waiting(
        h.enter(&p, b).await,
        1,
        1,
        "b coming back late joins the back of the line",
    );
    admitted(h.enter(&p, c).await, "c claims");
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
}

/// Claiming within grant_ttl turns the grant into a full slot of active_ttl.
pub async fn claim_within_grant_ttl(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let b = h.enter_waiters(&p, 1).await[0];
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, b).await, "b is promoted");
    h.advance_ms(GRANT_MS - 1);
    let e = admitted(h.enter(&p, b).await, "b claims just in time");
    assert_eq!(e, h.now() + ACTIVE_MS, "a claimed slot lasts active_ttl");
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
    // Past the grant's end, the claimed slot stays.
    h.advance_ms(2);
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
    h.advance_ms(ACTIVE_MS - 10);
    assert_eq!(
        h.poll(&p, b).await,
        Decision::Admitted { expires_at_ms: e },
        "poll reports the slot without changing it"
    );
    let n = SessionId::random();
    waiting(h.enter(&p, n).await, 1, 1, "the room is still full");
}

/// Slots expire by time and free capacity.
pub async fn active_slot_expires(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let expires = h.now() + ACTIVE_MS;
    let b = h.enter_waiters(&p, 1).await[0];
    while h.now() + QUEUE_MS / 2 < expires {
        h.advance_ms(QUEUE_MS / 2);
        waiting(h.poll(&p, b).await, 1, 1, "b waits while a's slot lasts");
    }
    h.advance_ms(expires - 1 - h.now());
    waiting(h.poll(&p, b).await, 1, 1, "1 ms before a's slot ends");
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
    h.advance_ms(2);
    admitted(h.poll(&p, b).await, "a's slot expired; b is promoted");
    assert_eq!(h.poll(&p, a).await, Decision::Unknown, "a's slot is gone");
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);

    // With nobody waiting, the expired slot lets a newcomer straight in.
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    h.advance_ms(ACTIVE_MS + 1);
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    h.enter_admitted(&p).await;
}

/// Heartbeat extends the slot to active_ttl from now, so it outlives its first expiry.
pub async fn heartbeat_extends(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let first_expiry = h.now() + ACTIVE_MS;
    h.advance_ms(ACTIVE_MS * 2 / 3);
    let e = admitted(h.heartbeat(&p, a).await, "heartbeat");
    assert_eq!(
        e,
        h.now() + ACTIVE_MS,
        "heartbeat extends to active_ttl from now"
    );
    h.advance_ms(first_expiry + 1_000 - h.now());
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
    let n = SessionId::random();
    waiting(
        h.enter(&p, n).await,
        1,
        1,
        "the extended slot still fills the room",
    );
    let e2 = admitted(h.heartbeat(&p, a).await, "heartbeat again");
    assert_eq!(e2, h.now() + ACTIVE_MS);
    assert_eq!(
        h.poll(&p, a).await,
        Decision::Admitted { expires_at_ms: e2 }
    );
}

/// Heartbeat of an expired, released, unknown or merely waiting session is `Unknown` and
/// creates nothing.
pub async fn heartbeat_of_gone_slot_is_unknown(h: &Harness) {
    let p = h.policy(2);
    let expired = h.enter_admitted(&p).await;
    h.advance_ms(ACTIVE_MS + 1);
    let released = h.enter_admitted(&p).await;
    let holder = h.enter_admitted(&p).await;
    let _w = h.enter_waiters(&p, 1).await[0];
    assert!(h.release(&p, released).await);
    // w got the released slot as a grant.
    Harness::check_stats(h.stats(&p).await, 1, 1, 0);
    let before = h.stats(&p).await;
    assert_eq!(h.heartbeat(&p, expired).await, Decision::Unknown, "expired");
    assert_eq!(
        h.heartbeat(&p, released).await,
        Decision::Unknown,
        "released"
    );
    assert_eq!(
        h.heartbeat(&p, SessionId::random()).await,
        Decision::Unknown,
        "never seen"
    );
    assert_eq!(
        h.stats(&p).await,
        before,
        "heartbeats of gone slots created something"
    );
    assert_eq!(h.poll(&p, expired).await, Decision::Unknown);
    assert_eq!(h.poll(&p, released).await, Decision::Unknown);
    admitted(h.heartbeat(&p, holder).await, "the live holder");

    // A waiter's heartbeat does not admit them.
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    assert_eq!(
        h.heartbeat(&p, w).await,
        Decision::Unknown,
        "a waiter has no slot"
    );
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
    waiting(h.poll(&p, w).await, 1, 1, "and keeps their place");
}

/// Release frees the slot at once and the head of the line gets it in the same call.
pub async fn release_frees_at_once(h: &Harness) {
    let p = h.policy(2);
    let a = h.enter_admitted(&p).await;
    let b = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    assert!(h.release(&p, a).await, "release of a slot");
    Harness::check_stats(h.stats(&p).await, 1, 1, 2);
    admitted(h.poll(&p, line[0]).await, "the head got it");
    waiting(h.poll(&p, line[1]).await, 1, 2, "next moved up");
    assert!(!h.release(&p, a).await, "a second release finds nothing");
    assert_eq!(h.heartbeat(&p, a).await, Decision::Unknown);
    assert_eq!(h.poll(&p, a).await, Decision::Unknown);
    // Releasing an unclaimed grant passes it on too.
    assert!(h.release(&p, line[0]).await, "release of a grant");
    admitted(h.poll(&p, line[1]).await, "the next head got it");
    Harness::check_stats(h.stats(&p).await, 1, 1, 1);
    // The grant is made by the release itself: it runs from the release, not from the next call.
    assert!(h.release(&p, b).await);
    let released_at = h.now();
    h.advance_ms(1_000);
    assert_eq!(
        h.poll(&p, line[2]).await,
        Decision::Admitted {
            expires_at_ms: released_at + GRANT_MS
        },
        "the last one got b's slot, granted at the release"
    );
    Harness::check_stats(h.stats(&p).await, 0, 2, 0);
    // With nobody waiting, a release lets a newcomer straight in.
    assert!(h.release(&p, line[1]).await);
    h.enter_admitted(&p).await;
}

/// Release of a waiter takes them out of the line.
pub async fn release_waiter_leaves_line(h: &Harness) {
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    assert!(h.release(&p, line[0]).await, "release of a waiter");
    assert_eq!(h.poll(&p, line[0]).await, Decision::Unknown);
    waiting(h.poll(&p, line[1]).await, 1, 1, "moved up");
    assert!(!h.release(&p, line[0]).await, "second release");
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
}

/// Release of a session the store never saw returns false and changes nothing.
pub async fn release_unknown_is_false(h: &Harness) {
    let p = h.policy(1);
    assert!(!h.release(&p, SessionId::random()).await, "fresh room");
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    h.enter_admitted(&p).await;
    h.enter_waiters(&p, 1).await;
    let before = h.stats(&p).await;
    assert!(!h.release(&p, SessionId::random()).await, "busy room");
    assert_eq!(h.stats(&p).await, before);
}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

/// At max_queue_len the answer is `Full { waiting }` and the line stops growing; people already
/// in line keep their place; once someone leaves, a newcomer can join.
pub async fn full_line(h: &Harness) {
    let p = h.policy(1).with_max_queue_len(3);
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    for _ in 0..3 {
        let x = SessionId::random();
        assert_eq!(h.enter(&p, x).await, Decision::Full { waiting: 3 });
        assert_eq!(h.poll(&p, x).await, Decision::Unknown, "not added");
    }
    Harness::check_stats(h.stats(&p).await, 1, 0, 3);
    waiting(
        h.enter(&p, line[2]).await,
        3,
        3,
        "a waiter re-entering a full line keeps their place",
    );
    assert!(h.release(&p, line[0]).await);
    let x = SessionId::random();
    waiting(h.enter(&p, x).await, 3, 3, "room in the line again");
    assert_eq!(
        h.enter(&p, SessionId::random()).await,
        Decision::Full { waiting: 3 }
    );
}

/// With rate r per second and a large capacity, a burst gets exactly r in at once.
pub async fn admission_rate_burst(h: &Harness) {
    let r = 5u64;
    let p = h.policy(1_000).with_admission_rate(Some(r as u32));
    for _ in 0..r {
        h.enter_admitted(&p).await;
    }
    for i in 1..=10 {
        waiting(
            h.enter(&p, SessionId::random()).await,
            i,
            i,
            "over the rate, newcomers wait despite free capacity",
        );
    }
    Harness::check_stats(h.stats(&p).await, r, 0, 10);
}

/// After the burst, about r per second get in as the clock advances, never more than the bucket
/// allows.
pub async fn admission_rate_steady(h: &Harness) {
    let r = 5u64;
    let p = h.policy(1_000).with_admission_rate(Some(r as u32));
    for _ in 0..r {
        h.enter_admitted(&p).await;
    }
    let n = 100;
    h.enter_waiters(&p, n).await;
    let start = h.now();
    let step = 100;
    for _ in 0..(10_000 / step) {
        h.advance_ms(step);
        let elapsed = h.now() - start;
        let promoted = n - h.stats(&p).await.waiting;
        let budget = r * elapsed / 1_000;
        assert!(
            promoted <= budget,
            "{promoted} promoted after {elapsed} ms at {r}/s"
        );
        assert!(
            promoted + 1 >= budget,
            "only {promoted} promoted after {elapsed} ms at {r}/s"
        );
    }
    let stats = h.stats(&p).await;
    assert_eq!(stats.admitted, r, "nobody claimed");
    assert!(stats.granted >= 10 * r - 1 && stats.granted <= 10 * r);
}

/// Promotions and direct admissions spend the same admission-rate budget.
pub async fn admission_rate_shared_by_promotions_and_direct(h: &Harness) {
    let p = h.policy(100).with_admission_rate(Some(2));
    h.enter_admitted(&p).await;
    h.enter_admitted(&p).await;
    let c = SessionId::random();
    waiting(h.enter(&p, c).await, 1, 1, "the budget is spent");
    h.advance_ms(500);
    // One admission's worth refilled: it goes to c, not to the newcomer d.
    let d = SessionId::random();
    waiting(h.enter(&p, d).await, 1, 1, "the refill went to c");
    admitted(h.poll(&p, c).await, "c was promoted");
    h.advance_ms(500);
    let e = SessionId::random();
    waiting(h.enter(&p, e).await, 1, 1, "the refill went to d");
    admitted(h.poll(&p, d).await, "d was promoted");
    h.advance_ms(1_000);
    // Two refilled: one promotes e, the other admits f directly.
    let f = SessionId::random();
    admitted(h.enter(&p, f).await, "f gets the second admission");
    admitted(h.poll(&p, e).await, "e was promoted first");
    let g = SessionId::random();
    waiting(h.enter(&p, g).await, 1, 1, "the budget is spent again");
    Harness::check_stats(h.stats(&p).await, 3, 3, 1);
}

// Long by design: builds a line of silent waiters, then checks step by step that each call
// does bounded work and that the line still drains in order.
/// Bounded work: with more silent waiters at the head than one call may skip, one call does not
/// clear them all, repeated calls do, and the live waiter behind them is eventually admitted,
/// before a newcomer who arrived while the line was still being cleared.
pub async fn bounded_work_with_many_silent_waiters(h: &Harness) {
    let per_call = u64::from(MAX_PROMOTIONS_PER_CALL + MAX_SWEEP_PER_CALL);
    let silent_n = 4 * per_call + 50;
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    h.enter_waiters(&p, silent_n).await;
    h.advance_ms(QUEUE_MS / 2);
    let live = h.enter_waiters(&p, 1).await[0];
    // The first ones are now silent for longer than 5/4 of queue_ttl (liveness is to the
    // epoch; changed for store v2 from "just past queue_ttl"); the live one is not.
    h.advance_ms(QUEUE_MS * 3 / 4 + 1_000);

    let mut left = silent_n + 1;
    let now_left = h.stats(&p).await.waiting;
    assert!(
        now_left + per_call >= left,
        "one call removed {} silent waiters; at most {per_call} allowed",
        left - now_left
    );
    assert!(
        now_left > 1,
        "one call cleared all {silent_n} silent waiters"
    );
    left = now_left;

    // Releasing the holder is a call too: still bounded.
    assert!(h.release(&p, a).await);
    let now_left = h.stats(&p).await.waiting;
    // Two calls (release and stats) since the last count.
    assert!(
        now_left + 2 * per_call >= left,
        "two calls removed {} silent waiters; at most {} allowed",
        left - now_left,
        2 * per_call
    );
    assert!(now_left > per_call + 1, "too few left to go on");

    // The slot is free, but silent waiters (then the live one) are still ahead of a newcomer.
    let newcomer = SessionId::random();
    assert!(
        matches!(h.enter(&p, newcomer).await, Decision::Waiting { .. }),
        "a newcomer jumped the line while it was being cleared"
    );

    let mut calls = 0;
    loop {
        calls += 1;
        assert!(
            calls <= silent_n,
            "the live waiter was never admitted after {calls} polls"
        );
        match h.poll(&p, live).await {
            Decision::Admitted { .. } => break,
            Decision::Waiting { .. } => {}
            other => panic!("the live waiter got {other:?}"),
        }
    }
    admitted(h.enter(&p, live).await, "the live waiter claims");
    waiting(
        h.poll(&p, newcomer).await,
        1,
        1,
        "the newcomer is next, behind the live waiter",
    );
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
}

/// The bound also holds for `release`, which frees a slot and promotes in the same call.
pub async fn bounded_work_in_release(h: &Harness) {
    let per_call = u64::from(MAX_PROMOTIONS_PER_CALL + MAX_SWEEP_PER_CALL);
    let silent_n = 2 * per_call + 50;
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    h.enter_waiters(&p, silent_n).await;
    // Silent for longer than 5/4 of queue_ttl (liveness is to the epoch; changed for store v2
    // from "just past queue_ttl").
    h.advance_ms(QUEUE_MS * 5 / 4 + 1_000);
    let before = silent_n; // nothing has run since the clock moved
    assert!(h.release(&p, a).await);
    // `stats` is one more call.
    let after = h.stats(&p).await.waiting;
    assert!(
        after + 2 * per_call >= before,
        "release and stats removed {} silent waiters; at most {} allowed",
        before - after,
        2 * per_call
    );
}

// ---------------------------------------------------------------------------------------------
// Admission counts (for the wait estimate)
// ---------------------------------------------------------------------------------------------

/// Moves the clock to the start of the next admission bucket.
fn to_next_bucket(h: &Harness) {
    h.advance_ms(ADMISSION_BUCKET_MS - h.now() % ADMISSION_BUCKET_MS);
}

// Long by design: walks the clock through several buckets and checks each count on the way.
/// Direct admissions and promotions' grants are counted; claims, heartbeats, polls, re-entries
/// and releases are not. Counts cover complete 10-second buckets: an admission shows from the
/// next bucket on, leaves the last minute after six buckets and the last five minutes after
/// thirty.
pub async fn admissions_are_counted_in_buckets(h: &Harness) {
    let hour = Duration::from_secs(3_600);
    let p = h.policy(2).with_ttls(hour, hour, hour);
    to_next_bucket(h);
    let t0 = h.now();
    let a = h.enter_admitted(&p).await;
    let b = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 3).await;
    // (The counts are read from `sync` and `stats`, as gateways do: a store's enter and poll
    // answers need not carry them since store v2, if it keeps snapshots.)
    assert_eq!(
        h.counts(&p, w[0], "in the first bucket").await,
        AdmissionCounts::new(0, 0),
        "the current bucket is not counted yet"
    );
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(0, 0));

    h.advance_ms(ADMISSION_BUCKET_MS);
    assert_eq!(
        h.counts(&p, w[0], "second bucket").await,
        AdmissionCounts::new(2, 2),
        "two direct admissions"
    );
    // A promotion counts; the grantee's claim, a heartbeat, a re-entry and polls do not.
    assert!(h.release(&p, a).await);
    admitted(h.enter(&p, w[0]).await, "claim");
    admitted(h.heartbeat(&p, b).await, "heartbeat");
    admitted(h.enter(&p, b).await, "re-entry of an admitted visitor");
    h.poll(&p, w[1]).await;
    h.advance_ms(ADMISSION_BUCKET_MS);
    let seen = h.counts(&p, w[1], "third bucket").await;
    assert_eq!(seen, AdmissionCounts::new(3, 3), "one promotion more");
    assert_eq!(
        h.stats(&p).await.recent,
        seen,
        "stats agree with the snapshot"
    );
    is_waiting(h.poll(&p, w[2]).await, "another waiter");
    if h.snapshots().is_some() {
        assert_eq!(
            h.sync(&p, vec![w[2]]).await.recent,
            seen,
            "every gateway's snapshot has the same counts"
        );
    }

    // The first bucket leaves the last minute 70 s after it began, the second one 80 s after.
    h.clock.set(t0 + 70_000 - 1);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(3, 3));
    h.clock.set(t0 + 70_000);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(1, 3));
    h.clock.set(t0 + 80_000);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(0, 3));
    // ... and the last five minutes after 310 s and 320 s.
    h.clock.set(t0 + 310_000 - 1);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(0, 3));
    h.clock.set(t0 + 310_000);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(0, 1));
    h.clock.set(t0 + 320_000);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(0, 0));
    // Hours later (every slot and place has expired), a reused ring slot does not bring old
    // counts back.
    h.clock.set(t0 + 3 * 3_600_000);
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    h.enter_admitted(&p).await;
    h.advance_ms(ADMISSION_BUCKET_MS);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(1, 1));
}

/// A line drained at a steady rate (the admission-rate budget, 2 per second) is counted at
/// that rate: about 120 in the last minute.
pub async fn admission_counts_follow_a_steady_drain(h: &Harness) {
    let p = h.policy(10_000).with_admission_rate(Some(2));
    to_next_bucket(h);
    h.enter_admitted(&p).await;
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 400).await;
    // The waiters must keep checking in (queue_ttl is 30 s): one poll per step keeps the head
    // alive; the others are checked in every 20 s.
    for step in 0..280u64 {
        h.advance_ms(250);
        if step % 80 == 0 {
            for &s in &line {
                h.poll(&p, s).await;
            }
        } else {
            h.stats(&p).await;
        }
    }
    // 70 s of draining at 2/s; the last complete minute is 60 s of it.
    let recent = h.stats(&p).await.recent;
    assert!(
        (118..=122).contains(&recent.last_minute),
        "about 120 in the last minute, got {recent:?}"
    );
    assert!(
        recent.last_five_minutes >= recent.last_minute
            && recent.last_five_minutes <= 2 + 2 * 70 + 2,
        "{recent:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Bad days: state damaged behind the store's back
// ---------------------------------------------------------------------------------------------

/// A room in a known state for the damage cases, capacity 3 with a generous admission rate (so
/// the budget exists but never limits): `a` and `b` hold claimed slots, `g` a granted one, `w1`
/// and `w2` wait in that order, and a few admissions have been counted.
struct Damaged {
    p: RoomPolicy,
    a: SessionId,
    b: SessionId,
    g: SessionId,
    w1: SessionId,
    w2: SessionId,
}

impl Damaged {
    async fn new(h: &Harness) -> Self {
        let p = h.policy(3).with_admission_rate(Some(1_000));
        let a = h.enter_admitted(&p).await;
        let b = h.enter_admitted(&p).await;
        let c = h.enter_admitted(&p).await;
        let line = h.enter_waiters(&p, 3).await;
        h.advance_ms(ADMISSION_BUCKET_MS);
        assert!(h.release(&p, c).await);
        Harness::check_stats(h.stats(&p).await, 2, 1, 2);
        Self {
            p,
            a,
            b,
            g: line[0],
            w1: line[1],
            w2: line[2],
        }
    }
}

/// After `part` was lost (or held a value of the wrong type, which a store treats as lost), the
/// room answers every call and behaves as if that part had been empty; FIFO and capacity hold
/// for what is left.
async fn behaves_as_if_empty(h: &Harness, d: &Damaged, part: Part, what: &str) {
    let p = &d.p;
    match part {
        // Settings lost: written again from the policy, which the room ran with anyway.
        Part::Seq
        | Part::Bucket
        | Part::Admitted
        | Part::Settings
        | Part::Arrivals
        | Part::Banned => {
            // Nothing a visitor can see, except that a newcomer must still go to the back.
            let n = SessionId::random();
            waiting(h.enter(p, n).await, 3, 3, what);
            waiting(h.poll(p, d.w1).await, 1, 3, what);
            assert!(h.release(p, d.a).await, "{what}: release");
            admitted(h.poll(p, d.w1).await, what);
            waiting(h.poll(p, d.w2).await, 1, 2, what);
            waiting(h.poll(p, n).await, 2, 2, what);
            Harness::check_stats(h.stats(p).await, 1, 2, 2);
        }
        Part::Line => {
            // Every place is gone: the waiters are unknown and join again at the back.
            assert_eq!(h.poll(p, d.w1).await, Decision::Unknown, "{what}");
            Harness::check_stats(h.stats(p).await, 2, 1, 0);
            waiting(h.enter(p, d.w2).await, 1, 1, what);
            waiting(h.enter(p, d.w1).await, 2, 2, what);
            assert!(h.release(p, d.a).await, "{what}: release");
            admitted(h.poll(p, d.w2).await, what);
            Harness::check_stats(h.stats(p).await, 1, 2, 1);
        }
        Part::Seen => {
            // The check-ins are gone: the waiters keep their places (counted as seen now).
            assert!(h.release(p, d.a).await, "{what}: release");
            admitted(h.poll(p, d.w1).await, what);
            waiting(h.poll(p, d.w2).await, 1, 1, what);
            Harness::check_stats(h.stats(p).await, 1, 2, 1);
        }
        Part::Active => {
            // The claimed slots are forgotten: their capacity goes to the line at once.
            admitted(h.poll(p, d.w1).await, what);
            admitted(h.poll(p, d.w2).await, what);
            assert_eq!(h.heartbeat(p, d.a).await, Decision::Unknown, "{what}");
            assert_eq!(h.heartbeat(p, d.b).await, Decision::Unknown, "{what}");
            Harness::check_stats(h.stats(p).await, 0, 3, 0);
        }
        Part::Granted => {
            // The grant is forgotten: the slot goes to the next in line.
            admitted(h.poll(p, d.w1).await, what);
            assert_eq!(h.poll(p, d.g).await, Decision::Unknown, "{what}");
            admitted(h.heartbeat(p, d.a).await, what);
            Harness::check_stats(h.stats(p).await, 2, 1, 1);
        }
    }
    let stats = h.stats(p).await;
    assert!(
        stats.admitted + stats.granted <= 3,
        "{what}: over capacity: {stats:?}"
    );
}

/// Every part of a room lost, one at a time (a Redis key evicted or deleted by hand): the store
/// answers every call and carries on as if the part had been empty.
pub async fn heals_lost_parts(h: &Harness) {
    for part in Part::ALL {
        let d = Damaged::new(h).await;
        if h.damage(&d.p, Damage::Lost(part)).await {
            behaves_as_if_empty(h, &d, part, &format!("after {part:?} was lost")).await;
        }
    }
}

/// Every part of a room holding a value of the wrong type, one at a time: the store drops it
/// (it is the room's own key) and carries on as if it had been empty; but the slots (claimed or
/// granted), whose holders may be inside with their admission tokens, are rebuilt instead
/// (see `rebuilds_the_slots`, below).
pub async fn heals_parts_of_the_wrong_type(h: &Harness) {
    for part in Part::ALL {
        let d = Damaged::new(h).await;
        if h.damage(&d.p, Damage::WrongType(part)).await {
            let what = format!("after {part:?} got the wrong type");
            match part {
                Part::Active | Part::Granted => rebuilds_the_slots(h, &d, part, &what).await,
                _ => behaves_as_if_empty(h, &d, part, &what).await,
            }
        }
    }
}

/// After the claimed or the granted slots were found damaged (not lost: a store cannot tell a
/// lost part from an empty one), their capacity is not handed to the line: for the longest
/// lifetime of a slot the room counts as full, and a holder's heartbeat that finds no slot
/// claims one again while fewer than capacity are held. Nobody waiting is let in meanwhile,
/// and nobody beyond the capacity is.
async fn rebuilds_the_slots(h: &Harness, d: &Damaged, part: Part, what: &str) {
    let p = &d.p;
    waiting(h.poll(p, d.w1).await, 1, 2, what);
    let holders: &[SessionId] = match part {
        Part::Active => &[d.a, d.b],
        _ => &[d.g],
    };
    for &holder in holders {
        admitted(
            h.heartbeat(p, holder).await,
            &format!("{what}: a holder's heartbeat"),
        );
    }
    // The capacity is held again: a heartbeat of someone who never held a slot gets none.
    assert_eq!(
        h.heartbeat(p, SessionId::random()).await,
        Decision::Unknown,
        "{what}: a stranger claimed a slot"
    );
    waiting(h.poll(p, d.w1).await, 1, 2, what);
    waiting(h.poll(p, d.w2).await, 2, 2, what);
    let stats = h.stats(p).await;
    assert_eq!(
        (stats.admitted + stats.granted, stats.waiting),
        (3, 2),
        "{what}: {stats:?}"
    );
}

/// A sequence, a budget or an admission count that is not a number: the store answers, a
/// newcomer still goes to the back, and admissions are still counted.
pub async fn heals_values_that_are_not_numbers(h: &Harness) {
    for part in [Part::Seq, Part::Bucket, Part::Admitted, Part::Settings] {
        let d = Damaged::new(h).await;
        if h.damage(&d.p, Damage::NotANumber(part)).await {
            behaves_as_if_empty(h, &d, part, &format!("after {part:?} became not a number")).await;
            // The release above admitted (promoted) one more: counted from the next bucket.
            h.advance_ms(ADMISSION_BUCKET_MS);
            assert!(
                h.stats(&d.p).await.recent.last_minute >= 1,
                "after {part:?} became not a number: the admission was not counted"
            );
        }
    }
}

/// An admission-rate budget that lost a field counts as full (at most one second's worth of
/// admissions more than the rate), and is spent again from there.
pub async fn heals_a_budget_missing_a_field(h: &Harness) {
    let p = h.policy(10).with_admission_rate(Some(1));
    h.enter_admitted(&p).await;
    let w = SessionId::random();
    waiting(h.enter(&p, w).await, 1, 1, "the budget is spent");
    if !h.damage(&p, Damage::BucketFieldLost).await {
        return;
    }
    admitted(h.poll(&p, w).await, "the damaged budget counts as full");
    waiting(
        h.enter(&p, SessionId::random()).await,
        1,
        1,
        "and is spent again",
    );
}

/// A waiter whose check-in is lost keeps their place: counted as seen at the moment the store
/// notices, so they get their turn.
pub async fn heals_a_lost_check_in(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    if !h.damage(&p, Damage::CheckInLost(line[0])).await {
        return;
    }
    if !h.damage(&p, Damage::CheckInLost(line[1])).await {
        return;
    }
    waiting(h.poll(&p, line[2]).await, 3, 3, "the others are untouched");
    waiting(h.poll(&p, line[1]).await, 2, 3, "a poll checks in again");
    assert!(h.release(&p, a).await);
    admitted(
        h.poll(&p, line[0]).await,
        "the head without a check-in gets their turn",
    );
    waiting(h.poll(&p, line[1]).await, 1, 2, "moved up");
    Harness::check_stats(h.stats(&p).await, 0, 1, 2);
}

/// A check-in of a session without a place in line changes nothing: the session is unknown,
/// counts nowhere, and joins at the back when it enters; an old one is swept.
pub async fn heals_a_stray_check_in(h: &Harness) {
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    let (fresh, old) = (SessionId::random(), SessionId::random());
    if !h.damage(&p, Damage::StrayCheckIn(fresh, h.now())).await {
        return;
    }
    if !h.damage(&p, Damage::StrayCheckIn(old, h.now())).await {
        return;
    }
    Harness::check_stats(h.stats(&p).await, 1, 0, 2);
    assert_eq!(h.poll(&p, fresh).await, Decision::Unknown);
    waiting(h.enter(&p, fresh).await, 3, 3, "joins at the back");
    assert!(h.release(&p, fresh).await, "and leaves");
    // Long after, the old stray check-in is swept with the abandoned waiters by a sync (and
    // the holder's slot has expired): the room is simply empty. (Changed for store v2: the
    // sweep is `sync`'s, and certain after 3/2 of abandon_after.)
    if h.snapshots().is_none() {
        return;
    }
    h.advance_ms(ABANDON_MS * 3 / 2 + 1_000);
    assert_eq!(h.sync(&p, Vec::new()).await.waiting, 0);
    assert_eq!(h.poll(&p, old).await, Decision::Unknown);
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    h.enter_admitted(&p).await;
    waiting(h.enter(&p, line[0]).await, 1, 1, "the line works");
}

/// A session that holds a slot and also has a place in line keeps its slot and loses the place
/// when it reaches the head: it is never granted a second slot, and the slot freed meanwhile
/// goes to the next waiter.
pub async fn heals_a_slot_holder_in_line(h: &Harness) {
    let p = h.policy(2);
    let a = h.enter_admitted(&p).await;
    let b = h.enter_admitted(&p).await;
    if !h.damage(&p, Damage::SlotHolderInLine(a)).await {
        return;
    }
    let w = SessionId::random();
    assert!(matches!(h.enter(&p, w).await, Decision::Waiting { .. }));
    assert!(h.release(&p, b).await);
    admitted(h.poll(&p, w).await, "the freed slot goes to the waiter");
    let e = admitted(h.heartbeat(&p, a).await, "the holder keeps the slot");
    assert_eq!(e, h.now() + ACTIVE_MS, "a claimed slot, extended");
    Harness::check_stats(h.stats(&p).await, 1, 1, 0);
}

// ---------------------------------------------------------------------------------------------
// Stats and rooms
// ---------------------------------------------------------------------------------------------

/// Stats count admitted, granted, waiting and report the capacity.
pub async fn stats_counts(h: &Harness) {
    let p = h.policy(3);
    let s = h.stats(&p).await;
    Harness::check_stats(s, 0, 0, 0);
    assert_eq!(s.capacity, 3);
    let a = h.enter_admitted(&p).await;
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
    h.enter_admitted(&p).await;
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    Harness::check_stats(h.stats(&p).await, 3, 0, 2);
    assert!(h.release(&p, a).await);
    Harness::check_stats(h.stats(&p).await, 2, 1, 1);
    admitted(h.enter(&p, line[0]).await, "claim");
    Harness::check_stats(h.stats(&p).await, 3, 0, 1);
    assert!(h.release(&p, line[1]).await);
    let s = h.stats(&p).await;
    Harness::check_stats(s, 3, 0, 0);
    assert_eq!(s.capacity, 3);
}

/// Two rooms share nothing: not capacity, not sessions, not the rate budget.
pub async fn rooms_are_independent(h: &Harness) {
    let p1 = h.policy(1);
    let p2 = h.policy(1);
    assert_ne!(p1.room, p2.room);
    let a = h.enter_admitted(&p1).await;
    let b = h.enter_admitted(&p2).await;
    let c = SessionId::random();
    waiting(h.enter(&p1, c).await, 1, 1, "room 1 is full");
    Harness::check_stats(h.stats(&p1).await, 1, 0, 1);
    Harness::check_stats(h.stats(&p2).await, 1, 0, 0);
    assert_eq!(
        h.poll(&p2, a).await,
        Decision::Unknown,
        "a is in room 1 only"
    );
    assert_eq!(h.heartbeat(&p2, a).await, Decision::Unknown);
    assert!(!h.release(&p2, a).await);
    assert_eq!(
        h.poll(&p2, c).await,
        Decision::Unknown,
        "c waits in room 1 only"
    );
    Harness::check_stats(h.stats(&p1).await, 1, 0, 1);
    assert!(h.release(&p1, a).await);
    admitted(h.poll(&p1, c).await, "c gets room 1's slot");
    Harness::check_stats(h.stats(&p2).await, 1, 0, 0);
    admitted(h.poll(&p2, b).await, "b is untouched");
    // The same session may be in both rooms.
    let both = SessionId::random();
    waiting(h.enter(&p1, both).await, 1, 1, "room 1");
    waiting(h.enter(&p2, both).await, 1, 1, "room 2");
    // Rate budgets are per room.
    let r1 = h.policy(10).with_admission_rate(Some(1));
    let r2 = h.policy(10).with_admission_rate(Some(1));
    h.enter_admitted(&r1).await;
    h.enter_admitted(&r2).await;
    waiting(h.enter(&r1, SessionId::random()).await, 1, 1, "r1 spent");
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

/// Many tasks entering, waiting, claiming and releasing concurrently (on a multi-thread runtime)
/// never see more than `capacity` inside, and everyone gets in eventually.
pub async fn concurrent_never_exceeds_capacity(h: &Harness) {
    const CAP: usize = 5;
    const TASKS: usize = 32;
    const ROUNDS: usize = 5;
    let p = Arc::new(h.policy(CAP as u32));
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..TASKS {
        let (store, p) = (h.store.clone(), p.clone());
        let (inside, peak, done) = (inside.clone(), peak.clone(), done.clone());
        tasks.spawn(async move {
            for _ in 0..ROUNDS {
                let s = SessionId::random();
                let mut d = store.enter(&p, s).await.expect("enter");
                while !matches!(d, Decision::Admitted { .. }) {
                    assert!(matches!(d, Decision::Waiting { .. }), "got {d:?}");
                    tokio::task::yield_now().await;
                    d = store.poll(&p, s).await.expect("poll");
                }
                // Holding a slot (granted or claimed) from here until release.
                let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                assert!(n <= CAP, "{n} inside a room of {CAP}");
                let d = store.enter(&p, s).await.expect("claim");
                assert!(matches!(d, Decision::Admitted { .. }), "claim got {d:?}");
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(store.release(&p, s).await.expect("release"), "release");
            }
            done.fetch_add(1, Ordering::SeqCst);
        });
    }
    // Watch the store's own counts while the tasks run.
    let watcher = {
        let (store, p, done) = (h.store.clone(), p.clone(), done.clone());
        tokio::spawn(async move {
            while done.load(Ordering::SeqCst) < TASKS {
                let s = store.stats(&p).await.expect("stats");
                assert!(
                    s.admitted + s.granted <= CAP as u64,
                    "stats over capacity: {s:?}"
                );
                tokio::task::yield_now().await;
            }
        })
    };
    let all = async {
        while let Some(res) = tasks.join_next().await {
            res.expect("a task failed");
        }
        watcher.await.expect("the watcher failed");
    };
    tokio::time::timeout(Duration::from_secs(20), all)
        .await
        .expect("the concurrent run did not finish (deadlock or starvation)");
    assert!(peak.load(Ordering::SeqCst) <= CAP);
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
}

// ---------------------------------------------------------------------------------------------
// Running the suite
// ---------------------------------------------------------------------------------------------

/// The future a [`Case`] returns.
pub use super::case::CaseFuture;

/// One case of the suite: its name and its function.
pub type Case = super::case::Case<Harness>;

/// Every case of the suite, in the order [`run_all`] runs them.
pub const CASES: &[Case] = &crate::__conformance_suite! { @with_cases @list; };

/// Runs every case of [`CASES`] in turn on `harness`, panicking at the first failure (the panic
/// message says what failed, not which case: for one test per case use
/// [`conformance_tests!`](crate::conformance_tests)).
///
/// Needs a Tokio runtime with the time driver enabled (`#[tokio::test]` or `#[tokio::main]`
/// enable it), since [`concurrent_never_exceeds_capacity`] spawns tasks and sets itself a
/// timeout.
pub async fn run_all(harness: &Harness) {
    for case in CASES {
        case.run(harness).await;
    }
}

/// Runs one generated test of [`conformance_tests!`](crate::conformance_tests) on a runtime of
/// its own, as `#[tokio::test]` would: current-thread, or multi-thread with four workers.
#[doc(hidden)]
pub fn __block_on<F: Future<Output = ()>>(multi_thread: bool, test: F) {
    let mut builder = if multi_thread {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(4);
        b
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder
        .enable_all()
        .build()
        .expect("a Tokio runtime for the conformance test")
        .block_on(test);
}

/// Expands into one `#[test]` per case of the store conformance suite, each on a fresh
/// [`Harness`] from `make_harness`: an async fn (or a closure returning a future) that returns
/// the harness.
///
/// ```
/// // tests/my_store.rs
/// use std::sync::Arc;
///
/// use tower_waiting_room::testing::ManualClock;
/// use tower_waiting_room::store::MemoryStore; // your store here
/// use tower_waiting_room::testing::conformance::{Harness, START_MS};
///
/// async fn make_harness() -> Harness {
///     let clock = ManualClock::new(START_MS);
///     Harness::new(Arc::new(MemoryStore::with_clock(clock.clone())), clock)
/// }
///
/// tower_waiting_room::conformance_tests!(make_harness);
/// # fn main() {}
/// ```
///
/// Each test is named after its case (`fifo_order`, `no_queue_jumping`, ...), so invoke the
/// macro once per module. Every test builds its own Tokio runtime, as `#[tokio::test]` does:
/// current-thread, and multi-thread with four workers for the [concurrency
/// case](crate::testing::conformance::concurrent_never_exceeds_capacity). Your crate needs no
/// `tokio` dependency or features for that; `make_harness` runs inside that runtime, so it may
/// use Tokio.
#[macro_export]
macro_rules! conformance_tests {
    ($make_harness:expr $(,)?) => {
        $crate::__conformance_suite! { @with_cases @tests [$make_harness]; }
    };
}

/// The one list of the suite's cases, handed to the arm named by its first tokens: `@tests`
/// (the tests of `conformance_tests!`) or `@list` (the [`Case`]s of [`CASES`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_suite {
    (@with_cases $($then:tt)*) => {
        $crate::__conformance_suite! {
            $($then)*
            current: [
                capacity_is_never_exceeded,
                granted_slots_count_against_capacity,
                capacity_holds_under_random_operations,
                fifo_order,
                fifo_order_several_slots,
                no_queue_jumping,
                reentering_keeps_place,
                positions_move_up,
                poll_unknown_creates_nothing,
                polling_waiter_is_not_skipped,
                silent_waiter_is_skipped,
                returning_waiter_keeps_place,
                silent_at_their_turn_is_skipped,
                abandoned_waiters_are_swept,
                abandoned_sweep_is_bounded,
                unclaimed_grant_expires_to_next,
                claim_within_grant_ttl,
                active_slot_expires,
                heartbeat_extends,
                heartbeat_of_gone_slot_is_unknown,
                release_frees_at_once,
                release_waiter_leaves_line,
                release_unknown_is_false,
                full_line,
                admission_rate_burst,
                admission_rate_steady,
                admission_rate_shared_by_promotions_and_direct,
                bounded_work_with_many_silent_waiters,
                bounded_work_in_release,
                admissions_are_counted_in_buckets,
                admission_counts_follow_a_steady_drain,
                heals_lost_parts,
                heals_parts_of_the_wrong_type,
                heals_values_that_are_not_numbers,
                heals_a_budget_missing_a_field,
                heals_a_lost_check_in,
                heals_a_stray_check_in,
                heals_a_slot_holder_in_line,
                heals_bad_numbers,
                heals_a_damaged_capacity,
                heals_a_damaged_place,
                stats_counts,
                rooms_are_independent,
                settings_start_from_the_policy,
                stored_settings_win_over_a_gateways_policy,
                capacity_raised_promotes_at_once,
                capacity_lowered_sends_nobody_out,
                paused_queues_newcomers_and_keeps_those_inside,
                a_grant_is_claimed_while_paused,
                closed_room_admits_nobody_and_keeps_the_line,
                closing_can_end_every_slot,
                admit_next_ignores_capacity_and_keeps_order,
                admit_next_larger_than_the_line_lets_everyone_in,
                admit_next_skips_silent_waiters,
                admit_next_works_while_paused_or_closed,
                ban_drops_and_refuses_until_it_ends,
                oldest_wait_follows_the_head,
                admissions_per_minute_history,
                refuses_settings_of_another_version,
                reads_settings_of_a_newer_additive_version,
                pace_measures_the_room_from_its_first_sighting,
                pace_notes_the_first_movement,
                pace_counts_admissions_per_minute,
                pace_counts_silent_waiters_and_skipped_turns,
                pace_follows_capacity_changes_and_pauses,
                pace_carries_the_live_admission_rate,
                ticket_mint_is_idempotent,
                ticket_is_redeemed_exactly_once,
                ticket_of_another_nonce_session_or_room_is_unknown,
                ticket_records_expire,
                ticket_needs_its_sessions_slot,
                ticket_mint_extends_and_never_shortens,
                release_and_ban_end_the_ticket,
                a_lost_ticket_record_is_never_a_second_ticket,
                scheduled_room_admits_nobody_before_the_opening,
                pre_queue_order_is_the_draw_order,
                arrivals_after_the_opening_wait_behind_the_registrants,
                registrants_are_not_skipped_or_swept_for_waiting,
                pace_is_measured_from_the_opening,
                an_opening_in_the_past_opens_at_once,
                closing_refuses_newcomers_and_keeps_the_line,
                closing_without_the_line_refuses_everyone_without_a_slot,
                a_call_without_the_schedule_keeps_the_kept_opening,
                a_pre_queue_never_jumps_an_earlier_line,
                an_emptied_pre_queue_counts_its_wait_anew,
                sync_checks_in_only_waiters_with_a_place,
                sync_keeps_a_waiter_alive_at_their_turn,
                sync_keeps_a_waiter_behind_the_horizon_alive_at_their_turn,
                liveness_is_to_the_epoch,
                sync_snapshot_has_exact_checkpoints,
                sync_snapshot_says_paused_open_and_schedule,
                waiting_answers_say_the_place,
                snapshot_positions_are_within_the_bound,
            ];
            multi_thread: [
                concurrent_never_exceeds_capacity,
                concurrent_redeems_accept_exactly_once,
            ]
        }
    };
    (@tests [$make:expr]; current: [$($case:ident),* $(,)?]; multi_thread: [$($mt:ident),* $(,)?]) => {
        $crate::__suite_parts! { @tests conformance [$make]; current: [$($case),*]; multi_thread: [$($mt),*] }
    };
    (@list; current: [$($case:ident),* $(,)?]; multi_thread: [$($mt:ident),* $(,)?]) => {
        $crate::__suite_parts! { @list conformance; current: [$($case),*]; multi_thread: [$($mt),*] }
    };
}

#[doc(inline)]
pub use crate::conformance_tests;
