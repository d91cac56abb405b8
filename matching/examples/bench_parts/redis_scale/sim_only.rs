//! The simulated run alone (`bench --sim`): its options from the environment, and a long line
//! filled in batches of joins.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tower_waiting_room::__private::{redis_keys, redis_member, room_visitor_call};
use tower_waiting_room::store::{Decision, RedisStore, SeenWaiters, SnapshotStore, Store};
use tower_waiting_room::RoomPolicy;

use super::calls::{connection, line_id, load_ours, store_on, OUR_WAITING};
use super::line::{fill_our_line, line_policy, liveness_bitmaps, position_error};
use super::sim::{simulated_run, LeadIn};
use super::{Sizes, SIM_GATEWAYS};
use crate::measure::round;
use crate::redis_server::RedisServer;
use crate::{BoxError, Settings};

/// Only the simulated 2M / 8-gateway run on a filled line (`bench --sim`): for work on `sync`.
///
/// `SIM_BEFORE` in the environment does more between the fill and the run, to find what makes
/// the simulated run inside the full run cost more than alone (docs/benchmarks.md, "Latest
/// results"); any of, in this order: `release` (one waiter in a hundred leaves, as the
/// position-error part does), `releasetail` or `releasehead` (the last or the first hundredth
/// of the line leaves), `flush` (`FUNCTION FLUSH` and the room function loaded again: a
/// fresh Lua state), `reload` (`DEBUG RELOAD`: the whole dataset saved and loaded again, so
/// every key is allocated afresh, compact), `snapsync` (one sync with no check-ins),
/// `position` (the whole position-error part), `wait<N>` (N seconds).
///
/// `SIM_WAITERS` and `SIM_GATEWAYS` in the environment set the line's length and the number of
/// gateways (`SIM_WAITERS=10000000 SIM_GATEWAYS=40`: ten million, and the gateways it takes to
/// answer their polls, 12 500 a second each); the line is then filled in batches of joins
/// ([`fill_in_batches`]), and the summary says its bytes per waiter. At ten million the keys
/// are `sim_10m_redis_cpu_share` and `sim_10m_bytes_per_waiter` too.
///
/// `SIM_ABANDON_TURN_IN=N` begins the measured run N seconds before the abandon ring's next
/// epoch (every 15 minutes of the wall clock with the default `abandon_after`), the gateways
/// syncing as in the run until then: the minute in which the whole line's abandon epoch turns
/// (`sim_epochs_begun` says it did).
pub(crate) async fn sim_only(settings: &Settings) -> Result<Map<String, Value>, BoxError> {
    let mut sizes = Sizes::of(settings);
    let number = |name: &str| -> Result<Option<u64>, BoxError> {
        match std::env::var(name) {
            Ok(v) => Ok(Some(
                v.parse().map_err(|_| format!("{name}={v} is no number"))?,
            )),
            Err(_) => Ok(None),
        }
    };
    let waiters = number("SIM_WAITERS")?;
    let gateways = number("SIM_GATEWAYS")?.unwrap_or(SIM_GATEWAYS).max(1);
    if let Some(n) = waiters {
        sizes.line = n.max(1_000);
    }
    let before = std::env::var("SIM_BEFORE").unwrap_or_default();
    let line_redis = if before.contains("reload") {
        RedisServer::start_with(&["--enable-debug-command", "local"])?
    } else {
        RedisServer::start()?
    };
    let line_store = store_on(&line_redis)?;
    let line_policy = line_policy(sizes.line);
    let (bytes_per_waiter, at_fill) = if waiters.is_some() {
        let filled = fill_in_batches(&line_redis, &line_store, &line_policy, sizes.line).await?;
        (filled.settled, Some(filled.at_fill))
    } else {
        let bytes = fill_our_line(&line_redis, &line_store, &line_policy, sizes.line).await?;
        (bytes, None)
    };
    if let Ok(what) = std::env::var("SIM_BEFORE") {
        if what.contains("releasetail") {
            for i in sizes.line - sizes.line / 100 + 1..=sizes.line {
                line_store.release(&line_policy, line_id(i)).await?;
            }
        } else if what.contains("releasehead") {
            for i in 1..=sizes.line / 100 {
                line_store.release(&line_policy, line_id(i)).await?;
            }
        } else if what.contains("release") {
            for i in (1..=sizes.line).filter(|&i| i % 100 == 37) {
                line_store.release(&line_policy, line_id(i)).await?;
            }
        }
        if what.contains("reload") {
            let mut conn = connection(&line_redis).await?;
            let _: String = redis::cmd("DEBUG")
                .arg("RELOAD")
                .query_async(&mut conn)
                .await?;
        }
        if what.contains("flush") {
            line_redis.command(&["FUNCTION", "FLUSH"])?;
            let mut conn = connection(&line_redis).await?;
            load_ours(&mut conn).await?;
        }
        if what.contains("snapsync") {
            line_store
                .sync(&line_policy, SeenWaiters::default())
                .await?;
        }
        if what.contains("position") {
            position_error(&line_redis, &line_store, &line_policy, sizes.line).await?;
        }
        if let Some(secs) = what.strip_prefix("wait").and_then(|s| s.parse().ok()) {
            tokio::time::sleep(Duration::from_secs(secs)).await;
        }
    }
    let mut m = simulated_run(
        &line_redis,
        &line_policy,
        sizes.line,
        Duration::from_secs(sizes.sim_seconds),
        gateways,
        match number("SIM_ABANDON_TURN_IN")? {
            Some(secs) => LeadIn::BeforeAbandonTurn(Duration::from_secs(secs)),
            None => LeadIn::Now,
        },
    )
    .await?;
    m.insert(
        "sim_bytes_per_waiter".into(),
        json!(round(bytes_per_waiter, 1)),
    );
    if let Some(at_fill) = at_fill {
        m.insert(
            "sim_bytes_per_waiter_at_fill".into(),
            json!(round(at_fill, 1)),
        );
    }
    m.insert(
        "sim_used_memory_bytes".into(),
        json!(line_redis.used_memory()?),
    );
    if sizes.line == 10_000_000 {
        m.insert(
            "sim_10m_bytes_per_waiter".into(),
            json!(round(bytes_per_waiter, 1)),
        );
        let share = m.get("sim_redis_cpu_share").cloned().unwrap_or(Value::Null);
        m.insert("sim_10m_redis_cpu_share".into(), share);
    }
    Ok(m)
}

/// Fills `policy`'s room on `redis` as [`fill_our_line`] does (one slot held by [`line_id`] 0,
/// `line_id` 1..=`line` waiting, in order), with batches of joins (`join_batch`, 64 newcomers a
/// call, 50 calls a round trip): ten million in about half a minute. Redis's memory per waiter,
/// right after the fill and once the line's table settled.
async fn fill_in_batches(
    redis: &RedisServer,
    store: &RedisStore,
    policy: &RoomPolicy,
    line: u64,
) -> Result<Filled, BoxError> {
    const BATCH: u64 = 64;
    const CALLS: u64 = 50;
    let mut conn = connection(redis).await?;
    load_ours(&mut conn).await?;
    let keys = redis_keys(store, &policy.room);
    let before = redis.used_memory()?;
    let t = Instant::now();
    if !matches!(
        store.enter(policy, line_id(0)).await?,
        Decision::Admitted { .. }
    ) {
        return Err("filling in batches: the holder was not let in".into());
    }
    let mut next = 1u64;
    while next <= line {
        let mut pipe = redis::pipe();
        for _ in 0..CALLS {
            if next > line {
                break;
            }
            let end = (next + BATCH - 1).min(line);
            let ids: Vec<u8> = (next..=end).flat_map(|i| *line_id(i).as_bytes()).collect();
            let (function, argv) =
                room_visitor_call("join_batch", policy, &ids, None).ok_or("no batch function")?;
            let cmd = pipe.cmd("FCALL").arg(function).arg(keys.len());
            for k in &keys {
                cmd.arg(k);
            }
            for a in argv {
                cmd.arg(a);
            }
            next = end + 1;
        }
        let replies: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
        for reply in replies {
            // {17, first, waiting}: all of the batch placed by its fast path; else join's
            // reply for each (the first batch, before the window opens): every one waiting.
            let ok = match &reply {
                redis::Value::Array(items) => match items.first() {
                    Some(redis::Value::Int(17)) => true,
                    _ => items.iter().all(|one| {
                        matches!(one, redis::Value::Array(r)
                            if r.first() == Some(&redis::Value::Int(OUR_WAITING)))
                    }),
                },
                _ => false,
            };
            if !ok {
                return Err(format!("filling in batches: {reply:?}").into());
            }
        }
    }
    let at_fill = redis.used_memory()?;
    let waiting = store.stats(policy).await?.waiting;
    if waiting != line {
        return Err(format!("filling in batches: {waiting} waiting of {line}").into());
    }
    eprintln!(
        "filled our line of {line} in batches in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let line_key = keys
        .iter()
        .find(|k| k.ends_with(":line"))
        .ok_or("no line key")?;
    let settled = settle_line(redis, &mut conn, line_key, line).await?;
    let per_waiter = |bytes: u64| bytes.saturating_sub(before) as f64 / line as f64;
    let bitmaps = liveness_bitmaps(redis, store, policy).await?;
    let line_usage: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(line_key)
        .arg("SAMPLES")
        .arg(1_000)
        .query_async(&mut conn)
        .await?;
    eprintln!(
        "bytes per waiter: {:.1} right after the fill, {:.1} once the line's table settled: \
         the line's zset {:.1} (MEMORY USAGE, sampled), {} liveness bitmaps {:.1} (largest {} bytes)",
        per_waiter(at_fill),
        per_waiter(settled),
        line_usage.unwrap_or(0) as f64 / line as f64,
        bitmaps.count,
        bitmaps.bytes as f64 / line as f64,
        bitmaps.largest
    );
    Ok(Filled {
        at_fill: per_waiter(at_fill),
        settled: per_waiter(settled),
    })
}

/// Bytes per waiter of a line filled in batches: right after the fill, and once Redis's table
/// of the line is whole again ([`settle_line`]).
struct Filled {
    at_fill: f64,
    settled: f64,
}

/// Redis's `used_memory` once the line's zset is done growing its hash table. A table that
/// doubles (at 2^23 entries, on the way to ten million) is moved into the new one a bucket at
/// each lookup or write of the key (Redis's cron moves only the keyspace's own tables), and
/// until then both are held: about 6.7 bytes a waiter at ten million. A room's syncs look up
/// thousands of its waiters a second, so a live line is rid of the old table within seconds;
/// a fill that ends mid-move is a transient. Lookups like a sync's (`ZMSCORE`, 1 000 ids a
/// call) until `used_memory` stops falling, at most 64 rounds of 1 000 000.
async fn settle_line(
    redis: &RedisServer,
    conn: &mut redis::aio::MultiplexedConnection,
    line_key: &str,
    line: u64,
) -> Result<u64, BoxError> {
    let mut last = redis.used_memory()?;
    for round in 0..64u64 {
        let mut pipe = redis::pipe();
        for call in 0..1_000u64 {
            let from = (round * 1_000 + call) * 1_000 % line.max(1);
            let cmd = pipe.cmd("ZMSCORE").arg(line_key);
            for i in from..(from + 1_000).min(line) {
                cmd.arg(redis_member(&line_id(i + 1)));
            }
            cmd.ignore();
        }
        let () = pipe.query_async(conn).await?;
        let now = redis.used_memory()?;
        if now >= last {
            return Ok(now);
        }
        last = now;
    }
    Ok(last)
}
