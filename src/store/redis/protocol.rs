//! The protocol between [`RedisStore`](super::RedisStore) and its script (`script/*.lua`): the keys
//! in their order, the arguments in their order, and the reply codes. The script's header says
//! the same from the other side; keep the two in step.

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
/// `twr_room_v8_<op>` (`calls.rs`). One chunk, so the files share its top-level locals (the constants and
/// the tables `R` and `F`).
pub(crate) const SCRIPT: &str = concat!(
    include_str!("script/keys.lua"),
    include_str!("script/stored.lua"),
    include_str!("script/time.lua"),
    include_str!("script/call.lua"),
    include_str!("script/settings.lua"),
    include_str!("script/schedule.lua"),
    include_str!("script/liveness.lua"),
    include_str!("script/line.lua"),
    include_str!("script/pace.lua"),
    include_str!("script/sync.lua"),
    include_str!("script/main.lua"),
    include_str!("script/visitor.lua"),
    include_str!("script/operator.lua"),
    include_str!("script/fast_path.lua"),
    include_str!("script/tickets.lua"),
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

/// How many bits under its power of two each liveness bitmap is (the script's `BLOOM_SLACK`):
/// the bitmap's string holds the sentinel bit too, and Redis allocates it with a header of up
/// to 9 bytes and a NUL. At the power of two exactly, that is a few bytes past the allocator's
/// size class, and the next class is a quarter larger (each 4 MiB bitmap of a line of two
/// million took 5 MiB, measured with `MEMORY USAGE`).
pub(crate) const BLOOM_SLACK: u64 = 128;

/// The size in bits of each liveness bitmap (a Bloom filter with two bits per session) for a
/// line of at most `max_queue_len`: [`BLOOM_SLACK`] under the power of two at or above 16 bits
/// per waiter, between 2^16 and 2^32 (Redis's largest string). The script computes the same.
pub(crate) fn bloom_bits(max_queue_len: u64) -> u64 {
    max_queue_len
        .saturating_mul(16)
        .clamp(1 << 16, 1 << 32)
        .next_power_of_two()
        - BLOOM_SLACK
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

/// The reply codes, the first element of every reply.
pub(crate) mod reply {
    /// `{0, 0, 0}`: the session has no place and no slot (poll, heartbeat).
    pub(crate) const UNKNOWN: i64 = 0;
    /// `{1, expires_at_ms, 0}`.
    pub(crate) const ADMITTED: i64 = 1;
    /// `{2, position, waiting, paused, place}`: place is the sequence number, or
    /// [`DRAWN`] for a registrant with a draw score.
    pub(crate) const WAITING: i64 = 2;
    /// The place of a waiting reply for a registrant (a draw score, not a sequence number).
    pub(crate) const DRAWN: i64 = -1;
    /// `{3, 0, waiting}`.
    pub(crate) const FULL: i64 = 3;
    /// `{4, released (0 or 1), 0}`.
    pub(crate) const RELEASED: i64 = 4;
    /// `{5, admitted, granted, waiting, last_minute, last_five_minutes, capacity, rate, paused,
    /// open, oldest_wait_ms or -1, admissions per minute...}`.
    pub(crate) const STATS: i64 = 5;
    /// `{6, 0, 0}`: the room is closed.
    pub(crate) const CLOSED: i64 = 6;
    /// `{7, 0, 0}`: the session is banned.
    pub(crate) const BANNED: i64 = 7;
    /// `{8, capacity, rate, paused, open}` after the change, then the same four before it.
    pub(crate) const SETTINGS: i64 = 8;
    /// `{9, admitted}`.
    pub(crate) const ADMITTED_NEXT: i64 = 9;
    /// `{10, had a place or slot}`.
    pub(crate) const BANNED_NOW: i64 = 10;
    /// `{11, opens_at_ms, 0}`: registered in the pre-queue, the room not open yet.
    pub(crate) const SCHEDULED: i64 = 11;
    /// `{12, now_ms, waiting, paused, open, before_opening, line_closed, head, last_minute,
    /// last_five_minutes, pace..., n, rank, score, ...}`: a snapshot (`sync`); head and scores
    /// are strings.
    pub(crate) const SNAPSHOT: i64 = 12;
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

/// `change` as `twr_room_v8_configure` takes it (`script/operator.lua`): 0 leaves the capacity
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
    let [current, into, observed, capacity, skipped_minute, skipped_five, current_skipped, capacity_before, changed_ago, pause_began, pause_ended, m0, m1, m2, m3, m4, silent, silent_after, moved_ago, rate] =
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
    .with_admission_rate(u32::try_from(rate).ok().filter(|&r| r > 0));
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
/// `sync`'s reply: the snapshot, and the epochs the script checked in at (turn ring, abandon
/// ring: `'<epoch>:<width ms>:<bitmap bits>'`, as the next sync names them back).
pub(crate) fn snapshot(reply: &[redis::Value]) -> Result<(RoomSnapshot, [Vec<u8>; 2]), StoreError> {
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
    const PACE_LEN: usize = 20;
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
    let pairs = reply
        .get(count_at + 1..count_at + 1 + 2 * count)
        .ok_or_else(bad)?;
    // Last, the ids of the listed sessions without a place, 16 bytes each, and the epochs.
    let (unknown, epochs) = match reply.get(count_at + 1 + 2 * count..) {
        Some(
            [redis::Value::BulkString(ids), redis::Value::BulkString(turn), redis::Value::BulkString(abandon)],
        ) if ids.len() % 16 == 0 => (
            ids.chunks_exact(16)
                .map(|id| SessionId::from_bytes(id.try_into().expect("16 bytes")))
                .collect(),
            [turn.clone(), abandon.clone()],
        ),
        _ => return Err(bad()),
    };
    let checkpoints = pairs
        .chunks_exact(2)
        .map(|p| {
            Some(Checkpoint {
                rank: u64::try_from(int(&p[0])?).ok()?,
                score: score(&p[1])??,
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
    Ok((snapshot, epochs))
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
mod tests {
    use super::*;

    #[test]
    fn the_library_holds_each_script_file_once() {
        let files = crate::script_header::each_file_once(SCRIPT, "src/store/redis/script");
        assert!(files >= 10, "only {files} script files");
    }

    /// The reader of stored numbers (`script/stored.lua`) is the one every function of the
    /// library reads a stored number with, the tickets' too: it goes in once (above), and no
    /// file brings a second `#!lua` line of its own (the library's is its first line, which
    /// names it). Matching's library has its own test (src/matching/store/redis/calls.rs).
    #[test]
    fn the_library_has_one_lua_line_and_the_reader_of_stored_numbers_once() {
        let stored = include_str!("script/stored.lua");
        assert_eq!(SCRIPT.matches(stored).count(), 1);
        assert!(SCRIPT.starts_with("#!lua name="));
        assert_eq!(
            SCRIPT.lines().filter(|l| l.starts_with("#!")).count(),
            1,
            "one `#!lua` line, the first"
        );
    }

    /// The bounds the library holds a caller's numbers to (`script/call.lua`) are the ones the
    /// builder refuses beyond, and the crate's own constants lie within them: a room the
    /// builder accepts is never refused by the library.
    #[test]
    fn the_library_refuses_what_the_builder_refuses_and_nothing_it_sends() {
        use crate::store::{
            ADMISSION_BUCKETS, ADMISSION_BUCKET_MS, FIVE_MINUTE_BUCKETS, HISTORY_MINUTES,
            MAX_ADMIT_NEXT_PER_CALL, MAX_PROMOTIONS_PER_CALL, MAX_QUEUE_LEN_LIMIT,
            MAX_STORED_TTL_MS, MAX_SWEEP_PER_CALL, MINUTE_BUCKETS,
        };
        let call = include_str!("script/call.lua");
        let line = call
            .lines()
            .find(|l| l.starts_with("local LIMIT_QUEUE, LIMIT_TTL = "))
            .expect("call.lua declares its limits");
        let numbers: Vec<u64> = line
            .split('=')
            .nth(1)
            .unwrap()
            .split(',')
            .map(|n| n.trim().parse().unwrap())
            .collect();
        assert_eq!(numbers, [MAX_QUEUE_LEN_LIMIT, MAX_STORED_TTL_MS]);
        // The constants the crate sends: within the library's 1 .. 100000 (ROOM_LIMITS and
        // OWN_LIMITS), the history within the ring.
        for n in [
            u64::from(MAX_PROMOTIONS_PER_CALL),
            u64::from(MAX_SWEEP_PER_CALL),
            u64::from(MAX_ADMIT_NEXT_PER_CALL),
            ADMISSION_BUCKETS,
            MINUTE_BUCKETS,
            FIVE_MINUTE_BUCKETS,
            HISTORY_MINUTES as u64,
        ] {
            assert!((1..=100_000).contains(&n), "{n}");
        }
        const {
            assert!(ADMISSION_BUCKET_MS <= 3_600_000);
            assert!(HISTORY_MINUTES as u64 * MINUTE_BUCKETS <= ADMISSION_BUCKETS);
            assert!(FIVE_MINUTE_BUCKETS <= ADMISSION_BUCKETS);
        }
    }

    #[test]
    fn keys_share_the_room_hash_tag() {
        let keys = keys("twr", "shop");
        assert!(keys.iter().all(|k| k.starts_with("twr:{shop}:")));
        assert_eq!(keys.len(), KEY_COUNT);
    }

    #[test]
    fn the_schedule_travels_as_a_tagged_last_argument() {
        use crate::config::EventSchedule;
        use std::time::{Duration, UNIX_EPOCH};
        let plain = RoomPolicy::new("shop", 1);
        let s = SessionId::from_bytes([1; 16]);
        assert_eq!(schedule_arg(Op::Enter, &plain, Some(s)), None);
        let schedule = EventSchedule::new(UNIX_EPOCH + Duration::from_millis(5_000), [9u8; 32])
            .with_closes_at(Some(UNIX_EPOCH + Duration::from_millis(9_000)))
            .with_keep_line_after_close(false);
        let draw = schedule.draw(s);
        let p = plain.with_schedule(Some(schedule));
        assert_eq!(
            schedule_arg(Op::Enter, &p, Some(s)).unwrap(),
            format!("schedule:5000:9000:0:{draw}")
        );
        assert_eq!(
            schedule_arg(Op::Poll, &p, Some(s)).unwrap(),
            "schedule:5000:9000:0:0",
            "only enter places anyone"
        );
        assert_eq!(
            decision(&[11, 5_000, 0]).unwrap(),
            Decision::Scheduled { opens_at_ms: 5_000 }
        );
        assert!(
            SCRIPT.contains("{11, opens_at_ms, 0} scheduled"),
            "the script's header"
        );
    }

    #[test]
    fn replies_map_to_decisions() {
        assert_eq!(
            decision(&[1, 5, 0]).unwrap(),
            Decision::Admitted { expires_at_ms: 5 }
        );
        assert_eq!(
            decision(&[2, 3, 9, 1, 42]).unwrap(),
            Decision::Waiting {
                position: 3,
                waiting: 9,
                recent: AdmissionCounts::default(),
                paused: true,
                pace: RoomPace::default(),
                place: Some(Place::Seq(42)),
            }
        );
        assert_eq!(
            decision(&[2, 1, 9, 0, reply::DRAWN]).unwrap(),
            Decision::Waiting {
                position: 1,
                waiting: 9,
                recent: AdmissionCounts::default(),
                paused: false,
                pace: RoomPace::default(),
                place: Some(Place::Drawn),
            },
            "a registrant's place is drawn"
        );
        assert_eq!(
            decision(&[2, 3, 9, 0, -7]).unwrap_err().kind(),
            StoreErrorKind::Protocol,
            "no place is a negative number but the drawn mark"
        );
        assert_eq!(
            decision(&[2, 3, 9, 4, 20, 1, 2, 500, 60_000, 5])
                .unwrap_err()
                .kind(),
            StoreErrorKind::Protocol,
            "a waiting reply with counts and pace is from another script version"
        );
        assert_eq!(decision(&[6, 0, 0]).unwrap(), Decision::Closed);
        assert_eq!(decision(&[7, 0, 0]).unwrap(), Decision::Banned);
        assert_eq!(
            decision(&[2, 3, 9]).unwrap_err().kind(),
            StoreErrorKind::Protocol,
            "a waiting reply without its place is from another script version"
        );
        assert_eq!(decision(&[3, 0, 9]).unwrap(), Decision::Full { waiting: 9 });
        assert_eq!(decision(&[0, 0, 0]).unwrap(), Decision::Unknown);
        assert_eq!(decision(&[7]).unwrap_err().kind(), StoreErrorKind::Protocol);
        assert_eq!(
            decision(&[42, 0, 0]).unwrap_err().kind(),
            StoreErrorKind::Protocol
        );
    }

    #[test]
    fn a_sync_reply_maps_to_a_snapshot() {
        use redis::Value;
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let mut reply = vec![12, 1_000, 3, 0, 1, 0, 0]
            .into_iter()
            .map(Value::Int)
            .collect::<Vec<_>>();
        reply.push(text("-0.25"));
        reply.extend(
            [
                4, 20, 2, 500, 60_000, 5, 0, 0, 0, 5, -1, -1, -1, 4, 6, 5, 5, 0, 1, 30_000, -1, 0,
            ]
            .map(Value::Int),
        );
        reply.extend([
            Value::Int(3),
            Value::Int(0),
            text("-0.25"),
            Value::Int(1),
            text("7"),
            Value::Int(2),
            text("9"),
        ]);
        // The listed sessions without a place: one.
        let gone = SessionId::from_bytes([7; 16]);
        reply.push(Value::BulkString(gone.as_bytes().to_vec()));
        // The epochs checked in at, as the next sync names them back.
        reply.extend([text("57:30000:65536"), text("2:900000:65536")]);
        let (snap, epochs) = snapshot(&reply).unwrap();
        assert_eq!(
            epochs,
            [b"57:30000:65536".to_vec(), b"2:900000:65536".to_vec()]
        );
        assert_eq!(snap.unknown, vec![gone]);
        assert_eq!(snap.taken_at_ms, 1_000);
        assert_eq!(snap.head, Some(-0.25));
        assert_eq!(snap.waiting, 3);
        assert!(snap.open && !snap.paused && !snap.before_opening && !snap.line_closed);
        assert_eq!(snap.recent, AdmissionCounts::new(4, 20));
        assert_eq!(
            snap.pace,
            RoomPace::new(2, 500, 60_000, 5)
                .with_line([4, 6, 5, 5, 0], 1)
                .with_silent_after(30_000)
        );
        assert_eq!(
            snap.checkpoints,
            vec![
                Checkpoint {
                    score: -0.25,
                    rank: 0
                },
                Checkpoint {
                    score: 7.0,
                    rank: 1
                },
                Checkpoint {
                    score: 9.0,
                    rank: 2
                },
            ]
        );
        // Nobody waits: no head, no checkpoints.
        let mut empty = reply[..30].to_vec();
        empty[7] = text("");
        empty.push(Value::Int(0));
        empty.extend([text(""), text("1:1:65536"), text("1:2:65536")]);
        assert_eq!(snapshot(&empty).unwrap().0.head, None);
        // A count that does not match the pairs, a score that is no number, ids not of 16
        // bytes, no epochs (a library before version 5).
        let mut short = reply.clone();
        short.remove(short.len() - 4);
        assert_eq!(
            snapshot(&short).unwrap_err().kind(),
            StoreErrorKind::Protocol
        );
        let mut short = reply.clone();
        short.truncate(short.len() - 2);
        assert_eq!(
            snapshot(&short).unwrap_err().kind(),
            StoreErrorKind::Protocol
        );
        let mut short = reply.clone();
        let ids_at = short.len() - 3;
        short[ids_at] = text("abc");
        assert_eq!(
            snapshot(&short).unwrap_err().kind(),
            StoreErrorKind::Protocol
        );
        let mut garbled = reply.clone();
        garbled[32] = text("x");
        assert_eq!(
            snapshot(&garbled).unwrap_err().kind(),
            StoreErrorKind::Protocol
        );
    }

    #[test]
    fn the_script_shares_the_crates_constants() {
        use crate::store::snapshot::{CHECKPOINT_GAP_DIVISOR, EXACT_RANKS};
        assert!(SCRIPT.contains(&format!(
            "local TURN_EPOCHS, ABANDON_EPOCHS = {TURN_EPOCHS}, {ABANDON_EPOCHS}\n"
        )));
        assert!(SCRIPT.contains(&format!(
            "local EXACT_RANKS, CHECKPOINT_GAP = {EXACT_RANKS}, {CHECKPOINT_GAP_DIVISOR}\n"
        )));
        assert!(SCRIPT.contains(&format!(
            "local SETTINGS_VERSION = {}\n",
            crate::store::SETTINGS_VERSION
        )));
        assert!(SCRIPT.contains(&format!("local BLOOM_SLACK = {BLOOM_SLACK}\n")));
        for (i, name) in KEY_NAMES.iter().enumerate() {
            assert!(
                SCRIPT.contains(&format!("--  {:>2} ", i + 1))
                    || SCRIPT.contains(&format!("--   {} {name}", i + 1))
                    || name.ends_with(|c: char| c.is_ascii_digit()),
                "the header documents KEYS[{}] {name}",
                i + 1
            );
        }
        assert_eq!(bloom_bits(0), (1 << 16) - 128);
        assert_eq!(bloom_bits(4_096), (1 << 16) - 128);
        assert_eq!(bloom_bits(4_097), (1 << 17) - 128);
        assert_eq!(bloom_bits(2_000_000), (1 << 25) - 128);
        assert_eq!(bloom_bits(u64::MAX), (1 << 32) - 128);
    }

    #[test]
    fn seen_sessions_travel_with_their_bloom_offsets() {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 1, 0, 3]);
        id[15] = 9;
        let s = SessionId::from_bytes(id);
        // 2^32 - 1 mod 2^16, and 65 539 mod 2^16.
        assert_eq!(bloom_offsets(&id, 1 << 16), (0xffff, 3));
        assert_eq!(bloom_offsets(&id, 1 << 32), (u32::MAX, 65_539));
        let arg = seen_arg(&[s, s]);
        assert_eq!(arg.len(), 2 * SEEN_ENTRY_BYTES);
        assert_eq!((&arg[..16], &arg[16..]), (&id[..], &id[..]));
        let bits = bloom_bits(4_096);
        // 2^32 - 1 and 65 539, each mod 65 408 (2^16 - 128).
        assert_eq!(
            offsets_arg(offsets_of(&[s, s], bits)),
            b"16383 131 16383 131 "
        );
        assert_eq!(
            offsets_arg([(0, u32::MAX), (1_000_000, 10)]),
            b"0 4294967295 1000000 10 "
        );
        assert!(offsets_arg([]).is_empty());
    }

    fn server_error(line: &str) -> RedisError {
        // Parse a real RESP error line, as the client would receive it.
        let frame = format!("-{line}\r\n");
        match redis::parse_redis_value(frame.as_bytes()) {
            Ok(redis::Value::ServerError(e)) => e.into(),
            other => panic!("not a server error: {other:?}"),
        }
    }

    #[test]
    fn errors_are_classified_by_code() {
        let cases = [
            (
                "READONLY You can't write against a read only replica.",
                ErrorClass::Failover,
            ),
            (
                "LOADING Redis is loading the dataset in memory",
                ErrorClass::Failover,
            ),
            ("MASTERDOWN Link with MASTER is down", ErrorClass::Failover),
            (
                "TRYAGAIN Multiple keys request during rehashing",
                ErrorClass::Failover,
            ),
            ("CLUSTERDOWN The cluster is down", ErrorClass::Failover),
            (
                "NOREPLICAS Not enough good replicas to write.",
                ErrorClass::Failover,
            ),
            (
                "OOM command not allowed when used memory > 'maxmemory'.",
                ErrorClass::OutOfMemory,
            ),
            (
                "BUSY Redis is busy running a script.",
                ErrorClass::ScriptBusy,
            ),
            (
                "NOPERM this user has no permissions to run the 'evalsha' command",
                ErrorClass::Misconfigured,
            ),
            ("NOAUTH Authentication required.", ErrorClass::Misconfigured),
            (
                "WRONGPASS invalid username-password pair",
                ErrorClass::Misconfigured,
            ),
            (
                "WRONGTYPE Operation against a key holding the wrong kind of value",
                ErrorClass::Misconfigured,
            ),
            (
                "MISCONF Redis is configured to save RDB snapshots",
                ErrorClass::Misconfigured,
            ),
            ("NOSCRIPT No matching script.", ErrorClass::Misconfigured),
            // Seen only when loading the library and retrying did not help.
            ("ERR Function not found", ErrorClass::Misconfigured),
            (
                "ERR user_script:1: something went wrong",
                ErrorClass::Protocol,
            ),
            // The code decides, never the text.
            ("ERR READONLY OOM NOPERM", ErrorClass::Protocol),
            (
                "WRSETTINGS room settings of version 6, this crate reads version 5",
                ErrorClass::VersionMix,
            ),
        ];
        for (line, class) in cases {
            let (got, e) = classify(server_error(line));
            assert_eq!(got, class, "{line}");
            assert_eq!(e.kind(), class.kind(), "{line}");
            assert_eq!(
                e.is_version_mix(),
                class == ErrorClass::VersionMix,
                "{line}"
            );
        }
        let (_, e) = classify(server_error(
            "WRSETTINGS room settings of version 6, this crate reads version 5",
        ));
        assert!(e.to_string().contains("version 6"), "{e}");
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify(io).0, ErrorClass::Connection);
        let timeout = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(classify(timeout).0, ErrorClass::Timeout);
    }
}
