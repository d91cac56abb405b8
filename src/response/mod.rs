//! The room's own answers: waiting page, JSON for API clients, and the status body.
//!
//! Rejections are responses, not errors: the layer's `Error` is the inner service's. What a
//! rejected request sees is rendered by a [`Render`] implementation: the [`DefaultRenderer`]
//! gives browsers (`Accept` includes `text/html`) an HTML page and everyone else JSON with
//! `Retry-After`. Replace it with your own type or a closure:
//!
//! ```
//! use bytes::Bytes;
//! use http::{Response, StatusCode};
//! use tower_waiting_room::response::RenderContext;
//! use tower_waiting_room::Rejection;
//!
//! let render = |rejection: &Rejection, _cx: &RenderContext<'_>| {
//!     let mut res = Response::new(Bytes::from(format!("please wait: {}", rejection.state())));
//!     *res.status_mut() = rejection.status();
//!     res
//! };
//! # let _ = render;
//! // WaitingRoomLayer::builder("shop").renderer(render) ...
//! ```
//!
//! Whatever the renderer returns, the layer adds `Retry-After` and `Cache-Control: no-store`
//! when they are missing, and the room's cookies.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use serde::Serialize;

use crate::outcome::Rejection;

mod page;

/// What a renderer may want to know about the request it answers.
#[derive(Debug)]
#[non_exhaustive]
pub struct RenderContext<'a> {
    /// The room's id.
    pub room: &'a str,
    /// The request's headers.
    pub headers: &'a HeaderMap,
    /// The path and query the visitor asked for, to go back to once admitted.
    pub return_to: &'a str,
    /// `GET` here tells where the visitor stands (JSON).
    pub status_path: &'a str,
    /// `POST` here leaves the line.
    pub leave_path: &'a str,
}

impl RenderContext<'_> {
    /// Whether the client asked for HTML (`Accept` names `text/html`).
    pub fn wants_html(&self) -> bool {
        self.headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains("text/html"))
    }
}

/// Turns a [`Rejection`] into a response.
pub trait Render: Send + Sync + 'static {
    /// The response for `rejection`.
    fn render(&self, rejection: &Rejection, cx: &RenderContext<'_>) -> Response<Bytes>;
}

impl<F> Render for F
where
    F: Fn(&Rejection, &RenderContext<'_>) -> Response<Bytes> + Send + Sync + 'static,
{
    fn render(&self, rejection: &Rejection, cx: &RenderContext<'_>) -> Response<Bytes> {
        self(rejection, cx)
    }
}

/// HTML for browsers, JSON for everyone else.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultRenderer;

impl Render for DefaultRenderer {
    fn render(&self, rejection: &Rejection, cx: &RenderContext<'_>) -> Response<Bytes> {
        if cx.wants_html() {
            let mut res = Response::new(Bytes::from(page::render(rejection, cx)));
            *res.status_mut() = rejection.status();
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            res
        } else {
            json_response(
                rejection.status(),
                &StatusBody::from_rejection(cx.room, rejection),
            )
        }
    }
}

/// The JSON body of the status endpoint and of API rejections. The contract:
///
/// | field | type | meaning |
/// |---|---|---|
/// | `room` | string | the room's id |
/// | `state` | string | `admitted`, `waiting`, `full`, `unavailable`, `busy`, `unknown` or `left` |
/// | `position` | number or null | 1-based place in line while waiting |
/// | `waiting` | number or null | how many are in line |
/// | `retry_after` | number or null | seconds until the client should ask again |
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StatusBody<'a> {
    /// The room's id.
    pub room: &'a str,
    /// The visitor's state.
    pub state: &'static str,
    /// 1-based place in line while waiting.
    pub position: Option<u64>,
    /// How many are in line.
    pub waiting: Option<u64>,
    /// Seconds until the client should ask again.
    pub retry_after: Option<u64>,
}

impl<'a> StatusBody<'a> {
    /// The body for a rejection.
    pub fn from_rejection(room: &'a str, rejection: &Rejection) -> Self {
        let (position, waiting) = match *rejection {
            Rejection::Waiting {
                position, waiting, ..
            } => (Some(position), Some(waiting)),
            Rejection::Full { waiting, .. } => (None, Some(waiting)),
            _ => (None, None),
        };
        Self {
            room,
            state: rejection.state(),
            position,
            waiting,
            retry_after: Some(rejection.retry_after().as_secs()),
        }
    }

    /// A body for a state without a line position (`admitted`, `unknown`, `left`).
    pub fn plain(room: &'a str, state: &'static str) -> Self {
        Self {
            room,
            state,
            position: None,
            waiting: None,
            retry_after: None,
        }
    }
}

pub(crate) fn json_response(status: StatusCode, body: &impl Serialize) -> Response<Bytes> {
    let bytes = serde_json::to_vec(body).expect("status bodies serialize");
    let mut res = Response::new(Bytes::from(bytes));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// `1234567` → `1,234,567`.
pub(crate) fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1_342), "1,342");
        assert_eq!(group_thousands(1_234_567), "1,234,567");
    }
}
