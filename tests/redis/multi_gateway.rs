//! Several gateways, one queue.
//!
//! Four independent `WaitingRoomLayer`s (same room, same signing key, each with its own
//! `RedisStore` connection and no clock override, so Redis `TIME` is the only clock) serve real
//! HTTP on loopback in front of one `redis-server`. A thousand simulated visitors join
//! one after another and then each polls in its own task, sending every request to a randomly
//! chosen gateway (queue cookies and admission tokens work on all of them: they share the key).
//! Some abandon while waiting, some vanish once inside, the rest browse a little and leave.
//!
//! The shape of the run does not depend on the machine's speed: the first `CAPACITY` visitors
//! ("blockers") get in through the gateways and hold the whole room, keeping their slots alive,
//! until more than half of all visitors have joined (so are certainly waiting) and every waiter
//! planned to abandon meanwhile has given up; then they leave and the line drains while the rest
//! keep joining. In every block of `ROLE_BLOCK` later arrivals the seed picks one visitor who
//! vanishes and another who abandons if its first answer is "waiting" (always so while the room
//! is held). Waiters far back, or in a line that does not move, check in rarely (queue and grant
//! TTLs of a few seconds allow that), so even a long line costs a loaded machine little.
//!
//! What is checked, each in a way that can fail:
//! 1. never more than `capacity` inside at once: by the store's own counts (sampled every
//!    ~10 ms) and by what the visitors themselves observe;
//! 2. nobody is admitted twice (one store admission per admitted session, none after a visitor
//!    left or vanished, and a departed session is really gone from the store);
//! 3. first come, first served among those who keep waiting (an ordering check that relies only
//!    on causality, never on timing);
//! 4. everyone who keeps waiting gets in, and the room empties by itself.

use crate::common;
use crate::redis_harness;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{cookie, keys, PREFIX};
use http::Method;
use redis_harness::Server;
use tower_waiting_room::{AdmittedBy, SessionId};

mod arrivals;
mod gateways;
mod inside;
mod tools;
mod visitors;

use arrivals::{arrive, join, plan_for, Roles};
use gateways::{layer, sample, serve_gateway, Log, Seen};
use tools::{wall_ms, Net, Rng};
use visitors::{live, Plan, Shared, Visitor};

const ROOM: &str = "launch";
const QUEUE_COOKIE: &str = "wr_launch_q";
const ADMISSION_COOKIE: &str = "wr_launch_a";

const GATEWAYS: usize = 4;
const CAPACITY: u32 = 20;
const VISITORS: usize = 1_000;
/// The first arrivals, who hold the whole room while the line builds up.
const BLOCKERS: usize = CAPACITY as usize;
/// The blockers leave once this many visitors (blockers included) have joined: everyone after
/// the blockers joined a full room, so well over half of all visitors certainly wait.
const HOLD_UNTIL: usize = BLOCKERS + VISITORS * 11 / 20;
/// After the blockers, visitors come in blocks of this many: in each, the seed picks one who
/// vanishes once inside and another who abandons if its first answer is "waiting" (always the
/// case while the room is held). So at least `(VISITORS - BLOCKERS) / ROLE_BLOCK` vanish and at
/// least `(HOLD_UNTIL - BLOCKERS) / ROLE_BLOCK` abandon, whatever the machine's speed.
const ROLE_BLOCK: usize = 20;
/// Longest a visitor who joins the held room waits before abandoning (if it does).
const HELD_PATIENCE: Duration = Duration::from_millis(1_500);
/// Most time the arrivals wait for the abandoners planned while the room is held to settle.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

const ACTIVE_TTL: Duration = Duration::from_secs(2);
const REFRESH: Duration = Duration::from_secs(1);
// Waiters far back (or in a line that does not move) check in about every `POLL_CAP`: the
// queue and grant TTLs are long enough for that to stay well apart from `LAPSE` even when a
// loaded machine answers slowly, while a line of hundreds polls only a few hundred times a
// second.
const GRANT_TTL: Duration = Duration::from_secs(6);
const QUEUE_TTL: Duration = Duration::from_secs(6);

/// A waiter whose consecutive check-ins were this far apart may legitimately have been skipped
/// as silent (or lost an unclaimed grant): `min(queue_ttl, grant_ttl)` with a margin.
const LAPSE: Duration = Duration::from_millis(5_100);
/// Longest pause of a waiter between check-ins (before jitter): well under `LAPSE`.
const POLL_CAP: Duration = Duration::from_millis(2_000);
/// Every visitor must be done by then (from the start of the run).
const DEADLINE: Duration = Duration::from_secs(50);
/// Most requests one visitor makes while waiting.
const MAX_POLLS: u32 = 2_000;
/// Most retries of a request answered 503 or lost on the wire.
const MAX_RETRIES: u32 = 50;
/// Deadline of one HTTP exchange.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

// ===== the test =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_gateways_share_one_fair_queue() {
    let started = Instant::now();
    let seed = std::env::var("TWR_MULTI_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| wall_ms() ^ u64::from(std::process::id()));
    println!("seed {seed} (set TWR_MULTI_SEED to replay the same plans and gateway choices)");
    let mut rng = Rng(seed);

    let redis = Server::start(&[]);
    let log: Log = Arc::default();
    let mut layers = Vec::new();
    let mut gateways = Vec::new();
    for g in 0..GATEWAYS {
        let layer = layer(&redis.url(), CAPACITY);
        gateways.push(serve_gateway(layer.clone(), g, log.clone()).await);
        layers.push(layer);
    }
    let net = Net {
        gateways: Arc::new(gateways),
        sent: Arc::default(),
    };
    let shared = Arc::new(Shared {
        net,
        inside: Mutex::default(),
        keys: keys(),
        deadline: started + DEADLINE,
        released: AtomicBool::new(false),
        settled_abandoners: AtomicUsize::new(0),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(layers[0].clone(), stop.clone());

    // --- arrivals, strictly one after another; each visitor then lives in its own task ---
    // The blockers come first and hold the room until `HOLD_UNTIL` visitors have joined and
    // every abandoner planned meanwhile has stopped waiting; then they are told to leave.
    let mut tasks = Vec::with_capacity(VISITORS);
    let (mut held_abandoners, mut released_after) = (0usize, Duration::ZERO);
    let (mut line_at_release, mut roles) = (None, Roles::default());
    // Plans and the visitors' own randomness are drawn in arrival order, from the seed only.
    let prepare = |arrival: usize, roles: &mut Roles, rng: &mut Rng| {
        let held = (BLOCKERS..HOLD_UNTIL).contains(&arrival);
        let (plan, abandon) = plan_for(arrival, held, roles, rng);
        let redirect = tokio::spawn(arrive(shared.clone(), arrival, plan, Rng(rng.next())));
        (held, abandon, redirect)
    };
    let mut upcoming = Some(prepare(0, &mut roles, &mut rng));
    for arrival in 0..VISITORS {
        if arrival == HOLD_UNTIL {
            let settle_until = Instant::now() + SETTLE_LIMIT;
            while shared.settled_abandoners.load(Ordering::SeqCst) < held_abandoners
                && Instant::now() < settle_until
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            line_at_release = layers[0].stats().await.ok().map(|s| s.waiting);
            shared.released.store(true, Ordering::SeqCst);
            released_after = started.elapsed();
        }
        let (held, abandon, redirect) = upcoming.take().expect("prepared");
        let (v, jar, mut visitor_rng) = redirect.await.expect("an arrival panicked");
        if arrival + 1 < VISITORS {
            upcoming = Some(prepare(arrival + 1, &mut roles, &mut rng));
        }
        let (v, jar, first) = join(&shared, v, jar, abandon, &mut visitor_rng).await;
        if matches!(v.plan, Plan::Abandon { .. }) && held {
            held_abandoners += 1;
        }
        tasks.push(tokio::spawn(live(
            shared.clone(),
            v,
            jar,
            first,
            visitor_rng,
        )));
    }
    let joined_after = started.elapsed();
    let mut visitors = Vec::with_capacity(VISITORS);
    for t in tasks {
        visitors.push(t.await.expect("a visitor task panicked"));
    }
    let done_after = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let sampled = sampler.await.expect("the sampler panicked");

    // --- the room empties by itself: vanished slots and abandoned places expire ---
    tokio::time::sleep(ACTIVE_TTL.max(GRANT_TTL).max(QUEUE_TTL) + Duration::from_millis(700)).await;
    let mut final_stats = Vec::new();
    for l in &layers {
        final_stats.push(l.stats().await.expect("stats at the end"));
    }
    // Sessions that never left: their store state must be gone too. Asked with the queue
    // cookie only, through the status endpoint (which creates nothing).
    let mut lingering = Vec::new();
    for v in visitors.iter().filter(|v| v.after_leave.is_none()) {
        let probe = cookie(QUEUE_COOKIE, &v.queue_cookie);
        let path = format!("{PREFIX}/{ROOM}/status");
        let r = shared
            .net
            .send(v.arrival % GATEWAYS, Method::GET, &path, Some(&probe))
            .await
            .expect("status answered");
        let state = r.json()["state"].as_str().unwrap_or("?").to_owned();
        if state != "unknown" {
            lingering.push(format!("visitor {} ({:?}): {state}", v.arrival, v.plan));
        }
    }
    let total = started.elapsed();

    // ===== report =====
    let log = std::mem::take(&mut *log.lock().unwrap());
    let inside = std::mem::take(&mut *shared.inside.lock().unwrap());
    let count = |f: &dyn Fn(&Visitor) -> bool| visitors.iter().filter(|v| f(v)).count();
    let admitted = count(&|v| v.admitted_at.is_some());
    let abandoned = count(&|v| v.abandoned);
    let vanished = count(&|v| v.plan == Plan::Vanish && v.admitted_at.is_some());
    let waited = count(&|v| v.waits > 0);
    let lapsed = count(&|v| v.lapsed);
    let longest_gap = visitors
        .iter()
        .map(|v| v.longest_gap)
        .max()
        .unwrap_or_default();
    let unavailable: u32 = visitors.iter().map(|v| v.unavailable).sum();
    let errors: u32 = visitors.iter().map(|v| v.errors).sum();
    let extensions: u32 = visitors.iter().map(|v| v.extensions).sum();
    let lost_slot: u32 = visitors.iter().map(|v| v.lost_slot).sum();
    let mut per_gateway = [0usize; GATEWAYS];
    for s in &log {
        per_gateway[s.gateway] += 1;
    }
    println!(
        "{VISITORS} visitors over {GATEWAYS} gateways, capacity {CAPACITY}: joined in {joined_after:.1?}, \
         all done in {done_after:.1?}, total {total:.1?}; {} requests",
        shared.net.sent.load(Ordering::Relaxed)
    );
    println!(
        "{BLOCKERS} blockers held the room until {HOLD_UNTIL} had joined and {held_abandoners} \
         abandoners had settled: released after {released_after:.1?}, line then {line_at_release:?}"
    );
    println!(
        "admitted {admitted}, waited {waited}, abandoned {abandoned}, vanished {vanished}; \
         lapsed waiters {lapsed} (longest check-in gap {longest_gap:.0?}); \
         503s {unavailable}, transport errors {errors}; extensions {extensions}, lost slots {lost_slot}"
    );
    println!(
        "store samples {} (errors {}), most inside by the store {}, longest line {}; most inside \
         seen by visitors {}; requests through per gateway {per_gateway:?}",
        sampled.samples,
        sampled.errors,
        sampled.max_inside,
        sampled.max_waiting,
        inside.max_counted
    );

    // ===== the checks =====
    let mut failures: Vec<String> = Vec::new();
    let mut fail = |what: &str, details: Vec<String>| {
        if !details.is_empty() {
            let n = details.len();
            let shown: Vec<_> = details.into_iter().take(10).collect();
            failures.push(format!("{what} ({n}):\n    {}", shown.join("\n    ")));
        }
    };

    // 0. Every visitor's story went as planned, with no unexpected answers.
    fail(
        "visitors with unexpected answers",
        visitors
            .iter()
            .filter(|v| !v.problems.is_empty())
            .map(|v| format!("visitor {} ({:?}): {:?}", v.arrival, v.plan, v.problems))
            .collect(),
    );

    // 1. Never more than capacity inside at once.
    fail(
        "the store counted more than capacity admitted + granted",
        sampled.violations.clone(),
    );
    fail(
        "visitors saw more than capacity inside at once",
        inside.violations.clone(),
    );

    // 2. Nobody admitted twice; nobody admitted again after leaving or vanishing.
    let by_session: HashMap<SessionId, usize> =
        visitors.iter().map(|v| (v.session, v.arrival)).collect();
    let mut seen_by: HashMap<usize, Vec<Seen>> = HashMap::new();
    let mut strangers = Vec::new();
    for s in &log {
        match by_session.get(&s.session) {
            Some(&i) => seen_by.entry(i).or_default().push(*s),
            None => strangers.push(format!("{s:?}")),
        }
    }
    fail("requests through for sessions of no visitor", strangers);
    let mut twice = Vec::new();
    let mut after_gone = Vec::new();
    let mut still_held = Vec::new();
    let mut not_by_store_or_token = Vec::new();
    for v in &visitors {
        let seen = seen_by.get(&v.arrival).map_or(&[][..], Vec::as_slice);
        let fresh = seen
            .iter()
            .filter(|s| s.by == AdmittedBy::Store && !s.with_token)
            .count();
        let expected = usize::from(v.admitted_at.is_some());
        if fresh != expected || v.fresh_admissions as usize != expected {
            twice.push(format!(
                "visitor {} ({:?}): {fresh} store admissions without a token seen by the app, \
                 {} admission cookies on requests without one, expected {expected}",
                v.arrival, v.plan, v.fresh_admissions
            ));
        }
        if let Some(gone) = v.gone_at {
            for s in seen.iter().filter(|s| s.at > gone) {
                after_gone.push(format!(
                    "visitor {} ({:?}) let in {:?} after it was gone: {s:?}",
                    v.arrival,
                    v.plan,
                    s.at - gone
                ));
            }
        }
        for s in seen
            .iter()
            .filter(|s| !matches!(s.by, AdmittedBy::Store | AdmittedBy::Token))
        {
            not_by_store_or_token.push(format!("visitor {}: {s:?}", v.arrival));
        }
        if let Some(state) = &v.after_leave {
            if state != "unknown" {
                still_held.push(format!(
                    "visitor {} still known to the store after leaving: {state}",
                    v.arrival
                ));
            }
        }
    }
    fail("sessions not admitted exactly once", twice);
    fail("sessions let in after leaving or vanishing", after_gone);
    fail(
        "sessions still in the store right after leaving",
        still_held,
    );
    fail("requests let in without a slot", not_by_store_or_token);
    fail(
        "sessions still in the store at the end (abandoned or vanished)",
        lingering,
    );

    // 3. First come, first served among those who keep waiting. If i arrived before j and was
    // still answered "waiting" for a request it sent after j had already received its first
    // 200, the store admitted j while i was in line ahead of it. Waiters whose check-ins were
    // ever LAPSE apart may have been skipped as silent; they are left out as the earlier one.
    // (Abandoners are in until they stop: up to then they wait like everyone else.)
    let mut fifo = Vec::new();
    let mut latest_wait: Option<(Instant, usize)> = None;
    let (mut pairs_checked, mut closest) = (0usize, Duration::MAX);
    for v in &visitors {
        if let (Some(admitted_at), Some((wait_sent, i))) = (v.admitted_at, latest_wait) {
            pairs_checked += 1;
            if admitted_at >= wait_sent {
                closest = closest.min(admitted_at - wait_sent);
            } else {
                fifo.push(format!(
                    "visitor {} got in {:?} before visitor {i}, who arrived earlier, sent a \
                     request that was still answered \"waiting\"",
                    v.arrival,
                    wait_sent - admitted_at
                ));
            }
        }
        if let (false, Some(t)) = (v.lapsed, v.last_wait_sent) {
            match latest_wait {
                Some((latest, _)) if latest >= t => {}
                _ => latest_wait = Some((t, v.arrival)),
            }
        }
    }
    println!(
        "ordering check: {pairs_checked} admitted visitors checked against every earlier waiter; \
         closest call {closest:?}"
    );
    fail("first come, first served broken", fifo);

    // 4. Everyone who kept waiting got in; the room is empty at the end.
    fail(
        "visitors who kept waiting but never got in",
        visitors
            .iter()
            .filter(|v| !v.abandoned && v.admitted_at.is_none())
            .map(|v| format!("visitor {} ({:?}), {} waits", v.arrival, v.plan, v.waits))
            .collect(),
    );
    fail(
        "the room is not empty at the end",
        final_stats
            .iter()
            .enumerate()
            .filter(|(_, s)| (s.admitted, s.granted, s.waiting) != (0, 0, 0))
            .map(|(g, s)| format!("gateway {g}: {s:?}"))
            .collect(),
    );

    // The run must have exercised what it checks: a full room, a long line, abandoners and
    // vanishers, and (almost) every waiter in the ordering check.
    let mut thin = Vec::new();
    if sampled.max_inside < u64::from(CAPACITY) {
        thin.push(format!(
            "the room was never full (at most {})",
            sampled.max_inside
        ));
    }
    if waited < VISITORS / 2 {
        thin.push(format!("only {waited} visitors waited"));
    }
    if abandoned < VISITORS / 100 || vanished < VISITORS / 100 {
        thin.push(format!(
            "only {abandoned} abandoned and {vanished} vanished"
        ));
    }
    if lapsed > waited / 10 {
        thin.push(format!(
            "{lapsed} of {waited} waiters lapsed: the machine is too slow for the ordering check"
        ));
    }
    fail("the run was too thin to mean much", thin);

    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
}
