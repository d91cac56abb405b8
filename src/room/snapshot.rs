//! Waiting polls answered at the gateway, from its [`RoomSnapshot`] of the line.
//!
//! Each gateway keeps one snapshot per room, refreshed about once a second
//! ([`SNAPSHOT_REFRESH_MS`]) by one [`Store::sync`](crate::store::Store::sync) call: the
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

use bytes::Bytes;
use http::{Request, Response, StatusCode};

use super::pending::{Next, Pending};
use super::reply::waiting_rejection;
use super::Room;
use crate::response::{json_response, StatusBody};
use crate::session::SessionId;
use crate::store::snapshot::{draw_score, NEAR_HEAD, SNAPSHOT_MAX_AGE_MS, SNAPSHOT_REFRESH_MS};
use crate::store::{LivenessRule, Place, RoomPace, RoomSnapshot, StoreError};
use crate::telemetry::{Outcome, Stage};
use crate::token::QueueCookie;

/// A refresh not finished within this long (its request was dropped, say) no longer stops
/// another request from refreshing.
const REFRESH_TIMEOUT_MS: u64 = 5_000;

/// Most sessions remembered as checked in during one epoch (for the batch's de-duplication),
/// and most waiting in a batch: beyond them a check-in is sent again, or dropped (and the
/// waiter's next poll checks them in). About 16 MB at most per room.
const MAX_CHECK_INS: usize = 1 << 20;

/// Most sessions remembered as having no place, until their next poll asks the store.
const MAX_FORGOTTEN: usize = 1 << 16;

/// A snapshot, and when this gateway received it (by its own clock).
pub(super) struct Held {
    pub(super) snapshot: RoomSnapshot,
    pub(super) received_at_ms: u64,
}

impl Held {
    /// Its age at `now`, by the gateway's clock.
    pub(super) fn age_ms(&self, now: u64) -> u64 {
        now.saturating_sub(self.received_at_ms)
    }
}

/// One room's snapshot on this gateway, and the check-ins waiting for its next refresh.
pub(super) struct LineView {
    /// Whether the store keeps snapshots at all.
    supported: bool,
    held: RwLock<Option<Arc<Held>>>,
    /// When the refresh in flight began (gateway ms; 0 = none).
    refreshing_since: AtomicU64,
    check_ins: Mutex<CheckIns>,
    /// Sessions the store said have no place, until their next poll asks it.
    forgotten: Mutex<HashSet<SessionId>>,
}

/// The sessions answered from the snapshot since the last refresh (each once per epoch).
struct CheckIns {
    epoch: u64,
    sent: HashSet<SessionId>,
    batch: Vec<SessionId>,
}

impl LineView {
    pub(super) fn new(supported: bool) -> Self {
        Self {
            supported,
            held: RwLock::new(None),
            refreshing_since: AtomicU64::new(0),
            check_ins: Mutex::new(CheckIns {
                epoch: 0,
                sent: HashSet::new(),
                batch: Vec::new(),
            }),
            forgotten: Mutex::new(HashSet::new()),
        }
    }

    pub(super) fn supported(&self) -> bool {
        self.supported
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
        self.last().filter(|h| h.age_ms(now) <= SNAPSHOT_MAX_AGE_MS)
    }

    /// Whether the caller is to refresh the snapshot now: it is missing or due, and no other
    /// refresh is in flight (or the one in flight is overdue). At most one caller at a time
    /// gets `true`; it must call [`received`](Self::received) or [`failed`](Self::failed).
    pub(super) fn claim_refresh(&self, now: u64) -> bool {
        if !self.supported {
            return false;
        }
        let due = self
            .last()
            .is_none_or(|h| h.age_ms(now) >= SNAPSHOT_REFRESH_MS);
        if !due {
            return false;
        }
        let since = self.refreshing_since.load(Ordering::Acquire);
        if since != 0 && now.saturating_sub(since) < REFRESH_TIMEOUT_MS {
            return false;
        }
        self.refreshing_since
            .compare_exchange(since, now.max(1), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The check-ins for a refresh, taken out of the batch.
    pub(super) fn take_check_ins(&self) -> Vec<SessionId> {
        let mut c = self
            .check_ins
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut c.batch)
    }

    /// A refresh came back with `snapshot` at `now`: it is the one answered from, and the
    /// sessions it says have no place are forgotten.
    pub(super) fn received(&self, mut snapshot: RoomSnapshot, now: u64) {
        let unknown = std::mem::take(&mut snapshot.unknown);
        if !unknown.is_empty() {
            let mut f = self
                .forgotten
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for s in unknown {
                if f.len() >= MAX_FORGOTTEN {
                    break;
                }
                f.insert(s);
            }
        }
        *self.held.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(Held {
            snapshot,
            received_at_ms: now,
        }));
        self.refreshing_since.store(0, Ordering::Release);
    }

    /// A refresh failed: the next due request tries again. Its check-ins are dropped: the
    /// store could not be reached, and while it cannot, silence is excused anyway (the
    /// waiters' next polls check them in again).
    pub(super) fn failed(&self) {
        self.refreshing_since.store(0, Ordering::Release);
    }

    /// `session` was answered from the snapshot at `now`: it goes into the next refresh's
    /// check-ins, once per epoch of `rule`.
    pub(super) fn checked_in(&self, session: SessionId, now: u64, rule: &LivenessRule) {
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
            c.batch.push(session);
        }
    }

    /// Whether the store said `session` has no place; if so, it is not said again: the caller
    /// asks the store, whose answer (a new place) the visitor's cookie then carries.
    pub(super) fn forget(&self, session: SessionId) -> bool {
        let mut f = self
            .forgotten
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        !f.is_empty() && f.remove(&session)
    }
}

/// What a waiting poll asked for: a page of the site (the waiting page, or the site's JSON
/// rejection), or the status endpoint's JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Asking {
    Page,
    Status,
}

/// A waiting poll whose answer waits for the snapshot's refresh.
pub(crate) struct AfterSync {
    cookie: QueueCookie,
    uses_headers: bool,
    asking: Asking,
}

impl Room {
    /// A waiting poll answered from the gateway's snapshot, or (the snapshot is due) the
    /// refresh after which it is; `None` when the store must be asked (see the module docs).
    pub(super) fn waiting_poll_at_gateway<B>(
        &self,
        req: &Request<B>,
        cookie: QueueCookie,
        uses_headers: bool,
        asking: Asking,
        now: u64,
    ) -> Option<Next> {
        if !self.line.supported() {
            return None;
        }
        let place = cookie.place()?;
        if self.line.forget(cookie.session()) {
            return None;
        }
        if self.line.claim_refresh(now) {
            let seen = self.line.take_check_ins();
            return Some(Next::Ask(Pending::Sync {
                call: self.store.sync(&self.config.policy, seen),
                then: Some(AfterSync {
                    cookie,
                    uses_headers,
                    asking,
                }),
            }));
        }
        let held = self.line.fresh(now)?;
        self.answer_from_snapshot(&held.snapshot, req, cookie.session(), place, asking, now)
    }

    /// The answer from `snapshot` for a waiter at `place`, who is checked in through the
    /// gateway's batch; `None` if their turn may have come (or the line does not move).
    fn answer_from_snapshot<B>(
        &self,
        snapshot: &RoomSnapshot,
        req: &Request<B>,
        session: SessionId,
        place: Place,
        asking: Asking,
        now: u64,
    ) -> Option<Next> {
        if !snapshot.answers_waiters() {
            return None;
        }
        let position = self
            .position_in(snapshot, session, place)
            .filter(|&p| p > NEAR_HEAD)?;
        let policy = &self.config.policy;
        self.line
            .checked_in(session, now, &LivenessRule::for_turn(policy));
        self.metrics.waiting(snapshot.waiting);
        let rejection = waiting_rejection(
            position,
            snapshot.waiting.max(position),
            snapshot.paused,
            snapshot.pace,
        );
        let res = match asking {
            Asking::Page => self.reject(&rejection, req),
            Asking::Status => self.status_json(&rejection),
        };
        Some(self.counted(Stage::Snapshot, Outcome::Waiting, Next::Answer(res)))
    }

    /// Where `place` stands in `snapshot` (1-based); `None` ahead of its head. A registrant's
    /// score is their draw's, computed again here (the draw key never leaves the gateway).
    pub(super) fn position_in(
        &self,
        snapshot: &RoomSnapshot,
        session: SessionId,
        place: Place,
    ) -> Option<u64> {
        let score = match place {
            Place::Seq(seq) => seq as f64,
            Place::Drawn => draw_score(self.config.policy.schedule.as_ref()?.draw(session)),
        };
        snapshot.position_of(score)
    }

    /// The pace for a waiting answer of the store: its own if it gave one, else (a store that
    /// leaves the pace to the snapshot, as the Redis store's `enter` does) the snapshot's.
    pub(super) fn pace_for(&self, pace: RoomPace, _now: u64) -> RoomPace {
        if pace != RoomPace::default() {
            return pace;
        }
        self.line.last().map_or(pace, |held| held.snapshot.pace)
    }

    /// The status endpoint's `200` for a waiting visitor.
    pub(super) fn status_json(&self, rejection: &crate::outcome::Rejection) -> Response<Bytes> {
        json_response(
            StatusCode::OK,
            &StatusBody::from_rejection(self.config.room(), rejection),
        )
    }

    /// The refresh is back: hold the new snapshot (or note the failure), then answer the poll
    /// that made it, from the snapshot if it can be, else by asking the store as before.
    pub(super) fn after_sync<B>(
        &self,
        then: AfterSync,
        answer: Result<RoomSnapshot, StoreError>,
        req: &Request<B>,
    ) -> Next {
        let now = self.now_ms();
        match answer {
            Ok(snapshot) => {
                self.store_failures.answered();
                self.line.received(snapshot, now);
            }
            Err(e) => {
                self.line.failed();
                self.log_store_failure(&e, "sync");
            }
        }
        let AfterSync {
            cookie,
            uses_headers,
            asking,
        } = then;
        let session = cookie.session();
        if let (Some(held), Some(place)) = (self.line.fresh(now), cookie.place()) {
            if !self.line.forget(session) {
                if let Some(next) =
                    self.answer_from_snapshot(&held.snapshot, req, session, place, asking, now)
                {
                    return next;
                }
            }
        }
        match asking {
            Asking::Page => self.ask_enter(session, Some(cookie), false, uses_headers),
            Asking::Status => self.ask_status(cookie, uses_headers),
        }
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

    #[test]
    fn one_refresh_at_a_time_and_again_when_due() {
        let view = LineView::new(true);
        assert!(view.claim_refresh(1_000));
        assert!(!view.claim_refresh(1_001), "one in flight");
        view.received(snapshot(Vec::new()), 1_002);
        assert!(!view.claim_refresh(1_500), "fresh");
        assert!(view.fresh(1_500).is_some());
        assert!(view.claim_refresh(1_002 + SNAPSHOT_REFRESH_MS));
        // A refresh that never comes back stops nobody for long.
        assert!(!view.claim_refresh(3_000));
        assert!(view.claim_refresh(1_002 + SNAPSHOT_REFRESH_MS + REFRESH_TIMEOUT_MS));
        assert!(view.fresh(1_002 + SNAPSHOT_MAX_AGE_MS + 1).is_none());
        assert!(!LineView::new(false).claim_refresh(1_000));
    }

    #[test]
    fn check_ins_are_batched_once_per_epoch() {
        let view = LineView::new(true);
        let rule = LivenessRule {
            width_ms: 1_000,
            keep: 4,
        };
        let (a, b) = (SessionId::random(), SessionId::random());
        for t in [0, 10, 20] {
            view.checked_in(a, t, &rule);
        }
        view.checked_in(b, 30, &rule);
        assert_eq!(view.take_check_ins(), vec![a, b]);
        view.checked_in(a, 500, &rule);
        assert!(view.take_check_ins().is_empty(), "a was sent this epoch");
        view.checked_in(a, 1_000, &rule);
        assert_eq!(view.take_check_ins(), vec![a], "a new epoch");
    }

    #[test]
    fn sessions_without_a_place_are_sent_to_the_store_once() {
        let view = LineView::new(true);
        let gone = SessionId::random();
        view.received(snapshot(vec![gone]), 0);
        assert!(view.last().unwrap().snapshot.unknown.is_empty());
        assert!(view.forget(gone));
        assert!(!view.forget(gone));
    }
}
