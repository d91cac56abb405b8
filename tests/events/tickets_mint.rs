//! When a ticket is minted, and what for, through the layer with the store's ticket calls
//! counted: an admission's mint is [`MintFor::Admission`], every later one of the same admission
//! (the status endpoint, a heartbeat) a [`MintFor::Renewal`] that finds the same ticket and
//! extends it with the slot, or says it was used. A failed mint still admits, and no renewal
//! makes the ticket up later. A room without tickets mints nothing, and a store without them
//! cannot back a room that mints. (Over real HTTP and over a ticket's whole lifetime:
//! `tickets_http.rs`, `tickets_lifetime.rs`.)

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderName, HeaderValue};
use http::{Method, StatusCode};
use serde_json::Value;
use tower_waiting_room::store::{
    Decision, MemoryStore, MintFor, RoomStats, SettingsChange, SettingsUpdate, Store, StoreFuture,
};
use tower_waiting_room::{ConfigError, RoomPolicy, SessionId};

use super::ticket_store::*;

#[tokio::test(flavor = "current_thread")]
async fn the_status_endpoint_hands_out_the_admissions_ticket_until_it_is_used() {
    let shop = Shop::new();
    let (token, ticket) = shop.admitted_browser().await;
    let ticket = shop.ticket(&ticket.unwrap());
    let res = shop.status(&token).await;
    assert_eq!(res.status, StatusCode::OK);
    let body = res.json();
    assert_eq!(body["state"], "admitted");
    // A browser's ticket is never in the JSON (page scripts could read it), nor a header.
    assert!(body.get("ticket").is_none(), "{body}");
    assert!(res.headers.get(TICKET).is_none());
    let found = res.cookie_value("wr_shop_t").unwrap();
    // The admission's one ticket, found (a renewal's mint), as often as it is asked.
    for res in [res, shop.status(&token).await] {
        let same = shop.ticket(&res.cookie_value("wr_shop_t").unwrap());
        assert_eq!(same.nonce(), ticket.nonce());
    }
    let want = [MintFor::Admission, MintFor::Renewal, MintFor::Renewal];
    assert_eq!(shop.store.minted_for(), want);
    // Used: the status says so, and sets no ticket.
    passed(&shop.checkout_with_cookie(&found).await, ticket.session());
    let used = shop.status(&token).await;
    let body = used.json();
    assert_eq!(body["state"], "admitted");
    assert_eq!(body["ticket_used"], true, "{body}");
    assert_eq!(used.cookie_value("wr_shop_t"), None);
}

/// A failed mint at admission still admits, without a ticket. No later renewal (the status
/// endpoint, a heartbeat) makes one up: it cannot tell a record never made from one lost
/// after its ticket was used, so it says "used". The next admission gets a ticket.
#[tokio::test(flavor = "current_thread")]
async fn a_failed_mint_still_admits_and_no_renewal_makes_the_ticket_up_later() {
    let shop = Shop::new();
    let first = shop.send(Method::GET, "/", &[]).await;
    let queue = format!("wr_shop_q={}", first.cookie_value("wr_shop_q").unwrap());
    shop.store.fail_tickets(true);
    let res = shop.with_cookie(Method::GET, "/", &queue).await;
    assert_eq!(res.status, StatusCode::OK, "admitted: {}", res.text());
    assert_eq!(
        res.cookie_value("wr_shop_t"),
        None,
        "no ticket: the mint failed"
    );
    let token = res.cookie_value("wr_shop_a").unwrap();
    shop.store.fail_tickets(false);
    let res = shop.status(&token).await;
    assert_eq!(res.status, StatusCode::OK);
    let body = res.json();
    assert_eq!(body["state"], "admitted");
    assert_eq!(body["ticket_used"], true, "{body}");
    assert_eq!(res.cookie_value("wr_shop_t"), None);
    // Leaves, and is admitted again: a ticket for the new admission.
    shop.leave(&token).await;
    let res = shop.with_cookie(Method::GET, "/", &queue).await;
    assert_eq!(res.status, StatusCode::OK, "admitted again: {}", res.text());
    let ticket = res
        .cookie_value("wr_shop_t")
        .expect("a ticket for the next admission");
    let session = shop.ticket(&ticket).session();
    passed(&shop.checkout_with_cookie(&ticket).await, session);
}

/// A used ticket whose record is then lost (evicted, deleted) is not minted afresh at the
/// visitor's next heartbeat: the heartbeat's mint is a renewal, so the lost record reads as
/// used, and the ticket never passes a second time.
#[cfg(feature = "testing")]
#[tokio::test(flavor = "current_thread")]
async fn a_used_ticket_whose_record_is_lost_does_not_pass_again_after_a_heartbeat() {
    use tower_waiting_room::testing::conformance::Damage;

    let shop = Shop::new();
    let (token, ticket) = shop.admitted_browser().await;
    let ticket = ticket.unwrap();
    let session = shop.ticket(&ticket).session();
    passed(&shop.checkout_with_cookie(&ticket).await, session);
    shop.store
        .inner
        .__damage("shop", Damage::TicketLost(session))
        .unwrap();
    shop.clock.advance(Duration::from_secs(20));
    let res = shop.heartbeat(&token).await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    assert!(res.cookie_value("wr_shop_a").is_some(), "a fresh token");
    assert_eq!(res.cookie_value("wr_shop_t"), None, "no second ticket");
    assert_eq!(
        shop.store.minted_for(),
        [MintFor::Admission, MintFor::Renewal]
    );
    let replay = shop.checkout_with_cookie(&ticket).await;
    refused(&replay, StatusCode::FORBIDDEN, &used());
}

#[tokio::test(flavor = "current_thread")]
async fn header_clients_get_the_ticket_in_a_header_and_in_the_status_json() {
    let shop = Shop::new();
    let session = HeaderName::from_static("waiting-room-session");
    let token = HeaderName::from_static("waiting-room-token");
    let first = shop.send(Method::GET, "/", &[]).await;
    let queue = HeaderValue::from_str(first.header(&session).expect("a place")).unwrap();
    let res = shop.send(Method::GET, "/", &[(session, queue)]).await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    let ticket = res.header(&TICKET).expect("the ticket header").to_owned();
    let token_value = HeaderValue::from_str(res.header(&token).unwrap()).unwrap();
    let status = shop
        .send(Method::GET, STATUS, &[(token, token_value)])
        .await;
    let body: Value = status.json();
    assert_eq!(body["state"], "admitted");
    assert_eq!(body["ticket"], ticket.as_str(), "{body}");
    assert_eq!(status.header(&TICKET), Some(ticket.as_str()));
    let session = shop.ticket(&ticket).session();
    passed(&shop.checkout_with_header(&ticket).await, session);
    let replay = shop.checkout_with_header(&ticket).await;
    refused(&replay, StatusCode::FORBIDDEN, &used());
}

#[tokio::test(flavor = "current_thread")]
async fn heartbeats_extend_the_same_ticket_and_tickets_off_mint_nothing() {
    let shop = Shop::new();
    let (mut token, ticket) = shop.admitted_browser().await;
    let mut ticket = ticket.unwrap();
    let first = shop.ticket(&ticket);
    assert_eq!(shop.store.mints(), 1);
    // Past refresh: a heartbeat extends the slot, and re-issues the same ticket (same
    // nonce) with the slot's new expiry, three times over.
    let mut expires = first.expires_at_ms();
    for beat in 1..=3 {
        shop.clock.advance(Duration::from_secs(20));
        let res = shop.heartbeat(&token).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        token = res.cookie_value("wr_shop_a").expect("a fresh token");
        ticket = res.cookie_value("wr_shop_t").expect("the ticket");
        let renewed = shop.ticket(&ticket);
        assert_eq!(renewed.nonce(), first.nonce(), "the same ticket");
        assert_eq!(renewed.expires_at_ms(), shop.token(&token).expires_at_ms());
        assert!(renewed.expires_at_ms() > expires, "beat {beat}: extended");
        expires = renewed.expires_at_ms();
        assert_eq!(shop.store.mints(), 1 + beat);
    }
    // A failed mint: the visitor passes with a fresh token, without a ticket cookie.
    shop.store.fail_tickets(true);
    shop.clock.advance(Duration::from_secs(20));
    let res = shop.heartbeat(&token).await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    token = res.cookie_value("wr_shop_a").expect("a fresh token");
    assert_eq!(res.cookie_value("wr_shop_t"), None);
    assert_eq!(shop.store.mints(), 5);
    shop.store.fail_tickets(false);
    // Used: a heartbeat still extends the record (a mint) but sets no ticket.
    passed(&shop.checkout_with_cookie(&ticket).await, first.session());
    shop.clock.advance(Duration::from_secs(20));
    let res = shop.heartbeat(&token).await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    assert!(res.cookie_value("wr_shop_a").is_some(), "a fresh token");
    assert_eq!(res.cookie_value("wr_shop_t"), None);
    assert_eq!(shop.store.mints(), 6);
    // The admission's mint, then every heartbeat's a renewal.
    let minted_for = shop.store.minted_for();
    assert_eq!(minted_for[0], MintFor::Admission);
    assert!(minted_for[1..].iter().all(|m| *m == MintFor::Renewal));

    let off = Shop::on(
        builder().single_use_tickets(false),
        &shop.store,
        &shop.clock,
    );
    let (token, ticket) = off.admitted_browser().await;
    assert_eq!(ticket, None);
    let res = off.status(&token).await;
    assert_eq!(res.status, StatusCode::OK);
    assert_eq!(res.cookie_value("wr_shop_t"), None);
    assert_eq!(shop.store.mints(), 6);
}

#[test]
fn a_store_without_tickets_is_refused_at_build() {
    struct Plain(MemoryStore);
    impl Store for Plain {
        fn enter(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
            self.0.enter(p, s)
        }
        fn poll(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
            self.0.poll(p, s)
        }
        fn heartbeat(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
            self.0.heartbeat(p, s)
        }
        fn release(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<bool> {
            self.0.release(p, s)
        }
        fn stats(&self, p: &RoomPolicy) -> StoreFuture<RoomStats> {
            self.0.stats(p)
        }
        fn configure(&self, p: &RoomPolicy, c: SettingsChange) -> StoreFuture<SettingsUpdate> {
            self.0.configure(p, c)
        }
        fn admit_next(&self, p: &RoomPolicy, n: u32) -> StoreFuture<u64> {
            self.0.admit_next(p, n)
        }
        fn ban(&self, p: &RoomPolicy, s: SessionId, until: u64) -> StoreFuture<bool> {
            self.0.ban(p, s, until)
        }
    }
    let plain = || Plain(MemoryStore::with_clock(common::clock()));
    let err = builder().store(plain()).build().err();
    assert_eq!(err, Some(ConfigError::StoreWithoutTickets));
    assert!(builder()
        .single_use_tickets(false)
        .store(plain())
        .build()
        .is_ok());
    // It offers no tickets: nothing to call that could answer wrongly.
    assert!(Arc::new(plain()).tickets().is_none());
}
