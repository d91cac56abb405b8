//! The waiting page's way through the line: it takes the browser in by itself when the slot frees
//! (a second tab sharing the place, leaving and joining again), far back in a moving line with its
//! screenshots and "Leave the line", and a tab away for longer than `queue_ttl` that keeps its
//! place.

use super::{admit, eventually, held_room, text};
use crate::common;
use crate::webdriver as browser;

use std::path::{Path, PathBuf};
use std::time::Duration;

use fantoccini::Locator;
use http::{Method, StatusCode};
use tower_waiting_room::{RoomPolicy, SessionId, WaitingRoomLayer};

use browser::{shop, Driver, ONE_BROWSER};
use common::*;

fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_lets_the_browser_in_by_itself_when_the_slot_frees() {
    let _one = ONE_BROWSER.lock().await;
    let site = Site::start_with(
        WaitingRoomLayer::builder("shop")
            .capacity(1)
            .secure_cookies(false),
        shop,
    )
    .await;
    let mut holder = admit(&site).await;
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 800).await;
    let base = format!("http://{}", site.http.addr);

    // The browser arrives: redirect, queue cookie, and the waiting page with its position.
    browser
        .goto(&format!("{base}/shop/item?id=7"))
        .await
        .unwrap();
    assert_eq!(
        text(&browser, "#twr-position").await.as_deref(),
        Some("You are number\n1\nin line"),
        "page: {}",
        browser.source().await.unwrap()
    );
    assert_eq!(text(&browser, "#twr-ahead").await.as_deref(), Some("0"));
    assert_eq!(browser.title().await.unwrap(), "You are in line");
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (1, 0, 1));

    // A second tab of the same browser shares the place: still number 1, one waiter.
    let first_tab = browser.window().await.unwrap();
    let tab = browser.new_window(true).await.unwrap();
    browser.switch_to_window(tab.handle).await.unwrap();
    browser
        .goto(&format!("{base}/shop/item?id=7"))
        .await
        .unwrap();
    assert_eq!(
        text(&browser, "#twr-position-number").await.as_deref(),
        Some("1")
    );
    assert_eq!(site.stats().await.waiting, 1, "two tabs, one place");

    // Leaving in the second tab gives the place up; the first tab notices at its next poll
    // and offers to join again, which puts the browser back in line (at the front: nobody
    // else waits).
    browser
        .find(Locator::Css("#twr-leave button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually(Duration::from_secs(5), "the tab says it left", || async {
        text(&browser, "#twr-heading").await.as_deref() == Some("You left the line")
    })
    .await;
    assert_eq!(site.stats().await.waiting, 0);
    browser.close_window().await.unwrap();
    browser.switch_to_window(first_tab).await.unwrap();
    eventually(
        Duration::from_secs(8),
        "the other tab sees the place is gone",
        || async {
            text(&browser, "#twr-heading").await.as_deref() == Some("You are no longer in line")
        },
    )
    .await;
    browser
        .find(Locator::LinkText("Join the line again"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually(Duration::from_secs(5), "back in line", || async {
        text(&browser, "#twr-position-number").await.as_deref() == Some("1")
    })
    .await;
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (1, 0, 1));

    // The page polls the status endpoint by itself.
    let polls = site.store.calls().poll;
    eventually(Duration::from_secs(10), "the page polls", || async {
        site.store.calls().poll > polls
    })
    .await;

    // The holder leaves; the page takes the browser in, with no click, within its polling
    // interval (Retry-After at the front is 2 s, with ±20 % jitter).
    let r = site
        .http
        .visit(&mut holder, Method::POST, &site.leave_path())
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let took = eventually(Duration::from_secs(8), "the browser is let in", || async {
        text(&browser, "h1").await.as_deref() == Some("You are in")
    })
    .await;
    println!("let in {took:?} after the slot was freed");
    let url = browser.current_url().await.unwrap();
    assert_eq!(
        (url.path(), url.query()),
        ("/shop/item", Some("id=7")),
        "back to the page asked for"
    );
    let s = site.stats().await;
    assert_eq!(
        (s.admitted, s.granted, s.waiting),
        (1, 0, 0),
        "the browser claimed the slot"
    );
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn far_back_in_a_moving_line_then_leaving() {
    let _one = ONE_BROWSER.lock().await;
    let (site, mut inside) = held_room("launch").await;
    let policy: RoomPolicy = site.layer.config().policy().clone();
    let store = site.store.inner();
    use tower_waiting_room::store::Store;

    // A line that has moved at one admission every 5 s for five minutes, 1,341 still waiting.
    let moved = 60;
    let line: Vec<SessionId> = (0..1_341 + moved).map(|_| SessionId::random()).collect();
    for &s in &line {
        store.enter(&policy, s).await.unwrap();
    }
    for &next in &line[..moved] {
        site.clock.advance(Duration::from_secs(5));
        assert!(store.release(&policy, inside).await.unwrap());
        inside = next;
    }
    site.clock.advance(Duration::from_secs(5));
    assert_eq!(site.stats().await.waiting, 1_341);

    let driver = Driver::start().await;
    let browser = driver.browser(1280, 800).await;
    let base = format!("http://{}", site.http.addr);
    browser.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(
        text(&browser, "#twr-position-number").await.as_deref(),
        Some("1,342")
    );
    assert_eq!(text(&browser, "#twr-ahead").await.as_deref(), Some("1,341"));
    assert_eq!(
        text(&browser, "#twr-waiting").await.as_deref(),
        Some("1,342")
    );
    // 1,341 ahead at one per 5 s is 6,705 s (1 h 52 min); shown with a margin sized from the
    // estimate's uncertainty (small for a line this regular and this long), rounded up to
    // minutes: at least the real wait, and not a quarter more.
    let eta = text(&browser, "#twr-eta").await.unwrap();
    let minutes = eta
        .strip_prefix("About ")
        .and_then(|rest| {
            let (h, m) = rest.split_once(" h")?;
            let m = m
                .trim()
                .strip_suffix("min")
                .map_or(Some(0), |m| m.trim().parse().ok())?;
            Some(h.parse::<u64>().ok()? * 60 + m)
        })
        .unwrap_or_else(|| panic!("not 'About N h M min': {eta}"));
    assert!((112..=140).contains(&minutes), "{eta}");
    assert!(
        text(&browser, "#twr-note")
            .await
            .unwrap()
            .contains("updates by itself"),
        "the page says it updates by itself"
    );
    let dir = screenshot_dir();
    let png = browser.screenshot().await.unwrap();
    std::fs::write(dir.join("waiting-page-desktop.png"), png).unwrap();

    // The same place on a phone: the queue cookie is the place.
    assert_eq!(site.stats().await.waiting, 1_342);
    // WebDriver sets cookies only for the current page's host, so the phone first opens a page
    // on 127.0.0.1 that is not the site (chromedriver's own): a page of the site would have
    // the browser fetch /favicon.ico through the room, which would queue it as a newcomer.
    let phone = driver.phone(390, 844).await;
    phone.goto(&format!("{}/status", driver.url)).await.unwrap();
    let place = browser.get_named_cookie(&site.q()).await.unwrap();
    phone.add_cookie(place).await.unwrap();
    phone.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(
        text(&phone, "#twr-position-number").await.as_deref(),
        Some("1,342")
    );
    assert_eq!(site.stats().await.waiting, 1_342, "one place for both");
    let png = phone.screenshot().await.unwrap();
    std::fs::write(dir.join("waiting-page-phone.png"), png).unwrap();

    // "Leave the line": the page says so, the place is gone, and so are the cookies.
    let releases = site.store.calls().release;
    browser
        .find(Locator::Css("#twr-leave button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually(Duration::from_secs(5), "the page says it left", || async {
        text(&browser, "#twr-heading").await.as_deref() == Some("You left the line")
    })
    .await;
    assert_eq!(site.store.calls().release, releases + 1);
    assert_eq!(site.stats().await.waiting, 1_341, "the place is gone");
    let cookies = browser.get_all_cookies().await.unwrap();
    assert!(
        cookies.iter().all(|c| !c.name().starts_with("wr_launch")),
        "the room's cookies are removed: {cookies:?}"
    );
    browser
        .goto(&format!("{base}{}", site.status_path()))
        .await
        .unwrap();
    let body = text(&browser, "body").await.unwrap();
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["state"], "unknown", "{status}");
    browser.close().await.unwrap();
    phone.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tab_away_for_longer_than_queue_ttl_keeps_its_place() {
    let _one = ONE_BROWSER.lock().await;
    let hour = Duration::from_secs(3_600);
    let queue_ttl = Duration::from_secs(60);
    let site = Site::start_with(
        WaitingRoomLayer::builder("quiet")
            .capacity(1)
            .active_ttl(hour)
            .grant_ttl(hour)
            .queue_ttl(queue_ttl)
            .abandon_after(Duration::from_secs(30 * 60))
            .secure_cookies(false),
        shop,
    )
    .await;
    let policy: RoomPolicy = site.layer.config().policy().clone();
    let store = site.store.inner();
    use tower_waiting_room::store::Store;

    // Someone inside, someone waiting ahead of the browser, and (after it) someone behind.
    let mut holder = admit(&site).await;
    let ahead = SessionId::random();
    store.enter(&policy, ahead).await.unwrap();
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 800).await;
    let base = format!("http://{}", site.http.addr);
    browser.goto(&format!("{base}/shop")).await.unwrap();
    assert_eq!(
        text(&browser, "#twr-position-number").await.as_deref(),
        Some("2"),
        "page: {}",
        browser.source().await.unwrap()
    );
    let behind = SessionId::random();
    store.enter(&policy, behind).await.unwrap();

    // The tab goes elsewhere (a page that is not the site): the waiting page and its polling
    // stop. Meanwhile the others check in, and the clock runs to three times queue_ttl.
    browser
        .goto(&format!("{}/status", driver.url))
        .await
        .unwrap();
    let polls = site.store.calls().poll;
    for _ in 0..6 {
        site.clock.advance(queue_ttl / 2);
        for s in [ahead, behind] {
            store.poll(&policy, s).await.unwrap();
        }
        let stats = site.stats().await;
        assert_eq!(
            (stats.admitted, stats.waiting),
            (1, 3),
            "the quiet tab still counts"
        );
    }
    assert_eq!(site.store.calls().poll, polls, "the tab was really quiet");

    // Back before its turn: the same place, ahead of the one who came after it, and the page
    // carries on polling from there.
    browser.back().await.unwrap();
    eventually(Duration::from_secs(5), "the page is back", || async {
        text(&browser, "#twr-position-number").await.is_some()
    })
    .await;
    assert_eq!(
        text(&browser, "#twr-position-number").await.as_deref(),
        Some("2"),
        "back after {:?} away: the same place",
        queue_ttl * 3
    );
    assert_eq!(site.stats().await.waiting, 3);
    let polls = site.store.calls().poll;
    eventually(Duration::from_secs(10), "the page polls again", || async {
        site.store.calls().poll > polls
    })
    .await;
    assert_eq!(
        text(&browser, "#twr-position-number").await.as_deref(),
        Some("2")
    );

    // Its turn comes: the one ahead gets the first slot, the browser the next, by itself.
    let r = site
        .http
        .visit(&mut holder, Method::POST, &site.leave_path())
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(matches!(
        store.enter(&policy, ahead).await.unwrap(),
        tower_waiting_room::store::Decision::Admitted { .. }
    ));
    eventually(Duration::from_secs(8), "the page moves up", || async {
        text(&browser, "#twr-position-number").await.as_deref() == Some("1")
    })
    .await;
    assert!(store.release(&policy, ahead).await.unwrap());
    eventually(Duration::from_secs(8), "the browser is let in", || async {
        text(&browser, "h1").await.as_deref() == Some("You are in")
    })
    .await;
    let stats = site.stats().await;
    assert_eq!(
        (stats.admitted, stats.granted, stats.waiting),
        (1, 0, 1),
        "the browser holds the slot; the one behind still waits"
    );
    browser.close().await.unwrap();
}
