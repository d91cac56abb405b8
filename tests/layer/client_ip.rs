//! The client IP as apps that follow the README get it, over real HTTP on loopback: axum served
//! with `into_make_service_with_connect_info` (no `client_ip_with`), the demo's and the hyper
//! example's own serving code, and the warning a room gives when it finds no IP.

use crate::common;

use std::io;
use std::sync::{Arc, Mutex};

use http::{Method, StatusCode};
use serde_json::Value;
use tower_waiting_room::config::defaults::NEW_VISITORS_PER_IP;
use tower_waiting_room::WaitingRoomLayer;

use common::{app, call, clock, serve_with_connect_info, Http, SECRET};

/// Held by every test of this file: tracing's interest cache is global, and a layer built on
/// another test thread at the moment the log test sets its subscriber can leave the build-time
/// line's callsite cached as "nobody listens" (seen under load in CI). The tests are short.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// First visits sent from one address (127.0.0.1), more than twice the default limit.
const VISITS: u32 = 150;

/// Sends [`VISITS`] first visits (no cookie) and checks that exactly the default limit of them
/// got a place (`302`), and every one after it `429` `limited` with a `Retry-After`.
async fn first_visits_are_limited(http: &Http, what: &str) {
    let max = NEW_VISITORS_PER_IP.max();
    let mut statuses = Vec::new();
    for i in 1..=VISITS {
        let r = http.send(Method::GET, "/", &[]).await;
        if i > max {
            assert_eq!(
                r.status,
                StatusCode::TOO_MANY_REQUESTS,
                "{what}: first visit {i} from one address, over the limit of {max}"
            );
            let json: Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(json["state"], "limited", "{what}: {json}");
            assert!(r.retry_after() >= 1, "{what}: no Retry-After");
        }
        statuses.push(r.status);
    }
    let placed = statuses.iter().filter(|s| **s == StatusCode::FOUND).count();
    assert_eq!(
        placed, max as usize,
        "{what}: {VISITS} first visits from one address, {placed} got a place; the limit is {max}"
    );
}

#[tokio::test]
async fn axum_connect_info_limits_first_visits_with_no_extractor() {
    let _serial = SERIAL.lock().await;
    // The builder as the README's minimal example uses it: no client_ip_with, no header.
    let layer = WaitingRoomLayer::builder("axum")
        .capacity(1)
        .secret(SECRET)
        .clock(clock())
        .build()
        .unwrap();
    let http = serve_with_connect_info(app(layer)).await;
    first_visits_are_limited(&http, "axum with connect info").await;
}

// The examples' own serving code, included as modules: what they run is what is tested.
// Also what tests/layer/serving.rs tests the demo's serving with.
#[allow(dead_code)]
#[path = "../../examples/demo.rs"]
pub(crate) mod demo;
#[allow(dead_code)]
#[path = "../../examples/hyper_server.rs"]
mod hyper_server;

/// Binds a loopback port for an example's `serve`, and a client for it.
async fn loopback() -> (tokio::net::TcpListener, Http) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = Http::new(listener.local_addr().unwrap());
    (listener, http)
}

#[tokio::test]
async fn the_demo_gives_the_room_the_client_ip() {
    let _serial = SERIAL.lock().await;
    let opts = demo::parse_args(["--insecure-cookies".to_owned()])
        .unwrap()
        .unwrap();
    let layer = demo::build_layer(&opts).unwrap();
    let (listener, http) = loopback().await;
    tokio::spawn(demo::serve(listener, layer, std::future::pending()));
    first_visits_are_limited(&http, "the demo").await;
}

#[tokio::test]
async fn the_hyper_example_gives_the_room_the_client_ip() {
    let _serial = SERIAL.lock().await;
    let (listener, http) = loopback().await;
    tokio::spawn(hyper_server::serve(
        listener,
        hyper_server::room().unwrap(),
        std::future::pending(),
    ));
    first_visits_are_limited(&http, "the hyper example").await;
}

/// What a `tracing` subscriber would print, for one test (a thread-local subscriber).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Log {
    fn lines(&self, level: &str) -> Vec<String> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .filter(|l| l.contains(level))
            .map(str::to_owned)
            .collect()
    }
}

#[tokio::test]
async fn a_room_without_a_client_ip_says_where_it_looked_and_what_to_change_once() {
    let _serial = SERIAL.lock().await;
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    // The family's other tests run in this process, on other threads.
    crate::common::tracing_asks_every_subscriber();
    let _guard = tracing::subscriber::set_default(subscriber);
    // Other tests of this binary run on other threads without a subscriber: a callsite first
    // hit there while this one was being set can keep "nobody listens" cached. Recompute it now
    // that this thread's subscriber is registered.
    tracing::callsite::rebuild_interest_cache();

    let layer = WaitingRoomLayer::builder("blind")
        .capacity(1)
        .secret(SECRET)
        .clock(clock())
        .build()
        .unwrap();
    let info = log.lines("INFO");
    assert!(
        info.len() == 1 && info[0].contains("ConnectInfo<SocketAddr>"),
        "at build, one line saying where the IP comes from: {info:?}"
    );

    // Served in process: no connection, so no address in any request.
    let router = app(layer);
    for _ in 0..3 {
        let r = call(&router, Method::GET, "/", &[]).await;
        assert_eq!(r.status, StatusCode::FOUND);
    }
    let warn = log.lines("WARN");
    assert_eq!(warn.len(), 1, "one warning, not one per request: {warn:?}");
    for remedy in [
        "per-IP limit",
        "into_make_service_with_connect_info::<SocketAddr>()",
        "PeerAddr",
        "client_ip_header",
    ] {
        assert!(
            warn[0].contains(remedy),
            "the warning lacks {remedy:?}: {}",
            warn[0]
        );
    }
}
