//! The room's metrics, scraped as an operator would: a Prometheus recorder installed for this
//! test binary, the room served over loopback with `GET /metrics` outside it, and requests of
//! every kind sent through the room.

use crate::common;

use std::sync::OnceLock;

use axum::routing::get;
use axum::Router;
use http::{Method, StatusCode};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tower_waiting_room::telemetry::{
    GRANTED, INSIDE, REQUESTS_TOTAL, STORE_CALLS_TOTAL, STORE_CALL_SECONDS, WAITING,
};
use tower_waiting_room::WaitingRoomLayer;

use common::*;

/// The binary's one global recorder (each test uses its own room, so their series differ).
pub(crate) fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| PrometheusBuilder::new().install_recorder().unwrap())
}

/// The value of the series `name` whose labels include every one of `labels`, if rendered.
pub(crate) fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn the_rooms_metrics_are_scraped_from_outside_the_room() {
    let handle = prometheus();
    let site = Site::start_with(WaitingRoomLayer::builder("metered").capacity(1), |layer| {
        let scrape = {
            let layer = layer.clone();
            move || async move {
                let _ = layer.stats().await;
                handle.run_upkeep();
                handle.render()
            }
        };
        Router::new()
            .route("/metrics", get(scrape))
            .merge(app(layer))
    })
    .await;

    // A: first visit (302), enter (admitted), then the fast path.
    let mut a = site.arrive("/").await;
    let r = site.http.visit(&mut a, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "Store");
    let r = site.http.visit(&mut a, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "Token");
    // B: first visit, waiting twice, and the status endpoint.
    let mut b = site.arrive("/").await;
    for _ in 0..2 {
        let r = site.http.visit(&mut b, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    }
    let r = site
        .http
        .visit(&mut b, Method::GET, &site.status_path())
        .await;
    assert_eq!(r.json()["state"], "waiting");

    let text = site.http.send(Method::GET, "/metrics", &[]).await.text();
    let room = ("room", "metered");
    let requests = |stage, outcome| {
        value(
            &text,
            REQUESTS_TOTAL,
            &[room, ("stage", stage), ("outcome", outcome)],
        )
    };
    assert_eq!(requests("cookie_check", "new_visitor"), Some(2.0), "{text}");
    assert_eq!(requests("store", "admitted"), Some(1.0), "{text}");
    assert_eq!(requests("fast_path", "passed"), Some(1.0), "{text}");
    assert_eq!(requests("store", "waiting"), Some(2.0), "{text}");
    assert_eq!(requests("endpoint", "waiting"), Some(1.0), "{text}");
    assert_eq!(requests("store", "full"), None, "never happened: {text}");

    let calls = |op| {
        value(
            &text,
            STORE_CALLS_TOTAL,
            &[room, ("op", op), ("result", "ok")],
        )
    };
    assert_eq!(calls("enter"), Some(3.0), "{text}");
    assert_eq!(calls("poll"), Some(1.0), "{text}");
    assert_eq!(calls("stats"), Some(1.0), "{text}");
    assert_eq!(
        value(
            &format!("{text}\n"),
            &format!("{STORE_CALL_SECONDS}_count"),
            &[room, ("op", "enter")]
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(value(&text, WAITING, &[room]), Some(1.0), "{text}");
    assert_eq!(value(&text, INSIDE, &[room]), Some(1.0), "{text}");
    assert_eq!(value(&text, GRANTED, &[room]), Some(0.0), "{text}");
    // Help texts, given when the room was built (after the recorder was installed).
    assert!(
        text.contains(&format!("# HELP {REQUESTS_TOTAL} ")),
        "{text}"
    );
}

#[tokio::test]
async fn store_failures_are_counted_by_kind_and_outcome() {
    let handle = prometheus();
    let site = Site::start(WaitingRoomLayer::builder("failing").capacity(1)).await;
    let mut v = site.arrive("/").await;
    site.store
        .fail_with(Some(tower_waiting_room::store::StoreErrorKind::Timeout));
    let r = site.http.visit(&mut v, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "FailOpen");

    let text = handle.render();
    let room = ("room", "failing");
    assert_eq!(
        value(
            &text,
            STORE_CALLS_TOTAL,
            &[room, ("op", "enter"), ("result", "timeout")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            REQUESTS_TOTAL,
            &[room, ("stage", "store"), ("outcome", "fail_open")]
        ),
        Some(1.0),
        "{text}"
    );
}

/// A gate counts every request it decides at stage `gate`: let through (`passed`) or refused
/// with `403 not_admitted` (`unknown`).
#[tokio::test]
async fn a_gate_counts_its_requests_at_stage_gate() {
    use axum::routing::post;
    use http::header::{self, HeaderValue};
    use tower_waiting_room::clock::Clock;
    use tower_waiting_room::routing::{Rule, WaitingRooms};
    use tower_waiting_room::SessionId;

    let handle = prometheus();
    let clock = clock();
    let layer = WaitingRoomLayer::builder("gated")
        .capacity(1)
        .secret(SECRET)
        .clock(clock.clone())
        .build()
        .unwrap();
    let rooms = WaitingRooms::builder()
        .gate_only_room(layer)
        .gate(Rule::post("/checkout"), "gated")
        .build()
        .unwrap();
    let router = Router::new()
        .route("/checkout", post(|| async { "ordered" }))
        .layer(rooms);
    let now = clock.now_ms();
    let token = admission_value(&keys(), "gated", SessionId::random(), now, now + 60_000);
    let admitted = [(header::COOKIE, cookie("wr_gated_a", &token))];
    let forged = [(
        header::COOKIE,
        HeaderValue::from_static("wr_gated_a=forged"),
    )];
    for (headers, status) in [
        (&admitted[..], StatusCode::OK),
        (&admitted[..], StatusCode::OK),
        (&forged[..], StatusCode::FORBIDDEN),
        (&[][..], StatusCode::FORBIDDEN),
        (&[][..], StatusCode::FORBIDDEN),
    ] {
        let reply = call(&router, Method::POST, "/checkout", headers).await;
        assert_eq!(reply.status, status, "{}", reply.text());
    }
    let text = handle.render();
    let requests = |outcome| {
        value(
            &text,
            REQUESTS_TOTAL,
            &[("room", "gated"), ("stage", "gate"), ("outcome", outcome)],
        )
    };
    assert_eq!(requests("passed"), Some(2.0), "{text}");
    assert_eq!(requests("unknown"), Some(3.0), "{text}");
}

/// A gate of a room with single-use tickets counts each request once at stage `gate` too: a
/// redeemed ticket `admitted`, a refused one (used before, forged, none) `unknown`.
#[tokio::test]
async fn a_single_use_gate_counts_each_use_once_at_stage_gate() {
    use axum::routing::post;
    use http::header::{self, HeaderValue};
    use tower_waiting_room::routing::Rule;

    let handle = prometheus();
    let layer = WaitingRoomLayer::builder("tix_gate")
        .capacity(1)
        .secret(SECRET)
        .secure_cookies(false)
        .single_use_tickets(true)
        .gate(Rule::post("/checkout"))
        .build()
        .unwrap();
    let router = Router::new()
        .route("/", get(|| async { "home" }))
        .route("/checkout", post(|| async { "ordered" }))
        .layer(layer);
    let first = call(&router, Method::GET, "/", &[]).await;
    let place = first.cookie_value("wr_tix_gate_q").expect("a place");
    let place = [(header::COOKIE, cookie("wr_tix_gate_q", &place))];
    let inside = call(&router, Method::GET, "/", &place).await;
    assert_eq!(inside.status, StatusCode::OK, "{}", inside.text());
    let ticket = inside.cookie_value("wr_tix_gate_t").expect("a ticket");
    let with_ticket = [(header::COOKIE, cookie("wr_tix_gate_t", &ticket))];
    let forged = [(
        header::COOKIE,
        HeaderValue::from_static("wr_tix_gate_t=t1.k1.forged"),
    )];
    for (headers, status) in [
        (&with_ticket[..], StatusCode::OK),
        (&with_ticket[..], StatusCode::FORBIDDEN),
        (&forged[..], StatusCode::FORBIDDEN),
        (&[][..], StatusCode::FORBIDDEN),
    ] {
        let reply = call(&router, Method::POST, "/checkout", headers).await;
        assert_eq!(reply.status, status, "{}", reply.text());
    }
    let text = handle.render();
    let requests = |outcome| {
        value(
            &text,
            REQUESTS_TOTAL,
            &[
                ("room", "tix_gate"),
                ("stage", "gate"),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!(requests("admitted"), Some(1.0), "{text}");
    assert_eq!(requests("unknown"), Some(3.0), "{text}");
    assert_eq!(requests("passed"), None, "{text}");
    // The ticket calls are counted as store calls: one mint at admission, and a redeem for
    // each genuine ticket presented (the forged one and the missing one never reach the store).
    let calls = |op| {
        value(
            &text,
            STORE_CALLS_TOTAL,
            &[("room", "tix_gate"), ("op", op), ("result", "ok")],
        )
    };
    assert_eq!(calls("mint_ticket"), Some(1.0), "{text}");
    assert_eq!(calls("redeem_ticket"), Some(2.0), "{text}");
}

/// A room on a store that keeps snapshots counts its refreshes as store calls (`op="sync"`).
#[tokio::test]
async fn snapshot_refreshes_are_counted_as_store_calls() {
    use http::header;

    let handle = prometheus();
    let layer = WaitingRoomLayer::builder("synced")
        .capacity(1)
        .secret(SECRET)
        .secure_cookies(false)
        .build()
        .unwrap();
    let router = Router::new()
        .route("/", get(|| async { "home" }))
        .layer(layer);
    // A visitor is let in, and the next waits: their queue cookie then carries their place,
    // so their next request is answered at the gateway, which first refreshes its snapshot.
    for waits in [false, true] {
        let first = call(&router, Method::GET, "/", &[]).await;
        let queue = first.cookie_value("wr_synced_q").expect("a queue cookie");
        let again = [(header::COOKIE, cookie("wr_synced_q", &queue))];
        let entered = call(&router, Method::GET, "/", &again).await;
        if waits {
            assert_eq!(entered.status, StatusCode::TOO_MANY_REQUESTS);
            let placed = entered.cookie_value("wr_synced_q").unwrap_or(queue);
            let placed = [(header::COOKIE, cookie("wr_synced_q", &placed))];
            let polled = call(&router, Method::GET, "/", &placed).await;
            assert_eq!(polled.status, StatusCode::TOO_MANY_REQUESTS);
        } else {
            assert_eq!(entered.status, StatusCode::OK, "{}", entered.text());
        }
    }
    let text = handle.render();
    let calls = |op| {
        value(
            &text,
            STORE_CALLS_TOTAL,
            &[("room", "synced"), ("op", op), ("result", "ok")],
        )
    };
    assert_eq!(calls("sync"), Some(1.0), "{text}");
    // The waiter is at the head, so after the refresh the store is asked all the same.
    assert_eq!(calls("enter"), Some(3.0), "{text}");
}

/// Each risk decision for a new visitor is counted by its risk and who made it, and a refusal
/// is a request counted at stage `cookie_check` with outcome `refused`.
#[tokio::test]
async fn risk_decisions_are_counted_by_risk_and_by_who_decided() {
    use http::header::{self, HeaderName, HeaderValue};
    use tower_waiting_room::defences::risk::Risk;
    use tower_waiting_room::telemetry::RISK_DECISIONS_TOTAL;
    use tower_waiting_room::ProofOfWork;

    let handle = prometheus();
    let site = Site::start(
        WaitingRoomLayer::builder("scored")
            .capacity(5)
            .proof_of_work(ProofOfWork::new(8))
            .client_ip_header("x-forwarded-for")
            .risky_networks(["203.0.113.0/24"]),
    )
    .await;
    let host = HeaderValue::from_str(&site.http.addr.to_string()).unwrap();
    let browser = [
        (header::HOST, host),
        (header::USER_AGENT, HeaderValue::from_static("Mozilla/5.0")),
        (header::ACCEPT_LANGUAGE, HeaderValue::from_static("en")),
    ];
    let listed = [(
        HeaderName::from_static("x-forwarded-for"),
        HeaderValue::from_static("203.0.113.1"),
    )];
    // Low once, medium twice (no headers), high three times.
    let mut sent = vec![(&browser[..], StatusCode::FOUND)];
    sent.extend([(&[][..], StatusCode::FOUND); 2]);
    sent.extend([(&listed[..], StatusCode::FORBIDDEN); 3]);
    for (headers, status) in sent {
        assert_eq!(
            site.http.send(Method::GET, "/", headers).await.status,
            status
        );
    }
    // The app's hook: counted as such.
    let hooked = Site::start(
        WaitingRoomLayer::builder("hooked")
            .capacity(5)
            .risk(|_| Risk::Medium),
    )
    .await;
    hooked.http.send(Method::GET, "/", &[]).await;

    let text = handle.render();
    let decisions = |room, risk, by| {
        value(
            &text,
            RISK_DECISIONS_TOTAL,
            &[("room", room), ("risk", risk), ("by", by)],
        )
    };
    assert_eq!(decisions("scored", "low", "default"), Some(1.0), "{text}");
    assert_eq!(
        decisions("scored", "medium", "default"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(decisions("scored", "high", "default"), Some(3.0), "{text}");
    assert_eq!(decisions("hooked", "medium", "hook"), Some(1.0), "{text}");
    assert_eq!(decisions("hooked", "medium", "default"), None, "{text}");
    let requests = |outcome| {
        value(
            &text,
            REQUESTS_TOTAL,
            &[
                ("room", "scored"),
                ("stage", "cookie_check"),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!(requests("refused"), Some(3.0), "{text}");
    assert_eq!(requests("new_visitor"), Some(3.0), "{text}");
    assert!(
        text.contains(&format!("# HELP {RISK_DECISIONS_TOTAL} ")),
        "{text}"
    );
}
