//! The admin dashboard in a real browser: Debian's headless Chromium, driven through
//! chromedriver (started here on a free loopback port) with `fantoccini`, the way an operator
//! uses it.
//!
//! 1. Two gateways on one embedded store (two layers sharing one `MemoryStore`); the dashboard
//!    is served by gateway 1. The operator enters a wrong token (refused, asked again), then the
//!    right one; raises the capacity and pauses through the page, closes the sale and releases
//!    the line through its confirmation step. Gateway 2 enforces each change: a waiter gets in
//!    after the raise; a newcomer is queued though slots are free while paused; a waiter is told
//!    `closed`; the released waiter gets in.
//! 2. Before a scheduled opening, the page says so: the state, the opening and closing times
//!    (UTC), and the registrants; at the opening, on the gateways' clock, it shows the room
//!    admitting, its registrants now its line.
//! 3. A realistic room (about 1,400 waiting, 200 inside, half an hour of admissions made on a
//!    manual clock): the dashboard at desktop width is screenshotted to
//!    `target/screenshots/admin-dashboard.png` (and to the path in `TWR_SCREENSHOT`, if set:
//!    `TWR_SCREENSHOT=docs/dashboard.png` made the picture in the docs), and at phone width it
//!    fits without scrolling sideways.
//!
//! Chromium and chromedriver are required: without them these tests FAIL (they never pass by
//! skipping), as in `tests/browser/browser.rs`. `scripts/test` installs them.

use crate::common;
use crate::webdriver as browser;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::Router;
use fantoccini::{Client, Locator};
use http::StatusCode;
use serde_json::json;
use tower_waiting_room::admin::AdminService;
use tower_waiting_room::store::{Decision, MemoryStore, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{SessionId, WaitingRoomBuilder, WaitingRoomLayer};

use browser::{click, fill, text, Driver, ONE_BROWSER};
use common::*;

/// Waits until the element `css` shows `want`; a failure also says what `#message` showed.
async fn shows(client: &Client, css: &str, want: &str) {
    browser::shows(client, css, want, "#message").await
}

const TOKEN: &str = "op-token-0123456789abcdef0123456789abcdef";

// ===== small tools =====

/// Waits until `check` holds, polling every 50 ms, or panics after `within` naming `what`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return;
        }
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn visible(client: &Client, css: &str) -> bool {
    match client.find(Locator::Css(css)).await {
        Ok(e) => e.is_displayed().await.unwrap_or(false),
        Err(_) => false,
    }
}

fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ===== two gateways on one embedded store =====

struct Gateways {
    /// Serves the admin at `/admin` and the app behind the room.
    g1: Http,
    /// Serves the app behind its own layer.
    g2: Http,
    layer: WaitingRoomLayer,
    store: MemoryStore,
    clock: ManualClock,
}

async fn gateways(builder: impl Fn() -> WaitingRoomBuilder) -> Gateways {
    let clock = clock();
    let store = MemoryStore::with_clock(clock.clone());
    let layer = || {
        builder()
            .secret(SECRET)
            .secure_cookies(false)
            .clock(clock.clone())
            .store(store.clone())
            .build()
            .unwrap()
    };
    let l1 = layer();
    let admin = AdminService::builder()
        .bearer_token(TOKEN)
        .room(l1.control())
        .build()
        .unwrap();
    let g1 = serve(
        Router::new()
            .nest_service("/admin", admin)
            .merge(app(l1.clone())),
    )
    .await;
    let g2 = serve(app(layer())).await;
    Gateways {
        g1,
        g2,
        layer: l1,
        store,
        clock,
    }
}

/// A newcomer on `g`: the redirect with a queue cookie, then the store's answer.
async fn arrive(g: &Http) -> (Jar, Reply) {
    let mut jar = Jar::new();
    assert_eq!(g.visit_json(&mut jar).await.status, StatusCode::FOUND);
    let r = g.visit_json(&mut jar).await;
    (jar, r)
}

fn state(r: &Reply) -> String {
    r.json()["state"].as_str().unwrap_or_default().to_owned()
}

/// Polls `g` as `jar` until it answers `status` (within a second: the store is shared).
async fn until_status(g: &Http, jar: &mut Jar, status: StatusCode, what: &str) {
    let started = Instant::now();
    loop {
        let r = g.visit_json(jar).await;
        if r.status == status {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{what}: still {}: {}",
            r.status,
            r.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn sign_in(browser: &Client, g1: &Http) {
    browser
        .goto(&format!("http://{}/admin/", g1.addr))
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "the sign-in form", || async {
        visible(browser, "#token").await
    })
    .await;
    // A wrong token is refused, and the page asks again.
    fill(browser, "#token", "not-the-token").await;
    click(browser, "#signin button[type=submit]").await;
    shows(browser, "#message", "the operator token is wrong").await;
    assert!(visible(browser, "#token").await);
    assert!(!visible(browser, "#dashboard").await);
    fill(browser, "#token", TOKEN).await;
    click(browser, "#signin button[type=submit]").await;
    eventually(Duration::from_secs(10), "the dashboard", || async {
        visible(browser, "#dashboard").await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_changes_the_room_through_the_page_and_the_other_gateway_enforces_it() {
    let _one = ONE_BROWSER.lock().await;
    let gw = gateways(|| WaitingRoomLayer::builder("launch").capacity(1)).await;
    let (_inside, r) = arrive(&gw.g2).await;
    r.handler_saw();
    let (mut waiter, r) = arrive(&gw.g2).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);

    let driver = Driver::start().await;
    let browser = driver.browser(1280, 900).await;
    sign_in(&browser, &gw.g1).await;
    assert_eq!(
        browser
            .execute("return sessionStorage.getItem('twr-admin-token')", vec![])
            .await
            .unwrap(),
        json!(null),
        "the token is kept in the page's memory only, not in the origin's storage"
    );
    shows(&browser, "#waiting", "1").await;
    shows(&browser, "#inside", "1 / 1").await;
    shows(&browser, "#state", "Admitting").await;

    // Capacity 1 → 2 through the page: the waiter on gateway 2 gets in.
    fill(&browser, "#capacity", "2").await;
    click(&browser, "#capacity-form button[type=submit]").await;
    shows(&browser, "#message", "Capacity is now 2.").await;
    until_status(
        &gw.g2,
        &mut waiter,
        StatusCode::OK,
        "the waiter after the raise",
    )
    .await;
    shows(&browser, "#inside", "2 / 2").await;

    // Room for more, then paused through the page: a newcomer on gateway 2 is queued though
    // slots are free.
    fill(&browser, "#capacity", "5").await;
    click(&browser, "#capacity-form button[type=submit]").await;
    shows(&browser, "#message", "Capacity is now 5.").await;
    click(&browser, "#pause").await;
    shows(&browser, "#state", "Paused").await;
    shows(&browser, "#pause", "Resume admissions").await;
    let (mut newcomer, r) = arrive(&gw.g2).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::TOO_MANY_REQUESTS, "waiting".to_owned()),
        "a newcomer while paused, 2 inside of 5: {}",
        r.text()
    );
    let s = gw.layer.control().status().await.unwrap();
    assert_eq!((s.inside, s.capacity, s.waiting), (2, 5, 1));
    shows(&browser, "#waiting", "1").await;

    // Closing asks first: cancel changes nothing; confirmed, gateway 2 tells the waiter.
    click(&browser, "#open-close").await;
    assert!(visible(&browser, "#confirm").await);
    shows(&browser, "#confirm-text", "Close the sale").await;
    click(&browser, "#confirm-no").await;
    shows(&browser, "#message", "Not closed.").await;
    assert!(gw.layer.control().status().await.unwrap().open);
    click(&browser, "#open-close").await;
    click(&browser, "#confirm-yes").await;
    shows(&browser, "#state", "Closed").await;
    let r = gw.g2.visit_json(&mut newcomer).await;
    assert_eq!(
        (r.status, state(&r)),
        (StatusCode::SERVICE_UNAVAILABLE, "closed".to_owned())
    );
    click(&browser, "#open-close").await;
    shows(&browser, "#state", "Paused").await;

    // Releasing asks first too; confirmed, the waiter gets in though the room is paused.
    fill(&browser, "#release-count", "10").await;
    click(&browser, "#release").await;
    shows(&browser, "#confirm-text", "Let the first 10 in line in now").await;
    click(&browser, "#confirm-yes").await;
    shows(&browser, "#message", "Released 1.").await;
    until_status(&gw.g2, &mut newcomer, StatusCode::OK, "the released waiter").await;

    // Resumed through the page.
    click(&browser, "#pause").await;
    shows(&browser, "#state", "Admitting").await;
    assert!(!gw.layer.control().status().await.unwrap().paused);
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_the_opening_the_page_shows_the_schedule_and_the_registrants() {
    let _one = ONE_BROWSER.lock().await;
    // 2026-01-01 00:10 UTC to 01:10 UTC, on the gateways' manual clock (00:00 now).
    let opens = T0 + 600_000;
    let at = |ms: u64| std::time::UNIX_EPOCH + Duration::from_millis(ms);
    let gw = gateways(|| {
        WaitingRoomLayer::builder("launch")
            .capacity(1)
            .opens_at(at(opens))
            .closes_at(at(opens + 3_600_000))
    })
    .await;
    for _ in 0..3 {
        let (_, r) = arrive(&gw.g2).await;
        assert_eq!(state(&r), "scheduled", "{}", r.text());
    }

    let driver = Driver::start().await;
    let browser = driver.browser(1280, 900).await;
    sign_in(&browser, &gw.g1).await;
    shows(&browser, "#state", "Scheduled").await;
    shows(&browser, "#schedule", "Opening 2026-01-01 00:10 UTC").await;
    shows(&browser, "#schedule", "closing 2026-01-01 01:10 UTC").await;
    shows(&browser, "#schedule", "no place in line, no count").await;
    shows(&browser, "#waiting-label", "Registered for the opening").await;
    shows(&browser, "#waiting", "3").await;
    shows(&browser, "#eta", "from the opening").await;

    // The opening, on the gateways' clock: the room admits, its registrants are its line.
    gw.clock.set(opens);
    shows(&browser, "#state", "Admitting").await;
    shows(&browser, "#waiting-label", "In line").await;
    shows(&browser, "#waiting", "2").await;
    shows(&browser, "#schedule", "Opening 2026-01-01 00:10 UTC").await;
    assert!(!text(&browser, "#schedule").await.contains("countdown"));
    browser.close().await.unwrap();
}

/// A room whose capacity follows the app: the page shows the controller's state and last
/// decision, charts capacity beside p95, and turns the controller off and on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_auto_capacity_and_switches_it() {
    let _one = ONE_BROWSER.lock().await;
    let terms = tower_waiting_room::auto::AutoCapacity::new(2, 40, Duration::from_millis(300))
        .window(Duration::from_secs(1));
    let gw = gateways(move || {
        WaitingRoomLayer::builder("auto-dash")
            .capacity(4)
            .auto_capacity(terms)
    })
    .await;
    let mut inside = Vec::new();
    for _ in 0..4 {
        let (jar, r) = arrive(&gw.g1).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        inside.push(jar);
    }
    for _ in 0..10 {
        let (_, r) = arrive(&gw.g2).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    }
    // A window of fast answers through gateway 1, which decides (its layer has the
    // controller that the admin shows), then the first request after the window.
    for i in 0..40 {
        gw.g1.visit_json(&mut inside[i % 4]).await;
    }
    gw.clock.advance(Duration::from_secs(1));
    gw.g1.visit_json(&mut inside[0]).await;
    let control = gw.layer.control();
    eventually(Duration::from_secs(5), "a decision", || async {
        control.auto().is_some_and(|a| a.change.is_some())
    })
    .await;

    let driver = Driver::start().await;
    let browser = driver.browser(1280, 900).await;
    sign_in(&browser, &gw.g1).await;
    shows(&browser, "#auto", "on, 2–40").await;
    shows(&browser, "#auto-why", "grow: headroom").await;
    shows(&browser, "#inside", "/ 6").await;
    // The chart of capacity and p95 (one sample yet: its lines are points).
    assert!(visible(&browser, "#chart-auto svg").await);
    for line in ["polyline.capacity", "polyline.p95"] {
        let css = format!("#chart-auto svg {line}");
        assert!(browser.find(Locator::Css(&css)).await.is_ok(), "{css}");
    }
    click(&browser, "#auto-switch").await;
    shows(&browser, "#auto", "off").await;
    shows(&browser, "#auto-why", "set by hand").await;
    assert!(!control.auto().unwrap().enabled);
    click(&browser, "#auto-switch").await;
    shows(&browser, "#auto", "on, 2–40").await;
    assert!(control.auto().unwrap().enabled);
    browser.close().await.unwrap();
}

// ===== a realistic room, for the picture =====

/// Half an hour of a sale on the manual clock, straight through the store: 200 inside, a long
/// line, and admissions every 10 s (a dip while the operator paused for a few minutes).
async fn half_an_hour_of_a_sale(gw: &Gateways) {
    let policy = gw.layer.config().policy().clone();
    let store = &gw.store;
    let mut inside: VecDeque<SessionId> = VecDeque::new();
    let mut line: VecDeque<SessionId> = VecDeque::new();
    // Simple and sequential: each visitor's call is awaited in turn.
    for _ in 0..2_000 {
        let s = SessionId::random();
        match store.enter(&policy, s).await.unwrap() {
            Decision::Admitted { .. } => {
                // Back with the admission token: the slot is claimed.
                store.heartbeat(&policy, s).await.unwrap();
                inside.push_back(s);
            }
            Decision::Waiting { .. } => line.push_back(s),
            other => panic!("unexpected {other:?}"),
        }
    }
    // 32 minutes: the first rush falls out of the 30 minutes shown.
    for minute in 0..32u64 {
        // Minutes 19 to 21: paused by the operator, nobody let in.
        let paused = (19..22).contains(&minute);
        for step in 0..6u64 {
            gw.clock.advance(Duration::from_secs(10));
            let leaving = if paused {
                0
            } else {
                14 + (minute * 7 + step * 3) % 9
            };
            for _ in 0..leaving {
                let s = inside.pop_front().unwrap();
                store.release(&policy, s).await.unwrap();
            }
            // The promoted come back and claim their slots.
            for _ in 0..leaving {
                let s = line.pop_front().unwrap();
                match store.poll(&policy, s).await.unwrap() {
                    Decision::Admitted { .. } => {
                        store.heartbeat(&policy, s).await.unwrap();
                        inside.push_back(s);
                    }
                    other => panic!("a promoted waiter got {other:?}"),
                }
            }
            // Newcomers keep coming, a little slower than the line moves.
            for _ in 0..(12 + (minute + step) % 5) {
                let s = SessionId::random();
                match store.enter(&policy, s).await.unwrap() {
                    Decision::Waiting { .. } => line.push_back(s),
                    other => panic!("a newcomer got {other:?}"),
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_of_a_busy_room_desktop_and_phone() {
    let _one = ONE_BROWSER.lock().await;
    let gw = gateways(|| {
        WaitingRoomLayer::builder("launch")
            .capacity(200)
            .active_ttl(Duration::from_secs(3_600))
            .grant_ttl(Duration::from_secs(600))
            .queue_ttl(Duration::from_secs(3_600))
            .abandon_after(Duration::from_secs(7_200))
    })
    .await;
    half_an_hour_of_a_sale(&gw).await;
    let s = gw.layer.control().status().await.unwrap();
    assert_eq!(s.inside, 200, "{s:?}");
    assert!(s.waiting > 1_000, "{s:?}");
    assert!(
        s.admissions_per_minute.iter().filter(|&&n| n > 0).count() >= 25,
        "{s:?}"
    );

    let driver = Driver::start().await;
    let browser = driver.browser(1280, 1000).await;
    browser
        .goto(&format!("http://{}/admin/", gw.g1.addr))
        .await
        .unwrap();
    fill(&browser, "#token", TOKEN).await;
    click(&browser, "#signin button[type=submit]").await;
    shows(&browser, "#inside", "200 / 200").await;
    shows(&browser, "#waiting", &format_thousands(s.waiting)).await;
    assert!(
        text(&browser, "#eta").await.contains("min"),
        "{}",
        text(&browser, "#eta").await
    );
    assert!(text(&browser, "#oldest").await.contains("min"));
    let bars: u64 = browser
        .execute(
            "return document.querySelectorAll('#chart-admissions rect').length",
            vec![],
        )
        .await
        .unwrap()
        .as_u64()
        .unwrap();
    assert_eq!(bars, 30, "one bar per minute");
    // A few samples for the line chart, with the line moving meanwhile.
    for _ in 0..3 {
        for _ in 0..30 {
            let s = SessionId::random();
            gw.store.enter(gw.layer.config().policy(), s).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(2_100)).await;
    }
    let png = browser.screenshot().await.unwrap();
    let path = screenshot_dir().join("admin-dashboard.png");
    std::fs::write(&path, &png).unwrap();
    eprintln!("dashboard screenshot: {}", path.display());
    if let Ok(target) = std::env::var("TWR_SCREENSHOT") {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join(target);
        std::fs::write(&target, &png).unwrap();
        eprintln!("and {}", target.display());
    }
    browser.close().await.unwrap();

    // At a phone's width, everything fits without scrolling sideways, and the token is asked
    // again (a new page: it was kept in the last one's memory only).
    let phone = driver.phone(390, 844).await;
    phone
        .goto(&format!("http://{}/admin/", gw.g1.addr))
        .await
        .unwrap();
    fill(&phone, "#token", TOKEN).await;
    click(&phone, "#signin button[type=submit]").await;
    shows(&phone, "#inside", "200 / 200").await;
    let overflow = phone
        .execute(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(overflow, json!(0), "the page scrolls sideways on a phone");
    std::fs::write(
        screenshot_dir().join("admin-dashboard-phone.png"),
        phone.screenshot().await.unwrap(),
    )
    .unwrap();
    phone.close().await.unwrap();
}

fn format_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
