//! The room's schedule in the admin's status: scheduled with its registrants before the
//! opening, open, then closed from the closing; and none for a room without one.

use super::clients::{arrive, state, Admin};
use super::{gateway_with_admin, memory_gateway, room_builder};
use crate::common::{clock, T0};

use std::time::Duration;

use http::StatusCode;
use serde_json::{json, Value};
use tower_waiting_room::store::MemoryStore;

#[tokio::test]
async fn the_status_shows_the_schedule_and_the_registrants_before_the_opening() {
    let clock = clock();
    let opens = T0 + 600_000;
    let closes = opens + 3_600_000;
    let at = |ms: u64| std::time::UNIX_EPOCH + Duration::from_millis(ms);
    let layer = room_builder()
        .capacity(1)
        .opens_at(at(opens))
        .closes_at(at(closes))
        .clock(clock.clone())
        .store(MemoryStore::with_clock(clock.clone()))
        .build()
        .unwrap();
    let g = gateway_with_admin(layer).await;
    let admin = Admin::new(&g);
    let schedule = |s: &Value| {
        json!([
            s["state"],
            s["opens_at"],
            s["closes_at"],
            s["registrants"],
            s["waiting"]
        ])
    };

    // Before the opening: scheduled, nobody registered yet, no wait to tell.
    let s = admin.status().await;
    assert_eq!(
        schedule(&s),
        json!(["scheduled", opens / 1000, closes / 1000, 0, 0]),
        "{s}"
    );
    assert_eq!(
        (&s["open"], &s["eta_seconds"], &s["estimating"]),
        (&json!(true), &Value::Null, &json!(false)),
        "{s}"
    );
    // Three register; each is told when the room opens, and nothing of places or counts.
    for _ in 0..3 {
        let (_, r) = arrive(&g).await;
        assert_eq!(
            (r.status, state(&r)),
            (StatusCode::SERVICE_UNAVAILABLE, "scheduled".to_owned())
        );
        let body = r.json();
        assert_eq!(body["opens_at"], opens / 1000, "{body}");
        for hidden in ["position", "ahead", "waiting", "eta_seconds"] {
            assert!(
                body[hidden].is_null(),
                "{hidden} shown before the opening: {body}"
            );
        }
    }
    let s = admin.status().await;
    assert_eq!(
        schedule(&s),
        json!(["scheduled", opens / 1000, closes / 1000, 3, 3]),
        "{s}"
    );
    // Paused before the opening: still scheduled (and paused); the operators' close comes
    // first, and reopening brings the schedule back.
    let s = admin.patch(json!({"paused": true})).await;
    assert_eq!(
        (&s["state"], &s["paused"]),
        (&json!("scheduled"), &json!(true))
    );
    let s = admin.patch(json!({"open": false})).await;
    assert_eq!(s["state"], "closed", "{s}");
    let s = admin.patch(json!({"open": true, "paused": false})).await;
    assert_eq!(s["state"], "scheduled", "{s}");

    // From the opening: open, registrants no longer counted apart (they are the line, whose
    // first has been given the one slot).
    clock.set(opens);
    let s = admin.status().await;
    assert_eq!(
        schedule(&s),
        json!(["open", opens / 1000, closes / 1000, null, 2]),
        "{s}"
    );
    assert_eq!(s["granted"], 1, "{s}");
    let s = admin.patch(json!({"paused": true})).await;
    assert_eq!(s["state"], "paused", "{s}");
    admin.patch(json!({"paused": false})).await;

    // From the closing: closed, though the operators never closed it.
    clock.set(closes);
    let s = admin.status().await;
    assert_eq!(
        (&s["state"], &s["open"]),
        (&json!("closed"), &json!(true)),
        "{s}"
    );
    assert_eq!(s["eta_seconds"], Value::Null, "{s}");
}

#[tokio::test]
async fn a_room_without_a_schedule_shows_none() {
    let (g, _layer) = memory_gateway().await;
    let s = Admin::new(&g).status().await;
    assert_eq!(
        json!([s["state"], s["opens_at"], s["closes_at"], s["registrants"]]),
        json!(["open", null, null, null]),
        "{s}"
    );
}
