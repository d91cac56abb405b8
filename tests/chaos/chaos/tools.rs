//! Small tools of the chaos run: seeded randomness (`Rng`), the clock every record uses (ms
//! since the epoch, as Redis `TIME`), sleeping, and reading the environment.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// splitmix64: reproducible randomness without a dependency.
#[derive(Clone)]
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub(super) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// The next card of `deck`, dealt from a fresh seeded shuffle of `all` when it runs out:
    /// every kind comes up once per round.
    pub(super) fn deal(&mut self, deck: &mut Vec<usize>, all: std::ops::Range<usize>) -> usize {
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
    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// When the run started (ms since the epoch), for readable times in the report.
pub(super) static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// `t` as seconds since the start of the run.
pub(super) fn rel(t: u64) -> String {
    let start = START.get().copied().unwrap_or(0);
    format!("+{:.3}s", t.saturating_sub(start) as f64 / 1_000.0)
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

pub(super) fn sleep_until(t: u64) {
    std::thread::sleep(Duration::from_millis(t.saturating_sub(now_ms())));
}

pub(super) async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

pub(super) fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}
