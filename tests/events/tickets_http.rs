//! Single-use tickets over real HTTP on loopback: minted when the store admits a visitor, handed
//! out by the status endpoint, never in JSON a browser's page scripts could read. (Redeeming one
//! at a gated route is in `tests/events/tickets_gate.rs`, the redeem step's answers in
//! `tests/events/tickets_redeem.rs`, what each mint is for in `tests/events/tickets_mint.rs`,
//! and the store's exactly-once across gateways in `tests/redis/tickets_redis.rs`.)

use crate::common;

use std::time::Duration;

use http::header::{HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::__private::AdmissionTicket;
use tower_waiting_room::clock::Clock;
use tower_waiting_room::store::{Redeemed, TicketStore};
use tower_waiting_room::WaitingRoomLayer;

use common::*;

const TICKET_HEADER: &str = "x-admission-ticket";

async fn site() -> Site {
    Site::start(
        WaitingRoomLayer::builder("tix")
            .capacity(10)
            .single_use_tickets(true),
    )
    .await
}

fn ticket(site: &Site, value: &str) -> AdmissionTicket {
    AdmissionTicket::verify(&keys(), &site.room(), value, site.clock.now_ms())
        .unwrap_or_else(|| panic!("not a valid ticket: {value}"))
}

#[tokio::test]
async fn a_browser_gets_an_httponly_ticket_cookie_at_admission_and_from_status() {
    let site = site().await;
    let mut jar = site.arrive("/").await;
    let admitted = site.http.visit(&mut jar, Method::GET, "/").await;
    admitted.handler_saw();
    let set = admitted
        .set_cookie("wr_tix_t")
        .expect("a ticket cookie at admission");
    let attrs = attrs_of(&set);
    for attr in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/"] {
        assert!(attrs.iter().any(|a| a == attr), "{attr} missing: {set}");
    }
    let active = site.layer.config().policy().active_ttl_ms / 1000;
    assert_eq!(max_age_of(&set), Some(active), "{set}");
    assert!(
        admitted.header(TICKET_HEADER).is_none(),
        "browsers get no header"
    );
    let first = ticket(&site, cookie_value_of(&set));
    let token = admission_value(&jar, &site);
    assert_eq!(first.session().to_string(), session_in(&token));

    // The status endpoint: admitted, the same ticket as a cookie, nothing in the JSON.
    let status = site
        .http
        .visit(&mut jar, Method::GET, &site.status_path())
        .await;
    assert_eq!(status.status, StatusCode::OK);
    let body = status.json();
    assert_eq!(body["state"], "admitted");
    assert!(body.get("ticket").is_none(), "{body}");
    let again = ticket(&site, &status.cookie_value("wr_tix_t").unwrap());
    assert_eq!(again.nonce(), first.nonce());
    assert_eq!(again.expires_at_ms(), first.expires_at_ms());

    // Used (as a gate would use it): the status says so and hands out nothing.
    let policy = site.layer.config().policy().clone();
    let used = site
        .store
        .redeem_ticket(&policy, first.session(), first.nonce())
        .await
        .unwrap();
    assert_eq!(used, Redeemed::Accepted);
    let status = site
        .http
        .visit(&mut jar, Method::GET, &site.status_path())
        .await;
    assert_eq!(status.json()["ticket_used"], true, "{}", status.json());
    assert!(status.set_cookie("wr_tix_t").is_none());

    // A heartbeat (past refresh) extends the slot, and the used ticket's record with it (a
    // mint, answered "used"): no new ticket.
    site.clock.advance(Duration::from_secs(20));
    let beat = site.http.visit(&mut jar, Method::GET, "/").await;
    beat.handler_saw();
    assert!(beat.set_cookie(&site.a()).is_some(), "a renewed token");
    assert!(beat.set_cookie("wr_tix_t").is_none());
}

/// The admission cookie's value in the jar.
fn admission_value(jar: &Jar, site: &Site) -> String {
    jar.get(&site.a()).expect("an admission cookie").to_owned()
}

#[tokio::test]
async fn a_header_client_gets_the_ticket_in_a_header_and_in_the_status_json() {
    let site = site().await;
    let first = site.http.send(Method::GET, "/", &[]).await;
    let queue = first.header("waiting-room-session").unwrap().to_owned();
    let session = [(
        HeaderName::from_static("waiting-room-session"),
        HeaderValue::from_str(&queue).unwrap(),
    )];
    let admitted = site.http.send(Method::GET, "/", &session).await;
    admitted.handler_saw();
    let value = admitted.header(TICKET_HEADER).expect("the ticket header");
    let minted = ticket(&site, value);
    let token = [(
        HeaderName::from_static("waiting-room-token"),
        HeaderValue::from_str(admitted.header("waiting-room-token").unwrap()).unwrap(),
    )];
    let status = site
        .http
        .send(Method::GET, &site.status_path(), &token)
        .await;
    assert_eq!(status.status, StatusCode::OK);
    let body = status.json();
    assert_eq!(body["state"], "admitted");
    let in_json = body["ticket"].as_str().expect("the ticket in the JSON");
    assert_eq!(ticket(&site, in_json).nonce(), minted.nonce());
    assert_eq!(status.header(TICKET_HEADER), Some(in_json));
}

#[tokio::test]
async fn a_status_the_store_cannot_mint_for_still_says_admitted() {
    let site = site().await;
    let mut jar = site.arrive("/").await;
    // The visitor is admitted by the store; then the store fails before the ticket is minted:
    // the status endpoint cannot hand one out, and says "admitted" all the same.
    let admitted = site.http.visit(&mut jar, Method::GET, "/").await;
    admitted.handler_saw();
    jar.remove("wr_tix_t");
    site.store
        .fail_with(Some(tower_waiting_room::store::StoreErrorKind::Unavailable));
    let status = site
        .http
        .visit(&mut jar, Method::GET, &site.status_path())
        .await;
    assert_eq!(status.status, StatusCode::OK);
    assert_eq!(status.json()["state"], "admitted");
    assert!(status.set_cookie("wr_tix_t").is_none());
    // Back: the ticket is handed out.
    site.store.fail_with(None);
    let status = site
        .http
        .visit(&mut jar, Method::GET, &site.status_path())
        .await;
    assert!(status.set_cookie("wr_tix_t").is_some());
}
