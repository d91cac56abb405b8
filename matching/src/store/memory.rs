//! The embedded store: every queue in one process, behind one lock. The reference for the
//! semantics (see [the module docs](super)); for one process, tests, and the lobby example.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{MatchPolicy, MatchStore, StoreFuture, MAX_MATCH_WORK_PER_CALL};
use crate::{
    AppGroupId, ConfirmOutcome, Group, GroupId, JoinOutcome, MatchState, Queue, UserId, Waiting,
};
use tower_waiting_room::clock::{Clock, SystemClock};

/// Matching in this process's memory.
///
/// ```
/// # tokio_test_block_on(async {
/// use tower_waiting_room_matching::store::{MatchPolicy, MatchStore, MemoryMatchStore};
/// use tower_waiting_room_matching::{GroupSize, JoinOutcome, MatchState, Queue, Topic, UserId};
///
/// let store = MemoryMatchStore::new();
/// let policy = MatchPolicy::default();
/// let queue = Queue::new(Topic::new("chess").unwrap(), GroupSize::PAIR);
/// let ann = UserId::new("ann").unwrap();
/// let bob = UserId::new("bob").unwrap();
/// store.join(&policy, ann.clone(), queue.clone()).await.unwrap();
/// // Bob makes two: the group forms in his join.
/// let JoinOutcome::Joined(MatchState::Matched(group)) =
///     store.join(&policy, bob, queue).await.unwrap() else { panic!() };
/// assert_eq!(group.members[0], ann);
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct MemoryMatchStore {
    state: Arc<Mutex<State>>,
    clock: Arc<dyn Clock>,
}

impl MemoryMatchStore {
    /// A store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }

    /// A store on the given clock.
    pub fn with_clock(clock: impl Clock) -> Self {
        Self {
            state: Arc::default(),
            clock: Arc::new(clock),
        }
    }

    /// Runs `step` on the state at the clock's now, as one atomic step.
    fn step<T: Send + 'static>(&self, step: impl FnOnce(&mut State, u64) -> T) -> StoreFuture<T> {
        let now = self.clock.now_ms();
        // A poisoned lock means a step panicked half-way; its state is still the reference's
        // data structure, so carry on rather than fail every later call.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let out = step(&mut state, now);
        Box::pin(std::future::ready(Ok(out)))
    }
}

impl Default for MemoryMatchStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryMatchStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryMatchStore").finish_non_exhaustive()
    }
}

impl MatchStore for MemoryMatchStore {
    fn join(&self, policy: &MatchPolicy, user: UserId, queue: Queue) -> StoreFuture<JoinOutcome> {
        let policy = *policy;
        self.step(move |state, now| state.join(&policy, now, user, queue))
    }

    fn status(&self, policy: &MatchPolicy, user: UserId) -> StoreFuture<MatchState> {
        let policy = *policy;
        self.step(move |state, now| {
            if let Some(queue) = state.housekeep_user(&policy, now, &user) {
                state.form(&policy, now, &queue);
            }
            state.state_of(now, &user)
        })
    }

    fn leave(&self, policy: &MatchPolicy, user: UserId) -> StoreFuture<MatchState> {
        let policy = *policy;
        self.step(move |state, now| state.leave(&policy, now, &user))
    }

    fn confirm(
        &self,
        policy: &MatchPolicy,
        group: GroupId,
        app_id: AppGroupId,
    ) -> StoreFuture<ConfirmOutcome> {
        let policy = *policy;
        self.step(move |state, now| state.confirm(&policy, now, group, app_id))
    }

    fn tick(&self, policy: &MatchPolicy, queue: Queue) -> StoreFuture<u64> {
        let policy = *policy;
        self.step(move |state, now| state.settle(&policy, now, &queue))
    }
}

/// Where a user is.
#[derive(Clone, Debug)]
enum Place {
    /// Waiting in the queue, with the waiter's sequence number there.
    Waiting(Queue, u64),
    Group(GroupId),
}

#[derive(Default)]
struct State {
    users: HashMap<UserId, Place>,
    queues: HashMap<Queue, QueueState>,
}

#[derive(Default)]
struct QueueState {
    next_seq: u64,
    groups_formed: u64,
    /// The line, by sequence number: oldest first.
    line: BTreeMap<u64, Waiter>,
    /// (expires at, sequence) of every waiter.
    expiry: BTreeSet<(u64, u64)>,
    pending: Records,
    confirmed: Records,
}

/// Group records by number, with an index by expiry: the housekeeping finds what is due in
/// O(log n), the earliest first (as the Redis store's sorted sets do).
#[derive(Default)]
struct Records {
    by_number: BTreeMap<u64, GroupRecord>,
    /// (expires at, number) of every record.
    by_expiry: BTreeSet<(u64, u64)>,
}

impl Records {
    fn insert(&mut self, number: u64, record: GroupRecord) {
        self.by_expiry.insert((record.expires_ms, number));
        if let Some(old) = self.by_number.insert(number, record) {
            self.by_expiry.remove(&(old.expires_ms, number));
        }
    }

    fn remove(&mut self, number: &u64) -> Option<GroupRecord> {
        let record = self.by_number.remove(number)?;
        self.by_expiry.remove(&(record.expires_ms, *number));
        Some(record)
    }

    fn get(&self, number: &u64) -> Option<&GroupRecord> {
        self.by_number.get(number)
    }

    fn contains_key(&self, number: &u64) -> bool {
        self.by_number.contains_key(number)
    }

    /// The numbers of at most `max` records due at `now`, the earliest first.
    fn due(&self, now: u64, max: usize) -> Vec<u64> {
        self.by_expiry
            .iter()
            .take_while(|(expires, _)| *expires <= now)
            .take(max)
            .map(|&(_, number)| number)
            .collect()
    }
}

#[derive(Clone)]
struct Waiter {
    user: UserId,
    joined_ms: u64,
    expires_ms: u64,
}

struct GroupRecord {
    /// (sequence, user, joined at), oldest first.
    members: Vec<(u64, UserId, u64)>,
    expires_ms: u64,
    app_id: Option<AppGroupId>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl QueueState {
    fn add(&mut self, seq: u64, waiter: Waiter) {
        self.expiry.insert((waiter.expires_ms, seq));
        self.line.insert(seq, waiter);
    }

    fn remove(&mut self, seq: u64) -> Option<Waiter> {
        let waiter = self.line.remove(&seq)?;
        self.expiry.remove(&(waiter.expires_ms, seq));
        Some(waiter)
    }
}

impl State {
    fn queue(&mut self, queue: &Queue) -> &mut QueueState {
        self.queues.entry(queue.clone()).or_default()
    }

    fn queue_of(&self, user: &UserId) -> Option<Queue> {
        match self.users.get(user)? {
            Place::Waiting(q, _) => Some(q.clone()),
            Place::Group(id) => Some(id.queue.clone()),
        }
    }

    /// The housekeeping of the queue `user` is in, if any, their own expiry first (whatever
    /// else is due there): answers that queue.
    fn housekeep_user(&mut self, policy: &MatchPolicy, now: u64, user: &UserId) -> Option<Queue> {
        let queue = self.queue_of(user)?;
        match self.users.get(user).cloned() {
            Some(Place::Waiting(_, seq)) => {
                let q = self.queue(&queue);
                if q.line.get(&seq).is_some_and(|w| w.expires_ms <= now) {
                    q.remove(seq);
                    self.users.remove(user);
                }
            }
            Some(Place::Group(id)) => self.expire_group(policy, now, &id),
            None => {}
        }
        self.housekeep(policy, now, &queue);
        Some(queue)
    }

    /// Group `id`, if its time is up: undone (pending) or dropped (confirmed).
    fn expire_group(&mut self, policy: &MatchPolicy, now: u64, id: &GroupId) {
        let q = self.queue(&id.queue);
        if q.pending
            .get(&id.number)
            .is_some_and(|g| g.expires_ms <= now)
        {
            self.dissolve(policy, now, &id.queue, id.number, None);
        } else if q
            .confirmed
            .get(&id.number)
            .is_some_and(|g| g.expires_ms <= now)
        {
            self.drop_confirmed(&id.queue, id.number);
        }
    }

    /// Drops confirmed group `number`'s record: its members are idle.
    fn drop_confirmed(&mut self, queue: &Queue, number: u64) {
        let Some(record) = self.queue(queue).confirmed.remove(&number) else {
            return;
        };
        let id = GroupId::new(queue.clone(), number);
        for (_, user, _) in record.members {
            if matches!(self.users.get(&user), Some(Place::Group(g)) if *g == id) {
                self.users.remove(&user);
            }
        }
    }

    /// The housekeeping, then formation, of `queue`. Answers the groups formed.
    fn settle(&mut self, policy: &MatchPolicy, now: u64, queue: &Queue) -> u64 {
        self.housekeep(policy, now, queue);
        self.form(policy, now, queue)
    }

    /// Timeouts, undone and expired groups in `queue`: at most `MAX_MATCH_WORK_PER_CALL` of
    /// each, the oldest first.
    fn housekeep(&mut self, policy: &MatchPolicy, now: u64, queue: &Queue) {
        // Timeouts.
        for _ in 0..MAX_MATCH_WORK_PER_CALL {
            let q = self.queue(queue);
            let Some(&(expires, seq)) = q.expiry.first() else {
                break;
            };
            if expires > now {
                break;
            }
            let waiter = q.remove(seq).expect("expiry and line agree");
            self.users.remove(&waiter.user);
        }
        // Pending groups not confirmed in time: undone, their members back at the front.
        let undone = self.queue(queue).pending.due(now, MAX_MATCH_WORK_PER_CALL);
        for number in undone {
            self.dissolve(policy, now, queue, number, None);
        }
        // Confirmed groups past their keeping: their members are idle.
        let expired = self
            .queue(queue)
            .confirmed
            .due(now, MAX_MATCH_WORK_PER_CALL);
        for number in expired {
            self.drop_confirmed(queue, number);
        }
    }

    /// Forms groups from the oldest waiters of `queue`: full ones, then a fallback one.
    fn form(&mut self, policy: &MatchPolicy, now: u64, queue: &Queue) -> u64 {
        let size = usize::from(queue.size.get());
        let mut formed = 0;
        for _ in 0..MAX_MATCH_WORK_PER_CALL {
            let q = self.queue(queue);
            let take = match q.line.first_key_value() {
                Some(_) if q.line.len() >= size => size,
                Some((_, oldest))
                    if size > 2
                        && q.line.len() >= 2
                        && now.saturating_sub(oldest.joined_ms) >= ms(policy.fallback_after) =>
                {
                    q.line.len()
                }
                _ => break,
            };
            let seqs: Vec<u64> = q.line.keys().take(take).copied().collect();
            let members: Vec<(u64, UserId, u64)> = seqs
                .into_iter()
                .map(|seq| {
                    let w = q.remove(seq).expect("listed");
                    (seq, w.user, w.joined_ms)
                })
                .collect();
            q.groups_formed += 1;
            let number = q.groups_formed;
            let id = GroupId::new(queue.clone(), number);
            for (_, user, _) in &members {
                self.users.insert(user.clone(), Place::Group(id.clone()));
            }
            self.queue(queue).pending.insert(
                number,
                GroupRecord {
                    members,
                    expires_ms: now.saturating_add(ms(policy.confirm_ttl)),
                    app_id: None,
                },
            );
            formed += 1;
        }
        formed
    }

    /// Undoes pending group `number`: its members (but `leaving`) go back to the front of the
    /// line with their sequence numbers and a fresh timeout; or, undone more than `timeout +
    /// confirm_ttl` after it expired (nothing touched the queue meanwhile), they are dropped,
    /// as the Redis store drops them (whose pointers outlive a group only that long).
    fn dissolve(
        &mut self,
        policy: &MatchPolicy,
        now: u64,
        queue: &Queue,
        number: u64,
        leaving: Option<&UserId>,
    ) {
        let Some(record) = self.queue(queue).pending.remove(&number) else {
            return;
        };
        let id = GroupId::new(queue.clone(), number);
        let stale = now
            >= record
                .expires_ms
                .saturating_add(ms(policy.timeout))
                .saturating_add(ms(policy.confirm_ttl));
        for (seq, user, joined_ms) in record.members {
            if Some(&user) == leaving {
                self.users.remove(&user);
                continue;
            }
            if !matches!(self.users.get(&user), Some(Place::Group(g)) if *g == id) {
                continue;
            }
            if stale {
                self.users.remove(&user);
                continue;
            }
            self.users
                .insert(user.clone(), Place::Waiting(queue.clone(), seq));
            self.queue(queue).add(
                seq,
                Waiter {
                    user,
                    joined_ms,
                    expires_ms: now.saturating_add(ms(policy.timeout)),
                },
            );
        }
    }

    fn join(&mut self, policy: &MatchPolicy, now: u64, user: UserId, queue: Queue) -> JoinOutcome {
        if let Some(current) = self.housekeep_user(policy, now, &user) {
            self.form(policy, now, &current);
        }
        if self.users.contains_key(&user) {
            return JoinOutcome::Conflict(self.state_of(now, &user));
        }
        let q = self.queue(&queue);
        q.next_seq += 1;
        let seq = q.next_seq;
        q.add(
            seq,
            Waiter {
                user: user.clone(),
                joined_ms: now,
                expires_ms: now.saturating_add(ms(policy.timeout)),
            },
        );
        self.users
            .insert(user.clone(), Place::Waiting(queue.clone(), seq));
        self.settle(policy, now, &queue);
        JoinOutcome::Joined(self.state_of(now, &user))
    }

    /// Housekeeping, the leave, then formation: nobody is put in a group by their own leave.
    fn leave(&mut self, policy: &MatchPolicy, now: u64, user: &UserId) -> MatchState {
        let Some(queue) = self.housekeep_user(policy, now, user) else {
            return MatchState::Idle;
        };
        let before = self.state_of(now, user);
        match self.users.get(user).cloned() {
            None => {}
            Some(Place::Waiting(queue, seq)) => {
                self.queue(&queue).remove(seq);
                self.users.remove(user);
            }
            Some(Place::Group(id)) => {
                if self.queue(&id.queue).pending.contains_key(&id.number) {
                    self.dissolve(policy, now, &id.queue, id.number, Some(user));
                } else {
                    self.users.remove(user);
                }
            }
        }
        self.form(policy, now, &queue);
        before
    }

    fn confirm(
        &mut self,
        policy: &MatchPolicy,
        now: u64,
        id: GroupId,
        app_id: AppGroupId,
    ) -> ConfirmOutcome {
        // The group's own expiry first, whatever else is due in its queue.
        self.expire_group(policy, now, &id);
        self.settle(policy, now, &id.queue);
        let q = self.queue(&id.queue);
        if let Some(mut record) = q.pending.remove(&id.number) {
            record.app_id = Some(app_id);
            record.expires_ms = now.saturating_add(ms(policy.keep_confirmed));
            q.confirmed.insert(id.number, record);
            return ConfirmOutcome::Confirmed(self.group(now, &id).expect("just confirmed"));
        }
        let same = match q.confirmed.get(&id.number) {
            None => return ConfirmOutcome::Unknown,
            Some(record) => record.app_id.as_ref() == Some(&app_id),
        };
        let group = self.group(now, &id).expect("confirmed");
        if same {
            ConfirmOutcome::Confirmed(group)
        } else {
            ConfirmOutcome::Conflict(group)
        }
    }

    fn group(&self, now: u64, id: &GroupId) -> Option<Group> {
        let q = self.queues.get(&id.queue)?;
        let record = q
            .pending
            .get(&id.number)
            .or_else(|| q.confirmed.get(&id.number))?;
        Some(Group {
            id: id.clone(),
            members: record.members.iter().map(|(_, u, _)| u.clone()).collect(),
            confirmed: record.app_id.clone(),
            expires_in: Duration::from_millis(record.expires_ms.saturating_sub(now)),
        })
    }

    fn state_of(&self, now: u64, user: &UserId) -> MatchState {
        match self.users.get(user) {
            None => MatchState::Idle,
            Some(Place::Group(id)) => self
                .group(now, id)
                .map_or(MatchState::Idle, MatchState::Matched),
            Some(Place::Waiting(queue, seq)) => {
                let Some(q) = self.queues.get(queue) else {
                    return MatchState::Idle;
                };
                let Some(waiter) = q.line.get(seq) else {
                    return MatchState::Idle;
                };
                // Those ahead, counted: O(position), the reference store's one linear step.
                let position = q.line.range(..*seq).count();
                MatchState::Waiting(Waiting {
                    queue: queue.clone(),
                    position: position as u64 + 1,
                    waiting: q.line.len() as u64,
                    waited: Duration::from_millis(now.saturating_sub(waiter.joined_ms)),
                    expires_in: Duration::from_millis(waiter.expires_ms.saturating_sub(now)),
                })
            }
        }
    }
}
