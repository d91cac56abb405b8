//! The Tower contract: readiness, backpressure, concurrency, and fitting into axum and a plain
//! hyper server; plus typed configuration errors.

use crate::common;

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::routing::get;
use axum::{Extension, Router};
use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tower::limit::ConcurrencyLimitLayer;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_test::mock;
use tower_waiting_room::testing::TestRoom;
use tower_waiting_room::{
    Admission, AdmittedBy, ConfigError, SameSite, SigningKey, WaitingRoomLayer,
};

use common::*;

fn get_with(cookie: Option<HeaderValue>) -> Request<()> {
    let mut req = Request::get("/").body(()).unwrap();
    if let Some(c) = cookie {
        req.headers_mut().insert(header::COOKIE, c);
    }
    req
}

fn sets_admission(res: &Response<impl Sized>, room: &TestRoom) -> bool {
    let name = room.layer().config().cookies().admission_name().to_owned();
    res.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|v| v.to_str().unwrap().starts_with(&format!("{name}=")))
}

// ===== 7. readiness and backpressure =====

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A fresh admission token: the fast path.
    Token,
    /// An admission token past `refresh` without a slot: heartbeat, then enter.
    Stale,
    /// A queue cookie: the store decides.
    Queue,
    /// No cookie: the stateless redirect.
    Nothing,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_requests_through_a_concurrency_limit() {
    const CAPACITY: usize = 5;
    let room = TestRoom::new("busy", CAPACITY as u32);

    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_in_flight = Arc::new(AtomicUsize::new(0));
    let inner_calls = Arc::new(AtomicUsize::new(0));
    let without_admission = Arc::new(AtomicUsize::new(0));
    let inner = {
        let (in_flight, max_in_flight, inner_calls, without_admission) = (
            in_flight.clone(),
            max_in_flight.clone(),
            inner_calls.clone(),
            without_admission.clone(),
        );
        tower::service_fn(move |req: Request<Full<Bytes>>| {
            let (in_flight, max_in_flight, inner_calls, without_admission) = (
                in_flight.clone(),
                max_in_flight.clone(),
                inner_calls.clone(),
                without_admission.clone(),
            );
            async move {
                if req.extensions().get::<Admission>().is_none() {
                    without_admission.fetch_add(1, Ordering::SeqCst);
                }
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                max_in_flight.fetch_max(now, Ordering::SeqCst);
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
                inner_calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"inner"))))
            }
        })
    };
    let svc = ServiceBuilder::new()
        .layer(room.layer())
        .layer(ConcurrencyLimitLayer::new(1))
        .service(inner);

    // Stale tokens are minted first, then time moves past `refresh`; the four kinds alternate.
    let mut stale: Vec<_> = (0..30).map(|_| room.token_without_slot().1).collect();
    room.clock().advance(Duration::from_secs(20));
    let mut requests = Vec::new();
    for i in 0..120 {
        let kind = [Kind::Token, Kind::Queue, Kind::Nothing, Kind::Stale][i % 4];
        let cookie = match kind {
            Kind::Token => Some(room.token_without_slot().1),
            Kind::Queue => Some(room.queue_cookie().1),
            Kind::Stale => stale.pop(),
            Kind::Nothing => None,
        };
        requests.push((kind, cookie));
    }

    let mut tasks = Vec::new();
    for (kind, cookie) in requests {
        let mut svc = svc.clone();
        let room = room.clone();
        tasks.push(tokio::spawn(async move {
            let mut req = Request::get("/").body(Full::new(Bytes::new())).unwrap();
            if let Some(c) = cookie {
                req.headers_mut().insert(header::COOKIE, c);
            }
            let res = svc.ready().await.unwrap().call(req).await.unwrap();
            let admitted = sets_admission(&res, &room);
            let status = res.status();
            let body = res.into_body().collect().await.unwrap().to_bytes();
            (kind, status, admitted, body)
        }));
    }
    let mut entrants_in = 0;
    let mut entrants_waiting = 0;
    let mut passed = 0;
    for t in tasks {
        let (kind, status, admitted, body) = t.await.unwrap();
        match kind {
            Kind::Token => {
                assert_eq!(status, StatusCode::OK);
                assert!(!admitted);
                assert_eq!(body, "inner");
            }
            Kind::Nothing => assert_eq!(status, StatusCode::FOUND),
            Kind::Queue | Kind::Stale => match status {
                StatusCode::OK => {
                    assert!(admitted, "{kind:?} let in by the store gets a token");
                    assert_eq!(body, "inner");
                    entrants_in += 1;
                }
                StatusCode::TOO_MANY_REQUESTS => entrants_waiting += 1,
                other => panic!("{kind:?}: {other}"),
            },
        }
        if status == StatusCode::OK {
            passed += 1;
        }
    }
    assert_eq!(entrants_in, CAPACITY, "never more than capacity let in");
    assert_eq!(entrants_waiting, 60 - CAPACITY);
    assert_eq!(inner_calls.load(Ordering::SeqCst), passed);
    assert_eq!(passed, 30 + CAPACITY);
    assert_eq!(without_admission.load(Ordering::SeqCst), 0);
    assert_eq!(
        max_in_flight.load(Ordering::SeqCst),
        1,
        "the inner's concurrency limit held"
    );
    let stats = room.layer().stats().await.unwrap();
    assert_eq!(
        (stats.admitted, stats.waiting),
        (CAPACITY as u64, (60 - CAPACITY) as u64)
    );
}

type MockReq = Request<()>;
type MockRes = Response<Full<Bytes>>;

#[tokio::test]
async fn the_room_answers_without_waiting_for_the_inner_service() {
    let room = TestRoom::new("mock", 1);
    let (mut svc, mut handle) = mock::spawn_layer::<MockReq, MockRes, _>(room.layer());

    // The inner is not ready, the room is: its own answers never wait for the inner.
    handle.allow(0);
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))));
    let res = svc.call(get_with(None)).await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::FOUND,
        "first visit answered at once"
    );
    assert!(handle.poll_request().is_pending());

    // An admitted visitor waits for the inner: the call is made only once it is ready (the
    // mock panics if it is called unreadied).
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))));
    let (session, cookie) = room.token_without_slot();
    let mut fut = std::pin::pin!(svc.call(get_with(Some(cookie))));
    let pending = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_pending())).await;
    assert!(pending, "waiting for the inner to be ready");
    assert!(
        handle.poll_request().is_pending(),
        "not called while unready"
    );

    // Meanwhile the room still answers others.
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))));
    let res = svc.call(get_with(None)).await.unwrap();
    assert_eq!(res.status(), StatusCode::FOUND);

    // The inner becomes ready: the admitted visitor's request reaches it, with the admission.
    handle.allow(1);
    let pending = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_pending())).await;
    assert!(pending, "waiting for the inner's response");
    let Poll::Ready(Some((req, send))) = handle.poll_request() else {
        panic!("the inner was not called once ready");
    };
    let admission = req.extensions().get::<Admission>().unwrap();
    assert_eq!(admission.session(), session);
    assert_eq!(admission.admitted_by(), AdmittedBy::Token);
    send.send_response(Response::new(Full::new(Bytes::from_static(b"hi"))));
    let res = fut.await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "hi");

    // An inner readiness error comes out of the response future of a request that passes, and
    // the room's own answers are not affected by it.
    handle.send_error("inner broke");
    let err = svc
        .call(get_with(Some(room.token_without_slot().1)))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "inner broke");
}

/// The room exists for the moment the app is saturated: behind a concurrency limit whose one
/// permit is held, waiters still get their answers at once, and admitted requests wait their
/// turn (a call without a permit would panic in the limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_answered_while_the_app_is_saturated() {
    let room = TestRoom::new("saturated", 1);
    let release = Arc::new(tokio::sync::Notify::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = {
        let (release, calls) = (release.clone(), calls.clone());
        tower::service_fn(move |_req: Request<Full<Bytes>>| {
            let (release, calls) = (release.clone(), calls.clone());
            async move {
                // The first request holds the one permit until released.
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    release.notified().await;
                }
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"inner"))))
            }
        })
    };
    let svc = ServiceBuilder::new()
        .layer(room.layer())
        .layer(ConcurrencyLimitLayer::new(1))
        .service(inner);
    let send = |cookie: Option<HeaderValue>, path: &'static str| {
        let mut svc = svc.clone();
        async move {
            let mut req = Request::get(path).body(Full::new(Bytes::new())).unwrap();
            if let Some(c) = cookie {
                req.headers_mut().insert(header::COOKIE, c);
            }
            svc.ready().await.unwrap().call(req).await.unwrap()
        }
    };

    // The one slot's holder takes the app's one permit and keeps it.
    let (_, holder) = room.admit().await;
    let holding = tokio::spawn(send(Some(holder), "/"));
    while calls.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }

    // The app is saturated. Waiters, newcomers, status polls and leaving are answered at once.
    let in_time = |f| tokio::time::timeout(Duration::from_secs(5), f);
    let (_, waiter) = room.queue_cookie();
    let res = in_time(send(Some(waiter.clone()), "/"))
        .await
        .expect("waiter answered");
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let res = in_time(send(
        Some(waiter.clone()),
        "/__waitingroom/saturated/status",
    ))
    .await
    .expect("status answered");
    assert_eq!(res.status(), StatusCode::OK);
    let body = res.into_body().collect().await.unwrap().to_bytes();
    assert!(
        body.starts_with(b"{") && body.windows(9).any(|w| w == b"\"waiting\""),
        "{body:?}"
    );
    let res = in_time(send(None, "/")).await.expect("newcomer answered");
    assert_eq!(res.status(), StatusCode::FOUND);

    // An admitted visitor waits for the permit...
    let (_, token) = room.token_without_slot();
    let mut admitted = tokio::spawn(send(Some(token), "/"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !admitted.is_finished(),
        "an admitted request waits its turn"
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "and the app is not called without a permit"
    );
    // ...and goes through once the holder is done.
    release.notify_one();
    assert_eq!(holding.await.unwrap().status(), StatusCode::OK);
    let res = tokio::time::timeout(Duration::from_secs(5), &mut admitted)
        .await
        .expect("admitted in time")
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_store_check_readies_the_inner_only_when_the_request_passes() {
    let room = TestRoom::new("mock", 1);
    let (mut svc, mut handle) = mock::spawn_layer::<MockReq, MockRes, _>(room.layer());
    handle.allow(2);

    // A queued visitor: the store check runs in the response future, and only once the store
    // lets the request pass is the inner readied and called (the mock panics if a service is
    // called without having been readied).
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))));
    let (session, cookie) = room.queue_cookie();
    let fut = svc.call(get_with(Some(cookie)));
    assert!(
        handle.poll_request().is_pending(),
        "nothing reaches the inner before the store has answered"
    );
    // One poll: the (embedded) store answers at once, and the inner is called.
    let mut fut = std::pin::pin!(fut);
    let pending = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_pending())).await;
    assert!(pending, "waiting for the inner's response");
    let Poll::Ready(Some((req, send))) = handle.poll_request() else {
        panic!("the inner was not called after the store admitted the visitor");
    };
    let admission = req.extensions().get::<Admission>().unwrap();
    assert_eq!(admission.session(), session);
    assert_eq!(admission.admitted_by(), AdmittedBy::Store);
    send.send_response(Response::new(Full::new(Bytes::new())));
    let res = fut.await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(sets_admission(&res, &room));

    // The room is full: the next queued visitor waits, the inner never sees it.
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))));
    let res = svc
        .call(get_with(Some(room.queue_cookie().1)))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(handle.poll_request().is_pending());
    // ... and the inner's remaining budget (one call) was not spent on it: an admitted visitor
    // still gets through.
    let (_, token) = room.token_without_slot();
    let fut = svc.call(get_with(Some(token)));
    let mut fut = std::pin::pin!(fut);
    let pending = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_pending())).await;
    assert!(pending, "waiting for the inner's response");
    let Poll::Ready(Some((_, send))) = handle.poll_request() else {
        panic!("the inner's budget was spent on a visitor it never saw");
    };
    send.send_response(Response::new(Full::new(Bytes::new())));
    assert_eq!(fut.await.unwrap().status(), StatusCode::OK);
}

// ===== axum and plain hyper =====

#[tokio::test]
async fn works_as_an_axum_router_layer() {
    let room = TestRoom::new("axum", 1);
    let router: Router = Router::new()
        .route(
            "/hello",
            get(|Extension(a): Extension<Admission>| async move {
                format!("hello {} in {}", a.session(), a.room())
            }),
        )
        .layer(room.layer());
    let http = serve(router).await;
    let (session, cookie) = room.token_without_slot();
    let r = http.get_with_cookie("/hello", Some(cookie)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), format!("hello {session} in axum"));
    let r = http.get_with_cookie("/hello", None).await;
    assert_eq!(r.status, StatusCode::FOUND);
    assert_eq!(r.header(header::LOCATION), Some("/hello"));
}

#[tokio::test]
async fn works_behind_a_plain_hyper_server() {
    let room = TestRoom::new("plain", 1);
    let svc = ServiceBuilder::new()
        .layer(room.layer())
        .service(tower::service_fn(|req: Request<Incoming>| async move {
            let who = req
                .extensions()
                .get::<Admission>()
                .map(|a| a.session().to_string())
                .unwrap_or_default();
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(who))))
        }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let svc = svc.clone();
            tokio::spawn(async move {
                // The adapter: hyper's `Service` takes `&self`, the Tower one `&mut self`.
                let adapter = hyper::service::service_fn(move |req: Request<Incoming>| {
                    svc.clone().oneshot(req)
                });
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), adapter)
                    .await
                    .unwrap();
            });
        }
    });

    let http = Http::new(addr);
    let q = room.layer().config().cookies().queue_name().to_owned();
    let mut v = Jar::new();
    let r = http.visit(&mut v, Method::GET, "/plain?x=1").await;
    assert_eq!(r.status, StatusCode::FOUND);
    assert_eq!(r.header(header::LOCATION), Some("/plain?x=1"));
    let r = http.visit(&mut v, Method::GET, "/plain?x=1").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), session_in(v.get(&q).unwrap()));
    let mut other = Jar::new();
    http.visit(&mut other, Method::GET, "/").await;
    let r = http.visit(&mut other, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.json()["state"], "waiting");
}

// ===== 8. typed configuration errors =====

fn base() -> tower_waiting_room::WaitingRoomBuilder {
    WaitingRoomLayer::builder("shop")
        .capacity(10)
        .secret(SECRET)
}

#[test]
fn configuration_errors_are_typed() {
    assert!(base().build().is_ok());

    let cases: Vec<(&str, tower_waiting_room::WaitingRoomBuilder, ConfigError)> = vec![
        (
            "missing capacity",
            WaitingRoomLayer::builder("shop").secret(SECRET),
            ConfigError::MissingCapacity,
        ),
        (
            "zero capacity",
            base().capacity(0),
            ConfigError::MissingCapacity,
        ),
        (
            "short secret",
            base().secret([1u8; 31]),
            ConfigError::SecretTooShort {
                key_id: "k1".into(),
                len: 31,
            },
        ),
        (
            "empty secret",
            base().secret(b""),
            ConfigError::SecretTooShort {
                key_id: "k1".into(),
                len: 0,
            },
        ),
        (
            "missing key",
            WaitingRoomLayer::builder("shop").capacity(10),
            ConfigError::MissingSigningKey,
        ),
        (
            "room id with a space",
            WaitingRoomLayer::builder("my shop")
                .capacity(10)
                .secret(SECRET),
            ConfigError::InvalidRoomId {
                room: "my shop".into(),
            },
        ),
        (
            "empty room id",
            WaitingRoomLayer::builder("").capacity(10).secret(SECRET),
            ConfigError::InvalidRoomId {
                room: String::new(),
            },
        ),
        (
            "room id too long",
            WaitingRoomLayer::builder("r".repeat(65))
                .capacity(10)
                .secret(SECRET),
            ConfigError::InvalidRoomId {
                room: "r".repeat(65),
            },
        ),
        (
            "room id with a slash",
            WaitingRoomLayer::builder("a/b").capacity(10).secret(SECRET),
            ConfigError::InvalidRoomId { room: "a/b".into() },
        ),
        (
            "refresh equal to active_ttl",
            base()
                .active_ttl(Duration::from_secs(60))
                .refresh(Duration::from_secs(60)),
            ConfigError::RefreshNotShorterThanActiveTtl,
        ),
        (
            "refresh longer than active_ttl",
            base()
                .active_ttl(Duration::from_secs(10))
                .refresh(Duration::from_secs(15)),
            ConfigError::RefreshNotShorterThanActiveTtl,
        ),
        (
            "prefix without a slash",
            base().path_prefix("waitingroom"),
            ConfigError::InvalidPathPrefix {
                prefix: "waitingroom".into(),
            },
        ),
        (
            "prefix ending in a slash",
            base().path_prefix("/wr/"),
            ConfigError::InvalidPathPrefix {
                prefix: "/wr/".into(),
            },
        ),
        (
            "prefix of just a slash",
            base().path_prefix("/"),
            ConfigError::InvalidPathPrefix { prefix: "/".into() },
        ),
        (
            "prefix with a query",
            base().path_prefix("/wr?x=1"),
            ConfigError::InvalidPathPrefix {
                prefix: "/wr?x=1".into(),
            },
        ),
        (
            "prefix with a dot segment, which no request reaching the room has",
            base().path_prefix("/a/../b"),
            ConfigError::InvalidPathPrefix {
                prefix: "/a/../b".into(),
            },
        ),
        (
            "prefix with an empty segment",
            base().path_prefix("/a//b"),
            ConfigError::InvalidPathPrefix {
                prefix: "/a//b".into(),
            },
        ),
        (
            "SameSite=None without Secure",
            base().same_site(SameSite::None).secure_cookies(false),
            ConfigError::SameSiteNoneNeedsSecure,
        ),
        (
            "a cookie path the endpoints are not under",
            base().cookie_path("/shop"),
            ConfigError::CookiePathMissesEndpoints {
                cookie_path: "/shop".into(),
                path_prefix: "/__waitingroom".into(),
            },
        ),
        (
            "a cookie path a prefix of the endpoints' by its letters only",
            base().cookie_path("/shop").path_prefix("/shopping/wr"),
            ConfigError::CookiePathMissesEndpoints {
                cookie_path: "/shop".into(),
                path_prefix: "/shopping/wr".into(),
            },
        ),
        (
            "same key id twice",
            base().previous_signing_key(SigningKey::new("k1", [9u8; 32]).unwrap()),
            ConfigError::DuplicateKeyId { id: "k1".into() },
        ),
        (
            "zero duration",
            base().grant_ttl(Duration::ZERO),
            ConfigError::InvalidDuration {
                setting: "grant_ttl",
            },
        ),
    ];
    for (what, builder, expected) in cases {
        let err = builder.build().expect_err(what);
        assert_eq!(err, expected, "{what}");
        assert!(!err.to_string().is_empty());
    }

    // The valid neighbours of those settings build.
    for (cookie_path, prefix) in [("/shop", "/shop/wr"), ("/shop/", "/shop/wr"), ("/", "/wr")] {
        assert!(
            base()
                .cookie_path(cookie_path)
                .path_prefix(prefix)
                .build()
                .is_ok(),
            "{cookie_path} over {prefix}"
        );
    }
    assert!(base()
        .same_site(SameSite::None)
        .secure_cookies(true)
        .build()
        .is_ok());
    assert!(base()
        .active_ttl(Duration::from_secs(16))
        .refresh(Duration::from_secs(15))
        .build()
        .is_ok());
    assert!(base().path_prefix("/queue/v1").build().is_ok());
    assert!(WaitingRoomLayer::builder("r".repeat(61))
        .capacity(1)
        .secret(SECRET)
        .build()
        .is_ok());
}

#[test]
fn a_64_character_room_id_builds() {
    let room = "r".repeat(64);
    let layer = WaitingRoomLayer::builder(room.as_str())
        .capacity(1)
        .secret(SECRET)
        .build()
        .expect("a room id of 64 characters is valid");
    assert_eq!(layer.config().room(), room);
}

/// A store whose `enter` always fails (busy); everything else answers as the memory store does.
#[derive(Clone)]
struct EnterFails(tower_waiting_room::store::MemoryStore);

impl tower_waiting_room::store::Store for EnterFails {
    fn enter(
        &self,
        _: &tower_waiting_room::RoomPolicy,
        _: tower_waiting_room::SessionId,
    ) -> tower_waiting_room::store::StoreFuture<tower_waiting_room::store::Decision> {
        use tower_waiting_room::store::{StoreError, StoreErrorKind};
        Box::pin(std::future::ready(Err(StoreError::new(
            StoreErrorKind::Busy,
        ))))
    }
    fn poll(
        &self,
        p: &tower_waiting_room::RoomPolicy,
        s: tower_waiting_room::SessionId,
    ) -> tower_waiting_room::store::StoreFuture<tower_waiting_room::store::Decision> {
        self.0.poll(p, s)
    }
    fn heartbeat(
        &self,
        p: &tower_waiting_room::RoomPolicy,
        s: tower_waiting_room::SessionId,
    ) -> tower_waiting_room::store::StoreFuture<tower_waiting_room::store::Decision> {
        self.0.heartbeat(p, s)
    }
    fn release(
        &self,
        p: &tower_waiting_room::RoomPolicy,
        s: tower_waiting_room::SessionId,
    ) -> tower_waiting_room::store::StoreFuture<bool> {
        self.0.release(p, s)
    }
    fn stats(
        &self,
        p: &tower_waiting_room::RoomPolicy,
    ) -> tower_waiting_room::store::StoreFuture<tower_waiting_room::store::RoomStats> {
        self.0.stats(p)
    }
    fn configure(
        &self,
        p: &tower_waiting_room::RoomPolicy,
        change: tower_waiting_room::store::SettingsChange,
    ) -> tower_waiting_room::store::StoreFuture<tower_waiting_room::store::SettingsUpdate> {
        self.0.configure(p, change)
    }
    fn admit_next(
        &self,
        p: &tower_waiting_room::RoomPolicy,
        count: u32,
    ) -> tower_waiting_room::store::StoreFuture<u64> {
        self.0.admit_next(p, count)
    }
    fn ban(
        &self,
        p: &tower_waiting_room::RoomPolicy,
        s: tower_waiting_room::SessionId,
        until_ms: u64,
    ) -> tower_waiting_room::store::StoreFuture<bool> {
        self.0.ban(p, s, until_ms)
    }
}

/// A token that outlived its slot, whose way back into the line fails (the store is busy): the
/// answer removes the token too, as it does when the line answers, so the visitor does not pay
/// a heartbeat on every request until the token expires.
#[tokio::test]
async fn a_stale_token_is_removed_whatever_the_line_answers() {
    use tower_waiting_room::__private::AdmissionToken;
    use tower_waiting_room::clock::Clock;
    use tower_waiting_room::testing::ManualClock;
    use tower_waiting_room::{Keyring, SessionId, SigningKey};

    let clock = ManualClock::new(1_767_225_600_000);
    let key = SigningKey::new("k1", [7u8; 32]).unwrap();
    let layer = WaitingRoomLayer::builder("stale")
        .capacity(1)
        .signing_key(key.clone())
        .secure_cookies(false)
        .clock(clock.clone())
        .store(EnterFails(
            tower_waiting_room::store::MemoryStore::with_clock(clock.clone()),
        ))
        .build()
        .unwrap();
    let now = clock.now_ms();
    // Issued 20 s ago (older than `refresh`), unexpired; the store holds no slot for it.
    let token = AdmissionToken::new(SessionId::random(), now - 20_000, now + 280_000)
        .sign(&Keyring::new(key), "stale");
    let cookie = HeaderValue::from_str(&format!("wr_stale_a={token}")).unwrap();
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(tower::service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
        }));
    let res = svc.oneshot(get_with(Some(cookie))).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "busy");
    let cleared = res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|v| v.to_str().unwrap().starts_with("wr_stale_a=;"));
    assert!(cleared, "the stale token is removed: {:?}", res.headers());
}
