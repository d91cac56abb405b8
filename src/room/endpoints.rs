//! The room's own endpoints under `{prefix}/{room}/`: `status` (where do I stand, as JSON),
//! `events` (the same, pushed: see [`super::events`]), `leave` (give my place or slot back),
//! with proof of work on, `proof`, and with edge tokens on, `keys` (the public keys, a JWKS).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};

use super::decision::{Leave, Status};
use super::events::EventStreams;
use super::pending::Next;
use super::reply::{method_not_allowed, Replies};
use super::shared::Core;
use super::snapshot::Asking;
use super::snapshot::LineView;
use super::ticket::Tickets;
use super::visitor::{header_value, Carried, Visitor};
use crate::defences::proof_of_work::PROOF_HEADER;
use crate::edge::EdgeTokens;
use crate::response::{json_response, StatusBody};
use crate::telemetry::{Outcome, Stage};
use crate::vocab::ADMISSION_TICKET;

/// What the endpoints read of the room: its shared parts, the gateway's snapshot (a waiting
/// status answered from it), the open event streams, and the tickets (an admitted visitor's
/// status hands out theirs).
#[derive(Clone, Copy)]
pub(super) struct Endpoints<'a> {
    pub(super) core: &'a Core,
    pub(super) line: &'a Arc<LineView>,
    pub(super) streams: &'a EventStreams,
    pub(super) tickets: &'a Tickets,
}

/// The endpoint `req` is for, answered or asked of the store; `None` when it is for none.
pub(super) fn answer<B>(
    at: Endpoints<'_>,
    req: &Request<B>,
    carried: &Carried<'_>,
    now: u64,
) -> Option<Next> {
    let core = at.core;
    let path = req.uri().path();
    if !path.starts_with(&core.config.settings.path_prefix) {
        return None;
    }
    if path == core.paths.status {
        Some(status(at, req, carried, now))
    } else if path == core.paths.events {
        Some(at.streams.start(core, at.line, req, carried, now).into())
    } else if path == core.paths.leave {
        Some(leave(core, req, carried, now))
    } else if path == core.paths.proof && core.defences.proof.is_some() {
        Some(Next::Answer(prove(core, req, carried, now)))
    } else {
        let edge = core.edge.as_ref().filter(|_| path == core.paths.keys);
        edge.map(|edge| Next::Answer(keys(edge, req)))
    }
}

/// `GET` (or `HEAD`): the visitor's state as JSON. Admitted visitors (unless the room
/// mints single-use tickets: then their ticket is minted or found) and visitors with a
/// challenge to solve are answered without the store.
fn status<B>(at: Endpoints<'_>, req: &Request<B>, carried: &Carried<'_>, now: u64) -> Next {
    let core = at.core;
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Next::Answer(method_not_allowed("GET, HEAD"));
    }
    let name = core.config.room();
    match carried.visitor(core, req, now) {
        // Single-use tickets on: the visitor's ticket, minted or found (a store call).
        Some(Visitor::Admitted(token)) if at.tickets.mints() => {
            match core.check_polls(token.session(), now) {
                Ok(()) => at
                    .tickets
                    .ask_status(
                        core,
                        token.session(),
                        token.expires_at_ms(),
                        carried.uses_headers(),
                        now,
                    )
                    .into(),
                Err(wait) => limited(core, wait, req),
            }
        }
        Some(Visitor::Admitted(token)) => {
            // A client that uses headers (an app, another backend) gets its token as the
            // ticket for gated routes; a browser never does: its token is `HttpOnly`, and
            // must not reach the page's scripts. Re-signed as it is (same claims), so the
            // ticket is worth no more than the token.
            let ticket = carried.uses_headers().then(|| token.sign(&core.keys, name));
            let body = StatusBody {
                ticket: ticket.as_deref(),
                ..StatusBody::plain(name, "admitted")
            };
            let mut res = json_response(StatusCode::OK, &body);
            if let Some(value) = ticket.and_then(|t| HeaderValue::try_from(t).ok()) {
                res.headers_mut().insert(ADMISSION_TICKET, value);
            }
            core.counted(Stage::Endpoint, Outcome::Admitted, Next::Answer(res))
        }
        // Proof of work to do first: the challenge, always as JSON here, no store call.
        Some(Visitor::Queued(cookie)) if core.needs_proof(&cookie) => {
            let (rejection, challenge) = Replies(core).new_challenge(cookie.session(), now);
            let body = StatusBody {
                challenge: Some(&challenge),
                proof_path: Some(&core.paths.proof),
                ..StatusBody::from_rejection(name, &rejection)
            };
            let res = json_response(StatusCode::OK, &body);
            core.counted(Stage::Endpoint, Outcome::Challenge, Next::Answer(res))
        }
        Some(Visitor::Queued(cookie)) => match core.check_polls(cookie.session(), now) {
            Ok(()) => at
                .line
                .at_gateway(
                    core,
                    req,
                    cookie,
                    carried.uses_headers(),
                    Asking::Status,
                    now,
                )
                .map(Next::from)
                .unwrap_or_else(|| Status::ask(core, cookie, carried.uses_headers())),
            Err(wait) => limited(core, wait, req),
        },
        None => core.counted(
            Stage::Endpoint,
            Outcome::Unknown,
            Next::Answer(json_response(
                StatusCode::OK,
                &StatusBody::plain(name, "unknown"),
            )),
        ),
    }
}

/// `POST`: frees the visitor's place or slot now and removes both cookies. A store call, so
/// within the session's poll limit.
fn leave<B>(core: &Core, req: &Request<B>, carried: &Carried<'_>, now: u64) -> Next {
    if req.method() != Method::POST {
        return Next::Answer(method_not_allowed("POST"));
    }
    match carried.visitor(core, req, now) {
        Some(visitor) => match core.check_polls(visitor.session(), now) {
            Ok(()) => Leave::ask(core, visitor.session()),
            // Both cookies are kept: the place or slot is still held, try again later.
            Err(wait) => limited(core, wait, req),
        },
        None => core.counted(
            Stage::Endpoint,
            Outcome::Left,
            Next::Answer(Replies(core).left(req)),
        ),
    }
}

/// The keys endpoint: `GET` (or `HEAD`) the room's public edge keys as a JWKS, for edges to
/// fetch; cacheable for five minutes (a rotation publishes the next key ahead of its use by at
/// least that).
fn keys<B>(edge: &EdgeTokens, req: &Request<B>) -> Response<Bytes> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return method_not_allowed("GET, HEAD");
    }
    let mut res = json_response(StatusCode::OK, &edge.keys().jwks());
    let headers = res.headers_mut();
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    headers.insert(
        http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    res
}

/// The proof endpoint: `POST` with `<challenge>:<nonce>` in the proof header. A valid
/// solution turns the visitor's queue cookie into a proven one (`200`,
/// `{"state":"proven"}`); anything else gets `403` and a fresh challenge. Each submission
/// counts against the per-session poll limit, so the room cannot be made to check guesses.
fn prove<B>(core: &Core, req: &Request<B>, carried: &Carried<'_>, now: u64) -> Response<Bytes> {
    if req.method() != Method::POST {
        return method_not_allowed("POST");
    }
    let room = core.config.room();
    let Some(cookie) = carried.queue_cookie(core, req, now) else {
        let res = json_response(StatusCode::FORBIDDEN, &StatusBody::plain(room, "unknown"));
        return core.counted(Stage::Endpoint, Outcome::Unknown, res);
    };
    if cookie.is_proven() {
        let res = json_response(StatusCode::OK, &StatusBody::plain(room, "proven"));
        return core.counted(Stage::Endpoint, Outcome::Passed, res);
    }
    if let Err(wait) = core.check_polls(cookie.session(), now) {
        return core.counted(
            Stage::Endpoint,
            Outcome::Limited,
            Replies(core).limited(wait, req),
        );
    }
    let gate = core
        .defences
        .proof
        .as_ref()
        .expect("only routed with proof of work on");
    let proof = header_value(req, &HeaderName::from_static(PROOF_HEADER));
    let accepted = proof.map(|p| gate.accept(&core.keys, room, p.trim(), cookie.session(), now));
    if let Some(Err(why)) = accepted {
        tracing::debug!(room, ?why, "proof of work refused");
    }
    if !matches!(accepted, Some(Ok(()))) {
        let res = Replies(core).challenge(req, cookie.session(), now);
        return core.counted(Stage::Endpoint, Outcome::Challenge, res);
    }
    let mut res = json_response(StatusCode::OK, &StatusBody::plain(room, "proven"));
    Replies(core)
        .issue_queue_cookie(carried.uses_headers(), cookie.into_proven(), now)
        .apply(res.headers_mut());
    core.counted(Stage::Endpoint, Outcome::Passed, res)
}

/// An endpoint's question over the session's poll limit.
fn limited<B>(core: &Core, wait: std::time::Duration, req: &Request<B>) -> Next {
    let res = Replies(core).limited(wait, req);
    core.counted(Stage::Endpoint, Outcome::Limited, Next::Answer(res))
}
