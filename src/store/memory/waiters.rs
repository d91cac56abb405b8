//! The waiters of a room, in one container ([`Waiters`]): the script's `seq` and `line`
//! (`src/store/redis/script/line.lua` holds the rules that read them) and each waiter's last
//! check-in, which the script keeps in its liveness bitmaps (`liveness.lua`). Each waiter's
//! place (a sequence number, with the position and the waiter at a rank in O(log n) from
//! [`Ranks`]) and last check-in epochs (with the oldest found through a queue in epoch order,
//! [`CheckIns`]) are one record, so a waiter's poll is one hash lookup and a rank; a scheduled
//! opening's registrants rank by their draw instead ([`PreQueue`], also O(log n)), ahead of
//! every sequence number, as the script's scores in `[-1, 0)` put them.

use std::collections::{HashMap, HashSet};

use super::keys::Ranks;
use super::liveness::{CheckIns, Epochs};
use super::schedule::PreQueue;
use crate::session::SessionId;
use crate::store::snapshot::{draw_score, Place};

/// Where a record stands in line: nowhere (a stray check-in, only after damage), at a slot of
/// [`Waiters::line`] (which holds its sequence number), or in the pre-queue by its draw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Spot {
    #[default]
    None,
    Slot(usize),
    Draw(u64),
}

/// A waiter's one record: a place in line and a last check-in, either of which can be missing
/// in a damaged room (the Redis line and liveness bitmaps are keys of their own).
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    spot: Spot,
    seen: Option<Epochs>,
    /// When the place was taken (for the oldest wait); `None` if unknown.
    joined: Option<u64>,
}

/// The waiters of a room: the script's `seq`, `line` and liveness.
///
/// Places: a sequence number each, handed out one by one and never changed (the queue cookie
/// carries it: [`Place::Seq`], and a gateway places it in its snapshot). The line is a vector
/// of `(sequence number, session)` in order of arrival, indexed by *slot*; positions come from
/// [`Ranks`] over the slots: the position of a slot is the number of places at or before it.
/// Joining appends a slot and sets its bit, leaving clears the bit (O(log n) each). Slots of
/// people who left stay as cleared bits, so when the slots outnumber twice the line (plus a
/// constant), the line is compacted and the slots renumbered (the sequence numbers stay) and the
/// ranks rebuilt in O(n): at most once per n joins or n/2 departures, O(1) amortised per call.
///
/// Check-ins: the last epochs in each record; per turn epoch, how many records were last seen
/// in it (for the silent count, exact); and a queue of `(abandon epoch, session)` appended to
/// when a record's abandon epoch changes (once per epoch per waiter, not per poll), in epoch
/// order, for the sweep of the oldest. A queue entry is current while the record says the same
/// epoch; outdated ones are dropped when they reach the front, and the queue is compacted when
/// it outgrows twice the check-ins (amortised O(1) per check-in). The room's time is read under
/// its lock, so epochs only go back if the clock does: then an entry can sit behind later ones
/// and be swept late, never early.
#[derive(Debug, Default)]
pub(super) struct Waiters {
    entries: HashMap<SessionId, Entry>,
    /// Records with a place.
    places: usize,
    /// Last sequence number handed out (the script's `seq` key).
    last_seq: u64,
    /// `(sequence number, session)` by slot, in order of arrival; cleared slots are stale.
    line: Vec<(u64, SessionId)>,
    ranks: Ranks,
    live: CheckIns,
    /// The pre-queue: registrants before a scheduled opening, by draw (ties by session id, as
    /// Redis orders equal scores by member), all ahead of the sequence numbers, for good: at the
    /// opening nothing moves (the script's scores say the same).
    pre: PreQueue,
    /// When the pre-queue's first registrant arrived (the script's arrival note at score -1):
    /// a registrant's wait counts from then, whatever their draw.
    pre_since: Option<u64>,
}

/// Slack before a renumbering or a compaction, so small lines do not redo them on every call.
const SLACK: usize = 64;

impl Waiters {
    /// Waiters with a place in line.
    pub(super) fn len(&self) -> usize {
        self.places
    }

    pub(super) fn is_empty(&self) -> bool {
        self.places == 0
    }

    /// Waiters with a sequence number (not in the pre-queue).
    fn sequenced(&self) -> usize {
        self.places - self.pre.len()
    }

    /// The first in line.
    pub(super) fn head(&self) -> Option<SessionId> {
        match self.pre.first() {
            Some((_, s)) => Some(s),
            None => self.ranks.select(0).map(|slot| self.line[slot].1),
        }
    }

    /// The line score of the waiter at 0-based `rank`: a registrant's draw score, or a
    /// sequence number. O(log n).
    pub(super) fn score_at(&self, rank: u64) -> Option<f64> {
        let pre = self.pre.len() as u64;
        if rank < pre {
            return self.pre.select(rank).map(draw_score);
        }
        let slot = self.ranks.select(rank - pre)?;
        Some(self.line[slot].0 as f64)
    }

    /// The line score of the waiter at 0-based `rank`, and their last check-in (`None`: none
    /// recorded, which only damage makes). O(log n).
    pub(super) fn at(&self, rank: u64) -> Option<(f64, Option<Epochs>)> {
        let pre = self.pre.len() as u64;
        let (score, session) = if rank < pre {
            let (draw, session) = self.pre.select_entry(rank)?;
            (draw_score(draw), session)
        } else {
            let slot = self.ranks.select(rank - pre)?;
            let (seq, session) = self.line[slot];
            (seq as f64, session)
        };
        Some((score, self.seen(session)))
    }

    /// The 1-based position of `s`, if in line (the store asks [`touch`](Self::touch)).
    #[cfg(test)]
    pub(super) fn position(&self, s: SessionId) -> Option<u64> {
        let entry = self.entries.get(&s)?;
        self.place_of(entry.spot, s).map(|(position, _)| position)
    }

    /// The position and the place of a record at `spot`.
    fn place_of(&self, spot: Spot, s: SessionId) -> Option<(u64, Place)> {
        match spot {
            Spot::Slot(slot) => Some((self.rank(slot), Place::Seq(self.line[slot].0))),
            Spot::Draw(draw) => Some((self.pre.rank(draw, s), Place::Drawn)),
            Spot::None => None,
        }
    }

    /// Checks `s` in at `at` if it has a place, and returns its position and place: a waiter's
    /// poll, in one lookup. Creates nothing for a session without a place.
    pub(super) fn touch(&mut self, s: SessionId, at: Epochs) -> Option<(u64, Place)> {
        let entry = self.entries.get_mut(&s)?;
        if entry.spot == Spot::None {
            return None;
        }
        self.live.record(&mut entry.seen, s, at);
        let spot = entry.spot;
        self.compact_if_needed();
        self.place_of(spot, s)
    }

    /// Whether anyone in line holds a sequence number (joined after an opening, or without a
    /// draw): a pre-queue then registers by sequence number too, never ahead of them.
    pub(super) fn has_sequenced(&self) -> bool {
        self.sequenced() > 0
    }

    /// Registers `s` in the pre-queue with `draw` (if it has no place yet), arriving at `t`.
    pub(crate) fn push_pre(&mut self, s: SessionId, draw: u64, t: u64) {
        let entry = self.entries.entry(s).or_default();
        if entry.spot != Spot::None {
            return;
        }
        if self.pre_since.is_none() {
            self.pre_since = Some(t);
        }
        entry.spot = Spot::Draw(draw);
        entry.joined = self.pre_since;
        self.pre.insert(draw, s);
        self.places += 1;
    }

    /// Appends `s` at the back of the line (if it has no place yet), with no time of joining.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn push(&mut self, s: SessionId) {
        self.push_at(s, None);
    }

    /// When the first in line joined, if known.
    pub(super) fn head_joined(&self) -> Option<u64> {
        self.entries.get(&self.head()?)?.joined
    }

    /// Appends `s` at the back of the line (if it has no place yet), joining at `t`.
    pub(super) fn push_at(&mut self, s: SessionId, t: Option<u64>) {
        if self.entries.get(&s).is_some_and(|e| e.spot != Spot::None) {
            return;
        }
        let sequenced = self.sequenced();
        // After the last waiter even if `last_seq` was reset (the Redis script does the same
        // for a lost `seq` key): a newcomer never goes ahead of the line.
        let last = match sequenced.checked_sub(1) {
            Some(k) => self
                .ranks
                .select(k as u64)
                .map_or(0, |slot| self.line[slot].0),
            None => {
                // Nobody with a sequence number: the slots start afresh.
                self.line.clear();
                self.ranks = Ranks::default();
                0
            }
        };
        let seq = self.last_seq.max(last) + 1;
        self.last_seq = seq;
        let slot = self.line.len();
        self.line.push((seq, s));
        self.ranks.set(slot);
        let entry = self.entries.entry(s).or_default();
        entry.spot = Spot::Slot(slot);
        entry.joined = t;
        self.places += 1;
    }

    /// The last check-in of `s`.
    pub(super) fn seen(&self, s: SessionId) -> Option<Epochs> {
        self.entries.get(&s)?.seen
    }

    /// Records a check-in of `s` at `at` (with or without a place: the damage hook and the
    /// healing of a place without a check-in).
    pub(super) fn check_in(&mut self, s: SessionId, at: Epochs) {
        let entry = self.entries.entry(s).or_default();
        self.live.record(&mut entry.seen, s, at);
        self.compact_if_needed();
    }

    /// Takes `s` out of the line and forgets its check-in; `true` if it had a place.
    pub(super) fn remove(&mut self, s: SessionId) -> bool {
        let Some(entry) = self.entries.remove(&s) else {
            return false;
        };
        if let Some(seen) = entry.seen {
            self.live.forget(seen);
        }
        match entry.spot {
            Spot::Slot(slot) => {
                self.drop_place(slot);
                true
            }
            Spot::Draw(draw) => {
                self.pre.remove(draw, s);
                self.places -= 1;
                if self.pre.is_empty() {
                    self.pre_since = None;
                }
                true
            }
            Spot::None => false,
        }
    }

    /// Forgets the check-in of `s`, keeping its place.
    pub(super) fn remove_check_in(&mut self, s: SessionId) {
        if let Some(entry) = self.entries.get_mut(&s) {
            if let Some(seen) = entry.seen.take() {
                self.live.forget(seen);
            }
            if entry.spot == Spot::None {
                self.entries.remove(&s);
            }
        }
    }

    /// Removes up to `max` records (place and check-in) whose abandon epoch is not `alive`,
    /// oldest first, and returns how many; bounded work: at most `4 * max` outdated queue
    /// entries are dropped on the way (the rest wait for the next call or compaction).
    pub(super) fn sweep(&mut self, alive: impl Fn(u64) -> bool, max: u32) -> u32 {
        let (mut swept, mut outdated) = (0, 0);
        while swept < max && outdated < 4 * max {
            let Some(&(epoch, s)) = self.live.queue.front() else {
                break;
            };
            if self.seen(s).map(|e| e.abandon) != Some(epoch) {
                self.live.queue.pop_front();
                outdated += 1;
                continue;
            }
            if alive(epoch) {
                break;
            }
            self.live.queue.pop_front();
            self.remove(s);
            swept += 1;
        }
        swept
    }

    /// How many checked-in records were last seen in a turn epoch before `epoch`: the silent
    /// ones, exactly. O(epochs from `epoch` to the newest check-in's).
    pub(super) fn seen_before(&self, epoch: u64) -> u64 {
        let recent: usize = self.live.per_turn.range(epoch..).map(|(_, n)| n).sum();
        self.live.check_ins.saturating_sub(recent) as u64
    }

    /// Forgets every place, keeping the check-ins and the last sequence number (as a Redis
    /// `DEL` of the line would).
    // Only the damage hook (and the tests) lose parts of a room.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn clear_places(&mut self) {
        self.entries.retain(|_, e| {
            e.spot = Spot::None;
            e.seen.is_some()
        });
        self.line.clear();
        self.pre.clear();
        self.pre_since = None;
        self.ranks = Ranks::default();
        self.places = 0;
    }

    /// Forgets every check-in, keeping the places (as a Redis `DEL` of the bitmaps would).
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn clear_check_ins(&mut self) {
        self.entries.retain(|_, e| {
            e.seen = None;
            e.spot != Spot::None
        });
        self.live = CheckIns::default();
    }

    /// Forgets the last sequence number handed out (as a Redis `DEL` of `seq` would).
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn forget_last_seq(&mut self) {
        self.last_seq = 0;
    }

    fn compact_if_needed(&mut self) {
        // (`per_turn` needs no compaction: an entry goes when its last check-in does.)
        if self.live.queue.len() > 2 * self.live.check_ins + SLACK {
            // Keeps each session's current entry (once), in order.
            let mut kept = HashSet::with_capacity(self.live.check_ins);
            let entries = &self.entries;
            self.live.queue.retain(|&(epoch, s)| {
                entries.get(&s).and_then(|e| e.seen).map(|e| e.abandon) == Some(epoch)
                    && kept.insert(s)
            });
        }
    }

    fn rank(&self, slot: usize) -> u64 {
        // The pre-queue stands ahead of every sequence number.
        self.pre.len() as u64 + self.ranks.rank(slot)
    }

    fn drop_place(&mut self, slot: usize) {
        self.ranks.clear(slot);
        self.places -= 1;
        // (Renumbering is for the slots only: the pre-queue ranks by draw, and the sequence
        // numbers never change.)
        if self.line.len() > 2 * self.sequenced() + SLACK {
            self.renumber();
        }
    }

    /// Compacts the line to the places still in it, in order, renumbers their slots and
    /// rebuilds the ranks.
    fn renumber(&mut self) {
        let old = std::mem::take(&mut self.line);
        let ranks = &self.ranks;
        let entries = &mut self.entries;
        self.line = old
            .into_iter()
            .enumerate()
            .filter(|&(slot, _)| ranks.contains(slot))
            .map(|(_, (seq, s))| (seq, s))
            .collect();
        for (slot, &(_, s)) in self.line.iter().enumerate() {
            if let Some(e) = entries.get_mut(&s) {
                e.spot = Spot::Slot(slot);
            }
        }
        self.ranks = Ranks::ones(self.line.len());
    }
}

#[cfg(test)]
mod tests;
