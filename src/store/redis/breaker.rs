//! The circuit breaker shared by every clone of a [`RedisStore`](crate::store::RedisStore), with the
//! store's counters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counters of a [`RedisStore`](crate::store::RedisStore)'s calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisStoreMetrics {
    /// Calls sent to Redis.
    pub attempts: u64,
    /// Calls not sent because the circuit breaker was open.
    pub skipped: u64,
    /// Calls that failed for lack of a connection or an answer in time.
    pub transport_failures: u64,
    /// Whether the breaker is open (or half-open) now.
    pub breaker_open: bool,
}

/// The circuit breaker shared by every clone of a store, with the store's counters.
pub(super) struct Breaker {
    pub(super) attempts: AtomicU64,
    pub(super) skipped: AtomicU64,
    pub(super) failures: AtomicU64,
    cooldown: Duration,
    start: Instant,
    /// Milliseconds since `start` until which calls are skipped; 0 when closed.
    pub(super) open_until: AtomicU64,
    /// A probe is in flight after the cooldown.
    probing: AtomicBool,
}

impl Breaker {
    pub(super) fn new(cooldown: Duration) -> Self {
        Self {
            attempts: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            cooldown,
            start: Instant::now(),
            open_until: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    fn now(&self) -> u64 {
        // +1 so that 0 always means "closed".
        self.start.elapsed().as_millis() as u64 + 1
    }

    /// Whether a call may go to the store now.
    pub(super) fn allow(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return true;
        }
        if self.now() < until {
            return false;
        }
        // Half-open: exactly one probe.
        self.probing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub(super) fn trip(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let until = self.now() + self.cooldown.as_millis() as u64;
        self.open_until.store(until, Ordering::Release);
        self.probing.store(false, Ordering::Release);
        tracing::warn!(cooldown = ?self.cooldown, "waiting room store unreachable; circuit breaker open");
    }

    pub(super) fn success(&self) {
        if self.open_until.swap(0, Ordering::AcqRel) != 0 {
            tracing::info!("waiting room store reachable again; circuit breaker closed");
        }
        self.probing.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaker_skips_then_lets_one_probe_through() {
        let b = Breaker::new(Duration::from_millis(40));
        assert!(b.allow());
        b.trip();
        assert!(!b.allow());
        std::thread::sleep(Duration::from_millis(60));
        assert!(b.allow(), "one probe after the cooldown");
        assert!(!b.allow(), "only one probe at a time");
        b.success();
        assert!(b.allow() && b.allow());
    }
}
