//! The wait estimate shown to waiters: how long until their turn, from the room's recent
//! admissions, which every gateway shares through the store.

use std::time::Duration;

use crate::store::AdmissionCounts;

/// Estimates are multiplied by this, so that they err on the long side: a visitor let in early is
/// pleased, one kept past the promised time is not.
pub const ETA_SAFETY_FACTOR: f64 = 1.25;

/// Weight of the last minute's admission rate in the blend (the rest is the last five minutes').
const ETA_RECENT_WEIGHT: f64 = 0.5;

/// The estimated wait of the visitor at `position`, from the room's recent admissions (Little's
/// law: wait = people ahead, and the visitor, / admission rate).
///
/// The rate blends the last minute's and the last five minutes' rates half and half, so a sudden
/// stall or burst moves the estimate gradually instead of making it jump; the result is multiplied
/// by [`ETA_SAFETY_FACTOR`] and rounded up to whole seconds. `None` when nobody was admitted in the
/// last five minutes: there is no rate to estimate from, and the honest answer is "not moving".
///
/// ```
/// use std::time::Duration;
/// use tower_waiting_room::eta::estimate_wait;
/// use tower_waiting_room::store::AdmissionCounts;
///
/// // One admission every 2 s for five minutes: 30 a minute, 150 in five.
/// let steady = AdmissionCounts::new(30, 150);
/// assert_eq!(estimate_wait(100, steady), Some(Duration::from_secs(250))); // 200 s, +25 %
/// assert_eq!(estimate_wait(100, AdmissionCounts::new(0, 0)), None);
/// // A stall in the last minute lengthens the estimate, it does not erase it.
/// assert!(estimate_wait(100, AdmissionCounts::new(0, 120)).unwrap() > Duration::from_secs(250));
/// ```
pub fn estimate_wait(position: u64, recent: AdmissionCounts) -> Option<Duration> {
    let rate = ETA_RECENT_WEIGHT * recent.per_second_last_minute()
        + (1.0 - ETA_RECENT_WEIGHT) * recent.per_second_last_five_minutes();
    if recent.last_five_minutes == 0 || rate <= 0.0 {
        return None;
    }
    let secs = (position.max(1) as f64 / rate * ETA_SAFETY_FACTOR).ceil();
    // Capped at a year: beyond that the number means nothing, and it keeps the cast exact.
    Some(Duration::from_secs(secs.min(365.0 * 86_400.0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_blend_and_are_conservative() {
        // 1/s steady: 60 a minute, 300 in five.
        let steady = AdmissionCounts::new(60, 300);
        let eta = estimate_wait(60, steady).unwrap().as_secs();
        assert_eq!(eta, 75, "60 ahead at 1/s is 60 s, shown as 75 s");
        // A burst in the last minute shortens it, but only halfway.
        let burst = AdmissionCounts::new(240, 480);
        let e = estimate_wait(60, burst).unwrap().as_secs();
        assert!(e < eta && e > 60 / 4, "{e}");
        // Position 0 (never given by a store) is treated as 1.
        assert_eq!(estimate_wait(0, steady), estimate_wait(1, steady));
        // A trickle far back stays finite.
        let trickle = AdmissionCounts::new(0, 1);
        assert_eq!(
            estimate_wait(u64::MAX, trickle),
            Some(Duration::from_secs(365 * 86_400))
        );
    }
}
