//! The settings an operator changes while a sale runs, kept in the store next to the line.
//!
//! Capacity, admission rate, `paused` and `open` are read by the same atomic step that admits,
//! so a change made through any gateway is enforced by every gateway on its next store call and
//! survives restarts. The builder's values ([`RoomPolicy`]) are only the defaults a store writes
//! when it first sees a room: from then on the store's values win, whatever a gateway was built
//! with.

use serde::Serialize;

use crate::config::RoomPolicy;

/// The version of the stored settings this crate writes and reads. A store holding settings
/// of a version it cannot read refuses the room's calls as a busy store
/// ([`StoreError::is_version_mix`](crate::store::StoreError::is_version_mix)) rather than guess
/// what they mean (a version it does not know may have fields that change admission), and
/// never as an outage, so no fail policy lets anyone in for it. A newer version whose changes
/// are additive names the oldest version that reads its key (the Redis store's `vmin`), and
/// this one reads it.
///
/// Version 3: a newcomer's join sets no liveness bits (the Redis store tells who joined since
/// each epoch by its first sequence number), so a store of version 2 would take them for silent.
/// Version 4: the Redis store keeps its fast path's window in a key of its own, which a store
/// of version 3 would neither move nor close.
/// Version 5: each liveness bitmap of the Redis store is a little under the power of two it was
/// (so that it fits its allocator size class: a fifth less memory for them), which moves every
/// session's bits, so a store of version 4 would read them as silence.
/// The Redis store upgrades a room of version 2, 3 or 4 in place on its first call; a gateway
/// of an older version then refuses the room (see `docs/redis.md`, "Settings").
/// Version 6: the Redis store keeps a session in its sorted sets by its id's first 14 bytes
/// rather than all 16, which Redis holds in half the memory (16 bytes less per waiter). A room
/// of version 5 keeps its whole ids and its version, and is read by this one as it is, so
/// gateways of both share it; a room made by this version is of version 6, which a store of
/// version 5 refuses.
pub const SETTINGS_VERSION: u32 = 6;

/// A room's live settings, as the store holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RoomSettings {
    /// Visitors inside at once, counting granted but unclaimed slots (at least 1).
    pub capacity: u32,
    /// Admissions per second, if limited.
    pub admission_rate: Option<u32>,
    /// Nobody new is admitted: newcomers join the line even when slots are free; those inside
    /// keep their slots.
    pub paused: bool,
    /// `false`: the sale is closed. Newcomers and waiters are told so (`503`, `closed`); nobody
    /// is admitted; waiters who keep polling keep their place for a reopening; those inside keep
    /// their slots until they expire, not extended (a granted slot is still claimed).
    pub open: bool,
}

impl RoomSettings {
    /// The defaults a store writes when it first sees the room: the builder's capacity and
    /// rate, running and open.
    pub fn from_policy(policy: &RoomPolicy) -> Self {
        Self {
            capacity: policy.capacity.max(1),
            admission_rate: policy.admission_rate.filter(|&r| r > 0),
            paused: false,
            open: true,
        }
    }

    /// The settings after `change` (fields the change leaves out stay).
    pub fn with(mut self, change: &SettingsChange) -> Self {
        if let Some(c) = change.capacity {
            self.capacity = c.max(1);
        }
        if let Some(r) = change.admission_rate {
            self.admission_rate = r.filter(|&r| r > 0);
        }
        if let Some(p) = change.paused {
            self.paused = p;
        }
        if let Some(o) = change.open {
            self.open = o;
        }
        self
    }

    /// Whether the room admits anyone now (neither paused nor closed).
    pub fn admits(&self) -> bool {
        self.open && !self.paused
    }
}

/// What [`Store::configure`](crate::store::Store::configure) answers: the settings just before
/// the change and just after it, read in the same atomic step (so a log of the change is never
/// confused by another operator's change in between).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SettingsUpdate {
    /// The settings before the change.
    pub before: RoomSettings,
    /// The settings after the change (the same for an empty change).
    pub after: RoomSettings,
}

impl SettingsUpdate {
    /// An update from `before` to `after`.
    pub fn new(before: RoomSettings, after: RoomSettings) -> Self {
        Self { before, after }
    }
}

impl Default for RoomSettings {
    /// Capacity 1, no rate limit, running, open.
    fn default() -> Self {
        Self {
            capacity: 1,
            admission_rate: None,
            paused: false,
            open: true,
        }
    }
}

/// A change of a room's settings: the fields set are changed, the others stay. Applied by
/// [`Store::configure`](crate::store::Store::configure) in one atomic step.
///
/// ```
/// use tower_waiting_room::store::SettingsChange;
///
/// let change = SettingsChange::new().capacity(200).paused(false);
/// assert_eq!(change.get_capacity(), Some(200));
/// assert!(!change.is_empty());
/// assert!(SettingsChange::new().is_empty());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SettingsChange {
    pub(crate) capacity: Option<u32>,
    pub(crate) admission_rate: Option<Option<u32>>,
    pub(crate) paused: Option<bool>,
    pub(crate) open: Option<bool>,
    pub(crate) end_slots: bool,
}

impl SettingsChange {
    /// No change: [`configure`](crate::store::Store::configure) with it reads the settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the capacity. A store never stores less than 1 (the handle and the admin API refuse
    /// 0 with an error before it gets here).
    pub fn capacity(mut self, capacity: u32) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// Sets the admission rate per second; `None` (or 0) removes the limit.
    pub fn admission_rate(mut self, per_second: Option<u32>) -> Self {
        self.admission_rate = Some(per_second);
        self
    }

    /// Pauses or resumes admissions.
    pub fn paused(mut self, paused: bool) -> Self {
        self.paused = Some(paused);
        self
    }

    /// Opens or closes the sale.
    pub fn open(mut self, open: bool) -> Self {
        self.open = Some(open);
        self
    }

    /// With `open(false)`: also ends every slot now (claimed and granted), instead of letting
    /// them run out. Ignored unless the change closes the room.
    pub fn end_slots(mut self) -> Self {
        self.end_slots = true;
        self
    }

    /// The capacity this change sets, if any.
    pub fn get_capacity(&self) -> Option<u32> {
        self.capacity
    }

    /// The admission rate this change sets, if any (`Some(None)`: removes the limit).
    pub fn get_admission_rate(&self) -> Option<Option<u32>> {
        self.admission_rate
    }

    /// Whether this change pauses (`Some(true)`) or resumes (`Some(false)`).
    pub fn get_paused(&self) -> Option<bool> {
        self.paused
    }

    /// Whether this change opens (`Some(true)`) or closes (`Some(false)`).
    pub fn get_open(&self) -> Option<bool> {
        self.open
    }

    /// Whether this change ends every slot on closing.
    pub fn ends_slots(&self) -> bool {
        self.end_slots && self.open == Some(false)
    }

    /// Whether this change changes nothing.
    pub fn is_empty(&self) -> bool {
        self.capacity.is_none()
            && self.admission_rate.is_none()
            && self.paused.is_none()
            && self.open.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_sets_only_its_fields() {
        let base = RoomSettings::from_policy(&RoomPolicy::new("r", 5).with_admission_rate(Some(3)));
        assert_eq!(
            base,
            RoomSettings {
                capacity: 5,
                admission_rate: Some(3),
                paused: false,
                open: true
            }
        );
        let changed = base.with(&SettingsChange::new().paused(true));
        assert_eq!((changed.capacity, changed.paused), (5, true));
        let unlimited = base.with(&SettingsChange::new().admission_rate(Some(0)));
        assert_eq!(unlimited.admission_rate, None, "0 means no limit");
        assert_eq!(base.with(&SettingsChange::new().capacity(0)).capacity, 1);
        assert!(!SettingsChange::new().end_slots().ends_slots());
        assert!(SettingsChange::new().open(false).end_slots().ends_slots());
    }
}
