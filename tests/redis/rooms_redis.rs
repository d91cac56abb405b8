//! Gates across gateways: two `WaitingRooms` layers (same rooms, same key, each over its own
//! `RedisStore` connection) in front of one `redis-server`, serving real HTTP on loopback. An
//! admission from gateway 1 passes a gate on gateway 2, as a cookie and as a ticket; a forged,
//! expired or other-room value is refused there and writes nothing to Redis (its dirty counter
//! and key count do not move).

use crate::common;
use crate::redis_harness;

use std::time::Duration;

use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use common::{admission_value, cookie, keys, serve_with_connect_info, Http, Jar, SECRET};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use redis_harness::Server;
use serde_json::{json, Value};
use tower_waiting_room::routing::{Rule, WaitingRooms, ADMISSION_TICKET_HEADER};
use tower_waiting_room::store::RedisStore;
use tower_waiting_room::{Admission, FailPolicy, SessionId, WaitingRoomLayer};

const TICKET: HeaderName = HeaderName::from_static(ADMISSION_TICKET_HEADER);

fn room(id: &str, redis_url: &str) -> WaitingRoomLayer {
    let store = RedisStore::builder()
        .url(redis_url)
        .timeout(Duration::from_secs(2))
        .build()
        .expect("the store builds");
    WaitingRoomLayer::builder(id)
        .capacity(10)
        .secret(SECRET)
        .secure_cookies(false)
        .fail_policy(FailPolicy::Closed)
        .store(store)
        .build()
        .expect("the room builds")
}

/// One gateway: the "drop" room at `/drop`, "main" for everything else, the checkout gated by
/// "drop".
async fn gateway(redis_url: &str) -> Http {
    let rooms = WaitingRooms::builder()
        .room(Rule::path("/drop"), room("drop", redis_url))
        .default_room(room("main", redis_url))
        .gate(Rule::post("/checkout"), "drop")
        .build()
        .expect("the rooms build");
    let seen = |Extension(a): Extension<Admission>| async move {
        Json(json!({ "room": a.room(), "session": a.session().to_string() }))
    };
    let app = Router::new()
        .route("/drop", get(seen))
        .route("/", get(seen))
        .route("/checkout", post(seen))
        .layer(rooms);
    serve_with_connect_info(app).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_from_one_gateway_passes_a_gate_on_another_and_a_forged_one_writes_nothing() {
    let redis = Server::start(&["--save", ""]);
    let one = gateway(&redis.url()).await;
    let two = gateway(&redis.url()).await;

    // Admitted by the drop room on gateway 1.
    let mut jar = Jar::new();
    let first = one.visit(&mut jar, Method::GET, "/drop").await;
    assert_eq!(first.status, StatusCode::FOUND);
    let inside = one.visit(&mut jar, Method::GET, "/drop").await;
    assert_eq!(inside.status, StatusCode::OK, "{}", inside.text());
    let session = inside.json()["session"].as_str().unwrap().to_owned();
    let token = jar.get("wr_drop_a").expect("admitted").to_owned();

    // Gateway 2's gate lets the same visitor through, as a cookie and as a ticket.
    let reply = two.visit(&mut jar, Method::POST, "/checkout").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json(), json!({ "room": "drop", "session": session }));
    let ticket = [(TICKET, HeaderValue::from_str(&token).unwrap())];
    let reply = two.send(Method::POST, "/checkout", &ticket).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());

    // Forged, expired and other-room values on gateway 2: refused with the reason, and Redis
    // sees no write at all.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let other_key = tower_waiting_room::Keyring::new(
        tower_waiting_room::SigningKey::new("k1", [9u8; 32]).unwrap(),
    );
    let forged = admission_value(&other_key, "drop", SessionId::random(), now, now + 60_000);
    let mut tampered = token.clone().into_bytes();
    let at = tampered.len() - 2;
    tampered[at] = if tampered[at] == b'x' { b'y' } else { b'x' };
    let tampered = String::from_utf8(tampered).unwrap();
    let expired = admission_value(&keys(), "drop", SessionId::random(), now - 90_000, now - 1);
    let of_main = admission_value(&keys(), "main", SessionId::random(), now, now + 60_000);
    let before = redis.writes_and_keys();
    for (value, reason) in [
        (forged.as_str(), "invalid"),
        (tampered.as_str(), "invalid"),
        ("a1.k1.garbage", "invalid"),
        (expired.as_str(), "expired"),
        (of_main.as_str(), "other_room"),
    ] {
        for headers in [
            vec![(header::COOKIE, cookie("wr_drop_a", value))],
            vec![(TICKET, HeaderValue::from_str(value).unwrap())],
        ] {
            let reply = two.send(Method::POST, "/checkout", &headers).await;
            assert_eq!(reply.status, StatusCode::FORBIDDEN, "{value}");
            let body: Value = reply.json();
            assert_eq!(body["error"], "not_admitted");
            assert_eq!(body["reason"], reason, "{value}");
            assert!(
                reply.set_cookies().is_empty(),
                "{value}: no cookie, no place in line"
            );
        }
    }
    let reply = two.send(Method::POST, "/checkout", &[]).await;
    assert_eq!(reply.json()["reason"], "missing");
    assert_eq!(
        redis.writes_and_keys(),
        before,
        "refused values write nothing (Redis's dirty counter and key count unchanged)"
    );
    // The measure is live: a visitor who takes a place on gateway 2 does write.
    let mut newcomer = Jar::new();
    two.visit(&mut newcomer, Method::GET, "/drop").await;
    let reply = two.visit(&mut newcomer, Method::GET, "/drop").await;
    assert_eq!(reply.status, StatusCode::OK);
    let after = redis.writes_and_keys();
    assert!(after.0 > before.0, "{before:?} -> {after:?}");
}
