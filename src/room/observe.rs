//! What the room records about its decisions (see [`telemetry`](crate::telemetry)): one call at
//! each point where the room decides, so a decision is counted exactly once.

use super::Room;
use crate::store::{Decision, StoreError, StoreErrorKind};
use crate::telemetry::{Outcome, Stage};

impl Room {
    /// `x`, the answer of a decision at `stage` with `outcome`, counted.
    #[inline]
    pub(super) fn counted<T>(&self, stage: Stage, outcome: Outcome, x: T) -> T {
        self.metrics.request(stage, outcome);
        x
    }

    /// Counts a store answer to a visitor: its outcome, and how many wait when it says.
    pub(super) fn count_answer(&self, stage: Stage, answer: &Result<Decision, StoreError>) {
        if answer.is_ok() {
            self.store_failures.answered();
        }
        let outcome = match answer {
            Ok(Decision::Admitted { .. }) => Outcome::Admitted,
            Ok(Decision::Waiting { waiting, .. }) => {
                self.metrics.waiting(*waiting);
                Outcome::Waiting
            }
            Ok(Decision::Full { waiting }) => {
                self.metrics.waiting(*waiting);
                Outcome::Full
            }
            Ok(Decision::Closed) => Outcome::Closed,
            Ok(Decision::Banned) => Outcome::Banned,
            // Registered in the pre-queue: in line, counted as waiting.
            Ok(Decision::Scheduled { .. }) => Outcome::Waiting,
            // Entering always finds the visitor somewhere: nowhere is a store fault.
            Ok(Decision::Unknown) if stage == Stage::Store => {
                let e = StoreError::new(StoreErrorKind::Protocol);
                Outcome::of_error(&e, self.fails_open(&e))
            }
            Ok(Decision::Unknown) => Outcome::Unknown,
            // Counted as let in only when the fail policy really decides: never before a
            // scheduled opening, nor after a closing that does not keep the line.
            // Draining decides per visitor, and counts there (`drain`).
            Err(e) if self.drains(e) => return,
            Err(e) => Outcome::of_error(e, self.fails_open(e) && !self.schedule_shuts_out(e)),
        };
        self.metrics.request(stage, outcome);
    }
}
