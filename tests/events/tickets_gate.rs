//! Single-use tickets at a gated route, over real HTTP on loopback: the "drop" room (tickets on)
//! gates `POST /checkout` on every gateway. One admitted visitor's ticket, used 50 times at once
//! through 3 gateways (each a `WaitingRooms` layer over its own `RedisStore` connection to one
//! `redis-server`), passes exactly once; the 49 others are `403 {"error":"ticket_used"}`. A
//! forged, tampered, expired or other-room ticket is refused with its reason and writes nothing
//! to Redis (its dirty counter and key count do not move); a visitor who left has their ticket
//! refused as `slot_ended`; an admission token alone is `ticket_missing`. The same on the
//! embedded store shared by three layers, where "no store call" is counted directly.

use crate::common;
#[cfg(feature = "redis")]
use crate::redis_harness;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use common::{cookie, keys, serve_with_connect_info, Http, Jar, Reply, SECRET};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use serde_json::{json, Value};
use tower_waiting_room::__private::AdmissionTicket;
use tower_waiting_room::config::RoomPolicy;
use tower_waiting_room::routing::{Rule, WaitingRooms, ADMISSION_TICKET_HEADER};
use tower_waiting_room::store::{
    Decision, MemoryStore, MintFor, Minted, Redeemed, RoomStats, SettingsChange, SettingsUpdate,
    Store, StoreFuture, TicketNonce, TicketStore,
};
use tower_waiting_room::{
    Admission, AdmittedBy, FailPolicy, Keyring, SessionId, SigningKey, WaitingRoomBuilder,
    WaitingRoomLayer,
};

const TICKET: HeaderName = HeaderName::from_static(ADMISSION_TICKET_HEADER);
const STATUS: &str = "/__waitingroom/drop/status";

fn builder(id: &str) -> WaitingRoomBuilder {
    WaitingRoomLayer::builder(id)
        .capacity(10)
        .secret(SECRET)
        .secure_cookies(false)
        .fail_policy(FailPolicy::Closed)
}

/// One gateway: "drop" (single-use tickets) at `/drop`, "main" (no tickets) for everything
/// else, and the checkout gated by "drop". The app says how the request was admitted.
async fn gateway(drop: WaitingRoomLayer, main: WaitingRoomLayer) -> Http {
    let rooms = WaitingRooms::builder()
        .room(Rule::path("/drop"), drop)
        .default_room(main)
        .gate(Rule::post("/checkout"), "drop")
        .build()
        .expect("the rooms build");
    let seen = |Extension(a): Extension<Admission>| async move {
        let by = match a.admitted_by() {
            AdmittedBy::Ticket => "ticket",
            _ => "other",
        };
        Json(json!({ "room": a.room(), "session": a.session().to_string(), "by": by }))
    };
    let app = Router::new()
        .route("/drop", get(seen))
        .route("/", get(seen))
        .route("/checkout", post(seen))
        .layer(rooms);
    serve_with_connect_info(app).await
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A browser admitted to "drop" on `gw`: its jar (queue cookie, admission token, ticket).
async fn admitted(gw: &Http) -> Jar {
    let mut jar = Jar::new();
    let first = gw.visit(&mut jar, Method::GET, "/drop").await;
    assert_eq!(first.status, StatusCode::FOUND);
    let inside = gw.visit(&mut jar, Method::GET, "/drop").await;
    assert_eq!(inside.status, StatusCode::OK, "{}", inside.text());
    assert!(jar.get("wr_drop_t").is_some(), "a ticket at admission");
    jar
}

/// `reply` is the gate's `403` with `error` and `reason`, and sets no cookie.
#[track_caller]
fn refused(reply: &Reply, error: &str, reason: &str) {
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    assert_eq!(
        reply.json(),
        json!({ "error": error, "room": "drop", "status": STATUS, "reason": reason }),
    );
    assert!(reply.set_cookies().is_empty(), "{:?}", reply.set_cookies());
}

/// `uses` concurrent `POST /checkout` with `ticket`, spread over the gateways, as the ticket
/// cookie and as the `X-Admission-Ticket` header in turn.
async fn concurrent_uses(gateways: &[Http], ticket: &str, uses: usize) -> Vec<Reply> {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..uses {
        let gw = gateways[i % gateways.len()].clone();
        let header = if i % 2 == 0 {
            (header::COOKIE, cookie("wr_drop_t", ticket))
        } else {
            (TICKET, HeaderValue::from_str(ticket).unwrap())
        };
        tasks.spawn(async move { gw.send(Method::POST, "/checkout", &[header]).await });
    }
    let mut replies = Vec::new();
    while let Some(reply) = tasks.join_next().await {
        replies.push(reply.unwrap());
    }
    replies
}

/// Of `replies`, exactly one passed (admitted by the ticket) and every other was told
/// `ticket_used`.
#[track_caller]
fn exactly_one_passed(replies: &[Reply], session: &str) {
    let passed: Vec<_> = replies.iter().filter(|r| r.status.is_success()).collect();
    assert_eq!(passed.len(), 1, "{:?}", statuses(replies));
    assert_eq!(
        passed[0].json(),
        json!({ "room": "drop", "session": session, "by": "ticket" })
    );
    for reply in replies.iter().filter(|r| !r.status.is_success()) {
        refused(reply, "ticket_used", "ticket_used");
    }
}

fn statuses(replies: &[Reply]) -> Vec<u16> {
    replies.iter().map(|r| r.status.as_u16()).collect()
}

/// Tickets that must be refused at the gateway, with their reasons: forged (another key),
/// tampered (each of a few bytes changed), garbage, expired (genuine), of the "main" room.
fn bad_tickets(real: &str) -> Vec<(String, &'static str)> {
    let now = now_ms();
    let session = SessionId::random();
    let forger = Keyring::new(SigningKey::new("k1", [9u8; 32]).unwrap());
    let live = AdmissionTicket::new(session, TicketNonce::random(), now, now + 60_000);
    let mut bad = vec![
        (live.sign(&forger, "drop"), "ticket_invalid"),
        ("t1.k1.garbage".to_owned(), "ticket_invalid"),
        (
            AdmissionTicket::new(session, TicketNonce::random(), now - 90_000, now - 1)
                .sign(&keys(), "drop"),
            "ticket_expired",
        ),
        (live.sign(&keys(), "main"), "other_room"),
    ];
    for at in [3, real.len() / 2, real.len() - 1] {
        let mut bytes = real.as_bytes().to_vec();
        bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
        bad.push((String::from_utf8(bytes).unwrap(), "ticket_invalid"));
    }
    bad
}

/// Every bad ticket, as the cookie and as the header, on every gateway: refused with its
/// reason. Then an admission token alone (cookie, and `a1.…` in the ticket header):
/// `ticket_missing`, with where to get the ticket.
async fn bad_tickets_are_refused(gateways: &[Http], real: &str, token: &str) {
    for (value, reason) in bad_tickets(real) {
        for gw in gateways {
            for headers in [
                [(header::COOKIE, cookie("wr_drop_t", &value))],
                [(TICKET, HeaderValue::from_str(&value).unwrap())],
            ] {
                let reply = gw.send(Method::POST, "/checkout", &headers).await;
                refused(&reply, "not_admitted", reason);
            }
        }
    }
    for headers in [
        vec![(header::COOKIE, cookie("wr_drop_a", token))],
        vec![(TICKET, HeaderValue::from_str(token).unwrap())],
        vec![],
    ] {
        let reply = gateways[0].send(Method::POST, "/checkout", &headers).await;
        refused(&reply, "not_admitted", "ticket_missing");
    }
}

/// A visitor who left (on another gateway) has their unused ticket refused as `slot_ended`.
async fn a_ticket_of_a_visitor_who_left_is_slot_ended(gateways: &[Http]) {
    let mut jar = admitted(&gateways[0]).await;
    let left = gateways[1]
        .visit(&mut jar, Method::POST, "/__waitingroom/drop/leave")
        .await;
    assert_eq!(left.status, StatusCode::OK, "{}", left.text());
    let ticket = jar
        .get("wr_drop_t")
        .expect("leaving keeps the ticket cookie");
    let headers = [(TICKET, HeaderValue::from_str(ticket).unwrap())];
    for gw in gateways {
        let reply = gw.send(Method::POST, "/checkout", &headers).await;
        refused(&reply, "not_admitted", "slot_ended");
    }
}

/// A client without cookies: the status endpoint hands it its ticket (`t1.…`) in the JSON and
/// the header, which passes the gate once. For "main" (no tickets) the status endpoint's
/// `"ticket"` is the admission token.
async fn a_header_client_gets_its_ticket_from_the_status_endpoint(gateways: &[Http]) {
    let json = [(header::ACCEPT, HeaderValue::from_static("application/json"))];
    let gw = |i: usize| &gateways[i % gateways.len()];
    let session_header = HeaderName::from_static("waiting-room-session");
    let token_header = HeaderName::from_static("waiting-room-token");
    for (room, path, kind) in [("drop", "/drop", "t1."), ("main", "/", "a1.")] {
        let first = gw(0).send(Method::GET, path, &json).await;
        let place = first.header(&session_header).expect("a place").to_owned();
        let place = [(
            session_header.clone(),
            HeaderValue::from_str(&place).unwrap(),
        )];
        let inside = gw(1).send(Method::GET, path, &place).await;
        assert_eq!(inside.status, StatusCode::OK, "{}", inside.text());
        let token = inside.header(&token_header).expect("a token").to_owned();
        let token = [(token_header.clone(), HeaderValue::from_str(&token).unwrap())];
        let status = gw(2)
            .send(
                Method::GET,
                &format!("/__waitingroom/{room}/status"),
                &token,
            )
            .await;
        let body: Value = status.json();
        assert_eq!(body["state"], "admitted", "{body}");
        let ticket = body["ticket"].as_str().expect("a ticket in the JSON");
        assert!(ticket.starts_with(kind), "{room}: {ticket}");
        assert_eq!(status.header(&TICKET), Some(ticket));
        if room == "drop" {
            let headers = [(TICKET, HeaderValue::from_str(ticket).unwrap())];
            let replies = concurrent_uses(gateways, ticket, 6).await;
            let session = body_session(ticket);
            exactly_one_passed(&replies, &session);
            let again = gateways[0].send(Method::POST, "/checkout", &headers).await;
            refused(&again, "ticket_used", "ticket_used");
            // Asked again: no new ticket for the same admission, only the note.
            let status = gateways[0]
                .send(Method::GET, "/__waitingroom/drop/status", &token)
                .await;
            assert_eq!(status.json()["ticket_used"], true, "{}", status.text());
            assert_eq!(status.header(&TICKET), None);
        }
    }
}

/// The session inside a signed value (`<kind>.<kid>.<session>.…`).
fn body_session(value: &str) -> String {
    value.split('.').nth(2).unwrap().to_owned()
}

#[cfg(feature = "redis")]
mod on_redis {
    use std::time::Duration;

    use super::*;
    use redis_harness::Server;
    use tower_waiting_room::store::RedisStore;

    fn room(b: WaitingRoomBuilder, redis_url: &str) -> WaitingRoomLayer {
        let store = RedisStore::builder()
            .url(redis_url)
            .timeout(Duration::from_secs(2))
            .build()
            .expect("the store builds");
        b.store(store).build().expect("the room builds")
    }

    async fn gateways(redis_url: &str, n: usize) -> Vec<Http> {
        let mut all = Vec::new();
        for _ in 0..n {
            let drop = room(builder("drop").single_use_tickets(true), redis_url);
            let main = room(builder("main"), redis_url);
            all.push(gateway(drop, main).await);
        }
        all
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fifty_concurrent_uses_of_one_ticket_over_three_gateways_pass_exactly_once() {
        let redis = Server::start(&["--save", ""]);
        let gateways = gateways(&redis.url(), 3).await;
        let mut jar = admitted(&gateways[0]).await;
        let ticket = jar.get("wr_drop_t").unwrap().to_owned();
        let token = jar.get("wr_drop_a").unwrap().to_owned();

        let replies = concurrent_uses(&gateways, &ticket, 50).await;
        exactly_one_passed(&replies, &body_session(&ticket));
        // The browser's own second use (its ticket cookie stays): told it was used.
        let again = gateways[2].visit(&mut jar, Method::POST, "/checkout").await;
        refused(&again, "ticket_used", "ticket_used");

        // Bad tickets and a token alone: refused at the gateway, nothing written to Redis.
        let before = redis.writes_and_keys();
        bad_tickets_are_refused(&gateways, &ticket, &token).await;
        assert_eq!(
            redis.writes_and_keys(),
            before,
            "refused tickets write nothing (Redis's dirty counter and key count unchanged)"
        );
        // The measure is live: a ticket that reaches the store does write (it is used).
        let fresh = admitted(&gateways[1]).await;
        let before = redis.writes_and_keys();
        let cookie = [(header::COOKIE, fresh.header().unwrap())];
        let reply = gateways[1].send(Method::POST, "/checkout", &cookie).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        let after = redis.writes_and_keys();
        assert!(after.0 > before.0, "{before:?} -> {after:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn left_visitors_and_header_clients_across_gateways() {
        let redis = Server::start(&["--save", ""]);
        let gateways = gateways(&redis.url(), 3).await;
        a_ticket_of_a_visitor_who_left_is_slot_ended(&gateways).await;
        a_header_client_gets_its_ticket_from_the_status_endpoint(&gateways).await;
    }
}

/// The embedded store, every call counted (so "no store call" is seen, not inferred).
#[derive(Clone, Default)]
struct Counted {
    inner: MemoryStore,
    calls: Arc<AtomicUsize>,
}

impl Counted {
    fn count(&self) -> &MemoryStore {
        self.calls.fetch_add(1, Ordering::SeqCst);
        &self.inner
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Store for Counted {
    fn enter(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.count().enter(p, s)
    }
    fn poll(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.count().poll(p, s)
    }
    fn heartbeat(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.count().heartbeat(p, s)
    }
    fn release(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<bool> {
        self.count().release(p, s)
    }
    fn stats(&self, p: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.count().stats(p)
    }
    fn configure(&self, p: &RoomPolicy, c: SettingsChange) -> StoreFuture<SettingsUpdate> {
        self.count().configure(p, c)
    }
    fn admit_next(&self, p: &RoomPolicy, n: u32) -> StoreFuture<u64> {
        self.count().admit_next(p, n)
    }
    fn ban(&self, p: &RoomPolicy, s: SessionId, until: u64) -> StoreFuture<bool> {
        self.count().ban(p, s, until)
    }
    fn tickets(self: Arc<Self>) -> Option<Arc<dyn TicketStore>> {
        Some(self)
    }
}

impl TicketStore for Counted {
    fn mint_ticket(
        &self,
        p: &RoomPolicy,
        s: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
        mint_for: MintFor,
    ) -> StoreFuture<Minted> {
        self.count()
            .mint_ticket(p, s, fresh, expires_at_ms, mint_for)
    }
    fn redeem_ticket(&self, p: &RoomPolicy, s: SessionId, n: TicketNonce) -> StoreFuture<Redeemed> {
        self.count().redeem_ticket(p, s, n)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_layers_sharing_the_embedded_store_pass_a_ticket_exactly_once() {
    let store = Counted::default();
    let mut gateways = Vec::new();
    for _ in 0..3 {
        let drop = builder("drop")
            .single_use_tickets(true)
            .store(store.clone());
        let main = builder("main").store(store.clone());
        gateways.push(gateway(drop.build().unwrap(), main.build().unwrap()).await);
    }
    let mut jar = admitted(&gateways[0]).await;
    let ticket = jar.get("wr_drop_t").unwrap().to_owned();
    let token = jar.get("wr_drop_a").unwrap().to_owned();

    let replies = concurrent_uses(&gateways, &ticket, 50).await;
    exactly_one_passed(&replies, &body_session(&ticket));
    let again = gateways[1].visit(&mut jar, Method::POST, "/checkout").await;
    refused(&again, "ticket_used", "ticket_used");

    let before = store.calls();
    bad_tickets_are_refused(&gateways, &ticket, &token).await;
    assert_eq!(store.calls(), before, "no store call for a refused ticket");

    a_ticket_of_a_visitor_who_left_is_slot_ended(&gateways).await;
    a_header_client_gets_its_ticket_from_the_status_endpoint(&gateways).await;
}
