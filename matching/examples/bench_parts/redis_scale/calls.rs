//! Invoking our room script, and the peer's, from outside the store: the one place that knows
//! how our room function is called ([`our_enter`], [`OUR_CALL`], [`OUR_IDS`]), the peer's room,
//! the filled line's ids, and the connections and `INFO` figures every part reads.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tower_waiting_room::__private::{redis_keys, room_visitor_call, ROOM_JOIN_FUNCTION};
use tower_waiting_room::store::RedisStore;
use tower_waiting_room::{RoomPolicy, SessionId};

use super::FILL_BATCH;
use crate::measure::round;
use crate::redis_server::RedisServer;
use crate::{BoxError, ROOM_SCRIPT};

/// How a session id travels as a script argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IdEncoding {
    /// 32 lowercase hex digits (today's room script).
    Hex32,
    /// The id's 16 raw bytes (store v2).
    Binary16,
}

/// The encoding our room script takes its session ids in. Store v2: `IdEncoding::Binary16`.
pub(super) const OUR_IDS: IdEncoding = IdEncoding::Binary16;

/// How our room is called: `FCALL twr_room_v11_join` (a function of the room's Redis Functions
/// library, loaded by [`load_ours`]), then [`our_enter`]'s arguments.
pub(super) const OUR_CALL: [&str; 2] = ["FCALL", ROOM_JOIN_FUNCTION];

/// The second baseline: `FCALL` of a function that returns 1 (what any `FCALL` costs).
pub(super) const TRIVIAL_LIBRARY: &str =
    "#!lua name=twr_bench_trivial\nredis.register_function('twr_trivial', function() return 1 end)";

/// Loads our room's function library (`FUNCTION LOAD REPLACE`), as the store does.
pub(super) async fn load_ours(
    conn: &mut redis::aio::MultiplexedConnection,
) -> Result<(), BoxError> {
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(ROOM_SCRIPT)
        .query_async(conn)
        .await?;
    Ok(())
}

/// A command's words: `head` (e.g. [`OUR_CALL`], or `EVALSHA <sha>`), then `args`.
pub(super) fn command(head: &[&str], args: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = head.iter().map(|w| w.as_bytes().to_vec()).collect();
    v.extend(args);
    v
}

impl IdEncoding {
    pub(super) fn name(self) -> &'static str {
        match self {
            IdEncoding::Hex32 => "hex32",
            IdEncoding::Binary16 => "binary16",
        }
    }

    pub(super) fn encode(self, id: SessionId) -> Vec<u8> {
        match self {
            IdEncoding::Hex32 => id.to_string().into_bytes(),
            IdEncoding::Binary16 => id.as_bytes().to_vec(),
        }
    }

    /// An id for `redis-benchmark`, with `__rand_int__` (replaced by 12 random decimal digits
    /// per call) in it: valid in this encoding, and of its length. In the binary one the
    /// random digits come first, so bytes 0..8 (what store v2's liveness filter hashes) vary.
    pub(super) fn random_template(self) -> Vec<u8> {
        match self {
            IdEncoding::Hex32 => b"00000000000000000000__rand_int__".to_vec(),
            IdEncoding::Binary16 => b"__rand_int__b\x0e\xbe\x01".to_vec(),
        }
    }
}

/// A room of our script as seen from outside the store: its keys and policy.
pub(super) struct OurRoom {
    keys: Vec<String>,
    policy: RoomPolicy,
}

impl OurRoom {
    pub(super) fn new(store: &RedisStore, policy: &RoomPolicy) -> Self {
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
pub(super) fn our_enter(room: &OurRoom, id: &[u8]) -> Vec<Vec<u8>> {
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
pub(super) const OUR_ADMITTED: i64 = 1;
pub(super) const OUR_WAITING: i64 = 2;

/// A room of the peer's script: its two keys and its numbers.
pub(super) struct PeerRoom {
    pub(super) active: String,
    pub(super) waiting: String,
    capacity: u64,
    pub(super) active_ttl_ms: u64,
    queue_ttl_ms: u64,
}

impl PeerRoom {
    pub(super) fn new(name: &str, policy: &RoomPolicy) -> Self {
        Self {
            active: format!("peer:{{{name}}}:active"),
            waiting: format!("peer:{{{name}}}:waiting"),
            capacity: u64::from(policy.capacity),
            active_ttl_ms: policy.active_ttl_ms,
            queue_ttl_ms: policy.queue_ttl_ms,
        }
    }

    /// The arguments of `EVALSHA <sha>` after the SHA.
    pub(super) fn enter(&self, id: &[u8]) -> Vec<Vec<u8>> {
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
pub(super) fn line_id(i: u64) -> SessionId {
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

pub(super) fn store_on(redis: &RedisServer) -> Result<RedisStore, BoxError> {
    Ok(RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(10))
        .build()?)
}

pub(super) async fn connection(
    redis: &RedisServer,
) -> Result<redis::aio::MultiplexedConnection, BoxError> {
    let client = redis::Client::open(redis.url())?;
    Ok(client
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?)
}

pub(super) async fn script_load(
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
pub(super) async fn pipelined_calls(
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
pub(super) fn redis_cpu_us(redis: &RedisServer) -> Result<f64, BoxError> {
    let field = |f: &str| -> Result<f64, BoxError> {
        Ok(redis
            .info_field("cpu", f)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("INFO cpu has no {f}"))?)
    };
    Ok((field("used_cpu_user")? + field("used_cpu_sys")?) * 1e6)
}

/// Calls of `command` since the last `CONFIG RESETSTAT` (`INFO commandstats`).
pub(super) fn command_calls(redis: &RedisServer, command: &str) -> u64 {
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
pub(super) fn command_time(redis: &RedisServer, syncs: u64) -> Result<Value, BoxError> {
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
pub(super) fn error_replies(redis: &RedisServer) -> u64 {
    redis
        .info_field("stats", "total_error_replies")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
