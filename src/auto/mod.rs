//! Capacity that follows the app's health: [`AutoCapacity`] (the operator's bounds, latency
//! target and error budget), the measurements of one window of admitted requests ([`Window`],
//! with its [`LatencyHistogram`]), and the [`Controller`] that turns a window into the next
//! capacity ([`Decision`]).
//!
//! The controller moves how many *people* are inside, each making many requests for minutes,
//! not how many requests are in flight: so it decides on windows of seconds, and a cut acts
//! only as people leave (nobody inside is ever sent out). Its law, in the order it is read:
//!
//! - **too few samples** (under 50 requests; under 20 when every one was well within the
//!   target, enough to grow on): the window is carried into the next one, up to six;
//! - **errors over the budget** (5xx, and requests past the timeout; at least 5 of them): cut
//!   from the number of people inside, by twice the error rate (at least 10 %, at most 55 %).
//!   Timeouts alone with a normal median are what a pause of the app looks like: they cut only
//!   if the next window has them too;
//! - **a queue forming** (the median above twice the ideal latency), or **the p95 over the
//!   target** for two windows running (one, when over twice the target): back off, to the
//!   people inside times target / p95 (at least 10 %, at most 30 %: a latency far over the
//!   target says a queue has built up, not how far past the knee the room is), but not below
//!   a tenth under the most people inside a healthy window of the last 30 s (the knee lies
//!   between the two);
//! - **while a cut drains** (more people inside than it allows, for up to three windows and
//!   30 s; or down to it but for less than a window): hold, so that one slow spell is not cut
//!   again and again while people leave. Errors more than twice those of the cut cut again;
//! - **p95 well under the target** (under 80 % of it) with people waiting, the room at least
//!   half full and the app's reported load (if any) under 85: grow, by half per window from
//!   the start until the first back-off (a start at `min` reaches the knee in seconds), then
//!   by 5 % per window, and by 2 % near where the latency last went wrong (remembered five
//!   minutes, forgotten once passed without trouble);
//! - otherwise hold. The capacity stays within `[min, max]`, and a step under 1 % is not taken.
//!
//! The ideal latency is the lowest median of the healthy windows (errors within budget, p95
//! under the target, no cut draining) of the last ten minutes, capped at half the target. It
//! is learned from windows that are light anyway, never by cutting capacity to measure it:
//! here a cut stalls the line for as long as people take to leave.
//!
//! A room runs it with [`auto_capacity`](crate::WaitingRoomBuilder::auto_capacity): the layer
//! measures the admitted requests it passes to the app (their latency from the call to the
//! response's head, their class, and the load the app says in
//! [`APP_LOAD_HEADER`](crate::config::defaults::APP_LOAD_HEADER); a proxy between the room and
//! the app may say more of an answer, [`Measured`]), and every gateway reports
//! its counts to the store about once a second; the one gateway holding the room's lease is
//! handed the merged window, decides, and writes the capacity to the store, where every
//! gateway reads it ([`AutoStore`](crate::store::AutoStore) has the rules). An operator who
//! sets the capacity by hand turns it off for every gateway
//! ([`RoomControl::auto`](crate::control::RoomControl::auto),
//! [`resume_auto`](crate::control::RoomControl::resume_auto)).
//! The controller also runs on its own: feed it windows and apply its decisions with
//! [`RoomControl::set_capacity`](crate::control::RoomControl::set_capacity).
//! The design it follows (Envoy's adaptive concurrency, Netflix's Gradient2 and Vegas,
//! Vector's adaptive request concurrency, and the failures their users reported) is in
//! `docs/auto-capacity.md`.

mod histogram;
mod law;
mod measured;
#[cfg(test)]
mod sim;
mod stage;
mod status;

use std::fmt;
use std::time::Duration;

pub use self::histogram::LatencyHistogram;
pub use self::law::{Change, Controller, Decision, Reason};
pub use self::measured::Measured;
pub(crate) use self::stage::{AutoStage, Sampled};
pub use self::status::AutoStatus;
use crate::ConfigError;

/// The operator's terms for a room whose capacity follows the app: bounds, a latency target
/// for the admitted requests' p95, and an error budget.
///
/// ```
/// use std::time::Duration;
/// use tower_waiting_room::auto::AutoCapacity;
///
/// let auto = AutoCapacity::new(50, 5_000, Duration::from_millis(300))
///     .error_budget(0.01)
///     .window(Duration::from_secs(5));
/// assert!(auto.check().is_ok());
/// assert!(AutoCapacity::new(10, 5, Duration::from_millis(300)).check().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoCapacity {
    min: u32,
    max: u32,
    target_p95: Duration,
    error_budget: f64,
    window: Duration,
    rate_follows: bool,
}

impl AutoCapacity {
    /// Capacity between `min` and `max`, aiming at a p95 of admitted requests no slower than
    /// `target_p95`; an error budget of 1 % and windows of 5 s unless changed.
    pub const fn new(min: u32, max: u32, target_p95: Duration) -> Self {
        Self {
            min,
            max,
            target_p95,
            error_budget: 0.01,
            window: Duration::from_secs(5),
            rate_follows: false,
        }
    }

    /// The share of admitted requests that may fail (5xx, or past the timeout) before the
    /// controller cuts: between 0 and 1, exclusive.
    pub const fn error_budget(mut self, share: f64) -> Self {
        self.error_budget = share;
        self
    }

    /// How long each window of measurements lasts: 1 to 60 seconds.
    pub const fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Whether the room's admission rate, if it has one, follows the capacity the controller
    /// sets, in the proportion the room was built with (its `admission_rate` over its
    /// `capacity`): a capacity cut by a third lets people in a third slower too. Off by
    /// default: an admission rate is often a limit of its own (a payment provider's), not a
    /// share of the capacity. The rate follows only while it is the one that proportion gives
    /// for the room's capacity: a rate an operator set otherwise is left as it is.
    pub const fn rate_follows(mut self, follows: bool) -> Self {
        self.rate_follows = follows;
        self
    }

    /// Whether the admission rate follows the capacity.
    pub const fn get_rate_follows(&self) -> bool {
        self.rate_follows
    }

    /// The lowest capacity.
    pub const fn get_min(&self) -> u32 {
        self.min
    }

    /// The highest capacity.
    pub const fn get_max(&self) -> u32 {
        self.max
    }

    /// The p95 latency aimed at.
    pub const fn get_target_p95(&self) -> Duration {
        self.target_p95
    }

    /// The error budget.
    pub const fn get_error_budget(&self) -> f64 {
        self.error_budget
    }

    /// The window's length.
    pub const fn get_window(&self) -> Duration {
        self.window
    }

    /// A request slower than this counts as a timeout, an error: five times the target, and
    /// at least 2 s.
    pub fn timeout(&self) -> Duration {
        (self.target_p95 * 5).max(Duration::from_secs(2))
    }

    /// `Err` with what is wrong when the controller cannot run with these terms.
    pub fn check(&self) -> Result<(), ConfigError> {
        let why = if self.min == 0 {
            "min must be at least 1"
        } else if self.min > self.max {
            "min is above max"
        } else if self.target_p95.is_zero() {
            "the latency target must be more than zero"
        } else if !(self.error_budget > 0.0 && self.error_budget < 1.0) {
            "the error budget must be between 0 and 1, exclusive"
        } else if self.window < Duration::from_secs(1) || self.window > Duration::from_secs(60) {
            "the window must be from 1 to 60 seconds"
        } else {
            return Ok(());
        };
        Err(ConfigError::InvalidAutoCapacity { why })
    }
}

/// The terms as a room's settings file writes them (`auto_capacity = "..."`):
/// `20-2000, p95 300ms, errors 1%, window 5000ms` (and `, rate follows` when it does),
/// latencies to the millisecond. What a store
/// keeps of terms an operator set while the room runs, read back with [`FromStr`](std::str::FromStr).
impl fmt::Display for AutoCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}, p95 {}ms, errors {}%, window {}ms",
            self.min,
            self.max,
            self.target_p95.as_millis(),
            self.error_budget * 100.0,
            self.window.as_millis()
        )?;
        if self.rate_follows {
            f.write_str(", rate follows")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for AutoCapacity {
    type Err = String;

    /// Terms as a settings file writes them ([`Display`](fmt::Display) writes them so);
    /// `"off"` is none, and so an error here. Not checked: see [`check`](Self::check).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::config::readable::parse_auto_capacity(s)?.ok_or_else(|| "off is no terms".to_owned())
    }
}

/// What the layer measured of the admitted requests of one window, on one gateway or merged
/// across gateways.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Window {
    /// When the window began, in the store's milliseconds.
    pub start_ms: u64,
    /// When it ended.
    pub end_ms: u64,
    /// Requests answered with a status below 500 (other than 429), within the timeout.
    pub ok: u64,
    /// Requests answered 5xx or 429, or failed by the app's service.
    pub errors: u64,
    /// Requests answered after the timeout, or still unanswered when it passed.
    pub timeouts: u64,
    /// The latencies of the `ok` requests, from the call to the response head.
    pub latencies: LatencyHistogram,
    /// People inside, on average over the window.
    pub inside: f64,
    /// People waiting in line at its end.
    pub waiting: u64,
    /// The highest load the app reported (0 to 100), if it reports one.
    pub load: Option<u8>,
}

impl Window {
    /// Requests counted.
    pub fn samples(&self) -> u64 {
        // Saturating, here and below: counts come from the store, where a damaged key can hold
        // any number, and from callers; a sum past `u64::MAX` is no reason to panic.
        self.ok
            .saturating_add(self.errors)
            .saturating_add(self.timeouts)
    }

    /// The share of requests that failed or timed out.
    pub fn error_rate(&self) -> f64 {
        let all = self.samples();
        if all == 0 {
            0.0
        } else {
            self.errors.saturating_add(self.timeouts) as f64 / all as f64
        }
    }

    /// This window followed by `later`: counts added, people inside averaged over the time.
    pub fn merge(&mut self, later: &Window) {
        let (mine, theirs) = (self.span_ms() as f64, later.span_ms() as f64);
        self.inside = if mine + theirs > 0.0 {
            (self.inside * mine + later.inside * theirs) / (mine + theirs)
        } else {
            later.inside
        };
        if self.samples() == 0 && mine == 0.0 {
            self.start_ms = later.start_ms;
        }
        self.end_ms = self.end_ms.max(later.end_ms);
        self.ok = self.ok.saturating_add(later.ok);
        self.errors = self.errors.saturating_add(later.errors);
        self.timeouts = self.timeouts.saturating_add(later.timeouts);
        self.latencies.merge(&later.latencies);
        self.waiting = later.waiting;
        self.load = match (self.load, later.load) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    fn span_ms(&self) -> u64 {
        self.end_ms.saturating_sub(self.start_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts of any size (a caller's, or a store's damaged record) add up without a panic or
    /// a wrap to a small number: past `u64::MAX` they stay there.
    #[test]
    fn counts_past_the_largest_number_stay_at_it() {
        let huge = Window {
            ok: u64::MAX,
            errors: u64::MAX - 1,
            timeouts: 3,
            end_ms: 10,
            ..Window::default()
        };
        assert_eq!(huge.samples(), u64::MAX);
        let mut merged = huge.clone();
        merged
            .latencies
            .record_n(Duration::from_millis(5), u64::MAX);
        merged.merge(&huge);
        merged.merge(&merged.clone());
        assert_eq!((merged.ok, merged.errors), (u64::MAX, u64::MAX));
        assert_eq!(merged.samples(), u64::MAX);
        assert!((0.0..=1.0).contains(&merged.error_rate()));
        assert_eq!(merged.latencies.count(), u64::MAX);
        assert_eq!(
            merged.latencies.quantile(0.5),
            merged.latencies.quantile(0.0),
            "one bucket holds them all"
        );
    }

    #[test]
    fn terms_the_controller_cannot_run_with_are_refused() {
        let ms = Duration::from_millis;
        let good = AutoCapacity::new(1, 1, ms(1));
        assert_eq!(good.check(), Ok(()));
        for bad in [
            AutoCapacity::new(0, 10, ms(300)),
            AutoCapacity::new(11, 10, ms(300)),
            AutoCapacity::new(1, 10, Duration::ZERO),
            good.error_budget(0.0),
            good.error_budget(1.0),
            good.error_budget(f64::NAN),
            good.window(ms(999)),
            good.window(Duration::from_secs(61)),
        ] {
            assert!(
                matches!(bad.check(), Err(ConfigError::InvalidAutoCapacity { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(good.timeout(), Duration::from_secs(2));
        assert_eq!(
            AutoCapacity::new(1, 2, ms(1_000)).timeout(),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn terms_written_read_back_as_they_were() {
        let ms = Duration::from_millis;
        for terms in [
            AutoCapacity::new(20, 2_000, ms(300)),
            AutoCapacity::new(1, 1, ms(1))
                .error_budget(0.025)
                .window(ms(60_000)),
            AutoCapacity::new(5, 4_000_000_000, ms(1_500)).error_budget(0.07),
            AutoCapacity::new(5, 50, ms(300)).rate_follows(true),
        ] {
            let text = terms.to_string();
            let back: AutoCapacity = text.parse().unwrap();
            assert_eq!(back, terms, "{text}");
        }
        assert_eq!(
            AutoCapacity::new(20, 2_000, ms(300)).to_string(),
            "20-2000, p95 300ms, errors 1%, window 5000ms"
        );
        assert!("off".parse::<AutoCapacity>().is_err());
        assert!("20-2000".parse::<AutoCapacity>().is_err());
    }

    #[test]
    fn merged_windows_add_counts_and_average_the_people_inside_over_time() {
        let mut a = Window {
            start_ms: 0,
            end_ms: 5_000,
            ok: 10,
            inside: 100.0,
            load: Some(40),
            ..Window::default()
        };
        let b = Window {
            start_ms: 5_000,
            end_ms: 15_000,
            ok: 5,
            errors: 5,
            inside: 40.0,
            waiting: 7,
            ..Window::default()
        };
        a.merge(&b);
        assert_eq!(
            (a.start_ms, a.end_ms, a.samples(), a.waiting),
            (0, 15_000, 20, 7)
        );
        assert!((a.inside - 60.0).abs() < 1e-9);
        assert!((a.error_rate() - 0.25).abs() < 1e-9);
        assert_eq!(a.load, Some(40));
    }
}
