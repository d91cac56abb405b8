//! The silent waiters ahead of a place, counted from a snapshot's checkpoints: the wait
//! estimate takes them off the line ahead ([`EtaInput::with_silent_ahead`]).
//!
//! [`EtaInput::with_silent_ahead`]: crate::eta::EtaInput::with_silent_ahead

use super::Checkpoint;

/// How many of a snapshot's waiters are silent by the turn's liveness rule up to each rank,
/// from its checkpoints' [`silent`](Checkpoint::silent): counted where every waiter is a
/// checkpoint (below [`EXACT_RANKS`](super::EXACT_RANKS)), and between two checkpoints
/// further back interpolated, each waiter between them taken as silent with the mean of the
/// two checkpoints' chances. Made once per snapshot (about 1 100 checkpoints for a line of
/// two million), then each count is a binary search.
///
/// An interpolated count is uncertain: each waiter between two checkpoints is silent or not,
/// and each checkpoint's word stands for the waiters on either side of it (about a gap's
/// worth, so a gap of `g` adds `g + g²` times `p (1 - p)` to the count's variance, `p` the
/// share of silent checkpoints). Where every waiter ahead is a checkpoint it is exact.
///
/// ```
/// use tower_waiting_room::store::snapshot::{Checkpoint, SilentCounts};
///
/// // Ranks 0..=3 exact, the second one silent; then a checkpoint at rank 13, silent.
/// let cps = [(0, false), (1, true), (2, false), (3, false), (13, true)]
///     .map(|(rank, silent)| Checkpoint { score: rank as f64, rank, silent });
/// let counts = SilentCounts::of(&cps);
/// // Of the three ahead of rank 3 (the fourth waiter), one is silent, exactly.
/// assert_eq!(counts.ahead(4, 4), (1, 0));
/// // Of the 12 ahead of rank 12, the 8 between ranks 3 and 13 at half a chance each: 5.
/// let (silent, error) = counts.ahead(13, 13);
/// assert_eq!(silent, 5);
/// assert!(error > 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SilentCounts {
    /// Each checkpoint's rank, ascending.
    ranks: Vec<u64>,
    /// Each checkpoint's silence, 1 or 0.
    silent: Vec<f64>,
    /// Silent among ranks `0..=rank` of each checkpoint, counted and interpolated.
    upto: Vec<f64>,
    /// The variance of each `upto`, over `p (1 - p)`.
    spread: Vec<f64>,
    /// `p (1 - p)`, `p` the share of silent checkpoints.
    pq: f64,
}

impl SilentCounts {
    /// The counts of a snapshot's `checkpoints` (ascending by rank, as a snapshot holds them;
    /// one out of order, which only damage makes, is left out).
    pub fn of(checkpoints: &[Checkpoint]) -> Self {
        let mut counts = Self::default();
        let (mut upto, mut spread) = (0.0, 0.0);
        let mut last: Option<(u64, f64)> = None;
        for cp in checkpoints {
            let f = if cp.silent { 1.0 } else { 0.0 };
            // The waiters since the last checkpoint, and the chance each is silent.
            let (gap, chance) = match last {
                Some((rank, before)) if cp.rank > rank => {
                    ((cp.rank - rank - 1) as f64, 0.5 * (before + f))
                }
                Some(_) => continue,
                None => (cp.rank as f64, f),
            };
            upto += gap * chance + f;
            spread += gap + gap * gap;
            counts.ranks.push(cp.rank);
            counts.silent.push(f);
            counts.upto.push(upto);
            counts.spread.push(spread);
            last = Some((cp.rank, f));
        }
        if !counts.ranks.is_empty() {
            let p = counts.silent.iter().sum::<f64>() / counts.ranks.len() as f64;
            counts.pq = p * (1.0 - p);
        }
        counts
    }

    /// Silent among ranks `0..=rank`, and the variance of that count. Ranks beyond the last
    /// checkpoint (beyond the snapshot's line) add nobody.
    fn upto(&self, rank: u64) -> (f64, f64) {
        let i = self.ranks.partition_point(|&r| r <= rank);
        let (count, spread) = match i.checked_sub(1) {
            // Before the first checkpoint (which is rank 0 but after damage): at its chance.
            None => match self.silent.first() {
                Some(&f) => {
                    let k = (rank + 1) as f64;
                    (k * f, k + k * k)
                }
                None => (0.0, 0.0),
            },
            Some(j) => match self.silent.get(i) {
                Some(&next) => {
                    let k = (rank - self.ranks[j]) as f64;
                    (
                        self.upto[j] + k * 0.5 * (self.silent[j] + next),
                        self.spread[j] + k + k * k,
                    )
                }
                None => (self.upto[j], self.spread[j]),
            },
        };
        (count, spread * self.pq)
    }

    /// Silent in the whole line, and the variance of that count (nought where every waiter is
    /// a checkpoint).
    pub fn whole_line(&self) -> (f64, f64) {
        self.ranks
            .last()
            .map_or((0.0, 0.0), |&last| self.upto(last))
    }

    /// Silent among the `position - 1` waiters ahead of a waiter at `position` now, who stood
    /// at `snapshot_position` in the snapshot (the same, or further back: those at the front
    /// have had their turn since): the waiters at the snapshot's ranks
    /// `snapshot_position - position ..= snapshot_position - 2`. The count, rounded, and its
    /// standard deviation, rounded up (0 where every waiter ahead is a checkpoint).
    pub fn ahead(&self, snapshot_position: u64, position: u64) -> (u64, u64) {
        let Some(last) = snapshot_position.checked_sub(2) else {
            return (0, 0);
        };
        let first = snapshot_position.saturating_sub(position.max(1));
        if first > last {
            return (0, 0);
        }
        let (count, variance) = self.upto(last);
        let (before, before_variance) = match first.checked_sub(1) {
            Some(r) => self.upto(r),
            None => (0.0, 0.0),
        };
        let count = (count - before).max(0.0);
        let sd = (variance - before_variance).max(0.0).sqrt();
        // (A few thousandths over a whole number is arithmetic, not a waiter.)
        (count.round() as u64, (sd - 1e-9).ceil().max(0.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cps(list: &[(u64, bool)]) -> Vec<Checkpoint> {
        list.iter()
            .map(|&(rank, silent)| Checkpoint {
                score: rank as f64 + 1_000.0,
                rank,
                silent,
            })
            .collect()
    }

    #[test]
    fn exact_where_every_waiter_is_a_checkpoint() {
        let line: Vec<(u64, bool)> = (0..50).map(|r| (r, r % 3 == 0)).collect();
        let counts = SilentCounts::of(&cps(&line));
        for position in 1..=50u64 {
            let want = (0..position - 1).filter(|r| r % 3 == 0).count() as u64;
            assert_eq!(counts.ahead(position, position), (want, 0), "{position}");
        }
        // Moved up by 10 since: the 10 at the front had their turn.
        let want = (10..39).filter(|r| r % 3 == 0).count() as u64;
        assert_eq!(counts.ahead(40, 30), (want, 0));
        assert_eq!(counts.ahead(1, 1), (0, 0));
        assert_eq!(counts.ahead(0, 0), (0, 0));
    }

    #[test]
    fn interpolated_between_checkpoints_with_an_error() {
        // Ranks 0..100 exact, none silent; then 100 and 200, both silent.
        let mut line: Vec<(u64, bool)> = (0..100).map(|r| (r, false)).collect();
        line.extend([(100, true), (200, true)]);
        let counts = SilentCounts::of(&cps(&line));
        // Ahead of rank 150: none of ranks 0..100, rank 100, and the 49 between it and 150,
        // whose neighbours (100 and 200) are both silent: 50.
        let (silent, error) = counts.ahead(151, 151);
        assert_eq!(silent, 50);
        assert!(error > 0 && error < 50, "{error}");
        // The whole line: 101 counted (rank 100, the 99 between, rank 200), with a variance.
        let (whole, variance) = counts.whole_line();
        assert!((whole - 101.0).abs() < 1e-9, "{whole}");
        assert!(variance > 0.0, "{variance}");
        // Nobody silent anywhere: no error either.
        let none: Vec<(u64, bool)> = (0..100).map(|r| (r, false)).chain([(150, false)]).collect();
        assert_eq!(SilentCounts::of(&cps(&none)).ahead(140, 140), (0, 0));
        assert_eq!(SilentCounts::of(&cps(&none)).whole_line(), (0.0, 0.0));
        assert_eq!(SilentCounts::default().whole_line(), (0.0, 0.0));
    }

    #[test]
    fn out_of_order_checkpoints_are_left_out() {
        let counts = SilentCounts::of(&cps(&[(0, true), (1, true), (1, true), (2, false)]));
        assert_eq!(counts.ahead(3, 3), (2, 0));
    }
}
