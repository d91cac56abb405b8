//! How many event streams one waiter holds (`GET {prefix}/{room}/events`), over loopback HTTP
//! on the embedded store. One session opening stream after stream, one by one or all at once,
//! holds two at most: each newer one replaces its session's oldest, which ends with
//! `event: end` and `{"reason":"replaced"}` (the page then polls, and does not reconnect).
//! Other waiters still get streams, and a few sessions cannot use up `max_event_streams`.

use crate::common;
use crate::sse::{self, fill, open, Stream};

use std::time::Duration;

use common::{serve, Http, Jar};
use http::StatusCode;
use serde_json::json;
use tokio::task::JoinSet;
use tower_waiting_room::store::snapshot::NEAR_HEAD;
use tower_waiting_room::store::MemoryStore;
use tower_waiting_room::testing::ManualClock;

const WAIT: Duration = Duration::from_secs(10);

/// Streams one session holds at once.
const PER_SESSION: usize = 2;

/// A gateway of `room` on the embedded store (the clock stands still: its snapshot stays
/// fresh), with one visitor inside and `far` waiters far enough back for the snapshot to
/// answer for them (past the `NEAR_HEAD` the store is asked about).
async fn gateway(room: &str, max_streams: usize, far: usize) -> (Http, Vec<Jar>) {
    let clock = ManualClock::new(common::T0);
    let layer = sse::room(room, max_streams)
        .clock(clock.clone())
        .store(MemoryStore::with_clock(clock))
        .build()
        .unwrap();
    let gw = serve(common::app(layer)).await;
    let mut line = fill(&gw, NEAR_HEAD as usize + far).await;
    (gw, line.split_off(NEAR_HEAD as usize))
}

/// Opens a stream for `jar` and reads up to its first event: `None` if the gateway refused it
/// (`204`).
async fn listen(gw: &Http, room: &str, jar: &Jar) -> Option<Stream> {
    let (status, _, mut s) = open(gw, room, jar, None).await;
    if status == StatusCode::NO_CONTENT {
        return None;
    }
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.frame(WAIT).await.as_deref(), Some("retry: 3000"));
    Some(s)
}

/// What became of a stream within `within`: ended as replaced (then closed), or still open.
async fn replaced(s: &mut Stream, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match s.event(left).await {
            Some((what, body)) if what == "end" => {
                assert_eq!(body, json!({"reason": "replaced"}), "the only end here");
                assert!(s.frame(WAIT).await.is_none(), "closed after its end");
                return true;
            }
            Some((_, body)) => assert_eq!(body["state"], "waiting", "{body}"),
            None => return false,
        }
    }
}

/// Opens `n` streams for `jar`, one after another, each read up to its first event; each from
/// the third on replaces the oldest still open. The streams left open.
async fn stream_after_stream(gw: &Http, room: &str, jar: &Jar, n: usize) -> Vec<Stream> {
    let mut streams = Vec::new();
    for i in 0..n {
        let mut s = listen(gw, room, jar).await.expect("a session's own stream");
        let (_, first) = s.event(WAIT).await.expect("the first event");
        assert_eq!(first["state"], "waiting", "{first}");
        streams.push(s);
        if i >= PER_SESSION {
            let oldest = &mut streams[i - PER_SESSION];
            assert!(
                replaced(oldest, WAIT).await,
                "stream {} went on",
                i - PER_SESSION
            );
        }
    }
    streams.split_off(n.saturating_sub(PER_SESSION))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_opening_stream_after_stream_holds_two() {
    let room = "tabs";
    let (gw, line) = gateway(room, 100, 1).await;
    let mut kept = stream_after_stream(&gw, room, &line[0], 12).await;
    // The last two stay open (nothing changes, so they are quiet).
    for s in &mut kept {
        assert!(!replaced(s, Duration::from_millis(1_500)).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_opening_twenty_streams_at_once_keeps_two() {
    let room = "burst";
    let (gw, line) = gateway(room, 100, 1).await;
    let mut opened = JoinSet::new();
    for _ in 0..20 {
        let (gw, jar) = (gw.clone(), line[0].clone());
        opened.spawn(async move { listen(&gw, room, &jar).await.expect("never refused") });
    }
    let mut kept = 0;
    let mut ended = JoinSet::new();
    while let Some(s) = opened.join_next().await {
        let mut s = s.unwrap();
        ended.spawn(async move { replaced(&mut s, Duration::from_secs(3)).await });
    }
    while let Some(r) = ended.join_next().await {
        if !r.unwrap() {
            kept += 1;
        }
    }
    assert_eq!(kept, PER_SESSION, "streams still open of one session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_waiters_still_get_streams_and_a_few_sessions_cannot_use_up_the_gateway() {
    let room = "share";
    // Room for six streams: two sessions opening ten each hold four, so two more waiters get
    // one each, and only then is the gateway full.
    let (gw, line) = gateway(room, 6, 5).await;
    let mut held = Vec::new();
    for jar in &line[..2] {
        held.extend(stream_after_stream(&gw, room, jar, 10).await);
    }
    assert_eq!(held.len(), 2 * PER_SESSION);
    let mut others = Vec::new();
    for jar in &line[2..4] {
        others.push(listen(&gw, room, jar).await.expect("another waiter's"));
    }
    assert!(
        listen(&gw, room, &line[4]).await.is_none(),
        "max_event_streams holds"
    );
    // A stream that closes makes room for another waiter.
    drop(others.pop());
    let deadline = tokio::time::Instant::now() + WAIT;
    while listen(&gw, room, &line[4]).await.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "no room freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
