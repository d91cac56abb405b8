//! Rooms and the shape of the app: the traps of layering each part of an axum app with its own
//! room, then the `WaitingRooms` layer around the whole composed app, whose every room answers its
//! endpoints however the app is composed; an admission to one room does not admit to another,
//! unmatched requests pass untouched, and host rules pick the room.

use super::{
    api, assert_status_of, builder, echo, enter, pages, room, serve_rooms, status_of, vip_pages,
    TOKEN_HEADER,
};
use crate::common;

use std::panic::AssertUnwindSafe;

use axum::routing::get;
use axum::Router;
use common::*;
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use serde_json::Value;
use tower_waiting_room::routing::{Rule, WaitingRooms};

// ===== the traps, as they are in axum 0.8 =====

#[tokio::test]
async fn traps_of_a_room_layered_onto_each_part_of_the_app() {
    let clock = clock();
    let part = |id: &str, path: &str| {
        Router::new()
            .route(path, get(echo))
            .layer(room(id, 5, &clock))
    };
    let part_with_fallback = |id: &str, path: &str| {
        Router::new()
            .route(path, get(echo))
            .fallback(|| async { "fallback" })
            .layer(room(id, 5, &clock))
    };

    // Both parts carry a fallback (so that their rooms' endpoints answer): no merge at all.
    let merged = std::panic::catch_unwind(AssertUnwindSafe(|| {
        part_with_fallback("a", "/a").merge(part_with_fallback("b", "/b"))
    }));
    let message = merged.expect_err("axum refuses the merge");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| message.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains("both have a fallback"), "{message}");

    // One fallback, or none: room a's endpoint reaches room b's layer (the merged router's
    // fallback), which takes it for a page of its own and redirects with its own cookie.
    for (what, app) in [
        (
            "one fallback",
            part("a", "/a").merge(part_with_fallback("b", "/b")),
        ),
        ("no fallback", part("a", "/a").merge(part("b", "/b"))),
    ] {
        let http = serve(app).await;
        let reply = http.send(Method::GET, &status_of("a"), &[]).await;
        assert_eq!(reply.status, StatusCode::FOUND, "{what}");
        assert!(reply.set_cookie("wr_b_q").is_some(), "{what}: {reply:?}");
    }

    // Nested parts: the rooms' endpoints are outside every nest, so nothing answers them.
    let nested = Router::new()
        .route("/", get(echo))
        .nest("/a", part("a", "/x"))
        .nest("/b", part_with_fallback("b", "/x"));
    let http = serve(nested).await;
    for id in ["a", "b"] {
        let reply = http.send(Method::GET, &status_of(id), &[]).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{id}");
    }

    // `Router::layer` last does reach unmatched paths in axum 0.8 (it wraps the fallback), but
    // a `fallback` set after it replaces the wrapped one, silently.
    let late_fallback = Router::new()
        .route("/", get(echo))
        .layer(room("a", 5, &clock))
        .fallback(|| async { "fallback" });
    let http = serve(late_fallback).await;
    let reply = http.send(Method::GET, &status_of("a"), &[]).await;
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (StatusCode::OK, "fallback")
    );
}

// ===== the one way: endpoints answer however the app is composed =====

#[tokio::test]
async fn every_room_answers_its_endpoints_however_the_app_is_composed() {
    let clock = clock();
    let rooms = WaitingRooms::builder()
        .room(Rule::path_prefix("/vip"), room("vip", 10, &clock))
        .default_room(room("main", 10, &clock))
        .build()
        .unwrap();
    let fallback = || async { (StatusCode::NOT_FOUND, "the app's fallback") };
    let compositions: Vec<(&str, Router)> = vec![
        (
            "merged",
            pages()
                .merge(api())
                .merge(Router::new().route("/vip", get(echo))),
        ),
        (
            "merged, with a fallback",
            pages()
                .merge(api())
                .merge(Router::new().route("/vip", get(echo)))
                .fallback(fallback),
        ),
        ("nested", pages().nest("/vip", vip_pages()).merge(api())),
        (
            "nested, with a fallback in the nest and outside",
            pages()
                .nest("/vip", vip_pages().fallback(fallback))
                .merge(api())
                .fallback(fallback),
        ),
    ];
    for (what, app) in compositions {
        let http = serve_rooms(&rooms, app).await;
        for id in ["main", "vip"] {
            let reply = http.send(Method::GET, &status_of(id), &[]).await;
            assert_status_of(&reply, id, what);
            assert_eq!(reply.json()["state"], "unknown", "{what}");
        }
        // And the rooms' pages: each in its own room.
        let mut jar = Jar::new();
        let reply = enter(&http, &mut jar, "/vip").await;
        assert_eq!(reply.json()["admitted_to"], "vip", "{what}");
        let reply = enter(&http, &mut jar, "/").await;
        assert_eq!(reply.json()["admitted_to"], "main", "{what}");
    }
}

#[tokio::test]
async fn an_admission_to_one_room_does_not_admit_to_another() {
    let clock = clock();
    let main = room("main", 5, &clock);
    let vip = room("vip", 5, &clock);
    let rooms = WaitingRooms::builder()
        .room(Rule::path_prefix("/vip"), vip)
        .default_room(main)
        .build()
        .unwrap();
    let http = serve_rooms(&rooms, pages().nest("/vip", vip_pages())).await;

    let mut jar = Jar::new();
    let reply = enter(&http, &mut jar, "/").await;
    assert_eq!(reply.json()["admitted_to"], "main");
    let main_token = jar.get("wr_main_a").expect("admitted to main").to_owned();

    // The VIP room knows nothing of it: a first visit there.
    let reply = http.visit(&mut jar, Method::GET, "/vip/lounge").await;
    assert_eq!(reply.status, StatusCode::FOUND);
    assert!(reply.set_cookie("wr_vip_q").is_some());
    // Nor does main's token under the VIP room's name, or in its token header: signed for main.
    let vip_status = status_of("vip");
    for headers in [
        vec![(header::COOKIE, cookie("wr_vip_a", &main_token))],
        vec![(TOKEN_HEADER, HeaderValue::from_str(&main_token).unwrap())],
    ] {
        let reply = http.send(Method::GET, &vip_status, &headers).await;
        assert_eq!(reply.json()["state"], "unknown", "{headers:?}");
        let reply = http.send(Method::GET, "/vip", &headers).await;
        assert_eq!(reply.status, StatusCode::FOUND, "{headers:?}");
    }
    // While main's own status says admitted.
    let reply = http.visit(&mut jar, Method::GET, &status_of("main")).await;
    assert_eq!(reply.json()["state"], "admitted");
    assert_eq!(
        reply.json().get("ticket"),
        None,
        "a browser never gets its token"
    );
}

#[tokio::test]
async fn unmatched_requests_pass_untouched_without_a_default_room() {
    let clock = clock();
    let store = TestStore::new(clock.clone());
    let vip = builder("vip", 5, &clock)
        .store(store.clone())
        .build()
        .unwrap();
    let rooms = WaitingRooms::builder()
        .room(Rule::path_prefix("/vip"), vip)
        .build()
        .unwrap();
    let http = serve_rooms(&rooms, pages().nest("/vip", vip_pages())).await;

    for path in ["/", "/page", "/vipers"] {
        let reply = http.send(Method::GET, path, &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert_eq!(reply.json()["admitted_to"], Value::Null, "{path}");
        assert!(reply.set_cookies().is_empty(), "{path}");
    }
    assert_eq!(
        store.calls().total(),
        0,
        "no store call for requests of no room"
    );
    // Segment-aware: /vip and under it is the room's.
    for path in ["/vip", "/vip/x"] {
        let reply = http.send(Method::GET, path, &[]).await;
        assert_eq!(reply.status, StatusCode::FOUND, "{path}");
    }
}

#[tokio::test]
async fn host_rules_pick_the_room() {
    let clock = clock();
    let rooms = WaitingRooms::builder()
        .room(Rule::host("VIP.example.com"), room("vip", 5, &clock))
        .room(
            Rule::host("shop.example.com").with_path_prefix("/"),
            room("shop", 5, &clock),
        )
        .build()
        .unwrap();
    let http = serve_rooms(&rooms, pages()).await;
    let host = |h: &'static str| vec![(header::HOST, HeaderValue::from_static(h))];
    let reply = http
        .send(Method::GET, "/page", &host("vip.example.com:8080"))
        .await;
    assert_eq!(reply.status, StatusCode::FOUND);
    assert!(reply.set_cookie("wr_vip_q").is_some(), "{reply:?}");
    let reply = http
        .send(Method::GET, "/page", &host("shop.example.com"))
        .await;
    assert!(reply.set_cookie("wr_shop_q").is_some(), "{reply:?}");
    let reply = http
        .send(Method::GET, "/page", &host("other.example.com"))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "no room for another host");
}
