//! Script: the room script through `RedisStore` (an enter/poll mix), the same `FCALL` straight
//! from the client, and a trivial `EVALSHA` beside them on the same Redis.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tower_waiting_room::__private::{redis_keys, room_visitor_call};
use tower_waiting_room::store::{Decision, RedisStore, Store};
use tower_waiting_room::{RoomPolicy, SessionId};

use super::measure::{concurrent_ops, median, round};
use super::redis_server::RedisServer;
use super::{BoxError, Settings, SCRIPT_ROOM};

pub(crate) async fn script_scenarios(
    settings: &Settings,
    redis: &RedisServer,
) -> Result<Map<String, Value>, BoxError> {
    let store = RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(2))
        .build()?;
    let policy = RoomPolicy::new(SCRIPT_ROOM, 1)
        .with_ttls(
            Duration::from_secs(3_600),
            Duration::from_secs(30),
            Duration::from_secs(3_600),
        )
        .with_max_queue_len(10_000_000);
    store.enter(&policy, SessionId::random()).await?; // holds the only slot
    let waiters: Arc<Vec<SessionId>> = Arc::new((0..1_000).map(|_| SessionId::random()).collect());
    for &w in waiters.iter() {
        store.enter(&policy, w).await?;
    }
    let client = redis::Client::open(redis.url())?;
    let conn = client.get_connection_manager().await?;
    let trivial = Arc::new(redis::Script::new("return 1"));
    // The room runs as functions (`FCALL twr_room_v11_<op>`); the store loaded them with its first call.
    let keys = redis_keys(&store, SCRIPT_ROOM);

    let mut script_runs = Vec::new();
    let mut raw_runs = Vec::new();
    let mut evalsha_runs = Vec::new();
    let mut usec = BTreeMap::<&str, Vec<f64>>::new();
    for round in 0..settings.repeats {
        // The room script through the store: half enters (a waiter keeps their place), half polls.
        redis.command(&["CONFIG", "RESETSTAT"])?;
        let ops = concurrent_ops(settings, {
            let (store, policy, waiters) = (store.clone(), policy.clone(), waiters.clone());
            move |i: u64| {
                let (store, policy) = (store.clone(), policy.clone());
                let w = waiters[(i as usize * 7919) % waiters.len()];
                async move {
                    let d = if i.is_multiple_of(2) {
                        store.enter(&policy, w).await
                    } else {
                        store.poll(&policy, w).await
                    };
                    matches!(d, Ok(Decision::Waiting { .. }))
                }
            }
        })
        .await;
        script_runs.push(ops);
        usec.entry("script")
            .or_default()
            .push(redis.usec_per_call("fcall"));

        // The same function with FCALL straight from the client, without the store around it.
        redis.command(&["CONFIG", "RESETSTAT"])?;
        let ops = concurrent_ops(settings, {
            let (conn, keys, waiters) = (conn.clone(), keys.clone(), waiters.clone());
            let p = policy.clone();
            move |i: u64| {
                let (mut conn, keys) = (conn.clone(), keys.clone());
                let w = waiters[(i as usize * 7919) % waiters.len()];
                // The ARGV as the crate writes them: now 0 (the server's TIME), silence not
                // excused.
                let op = if i.is_multiple_of(2) { "enter" } else { "poll" };
                let (function, args) =
                    room_visitor_call(op, &p, w.as_bytes(), None).expect("a visitor's call");
                async move {
                    let mut fcall = redis::cmd("FCALL");
                    fcall.arg(function).arg(keys.len()).arg(&keys[..]);
                    for a in args {
                        fcall.arg(a);
                    }
                    matches!(fcall.query_async::<Vec<i64>>(&mut conn).await, Ok(r) if r.first() == Some(&2))
                }
            }
        })
        .await;
        raw_runs.push(ops);
        usec.entry("script_raw")
            .or_default()
            .push(redis.usec_per_call("fcall"));

        // The ceiling: EVALSHA of `return 1` on the same Redis, same client, same concurrency.
        redis.command(&["CONFIG", "RESETSTAT"])?;
        let ops = concurrent_ops(settings, {
            let (conn, script) = (conn.clone(), trivial.clone());
            move |_| {
                let (mut conn, script) = (conn.clone(), script.clone());
                async move { matches!(script.invoke_async::<_, i64>(&mut conn).await, Ok(1)) }
            }
        })
        .await;
        evalsha_runs.push(ops);
        usec.entry("evalsha")
            .or_default()
            .push(redis.usec_per_call("evalsha"));
        eprintln!(
            "round {}/{}: script {:>8.0} ops/s  script (raw FCALL) {:>8.0} ops/s  EVALSHA return 1 {:>8.0} ops/s",
            round + 1,
            settings.repeats,
            script_runs[round],
            raw_runs[round],
            evalsha_runs[round]
        );
    }
    let script = median(&script_runs);
    let raw = median(&raw_runs);
    let evalsha = median(&evalsha_runs);
    let mut m = Map::new();
    m.insert("script_ops_per_sec".into(), json!(round(script, 0)));
    m.insert("script_raw_ops_per_sec".into(), json!(round(raw, 0)));
    m.insert("evalsha_ops_per_sec".into(), json!(round(evalsha, 0)));
    m.insert("script_ratio".into(), json!(round(script / evalsha, 3)));
    m.insert("script_raw_ratio".into(), json!(round(raw / evalsha, 3)));
    m.insert(
        "redis_usec_per_call".into(),
        json!({
            "script": round(median(&usec["script"]), 2),
            "script_raw": round(median(&usec["script_raw"]), 2),
            "evalsha_return_1": round(median(&usec["evalsha"]), 2),
        }),
    );
    m.insert(
        "script_runs".into(),
        json!({"script": script_runs, "script_raw": raw_runs, "evalsha": evalsha_runs}),
    );
    Ok(m)
}
