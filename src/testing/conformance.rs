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

mod auto;
mod damage;
mod joins;
mod line;
mod numbers;
mod operations;
mod pace;
mod rate;
mod schedule;
mod slots;
mod snapshot;
mod tickets;
pub use self::auto::*;
use self::damage::Damaged;
pub use self::damage::*;
pub use self::joins::*;
pub use self::line::*;
pub use self::numbers::*;
pub use self::operations::*;
pub use self::pace::*;
pub use self::rate::*;
pub use self::schedule::*;
pub use self::slots::*;
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
                joins_made_together_keep_their_order,
                joins_made_together_are_answered_each_on_their_own,
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
                a_slot_holder_in_line_who_leaves_or_is_banned_loses_both,
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
                refuses_a_policy_out_of_bounds_and_keeps_a_ban_for_ever,
                reads_settings_of_a_newer_additive_version,
                pace_measures_the_room_from_its_first_sighting,
                pace_notes_the_first_movement,
                pace_counts_admissions_per_minute,
                pace_counts_silent_waiters_and_skipped_turns,
                pace_follows_capacity_changes_and_pauses,
                pace_carries_the_live_admission_rate,
                pace_says_who_holds_a_slot,
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
                sync_snapshot_says_which_checkpoint_waiters_are_silent,
                sync_snapshot_says_paused_open_and_schedule,
                waiting_answers_say_the_place,
                snapshot_positions_are_within_the_bound,
                auto_one_lease_and_one_merged_window,
                auto_lease_runs_out_and_passes_on,
                auto_apply_writes_the_capacity_and_lets_people_in,
                auto_someone_elses_capacity_turns_it_off,
                auto_switch_holds_for_every_gateway,
                auto_a_clock_gone_back_holds_no_lease,
                auto_refuses_bad_terms_and_takes_nothing,
                auto_terms_are_kept_for_every_gateway,
                auto_apply_writes_the_rate_it_is_given,
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
