//! Several rooms in one axum app, and gated routes, over real HTTP on loopback.
//!
//! First the traps of layering each part of an app with its own room (reproduced as they are in
//! axum 0.8, as the record of why), then the one way that works: the `WaitingRooms` layer
//! around the whole composed app (`rooms.layer(app)`), served with connect info. Then what the
//! rooms promise: every room's endpoints answer however the app is composed, an admission to
//! one room does not admit to another, unmatched requests pass untouched, the default room, host
//! rules, gates (to a room not in front of the route, their 403 reasons, tickets for clients
//! without cookies), typed build errors, and the Tower readiness contract.

use crate::common;

use axum::routing::{get, post};
use axum::{Json, Router};
use common::*;
use http::header::{HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};
use serde_json::{json, Value};
use tower_waiting_room::routing::{WaitingRooms, ADMISSION_TICKET_HEADER};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{Admission, WaitingRoomBuilder, WaitingRoomLayer};

mod build_errors;
mod composition;
mod gates;
mod tower_contract;

/// Request headers.
type Headers = Vec<(HeaderName, HeaderValue)>;

const TICKET: HeaderName = HeaderName::from_static(ADMISSION_TICKET_HEADER);
const QUEUE_HEADER: HeaderName = HeaderName::from_static("waiting-room-session");
const TOKEN_HEADER: HeaderName = HeaderName::from_static("waiting-room-token");

/// A room on the test clock, over plain http, with its own embedded store.
fn builder(id: &str, capacity: u32, clock: &ManualClock) -> WaitingRoomBuilder {
    WaitingRoomLayer::builder(id)
        .capacity(capacity)
        .secret(SECRET)
        .secure_cookies(false)
        .clock(clock.clone())
}

fn room(id: &str, capacity: u32, clock: &ManualClock) -> WaitingRoomLayer {
    builder(id, capacity, clock).build().expect("a valid room")
}

/// What the handler saw: the admission's room (or null: none), method and path.
async fn echo(
    admission: Option<axum::Extension<Admission>>,
    method: Method,
    uri: Uri,
) -> Json<Value> {
    Json(json!({
        "admitted_to": admission.map(|a| a.room().to_owned()),
        "method": method.as_str(),
        "path": uri.path(),
    }))
}

/// A shop: pages, a VIP area, an API, in whatever shape the test composes them.
fn pages() -> Router {
    Router::new()
        .route("/", get(echo))
        .route("/drop", get(echo))
        .route("/page", get(echo))
        .route("/vipers", get(echo))
}

fn vip_pages() -> Router {
    Router::new()
        .route("/", get(echo))
        .route("/{*rest}", get(echo))
}

fn api() -> Router {
    Router::new()
        .route("/checkout", post(echo))
        .route("/api/orders/{id}", post(echo).get(echo))
}

/// The one way: the rooms layered onto the whole composed app, as the router's last call,
/// served with connect info.
async fn serve_rooms(rooms: &WaitingRooms, app: Router) -> Http {
    serve_with_connect_info(app.layer(rooms.clone())).await
}

fn status_of(id: &str) -> String {
    format!("{PREFIX}/{id}/status")
}

/// The JSON a status endpoint answered: its room, asserted to be `id`.
fn assert_status_of(reply: &Reply, id: &str, what: &str) {
    assert_eq!(reply.status, StatusCode::OK, "{what}: {}", reply.text());
    let body = reply.json();
    assert_eq!(body["room"], id, "{what}: {body}");
    assert!(
        reply.set_cookies().is_empty(),
        "{what}: {:?}",
        reply.set_cookies()
    );
}

/// Visits `path` until the room lets the visitor through (a first visit is a redirect).
async fn enter(http: &Http, jar: &mut Jar, path: &str) -> Reply {
    let first = http.visit(jar, Method::GET, path).await;
    assert_eq!(first.status, StatusCode::FOUND, "{path}: {}", first.text());
    let second = http.visit(jar, Method::GET, path).await;
    assert_eq!(second.status, StatusCode::OK, "{path}: {}", second.text());
    second
}
