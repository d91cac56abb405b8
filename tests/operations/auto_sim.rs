//! Auto capacity through the real layer: the room (its sampling, its windows, its decisions
//! written to the embedded store) in front of a model app with a knee, on a manual clock for
//! the room and Tokio's paused time for the app's latency. `src/auto/sim.rs` holds the law
//! alone to the design's targets over five seeds; this holds the room that runs it to the
//! same shape: it finds the knee from `min`, settles near it, and follows it down and up.
//!
//! The model, as in `src/auto/sim.rs`: people inside send a request every 2 s on average;
//! the app serves `knee × 0.5` a second at its base latency (a median of 80 ms) and queues
//! the rest, every request waiting for the queue ahead of it, until requests wait past the
//! timeout and are given up on; past twice the knee requests fail in proportion. People stay
//! 30 s on average and leave (their slot released); a line never runs dry. Visitors are
//! sessions of the store: let in by it (claiming their grant when their turn comes), their
//! requests sent through the layer with their admission tokens.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use http::{header, Method, StatusCode};
use tower_waiting_room::auto::AutoCapacity;
use tower_waiting_room::store::{Decision, Store};
use tower_waiting_room::testing::TestRoom;
use tower_waiting_room::{SessionId, WaitingRoomLayer};

use crate::common::call;

const STEP: Duration = Duration::from_millis(100);
const RATE_PER_PERSON: f64 = 0.5;
const VISIT_MEAN_S: f64 = 30.0;
const KNEE: f64 = 100.0;

/// A seeded xorshift generator: the same run every time.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn round(&mut self, x: f64) -> u64 {
        let whole = x.floor();
        whole as u64 + u64::from(self.next() < x - whole)
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (self.next().max(1e-12), self.next());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// What the app does with the next request: its latency, or a failure.
#[derive(Clone, Copy)]
enum Answer {
    After(Duration),
    Fails,
}

/// The model app's state, which the test steps and the handler reads.
#[derive(Default)]
struct App {
    next: VecDeque<Answer>,
}

#[tokio::test(start_paused = true)]
async fn the_room_finds_the_knee_and_follows_it_through_the_real_layer() {
    let terms = AutoCapacity::new(5, 2_000, Duration::from_millis(300));
    let timeout = terms.timeout();
    let room = TestRoom::with(
        WaitingRoomLayer::builder("auto-sim")
            .capacity(5)
            .auto_capacity(terms)
            // Tokens stay on the fast path for a visit: the store is asked at entry and exit.
            .refresh(Duration::from_secs(600))
            .active_ttl(Duration::from_secs(1_200))
            .new_visitor_limit(None)
            .poll_limit(None),
    );
    let model = Arc::new(Mutex::new(App::default()));
    let answers = Arc::clone(&model);
    let app = Router::new()
        .route(
            "/",
            get(move || {
                let next = answers.lock().unwrap().next.pop_front();
                async move {
                    match next {
                        Some(Answer::After(latency)) => {
                            tokio::time::sleep(latency).await;
                            StatusCode::OK
                        }
                        _ => StatusCode::SERVICE_UNAVAILABLE,
                    }
                }
            }),
        )
        .layer(room.layer());
    let policy = room.layer().config().policy().clone();
    let store = room.store().clone();
    let control = room.layer().control();

    let mut rng = Rng(0x5EED_0043);
    let mut inside: Vec<(SessionId, http::HeaderValue)> = Vec::new();
    let mut line: VecDeque<SessionId> = VecDeque::new();
    let mut backlog = 0f64;
    let mut trace: Vec<(f64, u32, usize)> = Vec::new();
    let steps = 25 * 60 * 10; // 25 minutes
    for step in 1..=steps {
        let t = f64::from(step) * STEP.as_secs_f64();
        let knee = if (600.0..1_200.0).contains(&t) {
            KNEE / 2.0
        } else {
            KNEE
        };
        room.clock().advance(STEP);
        // Arrivals: a burst of 2 000 in the first 10 s, then 3 a second.
        let arriving = if t <= 10.0 { 200.0 } else { 3.0 };
        for _ in 0..rng.round(arriving * STEP.as_secs_f64()) {
            // Only the front of the line asks the store below; the rest join in their turn.
            line.push_back(SessionId::random());
        }
        // Departures: the slot released at the end of a visit.
        let mut i = 0;
        while i < inside.len() {
            if rng.next() < STEP.as_secs_f64() / VISIT_MEAN_S {
                let (session, _) = inside.swap_remove(i);
                store.release(&policy, session).await.unwrap();
            } else {
                i += 1;
            }
        }
        // The front of the line asks the store (joining, or claiming a grant), in order.
        for _ in 0..line.len().min(40) {
            let session = *line.front().unwrap();
            match store.enter(&policy, session).await.unwrap() {
                Decision::Admitted { .. } => {
                    line.pop_front();
                    inside.push((session, room.token_without_slot_for(session)));
                }
                _ => break,
            }
        }
        // The app: what it can serve, the queue, and the answers of this step's requests.
        let served = knee * RATE_PER_PERSON;
        let sent = inside.len() as f64 * RATE_PER_PERSON;
        backlog = (backlog + (sent - served) * STEP.as_secs_f64()).max(0.0);
        let failing = ((inside.len() as f64 - 2.0 * knee) / knee).clamp(0.0, 1.0);
        let n = rng.round(sent * STEP.as_secs_f64());
        let mut batch = Vec::new();
        for _ in 0..n {
            if rng.next() < failing {
                batch.push(Answer::Fails);
                continue;
            }
            let base = 0.080 * (0.3 * rng.normal()).exp();
            let latency = Duration::from_secs_f64(base + backlog / served);
            if latency > timeout {
                backlog = (backlog - 1.0).max(0.0);
            }
            batch.push(Answer::After(latency.min(timeout * 2)));
        }
        model.lock().unwrap().next.extend(batch);
        for _ in 0..n {
            if inside.is_empty() {
                break;
            }
            let (_, token) = &inside[(rng.next() * inside.len() as f64) as usize];
            let cookie = token.clone();
            call(&app, Method::GET, "/", &[(header::COOKIE, cookie)]).await;
        }
        model.lock().unwrap().next.clear();
        // The decisions run in tasks of their own.
        tokio::task::yield_now().await;
        if step % 50 == 0 {
            let capacity = control.settings().await.unwrap().capacity;
            trace.push((t, capacity, inside.len()));
        }
    }
    let why: String = trace
        .iter()
        .map(|(t, c, i)| format!("{t:>6.0}s cap {c:>5} inside {i:>5}\n"))
        .collect();
    let first = |from: f64, knee: f64| {
        trace
            .iter()
            .find(|&&(t, c, _)| t > from && (f64::from(c) - knee).abs() <= 0.2 * knee)
            .map(|&(t, _, _)| t - from)
    };
    let up = first(0.0, KNEE).expect(&why);
    assert!(up <= 60.0, "at the knee after {up} s\n{why}");
    let down = first(600.0, KNEE / 2.0).expect(&why);
    assert!(down <= 30.0, "followed the knee down in {down} s\n{why}");
    let again = first(1_200.0, KNEE).expect(&why);
    assert!(again <= 120.0, "followed the knee up in {again} s\n{why}");
    let mut bands = Vec::new();
    for (from, to, knee) in [
        (300.0, 600.0, KNEE),
        (900.0, 1_200.0, KNEE / 2.0),
        (1_320.0, 1_500.0, KNEE),
    ] {
        let caps: Vec<f64> = trace
            .iter()
            .filter(|&&(t, _, _)| t >= from && t < to)
            .map(|&(_, c, _)| f64::from(c))
            .collect();
        let mean = caps.iter().sum::<f64>() / caps.len() as f64;
        let (low, high) = caps
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), &c| (l.min(c), h.max(c)));
        assert!(
            (mean - knee).abs() <= 0.15 * knee && low >= 0.85 * mean && high <= 1.15 * mean,
            "between {from} and {to} s: {low}..{high}, mean {mean:.0}, knee {knee}\n{why}"
        );
        bands.push(format!("{:.2}-{:.2} of the knee", low / knee, high / knee));
    }
    // The figures of docs/auto-capacity.md (`cargo test --test operations auto_sim -- --nocapture`).
    eprintln!(
        "through the layer: knee reached in {up:.0} s, followed down in {down:.0} s and up in \
         {again:.0} s; settled {}",
        bands.join(", ")
    );
}
