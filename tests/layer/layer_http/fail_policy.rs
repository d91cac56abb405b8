//! The fail policy while the store is down or busy: fail-open and fail-closed for newcomers,
//! waiters and admitted visitors, `Busy` never taken for an outage, and an outage logged once per
//! interval.

use super::{html, SERIAL};
use crate::common;

use std::time::Duration;

use http::header::{self};
use http::{Method, StatusCode};
use serde_json::json;
use tower_waiting_room::store::StoreErrorKind;
use tower_waiting_room::{FailPolicy, SessionId, WaitingRoomLayer};

use common::*;

// ===== 6. the fail policy =====

#[tokio::test]
async fn fail_open_lets_a_queued_visitor_through() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(WaitingRoomLayer::builder("drop").capacity(1)).await;
    for kind in [StoreErrorKind::Unavailable, StoreErrorKind::Timeout] {
        site.store.fail_with(None);
        let mut v = site.arrive("/").await;
        site.store.fail_with(Some(kind));
        let before = site.store.calls().enter;
        let r = site.http.visit(&mut v, Method::GET, "/").await;
        let saw = r.handler_saw();
        assert_eq!(saw["by"], "FailOpen", "{kind:?}");
        assert_eq!(saw["session"], session_in(v.get(&site.q()).unwrap()));
        assert_eq!(saw["expires_at_ms"], T0 + 15_000);
        assert!(r.set_cookie(&site.a()).is_none(), "no slot, no token");
        assert_eq!(site.store.calls().enter, before + 1);
    }
    // A first visit needs no store: still the redirect.
    let r = site.http.send(Method::GET, "/", &[]).await;
    assert_eq!(r.status, StatusCode::FOUND);
}

#[tokio::test]
async fn fail_closed_answers_503_unavailable() {
    let _serial = SERIAL.lock().await;
    let site = Site::start(
        WaitingRoomLayer::builder("drop")
            .capacity(1)
            .fail_policy(FailPolicy::Closed),
    )
    .await;
    let mut v = site.arrive("/").await;
    site.store.fail_with(Some(StoreErrorKind::Unavailable));
    let r = site.http.visit(&mut v, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    let retry = r.retry_after();
    assert!(retry > 0);
    assert_eq!(r.header(header::CACHE_CONTROL), Some("no-store"));
    assert_eq!(
        r.json(),
        json!({"room": "drop", "state": "unavailable", "position": null, "ahead": null, "waiting": null, "eta_seconds": null, "eta_low_seconds": null, "eta_high_seconds": null, "retry_after": retry})
    );
    // A browser gets a page with the same status.
    let r = site
        .http
        .visit_with(&mut v, Method::GET, "/", &html())
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.text().contains("cannot be reached"));
    // The endpoints say so too.
    let r = site
        .http
        .visit(&mut v, Method::GET, &site.status_path())
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.json()["state"], "unavailable");
    let r = site
        .http
        .visit(&mut v.clone(), Method::POST, &site.leave_path())
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);

    // Healed: the same visitor gets in.
    site.store.fail_with(None);
    let r = site.http.visit(&mut v, Method::GET, "/").await;
    assert_eq!(r.handler_saw()["by"], "Store");
}

/// Every kind of store failure but those of a store that answered (`Busy`, `Protocol`) follows
/// the fail policy.
const DOWN: [StoreErrorKind; 3] = [
    StoreErrorKind::Unavailable,
    StoreErrorKind::Timeout,
    StoreErrorKind::Config,
];

/// A store that answered, busy or outside the protocol (a damaged key, a refused argument
/// behind it): never the fail policy's, whichever it is.
const ANSWERED: [StoreErrorKind; 2] = [StoreErrorKind::Busy, StoreErrorKind::Protocol];

/// A room with one visitor inside and `waiter` in line behind them.
async fn a_waiter(policy: FailPolicy) -> (Site, Jar) {
    let site = Site::start(
        WaitingRoomLayer::builder("drop")
            .capacity(1)
            .fail_policy(policy),
    )
    .await;
    site.admit().await;
    let mut waiter = site.arrive("/").await;
    let r = site.http.visit(&mut waiter, Method::GET, "/").await;
    assert_eq!(r.json()["state"], "waiting", "{r:?}");
    (site, waiter)
}

#[tokio::test]
async fn fail_open_tells_a_polling_waiter_to_come_in_and_lets_them_in() {
    let _serial = SERIAL.lock().await;
    for kind in DOWN {
        let (site, mut waiter) = a_waiter(FailPolicy::Open).await;
        site.store.fail_with(Some(kind));
        // A newcomer is let in while the store is down...
        let mut newcomer = site.arrive("/").await;
        let r = site.http.visit(&mut newcomer, Method::GET, "/").await;
        assert_eq!(r.handler_saw()["by"], "FailOpen", "{kind:?}");

        // ...and so the waiting page's poll is told to go in, not that the room is down.
        let r = site
            .http
            .visit(&mut waiter, Method::GET, &site.status_path())
            .await;
        assert_eq!(r.status, StatusCode::OK, "{kind:?}: {r:?}");
        assert_eq!(r.json()["state"], "open", "{kind:?}: {r:?}");
        // The page then reloads the page it was for, which lets them in.
        let r = site.http.visit(&mut waiter, Method::GET, "/").await;
        assert_eq!(r.handler_saw()["by"], "FailOpen", "{kind:?}");
        assert_eq!(
            r.handler_saw()["session"],
            session_in(waiter.get(&site.q()).unwrap())
        );
    }
}

#[tokio::test]
async fn fail_closed_tells_waiters_and_newcomers_alike_that_the_room_is_down() {
    let _serial = SERIAL.lock().await;
    for kind in DOWN {
        let (site, mut waiter) = a_waiter(FailPolicy::Closed).await;
        site.store.fail_with(Some(kind));
        let mut newcomer = site.arrive("/").await;
        let r = site.http.visit(&mut newcomer, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{kind:?}");
        assert_eq!(r.json()["state"], "unavailable", "{kind:?}");
        let r = site
            .http
            .visit(&mut waiter, Method::GET, &site.status_path())
            .await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{kind:?}");
        assert_eq!(r.json()["state"], "unavailable", "{kind:?}");
        let r = site.http.visit(&mut waiter, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{kind:?}");
    }
}

#[tokio::test]
async fn busy_is_busy_for_waiters_polling_under_both_policies() {
    let _serial = SERIAL.lock().await;
    for policy in [FailPolicy::Open, FailPolicy::Closed] {
        for kind in ANSWERED {
            let (site, mut waiter) = a_waiter(policy).await;
            site.store.fail_with(Some(kind));
            let r = site
                .http
                .visit(&mut waiter, Method::GET, &site.status_path())
                .await;
            assert_eq!(
                r.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{policy:?} {kind:?}"
            );
            assert_eq!(r.json()["state"], "busy", "{policy:?} {kind:?}");
            // A newcomer is not let in by it either, under fail-open too.
            let mut newcomer = site.arrive("/").await;
            let r = site.http.visit(&mut newcomer, Method::GET, "/").await;
            assert_eq!(
                r.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{policy:?} {kind:?}: a newcomer: {r:?}"
            );
            assert_eq!(r.json()["state"], "busy", "{policy:?} {kind:?}");
        }
    }
}

/// Counts the WARN (and worse) events emitted on this thread while it is the default subscriber.
#[derive(Clone, Default)]
struct CountWarnings(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl tracing::Subscriber for CountWarnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        if *event.metadata().level() <= tracing::Level::WARN {
            let mut text = Text(String::new());
            event.record(&mut text);
            self.0.lock().unwrap().push(text.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(flavor = "current_thread")]
async fn a_store_outage_is_logged_once_per_interval_not_once_per_request() {
    let _serial = SERIAL.lock().await;
    let warnings = CountWarnings::default();
    // The family's other tests run in this process, on other threads.
    crate::common::tracing_asks_every_subscriber();
    let _guard = tracing::subscriber::set_default(warnings.clone());
    // Other tests of this binary run on other threads without a subscriber: a callsite first
    // hit there while this one was being set can keep "nobody listens" cached. Recompute it now
    // that this thread's subscriber is registered.
    tracing::callsite::rebuild_interest_cache();
    let clock = clock();
    let store = TestStore::new(clock.clone());
    let layer = WaitingRoomLayer::builder("drop")
        .capacity(1)
        .secret(SECRET)
        .clock(clock.clone())
        .store(store.clone())
        .build()
        .unwrap();
    let router = app(layer.clone());
    let q = layer.config().cookies().queue_name().to_owned();
    let visitor = |_| {
        let value = queue_value(&keys(), "drop", SessionId::random(), T0, 3_600_000);
        [(header::COOKIE, cookie(&q, &value))]
    };
    store.fail_with(Some(StoreErrorKind::Unavailable));
    for i in 0..100 {
        let r = call(&router, Method::GET, "/", &visitor(i)).await;
        assert_eq!(r.handler_saw()["by"], "FailOpen");
    }
    let lines = warnings.0.lock().unwrap().clone();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    // Later, one more line, which counts the failures it stands for.
    clock.advance(Duration::from_secs(61));
    for i in 0..10 {
        call(&router, Method::GET, "/", &visitor(i)).await;
    }
    let lines = warnings.0.lock().unwrap().clone();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[1].contains("99"),
        "the 99 failures since the first line: {lines:#?}"
    );
}

#[tokio::test]
async fn busy_is_busy_under_both_policies() {
    let _serial = SERIAL.lock().await;
    for policy in [FailPolicy::Open, FailPolicy::Closed] {
        let site = Site::start(
            WaitingRoomLayer::builder("drop")
                .capacity(1)
                .fail_policy(policy),
        )
        .await;
        let mut v = site.arrive("/").await;
        site.store.fail_with(Some(StoreErrorKind::Busy));
        let r = site.http.visit(&mut v, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{policy:?}");
        let retry = r.retry_after();
        assert_eq!(
            r.json(),
            json!({"room": "drop", "state": "busy", "position": null, "ahead": null, "waiting": null, "eta_seconds": null, "eta_low_seconds": null, "eta_high_seconds": null, "retry_after": retry}),
            "{policy:?}"
        );
        assert!(r.set_cookie(&site.a()).is_none());
    }
}

#[tokio::test]
async fn admitted_visitors_keep_going_while_the_store_is_down() {
    let _serial = SERIAL.lock().await;
    for kind in [StoreErrorKind::Unavailable, StoreErrorKind::Busy] {
        let site = Site::start(
            WaitingRoomLayer::builder("drop")
                .capacity(2)
                .fail_policy(FailPolicy::Closed),
        )
        .await;
        let mut inside = site.admit().await;
        let mut queued = site.arrive("/").await;
        site.store.fail_with(Some(kind));
        let calls = site.store.calls();

        // A fresh token: no store call, in.
        let r = site.http.visit(&mut inside, Method::GET, "/").await;
        assert_eq!(r.handler_saw()["by"], "Token", "{kind:?}");
        assert_eq!(site.store.calls(), calls);

        // Past refresh: the heartbeat fails, the valid token is still honoured.
        site.clock.advance(Duration::from_secs(20));
        let r = site.http.visit(&mut inside, Method::GET, "/").await;
        let saw = r.handler_saw();
        assert_eq!(saw["by"], "Token", "{kind:?}");
        assert_eq!(saw["expires_at_ms"], T0 + 300_000);
        assert_eq!(site.store.calls().heartbeat, calls.heartbeat + 1);
        assert!(r.set_cookie(&site.a()).is_none());

        // Meanwhile a visitor who needs the store is turned away (fail-closed).
        let r = site.http.visit(&mut queued, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{kind:?}");
    }
}
