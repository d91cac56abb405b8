//! The gateway's batched check-ins: a waiter whose polls are all answered from the gateway's
//! snapshot (no store call of their own) stays present, and keeps their turn, while the silent
//! around them lose theirs; a waiter who lost their place learns it at the gateway. On the
//! embedded store, over loopback HTTP, with a manual clock.

use crate::common;

use std::time::Duration;

use common::{clock, serve, Http, Jar, TestStore, SECRET};
use http::{Method, StatusCode};
use tower_waiting_room::store::snapshot::NEAR_HEAD;
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{AdmittedBy, WaitingRoomBuilder, WaitingRoomLayer};

const WAITERS: usize = 120;

/// A room of capacity 1 on a counting embedded store that keeps snapshots, a manual clock, no
/// limits (every visitor comes from one address and polls often), served on loopback.
async fn site(builder: WaitingRoomBuilder) -> (ManualClock, TestStore, Http) {
    let clock = clock();
    let store = TestStore::new(clock.clone()).with_snapshots();
    let layer = builder
        .capacity(1)
        .secret(SECRET)
        .secure_cookies(false)
        .new_visitor_limit(None)
        .poll_limit(None)
        .clock(clock.clone())
        .store(store.clone())
        .build()
        .unwrap();
    (clock, store, serve(common::app(layer)).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_answered_at_the_gateway_keeps_their_turn_and_the_silent_lose_theirs() {
    let (clock, store, http) =
        site(WaitingRoomLayer::builder("batch").queue_ttl(Duration::from_secs(60))).await;
    let status = "/__waitingroom/batch/status";

    let mut holder = Jar::new();
    http.visit(&mut holder, Method::GET, "/").await;
    assert_eq!(
        http.visit(&mut holder, Method::GET, "/").await.status,
        StatusCode::OK
    );
    let mut line = Vec::new();
    for _ in 0..WAITERS {
        let mut jar = Jar::new();
        http.visit(&mut jar, Method::GET, "/").await;
        let r = http.visit(&mut jar, Method::GET, "/").await;
        assert_eq!(r.json()["state"], "waiting", "joined the line: {r:?}");
        line.push(jar);
    }
    // The one who keeps polling stands well behind the head, so the gateway answers them.
    let keen = WAITERS - 20;
    assert!(keen > NEAR_HEAD as usize);

    // Two and a half queue_ttl pass; only the keen one polls, every 10 s.
    let before = store.calls();
    for _ in 0..15 {
        clock.advance(Duration::from_secs(10));
        let body = http
            .visit(&mut line[keen], Method::GET, status)
            .await
            .json();
        assert_eq!(body["state"], "waiting", "{body}");
        assert_eq!(body["position"], keen as u64 + 1, "{body}");
    }
    let after = store.calls();
    assert_eq!(
        (after.enter, after.poll),
        (before.enter, before.poll),
        "the keen one's polls were all answered at the gateway"
    );
    assert!(
        after.sync > before.sync,
        "the gateway refreshed its snapshot"
    );

    // The slot frees: the silent ahead are skipped at their turn, the keen one is granted.
    let r = http
        .visit(&mut holder, Method::POST, "/__waitingroom/batch/leave")
        .await;
    assert_eq!(r.status, StatusCode::OK);
    // A newcomer arrives first: had the keen one been skipped too, the line would be empty and
    // the newcomer let in at once; as it is, the slot is the keen one's, and the newcomer waits.
    let mut newcomer = Jar::new();
    http.visit(&mut newcomer, Method::GET, "/").await;
    let r = http.visit(&mut newcomer, Method::GET, "/").await;
    assert_eq!(
        r.json()["state"],
        "waiting",
        "the newcomer took the slot: {r:?}"
    );
    let mut let_in = None;
    for _ in 0..5 {
        clock.advance(Duration::from_secs(1));
        let r = http.visit(&mut line[keen], Method::GET, "/").await;
        if r.status == StatusCode::OK {
            let_in = Some(r.handler_saw()["by"].as_str().unwrap().to_owned());
            break;
        }
        assert_eq!(r.json()["state"], "waiting", "{r:?}");
    }
    assert_eq!(
        let_in.as_deref(),
        Some(format!("{:?}", AdmittedBy::Store).as_str()),
        "the keen one got the slot"
    );

    // A silent one from ahead of them comes back: skipped at their turn, their place is gone,
    // and the store, not the snapshot, says so; they join again at the back.
    let back = &mut line[3];
    let body = http.visit(back, Method::GET, status).await.json();
    assert_eq!(body["state"], "unknown", "{body}");
    let r = http.visit(back, Method::GET, "/").await;
    assert_eq!(r.json()["state"], "waiting", "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swept_waiter_learns_at_the_gateway_that_their_place_is_gone() {
    let (clock, store, http) = site(
        WaitingRoomLayer::builder("swept")
            .queue_ttl(Duration::from_secs(60))
            .abandon_after(Duration::from_secs(100)),
    )
    .await;
    let status = "/__waitingroom/swept/status";
    let mut holder = Jar::new();
    http.visit(&mut holder, Method::GET, "/").await;
    http.visit(&mut holder, Method::GET, "/").await;
    let mut line = Vec::new();
    for _ in 0..80 {
        let mut jar = Jar::new();
        http.visit(&mut jar, Method::GET, "/").await;
        let r = http.visit(&mut jar, Method::GET, "/").await;
        assert_eq!(r.json()["state"], "waiting", "joined the line: {r:?}");
        line.push(jar);
    }
    // Everyone polls every 10 s for 200 s (twice abandon_after), but one, who is swept.
    let victim = 70;
    for _ in 0..20 {
        clock.advance(Duration::from_secs(10));
        for (i, jar) in line.iter_mut().enumerate() {
            if i != victim {
                let body = http.visit(jar, Method::GET, status).await.json();
                assert_eq!(body["state"], "waiting", "{body}");
            }
        }
    }
    let stats = store
        .stats(&tower_waiting_room::RoomPolicy::new("swept", 1))
        .await;
    assert_eq!(stats.waiting, 79, "the silent one was swept, nobody else");

    // The victim comes back: the snapshot may still place them once (their place was behind
    // its head), but the refresh that checks them in answers that they have none, and from
    // then on the store answers them.
    let mut told = None;
    for attempt in 0..4 {
        let body = http
            .visit(&mut line[victim], Method::GET, status)
            .await
            .json();
        if body["state"] == "unknown" {
            told = Some(attempt);
            break;
        }
        assert_eq!(body["state"], "waiting", "{body}");
        clock.advance(Duration::from_secs(1));
    }
    assert!(told.is_some_and(|a| a <= 2), "told after {told:?} polls");
}
