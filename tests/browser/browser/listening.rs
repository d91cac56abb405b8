//! Listening instead of polling: far back in line the page follows its position on the room's
//! events endpoint (`EventSource`) and polls near the head; a third tab of one browser takes the
//! oldest tab's stream, and that tab polls instead.

use super::{admit, eventually, text};
use crate::common;
use crate::webdriver as browser;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, StatusCode};
use tower_waiting_room::{RoomPolicy, SessionId, WaitingRoomLayer};

use browser::{shop, Driver, ONE_BROWSER};
use common::*;

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
