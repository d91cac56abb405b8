//! `serve::serve` over real loopback TCP, without a room: its graceful shutdown and the grace
//! that bounds it, the caps on a request's head (`431`), upgrades (a connection taken over with
//! `hyper::upgrade::on`, under the connection cap until it is dropped) and the `PeerAddr` in each
//! request. Its timeouts and connection cap with the room in front: `serving.rs`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tower_waiting_room::serve::{serve, Limits};
use tower_waiting_room::PeerAddr;

use crate::serving::{closed_within, connect, HALF_A_HEADER};

/// Short limits, so that the tests wait seconds, not minutes.
const LIMITS: Limits = Limits::new()
    .header_read_timeout(Duration::from_secs(1))
    .request_timeout(Duration::from_secs(5))
    .grace(Duration::from_secs(5));

/// An answer larger than a loopback socket's buffers hold, both ends together.
const BIG: usize = 64 << 20;

/// `/slow` answers after 600 ms, `/slower` after 3 s, `/body` once it has its whole body, `/big` with [`BIG`] bytes, `/peer` with the request's `PeerAddr`, a request with
/// `Upgrade: test` is switched to an echo of its bytes, anything else answers `ok`.
async fn app(mut req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let text = match req.uri().path() {
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(600)).await;
            "done".to_owned()
        }
        "/slower" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            "done".to_owned()
        }
        "/big" => return Ok(Response::new(Full::from(vec![b'x'; BIG]))),
        "/body" => {
            use http_body_util::BodyExt;
            match req.into_body().collect().await {
                Ok(body) => format!("got {}", body.to_bytes().len()),
                Err(_) => "cut".to_owned(),
            }
        }
        "/peer" => match req.extensions().get::<PeerAddr>() {
            Some(PeerAddr(peer)) => peer.to_string(),
            None => "no peer".to_owned(),
        },
        _ if req.headers().get("upgrade").is_some_and(|v| v == "test") => {
            let upgrade = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                let mut io = TokioIo::new(upgrade.await.expect("upgraded"));
                let mut buf = [0u8; 1024];
                while let Ok(n @ 1..) = io.read(&mut buf).await {
                    if io.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            return Ok(Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .header("connection", "upgrade")
                .header("upgrade", "test")
                .body(Full::default())
                .unwrap());
        }
        _ => "ok".to_owned(),
    };
    Ok(Response::new(Full::from(text)))
}

/// Serves [`app`] within `limits` on a free loopback port until the returned sender is used
/// (or dropped); the handle ends when `serve` returns.
async fn start(limits: Limits) -> (SocketAddr, oneshot::Sender<()>, JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let service = tower::service_fn(app);
    let served = tokio::spawn(serve(listener, service, limits, async {
        let _ = stopped.await;
    }));
    (addr, stop, served)
}

/// A request with `headers` extra header lines, on a connection the client closes after the
/// answer: the status line of the answer.
async fn status_with(addr: SocketAddr, headers: &str) -> String {
    let request = format!("GET / HTTP/1.1\r\nHost: t\r\n{headers}Connection: close\r\n\r\n");
    let mut stream = connect(addr, request.as_bytes()).await;
    let answer = closed_within(&mut stream, Duration::from_secs(5))
        .await
        .expect("answered and closed");
    let text = String::from_utf8_lossy(&answer).into_owned();
    text.lines().next().unwrap_or("").to_owned()
}

/// Reads a response head (up to its blank line) off `stream`.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte))
            .await
            .expect("a response head within 5 s")
            .unwrap();
        assert_eq!(n, 1, "closed before the end of the head: {head:?}");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_the_request_in_flight_finish_then_serve_returns() {
    let (addr, stop, served) = start(LIMITS).await;
    // Kept alive: only the shutdown closes it.
    let mut stream = connect(addr, b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stopped = Instant::now();
    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !served.is_finished(),
        "serve returned with a request in flight"
    );
    // It no longer accepts: the listener is closed, a new client refused at once.
    assert!(TcpStream::connect(addr).await.is_err());
    let answer = closed_within(&mut stream, Duration::from_secs(3))
        .await
        .expect("answered, then closed");
    let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 200 ok"), "{text}");
    assert!(text.contains("connection: close"), "{text}");
    assert!(text.ends_with("done"), "{text}");
    // Then serve returns, without waiting out the grace.
    tokio::time::timeout(Duration::from_secs(2), served)
        .await
        .expect("serve returned once its connections were done")
        .unwrap();
    assert!(
        stopped.elapsed() < LIMITS.get_grace(),
        "{:?}",
        stopped.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_shutdown_an_idle_connection_closes_and_a_request_past_the_grace_is_cut() {
    let limits = LIMITS.grace(Duration::from_millis(300));
    let (addr, stop, served) = start(limits).await;
    let mut idle = connect(addr, b"").await;
    let mut slow = connect(addr, b"GET /slower HTTP/1.1\r\nHost: t\r\n\r\n").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopped = Instant::now();
    stop.send(()).unwrap();
    // The idle connection at once, well within the grace.
    assert_eq!(
        closed_within(&mut idle, Duration::from_millis(200)).await,
        Some(Vec::new())
    );
    tokio::time::timeout(Duration::from_secs(2), served)
        .await
        .expect("serve returned at the end of the grace")
        .unwrap();
    let took = stopped.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_millis(1500),
        "serve returned {took:?} after the shutdown; the grace is 300 ms, the request 3 s"
    );
    let cut = closed_within(&mut slow, Duration::from_millis(200)).await;
    assert_eq!(cut.as_deref(), Some(&b""[..]), "closed without an answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_over_max_header_bytes_gets_431() {
    let (addr, _stop, _) = start(LIMITS.max_header_bytes(8192)).await;
    let big = format!("X-Big: {}\r\n", "a".repeat(10_000));
    assert_eq!(
        status_with(addr, &big).await,
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
    let under = format!("X-Big: {}\r\n", "a".repeat(7_000));
    assert_eq!(status_with(addr, &under).await, "HTTP/1.1 200 OK");
    // The same head within a higher limit (hyper's own default would take it too).
    let (addr, _stop, _) = start(LIMITS.max_header_bytes(16_384)).await;
    assert_eq!(status_with(addr, &big).await, "HTTP/1.1 200 OK");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_headers_than_max_headers_gets_431() {
    let (addr, _stop, _) = start(LIMITS.max_headers(10)).await;
    let headers = |n: usize| (0..n).map(|i| format!("X-H{i}: v\r\n")).collect::<String>();
    assert_eq!(
        status_with(addr, &headers(12)).await,
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
    assert_eq!(status_with(addr, &headers(5)).await, "HTTP/1.1 200 OK");
    // The default, 100, is hyper's own (not passed to it): held exactly, 100 taken and 101
    // refused (`Host` and `Connection` are two of them).
    let (addr, _stop, _) = start(LIMITS).await;
    assert_eq!(LIMITS.get_max_headers(), 100);
    assert_eq!(status_with(addr, &headers(98)).await, "HTTP/1.1 200 OK");
    assert_eq!(
        status_with(addr, &headers(99)).await,
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
}

/// Opens a connection and upgrades it to the echo: the stream, past the `101`'s head.
async fn upgraded(addr: SocketAddr) -> TcpStream {
    let mut stream = connect(
        addr,
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: test\r\n\r\n",
    )
    .await;
    let head = read_head(&mut stream).await.to_ascii_lowercase();
    assert!(
        head.starts_with("http/1.1 101 switching protocols"),
        "{head}"
    );
    assert!(head.contains("upgrade: test"), "{head}");
    stream
}

/// Sends `bytes` and reads as many back.
async fn echo(stream: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
    stream.write_all(bytes).await.unwrap();
    let mut back = vec![0u8; bytes.len()];
    tokio::time::timeout(Duration::from_secs(2), stream.read_exact(&mut back))
        .await
        .expect("echoed within 2 s")
        .unwrap();
    back
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_connection_is_the_services_and_outlives_the_header_read_timeout() {
    let (addr, _stop, _) = start(LIMITS.header_read_timeout(Duration::from_millis(300))).await;
    let mut stream = upgraded(addr).await;
    assert_eq!(echo(&mut stream, b"ping").await, b"ping");
    // No longer HTTP: the header-read timeout does not close it.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        echo(&mut stream, b"not http\r\n\r\n").await,
        b"not http\r\n\r\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_connection_counts_under_the_cap_until_it_is_dropped() {
    let (addr, _stop, _) = start(LIMITS.max_connections(1)).await;
    let mut stream = upgraded(addr).await;
    assert_eq!(echo(&mut stream, b"ping").await, b"ping");
    // The kernel takes a second connection; the server does not serve it meanwhile.
    let mut second = connect(
        addr,
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(
        closed_within(&mut second, Duration::from_millis(500)).await,
        None
    );
    // Closed by the client, the echo ends and drops the connection: the second is served.
    drop(stream);
    let answer = closed_within(&mut second, Duration::from_secs(2))
        .await
        .expect("served once the upgraded connection was dropped");
    assert!(answer.starts_with(b"HTTP/1.1 200 OK"), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_carries_its_connections_address() {
    let (addr, _stop, _) = start(LIMITS).await;
    let mut stream = connect(
        addr,
        b"GET /peer HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    let local = stream.local_addr().unwrap();
    let answer = closed_within(&mut stream, Duration::from_secs(5))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.ends_with(&local.to_string()), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_a_header_is_closed_at_the_header_read_timeout_without_a_room() {
    let limits = LIMITS.header_read_timeout(Duration::from_millis(400));
    let (addr, _stop, _) = start(limits).await;
    let opened = Instant::now();
    let mut slow = connect(addr, HALF_A_HEADER).await;
    assert!(closed_within(&mut slow, Duration::from_secs(2))
        .await
        .is_some());
    let took = opened.elapsed();
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_millis(1200),
        "closed after {took:?}"
    );
}

/// A request's time running out is the client's fault when it has not sent its body yet:
/// `408`, the connection closed. The service's when it has the body and answers late (or has
/// not read it): `503`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_still_to_come_at_the_request_timeout_is_a_408() {
    let limits = LIMITS.request_timeout(Duration::from_millis(800));
    let (addr, _stop, _) = start(limits).await;
    let mut trickle = connect(
        addr,
        b"POST /body HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\nabc",
    )
    .await;
    let answer = closed_within(&mut trickle, Duration::from_secs(5))
        .await
        .expect("answered and closed");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("did not arrive in time"), "{text}");

    // The body whole, the service slow: the service's.
    assert!(status_with(addr, "").await.contains("200"));
    let mut slow = connect(
        addr,
        b"POST /slower HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
    )
    .await;
    let answer = closed_within(&mut slow, Duration::from_secs(5))
        .await
        .expect("answered and closed");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    // A body the service never reads, past what hyper takes in at once: the service's too.
    let mut unread =
        b"POST /slower HTTP/1.1\r\nHost: t\r\nContent-Length: 4000000\r\n\r\n".to_vec();
    unread.extend(std::iter::repeat_n(b'x', 4_000_000));
    let (mut from, mut to) = TcpStream::connect(addr).await.unwrap().into_split();
    let writer = tokio::spawn(async move {
        let _ = to.write_all(&unread).await;
    });
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), from.read(&mut byte))
            .await
            .expect("a response head within 5 s")
            .unwrap();
        assert_eq!(n, 1, "closed before the end of the head: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    writer.abort();
}

/// A client that stops reading a large answer does not hold its connection for ever: once
/// nothing of the answer has been taken for the send timeout, the connection is closed. One that
/// reads on gets all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_closed_at_the_send_timeout() {
    let (addr, _stop, _) = start(LIMITS.send_timeout(Duration::from_millis(500))).await;
    let request = b"GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

    let mut reader = connect(addr, request).await;
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), reader.read_to_end(&mut all))
        .await
        .expect("read within 20 s")
        .unwrap();
    assert!(
        all.len() > BIG,
        "a reading client gets it all: {} bytes",
        all.len()
    );

    let mut stalled = connect(addr, request).await;
    // Reads nothing for twice the send timeout and more, then reads what is left to it.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match stalled.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the connection was not closed");
    assert!(
        got.len() < BIG,
        "closed before the end of the answer: got {} of {BIG} bytes",
        got.len()
    );
}

/// Past `max_connections_per_ip`, a client address's next connection is closed as it is
/// accepted, while other addresses are served; as one of its connections closes it may open
/// another. The client here connects from 127.0.0.2, which no other test uses (the count is
/// the process's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_cap_an_address_gets_no_more_connections() {
    let (addr, _stop, _) = start(LIMITS.max_connections_per_ip(2)).await;
    let from = |ip: &str| {
        let ip: std::net::IpAddr = ip.parse().unwrap();
        async move {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(SocketAddr::new(ip, 0)).unwrap();
            socket.connect(addr).await.unwrap()
        }
    };
    /// Whether `stream` is served: a request on it answered `200`.
    async fn served(stream: &mut TcpStream) -> bool {
        if stream
            .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .is_err()
        {
            return false;
        }
        let mut buf = [0u8; 256];
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(n)) => buf[..n].starts_with(b"HTTP/1.1 200"),
            Ok(Err(_)) => false,
            Err(_) => panic!("neither served nor closed within 5 s"),
        }
    }
    let mut first = from("127.0.0.2").await;
    let mut second = from("127.0.0.2").await;
    assert!(served(&mut first).await && served(&mut second).await);
    let mut third = from("127.0.0.2").await;
    assert!(
        !served(&mut third).await,
        "a third connection from one address"
    );
    let mut elsewhere = from("127.0.0.3").await;
    assert!(served(&mut elsewhere).await, "another address is served");
    drop(first);
    // The server sees the close when it next reads: until then the place is held.
    let mut again = None;
    for _ in 0..50 {
        let mut next = from("127.0.0.2").await;
        if served(&mut next).await {
            again = Some(next);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "no place back after a connection closed");
    assert!(served(&mut second).await, "the others are still served");
}
