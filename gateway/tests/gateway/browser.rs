//! The room's waiting page in a real browser, through the gateway binary in front of the Python
//! app: Debian's headless Chromium, driven through chromedriver (started here on a free loopback
//! port) with `fantoccini`.
//!
//! A room of capacity 1. The first browser opens the gateway and gets the app's page; a second
//! browser (a session of its own: its own profile, its own cookies) gets the room's waiting
//! page, number 1 in line; the first browser leaves through the room's leave endpoint (`POST
//! /__waitingroom/sale/leave`, from its own page, as a "Done" button would), and the second's
//! waiting page, polling by itself, takes it into the app's page with no click.
//!
//! Chromium and chromedriver are required: without them this test FAILS (it never passes by
//! skipping). `scripts/test` installs them (`apt-get install chromium chromium-driver`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

use crate::support::*;

fn find_program(names: &[&str], also: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names
        .iter()
        .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
        .chain(also.iter().map(PathBuf::from))
        .find(|p| p.is_file())
}

/// A chromedriver on a free loopback port, killed on drop, with a scratch directory for the
/// sessions' profiles.
struct Driver {
    child: Child,
    url: String,
    profiles: PathBuf,
    chromium: PathBuf,
    sessions: u32,
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
        // A free port is only free until someone takes it: a driver that could not bind it
        // exits, and is started again on another.
        let mut attempts = 0;
        let (child, port) = loop {
            attempts += 1;
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new(&driver)
                .arg(format!("--port={port}"))
                .arg("--allowed-ips=127.0.0.1")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver.display()));
            let started = Instant::now();
            let listening = loop {
                if tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
                {
                    break true;
                }
                let exited = child.try_wait().ok().flatten().is_some();
                if exited || started.elapsed() > Duration::from_secs(20) {
                    let _ = child.kill();
                    let _ = child.wait();
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            if listening {
                break (child, port);
            }
            assert!(
                attempts < 3,
                "chromedriver did not listen on a port within 20 s, three times"
            );
        };
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            profiles: scratch("chromium"),
            chromium,
            sessions: 0,
        }
    }

    /// A new browser: a session of its own with a fresh profile (no cookie shared with any
    /// other).
    async fn browser(&mut self) -> Client {
        self.sessions += 1;
        let profile = self.profiles.join(format!("profile-{}", self.sessions));
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--window-size=1280,800".to_owned(),
            format!("--user-data-dir={}", profile.display()),
        ];
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": self.chromium, "args": args},
        });
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
        let _ = std::fs::remove_dir_all(&self.profiles);
    }
}

/// The visible text of the element `css`, `None` if the page has none.
async fn text(client: &Client, css: &str) -> Option<String> {
    match client.find(Locator::Css(css)).await {
        Ok(e) => e.text().await.ok(),
        Err(_) => None,
    }
}

/// Waits until `check` holds, polling every 50 ms; how long it took, or a panic naming `what`
/// after `within`.
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

/// The room of this test: capacity 1, every path, plain http; nobody rate-limited (both
/// browsers come from 127.0.0.1); the favicon Chromium asks for by itself passes by the room.
const ROOM: &str = "[[rooms]]\nroom = \"sale\"\ncapacity = 1\nsecure_cookies = false\n\
    secret_env = \"WAITING_ROOM_SECRET\"\nnew_visitor_limit = \"off\"\npoll_limit = \"off\"\n\
    bypass = [\"/favicon.ico\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_page_moves_on_to_the_app_when_the_slot_frees() {
    let started = Instant::now();
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), ROOM));
    let base = format!("http://{}", gw.addr);
    let mut driver = Driver::start().await;

    // The first browser: the room's redirect (the queue cookie), a free slot, the app's page.
    let first = driver.browser().await;
    first.goto(&format!("{base}/shop/item")).await.unwrap();
    assert_eq!(
        text(&first, "h1").await.as_deref(),
        Some("app page /shop/item"),
        "the first browser gets the app: {}",
        first.source().await.unwrap()
    );
    assert_eq!(first.title().await.unwrap(), "app");
    let cookies = first.get_all_cookies().await.unwrap();
    assert!(
        cookies.iter().any(|c| c.name().starts_with("wr_sale")),
        "the room's cookies: {cookies:?}"
    );

    // The second browser, a session of its own: the waiting page, number 1 with nobody ahead,
    // and a way to leave.
    let second = driver.browser().await;
    second.goto(&format!("{base}/shop/item")).await.unwrap();
    assert_eq!(
        second.title().await.unwrap(),
        "You are in line",
        "the second browser waits: {}",
        second.source().await.unwrap()
    );
    assert_eq!(
        text(&second, "#twr-heading").await.as_deref(),
        Some("You are in line")
    );
    assert_eq!(
        text(&second, "#twr-position").await.as_deref(),
        Some("You are number\n1\nin line")
    );
    assert_eq!(text(&second, "#twr-ahead").await.as_deref(), Some("0"));
    let leave = text(&second, "#twr-leave button").await.unwrap_or_default();
    assert!(!leave.is_empty(), "a button to leave the line");
    assert_eq!(
        text(&second, "h1").await.as_deref(),
        Some("You are in line"),
        "not the app's page"
    );

    // The page keeps polling by itself: still number 1 a few seconds on.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        text(&second, "#twr-position-number").await.as_deref(),
        Some("1")
    );
    assert_eq!(second.title().await.unwrap(), "You are in line");

    // The first browser leaves through the room's leave endpoint, from its own page.
    let left = first
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch('/__waitingroom/sale/leave', {method: 'POST', credentials: 'same-origin',
                                                 headers: {Accept: 'application/json'}})
               .then(r => r.json().then(j => done([r.status, j.state])))
               .catch(e => done([0, String(e)]));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(left, json!([200, "left"]), "the leave endpoint's answer");

    // The second browser's waiting page takes it into the app's page by itself, within its
    // polling interval (2 s at the front of the line, with jitter).
    let took = eventually(
        Duration::from_secs(10),
        "the waiting page moves on to the app",
        || async { text(&second, "h1").await.as_deref() == Some("app page /shop/item") },
    )
    .await;
    println!("the waiting page moved on {took:?} after the slot was freed");
    assert_eq!(second.title().await.unwrap(), "app");
    let url = second.current_url().await.unwrap();
    assert_eq!(url.path(), "/shop/item", "back to the page asked for");

    // The first browser, back again, waits in its turn: the slot is the second's now.
    first.goto(&format!("{base}/shop/item")).await.unwrap();
    assert_eq!(
        first.title().await.unwrap(),
        "You are in line",
        "{}",
        first.source().await.unwrap()
    );

    first.close().await.unwrap();
    second.close().await.unwrap();
    let seen = app.seen();
    assert!(
        !seen.iter().any(|l| l.contains("/__waitingroom")),
        "the room's own paths never reach the app: {seen:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
}
