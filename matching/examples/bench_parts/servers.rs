//! The HTTP servers under test, on loopback: the bench's tiny axum app alone, behind the layer
//! on the embedded store, and behind a layer whose visitors wait in line on Redis.

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::{Extension, Router};
use http::StatusCode;
use tower_waiting_room::store::{MemoryStore, RedisStore};
use tower_waiting_room::{Admission, AdmittedBy, Keyring, WaitingRoomLayer};

use super::{BoxError, POLL_ROOM, ROOM};

pub(crate) struct Servers {
    pub(crate) plain: SocketAddr,
    pub(crate) layered: SocketAddr,
    pub(crate) poll: SocketAddr,
    pub(crate) fast_layer: WaitingRoomLayer,
    pub(crate) poll_layer: WaitingRoomLayer,
    pub(crate) poll_store: RedisStore,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The tiny handler of every server. Behind the layer it answers 200 only to visitors let in
/// by their admission token (the fast path) and 202 to anyone admitted another way, so a run
/// that fell off the fast path counts as errors instead of passing unnoticed.
async fn hello(admission: Option<Extension<Admission>>) -> (StatusCode, &'static str) {
    match admission {
        Some(Extension(a)) if a.admitted_by() != AdmittedBy::Token => (StatusCode::ACCEPTED, "ok"),
        _ => (StatusCode::OK, "ok"),
    }
}

pub(crate) fn app() -> Router {
    Router::new().route("/", get(hello))
}

pub(crate) async fn serve(
    router: Router,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok((addr, task))
}

pub(crate) async fn start_servers(keyring: &Keyring, redis_url: &str) -> Result<Servers, BoxError> {
    let long = Duration::from_secs(3_600);
    // Fast path and cookie check: the embedded store, never called by either.
    let fast_layer = WaitingRoomLayer::builder(ROOM)
        .capacity(1_000_000)
        .keyring(keyring.clone())
        .store(MemoryStore::new())
        .build()?;
    // Queue poll: capacity 1 on Redis, so everyone but one waits; long TTLs so nobody is swept
    // or promoted during the run.
    let poll_store = RedisStore::builder()
        .url(redis_url)
        .timeout(Duration::from_secs(2))
        .build()?;
    // The per-session poll limit (30 per 10 s) is off: these 32 visitors poll back to back,
    // which the limit would answer without asking the store; real visitors poll every 2-30 s.
    let poll_layer = WaitingRoomLayer::builder(POLL_ROOM)
        .poll_limit(None)
        .capacity(1)
        .active_ttl(long)
        .queue_ttl(long)
        .keyring(keyring.clone())
        .store(poll_store.clone())
        .build()?;
    let (plain, t1) = serve(app()).await?;
    let (layered, t2) = serve(app().layer(fast_layer.clone())).await?;
    // The room's endpoints reach the layer through the router's fallback.
    let (poll, t3) = serve(
        app()
            .fallback(|| async { StatusCode::NOT_FOUND })
            .layer(poll_layer.clone()),
    )
    .await?;
    Ok(Servers {
        plain,
        layered,
        poll,
        fast_layer,
        poll_layer,
        poll_store,
        tasks: vec![t1, t2, t3],
    })
}
