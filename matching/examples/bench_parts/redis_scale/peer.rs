//! The peer comparison (part 1 of the Redis-side measurements): under `redis-benchmark`, our room
//! function's `join` of a new session beside the peer's algorithm, `EVALSHA return 1` and a
//! trivial `FCALL`, at capacities 1 to 10 000.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tower_waiting_room::{RoomPolicy, SessionId};

use super::calls::{
    command, connection, error_replies, line_id, load_ours, our_enter, pipelined_calls,
    script_load, store_on, OurRoom, PeerRoom, OUR_ADMITTED, OUR_CALL, OUR_IDS, OUR_WAITING,
    TRIVIAL_LIBRARY,
};
use super::{
    Sizes, BENCHMARK_CLIENTS, BENCHMARK_KEYSPACE, CAPACITIES, COMPARISON_LINE, COMPARISON_ROOM,
    FILL_BATCH, PEER_SCRIPT, RATIO_CAPACITY,
};
use crate::measure::{median, now_ms, round};
use crate::redis_server::RedisServer;
use crate::{BoxError, Settings};

fn benchmark_bin() -> String {
    std::env::var("TWR_REDIS_BENCHMARK").unwrap_or_else(|_| "redis-benchmark".to_owned())
}

/// One `redis-benchmark -c 32 -n <requests> -r 1000000 <command>` run (`EVALSHA <sha> ...` or
/// `FCALL <function> ...`); its requests per second. Fails if Redis answered any call with an
/// error.
pub(crate) fn redis_benchmark(
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

/// Only the peer comparison (`bench --script`): for work on the room function.
pub(crate) async fn script_comparison(settings: &Settings) -> Result<Map<String, Value>, BoxError> {
    peer_comparison(settings, &Sizes::of(settings)).await
}

pub(super) async fn peer_comparison(
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
        let now = now_ms();
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
