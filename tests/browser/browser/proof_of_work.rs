//! Proof of work in the browser: a low-risk browser goes straight in with no challenge, a
//! challenged one solves the proof with WebCrypto by itself and joins the line, and (ignored, by
//! hand) what solving costs in Chromium at several difficulties.

use super::{eventually, text};
use crate::common;
use crate::webdriver as browser;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use fantoccini::wd::TimeoutConfiguration;
use fantoccini::Client;
use http::header::{HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::defences::proof_of_work::{is_solution, solve, ProofOfWork, PROOF_HEADER};
use tower_waiting_room::defences::risk::Risk;
use tower_waiting_room::WaitingRoomLayer;

use browser::{shop, Driver, ONE_BROWSER};
use common::*;

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
