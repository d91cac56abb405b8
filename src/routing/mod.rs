//! Several rooms in one app, and gated routes.
//!
//! One [`WaitingRooms`] layer holds several rooms, each built as a single room is
//! ([`WaitingRoomLayer::builder`](crate::WaitingRoomLayer::builder)) with its own settings, keys,
//! cookies (`wr_{room}_q`, `wr_{room}_a`), store keys and endpoints
//! (`{prefix}/{room}/status`, ...). [Rules](Rule) (path prefix, path, host, methods, a
//! predicate) send a request to a room, or **gate** it by one. Admission tokens are signed for
//! their room, so a visitor admitted to one room is not admitted to another.
//!
//! # Where a request goes
//!
//! ```text
//!   request ──► {prefix}/{room}/… of a known room? ── yes ──► that room (its endpoints)
//!      │         (whatever the rules: the endpoints are always reachable)
//!      ▼
//!   a gate's rule? ── yes ──► the gate's room: valid admission ─► app
//!      │                          (cookie, token header,      └─► 403 not_admitted, never queued
//!      │                           X-Admission-Ticket; or the room's single-use ticket, once)
//!      ▼
//!   a room's rule? ── yes ──► that room (its line, as a single room)
//!      │   (rules without a predicate, which never overlap; then predicates, in order)
//!      ▼
//!   the default room, if any; else ─► app, untouched (no Admission, no cookie, no store call)
//! ```
//!
//! A room's [bypass](crate::WaitingRoomBuilder::bypass) rules apply to every request that goes
//! to it, gated ones included.
//!
//! # Gated routes
//!
//! A route such as `POST /checkout` or `/api/orders/*` is for visitors the room has admitted,
//! and must never be queued: an API call cannot wait on a page. A gated request with a valid
//! admission token of the gate's room passes as on the fast path (a token past `refresh` gets
//! its heartbeat, as on any route of the room). Anything else gets `403` JSON, with no queue
//! cookie and no store write:
//!
//! ```json
//! {"error":"not_admitted","room":"drop","status":"/__waitingroom/drop/status","reason":"missing"}
//! ```
//!
//! `reason` is `missing`, `invalid` (garbage, tampered, an unknown key), `expired`,
//! `other_room` (a token of another room of the layer), `other_network`, or `slot_gone` (the
//! heartbeat found the slot released or expired); see
//! [`NotAdmittedBody`](crate::response::NotAdmittedBody). The admission is read from the room's
//! admission cookie, its token header, or [`ADMISSION_TICKET_HEADER`]: the room's status
//! endpoint hands admitted API clients (those that carry the room's values in headers, never
//! browsers) their token as `"ticket"` and in that header, so a mobile app or another backend
//! calls gated routes without cookies. A gate may name a room that is not in front of the
//! route: the checkout gated by the "drop" room while the shop's pages are open to all.
//!
//! A room with [single-use tickets](crate::WaitingRoomBuilder::single_use_tickets) gates by its
//! one-time ticket instead of the admission: the ticket cookie or a ticket (`t1.…`) in
//! [`ADMISSION_TICKET_HEADER`] (which the status endpoint then hands out), used once in the
//! store across all gateways. An admission alone is `403` `ticket_missing`; a ticket used before
//! is `403` `{"error":"ticket_used",...}`; the other reasons are `ticket_invalid`,
//! `ticket_expired`, `other_room` and `slot_ended`, in the same JSON shape.
//!
//! # With axum: the one way
//!
//! Layer the rooms onto the **whole composed app, as the router's last call**: after every
//! `route`, `merge`, `nest` and `fallback`, `app.layer(rooms)`, and serve that with each
//! connection's address in its requests (the client IP for the rooms' limits): with
//! `into_make_service_with_connect_info::<SocketAddr>()` as below, or within limits a slow
//! client cannot outlast with `serve::serve`, as the README's minimal example serves.
//! In axum 0.8 `Router::layer` wraps every route and the fallback (the default one too), so
//! every request, routed or not, passes the rooms first: every room's endpoints answer however
//! the app is composed, and the rules (not axum's routing) decide the room.
//!
//! ```no_run
//! use std::net::SocketAddr;
//!
//! use axum::{routing::{get, post}, Router};
//! use tower_waiting_room::routing::{Rule, WaitingRooms};
//! use tower_waiting_room::WaitingRoomLayer;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let secret = *b"a secret of at least thirty-two bytes!!";
//! let shop = WaitingRoomLayer::builder("shop").capacity(1_000).secret(secret).build()?;
//! let vip = WaitingRoomLayer::builder("vip").capacity(50).secret(secret).build()?;
//! let rooms = WaitingRooms::builder()
//!     .room(Rule::path_prefix("/vip"), vip)
//!     .default_room(shop)
//!     .gate(Rule::post("/checkout"), "shop")
//!     .build()?;
//!
//! let pages = Router::new().route("/", get(|| async { "shop" }));
//! let vip_pages = Router::new().route("/", get(|| async { "vip" }));
//! let api = Router::new().route("/checkout", post(|| async { "paid" }));
//! let app = pages
//!     .nest("/vip", vip_pages)
//!     .merge(api)
//!     .fallback(|| async { "not here" })
//!     .layer(rooms); // last
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The traps this avoids (each reproduced in `tests/layer/rooms_axum/composition.rs`): a room
//! layered onto one part of the app sees only the requests axum routes to that part, so its
//! endpoints answer `404` (outside every `nest`), or reach another room's layer through the merged
//! fallback and get that room's redirect; two parts that each carry a fallback (as a room's
//! endpoints would need) cannot be merged at all (axum panics: "Cannot merge two `Router`s that
//! both have a fallback"); and a `fallback` set after `layer` replaces the layered fallback,
//! silently, so the endpoints answer the app's fallback. Outside axum, the layer goes around the
//! whole service as any Tower layer (`ServiceBuilder::new().layer(rooms).service(app)`).
//!
//! # A single room with gates
//!
//! One room gates routes of its own with
//! [`WaitingRoomBuilder::gate`](crate::WaitingRoomBuilder::gate), no [`WaitingRooms`] needed:
//!
//! ```
//! use tower_waiting_room::routing::Rule;
//! use tower_waiting_room::WaitingRoomLayer;
//!
//! # fn main() -> Result<(), tower_waiting_room::ConfigError> {
//! let drop = WaitingRoomLayer::builder("drop")
//!     .capacity(100)
//!     .secret(*b"a secret of at least thirty-two bytes!!")
//!     .gate(Rule::post("/checkout"))
//!     .gate(Rule::path("/api/orders/*"))
//!     .build()?;
//! # let _ = drop;
//! # Ok(())
//! # }
//! ```
//!
//! Behind a [`WaitingRooms`] layer such a room's own gates apply to the requests that go to it;
//! [`WaitingRoomsBuilder::gate`] gates routes by a room whatever room (or none) they go to.
//!
//! | file | what |
//! |---|---|
//! | `../vocab/rule.rs` | [`Rule`]: what a request must be to go to a room or a gate, and the overlap check (on the ground floor: a single room's gates take it too) |
//! | `layer.rs` | [`WaitingRooms`] and [`WaitingRoomsBuilder`]: the rooms, their rules, the dispatch order |
//! | `service.rs` | [`WaitingRoomsService`]: the service, with a single room's readiness contract |

mod layer;
mod service;

pub use crate::vocab::{Rule, ADMISSION_TICKET_HEADER};
pub use layer::{WaitingRooms, WaitingRoomsBuilder};
pub use service::WaitingRoomsService;
