//! The gateways: HTTP servers on loopback, each a fail-closed and a fail-open `WaitingRoomLayer`
//! over a `RedisStore` of its own, in front of an app that records every request it lets in.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::{app_seeing, carries_cookie, serve, Http, SECRET};
use axum::extract::Request;
use axum::Router;
use http::HeaderMap;
use tower::ServiceExt;
use tower_waiting_room::store::RedisStore;
use tower_waiting_room::{AdmittedBy, FailPolicy, SessionId, WaitingRoomLayer};

use super::tools::now_ms;
use super::{
    ACTIVE_TTL, ADMISSION_COOKIE, BREAKER_COOLDOWN, GRANT_TTL, QUEUE_TTL, REFRESH, ROOM,
    STORE_TIMEOUT,
};

/// A request that reached the app behind a gateway.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    pub(super) at: u64,
    pub(super) gateway: usize,
    pub(super) session: SessionId,
    pub(super) by: AdmittedBy,
    pub(super) expires_at_ms: u64,
    /// The request carried an admission token.
    pub(super) with_token: bool,
}

pub(super) type Log = Arc<Mutex<Vec<Seen>>>;

pub(super) fn layer(store: RedisStore, capacity: u32, policy: FailPolicy) -> WaitingRoomLayer {
    WaitingRoomLayer::builder(ROOM)
        .capacity(capacity)
        .secret(SECRET)
        .active_ttl(ACTIVE_TTL)
        .refresh(REFRESH)
        .grant_ttl(GRANT_TTL)
        .queue_ttl(QUEUE_TTL)
        .max_queue_len(1_000_000)
        .secure_cookies(false)
        // Every visitor is on 127.0.0.1 and polls briskly: the room's own limits are not under
        // test here.
        .new_visitor_limit(None)
        .poll_limit(None)
        .fail_policy(policy)
        .store(store)
        .build()
        .expect("the layer builds")
}

pub(super) struct Gateway {
    pub(super) http: Http,
    pub(super) store: RedisStore,
    pub(super) closed: WaitingRoomLayer,
}

/// One gateway: its own `RedisStore` (own connection and breaker) under a fail-closed and a
/// fail-open layer; `open` picks which one answers.
pub(super) async fn gateway(
    url: &str,
    capacity: u32,
    index: usize,
    log: Log,
    open: Arc<AtomicBool>,
) -> Gateway {
    let store = RedisStore::builder()
        .url(url)
        .timeout(STORE_TIMEOUT)
        .breaker_cooldown(BREAKER_COOLDOWN)
        .build()
        .expect("the store builds");
    let see = move |a: &tower_waiting_room::Admission, headers: &HeaderMap| {
        let seen = Seen {
            at: now_ms(),
            gateway: index,
            session: a.session(),
            by: a.admitted_by(),
            expires_at_ms: a.expires_at_ms(),
            with_token: carries_cookie(headers, ADMISSION_COOKIE),
        };
        log.lock().unwrap().push(seen);
    };
    let closed = layer(store.clone(), capacity, FailPolicy::Closed);
    let closed_app = app_seeing(closed.clone(), see.clone());
    let open_app = app_seeing(layer(store.clone(), capacity, FailPolicy::Open), see);
    let router = Router::new().fallback(move |req: Request| {
        let app = if open.load(Ordering::SeqCst) {
            open_app.clone()
        } else {
            closed_app.clone()
        };
        async move { app.oneshot(req).await.unwrap_or_else(|e| match e {}) }
    });
    Gateway {
        http: serve(router).await,
        store,
        closed,
    }
}
