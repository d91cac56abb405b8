//! The redeem step of a gated route, through the layer, with the store's ticket calls counted:
//! each kind of ticket gets its answer (`src/room/ticket.rs`'s module docs list them), byte for
//! byte; a ticket refused at the gateway (missing, forged, tampered, other-room, expired) costs
//! no store call, one the store refuses (used, slot ended) does; and a store failure is `503`
//! under either fail policy and uses nothing. (Real HTTP, several gateways and Redis are in
//! `tickets_gate.rs`.)

use crate::common;

use std::time::Duration;

use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::clock::Clock;
use tower_waiting_room::{FailPolicy, Keyring, SigningKey};

use super::ticket_store::*;

#[tokio::test(flavor = "current_thread")]
async fn an_admission_mints_a_ticket_that_passes_exactly_once() {
    let shop = Shop::new();
    let (token, ticket) = shop.admitted_browser().await;
    let ticket = ticket.expect("a ticket cookie at admission");
    assert_eq!(shop.store.mints(), 1);
    let t = shop.ticket(&ticket);
    let token = shop.token(&token);
    assert_eq!(t.session(), token.session());
    assert_eq!(
        t.expires_at_ms(),
        token.expires_at_ms(),
        "expires with the slot"
    );

    let pass = shop.checkout_with_cookie(&ticket).await;
    passed(&pass, t.session());
    // The used ticket's cookie stays, so the browser's next use is told `ticket_used`.
    assert!(pass.set_cookies().is_empty(), "{:?}", pass.set_cookies());
    for _ in 0..3 {
        let replay = shop.checkout_with_cookie(&ticket).await;
        refused(&replay, StatusCode::FORBIDDEN, &used());
        let by_header = shop.checkout_with_header(&ticket).await;
        refused(&by_header, StatusCode::FORBIDDEN, &used());
    }
    assert_eq!(shop.store.redeems(), 7);
}

/// The ticket header may carry several values (an admission token as well as the ticket):
/// the ticket is found among them, whichever comes first, and used once.
#[tokio::test(flavor = "current_thread")]
async fn the_ticket_is_found_among_several_header_values() {
    let shop = Shop::new();
    let (token, ticket) = shop.admitted_browser().await;
    let ticket = ticket.expect("a ticket cookie at admission");
    let t = shop.ticket(&ticket);
    let both = [
        (TICKET, HeaderValue::from_str(&token).unwrap()),
        (TICKET, HeaderValue::from_static("t1.not.a.ticket")),
        (TICKET, HeaderValue::from_str(&ticket).unwrap()),
    ];
    passed(&shop.checkout(&both).await, t.session());
    refused(&shop.checkout(&both).await, StatusCode::FORBIDDEN, &used());
}

#[tokio::test(flavor = "current_thread")]
async fn bad_tickets_get_403_with_the_reason_and_no_store_call() {
    let shop = Shop::new();
    let (_, ticket) = shop.admitted_browser().await;
    let ticket = ticket.unwrap();
    let missing = &not_admitted("ticket_missing");
    let invalid = &not_admitted("ticket_invalid");
    let expired = &not_admitted("ticket_expired");
    let forbidden = StatusCode::FORBIDDEN;

    refused(&shop.checkout(&[]).await, forbidden, missing);
    // An admission token in the ticket header is not a ticket.
    let token_header = shop.checkout_with_header("a1.test.0.0.0.x").await;
    refused(&token_header, forbidden, missing);

    // Tampered: every byte of the ticket changed in turn. In the header, a value that no
    // longer starts `t1.` is no ticket (the header may carry other values on gated routes).
    for i in 0..ticket.len() {
        let mut bytes = ticket.clone().into_bytes();
        bytes[i] = if bytes[i] == b'0' { b'1' } else { b'0' };
        let tampered = String::from_utf8(bytes).unwrap();
        refused(
            &shop.checkout_with_cookie(&tampered).await,
            forbidden,
            invalid,
        );
        let in_header = if i < 3 { missing } else { invalid };
        refused(
            &shop.checkout_with_header(&tampered).await,
            forbidden,
            in_header,
        );
    }
    // Junk under the cookie's name; a ticket of another room (not behind this layer); a
    // forged one (the room's key id, another key).
    refused(&shop.checkout_with_cookie("junk").await, forbidden, invalid);
    let t = shop.ticket(&ticket);
    let elsewhere = t.sign(&common::keys(), "other");
    refused(
        &shop.checkout_with_cookie(&elsewhere).await,
        forbidden,
        invalid,
    );
    let forger = Keyring::new(SigningKey::new("k1", [1u8; 32]).unwrap());
    let forged = t.sign(&forger, "shop");
    refused(
        &shop.checkout_with_header(&forged).await,
        forbidden,
        invalid,
    );
    assert_eq!(shop.store.redeems(), 0, "no store call");

    // Expired: told apart, still no store call; a junk value beside it does not hide it.
    let now = shop.clock.now_ms();
    shop.clock
        .advance(Duration::from_millis(t.expires_at_ms() - now));
    refused(
        &shop.checkout_with_cookie(&ticket).await,
        forbidden,
        expired,
    );
    let both = format!("wr_shop_t=junk; wr_shop_t={ticket}");
    let both = shop.with_cookie(Method::POST, "/checkout", &both).await;
    refused(&both, forbidden, expired);
    assert_eq!(shop.store.redeems(), 0, "no store call");
}

#[tokio::test(flavor = "current_thread")]
async fn the_ticket_of_a_visitor_who_left_is_refused_and_stays_unused() {
    let shop = Shop::new();
    let (token, ticket) = shop.admitted_browser().await;
    let ticket = ticket.unwrap();
    shop.leave(&token).await;
    let slot_ended = &not_admitted("slot_ended");
    for _ in 0..2 {
        let reply = shop.checkout_with_cookie(&ticket).await;
        refused(&reply, StatusCode::FORBIDDEN, slot_ended);
    }
    assert_eq!(shop.store.redeems(), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn a_valid_ticket_beside_junk_is_found() {
    let shop = Shop::new();
    let (_, ticket) = shop.admitted_browser().await;
    let ticket = ticket.unwrap();
    let session = shop.ticket(&ticket).session();
    // A planted cookie of the same name first, and junk in the header: the real one counts.
    let cookie = format!("wr_shop_t=t1.x; wr_shop_t={ticket}");
    let headers = [
        (header::COOKIE, HeaderValue::from_str(&cookie).unwrap()),
        (TICKET, HeaderValue::from_static("t1.junk")),
    ];
    passed(&shop.checkout(&headers).await, session);
}

#[tokio::test(flavor = "current_thread")]
async fn a_store_failure_on_redeem_is_503_under_either_policy_and_keeps_the_ticket() {
    for policy in [FailPolicy::Open, FailPolicy::Closed] {
        let clock = common::clock();
        let store = TicketCalls::on(&clock);
        let shop = Shop::on(builder().fail_policy(policy), &store, &clock);
        let (_, ticket) = shop.admitted_browser().await;
        let ticket = ticket.unwrap();
        store.fail_tickets(true);
        let reply = shop.checkout_with_cookie(&ticket).await;
        assert_eq!(
            reply.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{policy:?}: a ticket passed without the store? {}",
            reply.text()
        );
        assert!(reply.headers.contains_key(header::RETRY_AFTER));
        // Nothing was used: once the store is back, the ticket passes, once.
        store.fail_tickets(false);
        let session = shop.ticket(&ticket).session();
        passed(&shop.checkout_with_cookie(&ticket).await, session);
        let replay = shop.checkout_with_cookie(&ticket).await;
        refused(&replay, StatusCode::FORBIDDEN, &used());
    }
}
