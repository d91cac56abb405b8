//! The room's function library on the server: the start-up check (`RedisStore::check`) that reports
//! the server and loads the library, on a cluster's every node too, what it refuses, and the
//! library refusing a malformed schedule argument.

use super::{function_loaded, quick_store, room_functions, store};
use crate::redis_harness;

use std::time::Duration;

use redis_harness::Server;
use tower_waiting_room::store::{RedisCheckError, RedisStore, StoreErrorKind};
use tower_waiting_room::{RoomPolicy, SessionId};

// ===== the start-up check =====

/// Whether `server`'s room library holds the single-use tickets' functions.
fn ticket_functions_loaded(server: &Server) -> bool {
    let functions = room_functions(server);
    ["twr_room_v11_ticket_mint", "twr_room_v11_ticket_redeem"]
        .iter()
        .all(|f| functions.iter().any(|g| g == f))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_the_server_and_loads_the_library() {
    let server = Server::start(&["--maxmemory-policy", "volatile-lru"]);
    let store = quick_store(&server.url());
    let info = store.check().await.expect("a healthy server passes");
    let expected = if redis_harness::server_bin().contains("valkey") {
        "valkey"
    } else {
        "redis"
    };
    assert_eq!(info.server, expected, "{info}");
    assert!(info.version.is_some(), "{info}");
    assert!(!info.cluster && !info.replica, "{info}");
    // volatile-* evicts only keys with a TTL, and the room's keys have none.
    assert_eq!(info.maxmemory_policy.as_deref(), Some("volatile-lru"));
    assert_eq!(info.function_library, "twr_room_v11", "{info}");
    assert!(function_loaded(&server), "library not loaded");
    assert!(
        ticket_functions_loaded(&server),
        "the tickets' functions come with the library"
    );
    let functions = room_functions(&server);
    for f in [
        "twr_room_v11_auto_report",
        "twr_room_v11_auto_apply",
        "twr_room_v11_auto_switch",
    ] {
        assert!(
            functions.iter().any(|g| g == f),
            "the capacity controller's functions come with the library: {f}"
        );
    }
    assert!(
        info.to_string().contains("maxmemory-policy volatile-lru"),
        "{info}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_refuses_a_policy_that_evicts_the_line() {
    let server = Server::start(&["--maxmemory-policy", "allkeys-lru"]);
    let store = quick_store(&server.url());
    match store.check().await {
        Err(RedisCheckError::EvictingPolicy { policy, .. }) => assert_eq!(policy, "allkeys-lru"),
        other => panic!("{other:?}"),
    }
    let e = store.check().await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Misconfigured);
    assert!(e.to_string().contains("allkeys-lru"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_an_unknown_policy_when_info_and_config_are_refused() {
    let server = Server::start(&["--maxmemory-policy", "allkeys-lru"]);
    let created = server
        .command(&[
            "ACL", "SETUSER", "app", "on", ">app-pw", "~*", "+@all", "-info", "-config",
        ])
        .unwrap();
    assert!(created.starts_with("+OK"), "{created}");
    let store = quick_store(&format!("redis://app:app-pw@127.0.0.1:{}/", server.port));
    let info = store
        .check()
        .await
        .expect("a refused CONFIG is not a failure");
    assert_eq!(info.maxmemory_policy, None);
    assert_eq!(info.server, "unknown");
    assert!(
        info.to_string().contains("maxmemory-policy unknown"),
        "{info}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_on_a_replica_an_acl_without_scripting_and_a_dead_server() {
    let primary = Server::start(&[]);
    let port = primary.port.to_string();
    let replica = Server::start(&["--replicaof", "127.0.0.1", &port]);
    let e = quick_store(&replica.url()).check().await.unwrap_err();
    assert!(matches!(e, RedisCheckError::Replica { .. }), "{e:?}");

    primary
        .command(&[
            "ACL",
            "SETUSER",
            "noscript",
            "on",
            ">pw",
            "~*",
            "+@all",
            "-@scripting",
        ])
        .unwrap();
    let url = format!("redis://noscript:pw@127.0.0.1:{}/", primary.port);
    let e = quick_store(&url).check().await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Misconfigured, "{e}");
    assert!(matches!(e, RedisCheckError::Store(_)), "{e:?}");

    let nobody = format!("redis://127.0.0.1:{}/", redis_harness::free_port());
    let e = quick_store(&nobody).check().await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_on_a_cluster_loads_the_library_on_every_node() {
    let cluster = redis_harness::Cluster::start();
    let store = RedisStore::builder()
        .cluster_nodes(cluster.urls())
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let info = store.check().await.expect("a healthy cluster passes");
    assert!(info.cluster && !info.replica, "{info}");
    assert_eq!(info.maxmemory_policy.as_deref(), Some("noeviction"));
    for node in &cluster.nodes {
        // Every primary: redis-rs routes FUNCTION LOAD to all of them.
        assert!(function_loaded(node), "library not loaded on {}", node.port);
        assert!(
            ticket_functions_loaded(node),
            "no ticket functions on {}",
            node.port
        );
    }
}

/// A malformed schedule argument (the script's last, `schedule:...`) is refused with an error,
/// never read as "no schedule", which would open a room that has not opened yet; and it writes
/// nothing. A well-formed one for the same call registers the visitor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_schedule_argument_is_refused_not_read_as_open() {
    let server = Server::start(&[]);
    let store = store(&server);
    let room = "malformed-schedule";
    let keys = tower_waiting_room::__private::redis_keys(&store, room);
    let policy = RoomPolicy::new(room, 5);
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let loaded: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(tower_waiting_room::__private::ROOM_LIBRARY)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(loaded, "twr_room_v11");
    let now = tower_waiting_room::clock::Clock::now_ms(&tower_waiting_room::clock::SystemClock);
    let opens = now + 3_600_000;
    let call = |last: String| {
        let session = SessionId::random();
        let (function, args) = tower_waiting_room::__private::room_visitor_call(
            "enter",
            &policy,
            session.as_bytes(),
            Some(last),
        )
        .unwrap();
        let mut fcall = redis::cmd("FCALL");
        fcall.arg(function).arg(keys.len()).arg(&keys[..]);
        for a in args {
            fcall.arg(a);
        }
        fcall
    };
    for bad in [
        format!("schedule:{opens}:0:1"),
        format!("schedule:{opens}:0:2:17"),
        format!("schedule:x{opens}:0:1:17"),
        "schedule:".to_owned(),
    ] {
        let got: redis::RedisResult<Vec<i64>> = call(bad.clone()).query_async(&mut conn).await;
        let err = got.expect_err(&format!("{bad:?} must be refused"));
        assert!(
            err.to_string().contains("malformed schedule"),
            "{bad:?}: {err}"
        );
    }
    let keys_now: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(keys_now.is_empty(), "a refused call wrote {keys_now:?}");
    let ok: Vec<i64> = call(format!("schedule:{opens}:0:1:17"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        ok[..2],
        [11, opens as i64],
        "a well-formed schedule registers: {ok:?}"
    );
}
