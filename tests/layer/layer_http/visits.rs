//! A visitor's way through the room: the curl story with capacity two, an expired slot letting the
//! next visitor in, plain-http cookies, the waiting page a browser gets, and the first visit's
//! redirect.

use super::{html, SERIAL};
use crate::common;

use std::time::Duration;

use http::header::{self};
use http::{Method, StatusCode};
use serde_json::json;
use tower_waiting_room::WaitingRoomLayer;

use common::*;

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
