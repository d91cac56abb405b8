//! The capacity controller on a real `redis-server` (`AutoStore` on `RedisStore`, the room
//! library's `auto_*` functions): a damaged record heals and reads as new, never an error;
//! arguments a gateway of this crate never sends are refused before anything is written; and
//! two gateways (two stores, each its own connection, Redis `TIME` the one clock) share one
//! lease and one window. The rules themselves are the conformance suite's `auto_*` cases,
//! which tests/redis/store_redis.rs runs here too.

use crate::redis_harness;

use std::time::Duration;

use redis::AsyncCommands;
use redis_harness::Server;
use tower_waiting_room::__private::{redis_keys, room_script_numbers, ROOM_LIBRARY_NAME};
use tower_waiting_room::auto::Window;
use tower_waiting_room::store::{
    AutoApplied, AutoOff, AutoStore, GatewayId, RedisStore, SettingsChange, Store, StoreErrorKind,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::RoomPolicy;

const T0: u64 = 1_800_000_000_000;

fn store(server: &Server, clock: Option<&ManualClock>) -> RedisStore {
    let builder = RedisStore::builder()
        .url(server.url())
        .timeout(Duration::from_secs(5));
    match clock {
        Some(clock) => builder.manual_clock(clock.clone()),
        None => builder,
    }
    .build()
    .expect("the store builds")
}

async fn connection(server: &Server) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The controller's record of `room` under the store's keys: beside the room's own.
fn record(store: &RedisStore, room: &str) -> String {
    let seq = redis_keys(store, room)[0].clone();
    format!(
        "{}auto",
        seq.strip_suffix("seq").expect("the first key is seq")
    )
}

/// Counts as a gateway reports them: `ok` requests at `ms`, `errors` failed.
fn counts(ok: u64, ms: u64, errors: u64, load: Option<u8>) -> Window {
    let mut w = Window {
        ok,
        errors,
        load,
        ..Window::default()
    };
    w.latencies.record_n(Duration::from_millis(ms), ok);
    w
}

/// A record of the wrong type, or with every field damaged, is healed by the next call and read
/// as a new one: on, no lease, an empty window, no capacity written. No call fails on it; the
/// fields of a newer version (names this one does not know) are left as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_record_heals_and_reads_as_new() {
    let server = redis_harness::shared_server();
    let clock = ManualClock::new(T0);
    let store = store(server, Some(&clock));
    let mut c = connection(server).await;
    let (window, lease) = (5_000, 11_000);

    // Keys of every other type: each call heals it, none fails.
    for (i, kind) in ["string", "list", "set", "zset"].into_iter().enumerate() {
        let policy = RoomPolicy::new(&format!("auto-type-{i}"), 4);
        let key = record(&store, &policy.room);
        let damage = |c: &mut redis::aio::MultiplexedConnection| {
            let (mut c, key) = (c.clone(), key.clone());
            async move {
                let _: () = c.del(&key).await.unwrap();
                let _: () = match kind {
                    "string" => c.set(&key, "off").await.unwrap(),
                    "list" => c.rpush(&key, "off").await.unwrap(),
                    "set" => c.sadd(&key, "off").await.unwrap(),
                    _ => c.zadd(&key, "off", 1).await.unwrap(),
                };
            }
        };
        let a = GatewayId::random();
        damage(&mut c).await;
        let applied = store.auto_apply(&policy, a, 9, None, "nine").await.unwrap();
        assert_eq!(
            applied,
            AutoApplied::NotDeciding,
            "{kind}: no lease is read"
        );
        damage(&mut c).await;
        store
            .auto_switch(&policy, Some(AutoOff::SetByHand), None)
            .await
            .unwrap();
        let t: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(t, "hash", "{kind}");
        damage(&mut c).await;
        let seen = store
            .auto_report(&policy, a, &counts(3, 10, 0, None), window, lease)
            .await
            .unwrap();
        assert!(seen.deciding && seen.off.is_none(), "{kind}: {seen:?}");
        assert!(seen.window.is_none() && seen.status.is_none(), "{kind}");
        assert_eq!(
            store.auto_apply(&policy, a, 9, None, "nine").await.unwrap(),
            AutoApplied::Applied { before: 4 },
            "{kind}: no capacity written, so any is accepted"
        );
        assert_eq!(store.stats(&policy).await.unwrap().settings.capacity, 9);
    }

    // Every field damaged, as a hand edit or another program would leave it.
    let policy = RoomPolicy::new("auto-fields", 4);
    let key = record(&store, &policy.room);
    let (a, b) = (GatewayId::random(), GatewayId::random());
    store
        .auto_report(&policy, a, &counts(5, 10, 1, Some(50)), window, lease)
        .await
        .unwrap();
    assert_eq!(
        store.auto_apply(&policy, a, 6, None, "six").await.unwrap(),
        AutoApplied::Applied { before: 4 }
    );
    let holder = a.to_string().to_uppercase();
    let long = "x".repeat(201);
    let garbage: [(&str, &str); 15] = [
        ("off", "maybe"),
        ("holder", &holder),
        ("ends", "inf"),
        ("since", "1e3"),
        ("ok", "2.5"),
        ("errors", "-1"),
        ("timeouts", "0x10"),
        ("load", "101"),
        ("cap", "0"),
        ("status", &long),
        ("l5", "nan"),
        ("l7", "007"),
        // Not this version's fields: left alone.
        ("l007", "1"),
        ("l129", "1"),
        ("newer", "kept"),
    ];
    let _: () = c.hset_multiple(&key, &garbage).await.unwrap();
    let seen = store
        .auto_report(&policy, b, &Window::default(), window, lease)
        .await
        .unwrap();
    assert!(seen.deciding, "a damaged lease is none: {seen:?}");
    assert_eq!(
        (seen.off, seen.status),
        (None, None),
        "read as on, no status"
    );
    for (field, _) in &garbage[..12] {
        let kept: Option<String> = c.hget(&key, *field).await.unwrap();
        let rewritten = ["holder", "ends", "since", "ok", "errors", "timeouts"].contains(field);
        assert!(
            rewritten || kept.is_none(),
            "{field} deleted, not kept: {kept:?}"
        );
    }
    for (field, value) in &garbage[12..] {
        let kept: Option<String> = c.hget(&key, *field).await.unwrap();
        assert_eq!(kept.as_deref(), Some(*value), "{field}");
    }
    let holder: String = c.hget(&key, "holder").await.unwrap();
    assert_eq!(holder, b.to_string());
    // The counts read as none: the window holds what was reported since, nothing of theirs.
    clock.advance(Duration::from_millis(window));
    let w = store
        .auto_report(&policy, b, &counts(2, 10, 0, None), window, lease)
        .await
        .unwrap()
        .window
        .expect("the window, to the new holder");
    assert_eq!(
        (w.ok, w.errors, w.timeouts, w.load),
        (2, 0, 0, None),
        "{w:?}"
    );
    assert_eq!(w.start_ms, T0, "{w:?}");
    // No capacity written as far as the record says: any is accepted, the room's is kept.
    assert_eq!(
        store
            .auto_apply(&policy, b, 7, None, "seven")
            .await
            .unwrap(),
        AutoApplied::Applied { before: 6 }
    );
}

/// `FCALL` of the controller's function `op` with `keys` and `args`.
fn fcall(op: &str, keys: &[String], args: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(format!("{ROOM_LIBRARY_NAME}_{op}")).arg(keys.len());
    for k in keys {
        cmd.arg(k);
    }
    for a in args {
        cmd.arg(*a);
    }
    cmd
}

/// Arguments a gateway of this crate never sends are refused with an error reply (`WRARGS`,
/// `WRCLOCK` for the time), classed by its code, before anything is written: no report takes
/// the lease or counts, no apply writes a capacity, no switch writes a reason. The store
/// refuses the same before sending anything. A report touches the record alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_refused_and_nothing_is_written() {
    let server = Server::start(&["--save", ""]);
    let store = store(&server, None);
    let mut c = connection(&server).await;
    let policy = RoomPolicy::new("auto-args", 4);
    let key = record(&store, &policy.room);
    let gateway = GatewayId::random();
    let seen = store
        .auto_report(&policy, gateway, &Window::default(), 5_000, 10_000)
        .await
        .unwrap();
    assert!(seen.deciding);
    assert_eq!(server.dbsize(), 1, "a report touches the record alone");
    let before = server.writes_and_keys();

    let id = gateway.to_string();
    let report = |over: &[(usize, &[u8])]| {
        let mut args: Vec<&[u8]> = vec![
            b"0",
            id.as_bytes(),
            b"5000",
            b"10000",
            b"1",
            b"0",
            b"0",
            b"-1",
            b"3 1 ",
        ];
        for &(at, value) in over {
            args[at] = value;
        }
        fcall("auto_report", std::slice::from_ref(&key), &args)
    };
    let upper = id.to_uppercase();
    let mut refused: Vec<(String, redis::Cmd, &str)> = Vec::new();
    for (at, value, code) in [
        (0, &b"soon"[..], "WRCLOCK"),
        (0, b"12", "WRCLOCK"),
        (1, upper.as_bytes(), "WRARGS"),
        (1, b"0000000000000000", "WRARGS"),
        (1, b"abc", "WRARGS"),
        (2, b"0", "WRARGS"),
        (2, b"3600001", "WRARGS"),
        (3, b"1e3", "WRARGS"),
        (4, b"-1", "WRARGS"),
        (5, b"2.5", "WRARGS"),
        (6, b"inf", "WRARGS"),
        (4, b"9007199254740994", "WRARGS"),
        (7, b"101", "WRARGS"),
        (7, b"-2", "WRARGS"),
        (8, b"129 1 ", "WRARGS"),
        (8, b"3 0 ", "WRARGS"),
        (8, b"3 1 3 1 ", "WRARGS"),
        (8, b"3 1", "WRARGS"),
        (8, b"03 1 ", "WRARGS"),
        (8, b"x", "WRARGS"),
    ] {
        let what = format!(
            "report argument {} = {:?}",
            at + 1,
            String::from_utf8_lossy(value)
        );
        refused.push((what, report(&[(at, value)]), code));
    }
    refused.push((
        "a report of two arguments".to_owned(),
        fcall(
            "auto_report",
            std::slice::from_ref(&key),
            &[b"0", id.as_bytes()],
        ),
        "WRARGS",
    ));

    let mut room = redis_keys(&store, &policy.room).to_vec();
    room.push(key.clone());
    let [line, numbers] = room_script_numbers(&policy);
    let apply_rate = |gateway: &[u8], capacity: &[u8], rate: &[u8], status: &[u8]| {
        fcall(
            "auto_apply",
            &room,
            &[
                b"0",
                line.as_bytes(),
                numbers.as_bytes(),
                b"0",
                gateway,
                capacity,
                rate,
                status,
            ],
        )
    };
    let apply = |gateway: &[u8], capacity: &[u8], status: &[u8]| {
        apply_rate(gateway, capacity, b"-1", status)
    };
    let long = vec![b'x'; 201];
    for (what, cmd) in [
        ("a capacity of 0", apply(id.as_bytes(), b"0", b"")),
        ("a capacity of inf", apply(id.as_bytes(), b"inf", b"")),
        (
            "a capacity beyond u32",
            apply(id.as_bytes(), b"4294967296", b""),
        ),
        ("a gateway in capitals", apply(upper.as_bytes(), b"5", b"")),
        ("a status of 201 bytes", apply(id.as_bytes(), b"5", &long)),
        ("a rate of 0", apply_rate(id.as_bytes(), b"5", b"0", b"")),
        ("a rate of -2", apply_rate(id.as_bytes(), b"5", b"-2", b"")),
        (
            "a rate beyond u32",
            apply_rate(id.as_bytes(), b"5", b"4294967296", b""),
        ),
    ] {
        refused.push((what.to_owned(), cmd, "WRARGS"));
    }
    for reason in [&b"tired"[..], b"SET_BY_HAND"] {
        let what = format!("a switch off for {:?}", String::from_utf8_lossy(reason));
        refused.push((
            what,
            fcall("auto_switch", std::slice::from_ref(&key), &[reason, b""]),
            "WRARGS",
        ));
    }
    let long_terms = [b"t".as_slice(), &long, b"x"].concat();
    for (what, args) in [
        ("a switch of one argument", vec![&b""[..]]),
        ("a switch of three arguments", vec![b"", b"", b""]),
        ("terms without their t", vec![b"", b"5-50, p95 300ms"]),
        ("terms of 202 bytes", vec![b"", &long_terms]),
    ] {
        refused.push((
            what.to_owned(),
            fcall("auto_switch", std::slice::from_ref(&key), &args),
            "WRARGS",
        ));
    }
    for (what, cmd, code) in refused {
        let e = cmd
            .query_async::<redis::Value>(&mut c)
            .await
            .expect_err(&what);
        assert_eq!(e.code(), Some(code), "{what}: {e}");
    }
    assert_eq!(server.writes_and_keys(), before, "nothing written");

    // The store refuses the same before sending: a protocol error, nothing written.
    let e = store
        .auto_report(&policy, gateway, &Window::default(), 0, 10_000)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Protocol, "{e}");
    let e = store
        .auto_report(&policy, gateway, &Window::default(), 5_000, 3_600_001)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Protocol, "{e}");
    let e = store
        .auto_apply(&policy, gateway, 0, None, "")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Protocol, "{e}");
    let e = store
        .auto_apply(&policy, gateway, 5, None, &"x".repeat(201))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Protocol, "{e}");
    assert_eq!(server.writes_and_keys(), before, "nothing written");
    // And what the store sends is taken: the lease is still the gateway's.
    assert_eq!(
        store
            .auto_apply(&policy, gateway, 5, None, &"x".repeat(200))
            .await
            .unwrap(),
        AutoApplied::Applied { before: 4 }
    );
}

/// Two gateways, two stores on one server, on Redis `TIME`: the first to report holds the
/// lease and alone is handed the window, with both gateways' counts; the other's decision is
/// refused; when the holder stops reporting its lease runs out and the other takes it over,
/// with the counts gathered meanwhile; a capacity an operator configures in between turns the
/// controller off for both, and on again it goes on from that capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_share_one_lease_and_one_window() {
    let server = redis_harness::shared_server();
    let (one, two) = (store(server, None), store(server, None));
    let policy = RoomPolicy::new("auto-fleet", 4);
    let (a, b) = (GatewayId::random(), GatewayId::random());
    // A window of 300 ms; a lease of 2 s, far beyond any pause between two steps here.
    let (window, lease) = (300, 2_000);
    let report = |store: &RedisStore, g: GatewayId, counts: Window| {
        let (store, policy) = (store.clone(), policy.clone());
        async move {
            store
                .auto_report(&policy, g, &counts, window, lease)
                .await
                .unwrap()
        }
    };

    let first = report(&one, a, counts(10, 20, 0, Some(30))).await;
    assert!(first.deciding && first.window.is_none(), "{first:?}");
    let other = report(&two, b, counts(20, 200, 4, Some(60))).await;
    assert!(!other.deciding && other.window.is_none(), "{other:?}");
    assert_eq!(
        two.auto_apply(&policy, b, 9, None, "b").await.unwrap(),
        AutoApplied::NotDeciding,
        "not the holder"
    );
    tokio::time::sleep(Duration::from_millis(window + 50)).await;
    let not_b = report(&two, b, counts(1, 20, 0, None)).await;
    assert!(!not_b.deciding && not_b.window.is_none(), "{not_b:?}");
    let handed = report(&one, a, Window::default()).await;
    let w = handed.window.expect("the window, to the holder");
    assert_eq!((w.ok, w.errors, w.load), (31, 4, Some(60)), "{w:?}");
    assert_eq!(w.latencies.count(), 31);
    assert!(w.end_ms - w.start_ms >= window, "{w:?}");
    assert_eq!(
        one.auto_apply(&policy, a, 5, None, "a raised")
            .await
            .unwrap(),
        AutoApplied::Applied { before: 4 }
    );
    let seen = report(&two, b, counts(3, 20, 0, None)).await;
    assert_eq!(seen.status.as_deref(), Some("a raised"));

    // The holder stops reporting: its lease runs out, and the other takes it, with the counts
    // reported meanwhile; the old holder's decision is refused.
    tokio::time::sleep(Duration::from_millis(lease + 100)).await;
    let taken = report(&two, b, counts(4, 20, 0, None)).await;
    assert!(taken.deciding, "{taken:?}");
    let w = taken.window.expect("a window long over");
    assert_eq!(w.ok, 7, "nothing reported is lost when the decider changes");
    assert!(!report(&one, a, Window::default()).await.deciding);
    assert_eq!(
        one.auto_apply(&policy, a, 8, None, "a again")
            .await
            .unwrap(),
        AutoApplied::NotDeciding
    );

    // An operator sets the capacity in between: it stands, and the controller is off for both.
    one.configure(&policy, SettingsChange::new().capacity(6))
        .await
        .unwrap();
    assert_eq!(
        two.auto_apply(&policy, b, 7, None, "b").await.unwrap(),
        AutoApplied::ChangedElsewhere
    );
    assert_eq!(two.stats(&policy).await.unwrap().settings.capacity, 6);
    let seen = report(&one, a, Window::default()).await;
    assert_eq!(seen.off, Some(AutoOff::ChangedElsewhere), "{seen:?}");
    assert_eq!(
        two.auto_apply(&policy, b, 7, None, "b").await.unwrap(),
        AutoApplied::Off(AutoOff::ChangedElsewhere)
    );
    one.auto_switch(&policy, None, None).await.unwrap();
    assert_eq!(report(&two, b, Window::default()).await.off, None);
    assert_eq!(
        two.auto_apply(&policy, b, 7, None, "b on").await.unwrap(),
        AutoApplied::Applied { before: 6 }
    );
    assert_eq!(one.stats(&policy).await.unwrap().settings.capacity, 7);
}
