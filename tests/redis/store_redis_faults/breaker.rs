//! The circuit breaker and the error model by Redis error code: a dropped half-open probe, a
//! probe answered out of memory closing the breaker, what opens it (a read-only replica, a user
//! without scripting) and what never does (a long script elsewhere), a server loading its data,
//! and a waiter keeping their turn through an outage.

use super::{app, get_with, join, quick_store};
use crate::redis_harness;

use std::time::{Duration, Instant};

use http::StatusCode;
use redis_harness::Server;
use tower_waiting_room::store::{Decision, RedisStore, Store, StoreErrorKind};
use tower_waiting_room::{AdmittedBy, FailPolicy, RoomPolicy, SessionId};

// ===== the breaker's probe, and an error model by code =====

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
