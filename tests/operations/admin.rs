//! The admin API over real HTTP on loopback, with two gateways on one queue.
//!
//! Two `WaitingRoomLayer`s built separately (same room, same secret) each serve the app on their
//! own port; gateway 1 also serves the `AdminService` at `/admin` (axum's `nest_service`, next to
//! the room, not behind it). Every change made through gateway 1's API must be enforced by
//! gateway 2: on one `redis-server` (two `RedisStore`s), and on the embedded store (two layers
//! sharing one `MemoryStore`, which stands in for two gateways in one process).
//!
//! Then every bad input with its status (and that nothing changed), the token (401s, never in
//! `Debug`), the store failing (503), methods (405 + `Allow`), the body limit (413), and mounting
//! with full paths (`.prefix`).

use crate::common;
#[cfg(feature = "redis")]
use crate::redis_harness;

use std::future::Future;
use std::time::{Duration, Instant};

use axum::Router;
use bytes::Bytes;
use common::{app, clock, serve, session_in, Http, Jar, Reply, SECRET, T0};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};
use tower_waiting_room::admin::AdminService;
use tower_waiting_room::store::MemoryStore;
use tower_waiting_room::{ConfigError, SessionId, WaitingRoomBuilder, WaitingRoomLayer};

const ROOM: &str = "launch";
const Q: &str = "wr_launch_q";
const A: &str = "wr_launch_a";
const TOKEN: &str = "op-token-0123456789abcdef0123456789abcdef";
const REFRESH: Duration = Duration::from_secs(1);

fn room_builder() -> WaitingRoomBuilder {
    WaitingRoomLayer::builder(ROOM)
        .capacity(1)
        .secret(SECRET)
        .refresh(REFRESH)
        .active_ttl(Duration::from_secs(60))
        .secure_cookies(false)
}

fn admin_for(layer: &WaitingRoomLayer) -> AdminService {
    AdminService::builder()
        .bearer_token(TOKEN)
        .room(layer.control())
        .build()
        .expect("the admin builds")
}

/// Gateway 1: the admin at `/admin` (not behind the room) and the app behind the room.
async fn gateway_with_admin(layer: WaitingRoomLayer) -> Http {
    let admin = admin_for(&layer);
    serve(
        Router::new()
            .nest_service("/admin", admin)
            .merge(app(layer)),
    )
    .await
}

// ===== a client of the admin API =====

struct Admin {
    http: Http,
    token: Option<String>,
}

impl Admin {
    fn new(http: &Http) -> Self {
        Self {
            http: http.clone(),
            token: Some(TOKEN.to_owned()),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Reply {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("http://{}{}", self.http.addr, path));
        if let Some(t) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        let req = req.body(Full::new(Bytes::copy_from_slice(body))).unwrap();
        self.http.exchange(req).await.expect("the admin answers")
    }

    async fn json(&self, method: Method, path: &str, body: Value) -> Reply {
        let body = serde_json::to_vec(&body).unwrap();
        self.send(method, path, Some("application/json"), &body)
            .await
    }

    async fn status(&self) -> Value {
        let r = self.send(Method::GET, &room_path(), None, b"").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        r.json()
    }

    async fn patch(&self, body: Value) -> Value {
        let r = self.json(Method::PATCH, &room_path(), body.clone()).await;
        assert_eq!(r.status, StatusCode::OK, "PATCH {body}: {}", r.text());
        r.json()
    }
}

fn room_path() -> String {
    format!("/admin/rooms/{ROOM}")
}

// ===== visitors =====

/// A newcomer on `g`: the redirect with a queue cookie, then the answer of the store.
async fn arrive(g: &Http) -> (Jar, Reply) {
    let mut jar = Jar::new();
    let first = g.visit_json(&mut jar).await;
    assert_eq!(first.status, StatusCode::FOUND);
    let r = g.visit_json(&mut jar).await;
    (jar, r)
}

fn state(r: &Reply) -> String {
    r.json()["state"].as_str().unwrap_or_default().to_owned()
}

fn session(jar: &Jar) -> String {
    session_in(jar.get(Q).expect("a queue cookie"))
}

/// Polls `g` as `jar` until it answers `status`, within `within`; answers the reply.
async fn until_status(
    g: &Http,
    jar: &mut Jar,
    status: StatusCode,
    within: Duration,
    what: &str,
) -> Reply {
    let started = Instant::now();
    loop {
        let r = g.visit_json(jar).await;
        if r.status == status {
            return r;
        }
        assert!(
            started.elapsed() < within,
            "{what}: still {} after {within:?}: {}",
            r.status,
            r.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const SOON: Duration = Duration::from_secs(1);

/// The whole operator story: every change through gateway 1's admin, enforced by gateway 2.
/// `after_refresh` lets the admission tokens' `refresh` pass (real or manual time).
async fn scenario<F, Fut>(g1: &Http, g2: &Http, after_refresh: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    let admin = Admin::new(g1);
    let s = admin.status().await;
    for field in [
        "room",
        "open",
        "paused",
        "capacity",
        "rate",
        "inside",
        "granted",
        "waiting",
        "admitted_last_minute",
        "admitted_last_five_minutes",
        "eta_seconds",
        "estimating",
        "oldest_wait_seconds",
        "admissions_per_minute",
    ] {
        assert!(s.get(field).is_some(), "{field} missing in {s}");
    }
    assert_eq!(
        (s["room"].as_str(), s["capacity"].as_u64()),
        (Some(ROOM), Some(1))
    );

    // One inside (capacity 1), one waiting, both on gateway 2.
    let (mut a, r) = arrive(g2).await;
    r.handler_saw();
    let (mut b, r) = arrive(g2).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::TOO_MANY_REQUESTS, "waiting".into())
    );
    let s = admin.status().await;
    assert_eq!(
        (s["inside"].as_u64(), s["waiting"].as_u64()),
        (Some(1), Some(1))
    );

    // Capacity raised on gateway 1: the waiter on gateway 2 gets in within a second.
    let s = admin.patch(json!({"capacity": 2})).await;
    assert_eq!(s["capacity"], 2);
    until_status(
        g2,
        &mut b,
        StatusCode::OK,
        SOON,
        "the waiter after the capacity raise",
    )
    .await;

    // Paused with free slots: a newcomer on gateway 2 is queued all the same.
    admin.patch(json!({"capacity": 4})).await;
    let s = admin.patch(json!({"paused": true})).await;
    assert_eq!(
        (s["paused"].as_bool(), s["inside"].as_u64()),
        (Some(true), Some(2))
    );
    let (mut c, r) = arrive(g2).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::TOO_MANY_REQUESTS, "waiting".into()),
        "paused: {}",
        r.text()
    );
    let r = g2.visit_json(&mut c).await;
    assert_eq!(
        r.status,
        StatusCode::TOO_MANY_REQUESTS,
        "still paused: {}",
        r.text()
    );
    // Resumed: the free slot goes to the head of the line.
    admin.patch(json!({"paused": false})).await;
    until_status(
        g2,
        &mut c,
        StatusCode::OK,
        SOON,
        "the waiter after resuming",
    )
    .await;

    // Full again (3 inside, capacity 3), one more waits; then the sale is closed.
    admin.patch(json!({"capacity": 3})).await;
    let (mut d, r) = arrive(g2).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text());
    let s = admin.patch(json!({"open": false})).await;
    assert_eq!(s["open"], false);
    let r = g2.visit_json(&mut d).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::SERVICE_UNAVAILABLE, "closed".into()),
        "waiter while closed"
    );
    assert!(r.retry_after() > 0);
    let (mut e, r) = arrive(g2).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::SERVICE_UNAVAILABLE, "closed".into()),
        "newcomer while closed"
    );
    assert!(r.retry_after() > 0);

    // Reopened: the waiter is back in line where it stood, the newcomer joins behind.
    admin.patch(json!({"open": true})).await;
    let r = g2.visit_json(&mut d).await;
    assert_eq!(
        (r.status, r.json()["position"].as_u64()),
        (StatusCode::TOO_MANY_REQUESTS, Some(1)),
        "{}",
        r.text()
    );
    let r = g2.visit_json(&mut e).await;
    assert_eq!(
        (r.status, r.json()["position"].as_u64()),
        (StatusCode::TOO_MANY_REQUESTS, Some(2)),
        "{}",
        r.text()
    );

    // A release larger than the line lets the whole line in, whatever the capacity.
    let r = admin
        .json(
            Method::POST,
            &format!("{}/release", room_path()),
            json!({"count": 50}),
        )
        .await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::OK, json!({"released": 2})),
        "{}",
        r.text()
    );
    until_status(g2, &mut d, StatusCode::OK, SOON, "released waiter d").await;
    until_status(g2, &mut e, StatusCode::OK, SOON, "released waiter e").await;
    let s = admin.status().await;
    assert_eq!(
        (s["inside"].as_u64(), s["waiting"].as_u64()),
        (Some(5), Some(0))
    );

    // Drop a waiter: refused at once on gateway 2.
    let (mut f, r) = arrive(g2).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    let r = admin
        .send(
            Method::DELETE,
            &format!("{}/sessions/{}", room_path(), session(&f)),
            None,
            b"",
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["dropped"], true);
    let r = g2.visit_json(&mut f).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::FORBIDDEN, "banned".into()),
        "{}",
        r.text()
    );
    assert_eq!(admin.status().await["waiting"], 0);

    // Drop one inside: refused on gateway 2 at its first store call, i.e. without its admission
    // token at once, and with it once the token's `refresh` has passed.
    let r = admin
        .send(
            Method::DELETE,
            &format!("{}/sessions/{}", room_path(), session(&a)),
            None,
            b"",
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let mut a_without_token = a.clone();
    a_without_token.remove(A);
    let r = g2.visit_json(&mut a_without_token).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::FORBIDDEN, "banned".into()),
        "{}",
        r.text()
    );
    after_refresh().await;
    let r = g2.visit_json(&mut a).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::FORBIDDEN, "banned".into()),
        "{}",
        r.text()
    );

    // A session with neither place nor slot: 404 (and banned all the same).
    let nobody = SessionId::random();
    let r = admin
        .send(
            Method::DELETE,
            &format!("{}/sessions/{nobody}", room_path()),
            None,
            b"",
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_on_one_redis_enforce_every_change_made_through_one_admin() {
    use tower_waiting_room::store::RedisStore;
    let redis = redis_harness::Server::start(&[]);
    let layer = || {
        let store = RedisStore::builder()
            .url(redis.url())
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        room_builder().store(store).build().unwrap()
    };
    let g1 = gateway_with_admin(layer()).await;
    let g2 = serve(app(layer())).await;
    scenario(&g1, &g2, || {
        tokio::time::sleep(REFRESH + Duration::from_millis(300))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_layers_on_one_embedded_store_enforce_every_change_made_through_one_admin() {
    let clock = clock();
    let store = MemoryStore::with_clock(clock.clone());
    let layer = || {
        room_builder()
            .clock(clock.clone())
            .store(store.clone())
            .build()
            .unwrap()
    };
    let g1 = gateway_with_admin(layer()).await;
    let g2 = serve(app(layer())).await;
    scenario(&g1, &g2, || {
        clock.advance(REFRESH + Duration::from_millis(1));
        std::future::ready(())
    })
    .await;
}

// ===== bad requests =====

/// A request (method, path, content type, body) and what it must get (status, part of the error).
type Case<'a> = (
    Method,
    &'a str,
    Option<&'a str>,
    Vec<u8>,
    StatusCode,
    &'a str,
);

/// The settings part of a status (what a bad request must leave as it was).
fn settings(s: &Value) -> Value {
    json!([
        s["open"],
        s["paused"],
        s["capacity"],
        s["rate"],
        s["inside"],
        s["waiting"]
    ])
}

async fn memory_gateway() -> (Http, WaitingRoomLayer) {
    let layer = room_builder().capacity(3).build().unwrap();
    (gateway_with_admin(layer.clone()).await, layer)
}

#[tokio::test]
async fn bad_values_are_400_with_a_message_and_change_nothing() {
    let (g, _layer) = memory_gateway().await;
    let admin = Admin::new(&g);
    let (_waiter_jar, _) = arrive(&g).await;
    let before = settings(&admin.status().await);
    let room = room_path();
    let release = format!("{room}/release");
    let json_ct = Some("application/json");
    let not_hex = format!("{room}/sessions/not-hex");
    let short_hex = format!("{room}/sessions/{}", "ab".repeat(15));
    let cases: Vec<Case> = vec![
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": 0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be at least 1",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": -1}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be a whole number",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": 2.5}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be a whole number",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": "10"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be a whole number",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": 99999999999}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be a whole number",
        ),
        // Whole numbers written as decimals are refused, saying so.
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": 1e3}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be a whole number from 1 to 4294967295, written without a decimal \
             point or exponent (as 1000), not 1000.0",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": -0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "written without a decimal point or exponent, not -0.0",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"rate": 20.0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "written without a decimal point or exponent (as 20)",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": 2E0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "written without a decimal point or exponent (as 2)",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"rate": 0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "null removes the limit",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"rate": -5}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "rate must be a whole number",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"paused": "yes"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "paused must be true or false",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"open": 0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "open must be true or false",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capcity": 5}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "unknown field \"capcity\"",
        ),
        // One bad field spoils the whole change: the good one is not applied either.
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"paused": true, "capacity": 0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity",
        ),
        // A field given twice is refused, not read as its last value.
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": 0, "capacity": 7}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "`capacity` given twice",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"paused": true, "paused": false}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "`paused` given twice",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": 1, "count": 2}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "`count` given twice",
        ),
        // And inside a member: the controller's terms are not read as the last given.
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"auto": {"enabled": true, "min": 1, "min": 9}}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "a bad body: `min` given twice",
        ),
        // `end_slots` is `true` with `"open": false` or nothing: never a silent no-op.
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"end_slots": false}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "end_slots",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"open": true, "end_slots": false}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "end_slots",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"open": false, "end_slots": false}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "end_slots",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"end_slots": true}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "end_slots goes with",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "nothing to change",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"[1]"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "must be a JSON object",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            b"capacity=5".to_vec(),
            StatusCode::BAD_REQUEST,
            "not JSON",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            b"".to_vec(),
            StatusCode::BAD_REQUEST,
            "empty",
        ),
        (
            Method::PATCH,
            &room,
            Some("text/plain"),
            br#"{"capacity": 5}"#.to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json",
        ),
        (
            Method::PATCH,
            &room,
            None,
            br#"{"capacity": 5}"#.to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            format!(r#"{{"capacity": 5, "pad": "{}"}}"#, "x".repeat(20_000)).into_bytes(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "larger than 16384 bytes",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": 0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "count must be at least 1",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": -1}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "count must be a whole number",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": "1"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "count must be a whole number",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "count is missing",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": 1, "all": true}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "unknown field \"all\"",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            b"1".to_vec(),
            StatusCode::BAD_REQUEST,
            "{\"count\": n}",
        ),
        (
            Method::DELETE,
            &not_hex,
            None,
            vec![],
            StatusCode::BAD_REQUEST,
            "32 hex digits",
        ),
        (
            Method::DELETE,
            &short_hex,
            None,
            vec![],
            StatusCode::BAD_REQUEST,
            "32 hex digits",
        ),
        (
            Method::GET,
            "/admin/rooms/elsewhere",
            None,
            vec![],
            StatusCode::NOT_FOUND,
            "no room \"elsewhere\"",
        ),
        (
            Method::PATCH,
            "/admin/rooms/elsewhere",
            json_ct,
            br#"{"capacity": 5}"#.to_vec(),
            StatusCode::NOT_FOUND,
            "no room",
        ),
        (
            Method::POST,
            "/admin/rooms/elsewhere/release",
            json_ct,
            br#"{"count": 5}"#.to_vec(),
            StatusCode::NOT_FOUND,
            "no room",
        ),
        (
            Method::GET,
            "/admin/rooms/launch/what",
            None,
            vec![],
            StatusCode::NOT_FOUND,
            "no such admin path",
        ),
        (
            Method::PUT,
            &room,
            json_ct,
            br#"{"capacity": 5}"#.to_vec(),
            StatusCode::METHOD_NOT_ALLOWED,
            "allowed: GET, HEAD, PATCH",
        ),
        (
            Method::GET,
            &release,
            None,
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "allowed: POST",
        ),
        (
            Method::POST,
            "/admin/rooms",
            json_ct,
            b"{}".to_vec(),
            StatusCode::METHOD_NOT_ALLOWED,
            "allowed: GET, HEAD",
        ),
    ];
    for (method, path, ct, body, status, message) in cases {
        let shown = String::from_utf8_lossy(&body[..body.len().min(60)]).into_owned();
        let r = admin.send(method.clone(), path, ct, &body).await;
        assert_eq!(r.status, status, "{method} {path} {shown}: {}", r.text());
        assert_eq!(r.header(header::CONTENT_TYPE), Some("application/json"));
        let error = r.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(
            error.contains(message),
            "{method} {path} {shown}: {error:?} lacks {message:?}"
        );
        if status == StatusCode::METHOD_NOT_ALLOWED {
            assert_eq!(
                r.header(header::ALLOW),
                Some(message.trim_start_matches("allowed: "))
            );
        }
        assert_eq!(
            settings(&admin.status().await),
            before,
            "{method} {path} {shown} changed the room"
        );
    }
}

#[tokio::test]
async fn the_token_is_needed_and_never_shown() {
    let (g, layer) = memory_gateway().await;
    let before = settings(&Admin::new(&g).status().await);
    for (token, challenge) in [
        (None, "Bearer realm=\"waiting room admin\""),
        (
            Some("wrong"),
            "Bearer realm=\"waiting room admin\", error=\"invalid_token\"",
        ),
        // The right length, one byte off.
        (
            Some(&TOKEN.replace('0', "1")[..]),
            "Bearer realm=\"waiting room admin\", error=\"invalid_token\"",
        ),
        (
            Some(&format!("{TOKEN}x")[..]),
            "Bearer realm=\"waiting room admin\", error=\"invalid_token\"",
        ),
    ] {
        let admin = Admin {
            http: g.clone(),
            token: token.map(str::to_owned),
        };
        for (method, path) in [
            (Method::GET, "/admin/rooms".to_owned()),
            (Method::GET, room_path()),
            (Method::PATCH, room_path()),
            (Method::POST, format!("{}/release", room_path())),
            (
                Method::DELETE,
                format!("{}/sessions/{}", room_path(), SessionId::random()),
            ),
            (Method::GET, "/admin/nowhere".to_owned()),
        ] {
            let r = admin
                .json(method.clone(), &path, json!({"capacity": 9, "count": 1}))
                .await;
            assert_eq!(
                r.status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {token:?}"
            );
            assert_eq!(r.header(header::WWW_AUTHENTICATE), Some(challenge));
            assert!(r.json()["error"].is_string());
        }
    }
    // Another scheme is no bearer token.
    let basic = g
        .send(
            Method::GET,
            &room_path(),
            &[(
                header::AUTHORIZATION,
                HeaderValue::from_str(&format!("Basic {TOKEN}")).unwrap(),
            )],
        )
        .await;
    assert_eq!(basic.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        settings(&Admin::new(&g).status().await),
        before,
        "a refused call changed the room"
    );

    // The page itself holds no data: no token needed; it may run only its own script.
    let page = g.send(Method::GET, "/admin/", &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(
        page.header(header::CONTENT_TYPE),
        Some("text/html; charset=utf-8")
    );
    assert!(page.text().contains("Waiting room admin"));
    assert!(!page.text().contains(TOKEN));
    let csp = page.header(header::CONTENT_SECURITY_POLICY).unwrap();
    assert!(
        csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'sha256-"),
        "{csp}"
    );
    let head = g.send(Method::HEAD, "/admin/", &[]).await;
    assert_eq!((head.status, head.body.len()), (StatusCode::OK, 0));

    // Never in Debug, of the builder or the service.
    let builder = AdminService::builder()
        .bearer_token(TOKEN)
        .room(layer.control());
    assert!(!format!("{builder:?}").contains(TOKEN));
    let svc = builder.build().unwrap();
    let shown = format!("{svc:?}");
    assert!(
        !shown.contains(TOKEN) && !shown.contains("0123456789"),
        "{shown}"
    );
    assert!(
        shown.contains("bearer token") && shown.contains(ROOM),
        "{shown}"
    );
}

/// RFC 6750, 3.1: no credentials (no header, or another scheme) get the bare challenge; a bearer
/// header without a token is a malformed request; a token that is not the one is invalid.
#[tokio::test]
async fn the_challenge_says_what_was_wrong_as_rfc_6750_has_it() {
    let (g, _layer) = memory_gateway().await;
    let bare = "Bearer realm=\"waiting room admin\"";
    let request = "Bearer realm=\"waiting room admin\", error=\"invalid_request\"";
    let token = "Bearer realm=\"waiting room admin\", error=\"invalid_token\"";
    let basic = format!("Basic {TOKEN}");
    for (authorization, challenge) in [
        (None, bare),
        (Some(&basic[..]), bare),
        (Some("Digest username=\"op\""), bare),
        (Some("Bearerish abc"), bare),
        (Some("Bearer"), request),
        (Some("bearer"), request),
        (Some("Bearer    "), request),
        (Some("Bearer wrong"), token),
        (Some("BEARER wrong"), token),
    ] {
        let headers: Vec<(HeaderName, HeaderValue)> = authorization
            .map(|a| (header::AUTHORIZATION, HeaderValue::from_str(a).unwrap()))
            .into_iter()
            .collect();
        let r = g.send(Method::GET, &room_path(), &headers).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{authorization:?}");
        assert_eq!(
            r.header(header::WWW_AUTHENTICATE),
            Some(challenge),
            "{authorization:?}"
        );
        assert!(r.json()["error"].is_string(), "{authorization:?}");
    }
}

/// A `HEAD` answer has the `Content-Length` of the `GET` body and no body (without it a client
/// such as `curl -X HEAD` waits for a body until the connection closes).
#[tokio::test]
async fn head_answers_have_the_length_of_the_get_body() {
    let (g, _layer) = memory_gateway().await;
    let admin = Admin::new(&g);
    for path in ["/admin/".to_owned(), "/admin/rooms".to_owned(), room_path()] {
        let get = admin.send(Method::GET, &path, None, b"").await;
        let head = admin.send(Method::HEAD, &path, None, b"").await;
        assert_eq!(
            (get.status, head.status),
            (StatusCode::OK, StatusCode::OK),
            "{path}"
        );
        assert!(!get.body.is_empty(), "{path}");
        assert_eq!(head.body.len(), 0, "HEAD {path}");
        assert_eq!(
            head.header(header::CONTENT_LENGTH),
            Some(&get.body.len().to_string()[..]),
            "HEAD {path}"
        );
        assert_eq!(
            head.header(header::CONTENT_TYPE),
            get.header(header::CONTENT_TYPE),
            "HEAD {path}"
        );
    }
    // Refusals too: the length of the error the GET would get.
    let nobody = Admin {
        http: g.clone(),
        token: None,
    };
    let get = nobody.send(Method::GET, &room_path(), None, b"").await;
    let head = nobody.send(Method::HEAD, &room_path(), None, b"").await;
    assert_eq!(head.status, StatusCode::UNAUTHORIZED);
    assert_eq!(head.body.len(), 0);
    assert_eq!(
        head.header(header::CONTENT_LENGTH),
        Some(&get.body.len().to_string()[..])
    );
}

/// What a caller put in the path (or the method) is echoed to say what was wrong, but capped:
/// the first 64 characters and `…`, never thousands.
#[tokio::test]
async fn long_path_segments_are_echoed_capped() {
    let (g, _layer) = memory_gateway().await;
    let admin = Admin::new(&g);
    let long_room = "r".repeat(5000);
    let long_session = "z".repeat(5000);
    let long_method = Method::from_bytes("M".repeat(3000).as_bytes()).unwrap();
    for (method, path, status, echo) in [
        (
            Method::GET,
            format!("/admin/rooms/{long_room}"),
            StatusCode::NOT_FOUND,
            format!("no room \"{}…\" here", "r".repeat(64)),
        ),
        (
            Method::DELETE,
            format!("{}/sessions/{long_session}", room_path()),
            StatusCode::BAD_REQUEST,
            format!("\"{}…\"", "z".repeat(64)),
        ),
        (
            long_method,
            room_path(),
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{}… is not allowed here", "M".repeat(64)),
        ),
    ] {
        let r = admin.send(method, &path, None, b"").await;
        assert_eq!(r.status, status, "{}", r.text());
        let error = r.json()["error"].as_str().unwrap().to_owned();
        let start: String = error.chars().take(200).collect();
        assert!(error.contains(&echo), "{start:?}... lacks {echo:?}");
        assert!(error.len() < 400, "{} bytes: {start:?}...", error.len());
    }
    // Short ones in full, as before.
    let r = admin
        .send(
            Method::DELETE,
            &format!("{}/sessions/xyz", room_path()),
            None,
            b"",
        )
        .await;
    let error = r.json()["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("32 hex digits") && error.contains("\"xyz\""),
        "{error:?}"
    );
}

#[test]
fn the_builder_refuses_what_cannot_work() {
    let layer = room_builder().build().unwrap();
    let build = |b: tower_waiting_room::admin::AdminBuilder| b.build().map(|_| ()).unwrap_err();
    let err = build(
        AdminService::builder()
            .bearer_token("short")
            .room(layer.control()),
    );
    assert_eq!(err, ConfigError::AdminTokenTooShort { len: 5 });
    assert!(
        !err.to_string().contains("short"),
        "the message names no token: {err}"
    );
    assert_eq!(
        build(
            AdminService::builder()
                .bearer_token(format!("{TOKEN} with spaces"))
                .room(layer.control())
        ),
        ConfigError::AdminTokenNotSendable
    );
    assert_eq!(
        build(AdminService::builder().room(layer.control())),
        ConfigError::AdminAuthNotChosen
    );
    assert_eq!(
        build(AdminService::builder().bearer_token(TOKEN)),
        ConfigError::AdminWithoutRooms
    );
    assert_eq!(
        build(
            AdminService::builder()
                .without_token()
                .room(layer.control())
                .room(layer.control())
        ),
        ConfigError::DuplicateRoom { room: ROOM.into() }
    );
    for prefix in ["admin", "/admin/", "/", "/rooms", "/rooms/x"] {
        let err = build(
            AdminService::builder()
                .without_token()
                .room(layer.control())
                .prefix(prefix),
        );
        assert_eq!(
            err,
            ConfigError::InvalidPathPrefix {
                prefix: prefix.into()
            }
        );
        // A room may live under `/rooms`; the message says why the admin service may not.
        assert_eq!(
            err.to_string().contains("own paths start with /rooms"),
            prefix.starts_with("/rooms"),
            "{err}"
        );
    }
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_failing_store_is_503_with_a_json_error() {
    use tower_waiting_room::store::RedisStore;
    // A port held by this test and answered by nobody: each connection is closed at once. (A
    // port merely free when picked could be taken by a Redis another test starts meanwhile,
    // and the store would then be up.)
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in holder.incoming() {
            drop(conn);
        }
    });
    let store = RedisStore::builder()
        .url(format!("redis://127.0.0.1:{port}/"))
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let layer = room_builder().store(store).build().unwrap();
    let g = gateway_with_admin(layer).await;
    let admin = Admin::new(&g);
    for (method, path, body) in [
        (Method::GET, room_path(), json!(null)),
        (Method::PATCH, room_path(), json!({"capacity": 5})),
        (
            Method::POST,
            format!("{}/release", room_path()),
            json!({"count": 5}),
        ),
        (
            Method::DELETE,
            format!("{}/sessions/{}", room_path(), SessionId::random()),
            json!(null),
        ),
    ] {
        let r = admin.json(method.clone(), &path, body).await;
        assert_eq!(
            r.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{method} {path}: {}",
            r.text()
        );
        let error = r.json()["error"].as_str().unwrap().to_owned();
        assert!(error.contains("store"), "{error}");
        assert!(
            !error.contains(&port.to_string()),
            "the address stays in the log: {error}"
        );
    }
    // The list of rooms needs no store.
    let r = admin.send(Method::GET, "/admin/rooms", None, b"").await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::OK, json!({"rooms": [ROOM]}))
    );
}

#[tokio::test]
async fn mounted_with_full_paths_or_nested_or_behind_the_apps_own_auth() {
    let layer = room_builder().build().unwrap();
    let other = WaitingRoomLayer::builder("other")
        .capacity(7)
        .secret(SECRET)
        .build()
        .unwrap();
    // A server that hands the service full paths (here axum's fallback_service) names the
    // mount point with `.prefix`.
    let admin = AdminService::builder()
        .bearer_token(TOKEN)
        .room(layer.control())
        .room(other.control())
        .prefix("/ops/admin")
        .build()
        .unwrap();
    let g = serve(Router::new().fallback_service(admin.clone())).await;
    let client = Admin::new(&g);
    let r = client
        .send(Method::GET, "/ops/admin/rooms", None, b"")
        .await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::OK, json!({"rooms": [ROOM, "other"]}))
    );
    let r = client
        .send(Method::GET, "/ops/admin/rooms/other", None, b"")
        .await;
    assert_eq!(r.json()["capacity"], 7);
    for page in ["/ops/admin", "/ops/admin/"] {
        let r = g.send(Method::GET, page, &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{page}");
        assert!(
            r.text().contains("<title>Waiting room admin</title>"),
            "{page}"
        );
    }
    assert_eq!(
        client
            .send(Method::GET, "/elsewhere/rooms", None, b"")
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // The same service nested: axum removes the mount point, and the prefix is not needed.
    let g = serve(Router::new().nest_service("/ops/admin", admin)).await;
    let client = Admin::new(&g);
    let r = client
        .send(Method::GET, "/ops/admin/rooms/launch", None, b"")
        .await;
    assert_eq!(
        (r.status, r.json()["room"].as_str()),
        (StatusCode::OK, Some(ROOM))
    );
    for page in ["/ops/admin", "/ops/admin/"] {
        let r = g.send(Method::GET, page, &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{page}: {}", r.text());
    }

    // Without a token: the app's own auth is in front, and the service asks for nothing.
    let open = AdminService::builder()
        .without_token()
        .room(layer.control())
        .build()
        .unwrap();
    let g = serve(Router::new().nest_service("/admin", open)).await;
    let client = Admin {
        http: g.clone(),
        token: None,
    };
    let s = client.patch(json!({"capacity": 2, "rate": 5})).await;
    assert_eq!(
        (s["capacity"].as_u64(), s["rate"].as_u64()),
        (Some(2), Some(5))
    );
    let s = client.patch(json!({"rate": null})).await;
    assert_eq!(s["rate"], Value::Null);
}

// The demo's own serving code, included as a module: what it runs is what is tested.
#[cfg(feature = "serve")]
#[allow(dead_code)]
#[path = "../../examples/demo.rs"]
mod demo;

#[cfg(feature = "serve")]
#[tokio::test]
async fn the_demo_serves_the_admin_only_with_a_token() {
    for with_token in [true, false] {
        let mut args = vec!["--insecure-cookies".to_owned()];
        if with_token {
            args.extend(["--admin-token".to_owned(), TOKEN.to_owned()]);
        }
        let opts = demo::parse_args(args).unwrap().unwrap();
        let layer = demo::build_layer(&opts).unwrap();
        let admin = demo::build_admin(&opts, std::slice::from_ref(&layer), None).unwrap();
        assert_eq!(admin.is_some(), with_token);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let http = Http::new(listener.local_addr().unwrap());
        tokio::spawn(demo::serve_with_admin(
            listener,
            layer,
            admin,
            std::future::pending(),
        ));
        let r = Admin::new(&http)
            .send(Method::GET, "/admin/rooms/demo", None, b"")
            .await;
        if with_token {
            assert_eq!(
                (r.status, r.json()["room"].as_str()),
                (StatusCode::OK, Some("demo"))
            );
            let page = http.send(Method::GET, "/admin/", &[]).await;
            assert!(page.text().contains("<title>Waiting room admin</title>"));
        } else {
            // No admin at all: the path is one more page behind the room.
            assert_eq!(r.status, StatusCode::FOUND, "{}", r.text());
        }
    }
}

#[tokio::test]
async fn the_status_shows_the_schedule_and_the_registrants_before_the_opening() {
    let clock = clock();
    let opens = T0 + 600_000;
    let closes = opens + 3_600_000;
    let at = |ms: u64| std::time::UNIX_EPOCH + Duration::from_millis(ms);
    let layer = room_builder()
        .capacity(1)
        .opens_at(at(opens))
        .closes_at(at(closes))
        .clock(clock.clone())
        .store(MemoryStore::with_clock(clock.clone()))
        .build()
        .unwrap();
    let g = gateway_with_admin(layer).await;
    let admin = Admin::new(&g);
    let schedule = |s: &Value| {
        json!([
            s["state"],
            s["opens_at"],
            s["closes_at"],
            s["registrants"],
            s["waiting"]
        ])
    };

    // Before the opening: scheduled, nobody registered yet, no wait to tell.
    let s = admin.status().await;
    assert_eq!(
        schedule(&s),
        json!(["scheduled", opens / 1000, closes / 1000, 0, 0]),
        "{s}"
    );
    assert_eq!(
        (&s["open"], &s["eta_seconds"], &s["estimating"]),
        (&json!(true), &Value::Null, &json!(false)),
        "{s}"
    );
    // Three register; each is told when the room opens, and nothing of places or counts.
    for _ in 0..3 {
        let (_, r) = arrive(&g).await;
        assert_eq!(
            (r.status, state(&r)),
            (StatusCode::SERVICE_UNAVAILABLE, "scheduled".to_owned())
        );
        let body = r.json();
        assert_eq!(body["opens_at"], opens / 1000, "{body}");
        for hidden in ["position", "ahead", "waiting", "eta_seconds"] {
            assert!(
                body[hidden].is_null(),
                "{hidden} shown before the opening: {body}"
            );
        }
    }
    let s = admin.status().await;
    assert_eq!(
        schedule(&s),
        json!(["scheduled", opens / 1000, closes / 1000, 3, 3]),
        "{s}"
    );
    // Paused before the opening: still scheduled (and paused); the operators' close comes
    // first, and reopening brings the schedule back.
    let s = admin.patch(json!({"paused": true})).await;
    assert_eq!(
        (&s["state"], &s["paused"]),
        (&json!("scheduled"), &json!(true))
    );
    let s = admin.patch(json!({"open": false})).await;
    assert_eq!(s["state"], "closed", "{s}");
    let s = admin.patch(json!({"open": true, "paused": false})).await;
    assert_eq!(s["state"], "scheduled", "{s}");

    // From the opening: open, registrants no longer counted apart (they are the line, whose
    // first has been given the one slot).
    clock.set(opens);
    let s = admin.status().await;
    assert_eq!(
        schedule(&s),
        json!(["open", opens / 1000, closes / 1000, null, 2]),
        "{s}"
    );
    assert_eq!(s["granted"], 1, "{s}");
    let s = admin.patch(json!({"paused": true})).await;
    assert_eq!(s["state"], "paused", "{s}");
    admin.patch(json!({"paused": false})).await;

    // From the closing: closed, though the operators never closed it.
    clock.set(closes);
    let s = admin.status().await;
    assert_eq!(
        (&s["state"], &s["open"]),
        (&json!("closed"), &json!(true)),
        "{s}"
    );
    assert_eq!(s["eta_seconds"], Value::Null, "{s}");
}

#[tokio::test]
async fn a_room_without_a_schedule_shows_none() {
    let (g, _layer) = memory_gateway().await;
    let s = Admin::new(&g).status().await;
    assert_eq!(
        json!([s["state"], s["opens_at"], s["closes_at"], s["registrants"]]),
        json!(["open", null, null, null]),
        "{s}"
    );
}
