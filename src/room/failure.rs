//! [`FailureLog`], the room's memory of failed store calls: reported at most once per
//! interval, and whether the store seems down (for the gates). What a visitor gets after a
//! failed call is the failure ladder's (see [`ladder`](super::ladder)).

use std::sync::atomic::{AtomicU64, Ordering};

use super::shared::Core;
use crate::store::{Decision, StoreError};
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

    /// Counts a store answer to a visitor: its outcome, and how many wait when it says. A
    /// failed call is counted by its caller, once the failure ladder has said what the visitor
    /// gets ([`Rung::outcome`](super::ladder::Rung::outcome)).
    pub(super) fn count_answer(
        &self,
        core: &Core,
        stage: Stage,
        answer: &Result<Decision, StoreError>,
    ) {
        let Ok(decision) = answer else {
            return;
        };
        self.answered();
        let outcome = match decision {
            Decision::Admitted { .. } => Outcome::Admitted,
            Decision::Waiting { waiting, .. } => {
                core.metrics.waiting(*waiting);
                Outcome::Waiting
            }
            Decision::Full { waiting } => {
                core.metrics.waiting(*waiting);
                Outcome::Full
            }
            Decision::Closed => Outcome::Closed,
            Decision::Banned => Outcome::Banned,
            // Registered in the pre-queue: in line, counted as waiting.
            Decision::Scheduled { .. } => Outcome::Waiting,
            // Entering always finds the visitor somewhere: nowhere is the store answering
            // outside the protocol, which is busy (counted by the caller, as a failure).
            Decision::Unknown if stage == Stage::Store => return,
            Decision::Unknown => Outcome::Unknown,
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
