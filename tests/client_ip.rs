//! The client IP as apps that follow the README get it, over real HTTP on loopback: axum served
//! with `into_make_service_with_connect_info` (no `client_ip_with`), the demo's and the hyper
//! example's own serving code, and the warning a room gives when it finds no IP.

mod common;

use std::net::SocketAddr;

use axum::Router;
use http::{Method, StatusCode};
use serde_json::Value;
use tower_waiting_room::config::defaults::NEW_VISITORS_PER_IP;
use tower_waiting_room::WaitingRoomLayer;

use common::{app, clock, Http, SECRET};

/// First visits sent from one address (127.0.0.1, a new connection each time), more than twice
/// the default limit.
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

/// Serves `router` the way the README says: `axum::serve` with connect info.
async fn serve_with_connect_info(router: Router) -> Http {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    Http::new(addr)
}

#[tokio::test]
async fn axum_connect_info_limits_first_visits_with_no_extractor() {
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
