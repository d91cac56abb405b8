//! The embedded in-memory store: the default, for one process, demos and tests.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    AdmissionRing, Decision, RoomStats, Store, StoreFuture, MAX_PROMOTIONS_PER_CALL,
    MAX_SWEEP_PER_CALL,
};
use crate::clock::{Clock, SharedClock, SystemClock};
use crate::config::RoomPolicy;
use crate::session::SessionId;

/// The embedded store: one process's rooms in memory, with the exact semantics of the
/// [store docs](crate::store). Clones share the same rooms.
///
/// ```
/// use tower_waiting_room::clock::ManualClock;
/// use tower_waiting_room::store::{Decision, MemoryStore, Store};
/// use tower_waiting_room::{RoomPolicy, SessionId};
///
/// # tokio_test_block_on(async {
/// let store = MemoryStore::with_clock(ManualClock::new(0));
/// let policy = RoomPolicy::new("shop", 1);
/// let (a, b) = (SessionId::random(), SessionId::random());
/// assert!(matches!(store.enter(&policy, a).await?, Decision::Admitted { .. }));
/// assert!(matches!(
///     store.enter(&policy, b).await?,
///     Decision::Waiting { position: 1, waiting: 1, .. }
/// ));
/// store.release(&policy, a).await?;
/// assert!(matches!(store.enter(&policy, b).await?, Decision::Admitted { .. }));
/// # Ok::<_, tower_waiting_room::store::StoreError>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    rooms: Arc<Mutex<HashMap<Arc<str>, RoomState>>>,
    clock: SharedClock,
}

impl MemoryStore {
    /// A store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }

    /// A store on the given clock (use the same clock for the layer).
    pub fn with_clock(clock: impl Clock) -> Self {
        Self::with_shared_clock(Arc::new(clock))
    }

    pub(crate) fn with_shared_clock(clock: SharedClock) -> Self {
        Self {
            rooms: Arc::default(),
            clock,
        }
    }

    fn run<T: Send + 'static>(
        &self,
        policy: &RoomPolicy,
        op: impl FnOnce(&mut RoomState, &RoomPolicy, u64) -> T,
    ) -> StoreFuture<T> {
        let now = self.clock.now_ms();
        let mut rooms = lock(&self.rooms);
        let room = match rooms.get_mut(&policy.room) {
            Some(room) => room,
            None => rooms.entry(policy.room.clone()).or_default(),
        };
        room.housekeeping(policy, now);
        let out = op(room, policy, now);
        Box::pin(std::future::ready(Ok(out)))
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("rooms", &lock(&self.rooms).len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a room half-updated in a way that breaks the
    // invariants badly enough to stop serving; keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Store for MemoryStore {
    fn enter(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.run(policy, move |room, policy, now| {
            if let Some(d) = room.claim_or_extend(session, policy, now) {
                return d;
            }
            if room.waiters.contains_key(&session) {
                return room.touch(session, now);
            }
            if room.line.is_empty()
                && room.free_slots(policy) > 0
                && room.bucket.take(policy.admission_rate, now)
            {
                let expires_at_ms = now + policy.active_ttl_ms;
                room.put_slot(session, expires_at_ms, true);
                room.admissions.count(now);
                return Decision::Admitted { expires_at_ms };
            }
            let waiting = room.waiters.len() as u64;
            if waiting >= policy.max_queue_len {
                return Decision::Full { waiting };
            }
            room.seq += 1;
            room.line.insert(room.seq, session);
            room.seen.insert((now, session));
            room.waiters.insert(
                session,
                Waiter {
                    seq: room.seq,
                    last_seen_ms: now,
                },
            );
            Decision::Waiting {
                position: waiting + 1,
                waiting: waiting + 1,
                recent: room.admissions.counts(now),
            }
        })
    }

    fn poll(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.run(policy, move |room, _, now| {
            if let Some(slot) = room.slots.get(&session) {
                return Decision::Admitted {
                    expires_at_ms: slot.expires_at_ms,
                };
            }
            if room.waiters.contains_key(&session) {
                return room.touch(session, now);
            }
            Decision::Unknown
        })
    }

    fn heartbeat(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.run(policy, move |room, policy, now| {
            room.claim_or_extend(session, policy, now)
                .unwrap_or(Decision::Unknown)
        })
    }

    fn release(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<bool> {
        self.run(policy, move |room, policy, now| {
            let released = room.remove_slot(session) || room.remove_waiter(session);
            if released {
                room.promote(policy, now);
            }
            released
        })
    }

    fn stats(&self, policy: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.run(policy, |room, policy, now| {
            let granted = room.slots.values().filter(|s| !s.claimed).count() as u64;
            RoomStats {
                admitted: room.slots.len() as u64 - granted,
                granted,
                waiting: room.waiters.len() as u64,
                capacity: u64::from(policy.capacity),
                recent: room.admissions.counts(now),
            }
        })
    }
}

#[derive(Default)]
struct RoomState {
    /// Last sequence number handed out; the line is ordered by it.
    seq: u64,
    /// The line: sequence → session.
    line: BTreeMap<u64, SessionId>,
    /// Waiters by session.
    waiters: HashMap<SessionId, Waiter>,
    /// Waiters by last check-in, for the sweep.
    seen: BTreeSet<(u64, SessionId)>,
    /// Slots (claimed and granted) by session.
    slots: HashMap<SessionId, Slot>,
    /// Slots by expiry.
    expiry: BTreeSet<(u64, SessionId)>,
    bucket: Bucket,
    /// Promotions (or skips of silent waiters) left in the current call: reset by
    /// `housekeeping`, shared by every `promote` of the call so a `release` that promotes again
    /// stays within [`MAX_PROMOTIONS_PER_CALL`].
    promotions_left: u32,
    /// Admissions per 10-second bucket, for the wait estimate.
    admissions: AdmissionRing,
}

struct Waiter {
    seq: u64,
    last_seen_ms: u64,
}

struct Slot {
    expires_at_ms: u64,
    /// `false` while granted to a promoted visitor who has not come back yet.
    claimed: bool,
}

impl RoomState {
    fn free_slots(&self, policy: &RoomPolicy) -> u64 {
        u64::from(policy.capacity).saturating_sub(self.slots.len() as u64)
    }

    /// Expire slots, sweep silent waiters, promote.
    fn housekeeping(&mut self, policy: &RoomPolicy, now: u64) {
        self.promotions_left = MAX_PROMOTIONS_PER_CALL;
        while let Some(&(expires, session)) = self.expiry.first() {
            if expires > now {
                break;
            }
            self.remove_slot(session);
        }
        let cutoff = now.saturating_sub(policy.queue_ttl_ms);
        for _ in 0..MAX_SWEEP_PER_CALL {
            match self.seen.first() {
                Some(&(seen, session)) if seen < cutoff => {
                    self.remove_waiter(session);
                }
                _ => break,
            }
        }
        self.promote(policy, now);
    }

    /// Grants free slots to the head of the line, skipping silent waiters; bounded work: at most
    /// [`MAX_PROMOTIONS_PER_CALL`] promotions and skips per call, however often it runs in it.
    fn promote(&mut self, policy: &RoomPolicy, now: u64) {
        let cutoff = now.saturating_sub(policy.queue_ttl_ms);
        while self.promotions_left > 0 {
            let Some((_, &session)) = self.line.first_key_value() else {
                break;
            };
            let silent = self.waiters[&session].last_seen_ms < cutoff;
            if silent {
                self.remove_waiter(session);
                self.promotions_left -= 1;
                continue;
            }
            if self.free_slots(policy) == 0 || !self.bucket.take(policy.admission_rate, now) {
                break;
            }
            self.remove_waiter(session);
            self.put_slot(session, now + policy.grant_ttl_ms, false);
            self.admissions.count(now);
            self.promotions_left -= 1;
        }
    }

    /// An admitted or granted visitor: claim the grant or extend the slot to `active_ttl`.
    fn claim_or_extend(
        &mut self,
        session: SessionId,
        policy: &RoomPolicy,
        now: u64,
    ) -> Option<Decision> {
        self.slots.contains_key(&session).then(|| {
            let expires_at_ms = now + policy.active_ttl_ms;
            self.put_slot(session, expires_at_ms, true);
            Decision::Admitted { expires_at_ms }
        })
    }

    fn touch(&mut self, session: SessionId, now: u64) -> Decision {
        let waiter = self.waiters.get_mut(&session).expect("caller checked");
        self.seen.remove(&(waiter.last_seen_ms, session));
        waiter.last_seen_ms = now;
        self.seen.insert((now, session));
        let seq = waiter.seq;
        // O(position): fine for the embedded store's sizes; the Redis store ranks in O(log n).
        let ahead = self.line.range(..seq).count() as u64;
        Decision::Waiting {
            position: ahead + 1,
            waiting: self.waiters.len() as u64,
            recent: self.admissions.counts(now),
        }
    }

    fn put_slot(&mut self, session: SessionId, expires_at_ms: u64, claimed: bool) {
        if let Some(old) = self.slots.insert(
            session,
            Slot {
                expires_at_ms,
                claimed,
            },
        ) {
            self.expiry.remove(&(old.expires_at_ms, session));
        }
        self.expiry.insert((expires_at_ms, session));
    }

    fn remove_slot(&mut self, session: SessionId) -> bool {
        match self.slots.remove(&session) {
            Some(slot) => {
                self.expiry.remove(&(slot.expires_at_ms, session));
                true
            }
            None => false,
        }
    }

    fn remove_waiter(&mut self, session: SessionId) -> bool {
        match self.waiters.remove(&session) {
            Some(w) => {
                self.line.remove(&w.seq);
                self.seen.remove(&(w.last_seen_ms, session));
                true
            }
            None => false,
        }
    }
}

/// The admission-rate budget: a token bucket holding up to one second of admissions, counted in
/// thousandths of an admission so the Redis script can do the same integer arithmetic.
#[derive(Default)]
struct Bucket {
    /// Thousandths of an admission available; `None` means full (never used).
    milli: Option<u64>,
    last_ms: u64,
}

impl Bucket {
    fn take(&mut self, rate: Option<u32>, now: u64) -> bool {
        let Some(rate) = rate else { return true };
        let max = u64::from(rate) * 1000;
        let refilled = match self.milli {
            None => max,
            Some(milli) => {
                let elapsed = now.saturating_sub(self.last_ms);
                milli
                    .saturating_add(elapsed.saturating_mul(u64::from(rate)))
                    .min(max)
            }
        };
        self.last_ms = now;
        if refilled >= 1000 {
            self.milli = Some(refilled - 1000);
            true
        } else {
            self.milli = Some(refilled);
            false
        }
    }
}
