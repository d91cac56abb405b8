//! The room itself: the three stages wired together, shared by every clone of the layer.
//!
//! [`Room::classify`] runs the two stateless stages synchronously and says what to do next:
//! pass the request through, answer it here, or ask the store. [`Room::after_store`] turns the
//! store's answer into the same choices. The service and its future only carry these out.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};

use crate::admission_token::AdmissionToken;
use crate::clock::{duration_ms, secs_ceil, SharedClock};
use crate::config::{FailPolicy, RoomConfig};
use crate::cookies;
use crate::limits::{Defences, RequestInfo};
use crate::outcome::{
    estimate_wait, retry_after_for, Admission, AdmittedBy, Rejection, BUSY_RETRY_AFTER,
    CHALLENGE_RETRY_AFTER, FULL_RETRY_AFTER, UNAVAILABLE_RETRY_AFTER,
};
use crate::proof_of_work::{ProofGate, PROOF_HEADER};
use crate::queue_cookie::QueueCookie;
use crate::response::{json_response, Render, RenderContext, StatusBody};
use crate::session::SessionId;
use crate::signing::{Keyring, Network};
use crate::store::{AdmissionCounts, Decision, Store, StoreError, StoreErrorKind, StoreFuture};

pub(crate) struct Room {
    pub(crate) config: RoomConfig,
    pub(crate) keys: Keyring,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: SharedClock,
    renderer: Arc<dyn Render>,
    pub(crate) defences: Defences,
    /// Proof of work before joining the line, when on.
    proof: Option<ProofGate>,
    status_path: String,
    leave_path: String,
    proof_path: String,
    /// Whether the room has warned that it binds tokens without knowing the client IP.
    warned_unknown_network: AtomicBool,
}

/// A freshly signed admission token for the response of a request that passes: a `Set-Cookie`,
/// and for clients that use headers instead of cookies, the token header too.
#[derive(Debug)]
pub(crate) struct Issued {
    cookie: HeaderValue,
    header: Option<(HeaderName, HeaderValue)>,
}

impl Issued {
    /// Adds the token to a response's headers.
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        headers.append(header::SET_COOKIE, self.cookie);
        if let Some((name, value)) = self.header {
            headers.insert(name, value);
        }
    }
}

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
    /// Ask the store, then call [`Room::after_store`] with `step`.
    Ask { pending: Pending, step: Step },
}

/// A store call in flight.
pub(crate) enum Pending {
    Decision(StoreFuture<Decision>),
    Released(StoreFuture<bool>),
}

/// Which question the store is answering.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// Stage 3 for a visitor with a queue cookie. `stale_token`: the visitor's admission token
    /// is still valid but its slot is gone, so a rejection also removes the token cookie.
    Enter {
        session: SessionId,
        stale_token: bool,
    },
    /// An admitted visitor whose token is past `refresh` but not expired.
    Heartbeat { token: AdmissionToken },
    /// The status endpoint.
    Status,
    /// The leave endpoint.
    Leave,
}

/// Who a request comes from, by its valid signed values.
enum Visitor {
    /// A valid admission token: past the line.
    Admitted(AdmissionToken),
    /// No valid token, a valid queue cookie: has (or is about to take) a place in line.
    Queued(QueueCookie),
}

/// The store's answer, whichever call it was.
pub(crate) enum Answered {
    Decision(Result<Decision, StoreError>),
    Released(Result<bool, StoreError>),
}

impl Room {
    pub(crate) fn new(
        config: RoomConfig,
        keys: Keyring,
        store: Arc<dyn Store>,
        clock: SharedClock,
        renderer: Arc<dyn Render>,
        defences: Defences,
        proof: Option<ProofGate>,
    ) -> Self {
        let endpoint = |name: &str| format!("{}/{}/{name}", config.path_prefix, config.room());
        let (status_path, leave_path, proof_path) =
            (endpoint("status"), endpoint("leave"), endpoint("proof"));
        Self {
            config,
            keys,
            store,
            clock,
            renderer,
            defences,
            proof,
            status_path,
            leave_path,
            proof_path,
            warned_unknown_network: AtomicBool::new(false),
        }
    }

    /// Whether a bypass rule matches: the request skips the room entirely (no admission, no
    /// cookie, no store call, not counted by any limit).
    pub(crate) fn bypasses<B>(&self, req: &Request<B>) -> bool {
        !self.defences.bypass.is_empty() && self.defences.bypasses(&RequestInfo::new(req))
    }

    /// Stages 1 and 2, and the room's own endpoints.
    pub(crate) fn classify<B>(&self, req: &Request<B>) -> Next {
        let now = self.clock.now_ms();
        let path = req.uri().path();
        if path.starts_with(&self.config.path_prefix) {
            if path == self.status_path {
                return self.status(req, now);
            }
            if path == self.leave_path {
                return self.leave(req, now);
            }
            if path == self.proof_path && self.proof.is_some() {
                return Next::Answer(self.prove(req, now));
            }
        }

        // Stage 2: a valid admission token.
        if let Some(token) = self.admission_token(req, now) {
            if token.is_fresh(now, self.config.refresh) {
                return Next::Pass {
                    admission: self.admission(
                        token.session(),
                        token.expires_at_ms(),
                        AdmittedBy::Token,
                    ),
                    set_cookie: None,
                };
            }
            return self.ask_heartbeat(token);
        }

        // Stage 1: no queue cookie, no state: sign one and send the visitor back here.
        match self.queue_cookie(req, now) {
            // Proof of work on and not yet solved: the challenge, no store call.
            Some(cookie) if self.needs_proof(&cookie) => {
                Next::Answer(self.challenge(req, cookie.session(), now))
            }
            Some(cookie) => match self.check_polls(cookie.session(), now) {
                Ok(()) => self.ask_enter(cookie.session(), false),
                Err(wait) => Next::Answer(self.limited(wait, req)),
            },
            None => match self.check_new_visitor(req, now) {
                Ok(()) => Next::Answer(self.first_visit(req, now)),
                Err(wait) => Next::Answer(self.limited(wait, req)),
            },
        }
    }

    /// Stage 3's answer.
    pub(crate) fn after_store<B>(&self, step: Step, answered: Answered, req: &Request<B>) -> Next {
        let now = self.clock.now_ms();
        match (step, answered) {
            (
                Step::Enter {
                    session,
                    stale_token,
                },
                Answered::Decision(result),
            ) => {
                let mut next = self.after_enter(session, result, req, now);
                if let (true, Next::Answer(res)) = (stale_token, &mut next) {
                    let c = &self.config.cookies;
                    res.headers_mut().append(
                        header::SET_COOKIE,
                        cookies::clear_cookie(c, &c.admission_name),
                    );
                }
                next
            }
            (Step::Heartbeat { token }, Answered::Decision(result)) => match result {
                Ok(Decision::Admitted { expires_at_ms }) => {
                    self.admitted(token.session(), expires_at_ms, now, req)
                }
                // The slot is gone (expired or released): back to stage 3 as a queued visitor.
                Ok(_) => self.ask_enter(token.session(), true),
                // The token is valid and its check needs no store: keep letting it through.
                Err(e) => {
                    tracing::warn!(room = self.config.room(), error = %e, "heartbeat failed; token still honoured");
                    Next::Pass {
                        admission: self.admission(
                            token.session(),
                            token.expires_at_ms(),
                            AdmittedBy::Token,
                        ),
                        set_cookie: None,
                    }
                }
            },
            (Step::Status, Answered::Decision(result)) => {
                let room = self.config.room();
                Next::Answer(match result {
                    Ok(Decision::Admitted { .. }) => {
                        json_response(StatusCode::OK, &StatusBody::plain(room, "admitted"))
                    }
                    Ok(Decision::Waiting {
                        position,
                        waiting,
                        recent,
                    }) => json_response(
                        StatusCode::OK,
                        &StatusBody::from_rejection(
                            room,
                            &waiting_rejection(position, waiting, recent),
                        ),
                    ),
                    Ok(Decision::Full { waiting }) => json_response(
                        StatusCode::OK,
                        &StatusBody::from_rejection(room, &full_rejection(waiting)),
                    ),
                    Ok(_) => json_response(StatusCode::OK, &StatusBody::plain(room, "unknown")),
                    Err(e) => {
                        let rejection = error_rejection(&e);
                        json_response(
                            rejection.status(),
                            &StatusBody::from_rejection(room, &rejection),
                        )
                    }
                })
            }
            (Step::Leave, Answered::Released(result)) => Next::Answer(match result {
                Ok(_) => self.left(req),
                Err(e) => {
                    let rejection = error_rejection(&e);
                    json_response(
                        rejection.status(),
                        &StatusBody::from_rejection(self.config.room(), &rejection),
                    )
                }
            }),
            _ => unreachable!("each step is paired with its own kind of store call"),
        }
    }

    fn after_enter<B>(
        &self,
        session: SessionId,
        result: Result<Decision, StoreError>,
        req: &Request<B>,
        now: u64,
    ) -> Next {
        let rejection = match result {
            Ok(Decision::Admitted { expires_at_ms }) => {
                return self.admitted(session, expires_at_ms, now, req)
            }
            Ok(Decision::Waiting {
                position,
                waiting,
                recent,
            }) => waiting_rejection(position, waiting, recent),
            Ok(Decision::Full { waiting }) => full_rejection(waiting),
            Ok(Decision::Unknown) => {
                let e = StoreError::new(StoreErrorKind::Protocol);
                return self.store_failed(session, e, req, now);
            }
            Err(e) => return self.store_failed(session, e, req, now),
        };
        Next::Answer(self.reject(&rejection, req))
    }

    /// A failed store call for a visitor without a valid token: busy, or the fail policy.
    fn store_failed<B>(
        &self,
        session: SessionId,
        e: StoreError,
        req: &Request<B>,
        now: u64,
    ) -> Next {
        tracing::warn!(room = self.config.room(), error = %e, "waiting room store call failed");
        match (e.kind(), self.config.fail_policy) {
            (StoreErrorKind::Busy, _) | (_, FailPolicy::Closed) => {
                Next::Answer(self.reject(&error_rejection(&e), req))
            }
            (_, FailPolicy::Open) => Next::Pass {
                admission: self.admission(
                    session,
                    now + duration_ms(self.config.refresh),
                    AdmittedBy::FailOpen,
                ),
                set_cookie: None,
            },
        }
    }

    fn admitted<B>(
        &self,
        session: SessionId,
        expires_at_ms: u64,
        now: u64,
        req: &Request<B>,
    ) -> Next {
        let mut token = AdmissionToken::new(session, now, expires_at_ms);
        if let Some(network) = self.network_binding(req) {
            token = token.bound_to(network);
        }
        let value = token.sign(&self.keys, self.config.room());
        let cookie = cookies::set_cookie(
            &self.config.cookies,
            &self.config.cookies.admission_name,
            &value,
            secs_ceil(expires_at_ms.saturating_sub(now)),
        );
        let header = self
            .uses_headers(req)
            .then(|| HeaderValue::try_from(value).ok())
            .flatten()
            .map(|v| (self.config.token_header.clone(), v));
        Next::Pass {
            admission: self.admission(session, expires_at_ms, AdmittedBy::Store),
            set_cookie: Some(Issued { cookie, header }),
        }
    }

    /// Whether the client carries the room's values in headers rather than cookies: it sent
    /// neither room cookie. Values the room issues are then also sent back in response headers.
    /// A browser, once it has the queue cookie, always sends it, so its (`HttpOnly`) tokens are
    /// never exposed in a header that the page's scripts could read.
    fn uses_headers<B>(&self, req: &Request<B>) -> bool {
        let c = &self.config.cookies;
        let has = |name: &str| cookies::find_valid(req.headers(), name, |_| Some(())).is_some();
        !has(&c.queue_name) && !has(&c.admission_name)
    }

    /// A header value of the request, as text.
    fn header_value<'r, B>(&self, req: &'r Request<B>, name: &HeaderName) -> Option<&'r str> {
        req.headers().get(name).and_then(|v| v.to_str().ok())
    }

    fn admission(&self, session: SessionId, expires_at_ms: u64, by: AdmittedBy) -> Admission {
        Admission {
            room: self.config.policy.room.clone(),
            session,
            expires_at_ms,
            by,
        }
    }

    fn ask_enter(&self, session: SessionId, stale_token: bool) -> Next {
        Next::Ask {
            pending: Pending::Decision(self.store.enter(&self.config.policy, session)),
            step: Step::Enter {
                session,
                stale_token,
            },
        }
    }

    fn ask_heartbeat(&self, token: AdmissionToken) -> Next {
        Next::Ask {
            pending: Pending::Decision(self.store.heartbeat(&self.config.policy, token.session())),
            step: Step::Heartbeat { token },
        }
    }

    /// With network binding on, the request's network (the client IP's /24 or /48), which
    /// tokens are bound to when issued and must match when checked; `Unknown` without a client
    /// IP (one warning in the log). `None` when binding is off.
    fn network_binding<B>(&self, req: &Request<B>) -> Option<Network> {
        if !self.config.bind_tokens_to_network {
            return None;
        }
        let ip = self.defences.client_ip.find(&RequestInfo::new(req));
        if ip.is_none() && !self.warned_unknown_network.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                room = self.config.room(),
                "no client IP for a request while admission tokens are bound to networks: \
                 tokens issued without an IP admit only requests without an IP"
            );
        }
        Some(Network::of(ip))
    }

    /// A valid admission token from the cookie, or else from the token header. With network
    /// binding on, a token bound to another network (or not bound at all) is no token.
    fn admission_token<B>(&self, req: &Request<B>, now: u64) -> Option<AdmissionToken> {
        let expected = self.network_binding(req);
        let verify = |v: &str| {
            AdmissionToken::verify(&self.keys, self.config.room(), v, now)
                .filter(|t| expected.is_none() || t.network() == expected)
        };
        cookies::find_valid(req.headers(), &self.config.cookies.admission_name, verify).or_else(
            || {
                self.header_value(req, &self.config.token_header)
                    .and_then(|v| verify(v.trim()))
            },
        )
    }

    /// A valid queue value from the cookie, or else from the session header.
    fn queue_cookie<B>(&self, req: &Request<B>, now: u64) -> Option<QueueCookie> {
        let verify = |v: &str| QueueCookie::verify(&self.keys, self.config.room(), v, now);
        cookies::find_valid(req.headers(), &self.config.cookies.queue_name, verify).or_else(|| {
            self.header_value(req, &self.config.session_header)
                .and_then(|v| verify(v.trim()))
        })
    }

    /// The visitor's session, from a valid admission token or queue cookie.
    fn session<B>(&self, req: &Request<B>, now: u64) -> Option<SessionId> {
        self.visitor(req, now).map(|visitor| match visitor {
            Visitor::Admitted(token) => token.session(),
            Visitor::Queued(cookie) => cookie.session(),
        })
    }

    /// Who the request comes from: an admitted visitor (a valid admission token), or else one
    /// with a valid queue cookie.
    fn visitor<B>(&self, req: &Request<B>, now: u64) -> Option<Visitor> {
        match self.admission_token(req, now) {
            Some(token) => Some(Visitor::Admitted(token)),
            None => self.queue_cookie(req, now).map(Visitor::Queued),
        }
    }

    /// Stage 1: a signed queue cookie and a redirect to the same URL. A method other than GET or
    /// HEAD gets `307`, so the browser repeats it as it was instead of turning it into a GET.
    fn first_visit<B>(&self, req: &Request<B>, now: u64) -> Response<Bytes> {
        let cookie = QueueCookie::issue(now, duration_ms(self.config.session_ttl));
        let value = cookie.sign(&self.keys, self.config.room());
        let status = if req.method() == Method::GET || req.method() == Method::HEAD {
            StatusCode::FOUND
        } else {
            StatusCode::TEMPORARY_REDIRECT
        };
        let location = return_to(req);
        let mut res = Response::new(Bytes::new());
        *res.status_mut() = status;
        let headers = res.headers_mut();
        headers.insert(
            header::LOCATION,
            HeaderValue::from_str(&location).unwrap_or(HeaderValue::from_static("/")),
        );
        headers.insert(
            header::SET_COOKIE,
            cookies::set_cookie(
                &self.config.cookies,
                &self.config.cookies.queue_name,
                &value,
                self.config.session_ttl.as_secs(),
            ),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if self.uses_headers(req) {
            if let Ok(v) = HeaderValue::try_from(value) {
                headers.insert(self.config.session_header.clone(), v);
            }
        }
        res
    }

    /// The per-session limit on store questions (stage 3 and the status endpoint).
    fn check_polls(&self, session: SessionId, now: u64) -> Result<(), Duration> {
        match &self.defences.polls {
            Some(limiter) => limiter.check(session, now),
            None => Ok(()),
        }
    }

    /// The per-client-IP limit on new queue entries (stage 1). No IP found: no limit, and one
    /// warning in the log.
    fn check_new_visitor<B>(&self, req: &Request<B>, now: u64) -> Result<(), Duration> {
        let Some(limiter) = &self.defences.new_visitors else {
            return Ok(());
        };
        match self.defences.client_ip.find(&RequestInfo::new(req)) {
            Some(ip) => limiter.check_client(ip, now),
            None => {
                if !self.defences.warned_no_ip.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        room = self.config.room(),
                        "no client IP for a request (no PeerAddr or SocketAddr in its extensions, \
                         no client_ip_header or client_ip_with configured): the per-IP limit \
                         on new visitors does not apply to such requests"
                    );
                }
                Ok(())
            }
        }
    }

    /// `429 Too Many Requests` from a limit ([`Rejection::Limited`]): a page for browsers, JSON
    /// `{"state":"limited",...}` for others, with `Retry-After`; no cookie, no store call.
    fn limited<B>(&self, wait: Duration, req: &Request<B>) -> Response<Bytes> {
        let secs = secs_ceil(duration_ms(wait)).max(1);
        let rejection = Rejection::Limited {
            retry_after: Duration::from_secs(secs),
        };
        self.reject(&rejection, req)
    }

    /// Whether this queue cookie must solve a proof-of-work challenge before it joins the line.
    fn needs_proof(&self, cookie: &QueueCookie) -> bool {
        self.proof.is_some() && !cookie.is_proven()
    }

    /// [`Rejection::Challenge`] with a fresh challenge for `session`: a page that solves it for
    /// browsers, JSON with the challenge for others. No store call.
    fn challenge<B>(&self, req: &Request<B>, session: SessionId, now: u64) -> Response<Bytes> {
        let (rejection, challenge) = self.new_challenge(session, now);
        self.reject_with(&rejection, req, Some(&challenge))
    }

    /// A fresh signed challenge for `session`, and the rejection that carries it.
    fn new_challenge(&self, session: SessionId, now: u64) -> (Rejection, String) {
        let gate = self
            .proof
            .as_ref()
            .expect("only asked with proof of work on");
        let rejection = Rejection::Challenge {
            difficulty: gate.settings.difficulty(),
            retry_after: CHALLENGE_RETRY_AFTER,
        };
        let challenge = gate.challenge(&self.keys, self.config.room(), session, now);
        (rejection, challenge)
    }

    /// The proof endpoint: `POST` with `<challenge>:<nonce>` in the proof header. A valid
    /// solution turns the visitor's queue cookie into a proven one (`200`,
    /// `{"state":"proven"}`); anything else gets `403` and a fresh challenge. Each submission
    /// counts against the per-session poll limit, so the room cannot be made to check guesses.
    fn prove<B>(&self, req: &Request<B>, now: u64) -> Response<Bytes> {
        if req.method() != Method::POST {
            return method_not_allowed("POST");
        }
        let room = self.config.room();
        let Some(cookie) = self.queue_cookie(req, now) else {
            return json_response(StatusCode::FORBIDDEN, &StatusBody::plain(room, "unknown"));
        };
        if cookie.is_proven() {
            return json_response(StatusCode::OK, &StatusBody::plain(room, "proven"));
        }
        if let Err(wait) = self.check_polls(cookie.session(), now) {
            return self.limited(wait, req);
        }
        let gate = self
            .proof
            .as_ref()
            .expect("only routed with proof of work on");
        let proof = self.header_value(req, &HeaderName::from_static(PROOF_HEADER));
        let accepted =
            proof.map(|p| gate.accept(&self.keys, room, p.trim(), cookie.session(), now));
        if let Some(Err(why)) = accepted {
            tracing::debug!(room, ?why, "proof of work refused");
        }
        if !matches!(accepted, Some(Ok(()))) {
            return self.challenge(req, cookie.session(), now);
        }
        let proven = cookie.into_proven().sign(&self.keys, room);
        let mut res = json_response(StatusCode::OK, &StatusBody::plain(room, "proven"));
        let headers = res.headers_mut();
        headers.insert(
            header::SET_COOKIE,
            cookies::set_cookie(
                &self.config.cookies,
                &self.config.cookies.queue_name,
                &proven,
                secs_ceil(cookie.expires_at_ms().saturating_sub(now)),
            ),
        );
        if self.uses_headers(req) {
            if let Ok(v) = HeaderValue::try_from(proven) {
                headers.insert(self.config.session_header.clone(), v);
            }
        }
        res
    }

    fn status<B>(&self, req: &Request<B>, now: u64) -> Next {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return Next::Answer(method_not_allowed("GET, HEAD"));
        }
        let room = self.config.room();
        match self.visitor(req, now) {
            Some(Visitor::Admitted(_)) => Next::Answer(json_response(
                StatusCode::OK,
                &StatusBody::plain(room, "admitted"),
            )),
            // Proof of work to do first: the challenge, always as JSON here, no store call.
            Some(Visitor::Queued(cookie)) if self.needs_proof(&cookie) => {
                let (rejection, challenge) = self.new_challenge(cookie.session(), now);
                let body = StatusBody {
                    challenge: Some(&challenge),
                    proof_path: Some(&self.proof_path),
                    ..StatusBody::from_rejection(room, &rejection)
                };
                Next::Answer(json_response(StatusCode::OK, &body))
            }
            Some(Visitor::Queued(cookie)) => match self.check_polls(cookie.session(), now) {
                Ok(()) => Next::Ask {
                    pending: Pending::Decision(
                        self.store.poll(&self.config.policy, cookie.session()),
                    ),
                    step: Step::Status,
                },
                Err(wait) => Next::Answer(self.limited(wait, req)),
            },
            None => Next::Answer(json_response(
                StatusCode::OK,
                &StatusBody::plain(room, "unknown"),
            )),
        }
    }

    fn leave<B>(&self, req: &Request<B>, now: u64) -> Next {
        if req.method() != Method::POST {
            return Next::Answer(method_not_allowed("POST"));
        }
        match self.session(req, now) {
            Some(session) => Next::Ask {
                pending: Pending::Released(self.store.release(&self.config.policy, session)),
                step: Step::Leave,
            },
            None => Next::Answer(self.left(req)),
        }
    }

    /// The answer to leaving: both cookies removed.
    fn left<B>(&self, req: &Request<B>) -> Response<Bytes> {
        let cx = self.cx(req, "/");
        let mut res = if cx.wants_html() {
            self.renderer.render_left(&cx)
        } else {
            json_response(
                StatusCode::OK,
                &StatusBody::plain(self.config.room(), "left"),
            )
        };
        let c = &self.config.cookies;
        let headers = res.headers_mut();
        headers.append(header::SET_COOKIE, cookies::clear_cookie(c, &c.queue_name));
        headers.append(
            header::SET_COOKIE,
            cookies::clear_cookie(c, &c.admission_name),
        );
        res
    }

    fn cx<'a, B>(&'a self, req: &'a Request<B>, return_to: &'a str) -> RenderContext<'a> {
        RenderContext {
            room: self.config.room(),
            headers: req.headers(),
            return_to,
            status_path: &self.status_path,
            leave_path: &self.leave_path,
            proof_path: &self.proof_path,
            challenge: None,
        }
    }

    fn reject<B>(&self, rejection: &Rejection, req: &Request<B>) -> Response<Bytes> {
        self.reject_with(rejection, req, None)
    }

    fn reject_with<B>(
        &self,
        rejection: &Rejection,
        req: &Request<B>,
        challenge: Option<&str>,
    ) -> Response<Bytes> {
        let back = return_to(req);
        let cx = RenderContext {
            challenge,
            ..self.cx(req, &back)
        };
        let mut res = self.renderer.render(rejection, &cx);
        let headers = res.headers_mut();
        if !headers.contains_key(header::RETRY_AFTER) {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(rejection.retry_after().as_secs()),
            );
        }
        res
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

/// Headers every answer of the room carries.
pub(crate) fn finish(mut res: Response<Bytes>) -> Response<Bytes> {
    let headers = res.headers_mut();
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    headers.insert("x-robots-tag", HeaderValue::from_static("noindex"));
    res
}

fn waiting_rejection(position: u64, waiting: u64, recent: AdmissionCounts) -> Rejection {
    Rejection::Waiting {
        position,
        waiting,
        eta: estimate_wait(position, recent),
        retry_after: retry_after_for(position),
    }
}

fn full_rejection(waiting: u64) -> Rejection {
    Rejection::Full {
        waiting,
        retry_after: FULL_RETRY_AFTER,
    }
}

fn error_rejection(e: &StoreError) -> Rejection {
    match e.kind() {
        StoreErrorKind::Busy => Rejection::Busy {
            retry_after: BUSY_RETRY_AFTER,
        },
        _ => Rejection::Unavailable {
            retry_after: UNAVAILABLE_RETRY_AFTER,
        },
    }
}

fn method_not_allowed(allow: &'static str) -> Response<Bytes> {
    let mut res = Response::new(Bytes::new());
    *res.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    res.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    res
}
