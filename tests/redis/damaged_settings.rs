//! The room's settings key damaged by hand, or written by a version of the crate this one cannot
//! read, met over HTTP as a visitor and an operator meet it: a room of capacity 1 in front of a
//! real `redis-server`, under the default fail policy (open), with the admin API beside it.
//!
//! A damaged number (`HSET twr:{room}:settings capacity inf`, `nan`, `2.5`, ...) is read as the
//! field's default, never as the number Lua's `tonumber` makes of it: nobody more is let in, and
//! the operator sees the repaired value. A version mix (`v` 6) is a busy store, never an outage
//! that fails open: nobody is let in without a slot, nobody loses their place, and the operator
//! is told which versions met, with `409`, and in the log once.

use crate::common;
use crate::redis_harness;

use std::io;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::Router;
use common::{app, serve, Jar, SECRET};
use http::{Method, StatusCode};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use redis_harness::Server;
use tower_waiting_room::admin::AdminService;
use tower_waiting_room::store::{RedisStore, Store};
use tower_waiting_room::telemetry::VERSION_MIX_TOTAL;
use tower_waiting_room::testing::conformance::BadNumber;
use tower_waiting_room::{RoomPolicy, SessionId, WaitingRoomLayer};

fn store(redis: &Server) -> RedisStore {
    RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(5))
        .build()
        .expect("the store builds")
}

/// A gateway: the room `room` (capacity 1, the default fail policy, open) over `redis`, with the
/// admin API at `/admin`, served on loopback; and its layer.
async fn gateway(room: &str, redis: &Server) -> (common::Http, WaitingRoomLayer) {
    let layer = WaitingRoomLayer::builder(room)
        .capacity(1)
        .secret(SECRET)
        .secure_cookies(false)
        .store(store(redis))
        .build()
        .expect("the room builds");
    let admin = AdminService::builder()
        .without_token()
        .room(layer.control())
        .build()
        .expect("the admin builds");
    let router = Router::new()
        .nest_service("/admin", admin)
        .merge(app(layer.clone()));
    (serve(router).await, layer)
}

/// A newcomer's two requests: the first visit (a queue cookie, nothing stored), then the
/// store's answer; its status, and the jar.
async fn newcomer(http: &common::Http) -> (StatusCode, Jar) {
    let mut jar = Jar::new();
    let first = http.visit(&mut jar, Method::GET, "/").await;
    assert_eq!(first.status, StatusCode::FOUND, "{}", first.text());
    let second = http.visit(&mut jar, Method::GET, "/").await;
    (second.status, jar)
}

fn settings_key(room: &str) -> String {
    format!("twr:{{{room}}}:settings")
}

/// The review's case: one visitor inside a room of capacity 1, then `HSET ... capacity <form>`
/// by hand, then twenty newcomers. Every bad form reads as the default capacity (1): all twenty
/// wait, and the admin API and `stats` show capacity 1 (with `inf` read as a number, all twenty
/// were let in and the operator saw 4294967295; with `2.5`, three were and they saw 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_capacity_never_lets_more_than_capacity_in() {
    let redis = Server::start(&["--save", ""]);
    for (i, form) in BadNumber::ALL.into_iter().enumerate() {
        let room = format!("damaged{i}");
        let (http, layer) = gateway(&room, &redis).await;
        let (status, _inside) = newcomer(&http).await;
        assert_eq!(status, StatusCode::OK, "the first visitor is let in");
        redis
            .command(&["HSET", &settings_key(&room), "capacity", form.text()])
            .unwrap();
        let what = format!("capacity {:?}", form.text());
        let mut let_in = 0;
        for _ in 0..20 {
            let (status, _) = newcomer(&http).await;
            match status {
                StatusCode::OK => let_in += 1,
                StatusCode::TOO_MANY_REQUESTS => {}
                other => panic!("{what}: a newcomer got {other}"),
            }
        }
        assert_eq!(let_in, 0, "{what}: newcomers let in beyond the capacity");
        let stats = layer.stats().await.unwrap();
        assert_eq!(
            (
                stats.capacity,
                stats.admitted + stats.granted,
                stats.waiting
            ),
            (1, 1, 20),
            "{what}: {stats:?}"
        );
        let status = http
            .send(Method::GET, &format!("/admin/rooms/{room}"), &[])
            .await;
        assert_eq!(status.status, StatusCode::OK, "{}", status.text());
        assert_eq!(
            (
                status.json()["capacity"].as_u64(),
                status.json()["inside"].as_u64()
            ),
            (Some(1), Some(1)),
            "{what}: {}",
            status.text()
        );
    }
}

/// The process's one metrics recorder (this test binary records nowhere else).
fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| PrometheusBuilder::new().install_recorder().unwrap())
}

/// The review's case: the settings key written by another version (`v 6`), under the default
/// fail policy (open). Twenty newcomers are told the store is busy (`503`, `Retry-After`), none
/// is let in; the waiter keeps their place; the operator gets `409` naming the versions, never a
/// `503` that reads like an outage; the calls are counted. Once the key is one this version
/// reads (a newer one whose changes are additive, then this one's), everyone is where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_mix_is_a_busy_store_never_an_open_door() {
    let metrics = prometheus();
    let redis = Server::start(&["--save", ""]);
    let room = "mixed";
    let (http, layer) = gateway(room, &redis).await;
    let (status, _inside) = newcomer(&http).await;
    assert_eq!(status, StatusCode::OK, "the first visitor is let in");
    let (status, mut waiter) = newcomer(&http).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "the second waits");

    // A gateway of a newer version wrote the key (and its fast path's window, gone with it).
    redis
        .command(&["HSET", &settings_key(room), "v", "7"])
        .unwrap();
    redis
        .command(&["DEL", &format!("twr:{{{room}}}:fast")])
        .unwrap();
    for i in 0..20 {
        let (status, mut jar) = newcomer(&http).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "newcomer #{i}");
        let r = http.visit_json(&mut jar).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
        assert_eq!(r.json()["state"], "busy", "newcomer #{i}: {}", r.text());
        assert!(r.retry_after() > 0, "newcomer #{i}: told to come back");
    }
    let r = http.visit_json(&mut waiter).await;
    assert_eq!(r.json()["state"], "busy", "{}", r.text());

    let status = http
        .send(Method::GET, &format!("/admin/rooms/{room}"), &[])
        .await;
    assert_eq!(status.status, StatusCode::CONFLICT, "{}", status.text());
    let error = status.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains("version 7") && error.contains("cannot read"),
        "{error}"
    );
    let e = layer
        .stats()
        .await
        .expect_err("stats of a room it cannot read");
    assert!(e.is_version_mix(), "{e}");
    let text = metrics.render();
    let counted = text
        .lines()
        .find(|l| l.starts_with(VERSION_MIX_TOTAL) && l.contains(&format!("room=\"{room}\"")))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
    assert!(
        counted.is_some_and(|n| n >= 41.0),
        "every refused call counted: {counted:?}\n{text}"
    );

    // The newer version's changes are additive (it names this version as a reader): read.
    redis
        .command(&["HSET", &settings_key(room), "vmin", "6"])
        .unwrap();
    let r = http.visit_json(&mut waiter).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text());
    assert_eq!(r.json()["position"], 1, "the waiter kept their place");
    let stats = layer.stats().await.unwrap();
    assert_eq!(
        (stats.admitted + stats.granted, stats.waiting),
        (1, 1),
        "nobody was let in, nobody placed, meanwhile: {stats:?}"
    );
    assert_eq!(
        redis.command(&["HGET", &settings_key(room), "v"]).unwrap(),
        "7\r\n",
        "never lowered"
    );
}

/// What a `tracing` subscriber would print (this test's thread only).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A version mix is told once per room at `ERROR`, whatever the number of calls, and counted in
/// the store's own metrics every time.
#[tokio::test]
async fn a_version_mix_is_logged_once_per_room() {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    crate::common::tracing_asks_every_subscriber();
    let _guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();

    let redis = Server::start(&["--save", ""]);
    let store = store(&redis);
    for room in ["one", "two"] {
        let policy = RoomPolicy::new(room, 1);
        store.enter(&policy, SessionId::random()).await.unwrap();
        redis
            .command(&["HSET", &settings_key(room), "v", "9"])
            .unwrap();
        for _ in 0..10 {
            let e = store.enter(&policy, SessionId::random()).await.unwrap_err();
            assert!(e.is_version_mix(), "{e}");
        }
    }
    assert_eq!(store.metrics().version_mix, 20);
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let told: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains("cannot read"))
        .collect();
    assert_eq!(told.len(), 2, "once per room: {text}");
    assert!(
        told[0].contains("one") && told[1].contains("two") && told[0].contains("version 9"),
        "{told:?}"
    );
}

/// The scripts' one reader of stored numbers (`src/store/redis/script/stored.lua`), run in the
/// server: an integer only when written in digits (and a leading `-`), within its range; a
/// score only when it is a finite number in decimal. Every bad form reads as nothing (then
/// repaired by its caller).
#[tokio::test]
async fn the_reader_of_stored_numbers_reads_only_what_the_scripts_write() {
    let redis = redis_harness::shared_server();
    let mut c = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let probe = concat!(
        "#!lua\n",
        include_str!("../../src/store/redis/script/stored.lua"),
        "return {tostring(stored_integer(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))),\n",
        "  tostring(stored_score(ARGV[1]))}\n",
    );
    let read = |text: &str, min: i64, max: i64| {
        redis::cmd("EVAL")
            .arg(probe)
            .arg(0)
            .arg(text)
            .arg(min)
            .arg(max)
            .clone()
    };
    for form in BadNumber::ALL {
        let got: Vec<String> = read(form.text(), 0, 1 << 40)
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(got[0], "nil", "{:?} read as an integer", form.text());
        let score_ok = matches!(
            form,
            BadNumber::Fraction
                | BadNumber::Negative
                | BadNumber::TwentyDigits
                | BadNumber::LeadingZero
                | BadNumber::Padded
                | BadNumber::DoubleZero
                | BadNumber::NegativeZero
        );
        assert_eq!(
            got[1] != "nil",
            score_ok,
            "{:?} as a score: {got:?}",
            form.text()
        );
    }
    for (text, min, max, want) in [
        ("7", 1, 10, "7"),
        ("0", 0, 1, "0"),
        ("1", 0, 1, "1"),
        ("2", 0, 1, "nil"),
        ("0", 1, 10, "nil"),
        ("-5", -10, 0, "-5"),
        ("1767225600000", 0, 1 << 53, "1767225600000"),
        (" 7", 0, 10, "nil"),
        ("7 ", 0, 10, "nil"),
        ("+7", 0, 10, "nil"),
        ("7.0", 0, 10, "nil"),
        ("1e3", 0, 10_000, "nil"),
        ("12345678901234567", 0, 1 << 53, "nil"),
        // Redis's own integer grammar, which INCR and HINCRBY read: no leading zero, no -0.
        ("00000000000000000007", 0, 10, "nil"),
        ("01", 0, 10, "nil"),
        ("007", 0, 10, "nil"),
        ("00", 0, 10, "nil"),
        ("-0", -10, 10, "nil"),
        ("-01", -10, 10, "nil"),
        ("10", 0, 10, "10"),
        ("-10", -10, 10, "-10"),
    ] {
        let got: Vec<String> = read(text, min, max).query_async(&mut c).await.unwrap();
        assert_eq!(got[0], want, "{text:?} in [{min}, {max}]");
    }
}
