//! The Redis types of the script's keys, as containers (the keys and their types are listed in
//! `src/store/redis/script/keys.lua`), holding the same facts so both stores can be damaged,
//! and heal, the same way in tests:
//!
//! - [`ZSet`]: sessions by score, like a sorted set (the slots by expiry: `active` and
//!   `granted`): O(log n) add, remove, lookup and smallest score;
//! - [`Ranks`]: the O(log n) rank of a place that `ZRANK` gives the script's `line`: a bitmap
//!   and a Fenwick tree ([`fenwick_select`], which the pre-queue's buckets use too).

use std::collections::{BTreeSet, HashMap};

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

    /// Forgets every member (closing with `end_slots`, and the damage hook).
    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }
}

pub(super) fn lowbit(i: usize) -> usize {
    i & i.wrapping_neg()
}

/// In a 1-based Fenwick tree over counts, the 0-based index of the element holding the 0-based
/// `k`-th counted item, and how many items of that element come before it (a descent from the
/// largest power of two: O(log n)). Past the end if `k` is not below the total.
pub(super) fn fenwick_select(tree: &[u32], mut k: u64) -> (usize, u64) {
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

/// A set of slots 0.. with the rank of each (set slots at or before it) in O(log n): a bitmap
/// of 64 slots per word, and a Fenwick tree (binary indexed tree) over the words' counts. The
/// tree is 64 times smaller than one over the slots (1 600 entries for 100 000 waiters), so a
/// rank touches a few cache lines: one word and a walk through a tree that stays in cache.
#[derive(Debug, Default)]
pub(super) struct Ranks {
    words: Vec<u64>,
    /// 1-based; `tree[i]` is the count of words `i - lowbit(i) .. i` (0-based); `tree[0]` is
    /// unused.
    tree: Vec<u32>,
}

impl Ranks {
    /// All of slots `0..n` set.
    pub(super) fn ones(n: usize) -> Self {
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
    pub(super) fn contains(&self, k: usize) -> bool {
        self.words
            .get(k / 64)
            .is_some_and(|word| word & (1u64 << (k % 64)) != 0)
    }

    /// The slot of the set slot at 0-based rank `k` (`k` set slots before it), if any. O(log n).
    pub(super) fn select(&self, k: u64) -> Option<usize> {
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
    pub(super) fn slots(&self) -> usize {
        self.words.len() * 64
    }

    pub(super) fn set(&mut self, k: usize) {
        let (w, bit) = (k / 64, 1u64 << (k % 64));
        while self.words.len() <= w {
            self.push_word();
        }
        if self.words[w] & bit == 0 {
            self.words[w] |= bit;
            self.add(w + 1, |c| c + 1);
        }
    }

    pub(super) fn clear(&mut self, k: usize) {
        let (w, bit) = (k / 64, 1u64 << (k % 64));
        if self.words.get(w).is_some_and(|word| word & bit != 0) {
            self.words[w] &= !bit;
            self.add(w + 1, |c| c - 1);
        }
    }

    /// Set slots among `0..=k`.
    pub(super) fn rank(&self, k: usize) -> u64 {
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
        let s: Vec<SessionId> = (0..3).map(|_| SessionId::random()).collect();
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
}
