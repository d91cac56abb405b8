//! A fair virtual waiting room for any Tower/HTTP service.
//!
//! When more people arrive than a site can serve, [`WaitingRoomLayer`] lets in only as many as it
//! can handle (`capacity`), in the order they arrived, and tells everyone else their place in
//! line honestly.
//!
//! ```
//! use axum::{routing::get, Router};
//! use tower_waiting_room::WaitingRoomLayer;
//!
//! # fn main() -> Result<(), tower_waiting_room::ConfigError> {
//! let room = WaitingRoomLayer::builder("drop")
//!     .capacity(1_000)
//!     .secret(*b"a secret of at least thirty-two bytes!!")
//!     .build()?;
//! let app: Router = Router::new().route("/", get(|| async { "you are in" })).layer(room);
//! # let _ = app;
//! # Ok(())
//! # }
//! ```
//!
//! # The three stages
//!
//! Every request passes the cheapest check that can decide it:
//!
//! 1. **Stateless cookie check** ([`queue_cookie`]): a visitor without a valid signed queue
//!    cookie gets one and a redirect back to the same URL. Nothing is stored, so cookie-less
//!    floods never reach the store.
//! 2. **Signed-token fast path** ([`admission_token`]): a visitor with a valid admission token
//!    younger than `refresh` goes straight through, no store call.
//! 3. **Store** ([`store`]): otherwise the store decides: admitted (a token is issued), waiting
//!    with a position, full, or unavailable.
//!
//! Outcomes are typed ([`Admission`] for handlers, [`Rejection`] for the room's own answers,
//! rendered by [`response::Render`]). The room also answers `GET {prefix}/{room}/status` and
//! `POST {prefix}/{room}/leave`.
//!
//! # Layout
//!
//! | module | what it holds |
//! |---|---|
//! | [`WaitingRoomLayer`], [`WaitingRoom`], [`future`] | the Tower layer, service and future |
//! | [`config`] | settings, defaults, [`ConfigError`] |
//! | [`queue_cookie`] | stage 1 |
//! | [`proof_of_work`] | optional, between stages 1 and 3: a challenge to solve before joining the line |
//! | [`admission_token`] | stage 2 |
//! | [`store`] | stage 3: the [`Store`](store::Store) trait, the [`MemoryStore`](store::MemoryStore) and (feature `redis`) the `RedisStore` with its Lua script (`src/store/redis/room.lua`) |
//! | [`signing`] | keys and rotation |
//! | [`outcome`], [`response`] | typed outcomes, the wait estimate, and how they are rendered (pages, templates, texts, JSON) |
//! | [`limits`] | bypass rules and the in-memory rate limits (new entries per client, polls per session) |
//! | [`clock`] | injectable time |
//! | [`testing`] | helpers for testing handlers behind the layer |

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod admission_token;
mod body;
pub mod clock;
pub mod config;
mod cookies;
pub mod future;
mod layer;
pub mod limits;
pub mod outcome;
pub mod proof_of_work;
pub mod queue_cookie;
pub mod response;
mod room;
mod service;
mod session;
pub mod signing;
pub mod store;
pub mod testing;

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use admission_token::AdmissionToken;
pub use body::ResponseBody;
pub use config::{ConfigError, FailPolicy, RoomConfig, RoomPolicy, SameSite};
pub use layer::{WaitingRoomBuilder, WaitingRoomLayer};
pub use limits::{PeerAddr, RateLimit, RequestInfo};
pub use outcome::{Admission, AdmittedBy, Rejection};
pub use queue_cookie::QueueCookie;
pub use service::WaitingRoom;
pub use session::SessionId;
pub use signing::{Keyring, SigningKey};
