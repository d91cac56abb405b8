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

/// `POST /mirror` with a 10-byte body sent in two halves `pause` apart, with `cookies`, framed
/// by `Content-Length` or chunked; the connection, its answer still to read.
fn upload_in_halves(
    addr: std::net::SocketAddr,
    cookies: &str,
    pause: Duration,
    chunked: bool,
) -> std::io::BufReader<std::net::TcpStream> {
    let (framing, first, second) = if chunked {
        (
            "Transfer-Encoding: chunked",
            "5\r\n01234\r\n",
            "5\r\n56789\r\n0\r\n\r\n",
        )
    } else {
        ("Content-Length: 10", "01234", "56789")
    };
    let mut conn = open_raw(
        addr,
        format!(
            "POST /mirror HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookies}\r\n{framing}\r\n\
             Connection: close\r\n\r\n{first}"
        )
        .as_bytes(),
        Duration::from_secs(10),
    );
    std::thread::sleep(pause);
    conn.get_mut().write_all(second.as_bytes()).unwrap();
    conn
}

/// Half of a 10-byte body, framed by `Content-Length` or chunked, and then the client is gone.
fn broken_off(addr: std::net::SocketAddr, cookies: &str, chunked: bool) {
    let (framing, half) = if chunked {
        ("Transfer-Encoding: chunked", "5\r\n01234\r\n")
    } else {
        ("Content-Length: 10", "01234")
    };
    let conn = open_raw(
        addr,
        format!(
            "POST /echo HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookies}\r\n{framing}\r\n\r\n{half}"
        )
        .as_bytes(),
        SHORT,
    );
    std::thread::sleep(Duration::from_millis(300));
    drop(conn);
}

#[test]
fn a_body_slower_to_arrive_than_the_upstream_timeout_still_reaches_the_app() {
    // The upstream timeout is the app's time to answer, not the client's to send its body.
    let app = App::start();
    let gw = Gateway::start(&plain_proxy(
        &app.url(),
        "upstream_timeout = \"1s\"\nbody_timeout = \"5s\"\nrequest_timeout = \"10s\"",
    ));
    for chunked in [false, true] {
        let mut conn = upload_in_halves(gw.addr, "", Duration::from_millis(1_600), chunked);
        let res = read_response(&mut conn).unwrap();
        assert_eq!(res.status, 200, "chunked {chunked}: {}", res.text());
        assert_eq!(res.text(), "0123456789", "chunked {chunked}");
    }
}

#[test]
fn an_app_that_stops_reading_a_large_body_is_a_504_within_the_upstream_timeout() {
    // Its socket full, the app reads no more of the body and never ends it: the upstream
    // timeout runs all the same (the time is the app's, not the client's).
    let app = App::start();
    let gw = Gateway::start(&plain_proxy(
        &app.url(),
        "upstream_timeout = \"1s\"\nrequest_timeout = \"20s\"\nmax_body_bytes = 100000000",
    ));
    const BYTES: usize = 48 << 20;
    let mut conn = open_raw(
        gw.addr,
        format!(
            "POST /stall?s=15 HTTP/1.1\r\nHost: {}\r\nContent-Length: {BYTES}\r\n\r\n",
            gw.addr
        )
        .as_bytes(),
        Duration::from_secs(20),
    );
    let mut writer = conn.get_ref().try_clone().unwrap();
    // Sends the body as fast as the gateway takes it; stops when the connection closes.
    std::thread::spawn(move || {
        let block = vec![b'x'; 1 << 16];
        for _ in 0..BYTES / block.len() {
            if writer.write_all(&block).is_err() {
                break;
            }
        }
    });
    let (res, took) = timed(|| read_response(&mut conn));
    let res = res.unwrap();
    assert_eq!(res.status, 504, "{}", res.text());
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// A room whose capacity follows the app counts what the app does, not what its clients do:
/// bodies uploaded slower than the controller's timeout and bodies broken off halfway are
/// neither timeouts nor errors of the app (each would push the capacity down for everyone).
#[test]
fn slow_or_broken_bodies_are_not_counted_against_the_app() {
    let app = App::start();
    let mut room = AutoRoom::start(&app);
    let addr = room.gw.addr;
    // Six slow uploads (past the controller's timeout, 2 s at the least) and six broken off,
    // all from the two people inside.
    let clients: Vec<_> = (0..12)
        .map(|i| {
            let cookies = room.inside[i % 2].header().unwrap_or_default();
            std::thread::spawn(move || {
                // Each kind framed both ways (by Content-Length, chunked).
                let chunked = i % 4 >= 2;
                if i % 2 == 0 {
                    let pause = Duration::from_millis(2_300);
                    let mut conn = upload_in_halves(addr, &cookies, pause, chunked);
                    read_response(&mut conn).map(|res| res.status)
                } else {
                    broken_off(addr, &cookies, chunked);
                    Ok(0)
                }
            })
        })
        .collect();
    for (i, client) in clients.into_iter().enumerate() {
        let status = client.join().unwrap();
        if i % 2 == 0 {
            assert_eq!(status, Ok(200), "upload {i}");
        }
    }
    // Quick requests until the first decision on enough samples, which holds the uploads'
    // window (a window of too few samples is carried into the next).
    let decided = room.requests_until(|status| {
        let auto = &status["auto"];
        !auto["change"].is_null() && auto["reason"] != "few_samples"
    });
    let status = room.status();
    assert!(decided, "no decision: {status}");
    assert_eq!(
        status["auto"]["error_rate"],
        0.0,
        "{status}\n{}",
        room.gw.log()
    );
    assert_eq!(status["auto"]["change"], "grow", "{status}");
    assert!(
        status["auto"]["samples"].as_u64().unwrap() >= 20,
        "{status}"
    );
}
