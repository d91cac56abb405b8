//! Rotating the edge keys while admitted visitors keep browsing, over real HTTP: gateways
//! (rooms on one store, served on loopback) are redeployed with each step of the rotation in
//! `docs/edge.md` (publish the next key; sign with it; retire the old one), and an edge that
//! caches the key set it fetches from a gateway for five minutes checks every visitor's
//! request: a valid token goes to the origin, anything else to the gateway, which refreshes
//! the admission (and its token). Done by the book, no admitted visitor is refused at the edge
//! but for a token past its lifetime; promoting the next key before the edges have it refuses
//! them (which shows the test can tell).
//!
//! The edge here verifies with the crate's own verifier, holding only the keys the fetched
//! key set names; `tests/operations/edge_node.rs` holds that `edge/verify.mjs` reaches the
//! same verdicts.

use crate::common::{serve, Http, Jar, PREFIX, SECRET};

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use http::{Method, StatusCode};
use tower_waiting_room::clock::Clock;
use tower_waiting_room::edge::{EdgeClaims, EdgeKey, EdgeKeySet, EdgeTokens};
use tower_waiting_room::store::MemoryStore;
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::WaitingRoomLayer;

const ROOM: &str = "rot";
const T0: u64 = 1_800_000_000_000;
/// How long the edge keeps a key set it fetched, as the served `max-age` says.
const EDGE_CACHE_SECS: u64 = 300;
/// A visitor's request every this many seconds.
const STEP_SECS: u64 = 5;
const VISITORS: usize = 12;

/// The key of `kid` (`k1`, `k2`): every gateway and the test make it from the same seed.
fn key(kid: &str) -> EdgeKey {
    let seed = match kid {
        "k1" => 1,
        "k2" => 2,
        other => panic!("no key {other}"),
    };
    EdgeKey::from_seed(kid, &[seed; 32]).unwrap()
}

/// A key set as a deploy gives it: `current`, and the others named.
fn set(current: &str, next: Option<&str>, previous: Option<&str>) -> EdgeKeySet {
    let mut set = EdgeKeySet::new(key(current));
    if let Some(next) = next {
        set = set.with_next(key(next));
    }
    if let Some(previous) = previous {
        set = set.with_previous(key(previous));
    }
    set
}

/// A gateway with `keys`, on the shared store and clock, served on loopback.
async fn gateway(keys: EdgeKeySet, clock: &ManualClock, store: &MemoryStore) -> Http {
    let layer = WaitingRoomLayer::builder(ROOM)
        .capacity(50)
        .secret(SECRET)
        .secure_cookies(false)
        .refresh(Duration::from_secs(15))
        .active_ttl(Duration::from_secs(900))
        .clock(clock.clone())
        .store(store.clone())
        .edge_tokens(EdgeTokens::new(keys))
        .build()
        .expect("a valid room");
    serve(
        Router::new()
            .route("/shop/{*rest}", get(|| async { "shop" }))
            .layer(layer),
    )
    .await
}

/// The edge: the key ids of the set it fetched, and when.
struct Edge {
    kids: Vec<String>,
    fetched_at: u64,
}

impl Edge {
    async fn fetch(gateway: &Http, now: u64) -> Self {
        let reply = gateway
            .send(Method::GET, &format!("{PREFIX}/{ROOM}/keys"), &[])
            .await;
        assert_eq!(reply.status, StatusCode::OK);
        let kids = reply.json()["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect();
        Self {
            kids,
            fetched_at: now,
        }
    }

    /// The claims of `token` as this edge can check it: with the keys of its set only.
    fn check(&self, token: &str, now: u64) -> Option<EdgeClaims> {
        let mut kids = self.kids.iter();
        let mut keys = EdgeKeySet::new(key(kids.next()?));
        for (i, kid) in kids.enumerate() {
            keys = if i == 0 {
                keys.with_next(key(kid))
            } else {
                keys.with_previous(key(kid))
            };
        }
        EdgeClaims::verify(&keys, ROOM, token, now)
    }
}

/// What the edge did with the visitors' requests.
#[derive(Debug, Default)]
struct Seen {
    to_origin: usize,
    expired: usize,
    refused_valid: Vec<String>,
}

/// A run: the deploys at the given seconds (each the key set from then on), visitors browsing
/// every `STEP_SECS` until `end`, an edge refetching its key set when its copy is older than
/// `EDGE_CACHE_SECS`.
async fn run(deploys: Vec<(u64, EdgeKeySet)>, end: u64) -> Seen {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::with_clock(clock.clone());
    let now = || clock.now_ms() / 1000;
    let mut deploys = deploys.into_iter().peekable();
    let (_, first) = deploys.next().unwrap();
    let mut gw = gateway(first, &clock, &store).await;
    let mut edge = Edge::fetch(&gw, now()).await;
    let mut jars: Vec<Jar> = Vec::new();
    for _ in 0..VISITORS {
        let mut jar = Jar::new();
        let first = gw.visit(&mut jar, Method::GET, "/shop/a").await;
        assert_eq!(first.status, StatusCode::FOUND);
        let admitted = gw.visit(&mut jar, Method::GET, "/shop/a").await;
        assert_eq!(admitted.status, StatusCode::OK);
        jars.push(jar);
    }
    let all = set("k1", Some("k2"), None);
    let mut seen = Seen::default();
    let start = now();
    while now() - start < end {
        clock.advance(Duration::from_secs(STEP_SECS));
        let t = now() - start;
        if deploys.peek().is_some_and(|(at, _)| *at <= t) {
            let (_, keys) = deploys.next().unwrap();
            gw = gateway(keys, &clock, &store).await;
        }
        if now() - edge.fetched_at >= EDGE_CACHE_SECS {
            edge = Edge::fetch(&gw, now()).await;
        }
        for jar in &mut jars {
            let token = jar.get(&format!("wr_{ROOM}_e")).unwrap().to_owned();
            if edge.check(&token, now()).is_some() {
                seen.to_origin += 1;
                continue;
            }
            // Refused at the edge: only a token past its lifetime may be (one any key of the
            // rotation would still take is a visitor turned away for the rotation itself).
            if EdgeClaims::verify(&all, ROOM, &token, now()).is_some() {
                seen.refused_valid.push(format!("at {t} s: {token}"));
            } else {
                seen.expired += 1;
            }
            let through = gw.visit(jar, Method::GET, "/shop/b").await;
            assert_eq!(through.status, StatusCode::OK, "at {t} s");
        }
    }
    seen
}

#[tokio::test]
async fn a_rotation_by_the_book_refuses_no_admitted_visitor_at_the_edge() {
    // Publish k2 at 60 s; sign with it once every edge has it (300 s later, its cache's
    // lifetime); retire k1 once its tokens are past (60 s and the 10 s skew).
    let seen = run(
        vec![
            (0, set("k1", None, None)),
            (60, set("k1", Some("k2"), None)),
            (400, set("k2", None, Some("k1"))),
            (480, set("k2", None, None)),
        ],
        600,
    )
    .await;
    assert!(seen.refused_valid.is_empty(), "{:#?}", seen.refused_valid);
    assert!(seen.to_origin > 10 * VISITORS, "{seen:?}");
    assert!(
        seen.expired > 0,
        "tokens ran out and were refreshed: {seen:?}"
    );
}

#[tokio::test]
async fn promoting_a_key_the_edges_do_not_have_yet_refuses_visitors() {
    // Straight to signing with k2: the edge's set (fetched at the start) lacks it until it
    // refetches, and turns the visitors with k2's tokens away meanwhile.
    let seen = run(
        vec![
            (0, set("k1", None, None)),
            (60, set("k2", None, Some("k1"))),
        ],
        200,
    )
    .await;
    assert!(!seen.refused_valid.is_empty(), "{seen:?}");
}
