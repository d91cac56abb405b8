//! [`Controller`]: one window of measurements in, the next capacity out (see the
//! [module docs](super) for the law in words).

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use super::{AutoCapacity, Window};

/// Requests a window needs before its latency is read; fewer are carried into the next one.
const MIN_SAMPLES: u64 = 50;
/// Requests enough to grow on when every one of them was well within the target.
const MIN_SAMPLES_TO_GROW: u64 = 20;
/// Windows carried at most; past them the controller decides on what it has.
const MAX_CARRIED: u32 = 6;
/// Errors a window needs before they can cause a cut (one failed request in ten is no signal).
const MIN_ERRORS: u64 = 5;
/// How long the ideal latency remembers a healthy window.
const IDEAL_MEMORY_MS: u64 = 10 * 60 * 1000;
/// How long the most people inside a healthy window is remembered.
const GOOD_MEMORY_MS: u64 = 30_000;
/// How long the people inside when the latency last went wrong are remembered.
const KNEE_MEMORY_MS: u64 = 5 * 60 * 1000;
/// App load (0 to 100) from which the controller stops growing.
const LOAD_HOLD: u8 = 85;

/// How the capacity moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// Up.
    Grow,
    /// Unchanged.
    Hold,
    /// Down, in proportion to the latency over the target.
    BackOff,
    /// Down, for errors over the budget.
    Cut,
}

impl Change {
    /// Every change, in declaration order (metric labels are kept in this order).
    pub const ALL: [Change; 4] = [Change::Grow, Change::Hold, Change::BackOff, Change::Cut];

    /// The change in snake case, as the admin's JSON and the metrics write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Grow => "grow",
            Change::Hold => "hold",
            Change::BackOff => "back_off",
            Change::Cut => "cut",
        }
    }

    /// The change [`as_str`](Self::as_str) writes; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// Why, in the controller's words (in the admin's JSON, snake case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// Too few requests to read a latency: the window is carried into the next.
    FewSamples,
    /// Errors and timeouts over the budget.
    Errors,
    /// The p95 over the target.
    OverTarget,
    /// Over the target for one window only: one more before backing off.
    Settling,
    /// A cut is still draining (people leave slowly); nothing more until it has.
    Draining,
    /// The p95 near the target: where the capacity should stay.
    InBand,
    /// The p95 well under the target, with people waiting and the room full enough.
    Headroom,
    /// Room to grow, but under half the capacity is used: the app is not what limits.
    NotFull,
    /// Room to grow, but nobody is waiting.
    NoLine,
    /// Room to grow, but the app says it is loaded.
    AppLoad,
    /// The median has risen well above the ideal latency: a queue is forming in the app.
    Queueing,
    /// At a bound already.
    AtBound,
}

impl Reason {
    /// Every reason, in declaration order.
    pub const ALL: [Reason; 12] = [
        Reason::FewSamples,
        Reason::Errors,
        Reason::OverTarget,
        Reason::Settling,
        Reason::Draining,
        Reason::InBand,
        Reason::Headroom,
        Reason::NotFull,
        Reason::NoLine,
        Reason::AppLoad,
        Reason::Queueing,
        Reason::AtBound,
    ];

    /// The reason [`as_str`](Self::as_str) writes; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The reason in snake case, as the admin's JSON writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::FewSamples => "few_samples",
            Reason::Errors => "errors",
            Reason::OverTarget => "over_target",
            Reason::Settling => "settling",
            Reason::Draining => "draining",
            Reason::InBand => "in_band",
            Reason::Headroom => "headroom",
            Reason::NotFull => "not_full",
            Reason::NoLine => "no_line",
            Reason::AppLoad => "app_load",
            Reason::Queueing => "queueing",
            Reason::AtBound => "at_bound",
        }
    }
}

/// The controller's answer to one window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Decision {
    /// The capacity from now on.
    pub capacity: u32,
    /// How it moved.
    pub change: Change,
    /// Why.
    pub reason: Reason,
    /// The window's p95 (of what was decided on, carried windows included).
    #[serde(serialize_with = "millis")]
    pub p95: Option<Duration>,
    /// Its median.
    #[serde(serialize_with = "millis")]
    pub p50: Option<Duration>,
    /// Its share of errors and timeouts.
    pub error_rate: f64,
    /// Its requests.
    pub samples: u64,
}

fn millis<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&(d.as_secs_f64() * 1000.0).round()),
        None => s.serialize_none(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// From the start until the first back-off or cut: growth by half per window.
    Start,
    /// Growth by 5 % per window.
    Steady,
}

/// A cut waiting for people to leave.
#[derive(Clone, Copy, Debug)]
struct Drain {
    capacity: u32,
    until_ms: u64,
    error_rate: f64,
    /// When the people inside were first down to the cut.
    down_since: Option<u64>,
    /// The p95 of the last window while it drained: a queue in the app that is still going
    /// down is left to drain.
    last_p95: Option<Duration>,
}

/// One room's controller: its terms, the capacity it holds and what it remembers.
///
/// ```
/// use std::time::Duration;
/// use tower_waiting_room::auto::{AutoCapacity, Change, Controller, Window};
///
/// let terms = AutoCapacity::new(50, 5_000, Duration::from_millis(300)); // min, max, p95
/// let mut controller = Controller::new(terms, 50);
/// // Five seconds of a full room with a line, its requests answered in 90 ms.
/// let mut window = Window { end_ms: 5_000, ok: 400, inside: 50.0, waiting: 900, ..Window::default() };
/// window.latencies.record_n(Duration::from_millis(90), 400);
/// let decision = controller.decide(&window);
/// assert_eq!((decision.change, decision.capacity), (Change::Grow, 75));
/// // Then, in a room: control.set_capacity(decision.capacity).await?
/// ```
#[derive(Clone, Debug)]
pub struct Controller {
    terms: AutoCapacity,
    capacity: u32,
    phase: Phase,
    over_target: u32,
    drain: Option<Drain>,
    carried: Option<(Window, u32)>,
    /// Medians of healthy windows, with when they ended, for the ideal latency.
    healthy: VecDeque<(u64, Duration)>,
    /// The most people inside in a healthy window of the last 30 s, with when: the knee is
    /// above it, so a back-off need not go far below it.
    good: Option<(u64, f64)>,
    /// The people inside when the latency last went wrong, with when: growth slows near it.
    knee: Option<(u64, f64)>,
    /// Windows in a row over the error budget with timeouts only.
    timing_out: u32,
}

impl Controller {
    /// A controller for `terms`, starting from `capacity` (brought within the bounds).
    pub fn new(terms: AutoCapacity, capacity: u32) -> Self {
        Self {
            capacity: capacity.clamp(terms.min, terms.max),
            terms,
            phase: Phase::Start,
            over_target: 0,
            drain: None,
            carried: None,
            healthy: VecDeque::new(),
            good: None,
            knee: None,
            timing_out: 0,
        }
    }

    /// A controller for `terms` taking over from another one (on another gateway, or before
    /// the operator set the capacity by hand) at `capacity`: as [`new`](Self::new), but past
    /// the start, so it grows by 5 % per window rather than by half: the capacity it finds was
    /// already chosen, and what made it so is not known here.
    pub fn taking_over(terms: AutoCapacity, capacity: u32) -> Self {
        Self {
            phase: Phase::Steady,
            ..Self::new(terms, capacity)
        }
    }

    /// The capacity it holds.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The ideal latency it has learned: the lowest median of the healthy windows of the last
    /// ten minutes, at most half the target.
    pub fn ideal(&self) -> Option<Duration> {
        let lowest = self.healthy.iter().map(|&(_, p50)| p50).min()?;
        Some(lowest.min(self.terms.target_p95 / 2))
    }

    /// The next capacity, from the window that just ended.
    pub fn decide(&mut self, window: &Window) -> Decision {
        let (window, carried) = match self.carried.take() {
            Some((mut before, n)) => {
                before.merge(window);
                (before, n + 1)
            }
            None => (window.clone(), 1),
        };
        let now = window.end_ms;
        let rate = window.error_rate();
        let failed = window.errors + window.timeouts;
        let (p50, p95) = (
            window.latencies.quantile(0.5),
            window.latencies.quantile(0.95),
        );
        // A small window that looks healthy is enough to grow on (a start at a low `min`
        // would otherwise wait windows for samples); one that looks bad is confirmed first.
        let clearly_fine = window.samples() >= MIN_SAMPLES_TO_GROW
            && window.errors + window.timeouts == 0
            && p95.is_some_and(|p| p.as_secs_f64() <= 0.8 * self.terms.target_p95.as_secs_f64());
        let enough = window.samples() >= MIN_SAMPLES || carried >= MAX_CARRIED || clearly_fine;
        let said = |capacity, change, reason| Decision {
            capacity,
            change,
            reason,
            p95,
            p50,
            error_rate: rate,
            samples: window.samples(),
        };
        let failing = failed >= MIN_ERRORS && rate > self.terms.error_budget;
        if !(enough || failing) {
            self.carried = Some((window.clone(), carried));
            return said(self.capacity, Change::Hold, Reason::FewSamples);
        }
        let inside = window.inside.max(0.0);
        let target = self.terms.target_p95;
        // The ideal latency forgets what is older than ten minutes.
        while self
            .healthy
            .front()
            .is_some_and(|&(at, _)| at + IDEAL_MEMORY_MS < now)
        {
            self.healthy.pop_front();
        }

        let over = p95.is_some_and(|p| p > target);
        // A queue forming in the app: the median itself has moved well above the ideal (a
        // slow tail, or one pause, moves the p95 first). It shows in the first window past the
        // knee, before the p95 crosses the target.
        let queueing = self
            .ideal()
            .zip(p50)
            .is_some_and(|(ideal, p50)| p50 > ideal * 2);
        if let Some(drain) = self.drain.as_mut() {
            // Done draining once the people inside are down to the cut and the latency is back
            // to normal (the app's queue drained too); or once they have been down to it for a
            // whole window and it is still not (the cut was not enough); or when its time is up.
            let down = inside <= f64::from(drain.capacity) * 1.05;
            let since = *drain
                .down_since
                .get_or_insert(if down { now } else { u64::MAX });
            if !down {
                drain.down_since = None;
            }
            let healthy = !over && !queueing && rate <= self.terms.error_budget;
            let improving = p95
                .zip(drain.last_p95)
                .is_some_and(|(now, before)| now < before);
            drain.last_p95 = p95;
            let not_enough = down && now > since && !improving;
            if (down && healthy) || not_enough || now >= drain.until_ms {
                self.drain = None;
            }
        }
        self.over_target = if over { self.over_target + 1 } else { 0 };

        // Errors: cut, even while an earlier cut drains if the errors have doubled since.
        // Timeouts alone, with a normal median, are what one pause of the app looks like:
        // they cut only when the next window has them too.
        let bad = failing;
        let pause_like = bad && window.errors < MIN_ERRORS && !queueing;
        self.timing_out = if pause_like { self.timing_out + 1 } else { 0 };
        if bad {
            if pause_like && self.timing_out < 2 {
                return said(self.capacity, Change::Hold, Reason::Settling);
            }
            let again = self.drain.is_none_or(|d| rate > 2.0 * d.error_rate);
            if !again {
                return said(self.capacity, Change::Hold, Reason::Draining);
            }
            self.knee = Some((now, inside));
            let factor = (1.0 - 2.0 * rate).clamp(0.45, 0.9);
            return self.lower(inside, factor, now, rate, |c| {
                said(c, Change::Cut, Reason::Errors)
            });
        }
        if over || queueing {
            if self.drain.is_some() {
                return said(self.capacity, Change::Hold, Reason::Draining);
            }
            let p95 = p95.unwrap_or(target);
            if !queueing && self.over_target < 2 && p95 <= target * 2 {
                return said(self.capacity, Change::Hold, Reason::Settling);
            }
            // In proportion, but at most 30 %: a latency far over the target says a queue has
            // built up, which drains once the people inside are under the knee, not how far
            // over the knee they are.
            let factor = (target.as_secs_f64() / p95.as_secs_f64()).clamp(0.7, 0.9);
            // Not far below where the latency was last fine: the knee lies between the two,
            // and a tenth under it drains the app's queue. One use only: if that was not low
            // enough, the next back-off is in proportion.
            let mut to = inside * factor;
            if let Some((_, good)) = self
                .good
                .take()
                .filter(|&(at, _)| at + GOOD_MEMORY_MS >= now)
            {
                to = to.max(good * 0.9).min(inside * 0.95);
            }
            self.knee = Some((now, inside));
            let reason = if over {
                Reason::OverTarget
            } else {
                Reason::Queueing
            };
            return self.lower(to, 1.0, now, rate, |c| said(c, Change::BackOff, reason));
        }
        if self.drain.is_some() {
            return said(self.capacity, Change::Hold, Reason::Draining);
        }
        if let (Some(p50), true) = (p50, rate <= self.terms.error_budget) {
            self.healthy.push_back((now, p50));
            let recent = self.good.filter(|&(at, _)| at + GOOD_MEMORY_MS >= now);
            if recent.is_none_or(|(_, most)| inside >= most) {
                self.good = Some((now, inside));
            }
        }
        let headroom = p95.is_some_and(|p| p.as_secs_f64() <= 0.8 * target.as_secs_f64());
        if !headroom {
            return said(self.capacity, Change::Hold, Reason::InBand);
        }
        let why_not = if window.load.is_some_and(|l| l >= LOAD_HOLD) {
            Some(Reason::AppLoad)
        } else if window.waiting == 0 {
            Some(Reason::NoLine)
        } else if inside < 0.5 * f64::from(self.capacity) {
            Some(Reason::NotFull)
        } else if self.capacity >= self.terms.max {
            Some(Reason::AtBound)
        } else {
            None
        };
        if let Some(reason) = why_not {
            return said(self.capacity, Change::Hold, reason);
        }
        let grown = match self.phase {
            Phase::Start => (f64::from(self.capacity) * 1.5).min(inside * 1.5 + 1.0),
            Phase::Steady => {
                let c = f64::from(self.capacity);
                // Near where the latency last went wrong, in steps of 2 %: a step past the
                // knee builds a queue in proportion. Passing it without trouble forgets it
                // (the app got faster), as do five minutes.
                let knee = self
                    .knee
                    .filter(|&(at, _)| at + KNEE_MEMORY_MS >= now)
                    .map(|(_, level)| level);
                if knee.is_some_and(|k| inside > k * 1.05) {
                    self.knee = None;
                }
                let near = self.knee.is_some_and(|(_, k)| c * 1.05 > k * 0.97);
                let step = if near { 0.02 } else { 0.05 };
                c + (step * c).ceil().max(1.0)
            }
        };
        let capacity = self.bounded(grown);
        if capacity <= self.capacity {
            return said(self.capacity, Change::Hold, Reason::AtBound);
        }
        self.capacity = capacity;
        said(capacity, Change::Grow, Reason::Headroom)
    }

    /// Lowers the capacity to `inside × factor` (never raising it), and starts a drain.
    fn lower(
        &mut self,
        inside: f64,
        factor: f64,
        now: u64,
        rate: f64,
        said: impl Fn(u32) -> Decision,
    ) -> Decision {
        self.phase = Phase::Steady;
        self.over_target = 0;
        let lowered = self.bounded(inside * factor).min(self.capacity);
        // A step under 1 % is not worth a write, nor a drain.
        if f64::from(self.capacity - lowered) < (f64::from(self.capacity) * 0.01).max(1.0) {
            return Decision {
                change: Change::Hold,
                reason: Reason::AtBound,
                ..said(self.capacity)
            };
        }
        self.capacity = lowered;
        let window_ms = u64::try_from(self.terms.window.as_millis()).unwrap_or(u64::MAX);
        self.drain = Some(Drain {
            capacity: lowered,
            until_ms: now.saturating_add(window_ms.saturating_mul(3).saturating_add(30_000)),
            error_rate: rate,
            down_since: None,
            last_p95: None,
        });
        said(lowered)
    }

    fn bounded(&self, capacity: f64) -> u32 {
        let floor = if capacity.is_finite() {
            capacity.floor()
        } else {
            0.0
        };
        (floor.clamp(0.0, f64::from(u32::MAX)) as u32).clamp(self.terms.min, self.terms.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: Duration = Duration::from_millis(300);

    fn terms() -> AutoCapacity {
        AutoCapacity::new(10, 1_000, TARGET)
    }

    /// A window ending at `end_s` with `ok` requests at `latency`, `errors` failed, `inside`
    /// people in and some waiting.
    fn window(end_s: u64, ok: u64, latency_ms: u64, errors: u64, inside: f64) -> Window {
        let mut w = Window {
            start_ms: (end_s - 5) * 1000,
            end_ms: end_s * 1000,
            ok,
            errors,
            inside,
            waiting: 100,
            ..Window::default()
        };
        w.latencies.record_n(Duration::from_millis(latency_ms), ok);
        w
    }

    #[test]
    fn it_grows_fast_from_the_start_then_by_five_percent_and_never_past_max() {
        let mut c = Controller::new(terms(), 10);
        let mut seen = vec![c.capacity()];
        for i in 1..=12 {
            let inside = f64::from(c.capacity());
            seen.push(c.decide(&window(i * 5, 500, 50, 0, inside)).capacity);
        }
        assert_eq!(&seen[..4], [10, 15, 22, 33]);
        assert_eq!(*seen.last().unwrap(), 1_000, "{seen:?}");
        let d = c.decide(&window(62, 500, 50, 0, 1_000.0));
        assert_eq!((d.change, d.reason), (Change::Hold, Reason::AtBound));
        // A back-off ends the start: to a tenth under the last healthy window (1 000 inside),
        // not to the 70 % the latency alone would say.
        let d = c.decide(&window(65, 500, 900, 0, 1_000.0));
        assert_eq!(
            (d.change, d.reason, d.capacity),
            (Change::BackOff, Reason::OverTarget, 900)
        );
        // Then 5 % a window, once the people inside are down to it and the latency is fine.
        let d = c.decide(&window(200, 500, 50, 0, 900.0));
        assert_eq!((d.change, d.capacity), (Change::Grow, 945));
        // Near where it went wrong (1 000 inside), 2 % a window.
        let d = c.decide(&window(205, 500, 50, 0, 945.0));
        assert_eq!((d.change, d.capacity), (Change::Grow, 964));
    }

    #[test]
    fn one_slow_window_is_not_a_reason_to_back_off_and_no_step_is_a_collapse() {
        let mut c = Controller::new(terms(), 400);
        let d = c.decide(&window(5, 500, 500, 0, 400.0));
        assert_eq!(
            (d.change, d.reason, d.capacity),
            (Change::Hold, Reason::Settling, 400)
        );
        // A pause read as a 60 s latency: one step of 30 % at most, then hold while it drains.
        let d = c.decide(&window(10, 500, 60_000, 0, 400.0));
        assert_eq!((d.change, d.capacity), (Change::BackOff, 280));
        for i in 3..=8 {
            let d = c.decide(&window(i * 5, 500, 60_000, 0, 390.0));
            assert_eq!(
                (d.change, d.reason),
                (Change::Hold, Reason::Draining),
                "window {i}"
            );
        }
        // Timeouts alone, with a normal median, are a pause until the next window has them.
        let mut c = Controller::new(terms(), 400);
        let mut paused = window(5, 900, 50, 0, 400.0);
        paused.timeouts = 100;
        assert_eq!(c.decide(&paused).reason, Reason::Settling);
        paused.end_ms += 5_000;
        let d = c.decide(&paused);
        assert_eq!((d.change, d.capacity), (Change::Cut, 320));
    }

    #[test]
    fn errors_cut_at_once_but_a_few_do_not() {
        let mut c = Controller::new(terms(), 400);
        let d = c.decide(&window(5, 996, 50, 4, 400.0));
        assert_ne!(d.change, Change::Cut, "4 errors are no signal");
        let d = c.decide(&window(10, 900, 50, 100, 400.0));
        assert_eq!((d.change, d.reason), (Change::Cut, Reason::Errors));
        assert_eq!(d.capacity, 320, "10 % errors: 400 x 0.8");
        // The same rate again while draining: hold; more than twice the rate: cut again, at
        // most to 45 % of the people inside.
        let d = c.decide(&window(15, 900, 50, 100, 390.0));
        assert_eq!(d.reason, Reason::Draining);
        let d = c.decide(&window(20, 700, 50, 300, 380.0));
        assert_eq!((d.change, d.capacity), (Change::Cut, 171));
    }

    #[test]
    fn few_samples_are_carried_and_decided_on_together() {
        let mut c = Controller::new(terms(), 100);
        for i in 1..=2 {
            let d = c.decide(&window(i * 5, 20, 900, 0, 100.0));
            assert_eq!(d.reason, Reason::FewSamples);
        }
        // Sixty requests over three windows: enough, and all over twice the target.
        let d = c.decide(&window(15, 20, 900, 0, 100.0));
        assert_eq!((d.change, d.samples), (Change::BackOff, 60));
        // A quiet room decides after six windows on what it has.
        let mut c = Controller::new(terms(), 100);
        let decisions: Vec<_> = (1..=6)
            .map(|i| c.decide(&window(i * 5, 2, 50, 0, 100.0)).reason)
            .collect();
        assert_eq!(decisions[..5], [Reason::FewSamples; 5]);
        assert_eq!(decisions[5], Reason::Headroom);
        // Twenty requests well within the target are enough to grow on.
        let mut c = Controller::new(terms(), 100);
        assert_eq!(c.decide(&window(5, 20, 50, 0, 100.0)).change, Change::Grow);
    }

    #[test]
    fn no_growth_without_a_line_a_full_room_or_an_app_with_room() {
        let mut c = Controller::new(terms(), 100);
        let mut w = window(5, 500, 50, 0, 100.0);
        w.waiting = 0;
        assert_eq!(c.decide(&w).reason, Reason::NoLine);
        assert_eq!(
            c.decide(&window(10, 500, 50, 0, 40.0)).reason,
            Reason::NotFull
        );
        let mut w = window(15, 500, 50, 0, 100.0);
        w.load = Some(90);
        assert_eq!(c.decide(&w).reason, Reason::AppLoad);
        assert_eq!(c.capacity(), 100);
        // A median four times the ideal: a queue forming, even under the target.
        let d = c.decide(&window(20, 500, 200, 0, 100.0));
        assert_eq!(
            (d.change, d.reason, d.capacity),
            (Change::BackOff, Reason::Queueing, 90)
        );
    }

    #[test]
    fn the_ideal_latency_forgets_after_ten_minutes_and_stays_under_half_the_target() {
        let mut c = Controller::new(terms(), 100);
        c.decide(&window(5, 500, 20, 0, 10.0));
        let early = c.ideal().unwrap();
        assert!(early < Duration::from_millis(25), "{early:?}");
        c.decide(&window(700, 500, 140, 0, 10.0));
        let later = c.ideal().unwrap();
        assert!(later >= Duration::from_millis(140), "{later:?}");
        let mut slow = Controller::new(AutoCapacity::new(1, 10, Duration::from_millis(100)), 5);
        slow.decide(&window(5, 500, 90, 0, 1.0));
        assert_eq!(
            slow.ideal(),
            Some(Duration::from_millis(50)),
            "at most half the target"
        );
        let mut failing = Controller::new(terms(), 100);
        failing.decide(&window(5, 900, 20, 100, 100.0));
        assert_eq!(
            failing.ideal(),
            None,
            "a window over the error budget is not healthy"
        );
    }

    #[test]
    fn a_clock_that_jumps_moves_no_step_past_its_bounds() {
        // Settled near a knee (a back-off at 420 people inside), then windows whose end jumps
        // an hour ahead and two hours back: the store's clock the windows are binned by is
        // not the request latencies' (those are monotonic), so a jump can only age or keep
        // what the controller remembers; no decision steps more than the law's bounds.
        let mut c = Controller::new(terms(), 400);
        c.decide(&window(5, 500, 50, 0, 400.0));
        c.decide(&window(10, 500, 900, 0, 420.0));
        let mut before = c.capacity();
        for end_s in [4_000, 4_005, 4_010, 200, 205, 210, 215, 220] {
            let d = c.decide(&window(end_s, 500, 50, 0, f64::from(before)));
            let step = f64::from(d.capacity) / f64::from(before);
            assert!(
                (0.7..=1.06).contains(&step),
                "{end_s}: {before} -> {}",
                d.capacity
            );
            before = d.capacity;
        }
        let d = c.decide(&window(225, 500, 60_000, 0, f64::from(before)));
        assert!(f64::from(d.capacity) >= 0.7 * f64::from(before), "{d:?}");
    }
}
