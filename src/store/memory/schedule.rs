//! The schedule: a pre-queue before the opening, a closing after which newcomers are refused.
//! The same rules as `src/store/redis/script/schedule.lua`.

use super::RoomState;
use crate::config::{EventSchedule, RoomPolicy};

impl RoomState {
    /// The schedule, as the script: kept from the calls that come with it, followed by a
    /// call without one (a gateway built without it) while the kept opening is ahead. `Some`:
    /// the call's policy with the kept schedule, to go by instead of its own.
    pub(super) fn apply_schedule(&mut self, policy: &RoomPolicy, now: u64) -> Option<RoomPolicy> {
        match &policy.schedule {
            Some(s) => {
                self.kept_schedule = Some((s.opens_at_ms, s.closes_at_ms, s.keep_line_after_close));
                None
            }
            None => match self.kept_schedule {
                Some((opens, closes, keep)) if opens > now => Some(
                    policy
                        .clone()
                        .with_schedule(Some(EventSchedule::kept(opens, closes, keep))),
                ),
                _ => None,
            },
        }
    }
}

/// When a waiter's check-in at `now` counts as made: before a scheduled opening, at the opening,
/// so a registrant's silence counts from then (nobody is skipped or swept for waiting for it).
pub(super) fn check_in_time(policy: &RoomPolicy, now: u64) -> u64 {
    match &policy.schedule {
        Some(s) => now.max(s.opens_at_ms),
        None => now,
    }
}

/// Whether the event's closing time has passed: newcomers are refused.
pub(super) fn after_closing(policy: &RoomPolicy, now: u64) -> bool {
    policy
        .schedule
        .as_ref()
        .is_some_and(|s| s.after_closing(now))
}

/// Whether the event closed and keeps no line: nobody without a slot is let in or promoted.
pub(super) fn line_closed(policy: &RoomPolicy, now: u64) -> bool {
    policy
        .schedule
        .as_ref()
        .is_some_and(|s| s.after_closing(now) && !s.keep_line_after_close)
}
