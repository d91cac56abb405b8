//! Which liveness bits a gateway has already set in the room's current epochs, so that its
//! `sync` does not set them again with every poll it answered.
//!
//! A waiter is alive by a ring's rule when both their Bloom bits are set in an epoch's bitmap
//! that still counts (`script/liveness.lua`). An epoch is long (the abandon ring's a quarter of
//! an hour by default, the turn ring's a quarter of `queue_ttl`) and a waiter polls every few
//! seconds, so most of a sync's check-ins used to set bits that were set already: at two
//! million waiters the script's `BITFIELD`s and the Lua building their arguments were most of
//! Redis's time.
//!
//! Per room and ring, this keeps a copy of the bits this gateway's own syncs set in the ring's
//! current epoch, as the replies confirmed them (the epoch is the script's: the reply names it,
//! with its width, the bitmaps' size and the server's run id). A session whose two bits are both
//! in the copy needs no write: the store's bitmap has both bits set already, so whether it is
//! written again changes no answer the store gives about anyone. This holds even when the bits
//! were set by other sessions (a Bloom collision): the test is on the bits, not on the session.
//! The gateway still sends every session, in three lists (`both`, `turn_only`, `neither`) with
//! the epochs it believes current; the script writes a list into a ring unless the ring's
//! current epoch is the one named *and* the ring's key still holds that epoch (another caller's
//! epochs of another width, in a rolling change of `queue_ttl`, `abandon_after` or the schedule,
//! may have taken the key and made it anew). So a belief gone stale costs only the writes it
//! would have made anyway.
//!
//! What else could make the copy wrong is a write the store acknowledged and then lost: a
//! failover before the replica had it, a restart without persistence. Either way another
//! server process answers next, with another run id in the epochs' names, and everything is
//! written again; the copy is also dropped whenever this store's breaker saw a failure since its
//! bits were confirmed (`Breaker::troubles`). A bitmap evicted or deleted in between is the
//! script's case of a lost bitmap: everyone counts as seen in that epoch. And a waiter missing
//! one epoch's bits is still alive by the epochs before it while that one lasts (each rule keeps
//! more than one), and written again in the next.
//!
//! The copy costs one bit per Bloom bit and ring: 8 MiB for a room of two million at most.
//! Rooms whose bitmaps are larger than [`MAX_COPIED_BITS`] are not copied: every check-in is
//! written, as before.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// The largest bitmap (in bits) copied: 2^26, 8 MiB per ring (a line of up to four million).
pub(crate) const MAX_COPIED_BITS: u64 = 1 << 26;

/// The rings, in the script's order (`R.rings`): the turn ring, then the abandon ring.
const RINGS: usize = 2;

/// A sync's check-ins of sessions already found in line, sorted by what this gateway has set:
/// each session's two Bloom offsets.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct CheckInPlan {
    /// Not set in the abandon ring's current epoch: written into both rings.
    pub(crate) both: Vec<(u32, u32)>,
    /// Set in the abandon ring's current epoch, not in the turn ring's.
    pub(crate) turn_only: Vec<(u32, u32)>,
    /// Set in both current epochs.
    pub(crate) neither: Vec<(u32, u32)>,
    /// Behind the sync's turn horizon (no turn check-in), not set in the abandon ring's
    /// current epoch: written into the abandon ring.
    pub(crate) abandon_only: Vec<(u32, u32)>,
    /// Behind the horizon, set in the abandon ring's current epoch.
    pub(crate) behind_set: Vec<(u32, u32)>,
    /// The epoch each ring's copy holds (as the script named it), `b""` for none.
    pub(crate) named: [Vec<u8>; RINGS],
}

/// One ring's copy: the epoch it holds and its bits.
#[derive(Default)]
struct RingCopy {
    epoch: Vec<u8>,
    words: Vec<u64>,
}

impl RingCopy {
    fn has(&self, x: u32, y: u32) -> bool {
        let bit = |o: u32| {
            self.words
                .get(o as usize / 64)
                .is_some_and(|w| w & (1 << (o % 64)) != 0)
        };
        bit(x) && bit(y)
    }

    fn set(&mut self, o: u32) {
        if let Some(w) = self.words.get_mut(o as usize / 64) {
            *w |= 1 << (o % 64);
        }
    }
}

/// One room's copies, valid while the store's breaker counts the same troubles.
struct RoomCopy {
    bits: u64,
    troubles: u64,
    rings: [RingCopy; RINGS],
}

/// The copies of every room, shared by a store's clones.
#[derive(Default)]
pub(crate) struct CheckedIn {
    rooms: Mutex<HashMap<String, RoomCopy>>,
}

impl CheckedIn {
    /// Sorts `known` and `behind` (each session's Bloom offsets in bitmaps of `bits` bits; the
    /// latter behind the sync's turn horizon) by what this gateway has set in `room`, given the
    /// breaker's `troubles` now: a copy older than a failure is dropped, and then everyone is
    /// in `both` or `abandon_only`.
    pub(crate) fn plan(
        &self,
        room: &str,
        bits: u64,
        troubles: u64,
        known: impl Iterator<Item = (u32, u32)>,
        behind: impl Iterator<Item = (u32, u32)>,
    ) -> CheckInPlan {
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        if rooms
            .get(room)
            .is_some_and(|c| c.troubles != troubles || c.bits != bits)
        {
            rooms.remove(room);
        }
        let mut plan = CheckInPlan::default();
        let Some(copy) = rooms.get(room) else {
            plan.both = known.collect();
            plan.abandon_only = behind.collect();
            return plan;
        };
        let [turn, abandon] = &copy.rings;
        for (x, y) in known {
            if !abandon.has(x, y) {
                plan.both.push((x, y));
            } else if !turn.has(x, y) {
                plan.turn_only.push((x, y));
            } else {
                plan.neither.push((x, y));
            }
        }
        for (x, y) in behind {
            if abandon.has(x, y) {
                plan.behind_set.push((x, y));
            } else {
                plan.abandon_only.push((x, y));
            }
        }
        plan.named = [turn.epoch.clone(), abandon.epoch.clone()];
        plan
    }

    /// A sync of `room` planned at `troubles.0` succeeded, and the reply named `epochs` as the
    /// rings' current ones: every offset of `written` is set in both (written by this sync, or
    /// by an earlier one in the same epoch), and every offset of `abandon_only` in the abandon
    /// ring's. Not recorded if the breaker saw trouble since the plan (`troubles.1`, its count
    /// now), nor for bitmaps above [`MAX_COPIED_BITS`].
    pub(crate) fn confirm(
        &self,
        room: &str,
        bits: u64,
        (troubles, troubles_now): (u64, u64),
        epochs: [Vec<u8>; RINGS],
        written: impl Iterator<Item = (u32, u32)> + Clone,
        abandon_only: impl Iterator<Item = (u32, u32)>,
    ) {
        if troubles != troubles_now || bits > MAX_COPIED_BITS || epochs.iter().any(Vec::is_empty) {
            return;
        }
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let copy = rooms.entry(room.to_owned()).or_insert_with(|| RoomCopy {
            bits,
            troubles,
            rings: Default::default(),
        });
        if copy.troubles != troubles || copy.bits != bits {
            *copy = RoomCopy {
                bits,
                troubles,
                rings: Default::default(),
            };
        }
        for (ring, epoch) in copy.rings.iter_mut().zip(epochs) {
            if ring.epoch != epoch || ring.words.is_empty() {
                ring.epoch = epoch;
                ring.words = vec![0; bits.div_ceil(64) as usize];
            }
            for (x, y) in written.clone() {
                ring.set(x);
                ring.set(y);
            }
        }
        let abandon = &mut copy.rings[RINGS - 1];
        for (x, y) in abandon_only {
            abandon.set(x);
            abandon.set(y);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BITS: u64 = 1 << 16;

    fn epochs(turn: &str, abandon: &str) -> [Vec<u8>; 2] {
        [turn.as_bytes().to_vec(), abandon.as_bytes().to_vec()]
    }

    /// A sync of room "r" without trouble confirmed `written` in these epochs.
    fn confirmed(c: &CheckedIn, turn: &str, abandon: &str, written: &[(u32, u32)]) {
        c.confirm(
            "r",
            BITS,
            (0, 0),
            epochs(turn, abandon),
            written.iter().copied(),
            None.into_iter(),
        );
    }

    #[test]
    fn a_session_is_written_once_per_epoch_of_each_ring() {
        let c = CheckedIn::default();
        let (a, b) = ((1, 2), (300, 4_000));
        let plan = c.plan("r", BITS, 0, [a, b].into_iter(), None.into_iter());
        assert_eq!(
            plan.both,
            vec![a, b],
            "nothing copied yet: every bit is written"
        );
        assert_eq!(plan.named, [Vec::<u8>::new(), Vec::new()]);
        confirmed(&c, "7:1:65536", "3:2:65536", &[a]);
        let plan = c.plan("r", BITS, 0, [a, b].into_iter(), None.into_iter());
        assert_eq!((plan.both, plan.neither), (vec![b], vec![a]));
        assert_eq!(plan.named, epochs("7:1:65536", "3:2:65536"));
        // The turn ring's epoch turned: its copy starts again; the abandon ring's stays.
        confirmed(&c, "8:1:65536", "3:2:65536", &[b]);
        let plan = c.plan("r", BITS, 0, [a, b].into_iter(), None.into_iter());
        assert_eq!((plan.turn_only, plan.neither), (vec![a], vec![b]));
        // Another room knows nothing of this one's.
        assert_eq!(
            c.plan("s", BITS, 0, [a].into_iter(), None.into_iter()).both,
            vec![a]
        );
    }

    #[test]
    fn the_test_is_on_the_bits_so_a_collision_skips_only_a_write_that_changes_nothing() {
        let c = CheckedIn::default();
        confirmed(&c, "1:1:65536", "1:2:65536", &[(5, 9), (700, 11)]);
        // Both bits of (5, 700) are set, by two other sessions: so they are in the store too.
        let plan = c.plan(
            "r",
            BITS,
            0,
            [(5, 700), (5, 12)].into_iter(),
            None.into_iter(),
        );
        assert_eq!(plan.neither, vec![(5, 700)]);
        assert_eq!(plan.both, vec![(5, 12)], "one bit of two is not enough");
    }

    #[test]
    fn any_trouble_drops_the_copy() {
        let c = CheckedIn::default();
        let a = (1, 2);
        // Trouble between the plan and the reply: nothing recorded.
        c.confirm(
            "r",
            BITS,
            (3, 4),
            epochs("1:1:65536", "1:2:65536"),
            [a].into_iter(),
            None.into_iter(),
        );
        assert_eq!(
            c.plan("r", BITS, 4, [a].into_iter(), None.into_iter()).both,
            vec![a]
        );
        c.confirm(
            "r",
            BITS,
            (4, 4),
            epochs("1:1:65536", "1:2:65536"),
            [a].into_iter(),
            None.into_iter(),
        );
        assert_eq!(
            c.plan("r", BITS, 4, [a].into_iter(), None.into_iter())
                .neither,
            vec![a]
        );
        // Trouble since: the copy is gone, not only ignored.
        assert_eq!(
            c.plan("r", BITS, 5, [a].into_iter(), None.into_iter()).both,
            vec![a]
        );
        assert_eq!(
            c.plan("r", BITS, 4, [a].into_iter(), None.into_iter()).both,
            vec![a]
        );
        // Another bitmap size: another copy.
        c.confirm(
            "r",
            BITS,
            (4, 4),
            epochs("1:1:65536", "1:2:65536"),
            [a].into_iter(),
            None.into_iter(),
        );
        assert_eq!(
            c.plan("r", BITS * 2, 4, [a].into_iter(), None.into_iter())
                .both,
            vec![a]
        );
    }

    #[test]
    fn large_bitmaps_or_a_reply_without_epochs_are_not_copied() {
        let c = CheckedIn::default();
        let a = (1, 2);
        let big = MAX_COPIED_BITS * 2;
        c.confirm(
            "r",
            big,
            (0, 0),
            epochs("1:1:x", "1:2:x"),
            [a].into_iter(),
            None.into_iter(),
        );
        assert_eq!(
            c.plan("r", big, 0, [a].into_iter(), None.into_iter()).both,
            vec![a]
        );
        confirmed(&c, "", "1:2:65536", &[a]);
        assert_eq!(
            c.plan("r", BITS, 0, [a].into_iter(), None.into_iter()).both,
            vec![a]
        );
    }

    #[test]
    fn sessions_behind_the_horizon_are_copied_in_the_abandon_ring_only() {
        let c = CheckedIn::default();
        let (near, behind) = ((1, 2), (300, 4_000));
        let plan = c.plan("r", BITS, 0, [near].into_iter(), [behind].into_iter());
        assert_eq!((plan.both, plan.abandon_only), (vec![near], vec![behind]));
        c.confirm(
            "r",
            BITS,
            (0, 0),
            epochs("7:1:65536", "3:2:65536"),
            [near].into_iter(),
            [behind].into_iter(),
        );
        // Both set in the abandon ring now; the one behind not in the turn ring's copy.
        let plan = c.plan(
            "r",
            BITS,
            0,
            [near, behind].into_iter(),
            [behind].into_iter(),
        );
        assert_eq!(plan.neither, vec![near]);
        assert_eq!(
            plan.turn_only,
            vec![behind],
            "no turn bits were written for it"
        );
        assert_eq!(plan.behind_set, vec![behind]);
        assert!(plan.both.is_empty() && plan.abandon_only.is_empty());
    }
}
