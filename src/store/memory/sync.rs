//! Sync: a gateway's check-ins of the sessions it saw waiting, answered with the room's
//! snapshot. The same rules as `src/store/redis/script/sync.lua`.

use super::liveness::check_in_epochs;
use super::schedule::line_closed;
use super::RoomState;
use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::snapshot::{checkpoint_ranks, Checkpoint, LivenessRule, RoomSnapshot};
use crate::store::SeenWaiters;

/// Checks in the sessions of `seen` that have a place; those without one go to `unknown`.
pub(super) fn check_in_seen(
    room: &mut RoomState,
    policy: &RoomPolicy,
    now: u64,
    seen: &SeenWaiters,
    unknown: &mut Vec<SessionId>,
) {
    // Only waiters with a place are checked in: nothing is made for the others,
    // who are answered back. Those beyond the turn horizon too: a check-in here is
    // one time per waiter, so leaving out the turn's would save nothing.
    let at = check_in_epochs(policy, now);
    for &session in seen.iter() {
        if room.waiters.touch(session, at).is_none() {
            unknown.push(session);
        }
    }
}

impl RoomState {
    /// The line as it stands, for a gateway's snapshot (see [`RoomSnapshot`]): the checkpoints
    /// are exact ranks, O(log n) each.
    pub(super) fn snapshot(&self, policy: &RoomPolicy, now: u64) -> RoomSnapshot {
        let waiting = self.waiters.len() as u64;
        let turn = LivenessRule::for_turn(policy);
        RoomSnapshot {
            taken_at_ms: now,
            head: self.waiters.score_at(0),
            waiting,
            checkpoints: checkpoint_ranks(waiting)
                .filter_map(|rank| {
                    let (score, seen) = self.waiters.at(rank)?;
                    // Silent by the turn's rule, as at their turn (`promote`): a waiter
                    // without a check-in (damage) is counted seen now there, so alive here.
                    let silent = seen.is_some_and(|seen| !turn.alive(seen.turn, now));
                    Some(Checkpoint {
                        score,
                        rank,
                        silent,
                    })
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
}
