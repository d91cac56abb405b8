//! The gateway binary over real HTTP in front of apps not written in Rust: Python's
//! `http.server` (tests/support/app.py) and Debian's nginx serving static pages.

#[path = "../support/mod.rs"]
mod support;

#[path = "../../../tests/redis_harness/mod.rs"]
mod redis_harness;

mod admission;
mod browser;
mod edge;
mod failures;
mod fleet;
mod hostile;
mod nginx;
mod operations;
mod proxying;
mod smoke;
