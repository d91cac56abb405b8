//! What the controller of a room is doing, as an operator sees it ([`AutoStatus`]), and the
//! decision as the store keeps it for every gateway to show: a line of text the deciding
//! gateway writes with its decision, read back by the others (a line that cannot be read is no
//! decision, never an error).

use std::time::Duration;

use serde::Serialize;

use super::{AutoCapacity, Change, Decision, Reason};
use crate::store::AutoOff;

/// What the controller of a room is doing, as an operator sees it (in the admin's JSON,
/// `"auto"`). Every gateway shows the room's one controller: its own decision when it decides,
/// else the one the deciding gateway last wrote to the store.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AutoStatus {
    /// Whether it moves the capacity.
    pub enabled: bool,
    /// Whether this gateway is the one deciding (it holds the room's lease).
    pub deciding: bool,
    /// The lowest capacity it may set.
    pub min: u32,
    /// The highest.
    pub max: u32,
    /// The p95 it aims at, in ms.
    pub target_ms: u64,
    /// The share of errors it tolerates.
    pub error_budget: f64,
    /// How long its windows last, in ms.
    pub window_ms: u64,
    /// Whether the admission rate follows the capacity
    /// ([`AutoCapacity::rate_follows`]).
    pub rate_follows: bool,
    /// The last decided window's p95 of admitted requests, in ms.
    pub p95_ms: Option<u64>,
    /// Its median, in ms.
    pub p50_ms: Option<u64>,
    /// Its share of errors and timeouts.
    pub error_rate: Option<f64>,
    /// Its requests.
    pub samples: u64,
    /// The capacity it last decided.
    pub capacity: Option<u32>,
    /// How that moved the capacity.
    pub change: Option<Change>,
    /// Why, in snake case: the last decision's [`Reason`], or why it is off
    /// ([`AutoOff`]: `set_by_hand`, `changed_elsewhere`).
    pub reason: Option<&'static str>,
}

impl AutoStatus {
    pub(crate) fn new(
        terms: &AutoCapacity,
        off: Option<AutoOff>,
        deciding: bool,
        last: Option<Decision>,
    ) -> Self {
        AutoStatus {
            enabled: off.is_none(),
            deciding,
            min: terms.get_min(),
            max: terms.get_max(),
            target_ms: ms(terms.get_target_p95()),
            error_budget: terms.get_error_budget(),
            window_ms: ms(terms.get_window()),
            rate_follows: terms.get_rate_follows(),
            p95_ms: last.and_then(|d| d.p95).map(ms),
            p50_ms: last.and_then(|d| d.p50).map(ms),
            error_rate: last.map(|d| d.error_rate),
            samples: last.map_or(0, |d| d.samples),
            capacity: last.map(|d| d.capacity),
            change: last.map(|d| d.change),
            reason: off.map(AutoOff::as_str).or(last.map(|d| d.reason.as_str())),
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The first word of a written decision: its format's version.
const FORMAT: &str = "d1";

/// A decision as the store keeps it: `d1 <capacity> <change> <reason> <p95 ms> <p50 ms>
/// <error rate> <samples>`, a latency not measured written `-`.
pub(crate) fn write(decision: &Decision) -> String {
    let latency = |d: Option<Duration>| d.map_or_else(|| "-".to_owned(), |d| ms(d).to_string());
    format!(
        "{FORMAT} {} {} {} {} {} {:.6} {}",
        decision.capacity,
        decision.change.as_str(),
        decision.reason.as_str(),
        latency(decision.p95),
        latency(decision.p50),
        decision.error_rate,
        decision.samples,
    )
}

/// A decision [`write`] wrote; `None` for anything else (another format, damage).
pub(crate) fn read(text: &str) -> Option<Decision> {
    let mut words = text.split(' ');
    let mut next = || words.next();
    if next()? != FORMAT {
        return None;
    }
    let capacity = next()?.parse().ok().filter(|&c| c > 0)?;
    let change = Change::parse(next()?)?;
    let reason = Reason::parse(next()?)?;
    let latency = |w: &str| match w {
        "-" => Some(None),
        w => w.parse().ok().map(|ms| Some(Duration::from_millis(ms))),
    };
    let p95 = latency(next()?)?;
    let p50 = latency(next()?)?;
    let error_rate = next()?
        .parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))?;
    let samples = next()?.parse().ok()?;
    if next().is_some() {
        return None;
    }
    Some(Decision {
        capacity,
        change,
        reason,
        p95,
        p50,
        error_rate,
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_decision_reads_back_and_damage_reads_as_none() {
        let decision = Decision {
            capacity: 420,
            change: Change::BackOff,
            reason: Reason::OverTarget,
            p95: Some(Duration::from_millis(512)),
            p50: None,
            error_rate: 0.0125,
            samples: 9_001,
        };
        let text = write(&decision);
        assert_eq!(text, "d1 420 back_off over_target 512 - 0.012500 9001");
        assert!(text.len() <= crate::store::MAX_AUTO_STATUS);
        assert_eq!(read(&text), Some(decision));
        for bad in [
            "",
            "d2 420 back_off over_target 512 - 0.0125 9001",
            "d1 0 back_off over_target 512 - 0.0125 9001",
            "d1 420 sideways over_target 512 - 0.0125 9001",
            "d1 420 back_off over_target 512 - 1.5 9001",
            "d1 420 back_off over_target 512 - NaN 9001",
            "d1 420 back_off over_target inf - 0.0125 9001",
            "d1 420 back_off over_target 512 - 0.0125",
            "d1 420 back_off over_target 512 - 0.0125 9001 more",
        ] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
    }
}
