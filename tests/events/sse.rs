//! What the stream tests share: their room, a line to listen in, and a client of the events
//! endpoint that opens a stream with a visitor's cookies and reads its frames as they come.

use crate::common::{Http, Jar, SECRET};

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderName};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower_waiting_room::{WaitingRoomBuilder, WaitingRoomLayer};

/// The stream tests' room: capacity 1, neither new visitors nor polls limited, at most
/// `max_streams` streams on a gateway.
pub fn room(name: &str, max_streams: usize) -> WaitingRoomBuilder {
    WaitingRoomLayer::builder(name)
        .capacity(1)
        .secret(SECRET)
        .secure_cookies(false)
        .new_visitor_limit(None)
        .poll_limit(None)
        .max_event_streams(max_streams)
}

/// One visitor inside, then `n` waiters in line (each with the cookie carrying their place).
pub async fn fill(gw: &Http, n: usize) -> Vec<Jar> {
    let mut inside = Jar::new();
    gw.visit_json(&mut inside).await;
    assert_eq!(gw.visit_json(&mut inside).await.status, StatusCode::OK);
    let mut line = Vec::new();
    for i in 0..n {
        let mut jar = Jar::new();
        gw.visit_json(&mut jar).await;
        let reply = gw.visit_json(&mut jar).await;
        assert_eq!(reply.json()["position"], i as u64 + 1, "{:?}", reply.json());
        line.push(jar);
    }
    line
}

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
