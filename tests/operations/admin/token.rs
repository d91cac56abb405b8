//! The bearer token: needed for every call but the dashboard's page, answered with the challenge
//! RFC 6750 has, and never shown.

use super::clients::{room_path, settings, Admin};
use super::{memory_gateway, ROOM, TOKEN};

use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use serde_json::json;
use tower_waiting_room::admin::AdminService;
use tower_waiting_room::SessionId;

#[tokio::test]
async fn the_token_is_needed_and_never_shown() {
    let (g, layer) = memory_gateway().await;
    let before = settings(&Admin::new(&g).status().await);
    for (token, challenge) in [
        (None, "Bearer realm=\"waiting room admin\""),
        (
            Some("wrong"),
            "Bearer realm=\"waiting room admin\", error=\"invalid_token\"",
        ),
        // The right length, one byte off.
        (
            Some(&TOKEN.replace('0', "1")[..]),
            "Bearer realm=\"waiting room admin\", error=\"invalid_token\"",
        ),
        (
            Some(&format!("{TOKEN}x")[..]),
            "Bearer realm=\"waiting room admin\", error=\"invalid_token\"",
        ),
    ] {
        let admin = Admin {
            http: g.clone(),
            token: token.map(str::to_owned),
        };
        for (method, path) in [
            (Method::GET, "/admin/rooms".to_owned()),
            (Method::GET, room_path()),
            (Method::PATCH, room_path()),
            (Method::POST, format!("{}/release", room_path())),
            (
                Method::DELETE,
                format!("{}/sessions/{}", room_path(), SessionId::random()),
            ),
            (Method::GET, "/admin/nowhere".to_owned()),
        ] {
            let r = admin
                .json(method.clone(), &path, json!({"capacity": 9, "count": 1}))
                .await;
            assert_eq!(
                r.status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {token:?}"
            );
            assert_eq!(r.header(header::WWW_AUTHENTICATE), Some(challenge));
            assert!(r.json()["error"].is_string());
        }
    }
    // Another scheme is no bearer token.
    let basic = g
        .send(
            Method::GET,
            &room_path(),
            &[(
                header::AUTHORIZATION,
                HeaderValue::from_str(&format!("Basic {TOKEN}")).unwrap(),
            )],
        )
        .await;
    assert_eq!(basic.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        settings(&Admin::new(&g).status().await),
        before,
        "a refused call changed the room"
    );

    // The page itself holds no data: no token needed; it may run only its own script.
    let page = g.send(Method::GET, "/admin/", &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(
        page.header(header::CONTENT_TYPE),
        Some("text/html; charset=utf-8")
    );
    assert!(page.text().contains("Waiting room admin"));
    assert!(!page.text().contains(TOKEN));
    let csp = page.header(header::CONTENT_SECURITY_POLICY).unwrap();
    assert!(
        csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'sha256-"),
        "{csp}"
    );
    let head = g.send(Method::HEAD, "/admin/", &[]).await;
    assert_eq!((head.status, head.body.len()), (StatusCode::OK, 0));

    // Never in Debug, of the builder or the service.
    let builder = AdminService::builder()
        .bearer_token(TOKEN)
        .room(layer.control());
    assert!(!format!("{builder:?}").contains(TOKEN));
    let svc = builder.build().unwrap();
    let shown = format!("{svc:?}");
    assert!(
        !shown.contains(TOKEN) && !shown.contains("0123456789"),
        "{shown}"
    );
    assert!(
        shown.contains("bearer token") && shown.contains(ROOM),
        "{shown}"
    );
}

/// RFC 6750, 3.1: no credentials (no header, or another scheme) get the bare challenge; a bearer
/// header without a token is a malformed request; a token that is not the one is invalid.
#[tokio::test]
async fn the_challenge_says_what_was_wrong_as_rfc_6750_has_it() {
    let (g, _layer) = memory_gateway().await;
    let bare = "Bearer realm=\"waiting room admin\"";
    let request = "Bearer realm=\"waiting room admin\", error=\"invalid_request\"";
    let token = "Bearer realm=\"waiting room admin\", error=\"invalid_token\"";
    let basic = format!("Basic {TOKEN}");
    for (authorization, challenge) in [
        (None, bare),
        (Some(&basic[..]), bare),
        (Some("Digest username=\"op\""), bare),
        (Some("Bearerish abc"), bare),
        (Some("Bearer"), request),
        (Some("bearer"), request),
        (Some("Bearer    "), request),
        (Some("Bearer wrong"), token),
        (Some("BEARER wrong"), token),
    ] {
        let headers: Vec<(HeaderName, HeaderValue)> = authorization
            .map(|a| (header::AUTHORIZATION, HeaderValue::from_str(a).unwrap()))
            .into_iter()
            .collect();
        let r = g.send(Method::GET, &room_path(), &headers).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{authorization:?}");
        assert_eq!(
            r.header(header::WWW_AUTHENTICATE),
            Some(challenge),
            "{authorization:?}"
        );
        assert!(r.json()["error"].is_string(), "{authorization:?}");
    }
}
