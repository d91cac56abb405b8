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
}

impl Rejection {
    /// The state's name as in the JSON answers: `waiting`, `full`, `unavailable` or `busy`.
    pub fn state(&self) -> &'static str {
        match self {
            Rejection::Waiting { .. } => "waiting",
            Rejection::Full { .. } => "full",
            Rejection::Unavailable { .. } => "unavailable",
            Rejection::Busy { .. } => "busy",
        }
    }

    /// When the client should ask again.
    pub fn retry_after(&self) -> Duration {
        match *self {
            Rejection::Waiting { retry_after, .. }
            | Rejection::Full { retry_after, .. }
            | Rejection::Unavailable { retry_after }
            | Rejection::Busy { retry_after } => retry_after,
        }
    }

    /// The HTTP status: 429 while waiting, 503 otherwise.
    pub fn status(&self) -> http::StatusCode {
        match self {
            Rejection::Waiting { .. } => http::StatusCode::TOO_MANY_REQUESTS,
            _ => http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_grows_with_position_and_is_capped() {
        assert_eq!(retry_after_for(1), Duration::from_secs(2));
        assert!(retry_after_for(10) > retry_after_for(1));
        assert!(retry_after_for(1_000) > retry_after_for(10));
        assert_eq!(retry_after_for(u64::MAX), Duration::from_secs(30));
    }
}
