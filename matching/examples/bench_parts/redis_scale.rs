//! The Redis-side measurements: what one Redis node spends on a line of two million.
//!
//! Four parts, each on a `redis-server` of its own (started fresh, so one part's keys and
//! memory never weigh on another's numbers):
//! 1. **peer comparison**: our room function's `join` (`FCALL twr_room_v11_join`) of a random new
//!    session next to the algorithm of the closest open-source peer (`peer_room.lua`, written
//!    for this benchmark from its description; not their code), `EVALSHA return 1` and the
//!    `FCALL` of a trivial function, under `redis-benchmark -c 32 -r 1000000`, at capacities 1
//!    to 10 000, each with its active set full and a line waiting;
//! 2. **bytes per waiter**: a line filled with pipelined `FCALL` enters of 128-bit ids, the
//!    `used_memory` difference per waiter; the same for the peer's script (hex and binary ids);
//! 3. **Redis CPU per 1 000 waiting polls** through a [`WaitingRoomLayer`] over HTTP
//!    ([`waiting_poll_cost`]: give it any layer, it measures what that layer makes Redis do);
//! 4. **the simulated 2M / 8-gateway run** ([`simulated_run`]): eight `RedisStore`s on one
//!    Redis, each calling `SnapshotStore::sync` once a second with the waiters whose polls it
//!    answered, claiming the turns that came and letting newcomers join; Redis CPU as a share of
//!    a core.
//!
//! How our room function is invoked from outside the store (the command, the keys, the
//! argument order, the id's encoding) lives in ONE place, [`calls::our_enter`],
//! [`calls::OUR_CALL`] and [`OUR_IDS`]: when the store's script changes, that is the only code
//! to change.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tower_waiting_room::__private::redis_keys;
use tower_waiting_room::store::Store;
use tower_waiting_room::{Keyring, SessionId, WaitingRoomLayer};

use super::measure::round;
use super::redis_server::RedisServer;
use super::{BoxError, Settings};

use calls::{connection, store_on, IdEncoding, OUR_IDS};
use line::{
    fill_our_line, fill_peer_line, line_bound, line_policy, liveness_bitmaps, position_error,
};
use peer::peer_comparison;
use polls::waiting_poll_cost;
use sim::simulated_run;

/// The peer's algorithm as our own script (see its header).
const PEER_SCRIPT: &str = include_str!("peer_room.lua");

/// The capacities of the peer comparison.
const CAPACITIES: [u64; 5] = [1, 10, 100, 1_000, 10_000];
/// Waiters in line behind the full active set before each comparison starts.
const COMPARISON_LINE: u64 = 1_000;
/// Concurrent clients of `redis-benchmark`, as in the issue.
const BENCHMARK_CLIENTS: u32 = 32;
/// `redis-benchmark -r`: `__rand_int__` is drawn from this many values (random new sessions:
/// a full run makes up to 1.2 million calls into one room, so a keyspace of a million, as
/// before, made most of its last runs returning waiters' enters instead of newcomers').
const BENCHMARK_KEYSPACE: u32 = 2_000_000_000;
/// The capacity whose ratio to `EVALSHA return 1` is `script_ratio_benchmark`.
const RATIO_CAPACITY: u64 = 1_000;
/// Script calls per pipeline when filling a line.
const FILL_BATCH: u64 = 1_000;

/// The simulated run's gateways, and the waiters' average poll interval.
const SIM_GATEWAYS: u64 = 8;
const SIM_POLL_INTERVAL_S: u64 = 20;
/// The simulated room lets in this many a second, and this many newcomers join each second.
const SIM_ADMISSION_RATE: u32 = 100;
const SIM_NEWCOMERS_PER_S: u64 = 100;

const COMPARISON_ROOM: &str = "benchpeer";
const LINE_ROOM: &str = "benchline";
const POLL_ROOM: &str = "benchwaitpoll";

// Invoking our room script, and the peer's, from outside the store.
#[path = "redis_scale/calls.rs"]
mod calls;
// 1. The peer comparison.
#[path = "redis_scale/peer.rs"]
mod peer;
// 2. Bytes per waiter, and the positions a snapshot gives on the filled line.
#[path = "redis_scale/line.rs"]
mod line;
// 3. Redis CPU per 1 000 waiting polls.
#[path = "redis_scale/polls.rs"]
mod polls;
// 4. The simulated run, and the simulated run alone (`bench --sim`).
#[path = "redis_scale/sim.rs"]
mod sim;
#[path = "redis_scale/sim_only.rs"]
mod sim_only;

pub(super) use peer::{redis_benchmark, script_comparison};
pub(super) use sim_only::sim_only;

/// How big each part runs in each mode.
struct Sizes {
    /// Waiters filled for `bytes_per_waiter` and the simulated run's line.
    line: u64,
    /// The simulated run's length.
    sim_seconds: u64,
    /// Waiting polls measured over HTTP, and the visitors polling.
    polls: u64,
    poll_visitors: usize,
    /// `redis-benchmark -n` bounds and the calibration run's `-n`.
    min_requests: u64,
    max_requests: u64,
    calibration_requests: u64,
}

impl Sizes {
    fn of(settings: &Settings) -> Self {
        match settings.mode {
            "smoke" => Self {
                line: 20_000,
                sim_seconds: 3,
                polls: 2_000,
                poll_visitors: 16,
                min_requests: 100,
                max_requests: 5_000,
                calibration_requests: 100,
            },
            "quick" => Self {
                line: 200_000,
                sim_seconds: 10,
                polls: 20_000,
                poll_visitors: 32,
                min_requests: 500,
                max_requests: 100_000,
                calibration_requests: 500,
            },
            _ => Self {
                line: 2_000_000,
                sim_seconds: 60,
                polls: 50_000,
                poll_visitors: 32,
                min_requests: 1_000,
                max_requests: 200_000,
                calibration_requests: 1_000,
            },
        }
    }
}

/// Every part, in order; the summary's keys.
pub(super) async fn scenarios(
    settings: &Settings,
    keyring: &Keyring,
) -> Result<Map<String, Value>, BoxError> {
    let sizes = Sizes::of(settings);
    let mut m = Map::new();
    let mut seconds = Map::new();
    let mut t = Instant::now();
    let mut lap = |part: &str| {
        seconds.insert(part.into(), json!(round(t.elapsed().as_secs_f64(), 1)));
        t = Instant::now();
    };
    m.extend(peer_comparison(settings, &sizes).await?);
    lap("peer_comparison");

    // Bytes per waiter: ours on a fresh server, kept for the simulated run's line.
    let line_redis = RedisServer::start()?;
    let line_store = store_on(&line_redis)?;
    let line_policy = line_policy(sizes.line);
    let before_fill = line_redis.used_memory()?;
    let ours_bytes = fill_our_line(&line_redis, &line_store, &line_policy, sizes.line).await?;
    let after_fill = liveness_bitmaps(&line_redis, &line_store, &line_policy).await?;
    let mut peer_bytes = Map::new();
    for ids in [IdEncoding::Hex32, IdEncoding::Binary16] {
        let server = RedisServer::start()?;
        let b = fill_peer_line(&server, ids, sizes.line).await?;
        peer_bytes.insert(ids.name().into(), json!(round(b, 1)));
    }
    eprintln!(
        "bytes per waiter ({} waiters): ours {ours_bytes:.1} ({} ids), peer {peer_bytes:?}",
        sizes.line,
        OUR_IDS.name()
    );
    m.insert("bytes_per_waiter".into(), json!(round(ours_bytes, 1)));
    m.insert("bytes_per_waiter_ids".into(), json!(OUR_IDS.name()));
    m.insert("bytes_per_waiter_line".into(), json!(sizes.line));
    m.insert(
        "peer_bytes_per_waiter".into(),
        peer_bytes[OUR_IDS.name()].clone(),
    );
    m.insert(
        "peer_bytes_per_waiter_by_ids".into(),
        Value::Object(peer_bytes),
    );
    m.insert(
        "bytes_per_waiter_max_queue_len".into(),
        json!(line_bound(sizes.line)),
    );
    // The fill takes about a minute: its figure holds the liveness bitmaps of the epochs it
    // saw, not the full rings a room running for longer keeps (see `liveness_bitmaps`).
    let steady = after_fill.steady_state_bytes(ours_bytes * sizes.line as f64, &line_policy)
        / sizes.line as f64;
    eprintln!(
        "bytes per waiter in steady state: {steady:.1} (the fill left {} liveness bitmaps, {} bytes)",
        after_fill.count, after_fill.bytes
    );
    m.insert("bytes_per_waiter_steady".into(), json!(round(steady, 1)));
    m.insert("liveness_bitmaps_after_fill".into(), after_fill.to_json());
    lap("bytes_per_waiter");

    // Redis CPU per 1 000 waiting polls, through today's layer on a fresh server.
    let poll_redis = RedisServer::start()?;
    let long = Duration::from_secs(3_600);
    let poll_layer = WaitingRoomLayer::builder(POLL_ROOM)
        .poll_limit(None)
        .capacity(1)
        .active_ttl(long)
        .queue_ttl(long)
        .keyring(keyring.clone())
        .store(store_on(&poll_redis)?)
        .build()?;
    // The polling visitors stand behind others, as nearly everyone in a long line does: more
    // than NEAR_HEAD from the head, where a gateway answers from its snapshot.
    let poll_store = store_on(&poll_redis)?;
    poll_store
        .enter(poll_layer.config().policy(), SessionId::random())
        .await?;
    for _ in 0..2 * tower_waiting_room::store::snapshot::NEAR_HEAD {
        poll_store
            .enter(poll_layer.config().policy(), SessionId::random())
            .await?;
    }
    m.extend(
        waiting_poll_cost(
            &poll_layer,
            &store_on(&poll_redis)?,
            &poll_redis,
            sizes.poll_visitors,
            sizes.polls,
        )
        .await?,
    );
    drop(poll_redis);
    lap("waiting_polls");

    m.extend(position_error(&line_redis, &line_store, &line_policy, sizes.line).await?);
    lap("position_error");

    m.extend(
        simulated_run(
            &line_redis,
            &line_policy,
            sizes.line,
            Duration::from_secs(sizes.sim_seconds),
            SIM_GATEWAYS,
            sim::LeadIn::Now,
        )
        .await?,
    );
    let after_sim = liveness_bitmaps(&line_redis, &line_store, &line_policy).await?;
    // The line as the run left it (admissions went out, newcomers came in): KEYS 2.
    let waiting_now: u64 = redis::cmd("ZCARD")
        .arg(&redis_keys(&line_store, &line_policy.room)[1])
        .query_async(&mut connection(&line_redis).await?)
        .await?;
    if waiting_now > 0 {
        let waiting = waiting_now;
        let bytes = line_redis.used_memory()?.saturating_sub(before_fill) as f64;
        m.insert(
            "bytes_per_waiter_after_sim".into(),
            json!(round(bytes / waiting as f64, 1)),
        );
    }
    m.insert("liveness_bitmaps_after_sim".into(), after_sim.to_json());
    lap("simulated_run");
    m.insert("redis_scale_seconds".into(), Value::Object(seconds));
    Ok(m)
}

// ---------------------------------------------------------------------------------------------
// The table

pub(super) fn print_table(s: &Value) {
    println!("| peer comparison (redis-benchmark -c32, new sessions) | ours ops/s | peer ops/s | EVALSHA `return 1` | FCALL `return 1` | ours / peer | ours / EVALSHA | ours / FCALL |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    if let Some(caps) = s["peer_comparison"].as_object() {
        let mut keys: Vec<&String> = caps.keys().collect();
        keys.sort_by_key(|k| k.parse::<u64>().unwrap_or(0));
        for k in keys {
            let c = &caps[k];
            println!(
                "| capacity {k} | {} | {} | {} | {} | {} | {} | {} |",
                c["ours"],
                c["peer"],
                c["evalsha"],
                c["fcall"],
                c["ours_over_peer"],
                c["ours_over_evalsha"],
                c["ours_over_fcall"]
            );
        }
    }
    println!();
    println!("| Redis at two million | value |");
    println!("|---|---:|");
    for (k, label) in [
        (
            "script_ratio_benchmark",
            "our enter / EVALSHA `return 1` at capacity 1 000",
        ),
        ("bytes_per_waiter", "bytes per waiter, ours"),
        (
            "bytes_per_waiter_steady",
            "bytes per waiter, ours, every liveness bitmap kept",
        ),
        ("peer_bytes_per_waiter", "bytes per waiter, peer (same ids)"),
        (
            "redis_us_per_waiting_poll",
            "Redis CPU us per 1 000 waiting polls",
        ),
        (
            "sim_redis_cpu_share",
            "simulated run: Redis CPU, share of one core",
        ),
        (
            "sim_redis_cpu_share_cold_start",
            "simulated run, the first 20 s of 8 new gateways: Redis CPU share",
        ),
        (
            "sim_cold_start_sync_redis_us",
            "simulated run, the first 20 s: Redis time per sync (us, command statistics)",
        ),
        (
            "position_error_max",
            "largest position error from a snapshot (relative, beyond rank 100)",
        ),
        (
            "position_error_near_head",
            "largest position error from a snapshot among the first 100",
        ),
    ] {
        println!("| {label} | {} |", s[k]);
    }
    println!();
}
