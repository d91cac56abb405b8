//! The embedded store's containers, holding the same facts as the Redis sorted sets of the room
//! script (so both stores can be damaged, and heal, the same way in tests):
//!
//! - [`ZSet`]: sessions by score (slots by expiry): O(log n) add, remove, lookup and smallest
//!   score;
//! - [`Waiters`]: the script's `seq`, `line` and liveness bitmaps: each waiter's place (a
//!   sequence number, with the position and the waiter at a rank in O(log n) from a bitmap and a
//!   Fenwick tree) and last check-in epochs (with the oldest found through a queue in epoch
//!   order), in one record per waiter, so a waiter's poll is one hash lookup and a rank; a scheduled opening's registrants rank by their draw instead
//!   ([`PreQueue`], also O(log n)), ahead of every sequence number, as the script's scores in
//!   `[-1, 0)` put them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use crate::session::SessionId;
use crate::store::snapshot::{draw_score, Place};

/// Sessions by score, like a Redis sorted set.
#[derive(Debug, Default)]
pub(super) struct ZSet {
    score: HashMap<SessionId, u64>,
    order: BTreeSet<(u64, SessionId)>,
}

impl ZSet {
    /// Adds `s` with `score`, or moves it there.
    pub(super) fn add(&mut self, s: SessionId, score: u64) {
        if let Some(old) = self.score.insert(s, score) {
            self.order.remove(&(old, s));
        }
        self.order.insert((score, s));
    }

    pub(super) fn remove(&mut self, s: SessionId) -> bool {
        match self.score.remove(&s) {
            Some(old) => {
                self.order.remove(&(old, s));
                true
            }
            None => false,
        }
    }

    pub(super) fn score(&self, s: SessionId) -> Option<u64> {
        self.score.get(&s).copied()
    }

    /// The member with the smallest score.
    pub(super) fn first(&self) -> Option<(u64, SessionId)> {
        self.order.first().copied()
    }

    pub(super) fn len(&self) -> usize {
        self.score.len()
    }

    /// Forgets every member (closing with `end_slots`, and the damage hook).
    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }
}

/// A waiter's last check-in, to the epoch of each liveness rule
/// ([`LivenessRule`](crate::store::LivenessRule)): the turn's and the sweep's. Epochs, not
/// times, as the Redis store keeps them (one bitmap per epoch): both stores count a waiter
/// alive or silent alike. A record keeps the latest epochs it was seen in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Epochs {
    /// The epoch of [`LivenessRule::for_turn`](crate::store::LivenessRule::for_turn).
    pub(super) turn: u64,
    /// The epoch of [`LivenessRule::for_abandon`](crate::store::LivenessRule::for_abandon).
    pub(super) abandon: u64,
}

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
    live: Liveness,
    /// The pre-queue: registrants before a scheduled opening, by draw (ties by session id, as
    /// Redis orders equal scores by member), all ahead of the sequence numbers, for good: at the
    /// opening nothing moves (the script's scores say the same).
    pre: PreQueue,
    /// When the pre-queue's first registrant arrived (the script's arrival note at score -1):
    /// a registrant's wait counts from then, whatever their draw.
    pre_since: Option<u64>,
}

/// The check-ins' side of [`Waiters`], apart so a record and these can be borrowed together.
#[derive(Debug, Default)]
struct Liveness {
    /// Records with a check-in.
    check_ins: usize,
    /// Records last seen in each turn epoch (an entry per epoch holding one).
    per_turn: BTreeMap<u64, usize>,
    /// `(abandon epoch, session)`, in epoch order, for the sweep.
    queue: VecDeque<(u64, SessionId)>,
}

impl Liveness {
    /// Records a check-in of `entry` (session `s`) in `at`, keeping the later epochs.
    fn record(&mut self, entry: &mut Entry, s: SessionId, at: Epochs) {
        let new = match entry.seen {
            Some(old) => Epochs {
                turn: old.turn.max(at.turn),
                abandon: old.abandon.max(at.abandon),
            },
            None => at,
        };
        match entry.seen.replace(new) {
            Some(old) if old == new => {}
            Some(old) => {
                if old.turn != new.turn {
                    self.uncount(old.turn);
                    *self.per_turn.entry(new.turn).or_default() += 1;
                }
                if old.abandon != new.abandon {
                    self.queue.push_back((new.abandon, s));
                }
            }
            None => {
                self.check_ins += 1;
                *self.per_turn.entry(new.turn).or_default() += 1;
                self.queue.push_back((new.abandon, s));
            }
        }
    }

    /// Forgets a record's check-in `seen` (the queue entry goes when it reaches the front).
    fn forget(&mut self, seen: Epochs) {
        self.check_ins -= 1;
        self.uncount(seen.turn);
    }

    fn uncount(&mut self, turn: u64) {
        if let std::collections::btree_map::Entry::Occupied(mut e) = self.per_turn.entry(turn) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
    }
}

/// Slack before a renumbering or a compaction, so small lines do not redo them on every call.
const SLACK: usize = 64;

fn lowbit(i: usize) -> usize {
    i & i.wrapping_neg()
}

/// In a 1-based Fenwick tree over counts, the 0-based index of the element holding the 0-based
/// `k`-th counted item, and how many items of that element come before it (a descent from the
/// largest power of two: O(log n)). Past the end if `k` is not below the total.
fn fenwick_select(tree: &[u32], mut k: u64) -> (usize, u64) {
    let n = tree.len().saturating_sub(1);
    let mut pos = 0;
    let mut step = if n == 0 { 0 } else { 1 << n.ilog2() };
    while step > 0 {
        let next = pos + step;
        if next <= n && u64::from(tree[next]) <= k {
            pos = next;
            k -= u64::from(tree[next]);
        }
        step >>= 1;
    }
    (pos, k)
}

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
        self.live.record(entry, s, at);
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
        self.live.record(entry, s, at);
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
        self.live = Liveness::default();
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

/// Bits of a draw that pick its bucket in [`PreQueue`]: 16 384 buckets, about 61 registrants
/// each in a pre-queue of a million.
const PRE_BUCKET_BITS: u32 = 14;
const PRE_BUCKETS: usize = 1 << PRE_BUCKET_BITS;

/// The pre-queue of a scheduled opening: registrants by draw, with the rank of each in
/// O(log n): the draws are uniform (keyed hashes), so a Fenwick tree over the count of each
/// bucket of draws (the top [`PRE_BUCKET_BITS`] bits) gives the registrants of the lower
/// buckets, and the rest is a walk through the registrant's own bucket (a few dozen entries
/// for a million registrants). Insertion and removal are O(log n). Nothing is ever renumbered
/// or moved, at the opening or after: bounded work per call, whatever the pre-queue's size.
#[derive(Debug, Default)]
struct PreQueue {
    order: BTreeSet<(u64, SessionId)>,
    /// 1-based Fenwick tree over the buckets' counts; empty while the pre-queue is.
    counts: Vec<u32>,
}

impl PreQueue {
    fn bucket(draw: u64) -> usize {
        let shift = crate::config::DRAW_BITS - PRE_BUCKET_BITS;
        // A draw is below 2^52; anything above (never made by the crate) goes in the last.
        usize::try_from(draw >> shift).map_or(PRE_BUCKETS - 1, |b| b.min(PRE_BUCKETS - 1))
    }

    fn len(&self) -> usize {
        self.order.len()
    }

    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    fn first(&self) -> Option<(u64, SessionId)> {
        self.order.first().copied()
    }

    /// The draw of the registrant at 0-based rank `k`: the bucket holding it by a descent of
    /// the Fenwick tree, then a walk through that bucket. O(log n).
    fn select(&self, k: u64) -> Option<u64> {
        if k >= self.order.len() as u64 {
            return None;
        }
        let (bucket, within) = fenwick_select(&self.counts, k);
        let start = (bucket as u64) << (crate::config::DRAW_BITS - PRE_BUCKET_BITS);
        self.order
            .range((start, SessionId::from_bytes([0; 16]))..)
            .nth(within as usize)
            .map(|&(draw, _)| draw)
    }

    fn insert(&mut self, draw: u64, s: SessionId) {
        if self.counts.is_empty() {
            self.counts = vec![0; PRE_BUCKETS + 1];
        }
        if self.order.insert((draw, s)) {
            let mut i = Self::bucket(draw) + 1;
            while i < self.counts.len() {
                self.counts[i] += 1;
                i += lowbit(i);
            }
        }
    }

    fn remove(&mut self, draw: u64, s: SessionId) {
        if self.order.remove(&(draw, s)) {
            let mut i = Self::bucket(draw) + 1;
            while i < self.counts.len() {
                self.counts[i] -= 1;
                i += lowbit(i);
            }
            if self.order.is_empty() {
                // An idle room keeps no tree.
                self.counts = Vec::new();
            }
        }
    }

    /// The 1-based rank of `(draw, s)`: those of the lower buckets, then its own bucket's up to
    /// it.
    fn rank(&self, draw: u64, s: SessionId) -> u64 {
        let bucket = Self::bucket(draw);
        let mut below = 0u64;
        let mut i = bucket;
        while i > 0 {
            below += u64::from(self.counts[i]);
            i -= lowbit(i);
        }
        let start = (bucket as u64) << (crate::config::DRAW_BITS - PRE_BUCKET_BITS);
        let within = self
            .order
            .range((start, SessionId::from_bytes([0; 16]))..=(draw, s))
            .count();
        below + within as u64
    }

    /// Forgets every registrant (the damage hook's lost line).
    #[cfg(any(test, feature = "testing"))]
    fn clear(&mut self) {
        *self = Self::default();
    }
}

/// A set of slots 0.. with the rank of each (set slots at or before it) in O(log n): a bitmap
/// of 64 slots per word, and a Fenwick tree (binary indexed tree) over the words' counts. The
/// tree is 64 times smaller than one over the slots (1 600 entries for 100 000 waiters), so a
/// rank touches a few cache lines: one word and a walk through a tree that stays in cache.
#[derive(Debug, Default)]
struct Ranks {
    words: Vec<u64>,
    /// 1-based; `tree[i]` is the count of words `i - lowbit(i) .. i` (0-based); `tree[0]` is
    /// unused.
    tree: Vec<u32>,
}

impl Ranks {
    /// All of slots `0..n` set.
    fn ones(n: usize) -> Self {
        let mut words = vec![u64::MAX; n / 64];
        if !n.is_multiple_of(64) {
            words.push(u64::MAX >> (64 - n % 64));
        }
        // The linear construction: each node passes its sum on to its parent.
        let mut tree = vec![0u32; words.len() + 1];
        for i in 1..tree.len() {
            tree[i] += words[i - 1].count_ones();
            let parent = i + lowbit(i);
            if parent < tree.len() {
                tree[parent] += tree[i];
            }
        }
        Self { words, tree }
    }

    /// Whether slot `k` is set.
    fn contains(&self, k: usize) -> bool {
        self.words
            .get(k / 64)
            .is_some_and(|word| word & (1u64 << (k % 64)) != 0)
    }

    /// The slot of the set slot at 0-based rank `k` (`k` set slots before it), if any. O(log n).
    fn select(&self, k: u64) -> Option<usize> {
        if self.tree.len() <= 1 {
            return None;
        }
        let (w, within) = fenwick_select(&self.tree, k);
        let mut word = *self.words.get(w)?;
        for _ in 0..within {
            word &= word.wrapping_sub(1);
        }
        (word != 0).then(|| w * 64 + word.trailing_zeros() as usize)
    }

    /// How many slots the ranks cover.
    #[cfg(test)]
    fn slots(&self) -> usize {
        self.words.len() * 64
    }

    fn set(&mut self, k: usize) {
        let (w, bit) = (k / 64, 1u64 << (k % 64));
        while self.words.len() <= w {
            self.push_word();
        }
        if self.words[w] & bit == 0 {
            self.words[w] |= bit;
            self.add(w + 1, |c| c + 1);
        }
    }

    fn clear(&mut self, k: usize) {
        let (w, bit) = (k / 64, 1u64 << (k % 64));
        if self.words.get(w).is_some_and(|word| word & bit != 0) {
            self.words[w] &= !bit;
            self.add(w + 1, |c| c - 1);
        }
    }

    /// Set slots among `0..=k`.
    fn rank(&self, k: usize) -> u64 {
        let w = k / 64;
        let Some(word) = self.words.get(w) else {
            return self.prefix(self.words.len());
        };
        let within = word & (u64::MAX >> (63 - k % 64));
        self.prefix(w) + u64::from(within.count_ones())
    }

    /// The count of words `0..w`.
    fn prefix(&self, mut i: usize) -> u64 {
        let mut sum = 0u64;
        while i > 0 {
            sum += u64::from(self.tree[i]);
            i -= lowbit(i);
        }
        sum
    }

    fn add(&mut self, mut i: usize, f: impl Fn(u32) -> u32) {
        while i < self.tree.len() {
            self.tree[i] = f(self.tree[i]);
            i += lowbit(i);
        }
    }

    /// Appends an empty word: its node covers words `(i - lowbit(i), i]` (1-based), the sum of
    /// which is the difference of two prefix sums of the words already there.
    fn push_word(&mut self) {
        if self.tree.is_empty() {
            self.tree.push(0);
        }
        let i = self.tree.len();
        let below = i - lowbit(i);
        let sum = self.prefix(i - 1) - self.prefix(below);
        self.words.push(0);
        self.tree.push(sum as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Both epochs at `t` (the tests' rules are one epoch per unit).
    fn at(t: u64) -> Epochs {
        Epochs {
            turn: t,
            abandon: t,
        }
    }

    impl Waiters {
        /// The sweep of those last seen before epoch `before`.
        fn sweep_older_than(&mut self, before: u64, max: u32) -> u32 {
            self.sweep(|epoch| epoch >= before, max)
        }
    }

    fn sessions(n: usize) -> Vec<SessionId> {
        (0..n).map(|_| SessionId::random()).collect()
    }

    fn line_of(s: &[SessionId]) -> Waiters {
        let mut w = Waiters::default();
        for (t, &x) in s.iter().enumerate() {
            w.push(x);
            w.check_in(x, at(t as u64));
        }
        w
    }

    #[test]
    fn positions_follow_joins_and_departures() {
        let s = sessions(5);
        let mut line = line_of(&s);
        assert_eq!(line.head(), Some(s[0]));
        for (i, &x) in s.iter().enumerate() {
            assert_eq!(line.position(x), Some(i as u64 + 1));
        }
        assert!(line.remove(s[2]));
        assert!(!line.remove(s[2]));
        assert_eq!(line.position(s[2]), None);
        assert_eq!(line.touch(s[3], at(10)).map(|p| p.0), Some(3));
        assert_eq!(line.seen(s[3]), Some(at(10)));
        assert!(line.remove(s[0]));
        assert_eq!(line.head(), Some(s[1]));
        assert_eq!(line.position(s[4]), Some(3));
        assert_eq!(line.len(), 3);
        assert_eq!(line.touch(SessionId::random(), at(10)), None);
    }

    /// Sequence numbers never change (the queue cookie carries them), however often the slots
    /// are renumbered; `score_at` and `head` follow the line.
    #[test]
    fn sequence_numbers_are_kept_through_renumbering() {
        let s = sessions(1_000);
        let mut w = line_of(&s);
        let seq_of = |w: &Waiters, x: SessionId| match w.entries[&x].spot {
            Spot::Slot(slot) => w.line[slot].0,
            other => panic!("{other:?}"),
        };
        let before: Vec<u64> = s.iter().map(|&x| seq_of(&w, x)).collect();
        assert!(before.windows(2).all(|p| p[1] == p[0] + 1));
        // Every other one leaves, then the first half: several renumberings.
        let mut kept: Vec<usize> = (0..s.len()).filter(|i| i % 2 == 1).collect();
        for i in (0..s.len()).step_by(2) {
            assert!(w.remove(s[i]));
        }
        for &i in &kept[..250] {
            assert!(w.remove(s[i]));
        }
        kept.drain(..250);
        assert_eq!(w.len(), kept.len());
        for (rank, &i) in kept.iter().enumerate() {
            assert_eq!(seq_of(&w, s[i]), before[i], "#{i} kept its sequence number");
            assert_eq!(w.position(s[i]), Some(rank as u64 + 1));
            assert_eq!(w.score_at(rank as u64), Some(before[i] as f64));
        }
        assert_eq!(w.score_at(kept.len() as u64), None);
        assert_eq!(w.head(), Some(s[kept[0]]));
        assert!(w.line.len() <= 2 * w.len() + SLACK);
        // A newcomer comes after the last, with the next number.
        let x = SessionId::random();
        w.push(x);
        assert_eq!(seq_of(&w, x), before[999] + 1);
    }

    #[test]
    fn the_ranks_stay_within_twice_the_line() {
        let keep = sessions(10);
        let mut line = line_of(&keep);
        // A long churn behind the same ten: people join at the back and leave.
        for _ in 0..10_000 {
            let x = SessionId::random();
            line.push(x);
            assert!(line.remove(x));
            assert!(line.ranks.slots() <= 2 * line.len() + SLACK + 64);
        }
        // And a head that moves on: everyone is served in turn.
        let more = sessions(1_000);
        for &x in &more {
            line.push(x);
        }
        for (i, &x) in keep.iter().chain(&more).enumerate() {
            assert_eq!(line.head(), Some(x), "served in order, #{i}");
            assert!(line.remove(x));
            assert!(line.ranks.slots() <= 2 * line.len() + SLACK + 64);
        }
        assert!(line.is_empty());
        assert!(line.entries.is_empty(), "no record left behind");
    }

    #[test]
    fn damaged_parts_are_independent() {
        let s = sessions(3);
        let mut line = line_of(&s[..2]);
        line.forget_last_seq();
        line.push(s[2]);
        assert_eq!(line.position(s[2]), Some(3), "never ahead of the line");
        line.remove_check_in(s[0]);
        assert_eq!((line.position(s[0]), line.seen(s[0])), (Some(1), None));
        line.clear_places();
        assert!(line.is_empty());
        assert_eq!(line.seen(s[1]), Some(at(1)), "check-ins stay");
        line.push(s[0]);
        assert_eq!(line.position(s[0]), Some(1));
        line.clear_check_ins();
        assert_eq!((line.position(s[0]), line.seen(s[0])), (Some(1), None));
        assert_eq!(line.entries.len(), 1);
    }

    #[test]
    fn the_sweep_takes_the_oldest_current_check_ins() {
        let s = sessions(4);
        let mut w = Waiters::default();
        for &x in &s {
            w.push(x);
        }
        w.check_in(s[0], at(10));
        w.check_in(s[1], at(20));
        w.check_in(s[2], at(30));
        w.check_in(s[0], at(40)); // checks in again: no longer the oldest
        w.check_in(s[3], at(40));
        w.check_in(s[3], at(40)); // the same millisecond twice: one entry
        assert_eq!(w.live.queue.len(), 5);
        assert!(w.remove(s[2]));
        assert_eq!(w.sweep_older_than(35, 100), 1);
        assert_eq!(w.position(s[1]), None, "swept: place and check-in");
        assert_eq!(w.sweep_older_than(35, 100), 0);
        assert_eq!(w.sweep_older_than(41, 1), 1);
        assert_eq!(w.sweep_older_than(41, 1), 1);
        assert!(w.is_empty() && w.live.queue.is_empty() && w.entries.is_empty());
    }

    #[test]
    fn the_queue_stays_within_twice_the_check_ins() {
        let s = sessions(10);
        let mut w = line_of(&s);
        for t in 0..10_000u64 {
            w.touch(s[(t % 10) as usize], at(t));
            assert!(w.live.queue.len() <= 2 * 10 + SLACK + 1);
        }
        // A session removed and added again at the same time is not doubled by a compaction.
        for _ in 0..1_000 {
            w.remove_check_in(s[0]);
            w.check_in(s[0], at(20_000));
        }
        assert!(w.live.queue.len() <= 2 * 10 + SLACK + 1);
        assert_eq!(w.sweep_older_than(u64::MAX, 100), 10);
    }

    #[test]
    fn the_pre_queue_ranks_by_draw_ahead_of_the_line() {
        let mut w = Waiters::default();
        let later = sessions(3);
        // Draws spread over the range, and a cluster in one bucket (ties broken by session).
        let mut model: Vec<(u64, SessionId)> = (0..3_000u64)
            .map(|i| {
                let draw = if i % 10 == 0 {
                    7
                } else {
                    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 12
                };
                (draw, SessionId::random())
            })
            .collect();
        for &(draw, s) in &model {
            w.push_pre(s, draw, 5);
            w.check_in(s, at(5));
        }
        for &s in &later {
            w.push_at(s, Some(6));
        }
        model.sort();
        let check = |w: &Waiters, model: &[(u64, SessionId)]| {
            for (i, &(draw, s)) in model.iter().enumerate() {
                assert_eq!(w.position(s), Some(i as u64 + 1), "registrant #{i}");
                assert_eq!(w.score_at(i as u64), Some(draw_score(draw)), "#{i}'s score");
            }
            for (i, &s) in later.iter().enumerate() {
                assert_eq!(
                    w.position(s),
                    Some((model.len() + i) as u64 + 1),
                    "later #{i}"
                );
            }
            assert_eq!(w.head(), model.first().map(|m| m.1).or(Some(later[0])));
            assert_eq!(w.len(), model.len() + later.len());
        };
        check(&w, &model);
        assert_eq!(
            w.head_joined(),
            Some(5),
            "a registrant waits since the first registration"
        );
        // Leaving (and a registrant re-registering: no second place), from anywhere.
        for i in (0..model.len()).rev().step_by(3) {
            let (_, s) = model.remove(i);
            assert!(w.remove(s));
        }
        w.push_pre(model[0].1, 1, 9);
        check(&w, &model);
        // Until the pre-queue is gone: the line is the later arrivals, in turn.
        for (_, s) in std::mem::take(&mut model) {
            assert_eq!(w.head(), Some(s));
            assert!(w.remove(s));
        }
        check(&w, &model);
        assert!(w.pre.counts.is_empty(), "an empty pre-queue keeps no tree");
    }

    #[test]
    fn ranks_count_set_slots() {
        let mut r = Ranks::default();
        for k in [0, 5, 63, 64, 200, 1_000] {
            r.set(k);
        }
        r.set(5); // twice: once
        assert_eq!(
            (0..7).map(|k| r.select(k)).collect::<Vec<_>>(),
            vec![
                Some(0),
                Some(5),
                Some(63),
                Some(64),
                Some(200),
                Some(1_000),
                None
            ]
        );
        assert!(r.contains(63) && !r.contains(62));
        assert_eq!(r.rank(0), 1);
        assert_eq!(r.rank(4), 1);
        assert_eq!(r.rank(5), 2);
        assert_eq!(r.rank(63), 3);
        assert_eq!(r.rank(64), 4);
        assert_eq!(r.rank(999), 5);
        assert_eq!(r.rank(1_000), 6);
        assert_eq!(r.rank(5_000), 6, "past the end: everything");
        r.clear(64);
        r.clear(64);
        r.clear(9_999);
        assert_eq!(r.rank(1_000), 5);
        for n in [0, 1, 63, 64, 65, 1_000] {
            let o = Ranks::ones(n);
            for k in 0..n {
                assert_eq!(o.rank(k), k as u64 + 1, "ones({n}), rank({k})");
            }
        }
    }

    #[test]
    fn zset_orders_by_score() {
        let s = sessions(3);
        let mut z = ZSet::default();
        z.add(s[0], 5);
        z.add(s[1], 3);
        z.add(s[2], 9);
        assert_eq!(z.first(), Some((3, s[1])));
        z.add(s[1], 10);
        assert_eq!(z.first(), Some((5, s[0])));
        assert_eq!(z.score(s[1]), Some(10));
        assert!(z.remove(s[0]));
        assert!(!z.remove(s[0]));
        assert_eq!(z.len(), 2);
        z.clear();
        assert_eq!(z.first(), None);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push,
        /// Remove the waiter at this index (modulo the line's length).
        Remove(usize),
        /// Check in the waiter at this index, one millisecond later.
        Touch(usize),
        /// Sweep those not checked in for this many milliseconds.
        Sweep(u8),
        ForgetSeq,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => Just(Op::Push),
            3 => any::<usize>().prop_map(Op::Remove),
            3 => any::<usize>().prop_map(Op::Touch),
            1 => any::<u8>().prop_map(Op::Sweep),
            1 => Just(Op::ForgetSeq),
        ]
    }

    proptest! {
        /// Against a naive model (a vector in order, with each one's last check-in): the same
        /// head, length, position and check-in of every waiter after every step, and the sweep
        /// takes exactly those checked in before the cutoff (with a bound high enough).
        #[test]
        fn waiters_match_a_naive_model(ops in prop::collection::vec(op(), 1..400)) {
            let mut w = Waiters::default();
            let mut model: Vec<(SessionId, u64)> = Vec::new();
            let mut now = 0u64;
            for op in ops {
                now += 1;
                match op {
                    Op::Push => {
                        let s = SessionId::random();
                        w.push(s);
                        w.check_in(s, at(now));
                        model.push((s, now));
                    }
                    Op::Remove(i) if !model.is_empty() => {
                        let (s, _) = model.remove(i % model.len());
                        prop_assert!(w.remove(s));
                    }
                    Op::Remove(_) => prop_assert!(!w.remove(SessionId::random())),
                    Op::Touch(i) if !model.is_empty() => {
                        let i = i % model.len();
                        model[i].1 = now;
                        prop_assert_eq!(w.touch(model[i].0, at(now)).map(|p| p.0), Some(i as u64 + 1));
                    }
                    Op::Touch(_) => {}
                    Op::Sweep(age) => {
                        let before = now.saturating_sub(u64::from(age));
                        let gone = model.iter().filter(|(_, t)| *t < before).count();
                        model.retain(|(_, t)| *t >= before);
                        prop_assert_eq!(w.sweep_older_than(before, 1_000) as usize, gone);
                    }
                    Op::ForgetSeq => w.forget_last_seq(),
                }
                prop_assert_eq!(w.len(), model.len());
                prop_assert_eq!(w.head(), model.first().map(|m| m.0));
                for (i, &(s, t)) in model.iter().enumerate() {
                    prop_assert_eq!(w.position(s), Some(i as u64 + 1));
                    prop_assert_eq!(w.seen(s), Some(at(t)));
                }
                prop_assert_eq!(w.entries.len(), model.len(), "no stray records");
            }
        }
    }
}
