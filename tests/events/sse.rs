//! A client of the events endpoint for the tests: opens a stream with a visitor's cookies and
//! reads its frames as they come.

use crate::common::{Http, Jar};

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderName};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// An open stream: its frames, read as they come.
pub struct Stream {
    body: Incoming,
    buf: String,
}

impl Stream {
    /// The next frame (the text up to a blank line), or `None` when the stream ended or
    /// `within` passed first.
    pub async fn frame(&mut self, within: Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let frame = self.buf[..end].to_owned();
                self.buf.drain(..end + 2);
                return Some(frame);
            }
            let next = tokio::time::timeout_at(deadline, self.body.frame()).await;
            match next {
                Ok(Some(Ok(f))) => {
                    if let Ok(data) = f.into_data() {
                        self.buf.push_str(std::str::from_utf8(&data).unwrap());
                    }
                }
                _ => return None,
            }
        }
    }

    /// The next event with data (comments skipped): its id, and the JSON, or `("end", {...})`.
    pub async fn event(&mut self, within: Duration) -> Option<(String, serde_json::Value)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let frame = self.frame(left).await?;
            let field = |name: &str| {
                frame
                    .lines()
                    .find_map(|l| l.strip_prefix(name).map(str::to_owned))
            };
            if let Some(data) = field("data: ") {
                let id = field("id: ")
                    .or_else(|| field("event: "))
                    .unwrap_or_default();
                return Some((id, serde_json::from_str(&data).unwrap()));
            }
        }
    }
}

/// `GET events` with the jar's cookies: the status, the headers, and the stream if `200`.
pub async fn open(
    gw: &Http,
    room: &str,
    jar: &Jar,
    last_id: Option<&str>,
) -> (StatusCode, http::HeaderMap, Stream) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut req = Request::builder()
        .method(Method::GET)
        .uri(format!("http://{}/__waitingroom/{room}/events", gw.addr))
        .header(header::ACCEPT, "text/event-stream");
    if let Some(cookie) = jar.header() {
        req = req.header(header::COOKIE, cookie);
    }
    if let Some(id) = last_id {
        req = req.header(HeaderName::from_static("last-event-id"), id);
    }
    let res = client
        .request(req.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let (parts, body) = res.into_parts();
    (
        parts.status,
        parts.headers,
        Stream {
            body,
            buf: String::new(),
        },
    )
}
