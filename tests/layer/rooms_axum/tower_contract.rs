//! The Tower readiness contract: rooms and gates answer while the app behind them is saturated,
//! and a gate readies the inner service only for a request that passes.

use super::{builder, room};
use crate::common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tower::limit::ConcurrencyLimitLayer;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_waiting_room::clock::Clock;
use tower_waiting_room::routing::{Rule, WaitingRooms};
use tower_waiting_room::{Admission, SessionId};

// ===== the Tower contract =====

/// Behind a concurrency limit whose one permit is held, every room and gate still answers at
/// once, and requests that pass wait their turn (a call without a permit would panic in the
/// limit); a request of no room waits too, and is never called unreadied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rooms_answer_while_the_app_is_saturated() {
    let clock = clock();
    let main = room("main", 1, &clock);
    let rooms = WaitingRooms::builder()
        .room(Rule::path_prefix("/main"), main.clone())
        .room(Rule::path_prefix("/vip"), room("vip", 1, &clock))
        .gate(Rule::post("/checkout"), "main")
        .build()
        .unwrap();
    let release = Arc::new(tokio::sync::Notify::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = {
        let (release, calls) = (release.clone(), calls.clone());
        tower::service_fn(move |_req: Request<Full<Bytes>>| {
            let (release, calls) = (release.clone(), calls.clone());
            async move {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    release.notified().await;
                }
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"inner"))))
            }
        })
    };
    let svc = ServiceBuilder::new()
        .layer(rooms)
        .layer(ConcurrencyLimitLayer::new(1))
        .service(inner);
    let send = |method: Method, path: &'static str, headers: Vec<(HeaderName, HeaderValue)>| {
        let mut svc = svc.clone();
        async move {
            let mut req = Request::builder().method(method).uri(path);
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let req = req.body(Full::new(Bytes::new())).unwrap();
            svc.ready().await.unwrap().call(req).await.unwrap()
        }
    };

    // A request of no room takes the app's one permit and keeps it.
    let holding = tokio::spawn(send(Method::GET, "/elsewhere", vec![]));
    while calls.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let in_time = |f| tokio::time::timeout(Duration::from_secs(5), f);
    for (method, path, status) in [
        (Method::GET, "/main", StatusCode::FOUND),
        (Method::GET, "/vip/x", StatusCode::FOUND),
        (Method::GET, "/__waitingroom/vip/status", StatusCode::OK),
        (Method::POST, "/checkout", StatusCode::FORBIDDEN),
    ] {
        let res = in_time(send(method.clone(), path, vec![]))
            .await
            .unwrap_or_else(|_| panic!("{method} {path} answered at once"));
        assert_eq!(res.status(), status, "{method} {path}");
    }

    // An admitted visitor at the gate waits for the permit, and the app is not called without.
    let session = SessionId::random();
    let now = clock.now_ms();
    let token = admission_value(&keys(), "main", session, now, now + 60_000);
    let mut admitted = tokio::spawn(send(
        Method::POST,
        "/checkout",
        vec![(header::COOKIE, cookie("wr_main_a", &token))],
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !admitted.is_finished(),
        "an admitted request waits its turn"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    release.notify_one();
    assert_eq!(holding.await.unwrap().status(), StatusCode::OK);
    let res = tokio::time::timeout(Duration::from_secs(5), &mut admitted)
        .await
        .expect("admitted in time")
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "inner");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// A gated request past `refresh` asks the store first (its heartbeat), and only once the
/// store lets it pass is the inner service readied and called (the mock panics on a call
/// without readiness); a heartbeat that finds no slot never reaches the inner at all.
#[tokio::test]
async fn a_gates_heartbeat_readies_the_inner_only_when_the_request_passes() {
    use std::future::Future;
    use std::task::Poll;
    use tower_test::mock;
    use tower_waiting_room::store::{Decision, Store};

    let clock = clock();
    let store = TestStore::new(clock.clone());
    let drop = builder("drop", 5, &clock)
        .store(store.clone())
        .build()
        .unwrap();
    let rooms = WaitingRooms::builder()
        .gate_only_room(drop.clone())
        .gate(Rule::post("/checkout"), "drop")
        .build()
        .unwrap();
    let (mut svc, mut handle) = mock::spawn_layer::<Request<()>, Response<Full<Bytes>>, _>(rooms);
    handle.allow(1);
    let checkout = |value: &str| {
        Request::post("/checkout")
            .header(header::COOKIE, cookie("wr_drop_a", value))
            .body(())
            .unwrap()
    };

    // A visitor holding a slot, whose token is now past refresh.
    let holder = SessionId::random();
    let policy = drop.config().policy();
    let granted = store.inner().enter(policy, holder).await.unwrap();
    let Decision::Admitted { expires_at_ms } = granted else {
        panic!("{granted:?}");
    };
    let issued = clock.now_ms();
    let token = admission_value(&keys(), "drop", holder, issued, expires_at_ms);
    let stranger = admission_value(&keys(), "drop", SessionId::random(), issued, expires_at_ms);
    clock.advance(Duration::from_secs(20));

    // No slot: the heartbeat says so, 403, and the inner is neither readied nor called.
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))));
    let res = svc.call(checkout(&stranger)).await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(handle.poll_request().is_pending());

    // The holder: nothing reaches the inner before the store answers; then it is called.
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))));
    let fut = svc.call(checkout(&token));
    assert!(handle.poll_request().is_pending());
    let mut fut = std::pin::pin!(fut);
    let pending = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_pending())).await;
    assert!(pending, "waiting for the inner's response");
    let Poll::Ready(Some((req, send))) = handle.poll_request() else {
        panic!("the inner was not called after the heartbeat");
    };
    assert_eq!(
        req.extensions().get::<Admission>().unwrap().session(),
        holder
    );
    send.send_response(Response::new(Full::new(Bytes::new())));
    let res = fut.await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|v| v.to_str().unwrap().starts_with("wr_drop_a=")));
    assert_eq!(store.calls().heartbeat, 2);
}
