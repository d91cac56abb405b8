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
/// is over, so a store that is away is not asked more often either; so is a read its caller
/// gave up waiting for (see [`get`](Self::get)), and a read slower than a second is taken by
/// everyone who waited for it. The second is the room's clock's: a clock that went back makes
/// the next call read again.
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
    last: Arc<Mutex<Last>>,
}

/// When the store was last asked, and its last answer.
#[derive(Default)]
struct Last {
    /// When the last read began (it may not have ended: its caller gave up waiting).
    asked_ms: Option<u64>,
    read: Option<Read>,
}

/// A read of the counts that ended: when it was asked for and when it ended, by the room's
/// clock, and what the store answered.
struct Read {
    asked_ms: u64,
    ended_ms: u64,
    answer: Result<RoomStats, StoreError>,
}

impl Read {
    fn answer(&self) -> Result<RoomStats, StoreError> {
        self.answer.as_ref().map(|s| *s).map_err(StoreError::copied)
    }
}

/// Whether `at` lies within the second that began at `from`.
fn within_a_second(from: u64, at: u64) -> bool {
    from <= at && at < from.saturating_add(COUNTS_FRESH_MS)
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
    /// the room's clock or ended after this call began; else read from the store now, one read
    /// at a time (callers meanwhile wait for it, as long as the store call takes: the store's
    /// own timeout bounds it). A read whose caller gave up waiting (its future dropped) still
    /// counts as asked: until its second is over, callers get the read before it, or an
    /// [`Unavailable`](StoreErrorKind::Unavailable) error when there was none.
    pub async fn get(&self) -> Result<RoomStats, StoreError> {
        let came = self.room.now_ms();
        let mut last = self.last.lock().await;
        let now = self.room.now_ms();
        if let Some(read) = &last.read {
            // Fresh, or under way when this call came: waited for, so taken.
            let waited_for = read.asked_ms <= came && came <= read.ended_ms;
            if within_a_second(read.asked_ms, now) || waited_for {
                return read.answer();
            }
        }
        if last
            .asked_ms
            .is_some_and(|asked| within_a_second(asked, now))
        {
            return match &last.read {
                Some(read) => read.answer(),
                None => Err(StoreError::new(StoreErrorKind::Unavailable)),
            };
        }
        last.asked_ms = Some(now);
        let answer = self.room.stats().await;
        let read = Read {
            asked_ms: now,
            ended_ms: self.room.now_ms(),
            answer,
        };
        let answer = read.answer();
        last.read = Some(read);
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
