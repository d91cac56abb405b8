//! The protocol between [`RedisStore`](super::RedisStore) and its script (`room.lua`): the keys
//! in their order, the arguments in their order, and the reply codes. The script's header says
//! the same from the other side; keep the two in step.

use redis::{ErrorKind, RedisError, ServerErrorKind};

use super::breaker::ErrorClass;

use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::{
    AdmissionCounts, Decision, RoomPace, RoomSettings, RoomStats, SettingsChange, StoreError,
    StoreErrorKind, ADMISSION_BUCKETS, ADMISSION_BUCKET_MS, FIVE_MINUTE_BUCKETS, HISTORY_MINUTES,
    MAX_PROMOTIONS_PER_CALL, MAX_SWEEP_PER_CALL, MINUTE_BUCKETS,
};

/// The room script, loaded with `include_str!`.
pub(crate) const SCRIPT: &str = include_str!("room.lua");

/// The room's keys in the script's `KEYS` order, each `{prefix}:{room}:{name}` with the room as
/// the hash tag (the braces are literal), so a Redis Cluster keeps a room in one slot.
pub(crate) const KEY_NAMES: [&str; KEY_COUNT] = [
    "seq", "line", "seen", "active", "granted", "bucket", "admitted", "settings", "arrivals",
    "banned",
];

/// How many keys a room has.
pub(crate) const KEY_COUNT: usize = 10;

/// The keys of `room` under `prefix`, in [`KEY_NAMES`] order.
pub(crate) fn keys(prefix: &str, room: &str) -> [String; KEY_COUNT] {
    KEY_NAMES.map(|k| format!("{prefix}:{{{room}}}:{k}"))
}

/// `ARGV[3]` when the store has no clock of its own: the script reads the server's `TIME`, one
/// clock for every gateway.
pub(crate) const NOW_FROM_SERVER: u64 = 0;

/// The operation, `ARGV[1]`: [`StoreOp::as_str`].
pub(crate) use crate::store::StoreOp as Op;

/// `ARGV[4]` to `ARGV[16]`, in order: the room's policy and the crate's bounds.
pub(crate) fn numbers(policy: &RoomPolicy) -> [u64; 13] {
    [
        u64::from(policy.capacity),
        u64::from(policy.admission_rate.unwrap_or(0)),
        policy.active_ttl_ms,
        policy.grant_ttl_ms,
        policy.queue_ttl_ms,
        policy.max_queue_len,
        u64::from(MAX_PROMOTIONS_PER_CALL),
        u64::from(MAX_SWEEP_PER_CALL),
        ADMISSION_BUCKET_MS,
        ADMISSION_BUCKETS,
        MINUTE_BUCKETS,
        FIVE_MINUTE_BUCKETS,
        policy.effective_abandon_after_ms(),
    ]
}

/// The reply codes, the first element of every reply.
pub(crate) mod reply {
    /// `{0, 0, 0}`: the session has no place and no slot (poll, heartbeat).
    pub(crate) const UNKNOWN: i64 = 0;
    /// `{1, expires_at_ms, 0}`.
    pub(crate) const ADMITTED: i64 = 1;
    /// `{2, position, waiting, last_minute, last_five_minutes, paused}`.
    pub(crate) const WAITING: i64 = 2;
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

/// The operation's own arguments, `ARGV[18]` on.
pub(crate) fn change_args(change: &SettingsChange) -> [i64; 5] {
    let unchanged = -1;
    let flag = |b: Option<bool>| b.map_or(unchanged, i64::from);
    [
        change.capacity.map_or(0, |c| i64::from(c.max(1))),
        change
            .admission_rate
            .map_or(unchanged, |r| i64::from(r.unwrap_or(0))),
        flag(change.paused),
        flag(change.open),
        i64::from(change.ends_slots()),
    ]
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

/// The decision in a reply to enter, poll or heartbeat.
pub(crate) fn decision(reply: &[i64]) -> Result<Decision, StoreError> {
    match *reply {
        [reply::ADMITTED, expires_at_ms, ..] => Ok(Decision::Admitted {
            expires_at_ms: non_negative(expires_at_ms),
        }),
        [reply::WAITING, position, waiting, minute, five, paused @ (0 | 1), ref rest @ ..] => {
            Ok(Decision::Waiting {
                position: non_negative(position),
                waiting: non_negative(waiting),
                recent: AdmissionCounts::new(non_negative(minute), non_negative(five)),
                paused: paused == 1,
                pace: pace(rest).ok_or_else(|| protocol_error(reply))?,
                place: None,
            })
        }
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
        // `NOSCRIPT` reaches us only when loading the script and retrying did not help.
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
            // The room's settings were written by another version of the crate (room.lua).
            Some("WRSETTINGS") => ErrorClass::Misconfigured,
            _ => ErrorClass::Protocol,
        },
        _ if e.is_connection_dropped() || e.is_connection_refusal() => ErrorClass::Connection,
        _ => ErrorClass::Protocol,
    };
    (class, StoreError::with_source(class.kind(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            decision(&[
                2, 3, 9, 4, 20, 1, 2, 500, 60_000, 5, 0, 0, 0, 5, -1, -1, -1, 4, 6, 5, 5, 0, 0,
                30_000, -1, 0
            ])
            .unwrap(),
            Decision::Waiting {
                position: 3,
                waiting: 9,
                recent: AdmissionCounts::new(4, 20),
                paused: true,
                pace: RoomPace::new(2, 500, 60_000, 5)
                    .with_line([4, 6, 5, 5, 0], 0)
                    .with_silent_after(30_000),
                place: None,
            }
        );
        assert_eq!(
            decision(&[
                2, 3, 9, 4, 20, 0, 2, 500, 60_000, 5, 1, 3, 0, 2, 7_000, 90_000, 30_000, 4, 6, 5,
                5, 0, 2, 30_000, 55_000, 3
            ])
            .unwrap(),
            Decision::Waiting {
                position: 3,
                waiting: 9,
                recent: AdmissionCounts::new(4, 20),
                paused: false,
                pace: RoomPace::new(2, 500, 60_000, 5)
                    .with_skipped(AdmissionCounts::new(1, 3), 0)
                    .with_capacity_change(2, 7_000)
                    .with_last_pause(90_000, 30_000)
                    .with_line([4, 6, 5, 5, 0], 2)
                    .with_silent_after(30_000)
                    .with_first_move(55_000)
                    .with_admission_rate(Some(3)),
                place: None,
            },
            "every part of the pace"
        );
        assert_eq!(
            decision(&[
                2, 3, 9, 4, 20, 1, 2, 500, 60_000, 5, 0, 0, 0, 5, -1, -1, -1, 4, 6, 5, 5, 0, 0,
                30_000, -1
            ])
            .unwrap_err()
            .kind(),
            StoreErrorKind::Protocol,
            "a waiting reply without the admission rate is from another script version"
        );
        assert_eq!(
            decision(&[2, 3, 9, 4, 20, 1, 2, 500, 60_000, 5, 0, 0, 0, 5, -1, -1, -1])
                .unwrap_err()
                .kind(),
            StoreErrorKind::Protocol,
            "a waiting reply without the minutes, the silent and the first movement is from \
             another script version"
        );
        assert_eq!(
            decision(&[2, 3, 9, 4, 20, 1, 2, 500, 60_000, 5])
                .unwrap_err()
                .kind(),
            StoreErrorKind::Protocol,
            "a waiting reply without the pace is from another script version"
        );
        assert_eq!(
            decision(&[2, 3, 9, 4, 20]).unwrap_err().kind(),
            StoreErrorKind::Protocol,
            "a waiting reply without the paused flag is from another script version"
        );
        assert_eq!(decision(&[6, 0, 0]).unwrap(), Decision::Closed);
        assert_eq!(decision(&[7, 0, 0]).unwrap(), Decision::Banned);
        assert_eq!(
            decision(&[2, 3, 9]).unwrap_err().kind(),
            StoreErrorKind::Protocol,
            "a waiting reply without counts is from another script version"
        );
        assert_eq!(decision(&[3, 0, 9]).unwrap(), Decision::Full { waiting: 9 });
        assert_eq!(decision(&[0, 0, 0]).unwrap(), Decision::Unknown);
        assert_eq!(decision(&[7]).unwrap_err().kind(), StoreErrorKind::Protocol);
        assert_eq!(
            decision(&[42, 0, 0]).unwrap_err().kind(),
            StoreErrorKind::Protocol
        );
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
            (
                "ERR user_script:1: something went wrong",
                ErrorClass::Protocol,
            ),
            // The code decides, never the text.
            ("ERR READONLY OOM NOPERM", ErrorClass::Protocol),
            (
                "WRSETTINGS room settings of version 2, this crate reads version 1",
                ErrorClass::Misconfigured,
            ),
        ];
        for (line, class) in cases {
            let (got, e) = classify(server_error(line));
            assert_eq!(got, class, "{line}");
            assert_eq!(e.kind(), class.kind(), "{line}");
        }
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify(io).0, ErrorClass::Connection);
        let timeout = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(classify(timeout).0, ErrorClass::Timeout);
    }
}
