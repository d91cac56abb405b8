//! The embedded store's two containers, shaped like the Redis sorted sets of the room script so
//! that both stores hold the same facts the same way (and can be damaged the same way in tests):
//!
//! - [`ZSet`]: sessions by score (slots by expiry): O(log n) add, remove, lookup and smallest
//!   score;
//! - [`CheckIns`]: the same facts as a sorted set of check-ins by time, made for a check-in on
//!   every poll: O(1) expected per check-in (a hash map and a queue in time order, no tree to
//!   rebalance), the oldest found by dropping outdated queue entries;
//! - [`Line`]: sessions by sequence number, with the rank (the position in line) in O(log n) from
//!   a bitmap and a Fenwick tree over the sequence numbers, renumbered as the line moves.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use crate::session::SessionId;

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

    // Only the damage hook (and the tests) lose parts of a room.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }
}

/// Each waiter's last check-in, like the script's `seen` sorted set, for the two questions asked
/// of it: "when did this waiter last check in" (at their turn) and "who checked in longest ago"
/// (the sweep of abandoned waiters).
///
/// A sorted tree would cost a removal and an insertion, with cache misses all the way down, on
/// every poll. Instead every check-in is appended to a queue in time order, and the map says
/// which queue entry is a waiter's current one; outdated entries are dropped when they reach the
/// front, and the queue is compacted when it outgrows twice the map (amortised O(1) per
/// check-in). The room's time is read under its lock, so it only goes back if the clock does:
/// then an entry can sit behind later ones and be swept late, never early.
#[derive(Debug, Default)]
pub(super) struct CheckIns {
    at: HashMap<SessionId, u64>,
    queue: VecDeque<(u64, SessionId)>,
}

impl CheckIns {
    /// Records a check-in of `s` at `t`.
    pub(super) fn add(&mut self, s: SessionId, t: u64) {
        if self.at.insert(s, t) == Some(t) {
            // The current entry says the same (same millisecond).
            return;
        }
        self.queue.push_back((t, s));
        if self.queue.len() > 2 * self.at.len() + SLACK {
            self.compact();
        }
    }

    pub(super) fn remove(&mut self, s: SessionId) -> bool {
        self.at.remove(&s).is_some()
    }

    pub(super) fn score(&self, s: SessionId) -> Option<u64> {
        self.at.get(&s).copied()
    }

    /// Removes and returns up to `max` sessions whose check-in is older than `before`, oldest
    /// first; bounded work: at most `4 * max` outdated entries are dropped on the way (the rest
    /// wait for the next call or the next compaction).
    pub(super) fn take_older_than(&mut self, before: u64, max: u32) -> Vec<SessionId> {
        let mut out = Vec::new();
        let mut outdated = 0;
        while out.len() < max as usize && outdated < 4 * max {
            let Some(&(t, s)) = self.queue.front() else {
                break;
            };
            if self.at.get(&s) != Some(&t) {
                self.queue.pop_front();
                outdated += 1;
                continue;
            }
            if t >= before {
                break;
            }
            self.queue.pop_front();
            self.at.remove(&s);
            out.push(s);
        }
        out
    }

    #[cfg(any(test, feature = "testing"))]
    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }

    /// Keeps only each session's current entry, in order.
    fn compact(&mut self) {
        let mut kept = HashSet::with_capacity(self.at.len());
        let at = &self.at;
        self.queue
            .retain(|&(t, s)| at.get(&s) == Some(&t) && kept.insert(s));
    }
}

/// The line: sessions in order of a sequence number, with each one's position in O(log n).
///
/// Positions come from [`Ranks`] over the sequence numbers `base..`: the position of the waiter
/// with sequence number `q` is the number of waiters at or before `q`. Joining sets one bit,
/// leaving clears one (O(log n) each). Sequence numbers of people who left stay as cleared bits,
/// so when the ranks cover more than twice the line (plus a constant), the line is renumbered
/// from `base` = 1 and the ranks rebuilt in O(n): that happens at most once per n joins or n/2
/// departures, O(1) amortised per call.
#[derive(Debug, Default)]
pub(super) struct Line {
    /// Last sequence number handed out (the Redis script's `seq` key).
    last_seq: u64,
    by_seq: BTreeMap<u64, SessionId>,
    seq_of: HashMap<SessionId, u64>,
    ranks: Ranks,
    /// The sequence number of rank slot 0.
    base: u64,
}

/// Slack before a renumbering or a compaction, so small lines do not redo them on every call.
const SLACK: usize = 64;

fn lowbit(i: usize) -> usize {
    i & i.wrapping_neg()
}

impl Line {
    pub(super) fn len(&self) -> usize {
        self.seq_of.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.seq_of.is_empty()
    }

    pub(super) fn contains(&self, s: SessionId) -> bool {
        self.seq_of.contains_key(&s)
    }

    /// The first in line.
    pub(super) fn head(&self) -> Option<SessionId> {
        self.by_seq.first_key_value().map(|(_, &s)| s)
    }

    /// Appends `s` (which must not be in line) at the back.
    pub(super) fn push(&mut self, s: SessionId) {
        debug_assert!(!self.contains(s));
        // After the last waiter even if `last_seq` was reset (the Redis script does the same
        // for a lost `seq` key): a newcomer never goes ahead of the line.
        let last = self.by_seq.last_key_value().map_or(0, |(&q, _)| q);
        let seq = self.last_seq.max(last) + 1;
        self.last_seq = seq;
        if self.by_seq.is_empty() {
            self.ranks = Ranks::default();
            self.base = seq;
        }
        self.ranks.set((seq - self.base) as usize);
        self.by_seq.insert(seq, s);
        self.seq_of.insert(s, seq);
    }

    /// Takes `s` out of the line; `false` if it was not in it.
    pub(super) fn remove(&mut self, s: SessionId) -> bool {
        let Some(seq) = self.seq_of.remove(&s) else {
            return false;
        };
        self.by_seq.remove(&seq);
        self.ranks.clear((seq - self.base) as usize);
        if self.ranks.slots() > 2 * self.len() + SLACK {
            self.renumber();
        }
        true
    }

    /// The 1-based position of `s`, if in line.
    pub(super) fn position(&self, s: SessionId) -> Option<u64> {
        let seq = *self.seq_of.get(&s)?;
        Some(self.ranks.rank((seq - self.base) as usize))
    }

    /// Forgets every place, keeping the last sequence number (as a Redis `DEL` of the line
    /// would).
    // Only the damage hook (and the tests) lose parts of a room.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn clear_places(&mut self) {
        *self = Self {
            last_seq: self.last_seq,
            ..Self::default()
        };
    }

    /// Forgets the last sequence number handed out (as a Redis `DEL` of `seq` would).
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn forget_last_seq(&mut self) {
        self.last_seq = 0;
    }

    /// Renumbers the line 1..=n in order and rebuilds the ranks.
    fn renumber(&mut self) {
        let line = std::mem::take(&mut self.by_seq);
        self.by_seq = line
            .into_values()
            .zip(1u64..)
            .map(|(s, seq)| {
                self.seq_of.insert(s, seq);
                (seq, s)
            })
            .collect();
        let n = self.by_seq.len();
        self.ranks = Ranks::ones(n);
        self.base = 1;
        self.last_seq = n as u64;
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

    /// How many slots the ranks cover.
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

    fn sessions(n: usize) -> Vec<SessionId> {
        (0..n).map(|_| SessionId::random()).collect()
    }

    #[test]
    fn positions_follow_joins_and_departures() {
        let s = sessions(5);
        let mut line = Line::default();
        for &x in &s {
            line.push(x);
        }
        assert_eq!(line.head(), Some(s[0]));
        for (i, &x) in s.iter().enumerate() {
            assert_eq!(line.position(x), Some(i as u64 + 1));
        }
        assert!(line.remove(s[2]));
        assert!(!line.remove(s[2]));
        assert_eq!(line.position(s[2]), None);
        assert_eq!(line.position(s[3]), Some(3));
        assert!(line.remove(s[0]));
        assert_eq!(line.head(), Some(s[1]));
        assert_eq!(line.position(s[4]), Some(3));
        assert_eq!(line.len(), 3);
    }

    #[test]
    fn the_tree_stays_within_twice_the_line() {
        let mut line = Line::default();
        let keep = sessions(10);
        for &x in &keep {
            line.push(x);
        }
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
    }

    #[test]
    fn a_forgotten_sequence_never_puts_a_newcomer_ahead() {
        let s = sessions(3);
        let mut line = Line::default();
        line.push(s[0]);
        line.push(s[1]);
        line.forget_last_seq();
        line.push(s[2]);
        assert_eq!(line.position(s[2]), Some(3));
        line.clear_places();
        assert!(line.is_empty());
        line.push(s[0]);
        assert_eq!(line.position(s[0]), Some(1));
    }

    #[test]
    fn check_ins_sweep_the_oldest_current_ones() {
        let s = sessions(4);
        let mut c = CheckIns::default();
        c.add(s[0], 10);
        c.add(s[1], 20);
        c.add(s[2], 30);
        c.add(s[0], 40); // checks in again: no longer the oldest
        c.add(s[3], 40);
        c.add(s[3], 40); // the same millisecond twice: one entry
        assert_eq!(c.queue.len(), 5);
        assert!(c.remove(s[2]));
        assert_eq!(c.score(s[0]), Some(40));
        assert_eq!(c.take_older_than(35, 100), vec![s[1]]);
        assert_eq!(c.take_older_than(35, 100), vec![]);
        assert_eq!(c.take_older_than(41, 1), vec![s[0]]);
        assert_eq!(c.take_older_than(41, 1), vec![s[3]]);
        assert_eq!(c.score(s[3]), None);
        assert!(c.queue.is_empty());
    }

    #[test]
    fn check_ins_stay_within_twice_the_waiters() {
        let s = sessions(10);
        let mut c = CheckIns::default();
        for t in 0..10_000u64 {
            c.add(s[(t % 10) as usize], t);
            assert!(c.queue.len() <= 2 * 10 + SLACK + 1);
        }
        // A session removed and added again at the same time is not doubled by a compaction.
        for _ in 0..1_000 {
            c.remove(s[0]);
            c.add(s[0], 20_000);
        }
        assert!(c.queue.len() <= 2 * 10 + SLACK + 1);
        let old: Vec<_> = c.take_older_than(u64::MAX, 100);
        assert_eq!(old.len(), 10);
    }

    #[test]
    fn ranks_count_set_slots() {
        let mut r = Ranks::default();
        for k in [0, 5, 63, 64, 200, 1_000] {
            r.set(k);
        }
        r.set(5); // twice: once
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
        ForgetSeq,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => Just(Op::Push),
            4 => any::<usize>().prop_map(Op::Remove),
            1 => Just(Op::ForgetSeq),
        ]
    }

    proptest! {
        /// Against a naive model (a vector in order): the same head, length and position of
        /// every waiter after every step.
        #[test]
        fn line_matches_a_naive_model(ops in prop::collection::vec(op(), 1..400)) {
            let mut line = Line::default();
            let mut model: Vec<SessionId> = Vec::new();
            for op in ops {
                match op {
                    Op::Push => {
                        let s = SessionId::random();
                        line.push(s);
                        model.push(s);
                    }
                    Op::Remove(i) if !model.is_empty() => {
                        let s = model.remove(i % model.len());
                        prop_assert!(line.remove(s));
                    }
                    Op::Remove(_) => prop_assert!(!line.remove(SessionId::random())),
                    Op::ForgetSeq => line.forget_last_seq(),
                }
                prop_assert_eq!(line.len(), model.len());
                prop_assert_eq!(line.head(), model.first().copied());
                for (i, &s) in model.iter().enumerate() {
                    prop_assert_eq!(line.position(s), Some(i as u64 + 1));
                }
            }
        }
    }
}
