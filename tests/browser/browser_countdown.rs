//! The countdown to a scheduled opening in a real browser (Debian's headless Chromium through
//! chromedriver, as tests/browser/browser.rs): before the opening the browser is registered and
//! shown a countdown ("Opens in 0:04", by the room's clock), nobody is let in; once the room's
//! clock passes the opening, the page goes back to the page asked for by itself (at the opening
//! plus a random few seconds) and the browser is let in.
//!
//! Chromium and chromedriver are required: without them this test FAILS (it never passes by
//! skipping). `scripts/test` installs them.

use crate::common;
use crate::webdriver as browser;

use std::time::{Duration, Instant, UNIX_EPOCH};

use browser::{shop, text, Driver};
use common::{Site, T0};
use tower_waiting_room::WaitingRoomLayer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_countdown_page_joins_the_line_by_itself_at_the_opening() {
    let _one = browser::ONE_BROWSER.lock().await;
    let site = Site::start_with(
        WaitingRoomLayer::builder("sale")
            .capacity(1)
            .secure_cookies(false)
            .opens_at(UNIX_EPOCH + Duration::from_millis(T0 + 4_000)),
        shop,
    )
    .await;
    let driver = Driver::start().await;
    let client = driver.browser(1280, 800).await;
    let base = format!("http://{}", site.http.addr);
    client.goto(&format!("{base}/drop?id=1")).await.unwrap();

    // Registered, counting down by the room's clock (the browser's is a year off).
    let started = Instant::now();
    loop {
        let heading = text(&client, "#twr-heading").await;
        if heading.starts_with("Opens in 0:0") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no countdown: {heading:?}; page: {}",
            client.source().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = site.stats().await;
    assert_eq!(
        (s.admitted, s.granted, s.waiting),
        (0, 0, 1),
        "registered, not admitted"
    );

    // The room's clock reaches the opening; the page comes back by itself after its
    // Retry-After (4 s) plus up to 3 s of jitter, and the browser is let in.
    site.clock.advance(Duration::from_millis(4_000));
    let opened = Instant::now();
    loop {
        if text(&client, "h1").await == "You are in" {
            break;
        }
        assert!(
            opened.elapsed() < Duration::from_secs(20),
            "the page did not come back by itself: {}",
            client.source().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        client
            .current_url()
            .await
            .unwrap()
            .as_str()
            .ends_with("/drop?id=1"),
        "back to the page asked for"
    );
    let s = site.stats().await;
    assert_eq!((s.admitted, s.waiting), (1, 0));
    client.close().await.unwrap();
}
