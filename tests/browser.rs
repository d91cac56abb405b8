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
//! Chromium and chromedriver are required: without them these tests FAIL (they never pass by
//! skipping). `scripts/test` installs them (`apt-get install chromium chromium-driver`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::response::Html;
use axum::routing::any;
use axum::{Extension, Router};
use fantoccini::{Client, ClientBuilder, Locator};
use http::{Method, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;
use tower_waiting_room::{Admission, RoomPolicy, SessionId, WaitingRoomLayer};

use common::*;

/// One browser at a time: the machine is small, and two Chromiums at once only slow both.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn find_program(names: &[&str], also: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names
        .iter()
        .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
        .chain(also.iter().map(PathBuf::from))
        .find(|p| p.is_file())
}

/// A chromedriver on a free loopback port, killed on drop, with a fresh profile directory.
struct Driver {
    child: Child,
    url: String,
    profile: PathBuf,
    chromium: PathBuf,
}

impl Driver {
    async fn start() -> Self {
        let chromium = find_program(
            &["chromium", "chromium-browser"],
            &["/usr/lib/chromium/chromium"],
        )
        .expect(
            "the browser test needs Debian's chromium: apt-get install chromium chromium-driver \
             (scripts/test installs it)",
        );
        let driver = find_program(&["chromedriver"], &["/usr/lib/chromium/chromedriver"]).expect(
            "the browser test needs chromedriver: apt-get install chromium-driver \
             (scripts/test installs it)",
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&driver)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver.display()));
        let started = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not listen on port {port} within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = std::env::temp_dir().join(format!(
            "twr-chromium-{}-{}",
            std::process::id(),
            SessionId::random()
        ));
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            profile,
            chromium,
        }
    }

    /// A new desktop browser session with a fresh profile and the given window size.
    async fn browser(&self, width: u32, height: u32) -> Client {
        self.session(width, height, false).await
    }

    /// A new phone-sized session (mobile emulation: the viewport is `width` CSS pixels wide at
    /// twice the density, as on a phone; a desktop window cannot be made that narrow).
    async fn phone(&self, width: u32, height: u32) -> Client {
        self.session(width, height, true).await
    }

    async fn session(&self, width: u32, height: u32, phone: bool) -> Client {
        let profile = self.profile.join(SessionId::random().to_string());
        let args = vec![
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--hide-scrollbars".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.display()),
        ];
        let mut options = json!({"binary": self.chromium, "args": args});
        if phone {
            options["mobileEmulation"] = json!({
                "deviceMetrics": {"width": width, "height": height, "pixelRatio": 2.0, "touch": true},
            });
        }
        let caps = json!({"browserName": "chrome", "goog:chromeOptions": options});
        let serde_json::Value::Object(caps) = caps else {
            unreachable!()
        };
        ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("chromium did not start through chromedriver: {e}"))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// The app behind the room, like the demo's: a page that says who is in.
fn shop(layer: WaitingRoomLayer) -> Router {
    async fn page(Extension(a): Extension<Admission>) -> Html<String> {
        Html(format!(
            "<!doctype html><title>Shop</title><h1>You are in</h1><p id=\"session\">{}</p>",
            a.session()
        ))
    }
    Router::new()
        .route("/", any(page))
        .route("/{*rest}", any(page))
        .layer(layer)
}

/// A visitor let in over HTTP (the shop answers HTML, not the echo JSON `Site::admit` reads).
async fn admit(site: &Site) -> Jar {
    let mut jar = site.arrive("/").await;
    let r = site.http.visit(&mut jar, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.text().contains("You are in"));
    assert!(jar.get(&site.a()).is_some(), "no admission cookie: {r:?}");
    jar
}

/// Waits until `check` holds, polling every 50 ms, or panics after `within` naming `what`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F) -> Duration
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

async fn text(client: &Client, css: &str) -> Option<String> {
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
    let hour = Duration::from_secs(3_600);
    let site = Site::start_with(
        WaitingRoomLayer::builder("launch")
            .capacity(1)
            .active_ttl(hour)
            .grant_ttl(hour)
            .queue_ttl(hour)
            .secure_cookies(false),
        shop,
    )
    .await;
    let policy: RoomPolicy = site.layer.config().policy().clone();
    let store = site.store.inner();
    use tower_waiting_room::store::Store;

    // A line that has moved at one admission every 5 s for five minutes, 1,341 still waiting.
    let holder = admit(&site).await;
    let mut inside = SessionId::from_hex(&session_in(holder.get(&site.q()).unwrap())).unwrap();
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
    // 1,342 at one per 5 s is 6,710 s; shown with the 25 % margin, rounded up to minutes.
    let eta = text(&browser, "#twr-eta").await.unwrap();
    assert!(eta.starts_with("About 2 h"), "{eta}");
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
