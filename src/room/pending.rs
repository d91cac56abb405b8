//! Stage 3: the store steps. Each [`Pending`] step holds its store call and the context its
//! answer needs, and turns the answer into the [`Next`] thing to do, so a step can never be
//! paired with another step's answer.
//!
//! The room's decision code: the stages below it (gates, tickets, the snapshot, event streams)
//! answer with a [`Verdict`] whose step is their own, and the conversions here turn it into
//! a [`Next`].

use std::convert::Infallible;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};

use super::events::EventsStart;
use super::gate::GateHeartbeat;
use super::ladder::{self, Asker, Failed, Rung};
use super::reply::{
    banned_rejection, closed_rejection, error_rejection, full_rejection, rejection_json,
    scheduled_rejection, store_error_json, waiting_rejection, Issued, Replies,
};
use super::shared::Core;
use super::snapshot::{Asking, SyncStep, WaitingPoll};
use super::ticket::{MintWithSlot, Redeem, StatusTicket};
use super::verdict::Verdict;
use super::visitor::queue_cookie_again;
use super::Room;
use crate::clock::{duration_ms, secs_ceil};
use crate::outcome::{Admission, AdmittedBy};
use crate::response::{json_response, StatusBody};
use crate::session::SessionId;
use crate::store::{Decision, MintFor, Place, StoreError, StoreErrorKind, StoreFuture};
use crate::telemetry::{Outcome, Stage};
use crate::token::{AdmissionToken, QueueCookie};

/// What to do with a request.
pub(crate) enum Next {
    /// Call the inner service, with the admission in the request's extensions and, when the
    /// store just granted or extended the slot, a fresh admission token on the response.
    Pass {
        admission: Admission,
        set_cookie: Option<Issued>,
    },
    /// Answer here.
    Answer(Response<Bytes>),
    /// Answer here with a waiter's event stream.
    Events(EventsStart),
    /// Ask the store, then do what the step says with its answer. Boxed: the response future
    /// keeps it boxed, and the fast path's `Next` stays small to move.
    Ask(Box<Pending>),
}

impl Next {
    /// Pass, with nothing to add to the response.
    pub(crate) fn pass(admission: Admission) -> Self {
        Next::Pass {
            admission,
            set_cookie: None,
        }
    }

    /// Ask the store first.
    pub(crate) fn ask(pending: Pending) -> Self {
        Next::Ask(Box::new(pending))
    }
}

/// A stage's verdict, its own step made the room's.
impl<S: Into<Next>> From<Verdict<S>> for Next {
    fn from(verdict: Verdict<S>) -> Self {
        match verdict {
            Verdict::Pass {
                admission,
                set_cookie,
            } => Next::Pass {
                admission,
                set_cookie,
            },
            Verdict::Answer(res) => Next::Answer(res),
            Verdict::Step(step) => step.into(),
        }
    }
}

/// A verdict without a step of its own.
impl From<Infallible> for Next {
    fn from(never: Infallible) -> Self {
        match never {}
    }
}

impl From<EventsStart> for Next {
    fn from(start: EventsStart) -> Self {
        Next::Events(start)
    }
}

impl From<GateHeartbeat> for Next {
    fn from(step: GateHeartbeat) -> Self {
        Next::ask(Pending::Gate(step))
    }
}

impl From<SyncStep> for Next {
    fn from(step: SyncStep) -> Self {
        Next::ask(Pending::Sync(step))
    }
}

impl From<MintWithSlot> for Next {
    fn from(step: MintWithSlot) -> Self {
        Next::ask(Pending::MintWithSlot(step))
    }
}

impl From<StatusTicket> for Next {
    fn from(step: StatusTicket) -> Self {
        Next::ask(Pending::StatusTicket(step))
    }
}

impl From<Redeem> for Next {
    fn from(step: Redeem) -> Self {
        Next::ask(Pending::Redeem(step))
    }
}

/// A store question in flight, with what its answer will need.
pub(crate) enum Pending {
    /// Stage 3 for a visitor with a queue cookie. `stale_token`: the visitor's admission token
    /// is still valid but its slot is gone, so a rejection also removes the token cookie.
    Enter {
        call: StoreFuture<Decision>,
        session: SessionId,
        /// The visitor's queue cookie, issued again when the store says another place.
        cookie: Option<QueueCookie>,
        stale_token: bool,
        uses_headers: bool,
    },
    /// An admitted visitor whose token is past `refresh` but not expired.
    Heartbeat {
        call: StoreFuture<Decision>,
        token: AdmissionToken,
        uses_headers: bool,
    },
    /// The status endpoint.
    Status {
        call: StoreFuture<Decision>,
        cookie: QueueCookie,
        uses_headers: bool,
    },
    /// The gateway's snapshot is due: refreshed, then the waiting poll that found it due is
    /// answered (see `snapshot`).
    Sync(SyncStep),
    /// The leave endpoint.
    Leave { call: StoreFuture<bool> },
    /// A valid admission token past `refresh` on a gated route (see `gate`).
    Gate(GateHeartbeat),
    /// Single-use tickets on: the store just granted or extended the visitor's slot (a new
    /// slot, a claimed grant, or a heartbeat), and is asked for their ticket (minted, or found
    /// and extended with the slot) before the request passes.
    MintWithSlot(MintWithSlot),
    /// The status endpoint for a visitor with a valid admission token, single-use tickets on.
    StatusTicket(StatusTicket),
    /// A gated route's single-use ticket, being used.
    Redeem(Redeem),
}

impl Pending {
    /// Waits for the store's answer, then says what to do next.
    pub(crate) fn poll_next<B>(
        &mut self,
        cx: &mut Context<'_>,
        room: &Room,
        req: &Request<B>,
    ) -> Poll<Next> {
        Poll::Ready(match self {
            Pending::Enter {
                call,
                session,
                cookie,
                stale_token,
                uses_headers,
            } => {
                let answer = ready!(call.as_mut().poll(cx));
                let asked = Asked {
                    session: *session,
                    uses_headers: *uses_headers,
                    now: room.now_ms(),
                };
                Self::after_enter(room, asked, *cookie, *stale_token, answer, req)
            }
            Pending::Heartbeat {
                call,
                token,
                uses_headers,
            } => {
                let answer = ready!(call.as_mut().poll(cx));
                let asked = Asked {
                    session: token.session(),
                    uses_headers: *uses_headers,
                    now: room.now_ms(),
                };
                Self::after_heartbeat(room, asked, *token, answer, req)
            }
            Pending::Status {
                call,
                cookie,
                uses_headers,
            } => {
                let answer = ready!(call.as_mut().poll(cx));
                Next::Answer(Self::after_status(room, answer, *cookie, *uses_headers))
            }
            Pending::Sync(step) => match ready!(step.poll_answer(cx, room, req)) {
                Ok(res) => Next::Answer(res),
                Err(poll) => Self::unanswered(&room.core, poll),
            },
            Pending::Gate(step) => ready!(step.poll_next(cx, room, req)).into(),
            Pending::MintWithSlot(step) => ready!(step.poll_next(cx, room)).into(),
            Pending::StatusTicket(step) => Next::Answer(ready!(step.poll_answer(cx, room))),
            Pending::Redeem(step) => ready!(step.poll_next(cx, room)).into(),
            Pending::Leave { call } => Next::Answer(match ready!(call.as_mut().poll(cx)) {
                Ok(_) => room.core.counted(
                    Stage::Endpoint,
                    Outcome::Left,
                    Replies(&room.core).left(req),
                ),
                // Both cookies kept, whatever the fail policy: the place or slot may still be
                // held, and leaving again later frees it.
                Err(e) => {
                    room.failures.log(&room.core, &e, "leave");
                    room.core
                        .metrics
                        .request(Stage::Endpoint, Outcome::of_error(&e, false));
                    store_error_json(room.core.config.room(), &e)
                }
            }),
        })
    }
}

/// Who a store answer is for, and when it came.
#[derive(Clone, Copy)]
struct Asked {
    session: SessionId,
    /// Whether the visitor carries the room's values in headers (read with the request's
    /// cookies, before the store was asked).
    uses_headers: bool,
    now: u64,
}

impl Pending {
    pub(crate) fn enter(
        core: &Core,
        session: SessionId,
        cookie: Option<QueueCookie>,
        stale_token: bool,
        uses_headers: bool,
    ) -> Next {
        // A cookie without a place: as far as this gateway knows, a newcomer.
        let call = if cookie.as_ref().and_then(QueueCookie::place).is_some() {
            core.store.enter(&core.config.policy, session)
        } else {
            core.store.join(&core.config.policy, session)
        };
        Next::ask(Pending::Enter {
            call,
            session,
            cookie,
            stale_token,
            uses_headers,
        })
    }

    pub(crate) fn heartbeat(core: &Core, token: AdmissionToken, uses_headers: bool) -> Next {
        Next::ask(Pending::Heartbeat {
            call: core.store.heartbeat(&core.config.policy, token.session()),
            token,
            uses_headers,
        })
    }

    pub(crate) fn status(core: &Core, cookie: QueueCookie, uses_headers: bool) -> Next {
        Next::ask(Pending::Status {
            call: core.store.poll(&core.config.policy, cookie.session()),
            cookie,
            uses_headers,
        })
    }

    /// A waiting poll the gateway's snapshot could not answer: the store is asked, as it is
    /// without a snapshot.
    fn unanswered(core: &Core, poll: WaitingPoll) -> Next {
        let WaitingPoll {
            cookie,
            uses_headers,
            asking,
        } = poll;
        match asking {
            Asking::Page => Self::enter(core, cookie.session(), Some(cookie), false, uses_headers),
            Asking::Status => Self::status(core, cookie, uses_headers),
        }
    }

    /// `res`, with the queue cookie issued again if the store placed the visitor elsewhere
    /// than it says: the gateway answers their next polls from its snapshot by it.
    fn with_place(
        room: &Room,
        mut res: Response<Bytes>,
        cookie: Option<QueueCookie>,
        place: Option<Place>,
        uses_headers: bool,
        now: u64,
    ) -> Response<Bytes> {
        let core = &room.core;
        if let (Some(cookie), Some(place)) = (cookie, place) {
            if cookie.place() != Some(place) && room.line.supported() {
                Replies(core)
                    .issue_queue_cookie(uses_headers, cookie.with_place(place), now)
                    .apply(res.headers_mut());
            }
        }
        res
    }

    pub(crate) fn leave(core: &Core, session: SessionId) -> Next {
        Next::ask(Pending::Leave {
            call: core.store.release(&core.config.policy, session),
        })
    }

    fn after_enter<B>(
        room: &Room,
        asked: Asked,
        cookie: Option<QueueCookie>,
        stale_token: bool,
        answer: Result<Decision, StoreError>,
        req: &Request<B>,
    ) -> Next {
        let core = &room.core;
        room.failures.count_answer(core, Stage::Store, &answer);
        let next = match answer {
            Ok(Decision::Admitted { expires_at_ms }) => {
                // A new slot or a claimed grant: with tickets on, the visitor's ticket too.
                let (admission, token) = Self::admitted(room, asked, expires_at_ms, req);
                return room
                    .tickets
                    .with_slot(
                        core,
                        admission,
                        Some(token),
                        expires_at_ms,
                        MintFor::Admission,
                        asked.uses_headers,
                        asked.now,
                    )
                    .into();
            }
            Ok(Decision::Waiting {
                position,
                waiting,
                paused,
                pace,
                place,
                ..
            }) => {
                let pace = room.line.pace_for(pace, asked.now);
                let res =
                    Replies(core).reject(&waiting_rejection(position, waiting, paused, pace), req);
                Next::Answer(Self::with_place(
                    room,
                    res,
                    cookie,
                    place,
                    asked.uses_headers,
                    asked.now,
                ))
            }
            Ok(Decision::Full { waiting }) => {
                Next::Answer(Replies(core).reject(&full_rejection(waiting), req))
            }
            Ok(Decision::Closed) => Next::Answer(Replies(core).reject(&closed_rejection(), req)),
            Ok(Decision::Banned) => Next::Answer(Replies(core).reject(&banned_rejection(), req)),
            Ok(Decision::Scheduled { opens_at_ms }) => Next::Answer(
                Replies(core).reject(&scheduled_rejection(opens_at_ms, asked.now), req),
            ),
            Ok(Decision::Unknown) => {
                let e = StoreError::new(StoreErrorKind::Protocol);
                Self::store_failed(room, asked, e, req)
            }
            Err(e) => Self::store_failed(room, asked, e, req),
        };
        // Any answer here (waiting, full, busy, closed) to a visitor whose token outlived its
        // slot also removes the token, so it stops costing a heartbeat on every request.
        match next {
            Next::Answer(res) if stale_token => Next::Answer(Replies(core).without_token(res)),
            next => next,
        }
    }

    fn after_heartbeat<B>(
        room: &Room,
        asked: Asked,
        token: AdmissionToken,
        answer: Result<Decision, StoreError>,
        req: &Request<B>,
    ) -> Next {
        let core = &room.core;
        match answer {
            Ok(Decision::Admitted { expires_at_ms }) => {
                let (admission, token) = core.counted(
                    Stage::Store,
                    Outcome::Admitted,
                    Self::admitted(room, asked, expires_at_ms, req),
                );
                // The slot lives on: with tickets on, so does its ticket (the same one,
                // extended; a browser never asks the status endpoint once inside). Its record
                // found lost reads as used: this admission had its ticket.
                room.tickets
                    .with_slot(
                        core,
                        admission,
                        Some(token),
                        expires_at_ms,
                        MintFor::Renewal,
                        asked.uses_headers,
                        asked.now,
                    )
                    .into()
            }
            // The slot is gone (expired or released): back to stage 3 as a queued visitor, a
            // second store call, so a second count against the poll limit. Over it, the token
            // (whose slot is known to be gone) is removed, and no store call is made.
            Ok(_) => match core.check_polls(asked.session, asked.now) {
                // Without the queue cookie (not read for a token holder): a place it carries from
                // an earlier wait is ahead of the line now, so the gateway's snapshot sends the
                // next poll to the store, whose answer then goes into the cookie.
                Ok(()) => Self::enter(core, asked.session, None, true, asked.uses_headers),
                Err(wait) => Next::Answer(core.counted(
                    Stage::Store,
                    Outcome::Limited,
                    Replies(core).without_token(Replies(core).limited(wait, req)),
                )),
            },
            // The token is valid and its check needs no store: keep letting it through.
            Err(e) => {
                room.failures
                    .log(core, &e, "heartbeat (the valid token passes)");
                core.counted(
                    Stage::Store,
                    Outcome::Passed,
                    Next::pass(core.token_admission(&token)),
                )
            }
        }
    }

    fn after_status(
        room: &Room,
        answer: Result<Decision, StoreError>,
        cookie: QueueCookie,
        uses_headers: bool,
    ) -> Response<Bytes> {
        let core = &room.core;
        room.failures.count_answer(core, Stage::Endpoint, &answer);
        let name = core.config.room();
        let body = |rejection| StatusBody::from_rejection(name, rejection);
        match answer {
            Ok(Decision::Admitted { .. }) => {
                json_response(StatusCode::OK, &StatusBody::plain(name, "admitted"))
            }
            Ok(Decision::Waiting {
                position,
                waiting,
                paused,
                pace,
                place,
                ..
            }) => {
                let now = core.now_ms();
                let pace = room.line.pace_for(pace, now);
                let res = json_response(
                    StatusCode::OK,
                    &body(&waiting_rejection(position, waiting, paused, pace)),
                );
                Self::with_place(room, res, Some(cookie), place, uses_headers, now)
            }
            // As a request to the site would get: 503 closed, 403 banned (the page then reloads
            // and shows why).
            Ok(Decision::Closed) => rejection_json(name, &closed_rejection()),
            Ok(Decision::Banned) => rejection_json(name, &banned_rejection()),
            Ok(Decision::Scheduled { opens_at_ms }) => {
                Replies(core).status_json(&scheduled_rejection(opens_at_ms, core.now_ms()))
            }
            Ok(Decision::Full { waiting }) => {
                json_response(StatusCode::OK, &body(&full_rejection(waiting)))
            }
            Ok(Decision::Unknown) => {
                let mut res = json_response(StatusCode::OK, &StatusBody::plain(name, "unknown"));
                // The place the cookie carries is nobody's now: without it, the visitor's next
                // request goes to the store (which gives a new place), not to the snapshot.
                if cookie.place().is_some() {
                    let now = core.now_ms();
                    Replies(core)
                        .issue_queue_cookie(uses_headers, cookie.without_place(), now)
                        .apply(res.headers_mut());
                }
                res
            }
            Err(e) => Self::status_failed(room, &e, &cookie),
        }
    }

    /// A failed status question gets at least what a newcomer would: the people who waited
    /// longest must not be the only ones kept out. Let in by the fail policy, the waiting page
    /// is told `open` (the line is not enforced right now; distinct from `admitted`, which
    /// means the store holds a slot for them): it reloads the page it was for, which passes the
    /// same way. Draining, the others see their place moved up. Otherwise what the ladder says,
    /// as JSON (`503` busy, as for a newcomer).
    fn status_failed(room: &Room, e: &StoreError, cookie: &QueueCookie) -> Response<Bytes> {
        let core = &room.core;
        room.failures.log(core, e, "status");
        let failed = Failed {
            error: e,
            cookie: Some(cookie),
            asker: Asker::Status,
            now: core.now_ms(),
        };
        let rung = ladder::climb(core, &room.line, &failed);
        core.metrics.request(Stage::Endpoint, rung.outcome(e));
        let name = core.config.room();
        match rung {
            Rung::In(_) => json_response(StatusCode::OK, &StatusBody::plain(name, "open")),
            Rung::Scheduled(rejection) | Rung::Waiting(rejection) => {
                Replies(core).status_json(&rejection)
            }
            Rung::Closed => rejection_json(name, &closed_rejection()),
            Rung::Busy => store_error_json(name, e),
        }
    }

    /// A failed store call for a visitor without a valid token: what the failure ladder says.
    fn store_failed<B>(room: &Room, asked: Asked, e: StoreError, req: &Request<B>) -> Next {
        let core = &room.core;
        room.failures.log(core, &e, "enter");
        // Read again on this rare path only (the request's first read was not kept): the
        // place it carries decides a closing that keeps the line, and draining.
        let cookie = (!e.store_answered())
            .then(|| queue_cookie_again(core, req, asked.now))
            .flatten();
        let failed = Failed {
            error: &e,
            cookie: cookie.as_ref(),
            asker: Asker::Page,
            now: asked.now,
        };
        let rung = ladder::climb(core, &room.line, &failed);
        core.metrics.request(Stage::Store, rung.outcome(&e));
        match rung {
            Rung::In(by) => Next::pass(core.admission(
                asked.session,
                asked.now + duration_ms(core.config.settings.refresh),
                by,
            )),
            Rung::Scheduled(rejection) | Rung::Waiting(rejection) => {
                Next::Answer(Replies(core).reject(&rejection, req))
            }
            Rung::Closed => Next::Answer(Replies(core).reject(&closed_rejection(), req)),
            Rung::Busy => Next::Answer(Replies(core).reject(&error_rejection(&e), req)),
        }
    }

    /// The store granted or extended the slot: the admission the request passes with, and a
    /// fresh admission token.
    fn admitted<B>(
        room: &Room,
        asked: Asked,
        expires_at_ms: u64,
        req: &Request<B>,
    ) -> (Admission, Issued) {
        let core = &room.core;
        let Asked {
            session,
            uses_headers,
            now,
        } = asked;
        let mut token = AdmissionToken::new(session, now, expires_at_ms);
        if let Some(network) = core.network_binding(req) {
            token = token.bound_to(network);
        }
        let value = token.sign(&core.keys, core.config.room());
        let issued = Replies(core).issue(
            uses_headers,
            &core.config.cookies.admission_name,
            &core.config.token_header,
            value,
            secs_ceil(expires_at_ms.saturating_sub(now)),
        );
        (
            core.admission(session, expires_at_ms, AdmittedBy::Store),
            issued,
        )
    }
}
