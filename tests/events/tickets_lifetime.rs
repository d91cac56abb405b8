//! A single-use ticket lives exactly as long as its admission's slot, over real HTTP on loopback
//! with a manual clock: two gateways (each a room layer with tickets on, gating
//! `POST /checkout`) share one store, the embedded one or a real `redis-server`, and a browser
//! that keeps its cookies only until their `Max-Age` moves between them.
//!
//! - A browser admitted more than `active_ttl` ago, kept inside by its heartbeats, still holds
//!   its (one) ticket and checks out exactly once.
//! - After the slot's first expiry a used ticket stays used: the status endpoint says
//!   `ticket_used` and hands out no second ticket.
//! - A visitor whose slot ended (the app's `end_slot` after a checkout, or the leave endpoint)
//!   and who is admitted again with the same session gets a new ticket that works once; the old
//!   one never passes on the new slot.
//! - A used ticket whose record is then lost (deleted, evicted) never checks out again: the
//!   next heartbeat mints no second ticket for the same admission.

use crate::common;
#[cfg(feature = "redis")]
use crate::redis_harness;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use axum::extract::RawQuery;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use common::{clock, max_age_of, serve, Http, Jar, Reply, SECRET};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use serde_json::json;
use tower_waiting_room::__private::AdmissionTicket;
use tower_waiting_room::clock::Clock;
use tower_waiting_room::routing::{Rule, ADMISSION_TICKET_HEADER};
use tower_waiting_room::store::Store;
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{Admission, SessionId, WaitingRoomLayer};

const STATUS: &str = "/__waitingroom/shop/status";
const LEAVE: &str = "/__waitingroom/shop/leave";
const TICKET_COOKIE: &str = "wr_shop_t";
const TICKET: HeaderName = HeaderName::from_static(ADMISSION_TICKET_HEADER);
const SESSION: HeaderName = HeaderName::from_static("waiting-room-session");
const TOKEN: HeaderName = HeaderName::from_static("waiting-room-token");
/// The default `active_ttl`.
const ACTIVE_TTL: Duration = Duration::from_secs(300);
/// A heartbeat's spacing: past the default `refresh` (15 s), well within `active_ttl`.
const BEAT: Duration = Duration::from_secs(60);

/// Gateways in front of one shared store, on one manual clock.
struct Shop {
    gateways: Vec<Http>,
    clock: ManualClock,
}

impl Shop {
    async fn on(store: impl Store + Clone, clock: ManualClock) -> Self {
        let mut gateways = Vec::new();
        for _ in 0..2 {
            let layer = WaitingRoomLayer::builder("shop")
                .capacity(10)
                .secret(SECRET)
                .single_use_tickets(true)
                .gate(Rule::post("/checkout"))
                .clock(clock.clone())
                .store(store.clone())
                .build()
                .expect("the room builds");
            gateways.push(serve(app(layer)).await);
        }
        Self { gateways, clock }
    }

    /// The gateway for the `i`th request: they take turns.
    fn gw(&self, i: usize) -> &Http {
        &self.gateways[i % self.gateways.len()]
    }

    fn ticket(&self, value: &str) -> AdmissionTicket {
        AdmissionTicket::verify(&common::keys(), "shop", value, self.clock.now_ms())
            .unwrap_or_else(|| panic!("not a live ticket of the room: {value}"))
    }
}

/// Pages say who got in and how; `POST /checkout` (gated) too, and ends the slot when asked to
/// (`?end`), as a shop does once the order is placed.
fn app(layer: WaitingRoomLayer) -> Router {
    let seen = |a: &Admission| {
        json!({
            "session": a.session().to_string(),
            "by": format!("{:?}", a.admitted_by()),
        })
    };
    let page = move |Extension(a): Extension<Admission>| async move { Json(seen(&a)) };
    let checkout = move |Extension(a): Extension<Admission>, RawQuery(q): RawQuery| async move {
        if q.as_deref() == Some("end") {
            a.end_slot();
        }
        Json(seen(&a))
    };
    Router::new()
        .route("/", get(page))
        .route("/checkout", post(checkout))
        .layer(layer)
}

/// A browser: its cookies, each kept until its `Max-Age` runs out on the shop's clock.
struct Browser {
    jar: Jar,
    until: BTreeMap<String, u64>,
    requests: usize,
}

impl Browser {
    fn new() -> Self {
        Self {
            jar: Jar::new(),
            until: BTreeMap::new(),
            requests: 0,
        }
    }

    /// `method path` through the next gateway, with the cookies still alive.
    async fn visit(&mut self, shop: &Shop, method: Method, path: &str) -> Reply {
        let now = shop.clock.now_ms();
        for (name, until) in &self.until {
            if *until <= now {
                self.jar.remove(name);
            }
        }
        let gw = shop.gw(self.requests);
        self.requests += 1;
        let reply = gw.visit(&mut self.jar, method, path).await;
        for line in reply.set_cookies() {
            let name = line.split('=').next().unwrap().to_owned();
            let max_age = max_age_of(&line).expect("every cookie has a Max-Age");
            self.until.insert(name, now + max_age * 1_000);
        }
        reply
    }

    fn ticket(&self) -> Option<&str> {
        self.jar.get(TICKET_COOKIE)
    }

    /// Arrives, is let in (nobody waits, a slot is free), and holds a ticket.
    async fn admitted(shop: &Shop) -> Self {
        let mut browser = Self::new();
        let first = browser.visit(shop, Method::GET, "/").await;
        assert_eq!(first.status, StatusCode::FOUND);
        browser.visit(shop, Method::GET, "/").await.handler_saw();
        assert!(browser.ticket().is_some(), "a ticket at admission");
        browser
    }

    /// `POST /checkout` (`?end`: the app ends the slot).
    async fn checkout(&mut self, shop: &Shop, end: bool) -> Reply {
        let path = if end { "/checkout?end" } else { "/checkout" };
        self.visit(shop, Method::POST, path).await
    }
}

/// `reply` passed the gate on a ticket.
#[track_caller]
fn passed_on_a_ticket(reply: &Reply) {
    assert_eq!(reply.handler_saw()["by"], "Ticket", "{}", reply.text());
}

/// `reply` is the gate's `403` with `error` and `reason`.
#[track_caller]
fn refused(reply: &Reply, error: &str, reason: &str) {
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    assert_eq!(
        reply.json(),
        json!({ "error": error, "room": "shop", "status": STATUS, "reason": reason }),
    );
}

/// Heartbeats over `beats` × [`BEAT`], each answered with the same ticket (same nonce) again,
/// its expiry that of the renewed slot. Returns the last ticket.
async fn heartbeats_carry_the_ticket(shop: &Shop, browser: &mut Browser, beats: u32) -> String {
    let first = shop.ticket(browser.ticket().unwrap());
    for beat in 1..=beats {
        shop.clock.advance(BEAT);
        let reply = browser.visit(shop, Method::GET, "/").await;
        assert_eq!(reply.handler_saw()["by"], "Store");
        let renewed = reply
            .cookie_value(TICKET_COOKIE)
            .unwrap_or_else(|| panic!("beat {beat}: the ticket re-issued"));
        let renewed = shop.ticket(&renewed);
        assert_eq!(
            renewed.nonce(),
            first.nonce(),
            "beat {beat}: the same ticket"
        );
        let slot = shop.clock.now_ms() + ACTIVE_TTL.as_millis() as u64;
        assert_eq!(renewed.expires_at_ms(), slot, "beat {beat}: with the slot");
    }
    browser.ticket().unwrap().to_owned()
}

/// A browser admitted longer ago than `active_ttl`, its slot kept by heartbeats, checks out
/// exactly once: its ticket cookie and record lived on with the slot.
async fn an_admission_older_than_active_ttl_checks_out_exactly_once(shop: &Shop) {
    let mut browser = Browser::admitted(shop).await;
    let first = browser.ticket().unwrap().to_owned();
    let first_expiry = shop.ticket(&first).expires_at_ms();
    heartbeats_carry_the_ticket(shop, &mut browser, 8).await;
    assert!(shop.clock.now_ms() > first_expiry, "past the first expiry");
    passed_on_a_ticket(&browser.checkout(shop, false).await);
    for _ in 0..3 {
        refused(
            &browser.checkout(shop, false).await,
            "ticket_used",
            "ticket_used",
        );
    }
    // The value first issued was signed with the first expiry: refused at the gateway.
    let old = [(TICKET, HeaderValue::from_str(&first).unwrap())];
    let reply = shop.gw(0).send(Method::POST, "/checkout", &old).await;
    refused(&reply, "not_admitted", "ticket_expired");
}

/// Used at once, then kept inside past the slot's first expiry: the record lived on, used, so
/// the status endpoint says `ticket_used` and no second ticket exists for the admission.
async fn a_used_ticket_stays_used_past_the_first_expiry(shop: &Shop) {
    let mut browser = Browser::admitted(shop).await;
    let first_expiry = shop.ticket(browser.ticket().unwrap()).expires_at_ms();
    passed_on_a_ticket(&browser.checkout(shop, false).await);
    for beat in 1..=8 {
        shop.clock.advance(BEAT);
        let reply = browser.visit(shop, Method::GET, "/").await;
        assert_eq!(reply.handler_saw()["by"], "Store");
        assert_eq!(reply.cookie_value(TICKET_COOKIE), None, "beat {beat}");
        let status = browser.visit(shop, Method::GET, STATUS).await;
        assert_eq!(status.status, StatusCode::OK);
        assert_eq!(
            status.json()["state"],
            "admitted",
            "beat {beat}: {}",
            status.text()
        );
        assert_eq!(
            status.json()["ticket_used"],
            true,
            "beat {beat}: {}",
            status.text()
        );
        assert_eq!(status.cookie_value(TICKET_COOKIE), None, "beat {beat}");
    }
    assert!(shop.clock.now_ms() > first_expiry, "past the first expiry");
}

/// The app ends the slot with the checkout; the visitor comes back (the queue cookie stays:
/// the same session) and is admitted again: a new ticket, which works once. The old one is
/// still told `ticket_used`.
async fn after_end_slot_a_new_admission_gets_a_new_ticket(shop: &Shop) {
    let mut browser = Browser::admitted(shop).await;
    let old = browser.ticket().unwrap().to_owned();
    let session = shop.ticket(&old).session();
    let done = browser.checkout(shop, true).await;
    passed_on_a_ticket(&done);
    let cleared = done
        .set_cookie("wr_shop_a")
        .expect("the admission cookie cleared");
    assert_eq!(max_age_of(&cleared), Some(0), "{cleared}");
    refused(
        &browser.checkout(shop, false).await,
        "ticket_used",
        "ticket_used",
    );
    // Back: admitted again, the same session, a new ticket.
    let again = browser.visit(shop, Method::GET, "/").await;
    assert_eq!(again.handler_saw()["session"], session.to_string());
    let new = again
        .cookie_value(TICKET_COOKIE)
        .expect("a new ticket for the new admission");
    let new = shop.ticket(&new);
    assert_eq!(new.session(), session);
    assert_ne!(new.nonce(), shop.ticket(&old).nonce());
    passed_on_a_ticket(&browser.checkout(shop, false).await);
    refused(
        &browser.checkout(shop, false).await,
        "ticket_used",
        "ticket_used",
    );
    let old = [(TICKET, HeaderValue::from_str(&old).unwrap())];
    let reply = shop.gw(1).send(Method::POST, "/checkout", &old).await;
    refused(&reply, "not_admitted", "ticket_invalid");
}

/// A client without cookies keeps its place value (`waiting-room-session`) across a leave: its
/// unused ticket is `slot_ended` from then on, even once it is admitted again, and the new
/// admission brings a new ticket that works once.
async fn after_leave_a_new_admission_gets_a_new_ticket(shop: &Shop) {
    let json = [(header::ACCEPT, HeaderValue::from_static("application/json"))];
    let first = shop.gw(0).send(Method::GET, "/", &json).await;
    let place = first.header(&SESSION).expect("a place").to_owned();
    let place = (SESSION, HeaderValue::from_str(&place).unwrap());
    let admit = |i: usize| {
        let place = [place.clone()];
        async move { shop.gw(i).send(Method::GET, "/", &place).await }
    };
    let inside = admit(1).await;
    inside.handler_saw();
    let token = inside.header(&TOKEN).expect("a token").to_owned();
    let old = inside.header(&TICKET).expect("a ticket").to_owned();
    let leave = [(TOKEN, HeaderValue::from_str(&token).unwrap())];
    let left = shop.gw(0).send(Method::POST, LEAVE, &leave).await;
    assert_eq!(left.status, StatusCode::OK, "{}", left.text());
    let use_ticket = |i: usize, value: &str| {
        let h = [(TICKET, HeaderValue::from_str(value).unwrap())];
        async move { shop.gw(i).send(Method::POST, "/checkout", &h).await }
    };
    refused(&use_ticket(1, &old).await, "not_admitted", "slot_ended");

    let again = admit(0).await;
    again.handler_saw();
    let new = again.header(&TICKET).expect("a new ticket").to_owned();
    assert_eq!(shop.ticket(&new).session(), shop.ticket(&old).session());
    assert_ne!(shop.ticket(&new).nonce(), shop.ticket(&old).nonce());
    refused(&use_ticket(1, &old).await, "not_admitted", "ticket_invalid");
    passed_on_a_ticket(&use_ticket(1, &new).await);
    refused(&use_ticket(0, &new).await, "ticket_used", "ticket_used");
}

/// A browser checks out on its ticket, then the ticket's record is lost (`lose`: deleted from
/// the store behind its back). Its next heartbeat renews the admission, which had its ticket:
/// the lost record reads as used, so no second ticket is minted, and the checkout refuses the
/// second pass (`ticket_used`), through either gateway.
async fn a_lost_record_never_lets_a_used_ticket_check_out_again<F, Fut>(shop: &Shop, lose: F)
where
    F: Fn(SessionId) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut browser = Browser::admitted(shop).await;
    let ticket = browser.ticket().unwrap().to_owned();
    let session = shop.ticket(&ticket).session();
    passed_on_a_ticket(&browser.checkout(shop, false).await);
    lose(session).await;
    for beat in 1..=2 {
        shop.clock.advance(BEAT);
        let reply = browser.visit(shop, Method::GET, "/").await;
        assert_eq!(reply.handler_saw()["by"], "Store", "beat {beat}");
        assert_eq!(
            reply.cookie_value(TICKET_COOKIE),
            None,
            "beat {beat}: a second ticket"
        );
        refused(
            &browser.checkout(shop, false).await,
            "ticket_used",
            "ticket_used",
        );
        let status = browser.visit(shop, Method::GET, STATUS).await;
        assert_eq!(status.json()["ticket_used"], true, "{}", status.text());
        assert_eq!(status.cookie_value(TICKET_COOKIE), None, "beat {beat}");
    }
    let in_header = [(TICKET, HeaderValue::from_str(&ticket).unwrap())];
    for gw in 0..2 {
        let reply = shop
            .gw(gw)
            .send(Method::POST, "/checkout", &in_header)
            .await;
        refused(&reply, "ticket_used", "ticket_used");
    }
}

async fn every_case(shop: &Shop) {
    an_admission_older_than_active_ttl_checks_out_exactly_once(shop).await;
    a_used_ticket_stays_used_past_the_first_expiry(shop).await;
    after_end_slot_a_new_admission_gets_a_new_ticket(shop).await;
    after_leave_a_new_admission_gets_a_new_ticket(shop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_embedded_store() {
    let clock = clock();
    let store = tower_waiting_room::store::MemoryStore::with_clock(clock.clone());
    every_case(&Shop::on(store, clock).await).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis() {
    let redis = redis_harness::Server::start(&["--save", ""]);
    let clock = clock();
    // The script is sent the manual clock's time (in production it reads Redis `TIME`).
    let store = tower_waiting_room::store::RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(2))
        .manual_clock(clock.clone())
        .build()
        .expect("the store builds");
    every_case(&Shop::on(store, clock).await).await;
}

#[cfg(feature = "testing")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_record_on_the_embedded_store_is_never_a_second_checkout() {
    use tower_waiting_room::testing::conformance::Damage;

    let clock = clock();
    let store = tower_waiting_room::store::MemoryStore::with_clock(clock.clone());
    let shop = Shop::on(store.clone(), clock).await;
    let lose = |s| {
        store.__damage("shop", Damage::TicketLost(s)).unwrap();
        std::future::ready(())
    };
    a_lost_record_never_lets_a_used_ticket_check_out_again(&shop, lose).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_record_on_redis_is_never_a_second_checkout() {
    let redis = redis_harness::Server::start(&["--save", ""]);
    let clock = clock();
    let store = tower_waiting_room::store::RedisStore::builder()
        .url(redis.url())
        .prefix("lost")
        .timeout(Duration::from_secs(2))
        .manual_clock(clock.clone())
        .build()
        .expect("the store builds");
    let shop = Shop::on(store, clock).await;
    let conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let lose = |s: SessionId| {
        let mut conn = conn.clone();
        async move {
            let key = format!("lost:{{shop}}:tk:{s}");
            let deleted: u32 = redis::cmd("DEL")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(deleted, 1, "{key}");
        }
    };
    a_lost_record_never_lets_a_used_ticket_check_out_again(&shop, lose).await;
}
