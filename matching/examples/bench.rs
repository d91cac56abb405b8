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

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::pin;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::routing::get;
use axum::{Extension, Router};
use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tower::{Layer, Service};
use tower_waiting_room::__private::{redis_keys, room_visitor_call, AdmissionToken, QueueCookie};
use tower_waiting_room::store::snapshot::NEAR_HEAD;
use tower_waiting_room::store::{Decision, MemoryStore, RedisStore, Store};
use tower_waiting_room::{
    Admission, AdmittedBy, Keyring, RoomPolicy, SessionId, SigningKey, WaitingRoomLayer,
};
use tower_waiting_room_matching::store::RedisMatchStore;
use tower_waiting_room_matching::{
    GroupSize, JoinOutcome, MatchState, Matchmaker, Queue, Topic, UserId,
};

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
/// The room's function library (`FUNCTION LOAD REPLACE`, then `FCALL twr_room_v10_<op>`).
const ROOM_SCRIPT: &str = tower_waiting_room::__private::ROOM_LIBRARY;

#[path = "bench_parts/wrk.rs"]
mod wrk;

// What edge tokens cost: signing, and the fast path with them on and off.
#[path = "bench_parts/edge.rs"]
mod edge;

// Joins in batches: newcomers placed per second beside `EVALSHA return 1`, and their latency.
#[path = "bench_parts/joins.rs"]
mod joins;

/// Every key of the summary; the smoke run (and CI) checks that each one is there.
const REQUIRED_KEYS: &[&str] = &[
    "plain_rps",
    "fast_path_rps",
    "fast_path_ratio",
    "cookie_check_rps",
    "cookie_check_ratio",
    "queue_poll_rps",
    "queue_poll_ratio",
    "script_ops_per_sec",
    "evalsha_ops_per_sec",
    "script_ratio",
    "joins_placed_vs_evalsha",
    "join_p99_us_at_rate",
    "poll_p50_us",
    "poll_p99_us",
    "enter_p50_us",
    "enter_p99_us",
    "bytes_per_waiter",
    "bytes_per_waiter_steady",
    "memory_poll_p99_us",
    "memory_poll_p99_ratio",
    "token_sign_ns",
    "token_verify_ns",
    "edge_token_sign_ns",
    "edge_sign_ratio",
    "edge_fast_path_ratio",
    "matching_ops_per_sec",
    "matching_ratio",
    "matching_poll_p99_us",
    "matching_poll_p99_ratio",
    "peer_comparison",
    "event_stream_bytes",
    "idle_connection_bytes",
    "script_ratio_benchmark",
    "peer_bytes_per_waiter",
    "redis_us_per_waiting_poll",
    "sim_redis_cpu_share",
    "position_error_max",
    "machine",
    "cores",
    "cpu_model",
    "wrk_fast_path_ratio",
    "wrk_cookie_check_ratio",
    "wrk_noop_layer_ratio",
    "wrk_plain_control_ratio",
    "wrk_edge_tokens_ratio",
    "wrk_cookie_check_vs_redirect_only",
    "wrk_fast_path_vs_admission_floor",
    "layer_fast_path_axum_overhead_ns",
];

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
    match run(&settings, &out) {
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
        micro_scenarios(
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

fn run(settings: &Settings, out: &std::path::Path) -> Result<(), BoxError> {
    let started = Instant::now();
    eprintln!(
        "bench: mode {} ({} connections, {:?} per run after {:?} warm-up, {} repeats)",
        settings.mode, settings.connections, settings.run, settings.warmup, settings.repeats
    );
    let redis = RedisServer::start()?;
    eprintln!(
        "bench: {} {} on port {}",
        redis.binary,
        redis.version,
        redis.port()
    );

    // The servers under test get one worker thread, the load generator another; their CPU time
    // is read from /proc by thread id.
    let server_tids = Arc::new(Mutex::new(Vec::<u32>::new()));
    let tids = server_tids.clone();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-server")
        .on_thread_start(move || {
            if let Some(tid) = current_tid() {
                tids.lock().unwrap().push(tid);
            }
        })
        .enable_all()
        .build()?;
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-client")
        .enable_all()
        .build()?;

    let keyring = Keyring::new(SigningKey::new("k1", SECRET)?);
    let servers = server_rt.block_on(start_servers(&keyring, &redis.url()))?;
    // Give the worker a moment to start and register its thread id.
    std::thread::sleep(Duration::from_millis(50));
    let cpu = ServerCpu {
        tids: server_tids.lock().unwrap().clone(),
    };

    let mut summary = Map::new();
    let http = client_rt.block_on(http_scenarios(settings, &servers, &keyring, &cpu))?;
    let script = client_rt.block_on(script_scenarios(settings, &redis))?;
    let joins = client_rt.block_on(joins::scenarios(settings, &redis))?;
    let matching = client_rt.block_on(matching_scenarios(settings, &redis))?;
    let scale = client_rt.block_on(scale_scenarios(settings, &redis))?;
    let redis_scale = client_rt.block_on(redis_scale::scenarios(settings, &keyring))?;
    let memory_scale = memory_scale_scenarios(settings)?;
    let micro = micro_scenarios(settings, &keyring, &servers.fast_layer)?;
    drop(servers);
    server_rt.shutdown_timeout(Duration::from_secs(1));
    client_rt.shutdown_timeout(Duration::from_secs(1));

    let machine = machine(&redis);
    summary.insert("mode".into(), json!(settings.mode));
    summary.insert(
        "cores".into(),
        machine.get("cores").cloned().unwrap_or(Value::Null),
    );
    summary.insert(
        "cpu_model".into(),
        machine.get("cpu_model").cloned().unwrap_or(Value::Null),
    );
    summary.insert("machine".into(), Value::Object(machine));
    for part in [
        http,
        script,
        joins,
        matching,
        scale,
        redis_scale,
        memory_scale,
        micro,
    ] {
        summary.extend(part);
    }
    summary.extend(wrk::scenarios(settings)?);
    summary.insert(
        "settings".into(),
        json!({
            "warmup_ms": settings.warmup.as_millis() as u64,
            "run_ms": settings.run.as_millis() as u64,
            "repeats": settings.repeats,
            "connections": settings.connections,
            "script_concurrency": settings.script_concurrency,
            "scales": settings.scales,
            "latency_samples": settings.latency_samples,
            "micro_iters": settings.micro_iters,
            "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        }),
    );
    summary.insert(
        "elapsed_s".into(),
        json!(round(started.elapsed().as_secs_f64(), 1)),
    );
    drop(redis);

    let missing: Vec<&str> = REQUIRED_KEYS
        .iter()
        .copied()
        .filter(|k| !matches!(summary.get(*k), Some(v) if !v.is_null()))
        .collect();
    let summary = Value::Object(summary);
    print_table(&summary);
    redis_scale::print_table(&summary);
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(out, serde_json::to_string_pretty(&summary)? + "\n")?;
    eprintln!("bench: summary written to {}", out.display());
    if !missing.is_empty() {
        return Err(format!("the summary lacks {missing:?}").into());
    }
    let errors = summary["http_errors"].as_u64().unwrap_or(0);
    if errors > 0 {
        return Err(format!("{errors} HTTP requests got an unexpected answer").into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Servers under test

struct Servers {
    plain: SocketAddr,
    layered: SocketAddr,
    poll: SocketAddr,
    fast_layer: WaitingRoomLayer,
    poll_layer: WaitingRoomLayer,
    poll_store: RedisStore,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The tiny handler of every server. Behind the layer it answers 200 only to visitors let in
/// by their admission token (the fast path) and 202 to anyone admitted another way, so a run
/// that fell off the fast path counts as errors instead of passing unnoticed.
async fn hello(admission: Option<Extension<Admission>>) -> (StatusCode, &'static str) {
    match admission {
        Some(Extension(a)) if a.admitted_by() != AdmittedBy::Token => (StatusCode::ACCEPTED, "ok"),
        _ => (StatusCode::OK, "ok"),
    }
}

fn app() -> Router {
    Router::new().route("/", get(hello))
}

async fn serve(router: Router) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok((addr, task))
}

async fn start_servers(keyring: &Keyring, redis_url: &str) -> Result<Servers, BoxError> {
    let long = Duration::from_secs(3_600);
    // Fast path and cookie check: the embedded store, never called by either.
    let fast_layer = WaitingRoomLayer::builder(ROOM)
        .capacity(1_000_000)
        .keyring(keyring.clone())
        .store(MemoryStore::new())
        .build()?;
    // Queue poll: capacity 1 on Redis, so everyone but one waits; long TTLs so nobody is swept
    // or promoted during the run.
    let poll_store = RedisStore::builder()
        .url(redis_url)
        .timeout(Duration::from_secs(2))
        .build()?;
    // The per-session poll limit (30 per 10 s) is off: these 32 visitors poll back to back,
    // which the limit would answer without asking the store; real visitors poll every 2-30 s.
    let poll_layer = WaitingRoomLayer::builder(POLL_ROOM)
        .poll_limit(None)
        .capacity(1)
        .active_ttl(long)
        .queue_ttl(long)
        .keyring(keyring.clone())
        .store(poll_store.clone())
        .build()?;
    let (plain, t1) = serve(app()).await?;
    let (layered, t2) = serve(app().layer(fast_layer.clone())).await?;
    // The room's endpoints reach the layer through the router's fallback.
    let (poll, t3) = serve(
        app()
            .fallback(|| async { StatusCode::NOT_FOUND })
            .layer(poll_layer.clone()),
    )
    .await?;
    Ok(Servers {
        plain,
        layered,
        poll,
        fast_layer,
        poll_layer,
        poll_store,
        tasks: vec![t1, t2, t3],
    })
}

// ---------------------------------------------------------------------------------------------
// Load generator

/// What one connection sends: the same request over and over.
#[derive(Clone)]
struct Target {
    addr: SocketAddr,
    path: &'static str,
    /// One `Cookie` value per connection (cycled), or none.
    cookies: Arc<Vec<HeaderValue>>,
    expect: StatusCode,
}

struct LoadResult {
    rps: f64,
    /// Server CPU time per request, in microseconds.
    cpu_us: f64,
    errors: u64,
}

/// Runs `connections` closed-loop HTTP/1.1 connections against `target`: warm-up, then counts
/// answers for `settings.run`.
async fn load(
    settings: &Settings,
    target: &Target,
    cpu: &ServerCpu,
) -> Result<LoadResult, BoxError> {
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..settings.connections {
        let stream = tokio::net::TcpStream::connect(target.addr).await?;
        stream.set_nodelay(true)?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let cookie =
            (!target.cookies.is_empty()).then(|| target.cookies[c % target.cookies.len()].clone());
        let (done, errors, stop, target) =
            (done.clone(), errors.clone(), stop.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            let host = HeaderValue::from_str(&target.addr.to_string()).expect("address");
            while !stop.load(Ordering::Relaxed) {
                let mut req = Request::get(target.path)
                    .body(Empty::<Bytes>::new())
                    .expect("request");
                req.headers_mut().insert(header::HOST, host.clone());
                if let Some(cookie) = &cookie {
                    req.headers_mut().insert(header::COOKIE, cookie.clone());
                }
                if sender.ready().await.is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                match sender.send_request(req).await {
                    Ok(res) => {
                        let ok = res.status() == target.expect;
                        let body = res.into_body().collect().await;
                        if ok && body.is_ok() {
                            done.fetch_add(1, Ordering::Relaxed);
                        } else {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }));
    }
    tokio::time::sleep(settings.warmup).await;
    let (n0, c0, t0) = (done.load(Ordering::Relaxed), cpu.ns(), Instant::now());
    tokio::time::sleep(settings.run).await;
    let (n1, e1, c1, elapsed) = (
        done.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        cpu.ns(),
        t0.elapsed(),
    );
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let n = n1 - n0;
    Ok(LoadResult {
        rps: n as f64 / elapsed.as_secs_f64(),
        cpu_us: if n == 0 {
            0.0
        } else {
            c1.saturating_sub(c0) as f64 / 1_000.0 / n as f64
        },
        errors: e1, // every unexpected answer counts, warm-up included
    })
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One fresh admission token per connection, as its `Cookie` header value, minted with the
/// public API exactly as the room does.
fn admission_cookies(layer: &WaitingRoomLayer, keyring: &Keyring, n: usize) -> Vec<HeaderValue> {
    let name = layer.config().cookies().admission_name();
    let now = now_ms();
    (0..n)
        .map(|_| {
            let token = AdmissionToken::new(SessionId::random(), now, now + 300_000);
            let value = token.sign(keyring, layer.config().room());
            HeaderValue::from_str(&format!("{name}={value}")).expect("cookie")
        })
        .collect()
}

async fn http_scenarios(
    settings: &Settings,
    servers: &Servers,
    keyring: &Keyring,
    cpu: &ServerCpu,
) -> Result<Map<String, Value>, BoxError> {
    // Queue poll: one visitor holds the only slot; every connection's visitor waits in line.
    let policy = servers.poll_layer.config().policy().clone();
    let holder = SessionId::random();
    servers.poll_store.enter(&policy, holder).await?;
    // The polling waiters stand behind others (more than NEAR_HEAD), as most of a long line
    // does: their polls are answered from the gateway's snapshot, by the place in their
    // cookie (which the store's answer to their joining gives).
    for _ in 0..2 * NEAR_HEAD {
        servers
            .poll_store
            .enter(&policy, SessionId::random())
            .await?;
    }
    let (waiters, poll_cookies) = in_line(servers, keyring, settings.connections).await?;
    let poll_path: &'static str =
        Box::leak(format!("/__waitingroom/{POLL_ROOM}/status").into_boxed_str());

    let mut runs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut cpu_runs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut errors = 0;
    for round in 0..settings.repeats {
        for &w in &waiters {
            match servers.poll_store.enter(&policy, w).await? {
                Decision::Waiting { .. } => {}
                other => return Err(format!("a poll visitor is not waiting: {other:?}").into()),
            }
        }
        let no_cookie = || Arc::new(Vec::new());
        // Fresh admission tokens, minted right before each run: younger than `refresh` (15 s)
        // for the whole run. Plain gets the very same Cookie header as the fast path, so both
        // servers parse the same bytes; the plain router simply ignores it.
        let tokens = || {
            Arc::new(admission_cookies(
                &servers.fast_layer,
                keyring,
                settings.connections,
            ))
        };
        #[allow(clippy::type_complexity)]
        let scenarios: [(
            &str,
            SocketAddr,
            &'static str,
            &dyn Fn() -> Arc<Vec<HeaderValue>>,
            StatusCode,
        ); 5] = [
            ("plain", servers.plain, "/", &tokens, StatusCode::OK),
            ("fast_path", servers.layered, "/", &tokens, StatusCode::OK),
            ("plain", servers.plain, "/", &no_cookie, StatusCode::OK),
            (
                "cookie_check",
                servers.layered,
                "/",
                &no_cookie,
                StatusCode::FOUND,
            ),
            (
                "queue_poll",
                servers.poll,
                poll_path,
                &|| Arc::new(poll_cookies.clone()),
                StatusCode::OK,
            ),
        ];
        for (name, addr, path, cookies, expect) in scenarios {
            let r = load(
                settings,
                &Target {
                    addr,
                    path,
                    cookies: cookies(),
                    expect,
                },
                cpu,
            )
            .await?;
            eprintln!(
                "round {}/{}: {name:<13} {:>9.0} req/s  server CPU {:>6.2} us/req{}",
                round + 1,
                settings.repeats,
                r.rps,
                r.cpu_us,
                if r.errors > 0 {
                    format!("  ({} unexpected answers)", r.errors)
                } else {
                    String::new()
                }
            );
            errors += r.errors;
            runs.entry(name).or_default().push(r.rps);
            cpu_runs.entry(name).or_default().push(r.cpu_us);
        }
    }
    // A poll answered "waiting" (not "unknown"): the scenario measured what it claims.
    let check = http_get_status_body(servers.poll, poll_path, &poll_cookies[0]).await?;
    if !check.contains("\"state\":\"waiting\"") {
        return Err(format!("queue poll answered {check}").into());
    }

    let mut m = Map::new();
    // `plain` ran twice per round (before the fast path and before the cookie check): each
    // layered run is compared with the plain run right before it.
    let plain_all = &runs["plain"];
    let plain_a: Vec<f64> = plain_all.iter().step_by(2).copied().collect();
    let plain_b: Vec<f64> = plain_all.iter().skip(1).step_by(2).copied().collect();
    let plain_rps = median(plain_all);
    m.insert("plain_rps".into(), json!(round(plain_rps, 0)));
    for (name, plain) in [
        ("fast_path", &plain_a),
        ("cookie_check", &plain_b),
        ("queue_poll", &plain_b),
    ] {
        let rps = median(&runs[name]);
        let paired: Vec<f64> = runs[name]
            .iter()
            .zip(plain.iter())
            .map(|(l, p)| l / p)
            .collect();
        m.insert(format!("{name}_rps"), json!(round(rps, 0)));
        m.insert(format!("{name}_ratio"), json!(round(median(&paired), 3)));
    }
    let cpu_plain = median(&cpu_runs["plain"]);
    m.insert("plain_cpu_us".into(), json!(round(cpu_plain, 2)));
    for name in ["fast_path", "cookie_check", "queue_poll"] {
        let c = median(&cpu_runs[name]);
        m.insert(format!("{name}_cpu_us"), json!(round(c, 2)));
        m.insert(
            format!("{name}_cpu_ratio"),
            json!(round(if c > 0.0 { cpu_plain / c } else { 0.0 }, 3)),
        );
    }
    m.insert("http_errors".into(), json!(errors));
    m.extend(event_streams(settings, servers, keyring).await?);
    m.insert(
        "http_runs".into(),
        json!({ "rps": runs, "server_cpu_us": cpu_runs }),
    );
    Ok(m)
}

/// `count` more visitors in the poll room's line, as the store placed them: their sessions,
/// and their queue cookies (`Cookie` header values) carrying their places.
async fn in_line(
    servers: &Servers,
    keyring: &Keyring,
    count: usize,
) -> Result<(Vec<SessionId>, Vec<HeaderValue>), BoxError> {
    let policy = servers.poll_layer.config().policy();
    let q_name = servers.poll_layer.config().cookies().queue_name();
    let now = now_ms();
    let mut waiters = Vec::with_capacity(count);
    let mut cookies = Vec::with_capacity(count);
    for _ in 0..count {
        let session = SessionId::random();
        waiters.push(session);
        let Decision::Waiting {
            place: Some(place), ..
        } = servers.poll_store.enter(policy, session).await?
        else {
            return Err("a poll visitor did not get a place".into());
        };
        let value = QueueCookie::for_session(session, now, 86_400_000)
            .with_place(place)
            .sign(keyring, POLL_ROOM);
        cookies.push(HeaderValue::from_str(&format!("{q_name}={value}"))?);
    }
    Ok((waiters, cookies))
}

/// Memory per open event stream (`GET .../events`, Server-Sent Events fed by the gateway's
/// snapshot), next to memory per idle keep-alive connection that made one status poll, side
/// by side on the same server. Both figures are the whole process's resident memory growth
/// over the connections opened (client sockets included, as the server's): the stream's own
/// cost is the difference. Each stream is a waiter of its own (a session holds two at most).
async fn event_streams(
    settings: &Settings,
    servers: &Servers,
    keyring: &Keyring,
) -> Result<Map<String, Value>, BoxError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let n = match settings.mode {
        "smoke" => 50,
        "quick" => 1_000,
        _ => 4_000,
    };
    let addr = servers.poll;
    let (_, cookies) = in_line(servers, keyring, n).await?;
    let request = |path: &str, cookie: &HeaderValue| {
        format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nCookie: {}\r\n\r\n",
            cookie.to_str().unwrap_or_default()
        )
    };
    let events: Vec<String> = cookies
        .iter()
        .map(|c| request(&format!("/__waitingroom/{POLL_ROOM}/events"), c))
        .collect();
    let status: Vec<String> = cookies
        .iter()
        .map(|c| request(&format!("/__waitingroom/{POLL_ROOM}/status"), c))
        .collect();
    // Opens a connection per request of `reqs`, each read until `until` arrives; kept open.
    let open = |reqs: Vec<String>, until: &'static str| async move {
        let mut held = Vec::with_capacity(n);
        for req in reqs {
            let mut s = tokio::net::TcpStream::connect(addr).await?;
            s.write_all(req.as_bytes()).await?;
            let mut got = Vec::new();
            let mut buf = [0u8; 2048];
            while !String::from_utf8_lossy(&got).contains(until) {
                let k = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await??;
                if k == 0 {
                    return Err::<_, BoxError>(
                        format!("closed before {until:?}: {}", String::from_utf8_lossy(&got))
                            .into(),
                    );
                }
                got.extend_from_slice(&buf[..k]);
            }
            held.push(s);
        }
        Ok(held)
    };
    let settle = || tokio::time::sleep(Duration::from_millis(300));
    settle().await;
    let before = resident_bytes();
    let idle = open(status, "\"state\":\"waiting\"").await?;
    settle().await;
    let with_idle = resident_bytes();
    let streams = open(events, "\"state\":\"waiting\"").await?;
    // Each stream has looked at the snapshot a few times (one refresh a second).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let with_streams = resident_bytes();
    let per = |a: u64, b: u64| round(b.saturating_sub(a) as f64 / n as f64, 0);
    let mut m = Map::new();
    m.insert("event_streams_open".into(), json!(streams.len()));
    m.insert(
        "idle_connection_bytes".into(),
        json!(per(before, with_idle)),
    );
    m.insert(
        "event_stream_bytes".into(),
        json!(per(with_idle, with_streams)),
    );
    eprintln!(
        "event streams: {n} open, {} bytes each (an idle keep-alive connection: {} bytes)",
        per(with_idle, with_streams),
        per(before, with_idle)
    );
    drop((idle, streams));
    Ok(m)
}

/// This process's resident memory, from `/proc/self/statm` (0 where there is none).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4_096)
}

async fn http_get_status_body(
    addr: SocketAddr,
    path: &str,
    cookie: &HeaderValue,
) -> Result<String, BoxError> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = Request::get(path)
        .header(header::HOST, addr.to_string())
        .header(header::COOKIE, cookie.clone())
        .body(Empty::new())?;
    let res = sender.send_request(req).await?;
    let body = res.into_body().collect().await?.to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

// ---------------------------------------------------------------------------------------------
// Script: the room script through RedisStore, next to a trivial EVALSHA

async fn script_scenarios(
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
    // The room runs as functions (`FCALL twr_room_v10_<op>`); the store loaded them with its first call.
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

// ---------------------------------------------------------------------------------------------
// Matching: joins and polls through RedisMatchStore, next to a trivial EVALSHA

/// Users waiting for the poll-cost scenario: 1 000 and 100 000 (the smoke run: 1 000 and 10 000).
fn matching_scales(settings: &Settings) -> [u64; 2] {
    if settings.mode == "smoke" {
        [1_000, 10_000]
    } else {
        [1_000, 100_000]
    }
}

async fn matching_scenarios(
    settings: &Settings,
    redis: &RedisServer,
) -> Result<Map<String, Value>, BoxError> {
    let hour = Duration::from_secs(3_600);
    let matchmaker = |prefix: &str| -> Result<Matchmaker, BoxError> {
        let store = RedisStore::builder()
            .url(redis.url())
            .prefix(prefix)
            .timeout(Duration::from_secs(5))
            .build()?;
        // Nothing expires during the run: a group of 3 needs three waiters, and pairs of
        // waiters stay waiting.
        Ok(Matchmaker::builder()
            .fallback_after(hour)
            .timeout(2 * hour)
            .confirm_ttl(hour)
            .keep_confirmed(hour)
            .build(RedisMatchStore::new(&store))?)
    };
    let queue = |n: u64| Queue::new(Topic::new(format!("topic-{n}")).unwrap(), GroupSize::TRIO);
    let user = |prefix: &str, n: u64| UserId::new(format!("{prefix}-{n}")).unwrap();

    // Joins and polls: half the operations are a newcomer joining one of 1 000 queues of 3
    // (every third join forms a group), half a poll of an earlier newcomer.
    let client = redis::Client::open(redis.url())?;
    let conn = client.get_connection_manager().await?;
    let trivial = Arc::new(redis::Script::new("return 1"));
    let mut runs = Vec::new();
    let mut evalsha_runs = Vec::new();
    let mut usec = Vec::new();
    for round in 0..settings.repeats {
        let m = matchmaker(&format!("benchmatch{round}"))?;
        redis.command(&["CONFIG", "RESETSTAT"])?;
        // Operation numbers from one counter: each newcomer joins exactly once.
        let counter = Arc::new(AtomicU64::new(0));
        let ops = concurrent_ops(settings, {
            let m = m.clone();
            move |_| {
                let m = m.clone();
                let i = counter.fetch_add(1, Ordering::Relaxed);
                async move {
                    if i.is_multiple_of(2) {
                        let u = user("j", i / 2);
                        matches!(
                            m.join(u, queue(i / 2 % 1_000)).await,
                            Ok(JoinOutcome::Joined(_))
                        )
                    } else {
                        // An earlier newcomer (its join is done or under way: idle counts).
                        let u = user("j", (i / 2).saturating_sub(64));
                        m.status(u).await.is_ok()
                    }
                }
            }
        })
        .await;
        runs.push(ops);
        // Matching's steps are functions of its library: FCALL (the room is not called here).
        usec.push(redis.usec_per_call("fcall"));
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
        eprintln!(
            "round {}/{}: matching joins+polls {:>8.0} ops/s  EVALSHA return 1 {:>8.0} ops/s",
            round + 1,
            settings.repeats,
            runs[round],
            evalsha_runs[round]
        );
    }
    let ops = median(&runs);
    let evalsha = median(&evalsha_runs);

    // A poll's cost with many waiting: pairs of waiters in queues of 3 (no group forms), then
    // polls of random waiters, one at a time.
    let mut p50 = Map::new();
    let mut p99 = Map::new();
    for n in matching_scales(settings) {
        let prefix = format!("benchmatchscale{n}");
        let m = matchmaker(&prefix)?;
        let next = Arc::new(AtomicU64::new(0));
        let mut fill = Vec::new();
        for _ in 0..settings.script_concurrency {
            let (m, next) = (m.clone(), next.clone());
            fill.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    let joined = m.join(user("w", i), queue(i / 2)).await;
                    assert!(
                        matches!(joined, Ok(JoinOutcome::Joined(MatchState::Waiting(_)))),
                        "{joined:?}"
                    );
                }
            }));
        }
        for t in fill {
            t.await?;
        }
        let mut samples = Vec::with_capacity(settings.latency_samples);
        for k in 0..settings.latency_samples as u64 {
            let u = user("w", (k * 7_919) % n);
            let t0 = Instant::now();
            let state = m.status(u).await?;
            samples.push(t0.elapsed().as_secs_f64() * 1e6);
            assert!(matches!(state, MatchState::Waiting(_)), "{state:?}");
        }
        p50.insert(n.to_string(), json!(round(median(&samples), 1)));
        p99.insert(n.to_string(), json!(round(percentile(&samples, 99.0), 1)));
        eprintln!(
            "matching: {n} waiting: poll p50 {:.0} us, p99 {:.0} us",
            median(&samples),
            percentile(&samples, 99.0)
        );
    }
    let [small, large] = matching_scales(settings).map(|n| n.to_string());
    let ratio = p99[&large].as_f64().unwrap_or(f64::NAN) / p99[&small].as_f64().unwrap_or(f64::NAN);
    let mut m = Map::new();
    m.insert("matching_ops_per_sec".into(), json!(round(ops, 0)));
    m.insert(
        "matching_evalsha_ops_per_sec".into(),
        json!(round(evalsha, 0)),
    );
    m.insert("matching_ratio".into(), json!(round(ops / evalsha, 3)));
    m.insert(
        "matching_usec_per_script_call".into(),
        json!(round(median(&usec), 2)),
    );
    m.insert("matching_poll_p50_us".into(), Value::Object(p50));
    m.insert("matching_poll_p99_us".into(), Value::Object(p99));
    m.insert("matching_poll_p99_ratio".into(), json!(round(ratio, 2)));
    Ok(m)
}

/// `script_concurrency` tasks calling `op(i)` in a loop; operations per second after warm-up.
/// Panics (failing the bench) if an operation does not give the expected answer.
async fn concurrent_ops<F, Fut>(settings: &Settings, op: F) -> f64
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..settings.script_concurrency as u64 {
        let (op, done, bad, stop) = (op.clone(), done.clone(), bad.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while !stop.load(Ordering::Relaxed) {
                if op(i).await {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
        }));
    }
    tokio::time::sleep(settings.warmup).await;
    let (n0, t0) = (done.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(settings.run).await;
    let (n1, elapsed) = (done.load(Ordering::Relaxed), t0.elapsed());
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let bad = bad.load(Ordering::Relaxed);
    assert_eq!(bad, 0, "{bad} script calls gave an unexpected answer");
    (n1 - n0) as f64 / elapsed.as_secs_f64()
}

// ---------------------------------------------------------------------------------------------
// Scale: a million waiters

async fn scale_scenarios(
    settings: &Settings,
    redis: &RedisServer,
) -> Result<Map<String, Value>, BoxError> {
    let store = RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(5))
        .build()?;
    let keys = redis_keys(&store, SCALE_ROOM);
    let client = redis::Client::open(redis.url())?;
    let mut conn = client
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?;
    // Fills the line server-side: waiters 1..=n by sequence, each member the 16 raw bytes of
    // the big-endian u128 i (store v2 keeps no per-waiter check-in to fill), one visitor inside
    // holding the only slot (as tests/redis/store_redis_faults.rs does).
    let fill = redis::Script::new(
        r"
        local now = tonumber(ARGV[1])
        local n = tonumber(ARGV[2])
        for i = 1, n do
          redis.call('ZADD', KEYS[1], i, struct.pack('>I4I4I4I4', 0, 0, 0, i))
        end
        redis.call('SET', KEYS[2], n)
        redis.call('ZADD', KEYS[3], now + 3600000, 'someone-inside')
        return n",
    );
    let mut poll50 = Map::new();
    let mut poll99 = Map::new();
    let mut enter50 = Map::new();
    let mut enter99 = Map::new();
    let mut bytes = Map::new();
    let mut server_us = Map::new();
    let mut fill_s = Map::new();
    let mut last_bytes = 0.0;
    for &n in &settings.scales {
        let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let before = redis.used_memory()?;
        let t = Instant::now();
        // line, seq, active (`redis_keys`' order: seq, line, active, ...).
        let _: i64 = fill
            .key(&keys[1])
            .key(&keys[0])
            .key(&keys[2])
            .arg(now_ms())
            .arg(n)
            .invoke_async(&mut conn)
            .await?;
        fill_s.insert(n.to_string(), json!(round(t.elapsed().as_secs_f64(), 2)));
        let per_waiter = redis.used_memory()?.saturating_sub(before) as f64 / n as f64;
        last_bytes = per_waiter;
        let policy = RoomPolicy::new(SCALE_ROOM, 1)
            .with_ttls(
                Duration::from_secs(3_600),
                Duration::from_secs(30),
                Duration::from_secs(3_600),
            )
            .with_max_queue_len(n * 2 + 1_000_000);
        // Warm the connection and the script cache.
        store.stats(&policy).await?;

        redis.command(&["CONFIG", "RESETSTAT"])?;
        let mut polls = Vec::with_capacity(settings.latency_samples);
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..settings.latency_samples {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = 1 + x % n;
            let s = SessionId::from_bytes(u128::from(i).to_be_bytes());
            let t = Instant::now();
            let d = store.poll(&policy, s).await?;
            polls.push(t.elapsed().as_secs_f64() * 1e6);
            match d {
                Decision::Waiting { position, .. } if position == i => {}
                other => return Err(format!("poll of waiter {i} of {n}: {other:?}").into()),
            }
        }
        let poll_server = redis.usec_per_call("fcall");
        redis.command(&["CONFIG", "RESETSTAT"])?;
        let mut enters = Vec::with_capacity(settings.latency_samples);
        for k in 0..settings.latency_samples as u64 {
            let s = SessionId::random();
            let t = Instant::now();
            let d = store.enter(&policy, s).await?;
            enters.push(t.elapsed().as_secs_f64() * 1e6);
            match d {
                Decision::Waiting { position, .. } if position == n + k + 1 => {}
                other => return Err(format!("enter at {n}: {other:?}").into()),
            }
        }
        let enter_server = redis.usec_per_call("fcall");
        let key = n.to_string();
        poll50.insert(key.clone(), json!(round(percentile(&polls, 50.0), 1)));
        poll99.insert(key.clone(), json!(round(percentile(&polls, 99.0), 1)));
        enter50.insert(key.clone(), json!(round(percentile(&enters, 50.0), 1)));
        enter99.insert(key.clone(), json!(round(percentile(&enters, 99.0), 1)));
        bytes.insert(key.clone(), json!(per_waiter.round() as u64));
        server_us.insert(
            key,
            json!({"poll": round(poll_server, 2), "enter": round(enter_server, 2)}),
        );
        eprintln!(
            "scale {n:>9}: poll p50 {:>6.1} us p99 {:>6.1} us, enter p50 {:>6.1} us p99 {:>6.1} us, {:.0} bytes/waiter (Redis-side {:.1}/{:.1} us)",
            percentile(&polls, 50.0),
            percentile(&polls, 99.0),
            percentile(&enters, 50.0),
            percentile(&enters, 99.0),
            per_waiter,
            poll_server,
            enter_server
        );
    }
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await?;
    let first = settings.scales[0].to_string();
    let last = settings.scales[settings.scales.len() - 1].to_string();
    let growth = |m: &Map<String, Value>| {
        round(
            m[&last].as_f64().unwrap_or(0.0) / m[&first].as_f64().unwrap_or(1.0).max(0.001),
            2,
        )
    };
    let mut m = Map::new();
    m.insert("poll_p99_growth".into(), json!(growth(&poll99)));
    m.insert("poll_p50_growth".into(), json!(growth(&poll50)));
    m.insert("enter_p99_growth".into(), json!(growth(&enter99)));
    m.insert("poll_p50_us".into(), Value::Object(poll50));
    m.insert("poll_p99_us".into(), Value::Object(poll99));
    m.insert("enter_p50_us".into(), Value::Object(enter50));
    m.insert("enter_p99_us".into(), Value::Object(enter99));
    // (`bytes_per_waiter` itself is redis_scale's: a line filled through the script.)
    m.insert(
        "bytes_per_waiter_server_fill".into(),
        json!(last_bytes.round() as u64),
    );
    m.insert("bytes_per_waiter_by_scale".into(), Value::Object(bytes));
    m.insert(
        "redis_usec_per_call_by_scale".into(),
        Value::Object(server_us),
    );
    m.insert("fill_seconds".into(), Value::Object(fill_s));
    Ok(m)
}

/// The embedded store's scales: its line is in process memory, so these are the same in every
/// mode (the smoke run too: filling 100 000 takes about a second even in a debug build).
const MEMORY_SCALES: [u64; 2] = [1_000, 100_000];

/// The embedded store at [`MEMORY_SCALES`] waiters: p50/p99 of a poll of a random waiter (its
/// position is checked), and the ratio of the p99s, largest to smallest. Called directly, in
/// process: the store's futures are ready at once.
fn memory_scale_scenarios(settings: &Settings) -> Result<Map<String, Value>, BoxError> {
    let mut poll50 = Map::new();
    let mut poll99 = Map::new();
    // Polls are a microsecond or two: ten times the samples of the Redis scales, for a p99 that
    // is not just the worst one.
    let samples = settings.latency_samples * 10;
    for n in MEMORY_SCALES {
        let store = MemoryStore::new();
        let hour = Duration::from_secs(3_600);
        let policy = RoomPolicy::new("benchmemory", 1)
            .with_ttls(hour, hour, hour)
            .with_max_queue_len(n * 2);
        let mut waiters = Vec::with_capacity(n as usize);
        now_or_never(store.enter(&policy, SessionId::random()))?;
        let t = Instant::now();
        for i in 1..=n {
            let s = SessionId::random();
            match now_or_never(store.enter(&policy, s))? {
                Decision::Waiting { position, .. } if position == i => waiters.push(s),
                other => return Err(format!("memory enter {i} of {n}: {other:?}").into()),
            }
        }
        let fill = t.elapsed();
        let mut polls = Vec::with_capacity(samples);
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..samples {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = x % n;
            // Fetched before the clock starts: the bench's own array is not the store's cost.
            let s = std::hint::black_box(waiters[i as usize]);
            let t = Instant::now();
            let d = now_or_never(store.poll(&policy, s))?;
            polls.push(t.elapsed().as_secs_f64() * 1e6);
            match d {
                Decision::Waiting { position, .. } if position == i + 1 => {}
                other => return Err(format!("memory poll of waiter {i} of {n}: {other:?}").into()),
            }
        }
        let key = n.to_string();
        poll50.insert(key.clone(), json!(round(percentile(&polls, 50.0), 2)));
        poll99.insert(key, json!(round(percentile(&polls, 99.0), 2)));
        eprintln!(
            "memory {n:>9}: poll p50 {:>6.2} us p99 {:>6.2} us (filled in {:.2} s)",
            percentile(&polls, 50.0),
            percentile(&polls, 99.0),
            fill.as_secs_f64()
        );
    }
    let first = MEMORY_SCALES[0].to_string();
    let last = MEMORY_SCALES[MEMORY_SCALES.len() - 1].to_string();
    let ratio =
        poll99[&last].as_f64().unwrap_or(0.0) / poll99[&first].as_f64().unwrap_or(1.0).max(0.001);
    let mut m = Map::new();
    m.insert("memory_poll_p50_us".into(), Value::Object(poll50));
    m.insert("memory_poll_p99_us".into(), Value::Object(poll99));
    m.insert("memory_poll_p99_ratio".into(), json!(round(ratio, 2)));
    Ok(m)
}

// ---------------------------------------------------------------------------------------------
// Micro: in-process, no network

struct NoopWake;
impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

/// Polls a future that is expected to be ready at once (nothing in these paths waits).
fn now_or_never<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(NoopWake));
    let mut cx = Context::from_waker(&waker);
    match pin!(f).poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the future was not ready"),
    }
}

/// Nanoseconds per call of `f`, the best of three batches (the least disturbed).
fn time_ns(iters: usize, mut f: impl FnMut(usize)) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for i in 0..iters {
            f(i);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    best
}

/// Nanoseconds per request through `svc` (poll_ready + call + the future), requests built
/// beforehand so only the service is timed; the best of three runs. `cookie` is called once per
/// batch (so admission tokens are always fresh); every answer must have status `expect`.
fn time_service<S, B>(
    iters: usize,
    svc: &mut S,
    cookie: impl Fn() -> Option<HeaderValue>,
    expect: StatusCode,
) -> Result<f64, BoxError>
where
    S: Service<Request<Empty<Bytes>>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
{
    let batch = iters.clamp(1, 20_000);
    let rounds = iters.div_ceil(batch);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut total = Duration::ZERO;
        for _ in 0..rounds {
            let cookie = cookie();
            let reqs: Vec<_> = (0..batch)
                .map(|_| {
                    let mut r = Request::get("/?page=1")
                        .body(Empty::<Bytes>::new())
                        .expect("request");
                    r.headers_mut()
                        .insert(header::HOST, HeaderValue::from_static("shop.example"));
                    if let Some(c) = &cookie {
                        r.headers_mut().insert(header::COOKIE, c.clone());
                    }
                    r
                })
                .collect();
            let mut out = Vec::with_capacity(batch);
            let t = Instant::now();
            for req in reqs {
                now_or_never(std::future::poll_fn(|cx| svc.poll_ready(cx))).expect("ready");
                out.push(now_or_never(svc.call(req)).expect("response"));
            }
            total += t.elapsed();
            if let Some(bad) = out.iter().find(|r| r.status() != expect) {
                return Err(format!("micro: expected {expect}, got {}", bad.status()).into());
            }
            drop(out);
        }
        best = best.min(total.as_nanos() as f64 / (rounds * batch) as f64);
    }
    Ok(best)
}

/// A service that answers at once: 200 to requests without an admission (the bare service) or
/// admitted by their token (the fast path), 202 to any other, so that a run that fell off the
/// fast path fails.
fn ok_inner() -> impl Service<
    Request<Empty<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future: Send + 'static,
> + Clone
       + Send
       + Sync
       + 'static {
    tower::service_fn(|req: Request<Empty<Bytes>>| async move {
        let by_token = req
            .extensions()
            .get::<Admission>()
            .is_none_or(|a| a.admitted_by() == AdmittedBy::Token);
        let mut res = Response::new(Full::new(Bytes::from_static(b"ok")));
        if !by_token {
            *res.status_mut() = StatusCode::ACCEPTED;
        }
        Ok::<_, Infallible>(res)
    })
}

fn micro_scenarios(
    settings: &Settings,
    keyring: &Keyring,
    layer: &WaitingRoomLayer,
) -> Result<Map<String, Value>, BoxError> {
    let iters = settings.micro_iters;
    let now = now_ms();
    let room = layer.config().room();
    let token = AdmissionToken::new(SessionId::random(), now, now + 300_000);
    let signed = token.sign(keyring, room);
    let queue = QueueCookie::for_session(SessionId::random(), now, 86_400_000);
    let queue_signed = queue.sign(keyring, room);

    let sign_ns = time_ns(iters, |_| {
        std::hint::black_box(token.sign(keyring, std::hint::black_box(room)));
    });
    let verify_ns = time_ns(iters, |_| {
        let v = AdmissionToken::verify(keyring, room, std::hint::black_box(&signed), now);
        assert!(v.is_some());
    });
    let queue_verify_ns = time_ns(iters, |_| {
        let v = QueueCookie::verify(keyring, room, std::hint::black_box(&queue_signed), now);
        assert!(v.is_some());
    });
    let random_ns = time_ns(iters, |_| {
        std::hint::black_box(SessionId::random());
    });

    // The layer in-process around a service that answers at once: what it adds per request.
    // The inner answers 200 only to requests without an admission (the bare service) or
    // admitted by their token (the fast path), so a run that fell off the fast path fails.
    let inner = ok_inner();
    let mut bare = inner.clone();
    let mut layered = layer.layer(inner);
    let admission_name = layer.config().cookies().admission_name();
    let fresh_token = || {
        let now = now_ms();
        AdmissionToken::new(SessionId::random(), now, now + 300_000).sign(keyring, room)
    };
    let token_cookie =
        || HeaderValue::from_str(&format!("{admission_name}={}", fresh_token())).ok();
    // A busy site's Cookie header: 20 other cookies (~1 KB) before the room's.
    let big_cookie = || {
        let mut big = String::new();
        for i in 0..20 {
            big.push_str(&format!("_site_cookie_{i}=v{i}-{}; ", "x".repeat(32)));
        }
        big.push_str(&format!("{admission_name}={}", fresh_token()));
        HeaderValue::from_str(&big).ok()
    };
    let bare_ns = time_service(iters, &mut bare, token_cookie, StatusCode::OK)?;
    let fast_ns = time_service(iters, &mut layered, token_cookie, StatusCode::OK)?;
    let fast_big_ns = time_service(iters, &mut layered, big_cookie, StatusCode::OK)?;
    let first_visit_ns = time_service(iters, &mut layered, || None, StatusCode::FOUND)?;
    // The same with the bench's axum app as the wrk servers run it (`Router::layer`: axum
    // boxes the layered route and its response body): the layer's cost in an axum app,
    // without the network's noise.
    let mut axum_plain = app();
    let mut axum_layered = app().layer(layer.clone());
    let axum_plain_ns = time_service(iters, &mut axum_plain, token_cookie, StatusCode::OK)?;
    let axum_fast_ns = time_service(iters, &mut axum_layered, token_cookie, StatusCode::OK)?;

    eprintln!(
        "micro: sign {sign_ns:.0} ns, verify {verify_ns:.0} ns, fast path in-process +{:.0} ns (20 more cookies +{:.0} ns), first visit +{:.0} ns; axum app {axum_plain_ns:.0} ns, behind the layer +{:.0} ns",
        fast_ns - bare_ns,
        fast_big_ns - fast_ns,
        first_visit_ns - bare_ns,
        axum_fast_ns - axum_plain_ns,
    );
    let mut m = edge::micro(settings, keyring)?;
    m.insert("token_sign_ns".into(), json!(round(sign_ns, 0)));
    m.insert("token_verify_ns".into(), json!(round(verify_ns, 0)));
    m.insert(
        "queue_cookie_verify_ns".into(),
        json!(round(queue_verify_ns, 0)),
    );
    m.insert("session_random_ns".into(), json!(round(random_ns, 0)));
    m.insert("bare_service_ns".into(), json!(round(bare_ns, 0)));
    m.insert("layer_fast_path_ns".into(), json!(round(fast_ns, 0)));
    m.insert(
        "layer_fast_path_overhead_ns".into(),
        json!(round(fast_ns - bare_ns, 0)),
    );
    m.insert(
        "cookie_scan_20_ns".into(),
        json!(round(fast_big_ns - fast_ns, 0)),
    );
    m.insert(
        "layer_first_visit_ns".into(),
        json!(round(first_visit_ns, 0)),
    );
    m.insert("axum_plain_ns".into(), json!(round(axum_plain_ns, 0)));
    m.insert(
        "layer_fast_path_axum_overhead_ns".into(),
        json!(round(axum_fast_ns - axum_plain_ns, 0)),
    );
    Ok(m)
}

// ---------------------------------------------------------------------------------------------
// The machine, and the servers' CPU time

fn machine(redis: &RedisServer) -> Map<String, Value> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let os = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!("{} {}", std::env::consts::OS, s.trim()))
        .unwrap_or_else(|_| std::env::consts::OS.to_owned());
    let mut m = Map::new();
    m.insert(
        "cores".into(),
        json!(std::thread::available_parallelism().map_or(0, |n| n.get())),
    );
    m.insert("cpu_model".into(), json!(model));
    m.insert("os".into(), json!(os));
    m.insert(
        "redis".into(),
        json!(format!("{} {}", redis.binary, redis.version)),
    );
    m
}

/// The calling thread's id, from `/proc/thread-self` (a link to `PID/task/TID`).
fn current_tid() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// CPU time of the server runtime's threads, from `/proc/self/task/TID/schedstat` (ns).
struct ServerCpu {
    tids: Vec<u32>,
}

impl ServerCpu {
    fn ns(&self) -> u64 {
        self.tids
            .iter()
            .filter_map(|tid| {
                let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
                s.split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum()
    }
}

// ---------------------------------------------------------------------------------------------
// redis-server on a free port, stopped with this process

#[path = "../../tests/redis_harness/mod.rs"]
mod redis_harness;

// The Redis-side measurements: the peer comparison, bytes per waiter, Redis CPU per
// waiting poll, the simulated 2M / 8-gateway run.
#[path = "bench_parts/redis_scale.rs"]
mod redis_scale;

/// The test harness's server (free port, stopped with this process however it ends), with the
/// binary's name and version for the report.
struct RedisServer {
    server: redis_harness::Server,
    binary: String,
    version: String,
}

impl RedisServer {
    fn start() -> Result<Self, BoxError> {
        Self::start_with(&[])
    }

    /// Started with `extra` arguments for `redis-server`.
    fn start_with(extra: &[&str]) -> Result<Self, BoxError> {
        let binary = redis_harness::server_bin();
        let version = Command::new(&binary)
            .arg("--version")
            .output()
            .map_err(|e| {
                format!(
                    "cannot run {binary} ({e}); install it (apt-get install redis-server, as scripts/test does) or set TWR_REDIS_SERVER"
                )
            })?;
        let version = String::from_utf8_lossy(&version.stdout)
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or("?")
            .to_owned();
        Ok(Self {
            server: redis_harness::Server::start(extra),
            binary,
            version,
        })
    }

    fn port(&self) -> u16 {
        self.server.port
    }

    fn url(&self) -> String {
        self.server.url()
    }

    /// One command in RESP over a fresh connection; the raw reply text.
    fn command(&self, args: &[&str]) -> std::io::Result<String> {
        self.server.command(args)
    }

    fn info_field(&self, section: &str, field: &str) -> Option<String> {
        self.server.info_field(section, field)
    }

    fn used_memory(&self) -> Result<u64, BoxError> {
        Ok(self
            .info_field("memory", "used_memory")
            .and_then(|v| v.parse().ok())
            .ok_or("INFO memory has no used_memory")?)
    }

    /// Redis-side microseconds per call of `command` since the last `CONFIG RESETSTAT`.
    fn usec_per_call(&self, command: &str) -> f64 {
        self.info_field("commandstats", &format!("cmdstat_{command}"))
            .and_then(|v| {
                v.split(',')
                    .find_map(|kv| kv.strip_prefix("usec_per_call="))
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0.0)
    }
}

// ---------------------------------------------------------------------------------------------
// Numbers and the table

fn median(v: &[f64]) -> f64 {
    percentile(v, 50.0)
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = (p / 100.0 * (s.len() - 1) as f64).round() as usize;
    s[rank.min(s.len() - 1)]
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

fn print_table(s: &Value) {
    let num = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
    let cpu = |k: &str| s[format!("{k}_cpu_us")].as_f64().unwrap_or(f64::NAN);
    println!();
    println!(
        "tower-waiting-room bench ({} mode): {} cores, {}, {}",
        s["mode"].as_str().unwrap_or("?"),
        s["cores"],
        s["cpu_model"].as_str().unwrap_or("?"),
        s["machine"]["redis"].as_str().unwrap_or("?")
    );
    println!();
    println!("| scenario | req/s | ratio to plain | server CPU us/req | target |");
    println!("|---|---:|---:|---:|---|");
    println!(
        "| plain (axum, no layer) | {:.0} | 1 | {:.2} | |",
        num("plain_rps"),
        cpu("plain")
    );
    for (name, label, target) in [
        ("fast_path", "fast path (admission token)", ">= 0.95"),
        ("cookie_check", "cookie check (first visit, 302)", ">= 0.9"),
        ("queue_poll", "queue poll (status, Redis)", "-"),
    ] {
        println!(
            "| {label} | {:.0} | {:.3} | {:.2} | {target} |",
            num(&format!("{name}_rps")),
            num(&format!("{name}_ratio")),
            cpu(name)
        );
    }
    println!();
    println!("| Redis | ops/s | ratio to EVALSHA `return 1` |");
    println!("|---|---:|---:|");
    println!(
        "| room script via RedisStore (enter/poll) | {:.0} | {:.3} |",
        num("script_ops_per_sec"),
        num("script_ratio")
    );
    println!(
        "| room script, raw EVALSHA | {:.0} | {:.3} |",
        num("script_raw_ops_per_sec"),
        num("script_raw_ratio")
    );
    println!(
        "| EVALSHA `return 1` | {:.0} | 1 |",
        num("evalsha_ops_per_sec")
    );
    println!(
        "| joins placed in batches of 64 (redis-benchmark, beside its own EVALSHA) | {:.0} | {:.3} |",
        num("joins_placed_per_sec"),
        num("joins_placed_vs_evalsha")
    );
    println!(
        "| joins placed through RedisStore (one process, beside its own EVALSHA) | {:.0} | {:.3} |",
        num("store_joins_placed_per_sec"),
        num("store_joins_vs_evalsha")
    );
    println!(
        "| matching joins + polls via Matchmaker (2 script calls each) | {:.0} | {:.3} |",
        num("matching_ops_per_sec"),
        num("matching_ratio")
    );
    println!();
    println!("| matching: users waiting | poll p50 us | poll p99 us |");
    println!("|---:|---:|---:|");
    if let Some(scales) = s["matching_poll_p99_us"].as_object() {
        for (k, v) in scales {
            println!("| {k} | {} | {v} |", s["matching_poll_p50_us"][k]);
        }
    }
    println!("| p99 ratio | | {} |", s["matching_poll_p99_ratio"]);
    println!();
    println!(
        "| waiters | poll p50 us | poll p99 us | enter p50 us | enter p99 us | bytes/waiter |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    if let Some(scales) = s["poll_p99_us"].as_object() {
        let mut keys: Vec<&String> = scales.keys().collect();
        keys.sort_by_key(|k| k.parse::<u64>().unwrap_or(0));
        for k in keys {
            println!(
                "| {k} | {} | {} | {} | {} | {} |",
                s["poll_p50_us"][k],
                s["poll_p99_us"][k],
                s["enter_p50_us"][k],
                s["enter_p99_us"][k],
                s["bytes_per_waiter_by_scale"][k]
            );
        }
    }
    println!();
    println!("| MemoryStore waiters | poll p50 us | poll p99 us |");
    println!("|---:|---:|---:|");
    for n in MEMORY_SCALES {
        let k = n.to_string();
        println!(
            "| {k} | {} | {} |",
            s["memory_poll_p50_us"][&k], s["memory_poll_p99_us"][&k]
        );
    }
    println!(
        "| p99 ratio | | {} (target <= 2) |",
        s["memory_poll_p99_ratio"]
    );
    println!();
    println!("| micro | ns |");
    println!("|---|---:|");
    for (k, label) in [
        ("token_sign_ns", "admission token sign"),
        ("token_verify_ns", "admission token verify"),
        ("edge_token_sign_ns", "edge token sign (Ed25519)"),
        ("queue_cookie_verify_ns", "queue cookie verify"),
        ("session_random_ns", "session id (OS random)"),
        (
            "layer_fast_path_overhead_ns",
            "layer, fast path, in-process (added)",
        ),
        ("cookie_scan_20_ns", "20 more cookies in the header (added)"),
        (
            "layer_first_visit_ns",
            "layer, first visit (302), in-process",
        ),
    ] {
        println!("| {label} | {:.0} |", num(k));
    }
    println!();
}
