//! The controller against a model app with a knee, on simulated time: how close it settles to
//! the knee, how fast it gets there, follows the knee when it moves, and what a stall does.
//!
//! The model: people in the room each send a request every 2 s on average, and the app serves
//! `knee × 0.5` requests a second at its base latency (a median of 80 ms). Past the knee the
//! requests it cannot serve queue, and every request waits for the queue ahead of it: latency
//! grows for as long as more people are inside than the knee. Past twice the knee, requests
//! fail (5xx) in proportion. People stay 30 s on average; the line never runs dry. The
//! room admits at once whoever the capacity lets in.

use std::time::Duration;

use super::{AutoCapacity, Controller, LatencyHistogram, Window};

const STEP: f64 = 0.1;
const RATE_PER_PERSON: f64 = 0.5;
const VISIT_MEAN_S: f64 = 30.0;
const TARGET: Duration = Duration::from_millis(300);

/// A seeded xorshift generator: the same run every time.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `x` rounded up or down at random, so that fractions add up over steps.
    fn round(&mut self, x: f64) -> u64 {
        let whole = x.floor();
        whole as u64 + u64::from(self.next() < x - whole)
    }

    /// A standard normal draw (Box-Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.next().max(1e-12), self.next());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// What happens to the app over time.
struct Scenario {
    /// The knee at a time (s).
    knee: fn(f64) -> f64,
    /// An added delay for every request at a time (s): a stall.
    stall: fn(f64) -> f64,
    seconds: f64,
}

/// One window's record.
#[derive(Debug, Clone, Copy)]
struct Point {
    end_s: f64,
    capacity: u32,
    inside: f64,
    p95_ms: f64,
    error_rate: f64,
}

struct Run {
    points: Vec<Point>,
    /// Latencies of every request from `settled_from` on, for the p95 after settling.
    settled: LatencyHistogram,
}

fn run(scenario: &Scenario, terms: AutoCapacity, start: u32, settled_from: f64, seed: u64) -> Run {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    let mut controller = Controller::new(terms, start);
    let mut capacity = controller.capacity();
    let (mut inside, mut waiting, mut backlog) = (0u64, 0u64, 0f64);
    let mut window = Window::default();
    let (mut inside_sum, mut steps_in_window) = (0f64, 0u32);
    let window_s = terms.get_window().as_secs_f64();
    let mut next_window = window_s;
    let mut points = Vec::new();
    let mut settled = LatencyHistogram::new();
    let mut step = 0u64;
    loop {
        step += 1;
        let t = step as f64 * STEP;
        if t > scenario.seconds {
            break;
        }
        // Arrivals: a burst of 5 000 in the first 10 s, then 8 a second.
        let arriving = if t <= 10.0 { 500.0 } else { 8.0 };
        waiting += rng.round(arriving * STEP);
        let leaving = rng.round(inside as f64 * STEP / VISIT_MEAN_S).min(inside);
        inside -= leaving;
        let admitted = (u64::from(capacity).saturating_sub(inside)).min(waiting);
        inside += admitted;
        waiting -= admitted;
        // The app.
        let knee = (scenario.knee)(t);
        let served = knee * RATE_PER_PERSON;
        let sent = inside as f64 * RATE_PER_PERSON;
        backlog = (backlog + (sent - served) * STEP).max(0.0);
        let queue_s = backlog / served;
        let failing = ((inside as f64 - 2.0 * knee) / knee).clamp(0.0, 1.0);
        for _ in 0..rng.round(sent * STEP) {
            if rng.next() < failing {
                window.errors += 1;
                continue;
            }
            let base = 0.080 * (0.3 * rng.normal()).exp();
            let latency = Duration::from_secs_f64(base + queue_s + (scenario.stall)(t));
            if latency > terms.timeout() {
                // Given up on (the gateway's upstream timeout, the visitor): it leaves the
                // app's queue, so the queue holds at most about a timeout's worth of work.
                window.timeouts += 1;
                backlog = (backlog - 1.0).max(0.0);
            } else {
                window.ok += 1;
                window.latencies.record(latency);
            }
            if t >= settled_from {
                settled.record(latency);
            }
        }
        inside_sum += inside as f64;
        steps_in_window += 1;
        if t + 1e-9 >= next_window {
            window.end_ms = (t * 1000.0).round() as u64;
            window.start_ms = window.end_ms - (window_s * 1000.0) as u64;
            window.inside = inside_sum / f64::from(steps_in_window);
            window.waiting = waiting;
            let decision = controller.decide(&window);
            capacity = decision.capacity;
            assert!(
                (terms.get_min()..=terms.get_max()).contains(&capacity),
                "{capacity} outside the bounds"
            );
            points.push(Point {
                end_s: t,
                capacity,
                inside: window.inside,
                p95_ms: window
                    .latencies
                    .quantile(0.95)
                    .map_or(0.0, |d| d.as_secs_f64() * 1000.0),
                error_rate: window.error_rate(),
            });
            window = Window::default();
            inside_sum = 0.0;
            steps_in_window = 0;
            next_window += window_s;
        }
    }
    Run { points, settled }
}

fn terms() -> AutoCapacity {
    AutoCapacity::new(10, 5_000, TARGET)
}

fn trace(points: &[Point]) -> String {
    points
        .iter()
        .map(|p| {
            format!(
                "{:>6.0}s cap {:>5} inside {:>7.1} p95 {:>7.0} ms err {:.3}\n",
                p.end_s, p.capacity, p.inside, p.p95_ms, p.error_rate
            )
        })
        .collect()
}

/// The first time from `from` on that the capacity is within `share` of `knee`.
fn reached(points: &[Point], from: f64, knee: f64, share: f64) -> Option<f64> {
    points
        .iter()
        .filter(|p| p.end_s > from)
        .find(|p| (f64::from(p.capacity) - knee).abs() <= share * knee)
        .map(|p| p.end_s - from)
}

/// The capacity's spread over `[from, to)`: its lowest and highest over its median.
fn spread(points: &[Point], from: f64, to: f64) -> (f64, f64) {
    let mut caps: Vec<u32> = points
        .iter()
        .filter(|p| p.end_s >= from && p.end_s < to)
        .map(|p| p.capacity)
        .collect();
    caps.sort_unstable();
    let median = f64::from(caps[caps.len() / 2]);
    (
        f64::from(caps[0]) / median,
        f64::from(*caps.last().unwrap()) / median,
    )
}

#[test]
fn from_min_it_reaches_the_knee_within_a_minute_and_follows_it_down_and_up() {
    for seed in 0..5 {
        knee_halves_and_recovers(seed);
    }
}

/// The knee at 400 people, halved from the 10th minute to the 20th; the targets.
fn knee_halves_and_recovers(seed: u64) {
    let scenario = Scenario {
        knee: |t| {
            if (600.0..1_200.0).contains(&t) {
                200.0
            } else {
                400.0
            }
        },
        stall: |_| 0.0,
        seconds: 1_800.0,
    };
    let run = run(&scenario, terms(), 10, 120.0, seed);
    let points = &run.points;
    let why = trace(points);
    let first = reached(points, 0.0, 400.0, 0.2).expect(&why);
    assert!(first <= 60.0, "at the knee after {first} s\n{why}");
    let down = reached(points, 600.0, 200.0, 0.2).expect(&why);
    assert!(down <= 30.0, "followed the knee down in {down} s\n{why}");
    let errors_back = points
        .iter()
        .filter(|p| p.end_s > 630.0 && p.end_s < 1_200.0)
        .all(|p| p.error_rate <= 0.01);
    assert!(
        errors_back,
        "errors over the budget 30 s after the knee halved\n{why}"
    );
    let up = reached(points, 1_200.0, 400.0, 0.2).expect(&why);
    assert!(up <= 120.0, "followed the knee up in {up} s\n{why}");
    for (from, to) in [(300.0, 600.0), (900.0, 1_200.0), (1_500.0, 1_800.0)] {
        let (low, high) = spread(points, from, to);
        assert!(
            low >= 0.85 && high <= 1.15,
            "settled between {from} and {to} s: {low:.2}..{high:.2} of the median\n{why}"
        );
    }
    let p95 = run.settled.quantile(0.95).unwrap();
    assert!(p95 <= TARGET * 3 / 2, "p95 after settling {p95:?}\n{why}");
    let errors_under = points
        .iter()
        .filter(|p| p.end_s > 600.0 && p.end_s < 1_200.0)
        .rev()
        .find(|p| p.error_rate > 0.01)
        .map_or(0.0, |p| p.end_s - 600.0);
    // Once settled (not at the moment the knee moves under the people inside).
    let settled = [(300.0, 600.0), (900.0, 1_200.0), (1_500.0, 1_800.0)];
    let peak = points
        .iter()
        .filter(|p| {
            settled
                .iter()
                .any(|&(from, to)| p.end_s >= from && p.end_s < to)
        })
        .map(|p| p.inside / (scenario.knee)(p.end_s))
        .fold(0.0, f64::max);
    assert!(peak <= 1.15, "{peak:.2} of the knee inside\n{why}");
    let bands: Vec<String> = settled
        .iter()
        .map(|&(from, to)| {
            let (low, high) = spread(points, from, to);
            format!("{low:.2}-{high:.2}")
        })
        .collect();
    // The figures of docs/auto-capacity.md (`cargo test --lib auto::sim -- --nocapture`).
    eprintln!(
        "seed {seed}: knee reached in {first:.0} s; followed down in {down:.0} s, errors under the budget \
         after {errors_under:.0} s; followed up in {up:.0} s; settled bands {}; p95 after \
         settling {:.0} ms; most inside {peak:.2} of the knee",
        bands.join(", "),
        p95.as_secs_f64() * 1000.0
    );
}

#[test]
fn a_stall_every_minute_does_not_collapse_the_capacity() {
    let scenario = Scenario {
        knee: |_| 400.0,
        // 3 s of every minute, from the fourth minute, every request waits 3 s more.
        stall: |t| {
            if t > 180.0 && t % 60.0 < 3.0 {
                3.0
            } else {
                0.0
            }
        },
        seconds: 900.0,
    };
    let run = run(&scenario, terms(), 10, f64::MAX, 0);
    let why = trace(&run.points);
    let before = run
        .points
        .iter()
        .rfind(|p| p.end_s < 180.0)
        .map(|p| p.capacity)
        .unwrap();
    let lowest = run
        .points
        .iter()
        .filter(|p| p.end_s >= 180.0)
        .map(|p| p.capacity)
        .min()
        .unwrap();
    assert!(
        f64::from(lowest) >= 0.7 * f64::from(before),
        "from {before} down to {lowest}\n{why}"
    );
}
