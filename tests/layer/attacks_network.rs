//! Network binding of admission tokens (`bind_tokens_to_network(true)`), over real HTTP: a token
//! admits from the IPv4 /24 or IPv6 /48 it was issued to, and from anywhere else it is no token
//! at all: no fast path; with the queue cookie the request goes to the store (which keeps the
//! visitor's slot), without it the visitor starts over. The client IP comes from a trusted
//! `X-Forwarded-For` header; time is a `ManualClock`.

use crate::common;

use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::WaitingRoomLayer;

use common::*;

const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");

fn from(ip: &str) -> Vec<(HeaderName, HeaderValue)> {
    vec![(XFF, HeaderValue::from_str(ip).unwrap())]
}

async fn site(bind: bool) -> Site {
    Site::start(
        WaitingRoomLayer::builder("net")
            .capacity(5)
            .client_ip_header("x-forwarded-for")
            .bind_tokens_to_network(bind),
    )
    .await
}

/// Another gateway of the same room (same secret, store and clock) built from `builder`.
async fn sibling(of: &Site, builder: tower_waiting_room::WaitingRoomBuilder) -> Site {
    let layer = builder
        .secret(SECRET)
        .clock(of.clock.clone())
        .store(of.store.clone())
        .build()
        .unwrap();
    let http = serve(app(layer.clone())).await;
    Site {
        layer,
        store: of.store.clone(),
        clock: of.clock.clone(),
        http,
    }
}

/// A visitor who arrives from `ip` and is let in by the store; returns the jar (queue cookie
/// and admission token).
async fn admit_from(site: &Site, ip: &str) -> Jar {
    let mut jar = Jar::new();
    let r = site
        .http
        .visit_with(&mut jar, Method::GET, "/", &from(ip))
        .await;
    assert_eq!(r.status, StatusCode::FOUND, "{r:?}");
    let r = site
        .http
        .visit_with(&mut jar, Method::GET, "/", &from(ip))
        .await;
    assert_eq!(r.handler_saw()["by"], "Store");
    assert!(jar.get(&site.a()).is_some(), "no admission cookie: {r:?}");
    jar
}

/// The jar with only the admission token (as copied to someone else).
fn token_only(site: &Site, jar: &Jar) -> Jar {
    let mut copy = Jar::new();
    copy.set(&site.a(), jar.get(&site.a()).unwrap());
    copy
}

/// `ip` uses the token on the fast path: the handler, `by: Token`, no store call.
async fn fast_path(site: &Site, jar: &Jar, ip: Option<&str>, what: &str) {
    let calls = site.store.calls();
    let mut jar = jar.clone();
    let headers = ip.map(from).unwrap_or_default();
    let r = site
        .http
        .visit_with(&mut jar, Method::GET, "/", &headers)
        .await;
    assert_eq!(r.handler_saw()["by"], "Token", "{what}");
    assert_eq!(site.store.calls(), calls, "{what}: the store was asked");
}

/// From `ip` the token is no token: with only the token, a first visit (new queue cookie, no
/// store call); with the queue cookie too, the store is asked and finds the slot (same session,
/// a fresh token, nobody else let in).
async fn refused(site: &Site, jar: &Jar, ip: Option<&str>, what: &str) {
    let headers = ip.map(from).unwrap_or_default();
    let stats = site.stats().await;

    let calls = site.store.calls();
    let mut copy = token_only(site, jar);
    let r = site
        .http
        .visit_with(&mut copy, Method::GET, "/", &headers)
        .await;
    assert_eq!(r.status, StatusCode::FOUND, "{what}: token only: {r:?}");
    assert!(
        r.cookie_value(&site.q()).is_some(),
        "{what}: no new queue cookie"
    );
    assert_eq!(
        site.store.calls(),
        calls,
        "{what}: token only reached the store"
    );

    // In the token header (clients without cookies) it is refused the same way.
    let token = jar.get(&site.a()).unwrap();
    let mut h = headers.clone();
    h.push((
        HeaderName::from_static("waiting-room-token"),
        HeaderValue::from_str(token).unwrap(),
    ));
    let r = site.http.send(Method::GET, "/", &h).await;
    assert_eq!(r.status, StatusCode::FOUND, "{what}: token header: {r:?}");
    assert_eq!(
        site.store.calls(),
        calls,
        "{what}: token header reached the store"
    );

    let mut full = jar.clone();
    let r = site
        .http
        .visit_with(&mut full, Method::GET, "/", &headers)
        .await;
    let saw = r.handler_saw();
    assert_eq!(saw["by"], "Store", "{what}: with the queue cookie");
    assert_eq!(
        saw["session"].as_str().unwrap(),
        session_in(jar.get(&site.a()).unwrap()),
        "{what}: another session"
    );
    let after = site.store.calls();
    assert_eq!(after.enter, calls.enter + 1, "{what}: stage 3 not asked");
    assert_eq!(after.heartbeat, calls.heartbeat, "{what}: heartbeat");
    let fresh = r.cookie_value(&site.a()).expect("a fresh token");
    assert_ne!(fresh, jar.get(&site.a()).unwrap());
    same_inside(stats, site.stats().await, what);
}

#[tokio::test]
async fn an_ipv4_token_admits_from_its_24_only() {
    let site = site(true).await;
    let jar = admit_from(&site, "203.0.113.7").await;
    let token = jar.get(&site.a()).unwrap().to_owned();
    assert_eq!(token.split('.').count(), 7, "not bound: {token}");

    fast_path(&site, &jar, Some("203.0.113.7"), "same address").await;
    fast_path(&site, &jar, Some("203.0.113.99"), "same /24").await;
    fast_path(
        &site,
        &token_only(&site, &jar),
        Some("203.0.113.200"),
        "copy on same /24",
    )
    .await;
    fast_path(&site, &jar, Some("::ffff:203.0.113.50"), "IPv4-mapped").await;
    // A spoofed left-most entry is not the client's address: the right-most one is.
    fast_path(&site, &jar, Some("198.51.100.7, 203.0.113.8"), "right-most").await;

    refused(&site, &jar, Some("198.51.100.7"), "another network").await;
    refused(&site, &jar, Some("203.0.112.7"), "the neighbouring /24").await;
    refused(
        &site,
        &jar,
        Some("203.0.113.7, 198.51.100.7"),
        "right-most other",
    )
    .await;
    refused(&site, &jar, None, "no client IP").await;

    // The token itself never changed: still good at home.
    fast_path(&site, &jar, Some("203.0.113.7"), "back home").await;
}

#[tokio::test]
async fn moving_networks_keeps_the_slot_with_the_queue_cookie() {
    let site = site(true).await;
    let mut jar = admit_from(&site, "203.0.113.7").await;
    // Wi-Fi to mobile data: one store call, the same slot, a token for the new network.
    let r = site
        .http
        .visit_with(&mut jar, Method::GET, "/", &from("198.51.100.7"))
        .await;
    assert_eq!(r.handler_saw()["by"], "Store");
    assert_eq!(site.stats().await.admitted, 1);
    fast_path(&site, &jar, Some("198.51.100.42"), "new network").await;
    refused(&site, &jar, Some("203.0.113.7"), "the old network").await;
}

#[tokio::test]
async fn an_ipv6_token_admits_from_its_48_only() {
    let site = site(true).await;
    let jar = admit_from(&site, "2001:db8:1:2::7").await;
    fast_path(&site, &jar, Some("2001:db8:1:2::7"), "same address").await;
    fast_path(&site, &jar, Some("2001:db8:1:ffff::9"), "same /48").await;
    fast_path(&site, &jar, Some("[2001:db8:1::1]:443"), "with a port").await;
    refused(&site, &jar, Some("2001:db8:2::7"), "another /48").await;
    refused(&site, &jar, Some("203.0.113.7"), "IPv4").await;
}

#[tokio::test]
async fn without_binding_a_token_admits_from_anywhere() {
    let site = site(false).await;
    let jar = admit_from(&site, "203.0.113.7").await;
    assert_eq!(jar.get(&site.a()).unwrap().split('.').count(), 6);
    for ip in [
        Some("203.0.113.7"),
        Some("198.51.100.7"),
        Some("2001:db8:2::7"),
        None,
    ] {
        fast_path(&site, &jar, ip, &format!("{ip:?}")).await;
        fast_path(&site, &token_only(&site, &jar), ip, &format!("copy {ip:?}")).await;
    }
}

#[tokio::test]
async fn turning_binding_on_or_off_keeps_the_slot() {
    // One room, one secret, one store behind two gateways: one binds, one does not.
    let bound = site(true).await;
    let unbound = sibling(
        &bound,
        WaitingRoomLayer::builder("net")
            .capacity(5)
            .client_ip_header("x-forwarded-for"),
    )
    .await;
    // An unbound token is no token where binding is on (the queue cookie keeps the slot)...
    let old = admit_from(&unbound, "203.0.113.7").await;
    refused(&bound, &old, Some("203.0.113.7"), "unbound token").await;
    // ...and a bound token admits from anywhere where binding is off.
    let new = admit_from(&bound, "203.0.113.7").await;
    fast_path(
        &unbound,
        &new,
        Some("198.51.100.7"),
        "bound token, binding off",
    )
    .await;
}

#[tokio::test]
async fn unknown_client_ip_binds_to_unknown() {
    // No header, no extractor, no peer address in the extensions: the IP is unknown.
    let blind = Site::start(
        WaitingRoomLayer::builder("net")
            .capacity(5)
            .bind_tokens_to_network(true),
    )
    .await;
    let jar = blind.admit().await;
    let token = jar.get(&blind.a()).unwrap().to_owned();
    assert!(token.contains(".u."), "not bound to unknown: {token}");
    fast_path(&blind, &jar, None, "unknown again").await;

    // Where the IP is known, a token bound to "unknown" admits only requests without one.
    let site = sibling(
        &blind,
        WaitingRoomLayer::builder("net")
            .capacity(5)
            .client_ip_header("x-forwarded-for")
            .bind_tokens_to_network(true),
    )
    .await;
    fast_path(&site, &jar, None, "no header").await;
    refused(&site, &jar, Some("203.0.113.7"), "known IP").await;
    let r = site
        .http
        .send(
            Method::GET,
            "/",
            &[(header::COOKIE, cookie(&site.a(), &token))],
        )
        .await;
    assert_eq!(r.handler_saw()["by"], "Token");
}
