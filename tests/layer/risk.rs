//! The risk decision for new visitors, over real HTTP: with proof of work on and no hook of the
//! app's, the default scorer sends a browser-like visitor straight to the line, makes a scripted
//! client solve the challenge first, and refuses an address the operator listed; the app's hook
//! decides instead when it gives one (everyone challenged, or refused by its own rule); listed
//! networks refuse without proof of work too. A refusal is `403` with a JSON body (a page for
//! browsers), no cookie and no store call.

use crate::common;

use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::defences::proof_of_work::{solve, ProofOfWork, PROOF_HEADER};
use tower_waiting_room::defences::risk::Risk;
use tower_waiting_room::{ConfigError, WaitingRoomBuilder, WaitingRoomLayer};

use common::*;

const DIFFICULTY: u8 = 8;

fn pow_room() -> WaitingRoomBuilder {
    WaitingRoomLayer::builder("risk")
        .capacity(5)
        .proof_of_work(ProofOfWork::new(DIFFICULTY))
}

/// A browser's first request, its headers in a browser's order: `Host` first, a `User-Agent`,
/// `Accept` before `Accept-Encoding`, an `Accept-Language`.
fn browser(site: &Site) -> Vec<(HeaderName, HeaderValue)> {
    vec![
        (
            header::HOST,
            HeaderValue::from_str(&site.http.addr.to_string()).unwrap(),
        ),
        (
            header::USER_AGENT,
            HeaderValue::from_static(
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/156.0.0.0 Safari/537.36",
            ),
        ),
        (
            header::ACCEPT,
            HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
        ),
        (header::ACCEPT_ENCODING, HeaderValue::from_static("gzip")),
        (
            header::ACCEPT_LANGUAGE,
            HeaderValue::from_static("en-US,en;q=0.9"),
        ),
    ]
}

/// A scripted client's first request, as curl sends it: no `Accept-Language`.
fn curl(site: &Site) -> Vec<(HeaderName, HeaderValue)> {
    vec![
        (
            header::HOST,
            HeaderValue::from_str(&site.http.addr.to_string()).unwrap(),
        ),
        (header::USER_AGENT, HeaderValue::from_static("curl/8.5.0")),
        (header::ACCEPT, HeaderValue::from_static("*/*")),
    ]
}

fn forwarded_for(ip: &'static str) -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_static("x-forwarded-for"),
        HeaderValue::from_static(ip),
    )
}

/// A first visit with `headers`: the redirect, and the jar with the queue cookie.
async fn first_visit(site: &Site, headers: &[(HeaderName, HeaderValue)]) -> Jar {
    let mut jar = Jar::new();
    let r = site
        .http
        .visit_with(&mut jar, Method::GET, "/", headers)
        .await;
    assert_eq!(r.status, StatusCode::FOUND, "{r:?}");
    assert!(jar.get(&site.q()).is_some(), "no queue cookie: {r:?}");
    jar
}

fn is_proven(site: &Site, jar: &Jar) -> bool {
    jar.get(&site.q()).unwrap().starts_with("p1.")
}

/// Asserts a refusal: `403`, state `refused`, `Retry-After: 300`, no cookie.
fn assert_refused(r: &Reply, what: &str) {
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{what}: {r:?}");
    assert_eq!(r.json()["state"], "refused", "{what}");
    assert_eq!(r.retry_after(), 300, "{what}");
    assert!(r.set_cookies().is_empty(), "{what}: {r:?}");
}

#[tokio::test]
async fn with_proof_of_work_and_no_hook_a_browser_joins_the_line_with_no_challenge() {
    let site = Site::start(pow_room()).await;
    let mut jar = first_visit(&site, &browser(&site)).await;
    assert!(
        is_proven(&site, &jar),
        "a low-risk visitor's cookie is issued cleared"
    );
    let r = site.http.visit(&mut jar, Method::GET, "/").await;
    assert_eq!(
        r.handler_saw()["by"],
        "Store",
        "let in by the store, no challenge"
    );
    assert_eq!(site.store.calls().enter, 1);
}

#[tokio::test]
async fn with_proof_of_work_and_no_hook_a_scripted_client_is_challenged_solves_and_joins() {
    let site = Site::start(pow_room()).await;
    for (what, headers) in [
        ("curl", curl(&site)),
        ("no headers at all (the test client)", vec![]),
    ] {
        let mut jar = first_visit(&site, &headers).await;
        assert!(!is_proven(&site, &jar), "{what}");
        let r = site.http.visit(&mut jar, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{what}: {r:?}");
        assert_eq!(r.json()["state"], "challenge", "{what}");
        let challenge = r.json()["challenge"].as_str().unwrap().to_owned();
        let proof = format!("{challenge}:{}", solve(&challenge, DIFFICULTY));
        let proof = [(
            HeaderName::from_static(PROOF_HEADER),
            HeaderValue::from_str(&proof).unwrap(),
        )];
        let proof_path = format!("{PREFIX}/{}/proof", site.room());
        let r = site
            .http
            .visit_with(&mut jar, Method::POST, &proof_path, &proof)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{what}: {r:?}");
        assert!(is_proven(&site, &jar), "{what}");
        let r = site.http.visit(&mut jar, Method::GET, "/").await;
        assert_eq!(r.handler_saw()["by"], "Store", "{what}");
    }
    assert_eq!(
        site.store.calls().enter,
        2,
        "each entered once, after its proof"
    );
}

#[tokio::test]
async fn a_listed_address_is_refused_with_json_or_a_page_and_nothing_stored() {
    let site = Site::start(
        pow_room()
            .client_ip_header("x-forwarded-for")
            .risky_networks(["203.0.113.0/24", "2001:db8::/32"]),
    )
    .await;
    let before = site.stats().await;
    // A browser's headers do not save an address in a listed network.
    let mut listed = browser(&site);
    listed.push(forwarded_for("203.0.113.9"));
    listed.retain(|(name, _)| *name != header::ACCEPT);
    let r = site.http.send(Method::GET, "/", &listed).await;
    assert_refused(&r, "a listed IPv4 address");
    let r = site
        .http
        .send(Method::GET, "/", &[forwarded_for("2001:db8:7::1")])
        .await;
    assert_refused(&r, "a listed IPv6 address");
    // A browser gets a page saying so, with the same status.
    listed.push((header::ACCEPT, HeaderValue::from_static("text/html")));
    let page = site.http.send(Method::GET, "/", &listed).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert!(
        page.text().contains("We cannot let you in"),
        "{}",
        page.text()
    );
    assert_eq!(page.retry_after(), 300);
    assert!(page.set_cookies().is_empty());
    assert_eq!(site.store.calls(), Calls::default(), "no store call");
    same_inside(before, site.stats().await, "refused visitors");

    // An address outside the listed networks is not refused: a browser goes straight in.
    let mut elsewhere = browser(&site);
    elsewhere.push(forwarded_for("198.51.100.9"));
    let mut jar = first_visit(&site, &elsewhere).await;
    assert!(is_proven(&site, &jar));
    site.http
        .visit(&mut jar, Method::GET, "/")
        .await
        .handler_saw();
}

#[tokio::test]
async fn listed_networks_refuse_without_proof_of_work_on_the_connections_address() {
    // The client IP from the connection (axum's `ConnectInfo`), as the README serves.
    let layer = WaitingRoomLayer::builder("listed")
        .capacity(5)
        .secret(SECRET)
        .risky_networks(["127.0.0.0/8"])
        .build()
        .unwrap();
    let http = serve_with_connect_info(app(layer)).await;
    let r = http.send(Method::GET, "/", &[]).await;
    assert_refused(&r, "loopback, listed");

    // Not listed: joins as before, with no challenge (proof of work is off).
    let layer = WaitingRoomLayer::builder("unlisted")
        .capacity(5)
        .secret(SECRET)
        .risky_networks(["10.0.0.0/8"])
        .build()
        .unwrap();
    let http = serve_with_connect_info(app(layer)).await;
    let mut jar = Jar::new();
    assert_eq!(
        http.visit(&mut jar, Method::GET, "/").await.status,
        StatusCode::FOUND
    );
    http.visit(&mut jar, Method::GET, "/").await.handler_saw();
}

#[tokio::test]
async fn an_ipv4_mapped_entry_lists_the_ipv4_addresses_it_maps() {
    // Written in IPv4-mapped IPv6 form, the range still lists the IPv4 loopback the
    // connection comes from.
    let layer = WaitingRoomLayer::builder("mapped")
        .capacity(5)
        .secret(SECRET)
        .risky_networks(["::ffff:127.0.0.0/104"])
        .build()
        .unwrap();
    let http = serve_with_connect_info(app(layer)).await;
    let r = http.send(Method::GET, "/", &[]).await;
    assert_refused(&r, "127.0.0.1, listed as ::ffff:127.0.0.0/104");

    // And a client IP that arrives in mapped form, as a dual-stack proxy may report it, is
    // looked up as the IPv4 address it is.
    let site = Site::start(
        WaitingRoomLayer::builder("dual")
            .capacity(5)
            .client_ip_header("x-forwarded-for")
            .risky_networks(["198.51.100.0/24"]),
    )
    .await;
    let r = site
        .http
        .send(Method::GET, "/", &[forwarded_for("::ffff:198.51.100.7")])
        .await;
    assert_refused(&r, "::ffff:198.51.100.7, listed as 198.51.100.0/24");
    assert_eq!(site.store.calls(), Calls::default(), "no store call");
}

#[tokio::test]
async fn a_hook_that_says_medium_challenges_everyone_even_a_browser() {
    let site = Site::start(pow_room().risk(|_| Risk::Medium)).await;
    let mut jar = first_visit(&site, &browser(&site)).await;
    assert!(!is_proven(&site, &jar));
    let r = site.http.visit(&mut jar, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.json()["state"], "challenge");
    assert_eq!(site.store.calls().enter, 0);
}

#[tokio::test]
async fn the_hook_decides_instead_of_the_default_scorer() {
    // Low for everyone but `/bots`, refused there, and the default's verdict ignored: a client
    // with no headers at all goes straight in.
    let site = Site::start(pow_room().risk(|visitor| {
        if visitor.request().path() == "/bots" {
            Risk::High
        } else {
            Risk::Low
        }
    }))
    .await;
    let mut jar = first_visit(&site, &[]).await;
    assert!(is_proven(&site, &jar));
    site.http
        .visit(&mut jar, Method::GET, "/")
        .await
        .handler_saw();
    let r = site.http.send(Method::GET, "/bots", &[]).await;
    assert_refused(&r, "the hook's high");

    // Without proof of work, medium has no challenge to solve: the visitor joins.
    let site = Site::start(
        WaitingRoomLayer::builder("nopow")
            .capacity(5)
            .risk(|_| Risk::Medium),
    )
    .await;
    let mut jar = first_visit(&site, &browser(&site)).await;
    site.http
        .visit(&mut jar, Method::GET, "/")
        .await
        .handler_saw();
}

#[tokio::test]
async fn a_refusal_uses_no_new_visitor_budget_and_other_addresses_are_unaffected() {
    let site = Site::start(
        WaitingRoomLayer::builder("budget")
            .capacity(5)
            .client_ip_header("x-forwarded-for")
            .risky_networks(["203.0.113.0/24"])
            .new_visitor_limit(tower_waiting_room::RateLimit::per_minute(2)),
    )
    .await;
    for _ in 0..10 {
        let r = site
            .http
            .send(Method::GET, "/", &[forwarded_for("203.0.113.9")])
            .await;
        assert_refused(&r, "listed, again and again");
    }
    for _ in 0..2 {
        let r = site
            .http
            .send(Method::GET, "/", &[forwarded_for("198.51.100.9")])
            .await;
        assert_eq!(r.status, StatusCode::FOUND);
    }
}

#[test]
fn a_listed_network_that_is_not_one_is_a_config_error() {
    let build = |networks: &[&str]| {
        WaitingRoomLayer::builder("risk")
            .capacity(5)
            .secret(SECRET)
            .risky_networks(networks.iter().copied())
            .build()
            .err()
    };
    assert_eq!(
        build(&["203.0.113.0/24", "2001:db8::/32", "198.51.100.7"]),
        None
    );
    for bad in [
        "203.0.113.7/24",
        "203.0.113.0/33",
        "example.com",
        "",
        "10.0.0.0/8/8",
    ] {
        let err = build(&["10.0.0.0/8", bad]);
        assert_eq!(
            err,
            Some(ConfigError::InvalidNetwork {
                network: bad.to_owned()
            }),
            "{bad:?}"
        );
        assert!(
            err.unwrap().to_string().contains("risky_networks"),
            "the message names the setting"
        );
    }
}
