//! The full run: every scenario in turn, the summary written to `target/bench/summary.json` and
//! checked for every key, and the table printed from it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tower_waiting_room::{Keyring, SigningKey};

use super::machine::{current_tid, machine, ServerCpu};
use super::matching::matching_scenarios;
use super::measure::round;
use super::micro::micro_scenarios;
use super::over_http::http_scenarios;
use super::redis_server::RedisServer;
use super::scale::{memory_scale_scenarios, scale_scenarios, MEMORY_SCALES};
use super::script::script_scenarios;
use super::servers::start_servers;
use super::{joins, redis_scale, wrk, BoxError, Settings, SECRET};

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

pub(crate) fn run(settings: &Settings, out: &std::path::Path) -> Result<(), BoxError> {
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
