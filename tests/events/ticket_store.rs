//! What `tickets_mint.rs` and `tickets_redeem.rs` share: the embedded store with its ticket calls
//! counted (each mint with what it was for) and failable on their own (the line's calls go on),
//! and a room "shop" with single-use tickets on it, `POST /checkout` gated, sent requests
//! through the layer in process (`tower`'s `oneshot`, via `common::call`).

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use common::{call, keys, Reply, SECRET};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::__private::{AdmissionTicket, AdmissionToken};
use tower_waiting_room::clock::Clock;
use tower_waiting_room::routing::{Rule, ADMISSION_TICKET_HEADER};
use tower_waiting_room::store::{
    Decision, MemoryStore, MintFor, Minted, Redeemed, RoomStats, SettingsChange, SettingsUpdate,
    Store, StoreError, StoreErrorKind, StoreFuture, TicketNonce, TicketStore,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{RoomPolicy, SessionId, WaitingRoomBuilder, WaitingRoomLayer};

pub const TICKET: HeaderName = HeaderName::from_static(ADMISSION_TICKET_HEADER);
pub const STATUS: &str = "/__waitingroom/shop/status";
pub const LEAVE: &str = "/__waitingroom/shop/leave";

/// The embedded store, whose ticket calls are counted (the mints with what they were for) and
/// can be made to fail (`Unavailable`) while every other call goes on.
#[derive(Clone, Default)]
pub struct TicketCalls {
    pub inner: MemoryStore,
    minted_for: Arc<Mutex<Vec<MintFor>>>,
    redeems: Arc<AtomicUsize>,
    fail: Arc<AtomicBool>,
}

impl TicketCalls {
    pub fn on(clock: &ManualClock) -> Self {
        Self {
            inner: MemoryStore::with_clock(clock.clone()),
            ..Self::default()
        }
    }

    /// From now on the ticket calls fail (`true`) or are answered (`false`).
    pub fn fail_tickets(&self, fail: bool) {
        self.fail.store(fail, Ordering::SeqCst);
    }

    pub fn mints(&self) -> usize {
        self.minted_for.lock().unwrap().len()
    }

    /// What each mint so far was for, in order.
    pub fn minted_for(&self) -> Vec<MintFor> {
        self.minted_for.lock().unwrap().clone()
    }

    pub fn redeems(&self) -> usize {
        self.redeems.load(Ordering::SeqCst)
    }

    fn failing<T: Send + 'static>(&self) -> Option<StoreFuture<T>> {
        self.fail.load(Ordering::SeqCst).then(|| {
            let e = StoreError::new(StoreErrorKind::Unavailable);
            Box::pin(std::future::ready(Err(e))) as StoreFuture<T>
        })
    }
}

impl Store for TicketCalls {
    fn enter(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.inner.enter(p, s)
    }
    fn join(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.inner.join(p, s)
    }
    fn poll(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.inner.poll(p, s)
    }
    fn heartbeat(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.inner.heartbeat(p, s)
    }
    fn release(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<bool> {
        self.inner.release(p, s)
    }
    fn stats(&self, p: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.inner.stats(p)
    }
    fn configure(&self, p: &RoomPolicy, c: SettingsChange) -> StoreFuture<SettingsUpdate> {
        self.inner.configure(p, c)
    }
    fn admit_next(&self, p: &RoomPolicy, n: u32) -> StoreFuture<u64> {
        self.inner.admit_next(p, n)
    }
    fn ban(&self, p: &RoomPolicy, s: SessionId, until: u64) -> StoreFuture<bool> {
        self.inner.ban(p, s, until)
    }
    fn tickets(self: Arc<Self>) -> Option<Arc<dyn TicketStore>> {
        Some(self)
    }
}

impl TicketStore for TicketCalls {
    fn mint_ticket(
        &self,
        p: &RoomPolicy,
        s: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
        mint_for: MintFor,
    ) -> StoreFuture<Minted> {
        self.minted_for.lock().unwrap().push(mint_for);
        self.failing()
            .unwrap_or_else(|| self.inner.mint_ticket(p, s, fresh, expires_at_ms, mint_for))
    }
    fn redeem_ticket(
        &self,
        p: &RoomPolicy,
        s: SessionId,
        nonce: TicketNonce,
    ) -> StoreFuture<Redeemed> {
        self.redeems.fetch_add(1, Ordering::SeqCst);
        self.failing()
            .unwrap_or_else(|| self.inner.redeem_ticket(p, s, nonce))
    }
}

/// Room "shop": capacity 10, single-use tickets on, `POST /checkout` gated, plain-http cookies.
pub fn builder() -> WaitingRoomBuilder {
    WaitingRoomLayer::builder("shop")
        .capacity(10)
        .secret(SECRET)
        .secure_cookies(false)
        .single_use_tickets(true)
        .gate(Rule::post("/checkout"))
}

/// A room in front of `common::app` (which answers with the `Admission` it saw), on a
/// [`TicketCalls`] store and a manual clock.
#[derive(Clone)]
pub struct Shop {
    pub router: Router,
    pub store: TicketCalls,
    pub clock: ManualClock,
}

impl Shop {
    /// The room of [`builder`] on a fresh store and clock.
    pub fn new() -> Self {
        let clock = common::clock();
        Self::on(builder(), &TicketCalls::on(&clock), &clock)
    }

    /// The room of `b` on `store` and `clock`.
    pub fn on(b: WaitingRoomBuilder, store: &TicketCalls, clock: &ManualClock) -> Self {
        let layer = b
            .clock(clock.clone())
            .store(store.clone())
            .build()
            .expect("the room builds");
        Self {
            router: common::app(layer),
            store: store.clone(),
            clock: clock.clone(),
        }
    }

    /// `method path` with `headers`, through the layer.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Reply {
        call(&self.router, method, path, headers).await
    }

    /// `method path` with one `Cookie` header.
    pub async fn with_cookie(&self, method: Method, path: &str, cookie: &str) -> Reply {
        let cookie = HeaderValue::from_str(cookie).unwrap();
        self.send(method, path, &[(header::COOKIE, cookie)]).await
    }

    /// A visitor the store admits, as a browser (cookies): their admission token and ticket
    /// cookie values.
    pub async fn admitted_browser(&self) -> (String, Option<String>) {
        let first = self.send(Method::GET, "/", &[]).await;
        let queue = first.cookie_value("wr_shop_q").expect("a queue cookie");
        let res = self
            .with_cookie(Method::GET, "/", &format!("wr_shop_q={queue}"))
            .await;
        assert_eq!(res.status, StatusCode::OK, "admitted: {:?}", res.headers);
        assert!(res.headers.get(TICKET).is_none(), "browsers get no header");
        let token = res.cookie_value("wr_shop_a").expect("an admission token");
        (token, res.cookie_value("wr_shop_t"))
    }

    /// `POST /checkout` (the gated route) with `req`'s headers.
    pub async fn checkout(&self, headers: &[(HeaderName, HeaderValue)]) -> Reply {
        self.send(Method::POST, "/checkout", headers).await
    }

    /// `POST /checkout` with the ticket cookie (after another cookie).
    pub async fn checkout_with_cookie(&self, ticket: &str) -> Reply {
        let cookie = format!("other=1; wr_shop_t={ticket}");
        self.with_cookie(Method::POST, "/checkout", &cookie).await
    }

    /// `POST /checkout` with the ticket header.
    pub async fn checkout_with_header(&self, ticket: &str) -> Reply {
        let value = HeaderValue::from_str(ticket).unwrap();
        self.checkout(&[(TICKET, value)]).await
    }

    /// The status endpoint, with the admission token as a cookie.
    pub async fn status(&self, token: &str) -> Reply {
        self.with_cookie(Method::GET, STATUS, &format!("wr_shop_a={token}"))
            .await
    }

    /// `GET /` with the admission token as a cookie: a heartbeat once past `refresh`.
    pub async fn heartbeat(&self, token: &str) -> Reply {
        self.with_cookie(Method::GET, "/", &format!("wr_shop_a={token}"))
            .await
    }

    /// The leave endpoint, with the admission token as a cookie: `200`.
    pub async fn leave(&self, token: &str) {
        let left = self
            .with_cookie(Method::POST, LEAVE, &format!("wr_shop_a={token}"))
            .await;
        assert_eq!(left.status, StatusCode::OK, "{}", left.text());
    }

    /// The live ticket of room "shop" signed in `value`.
    pub fn ticket(&self, value: &str) -> AdmissionTicket {
        AdmissionTicket::verify(&keys(), "shop", value, self.clock.now_ms())
            .unwrap_or_else(|| panic!("not a live ticket of the room: {value}"))
    }

    /// The live admission token of room "shop" signed in `value`.
    pub fn token(&self, value: &str) -> AdmissionToken {
        AdmissionToken::verify(&keys(), "shop", value, self.clock.now_ms())
            .unwrap_or_else(|| panic!("not a live admission token of the room: {value}"))
    }
}

/// A gate's `403` body for room "shop", byte for byte.
pub fn refusal(error: &str, reason: &str) -> String {
    format!(
        r#"{{"error":"{error}","room":"shop","status":"/__waitingroom/shop/status","reason":"{reason}"}}"#
    )
}

pub fn not_admitted(reason: &str) -> String {
    refusal("not_admitted", reason)
}

pub fn used() -> String {
    refusal("ticket_used", "ticket_used")
}

/// `reply` is the room's answer `status` with exactly `body`: the request did not pass.
#[track_caller]
pub fn refused(reply: &Reply, status: StatusCode, body: &str) {
    assert_eq!(
        reply.status,
        status,
        "expected {status} {body}: {}",
        reply.text()
    );
    assert_eq!(reply.text(), body);
}

/// `reply` passed the gate, admitted by the ticket of `session`.
#[track_caller]
pub fn passed(reply: &Reply, session: SessionId) {
    let saw = reply.handler_saw();
    assert_eq!(saw["by"], "Ticket", "{saw}");
    assert_eq!(saw["session"], session.to_string(), "{saw}");
}
