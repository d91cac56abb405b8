//! The events endpoint (`GET {prefix}/{room}/events`) over loopback HTTP on a real Redis: a
//! waiter's Server-Sent Events stream, fed by the gateway's snapshot. It sends the status JSON
//! when it changes, resumes with `Last-Event-ID`, refuses with `204` whoever it cannot answer
//! for, ends with `event: end` when the store must be asked, and checks its waiter in: a waiter
//! who only listens keeps their place at their turn, where a silent one is skipped.

use crate::common;
use crate::redis_harness;
use crate::sse::{self, fill, open, Stream};

use std::time::Duration;

use common::{serve, Http, Jar};
use http::header;
use http::{Method, StatusCode};
use tower_waiting_room::clock::Clock;
use tower_waiting_room::store::snapshot::NEAR_HEAD;
use tower_waiting_room::store::{RedisStore, SettingsChange, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::WaitingRoomLayer;

fn store(url: &str, prefix: &str, clock: &ManualClock) -> RedisStore {
    RedisStore::builder()
        .url(url)
        .prefix(prefix)
        .timeout(Duration::from_secs(5))
        .manual_clock(clock.clone())
        .build()
        .expect("store builds")
}

async fn gateway(
    url: &str,
    prefix: &str,
    room: &str,
    clock: &ManualClock,
    max_streams: usize,
) -> (Http, WaitingRoomLayer) {
    let layer = sse::room(room, max_streams)
        .queue_ttl(Duration::from_secs(4))
        .clock(clock.clone())
        .store(store(url, prefix, clock))
        .build()
        .unwrap();
    (serve(common::app(layer.clone())).await, layer)
}

const WAIT: Duration = Duration::from_secs(10);

/// `open`, after a client dropped a stream while all slots were taken: the gateway frees the
/// slot once it sees that connection close, which on a loaded machine can take a while, so
/// this asks again on `204` until `WAIT` has passed. Panics if no slot freed by then.
async fn open_once_a_slot_frees(gw: &Http, room: &str, jar: &Jar, last_id: Option<&str>) -> Stream {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, _, stream) = open(gw, room, jar, last_id).await;
        if status == StatusCode::OK {
            return stream;
        }
        assert_eq!(
            status,
            StatusCode::NO_CONTENT,
            "only a full gateway refuses"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "no slot freed within {WAIT:?} of a stream closing"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_hears_each_change_and_resumes_where_it_left_off() {
    let server = redis_harness::shared_server();
    let clock = ManualClock::new(common::T0);
    let room = "ev1";
    let (gw, _) = gateway(&server.url(), "evtest1", room, &clock, 2).await;
    let mut line = fill(&gw, NEAR_HEAD as usize + 10).await;
    let last = line.len() as u64;
    let jar = line.pop().unwrap();

    let (status, headers, mut s) = open(&gw, room, &jar, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/event-stream");
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    assert_eq!(s.frame(WAIT).await.as_deref(), Some("retry: 3000"));
    let (id, first) = s.event(WAIT).await.expect("the first event");
    assert_eq!(first["state"], "waiting", "{first}");
    assert_eq!(first["position"], last);
    assert_eq!(
        id.parse::<u64>().unwrap(),
        clock.now_ms(),
        "the snapshot's time"
    );

    // The front waiter leaves: after the next refresh, one place forward. Nothing is sent
    // until then (no change, no heartbeat due).
    assert!(
        s.frame(Duration::from_millis(1_500)).await.is_none(),
        "nothing changed"
    );
    let mut front = line.remove(0);
    let left = gw
        .visit(
            &mut front,
            Method::POST,
            &format!("/__waitingroom/{room}/leave"),
        )
        .await;
    assert_eq!(left.status, StatusCode::OK);
    clock.advance(Duration::from_millis(1_000));
    let (id2, moved) = s.event(WAIT).await.expect("the change");
    assert_eq!(moved["position"], last - 1, "{moved}");
    assert!(id2.parse::<u64>().unwrap() > id.parse::<u64>().unwrap());

    // A second stream of the same waiter, reconnecting with the last id: the snapshot is the
    // same one, so it sends nothing until a change; with an older id it sends the state now.
    let (status, _, mut resumed) = open(&gw, room, &jar, Some(&id2)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(resumed.frame(WAIT).await.as_deref(), Some("retry: 3000"));
    assert!(
        resumed.event(Duration::from_millis(1_500)).await.is_none(),
        "the event of {id2} again"
    );
    drop(resumed);
    drop(s);
    // Both slots were taken: the gateway frees them when it sees the connections close.
    let mut older = open_once_a_slot_frees(&gw, room, &jar, Some(&id)).await;
    older.frame(WAIT).await;
    let (_, now) = older.event(WAIT).await.expect("the state now");
    assert_eq!(now["position"], last - 1);

    // At most two streams here: the third is refused (the page then polls), the slot freed
    // when a stream goes. `older` took the first slot freed by the two streams dropped above;
    // the other is free once the gateway has seen its connection close too, which on a loaded
    // machine can come later.
    let n = line.len();
    let _second = open_once_a_slot_frees(&gw, room, &line[n - 1], None).await;
    let (status, _, _) = open(&gw, room, &line[n - 2], None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "over max_event_streams");
    drop(older);
    open_once_a_slot_frees(&gw, room, &line[n - 2], None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whoever_the_snapshot_cannot_answer_for_gets_no_stream_or_its_end() {
    let server = redis_harness::shared_server();
    let clock = ManualClock::new(common::T0);
    let room = "ev2";
    let (gw, _) = gateway(&server.url(), "evtest2", room, &clock, 100).await;
    let line = fill(&gw, NEAR_HEAD as usize + 3).await;

    // No cookie, a cookie without a place (a first visit), a waiter near the head, a POST.
    let (status, _, _) = open(&gw, room, &Jar::new(), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let mut fresh = Jar::new();
    gw.visit_json(&mut fresh).await;
    let (status, _, _) = open(&gw, room, &fresh, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "no place yet");
    let (status, _, _) = open(&gw, room, &line[0], None).await;
    assert_eq!(status, StatusCode::OK);
    let (_, _, mut near) = open(&gw, room, &line[0], None).await;
    near.frame(WAIT).await;
    let (what, body) = near.event(WAIT).await.expect("an answer");
    assert_eq!(
        (what.as_str(), body),
        ("end", serde_json::json!({})),
        "the head's turn is the store's to say"
    );
    assert!(near.frame(WAIT).await.is_none(), "closed after the end");
    let post = gw
        .send(Method::POST, &format!("/__waitingroom/{room}/events"), &[])
        .await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ends_when_its_snapshot_goes_stale_with_the_store_away() {
    // A server of its own, stopped mid-stream.
    let server = redis_harness::Server::start(&[]);
    let clock = ManualClock::new(common::T0);
    let room = "ev4";
    let (gw, _) = gateway(&server.url(), "evtest4", room, &clock, 100).await;
    let line = fill(&gw, NEAR_HEAD as usize + 3).await;
    let (status, _, mut s) = open(&gw, room, line.last().unwrap(), None).await;
    assert_eq!(status, StatusCode::OK);
    s.frame(WAIT).await;
    assert_eq!(s.event(WAIT).await.unwrap().1["state"], "waiting");
    drop(server);
    // Time goes on; every refresh fails, the snapshot ages past its bound, and after a few
    // looks without a fresh one the stream ends: the page asks the status endpoint, whose
    // answer is the fail policy's.
    let mut ended = None;
    for _ in 0..15 {
        clock.advance(Duration::from_millis(1_000));
        if let Some(e) = s.event(Duration::from_millis(1_000)).await {
            ended = Some(e);
            break;
        }
    }
    let (what, _) = ended.expect("the stream ended");
    assert_eq!(what, "end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_who_only_listens_keeps_their_turn_and_a_silent_one_is_skipped() {
    let server = redis_harness::shared_server();
    let clock = ManualClock::new(common::T0);
    let room = "ev3";
    let (gw, layer) = gateway(&server.url(), "evtest3", room, &clock, 100).await;
    let mut line = fill(&gw, NEAR_HEAD as usize + 10).await;
    let listener = line.pop().unwrap();
    let silent = line.pop().unwrap();

    let (status, _, mut s) = open(&gw, room, &listener, None).await;
    assert_eq!(status, StatusCode::OK);
    s.frame(WAIT).await;
    assert_eq!(s.event(WAIT).await.unwrap().1["state"], "waiting");
    // Longer than queue_ttl (4 s) passes with nobody polling: the stream looks each second,
    // refreshing the snapshot and checking its waiter in.
    for _ in 0..7 {
        clock.advance(Duration::from_millis(1_000));
        tokio::time::sleep(Duration::from_millis(1_200)).await;
    }
    // Room for everyone: the silent ones are skipped at their turn, the listener is let in.
    let ops = store(&server.url(), "evtest3", &clock);
    ops.configure(layer.config().policy(), SettingsChange::new().capacity(500))
        .await
        .unwrap();
    // A newcomer's join runs the promotion (up to 100 a call): everyone ahead is silent.
    ops.enter(
        layer.config().policy(),
        tower_waiting_room::SessionId::random(),
    )
    .await
    .unwrap();
    // The next poll (or look) refreshes the snapshot, whose head has passed both.
    clock.advance(Duration::from_millis(1_000));
    let mut silent = silent;
    let status_path = format!("/__waitingroom/{room}/status");
    let gone = gw
        .visit(&mut silent, Method::GET, &status_path)
        .await
        .json();
    assert_eq!(
        gone["state"], "unknown",
        "the silent waiter was skipped: {gone}"
    );
    // The listener's stream now ends (their turn is the store's to say), and the status
    // endpoint lets them in.
    let (what, _) = s.event(WAIT).await.expect("the end");
    assert_eq!(what, "end");
    let mut listener = listener;
    let turn = gw
        .visit(&mut listener, Method::GET, &status_path)
        .await
        .json();
    assert_eq!(
        turn["state"], "admitted",
        "the listener kept their turn: {turn}"
    );
}

/// The gateway's clock set back (an NTP step, a VM resumed) while a stream is open: the stream
/// ends at its next look, as at its time. Left open, it would outlive its end by as much as the
/// clock went back, with no heartbeat for as long. The client reconnects, and the new stream
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ends_when_the_gateway_clock_goes_back() {
    let server = redis_harness::shared_server();
    let (gateway_clock, store_clock) = (ManualClock::new(common::T0), ManualClock::new(common::T0));
    let room = "ev5";
    let layer = sse::room(room, 100)
        .queue_ttl(Duration::from_secs(4))
        .clock(gateway_clock.clone())
        .store(store(&server.url(), "evtest5", &store_clock))
        .build()
        .unwrap();
    let gw = serve(common::app(layer)).await;
    let line = fill(&gw, NEAR_HEAD as usize + 3).await;
    let jar = line.last().unwrap();
    let (status, _, mut s) = open(&gw, room, jar, None).await;
    assert_eq!(status, StatusCode::OK);
    s.frame(WAIT).await;
    assert_eq!(s.event(WAIT).await.unwrap().1["state"], "waiting");

    // A step shorter than a look (a slewed clock, a leap second) ends nothing: a heartbeat
    // at most (the last one is now "later"), the stream still open when the wait runs out.
    gateway_clock.set(gateway_clock.now_ms() - 200);
    let started = tokio::time::Instant::now();
    let until = started + Duration::from_millis(2_500);
    while let Some(frame) = s.frame(until - tokio::time::Instant::now()).await {
        assert_eq!(frame, ":", "a comment, no event");
    }
    assert!(
        started.elapsed() >= Duration::from_millis(2_400),
        "a small step ended the stream ({:?})",
        started.elapsed()
    );
    gateway_clock.set(gateway_clock.now_ms() - 60_000);
    let started = tokio::time::Instant::now();
    assert_eq!(s.frame(WAIT).await, None, "the stream ended");
    assert!(
        started.elapsed() < WAIT / 2,
        "ended at its next look, not left open ({:?})",
        started.elapsed()
    );
    let (status, _, mut again) = open(&gw, room, jar, None).await;
    assert_eq!(status, StatusCode::OK);
    again.frame(WAIT).await;
    let (_, now) = again.event(WAIT).await.expect("the state now");
    assert_eq!(now["state"], "waiting", "{now}");
}
