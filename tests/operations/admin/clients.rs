//! The tests' clients: the operator's, of the admin API, and a newcomer's, of the room.

use super::{ROOM, TOKEN};
use crate::common::{Http, Jar, Reply};

use bytes::Bytes;
use http::header;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

// ===== a client of the admin API =====

pub(super) struct Admin {
    pub(super) http: Http,
    pub(super) token: Option<String>,
}

impl Admin {
    pub(super) fn new(http: &Http) -> Self {
        Self {
            http: http.clone(),
            token: Some(TOKEN.to_owned()),
        }
    }

    pub(super) async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Reply {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("http://{}{}", self.http.addr, path));
        if let Some(t) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        let req = req.body(Full::new(Bytes::copy_from_slice(body))).unwrap();
        self.http.exchange(req).await.expect("the admin answers")
    }

    pub(super) async fn json(&self, method: Method, path: &str, body: Value) -> Reply {
        let body = serde_json::to_vec(&body).unwrap();
        self.send(method, path, Some("application/json"), &body)
            .await
    }

    pub(super) async fn status(&self) -> Value {
        let r = self.send(Method::GET, &room_path(), None, b"").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        r.json()
    }

    pub(super) async fn patch(&self, body: Value) -> Value {
        let r = self.json(Method::PATCH, &room_path(), body.clone()).await;
        assert_eq!(r.status, StatusCode::OK, "PATCH {body}: {}", r.text());
        r.json()
    }
}

pub(super) fn room_path() -> String {
    format!("/admin/rooms/{ROOM}")
}

// ===== visitors =====

/// A newcomer on `g`: the redirect with a queue cookie, then the answer of the store.
pub(super) async fn arrive(g: &Http) -> (Jar, Reply) {
    let mut jar = Jar::new();
    let first = g.visit_json(&mut jar).await;
    assert_eq!(first.status, StatusCode::FOUND);
    let r = g.visit_json(&mut jar).await;
    (jar, r)
}

pub(super) fn state(r: &Reply) -> String {
    r.json()["state"].as_str().unwrap_or_default().to_owned()
}

/// The settings part of a status (what a bad request must leave as it was).
pub(super) fn settings(s: &Value) -> Value {
    json!([
        s["open"],
        s["paused"],
        s["capacity"],
        s["rate"],
        s["inside"],
        s["waiting"]
    ])
}
