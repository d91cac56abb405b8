//! Waiting polls answered at the gateway: two gateways over loopback HTTP on one real Redis.
//! The queue cookie carries the place the store gave; waiting polls then cost no script call
//! (only each gateway's once-a-second refresh, and those near the head), and the positions
//! shown are within the bound of `store::snapshot` of the exact ones.

use crate::common;
use crate::redis_harness;

use common::{serve, Http, Jar, SECRET};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::store::snapshot::{EXACT_RANKS, NEAR_HEAD};
use tower_waiting_room::store::RedisStore;
use tower_waiting_room::WaitingRoomLayer;

const ROOM: &str = "snap";

async fn gateway(url: &str) -> Http {
    let store = RedisStore::builder()
        .url(url)
        .prefix("snaptest")
        .build()
        .expect("store builds");
    let layer = WaitingRoomLayer::builder(ROOM)
        .capacity(1)
        .max_queue_len(10_000)
        .secret(SECRET)
        .secure_cookies(false)
        // Every visitor of the test comes from one address.
        .new_visitor_limit(None)
        .store(store)
        .build()
        .unwrap();
    serve(common::app(layer)).await
}

async fn status(gw: &Http, jar: &mut Jar) -> serde_json::Value {
    let path = format!("/__waitingroom/{ROOM}/status");
    let reply = gw.visit(jar, Method::GET, &path).await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    reply.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_polls_are_answered_at_the_gateway_within_the_bound() {
    // A server of its own: the bound counts every `FCALL` the server answers, and another
    // test's calls on a shared server would count too.
    let own = redis_harness::Server::start(&[]);
    let server = &own;
    let gws = [gateway(&server.url()).await, gateway(&server.url()).await];
    let accept = [(header::ACCEPT, HeaderValue::from_static("application/json"))];

    // One visitor holds the only slot; 400 join the line through either gateway.
    let mut inside = Jar::new();
    gws[0].visit_json(&mut inside).await;
    assert_eq!(gws[0].visit_json(&mut inside).await.status, StatusCode::OK);
    let mut line = Vec::new();
    for i in 0..400 {
        let gw = &gws[i % 2];
        let mut jar = Jar::new();
        gw.visit_json(&mut jar).await;
        let unplaced = jar.get(&format!("wr_{ROOM}_q")).unwrap().to_owned();
        let reply = gw.visit_with(&mut jar, Method::GET, "/", &accept).await;
        assert_eq!(reply.json()["position"], i as u64 + 1);
        // The join's answer issues the queue cookie again, now carrying the place.
        let placed = jar.get(&format!("wr_{ROOM}_q")).unwrap();
        assert_ne!(placed, unplaced, "the cookie did not get its place");
        line.push(jar);
    }
    // Every seventh leaves: the line has gaps the snapshot must place people across.
    let mut kept = Vec::new();
    for (i, mut jar) in line.into_iter().enumerate() {
        if i % 7 == 3 {
            let path = format!("/__waitingroom/{ROOM}/leave");
            let r = gws[i % 2].visit(&mut jar, Method::POST, &path).await;
            assert_eq!(r.status, StatusCode::OK);
        } else {
            kept.push(jar);
        }
    }

    // Three rounds of polls over both gateways, status endpoint and pages alike.
    let before = server.command_calls("fcall");
    let started = std::time::Instant::now();
    let mut polls = 0u64;
    let mut worst = 0f64;
    for round in 0..3 {
        for (i, jar) in kept.iter_mut().enumerate() {
            let gw = &gws[(i + round) % 2];
            let body = if round == 1 {
                gw.visit_with(jar, Method::GET, "/", &accept).await.json()
            } else {
                status(gw, jar).await
            };
            polls += 1;
            assert_eq!(body["state"], "waiting", "{body}");
            let shown = body["position"].as_u64().unwrap();
            let exact = i as u64 + 1;
            if exact <= EXACT_RANKS {
                assert_eq!(shown, exact, "near the head a position is exact");
            } else {
                let error = shown.abs_diff(exact) as f64 / exact as f64;
                worst = worst.max(error);
                assert!(error <= 0.01, "shown {shown}, exact {exact}");
            }
        }
    }
    let calls = server.command_calls("fcall") - before;
    // The store was asked only for those near the head and for each gateway's refresh (at
    // most one a second each, and one more each for the start).
    let secs = started.elapsed().as_secs() + 1;
    let allowed = 3 * NEAR_HEAD + 2 * (secs + 1);
    assert!(
        calls <= allowed,
        "{calls} script calls for {polls} polls (allowed {allowed})"
    );
    assert!(polls >= 3 * 340);
    eprintln!("{polls} polls, {calls} script calls, worst position error {worst:.4}");
}
