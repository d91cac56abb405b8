//! Bytes per waiter (part 2 of the Redis-side measurements): a line filled through our room
//! function and through the peer's script, the liveness bitmaps it holds; and the positions a
//! gateway's snapshot gives on it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tower_waiting_room::__private::redis_keys;
use tower_waiting_room::store::{RedisStore, SeenWaiters, SnapshotStore, Store};
use tower_waiting_room::RoomPolicy;

use super::calls::{
    connection, line_id, load_ours, our_enter, pipelined_calls, script_load, IdEncoding, OurRoom,
    PeerRoom, OUR_ADMITTED, OUR_CALL, OUR_IDS, OUR_WAITING,
};
use super::{LINE_ROOM, PEER_SCRIPT};
use crate::measure::round;
use crate::redis_server::RedisServer;
use crate::BoxError;

/// The policy of the filled line (and of the simulated run on it): one slot, held by the first
/// entrant for an hour, so everyone after waits. `queue_ttl` and `abandon_after` are the
/// builder's defaults (2 and 30 minutes): they set the widths of the liveness epochs (30 s and
/// 15 min), and a gateway writes a waiter's check-in once per epoch of each ring, so they set
/// what the run's check-ins cost. Nobody is swept within the half hour the fill and the runs
/// before the simulated one take; the simulated run checks everyone in before it opens the
/// room, so nobody at the head is skipped for the minutes in between.
/// `max_queue_len` is the line plus 3 % (room for the run's newcomers): store v2 sizes its
/// liveness bitmaps by it, so a bound far above the line would inflate `bytes_per_waiter`.
pub(super) fn line_policy(line: u64) -> RoomPolicy {
    RoomPolicy::new(LINE_ROOM, 1)
        .with_ttls(
            Duration::from_secs(3_600),
            Duration::from_secs(30),
            Duration::from_secs(120),
        )
        .with_max_queue_len(line_bound(line))
}

/// The filled line's `max_queue_len`: the line plus 3 %, at least 10 000 more.
pub(super) fn line_bound(line: u64) -> u64 {
    line + (line / 32).max(10_000)
}

/// The liveness bitmaps a room's line holds in Redis at one moment: how many of its ring keys
/// exist, their bytes (`MEMORY USAGE`), and the largest one's.
pub(super) struct LivenessBitmaps {
    pub(super) count: usize,
    pub(super) bytes: u64,
    pub(super) largest: u64,
}

impl LivenessBitmaps {
    /// The line's bytes in steady state from `line_bytes` measured with these bitmaps: a room
    /// that has run for longer than `abandon_after` keeps every key of both rings
    /// (`TURN_EPOCHS + 2` and `ABANDON_EPOCHS + 2`), each a full bitmap once its epoch saw a
    /// few thousand check-ins. The full size is the largest key measured, or else the Bloom
    /// size the store computes for the line's `max_queue_len`.
    pub(super) fn steady_state_bytes(&self, line_bytes: f64, policy: &RoomPolicy) -> f64 {
        use tower_waiting_room::store::snapshot::{ABANDON_EPOCHS, TURN_EPOCHS};
        let keys = (TURN_EPOCHS + 2 + ABANDON_EPOCHS + 2) as f64;
        let full = if self.largest > 0 {
            self.largest as f64
        } else {
            (tower_waiting_room::__private::redis_bloom_bits(policy.max_queue_len) / 8) as f64
        };
        line_bytes - self.bytes as f64 + keys * full
    }

    pub(super) fn to_json(&self) -> Value {
        json!({ "keys": self.count, "bytes": self.bytes, "largest": self.largest })
    }
}

/// The room's liveness ring keys in `redis` right now (KEYS 10 to 19 of the room script).
pub(super) async fn liveness_bitmaps(
    redis: &RedisServer,
    store: &RedisStore,
    policy: &RoomPolicy,
) -> Result<LivenessBitmaps, BoxError> {
    let mut conn = connection(redis).await?;
    let keys = redis_keys(store, &policy.room);
    let mut found = LivenessBitmaps {
        count: 0,
        bytes: 0,
        largest: 0,
    };
    for key in &keys[9..19] {
        let usage: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .query_async(&mut conn)
            .await?;
        if let Some(bytes) = usage {
            found.count += 1;
            found.bytes += bytes;
            found.largest = found.largest.max(bytes);
        }
    }
    Ok(found)
}

/// Fills our room on the fresh `redis`: [`line_id`] 0 takes the slot, 1..=`line` wait. Answers
/// the `used_memory` difference per waiter.
pub(super) async fn fill_our_line(
    redis: &RedisServer,
    store: &RedisStore,
    policy: &RoomPolicy,
    line: u64,
) -> Result<f64, BoxError> {
    let mut conn = connection(redis).await?;
    load_ours(&mut conn).await?;
    let room = OurRoom::new(store, policy);
    let before = redis.used_memory()?;
    let t = Instant::now();
    let codes = pipelined_calls(&mut conn, &OUR_CALL, 0..line + 1, |i| {
        our_enter(&room, &OUR_IDS.encode(line_id(i)))
    })
    .await?;
    let after = redis.used_memory()?;
    if codes != BTreeMap::from([(OUR_ADMITTED, 1), (OUR_WAITING, line)]) {
        return Err(format!("filling our line: {codes:?}").into());
    }
    eprintln!(
        "filled our line of {line} in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(after.saturating_sub(before) as f64 / line as f64)
}

/// The same for the peer's script, ids in `ids`, on a fresh `redis`.
pub(super) async fn fill_peer_line(
    redis: &RedisServer,
    ids: IdEncoding,
    line: u64,
) -> Result<f64, BoxError> {
    let mut conn = connection(redis).await?;
    let sha = script_load(&mut conn, PEER_SCRIPT).await?;
    // The peer drops waiters who joined more than `queue_ttl` ago on every call: with ours
    // (2 minutes) a fill slower than that would measure a shorter line.
    let policy = line_policy(line).with_ttls(
        Duration::from_secs(3_600),
        Duration::from_secs(30),
        Duration::from_secs(1_800),
    );
    let peer = PeerRoom::new(LINE_ROOM, &policy);
    let before = redis.used_memory()?;
    let codes = pipelined_calls(&mut conn, &["EVALSHA", &sha], 0..line + 1, |i| {
        peer.enter(&ids.encode(line_id(i)))
    })
    .await?;
    let after = redis.used_memory()?;
    if codes != BTreeMap::from([(1, 1), (2, line)]) {
        return Err(format!("filling the peer's line: {codes:?}").into());
    }
    Ok(after.saturating_sub(before) as f64 / line as f64)
}

/// Positions from a gateway's snapshot against the exact ones, on the filled line with gaps:
/// one waiter in a hundred leaves (spread over the line), a snapshot is taken
/// (`SnapshotStore::sync`), and for a sample of the waiters left the position the snapshot gives
/// (`RoomSnapshot::position_of`) is compared with `ZRANK + 1`. `position_error_max` is the
/// largest relative error beyond the exact ranks (docs/scale.md bounds it by 1 %);
/// `position_error_near_head` the largest difference among the first `EXACT_RANKS` (0).
pub(super) async fn position_error(
    redis: &RedisServer,
    store: &RedisStore,
    policy: &RoomPolicy,
    line: u64,
) -> Result<Map<String, Value>, BoxError> {
    use tower_waiting_room::store::snapshot::EXACT_RANKS;
    let mut conn = connection(redis).await?;
    let keys = redis_keys(store, &policy.room);
    let line_key = keys
        .iter()
        .find(|k| k.ends_with(":line"))
        .ok_or("no line key")?
        .clone();
    let gone = |i: u64| i % 100 == 37;
    for i in (1..=line).filter(|&i| gone(i)) {
        store.release(policy, line_id(i)).await?;
    }
    let snapshot = store.sync(policy, SeenWaiters::default()).await?;
    let sample = 2_000u64.min(line);
    let (mut worst, mut near_head, mut checked) = (0f64, 0u64, 0u64);
    // The first EXACT_RANKS + 50 waiters, then an even spread over the rest of the line.
    let indices = (1..=(EXACT_RANKS + 50).min(line))
        .chain((0..sample).map(|k| 1 + k * line / sample))
        .filter(|&i| !gone(i));
    for i in indices {
        let member = tower_waiting_room::__private::redis_member(&line_id(i)).to_vec();
        let score: Option<f64> = redis::cmd("ZSCORE")
            .arg(&line_key)
            .arg(&member)
            .query_async(&mut conn)
            .await?;
        let rank: Option<u64> = redis::cmd("ZRANK")
            .arg(&line_key)
            .arg(&member)
            .query_async(&mut conn)
            .await?;
        let (Some(score), Some(rank)) = (score, rank) else {
            continue;
        };
        let exact = rank + 1;
        let shown = snapshot
            .position_of(score)
            .ok_or("a waiter in line is ahead of the snapshot's head")?;
        if exact <= EXACT_RANKS {
            near_head = near_head.max(shown.abs_diff(exact));
        } else {
            worst = worst.max(shown.abs_diff(exact) as f64 / exact as f64);
        }
        checked += 1;
    }
    eprintln!(
        "position error ({checked} waiters of {}, one in a hundred gone): at most {:.4} \
         beyond rank {EXACT_RANKS}, {near_head} before it",
        snapshot.waiting, worst
    );
    let mut m = Map::new();
    m.insert("position_error_max".into(), json!(round(worst, 5)));
    m.insert("position_error_near_head".into(), json!(near_head));
    m.insert("position_error_checked".into(), json!(checked));
    m.insert(
        "position_error_checkpoints".into(),
        json!(snapshot.checkpoints.len()),
    );
    Ok(m)
}
