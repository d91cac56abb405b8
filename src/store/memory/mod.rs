//! The embedded in-memory store: the default, for one process, demos and tests.
//!
//! Each room holds the same facts as the Redis script's keys ([`ZSet`]s for slots, [`Waiters`]
//! for the line and check-ins, with O(log n) positions), and runs the same steps, so the two
//! stores agree to the letter (the conformance suite checks it), including on how a damaged
//! room heals (see the script's header).
//!
//! A waiter is one record: their place (a sequence number that never changes, or a draw) and
//! the epochs of their last check-in in both liveness rules ([`LivenessRule`]), kept as epochs,
//! not times, so the two stores count a waiter alive or silent alike. The sweep of abandoned
//! waiters runs only in [`sync`](Store::sync), oldest abandon epoch first (amortised O(1) a
//! waiter); the silent count is exact (a count per turn epoch); a snapshot's checkpoints are
//! exact ranks, O(log n) each.
//!
//! Locking: the map of rooms is behind an `RwLock` held only to find (or, once per room, add) a
//! room; each room has its own `Mutex`, held for one call's work, which is O(log n) in the room's
//! size (plus the bounded sweep and promotions, and the line's amortised O(1) renumbering). A
//! busy room never stalls the others.

mod sets;
mod tickets;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use self::sets::{Epochs, Waiters, ZSet};
use self::tickets::Tickets;

use super::snapshot::{checkpoint_ranks, Checkpoint, LivenessRule, Place, RoomSnapshot};
use super::{
    AdmissionRing, Decision, Minted, Redeemed, RoomPace, RoomSettings, RoomStats, SeenWaiters,
    SettingsChange, SettingsUpdate, Store, StoreFuture, TicketNonce, ADMISSION_BUCKET_MS,
    MAX_ADMIT_NEXT_PER_CALL, MAX_PROMOTIONS_PER_CALL, MAX_SWEEP_PER_CALL,
};
use crate::clock::{Clock, SharedClock, SystemClock};
use crate::config::{EventSchedule, RoomPolicy};
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
    /// abandoned waiters, which only [`sync`](Store::sync) does), then `op`.
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
        let room = self.room(&policy.room);
        let mut room = lock(&room);
        // Read under the room's lock, so a room's calls see time in the order they run.
        let now = self.clock.now_ms();
        if room.settings.is_none() {
            // A room first seen (or its settings lost): the builder's values, as the script.
            room.settings = Some(RoomSettings::from_policy(policy));
        }
        if room.born.is_none_or(|born| born > now) {
            // As the script: when the room was first seen (a clock gone back: now), and its
            // first movement yet to come.
            room.born = Some(now);
            room.admitted_early = 0;
            room.first_move = None;
        }
        // The schedule, as the script: kept from the calls that come with it, followed by a
        // call without one (a gateway built without it) while the kept opening is ahead.
        let kept;
        let policy = match &policy.schedule {
            Some(s) => {
                room.kept_schedule = Some((s.opens_at_ms, s.closes_at_ms, s.keep_line_after_close));
                policy
            }
            None => match room.kept_schedule {
                Some((opens, closes, keep)) if opens > now => {
                    kept = policy
                        .clone()
                        .with_schedule(Some(EventSchedule::kept(opens, closes, keep)));
                    &kept
                }
                _ => policy,
            },
        };
        room.liveness = Some(Liveness::of(policy));
        first(&mut room, policy, now);
        room.housekeeping(policy, now, sweep);
        let out = op(&mut room, policy, now);
        Box::pin(std::future::ready(Ok(out)))
    }

    /// Test hook for the conformance suite's damage cases: does `damage` to `room`'s state,
    /// as the Redis harness does with real commands. `Err(reason)` for damage a store of typed
    /// Rust values cannot suffer.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn __damage(&self, room: &str, damage: super::damage::Damage) -> Result<(), &'static str> {
        use super::damage::{Damage, Part};
        const TYPED: &str = "the embedded store's parts are typed Rust values: they cannot hold \
                             a value of the wrong type or a number that is not a number";
        let room = self.room(&Arc::from(room));
        let mut r = lock(&room);
        match damage {
            Damage::Lost(part) => match part {
                Part::Seq => r.waiters.forget_last_seq(),
                Part::Line => r.waiters.clear_places(),
                Part::Seen => r.waiters.clear_check_ins(),
                Part::Active => r.active.clear(),
                Part::Granted => r.granted.clear(),
                Part::Bucket => r.bucket = Bucket::default(),
                Part::Admitted => r.admissions = AdmissionRing::default(),
                Part::Settings => {
                    r.settings = None;
                    r.born = None;
                    r.capacity_change = None;
                    r.paused_at = None;
                    r.last_pause = None;
                    r.admitted_early = 0;
                    r.first_move = None;
                    r.kept_schedule = None;
                }
                Part::Banned => r.banned.clear(),
                Part::Arrivals => {
                    return Err("the embedded store keeps each waiter's arrival with its place")
                }
            },
            Damage::WrongType(_) | Damage::NotANumber(_) => return Err(TYPED),
            Damage::SettingsVersion(_) => {
                return Err("the embedded store's settings are this crate's own Rust value")
            }
            Damage::BucketFieldLost => {
                return Err("the embedded budget is one Rust value: it has no field to lose")
            }
            Damage::CheckInLost(s) => r.waiters.remove_check_in(s),
            Damage::StrayCheckIn(s, at) => {
                // By the rules of the room's last call (a room never called: epochs of 1 ms).
                let rules = r.liveness.unwrap_or(Liveness {
                    turn: LivenessRule {
                        width_ms: 1,
                        keep: 0,
                    },
                    abandon: LivenessRule {
                        width_ms: 1,
                        keep: 0,
                    },
                });
                r.waiters.check_in(s, rules.at(at));
            }
            Damage::SlotHolderInLine(s) => r.waiters.push(s),
        }
        Ok(())
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
            if let Some(d) = room.claim_or_extend(session, policy, now) {
                return d;
            }
            let at = check_in_epochs(policy, now);
            if !room.live().open {
                // Closed: a waiter keeps their place (checked in) for a reopening; a
                // newcomer is not added.
                room.waiters.touch(session, at);
                return Decision::Closed;
            }
            if let Some((position, place)) = room.waiters.touch(session, at) {
                return room.waiter(position, place, policy, now);
            }
            if after_closing(policy, now) {
                // The event's closing: newcomers are not added.
                return Decision::Closed;
            }
            if room.is_banned(session, now) {
                return Decision::Banned;
            }
            if let Some(schedule) = policy.schedule.as_ref().filter(|s| s.before_opening(now)) {
                // The pre-queue: a place by the session's draw, ahead of every later arrival;
                // checked in as of the opening, so silence counts from then.
                let waiting = room.waiters.len() as u64;
                if waiting >= policy.max_queue_len {
                    return Decision::Full { waiting };
                }
                if schedule.draws && !room.waiters.has_sequenced() {
                    room.waiters.push_pre(session, schedule.draw(session), now);
                } else {
                    // No draw (a kept schedule), or waiters with sequence numbers in line (an
                    // earlier opening's line, which a draw would jump): first come, first served.
                    room.waiters.push_at(session, Some(now));
                }
                room.waiters.check_in(session, at);
                return Decision::Scheduled {
                    opens_at_ms: schedule.opens_at_ms,
                };
            }
            if room.live().admits()
                && room.waiters.is_empty()
                && room.free_slots() > 0
                && room.bucket.take(room.live().admission_rate, now)
            {
                let expires_at_ms = now + policy.active_ttl_ms;
                room.active.add(session, expires_at_ms);
                room.count_admission(now);
                return Decision::Admitted { expires_at_ms };
            }
            let waiting = room.waiters.len() as u64;
            if waiting >= policy.max_queue_len {
                return Decision::Full { waiting };
            }
            room.waiters.push_at(session, Some(now));
            match room.waiters.touch(session, at) {
                Some((position, place)) => room.waiting(position, place, policy, now),
                // (Never: the place was just made.)
                None => Decision::Unknown,
            }
        })
    }

    fn poll(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.run(policy, move |room, policy, now| {
            if let Some(expires_at_ms) = room.slot(session) {
                return Decision::Admitted { expires_at_ms };
            }
            if let Some((position, place)) =
                room.waiters.touch(session, check_in_epochs(policy, now))
            {
                if !room.live().open {
                    return Decision::Closed;
                }
                return room.waiter(position, place, policy, now);
            }
            // No place: a check-in without one is damage; drop it (only on this rare path).
            room.waiters.remove_check_in(session);
            if room.is_banned(session, now) {
                return Decision::Banned;
            }
            if !room.live().open || after_closing(policy, now) {
                return Decision::Closed;
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
            self.end_ticket(policy, session, now);
            let released = room.drop_session(session);
            if released {
                room.promote(policy, now);
            }
            released
        })
    }

    fn stats(&self, policy: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.run(policy, |room, policy, now| RoomStats {
            admitted: room.active.len() as u64,
            granted: room.granted.len() as u64,
            waiting: room.waiters.len() as u64,
            capacity: u64::from(room.live().capacity),
            recent: room.admissions.counts(now),
            settings: room.live(),
            oldest_wait_ms: room.waiters.head_joined().map(|t| now.saturating_sub(t)),
            admissions_per_minute: room.admissions.per_minute(now),
            pace: room.pace(policy, now),
        })
    }

    fn configure(
        &self,
        policy: &RoomPolicy,
        change: SettingsChange,
    ) -> StoreFuture<SettingsUpdate> {
        self.run(policy, move |room, policy, now| {
            let before = room.live();
            room.settings = Some(before.with(&change));
            if room.live().capacity != before.capacity {
                room.capacity_change = Some((before.capacity, now));
            }
            match (before.paused, room.live().paused) {
                (false, true) => room.paused_at = Some(now),
                (true, false) => room.last_pause = Some((room.paused_at.unwrap_or(now), now)),
                _ => {}
            }
            if change.ends_slots() {
                room.active.clear();
                room.granted.clear();
            }
            // A raised capacity or a resume lets people in now, not at the next call.
            room.promote(policy, now);
            SettingsUpdate::new(before, room.live())
        })
    }

    fn admit_next(&self, policy: &RoomPolicy, count: u32) -> StoreFuture<u64> {
        self.run(policy, move |room, policy, now| {
            if policy.before_opening(now) {
                // Nobody is admitted before the opening, not even by an operator.
                return 0;
            }
            let turn = LivenessRule::for_turn(policy);
            // As the script: at most `want` let in and `2 * want` looked at (silent ones
            // skipped), so the work per call stays bounded.
            let want = u64::from(count.min(MAX_ADMIT_NEXT_PER_CALL));
            let (mut admitted, mut steps) = (0, 0);
            while admitted < want && steps < 2 * want {
                let Some(head) = room.waiters.head() else {
                    break;
                };
                steps += 1;
                // (A place without a check-in counts as seen now: not silent.)
                let silent = room
                    .waiters
                    .seen(head)
                    .is_some_and(|seen| !turn.alive(seen.turn, now));
                room.waiters.remove(head);
                let holder = room.slot(head).is_some();
                if !holder && silent {
                    room.admissions.count_skip(now);
                }
                if holder || silent {
                    // A slot holder's stray place, or a waiter silent at their turn: skipped.
                    continue;
                }
                room.granted.add(head, now + policy.grant_ttl_ms);
                room.count_admission(now);
                admitted += 1;
            }
            admitted
        })
    }

    fn ban(&self, policy: &RoomPolicy, session: SessionId, until_ms: u64) -> StoreFuture<bool> {
        self.run(policy, move |room, policy, now| {
            room.banned.retain(|_, until| *until > now);
            if until_ms > now {
                room.banned.insert(session, until_ms);
            }
            self.end_ticket(policy, session, now);
            let had = room.drop_session(session);
            if had {
                room.promote(policy, now);
            }
            had
        })
    }

    fn mint_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
    ) -> StoreFuture<Minted> {
        let mut tickets = lock(&self.tickets);
        // Read under the lock, so ticket calls see time in the order they run.
        let now = self.clock.now_ms();
        let minted = tickets.mint(&policy.room, session, fresh, expires_at_ms, now);
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

    fn keeps_tickets(&self) -> bool {
        true
    }

    fn sync(&self, policy: &RoomPolicy, seen: SeenWaiters) -> StoreFuture<RoomSnapshot> {
        // The closures run one after the other, in this call, under the room's lock.
        let unknown = std::cell::RefCell::new(Vec::new());
        let unknown = &unknown;
        self.run_with(
            policy,
            move |room, policy, now| {
                // Only waiters with a place are checked in: nothing is made for the others,
                // who are answered back. Those beyond the turn horizon too: a check-in here is
                // one time per waiter, so leaving out the turn's would save nothing.
                let at = check_in_epochs(policy, now);
                for &session in seen.iter() {
                    if room.waiters.touch(session, at).is_none() {
                        unknown.borrow_mut().push(session);
                    }
                }
            },
            Sweep::Yes,
            move |room, policy, now| RoomSnapshot {
                unknown: unknown.take(),
                ..room.snapshot(policy, now)
            },
        )
    }

    fn keeps_snapshots(&self) -> bool {
        true
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
}

impl RoomState {
    /// Counts an admission; the first beyond the opening's capacity is the room's first
    /// movement (`moved` in `settings`).
    fn count_admission(&mut self, now: u64) {
        self.admissions.count(now);
        if self.first_move.is_none() {
            self.admitted_early += 1;
            if self.admitted_early > u64::from(self.live().capacity) {
                self.first_move = Some(now);
            }
        }
    }

    /// The live settings (written by [`MemoryStore::run`] before any step).
    fn live(&self) -> RoomSettings {
        self.settings.unwrap_or_default()
    }

    fn free_slots(&self) -> u64 {
        u64::from(self.live().capacity)
            .saturating_sub((self.active.len() + self.granted.len()) as u64)
    }

    /// Frees the session's slot, or else its place. `true` if it had one.
    fn drop_session(&mut self, session: SessionId) -> bool {
        let had_slot = self.active.remove(session) | self.granted.remove(session);
        had_slot || self.waiters.remove(session)
    }

    /// Whether `session` is banned at `now` (an ended ban is forgotten).
    fn is_banned(&mut self, session: SessionId, now: u64) -> bool {
        match self.banned.get(&session) {
            Some(&until) if until > now => true,
            Some(_) => {
                self.banned.remove(&session);
                false
            }
            None => false,
        }
    }

    /// The expiry of the session's slot, claimed or granted.
    fn slot(&self, session: SessionId) -> Option<u64> {
        self.active
            .score(session)
            .or_else(|| self.granted.score(session))
    }

    /// Expire slots, sweep abandoned waiters (only for `sync`), promote.
    fn housekeeping(&mut self, policy: &RoomPolicy, now: u64, sweep: Sweep) {
        self.promotions_left = MAX_PROMOTIONS_PER_CALL;
        for slots in [&mut self.active, &mut self.granted] {
            while let Some((expires, session)) = slots.first() {
                if expires > now {
                    break;
                }
                slots.remove(session);
            }
        }
        if sweep == Sweep::Yes {
            let abandon = LivenessRule::for_abandon(policy);
            self.waiters
                .sweep(|epoch| abandon.alive(epoch, now), MAX_SWEEP_PER_CALL);
        }
        self.promote(policy, now);
    }

    /// Grants free slots to the head of the line, skipping waiters silent at their turn (not
    /// alive by [`LivenessRule::for_turn`]); bounded work: at most [`MAX_PROMOTIONS_PER_CALL`] promotions
    /// and skips per call, however often it runs in it.
    fn promote(&mut self, policy: &RoomPolicy, now: u64) {
        if !self.live().admits() || policy.before_opening(now) || line_closed(policy, now) {
            return;
        }
        let turn = LivenessRule::for_turn(policy);
        while self.promotions_left > 0 && self.free_slots() > 0 {
            let Some(head) = self.waiters.head() else {
                break;
            };
            if self.slot(head).is_some() {
                // Damage: a slot holder with a place too. The slot wins; no second slot.
                self.waiters.remove(head);
            } else {
                let seen = self.waiters.seen(head).unwrap_or_else(|| {
                    // Damage: a place without a check-in. Counted as seen now: they keep
                    // their turn.
                    let at = check_in_epochs(policy, now);
                    self.waiters.check_in(head, at);
                    at
                });
                if !turn.alive(seen.turn, now) {
                    self.waiters.remove(head);
                    self.admissions.count_skip(now);
                } else {
                    if !self.bucket.take(self.live().admission_rate, now) {
                        break;
                    }
                    self.waiters.remove(head);
                    self.granted.add(head, now + policy.grant_ttl_ms);
                    self.count_admission(now);
                }
            }
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
        self.slot(session)?;
        if !self.live().open {
            // Closed: claimed slots run out, not extended. A granted slot is still claimed: its
            // visitor was let in before the close, or by an operator's release.
            if let Some(expires_at_ms) = self.active.score(session) {
                return Some(Decision::Admitted { expires_at_ms });
            }
        }
        let expires_at_ms = now + policy.active_ttl_ms;
        self.granted.remove(session);
        self.active.add(session, expires_at_ms);
        Some(Decision::Admitted { expires_at_ms })
    }

    /// The answer to a waiter at `position` who just checked in, open (checked by the caller)
    /// or not: before the opening, the opening; after a closing that keeps no line, closed.
    fn waiter(&self, position: u64, place: Place, policy: &RoomPolicy, now: u64) -> Decision {
        match &policy.schedule {
            Some(s) if s.before_opening(now) => Decision::Scheduled {
                opens_at_ms: s.opens_at_ms,
            },
            _ if line_closed(policy, now) => Decision::Closed,
            _ => self.waiting(position, place, policy, now),
        }
    }

    /// The answer to a waiter at `position` (who just checked in).
    fn waiting(&self, position: u64, place: Place, policy: &RoomPolicy, now: u64) -> Decision {
        Decision::Waiting {
            position,
            waiting: self.waiters.len() as u64,
            recent: self.admissions.counts(now),
            paused: self.live().paused,
            pace: self.pace(policy, now),
            place: Some(place),
        }
    }

    /// The line as it stands, for a gateway's snapshot (see [`RoomSnapshot`]): the checkpoints
    /// are exact ranks, O(log n) each.
    fn snapshot(&self, policy: &RoomPolicy, now: u64) -> RoomSnapshot {
        let waiting = self.waiters.len() as u64;
        RoomSnapshot {
            taken_at_ms: now,
            head: self.waiters.score_at(0),
            waiting,
            checkpoints: checkpoint_ranks(waiting)
                .filter_map(|rank| {
                    let score = self.waiters.score_at(rank)?;
                    Some(Checkpoint { score, rank })
                })
                .collect(),
            paused: self.live().paused,
            open: self.live().open,
            before_opening: policy.before_opening(now),
            line_closed: line_closed(policy, now),
            recent: self.admissions.counts(now),
            pace: self.pace(policy, now),
            unknown: Vec::new(),
        }
    }

    /// Waiters not alive by the turn's liveness rule at `now`: skipped at their turn unless
    /// they come back. Exact.
    fn silent(&self, policy: &RoomPolicy, now: u64) -> u64 {
        let turn = LivenessRule::for_turn(policy);
        // Alive: seen in an epoch `e` with `e + keep >= epoch(now)`.
        self.waiters
            .seen_before(turn.epoch(now).saturating_sub(turn.keep))
    }

    /// What the admission counts were measured over at `now`.
    fn pace(&self, policy: &RoomPolicy, now: u64) -> RoomPace {
        let (skipped, current_skipped) = self.admissions.skipped(now);
        let pace = RoomPace::new(
            self.admissions.current(now),
            now % ADMISSION_BUCKET_MS,
            // A scheduled room is measured from its opening (as the script): nobody could be
            // let in before it.
            now.saturating_sub(
                self.born
                    .unwrap_or(now)
                    .max(policy.schedule.as_ref().map_or(0, |s| s.opens_at_ms)),
            ),
            self.live().capacity,
        )
        .with_skipped(skipped, current_skipped)
        .with_line(self.admissions.last_minutes(now), self.silent(policy, now))
        .with_silent_after(policy.queue_ttl_ms)
        .with_admission_rate(self.live().admission_rate);
        let pace = match self.first_move {
            Some(at) => pace.with_first_move(now.saturating_sub(at)),
            None => pace,
        };
        let pace = match self.capacity_change {
            Some((before, at)) => pace.with_capacity_change(before, now.saturating_sub(at)),
            None => pace,
        };
        match self.last_pause {
            Some((began, ended)) => {
                pace.with_last_pause(now.saturating_sub(began), now.saturating_sub(ended))
            }
            None => pace,
        }
    }
}

/// Whether a call's housekeeping sweeps abandoned waiters: only [`sync`](Store::sync)'s does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sweep {
    Yes,
    No,
}

/// A room's two liveness rules (as of its last call).
#[derive(Clone, Copy, Debug)]
struct Liveness {
    turn: LivenessRule,
    abandon: LivenessRule,
}

impl Liveness {
    fn of(policy: &RoomPolicy) -> Self {
        Self {
            turn: LivenessRule::for_turn(policy),
            abandon: LivenessRule::for_abandon(policy),
        }
    }

    /// The epochs of a check-in made at `at`.
    fn at(self, at: u64) -> Epochs {
        Epochs {
            turn: self.turn.epoch(at),
            abandon: self.abandon.epoch(at),
        }
    }
}

/// The epochs a waiter's check-in at `now` marks, in both liveness rules: those of
/// [`check_in_time`].
fn check_in_epochs(policy: &RoomPolicy, now: u64) -> Epochs {
    Liveness::of(policy).at(check_in_time(policy, now))
}

/// When a waiter's check-in at `now` counts as made: before a scheduled opening, at the opening,
/// so a registrant's silence counts from then (nobody is skipped or swept for waiting for it).
fn check_in_time(policy: &RoomPolicy, now: u64) -> u64 {
    match &policy.schedule {
        Some(s) => now.max(s.opens_at_ms),
        None => now,
    }
}

/// Whether the event's closing time has passed: newcomers are refused.
fn after_closing(policy: &RoomPolicy, now: u64) -> bool {
    policy
        .schedule
        .as_ref()
        .is_some_and(|s| s.after_closing(now))
}

/// Whether the event closed and keeps no line: nobody without a slot is let in or promoted.
fn line_closed(policy: &RoomPolicy, now: u64) -> bool {
    policy
        .schedule
        .as_ref()
        .is_some_and(|s| s.after_closing(now) && !s.keep_line_after_close)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

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
