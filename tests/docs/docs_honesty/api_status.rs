//! The table of the status endpoint's answers in `docs/api.md`: its statuses are the ones a live
//! room gives, a failing store's included.

use super::{
    app, builder, clocked, first_visit, number, read, request, send, status_path, table, Answer,
    T0_MS,
};

use std::collections::BTreeSet;

use http::{header, Method, StatusCode};
use tower_waiting_room::store::{
    Decision, RoomStats, SettingsChange, SettingsUpdate, Store, StoreError, StoreErrorKind,
    StoreFuture,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{FailPolicy, RoomPolicy, SessionId};

// ===== docs/api.md: the status endpoint =====

/// A store that always fails with `kind`.
struct FailingStore(StoreErrorKind);

impl FailingStore {
    fn fail<T: Send + 'static>(&self) -> StoreFuture<T> {
        let kind = self.0;
        Box::pin(async move { Err(StoreError::new(kind)) })
    }
}

impl Store for FailingStore {
    fn enter(&self, _: &RoomPolicy, _: SessionId) -> StoreFuture<Decision> {
        self.fail()
    }
    fn poll(&self, _: &RoomPolicy, _: SessionId) -> StoreFuture<Decision> {
        self.fail()
    }
    fn heartbeat(&self, _: &RoomPolicy, _: SessionId) -> StoreFuture<Decision> {
        self.fail()
    }
    fn release(&self, _: &RoomPolicy, _: SessionId) -> StoreFuture<bool> {
        self.fail()
    }
    fn stats(&self, _: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.fail()
    }
    fn configure(&self, _: &RoomPolicy, _: SettingsChange) -> StoreFuture<SettingsUpdate> {
        self.fail()
    }
    fn admit_next(&self, _: &RoomPolicy, _: u32) -> StoreFuture<u64> {
        self.fail()
    }
    fn ban(&self, _: &RoomPolicy, _: SessionId, _: u64) -> StoreFuture<bool> {
        self.fail()
    }
}

#[tokio::test]
async fn api_status_endpoint_table_matches_a_live_room() {
    let rows = table(
        "docs/api.md",
        &read("docs/api.md"),
        &["status", "when", "body"],
    );
    let documented: BTreeSet<u16> = rows
        .iter()
        .map(|r| number(&r.cells[0]).unwrap_or_else(|| panic!("{}: no status", r.at)) as u16)
        .collect();

    // What the room answers, and the states it names.
    let mut seen: Vec<(u16, Option<String>, String)> = Vec::new();
    let mut record = |what: &str, a: Answer| {
        seen.push((a.status.as_u16(), a.state(), what.to_owned()));
    };

    let (app, _clock) = clocked(builder());
    let (_, cookie) = first_visit(&app).await;
    let get = || request(Method::GET, status_path(), Some(&cookie));
    record("GET with a place", send(&app, get()).await);
    record(
        "HEAD with a place",
        send(&app, request(Method::HEAD, status_path(), Some(&cookie))).await,
    );
    record(
        "GET without a place",
        send(&app, request(Method::GET, status_path(), None)).await,
    );
    for method in [Method::POST, Method::PUT, Method::DELETE] {
        let a = send(&app, request(method.clone(), status_path(), None)).await;
        assert_eq!(
            a.header(header::ALLOW),
            Some("GET, HEAD"),
            "{method} status: Allow"
        );
        record("another method", a);
    }
    // Over the poll limit.
    for _ in 0..200 {
        let a = send(&app, get()).await;
        if a.status == StatusCode::TOO_MANY_REQUESTS {
            record("over the poll limit", a);
            break;
        }
    }
    // A failing store, under either fail policy.
    for kind in [StoreErrorKind::Unavailable, StoreErrorKind::Busy] {
        for policy in [FailPolicy::Open, FailPolicy::Closed] {
            let (app, _clock) = clocked(builder().store(FailingStore(kind)).fail_policy(policy));
            let (_, cookie) = first_visit(&app).await;
            let a = send(&app, request(Method::GET, status_path(), Some(&cookie))).await;
            record("a failing store", a);
        }
    }

    // Operators: a closed room, a banned session.
    {
        let layer = builder()
            .clock(ManualClock::new(T0_MS))
            .build()
            .expect("valid room");
        let app = self::app(layer.clone());
        let (_, cookie) = first_visit(&app).await;
        let session = cookie.split('=').nth(1).unwrap();
        // The value is `<kind>.<kid>.<session>.<iat>.<exp>.<tag>`.
        let session = SessionId::from_hex(session.split('.').nth(2).unwrap()).expect("a session");
        layer
            .control()
            .close(tower_waiting_room::control::Closing::KeepInside)
            .await
            .unwrap();
        let a = send(&app, request(Method::GET, status_path(), Some(&cookie))).await;
        record("a closed room", a);
        layer.control().open().await.unwrap();
        layer.control().drop_session(session).await.unwrap();
        let a = send(&app, request(Method::GET, status_path(), Some(&cookie))).await;
        record("a banned session", a);
    }

    let observed: BTreeSet<u16> = seen.iter().map(|(s, _, _)| *s).collect();
    assert_eq!(
        documented, observed,
        "docs/api.md documents the statuses {documented:?} for the status endpoint; a live \
         room answered {seen:?}"
    );
    // Every state a row names in quotes ("limited", "busy", ...) is one the room gave with
    // that status.
    for row in &rows {
        let status = number(&row.cells[0]).unwrap() as u16;
        let body = row.cells.get(2).map_or("", String::as_str);
        for state in body.split('"').skip(1).step_by(2) {
            assert!(
                seen.iter()
                    .any(|(s, st, _)| *s == status && st.as_deref() == Some(state)),
                "{}: state {state:?} with {status}: the room never answered that ({seen:?})",
                row.at
            );
        }
    }
}
