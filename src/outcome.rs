//! Typed outcomes: what the room decided for a request.
//!
//! A request that gets through carries an [`Admission`] in its extensions, which handlers behind
//! the layer can read (with axum, `Extension<Admission>`). A request that does not get through is
//! answered by the layer with a response rendered from a [`Rejection`].
//!
//! ```
//! use http::Request;
//! use tower_waiting_room::Admission;
//!
//! fn who(req: &Request<()>) -> String {
//!     match req.extensions().get::<Admission>() {
//!         Some(a) => format!("visitor {} in room {}", a.session(), a.room()),
//!         None => "not behind the waiting room".to_owned(),
//!     }
//! }
//! # assert_eq!(who(&Request::new(())), "not behind the waiting room");
//! ```

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::session::SessionId;
use crate::store::AdmissionCounts;

/// How a visitor got in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdmittedBy {
    /// A fresh admission token, no store call.
    Token,
    /// The store: a new slot, a claimed grant, or a heartbeat that extended the slot.
    Store,
    /// The store could not be reached and the room fails open: let in without a slot.
    FailOpen,
}

/// A visitor who is inside: put into the request's extensions for handlers behind the layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    pub(crate) room: Arc<str>,
    pub(crate) session: SessionId,
    pub(crate) expires_at_ms: u64,
    pub(crate) by: AdmittedBy,
}

impl Admission {
    /// The room's id.
    pub fn room(&self) -> &str {
        &self.room
    }

    /// The visitor's session id.
    pub fn session(&self) -> SessionId {
        self.session
    }

    /// When the slot expires unless the visitor stays active (ms since the epoch). For
    /// [`AdmittedBy::FailOpen`] there is no slot; this is when the room will ask the store again.
    pub fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }

    /// When the slot expires unless the visitor stays active.
    pub fn expires_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.expires_at_ms)
    }

    /// How the visitor got in.
    pub fn admitted_by(&self) -> AdmittedBy {
        self.by
    }
}

/// Why a request was answered by the room instead of the inner service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejection {
    /// In line: `429 Too Many Requests` for API clients, the waiting page for browsers.
    Waiting {
        /// 1-based place in line.
        position: u64,
        /// How many are in line in all.
        waiting: u64,
        /// The estimated wait ([`estimate_wait`]): conservative, from the measured admission
        /// rate. `None` when nobody was admitted in the last five minutes: the line is not
        /// moving, and no number is made up.
        eta: Option<Duration>,
        /// When to ask again.
        retry_after: Duration,
    },
    /// The line is at its maximum length: come back later.
    Full {
        /// How many are in line.
        waiting: u64,
        /// When to try again.
        retry_after: Duration,
    },
    /// The store is unreachable and the room fails closed.
    Unavailable {
        /// When to try again.
        retry_after: Duration,
    },
    /// The store is out of memory: try again soon.
    Busy {
        /// When to try again.
        retry_after: Duration,
    },
    /// Over one of the room's own limits (new visitors per client IP, polls per session):
    /// `429 Too Many Requests`; nothing was asked of the store.
    Limited {
        /// When the limit lets the client in again.
        retry_after: Duration,
    },
    /// Proof of work is on and the visitor has not solved its challenge yet: `403 Forbidden`
    /// with the challenge ([`RenderContext::challenge`](crate::response::RenderContext)); the
    /// browser page solves it by itself. See [`proof_of_work`](crate::defences::proof_of_work).
    Challenge {
        /// Leading zero bits the solution's hash needs.
        difficulty: u8,
        /// For a client that cannot solve it: when to look again.
        retry_after: Duration,
    },
}

impl Rejection {
    /// The state's name as in the JSON answers: `waiting`, `full`, `unavailable`, `busy`,
    /// `limited` or `challenge`.
    pub fn state(&self) -> &'static str {
        match self {
            Rejection::Waiting { .. } => "waiting",
            Rejection::Full { .. } => "full",
            Rejection::Unavailable { .. } => "unavailable",
            Rejection::Busy { .. } => "busy",
            Rejection::Limited { .. } => "limited",
            Rejection::Challenge { .. } => "challenge",
        }
    }

    /// The visitor's place in line (1 is next), for `Waiting`.
    pub fn position(&self) -> Option<u64> {
        match *self {
            Rejection::Waiting { position, .. } => Some(position),
            _ => None,
        }
    }

    /// How many wait in all, for `Waiting` and `Full`.
    pub fn waiting(&self) -> Option<u64> {
        match *self {
            Rejection::Waiting { waiting, .. } | Rejection::Full { waiting, .. } => Some(waiting),
            _ => None,
        }
    }

    /// Leading zero bits a solution needs, for `Challenge`.
    pub fn difficulty(&self) -> Option<u8> {
        match *self {
            Rejection::Challenge { difficulty, .. } => Some(difficulty),
            _ => None,
        }
    }

    /// How many are ahead of the visitor in line (`position - 1`), for `Waiting`.
    pub fn ahead(&self) -> Option<u64> {
        match *self {
            Rejection::Waiting { position, .. } => Some(position.saturating_sub(1)),
            _ => None,
        }
    }

    /// The estimated wait, for `Waiting` when the line is moving.
    pub fn eta(&self) -> Option<Duration> {
        match *self {
            Rejection::Waiting { eta, .. } => eta,
            _ => None,
        }
    }

    /// When the client should ask again.
    pub fn retry_after(&self) -> Duration {
        match *self {
            Rejection::Waiting { retry_after, .. }
            | Rejection::Full { retry_after, .. }
            | Rejection::Unavailable { retry_after }
            | Rejection::Busy { retry_after }
            | Rejection::Limited { retry_after }
            | Rejection::Challenge { retry_after, .. } => retry_after,
        }
    }

    /// The HTTP status: 429 while waiting or limited, 403 for a challenge, 503 otherwise.
    pub fn status(&self) -> http::StatusCode {
        match self {
            Rejection::Waiting { .. } | Rejection::Limited { .. } => {
                http::StatusCode::TOO_MANY_REQUESTS
            }
            Rejection::Challenge { .. } => http::StatusCode::FORBIDDEN,
            _ => http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// Estimates are multiplied by this, so that they err on the long side: a visitor let in early is
/// pleased, one kept past the promised time is not.
pub const ETA_SAFETY_FACTOR: f64 = 1.25;

/// Weight of the last minute's admission rate in the blend (the rest is the last five minutes').
const ETA_RECENT_WEIGHT: f64 = 0.5;

/// The estimated wait of the visitor at `position`, from the room's recent admissions (Little's
/// law: wait = people ahead, and the visitor, / admission rate).
///
/// The rate blends the last minute's and the last five minutes' rates half and half, so a sudden
/// stall or burst moves the estimate gradually instead of making it jump; the result is multiplied
/// by [`ETA_SAFETY_FACTOR`] and rounded up to whole seconds. `None` when nobody was admitted in the
/// last five minutes: there is no rate to estimate from, and the honest answer is "not moving".
///
/// ```
/// use std::time::Duration;
/// use tower_waiting_room::outcome::estimate_wait;
/// use tower_waiting_room::store::AdmissionCounts;
///
/// // One admission every 2 s for five minutes: 30 a minute, 150 in five.
/// let steady = AdmissionCounts::new(30, 150);
/// assert_eq!(estimate_wait(100, steady), Some(Duration::from_secs(250))); // 200 s, +25 %
/// assert_eq!(estimate_wait(100, AdmissionCounts::new(0, 0)), None);
/// // A stall in the last minute lengthens the estimate, it does not erase it.
/// assert!(estimate_wait(100, AdmissionCounts::new(0, 120)).unwrap() > Duration::from_secs(250));
/// ```
pub fn estimate_wait(position: u64, recent: AdmissionCounts) -> Option<Duration> {
    let rate = ETA_RECENT_WEIGHT * recent.per_second_last_minute()
        + (1.0 - ETA_RECENT_WEIGHT) * recent.per_second_last_five_minutes();
    if recent.last_five_minutes == 0 || rate <= 0.0 {
        return None;
    }
    let secs = (position.max(1) as f64 / rate * ETA_SAFETY_FACTOR).ceil();
    // Capped at a year: beyond that the number means nothing, and it keeps the cast exact.
    Some(Duration::from_secs(secs.min(365.0 * 86_400.0) as u64))
}

/// How long a waiter at `position` should wait before asking again: a few seconds near the
/// front, growing to 30 s far back.
pub(crate) fn retry_after_for(position: u64) -> Duration {
    let secs = 2 + 2 * u64::from(position.max(1).ilog2());
    Duration::from_secs(secs.min(30))
}

pub(crate) const FULL_RETRY_AFTER: Duration = Duration::from_secs(30);
pub(crate) const UNAVAILABLE_RETRY_AFTER: Duration = Duration::from_secs(5);
pub(crate) const BUSY_RETRY_AFTER: Duration = Duration::from_secs(2);
/// A client that cannot solve a challenge (no JavaScript, no WebCrypto) looks again this late.
pub(crate) const CHALLENGE_RETRY_AFTER: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_blend_and_are_conservative() {
        // 1/s steady: 60 a minute, 300 in five.
        let steady = AdmissionCounts::new(60, 300);
        let eta = estimate_wait(60, steady).unwrap().as_secs();
        assert_eq!(eta, 75, "60 ahead at 1/s is 60 s, shown as 75 s");
        // A burst in the last minute shortens it, but only halfway.
        let burst = AdmissionCounts::new(240, 480);
        let e = estimate_wait(60, burst).unwrap().as_secs();
        assert!(e < eta && e > 60 / 4, "{e}");
        // Position 0 (never given by a store) is treated as 1.
        assert_eq!(estimate_wait(0, steady), estimate_wait(1, steady));
        // A trickle far back stays finite.
        let trickle = AdmissionCounts::new(0, 1);
        assert_eq!(
            estimate_wait(u64::MAX, trickle),
            Some(Duration::from_secs(365 * 86_400))
        );
    }

    #[test]
    fn retry_after_grows_with_position_and_is_capped() {
        assert_eq!(retry_after_for(1), Duration::from_secs(2));
        assert!(retry_after_for(10) > retry_after_for(1));
        assert!(retry_after_for(1_000) > retry_after_for(10));
        assert_eq!(retry_after_for(u64::MAX), Duration::from_secs(30));
    }
}
