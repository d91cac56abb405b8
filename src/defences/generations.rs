//! One bounded table that forgets by time: what both rate limits and the used-challenge memory
//! keep.

use std::collections::HashMap;
use std::hash::Hash;

/// Values per key in two generations of one `window_ms` each: a key is remembered for at least
/// one window and at most two. Holds at most `2 * max_keys` keys: a new key that finds the
/// current generation full starts the next generation early (the oldest is forgotten), so a
/// flood of distinct keys costs bounded memory instead of growing it.
#[derive(Debug)]
pub(crate) struct Generations<K, V> {
    window_ms: u64,
    max_keys: usize,
    start_ms: u64,
    current: HashMap<K, V>,
    previous: HashMap<K, V>,
}

impl<K: Hash + Eq, V: Default> Generations<K, V> {
    pub(crate) fn new(window_ms: u64, max_keys: usize) -> Self {
        Self {
            window_ms: window_ms.max(1),
            max_keys: max_keys.max(1),
            start_ms: 0,
            current: HashMap::new(),
            previous: HashMap::new(),
        }
    }

    pub(crate) fn window_ms(&self) -> u64 {
        self.window_ms
    }

    /// Moves the table to `now_ms`: after one window the current generation becomes the previous
    /// one, after two both are forgotten. Returns how far `now_ms` is into the current
    /// generation (at most one window).
    pub(crate) fn advance(&mut self, now_ms: u64) -> u64 {
        let w = self.window_ms;
        let elapsed = now_ms.saturating_sub(self.start_ms);
        if elapsed >= 2 * w {
            self.current.clear();
            self.previous.clear();
            self.start_ms = now_ms;
        } else if elapsed >= w {
            self.previous = std::mem::take(&mut self.current);
            self.start_ms += w;
        }
        now_ms.saturating_sub(self.start_ms).min(w)
    }

    /// The key's value in the current and in the previous generation.
    pub(crate) fn get(&self, key: &K) -> (Option<&V>, Option<&V>) {
        (self.current.get(key), self.previous.get(key))
    }

    /// The key's value in the current generation, made (default) if absent. Call
    /// [`advance`](Self::advance) first.
    pub(crate) fn entry(&mut self, key: K, now_ms: u64) -> &mut V {
        if !self.current.contains_key(&key) && self.current.len() >= self.max_keys {
            self.previous = std::mem::take(&mut self.current);
            self.start_ms = now_ms;
        }
        self.current.entry(key).or_default()
    }

    /// Keys in both generations.
    pub(crate) fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_one_to_two_windows() {
        let mut g: Generations<u8, ()> = Generations::new(1_000, 10);
        g.advance(5_000);
        g.entry(1, 5_000);
        g.advance(5_999);
        assert_eq!(g.get(&1), (Some(&()), None));
        g.advance(6_500);
        assert_eq!(g.get(&1), (None, Some(&())), "a window later: previous");
        g.advance(8_000);
        assert_eq!(g.get(&1), (None, None), "two windows later: forgotten");
    }

    #[test]
    fn a_full_generation_rotates_early() {
        let mut g: Generations<u32, u32> = Generations::new(60_000, 100);
        for i in 0..10_000 {
            g.advance(5_000);
            *g.entry(i, 5_000) += 1;
        }
        assert!(g.len() <= 200, "{}", g.len());
    }
}
