//! The room's own endpoints under `{prefix}/{room}/`: `status` (where do I stand, as JSON),
//! `events` (the same, pushed: see [`super::events`]), `leave` (give my place or slot back),
//! and with proof of work on, `proof`.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};

use super::reply::method_not_allowed;
use super::snapshot::Asking;
use super::visitor::{header_value, Carried, Visitor};
use super::{Next, Room};
use crate::defences::proof_of_work::PROOF_HEADER;
use crate::response::{json_response, StatusBody};
use crate::telemetry::{Outcome, Stage};
use crate::vocab::ADMISSION_TICKET;

impl Room {
    /// The endpoint `req` is for, answered or asked of the store; `None` when it is for none.
    pub(super) fn endpoint<B>(
        &self,
        req: &Request<B>,
        carried: &Carried<'_>,
        now: u64,
    ) -> Option<Next> {
        let path = req.uri().path();
        if !path.starts_with(&self.config.path_prefix) {
            return None;
        }
        if path == self.paths.status {
            Some(self.status(req, carried, now))
        } else if path == self.paths.events {
            Some(self.events(req, carried, now))
        } else if path == self.paths.leave {
            Some(self.leave(req, carried, now))
        } else if path == self.paths.proof && self.defences.proof.is_some() {
            Some(Next::Answer(self.prove(req, carried, now)))
        } else {
            None
        }
    }

    /// `GET` (or `HEAD`): the visitor's state as JSON. Admitted visitors (unless the room
    /// mints single-use tickets: then their ticket is minted or found) and visitors with a
    /// challenge to solve are answered without the store.
    fn status<B>(&self, req: &Request<B>, carried: &Carried<'_>, now: u64) -> Next {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return Next::Answer(method_not_allowed("GET, HEAD"));
        }
        let room = self.config.room();
        match self.visitor(req, carried, now) {
            // Single-use tickets on: the visitor's ticket, minted or found (a store call).
            Some(Visitor::Admitted(token)) if self.mints_tickets() => {
                match self.check_polls(token.session(), now) {
                    Ok(()) => self.ask_status_ticket(
                        token.session(),
                        token.expires_at_ms(),
                        carried.uses_headers(),
                        now,
                    ),
                    Err(wait) => self.endpoint_limited(wait, req),
                }
            }
            Some(Visitor::Admitted(token)) => {
                // A client that uses headers (an app, another backend) gets its token as the
                // ticket for gated routes; a browser never does: its token is `HttpOnly`, and
                // must not reach the page's scripts. Re-signed as it is (same claims), so the
                // ticket is worth no more than the token.
                let ticket = carried.uses_headers().then(|| token.sign(&self.keys, room));
                let body = StatusBody {
                    ticket: ticket.as_deref(),
                    ..StatusBody::plain(room, "admitted")
                };
                let mut res = json_response(StatusCode::OK, &body);
                if let Some(value) = ticket.and_then(|t| HeaderValue::try_from(t).ok()) {
                    res.headers_mut().insert(ADMISSION_TICKET, value);
                }
                self.counted(Stage::Endpoint, Outcome::Admitted, Next::Answer(res))
            }
            // Proof of work to do first: the challenge, always as JSON here, no store call.
            Some(Visitor::Queued(cookie)) if self.needs_proof(&cookie) => {
                let (rejection, challenge) = self.new_challenge(cookie.session(), now);
                let body = StatusBody {
                    challenge: Some(&challenge),
                    proof_path: Some(&self.paths.proof),
                    ..StatusBody::from_rejection(room, &rejection)
                };
                let res = json_response(StatusCode::OK, &body);
                self.counted(Stage::Endpoint, Outcome::Challenge, Next::Answer(res))
            }
            Some(Visitor::Queued(cookie)) => match self.check_polls(cookie.session(), now) {
                Ok(()) => self
                    .waiting_poll_at_gateway(
                        req,
                        cookie,
                        carried.uses_headers(),
                        Asking::Status,
                        now,
                    )
                    .unwrap_or_else(|| self.ask_status(cookie, carried.uses_headers())),
                Err(wait) => self.endpoint_limited(wait, req),
            },
            None => self.counted(
                Stage::Endpoint,
                Outcome::Unknown,
                Next::Answer(json_response(
                    StatusCode::OK,
                    &StatusBody::plain(room, "unknown"),
                )),
            ),
        }
    }

    /// `POST`: frees the visitor's place or slot now and removes both cookies. A store call, so
    /// within the session's poll limit.
    fn leave<B>(&self, req: &Request<B>, carried: &Carried<'_>, now: u64) -> Next {
        if req.method() != Method::POST {
            return Next::Answer(method_not_allowed("POST"));
        }
        match self.visitor(req, carried, now) {
            Some(visitor) => match self.check_polls(visitor.session(), now) {
                Ok(()) => self.ask_leave(visitor.session()),
                // Both cookies are kept: the place or slot is still held, try again later.
                Err(wait) => self.endpoint_limited(wait, req),
            },
            None => self.counted(Stage::Endpoint, Outcome::Left, Next::Answer(self.left(req))),
        }
    }

    /// The proof endpoint: `POST` with `<challenge>:<nonce>` in the proof header. A valid
    /// solution turns the visitor's queue cookie into a proven one (`200`,
    /// `{"state":"proven"}`); anything else gets `403` and a fresh challenge. Each submission
    /// counts against the per-session poll limit, so the room cannot be made to check guesses.
    fn prove<B>(&self, req: &Request<B>, carried: &Carried<'_>, now: u64) -> Response<Bytes> {
        if req.method() != Method::POST {
            return method_not_allowed("POST");
        }
        let room = self.config.room();
        let Some(cookie) = self.queue_cookie(req, carried, now) else {
            let res = json_response(StatusCode::FORBIDDEN, &StatusBody::plain(room, "unknown"));
            return self.counted(Stage::Endpoint, Outcome::Unknown, res);
        };
        if cookie.is_proven() {
            let res = json_response(StatusCode::OK, &StatusBody::plain(room, "proven"));
            return self.counted(Stage::Endpoint, Outcome::Passed, res);
        }
        if let Err(wait) = self.check_polls(cookie.session(), now) {
            return self.counted(Stage::Endpoint, Outcome::Limited, self.limited(wait, req));
        }
        let gate = self
            .defences
            .proof
            .as_ref()
            .expect("only routed with proof of work on");
        let proof = header_value(req, &HeaderName::from_static(PROOF_HEADER));
        let accepted =
            proof.map(|p| gate.accept(&self.keys, room, p.trim(), cookie.session(), now));
        if let Some(Err(why)) = accepted {
            tracing::debug!(room, ?why, "proof of work refused");
        }
        if !matches!(accepted, Some(Ok(()))) {
            let res = self.challenge(req, cookie.session(), now);
            return self.counted(Stage::Endpoint, Outcome::Challenge, res);
        }
        let mut res = json_response(StatusCode::OK, &StatusBody::plain(room, "proven"));
        self.issue_queue_cookie(carried.uses_headers(), cookie.into_proven(), now)
            .apply(res.headers_mut());
        self.counted(Stage::Endpoint, Outcome::Passed, res)
    }

    /// An endpoint's question over the session's poll limit.
    fn endpoint_limited<B>(&self, wait: std::time::Duration, req: &Request<B>) -> Next {
        let res = self.limited(wait, req);
        self.counted(Stage::Endpoint, Outcome::Limited, Next::Answer(res))
    }
}
