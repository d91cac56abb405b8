//! One accepted connection: its socket, which holds its place under the connection cap, and the
//! task that serves its requests.

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Sleep;
use tower_service::Service;

use super::framing::Framing;
use super::per_ip::Held;
use super::shutdown::Closing;

/// hyper's limit on a request's headers when none is set (its `DEFAULT_MAX_HEADERS`), which
/// [`Limits`](super::Limits)' default matches; `tests/layer/serve.rs` holds hyper to it.
const HYPER_MAX_HEADERS: usize = 100;
use super::Limits;
use crate::PeerAddr;

/// A connection's socket with its permit under the connection cap, the watch over its
/// requests' framing, and the send timeout. The permit goes with the socket, not with the task
/// serving it: an upgraded connection (a WebSocket, say) leaves hyper with its socket, and
/// still counts until the service drops it.
struct Counted {
    stream: TcpStream,
    framing: Framing,
    /// Its place under the connection cap, and under its address's.
    _places: (OwnedSemaphorePermit, Option<Held>),
    send_timeout: Duration,
    /// The send timeout's timer: armed at a write that cannot go on (the client's socket
    /// full), disarmed at the next that does. Allocated at the first such write (a client that
    /// keeps up never has one), then reset in place.
    stall: Option<Pin<Box<Sleep>>>,
    armed: bool,
}

impl Counted {
    /// `polled`, a write's outcome, unless writes have waited for the client for longer than
    /// the send timeout: then an error, and hyper closes the connection.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.armed = false;
            return polled;
        }
        let deadline = tokio::time::Instant::now() + self.send_timeout;
        let stall = match &mut self.stall {
            Some(stall) if self.armed => stall,
            Some(stall) => {
                stall.as_mut().reset(deadline);
                stall
            }
            None => self
                .stall
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        self.armed = true;
        if stall.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took nothing of the answer within the send timeout",
            )));
        }
        Poll::Pending
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        if read.is_ready() {
            this.framing.read(&buf.filled()[before..]);
        }
        this.framing.note_read(read.is_pending());
        read
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.watch(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_flush(cx);
        this.watch(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_shutdown(cx);
        this.watch(cx, polled)
    }
}

/// Serves the requests of one connection until the client closes it, a limit does, or closing
/// ends it: when closing starts, hyper finishes the request in flight (if any) and closes; when
/// the grace is over, the connection is dropped, whatever it was doing.
pub(super) async fn run<S, B>(
    stream: TcpStream,
    places: (OwnedSemaphorePermit, Option<Held>),
    peer: SocketAddr,
    service: S,
    limits: Limits,
    mut closing: Closing,
) where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (framing, verdict) = Framing::new(limits.get_max_header_bytes(), limits.get_max_headers());
    let io = Counted {
        stream,
        framing,
        _places: places,
        send_timeout: limits.get_send_timeout(),
        stall: None,
        armed: false,
    };
    // hyper calls the service for a connection's requests in order, one at a time.
    let requests = AtomicU32::new(0);
    let per_request = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let ambiguous = verdict.refuses(requests.fetch_add(1, Ordering::Relaxed));
        // Where the room finds the client IP (its limit on new visitors per IP needs it).
        req.extensions_mut().insert(PeerAddr(peer));
        let mut service = service.clone();
        let verdict = Arc::clone(&verdict);
        async move {
            if ambiguous {
                return Ok(refused());
            }
            // Readiness inside the timeout too: a service at its concurrency limit is as slow
            // to the client as one that takes long to answer.
            let answer = async {
                poll_fn(|cx| service.poll_ready(cx)).await?;
                service.call(req).await
            };
            Ok::<_, Infallible>(
                match tokio::time::timeout(limits.get_request_timeout(), answer).await {
                    Ok(Ok(res)) => res.map(Either::Left),
                    Ok(Err(never)) => match never {},
                    // The client's fault, not the service's: it has not sent the body yet.
                    Err(_) if verdict.waiting_on_body() => body_too_slow(),
                    Err(_) => too_slow(),
                },
            )
        }
    });
    let mut builder = http1::Builder::new();
    builder
        // The header-read timeout needs a timer; without one hyper would panic.
        .timer(TokioTimer::new())
        .header_read_timeout(limits.get_header_read_timeout())
        // The limit on the head is exact with `max_header_size`; `max_buf_size` also bounds
        // what hyper buffers of a connection's input (and refuses less than 8192, which the
        // setter ensures).
        .max_buf_size(limits.get_max_header_bytes())
        .max_header_size(limits.get_max_header_bytes());
    // hyper's own limit is the same 100 headers, parsed into arrays on the stack; a limit set
    // explicitly, even to 100, makes it build two arrays of that many slots element by element
    // for every head it parses (twice a request: about 1 700 instructions, a twentieth of an
    // admitted request's). So only a limit other than hyper's is passed on.
    if limits.get_max_headers() != HYPER_MAX_HEADERS {
        builder.max_headers(limits.get_max_headers());
    }
    let mut conn = pin!(builder
        .serve_connection(TokioIo::new(io), per_request)
        .with_upgrades());
    tokio::select! {
        _ = conn.as_mut() => return,
        () = closing.started() => {}
    }
    // The request in flight (if any) is finished, its response sent with `Connection: close`;
    // a kept-alive connection waiting for its next request is closed at once.
    conn.as_mut().graceful_shutdown();
    tokio::select! {
        _ = conn.as_mut() => {}
        () = closing.over() => {}
    }
}

/// The answer to a request whose head carries both `Content-Length` and `Transfer-Encoding`
/// (see [`framing`](super::framing)); hyper closes the connection after it.
fn refused<B>() -> Response<Either<B, Full<Bytes>>> {
    plain(
        StatusCode::BAD_REQUEST,
        "a request may not carry both Content-Length and Transfer-Encoding\n",
        (header::CONNECTION, "close"),
    )
}

/// The answer to a request whose body its client had not sent when the request's time ran
/// out; hyper closes the connection after it (the body was not read to its end).
fn body_too_slow<B>() -> Response<Either<B, Full<Bytes>>> {
    plain(
        StatusCode::REQUEST_TIMEOUT,
        "the request's body did not arrive in time\n",
        (header::CONNECTION, "close"),
    )
}

/// The answer to a request the service did not answer in time.
fn too_slow<B>() -> Response<Either<B, Full<Bytes>>> {
    plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "the server took too long to answer; try again in a moment\n",
        (header::RETRY_AFTER, "5"),
    )
}

/// A short plain-text answer of the serving loop's own, with one header of its own.
fn plain<B>(
    status: StatusCode,
    text: &'static str,
    (name, value): (header::HeaderName, &'static str),
) -> Response<Either<B, Full<Bytes>>> {
    let mut res = Response::new(Either::Right(Full::from(text)));
    *res.status_mut() = status;
    let headers = res.headers_mut();
    headers.insert(name, HeaderValue::from_static(value));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}
