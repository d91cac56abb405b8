//! `waiting-room-gateway`: a fair waiting room in front of a web app written in anything.
//!
//! ```text
//! waiting-room-gateway --config gateway.toml
//! waiting-room-gateway --check gateway.toml
//! ```
//!
//! See `docs/gateway.md`.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tower_waiting_room::store::{MemoryStore, RedisCheckError, Store};
use waiting_room_gateway::config::{Config, Overrides, RedisSettings};
use waiting_room_gateway::live::Live;
use waiting_room_gateway::stack::{self, Shared};
use waiting_room_gateway::workers;

const USAGE: &str = "\
waiting-room-gateway: a fair virtual waiting room in front of a web app

USAGE:
    waiting-room-gateway --config FILE [--listen ADDR] [--upstream URL]
    waiting-room-gateway --check FILE [--listen ADDR] [--upstream URL]

OPTIONS:
    --config FILE     run with the settings in FILE (TOML; see examples/gateway.toml)
    --check FILE      check FILE (and the secrets it names) and exit: 0 when it would run,
                      1 with the error and its line when not
    --listen ADDR     listen on ADDR instead of the file's `listen` (e.g. 0.0.0.0:8080)
    --upstream URL    send requests to URL instead of the file's upstream(s)
    -h, --help        this text
    -V, --version     the version

SIGNALS:
    SIGHUP            read FILE again; a file that does not load is refused, the running one kept
    SIGTERM, SIGINT   stop: the health check answers 503 for limits.shutdown_delay, then new
                      connections are refused and open ones finish within limits.grace

The log goes to stderr; RUST_LOG sets its level (default: info).
";

enum Mode {
    Run,
    Check,
}

struct Args {
    mode: Mode,
    file: PathBuf,
    overrides: Overrides,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut mode = None;
    let mut overrides = Overrides::default();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "-V" | "--version" => {
                println!("waiting-room-gateway {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            "--config" | "--check" => {
                if mode.is_some() {
                    return Err("give one of --config and --check, once".into());
                }
                let m = if flag == "--check" {
                    Mode::Check
                } else {
                    Mode::Run
                };
                mode = Some((m, PathBuf::from(value()?)));
            }
            "--listen" => overrides.listen = Some(value()?),
            "--upstream" => overrides.upstream = Some(value()?),
            other => return Err(format!("unknown argument `{other}` (see --help)")),
        }
    }
    let (mode, file) = mode.ok_or("--config FILE is required (see --help)")?;
    Ok(Some(Args {
        mode,
        file,
        overrides,
    }))
}

// The main thread watches signals, reloads, keeps the metrics and (with Redis) drives the
// store's connections; the requests are served by the workers' threads (workers.rs).
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let config = match Config::load(&args.file, &args.overrides) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match args.mode {
        Mode::Check => check(config),
        Mode::Run => run(config, args.overrides).await,
    }
}

/// Builds everything but the store's connection and the listener: the rooms (their secrets
/// read), the routes, the admin.
fn check(config: Config) -> ExitCode {
    let shared = Shared {
        store: Arc::new(MemoryStore::new()),
        draining: Arc::new(AtomicBool::new(false)),
    };
    match stack::build(&config, &shared) {
        Ok(stack) => {
            let rooms: Vec<&str> = stack.rooms.iter().map(|r| r.config().room()).collect();
            println!(
                "{}: ok: listen {}, upstream {}, rooms {:?}, store {}",
                config.path.display(),
                config.listen,
                config
                    .upstreams
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                rooms,
                config.redis.as_ref().map_or_else(
                    || "in memory (one gateway)".to_owned(),
                    RedisSettings::describe
                ),
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config, overrides: Overrides) -> ExitCode {
    // Installed before the rooms are built, so their metrics' descriptions are in it.
    if config.paths.metrics.is_some() {
        match stack::prometheus() {
            // The recorder's histograms keep their samples until upkeep folds them in: without
            // it, a gateway nobody scrapes would grow.
            Some(handle) => {
                tokio::spawn(async move {
                    let mut every = tokio::time::interval(Duration::from_secs(5));
                    loop {
                        every.tick().await;
                        handle.run_upkeep();
                    }
                });
            }
            None => tracing::warn!("the metrics recorder could not be installed"),
        }
    }
    let store: Arc<dyn Store> = match &config.redis {
        Some(redis) => match redis.store() {
            Ok(store) => {
                // A store that would lose the line (an evicting policy, a replica) is refused
                // at start; one that is away is not: the rooms' fail policy decides while it is.
                match store.check().await {
                    Ok(info) => tracing::info!(?info, "redis checked"),
                    Err(RedisCheckError::Store(e)) => tracing::warn!(
                        error = %e,
                        "redis cannot be reached at start; the rooms' fail policy decides until it can"
                    ),
                    Err(e) => {
                        eprintln!("error: {}: redis: {e}", config.path.display());
                        return ExitCode::FAILURE;
                    }
                }
                Arc::new(store)
            }
            Err(e) => {
                eprintln!("error: {}: redis: {e}", config.path.display());
                return ExitCode::FAILURE;
            }
        },
        None => Arc::new(MemoryStore::new()),
    };
    let draining = Arc::new(AtomicBool::new(false));
    let shared = Shared {
        store,
        draining: Arc::clone(&draining),
    };
    let listen = config.listen;
    let limits = config.limits;
    let workers = config.workers;
    let live = match Live::new(config, shared, overrides) {
        Ok(live) => live,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Signals are watched before the line below is printed: a supervisor that sends one as
    // soon as it reads the line must not meet the default action (the end of the process).
    let signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("error: cannot watch signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addr = listener.local_addr().unwrap_or(listen);
    // The one line on stdout: scripts and tests wait for it (and read the port of `:0`).
    println!("waiting-room-gateway listening on http://{addr}");
    tracing::info!(%addr, workers, limits = %limits.serve.describe(), "listening");

    let Signals {
        mut hangup,
        mut terminate,
        mut interrupt,
    } = signals;
    let reloading = live.clone();
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            if let Err(e) = reloading.reload() {
                tracing::error!(error = %e, "reload refused; the running configuration stays");
            }
        }
    });
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let started = listener
        .into_std()
        .and_then(|listener| workers::start(listener, workers, &live, limits.serve, &stopping));
    let serving = match started {
        Ok(serving) => serving,
        Err(e) => {
            eprintln!("error: cannot start the serving workers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut finished = tokio::task::spawn_blocking(move || serving.join());
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM"),
        _ = interrupt.recv() => tracing::info!("SIGINT"),
        // Only a worker that panicked ends before a signal.
        _ = &mut finished => {
            tracing::error!("a serving worker stopped");
            return ExitCode::FAILURE;
        }
    }
    draining.store(true, Ordering::Relaxed);
    if !limits.shutdown_delay.is_zero() {
        tracing::info!(delay = ?limits.shutdown_delay, "draining: the health check answers 503");
        tokio::time::sleep(limits.shutdown_delay).await;
    }
    tracing::info!("stopping: finishing the requests in flight");
    let _ = stop.send(true);
    match finished.await {
        Ok(true) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        _ => {
            tracing::error!("a serving worker panicked");
            ExitCode::FAILURE
        }
    }
}

/// The signals the gateway answers, watched from start-up on.
struct Signals {
    hangup: Signal,
    terminate: Signal,
    interrupt: Signal,
}

impl Signals {
    fn install() -> std::io::Result<Self> {
        Ok(Self {
            hangup: signal(SignalKind::hangup())?,
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }
}
