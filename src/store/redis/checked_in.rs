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
//! The copy holds the offsets themselves while they are few, and a bitmap of the ring's size
//! once that is smaller ([`Bits`]): a gateway among forty in front of a line of ten million
//! sets half a million bits an epoch, about 5 MiB as offsets where the bitmap would take 20
//! MiB; one gateway alone in front of it ends with the bitmap. So a copy costs at most about
//! the ring's bitmap (32 MiB at the largest `max_queue_len`), usually far less, and every room
//! is copied whatever its size. A third copy holds the bits written early into the abandon
//! ring's next epoch (`early.rs`), and becomes the abandon ring's copy when that epoch begins.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use super::early::{epoch_number, later_than, Window};
use super::protocol::bloom_offsets;
use crate::session::SessionId;

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
    bits: Bits,
}

/// The bits of one epoch's copy: the set offsets while they take less memory than the bitmap
/// (at most one offset per [`DENSE_AT`] bits of the ring), then the bitmap itself.
enum Bits {
    Few(HashSet<u32>),
    Dense(Vec<u64>),
}

impl Default for Bits {
    fn default() -> Self {
        Bits::Few(HashSet::new())
    }
}

/// A copy turns into a bitmap once it holds more than one offset per this many bits of the
/// ring: a set offset takes about 8 bytes in a `HashSet<u32>` (4, a control byte and the
/// table's slack), so at 1 in 128 the offsets take about half the bitmap's bytes, and the
/// largest set (grown to a table of the next power of two) stays near the bitmap's size.
const DENSE_AT: u64 = 128;

impl Bits {
    fn get(&self, o: u32) -> bool {
        match self {
            Bits::Few(set) => set.contains(&o),
            Bits::Dense(words) => words
                .get(o as usize / 64)
                .is_some_and(|w| w & (1 << (o % 64)) != 0),
        }
    }

    /// Sets offset `o` of a ring of `size` bits.
    fn set(&mut self, o: u32, size: u64) {
        match self {
            Bits::Few(set) => {
                set.insert(o);
                if set.len() as u64 > size / DENSE_AT {
                    let mut words = vec![0u64; size.div_ceil(64) as usize];
                    for &o in set.iter() {
                        set_word(&mut words, o);
                    }
                    *self = Bits::Dense(words);
                }
            }
            Bits::Dense(words) => set_word(words, o),
        }
    }
}

fn set_word(words: &mut [u64], o: u32) {
    if let Some(w) = words.get_mut(o as usize / 64) {
        *w |= 1 << (o % 64);
    }
}

impl RingCopy {
    fn has(&self, x: u32, y: u32) -> bool {
        self.bits.get(x) && self.bits.get(y)
    }
}

/// One room's copies, valid while the store's breaker counts the same troubles.
struct RoomCopy {
    bits: u64,
    troubles: u64,
    rings: [RingCopy; RINGS],
    /// The abandon ring's next epoch, as far as early check-ins wrote it (`early.rs`).
    early: RingCopy,
}

impl RoomCopy {
    /// `room`'s copy in `rooms`, for bitmaps of `bits` at `troubles`: made anew if it was of
    /// another size or older than a failure.
    fn of<'m>(
        rooms: &'m mut HashMap<String, RoomCopy>,
        room: &str,
        bits: u64,
        troubles: u64,
    ) -> &'m mut RoomCopy {
        let copy = rooms
            .entry(room.to_owned())
            .or_insert_with(|| RoomCopy::new(bits, troubles));
        if copy.troubles != troubles || copy.bits != bits {
            *copy = RoomCopy::new(bits, troubles);
        }
        copy
    }

    fn new(bits: u64, troubles: u64) -> Self {
        Self {
            bits,
            troubles,
            rings: Default::default(),
            early: RingCopy::default(),
        }
    }

    /// The abandon ring's epoch turned into the one the early copy holds: that copy becomes
    /// the abandon ring's, if `holds` says so of the two copies' epochs (the early one's, the
    /// abandon ring's).
    fn promote_early(&mut self, holds: impl FnOnce(&[u8], &[u8]) -> bool) {
        let abandon = &mut self.rings[RINGS - 1];
        if !self.early.epoch.is_empty() && holds(&self.early.epoch, &abandon.epoch) {
            *abandon = std::mem::take(&mut self.early);
        }
    }
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

    /// `behind` (sessions behind a sync's turn horizon, to be looked up), split into those
    /// whose bits this gateway has not set in `room`'s abandon ring's current epoch, and those
    /// it has: the script looks the latter up only, and their bits go with the found ones'
    /// ([`plan`](Self::plan)'s `behind_set`, written only if that epoch has ended). Most of a
    /// steady sync's look-ups are of sessions whose own abandon epoch turned (`found.rs`) while
    /// the ring's did not, and their bits need no second write. A copy older than a failure
    /// is no copy (as in `plan`): then none are split off.
    pub(crate) fn split_set(
        &self,
        room: &str,
        bits: u64,
        troubles: u64,
        behind: Vec<SessionId>,
    ) -> (Vec<SessionId>, Vec<SessionId>) {
        let rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(copy) = rooms
            .get(room)
            .filter(|c| c.troubles == troubles && c.bits == bits)
        else {
            return (behind, Vec::new());
        };
        let abandon = &copy.rings[RINGS - 1];
        behind.into_iter().partition(|s| {
            let (x, y) = bloom_offsets(s.as_bytes(), bits);
            !abandon.has(x, y)
        })
    }

    /// A sync of `room` planned at `troubles.0` succeeded, and the reply named `epochs` as the
    /// rings' current ones: every offset of `written` is set in both (written by this sync, or
    /// by an earlier one in the same epoch), and every offset of `abandon_only` in the abandon
    /// ring's. Not recorded if the breaker saw trouble since the plan (`troubles.1`, its count
    /// now).
    pub(crate) fn confirm(
        &self,
        room: &str,
        bits: u64,
        (troubles, troubles_now): (u64, u64),
        epochs: [Vec<u8>; RINGS],
        written: impl Iterator<Item = (u32, u32)> + Clone,
        abandon_only: impl Iterator<Item = (u32, u32)>,
    ) {
        if troubles != troubles_now || epochs.iter().any(Vec::is_empty) {
            return;
        }
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let copy = RoomCopy::of(&mut rooms, room, bits, troubles);
        // The reply's abandon epoch is the one written early, on the same server: a sync
        // planned just before the turn, answered after it.
        copy.promote_early(|early, abandon| early == epochs[RINGS - 1] && abandon != early);
        let mut current = [true; RINGS];
        for ((ring, epoch), current) in copy.rings.iter_mut().zip(epochs).zip(&mut current) {
            if ring.epoch != epoch {
                // A copy of a later epoch is kept, and the reply's bits (set in the epoch
                // before it) are not put in it: one this gateway's clock promoted a moment
                // before the server's epoch turned (`early`), whose bits the store holds.
                if later_than(&ring.epoch, &epoch) {
                    *current = false;
                    continue;
                }
                ring.epoch = epoch;
                ring.bits = Bits::default();
            }
            for (x, y) in written.clone() {
                ring.bits.set(x, bits);
                ring.bits.set(y, bits);
            }
        }
        if current[RINGS - 1] {
            let abandon = &mut copy.rings[RINGS - 1];
            for (x, y) in abandon_only {
                abandon.bits.set(x, bits);
                abandon.bits.set(y, bits);
            }
        }
    }

    /// Early check-ins (`early.rs`) for a sync of `room` at `at`: first, if the abandon ring's
    /// epoch has turned by the gateway's clock into the one the early copy holds, that copy
    /// becomes the abandon ring's (so this sync names the new epoch, whose bits are set);
    /// then, within the window, the sessions of `found` due to be written into the next epoch
    /// and not written there yet. A copy older than a failure is dropped, as in `plan`.
    pub(crate) fn early<'a>(
        &self,
        room: &str,
        bits: u64,
        troubles: u64,
        at: Window,
        found: impl Iterator<Item = &'a SessionId>,
    ) -> Vec<(u32, u32)> {
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        if rooms
            .get(room)
            .is_some_and(|c| c.troubles != troubles || c.bits != bits)
        {
            rooms.remove(room);
        }
        // By the number alone: the script writes again if the server is another (its run id
        // is in the name the sync sends back, `epoch_holds`).
        let now = Some(at.epoch());
        let copy = rooms.get_mut(room).map(|copy| {
            copy.promote_early(|early, abandon| {
                epoch_number(early) == now && epoch_number(abandon) != now
            });
            &*copy
        });
        if !at.is_open() {
            return Vec::new();
        }
        let next = Some(at.epoch() + 1);
        let written = copy
            .map(|c| &c.early)
            .filter(|early| epoch_number(&early.epoch) == next);
        found
            .filter(|s| at.due(s))
            .map(|s| bloom_offsets(s.as_bytes(), bits))
            .filter(|&(x, y)| !written.is_some_and(|w| w.has(x, y)))
            .collect()
    }

    /// A sync of `room` planned at `troubles.0` succeeded and wrote `written` early into the
    /// abandon ring's epoch the reply named `epoch` (empty: the script wrote nothing early, its
    /// clock outside the window). Not recorded if the breaker saw trouble since.
    pub(crate) fn confirm_early(
        &self,
        room: &str,
        bits: u64,
        (troubles, troubles_now): (u64, u64),
        epoch: Vec<u8>,
        written: impl Iterator<Item = (u32, u32)>,
    ) {
        if troubles != troubles_now || epoch.is_empty() {
            return;
        }
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let copy = RoomCopy::of(&mut rooms, room, bits, troubles);
        if copy.early.epoch != epoch {
            copy.early = RingCopy {
                epoch,
                bits: Bits::default(),
            };
        }
        for (x, y) in written {
            copy.early.bits.set(x, bits);
            copy.early.bits.set(y, bits);
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

    /// A sync of room "r" without trouble wrote `written` early into the epoch `name`.
    fn wrote_early(c: &CheckedIn, name: &str, written: &[(u32, u32)]) {
        c.confirm_early(
            "r",
            BITS,
            (0, 0),
            name.as_bytes().to_vec(),
            written.iter().copied(),
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
    fn sessions_looked_up_with_their_abandon_bits_set_are_split_off() {
        let c = CheckedIn::default();
        let ids: Vec<SessionId> = (0..4).map(|_| SessionId::random()).collect();
        let offsets: Vec<(u32, u32)> = ids
            .iter()
            .map(|s| bloom_offsets(s.as_bytes(), BITS))
            .collect();
        let (write, set) = c.split_set("r", BITS, 0, ids.clone());
        assert_eq!(
            (write.len(), set.len()),
            (4, 0),
            "no copy: every one written"
        );
        // Two set behind the horizon (the abandon ring only).
        c.confirm(
            "r",
            BITS,
            (0, 0),
            epochs("1:1:65536", "1:2:65536"),
            None.into_iter(),
            offsets[..2].iter().copied(),
        );
        let (write, set) = c.split_set("r", BITS, 0, ids.clone());
        assert_eq!((write, set), (ids[2..].to_vec(), ids[..2].to_vec()));
        // A copy older than a failure, or of another size, is none.
        assert!(c.split_set("r", BITS, 1, ids.clone()).1.is_empty());
        assert!(c.split_set("r", BITS * 2, 0, ids.clone()).1.is_empty());
        assert!(c.split_set("s", BITS, 0, ids).1.is_empty());
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
    fn a_reply_without_epochs_is_not_copied() {
        let c = CheckedIn::default();
        let a = (1, 2);
        confirmed(&c, "", "1:2:65536", &[a]);
        assert_eq!(
            c.plan("r", BITS, 0, [a].into_iter(), None.into_iter()).both,
            vec![a]
        );
    }

    #[test]
    fn a_copy_of_few_offsets_becomes_a_bitmap_and_answers_the_same() {
        let c = CheckedIn::default();
        // A ring of 2^20 bits turns dense past 8 192 offsets: write 6 000 sessions (up to 12 000
        // offsets) in two syncs of the same epochs, and ask about them and others each time.
        let bits: u64 = 1 << 20;
        let session = |i: u32| ((i * 7_919) % bits as u32, (i * 104_729 + 13) % bits as u32);
        let confirm = |range: std::ops::Range<u32>| {
            c.confirm(
                "r",
                bits,
                (0, 0),
                epochs("1:1:x", "1:2:x"),
                range.map(session),
                None.into_iter(),
            )
        };
        let planned = |range: std::ops::Range<u32>| {
            let plan = c.plan("r", bits, 0, range.map(session), None.into_iter());
            (plan.both.len(), plan.neither.len())
        };
        confirm(0..3_000);
        assert!(matches!(
            c.rooms.lock().unwrap()["r"].rings[0].bits,
            Bits::Few(_)
        ));
        assert_eq!(planned(0..3_000), (0, 3_000));
        // Most of the others are not set (a pair of bits can be, by collisions).
        let (unset, _) = planned(3_000..6_000);
        assert!(
            unset > 2_900,
            "{unset} of 3 000 unwritten sessions look written"
        );
        confirm(3_000..6_000);
        assert!(matches!(
            c.rooms.lock().unwrap()["r"].rings[0].bits,
            Bits::Dense(_)
        ));
        assert_eq!(planned(0..6_000), (0, 6_000), "nothing written is lost");
        let (unset_now, _) = planned(6_000..9_000);
        assert!(
            unset_now > 2_800,
            "{unset_now} of 3 000 unwritten sessions look written"
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

    #[test]
    fn sessions_written_early_count_as_set_once_the_epoch_begins() {
        const WIDTH: u64 = 900_000;
        let c = CheckedIn::default();
        let at = |now_ms| Window {
            now_ms,
            width_ms: WIDTH,
        };
        // Two sessions of Bloom offsets (1, 2) and (300, 4 000) in bitmaps of `BITS`.
        let (sa, sb) = (
            SessionId::from_bytes([0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0, 0]),
            SessionId::from_bytes([0, 0, 1, 44, 0, 0, 15, 160, 0, 0, 0, 9, 0, 0, 0, 0]),
        );
        let (a, b) = ((1, 2), (300, 4_000));
        assert_eq!(
            (
                bloom_offsets(sa.as_bytes(), BITS),
                bloom_offsets(sb.as_bytes(), BITS)
            ),
            (a, b)
        );
        let epoch = 2_000_000 * WIDTH;
        confirmed(&c, "7:1:65536", "2000000:900000:65536:x", &[a, b]);
        // Before the window none is due; at its end both are (four fifths in, every moment).
        let early = |now| c.early("r", BITS, 0, at(now), [sa, sb].iter());
        assert!(early(epoch + WIDTH / 4).is_empty());
        assert_eq!(early(epoch + WIDTH - 1), vec![a, b]);
        // The reply says `a` went into the next epoch: only `b` is due again.
        wrote_early(&c, "2000001:900000:65536:x", &[a]);
        assert_eq!(early(epoch + WIDTH - 1), vec![b]);
        // A reply that wrote nothing early (its clock outside the window) records nothing.
        c.confirm_early("r", BITS, (0, 0), Vec::new(), [b].into_iter());
        // Trouble between the plan and the reply: nothing recorded either.
        c.confirm_early(
            "r",
            BITS,
            (0, 1),
            b"2000001:900000:65536:x".to_vec(),
            [b].into_iter(),
        );
        assert_eq!(early(epoch + WIDTH - 1), vec![b]);
        // The epoch began by the gateway's clock: what was written early is the abandon ring's
        // copy, named as the new epoch, and nothing is due.
        assert!(early(epoch + WIDTH + 10).is_empty());
        let plan = c.plan("r", BITS, 0, [a, b].into_iter(), None.into_iter());
        assert_eq!(plan.named[1], b"2000001:900000:65536:x".to_vec());
        assert_eq!((plan.neither, plan.both), (vec![a], vec![b]));
    }

    #[test]
    fn a_copy_promoted_by_a_clock_ahead_of_the_servers_is_kept() {
        const WIDTH: u64 = 900_000;
        let c = CheckedIn::default();
        let sa = SessionId::from_bytes([0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0, 0]);
        let (a, b) = ((1, 2), (300, 4_000));
        confirmed(&c, "7:1:65536", "4:900000:65536:x", &[a, b]);
        wrote_early(&c, "5:900000:65536:x", &[a]);
        // This gateway's clock says epoch 5 began: its copy is promoted.
        let at = Window {
            now_ms: 5 * WIDTH + 100,
            width_ms: WIDTH,
        };
        assert!(c.early("r", BITS, 0, at, [sa].iter()).is_empty());
        // The server's has not turned yet: its reply names epoch 4, where it set `b` again.
        confirmed(&c, "7:1:65536", "4:900000:65536:x", &[b]);
        let plan = c.plan("r", BITS, 0, [a, b].into_iter(), None.into_iter());
        assert_eq!(plan.named[1], b"5:900000:65536:x".to_vec(), "the copy kept");
        assert_eq!(
            (plan.neither, plan.both),
            (vec![a], vec![b]),
            "epoch 4's bits not taken as epoch 5's"
        );
        // Epochs of another width (abandon_after changed) are numbered otherwise: the reply's
        // epoch 3 of 30 minutes replaces the copy, though 5 > 3.
        confirmed(&c, "7:1:65536", "3:1800000:65536:x", &[b]);
        let plan = c.plan("r", BITS, 0, [a, b].into_iter(), None.into_iter());
        assert_eq!(plan.named[1], b"3:1800000:65536:x".to_vec());
        assert_eq!((plan.neither, plan.both), (vec![b], vec![a]));
    }

    #[test]
    fn a_reply_naming_the_early_epoch_as_current_promotes_the_copy() {
        let c = CheckedIn::default();
        let (a, b) = ((1, 2), (300, 4_000));
        confirmed(&c, "7:1:65536", "4:900000:65536:x", &[a, b]);
        wrote_early(&c, "5:900000:65536:x", &[a]);
        // A sync planned before the turn (by a clock a little behind the server's) is
        // answered in the new epoch: the early copy becomes the abandon ring's.
        confirmed(&c, "8:1:65536", "5:900000:65536:x", &[]);
        let plan = c.plan("r", BITS, 0, [a, b].into_iter(), None.into_iter());
        assert_eq!((plan.turn_only, plan.both), (vec![a], vec![b]));
        assert_eq!(plan.named[1], b"5:900000:65536:x".to_vec());
        // An early copy of an epoch that never came (another run id answered) is not taken.
        wrote_early(&c, "6:900000:65536:x", &[b]);
        confirmed(&c, "8:1:65536", "6:900000:65536:y", &[]);
        let plan = c.plan("r", BITS, 0, [a, b].into_iter(), None.into_iter());
        assert_eq!(plan.both, vec![a, b]);
    }
}
