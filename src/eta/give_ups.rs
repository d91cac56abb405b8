//! How many waiters gave up in each of the last minutes, as one gateway saw it in the
//! snapshots it refreshed: what tells a burst of quitters (all in one minute, then none) from a
//! steady rate of giving up (about as many every minute), which the room's counts over five
//! minutes cannot.
//!
//! A waiter who gives up goes silent (seen so in the snapshot's checkpoints once silent for
//! `queue_ttl`) and leaves that count when skipped at their turn (counted in the skips of the
//! minute). So the waiters who went silent over a minute are the silent count's change over it
//! plus the skips within it; a waiter who comes back takes one off. In a long line the silent
//! count is interpolated between checkpoints, and its own error (`SilentCounts::whole_line`)
//! is part of each minute's: an uneven minute must stand out beyond both.

use std::collections::VecDeque;

use crate::store::{RoomPace, ADMISSION_BUCKET_MS, PACE_MINUTES};

const MINUTE_MS: u64 = 6 * ADMISSION_BUCKET_MS;
/// Samples kept at most this often: a minute's ends are found within it.
const SAMPLE_EVERY_MS: u64 = 2_000;
/// A minute's end is taken from a sample at most this far from it.
const SLACK_MS: u64 = 5_000;
/// Minutes needed before the median says anything: one odd minute (a burst) is then outvoted.
const MIN_MINUTES: usize = 3;

/// One snapshot's counts, by the store's clock.
#[derive(Clone, Copy, Debug)]
struct Sample {
    at_ms: u64,
    /// Where its admission bucket began (the store counts skips by buckets of ten seconds).
    bucket_ms: u64,
    /// The silent in the line, as counted from the checkpoints, and that count's variance.
    silent: f64,
    silent_variance: f64,
    /// Skips in the six complete buckets before its own and in its own so far.
    skipped_since_minute: u64,
    /// Skips in its own bucket so far.
    skipped_in_bucket: u64,
}

/// A gateway's recent snapshots' counts of the silent and the skipped, a few minutes' worth.
#[derive(Debug, Default)]
pub(crate) struct GiveUpHistory {
    samples: VecDeque<Sample>,
}

impl GiveUpHistory {
    /// Notes the counts of a snapshot taken at `at_ms` (the store's clock): its `pace` and the
    /// `silent` in its line with that count's variance. One a little older than the last noted
    /// (a refresh answered out of order) is left out; one much older (the store's clock went
    /// back) starts the history again.
    pub(crate) fn record(&mut self, pace: &RoomPace, silent: (f64, f64), at_ms: u64) {
        if let Some(last) = self.samples.back() {
            if at_ms.saturating_add(SLACK_MS) < last.at_ms {
                // The store's clock went back (a failover to a server whose clock is behind):
                // the minutes counted by the old clock are no minutes by the new one.
                self.samples.clear();
            } else if at_ms < last.at_ms.saturating_add(SAMPLE_EVERY_MS) {
                return;
            }
        }
        self.samples.push_back(Sample {
            at_ms,
            bucket_ms: at_ms.saturating_sub(pace.into_bucket_ms),
            silent: silent.0,
            silent_variance: silent.1,
            skipped_since_minute: pace
                .skipped
                .last_minute
                .saturating_add(pace.current_skipped),
            skipped_in_bucket: pace.current_skipped,
        });
        let keep = (PACE_MINUTES as u64 + 1) * MINUTE_MS + SLACK_MS;
        while self
            .samples
            .front()
            .is_some_and(|s| s.at_ms.saturating_add(keep) < at_ms)
        {
            self.samples.pop_front();
        }
    }

    /// The sample a minute before `end`: in the admission bucket six before `end`'s (so that
    /// `end`'s skips since that bucket began, less that sample's in its bucket so far, are the
    /// skips between the two), nearest a minute before `end` and within [`SLACK_MS`] of it.
    fn minute_before(&self, end: &Sample) -> Option<Sample> {
        let bucket = end.bucket_ms.checked_sub(MINUTE_MS)?;
        let at = end.at_ms.checked_sub(MINUTE_MS)?;
        self.samples
            .iter()
            .filter(|s| s.bucket_ms == bucket && s.at_ms.abs_diff(at) <= SLACK_MS)
            .min_by_key(|s| s.at_ms.abs_diff(at))
            .copied()
    }

    /// The waiters who went silent in each of the last minutes (up to five, ending at the last
    /// sample, each beginning where the one after it ends), most recent first; `None` with
    /// fewer than [`MIN_MINUTES`] seen.
    pub(crate) fn minutes(&self) -> Option<GiveUpMinutes> {
        let mut end = *self.samples.back()?;
        let mut counts = [0; PACE_MINUTES];
        let mut variances = [0; PACE_MINUTES];
        let mut len = 0;
        while len < PACE_MINUTES {
            let Some(start) = self.minute_before(&end) else {
                break;
            };
            let skipped = end
                .skipped_since_minute
                .saturating_sub(start.skipped_in_bucket);
            let went = end.silent - start.silent + skipped as f64;
            counts[len] = went.max(0.0).round() as u64;
            variances[len] = (start.silent_variance + end.silent_variance).ceil() as u64;
            len += 1;
            end = start;
        }
        (len >= MIN_MINUTES).then_some(GiveUpMinutes {
            counts,
            variances,
            len,
        })
    }
}

/// The waiters who gave up (went silent) in each of a few recent minutes, most recent first,
/// as a gateway counted them ([`EtaInput::with_give_ups_lately`]).
///
/// [`EtaInput::with_give_ups_lately`]: super::EtaInput::with_give_ups_lately
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GiveUpMinutes {
    counts: [u64; PACE_MINUTES],
    /// Each count's variance beyond counting noise: that of the silent counts at its ends.
    variances: [u64; PACE_MINUTES],
    len: usize,
}

impl GiveUpMinutes {
    /// Counts of three to five minutes, most recent first, each exact but for counting
    /// noise; `None` for fewer or more.
    pub fn new(counts: &[u64]) -> Option<Self> {
        if !(MIN_MINUTES..=PACE_MINUTES).contains(&counts.len()) {
            return None;
        }
        let mut all = [0; PACE_MINUTES];
        all[..counts.len()].copy_from_slice(counts);
        Some(Self {
            counts: all,
            variances: [0; PACE_MINUTES],
            len: counts.len(),
        })
    }

    /// The same counts, each known only within `variances` (in the same order; one for each
    /// count): estimated rather than counted, as the silent in a long line are.
    pub fn with_variances(mut self, variances: &[u64]) -> Self {
        for (v, &given) in self.variances[..self.len].iter_mut().zip(variances) {
            *v = given;
        }
        self
    }

    /// The share of the minutes' mean rate of giving up that goes on: 1 when the minutes are
    /// as even as one steady rate makes them (their spread within counting noise and the
    /// counts' own error: a chi-squared test of dispersion at 1 %); when they are not (a burst of quitters in one of them), their
    /// median over their mean, as the one odd minute says nothing of the minutes to come.
    pub fn steady_share(&self) -> f64 {
        let counts = &self.counts[..self.len];
        let k = counts.len() as f64;
        let mean = counts.iter().map(|&c| c as f64).sum::<f64>() / k;
        if mean <= 0.0 {
            return 1.0;
        }
        // Each minute's expected spread: its counting noise (Poisson: the mean) and the error
        // of the estimated counts at its ends.
        let dispersion = counts
            .iter()
            .zip(&self.variances)
            .map(|(&c, &v)| (c as f64 - mean).powi(2) / (mean + v as f64))
            .sum::<f64>();
        // The chi-squared distribution's 99th percentile for 2, 3 and 4 degrees of freedom.
        let limit = [9.21, 11.34, 13.28][self.len - MIN_MINUTES];
        if dispersion <= limit {
            return 1.0;
        }
        let mut sorted = [0; PACE_MINUTES];
        sorted[..self.len].copy_from_slice(counts);
        let sorted = &mut sorted[..self.len];
        sorted.sort_unstable();
        // The lower median of an even count: fewer give-ups forecast is the longer wait.
        (sorted[(self.len - 1) / 2] as f64 / mean).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::AdmissionCounts;

    fn minutes(counts: &[u64]) -> GiveUpMinutes {
        GiveUpMinutes::new(counts).unwrap()
    }

    #[test]
    fn even_minutes_go_on_at_their_rate_and_a_burst_is_set_aside() {
        // As even as counting noise makes them: the room's rate goes on.
        assert_eq!(minutes(&[6, 5, 7, 6, 5]).steady_share(), 1.0);
        assert_eq!(minutes(&[0, 1, 0]).steady_share(), 1.0);
        assert_eq!(minutes(&[0, 0, 0, 0]).steady_share(), 1.0);
        // One minute's burst: the others gave up at none.
        assert_eq!(minutes(&[0, 0, 30, 0, 0]).steady_share(), 0.0);
        // Around a steady few: the median's share of the mean.
        let share = minutes(&[2, 3, 30, 2, 4]).steady_share();
        assert!((share - 3.0 / 8.2).abs() < 1e-9, "{share}");
        // (Four minutes: the lower median.)
        let share = minutes(&[2, 40, 3, 4]).steady_share();
        assert!((share - 3.0 / 12.25).abs() < 1e-9, "{share}");
        // A burst no larger than the error of the counts it is made of is no burst.
        let noisy = minutes(&[0, 0, 30, 0, 0]).with_variances(&[400; 5]);
        assert_eq!(noisy.steady_share(), 1.0);
        let clear = minutes(&[0, 0, 300, 0, 0]).with_variances(&[400; 5]);
        assert_eq!(clear.steady_share(), 0.0);
        // Fewer than three minutes, or more than five, say nothing.
        assert_eq!(GiveUpMinutes::new(&[0, 30]), None);
        assert_eq!(GiveUpMinutes::new(&[1; 6]), None);
    }

    /// A snapshot's pace: `skipped` in the last minute (its complete buckets), into a bucket
    /// by `into_ms`.
    fn pace(skipped: u64, into_ms: u64) -> RoomPace {
        RoomPace::new(0, into_ms, 10 * MINUTE_MS, 10)
            .with_skipped(AdmissionCounts::new(skipped, skipped), 0)
    }

    /// Silent counted exactly.
    fn exactly(silent: u64) -> (f64, f64) {
        (silent as f64, 0.0)
    }

    #[test]
    fn a_minute_counts_those_gone_silent_and_those_skipped() {
        let mut history = GiveUpHistory::default();
        // Three minutes, a snapshot every second: 4 go silent each minute and 3 are skipped
        // (they leave the silent count as they are skipped): one more silent each minute.
        for s in 0..=180u64 {
            let silent = 10 + s / 60;
            history.record(
                &pace(3, s * 1000 % 10_000),
                exactly(silent),
                1_000_000 + s * 1000,
            );
        }
        let got = history.minutes().unwrap();
        assert_eq!(got, minutes(&[4, 4, 4]));
        assert_eq!(got.steady_share(), 1.0);
        // A sample every 2 s at most: 91 kept of 181, within six minutes.
        assert!(history.samples.len() <= 91, "{}", history.samples.len());
    }

    #[test]
    fn skips_are_counted_once_though_the_store_counts_them_by_buckets() {
        // 30 silent waiters, skipped together at 1 062 s: the silent count falls by 30, the
        // skips rise by 30, and nobody went silent. The store counts the skips in the bucket
        // [1 060, 1 070) s: in its current bucket until 1 070 s, then in its last minute of
        // complete buckets until 1 130 s. Whatever minute the skips fall in, none counts them
        // twice, and none counts give-ups that never happened.
        let skipped_at = 1_062_000;
        let bucket = 1_060_000;
        let at = |t: u64| {
            let into = t % 10_000;
            let (current, last_minute) = if t >= skipped_at && t < bucket + 10_000 {
                (30, 0)
            } else if t >= bucket + 10_000 && t < bucket + 70_000 {
                (0, 30)
            } else {
                (0, 0)
            };
            let pace = RoomPace::new(0, into, 10 * MINUTE_MS, 10)
                .with_skipped(AdmissionCounts::new(last_minute, last_minute), current);
            let silent = if t >= skipped_at { 0 } else { 30 };
            (pace, exactly(silent))
        };
        for last in [1_065_000, 1_125_000, 1_131_000, 1_199_000, 1_301_000] {
            let mut history = GiveUpHistory::default();
            for t in (last - 300_000..=last).step_by(1_000) {
                let (pace, silent) = at(t);
                history.record(&pace, silent, t);
            }
            let got = history.minutes().unwrap();
            assert_eq!(got, minutes(&[0, 0, 0, 0, 0]), "ending at {last}");
        }
    }

    #[test]
    fn a_burst_of_silence_is_one_minute_of_many() {
        let mut history = GiveUpHistory::default();
        // Five minutes; 30 go silent at once in the third, nobody else.
        for s in 0..=300u64 {
            let silent = if s >= 130 { 30 } else { 0 };
            history.record(
                &pace(0, s * 1000 % 10_000),
                exactly(silent),
                2_000_000 + s * 1000,
            );
        }
        let got = history.minutes().unwrap();
        assert_eq!(got, minutes(&[0, 0, 30, 0, 0]));
        assert_eq!(got.steady_share(), 0.0);
    }

    #[test]
    fn counts_interpolated_with_an_error_carry_it_into_each_minute() {
        let mut history = GiveUpHistory::default();
        // A long line whose silent count (about 1 000) is estimated within a standard deviation
        // of 20 each time: it wanders by as much, and nobody gave up.
        for s in 0..=300u64 {
            let wander = [0.0, 25.0, -15.0, 30.0, -20.0, 10.0][(s / 60) as usize];
            history.record(&pace(0, 0), (1_000.0 + wander, 400.0), 3_000_000 + s * 1000);
        }
        let got = history.minutes().unwrap();
        assert_eq!(got, minutes(&[30, 0, 45, 0, 25]).with_variances(&[800; 5]));
        // Within the counts' own error: as even as one rate.
        assert_eq!(got.steady_share(), 1.0);
    }

    #[test]
    fn too_little_history_or_a_gap_says_nothing() {
        let mut history = GiveUpHistory::default();
        assert_eq!(history.minutes(), None);
        for s in 0..=120u64 {
            history.record(&pace(0, 0), exactly(0), s * 1000);
        }
        // Two minutes: too few.
        assert_eq!(history.minutes(), None);
        // A gap of two minutes (no snapshot: the store was away), then a minute: the minutes
        // across the gap have no ends, so they are not counted.
        for s in 240..=300u64 {
            history.record(&pace(0, 0), exactly(0), s * 1000);
        }
        assert_eq!(history.minutes(), None);
        // A snapshot a little older than the last (answered out of order) is left out.
        let before = history.samples.len();
        history.record(&pace(0, 0), exactly(0), 298_000);
        assert_eq!(history.samples.len(), before);
    }

    #[test]
    fn a_store_clock_gone_back_starts_the_minutes_again() {
        let mut history = GiveUpHistory::default();
        for s in 0..=300u64 {
            let silent = if s >= 130 { 30 } else { 0 };
            history.record(&pace(0, 0), exactly(silent), 5_000_000 + s * 1000);
        }
        assert!(history.minutes().is_some());
        // An hour back: the burst's minute, counted by the old clock, is forgotten, and the
        // new clock's minutes are counted from scratch.
        history.record(&pace(0, 0), exactly(30), 5_000_000 - 3_600_000);
        assert_eq!(history.samples.len(), 1);
        assert_eq!(history.minutes(), None);
        for s in 1..=180u64 {
            history.record(&pace(0, 0), exactly(30), 5_000_000 - 3_600_000 + s * 1000);
        }
        assert_eq!(history.minutes(), Some(minutes(&[0, 0, 0])));
    }
}
