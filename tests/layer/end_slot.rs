//! The app ends a visitor's slot (checkout finished), by the response header or through
//! `Admission::end_slot`: the slot is freed before the response goes out, the next in line is
//! let in at once (no clock advance), and the header never reaches the client.

use crate::common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use axum::{Extension, Router};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::Full;
use tokio::sync::Semaphore;
use tower::limit::ConcurrencyLimitLayer;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tower_waiting_room::config::defaults::END_SLOT_HEADER;
use tower_waiting_room::store::{
    Decision, MemoryStore, RoomStats, SettingsChange, SettingsUpdate, Store, StoreErrorKind,
    StoreFuture,
};
use tower_waiting_room::{Admission, RoomPolicy, SessionId, WaitingRoomLayer};

use common::*;

fn end_slot_header() -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_static(END_SLOT_HEADER),
        HeaderValue::from_static("1"),
    )
}

/// `/checkout-header` ends the slot by the header, `/checkout` through the admission, every
/// other path echoes what the handler saw.
fn shop(layer: WaitingRoomLayer) -> Router {
    let by_header = |Extension(a): Extension<Admission>| async move {
        let mut headers = HeaderMap::new();
        let (name, value) = end_slot_header();
        headers.insert(name, value);
        (headers, format!("{:?}", a.admitted_by()))
    };
    let by_admission = |Extension(a): Extension<Admission>| async move {
        a.clone().end_slot();
        assert!(a.is_slot_ended(), "clones share the flag");
        format!("{:?}", a.admitted_by())
    };
    let echo = app(layer.clone());
    Router::new()
        .route("/checkout-header", post(by_header))
        .route("/checkout", post(by_admission))
        .layer(layer)
        .fallback_service(echo)
}

/// Capacity 1, A inside, B waiting.
async fn a_inside_b_waiting() -> (Site, Jar, Jar) {
    let site = Site::start_with(WaitingRoomLayer::builder("shop").capacity(1), shop).await;
    let a = site.admit().await;
    let mut b = site.arrive("/").await;
    let r = site.http.visit(&mut b, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    (site, a, b)
}

async fn the_app_ends_the_slot(path: &str) {
    let (site, mut a, mut b) = a_inside_b_waiting().await;
    let r = site.http.visit(&mut a, Method::POST, path).await;
    assert_eq!(r.status, StatusCode::OK, "{path}");
    assert_eq!(r.text(), "Token", "{path}: the app answered");
    assert!(
        r.header(END_SLOT_HEADER).is_none(),
        "{path}: the header is stripped"
    );
    let cleared = r
        .set_cookie(&site.a())
        .expect("the admission cookie is removed");
    assert_eq!(max_age_of(&cleared), Some(0), "{path}: {cleared}");
    assert!(a.get(&site.a()).is_none(), "{path}");
    assert!(
        a.get(&site.q()).is_some(),
        "{path}: the queue cookie is kept"
    );
    assert_eq!(
        site.store.calls().release,
        1,
        "{path}: freed before the answer"
    );
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (0, 1, 0), "{path}");

    // B is let in on its next request, with no clock advance.
    let r = site.http.visit(&mut b, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "Store", "{path}");

    // A, back, is a newcomer at the end of the line.
    let r = site.http.visit(&mut a, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{path}");
    assert_eq!(r.json()["position"], 1, "{path}");
}

#[tokio::test]
async fn the_header_ends_the_slot_and_the_next_is_let_in_at_once() {
    the_app_ends_the_slot("/checkout-header").await;
}

#[tokio::test]
async fn admission_end_slot_ends_the_slot_and_the_next_is_let_in_at_once() {
    the_app_ends_the_slot("/checkout").await;
}

#[tokio::test]
async fn a_slot_granted_and_ended_in_one_request_sends_no_token() {
    for path in ["/checkout-header", "/checkout"] {
        let site = Site::start_with(WaitingRoomLayer::builder("shop").capacity(1), shop).await;
        let mut v = site.arrive("/").await;
        let r = site.http.visit(&mut v, Method::POST, path).await;
        assert_eq!(r.text(), "Store", "{path}: admitted by the store");
        let cookies: Vec<_> = r
            .set_cookies()
            .into_iter()
            .filter(|c| c.starts_with(&format!("{}=", site.a())))
            .collect();
        assert_eq!(cookies.len(), 1, "{path}: only the removal: {cookies:?}");
        assert_eq!(max_age_of(&cookies[0]), Some(0), "{path}");
        let s = site.stats().await;
        assert_eq!((s.admitted, s.granted, s.waiting), (0, 0, 0), "{path}");
    }
}

#[tokio::test]
async fn without_a_slot_the_header_is_stripped_and_the_store_not_called() {
    let site = Site::start_with(WaitingRoomLayer::builder("shop").capacity(1), shop).await;
    let mut v = site.arrive("/").await;
    site.store.fail_with(Some(StoreErrorKind::Unavailable));
    let before = site.store.calls();
    let r = site
        .http
        .visit(&mut v, Method::POST, "/checkout-header")
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), "FailOpen");
    assert!(r.header(END_SLOT_HEADER).is_none(), "stripped");
    assert!(r.set_cookie(&site.a()).is_none(), "no token to remove");
    let after = site.store.calls();
    assert_eq!(after.release, before.release, "no slot, no release");
    assert_eq!(after.enter, before.enter + 1);
}

#[tokio::test]
async fn a_bypassed_request_has_the_header_stripped_too() {
    let builder = WaitingRoomLayer::builder("shop")
        .capacity(1)
        .bypass(|req| req.uri().path() == "/checkout-header");
    let site = Site::start_with(builder, |layer| {
        let by_header = || async {
            let mut headers = HeaderMap::new();
            let (name, value) = end_slot_header();
            headers.insert(name, value);
            (headers, "bypassed")
        };
        Router::new()
            .route("/checkout-header", post(by_header))
            .layer(layer)
    })
    .await;
    let r = site.http.send(Method::POST, "/checkout-header", &[]).await;
    assert_eq!(r.text(), "bypassed");
    assert!(r.header(END_SLOT_HEADER).is_none());
    assert_eq!(site.store.calls().total(), 0);
}

#[tokio::test]
async fn a_store_failure_while_ending_still_sends_the_apps_response() {
    let (site, mut a, _b) = a_inside_b_waiting().await;
    site.store.fail_with(Some(StoreErrorKind::Unavailable));
    let r = site
        .http
        .visit(&mut a, Method::POST, "/checkout-header")
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), "Token");
    assert!(r.header(END_SLOT_HEADER).is_none());
    assert_eq!(site.store.calls().release, 1, "tried");
    site.store.fail_with(None);
    let s = site.stats().await;
    assert_eq!(s.admitted, 1, "the slot stays until it expires");
}

// ===== the Tower contract of the new state =====

/// A memory store whose `release` waits for a permit of `gate`, counting the releases begun.
#[derive(Clone)]
struct GatedRelease {
    inner: MemoryStore,
    gate: Arc<Semaphore>,
    releases: Arc<AtomicUsize>,
}

impl Store for GatedRelease {
    fn enter(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.inner.enter(policy, session)
    }
    fn poll(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.inner.poll(policy, session)
    }
    fn heartbeat(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.inner.heartbeat(policy, session)
    }
    fn release(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<bool> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        let (gate, call) = (self.gate.clone(), self.inner.release(policy, session));
        Box::pin(async move {
            let _permit = gate.acquire().await.unwrap();
            call.await
        })
    }
    fn stats(&self, policy: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.inner.stats(policy)
    }
    fn configure(
        &self,
        policy: &RoomPolicy,
        change: SettingsChange,
    ) -> StoreFuture<SettingsUpdate> {
        self.inner.configure(policy, change)
    }
    fn admit_next(&self, policy: &RoomPolicy, count: u32) -> StoreFuture<u64> {
        self.inner.admit_next(policy, count)
    }
    fn ban(&self, policy: &RoomPolicy, session: SessionId, until_ms: u64) -> StoreFuture<bool> {
        self.inner.ban(policy, session, until_ms)
    }
}

/// Behind a concurrency limit of 1, a request whose slot is being ended waits for the store
/// without holding the app's permit (its inner future is done and dropped), and the inner
/// service is called once per request: the ending state never readies nor calls it.
#[tokio::test]
async fn ending_a_slot_holds_no_permit_and_never_calls_the_inner_service() {
    let clock = clock();
    let store = GatedRelease {
        inner: MemoryStore::with_clock(clock.clone()),
        gate: Arc::new(Semaphore::new(0)),
        releases: Arc::default(),
    };
    let layer = WaitingRoomLayer::builder("shop")
        .capacity(2)
        .secret(SECRET)
        .clock(clock.clone())
        .store(store.clone())
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let app = {
        let calls = calls.clone();
        tower::service_fn(move |req: Request<Full<Bytes>>| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                let mut res = Response::new(Full::new(Bytes::from_static(b"ok")));
                if req.uri().path() == "/checkout" {
                    let (name, value) = end_slot_header();
                    res.headers_mut().insert(name, value);
                }
                Ok::<_, Infallible>(res)
            }
        })
    };
    let svc = ServiceBuilder::new()
        .layer(layer.clone())
        .layer(ConcurrencyLimitLayer::new(1))
        .service(app);

    let policy = layer.config().policy().clone();
    let admitted = |session: SessionId| {
        let (store, policy, layer) = (store.inner.clone(), policy.clone(), layer.clone());
        async move {
            let Ok(Decision::Admitted { expires_at_ms }) = store.enter(&policy, session).await
            else {
                panic!("a slot is free");
            };
            let value = admission_value(&keys(), "shop", session, T0, expires_at_ms);
            cookie(layer.config().cookies().admission_name(), &value)
        }
    };
    let request = |path: &str, c: &HeaderValue| {
        Request::post(path)
            .header(http::header::COOKIE, c.clone())
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    let (a, c) = (SessionId::random(), SessionId::random());
    let (a_cookie, c_cookie) = (admitted(a).await, admitted(c).await);

    let ending = tokio::spawn(svc.clone().oneshot(request("/checkout", &a_cookie)));
    for _ in 0..5_000 {
        if store.releases.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(
        store.releases.load(Ordering::SeqCst),
        1,
        "A's slot is being ended"
    );
    // A's response waits for the store; meanwhile the only permit is free for C.
    let other = tokio::time::timeout(
        Duration::from_secs(5),
        svc.clone().oneshot(request("/", &c_cookie)),
    )
    .await
    .expect("the permit is not held while the slot is being ended")
    .unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    assert!(!ending.is_finished(), "A waits for the store");

    store.gate.add_permits(1);
    let res = ending.await.unwrap().unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().get(END_SLOT_HEADER).is_none());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "one inner call per request"
    );
    assert_eq!(store.releases.load(Ordering::SeqCst), 1);
    let stats = store.inner.stats(&policy).await.unwrap();
    assert_eq!(stats.admitted, 1, "A's slot is free, C's is held");
}

/// The same service, driven by hand: `poll_ready` of the room is always ready and the inner
/// (a concurrency limit of 1 taken by another request) is only readied when a request passes.
#[tokio::test]
async fn the_room_stays_ready_while_a_slot_is_ended() {
    let room = tower_waiting_room::testing::TestRoom::new("shop", 2);
    let inner = tower::service_fn(|_req: Request<()>| async {
        let mut res = Response::new(String::from("done"));
        let (name, value) = end_slot_header();
        res.headers_mut().insert(name, value);
        Ok::<_, Infallible>(res)
    });
    let mut svc = room
        .layer()
        .layer(ConcurrencyLimitLayer::new(1).layer(inner));
    let (_, cookie) = room.admit().await;
    let req = Request::get("/")
        .header(http::header::COOKIE, cookie)
        .body(())
        .unwrap();
    let res = svc.ready().await.unwrap().call(req).await.unwrap();
    assert!(res.headers().get(END_SLOT_HEADER).is_none());
    let stats = room.layer().stats().await.unwrap();
    assert_eq!(stats.admitted, 0);
}
