//! The lobby example's page in real browsers: two headless Chromium sessions (two profiles, as
//! two people), driven through chromedriver with `fantoccini`. Both join the same topic and
//! size; the first waits (position 1 of 1), the second's join forms the group, both pages show
//! it matched and then confirmed by the example's app, without a click (the page polls). A
//! member named with HTML (joined over HTTP) is shown as text, never as markup. Leave brings the
//! page back to idle. Screenshots of both pages go to `target/screenshots/lobby-*.png`.
//!
//! Chromium and chromedriver are required: without them this test FAILS (it never passes by
//! skipping), as in `tests/browser/browser.rs`. `scripts/test` installs them.

use crate::common;
use crate::webdriver as browser;

use crate::lobby::lobby;

use std::path::Path;

use bytes::Bytes;
use fantoccini::{Client, Locator};
use http::{HeaderName, HeaderValue, Method, StatusCode};
use http_body_util::Full;

use browser::{click, Driver};
use common::Http;

/// Waits until the element `css` shows `want`; a failure also says what `#error` showed.
async fn shows(client: &Client, css: &str, want: &str) {
    browser::shows(client, css, want, "#error").await
}

/// Opens the lobby, enters `name`, picks `topic` and size `size`, presses Join.
async fn join(client: &Client, url: &str, name: &str, topic: &str, size: u8) {
    client.goto(url).await.unwrap();
    let input = client.find(Locator::Css("#name")).await.unwrap();
    input.clear().await.unwrap();
    input.send_keys(name).await.unwrap();
    client
        .find(Locator::Css(&format!("#topic option[value={topic}]")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    click(client, &format!("input[name=size][value='{size}']")).await;
    click(client, "#join").await;
}

async fn screenshot(client: &Client, name: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = client.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("lobby-{name}.png")), png).unwrap();
}

#[tokio::test]
async fn two_browsers_are_matched_and_see_their_group_confirmed() {
    let _one = browser::ONE_BROWSER.lock().await;
    let opts = lobby::parse_args(["--port".to_owned(), "0".to_owned()])
        .unwrap()
        .unwrap();
    let app = lobby::build(&opts).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(lobby::serve(listener, app, std::future::pending()));
    let url = format!("http://{addr}/");

    let driver = Driver::start().await;
    let ann = driver.browser(900, 800).await;
    let bob = driver.browser(900, 800).await;

    join(&ann, &url, "ann", "music", 2).await;
    shows(
        &ann,
        "#headline",
        "Waiting for a group of 2 on \u{201c}music\u{201d}",
    )
    .await;
    shows(&ann, "#details", "1 of 1").await;
    screenshot(&ann, "waiting").await;

    join(&bob, &url, "bob", "music", 2).await;
    shows(&bob, "#headline", "Matched").await;
    shows(&bob, "#details", "ann, bob").await;
    // The app confirms about a second later; both pages see it by polling.
    for page in [&ann, &bob] {
        shows(page, "#details", "yes, as conv-").await;
        shows(page, "#headline", "your conversation is ready").await;
    }
    screenshot(&bob, "matched").await;
    // The name is kept for the next visit.
    ann.refresh().await.unwrap();
    shows(&ann, "#details", "ann, bob").await;

    // A name with markup, joined over HTTP, then matched with ann's browser: shown as text.
    click(&ann, "#leave").await;
    shows(&ann, "#headline", "Not waiting").await;
    let evil = "<img src=x onerror=document.title='owned'>";
    let http = Http::new(addr);
    let mut req = http.request(
        Method::POST,
        lobby::API,
        &[(
            HeaderName::from_static("x-user"),
            HeaderValue::from_str(evil).unwrap(),
        )],
    );
    *req.body_mut() = Full::new(Bytes::from_static(br#"{"topic": "go", "size": 2}"#));
    let res = http.exchange(req).await.unwrap();
    assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
    join(&ann, &url, "ann", "go", 2).await;
    shows(&ann, "#details", &format!("{evil}, ann")).await;
    let images = ann.find_all(Locator::Css("#status img")).await.unwrap();
    assert!(images.is_empty(), "a member's name became markup");
    assert_eq!(ann.title().await.unwrap(), "Topic lobby");

    ann.close().await.unwrap();
    bob.close().await.unwrap();
}
