//! The pace: the admission-rate budget, the admission counts, and what the wait estimate reads
//! (pace, silent waiters). The same rules as `src/store/redis/script/pace.lua`.

use super::RoomState;
use crate::config::RoomPolicy;
use crate::store::snapshot::{LivenessRule, Place};
use crate::store::{Decision, RoomPace, ADMISSION_BUCKET_MS};

impl RoomState {
    /// Counts an admission; the first beyond the opening's capacity is the room's first
    /// movement (`moved` in `settings`).
    pub(super) fn count_admission(&mut self, now: u64) {
        self.admissions.count(now);
        if self.first_move.is_none() {
            self.admitted_early += 1;
            if self.admitted_early > u64::from(self.live().capacity) {
                self.first_move = Some(now);
            }
        }
    }

    /// The answer to a waiter at `position` (who just checked in).
    pub(super) fn waiting(
        &self,
        position: u64,
        place: Place,
        policy: &RoomPolicy,
        now: u64,
    ) -> Decision {
        Decision::Waiting {
            position,
            waiting: self.waiters.len() as u64,
            recent: self.admissions.counts(now),
            paused: self.live().paused,
            pace: self.pace(policy, now),
            place: Some(place),
        }
    }

    /// Waiters not alive by the turn's liveness rule at `now`: skipped at their turn unless
    /// they come back. Exact.
    pub(super) fn silent(&self, policy: &RoomPolicy, now: u64) -> u64 {
        let turn = LivenessRule::for_turn(policy);
        // Alive: seen in an epoch `e` with `e + keep >= epoch(now)`.
        self.waiters
            .seen_before(turn.epoch(now).saturating_sub(turn.keep))
    }

    /// What the admission counts were measured over at `now`.
    pub(super) fn pace(&self, policy: &RoomPolicy, now: u64) -> RoomPace {
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
        .with_admission_rate(self.live().admission_rate)
        .with_inside((self.active.len() + self.granted.len()) as u64);
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

/// The admission-rate budget: a token bucket holding up to one second of admissions, counted in
/// thousandths of an admission so the Redis script can do the same integer arithmetic.
#[derive(Default)]
pub(super) struct Bucket {
    /// Thousandths of an admission available; `None` means full (never used).
    milli: Option<u64>,
    last_ms: u64,
}

impl Bucket {
    pub(super) fn take(&mut self, rate: Option<u32>, now: u64) -> bool {
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
