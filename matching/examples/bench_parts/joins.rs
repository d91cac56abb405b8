//! Joins in batches, measured side by side in one run on one Redis.
//!
//! **What Redis can place** (`joins_placed_vs_evalsha`): `redis-benchmark -c 32` sends the room's
//! batch function (`<LIBRARY>_join_batch`) with [`BATCH`] new sessions a call (each id a
//! `__rand_int__` template, its last bytes the newcomer's index in the batch (never a NUL, which no argument of a process may hold), so no two of one
//! batch are the same), beside `EVALSHA "return 1"`, round by round; joins placed per second
//! (calls per second times [`BATCH`]) over `EVALSHA` calls per second, the median of the
//! rounds' ratios. The C client keeps the server saturated, so this is the server's cost per
//! join beside its cost per trivial call: what a fleet of gateways can place on one Redis.
//!
//! **Through the store** (`store_joins_vs_evalsha`): newcomers placed per second by
//! `RedisStore::join` (which gathers the joins that arrive while its call for the room is in
//! flight into one `FCALL`) from [`CONCURRENCY`] tasks at once, beside `EVALSHA "return 1"` from
//! as many tasks on one multiplexed connection, interleaved: one gateway's process, whose own
//! work per join counts here.
//!
//! **The join's latency at a steady rate**: [`RATE`] arrivals a second (in steps of a
//! millisecond), each a join made at its time whether or not the ones before it have been
//! answered (an opening does not wait for the store), for [`LATENCY_SECS`] s; the p50 and p99
//! from the call to its answer (`join_p50_us_at_rate`, `join_p99_us_at_rate`), beside the same
//! for `EVALSHA "return 1"` at the same rate (`evalsha_p99_us_at_rate`): what batching adds to a
//! newcomer's wait is the difference.
//!
//! Each room starts full (one slot, held) with one waiter, so every join is a newcomer joining
//! the line, as in an opening; its keys are deleted after each round.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tower_waiting_room::__private::redis_keys;
use tower_waiting_room::store::{Decision, RedisStore, Store};
use tower_waiting_room::{RoomPolicy, SessionId};

use super::measure::{concurrent_ops, median, percentile, round};
use super::redis_scale::redis_benchmark;
use super::redis_server::RedisServer;
use super::{BoxError, Settings};

/// Newcomers per call in the `redis-benchmark` runs: the store's largest batch.
const BATCH: usize = 64;

/// Joins (and `EVALSHA` calls) in flight at once.
const CONCURRENCY: usize = 64;
/// Arrivals a second for the latency run: an opening's rush at one gateway.
const RATE: u64 = 20_000;
/// How long the latency run lasts.
const LATENCY_SECS: u64 = 2;

fn policy(round: usize) -> RoomPolicy {
    RoomPolicy::new(&format!("bench-joins-{round}"), 1)
        .with_ttls(
            Duration::from_secs(3_600),
            Duration::from_secs(60),
            Duration::from_secs(3_600),
        )
        .with_max_queue_len(16_000_000)
}

/// A full room with one waiter: the fast path's window open.
async fn full_room(store: &RedisStore, round: usize) -> Result<RoomPolicy, BoxError> {
    let p = policy(round);
    store.enter(&p, SessionId::random()).await?;
    store.enter(&p, SessionId::random()).await?;
    Ok(p)
}

/// Deletes the room's keys (a round places millions).
fn drop_room(store: &RedisStore, redis: &RedisServer, p: &RoomPolicy) -> Result<(), BoxError> {
    let keys = redis_keys(store, &p.room);
    let mut args = vec!["DEL"];
    args.extend(keys.iter().map(String::as_str));
    redis.command(&args)?;
    Ok(())
}

pub(crate) async fn scenarios(
    settings: &Settings,
    redis: &RedisServer,
) -> Result<Map<String, Value>, BoxError> {
    let store = RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(2))
        .build()?;
    let client = redis::Client::open(redis.url())?;
    let conn = client.get_multiplexed_async_connection().await?;
    let trivial = Arc::new(redis::Script::new("return 1"));
    let wide = Settings {
        script_concurrency: CONCURRENCY,
        ..settings.clone()
    };
    let mut m = server_side(settings, &store, redis).await?;
    let (mut joins, mut evalsha, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..settings.repeats {
        let p = full_room(&store, r).await?;
        let placed = concurrent_ops(&wide, {
            let (store, p) = (store.clone(), p.clone());
            move |_| {
                let (store, p) = (store.clone(), p.clone());
                async move {
                    matches!(
                        store.join(&p, SessionId::random()).await,
                        Ok(Decision::Waiting { .. })
                    )
                }
            }
        })
        .await;
        drop_room(&store, redis, &p)?;
        let calls = concurrent_ops(&wide, {
            let (conn, script) = (conn.clone(), trivial.clone());
            move |_| {
                let (mut conn, script) = (conn.clone(), script.clone());
                async move { matches!(script.invoke_async::<_, i64>(&mut conn).await, Ok(1)) }
            }
        })
        .await;
        eprintln!(
            "round {}/{}: through the store: joins placed {placed:>9.0}/s  EVALSHA return 1 {calls:>9.0}/s: {:.2}",
            r + 1,
            settings.repeats,
            placed / calls
        );
        joins.push(placed);
        evalsha.push(calls);
        ratios.push(placed / calls);
    }

    // The latency at a steady rate, joins then EVALSHA.
    let p = full_room(&store, settings.repeats).await?;
    let join_lat = at_rate(settings, {
        let (store, p) = (store.clone(), p.clone());
        move || {
            let (store, p) = (store.clone(), p.clone());
            async move {
                matches!(
                    store.join(&p, SessionId::random()).await,
                    Ok(Decision::Waiting { .. })
                )
            }
        }
    })
    .await?;
    drop_room(&store, redis, &p)?;
    let eval_lat = at_rate(settings, {
        let (conn, script) = (conn.clone(), trivial.clone());
        move || {
            let (mut conn, script) = (conn.clone(), script.clone());
            async move { matches!(script.invoke_async::<_, i64>(&mut conn).await, Ok(1)) }
        }
    })
    .await?;
    eprintln!(
        "joins at {RATE}/s: p50 {:.0} us, p99 {:.0} us (EVALSHA return 1: p50 {:.0} us, p99 {:.0} us)",
        percentile(&join_lat, 50.0),
        percentile(&join_lat, 99.0),
        percentile(&eval_lat, 50.0),
        percentile(&eval_lat, 99.0),
    );

    m.insert(
        "store_joins_placed_per_sec".into(),
        json!(round(median(&joins), 0)),
    );
    m.insert(
        "store_joins_evalsha_per_sec".into(),
        json!(round(median(&evalsha), 0)),
    );
    m.insert(
        "store_joins_vs_evalsha".into(),
        json!(round(median(&ratios), 3)),
    );
    m.insert(
        "store_joins_runs".into(),
        json!({"placed": joins, "evalsha": evalsha, "concurrency": CONCURRENCY}),
    );
    m.insert("join_rate".into(), json!(RATE));
    m.insert(
        "join_p50_us_at_rate".into(),
        json!(round(percentile(&join_lat, 50.0), 0)),
    );
    m.insert(
        "join_p99_us_at_rate".into(),
        json!(round(percentile(&join_lat, 99.0), 0)),
    );
    m.insert(
        "evalsha_p99_us_at_rate".into(),
        json!(round(percentile(&eval_lat, 99.0), 0)),
    );
    Ok(m)
}

/// What Redis can place: `redis-benchmark` with batches of [`BATCH`] beside `EVALSHA "return
/// 1"` (see the module docs).
async fn server_side(
    settings: &Settings,
    store: &RedisStore,
    redis: &RedisServer,
) -> Result<Map<String, Value>, BoxError> {
    let p = full_room(store, 1_000_000).await?;
    let function_call = |sessions: &[u8]| -> Result<Vec<Vec<u8>>, BoxError> {
        let (function, argv) =
            tower_waiting_room::__private::room_visitor_call("join_batch", &p, sessions, None)
                .ok_or("no batch function")?;
        let keys = redis_keys(store, &p.room);
        let mut words = vec![b"FCALL".to_vec(), function.as_bytes().to_vec()];
        words.push(keys.len().to_string().into_bytes());
        words.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
        words.extend(argv);
        Ok(words)
    };
    // One batch checked first: every newcomer placed (redis-benchmark does not read replies).
    let fresh: Vec<u8> = (0..BATCH)
        .flat_map(|_| *SessionId::random().as_bytes())
        .collect();
    let words = function_call(&fresh)?;
    let client = redis::Client::open(redis.url())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut cmd = redis::cmd("FCALL");
    for w in &words[1..] {
        cmd.arg(&w[..]);
    }
    // `{17, first, waiting}`: all placed by the batch's fast path (script/batch.lua).
    let reply: Vec<i64> = cmd.query_async(&mut conn).await?;
    if reply.len() != 3 || reply[0] != 17 {
        return Err(format!("a batch of {BATCH} newcomers got {reply:?}").into());
    }
    let template: Vec<u8> = (0..BATCH)
        .flat_map(|i| {
            let mut id = b"__rand_int__".to_vec();
            id.extend_from_slice(&[b'j', (i + 1) as u8, 0xbe, 0x01]);
            id
        })
        .collect();
    let batch_cmd = function_call(&template)?;
    let sha = redis.command(&["SCRIPT", "LOAD", "return 1"])?;
    let evalsha_cmd = vec![
        b"EVALSHA".to_vec(),
        sha.trim().as_bytes().to_vec(),
        b"0".to_vec(),
    ];
    // Calibration: about a run's length each.
    let secs = settings.run.as_secs_f64();
    let (min, max) = if settings.mode == "smoke" {
        (50, 2_000)
    } else {
        (500, 2_000_000)
    };
    let n_batch = ((redis_benchmark(redis, 200, &batch_cmd)? * secs) as u64).clamp(min, max / 10);
    let n_eval = ((redis_benchmark(redis, 2_000, &evalsha_cmd)? * secs) as u64).clamp(min, max);
    let (mut placed, mut calls, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..settings.repeats {
        let joins = redis_benchmark(redis, n_batch, &batch_cmd)? * BATCH as f64;
        let eval = redis_benchmark(redis, n_eval, &evalsha_cmd)?;
        eprintln!(
            "round {}/{}: redis-benchmark: joins placed {joins:>9.0}/s ({BATCH} a call)  EVALSHA return 1 {eval:>9.0}/s: {:.2}",
            r + 1,
            settings.repeats,
            joins / eval
        );
        placed.push(joins);
        calls.push(eval);
        ratios.push(joins / eval);
    }
    drop_room(store, redis, &p)?;
    let mut m = Map::new();
    m.insert(
        "joins_placed_per_sec".into(),
        json!(round(median(&placed), 0)),
    );
    m.insert(
        "joins_evalsha_per_sec".into(),
        json!(round(median(&calls), 0)),
    );
    m.insert(
        "joins_placed_vs_evalsha".into(),
        json!(round(median(&ratios), 3)),
    );
    m.insert(
        "joins_runs".into(),
        json!({"placed": placed, "evalsha": calls, "batch": BATCH, "clients": 32}),
    );
    Ok(m)
}

/// `op` started [`RATE`] times a second (in steps of a millisecond) for [`LATENCY_SECS`] (a
/// tenth of that in a smoke run), each whether or not the ones before it have finished; each
/// one's time from its start to its end, in µs.
async fn at_rate<F, Fut>(settings: &Settings, op: F) -> Result<Vec<f64>, BoxError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let millis = if settings.mode == "smoke" {
        LATENCY_SECS * 100
    } else {
        LATENCY_SECS * 1_000
    };
    let per_ms = RATE / 1_000;
    let bad = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    let start = Instant::now();
    for ms in 0..millis {
        let due = start + Duration::from_millis(ms);
        tokio::time::sleep_until(due.into()).await;
        for _ in 0..per_ms {
            // From the call's start: the timer's lateness in waking this loop is the
            // harness's, not the call's.
            let (started, call, bad) = (Instant::now(), op(), bad.clone());
            tasks.spawn(async move {
                if !call.await {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
                started.elapsed().as_secs_f64() * 1e6
            });
        }
    }
    let mut out = Vec::with_capacity((millis * per_ms) as usize);
    while let Some(us) = tasks.join_next().await {
        out.push(us?);
    }
    let bad = bad.load(Ordering::Relaxed);
    if bad > 0 {
        return Err(format!("{bad} calls at a steady rate gave an unexpected answer").into());
    }
    Ok(out)
}
