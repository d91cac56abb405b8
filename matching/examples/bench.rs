//! The benchmark: what the waiting room costs next to the same app without it, and how the Redis
//! store scales to a million waiters, measured side by side in one run on one machine.
//!
//! ```text
//! cargo run --release -p tower-waiting-room-matching --example bench             # full run, a few minutes
//! cargo run --release -p tower-waiting-room-matching --example bench -- --quick  # about a minute
//! cargo run -p tower-waiting-room-matching --example bench -- --smoke            # a few seconds: checks a complete summary is written
//! ```
//!
//! Everything runs on loopback and is started here: the HTTP servers under test (axum on
//! `127.0.0.1:0`), and a `redis-server` on a free port (`--save '' --appendonly no`) that stops
//! with this process however it ends (it runs under a shell holding a pipe from us, as in the
//! test harness). `TWR_REDIS_SERVER` names another server binary (e.g. Valkey).
//!
//! Scenarios (the HTTP ones are interleaved round by round, so noise hits plain and layered
//! alike; each is repeated and the median reported):
//! 1. **plain**: an axum router with a tiny handler, no layer;
//! 2. **fast path**: the same router behind the layer, every request with a fresh admission token;
//! 3. **cookie check**: first visits without cookies (302 + signed queue cookie);
//! 4. **queue poll**: waiting visitors polling the status endpoint, answered from the gateway's
//!    snapshot of the line (Redis behind it: one refresh a second, no call per poll);
//! 5. **script**: `RedisStore` enter/poll mix called directly (the room function, `FCALL`), and
//!    the same `FCALL` straight from the client, next to `EVALSHA "return 1"`;
//! 6. **scale**: 1 000 / 100 000 / 1 000 000 waiters: p50/p99 of poll and enter, bytes per waiter;
//!    and the embedded `MemoryStore` at 1 000 and 100 000 waiters: p50/p99 of poll and the p99
//!    ratio (a poll is O(log n): target within 2x);
//! 7. **micro**: token sign/verify, the layer's own work per request in-process, cookie scanning;
//! 8. **matching**: `RedisMatchStore` joins and polls (through `Matchmaker`) next to
//!    `EVALSHA "return 1"`, and a poll's p50/p99 with 1 000 and 100 000 users waiting.
//! 9. **Redis at two million** (`bench_parts/redis_scale.rs`): our `enter` next to the
//!    peer's algorithm, `EVALSHA "return 1"` and a trivial `FCALL` under `redis-benchmark` at capacities 1 to
//!    10 000, bytes per waiter, Redis CPU per waiting poll, and a simulated 2M / 8-gateway run.
//!
//! The load generator is in-process: raw hyper HTTP/1.1 connections, a fixed number of them, each
//! sending its next request as soon as the previous answer is read (closed loop), counted for a
//! fixed time after a warm-up. Servers and load generator each get one Tokio worker thread; the
//! servers' CPU time is read from `/proc` so the cost per request is reported next to the rate.
//!
//! Writes `target/bench/summary.json` and prints a table.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Map, Value};
use tower_waiting_room::{Keyring, SigningKey, WaitingRoomLayer};

use redis_server::RedisServer;

const USAGE: &str = "\
tower-waiting-room benchmark: the layer next to plain axum, and the Redis store at scale.

USAGE:
    cargo run --release -p tower-waiting-room-matching --example bench -- [--quick | --smoke] [--out PATH]
    cargo run --release -p tower-waiting-room-matching --example bench -- wrk [--secs N] [--rounds N]   (needs wrk: apt-get install -y wrk)

FLAGS:
    --quick       about a minute (shorter runs, fewer repeats)
    --smoke       a few seconds, for CI: checks that a complete summary is produced
                  (the numbers mean nothing; smaller scales)
    --out PATH    where to write the summary (default target/bench/summary.json)
    --micro       only the in-process micro benchmarks, printed as JSON (for profiling)
    --script      only the room function next to the peer's algorithm and `return 1`
                  (redis-benchmark; printed as JSON): for work on the room's script
    --joins       only the joins in batches beside `EVALSHA return 1` (printed as JSON)
    --sim         only the simulated run (2 000 000 waiters, 8 gateways; printed as JSON)
    -h, --help    print this help

ENVIRONMENT:
    TWR_REDIS_SERVER   the server binary (default redis-server)
";

const SECRET: [u8; 32] = *b"bench-secret-0123456789abcdefghi";
const ROOM: &str = "bench";
const POLL_ROOM: &str = "benchpoll";
const SCRIPT_ROOM: &str = "benchscript";
const SCALE_ROOM: &str = "benchscale";
/// The room's function library (`FUNCTION LOAD REPLACE`, then `FCALL twr_room_v11_<op>`).
const ROOM_SCRIPT: &str = tower_waiting_room::__private::ROOM_LIBRARY;

#[path = "bench_parts/wrk.rs"]
mod wrk;

// What edge tokens cost: signing, and the fast path with them on and off.
#[path = "bench_parts/edge.rs"]
mod edge;

// Joins in batches: newcomers placed per second beside `EVALSHA return 1`, and their latency.
#[path = "bench_parts/joins.rs"]
mod joins;

// The Redis-side measurements: the peer comparison, bytes per waiter, Redis CPU per
// waiting poll, the simulated 2M / 8-gateway run.
#[path = "bench_parts/redis_scale.rs"]
mod redis_scale;

#[path = "bench_parts/load.rs"]
mod load;
#[path = "bench_parts/machine.rs"]
mod machine;
#[path = "bench_parts/matching.rs"]
mod matching;
#[path = "bench_parts/measure.rs"]
mod measure;
#[path = "bench_parts/micro.rs"]
mod micro;
#[path = "bench_parts/over_http.rs"]
mod over_http;
#[path = "bench_parts/redis_server.rs"]
mod redis_server;
#[path = "bench_parts/scale.rs"]
mod scale;
#[path = "bench_parts/script.rs"]
mod script;
#[path = "bench_parts/servers.rs"]
mod servers;
#[path = "bench_parts/summary.rs"]
mod summary;

#[derive(Clone, Debug)]
struct Settings {
    mode: &'static str,
    warmup: Duration,
    run: Duration,
    repeats: usize,
    connections: usize,
    script_concurrency: usize,
    scales: Vec<u64>,
    latency_samples: usize,
    micro_iters: usize,
}

impl Settings {
    fn full() -> Self {
        Self {
            mode: "full",
            warmup: Duration::from_secs(1),
            run: Duration::from_secs(5),
            repeats: 5,
            connections: 32,
            script_concurrency: 16,
            scales: vec![1_000, 100_000, 1_000_000],
            latency_samples: 3_000,
            micro_iters: 200_000,
        }
    }

    fn quick() -> Self {
        Self {
            mode: "quick",
            warmup: Duration::from_millis(500),
            run: Duration::from_secs(2),
            repeats: 3,
            latency_samples: 1_000,
            micro_iters: 50_000,
            ..Self::full()
        }
    }

    fn smoke() -> Self {
        Self {
            mode: "smoke",
            warmup: Duration::from_millis(100),
            run: Duration::from_millis(300),
            repeats: 1,
            connections: 8,
            script_concurrency: 8,
            scales: vec![1_000, 10_000, 100_000],
            latency_samples: 100,
            micro_iters: 2_000,
        }
    }
}

fn main() -> ExitCode {
    if let Some(code) = wrk::subcommand() {
        return code;
    }
    let mut settings = Settings::full();
    let mut out = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/bench/summary.json"
    ));
    let mut script_only = false;
    let mut sim_only = false;
    let mut joins_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => settings = Settings::quick(),
            "--smoke" => settings = Settings::smoke(),
            "--micro" => return micro_only(&settings),
            "--script" => script_only = true,
            "--sim" => sim_only = true,
            "--joins" => joins_only = true,
            "--out" => match args.next() {
                Some(p) => out = PathBuf::from(p),
                None => return usage_error("--out needs a path"),
            },
            "-h" | "--help" => {
                print!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage_error(&format!("unknown argument {other:?}")),
        }
    }
    if cfg!(debug_assertions) && settings.mode != "smoke" {
        eprintln!(
            "warning: this is a debug build; numbers are meaningless. Use `cargo run --release -p tower-waiting-room-matching --example bench`."
        );
    }
    if sim_only {
        return print_json(
            tokio::runtime::Runtime::new()
                .map_err(BoxError::from)
                .and_then(|rt| rt.block_on(redis_scale::sim_only(&settings))),
        );
    }
    if joins_only {
        let run = || -> Result<Map<String, Value>, BoxError> {
            let redis = RedisServer::start()?;
            tokio::runtime::Runtime::new()?.block_on(joins::scenarios(&settings, &redis))
        };
        return print_json(run());
    }
    if script_only {
        return print_json(
            tokio::runtime::Runtime::new()
                .map_err(BoxError::from)
                .and_then(|rt| rt.block_on(redis_scale::script_comparison(&settings))),
        );
    }
    match summary::run(&settings, &out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Only the in-process micro benchmarks (no servers, no Redis): for profiling.
fn micro_only(settings: &Settings) -> ExitCode {
    let run = || -> Result<Map<String, Value>, BoxError> {
        let keyring = Keyring::new(SigningKey::new("k1", SECRET)?);
        let layer = WaitingRoomLayer::builder(ROOM)
            .capacity(1_000_000)
            .keyring(keyring.clone())
            .build()?;
        micro::micro_scenarios(
            &Settings {
                micro_iters: settings.micro_iters * 10,
                ..settings.clone()
            },
            &keyring,
            &layer,
        )
    };
    print_json(run())
}

/// Prints a partial run's summary as JSON, or its error.
fn print_json(result: Result<Map<String, Value>, BoxError>) -> ExitCode {
    match result {
        Ok(m) => {
            println!("{}", serde_json::to_string_pretty(&m).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("error: {msg}\n\n{USAGE}");
    ExitCode::from(2)
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
