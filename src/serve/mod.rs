//! Serving that survives a sale (feature `serve`, on by default): [`serve`] a Tower service
//! (an axum `Router` with the room as its last layer, or any service of `Request<Incoming>`)
//! over HTTP/1.1 within [`Limits`], until a shutdown future such as [`shutdown_signal`]
//! completes.
//!
//! ```no_run
//! use axum::{routing::get, Router};
//! use tower_waiting_room::serve::{serve, shutdown_signal, Limits};
//! use tower_waiting_room::WaitingRoomLayer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let room = WaitingRoomLayer::builder("launch")
//!     .capacity(500)
//!     .secret(std::env::var("WAITING_ROOM_SECRET")?)
//!     .build()?;
//! let app = Router::new().route("/", get(|| async { "you are in" })).layer(room);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! serve(listener, app, Limits::default(), shutdown_signal()).await;
//! # Ok(())
//! # }
//! ```
//!
//! Why not plain `axum::serve(listener, app)`: it waits for ever on a client that sends half a
//! request header, and accepts connections until the process runs out of file descriptors; a
//! few hundred such connections, cheap for a bot, and a sale is over. [`serve`] is hyper's
//! HTTP/1 connection builder (what axum serves with too), one task per connection, within
//! limits on what a slow, idle or oversized client may hold:
//!
//! - **a header-read timeout** (hyper's `header_read_timeout`, with a timer): a connection that
//!   has not sent a whole request header within it is closed; so is a kept-alive connection
//!   that sends no next request within it (the timer runs whenever hyper waits for a request's
//!   head);
//! - **a request timeout**: a request the service has not answered within it gets `503` with
//!   `Retry-After: 5` (the time to the response's head: a streamed body, such as the room's
//!   event stream, is not cut);
//! - **a send timeout**: a connection whose client takes nothing of what it is sent (its
//!   socket's buffers full) for this long is closed, counted between two writes as nginx's
//!   `send_timeout` is: a client that stops reading a large answer or an event stream does not
//!   hold its connection for ever;
//! - **a connection cap**: at most this many connections open at once; more wait in the
//!   kernel's accept queue until one closes, so the process never runs out of file descriptors
//!   mid-request; and, when set, a cap per client address (a connection past it closed as it
//!   is accepted);
//! - **a cap on a request's head**, its bytes and its number of headers: a head over either is
//!   answered `431` by hyper and the connection closed;
//! - **no ambiguous framing**: a request with both `Content-Length` and `Transfer-Encoding`
//!   (the classic request-smuggling vector) is answered `400` and the connection closed; the
//!   service never sees it (hyper alone would pass it on as chunked, its `Content-Length`
//!   dropped).
//!
//! Each request carries its connection's address as a [`PeerAddr`](crate::PeerAddr) in its
//! extensions, where the room finds the client IP for its limit on new visitors per IP (and
//! where a handler finds it: `Extension<PeerAddr>` in axum).
//!
//! # Upgrades
//!
//! Connections are served with upgrades on (hyper's `with_upgrades`): a service that answers
//! `101 Switching Protocols` can take the connection over with `hyper::upgrade::on(&mut req)`
//! (a WebSocket passed through to an app, say). The upgraded connection is no longer HTTP: the
//! header-read and request timeouts no longer apply to it, and its bytes are the service's to
//! bound; only the send timeout still closes it when its client stops taking what it is sent.
//! It still counts under the connection cap until the service drops it.
//!
//! # Shutdown
//!
//! When the `shutdown` future completes, [`serve`] stops accepting (the listener is closed, so
//! new connections are refused rather than left waiting in a queue nobody reads), tells every
//! open connection to finish gracefully (hyper's `graceful_shutdown`: the request in flight is
//! answered, with `Connection: close`, then the connection closes; an idle one closes at once),
//! waits up to [`Limits::grace`] for them, and returns; connections still open then are closed.
//! Upgraded connections are the service's: [`serve`] waits for them within the grace like any
//! other, but cannot tell them to close (the service can watch the same shutdown signal).
//!
//! HTTP/2 is not served here: hyper-util's `server::conn::auto::Builder` takes the same timer
//! and timeouts (`.http1().timer(..).header_read_timeout(..)`) for a loop of your own.

mod connection;
mod framing;
mod limits;
mod per_ip;
mod shutdown;

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower_service::Service;

pub use self::limits::Limits;
pub use self::shutdown::shutdown_signal;

/// Serves `service` on `listener` (HTTP/1.1, upgrades on) within `limits` until `shutdown`
/// completes; then stops accepting, lets open connections finish for up to
/// [`Limits::grace`], and returns. See the [module docs](self).
///
/// Each request carries a [`PeerAddr`](crate::PeerAddr) with its connection's address; a
/// request the service does not answer within [`Limits::request_timeout`] gets `503` with
/// `Retry-After: 5`, or `408` (the connection closed) when the server was waiting for the
/// client to send the rest of the request's body. Dropping the returned future closes every connection it served at once.
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
    // Tokio's semaphore holds at most `MAX_PERMITS`, and the wait at the end takes them all at
    // once, as a `u32`.
    let cap = limits
        .get_max_connections()
        .clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
    let connections = Arc::new(Semaphore::new(cap));
    let (closer, closing) = shutdown::channel();
    let mut shutdown = pin!(shutdown);
    loop {
        // A permit before `accept`: past the cap, connections wait in the kernel's queue.
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
        let Ok(per_ip) = per_ip::hold(peer.ip(), limits.get_max_connections_per_ip()) else {
            tracing::debug!(peer = %peer.ip(), "connection refused: too many from one address");
            continue;
        };
        tokio::spawn(connection::run(
            stream,
            (permit, per_ip),
            peer,
            service.clone(),
            limits,
            closing.clone(),
        ));
    }
    // Closed, not left open: a client connecting now is refused at once instead of waiting in
    // the accept queue for an answer that never comes (a load balancer tries another server).
    drop(listener);
    let grace = limits.get_grace();
    let open = cap - connections.available_permits();
    tracing::info!(
        open,
        grace_secs = grace.as_secs_f64(),
        "shutting down: no new connections; open ones are finishing"
    );
    closer.start();
    let all = u32::try_from(cap).expect("the cap fits a u32");
    if tokio::time::timeout(grace, connections.acquire_many(all))
        .await
        .is_err()
    {
        let open = cap - connections.available_permits();
        tracing::warn!(open, "connections still open after the grace; closing them");
    }
    // Dropping `closer` ends the grace for the connections still open.
}
