//! Serving that a sale survives: what the examples serve with instead of plain `axum::serve`,
//! which waits for ever on a client that sends half a request header and accepts connections
//! until the process runs out of file descriptors.
//!
//! Three limits ([`Limits`]), each on what a slow or idle client can hold:
//!
//! - **a header-read timeout** (hyper's `header_read_timeout`, with a timer): a connection
//!   that has not sent a whole request header within it is closed; so is a kept-alive
//!   connection that sends no next request within it (the timer runs whenever hyper waits for a
//!   request's head);
//! - **a request timeout**: a request the service has not answered within it gets `503` with
//!   `Retry-After` (the time to the response's head: a streamed body, such as the room's event
//!   stream, is not cut);
//! - **a connection cap**: at most this many connections open at once; more wait in the
//!   kernel's accept queue until one closes, so the process never runs out of file descriptors
//!   mid-request.
//!
//! Each request carries its connection's address as a [`PeerAddr`], where the room finds the
//! client IP for its limit on new visitors per IP. The README's minimal example has the same
//! loop in a few lines, for axum.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tower::{Service, ServiceExt};
use tower_waiting_room::PeerAddr;

/// What a slow or idle client may hold; see the [module docs](self).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Time to send a whole request header (and, on a kept-alive connection, the next one).
    pub header_read_timeout: Duration,
    /// Time the service has to answer a request (its response's head).
    pub request_timeout: Duration,
    /// Most connections open at once. Keep it below the process's open-file limit (`ulimit
    /// -n`), with room for the app's own files and its store's connections, and above the
    /// room's `max_event_streams`: a waiter listening for events holds a connection.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 10_000,
        }
    }
}

impl Limits {
    /// The limits in words, for a start-up line.
    pub fn describe(&self) -> String {
        format!(
            "{} s to send a request header, {} s to answer one, at most {} connections",
            self.header_read_timeout.as_secs_f64(),
            self.request_timeout.as_secs_f64(),
            self.max_connections
        )
    }
}

/// How long open connections get to finish once `shutdown` completes.
const GRACE: Duration = Duration::from_secs(5);

/// Serves `service` on `listener` (HTTP/1.1) within `limits` until `shutdown` completes; then
/// stops accepting, lets open connections finish their requests for up to [`GRACE`], and
/// returns.
pub async fn serve<S, B>(
    listener: TcpListener,
    service: S,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let (closing, closing_seen) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&connections).acquire_owned() => {
                permit.expect("the semaphore is never closed")
            }
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, say: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = service.clone();
        let per_request = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(PeerAddr(peer));
            let response = service.clone().oneshot(req);
            async move {
                Ok::<_, Infallible>(
                    match tokio::time::timeout(limits.request_timeout, response).await {
                        Ok(Ok(res)) => res.map(Either::Left),
                        Ok(Err(never)) => match never {},
                        Err(_) => too_slow(),
                    },
                )
            }
        });
        let mut closing_seen = closing_seen.clone();
        tokio::spawn(async move {
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout);
            let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), per_request));
            let closing = async move {
                let _ = closing_seen.wait_for(|closing| *closing).await;
            };
            tokio::select! {
                _ = conn.as_mut() => {}
                () = closing => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(permit);
        });
    }
    let _ = closing.send(true);
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(GRACE, connections.acquire_many(all)).await;
}

/// The answer to a request the service did not answer in time.
fn too_slow<B>() -> Response<Either<B, Full<Bytes>>> {
    let mut res = Response::new(Either::Right(Full::from(
        "the server took too long to answer; try again in a moment\n",
    )));
    *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = res.headers_mut();
    headers.insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}
