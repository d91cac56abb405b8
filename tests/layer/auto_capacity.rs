//! A room whose capacity follows the app (`auto_capacity`): the layer measures the admitted
//! requests it passes on, decides each window and writes the capacity to the store; errors
//! cut it; a capacity set by hand turns the controller off until it is resumed. The law
//! itself is tuned on a simulation (`src/auto/sim.rs`); this is the wiring, on the real layer
//! with a manual clock and Tokio's paused time (the app's latency is virtual time).

use crate::common::{self, call};

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use http::{header, HeaderValue, Method, StatusCode};
use tower_waiting_room::auto::{AutoCapacity, Change, Measured, Reason};
use tower_waiting_room::store::{AutoStore, GatewayId, Store};
use tower_waiting_room::telemetry::{AUTO_CAPACITY, AUTO_DECISIONS_TOTAL};
use tower_waiting_room::testing::TestRoom;
use tower_waiting_room::{ConfigError, SessionId, SigningKey, WaitingRoomLayer};

const WINDOW: Duration = Duration::from_secs(1);

fn terms() -> AutoCapacity {
    AutoCapacity::new(2, 40, Duration::from_millis(300)).window(WINDOW)
}

/// A room of `capacity` on the embedded store whose capacity follows the app by [`terms`].
fn auto_room(name: &str, capacity: u32) -> TestRoom {
    TestRoom::with(
        WaitingRoomLayer::builder(name)
            .capacity(capacity)
            .auto_capacity(terms()),
    )
}

/// The room (capacity 4, following the app), the app behind it (answering `status` after
/// 20 ms), and four visitors inside with thirty in line.
async fn sale(name: &str) -> (TestRoom, Router, Arc<AtomicU16>, Vec<HeaderValue>) {
    let room = auto_room(name, 4);
    let status = Arc::new(AtomicU16::new(200));
    let answer = Arc::clone(&status);
    let app = Router::new()
        .route(
            "/",
            get(move || {
                let answer = Arc::clone(&answer);
                async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    StatusCode::from_u16(answer.load(Ordering::Relaxed)).unwrap()
                }
            }),
        )
        .layer(room.layer());
    let inside = crowd(&room).await;
    (room, app, status, inside)
}

/// Four visitors let into `room` (their admission cookies), thirty in line behind them.
async fn crowd(room: &TestRoom) -> Vec<HeaderValue> {
    let mut inside = Vec::new();
    for _ in 0..4 {
        inside.push(room.admit().await.1);
    }
    let policy = room.layer().config().policy().clone();
    for _ in 0..30 {
        room.store()
            .enter(&policy, SessionId::random())
            .await
            .unwrap();
    }
    inside
}

/// `n` requests from the visitors inside, in turn.
async fn requests(app: &Router, inside: &[HeaderValue], n: usize) {
    for i in 0..n {
        let cookie = inside[i % inside.len()].clone();
        call(app, Method::GET, "/", &[(header::COOKIE, cookie)]).await;
    }
}

/// Ends the window: the manual clock past it, one more request (the first after a window's
/// end reports, and is handed the window to decide), and the decision's task run.
async fn next_window(room: &TestRoom, app: &Router, inside: &[HeaderValue]) {
    // The reports in flight (tasks of their own) reach the store before the clock moves on.
    settle().await;
    room.clock().advance(WINDOW);
    requests(app, inside, 1).await;
    settle().await;
}

/// Lets the room's tasks (reports to the store, decisions) run.
async fn settle() {
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

async fn capacity(room: &TestRoom) -> u32 {
    room.layer().control().settings().await.unwrap().capacity
}

#[tokio::test(start_paused = true)]
async fn the_capacity_grows_on_fast_answers_and_is_cut_on_errors() {
    let metrics = crate::metrics::prometheus();
    let (room, app, status, inside) = sale("auto-grows").await;
    let control = room.layer().control();
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    let last = control.auto().unwrap();
    assert_eq!(
        (last.change, last.reason),
        (Some(Change::Grow), Some(Reason::Headroom.as_str())),
        "{last:?}"
    );
    assert!(last.samples >= 40, "{last:?}");
    let p95 = last.p95_ms.unwrap();
    assert!((20..30).contains(&p95), "{p95} ms");
    // Four inside, a line: by half, to six, written to the store for every gateway.
    assert_eq!(capacity(&room).await, 6);
    let text = metrics.render();
    let room_label = ("room", "auto-grows");
    let series = |name, more: &[(&str, &str)]| {
        let mut labels = vec![room_label];
        labels.extend_from_slice(more);
        crate::metrics::value(&text, name, &labels)
    };
    assert_eq!(series(AUTO_CAPACITY, &[]), Some(6.0), "{text}");
    assert_eq!(
        series(AUTO_DECISIONS_TOTAL, &[("change", "grow")]),
        Some(1.0)
    );

    status.store(503, Ordering::Relaxed);
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    let last = control.auto().unwrap();
    assert_eq!(
        (last.change, last.reason),
        (Some(Change::Cut), Some("errors")),
        "{last:?}"
    );
    assert!(last.error_rate.unwrap() > 0.9, "{last:?}");
    // Six inside (four, and two let in from the line), every request failing: to 45 % of
    // them, which is the minimum of 2.
    assert_eq!(capacity(&room).await, 2);
}

/// A proxy between the room and the app may say what the room cannot see ([`Measured`]): an
/// answer it gave for the client's fault is not counted, and the app's own time replaces the
/// room's measure (which includes a slow client's upload). Both answers here come 3 s after
/// the call, past the terms' 2 s timeout: counted as the room sees them, every one would be a
/// timeout and the capacity cut.
#[tokio::test(start_paused = true)]
async fn what_a_proxy_says_of_an_answer_is_what_is_counted() {
    let room = auto_room("auto-measured", 4);
    let answer = |measured: Measured, status: StatusCode| {
        move || async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let mut res = status.into_response();
            res.extensions_mut().insert(measured);
            res
        }
    };
    let app = Router::new()
        .route(
            "/upload",
            post(answer(
                Measured::AppTook(Duration::from_millis(12)),
                StatusCode::OK,
            )),
        )
        .route(
            "/broken",
            post(answer(Measured::ClientFault, StatusCode::BAD_REQUEST)),
        )
        .route("/", get(|| async { StatusCode::OK }))
        .layer(room.layer());
    let inside = crowd(&room).await;
    for i in 0..40 {
        let cookie = inside[i % inside.len()].clone();
        let path = if i % 2 == 0 { "/upload" } else { "/broken" };
        call(&app, Method::POST, path, &[(header::COOKIE, cookie)]).await;
    }
    settle().await;
    room.clock().advance(WINDOW);
    call(
        &app,
        Method::POST,
        "/upload",
        &[(header::COOKIE, inside[0].clone())],
    )
    .await;
    settle().await;
    let last = room.layer().control().auto().unwrap();
    assert_eq!(
        (last.change, last.reason),
        (Some(Change::Grow), Some(Reason::Headroom.as_str())),
        "{last:?}"
    );
    assert_eq!(last.error_rate, Some(0.0), "{last:?}");
    assert_eq!(last.samples, 21, "the uploads only: {last:?}");
    assert!((10..20).contains(&last.p95_ms.unwrap()), "{last:?}");
}

#[tokio::test(start_paused = true)]
async fn a_capacity_set_by_hand_turns_it_off_until_it_is_resumed() {
    let (room, app, _status, inside) = sale("auto-by-hand").await;
    let control = room.layer().control();
    control.set_capacity(10).await.unwrap();
    let auto = control.auto().unwrap();
    assert!(!auto.enabled);
    assert_eq!(auto.reason, Some("set_by_hand"));
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    assert_eq!(capacity(&room).await, 10, "the operator's value stands");
    assert_eq!(control.auto().unwrap().change, None, "no decision");
    // The admin's JSON carries it.
    let json = serde_json::to_value(control.status().await.unwrap()).unwrap();
    assert_eq!(json["auto"]["enabled"], false);
    assert_eq!(json["auto"]["reason"], "set_by_hand");
    assert_eq!(json["auto"]["min"], 2);

    assert!(control.resume_auto().await.unwrap());
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    // Back on from the operator's 10, full (four, and six let in from the line since) with a
    // line: it grows from there.
    let auto = control.auto().unwrap();
    assert!(auto.enabled);
    assert_eq!(auto.change, Some(Change::Grow), "{auto:?}");
    let chosen = auto.capacity.unwrap();
    assert_eq!(capacity(&room).await, chosen);
    assert!(chosen > 10);
    let json = serde_json::to_value(control.status().await.unwrap()).unwrap();
    assert_eq!(json["capacity"], chosen);
    assert_eq!(json["auto"]["reason"], "headroom");
    assert!(json["auto"]["p95_ms"].as_u64().unwrap() >= 20);
}

#[tokio::test(start_paused = true)]
async fn someone_else_writing_the_capacity_turns_it_off_rather_than_fight() {
    let (room, app, _status, inside) = sale("auto-elsewhere").await;
    let control = room.layer().control();
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    assert_eq!(capacity(&room).await, 6);
    // Another gateway (or a second controller) writes the store directly.
    let policy = room.layer().config().policy().clone();
    room.store()
        .configure(
            &policy,
            tower_waiting_room::store::SettingsChange::new().capacity(25),
        )
        .await
        .unwrap();
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    let auto = control.auto().unwrap();
    assert!(!auto.enabled);
    assert_eq!(auto.reason, Some("changed_elsewhere"));
    assert_eq!(capacity(&room).await, 25);
}

/// An operator on another gateway sets the capacity by hand and turns the controller back on
/// before the deciding gateway reports again: it never hears the controller off, and must not
/// decide from the capacity it last chose (overwriting the operator's): it goes on from the
/// room's, as one taking over.
#[tokio::test(start_paused = true)]
async fn the_decider_goes_on_from_a_capacity_set_on_another_gateway_meanwhile() {
    let (room, app, _status, inside) = sale("auto-meanwhile").await;
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    assert_eq!(capacity(&room).await, 6, "this gateway decides");
    let other = WaitingRoomLayer::builder("auto-meanwhile")
        .capacity(4)
        .auto_capacity(terms())
        .signing_key(SigningKey::new("test", [0x5e; 32]).unwrap())
        .secure_cookies(false)
        .clock(room.clock().clone())
        .store(room.store().clone())
        .build()
        .unwrap();
    other.control().set_capacity(30).await.unwrap();
    assert!(other.control().resume_auto().await.unwrap());
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    let auto = room.layer().control().auto().unwrap();
    assert!(auto.enabled, "{auto:?}");
    let now = capacity(&room).await;
    assert!(now >= 30, "the operator's 30 overwritten: {now} ({auto:?})");
}

#[tokio::test(start_paused = true)]
async fn a_capacity_outside_the_bounds_is_brought_within_them_and_said_so() {
    let room = auto_room("auto-bounds", 1);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(room.layer());
    let inside = vec![room.admit().await.1];
    requests(&app, &inside, 10).await;
    next_window(&room, &app, &inside).await;
    let auto = room.layer().control().auto().unwrap();
    assert_eq!(
        (auto.change, auto.reason, auto.capacity),
        (Some(Change::Grow), Some("at_bound"), Some(2)),
        "{auto:?}"
    );
    assert_eq!(capacity(&room).await, 2, "min is 2");
}

#[tokio::test(start_paused = true)]
async fn the_apps_load_header_holds_growth_and_never_reaches_the_client() {
    use std::sync::Mutex;
    use tower_waiting_room::config::defaults::APP_LOAD_HEADER;
    let room = TestRoom::with(
        WaitingRoomLayer::builder("auto-load")
            .capacity(4)
            .bypass(|req| req.path().starts_with("/static"))
            .auto_capacity(terms()),
    );
    let load: Arc<Mutex<&'static str>> = Arc::new(Mutex::new("95"));
    let said = Arc::clone(&load);
    let app = Router::new()
        .route(
            "/",
            get(move || {
                let said = Arc::clone(&said);
                async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let value = *said.lock().unwrap();
                    ([(APP_LOAD_HEADER, value)], "ok")
                }
            }),
        )
        .route(
            "/static",
            get(|| async { ([(APP_LOAD_HEADER, "99")], "css") }),
        )
        .layer(room.layer());
    let inside = crowd(&room).await;
    // Fast answers, a full room and a line: it would grow, but the app says it is loaded.
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    let auto = room.layer().control().auto().unwrap();
    assert_eq!(
        (auto.change, auto.reason),
        (Some(Change::Hold), Some(Reason::AppLoad.as_str())),
        "{auto:?}"
    );
    assert_eq!(capacity(&room).await, 4);
    // Clients never see the header: not the admitted visitors', not anyone's on a bypassed
    // route. A value that is no load is ignored, never an error: it grows again.
    *load.lock().unwrap() = "lots";
    let reply = call(
        &app,
        Method::GET,
        "/",
        &[(header::COOKIE, inside[0].clone())],
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        reply.headers.get(APP_LOAD_HEADER).is_none(),
        "{:?}",
        reply.headers
    );
    let stranger = call(&app, Method::GET, "/static", &[]).await;
    assert_eq!(stranger.body, "css", "bypassed");
    assert!(
        stranger.headers.get(APP_LOAD_HEADER).is_none(),
        "{:?}",
        stranger.headers
    );
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    let auto = room.layer().control().auto().unwrap();
    assert_eq!(auto.change, Some(Change::Grow), "{auto:?}");
    assert_eq!(capacity(&room).await, 6);
}

#[tokio::test(start_paused = true)]
async fn the_admission_rate_follows_the_capacity_when_the_terms_say_so() {
    let room = TestRoom::with(
        WaitingRoomLayer::builder("auto-rate")
            .capacity(4)
            .admission_rate(8)
            .auto_capacity(terms().rate_follows(true)),
    );
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(room.layer());
    let inside = crowd(&room).await;
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    // Four to six people inside, and eight to twelve a second: the room's proportion.
    let settings = room.layer().control().settings().await.unwrap();
    assert_eq!((settings.capacity, settings.admission_rate), (6, Some(12)));
    // An operator's rate is theirs: the capacity goes on moving, the rate stays.
    room.layer().control().set_rate(Some(5)).await.unwrap();
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    let settings = room.layer().control().settings().await.unwrap();
    assert!(settings.capacity > 6, "{settings:?}");
    assert_eq!(settings.admission_rate, Some(5));
}

#[test]
fn terms_it_cannot_run_with_are_refused_at_build() {
    let built = WaitingRoomLayer::builder("auto")
        .capacity(4)
        .secret(common::SECRET)
        .auto_capacity(AutoCapacity::new(10, 5, Duration::from_millis(300)))
        .build();
    assert!(matches!(
        built,
        Err(ConfigError::InvalidAutoCapacity {
            why: "min is above max"
        })
    ));
}

#[test]
fn a_settings_file_turns_it_on_and_refuses_terms_it_cannot_read() {
    use tower_waiting_room::config::RoomFile;
    let file: RoomFile = toml::from_str(
        r#"
        room = "auto"
        capacity = 50
        auto_capacity = "20-2000, p95 300ms, errors 2%"
        "#,
    )
    .unwrap();
    let layer = file
        .builder()
        .unwrap()
        .secret(common::SECRET)
        .build()
        .unwrap();
    let auto = layer.control().auto().expect("auto capacity is on");
    assert_eq!((auto.min, auto.max, auto.target_ms), (20, 2000, 300));
    assert!((auto.error_budget - 0.02).abs() < 1e-9);
    let bad = toml::from_str::<RoomFile>("room = \"auto\"\nauto_capacity = \"20 to 2000\"\n")
        .unwrap_err()
        .to_string();
    assert!(bad.contains("auto_capacity"), "{bad}");
    // Read, but refused at build like terms set in code.
    let file: RoomFile =
        toml::from_str("room = \"auto\"\ncapacity = 5\nauto_capacity = \"30-20, p95 1s\"\n")
            .unwrap();
    let built = file.builder().unwrap().secret(common::SECRET).build();
    assert!(matches!(
        built,
        Err(ConfigError::InvalidAutoCapacity { .. })
    ));
    let off = layer_without_auto();
    assert!(off.control().auto().is_none());
}

fn layer_without_auto() -> WaitingRoomLayer {
    WaitingRoomLayer::builder("plain")
        .capacity(5)
        .secret(common::SECRET)
        .build()
        .unwrap()
}

/// `PATCH /rooms/{room}` of the admin API with `body`, in process: the status and its JSON.
async fn admin_patch(
    admin: &tower_waiting_room::admin::AdminService,
    room: &str,
    body: serde_json::Value,
) -> (StatusCode, serde_json::Value) {
    use http_body_util::{BodyExt, Full};
    use tower::ServiceExt;
    let req = http::Request::builder()
        .method(Method::PATCH)
        .uri(format!("/rooms/{room}"))
        .header(header::AUTHORIZATION, format!("Bearer {ADMIN_TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(bytes::Bytes::from(body.to_string())))
        .unwrap();
    let res = admin.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

const ADMIN_TOKEN: &str = "an-admin-token-of-at-least-32-bytes-for-tests";

#[tokio::test(start_paused = true)]
async fn the_admin_api_switches_it_and_shows_what_it_does() {
    let (room, app, _status, inside) = sale("auto-admin").await;
    let plain = layer_without_auto();
    let admin = tower_waiting_room::admin::AdminService::builder()
        .bearer_token(ADMIN_TOKEN)
        .room(room.layer().control())
        .room(plain.control())
        .build()
        .unwrap();
    let (status, json) = admin_patch(
        &admin,
        "auto-admin",
        serde_json::json!({"auto": {"enabled": false}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["auto"]["enabled"], false);
    assert_eq!(json["auto"]["reason"], "set_by_hand");
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    assert_eq!(capacity(&room).await, 4, "off: nothing moves");
    // A capacity and the switch together: it goes on from the capacity given.
    let (status, json) = admin_patch(
        &admin,
        "auto-admin",
        serde_json::json!({"capacity": 8, "auto": {"enabled": true}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(
        (json["capacity"].as_u64(), json["auto"]["enabled"].as_bool()),
        (Some(8), Some(true))
    );
    requests(&app, &inside, 40).await;
    next_window(&room, &app, &inside).await;
    assert!(capacity(&room).await > 8, "on again, from 8: it grows");
    // A room built without it: refused, nothing changed.
    let (status, json) = admin_patch(
        &admin,
        "plain",
        serde_json::json!({"auto": {"enabled": true}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    assert!(
        json["error"].as_str().unwrap().contains("auto_capacity"),
        "{json}"
    );
    let (status, _) = admin_patch(&admin, "auto-admin", serde_json::json!({"auto": true})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test(start_paused = true)]
async fn the_admin_api_gives_it_new_terms_for_every_gateway() {
    let (room, app, _status, inside) = sale("auto-terms").await;
    let admin = tower_waiting_room::admin::AdminService::builder()
        .bearer_token(ADMIN_TOKEN)
        .room(room.layer().control())
        .build()
        .unwrap();
    // Terms that cannot run together are refused whole, and nothing changes, not even the
    // capacity given beside them.
    let (status, json) = admin_patch(
        &admin,
        "auto-terms",
        serde_json::json!({"capacity": 9, "auto": {"min": 50}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    assert!(
        json["error"].as_str().unwrap().contains("min is above max"),
        "{json}"
    );
    assert_eq!(capacity(&room).await, 4);
    let (status, json) = admin_patch(
        &admin,
        "auto-terms",
        serde_json::json!({"auto": {"error_budget": 2}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    // A lower max (and the rest as they were): on, by them, for every gateway (the store
    // keeps them); the capacity grows no further than the new max.
    let (status, json) = admin_patch(
        &admin,
        "auto-terms",
        serde_json::json!({"auto": {"max": 5, "target_ms": 250}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(
        (
            &json["auto"]["max"],
            &json["auto"]["min"],
            &json["auto"]["target_ms"]
        ),
        (
            &serde_json::json!(5),
            &serde_json::json!(2),
            &serde_json::json!(250)
        ),
        "{json}"
    );
    assert_eq!(json["auto"]["window_ms"], 1_000);
    for _ in 0..3 {
        requests(&app, &inside, 40).await;
        next_window(&room, &app, &inside).await;
    }
    assert_eq!(
        capacity(&room).await,
        5,
        "grown to the new max, not past it"
    );
    let auto = room.layer().control().auto().unwrap();
    assert_eq!((auto.max, auto.enabled), (5, true), "{auto:?}");
    let policy = room.layer().config().policy().clone();
    let kept = room
        .store()
        .auto_report(
            &policy,
            GatewayId::random(),
            &Default::default(),
            1_000,
            3_000,
        )
        .await
        .unwrap();
    assert_eq!(
        kept.terms.as_deref(),
        Some("2-5, p95 250ms, errors 1%, window 1000ms"),
        "kept for the other gateways"
    );
}
