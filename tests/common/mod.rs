//! Shared helpers for the integration tests: a loopback server and client, a cookie jar, a store
//! that counts (and can fail) its calls, and minting of signed values with the public API.
#![allow(dead_code)]

pub mod rng;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::any;
use axum::{Extension, Json, Router};
use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;
use tower_waiting_room::__private::{AdmissionToken, QueueCookie};
use tower_waiting_room::store::{
    Decision, MemoryStore, RoomStats, SettingsChange, SettingsUpdate, Store, StoreError,
    StoreErrorKind, StoreFuture,
};
use tower_waiting_room::store::{
    MintFor, Minted, Redeemed, RoomSnapshot, SeenWaiters, SnapshotStore, TicketNonce, TicketStore,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{
    Admission, Keyring, RoomPolicy, SessionId, SigningKey, WaitingRoomBuilder, WaitingRoomLayer,
};

/// The test secret (32 bytes) used with `builder.secret(..)`, whose key id is `k1`.
pub const SECRET: [u8; 32] = *b"0123456789abcdef0123456789abcdef";
/// Where test clocks start: 2026-01-01T00:00:00Z.
pub const T0: u64 = 1_767_225_600_000;
/// The default path prefix of the room's endpoints.
pub const PREFIX: &str = "/__waitingroom";

/// Call before `tracing::subscriber::set_default` in a test that reads its own thread's log.
///
/// With one subscriber registered in the process, tracing-core caches a callsite's interest from
/// the thread that hits it first, by that thread's own default: a callsite first hit on another
/// test's thread (no subscriber there) while this test's subscriber is set would stay cached as
/// "nobody listens", and this test's events there would be lost. A second subscriber that lives
/// as long as the process (nobody's default; it drops everything) keeps the count above one, so
/// each callsite's interest is taken from every live subscriber instead.
pub fn tracing_asks_every_subscriber() {
    static KEEP: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    KEEP.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
}

/// The keyring the builder makes from `.secret(SECRET)`.
pub fn keys() -> Keyring {
    Keyring::new(SigningKey::new("k1", SECRET).unwrap())
}

/// A fresh manual clock at [`T0`].
pub fn clock() -> ManualClock {
    ManualClock::new(T0)
}

// ===== the app behind the room =====

/// A router whose every path answers with what the handler saw: the `Admission` (read with
/// axum's `Extension` extractor, so a request without one would be a 500), method and URI.
pub fn app(layer: WaitingRoomLayer) -> Router {
    app_seeing(layer, |_, _| {})
}

/// Like [`app`], and `see` is told of every request that reaches the handler (its `Admission`
/// and headers) before the handler answers.
pub fn app_seeing(
    layer: WaitingRoomLayer,
    see: impl Fn(&Admission, &HeaderMap) + Clone + Send + Sync + 'static,
) -> Router {
    let handler =
        move |Extension(a): Extension<Admission>, method: Method, uri: Uri, headers: HeaderMap| {
            see(&a, &headers);
            echo(a, method, uri)
        };
    Router::new()
        .route("/", any(handler.clone()))
        .route("/{*rest}", any(handler))
        .layer(layer)
}

async fn echo(a: Admission, method: Method, uri: Uri) -> Json<Value> {
    Json(json!({
        "room": a.room(),
        "session": a.session().to_string(),
        "expires_at_ms": a.expires_at_ms(),
        "by": format!("{:?}", a.admitted_by()),
        "method": method.as_str(),
        "uri": uri.to_string(),
    }))
}

// ===== loopback server and client =====

/// A server on 127.0.0.1 and a client for it.
#[derive(Clone)]
pub struct Http {
    pub addr: SocketAddr,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// Whether a request carries a non-empty cookie `name` (what the app behind a gateway records).
pub fn carries_cookie(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .any(|pair| {
            pair.split_once('=')
                .is_some_and(|(k, v)| k.trim() == name && !v.trim().is_empty())
        })
}

/// Serves `router` with `axum::serve` on an ephemeral loopback port.
pub async fn serve(router: Router) -> Http {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    Http::new(addr)
}

/// Serves `router` the way the README says: `axum::serve` with connect info, so the room sees
/// each connection's address (the client IP) with no extractor in the app.
pub async fn serve_with_connect_info(router: Router) -> Http {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let service = router.into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, service).await.unwrap();
    });
    Http::new(addr)
}

/// Sends one request to `router` in process (no server, no connection), as
/// [`Http::send`] does over loopback.
pub async fn call(
    router: &Router,
    method: Method,
    path: &str,
    headers: &[(HeaderName, HeaderValue)],
) -> Reply {
    let res = router
        .clone()
        .oneshot(request(method, path, headers))
        .await
        .expect("a router never fails");
    Reply::read(res)
        .await
        .expect("the app's body reads to the end")
}

/// `method uri` with the given headers and an empty body.
fn request(
    method: Method,
    uri: &str,
    headers: &[(HeaderName, HeaderValue)],
) -> Request<Full<Bytes>> {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(k, v.clone());
    }
    req.body(Full::new(Bytes::new())).unwrap()
}

/// A transport error: the connection failed or the answer was cut off.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An answer, read to the end.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Http {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// Sends one request with the given headers and an empty body.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Reply {
        self.exchange(self.request(method, path, headers))
            .await
            .expect("the server answers (no panic, no dropped connection)")
    }

    /// The request [`send`](Self::send) makes: `method path` to this server with the given
    /// headers and an empty body.
    pub fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Request<Full<Bytes>> {
        request(method, &format!("http://{}{}", self.addr, path), headers)
    }

    /// Sends `req` and reads the answer to the end; a transport error is returned, not a panic.
    pub async fn exchange(&self, req: Request<Full<Bytes>>) -> Result<Reply, BoxError> {
        Ok(Reply::read(self.client.request(req).await?).await?)
    }

    /// A request carrying the jar's cookies; the answer's `Set-Cookie`s go into the jar.
    pub async fn visit(&self, jar: &mut Jar, method: Method, path: &str) -> Reply {
        self.visit_with(jar, method, path, &[]).await
    }

    /// Like [`visit`](Self::visit) with extra headers.
    pub async fn visit_with(
        &self,
        jar: &mut Jar,
        method: Method,
        path: &str,
        extra: &[(HeaderName, HeaderValue)],
    ) -> Reply {
        let mut headers = extra.to_vec();
        if let Some(cookie) = jar.header() {
            headers.push((header::COOKIE, cookie));
        }
        let reply = self.send(method, path, &headers).await;
        jar.absorb(&reply);
        reply
    }

    /// `GET /` as an API client (`Accept: application/json`) with the jar's cookies.
    pub async fn visit_json(&self, jar: &mut Jar) -> Reply {
        let accept = [(header::ACCEPT, HeaderValue::from_static("application/json"))];
        self.visit_with(jar, Method::GET, "/", &accept).await
    }

    /// `GET path` with one `Cookie` header (or none).
    pub async fn get_with_cookie(&self, path: &str, cookie: Option<HeaderValue>) -> Reply {
        let headers: Vec<_> = cookie.into_iter().map(|c| (header::COOKIE, c)).collect();
        self.send(Method::GET, path, &headers).await
    }

    /// Writes `raw` on a fresh connection and returns everything the server sent back (the
    /// request should say `Connection: close`).
    pub async fn raw(&self, raw: &[u8]) -> String {
        let mut stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        stream.write_all(raw).await.unwrap();
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Reply {
    /// Reads `res` to the end.
    pub async fn read<B: http_body::Body>(res: http::Response<B>) -> Result<Reply, B::Error> {
        let (parts, body) = res.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    /// A header as text.
    pub fn header(&self, name: impl http::header::AsHeaderName) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// Every `Set-Cookie` line.
    pub fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    /// The `Set-Cookie` line for cookie `name`, if there is exactly one; panics on several.
    pub fn set_cookie(&self, name: &str) -> Option<String> {
        let prefix = format!("{name}=");
        let mut found: Vec<String> = self
            .set_cookies()
            .into_iter()
            .filter(|c| c.starts_with(&prefix))
            .collect();
        assert!(found.len() <= 1, "several Set-Cookie for {name}: {found:?}");
        found.pop()
    }

    /// The value set for cookie `name`, if any.
    pub fn cookie_value(&self, name: &str) -> Option<String> {
        self.set_cookie(name)
            .map(|c| cookie_value_of(&c).to_owned())
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {:?} (status {})",
                String::from_utf8_lossy(&self.body),
                self.status
            )
        })
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8(self.body.to_vec()).unwrap()
    }

    /// `Retry-After` in seconds.
    pub fn retry_after(&self) -> u64 {
        self.header(header::RETRY_AFTER)
            .expect("Retry-After is set")
            .parse()
            .expect("Retry-After is a number of seconds")
    }

    /// Asserts the answer passed through to the handler, and returns what the handler saw.
    pub fn handler_saw(&self) -> Value {
        assert_eq!(
            self.status,
            StatusCode::OK,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        let v = self.json();
        assert!(v.get("by").is_some(), "not the handler's answer: {v}");
        v
    }
}

/// `name=value; attrs` → `value`.
pub fn cookie_value_of(set_cookie: &str) -> &str {
    let pair = set_cookie.split(';').next().unwrap();
    pair.split_once('=').unwrap().1
}

/// `Max-Age` of a `Set-Cookie` line.
pub fn max_age_of(set_cookie: &str) -> Option<u64> {
    set_cookie
        .split(';')
        .map(str::trim)
        .find_map(|a| a.strip_prefix("Max-Age="))
        .map(|v| v.parse().unwrap())
}

/// The attributes of a `Set-Cookie` line, trimmed (`HttpOnly`, `SameSite=Lax`, ...).
pub fn attrs_of(set_cookie: &str) -> Vec<String> {
    set_cookie
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_owned())
        .collect()
}

/// A visitor's cookies, as a browser would keep them (only name and value matter here).
#[derive(Clone, Debug, Default)]
pub struct Jar(BTreeMap<String, String>);

impl Jar {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies the answer's `Set-Cookie`s: `Max-Age=0` removes.
    pub fn absorb(&mut self, reply: &Reply) {
        for line in reply.set_cookies() {
            let (name, value) = line.split(';').next().unwrap().split_once('=').unwrap();
            if max_age_of(&line) == Some(0) {
                self.0.remove(name);
            } else {
                self.0.insert(name.to_owned(), value.to_owned());
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    pub fn set(&mut self, name: &str, value: &str) {
        self.0.insert(name.to_owned(), value.to_owned());
    }

    pub fn remove(&mut self, name: &str) {
        self.0.remove(name);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `Cookie` header a browser would send.
    pub fn header(&self) -> Option<HeaderValue> {
        if self.0.is_empty() {
            return None;
        }
        let s = self
            .0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        Some(HeaderValue::from_str(&s).unwrap())
    }
}

/// The session id inside a signed queue cookie or admission token value
/// (`<kind>.<kid>.<session>.<iat>.<exp>.<tag>`).
pub fn session_in(value: &str) -> String {
    value.split('.').nth(2).unwrap().to_owned()
}

// ===== minting signed values with the public API =====

/// A queue cookie value for `room`.
pub fn queue_value(
    keys: &Keyring,
    room: &str,
    session: SessionId,
    now_ms: u64,
    ttl_ms: u64,
) -> String {
    QueueCookie::for_session(session, now_ms, ttl_ms).sign(keys, room)
}

/// An admission token value for `room`.
pub fn admission_value(
    keys: &Keyring,
    room: &str,
    session: SessionId,
    issued_at_ms: u64,
    expires_at_ms: u64,
) -> String {
    AdmissionToken::new(session, issued_at_ms, expires_at_ms).sign(keys, room)
}

/// `name=value` as a `Cookie` header value.
pub fn cookie(name: &str, value: &str) -> HeaderValue {
    HeaderValue::from_str(&format!("{name}={value}")).unwrap()
}

// ===== a store that counts its calls and can be told to fail =====

/// How many store calls of each kind a [`TestStore`] saw (stats are not counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Calls {
    /// Every enter, a join's too (the store's default join is its enter; see
    /// [`TestStore::joins`]).
    pub enter: usize,
    pub poll: usize,
    pub heartbeat: usize,
    pub release: usize,
    /// Snapshot refreshes (only with [`TestStore::with_snapshots`]).
    pub sync: usize,
}

impl Calls {
    pub fn total(&self) -> usize {
        self.enter + self.poll + self.heartbeat + self.release
    }
}

#[derive(Default)]
struct Counters {
    enter: AtomicUsize,
    join: AtomicUsize,
    poll: AtomicUsize,
    heartbeat: AtomicUsize,
    release: AtomicUsize,
    sync: AtomicUsize,
    stats: AtomicUsize,
}

/// Wraps a [`MemoryStore`]: counts every call, and fails them with a chosen kind while told to.
#[derive(Clone)]
pub struct TestStore {
    inner: MemoryStore,
    counters: Arc<Counters>,
    fail: Arc<Mutex<Option<StoreErrorKind>>>,
    fail_stats: Arc<Mutex<Option<StoreErrorKind>>>,
    stats_delay: Arc<Mutex<Duration>>,
    snapshots: bool,
}

impl TestStore {
    pub fn new(clock: ManualClock) -> Self {
        Self {
            inner: MemoryStore::with_clock(clock),
            counters: Arc::default(),
            fail: Arc::default(),
            fail_stats: Arc::default(),
            stats_delay: Arc::default(),
            snapshots: false,
        }
    }

    /// The same store, also keeping snapshots ([`SnapshotStore::sync`], counted): its rooms answer
    /// waiting polls at the gateway. Off by default, so the tests that count each poll's call
    /// see one.
    pub fn with_snapshots(mut self) -> Self {
        self.snapshots = true;
        self
    }

    /// From now on every call (but `stats`) fails with `kind`; `None` heals the store.
    pub fn fail_with(&self, kind: Option<StoreErrorKind>) {
        *self.fail.lock().unwrap() = kind;
    }

    pub fn calls(&self) -> Calls {
        Calls {
            enter: self.counters.enter.load(Ordering::SeqCst),
            poll: self.counters.poll.load(Ordering::SeqCst),
            heartbeat: self.counters.heartbeat.load(Ordering::SeqCst),
            release: self.counters.release.load(Ordering::SeqCst),
            sync: self.counters.sync.load(Ordering::SeqCst),
        }
    }

    /// From now on `stats` fails with `kind` (the other calls as `fail_with` says); `None`
    /// heals it.
    pub fn fail_stats_with(&self, kind: Option<StoreErrorKind>) {
        *self.fail_stats.lock().unwrap() = kind;
    }

    /// From now on `stats` answers only after `delay` (of real time): a slow store.
    pub fn delay_stats(&self, delay: Duration) {
        *self.stats_delay.lock().unwrap() = delay;
    }

    /// How many times `stats` was called through the store (not through [`Self::stats`]).
    pub fn stats_calls(&self) -> usize {
        self.counters.stats.load(Ordering::SeqCst)
    }

    /// How many of the enters the layer made as joins (a visitor whose cookie had no place).
    pub fn joins(&self) -> usize {
        self.counters.join.load(Ordering::SeqCst)
    }

    /// The room's counts, straight from the wrapped store (not counted as a call).
    pub async fn stats(&self, policy: &RoomPolicy) -> RoomStats {
        self.inner.stats(policy).await.unwrap()
    }

    /// The wrapped store, to set up a room without counting calls.
    pub fn inner(&self) -> &MemoryStore {
        &self.inner
    }

    fn failure<T: Send + 'static>(&self) -> Option<StoreFuture<T>> {
        let kind = (*self.fail.lock().unwrap())?;
        Some(Box::pin(std::future::ready(Err(StoreError::new(kind)))))
    }
}

impl Store for TestStore {
    fn enter(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.counters.enter.fetch_add(1, Ordering::SeqCst);
        self.failure()
            .unwrap_or_else(|| self.inner.enter(policy, session))
    }

    fn join(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.counters.join.fetch_add(1, Ordering::SeqCst);
        self.enter(policy, session)
    }

    fn poll(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.counters.poll.fetch_add(1, Ordering::SeqCst);
        self.failure()
            .unwrap_or_else(|| self.inner.poll(policy, session))
    }

    fn heartbeat(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.counters.heartbeat.fetch_add(1, Ordering::SeqCst);
        self.failure()
            .unwrap_or_else(|| self.inner.heartbeat(policy, session))
    }

    fn release(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<bool> {
        self.counters.release.fetch_add(1, Ordering::SeqCst);
        self.failure()
            .unwrap_or_else(|| self.inner.release(policy, session))
    }

    fn stats(&self, policy: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.counters.stats.fetch_add(1, Ordering::SeqCst);
        if let Some(kind) = *self.fail_stats.lock().unwrap() {
            return Box::pin(std::future::ready(Err(StoreError::new(kind))));
        }
        let delay = *self.stats_delay.lock().unwrap();
        let answer = self.inner.stats(policy);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            answer.await
        })
    }

    fn configure(
        &self,
        policy: &RoomPolicy,
        change: SettingsChange,
    ) -> StoreFuture<SettingsUpdate> {
        self.failure()
            .unwrap_or_else(|| self.inner.configure(policy, change))
    }

    fn admit_next(&self, policy: &RoomPolicy, count: u32) -> StoreFuture<u64> {
        self.failure()
            .unwrap_or_else(|| self.inner.admit_next(policy, count))
    }

    fn ban(&self, policy: &RoomPolicy, session: SessionId, until_ms: u64) -> StoreFuture<bool> {
        self.failure()
            .unwrap_or_else(|| self.inner.ban(policy, session, until_ms))
    }

    fn tickets(self: Arc<Self>) -> Option<Arc<dyn TicketStore>> {
        Some(self)
    }

    fn snapshots(self: Arc<Self>) -> Option<Arc<dyn SnapshotStore>> {
        if self.snapshots {
            Some(self)
        } else {
            None
        }
    }
}

impl TicketStore for TestStore {
    fn mint_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
        mint_for: MintFor,
    ) -> StoreFuture<Minted> {
        self.failure().unwrap_or_else(|| {
            self.inner
                .mint_ticket(policy, session, fresh, expires_at_ms, mint_for)
        })
    }

    fn redeem_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        nonce: TicketNonce,
    ) -> StoreFuture<Redeemed> {
        self.failure()
            .unwrap_or_else(|| self.inner.redeem_ticket(policy, session, nonce))
    }
}

impl SnapshotStore for TestStore {
    fn sync(&self, policy: &RoomPolicy, seen: SeenWaiters) -> StoreFuture<RoomSnapshot> {
        self.counters.sync.fetch_add(1, Ordering::SeqCst);
        self.failure()
            .unwrap_or_else(|| self.inner.sync(policy, seen))
    }
}

// ===== a whole site: room on a counting store and a manual clock, served on loopback =====

/// A room (built from the given builder plus `SECRET`, a [`TestStore`] and a manual clock),
/// served behind [`app`] on loopback.
pub struct Site {
    pub layer: WaitingRoomLayer,
    pub store: TestStore,
    pub clock: ManualClock,
    pub http: Http,
}

impl Site {
    pub async fn start(builder: WaitingRoomBuilder) -> Self {
        Self::start_with(builder, app).await
    }

    /// Like [`start`](Self::start), with the router made by `router` from the layer.
    pub async fn start_with(
        builder: WaitingRoomBuilder,
        router: impl FnOnce(WaitingRoomLayer) -> Router,
    ) -> Self {
        let clock = clock();
        let store = TestStore::new(clock.clone());
        let layer = builder
            .secret(SECRET)
            .clock(clock.clone())
            .store(store.clone())
            .build()
            .expect("valid test configuration");
        let http = serve(router(layer.clone())).await;
        Self {
            layer,
            store,
            clock,
            http,
        }
    }

    /// Name of the queue cookie.
    pub fn q(&self) -> String {
        self.layer.config().cookies().queue_name().to_owned()
    }

    /// Name of the admission cookie.
    pub fn a(&self) -> String {
        self.layer.config().cookies().admission_name().to_owned()
    }

    pub fn room(&self) -> String {
        self.layer.config().room().to_owned()
    }

    pub fn status_path(&self) -> String {
        format!("{PREFIX}/{}/status", self.room())
    }

    pub fn leave_path(&self) -> String {
        format!("{PREFIX}/{}/leave", self.room())
    }

    pub async fn stats(&self) -> RoomStats {
        self.store.stats(self.layer.config().policy()).await
    }

    /// A new visitor's first visit: 302 and a queue cookie in the jar.
    pub async fn arrive(&self, path: &str) -> Jar {
        let mut jar = Jar::new();
        let r = self.http.visit(&mut jar, Method::GET, path).await;
        assert_eq!(r.status, StatusCode::FOUND);
        assert!(jar.get(&self.q()).is_some(), "no queue cookie: {r:?}");
        jar
    }

    /// A new visitor who arrives and is let in (asserts 200 and an admission cookie).
    pub async fn admit(&self) -> Jar {
        let mut jar = self.arrive("/").await;
        let r = self.http.visit(&mut jar, Method::GET, "/").await;
        r.handler_saw();
        assert!(jar.get(&self.a()).is_some(), "no admission cookie: {r:?}");
        jar
    }
}

/// Asserts that an attack left the room as it was: same admitted, granted and waiting counts.
pub fn same_inside(before: RoomStats, after: RoomStats, what: &str) {
    assert_eq!(
        (before.admitted, before.granted, before.waiting),
        (after.admitted, after.granted, after.waiting),
        "{what}: the room changed"
    );
}
