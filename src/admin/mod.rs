//! The operator's HTTP API and dashboard: [`AdminService`], a Tower service the app mounts where
//! it wants, in front of one or more rooms' [`RoomControl`]s.
//!
//! ```
//! use axum::Router;
//! use tower_waiting_room::admin::AdminService;
//! use tower_waiting_room::WaitingRoomLayer;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let room = WaitingRoomLayer::builder("drop")
//!     .capacity(500)
//!     .secret(*b"a secret of at least thirty-two bytes!!")
//!     .build()?;
//! let admin = AdminService::builder()
//!     .bearer_token("an-operator-token-of-at-least-32-bytes")
//!     .room(room.control())
//!     .build()?;
//! let shop: Router = Router::new() /* .route(...) */.layer(room);
//! // The admin is mounted next to the shop, NOT behind the room: operators are never queued.
//! let app = Router::new().nest_service("/admin", admin).merge(shop);
//! # let _ = app;
//! # Ok(())
//! # }
//! ```
//!
//! # The contract
//!
//! Paths are relative to where the service is mounted (`/admin` above); `docs/api.md` ("Admin
//! API") has the whole contract with bodies and examples.
//!
//! | request | answer |
//! |---|---|
//! | `GET /` | the dashboard: one self-contained HTML page (no data in it, no token needed) |
//! | `GET /rooms` | `200 {"rooms": ["drop", ...]}` |
//! | `GET /rooms/{room}` | `200` [`RoomStatus`] as JSON |
//! | `PATCH /rooms/{room}` with any of `{"capacity": n, "rate": n or null, "paused": b, "open": b, "end_slots": true, "auto": {"enabled": b}}` | `200` the new [`RoomStatus`] |
//! | `POST /rooms/{room}/release` with `{"count": n}` | `200 {"released": k}` |
//! | `DELETE /rooms/{room}/sessions/{session}` | `200 {"dropped": true, ...}`, or `404` when it had no place or slot (banned all the same) |
//!
//! Every answer but the dashboard is JSON; errors are `{"error": "..."}`: `400` a bad value
//! (nothing changed), `401` no or a wrong token (with `WWW-Authenticate: Bearer`), `404` an
//! unknown room or path, `405` a wrong method (with `Allow`), `413` a body over the limit
//! (16 KiB by default), `415` a `PATCH` or `POST` whose body is not `application/json`, `409`
//! the room's settings were written by a version of the crate this gateway cannot read (a
//! rolling upgrade to finish: nothing changed), `503` the room's store failed. Rejections are responses: the service's `Error` is
//! [`Infallible`](std::convert::Infallible).
//!
//! # Mounting
//!
//! axum's `nest_service("/admin", svc)` hands the service paths with the mount point removed,
//! which is what it matches. A server that hands it full paths (a bare hyper server, or axum's
//! `route_service`/`fallback_service`) names the mount point with
//! [`AdminBuilder::prefix`]: a path that starts with it has it removed, any other is taken as
//! already relative, so the same service works both ways.
//!
//! # Who may use it
//!
//! Either a bearer token ([`AdminBuilder::bearer_token`], at least 32 bytes: every call but the
//! dashboard's HTML must send `Authorization: Bearer <token>`, compared in constant time), or
//! [`AdminBuilder::without_token`]: **you put your own auth in front** (a layer of your app that
//! checks its operators). The builder refuses to choose for you.
//!
//! Changes from a browser are safe from cross-site forms either way: a `PATCH`, `POST` or
//! `DELETE` needs a JSON body or a method no form can send, which a browser only sends
//! cross-site after a CORS preflight this service never answers yes to.

mod bodies;
mod body;
mod builder;
mod future;
mod routes;
mod service;
mod shared;

pub use body::AdminBody;
pub use builder::AdminBuilder;
pub use future::ResponseFuture;
pub use service::AdminService;

/// The dashboard page [`AdminService`] serves at its root: one self-contained HTML document
/// (inline CSS and JavaScript, no external resources). It holds no data: it asks the operator
/// for the token and reads everything from the API.
pub(crate) const DASHBOARD: &str = include_str!("dashboard.html");

#[doc(no_inline)]
pub use crate::control::{RoomControl, RoomState, RoomStatus};
