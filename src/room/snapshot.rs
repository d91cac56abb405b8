//! Waiting polls answered at the gateway, from its [`RoomSnapshot`] of the line.
//!
//! Each gateway keeps one snapshot per room, refreshed about once a second
//! ([`SNAPSHOT_REFRESH_MS`]) by one [`SnapshotStore::sync`] call: the
//! request that finds it due makes the call (no background task, so no runtime is assumed),
//! and every other waiting poll meanwhile is answered from the snapshot it has. A waiter is
//! answered here only when all of these hold; otherwise the store is asked, as before:
//! - the store keeps snapshots, and this gateway's is at most [`SNAPSHOT_MAX_AGE_MS`] old;
//! - the visitor's signed queue cookie carries their [`Place`] (the store's answer when they
//!   joined; the cookie is issued again whenever the store says another);
//! - the line moves (open, not before a scheduled opening, not closed) and their place is
//!   behind the head, by more than [`NEAR_HEAD`]: their turn has not come. A turn is only ever
//!   given, and a slot only ever granted, by the store;
//! - the store has not said, since, that the session has no place (it was skipped or swept:
//!   see [`LineView::forget`]).
//!
//! A waiter answered here checks in through the gateway's batch: the session goes into the
//! next refresh's `seen` list, once per liveness epoch, so silent waiters are still skipped at
//! their turn and abandoned ones swept, while polling ones are not.
//!
//! What a shown position can be off by is in [`crate::store::snapshot`].

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response};

use super::failure::FailureLog;
use super::reply::{waiting_rejection, Replies};
use super::shared::Core;
use super::verdict::Verdict;
use crate::eta::{EtaInput, GiveUpHistory, GiveUpMinutes};
use crate::outcome::Rejection;
use crate::session::SessionId;
use crate::store::snapshot::{
    draw_score, SilentCounts, NEAR_HEAD, SNAPSHOT_MAX_AGE_MS, SNAPSHOT_REFRESH_MS,
};
use crate::store::{LivenessRule, Place, RoomPace, RoomSnapshot, SeenWaiters, SnapshotStore};
use crate::store::{StoreError, StoreFuture};
use crate::telemetry::{Outcome, Stage};
use crate::token::QueueCookie;

/// Response header of a waiting answer given from the gateway's snapshot: when (ms since the
/// epoch, by the store's clock) the position it shows was true. Answers without it were true
/// when given.
pub const POSITION_AS_OF: HeaderName = HeaderName::from_static("waiting-room-position-as-of");

/// A refresh not finished within this long (its request was dropped, say) no longer stops
/// another request from refreshing.
const REFRESH_TIMEOUT_MS: u64 = 5_000;

/// Most sessions remembered as checked in during one epoch (for the batch's de-duplication),
/// and most waiting in a batch: beyond them a check-in is sent again, or dropped (and the
/// waiter's next poll checks them in). A quarter of a million: a two-million line's share of
/// one of eight gateways per epoch; about 12 MB at most per room (the set and the batch).
const MAX_CHECK_INS: usize = 1 << 18;

/// Most check-ins sent in one refresh (800 KB of ids): the rest wait for the next, so one
/// refresh never holds the store for long, whatever piled up.
pub(super) const MAX_CHECK_INS_PER_SYNC: usize = 50_000;

/// Most sessions remembered as having no place, until their next poll asks the store (or the
/// epoch ends: the store says it again at the next epoch's check-in).
const MAX_FORGOTTEN: usize = 1 << 16;

/// A snapshot, and when this gateway sent the refresh that brought it (by its own clock).
///
/// Dated from the sending, not the reply: the store took the snapshot somewhere between the two,
/// so a refresh answered late (after a store pause or under load) is still aged from no later
/// than the moment it describes, and the [`SNAPSHOT_MAX_AGE_MS`] bound holds whatever the call
/// took, with no trust in the two clocks agreeing.
pub(super) struct Held {
    pub(super) snapshot: RoomSnapshot,
    pub(super) sent_at_ms: u64,
    /// The number of the refresh that brought it: of two replies, the later refresh's is
    /// kept, whatever the clock said when each was sent.
    number: u64,
    /// The silent waiters up to each of its ranks, counted once for every answer from it.
    pub(super) silent: SilentCounts,
    /// The waiters who gave up in a minute lately, by this gateway's snapshots until this one.
    pub(super) give_ups_lately: Option<GiveUpMinutes>,
}

impl Held {
    /// Its age at `now`, by the gateway's clock: an upper bound on the snapshot's. Nought when
    /// the clock has gone back since it was sent: what goes by its age (the drain fail
    /// policy's places) then waits for the clock rather than running ahead.
    pub(super) fn age_ms(&self, now: u64) -> u64 {
        now.saturating_sub(self.sent_at_ms)
    }

    /// Its age at `now`, if known: not when the clock has gone back since it was sent. A
    /// snapshot taken as new for as long as the clock went back would answer waiters from a
    /// line that moved meanwhile, and send no check-ins for them (they would be skipped at
    /// their turn as silent): one of unknown age is neither fresh nor young.
    fn known_age_ms(&self, now: u64) -> Option<u64> {
        now.checked_sub(self.sent_at_ms)
    }
}

/// What a gateway's snapshots say of the line ahead of a waiter, for their wait estimate.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LineAhead {
    /// How many of those ahead are silent, and that count's error.
    pub(super) silent: Option<(u64, u64)>,
    /// How many waiters gave up in a minute lately.
    pub(super) give_ups_lately: Option<GiveUpMinutes>,
}

impl LineAhead {
    /// `input` knowing what is known here.
    pub(super) fn inform(self, mut input: EtaInput) -> EtaInput {
        if let Some((silent, error)) = self.silent {
            input = input.with_silent_ahead(silent, error);
        }
        if let Some(per_minute) = self.give_ups_lately {
            input = input.with_give_ups_lately(per_minute);
        }
        input
    }
}

/// One room's snapshot on this gateway, and the check-ins waiting for its next refresh.
pub(super) struct LineView {
    /// The store's snapshots (metered), if it keeps them.
    store: Option<Arc<dyn SnapshotStore>>,
    held: RwLock<Option<Arc<Held>>>,
    /// When the refresh in flight began (gateway ms; 0 = none).
    refreshing_since: AtomicU64,
    /// Refreshes sent so far: each one's number.
    refreshes: AtomicU64,
    check_ins: Mutex<CheckIns>,
    /// Sessions the store said have no place, until their next poll asks it, in the epoch
    /// it said so.
    forgotten: Mutex<Forgotten>,
    /// The silent and skipped counts of its snapshots, minute by minute.
    give_ups: Mutex<GiveUpHistory>,
}

/// Sessions without a place, of one epoch.
#[derive(Default)]
struct Forgotten {
    epoch: u64,
    sessions: HashSet<SessionId>,
}

/// A waiter answered from the snapshot, and their score in line (their cookie's place): the
/// refresh puts them near or beyond its turn horizon by it.
pub(super) type CheckIn = (SessionId, f64);

/// The sessions answered from the snapshot since the last refresh (each once per epoch).
struct CheckIns {
    epoch: u64,
    sent: HashSet<SessionId>,
    batch: Vec<CheckIn>,
}

impl LineView {
    pub(super) fn new(store: Option<Arc<dyn SnapshotStore>>) -> Self {
        Self {
            store,
            held: RwLock::new(None),
            refreshing_since: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            check_ins: Mutex::new(CheckIns {
                epoch: 0,
                sent: HashSet::new(),
                batch: Vec::new(),
            }),
            forgotten: Mutex::new(Forgotten::default()),
            give_ups: Mutex::new(GiveUpHistory::default()),
        }
    }

    pub(super) fn supported(&self) -> bool {
        self.store.is_some()
    }

    /// The last snapshot, whatever its age (the drain fail policy goes by it).
    pub(super) fn last(&self) -> Option<Arc<Held>> {
        self.held
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The snapshot, if it is young enough to answer from at `now`.
    pub(super) fn fresh(&self, now: u64) -> Option<Arc<Held>> {
        self.last().filter(|h| {
            h.known_age_ms(now)
                .is_some_and(|age| age <= SNAPSHOT_MAX_AGE_MS)
        })
    }

    /// Whether the caller is to refresh the snapshot now: it is missing or due, and no other
    /// refresh is in flight (or the one in flight is overdue). At most one caller at a time
    /// gets `true`; it must call [`received`](Self::received) or [`failed`](Self::failed).
    pub(super) fn claim_refresh(&self, now: u64) -> bool {
        if !self.supported() {
            return false;
        }
        let due = self.last().is_none_or(|h| {
            h.known_age_ms(now)
                .is_none_or(|age| age >= SNAPSHOT_REFRESH_MS)
        });
        if !due {
            return false;
        }
        // One begun later than now by the clock (which has gone back since) is no reason to
        // wait: it is taken as overdue.
        let since = self.refreshing_since.load(Ordering::Acquire);
        let in_flight = now
            .checked_sub(since)
            .is_some_and(|running| running < REFRESH_TIMEOUT_MS);
        if since != 0 && in_flight {
            return false;
        }
        self.refreshing_since
            .compare_exchange(since, now.max(1), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The check-ins for a refresh (at most [`MAX_CHECK_INS_PER_SYNC`]), taken out of the
    /// batch.
    pub(super) fn take_check_ins(&self) -> Vec<CheckIn> {
        let mut c = self
            .check_ins
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if c.batch.len() <= MAX_CHECK_INS_PER_SYNC {
            return std::mem::take(&mut c.batch);
        }
        let rest = c.batch.split_off(MAX_CHECK_INS_PER_SYNC);
        std::mem::replace(&mut c.batch, rest)
    }

    /// The number of the next refresh sent (see [`received`](Self::received)).
    fn next_refresh(&self) -> u64 {
        self.refreshes.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Refresh number `number`, sent at `sent_at`, came back with `snapshot` at `now`: it is
    /// the one answered from, and the sessions it says have no place are forgotten. Unless a
    /// refresh sent later has already come back (one overdue and answered after the next):
    /// then the newer snapshot stays, and this one is dropped whole. Later by its number, not
    /// by `sent_at`: after the clock went back, the next refresh is sent "earlier" than the
    /// snapshot held, and is still the newer.
    pub(super) fn received(
        &self,
        mut snapshot: RoomSnapshot,
        (number, sent_at): (u64, u64),
        now: u64,
        rule: &LivenessRule,
    ) {
        let mut held = self.held.write().unwrap_or_else(PoisonError::into_inner);
        if held.as_ref().is_some_and(|h| h.number > number) {
            // (The newer one, received, already ended the refresh in flight.)
            return;
        }
        let unknown = std::mem::take(&mut snapshot.unknown);
        {
            let mut f = self
                .forgotten
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let epoch = rule.epoch(now);
            if f.epoch != epoch {
                f.epoch = epoch;
                f.sessions.clear();
            }
            for s in unknown {
                if f.sessions.len() >= MAX_FORGOTTEN {
                    break;
                }
                f.sessions.insert(s);
            }
        }
        let silent = SilentCounts::of(&snapshot.checkpoints);
        let give_ups_lately = {
            let mut history = self.give_ups.lock().unwrap_or_else(PoisonError::into_inner);
            history.record(&snapshot.pace, silent.whole_line(), snapshot.taken_at_ms);
            history.minutes()
        };
        *held = Some(Arc::new(Held {
            snapshot,
            sent_at_ms: sent_at,
            number,
            silent,
            give_ups_lately,
        }));
        drop(held);
        self.refreshing_since.store(0, Ordering::Release);
    }

    /// A refresh failed, or its request was dropped before it came back: the next due request
    /// tries again, and its check-ins go back into the batch (they are not sent again on their
    /// own this epoch).
    pub(super) fn failed(&self, check_ins: Vec<CheckIn>) {
        if !check_ins.is_empty() {
            let mut c = self
                .check_ins
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let room = MAX_CHECK_INS.saturating_sub(c.batch.len());
            c.batch.extend(check_ins.into_iter().take(room));
        }
        self.refreshing_since.store(0, Ordering::Release);
    }

    /// `session`, with its score in line, was answered from the snapshot at `now`: it goes into
    /// the next refresh's check-ins, once per epoch of `rule`.
    pub(super) fn checked_in(&self, session: SessionId, score: f64, now: u64, rule: &LivenessRule) {
        let epoch = rule.epoch(now);
        let mut c = self
            .check_ins
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if c.epoch != epoch {
            c.epoch = epoch;
            c.sent.clear();
        }
        if c.batch.len() >= MAX_CHECK_INS {
            return;
        }
        if c.sent.len() >= MAX_CHECK_INS || c.sent.insert(session) {
            c.batch.push((session, score));
        }
    }

    /// Whether the store said `session` has no place, this epoch: then the store is asked for
    /// it, whose answer (a new place, or none) its cookie then carries. Kept for the epoch,
    /// whatever the visitor asks meanwhile (a page after a status poll, say), so a cookie with
    /// the old place never gets an answer from the snapshot again.
    pub(super) fn is_forgotten(&self, session: SessionId) -> bool {
        let f = self
            .forgotten
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        !f.sessions.is_empty() && f.sessions.contains(&session)
    }
}

/// What a waiting poll asked for: a page of the site (the waiting page, or the site's JSON
/// rejection), or the status endpoint's JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Asking {
    Page,
    Status,
}

/// A waiting poll: the visitor's queue cookie, whether they carry the room's values in
/// headers, and what they asked for.
pub(crate) struct WaitingPoll {
    pub(super) cookie: QueueCookie,
    pub(super) uses_headers: bool,
    pub(super) asking: Asking,
}

/// The gateway's snapshot is due: its refresh in flight, then the waiting poll that found it
/// due is answered.
pub(crate) struct SyncStep {
    call: StoreFuture<RoomSnapshot>,
    then: Option<AfterSync>,
}

impl SyncStep {
    /// Waits for the refresh, then answers the poll (see [`LineView::after_sync`]).
    pub(super) fn poll_answer<B>(
        &mut self,
        cx: &mut Context<'_>,
        line: &LineView,
        core: &Core,
        failures: &FailureLog,
        req: &Request<B>,
    ) -> Poll<Result<Response<Bytes>, WaitingPoll>> {
        let answer = ready!(self.call.as_mut().poll(cx));
        let then = self.then.take().expect("a sync step answers once");
        Poll::Ready(line.after_sync(core, failures, then, answer, req))
    }
}

/// A waiting poll whose answer waits for the snapshot's refresh.
struct AfterSync {
    poll: WaitingPoll,
    refresh: Refresh,
}

/// The refresh in flight: if its request is dropped before the store answers (the client went
/// away), the refresh is given up at once and its check-ins go back into the batch, so the
/// next due request refreshes instead of waiting for the in-flight one to time out.
pub(crate) struct Refresh {
    line: Arc<LineView>,
    /// When it was sent (gateway ms): what the snapshot it brings is dated from.
    sent_at_ms: u64,
    /// Its number, from [`LineView::next_refresh`].
    number: u64,
    check_ins: Option<Vec<CheckIn>>,
}

impl Refresh {
    /// The check-ins sent, taken: the refresh is settled (the answer came).
    fn settle(&mut self) -> Vec<CheckIn> {
        self.check_ins.take().unwrap_or_default()
    }
}

impl Drop for Refresh {
    fn drop(&mut self) {
        if let Some(check_ins) = self.check_ins.take() {
            self.line.failed(check_ins);
        }
    }
}

impl LineView {
    /// A waiting poll answered from the gateway's snapshot, or (the snapshot is due) the
    /// refresh after which it is; `None` when the store must be asked (see the module docs).
    /// Never a pass: only the store lets anyone in.
    pub(super) fn at_gateway<B>(
        self: &Arc<Self>,
        core: &Core,
        req: &Request<B>,
        cookie: QueueCookie,
        uses_headers: bool,
        asking: Asking,
        now: u64,
    ) -> Option<Verdict<SyncStep>> {
        if !self.supported() {
            return None;
        }
        let place = cookie.place()?;
        if self.is_forgotten(cookie.session()) {
            return None;
        }
        if let Some((call, refresh)) = self.start_refresh(core, now) {
            return Some(Verdict::Step(SyncStep {
                call,
                then: Some(AfterSync {
                    poll: WaitingPoll {
                        cookie,
                        uses_headers,
                        asking,
                    },
                    refresh,
                }),
            }));
        }
        let held = self.fresh(now)?;
        self.answer_from_snapshot(core, &held, req, cookie.session(), place, asking, now)
            .map(Verdict::Answer)
    }

    /// The snapshot's refresh, if it is due and no other is in flight: the store call, sent
    /// now with the batched check-ins (put apart by the turn horizon of the snapshot held, if
    /// any: see [`RoomSnapshot::turn_horizon`]), and the [`Refresh`] to settle with its answer
    /// ([`refreshed`](Self::refreshed)).
    pub(super) fn start_refresh(
        self: &Arc<Self>,
        core: &Core,
        now: u64,
    ) -> Option<(StoreFuture<RoomSnapshot>, Refresh)> {
        let store = self.store.as_ref()?;
        if !self.claim_refresh(now) {
            return None;
        }
        let seen = self.take_check_ins();
        let policy = &core.config.policy;
        let horizon = self
            .last()
            .and_then(|h| h.snapshot.turn_horizon(policy.queue_ttl_ms));
        let call = store.sync(
            policy,
            SeenWaiters::with_horizon(horizon, seen.iter().copied()),
        );
        let refresh = Refresh {
            line: Arc::clone(self),
            sent_at_ms: now,
            number: self.next_refresh(),
            check_ins: Some(seen),
        };
        Some((call, refresh))
    }

    /// A refresh is back: the new snapshot is held, or the failure noted (its check-ins go
    /// back into the batch).
    pub(super) fn refreshed(
        &self,
        core: &Core,
        failures: &FailureLog,
        mut refresh: Refresh,
        answer: Result<RoomSnapshot, StoreError>,
    ) {
        let now = core.now_ms();
        let check_ins = refresh.settle();
        match answer {
            Ok(snapshot) => {
                failures.answered();
                let rule = LivenessRule::for_turn(&core.config.policy);
                self.received(snapshot, (refresh.number, refresh.sent_at_ms), now, &rule);
            }
            Err(e) => {
                self.failed(check_ins);
                failures.log(core, &e, "sync");
            }
        }
    }

    /// Where a waiter at `place` stands by `snapshot`, as the waiting answer it gets; they are
    /// checked in through the gateway's batch. `None` if their turn may have come (or the line
    /// does not move, or they arrived after the snapshot was taken): the store is asked.
    pub(super) fn waiting_by_snapshot(
        &self,
        core: &Core,
        held: &Held,
        session: SessionId,
        place: Place,
        now: u64,
    ) -> Option<Rejection> {
        let snapshot = &held.snapshot;
        if !snapshot.answers_waiters() {
            return None;
        }
        let score = self.score_of(core, session, place)?;
        // Behind the snapshot's last waiter: arrived since it was taken; the store places them.
        if !snapshot.covers(score) {
            return None;
        }
        let position = snapshot.position_of(score).filter(|&p| p > NEAR_HEAD)?;
        let policy = &core.config.policy;
        self.checked_in(session, score, now, &LivenessRule::for_turn(policy));
        core.metrics.waiting(snapshot.waiting);
        Some(waiting_rejection(
            position,
            snapshot.waiting.max(position),
            snapshot.paused,
            snapshot.pace,
            LineAhead {
                silent: Some(held.silent.ahead(position, position)),
                give_ups_lately: held.give_ups_lately,
            },
        ))
    }

    /// What this gateway's fresh snapshot says of the line ahead of the one at `place` (as
    /// the store just placed them, at `position`): how many of the `position - 1` ahead are
    /// silent (those ahead of them there, less the front of it that has had its turn since;
    /// not for a place it does not cover, an arrival since: the estimate then places the
    /// room's count by its guess), and how many gave up in a minute lately. Nothing without a
    /// fresh snapshot.
    pub(super) fn ahead(
        &self,
        core: &Core,
        session: SessionId,
        place: Option<Place>,
        position: u64,
        now: u64,
    ) -> LineAhead {
        let Some(held) = self.fresh(now) else {
            return LineAhead::default();
        };
        let silent = place
            .and_then(|place| self.score_of(core, session, place))
            .filter(|&score| held.snapshot.covers(score))
            .and_then(|score| held.snapshot.position_of(score))
            .map(|then| held.silent.ahead(then, position.min(then)));
        LineAhead {
            silent,
            give_ups_lately: held.give_ups_lately,
        }
    }

    /// The answer from `held`'s snapshot for a waiter at `place` ([`waiting_by_snapshot`]).
    ///
    /// [`waiting_by_snapshot`]: Self::waiting_by_snapshot
    #[allow(clippy::too_many_arguments)]
    fn answer_from_snapshot<B>(
        &self,
        core: &Core,
        held: &Held,
        req: &Request<B>,
        session: SessionId,
        place: Place,
        asking: Asking,
        now: u64,
    ) -> Option<Response<Bytes>> {
        let rejection = self.waiting_by_snapshot(core, held, session, place, now)?;
        let snapshot = &held.snapshot;
        let mut res = match asking {
            Asking::Page => Replies(core).reject(&rejection, req),
            Asking::Status => Replies(core).status_json(&rejection),
        };
        // When the position was true: the snapshot's time, by the store's clock.
        res.headers_mut()
            .insert(POSITION_AS_OF, HeaderValue::from(snapshot.taken_at_ms));
        Some(core.counted(Stage::Snapshot, Outcome::Waiting, res))
    }

    /// Where `place` stands in `snapshot` (1-based); `None` ahead of its head. A registrant's
    /// score is their draw's, computed again here (the draw key never leaves the gateway).
    pub(super) fn position_in(
        &self,
        core: &Core,
        snapshot: &RoomSnapshot,
        session: SessionId,
        place: Place,
    ) -> Option<u64> {
        snapshot.position_of(self.score_of(core, session, place)?)
    }

    /// The line's score of `place` (`None`: a registrant's place in a room without a schedule).
    pub(super) fn score_of(&self, core: &Core, session: SessionId, place: Place) -> Option<f64> {
        Some(match place {
            Place::Seq(seq) => seq as f64,
            Place::Drawn => draw_score(core.config.policy.schedule.as_ref()?.draw(session)),
        })
    }

    /// The pace for a waiting answer of the store: its own if it gave one, else (a store that
    /// leaves the pace to the snapshot, as the Redis store's `enter` does) the snapshot's.
    pub(super) fn pace_for(&self, pace: RoomPace, _now: u64) -> RoomPace {
        if pace != RoomPace::default() {
            return pace;
        }
        self.last().map_or(pace, |held| held.snapshot.pace)
    }

    /// The refresh is back: hold the new snapshot (or note the failure), then answer the poll
    /// that made it, from the snapshot if it can be; `Err` with the poll when it cannot, for
    /// the store to be asked as before.
    fn after_sync<B>(
        &self,
        core: &Core,
        failures: &FailureLog,
        then: AfterSync,
        answer: Result<RoomSnapshot, StoreError>,
        req: &Request<B>,
    ) -> Result<Response<Bytes>, WaitingPoll> {
        let AfterSync { poll, refresh } = then;
        let WaitingPoll { cookie, asking, .. } = poll;
        self.refreshed(core, failures, refresh, answer);
        let now = core.now_ms();
        let session = cookie.session();
        if let (Some(held), Some(place)) = (self.fresh(now), cookie.place()) {
            if !self.is_forgotten(session) {
                if let Some(res) =
                    self.answer_from_snapshot(core, &held, req, session, place, asking, now)
                {
                    return Ok(res);
                }
            }
        }
        Err(poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{AdmissionCounts, RoomPace};

    fn snapshot(unknown: Vec<SessionId>) -> RoomSnapshot {
        RoomSnapshot {
            taken_at_ms: 0,
            head: Some(1.0),
            waiting: 1,
            checkpoints: Vec::new(),
            paused: false,
            open: true,
            before_opening: false,
            line_closed: false,
            recent: AdmissionCounts::default(),
            pace: RoomPace::default(),
            unknown,
        }
    }

    const RULE: LivenessRule = LivenessRule {
        width_ms: 1_000,
        keep: 4,
    };

    /// The snapshots of a store that keeps them.
    fn kept() -> Option<Arc<dyn SnapshotStore>> {
        crate::store::Store::snapshots(Arc::new(crate::store::MemoryStore::new()))
    }

    #[test]
    fn one_refresh_at_a_time_and_again_when_due() {
        let view = LineView::new(kept());
        assert!(view.claim_refresh(1_000));
        assert!(!view.claim_refresh(1_001), "one in flight");
        view.received(snapshot(Vec::new()), (1, 1_002), 1_002, &RULE);
        assert!(!view.claim_refresh(1_500), "fresh");
        assert!(view.fresh(1_500).is_some());
        assert!(view.claim_refresh(1_002 + SNAPSHOT_REFRESH_MS));
        // A refresh that never comes back stops nobody for long.
        assert!(!view.claim_refresh(3_000));
        assert!(view.claim_refresh(1_002 + SNAPSHOT_REFRESH_MS + REFRESH_TIMEOUT_MS));
        assert!(view.fresh(1_002 + SNAPSHOT_MAX_AGE_MS + 1).is_none());
        assert!(!LineView::new(None).claim_refresh(1_000));
    }

    #[test]
    fn a_late_refresh_is_aged_from_when_it_was_sent_and_never_replaces_a_newer_one() {
        let view = LineView::new(kept());
        // Sent at 1 000, answered 1 500 ms later: 500 ms of its age are already spent.
        view.received(snapshot(Vec::new()), (1, 1_000), 2_500, &RULE);
        assert_eq!(view.last().unwrap().age_ms(2_500), 1_500);
        assert!(view.fresh(1_000 + SNAPSHOT_MAX_AGE_MS).is_some());
        assert!(
            view.fresh(1_000 + SNAPSHOT_MAX_AGE_MS + 1).is_none(),
            "stale by the bound counted from the sending, not the reply"
        );
        // Two in flight (the first overdue): the newer, back first, is kept over the older.
        let mut newer = snapshot(Vec::new());
        newer.waiting = 7;
        view.received(newer, (3, 9_000), 9_010, &RULE);
        let gone = SessionId::random();
        view.received(snapshot(vec![gone]), (2, 4_000), 9_020, &RULE);
        let held = view.last().unwrap();
        assert_eq!((held.sent_at_ms, held.snapshot.waiting), (9_000, 7));
        assert!(
            !view.is_forgotten(gone),
            "nothing taken from the older reply"
        );
    }

    /// A gateway clock set back (an NTP step, a VM resumed): the snapshot held, sent "later"
    /// than now, is answered from no more and due at once, the refresh then sent is the newer
    /// whatever the clock said, and one in flight from before the step stops nobody.
    #[test]
    fn a_clock_gone_back_makes_the_snapshot_due_not_young() {
        let view = LineView::new(kept());
        view.received(snapshot(Vec::new()), (1, 50_000), 50_000, &RULE);
        assert!(view.fresh(50_500).is_some());
        // Fifteen seconds back.
        let now = 35_000;
        assert!(view.fresh(now).is_none(), "its age is unknown: not fresh");
        assert_eq!(view.last().unwrap().age_ms(now), 0, "the drain waits");
        assert!(view.claim_refresh(now), "due at once");
        let mut newer = snapshot(Vec::new());
        newer.waiting = 9;
        view.received(newer, (view.next_refresh(), now), now, &RULE);
        let held = view.fresh(now + 10).expect("the new one answers");
        assert_eq!(held.snapshot.waiting, 9);
        // A refresh claimed just before the clock went back and never settled.
        let view = LineView::new(kept());
        assert!(view.claim_refresh(50_000));
        assert!(!view.claim_refresh(50_001), "one in flight");
        assert!(view.claim_refresh(now), "begun after now: overdue");
    }

    #[test]
    fn check_ins_are_batched_once_per_epoch() {
        let view = LineView::new(kept());
        let rule = LivenessRule {
            width_ms: 1_000,
            keep: 4,
        };
        let (a, b) = (SessionId::random(), SessionId::random());
        for t in [0, 10, 20] {
            view.checked_in(a, 7.0, t, &rule);
        }
        view.checked_in(b, 9.0, 30, &rule);
        assert_eq!(view.take_check_ins(), vec![(a, 7.0), (b, 9.0)]);
        view.checked_in(a, 7.0, 500, &rule);
        assert!(view.take_check_ins().is_empty(), "a was sent this epoch");
        view.checked_in(a, 7.0, 1_000, &rule);
        assert_eq!(view.take_check_ins(), vec![(a, 7.0)], "a new epoch");
    }

    #[test]
    fn sessions_without_a_place_are_sent_to_the_store_once() {
        let view = LineView::new(kept());
        let gone = SessionId::random();
        view.received(snapshot(vec![gone]), (1, 0), 0, &RULE);
        assert!(view.last().unwrap().snapshot.unknown.is_empty());
        assert!(view.is_forgotten(gone));
        assert!(
            view.is_forgotten(gone),
            "for the epoch, however often asked"
        );
        // Remembered for the epoch it was said in only: the store says it again in the next.
        view.received(snapshot(vec![gone]), (2, 0), 0, &RULE);
        view.received(
            snapshot(Vec::new()),
            (3, RULE.width_ms),
            RULE.width_ms,
            &RULE,
        );
        assert!(!view.is_forgotten(gone));
    }

    #[test]
    fn a_failed_or_dropped_refresh_gives_its_check_ins_back_and_frees_the_next() {
        let view = Arc::new(LineView::new(kept()));
        let a = SessionId::random();
        view.checked_in(a, 1.0, 0, &RULE);
        assert!(view.claim_refresh(10));
        let refresh = Refresh {
            line: Arc::clone(&view),
            sent_at_ms: 10,
            number: view.next_refresh(),
            check_ins: Some(view.take_check_ins()),
        };
        assert!(view.take_check_ins().is_empty());
        // The request is dropped before the store answers.
        drop(refresh);
        assert!(view.claim_refresh(20), "no wait for the lost refresh");
        assert_eq!(
            view.take_check_ins(),
            vec![(a, 1.0)],
            "its check-ins are sent again"
        );
    }

    #[test]
    fn one_refresh_sends_a_bounded_batch() {
        let view = LineView::new(kept());
        for t in 0..(MAX_CHECK_INS_PER_SYNC + 10) as u64 {
            view.checked_in(SessionId::random(), 1.0, t % 1_000, &RULE);
        }
        assert_eq!(view.take_check_ins().len(), MAX_CHECK_INS_PER_SYNC);
        assert_eq!(view.take_check_ins().len(), 10);
    }
}
