//! A room as one gateway sees it between two store calls: the [`RoomSnapshot`] that
//! [`SnapshotStore::sync`] answers, and the liveness rule every store follows.
//!
//! Unstable: the protocol between the crate's own stores and gateways, hidden from the docs. A
//! store offers it through [`Store::snapshots`](super::Store::snapshots).
//!
//! Waiting polls are the bulk of a busy room's traffic: two million waiters polling every 20 s
//! are 100 000 polls a second. A gateway answers them from its snapshot of the room, refreshed
//! about once a second with one store call, instead of asking the store for each: the visitor's
//! signed queue cookie carries their [`Place`] (their sequence number), and the snapshot says
//! where that sequence stands.
//!
//! # How exact a position from a snapshot is
//!
//! A snapshot holds the exact rank of a few waiters ([`checkpoint_ranks`]): every rank below
//! [`EXACT_RANKS`], then ranks about 1 % apart, up to the last waiter. A waiter between two
//! checkpoints is placed between their ranks in proportion to their scores
//! ([`RoomSnapshot::position_of`]). Sequence numbers are handed out one by one, so between
//! two checkpoints the only error comes from waiters who left between them; it is always less
//! than the checkpoints' rank gap, so **at the snapshot's time a position is exact below
//! [`EXACT_RANKS`] and within 1 % of the exact position above** (the `position_error_max`
//! of the benchmark, and `tests/redis/gateway_snapshot.rs`, measure it). A place behind the
//! snapshot's last waiter (an arrival since) is not placed by it: the store answers. In a line
//! of ten thousand or more, the Redis store shares the ranks above [`EXACT_RANKS`] between the
//! syncs of half a second (each gateway's once a second would otherwise read the same ranks
//! again), moved forward by the places the line moved since (`script/checkpoints.lua`): what
//! that does not see, waiters who left from the middle in that half second, adds to the error
//! above, not below [`EXACT_RANKS`], whose ranks every sync reads.
//!
//! A snapshot is as old as its gateway's last refresh: at most [`SNAPSHOT_MAX_AGE_MS`] when
//! it is used at all. In that time the line moves by the admissions (and skips) of that time,
//! so a shown position can be high by at most the admissions of the last
//! [`SNAPSHOT_MAX_AGE_MS`] (on top of the 1 % either way). A gateway's answer from its
//! snapshot carries the header `waiting-room-position-as-of`: when the position was true.
//! Nobody is let in from a snapshot: a waiter whose turn has come
//! (their place is ahead of the snapshot's head, or within [`NEAR_HEAD`] of it) asks the
//! store, which alone grants slots.
//!
//! # Liveness in coarse time epochs
//!
//! A check-in (a join, a store poll, or a gateway's batched report of the waiters whose polls
//! it answered) marks the waiter seen in the current *epoch*. The store keeps, per waiter, only
//! which epochs saw them (the Redis store in one small bitmap per epoch, not a record per
//! waiter), so liveness is to the epoch:
//! - **skipped at their turn** ([`LivenessRule::for_turn`]): epochs of `queue_ttl /`
//!   [`TURN_EPOCHS`]; a waiter seen in none of the last [`TURN_EPOCHS`] + 1 (the current one
//!   included) is skipped. Seen within `queue_ttl`: never skipped. Silent for longer than
//!   `queue_ttl * 5 / 4`: skipped;
//! - **swept from anywhere** ([`LivenessRule::for_abandon`]): epochs of `abandon_after /`
//!   [`ABANDON_EPOCHS`]; seen within `abandon_after`: kept; silent for longer than
//!   `abandon_after * 3 / 2`: swept as the sweep goes by (on the Redis store `* 7 / 4` for a
//!   waiter last seen by a gateway's sync in an epoch's last half: the gateway writes them
//!   into the next epoch early, so that the whole line is not written in the minute it
//!   begins).
//!
//! # The turn horizon
//!
//! The turn rule only matters for a waiter whose turn can come while a check-in still counts
//! for it: within `queue_ttl * 5 / 4`. A waiter a million places back cannot get there in that
//! time, so writing their turn check-in every epoch is work for nothing (at two million
//! waiters, most of a refresh's writes). A gateway therefore names a *horizon* with each
//! refresh ([`RoomSnapshot::turn_horizon`]): the score of the waiter as far back as the line
//! could move within that time, with a margin. Its [`SeenWaiters`] put the waiters behind the
//! horizon apart, and a store may leave out their turn check-ins, **provided that it then
//! counts every waiter with a score above the horizon as seen in the current epoch by the turn
//! rule**. So nobody seen is ever skipped for it, whatever horizon a gateway names (a stale or
//! a wrong one only makes more waiters look seen): a waiter left out was behind the horizon,
//! and the epoch counts everyone behind it. What it costs is a silent waiter whom the line
//! reaches faster than the horizon foresaw (a capacity raised a hundredfold): they are granted
//! at their turn, and the grant expires unclaimed, as for a Bloom false positive of the Redis
//! store. The Redis store keeps this rule in the epoch's first sequence number, which it
//! lowers to the horizon (everyone above it counts as joined since: `script/liveness.lua`); the
//! embedded store writes every check-in, and so needs no such rule.

use serde::Serialize;

use super::{AdmissionCounts, RoomPace, StoreFuture};
use crate::config::RoomPolicy;
use crate::session::SessionId;
pub use crate::vocab::{draw_score, Place};

mod silent;
pub use silent::SilentCounts;

/// A store's snapshots of the line: an optional capability of a [`Store`](super::Store), found
/// by [`Store::snapshots`](super::Store::snapshots). With it, each gateway answers waiting
/// polls from its snapshot, refreshed about once a second by one [`sync`](Self::sync) (and
/// offers event streams); without it, every waiting poll asks the store.
pub trait SnapshotStore: Send + Sync {
    /// One gateway's refresh of its [`RoomSnapshot`], in one step: records a check-in now for
    /// each session of `seen` that has a place in line (the waiters whose polls the gateway
    /// answered from its snapshot since its last refresh; the others are answered back in
    /// [`RoomSnapshot::unknown`], and nothing is stored for them), does the room's
    /// housekeeping (with a sweep of abandoned waiters of at most 100), and
    /// answers the line as it then stands.
    ///
    /// The check-ins of [`seen.beyond()`](SeenWaiters::beyond) count for the sweep's rule;
    /// for the turn's a store may leave them out if it then counts every waiter whose score is
    /// above [`seen.horizon()`](SeenWaiters::horizon) as seen in the current epoch by that
    /// rule ([the turn horizon](self#the-turn-horizon)). Nobody seen is skipped either way.
    fn sync(&self, policy: &RoomPolicy, seen: SeenWaiters) -> StoreFuture<RoomSnapshot>;
}

/// Ranks below this are all checkpoints: positions near the head are exact.
pub const EXACT_RANKS: u64 = 100;

/// Above [`EXACT_RANKS`], each checkpoint's rank is the last one's plus this fraction of it
/// (1 / 100): the gap, and so the error, is under 1 % of the rank.
pub const CHECKPOINT_GAP_DIVISOR: u64 = 100;

/// A gateway answers from a snapshot no older than this (by its own clock since it took it);
/// an older one is refreshed first.
pub const SNAPSHOT_MAX_AGE_MS: u64 = 2_000;

/// How often a gateway refreshes its snapshot while visitors are asking.
pub const SNAPSHOT_REFRESH_MS: u64 = 1_000;

/// A waiter whose estimated position is within this many of the head asks the store rather
/// than the snapshot: their turn may have come since the snapshot was taken, and the store is
/// the one to say so (and grant the slot).
pub const NEAR_HEAD: u64 = 50;

/// Epochs in `queue_ttl` for the turn's liveness rule.
pub const TURN_EPOCHS: u64 = 4;
/// Epochs in `abandon_after` for the sweep's liveness rule.
pub const ABANDON_EPOCHS: u64 = 2;

/// Ranks added to a turn horizon whatever the pace: a room that has not moved yet still looks
/// this far ahead.
pub const HORIZON_SLACK_RANKS: u64 = 1_000;

/// How many times the line's expected movement a turn horizon reaches.
pub const HORIZON_MARGIN: u64 = 3;

/// The waiters a gateway answered from its snapshot since its last refresh, for
/// [`SnapshotStore::sync`] to check in: those at or ahead of the refresh's turn
/// horizon, and those behind it (see [the turn horizon](self#the-turn-horizon)), whose turn
/// check-ins a store may leave out.
///
/// ```
/// use tower_waiting_room::store::SeenWaiters;
/// use tower_waiting_room::SessionId;
///
/// let (a, b) = (SessionId::random(), SessionId::random());
/// let seen = SeenWaiters::with_horizon(Some(1_000.0), [(a, 20.0), (b, 5_000.0)]);
/// assert_eq!(seen.near(), &[a]);
/// assert_eq!(seen.beyond(), &[b]);
/// assert_eq!(seen.horizon(), Some(1_000.0));
/// // Without a horizon every waiter is near: every check-in is written.
/// let all = SeenWaiters::new(vec![a, b]);
/// assert_eq!((all.near().len(), all.beyond().len(), all.horizon()), (2, 0, None));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeenWaiters {
    near: Vec<SessionId>,
    beyond: Vec<SessionId>,
    horizon: Option<f64>,
}

impl SeenWaiters {
    /// Every session checked in by both rules: no horizon.
    pub fn new(sessions: Vec<SessionId>) -> Self {
        Self {
            near: sessions,
            beyond: Vec::new(),
            horizon: None,
        }
    }

    /// The sessions, each with their score in line (their [`Place`]'s), put apart by
    /// `horizon`: those with a score above it are [`beyond`](Self::beyond) it. A horizon that
    /// is `None` or not a finite number puts everyone [`near`](Self::near).
    pub fn with_horizon(
        horizon: Option<f64>,
        sessions: impl IntoIterator<Item = (SessionId, f64)>,
    ) -> Self {
        let horizon = horizon.filter(|h| h.is_finite());
        let mut seen = Self {
            horizon,
            ..Self::default()
        };
        for (session, score) in sessions {
            match horizon {
                Some(h) if score > h => seen.beyond.push(session),
                _ => seen.near.push(session),
            }
        }
        if seen.beyond.is_empty() {
            // Nobody left out: no rule to keep.
            seen.horizon = None;
        }
        seen
    }

    /// The sessions at or ahead of the horizon (all of them without one): checked in by the
    /// turn rule and the sweep's.
    pub fn near(&self) -> &[SessionId] {
        &self.near
    }

    /// The sessions behind the horizon: checked in by the sweep's rule; a store may leave out
    /// their turn check-ins (see [the turn horizon](self#the-turn-horizon)).
    pub fn beyond(&self) -> &[SessionId] {
        &self.beyond
    }

    /// The horizon, a score in line; `None` when nobody is [`beyond`](Self::beyond) it.
    pub fn horizon(&self) -> Option<f64> {
        self.horizon
    }

    /// How many sessions, near and beyond.
    pub fn len(&self) -> usize {
        self.near.len() + self.beyond.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every session, near ones first.
    pub fn iter(&self) -> impl Iterator<Item = &SessionId> {
        self.near.iter().chain(&self.beyond)
    }

    /// The near and the beyond sessions, taken out.
    pub fn into_parts(self) -> (Vec<SessionId>, Vec<SessionId>) {
        (self.near, self.beyond)
    }
}

impl From<Vec<SessionId>> for SeenWaiters {
    fn from(sessions: Vec<SessionId>) -> Self {
        Self::new(sessions)
    }
}

/// One waiter's exact rank (0-based) at the snapshot's time, their score, and whether they
/// are silent by the turn's liveness rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Checkpoint {
    /// The waiter's score in the line (their sequence number, or a registrant's draw score).
    pub score: f64,
    /// How many stand ahead of them.
    pub rank: u64,
    /// Not alive by [`LivenessRule::for_turn`] at the snapshot's time: skipped at their turn
    /// unless they come back. Both stores say it by the same rule, with the same two
    /// allowances as the pace's [`silent`](super::RoomPace::silent) count: nobody is silent
    /// while silence is excused (the Redis store's, for a gateway that could not reach it),
    /// and a waiter whose turn check-ins a gateway left out behind its
    /// [turn horizon](self#the-turn-horizon) counts as alive (the rule counts them so).
    /// [`SilentCounts`] counts the silent ahead of any place from these.
    pub silent: bool,
}

/// The ranks a snapshot holds for a line of `waiting` people, ascending: every rank below
/// [`EXACT_RANKS`], then each the last plus a 1 / [`CHECKPOINT_GAP_DIVISOR`] of it, and the
/// last waiter's. About 1 100 for a line of two million. Every store uses this one schedule.
pub fn checkpoint_ranks(waiting: u64) -> impl Iterator<Item = u64> {
    let last = waiting.checked_sub(1);
    let mut next = Some(0u64);
    std::iter::from_fn(move || {
        let last = last?;
        let r = next?;
        next = if r >= last {
            None
        } else {
            let step = if r < EXACT_RANKS {
                1
            } else {
                (r / CHECKPOINT_GAP_DIVISOR).max(1)
            };
            Some((r + step).min(last))
        };
        Some(r)
    })
}

/// A room's line as one store call saw it, for a gateway to answer waiting polls with.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RoomSnapshot {
    /// The store's clock when it was taken (ms since the epoch).
    pub taken_at_ms: u64,
    /// The score of the first waiter in line (`None`: nobody waits). Everyone with a lower
    /// score has had their turn (granted a slot, or skipped), or left.
    pub head: Option<f64>,
    /// How many wait.
    pub waiting: u64,
    /// Exact ranks of some waiters, ascending ([`checkpoint_ranks`]).
    pub checkpoints: Vec<Checkpoint>,
    /// The room is paused.
    pub paused: bool,
    /// The room is open ([`RoomSettings::open`](super::RoomSettings::open)).
    pub open: bool,
    /// The store's clock is before the room's scheduled opening (nobody admitted yet).
    pub before_opening: bool,
    /// The room's scheduled closing has passed and the line is not kept: nobody waits on.
    pub line_closed: bool,
    /// Admissions lately, for the wait estimate.
    pub recent: AdmissionCounts,
    /// What they were measured over, for the wait estimate.
    pub pace: RoomPace,
    /// Of the sessions the call reported as seen, those without a place in line (skipped at
    /// their turn, swept, or never in it): the gateway asks the store at their next poll
    /// instead of showing them a place they no longer hold. Usually empty.
    pub unknown: Vec<SessionId>,
}

impl RoomSnapshot {
    /// The 1-based position of a waiter with line score `score`, by the snapshot's checkpoints
    /// (see the [module docs](self) for the bound). `None` if their place is ahead of the
    /// head: their turn has come, or they left; only the store can say which.
    pub fn position_of(&self, score: f64) -> Option<u64> {
        let head = self.head?;
        if score < head {
            return None;
        }
        let cps = &self.checkpoints;
        // The last checkpoint at or before the score.
        let i = cps.partition_point(|c| c.score <= score);
        if i == 0 {
            return Some(1);
        }
        let lo = cps[i - 1];
        let rank = match cps.get(i) {
            // Between two checkpoints: in proportion to the score, never past the next.
            Some(hi) => {
                let span = hi.score - lo.score;
                let frac = if span > 0.0 {
                    (score - lo.score) / span
                } else {
                    0.0
                };
                let gap = hi.rank - lo.rank;
                lo.rank + ((frac * gap as f64).floor() as u64).min(gap.saturating_sub(1))
            }
            // Behind the last waiter the snapshot saw: arrived since; sequence numbers are
            // handed out one by one.
            None if lo.score == score => lo.rank,
            None => lo.rank + ((score - lo.score).ceil() as u64).max(1),
        };
        Some(rank + 1)
    }

    /// Whether the snapshot saw the place at `score` at all: not behind its last waiter (a
    /// later arrival, whom the snapshot cannot place but by guessing).
    pub fn covers(&self, score: f64) -> bool {
        self.checkpoints
            .last()
            .is_some_and(|last| score <= last.score)
    }

    /// The turn horizon a gateway names with its next refresh (see
    /// [the turn horizon](self#the-turn-horizon)): the score of the waiter at the rank the line
    /// could reach within the time a turn check-in counts (`queue_ttl * 6 / 4`: the five
    /// epochs that count and the current one begun, plus a snapshot's age), taken
    /// [`HORIZON_MARGIN`] times over, plus one burst of the room's slots (its capacity, or one
    /// second's admissions at its rate) and [`HORIZON_SLACK_RANKS`]. The line's movement is
    /// its admissions and skips per second at their highest over the last minutes (the pace),
    /// and at least the live admission rate. `None` (every check-in written) when the line
    /// does not move from the snapshot (see [`answers_waiters`](Self::answers_waiters)), or
    /// when that rank is at or past its last waiter.
    pub fn turn_horizon(&self, queue_ttl_ms: u64) -> Option<f64> {
        if !self.answers_waiters() {
            return None;
        }
        let pace = &self.pace;
        let minute_ms = (super::MINUTE_BUCKETS * super::ADMISSION_BUCKET_MS) as f64;
        let bucket_ms = pace.into_bucket_ms.max(1_000) as f64;
        let per_ms = |count: u64, over_ms: f64| count as f64 / over_ms;
        let busiest_minute = pace.minutes.iter().copied().max().unwrap_or(0);
        let admitted = per_ms(self.recent.last_minute, minute_ms)
            .max(per_ms(busiest_minute, minute_ms))
            .max(per_ms(pace.current, bucket_ms))
            .max(f64::from(pace.admission_rate.unwrap_or(0)) / 1_000.0);
        let skipped = per_ms(pace.skipped.last_minute, minute_ms)
            .max(per_ms(pace.current_skipped, bucket_ms));
        let reach_ms = queue_ttl_ms * (TURN_EPOCHS + 2) / TURN_EPOCHS + SNAPSHOT_MAX_AGE_MS;
        let burst = match pace.admission_rate {
            Some(rate) => rate.min(pace.capacity),
            None => pace.capacity,
        };
        let moves = ((admitted + skipped) * reach_ms as f64).ceil() as u64;
        let rank = moves
            .saturating_mul(HORIZON_MARGIN)
            .saturating_add(u64::from(burst))
            .saturating_add(HORIZON_SLACK_RANKS);
        // The first checkpoint at or behind that rank (a horizon is never short of it), unless
        // it is the last waiter: then nobody could be left out.
        let at = self.checkpoints.partition_point(|c| c.rank < rank);
        self.checkpoints
            .get(at)
            .filter(|c| c.rank + 1 < self.waiting)
            .map(|c| c.score)
    }

    /// Whether visitors may be answered from the snapshot at all: the line moves (open, not
    /// paused), and neither a scheduled opening nor a closing that ends the line changes what
    /// they are told.
    pub fn answers_waiters(&self) -> bool {
        self.open && !self.before_opening && !self.line_closed
    }
}

/// Which epochs count a waiter as alive: epochs of `width_ms`, and a waiter last seen in
/// epoch `e` is alive at `now` if `e + keep >= epoch(now)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LivenessRule {
    /// Width of one epoch, ms (at least 1).
    pub width_ms: u64,
    /// Complete epochs before the current one that still count.
    pub keep: u64,
}

impl LivenessRule {
    /// The rule for skipping a silent waiter at their turn (`queue_ttl`).
    pub fn for_turn(policy: &RoomPolicy) -> Self {
        Self::of(policy.queue_ttl_ms, TURN_EPOCHS)
    }

    /// The rule for sweeping an abandoned waiter (`abandon_after`, at least `queue_ttl`).
    pub fn for_abandon(policy: &RoomPolicy) -> Self {
        Self::of(policy.effective_abandon_after_ms(), ABANDON_EPOCHS)
    }

    fn of(ttl_ms: u64, epochs: u64) -> Self {
        Self {
            width_ms: (ttl_ms / epochs).max(1),
            keep: epochs,
        }
    }

    /// The epoch of a time.
    pub fn epoch(&self, at_ms: u64) -> u64 {
        at_ms / self.width_ms
    }

    /// Whether a waiter last seen in epoch `seen` is alive at `now`.
    pub fn alive(&self, seen: u64, now_ms: u64) -> bool {
        seen + self.keep >= self.epoch(now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(scores_ranks: &[(f64, u64)], waiting: u64) -> RoomSnapshot {
        RoomSnapshot {
            taken_at_ms: 0,
            head: scores_ranks.first().map(|c| c.0),
            waiting,
            checkpoints: scores_ranks
                .iter()
                .map(|&(score, rank)| Checkpoint {
                    score,
                    rank,
                    silent: false,
                })
                .collect(),
            paused: false,
            open: true,
            before_opening: false,
            line_closed: false,
            recent: AdmissionCounts::default(),
            pace: RoomPace::default(),
            unknown: Vec::new(),
        }
    }

    #[test]
    fn checkpoints_are_exact_near_the_head_then_one_percent_apart() {
        assert_eq!(checkpoint_ranks(0).count(), 0);
        assert_eq!(checkpoint_ranks(1).collect::<Vec<_>>(), vec![0]);
        assert_eq!(checkpoint_ranks(5).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        let ranks: Vec<u64> = checkpoint_ranks(2_000_000).collect();
        assert_eq!(*ranks.last().unwrap(), 1_999_999);
        assert!(ranks.len() < 1_200, "{} checkpoints", ranks.len());
        for w in ranks.windows(2) {
            let gap = w[1] - w[0];
            assert!(gap >= 1);
            if w[0] >= EXACT_RANKS {
                assert!(gap * CHECKPOINT_GAP_DIVISOR <= w[0].max(CHECKPOINT_GAP_DIVISOR));
            } else {
                assert_eq!(gap, 1);
            }
        }
    }

    #[test]
    fn positions_between_checkpoints_stay_under_the_gap() {
        // Sequences 1000..=1999 with every third one gone: ranks by checkpoints.
        let line: Vec<f64> = (1000..2000u64)
            .filter(|s| s % 3 != 0)
            .map(|s| s as f64)
            .collect();
        let cps: Vec<(f64, u64)> = checkpoint_ranks(line.len() as u64)
            .map(|r| (line[r as usize], r))
            .collect();
        let snap = snapshot(&cps, line.len() as u64);
        for (exact, &score) in line.iter().enumerate() {
            let shown = snap.position_of(score).unwrap();
            let exact = exact as u64 + 1;
            if exact <= EXACT_RANKS {
                assert_eq!(shown, exact);
            } else {
                assert!(shown.abs_diff(exact) * 100 <= exact, "{shown} vs {exact}");
            }
        }
        // Ahead of the head: the store decides. Behind the tail: after everyone seen.
        assert_eq!(snap.position_of(999.0), None);
        let tail = *line.last().unwrap();
        assert_eq!(snap.position_of(tail + 3.0), Some(line.len() as u64 + 3));
    }

    #[test]
    fn liveness_is_to_the_epoch() {
        let rule = LivenessRule::of(120_000, TURN_EPOCHS);
        assert_eq!(rule.width_ms, 30_000);
        let seen_at = 1_000_000u64;
        let seen = rule.epoch(seen_at);
        // Seen within queue_ttl: alive; silent for more than 5/4 of it: not.
        assert!(rule.alive(seen, seen_at + 120_000));
        assert!(!rule.alive(seen, seen_at + 150_001));
    }
}
