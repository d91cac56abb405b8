//! The simulated run (part 4 of the Redis-side measurements): a line of two million through 8
//! gateways on one Redis, each syncing once a second with the waiters whose polls it answered,
//! claiming the turns that came and letting newcomers join.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tower_waiting_room::store::{
    Decision, LivenessRule, Place, RedisStore, RoomSnapshot, SeenWaiters, SettingsChange,
    SnapshotStore, Store, StoreErrorKind,
};
use tower_waiting_room::RoomPolicy;

use super::calls::{command_calls, command_time, line_id, redis_cpu_us, store_on};
use super::{SIM_ADMISSION_RATE, SIM_NEWCOMERS_PER_S, SIM_POLL_INTERVAL_S};
use crate::measure::{median, now_ms, percentile, round};
use crate::redis_server::RedisServer;
use crate::BoxError;

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

    /// Counts from zero again (the measured run begins after a lead-in).
    fn reset(&self) {
        for c in [
            &self.syncs,
            &self.sync_errors,
            &self.seen_sent,
            &self.seen_behind,
            &self.claims_admitted,
            &self.claims_other,
            &self.newcomers_waiting,
            &self.newcomers_other,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.sync_us.lock().unwrap().clear();
    }
}

/// Where the measured run begins.
#[derive(Clone, Copy, Debug)]
pub(super) enum LeadIn {
    /// At once.
    Now,
    /// This long before the abandon ring's next epoch begins (`bench --sim`'s
    /// `SIM_ABANDON_TURN_IN`), the gateways syncing as in the run until then: the minute that
    /// holds the moment a whole line's abandon epoch turns, measured on purpose rather than
    /// when the wall clock happens to put it in the run.
    BeforeAbandonTurn(Duration),
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
/// average through `gateways` gateways ([`SIM_GATEWAYS`](super::SIM_GATEWAYS) unless
/// `bench --sim` is told otherwise), for `duration`, on `redis` whose room `policy` holds
/// [`line_id`] 0 in its only slot and 1..=`line` waiting (as
/// [`fill_our_line`](super::line::fill_our_line) left it).
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
    lead_in: LeadIn,
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

    // The lead-in: whole seconds of the gateways' ticks before the measured run.
    let lead_s = match lead_in {
        LeadIn::Now => 0,
        LeadIn::BeforeAbandonTurn(before) => {
            let width = LivenessRule::for_abandon(policy).width_ms;
            let before = before.as_millis() as u64;
            let mut to_turn = width - now_ms() % width;
            if to_turn < before + 1_000 {
                to_turn += width;
            }
            (to_turn - before) / 1_000
        }
    };
    if lead_s > 0 {
        eprintln!("simulated run: {lead_s} s of syncs before the measured run");
    }
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
            for t in 0..lead_s + seconds {
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
    tokio::time::sleep_until(start + Duration::from_secs(lead_s)).await;
    counts.reset();
    redis.command(&["CONFIG", "RESETSTAT"])?;
    let cpu0 = redis_cpu_us(redis)?;
    let wall0 = now_ms();
    let t0 = Instant::now();
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
            "sync_p99_us": round(percentile(&sync_us, 99.0), 0),
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
