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
use tower_waiting_room::store::{Decision, RedisCheckError, RedisStore, Store, StoreErrorKind};
use tower_waiting_room::{AdmittedBy, FailPolicy, RoomPolicy, SessionId, WaitingRoomLayer};

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

/// The room runs as functions (`FCALL twr_room_v10_enter`, ...): a server that lost it (`FUNCTION FLUSH`,
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
    // of i is the big-endian u128 i). Store v2 keeps no per-waiter check-in to fill.
    let fill = r"
        local now = tonumber(ARGV[1])
        for i = 1, 1000000 do
          redis.call('ZADD', KEYS[1], i, struct.pack('>I4I4I4I4', 0, 0, 0, i))
        end
        redis.call('SET', KEYS[2], 1000000)
        redis.call('ZADD', KEYS[3], now + 3600000, 'someone-inside')
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

// ===== the breaker's probe, and an error model by code =====

/// A store with a short cooldown, for the breaker tests.
fn quick_store(url: &str) -> RedisStore {
    RedisStore::builder()
        .url(url)
        .timeout(Duration::from_millis(300))
        .breaker_cooldown(Duration::from_millis(300))
        .build()
        .expect("store builds")
}

/// The server's process id (ask before stopping it: a stopped server answers nothing).
fn pid(server: &Server) -> String {
    server
        .info_field("server", "process_id")
        .expect("INFO server has process_id")
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid`: a stopped server keeps its connections
/// open and answers nothing, like a hung host.
fn signal(pid: &str, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid)
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} failed");
}

/// Opens the breaker with one timeout (the server is stopped), then waits out the cooldown:
/// the next call is the half-open probe. The server is left stopped; its pid is returned.
async fn half_open_on_a_stopped_server(
    server: &Server,
    store: &RedisStore,
    policy: &RoomPolicy,
) -> String {
    store.stats(policy).await.expect("connected");
    let pid = pid(server);
    signal(&pid, "STOP");
    let e = store.stats(policy).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Timeout);
    assert!(store.metrics().breaker_open);
    tokio::time::sleep(Duration::from_millis(400)).await;
    pid
}

/// Calls `stats` until it succeeds, for at most `within`.
async fn answers_within(store: &RedisStore, policy: &RoomPolicy, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if store.stats(policy).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_probe_does_not_leave_the_breaker_half_open_forever() {
    let server = Server::start(&[]);
    let store = quick_store(&server.url());
    let policy = RoomPolicy::new("dropped-probe", 1);
    let pid = half_open_on_a_stopped_server(&server, &store, &policy).await;

    // The probe goes out and its caller gives up first (a visitor left, an outer timeout):
    // its future is dropped mid-call.
    let attempts = store.metrics().attempts;
    let gave_up = tokio::time::timeout(Duration::from_millis(50), store.stats(&policy)).await;
    assert!(
        gave_up.is_err(),
        "the probe was still waiting on the stopped server"
    );
    assert_eq!(store.metrics().attempts, attempts + 1, "it was the probe");

    signal(&pid, "CONT");
    // The next call becomes the probe, and the server's answer closes the breaker.
    assert!(
        answers_within(&store, &policy, Duration::from_secs(3)).await,
        "the store never recovered: {:?}",
        store.metrics()
    );
    assert!(!store.metrics().breaker_open);
}

/// A waiter who kept polling while Redis was away has failed check-ins, not silence: after an
/// outage longer than `queue_ttl`, their turn is still theirs (the first calls after it must not
/// skip every head of the line). Found by the chaos run (a waiter polling through a failover and
/// a kill lost their place).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_polling_through_an_outage_keeps_their_turn() {
    let mut server = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let store = quick_store(&server.url());
    let minute = Duration::from_secs(60);
    let policy = RoomPolicy::new("outage-silence", 1).with_ttls(
        minute,
        minute,
        Duration::from_millis(1_500),
    );
    let (a, b) = (SessionId::random(), SessionId::random());
    assert!(matches!(
        store.enter(&policy, a).await.unwrap(),
        Decision::Admitted { .. }
    ));
    assert!(matches!(
        store.enter(&policy, b).await.unwrap(),
        Decision::Waiting { position: 1, .. }
    ));

    // Redis is down for longer than queue_ttl (then restarts from its AOF); the waiter keeps
    // polling, and every poll fails. (A paused Redis would run the timed-out polls when it
    // resumes, checking the waiter in: a crash or a failover loses them.)
    server.stop();
    let down = Instant::now();
    while down.elapsed() < Duration::from_millis(2_500) {
        assert!(store.poll(&policy, b).await.is_err(), "Redis is down");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.restart();
    assert!(answers_within(&store, &policy, Duration::from_secs(5)).await);

    // The slot frees: the head of the line, silent only because Redis was away, gets it.
    assert!(store.release(&policy, a).await.unwrap());
    assert!(
        matches!(
            store.poll(&policy, b).await.unwrap(),
            Decision::Admitted { .. }
        ),
        "the waiter who polled through the outage lost their turn"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_answered_out_of_memory_closes_the_breaker() {
    let server = Server::start(&["--maxmemory-policy", "noeviction"]);
    let store = quick_store(&server.url());
    let policy = RoomPolicy::new("oom-probe", 1);
    let pid = half_open_on_a_stopped_server(&server, &store, &policy).await;
    signal(&pid, "CONT");
    server
        .command(&["CONFIG", "SET", "maxmemory", "1"])
        .unwrap();

    // The probe reaches a full Redis: it answered, so it is reachable.
    let e = store.enter(&policy, SessionId::random()).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Busy);
    assert!(
        !store.metrics().breaker_open,
        "OOM is an answer: the breaker closes"
    );
    let attempts = store.metrics().attempts;
    let e = store.enter(&policy, SessionId::random()).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Busy, "sent, not skipped");
    assert_eq!(store.metrics().attempts, attempts + 1);

    server
        .command(&["CONFIG", "SET", "maxmemory", "0"])
        .unwrap();
    assert!(matches!(
        store.enter(&policy, SessionId::random()).await.unwrap(),
        Decision::Admitted { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_replica_is_unavailable_and_opens_the_breaker() {
    // A store pointed at a replica gets what a store gets from a primary demoted by a
    // failover: READONLY on every write.
    let primary = Server::start(&[]);
    let port = primary.port.to_string();
    let replica = Server::start(&["--replicaof", "127.0.0.1", &port]);
    replica.wait_synced();
    let store = quick_store(&replica.url());
    let policy = RoomPolicy::new("readonly", 1);

    let e = store.enter(&policy, SessionId::random()).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    assert!(
        store.metrics().breaker_open,
        "each request must not wait on a replica"
    );
    let e = store.enter(&policy, SessionId::random()).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable);
    assert_eq!(store.metrics().skipped, 1, "skipped by the breaker");

    // The layer follows the fail policy: open lets the newcomer in, closed says "try again".
    let open = app("readonly", store.clone(), FailPolicy::Open);
    let closed = app("readonly", store.clone(), FailPolicy::Closed);
    let visitor = join(&open).await;
    let r = get_with(&open, &visitor).await;
    assert_eq!(r.handler_saw()["by"], format!("{:?}", AdmittedBy::FailOpen));
    let r = get_with(&closed, &visitor).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        r.text().contains("\"state\":\"unavailable\""),
        "{}",
        r.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_scripting_is_misconfigured_and_opens_the_breaker() {
    let server = Server::start(&[]);
    let created = server
        .command(&[
            "ACL",
            "SETUSER",
            "noscript",
            "on",
            ">s3cret-pw",
            "~*",
            "+@all",
            "-@scripting",
        ])
        .unwrap();
    assert!(created.starts_with("+OK"), "{created}");
    let url = format!("redis://noscript:s3cret-pw@127.0.0.1:{}/", server.port);
    let store = quick_store(&url);
    let policy = RoomPolicy::new("noperm", 1);

    let e = store.enter(&policy, SessionId::random()).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Misconfigured, "{e}");
    assert!(!e.to_string().contains("s3cret-pw"), "{e}");
    let m = store.metrics();
    assert_eq!((m.misconfigured, m.transport_failures), (1, 0));
    assert!(
        m.breaker_open,
        "a refusing store is not asked on every request"
    );
    let e = store.enter(&policy, SessionId::random()).await.unwrap_err();
    assert_eq!(
        e.kind(),
        StoreErrorKind::Misconfigured,
        "skipped, same kind"
    );
    assert_eq!(store.metrics().skipped, 1);
    assert!(!format!("{store:?}").contains("s3cret-pw"));

    // The layer follows the fail policy, as for an outage.
    let open = app("noperm", store.clone(), FailPolicy::Open);
    let visitor = join(&open).await;
    let r = get_with(&open, &visitor).await;
    assert_eq!(r.handler_saw()["by"], format!("{:?}", AdmittedBy::FailOpen));

    // Wrong credentials are a misconfiguration too, not an outage.
    let wrong = quick_store(&format!(
        "redis://noscript:wrong-pw@127.0.0.1:{}/",
        server.port
    ));
    let e = wrong.enter(&policy, SessionId::random()).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Misconfigured, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_script_elsewhere_is_busy_and_never_opens_the_breaker() {
    let server = Server::start(&["--busy-reply-threshold", "100"]);
    let store = quick_store(&server.url());
    let policy = RoomPolicy::new("script-busy", 1);
    store.stats(&policy).await.expect("connected");

    // Another client runs a script that never ends (its reply never comes).
    let mut hog = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    std::io::Write::write_all(
        &mut hog,
        b"*3\r\n$4\r\nEVAL\r\n$17\r\nwhile true do end\r\n$1\r\n0\r\n",
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let e = store.enter(&policy, SessionId::random()).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Busy, "{e}");
    let m = store.metrics();
    assert_eq!(m.script_busy, 1);
    assert!(!m.breaker_open, "BUSY is a quick answer, not an outage");

    // Fail-open does not let anyone in while Redis is busy.
    let open = app("script-busy", store.clone(), FailPolicy::Open);
    let newcomer = join(&open).await;
    let r = get_with(&open, &newcomer).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.text().contains("\"state\":\"busy\""), "{}", r.text());

    let killed = server.command(&["SCRIPT", "KILL"]).unwrap();
    assert!(killed.starts_with("+OK"), "{killed}");
    assert!(answers_within(&store, &policy, Duration::from_secs(3)).await);
    assert!(matches!(
        store.enter(&policy, SessionId::random()).await.unwrap(),
        Decision::Admitted { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_loading_its_data_is_unavailable() {
    // `key-load-delay` (microseconds per key) makes loading 20 000 keys take about 2 s.
    let mut server = Server::start(&[
        "--key-load-delay",
        "100",
        "--enable-debug-command",
        "local",
        // Answer clients often while loading (the default is every 2 MB read).
        "--loading-process-events-interval-bytes",
        "1024",
    ]);
    let populated = server.command(&["DEBUG", "POPULATE", "20000"]).unwrap();
    assert!(populated.starts_with("+OK"), "{populated}");
    let saved = server.command(&["SAVE"]).unwrap();
    assert!(saved.starts_with("+OK"), "{saved}");
    let store = quick_store(&server.url());
    let policy = RoomPolicy::new("loading", 1);
    store.stats(&policy).await.expect("connected");

    // Restart (the harness waits until loading is over) while the store is called.
    let port = server.port;
    let restart = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = None;
    while Instant::now() < deadline && !restart.is_finished() {
        // Every call waits for the breaker, so each one reaches the server.
        tokio::time::sleep(Duration::from_millis(350)).await;
        if let Err(e) = store.stats(&policy).await {
            if store.metrics().failover_errors > 0 {
                seen = Some(e);
                break;
            }
        }
    }
    let e =
        seen.unwrap_or_else(|| panic!("never saw LOADING on port {port}: {:?}", store.metrics()));
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    assert!(store.metrics().breaker_open);
    let _server = restart.await.unwrap();
    assert!(answers_within(&store, &policy, Duration::from_secs(5)).await);
}

// ===== the start-up check =====

/// The functions of the room's library on `server` (`FUNCTION LIST LIBRARYNAME`): none if it
/// has not got the library.
pub(crate) fn room_functions(server: &Server) -> Vec<String> {
    fn names(v: &redis::Value, out: &mut Vec<String>) {
        match v {
            redis::Value::BulkString(b) => {
                let s = String::from_utf8_lossy(b);
                if s.starts_with("twr_room_v10_") {
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
        .arg("twr_room_v10")
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

/// Whether `server`'s room library holds the single-use tickets' functions.
fn ticket_functions_loaded(server: &Server) -> bool {
    let functions = room_functions(server);
    ["twr_room_v10_ticket_mint", "twr_room_v10_ticket_redeem"]
        .iter()
        .all(|f| functions.iter().any(|g| g == f))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_the_server_and_loads_the_library() {
    let server = Server::start(&["--maxmemory-policy", "volatile-lru"]);
    let store = quick_store(&server.url());
    let info = store.check().await.expect("a healthy server passes");
    let expected = if redis_harness::server_bin().contains("valkey") {
        "valkey"
    } else {
        "redis"
    };
    assert_eq!(info.server, expected, "{info}");
    assert!(info.version.is_some(), "{info}");
    assert!(!info.cluster && !info.replica, "{info}");
    // volatile-* evicts only keys with a TTL, and the room's keys have none.
    assert_eq!(info.maxmemory_policy.as_deref(), Some("volatile-lru"));
    assert_eq!(info.function_library, "twr_room_v10", "{info}");
    assert!(function_loaded(&server), "library not loaded");
    assert!(
        ticket_functions_loaded(&server),
        "the tickets' functions come with the library"
    );
    let functions = room_functions(&server);
    for f in [
        "twr_room_v10_auto_report",
        "twr_room_v10_auto_apply",
        "twr_room_v10_auto_switch",
    ] {
        assert!(
            functions.iter().any(|g| g == f),
            "the capacity controller's functions come with the library: {f}"
        );
    }
    assert!(
        info.to_string().contains("maxmemory-policy volatile-lru"),
        "{info}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_refuses_a_policy_that_evicts_the_line() {
    let server = Server::start(&["--maxmemory-policy", "allkeys-lru"]);
    let store = quick_store(&server.url());
    match store.check().await {
        Err(RedisCheckError::EvictingPolicy { policy, .. }) => assert_eq!(policy, "allkeys-lru"),
        other => panic!("{other:?}"),
    }
    let e = store.check().await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Misconfigured);
    assert!(e.to_string().contains("allkeys-lru"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_an_unknown_policy_when_info_and_config_are_refused() {
    let server = Server::start(&["--maxmemory-policy", "allkeys-lru"]);
    let created = server
        .command(&[
            "ACL", "SETUSER", "app", "on", ">app-pw", "~*", "+@all", "-info", "-config",
        ])
        .unwrap();
    assert!(created.starts_with("+OK"), "{created}");
    let store = quick_store(&format!("redis://app:app-pw@127.0.0.1:{}/", server.port));
    let info = store
        .check()
        .await
        .expect("a refused CONFIG is not a failure");
    assert_eq!(info.maxmemory_policy, None);
    assert_eq!(info.server, "unknown");
    assert!(
        info.to_string().contains("maxmemory-policy unknown"),
        "{info}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_on_a_replica_an_acl_without_scripting_and_a_dead_server() {
    let primary = Server::start(&[]);
    let port = primary.port.to_string();
    let replica = Server::start(&["--replicaof", "127.0.0.1", &port]);
    let e = quick_store(&replica.url()).check().await.unwrap_err();
    assert!(matches!(e, RedisCheckError::Replica { .. }), "{e:?}");

    primary
        .command(&[
            "ACL",
            "SETUSER",
            "noscript",
            "on",
            ">pw",
            "~*",
            "+@all",
            "-@scripting",
        ])
        .unwrap();
    let url = format!("redis://noscript:pw@127.0.0.1:{}/", primary.port);
    let e = quick_store(&url).check().await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Misconfigured, "{e}");
    assert!(matches!(e, RedisCheckError::Store(_)), "{e:?}");

    let nobody = format!("redis://127.0.0.1:{}/", redis_harness::free_port());
    let e = quick_store(&nobody).check().await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_on_a_cluster_loads_the_library_on_every_node() {
    let cluster = redis_harness::Cluster::start();
    let store = RedisStore::builder()
        .cluster_nodes(cluster.urls())
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let info = store.check().await.expect("a healthy cluster passes");
    assert!(info.cluster && !info.replica, "{info}");
    assert_eq!(info.maxmemory_policy.as_deref(), Some("noeviction"));
    for node in &cluster.nodes {
        // Every primary: redis-rs routes FUNCTION LOAD to all of them.
        assert!(function_loaded(node), "library not loaded on {}", node.port);
        assert!(
            ticket_functions_loaded(node),
            "no ticket functions on {}",
            node.port
        );
    }
}

/// A malformed schedule argument (the script's last, `schedule:...`) is refused with an error,
/// never read as "no schedule", which would open a room that has not opened yet; and it writes
/// nothing. A well-formed one for the same call registers the visitor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_schedule_argument_is_refused_not_read_as_open() {
    let server = Server::start(&[]);
    let store = store(&server);
    let room = "malformed-schedule";
    let keys = tower_waiting_room::__private::redis_keys(&store, room);
    let policy = RoomPolicy::new(room, 5);
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let loaded: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(tower_waiting_room::__private::ROOM_LIBRARY)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(loaded, "twr_room_v10");
    let now = tower_waiting_room::clock::Clock::now_ms(&tower_waiting_room::clock::SystemClock);
    let opens = now + 3_600_000;
    let call = |last: String| {
        let session = SessionId::random();
        let (function, args) = tower_waiting_room::__private::room_visitor_call(
            "enter",
            &policy,
            session.as_bytes(),
            Some(last),
        )
        .unwrap();
        let mut fcall = redis::cmd("FCALL");
        fcall.arg(function).arg(keys.len()).arg(&keys[..]);
        for a in args {
            fcall.arg(a);
        }
        fcall
    };
    for bad in [
        format!("schedule:{opens}:0:1"),
        format!("schedule:{opens}:0:2:17"),
        format!("schedule:x{opens}:0:1:17"),
        "schedule:".to_owned(),
    ] {
        let got: redis::RedisResult<Vec<i64>> = call(bad.clone()).query_async(&mut conn).await;
        let err = got.expect_err(&format!("{bad:?} must be refused"));
        assert!(
            err.to_string().contains("malformed schedule"),
            "{bad:?}: {err}"
        );
    }
    let keys_now: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(keys_now.is_empty(), "a refused call wrote {keys_now:?}");
    let ok: Vec<i64> = call(format!("schedule:{opens}:0:1:17"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        ok[..2],
        [11, opens as i64],
        "a well-formed schedule registers: {ok:?}"
    );
}
