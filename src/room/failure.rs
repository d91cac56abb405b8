//! The fail policy: what a visitor gets when the store cannot decide (open, closed, or
//! draining: see [`drain`](super::drain)), whatever the schedule allows, and [`FailureLog`],
//! the room's memory of failed store calls (reported at most once per interval; whether the
//! store seems down, for the gates).

use std::sync::atomic::{AtomicU64, Ordering};

use http::Request;

use super::reply::scheduled_rejection;
use super::shared::Core;
use super::visitor::queue_cookie_again;
use crate::config::FailPolicy;
use crate::outcome::Rejection;
use crate::store::{Decision, StoreError, StoreErrorKind};
use crate::telemetry::{Outcome, Stage};

/// At most one warning about failed store calls per this long, per room.
pub(super) const FAILURE_LOG_INTERVAL_MS: u64 = 10_000;

/// How recently a store that could not decide counts as down, for the gates' fail policy.
pub(super) const STORE_DOWN_WINDOW_MS: u64 = FAILURE_LOG_INTERVAL_MS;

/// When the room last reported a failed store call, and how many failed since; and when the
/// store last answered and last could not (for [`seems_down`](Self::seems_down)).
pub(super) struct FailureLog {
    /// Time of the last report (ms), or [`u64::MAX`] before the first.
    last_ms: AtomicU64,
    unreported: AtomicU64,
    /// Orders the two below (a clock's millisecond can hold both).
    events: AtomicU64,
    /// The event number of the store's last answer, a busy one included (0: none yet).
    answered: AtomicU64,
    /// The event number of the last call the store could not decide (unreachable, timed
    /// out...; not busy), and its time (ms).
    down: AtomicU64,
    down_ms: AtomicU64,
}

impl FailureLog {
    pub(super) fn new() -> Self {
        Self {
            last_ms: AtomicU64::new(u64::MAX),
            unreported: AtomicU64::new(0),
            events: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            down: AtomicU64::new(0),
            down_ms: AtomicU64::new(0),
        }
    }

    /// The store answered a call (a busy answer is one: the store is up).
    pub(super) fn answered(&self) {
        let n = self.events.fetch_add(1, Ordering::Relaxed) + 1;
        self.answered.fetch_max(n, Ordering::Relaxed);
    }

    /// The store could not decide a call at `now`.
    fn down_at(&self, now: u64) {
        let n = self.events.fetch_add(1, Ordering::Relaxed) + 1;
        self.down_ms.store(now, Ordering::Relaxed);
        self.down.fetch_max(n, Ordering::Relaxed);
    }

    /// Whether the store seems down at `now`: its last call failed (not busy), within the last
    /// [`STORE_DOWN_WINDOW_MS`], and nothing was answered since (busy included). Only as fresh
    /// as the room's other store calls; a gate uses it to apply the fail policy without a
    /// store call.
    pub(super) fn seems_down(&self, now: u64) -> bool {
        self.down.load(Ordering::Relaxed) > self.answered.load(Ordering::Relaxed)
            && now.saturating_sub(self.down_ms.load(Ordering::Relaxed)) <= STORE_DOWN_WINDOW_MS
    }

    /// Counts a failure at `now`. `Some(n)` when it is to be reported, with the `n` failures
    /// not reported since the last report; `None` when it is only counted. Of concurrent
    /// failures that find a report due, exactly one reports (the one whose swap succeeds). A
    /// clock that went back by an interval reports too, rather than staying silent until it
    /// catches up.
    fn note(&self, now: u64) -> Option<u64> {
        let last = self.last_ms.load(Ordering::Acquire);
        let due = last == u64::MAX || now.abs_diff(last) >= FAILURE_LOG_INTERVAL_MS;
        if due
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Some(self.unreported.swap(0, Ordering::AcqRel));
        }
        self.unreported.fetch_add(1, Ordering::AcqRel);
        None
    }

    /// Whether a failed store call lets the visitor in. A store that answered (busy, or an
    /// answer outside the protocol: a damaged key or a refused argument behind it) is saying
    /// "not now", never "down, let everyone in"; every other kind (unreachable, timed out, a
    /// configuration fault, and kinds added later) means the store cannot decide, and the fail
    /// policy decides instead.
    pub(super) fn fails_open(&self, core: &Core, e: &StoreError) -> bool {
        !e.store_answered() && core.config.settings.fail_policy == FailPolicy::Open
    }

    /// Whether the drain policy decides what a visitor gets after the failed call `e`: the
    /// room drains, the store is not merely busy, and the schedule does not shut them out.
    pub(super) fn drains(&self, core: &Core, e: &StoreError) -> bool {
        matches!(core.config.settings.fail_policy, FailPolicy::Drain { .. })
            && !e.store_answered()
            && !self.schedule_shuts_out(core, e)
    }

    /// Whether the schedule alone answers a failed store call for anyone without a slot (before
    /// the opening, or after a closing that does not keep the line), whatever the fail policy.
    pub(super) fn schedule_shuts_out(&self, core: &Core, e: &StoreError) -> bool {
        let Some(schedule) = core.config.policy.schedule.as_ref() else {
            return false;
        };
        let now = core.now_ms();
        !e.store_answered()
            && (schedule.before_opening(now)
                || (schedule.after_closing(now) && !schedule.keep_line_after_close))
    }

    /// The answer to a failed store call while the gateway's clock says the room has not opened
    /// yet: `scheduled`, whatever the fail policy, so a store outage never opens the room
    /// early. `None` when the store is only busy (that answer stands) or the room is open.
    pub(super) fn scheduled_on_failure(&self, core: &Core, e: &StoreError) -> Option<Rejection> {
        let schedule = core.config.policy.schedule.as_ref()?;
        let now = core.now_ms();
        (!e.store_answered() && schedule.before_opening(now))
            .then(|| scheduled_rejection(schedule.opens_at_ms, now))
    }

    /// Whether a failed store call after a scheduled closing (by the gateway's clock) must be
    /// answered `closed` rather than by the fail policy: the closing refuses newcomers, and an
    /// outage must not let them in. With the line not kept, that is everyone without a slot;
    /// with it kept, a visitor whose place was issued at or after the closing (certainly a
    /// newcomer: those in line got theirs before), while the others get what the fail policy
    /// gives. Busy stays busy.
    pub(super) fn closed_on_failure<B>(
        &self,
        core: &Core,
        e: &StoreError,
        req: &Request<B>,
    ) -> bool {
        let Some(schedule) = core.config.policy.schedule.as_ref() else {
            return false;
        };
        let now = core.now_ms();
        let Some(closes_at) = schedule.closes_at_ms.filter(|&c| now >= c) else {
            return false;
        };
        if e.store_answered() {
            return false;
        }
        if !schedule.keep_line_after_close {
            return true;
        }
        // Read again on this rare path only (the request's first read was not kept).
        queue_cookie_again(core, req, now).is_none_or(|place| place.issued_at_ms() >= closes_at)
    }

    /// Reports a failed store call: a warning for the first, then at most one per
    /// [`FAILURE_LOG_INTERVAL_MS`] with the number of failures since the last one, so that an
    /// outage (when every request fails) does not write a line per request. Each failure is
    /// also logged at debug level. `call` names the store call that failed (the reported one:
    /// those counted in between may have been others).
    pub(super) fn log(&self, core: &Core, e: &StoreError, call: &'static str) {
        let room = core.config.room();
        let now = core.now_ms();
        if e.store_answered() {
            // Busy (or an answer outside the protocol) is the store saying "not now", never
            // "down": it answered, so an outage is over (a gate fails open only while the
            // store seems down).
            self.answered();
        } else {
            self.down_at(now);
        }
        match self.note(now) {
            Some(unreported) => tracing::warn!(
                room,
                call,
                error = %e,
                unreported,
                "waiting room store call failed ({unreported} more failures since the last \
                 report; at most one report per {} s)",
                FAILURE_LOG_INTERVAL_MS / 1000
            ),
            None => tracing::debug!(room, call, error = %e, "waiting room store call failed"),
        }
    }

    /// Counts a store answer to a visitor: its outcome, and how many wait when it says.
    pub(super) fn count_answer(
        &self,
        core: &Core,
        stage: Stage,
        answer: &Result<Decision, StoreError>,
    ) {
        if answer.is_ok() {
            self.answered();
        }
        let outcome = match answer {
            Ok(Decision::Admitted { .. }) => Outcome::Admitted,
            Ok(Decision::Waiting { waiting, .. }) => {
                core.metrics.waiting(*waiting);
                Outcome::Waiting
            }
            Ok(Decision::Full { waiting }) => {
                core.metrics.waiting(*waiting);
                Outcome::Full
            }
            Ok(Decision::Closed) => Outcome::Closed,
            Ok(Decision::Banned) => Outcome::Banned,
            // Registered in the pre-queue: in line, counted as waiting.
            Ok(Decision::Scheduled { .. }) => Outcome::Waiting,
            // Entering always finds the visitor somewhere: nowhere is a store fault.
            Ok(Decision::Unknown) if stage == Stage::Store => {
                let e = StoreError::new(StoreErrorKind::Protocol);
                Outcome::of_error(&e, self.fails_open(core, &e))
            }
            Ok(Decision::Unknown) => Outcome::Unknown,
            // Counted as let in only when the fail policy really decides: never before a
            // scheduled opening, nor after a closing that does not keep the line.
            // Draining decides per visitor, and counts there (`drain`).
            Err(e) if self.drains(core, e) => return,
            Err(e) => Outcome::of_error(
                e,
                self.fails_open(core, e) && !self.schedule_shuts_out(core, e),
            ),
        };
        core.metrics.request(stage, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_reported_first_then_once_per_interval_with_a_count() {
        let log = FailureLog::new();
        let t = 1_000_000;
        assert_eq!(log.note(t), Some(0), "the first is reported at once");
        for i in 1..50 {
            assert_eq!(log.note(t + i * 100), None);
        }
        assert_eq!(log.note(t + FAILURE_LOG_INTERVAL_MS), Some(49));
        assert_eq!(log.note(t + FAILURE_LOG_INTERVAL_MS + 1), None);
        // Long quiet: the next failure is reported at once, with the one counted meanwhile.
        assert_eq!(log.note(t + 100 * FAILURE_LOG_INTERVAL_MS), Some(1));
        // A clock that jumped back does not silence the log.
        assert_eq!(log.note(t), Some(0));
    }
}
