//! Operating a room, in one binary: the admin API, the operations, the ETA and its simulation.

#[path = "../common/mod.rs"]
mod common;
#[path = "../redis_harness/mod.rs"]
mod redis_harness;

#[cfg(feature = "admin")]
mod admin;
mod auto_sim;
mod counts;
mod edge_node;
mod edge_rotation;
mod eta;
mod eta_sim;
mod operations;
