//! The room's own answers: the first-visit redirect, rejections rendered for browsers or as
//! JSON, cookies (and their headers) it issues, and the headers every answer carries.

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};

use super::shared::Core;
use super::snapshot::LineAhead;
use crate::clock::{duration_ms, secs_ceil};
use crate::cookies;
use crate::eta::{estimate, Eta, EtaInput};
use crate::outcome::{
    retry_after_for, Rejection, BANNED_RETRY_AFTER, BUSY_RETRY_AFTER, CHALLENGE_RETRY_AFTER,
    CLOSED_RETRY_AFTER, FULL_RETRY_AFTER, PAUSED_RETRY_AFTER, REFUSED_RETRY_AFTER,
    SCHEDULED_MAX_RETRY_AFTER, UNAVAILABLE_RETRY_AFTER,
};
use crate::response::{json_response, NotAdmittedBody, RenderContext, StatusBody};
use crate::session::SessionId;
use crate::store::{RoomPace, StoreError};
use crate::token::QueueCookie;

/// A freshly signed value for a response: its `Set-Cookie`, and for clients that use headers
/// instead of cookies, the same value in the room's response header. With single-use tickets,
/// an admission issues two values (the token and the ticket): the second rides in `more`.
///
/// One pointer: it travels in [`Next`](super::Next) and in the response future, which the fast
/// path moves several times per request without ever issuing anything.
#[derive(Debug)]
pub(crate) struct Issued(Box<IssuedValue>);

#[derive(Debug)]
struct IssuedValue {
    cookie: HeaderValue,
    header: Option<(HeaderName, HeaderValue)>,
    more: Option<Issued>,
}

impl IssuedValue {
    /// Adds the value (and the ones issued with it) to a response's headers.
    fn apply(self, headers: &mut HeaderMap) {
        let IssuedValue {
            cookie,
            header,
            more,
        } = self;
        headers.append(header::SET_COOKIE, cookie);
        if let Some((name, value)) = header {
            headers.insert(name, value);
        }
        if let Some(more) = more {
            more.apply(headers);
        }
    }
}

impl Issued {
    /// Adds the value (and the ones issued with it) to a response's headers.
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        self.0.apply(headers);
    }

    /// This value and `other`, both for the same response.
    pub(super) fn and(mut self, other: Issued) -> Issued {
        self.0.more = Some(match self.0.more.take() {
            Some(more) => more.and(other),
            None => other,
        });
        self
    }
}

/// The header that carries the edge token to clients that use headers.
static EDGE_TOKEN: HeaderName = HeaderName::from_static(crate::edge::EDGE_TOKEN_HEADER);

/// The room's own answers, made from its shared parts: `Replies(core).reject(..)`.
#[derive(Clone, Copy)]
pub(super) struct Replies<'a>(pub(super) &'a Core);

impl Replies<'_> {
    /// A signed value as cookie `cookie_name` (for `max_age_secs`), and in header `header_name`
    /// too when the client uses headers instead of cookies (see
    /// [`Carried::uses_headers`](super::visitor::Carried::uses_headers)).
    pub(super) fn issue(
        &self,
        uses_headers: bool,
        cookie_name: &str,
        header_name: &HeaderName,
        value: String,
        max_age_secs: u64,
    ) -> Issued {
        let cookie = cookies::set_cookie(
            &self.0.config.cookies,
            cookie_name,
            value.as_bytes(),
            max_age_secs,
        );
        // The value's own buffer becomes the header's bytes: signed values are made exactly as
        // long as their text, so there is no copy and no second allocation.
        let header = uses_headers
            .then(|| HeaderValue::try_from(value).ok())
            .flatten()
            .map(|v| (header_name.clone(), v));
        Issued(Box::new(IssuedValue {
            cookie,
            header,
            more: None,
        }))
    }

    /// The edge token of an admission of `session` until `expires_at_ms`, issued beside its
    /// admission token (see [`issue`](Self::issue)); `None` for a room without edge tokens.
    pub(super) fn issue_edge(
        &self,
        uses_headers: bool,
        session: SessionId,
        now: u64,
        expires_at_ms: u64,
    ) -> Option<Issued> {
        let edge = self.0.edge.as_ref()?;
        let (token, lives) = edge.issue(self.0.config.room(), session, now, expires_at_ms);
        Some(self.issue(
            uses_headers,
            &self.0.config.cookies.edge_name,
            &EDGE_TOKEN,
            token,
            lives.as_secs(),
        ))
    }

    /// `admission`, with the edge token of the same admission when the room has them.
    pub(super) fn with_edge(
        &self,
        admission: Issued,
        uses_headers: bool,
        session: SessionId,
        now: u64,
        expires_at_ms: u64,
    ) -> Issued {
        match self.issue_edge(uses_headers, session, now, expires_at_ms) {
            Some(edge) => admission.and(edge),
            None => admission,
        }
    }

    /// A queue cookie, signed and issued (see [`issue`](Self::issue)).
    pub(super) fn issue_queue_cookie(
        &self,
        uses_headers: bool,
        cookie: QueueCookie,
        now: u64,
    ) -> Issued {
        Issued(Box::new(self.queue_cookie_value(uses_headers, cookie, now)))
    }

    /// [`issue_queue_cookie`](Self::issue_queue_cookie)'s headers, written straight from the
    /// signed text on the stack (no `String` of the value), not yet boxed.
    fn queue_cookie_value(&self, uses_headers: bool, cookie: QueueCookie, now: u64) -> IssuedValue {
        let c = &self.0.config;
        let value = cookie.signed(&self.0.keys, c.room());
        let max_age = secs_ceil(cookie.expires_at_ms().saturating_sub(now));
        let cookie =
            cookies::set_cookie(&c.cookies, &c.cookies.queue_name, value.as_bytes(), max_age);
        // Copied into bytes of exactly its length: one allocation, no shared header.
        let header = uses_headers
            .then(|| HeaderValue::from_bytes(value.as_bytes()).ok())
            .flatten()
            .map(|v| (c.queue_header.clone(), v));
        IssuedValue {
            cookie,
            header,
            more: None,
        }
    }

    /// Stage 1: a signed queue cookie and a redirect to the same URL. A method other than GET or
    /// HEAD gets `307`, so the browser repeats it as it was instead of turning it into a GET.
    /// `cleared`: the risk decision found the visitor low risk, so with proof of work on the
    /// cookie is issued proven (no challenge).
    pub(super) fn first_visit<B>(
        &self,
        req: &Request<B>,
        uses_headers: bool,
        cleared: bool,
        now: u64,
    ) -> Response<Bytes> {
        let mut cookie = QueueCookie::issue(now, duration_ms(self.0.config.settings.session_ttl));
        if cleared && self.0.defences.proof.is_some() {
            cookie = cookie.into_proven();
        }
        let status = if req.method() == Method::GET || req.method() == Method::HEAD {
            StatusCode::FOUND
        } else {
            StatusCode::TEMPORARY_REDIRECT
        };
        let mut res = Response::new(Bytes::new());
        *res.status_mut() = status;
        let headers = res.headers_mut();
        headers.insert(
            header::LOCATION,
            HeaderValue::from_str(&return_to(req)).unwrap_or(HeaderValue::from_static("/")),
        );
        // The cookie's headers go straight into the answer: no `Issued` box on the way.
        self.queue_cookie_value(uses_headers, cookie, now)
            .apply(headers);
        res
    }

    /// `429 Too Many Requests` from a limit ([`Rejection::Limited`]): a page for browsers, JSON
    /// `{"state":"limited",...}` for others, with `Retry-After`; no cookie, no store call.
    pub(super) fn limited<B>(&self, wait: Duration, req: &Request<B>) -> Response<Bytes> {
        let secs = secs_ceil(duration_ms(wait)).max(1);
        let rejection = Rejection::Limited {
            retry_after: Duration::from_secs(secs),
        };
        self.reject(&rejection, req)
    }

    /// `403` [`Rejection::Refused`]: the risk decision found a new visitor high risk. A page
    /// for browsers, JSON `{"state":"refused",...}` for others, with `Retry-After`; no cookie.
    pub(super) fn refused<B>(&self, req: &Request<B>) -> Response<Bytes> {
        let rejection = Rejection::Refused {
            retry_after: REFUSED_RETRY_AFTER,
        };
        self.reject(&rejection, req)
    }

    /// [`Rejection::Challenge`] with a fresh challenge for `session`: a page that solves it for
    /// browsers, JSON with the challenge for others. No store call.
    pub(super) fn challenge<B>(
        &self,
        req: &Request<B>,
        session: SessionId,
        now: u64,
    ) -> Response<Bytes> {
        let (rejection, challenge) = self.new_challenge(session, now);
        self.reject_with(&rejection, req, Some(&challenge))
    }

    /// A fresh signed challenge for `session`, and the rejection that carries it.
    pub(super) fn new_challenge(&self, session: SessionId, now: u64) -> (Rejection, String) {
        let gate = self
            .0
            .defences
            .proof
            .as_ref()
            .expect("only asked with proof of work on");
        let rejection = Rejection::Challenge {
            difficulty: gate.settings.difficulty(),
            retry_after: CHALLENGE_RETRY_AFTER,
        };
        let challenge = gate.challenge(&self.0.keys, self.0.config.room(), session, now);
        (rejection, challenge)
    }

    /// The answer to leaving: both cookies removed.
    pub(super) fn left<B>(&self, req: &Request<B>) -> Response<Bytes> {
        let cx = self.render_context(req, "/");
        let mut res = if cx.wants_html() {
            self.0.renderer.render_left(&cx)
        } else {
            json_response(
                StatusCode::OK,
                &StatusBody::plain(self.0.config.room(), "left"),
            )
        };
        let c = &self.0.config.cookies;
        let headers = res.headers_mut();
        headers.append(header::SET_COOKIE, cookies::clear_cookie(c, &c.queue_name));
        headers.append(
            header::SET_COOKIE,
            cookies::clear_cookie(c, &c.admission_name),
        );
        self.clear_edge(headers);
        res
    }

    /// Removes the edge token too, in a room that has them: the browser drops it now, and an
    /// edge that was still honouring it no longer sees it (one kept elsewhere lives out its
    /// short lifetime).
    fn clear_edge(&self, headers: &mut HeaderMap) {
        if self.0.edge.is_some() {
            let c = &self.0.config.cookies;
            headers.append(header::SET_COOKIE, cookies::clear_cookie(c, &c.edge_name));
        }
    }

    /// What a renderer needs to draw a page for this request.
    pub(super) fn render_context<'a, B>(
        &'a self,
        req: &'a Request<B>,
        return_to: &'a str,
    ) -> RenderContext<'a> {
        RenderContext {
            room: self.0.config.room(),
            headers: req.headers(),
            return_to,
            status_path: &self.0.paths.status,
            events_path: self.0.offers_events.then_some(self.0.paths.events.as_str()),
            leave_path: &self.0.paths.leave,
            proof_path: &self.0.paths.proof,
            challenge: None,
        }
    }

    pub(super) fn reject<B>(&self, rejection: &Rejection, req: &Request<B>) -> Response<Bytes> {
        self.reject_with(rejection, req, None)
    }

    /// A rejection, rendered by the room's renderer, with `Retry-After` unless the renderer set
    /// its own.
    fn reject_with<B>(
        &self,
        rejection: &Rejection,
        req: &Request<B>,
        challenge: Option<&str>,
    ) -> Response<Bytes> {
        let back = return_to(req);
        let cx = RenderContext {
            challenge,
            ..self.render_context(req, &back)
        };
        with_retry_after(self.0.renderer.render(rejection, &cx), rejection)
    }

    /// `res`, also removing the admission token cookie.
    pub(super) fn without_token(&self, mut res: Response<Bytes>) -> Response<Bytes> {
        let c = &self.0.config.cookies;
        res.headers_mut().append(
            header::SET_COOKIE,
            cookies::clear_cookie(c, &c.admission_name),
        );
        self.clear_edge(res.headers_mut());
        res
    }

    /// The status endpoint's `200` for a waiting visitor; and for a `scheduled` answer (the
    /// visitor is registered, as a waiter's answer is), whose body's `retry_after` paces the
    /// polls (no header), as every `200` of it.
    pub(super) fn status_json(&self, rejection: &Rejection) -> Response<Bytes> {
        json_response(
            StatusCode::OK,
            &StatusBody::from_rejection(self.0.config.room(), rejection),
        )
    }
}

/// The path and query to send the visitor back to. A path starting with `//` (or `/\`) would
/// be read by browsers as another host (`//evil.example/`): it gets a `/.` prefix, which
/// browsers resolve to the very same path on this site.
fn return_to<B>(req: &Request<B>) -> Cow<'_, str> {
    let pq = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
    if pq.starts_with("//") || pq.starts_with("/\\") {
        Cow::Owned(format!("/.{pq}"))
    } else {
        Cow::Borrowed(pq)
    }
}

/// Adds the rejection's `Retry-After`, unless the response has one.
fn with_retry_after(mut res: Response<Bytes>, rejection: &Rejection) -> Response<Bytes> {
    let headers = res.headers_mut();
    if !headers.contains_key(header::RETRY_AFTER) {
        headers.insert(
            header::RETRY_AFTER,
            HeaderValue::from(rejection.retry_after().as_secs()),
        );
    }
    res
}

/// The headers every answer of the room carries: `Cache-Control: no-store` (unless the answer has its own), `X-Robots-Tag: noindex`.
pub(crate) fn with_room_headers<B>(mut res: Response<B>) -> Response<B> {
    let headers = res.headers_mut();
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    headers.insert(X_ROBOTS_TAG.clone(), HeaderValue::from_static("noindex"));
    res
}

/// Made once (a name given as `&str` is parsed again on every answer).
static X_ROBOTS_TAG: HeaderName = HeaderName::from_static("x-robots-tag");

/// A waiter's answer at `position`, with the estimate of their wait, informed by what the
/// gateway's snapshots say of the line `ahead`.
pub(super) fn waiting_rejection(
    position: u64,
    waiting: u64,
    paused: bool,
    pace: RoomPace,
    ahead: LineAhead,
) -> Rejection {
    let input = ahead.inform(EtaInput::new(position, waiting, pace, paused));
    let eta = estimate(&input);
    let retry_after = if paused {
        // The line does not move: no reason to ask often.
        retry_after_for(position).max(PAUSED_RETRY_AFTER)
    } else {
        retry_after_for(position)
    };
    Rejection::Waiting {
        position,
        waiting,
        eta: eta.shown(),
        eta_range: eta.range(),
        estimating: eta == Eta::Estimating,
        retry_after,
        paused,
    }
}

pub(super) fn closed_rejection() -> Rejection {
    Rejection::Closed {
        retry_after: CLOSED_RETRY_AFTER,
    }
}

/// A registrant before the opening at `opens_at_ms`, told at `now_ms`: ask again at the opening
/// (at least a second from now), or within [`SCHEDULED_MAX_RETRY_AFTER`] if it is further off.
pub(super) fn scheduled_rejection(opens_at_ms: u64, now_ms: u64) -> Rejection {
    let opens_in_ms = opens_at_ms.saturating_sub(now_ms);
    let until = secs_ceil(opens_in_ms).max(1);
    Rejection::Scheduled {
        opens_at: std::time::UNIX_EPOCH + Duration::from_millis(opens_at_ms),
        opens_in: Duration::from_millis(opens_in_ms),
        retry_after: Duration::from_secs(until).min(SCHEDULED_MAX_RETRY_AFTER),
    }
}

pub(super) fn banned_rejection() -> Rejection {
    Rejection::Banned {
        retry_after: BANNED_RETRY_AFTER,
    }
}

pub(super) fn full_rejection(waiting: u64) -> Rejection {
    Rejection::Full {
        waiting,
        retry_after: FULL_RETRY_AFTER,
    }
}

pub(super) fn error_rejection(e: &StoreError) -> Rejection {
    if e.store_answered() {
        Rejection::Busy {
            retry_after: BUSY_RETRY_AFTER,
        }
    } else {
        Rejection::Unavailable {
            retry_after: UNAVAILABLE_RETRY_AFTER,
        }
    }
}

/// A failed store call of an endpoint, as JSON (`busy` or `unavailable`) with `Retry-After`.
pub(super) fn store_error_json(room: &str, e: &StoreError) -> Response<Bytes> {
    rejection_json(room, &error_rejection(e))
}

/// `rejection` as JSON, with its status and `Retry-After`.
pub(super) fn rejection_json(room: &str, rejection: &Rejection) -> Response<Bytes> {
    let res = json_response(
        rejection.status(),
        &StatusBody::from_rejection(room, rejection),
    );
    with_retry_after(res, rejection)
}

pub(super) fn method_not_allowed(allow: &'static str) -> Response<Bytes> {
    let mut res = Response::new(Bytes::new());
    *res.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    res.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    res
}

/// `403` JSON `{"error":"not_admitted",...}` (or `"ticket_used"`): a gated route refused a
/// request without a valid admission of `room` (see [`NotAdmittedBody`]).
pub(super) fn not_admitted(
    room: &str,
    status_path: &str,
    error: &'static str,
    reason: &'static str,
) -> Response<Bytes> {
    json_response(
        StatusCode::FORBIDDEN,
        &NotAdmittedBody {
            error,
            room,
            status: status_path,
            reason,
        },
    )
}
