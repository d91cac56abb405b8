//! The layer's HTTP behaviour, over real HTTP on loopback (axum::serve + hyper-util client).
//! Time only moves through a `ManualClock`.

use http::header::{self, HeaderValue};

mod clocks;
mod endpoints;
mod fail_policy;
mod tokens;
mod visits;

/// Held by every test of these modules: tracing's interest cache is global, and a callsite first
/// hit on another test thread while the log test sets its subscriber can stay cached as "nobody
/// listens" (seen under load). The tests are short.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn html() -> [(header::HeaderName, HeaderValue); 1] {
    [(
        header::ACCEPT,
        HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
    )]
}
