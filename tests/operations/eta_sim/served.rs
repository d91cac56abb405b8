//! The simulation served beyond the embedded store in process: on a real Redis server, over
//! real HTTP on loopback, and in real time behind two gateways. The first two keep the manual
//! clock and the seeds, so their figures must be the in-process ones; the last is the trial of
//! issue 47 as a visitor meets it (the store's clock, the gateways' own snapshots refreshed as
//! they run), one seed, so its figures are its own.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use tower_waiting_room::store::RedisStore;
use tower_waiting_room::testing::ManualClock;

use super::figures::pct;
use super::{pool, room, Run, Scenario, Sim, GIVE_UP_TARGETS, SEEDS};
use crate::common::{self, T0};

/// Runs on Redis so far: each its own key prefix.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// A key prefix no other run of this process or another uses.
fn run_prefix() -> String {
    format!("etasim{}x{}", std::process::id(), RUNS.fetch_add(1, SeqCst))
}

impl Sim {
    /// The scenario served over real HTTP on loopback rather than called in process.
    async fn over_http(scenario: Scenario, seed: u64) -> Self {
        let mut sim = Self::new(scenario, seed);
        sim.http = vec![common::serve(common::app(sim.layer.clone())).await];
        sim
    }

    /// The scenario on a Redis store at `url` (keys under a prefix of the run's own), on the
    /// same manual clock.
    fn on_redis(scenario: Scenario, seed: u64, url: &str) -> Self {
        let clock = ManualClock::new(T0);
        let store = RedisStore::builder()
            .url(url)
            .prefix(run_prefix())
            .manual_clock(clock.clone())
            .build()
            .expect("a Redis store");
        Self::with_store(scenario, seed, Some(clock), store)
    }

    /// The scenario in real time: `gateways` servers on loopback, each a room of its own on
    /// the Redis server at `url` (one line, under one prefix), taking the visitors' requests in
    /// turn as a load balancer would; every clock the system's, each second a real one.
    async fn in_real_time(scenario: Scenario, seed: u64, url: &str, gateways: usize) -> Self {
        let prefix = run_prefix();
        let store = || {
            RedisStore::builder()
                .url(url)
                .prefix(prefix.clone())
                .build()
                .expect("a Redis store")
        };
        let mut sim = Self::with_store(scenario, seed, None, store());
        sim.http = vec![common::serve(common::app(sim.layer.clone())).await];
        for _ in 1..gateways {
            let layer = room(&sim.scenario, None, store());
            sim.http.push(common::serve(common::app(layer)).await);
        }
        sim.started = tokio::time::Instant::now();
        sim
    }
}

/// The give-up scenarios on a Redis store (a real server, the same manual clock): the
/// estimate reads the same facts there (the pace, the checkpoints' silence, the minutes of
/// give-ups its gateway counts from them), so each seed's figures are the embedded store's,
/// within a tenth of a point (a Bloom bitmap's false positive may keep one silent waiter
/// alive). The burst of give-ups (whose minutes of give-ups change its estimates), one seed:
/// five seconds in release mode, a minute or two in CI's unoptimised build. With
/// `ETA_SIM_REDIS_ALL` set, the four give-up scenarios and two seeds each.
#[tokio::test]
async fn give_ups_on_redis_as_on_the_embedded_store() {
    let server = crate::redis_harness::shared_server();
    let all = std::env::var_os("ETA_SIM_REDIS_ALL").is_some();
    let scenarios = if all {
        Scenario::giving_ups().to_vec()
    } else {
        vec![Scenario::give_up_burst()]
    };
    for scenario in scenarios {
        for seed in &SEEDS[..if all { 2 } else { 1 }] {
            let memory = Sim::new(scenario.clone(), *seed).run().await.figures();
            let redis = Sim::on_redis(scenario.clone(), *seed, &server.url())
                .run()
                .await
                .figures();
            let name = format!("{}, seed {seed}", scenario.name);
            println!("{}", memory.row(&format!("{name}, embedded")));
            println!("{}", redis.row(&format!("{name}, Redis")));
            for (what, a, b) in [
                (">= real", memory.at_least_real, redis.at_least_real),
                (
                    "not optimistic",
                    memory.not_optimistic,
                    redis.not_optimistic,
                ),
                (
                    "median error",
                    memory.median_rel_error,
                    redis.median_rel_error,
                ),
                (
                    "shown after 15 s",
                    memory.shown_after_15s,
                    redis.shown_after_15s,
                ),
            ] {
                assert!(
                    (a - b).abs() <= 0.001,
                    "{name}: {what} {a} in memory, {b} on Redis"
                );
            }
            assert!(
                memory.scored.abs_diff(redis.scored) * 100 <= memory.scored,
                "{name}: {} estimates scored in memory, {} on Redis",
                memory.scored,
                redis.scored
            );
        }
    }
}

/// The give-up scenarios served over real HTTP (a server on loopback, the same manual clock and
/// seeds): what a page reads off the wire, scored as in process, held to the same floor. About
/// a minute in release mode, so not in every run: `--include-ignored --skip real_time` runs it.
#[tokio::test]
#[ignore = "a minute of loopback HTTP in release mode: run with --include-ignored"]
async fn give_ups_over_http() {
    for scenario in Scenario::giving_ups() {
        let mut pooled: Option<Run> = None;
        for seed in &SEEDS {
            let run = Sim::over_http(scenario.clone(), *seed).await.run().await;
            pooled = Some(match pooled {
                None => run,
                Some(all) => pool(all, run),
            });
        }
        let figures = pooled.expect("the seeds").figures();
        println!("{}", figures.row(&format!("{}, over HTTP", scenario.name)));
        let misses = figures.misses(&GIVE_UP_TARGETS);
        assert!(
            misses.is_empty(),
            "{}: {}",
            scenario.name,
            misses.join("; ")
        );
    }
}

/// The trial of issue 47 as a visitor meets it: a third of the waiters giving up at random
/// times with short `queue_ttl` and `grant_ttl`, in real time, on a real Redis server, behind
/// two gateways that take the requests in turn, each refreshing its own snapshots on its own
/// clock, every figure read off the wire. One seed, so not the table's pooled figures; held to
/// the give-up scenarios' floor, and it prints the trial's own measure beside the table's:
/// the share of estimates short of the real wait by more than two seconds, and by any.
/// About eight minutes (`ETA_SIM_REAL_TIME_ALL=1`: the four give-up scenarios, half an hour),
/// so run on its own: `--ignored real_time`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real time, eight minutes: run with --ignored real_time"]
async fn give_ups_in_real_time() {
    let server = crate::redis_harness::shared_server();
    let scenarios = if std::env::var_os("ETA_SIM_REAL_TIME_ALL").is_some() {
        Scenario::giving_ups().to_vec()
    } else {
        vec![Scenario::giving_up_short_ttls()]
    };
    for scenario in scenarios {
        let sim = Sim::in_real_time(scenario.clone(), SEEDS[0], &server.url(), 2).await;
        let run: Run = sim.run().await;
        let figures = run.figures();
        let name = format!("{}, real time, two gateways on Redis", scenario.name);
        println!("{}", figures.row(&name));
        println!(
            "  {name}: short by more than 2 s {}, short at all {}",
            pct(run.short_by_more_than(2)),
            pct(run.short_by_more_than(0))
        );
        let misses = figures.misses(&GIVE_UP_TARGETS);
        assert!(misses.is_empty(), "{name}: {}", misses.join("; "));
    }
}
