//! The store on bad days: cookie-less floods that never reach Redis, out of memory, an outage with
//! a restart under both fail policies, a flushed script cache and function library, a hung server,
//! and a million waiters.

use super::{app, function_loaded, get_with, join, store, wait_until_store_answers};
use crate::common;
use crate::redis_harness;

use std::time::{Duration, Instant};

use common::Jar;
use http::StatusCode;
use redis_harness::Server;
use tower_waiting_room::store::{Decision, Store, StoreErrorKind};
use tower_waiting_room::{AdmittedBy, FailPolicy, RoomPolicy, SessionId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookie_less_flood_never_reaches_redis() {
    let server = Server::start(&[]);
    let store = store(&server);
    let app = app("flood", store.clone(), FailPolicy::Closed);
    let before = server.dbsize();
    for _ in 0..5_000 {
        let r = get_with(&app, &Jar::new()).await;
        assert_eq!(r.status, StatusCode::FOUND);
    }
    assert_eq!(server.dbsize(), before, "no key was written");
    assert_eq!(store.metrics().attempts, 0, "no store call was made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_memory_is_busy_and_never_lets_anyone_in() {
    let server = Server::start(&["--maxmemory-policy", "noeviction"]);
    let store = store(&server);
    let open = app("oom", store.clone(), FailPolicy::Open);

    // One visitor gets in while memory is fine.
    let mut jar = join(&open).await;
    let inside = get_with(&open, &jar).await;
    assert_eq!(inside.status, StatusCode::OK);
    assert!(!inside.set_cookies().is_empty(), "no admission token");
    jar.absorb(&inside);

    // Memory is now exhausted: every write is refused with OOM.
    server
        .command(&["CONFIG", "SET", "maxmemory", "1"])
        .unwrap();
    let policy = RoomPolicy::new("oom", 1);
    let err = store
        .enter(&policy, SessionId::random())
        .await
        .expect_err("a full Redis refuses writes");
    assert_eq!(err.kind(), StoreErrorKind::Busy);

    // Fail-open does not mean "let everyone in" when Redis is merely full.
    let newcomer = join(&open).await;
    let r = get_with(&open, &newcomer).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.text().contains("\"state\":\"busy\""), "{}", r.text());
    assert!(!store.metrics().breaker_open, "OOM is not an outage");

    // The visitor already inside keeps going on the fast path.
    let r = get_with(&open, &jar).await;
    assert_eq!(r.status, StatusCode::OK);

    server
        .command(&["CONFIG", "SET", "maxmemory", "0"])
        .unwrap();
    let r = get_with(&open, &newcomer).await;
    assert_eq!(
        r.status,
        StatusCode::TOO_MANY_REQUESTS,
        "with memory back the newcomer queues behind the visitor inside"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_fail_policies_breaker_and_recovery_with_queue_order_kept() {
    let mut server = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let store = store(&server);
    let room = "outage";
    let open = app(room, store.clone(), FailPolicy::Open);
    let closed = app(room, store.clone(), FailPolicy::Closed);
    let policy = RoomPolicy::new(room, 1);

    // A is inside, B and C wait in that order.
    let mut a = join(&open).await;
    let a_in = get_with(&open, &a).await;
    assert_eq!(a_in.status, StatusCode::OK);
    assert!(!a_in.set_cookies().is_empty(), "no admission token");
    a.absorb(&a_in);
    let b = join(&open).await;
    let c = join(&open).await;
    assert!(get_with(&open, &b).await.text().contains("\"position\":1"));
    assert!(get_with(&open, &c).await.text().contains("\"position\":2"));

    server.stop();

    // Fail-closed: a waiting visitor is told to try again; fail-open lets them in.
    let r = get_with(&closed, &c).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        r.text().contains("\"state\":\"unavailable\""),
        "{}",
        r.text()
    );
    let r = get_with(&open, &c).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.handler_saw()["by"], format!("{:?}", AdmittedBy::FailOpen));
    assert!(
        r.set_cookies().is_empty(),
        "no admission token without a slot"
    );

    // The token holder keeps access under both policies.
    assert_eq!(get_with(&open, &a).await.status, StatusCode::OK);
    assert_eq!(get_with(&closed, &a).await.status, StatusCode::OK);

    // The breaker: a burst during the outage costs at most a probe, not a call each.
    let before = store.metrics();
    assert!(before.breaker_open);
    for _ in 0..50 {
        let e = store.poll(&policy, SessionId::random()).await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Unavailable);
    }
    let after = store.metrics();
    assert!(
        after.attempts - before.attempts <= 2,
        "breaker let {} calls through",
        after.attempts - before.attempts
    );
    assert!(after.skipped - before.skipped >= 48);

    // Redis comes back with its AOF: the store recovers by itself (script reloaded) and the
    // queue order survived.
    server.restart();
    wait_until_store_answers(&store, &policy).await;
    assert!(!store.metrics().breaker_open);
    let r = get_with(&closed, &b).await;
    assert!(r.text().contains("\"position\":1"), "{}", r.text());
    let r = get_with(&closed, &c).await;
    assert!(r.text().contains("\"position\":2"), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushed_script_cache_is_reloaded() {
    let server = Server::start(&[]);
    let store = store(&server);
    let policy = RoomPolicy::new("noscript", 1);
    let a = SessionId::random();
    assert!(matches!(
        store.enter(&policy, a).await.unwrap(),
        Decision::Admitted { .. }
    ));
    server.command(&["SCRIPT", "FLUSH"]).unwrap();
    let b = SessionId::random();
    assert!(matches!(
        store.enter(&policy, b).await.unwrap(),
        Decision::Waiting {
            position: 1,
            waiting: 1,
            ..
        }
    ));
}

/// The room runs as functions (`FCALL twr_room_v11_enter`, ...): a server that lost it (`FUNCTION FLUSH`,
/// a restart without persistence of it, a failover to a replica that missed it) gets the
/// library loaded again and the call retried, with nothing lost but the function.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushed_function_library_is_reloaded() {
    let server = Server::start(&[]);
    let store = store(&server);
    let policy = RoomPolicy::new("nofunction", 1);
    let a = SessionId::random();
    assert!(matches!(
        store.enter(&policy, a).await.unwrap(),
        Decision::Admitted { .. }
    ));
    assert!(function_loaded(&server), "loaded by the first call");
    server.command(&["FUNCTION", "FLUSH"]).unwrap();
    assert!(!function_loaded(&server), "flushed");
    let b = SessionId::random();
    assert!(matches!(
        store.enter(&policy, b).await.unwrap(),
        Decision::Waiting {
            position: 1,
            waiting: 1,
            ..
        }
    ));
    assert!(function_loaded(&server), "reloaded");
    let m = store.metrics();
    assert_eq!((m.misconfigured, m.protocol_errors), (0, 0), "{m:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_costs_one_deadline_then_the_breaker_answers() {
    let server = Server::start(&[]);
    let store = store(&server);
    let policy = RoomPolicy::new("hung", 1);
    store.stats(&policy).await.unwrap();
    server.command(&["CLIENT", "PAUSE", "1500", "ALL"]).unwrap();
    let e = store.enter(&policy, SessionId::random()).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Timeout);
    let e = store.enter(&policy, SessionId::random()).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "breaker open");
    wait_until_store_answers(&store, &policy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_waiters_do_not_make_a_call_slow() {
    let server = Server::start(&[]);
    let store = store(&server);
    let room = "million";
    let policy = RoomPolicy::new(room, 1).with_max_queue_len(2_000_000);
    let keys = tower_waiting_room::__private::redis_keys(&store, room);
    // Fill the line directly: one million waiters, each member the id's 16 raw bytes (the id
    // of i is the big-endian u128 i), and a holder of 16 bytes too: a room of whole ids, as a
    // library before members of 14 bytes made it. Store v2 keeps no per-waiter check-in to
    // fill.
    let fill = r"
        local now = tonumber(ARGV[1])
        for i = 1, 1000000 do
          redis.call('ZADD', KEYS[1], i, struct.pack('>I4I4I4I4', 0, 0, 0, i))
        end
        redis.call('SET', KEYS[2], 1000000)
        redis.call('ZADD', KEYS[3], now + 3600000, 'someone-inside-1')
        return 1";
    let now = tower_waiting_room::clock::Clock::now_ms(&tower_waiting_room::clock::SystemClock);
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await
        .unwrap();
    let memory_before = server.used_memory();
    let _: i64 = redis::Script::new(fill)
        .key(&keys[1])
        .key(&keys[0])
        .key(&keys[2])
        .arg(now)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(store.stats(&policy).await.unwrap().waiting, 1_000_000);
    let per_waiter = (server.used_memory() - memory_before) / 1_000_000;
    println!("memory per waiter: {per_waiter} bytes");
    assert!(per_waiter < 1_024, "a waiter costs {per_waiter} bytes");

    let last = SessionId::from_hex(&format!("{:032x}", 1_000_000)).unwrap();
    let newcomer = SessionId::random();
    let started = Instant::now();
    let polled = store.poll(&policy, last).await.unwrap();
    let entered = store.enter(&policy, newcomer).await.unwrap();
    let took = started.elapsed();
    assert!(
        matches!(
            polled,
            Decision::Waiting {
                position: 1_000_000,
                waiting: 1_000_000,
                ..
            }
        ),
        "{polled:?}"
    );
    assert!(
        matches!(
            entered,
            Decision::Waiting {
                position: 1_000_001,
                waiting: 1_000_001,
                ..
            }
        ),
        "{entered:?}"
    );
    // A generous bound, checked once: the real numbers are in the benchmark.
    assert!(took < Duration::from_millis(250), "two calls took {took:?}");
}
