//! [`Place`]: where a waiter stands in the line, as the queue cookie carries it and the store
//! and the gateway's snapshot read it.

use serde::Serialize;

/// Bits of a pre-queue draw: a double holds every 52-bit integer, and `draw / 2^52 - 1` (the
/// Redis line's score) exactly.
pub const DRAW_BITS: u32 = 52;

/// Where a waiter stands in the store's order: what the queue cookie carries, so a gateway
/// can place them in its snapshot without asking the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// Their sequence number: the line's score of everyone who arrived after any opening.
    Seq(u64),
    /// A registrant of a scheduled opening: their score is their keyed draw's,
    /// `draw / 2^52 - 1` ([`EventSchedule::draw`](crate::config::EventSchedule::draw)), which
    /// the gateway computes again from the session id.
    Drawn,
}

impl Place {
    /// The place's score in the line, given the session's draw (used for [`Place::Drawn`]).
    pub fn score(self, draw: impl FnOnce() -> u64) -> f64 {
        match self {
            Place::Seq(seq) => seq as f64,
            Place::Drawn => draw_score(draw()),
        }
    }
}

/// A registrant's score: `draw / 2^52 - 1`, in `[-1, 0)`, exact in a double.
pub fn draw_score(draw: u64) -> f64 {
    draw as f64 / (1u64 << DRAW_BITS) as f64 - 1.0
}
