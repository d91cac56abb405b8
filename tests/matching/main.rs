//! Matching in one binary: its HTTP API, the conformance suite on the embedded and the Redis
//! stores, and the proofs across gateway processes.
#![cfg(feature = "matching")]

#[path = "../common/mod.rs"]
mod common;
#[path = "../redis_harness/mod.rs"]
mod redis_harness;

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
