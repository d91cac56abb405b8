//! The waiting room in front of a plain hyper 1.x server, without axum.
//!
//! ```text
//! cargo run --example hyper_server                # http://127.0.0.1:3001
//! cargo run --example hyper_server -- --port 8080
//! ```
//!
//! The layer wraps a `tower::service_fn` handler: a Tower service, which
//! [`tower_waiting_room::serve`] serves with hyper's HTTP/1 connection builder, one task per
//! connection, within limits a slow client cannot outlast (a header-read timeout, a request
//! timeout, a connection cap, a cap on request heads). Capacity
//! is 1 so a second client (another browser profile, or curl with a second cookie jar) waits in
//! line.
//!
//! Each connection's requests carry its peer address as a [`PeerAddr`](tower_waiting_room::PeerAddr), which is where the room
//! finds the client IP for its per-IP limit on new visitors (hyper puts no address anywhere by
//! itself): `tower_waiting_room::serve` inserts it into each request.
//!
//! Cookies are sent without `Secure` because this example speaks plain http on 127.0.0.1;
//! keep the default (`Secure`) in production.

use std::convert::Infallible;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use tower::ServiceBuilder;
use tower_waiting_room::serve::Limits;
use tower_waiting_room::{Admission, ConfigError, SigningKey, WaitingRoomLayer};

const USAGE: &str = "\
tower-waiting-room hyper example: a plain hyper server behind the waiting room (capacity 1).

USAGE:
    cargo run --example hyper_server -- [--port <N>]

FLAGS:
    --port <N>    port to listen on, on 127.0.0.1 (default 3001; 0 picks a free one)
    -h, --help    print this help
";

/// The handler behind the room: every request that reaches it carries an [`Admission`].
async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match req.extensions().get::<Admission>() {
        Some(a) => format!(
            "You are in room {} as session {} (admitted by {:?}).\n",
            a.room(),
            a.session(),
            a.admitted_by()
        ),
        None => "Not behind the waiting room.\n".to_owned(),
    };
    let mut res = Response::new(Full::new(Bytes::from(body)));
    *res.status_mut() = StatusCode::OK;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Ok(res)
}

fn parse_port(args: impl IntoIterator<Item = String>) -> Result<Option<u16>, String> {
    let mut port = 3001;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--port" => args.next().ok_or("--port needs a value")?,
            a if a.starts_with("--port=") => a["--port=".len()..].to_owned(),
            other => return Err(format!("unknown argument {other:?}")),
        };
        port = value
            .parse()
            .map_err(|_| format!("--port needs a port number, got {value:?}"))?;
    }
    Ok(Some(port))
}

#[tokio::main]
async fn main() -> ExitCode {
    let port = match parse_port(std::env::args().skip(1)) {
        Ok(Some(port)) => port,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\nRun with --help for the flags.");
            return ExitCode::from(2);
        }
    };

    let room = match room() {
        Ok(room) => room,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };

    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("open http://{}/", listener.local_addr().unwrap_or(addr));

    // Until Ctrl-C or SIGTERM; then open connections get the grace to finish.
    serve(listener, room, tower_waiting_room::serve::shutdown_signal()).await;
    println!("stopped");
    ExitCode::SUCCESS
}

/// The room: capacity 1, a random key for this process (several servers sharing one queue must
/// share a secret), cookies without `Secure` for plain http.
pub(crate) fn room() -> Result<WaitingRoomLayer, ConfigError> {
    let key = SigningKey::generate("k1")?;
    WaitingRoomLayer::builder("hyper")
        .capacity(1)
        .signing_key(key)
        .secure_cookies(false)
        .build()
}

/// Serves [`handle`] behind `room` on `listener` until `shutdown` completes, with the serving
/// the examples share ([`tower_waiting_room::serve`]: hyper's HTTP/1 connection builder, one
/// task per connection, within limits a slow client cannot outlast, and a
/// [`PeerAddr`](tower_waiting_room::PeerAddr) in each request).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    room: WaitingRoomLayer,
    shutdown: impl Future<Output = ()>,
) {
    let service = ServiceBuilder::new().layer(room).service_fn(handle);
    tower_waiting_room::serve::serve(listener, service, Limits::default(), shutdown).await;
}
