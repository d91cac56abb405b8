//! The embedded in-memory store: the default, for one process, demos and tests.
//!
//! Each room holds the same facts as the Redis script's keys ([`ZSet`]s for slots, [`Waiters`]
//! for the line and check-ins, with O(log n) positions), and runs the same steps, so the two
//! stores agree to the letter (the conformance suite checks it), including on how a damaged
//! room heals (see the script's header).
//!
//! A waiter is one record: their place (a sequence number that never changes, or a draw) and
//! the epochs of their last check-in in both liveness rules
//! ([`LivenessRule`](super::snapshot::LivenessRule)), kept as epochs, not times, so the two stores count a waiter alive or silent alike. The sweep of abandoned
//! waiters runs only in [`sync`](super::SnapshotStore::sync), oldest abandon epoch first
//! (amortised O(1) a waiter); the silent count is exact (a count per turn epoch); a snapshot's checkpoints are
//! exact ranks, O(log n) each.
//!
//! Locking: the map of rooms is behind an `RwLock` held only to find (or, once per room, add) a
//! room; each room has its own `Mutex`, held for one call's work, which is O(log n) in the room's
//! size (plus the bounded sweep and promotions, and the line's amortised O(1) renumbering). A
//! busy room never stalls the others.
//!
//! Layout: the files here follow the concerns of the script's files in
//! `src/store/redis/script/` (settings, schedule, liveness, line, pace, sync, operator, visitor),
//! so each rule's two copies read side by side; this file holds the store, a room's state and
//! the [`Store`] impl, which runs each operation of a concern file under the room's lock.

mod auto;
#[cfg(feature = "testing")]
mod damage;
mod keys;
mod line;
mod liveness;
mod operator;
mod pace;
mod schedule;
mod settings;
mod sync;
mod tickets;
mod visitor;
mod waiters;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use self::keys::ZSet;
use self::line::Sweep;
use self::liveness::Liveness;
use self::pace::Bucket;
use self::tickets::Tickets;
use self::waiters::Waiters;

use super::snapshot::{RoomSnapshot, SnapshotStore};
use super::{
    AdmissionRing, AutoApplied, AutoOff, AutoReport, AutoStore, Decision, GatewayId, MintFor,
    Minted, Redeemed, RoomSettings, RoomStats, SeenWaiters, SettingsChange, SettingsUpdate, Store,
    StoreFuture, TicketNonce, TicketStore,
};
use crate::clock::{Clock, SharedClock, SystemClock};
use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::auto::{check_auto_apply, check_auto_switch, check_auto_terms};
use crate::store::limits::check_policy;

/// The embedded store: one process's rooms in memory, with the exact semantics of the
/// [store docs](crate::store). Clones share the same rooms.
///
/// ```
/// use tower_waiting_room::testing::ManualClock;
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
    rooms: Arc<Rooms>,
    clock: SharedClock,
    /// Single-use ticket records of every room: apart from the rooms, as the Redis store keeps
    /// them in keys of their own, since no ticket call touches the line or the slots.
    tickets: Arc<Mutex<Tickets>>,
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
            tickets: Arc::default(),
        }
    }

    /// Ends the session's ticket record with its slot, in the step that ends the slot (under
    /// the room's lock, then the tickets', the order `redeem_ticket` takes them in).
    fn end_ticket(&self, policy: &RoomPolicy, session: SessionId, now: u64) {
        lock(&self.tickets).end(&policy.room, session, now);
    }

    /// The room's state, created empty on first use. The map's lock is held only for the
    /// lookup (a read lock, shared by every caller) or, once per room, the insertion.
    fn room(&self, room: &Arc<str>) -> Arc<Mutex<RoomState>> {
        let found = self
            .rooms
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room)
            .cloned();
        found.unwrap_or_else(|| {
            self.rooms
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(room.clone())
                .or_default()
                .clone()
        })
    }

    /// One call's step on the room of `policy`: its housekeeping (without the sweep of
    /// abandoned waiters, which only [`sync`](super::SnapshotStore::sync) does), then `op`.
    fn run<T: Send + 'static>(
        &self,
        policy: &RoomPolicy,
        op: impl FnOnce(&mut RoomState, &RoomPolicy, u64) -> T,
    ) -> StoreFuture<T> {
        self.run_with(policy, |_, _, _| {}, Sweep::No, op)
    }

    /// One call's step: `first` (before the housekeeping: `sync`'s check-ins, so the sweep and
    /// the skips at their turn see them), the housekeeping, with the sweep or not, then `op`.
    fn run_with<T: Send + 'static>(
        &self,
        policy: &RoomPolicy,
        first: impl FnOnce(&mut RoomState, &RoomPolicy, u64),
        sweep: Sweep,
        op: impl FnOnce(&mut RoomState, &RoomPolicy, u64) -> T,
    ) -> StoreFuture<T> {
        if let Err(e) = check_policy(policy) {
            return Box::pin(std::future::ready(Err(e)));
        }
        let room = self.room(&policy.room);
        let mut room = lock(&room);
        // Read under the room's lock, so a room's calls see time in the order they run.
        let now = self.clock.now_ms();
        room.load_settings(policy, now);
        let kept = room.apply_schedule(policy, now);
        let policy = kept.as_ref().unwrap_or(policy);
        room.liveness = Some(Liveness::of(policy));
        first(&mut room, policy, now);
        room.housekeeping(policy, now, sweep);
        let out = op(&mut room, policy, now);
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
        let rooms = self
            .rooms
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("MemoryStore")
            .field("rooms", &rooms)
            .finish()
    }
}

/// Every room by id, each behind its own lock.
type Rooms = RwLock<HashMap<Arc<str>, Arc<Mutex<RoomState>>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock can leave a room's parts out of step with each other; every
    // step tolerates that (and repairs it as the Redis script does), so keep going.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
impl Store for MemoryStore {
    fn enter(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.run(policy, move |room, policy, now| {
            visitor::enter(room, policy, session, now)
        })
    }

    fn poll(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.run(policy, move |room, policy, now| {
            visitor::poll(room, policy, session, now)
        })
    }

    fn heartbeat(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.run(policy, move |room, policy, now| {
            visitor::heartbeat(room, policy, session, now)
        })
    }

    fn release(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<bool> {
        self.run(policy, move |room, policy, now| {
            visitor::release(self, room, policy, session, now)
        })
    }

    fn stats(&self, policy: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.run(policy, operator::stats)
    }

    fn configure(
        &self,
        policy: &RoomPolicy,
        change: SettingsChange,
    ) -> StoreFuture<SettingsUpdate> {
        self.run(policy, move |room, policy, now| {
            operator::configure(room, policy, change, now)
        })
    }

    fn admit_next(&self, policy: &RoomPolicy, count: u32) -> StoreFuture<u64> {
        self.run(policy, move |room, policy, now| {
            operator::admit_next(room, policy, count, now)
        })
    }

    fn ban(&self, policy: &RoomPolicy, session: SessionId, until_ms: u64) -> StoreFuture<bool> {
        self.run(policy, move |room, policy, now| {
            operator::ban(self, room, policy, session, until_ms, now)
        })
    }

    fn tickets(self: Arc<Self>) -> Option<Arc<dyn TicketStore>> {
        Some(self)
    }

    fn auto(self: Arc<Self>) -> Option<Arc<dyn AutoStore>> {
        Some(self)
    }

    fn snapshots(self: Arc<Self>) -> Option<Arc<dyn SnapshotStore>> {
        Some(self)
    }
}

impl TicketStore for MemoryStore {
    fn mint_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
        mint_for: MintFor,
    ) -> StoreFuture<Minted> {
        let mut tickets = lock(&self.tickets);
        // Read under the lock, so ticket calls see time in the order they run.
        let now = self.clock.now_ms();
        let minted = tickets.mint(&policy.room, session, fresh, expires_at_ms, mint_for, now);
        Box::pin(std::future::ready(Ok(minted)))
    }

    fn redeem_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        nonce: TicketNonce,
    ) -> StoreFuture<Redeemed> {
        // The room's lock, then the tickets': the slot cannot end between its check and the
        // use (only this call takes both, always in this order).
        let room = self.room(&policy.room);
        let room = lock(&room);
        let mut tickets = lock(&self.tickets);
        let now = self.clock.now_ms();
        // A claimed slot, not yet expired (housekeeping may not have dropped it yet).
        let slot_expires = room.active.score(session).filter(|expires| *expires > now);
        let redeemed = tickets.redeem(&policy.room, session, nonce, slot_expires, now);
        Box::pin(std::future::ready(Ok(redeemed)))
    }
}

impl AutoStore for MemoryStore {
    fn auto_report(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        counts: &crate::auto::Window,
        window_ms: u64,
        lease_ms: u64,
    ) -> StoreFuture<AutoReport> {
        if let Err(e) = check_auto_terms(window_ms, lease_ms) {
            return Box::pin(std::future::ready(Err(e)));
        }
        // The record alone: no housekeeping of the line, as the script's report touches only
        // its own key.
        let room = self.room(&policy.room);
        let mut room = lock(&room);
        let now = self.clock.now_ms();
        let report = auto::report(&mut room.auto, gateway, counts, window_ms, lease_ms, now);
        Box::pin(std::future::ready(Ok(report)))
    }

    fn auto_apply(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        capacity: u32,
        rate: Option<u32>,
        status: &str,
    ) -> StoreFuture<AutoApplied> {
        if let Err(e) = check_auto_apply(capacity, rate, status) {
            return Box::pin(std::future::ready(Err(e)));
        }
        let status = status.to_owned();
        self.run(policy, move |room, policy, now| {
            auto::apply(room, policy, gateway, (capacity, rate), &status, now)
        })
    }

    fn auto_switch(
        &self,
        policy: &RoomPolicy,
        off: Option<AutoOff>,
        terms: Option<&str>,
    ) -> StoreFuture<()> {
        if let Err(e) = check_auto_switch(terms) {
            return Box::pin(std::future::ready(Err(e)));
        }
        let room = self.room(&policy.room);
        auto::switch(&mut lock(&room).auto, off, terms);
        Box::pin(std::future::ready(Ok(())))
    }
}

impl SnapshotStore for MemoryStore {
    fn sync(&self, policy: &RoomPolicy, seen: SeenWaiters) -> StoreFuture<RoomSnapshot> {
        // The closures run one after the other, in this call, under the room's lock.
        let unknown = std::cell::RefCell::new(Vec::new());
        let unknown = &unknown;
        self.run_with(
            policy,
            move |room, policy, now| {
                sync::check_in_seen(room, policy, now, &seen, &mut unknown.borrow_mut());
            },
            Sweep::Yes,
            move |room, policy, now| RoomSnapshot {
                unknown: unknown.take(),
                ..room.snapshot(policy, now)
            },
        )
    }
}

/// One room: the Redis script's keys, as Rust values.
#[derive(Default)]
struct RoomState {
    /// The line and the waiters' last check-ins (`seq`, `line` and `seen`), for positions,
    /// skipping at their turn and the abandoned sweep.
    waiters: Waiters,
    /// Claimed slots by expiry (`active`).
    active: ZSet,
    /// Granted, unclaimed slots by expiry (`granted`).
    granted: ZSet,
    bucket: Bucket,
    /// Promotions (or skips of silent waiters) left in the current call: reset by
    /// `housekeeping`, shared by every `promote` of the call so a `release` that promotes again
    /// stays within [`MAX_PROMOTIONS_PER_CALL`].
    promotions_left: u32,
    /// Admissions per 10-second bucket, for the wait estimate (`admitted`).
    admissions: AdmissionRing,
    /// The live settings (`settings`): written from a call's policy when missing (a new room,
    /// or the damage hook's lost part).
    settings: Option<RoomSettings>,
    /// Banned sessions and when each ban ends (`banned`).
    banned: HashMap<SessionId, u64>,
    /// When the room was first seen (the script's `born` in `settings`).
    born: Option<u64>,
    /// The capacity before its last change, and when (`cap_before`, `cap_at` in `settings`).
    capacity_change: Option<(u32, u64)>,
    /// When the current pause began (`paused_at`), and the last pause that ended
    /// (`pause_start`, `pause_end`).
    paused_at: Option<u64>,
    last_pause: Option<(u64, u64)>,
    /// Admissions since the room was first seen, until its first movement (`early`), and when
    /// that was (`moved`): the first admission beyond the opening's capacity.
    admitted_early: u64,
    first_move: Option<u64>,
    /// The last schedule a call came with: its opening, closing and whether the line is kept
    /// (`opens_at`, `closes_at`, `keep_line` in `settings`), followed by calls without one
    /// while the opening is ahead.
    kept_schedule: Option<(u64, Option<u64>, bool)>,
    /// The liveness rules of the room's last call (for the damage hook's stray check-in).
    liveness: Option<Liveness>,
    /// The capacity controller's record (`auto`, a key of its own in the script).
    auto: auto::Record,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ManualClock;

    fn now<T>(f: StoreFuture<T>) -> T {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut f = f;
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(out) => out.expect("the embedded store does not fail"),
            std::task::Poll::Pending => panic!("not ready"),
        }
    }

    /// A room busy with a call (its lock held) does not stall calls to other rooms: the map of
    /// rooms is locked only to find a room.
    #[test]
    fn a_busy_room_does_not_stall_the_others() {
        let store = MemoryStore::with_clock(ManualClock::new(1_000_000));
        let (busy, other) = (RoomPolicy::new("busy", 1), RoomPolicy::new("other", 1));
        now(store.stats(&busy));
        let room = store.room(&busy.room);
        let held = lock(&room);
        let (tx, rx) = std::sync::mpsc::channel();
        let s = store.clone();
        let t = std::thread::spawn(move || {
            let d = now(s.enter(&other, SessionId::random()));
            tx.send(d).unwrap();
        });
        let d = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a call to another room waited for the busy room's lock");
        assert!(matches!(d, Decision::Admitted { .. }));
        drop(held);
        t.join().unwrap();
    }

    /// The same room from many threads: one lock per room keeps its calls in order, and the
    /// capacity holds.
    #[test]
    fn one_room_from_many_threads() {
        let store = MemoryStore::with_clock(ManualClock::new(1_000_000));
        let policy = RoomPolicy::new("shared", 3);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (store, policy) = (store.clone(), policy.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let s = SessionId::random();
                        now(store.enter(&policy, s));
                        let st = now(store.stats(&policy));
                        assert!(st.admitted + st.granted <= 3, "{st:?}");
                        now(store.release(&policy, s));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let st = now(store.stats(&policy));
        assert_eq!((st.admitted, st.granted, st.waiting), (0, 0, 0), "{st:?}");
    }
}
