//! Every change made through gateway 1's admin, enforced by gateway 2: on one Redis, and on
//! one embedded store shared by two layers.

use super::clients::{arrive, room_path, state, Admin};
use super::{gateway_with_admin, room_builder, A, Q, REFRESH, ROOM};
use crate::common::{app, clock, serve, session_in, Http, Jar, Reply};
#[cfg(feature = "redis")]
use crate::redis_harness;

use std::future::Future;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use serde_json::json;
use tower_waiting_room::store::MemoryStore;
use tower_waiting_room::SessionId;

fn session(jar: &Jar) -> String {
    session_in(jar.get(Q).expect("a queue cookie"))
}

/// Polls `g` as `jar` until it answers `status`, within `within`; answers the reply.
async fn until_status(
    g: &Http,
    jar: &mut Jar,
    status: StatusCode,
    within: Duration,
    what: &str,
) -> Reply {
    let started = Instant::now();
    loop {
        let r = g.visit_json(jar).await;
        if r.status == status {
            return r;
        }
        assert!(
            started.elapsed() < within,
            "{what}: still {} after {within:?}: {}",
            r.status,
            r.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const SOON: Duration = Duration::from_secs(1);

/// The whole operator story: every change through gateway 1's admin, enforced by gateway 2.
/// `after_refresh` lets the admission tokens' `refresh` pass (real or manual time).
async fn scenario<F, Fut>(g1: &Http, g2: &Http, after_refresh: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    let admin = Admin::new(g1);
    let s = admin.status().await;
    for field in [
        "room",
        "open",
        "paused",
        "capacity",
        "rate",
        "inside",
        "granted",
        "waiting",
        "admitted_last_minute",
        "admitted_last_five_minutes",
        "eta_seconds",
        "estimating",
        "oldest_wait_seconds",
        "admissions_per_minute",
    ] {
        assert!(s.get(field).is_some(), "{field} missing in {s}");
    }
    assert_eq!(
        (s["room"].as_str(), s["capacity"].as_u64()),
        (Some(ROOM), Some(1))
    );

    // One inside (capacity 1), one waiting, both on gateway 2.
    let (mut a, r) = arrive(g2).await;
    r.handler_saw();
    let (mut b, r) = arrive(g2).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::TOO_MANY_REQUESTS, "waiting".into())
    );
    let s = admin.status().await;
    assert_eq!(
        (s["inside"].as_u64(), s["waiting"].as_u64()),
        (Some(1), Some(1))
    );

    // Capacity raised on gateway 1: the waiter on gateway 2 gets in within a second.
    let s = admin.patch(json!({"capacity": 2})).await;
    assert_eq!(s["capacity"], 2);
    until_status(
        g2,
        &mut b,
        StatusCode::OK,
        SOON,
        "the waiter after the capacity raise",
    )
    .await;

    // Paused with free slots: a newcomer on gateway 2 is queued all the same.
    admin.patch(json!({"capacity": 4})).await;
    let s = admin.patch(json!({"paused": true})).await;
    assert_eq!(
        (s["paused"].as_bool(), s["inside"].as_u64()),
        (Some(true), Some(2))
    );
    let (mut c, r) = arrive(g2).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::TOO_MANY_REQUESTS, "waiting".into()),
        "paused: {}",
        r.text()
    );
    let r = g2.visit_json(&mut c).await;
    assert_eq!(
        r.status,
        StatusCode::TOO_MANY_REQUESTS,
        "still paused: {}",
        r.text()
    );
    // Resumed: the free slot goes to the head of the line.
    admin.patch(json!({"paused": false})).await;
    until_status(
        g2,
        &mut c,
        StatusCode::OK,
        SOON,
        "the waiter after resuming",
    )
    .await;

    // Full again (3 inside, capacity 3), one more waits; then the sale is closed.
    admin.patch(json!({"capacity": 3})).await;
    let (mut d, r) = arrive(g2).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text());
    let s = admin.patch(json!({"open": false})).await;
    assert_eq!(s["open"], false);
    let r = g2.visit_json(&mut d).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::SERVICE_UNAVAILABLE, "closed".into()),
        "waiter while closed"
    );
    assert!(r.retry_after() > 0);
    let (mut e, r) = arrive(g2).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::SERVICE_UNAVAILABLE, "closed".into()),
        "newcomer while closed"
    );
    assert!(r.retry_after() > 0);

    // Reopened: the waiter is back in line where it stood, the newcomer joins behind.
    admin.patch(json!({"open": true})).await;
    let r = g2.visit_json(&mut d).await;
    assert_eq!(
        (r.status, r.json()["position"].as_u64()),
        (StatusCode::TOO_MANY_REQUESTS, Some(1)),
        "{}",
        r.text()
    );
    let r = g2.visit_json(&mut e).await;
    assert_eq!(
        (r.status, r.json()["position"].as_u64()),
        (StatusCode::TOO_MANY_REQUESTS, Some(2)),
        "{}",
        r.text()
    );

    // A release larger than the line lets the whole line in, whatever the capacity.
    let r = admin
        .json(
            Method::POST,
            &format!("{}/release", room_path()),
            json!({"count": 50}),
        )
        .await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::OK, json!({"released": 2})),
        "{}",
        r.text()
    );
    until_status(g2, &mut d, StatusCode::OK, SOON, "released waiter d").await;
    until_status(g2, &mut e, StatusCode::OK, SOON, "released waiter e").await;
    let s = admin.status().await;
    assert_eq!(
        (s["inside"].as_u64(), s["waiting"].as_u64()),
        (Some(5), Some(0))
    );

    // Drop a waiter: refused at once on gateway 2.
    let (mut f, r) = arrive(g2).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    let r = admin
        .send(
            Method::DELETE,
            &format!("{}/sessions/{}", room_path(), session(&f)),
            None,
            b"",
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["dropped"], true);
    let r = g2.visit_json(&mut f).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::FORBIDDEN, "banned".into()),
        "{}",
        r.text()
    );
    assert_eq!(admin.status().await["waiting"], 0);

    // Drop one inside: refused on gateway 2 at its first store call, i.e. without its admission
    // token at once, and with it once the token's `refresh` has passed.
    let r = admin
        .send(
            Method::DELETE,
            &format!("{}/sessions/{}", room_path(), session(&a)),
            None,
            b"",
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let mut a_without_token = a.clone();
    a_without_token.remove(A);
    let r = g2.visit_json(&mut a_without_token).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::FORBIDDEN, "banned".into()),
        "{}",
        r.text()
    );
    after_refresh().await;
    let r = g2.visit_json(&mut a).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::FORBIDDEN, "banned".into()),
        "{}",
        r.text()
    );

    // A session with neither place nor slot: 404 (and banned all the same).
    let nobody = SessionId::random();
    let r = admin
        .send(
            Method::DELETE,
            &format!("{}/sessions/{nobody}", room_path()),
            None,
            b"",
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_on_one_redis_enforce_every_change_made_through_one_admin() {
    use tower_waiting_room::store::RedisStore;
    let redis = redis_harness::Server::start(&[]);
    let layer = || {
        let store = RedisStore::builder()
            .url(redis.url())
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        room_builder().store(store).build().unwrap()
    };
    let g1 = gateway_with_admin(layer()).await;
    let g2 = serve(app(layer())).await;
    scenario(&g1, &g2, || {
        tokio::time::sleep(REFRESH + Duration::from_millis(300))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_layers_on_one_embedded_store_enforce_every_change_made_through_one_admin() {
    let clock = clock();
    let store = MemoryStore::with_clock(clock.clone());
    let layer = || {
        room_builder()
            .clock(clock.clone())
            .store(store.clone())
            .build()
            .unwrap()
    };
    let g1 = gateway_with_admin(layer()).await;
    let g2 = serve(app(layer())).await;
    scenario(&g1, &g2, || {
        clock.advance(REFRESH + Duration::from_millis(1));
        std::future::ready(())
    })
    .await;
}
