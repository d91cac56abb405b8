//! Admission tokens signed by a gateway whose clock runs ahead, over loopback HTTP: two
//! gateways on one embedded store, the second's clock 55 s ahead of the first's. A token it
//! issues is trusted without the store on the first gateway only from its issue time by that
//! gateway's clock, for `refresh`: before, the store is asked. So once the operators drop the
//! session, the token does not pass on the first gateway, where it would have passed with no
//! store call for as long as it was ahead plus `refresh` had a future issue time counted as
//! fresh.

use crate::common;

use std::time::Duration;

use common::{serve, session_in, Http, Jar, TestStore, SECRET};
use http::{Method, StatusCode};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{SessionId, WaitingRoomLayer};

const AHEAD: Duration = Duration::from_secs(55);

fn gateway(store: &TestStore, clock: &ManualClock) -> WaitingRoomLayer {
    WaitingRoomLayer::builder("skew")
        .capacity(10)
        .secret(SECRET)
        .secure_cookies(false)
        .poll_limit(None)
        .clock(clock.clone())
        .store(store.clone())
        .build()
        .unwrap()
}

/// A visitor admitted on `http`: their cookies (queue cookie and admission token).
async fn admitted(http: &Http) -> Jar {
    let mut jar = Jar::new();
    assert_eq!(http.visit_json(&mut jar).await.status, StatusCode::FOUND);
    http.visit_json(&mut jar).await.handler_saw();
    jar
}

#[tokio::test]
async fn a_token_issued_ahead_is_not_trusted_beyond_refresh_after_its_session_is_dropped() {
    let clock = common::clock();
    let ahead = ManualClock::new(common::T0 + AHEAD.as_millis() as u64);
    let store = TestStore::new(clock.clone());
    let here = gateway(&store, &clock);
    let a = serve(common::app(here.clone())).await;
    let b = serve(common::app(gateway(&store, &ahead))).await;
    let token_name = here.config().cookies().admission_name().to_owned();

    // Admitted on the gateway ahead: the token says it was issued 55 s from now here. Shown
    // here, it costs a heartbeat (the slot is held: in, with a token of this clock), and the
    // token this gateway issues passes its fast path again.
    let mut jar = admitted(&b).await;
    let from_ahead = jar.get(&token_name).unwrap().to_owned();
    let calls = store.calls().heartbeat;
    let r = a.visit(&mut jar, Method::GET, "/").await;
    r.handler_saw();
    assert_eq!(store.calls().heartbeat, calls + 1, "the store was asked");
    assert_ne!(
        jar.get(&token_name),
        Some(from_ahead.as_str()),
        "a token of this clock"
    );
    a.visit(&mut jar, Method::GET, "/").await.handler_saw();
    assert_eq!(
        store.calls().heartbeat,
        calls + 1,
        "the fast path, no store call"
    );

    // The operators drop the session; the visitor keeps showing the token from ahead.
    let session = SessionId::from_hex(&session_in(&from_ahead)).unwrap();
    assert!(here.control().drop_session(session).await.unwrap());
    jar.set(&token_name, &from_ahead);
    // At once, and at 16 s (past refresh), 20 s and 45 s (where the token still lies in the
    // future here): the store is asked every time, and refuses.
    let mut at = Duration::ZERO;
    for t in [0, 16, 20, 45] {
        let t = Duration::from_secs(t);
        clock.advance(t - at);
        at = t;
        let calls = store.calls().heartbeat;
        let mut shown = jar.clone();
        let r = a.visit(&mut shown, Method::GET, "/").await;
        assert_eq!(
            (r.status, r.json()["state"].as_str()),
            (StatusCode::FORBIDDEN, Some("banned")),
            "{t:?} after the drop: {}",
            r.text()
        );
        assert_eq!(
            store.calls().heartbeat,
            calls + 1,
            "{t:?}: the store was asked"
        );
    }
}
