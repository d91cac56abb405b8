//! [`EventSchedule`]: a room that opens at a set time, with a fair, shuffled pre-queue, and may
//! close at another.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::session::SessionId;
use crate::token::mac::MacKey;

pub use crate::vocab::DRAW_BITS;

/// What the per-event draw key is derived from, with the room and the opening.
const DRAW_KEY_LABEL: &str = "tower-waiting-room pre-queue draw";

/// A room's opening and closing times, and the secret that orders its pre-queue. Times are
/// milliseconds since the Unix epoch, on the store's clock.
///
/// Before the opening, arrivals are registered (one store write each) and told when the room
/// opens ([`Decision::Scheduled`](crate::store::Decision::Scheduled)); nobody is admitted, on any
/// gateway. Each registrant's place is fixed on arrival by a keyed draw (HMAC-SHA256 of the
/// session id under a key secret to the event, truncated to 52 bits): the line orders
/// registrants by draw, ahead of every later arrival, so at the opening they stand in a uniformly
/// random order that nobody can improve by reloading (a reload keeps the place) or by picking a
/// session id (without the key, nobody can tell which id draws well). A client that registers
/// several sessions holds several draws, and may use the best once positions show after the
/// opening: the per-IP new-visitor limit and proof of work are what make sessions expensive.
/// Arrivals after the opening are first come, first served behind them. From `closes_at`,
/// newcomers are refused ([`Decision::Closed`](crate::store::Decision::Closed)); those in line
/// keep their place unless [`keep_line_after_close`](EventSchedule::keep_line_after_close) is off.
///
/// Every gateway must be built with the same schedule. A store keeps the last opening it was
/// told of, so a call without a schedule (a gateway built without one, during a rolling deploy)
/// still admits nobody before it: its newcomers are registered first come, first served behind
/// the drawn registrants. A pre-queue opened while an earlier line still waits (people with
/// places taken after an earlier opening) queues first come, first served behind that line, as
/// drawing would put the registrants ahead of it: the shuffle needs a line without such waiters.
///
/// The layer's builder sets it up ([`opens_at`](crate::WaitingRoomBuilder::opens_at)); stores and
/// tests can attach one to a policy by hand:
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use tower_waiting_room::testing::ManualClock;
/// use tower_waiting_room::config::EventSchedule;
/// use tower_waiting_room::store::{Decision, MemoryStore, Store};
/// use tower_waiting_room::{RoomPolicy, SessionId};
///
/// # tokio_test_block_on(async {
/// let clock = ManualClock::new(1_000_000);
/// let store = MemoryStore::with_clock(clock.clone());
/// let opens_at = UNIX_EPOCH + Duration::from_millis(2_000_000);
/// let schedule = EventSchedule::new(opens_at, b"a per-event secret of 32 bytes!!");
/// let policy = RoomPolicy::new("drop", 1).with_schedule(Some(schedule));
/// let visitor = SessionId::random();
/// assert_eq!(
///     store.enter(&policy, visitor).await?,
///     Decision::Scheduled { opens_at_ms: 2_000_000 }
/// );
/// clock.set(2_000_000);
/// assert!(matches!(store.enter(&policy, visitor).await?, Decision::Admitted { .. }));
/// # Ok::<_, tower_waiting_room::store::StoreError>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
///
/// The draw key is secret: it never leaves the gateway (the Redis store is sent each draw, never
/// the key), and `Debug` shows it redacted.
#[derive(Clone)]
#[non_exhaustive]
pub struct EventSchedule {
    /// When the room opens: nobody is admitted before.
    pub opens_at_ms: u64,
    /// When newcomers start being refused, if ever.
    pub closes_at_ms: Option<u64>,
    /// After the closing, whether those in line keep their place and the line keeps moving
    /// (`true`, the default) or everyone without a slot is refused too and nobody is promoted.
    pub keep_line_after_close: bool,
    draw_key: [u8; 32],
    /// `draw_key` as a ready HMAC key: made once, not on every draw (the embedded store draws
    /// under its room's lock).
    draw_hmac: MacKey,
    /// Whether newcomers before the opening are placed by their draw. `false` for a schedule a
    /// store kept from an earlier call, which has no key: its newcomers queue first come, first
    /// served behind the registrants.
    pub(crate) draws: bool,
}

impl PartialEq for EventSchedule {
    fn eq(&self, other: &Self) -> bool {
        // `draw_hmac` is made from `draw_key`.
        self.opens_at_ms == other.opens_at_ms
            && self.closes_at_ms == other.closes_at_ms
            && self.keep_line_after_close == other.keep_line_after_close
            && self.draw_key == other.draw_key
            && self.draws == other.draws
    }
}

impl Eq for EventSchedule {}

impl EventSchedule {
    /// A schedule opening at `opens_at`, its pre-queue ordered by draws under `draw_secret`
    /// (keep it secret and the same on every gateway; the builder derives one from the room's
    /// signing key). Times before the epoch count as the epoch.
    pub fn new(opens_at: SystemTime, draw_secret: impl AsRef<[u8]>) -> Self {
        // The secret is hashed into a fixed-size key, so any length works the same way.
        let draw_key = MacKey::new(draw_secret.as_ref()).sign(DRAW_KEY_LABEL.as_bytes());
        Self::with_key(unix_ms(opens_at), draw_key)
    }

    fn with_key(opens_at_ms: u64, draw_key: [u8; 32]) -> Self {
        Self {
            opens_at_ms,
            closes_at_ms: None,
            keep_line_after_close: true,
            draw_hmac: MacKey::new(&draw_key),
            draw_key,
            draws: true,
        }
    }

    /// A schedule a store kept from an earlier call (its times, no key), for a call that came
    /// without one: nobody is admitted before its opening all the same, and its newcomers are
    /// not drawn (see [`draws`](Self::draws)).
    pub(crate) fn kept(opens_at_ms: u64, closes_at_ms: Option<u64>, keep_line: bool) -> Self {
        let mut s = Self::with_key(opens_at_ms, [0u8; 32]);
        s.closes_at_ms = closes_at_ms;
        s.keep_line_after_close = keep_line;
        s.draws = false;
        s
    }

    /// The schedule the builder makes: the draw key is HMAC-SHA256 under the room's current
    /// signing key of the label, the room and the opening, so every gateway with the same key
    /// draws the same, and each event (room, opening) draws anew.
    pub(crate) fn derived(signing_key: &MacKey, room: &str, opens_at: SystemTime) -> Self {
        let opens_at_ms = unix_ms(opens_at);
        let msg = format!("{DRAW_KEY_LABEL}|{room}|{opens_at_ms}");
        Self::with_key(opens_at_ms, signing_key.sign(msg.as_bytes()))
    }

    /// Sets the closing time: from then on, newcomers are refused.
    pub fn with_closes_at(mut self, closes_at: Option<SystemTime>) -> Self {
        self.closes_at_ms = closes_at.map(unix_ms);
        self
    }

    /// Sets whether those in line keep their place after the closing (default `true`).
    pub fn with_keep_line_after_close(mut self, keep: bool) -> Self {
        self.keep_line_after_close = keep;
        self
    }

    /// The session's draw: a keyed hash of its id, in `0..2^52`. The lower the draw, the earlier
    /// the place among registrants.
    pub fn draw(&self, session: SessionId) -> u64 {
        let tag = self.draw_hmac.sign(session.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&tag[..8]);
        u64::from_be_bytes(first) >> (64 - DRAW_BITS)
    }

    /// Whether `now_ms` is before the opening.
    pub fn before_opening(&self, now_ms: u64) -> bool {
        now_ms < self.opens_at_ms
    }

    /// Whether `now_ms` is at or after the closing.
    pub fn after_closing(&self, now_ms: u64) -> bool {
        self.closes_at_ms.is_some_and(|c| now_ms >= c)
    }
}

impl fmt::Debug for EventSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventSchedule")
            .field("opens_at_ms", &self.opens_at_ms)
            .field("closes_at_ms", &self.closes_at_ms)
            .field("keep_line_after_close", &self.keep_line_after_close)
            .field("draw_key", &"<redacted>")
            .finish()
    }
}

/// Milliseconds since the Unix epoch (0 before it).
pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn schedule() -> EventSchedule {
        EventSchedule::new(UNIX_EPOCH + Duration::from_secs(10), [7u8; 32])
    }

    #[test]
    fn draws_are_52_bits_stable_and_keyed() {
        let s = schedule();
        let other = EventSchedule::new(UNIX_EPOCH + Duration::from_secs(10), [8u8; 32]);
        let id = SessionId::from_bytes([1; 16]);
        assert_eq!(s.draw(id), s.draw(id), "stable");
        assert!(s.draw(id) < 1 << DRAW_BITS);
        assert_ne!(s.draw(id), other.draw(id), "another key draws anew");
        let draws: std::collections::HashSet<u64> = (0..1_000u16)
            .map(|i| {
                let mut b = [0u8; 16];
                b[..2].copy_from_slice(&i.to_be_bytes());
                s.draw(SessionId::from_bytes(b))
            })
            .collect();
        assert_eq!(draws.len(), 1_000);
        // The top bit is used: the draws spread over the whole range.
        assert!(draws.iter().any(|&d| d >= 1 << (DRAW_BITS - 1)));
    }

    #[test]
    fn debug_redacts_the_key() {
        let shown = format!("{:?}", schedule());
        assert!(shown.contains("<redacted>"), "{shown}");
        assert!(!shown.contains("[7"), "{shown}");
    }

    #[test]
    fn derived_keys_differ_per_room_and_opening() {
        let key = MacKey::new(&[3u8; 32]);
        let t = UNIX_EPOCH + Duration::from_secs(100);
        let id = SessionId::from_bytes([9; 16]);
        let a = EventSchedule::derived(&key, "a", t);
        assert_eq!(a.draw(id), EventSchedule::derived(&key, "a", t).draw(id));
        assert_ne!(a.draw(id), EventSchedule::derived(&key, "b", t).draw(id));
        let later = t + Duration::from_millis(1);
        assert_ne!(
            a.draw(id),
            EventSchedule::derived(&key, "a", later).draw(id)
        );
    }

    #[test]
    fn opening_and_closing() {
        let s = schedule().with_closes_at(Some(UNIX_EPOCH + Duration::from_secs(20)));
        assert!(s.before_opening(9_999) && !s.before_opening(10_000));
        assert!(!s.after_closing(19_999) && s.after_closing(20_000));
        assert!(!schedule().after_closing(u64::MAX));
    }
}
