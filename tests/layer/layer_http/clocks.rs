//! A gateway whose clock is set back (an NTP step, a VM resumed from a snapshot) while the
//! store's goes on: a waiter who polls every second keeps their place. The gateway's snapshot,
//! dated by the gateway's clock, is then answered from no more until a refresh brings a new
//! one, so the waiters answered at the gateway go on checking in.

use super::SERIAL;
use crate::common;

use std::time::Duration;

use common::{serve, Http, Jar, SECRET, T0};
use http::{Method, StatusCode};
use tower_waiting_room::clock::Clock as _;
use tower_waiting_room::store::snapshot::NEAR_HEAD;
use tower_waiting_room::store::MemoryStore;
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::WaitingRoomLayer;

const ROOM: &str = "clk";

async fn status(gw: &Http, jar: &mut Jar) -> serde_json::Value {
    let reply = gw
        .visit(jar, Method::GET, &format!("/__waitingroom/{ROOM}/status"))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    reply.json()
}

/// What a waiter behind the snapshot's head (answered at the gateway) is told once the line
/// moves, after the gateway's clock went back by `back` while they polled every second.
async fn turn_after_a_step_back(back: Duration) -> serde_json::Value {
    let (gateway_clock, store_clock) = (ManualClock::new(T0), ManualClock::new(T0));
    let tick = || {
        gateway_clock.advance(Duration::from_secs(1));
        store_clock.advance(Duration::from_secs(1));
    };
    let layer = WaitingRoomLayer::builder(ROOM)
        .capacity(1)
        .secret(SECRET)
        .secure_cookies(false)
        .new_visitor_limit(None)
        .poll_limit(None)
        .queue_ttl(Duration::from_secs(4))
        .clock(gateway_clock.clone())
        .store(MemoryStore::with_clock(store_clock.clone()))
        .build()
        .unwrap();
    let control = layer.control();
    let gw = serve(common::app(layer)).await;
    let mut inside = Jar::new();
    gw.visit_json(&mut inside).await;
    assert_eq!(gw.visit_json(&mut inside).await.status, StatusCode::OK);
    let mut line = Vec::new();
    for i in 0..NEAR_HEAD + 5 {
        let mut jar = Jar::new();
        gw.visit_json(&mut jar).await;
        let reply = gw.visit_json(&mut jar).await;
        assert_eq!(reply.json()["position"], i + 1, "{:?}", reply.json());
        line.push(jar);
    }
    // The waiter behind the head's reach polls every second, answered at the gateway; the
    // others go quiet.
    let waiter = &mut line[NEAR_HEAD as usize + 2];
    for _ in 0..20 {
        tick();
        assert_eq!(status(&gw, waiter).await["state"], "waiting");
    }
    gateway_clock.set(gateway_clock.now_ms() - back.as_millis() as u64);
    for _ in 0..15 {
        tick();
        assert_eq!(status(&gw, waiter).await["state"], "waiting");
    }
    // The line moves: room for everyone alive at their turn.
    control.set_capacity(1_000).await.unwrap();
    store_clock.advance(Duration::from_millis(2_500));
    gateway_clock.set(store_clock.now_ms());
    status(&gw, waiter).await;
    status(&gw, waiter).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_keeps_their_turn_when_the_gateway_clock_goes_back() {
    let _serial = SERIAL.lock().await;
    // The control: no step, and the waiter is let in at their turn.
    let steady = turn_after_a_step_back(Duration::ZERO).await;
    assert_eq!(steady["state"], "admitted", "{steady}");
    // Fifteen seconds back, longer than `queue_ttl`: the snapshot held was taken as new all
    // that time, no check-in went out, and the waiter was skipped as silent.
    let stepped = turn_after_a_step_back(Duration::from_secs(15)).await;
    assert_eq!(
        stepped["state"], "admitted",
        "a waiter who polled every second lost their turn: {stepped}"
    );
}
