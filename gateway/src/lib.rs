//! `waiting-room-gateway`: the waiting room of `tower-waiting-room` in front of a web app
//! written in anything, as a reverse proxy configured by one TOML file.
//!
//! The binary is the product (`docs/gateway.md`); this library is its parts, public so that
//! its tests (and a program that wants the same gateway with code of its own around it) can
//! build them: [`config`] reads the file, [`stack`] turns it into one Tower service,
//! [`live`] swaps it on a reload, [`proxy`] passes requests to the app, [`workers`] serve it.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod forwarded;
pub mod guard;
pub mod live;
pub mod pages;
pub mod proxy;
pub mod service;
pub mod stack;
mod values;
pub mod workers;
