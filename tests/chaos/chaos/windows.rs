//! What one injected fault was (`Window`), and when it may have lost acknowledged writes,
//! reordered the line or had the slots rebuilt: the spans the checks allow for.

use super::faults::{key_loss_frees_slots, key_loss_reorders, rebuild_ms, Damage, Fault};

/// Replication is asynchronous: a write the primary acknowledged this long before it died,
/// hung or was replaced may not have reached the replica that takes over. On loopback the
/// primary writes the stream to the replica in the same event-loop turn as the answer to the
/// client; what the replica has not read yet when it is promoted (or when a killed primary's
/// socket is reset) is lost. The injector measures how long the replica takes to catch up
/// (`Target::catch_up`, round trips included: 1–5 ms, up to about 400 ms seen on a busy 2-core
/// machine) and the run fails as `thin-run` if that ever exceeds this.
pub(super) const REPL_LAG_MS: u64 = 1_000;

/// One injected fault: from `start` until the store was healthy again at `end` (ms).
#[derive(Clone, Debug)]
pub(super) struct Window {
    pub(super) fault: Fault,
    pub(super) start: u64,
    pub(super) end: u64,
    /// For `DelKey` and `Corrupt`: the key's short name. For `Failover`: `planned` or `crash`.
    pub(super) key: Option<&'static str>,
    /// For `Corrupt`: what was done.
    pub(super) damage: Option<Damage>,
    /// The sentinel names another primary at the end than at the start: writes acknowledged
    /// from `start - REPL_LAG_MS` to `lost_until` may be lost (see `loss_windows`).
    pub(super) switched: bool,
    /// When the harness first saw, after the sentinel named another primary, that the old one
    /// could take no more writes: dead, a replica, or without a replica (`min-replicas-to-write`
    /// then refuses writes).
    pub(super) lost_until: u64,
}

impl Window {
    /// The fault may have reordered the line: a key whose loss does so deleted, or damaged so
    /// that the library deletes it.
    pub(super) fn reorders(&self) -> bool {
        match self.fault {
            Fault::DelKey => self.key.is_some_and(key_loss_reorders),
            Fault::Corrupt => self.damage.as_ref().is_some_and(|d| d.reorders),
            _ => false,
        }
    }

    /// The fault may have made the store forget slots: a key that holds them deleted, or a
    /// rebuild of the slots (`rebuilds`, from a damaged `active` or `granted`) that may have been
    /// under way ended by the loss of the settings key, which holds it (deleted, or damaged and
    /// deleted by the repair): the store then counts only the slots claimed again so far. A
    /// damaged `active` or `granted` itself frees none: the slots are rebuilt.
    pub(super) fn frees_slots(&self, rebuilds: &[(u64, u64)]) -> bool {
        let ends_rebuild = match self.fault {
            Fault::DelKey => self.key == Some("settings"),
            Fault::Corrupt => self.damage.as_ref().is_some_and(|d| d.ends_rebuild),
            _ => false,
        };
        (self.fault == Fault::DelKey && self.key.is_some_and(key_loss_frees_slots))
            || ends_rebuild
                && rebuilds
                    .iter()
                    .any(|&(from, to)| self.start <= to && from <= self.end)
    }
}

/// When a rebuild of the slots may run: from each damage of `active` or `granted` until
/// `rebuild_ms` after its window.
pub(super) fn rebuild_windows(windows: &[Window]) -> Vec<(u64, u64)> {
    windows
        .iter()
        .filter(|w| w.damage.as_ref().is_some_and(|d| d.rebuilds))
        .map(|w| (w.start, w.end + rebuild_ms()))
        .collect()
}

/// When writes acknowledged by a primary may have been lost with it: from `REPL_LAG_MS` before
/// each fault that ended with another primary until the old primary was seen unable to take
/// writes. After that nothing acknowledged is lost: the old primary takes no writes, and the
/// new one takes writes only with a replica in sync (`min-replicas-to-write 1`).
pub(super) fn loss_windows(windows: &[Window]) -> Vec<(u64, u64)> {
    windows
        .iter()
        .filter(|w| w.switched)
        .map(|w| (w.start.saturating_sub(REPL_LAG_MS), w.lost_until))
        .collect()
}

/// Whether a write made between `from` and `to` may have been lost in a failover.
pub(super) fn maybe_lost(losses: &[(u64, u64)], from: u64, to: u64) -> bool {
    losses.iter().any(|&(lo, hi)| from <= hi && lo <= to)
}
