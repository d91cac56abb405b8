//! Time, injectable so tests can move it.
//!
//! Every decision of a room (token age, slot expiry, queue check-ins, the admission-rate budget)
//! reads one [`Clock`]. Production uses [`SystemClock`]; tests use [`ManualClock`] and advance it
//! by hand instead of sleeping.
//!
//! ```
//! use std::time::Duration;
//! use tower_waiting_room::clock::{Clock, ManualClock};
//!
//! let clock = ManualClock::new(1_000);
//! clock.advance(Duration::from_secs(5));
//! assert_eq!(clock.now_ms(), 6_000);
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
#[doc(hidden)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock standing at `start_ms` milliseconds since the epoch.
    pub fn new(start_ms: u64) -> Self {
        Self {
            now: Arc::new(AtomicU64::new(start_ms)),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.now.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }

    /// Sets the clock to an absolute time.
    pub fn set(&self, now_ms: u64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now_ms", &self.now_ms())
            .finish()
    }
}

/// A shared, type-erased clock.
pub(crate) type SharedClock = Arc<dyn Clock>;

pub(crate) fn secs_ceil(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
