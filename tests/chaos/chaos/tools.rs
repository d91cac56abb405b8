//! Small tools of the chaos run: seeded randomness (`Rng`), the clock every record uses (ms
//! since the epoch, as Redis `TIME`), sleeping, and reading the environment.

use std::time::Duration;

pub(super) use crate::common::rng::Rng;

/// When the run started (ms since the epoch), for readable times in the report.
pub(super) static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// `t` as seconds since the start of the run.
pub(super) fn rel(t: u64) -> String {
    let start = START.get().copied().unwrap_or(0);
    format!("+{:.3}s", t.saturating_sub(start) as f64 / 1_000.0)
}

pub(super) use crate::common::rng::wall_ms as now_ms;

pub(super) fn sleep_until(t: u64) {
    std::thread::sleep(Duration::from_millis(t.saturating_sub(now_ms())));
}

pub(super) async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

pub(super) fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}
