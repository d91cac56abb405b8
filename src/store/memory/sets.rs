//! The embedded store's two containers, shaped like the Redis sorted sets of the room script so
//! that both stores hold the same facts the same way (and can be damaged the same way in tests):
//!
//! - [`ZSet`]: sessions by score (check-ins by time, slots by expiry): O(log n) add, remove,
//!   lookup and smallest score;
//! - [`Line`]: sessions by sequence number, with the rank (the position in line) in O(log n) from
//!   a Fenwick tree over the sequence numbers, compacted as the line moves.

use std::collections::{BTreeMap, BTreeSet, HashMap};

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

/// The line: sessions in order of a sequence number, with each one's position in O(log n).
///
/// Positions come from a Fenwick tree (binary indexed tree) of 0/1 over the sequence numbers
/// `base..`: the position of the waiter with sequence number `q` is the prefix sum up to `q`.
/// Joining appends to the tree (O(log n)), leaving clears one entry (O(log n)). Sequence numbers
/// of people who left stay in the tree as zeros, so when the tree has grown to more than twice
/// the line (plus a constant), the line is renumbered 1..=n and the tree rebuilt in O(n): that
/// happens at most once per n joins or n/2 departures, O(1) amortised per call.
#[derive(Debug, Default)]
pub(super) struct Line {
    /// Last sequence number handed out (the Redis script's `seq` key).
    last_seq: u64,
    by_seq: BTreeMap<u64, SessionId>,
    seq_of: HashMap<SessionId, u64>,
    /// 1-based Fenwick tree; `tree[i]` covers sequence numbers `base + i - lowbit(i) ..= base +
    /// i - 1`. `tree[0]` is unused.
    tree: Vec<u32>,
    /// The sequence number at tree index 1.
    base: u64,
}

/// Slack before a renumbering, so small lines do not renumber on every departure.
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
            self.tree = vec![0];
            self.base = seq;
        }
        let index = (seq - self.base + 1) as usize;
        if index < self.tree.len() {
            // A reused sequence number (after `forget_last_seq`): its index is already there.
            let mut i = index;
            while i < self.tree.len() {
                self.tree[i] += 1;
                i += lowbit(i);
            }
        } else {
            // Indices for sequence numbers never in the tree are appended as zeros.
            while self.tree.len() < index {
                self.append(0);
            }
            self.append(1);
        }
        self.by_seq.insert(seq, s);
        self.seq_of.insert(s, seq);
    }

    /// Takes `s` out of the line; `false` if it was not in it.
    pub(super) fn remove(&mut self, s: SessionId) -> bool {
        let Some(seq) = self.seq_of.remove(&s) else {
            return false;
        };
        self.by_seq.remove(&seq);
        let mut i = (seq - self.base + 1) as usize;
        while i < self.tree.len() {
            self.tree[i] -= 1;
            i += lowbit(i);
        }
        if self.tree.len() - 1 > 2 * self.len() + SLACK {
            self.renumber();
        }
        true
    }

    /// The 1-based position of `s`, if in line.
    pub(super) fn position(&self, s: SessionId) -> Option<u64> {
        let seq = *self.seq_of.get(&s)?;
        let mut i = (seq - self.base + 1) as usize;
        let mut sum = 0u64;
        while i > 0 {
            sum += u64::from(self.tree[i]);
            i -= lowbit(i);
        }
        Some(sum)
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
    // Only the damage hook (and the tests) lose parts of a room.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn forget_last_seq(&mut self) {
        self.last_seq = 0;
    }

    /// Appends one index holding `value`: its node covers `(i - lowbit(i), i]`, the sum of
    /// which is `value` plus the prefix sums' difference over the indices already there.
    fn append(&mut self, value: u32) {
        let i = self.tree.len();
        let below = i - lowbit(i);
        let mut sum = value;
        let mut j = i - 1;
        while j > below {
            sum += self.tree[j];
            j -= lowbit(j);
        }
        self.tree.push(sum);
    }

    /// Renumbers the line 1..=n in order and rebuilds the tree (all ones: node `i` holds
    /// `lowbit(i)`).
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
        self.tree = (0..=n).map(|i| lowbit(i) as u32).collect();
        self.base = 1;
        self.last_seq = n as u64;
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
            assert!(line.tree.len() - 1 <= 2 * line.len() + SLACK + 1);
        }
        // And a head that moves on: everyone is served in turn.
        let more = sessions(1_000);
        for &x in &more {
            line.push(x);
        }
        for (i, &x) in keep.iter().chain(&more).enumerate() {
            assert_eq!(line.head(), Some(x), "served in order, #{i}");
            assert!(line.remove(x));
            assert!(line.tree.len() - 1 <= 2 * line.len() + SLACK + 1);
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
