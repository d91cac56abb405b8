//! Matching: people wait to be put together in groups of two or three (a chat that pairs
//! strangers on a topic, a game lobby, a support desk that seats three), fairly and atomically
//! across servers.
//!
//! The same shape as the room: values checked at the edge ([`Topic`], [`GroupSize`],
//! [`UserId`]), a [store] that makes every move in one atomic step (the embedded
//! [`MemoryMatchStore`](store::MemoryMatchStore) and, with the `redis` feature, a Redis store),
//! one conformance suite for both.
//!
//! A user is **idle**, **waiting** in one [`Queue`] (a topic and a group size), or **matched**
//! in one [`Group`], pending until the application confirms it with its own id, then
//! confirmed. See [`store`] for the rules: oldest first, a fallback to smaller groups after a
//! wait, timeouts, and groups the application never confirmed going back to the front.

pub mod store;
mod types;

pub use types::*;
