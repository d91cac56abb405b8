//! Edge tokens (`edge_tokens`): an admitted visitor gets, beside the admission cookie, a
//! short-lived Ed25519 token an edge can verify with the room's public keys; it is issued with
//! every admission token (at admission and at each refresh) and never on the fast path; the
//! keys are served as a JWKS; leaving removes it; tokens a room cannot issue are refused at
//! build. The format's own rules are unit tests of `src/edge/`; the edge verifier's agreement
//! with the crate is `tests/operations/edge_node.rs`.

use crate::common::{call, cookie_value_of, PREFIX};

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use http::{header, HeaderValue, Method, StatusCode};
use tower_waiting_room::clock::Clock;
use tower_waiting_room::edge::{EdgeClaims, EdgeKey, EdgeKeySet, EdgeTokens};
use tower_waiting_room::testing::TestRoom;
use tower_waiting_room::{ConfigError, WaitingRoomLayer};

/// The room's keys: current `k2`, next `k3`, previous `k1` (made again for each use: a key set
/// is no value to copy around).
fn keys() -> EdgeKeySet {
    let key = |id: &str, byte| EdgeKey::from_seed(id, &[byte; 32]).unwrap();
    EdgeKeySet::new(key("k2", 2))
        .with_next(key("k3", 3))
        .with_previous(key("k1", 1))
}

fn room(name: &str) -> (TestRoom, Router) {
    let room = TestRoom::with(
        WaitingRoomLayer::builder(name)
            .capacity(2)
            .refresh(Duration::from_secs(15))
            .edge_tokens(EdgeTokens::new(keys()).scope(["/shop", "/checkout/"])),
    );
    let app = Router::new()
        .route("/shop/{*rest}", get(|| async { "shop" }))
        .layer(room.layer());
    (room, app)
}

fn edge_cookie(name: &str) -> String {
    format!("wr_{name}_e")
}

fn now_secs(room: &TestRoom) -> u64 {
    room.clock().now_ms() / 1000
}

#[tokio::test]
async fn an_admission_carries_an_edge_token_the_rooms_keys_verify() {
    let (room, app) = room("edge-in");
    let (session, queue) = room.queue_cookie();
    let reply = call(&app, Method::GET, "/shop/a", &[(header::COOKIE, queue)]).await;
    assert_eq!(reply.status, StatusCode::OK);
    let set = reply
        .set_cookie(&edge_cookie("edge-in"))
        .expect("an edge token beside the admission token");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Lax"),
        "{set}"
    );
    assert!(set.contains("Max-Age=60"), "{set}");
    let token = cookie_value_of(&set);
    let claims = EdgeClaims::verify(&keys(), "edge-in", token, now_secs(&room)).unwrap();
    assert_eq!(claims.session, session);
    assert_eq!(claims.scope, ["/shop", "/checkout/"]);
    assert_eq!(claims.expires_at - claims.issued_at, 60);
    assert!(
        token.starts_with("wr1.k2."),
        "signed with the current key: {token}"
    );
    // Not a token of another room, and not one after its lifetime and the skew.
    assert_eq!(
        EdgeClaims::verify(&keys(), "other", token, now_secs(&room)),
        None
    );
    assert_eq!(
        EdgeClaims::verify(&keys(), "edge-in", token, claims.expires_at + 10),
        None
    );
}

#[tokio::test]
async fn the_edge_token_comes_with_each_admission_token_never_per_request() {
    let (room, app) = room("edge-refresh");
    let (_, queue) = room.queue_cookie();
    let first = call(&app, Method::GET, "/shop/a", &[(header::COOKIE, queue)]).await;
    let admission = first.cookie_value("wr_edge-refresh_a").unwrap();
    let admitted = HeaderValue::from_str(&format!("wr_edge-refresh_a={admission}")).unwrap();
    // The fast path (a fresh admission token): nothing signed, nothing set.
    for _ in 0..3 {
        let fast = call(
            &app,
            Method::GET,
            "/shop/b",
            &[(header::COOKIE, admitted.clone())],
        )
        .await;
        assert_eq!(fast.status, StatusCode::OK);
        assert!(fast.set_cookies().is_empty(), "{:?}", fast.set_cookies());
    }
    // Past `refresh`: the slot is extended, and a new edge token comes with the new admission
    // token.
    room.clock().advance(Duration::from_secs(16));
    let refreshed = call(&app, Method::GET, "/shop/c", &[(header::COOKIE, admitted)]).await;
    assert_eq!(refreshed.status, StatusCode::OK);
    let set = refreshed.set_cookie(&edge_cookie("edge-refresh")).unwrap();
    let claims = EdgeClaims::verify(
        &keys(),
        "edge-refresh",
        cookie_value_of(&set),
        now_secs(&room),
    );
    assert_eq!(claims.unwrap().issued_at, now_secs(&room));
}

#[tokio::test]
async fn the_keys_are_a_jwks_an_edge_can_cache() {
    let (_room, app) = room("edge-keys");
    let reply = call(&app, Method::GET, &format!("{PREFIX}/edge-keys/keys"), &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reply.header(header::CACHE_CONTROL),
        Some("public, max-age=300")
    );
    let jwks = reply.json();
    let keys_seen: Vec<(&str, &str)> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["kid"].as_str().unwrap(), k["x"].as_str().unwrap()))
        .collect();
    let expected: Vec<(String, String)> = keys()
        .keys()
        .map(|k| (k.id().to_owned(), URL_SAFE_NO_PAD.encode(k.public_key())))
        .collect();
    assert_eq!(
        keys_seen,
        expected
            .iter()
            .map(|(k, x)| (k.as_str(), x.as_str()))
            .collect::<Vec<_>>()
    );
    for key in jwks["keys"].as_array().unwrap() {
        assert_eq!(
            (&key["kty"], &key["crv"], &key["alg"], &key["use"]),
            (
                &serde_json::json!("OKP"),
                &serde_json::json!("Ed25519"),
                &serde_json::json!("EdDSA"),
                &serde_json::json!("sig")
            )
        );
        assert!(key.get("d").is_none(), "no private half: {key}");
    }
    let post = call(&app, Method::POST, &format!("{PREFIX}/edge-keys/keys"), &[]).await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn leaving_removes_the_edge_token() {
    let (room, app) = room("edge-leave");
    let (_, queue) = room.queue_cookie();
    let first = call(
        &app,
        Method::GET,
        "/shop/a",
        &[(header::COOKIE, queue.clone())],
    )
    .await;
    let admission = first.cookie_value("wr_edge-leave_a").unwrap();
    let both = HeaderValue::from_str(&format!(
        "{}; wr_edge-leave_a={admission}",
        queue.to_str().unwrap()
    ))
    .unwrap();
    let left = call(
        &app,
        Method::POST,
        &format!("{PREFIX}/edge-leave/leave"),
        &[(header::COOKIE, both)],
    )
    .await;
    assert_eq!(left.status, StatusCode::OK, "{:?}", left.body);
    let cleared = left.set_cookie(&edge_cookie("edge-leave")).unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
}

#[test]
fn tokens_a_room_cannot_issue_are_refused_at_build() {
    let build = |tokens: EdgeTokens| {
        WaitingRoomLayer::builder("edge")
            .capacity(2)
            .secret(crate::common::SECRET)
            .refresh(Duration::from_secs(15))
            .edge_tokens(tokens)
            .build()
    };
    for (tokens, why) in [
        (
            EdgeTokens::new(keys()).ttl(Duration::from_secs(10)),
            "shorter than the room's refresh",
        ),
        (
            EdgeTokens::new(keys()).ttl(Duration::from_secs(3_601)),
            "from 1 second to an hour",
        ),
        (EdgeTokens::new(keys()).scope(["shop"]), "path prefixes"),
        (EdgeTokens::new(keys()).scope(["/a b"]), "path prefixes"),
        (
            EdgeTokens::new(keys()).scope(Vec::<String>::new()),
            "path prefixes",
        ),
        (
            EdgeTokens::new(keys()).scope(vec![format!("/{}", "x".repeat(250)); 3]),
            "do not fit",
        ),
        (
            // The JWKS would list both under one id, and edges verify with the first.
            EdgeTokens::new(
                EdgeKeySet::new(EdgeKey::from_seed("k", &[1; 32]).unwrap())
                    .with_previous(EdgeKey::from_seed("k", &[2; 32]).unwrap()),
            ),
            "the same id",
        ),
    ] {
        match build(tokens) {
            Err(e @ ConfigError::InvalidEdgeTokens { .. }) => {
                assert!(e.to_string().contains(why), "{e}")
            }
            other => panic!("{why}: {:?}", other.map(|_| ())),
        }
    }
    assert!(build(EdgeTokens::new(keys())).is_ok());
}

#[tokio::test]
async fn a_settings_file_names_where_the_keys_are_and_never_holds_them() {
    use tower_waiting_room::config::{RoomFile, RoomFileError};
    let seed = URL_SAFE_NO_PAD.encode([7u8; 32]);
    let text = format!("current k7 {seed}\n");
    let dir = std::env::temp_dir().join(format!("edge-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("edge-keys");
    std::fs::write(&path, &text).unwrap();
    let file: RoomFile = toml::from_str(&format!(
        "room = \"edge-file\"\ncapacity = 2\nedge_keys_file = {:?}\n\
         edge_token_ttl = \"90s\"\nedge_scope = \"/shop /checkout/\"\n",
        path.display().to_string()
    ))
    .unwrap();
    assert!(!format!("{file:?}").contains(&seed), "{file:?}");
    let room = TestRoom::with(file.builder().unwrap());
    let app = Router::new()
        .route("/shop/{*rest}", get(|| async { "shop" }))
        .layer(room.layer());
    let keys = call(&app, Method::GET, &format!("{PREFIX}/edge-file/keys"), &[]).await;
    assert_eq!(keys.json()["keys"][0]["kid"], "k7");
    let (_, queue) = room.queue_cookie();
    let reply = call(&app, Method::GET, "/shop/a", &[(header::COOKIE, queue)]).await;
    let set = reply.set_cookie("wr_edge-file_e").unwrap();
    assert!(set.contains("Max-Age=90"), "{set}");
    let seven = EdgeKeySet::new(EdgeKey::from_seed("k7", &[7; 32]).unwrap());
    let claims =
        EdgeClaims::verify(&seven, "edge-file", cookie_value_of(&set), now_secs(&room)).unwrap();
    assert_eq!(claims.scope, ["/shop", "/checkout/"]);
    std::fs::remove_dir_all(&dir).ok();

    // From the environment: the keys themselves may be there.
    let env = RoomFile::from_env_vars(
        "WR",
        [
            ("WR_ROOM", "edge-env"),
            ("WR_CAPACITY", "2"),
            ("WR_EDGE_KEYS", text.as_str()),
        ],
    )
    .unwrap();
    assert!(!format!("{env:?}").contains(&seed));
    assert!(env
        .builder()
        .unwrap()
        .secret(crate::common::SECRET)
        .build()
        .is_ok());
    // A lifetime without keys, two places for them, a file that is not there, an unset
    // variable: refused, saying which; keys that are not keys: the build's error.
    let file = |extra: &str| -> RoomFile {
        toml::from_str(&format!("room = \"edge\"\ncapacity = 2\n{extra}")).unwrap()
    };
    type Is = fn(&RoomFileError) -> bool;
    let cases: [(&str, Is); 4] = [
        ("edge_token_ttl = \"30s\"", |e| {
            matches!(e, RoomFileError::EdgeTokensWithoutKeys)
        }),
        (
            "edge_keys_env = \"A_VARIABLE_NOBODY_SET_4242\"\nedge_keys_file = \"/x\"",
            |e| matches!(e, RoomFileError::ConflictingEdgeKeys),
        ),
        ("edge_keys_file = \"/nonexistent/edge-keys\"", |e| {
            matches!(e, RoomFileError::EdgeKeysFile { .. })
        }),
        ("edge_keys_env = \"A_VARIABLE_NOBODY_SET_4242\"", |e| {
            matches!(e, RoomFileError::EdgeKeysEnv { .. })
        }),
    ];
    for (extra, is) in cases {
        let e = file(extra).builder().map(|_| ()).unwrap_err();
        assert!(is(&e), "{extra}: {e}");
    }
    let bad = RoomFile::from_env_vars(
        "WR",
        [
            ("WR_ROOM", "edge"),
            ("WR_CAPACITY", "2"),
            ("WR_EDGE_KEYS", "current k1 short"),
        ],
    )
    .unwrap();
    let built = bad.builder().unwrap().secret(crate::common::SECRET).build();
    assert!(matches!(built, Err(ConfigError::InvalidEdgeKeys { .. })));
}
