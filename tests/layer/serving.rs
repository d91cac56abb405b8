//! Serving that a sale survives, over real TCP, with the room in front: `serve::serve` (what
//! the demo, the lobby, the settings-file example and the hyper example serve with) hangs up on
//! connections that send half a request header or sit idle, answers a request the app is too
//! slow for with `503`, caps its connections, and meanwhile serves a normal client at once. And
//! the demo serves with it. Its other limits, its shutdown and upgrades: `serve.rs`.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower_waiting_room::serve::{serve, Limits};
use tower_waiting_room::WaitingRoomLayer;

use common::{app, SECRET};

/// Short limits, so that the tests wait seconds, not minutes.
const LIMITS: Limits = Limits::new()
    .header_read_timeout(Duration::from_secs(1))
    .request_timeout(Duration::from_secs(1))
    .max_connections(100);

/// What a slow client sends: the start of a request header, never its end.
pub(crate) const HALF_A_HEADER: &[u8] = b"GET / HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: slo";

/// A whole request, on a connection the client closes after the answer.
const WHOLE_REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n\r\n";

/// The room in front of the tests' app, with a route the app takes 10 s to answer, served by
/// `serve` within `limits` on a free loopback port.
async fn start(limits: Limits) -> SocketAddr {
    let layer = WaitingRoomLayer::builder("serving")
        .capacity(1_000)
        .secret(SECRET)
        .build()
        .unwrap();
    let slow = Router::new().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            "finally"
        }),
    );
    // The slow route outside the room: what is slow here is the app, not the room.
    let router = slow.merge(app(layer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, router, limits, std::future::pending()));
    addr
}

/// Opens a connection and sends `bytes`.
pub(crate) async fn connect(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    stream
}

/// Reads until the server closes the connection (end of stream or a reset), within `within`:
/// what it sent, or `None` if it was still open then.
pub(crate) async fn closed_within(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok().map(|()| got)
}

/// A normal client's whole exchange: its status line, and how long it took.
async fn normal_client(addr: SocketAddr) -> (String, Duration) {
    let start = Instant::now();
    let mut stream = connect(addr, WHOLE_REQUEST).await;
    let answer = closed_within(&mut stream, Duration::from_secs(30))
        .await
        .expect("the answer, and the connection closed as asked");
    let text = String::from_utf8_lossy(&answer);
    (
        text.lines().next().unwrap_or("").to_owned(),
        start.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_a_request_header_is_hung_up_on_and_a_normal_client_is_served_meanwhile() {
    let addr = start(LIMITS).await;
    let opened = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..50 {
        slow.push(connect(addr, HALF_A_HEADER).await);
    }
    // While the slow connections are open, a normal client is served at once: its first
    // visit's redirect.
    let (status, took) = normal_client(addr).await;
    assert_eq!(status, "HTTP/1.1 302 Found");
    assert!(took < Duration::from_millis(500), "served in {took:?}");
    // Every slow connection is closed once the header-read timeout has passed, not before.
    let timeout = LIMITS.get_header_read_timeout();
    for (i, stream) in slow.iter_mut().enumerate() {
        let closed = closed_within(stream, timeout + Duration::from_secs(2)).await;
        assert!(
            closed.is_some(),
            "slow connection {i} still open {:?} after it was opened",
            opened.elapsed()
        );
    }
    let all_closed = opened.elapsed();
    assert!(
        all_closed >= timeout && all_closed < timeout + Duration::from_secs(2),
        "the slow connections were closed {all_closed:?} after they were opened; the \
         header-read timeout is {timeout:?}"
    );
    // And the server still serves.
    assert_eq!(normal_client(addr).await.0, "HTTP/1.1 302 Found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_kept_alive_connection_is_closed_after_the_header_read_timeout() {
    let addr = start(LIMITS).await;
    let mut stream = connect(
        addr,
        b"GET / HTTP/1.1\r\nHost: shop.example\r\n\r\n", // kept alive
    )
    .await;
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 302 Found"),
        "{:?}",
        &buf[..n]
    );
    // Answered; the connection stays open for a next request, for the timeout and no longer.
    let idle = Instant::now();
    let rest = closed_within(
        &mut stream,
        LIMITS.get_header_read_timeout() + Duration::from_secs(2),
    )
    .await
    .expect("the idle connection is closed");
    assert!(
        idle.elapsed() >= LIMITS.get_header_read_timeout() - Duration::from_millis(100),
        "closed after {:?}",
        idle.elapsed()
    );
    // Closed without answering anything more.
    assert!(
        rest.is_empty() || String::from_utf8_lossy(&rest).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_app_is_too_slow_for_gets_503_at_the_request_timeout() {
    let addr = start(LIMITS).await;
    let start = Instant::now();
    let mut stream = connect(
        addr,
        b"GET /slow HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    let answer = closed_within(&mut stream, Duration::from_secs(5))
        .await
        .expect("an answer before the app's 10 s");
    let took = start.elapsed();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("retry-after: 5"),
        "{text}"
    );
    assert!(
        took >= LIMITS.get_request_timeout()
            && took < LIMITS.get_request_timeout() + Duration::from_secs(1),
        "answered after {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_cap_a_client_waits_for_a_connection_to_close() {
    let limits = LIMITS.max_connections(3);
    let addr = start(limits).await;
    let opened = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..3 {
        slow.push(connect(addr, HALF_A_HEADER).await);
    }
    // The kernel takes the fourth connection; the server accepts it only when a slot frees,
    // once the slow ones are hung up on.
    let (status, _) = normal_client(addr).await;
    let served = opened.elapsed();
    assert_eq!(status, "HTTP/1.1 302 Found");
    let timeout = limits.get_header_read_timeout();
    assert!(
        served >= timeout - Duration::from_millis(100) && served < timeout + Duration::from_secs(2),
        "served {served:?} after the cap was reached; the slow connections close after {timeout:?}"
    );
    for stream in &mut slow {
        assert!(closed_within(stream, Duration::from_secs(1))
            .await
            .is_some());
    }
}

// The demo's own serving code, as tests/layer/client_ip.rs includes it: what it runs is what
// is tested.
#[cfg(all(feature = "axum", feature = "admin"))]
use crate::client_ip::demo;

#[cfg(all(feature = "axum", feature = "admin"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_hangs_up_on_half_a_request_header_within_its_stated_timeout() {
    let opts = demo::parse_args(["--insecure-cookies".to_owned()])
        .unwrap()
        .unwrap();
    let layer = demo::build_layer(&opts).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(demo::serve(listener, layer, std::future::pending()));
    let timeout = demo::limits().get_header_read_timeout();
    assert_eq!(timeout, Duration::from_secs(10), "as the demo's docs say");

    let opened = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..20 {
        slow.push(connect(addr, HALF_A_HEADER).await);
    }
    assert_eq!(normal_client(addr).await.0, "HTTP/1.1 302 Found");
    for stream in &mut slow {
        assert!(
            closed_within(stream, timeout + Duration::from_secs(3))
                .await
                .is_some(),
            "still open {:?} after it was opened",
            opened.elapsed()
        );
    }
    assert!(opened.elapsed() >= timeout, "{:?}", opened.elapsed());
}

/// An app that counts the requests it sees and answers with what each one's body held.
async fn start_counting() -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    let router = Router::new().fallback(move |uri: axum::http::Uri, body: String| {
        let log = std::sync::Arc::clone(&log);
        async move {
            log.lock().unwrap().push(format!("{uri} {body}"));
            body
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, router, LIMITS, std::future::pending()));
    (addr, seen)
}

/// A request with both lengths, its chunked body, and a request smuggled after the body (what
/// a reader that believed `Content-Length` would take as the next request).
fn both_lengths(framing: &str) -> String {
    format!(
        "POST /both HTTP/1.1\r\nHost: shop.example\r\n{framing}\r\n\
         3\r\nabc\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"
    )
}

#[tokio::test]
async fn a_request_with_both_content_length_and_transfer_encoding_is_refused_with_400() {
    let (addr, seen) = start_counting().await;
    for framing in [
        "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
    ] {
        // After a normal request on the same connection: the second request is the refused one.
        let mut bytes = b"GET /first HTTP/1.1\r\nHost: shop.example\r\n\r\n".to_vec();
        bytes.extend_from_slice(both_lengths(framing).as_bytes());
        let mut stream = connect(addr, &bytes).await;
        let answer = closed_within(&mut stream, Duration::from_secs(10))
            .await
            .expect("the connection is closed after the refusal");
        let text = String::from_utf8_lossy(&answer);
        let statuses: Vec<&str> = text.lines().filter(|l| l.starts_with("HTTP/1.1")).collect();
        assert_eq!(
            statuses,
            ["HTTP/1.1 200 OK", "HTTP/1.1 400 Bad Request"],
            "{text}"
        );
        assert!(
            text.contains("both Content-Length and Transfer-Encoding"),
            "{text}"
        );
    }
    assert_eq!(
        *seen.lock().unwrap(),
        ["/first ", "/first "],
        "only the first requests"
    );
    // The control: the same chunked body without the Content-Length is read, and the request
    // after it answered on the same connection (closed later, by the header-read timeout).
    let mut stream = connect(
        addr,
        both_lengths("Transfer-Encoding: chunked\r\n").as_bytes(),
    )
    .await;
    let answer = closed_within(&mut stream, Duration::from_secs(10))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert_eq!(
        *seen.lock().unwrap(),
        ["/first ", "/first ", "/both abc", "/smuggled "]
    );
}
