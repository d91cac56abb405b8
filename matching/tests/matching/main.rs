//! Matching in one binary: its HTTP API, the conformance suite on the embedded and the Redis
//! stores, the proofs across gateway processes, and the lobby example (over HTTP and in a real
//! browser).

// The root crate's test helpers, shared with its own test families.
#[path = "../../../tests/common/mod.rs"]
mod common;
#[path = "../../../tests/redis_harness/mod.rs"]
mod redis_harness;
#[path = "../../../tests/common/browser.rs"]
mod webdriver;

mod lobby;
mod lobby_browser;
mod matching_http;
#[cfg(feature = "testing")]
mod matching_memory;
#[cfg(feature = "redis")]
mod matching_proof;
#[cfg(feature = "redis")]
mod matching_redis;
#[cfg(all(feature = "redis", feature = "testing"))]
mod matching_redis_conformance;
#[cfg(feature = "redis")]
mod matching_refuses;
