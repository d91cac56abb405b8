//! [`MatchingService`]: matching over HTTP, mounted where the application wants it.
//!
//! | request | answer |
//! |---|---|
//! | `POST` `{"topic": "...", "size": 2}` | `202` waiting, or `200` matched if a group formed at once; `409` already waiting or matched (with where); `400` a bad body, size or topic; `401` no identity; `403` banned; `429` over the client's limit |
//! | `GET` | `200` waiting or matched; `404` `{"state": "idle"}` |
//! | `DELETE` | `200` `{"state": "idle", "was": "waiting" \| "matched" \| "idle"}`; leaving a pending group returns the others to the front of their queue |
//!
//! Other methods get `405` with `Allow`. Every answer has `Cache-Control: no-store`. Every
//! error is JSON `{"error": "<code>", ...}`;
//! `docs/matching.md` has every field. A store that fails gets the configured
//! [`MatchFailPolicy`], never a `500`.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};
use tower_service::Service;

use super::{
    Group, GroupSize, InputError, JoinError, JoinOutcome, MatchState, Matchmaker, Queue, Topic,
    UserId, Waiting,
};
use tower_waiting_room::__private::SessionCookie;
use tower_waiting_room::__private::{collect_limited, json_response, Collect};
use tower_waiting_room::clock::{Clock, SystemClock};
use tower_waiting_room::future::AnswerFuture;
use tower_waiting_room::FullBody;
use tower_waiting_room::SessionId;
use tower_waiting_room::{Keyring, SigningKey};

/// The largest request body read, in bytes.
pub const MATCHING_BODY_LIMIT: usize = 4 * 1024;
/// How long a signed matching session lasts (renewed by every join).
pub const MATCHING_SESSION_TTL: Duration = Duration::from_secs(24 * 3_600);
/// The matching session cookie's default name.
pub const MATCHING_COOKIE: &str = "__twr_match";

type Identify = dyn Fn(&Parts) -> Option<String> + Send + Sync;
type TopicCheck = dyn Fn(&Topic) -> bool + Send + Sync;
type BanCheck = dyn Fn(&UserId, &Parts) -> bool + Send + Sync;
type Limit = dyn Fn(&UserId, &Parts) -> Option<Duration> + Send + Sync;

/// What a request gets while the store fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatchFailPolicy {
    /// `202` `{"state": "waiting", "unavailable": true}` with `Retry-After`: the client keeps
    /// polling, and nobody is told of a group that does not exist. The default.
    #[default]
    Wait,
    /// `503` `{"error": "unavailable"}` with `Retry-After`.
    Refuse,
}

/// A misconfiguration of a [`MatchingService`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatchingServiceError {
    /// Neither [`identify`](MatchingServiceBuilder::identify) nor
    /// [`session_cookie`](MatchingServiceBuilder::session_cookie) was chosen.
    NoIdentity,
    /// The session cookie's signing key was refused (a secret shorter than 32 bytes).
    Key(tower_waiting_room::ConfigError),
}

impl fmt::Display for MatchingServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchingServiceError::NoIdentity => f.write_str(
                "choose how users are identified: `identify` (the app's auth) or \
                 `session_cookie` (a signed cookie)",
            ),
            MatchingServiceError::Key(e) => write!(f, "session cookie key: {e}"),
        }
    }
}

impl std::error::Error for MatchingServiceError {}

enum Identity {
    App(Arc<Identify>),
    /// The signed session cookie that names users when the application does not.
    Cookie(Box<SessionCookie>),
}

/// Builds a [`MatchingService`]; see [`MatchingService::builder`].
pub struct MatchingServiceBuilder {
    matchmaker: Matchmaker,
    identity: Option<Result<Identity, MatchingServiceError>>,
    topics: Option<Arc<TopicCheck>>,
    banned: Option<Arc<BanCheck>>,
    limit: Option<Arc<Limit>>,
    fail: MatchFailPolicy,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for MatchingServiceBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MatchingServiceBuilder")
            .field("matchmaker", &self.matchmaker)
            .field("fail", &self.fail)
            .finish_non_exhaustive()
    }
}

impl MatchingServiceBuilder {
    /// Users are who `identify` says, from the request (the application's authentication:
    /// a session, a verified token): `None` answers `401`, an id that is not a valid
    /// [`UserId`] (empty, too long, a control character) `400`.
    pub fn identify(
        mut self,
        identify: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.identity = Some(Ok(Identity::App(Arc::new(identify))));
        self
    }

    /// Users are who a signed cookie says: made at their first join, `HttpOnly`,
    /// `SameSite=Lax`, `Secure` unless `secure` is false (plain-HTTP development only).
    /// `secret`: at least 32 bytes, never logged.
    pub fn session_cookie(mut self, secret: impl AsRef<[u8]>, secure: bool) -> Self {
        self.identity = Some(
            SigningKey::new("m", secret)
                .map(|key| {
                    Identity::Cookie(Box::new(SessionCookie::new(
                        Keyring::new(key),
                        "matching",
                        MATCHING_COOKIE,
                        secure,
                    )))
                })
                .map_err(MatchingServiceError::Key),
        );
        self
    }

    /// Only topics `check` accepts may be joined; others get `400` `unknown_topic`.
    pub fn topics(mut self, check: impl Fn(&Topic) -> bool + Send + Sync + 'static) -> Self {
        self.topics = Some(Arc::new(check));
        self
    }

    /// Users `check` says are banned get `403` `banned`, whatever they ask.
    pub fn banned(
        mut self,
        check: impl Fn(&UserId, &Parts) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.banned = Some(Arc::new(check));
        self
    }

    /// The client's limit: `check` answers `Some(retry_after)` when the user is over it, and
    /// the request gets `429` with `Retry-After`.
    pub fn limit(
        mut self,
        check: impl Fn(&UserId, &Parts) -> Option<Duration> + Send + Sync + 'static,
    ) -> Self {
        self.limit = Some(Arc::new(check));
        self
    }

    /// What requests get while the store fails. Default [`MatchFailPolicy::Wait`].
    pub fn fail_policy(mut self, policy: MatchFailPolicy) -> Self {
        self.fail = policy;
        self
    }

    /// The clock of the session cookie's times (tests).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The service, or what is wrong with the configuration.
    pub fn build(self) -> Result<MatchingService, MatchingServiceError> {
        let identity = self.identity.ok_or(MatchingServiceError::NoIdentity)??;
        Ok(MatchingService {
            inner: Arc::new(Inner {
                matchmaker: self.matchmaker,
                identity,
                topics: self.topics,
                banned: self.banned,
                limit: self.limit,
                fail: self.fail,
                clock: self.clock,
            }),
        })
    }
}

/// Matching's HTTP API for one [`Matchmaker`]: see [the module](self) for the contract.
/// Mount it at the path of your choice, e.g. with axum:
///
/// ```
/// use tower_waiting_room_matching::service::MatchingService;
/// use tower_waiting_room_matching::store::MemoryMatchStore;
/// use tower_waiting_room_matching::Matchmaker;
///
/// let matchmaker = Matchmaker::builder().build(MemoryMatchStore::new()).unwrap();
/// let service = MatchingService::builder(matchmaker)
///     // The app's own auth decides who the user is (here a header, for the example only).
///     .identify(|parts| Some(parts.headers.get("x-user")?.to_str().ok()?.to_owned()))
///     .build()
///     .unwrap();
/// let app: axum::Router = axum::Router::new().route_service("/api/matching", service);
/// # let _ = app;
/// ```
///
/// Always ready; never fails (`Error = Infallible`): every rejection is a response. Cheap to
/// clone. `Debug` never shows the session cookie's key.
#[derive(Clone)]
pub struct MatchingService {
    inner: Arc<Inner>,
}

struct Inner {
    matchmaker: Matchmaker,
    identity: Identity,
    topics: Option<Arc<TopicCheck>>,
    banned: Option<Arc<BanCheck>>,
    limit: Option<Arc<Limit>>,
    fail: MatchFailPolicy,
    clock: Arc<dyn Clock>,
}

impl MatchingService {
    /// Starts building the service over `matchmaker`; choose how users are identified
    /// ([`identify`](MatchingServiceBuilder::identify) or
    /// [`session_cookie`](MatchingServiceBuilder::session_cookie)).
    pub fn builder(matchmaker: Matchmaker) -> MatchingServiceBuilder {
        MatchingServiceBuilder {
            matchmaker,
            identity: None,
            topics: None,
            banned: None,
            limit: None,
            fail: MatchFailPolicy::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// The matchmaker it serves.
    pub fn matchmaker(&self) -> &Matchmaker {
        &self.inner.matchmaker
    }
}

impl fmt::Debug for MatchingService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let identity = match self.inner.identity {
            Identity::App(_) => "the application's",
            Identity::Cookie(_) => "a signed session cookie",
        };
        f.debug_struct("MatchingService")
            .field("matchmaker", &self.inner.matchmaker)
            .field("identity", &identity)
            .field("fail", &self.inner.fail)
            .finish_non_exhaustive()
    }
}

impl<B> Service<Request<B>> for MatchingService
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    type Response = Response<FullBody>;
    type Error = std::convert::Infallible;
    type Future = AnswerFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        AnswerFuture::new(answer(self.inner.clone(), req))
    }
}

/// Who the request is from: a user, and a `Set-Cookie` to send if a session was made.
struct Who {
    user: UserId,
    set_cookie: Option<HeaderValue>,
}

impl Inner {
    /// The user, if the request says who it is (an id the application gave that is not a
    /// valid user id is an error); with `create`, a new session when it does not (cookie
    /// identity only).
    fn who(&self, parts: &Parts, create: bool) -> Result<Option<Who>, InputError> {
        match &self.identity {
            Identity::App(identify) => match identify(parts) {
                None => Ok(None),
                Some(id) => Ok(Some(Who {
                    user: UserId::new(id)?,
                    set_cookie: None,
                })),
            },
            Identity::Cookie(session_cookie) => {
                let now = self.clock.now_ms();
                let session = session_cookie.read(&parts.headers, now);
                let (session, fresh) = match session {
                    Some(s) => (s, false),
                    None if create => (SessionId::random(), true),
                    None => return Ok(None),
                };
                let user = UserId::new(format!("s:{session}"))
                    .expect("a session's hex is a valid user id");
                // Renewed by every join, so a session in use never runs out mid-wait.
                let set_cookie = (fresh || create).then(|| {
                    let ttl = MATCHING_SESSION_TTL.as_millis() as u64;
                    session_cookie.set(session, now, ttl)
                });
                Ok(Some(Who { user, set_cookie }))
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinBody {
    topic: String,
    size: u64,
}

async fn answer<B>(inner: Arc<Inner>, req: Request<B>) -> Response<FullBody>
where
    B: http_body::Body + Send + 'static,
{
    let mut res = answer_uncached(inner, req).await;
    // Every answer is one user's, of now: no cache (shared or the browser's) may keep it.
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

async fn answer_uncached<B>(inner: Arc<Inner>, req: Request<B>) -> Response<FullBody>
where
    B: http_body::Body + Send + 'static,
{
    let (parts, body) = req.into_parts();
    let method = parts.method.clone();
    if ![Method::GET, Method::POST, Method::DELETE].contains(&method) {
        let mut res = error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            json!({}),
        );
        res.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
        return res;
    }
    // A join a page of another site made the browser send (a form posts `text/plain` JSON
    // with no preflight) is refused before anything is read: with the app's own login cookie
    // it would join its user to the other site's choice of queue. Browsers say so in
    // `Sec-Fetch-Site`; other clients do not send it.
    if method == Method::POST && is_cross_site(&parts.headers) {
        return error(StatusCode::FORBIDDEN, "cross_site", json!({}));
    }
    // The body first: a bad one is a `400` that writes nothing, whoever sends it.
    let queue = if method == Method::POST {
        match read_queue(&inner, body).await {
            Ok(q) => Some(q),
            Err(res) => return res,
        }
    } else {
        None
    };
    let who = match inner.who(&parts, method == Method::POST) {
        Ok(who) => who,
        Err(e) => return bad_request("user", e.reason()),
    };
    let Some(who) = who else {
        return match method {
            // No session: nothing to show or leave.
            Method::GET => json_response(StatusCode::NOT_FOUND, &json!({"state": "idle"})),
            Method::DELETE => {
                json_response(StatusCode::OK, &json!({"state": "idle", "was": "idle"}))
            }
            _ => error(StatusCode::UNAUTHORIZED, "unauthenticated", json!({})),
        };
    };
    // A banned user may still leave (a ban that came while they waited must not keep them in
    // line to be matched); anything else is refused.
    if method != Method::DELETE && inner.banned.as_ref().is_some_and(|b| b(&who.user, &parts)) {
        return error(StatusCode::FORBIDDEN, "banned", json!({}));
    }
    if let Some(retry) = inner.limit.as_ref().and_then(|l| l(&who.user, &parts)) {
        let mut res = error(StatusCode::TOO_MANY_REQUESTS, "rate_limited", json!({}));
        retry_after(&mut res, retry);
        return res;
    }
    let policy = inner.matchmaker.policy();
    let mut res = match (method, queue) {
        (Method::POST, Some(queue)) => match inner.matchmaker.join(who.user, queue).await {
            Ok(JoinOutcome::Joined(state)) => {
                state_response(&state, StatusCode::ACCEPTED, policy.fallback_after)
            }
            Ok(JoinOutcome::Conflict(state)) => error(
                StatusCode::CONFLICT,
                "conflict",
                json!({"current": state_json(&state, policy.fallback_after)}),
            ),
            Err(JoinError::SizeNotAllowed(_)) => bad_request("size", "not_offered"),
            Err(JoinError::Store(e)) => unavailable(&inner, &e),
        },
        (Method::GET, _) => match inner.matchmaker.status(who.user).await {
            Ok(state) => state_response(&state, StatusCode::OK, policy.fallback_after),
            Err(e) => unavailable(&inner, &e),
        },
        (_, _) => match inner.matchmaker.leave(who.user).await {
            Ok(before) => json_response(
                StatusCode::OK,
                &json!({"state": "idle", "was": before.name()}),
            ),
            Err(e) => unavailable(&inner, &e),
        },
    };
    if let Some(cookie) = who.set_cookie {
        res.headers_mut().append(header::SET_COOKIE, cookie);
    }
    res
}

/// Whether the browser says the request comes from another site (`Sec-Fetch-Site:
/// cross-site`). `same-site` (a sibling subdomain) and `none` (typed by the user) are not.
fn is_cross_site(headers: &http::HeaderMap) -> bool {
    headers
        .get_all("sec-fetch-site")
        .iter()
        .any(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"))
}

/// The queue a `POST` body asks for, or the `400` that says what is wrong with it.
async fn read_queue<B: http_body::Body>(
    inner: &Inner,
    body: B,
) -> Result<Queue, Response<FullBody>> {
    let bytes = match collect_limited(body, MATCHING_BODY_LIMIT).await {
        Ok(b) => b,
        Err(Collect::TooLarge) => return Err(bad_request("body", "too_large")),
        Err(Collect::Failed) => return Err(bad_request("body", "unreadable")),
    };
    let body: JoinBody = serde_json::from_slice(&bytes).map_err(|_| {
        bad_request(
            "body",
            "expected a JSON object {\"topic\": <text>, \"size\": <number>}",
        )
    })?;
    let topic = Topic::new(body.topic).map_err(|e| bad_request("topic", e.reason()))?;
    let size = GroupSize::new(body.size).map_err(|e| bad_request("size", e.reason()))?;
    if !inner.matchmaker.sizes().contains(&size) {
        return Err(bad_request("size", "not_offered"));
    }
    if inner.topics.as_ref().is_some_and(|check| !check(&topic)) {
        return Err(error(StatusCode::BAD_REQUEST, "unknown_topic", json!({})));
    }
    Ok(Queue::new(topic, size))
}

fn error(status: StatusCode, code: &str, mut extra: Value) -> Response<FullBody> {
    extra["error"] = Value::from(code);
    json_response(status, &extra)
}

fn bad_request(field: &str, reason: &str) -> Response<FullBody> {
    error(
        StatusCode::BAD_REQUEST,
        "bad_request",
        json!({"field": field, "reason": reason}),
    )
}

fn retry_after(res: &mut Response<FullBody>, after: Duration) {
    let secs = after.as_secs().max(1);
    res.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_str(&secs.to_string()).expect("digits"),
    );
}

/// The answer while the store fails: the configured policy, never a `500`.
fn unavailable(inner: &Inner, e: &tower_waiting_room::store::StoreError) -> Response<FullBody> {
    tracing::warn!(error = %e, "matching store failed");
    let mut res = match inner.fail {
        MatchFailPolicy::Wait => json_response(
            StatusCode::ACCEPTED,
            &json!({"state": "waiting", "unavailable": true}),
        ),
        MatchFailPolicy::Refuse => error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", json!({})),
    };
    retry_after(&mut res, Duration::from_secs(2));
    res
}

/// A state's answer: `waiting` as the status of a waiting user (`202` to a join: accepted, not
/// done; `200` to a poll), `200` matched, `404` idle.
fn state_response(
    state: &MatchState,
    waiting: StatusCode,
    fallback_after: Duration,
) -> Response<FullBody> {
    let status = match state {
        MatchState::Idle => StatusCode::NOT_FOUND,
        MatchState::Waiting(_) => waiting,
        _ => StatusCode::OK,
    };
    json_response(status, &state_json(state, fallback_after))
}

/// A state as the API shows it (`docs/matching.md`).
fn state_json(state: &MatchState, fallback_after: Duration) -> Value {
    match state {
        MatchState::Waiting(w) => waiting_json(w, fallback_after),
        MatchState::Matched(g) => group_json(g),
        _ => json!({"state": "idle"}),
    }
}

fn waiting_json(w: &Waiting, fallback_after: Duration) -> Value {
    // An upper bound when the fallback will match this waiter: among the first `size`, with
    // someone to pair with, the oldest has waited at least as long as this one.
    let size = u64::from(w.queue.size.get());
    let estimate = (size > 2 && w.position <= size && w.waiting >= 2)
        .then(|| fallback_after.saturating_sub(w.waited).as_secs());
    json!({
        "state": "waiting",
        "topic": w.queue.topic.as_str(),
        "size": size,
        "position": w.position,
        "waiting": w.waiting,
        "waited_seconds": w.waited.as_secs(),
        "expires_in_seconds": w.expires_in.as_secs(),
        "estimate_seconds": estimate,
    })
}

fn group_json(g: &Group) -> Value {
    json!({
        "state": "matched",
        "group": g.id.to_string(),
        "topic": g.id.queue.topic.as_str(),
        "size": g.members.len(),
        "queue_size": g.id.queue.size.get(),
        "members": g.members.iter().map(UserId::as_str).collect::<Vec<_>>(),
        "confirmed": g.confirmed.is_some(),
        "app_group_id": g.confirmed.as_ref().map(|a| a.as_str()),
        "expires_in_seconds": g.expires_in.as_secs(),
    })
}
