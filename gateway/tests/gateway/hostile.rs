//! Requests a gateway must refuse, sent as they are on raw TCP: each gets a clear `4xx`, none
//! reaches the app (its `/seen`), and the gateway serves a normal request right after each.
//!
//! The gateway here has no room, so that every request it does not refuse goes to the app: a
//! refusal is the only reason one would not arrive (the normal request after each shows the way
//! through is open).

use std::time::Duration;

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(5);

fn gateway(app: &App) -> Gateway {
    Gateway::start(&format!(
        "upstream = \"{}\"\n[limits]\nupstream_timeout = \"2s\"\nheader_read_timeout = \"2s\"\n\
         grace = \"2s\"\nmax_header_bytes = 8192\nmax_headers = 50\nmax_body_bytes = 1000\n",
        app.url()
    ))
}

/// One hostile request: its name (the marker in its path), its bytes, the statuses that are
/// right for it.
struct Case {
    name: &'static str,
    raw: String,
    expect: &'static [u16],
}

fn cases(host: &str) -> Vec<Case> {
    let big = "a".repeat(9000);
    let many: String = (0..60).map(|i| format!("X-Many-{i}: {i}\r\n")).collect();
    vec![
        Case {
            name: "big-head",
            raw: format!("GET /hostile/big-head HTTP/1.1\r\nHost: {host}\r\nX-Big: {big}\r\n\r\n"),
            expect: &[431],
        },
        Case {
            name: "many-headers",
            raw: format!("GET /hostile/many-headers HTTP/1.1\r\nHost: {host}\r\n{many}\r\n"),
            expect: &[431],
        },
        Case {
            // Declared too large: refused from the head, before any of the body is sent.
            name: "too-big",
            raw: format!(
                "POST /hostile/too-big HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5000\r\n\r\n"
            ),
            expect: &[413],
        },
        Case {
            name: "te-not-chunked",
            raw: format!(
                "POST /hostile/te-not-chunked HTTP/1.1\r\nHost: {host}\r\n\
                 Transfer-Encoding: gzip\r\n\r\n"
            ),
            expect: &[400, 501],
        },
        Case {
            name: "two-lengths",
            raw: format!(
                "POST /hostile/two-lengths HTTP/1.1\r\nHost: {host}\r\nContent-Length: 3\r\n\
                 Content-Length: 4\r\n\r\nabcd"
            ),
            expect: &[400],
        },
        Case {
            name: "host-space",
            raw: "GET /hostile/host-space HTTP/1.1\r\nHost: exa mple.com\r\n\r\n".into(),
            expect: &[400],
        },
        Case {
            name: "host-userinfo",
            raw: format!("GET /hostile/host-userinfo HTTP/1.1\r\nHost: user@{host}\r\n\r\n"),
            expect: &[400],
        },
        Case {
            name: "two-hosts",
            raw: format!(
                "GET /hostile/two-hosts HTTP/1.1\r\nHost: {host}\r\nHost: evil.example\r\n\r\n"
            ),
            expect: &[400],
        },
        Case {
            name: "no-host",
            raw: "GET /hostile/no-host HTTP/1.1\r\nAccept: */*\r\n\r\n".into(),
            expect: &[400],
        },
        Case {
            name: "absolute-other-host",
            raw: format!(
                "GET http://evil.example/hostile/absolute-other-host HTTP/1.1\r\nHost: {host}\r\n\r\n"
            ),
            expect: &[400],
        },
        Case {
            // A dot segment: an app that resolved it would serve another path than the one
            // the rooms and bypass rules matched.
            name: "dot-segment",
            raw: format!("GET /hostile/dot-segment/../x HTTP/1.1\r\nHost: {host}\r\n\r\n"),
            expect: &[400],
        },
        Case {
            name: "encoded-dot-segment",
            raw: format!(
                "GET /hostile/encoded-dot-segment/%2E%2e%2Fx HTTP/1.1\r\nHost: {host}\r\n\r\n"
            ),
            expect: &[400],
        },
        Case {
            name: "dot-dot-semicolon",
            raw: format!(
                "GET /hostile/dot-dot-semicolon/..;/x HTTP/1.1\r\nHost: {host}\r\n\r\n"
            ),
            expect: &[400],
        },
        Case {
            // Not `POST` to a gate, but `POST` to an app that upper-cases methods.
            name: "lower-case-method",
            raw: format!("post /hostile/lower-case-method HTTP/1.1\r\nHost: {host}\r\n\r\n"),
            expect: &[400],
        },
        Case {
            name: "connect",
            raw: "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n".into(),
            expect: &[405, 400],
        },
    ]
}

#[test]
fn hostile_requests_get_a_clear_4xx_and_never_reach_the_app() {
    let app = App::start();
    let gw = gateway(&app);
    let host = gw.addr.to_string();
    let mut failures = Vec::new();
    for case in cases(&host) {
        match send_raw(gw.addr, case.raw.as_bytes(), LIMIT) {
            Ok(res) if case.expect.contains(&res.status) => {}
            Ok(res) => failures.push(format!(
                "{}: {} (expected {:?}): {}",
                case.name,
                res.status,
                case.expect,
                res.text()
            )),
            Err(e) => failures.push(format!("{}: no answer: {e}", case.name)),
        }
        let after = format!("/after/{}", case.name);
        let res = get(gw.addr, &after, &mut Jar::default());
        assert_eq!(res.status, 200, "after {}: {}", case.name, res.text());
        assert!(res.text().contains(&format!("app page {after}")));
    }
    let seen = app.seen();
    let reached: Vec<&String> = seen
        .iter()
        .filter(|l| l.contains("/hostile/") || l.contains("evil.example"))
        .collect();
    let afters = seen.iter().filter(|l| l.starts_with("GET /after/")).count();
    assert_eq!(afters, cases(&host).len(), "{seen:?}");
    assert!(
        failures.is_empty() && reached.is_empty(),
        "wrong answers: {failures:#?}\nreached the app: {reached:?}"
    );
}

#[test]
fn the_guards_refusals_are_pages_that_close_the_connection() {
    let app = App::start();
    let gw = gateway(&app);
    let raw = "GET /hostile/x HTTP/1.1\r\nHost: user@evil\r\nAccept: application/json\r\n\r\n";
    let res = send_raw(gw.addr, raw.as_bytes(), LIMIT).unwrap();
    assert_eq!(res.status, 400);
    assert_eq!(res.header("connection"), Some("close"));
    assert_eq!(res.json()["error"], "bad_request", "{}", res.text());
    let raw = "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n";
    let res = send_raw(gw.addr, raw.as_bytes(), LIMIT).unwrap();
    assert_eq!(res.status, 405, "{}", res.text());
    assert!(
        res.text().contains("405 Method Not Allowed"),
        "{}",
        res.text()
    );
    // A body declared past the limit gets the same kind of page as one found too large on the
    // way, and the connection (which may hold the body) is closed.
    let raw = "POST /hostile/big HTTP/1.1\r\nHost: shop.example\r\nAccept: application/json\r\n\
               Content-Length: 5000\r\n\r\n";
    let res = send_raw(gw.addr, raw.as_bytes(), LIMIT).unwrap();
    assert_eq!(res.status, 413, "{}", res.text());
    assert_eq!(res.json()["error"], "payload_too_large", "{}", res.text());
    assert_eq!(res.header("connection"), Some("close"));
    assert!(app.seen().is_empty(), "{:?}", app.seen());
}

#[test]
fn a_streamed_body_past_max_body_bytes_is_a_413_and_never_arrives_whole() {
    let app = App::start();
    let gw = gateway(&app);
    let mut raw = format!(
        "POST /mirror HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
        gw.addr
    )
    .into_bytes();
    for _ in 0..5 {
        raw.extend_from_slice(b"190\r\n");
        raw.extend_from_slice(&[b'x'; 0x190]);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let res = send_raw(gw.addr, &raw, LIMIT).unwrap();
    assert_eq!(res.status, 413, "{}", res.text());
    assert!(
        !app.seen().iter().any(|l| l.starts_with("MIRRORED")),
        "the app got a whole body: {:?}",
        app.seen()
    );
    let res = get(gw.addr, "/after", &mut Jar::default());
    assert_eq!(res.status, 200);
}

/// A `POST /mirror` framed by `framing` (header lines) whose body reads `abc` as chunked and
/// something else by Content-Length, followed on the same connection by a smuggled `GET`.
fn both_lengths(host: &str, framing: &str, tag: &str) -> String {
    format!(
        "POST /mirror HTTP/1.1\r\nHost: {host}\r\n{framing}\r\n3\r\nabc\r\n0\r\n\r\n\
         GET /hostile/smuggled-{tag} HTTP/1.1\r\nHost: {host}\r\n\r\n"
    )
}

const CL_TE: &str = "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n";
const TE_CL: &str = "Transfer-Encoding: chunked\r\nContent-Length: 60\r\n";

/// A request with both lengths is refused by the serving loop before the gateway's stack or the
/// app sees it (hyper alone would read it as chunked and pass it on without its
/// Content-Length), its connection closed, and the bytes after its chunked body never read as
/// a request, at the gateway or at the app.
#[test]
fn both_content_length_and_transfer_encoding_are_refused_before_the_app() {
    let app = App::start();
    let gw = gateway(&app);
    let host = gw.addr.to_string();
    for (tag, framing) in [("cl-te", CL_TE), ("te-cl", TE_CL)] {
        let mut conn = open_raw(gw.addr, both_lengths(&host, framing, tag).as_bytes(), LIMIT);
        let res = read_response(&mut conn).unwrap();
        assert_eq!(res.status, 400, "{tag}: {}", res.text());
        let rest = until_closed(&mut conn).expect("the connection is closed after the 400");
        assert!(
            rest.is_empty(),
            "{tag}: the smuggled request was answered: {}",
            String::from_utf8_lossy(&rest)
        );
    }
    assert!(app.seen().is_empty(), "reached the app: {:?}", app.seen());
    // The control: with Transfer-Encoding alone the connection stays open, and a request
    // pipelined after the body is answered (so the check above can see one).
    let mut conn = open_raw(
        gw.addr,
        both_lengths(&host, "Transfer-Encoding: chunked\r\n", "control").as_bytes(),
        LIMIT,
    );
    assert_eq!(read_response(&mut conn).unwrap().body, b"abc");
    assert_eq!(read_response(&mut conn).unwrap().status, 200);
    let seen = app.seen();
    assert!(
        seen.contains(&"GET /hostile/smuggled-control".to_owned()),
        "{seen:?}"
    );
}
