//! Matching: people wait to be put together in groups of two or three (a chat that pairs
//! strangers on a topic, a game lobby, a support desk that seats three), fairly and atomically
//! across servers. A product beside [`tower_waiting_room`]'s waiting room, on its clock, its
//! signing keys and (feature `redis`, on by default) its Redis store's connection; guide:
//! `docs/matching.md`.
//!
//! The same shape as the room: values checked at the edge ([`Topic`], [`GroupSize`],
//! [`UserId`]), a [`store`] that makes every move in one atomic step (the embedded
//! [`MemoryMatchStore`](store::MemoryMatchStore) and, with the `redis` feature, a Redis store),
//! one conformance suite for both.
//!
//! A user is **idle**, **waiting** in one [`Queue`] (a topic and a group size), or **matched**
//! in one [`Group`], pending until the application confirms it with its own id, then
//! confirmed. See [`store`] for the rules: oldest first, a fallback to smaller groups after a
//! wait, timeouts, and groups the application never confirmed going back to the front.
//!
//! | module | what |
//! |---|---|
//! | (root) | the values ([`Topic`], [`GroupSize`], [`Queue`], [`UserId`], [`Group`], [`MatchState`]) and the [`Matchmaker`] |
//! | [`store`] | the [`MatchStore`](store::MatchStore) trait, the embedded store and (feature `redis`, on by default) the Redis store with its function library (`src/store/redis/script/`) |
//! | [`service`] | [`MatchingService`](service::MatchingService), matching over HTTP |
//! | `testing` | (feature `testing`) the conformance suite of the `MatchStore` trait |

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod matchmaker;
pub mod service;
pub mod store;
mod types;

pub use matchmaker::{
    JoinError, MatchConfigError, Matchmaker, MatchmakerBuilder, Ticker, MAX_TICKED_QUEUES,
};
pub use types::*;

#[cfg(feature = "testing")]
pub mod testing;

/// Not public API: the room crate, for the conformance suite's macros.
#[doc(hidden)]
pub use tower_waiting_room as __room;
