//! Two gateways, one Redis: one line, first come first served across both, and a visitor's
//! cookies good on either; on a Redis Cluster too, and kept apart by a key prefix.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::redis_harness::{shared_cluster, Server};
use crate::support::*;

/// Two gateways in front of one app, sharing one Redis (each test its own server).
struct Fleet {
    a: Gateway,
    b: Gateway,
    app: App,
    redis: Server,
}

/// The file both gateways run: the same secret (`WAITING_ROOM_SECRET`), room `sale` of
/// capacity 1, `extra` keys added to the room.
fn fleet(extra: &str) -> Fleet {
    let redis = Server::start(&[]);
    let app = App::start();
    let file = format!(
        "upstream = \"{}\"\nredis = \"{}\"\n\n[limits]\nupstream_timeout = \"2s\"\n\
         header_read_timeout = \"2s\"\ngrace = \"2s\"\n\n{}{extra}",
        app.url(),
        redis.url(),
        sale_room(1)
    );
    let a = Gateway::start(&file);
    let b = Gateway::start(&file);
    Fleet { a, b, app, redis }
}

/// `(state, position)` from the room's status endpoint through `addr`.
fn where_(addr: SocketAddr, jar: &mut Jar) -> (String, Option<u64>) {
    let (status, body) = room_status(addr, "sale", jar);
    assert_eq!(status, 200, "{body}");
    (
        body["state"].as_str().unwrap_or_default().to_owned(),
        body["position"].as_u64(),
    )
}

fn waits_at(addr: SocketAddr, jar: &mut Jar, position: u64) {
    assert_eq!(
        where_(addr, jar),
        ("waiting".to_owned(), Some(position)),
        "through {addr}"
    );
}

#[test]
fn one_line_across_two_gateways_and_a_cookie_from_one_works_on_the_other() {
    // An admission is trusted without asking the store for 1 s, then renewed from it.
    let f = fleet("refresh = \"1s\"\n");
    let (a, b) = (f.a.addr, f.b.addr);
    let mut first = admitted(a, "/", SHORT);
    let admitted_at = Instant::now();
    // A's admission is good on B: straight to the app, no queueing.
    let res = get(b, "/first-via-b", &mut first);
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(res.text().contains("app page /first-via-b"));
    assert!(res.header("set-cookie").is_none(), "{:?}", res.headers);

    // B counts A's visitor: the second waits, first in line, on either gateway.
    let mut second = waiting(b, "/");
    waits_at(b, &mut second, 1);
    waits_at(a, &mut second, 1);
    let (_, body) = room_status(a, "sale", &mut second);
    assert_eq!(body["waiting"], 1, "{body}");
    let res = get(a, "/second-via-a", &mut second);
    assert_eq!(res.status, 429, "{}", res.text());

    // Past the refresh, B renews A's admission from the shared store.
    std::thread::sleep(Duration::from_millis(1200).saturating_sub(admitted_at.elapsed()));
    let res = get(b, "/first-renewed-via-b", &mut first);
    assert_eq!(res.status, 200, "{}", res.text());
    let renewed = res
        .headers
        .iter()
        .any(|(k, v)| k == "set-cookie" && v.starts_with("wr_sale_a="));
    assert!(renewed, "no renewed admission: {:?}", res.headers);
    waits_at(b, &mut second, 1);
    let seen = f.app.seen();
    assert!(seen.iter().any(|l| l == "GET /first-via-b"), "{seen:?}");
    assert!(
        seen.iter().any(|l| l == "GET /first-renewed-via-b"),
        "{seen:?}"
    );
    assert!(
        !seen.iter().any(|l| l.starts_with("GET /second")),
        "{seen:?}"
    );
}

#[test]
fn first_come_first_served_across_two_gateways() {
    // Slots run out 2 s after their last request (refresh must be shorter).
    let f = fleet("active_ttl = \"2s\"\nrefresh = \"1s\"\ngrant_ttl = \"10s\"\n");
    let (a, b) = (f.a.addr, f.b.addr);
    let mut inside = admitted(a, "/", SHORT);
    let mut x = waiting(a, "/x");
    let mut y = waiting(b, "/y");
    let mut z = waiting(a, "/z");
    // Each one's place, asked through the other gateway.
    waits_at(b, &mut x, 1);
    waits_at(a, &mut y, 2);
    waits_at(b, &mut z, 3);

    // The one inside leaves through B: the slot is X's, though Y and Z ask first.
    let res = request(
        b,
        "POST",
        "/__waitingroom/sale/leave",
        &[("accept", "application/json")],
        b"",
        &mut inside,
    );
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.json()["state"], "left");
    let start = Instant::now();
    loop {
        let (ys, _) = where_(b, &mut y);
        let (zs, _) = where_(a, &mut z);
        assert_eq!((ys.as_str(), zs.as_str()), ("waiting", "waiting"));
        if where_(b, &mut x).0 == "admitted" {
            break;
        }
        assert!(start.elapsed() < SHORT, "X never let in");
        std::thread::sleep(Duration::from_millis(50));
    }
    let res = get(a, "/x-inside", &mut x);
    assert_eq!(res.status, 200, "X claims through A: {}", res.text());
    waits_at(a, &mut y, 1);
    waits_at(b, &mut z, 2);

    // X goes quiet; when its slot runs out it is Y's turn, not Z's.
    let start = Instant::now();
    loop {
        let (zs, zp) = where_(a, &mut z);
        assert_eq!(zs, "waiting");
        let (ys, yp) = where_(b, &mut y);
        if ys == "admitted" {
            break;
        }
        assert_eq!((ys.as_str(), yp, zp), ("waiting", Some(1), Some(2)));
        assert!(start.elapsed() < SHORT, "X's slot never ran out");
        std::thread::sleep(Duration::from_millis(50));
    }
    let res = get(b, "/y-inside", &mut y);
    assert_eq!(res.status, 200, "Y claims through B: {}", res.text());
    waits_at(a, &mut z, 1);
    let seen = f.app.seen();
    let order: Vec<&str> = seen
        .iter()
        .filter_map(|l| l.strip_prefix("GET /"))
        .filter(|p| p.ends_with("-inside"))
        .collect();
    assert_eq!(order, ["x-inside", "y-inside"], "{seen:?}");
}

/// The file of a gateway with `store` (the file's `redis*` keys), room `sale` of capacity 1.
fn file_on(app: &App, store: &str) -> String {
    format!(
        "upstream = \"{}\"\n{store}\n\n[limits]\nupstream_timeout = \"2s\"\n\n{}",
        app.url(),
        sale_room(1)
    )
}

/// A gateway running [`file_on`].
fn gateway_on(app: &App, store: &str) -> Gateway {
    Gateway::start(&file_on(app, store))
}

#[test]
fn a_reload_that_moves_the_prefix_or_the_deadline_is_refused() {
    let redis = Server::start(&[]);
    let app = App::start();
    let url = redis.url();
    let gw = gateway_on(&app, &format!("redis = \"{url}\"\nredis_prefix = \"shop\""));
    let mut inside = admitted(gw.addr, "/", SHORT);
    let changes = [
        format!("redis = \"{url}\"\nredis_prefix = \"other\""),
        format!("redis = \"{url}\"\nredis_prefix = \"shop\"\nredis_timeout = \"1s\""),
    ];
    for (n, store) in changes.iter().enumerate() {
        std::fs::write(&gw.config, file_on(&app, store)).unwrap();
        gw.signal("HUP");
        let start = Instant::now();
        while gw.log().matches("reload refused").count() <= n {
            assert!(
                start.elapsed() < SHORT,
                "reload {n} not refused:\n{}",
                gw.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = gw.log();
        let last = log.lines().rfind(|l| l.contains("reload refused")).unwrap();
        assert!(last.contains("the redis settings changed"), "{last}");
        assert!(!log.contains("reloaded"), "{log}");
        // The running store stays: the visitor inside is still inside, under `shop`.
        let res = get(gw.addr, "/still-inside", &mut inside);
        assert_eq!(res.status, 200, "after reload {n}: {}", res.text());
    }
    assert!(keys_under(&redis, "shop") > 0);
    assert_eq!(keys_under(&redis, "other"), 0);
}

#[test]
fn two_gateways_on_a_redis_cluster_share_one_line_under_their_prefix() {
    let cluster = shared_cluster();
    let app = App::start();
    let prefix = format!("gw{}", std::process::id());
    let nodes = cluster
        .urls()
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let store =
        format!("redis_cluster = [{nodes}]\nredis_prefix = \"{prefix}\"\nredis_timeout = \"1s\"");
    let a = gateway_on(&app, &store);
    let b = gateway_on(&app, &store);
    // One slot: the first in through A, the second waits through B, first in line on both.
    let _inside = admitted(a.addr, "/", SHORT);
    let mut second = waiting(b.addr, "/");
    waits_at(b.addr, &mut second, 1);
    waits_at(a.addr, &mut second, 1);
    // The room's keys are on the cluster, under the prefix.
    let keys: u64 = cluster.nodes.iter().map(|n| keys_under(n, &prefix)).sum();
    assert!(keys > 0, "no key under {prefix}");
}

/// How many keys of `server` start with `{prefix}:` (`KEYS` answers an array: its length).
fn keys_under(server: &Server, prefix: &str) -> u64 {
    let reply = server
        .command(&["KEYS", &format!("{prefix}:*")])
        .unwrap_or_default();
    reply
        .trim()
        .strip_prefix('*')
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn two_prefixes_on_one_redis_are_two_rooms() {
    let redis = Server::start(&[]);
    let app = App::start();
    let on = |prefix: &str| {
        gateway_on(
            &app,
            &format!("redis = \"{}\"\nredis_prefix = \"{prefix}\"", redis.url()),
        )
    };
    let (staging, production) = (on("staging"), on("production"));
    // Each room has its one slot: taken on one, still free on the other.
    let _a = admitted(staging.addr, "/", SHORT);
    let _b = admitted(production.addr, "/", SHORT);
    let _c = waiting(staging.addr, "/");
    for prefix in ["staging", "production"] {
        assert!(keys_under(&redis, prefix) > 0, "no key under {prefix}");
    }
    assert_eq!(
        keys_under(&redis, "twr"),
        0,
        "a key under the default prefix"
    );
}

/// The metrics path needs no token: a flood of requests to it must not become a flood of calls
/// to the store every gateway shares. The rooms' gauges are read from it at most once a second.
#[test]
fn a_flood_of_metrics_requests_is_not_a_flood_of_store_calls() {
    let f = fleet("");
    let scrape = || {
        let res = get(f.a.addr, "/__gateway/metrics", &mut Jar::default());
        assert_eq!(res.status, 200, "{}", res.text());
        res
    };
    // The gauges are there (read from the store on the first scrape).
    assert!(scrape().text().contains("waiting_room_waiting"));
    let before = f.redis.command_calls("fcall");
    let start = Instant::now();
    for _ in 0..60 {
        scrape();
    }
    let calls = f.redis.command_calls("fcall") - before;
    let seconds = start.elapsed().as_secs();
    // A read a second at most, and the gateways' own snapshot refreshes meanwhile.
    assert!(
        calls <= 3 * (seconds + 2),
        "{calls} store calls for 60 scrapes in {seconds} s"
    );
}
