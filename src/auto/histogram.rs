//! Latencies in logarithmic buckets: eight per doubling from 1 ms to about 65 s, so a quantile
//! read from them is within one bucket (about 9 %) of the true one, and windows from several
//! gateways merge by adding counts (percentiles do not average).

use std::time::Duration;

/// Buckets per doubling of the latency.
const PER_OCTAVE: u32 = 8;
/// Doublings covered above 1 ms: up to 2^16 ms, about 65 s.
const OCTAVES: u32 = 16;
/// Buckets in all; the last one also takes everything slower.
pub(crate) const BUCKETS: usize = (PER_OCTAVE * OCTAVES) as usize + 1;

/// Counts of latencies by bucket.
#[derive(Clone, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            counts: Box::new([0; BUCKETS]),
            total: 0,
        }
    }
}

impl std::fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("total", &self.total)
            .field("p50", &self.quantile(0.5))
            .field("p95", &self.quantile(0.95))
            .finish()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one latency.
    pub fn record(&mut self, latency: Duration) {
        self.record_n(latency, 1);
    }

    /// Counts `n` latencies of the same length.
    pub fn record_n(&mut self, latency: Duration, n: u64) {
        self.add_to_bucket(bucket(latency), n);
    }

    /// The bucket a latency is counted in (for counters kept outside a histogram).
    pub(crate) fn bucket_of(latency: Duration) -> usize {
        bucket(latency)
    }

    /// Adds `n` to the bucket `index` (from [`bucket_of`](Self::bucket_of)).
    pub(crate) fn add_to_bucket(&mut self, index: usize, n: u64) {
        // Saturating: a store's damaged key can hold any count (see `Window::samples`).
        let count = &mut self.counts[index.min(BUCKETS - 1)];
        *count = count.saturating_add(n);
        self.total = self.total.saturating_add(n);
    }

    /// The buckets that counted something: `(index, count)`, by index (how a store keeps a
    /// window's latencies; [`add_to_bucket`](Self::add_to_bucket) reads them back).
    // Only the Redis store writes a window's buckets out.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(index, &n)| (index, n))
    }

    /// Adds another histogram's counts (another window, another gateway's).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine = mine.saturating_add(*theirs);
        }
        self.total = self.total.saturating_add(other.total);
    }

    /// Latencies counted.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The latency under which a share `q` (0 to 1) of the counted ones fall, as the upper
    /// edge of its bucket (never below the truth); `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        // The rank of the sample wanted, from 1: the nearest-rank method.
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (index, count) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(*count);
            if seen >= rank {
                return Some(upper_edge(index));
            }
        }
        Some(upper_edge(BUCKETS - 1))
    }
}

/// The bucket of a latency: 0 for up to 1 ms, then eight per doubling.
fn bucket(latency: Duration) -> usize {
    let ms = latency.as_secs_f64() * 1000.0;
    if ms <= 1.0 {
        return 0;
    }
    let index = (ms.log2() * f64::from(PER_OCTAVE)).ceil();
    (index as usize).min(BUCKETS - 1)
}

/// The longest latency a bucket holds.
fn upper_edge(index: usize) -> Duration {
    let ms = 2f64.powf(index as f64 / f64::from(PER_OCTAVE));
    Duration::from_secs_f64(ms / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_quantile_is_within_one_bucket_above_the_true_one() {
        let mut h = LatencyHistogram::new();
        for n in 1..=1000 {
            h.record(ms(n));
        }
        for (q, truth) in [(0.5, 500.0), (0.95, 950.0), (0.99, 990.0), (1.0, 1000.0)] {
            let got = h.quantile(q).unwrap().as_secs_f64() * 1000.0;
            assert!(
                got >= truth - 1e-9 && got <= truth * 2f64.powf(1.0 / 8.0) + 1e-9,
                "q{q}: {got} ms for {truth} ms"
            );
        }
        assert_eq!(LatencyHistogram::new().quantile(0.5), None);
    }

    #[test]
    fn merged_windows_read_as_one_and_extremes_land_in_the_end_buckets() {
        let (mut fast, mut slow) = (LatencyHistogram::new(), LatencyHistogram::new());
        fast.record_n(ms(10), 90);
        slow.record_n(ms(2_000), 10);
        let mut both = fast.clone();
        both.merge(&slow);
        let mut other_order = slow.clone();
        other_order.merge(&fast);
        assert_eq!(both, other_order);
        assert_eq!(both.count(), 100);
        assert!(both.quantile(0.9).unwrap() < ms(12));
        assert!(both.quantile(0.95).unwrap() >= ms(2_000));
        let mut edges = LatencyHistogram::new();
        edges.record(Duration::ZERO);
        edges.record(Duration::from_secs(3_600));
        assert_eq!(edges.quantile(0.0).unwrap(), ms(1));
        assert!(edges.quantile(1.0).unwrap() >= Duration::from_secs(65));
    }
}
