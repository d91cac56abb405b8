//! The admin API over real HTTP on loopback, with two gateways on one queue.
//!
//! Two `WaitingRoomLayer`s built separately (same room, same secret) each serve the app on their
//! own port; gateway 1 also serves the `AdminService` at `/admin` (axum's `nest_service`, next to
//! the room, not behind it). Every change made through gateway 1's API must be enforced by
//! gateway 2: on one `redis-server` (two `RedisStore`s), and on the embedded store (two layers
//! sharing one `MemoryStore`, which stands in for two gateways in one process).
//!
//! Then every bad input with its status (and that nothing changed), the token (401s, never in
//! `Debug`), the store failing (503), methods (405 + `Allow`), the body limit (413), and mounting
//! with full paths (`.prefix`).

use crate::common;

use std::time::Duration;

use axum::Router;
use common::{app, serve, Http, SECRET};
use tower_waiting_room::admin::AdminService;
use tower_waiting_room::{WaitingRoomBuilder, WaitingRoomLayer};

mod bad_requests;
mod clients;
#[cfg(feature = "serve")]
mod demo_serving;
#[cfg(feature = "redis")]
mod failing_store;
mod schedule;
mod service;
mod token;
mod two_gateways;

const ROOM: &str = "launch";
const Q: &str = "wr_launch_q";
const A: &str = "wr_launch_a";
const TOKEN: &str = "op-token-0123456789abcdef0123456789abcdef";
const REFRESH: Duration = Duration::from_secs(1);

fn room_builder() -> WaitingRoomBuilder {
    WaitingRoomLayer::builder(ROOM)
        .capacity(1)
        .secret(SECRET)
        .refresh(REFRESH)
        .active_ttl(Duration::from_secs(60))
        .secure_cookies(false)
}

fn admin_for(layer: &WaitingRoomLayer) -> AdminService {
    AdminService::builder()
        .bearer_token(TOKEN)
        .room(layer.control())
        .build()
        .expect("the admin builds")
}

/// Gateway 1: the admin at `/admin` (not behind the room) and the app behind the room.
async fn gateway_with_admin(layer: WaitingRoomLayer) -> Http {
    let admin = admin_for(&layer);
    serve(
        Router::new()
            .nest_service("/admin", admin)
            .merge(app(layer)),
    )
    .await
}

async fn memory_gateway() -> (Http, WaitingRoomLayer) {
    let layer = room_builder().capacity(3).build().unwrap();
    (gateway_with_admin(layer.clone()).await, layer)
}

// The demo's own serving code, included as a module: what it runs is what is tested.
#[cfg(feature = "serve")]
#[allow(dead_code)]
#[path = "../../examples/demo.rs"]
mod demo;
