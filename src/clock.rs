//! Time, injectable so tests can move it.
//!
//! Every decision of a room (token age, slot expiry, queue check-ins, the admission-rate budget)
//! reads one [`Clock`]. Production uses the system's clock; tests use
//! [`testing::ManualClock`](crate::testing::ManualClock) and advance it by hand instead of
//! sleeping.

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

/// A shared, type-erased clock.
pub(crate) type SharedClock = Arc<dyn Clock>;

pub(crate) fn secs_ceil(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
