//! The Redis store on bad days, against real servers: out of memory, an outage with a restart,
//! a flushed script cache, cookie-less floods, and a million waiters.

use crate::common;
use crate::redis_harness;

use std::time::{Duration, Instant};

use axum::Router;
use common::{call, Jar, Reply, SECRET};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use redis_harness::Server;
use tower_waiting_room::store::{RedisStore, Store};
use tower_waiting_room::{FailPolicy, RoomPolicy, WaitingRoomLayer};

mod bad_days;
mod breaker;
mod library;

fn store(server: &Server) -> RedisStore {
    RedisStore::builder()
        .url(server.url())
        .timeout(Duration::from_millis(300))
        // Long enough that a slow machine cannot turn a burst into several probes.
        .breaker_cooldown(Duration::from_secs(1))
        .build()
        .expect("store builds")
}

fn app(room: &str, store: RedisStore, policy: FailPolicy) -> Router {
    let layer = WaitingRoomLayer::builder(room)
        .capacity(1)
        .secret(SECRET)
        .secure_cookies(false)
        .fail_policy(policy)
        .store(store)
        .build()
        .unwrap();
    common::app(layer)
}

/// `GET /` in process, asking for JSON, with the jar's cookies (the answer's are not kept).
async fn get_with(app: &Router, jar: &Jar) -> Reply {
    let mut headers = vec![(header::ACCEPT, HeaderValue::from_static("application/json"))];
    headers.extend(jar.header().map(|c| (header::COOKIE, c)));
    call(app, Method::GET, "/", &headers).await
}

/// A visitor's cookie jar after the stateless redirect.
async fn join(app: &Router) -> Jar {
    let first = get_with(app, &Jar::new()).await;
    assert_eq!(first.status, StatusCode::FOUND);
    assert!(
        !first.set_cookies().is_empty(),
        "no queue cookie: {first:?}"
    );
    let mut jar = Jar::new();
    jar.absorb(&first);
    jar
}

async fn wait_until_store_answers(store: &RedisStore, policy: &RoomPolicy) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if store.stats(policy).await.is_ok() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the store did not recover by itself"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A store with a short cooldown, for the breaker tests.
fn quick_store(url: &str) -> RedisStore {
    RedisStore::builder()
        .url(url)
        .timeout(Duration::from_millis(300))
        .breaker_cooldown(Duration::from_millis(300))
        .build()
        .expect("store builds")
}

/// The functions of the room's library on `server` (`FUNCTION LIST LIBRARYNAME`): none if it
/// has not got the library.
pub(crate) fn room_functions(server: &Server) -> Vec<String> {
    fn names(v: &redis::Value, out: &mut Vec<String>) {
        match v {
            redis::Value::BulkString(b) => {
                let s = String::from_utf8_lossy(b);
                if s.starts_with("twr_room_v11_") {
                    out.push(s.into_owned());
                }
            }
            redis::Value::Array(vs) => vs.iter().for_each(|v| names(v, out)),
            _ => {}
        }
    }
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let libraries: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg("twr_room_v11")
        .query(&mut c)
        .unwrap();
    let mut out = Vec::new();
    names(&libraries, &mut out);
    out
}

/// Whether `server` has the room's function library.
fn function_loaded(server: &Server) -> bool {
    !room_functions(server).is_empty()
}
