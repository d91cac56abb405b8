//! Matching's HTTP API over real HTTP on loopback: the contract of `docs/matching.md`, the
//! hooks, both identities, and bad input answered `400` with nothing written.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{serve, Http, Reply};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::service::{MatchingService, MatchingServiceError};
use tower_waiting_room_matching::store::MemoryMatchStore;
use tower_waiting_room_matching::{
    AppGroupId, ConfirmOutcome, MatchState, Matchmaker, Topic, UserId,
};

const PATH: &str = "/api/matching";

fn matchmaker(clock: &ManualClock) -> Matchmaker {
    Matchmaker::builder()
        .build(MemoryMatchStore::with_clock(clock.clone()))
        .unwrap()
}

/// The service with users named by an `X-User` header (standing in for the app's auth).
fn by_header(m: Matchmaker) -> tower_waiting_room_matching::service::MatchingServiceBuilder {
    MatchingService::builder(m)
        .identify(|parts| Some(parts.headers.get("x-user")?.to_str().ok()?.to_owned()))
}

async fn start(service: MatchingService) -> Http {
    serve(axum::Router::new().route_service(PATH, service)).await
}

fn user(name: &str) -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_static("x-user"),
        HeaderValue::from_str(name).unwrap(),
    )
}

async fn send(
    http: &Http,
    method: Method,
    headers: &[(HeaderName, HeaderValue)],
    body: &str,
) -> Reply {
    let mut req: Request<Full<Bytes>> = http.request(method, PATH, headers);
    *req.body_mut() = Full::new(Bytes::from(body.to_owned()));
    req.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    http.exchange(req).await.expect("the server answers")
}

async fn join(http: &Http, name: &str, topic: &str, size: u64) -> Reply {
    let body = json!({"topic": topic, "size": size}).to_string();
    send(http, Method::POST, &[user(name)], &body).await
}

async fn get(http: &Http, name: &str) -> Reply {
    send(http, Method::GET, &[user(name)], "").await
}

#[tokio::test]
async fn a_pair_forms_in_the_second_join_and_is_confirmed_then_left() {
    let clock = ManualClock::new(1_000_000);
    let m = matchmaker(&clock);
    let http = start(by_header(m.clone()).build().unwrap()).await;

    let ann = join(&http, "ann", "rust", 2).await;
    assert_eq!(ann.status, StatusCode::ACCEPTED, "{}", ann.text());
    assert_eq!(ann.header("cache-control"), Some("no-store"));
    let body = ann.json();
    assert_eq!(body["state"], "waiting");
    assert_eq!(body["position"], 1);
    assert_eq!(body["waiting"], 1);
    assert_eq!(body["topic"], "rust");
    assert_eq!(body["size"], 2);
    assert_eq!(body["expires_in_seconds"], 300);

    clock.advance(Duration::from_secs(4));
    let polled = get(&http, "ann").await;
    assert_eq!(polled.status, StatusCode::OK, "a poll of a waiter is 200");
    assert_eq!(polled.json()["waited_seconds"], 4);

    let bob = join(&http, "bob", "rust", 2).await;
    assert_eq!(bob.status, StatusCode::OK, "{}", bob.text());
    let group = bob.json();
    assert_eq!(group["state"], "matched");
    assert_eq!(group["members"], json!(["ann", "bob"]), "oldest first");
    assert_eq!(group["confirmed"], false);
    assert_eq!(group["expires_in_seconds"], 30, "confirm_ttl");

    let seen = get(&http, "ann").await;
    assert_eq!(seen.status, StatusCode::OK);
    assert_eq!(seen.json()["group"], group["group"]);

    let id = group["group"].as_str().unwrap().parse().unwrap();
    let confirmed = m
        .confirm(id, AppGroupId::new("conv-1").unwrap())
        .await
        .unwrap();
    assert!(matches!(confirmed, ConfirmOutcome::Confirmed(_)));
    let seen = get(&http, "bob").await.json();
    assert_eq!(seen["confirmed"], true);
    assert_eq!(seen["app_group_id"], "conv-1");

    let left = send(&http, Method::DELETE, &[user("ann")], "").await;
    assert_eq!(left.status, StatusCode::OK);
    assert_eq!(left.json(), json!({"state": "idle", "was": "matched"}));
    let idle = get(&http, "ann").await;
    assert_eq!(idle.status, StatusCode::NOT_FOUND);
    assert_eq!(idle.json(), json!({"state": "idle"}));
    assert_eq!(
        get(&http, "bob").await.json()["state"],
        "matched",
        "bob keeps his"
    );
}

#[tokio::test]
async fn joining_twice_anywhere_is_a_conflict_with_where_one_is() {
    let clock = ManualClock::new(1_000_000);
    let http = start(by_header(matchmaker(&clock)).build().unwrap()).await;
    assert_eq!(
        join(&http, "ann", "go", 3).await.status,
        StatusCode::ACCEPTED
    );
    for (topic, size) in [("go", 3), ("go", 2), ("rust", 3)] {
        let again = join(&http, "ann", topic, size).await;
        assert_eq!(again.status, StatusCode::CONFLICT, "{topic} {size}");
        let body = again.json();
        assert_eq!(body["error"], "conflict");
        assert_eq!(body["current"]["state"], "waiting");
        assert_eq!(body["current"]["topic"], "go");
        assert_eq!(body["current"]["size"], 3);
    }
}

#[tokio::test]
async fn bad_input_is_a_400_that_writes_nothing() {
    let clock = ManualClock::new(1_000_000);
    let m = matchmaker(&clock);
    let http = start(by_header(m.clone()).build().unwrap()).await;
    let long = "x".repeat(65);
    let cases: Vec<(String, &str, &str)> = vec![
        ("not json".into(), "body", ""),
        ("[]".into(), "body", ""),
        (json!({"topic": "go"}).to_string(), "body", ""),
        (
            json!({"topic": "go", "size": 2, "extra": 1}).to_string(),
            "body",
            "",
        ),
        (json!({"topic": "go", "size": "2"}).to_string(), "body", ""),
        (json!({"topic": "go", "size": -1}).to_string(), "body", ""),
        (
            json!({"topic": "go", "size": 4}).to_string(),
            "size",
            "not_offered",
        ),
        (
            json!({"topic": "go", "size": 1}).to_string(),
            "size",
            "bad_size",
        ),
        (
            json!({"topic": "", "size": 2}).to_string(),
            "topic",
            "empty",
        ),
        (
            json!({"topic": long, "size": 2}).to_string(),
            "topic",
            "too_long",
        ),
        (
            json!({"topic": "a\u{0}b", "size": 2}).to_string(),
            "topic",
            "control_character",
        ),
        ("x".repeat(5_000), "body", "too_large"),
    ];
    for (body, field, reason) in cases {
        let res = send(&http, Method::POST, &[user("ann")], &body).await;
        assert_eq!(
            res.status,
            StatusCode::BAD_REQUEST,
            "{body:.80}: {}",
            res.text()
        );
        let answer = res.json();
        assert_eq!(answer["error"], "bad_request", "{body:.80}");
        assert_eq!(answer["field"], field, "{body:.80}");
        if !reason.is_empty() {
            assert_eq!(answer["reason"], reason, "{body:.80}");
        }
    }
    // A user id with a control character: 400, nothing written.
    let res = send(
        &http,
        Method::POST,
        &[(
            HeaderName::from_static("x-user"),
            HeaderValue::from_static("a\tb"),
        )],
        &json!({"topic": "go", "size": 2}).to_string(),
    )
    .await;
    assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
    assert_eq!(res.json()["field"], "user");
    assert_eq!(res.json()["reason"], "control_character");
    assert_eq!(
        m.status(UserId::new("ann").unwrap()).await.unwrap(),
        MatchState::Idle,
        "no store write"
    );
    let res = send(&http, Method::PUT, &[user("ann")], "").await;
    assert_eq!(res.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(res.header("allow"), Some("GET, POST, DELETE"));
}

#[tokio::test]
async fn the_apps_hooks_ban_check_topics_and_limit() {
    let clock = ManualClock::new(1_000_000);
    let calls = Arc::new(AtomicU64::new(0));
    let counted = calls.clone();
    let m = matchmaker(&clock);
    let http = start(
        by_header(m.clone())
            .topics(|t: &Topic| ["go", "rust"].contains(&t.as_str()))
            .banned(|u: &UserId, _| u.as_str() == "mallory")
            .limit(move |u: &UserId, _| {
                // Eager's second request onwards is over the limit.
                (u.as_str() == "eager" && counted.fetch_add(1, Ordering::SeqCst) > 0)
                    .then_some(Duration::from_secs(7))
            })
            .build()
            .unwrap(),
    )
    .await;
    let unknown = join(&http, "ann", "cobol", 2).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown.json()["error"], "unknown_topic");
    let banned = join(&http, "mallory", "go", 2).await;
    assert_eq!(banned.status, StatusCode::FORBIDDEN);
    assert_eq!(banned.json()["error"], "banned");
    assert_eq!(get(&http, "mallory").await.status, StatusCode::FORBIDDEN);
    // Leaving is never refused: a ban must not keep anyone in line to be matched.
    let left = send(&http, Method::DELETE, &[user("mallory")], "").await;
    assert_eq!(left.status, StatusCode::OK);
    assert_eq!(left.json()["was"], "idle");
    assert_eq!(
        join(&http, "eager", "go", 2).await.status,
        StatusCode::ACCEPTED
    );
    let limited = get(&http, "eager").await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.json()["error"], "rate_limited");
    assert_eq!(limited.retry_after(), 7);
    // A limited join is refused before the store: eager stays where the first join put him,
    // and nobody refused by a hook was written anywhere.
    let again = join(&http, "eager", "rust", 2).await;
    assert_eq!(again.status, StatusCode::TOO_MANY_REQUESTS);
    let MatchState::Waiting(w) = m.status(UserId::new("eager").unwrap()).await.unwrap() else {
        panic!("eager still waits in go")
    };
    assert_eq!(w.queue.topic.as_str(), "go");
    for refused in ["ann", "mallory"] {
        assert_eq!(
            m.status(UserId::new(refused).unwrap()).await.unwrap(),
            MatchState::Idle,
            "{refused}: refused by a hook, nothing written"
        );
    }
}

#[tokio::test]
async fn without_the_apps_identity_a_signed_cookie_says_who_and_a_tampered_one_is_none() {
    let clock = ManualClock::new(1_000_000);
    let http = start(
        MatchingService::builder(matchmaker(&clock))
            .session_cookie([7u8; 32], true)
            .clock(clock.clone())
            .build()
            .unwrap(),
    )
    .await;
    // Nobody yet: GET is idle, DELETE leaves nothing.
    assert_eq!(
        send(&http, Method::GET, &[], "").await.status,
        StatusCode::NOT_FOUND
    );
    let body = json!({"topic": "go", "size": 2}).to_string();
    let first = send(&http, Method::POST, &[], &body).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text());
    let set = first.set_cookie("__twr_match").expect("a session cookie");
    for attr in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/"] {
        assert!(set.contains(attr), "{attr} in {set}");
    }
    let value = common::cookie_value_of(&set).to_owned();
    let cookie = |v: &str| {
        (
            http::header::COOKIE,
            HeaderValue::from_str(&format!("__twr_match={v}")).unwrap(),
        )
    };
    let mine = send(&http, Method::GET, &[cookie(&value)], "").await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.text());
    assert_eq!(mine.json()["position"], 1);
    // One flipped character: no session, not a 500.
    let mut tampered = value.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let other = send(&http, Method::GET, &[cookie(&tampered)], "").await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "{}", other.text());
    // A second browser pairs with the first.
    let second = send(&http, Method::POST, &[], &body).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text());
    assert_eq!(second.json()["members"].as_array().unwrap().len(), 2);
    // Short secrets are refused at build time.
    let err = MatchingService::builder(matchmaker(&clock))
        .session_cookie([7u8; 31], true)
        .build()
        .unwrap_err();
    assert!(matches!(err, MatchingServiceError::Key(_)), "{err}");
    let err = MatchingService::builder(matchmaker(&clock))
        .build()
        .unwrap_err();
    assert_eq!(err, MatchingServiceError::NoIdentity);
}

#[tokio::test]
async fn an_unauthenticated_request_is_401_to_join_and_idle_to_look() {
    let clock = ManualClock::new(1_000_000);
    let http = start(by_header(matchmaker(&clock)).build().unwrap()).await;
    let body = json!({"topic": "go", "size": 2}).to_string();
    let res = send(&http, Method::POST, &[], &body).await;
    assert_eq!(res.status, StatusCode::UNAUTHORIZED);
    assert_eq!(res.json()["error"], "unauthenticated");
    let res = send(&http, Method::GET, &[], "").await;
    assert_eq!(res.status, StatusCode::NOT_FOUND);
    let _: Value = res.json();
}

/// A join another site's page made the browser send (a form posting `text/plain` that reads
/// as JSON, which needs no preflight; the app's login cookie goes with it) is a `403` that
/// writes nothing; the same from the app's own pages, or from a client that is no browser,
/// joins. Leaving and looking stay open to every origin.
#[tokio::test]
async fn a_join_from_another_sites_page_is_refused() {
    let clock = ManualClock::new(1_000_000);
    let http = start(by_header(matchmaker(&clock)).build().unwrap()).await;
    let form = "{\"topic\":\"x=\",\"size\":2}\r\n";
    let site = |value: &'static str| {
        (
            HeaderName::from_static("sec-fetch-site"),
            HeaderValue::from_static(value),
        )
    };
    for value in ["cross-site", "Cross-Site"] {
        let res = send(&http, Method::POST, &[user("ann"), site(value)], form).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert_eq!(res.json()["error"], "cross_site");
        assert_eq!(
            get(&http, "ann").await.status,
            StatusCode::NOT_FOUND,
            "nothing written"
        );
    }
    let res = send(
        &http,
        Method::POST,
        &[user("ann"), site("same-origin")],
        form,
    )
    .await;
    assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
    let res = send(&http, Method::POST, &[user("bob")], form).await;
    assert_eq!(
        res.status,
        StatusCode::OK,
        "a client that is no browser: {}",
        res.text()
    );
    let res = send(
        &http,
        Method::DELETE,
        &[user("bob"), site("cross-site")],
        "",
    )
    .await;
    assert_eq!(res.status, StatusCode::OK, "leaving is never refused");
}
