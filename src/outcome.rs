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
//!
//! # Ending a slot (checkout finished)
//!
//! A visitor's slot normally ends by itself, `active_ttl` after their last request. When the app
//! knows the visitor is done (the order is placed), it can end the slot at once, so the next in
//! line is promoted at once instead of minutes later. Two ways, with the same effect:
//!
//! - a response header [`END_SLOT_HEADER`](crate::config::defaults::END_SLOT_HEADER)
//!   (`waiting-room-end-slot`, any value) on the app's response, for apps in any language
//!   behind a proxy as well as Rust handlers; the layer always strips it, so it never reaches
//!   the browser;
//! - [`Admission::end_slot`] from Rust, on the `Admission` in the request's extensions.
//!
//! Once the app's response is ready, the layer frees the slot in the store (a
//! [`release`](crate::store::Store::release)) **before** sending the response, so by the time
//! the browser sees it the slot is free and the next visitor's next request (or status poll)
//! lets them in. The response also removes the admission cookie (and carries no fresh token).
//! The queue cookie is kept, but its place was consumed when the visitor got in: a visitor who
//! comes back afterwards goes to the back of the line like anyone new, without the first-visit
//! redirect or a new proof of work. A client that keeps its admission token anyway (headers
//! instead of cookies, or a client that ignores the cleared cookie) keeps passing on the token
//! alone for at most `refresh` (15 s by default); its first heartbeat after that finds no slot.
//!
//! If the store fails while ending the slot, the failure is logged, the app's response is sent
//! all the same, and the slot expires by itself. A visitor let in without a slot
//! ([`AdmittedBy::FailOpen`]) has no slot to end: the header is stripped, nothing else happens.
//!
//! ```
//! use axum::{http::HeaderMap, routing::post, Extension, Router};
//! use tower_waiting_room::config::defaults::END_SLOT_HEADER;
//! use tower_waiting_room::{testing::TestRoom, Admission};
//!
//! // From Rust: the handler has the admission at hand.
//! async fn checkout(Extension(admission): Extension<Admission>) -> &'static str {
//!     // ... take the order ...
//!     admission.end_slot();
//!     "thank you for your order"
//! }
//!
//! // By a header: works from any handler (or a proxied app in another language).
//! async fn checkout_by_header() -> (HeaderMap, &'static str) {
//!     let mut headers = HeaderMap::new();
//!     headers.insert(END_SLOT_HEADER, "1".parse().unwrap());
//!     (headers, "thank you for your order")
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! # use axum::body::Body;
//! # use http::{header, Request};
//! # use tower::ServiceExt;
//! let room = TestRoom::new("shop", 1);
//! let app = Router::new()
//!     .route("/checkout", post(checkout))
//!     .route("/checkout-by-header", post(checkout_by_header))
//!     .layer(room.layer());
//! let (_, cookie) = room.admit().await;
//! let req = Request::post("/checkout").header(header::COOKIE, cookie).body(Body::empty()).unwrap();
//! let res = app.oneshot(req).await.unwrap();
//! // The slot is free already, and the admission cookie is removed.
//! # let stats = room.layer().stats().await.unwrap();
//! # assert_eq!(stats.admitted, 0);
//! # assert!(res.headers().get(header::SET_COOKIE).unwrap().to_str().unwrap().contains("Max-Age=0"));
//! # }
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
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
    /// The store could not be reached and the room drains
    /// ([`FailPolicy::Drain`](crate::FailPolicy::Drain)): let in without a slot, from the
    /// front of the line.
    Drained,
    /// A single-use checkout ticket, just accepted by the store (a gated route); the admission
    /// expires when the ticket does.
    Ticket,
}

/// A visitor who is inside: put into the request's extensions for handlers behind the layer.
///
/// Two admissions are equal when they say the same thing (room, session, expiry, how); whether
/// [`end_slot`](Self::end_slot) was called does not count.
#[derive(Clone, Debug)]
pub struct Admission {
    pub(crate) room: Arc<str>,
    pub(crate) session: SessionId,
    pub(crate) expires_at_ms: u64,
    pub(crate) by: AdmittedBy,
    /// Set by [`end_slot`](Self::end_slot), read by the layer once the app's response is ready.
    /// Shared by every clone, so a handler can end the slot through any of them.
    pub(crate) ended: Arc<AtomicBool>,
}

impl PartialEq for Admission {
    fn eq(&self, other: &Self) -> bool {
        self.room == other.room
            && self.session == other.session
            && self.expires_at_ms == other.expires_at_ms
            && self.by == other.by
    }
}

impl Eq for Admission {}

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

    /// Ends the visitor's slot once the app's response to this request is ready (checkout
    /// finished): the layer frees the slot in the store before sending the response, and
    /// removes the admission cookie; the next in line is let in at once. See
    /// [ending a slot](self#ending-a-slot-checkout-finished). Does nothing for
    /// [`AdmittedBy::FailOpen`] (there is no slot), nor once the response has left the layer.
    pub fn end_slot(&self) {
        self.ended.store(true, Ordering::Relaxed);
    }

    /// Whether [`end_slot`](Self::end_slot) was called on this admission (or a clone).
    pub fn is_slot_ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
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
        /// The estimated wait ([`estimate`](crate::eta::estimate)), on the safe side of the
        /// most likely one. `None` while estimating, paused, or when nobody was admitted in the
        /// last five minutes: the line is not moving, and no number is made up.
        eta: Option<Duration>,
        /// The likely range of the wait (`eta` lies in it), when there is an estimate: a page
        /// shows "2-4 min" rather than a false precision when the range is wide.
        eta_range: Option<(Duration, Duration)>,
        /// There is no estimate yet because the room is too young (or has let too few in) to
        /// know its pace: "estimating", not "the line is not moving".
        estimating: bool,
        /// When to ask again.
        retry_after: Duration,
        /// The room is paused by its operators: the line does not move until it resumes (no
        /// estimate meanwhile).
        paused: bool,
    },
    /// The sale is closed by its operators (`503`, state `closed`): nobody is let in. A waiter
    /// keeps their place for a reopening while they keep asking.
    Closed {
        /// When to ask again.
        retry_after: Duration,
    },
    /// The visitor's session was banned by the room's operators (`403`, state `banned`).
    Banned {
        /// When to look again (a ban ends; a new session is a new visitor).
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
    /// The room opens at a set time ([`EventSchedule`](crate::config::EventSchedule)) and has
    /// not yet: `503`, state `scheduled`. The visitor is registered in the pre-queue; at the
    /// opening the registrants stand in a random order fixed by their draws (a reload changes
    /// nothing), ahead of everyone who comes later.
    Scheduled {
        /// When the room opens.
        opens_at: SystemTime,
        /// How long until it opens, by the room's clock (the countdown's time left: a browser's
        /// own clock may be wrong).
        opens_in: Duration,
        /// When to ask again: the time to the opening, at most
        /// 60 s.
        retry_after: Duration,
    },
    /// The [risk decision](crate::defences::risk) found a new visitor high risk (an address in
    /// the room's listed networks, or the app's hook said so): `403 Forbidden`, state
    /// `refused`; no cookie, nothing stored.
    Refused {
        /// When to look again (the visitor is judged again then).
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
    /// The state's name as in the JSON answers: `waiting`, `closed`, `banned`, `full`,
    /// `unavailable`, `busy`, `limited`, `refused`, `challenge` or `scheduled`.
    pub fn state(&self) -> &'static str {
        match self {
            Rejection::Waiting { .. } => "waiting",
            Rejection::Closed { .. } => "closed",
            Rejection::Banned { .. } => "banned",
            Rejection::Full { .. } => "full",
            Rejection::Unavailable { .. } => "unavailable",
            Rejection::Busy { .. } => "busy",
            Rejection::Limited { .. } => "limited",
            Rejection::Refused { .. } => "refused",
            Rejection::Challenge { .. } => "challenge",
            Rejection::Scheduled { .. } => "scheduled",
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

    /// The likely range of the wait, for `Waiting` with an estimate.
    pub fn eta_range(&self) -> Option<(Duration, Duration)> {
        match *self {
            Rejection::Waiting { eta_range, .. } => eta_range,
            _ => None,
        }
    }

    /// Whether the room is still estimating its pace (no estimate yet), for `Waiting`.
    pub fn estimating(&self) -> bool {
        matches!(
            self,
            Rejection::Waiting {
                estimating: true,
                ..
            }
        )
    }

    /// Whether the line is paused, for `Waiting`.
    pub fn paused(&self) -> bool {
        matches!(self, Rejection::Waiting { paused: true, .. })
    }

    /// When the room opens, for `Scheduled`.
    pub fn opens_at(&self) -> Option<SystemTime> {
        match *self {
            Rejection::Scheduled { opens_at, .. } => Some(opens_at),
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
            | Rejection::Closed { retry_after }
            | Rejection::Banned { retry_after }
            | Rejection::Unavailable { retry_after }
            | Rejection::Busy { retry_after }
            | Rejection::Limited { retry_after }
            | Rejection::Refused { retry_after }
            | Rejection::Challenge { retry_after, .. }
            | Rejection::Scheduled { retry_after, .. } => retry_after,
        }
    }

    /// The HTTP status: 429 while waiting or limited, 403 for a challenge, a ban or a refusal,
    /// 503 otherwise (closed and scheduled included).
    pub fn status(&self) -> http::StatusCode {
        match self {
            Rejection::Waiting { .. } | Rejection::Limited { .. } => {
                http::StatusCode::TOO_MANY_REQUESTS
            }
            Rejection::Challenge { .. } | Rejection::Banned { .. } | Rejection::Refused { .. } => {
                http::StatusCode::FORBIDDEN
            }
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
/// A closed room is asked again this often: often enough to keep a waiter's place (well within
/// `queue_ttl`) and to see a reopening soon.
pub(crate) const CLOSED_RETRY_AFTER: Duration = Duration::from_secs(30);
/// A registrant waiting for a scheduled opening asks again at the opening, or this late if it
/// is further off (a client that re-checks now and then sees a moved opening).
pub(crate) const SCHEDULED_MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// A banned session is told to look again this late.
pub(crate) const BANNED_RETRY_AFTER: Duration = Duration::from_secs(300);
/// A waiter in a paused room asks again this often.
pub(crate) const PAUSED_RETRY_AFTER: Duration = Duration::from_secs(10);
/// A refused new visitor is told to look again this late (and is judged again then).
pub(crate) const REFUSED_RETRY_AFTER: Duration = Duration::from_secs(300);
/// A client that cannot solve a challenge (no JavaScript, no WebCrypto) looks again this late.
pub(crate) const CHALLENGE_RETRY_AFTER: Duration = Duration::from_secs(30);

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
