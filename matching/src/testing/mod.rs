//! The matching conformance suite: the semantics of [`crate::store`] as test cases
//! that any [`MatchStore`] can run, as the crate's own
//! [`MemoryMatchStore`](crate::store::MemoryMatchStore) does.
//!
//! Available with the `testing` feature. Every case is a `pub async fn(&Harness)` that panics on
//! failure; a [`Harness`] is a store and the [`ManualClock`] it decides by. Run them with
//! [`matching_conformance_tests!`](crate::matching_conformance_tests) (one `#[test]` per case,
//! each on a fresh harness), with [`run_all`], or pick from [`CASES`].
//!
//! ```
//! use std::sync::Arc;
//!
//! use tower_waiting_room::testing::ManualClock;
//! use tower_waiting_room_matching::store::MemoryMatchStore; // your store here
//! use tower_waiting_room_matching::testing::{self, Harness, START_MS};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // The store must decide by the harness clock (or be sent its time): the cases move time.
//! let clock = ManualClock::new(START_MS);
//! let harness = Harness::new(Arc::new(MemoryMatchStore::with_clock(clock.clone())), clock);
//!
//! // One case...
//! testing::group_forms_in_the_join_that_completes_it(&harness).await;
//! // ...or all of them, in the order of `CASES`.
//! testing::run_all(&harness).await;
//! # }
//! ```
//!
//! In a test file, one test per case:
//!
//! ```
//! // tests/my_match_store.rs
//! use std::sync::Arc;
//!
//! use tower_waiting_room::testing::ManualClock;
//! use tower_waiting_room_matching::store::MemoryMatchStore; // your store here
//! use tower_waiting_room_matching::testing::{Harness, START_MS};
//!
//! async fn make_harness() -> Harness {
//!     let clock = ManualClock::new(START_MS);
//!     Harness::new(Arc::new(MemoryMatchStore::with_clock(clock.clone())), clock)
//! }
//!
//! tower_waiting_room_matching::matching_conformance_tests!(make_harness);
//! # fn main() {}
//! ```
//!
//! Rules for the cases (so that a shared, external store such as Redis can run them too):
//! - time only moves through the harness clock (the store must read it, or be sent its time);
//!   nothing ever sleeps;
//! - every case names its users and topics through [`Harness::user`] and [`Harness::queue`]
//!   on a [`fresh`](Harness::fresh) namespace, unique across processes and runs, so cases can
//!   share one store and run in parallel.

mod bounded_work;
mod concurrency;
mod confirmation;
mod fallback;
mod joining;
mod leaving;
mod ticks;
mod timeout;

pub use self::bounded_work::*;
pub use self::concurrency::*;
pub use self::confirmation::*;
pub use self::fallback::*;
pub use self::joining::*;
pub use self::leaving::*;
pub use self::ticks::*;
pub use self::timeout::*;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::store::{MatchPolicy, MatchStore};
use crate::{
    AppGroupId, ConfirmOutcome, Group, GroupId, GroupSize, JoinOutcome, MatchState, Queue, Topic,
    UserId, Waiting,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::SessionId;

/// A good time for a harness clock to start at: 2026-01-01T00:00:00Z.
pub const START_MS: u64 = tower_waiting_room::testing::TEST_EPOCH_MS;

/// The suite's `fallback_after`.
pub const FALLBACK_AFTER: Duration = Duration::from_secs(20);
/// The suite's `timeout`.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// The suite's `confirm_ttl`.
pub const CONFIRM_TTL: Duration = Duration::from_secs(10);
/// The suite's `keep_confirmed`.
pub const KEEP_CONFIRMED: Duration = Duration::from_secs(30);

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// What every case runs against: a store and the clock it decides by, with names of its own.
pub struct Harness {
    /// The store under test.
    pub store: Arc<dyn MatchStore>,
    /// The clock the store decides by; the only way time moves.
    pub clock: ManualClock,
    names: String,
}

impl fmt::Debug for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Harness")
            .field("clock", &self.clock)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

static NAMESPACE_COUNTER: AtomicU64 = AtomicU64::new(0);

fn namespace() -> String {
    let n = NAMESPACE_COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = SessionId::random().to_string();
    format!("m{n}-{}", &random[..12])
}

impl Harness {
    /// A harness for `store`, which must read (or be sent the time of) `clock`.
    pub fn new(store: Arc<dyn MatchStore>, clock: ManualClock) -> Self {
        Self {
            store,
            clock,
            names: namespace(),
        }
    }

    /// The same store and clock with a new namespace: the users and topics it names are unique
    /// across cases, processes and runs. Every case starts with one.
    pub fn fresh(&self) -> Self {
        Self::new(self.store.clone(), self.clock.clone())
    }

    /// The suite's timings: [`FALLBACK_AFTER`], [`TIMEOUT`], [`CONFIRM_TTL`],
    /// [`KEEP_CONFIRMED`].
    pub fn policy(&self) -> MatchPolicy {
        MatchPolicy::default()
            .fallback_after(FALLBACK_AFTER)
            .timeout(TIMEOUT)
            .confirm_ttl(CONFIRM_TTL)
            .keep_confirmed(KEEP_CONFIRMED)
    }

    /// The user `name` of this harness's namespace.
    pub fn user(&self, name: &str) -> UserId {
        UserId::new(format!("{}-{name}", self.names)).expect("a valid user id")
    }

    /// The users `prefix0`, `prefix1`, ... (`n` of them).
    pub fn users(&self, prefix: &str, n: usize) -> Vec<UserId> {
        (0..n).map(|i| self.user(&format!("{prefix}{i}"))).collect()
    }

    /// The queue of `topic` (in this harness's namespace) and `size`.
    pub fn queue(&self, topic: &str, size: u64) -> Queue {
        Queue::new(
            Topic::new(format!("{}-{topic}", self.names)).expect("a valid topic"),
            GroupSize::new(size).expect("a valid size"),
        )
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    /// `join`, failing the test on a store error.
    pub async fn join(&self, user: &UserId, queue: &Queue) -> JoinOutcome {
        self.store
            .join(&self.policy(), user.clone(), queue.clone())
            .await
            .unwrap_or_else(|e| panic!("join failed: {e}"))
    }

    /// `status`, failing the test on a store error.
    pub async fn status(&self, user: &UserId) -> MatchState {
        self.store
            .status(&self.policy(), user.clone())
            .await
            .unwrap_or_else(|e| panic!("status failed: {e}"))
    }

    /// `leave`, failing the test on a store error.
    pub async fn leave(&self, user: &UserId) -> MatchState {
        self.store
            .leave(&self.policy(), user.clone())
            .await
            .unwrap_or_else(|e| panic!("leave failed: {e}"))
    }

    /// `confirm` with the application id `app_id`, failing the test on a store error.
    pub async fn confirm(&self, group: &GroupId, app_id: &str) -> ConfirmOutcome {
        self.store
            .confirm(
                &self.policy(),
                group.clone(),
                AppGroupId::new(app_id).expect("a valid app id"),
            )
            .await
            .unwrap_or_else(|e| panic!("confirm failed: {e}"))
    }

    /// `tick`, failing the test on a store error.
    pub async fn tick(&self, queue: &Queue) -> u64 {
        self.store
            .tick(&self.policy(), queue.clone())
            .await
            .unwrap_or_else(|e| panic!("tick failed: {e}"))
    }

    /// Joins `user`, expecting them to wait at `position` of `waiting`; answers the wait.
    pub async fn join_waiting(
        &self,
        user: &UserId,
        queue: &Queue,
        position: u64,
        waiting: u64,
    ) -> Waiting {
        let out = self.join(user, queue).await;
        let expected = JoinOutcome::Joined(wait(queue, position, waiting, Duration::ZERO, TIMEOUT));
        assert_eq!(out, expected, "{user} joins {queue:?}");
        match out {
            JoinOutcome::Joined(MatchState::Waiting(w)) => w,
            _ => unreachable!(),
        }
    }

    /// Joins each of `users` in turn, expecting each to wait behind the previous ones (after
    /// `ahead` waiters).
    pub async fn join_all_waiting(&self, users: &[UserId], queue: &Queue, ahead: u64) {
        for (i, u) in users.iter().enumerate() {
            let n = ahead + i as u64 + 1;
            self.join_waiting(u, queue, n, n).await;
        }
    }

    /// Joins `user`, expecting a new pending group to form in that join; answers it.
    pub async fn join_matched(&self, user: &UserId, queue: &Queue) -> Group {
        match self.join(user, queue).await {
            JoinOutcome::Joined(MatchState::Matched(g)) => g,
            other => panic!("{user} joins {queue:?}: expected Joined(Matched), got {other:?}"),
        }
    }

    /// The group `user` is in (their status must be `Matched`).
    pub async fn group_of(&self, user: &UserId) -> Group {
        match self.status(user).await {
            MatchState::Matched(g) => g,
            other => panic!("status of {user}: expected Matched, got {other:?}"),
        }
    }

    /// Joins `users` (as many as the queue's size, nobody waiting before) to form one group;
    /// answers it.
    pub async fn form_group(&self, users: &[UserId], queue: &Queue) -> Group {
        let (last, first) = users.split_last().expect("users");
        self.join_all_waiting(first, queue, 0).await;
        self.join_matched(last, queue).await
    }

    /// Asserts that every member of `group` has it as their status.
    pub async fn check_members(&self, group: &Group, what: &str) {
        for m in &group.members {
            assert_eq!(
                self.status(m).await,
                MatchState::Matched(group.clone()),
                "{what}: status of member {m}"
            );
        }
    }
}

/// The waiting state with these values.
pub fn wait(
    queue: &Queue,
    position: u64,
    waiting: u64,
    waited: Duration,
    expires_in: Duration,
) -> MatchState {
    MatchState::Waiting(Waiting {
        queue: queue.clone(),
        position,
        waiting,
        waited,
        expires_in,
    })
}

/// A pending group of `queue` numbered `number`.
pub fn pending(queue: &Queue, number: u64, members: &[&UserId], expires_in: Duration) -> Group {
    Group {
        id: GroupId::new(queue.clone(), number),
        members: members.iter().map(|&u| u.clone()).collect(),
        confirmed: None,
        expires_in,
    }
}

/// `group` confirmed with `app_id`, its record kept for `expires_in`.
pub fn confirmed(group: &Group, app_id: &str, expires_in: Duration) -> Group {
    Group {
        confirmed: Some(AppGroupId::new(app_id).expect("a valid app id")),
        expires_in,
        ..group.clone()
    }
}

fn matched(group: &Group) -> MatchState {
    MatchState::Matched(group.clone())
}

// ---------------------------------------------------------------------------------------------
// Running the suite
// ---------------------------------------------------------------------------------------------

/// The future a [`Case`] returns.
pub use tower_waiting_room::__private::CaseFuture;

/// One case of the suite: its name and its function.
pub type Case = tower_waiting_room::__private::Case<Harness>;

/// Every case of the suite, in the order [`run_all`] runs them.
pub const CASES: &[Case] = &crate::__matching_suite! { @with_cases @list; };

/// Runs every case of [`CASES`] in turn on `harness`, panicking at the first failure. Needs a
/// Tokio runtime with the time driver enabled (the concurrency cases spawn tasks and set
/// themselves a timeout).
pub async fn run_all(harness: &Harness) {
    for case in CASES {
        case.run(harness).await;
    }
}

/// Expands into one `#[test]` per case of the matching conformance suite, each on a fresh
/// [`Harness`] from `make_harness` (an async fn, or a closure returning a future): see the
/// [module docs](self). Each test is named after its case, so invoke the macro once per module.
/// Every test builds its own Tokio runtime: current-thread, and multi-thread with four workers
/// for the concurrency cases.
#[macro_export]
macro_rules! matching_conformance_tests {
    ($make_harness:expr $(,)?) => {
        $crate::__matching_suite! { @with_cases @tests [$make_harness]; }
    };
}

/// The one list of the matching suite's cases, handed to the arm named by its first tokens.
#[doc(hidden)]
#[macro_export]
macro_rules! __matching_suite {
    (@with_cases $($then:tt)*) => {
        $crate::__matching_suite! {
            $($then)*
            current: [
                join_waits_with_position_and_times,
                status_of_a_stranger_is_idle,
                group_forms_in_the_join_that_completes_it,
                one_place_per_user,
                oldest_first_across_many_joins,
                leaving_the_line_shifts_positions,
                fallback_exactly_at_fallback_after,
                fallback_by_tick,
                fallback_needs_two_waiters,
                no_fallback_for_pairs,
                fallback_in_larger_queues,
                timeout_drops_a_waiter,
                matched_users_do_not_time_out,
                confirm_a_pending_group,
                confirm_is_idempotent_and_refuses_another_id,
                confirm_unknown_groups,
                unconfirmed_group_goes_back_to_the_front,
                a_group_undone_long_after_its_expiry_drops_its_members,
                undone_groups_keep_their_seniority,
                leave_a_pending_group,
                leave_a_confirmed_group,
                leave_when_idle,
                leave_forms_after_the_leaver_left,
                confirmed_record_is_kept_then_idle,
                tick_forms_undoes_and_counts,
                queues_are_independent,
                bounded_work_undoing_many_groups,
                bounded_work_expiring_many_records,
                bounded_work_late_confirmation_is_unknown,
                bounded_work_many_timeouts,
            ];
            multi_thread: [
                concurrent_joins_keep_one_place_and_order,
                concurrent_joins_of_one_user,
            ]
        }
    };
    (@tests [$make:expr]; current: [$($case:ident),* $(,)?]; multi_thread: [$($mt:ident),* $(,)?]) => {
        $(
            #[test]
            fn $case() {
                $crate::__room::testing::conformance::__block_on(false, async {
                    let harness = ($make)().await;
                    $crate::testing::$case(&harness).await;
                });
            }
        )*
        $(
            #[test]
            fn $mt() {
                $crate::__room::testing::conformance::__block_on(true, async {
                    let harness = ($make)().await;
                    $crate::testing::$mt(&harness).await;
                });
            }
        )*
    };
    (@list; current: [$($case:ident),* $(,)?]; multi_thread: [$($mt:ident),* $(,)?]) => {
        [
            $($crate::testing::Case::new(
                stringify!($case),
                false,
                |h| ::std::boxed::Box::pin($crate::testing::$case(h)),
            ),)*
            $($crate::testing::Case::new(
                stringify!($mt),
                true,
                |h| ::std::boxed::Box::pin($crate::testing::$mt(h)),
            ),)*
        ]
    };
}

#[doc(inline)]
pub use crate::matching_conformance_tests;
