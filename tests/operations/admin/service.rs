//! Building and serving the admin service: what the builder refuses, mounting it with full paths,
//! nested or behind the app's own auth, and `HEAD` answers.

use super::clients::{room_path, Admin};
use super::{memory_gateway, room_builder, ROOM, TOKEN};
use crate::common::{serve, SECRET};

use axum::Router;
use http::{header, Method, StatusCode};
use serde_json::{json, Value};
use tower_waiting_room::admin::AdminService;
use tower_waiting_room::{ConfigError, WaitingRoomLayer};

#[test]
fn the_builder_refuses_what_cannot_work() {
    let layer = room_builder().build().unwrap();
    let build = |b: tower_waiting_room::admin::AdminBuilder| b.build().map(|_| ()).unwrap_err();
    let err = build(
        AdminService::builder()
            .bearer_token("short")
            .room(layer.control()),
    );
    assert_eq!(err, ConfigError::AdminTokenTooShort { len: 5 });
    assert!(
        !err.to_string().contains("short"),
        "the message names no token: {err}"
    );
    assert_eq!(
        build(
            AdminService::builder()
                .bearer_token(format!("{TOKEN} with spaces"))
                .room(layer.control())
        ),
        ConfigError::AdminTokenNotSendable
    );
    assert_eq!(
        build(AdminService::builder().room(layer.control())),
        ConfigError::AdminAuthNotChosen
    );
    assert_eq!(
        build(AdminService::builder().bearer_token(TOKEN)),
        ConfigError::AdminWithoutRooms
    );
    assert_eq!(
        build(
            AdminService::builder()
                .without_token()
                .room(layer.control())
                .room(layer.control())
        ),
        ConfigError::DuplicateRoom { room: ROOM.into() }
    );
    for prefix in ["admin", "/admin/", "/", "/rooms", "/rooms/x"] {
        let err = build(
            AdminService::builder()
                .without_token()
                .room(layer.control())
                .prefix(prefix),
        );
        assert_eq!(
            err,
            ConfigError::InvalidPathPrefix {
                prefix: prefix.into()
            }
        );
        // A room may live under `/rooms`; the message says why the admin service may not.
        assert_eq!(
            err.to_string().contains("own paths start with /rooms"),
            prefix.starts_with("/rooms"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn mounted_with_full_paths_or_nested_or_behind_the_apps_own_auth() {
    let layer = room_builder().build().unwrap();
    let other = WaitingRoomLayer::builder("other")
        .capacity(7)
        .secret(SECRET)
        .build()
        .unwrap();
    // A server that hands the service full paths (here axum's fallback_service) names the
    // mount point with `.prefix`.
    let admin = AdminService::builder()
        .bearer_token(TOKEN)
        .room(layer.control())
        .room(other.control())
        .prefix("/ops/admin")
        .build()
        .unwrap();
    let g = serve(Router::new().fallback_service(admin.clone())).await;
    let client = Admin::new(&g);
    let r = client
        .send(Method::GET, "/ops/admin/rooms", None, b"")
        .await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::OK, json!({"rooms": [ROOM, "other"]}))
    );
    let r = client
        .send(Method::GET, "/ops/admin/rooms/other", None, b"")
        .await;
    assert_eq!(r.json()["capacity"], 7);
    for page in ["/ops/admin", "/ops/admin/"] {
        let r = g.send(Method::GET, page, &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{page}");
        assert!(
            r.text().contains("<title>Waiting room admin</title>"),
            "{page}"
        );
    }
    assert_eq!(
        client
            .send(Method::GET, "/elsewhere/rooms", None, b"")
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // The same service nested: axum removes the mount point, and the prefix is not needed.
    let g = serve(Router::new().nest_service("/ops/admin", admin)).await;
    let client = Admin::new(&g);
    let r = client
        .send(Method::GET, "/ops/admin/rooms/launch", None, b"")
        .await;
    assert_eq!(
        (r.status, r.json()["room"].as_str()),
        (StatusCode::OK, Some(ROOM))
    );
    for page in ["/ops/admin", "/ops/admin/"] {
        let r = g.send(Method::GET, page, &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{page}: {}", r.text());
    }

    // Without a token: the app's own auth is in front, and the service asks for nothing.
    let open = AdminService::builder()
        .without_token()
        .room(layer.control())
        .build()
        .unwrap();
    let g = serve(Router::new().nest_service("/admin", open)).await;
    let client = Admin {
        http: g.clone(),
        token: None,
    };
    let s = client.patch(json!({"capacity": 2, "rate": 5})).await;
    assert_eq!(
        (s["capacity"].as_u64(), s["rate"].as_u64()),
        (Some(2), Some(5))
    );
    let s = client.patch(json!({"rate": null})).await;
    assert_eq!(s["rate"], Value::Null);
}

/// A `HEAD` answer has the `Content-Length` of the `GET` body and no body (without it a client
/// such as `curl -X HEAD` waits for a body until the connection closes).
#[tokio::test]
async fn head_answers_have_the_length_of_the_get_body() {
    let (g, _layer) = memory_gateway().await;
    let admin = Admin::new(&g);
    for path in ["/admin/".to_owned(), "/admin/rooms".to_owned(), room_path()] {
        let get = admin.send(Method::GET, &path, None, b"").await;
        let head = admin.send(Method::HEAD, &path, None, b"").await;
        assert_eq!(
            (get.status, head.status),
            (StatusCode::OK, StatusCode::OK),
            "{path}"
        );
        assert!(!get.body.is_empty(), "{path}");
        assert_eq!(head.body.len(), 0, "HEAD {path}");
        assert_eq!(
            head.header(header::CONTENT_LENGTH),
            Some(&get.body.len().to_string()[..]),
            "HEAD {path}"
        );
        assert_eq!(
            head.header(header::CONTENT_TYPE),
            get.header(header::CONTENT_TYPE),
            "HEAD {path}"
        );
    }
    // Refusals too: the length of the error the GET would get.
    let nobody = Admin {
        http: g.clone(),
        token: None,
    };
    let get = nobody.send(Method::GET, &room_path(), None, b"").await;
    let head = nobody.send(Method::HEAD, &room_path(), None, b"").await;
    assert_eq!(head.status, StatusCode::UNAUTHORIZED);
    assert_eq!(head.body.len(), 0);
    assert_eq!(
        head.header(header::CONTENT_LENGTH),
        Some(&get.body.len().to_string()[..])
    );
}
