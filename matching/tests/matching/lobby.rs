//! The lobby example (`examples/lobby.rs`) over real HTTP on loopback, on the system clock: two
//! users matched and the group confirmed by the example's own "app"; with `--no-confirm`, the
//! group undone after `--confirm-ttl` and its members back at the front of their queue; a trio
//! that falls back to a pair. Each lobby runs in this process (the example's own `build` and
//! `serve`, included as a module: what it runs is what is tested).

use crate::common;

// The example's own code, under its own name inside this module of the same name (the browser
// test, lobby_browser.rs, uses it from here: one binary loads the file once).
#[allow(dead_code, clippy::module_inception)]
#[path = "../../examples/lobby.rs"]
pub(crate) mod lobby;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Http, Reply};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

/// Starts the lobby with `args` on a free loopback port.
async fn start(args: &[&str]) -> Http {
    let opts = lobby::parse_args(args.iter().map(|s| s.to_string()))
        .unwrap()
        .expect("not --help");
    let app = lobby::build(&opts).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = Http::new(listener.local_addr().unwrap());
    tokio::spawn(lobby::serve(listener, app, std::future::pending()));
    http
}

async fn api(http: &Http, method: Method, user: Option<&str>, body: &str) -> Reply {
    let headers: Vec<(HeaderName, HeaderValue)> = user
        .map(|u| {
            (
                HeaderName::from_static("x-user"),
                HeaderValue::from_str(u).unwrap(),
            )
        })
        .into_iter()
        .collect();
    let mut req: Request<Full<Bytes>> = http.request(method, lobby::API, &headers);
    *req.body_mut() = Full::new(Bytes::from(body.to_owned()));
    http.exchange(req).await.expect("the lobby answers")
}

async fn join(http: &Http, user: &str, topic: &str, size: u64) -> Reply {
    let body = json!({"topic": topic, "size": size}).to_string();
    api(http, Method::POST, Some(user), &body).await
}

async fn get(http: &Http, user: &str) -> Value {
    api(http, Method::GET, Some(user), "").await.json()
}

/// Polls `user`'s state every 100 ms until `done` holds, for at most `within`.
async fn until(http: &Http, user: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let state = get(http, user).await;
        if done(&state) {
            return state;
        }
        assert!(
            start.elapsed() < within,
            "{user} did not get there within {within:?}; last: {state}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn two_users_are_matched_and_the_app_confirms_their_group() {
    let http = start(&["--port", "0"]).await;

    let page = http.send(Method::GET, "/", &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    let html = page.text();
    assert!(html.contains("X-User") && html.contains("<option value=\"rust\">rust</option>"));
    assert!(!html.contains("innerHTML"), "data goes in as textContent");

    let body = json!({"topic": "rust", "size": 2}).to_string();
    let no_user = api(&http, Method::POST, None, &body).await;
    assert_eq!(
        no_user.status,
        StatusCode::UNAUTHORIZED,
        "{}",
        no_user.text()
    );
    let empty_user = join(&http, "", "rust", 2).await;
    assert_eq!(empty_user.status, StatusCode::BAD_REQUEST);
    assert_eq!(empty_user.json()["field"], "user");
    assert_eq!(empty_user.json()["reason"], "empty");
    let unknown = join(&http, "ann", "cobol", 2).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown.json()["error"], "unknown_topic");

    let ann = join(&http, "ann", "rust", 2).await;
    assert_eq!(ann.status, StatusCode::ACCEPTED, "{}", ann.text());
    assert_eq!(ann.json()["position"], 1);
    let bob = join(&http, "bob", "rust", 2).await;
    assert_eq!(bob.status, StatusCode::OK, "{}", bob.text());
    let formed = Instant::now();
    let group = bob.json();
    assert_eq!(group["members"], json!(["ann", "bob"]), "oldest first");
    assert_eq!(group["confirmed"], false, "pending until the app confirms");
    let id = group["group"].as_str().unwrap().to_owned();

    // The app saw the pending group in bob's answer and confirms it about a second later.
    let seen = until(&http, "ann", Duration::from_secs(5), |s| {
        s["confirmed"] == true
    })
    .await;
    assert!(
        formed.elapsed() >= lobby::CONFIRM_AFTER - Duration::from_millis(50),
        "the app takes its time to record the conversation"
    );
    assert_eq!(seen["group"], id.as_str());
    assert_eq!(seen["app_group_id"], format!("conv-{id}"));
    assert_eq!(
        get(&http, "bob").await["app_group_id"],
        format!("conv-{id}")
    );

    let left = api(&http, Method::DELETE, Some("ann"), "").await;
    assert_eq!(left.json(), json!({"state": "idle", "was": "matched"}));
    assert_eq!(get(&http, "ann").await, json!({"state": "idle"}));
    assert_eq!(get(&http, "bob").await["confirmed"], true, "bob keeps his");
}

#[tokio::test]
async fn without_confirmation_the_group_is_undone_and_its_members_go_back_to_the_front() {
    let http = start(&["--port", "0", "--no-confirm", "--confirm-ttl", "2"]).await;
    join(&http, "ann", "go", 2).await;
    let first = join(&http, "bob", "go", 2).await.json();
    assert_eq!(first["members"], json!(["ann", "bob"]));
    assert_eq!(first["expires_in_seconds"], 2, "--confirm-ttl");
    // Carol comes after the group formed: she waits, first in line.
    let carol = join(&http, "carol", "go", 2).await;
    assert_eq!(carol.status, StatusCode::ACCEPTED, "{}", carol.text());
    assert_eq!(carol.json()["position"], 1);

    // Nobody confirms: after 2 s the group is undone, ann and bob go back to the FRONT of the
    // queue, ahead of carol, and (two of them at the front) form a new group at once.
    let again = until(&http, "ann", Duration::from_secs(6), |s| {
        s["group"] != first["group"]
    })
    .await;
    assert_eq!(again["state"], "matched", "{again}");
    assert_eq!(again["members"], json!(["ann", "bob"]), "back at the front");
    assert_eq!(again["confirmed"], false);
    let number = |g: &Value| -> u64 {
        let id = g["group"].as_str().unwrap();
        id.rsplit('.').next().unwrap().parse().unwrap()
    };
    assert!(number(&again) > number(&first), "a new group: {again}");
    let carol = get(&http, "carol").await;
    assert_eq!(carol["state"], "waiting", "{carol}");
    assert_eq!(carol["position"], 1);

    // Bob leaves the pending group: ann goes back to the front, and pairs with carol.
    let left = api(&http, Method::DELETE, Some("bob"), "").await;
    assert_eq!(left.json()["was"], "matched");
    let ann = until(&http, "ann", Duration::from_secs(3), |s| {
        s["state"] == "matched" && s["group"] != again["group"]
    })
    .await;
    assert_eq!(ann["members"], json!(["ann", "carol"]), "{ann}");
}

#[tokio::test]
async fn a_trio_with_two_people_falls_back_to_a_pair() {
    let http = start(&["--port", "0", "--fallback-after", "1"]).await;
    let ann = join(&http, "ann", "books", 3).await.json();
    assert_eq!(ann["estimate_seconds"], Value::Null, "alone: no estimate");
    let bob = join(&http, "bob", "books", 3).await.json();
    assert_eq!(bob["state"], "waiting", "{bob}");
    assert!(bob["estimate_seconds"].as_u64().unwrap() <= 1, "{bob}");
    // The ticker forms the pair once ann has waited 1 s, with nobody polling.
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    let group = get(&http, "bob").await;
    assert_eq!(group["state"], "matched", "{group}");
    assert_eq!(group["members"], json!(["ann", "bob"]));
    assert_eq!(
        (group["size"].as_u64(), group["queue_size"].as_u64()),
        (Some(2), Some(3))
    );
    until(&http, "ann", Duration::from_secs(3), |s| {
        s["confirmed"] == true
    })
    .await;
}

#[tokio::test]
async fn a_fallback_not_shorter_than_the_timeout_is_refused_by_flag_name() {
    let opts = lobby::parse_args(["--fallback-after", "60", "--timeout", "60"].map(String::from))
        .unwrap()
        .unwrap();
    let err = lobby::build(&opts).err().expect("refused");
    assert!(
        err.contains("--fallback-after") && err.contains("--timeout"),
        "{err}"
    );
}
