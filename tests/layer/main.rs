//! The layer's integration tests in one binary: its HTTP contract, client IPs, logs, spans and
//! metrics, the end of a slot, proof of work and the risk decision, tokens, settings files, rooms
//! under axum, serving (`serve::serve`) and the attacks. One binary per family: each test binary
//! links the crate again.

#[path = "../common/mod.rs"]
mod common;

mod attacks_basic;
mod attacks_limits;
mod attacks_network;
mod auto_capacity;
#[cfg(all(feature = "axum", feature = "admin", feature = "serve"))]
mod client_ip;
mod config_file;
mod edge_tokens;
mod end_slot;
mod languages;
mod layer_contract;
mod layer_http;
mod metrics;
mod proof_of_work;
mod risk;
mod rooms_axum;
#[cfg(feature = "serve")]
mod serve;
#[cfg(feature = "serve")]
mod serving;
mod token_properties;
mod tokens_from_ahead;
mod tracing_span;
