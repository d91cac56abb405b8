//! The simulation's scenarios: the line each one drives, and what changes in it.

use std::time::Duration;

use super::{Arrivals, GiveUp, Patience, Scenario};

impl Scenario {
    pub(super) fn base(name: &'static str) -> Self {
        Self {
            name,
            capacity: 10,
            opening_crowd: 80,
            arrivals: Arrivals::Poisson(1.0 / 3.0),
            arrivals_for: 600,
            stay: (20, 40),
            slower: None,
            pause: None,
            capacity_changes: Vec::new(),
            rate_limit: None,
            give_up: None,
            give_up_burst: None,
            queue_ttl: Duration::from_secs(120),
            grant_ttl: Duration::from_secs(30),
            poll_every: 1,
        }
    }

    /// A burst: 60 at the opening, then one a second for 30 s; capacity 5; stays of
    /// 1-5 s.
    pub(super) fn burst() -> Self {
        Self {
            capacity: 5,
            opening_crowd: 60,
            arrivals: Arrivals::Every(1),
            arrivals_for: 30,
            stay: (1, 5),
            ..Self::base("burst at opening")
        }
    }

    /// Capacity 10, stays of 20-40 s (a third of a visitor a second leaves), newcomers at that
    /// rate (Poisson) for 10 minutes behind a line of 70 (80 arrive at the opening): a wait of
    /// about 3-4 minutes that stays about that long.
    pub(super) fn steady() -> Self {
        Self::base("steady line")
    }

    /// The steady line whose visitors stay twice as long after 5 minutes.
    pub(super) fn slowdown() -> Self {
        Self {
            slower: Some((300, (40, 80))),
            ..Self::base("checkout slows at 5 min")
        }
    }

    /// The steady line paused for 2 minutes in the middle.
    pub(super) fn pause() -> Self {
        Self {
            pause: Some((240, 360)),
            ..Self::base("paused 4-6 min")
        }
    }

    /// Capacity 5 raised to 15 halfway, newcomers at 0.3 a second.
    pub(super) fn capacity_raised() -> Self {
        Self {
            capacity: 5,
            arrivals: Arrivals::Poisson(0.3),
            capacity_changes: vec![(300, 15)],
            ..Self::base("capacity 5 -> 15 at 5 min")
        }
    }

    /// Capacity 20 and visits of 10-20 s (the line moves at about 1.3 a second), newcomers at
    /// 1.2 a second; from minute 5 the operators let in at most one a second, and the line
    /// grows.
    pub(super) fn rate_limited() -> Self {
        Self {
            capacity: 20,
            opening_crowd: 100,
            arrivals: Arrivals::Poisson(1.2),
            stay: (10, 20),
            rate_limit: Some((300, 1)),
            ..Self::base("rate limited to 1/s at 5 min")
        }
    }

    /// 40 % of newcomers stop polling after a patience of a minute on average (exponential),
    /// if their turn has not come first; `queue_ttl` 20 s.
    pub(super) fn giving_up() -> Self {
        Self {
            opening_crowd: 60,
            arrivals: Arrivals::Poisson(0.5),
            arrivals_for: 300,
            give_up: Some(GiveUp {
                share: 0.4,
                patience: Patience::Exponential(60.0),
            }),
            queue_ttl: Duration::from_secs(20),
            ..Self::base("40 % give up")
        }
    }

    /// As [`giving_up`](Self::giving_up), but those who give up do so at any time in their
    /// first two minutes (uniform), as late as early: the room cannot know who is still to
    /// leave. Published, beyond the targets.
    pub(super) fn giving_up_late() -> Self {
        Self {
            give_up: Some(GiveUp {
                share: 0.4,
                patience: Patience::Uniform(5, 120),
            }),
            ..Self::giving_up()
        }
        .named("40 % give up, late as early")
    }

    /// Capacity 15 moved the way the capacity controller moves it, at its window's pace: cut
    /// by a third at 4 min (errors), with 15 inside who leave only as their visits end; then
    /// steps of one (5-10 %) every 15 s, a back-off, and steps again. Newcomers at 0.45 a
    /// second, so the line grows while the capacity is down.
    pub(super) fn capacity_moved() -> Self {
        Self {
            capacity: 15,
            arrivals: Arrivals::Poisson(0.45),
            capacity_changes: vec![
                (240, 10),
                (255, 11),
                (270, 12),
                (285, 13),
                (300, 12),
                (360, 13),
                (420, 14),
            ],
            ..Self::base("capacity moved as the controller moves it")
        }
    }

    /// A third of newcomers give up at any time in their first three minutes (uniform), with
    /// a short `queue_ttl` and `grant_ttl` (10 s each): the line stalls for a grant's time on
    /// each who went silent too lately to be skipped.
    pub(super) fn giving_up_short_ttls() -> Self {
        Self {
            give_up: Some(GiveUp {
                share: 1.0 / 3.0,
                patience: Patience::Uniform(5, 180),
            }),
            queue_ttl: Duration::from_secs(10),
            grant_ttl: Duration::from_secs(10),
            ..Self::giving_up()
        }
        .named("a third give up, short ttls")
    }

    /// The steady line (`queue_ttl` 20 s), where at 4 min a third of those waiting give up at
    /// once: nothing before it said it was coming.
    pub(super) fn give_up_burst() -> Self {
        Self {
            give_up_burst: Some((240, 1.0 / 3.0)),
            queue_ttl: Duration::from_secs(20),
            ..Self::base("a third give up at once at 4 min")
        }
    }

    /// The four scenarios where waiters give up, in the table's order.
    pub(super) fn giving_ups() -> [Self; 4] {
        [
            Self::giving_up(),
            Self::giving_up_late(),
            Self::giving_up_short_ttls(),
            Self::give_up_burst(),
        ]
    }

    pub(super) fn named(self, name: &'static str) -> Self {
        Self { name, ..self }
    }
}
