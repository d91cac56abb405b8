//! The operator's operations and the gateways' figures: stats, configure, admit_next, ban. The
//! same rules as `src/store/redis/script/operator.lua`.

use super::{MemoryStore, RoomState};
use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::limits::LATEST_MS;
use crate::store::snapshot::LivenessRule;
use crate::store::{RoomStats, SettingsChange, SettingsUpdate, MAX_ADMIT_NEXT_PER_CALL};

/// The room's figures.
pub(super) fn stats(room: &mut RoomState, policy: &RoomPolicy, now: u64) -> RoomStats {
    RoomStats {
        admitted: room.active.len() as u64,
        granted: room.granted.len() as u64,
        waiting: room.waiters.len() as u64,
        capacity: u64::from(room.live().capacity),
        recent: room.admissions.counts(now),
        settings: room.live(),
        oldest_wait_ms: room.waiters.head_joined().map(|t| now.saturating_sub(t)),
        admissions_per_minute: room.admissions.per_minute(now),
        pace: room.pace(policy, now),
    }
}

/// An operator's change of the live settings.
pub(super) fn configure(
    room: &mut RoomState,
    policy: &RoomPolicy,
    change: SettingsChange,
    now: u64,
) -> SettingsUpdate {
    let before = room.live();
    room.settings = Some(before.with(&change));
    if room.live().capacity != before.capacity {
        room.capacity_change = Some((before.capacity, now));
    }
    match (before.paused, room.live().paused) {
        (false, true) => room.paused_at = Some(now),
        (true, false) => room.last_pause = Some((room.paused_at.unwrap_or(now), now)),
        _ => {}
    }
    if change.ends_slots() {
        room.active.clear();
        room.granted.clear();
    }
    // A raised capacity or a resume lets people in now, not at the next call.
    room.promote(policy, now);
    SettingsUpdate::new(before, room.live())
}

/// An operator lets up to `count` waiters in from the head of the line.
pub(super) fn admit_next(room: &mut RoomState, policy: &RoomPolicy, count: u32, now: u64) -> u64 {
    if policy.before_opening(now) {
        // Nobody is admitted before the opening, not even by an operator.
        return 0;
    }
    let turn = LivenessRule::for_turn(policy);
    // As the script: at most `want` let in and `2 * want` looked at (silent ones
    // skipped), so the work per call stays bounded.
    let want = u64::from(count.min(MAX_ADMIT_NEXT_PER_CALL));
    let (mut admitted, mut steps) = (0, 0);
    while admitted < want && steps < 2 * want {
        let Some(head) = room.waiters.head() else {
            break;
        };
        steps += 1;
        // (A place without a check-in counts as seen now: not silent.)
        let silent = room
            .waiters
            .seen(head)
            .is_some_and(|seen| !turn.alive(seen.turn, now));
        room.waiters.remove(head);
        let holder = room.slot(head).is_some();
        if !holder && silent {
            room.admissions.count_skip(now);
        }
        if holder || silent {
            // A slot holder's stray place, or a waiter silent at their turn: skipped.
            continue;
        }
        room.granted.add(head, now + policy.grant_ttl_ms);
        room.count_admission(now);
        admitted += 1;
    }
    admitted
}

/// A ban of `session` until `until_ms`: its ticket ends, and its slot or place is freed.
pub(super) fn ban(
    store: &MemoryStore,
    room: &mut RoomState,
    policy: &RoomPolicy,
    session: SessionId,
    until_ms: u64,
    now: u64,
) -> bool {
    room.banned.retain(|_, until| *until > now);
    // Kept as the Redis store keeps it: no later than the latest time a store holds.
    let until_ms = until_ms.min(LATEST_MS);
    if until_ms > now {
        room.banned.insert(session, until_ms);
    }
    store.end_ticket(policy, session, now);
    let had = room.drop_session(session);
    if had {
        room.promote(policy, now);
    }
    had
}
