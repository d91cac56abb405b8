//! One capacity for a fleet, end to end: two gateways (each a `WaitingRoomLayer` with
//! `auto_capacity` and a `RedisStore` of its own, serving real HTTP on loopback) in front of
//! one `redis-server`, their visitors' requests split between them. One of them decides, on
//! the requests of both; both read the one capacity it writes, and the other shows its
//! decision; terms an operator sets through one reach the other. Then the deciding gateway is
//! killed: the capacity it wrote stands, no waiter's
//! place moves back, and the other one takes over once the lease runs out.
//!
//! The room and the store share a manual clock (a window is one second of it); the app answers
//! in a few real milliseconds, and the reports and decisions (tasks of their own, over real
//! Redis) are given real time to land before the clock moves on.

use crate::common;
use crate::redis_harness;
use crate::redis_store_v2::store;

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use common::{Http, Jar, SECRET};
use http::{Method, StatusCode};
use redis_harness::Server;
use tokio::task::JoinHandle;
use tower_waiting_room::auto::{AutoCapacity, AutoStatus, Change};
use tower_waiting_room::store::{Decision, RedisStore, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{RoomPolicy, SessionId, WaitingRoomLayer};

const ROOM: &str = "fleet";
const T0: u64 = 1_800_000_000_000;
const WINDOW: Duration = Duration::from_secs(1);
/// Requests each live gateway passes to the app in a window.
const PER_WINDOW: usize = 20;

/// A gateway: the room on a store of its own, in front of an app answering in 2 ms, served on
/// loopback. The task serving it, to kill it.
struct Gateway {
    layer: WaitingRoomLayer,
    http: Http,
    server: JoinHandle<()>,
}

async fn gateway(redis: &Server, clock: &ManualClock) -> Gateway {
    let layer = WaitingRoomLayer::builder(ROOM)
        .capacity(4)
        .auto_capacity(AutoCapacity::new(2, 40, Duration::from_millis(300)).window(WINDOW))
        .secret(SECRET)
        .secure_cookies(false)
        .clock(clock.clone())
        .store(store(redis, clock))
        .build()
        .expect("a valid room");
    let app = Router::new()
        .route(
            "/",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(2)).await;
                "ok"
            }),
        )
        .layer(layer.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    Gateway {
        layer,
        http: Http::new(addr),
        server,
    }
}

impl Gateway {
    fn auto(&self) -> AutoStatus {
        self.layer
            .control()
            .auto()
            .expect("the room has a controller")
    }
}

/// Lets the reports and decisions in flight reach Redis.
async fn land() {
    tokio::time::sleep(Duration::from_millis(150)).await;
}

/// `n` requests of the visitors inside, in turn, through `gateway`; each is let through.
async fn requests(gateway: &Gateway, inside: &mut [Jar], n: usize) {
    for i in 0..n {
        let jar = &mut inside[i % inside.len()];
        let reply = gateway.http.visit(jar, Method::GET, "/").await;
        assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    }
}

/// One window: each live gateway's share of the requests, the clock past the window, and one
/// request through each (the deciding one last, so the window it is handed holds the other's
/// report too).
async fn window(clock: &ManualClock, live: &[&Gateway], inside: &mut [Jar]) {
    for g in live {
        requests(g, inside, PER_WINDOW).await;
    }
    land().await;
    clock.advance(WINDOW);
    let mut order: Vec<&&Gateway> = live.iter().collect();
    order.sort_by_key(|g| g.auto().deciding);
    for g in order {
        requests(g, inside, 1).await;
        land().await;
    }
}

async fn positions(store: &RedisStore, policy: &RoomPolicy, waiters: &[SessionId]) -> Vec<u64> {
    let mut out = Vec::new();
    for &w in waiters {
        match store.poll(policy, w).await.unwrap() {
            Decision::Waiting { position, .. } => out.push(position),
            other => panic!("a waiter of the cohort is no longer waiting: {other:?}"),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_take_one_decision_and_the_survivor_takes_over() {
    let redis = Server::start(&["--save", ""]);
    let clock = ManualClock::new(T0);
    let (a, b) = (gateway(&redis, &clock).await, gateway(&redis, &clock).await);
    let side = store(&redis, &clock);
    let policy = a.layer.config().policy().clone();

    // Four visitors let in (a first visit, then in), thirty in line behind them.
    let mut inside: Vec<Jar> = Vec::new();
    for _ in 0..4 {
        let mut jar = Jar::new();
        let first = a.http.visit(&mut jar, Method::GET, "/").await;
        assert_eq!(first.status, StatusCode::FOUND, "{first:?}");
        let again = a.http.visit(&mut jar, Method::GET, "/").await;
        assert_eq!(again.status, StatusCode::OK, "{again:?}");
        inside.push(jar);
    }
    let waiters: Vec<SessionId> = (0..30).map(|_| SessionId::random()).collect();
    for &w in &waiters {
        side.enter(&policy, w).await.unwrap();
    }

    // A window with both: one decides, on both gateways' requests (40 and more, where its own
    // are about 20), and grows the room by half, to six; the store holds it for both.
    window(&clock, &[&a, &b], &mut inside).await;
    let (sa, sb) = (a.auto(), b.auto());
    assert!(
        sa.deciding != sb.deciding,
        "exactly one decides: {sa:?} {sb:?}"
    );
    let (decider, other) = if sa.deciding { (&a, &b) } else { (&b, &a) };
    let decided = decider.auto();
    assert_eq!(
        (decided.change, decided.capacity),
        (Some(Change::Grow), Some(6)),
        "{decided:?}"
    );
    assert!(decided.samples >= 2 * PER_WINDOW as u64, "{decided:?}");
    for g in [&a, &b] {
        assert_eq!(g.layer.control().settings().await.unwrap().capacity, 6);
    }
    // The other one shows the decision the store holds, once it has reported again (in the
    // next window, before the decider's next decision).
    window(&clock, &[&a, &b], &mut inside).await;
    let (mine, theirs) = (decider.auto(), other.auto());
    assert!(!theirs.deciding, "{theirs:?}");
    assert_eq!(
        (
            theirs.capacity,
            theirs.change,
            theirs.reason,
            theirs.samples
        ),
        (
            decided.capacity,
            decided.change,
            decided.reason,
            decided.samples
        ),
        "the other gateway shows the decider's decision"
    );
    assert_eq!(
        Some(side.stats(&policy).await.unwrap().capacity as u32),
        mine.capacity
    );

    // New terms through one gateway's handle reach the other at its next report.
    let terms = AutoCapacity::new(2, 12, Duration::from_millis(250)).window(WINDOW);
    assert!(other.layer.control().set_auto_terms(terms).await.unwrap());
    window(&clock, &[&a, &b], &mut inside).await;
    for g in [&a, &b] {
        assert_eq!(g.layer.control().auto_terms(), Some(terms));
        assert_eq!((g.auto().max, g.auto().target_ms), (12, 250));
    }
    let capacity = side.stats(&policy).await.unwrap().capacity;
    assert!(capacity <= 12, "{capacity}");

    // The decider dies. The capacity it wrote stands and no waiter moves back; the survivor
    // decides once the lease (two windows and a second) has run out.
    let before = positions(&side, &policy, &waiters[10..]).await;
    decider.server.abort();
    let survivor = other;
    let mut windows = 0;
    while !survivor.auto().deciding {
        assert_eq!(
            side.stats(&policy).await.unwrap().capacity,
            capacity,
            "nobody decides while the lease runs out"
        );
        window(&clock, &[survivor], &mut inside).await;
        windows += 1;
        assert!(windows <= 4, "no takeover after {windows} windows");
    }
    assert!(windows >= 2, "the lease outlived one window: {windows}");
    let after = positions(&side, &policy, &waiters[10..]).await;
    assert!(
        after.iter().zip(&before).all(|(now, then)| now <= then),
        "a waiter moved back: {before:?} -> {after:?}"
    );
    // And it goes on deciding: the next window is decided by it, written for everyone.
    window(&clock, &[survivor], &mut inside).await;
    let now = survivor.auto();
    assert!(now.deciding && now.capacity.is_some(), "{now:?}");
    assert_eq!(
        Some(side.stats(&policy).await.unwrap().capacity as u32),
        now.capacity
    );
}
