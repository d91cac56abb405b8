//! Bad combinations of rooms, rules and gates: typed `ConfigError`s at build time.

use super::{builder, room};
use crate::common;

use common::*;
use tower_waiting_room::routing::{Rule, WaitingRooms};
use tower_waiting_room::ConfigError;

// ===== build errors =====

#[test]
fn bad_combinations_are_typed_errors_at_build_time() {
    let clock = clock();
    let r = |id: &str| room(id, 5, &clock);

    let overlapping = WaitingRooms::builder()
        .room(Rule::path_prefix("/vip"), r("vip"))
        .room(Rule::path_prefix("/vip/gold"), r("gold"))
        .build()
        .err();
    assert!(
        matches!(&overlapping, Some(ConfigError::OverlappingRules { first_room, second_room, .. })
            if first_room == "vip" && second_room == "gold"),
        "{overlapping:?}"
    );
    let message = overlapping.unwrap().to_string();
    assert!(
        message.contains("\"vip\"") && message.contains("\"gold\""),
        "{message}"
    );

    let gates_overlap = WaitingRooms::builder()
        .gate_only_room(r("a"))
        .gate_only_room(r("b"))
        .gate(Rule::path("/api/*"), "a")
        .gate(Rule::post("/api/orders"), "b")
        .build()
        .err();
    assert!(matches!(
        gates_overlap,
        Some(ConfigError::OverlappingRules { .. })
    ));

    // Disjoint by host, by methods, by segments; predicates are not checked; one room may have
    // overlapping rules of its own.
    let c = r("c");
    let fine = WaitingRooms::builder()
        .room(Rule::host("a.example").with_path_prefix("/x"), r("a"))
        .room(Rule::host("b.example").with_path_prefix("/x"), r("b"))
        .room(Rule::path_prefix("/vipers"), c.clone())
        .room(Rule::path_prefix("/vip"), r("d"))
        .room(Rule::when(|_| true), r("e"))
        .room(Rule::path("/c/*"), c)
        .gate(Rule::post("/x"), "a")
        .gate(Rule::get("/x"), "b")
        .build();
    assert!(fine.is_ok(), "{fine:?}");

    assert_eq!(
        WaitingRooms::builder()
            .default_room(r("main"))
            .gate(Rule::post("/checkout"), "drop")
            .build()
            .err(),
        Some(ConfigError::UnknownGateRoom {
            room: "drop".into()
        })
    );
    assert_eq!(
        WaitingRooms::builder()
            .room(Rule::path_prefix("/a"), r("same"))
            .room(Rule::path_prefix("/b"), r("same"))
            .build()
            .err(),
        Some(ConfigError::DuplicateRoom {
            room: "same".into()
        })
    );
    let shared = builder("other", 5, &clock)
        .cookie_name("wr_main")
        .build()
        .unwrap();
    assert_eq!(
        WaitingRooms::builder()
            .room(Rule::path_prefix("/a"), r("main"))
            .room(Rule::path_prefix("/b"), shared)
            .build()
            .err(),
        Some(ConfigError::SharedCookieName {
            name: "wr_main_q".into()
        })
    );
    // Endpoints nested under another room's: `/w/x/` (room x at prefix `/w`) would take
    // `/w/x/y/status` (room y at prefix `/w/x`).
    let outer = builder("x", 5, &clock).path_prefix("/w").build().unwrap();
    let inner = builder("y", 5, &clock).path_prefix("/w/x").build().unwrap();
    assert_eq!(
        WaitingRooms::builder()
            .room(Rule::path_prefix("/a"), outer)
            .room(Rule::path_prefix("/b"), inner)
            .build()
            .err(),
        Some(ConfigError::NestedEndpoints {
            outer_room: "x".into(),
            inner_room: "y".into(),
        })
    );
    for bad in [
        Rule::path("checkout"),
        Rule::path_prefix(""),
        Rule::methods([]),
    ] {
        let err = WaitingRooms::builder().room(bad, r("a")).build().err();
        assert!(
            matches!(err, Some(ConfigError::InvalidRule { .. })),
            "{err:?}"
        );
    }
}
