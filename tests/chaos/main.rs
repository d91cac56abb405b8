//! The chaos run: Redis behind Sentinel with faults injected while visitors come and go (a
//! binary of its own: it is long).

#[path = "../common/mod.rs"]
mod common;
#[path = "../redis_harness/mod.rs"]
mod redis_harness;
#[cfg(feature = "redis")]
#[path = "../common/sentinel.rs"]
mod sentinel;

#[cfg(feature = "redis")]
mod chaos;
