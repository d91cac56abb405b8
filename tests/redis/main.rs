//! The Redis store's integration tests in one binary: conformance, faults, Sentinel, the fast
//! path, rolling upgrades, several gateways on one store, tickets and outages. Each module starts
//! its own servers, or shares the binary's (`redis_harness::shared_server`) under keys of its own.

#[path = "../common/mod.rs"]
mod common;
#[path = "../redis_harness/mod.rs"]
mod redis_harness;
#[cfg(feature = "redis")]
#[path = "../common/sentinel.rs"]
mod sentinel;

#[cfg(feature = "redis")]
mod auto_fleet;
#[cfg(feature = "redis")]
mod auto_redis;
#[cfg(feature = "redis")]
mod check_ins;
#[cfg(all(feature = "redis", feature = "testing"))]
mod damage_never_lets_in;
#[cfg(all(
    feature = "redis",
    feature = "testing",
    feature = "admin",
    feature = "metrics"
))]
mod damaged_settings;
#[cfg(feature = "redis")]
mod drain_outage;
mod gateway_checkins;
#[cfg(feature = "redis")]
mod gateway_snapshot;
#[cfg(feature = "redis")]
mod join_batches;
#[cfg(feature = "redis")]
mod members;
#[cfg(feature = "redis")]
mod multi_gateway;
#[cfg(feature = "redis")]
mod redis_fast_path;
#[cfg(feature = "redis")]
mod redis_rolling_upgrade;
#[cfg(feature = "redis")]
mod redis_store_v2;
#[cfg(feature = "redis")]
mod rooms_redis;
#[cfg(feature = "redis")]
mod shared_checkpoints;
#[cfg(all(feature = "redis", feature = "testing"))]
mod store_redis;
#[cfg(feature = "redis")]
mod store_redis_faults;
#[cfg(feature = "redis")]
mod store_redis_sentinel;
#[cfg(feature = "redis")]
mod tickets_redis;
#[cfg(feature = "redis")]
mod upgrades_in_place;
