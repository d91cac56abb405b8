//! The wait estimate as the page words it, on a manual clock: "Estimating…" in a room too young to
//! know its pace, and an uncertain estimate shown as its range in minutes, the numbers of the
//! status JSON the browser's own visitor gets.

use super::{eventually, held_room, text};
use crate::common;
use crate::webdriver as browser;

use std::time::Duration;

use fantoccini::Client;
use tower_waiting_room::{RoomPolicy, SessionId};

use browser::{Driver, ONE_BROWSER};
use common::*;

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
