//! Seeded randomness for the runs that replay by seed (the chaos run, several gateways on one
//! store), and the wall clock their records use.

use std::time::{SystemTime, UNIX_EPOCH};

/// splitmix64: reproducible randomness without a dependency.
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// The next card of `deck`, dealt from a fresh seeded shuffle of `all` when it runs out:
    /// every kind comes up once per round.
    pub fn deal(&mut self, deck: &mut Vec<usize>, all: std::ops::Range<usize>) -> usize {
        if deck.is_empty() {
            deck.extend(all);
            for i in (1..deck.len()).rev() {
                let j = self.below(i as u64 + 1) as usize;
                deck.swap(i, j);
            }
        }
        deck.pop().expect("a non-empty deck")
    }

    /// True with probability `percent` %.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Milliseconds since the epoch, as Redis `TIME` gives them.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}
