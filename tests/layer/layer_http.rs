//! The layer's HTTP behaviour, over real HTTP on loopback (axum::serve + hyper-util client).
//! Time only moves through a `ManualClock`.

use crate::common;

use std::time::Duration;

use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use serde_json::json;
use tower_waiting_room::store::{Store, StoreErrorKind};
use tower_waiting_room::{FailPolicy, SessionId, WaitingRoomLayer};

use common::*;

/// Held by every test of this file: tracing's interest cache is global, and a callsite first hit
/// on another test thread while the log test sets its subscriber can stay cached as "nobody
/// listens" (seen under load). The tests are short.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn html() -> [(header::HeaderName, HeaderValue); 1] {
    [(
        header::ACCEPT,
        HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
    )]
}

// ===== 1. the curl story =====

#[tokio::test]
async fn curl_story_with_capacity_two() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("drop").capacity(2)).await;
    let (q, a) = (site.q(), site.a());
    assert_eq!((q.as_str(), a.as_str()), ("wr_drop_q", "wr_drop_a"));
    let empty = site.stats().await;
    assert_eq!((empty.admitted, empty.granted, empty.waiting), (0, 0, 0));

    // First request, no cookie: a redirect to the same URL and a signed queue cookie.
    let path = "/shop/item?id=7&color=red";
    let mut v1 = Jar::new();
    let r = site.http.visit(&mut v1, Method::GET, path).await;
    assert_eq!(r.status, StatusCode::FOUND);
    assert_eq!(r.header(header::LOCATION), Some(path));
    assert_eq!(r.header(header::CACHE_CONTROL), Some("no-store"));
    let sc = r.set_cookie(&q).expect("a queue cookie is set");
    let attrs = attrs_of(&sc);
    for attr in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/"] {
        assert!(attrs.iter().any(|x| x == attr), "{attr} missing in {sc}");
    }
    assert_eq!(max_age_of(&sc), Some(24 * 3600));
    assert!(r.set_cookie(&a).is_none(), "no admission on a first visit");
    // Nothing was written: no store call at all, and the counts are unchanged.
    assert_eq!(site.store.calls(), Calls::default());
    assert_eq!(site.stats().await, empty);

    // Following the redirect with the cookie: in, with an admission cookie.
    let r = site.http.visit(&mut v1, Method::GET, path).await;
    let saw = r.handler_saw();
    assert_eq!(saw["by"], "Store");
    assert_eq!(saw["uri"], path);
    assert_eq!(saw["room"], "drop");
    assert_eq!(saw["session"], session_in(v1.get(&q).unwrap()));
    let sc = r.set_cookie(&a).expect("an admission cookie is set");
    let attrs = attrs_of(&sc);
    for attr in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/"] {
        assert!(attrs.iter().any(|x| x == attr), "{attr} missing in {sc}");
    }
    assert_eq!(max_age_of(&sc), Some(300));
    assert_eq!(site.store.calls().enter, 1);

    // The second visitor gets in too; the third waits.
    let mut v2 = site.admit().await;
    let mut v3 = site.arrive("/").await;
    let r = site.http.visit(&mut v3, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.header(header::CONTENT_TYPE), Some("application/json"));
    assert_eq!(r.header(header::CACHE_CONTROL), Some("no-store"));
    let retry = r.retry_after();
    assert!(retry > 0);
    assert_eq!(
        r.json(),
        json!({"room": "drop", "state": "waiting", "position": 1, "ahead": 0, "waiting": 1, "eta_seconds": null, "estimating": true, "eta_low_seconds": null, "eta_high_seconds": null, "retry_after": retry})
    );
    assert!(r.set_cookie(&a).is_none());
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (2, 0, 1));

    // Visitor 1 leaves: the slot goes to visitor 3.
    let r = site
        .http
        .visit(&mut v1, Method::POST, &site.leave_path())
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["state"], "left");
    assert!(v1.is_empty(), "both cookies are cleared: {v1:?}");
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (1, 1, 0));

    let r = site.http.visit(&mut v3, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "Store");
    assert!(r.set_cookie(&a).is_some());
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (2, 0, 0));

    // Visitor 2 is still in, on the fast path; visitor 1 is a newcomer again.
    let calls = site.store.calls();
    let r = site.http.visit(&mut v2, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "Token");
    assert_eq!(site.store.calls(), calls);
    let r = site.http.visit(&mut v1, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::FOUND);
}

#[tokio::test]
async fn an_expired_slot_lets_the_next_visitor_in() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(
        WaitingRoomLayer::builder("drop")
            .capacity(2)
            .active_ttl(Duration::from_secs(60)),
    )
    .await;
    let mut v1 = site.admit().await;
    let mut v2 = site.admit().await;
    let mut v3 = site.arrive("/").await;
    let r = site.http.visit(&mut v3, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);

    // t = 30 s: visitor 2 is active (a heartbeat extends its slot to 90 s), visitor 1 is not.
    site.clock.advance(Duration::from_secs(30));
    let r = site.http.visit(&mut v2, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "Store");
    assert_eq!(site.store.calls().heartbeat, 1);
    let r = site.http.visit(&mut v3, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.json()["position"], 1);

    // t = 59 s: visitor 1's slot still holds.
    site.clock.advance(Duration::from_secs(29));
    let r = site.http.visit(&mut v3, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);

    // t = 61 s: it has expired; visitor 3 is let in.
    site.clock.advance(Duration::from_secs(2));
    let r = site.http.visit(&mut v3, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "Store");
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (2, 0, 0));

    // Visitor 1's token has expired with the slot: back in line, at the back.
    let r = site.http.visit(&mut v1, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.json()["position"], 1);
}

#[tokio::test]
async fn secure_can_be_turned_off_for_plain_http() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(
        WaitingRoomLayer::builder("dev")
            .capacity(1)
            .secure_cookies(false),
    )
    .await;
    let r = site.http.send(Method::GET, "/", &[]).await;
    let sc = r.set_cookie(&site.q()).unwrap();
    assert!(!attrs_of(&sc).iter().any(|a| a == "Secure"), "{sc}");
    assert!(attrs_of(&sc).iter().any(|a| a == "HttpOnly"), "{sc}");
}

// ===== 2. browsers and redirects =====

#[tokio::test]
async fn a_waiting_browser_gets_the_html_page_with_its_position() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("tickets").capacity(1)).await;
    let _v1 = site.admit().await;

    let mut v2 = site.arrive("/").await;
    let r = site
        .http
        .visit_with(&mut v2, Method::GET, "/seats?day=fri", &html())
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        r.header(header::CONTENT_TYPE),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(r.header(header::CACHE_CONTROL), Some("no-store"));
    assert!(r.retry_after() > 0);
    let page = r.text();
    assert!(
        page.contains(
            "<span id=\"twr-position-before\">You are number </span><strong id=\"twr-position-number\">1</strong><span id=\"twr-position-after\"> in line</span>"
        ),
        "{page}"
    );
    assert!(
        page.contains("<dt>Ahead of you</dt><dd id=\"twr-ahead\">0</dd>"),
        "{page}"
    );
    assert!(
        page.contains("<dt>In line</dt><dd id=\"twr-waiting\">1</dd>"),
        "{page}"
    );
    assert!(page.contains(&site.status_path()));
    assert!(page.contains(&site.leave_path()));

    let mut v3 = site.arrive("/").await;
    let r = site
        .http
        .visit_with(&mut v3, Method::GET, "/seats", &html())
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    let page = r.text();
    assert!(
        page.contains(
            "<span id=\"twr-position-before\">You are number </span><strong id=\"twr-position-number\">2</strong><span id=\"twr-position-after\"> in line</span>"
        ),
        "{page}"
    );
    assert!(
        page.contains("<dt>Ahead of you</dt><dd id=\"twr-ahead\">1</dd>"),
        "{page}"
    );
    assert!(
        page.contains("<dt>In line</dt><dd id=\"twr-waiting\">2</dd>"),
        "{page}"
    );

    // The same visitor without `Accept: text/html` gets JSON.
    let r = site.http.visit(&mut v3, Method::GET, "/seats").await;
    assert_eq!(r.header(header::CONTENT_TYPE), Some("application/json"));
    assert_eq!(r.json()["position"], 2);
}

#[tokio::test]
async fn first_visit_redirect_keeps_method_and_query() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("shop").capacity(5)).await;
    let path = "/api/cart?item=42&qty=2&note=a%20b";
    for (method, status) in [
        (Method::GET, StatusCode::FOUND),
        (Method::HEAD, StatusCode::FOUND),
        (Method::POST, StatusCode::TEMPORARY_REDIRECT),
        (Method::PUT, StatusCode::TEMPORARY_REDIRECT),
        (Method::PATCH, StatusCode::TEMPORARY_REDIRECT),
        (Method::DELETE, StatusCode::TEMPORARY_REDIRECT),
    ] {
        let r = site
            .http
            .visit_with(&mut Jar::new(), method.clone(), path, &html())
            .await;
        assert_eq!(r.status, status, "{method}");
        assert_eq!(r.header(header::LOCATION), Some(path), "{method}");
        assert!(r.set_cookie(&site.q()).is_some(), "{method}");
    }
    assert_eq!(site.store.calls(), Calls::default());

    // Repeating the POST with the cookie reaches the handler as a POST, query intact.
    let mut v = Jar::new();
    let r = site.http.visit(&mut v, Method::POST, path).await;
    assert_eq!(r.status, StatusCode::TEMPORARY_REDIRECT);
    let r = site.http.visit(&mut v, Method::POST, path).await;
    let saw = r.handler_saw();
    assert_eq!(saw["method"], "POST");
    assert_eq!(saw["uri"], path);
}

// ===== 3. the status and leave endpoints =====

#[tokio::test]
async fn status_endpoint_reports_unknown_admitted_and_waiting() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("drop").capacity(1)).await;
    let status = site.status_path();

    // No cookie at all.
    let r = site.http.send(Method::GET, &status, &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header(header::CONTENT_TYPE), Some("application/json"));
    assert_eq!(r.header(header::CACHE_CONTROL), Some("no-store"));
    assert_eq!(
        r.json(),
        json!({"room": "drop", "state": "unknown", "position": null, "ahead": null, "waiting": null, "eta_seconds": null, "eta_low_seconds": null, "eta_high_seconds": null, "retry_after": null})
    );
    assert!(r.set_cookies().is_empty(), "status sets no cookie");
    assert_eq!(site.store.calls(), Calls::default());

    // A queue cookie the store has never seen: unknown, and asking creates nothing.
    let mut fresh = site.arrive("/").await;
    let r = site.http.visit(&mut fresh, Method::GET, &status).await;
    assert_eq!(r.json()["state"], "unknown");
    assert_eq!(site.store.calls().poll, 1);
    assert_eq!(site.stats().await.waiting, 0);

    // Admitted.
    let mut v1 = site.admit().await;
    let r = site.http.visit(&mut v1, Method::GET, &status).await;
    assert_eq!(r.json()["state"], "admitted");

    // Waiting, with a position.
    let mut v2 = site.arrive("/").await;
    site.http.visit(&mut v2, Method::GET, "/").await;
    let mut v3 = site.arrive("/").await;
    site.http.visit(&mut v3, Method::GET, "/").await;
    let r = site.http.visit(&mut v2, Method::GET, &status).await;
    let body = r.json();
    assert_eq!(body["state"], "waiting");
    assert_eq!(
        (body["position"].clone(), body["waiting"].clone()),
        (json!(1), json!(2))
    );
    assert!(body["retry_after"].as_u64().unwrap() > 0);
    let r = site.http.visit(&mut v3, Method::GET, &status).await;
    assert_eq!(r.json()["position"], 2);

    // When visitor 1 leaves, the head of the line sees "admitted" before claiming the slot.
    site.http
        .visit(&mut v1, Method::POST, &site.leave_path())
        .await;
    let r = site.http.visit(&mut v2, Method::GET, &status).await;
    assert_eq!(r.json()["state"], "admitted");
    let r = site.http.visit(&mut v2, Method::GET, "/").await;
    r.handler_saw();
}

#[tokio::test]
async fn endpoints_refuse_the_wrong_method() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("drop").capacity(1)).await;
    let _v1 = site.admit().await;
    let mut v2 = site.arrive("/").await;
    site.http.visit(&mut v2, Method::GET, "/").await;

    for method in [Method::POST, Method::PUT, Method::DELETE] {
        let r = site
            .http
            .visit(&mut v2, method.clone(), &site.status_path())
            .await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(r.header(header::ALLOW), Some("GET, HEAD"));
    }
    for method in [Method::GET, Method::HEAD, Method::PUT] {
        let r = site
            .http
            .visit(&mut v2, method.clone(), &site.leave_path())
            .await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(r.header(header::ALLOW), Some("POST"));
        assert!(r.set_cookies().is_empty());
    }
    // A GET to leave did not give up the place.
    assert!(v2.get(&site.q()).is_some());
    let r = site
        .http
        .visit(&mut v2, Method::GET, &site.status_path())
        .await;
    assert_eq!(r.json()["state"], "waiting");
    assert_eq!(site.store.calls().release, 0);
}

#[tokio::test]
async fn leave_clears_both_cookies_and_the_place() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("drop").capacity(1)).await;
    let (q, a) = (site.q(), site.a());
    let mut v1 = site.admit().await;
    let mut v2 = site.arrive("/").await;
    site.http.visit(&mut v2, Method::GET, "/").await;
    let mut v3 = site.arrive("/").await;
    site.http.visit(&mut v3, Method::GET, "/").await;
    assert_eq!(site.stats().await.waiting, 2);

    // Visitor 2 (waiting) leaves.
    let kept = v2.clone();
    let r = site
        .http
        .visit(&mut v2, Method::POST, &site.leave_path())
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json(),
        json!({"room": "drop", "state": "left", "position": null, "ahead": null, "waiting": null, "eta_seconds": null, "eta_low_seconds": null, "eta_high_seconds": null, "retry_after": null})
    );
    for name in [&q, &a] {
        let sc = r.set_cookie(name).expect("the cookie is cleared");
        assert_eq!(cookie_value_of(&sc), "");
        assert_eq!(max_age_of(&sc), Some(0), "{sc}");
        assert!(attrs_of(&sc).iter().any(|x| x == "Path=/"));
    }
    assert_eq!(site.store.calls().release, 1);

    // The place is gone: even with the old cookie the store knows nothing of it.
    let mut old = kept.clone();
    let r = site
        .http
        .visit(&mut old, Method::GET, &site.status_path())
        .await;
    assert_eq!(r.json()["state"], "unknown");
    assert_eq!(site.stats().await.waiting, 1);
    let r = site
        .http
        .visit(&mut v3, Method::GET, &site.status_path())
        .await;
    assert_eq!(r.json()["position"], 1, "visitor 3 moved up");

    // An admitted visitor leaving frees the slot; a browser gets a page.
    let r = site
        .http
        .visit_with(&mut v1, Method::POST, &site.leave_path(), &html())
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.text().contains("You left the line"));
    assert!(r
        .header(header::CONTENT_TYPE)
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(r.set_cookies().len(), 2);
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (0, 1, 0));

    // Leaving without any cookie is harmless and still clears.
    let r = site.http.send(Method::POST, &site.leave_path(), &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["state"], "left");
    assert_eq!(r.set_cookies().len(), 2);
    assert_eq!(site.store.calls().release, 2);
}

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

// ===== 6. the fail policy =====

#[tokio::test]
async fn fail_open_lets_a_queued_visitor_through() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("drop").capacity(1)).await;
    for kind in [StoreErrorKind::Unavailable, StoreErrorKind::Timeout] {
        site.store.fail_with(None);
        let mut v = site.arrive("/").await;
        site.store.fail_with(Some(kind));
        let before = site.store.calls().enter;
        let r = site.http.visit(&mut v, Method::GET, "/").await;
        let saw = r.handler_saw();
        assert_eq!(saw["by"], "FailOpen", "{kind:?}");
        assert_eq!(saw["session"], session_in(v.get(&site.q()).unwrap()));
        assert_eq!(saw["expires_at_ms"], T0 + 15_000);
        assert!(r.set_cookie(&site.a()).is_none(), "no slot, no token");
        assert_eq!(site.store.calls().enter, before + 1);
    }
    // A first visit needs no store: still the redirect.
    let r = site.http.send(Method::GET, "/", &[]).await;
    assert_eq!(r.status, StatusCode::FOUND);
}

#[tokio::test]
async fn fail_closed_answers_503_unavailable() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(
        WaitingRoomLayer::builder("drop")
            .capacity(1)
            .fail_policy(FailPolicy::Closed),
    )
    .await;
    let mut v = site.arrive("/").await;
    site.store.fail_with(Some(StoreErrorKind::Unavailable));
    let r = site.http.visit(&mut v, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    let retry = r.retry_after();
    assert!(retry > 0);
    assert_eq!(r.header(header::CACHE_CONTROL), Some("no-store"));
    assert_eq!(
        r.json(),
        json!({"room": "drop", "state": "unavailable", "position": null, "ahead": null, "waiting": null, "eta_seconds": null, "eta_low_seconds": null, "eta_high_seconds": null, "retry_after": retry})
    );
    // A browser gets a page with the same status.
    let r = site
        .http
        .visit_with(&mut v, Method::GET, "/", &html())
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.text().contains("cannot be reached"));
    // The endpoints say so too.
    let r = site
        .http
        .visit(&mut v, Method::GET, &site.status_path())
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.json()["state"], "unavailable");
    let r = site
        .http
        .visit(&mut v.clone(), Method::POST, &site.leave_path())
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);

    // Healed: the same visitor gets in.
    site.store.fail_with(None);
    let r = site.http.visit(&mut v, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "Store");
}

/// Every kind of store failure but those of a store that answered (`Busy`, `Protocol`) follows
/// the fail policy.
const DOWN: [StoreErrorKind; 3] = [
    StoreErrorKind::Unavailable,
    StoreErrorKind::Timeout,
    StoreErrorKind::Config,
];

/// A store that answered, busy or outside the protocol (a damaged key, a refused argument
/// behind it): never the fail policy's, whichever it is.
const ANSWERED: [StoreErrorKind; 2] = [StoreErrorKind::Busy, StoreErrorKind::Protocol];

/// A room with one visitor inside and `waiter` in line behind them.
async fn a_waiter(policy: FailPolicy) -> (Site, Jar) {
    let site = Site::start(
        WaitingRoomLayer::builder("drop")
            .capacity(1)
            .fail_policy(policy),
    )
    .await;
    site.admit().await;
    let mut waiter = site.arrive("/").await;
    let r = site.http.visit(&mut waiter, Method::GET, "/").await;
    assert_eq!(r.json()["state"], "waiting", "{r:?}");
    (site, waiter)
}

#[tokio::test]
async fn fail_open_tells_a_polling_waiter_to_come_in_and_lets_them_in() {
    let _serial = SERIAL.lock().await;
    for kind in DOWN {
        let (site, mut waiter) = a_waiter(FailPolicy::Open).await;
        site.store.fail_with(Some(kind));
        // A newcomer is let in while the store is down...
        let mut newcomer = site.arrive("/").await;
        let r = site.http.visit(&mut newcomer, Method::GET, "/").await;
        assert_eq!(r.handler_saw()["by"], "FailOpen", "{kind:?}");

        // ...and so the waiting page's poll is told to go in, not that the room is down.
        let r = site
            .http
            .visit(&mut waiter, Method::GET, &site.status_path())
            .await;
        assert_eq!(r.status, StatusCode::OK, "{kind:?}: {r:?}");
        assert_eq!(r.json()["state"], "open", "{kind:?}: {r:?}");
        // The page then reloads the page it was for, which lets them in.
        let r = site.http.visit(&mut waiter, Method::GET, "/").await;
        assert_eq!(r.handler_saw()["by"], "FailOpen", "{kind:?}");
        assert_eq!(
            r.handler_saw()["session"],
            session_in(waiter.get(&site.q()).unwrap())
        );
    }
}

#[tokio::test]
async fn fail_closed_tells_waiters_and_newcomers_alike_that_the_room_is_down() {
    let _serial = SERIAL.lock().await;
    for kind in DOWN {
        let (site, mut waiter) = a_waiter(FailPolicy::Closed).await;
        site.store.fail_with(Some(kind));
        let mut newcomer = site.arrive("/").await;
        let r = site.http.visit(&mut newcomer, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{kind:?}");
        assert_eq!(r.json()["state"], "unavailable", "{kind:?}");
        let r = site
            .http
            .visit(&mut waiter, Method::GET, &site.status_path())
            .await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{kind:?}");
        assert_eq!(r.json()["state"], "unavailable", "{kind:?}");
        let r = site.http.visit(&mut waiter, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{kind:?}");
    }
}

#[tokio::test]
async fn busy_is_busy_for_waiters_polling_under_both_policies() {
    let _serial = SERIAL.lock().await;
    for policy in [FailPolicy::Open, FailPolicy::Closed] {
        for kind in ANSWERED {
            let (site, mut waiter) = a_waiter(policy).await;
            site.store.fail_with(Some(kind));
            let r = site
                .http
                .visit(&mut waiter, Method::GET, &site.status_path())
                .await;
            assert_eq!(
                r.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{policy:?} {kind:?}"
            );
            assert_eq!(r.json()["state"], "busy", "{policy:?} {kind:?}");
            // A newcomer is not let in by it either, under fail-open too.
            let mut newcomer = site.arrive("/").await;
            let r = site.http.visit(&mut newcomer, Method::GET, "/").await;
            assert_eq!(
                r.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{policy:?} {kind:?}: a newcomer: {r:?}"
            );
            assert_eq!(r.json()["state"], "busy", "{policy:?} {kind:?}");
        }
    }
}

/// Counts the WARN (and worse) events emitted on this thread while it is the default subscriber.
#[derive(Clone, Default)]
struct CountWarnings(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl tracing::Subscriber for CountWarnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        if *event.metadata().level() <= tracing::Level::WARN {
            let mut text = Text(String::new());
            event.record(&mut text);
            self.0.lock().unwrap().push(text.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(flavor = "current_thread")]
async fn a_store_outage_is_logged_once_per_interval_not_once_per_request() {
    let _serial = SERIAL.lock().await;
    let warnings = CountWarnings::default();
    // The family's other tests run in this process, on other threads.
    crate::common::tracing_asks_every_subscriber();
    let _guard = tracing::subscriber::set_default(warnings.clone());
    // Other tests of this binary run on other threads without a subscriber: a callsite first
    // hit there while this one was being set can keep "nobody listens" cached. Recompute it now
    // that this thread's subscriber is registered.
    tracing::callsite::rebuild_interest_cache();
    let clock = clock();
    let store = TestStore::new(clock.clone());
    let layer = WaitingRoomLayer::builder("drop")
        .capacity(1)
        .secret(SECRET)
        .clock(clock.clone())
        .store(store.clone())
        .build()
        .unwrap();
    let router = app(layer.clone());
    let q = layer.config().cookies().queue_name().to_owned();
    let visitor = |_| {
        let value = queue_value(&keys(), "drop", SessionId::random(), T0, 3_600_000);
        [(header::COOKIE, cookie(&q, &value))]
    };
    store.fail_with(Some(StoreErrorKind::Unavailable));
    for i in 0..100 {
        let r = call(&router, Method::GET, "/", &visitor(i)).await;
        assert_eq!(r.handler_saw()["by"], "FailOpen");
    }
    let lines = warnings.0.lock().unwrap().clone();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    // Later, one more line, which counts the failures it stands for.
    clock.advance(Duration::from_secs(61));
    for i in 0..10 {
        call(&router, Method::GET, "/", &visitor(i)).await;
    }
    let lines = warnings.0.lock().unwrap().clone();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[1].contains("99"),
        "the 99 failures since the first line: {lines:#?}"
    );
}

#[tokio::test]
async fn busy_is_busy_under_both_policies() {
    let _serial = SERIAL.lock().await;
    for policy in [FailPolicy::Open, FailPolicy::Closed] {
        let site = Site::start(
            WaitingRoomLayer::builder("drop")
                .capacity(1)
                .fail_policy(policy),
        )
        .await;
        let mut v = site.arrive("/").await;
        site.store.fail_with(Some(StoreErrorKind::Busy));
        let r = site.http.visit(&mut v, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{policy:?}");
        let retry = r.retry_after();
        assert_eq!(
            r.json(),
            json!({"room": "drop", "state": "busy", "position": null, "ahead": null, "waiting": null, "eta_seconds": null, "eta_low_seconds": null, "eta_high_seconds": null, "retry_after": retry}),
            "{policy:?}"
        );
        assert!(r.set_cookie(&site.a()).is_none());
    }
}

#[tokio::test]
async fn admitted_visitors_keep_going_while_the_store_is_down() {
    let _serial = SERIAL.lock().await;
    for kind in [StoreErrorKind::Unavailable, StoreErrorKind::Busy] {
        let site = Site::start(
            WaitingRoomLayer::builder("drop")
                .capacity(2)
                .fail_policy(FailPolicy::Closed),
        )
        .await;
        let mut inside = site.admit().await;
        let mut queued = site.arrive("/").await;
        site.store.fail_with(Some(kind));
        let calls = site.store.calls();

        // A fresh token: no store call, in.
        let r = site.http.visit(&mut inside, Method::GET, "/").await;
        assert_eq!(r.handler_saw()["by"], "Token", "{kind:?}");
        assert_eq!(site.store.calls(), calls);

        // Past refresh: the heartbeat fails, the valid token is still honoured.
        site.clock.advance(Duration::from_secs(20));
        let r = site.http.visit(&mut inside, Method::GET, "/").await;
        let saw = r.handler_saw();
        assert_eq!(saw["by"], "Token", "{kind:?}");
        assert_eq!(saw["expires_at_ms"], T0 + 300_000);
        assert_eq!(site.store.calls().heartbeat, calls.heartbeat + 1);
        assert!(r.set_cookie(&site.a()).is_none());

        // Meanwhile a visitor who needs the store is turned away (fail-closed).
        let r = site.http.visit(&mut queued, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{kind:?}");
    }
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
