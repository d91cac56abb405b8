//! One chaos run: Redis, the gateways, the visitors and the injector started and waited for,
//! then the history checked and the report printed.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_waiting_room::store::RedisStore;
use tower_waiting_room::{AdmittedBy, FailPolicy};

use super::checks::{
    check_capacity, check_fail_open, check_fifo, check_once, Violations, KINDS, V_5XX, V_BREAKER,
    V_CAPACITY, V_LIVENESS, V_THIN, V_VISITOR,
};
use super::faults::{Fault, CORRUPTIONS};
use super::gateways::{gateway, layer, Log};
use super::target::{injector, Target};
use super::tools::{env_u64, now_ms, rel, sleep_ms, Rng, START};
use super::visitors::{plan, visitor, Shared, Tally};
use super::windows::REPL_LAG_MS;
use super::{GATEWAYS, ROOM, STORE_TIMEOUT};

/// What the store's own counts showed.
#[derive(Default)]
struct Sampled {
    over: Vec<String>,
    longest_line: u64,
    line_at_faults_end: u64,
    /// Most slots held at once (admitted + granted).
    most_slots: u64,
}

pub(super) struct Settings {
    pub(super) mode: &'static str,
    pub(super) fault_secs: u64,
    pub(super) recovery: Duration,
    pub(super) visitors: usize,
    pub(super) capacity: u32,
}

pub(super) async fn run(settings: Settings) {
    let seed = env_u64("CHAOS_SEED").unwrap_or_else(|| now_ms() ^ u64::from(std::process::id()));
    println!("chaos seed {seed} (CHAOS_SEED={seed} replays the plans and the fault schedule)");
    let faults: Vec<Fault> = match std::env::var("CHAOS_FAULTS") {
        Ok(list) => Fault::ALL
            .into_iter()
            .filter(|f| list.split(',').any(|n| n.trim() == f.name()))
            .collect(),
        Err(_) => Fault::ALL.into_iter().collect(),
    };
    let corruptions: Vec<&'static str> = match std::env::var("CHAOS_CORRUPT") {
        Ok(list) => CORRUPTIONS
            .into_iter()
            .filter(|c| list.split(',').any(|n| n.trim() == *c))
            .collect(),
        Err(_) => CORRUPTIONS.to_vec(),
    };
    assert!(
        !corruptions.is_empty(),
        "CHAOS_CORRUPT names none of {CORRUPTIONS:?}"
    );
    let mut rng = Rng(seed);

    // A primary, its replica and a sentinel; every store goes through the sentinel.
    let mut target = Target::start();
    target.corruptions = corruptions;
    let url = target.url();
    let log: Log = Arc::default();
    let open = Arc::new(AtomicBool::new(false));
    let mut gateways = Vec::new();
    for g in 0..GATEWAYS {
        gateways.push(gateway(&url, settings.capacity, g, log.clone(), open.clone()).await);
    }
    let keys = tower_waiting_room::__private::redis_keys(&gateways[0].store, ROOM);

    let start = now_ms();
    let _ = START.set(start);
    let faults_until = start + settings.fault_secs * 1_000;
    let deadline = faults_until + settings.recovery.as_millis() as u64;
    let shared = Arc::new(Shared {
        gateways: gateways.iter().map(|g| g.http.clone()).collect(),
        tally: Tally::default(),
        start,
        deadline,
    });

    // Launch-day arrivals, in waves of 20 s (one in the short run): in each, 40 % in the first
    // tenth, the rest spread over the following three quarters, so the line is long while the
    // faults hit and has drained (if all is well) before the recovery time is over.
    let fault_ms = settings.fault_secs * 1_000;
    let wave_ms = fault_ms.min(20_000);
    let waves = (fault_ms / wave_ms).max(1);
    let mut tasks = Vec::with_capacity(settings.visitors);
    for id in 0..settings.visitors {
        let wave = rng.below(waves) * wave_ms;
        let arrival = wave
            + if rng.chance(40) {
                rng.below(wave_ms / 10)
            } else {
                wave_ms / 10 + rng.below(wave_ms * 3 / 4)
            };
        let p = plan(&mut rng, arrival);
        let vr = Rng(rng.next());
        tasks.push(tokio::spawn(visitor(shared.clone(), id, p, vr)));
    }

    // The store, as its own counts say (through a store of its own, so that its calls are
    // nobody's breaker probes): never more than capacity slots (admitted + granted).
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let store = RedisStore::builder()
            .url(&url)
            .timeout(STORE_TIMEOUT)
            .build()
            .expect("the store builds");
        let layer = layer(store, settings.capacity, FailPolicy::Closed);
        let (stop, capacity) = (stop.clone(), settings.capacity);
        tokio::spawn(async move {
            let mut seen = Sampled::default();
            while !stop.load(Ordering::SeqCst) {
                if let Ok(s) = layer.stats().await {
                    seen.longest_line = seen.longest_line.max(s.waiting);
                    seen.most_slots = seen.most_slots.max(s.admitted + s.granted);
                    if now_ms() <= faults_until {
                        seen.line_at_faults_end = s.waiting;
                    }
                    if s.admitted + s.granted > u64::from(capacity) {
                        seen.over.push(format!(
                            "the store counts {} admitted + {} granted at {}",
                            s.admitted,
                            s.granted,
                            rel(now_ms())
                        ));
                    }
                }
                sleep_ms(100).await;
            }
            seen
        })
    };

    // Fail-open for the middle third of the fault period.
    let third = settings.fault_secs * 1_000 / 3;
    let open_phase = (start + third, start + 2 * third);
    let phases = {
        let open = open.clone();
        tokio::spawn(async move {
            sleep_ms(third).await;
            open.store(true, Ordering::SeqCst);
            sleep_ms(third).await;
            open.store(false, Ordering::SeqCst);
        })
    };

    let injector_stop = Arc::new(AtomicBool::new(false));
    let injector = injector(
        target,
        keys,
        faults,
        Rng(rng.next()),
        faults_until,
        injector_stop.clone(),
    );

    let mut stories = Vec::with_capacity(tasks.len());
    for t in tasks {
        stories.push(t.await.expect("a visitor panicked"));
    }
    phases.await.expect("phases");
    injector_stop.store(true, Ordering::SeqCst);
    let (target, windows, lags) = tokio::task::spawn_blocking(move || injector.join())
        .await
        .unwrap()
        .expect("the fault injector panicked");
    stop.store(true, Ordering::SeqCst);
    let mut store_over = sampler.await.expect("sampler");

    // The breaker closes again on every gateway: a few store calls give each its probe.
    let mut breaker_open = Vec::new();
    for (g, gw) in gateways.iter().enumerate() {
        let mut tries = 0;
        while gw.store.metrics().breaker_open && tries < 30 {
            let _ = gw.closed.stats().await;
            sleep_ms(100).await;
            tries += 1;
        }
        if gw.store.metrics().breaker_open {
            breaker_open.push(format!(
                "gateway {g}: breaker still open at the end ({:?})",
                gw.store.metrics()
            ));
        }
    }
    // Each gateway's store calls by outcome (error classes counted), printed with any
    // violation: which failures the gateways met, where the run alone cannot tell.
    let store_outcomes: Vec<String> = gateways
        .iter()
        .enumerate()
        .map(|(g, gw)| format!("gateway {g}: {:?}", gw.store.metrics()))
        .collect();
    let total_secs = (now_ms() - start) as f64 / 1_000.0;

    // ===== checks =====
    let log = std::mem::take(&mut *log.lock().unwrap());
    let mut v = Violations::default();
    let (most_inside, ghosts, uncounted) =
        check_capacity(&log, &stories, &windows, settings.capacity as usize, &mut v);
    for o in std::mem::take(&mut store_over.over) {
        v.add(V_CAPACITY, o);
    }
    let leaves_lost = check_once(&log, &stories, &windows, &mut v);
    let (fifo_checked, returners, episodes_lost) = check_fifo(&log, &stories, &windows, &mut v);
    // A waiter who (re)joined too close to the end had no fair chance; everyone else still
    // polling at the deadline had at least half the recovery time with a healthy store.
    let joined_by = deadline - settings.recovery.as_millis() as u64 / 2;
    for s in stories
        .iter()
        .filter(|s| s.stuck && s.episodes.last().is_some_and(|e| e.join_sent <= joined_by))
    {
        let ep = s.episodes.last();
        v.add(
            V_LIVENESS,
            format!(
                "visitor {} still waiting {} s after the faults stopped (joined at {}, last \
                 place {:?})",
                s.id,
                settings.recovery.as_secs(),
                rel(ep.map_or(0, |e| e.join_sent)),
                ep.and_then(|e| e.positions.last())
                    .map(|&(t, p)| format!("{p} at {}", rel(t)))
            ),
        );
    }
    for b in std::mem::take(&mut *shared.tally.bad_5xx.lock().unwrap()) {
        v.add(V_5XX, b);
    }
    let fail_open = check_fail_open(&log, &windows, open_phase, &mut v);
    for b in breaker_open {
        v.add(V_BREAKER, b);
    }
    // The loss windows assume the replica is never more than REPL_LAG_MS behind.
    let most_lag = lags.iter().copied().max().unwrap_or(0);
    if most_lag > REPL_LAG_MS {
        v.add(
            V_THIN,
            format!(
                "the replica was once {} behind (the loss windows assume at most \
                 {REPL_LAG_MS} ms)",
                if most_lag == u64::MAX {
                    "over 2 s".to_owned()
                } else {
                    format!("{most_lag} ms")
                }
            ),
        );
    }
    // The run must have exercised what it checks: a full room and a real line, by the store's
    // own counts (docs/reliability.md, check 10). The app's count may stay one short on a busy
    // machine: a granted slot is full in the store before its visitor's request reaches the app.
    if store_over.most_slots < u64::from(settings.capacity) {
        v.add(
            V_THIN,
            format!(
                "the room was never full (at most {} slots in the store, {most_inside} inside)",
                store_over.most_slots
            ),
        );
    }
    if store_over.longest_line < u64::from(settings.capacity) {
        v.add(
            V_THIN,
            format!(
                "the line was never long (at most {})",
                store_over.longest_line
            ),
        );
    }
    for s in &stories {
        for p in s.problems.iter().filter(|p| !p.contains("another session")) {
            v.add(V_VISITOR, format!("visitor {}: {p}", s.id));
        }
    }

    // ===== summary =====
    let count = |f: Fault| windows.iter().filter(|w| w.fault == f).count();
    let deleted: BTreeMap<&str, usize> = windows
        .iter()
        .filter(|w| w.fault == Fault::DelKey)
        .filter_map(|w| w.key)
        .fold(BTreeMap::new(), |mut m, k| {
            *m.entry(k).or_default() += 1;
            m
        });
    let store_admissions = log
        .iter()
        .filter(|s| s.by == AdmittedBy::Store && !s.with_token)
        .count();
    let requests = shared.tally.requests.load(Ordering::Relaxed);
    let by_status = shared.tally.by_status.lock().unwrap().clone();
    let waited = stories.iter().filter(|s| !s.episodes.is_empty()).count();
    let left = stories.iter().filter(|s| s.left.is_some()).count();
    println!();
    println!(
        "chaos ({}): seed {seed}, {} visitors, capacity {}, {GATEWAYS} gateways, {} s of faults \
         + up to {} s recovery, {total_secs:.1} s in all",
        settings.mode,
        settings.visitors,
        settings.capacity,
        settings.fault_secs,
        settings.recovery.as_secs()
    );
    println!("| faults | count |\n|---|---|");
    for f in Fault::ALL {
        println!("| {} | {} |", f.name(), count(f));
    }
    println!("| (keys deleted) | {deleted:?} |");
    let damaged: BTreeMap<&str, usize> =
        windows
            .iter()
            .filter_map(|w| w.damage.as_ref())
            .fold(BTreeMap::new(), |mut m, d| {
                *m.entry(d.kind).or_default() += 1;
                m
            });
    println!("| (damage, by kind) | {damaged:?} |");
    let failovers: BTreeMap<&str, usize> = windows
        .iter()
        .filter(|w| w.fault == Fault::Failover)
        .filter_map(|w| w.key)
        .fold(BTreeMap::new(), |mut m, k| {
            *m.entry(k).or_default() += 1;
            m
        });
    println!("| (failovers) | {failovers:?} |");
    println!(
        "| primary switches (any fault) | {} |",
        windows.iter().filter(|w| w.switched).count()
    );
    println!(
        "| replica catch-up between faults (ms): measured, most | {}, {} |",
        lags.len(),
        lags.iter().copied().max().unwrap_or(0)
    );
    println!();
    println!("| traffic | count |\n|---|---|");
    println!("| requests | {requests} |");
    for (status, n) in &by_status {
        println!("| answered {status} | {n} |");
    }
    println!(
        "| transport errors (patient clients) | {} |",
        shared.tally.transport_errors.load(Ordering::Relaxed)
    );
    println!(
        "| requests dropped by impatient clients | {} |",
        shared.tally.impatient_drops.load(Ordering::Relaxed)
    );
    println!("| visitors who joined the line | {waited} |");
    println!("| store admissions (new slot or grant claimed) | {store_admissions} |");
    println!("| fail-open admissions | {fail_open} |");
    println!("| most inside at once (app's count) | {most_inside} |");
    println!(
        "| most slots at once (store: admitted + granted) | {} |\n| longest line (store) | {} \
         |\n| line when the faults stopped | {} |",
        store_over.most_slots, store_over.longest_line, store_over.line_at_faults_end
    );
    println!("| token requests after their slot's key was deleted (ghosts) | {ghosts} |");
    println!("| visitors who left | {left} |");
    println!("| admissions checked for first come, first served | {fifo_checked} |");
    println!("| waiters back from a silence before their turn, checked | {returners} |");
    println!("| store admissions not counted inside (maybe lost in a failover) | {uncounted} |");
    println!(
        "| episodes not held to order (place or slot maybe lost in a failover) | {episodes_lost} |"
    );
    println!("| leaves maybe lost in a failover (store still knew the visitor) | {leaves_lost} |");
    println!();
    println!("| violations | count |\n|---|---|");
    for k in KINDS {
        println!("| {k} | {} |", v.count(k));
    }
    for (kind, list) in &v.0 {
        println!("\n{kind} ({}):", list.len());
        for item in list.iter().take(8) {
            println!("  {item}");
        }
        if list.len() > 8 {
            println!("  ...\n  last: {}", list[list.len() - 1]);
        }
    }
    if v.total() > 0 {
        println!("\nstore calls by outcome:");
        for line in &store_outcomes {
            println!("  {line}");
        }
    }
    // The whole story of the first visitors named by each kind of violation.
    let traced = env_u64("CHAOS_TRACE").unwrap_or(1) as usize;
    for (kind, list) in &v.0 {
        // Every visitor a message names (a `fifo` one names two: the one let in, and the one
        // who joined before it and still waited).
        let mut named: Vec<usize> = Vec::new();
        for m in list.iter().take(traced) {
            for part in m.split("visitor ").skip(1) {
                let id = part
                    .split([' ', ':', ','])
                    .next()
                    .and_then(|n| n.parse().ok());
                if let Some(id) = id.filter(|id| !named.contains(id)) {
                    named.push(id);
                }
            }
        }
        for id in named {
            if let Some(st) = stories.get(id) {
                println!("\ntrace of visitor {id} ({kind}), {:?}:", st.session);
                for line in &st.trace {
                    println!("  {line}");
                }
            }
        }
    }
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    println!("\nrow for docs/reliability.md:");
    println!(
        "| {} | {commit} | {} | {seed} | {} | {} | {}/{}/{}/{}/{}/{} | {requests} | {store_admissions} | {fail_open} | {} |",
        date(),
        settings.mode,
        settings.fault_secs,
        settings.visitors,
        count(Fault::Kill),
        count(Fault::Pause),
        count(Fault::Oom),
        count(Fault::DelKey),
        count(Fault::Failover),
        count(Fault::Corrupt),
        KINDS
            .iter()
            .map(|k| v.count(k).to_string())
            .collect::<Vec<_>>()
            .join("/")
    );
    drop(target);
    assert_eq!(
        v.total(),
        0,
        "seed {seed}: {} violations (see the table above)",
        v.total()
    );
}

fn date() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}
