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

mod body;
mod builder;
pub mod client;
pub mod clock;
pub mod config;
mod cookies;
pub mod defences;
pub mod future;
mod layer;
pub mod outcome;
pub mod response;
mod room;
mod service;
mod session;
pub mod store;
pub mod testing;
mod token;

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use body::ResponseBody;
pub use builder::WaitingRoomBuilder;
pub use client::{PeerAddr, RequestInfo};
pub use config::{ConfigError, FailPolicy, RoomConfig, RoomPolicy, SameSite};
pub use defences::{ProofOfWork, RateLimit};
pub use layer::WaitingRoomLayer;
pub use outcome::{Admission, AdmittedBy, Rejection};
pub use service::WaitingRoom;
pub use session::SessionId;
pub use token::{KeyError, Keyring, SigningKey};

/// Not public API. The crate's own fuzz targets, property tests and benchmark reach the private
/// wire formats through this module; it may change in any release, and nothing in it is
/// documented as stable.
#[doc(hidden)]
pub mod __private {
    pub use crate::token::{AdmissionToken, Challenge, QueueCookie};

    /// Leading zero bits of a hash, as the proof-of-work check counts them.
    pub fn leading_zero_bits(hash: &[u8]) -> u32 {
        crate::defences::proof_of_work::leading_zero_bits(hash)
    }
}
