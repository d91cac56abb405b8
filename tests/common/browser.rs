//! A headless Chromium for the browser tests (tests/browser/: browser.rs, admin_browser.rs,
//! lobby_browser.rs, browser_countdown.rs), driven through Debian's chromedriver on loopback:
//! plain http, a fresh profile per session; and the page helpers they share (read, wait for,
//! click, fill).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::response::Html;
use axum::routing::any;
use axum::{Extension, Router};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;
use tower_waiting_room::{Admission, SessionId, WaitingRoomLayer};

fn find_program(names: &[&str], also: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names
        .iter()
        .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
        .chain(also.iter().map(PathBuf::from))
        .find(|p| p.is_file())
}

/// One browser at a time, held by every browser test of the binary: the machine is small, and
/// two Chromiums at once only slow both.
pub static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A chromedriver on a free loopback port, killed on drop, with a fresh profile directory.
pub struct Driver {
    child: Child,
    pub url: String,
    profile: PathBuf,
    chromium: PathBuf,
}

impl Driver {
    pub async fn start() -> Self {
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
        // exits, and is started again on another. On a loaded machine a driver can also take
        // long to start: up to a minute each time.
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
                if exited || started.elapsed() > Duration::from_secs(60) {
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
                "chromedriver did not listen on a port within 60 s, three times"
            );
        };
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
    pub async fn browser(&self, width: u32, height: u32) -> Client {
        self.session(width, height, false).await
    }

    /// A new phone-sized session (mobile emulation: the viewport is `width` CSS pixels wide at
    /// twice the density, as on a phone; a desktop window cannot be made that narrow).
    pub async fn phone(&self, width: u32, height: u32) -> Client {
        self.session(width, height, true).await
    }

    /// A desktop session whose browser asks for pages in `languages` (an `Accept-Language`
    /// value, `de-DE,de;q=0.9`), its interface in the first of them.
    pub async fn browser_speaking(&self, width: u32, height: u32, languages: &str) -> Client {
        self.session_in(width, height, false, Some(languages)).await
    }

    pub async fn session(&self, width: u32, height: u32, phone: bool) -> Client {
        self.session_in(width, height, phone, None).await
    }

    async fn session_in(
        &self,
        width: u32,
        height: u32,
        phone: bool,
        languages: Option<&str>,
    ) -> Client {
        let profile = self.profile.join(SessionId::random().to_string());
        let mut args = vec![
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
        if let Some(languages) = languages {
            let first = languages.split([',', ';']).next().unwrap_or(languages);
            args.push(format!("--lang={first}"));
        }
        let mut options = json!({"binary": self.chromium, "args": args});
        if let Some(languages) = languages {
            options["prefs"] = json!({"intl.accept_languages": languages});
        }
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

/// The visible text of the element `css` ("" if there is none).
pub async fn text(client: &Client, css: &str) -> String {
    match client.find(Locator::Css(css)).await {
        Ok(e) => e.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Waits (10 s at most) until the element `css` shows `want` (its visible text contains it);
/// a failure also says what the page's element `message_css` showed.
pub async fn shows(client: &Client, css: &str, want: &str, message_css: &str) {
    let started = Instant::now();
    loop {
        let now = text(client, css).await;
        if now.contains(want) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{css} shows {now:?}, not {want:?}, after 10 s; {message_css}: {:?}",
            text(client, message_css).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Clicks the element `css`.
pub async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

/// Replaces the value of the input `css` with `value`, as typed.
pub async fn fill(client: &Client, css: &str, value: &str) {
    let e = client.find(Locator::Css(css)).await.unwrap();
    e.clear().await.unwrap();
    e.send_keys(value).await.unwrap();
}

/// The app behind the room, like the demo's: a page that says who is in.
pub fn shop(layer: WaitingRoomLayer) -> Router {
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
