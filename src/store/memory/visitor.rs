//! The visitors' operations: enter (and join), poll, heartbeat, release. The same rules as
//! `src/store/redis/script/visitor.lua`.

use super::liveness::check_in_epochs;
use super::schedule::{after_closing, line_closed};
use super::{MemoryStore, RoomState};
use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::snapshot::Place;
use crate::store::Decision;

/// A visitor's enter: their slot claimed or extended, their place checked in, or a newcomer
/// admitted, placed or refused.
pub(super) fn enter(
    room: &mut RoomState,
    policy: &RoomPolicy,
    session: SessionId,
    now: u64,
) -> Decision {
    if let Some(d) = room.claim_or_extend(session, policy, now) {
        return d;
    }
    let at = check_in_epochs(policy, now);
    if !room.live().open {
        // Closed: a waiter keeps their place (checked in) for a reopening; a
        // newcomer is not added.
        room.waiters.touch(session, at);
        return Decision::Closed;
    }
    if let Some((position, place)) = room.waiters.touch(session, at) {
        return room.waiter(position, place, policy, now);
    }
    if after_closing(policy, now) {
        // The event's closing: newcomers are not added.
        return Decision::Closed;
    }
    if room.is_banned(session, now) {
        return Decision::Banned;
    }
    if let Some(schedule) = policy.schedule.as_ref().filter(|s| s.before_opening(now)) {
        // The pre-queue: a place by the session's draw, ahead of every later arrival;
        // checked in as of the opening, so silence counts from then.
        let waiting = room.waiters.len() as u64;
        if waiting >= policy.max_queue_len {
            return Decision::Full { waiting };
        }
        if schedule.draws && !room.waiters.has_sequenced() {
            room.waiters.push_pre(session, schedule.draw(session), now);
        } else {
            // No draw (a kept schedule), or waiters with sequence numbers in line (an
            // earlier opening's line, which a draw would jump): first come, first served.
            room.waiters.push_at(session, Some(now));
        }
        room.waiters.check_in(session, at);
        return Decision::Scheduled {
            opens_at_ms: schedule.opens_at_ms,
        };
    }
    if room.live().admits()
        && room.waiters.is_empty()
        && room.free_slots() > 0
        && room.bucket.take(room.live().admission_rate, now)
    {
        let expires_at_ms = now + policy.active_ttl_ms;
        room.active.add(session, expires_at_ms);
        room.count_admission(now);
        return Decision::Admitted { expires_at_ms };
    }
    let waiting = room.waiters.len() as u64;
    if waiting >= policy.max_queue_len {
        return Decision::Full { waiting };
    }
    room.waiters.push_at(session, Some(now));
    match room.waiters.touch(session, at) {
        Some((position, place)) => room.waiting(position, place, policy, now),
        // (Never: the place was just made.)
        None => Decision::Unknown,
    }
}

/// A waiter's poll: their place checked in and answered; a session with neither place nor
/// slot is unknown.
pub(super) fn poll(
    room: &mut RoomState,
    policy: &RoomPolicy,
    session: SessionId,
    now: u64,
) -> Decision {
    if let Some(expires_at_ms) = room.slot(session) {
        return Decision::Admitted { expires_at_ms };
    }
    if let Some((position, place)) = room.waiters.touch(session, check_in_epochs(policy, now)) {
        if !room.live().open {
            return Decision::Closed;
        }
        return room.waiter(position, place, policy, now);
    }
    // No place: a check-in without one is damage; drop it (only on this rare path).
    room.waiters.remove_check_in(session);
    if room.is_banned(session, now) {
        return Decision::Banned;
    }
    if !room.live().open || after_closing(policy, now) {
        return Decision::Closed;
    }
    Decision::Unknown
}

/// An admitted visitor's heartbeat: their slot claimed or extended.
pub(super) fn heartbeat(
    room: &mut RoomState,
    policy: &RoomPolicy,
    session: SessionId,
    now: u64,
) -> Decision {
    room.claim_or_extend(session, policy, now)
        .unwrap_or(Decision::Unknown)
}

/// A visitor leaves: their ticket ends with their slot, and the slot or place is freed.
pub(super) fn release(
    store: &MemoryStore,
    room: &mut RoomState,
    policy: &RoomPolicy,
    session: SessionId,
    now: u64,
) -> bool {
    store.end_ticket(policy, session, now);
    let released = room.drop_session(session);
    if released {
        room.promote(policy, now);
    }
    released
}

impl RoomState {
    /// The answer to a waiter at `position` who just checked in, open (checked by the caller)
    /// or not: before the opening, the opening; after a closing that keeps no line, closed.
    pub(super) fn waiter(
        &self,
        position: u64,
        place: Place,
        policy: &RoomPolicy,
        now: u64,
    ) -> Decision {
        match &policy.schedule {
            Some(s) if s.before_opening(now) => Decision::Scheduled {
                opens_at_ms: s.opens_at_ms,
            },
            _ if line_closed(policy, now) => Decision::Closed,
            _ => self.waiting(position, place, policy, now),
        }
    }
}
