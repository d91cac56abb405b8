//! The Redis-side measurements: what one Redis node spends on a line of two million.
//!
//! Four parts, each on a `redis-server` of its own (started fresh, so one part's keys and
//! memory never weigh on another's numbers):
//! 1. **peer comparison**: our room function's `join` (`FCALL twr_room_v10_join`) of a random new
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
//! argument order, the id's encoding) lives in ONE place, [`our_enter`], [`OUR_CALL`] and
//! [`OUR_IDS`]: when the store's script changes, that is the only code to change.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tower_waiting_room::__private::{redis_keys, room_visitor_call, ROOM_JOIN_FUNCTION};
use tower_waiting_room::store::{
    Decision, LivenessRule, Place, RedisStore, RoomSnapshot, SeenWaiters, SettingsChange,
    SnapshotStore, Store, StoreErrorKind,
};
use tower_waiting_room::{Keyring, RoomPolicy, SessionId, WaitingRoomLayer};

use super::{app, median, now_ms, round, serve, BoxError, RedisServer, Settings, ROOM_SCRIPT};

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
// Invoking our room script, and the peer's, from outside the store

/// Positions from a gateway's snapshot against the exact ones, on the filled line with gaps:
/// one waiter in a hundred leaves (spread over the line), a snapshot is taken
/// (`SnapshotStore::sync`), and for a sample of the waiters left the position the snapshot gives
/// (`RoomSnapshot::position_of`) is compared with `ZRANK + 1`. `position_error_max` is the
/// largest relative error beyond the exact ranks (docs/scale.md bounds it by 1 %);
/// `position_error_near_head` the largest difference among the first `EXACT_RANKS` (0).
async fn position_error(
    redis: &RedisServer,
    store: &RedisStore,
    policy: &RoomPolicy,
    line: u64,
) -> Result<Map<String, Value>, BoxError> {
    use tower_waiting_room::store::snapshot::EXACT_RANKS;
    let mut conn = connection(redis).await?;
    let keys = redis_keys(store, &policy.room);
    let line_key = keys
        .iter()
        .find(|k| k.ends_with(":line"))
        .ok_or("no line key")?
        .clone();
    let gone = |i: u64| i % 100 == 37;
    for i in (1..=line).filter(|&i| gone(i)) {
        store.release(policy, line_id(i)).await?;
    }
    let snapshot = store.sync(policy, SeenWaiters::default()).await?;
    let sample = 2_000u64.min(line);
    let (mut worst, mut near_head, mut checked) = (0f64, 0u64, 0u64);
    // The first EXACT_RANKS + 50 waiters, then an even spread over the rest of the line.
    let indices = (1..=(EXACT_RANKS + 50).min(line))
        .chain((0..sample).map(|k| 1 + k * line / sample))
        .filter(|&i| !gone(i));
    for i in indices {
        let member = line_id(i).as_bytes().to_vec();
        let score: Option<f64> = redis::cmd("ZSCORE")
            .arg(&line_key)
            .arg(&member)
            .query_async(&mut conn)
            .await?;
        let rank: Option<u64> = redis::cmd("ZRANK")
            .arg(&line_key)
            .arg(&member)
            .query_async(&mut conn)
            .await?;
        let (Some(score), Some(rank)) = (score, rank) else {
            continue;
        };
        let exact = rank + 1;
        let shown = snapshot
            .position_of(score)
            .ok_or("a waiter in line is ahead of the snapshot's head")?;
        if exact <= EXACT_RANKS {
            near_head = near_head.max(shown.abs_diff(exact));
        } else {
            worst = worst.max(shown.abs_diff(exact) as f64 / exact as f64);
        }
        checked += 1;
    }
    eprintln!(
        "position error ({checked} waiters of {}, one in a hundred gone): at most {:.4} \
         beyond rank {EXACT_RANKS}, {near_head} before it",
        snapshot.waiting, worst
    );
    let mut m = Map::new();
    m.insert("position_error_max".into(), json!(round(worst, 5)));
    m.insert("position_error_near_head".into(), json!(near_head));
    m.insert("position_error_checked".into(), json!(checked));
    m.insert(
        "position_error_checkpoints".into(),
        json!(snapshot.checkpoints.len()),
    );
    Ok(m)
}

/// How a session id travels as a script argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdEncoding {
    /// 32 lowercase hex digits (today's room script).
    Hex32,
    /// The id's 16 raw bytes (store v2).
    Binary16,
}

/// The encoding our room script takes its session ids in. Store v2: `IdEncoding::Binary16`.
const OUR_IDS: IdEncoding = IdEncoding::Binary16;

/// How our room is called: `FCALL twr_room_v10_join` (a function of the room's Redis Functions
/// library, loaded by [`load_ours`]), then [`our_enter`]'s arguments.
const OUR_CALL: [&str; 2] = ["FCALL", ROOM_JOIN_FUNCTION];

/// The second baseline: `FCALL` of a function that returns 1 (what any `FCALL` costs).
const TRIVIAL_LIBRARY: &str =
    "#!lua name=twr_bench_trivial\nredis.register_function('twr_trivial', function() return 1 end)";

/// Loads our room's function library (`FUNCTION LOAD REPLACE`), as the store does.
async fn load_ours(conn: &mut redis::aio::MultiplexedConnection) -> Result<(), BoxError> {
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(ROOM_SCRIPT)
        .query_async(conn)
        .await?;
    Ok(())
}

/// A command's words: `head` (e.g. [`OUR_CALL`], or `EVALSHA <sha>`), then `args`.
fn command(head: &[&str], args: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = head.iter().map(|w| w.as_bytes().to_vec()).collect();
    v.extend(args);
    v
}

impl IdEncoding {
    fn name(self) -> &'static str {
        match self {
            IdEncoding::Hex32 => "hex32",
            IdEncoding::Binary16 => "binary16",
        }
    }

    fn encode(self, id: SessionId) -> Vec<u8> {
        match self {
            IdEncoding::Hex32 => id.to_string().into_bytes(),
            IdEncoding::Binary16 => id.as_bytes().to_vec(),
        }
    }

    /// An id for `redis-benchmark`, with `__rand_int__` (replaced by 12 random decimal digits
    /// per call) in it: valid in this encoding, and of its length. In the binary one the
    /// random digits come first, so bytes 0..8 (what store v2's liveness filter hashes) vary.
    fn random_template(self) -> Vec<u8> {
        match self {
            IdEncoding::Hex32 => b"00000000000000000000__rand_int__".to_vec(),
            IdEncoding::Binary16 => b"__rand_int__b\x0e\xbe\x01".to_vec(),
        }
    }
}

/// A room of our script as seen from outside the store: its keys and policy.
struct OurRoom {
    keys: Vec<String>,
    policy: RoomPolicy,
}

impl OurRoom {
    fn new(store: &RedisStore, policy: &RoomPolicy) -> Self {
        Self {
            keys: redis_keys(store, &policy.room).to_vec(),
            policy: policy.clone(),
        }
    }
}

/// THE one place that knows how to call our room function's `enter` from outside the store:
/// the arguments of [`OUR_CALL`] (numkeys, the keys, then ARGV), for the
/// session id `id` already encoded in [`OUR_IDS`] (or a `redis-benchmark` template of it).
/// Today: a `join` (a newcomer's enter, as the layer sends it for a cookie without a place),
/// its ARGV as the crate writes it (`room_visitor_call`: now = 0, the server's `TIME`; silence
/// not excused). Replies start with the code: 1 admitted, 2 waiting.
fn our_enter(room: &OurRoom, id: &[u8]) -> Vec<Vec<u8>> {
    let (function, argv) =
        room_visitor_call("join", &room.policy, id, None).expect("join is a visitor's call");
    debug_assert_eq!(function, ROOM_JOIN_FUNCTION);
    let mut args = Vec::with_capacity(room.keys.len() + argv.len() + 1);
    args.push(room.keys.len().to_string().into_bytes());
    args.extend(room.keys.iter().map(|k| k.as_bytes().to_vec()));
    args.extend(argv);
    args
}

/// Our script's reply codes the fills and checks expect (see [`our_enter`]).
const OUR_ADMITTED: i64 = 1;
const OUR_WAITING: i64 = 2;

/// A room of the peer's script: its two keys and its numbers.
struct PeerRoom {
    active: String,
    waiting: String,
    capacity: u64,
    active_ttl_ms: u64,
    queue_ttl_ms: u64,
}

impl PeerRoom {
    fn new(name: &str, policy: &RoomPolicy) -> Self {
        Self {
            active: format!("peer:{{{name}}}:active"),
            waiting: format!("peer:{{{name}}}:waiting"),
            capacity: u64::from(policy.capacity),
            active_ttl_ms: policy.active_ttl_ms,
            queue_ttl_ms: policy.queue_ttl_ms,
        }
    }

    /// The arguments of `EVALSHA <sha>` after the SHA.
    fn enter(&self, id: &[u8]) -> Vec<Vec<u8>> {
        vec![
            b"2".to_vec(),
            self.active.as_bytes().to_vec(),
            self.waiting.as_bytes().to_vec(),
            id.to_vec(),
            self.capacity.to_string().into_bytes(),
            self.active_ttl_ms.to_string().into_bytes(),
            self.queue_ttl_ms.to_string().into_bytes(),
        ]
    }
}

/// The `i`th waiter of a filled line: well-mixed 128-bit ids, the same in every part, so a
/// gateway of the simulated run can name any waiter without keeping two million of them.
fn line_id(i: u64) -> SessionId {
    fn mix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&mix(i).to_be_bytes());
    b[8..].copy_from_slice(&mix(i ^ 0x5bd1_e995_0000_0000).to_be_bytes());
    SessionId::from_bytes(b)
}

fn store_on(redis: &RedisServer) -> Result<RedisStore, BoxError> {
    Ok(RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(10))
        .build()?)
}

async fn connection(redis: &RedisServer) -> Result<redis::aio::MultiplexedConnection, BoxError> {
    let client = redis::Client::open(redis.url())?;
    Ok(client
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?)
}

async fn script_load(
    conn: &mut redis::aio::MultiplexedConnection,
    body: &str,
) -> Result<String, BoxError> {
    Ok(redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(body)
        .query_async(conn)
        .await?)
}

/// Calls `head` (`EVALSHA <sha>`, or [`OUR_CALL`]) with `args(i)` for i in `range`, pipelined
/// in order, [`FILL_BATCH`] at a time; the count of each reply code (the first element of each
/// reply).
async fn pipelined_calls(
    conn: &mut redis::aio::MultiplexedConnection,
    head: &[&str],
    range: std::ops::Range<u64>,
    args: impl Fn(u64) -> Vec<Vec<u8>>,
) -> Result<BTreeMap<i64, u64>, BoxError> {
    let mut codes = BTreeMap::new();
    let mut start = range.start;
    while start < range.end {
        let end = (start + FILL_BATCH).min(range.end);
        let mut pipe = redis::pipe();
        for i in start..end {
            let cmd = pipe.cmd(head[0]);
            for w in &head[1..] {
                cmd.arg(*w);
            }
            for a in args(i) {
                cmd.arg(&a[..]);
            }
        }
        let replies: Vec<Vec<i64>> = pipe.query_async(conn).await?;
        for r in replies {
            *codes.entry(r.first().copied().unwrap_or(-1)).or_insert(0) += 1;
        }
        start = end;
    }
    Ok(codes)
}

/// Redis's own CPU time so far (`used_cpu_user + used_cpu_sys` of `INFO cpu`), microseconds.
fn redis_cpu_us(redis: &RedisServer) -> Result<f64, BoxError> {
    let field = |f: &str| -> Result<f64, BoxError> {
        Ok(redis
            .info_field("cpu", f)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("INFO cpu has no {f}"))?)
    };
    Ok((field("used_cpu_user")? + field("used_cpu_sys")?) * 1e6)
}

/// Calls of `command` since the last `CONFIG RESETSTAT` (`INFO commandstats`).
fn command_calls(redis: &RedisServer, command: &str) -> u64 {
    redis
        .info_field("commandstats", &format!("cmdstat_{command}"))
        .and_then(|v| {
            v.split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Redis's time by command since the statistics were reset (`INFO commandstats`), each as
/// microseconds and calls per `syncs` (the simulated run's unit of work); `fcall` includes the
/// commands its scripts ran, and `script_own` is what is left of it: the Lua around them.
fn command_time(redis: &RedisServer, syncs: u64) -> Result<Value, BoxError> {
    let per = syncs.max(1) as f64;
    let stats = redis.command(&["INFO", "commandstats"])?;
    let mut m = Map::new();
    let (mut fcall, mut inner) = (0.0, 0.0);
    for line in stats.lines() {
        let Some((name, fields)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let field = |k: &str| -> f64 {
            fields
                .split(',')
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0)
        };
        let (calls, usec) = (field("calls"), field("usec"));
        if name == "fcall" {
            fcall = usec;
        } else if !matches!(name, "info" | "config") {
            inner += usec;
        }
        m.insert(
            name.to_owned(),
            json!({"us": round(usec / per, 0), "calls": round(calls / per, 1)}),
        );
    }
    m.insert(
        "script_own".into(),
        json!({"us": round((fcall - inner).max(0.0) / per, 0)}),
    );
    Ok(Value::Object(m))
}

/// Error replies Redis sent since it started (`INFO stats`): a benchmark run that made any
/// ran something else than it says.
fn error_replies(redis: &RedisServer) -> u64 {
    redis
        .info_field("stats", "total_error_replies")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// 1. Peer comparison: redis-benchmark, ours vs the peer's algorithm vs EVALSHA return 1

fn benchmark_bin() -> String {
    std::env::var("TWR_REDIS_BENCHMARK").unwrap_or_else(|_| "redis-benchmark".to_owned())
}

/// One `redis-benchmark -c 32 -n <requests> -r 1000000 <command>` run (`EVALSHA <sha> ...` or
/// `FCALL <function> ...`); its requests per second. Fails if Redis answered any call with an
/// error.
pub(super) fn redis_benchmark(
    redis: &RedisServer,
    requests: u64,
    command: &[Vec<u8>],
) -> Result<f64, BoxError> {
    let errors_before = error_replies(redis);
    let out = Command::new(benchmark_bin())
        .args(["-h", "127.0.0.1", "-p", &redis.port().to_string()])
        .args(["-c", &BENCHMARK_CLIENTS.to_string()])
        .args(["-n", &requests.to_string()])
        .args(["-r", &BENCHMARK_KEYSPACE.to_string()])
        .args(["-q", "--csv"])
        .args(command.iter().map(|a| OsStr::from_bytes(a)))
        .output()
        .map_err(|e| {
            format!(
                "cannot run {} ({e}); install it (apt-get install -y redis-tools) or set TWR_REDIS_BENCHMARK",
                benchmark_bin()
            )
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let errors = error_replies(redis) - errors_before;
    if !out.status.success() || errors > 0 || stdout.contains("Error") {
        return Err(format!(
            "redis-benchmark failed ({}, {errors} error replies): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    // CSV: a header, then `"<command>","<rps>",<six latency columns>`; the command may hold
    // anything, so count from the right.
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let fields: Vec<&str> = line.rsplitn(8, ',').collect();
    fields
        .get(6)
        .and_then(|f| f.trim_matches('"').parse::<f64>().ok())
        .ok_or_else(|| format!("no rate in redis-benchmark's output: {stdout}").into())
}

/// The policy of a comparison room: nothing expires during the run. The line's bound is
/// above what the runs add (at most `max_requests` per run, a few runs) but not far above:
/// store v2 sizes its liveness bitmaps by it.
fn comparison_policy(capacity: u64) -> RoomPolicy {
    let hour = Duration::from_secs(3_600);
    RoomPolicy::new(&format!("{COMPARISON_ROOM}{capacity}"), capacity as u32)
        .with_ttls(hour, Duration::from_secs(30), hour)
        .with_max_queue_len(COMPARISON_MAX_LINE)
}

/// The comparison rooms' `max_queue_len`.
const COMPARISON_MAX_LINE: u64 = 2_000_000;

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
pub(super) async fn sim_only(settings: &Settings) -> Result<Map<String, Value>, BoxError> {
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
                cmd.arg(line_id(i + 1).as_bytes().as_slice());
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

/// Only the peer comparison (`bench --script`): for work on the room function.
pub(super) async fn script_comparison(settings: &Settings) -> Result<Map<String, Value>, BoxError> {
    peer_comparison(settings, &Sizes::of(settings)).await
}

async fn peer_comparison(
    settings: &Settings,
    sizes: &Sizes,
) -> Result<Map<String, Value>, BoxError> {
    let redis = RedisServer::start()?;
    let mut conn = connection(&redis).await?;
    let store = store_on(&redis)?;
    load_ours(&mut conn).await?;
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(TRIVIAL_LIBRARY)
        .query_async(&mut conn)
        .await?;
    let peer_sha = script_load(&mut conn, PEER_SCRIPT).await?;
    let trivial_sha = script_load(&mut conn, "return 1").await?;
    let template = OUR_IDS.random_template();

    // Every capacity's rooms filled first (ours through its own enter, the peer's with the
    // state its algorithm would have: the active hash full and unexpired, the same line), so
    // the runs can be interleaved round by round.
    let mut commands: Vec<(u64, [Vec<Vec<u8>>; 4])> = Vec::new();
    for capacity in CAPACITIES {
        let policy = comparison_policy(capacity);
        let ours = OurRoom::new(&store, &policy);
        let codes = pipelined_calls(&mut conn, &OUR_CALL, 0..capacity + COMPARISON_LINE, |i| {
            our_enter(&ours, &OUR_IDS.encode(line_id(i)))
        })
        .await?;
        let expected = BTreeMap::from([(OUR_ADMITTED, capacity), (OUR_WAITING, COMPARISON_LINE)]);
        if codes != expected {
            return Err(format!("filling our room of capacity {capacity}: {codes:?}").into());
        }
        let peer = PeerRoom::new(&format!("{COMPARISON_ROOM}{capacity}"), &policy);
        let now = super::now_ms();
        for start in (0..capacity).step_by(FILL_BATCH as usize) {
            let mut cmd = redis::cmd("HSET");
            cmd.arg(&peer.active);
            for i in start..(start + FILL_BATCH).min(capacity) {
                cmd.arg(OUR_IDS.encode(line_id(i)))
                    .arg(now + peer.active_ttl_ms);
            }
            let _: u64 = cmd.query_async(&mut conn).await?;
        }
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(&peer.waiting);
        for i in capacity..capacity + COMPARISON_LINE {
            cmd.arg(now).arg(OUR_IDS.encode(line_id(i)));
        }
        let _: u64 = cmd.query_async(&mut conn).await?;

        // One call of each for a new session, checked, before redis-benchmark (which does not
        // look at the replies) repeats it.
        let fresh = OUR_IDS.encode(SessionId::random());
        for (name, words, want) in [
            (
                "ours",
                command(&OUR_CALL, our_enter(&ours, &fresh)),
                OUR_WAITING,
            ),
            (
                "peer",
                command(&["EVALSHA", &peer_sha], peer.enter(&fresh)),
                2,
            ),
        ] {
            let mut cmd = redis::cmd(std::str::from_utf8(&words[0])?);
            for a in &words[1..] {
                cmd.arg(&a[..]);
            }
            let reply: Vec<i64> = cmd.query_async(&mut conn).await?;
            if reply.first() != Some(&want) {
                return Err(
                    format!("{name} at capacity {capacity}: a newcomer got {reply:?}").into(),
                );
            }
            if name == "peer" && reply.get(1) != Some(&(COMPARISON_LINE as i64 + 1)) {
                return Err(
                    format!("peer at capacity {capacity}: a newcomer got {reply:?}").into(),
                );
            }
        }

        commands.push((
            capacity,
            [
                command(&OUR_CALL, our_enter(&ours, &template)),
                command(&["EVALSHA", &peer_sha], peer.enter(&template)),
                command(&["EVALSHA", &trivial_sha], vec![b"0".to_vec()]),
                command(&["FCALL", "twr_trivial"], vec![b"0".to_vec()]),
            ],
        ));
    }

    // Calibration (also the warm-up): how many requests make a run of about `settings.run`.
    let mut requests = BTreeMap::new();
    for (capacity, cmds) in &commands {
        for (k, args) in cmds.iter().enumerate() {
            let rps = redis_benchmark(&redis, sizes.calibration_requests, args)?;
            let n = (rps * settings.run.as_secs_f64()) as u64;
            requests.insert(
                (*capacity, k),
                n.clamp(sizes.min_requests, sizes.max_requests),
            );
        }
    }

    const NAMES: [&str; 4] = ["ours", "peer", "evalsha", "fcall"];
    let mut runs: BTreeMap<(u64, usize), Vec<f64>> = BTreeMap::new();
    // Redis-side time per call of each run (`INFO commandstats`): what the call costs the server,
    // without the client's share of this 2-core machine, which moves the rates from run to run.
    let mut usec: BTreeMap<(u64, usize), Vec<f64>> = BTreeMap::new();
    for round in 0..settings.repeats {
        for (capacity, cmds) in &commands {
            for (k, args) in cmds.iter().enumerate() {
                redis.command(&["CONFIG", "RESETSTAT"])?;
                let rps = redis_benchmark(&redis, requests[&(*capacity, k)], args)?;
                runs.entry((*capacity, k)).or_default().push(rps);
                let command = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
                usec.entry((*capacity, k))
                    .or_default()
                    .push(redis.usec_per_call(&command));
            }
            let r = |k: usize| runs[&(*capacity, k)][round];
            eprintln!(
                "round {}/{}: capacity {capacity:>6}: ours {:>8.0} ops/s  peer {:>8.0} ops/s  EVALSHA return 1 {:>8.0} ops/s  FCALL return 1 {:>8.0} ops/s",
                round + 1,
                settings.repeats,
                r(0),
                r(1),
                r(2),
                r(3)
            );
        }
    }

    let mut by_capacity = Map::new();
    let mut script_ratio = f64::NAN;
    for capacity in CAPACITIES {
        let run = |k: usize| &runs[&(capacity, k)];
        // Ratios paired round by round (each run against the ones right beside it), then the
        // median, as the HTTP scenarios do.
        let paired = |a: usize, b: usize| {
            let v: Vec<f64> = run(a).iter().zip(run(b)).map(|(x, y)| x / y).collect();
            median(&v)
        };
        let mut c = Map::new();
        for (k, name) in NAMES.iter().enumerate() {
            c.insert((*name).into(), json!(median(run(k)).round() as u64));
        }
        c.insert("ours_over_peer".into(), json!(round(paired(0, 1), 3)));
        c.insert("ours_over_evalsha".into(), json!(round(paired(0, 2), 3)));
        c.insert("peer_over_evalsha".into(), json!(round(paired(1, 2), 3)));
        c.insert("ours_over_fcall".into(), json!(round(paired(0, 3), 3)));
        // The same comparison by Redis-side time per call (the peer's over ours: above 1 means
        // ours costs the server less), paired round by round too.
        let us = |k: usize| &usec[&(capacity, k)];
        let cheaper: Vec<f64> = us(1).iter().zip(us(0)).map(|(p, o)| p / o).collect();
        c.insert("ours_redis_us".into(), json!(round(median(us(0)), 2)));
        c.insert("peer_redis_us".into(), json!(round(median(us(1)), 2)));
        c.insert(
            "ours_over_peer_redis_cpu".into(),
            json!(round(median(&cheaper), 3)),
        );
        if capacity == RATIO_CAPACITY {
            script_ratio = paired(0, 2);
        }
        by_capacity.insert(capacity.to_string(), Value::Object(c));
    }
    let mut m = Map::new();
    m.insert("peer_comparison".into(), Value::Object(by_capacity));
    m.insert(
        "script_ratio_benchmark".into(),
        json!(round(script_ratio, 3)),
    );
    m.insert(
        "peer_comparison_setup".into(),
        json!({
            "clients": BENCHMARK_CLIENTS,
            "random_sessions": BENCHMARK_KEYSPACE,
            "line_before": COMPARISON_LINE,
            "ids": OUR_IDS.name(),
            "requests": requests
                .iter()
                .map(|((c, k), n)| (format!("{c}/{}", NAMES[*k]), json!(n)))
                .collect::<Map<String, Value>>(),
        }),
    );
    Ok(m)
}

// ---------------------------------------------------------------------------------------------
// 2. Bytes per waiter

/// The policy of the filled line (and of the simulated run on it): one slot, held by the first
/// entrant for an hour, so everyone after waits. `queue_ttl` and `abandon_after` are the
/// builder's defaults (2 and 30 minutes): they set the widths of the liveness epochs (30 s and
/// 15 min), and a gateway writes a waiter's check-in once per epoch of each ring, so they set
/// what the run's check-ins cost. Nobody is swept within the half hour the fill and the runs
/// before the simulated one take; the simulated run checks everyone in before it opens the
/// room, so nobody at the head is skipped for the minutes in between.
/// `max_queue_len` is the line plus 3 % (room for the run's newcomers): store v2 sizes its
/// liveness bitmaps by it, so a bound far above the line would inflate `bytes_per_waiter`.
fn line_policy(line: u64) -> RoomPolicy {
    RoomPolicy::new(LINE_ROOM, 1)
        .with_ttls(
            Duration::from_secs(3_600),
            Duration::from_secs(30),
            Duration::from_secs(120),
        )
        .with_max_queue_len(line_bound(line))
}

/// The filled line's `max_queue_len`: the line plus 3 %, at least 10 000 more.
fn line_bound(line: u64) -> u64 {
    line + (line / 32).max(10_000)
}

/// The liveness bitmaps a room's line holds in Redis at one moment: how many of its ring keys
/// exist, their bytes (`MEMORY USAGE`), and the largest one's.
struct LivenessBitmaps {
    count: usize,
    bytes: u64,
    largest: u64,
}

impl LivenessBitmaps {
    /// The line's bytes in steady state from `line_bytes` measured with these bitmaps: a room
    /// that has run for longer than `abandon_after` keeps every key of both rings
    /// (`TURN_EPOCHS + 2` and `ABANDON_EPOCHS + 2`), each a full bitmap once its epoch saw a
    /// few thousand check-ins. The full size is the largest key measured, or else the Bloom
    /// size the store computes for the line's `max_queue_len`.
    fn steady_state_bytes(&self, line_bytes: f64, policy: &RoomPolicy) -> f64 {
        use tower_waiting_room::store::snapshot::{ABANDON_EPOCHS, TURN_EPOCHS};
        let keys = (TURN_EPOCHS + 2 + ABANDON_EPOCHS + 2) as f64;
        let full = if self.largest > 0 {
            self.largest as f64
        } else {
            (tower_waiting_room::__private::redis_bloom_bits(policy.max_queue_len) / 8) as f64
        };
        line_bytes - self.bytes as f64 + keys * full
    }

    fn to_json(&self) -> Value {
        json!({ "keys": self.count, "bytes": self.bytes, "largest": self.largest })
    }
}

/// The room's liveness ring keys in `redis` right now (KEYS 10 to 19 of the room script).
async fn liveness_bitmaps(
    redis: &RedisServer,
    store: &RedisStore,
    policy: &RoomPolicy,
) -> Result<LivenessBitmaps, BoxError> {
    let mut conn = connection(redis).await?;
    let keys = redis_keys(store, &policy.room);
    let mut found = LivenessBitmaps {
        count: 0,
        bytes: 0,
        largest: 0,
    };
    for key in &keys[9..19] {
        let usage: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .query_async(&mut conn)
            .await?;
        if let Some(bytes) = usage {
            found.count += 1;
            found.bytes += bytes;
            found.largest = found.largest.max(bytes);
        }
    }
    Ok(found)
}

/// Fills our room on the fresh `redis`: [`line_id`] 0 takes the slot, 1..=`line` wait. Answers
/// the `used_memory` difference per waiter.
async fn fill_our_line(
    redis: &RedisServer,
    store: &RedisStore,
    policy: &RoomPolicy,
    line: u64,
) -> Result<f64, BoxError> {
    let mut conn = connection(redis).await?;
    load_ours(&mut conn).await?;
    let room = OurRoom::new(store, policy);
    let before = redis.used_memory()?;
    let t = Instant::now();
    let codes = pipelined_calls(&mut conn, &OUR_CALL, 0..line + 1, |i| {
        our_enter(&room, &OUR_IDS.encode(line_id(i)))
    })
    .await?;
    let after = redis.used_memory()?;
    if codes != BTreeMap::from([(OUR_ADMITTED, 1), (OUR_WAITING, line)]) {
        return Err(format!("filling our line: {codes:?}").into());
    }
    eprintln!(
        "filled our line of {line} in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(after.saturating_sub(before) as f64 / line as f64)
}

/// The same for the peer's script, ids in `ids`, on a fresh `redis`.
async fn fill_peer_line(redis: &RedisServer, ids: IdEncoding, line: u64) -> Result<f64, BoxError> {
    let mut conn = connection(redis).await?;
    let sha = script_load(&mut conn, PEER_SCRIPT).await?;
    // The peer drops waiters who joined more than `queue_ttl` ago on every call: with ours
    // (2 minutes) a fill slower than that would measure a shorter line.
    let policy = line_policy(line).with_ttls(
        Duration::from_secs(3_600),
        Duration::from_secs(30),
        Duration::from_secs(1_800),
    );
    let peer = PeerRoom::new(LINE_ROOM, &policy);
    let before = redis.used_memory()?;
    let codes = pipelined_calls(&mut conn, &["EVALSHA", &sha], 0..line + 1, |i| {
        peer.enter(&ids.encode(line_id(i)))
    })
    .await?;
    let after = redis.used_memory()?;
    if codes != BTreeMap::from([(1, 1), (2, line)]) {
        return Err(format!("filling the peer's line: {codes:?}").into());
    }
    Ok(after.saturating_sub(before) as f64 / line as f64)
}

// ---------------------------------------------------------------------------------------------
// 3. Redis CPU per 1 000 waiting polls, over HTTP through a layer

/// One answer over HTTP: status, `Set-Cookie` lines, `Location`, body.
struct Answer {
    status: StatusCode,
    set_cookies: Vec<String>,
    location: Option<String>,
    body: String,
}

async fn get(
    addr: SocketAddr,
    path: &str,
    cookies: &BTreeMap<String, String>,
) -> Result<Answer, BoxError> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut req = Request::get(path)
        .header(header::HOST, addr.to_string())
        .body(Empty::new())?;
    if let Some(c) = cookie_header(cookies) {
        req.headers_mut().insert(header::COOKIE, c);
    }
    let res = sender.send_request(req).await?;
    let status = res.status();
    let set_cookies = res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    let location = res
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok().map(str::to_owned));
    let body = res.into_body().collect().await?.to_bytes();
    Ok(Answer {
        status,
        set_cookies,
        location,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn cookie_header(cookies: &BTreeMap<String, String>) -> Option<HeaderValue> {
    if cookies.is_empty() {
        return None;
    }
    let s: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
    HeaderValue::from_str(&s.join("; ")).ok()
}

/// A browser's cookie jar: applies `Set-Cookie`s (`Max-Age=0` removes).
fn absorb(jar: &mut BTreeMap<String, String>, answer: &Answer) {
    for line in &answer.set_cookies {
        let Some((name, value)) = line.split(';').next().and_then(|nv| nv.split_once('=')) else {
            continue;
        };
        if line.to_ascii_lowercase().contains("max-age=0") {
            jar.remove(name.trim());
        } else {
            jar.insert(name.trim().to_owned(), value.trim().to_owned());
        }
    }
}

/// Redis CPU per 1 000 waiting polls through `layer`: `visitors` join its room over HTTP as a
/// browser would (first visit, the redirects, the waiting page; their cookies as the layer set
/// them), then poll its status endpoint `polls` times in all over keep-alive connections, one
/// per visitor, as fast as answers come. Redis's CPU time (`INFO cpu`) is read before and after.
///
/// Whatever store and gateway logic the layer has is what is measured: today each poll is one
/// script call; with waiting polls answered at the gateway it is the gateways' batched syncs.
/// `holder_store` is the layer's store: the slot's holder enters through it first (capacity 1
/// in the benchmark's room), so every visitor waits. The layer must have its per-session poll
/// limit off (`poll_limit(None)`): these visitors poll back to back, which the limit would
/// answer without the store.
pub(super) async fn waiting_poll_cost(
    layer: &WaitingRoomLayer,
    holder_store: &RedisStore,
    redis: &RedisServer,
    visitors: usize,
    polls: u64,
) -> Result<Map<String, Value>, BoxError> {
    let config = layer.config();
    let status_path = format!("{}/{}/status", config.path_prefix(), config.room());
    holder_store
        .enter(config.policy(), SessionId::random())
        .await?;
    let (addr, task) = serve(
        app()
            .fallback(|| async { StatusCode::NOT_FOUND })
            .layer(layer.clone()),
    )
    .await?;

    let mut jars = Vec::with_capacity(visitors);
    let mut last_jar = BTreeMap::new();
    for v in 0..visitors {
        let mut jar = BTreeMap::new();
        let mut path = "/".to_owned();
        for _ in 0..4 {
            let a = get(addr, &path, &jar).await?;
            absorb(&mut jar, &a);
            match a.location.filter(|_| a.status.is_redirection()) {
                Some(next) if next.starts_with('/') => path = next,
                _ => break,
            }
        }
        let a = get(addr, &status_path, &jar).await?;
        absorb(&mut jar, &a);
        if !a.body.contains("\"state\":\"waiting\"") {
            return Err(format!("visitor {v} is not waiting: {} {}", a.status, a.body).into());
        }
        jars.push(cookie_header(&jar).ok_or("a waiting visitor without cookies")?);
        last_jar = jar;
    }
    // The gateway's snapshot, refreshed once everyone has joined (a poll a second later): a
    // snapshot taken while they were joining does not place those who came after it, whose
    // polls go to the store until the next refresh, and the measured run lasts about a second.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    get(addr, &status_path, &last_jar).await?;

    // Redis at rest, for reference: its own background work per second.
    let idle0 = redis_cpu_us(redis)?;
    let t = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_per_s = (redis_cpu_us(redis)? - idle0) / t.elapsed().as_secs_f64();

    redis.command(&["CONFIG", "RESETSTAT"])?;
    let left = Arc::new(AtomicU64::new(polls));
    let bad = Arc::new(AtomicU64::new(0));
    let cpu0 = redis_cpu_us(redis)?;
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for cookie in jars {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let (left, bad, path) = (left.clone(), bad.clone(), status_path.clone());
        tasks.push(tokio::spawn(async move {
            let host = HeaderValue::from_str(&addr.to_string()).expect("address");
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                let mut req = Request::get(&path)
                    .body(Empty::<Bytes>::new())
                    .expect("request");
                req.headers_mut().insert(header::HOST, host.clone());
                req.headers_mut().insert(header::COOKIE, cookie.clone());
                let ok = match sender.send_request(req).await {
                    Ok(res) => {
                        let status = res.status();
                        let body = res.into_body().collect().await;
                        status == StatusCode::OK
                            && body.is_ok_and(|b| {
                                std::str::from_utf8(&b.to_bytes())
                                    .is_ok_and(|s| s.contains("\"state\":\"waiting\""))
                            })
                    }
                    Err(_) => false,
                };
                if !ok {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = redis_cpu_us(redis)? - cpu0;
    // Store calls: the room's functions, its tickets' among them (FCALL).
    let script_calls = command_calls(redis, "fcall");
    task.abort();
    let bad = bad.load(Ordering::Relaxed);
    if bad > 0 {
        return Err(format!("{bad} of {polls} waiting polls did not answer 200 waiting").into());
    }
    let per_1000 = cpu / polls as f64 * 1_000.0;
    eprintln!(
        "waiting polls: {polls} by {visitors} visitors in {elapsed:.2} s: Redis CPU {per_1000:.0} us per 1 000 polls, {:.2} script calls per poll (Redis at rest: {idle_per_s:.0} us/s)",
        script_calls as f64 / polls as f64
    );
    let mut m = Map::new();
    m.insert(
        "redis_us_per_waiting_poll".into(),
        json!(per_1000.round() as u64),
    );
    m.insert(
        "waiting_poll_cost".into(),
        json!({
            "unit": "Redis CPU us per 1 000 waiting polls",
            "polls": polls,
            "visitors": visitors,
            "polls_per_sec": round(polls as f64 / elapsed, 0),
            "script_calls_per_poll": round(script_calls as f64 / polls as f64, 3),
            "redis_at_rest_us_per_s": round(idle_per_s, 0),
        }),
    );
    Ok(m)
}

// ---------------------------------------------------------------------------------------------
// 4. The simulated run: a line of two million through 8 gateways on one Redis

/// What the simulated gateways did, counted.
#[derive(Default)]
struct SimCounts {
    syncs: AtomicU64,
    sync_errors: AtomicU64,
    seen_sent: AtomicU64,
    /// Of those, behind the gateway's turn horizon (no turn check-in).
    seen_behind: AtomicU64,
    claims_admitted: AtomicU64,
    claims_other: AtomicU64,
    newcomers_waiting: AtomicU64,
    newcomers_other: AtomicU64,
    /// Sync latencies, microseconds.
    sync_us: Mutex<Vec<f64>>,
    /// Why `sync` is not measured (the store does not implement it yet), if so.
    sync_pending: Mutex<Option<String>>,
}

impl SimCounts {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// A simulated gateway's check-ins of the waiters at line indices `seen`, put apart by the turn
/// horizon of its last snapshot as a gateway does ([`RoomSnapshot::turn_horizon`]): waiter `i`
/// holds sequence number `first_seq + i - 1` (no horizon when the store says no places).
fn sim_seen(
    policy: &RoomPolicy,
    last: Option<&RoomSnapshot>,
    first_seq: Option<u64>,
    seen: impl Iterator<Item = u64>,
) -> SeenWaiters {
    match first_seq {
        Some(first_seq) => SeenWaiters::with_horizon(
            last.and_then(|s| s.turn_horizon(policy.queue_ttl_ms)),
            seen.map(|i| (line_id(i), (first_seq + i - 1) as f64)),
        ),
        None => SeenWaiters::new(seen.map(line_id).collect()),
    }
}

/// The store-level load of `line` waiters polling every [`SIM_POLL_INTERVAL_S`] seconds on
/// average through `gateways` gateways ([`SIM_GATEWAYS`] unless `bench --sim` is told
/// otherwise), for `duration`, on `redis` whose room `policy`
/// holds [`line_id`] 0 in its only slot and 1..=`line` waiting (as [`fill_our_line`] left it).
///
/// After the warm-up (below) the room opens up: capacity a million, [`SIM_ADMISSION_RATE`] a
/// second. Then each gateway, once a second (their ticks spread over the second):
/// - calls `SnapshotStore::sync(policy, seen)` with the waiters whose polls it answered that
///   second: `line / 20 / gateways` of them (waiter `i` polls at second `i mod 20`, through
///   gateway `(i / 20) mod gateways`), so every waiter checks in every 20 s;
/// - claims the turns that came, one `enter` each: with a snapshot, every waiter ahead of its
///   head not yet claimed; without one (a store without `sync`), the next in line, one `enter`
///   after another while they are admitted;
/// - lets its share of [`SIM_NEWCOMERS_PER_S`] newcomers join (`enter`), who then poll too.
///
/// Until the store implements `sync` (store v2), each `sync` answers `Misconfigured` at once:
/// the run goes on without it and says so (`sim_sync` "pending", and `sim_redis_cpu_share` is
/// that text instead of a number; `sim_redis_cpu_share_as_run` has what was measured).
pub(super) async fn simulated_run(
    redis: &RedisServer,
    policy: &RoomPolicy,
    line: u64,
    duration: Duration,
    gateways: u64,
) -> Result<Map<String, Value>, BoxError> {
    let stores: Vec<RedisStore> = (0..gateways)
        .map(|_| store_on(redis))
        .collect::<Result<_, _>>()?;
    // Where the sequence numbers start: the first waiter's place, if the store says (store v2).
    let first_seq = match stores[0].poll(policy, line_id(1)).await? {
        Decision::Waiting {
            place: Some(Place::Seq(seq)),
            ..
        } => Some(seq),
        Decision::Waiting { .. } => None,
        other => return Err(format!("the line's first waiter: {other:?}").into()),
    };

    let counts = Arc::new(SimCounts::default());
    // The next waiter (by line index) whose turn has not been claimed yet, and the population
    // (the line's indices handed out: the filled line, then the newcomers).
    // (An async lock: a gateway probing for turns holds it across its store calls, so two
    // gateways never claim the same waiter.)
    let claim_cursor = Arc::new(tokio::sync::Mutex::new(1u64));
    let population = Arc::new(AtomicU64::new(line + 1));
    let seconds = duration.as_secs().max(1);
    let per_tick_newcomers = SIM_NEWCOMERS_PER_S / gateways;
    let extra_newcomers = SIM_NEWCOMERS_PER_S % gateways;

    // Warm-up: one poll interval's syncs of every gateway, unpaced. A gateway looks each
    // waiter up once in the waiter's own abandon epoch (15 min by default, each session's
    // shifted by a phase of its id, so the lookups are spread over the epoch) and otherwise
    // only sets its bits: the measured minute is that steady state, its share of lookups
    // included. The warm-up's Redis CPU, spread over the poll interval it stands for, is the
    // cost of a cold start: every gateway new, every waiter looked up in one poll interval.
    redis.command(&["CONFIG", "RESETSTAT"])?;
    let cpu_warm = redis_cpu_us(redis)?;
    for (g, store) in stores.iter().enumerate() {
        let g = g as u64;
        let mut last: Option<RoomSnapshot> = None;
        for t in 0..SIM_POLL_INTERVAL_S {
            let first = SIM_POLL_INTERVAL_S * g + t;
            let seen = (first..=line).step_by((SIM_POLL_INTERVAL_S * gateways) as usize);
            let seen = sim_seen(policy, last.as_ref(), first_seq, seen);
            last = Some(store.sync(policy, seen).await?);
        }
    }
    let cold_share = (redis_cpu_us(redis)? - cpu_warm) / (SIM_POLL_INTERVAL_S as f64 * 1e6);
    // Redis's own time per warm-up sync (command statistics, reset before it): beside the
    // CPU share, which on a shared machine moves with the machine's state from run to run.
    let cold_sync_us = redis
        .command(&["INFO", "commandstats"])?
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_fcall:"))
        .and_then(|l| {
            l.split(',')
                .find_map(|kv| kv.strip_prefix("usec_per_call="))
        })
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    let cold_commands = command_time(redis, SIM_POLL_INTERVAL_S * gateways)?;
    // Only now the room opens up: the warm-up checked everyone in (the head too, whom the
    // fill and the runs before this one left silent for minutes).
    stores[0]
        .configure(
            policy,
            SettingsChange::new()
                .capacity(1_000_000)
                .admission_rate(Some(SIM_ADMISSION_RATE)),
        )
        .await?;

    redis.command(&["CONFIG", "RESETSTAT"])?;
    let cpu0 = redis_cpu_us(redis)?;
    let wall0 = now_ms();
    let t0 = Instant::now();
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for (g, store) in stores.into_iter().enumerate() {
        let g = g as u64;
        let (policy, counts, claim_cursor, population) = (
            policy.clone(),
            counts.clone(),
            claim_cursor.clone(),
            population.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut last: Option<RoomSnapshot> = None;
            let phase = Duration::from_millis(1_000 * g / gateways);
            let mut tick = tokio::time::interval_at(start + phase, Duration::from_secs(1));
            for t in 0..seconds {
                tick.tick().await;
                // The waiters whose polls this gateway answered this second.
                let pop = population.load(Ordering::Relaxed);
                let from = *claim_cursor.lock().await;
                let stride = SIM_POLL_INTERVAL_S * gateways;
                let first = SIM_POLL_INTERVAL_S * g + t % SIM_POLL_INTERVAL_S;
                let seen = (first..pop).step_by(stride as usize).filter(|&i| i >= from);
                let seen = sim_seen(&policy, last.as_ref(), first_seq, seen);
                let n_seen = seen.len() as u64;
                let n_behind = seen.beyond().len() as u64;
                let t_sync = Instant::now();
                let head = match store.sync(&policy, seen).await {
                    Ok(snapshot) => {
                        counts
                            .sync_us
                            .lock()
                            .unwrap()
                            .push(t_sync.elapsed().as_secs_f64() * 1e6);
                        SimCounts::add(&counts.syncs, 1);
                        SimCounts::add(&counts.seen_sent, n_seen);
                        SimCounts::add(&counts.seen_behind, n_behind);
                        let head = snapshot.head;
                        last = Some(snapshot);
                        Some(head)
                    }
                    Err(e) if e.kind() == StoreErrorKind::Misconfigured => {
                        counts
                            .sync_pending
                            .lock()
                            .unwrap()
                            .get_or_insert(e.to_string());
                        None
                    }
                    Err(_) => {
                        SimCounts::add(&counts.sync_errors, 1);
                        None
                    }
                };

                // Claims: the turns that came.
                match (head, first_seq) {
                    (Some(head), Some(first_seq)) => {
                        // Everyone ahead of the head has had their turn: claim those not yet
                        // claimed (a skipped one answers otherwise, and is counted so).
                        let upto = match head {
                            Some(h) if h >= first_seq as f64 => (h as u64 - first_seq) + 1,
                            Some(_) => 1,
                            None => pop,
                        };
                        let range = {
                            let mut c = claim_cursor.lock().await;
                            let r = *c..upto.max(*c);
                            *c = r.end;
                            r
                        };
                        for i in range {
                            claim(&store, &policy, i, &counts).await;
                        }
                    }
                    _ => {
                        // No snapshot: the next in line, while they are let in (bounded).
                        let mut c = claim_cursor.lock().await;
                        for _ in 0..SIM_ADMISSION_RATE {
                            if !claim(&store, &policy, *c, &counts).await {
                                // Not their turn yet: the next probe asks them again.
                                break;
                            }
                            *c += 1;
                        }
                    }
                }

                // Newcomers.
                let n = per_tick_newcomers + u64::from(g < extra_newcomers);
                for _ in 0..n {
                    let i = population.fetch_add(1, Ordering::Relaxed);
                    match store.enter(&policy, line_id(i)).await {
                        Ok(Decision::Waiting { .. }) => {
                            SimCounts::add(&counts.newcomers_waiting, 1)
                        }
                        _ => SimCounts::add(&counts.newcomers_other, 1),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu_share = (redis_cpu_us(redis)? - cpu0) / 1e6 / elapsed;
    // The epochs of the liveness rings that began during the measured run, by the clock the
    // gateways sync with. Each gateway writes every waiter it answers into a ring's new epoch
    // once (checked_in.rs): after an abandon epoch begins (every 15 minutes by default, the
    // same moment for the whole line) every sync of the next poll interval writes all of its
    // sessions again, so a run that holds that moment costs more than one that does not, and
    // neither is the average over the epoch; these say which kind of run it was.
    // Its age at the start says whether the run began within a poll interval of one.
    let wall1 = now_ms();
    let turns = |rule: LivenessRule| rule.epoch(wall1) - rule.epoch(wall0);
    let abandon = LivenessRule::for_abandon(policy);
    let abandon_turns = turns(abandon);
    let turn_turns = turns(LivenessRule::for_turn(policy));
    let abandon_age_s = (wall0 % abandon.width_ms) / 1_000;
    let commands = command_time(redis, counts.syncs.load(Ordering::Relaxed))?;
    let script_calls = command_calls(redis, "fcall");

    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let pending = counts.sync_pending.lock().unwrap().clone();
    let sync_us = counts.sync_us.lock().unwrap().clone();
    let sync_status = match &pending {
        None => "ok".to_owned(),
        Some(e) => format!("pending ({e})"),
    };
    eprintln!(
        "simulated run: {line} waiting, {gateways} gateways, {elapsed:.1} s: Redis CPU {:.3} of a core; sync {sync_status}; epochs begun: abandon {abandon_turns} (the one at the start {abandon_age_s} s old), turn {turn_turns}",
        cpu_share
    );
    let mut m = Map::new();
    m.insert(
        "sim_redis_cpu_share".into(),
        if pending.is_none() {
            json!(round(cpu_share, 3))
        } else {
            json!(sync_status.clone())
        },
    );
    m.insert(
        "sim_redis_cpu_share_as_run".into(),
        json!(round(cpu_share, 3)),
    );
    // The first poll interval of a fleet of new gateways (every waiter looked up).
    m.insert(
        "sim_redis_cpu_share_cold_start".into(),
        json!(round(cold_share, 3)),
    );
    m.insert(
        "sim_cold_start_sync_redis_us".into(),
        json!(round(cold_sync_us, 0)),
    );
    m.insert("sim_cold_start_time_per_sync_us".into(), cold_commands);
    m.insert("sim_sync".into(), json!(sync_status));
    m.insert(
        "sim_epochs_begun".into(),
        json!({
            "abandon": abandon_turns,
            "turn": turn_turns,
            "abandon_age_at_start_s": abandon_age_s,
        }),
    );
    m.insert(
        "sim_setup".into(),
        json!({
            "line": line,
            "seconds": round(elapsed, 1),
            "gateways": gateways,
            "poll_interval_s": SIM_POLL_INTERVAL_S,
            "seen_per_gateway_per_s": line / SIM_POLL_INTERVAL_S / gateways,
            "admission_rate": SIM_ADMISSION_RATE,
            "newcomers_per_s": SIM_NEWCOMERS_PER_S,
        }),
    );
    m.insert(
        "sim_ops".into(),
        json!({
            "syncs": load(&counts.syncs),
            "sync_errors": load(&counts.sync_errors),
            "seen_sent": load(&counts.seen_sent),
            "seen_behind_horizon": load(&counts.seen_behind),
            "sync_p50_us": round(median(&sync_us), 0),
            "sync_p99_us": round(super::percentile(&sync_us, 99.0), 0),
            "claims_admitted": load(&counts.claims_admitted),
            "claims_other": load(&counts.claims_other),
            "newcomers_waiting": load(&counts.newcomers_waiting),
            "newcomers_other": load(&counts.newcomers_other),
            "script_calls": script_calls,
            "script_calls_per_s": round(script_calls as f64 / elapsed, 0),
            "redis_usec_per_script_call": round(redis.usec_per_call("fcall"), 2),
        }),
    );
    // Where Redis's time went: the script calls' own time, and the commands they ran.
    m.insert("sim_redis_time_per_sync_us".into(), commands);
    Ok(m)
}

/// A waiter whose turn came claims it: one `enter`. Whether they were let in.
async fn claim(store: &RedisStore, policy: &RoomPolicy, i: u64, counts: &SimCounts) -> bool {
    let admitted = matches!(
        store.enter(policy, line_id(i)).await,
        Ok(Decision::Admitted { .. })
    );
    SimCounts::add(
        if admitted {
            &counts.claims_admitted
        } else {
            &counts.claims_other
        },
        1,
    );
    admitted
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
