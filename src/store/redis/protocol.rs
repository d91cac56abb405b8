//! The protocol between [`RedisStore`](super::RedisStore) and its script (`script/*.lua`): the keys
//! in their order, the arguments in their order (`calls.rs`), and the reply codes ([`reply`]).
//! The script says the same from the other side, and unit tests hold the two sides to each
//! other: each function's `ARGV` and its count, the packed numbers' order and the library's
//! name (`calls.rs`), the reply codes, the shared constants and what each function's header says
//! it runs (`protocol/tests.rs`).

use redis::{ErrorKind, RedisError, ServerErrorKind};

use super::breaker::ErrorClass;
pub(crate) use super::calls::packed_numbers;
use super::calls::{Call, Configure};

use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::snapshot::{ABANDON_EPOCHS, TURN_EPOCHS};
use crate::store::{
    AdmissionCounts, Checkpoint, Decision, Place, RoomPace, RoomSettings, RoomSnapshot, RoomStats,
    SettingsChange, StoreError, StoreErrorKind, HISTORY_MINUTES,
};

/// The room's function library, one Lua chunk assembled from its files under `script/` (one per
/// concern; `keys.lua` first, for its `#!lua` line, and `register.lua` last, after every
/// definition its function calls): sent by `FUNCTION LOAD REPLACE`, called by `FCALL`
/// `<LIBRARY>_<op>` ([`LIBRARY`](super::calls::LIBRARY), `calls.rs`). One chunk, so the files
/// share its top-level locals (the constants and the tables `R`, `F`, `OPERATIONS`, `REPLY`).
pub(crate) const SCRIPT: &str = concat!(
    include_str!("script/keys.lua"),
    include_str!("script/stored.lua"),
    include_str!("script/time.lua"),
    include_str!("script/call.lua"),
    include_str!("script/settings.lua"),
    include_str!("script/schedule.lua"),
    include_str!("script/liveness.lua"),
    include_str!("script/check_in.lua"),
    include_str!("script/line.lua"),
    include_str!("script/pace.lua"),
    include_str!("script/checkpoints.lua"),
    include_str!("script/sync.lua"),
    include_str!("script/main.lua"),
    include_str!("script/visitor.lua"),
    include_str!("script/operator.lua"),
    include_str!("script/fast_path.lua"),
    include_str!("script/batch.lua"),
    include_str!("script/tickets.lua"),
    include_str!("script/auto.lua"),
    include_str!("script/register.lua"),
);

/// Whether `e` is the server's answer to an `FCALL` of a function it does not have (a flushed
/// or restarted server, a failover to a replica that missed the load, `FUNCTION FLUSH`). It has
/// no code of its own (`ERR Function not found`, the same text in Redis and Valkey), so this is
/// the one error told by its text; it only decides whether to load the library and retry once.
pub(crate) fn is_function_not_found(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::ResponseError)
        && e.detail()
            .is_some_and(|d| d.to_ascii_lowercase().contains("function not found"))
}

/// The room's keys in the script's `KEYS` order, each `{prefix}:{room}:{name}` with the room as
/// the hash tag (the braces are literal), so a Redis Cluster keeps a room in one slot. After
/// the nine structures come the two rings of liveness bitmaps: the turn ring
/// ([`TURN_EPOCHS`] + 2 keys) and the abandon ring ([`ABANDON_EPOCHS`] + 2 keys); last, the
/// fast path's window (`fast`).
pub(crate) const KEY_NAMES: [&str; KEY_COUNT] = [
    "seq", "line", "active", "granted", "bucket", "admitted", "settings", "arrivals", "banned",
    "turn0", "turn1", "turn2", "turn3", "turn4", "turn5", "abandon0", "abandon1", "abandon2",
    "abandon3", "fast",
];

/// How many keys a room has.
pub(crate) const KEY_COUNT: usize =
    9 + (TURN_EPOCHS as usize + 2) + (ABANDON_EPOCHS as usize + 2) + 1;

/// The keys of `room` under `prefix`, in [`KEY_NAMES`] order.
pub(crate) fn keys(prefix: &str, room: &str) -> [String; KEY_COUNT] {
    KEY_NAMES.map(|k| format!("{prefix}:{{{room}}}:{k}"))
}

/// How many bits under its allocator's size class each liveness bitmap is (the script's
/// `BLOOM_SLACK`): the bitmap's string holds the sentinel bit too, and Redis allocates it with a
/// header of up to 9 bytes and a NUL. At the class exactly, that is a few bytes past it, and the
/// next class is larger (each 4 MiB bitmap of a line of two million took 5 MiB, measured with
/// `MEMORY USAGE`).
pub(crate) const BLOOM_SLACK: u64 = 128;

/// How many of a session id's bytes a room of settings version 6 keeps as its member in the
/// sorted sets (the script's `MEMBER_BYTES`): Redis holds a member of up to 14 bytes in 16 bytes
/// of its allocator, a whole 16-byte id in 32 (a room of version 5 keeps those).
pub(crate) const MEMBER_BYTES: usize = 14;

/// A session's member in the sorted sets of a room of settings version 6.
pub(crate) fn member(session: &SessionId) -> &[u8] {
    &session.as_bytes()[..MEMBER_BYTES]
}

/// A sync's early check-ins go into the abandon ring's next epoch in the last
/// `1 / EARLY_WINDOW` of its current one (the script's `EARLY_WINDOW`; `script/liveness.lua`,
/// early check-ins; `checked_in.rs` draws each session's moment in it).
pub(crate) const EARLY_WINDOW: u64 = 2;

/// The size in bits of each liveness bitmap (a Bloom filter with two bits per session) for a
/// line of at most `max_queue_len`: [`BLOOM_SLACK`] under the allocator's size class at or
/// above 16 bits per waiter, between 2^16 and 2^32 (Redis's largest string). jemalloc's
/// classes (Redis's own allocator) are four to each power of two `P`, `P / 2 + j * P / 8` for
/// `j` from 1 to 4: a bitmap so sized takes at most a quarter more than it needs, where the
/// next power of two took up to twice (a line of ten million: 20 MiB each, not 32). The
/// script computes the same (`F.bloom_bits`).
pub(crate) fn bloom_bits(max_queue_len: u64) -> u64 {
    let need = max_queue_len.saturating_mul(16).clamp(1 << 16, 1 << 32);
    let power = need.next_power_of_two();
    let class = if power <= 1 << 16 {
        power
    } else {
        let eighth = power / 8;
        need.div_ceil(eighth) * eighth
    };
    class - BLOOM_SLACK
}

/// The two bits a session sets in each liveness bitmap of `bits` bits: the big-endian u32 of
/// its id's bytes 0..4 and 4..8, each mod `bits` (the script computes the same for the one
/// session of an enter or poll).
pub(crate) fn bloom_offsets(id: &[u8; 16], bits: u64) -> (u32, u32) {
    let x = u64::from(u32::from_be_bytes([id[0], id[1], id[2], id[3]]));
    let y = u64::from(u32::from_be_bytes([id[4], id[5], id[6], id[7]]));
    // `bits` is at most 2^32, so each offset fits a u32.
    ((x % bits) as u32, (y % bits) as u32)
}

/// `sync`'s `sessions`: the ids of the sessions to look up, 16 raw bytes each (their offsets
/// follow in their own list, [`offsets_arg`]).
pub(crate) fn seen_arg(seen: &[SessionId]) -> Vec<u8> {
    let mut list = Vec::with_capacity(seen.len() * SEEN_ENTRY_BYTES);
    for s in seen {
        list.extend_from_slice(s.as_bytes());
    }
    list
}

/// Each session's two Bloom offsets ([`bloom_offsets`]) in bitmaps of `bits` bits.
pub(crate) fn offsets_of(
    sessions: &[SessionId],
    bits: u64,
) -> impl Iterator<Item = (u32, u32)> + Clone + '_ {
    sessions
        .iter()
        .map(move |s| bloom_offsets(s.as_bytes(), bits))
}

/// A list of `sync`'s Bloom offsets ([`calls::Sync`](super::calls::Sync)'s lists): per session its two offsets in decimal, `"<x> <y> "`. Text, not binary:
/// Redis formats a BITFIELD argument that the script made from a Lua number (about a
/// microsecond for each bit of each ring, measured), and takes a string as it is.
pub(crate) fn offsets_arg(offsets: impl IntoIterator<Item = (u32, u32)>) -> Vec<u8> {
    let offsets = offsets.into_iter();
    let mut list = Vec::with_capacity(offsets.size_hint().0 * 18);
    for (x, y) in offsets {
        push_decimal(&mut list, x);
        list.push(b' ');
        push_decimal(&mut list, y);
        list.push(b' ');
    }
    list
}

fn push_decimal(out: &mut Vec<u8>, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Scores below this are whole numbers exactly as doubles (2^53): a turn horizon beyond it is
/// not sent (nobody's sequence number gets there).
pub(crate) const MAX_SAFE_SCORE: f64 = 9_007_199_254_740_992.0;

/// The bytes of one session in `sync`'s list of sessions to look up.
pub(crate) const SEEN_ENTRY_BYTES: usize = 16;

/// The operation, for the schedule's draw ([`schedule_arg`]).
pub(crate) use crate::store::StoreOp as Op;

/// The reply codes, the first element of every reply of the room's operations. The script names
/// each the same, in lower case (`script/keys.lua`'s `REPLY`, which every reply is built with):
/// a unit test holds the two tables equal.
pub(crate) mod reply {
    /// Each code, and, for the test, all of them by name.
    macro_rules! codes {
        ($($(#[$doc:meta])* $name:ident = $n:literal,)*) => {
            $($(#[$doc])* pub(crate) const $name: i64 = $n;)*

            /// Every code by its name, as written here.
            #[cfg(test)]
            pub(crate) const ALL: &[(&str, i64)] = &[$((stringify!($name), $n),)*];
        };
    }

    codes! {
        /// `{0, 0, 0}`: the session has no place and no slot (poll, heartbeat).
        UNKNOWN = 0,
        /// `{1, expires_at_ms, 0}`.
        ADMITTED = 1,
        /// `{2, position, waiting, paused, place}`: place is the sequence number, or
        /// [`DRAWN`] for a registrant with a draw score.
        WAITING = 2,
        /// The place of a waiting reply for a registrant (a draw score, not a sequence number).
        DRAWN = -1,
        /// `{3, 0, waiting}`.
        FULL = 3,
        /// `{4, released (0 or 1), 0}`.
        RELEASED = 4,
        /// `{5, admitted, granted, waiting, last_minute, last_five_minutes, capacity, rate,
        /// paused, open, oldest_wait_ms or -1, admissions per minute...}`.
        STATS = 5,
        /// `{6, 0, 0}`: the room is closed.
        CLOSED = 6,
        /// `{7, 0, 0}`: the session is banned.
        BANNED = 7,
        /// `{8, capacity, rate, paused, open}` after the change, then the same four before it.
        SETTINGS = 8,
        /// `{9, admitted}`.
        ADMITTED_NEXT = 9,
        /// `{10, had a place or slot}`.
        BANNED_NOW = 10,
        /// `{11, opens_at_ms, 0}`: registered in the pre-queue, the room not open yet.
        SCHEDULED = 11,
        /// `{12, now_ms, waiting, paused, open, before_opening, line_closed, head, last_minute,
        /// last_five_minutes, pace..., n, rank, score, silent, ...}`: a snapshot (`sync`);
        /// head and scores are strings, silent 0 or 1.
        SNAPSHOT = 12,
        /// `{13, capacity before}`: the controller's decision written (`auto_apply`).
        AUTO_APPLIED = 13,
        /// `{14}`: the caller holds no live lease; nothing written.
        AUTO_NOT_DECIDING = 14,
        /// `{15, why}`: the controller is off (`'set_by_hand'` or `'changed_elsewhere'`);
        /// nothing written.
        AUTO_OFF = 15,
        /// `{16, capacity}`: the room's capacity is not the one the controller last wrote; it
        /// is now off (`changed_elsewhere`), nothing else written.
        AUTO_CHANGED = 16,
        /// `{17, first, waiting}`: a batch of n newcomers placed by the batch's fast path
        /// (`join_batch`): the i-th (from 1) at place `first + i - 1`, position and waiting
        /// `waiting + i`, not paused.
        PLACED = 17,
    }
}

/// The last argument for a room with a schedule (any operation):
/// `schedule:<opens_at_ms>:<closes_at_ms or 0>:<keep line 0|1>:<draw>`, the draw being the
/// session's for `enter` (the only operation that places anyone), 0 otherwise. `None` for a
/// room without a schedule: nothing is sent.
pub(crate) fn schedule_arg(
    op: Op,
    policy: &RoomPolicy,
    session: Option<SessionId>,
) -> Option<String> {
    let schedule = policy.schedule.as_ref()?;
    let draw = match (op, session) {
        (Op::Enter, Some(s)) => schedule.draw(s),
        _ => 0,
    };
    Some(format!(
        "schedule:{}:{}:{}:{draw}",
        schedule.opens_at_ms,
        schedule.closes_at_ms.unwrap_or(0),
        u8::from(schedule.keep_line_after_close),
    ))
}

/// `change` as `<LIBRARY>_configure` takes it (`script/operator.lua`): 0 leaves the capacity
/// as it is, -1 any other setting.
pub(crate) fn configure(
    call: Call,
    change: &SettingsChange,
    schedule: Option<String>,
) -> Configure {
    let unchanged = -1;
    let flag = |b: Option<bool>| b.map_or(unchanged, i64::from);
    Configure {
        call,
        capacity: change.capacity.map_or(0, |c| i64::from(c.max(1))),
        rate: change
            .admission_rate
            .map_or(unchanged, |r| i64::from(r.unwrap_or(0))),
        paused: flag(change.paused),
        open: flag(change.open),
        end_slots: change.ends_slots(),
        schedule,
    }
}

/// The settings in a reply's fields `capacity, rate, paused, open`.
pub(crate) fn settings(fields: &[i64]) -> Result<RoomSettings, StoreError> {
    match *fields {
        [capacity, rate, paused @ (0 | 1), open @ (0 | 1)] => Ok(RoomSettings {
            capacity: u32::try_from(capacity).unwrap_or(u32::MAX).max(1),
            admission_rate: u32::try_from(rate).ok().filter(|&r| r > 0),
            paused: paused == 1,
            open: open == 1,
        }),
        _ => Err(protocol_error(fields)),
    }
}

/// The counts in a stats reply.
pub(crate) fn stats(reply: &[i64]) -> Result<RoomStats, StoreError> {
    let [reply::STATS, admitted, granted, waiting, minute, five, c, r, p, o, oldest, ref history @ ..] =
        *reply
    else {
        return Err(protocol_error(reply));
    };
    let settings = settings(&[c, r, p, o])?;
    if history.len() < HISTORY_MINUTES {
        return Err(protocol_error(reply));
    }
    let (history, rest) = history.split_at(HISTORY_MINUTES);
    let admissions_per_minute: [u64; HISTORY_MINUTES] =
        std::array::from_fn(|i| non_negative(history[i]));
    Ok(RoomStats {
        admitted: non_negative(admitted),
        granted: non_negative(granted),
        waiting: non_negative(waiting),
        capacity: u64::from(settings.capacity),
        recent: AdmissionCounts::new(non_negative(minute), non_negative(five)),
        settings,
        oldest_wait_ms: u64::try_from(oldest).ok(),
        admissions_per_minute,
        pace: pace(rest).ok_or_else(|| protocol_error(reply))?,
    })
}

pub(crate) fn protocol_error(reply: &[i64]) -> StoreError {
    StoreError::with_source(
        StoreErrorKind::Protocol,
        format!("unexpected script reply {reply:?}"),
    )
}

pub(crate) fn non_negative(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The room's pace, the tail of a waiting or stats reply (see the script's header); `None` for
/// a tail of another length (another script version).
fn pace(fields: &[i64]) -> Option<RoomPace> {
    let [current, into, observed, capacity, skipped_minute, skipped_five, current_skipped, capacity_before, changed_ago, pause_began, pause_ended, m0, m1, m2, m3, m4, silent, silent_after, moved_ago, rate, inside] =
        *fields
    else {
        return None;
    };
    let capacity_of = |c: i64| u32::try_from(c).unwrap_or(u32::MAX);
    let mut pace = RoomPace::new(
        non_negative(current),
        non_negative(into),
        non_negative(observed),
        capacity_of(capacity),
    )
    .with_skipped(
        AdmissionCounts::new(non_negative(skipped_minute), non_negative(skipped_five)),
        non_negative(current_skipped),
    )
    .with_line([m0, m1, m2, m3, m4].map(non_negative), non_negative(silent))
    .with_silent_after(non_negative(silent_after))
    // 0: unlimited, as the settings hold it.
    .with_admission_rate(u32::try_from(rate).ok().filter(|&r| r > 0))
    .with_inside(non_negative(inside));
    if let Ok(ago) = u64::try_from(moved_ago) {
        pace = pace.with_first_move(ago);
    }
    if let Ok(ago) = u64::try_from(changed_ago) {
        pace = pace.with_capacity_change(capacity_of(capacity_before), ago);
    }
    if let (Ok(began), Ok(ended)) = (u64::try_from(pause_began), u64::try_from(pause_ended)) {
        pace = pace.with_last_pause(began, ended);
    }
    Some(pace)
}

/// The snapshot in a reply to `sync`: integers, but the head's and the checkpoints' scores,
/// which are strings (a registrant's score is no integer, and Redis truncates Lua numbers).
/// What a `sync` answers.
#[derive(Debug)]
pub(crate) struct SyncReply {
    pub(crate) snapshot: RoomSnapshot,
    /// The epochs the script checked in at (turn ring, abandon ring: `'<epoch>:<width
    /// ms>:<bitmap bits>:<run id>'`, as the next sync names them back).
    pub(crate) epochs: [Vec<u8>; 2],
    /// The abandon ring's next epoch so named if the sync's early check-ins were written into
    /// it, else empty.
    pub(crate) early: Vec<u8>,
}

/// `sync`'s reply ([`SyncReply`]).
pub(crate) fn snapshot(reply: &[redis::Value]) -> Result<SyncReply, StoreError> {
    let bad = || {
        StoreError::with_source(
            StoreErrorKind::Protocol,
            format!("unexpected sync reply {reply:?}"),
        )
    };
    let int = |v: &redis::Value| match v {
        redis::Value::Int(n) => Some(*n),
        _ => None,
    };
    let score = |v: &redis::Value| -> Option<Option<f64>> {
        let text = match v {
            redis::Value::BulkString(b) => std::str::from_utf8(b).ok()?,
            redis::Value::SimpleString(s) => s.as_str(),
            _ => return None,
        };
        if text.is_empty() {
            return Some(None);
        }
        text.parse::<f64>().ok().filter(|f| f.is_finite()).map(Some)
    };
    const PACE_LEN: usize = 21;
    let head_at = 7;
    let pace_at = 10;
    let count_at = pace_at + PACE_LEN;
    if reply.len() <= count_at || int(&reply[0]) != Some(reply::SNAPSHOT) {
        return Err(bad());
    }
    let numbers: Vec<i64> = reply[..head_at]
        .iter()
        .chain(&reply[head_at + 1..=count_at])
        .map(int)
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let flag = |n: i64| match n {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    };
    let [_, taken_at, waiting, paused, open, before_opening, line_closed, minute, five, ref rest @ ..] =
        numbers[..]
    else {
        return Err(bad());
    };
    let (pace_fields, count) = rest.split_at(PACE_LEN);
    let count = usize::try_from(count[0]).map_err(|_| bad())?;
    // Each checkpoint: its rank, score and silence.
    const CHECKPOINT_LEN: usize = 3;
    let end = count
        .checked_mul(CHECKPOINT_LEN)
        .and_then(|n| n.checked_add(count_at + 1))
        .ok_or_else(bad)?;
    let triples = reply.get(count_at + 1..end).ok_or_else(bad)?;
    // Last, the ids of the listed sessions without a place, 16 bytes each, and the epochs.
    let (unknown, epochs, early) = match reply.get(end..) {
        Some(
            [redis::Value::BulkString(ids), redis::Value::BulkString(turn), redis::Value::BulkString(abandon), redis::Value::BulkString(early)],
        ) if ids.len() % 16 == 0 => (
            ids.chunks_exact(16)
                .map(|id| SessionId::from_bytes(id.try_into().expect("16 bytes")))
                .collect(),
            [turn.clone(), abandon.clone()],
            early.clone(),
        ),
        _ => return Err(bad()),
    };
    let checkpoints = triples
        .chunks_exact(CHECKPOINT_LEN)
        .map(|p| {
            Some(Checkpoint {
                rank: u64::try_from(int(&p[0])?).ok()?,
                score: score(&p[1])??,
                silent: flag(int(&p[2])?)?,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    let snapshot = RoomSnapshot {
        taken_at_ms: non_negative(taken_at),
        head: score(&reply[head_at]).ok_or_else(bad)?,
        waiting: non_negative(waiting),
        checkpoints,
        paused: flag(paused).ok_or_else(bad)?,
        open: flag(open).ok_or_else(bad)?,
        before_opening: flag(before_opening).ok_or_else(bad)?,
        line_closed: flag(line_closed).ok_or_else(bad)?,
        recent: AdmissionCounts::new(non_negative(minute), non_negative(five)),
        pace: pace(pace_fields).ok_or_else(bad)?,
        unknown,
    };
    Ok(SyncReply {
        snapshot,
        epochs,
        early,
    })
}

/// The decision in a reply to enter, poll or heartbeat.
pub(crate) fn decision(reply: &[i64]) -> Result<Decision, StoreError> {
    match *reply {
        [reply::ADMITTED, expires_at_ms, ..] => Ok(Decision::Admitted {
            expires_at_ms: non_negative(expires_at_ms),
        }),
        [reply::WAITING, position, waiting, paused @ (0 | 1), place] => Ok(Decision::Waiting {
            position: non_negative(position),
            waiting: non_negative(waiting),
            // Enter and poll no longer read the admission ring: the gateway has the counts and
            // the pace from its snapshot (`sync`).
            recent: AdmissionCounts::default(),
            paused: paused == 1,
            pace: RoomPace::default(),
            place: Some(match place {
                reply::DRAWN => Place::Drawn,
                seq => Place::Seq(u64::try_from(seq).map_err(|_| protocol_error(reply))?),
            }),
        }),
        [reply::CLOSED, 0, 0] => Ok(Decision::Closed),
        [reply::SCHEDULED, opens_at_ms, 0] => Ok(Decision::Scheduled {
            opens_at_ms: non_negative(opens_at_ms),
        }),
        [reply::BANNED, 0, 0] => Ok(Decision::Banned),
        [reply::FULL, _, waiting, ..] => Ok(Decision::Full {
            waiting: non_negative(waiting),
        }),
        [reply::UNKNOWN, ..] => Ok(Decision::Unknown),
        _ => Err(protocol_error(reply)),
    }
}

/// Classifies a Redis error by its kind and code, never by its message (Valkey's texts differ
/// from Redis's, and texts change between versions). The table is in `docs/redis.md`.
pub(crate) fn classify(e: RedisError) -> (ErrorClass, StoreError) {
    let class = match e.kind() {
        ErrorKind::Io if e.is_timeout() => ErrorClass::Timeout,
        ErrorKind::Io | ErrorKind::ClusterConnectionNotFound => ErrorClass::Connection,
        // A failover or restart in progress: a demoted primary (`READONLY`), a server loading
        // its data set, a replica that lost its primary, a cluster re-sharding or down.
        ErrorKind::Server(
            ServerErrorKind::ReadOnly
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown,
        ) => ErrorClass::Failover,
        // `NOSCRIPT` (or a room function not found) reaches us only when loading the script
        // (the library) and retrying did not help.
        _ if is_function_not_found(&e) => ErrorClass::Misconfigured,
        ErrorKind::Server(ServerErrorKind::NoPerm | ServerErrorKind::NoScript)
        | ErrorKind::AuthenticationFailed
        | ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::EmptySentinelList
        | ErrorKind::InvalidClientConfig => ErrorClass::Misconfigured,
        ErrorKind::Extension => match e.code() {
            Some("OOM") => ErrorClass::OutOfMemory,
            Some("BUSY") => ErrorClass::ScriptBusy,
            // `min-replicas-to-write` not met: the primary lost its replicas (a failover).
            Some("NOREPLICAS") => ErrorClass::Failover,
            // Credentials, a key of another type under the room's prefix, persistence that
            // stops writes: an operator must act.
            Some("NOAUTH" | "WRONGPASS" | "WRONGTYPE" | "MISCONF") => ErrorClass::Misconfigured,
            // The room's settings were written by a version of the crate this one cannot read
            // (script/settings.lua): a rolling upgrade's mix, answered as a busy store.
            Some("WRSETTINGS") => ErrorClass::VersionMix,
            _ => ErrorClass::Protocol,
        },
        _ if e.is_connection_dropped() || e.is_connection_refusal() => ErrorClass::Connection,
        _ => ErrorClass::Protocol,
    };
    if class == ErrorClass::VersionMix {
        // The script's own words after the code (which versions met): no host, no secret.
        let detail = e
            .detail()
            .unwrap_or("room settings of another version")
            .to_owned();
        return (class, StoreError::version_mix(detail));
    }
    (class, StoreError::with_source(class.kind(), e))
}

#[cfg(test)]
mod tests;
