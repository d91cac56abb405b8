//! The wait estimate against real waits, in simulation: visitors arrive, wait, poll the
//! status endpoint, are let in, stay and leave, all through the real layer in process, on the
//! embedded store and a manual clock moved one second at a time. Deterministic: every random
//! draw comes from an xorshift generator with a fixed seed. The give-up scenarios run once more
//! on Redis, over real HTTP on loopback, and in real time behind two gateways ([`served`]).
//!
//! The harness reads the estimates where a visitor's page reads them, in the JSON of the status
//! endpoint (and of the `429` a newcomer gets): `eta_seconds`, and the range `eta_low_seconds` /
//! `eta_high_seconds` when the answer has them. Whatever estimator sits behind the endpoint is
//! measured as it is, with no change here.
//!
//! Per scenario, over every estimate shown from the first second (not after a warm-up):
//! - **>= real**: the share of shown estimates that are at least the real remaining wait
//!   (`admitted_at - shown_at`, whole seconds; admitted = the first status answer `admitted`),
//! - **median rel. error**: the median of `|eta - real| / max(real, 10 s)` (the 10 s floor keeps
//!   estimates near the front, where the real wait is a few seconds, from exploding the ratio),
//! - **shown after 15 s**: of the polls answered `waiting` once the visitor had waited 15 s or
//!   more, the share with an estimate (polls answered `paused: true` are left out: the line is
//!   stopped by its operators and the page says so),
//! - **within range**: of the estimates that came with a range, the share whose real wait lies in
//!   `[eta_low_seconds, eta_high_seconds]`.
//!
//! Estimates shown to visitors who gave up are not scored for accuracy (they have no real wait);
//! their polls count for "shown after 15 s".
//!
//! Every scenario runs once per seed of [`SEEDS`] and its figures pool the runs. Estimates shown
//! before a change nobody announced (checkout slowing down, a pause, a capacity change), for a
//! wait that outlasted it, are published in the "all" column but not scored: no estimate could
//! have known. A slowdown of visits counts from when the first slower visit outlasts the
//! shortest of the old ones (before that the room's departures are what they would have been).
//!
//! Per scenario too, **not optimistic**: the share of shown estimates short of the real wait by
//! no more than the polling interval (a visitor learns their turn has come at their next poll).
//!
//! Three sets of figures: [`GOALS`] (shown after 15 s, not optimistic, median error; printed
//! with each row as what the scenario misses, not asserted), [`TARGETS`] (the floor every
//! scenario without give-ups meets and asserts) and [`GIVE_UP_TARGETS`] (the floor of the
//! scenarios where waiters give up, asserted: their figures as they stand). Run every one, with
//! the table, by
//! `cargo test --release --all-features --test operations eta_sim -- --include-ignored --skip real_time --nocapture`
//! (`ETA_SIM_TRACE=1` adds where each errs, half a minute at a time).

use crate::common;

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use serde_json::Value;
use tower::util::BoxCloneService;
use tower::{service_fn, Layer, ServiceExt};
use tower_waiting_room::store::{MemoryStore, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{ResponseBody, WaitingRoomLayer};

use common::{Http, Jar, Reply, PREFIX, SECRET, T0};

mod figures;
mod scenarios;
mod served;

use figures::trace;

// ===== the targets, in one place =====

/// What each scenario must reach.
#[derive(Clone, Copy, Debug)]
struct Targets {
    /// Least share of shown estimates that are >= the real remaining wait.
    at_least_real: f64,
    /// Least share of shown estimates short of the real wait by no more than the polling
    /// interval.
    not_optimistic: f64,
    /// Greatest median relative error (denominator `max(real, 10 s)`).
    median_rel_error: f64,
    /// Least share of polls, after the first 15 s of a wait, that showed an estimate.
    shown_after_15s: f64,
    /// Least share of real waits within the range shown, when the answers carry one; `None`:
    /// reported, not asserted (no figure is set).
    within_range: Option<f64>,
}

/// What every scenario without give-ups must reach, and does: the floor CI holds them to.
const TARGETS: Targets = Targets {
    at_least_real: 0.90,
    not_optimistic: 0.0,
    median_rel_error: 0.25,
    shown_after_15s: 0.91,
    within_range: None,
};

/// The floor of the scenarios where waiters give up: their figures as they stand, rounded
/// down, so that an estimator that promises more than it keeps there fails the build. Below
/// [`GOALS`]; `docs/eta.md` says by how much.
const GIVE_UP_TARGETS: Targets = Targets {
    at_least_real: 0.94,
    not_optimistic: 0.96,
    median_rel_error: 0.31,
    shown_after_15s: 0.92,
    within_range: None,
};

/// What the estimate aims at for the waiters who stay, in every scenario: shown after 15 s,
/// not optimistic beyond the polling interval, a median error of 15 %. Printed with each
/// row (what is missed), not asserted: most scenarios miss the error (`docs/eta.md`).
const GOALS: Targets = Targets {
    at_least_real: 0.0,
    not_optimistic: 0.95,
    median_rel_error: 0.15,
    shown_after_15s: 0.95,
    within_range: None,
};

/// The seeds of the scenarios' draws: each scenario runs once per seed, and its figures pool
/// the runs (one seed's luck, a quiet minute or a wave of quitters, is not the estimator's).
const SEEDS: [u64; 10] = [
    0x0015_e7a5_eed0_0001,
    0x0015_e7a5_eed0_0002,
    0x0015_e7a5_eed0_0003,
    0x0015_e7a5_eed0_0004,
    0x0015_e7a5_eed0_0005,
    0x0015_e7a5_eed0_0006,
    0x0015_e7a5_eed0_0007,
    0x0015_e7a5_eed0_0008,
    0x0015_e7a5_eed0_0009,
    0x0015_e7a5_eed0_000a,
];

/// No scenario runs longer than this (simulated seconds): a room that stops letting people in
/// is a failure of the harness, not an endless loop.
const MAX_SECONDS: u64 = 4 * 3_600;

/// Name of the room in every scenario.
const ROOM: &str = "sim";

// ===== a small deterministic generator =====

/// xorshift64*: small, fast, and the same draws on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, (lo, hi): (u64, u64)) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Poisson with mean `lambda` (Knuth; `lambda` is small here).
    fn poisson(&mut self, lambda: f64) -> u64 {
        let limit = (-lambda).exp();
        let mut k = 0;
        let mut p = self.unit();
        while p > limit {
            k += 1;
            p *= self.unit();
        }
        k
    }
}

// ===== scenarios =====

/// How newcomers arrive after the opening crowd.
#[derive(Clone, Copy, Debug)]
enum Arrivals {
    /// Exactly this many every second.
    Every(u64),
    /// A Poisson number with this mean every second.
    Poisson(f64),
}

/// Waiters who stop polling and never come back.
#[derive(Clone, Copy, Debug)]
struct GiveUp {
    /// Share of newcomers who will give up (if their turn has not come first).
    share: f64,
    /// After how long in line they stop.
    patience: Patience,
}

/// How long a waiter who will give up waits first.
#[derive(Clone, Copy, Debug)]
enum Patience {
    /// Exponential with this mean, in seconds: the patience of queueing theory's model of
    /// abandonment (Erlang-A), where most who leave do so early.
    Exponential(f64),
    /// Uniform in this range of seconds: as many leave late in their wait as early.
    Uniform(u64, u64),
}

#[derive(Clone, Debug)]
struct Scenario {
    name: &'static str,
    capacity: u32,
    /// Arrive in the first second.
    opening_crowd: u64,
    arrivals: Arrivals,
    /// Newcomers arrive in seconds `1..=arrivals_for` (after the opening crowd).
    arrivals_for: u64,
    /// Time inside (seconds, uniform), for those let in before `slower.0`.
    stay: (u64, u64),
    /// From this second on, those let in stay this long.
    slower: Option<(u64, (u64, u64))>,
    /// Admissions paused in `[from, to)`.
    pause: Option<(u64, u64)>,
    /// The capacity becomes this at each of these seconds.
    capacity_changes: Vec<(u64, u32)>,
    /// The operators limit admissions to this many a second from that second on.
    rate_limit: Option<(u64, u32)>,
    give_up: Option<GiveUp>,
    /// At this second, each waiter still polling gives up at once with this chance: a wave
    /// of quitters (a rumour that the stock is gone).
    give_up_burst: Option<(u64, f64)>,
    queue_ttl: Duration,
    /// How long a slot granted at a waiter's turn waits to be claimed: a waiter who went
    /// silent too lately to be skipped holds one for this long.
    grant_ttl: Duration,
    /// Each waiter polls the status endpoint every this many seconds.
    poll_every: u64,
}

// ===== what is recorded =====

/// An estimate a visitor was shown.
#[derive(Clone, Copy, Debug)]
struct Shown {
    visitor: usize,
    /// Simulated second.
    at: u64,
    eta: u64,
    /// The position the answer gave.
    position: u64,
    low: Option<u64>,
    high: Option<u64>,
}

/// A status answer `waiting`.
#[derive(Clone, Copy, Debug)]
struct Poll {
    /// Seconds the visitor had waited.
    waited: u64,
    estimate: bool,
    paused: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Waiting,
    Inside { leaves_at: u64 },
    Left,
    GaveUp,
}

#[derive(Debug)]
struct Visitor {
    arrived: u64,
    jar: Jar,
    phase: Phase,
    /// When a quitter stops polling.
    gives_up_at: Option<u64>,
    admitted_at: Option<u64>,
}

/// Everything one run recorded.
#[derive(Debug)]
struct Run {
    visitors: Vec<Visitor>,
    shown: Vec<Shown>,
    polls: Vec<Poll>,
    seconds: u64,
    /// Seconds at which the scenario changed without notice (checkout slowing down, a pause
    /// beginning, the capacity changed): an estimate shown before one of them, for a wait that
    /// ends after it, could not have known it.
    changes: Vec<u64>,
    /// The polling interval, in seconds: a visitor learns they are let in at their next poll,
    /// so an estimate short by less than it broke no promise they could see.
    grain: u64,
}

/// One scenario's figures.
#[derive(Clone, Copy, Debug)]
struct Figures {
    visitors: usize,
    /// The share `>= real` over every estimate, those made before an unannounced change too.
    all_at_least_real: f64,
    scored: usize,
    at_least_real: f64,
    /// The share of scored estimates no more than the polling interval short of the real wait.
    not_optimistic: f64,
    median_rel_error: f64,
    late_polls: usize,
    shown_after_15s: f64,
    ranged: usize,
    within_range: Option<f64>,
    seconds: u64,
}

// ===== the room, in process =====

type Body = Full<Bytes>;
type RoomService = BoxCloneService<Request<Body>, Response<ResponseBody<Body>>, Infallible>;

/// The app behind the room: answers every admitted request with an empty `200`.
async fn app(_req: Request<Body>) -> Result<Response<Body>, Infallible> {
    Ok(Response::new(Body::new(Bytes::new())))
}

/// The room of `scenario` on `store`, on `clock` (the system's when `None`).
fn room(scenario: &Scenario, clock: Option<&ManualClock>, store: impl Store) -> WaitingRoomLayer {
    let hour = Duration::from_secs(3_600);
    let mut builder = WaitingRoomLayer::builder(ROOM)
        .capacity(scenario.capacity)
        .queue_ttl(scenario.queue_ttl)
        .grant_ttl(scenario.grant_ttl)
        .active_ttl(hour)
        .max_queue_len(100_000)
        .secure_cookies(false)
        .secret(SECRET);
    if let Some(clock) = clock {
        builder = builder.clock(clock.clone());
    }
    builder.store(store).build().expect("a valid room")
}

struct Sim {
    scenario: Scenario,
    /// Over real HTTP (servers on loopback, each a gateway: the room in front of
    /// `common::app`), taken in turn request by request; none: the layer called in process.
    http: Vec<Http>,
    /// Requests sent over HTTP so far (which server takes the next).
    sent: usize,
    layer: WaitingRoomLayer,
    service: RoomService,
    /// The manual clock moved one second at a time, or `None`: the seconds are real ones,
    /// from `started` ([`served`]).
    clock: Option<ManualClock>,
    started: tokio::time::Instant,
    rng: Rng,
    /// Simulated seconds since the opening.
    now: u64,
    run: Run,
}

impl Sim {
    fn new(scenario: Scenario, seed: u64) -> Self {
        let clock = ManualClock::new(T0);
        let store = MemoryStore::with_clock(clock.clone());
        Self::with_store(scenario, seed, Some(clock), store)
    }

    fn with_store(
        scenario: Scenario,
        seed: u64,
        clock: Option<ManualClock>,
        store: impl Store,
    ) -> Self {
        // A change of a few percent (the capacity controller's steps) is no surprise; a larger
        // one (an operator's, the controller's cut) is.
        let capacity_changes =
            scenario
                .capacity_changes
                .iter()
                .scan(scenario.capacity, |was, &(at, to)| {
                    let moved = f64::from(to.abs_diff(*was)) / f64::from(*was);
                    *was = to;
                    Some((moved > 0.1).then_some(at))
                });
        let changes: Vec<u64> = [
            // Visits slower from `at` on differ from the room's point of view only from the
            // moment the first of them outlasts the shortest of the old ones.
            scenario.slower.map(|(at, _)| at + scenario.stay.0),
            scenario.pause.map(|(at, _)| at),
            scenario.rate_limit.map(|(at, _)| at),
        ]
        .into_iter()
        .chain(capacity_changes)
        .flatten()
        .collect();
        let layer = room(&scenario, clock.as_ref(), store);
        let service = BoxCloneService::new(layer.layer(service_fn(app)));
        let grain = scenario.poll_every;
        Self {
            scenario,
            http: Vec::new(),
            sent: 0,
            layer,
            service,
            clock,
            started: tokio::time::Instant::now(),
            rng: Rng::new(seed),
            now: 0,
            run: Run {
                visitors: Vec::new(),
                shown: Vec::new(),
                polls: Vec::new(),
                seconds: 0,
                changes,
                grain,
            },
        }
    }

    /// `method path` with visitor `v`'s cookies; the answer's cookies go into the jar.
    async fn send(&mut self, v: usize, method: Method, path: &str) -> Reply {
        let cookie = self.run.visitors[v].jar.header();
        let reply = if !self.http.is_empty() {
            let http = &self.http[self.sent % self.http.len()];
            self.sent += 1;
            let headers: Vec<_> = cookie.map(|c| (header::COOKIE, c)).into_iter().collect();
            http.send(method, path, &headers).await
        } else {
            let mut req = Request::builder().method(method).uri(path);
            if let Some(cookie) = cookie {
                req = req.header(header::COOKIE, cookie);
            }
            let req = req.body(Body::new(Bytes::new())).unwrap();
            let res = self.service.clone().oneshot(req).await.unwrap();
            Reply::read(res).await.unwrap()
        };
        self.run.visitors[v].jar.absorb(&reply);
        reply
    }

    fn status_path() -> String {
        format!("{PREFIX}/{ROOM}/status")
    }

    fn leave_path() -> String {
        format!("{PREFIX}/{ROOM}/leave")
    }

    /// Records what a `waiting` answer showed.
    fn record_waiting(&mut self, v: usize, body: &Value) {
        let eta = body["eta_seconds"].as_u64();
        let waited = self.now - self.run.visitors[v].arrived;
        self.run.polls.push(Poll {
            waited,
            estimate: eta.is_some(),
            paused: body["paused"] == Value::Bool(true),
        });
        if let Some(eta) = eta {
            self.run.shown.push(Shown {
                visitor: v,
                at: self.now,
                eta,
                position: body["position"].as_u64().unwrap_or(0),
                low: body["eta_low_seconds"].as_u64(),
                high: body["eta_high_seconds"].as_u64(),
            });
        }
    }

    /// Visitor `v` is let in now: the request that claims the slot, and the stay drawn.
    async fn enter(&mut self, v: usize) {
        let r = self.send(v, Method::GET, "/").await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "{}: visitor {v} told admitted could not claim the slot at {} s: {}",
            self.scenario.name,
            self.now,
            r.text()
        );
        let stay = match self.scenario.slower {
            Some((from, slower)) if self.now >= from => slower,
            _ => self.scenario.stay,
        };
        let stay = self.rng.between(stay);
        let visitor = &mut self.run.visitors[v];
        visitor.admitted_at = Some(self.now);
        visitor.phase = Phase::Inside {
            leaves_at: self.now + stay,
        };
    }

    /// A newcomer: the first visit (a place in a cookie), then the request again, which joins
    /// the line or goes in.
    async fn arrive(&mut self) {
        let v = self.run.visitors.len();
        let gives_up_at = match self.scenario.give_up {
            Some(g) if self.rng.chance(g.share) => Some(
                self.now
                    + match g.patience {
                        Patience::Exponential(mean) => {
                            (-mean * (1.0 - self.rng.unit()).ln()).ceil() as u64
                        }
                        Patience::Uniform(lo, hi) => self.rng.between((lo, hi)),
                    },
            ),
            _ => None,
        };
        self.run.visitors.push(Visitor {
            arrived: self.now,
            jar: Jar::new(),
            phase: Phase::Waiting,
            gives_up_at,
            admitted_at: None,
        });
        let r = self.send(v, Method::GET, "/").await;
        assert_eq!(r.status, StatusCode::FOUND, "{}", r.text());
        let r = self.send(v, Method::GET, "/").await;
        match r.status {
            StatusCode::OK => {
                // In at once: the request went through (the slot is claimed).
                let stay = self.rng.between(self.scenario.stay);
                let visitor = &mut self.run.visitors[v];
                visitor.admitted_at = Some(self.now);
                visitor.phase = Phase::Inside {
                    leaves_at: self.now + stay,
                };
            }
            StatusCode::TOO_MANY_REQUESTS => {
                let body = r.json();
                assert_eq!(body["state"], "waiting", "{body}");
                self.record_waiting(v, &body);
            }
            other => panic!(
                "{}: a newcomer got {other}: {}",
                self.scenario.name,
                r.text()
            ),
        }
    }

    async fn leave(&mut self, v: usize) {
        let r = self.send(v, Method::POST, &Self::leave_path()).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert_eq!(r.json()["state"], "left");
        self.run.visitors[v].phase = Phase::Left;
    }

    async fn poll(&mut self, v: usize) {
        let r = self.send(v, Method::GET, &Self::status_path()).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let body = r.json();
        match body["state"].as_str() {
            Some("waiting") => self.record_waiting(v, &body),
            Some("admitted") => self.enter(v).await,
            _ => panic!(
                "{}: visitor {v} polling at {} s got {body}",
                self.scenario.name, self.now
            ),
        }
    }

    /// The operators' changes due this second.
    async fn operate(&mut self) {
        let control = self.layer.control();
        if let Some((from, to)) = self.scenario.pause {
            if self.now == from {
                control.pause().await.unwrap();
            }
            if self.now == to {
                control.resume().await.unwrap();
            }
        }
        for &(at, capacity) in &self.scenario.capacity_changes {
            if self.now == at {
                control.set_capacity(capacity).await.unwrap();
            }
        }
        if let Some((at, per_second)) = self.scenario.rate_limit {
            if self.now == at {
                control.set_rate(Some(per_second)).await.unwrap();
            }
        }
    }

    fn capacity_now(&self) -> usize {
        let changed = self.scenario.capacity_changes.iter().rev();
        let mut changed = changed.filter(|&&(at, _)| at <= self.now);
        changed.next().map_or(self.scenario.capacity, |&(_, c)| c) as usize
    }

    /// One simulated second: operators, departures, arrivals, then the line polls (in order of
    /// arrival). Answers whether anyone is still to be let in or inside.
    async fn second(&mut self) -> bool {
        self.operate().await;
        for v in 0..self.run.visitors.len() {
            if let Phase::Inside { leaves_at } = self.run.visitors[v].phase {
                if leaves_at <= self.now {
                    self.leave(v).await;
                }
            }
        }
        let newcomers = if self.now == 0 {
            self.scenario.opening_crowd
        } else if self.now <= self.scenario.arrivals_for {
            match self.scenario.arrivals {
                Arrivals::Every(n) => n,
                Arrivals::Poisson(mean) => self.rng.poisson(mean),
            }
        } else {
            0
        };
        if let Some((at, share)) = self.scenario.give_up_burst {
            if self.now == at {
                for v in 0..self.run.visitors.len() {
                    if self.run.visitors[v].phase == Phase::Waiting && self.rng.chance(share) {
                        self.run.visitors[v].gives_up_at = Some(at);
                    }
                }
            }
        }
        let before = self.run.visitors.len();
        for _ in 0..newcomers {
            self.arrive().await;
        }
        for v in 0..before {
            let visitor = &self.run.visitors[v];
            if visitor.phase != Phase::Waiting {
                continue;
            }
            if visitor.gives_up_at.is_some_and(|at| at <= self.now) {
                self.run.visitors[v].phase = Phase::GaveUp;
                continue;
            }
            if (self.now - visitor.arrived).is_multiple_of(self.scenario.poll_every) {
                self.poll(v).await;
            }
        }
        let inside = self
            .run
            .visitors
            .iter()
            .filter(|v| matches!(v.phase, Phase::Inside { .. }))
            .count();
        // After a cut more may be inside than the capacity (nobody is sent out), but nobody
        // is let in until they are not.
        let let_in = self
            .run
            .visitors
            .iter()
            .any(|v| v.admitted_at == Some(self.now));
        assert!(
            inside <= self.capacity_now() || !let_in,
            "{}: {inside} inside at {} s, some let in",
            self.scenario.name,
            self.now
        );
        self.now < self.scenario.arrivals_for
            || self
                .run
                .visitors
                .iter()
                .any(|v| matches!(v.phase, Phase::Waiting | Phase::Inside { .. }))
    }

    async fn run(mut self) -> Run {
        while self.second().await {
            self.now += 1;
            assert!(
                self.now < MAX_SECONDS,
                "{}: still going after {MAX_SECONDS} s",
                self.scenario.name
            );
            match &self.clock {
                Some(clock) => clock.advance(Duration::from_secs(1)),
                None => {
                    let next = self.started + Duration::from_secs(self.now);
                    tokio::time::sleep_until(next).await;
                }
            }
        }
        self.run.seconds = self.now;
        self.run
    }
}

/// Runs `scenario` once per seed of [`SEEDS`], pooled into one run.
async fn run_seeds(scenario: &Scenario) -> Run {
    let mut pooled: Option<Run> = None;
    for seed in SEEDS {
        let run = Sim::new(scenario.clone(), seed).run().await;
        pooled = Some(match pooled {
            None => run,
            Some(all) => pool(all, run),
        });
    }
    pooled.expect("at least one seed")
}

/// Two runs as one: `run`'s visitors after `all`'s.
fn pool(mut all: Run, run: Run) -> Run {
    let offset = all.visitors.len();
    all.shown.extend(run.shown.into_iter().map(|s| Shown {
        visitor: s.visitor + offset,
        ..s
    }));
    all.visitors.extend(run.visitors);
    all.polls.extend(run.polls);
    all.seconds = all.seconds.max(run.seconds);
    all
}

/// Runs `scenario`, prints its row (and what it misses of [`GOALS`]) and asserts `targets`.
async fn meets(scenario: Scenario, targets: &Targets) {
    let name = scenario.name;
    let run = run_seeds(&scenario).await;
    let figures = run.figures();
    let goals = figures.misses(&GOALS);
    println!(
        "{}\n  {name}, goals: {}",
        figures.row(name),
        if goals.is_empty() {
            "met".to_owned()
        } else {
            goals.join("; ")
        }
    );
    trace(&run);
    let misses = figures.misses(targets);
    assert!(misses.is_empty(), "{name}: {}", misses.join("; "));
}

/// Runs `scenario` against [`TARGETS`].
async fn meets_targets(scenario: Scenario) {
    meets(scenario, &TARGETS).await;
}

/// Runs a scenario where waiters give up against [`GIVE_UP_TARGETS`].
async fn keeps_its_floor(scenario: Scenario) {
    meets(scenario, &GIVE_UP_TARGETS).await;
}

// ===== the scenarios against the targets =====

#[tokio::test]
async fn burst_at_opening() {
    meets_targets(Scenario::burst()).await;
}

#[tokio::test]
async fn steady_line() {
    meets_targets(Scenario::steady()).await;
}

#[tokio::test]
async fn checkout_slows_mid_sale() {
    meets_targets(Scenario::slowdown()).await;
}

#[tokio::test]
async fn pause_and_resume() {
    meets_targets(Scenario::pause()).await;
}

#[tokio::test]
async fn capacity_raised_mid_sale() {
    meets_targets(Scenario::capacity_raised()).await;
}

#[tokio::test]
async fn capacity_moved_as_the_controller_moves_it() {
    meets_targets(Scenario::capacity_moved()).await;
}

#[tokio::test]
async fn admission_rate_lowered_mid_sale() {
    meets_targets(Scenario::rate_limited()).await;
}

#[tokio::test]
async fn many_waiters_give_up() {
    keeps_its_floor(Scenario::giving_up()).await;
}

#[tokio::test]
async fn many_waiters_give_up_late() {
    keeps_its_floor(Scenario::giving_up_late()).await;
}

#[tokio::test]
async fn a_third_give_up_with_short_ttls() {
    keeps_its_floor(Scenario::giving_up_short_ttls()).await;
}

#[tokio::test]
async fn a_third_give_up_at_once() {
    keeps_its_floor(Scenario::give_up_burst()).await;
}

// ===== the harness itself =====

/// The steady line, checked for what the harness relies on rather than for the estimator's
/// figures: everyone is let in, in order of arrival, and estimates were read.
#[tokio::test]
async fn the_harness_lets_everyone_in_in_order_and_records_estimates() {
    for scenario in [Scenario::steady(), Scenario::giving_up()] {
        let name = scenario.name;
        let run = Sim::new(scenario, SEEDS[0]).run().await;
        assert!(run.visitors.len() > 100, "{name}: {}", run.visitors.len());
        let mut last = 0;
        for (i, v) in run.visitors.iter().enumerate() {
            if v.phase == Phase::GaveUp {
                assert!(v.admitted_at.is_none(), "{name}: visitor {i}: {v:?}");
                continue;
            }
            assert_eq!(v.phase, Phase::Left, "{name}: visitor {i}");
            let admitted_at = v.admitted_at.expect("admitted");
            assert!(admitted_at >= v.arrived, "{name}: visitor {i}: {v:?}");
            assert!(
                admitted_at >= last,
                "{name}: visitor {i}, arrived at {} s, let in at {admitted_at} s, after one \
                 who arrived before them was let in at {last} s",
                v.arrived
            );
            last = admitted_at;
        }
        let gave_up = run
            .visitors
            .iter()
            .filter(|v| v.phase == Phase::GaveUp)
            .count();
        if name == Scenario::giving_up().name {
            assert!(gave_up > 20, "{name}: {gave_up} gave up");
        } else {
            assert_eq!(gave_up, 0, "{name}");
        }
        assert!(run.shown.len() > 1_000, "{name}: {}", run.shown.len());
        assert!(run.polls.len() >= run.shown.len());
        let figures = run.figures();
        assert!(figures.scored > 1_000, "{name}: {figures:?}");
        println!("{}", figures.row(name));
    }
}
