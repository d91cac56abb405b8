//! The room's counts for routes anyone may ask for: [`SharedCounts`].

use std::fmt;
use std::sync::Arc;

use tokio::sync::Mutex;

use crate::room::Room;
use crate::store::{RoomStats, StoreError, StoreErrorKind};
use crate::WaitingRoomLayer;

/// How long one read of the counts serves, in milliseconds of the room's clock.
pub const COUNTS_FRESH_MS: u64 = 1_000;

/// The room's counts for a route outside the room that anyone may ask for (a public `/stats`,
/// a `/metrics` scrape): read from the store at most once a second however often they are
/// asked, a caller arriving during a read waiting for it rather than making its own. Clones
/// share the last read.
///
/// Such a route needs no cookie, so a store call for each request
/// ([`WaitingRoomLayer::stats`]) would let anyone turn a flood of requests into a flood of store
/// calls: the visitors' own calls queued behind them past their deadline, and a room that fails
/// open letting everyone in while the store looked away.
///
/// A read that failed is answered the same way (an error of the same kind) until its second
/// is over, so a store that is away is not asked more often either. The second is the room's
/// clock's: a clock that went back makes the next call read again.
///
/// ```
/// use tower_waiting_room::control::SharedCounts;
/// use tower_waiting_room::testing::TestRoom;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let room = TestRoom::new("drop", 1);
/// let counts = SharedCounts::new(&room.layer());
/// assert_eq!(counts.get().await?.admitted, 0);
/// let (_, _inside) = room.admit().await;
/// assert_eq!(counts.get().await?.admitted, 0, "the read of this second");
/// room.clock().advance(std::time::Duration::from_secs(1));
/// assert_eq!(counts.get().await?.admitted, 1);
/// # Ok::<_, tower_waiting_room::store::StoreError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct SharedCounts {
    room: Arc<Room>,
    last: Arc<Mutex<Option<Read>>>,
}

/// A read of the counts: when it was asked for, and what the store answered.
struct Read {
    at_ms: u64,
    answer: Result<RoomStats, Failed>,
}

/// A failed read, kept to answer with again: its kind, whether it was a version mix, and its
/// cause's text (which says no host and no secret: see [`StoreError`]).
#[derive(Clone)]
struct Failed {
    kind: StoreErrorKind,
    version_mix: bool,
    cause: Option<String>,
}

impl Failed {
    fn of(e: &StoreError) -> Self {
        Self {
            kind: e.kind(),
            version_mix: e.is_version_mix(),
            cause: std::error::Error::source(e).map(|s| s.to_string()),
        }
    }

    fn error(&self) -> StoreError {
        match (&self.cause, self.version_mix) {
            (Some(cause), true) => StoreError::version_mix(cause.clone()),
            (Some(cause), false) => StoreError::with_source(self.kind, cause.clone()),
            (None, _) => StoreError::new(self.kind),
        }
    }
}

impl SharedCounts {
    /// Counts of `layer`'s room, none read yet.
    pub fn new(layer: &WaitingRoomLayer) -> Self {
        Self {
            room: Arc::clone(layer.room()),
            last: Arc::default(),
        }
    }

    /// The room's counts: the last read's, if it was asked for within [`COUNTS_FRESH_MS`] by
    /// the room's clock, else read from the store now (one read at a time: callers meanwhile
    /// wait for it).
    pub async fn get(&self) -> Result<RoomStats, StoreError> {
        let mut last = self.last.lock().await;
        let now = self.room.now_ms();
        if let Some(read) = last.as_ref() {
            if read.at_ms <= now && now < read.at_ms.saturating_add(COUNTS_FRESH_MS) {
                return read.answer.clone().map_err(|f| f.error());
            }
        }
        let answer = self.room.stats().await;
        *last = Some(Read {
            at_ms: now,
            answer: answer.as_ref().map(|s| *s).map_err(Failed::of),
        });
        answer
    }
}

impl fmt::Debug for SharedCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCounts")
            .field("room", &self.room.config().room())
            .finish()
    }
}
