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

use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use http::{Method, StatusCode};
use tower_waiting_room::{SessionId, WaitingRoomLayer};

use browser::shop;
use common::*;

mod estimate;
mod listening;
mod proof_of_work;
mod waiting_page;

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
