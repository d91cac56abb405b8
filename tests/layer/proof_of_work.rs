//! Proof of work before joining the line, over real HTTP: a visitor whose queue cookie is not
//! proven gets a signed challenge and never reaches the store; a correct solution, sent once,
//! by the session it was issued to and before it expires, makes the cookie proven and lets the
//! visitor join; everything else is refused with a fresh challenge, never a 500.

use crate::common;

use std::time::Duration;

use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::defences::proof_of_work::{
    is_solution, solve, ProofOfWork, DEFAULT_CHALLENGE_TTL, PROOF_HEADER,
};
use tower_waiting_room::{ConfigError, RateLimit, WaitingRoomLayer};

use common::*;

const DIFFICULTY: u8 = 8;

async fn site(capacity: u32) -> Site {
    Site::start(
        WaitingRoomLayer::builder("pow")
            .capacity(capacity)
            .proof_of_work(ProofOfWork::new(DIFFICULTY)),
    )
    .await
}

fn proof_path(site: &Site) -> String {
    format!("{PREFIX}/{}/proof", site.room())
}

fn proof(text: &str) -> [(HeaderName, HeaderValue); 1] {
    [(
        HeaderName::from_static(PROOF_HEADER),
        HeaderValue::from_str(text).unwrap(),
    )]
}

/// Asserts `r` is a challenge answer (JSON) and returns the challenge.
fn assert_challenge(site: &Site, r: &Reply, what: &str) -> String {
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{what}: {r:?}");
    let j = r.json();
    assert_eq!(j["state"], "challenge", "{what}: {j}");
    assert_eq!(j["difficulty"], DIFFICULTY, "{what}");
    assert_eq!(j["proof_path"], proof_path(site).as_str(), "{what}");
    assert_eq!(r.retry_after(), 30, "{what}");
    let challenge = j["challenge"].as_str().expect("a challenge").to_owned();
    assert!(challenge.starts_with("c1.k1."), "{what}: {challenge}");
    challenge
}

/// A visitor with a queue cookie asks for `/` and gets a challenge, which it solves.
async fn solved(site: &Site, jar: &mut Jar) -> String {
    let r = site.http.visit(jar, Method::GET, "/").await;
    let challenge = assert_challenge(site, &r, "unproven visitor");
    format!("{challenge}:{}", solve(&challenge, DIFFICULTY))
}

async fn submit(site: &Site, jar: &mut Jar, text: &str) -> Reply {
    site.http
        .visit_with(jar, Method::POST, &proof_path(site), &proof(text))
        .await
}

#[tokio::test]
async fn a_visitor_without_a_proof_gets_a_challenge_and_the_store_is_not_asked() {
    let site = site(5).await;
    let before = site.stats().await;
    let mut jar = site.arrive("/shoes?size=42").await;
    let q = jar.get(&site.q()).unwrap().to_owned();

    let r = site
        .http
        .visit(&mut jar, Method::GET, "/shoes?size=42")
        .await;
    let challenge = assert_challenge(&site, &r, "API client");
    // Bound to the visitor's session.
    assert_eq!(session_in(&challenge), session_in(&q));
    assert!(r.set_cookies().is_empty(), "{r:?}");

    // A browser gets the page that solves it, with everything its script needs.
    let accept = [(header::ACCEPT, HeaderValue::from_static("text/html"))];
    let page = site
        .http
        .visit_with(&mut jar, Method::GET, "/shoes?size=42", &accept)
        .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    let html = page.text();
    assert!(html.contains("Checking your browser"), "{html}");
    assert!(
        html.contains("&quot;kind&quot;:&quot;challenge&quot;"),
        "{html}"
    );
    assert!(html.contains("crypto.subtle.digest"), "{html}");
    assert!(html.contains(&proof_path(&site)), "{html}");

    // The status endpoint says so too, as JSON even to a browser, without asking the store.
    let status = site
        .http
        .visit_with(&mut jar, Method::GET, &site.status_path(), &accept)
        .await;
    assert_eq!(status.status, StatusCode::OK);
    let j = status.json();
    assert_eq!(j["state"], "challenge");
    assert_eq!(j["difficulty"], DIFFICULTY);
    assert_eq!(j["proof_path"], proof_path(&site).as_str());
    assert_eq!(
        session_in(j["challenge"].as_str().unwrap()),
        session_in(&q),
        "the status endpoint's challenge is the visitor's too"
    );

    assert_eq!(site.store.calls(), Calls::default());
    same_inside(before, site.stats().await, "unproven visitors");
}

#[tokio::test]
async fn a_solved_challenge_makes_the_cookie_proven_and_the_visitor_joins_in_order() {
    let site = site(1).await;
    let _inside = {
        let mut jar = site.arrive("/").await;
        let text = solved(&site, &mut jar).await;
        assert_eq!(submit(&site, &mut jar, &text).await.status, StatusCode::OK);
        site.http
            .visit(&mut jar, Method::GET, "/")
            .await
            .handler_saw();
        jar
    };

    // Two more visitors: the one who finishes the proof first stands first.
    let mut slow = site.arrive("/").await;
    let mut fast = site.arrive("/").await;
    let slow_proof = solved(&site, &mut slow).await;
    let fast_proof = solved(&site, &mut fast).await;
    let q_before = fast.get(&site.q()).unwrap().to_owned();
    let r = submit(&site, &mut fast, &fast_proof).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json()["state"], "proven");
    let proven = r.cookie_value(&site.q()).expect("a proven queue cookie");
    assert!(proven.starts_with("p1.k1."), "{proven}");
    assert_eq!(session_in(&proven), session_in(&q_before), "same session");
    let line = r.set_cookie(&site.q()).unwrap();
    assert!(line.contains("HttpOnly") && line.contains("SameSite=Lax") && line.contains("Secure"));

    assert_eq!(
        site.store.calls().enter,
        1,
        "only the first visitor entered"
    );
    let w = site.http.visit(&mut fast, Method::GET, "/").await;
    assert_eq!(w.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(w.json()["position"], 1);
    assert_eq!(
        submit(&site, &mut slow, &slow_proof).await.status,
        StatusCode::OK
    );
    let w = site.http.visit(&mut slow, Method::GET, "/").await;
    assert_eq!(w.json()["position"], 2);

    // A proven visitor asking again is told so; nothing else happens.
    let again = submit(&site, &mut fast, "whatever").await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json()["state"], "proven");
    assert!(again.set_cookies().is_empty());
}

#[tokio::test]
async fn a_solution_is_single_use() {
    let site = site(5).await;
    let mut jar = site.arrive("/").await;
    let unproven = jar.clone();
    let text = solved(&site, &mut jar).await;
    assert_eq!(submit(&site, &mut jar, &text).await.status, StatusCode::OK);

    // Replayed with the same (unproven) cookie, e.g. after leaving the line: refused.
    let mut replay = unproven.clone();
    let r = submit(&site, &mut replay, &text).await;
    assert_challenge(&site, &r, "replay");
    assert_eq!(
        replay.get(&site.q()),
        unproven.get(&site.q()),
        "cookie unchanged"
    );
    assert_eq!(site.store.calls(), Calls::default());
}

#[tokio::test]
async fn a_solution_is_bound_to_its_session() {
    let site = site(5).await;
    let mut owner = site.arrive("/").await;
    let mut thief = site.arrive("/").await;
    let text = solved(&site, &mut owner).await;

    let r = submit(&site, &mut thief, &text).await;
    let fresh = assert_challenge(&site, &r, "another session's solution");
    assert_eq!(
        session_in(&fresh),
        session_in(thief.get(&site.q()).unwrap()),
        "the thief gets its own challenge"
    );
    assert!(thief.get(&site.q()).unwrap().starts_with("q1."));
    // Refusing it did not use it up: the owner still can.
    assert_eq!(
        submit(&site, &mut owner, &text).await.status,
        StatusCode::OK
    );
    assert_eq!(site.store.calls(), Calls::default());
}

#[tokio::test]
async fn bad_proofs_get_a_fresh_challenge_never_a_500() {
    let site = site(5).await;
    let mut jar = site.arrive("/").await;
    let text = solved(&site, &mut jar).await;
    let (challenge, nonce) = text.rsplit_once(':').unwrap();
    let nonce: u64 = nonce.parse().unwrap();
    let unsolved = (0..)
        .find(|&n| !is_solution(challenge, n, DIFFICULTY))
        .unwrap();
    let mut tampered = challenge.to_owned();
    tampered.replace_range(tampered.len() - 2.., "AA");
    let cases = [
        ("unsolved", format!("{challenge}:{unsolved}")),
        ("leading zero", format!("{challenge}:0{nonce}")),
        ("no nonce", challenge.to_owned()),
        ("empty nonce", format!("{challenge}:")),
        ("negative nonce", format!("{challenge}:-{nonce}")),
        ("tampered challenge", format!("{tampered}:{nonce}")),
        ("a queue cookie as challenge", {
            let q = jar.get(&site.q()).unwrap();
            format!("{q}:{nonce}")
        }),
        (
            "oversized",
            format!("{challenge}{}:{nonce}", "A".repeat(8_000)),
        ),
        ("junk", "x:y:z".to_owned()),
        ("empty", String::new()),
    ];
    for (what, bad) in &cases {
        let r = submit(&site, &mut jar, bad).await;
        assert_challenge(&site, &r, what);
        assert!(jar.get(&site.q()).unwrap().starts_with("q1."), "{what}");
    }
    // No header at all.
    let r = site
        .http
        .visit(&mut jar, Method::POST, &proof_path(&site))
        .await;
    assert_challenge(&site, &r, "no proof header");
    // GET is not how proofs are sent.
    let r = site
        .http
        .visit(&mut jar, Method::GET, &proof_path(&site))
        .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.header(header::ALLOW), Some("POST"));
    // Without a queue cookie there is nothing to prove.
    let r = site
        .http
        .send(Method::POST, &proof_path(&site), &proof(&text))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.json()["state"], "unknown");

    // After all that, the real solution still works.
    assert_eq!(submit(&site, &mut jar, &text).await.status, StatusCode::OK);
    assert_eq!(site.store.calls(), Calls::default());
}

#[tokio::test]
async fn an_expired_challenge_is_refused() {
    let site = site(5).await;
    let mut jar = site.arrive("/").await;
    let text = solved(&site, &mut jar).await;
    site.clock.advance(DEFAULT_CHALLENGE_TTL);
    let r = submit(&site, &mut jar, &text).await;
    let fresh = assert_challenge(&site, &r, "expired");
    assert_ne!(fresh, text.rsplit_once(':').unwrap().0);
    let again = format!("{fresh}:{}", solve(&fresh, DIFFICULTY));
    assert_eq!(submit(&site, &mut jar, &again).await.status, StatusCode::OK);
}

#[tokio::test]
async fn an_api_client_without_cookies_solves_with_headers() {
    let site = site(5).await;
    let queue_header = HeaderName::from_static("waiting-room-session");
    let token_header = HeaderName::from_static("waiting-room-token");
    let first = site.http.send(Method::GET, "/api/items", &[]).await;
    assert_eq!(first.status, StatusCode::FOUND);
    let q = first.header(&queue_header).unwrap().to_owned();

    let with = |v: &str| (queue_header.clone(), HeaderValue::from_str(v).unwrap());
    let r = site.http.send(Method::GET, "/api/items", &[with(&q)]).await;
    let challenge = assert_challenge(&site, &r, "header client");
    let text = format!("{challenge}:{}", solve(&challenge, DIFFICULTY));
    let [p] = proof(&text);
    let r = site
        .http
        .send(Method::POST, &proof_path(&site), &[with(&q), p])
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let proven = r
        .header(&queue_header)
        .expect("the proven value")
        .to_owned();
    assert!(proven.starts_with("p1."), "{proven}");

    let r = site
        .http
        .send(Method::GET, "/api/items", &[with(&proven)])
        .await;
    let saw = r.handler_saw();
    assert_eq!(saw["session"], session_in(&q).as_str());
    assert!(r.header(&token_header).is_some());
}

#[tokio::test]
async fn a_bot_farm_that_keeps_cookies_but_does_no_work_changes_nothing() {
    let site = site(2).await;
    let _inside = {
        let mut jar = site.arrive("/").await;
        let text = solved(&site, &mut jar).await;
        submit(&site, &mut jar, &text).await;
        site.http
            .visit(&mut jar, Method::GET, "/")
            .await
            .handler_saw();
        jar
    };
    let calls = site.store.calls();
    let before = site.stats().await;
    for i in 0..300 {
        let mut bot = site.arrive("/").await;
        let r = site.http.visit(&mut bot, Method::GET, "/").await;
        assert_challenge(&site, &r, "bot");
        // A wrong guess instead of work is refused, and costs the room no store call either.
        // (A random nonce solves with odds of 1 in 2^DIFFICULTY, so the guess is a checked miss.)
        let challenge = r.json()["challenge"].as_str().unwrap().to_owned();
        let miss = (i..)
            .find(|&n| !is_solution(&challenge, n, DIFFICULTY))
            .unwrap();
        let r = submit(&site, &mut bot, &format!("{challenge}:{miss}")).await;
        assert_challenge(&site, &r, "wrong guess");
    }
    assert_eq!(site.store.calls(), calls, "no store call for any bot");
    same_inside(before, site.stats().await, "bot farm");
}

#[tokio::test]
async fn proof_submissions_count_against_the_poll_limit() {
    let site = Site::start(
        WaitingRoomLayer::builder("pow")
            .capacity(5)
            .poll_limit(RateLimit::per_minute(3))
            .proof_of_work(ProofOfWork::new(DIFFICULTY)),
    )
    .await;
    let mut jar = site.arrive("/").await;
    let text = solved(&site, &mut jar).await;
    for i in 0..3 {
        let r = submit(&site, &mut jar, &format!("guess:{i}")).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
    }
    let r = submit(&site, &mut jar, &text).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{r:?}");
    assert_eq!(r.json()["state"], "limited");
    assert!(r.retry_after() >= 1);
    site.clock.advance(Duration::from_secs(120));
    assert_eq!(submit(&site, &mut jar, &text).await.status, StatusCode::OK);
}

#[tokio::test]
async fn off_by_default_and_validated_when_on() {
    let site = Site::start(WaitingRoomLayer::builder("plain").capacity(5)).await;
    let mut jar = site.arrive("/").await;
    site.http
        .visit(&mut jar, Method::GET, "/")
        .await
        .handler_saw();
    assert_eq!(site.store.calls().enter, 1);

    let build = |pow: ProofOfWork| {
        WaitingRoomLayer::builder("pow")
            .capacity(5)
            .secret(SECRET)
            .proof_of_work(pow)
            .build()
            .err()
    };
    assert_eq!(
        build(ProofOfWork::new(0)),
        Some(ConfigError::InvalidProofOfWork)
    );
    assert_eq!(
        build(ProofOfWork::new(33)),
        Some(ConfigError::InvalidProofOfWork)
    );
    assert_eq!(
        build(ProofOfWork::new(10).with_challenge_ttl(Duration::from_millis(500))),
        Some(ConfigError::InvalidProofOfWork)
    );
    assert_eq!(build(ProofOfWork::new(20)), None);
}
