//! The room in the gateway, as visitors meet it over real HTTP in front of the Python app: a
//! first visit's place and redirect, the line when the room is full (the waiting page, `429`
//! with the position), admission when the one inside leaves or their slot runs out, a gated
//! route, bypassed paths, and a WebSocket through the gateway for an admitted visitor only.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(5);
const JSON: [(&str, &str); 1] = [("accept", "application/json")];

/// A room `sale` of `capacity` over every path, with extra keys (`active_ttl`, routes...).
fn room(capacity: u32, extra: &str) -> String {
    format!("{}{extra}\n", sale_room(capacity))
}

/// Where the visitor with `jar` stands, as the room answers a JSON client asking for `/`.
fn standing(gw: &Gateway, jar: &mut Jar) -> Response {
    request(gw.addr, "GET", "/", &JSON, b"", jar)
}

#[test]
fn a_first_visit_gets_a_place_and_a_redirect_then_the_page() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &room(1, "")));
    let mut jar = Jar::default();
    let res = get(gw.addr, "/shop/item?id=7", &mut jar);
    assert_eq!(res.status, 302, "{}", res.text());
    let location = res.header("location").expect("a Location");
    assert!(
        location.ends_with("/shop/item?id=7"),
        "back to the same URL: {location}"
    );
    let cookie = res.header("set-cookie").expect("a place");
    assert!(cookie.starts_with("wr_sale_q="), "{cookie}");
    assert!(cookie.to_ascii_lowercase().contains("httponly"), "{cookie}");
    assert!(app.seen().is_empty(), "the redirect did not reach the app");

    let res = visit(gw.addr, "/shop/item?id=7", &mut jar, LIMIT);
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(res.text().contains("app page /shop/item"), "{}", res.text());
    assert!(jar.0.contains_key("wr_sale_a"), "admitted: {:?}", jar.0);
    assert_eq!(app.seen(), ["GET /shop/item?id=7"]);
}

#[test]
fn when_the_room_is_full_visitors_wait_in_order_and_the_next_gets_in_when_one_leaves() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &room(1, "")));
    let mut first = admitted(gw.addr, "/", LIMIT);

    let mut second = Jar::default();
    let res = visit(gw.addr, "/", &mut second, Duration::ZERO);
    assert_eq!(res.status, 429, "{}", res.text());
    assert!(res.header("retry-after").is_some());
    assert_eq!(res.header("cache-control"), Some("no-store"));
    assert!(
        res.header("content-type").unwrap().starts_with("text/html"),
        "browsers get the waiting page"
    );
    assert!(res.text().contains("<html"), "{}", res.text());
    let res = standing(&gw, &mut second);
    assert_eq!(res.status, 429);
    let body = res.json();
    assert_eq!(body["state"], "waiting", "{body}");
    assert_eq!(body["position"], 1, "{body}");

    let mut third = Jar::default();
    assert_eq!(visit(gw.addr, "/", &mut third, Duration::ZERO).status, 429);
    let body = standing(&gw, &mut third).json();
    assert_eq!(body["position"], 2, "{body}");
    assert_eq!(app.seen(), ["GET /"], "only the one inside reached the app");

    let res = request(
        gw.addr,
        "POST",
        "/__waitingroom/sale/leave",
        &JSON,
        b"",
        &mut first,
    );
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.json()["state"], "left");

    let res = visit(gw.addr, "/next", &mut second, LIMIT);
    assert_eq!(res.status, 200, "the second gets in: {}", res.text());
    assert!(res.text().contains("app page /next"));
    let body = standing(&gw, &mut third).json();
    assert_eq!(body["state"], "waiting", "{body}");
    assert_eq!(body["position"], 1, "the third moved up: {body}");
    assert_eq!(app.seen(), ["GET /", "GET /next"]);
    let res = standing(&gw, &mut first);
    assert_ne!(res.status, 200, "the one who left is out: {}", res.text());
}

#[test]
fn an_idle_slot_frees_itself_after_active_ttl() {
    let app = App::start();
    let gw = Gateway::start(&config(
        &app.url(),
        &room(1, "active_ttl = \"2s\"\nrefresh = \"1s\""),
    ));
    let mut first = admitted(gw.addr, "/", LIMIT);
    let admitted_at = Instant::now();
    let mut second = Jar::default();
    assert_eq!(visit(gw.addr, "/", &mut second, Duration::ZERO).status, 429);

    let res = visit(gw.addr, "/after", &mut second, LIMIT);
    let waited = admitted_at.elapsed();
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(res.text().contains("app page /after"));
    assert!(
        waited >= Duration::from_millis(1500),
        "let in after {waited:?}, before the first one's slot ran out"
    );
    let res = standing(&gw, &mut first);
    assert_ne!(
        res.status,
        200,
        "the first one's slot is gone: {}",
        res.text()
    );
    assert_eq!(app.seen(), ["GET /", "GET /after"]);
}

#[test]
fn a_gated_route_needs_an_admission_and_never_queues() {
    let app = App::start();
    let gw = Gateway::start(&config(
        &app.url(),
        &room(1, "gates = [\"POST /checkout\"]"),
    ));
    let res = request(
        gw.addr,
        "POST",
        "/checkout",
        &JSON,
        b"{}",
        &mut Jar::default(),
    );
    assert_eq!(res.status, 403, "{}", res.text());
    let body = res.json();
    assert_eq!(body["error"], "not_admitted", "{body}");
    assert_eq!(body["room"], "sale");
    assert_eq!(body["reason"], "missing");
    assert!(res.header("set-cookie").is_none(), "no place given");

    let mut inside = admitted(gw.addr, "/", LIMIT);
    let res = request(gw.addr, "POST", "/checkout", &JSON, b"{}", &mut inside);
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(res.text().contains("app page /checkout"));

    // One in line (a place, no admission) is refused, not queued, even with the room full.
    let mut waiting = Jar::default();
    assert_eq!(
        visit(gw.addr, "/", &mut waiting, Duration::ZERO).status,
        429
    );
    let res = request(gw.addr, "POST", "/checkout", &JSON, b"{}", &mut waiting);
    assert_eq!(res.status, 403, "{}", res.text());
    assert_eq!(res.json()["error"], "not_admitted");
    // The gate is for POST: a GET of the same path is a page of the room like any other.
    let res = get(gw.addr, "/checkout", &mut Jar::default());
    assert_eq!(res.status, 302, "{}", res.text());
    assert_eq!(app.seen(), ["GET /", "POST /checkout"]);
}

/// A gate holds for every spelling of its route an app may serve as it (Express ignores case
/// and a trailing slash, Java servers drop `;` parameters, nginx merges slashes, most decode
/// `%63`): a visitor admitted by the default room but not by the gate's room, or by none, is
/// refused them all, and the app sees none of them.
#[test]
fn a_gate_holds_for_every_spelling_of_its_route() {
    let app = App::start();
    let rooms = format!(
        "{}
[[rooms]]
room = \"drop\"\ncapacity = 1\npaths = [\"/drop\"]\n\
         gates = [\"POST /checkout\", \"GET /orders\", \"/api/orders/*\"]\n\
         secure_cookies = false\nsecret_env = \"WAITING_ROOM_SECRET\"\n",
        sale_room(100)
    );
    let gw = Gateway::start(&config(&app.url(), &rooms));
    let mut shop = admitted(gw.addr, "/", LIMIT);
    let mut spellings = Vec::new();
    for path in [
        "/checkout",
        "/checkout/",
        "/checkout;x",
        "//checkout",
        "/Checkout",
        "/%63heckout",
        "/checkout%2f",
        "/checkout.",
        "/checkout%3bx",
        "/checkout%20",
    ] {
        spellings.push(("POST", path.to_owned()));
    }
    for path in ["/orders", "/orders/", "/ORDERS", "/orders;jsessionid=1"] {
        spellings.push(("GET", path.to_owned()));
    }
    for path in [
        "/api/orders/1",
        "/api/orders;x/1",
        "/api//orders/1",
        "/API/orders/1",
    ] {
        spellings.push(("GET", path.to_owned()));
    }
    for (method, path) in &spellings {
        for jar in [&mut shop, &mut Jar::default()] {
            let res = request(gw.addr, method, path, &JSON, b"", jar);
            assert_eq!(res.status, 403, "{method} {path}: {}", res.text());
            assert_eq!(res.json()["room"], "drop", "{method} {path}");
        }
    }
    // What the gates do not name is the default room's, as before.
    let res = request(gw.addr, "GET", "/checkout", &JSON, b"", &mut shop);
    assert_eq!(res.status, 200, "{}", res.text());
    let res = request(gw.addr, "GET", "/api/orders", &JSON, b"", &mut shop);
    assert_eq!(res.status, 200, "{}", res.text());
    let res = request(gw.addr, "GET", "/checkout-help", &JSON, b"", &mut shop);
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(
        app.seen(),
        [
            "GET /",
            "GET /checkout",
            "GET /api/orders",
            "GET /checkout-help"
        ]
    );
}

#[test]
fn bypassed_paths_reach_the_app_without_the_room() {
    let app = App::start();
    let gw = Gateway::start(&config(
        &app.url(),
        &room(1, "bypass = [\"/static\", \"/favicon.ico\"]"),
    ));
    let _inside = admitted(gw.addr, "/", LIMIT);
    for path in ["/static/app.js", "/static", "/favicon.ico"] {
        let res = get(gw.addr, path, &mut Jar::default());
        assert_eq!(res.status, 200, "{path}: {}", res.text());
        assert!(res.text().contains(&format!("app page {path}")));
        assert!(res.header("set-cookie").is_none(), "{path}: no cookie");
    }
    // By segments: /statics is not /static.
    let res = get(gw.addr, "/statics/x.js", &mut Jar::default());
    assert_eq!(res.status, 302, "{}", res.text());
    assert_eq!(
        app.seen(),
        [
            "GET /",
            "GET /static/app.js",
            "GET /static",
            "GET /favicon.ico"
        ]
    );
}

/// The RFC 6455 sample key and the accept value a server must derive from it (section 1.3).
const WS_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const WS_ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

fn handshake(gw: &Gateway, jar: &Jar) -> (Response, std::io::BufReader<std::net::TcpStream>) {
    let mut raw = format!(
        "GET /ws HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {WS_KEY}\r\nSec-WebSocket-Version: 13\r\n\
         Accept: application/json\r\n",
        gw.addr
    );
    if let Some(cookies) = jar.header() {
        raw.push_str(&format!("Cookie: {cookies}\r\n"));
    }
    raw.push_str("\r\n");
    let mut conn = open_raw(gw.addr, raw.as_bytes(), LIMIT);
    let head = read_head(&mut conn).unwrap();
    (head, conn)
}

/// A client's frame: FIN, `opcode`, masked as RFC 6455 requires of clients.
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x5a, 0xc3, 0x17, 0x88];
    let mut out = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// A server's frame: (opcode, payload); servers do not mask.
fn read_frame(r: &mut impl Read) -> (u8, Vec<u8>) {
    let mut head = [0; 2];
    r.read_exact(&mut head).unwrap();
    assert_eq!(head[1] & 0x80, 0, "a server frame is not masked");
    let n = match head[1] & 0x7f {
        126 => {
            let mut len = [0; 2];
            r.read_exact(&mut len).unwrap();
            u16::from_be_bytes(len) as usize
        }
        127 => panic!("no frame here is that long"),
        n => n as usize,
    };
    let mut payload = vec![0; n];
    r.read_exact(&mut payload).unwrap();
    (head[0] & 0x0f, payload)
}

#[test]
fn a_websocket_goes_through_for_an_admitted_visitor_only() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &room(1, "")));
    let inside = admitted(gw.addr, "/", LIMIT);
    let (head, mut conn) = handshake(&gw, &inside);
    assert_eq!(head.status, 101, "{:?}", head.headers);
    assert_eq!(head.header("sec-websocket-accept"), Some(WS_ACCEPT));
    assert_eq!(
        head.header("upgrade")
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("websocket")
    );

    let text = "hello through the gateway";
    conn.get_mut()
        .write_all(&frame(0x1, text.as_bytes()))
        .unwrap();
    assert_eq!(read_frame(&mut conn), (0x1, text.as_bytes().to_vec()));
    let long: Vec<u8> = (0..300u32).map(|i| (i % 256) as u8).collect();
    conn.get_mut().write_all(&frame(0x2, &long)).unwrap();
    assert_eq!(read_frame(&mut conn), (0x2, long));
    conn.get_mut().write_all(&frame(0x8, b"")).unwrap();
    assert_eq!(read_frame(&mut conn).0, 0x8, "the app's close");
    assert_eq!(
        until_closed(&mut conn).unwrap(),
        b"",
        "closed after the close frame"
    );

    // Not admitted: one in line, and one with no place at all.
    let mut waiting = Jar::default();
    assert_eq!(
        visit(gw.addr, "/", &mut waiting, Duration::ZERO).status,
        429
    );
    let (head, _) = handshake(&gw, &waiting);
    assert_eq!(head.status, 429, "{:?}", head.headers);
    let (head, _) = handshake(&gw, &Jar::default());
    assert_eq!(head.status, 302, "{:?}", head.headers);
    let handshakes = app.seen().iter().filter(|l| *l == "GET /ws").count();
    assert_eq!(handshakes, 1, "only the admitted handshake reached the app");
}

/// Only a WebSocket handshake switches protocols through the gateway. An app that takes an
/// `h2c` upgrade (or any other) would otherwise be joined to the client on a connection the
/// gateway no longer reads, every request on it past the rooms: here on a bypassed path, for a
/// visitor never admitted. And an app that switches protocols unasked is a `502`.
#[test]
fn no_upgrade_but_a_websocket_is_passed_on() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &room(1, "bypass = [\"/tunnel\"]")));
    let host = gw.addr;
    for upgrade in ["h2c", "websocket, h2c", "TLS/1.2"] {
        let mut conn = open_raw(
            host,
            format!(
                "GET /tunnel HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade, HTTP2-Settings\r\n\
                 Upgrade: {upgrade}\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
            )
            .as_bytes(),
            LIMIT,
        );
        let res = read_response(&mut conn).unwrap();
        assert_eq!(
            res.status,
            200,
            "{upgrade}: {:?} {}",
            res.headers,
            res.text()
        );
        assert_eq!(res.text(), "no upgrade asked", "{upgrade}");
    }
    let unasked = get(host, "/tunnel?always=1", &mut Jar::default());
    assert_eq!(unasked.status, 502, "{}", unasked.text());
}
