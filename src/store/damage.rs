//! Damage to a room's state behind the store's back, named for the store conformance suite
//! (`testing::conformance`, which re-exports [`Damage`] and [`Part`]) and for the embedded
//! store's test hook that does it. Kept in the store, below the suite, so that the store does
//! not import from the testing module.

use crate::session::SessionId;

/// A part of a room's state in a store, named after the Redis keys of the room (see
/// `docs/redis.md`); other stores map them to whatever holds the same facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Part {
    /// The last sequence number handed out.
    Seq,
    /// The line: waiters in order of arrival.
    Line,
    /// The waiters' last check-ins.
    Seen,
    /// Claimed slots and their expiries.
    Active,
    /// Granted, not yet claimed slots and their expiries.
    Granted,
    /// The admission-rate budget.
    Bucket,
    /// The admission counts (the ring of time buckets).
    Admitted,
    /// The live settings (capacity, rate, paused, open).
    Settings,
    /// The times of arrival (for the oldest wait).
    Arrivals,
    /// The banned sessions.
    Banned,
}

impl Part {
    /// Every part, in the order of the Redis script's `KEYS`.
    pub const ALL: [Part; 10] = [
        Part::Seq,
        Part::Line,
        Part::Seen,
        Part::Active,
        Part::Granted,
        Part::Bucket,
        Part::Admitted,
        Part::Settings,
        Part::Arrivals,
        Part::Banned,
    ];
}

/// Damage done to a room's state behind the store's back, as a lost key (eviction, a stray
/// `DEL`), an operator's hand edit or a half-applied bug would do it. A store must answer every
/// call after it (repairing what it can), never fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Damage {
    /// The part is gone (Redis: `DEL` of the key).
    Lost(Part),
    /// The part holds a value of the wrong type (Redis: a string where a sorted set or a hash
    /// belongs, a hash where the sequence string belongs).
    WrongType(Part),
    /// A number in the part is not a number: the sequence (`Seq`), both fields of the budget
    /// (`Bucket`), the current bucket's admission count (`Admitted`), or the capacity in the
    /// settings (`Settings`).
    NotANumber(Part),
    /// The settings were written by another version of the crate (Redis: `HSET settings v n`).
    SettingsVersion(u32),
    /// The admission-rate budget lost one of its fields (Redis: `HDEL` of `last`).
    BucketFieldLost,
    /// The session keeps its place in line, but its check-in is gone.
    CheckInLost(SessionId),
    /// A check-in at the given time (ms) for a session that has no place in line.
    StrayCheckIn(SessionId, u64),
    /// A session holding a slot also gets a place at the back of the line.
    SlotHolderInLine(SessionId),
}
