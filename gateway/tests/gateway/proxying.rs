//! What the app receives through the gateway and what the client gets back, over real HTTP:
//! the forwarding headers (and a client's own never believed, unless from a trusted proxy),
//! hop-by-hop headers removed both ways (but never those the gateway writes), bodies streamed
//! whole both ways, the request id, the room's own pages compressed but never the app's
//! answers, and several upstreams in turn.

use std::io::{BufRead, Read};
use std::time::{Duration, Instant};

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(5);

/// A room with `new_visitor_limit` of one place per client a minute, so that who the room
/// thinks the client is shows: a second new place from the same client is `429 limited`.
fn one_place_per_client() -> String {
    "[[rooms]]\nroom = \"sale\"\ncapacity = 100\nsecure_cookies = false\n\
     secret_env = \"WAITING_ROOM_SECRET\"\nnew_visitor_limit = \"1/1m\"\npoll_limit = \"off\"\n"
        .to_owned()
}

/// The first visit of a fresh visitor claiming to be `xff`: its status (and body).
fn first_visit_as(gw: &Gateway, xff: &str) -> Response {
    request(
        gw.addr,
        "GET",
        "/",
        &[("accept", "application/json"), ("x-forwarded-for", xff)],
        b"",
        &mut Jar::default(),
    )
}

#[test]
fn the_app_sees_this_hops_forwarding_headers_and_never_a_clients_own() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &one_place_per_client()));
    let mut jar = Jar::default();
    let res = visit_with(
        gw.addr,
        "/",
        &[("x-forwarded-for", "6.6.6.6")],
        &mut jar,
        LIMIT,
    );
    assert_eq!(res.status, 200, "{}", res.text());
    let spoofed = [
        ("accept", "application/json"),
        ("x-forwarded-for", "6.6.6.6"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "evil.example"),
        ("forwarded", "for=6.6.6.6;proto=https;host=evil.example"),
        ("x-real-ip", "6.6.6.6"),
    ];
    let res = request(gw.addr, "GET", "/echo", &spoofed, b"", &mut jar);
    assert_eq!(res.status, 200, "{}", res.text());
    let host = gw.addr.to_string();
    assert_eq!(echoed(&res, "x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(echoed(&res, "x-forwarded-proto"), ["http"]);
    assert_eq!(echoed(&res, "x-forwarded-host"), [host.as_str()]);
    assert_eq!(
        echoed(&res, "forwarded"),
        [format!("for=127.0.0.1;host=\"{host}\";proto=http")]
    );
    assert_eq!(echoed(&res, "x-real-ip"), ["127.0.0.1"]);
    assert_eq!(echoed(&res, "host"), [host.as_str()], "the client's Host");

    // The room did not believe the spoofed address either: two new visitors claiming
    // different addresses are one client, 127.0.0.1, whose one new place a minute went to the
    // visitor above.
    let res = first_visit_as(&gw, "198.51.100.7");
    assert_eq!(res.status, 429, "{}", res.text());
    assert_eq!(res.json()["state"], "limited", "{}", res.text());
    assert!(res.header("set-cookie").is_none());
}

#[test]
fn behind_a_trusted_proxy_its_x_forwarded_for_names_the_client() {
    let app = App::start();
    let file = format!(
        "trusted_proxies = [\"127.0.0.1\"]\n{}",
        config(&app.url(), &one_place_per_client())
    );
    let gw = Gateway::start(&file);
    let res = first_visit_as(&gw, "198.51.100.7");
    assert_eq!(res.status, 302, "a place for 198.51.100.7: {}", res.text());
    let res = first_visit_as(&gw, "198.51.100.8");
    assert_eq!(
        res.status,
        302,
        "another client, its own place: {}",
        res.text()
    );
    let res = first_visit_as(&gw, "198.51.100.7");
    assert_eq!(res.status, 429, "198.51.100.7 again: {}", res.text());
    assert_eq!(res.json()["state"], "limited");

    let mut jar = Jar::default();
    let xff = [("x-forwarded-for", "198.51.100.9")];
    let res = visit_with(gw.addr, "/", &xff, &mut jar, LIMIT);
    assert_eq!(res.status, 200, "{}", res.text());
    let res = request(
        gw.addr,
        "GET",
        "/echo",
        &[
            ("accept", "application/json"),
            ("x-forwarded-for", "198.51.100.9"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "shop.example"),
        ],
        b"",
        &mut jar,
    );
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(echoed(&res, "x-forwarded-for"), ["198.51.100.9, 127.0.0.1"]);
    assert_eq!(echoed(&res, "x-real-ip"), ["198.51.100.9"]);
    assert_eq!(
        echoed(&res, "x-forwarded-proto"),
        ["https"],
        "the proxy's scheme"
    );
    assert_eq!(echoed(&res, "x-forwarded-host"), ["shop.example"]);
}

#[test]
fn hop_by_hop_headers_are_removed_both_ways() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &sale_room(10)));
    let jar = admitted(gw.addr, "/", LIMIT);
    let cookies: Vec<String> = jar.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let raw = format!(
        "GET /echo HTTP/1.1\r\nHost: {}\r\nConnection: close, X-Hop-Secret\r\n\
         X-Hop-Secret: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n\
         Proxy-Authorization: Basic dXNlcjpwYXNz\r\nProxy-Connection: keep-alive\r\n\
         Trailer: X-Checksum\r\nUpgrade: h2c\r\nX-End-To-End: kept\r\n\
         Accept: application/json\r\nCookie: {}\r\n\r\n",
        gw.addr,
        cookies.join("; ")
    );
    let res = send_raw(gw.addr, raw.as_bytes(), LIMIT).unwrap();
    assert_eq!(res.status, 200, "{}", res.text());
    let names = echoed_names(&res);
    for hop in [
        "connection",
        "x-hop-secret",
        "keep-alive",
        "te",
        "proxy-authorization",
        "proxy-connection",
        "trailer",
        "upgrade",
    ] {
        assert!(
            !names.iter().any(|n| n == hop),
            "{hop} reached the app: {names:?}"
        );
    }
    assert_eq!(echoed(&res, "x-end-to-end"), ["kept"]);

    // The app's own hop-by-hop headers stop at the gateway too.
    let res = request(gw.addr, "GET", "/hop", &[], b"", &mut jar.clone());
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.text(), "<p>hop</p>");
    for hop in [
        "x-app-hop",
        "keep-alive",
        "proxy-authenticate",
        "proxy-connection",
        "upgrade",
    ] {
        assert!(
            res.header(hop).is_none(),
            "{hop} reached the client: {:?}",
            res.headers
        );
    }
    let connection = res.header("connection").unwrap_or("").to_ascii_lowercase();
    assert!(!connection.contains("x-app-hop"), "{connection}");
    assert_eq!(res.header("x-app-end"), Some("kept"));
}

/// A client's `Connection` header may name the headers the gateway writes (the forwarding
/// headers, the request id, `Host`), but they reach the app as the gateway wrote them: the
/// client cannot strip the address the app is told it can believe.
#[test]
fn connection_cannot_strip_the_forwarding_headers() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &sale_room(10)));
    let jar = admitted(gw.addr, "/", LIMIT);
    let cookies: Vec<String> = jar.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let raw = format!(
        "GET /echo HTTP/1.1\r\nHost: {}\r\nConnection: close, x-forwarded-for, X-Real-IP, \
         forwarded, x-forwarded-proto, x-forwarded-host, x-request-id, host\r\n\
         Accept: application/json\r\nCookie: {}\r\n\r\n",
        gw.addr,
        cookies.join("; ")
    );
    let res = send_raw(gw.addr, raw.as_bytes(), LIMIT).unwrap();
    assert_eq!(res.status, 200, "{}", res.text());
    let host = gw.addr.to_string();
    assert_eq!(echoed(&res, "x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(echoed(&res, "x-real-ip"), ["127.0.0.1"]);
    assert_eq!(
        echoed(&res, "forwarded"),
        [format!("for=127.0.0.1;host=\"{host}\";proto=http")]
    );
    assert_eq!(echoed(&res, "x-forwarded-proto"), ["http"]);
    assert_eq!(echoed(&res, "x-forwarded-host"), [host.as_str()]);
    assert_eq!(echoed(&res, "host"), [host.as_str()]);
    assert_eq!(echoed(&res, "x-request-id").len(), 1);
    assert!(echoed(&res, "connection").is_empty());
}

/// `n` bytes of a pattern that a lost, repeated or reordered piece would break.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8 ^ (i / 251) as u8).collect()
}

#[test]
fn request_bodies_reach_the_app_whole() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &sale_room(10)));
    let mut jar = admitted(gw.addr, "/", LIMIT);
    let big = pattern(4 * 1024 * 1024 + 17);
    let res = request(
        gw.addr,
        "POST",
        "/echo",
        &[("accept", "application/json")],
        &big,
        &mut jar,
    );
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.json()["body_bytes"], big.len());

    // Byte for byte, with a Content-Length and chunked.
    let body = pattern(3 * 1024 * 1024 + 5);
    let res = request(gw.addr, "POST", "/mirror", &[], &body, &mut jar);
    assert_eq!(res.status, 200);
    assert_eq!(res.header("x-body-framing"), Some("length"));
    assert!(res.body == body, "the mirrored body differs");

    let cookies: Vec<String> = jar.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut raw = format!(
        "POST /mirror HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nCookie: {}\r\n\
         Transfer-Encoding: chunked\r\n\r\n",
        gw.addr,
        cookies.join("; ")
    )
    .into_bytes();
    for piece in body.chunks(100_000) {
        raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        raw.extend_from_slice(piece);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let res = send_raw(gw.addr, &raw, LIMIT).unwrap();
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.header("x-body-framing"), Some("chunked"));
    assert!(res.body == body, "the mirrored chunked body differs");

    // A request whose head says no body reaches the app without one: not chunked (a `0`
    // chunk, which an app refusing chunked requests answers `411`), a `POST` with a length
    // of 0 at most.
    for method in ["OPTIONS", "DELETE", "POST", "PATCH", "GET"] {
        let raw = format!(
            "{method} /mirror HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nCookie: {}\r\n\r\n",
            gw.addr,
            cookies.join("; ")
        );
        let res = send_raw(gw.addr, raw.as_bytes(), LIMIT).unwrap();
        assert_eq!(res.status, 200, "{method}: {}", res.text());
        assert_ne!(res.header("x-body-framing"), Some("chunked"), "{method}");
        assert_eq!(res.header("x-body-bytes"), Some("0"), "{method}");
        assert!(
            matches!(res.header("x-got-content-length"), Some("none" | "0")),
            "{method}: {:?}",
            res.header("x-got-content-length")
        );
    }
}

#[test]
fn large_responses_stream_back_as_the_app_sends_them() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &sale_room(10)));
    let mut jar = admitted(gw.addr, "/", LIMIT);
    let n = 8 * 1024 * 1024 + 3;
    let path = format!("/big?n={n}");
    let res = request(gw.addr, "GET", &path, &[], b"", &mut jar);
    assert_eq!(res.status, 200);
    assert_eq!(res.body.len(), n);
    let direct = get(app.addr, &path, &mut Jar::default());
    assert!(res.body == direct.body, "not the app's bytes");

    // Streamed, not buffered: the first chunk arrives while the app still sleeps before
    // the second.
    let cookies: Vec<String> = jar.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let raw = format!(
        "GET /drip?s=1.5 HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nCookie: {}\r\n\r\n",
        gw.addr,
        cookies.join("; ")
    );
    let start = Instant::now();
    let mut conn = open_raw(gw.addr, raw.as_bytes(), LIMIT);
    let head = read_head(&mut conn).unwrap();
    assert_eq!(head.status, 200);
    let mut size = String::new();
    conn.read_line(&mut size).unwrap();
    let mut first = vec![0; usize::from_str_radix(size.trim(), 16).unwrap()];
    conn.read_exact(&mut first).unwrap();
    let first_at = start.elapsed();
    assert_eq!(first, b"first\n");
    assert!(
        first_at < Duration::from_millis(1000),
        "the first chunk came after {first_at:?}: buffered"
    );
    let rest = until_closed(&mut conn).unwrap();
    assert!(String::from_utf8_lossy(&rest).contains("second"));
    assert!(start.elapsed() >= Duration::from_millis(1400));
}

#[test]
fn each_request_gets_an_id_the_client_and_the_app_both_see() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &sale_room(10)));
    let mut jar = Jar::default();
    let first = get(gw.addr, "/", &mut jar);
    assert_eq!(first.status, 302);
    let room_id = first
        .header("x-request-id")
        .expect("the room's answer has an id")
        .to_owned();
    assert_eq!(visit(gw.addr, "/", &mut jar, LIMIT).status, 200);

    let json = [("accept", "application/json")];
    let a = request(gw.addr, "GET", "/echo", &json, b"", &mut jar);
    let b = request(gw.addr, "GET", "/echo", &json, b"", &mut jar);
    let id_a = a.header("x-request-id").expect("an id").to_owned();
    let id_b = b.header("x-request-id").expect("an id").to_owned();
    assert!(!id_a.is_empty());
    assert_eq!(echoed(&a, "x-request-id"), [id_a.as_str()]);
    assert_eq!(echoed(&b, "x-request-id"), [id_b.as_str()]);
    assert!(
        id_a != id_b && id_a != room_id,
        "ids repeat: {room_id} {id_a} {id_b}"
    );

    // One a load balancer set is kept, end to end.
    let given = [
        ("accept", "application/json"),
        ("x-request-id", "lb-7f3a-0042"),
    ];
    let c = request(gw.addr, "GET", "/echo", &given, b"", &mut jar);
    assert_eq!(c.header("x-request-id"), Some("lb-7f3a-0042"));
    assert_eq!(echoed(&c, "x-request-id"), ["lb-7f3a-0042"]);

    // One that is no id (too long for one, or with spaces and quotes that would make log lines
    // ambiguous) is replaced by the gateway's own.
    let long = "x".repeat(129);
    for bad in [long.as_str(), "a b", "\"quoted\""] {
        let given = [("accept", "application/json"), ("x-request-id", bad)];
        let d = request(gw.addr, "GET", "/echo", &given, b"", &mut jar);
        let id = d.header("x-request-id").expect("an id").to_owned();
        assert!(id != bad && id.len() <= 64, "{bad:?} kept as {id:?}");
        assert_eq!(echoed(&d, "x-request-id"), [id.as_str()]);
    }
}

#[test]
fn the_rooms_pages_are_compressed_but_the_apps_answers_pass_as_sent() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &sale_room(1)));
    let mut inside = admitted(gw.addr, "/", LIMIT);
    let mut waiting = Jar::default();
    assert_eq!(
        visit(gw.addr, "/", &mut waiting, Duration::ZERO).status,
        429
    );

    let page = |enc: &str, jar: &mut Jar| {
        let h = [("accept", "text/html"), ("accept-encoding", enc)];
        request(gw.addr, "GET", "/", &h, b"", jar)
    };
    let plain = page("identity", &mut waiting);
    assert_eq!(plain.status, 429);
    assert!(plain.header("content-encoding").is_none());
    assert!(plain.text().contains("<html"), "{}", plain.text());

    let gz = page("gzip", &mut waiting);
    assert_eq!(gz.status, 429);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert!(gz.body.len() < plain.body.len() / 2, "{}", gz.body.len());
    let unzipped = String::from_utf8(gunzip(&gz.body)).unwrap();
    assert!(unzipped.contains("<html"), "{unzipped}");

    let br = page("br", &mut waiting);
    assert_eq!(br.status, 429);
    assert_eq!(br.header("content-encoding"), Some("br"));
    assert!(br.body.len() < plain.body.len() / 2);

    let h = [("accept", "application/json"), ("accept-encoding", "gzip")];
    let json = request(gw.addr, "GET", "/", &h, b"", &mut waiting);
    assert_eq!(json.status, 429);
    assert_eq!(json.header("content-encoding"), Some("gzip"));
    let body: serde_json::Value = serde_json::from_slice(&gunzip(&json.body)).unwrap();
    assert_eq!(body["state"], "waiting");

    // The app's answers, to a client that takes gzip and br: untouched.
    let res = page("gzip, br", &mut inside);
    assert_eq!(res.status, 200);
    assert!(
        res.header("content-encoding").is_none(),
        "{:?}",
        res.headers
    );
    assert_eq!(
        res.text(),
        "<!doctype html><title>app</title><h1>app page /</h1>"
    );
    let h = [
        ("accept", "application/json"),
        ("accept-encoding", "gzip, br"),
    ];
    let res = request(gw.addr, "GET", "/echo", &h, b"", &mut inside);
    assert!(res.header("content-encoding").is_none());
    assert_eq!(
        echoed(&res, "accept-encoding"),
        ["gzip, br"],
        "the app is asked as the client asked"
    );
    let h = [("accept-encoding", "gzip")];
    let big = request(gw.addr, "GET", "/big?n=300000", &h, b"", &mut inside);
    assert!(big.header("content-encoding").is_none());
    assert_eq!(big.body.len(), 300_000);
    // The app's own compression, passed as it is (not compressed twice, not undone).
    let res = request(gw.addr, "GET", "/gz", &h, b"", &mut inside);
    let direct = request(app.addr, "GET", "/gz", &h, b"", &mut Jar::default());
    assert_eq!(res.header("content-encoding"), Some("gzip"));
    assert!(res.body == direct.body, "the app's gzip bytes changed");
    assert!(String::from_utf8(gunzip(&res.body))
        .unwrap()
        .starts_with("<p>the app compressed this itself</p>"));
}

#[test]
fn several_upstreams_take_turns() {
    let a = App::start();
    let b = App::start();
    let file = format!(
        "upstreams = [\"{}\", \"{}\"]\n[limits]\nupstream_timeout = \"2s\"\n\
         header_read_timeout = \"2s\"\ngrace = \"5s\"\n",
        a.url(),
        b.url()
    );
    let gw = Gateway::start(&file);
    for i in 1..=6 {
        let res = get(gw.addr, &format!("/turn/{i}"), &mut Jar::default());
        assert_eq!(res.status, 200, "{}", res.text());
        assert!(res.text().contains(&format!("app page /turn/{i}")));
    }
    let numbers = |app: &App| -> Vec<u32> {
        app.seen()
            .iter()
            .map(|l| l.strip_prefix("GET /turn/").unwrap().parse().unwrap())
            .collect()
    };
    let (on_a, on_b) = (numbers(&a), numbers(&b));
    assert_eq!(on_a.len(), 3, "a: {on_a:?}, b: {on_b:?}");
    assert_eq!(on_b.len(), 3, "a: {on_a:?}, b: {on_b:?}");
    // In turn: one app took the odd requests, the other the even ones.
    assert!(
        on_a.iter().all(|n| n % 2 == on_a[0] % 2) && on_b.iter().all(|n| n % 2 != on_a[0] % 2),
        "not in turn: a {on_a:?}, b {on_b:?}"
    );
}

/// The port of the gateway's connection to the app that carried a `GET /peer`.
fn upstream_port(gw: &Gateway) -> String {
    let res = get(gw.addr, "/peer", &mut Jar::default());
    assert_eq!(res.status, 200, "{}", res.text());
    res.text()
}

#[test]
fn idle_connections_to_the_app_are_closed_after_upstream_idle_timeout() {
    let app = App::start();
    let with = |timeout: &str| {
        Gateway::start(&format!(
            "workers = 1\nupstream = \"{}\"\n[limits]\nupstream_idle_timeout = \"{timeout}\"\n",
            app.url()
        ))
    };
    // Kept for 300 ms: reused at once, a new connection after a second idle.
    let short = with("300ms");
    let first = upstream_port(&short);
    assert_eq!(upstream_port(&short), first, "an idle connection is reused");
    std::thread::sleep(Duration::from_millis(1_000));
    assert_ne!(upstream_port(&short), first, "closed after 300 ms idle");
    // The default, 60 s: the same second idle keeps it.
    let long = with("60s");
    let first = upstream_port(&long);
    std::thread::sleep(Duration::from_millis(1_000));
    assert_eq!(upstream_port(&long), first, "kept for 60 s");
}
