//! The room's own endpoints: what the status endpoint reports, the methods they refuse, and leaving
//! the line.

use super::{html, SERIAL};
use crate::common;

use http::header::{self};
use http::{Method, StatusCode};
use serde_json::json;
use tower_waiting_room::WaitingRoomLayer;

use common::*;

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
