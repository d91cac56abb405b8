//! The waiting page in a real browser: Debian's headless Chromium, driven through chromedriver
//! (started here on a free loopback port) with `fantoccini`.
//!
//! 1. A room of capacity 1 whose slot another visitor holds: the browser gets the waiting page
//!    with its position; a second tab shares the place, leaves the line, and the first tab
//!    notices and joins again; the slot is freed and the page takes the browser into the app by
//!    itself, within its polling interval.
//! 2. Far back in a moving line: the page shows the position, the people ahead and an estimate;
//!    a phone shares the place through the cookie; screenshots at phone and desktop widths go to
//!    `target/screenshots/`; "Leave the line" gives the place up.
//!
//! 3. A tab that goes quiet: the waiting page is left (the tab navigates elsewhere, so its
//!    polling stops) for longer than `queue_ttl`, and comes back before its turn: it still has
//!    its place, ahead of the one who came after it, and gets in at its turn.
//!
//! 4. Proof of work on: with no hook of the app's, the default risk scorer finds the browser low
//!    risk, and it goes straight in with no challenge (while a scripted client is challenged);
//!    with a hook that challenges everyone, the browser gets the challenge page, solves it with
//!    WebCrypto by itself (in Web Workers, one per core), sends the solution, and joins the line;
//!    the page's own measurement (workers, hashes tried, ms) is read and printed. `measure_proof_of_work_in_chromium` (ignored; run it by hand with
//!    `cargo test --test browser -- --ignored --nocapture measure`) measures what solving takes
//!    in Chromium at several difficulties.
//!
//! 5. The wait estimate, as the page words it (on a manual clock, so the room's age and pace are
//!    the test's): in a room too young to know its pace the page says "Estimating…", at first
//!    and after its script's next poll, and not that nobody has been let in (which it says once the
//!    line really stalls); and an estimate of a few minutes with a wide likely range is shown as
//!    that range in minutes, "{low}–{high} min", the numbers of the status JSON the browser's
//!    own visitor gets, by the page's script and by the server's rendering alike.
//!
//! 6. Listening instead of polling: far back in a line whose store keeps snapshots, the page
//!    opens the room's events endpoint (`EventSource`) and shows each new position as the line
//!    moves, with no status poll at all; near the head the stream ends and the page polls, and
//!    it takes the browser in at its turn. Three tabs of one browser: two streams for the one
//!    place; the third tab's replaces the first's, whose page then polls and never listens
//!    again, and every tab follows the line.
//!
//! Chromium and chromedriver are required: without them these tests FAIL (they never pass by
//! skipping). `scripts/test` installs them (`apt-get install chromium chromium-driver`).

use crate::common;
use crate::webdriver as browser;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use fantoccini::wd::TimeoutConfiguration;
use fantoccini::{Client, Locator};
use http::header::{HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::defences::proof_of_work::{is_solution, solve, ProofOfWork, PROOF_HEADER};
use tower_waiting_room::defences::risk::Risk;
use tower_waiting_room::{RoomPolicy, SessionId, WaitingRoomLayer};

use browser::{shop, Driver, ONE_BROWSER};
use common::*;

/// A visitor let in over HTTP (the shop answers HTML, not the echo JSON `Site::admit` reads).
pub(crate) async fn admit(site: &Site) -> Jar {
    let mut jar = site.arrive("/").await;
    let r = site.http.visit(&mut jar, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.text().contains("You are in"));
    assert!(jar.get(&site.a()).is_some(), "no admission cookie: {r:?}");
    jar
}

/// Waits until `check` holds, polling every 50 ms, or panics after `within` naming `what`.
pub(crate) async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) async fn text(client: &Client, css: &str) -> Option<String> {
    match client.find(Locator::Css(css)).await {
        Ok(e) => e.text().await.ok(),
        Err(_) => None,
    }
}

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

// ===== the wait estimate =====

/// The status JSON of the browser's own visitor, fetched in its page as the page's script does
/// (its cookies, `Accept: application/json`): what the page was told, to compare with what it
/// shows.
async fn status_in(client: &Client, site: &Site) -> serde_json::Value {
    const FETCH_STATUS: &str = r#"
var done = arguments[arguments.length - 1];
fetch(arguments[0], {credentials: "same-origin", cache: "no-store",
                     headers: {Accept: "application/json"}})
  .then(function (r) { return r.json(); })
  .then(done, function (e) { done({error: String(e)}); });
"#;
    let v = client
        .execute_async(FETCH_STATUS, vec![site.status_path().into()])
        .await
        .unwrap();
    assert!(v.get("error").is_none(), "{v}");
    v
}

/// A room of capacity 1 whose slot is held by a visitor let in over HTTP, with queue, grant and
/// admission times long enough that only the test moves the line.
/// A browser that joins the line of `site`, checked to be at `position` on a page that says
/// "Estimating…" (the driver must outlive the browser).
async fn join_estimating(site: &Site, position: &str) -> (Driver, Client) {
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 800).await;
    browser
        .goto(&format!("http://{}/", site.http.addr))
        .await
        .unwrap();
    assert_eq!(
        text(&browser, "#twr-position-number").await.as_deref(),
        Some(position),
        "page: {}",
        browser.source().await.unwrap()
    );
    assert_eq!(
        text(&browser, "#twr-eta").await.as_deref(),
        Some(ESTIMATING)
    );
    (driver, browser)
}

/// A room of capacity 1 with hour-long timeouts (the tests move its clock by minutes), its one
/// slot held by a visitor let in over HTTP, whose session is returned.
pub(crate) async fn held_room(room: &str) -> (Site, SessionId) {
    let hour = Duration::from_secs(3_600);
    let site = Site::start_with(
        WaitingRoomLayer::builder(room)
            .capacity(1)
            .active_ttl(hour)
            .grant_ttl(hour)
            .queue_ttl(hour)
            .secure_cookies(false),
        shop,
    )
    .await;
    let holder = admit(&site).await;
    let inside = SessionId::from_hex(&session_in(holder.get(&site.q()).unwrap())).unwrap();
    (site, inside)
}

const ESTIMATING: &str = "Estimating\u{2026}";
const UNKNOWN: &str = "Unknown: nobody has been let in for a few minutes";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_too_young_to_know_its_pace_says_estimating() {
    let _one = ONE_BROWSER.lock().await;
    let (site, holder) = held_room("young").await;
    let policy: RoomPolicy = site.layer.config().policy().clone();
    let store = site.store.inner();
    use tower_waiting_room::store::Store;
    let ahead = SessionId::random();
    store.enter(&policy, ahead).await.unwrap();

    // The room opened this instant (its first visitor took the one slot): the page says it is
    // estimating, not that nobody has been let in, and so does the JSON it is made from.
    let (_driver, browser) = join_estimating(&site, "2").await;
    let status = status_in(&browser, &site).await;
    assert_eq!(status["state"], "waiting", "{status}");
    assert_eq!(status["estimating"], true, "{status}");
    for field in ["eta_seconds", "eta_low_seconds", "eta_high_seconds"] {
        assert!(status[field].is_null(), "{field}: {status}");
    }

    // 20 s on, the one ahead is let in: the first admission that freed a slot, too few to know
    // the pace by. The page moves up at its next poll, and the same poll's estimate (its
    // script's `etaOf`, not the server's first rendering) still says estimating.
    site.clock.advance(Duration::from_secs(20));
    assert!(store.release(&policy, holder).await.unwrap());
    eventually(Duration::from_secs(8), "the page moves up", || async {
        text(&browser, "#twr-position-number").await.as_deref() == Some("1")
    })
    .await;
    let eta = text(&browser, "#twr-eta").await.unwrap();
    assert_eq!(eta, ESTIMATING);
    assert!(!eta.contains("Unknown") && !eta.contains("nobody"), "{eta}");
    let status = status_in(&browser, &site).await;
    assert_eq!(
        (&status["position"], &status["estimating"]),
        (&1.into(), &true.into()),
        "{status}"
    );
    assert!(status["eta_seconds"].is_null(), "{status}");

    // The contrast, so the test can tell the two apart: once nobody has been let in for more
    // than five minutes, the line is stalled, not young, and the page says so by itself.
    site.clock.advance(Duration::from_secs(6 * 60));
    eventually(Duration::from_secs(8), "the page says stalled", || async {
        text(&browser, "#twr-eta").await.as_deref() == Some(UNKNOWN)
    })
    .await;
    let status = status_in(&browser, &site).await;
    assert!(
        status.get("estimating").is_none() && status["eta_seconds"].is_null(),
        "stalled, not estimating: {status}"
    );
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncertain_estimate_shows_its_range_in_minutes() {
    let _one = ONE_BROWSER.lock().await;
    let (site, mut inside) = held_room("range").await;
    let policy: RoomPolicy = site.layer.config().policy().clone();
    let store = site.store.inner();
    use tower_waiting_room::store::Store;

    // Sixteen in line ahead of the browser, in a room that opened this instant: estimating.
    let line: Vec<SessionId> = (0..16).map(|_| SessionId::random()).collect();
    for &s in &line {
        store.enter(&policy, s).await.unwrap();
    }
    let (_driver, browser) = join_estimating(&site, "17").await;

    // The line moves at one every 30 s for six and a half minutes: thirteen let in (enough to
    // measure a pace by), the browser fourth. Few admissions and few ahead make an estimate of
    // a minute or two whose likely range spans minutes: the page shows the range.
    for &next in &line[..13] {
        site.clock.advance(Duration::from_secs(30));
        assert!(store.release(&policy, inside).await.unwrap());
        inside = next;
    }
    // The clock stands still from here, so every answer below is the same estimate; the page
    // gets it at its own next poll (its script's `etaOf`).
    eventually(Duration::from_secs(15), "the page moves up", || async {
        text(&browser, "#twr-position-number").await.as_deref() == Some("4")
    })
    .await;
    let status = status_in(&browser, &site).await;
    assert_eq!(status["position"], 4, "{status}");
    assert!(status.get("estimating").is_none(), "{status}");
    let secs = |field: &str| {
        status[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field} is not a number: {status}"))
    };
    let (shown, low, high) = (
        secs("eta_seconds"),
        secs("eta_low_seconds"),
        secs("eta_high_seconds"),
    );
    assert!(low <= shown && shown <= high, "{status}");
    // The page's rule (and `Texts::eta_of`'s): whole minutes, the low end at least 1, shown as a
    // range when the estimate is a minute or more and the range spans minutes under the hour.
    let (lo, hi) = (low.div_ceil(60).max(1), high.div_ceil(60));
    assert!(
        shown >= 60 && hi < 60 && hi > lo,
        "the setup should give a range of minutes: {status}"
    );
    let range = format!("{lo}\u{2013}{hi} min");
    println!("eta {shown} s in {low}..{high} s: {range}");
    assert_eq!(
        text(&browser, "#twr-eta").await.as_deref(),
        Some(range.as_str()),
        "{status}"
    );

    // The page as the server renders it (a reload) says the same.
    browser.refresh().await.unwrap();
    assert_eq!(
        text(&browser, "#twr-position-number").await.as_deref(),
        Some("4")
    );
    assert_eq!(
        text(&browser, "#twr-eta").await.as_deref(),
        Some(range.as_str())
    );
    assert_eq!(
        status_in(&browser, &site).await,
        status,
        "the same estimate"
    );
    browser.close().await.unwrap();
}

// ===== proof of work =====

fn proof_path(site: &Site) -> String {
    format!("{PREFIX}/{}/proof", site.room())
}

/// A visitor let in over HTTP with proof of work on: arrives, gets the challenge (JSON: no
/// `Accept: text/html`), solves it with the crate's reference solver, sends the solution, and
/// is let in.
async fn admit_proven(site: &Site, difficulty: u8) -> Jar {
    let mut jar = site.arrive("/").await;
    let r = site.http.visit(&mut jar, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{r:?}");
    let challenge = r.json()["challenge"]
        .as_str()
        .expect("a challenge")
        .to_owned();
    let proof = format!("{challenge}:{}", solve(&challenge, difficulty));
    let header = [(
        HeaderName::from_static(PROOF_HEADER),
        HeaderValue::from_str(&proof).unwrap(),
    )];
    let r = site
        .http
        .visit_with(&mut jar, Method::POST, &proof_path(site), &header)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json()["state"], "proven");
    let r = site.http.visit(&mut jar, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert!(r.text().contains("You are in"));
    assert!(jar.get(&site.a()).is_some(), "no admission cookie: {r:?}");
    jar
}

/// In front of the room: while closed, holds every `POST` to the proof endpoint (and keeps the
/// solution it carries), so the browser stays on the challenge page, its solution found and
/// its measurement on `#twr`, until the test opens the gate. Without it a lucky small nonce
/// would have the page gone before the test could look at it.
#[derive(Clone)]
struct ProofHold {
    open: Arc<tokio::sync::watch::Sender<bool>>,
    proofs: Arc<Mutex<Vec<String>>>,
}

impl ProofHold {
    fn new(open: bool) -> Self {
        Self {
            open: Arc::new(tokio::sync::watch::Sender::new(open)),
            proofs: Arc::default(),
        }
    }

    fn open(&self) {
        self.open.send_replace(true);
    }

    /// Closes the gate and forgets the proofs seen so far.
    fn close(&self) {
        self.open.send_replace(false);
        self.proofs.lock().unwrap().clear();
    }

    /// The `waiting-room-proof` headers received since the gate was last closed, in order.
    fn proofs(&self) -> Vec<String> {
        self.proofs.lock().unwrap().clone()
    }

    /// `router` with the hold in front of it.
    fn around(&self, router: Router) -> Router {
        let hold = self.clone();
        router.layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let hold = hold.clone();
                async move {
                    if req.method() == Method::POST && req.uri().path().ends_with("/proof") {
                        if let Some(p) = req.headers().get(PROOF_HEADER) {
                            let p = p.to_str().unwrap().to_owned();
                            hold.proofs.lock().unwrap().push(p);
                        }
                        let mut open = hold.open.subscribe();
                        let _ = open.wait_for(|open| *open).await;
                    }
                    next.run(req).await
                }
            },
        ))
    }
}

/// What the challenge page measured itself, read from `#twr` when the page sets
/// `data-twr-hashes` (a MutationObserver: the page goes on to the next one soon after).
#[derive(Debug)]
struct Measured {
    /// Web Workers that searched (`data-twr-workers`), worker `i` trying nonces `i`, `i + n`,
    /// `i + 2n`, ... in order; 0 when the page searched on its main thread, from 0 upward.
    workers: u64,
    /// Hashes tried, by all the workers together (see [`check_solution`]).
    hashes: u64,
    /// Milliseconds from the start of solving (starting the workers included) to the solution
    /// (`performance.now()`).
    ms: u64,
    /// The page's `data-twr` kind and difficulty, to be sure it was the challenge page.
    kind: String,
    difficulty: u64,
}

const OBSERVE_SOLUTION: &str = r#"
var done = arguments[arguments.length - 1];
var root = document.getElementById("twr");
if (!root) { done({error: "no #twr on " + location.href}); return; }
var data = JSON.parse(root.getAttribute("data-twr") || "{}");
function read() {
  var h = root.getAttribute("data-twr-hashes");
  if (h === null) return false;
  done({hashes: Number(h), ms: Number(root.getAttribute("data-twr-ms")),
        workers: Number(root.getAttribute("data-twr-workers")),
        kind: data.kind, difficulty: data.difficulty});
  return true;
}
if (read()) return;
new MutationObserver(function (_, observer) { if (read()) observer.disconnect(); })
  .observe(root, {attributes: true, attributeFilter: ["data-twr-hashes"]});
"#;

/// Waits (up to the session's script timeout) for the challenge page to find its solution.
async fn observe_solution(client: &Client) -> Measured {
    let v = client
        .execute_async(OBSERVE_SOLUTION, vec![])
        .await
        .unwrap_or_else(|e| panic!("no solution seen on the challenge page: {e}"));
    assert!(v.get("error").is_none(), "{v}");
    let int = |k: &str| {
        v[k].as_u64()
            .unwrap_or_else(|| panic!("{k} is not a whole number: {v}"))
    };
    Measured {
        workers: int("workers"),
        hashes: int("hashes"),
        ms: int("ms"),
        kind: v["kind"].as_str().unwrap_or_default().to_owned(),
        difficulty: int("difficulty"),
    }
}

/// Checks the solution the page sent, `<challenge>:<nonce>`, against what it measured: with
/// `n = max(workers, 1)` searches, search `i` tries `i`, `i + n`, `i + 2n`, ... in order, so
/// the nonce is the first solution of its own search, found at its `k`-th try; the page counts
/// those `k` hashes plus what each other search had reported by then (whole batches without a
/// solution: at most the tries before its own first solution). With one search, that is the
/// smallest nonce and exactly `nonce + 1` hashes.
fn check_solution(proof: &str, difficulty: u8, m: &Measured) {
    let (challenge, nonce) = proof.rsplit_once(':').unwrap();
    let nonce: u64 = nonce.parse().unwrap();
    assert!(is_solution(challenge, nonce, difficulty), "{proof}");
    let n = m.workers.max(1);
    let (own, k) = (nonce % n, nonce / n + 1);
    assert!(
        (0..k - 1).all(|j| !is_solution(challenge, own + j * n, difficulty)),
        "{proof}: the first solution of search {own} of {n}"
    );
    // The others' first solutions, looked for no further than the hashes counted.
    let others: u64 = (0..n)
        .filter(|&i| i != own)
        .map(|i| {
            (0..m.hashes)
                .find(|&j| is_solution(challenge, i + j * n, difficulty))
                .unwrap_or(m.hashes)
        })
        .sum();
    assert!(
        (k..=k + others).contains(&m.hashes),
        "{proof}: {m:?} counts {k} hashes of search {own} and at most {others} of the others"
    );
}

/// Hashes per second, `ms` counted as at least 1.
fn rate(hashes: u64, ms: u64) -> f64 {
    hashes as f64 * 1_000.0 / ms.max(1) as f64
}

/// Lets solving run for as long as it takes (the default script timeout is 30 s).
async fn long_scripts(client: &Client) {
    client
        .update_timeouts(TimeoutConfiguration::new(
            Some(Duration::from_secs(600)),
            Some(Duration::from_secs(60)),
            Some(Duration::from_secs(0)),
        ))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_proof_of_work_and_no_hook_a_browser_is_low_risk_and_goes_in_with_no_challenge() {
    const DIFFICULTY: u8 = 14;
    let _one = ONE_BROWSER.lock().await;
    // Holds any proof that would be sent: none is expected.
    let hold = ProofHold::new(false);
    let site = Site::start_with(
        WaitingRoomLayer::builder("shop")
            .capacity(1)
            .proof_of_work(ProofOfWork::new(DIFFICULTY))
            .secure_cookies(false),
        |layer| hold.around(shop(layer)),
    )
    .await;
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 800).await;
    let base = format!("http://{}", site.http.addr);

    // Chromium's first request: a User-Agent, an Accept-Language, its headers in a browser's
    // order; its queue cookie is issued cleared, and the next request goes to the store.
    browser.goto(&format!("{base}/")).await.unwrap();
    eventually(Duration::from_secs(10), "the browser is let in", || async {
        text(&browser, "h1").await.as_deref() == Some("You are in")
    })
    .await;
    assert!(hold.proofs().is_empty(), "no challenge was solved");
    let q = browser.get_named_cookie(&site.q()).await.unwrap();
    assert!(q.value().starts_with("p1."), "cleared: {}", q.value());
    assert_eq!(site.store.calls().enter, 1);
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (1, 0, 0));

    // A scripted client (no browser's headers) on the same room is challenged.
    let mut script = site.arrive("/").await;
    let r = site.http.visit(&mut script, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{r:?}");
    assert_eq!(r.json()["state"], "challenge");
    assert_eq!(
        site.store.calls().enter,
        1,
        "no store call before its proof"
    );
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_solves_the_proof_of_work_by_itself_and_joins_the_line() {
    const DIFFICULTY: u8 = 14;
    let _one = ONE_BROWSER.lock().await;
    let hold = ProofHold::new(true);
    let site = Site::start_with(
        WaitingRoomLayer::builder("shop")
            .capacity(1)
            .proof_of_work(ProofOfWork::new(DIFFICULTY))
            // Everyone solves it: left to the default scorer, a browser is low risk and skips it.
            .risk(|_| Risk::Medium)
            .secure_cookies(false),
        |layer| hold.around(shop(layer)),
    )
    .await;
    let mut holder = admit_proven(&site, DIFFICULTY).await;
    assert_eq!(site.store.calls().enter, 1);
    hold.close();

    let driver = Driver::start().await;
    let browser = driver.browser(1280, 800).await;
    long_scripts(&browser).await;
    let base = format!("http://{}", site.http.addr);

    // The browser arrives: redirect, queue cookie, and the challenge page, which starts solving
    // at once. Its solution is held at the door, so the page stays put until the test has seen
    // it.
    browser.goto(&format!("{base}/")).await.unwrap();
    let measured = observe_solution(&browser).await;
    assert_eq!(
        text(&browser, "#twr-heading").await.as_deref(),
        Some("Checking your browser"),
        "page: {}",
        browser.source().await.unwrap()
    );
    assert_eq!(browser.title().await.unwrap(), "Checking your browser");
    assert_eq!(
        (measured.kind.as_str(), measured.difficulty),
        ("challenge", u64::from(DIFFICULTY))
    );
    assert!(measured.hashes >= 1, "{measured:?}");
    // One Web Worker per core (up to 8), not the main-thread fallback.
    let cores = browser
        .execute("return navigator.hardwareConcurrency", vec![])
        .await
        .unwrap()
        .as_u64()
        .unwrap();
    assert_eq!(measured.workers, cores.clamp(1, 8), "{measured:?}");
    // (`ms` is unsigned: at least 0 by construction; read as a whole number above.)
    let Measured {
        hashes,
        ms,
        workers,
        ..
    } = measured;
    let rate = rate(hashes, ms);
    eprintln!(
        "proof of work in chromium: {hashes} hashes in {ms} ms = {rate:.0} hashes/s \
         ({workers} workers)"
    );

    // The page sent its solution by itself: the first solution of one worker's nonces, with
    // the hashes counted as `check_solution` says. The browser is not in line yet.
    eventually(
        Duration::from_secs(10),
        "the page sends its solution",
        || async { !hold.proofs().is_empty() },
    )
    .await;
    let proofs = hold.proofs();
    assert_eq!(proofs.len(), 1, "{proofs:?}");
    check_solution(&proofs[0], DIFFICULTY, &measured);
    let (challenge, _) = proofs[0].rsplit_once(':').unwrap();
    assert_eq!(site.store.calls().enter, 1, "no enter before the proof");
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (1, 0, 0));
    let q = browser.get_named_cookie(&site.q()).await.unwrap();
    assert!(
        !q.value().starts_with("p1."),
        "not proven yet: {}",
        q.value()
    );
    assert_eq!(
        session_in(q.value()),
        session_in(challenge),
        "its own session"
    );

    // Let the solution through: the page reloads by itself, and the browser joins the line.
    hold.open();
    eventually(
        Duration::from_secs(10),
        "the browser joins the line",
        || async { text(&browser, "#twr-position-number").await.as_deref() == Some("1") },
    )
    .await;
    assert_eq!(browser.title().await.unwrap(), "You are in line");
    assert!(
        site.store.calls().enter >= 2,
        "the browser entered after its proof"
    );
    let s = site.stats().await;
    assert_eq!((s.admitted, s.granted, s.waiting), (1, 0, 1));
    let proven = browser.get_named_cookie(&site.q()).await.unwrap();
    assert!(proven.value().starts_with("p1."), "{}", proven.value());
    assert_eq!(session_in(proven.value()), session_in(challenge));
    assert_eq!(hold.proofs().len(), 1, "one proof was enough");

    // The holder leaves; the page takes the browser in at its next poll, with no click.
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
    assert_eq!(url.path(), "/", "back to the page asked for");
    let s = site.stats().await;
    assert_eq!(
        (s.admitted, s.granted, s.waiting),
        (1, 0, 0),
        "the browser claimed the slot"
    );
    browser.close().await.unwrap();
}

/// What solving costs in Chromium (WebCrypto `crypto.subtle.digest`, as the page does it), at
/// several difficulties: each run is a fresh visitor on the challenge page, measured by the
/// page itself. By hand: `cargo test --test browser -- --ignored --nocapture measure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand (takes a minute or more)"]
async fn measure_proof_of_work_in_chromium() {
    let _one = ONE_BROWSER.lock().await;
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 800).await;
    long_scripts(&browser).await;
    let mut rows = Vec::new();
    for (difficulty, runs) in [(12u8, 10usize), (16, 6), (18, 4), (20, 3)] {
        let hold = ProofHold::new(false);
        let site = Site::start_with(
            WaitingRoomLayer::builder(format!("pow{difficulty}"))
                .capacity(1_000)
                .proof_of_work(ProofOfWork::new(difficulty))
                .risk(|_| Risk::Medium) // the browser solves it, low risk or not
                .secure_cookies(false),
            |layer| hold.around(shop(layer)),
        )
        .await;
        let base = format!("http://{}", site.http.addr);
        let (mut total_hashes, mut total_ms) = (0u64, 0u64);
        for run in 0..runs {
            // A fresh visitor: cookies are per host, not per port, so the last site's go too.
            if browser.current_url().await.unwrap().scheme() == "http" {
                browser.delete_all_cookies().await.unwrap();
            }
            hold.close();
            browser.goto(&format!("{base}/")).await.unwrap();
            let m = observe_solution(&browser).await;
            assert_eq!(
                (m.kind.as_str(), m.difficulty),
                ("challenge", u64::from(difficulty))
            );
            eventually(Duration::from_secs(10), "the solution is sent", || async {
                hold.proofs().len() == 1
            })
            .await;
            let proof = hold.proofs().pop().unwrap();
            check_solution(&proof, difficulty, &m);
            eprintln!(
                "  difficulty {difficulty}, run {}: {} hashes in {} ms = {:.0} hashes/s \
                 ({} workers)",
                run + 1,
                m.hashes,
                m.ms,
                rate(m.hashes, m.ms),
                m.workers
            );
            total_hashes += m.hashes;
            total_ms += m.ms;
            // The whole way through: proven, let in (capacity to spare).
            hold.open();
            eventually(
                Duration::from_secs(10),
                "let in after the proof",
                || async { text(&browser, "h1").await.as_deref() == Some("You are in") },
            )
            .await;
        }
        rows.push((difficulty, runs, total_hashes, total_ms));
    }
    eprintln!();
    eprintln!(
        "{:>10} {:>5} {:>13} {:>10} {:>10} {:>12} {:>14}",
        "difficulty", "runs", "total hashes", "total ms", "hashes/s", "mean s/solve", "expected s"
    );
    for (difficulty, runs, hashes, ms) in rows {
        let rate = rate(hashes, ms);
        eprintln!(
            "{:>10} {:>5} {:>13} {:>10} {:>10.0} {:>12.2} {:>14.2}",
            difficulty,
            runs,
            hashes,
            ms,
            rate,
            ms as f64 / 1_000.0 / runs as f64,
            (1u64 << difficulty) as f64 / rate,
        );
    }
    eprintln!("(expected s: 2^difficulty hashes, the mean a solution takes, at the measured rate)");
    browser.close().await.unwrap();
}

/// A site whose store keeps snapshots (far back in line, its waiting pages listen), every
/// path asked of it logged as it reaches the server (an EventSource's request included, which
/// the browser's own resource timing lists only once it ends); one visitor holds the only
/// slot, and 60 wait in line.
struct ListeningSite {
    site: Site,
    holder: Jar,
    ahead: Vec<SessionId>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ListeningSite {
    async fn start(room: &str) -> Self {
        use tower_waiting_room::store::Store;
        let hour = Duration::from_secs(3_600);
        let clock = clock();
        let store = TestStore::new(clock.clone()).with_snapshots();
        let layer = WaitingRoomLayer::builder(room)
            .capacity(1)
            .active_ttl(hour)
            .grant_ttl(hour)
            .queue_ttl(hour)
            .secure_cookies(false)
            .secret(SECRET)
            .clock(clock.clone())
            .store(store.clone())
            .build()
            .unwrap();
        let asked: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = Arc::clone(&asked);
        let http = serve(shop(layer.clone()).layer(tower::util::MapRequestLayer::new(
            move |req: http::Request<axum::body::Body>| {
                log.lock().unwrap().push(req.uri().path().to_owned());
                req
            },
        )))
        .await;
        let site = Site {
            layer,
            store,
            clock,
            http,
        };
        let holder = admit(&site).await;
        let policy: RoomPolicy = site.layer.config().policy().clone();
        let ahead: Vec<SessionId> = (0..60).map(|_| SessionId::random()).collect();
        for &s in &ahead {
            site.store.inner().enter(&policy, s).await.unwrap();
        }
        Self {
            site,
            holder,
            ahead,
            asked,
        }
    }

    /// How many of the paths asked so far end with `end`.
    fn count(&self, end: &str) -> usize {
        let asked = self.asked.lock().unwrap();
        asked.iter().filter(|u| u.ends_with(end)).count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn far_back_the_page_listens_for_its_position_instead_of_polling() {
    let _one = ONE_BROWSER.lock().await;
    let ListeningSite {
        site,
        mut holder,
        ahead,
        asked,
    } = ListeningSite::start("listen").await;
    let requested = || asked.lock().unwrap().clone();
    let policy: RoomPolicy = site.layer.config().policy().clone();
    let inner = site.store.inner();
    use tower_waiting_room::store::Store;

    let driver = Driver::start().await;
    let browser = driver.browser(1280, 800).await;
    let base = format!("http://{}", site.http.addr);
    browser.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(
        text(&browser, "#twr-position-number").await.as_deref(),
        Some("61")
    );
    eventually(Duration::from_secs(5), "the page listens", || async {
        requested().iter().any(|u| u.ends_with("/listen/events"))
    })
    .await;

    // Five leave from the front, one each second: the page follows, by the stream alone.
    for (i, &s) in ahead[..5].iter().enumerate() {
        assert!(inner.release(&policy, s).await.unwrap());
        site.clock.advance(Duration::from_secs(1));
        let want = (60 - i).to_string();
        eventually(
            Duration::from_secs(5),
            &format!("position {want}"),
            || async {
                text(&browser, "#twr-position-number").await.as_deref() == Some(want.as_str())
            },
        )
        .await;
    }
    let polls: Vec<String> = requested()
        .into_iter()
        .filter(|u| u.contains("/status"))
        .collect();
    assert!(polls.is_empty(), "the page polled: {polls:?}");

    // The rest of those ahead leave: near the head the stream ends, the page asks the status
    // endpoint, and when the holder leaves it takes the browser in by itself.
    for &s in &ahead[5..] {
        assert!(inner.release(&policy, s).await.unwrap());
    }
    site.clock.advance(Duration::from_secs(1));
    eventually(
        Duration::from_secs(10),
        "the page polls near the head",
        || async { requested().iter().any(|u| u.contains("/status")) },
    )
    .await;
    let r = site
        .http
        .visit(&mut holder, Method::POST, "/__waitingroom/listen/leave")
        .await;
    assert_eq!(r.status, StatusCode::OK);
    eventually(
        Duration::from_secs(20),
        "the page lets the browser in",
        || async { text(&browser, "h1").await.as_deref() == Some("You are in") },
    )
    .await;
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_tab_takes_the_oldest_tabs_stream_and_that_tab_polls_instead() {
    let _one = ONE_BROWSER.lock().await;
    let listening = ListeningSite::start("tabs").await;
    let site = &listening.site;
    let count = |end: &str| listening.count(end);

    // Three tabs of one browser, one place: each page listens, the third's stream replacing
    // the first's. The first two have listened for over 30 s by then: a page whose stream
    // ends sooner than that polls from then on whatever the reason, so only a replaced stream
    // keeps an older page from listening again.
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 800).await;
    let base = format!("http://{}/", site.http.addr);
    let mut tabs = vec![browser.window().await.unwrap()];
    for n in 1..=3 {
        if n == 3 {
            tokio::time::sleep(Duration::from_secs(31)).await;
        }
        if n > 1 {
            let tab = browser.new_window(true).await.unwrap();
            browser.switch_to_window(tab.handle.clone()).await.unwrap();
            tabs.push(tab.handle);
        }
        browser.goto(&base).await.unwrap();
        assert_eq!(
            text(&browser, "#twr-position-number").await.as_deref(),
            Some("61")
        );
        eventually(
            Duration::from_secs(5),
            &format!("tab {n} listens"),
            || async { count("/tabs/events") == n },
        )
        .await;
    }
    assert_eq!(site.stats().await.waiting, 61, "three tabs, one place");
    // The first tab, its stream replaced, asks the status endpoint and polls from then on; it
    // does not listen again (an EventSource left to itself would reconnect after 3 s).
    eventually(Duration::from_secs(5), "the first tab polls", || async {
        count("/tabs/status") > 0
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(count("/tabs/events"), 3, "a tab listened again");

    // The line moves: every tab follows, two by their streams, the first by polling.
    use tower_waiting_room::store::Store;
    let policy: RoomPolicy = site.layer.config().policy().clone();
    let first = listening.ahead[0];
    assert!(site.store.inner().release(&policy, first).await.unwrap());
    site.clock.advance(Duration::from_secs(1));
    for (n, tab) in tabs.iter().enumerate().rev() {
        browser.switch_to_window(tab.clone()).await.unwrap();
        eventually(
            Duration::from_secs(20),
            &format!("tab {} moves up", n + 1),
            || async { text(&browser, "#twr-position-number").await.as_deref() == Some("60") },
        )
        .await;
    }
    assert_eq!(count("/tabs/events"), 3, "a tab listened again");
    browser.close().await.unwrap();
}
