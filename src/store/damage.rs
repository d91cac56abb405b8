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

/// A number a store keeps for a room, named after the field (or the member, or the score) of
/// the room's Redis keys that holds it (see `docs/redis.md`; the settings fields in the header
/// of `src/store/redis/script/keys.lua`); other stores map them to whatever holds the same
/// numbers. Some name several fields of one concern, damaged together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// `settings`: `capacity`.
    Capacity,
    /// `settings`: `rate`, admissions per second (0: none).
    Rate,
    /// `settings`: `paused` (0 or 1).
    Paused,
    /// `settings`: `open` (0 or 1).
    Open,
    /// `settings`: `born`, when the room was first seen (ms).
    Born,
    /// `settings`: `moved`, the room's first movement (ms), and `early`, the admissions before it.
    FirstMove,
    /// `settings`: `due`, the earliest expiry of a slot (ms).
    Due,
    /// `settings`: `bans`, the time no ban lasts beyond (ms).
    Bans,
    /// `settings`: `noted`, the second of the last arrival noted.
    Noted,
    /// `settings`: `cursor`, the score the sweep goes on after.
    Cursor,
    /// `settings`: `cap_before` and `cap_at`, the capacity before its last change and when.
    CapacityChange,
    /// `settings`: `paused_at`, `pause_start` and `pause_end`, the current and the last pause.
    Pauses,
    /// `settings`: `opens_at` and `closes_at`, the schedule kept for calls without one.
    Schedule,
    /// `settings`: the epoch each liveness bitmap holds (`turn0` .. `turn5`, `abandon0` ..
    /// `abandon3`).
    Epochs,
    /// `settings`: each liveness epoch's first sequence numbers (`turn0from` ..
    /// `abandon3from`, `turn0first` .. `turn5first`).
    FirstNumbers,
    /// `seq`, the last sequence number handed out.
    Seq,
    /// `bucket`: `milli` and `last`, the admission-rate budget.
    Budget,
    /// `admitted`: the current bucket's number and counts (`t<i>`, `n<i>`, `k<i>`).
    AdmissionCounts,
    /// `arrivals`: the times of arrival noted (the members).
    Arrivals,
    /// `active` and `granted`: the slots' expiries (their scores). Only the forms a sorted set's
    /// score can hold apply (Redis refuses `nan`, `1e999` and an empty score).
    SlotExpiries,
}

impl Field {
    /// Every field.
    pub const ALL: [Field; 20] = [
        Field::Capacity,
        Field::Rate,
        Field::Paused,
        Field::Open,
        Field::Born,
        Field::FirstMove,
        Field::Due,
        Field::Bans,
        Field::Noted,
        Field::Cursor,
        Field::CapacityChange,
        Field::Pauses,
        Field::Schedule,
        Field::Epochs,
        Field::FirstNumbers,
        Field::Seq,
        Field::Budget,
        Field::AdmissionCounts,
        Field::Arrivals,
        Field::SlotExpiries,
    ];
}

/// A damaged number as it may be found in a store: text that a lax reader (Lua's `tonumber`,
/// `strtod`) takes for a number, but that is no whole number in its field's range as the
/// store writes one (Redis's integer grammar: no leading zero, no `-0`, no sign but `-`, no
/// space, no exponent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BadNumber {
    /// `inf`.
    Infinity,
    /// `-inf`.
    MinusInfinity,
    /// `nan`.
    NotANumber,
    /// `1e999` (infinity, written as a number).
    Overflow,
    /// `2.5`.
    Fraction,
    /// `-1`.
    Negative,
    /// `0x10`.
    Hexadecimal,
    /// The empty string.
    Empty,
    /// `99999999999999999999`: 20 digits, beyond any counter (and 2^64).
    TwentyDigits,
    /// `01`: a leading zero, which Redis's `INCR` refuses.
    LeadingZero,
    /// `007`: zeros before the digits.
    Padded,
    /// `00`.
    DoubleZero,
    /// `-0`.
    NegativeZero,
    /// `+7`: a sign the scripts never write.
    PlusSign,
    /// ` 7`: a space before the digits.
    Spaced,
    /// `1e3`: an exponent.
    Exponent,
    /// `1e300`: huge, but finite (a score Redis keeps).
    Huge,
}

impl BadNumber {
    /// Every form.
    pub const ALL: [BadNumber; 17] = [
        BadNumber::Infinity,
        BadNumber::MinusInfinity,
        BadNumber::NotANumber,
        BadNumber::Overflow,
        BadNumber::Fraction,
        BadNumber::Negative,
        BadNumber::Hexadecimal,
        BadNumber::Empty,
        BadNumber::TwentyDigits,
        BadNumber::LeadingZero,
        BadNumber::Padded,
        BadNumber::DoubleZero,
        BadNumber::NegativeZero,
        BadNumber::PlusSign,
        BadNumber::Spaced,
        BadNumber::Exponent,
        BadNumber::Huge,
    ];

    /// The text written in the store.
    pub fn text(self) -> &'static str {
        match self {
            BadNumber::Infinity => "inf",
            BadNumber::MinusInfinity => "-inf",
            BadNumber::NotANumber => "nan",
            BadNumber::Overflow => "1e999",
            BadNumber::Fraction => "2.5",
            BadNumber::Negative => "-1",
            BadNumber::Hexadecimal => "0x10",
            BadNumber::Empty => "",
            BadNumber::TwentyDigits => "99999999999999999999",
            BadNumber::LeadingZero => "01",
            BadNumber::Padded => "007",
            BadNumber::DoubleZero => "00",
            BadNumber::NegativeZero => "-0",
            BadNumber::PlusSign => "+7",
            BadNumber::Spaced => " 7",
            BadNumber::Exponent => "1e3",
            BadNumber::Huge => "1e300",
        }
    }
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
    /// The settings were written by a newer version of the crate whose changes are additive:
    /// this one reads them (Redis: `HSET settings v n vmin <this crate's version>`).
    NewerAdditiveSettings(u32),
    /// A number of the room holds a damaged value (Redis: `HSET`, `SET` or `ZADD` of the text
    /// in each field the [`Field`] names).
    BadNumber(Field, BadNumber),
    /// The session's place in line (Redis: its score in the `line` sorted set, `ZADD XX`) holds
    /// the damaged number. Only the forms a sorted set's score can hold apply: Redis refuses
    /// `nan`, `1e999`, the empty string and ` 7`, and Valkey `0x10` too (a harness answers
    /// `Err` for those). A form the score reads as a place (`01` is 1, `1e3` is 1000, `-0` is 0,
    /// `-1` a registrant's draw) is a place, wherever it puts the session; any other (`inf`,
    /// `-inf`, beyond 2^53) is none, and its waiter goes to the back of the line. A store that
    /// holds places as integers cannot suffer it.
    Place(SessionId, BadNumber),
    /// The admission-rate budget lost one of its fields (Redis: `HDEL` of `last`).
    BucketFieldLost,
    /// The session keeps its place in line, but its check-in is gone.
    CheckInLost(SessionId),
    /// A check-in at the given time (ms) for a session that has no place in line.
    StrayCheckIn(SessionId, u64),
    /// A session holding a slot also gets a place at the back of the line.
    SlotHolderInLine(SessionId),
    /// The session's single-use ticket record is gone (Redis: `DEL` of its `tk:<session>` key),
    /// while its admission goes on.
    TicketLost(SessionId),
}
