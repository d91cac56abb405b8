//! Several rooms in one axum app, and gated routes, over real HTTP on loopback.
//!
//! First the traps of layering each part of an app with its own room (reproduced as they are in
//! axum 0.8, as the record of why), then the one way that works: the `WaitingRooms` layer
//! around the whole composed app (`rooms.layer(app)`), served with connect info. Then what the
//! rooms promise: every room's endpoints answer however the app is composed, an admission to
//! one room does not admit to another, unmatched requests pass untouched, the default room, host
//! rules, gates (to a room not in front of the route, their 403 reasons, tickets for clients
//! without cookies), typed build errors, and the Tower readiness contract.

use crate::common;

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use common::*;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use tower::limit::ConcurrencyLimitLayer;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_waiting_room::clock::Clock;
use tower_waiting_room::routing::{Rule, WaitingRooms, ADMISSION_TICKET_HEADER};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{Admission, ConfigError, SessionId, WaitingRoomBuilder, WaitingRoomLayer};

/// Request headers.
type Headers = Vec<(HeaderName, HeaderValue)>;

const TICKET: HeaderName = HeaderName::from_static(ADMISSION_TICKET_HEADER);
const QUEUE_HEADER: HeaderName = HeaderName::from_static("waiting-room-session");
const TOKEN_HEADER: HeaderName = HeaderName::from_static("waiting-room-token");

/// A room on the test clock, over plain http, with its own embedded store.
fn builder(id: &str, capacity: u32, clock: &ManualClock) -> WaitingRoomBuilder {
    WaitingRoomLayer::builder(id)
        .capacity(capacity)
        .secret(SECRET)
        .secure_cookies(false)
        .clock(clock.clone())
}

fn room(id: &str, capacity: u32, clock: &ManualClock) -> WaitingRoomLayer {
    builder(id, capacity, clock).build().expect("a valid room")
}

/// What the handler saw: the admission's room (or null: none), method and path.
async fn echo(
    admission: Option<axum::Extension<Admission>>,
    method: Method,
    uri: Uri,
) -> Json<Value> {
    Json(json!({
        "admitted_to": admission.map(|a| a.room().to_owned()),
        "method": method.as_str(),
        "path": uri.path(),
    }))
}

/// A shop: pages, a VIP area, an API, in whatever shape the test composes them.
fn pages() -> Router {
    Router::new()
        .route("/", get(echo))
        .route("/drop", get(echo))
        .route("/page", get(echo))
        .route("/vipers", get(echo))
}

fn vip_pages() -> Router {
    Router::new()
        .route("/", get(echo))
        .route("/{*rest}", get(echo))
}

fn api() -> Router {
    Router::new()
        .route("/checkout", post(echo))
        .route("/api/orders/{id}", post(echo).get(echo))
}

/// The one way: the rooms layered onto the whole composed app, as the router's last call,
/// served with connect info.
async fn serve_rooms(rooms: &WaitingRooms, app: Router) -> Http {
    serve_with_connect_info(app.layer(rooms.clone())).await
}

fn status_of(id: &str) -> String {
    format!("{PREFIX}/{id}/status")
}

/// The JSON a status endpoint answered: its room, asserted to be `id`.
fn assert_status_of(reply: &Reply, id: &str, what: &str) {
    assert_eq!(reply.status, StatusCode::OK, "{what}: {}", reply.text());
    let body = reply.json();
    assert_eq!(body["room"], id, "{what}: {body}");
    assert!(
        reply.set_cookies().is_empty(),
        "{what}: {:?}",
        reply.set_cookies()
    );
}

/// Visits `path` until the room lets the visitor through (a first visit is a redirect).
async fn enter(http: &Http, jar: &mut Jar, path: &str) -> Reply {
    let first = http.visit(jar, Method::GET, path).await;
    assert_eq!(first.status, StatusCode::FOUND, "{path}: {}", first.text());
    let second = http.visit(jar, Method::GET, path).await;
    assert_eq!(second.status, StatusCode::OK, "{path}: {}", second.text());
    second
}

// ===== the traps, as they are in axum 0.8 =====

#[tokio::test]
async fn traps_of_a_room_layered_onto_each_part_of_the_app() {
    let clock = clock();
    let part = |id: &str, path: &str| {
        Router::new()
            .route(path, get(echo))
            .layer(room(id, 5, &clock))
    };
    let part_with_fallback = |id: &str, path: &str| {
        Router::new()
            .route(path, get(echo))
            .fallback(|| async { "fallback" })
            .layer(room(id, 5, &clock))
    };

    // Both parts carry a fallback (so that their rooms' endpoints answer): no merge at all.
    let merged = std::panic::catch_unwind(AssertUnwindSafe(|| {
        part_with_fallback("a", "/a").merge(part_with_fallback("b", "/b"))
    }));
    let message = merged.expect_err("axum refuses the merge");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| message.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains("both have a fallback"), "{message}");

    // One fallback, or none: room a's endpoint reaches room b's layer (the merged router's
    // fallback), which takes it for a page of its own and redirects with its own cookie.
    for (what, app) in [
        (
            "one fallback",
            part("a", "/a").merge(part_with_fallback("b", "/b")),
        ),
        ("no fallback", part("a", "/a").merge(part("b", "/b"))),
    ] {
        let http = serve(app).await;
        let reply = http.send(Method::GET, &status_of("a"), &[]).await;
        assert_eq!(reply.status, StatusCode::FOUND, "{what}");
        assert!(reply.set_cookie("wr_b_q").is_some(), "{what}: {reply:?}");
    }

    // Nested parts: the rooms' endpoints are outside every nest, so nothing answers them.
    let nested = Router::new()
        .route("/", get(echo))
        .nest("/a", part("a", "/x"))
        .nest("/b", part_with_fallback("b", "/x"));
    let http = serve(nested).await;
    for id in ["a", "b"] {
        let reply = http.send(Method::GET, &status_of(id), &[]).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{id}");
    }

    // `Router::layer` last does reach unmatched paths in axum 0.8 (it wraps the fallback), but
    // a `fallback` set after it replaces the wrapped one, silently.
    let late_fallback = Router::new()
        .route("/", get(echo))
        .layer(room("a", 5, &clock))
        .fallback(|| async { "fallback" });
    let http = serve(late_fallback).await;
    let reply = http.send(Method::GET, &status_of("a"), &[]).await;
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (StatusCode::OK, "fallback")
    );
}

// ===== the one way: endpoints answer however the app is composed =====

#[tokio::test]
async fn every_room_answers_its_endpoints_however_the_app_is_composed() {
    let clock = clock();
    let rooms = WaitingRooms::builder()
        .room(Rule::path_prefix("/vip"), room("vip", 10, &clock))
        .default_room(room("main", 10, &clock))
        .build()
        .unwrap();
    let fallback = || async { (StatusCode::NOT_FOUND, "the app's fallback") };
    let compositions: Vec<(&str, Router)> = vec![
        (
            "merged",
            pages()
                .merge(api())
                .merge(Router::new().route("/vip", get(echo))),
        ),
        (
            "merged, with a fallback",
            pages()
                .merge(api())
                .merge(Router::new().route("/vip", get(echo)))
                .fallback(fallback),
        ),
        ("nested", pages().nest("/vip", vip_pages()).merge(api())),
        (
            "nested, with a fallback in the nest and outside",
            pages()
                .nest("/vip", vip_pages().fallback(fallback))
                .merge(api())
                .fallback(fallback),
        ),
    ];
    for (what, app) in compositions {
        let http = serve_rooms(&rooms, app).await;
        for id in ["main", "vip"] {
            let reply = http.send(Method::GET, &status_of(id), &[]).await;
            assert_status_of(&reply, id, what);
            assert_eq!(reply.json()["state"], "unknown", "{what}");
        }
        // And the rooms' pages: each in its own room.
        let mut jar = Jar::new();
        let reply = enter(&http, &mut jar, "/vip").await;
        assert_eq!(reply.json()["admitted_to"], "vip", "{what}");
        let reply = enter(&http, &mut jar, "/").await;
        assert_eq!(reply.json()["admitted_to"], "main", "{what}");
    }
}

#[tokio::test]
async fn an_admission_to_one_room_does_not_admit_to_another() {
    let clock = clock();
    let main = room("main", 5, &clock);
    let vip = room("vip", 5, &clock);
    let rooms = WaitingRooms::builder()
        .room(Rule::path_prefix("/vip"), vip)
        .default_room(main)
        .build()
        .unwrap();
    let http = serve_rooms(&rooms, pages().nest("/vip", vip_pages())).await;

    let mut jar = Jar::new();
    let reply = enter(&http, &mut jar, "/").await;
    assert_eq!(reply.json()["admitted_to"], "main");
    let main_token = jar.get("wr_main_a").expect("admitted to main").to_owned();

    // The VIP room knows nothing of it: a first visit there.
    let reply = http.visit(&mut jar, Method::GET, "/vip/lounge").await;
    assert_eq!(reply.status, StatusCode::FOUND);
    assert!(reply.set_cookie("wr_vip_q").is_some());
    // Nor does main's token under the VIP room's name, or in its token header: signed for main.
    let vip_status = status_of("vip");
    for headers in [
        vec![(header::COOKIE, cookie("wr_vip_a", &main_token))],
        vec![(TOKEN_HEADER, HeaderValue::from_str(&main_token).unwrap())],
    ] {
        let reply = http.send(Method::GET, &vip_status, &headers).await;
        assert_eq!(reply.json()["state"], "unknown", "{headers:?}");
        let reply = http.send(Method::GET, "/vip", &headers).await;
        assert_eq!(reply.status, StatusCode::FOUND, "{headers:?}");
    }
    // While main's own status says admitted.
    let reply = http.visit(&mut jar, Method::GET, &status_of("main")).await;
    assert_eq!(reply.json()["state"], "admitted");
    assert_eq!(
        reply.json().get("ticket"),
        None,
        "a browser never gets its token"
    );
}

#[tokio::test]
async fn unmatched_requests_pass_untouched_without_a_default_room() {
    let clock = clock();
    let store = TestStore::new(clock.clone());
    let vip = builder("vip", 5, &clock)
        .store(store.clone())
        .build()
        .unwrap();
    let rooms = WaitingRooms::builder()
        .room(Rule::path_prefix("/vip"), vip)
        .build()
        .unwrap();
    let http = serve_rooms(&rooms, pages().nest("/vip", vip_pages())).await;

    for path in ["/", "/page", "/vipers"] {
        let reply = http.send(Method::GET, path, &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert_eq!(reply.json()["admitted_to"], Value::Null, "{path}");
        assert!(reply.set_cookies().is_empty(), "{path}");
    }
    assert_eq!(
        store.calls().total(),
        0,
        "no store call for requests of no room"
    );
    // Segment-aware: /vip and under it is the room's.
    for path in ["/vip", "/vip/x"] {
        let reply = http.send(Method::GET, path, &[]).await;
        assert_eq!(reply.status, StatusCode::FOUND, "{path}");
    }
}

#[tokio::test]
async fn host_rules_pick_the_room() {
    let clock = clock();
    let rooms = WaitingRooms::builder()
        .room(Rule::host("VIP.example.com"), room("vip", 5, &clock))
        .room(
            Rule::host("shop.example.com").with_path_prefix("/"),
            room("shop", 5, &clock),
        )
        .build()
        .unwrap();
    let http = serve_rooms(&rooms, pages()).await;
    let host = |h: &'static str| vec![(header::HOST, HeaderValue::from_static(h))];
    let reply = http
        .send(Method::GET, "/page", &host("vip.example.com:8080"))
        .await;
    assert_eq!(reply.status, StatusCode::FOUND);
    assert!(reply.set_cookie("wr_vip_q").is_some(), "{reply:?}");
    let reply = http
        .send(Method::GET, "/page", &host("shop.example.com"))
        .await;
    assert!(reply.set_cookie("wr_shop_q").is_some(), "{reply:?}");
    let reply = http
        .send(Method::GET, "/page", &host("other.example.com"))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "no room for another host");
}

// ===== gates =====

/// The shop's pages open to all, `/drop` in the "drop" room, the checkout and the orders API
/// gated by it, and a "main" room that is not in front of anything gated.
struct Shop {
    http: Http,
    clock: ManualClock,
    store: TestStore,
}

async fn shop() -> Shop {
    let clock = clock();
    let store = TestStore::new(clock.clone());
    let drop = builder("drop", 5, &clock)
        .store(store.clone())
        .refresh(Duration::from_secs(15))
        .build()
        .unwrap();
    let rooms = WaitingRooms::builder()
        .room(Rule::path("/drop"), drop)
        .room(Rule::path_prefix("/vip"), room("main", 5, &clock))
        .gate(Rule::post("/checkout"), "drop")
        .gate(Rule::path("/api/orders/*"), "drop")
        .build()
        .unwrap();
    let http = serve_rooms(&rooms, pages().merge(api()).nest("/vip", vip_pages())).await;
    Shop { http, clock, store }
}

/// Asserts a gate's refusal: 403 JSON not_admitted with `reason`, no queue cookie.
fn assert_refused(reply: &Reply, reason: &str) {
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    let body = reply.json();
    assert_eq!(
        body,
        json!({
            "error": "not_admitted",
            "room": "drop",
            "status": "/__waitingroom/drop/status",
            "reason": reason,
        })
    );
    assert_eq!(reply.header(header::CACHE_CONTROL), Some("no-store"));
    assert!(
        reply.set_cookie("wr_drop_q").is_none(),
        "never a place in line"
    );
}

#[tokio::test]
async fn a_gate_admits_the_rooms_visitors_and_refuses_everyone_else() {
    let shop = shop().await;
    let http = &shop.http;

    // The shop's pages are open to all, untouched.
    let reply = http.send(Method::GET, "/page", &[]).await;
    assert_eq!(reply.json()["admitted_to"], Value::Null);

    // The checkout without an admission: refused, never queued, no store call.
    let mut jar = Jar::new();
    let reply = http.visit(&mut jar, Method::POST, "/checkout").await;
    assert_refused(&reply, "missing");
    let reply = http.visit(&mut jar, Method::GET, "/api/orders/7").await;
    assert_refused(&reply, "missing");
    assert_eq!(shop.store.calls().total(), 0);

    // Through the drop room (the store admits), then the gated routes pass, with the admission.
    enter(http, &mut jar, "/drop").await;
    for (method, path) in [(Method::POST, "/checkout"), (Method::POST, "/api/orders/7")] {
        let reply = http.visit(&mut jar, method.clone(), path).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "{method} {path}: {}",
            reply.text()
        );
        assert_eq!(reply.json()["admitted_to"], "drop");
    }
    // A gate matches what it says: POST /checkout only (a GET is no room's business here).
    let reply = http.send(Method::GET, "/checkout", &[]).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);

    // Past refresh: the gate's heartbeat keeps the slot, and a fresh token comes back.
    shop.clock.advance(Duration::from_secs(20));
    let before = shop.store.calls();
    let reply = http.visit(&mut jar, Method::POST, "/checkout").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert!(reply.set_cookie("wr_drop_a").is_some(), "a fresh token");
    let after = shop.store.calls();
    assert_eq!(
        (
            after.heartbeat - before.heartbeat,
            after.enter - before.enter
        ),
        (1, 0)
    );
}

#[tokio::test]
async fn a_gate_says_why_it_refuses_and_writes_nothing() {
    let shop = shop().await;
    let http = &shop.http;
    let keys = keys();
    let now = shop.clock.now_ms();
    let session = SessionId::random();
    let valid = admission_value(&keys, "drop", session, now, now + 300_000);
    let mut tampered = valid.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let expired = admission_value(&keys, "drop", session, now - 400_000, now - 100_000);
    let of_main = admission_value(&keys, "main", session, now, now + 300_000);
    let of_unknown_room = admission_value(&keys, "elsewhere", session, now, now + 300_000);

    let as_cookie = |v: &str| vec![(header::COOKIE, cookie("wr_drop_a", v))];
    let as_ticket = |v: &str| vec![(TICKET, HeaderValue::from_str(v).unwrap())];
    let cases: Vec<(&str, Headers, &str)> = vec![
        ("nothing", vec![], "missing"),
        ("garbage cookie", as_cookie("garbage"), "invalid"),
        ("tampered cookie", as_cookie(&tampered), "invalid"),
        ("tampered ticket", as_ticket(&tampered), "invalid"),
        (
            "another layer's room",
            as_ticket(&of_unknown_room),
            "invalid",
        ),
        ("expired cookie", as_cookie(&expired), "expired"),
        ("expired ticket", as_ticket(&expired), "expired"),
        (
            "main's token as a ticket",
            as_ticket(&of_main),
            "other_room",
        ),
        (
            "main's token under drop's cookie",
            as_cookie(&of_main),
            "other_room",
        ),
        (
            "garbage and expired: the most telling",
            vec![
                (header::COOKIE, cookie("wr_drop_a", &expired)),
                (TICKET, HeaderValue::from_static("garbage")),
            ],
            "expired",
        ),
    ];
    for (what, headers, reason) in &cases {
        let reply = http.send(Method::POST, "/checkout", headers).await;
        assert_eq!(reply.json()["reason"], *reason, "{what}");
        assert_refused(&reply, reason);
    }
    assert_eq!(
        shop.store.calls().total(),
        0,
        "no store call (so no write) for a refused value"
    );

    // A valid token past refresh whose slot the store does not hold: one heartbeat (which
    // writes nothing for an unknown session), then slot_gone, and the dead token removed.
    let stale = admission_value(&keys, "drop", session, now - 20_000, now + 280_000);
    let reply = http
        .send(Method::POST, "/checkout", &as_cookie(&stale))
        .await;
    assert_refused(&reply, "slot_gone");
    let cleared = reply.set_cookie("wr_drop_a").expect("the token is removed");
    assert_eq!(max_age_of(&cleared), Some(0));
    let calls = shop.store.calls();
    assert_eq!(
        (calls.heartbeat, calls.enter),
        (1, 0),
        "never an entry into the line"
    );
    let stats = shop
        .store
        .stats(&tower_waiting_room::RoomPolicy::new("drop", 5))
        .await;
    assert_eq!(
        (stats.admitted + stats.granted, stats.waiting),
        (0, 0),
        "{stats:?}"
    );

    // And the valid one passes.
    let reply = http
        .send(Method::POST, "/checkout", &as_ticket(&valid))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

#[tokio::test]
async fn an_api_client_gets_a_ticket_from_status_and_uses_it_without_cookies() {
    let shop = shop().await;
    let http = &shop.http;
    let json = (header::ACCEPT, HeaderValue::from_static("application/json"));

    // No cookies: the room's values travel in headers.
    let first = http
        .send(Method::GET, "/drop", std::slice::from_ref(&json))
        .await;
    assert_eq!(first.status, StatusCode::FOUND);
    let place = first
        .header(QUEUE_HEADER)
        .expect("the place, as a header")
        .to_owned();
    let passed = http
        .send(
            Method::GET,
            "/drop",
            &[
                json.clone(),
                (QUEUE_HEADER, HeaderValue::from_str(&place).unwrap()),
            ],
        )
        .await;
    assert_eq!(passed.status, StatusCode::OK, "{}", passed.text());
    let token = passed
        .header(TOKEN_HEADER)
        .expect("the token, as a header")
        .to_owned();

    // The status endpoint hands it over as the ticket, in the JSON and the header.
    let status = http
        .send(
            Method::GET,
            &status_of("drop"),
            &[(TOKEN_HEADER, HeaderValue::from_str(&token).unwrap())],
        )
        .await;
    assert_eq!(status.status, StatusCode::OK);
    let body = status.json();
    assert_eq!(body["state"], "admitted");
    let ticket = body["ticket"].as_str().expect("a ticket").to_owned();
    assert_eq!(status.header(TICKET), Some(ticket.as_str()));
    assert_eq!(
        session_in(&ticket),
        session_in(&token),
        "the same admission"
    );

    // The ticket alone opens the gated routes.
    let reply = http
        .send(
            Method::POST,
            "/checkout",
            &[(TICKET, HeaderValue::from_str(&ticket).unwrap())],
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["admitted_to"], "drop");

    // A browser (cookies) asking the status is never handed its token.
    let mut jar = Jar::new();
    enter(http, &mut jar, "/drop").await;
    let status = http.visit(&mut jar, Method::GET, &status_of("drop")).await;
    assert_eq!(status.json()["state"], "admitted");
    assert_eq!(status.json().get("ticket"), None);
    assert_eq!(status.header(TICKET), None);
}

/// A single room gates routes of its own (`WaitingRoomBuilder::gate`): refused without an
/// admission, passed with one; the room's pages are queued as ever and its endpoints are never
/// gated, even by a rule that covers them.
#[tokio::test]
async fn a_single_room_gates_its_own_routes() {
    let clock = clock();
    let store = TestStore::new(clock.clone());
    let layer = builder("drop", 5, &clock)
        .store(store.clone())
        .gate(Rule::post("/checkout"))
        .gate(Rule::path("/__waitingroom/*"))
        .build()
        .unwrap();
    let http = serve_with_connect_info(pages().merge(api()).layer(layer)).await;

    let reply = http.send(Method::POST, "/checkout", &[]).await;
    assert_refused(&reply, "missing");
    assert_eq!(store.calls().total(), 0);
    let reply = http.send(Method::GET, &status_of("drop"), &[]).await;
    assert_status_of(&reply, "drop", "the status endpoint, under a gate's rule");

    let mut jar = Jar::new();
    enter(&http, &mut jar, "/page").await;
    let reply = http.visit(&mut jar, Method::POST, "/checkout").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["admitted_to"], "drop");
}

/// A room's own gates hold behind several rooms too, wherever the rules send the request: the
/// drop room, in front of `/drop` only, gates `POST /checkout` of its own, which no rule of its
/// sends to it. With a default room, and without one (where the request would pass untouched),
/// the checkout stays gated by the drop room, never queued by the default room nor let through.
#[tokio::test]
async fn a_rooms_own_gates_hold_behind_several_rooms() {
    for with_default in [true, false] {
        let clock = clock();
        let drop = builder("drop", 5, &clock)
            .gate(Rule::post("/checkout"))
            .build()
            .unwrap();
        let mut rooms = WaitingRooms::builder().room(Rule::path_prefix("/drop"), drop);
        if with_default {
            rooms = rooms.default_room(room("main", 5, &clock));
        }
        let rooms = rooms.build().unwrap();
        let http = serve_rooms(&rooms, pages().merge(api())).await;
        let what = format!("with a default room: {with_default}");
        let reply = http.send(Method::POST, "/checkout", &[]).await;
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{what}: {}",
            reply.text()
        );
        assert_refused(&reply, "missing");
        let mut jar = Jar::new();
        enter(&http, &mut jar, "/drop").await;
        let reply = http.visit(&mut jar, Method::POST, "/checkout").await;
        assert_eq!(reply.status, StatusCode::OK, "{what}: {}", reply.text());
        assert_eq!(reply.json()["admitted_to"], "drop", "{what}");
    }
}

/// The fail policy holds at a gate: while the store is down (a page's store call just failed)
/// and the room fails open, a visitor who came through the room (its queue cookie) passes the
/// gate as the pages let them in, without a slot; one who never came through the room does
/// not. Failing closed, or with the store only busy (also right after an outage: busy is an
/// answer), or once the store answers again, the gate refuses as ever. The gate itself makes
/// no store call.
#[tokio::test]
async fn a_gate_follows_the_fail_policy_while_the_store_is_down() {
    use tower_waiting_room::store::StoreErrorKind;
    use tower_waiting_room::FailPolicy;

    for policy in [FailPolicy::Open, FailPolicy::Closed] {
        let clock = clock();
        let store = TestStore::new(clock.clone());
        let drop = builder("drop", 1, &clock)
            .store(store.clone())
            .fail_policy(policy)
            .build()
            .unwrap();
        let rooms = WaitingRooms::builder()
            .room(Rule::path("/drop"), drop)
            .gate(Rule::post("/checkout"), "drop")
            .build()
            .unwrap();
        let http = serve_rooms(&rooms, pages().merge(api())).await;
        // Someone holds the one slot; our visitor waits with a queue cookie.
        let mut inside = Jar::new();
        enter(&http, &mut inside, "/drop").await;
        let mut jar = Jar::new();
        assert_eq!(
            http.visit(&mut jar, Method::GET, "/drop").await.status,
            StatusCode::FOUND
        );
        let waiting = http.visit(&mut jar, Method::GET, "/drop").await;
        assert_eq!(
            waiting.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{}",
            waiting.text()
        );
        assert_refused(
            &http.visit(&mut jar, Method::POST, "/checkout").await,
            "missing",
        );

        // Busy last too: a store that is back but out of memory is up (it answered), so the
        // outage before it no longer opens the gate.
        for (kind, down) in [
            (StoreErrorKind::Busy, false),
            (StoreErrorKind::Unavailable, true),
            (StoreErrorKind::Timeout, true),
            (StoreErrorKind::Busy, false),
        ] {
            store.fail_with(Some(kind));
            let page = http.visit(&mut jar, Method::GET, "/drop").await;
            let calls = store.calls().total();
            let reply = http.visit(&mut jar, Method::POST, "/checkout").await;
            let what = format!("{policy:?}, store {kind:?}");
            if down && policy == FailPolicy::Open {
                assert_eq!(page.status, StatusCode::OK, "{what}: the page fails open");
                assert_eq!(reply.status, StatusCode::OK, "{what}: {}", reply.text());
                assert_eq!(reply.json()["admitted_to"], "drop", "{what}");
                let stranger = http.send(Method::POST, "/checkout", &[]).await;
                assert_refused(&stranger, "missing");
            } else {
                assert_refused(&reply, "missing");
            }
            assert_eq!(
                store.calls().total(),
                calls,
                "{what}: the gate asked the store"
            );
        }
        // The store answers again: the next page's answer ends the outage for the gate.
        store.fail_with(None);
        let again = http.visit(&mut jar, Method::GET, "/drop").await;
        assert_eq!(
            again.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{}",
            again.text()
        );
        assert_refused(
            &http.visit(&mut jar, Method::POST, "/checkout").await,
            "missing",
        );
    }
}

// ===== build errors =====

#[test]
fn bad_combinations_are_typed_errors_at_build_time() {
    let clock = clock();
    let r = |id: &str| room(id, 5, &clock);

    let overlapping = WaitingRooms::builder()
        .room(Rule::path_prefix("/vip"), r("vip"))
        .room(Rule::path_prefix("/vip/gold"), r("gold"))
        .build()
        .err();
    assert!(
        matches!(&overlapping, Some(ConfigError::OverlappingRules { first_room, second_room, .. })
            if first_room == "vip" && second_room == "gold"),
        "{overlapping:?}"
    );
    let message = overlapping.unwrap().to_string();
    assert!(
        message.contains("\"vip\"") && message.contains("\"gold\""),
        "{message}"
    );

    let gates_overlap = WaitingRooms::builder()
        .gate_only_room(r("a"))
        .gate_only_room(r("b"))
        .gate(Rule::path("/api/*"), "a")
        .gate(Rule::post("/api/orders"), "b")
        .build()
        .err();
    assert!(matches!(
        gates_overlap,
        Some(ConfigError::OverlappingRules { .. })
    ));

    // Disjoint by host, by methods, by segments; predicates are not checked; one room may have
    // overlapping rules of its own.
    let c = r("c");
    let fine = WaitingRooms::builder()
        .room(Rule::host("a.example").with_path_prefix("/x"), r("a"))
        .room(Rule::host("b.example").with_path_prefix("/x"), r("b"))
        .room(Rule::path_prefix("/vipers"), c.clone())
        .room(Rule::path_prefix("/vip"), r("d"))
        .room(Rule::when(|_| true), r("e"))
        .room(Rule::path("/c/*"), c)
        .gate(Rule::post("/x"), "a")
        .gate(Rule::get("/x"), "b")
        .build();
    assert!(fine.is_ok(), "{fine:?}");

    assert_eq!(
        WaitingRooms::builder()
            .default_room(r("main"))
            .gate(Rule::post("/checkout"), "drop")
            .build()
            .err(),
        Some(ConfigError::UnknownGateRoom {
            room: "drop".into()
        })
    );
    assert_eq!(
        WaitingRooms::builder()
            .room(Rule::path_prefix("/a"), r("same"))
            .room(Rule::path_prefix("/b"), r("same"))
            .build()
            .err(),
        Some(ConfigError::DuplicateRoom {
            room: "same".into()
        })
    );
    let shared = builder("other", 5, &clock)
        .cookie_name("wr_main")
        .build()
        .unwrap();
    assert_eq!(
        WaitingRooms::builder()
            .room(Rule::path_prefix("/a"), r("main"))
            .room(Rule::path_prefix("/b"), shared)
            .build()
            .err(),
        Some(ConfigError::SharedCookieName {
            name: "wr_main_q".into()
        })
    );
    // Endpoints nested under another room's: `/w/x/` (room x at prefix `/w`) would take
    // `/w/x/y/status` (room y at prefix `/w/x`).
    let outer = builder("x", 5, &clock).path_prefix("/w").build().unwrap();
    let inner = builder("y", 5, &clock).path_prefix("/w/x").build().unwrap();
    assert_eq!(
        WaitingRooms::builder()
            .room(Rule::path_prefix("/a"), outer)
            .room(Rule::path_prefix("/b"), inner)
            .build()
            .err(),
        Some(ConfigError::NestedEndpoints {
            outer_room: "x".into(),
            inner_room: "y".into(),
        })
    );
    for bad in [
        Rule::path("checkout"),
        Rule::path_prefix(""),
        Rule::methods([]),
    ] {
        let err = WaitingRooms::builder().room(bad, r("a")).build().err();
        assert!(
            matches!(err, Some(ConfigError::InvalidRule { .. })),
            "{err:?}"
        );
    }
}

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
