//! The simulation's figures: what a run's estimates score against the real waits, its table
//! row, what it misses of a set of targets, and the trace of where it errs.

use super::{Figures, Phase, Poll, Run, Shown, Targets, Visitor, TARGETS};
use crate::common::Jar;

pub(super) fn share(hits: usize, of: usize) -> f64 {
    if of == 0 {
        f64::NAN
    } else {
        hits as f64 / of as f64
    }
}

impl Run {
    /// The estimates scored for accuracy: shown to a visitor who was let in, and not before an
    /// unannounced change that their wait outlasted.
    pub(super) fn scored(&self) -> impl Iterator<Item = &Shown> {
        self.shown.iter().filter(|s| {
            self.visitors[s.visitor]
                .admitted_at
                .is_some_and(|admitted_at| {
                    !self.changes.iter().any(|&c| s.at < c && c < admitted_at)
                })
        })
    }

    /// The share of the scored estimates short of the real wait by more than `secs` seconds.
    pub(super) fn short_by_more_than(&self, secs: u64) -> f64 {
        let (mut short, mut all) = (0, 0);
        for s in self.scored() {
            let real = self.visitors[s.visitor].admitted_at.unwrap_or(s.at) - s.at;
            all += 1;
            if s.eta + secs < real {
                short += 1;
            }
        }
        share(short, all)
    }

    pub(super) fn figures(&self) -> Figures {
        let mut at_least = 0;
        let mut not_optimistic = 0;
        let mut errors = Vec::new();
        let mut ranged = 0;
        let mut within = 0;
        let (mut all_at_least, mut all_scored) = (0, 0);
        for s in &self.shown {
            let Some(admitted_at) = self.visitors[s.visitor].admitted_at else {
                continue; // gave up: no real wait to compare with
            };
            let real = admitted_at - s.at;
            all_scored += 1;
            if s.eta >= real {
                all_at_least += 1;
            }
            if self.changes.iter().any(|&c| s.at < c && c < admitted_at) {
                // Shown before a change nobody announced, for a wait that outlasted it: no
                // estimate could have known; published in the "all" column, not scored.
                continue;
            }
            if s.eta >= real {
                at_least += 1;
            }
            if s.eta + self.grain >= real {
                not_optimistic += 1;
            }
            errors.push(s.eta.abs_diff(real) as f64 / real.max(10) as f64);
            if let (Some(low), Some(high)) = (s.low, s.high) {
                ranged += 1;
                if (low..=high).contains(&real) {
                    within += 1;
                }
            }
        }
        errors.sort_by(f64::total_cmp);
        let median = if errors.is_empty() {
            f64::NAN
        } else if errors.len() % 2 == 1 {
            errors[errors.len() / 2]
        } else {
            (errors[errors.len() / 2 - 1] + errors[errors.len() / 2]) / 2.0
        };
        let late: Vec<&Poll> = self
            .polls
            .iter()
            .filter(|p| p.waited >= 15 && !p.paused)
            .collect();
        let late_shown = late.iter().filter(|p| p.estimate).count();
        Figures {
            visitors: self.visitors.len(),
            all_at_least_real: share(all_at_least, all_scored),
            scored: errors.len(),
            at_least_real: share(at_least, errors.len()),
            not_optimistic: share(not_optimistic, errors.len()),
            median_rel_error: median,
            late_polls: late.len(),
            shown_after_15s: share(late_shown, late.len()),
            ranged,
            within_range: (ranged > 0).then(|| share(within, ranged)),
            seconds: self.seconds,
        }
    }
}

pub(super) fn pct(x: f64) -> String {
    if x.is_nan() {
        "-".to_owned()
    } else {
        format!("{:.1} %", 100.0 * x)
    }
}

impl Figures {
    /// The table row (with its header, so that rows printed by tests running in parallel stay
    /// readable).
    pub(super) fn row(&self, name: &str) -> String {
        format!(
            "| scenario | visitors | estimates | >= real | not optimistic | >= real, all | median rel. error | shown after 15 s | within range | simulated |\n\
             |---|---|---|---|---|---|---|---|---|---|\n\
             | {name} | {} | {} | {} | {} | {} | {} | {} (of {}) | {} | {} s |",
            self.visitors,
            self.scored,
            pct(self.at_least_real),
            pct(self.not_optimistic),
            pct(self.all_at_least_real),
            pct(self.median_rel_error),
            pct(self.shown_after_15s),
            self.late_polls,
            self.within_range
                .map_or_else(|| "no range".to_owned(), |w| format!("{} (of {})", pct(w), self.ranged)),
            self.seconds,
        )
    }

    /// The targets missed, in words.
    pub(super) fn misses(&self, t: &Targets) -> Vec<String> {
        let mut misses = Vec::new();
        if self.at_least_real.is_nan() || self.at_least_real < t.at_least_real {
            misses.push(format!(
                ">= real {} < {}",
                pct(self.at_least_real),
                pct(t.at_least_real)
            ));
        }
        if self.not_optimistic.is_nan() || self.not_optimistic < t.not_optimistic {
            misses.push(format!(
                "not optimistic {} < {}",
                pct(self.not_optimistic),
                pct(t.not_optimistic)
            ));
        }
        if self.median_rel_error.is_nan() || self.median_rel_error > t.median_rel_error {
            misses.push(format!(
                "median rel. error {} > {}",
                pct(self.median_rel_error),
                pct(t.median_rel_error)
            ));
        }
        if self.shown_after_15s.is_nan() || self.shown_after_15s < t.shown_after_15s {
            misses.push(format!(
                "shown after 15 s {} < {}",
                pct(self.shown_after_15s),
                pct(t.shown_after_15s)
            ));
        }
        if let (Some(target), Some(within)) = (t.within_range, self.within_range) {
            if within < target {
                misses.push(format!("within range {} < {}", pct(within), pct(target)));
            }
        }
        misses
    }
}

/// With `ETA_SIM_TRACE` set: the scored estimates per half minute of showing (how many, the
/// share >= real, the median error and the median eta / real), to see where an estimator errs;
/// with `ETA_SIM_TRACE_ALL` too, every estimate shown on a whole ten seconds and every visitor.
pub(super) fn trace(run: &Run) {
    if std::env::var_os("ETA_SIM_TRACE").is_none() {
        return;
    }
    let all = std::env::var_os("ETA_SIM_TRACE_ALL").is_some();
    let mut by_half_minute: std::collections::BTreeMap<u64, Vec<(u64, u64, f64)>> =
        Default::default();
    for s in run.scored() {
        let real = run.visitors[s.visitor].admitted_at.unwrap() - s.at;
        by_half_minute
            .entry(s.at / 30)
            .or_default()
            .push((s.eta, real, likely(s)));
        if all && s.at % 10 == 0 {
            println!(
                "    at {} visitor {} position {} eta {} real {real}",
                s.at, s.visitor, s.position, s.eta
            );
        }
    }
    if all {
        for (i, v) in run.visitors.iter().enumerate() {
            println!(
                "    visitor {i} arrived {} admitted {:?} gives up {:?}",
                v.arrived, v.admitted_at, v.gives_up_at
            );
        }
    }
    let median = |mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    for (half, v) in by_half_minute {
        let at_least = v.iter().filter(|(eta, real, _)| eta >= real).count();
        let error = median(
            v.iter()
                .map(|&(e, r, _)| e.abs_diff(r) as f64 / r.max(10) as f64)
                .collect(),
        );
        let ratio = median(
            v.iter()
                .map(|&(e, r, _)| e as f64 / r.max(1) as f64)
                .collect(),
        );
        let likely = median(v.iter().map(|&(_, r, l)| l / r.max(1) as f64).collect());
        println!(
            "  {:>5} s: {:>5} shown, {:>5.1} % >= real, median error {:>5.1} %, eta / real {ratio:.2}, likely / real {likely:.2}",
            half * 30,
            v.len(),
            100.0 * at_least as f64 / v.len() as f64,
            100.0 * error
        );
    }
}

/// The estimate's most likely wait, before its margin: the shown value adds `MARGIN_Z` (0.75)
/// of the spread and the range's top two, so the likely is the shown less 0.6 of their gap
/// (to the second's rounding of each).
fn likely(s: &Shown) -> f64 {
    let margin = tower_waiting_room::eta::MARGIN_Z;
    match s.high {
        Some(high) => s.eta as f64 - margin / (2.0 - margin) * high.saturating_sub(s.eta) as f64,
        None => s.eta as f64,
    }
}

/// The arithmetic of the figures, on a hand-made run: what each share counts.
#[test]
fn figures_count_what_they_say() {
    let visitor = |arrived, admitted_at: Option<u64>| Visitor {
        arrived,
        jar: Jar::new(),
        phase: if admitted_at.is_some() {
            Phase::Left
        } else {
            Phase::GaveUp
        },
        gives_up_at: None,
        admitted_at,
    };
    let shown = |visitor, at, eta, range: Option<(u64, u64)>| Shown {
        visitor,
        at,
        eta,
        position: 1,
        low: range.map(|r| r.0),
        high: range.map(|r| r.1),
    };
    let poll = |waited, estimate, paused| Poll {
        waited,
        estimate,
        paused,
    };
    let run = Run {
        changes: Vec::new(),
        grain: 1,
        // Visitor 0 is let in at 100 s, visitor 1 gives up.
        visitors: vec![visitor(0, Some(100)), visitor(0, None)],
        shown: vec![
            shown(0, 0, 120, Some((80, 130))), // real 100: >=, error 20 %, in range
            shown(0, 50, 40, Some((55, 60))),  // real 50: short, error 20 %, out of range
            shown(0, 95, 1, None),             // real 5: short, error 4/10 = 40 %
            shown(0, 99, 0, None),             // real 1: short by the grain, error 10 %
            shown(1, 10, 1_000, None),         // gave up: not scored
        ],
        polls: vec![
            poll(10, false, false), // before 15 s: not counted
            poll(15, true, false),
            poll(20, false, false),
            poll(30, false, true), // paused: not counted
            poll(40, true, false),
        ],
        seconds: 100,
    };
    let f = run.figures();
    assert_eq!(f.scored, 4);
    assert!((f.at_least_real - 0.25).abs() < 1e-9, "{f:?}");
    // Short by no more than the polling interval is no broken promise.
    assert!((f.not_optimistic - 0.5).abs() < 1e-9, "{f:?}");
    assert!((f.median_rel_error - 0.2).abs() < 1e-9, "{f:?}");
    assert_eq!(f.late_polls, 3);
    assert!((f.shown_after_15s - 2.0 / 3.0).abs() < 1e-9, "{f:?}");
    assert_eq!(f.ranged, 2);
    assert_eq!(f.within_range, Some(0.5));
    let misses = f.misses(&TARGETS);
    // Too short too often and too few shown; the median error (20 %) is within 25 %.
    assert_eq!(misses.len(), 2, "{misses:?}");
}
