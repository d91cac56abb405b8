//! Liveness: a room's two rules (at their turn, and abandoned) and the epochs a check-in marks
//! in them. The same rules as `src/store/redis/script/liveness.lua`, where the check-ins are
//! bits in rings of bitmaps; here each waiter's record keeps its epochs ([`Epochs`]).

use super::schedule::check_in_time;
use super::sets::Epochs;
use crate::config::RoomPolicy;
use crate::store::snapshot::LivenessRule;

/// A room's two liveness rules (as of its last call).
#[derive(Clone, Copy, Debug)]
pub(super) struct Liveness {
    pub(super) turn: LivenessRule,
    pub(super) abandon: LivenessRule,
}

impl Liveness {
    pub(super) fn of(policy: &RoomPolicy) -> Self {
        Self {
            turn: LivenessRule::for_turn(policy),
            abandon: LivenessRule::for_abandon(policy),
        }
    }

    /// The epochs of a check-in made at `at`.
    pub(super) fn at(self, at: u64) -> Epochs {
        Epochs {
            turn: self.turn.epoch(at),
            abandon: self.abandon.epoch(at),
        }
    }
}

/// The epochs a waiter's check-in at `now` marks, in both liveness rules: those of
/// [`check_in_time`].
pub(super) fn check_in_epochs(policy: &RoomPolicy, now: u64) -> Epochs {
    Liveness::of(policy).at(check_in_time(policy, now))
}
