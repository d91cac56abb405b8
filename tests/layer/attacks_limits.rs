//! Floods and storms over real HTTP (and, for the 100 000-address flood, in process): the
//! per-IP limit on new queue entries, the per-session limit on store questions, bypass rules and
//! a full queue. Each attack checks the answer, that the store was not asked beyond the limit,
//! and that nothing inside changed (counts, other visitors' places). Time is a `ManualClock`:
//! no sleeps.

use crate::common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::{any, get};
use axum::{Extension, Json, Router};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;
use tower_waiting_room::store::Store;
use tower_waiting_room::{Admission, PeerAddr, RateLimit, WaitingRoomLayer};

use common::*;

const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");

fn from(ip: &str) -> Vec<(HeaderName, HeaderValue)> {
    vec![(XFF, HeaderValue::from_str(ip).unwrap())]
}

/// The answer of a limit: `429`, `Retry-After`, `{"state":"limited"}`, no cookie.
fn assert_limited(r: &Reply, what: &str) {
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{what}: {r:?}");
    assert!(r.retry_after() >= 1, "{what}");
    assert!(r.set_cookies().is_empty(), "{what}: {r:?}");
    let v = r.json();
    assert_eq!(v["state"], "limited", "{what}");
    assert_eq!(v["retry_after"], r.retry_after(), "{what}");
}

/// `(position, waiting)` of a visitor, from the status endpoint.
async fn place(site: &Site, jar: &mut Jar) -> (u64, u64) {
    let r = site.http.visit(jar, Method::GET, &site.status_path()).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let v = r.json();
    assert_eq!(v["state"], "waiting", "{v}");
    (
        v["position"].as_u64().unwrap(),
        v["waiting"].as_u64().unwrap(),
    )
}

/// A room with one admitted visitor and two in line; returns the two waiters.
async fn busy_room(site: &Site) -> (Jar, Jar) {
    site.admit().await;
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let mut jar = site.arrive("/").await;
        let r = site.http.visit(&mut jar, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.json()["state"], "waiting");
        waiters.push(jar);
    }
    let second = waiters.pop().unwrap();
    (waiters.pop().unwrap(), second)
}

#[tokio::test]
async fn a_flood_of_first_visits_from_one_ip_is_limited_and_others_are_not() {
    let site = Site::start(
        WaitingRoomLayer::builder("flood")
            .capacity(1)
            .client_ip_header("x-forwarded-for"),
    )
    .await;
    let (mut w1, mut w2) = busy_room(&site).await;
    let stats = site.stats().await;
    let calls = site.store.calls();

    // The default: 60 new queue entries a minute for one address, then 429 without a cookie.
    let bot = "203.0.113.7";
    for i in 0..60 {
        let r = site.http.send(Method::GET, "/", &from(bot)).await;
        assert_eq!(r.status, StatusCode::FOUND, "visit {i}");
        assert!(r.cookie_value(&site.q()).is_some());
    }
    for i in 0..200 {
        let r = site.http.send(Method::GET, "/", &from(bot)).await;
        assert_limited(&r, &format!("flood {i}"));
        assert!(r.retry_after() <= 60);
    }
    // Addresses the bot writes in front of its own are not its address: the right-most is.
    let r = site
        .http
        .send(Method::GET, "/", &from(&format!("198.51.100.1, {bot}")))
        .await;
    assert_limited(&r, "spoofed left-most entry");
    // POSTs too (they would get a 307 and a cookie).
    let r = site.http.send(Method::POST, "/buy", &from(bot)).await;
    assert_limited(&r, "POST");

    // Someone else, and another address sharing nothing with the bot, still get in line.
    let r = site
        .http
        .send(Method::GET, "/", &from("198.51.100.1"))
        .await;
    assert_eq!(r.status, StatusCode::FOUND);
    let r = site.http.send(Method::GET, "/", &from("2001:db8::1")).await;
    assert_eq!(r.status, StatusCode::FOUND);

    // Nothing inside changed: no store call, same counts, same places.
    assert_eq!(site.store.calls(), calls, "the flood reached the store");
    same_inside(stats, site.stats().await, "flood");
    assert_eq!(place(&site, &mut w1).await, (1, 2));
    assert_eq!(place(&site, &mut w2).await, (2, 2));

    // A minute and more later the address has a budget again.
    site.clock.advance(Duration::from_secs(121));
    let r = site.http.send(Method::GET, "/", &from(bot)).await;
    assert_eq!(r.status, StatusCode::FOUND);
}

#[tokio::test]
async fn a_flood_from_one_ipv6_64_with_a_new_address_per_request_is_limited_like_one_client() {
    let site = Site::start(
        WaitingRoomLayer::builder("v6flood")
            .capacity(1)
            .client_ip_header("x-forwarded-for")
            .new_visitor_limit(RateLimit::per_minute(5)),
    )
    .await;
    let stats = site.stats().await;
    let calls = site.store.calls();

    // Five distinct addresses of one /64, no cookies: five queue cookies.
    let mut n = 0u32;
    let mut next = || {
        n += 1;
        format!("2001:db8:1:2::{n:x}")
    };
    for i in 0..5 {
        let r = site.http.send(Method::GET, "/", &from(&next())).await;
        assert_eq!(r.status, StatusCode::FOUND, "visit {i}: {r:?}");
        assert!(r.cookie_value(&site.q()).is_some(), "visit {i}");
    }
    // Then every new address of that /64 is the same client, over its budget: 429, no cookie.
    for i in 0..50 {
        let r = site.http.send(Method::GET, "/", &from(&next())).await;
        assert_limited(&r, &format!("new address {i} of the /64"));
        assert!(r.retry_after() <= 60);
    }
    // Far ends of the /64, and the bracketed form with a port, too.
    for ip in [
        "2001:db8:1:2::",
        "2001:db8:1:2:ffff:ffff:ffff:ffff",
        "[2001:db8:1:2:8000::1]:443",
    ] {
        let r = site.http.send(Method::GET, "/", &from(ip)).await;
        assert_limited(&r, ip);
    }

    // A client on the neighbouring /64 is someone else, and still gets in line.
    let r = site
        .http
        .send(Method::GET, "/", &from("2001:db8:1:3::1"))
        .await;
    assert_eq!(r.status, StatusCode::FOUND, "{r:?}");
    assert!(r.cookie_value(&site.q()).is_some());
    // Two clients, two keys, however many addresses the first one used.
    assert_eq!(
        tower_waiting_room::__private::limiter_sizes(&site.layer).0,
        2
    );
    assert_eq!(site.store.calls(), calls, "the flood reached the store");
    same_inside(stats, site.stats().await, "IPv6 flood");

    // A minute and more later the /64 has a budget again.
    site.clock.advance(Duration::from_secs(121));
    let r = site.http.send(Method::GET, "/", &from(&next())).await;
    assert_eq!(r.status, StatusCode::FOUND);
}

#[tokio::test]
async fn the_peer_address_from_axum_connect_info_is_limited() {
    // The documented one-liner for axum's ConnectInfo, on a real loopback connection.
    let clock = clock();
    let store = TestStore::new(clock.clone());
    let layer = WaitingRoomLayer::builder("peer")
        .capacity(1)
        .secret(SECRET)
        .clock(clock.clone())
        .store(store.clone())
        .new_visitor_limit(RateLimit::per_minute(5))
        .client_ip_with(|req| {
            req.extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip())
        })
        .build()
        .unwrap();
    let http = serve_with_connect_info(app(layer.clone())).await;
    for _ in 0..5 {
        assert_eq!(
            http.send(Method::GET, "/", &[]).await.status,
            StatusCode::FOUND
        );
    }
    assert_limited(
        &http.send(Method::GET, "/", &[]).await,
        "sixth from 127.0.0.1",
    );
    // A header means nothing when no header is trusted.
    assert_limited(
        &http.send(Method::GET, "/", &from("198.51.100.1")).await,
        "untrusted X-Forwarded-For",
    );
    assert_eq!(store.calls().total(), 0);
    assert_eq!(tower_waiting_room::__private::limiter_sizes(&layer).0, 1);
}

/// The app in process, with each request's `PeerAddr` set as a plain hyper server would.
async fn first_visit_from(app: &Router, ip: IpAddr) -> StatusCode {
    let mut req = Request::get("/").body(Body::empty()).unwrap();
    req.extensions_mut()
        .insert(PeerAddr(SocketAddr::new(ip, 40_000)));
    app.clone().oneshot(req).await.unwrap().status()
}

#[tokio::test]
async fn a_hundred_thousand_addresses_do_not_grow_memory_without_bound() {
    let clock = clock();
    let store = TestStore::new(clock.clone());
    let layer = WaitingRoomLayer::builder("many")
        .capacity(1)
        .secret(SECRET)
        .clock(clock.clone())
        .store(store.clone())
        .new_visitor_limit(RateLimit::per_minute(2))
        .build()
        .unwrap();
    let app = app(layer.clone());
    let first = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    // The PeerAddr in the extensions is the client: limited after two.
    assert_eq!(first_visit_from(&app, first).await, StatusCode::FOUND);
    assert_eq!(first_visit_from(&app, first).await, StatusCode::FOUND);
    assert_eq!(
        first_visit_from(&app, first).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    for i in 0..100_000u32 {
        let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
        assert_eq!(first_visit_from(&app, ip).await, StatusCode::FOUND, "{ip}");
        if i % 10_000 == 0 {
            clock.advance(Duration::from_millis(10));
        }
    }
    let (ips, sessions) = tower_waiting_room::__private::limiter_sizes(&layer);
    assert!(
        ips <= 2 * tower_waiting_room::defences::MAX_TRACKED,
        "{ips} addresses tracked"
    );
    assert!(
        ips >= tower_waiting_room::defences::MAX_TRACKED / 2,
        "{ips}"
    );
    assert_eq!(sessions, 0);
    assert_eq!(
        store.calls().total(),
        0,
        "first visits never reach the store"
    );
    let stats = store.stats(layer.config().policy()).await;
    assert_eq!((stats.admitted, stats.waiting), (0, 0));
}

#[tokio::test]
async fn a_poll_storm_from_one_session_is_limited_without_store_calls() {
    let site = Site::start(WaitingRoomLayer::builder("storm").capacity(1)).await;
    let (mut w1, mut w2) = busy_room(&site).await;
    let stats = site.stats().await;
    let calls = site.store.calls();

    // The default: 30 store questions per 10 s for one session; w1 has used one (its entry).
    let mut answered = 0;
    let mut limited = 0;
    for i in 0..300 {
        let path = if i % 2 == 0 {
            site.status_path()
        } else {
            "/".to_owned()
        };
        let r = site.http.visit(&mut w1, Method::GET, &path).await;
        if r.status == StatusCode::TOO_MANY_REQUESTS && r.json()["state"] == "limited" {
            assert_limited(&r, &format!("poll {i}"));
            assert!(r.retry_after() <= 10);
            limited += 1;
        } else {
            assert_eq!(answered, i, "a limited session got an answer again at {i}");
            answered += 1;
        }
    }
    assert_eq!(answered, 29, "30 questions per 10 s, one of them the entry");
    assert_eq!(limited, 300 - 29);

    // A browser over the limit gets a page that says so and tries again by itself.
    let accept = [(header::ACCEPT, HeaderValue::from_static("text/html"))];
    let page = site
        .http
        .visit_with(&mut w1, Method::GET, "/", &accept)
        .await;
    assert_eq!(page.status, StatusCode::TOO_MANY_REQUESTS, "{page:?}");
    assert!(page.retry_after() >= 1 && page.retry_after() <= 10);
    assert_eq!(
        page.header(header::CONTENT_TYPE),
        Some("text/html; charset=utf-8")
    );
    assert!(page.set_cookies().is_empty());
    let html = page.text();
    assert!(
        html.contains("<h1 id=\"twr-heading\">Too many requests</h1>"),
        "{html}"
    );
    assert!(
        html.contains(&format!(
            "<meta http-equiv=\"refresh\" content=\"{}\">",
            page.retry_after()
        )),
        "{html}"
    );
    let now = site.store.calls();
    assert_eq!(
        (now.enter + now.poll) - (calls.enter + calls.poll),
        29,
        "the store was asked beyond the limit: {now:?}"
    );
    assert_eq!(
        (now.heartbeat, now.release),
        (calls.heartbeat, calls.release)
    );

    // The other waiter is not affected, and nothing inside changed.
    assert_eq!(place(&site, &mut w2).await, (2, 2));
    same_inside(stats, site.stats().await, "poll storm");

    // The limit is per window: later, the stormer is answered again, still first in line.
    site.clock.advance(Duration::from_secs(20));
    assert_eq!(place(&site, &mut w1).await, (1, 2));
}

/// The default poll limit: store questions per session per 10 s.
const POLLS: usize = 30;

/// A room of one whose first visitor's slot is released and taken by a second: the room, and
/// the first visitor's cookies (their token now stale, whose holder can only wait in line).
async fn slot_gone_and_taken() -> (Site, Jar) {
    let site = Site::start(WaitingRoomLayer::builder("stale").capacity(1)).await;
    let v = site.admit().await;
    let session =
        tower_waiting_room::SessionId::from_hex(&session_in(v.get(&site.a()).unwrap())).unwrap();
    site.store
        .inner()
        .release(site.layer.config().policy(), session)
        .await
        .unwrap();
    site.admit().await;
    (site, v)
}

#[tokio::test]
async fn a_replayed_stale_token_whose_slot_is_gone_costs_at_most_the_poll_limit() {
    let (site, v) = slot_gone_and_taken().await;
    // Past `refresh` (15 s), well within `active_ttl`: the token is valid but needs the store.
    site.clock.advance(Duration::from_secs(20));
    let calls = site.store.calls();

    // A client that replays the same cookies and never takes the answers' `Set-Cookie`.
    let replay = [(header::COOKIE, v.header().unwrap())];
    let mut statuses = std::collections::BTreeMap::new();
    for _ in 0..100 {
        let r = site.http.send(Method::GET, "/", &replay).await;
        assert!(!r.status.is_server_error(), "{r:?}");
        *statuses.entry(r.status.as_u16()).or_insert(0) += 1;
    }
    let spent = site.store.calls().total() - calls.total();
    assert!(
        spent <= POLLS,
        "100 requests with a stale token made {spent} store calls ({:?} -> {:?}); answers {statuses:?}",
        calls,
        site.store.calls()
    );
}

#[tokio::test]
async fn a_replayed_stale_token_whose_slot_is_held_passes_with_at_most_the_poll_limit() {
    let site = Site::start(WaitingRoomLayer::builder("stale").capacity(5)).await;
    let v = site.admit().await;
    site.clock.advance(Duration::from_secs(20));
    let calls = site.store.calls();
    let replay = [(header::COOKIE, v.header().unwrap())];
    for i in 0..100 {
        let r = site.http.send(Method::GET, "/", &replay).await;
        // A valid token passes whether or not its heartbeat was asked: the fast path needs no
        // store, the limit only spares the store.
        assert!(r.handler_saw()["by"].is_string(), "request {i}: {r:?}");
    }
    let now = site.store.calls();
    assert!(
        now.heartbeat - calls.heartbeat <= POLLS,
        "100 requests made {} heartbeats",
        now.heartbeat - calls.heartbeat
    );
    assert_eq!(now.total() - calls.total(), now.heartbeat - calls.heartbeat);
}

/// A token whose slot is gone (left, dropped by an operator, ended) gets its holder nowhere by
/// polling past the limit: over it, a token under twice `refresh` old passes unrenewed (a
/// page's burst of requests while one renews it), an older one only with its heartbeat, which
/// the store refuses. Before, the few heartbeats the limit let through were refused and every
/// other request passed, for the token's whole life: two people inside a room of one.
#[tokio::test]
async fn a_replayed_token_whose_slot_is_gone_lets_nobody_in_past_twice_refresh() {
    let (site, v) = slot_gone_and_taken().await;
    // Past twice `refresh` (15 s), well within `active_ttl` (300 s).
    site.clock.advance(Duration::from_secs(31));
    let replay = [(header::COOKIE, v.header().unwrap())];
    let mut statuses = std::collections::BTreeMap::new();
    for _ in 0..100 {
        let r = site.http.send(Method::GET, "/", &replay).await;
        assert_ne!(
            r.status,
            StatusCode::OK,
            "let in past its slot's end: {r:?}"
        );
        *statuses.entry(r.status.as_u16()).or_insert(0) += 1;
    }
    assert!(
        statuses.get(&429).is_some_and(|&n| n >= 100 - 2 * POLLS),
        "over the limit: 429 {statuses:?}"
    );
}

#[tokio::test]
async fn a_leave_storm_costs_at_most_the_poll_limit() {
    let site = Site::start(WaitingRoomLayer::builder("stale").capacity(5)).await;
    let v = site.admit().await;
    let calls = site.store.calls();
    let replay = [(header::COOKIE, v.header().unwrap())];
    let mut limited = 0;
    for _ in 0..100 {
        let r = site
            .http
            .send(Method::POST, &site.leave_path(), &replay)
            .await;
        if r.status == StatusCode::TOO_MANY_REQUESTS {
            assert_limited(&r, "leave");
            limited += 1;
        } else {
            assert_eq!(r.json()["state"], "left", "{r:?}");
        }
    }
    let spent = site.store.calls().release - calls.release;
    assert!(spent <= POLLS, "100 leaves made {spent} release calls");
    assert_eq!(limited, 100 - spent);
}

#[tokio::test]
async fn bypassed_requests_skip_the_room_entirely() {
    let site = Site::start_with(
        WaitingRoomLayer::builder("bypass")
            .capacity(1)
            .client_ip_header("x-forwarded-for")
            .new_visitor_limit(RateLimit::per_minute(1))
            .poll_limit(RateLimit::per_second(2))
            .bypass(|req| req.path() == "/healthz")
            .bypass(|req| req.method() == Method::POST && req.path() == "/webhooks/pay"),
        |layer| {
            let bare = |req: axum::extract::Request| async move {
                match req.extensions().get::<Admission>() {
                    Some(_) => "with admission",
                    None => "bare",
                }
            };
            Router::new()
                .route("/healthz", get(bare))
                .route("/webhooks/pay", any(bare))
                .route("/", any(echo))
                .route("/{*rest}", any(echo))
                .layer(layer)
        },
    )
    .await;
    let (mut w1, _w2) = busy_room(&site).await;
    let stats = site.stats().await;
    let calls = site.store.calls();
    let sizes = tower_waiting_room::__private::limiter_sizes(&site.layer);

    let mut queued = w1.clone();
    for i in 0..500 {
        // Without cookies, with a queue cookie, far over every limit.
        let r = site
            .http
            .send(Method::GET, "/healthz", &from("203.0.113.7"))
            .await;
        assert_eq!(
            (r.status, r.text().as_str()),
            (StatusCode::OK, "bare"),
            "{i}"
        );
        assert!(r.set_cookies().is_empty(), "{i}");
        let r = site.http.visit(&mut queued, Method::GET, "/healthz").await;
        assert_eq!(
            (r.status, r.text().as_str()),
            (StatusCode::OK, "bare"),
            "{i}"
        );
        let r = site.http.send(Method::POST, "/webhooks/pay", &[]).await;
        assert_eq!(
            (r.status, r.text().as_str()),
            (StatusCode::OK, "bare"),
            "{i}"
        );
        assert!(r.set_cookies().is_empty(), "{i}");
    }
    // Not counted anywhere: no store call, no limiter entry.
    assert_eq!(site.store.calls(), calls);
    assert_eq!(
        tower_waiting_room::__private::limiter_sizes(&site.layer),
        sizes
    );
    same_inside(stats, site.stats().await, "bypass");

    // The rules match only what they say: a GET to the webhook is queued like any page.
    let r = site
        .http
        .send(Method::GET, "/webhooks/pay", &from("203.0.113.7"))
        .await;
    assert_eq!(r.status, StatusCode::FOUND);
    assert!(r.cookie_value(&site.q()).is_some());
    // ... and that address's budget (1 a minute) was untouched by 500 bypassed requests.
    let r = site.http.send(Method::GET, "/", &from("203.0.113.7")).await;
    assert_limited(&r, "second new entry of the minute");
    assert_eq!(place(&site, &mut w1).await, (1, 2));
}

/// What the handler saw, like the `app` of `tests/common` (whose routes come with the layer).
async fn echo(Extension(a): Extension<Admission>) -> Json<Value> {
    Json(json!({ "session": a.session().to_string(), "by": format!("{:?}", a.admitted_by()) }))
}

#[tokio::test]
async fn a_full_queue_answers_full_and_stops_growing() {
    let site = Site::start(
        WaitingRoomLayer::builder("full")
            .capacity(1)
            .max_queue_len(3),
    )
    .await;
    site.admit().await;
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let mut jar = site.arrive("/").await;
        let r = site.http.visit(&mut jar, Method::GET, "/").await;
        assert_eq!(r.json()["state"], "waiting");
        waiters.push(jar);
    }
    let stats = site.stats().await;
    assert_eq!(stats.waiting, 3);

    for i in 0..50 {
        let mut jar = site.arrive("/").await;
        let r = site.http.visit(&mut jar, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{i}: {r:?}");
        assert_eq!(r.retry_after(), 30);
        let v = r.json();
        assert_eq!(
            (v["state"].as_str(), v["waiting"].as_u64()),
            (Some("full"), Some(3))
        );
        assert!(r.set_cookie(&site.a()).is_none());
        // The status endpoint creates nothing either: the visitor has no place.
        let r = site
            .http
            .visit(&mut jar, Method::GET, &site.status_path())
            .await;
        assert_eq!(r.json()["state"], "unknown", "{i}");
    }
    same_inside(stats, site.stats().await, "full queue");
    for (i, jar) in waiters.iter_mut().enumerate() {
        assert_eq!(place(&site, jar).await, (i as u64 + 1, 3));
    }
}
