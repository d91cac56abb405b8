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
    /// the room was first seen.
    pub(super) fn load_settings(&mut self, policy: &RoomPolicy, now: u64) {
        if self.settings.is_none() {
            // A room first seen (or its settings lost): the builder's values, as the script.
            self.settings = Some(RoomSettings::from_policy(policy));
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
