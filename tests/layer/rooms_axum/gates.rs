//! Gates: routes that only a room's admitted visitors pass, whether or not the room is in front of
//! them; the 403 and its reasons, tickets for API clients without cookies, a single room's own
//! gates, gates behind several rooms, and the fail policy while the store is down.

use super::{
    api, assert_status_of, builder, enter, pages, room, serve_rooms, status_of, vip_pages, Headers,
    QUEUE_HEADER, TICKET, TOKEN_HEADER,
};
use crate::common;

use std::time::Duration;

use common::*;
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use serde_json::{json, Value};
use tower_waiting_room::clock::Clock;
use tower_waiting_room::routing::{Rule, WaitingRooms};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::SessionId;

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

/// A gate passes a token past `refresh` over the poll limit unrenewed only while it is under
/// twice `refresh` old: an older one whose slot is gone, replayed as fast as one likes, gets
/// `403 slot_gone` from the heartbeats the limit lets through and `429` for the rest, never
/// the route.
#[tokio::test]
async fn a_gate_lets_a_stale_token_replayed_past_the_limit_nowhere() {
    let shop = shop().await;
    let now = shop.clock.now_ms();
    let stale = admission_value(
        &keys(),
        "drop",
        SessionId::random(),
        now - 31_000,
        now + 269_000,
    );
    let headers = vec![(header::COOKIE, cookie("wr_drop_a", &stale))];
    let mut statuses = std::collections::BTreeMap::new();
    for _ in 0..100 {
        let reply = shop.http.send(Method::POST, "/checkout", &headers).await;
        assert_ne!(
            reply.status,
            StatusCode::OK,
            "through the gate: {}",
            reply.text()
        );
        *statuses.entry(reply.status.as_u16()).or_insert(0) += 1;
    }
    assert_eq!(
        statuses.keys().copied().collect::<Vec<_>>(),
        [403, 429],
        "{statuses:?}"
    );
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

/// A spelling of a gated route that an app (or a server in front of it) may resolve to it is
/// gated: one under a room's endpoints as it comes (`/__waitingroom/main/..%2f..%2fcheckout`)
/// is no endpoint, and a bypass rule never skips a gate.
#[tokio::test]
async fn no_endpoint_prefix_or_bypass_rule_takes_a_spelling_past_a_gate() {
    let shop = shop().await;
    let http = &shop.http;
    let mut main = Jar::new();
    enter(http, &mut main, "/vip/page").await;
    for path in [
        "/__waitingroom/main/..%2f..%2fcheckout",
        "/__waitingroom/drop/..%2f..%2fcheckout",
        "/__waitingroom/main/%2e%2e/%2e%2e/checkout",
    ] {
        for jar in [&mut Jar::new(), &mut main] {
            let reply = http.visit(jar, Method::POST, path).await;
            assert_eq!(
                reply.status,
                StatusCode::FORBIDDEN,
                "{path}: {}",
                reply.text()
            );
            assert_eq!(reply.json()["error"], "not_admitted", "{path}");
        }
    }
    // The endpoints themselves answer as before.
    let reply = http.send(Method::GET, &status_of("drop"), &[]).await;
    assert_status_of(&reply, "drop", "the status endpoint");

    let clock = clock();
    let store = TestStore::new(clock.clone());
    let layer = builder("drop", 5, &clock)
        .store(store.clone())
        .gate(Rule::post("/checkout"))
        .bypass(|req| req.path().starts_with("/static"))
        .build()
        .unwrap();
    let http = serve_with_connect_info(pages().merge(api()).layer(layer)).await;
    for path in [
        "/static/..%2fcheckout",
        "/static/%2e%2e/checkout",
        "/static/../checkout",
    ] {
        let reply = http.send(Method::POST, path, &[]).await;
        assert_refused(&reply, "missing");
    }
    // What the bypass covers and no gate does still skips the room.
    let reply = http.send(Method::GET, "/static/app.js", &[]).await;
    assert_ne!(reply.status, StatusCode::FOUND, "{}", reply.text());
    assert_eq!(store.calls().total(), 0);
}

/// Two rooms gating one route for different methods: a request whose override header names the
/// other room's method (which an app that honours the header acts on) is that room's to admit,
/// not the room of the method it was sent with.
#[tokio::test]
async fn an_overridden_method_goes_to_the_gate_of_that_method() {
    let clock = clock();
    let store = TestStore::new(clock.clone());
    let drop = builder("drop", 5, &clock)
        .store(store.clone())
        .build()
        .unwrap();
    let rooms = WaitingRooms::builder()
        .room(Rule::path("/drop"), drop)
        .room(Rule::path_prefix("/vip"), room("main", 5, &clock))
        .gate(Rule::post("/api/orders/*"), "drop")
        .gate(
            Rule::path("/api/orders/*").with_methods([Method::DELETE]),
            "main",
        )
        .build()
        .unwrap();
    let http = serve_rooms(&rooms, pages().merge(api()).nest("/vip", vip_pages())).await;
    let mut jar = Jar::new();
    enter(&http, &mut jar, "/drop").await;
    let reply = http.visit(&mut jar, Method::POST, "/api/orders/7").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let cookies = jar.header().expect("the drop room's cookies");
    let reply = http
        .send(
            Method::POST,
            "/api/orders/7",
            &[
                (header::COOKIE, cookies),
                (
                    header::HeaderName::from_static("x-http-method-override"),
                    HeaderValue::from_static("DELETE"),
                ),
            ],
        )
        .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    assert_eq!(reply.json()["room"], "main");
}
