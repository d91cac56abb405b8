//! The line and the slots: housekeeping, promotion, claims, bans and the sweep. The same rules
//! as `src/store/redis/script/line.lua`.

use super::liveness::check_in_epochs;
use super::schedule::line_closed;
use super::RoomState;
use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::snapshot::LivenessRule;
use crate::store::{Decision, MAX_PROMOTIONS_PER_CALL, MAX_SWEEP_PER_CALL};

impl RoomState {
    pub(super) fn free_slots(&self) -> u64 {
        u64::from(self.live().capacity)
            .saturating_sub((self.active.len() + self.granted.len()) as u64)
    }

    /// Frees the session's slot and its place. `true` if it had either.
    pub(super) fn drop_session(&mut self, session: SessionId) -> bool {
        // `|`, not `||`: a slot holder with a stray place in line (damage) loses both, or the
        // promotion after a release or a ban would grant them a slot again from that place.
        self.active.remove(session) | self.granted.remove(session) | self.waiters.remove(session)
    }

    /// Whether `session` is banned at `now` (an ended ban is forgotten).
    pub(super) fn is_banned(&mut self, session: SessionId, now: u64) -> bool {
        match self.banned.get(&session) {
            Some(&until) if until > now => true,
            Some(_) => {
                self.banned.remove(&session);
                false
            }
            None => false,
        }
    }

    /// The expiry of the session's slot, claimed or granted.
    pub(super) fn slot(&self, session: SessionId) -> Option<u64> {
        self.active
            .score(session)
            .or_else(|| self.granted.score(session))
    }

    /// Expire slots, sweep abandoned waiters (only for `sync`), promote.
    pub(super) fn housekeeping(&mut self, policy: &RoomPolicy, now: u64, sweep: Sweep) {
        self.promotions_left = MAX_PROMOTIONS_PER_CALL;
        for slots in [&mut self.active, &mut self.granted] {
            while let Some((expires, session)) = slots.first() {
                if expires > now {
                    break;
                }
                slots.remove(session);
            }
        }
        if sweep == Sweep::Yes {
            let abandon = LivenessRule::for_abandon(policy);
            self.waiters
                .sweep(|epoch| abandon.alive(epoch, now), MAX_SWEEP_PER_CALL);
        }
        self.promote(policy, now);
    }

    /// Grants free slots to the head of the line, skipping waiters silent at their turn (not
    /// alive by [`LivenessRule::for_turn`]); bounded work: at most [`MAX_PROMOTIONS_PER_CALL`] promotions
    /// and skips per call, however often it runs in it.
    pub(super) fn promote(&mut self, policy: &RoomPolicy, now: u64) {
        if !self.live().admits() || policy.before_opening(now) || line_closed(policy, now) {
            return;
        }
        let turn = LivenessRule::for_turn(policy);
        while self.promotions_left > 0 && self.free_slots() > 0 {
            let Some(head) = self.waiters.head() else {
                break;
            };
            if self.slot(head).is_some() {
                // Damage: a slot holder with a place too. The slot wins; no second slot.
                self.waiters.remove(head);
            } else {
                let seen = self.waiters.seen(head).unwrap_or_else(|| {
                    // Damage: a place without a check-in. Counted as seen now: they keep
                    // their turn.
                    let at = check_in_epochs(policy, now);
                    self.waiters.check_in(head, at);
                    at
                });
                if !turn.alive(seen.turn, now) {
                    self.waiters.remove(head);
                    self.admissions.count_skip(now);
                } else {
                    if !self.bucket.take(self.live().admission_rate, now) {
                        break;
                    }
                    self.waiters.remove(head);
                    self.granted.add(head, now + policy.grant_ttl_ms);
                    self.count_admission(now);
                }
            }
            self.promotions_left -= 1;
        }
    }

    /// An admitted or granted visitor: claim the grant or extend the slot to `active_ttl`.
    pub(super) fn claim_or_extend(
        &mut self,
        session: SessionId,
        policy: &RoomPolicy,
        now: u64,
    ) -> Option<Decision> {
        self.slot(session)?;
        if !self.live().open {
            // Closed: claimed slots run out, not extended. A granted slot is still claimed: its
            // visitor was let in before the close, or by an operator's release.
            if let Some(expires_at_ms) = self.active.score(session) {
                return Some(Decision::Admitted { expires_at_ms });
            }
        }
        let expires_at_ms = now + policy.active_ttl_ms;
        self.granted.remove(session);
        self.active.add(session, expires_at_ms);
        Some(Decision::Admitted { expires_at_ms })
    }
}

/// Whether a call's housekeeping sweeps abandoned waiters: only
/// [`sync`](crate::store::SnapshotStore::sync)'s does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sweep {
    Yes,
    No,
}
