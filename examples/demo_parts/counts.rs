//! The room's counts for the operator routes (`/stats`, `/metrics`), read from the store at
//! most once a second however often they are asked for.
//!
//! Those routes are outside the room and need no cookie: a store call for each request would
//! let anyone turn a flood of them into a flood of store calls, the visitors' calls queued
//! behind them past their deadline, and a room failing open let everyone in while the store
//! looked away.

use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tower_waiting_room::store::{RoomStats, StoreError, StoreErrorKind};
use tower_waiting_room::WaitingRoomLayer;

/// How long a read of the counts serves.
const FRESH_FOR: Duration = Duration::from_secs(1);

/// The last counts read, shared by the operator routes.
pub struct Counts {
    layer: WaitingRoomLayer,
    last: Mutex<Last>,
}

/// When the store was last asked, and the counts it last gave (kept through a failed read).
#[derive(Default)]
struct Last {
    asked: Option<Instant>,
    stats: Option<RoomStats>,
}

impl Counts {
    pub fn new(layer: WaitingRoomLayer) -> Self {
        Self {
            layer,
            last: Mutex::default(),
        }
    }

    /// The counts, read from the store unless it was asked under a second ago (then the last
    /// counts it gave, if any). Requests arriving during a read wait for it rather than
    /// making their own.
    pub async fn get(&self) -> Result<RoomStats, StoreError> {
        let mut last = self.last.lock().await;
        if let (Some(asked), Some(stats)) = (last.asked, last.stats) {
            if asked.elapsed() < FRESH_FOR {
                return Ok(stats);
            }
        }
        if last.asked.is_some_and(|asked| asked.elapsed() < FRESH_FOR) {
            // Failed under a second ago, and nothing read before: not asked again yet.
            return Err(StoreError::new(StoreErrorKind::Unavailable));
        }
        last.asked = Some(Instant::now());
        let stats = self.layer.stats().await?;
        last.stats = Some(stats);
        Ok(stats)
    }
}
