//! The schedule: a pre-queue before the opening, a closing after which newcomers are refused.
//! The same rules as `src/store/redis/script/schedule.lua`.
//!
//! And the pre-queue's container ([`PreQueue`]): the registrants of a scheduled opening ranked
//! by their draw instead of a sequence number, in O(log n), all ahead of every sequence
//! number, as the script's scores in `[-1, 0)` put them.

use std::collections::BTreeSet;

use super::keys::{fenwick_select, lowbit};
use super::RoomState;
use crate::config::{EventSchedule, RoomPolicy};
use crate::session::SessionId;

impl RoomState {
    /// The schedule, as the script: kept from the calls that come with it, followed by a
    /// call without one (a gateway built without it) while the kept opening is ahead. `Some`:
    /// the call's policy with the kept schedule, to go by instead of its own.
    pub(super) fn apply_schedule(&mut self, policy: &RoomPolicy, now: u64) -> Option<RoomPolicy> {
        match &policy.schedule {
            Some(s) => {
                self.kept_schedule = Some((s.opens_at_ms, s.closes_at_ms, s.keep_line_after_close));
                None
            }
            None => match self.kept_schedule {
                Some((opens, closes, keep)) if opens > now => Some(
                    policy
                        .clone()
                        .with_schedule(Some(EventSchedule::kept(opens, closes, keep))),
                ),
                _ => None,
            },
        }
    }
}

/// When a waiter's check-in at `now` counts as made: before a scheduled opening, at the opening,
/// so a registrant's silence counts from then (nobody is skipped or swept for waiting for it).
pub(super) fn check_in_time(policy: &RoomPolicy, now: u64) -> u64 {
    match &policy.schedule {
        Some(s) => now.max(s.opens_at_ms),
        None => now,
    }
}

/// Whether the event's closing time has passed: newcomers are refused.
pub(super) fn after_closing(policy: &RoomPolicy, now: u64) -> bool {
    policy
        .schedule
        .as_ref()
        .is_some_and(|s| s.after_closing(now))
}

/// Whether the event closed and keeps no line: nobody without a slot is let in or promoted.
pub(super) fn line_closed(policy: &RoomPolicy, now: u64) -> bool {
    policy
        .schedule
        .as_ref()
        .is_some_and(|s| s.after_closing(now) && !s.keep_line_after_close)
}

/// Bits of a draw that pick its bucket in [`PreQueue`]: 16 384 buckets, about 61 registrants
/// each in a pre-queue of a million.
const PRE_BUCKET_BITS: u32 = 14;
const PRE_BUCKETS: usize = 1 << PRE_BUCKET_BITS;

/// The pre-queue of a scheduled opening: registrants by draw, with the rank of each in
/// O(log n): the draws are uniform (keyed hashes), so a Fenwick tree over the count of each
/// bucket of draws (the top [`PRE_BUCKET_BITS`] bits) gives the registrants of the lower
/// buckets, and the rest is a walk through the registrant's own bucket (a few dozen entries
/// for a million registrants). Insertion and removal are O(log n). Nothing is ever renumbered
/// or moved, at the opening or after: bounded work per call, whatever the pre-queue's size.
#[derive(Debug, Default)]
pub(super) struct PreQueue {
    order: BTreeSet<(u64, SessionId)>,
    /// 1-based Fenwick tree over the buckets' counts; empty while the pre-queue is.
    pub(super) counts: Vec<u32>,
}

impl PreQueue {
    fn bucket(draw: u64) -> usize {
        let shift = crate::config::DRAW_BITS - PRE_BUCKET_BITS;
        // A draw is below 2^52; anything above (never made by the crate) goes in the last.
        usize::try_from(draw >> shift).map_or(PRE_BUCKETS - 1, |b| b.min(PRE_BUCKETS - 1))
    }

    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub(super) fn first(&self) -> Option<(u64, SessionId)> {
        self.order.first().copied()
    }

    /// The draw of the registrant at 0-based rank `k`: the bucket holding it by a descent of
    /// the Fenwick tree, then a walk through that bucket. O(log n).
    pub(super) fn select(&self, k: u64) -> Option<u64> {
        self.select_entry(k).map(|(draw, _)| draw)
    }

    /// The draw and the session of the registrant at 0-based rank `k`, as [`select`](Self::select).
    pub(super) fn select_entry(&self, k: u64) -> Option<(u64, SessionId)> {
        if k >= self.order.len() as u64 {
            return None;
        }
        let (bucket, within) = fenwick_select(&self.counts, k);
        let start = (bucket as u64) << (crate::config::DRAW_BITS - PRE_BUCKET_BITS);
        self.order
            .range((start, SessionId::from_bytes([0; 16]))..)
            .nth(within as usize)
            .copied()
    }

    pub(super) fn insert(&mut self, draw: u64, s: SessionId) {
        if self.counts.is_empty() {
            self.counts = vec![0; PRE_BUCKETS + 1];
        }
        if self.order.insert((draw, s)) {
            let mut i = Self::bucket(draw) + 1;
            while i < self.counts.len() {
                self.counts[i] += 1;
                i += lowbit(i);
            }
        }
    }

    pub(super) fn remove(&mut self, draw: u64, s: SessionId) {
        if self.order.remove(&(draw, s)) {
            let mut i = Self::bucket(draw) + 1;
            while i < self.counts.len() {
                self.counts[i] -= 1;
                i += lowbit(i);
            }
            if self.order.is_empty() {
                // An idle room keeps no tree.
                self.counts = Vec::new();
            }
        }
    }

    /// The 1-based rank of `(draw, s)`: those of the lower buckets, then its own bucket's up to
    /// it.
    pub(super) fn rank(&self, draw: u64, s: SessionId) -> u64 {
        let bucket = Self::bucket(draw);
        let mut below = 0u64;
        let mut i = bucket;
        while i > 0 {
            below += u64::from(self.counts[i]);
            i -= lowbit(i);
        }
        let start = (bucket as u64) << (crate::config::DRAW_BITS - PRE_BUCKET_BITS);
        let within = self
            .order
            .range((start, SessionId::from_bytes([0; 16]))..=(draw, s))
            .count();
        below + within as u64
    }

    /// Forgets every registrant (the damage hook's lost line).
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }
}
