//! When the app fails, or a client never finishes: the gateway answers promptly with its own
//! page (`502` down or answering garbage, `504` too slow; HTML for browsers, JSON for API
//! clients), never hangs, keeps serving, and closes a connection whose head never completes
//! within `header_read_timeout`, before any of it reaches the app.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::support::*;

const JSON: [(&str, &str); 1] = [("accept", "application/json")];

/// A gateway file with no room (a plain proxy: every request goes to the app) and `limits`.
fn plain_proxy(upstream: &str, limits: &str) -> String {
    format!("upstream = \"{upstream}\"\n[limits]\ngrace = \"2s\"\n{limits}\n")
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

#[test]
fn an_app_that_is_down_is_a_502_at_once_html_or_json_and_served_again_when_back() {
    let port = free_port();
    let gw = Gateway::start(&plain_proxy(
        &format!("http://127.0.0.1:{port}"),
        "connect_timeout = \"1s\"\nupstream_timeout = \"2s\"",
    ));
    let (res, took) = timed(|| get(gw.addr, "/shop", &mut Jar::default()));
    assert_eq!(res.status, 502, "{}", res.text());
    assert!(took < Duration::from_millis(900), "took {took:?}");
    assert_eq!(res.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(res.header("retry-after"), Some("5"));
    assert_eq!(res.header("cache-control"), Some("no-store"));
    assert!(res.text().contains("502 Bad Gateway"), "{}", res.text());

    let (res, took) = timed(|| request(gw.addr, "GET", "/api/x", &JSON, b"", &mut Jar::default()));
    assert_eq!(res.status, 502);
    assert!(took < Duration::from_millis(900), "took {took:?}");
    assert_eq!(res.header("content-type"), Some("application/json"));
    assert_eq!(res.json()["error"], "bad_gateway", "{}", res.text());

    // The app comes back on its port: the same gateway reaches it.
    let app = App::start_on(port);
    let res = get(gw.addr, "/shop", &mut Jar::default());
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(app.seen(), ["GET /shop"]);
}

#[test]
fn an_app_too_slow_to_answer_is_a_504_within_the_upstream_timeout() {
    let app = App::start();
    let gw = Gateway::start(&plain_proxy(
        &app.url(),
        "upstream_timeout = \"1s\"\nrequest_timeout = \"10s\"",
    ));
    let (res, took) = timed(|| get(gw.addr, "/slow?s=5", &mut Jar::default()));
    assert_eq!(res.status, 504, "{}", res.text());
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(2500),
        "took {took:?}"
    );
    assert!(res.text().contains("504 Gateway Timeout"), "{}", res.text());
    assert_eq!(res.header("retry-after"), Some("5"));

    let (res, took) =
        timed(|| request(gw.addr, "GET", "/slow?s=5", &JSON, b"", &mut Jar::default()));
    assert_eq!(res.status, 504);
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    assert_eq!(res.json()["error"], "gateway_timeout");

    // Not stuck behind the two the app still sleeps on.
    let (res, took) = timed(|| get(gw.addr, "/", &mut Jar::default()));
    assert_eq!(res.status, 200);
    assert!(took < Duration::from_millis(900), "took {took:?}");
    assert_eq!(app.seen(), ["GET /slow?s=5", "GET /slow?s=5", "GET /"]);
}

#[test]
fn an_app_answering_garbage_or_nothing_is_a_502() {
    let app = App::start();
    let gw = Gateway::start(&plain_proxy(&app.url(), "upstream_timeout = \"2s\""));
    for path in ["/garbage", "/close"] {
        let (res, took) = timed(|| get(gw.addr, path, &mut Jar::default()));
        assert_eq!(res.status, 502, "{path}: {}", res.text());
        assert!(took < Duration::from_millis(1500), "{path}: took {took:?}");
        assert!(res.text().contains("502 Bad Gateway"));
        let res = request(gw.addr, "GET", path, &JSON, b"", &mut Jar::default());
        assert_eq!(res.status, 502, "{path}");
        assert_eq!(res.json()["error"], "bad_gateway");
    }
    let res = get(gw.addr, "/", &mut Jar::default());
    assert_eq!(res.status, 200, "still serving: {}", res.text());
}

#[test]
fn a_client_that_never_finishes_its_head_is_closed_within_header_read_timeout() {
    let app = App::start();
    let gw = Gateway::start(&plain_proxy(
        &app.url(),
        "header_read_timeout = \"1s\"\nupstream_timeout = \"2s\"",
    ));
    let limit = Duration::from_secs(5);
    let host = gw.addr;
    // Three clients at once: one stops halfway through its head, one drips a header line
    // every 200 ms (the timeout is for the whole head, not each read), one sends nothing.
    let stalled = std::thread::spawn(move || {
        let start = Instant::now();
        let mut conn = open_raw(
            host,
            format!("GET /never HTTP/1.1\r\nHost: {host}\r\nX-Half: ").as_bytes(),
            limit,
        );
        (until_closed(&mut conn), start.elapsed())
    });
    let dripping = std::thread::spawn(move || {
        let start = Instant::now();
        let mut conn = open_raw(
            host,
            format!("GET /drip-head HTTP/1.1\r\nHost: {host}\r\n").as_bytes(),
            limit,
        );
        for i in 0..40 {
            std::thread::sleep(Duration::from_millis(200));
            if conn
                .get_mut()
                .write_all(format!("X-Drip-{i}: 1\r\n").as_bytes())
                .is_err()
            {
                break;
            }
        }
        (until_closed(&mut conn), start.elapsed())
    });
    let silent = std::thread::spawn(move || {
        let start = Instant::now();
        let mut conn = open_raw(host, b"", limit);
        (until_closed(&mut conn), start.elapsed())
    });
    for (name, client) in [
        ("stalled", stalled),
        ("dripping", dripping),
        ("silent", silent),
    ] {
        let (rest, took) = client.join().unwrap();
        // Closed, answered nothing (or reset, for the one still writing): never a request.
        match rest {
            Ok(rest) => assert!(
                rest.is_empty() || String::from_utf8_lossy(&rest).starts_with("HTTP/1.1 408"),
                "{name}: answered {:?}",
                String::from_utf8_lossy(&rest)
            ),
            Err(e) => assert!(
                e.kind() == std::io::ErrorKind::ConnectionReset,
                "{name}: still open after {took:?} ({e})"
            ),
        }
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_millis(2500),
            "{name}: closed after {took:?}"
        );
    }
    assert!(app.seen().is_empty(), "the app saw {:?}", app.seen());
    let res = get(gw.addr, "/", &mut Jar::default());
    assert_eq!(res.status, 200, "still serving");
}
