//! What visitors see when operators act, over real HTTP on loopback, one gateway:
//! pause, close, release, drop (ban), and the app ending a slot through the control handle.
//! Every change goes through `WaitingRoomLayer::control()`; the admin API's own tests
//! (tests/operations/admin.rs) do the same through HTTP and across gateways.

use crate::common;

use std::time::Duration;

use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::control::{Closing, ControlError};
use tower_waiting_room::store::SettingsChange;
use tower_waiting_room::{SessionId, WaitingRoomLayer};

use common::*;

fn html() -> [(header::HeaderName, HeaderValue); 1] {
    [(
        header::ACCEPT,
        HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
    )]
}

/// The session id in a jar's queue cookie.
fn session_of(site: &Site, jar: &Jar) -> SessionId {
    let value = jar.get(&site.q()).expect("a queue cookie");
    SessionId::from_hex(&session_in(value)).expect("a session id")
}

#[tokio::test]
async fn paused_newcomers_wait_with_free_slots_and_are_told_why() {
    let site = Site::start(WaitingRoomLayer::builder("pause").capacity(3)).await;
    let control = site.layer.control();
    let inside = site.admit().await;
    control.pause().await.unwrap();

    let mut newcomer = site.arrive("/").await;
    let r = site.http.visit(&mut newcomer, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{r:?}");
    let body = r.json();
    assert_eq!(body["state"], "waiting");
    assert_eq!(body["paused"], true, "{body}");
    assert_eq!(
        body["eta_seconds"],
        serde_json::Value::Null,
        "no estimate while paused"
    );
    assert!(r.retry_after() >= 10, "paused waiters ask less often");

    let r = site
        .http
        .visit_with(&mut newcomer, Method::GET, "/", &html())
        .await;
    assert!(
        r.text().contains("Paused: the line moves again soon"),
        "{}",
        r.text()
    );
    let r = site
        .http
        .visit(&mut newcomer, Method::GET, &site.status_path())
        .await;
    assert_eq!(r.json()["paused"], true);

    // Those inside keep going, past refresh (a heartbeat) too.
    let mut inside = inside;
    site.clock.advance(Duration::from_secs(20));
    site.http
        .visit(&mut inside, Method::GET, "/")
        .await
        .handler_saw();

    // Resumed: the waiter is let in on the next request, no clock needed.
    control.resume().await.unwrap();
    let r = site.http.visit(&mut newcomer, Method::GET, "/").await;
    r.handler_saw();
    let body = site
        .http
        .visit(&mut newcomer, Method::GET, &site.status_path())
        .await;
    assert_eq!(body.json()["state"], "admitted");
}

#[tokio::test]
async fn closed_answers_503_closed_to_newcomers_and_waiters_and_keeps_the_line() {
    let site = Site::start(WaitingRoomLayer::builder("close").capacity(1)).await;
    let control = site.layer.control();
    let mut inside = site.admit().await;
    let mut waiter = site.arrive("/").await;
    assert_eq!(
        site.http.visit(&mut waiter, Method::GET, "/").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    let settings = control.close(Closing::KeepInside).await.unwrap();
    assert!(!settings.open);

    let mut newcomer = site.arrive("/").await;
    for (who, jar) in [("newcomer", &mut newcomer), ("waiter", &mut waiter)] {
        let r = site.http.visit(jar, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{who}: {r:?}");
        assert_eq!(r.json()["state"], "closed", "{who}");
        assert!(r.retry_after() > 0, "{who}: Retry-After");
        let r = site.http.visit(jar, Method::GET, &site.status_path()).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{who}: status");
        assert_eq!(r.json()["state"], "closed", "{who}: status");
        let r = site.http.visit_with(jar, Method::GET, "/", &html()).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{who}: page");
        assert!(
            r.text().contains("The sale is closed"),
            "{who}: {}",
            r.text()
        );
    }
    assert_eq!(site.stats().await.waiting, 1, "the newcomer was not added");
    // The one inside keeps the slot.
    site.http
        .visit(&mut inside, Method::GET, "/")
        .await
        .handler_saw();

    // Reopened: the waiter is next, ahead of the newcomer, once the slot is free.
    control.open().await.unwrap();
    site.http
        .visit(&mut inside, Method::POST, &site.leave_path())
        .await;
    site.http
        .visit(&mut waiter, Method::GET, "/")
        .await
        .handler_saw();
    let r = site.http.visit(&mut newcomer, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.json()["position"], 1);
}

#[tokio::test]
async fn closing_with_end_slots_sends_those_inside_back_after_refresh() {
    let site = Site::start(
        WaitingRoomLayer::builder("end")
            .capacity(1)
            .refresh(Duration::from_secs(5)),
    )
    .await;
    let mut inside = site.admit().await;
    site.layer.control().close(Closing::EndSlots).await.unwrap();
    // Within refresh, the token alone is trusted (no store call).
    site.http
        .visit(&mut inside, Method::GET, "/")
        .await
        .handler_saw();
    site.clock.advance(Duration::from_secs(6));
    let r = site.http.visit(&mut inside, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{r:?}");
    assert_eq!(r.json()["state"], "closed");
    assert!(
        inside.get(&site.a()).is_none(),
        "the stale token is removed"
    );
}

#[tokio::test]
async fn release_lets_the_first_of_the_line_in_over_capacity() {
    let site = Site::start(WaitingRoomLayer::builder("release").capacity(1)).await;
    let _inside = site.admit().await;
    let mut line = Vec::new();
    for _ in 0..3 {
        let mut jar = site.arrive("/").await;
        site.http.visit(&mut jar, Method::GET, "/").await;
        line.push(jar);
    }
    let control = site.layer.control();
    assert_eq!(control.release(2).await.unwrap(), 2);
    site.http
        .visit(&mut line[0], Method::GET, "/")
        .await
        .handler_saw();
    site.http
        .visit(&mut line[1], Method::GET, "/")
        .await
        .handler_saw();
    let r = site.http.visit(&mut line[2], Method::GET, "/").await;
    assert_eq!(r.json()["position"], 1, "{r:?}");
    assert_eq!(
        control.release(1_000).await.unwrap(),
        1,
        "the rest of the line"
    );
    let status = control.status().await.unwrap();
    assert_eq!((status.waiting, status.inside + status.granted), (0, 4));
}

#[tokio::test]
async fn a_dropped_session_is_refused_and_the_next_one_goes_in() {
    let site = Site::start(WaitingRoomLayer::builder("ban").capacity(1)).await;
    let control = site.layer.control();
    let mut inside = site.admit().await;
    let mut waiter = site.arrive("/").await;
    site.http.visit(&mut waiter, Method::GET, "/").await;
    assert!(control
        .drop_session(session_of(&site, &inside))
        .await
        .unwrap());
    site.http
        .visit(&mut waiter, Method::GET, "/")
        .await
        .handler_saw();
    // The dropped visitor's token is trusted until refresh; then the store refuses them.
    site.clock.advance(Duration::from_secs(20));
    let r = site.http.visit(&mut inside, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{r:?}");
    assert_eq!(r.json()["state"], "banned");
    let r = site
        .http
        .visit_with(&mut inside, Method::GET, "/", &html())
        .await;
    assert!(r.text().contains("You cannot enter"), "{}", r.text());
    assert!(
        !control.drop_session(SessionId::random()).await.unwrap(),
        "nobody to drop"
    );
}

#[tokio::test]
async fn bad_operator_values_are_refused_before_the_store() {
    let site = Site::start(WaitingRoomLayer::builder("bad").capacity(2)).await;
    let control = site.layer.control();
    let calls = site.store.calls().total();
    match control.set_capacity(0).await {
        Err(ControlError::Invalid(why)) => assert!(why.contains("capacity"), "{why}"),
        other => panic!("capacity 0: {other:?}"),
    }
    assert_eq!(site.store.calls().total(), calls, "no store call");
    assert_eq!(control.settings().await.unwrap().capacity, 2);
    // A change of nothing only reads.
    let s = control.change(SettingsChange::new()).await.unwrap();
    assert_eq!((s.capacity, s.paused, s.open), (2, false, true));
}

#[tokio::test]
async fn the_status_of_a_room_for_operators() {
    let site = Site::start(WaitingRoomLayer::builder("watch").capacity(1)).await;
    let _inside = site.admit().await;
    let mut waiter = site.arrive("/").await;
    site.http.visit(&mut waiter, Method::GET, "/").await;
    site.clock.advance(Duration::from_secs(12));
    let status = site.layer.control().status().await.unwrap();
    assert_eq!(status.room, "watch");
    assert_eq!((status.capacity, status.inside, status.waiting), (1, 1, 1));
    assert_eq!(status.admitted_last_minute, 1, "{status:?}");
    assert_eq!(status.oldest_wait_seconds, Some(12));
    // Only the opening's slot was filled, nobody has left: as the waiter's page, the status
    // does not know the pace yet.
    assert!(status.estimating, "{status:?}");
    assert_eq!(status.eta_seconds, None, "{status:?}");
    assert_eq!(status.admissions_per_minute.len(), 30);
    // Nobody waiting and a slot free: a newcomer's wait is nothing, whatever the history.
    site.http
        .visit(&mut waiter, Method::POST, &site.leave_path())
        .await;
    site.layer.control().set_capacity(2).await.unwrap();
    let status = site.layer.control().status().await.unwrap();
    assert_eq!((status.waiting, status.inside), (0, 1), "{status:?}");
    assert_eq!(status.eta_seconds, Some(0), "{status:?}");
    // The JSON fields are the admin API's: tests/operations/admin.rs checks them over HTTP.
}
