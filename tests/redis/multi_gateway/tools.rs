//! Small tools: reproducible randomness, the wall clock, and the visitors' side of the network
//! with the answers it gets.

use super::{ADMISSION_COOKIE, REQUEST_TIMEOUT};
use crate::common::{Http, Reply};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::Method;
use serde_json::Value;

// ===== small tools =====

pub(super) use crate::common::rng::{wall_ms, Rng};

/// One HTTP exchange, read to the end, and when it happened.
pub(super) struct Answer {
    pub(super) reply: Reply,
    /// Taken just before the request was handed to the client.
    pub(super) sent: Instant,
    /// Taken once the whole answer was in.
    pub(super) received: Instant,
}

impl Answer {
    /// The body as JSON, or `null` (a malformed body shows up as a missing field).
    pub(super) fn json(&self) -> Value {
        serde_json::from_slice(&self.reply.body).unwrap_or(Value::Null)
    }

    /// A non-empty admission cookie set by this answer.
    pub(super) fn sets_admission(&self) -> bool {
        self.reply
            .cookie_value(ADMISSION_COOKIE)
            .is_some_and(|v| !v.is_empty())
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "{} {}",
            self.reply.status,
            String::from_utf8_lossy(&self.reply.body)
        )
    }
}

/// The visitors' side of the network: a client for each gateway, shared by all of them.
#[derive(Clone)]
pub(super) struct Net {
    pub(super) gateways: Arc<Vec<Http>>,
    /// Requests sent.
    pub(super) sent: Arc<AtomicU64>,
}

impl Net {
    pub(super) async fn send(
        &self,
        gateway: usize,
        method: Method,
        path: &str,
        cookie: Option<&HeaderValue>,
    ) -> Result<Answer, String> {
        let gateway = &self.gateways[gateway];
        let mut headers = vec![(header::ACCEPT, HeaderValue::from_static("application/json"))];
        headers.extend(cookie.map(|c| (header::COOKIE, c.clone())));
        let req = gateway.request(method, path, &headers);
        let sent = Instant::now();
        self.sent.fetch_add(1, Ordering::Relaxed);
        let reply = tokio::time::timeout(REQUEST_TIMEOUT, gateway.exchange(req))
            .await
            .map_err(|_| format!("no answer within {REQUEST_TIMEOUT:?}"))?
            .map_err(|e| e.to_string())?;
        Ok(Answer {
            reply,
            sent,
            received: Instant::now(),
        })
    }
}
