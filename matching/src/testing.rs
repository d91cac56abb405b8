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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::store::{MatchPolicy, MatchStore, MAX_MATCH_WORK_PER_CALL};
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
// Joining and waiting
// ---------------------------------------------------------------------------------------------

/// A join waits: position and line length, how long waited (from the store clock) and when the
/// wait times out; a status answers the same, with the time that passed.
pub async fn join_waits_with_position_and_times(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("chess", 3);
    let (ann, bob) = (h.user("ann"), h.user("bob"));
    h.join_waiting(&ann, &q, 1, 1).await;
    h.advance(3 * SEC);
    assert_eq!(
        h.status(&ann).await,
        wait(&q, 1, 1, 3 * SEC, TIMEOUT - 3 * SEC),
        "ann after 3 s"
    );
    h.join_waiting(&bob, &q, 2, 2).await;
    h.advance(1_500 * MS);
    assert_eq!(
        h.status(&ann).await,
        wait(&q, 1, 2, 4_500 * MS, TIMEOUT - 4_500 * MS),
        "ann sees bob behind her"
    );
    assert_eq!(
        h.status(&bob).await,
        wait(&q, 2, 2, 1_500 * MS, TIMEOUT - 1_500 * MS),
        "bob"
    );
}

/// A stranger (never joined) is idle; asking does not make them anything.
pub async fn status_of_a_stranger_is_idle(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("chess", 2);
    let ghost = h.user("ghost");
    assert_eq!(h.status(&ghost).await, MatchState::Idle);
    assert_eq!(h.leave(&ghost).await, MatchState::Idle);
    assert_eq!(h.tick(&q).await, 0, "an unknown queue forms nothing");
    h.join_waiting(&h.user("ann"), &q, 1, 1).await;
    assert_eq!(h.status(&ghost).await, MatchState::Idle);
}

/// The `size`-th join forms a group in that very join: pending, members oldest first, numbered
/// from 1 in each queue; every member's status answers it.
pub async fn group_forms_in_the_join_that_completes_it(h: &Harness) {
    let h = &h.fresh();
    let pairs = h.queue("go", 2);
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|n| h.user(n));
    h.join_waiting(&a, &pairs, 1, 1).await;
    h.advance(2 * SEC);
    let g1 = h.join_matched(&b, &pairs).await;
    assert_eq!(
        g1,
        pending(&pairs, 1, &[&a, &b], CONFIRM_TTL),
        "the first pair"
    );
    h.check_members(&g1, "group 1").await;
    h.join_waiting(&c, &pairs, 1, 1).await;
    let g2 = h.join_matched(&d, &pairs).await;
    assert_eq!(
        g2,
        pending(&pairs, 2, &[&c, &d], CONFIRM_TTL),
        "the second pair"
    );
    h.advance(4 * SEC);
    assert_eq!(
        h.status(&a).await,
        matched(&pending(&pairs, 1, &[&a, &b], CONFIRM_TTL - 4 * SEC)),
        "group 1 counts down to its undoing"
    );

    let trios = h.queue("go", 3);
    let [x, y, z] = ["x", "y", "z"].map(|n| h.user(n));
    let g = h
        .form_group(&[x.clone(), y.clone(), z.clone()], &trios)
        .await;
    assert_eq!(g, pending(&trios, 1, &[&x, &y, &z], CONFIRM_TTL), "a trio");

    let fives = h.queue("go", 5);
    let five = h.users("f", 5);
    let g = h.form_group(&five, &fives).await;
    assert_eq!(g.members, five, "five, oldest first");
    assert_eq!(g.id, GroupId::new(fives, 1));
}

/// One place per user: joining again (the same queue, another queue; while waiting, pending or
/// confirmed) is a conflict that carries where the user stands, and changes nothing.
pub async fn one_place_per_user(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("chess", 3);
    let other = h.queue("go", 2);
    let [ann, bob, cat, dan] = ["ann", "bob", "cat", "dan"].map(|n| h.user(n));
    h.join_waiting(&ann, &q, 1, 1).await;
    h.join_waiting(&bob, &q, 2, 2).await;
    h.advance(SEC);
    let stands = wait(&q, 1, 2, SEC, TIMEOUT - SEC);
    assert_eq!(
        h.join(&ann, &q).await,
        JoinOutcome::Conflict(stands.clone()),
        "again, the same queue"
    );
    assert_eq!(
        h.join(&ann, &other).await,
        JoinOutcome::Conflict(stands.clone()),
        "another queue"
    );
    assert_eq!(
        h.join(&ann, &h.queue("chess", 2)).await,
        JoinOutcome::Conflict(stands.clone()),
        "the same topic, another size"
    );
    assert_eq!(h.status(&ann).await, stands, "ann kept her place and time");
    assert_eq!(
        h.status(&bob).await,
        wait(&q, 2, 2, SEC, TIMEOUT - SEC),
        "nobody was added"
    );
    // Nobody waits in the other queue: dan is first there, alone.
    h.join_waiting(&dan, &other, 1, 1).await;
    assert_eq!(
        h.leave(&dan).await,
        wait(&other, 1, 1, Duration::ZERO, TIMEOUT)
    );

    // Pending.
    let g = h.join_matched(&cat, &q).await;
    assert_eq!(g, pending(&q, 1, &[&ann, &bob, &cat], CONFIRM_TTL));
    h.advance(SEC);
    let g = pending(&q, 1, &[&ann, &bob, &cat], CONFIRM_TTL - SEC);
    for (u, queue) in [(&ann, &q), (&bob, &other), (&cat, &q)] {
        assert_eq!(
            h.join(u, queue).await,
            JoinOutcome::Conflict(matched(&g)),
            "{u} while pending"
        );
    }
    h.check_members(&g, "after the conflicts").await;

    // Confirmed.
    let ConfirmOutcome::Confirmed(c) = h.confirm(&g.id, "room-1").await else {
        panic!("confirm")
    };
    assert_eq!(c, confirmed(&g, "room-1", KEEP_CONFIRMED));
    h.advance(SEC);
    let c = confirmed(&g, "room-1", KEEP_CONFIRMED - SEC);
    for (u, queue) in [(&ann, &other), (&bob, &q)] {
        assert_eq!(
            h.join(u, queue).await,
            JoinOutcome::Conflict(matched(&c)),
            "{u} while confirmed"
        );
    }
    h.check_members(&c, "after the conflicts").await;
    // Still nobody in the other queue.
    h.join_waiting(&dan, &other, 1, 1).await;
}

/// Oldest first: many joins form groups in join order, positions count from the oldest and
/// restart as groups form.
pub async fn oldest_first_across_many_joins(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("poker", 4);
    let users = h.users("u", 22);
    let mut number = 0;
    for chunk in users.chunks(4) {
        for (i, u) in chunk.iter().enumerate() {
            if i + 1 < 4 {
                let n = i as u64 + 1;
                h.join_waiting(u, &q, n, n).await;
                h.advance(100 * MS);
                // Every earlier waiter of the chunk moved nowhere and sees the new one.
                for (j, earlier) in chunk[..=i].iter().enumerate() {
                    let st = h.status(earlier).await;
                    let MatchState::Waiting(w) = &st else {
                        panic!("{earlier}: {st:?}")
                    };
                    assert_eq!((w.position, w.waiting), (j as u64 + 1, n), "{earlier}");
                }
            } else {
                number += 1;
                let g = h.join_matched(u, &q).await;
                assert_eq!(g.members, chunk, "group {number}: the chunk, oldest first");
                assert_eq!(g.id.number, number);
            }
        }
    }
    // The last two wait, at positions 1 and 2.
    for (i, u) in users[20..].iter().enumerate() {
        let st = h.status(u).await;
        let MatchState::Waiting(w) = &st else {
            panic!("{u}: {st:?}")
        };
        assert_eq!((w.position, w.waiting), (i as u64 + 1, 2), "{u}");
    }
    // Every group kept its members.
    for (k, chunk) in users[..20].chunks(4).enumerate() {
        let g = h.group_of(&chunk[0]).await;
        assert_eq!(g.id.number, k as u64 + 1);
        assert_eq!(g.members, chunk);
    }
}

/// A waiter who leaves is out at once: those behind move up, the leave answers where the leaver
/// stood, and the next group is formed without them.
pub async fn leaving_the_line_shifts_positions(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("bridge", 4);
    let [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map(|n| h.user(n));
    h.join_all_waiting(&[a.clone(), b.clone(), c.clone()], &q, 0)
        .await;
    h.advance(SEC);
    assert_eq!(
        h.leave(&b).await,
        wait(&q, 2, 3, SEC, TIMEOUT - SEC),
        "b's leave answers where b stood"
    );
    assert_eq!(h.status(&b).await, MatchState::Idle);
    assert_eq!(h.status(&a).await, wait(&q, 1, 2, SEC, TIMEOUT - SEC));
    assert_eq!(h.status(&c).await, wait(&q, 2, 2, SEC, TIMEOUT - SEC));
    assert_eq!(h.leave(&b).await, MatchState::Idle, "a second leave");
    h.join_waiting(&d, &q, 3, 3).await;
    let g = h.join_matched(&e, &q).await;
    assert_eq!(g, pending(&q, 1, &[&a, &c, &d, &e], CONFIRM_TTL));
    assert_eq!(h.status(&b).await, MatchState::Idle);
    // The oldest leaves: the next is first.
    let [f, g2, k] = ["f", "g", "k"].map(|n| h.user(n));
    h.join_all_waiting(&[f.clone(), g2.clone(), k.clone()], &q, 0)
        .await;
    assert_eq!(h.leave(&f).await, wait(&q, 1, 3, Duration::ZERO, TIMEOUT));
    assert_eq!(h.status(&g2).await, wait(&q, 1, 2, Duration::ZERO, TIMEOUT));
    assert_eq!(h.status(&k).await, wait(&q, 2, 2, Duration::ZERO, TIMEOUT));
}

// ---------------------------------------------------------------------------------------------
// Fallback
// ---------------------------------------------------------------------------------------------

/// In a queue of 3, two who wait are matched together exactly when the oldest has waited
/// `fallback_after` (from the oldest's join), not a millisecond before; seen by a status.
pub async fn fallback_exactly_at_fallback_after(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let (a, b) = (h.user("a"), h.user("b"));
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(5 * SEC);
    h.join_waiting(&b, &q, 2, 2).await;
    h.advance(FALLBACK_AFTER - 5 * SEC - MS);
    assert_eq!(
        h.status(&b).await,
        wait(
            &q,
            2,
            2,
            FALLBACK_AFTER - 5 * SEC - MS,
            TIMEOUT - FALLBACK_AFTER + 5 * SEC + MS
        ),
        "a millisecond before the fallback"
    );
    assert_eq!(
        h.status(&a).await,
        wait(&q, 1, 2, FALLBACK_AFTER - MS, TIMEOUT - FALLBACK_AFTER + MS),
    );
    h.advance(MS);
    let g = pending(&q, 1, &[&a, &b], CONFIRM_TTL);
    assert_eq!(
        h.status(&b).await,
        matched(&g),
        "b's status forms the fallback pair as a's wait reaches fallback_after"
    );
    h.check_members(&g, "the fallback pair").await;
    // The queue goes on: the next three make a full group, numbered 2.
    let next = h.users("n", 3);
    let g2 = h.form_group(&next, &q).await;
    assert_eq!(g2.id.number, 2);
    assert_eq!(g2.members, next);
}

/// The fallback forms in a tick when nobody polls, exactly at `fallback_after`.
pub async fn fallback_by_tick(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let (a, b) = (h.user("a"), h.user("b"));
    h.join_waiting(&a, &q, 1, 1).await;
    h.join_waiting(&b, &q, 2, 2).await;
    h.advance(FALLBACK_AFTER - MS);
    assert_eq!(h.tick(&q).await, 0, "a millisecond before");
    h.advance(MS);
    assert_eq!(h.tick(&q).await, 1, "at fallback_after");
    assert_eq!(h.tick(&q).await, 0, "nothing more");
    let g = pending(&q, 1, &[&a, &b], CONFIRM_TTL);
    h.check_members(&g, "the fallback pair").await;
}

/// The fallback needs two: one waiter alone past `fallback_after` keeps waiting, and the next
/// joiner forms a pair with them in that join.
pub async fn fallback_needs_two_waiters(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let (a, b) = (h.user("a"), h.user("b"));
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(FALLBACK_AFTER + 5 * SEC);
    assert_eq!(h.tick(&q).await, 0);
    let waited = FALLBACK_AFTER + 5 * SEC;
    assert_eq!(h.status(&a).await, wait(&q, 1, 1, waited, TIMEOUT - waited));
    let g = h.join_matched(&b, &q).await;
    assert_eq!(
        g,
        pending(&q, 1, &[&a, &b], CONFIRM_TTL),
        "b's join makes two"
    );
}

/// No fallback in a queue of 2: one waiter stays alone, however long, until the timeout.
pub async fn no_fallback_for_pairs(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    let a = h.user("a");
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(FALLBACK_AFTER * 2);
    assert_eq!(h.tick(&q).await, 0);
    let waited = FALLBACK_AFTER * 2;
    assert_eq!(h.status(&a).await, wait(&q, 1, 1, waited, TIMEOUT - waited));
}

/// In a queue of 4 the fallback takes whoever waits, up to 3 (or 2), oldest first, once the
/// oldest has waited `fallback_after`, however short the others' wait.
pub async fn fallback_in_larger_queues(h: &Harness) {
    let h = &h.fresh();
    let q3 = h.queue("quad", 4);
    let [a, b, c] = ["a", "b", "c"].map(|n| h.user(n));
    h.join_waiting(&a, &q3, 1, 1).await;
    h.advance(15 * SEC);
    h.join_waiting(&b, &q3, 2, 2).await;
    h.advance(FALLBACK_AFTER - 15 * SEC - MS);
    h.join_waiting(&c, &q3, 3, 3).await;
    h.advance(MS);
    assert_eq!(h.tick(&q3).await, 1);
    let g = pending(&q3, 1, &[&a, &b, &c], CONFIRM_TTL);
    h.check_members(&g, "three of four").await;

    let q2 = h.queue("quad-too", 4);
    let [d, e] = ["d", "e"].map(|n| h.user(n));
    h.join_all_waiting(&[d.clone(), e.clone()], &q2, 0).await;
    h.advance(FALLBACK_AFTER);
    let g = pending(&q2, 1, &[&d, &e], CONFIRM_TTL);
    assert_eq!(h.status(&e).await, matched(&g), "two of four");
}

// ---------------------------------------------------------------------------------------------
// Timeout
// ---------------------------------------------------------------------------------------------

/// A waiter not matched `timeout` after joining is idle: waiting a millisecond before, idle at
/// `timeout`; they may join again, as a newcomer.
pub async fn timeout_drops_a_waiter(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    let a = h.user("a");
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(TIMEOUT - MS);
    assert_eq!(h.status(&a).await, wait(&q, 1, 1, TIMEOUT - MS, MS));
    h.advance(MS);
    assert_eq!(h.status(&a).await, MatchState::Idle, "at timeout");
    assert_eq!(h.leave(&a).await, MatchState::Idle);
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(SEC);
    assert_eq!(h.status(&a).await, wait(&q, 1, 1, SEC, TIMEOUT - SEC));

    // A timed-out waiter nobody asked about is dropped before the next joiner could be matched
    // with them (here by the fallback).
    let q = h.queue("trio", 3);
    let [b, c, d] = ["b", "c", "d"].map(|n| h.user(n));
    h.join_waiting(&b, &q, 1, 1).await;
    h.advance(FALLBACK_AFTER - SEC);
    h.join_waiting(&c, &q, 2, 2).await;
    h.leave(&c).await;
    h.advance(TIMEOUT - FALLBACK_AFTER + SEC);
    h.join_waiting(&d, &q, 1, 1).await;
    assert_eq!(h.status(&b).await, MatchState::Idle);
}

/// The timeout is only for waiting: a matched user is not dropped when their wait would have
/// timed out.
pub async fn matched_users_do_not_time_out(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    let (a, b) = (h.user("a"), h.user("b"));
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(TIMEOUT - 2 * SEC);
    let g = h.join_matched(&b, &q).await;
    h.advance(5 * SEC);
    let g = Group {
        expires_in: CONFIRM_TTL - 5 * SEC,
        ..g
    };
    h.check_members(&g, "past a's timeout").await;
    assert_eq!(h.tick(&q).await, 0);
    h.check_members(&g, "after a tick").await;
}

// ---------------------------------------------------------------------------------------------
// Confirmation
// ---------------------------------------------------------------------------------------------

/// A pending group confirmed with the application's id is confirmed for every member, its
/// record kept `keep_confirmed` from the confirmation.
pub async fn confirm_a_pending_group(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    let (a, b) = (h.user("a"), h.user("b"));
    let g = h.form_group(&[a.clone(), b.clone()], &q).await;
    h.advance(CONFIRM_TTL - MS);
    let c = confirmed(&g, "chat-7", KEEP_CONFIRMED);
    assert_eq!(
        h.confirm(&g.id, "chat-7").await,
        ConfirmOutcome::Confirmed(c.clone()),
        "confirmed a millisecond before confirm_ttl"
    );
    h.check_members(&c, "confirmed").await;
    h.advance(CONFIRM_TTL * 2);
    let c = confirmed(&g, "chat-7", KEEP_CONFIRMED - CONFIRM_TTL * 2);
    h.check_members(&c, "a confirmed group is not undone").await;
}

/// A retried confirmation with the same id answers the group again (and changes nothing: the
/// record's keeping counts from the first); another id is a conflict that changes nothing.
pub async fn confirm_is_idempotent_and_refuses_another_id(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let users = h.users("u", 3);
    let g = h.form_group(&users, &q).await;
    h.confirm(&g.id, "game-1").await;
    h.advance(2 * SEC);
    let c = confirmed(&g, "game-1", KEEP_CONFIRMED - 2 * SEC);
    assert_eq!(
        h.confirm(&g.id, "game-1").await,
        ConfirmOutcome::Confirmed(c.clone()),
        "the same id again"
    );
    assert_eq!(
        h.confirm(&g.id, "game-2").await,
        ConfirmOutcome::Conflict(c.clone()),
        "another id"
    );
    h.check_members(&c, "after the conflict").await;
}

/// A group that does not exist confirms as unknown: never formed (a number not reached, a queue
/// of another size or topic), or its record expired.
pub async fn confirm_unknown_groups(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    assert_eq!(
        h.confirm(&GroupId::new(q.clone(), 1), "x").await,
        ConfirmOutcome::Unknown,
        "nothing formed yet"
    );
    let g = h.form_group(&h.users("u", 2), &q).await;
    assert_eq!(g.id.number, 1);
    for never in [
        GroupId::new(q.clone(), 2),
        GroupId::new(q.clone(), 1_000),
        GroupId::new(h.queue("pair", 3), 1),
        GroupId::new(h.queue("other", 2), 1),
    ] {
        assert_eq!(
            h.confirm(&never, "x").await,
            ConfirmOutcome::Unknown,
            "{never}"
        );
    }
    h.check_members(&g, "untouched").await;
    h.confirm(&g.id, "x").await;
    h.advance(KEEP_CONFIRMED);
    assert_eq!(
        h.confirm(&g.id, "x").await,
        ConfirmOutcome::Unknown,
        "its record expired"
    );
}

/// A group not confirmed `confirm_ttl` after it formed is undone: its members go back to the
/// front of the line, ahead of those who joined after them, in their order, and form a new
/// group (a new number) at once; the old id is then unknown. A millisecond before, it is still
/// pending.
pub async fn unconfirmed_group_goes_back_to_the_front(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let first = h.users("a", 3);
    let g1 = h.form_group(&first, &q).await;
    h.advance(SEC);
    let later = h.users("z", 2);
    h.join_all_waiting(&later, &q, 0).await;
    h.advance(CONFIRM_TTL - SEC - MS);
    assert_eq!(
        h.status(&first[0]).await,
        matched(&Group {
            expires_in: MS,
            ..g1.clone()
        }),
        "a millisecond before"
    );
    h.advance(MS);
    // The undoing and the new group are seen by a later joiner's status.
    assert_eq!(
        h.status(&later[0]).await,
        wait(&q, 1, 2, CONFIRM_TTL - SEC, TIMEOUT - CONFIRM_TTL + SEC),
        "the later joiners still wait: the first three went ahead"
    );
    let g2 = pending(&q, 2, &[&first[0], &first[1], &first[2]], CONFIRM_TTL);
    h.check_members(&g2, "re-formed as group 2").await;
    assert_eq!(h.confirm(&g1.id, "x").await, ConfirmOutcome::Unknown);
    assert_eq!(
        h.confirm(&g2.id, "y").await,
        ConfirmOutcome::Confirmed(confirmed(&g2, "y", KEEP_CONFIRMED))
    );
    assert_eq!(
        h.status(&later[1]).await,
        wait(&q, 2, 2, CONFIRM_TTL - SEC, TIMEOUT - CONFIRM_TTL + SEC)
    );
}

/// Undone members go back ahead of a later joiner and are matched before them; with the time
/// they waited counted from their first join, an undone fallback pair forms again at once.
pub async fn undone_groups_keep_their_seniority(h: &Harness) {
    let h = &h.fresh();
    let pairs = h.queue("pair", 2);
    let [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map(|n| h.user(n));
    let g1 = h.form_group(&[a.clone(), b.clone()], &pairs).await;
    h.advance(SEC);
    let g2 = h.form_group(&[c.clone(), d.clone()], &pairs).await;
    h.advance(SEC);
    h.join_waiting(&e, &pairs, 1, 1).await;
    h.advance(CONFIRM_TTL - 2 * SEC);
    // Group 1 is undone: a and b go ahead of e and pair again.
    assert_eq!(
        h.status(&e).await,
        wait(
            &pairs,
            1,
            1,
            CONFIRM_TTL - 2 * SEC,
            TIMEOUT - CONFIRM_TTL + 2 * SEC
        )
    );
    let g3 = pending(&pairs, 3, &[&a, &b], CONFIRM_TTL);
    h.check_members(&g3, "group 1 re-formed").await;
    h.advance(SEC);
    // Group 2 too, a second later.
    assert_eq!(h.tick(&pairs).await, 1);
    let g4 = pending(&pairs, 4, &[&c, &d], CONFIRM_TTL);
    h.check_members(&g4, "group 2 re-formed").await;
    for old in [&g1.id, &g2.id] {
        assert_eq!(h.confirm(old, "x").await, ConfirmOutcome::Unknown, "{old}");
    }

    // A fallback pair undone forms again at once: its oldest has waited long enough.
    let trios = h.queue("trio", 3);
    let (x, y) = (h.user("x"), h.user("y"));
    h.join_all_waiting(&[x.clone(), y.clone()], &trios, 0).await;
    h.advance(FALLBACK_AFTER);
    let f1 = pending(&trios, 1, &[&x, &y], CONFIRM_TTL);
    h.check_members(&f1, "the fallback pair").await;
    h.advance(CONFIRM_TTL);
    assert_eq!(h.tick(&trios).await, 1, "undone and formed again");
    let f2 = pending(&trios, 2, &[&x, &y], CONFIRM_TTL);
    h.check_members(&f2, "the fallback pair, again").await;
}

// ---------------------------------------------------------------------------------------------
// Leaving groups
// ---------------------------------------------------------------------------------------------

/// A member who leaves a pending group dissolves it: the leaver is idle, the others go back to
/// the front in their order, with a fresh timeout (their wait counted from their first join),
/// and the group's id is unknown.
pub async fn leave_a_pending_group(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("quad", 4);
    let [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map(|n| h.user(n));
    let g = h
        .form_group(&[a.clone(), b.clone(), c.clone(), d.clone()], &q)
        .await;
    h.advance(2 * SEC);
    let before = Group {
        expires_in: CONFIRM_TTL - 2 * SEC,
        ..g.clone()
    };
    assert_eq!(h.leave(&b).await, matched(&before), "b stood in the group");
    assert_eq!(h.status(&b).await, MatchState::Idle);
    for (i, u) in [&a, &c, &d].into_iter().enumerate() {
        assert_eq!(
            h.status(u).await,
            wait(&q, i as u64 + 1, 3, 2 * SEC, TIMEOUT),
            "{u} is back at the front, with a fresh timeout"
        );
    }
    assert_eq!(h.confirm(&g.id, "x").await, ConfirmOutcome::Unknown);
    let g2 = h.join_matched(&e, &q).await;
    assert_eq!(g2, pending(&q, 2, &[&a, &c, &d, &e], CONFIRM_TTL));

    // The fresh timeout holds: in a queue of 2 the one left waits a full `timeout` more.
    let pairs = h.queue("pair", 2);
    let (x, y) = (h.user("x"), h.user("y"));
    h.join_waiting(&x, &pairs, 1, 1).await;
    h.advance(30 * SEC);
    h.join_matched(&y, &pairs).await;
    h.advance(5 * SEC);
    h.leave(&y).await;
    h.advance(TIMEOUT - MS);
    let waited = 35 * SEC + TIMEOUT - MS;
    assert_eq!(h.status(&x).await, wait(&pairs, 1, 1, waited, MS));
    h.advance(MS);
    assert_eq!(h.status(&x).await, MatchState::Idle);
}

/// A member who leaves a confirmed group is idle (and free to join again); the others keep the
/// group, unchanged.
pub async fn leave_a_confirmed_group(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let users = h.users("u", 3);
    let g = h.form_group(&users, &q).await;
    h.confirm(&g.id, "game").await;
    h.advance(SEC);
    let c = confirmed(&g, "game", KEEP_CONFIRMED - SEC);
    assert_eq!(h.leave(&users[1]).await, matched(&c));
    assert_eq!(h.status(&users[1]).await, MatchState::Idle);
    for u in [&users[0], &users[2]] {
        assert_eq!(h.status(u).await, matched(&c), "{u} keeps the group");
    }
    assert_eq!(
        h.confirm(&g.id, "game").await,
        ConfirmOutcome::Confirmed(c.clone())
    );
    h.join_waiting(&users[1], &q, 1, 1).await;
    assert_eq!(
        h.leave(&users[1]).await,
        wait(&q, 1, 1, Duration::ZERO, TIMEOUT)
    );
}

/// Leaving when idle answers idle and changes nothing.
pub async fn leave_when_idle(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let [a, b] = ["a", "b"].map(|n| h.user(n));
    h.join_waiting(&a, &q, 1, 1).await;
    assert_eq!(h.leave(&b).await, MatchState::Idle);
    assert_eq!(h.status(&b).await, MatchState::Idle);
    assert_eq!(h.status(&a).await, wait(&q, 1, 1, Duration::ZERO, TIMEOUT));
}

/// A leave is about the leaver: its formation runs after they left, so a waiter who leaves just
/// as the fallback comes due is not put in a group by their own leave; those left are.
pub async fn leave_forms_after_the_leaver_left(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("quad", 4);
    let [a, b, c] = ["a", "b", "c"].map(|n| h.user(n));
    h.join_all_waiting(&[a.clone(), b.clone(), c.clone()], &q, 0)
        .await;
    h.advance(FALLBACK_AFTER);
    assert_eq!(
        h.leave(&c).await,
        wait(&q, 3, 3, FALLBACK_AFTER, TIMEOUT - FALLBACK_AFTER),
        "c left from the line"
    );
    assert_eq!(h.status(&c).await, MatchState::Idle);
    let g = pending(&q, 1, &[&a, &b], CONFIRM_TTL);
    h.check_members(&g, "the two left form group 1").await;

    // The same when the leaver's pending group is due to be undone.
    let pairs = h.queue("pair", 2);
    let [x, y] = ["x", "y"].map(|n| h.user(n));
    let g = h.form_group(&[x.clone(), y.clone()], &pairs).await;
    h.advance(CONFIRM_TTL);
    assert_eq!(
        h.leave(&x).await,
        wait(&pairs, 1, 2, CONFIRM_TTL, TIMEOUT),
        "x's group was undone: x stood at the front"
    );
    assert_eq!(h.status(&x).await, MatchState::Idle);
    assert_eq!(h.status(&y).await, wait(&pairs, 1, 1, CONFIRM_TTL, TIMEOUT));
    assert_eq!(h.confirm(&g.id, "x").await, ConfirmOutcome::Unknown);
    let z = h.user("z");
    let g2 = h.join_matched(&z, &pairs).await;
    assert_eq!(
        g2,
        pending(&pairs, 2, &[&y, &z], CONFIRM_TTL),
        "no group number was spent on the leaver"
    );
}

/// A confirmed group's record answers its members' status for `keep_confirmed`, then they are
/// idle and may join again.
pub async fn confirmed_record_is_kept_then_idle(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    let [a, b] = ["a", "b"].map(|n| h.user(n));
    let g = h.form_group(&[a.clone(), b.clone()], &q).await;
    h.advance(3 * SEC);
    h.confirm(&g.id, "chat").await;
    h.advance(KEEP_CONFIRMED - MS);
    h.check_members(&confirmed(&g, "chat", MS), "a millisecond before")
        .await;
    h.advance(MS);
    assert_eq!(h.status(&a).await, MatchState::Idle);
    assert_eq!(h.status(&b).await, MatchState::Idle);
    h.join_waiting(&b, &q, 1, 1).await;
    let g2 = h.join_matched(&a, &q).await;
    assert_eq!(g2, pending(&q, 2, &[&b, &a], CONFIRM_TTL));
}

// ---------------------------------------------------------------------------------------------
// Tick, queues
// ---------------------------------------------------------------------------------------------

/// A tick does a queue's housekeeping and formation when nobody polls, and answers how many
/// groups it formed.
pub async fn tick_forms_undoes_and_counts(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let users = h.users("u", 8);
    h.form_group(&users[..3], &q).await;
    h.form_group(&users[3..6], &q).await;
    h.join_all_waiting(&users[6..], &q, 0).await;
    assert_eq!(h.tick(&q).await, 0, "the joins formed everything");
    h.advance(CONFIRM_TTL);
    assert_eq!(h.tick(&q).await, 2, "both groups undone and formed again");
    assert_eq!(h.tick(&q).await, 0);
    let g3 = pending(&q, 3, &[&users[0], &users[1], &users[2]], CONFIRM_TTL);
    let g4 = pending(&q, 4, &[&users[3], &users[4], &users[5]], CONFIRM_TTL);
    h.check_members(&g3, "group 3").await;
    h.check_members(&g4, "group 4").await;
    // Confirmed, they stay; the two later ones fall back when the older of them has waited
    // long enough.
    h.confirm(&g3.id, "g3").await;
    h.confirm(&g4.id, "g4").await;
    h.advance(FALLBACK_AFTER - CONFIRM_TTL - MS);
    assert_eq!(h.tick(&q).await, 0);
    h.advance(MS);
    assert_eq!(h.tick(&q).await, 1, "their fallback pair");
    let g5 = pending(&q, 5, &[&users[6], &users[7]], CONFIRM_TTL);
    h.check_members(&g5, "group 5").await;
    // A tick of another queue touches nothing here.
    h.advance(CONFIRM_TTL);
    assert_eq!(h.tick(&h.queue("trio", 2)).await, 0);
    assert_eq!(h.tick(&h.queue("other", 3)).await, 0);
    assert_eq!(h.tick(&q).await, 1, "group 5 undone and formed again");
    h.check_members(
        &confirmed(&g3, "g3", KEEP_CONFIRMED - FALLBACK_AFTER),
        "group 3 confirmed",
    )
    .await;
    let g6 = pending(&q, 6, &[&users[6], &users[7]], CONFIRM_TTL);
    h.check_members(&g6, "group 6").await;
}

/// Queues share nothing: another topic, or the same topic with another size, is another line
/// with its own group numbers.
pub async fn queues_are_independent(h: &Harness) {
    let h = &h.fresh();
    let x2 = h.queue("x", 2);
    let x3 = h.queue("x", 3);
    let y2 = h.queue("y", 2);
    let [a, b, c, d, e, f] = ["a", "b", "c", "d", "e", "f"].map(|n| h.user(n));
    h.join_waiting(&a, &x2, 1, 1).await;
    h.join_waiting(&b, &y2, 1, 1).await;
    h.join_waiting(&c, &x3, 1, 1).await;
    h.join_waiting(&d, &x3, 2, 2).await;
    let g = h.join_matched(&e, &x2).await;
    assert_eq!(g, pending(&x2, 1, &[&a, &e], CONFIRM_TTL));
    assert_eq!(
        h.confirm(&GroupId::new(x3.clone(), 1), "no").await,
        ConfirmOutcome::Unknown,
        "x2's group 1 is not x3's"
    );
    assert_eq!(h.status(&b).await, wait(&y2, 1, 1, Duration::ZERO, TIMEOUT));
    let g = h.join_matched(&f, &x3).await;
    assert_eq!(g, pending(&x3, 1, &[&c, &d, &f], CONFIRM_TTL));
    // Fallback, timeouts and undoing in one queue leave the others alone.
    h.advance(CONFIRM_TTL);
    assert_eq!(h.tick(&x2).await, 1);
    assert_eq!(
        h.status(&b).await,
        wait(&y2, 1, 1, CONFIRM_TTL, TIMEOUT - CONFIRM_TTL)
    );
    assert_eq!(
        h.status(&c).await,
        matched(&pending(&x3, 2, &[&c, &d, &f], CONFIRM_TTL)),
        "x3's own status undid its own group"
    );
    assert_eq!(
        h.status(&a).await,
        matched(&pending(&x2, 2, &[&a, &e], CONFIRM_TTL))
    );
}

// ---------------------------------------------------------------------------------------------
// Bounded work
// ---------------------------------------------------------------------------------------------

/// More groups due to be undone at once than one step may handle: ticks catch up, each forming
/// at most `MAX_MATCH_WORK_PER_CALL`, never failing; every pair is formed again together under
/// a new number, and every old id is unknown.
pub async fn bounded_work_undoing_many_groups(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("many", 2);
    let n = 2 * MAX_MATCH_WORK_PER_CALL + 10;
    let users = h.users("u", 2 * n);
    for (k, pair) in users.chunks(2).enumerate() {
        h.join_waiting(&pair[0], &q, 1, 1).await;
        assert_eq!(h.join_matched(&pair[1], &q).await.id.number, k as u64 + 1);
    }
    h.advance(CONFIRM_TTL);
    let mut formed = 0;
    for _ in 0..2 * n {
        let now = h.tick(&q).await;
        assert!(
            now <= MAX_MATCH_WORK_PER_CALL as u64,
            "a tick formed {now} groups"
        );
        formed += now;
        if now == 0 {
            break;
        }
    }
    assert_eq!(formed, n as u64, "every pair formed again");
    let mut numbers = HashSet::new();
    for pair in users.chunks(2) {
        let g = h.group_of(&pair[0]).await;
        assert_eq!(g.members, pair, "a pair stays together, in its order");
        assert_eq!(g.confirmed, None);
        assert_eq!(g.expires_in, CONFIRM_TTL);
        assert!(g.id.number > n as u64, "a new number: {}", g.id);
        assert!(numbers.insert(g.id.number), "one number per group");
        assert_eq!(h.status(&pair[1]).await, MatchState::Matched(g));
    }
    assert_eq!(numbers.len(), n);
    for old in [1, n as u64 / 2, n as u64] {
        let id = GroupId::new(q.clone(), old);
        assert_eq!(h.confirm(&id, "x").await, ConfirmOutcome::Unknown, "{id}");
    }
}

/// More confirmed records expiring at once than one step may handle: each member asking is
/// idle at once, whichever asks first, never an error.
pub async fn bounded_work_expiring_many_records(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("kept", 2);
    let n = MAX_MATCH_WORK_PER_CALL + 30;
    let users = h.users("u", 2 * n);
    let mut ids = Vec::new();
    for pair in users.chunks(2) {
        let g = h.form_group(pair, &q).await;
        assert!(matches!(
            h.confirm(&g.id, "app").await,
            ConfirmOutcome::Confirmed(_)
        ));
        ids.push(g.id);
    }
    h.advance(KEEP_CONFIRMED);
    // The last group's first: behind more than a step's work.
    for u in users.iter().rev() {
        assert_eq!(h.status(u).await, MatchState::Idle, "{u}");
    }
    for id in ids.iter().rev() {
        assert_eq!(h.confirm(id, "app").await, ConfirmOutcome::Unknown, "{id}");
    }
    assert_eq!(h.tick(&q).await, 0);
}

/// More groups due to be undone at once than one step may handle: a late confirmation of the
/// last of them is unknown, however many are due before it.
pub async fn bounded_work_late_confirmation_is_unknown(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("late", 2);
    let n = MAX_MATCH_WORK_PER_CALL + 30;
    let users = h.users("u", 2 * n);
    let mut ids = Vec::new();
    for pair in users.chunks(2) {
        ids.push(h.form_group(pair, &q).await.id);
    }
    h.advance(CONFIRM_TTL);
    let last = ids.last().expect("groups");
    assert_eq!(h.confirm(last, "late").await, ConfirmOutcome::Unknown);
    // Its members are in no group by that id.
    let [x, y] = [&users[2 * n - 2], &users[2 * n - 1]];
    for u in [x, y] {
        let st = h.status(u).await;
        if let MatchState::Matched(g) = &st {
            assert_ne!(&g.id, last, "{u}: {st:?}");
        }
    }
}

/// Many waiters timing out at once, each in a queue of their own and more of them than one
/// step's work: each is idle when asked, never an error, and their queues are empty.
pub async fn bounded_work_many_timeouts(h: &Harness) {
    let h = &h.fresh();
    let n = MAX_MATCH_WORK_PER_CALL + 20;
    let users = h.users("u", n);
    let queues: Vec<Queue> = (0..n).map(|i| h.queue(&format!("t{i}"), 2)).collect();
    for (u, q) in users.iter().zip(&queues) {
        h.join_waiting(u, q, 1, 1).await;
    }
    h.advance(TIMEOUT);
    for (i, (u, q)) in users.iter().zip(&queues).enumerate() {
        if i % 2 == 0 {
            assert_eq!(h.tick(q).await, 0);
        }
        assert_eq!(h.status(u).await, MatchState::Idle, "{u}");
        h.join_waiting(&h.user(&format!("new{i}")), q, 1, 1).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

/// Hundreds of users joining queues concurrently (on a multi-thread runtime), some of them the
/// same user in two queues at once, then ticks past the fallback: exactly one join of each
/// user succeeds, nobody is in two groups, every group has its queue's size (but at most one
/// fallback group per queue, its last, of 2 up to the size), every member of a group has it as
/// their status, group numbers run from 1 without a gap, and users who joined one after
/// another are grouped in their order.
pub async fn concurrent_joins_keep_one_place_and_order(h: &Harness) {
    const RANDOM: usize = 300;
    const DOUBLE: usize = 60;
    const CHAIN: usize = 20;
    let h = &h.fresh();
    let queues: Vec<Queue> = ["t0", "t1", "t2"]
        .iter()
        .flat_map(|t| [2, 3, 4].map(|s| h.queue(t, s)))
        .collect();
    let policy = h.policy();
    let mut rng = tower_waiting_room::__private::Rng(0x9e37_79b9_7f4a_7c15);
    let mut tasks = tokio::task::JoinSet::new();
    let mut all: Vec<UserId> = Vec::new();
    let mut chains: Vec<(Queue, Vec<UserId>)> = Vec::new();
    // Chains: per queue, users who join one after another, in a known order.
    for (i, q) in queues.iter().enumerate() {
        let chain = h.users(&format!("c{i}-"), CHAIN);
        all.extend(chain.iter().cloned());
        chains.push((q.clone(), chain.clone()));
        let (store, q) = (h.store.clone(), q.clone());
        tasks.spawn(async move {
            let mut out = Vec::new();
            for u in chain {
                let o = store
                    .join(&policy, u.clone(), q.clone())
                    .await
                    .expect("join");
                out.push((u, o));
                tokio::task::yield_now().await;
            }
            out
        });
    }
    // Random users, one join each; and users joining two queues at once.
    for i in 0..RANDOM + DOUBLE {
        let u = h.user(&format!("r{i}"));
        all.push(u.clone());
        let first = queues[rng.below(queues.len() as u64) as usize].clone();
        let joins = if i < RANDOM {
            vec![first]
        } else {
            let mut second = queues[rng.below(queues.len() as u64) as usize].clone();
            if second == first {
                second = h.queue("t9", 2);
            }
            vec![first, second]
        };
        for q in joins {
            let (store, u) = (h.store.clone(), u.clone());
            tasks.spawn(async move {
                let o = store.join(&policy, u.clone(), q).await.expect("join");
                vec![(u, o)]
            });
        }
    }
    let mut outcomes: HashMap<UserId, Vec<JoinOutcome>> = HashMap::new();
    let collect = async {
        while let Some(res) = tasks.join_next().await {
            for (u, o) in res.expect("a join task failed") {
                outcomes.entry(u).or_default().push(o);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), collect)
        .await
        .expect("the concurrent joins did not finish");
    for u in &all {
        let outs = &outcomes[u];
        let joined = outs
            .iter()
            .filter(|o| matches!(o, JoinOutcome::Joined(_)))
            .count();
        assert_eq!(joined, 1, "{u}: exactly one join succeeds: {outs:?}");
        for o in outs {
            match o {
                JoinOutcome::Joined(MatchState::Idle) | JoinOutcome::Conflict(MatchState::Idle) => {
                    panic!("{u}: {o:?}")
                }
                _ => {}
            }
        }
    }
    // Before any fallback is due: full groups only, fewer than `size` left waiting.
    let first = Snapshot::take(h, &all).await;
    first.check(&extra_queues(h, &queues), false);
    first.check_chains(&chains);
    // The application confirms every group, concurrently; then, past the fallback, every
    // queue's leftovers form one smaller group (if at least two wait).
    let mut confirms = tokio::task::JoinSet::new();
    for id in first.groups.keys() {
        let (store, id) = (h.store.clone(), id.clone());
        confirms.spawn(async move {
            let app = AppGroupId::new(id.to_string()).expect("an app id");
            store.confirm(&policy, id, app).await.expect("confirm")
        });
    }
    while let Some(res) = confirms.join_next().await {
        let out = res.expect("a confirm task failed");
        assert!(matches!(out, ConfirmOutcome::Confirmed(_)), "{out:?}");
    }
    h.advance(FALLBACK_AFTER);
    for q in &extra_queues(h, &queues) {
        while h.tick(q).await > 0 {}
    }
    let second = Snapshot::take(h, &all).await;
    second.check(&extra_queues(h, &queues), true);
    second.check_chains(&chains);
    for (id, g) in &first.groups {
        assert_eq!(
            second.groups[id].members, g.members,
            "{id} kept its members"
        );
        assert!(second.groups[id].confirmed.is_some(), "{id} confirmed");
    }
}

fn extra_queues(h: &Harness, queues: &[Queue]) -> Vec<Queue> {
    let mut all = queues.to_vec();
    all.push(h.queue("t9", 2));
    all
}

/// Where everyone stands, from their statuses.
struct Snapshot {
    groups: BTreeMap<GroupId, Group>,
    group_of: HashMap<UserId, GroupId>,
    waiting_in: HashMap<Queue, Vec<UserId>>,
}

impl Snapshot {
    async fn take(h: &Harness, users: &[UserId]) -> Self {
        let mut groups: BTreeMap<GroupId, Group> = BTreeMap::new();
        let mut group_of = HashMap::new();
        let mut waiting_in: HashMap<Queue, Vec<UserId>> = HashMap::new();
        for u in users {
            match h.status(u).await {
                MatchState::Matched(g) => {
                    assert!(g.members.contains(u), "{u} is a member of {g:?}");
                    if let Some(seen) = groups.get(&g.id) {
                        assert_eq!(seen, &g, "one group, one answer");
                    }
                    group_of.insert(u.clone(), g.id.clone());
                    groups.insert(g.id.clone(), g);
                }
                MatchState::Waiting(w) => waiting_in.entry(w.queue).or_default().push(u.clone()),
                MatchState::Idle => panic!("{u} joined and nobody left, nobody timed out"),
            }
        }
        Self {
            groups,
            group_of,
            waiting_in,
        }
    }

    /// Nobody in two groups, every member's status is their group, numbers from 1 without a
    /// gap, full groups (but, with `fallback`, the last of each queue: 2 up to the size), and
    /// what is left waiting cannot form a group.
    fn check(&self, queues: &[Queue], fallback: bool) {
        let mut members_seen = HashSet::new();
        for g in self.groups.values() {
            for m in &g.members {
                assert!(members_seen.insert(m.clone()), "{m} is in two groups");
                assert_eq!(
                    self.group_of.get(m),
                    Some(&g.id),
                    "{m}'s status is {}",
                    g.id
                );
            }
        }
        for q in queues {
            let size = usize::from(q.size.get());
            let ids: Vec<&GroupId> = self.groups.keys().filter(|id| id.queue == *q).collect();
            let numbers: Vec<u64> = ids.iter().map(|id| id.number).collect();
            let count = numbers.len() as u64;
            assert_eq!(
                numbers,
                (1..=count).collect::<Vec<_>>(),
                "{q:?}: numbers 1.."
            );
            for id in ids {
                let len = self.groups[id].members.len();
                if fallback && id.number == count {
                    assert!((2..=size).contains(&len), "{id}: {len} members");
                } else {
                    assert_eq!(len, size, "{id}: a full group");
                }
            }
            let left = self.waiting_in.get(q).map_or(0, Vec::len);
            let most = if fallback { 1 } else { size - 1 };
            assert!(left <= most, "{left} still wait in {q:?}");
        }
    }

    /// Users who joined one after another are grouped in their order.
    fn check_chains(&self, chains: &[(Queue, Vec<UserId>)]) {
        for (q, chain) in chains {
            let mut last: Option<(u64, usize)> = None;
            for (i, u) in chain.iter().enumerate() {
                // One still waiting comes after every group.
                let Some(id) = self.group_of.get(u) else {
                    let key = (u64::MAX, i);
                    if let Some(prev) = last {
                        assert!(prev < key, "{u} waits, {prev:?} was grouped after");
                    }
                    last = Some(key);
                    continue;
                };
                assert_eq!(&id.queue, q);
                let at = self.groups[id]
                    .members
                    .iter()
                    .position(|m| m == u)
                    .expect("a member");
                let key = (id.number, at);
                if let Some(prev) = last {
                    assert!(
                        prev < key,
                        "{u} grouped before an earlier joiner: {prev:?} vs {key:?}"
                    );
                }
                last = Some(key);
            }
        }
    }
}

/// The same user joining many queues at once from many tasks: exactly one join succeeds and the
/// user is in that one place.
pub async fn concurrent_joins_of_one_user(h: &Harness) {
    let h = &h.fresh();
    let policy = h.policy();
    for round in 0..20 {
        let u = h.user(&format!("u{round}"));
        let queues: Vec<Queue> = (0..8)
            .map(|i| h.queue(&format!("q{round}-{i}"), 3))
            .collect();
        let mut tasks = tokio::task::JoinSet::new();
        for q in queues.clone() {
            let (store, u) = (h.store.clone(), u.clone());
            tasks.spawn(async move { store.join(&policy, u, q).await.expect("join") });
        }
        let mut joined = Vec::new();
        while let Some(res) = tasks.join_next().await {
            match res.expect("a join task failed") {
                JoinOutcome::Joined(st) => joined.push(st),
                JoinOutcome::Conflict(MatchState::Waiting(_)) => {}
                other => panic!("{u}: {other:?}"),
            }
        }
        assert_eq!(joined.len(), 1, "{u}: {joined:?}");
        let MatchState::Waiting(w) = &joined[0] else {
            panic!("{u}: {joined:?}")
        };
        assert_eq!((w.position, w.waiting), (1, 1));
        assert_eq!(h.status(&u).await, joined[0]);
        for q in queues.iter().filter(|q| **q != w.queue) {
            let other = h.user(&format!("o{round}-{}", q.topic));
            h.join_waiting(&other, q, 1, 1).await;
        }
    }
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
