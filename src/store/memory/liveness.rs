//! Liveness: a room's two rules (at their turn, and abandoned) and the epochs a check-in marks
//! in them. The same rules as `src/store/redis/script/liveness.lua`, where the check-ins are
//! bits in rings of bitmaps; here each waiter's record keeps its epochs ([`Epochs`]), and the
//! room the counts and the queue in epoch order ([`CheckIns`]) that the silent count and the
//! sweep of the oldest read.

use std::collections::{BTreeMap, VecDeque};

use super::schedule::check_in_time;
use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::snapshot::LivenessRule;

/// A room's two liveness rules (as of its last call).
#[derive(Clone, Copy, Debug)]
pub(super) struct Liveness {
    pub(super) turn: LivenessRule,
    pub(super) abandon: LivenessRule,
}

impl Liveness {
    pub(super) fn of(policy: &RoomPolicy) -> Self {
        Self {
            turn: LivenessRule::for_turn(policy),
            abandon: LivenessRule::for_abandon(policy),
        }
    }

    /// The epochs of a check-in made at `at`.
    pub(super) fn at(self, at: u64) -> Epochs {
        Epochs {
            turn: self.turn.epoch(at),
            abandon: self.abandon.epoch(at),
        }
    }
}

/// The epochs a waiter's check-in at `now` marks, in both liveness rules: those of
/// [`check_in_time`].
pub(super) fn check_in_epochs(policy: &RoomPolicy, now: u64) -> Epochs {
    Liveness::of(policy).at(check_in_time(policy, now))
}

/// A waiter's last check-in, to the epoch of each liveness rule
/// ([`LivenessRule`](crate::store::LivenessRule)): the turn's and the sweep's. Epochs, not
/// times, as the Redis store keeps them (one bitmap per epoch): both stores count a waiter
/// alive or silent alike. A record keeps the latest epochs it was seen in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Epochs {
    /// The epoch of [`LivenessRule::for_turn`](crate::store::LivenessRule::for_turn).
    pub(super) turn: u64,
    /// The epoch of [`LivenessRule::for_abandon`](crate::store::LivenessRule::for_abandon).
    pub(super) abandon: u64,
}

/// The check-ins' side of [`Waiters`](super::waiters::Waiters), apart so a record and these
/// can be borrowed together.
#[derive(Debug, Default)]
pub(super) struct CheckIns {
    /// Records with a check-in.
    pub(super) check_ins: usize,
    /// Records last seen in each turn epoch (an entry per epoch holding one).
    pub(super) per_turn: BTreeMap<u64, usize>,
    /// `(abandon epoch, session)`, in epoch order, for the sweep.
    pub(super) queue: VecDeque<(u64, SessionId)>,
}

impl CheckIns {
    /// Records a check-in of session `s` in `at`, in the record's `seen`, keeping the later
    /// epochs.
    pub(super) fn record(&mut self, seen: &mut Option<Epochs>, s: SessionId, at: Epochs) {
        let new = match *seen {
            Some(old) => Epochs {
                turn: old.turn.max(at.turn),
                abandon: old.abandon.max(at.abandon),
            },
            None => at,
        };
        match seen.replace(new) {
            Some(old) if old == new => {}
            Some(old) => {
                if old.turn != new.turn {
                    self.uncount(old.turn);
                    *self.per_turn.entry(new.turn).or_default() += 1;
                }
                if old.abandon != new.abandon {
                    self.queue.push_back((new.abandon, s));
                }
            }
            None => {
                self.check_ins += 1;
                *self.per_turn.entry(new.turn).or_default() += 1;
                self.queue.push_back((new.abandon, s));
            }
        }
    }

    /// Forgets a record's check-in `seen` (the queue entry goes when it reaches the front).
    pub(super) fn forget(&mut self, seen: Epochs) {
        self.check_ins -= 1;
        self.uncount(seen.turn);
    }

    fn uncount(&mut self, turn: u64) {
        if let std::collections::btree_map::Entry::Occupied(mut e) = self.per_turn.entry(turn) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
    }
}
