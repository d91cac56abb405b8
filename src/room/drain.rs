//! The drain fail policy ([`FailPolicy::Drain`]): while the store cannot decide, the gateway
//! keeps letting the line in from the front, at no more than its last known pace, within a
//! budget; everyone else keeps their place.
//!
//! It needs no store and no word between gateways. The last snapshot a gateway held says where
//! the line stood and how fast it moved; a waiter's signed queue cookie says where they stand.
//! Since the snapshot was received, `pace * elapsed` places (at most `budget`) have drained:
//! a waiter whose position in the snapshot is within them is let in, and the others are shown
//! their place, moved up by as many. Every gateway computes the same front from its own
//! snapshot (taken within a refresh of each other's), so together they let in no more than the
//! pace allows, plus at most one refresh's worth of it (the snapshots' difference in age); and
//! in order, since positions only grow along the line.
//!
//! Nobody without a place in the snapshot is let in: a newcomer, or a cookie whose place is
//! ahead of the snapshot's head (its visitor's turn had come, or they left: an old cookie,
//! kept or replayed), gets "try again soon", as under [`FailPolicy::Closed`]. Nor is anyone before a scheduled opening, or after a closing that
//! ends the line (those are checked first, as for every policy).

use super::reply::waiting_rejection;
use super::shared::Core;
use super::snapshot::LineAhead;
use super::snapshot::LineView;
use crate::config::FailPolicy;
use crate::outcome::Rejection;
use crate::store::{RoomSnapshot, ADMISSION_BUCKET_MS, FIVE_MINUTE_BUCKETS, MINUTE_BUCKETS};
use crate::token::QueueCookie;

/// What the drain policy gives a visitor while the store cannot decide.
pub(super) enum Drained {
    /// Their place is within the drained front of the line: let in (without a slot).
    In,
    /// Still in line: their place, moved up by those drained ahead of them.
    Waiting(Rejection),
    /// No place to go by (a newcomer, no snapshot yet), or the room does not drain: refused as
    /// under [`FailPolicy::Closed`].
    Out,
}

impl Drained {
    /// Under [`FailPolicy::Drain`], what the visitor with `cookie` gets at `now` while the
    /// store cannot decide; [`Drained::Out`] under any other policy.
    pub(super) fn of(
        core: &Core,
        line: &LineView,
        cookie: Option<&QueueCookie>,
        now: u64,
    ) -> Drained {
        let FailPolicy::Drain { budget } = core.config.settings.fail_policy else {
            return Drained::Out;
        };
        let (Some(cookie), Some(held)) = (cookie, line.last()) else {
            return Drained::Out;
        };
        let Some(place) = cookie.place() else {
            return Drained::Out;
        };
        let snapshot = &held.snapshot;
        if !snapshot.answers_waiters() {
            return Drained::Out;
        }
        // Ahead of the snapshot's head, the place is nobody's now: its visitor was let in,
        // skipped, or left (an old cookie kept, or replayed), or holds a grant that only the
        // store can tell from those. None of them is drained: that would let in anyone with
        // an old cookie, at once and beyond the pace. Nor one the store said has no place.
        let Some(position) = line.position_in(core, snapshot, cookie.session(), place) else {
            return Drained::Out;
        };
        if line.is_forgotten(cookie.session()) {
            return Drained::Out;
        }
        let drained = drained_places(snapshot, held.age_ms(now), budget);
        if position <= drained {
            Drained::In
        } else {
            Drained::Waiting(waiting_rejection(
                position - drained,
                snapshot.waiting.max(position) - drained,
                snapshot.paused,
                snapshot.pace,
                LineAhead::default(),
            ))
        }
    }
}

/// The places drained `elapsed_ms` after `snapshot` was received: its pace times the time, at
/// most `budget`; none while paused.
pub(super) fn drained_places(snapshot: &RoomSnapshot, elapsed_ms: u64, budget: u64) -> u64 {
    if snapshot.paused {
        return 0;
    }
    let places = (drain_pace(snapshot) * elapsed_ms as f64 / 1_000.0).floor();
    (places as u64).min(budget)
}

/// Admissions per second before the outage: the last complete minute's (or, if none, the last
/// five minutes'), never above the live admission rate. A room younger than the window is
/// measured over the complete buckets it lived through, its first (partial) one counted whole,
/// so the pace is never overestimated.
pub(super) fn drain_pace(snapshot: &RoomSnapshot) -> f64 {
    let (recent, pace) = (&snapshot.recent, &snapshot.pace);
    let lived = pace.observed_ms.saturating_sub(pace.into_bucket_ms);
    let buckets = lived.div_ceil(ADMISSION_BUCKET_MS).max(1);
    let per_second = |admissions: u64, window_buckets: u64| {
        admissions as f64 / (buckets.min(window_buckets) * ADMISSION_BUCKET_MS) as f64 * 1_000.0
    };
    let measured = if recent.last_minute > 0 {
        per_second(recent.last_minute, MINUTE_BUCKETS)
    } else {
        per_second(recent.last_five_minutes, FIVE_MINUTE_BUCKETS)
    };
    match pace.admission_rate {
        Some(rate) => measured.min(f64::from(rate)),
        None => measured,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{AdmissionCounts, RoomPace};

    fn snapshot(last_minute: u64, five: u64, rate: Option<u32>, paused: bool) -> RoomSnapshot {
        let pace = RoomPace {
            admission_rate: rate,
            // An hour old: the whole windows count.
            observed_ms: 3_600_000,
            ..RoomPace::default()
        };
        RoomSnapshot {
            taken_at_ms: 0,
            head: Some(1.0),
            waiting: 10_000,
            checkpoints: Vec::new(),
            paused,
            open: true,
            before_opening: false,
            line_closed: false,
            recent: AdmissionCounts::new(last_minute, five),
            pace,
            unknown: Vec::new(),
        }
    }

    #[test]
    fn the_front_drains_at_the_last_pace_within_the_budget() {
        // 120 admissions in the last minute: 2 a second.
        let s = snapshot(120, 600, None, false);
        assert_eq!(drain_pace(&s), 2.0);
        assert_eq!(drained_places(&s, 0, 1_000), 0);
        assert_eq!(drained_places(&s, 2_600, 1_000), 5);
        assert_eq!(drained_places(&s, 60_000, 1_000), 120);
        assert_eq!(drained_places(&s, 3_600_000, 1_000), 1_000, "the budget");
        // Never above a live rate; the five minutes when the last one saw nobody; paused: none.
        assert_eq!(drain_pace(&snapshot(120, 600, Some(1), false)), 1.0);
        assert_eq!(drain_pace(&snapshot(0, 300, None, false)), 1.0);
        assert_eq!(
            drained_places(&snapshot(120, 600, None, true), 60_000, 1_000),
            0
        );
        assert_eq!(
            drained_places(&snapshot(0, 0, None, false), 60_000, 1_000),
            0
        );
    }
}
