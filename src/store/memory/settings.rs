//! The live settings: read by every step, written from the call's policy when missing. The
//! same rules as `src/store/redis/script/settings.lua`.

use super::RoomState;
use crate::config::RoomPolicy;
use crate::store::RoomSettings;

impl RoomState {
    /// The live settings (written by [`MemoryStore::run`](super::MemoryStore::run) before any
    /// step).
    pub(super) fn live(&self) -> RoomSettings {
        self.settings.unwrap_or_default()
    }

    /// A room first seen (or its settings lost): the builder's values, as the script; and when
    /// the room was first seen. A field out of its range (a capacity of 0, a rate of 0 that is
    /// not "none": only damage makes one) is repaired with its default, as the script repairs a
    /// field that is not a number in its range.
    pub(super) fn load_settings(&mut self, policy: &RoomPolicy, now: u64) {
        match self.settings.as_mut() {
            // A room first seen (or its settings lost): the builder's values, as the script.
            None => self.settings = Some(RoomSettings::from_policy(policy)),
            Some(s) => {
                if s.capacity == 0 {
                    s.capacity = RoomSettings::from_policy(policy).capacity;
                }
                if s.admission_rate == Some(0) {
                    s.admission_rate = RoomSettings::from_policy(policy).admission_rate;
                }
            }
        }
        if self.born.is_none_or(|born| born > now) {
            // As the script: when the room was first seen (a clock gone back: now), and its
            // first movement yet to come.
            self.born = Some(now);
            self.admitted_early = 0;
            self.first_move = None;
        }
    }
}
