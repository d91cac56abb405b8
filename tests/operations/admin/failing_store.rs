//! The store failing: every call that needs it answered 503 with a JSON error.

use super::clients::{room_path, Admin};
use super::{gateway_with_admin, room_builder, ROOM};

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;
use tower_waiting_room::SessionId;

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_failing_store_is_503_with_a_json_error() {
    use tower_waiting_room::store::RedisStore;
    // A port held by this test and answered by nobody: each connection is closed at once. (A
    // port merely free when picked could be taken by a Redis another test starts meanwhile,
    // and the store would then be up.)
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in holder.incoming() {
            drop(conn);
        }
    });
    let store = RedisStore::builder()
        .url(format!("redis://127.0.0.1:{port}/"))
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let layer = room_builder().store(store).build().unwrap();
    let g = gateway_with_admin(layer).await;
    let admin = Admin::new(&g);
    for (method, path, body) in [
        (Method::GET, room_path(), json!(null)),
        (Method::PATCH, room_path(), json!({"capacity": 5})),
        (
            Method::POST,
            format!("{}/release", room_path()),
            json!({"count": 5}),
        ),
        (
            Method::DELETE,
            format!("{}/sessions/{}", room_path(), SessionId::random()),
            json!(null),
        ),
    ] {
        let r = admin.json(method.clone(), &path, body).await;
        assert_eq!(
            r.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{method} {path}: {}",
            r.text()
        );
        let error = r.json()["error"].as_str().unwrap().to_owned();
        assert!(error.contains("store"), "{error}");
        assert!(
            !error.contains(&port.to_string()),
            "the address stays in the log: {error}"
        );
    }
    // The list of rooms needs no store.
    let r = admin.send(Method::GET, "/admin/rooms", None, b"").await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::OK, json!({"rooms": [ROOM]}))
    );
}
