//! Who is inside, as the visitors see it: never more than the capacity at once.

use super::tools::wall_ms;
use super::CAPACITY;

use std::collections::HashMap;

// ===== who is inside, as the visitors see it =====

/// Visitors inside, by their own observation: added on their first 200, refreshed on every
/// later 200, removed just before they send `leave`.
///
/// A member counts only while the slot it was told about is certainly still held: until the
/// expiry the gateway put in the answer (Redis `TIME` and the system clock are the same clock
/// here), since only a `leave` frees a slot earlier. So a visitor who vanishes stays counted
/// until its slot expires (the store must keep that slot for it), and a visitor stalled by the
/// scheduler past its slot's expiry stops counting (the store may give that slot away).
#[derive(Default)]
pub(super) struct Inside {
    /// Visitor → expiry of its slot (ms since the epoch).
    members: HashMap<usize, u64>,
    pub(super) max_counted: usize,
    pub(super) violations: Vec<String>,
}

impl Inside {
    pub(super) fn observe(&mut self, visitor: usize, expires_at_ms: u64) {
        self.members.insert(visitor, expires_at_ms);
        let now = wall_ms();
        self.members.retain(|_, &mut expires| now + 10 < expires);
        let counted = self.members.len();
        self.max_counted = self.max_counted.max(counted);
        if counted > CAPACITY as usize {
            let mut who: Vec<usize> = self.members.keys().copied().collect();
            who.sort_unstable();
            self.violations.push(format!(
                "{counted} visitors inside at once when visitor {visitor} got in: {who:?}"
            ));
        }
    }

    pub(super) fn remove(&mut self, visitor: usize) {
        self.members.remove(&visitor);
    }
}
