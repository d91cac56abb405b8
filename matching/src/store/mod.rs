//! Where matching lives: a [`MatchStore`] holds every queue, the groups formed from them and
//! which user is where, and makes every move in one atomic step.
//!
//! | operation | for | answer |
//! |---|---|---|
//! | [`join`](MatchStore::join) | a user who wants a group | waiting, matched at once, or a conflict |
//! | [`status`](MatchStore::status) | a user's poll | idle, waiting (position, waited) or matched |
//! | [`leave`](MatchStore::leave) | a user who gives up, or is done | where they stood before |
//! | [`confirm`](MatchStore::confirm) | the application, once it recorded a group | confirmed, conflict or unknown |
//! | [`tick`](MatchStore::tick) | a process's timer | the groups formed |
//!
//! The semantics every store implements exactly (the [`MemoryMatchStore`] is the reference, the
//! conformance suite checks them):
//! - **one place per user.** A user is idle, waiting in one queue, or in one group (pending or
//!   confirmed). Joining while waiting or in a group, in this queue or any other, is a
//!   [`JoinOutcome::Conflict`] and changes nothing. Nobody is ever in two groups.
//! - **oldest first.** Each queue numbers its waiters by a store-side sequence at their join;
//!   groups take the oldest waiters, `size` at a time, as soon as `size` wait.
//! - **fallback.** In a queue of size 3 or more, once its oldest waiter has waited
//!   `fallback_after` and at least two wait, the oldest waiters (up to `size`) form a group.
//!   A wait (the fallback's, [`Waiting::waited`](super::Waiting::waited)) counts from the
//!   user's join, also after a group of theirs was undone or dissolved.
//! - **timeout.** A waiter not matched `timeout` after joining is dropped (idle). Only
//!   waiting times out: a matched user is not dropped when their wait would have.
//! - **pending, then confirmed.** A group forms pending. The application confirms it with its
//!   own id ([`AppGroupId`]) once it recorded it. A group not confirmed `confirm_ttl` after it
//!   formed is undone: its members go back to the **front** of their queue, in their original
//!   order (their sequence numbers are kept), with a fresh `timeout`, and may form a group at
//!   once (as a new group, with a new number). A retried confirmation with the same id changes
//!   nothing (the record's keeping counts from the first). A confirmed group's record is kept
//!   `keep_confirmed` for its members' status answers, then they are idle.
//! - **leaving.** A waiter leaves the queue. A member of a pending group dissolves it: the
//!   others go back to the front of their queue, as when it is undone. A member of a confirmed
//!   group drops their record of it (they are idle; the others keep theirs, unchanged, its
//!   members included). A leave answers where the user stood after the housekeeping (their
//!   group undone for want of confirmation, they stood waiting), and its formation runs after
//!   they left: nobody is put in a group by their own leave.
//! - **formation** runs in every step that touches a queue (join, status, leave, confirm,
//!   tick), after its housekeeping (timeouts, undone groups, expired records), so a group forms
//!   in the step that makes it possible; [`tick`](MatchStore::tick) lets a process form groups
//!   (and undo them) when nobody polls. Work per step is bounded
//!   ([`MAX_MATCH_WORK_PER_CALL`] expiries and groups), the oldest due first; but what a step is
//!   about is brought up to date first, whatever else is due: the user's own wait, pending group
//!   or confirmed record (join, status, leave), the group confirmed (confirm). So the times
//!   above hold exactly for every answer, however far behind the queue's housekeeping is: a
//!   confirmation at or after `confirm_ttl` is [`Unknown`](ConfirmOutcome::Unknown), a status at
//!   or after `timeout` or `keep_confirmed` is idle.
//! - **time** is the store's clock (the Redis server's, the embedded store's [`Clock`]).
//!
//! [`Clock`]: tower_waiting_room::clock::Clock

use std::time::Duration;

pub use tower_waiting_room::store::{StoreError, StoreErrorKind, StoreFuture};

use super::{AppGroupId, ConfirmOutcome, GroupId, JoinOutcome, MatchState, Queue, UserId};

mod memory;

pub use memory::MemoryMatchStore;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
pub use self::redis::RedisMatchStore;

/// The most expiries and groups formed in one step of one queue: a queue with more to do
/// catches up over its next steps.
pub const MAX_MATCH_WORK_PER_CALL: usize = 100;

/// The timings of matching, passed to every store call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MatchPolicy {
    /// After how long the oldest waiter of a queue of 3 or more may be matched with fewer
    /// (at least 2).
    pub fallback_after: Duration,
    /// After how long an unmatched waiter is dropped.
    pub timeout: Duration,
    /// How long a formed group waits for the application's confirmation before it is undone.
    pub confirm_ttl: Duration,
    /// How long a confirmed group's record answers its members' status.
    pub keep_confirmed: Duration,
}

impl Default for MatchPolicy {
    /// The seed's timings: fallback after 60 s, timeout after 5 min, confirmation within 30 s;
    /// a confirmed group answers for 10 min.
    fn default() -> Self {
        Self {
            fallback_after: Duration::from_secs(60),
            timeout: Duration::from_secs(300),
            confirm_ttl: Duration::from_secs(30),
            keep_confirmed: Duration::from_secs(600),
        }
    }
}

impl MatchPolicy {
    /// With `fallback_after`.
    pub fn fallback_after(mut self, after: Duration) -> Self {
        self.fallback_after = after;
        self
    }

    /// With `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// With `confirm_ttl`.
    pub fn confirm_ttl(mut self, ttl: Duration) -> Self {
        self.confirm_ttl = ttl;
        self
    }

    /// With `keep_confirmed`.
    pub fn keep_confirmed(mut self, keep: Duration) -> Self {
        self.keep_confirmed = keep;
        self
    }
}

/// Queues, groups and who is where. Implementations follow the semantics in the
/// [module docs](self); every method is one atomic step.
pub trait MatchStore: Send + Sync + 'static {
    /// `user` joins `queue`: waits, or is matched at once if a group can form.
    fn join(&self, policy: &MatchPolicy, user: UserId, queue: Queue) -> StoreFuture<JoinOutcome>;
    /// Where `user` stands (after the housekeeping and formation of their queue).
    fn status(&self, policy: &MatchPolicy, user: UserId) -> StoreFuture<MatchState>;
    /// `user` leaves whatever they are in; answers where they stood before.
    fn leave(&self, policy: &MatchPolicy, user: UserId) -> StoreFuture<MatchState>;
    /// The application confirms `group` with its own id.
    fn confirm(
        &self,
        policy: &MatchPolicy,
        group: GroupId,
        app_id: AppGroupId,
    ) -> StoreFuture<ConfirmOutcome>;
    /// The housekeeping and formation of `queue`; answers how many groups formed.
    fn tick(&self, policy: &MatchPolicy, queue: Queue) -> StoreFuture<u64>;
}
