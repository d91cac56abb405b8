//! Events and tickets in one binary: the pre-queue, the event stream, tickets at a gate, over
//! HTTP and over their lifetime, and their mints and redeems with the store's calls counted.

#[path = "../common/mod.rs"]
mod common;
#[path = "../redis_harness/mod.rs"]
mod redis_harness;

mod events_per_session;
mod events_prequeue;
#[cfg(feature = "redis")]
mod events_stream;
mod sse;
mod ticket_store;
mod tickets_gate;
mod tickets_http;
mod tickets_lifetime;
mod tickets_mint;
mod tickets_redeem;
