//! Rate limits in process memory: new queue entries per client, store questions per session.

use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use super::generations::Generations;
use crate::client::network::client_group;
use crate::clock::duration_ms;

/// At most `max` events per `per`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    max: u32,
    per: Duration,
}

impl RateLimit {
    /// At most `max` per `per` (`max` at least 1, `per` at least 1 ms; checked by the builder).
    pub const fn new(max: u32, per: Duration) -> Self {
        Self { max, per }
    }

    /// At most `max` a second.
    pub const fn per_second(max: u32) -> Self {
        Self::new(max, Duration::from_secs(1))
    }

    /// At most `max` a minute.
    pub const fn per_minute(max: u32) -> Self {
        Self::new(max, Duration::from_secs(60))
    }

    /// How many.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Per how long.
    pub fn per(&self) -> Duration {
        self.per
    }
}

/// Counts events per key in a sliding window approximated by two generations, with a bounded
/// number of keys.
pub(crate) struct Limiter<K> {
    limit: RateLimit,
    state: Mutex<Generations<K, u32>>,
}

impl<K: Hash + Eq> Limiter<K> {
    pub(crate) fn new(limit: RateLimit, max_keys: usize) -> Self {
        Self {
            limit,
            state: Mutex::new(Generations::new(duration_ms(limit.per), max_keys)),
        }
    }

    /// Counts one event for `key` at `now_ms` if it is within the limit; otherwise counts
    /// nothing and says how long to wait.
    pub(crate) fn check(&self, key: K, now_ms: u64) -> Result<(), Duration> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let w = g.window_ms();
        let elapsed = g.advance(now_ms);
        let (current, previous) = g.get(&key);
        let (current, previous) = (
            current.copied().unwrap_or(0),
            previous.copied().unwrap_or(0),
        );
        // The previous window's events, weighted by how much of it still overlaps the sliding
        // window ending now.
        let carried = u64::from(previous) * (w - elapsed) / w;
        if carried + u64::from(current) >= u64::from(self.limit.max) {
            let wait_ms = (w - elapsed).max(1);
            return Err(Duration::from_millis(wait_ms));
        }
        *g.entry(key, now_ms) += 1;
        Ok(())
    }

    /// Keys tracked in both generations.
    pub(crate) fn len(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Limiter<IpAddr> {
    /// [`check`](Self::check) for the client `ip` belongs to (see [`client_group`]): an IPv4
    /// address, or an IPv6 /64, so that a client rotating addresses within its /64 has one
    /// budget.
    pub(crate) fn check_client(&self, ip: IpAddr, now_ms: u64) -> Result<(), Duration> {
        self.check(client_group(ip), now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_within_a_window_and_recovers() {
        let l = Limiter::new(RateLimit::per_second(3), 100);
        let t = 1_000_000;
        for _ in 0..3 {
            assert!(l.check(1u8, t).is_ok());
        }
        assert_eq!(l.check(1u8, t), Err(Duration::from_millis(1000)));
        assert!(l.check(2u8, t).is_ok(), "other keys are not affected");
        // Two windows later everything is forgotten.
        assert!(l.check(1u8, t + 2_000).is_ok());
    }

    #[test]
    fn sliding_window_carries_the_previous_generation() {
        let l = Limiter::new(RateLimit::per_second(4), 100);
        let t = 1_000_000;
        for _ in 0..4 {
            assert!(l.check(1u8, t).is_ok());
        }
        // 100 ms into the next window 90 % of the previous still counts: 3.6 -> 3, one more.
        assert!(l.check(1u8, t + 1_100).is_ok());
        assert!(l.check(1u8, t + 1_100).is_err());
    }

    #[test]
    fn memory_is_bounded() {
        let l = Limiter::new(RateLimit::per_minute(60), 1_000);
        for i in 0..100_000u32 {
            assert!(l.check(i, 5_000).is_ok());
        }
        assert!(l.len() <= 2_000, "{}", l.len());
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn addresses_in_one_ipv6_64_share_a_budget() {
        let l = Limiter::new(RateLimit::per_minute(3), 100);
        let t = 1_000_000;
        assert!(l.check_client(ip("2001:db8:1:2::1"), t).is_ok());
        assert!(l.check_client(ip("2001:db8:1:2::2"), t).is_ok());
        assert!(l
            .check_client(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"), t)
            .is_ok());
        assert_eq!(
            l.check_client(ip("2001:db8:1:2:1234:5678:9abc:def0"), t),
            Err(Duration::from_secs(60)),
            "a fourth address in the same /64"
        );
        assert_eq!(l.len(), 1, "one key for the whole /64");
    }

    #[test]
    fn different_ipv6_64s_have_their_own_budgets() {
        let l = Limiter::new(RateLimit::per_minute(1), 100);
        let t = 1_000_000;
        assert!(l.check_client(ip("2001:db8:1:2::1"), t).is_ok());
        assert!(l.check_client(ip("2001:db8:1:2::2"), t).is_err());
        // The neighbouring /64s, and one that differs only in its first bits.
        assert!(l.check_client(ip("2001:db8:1:3::1"), t).is_ok());
        assert!(l.check_client(ip("2001:db8:1:1::1"), t).is_ok());
        assert!(l.check_client(ip("3001:db8:1:2::1"), t).is_ok());
        assert_eq!(l.len(), 4);
    }

    #[test]
    fn a_mapped_ipv4_address_is_that_ipv4_address() {
        let l = Limiter::new(RateLimit::per_minute(2), 100);
        let t = 1_000_000;
        assert!(l.check_client(ip("203.0.113.7"), t).is_ok());
        assert!(l.check_client(ip("::ffff:203.0.113.7"), t).is_ok());
        assert!(l.check_client(ip("203.0.113.7"), t).is_err());
        assert!(
            l.check_client(ip("::ffff:cb00:7107"), t).is_err(),
            "hex form"
        );
        // IPv4 addresses are not grouped: the neighbour has its own budget.
        assert!(l.check_client(ip("203.0.113.8"), t).is_ok());
        assert!(l.check_client(ip("::ffff:203.0.113.9"), t).is_ok());
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn the_generic_check_still_keys_on_the_full_address() {
        let l = Limiter::new(RateLimit::per_minute(1), 100);
        let t = 1_000_000;
        assert!(l.check(ip("2001:db8:1:2::1"), t).is_ok());
        assert!(l.check(ip("2001:db8:1:2::2"), t).is_ok());
    }
}
