//! The room's settings key damaged by hand, met over HTTP as a visitor and an operator meet it:
//! a room of capacity 1 in front of a real `redis-server`, under the default fail policy (open),
//! with the admin API beside it.
//!
//! A damaged number (`HSET twr:{room}:settings capacity inf`, `nan`, `2.5`, ...) is read as the
//! field's default, never as the number Lua's `tonumber` makes of it: nobody more is let in, and
//! the operator sees the repaired value.

use crate::common;
use crate::redis_harness;

use std::time::Duration;

use axum::Router;
use common::{app, serve, Jar, SECRET};
use http::{Method, StatusCode};
use redis_harness::Server;
use tower_waiting_room::admin::AdminService;
use tower_waiting_room::store::RedisStore;
use tower_waiting_room::testing::conformance::BadNumber;
use tower_waiting_room::WaitingRoomLayer;

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
            BadNumber::Fraction | BadNumber::Negative | BadNumber::TwentyDigits
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
        ("00000000000000000007", 0, 10, "7"),
    ] {
        let got: Vec<String> = read(text, min, max).query_async(&mut c).await.unwrap();
        assert_eq!(got[0], want, "{text:?} in [{min}, {max}]");
    }
}
