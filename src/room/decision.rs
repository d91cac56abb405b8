//! Stage 3: the store's decision for a visitor, made the visitor's answer. Four steps, each
//! holding its store call and what its answer needs: [`Enter`] (a visitor with a queue cookie,
//! or a token whose slot is gone), [`Heartbeat`] (an admitted visitor past `refresh`),
//! [`Status`] (the status endpoint) and [`Leave`] (the leave endpoint). A failed call gets what
//! the failure ladder says ([`ladder`]).
//!
//! What a decision reads of the room is [`Reads`]: the shared parts, the memory of failed
//! calls, the gateway's snapshot (the pace shown, the places it answers by, draining) and the
//! tickets (a new slot's ticket).

use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};

use super::failure::FailureLog;
use super::ladder::{self, Asker, Failed, Rung};
use super::pending::{Next, Pending};
use super::reply::{
    banned_rejection, closed_rejection, error_rejection, full_rejection, rejection_json,
    scheduled_rejection, store_error_json, waiting_rejection, Issued, Replies,
};
use super::shared::Core;
use super::snapshot::{Asking, LineView, WaitingPoll};
use super::ticket::Tickets;
use super::visitor::queue_cookie_again;
use crate::clock::{duration_ms, secs_ceil};
use crate::outcome::{Admission, AdmittedBy};
use crate::response::{json_response, StatusBody};
use crate::session::SessionId;
use crate::store::{Decision, MintFor, Place, StoreError, StoreErrorKind, StoreFuture};
use crate::telemetry::{Outcome, Stage};
use crate::token::{AdmissionToken, QueueCookie};

/// What a decision reads of the room.
#[derive(Clone, Copy)]
pub(super) struct Reads<'a> {
    pub(super) core: &'a Core,
    pub(super) failures: &'a FailureLog,
    pub(super) line: &'a LineView,
    pub(super) tickets: &'a Tickets,
}

/// A visitor with a queue cookie (or whose token outlived its slot) entering. `stale_token`:
/// the visitor's admission token is still valid but its slot is gone, so a rejection also
/// removes the token cookie.
pub(crate) struct Enter {
    call: StoreFuture<Decision>,
    session: SessionId,
    /// The visitor's queue cookie, issued again when the store says another place.
    cookie: Option<QueueCookie>,
    stale_token: bool,
    uses_headers: bool,
}

/// An admitted visitor whose token is past `refresh` but not expired.
pub(crate) struct Heartbeat {
    call: StoreFuture<Decision>,
    token: AdmissionToken,
    uses_headers: bool,
}

/// The status endpoint, for a visitor with a queue cookie.
pub(crate) struct Status {
    call: StoreFuture<Decision>,
    cookie: QueueCookie,
    uses_headers: bool,
}

/// The leave endpoint.
pub(crate) struct Leave {
    call: StoreFuture<bool>,
}

impl Enter {
    /// Waits for the store's answer, then says what to do next.
    pub(super) fn poll_next<B>(
        &mut self,
        cx: &mut Context<'_>,
        reads: Reads<'_>,
        req: &Request<B>,
    ) -> Poll<Next> {
        let answer = ready!(self.call.as_mut().poll(cx));
        let asked = Asked {
            session: self.session,
            uses_headers: self.uses_headers,
            now: reads.core.now_ms(),
        };
        Poll::Ready(reads.after_enter(asked, self.cookie, self.stale_token, answer, req))
    }
}

impl Heartbeat {
    /// Waits for the store's answer, then says what to do next.
    pub(super) fn poll_next<B>(
        &mut self,
        cx: &mut Context<'_>,
        reads: Reads<'_>,
        req: &Request<B>,
    ) -> Poll<Next> {
        let answer = ready!(self.call.as_mut().poll(cx));
        let asked = Asked {
            session: self.token.session(),
            uses_headers: self.uses_headers,
            now: reads.core.now_ms(),
        };
        Poll::Ready(reads.after_heartbeat(asked, self.token, answer, req))
    }
}

impl Status {
    /// Waits for the store's answer, then answers.
    pub(super) fn poll_answer(
        &mut self,
        cx: &mut Context<'_>,
        reads: Reads<'_>,
    ) -> Poll<Response<Bytes>> {
        let answer = ready!(self.call.as_mut().poll(cx));
        Poll::Ready(reads.after_status(answer, self.cookie, self.uses_headers))
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

impl Enter {
    /// Asks the store for the visitor's entry (a join, for a cookie without a place).
    pub(crate) fn ask(
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
        Next::ask(Pending::Enter(Enter {
            call,
            session,
            cookie,
            stale_token,
            uses_headers,
        }))
    }
}

impl Heartbeat {
    /// Asks the store to extend the visitor's slot.
    pub(crate) fn ask(core: &Core, token: AdmissionToken, uses_headers: bool) -> Next {
        Next::ask(Pending::Heartbeat(Heartbeat {
            call: core.store.heartbeat(&core.config.policy, token.session()),
            token,
            uses_headers,
        }))
    }
}

impl Status {
    /// Asks the store where the visitor stands.
    pub(crate) fn ask(core: &Core, cookie: QueueCookie, uses_headers: bool) -> Next {
        Next::ask(Pending::Status(Status {
            call: core.store.poll(&core.config.policy, cookie.session()),
            cookie,
            uses_headers,
        }))
    }
}

impl Leave {
    /// Asks the store to free the visitor's place or slot.
    pub(crate) fn ask(core: &Core, session: SessionId) -> Next {
        Next::ask(Pending::Leave(Leave {
            call: core.store.release(&core.config.policy, session),
        }))
    }

    /// Waits for the store's answer, then answers.
    pub(super) fn poll_answer<B>(
        &mut self,
        cx: &mut Context<'_>,
        core: &Core,
        failures: &FailureLog,
        req: &Request<B>,
    ) -> Poll<Response<Bytes>> {
        Poll::Ready(match ready!(self.call.as_mut().poll(cx)) {
            Ok(_) => core.counted(Stage::Endpoint, Outcome::Left, Replies(core).left(req)),
            // Both cookies kept, whatever the fail policy: the place or slot may still be
            // held, and leaving again later frees it.
            Err(e) => {
                failures.log(core, &e, "leave");
                core.metrics
                    .request(Stage::Endpoint, Outcome::of_error(&e, false));
                store_error_json(core.config.room(), &e)
            }
        })
    }
}

impl Reads<'_> {
    /// A waiting poll the gateway's snapshot could not answer: the store is asked, as it is
    /// without a snapshot.
    pub(super) fn unanswered(self, poll: WaitingPoll) -> Next {
        let core = self.core;
        let WaitingPoll {
            cookie,
            uses_headers,
            asking,
        } = poll;
        match asking {
            Asking::Page => Enter::ask(core, cookie.session(), Some(cookie), false, uses_headers),
            Asking::Status => Status::ask(core, cookie, uses_headers),
        }
    }

    /// `res`, with the queue cookie issued again if the store placed the visitor elsewhere
    /// than it says: the gateway answers their next polls from its snapshot by it.
    fn with_place(
        self,
        mut res: Response<Bytes>,
        cookie: Option<QueueCookie>,
        place: Option<Place>,
        uses_headers: bool,
        now: u64,
    ) -> Response<Bytes> {
        let core = self.core;
        if let (Some(cookie), Some(place)) = (cookie, place) {
            if cookie.place() != Some(place) && self.line.supported() {
                Replies(core)
                    .issue_queue_cookie(uses_headers, cookie.with_place(place), now)
                    .apply(res.headers_mut());
            }
        }
        res
    }

    fn after_enter<B>(
        self,
        asked: Asked,
        cookie: Option<QueueCookie>,
        stale_token: bool,
        answer: Result<Decision, StoreError>,
        req: &Request<B>,
    ) -> Next {
        let core = self.core;
        self.failures.count_answer(core, Stage::Store, &answer);
        let next = match answer {
            Ok(Decision::Admitted { expires_at_ms }) => {
                // A new slot or a claimed grant: with tickets on, the visitor's ticket too.
                let (admission, token) = self.admitted(asked, expires_at_ms, req);
                return self
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
                let pace = self.line.pace_for(pace, asked.now);
                let ahead = self
                    .line
                    .ahead(core, asked.session, place, position, asked.now);
                let rejection = waiting_rejection(position, waiting, paused, pace, ahead);
                let res = Replies(core).reject(&rejection, req);
                Next::Answer(self.with_place(res, cookie, place, asked.uses_headers, asked.now))
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
                self.store_failed(asked, e, req)
            }
            Err(e) => self.store_failed(asked, e, req),
        };
        // Any answer here (waiting, full, busy, closed) to a visitor whose token outlived its
        // slot also removes the token, so it stops costing a heartbeat on every request.
        match next {
            Next::Answer(res) if stale_token => Next::Answer(Replies(core).without_token(res)),
            next => next,
        }
    }

    fn after_heartbeat<B>(
        self,
        asked: Asked,
        token: AdmissionToken,
        answer: Result<Decision, StoreError>,
        req: &Request<B>,
    ) -> Next {
        let core = self.core;
        match answer {
            Ok(Decision::Admitted { expires_at_ms }) => {
                let (admission, token) = core.counted(
                    Stage::Store,
                    Outcome::Admitted,
                    self.admitted(asked, expires_at_ms, req),
                );
                // The slot lives on: with tickets on, so does its ticket (the same one,
                // extended; a browser never asks the status endpoint once inside). Its record
                // found lost reads as used: this admission had its ticket.
                self.tickets
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
                Ok(()) => Enter::ask(core, asked.session, None, true, asked.uses_headers),
                Err(wait) => Next::Answer(core.counted(
                    Stage::Store,
                    Outcome::Limited,
                    Replies(core).without_token(Replies(core).limited(wait, req)),
                )),
            },
            // The token is valid and its check needs no store: keep letting it through.
            Err(e) => {
                self.failures
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
        self,
        answer: Result<Decision, StoreError>,
        cookie: QueueCookie,
        uses_headers: bool,
    ) -> Response<Bytes> {
        let core = self.core;
        self.failures.count_answer(core, Stage::Endpoint, &answer);
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
                let pace = self.line.pace_for(pace, now);
                let ahead = self
                    .line
                    .ahead(core, cookie.session(), place, position, now);
                let res = json_response(
                    StatusCode::OK,
                    &body(&waiting_rejection(position, waiting, paused, pace, ahead)),
                );
                self.with_place(res, Some(cookie), place, uses_headers, now)
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
            Err(e) => self.status_failed(&e, &cookie),
        }
    }

    /// A failed status question gets at least what a newcomer would: the people who waited
    /// longest must not be the only ones kept out. Let in by the fail policy, the waiting page
    /// is told `open` (the line is not enforced right now; distinct from `admitted`, which
    /// means the store holds a slot for them): it reloads the page it was for, which passes the
    /// same way. Draining, the others see their place moved up. Otherwise what the ladder says,
    /// as JSON (`503` busy, as for a newcomer).
    fn status_failed(self, e: &StoreError, cookie: &QueueCookie) -> Response<Bytes> {
        let core = self.core;
        self.failures.log(core, e, "status");
        let failed = Failed {
            error: e,
            cookie: Some(cookie),
            asker: Asker::Status,
            now: core.now_ms(),
        };
        let rung = ladder::climb(core, self.line, &failed);
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
    fn store_failed<B>(self, asked: Asked, e: StoreError, req: &Request<B>) -> Next {
        let core = self.core;
        self.failures.log(core, &e, "enter");
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
        let rung = ladder::climb(core, self.line, &failed);
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
        self,
        asked: Asked,
        expires_at_ms: u64,
        req: &Request<B>,
    ) -> (Admission, Issued) {
        let core = self.core;
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
        let replies = Replies(core);
        let issued = replies.issue(
            uses_headers,
            &core.config.cookies.admission_name,
            &core.config.token_header,
            value,
            secs_ceil(expires_at_ms.saturating_sub(now)),
        );
        let issued = replies.with_edge(issued, uses_headers, session, now, expires_at_ms);
        (
            core.admission(session, expires_at_ms, AdmittedBy::Store),
            issued,
        )
    }
}
