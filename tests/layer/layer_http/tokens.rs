//! Admission tokens and where they travel: the fast path that skips the store for fresh tokens, a
//! token whose slot is gone, and apps that carry the place and the token in headers instead of
//! cookies.

use super::SERIAL;
use crate::common;

use std::time::Duration;

use http::header::{HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::store::Store;
use tower_waiting_room::{SessionId, WaitingRoomLayer};

use common::*;

// ===== 4. the fast path =====

#[tokio::test]
async fn fresh_tokens_skip_the_store_and_old_ones_heartbeat_once() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("drop").capacity(5)).await;
    let a = site.a();
    let mut v = site.arrive("/").await;
    let session = session_in(v.get(&site.q()).unwrap());
    let r = site.http.visit(&mut v, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "Store");
    assert_eq!(
        site.store.calls(),
        Calls {
            enter: 1,
            ..Calls::default()
        }
    );
    let first_token = v.get(&a).unwrap().to_owned();

    // Young tokens: straight through, no store call, no cookie.
    for i in 0..5u64 {
        site.clock.advance(Duration::from_millis(2_900));
        let r = site.http.visit(&mut v, Method::GET, "/inside").await;
        let saw = r.handler_saw();
        assert_eq!(saw["by"], "Token", "request {i}");
        assert_eq!(saw["room"], "drop");
        assert_eq!(saw["session"], session);
        assert_eq!(saw["expires_at_ms"], T0 + 300_000);
        assert!(r.set_cookies().is_empty());
    }
    assert_eq!(
        site.store.calls().total(),
        1,
        "no store call on the fast path"
    );

    // At 15 s (= refresh) the token is no longer fresh: exactly one heartbeat.
    site.clock.set(T0 + 15_000);
    let r = site.http.visit(&mut v, Method::GET, "/inside").await;
    let saw = r.handler_saw();
    assert_eq!(saw["by"], "Store");
    assert_eq!(saw["session"], session);
    assert_eq!(saw["expires_at_ms"], T0 + 15_000 + 300_000);
    assert_eq!(
        site.store.calls(),
        Calls {
            enter: 1,
            heartbeat: 1,
            ..Calls::default()
        }
    );
    let sc = r.set_cookie(&a).expect("a fresh admission cookie");
    assert_eq!(max_age_of(&sc), Some(300));
    assert_ne!(cookie_value_of(&sc), first_token);
    assert_eq!(session_in(cookie_value_of(&sc)), session);

    // The new token is fresh again.
    let r = site.http.visit(&mut v, Method::GET, "/inside").await;
    assert_eq!(r.handler_saw()["by"], "Token");
    assert_eq!(site.store.calls().total(), 2);
}

// ===== a token whose slot is gone =====

#[tokio::test]
async fn a_token_whose_slot_was_released_is_removed_when_the_visitor_queues_again() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("gone").capacity(1)).await;
    let (q, a) = (site.q(), site.a());
    let mut v1 = Jar::new();
    site.http.visit(&mut v1, Method::GET, "/").await;
    let r = site.http.visit(&mut v1, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(v1.get(&a).is_some());

    // The slot is released behind the visitor's back (another tab left) and someone else takes it.
    let session = session_in(v1.get(&q).unwrap());
    let policy = site.layer.config().policy().clone();
    let sid = SessionId::from_hex(&session).unwrap();
    assert!(site.store.release(&policy, sid).await.unwrap());
    let mut v2 = Jar::new();
    site.http.visit(&mut v2, Method::GET, "/").await;
    assert_eq!(
        site.http.visit(&mut v2, Method::GET, "/").await.status,
        StatusCode::OK
    );

    // Past `refresh`, the token is checked: the slot is gone, the visitor queues, and the stale
    // token is removed so later requests do not heartbeat in vain.
    site.clock.advance(Duration::from_secs(16));
    let r = site.http.visit(&mut v1, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    let cleared = r.set_cookie(&a).expect("the admission cookie is removed");
    assert_eq!(max_age_of(&cleared), Some(0));
    assert_eq!(r.json()["position"], 1);
}

// ===== apps without a cookie jar =====

#[tokio::test]
async fn apps_can_carry_the_place_and_the_token_in_headers() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("app").capacity(1)).await;
    let (sh, th) = ("waiting-room-session", "waiting-room-token");

    // First visit: the queue value comes in a header as well as in the cookie.
    let r = site.http.send(Method::GET, "/api/items", &[]).await;
    assert_eq!(r.status, StatusCode::FOUND);
    let place = r.header(sh).expect("the session header").to_owned();
    assert_eq!(Some(place.clone()), r.cookie_value(&site.q()));

    // With the header (no cookies): admitted, and the token comes in a header.
    let with = |name: &'static str, v: &str| {
        [(
            HeaderName::from_static(name),
            HeaderValue::from_str(v).unwrap(),
        )]
    };
    let r = site
        .http
        .send(Method::GET, "/api/items", &with(sh, &place))
        .await;
    assert_eq!(r.handler_saw()["by"], "Store");
    let token = r.header(th).expect("the token header").to_owned();
    assert_eq!(Some(token.clone()), r.cookie_value(&site.a()));

    // With the token header: the fast path.
    let r = site
        .http
        .send(Method::GET, "/api/items", &with(th, &token))
        .await;
    assert_eq!(r.handler_saw()["by"], "Token");

    // A second app waits, by header, and sees its place through the status endpoint.
    let r = site.http.send(Method::GET, "/", &[]).await;
    let second = r.header(sh).unwrap().to_owned();
    let r = site.http.send(Method::GET, "/", &with(sh, &second)).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.json()["position"], 1);
    assert!(r.header(th).is_none());
    let r = site
        .http
        .send(Method::GET, &site.status_path(), &with(sh, &second))
        .await;
    assert_eq!(r.json()["state"], "waiting");

    // The first app leaves by header; the second is let in.
    let r = site
        .http
        .send(Method::POST, &site.leave_path(), &with(th, &token))
        .await;
    assert_eq!(r.json()["state"], "left");
    let r = site.http.send(Method::GET, "/", &with(sh, &second)).await;
    assert_eq!(r.handler_saw()["by"], "Store");
    assert!(r.header(th).is_some());

    // A forged header is no place at all: a first visit.
    let r = site
        .http
        .send(Method::GET, "/", &with(sh, "q1.k1.forged"))
        .await;
    assert_eq!(r.status, StatusCode::FOUND);

    // A browser, which sends the room's cookies, never gets its HttpOnly token in a header.
    let mut browser = site.arrive("/").await;
    site.http
        .visit(&mut browser, Method::POST, &site.leave_path())
        .await;
    let mut browser = site.arrive("/").await;
    let r = site.http.visit(&mut browser, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    let r = site
        .http
        .send(Method::POST, &site.leave_path(), &with(sh, &second))
        .await;
    assert_eq!(r.json()["state"], "left");
    let r = site.http.visit(&mut browser, Method::GET, "/").await;
    r.handler_saw();
    assert!(r.set_cookie(&site.a()).is_some());
    assert!(
        r.header(th).is_none(),
        "no token header for a cookie client"
    );
}

#[tokio::test]
async fn header_names_are_configurable_and_checked() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(
        WaitingRoomLayer::builder("app")
            .capacity(1)
            .queue_header("x-place")
            .token_header("x-pass"),
    )
    .await;
    let r = site.http.send(Method::GET, "/", &[]).await;
    let place = r
        .header("x-place")
        .expect("the configured header")
        .to_owned();
    assert!(r.header("waiting-room-session").is_none());
    let r = site
        .http
        .send(
            Method::GET,
            "/",
            &[(
                HeaderName::from_static("x-place"),
                HeaderValue::from_str(&place).unwrap(),
            )],
        )
        .await;
    r.handler_saw();
    assert!(r.header("x-pass").is_some());

    for (session, token) in [("bad header", "x-pass"), ("x-same", "x-same")] {
        let err = WaitingRoomLayer::builder("app")
            .capacity(1)
            .secret(SECRET)
            .queue_header(session)
            .token_header(token)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                err,
                tower_waiting_room::ConfigError::InvalidHeaderName { .. }
            ),
            "{err:?}"
        );
    }
}
