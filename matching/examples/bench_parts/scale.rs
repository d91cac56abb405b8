//! Scale: the Redis store with 1 000 to a million waiters (p50/p99 of poll and enter, bytes per
//! waiter), and the embedded store's polls at 1 000 and 100 000 waiters.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tower_waiting_room::__private::redis_keys;
use tower_waiting_room::store::{Decision, MemoryStore, RedisStore, Store};
use tower_waiting_room::{RoomPolicy, SessionId};

use super::measure::{now_ms, percentile, round};
use super::micro::now_or_never;
use super::redis_server::RedisServer;
use super::{BoxError, Settings, SCALE_ROOM};

pub(crate) async fn scale_scenarios(
    settings: &Settings,
    redis: &RedisServer,
) -> Result<Map<String, Value>, BoxError> {
    let store = RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(5))
        .build()?;
    let keys = redis_keys(&store, SCALE_ROOM);
    let client = redis::Client::open(redis.url())?;
    let mut conn = client
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?;
    // Fills the line server-side: waiters 1..=n by sequence, each member the 16 raw bytes of
    // the big-endian u128 i (store v2 keeps no per-waiter check-in to fill), one visitor inside
    // holding the only slot, also of 16 bytes (as tests/redis/store_redis_faults/bad_days.rs
    // does): a room of whole ids, as a library before members of 14 bytes made it (a member of
    // 14 bytes anywhere says a room keeps them all so).
    let fill = redis::Script::new(
        r"
        local now = tonumber(ARGV[1])
        local n = tonumber(ARGV[2])
        for i = 1, n do
          redis.call('ZADD', KEYS[1], i, struct.pack('>I4I4I4I4', 0, 0, 0, i))
        end
        redis.call('SET', KEYS[2], n)
        redis.call('ZADD', KEYS[3], now + 3600000, 'someone-inside-1')
        return n",
    );
    let mut poll50 = Map::new();
    let mut poll99 = Map::new();
    let mut enter50 = Map::new();
    let mut enter99 = Map::new();
    let mut bytes = Map::new();
    let mut server_us = Map::new();
    let mut fill_s = Map::new();
    let mut last_bytes = 0.0;
    for &n in &settings.scales {
        let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let before = redis.used_memory()?;
        let t = Instant::now();
        // line, seq, active (`redis_keys`' order: seq, line, active, ...).
        let _: i64 = fill
            .key(&keys[1])
            .key(&keys[0])
            .key(&keys[2])
            .arg(now_ms())
            .arg(n)
            .invoke_async(&mut conn)
            .await?;
        fill_s.insert(n.to_string(), json!(round(t.elapsed().as_secs_f64(), 2)));
        let per_waiter = redis.used_memory()?.saturating_sub(before) as f64 / n as f64;
        last_bytes = per_waiter;
        let policy = RoomPolicy::new(SCALE_ROOM, 1)
            .with_ttls(
                Duration::from_secs(3_600),
                Duration::from_secs(30),
                Duration::from_secs(3_600),
            )
            .with_max_queue_len(n * 2 + 1_000_000);
        // Warm the connection and the script cache.
        store.stats(&policy).await?;

        redis.command(&["CONFIG", "RESETSTAT"])?;
        let mut polls = Vec::with_capacity(settings.latency_samples);
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..settings.latency_samples {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = 1 + x % n;
            let s = SessionId::from_bytes(u128::from(i).to_be_bytes());
            let t = Instant::now();
            let d = store.poll(&policy, s).await?;
            polls.push(t.elapsed().as_secs_f64() * 1e6);
            match d {
                Decision::Waiting { position, .. } if position == i => {}
                other => return Err(format!("poll of waiter {i} of {n}: {other:?}").into()),
            }
        }
        let poll_server = redis.usec_per_call("fcall");
        redis.command(&["CONFIG", "RESETSTAT"])?;
        let mut enters = Vec::with_capacity(settings.latency_samples);
        for k in 0..settings.latency_samples as u64 {
            let s = SessionId::random();
            let t = Instant::now();
            let d = store.enter(&policy, s).await?;
            enters.push(t.elapsed().as_secs_f64() * 1e6);
            match d {
                Decision::Waiting { position, .. } if position == n + k + 1 => {}
                other => return Err(format!("enter at {n}: {other:?}").into()),
            }
        }
        let enter_server = redis.usec_per_call("fcall");
        let key = n.to_string();
        poll50.insert(key.clone(), json!(round(percentile(&polls, 50.0), 1)));
        poll99.insert(key.clone(), json!(round(percentile(&polls, 99.0), 1)));
        enter50.insert(key.clone(), json!(round(percentile(&enters, 50.0), 1)));
        enter99.insert(key.clone(), json!(round(percentile(&enters, 99.0), 1)));
        bytes.insert(key.clone(), json!(per_waiter.round() as u64));
        server_us.insert(
            key,
            json!({"poll": round(poll_server, 2), "enter": round(enter_server, 2)}),
        );
        eprintln!(
            "scale {n:>9}: poll p50 {:>6.1} us p99 {:>6.1} us, enter p50 {:>6.1} us p99 {:>6.1} us, {:.0} bytes/waiter (Redis-side {:.1}/{:.1} us)",
            percentile(&polls, 50.0),
            percentile(&polls, 99.0),
            percentile(&enters, 50.0),
            percentile(&enters, 99.0),
            per_waiter,
            poll_server,
            enter_server
        );
    }
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await?;
    let first = settings.scales[0].to_string();
    let last = settings.scales[settings.scales.len() - 1].to_string();
    let growth = |m: &Map<String, Value>| {
        round(
            m[&last].as_f64().unwrap_or(0.0) / m[&first].as_f64().unwrap_or(1.0).max(0.001),
            2,
        )
    };
    let mut m = Map::new();
    m.insert("poll_p99_growth".into(), json!(growth(&poll99)));
    m.insert("poll_p50_growth".into(), json!(growth(&poll50)));
    m.insert("enter_p99_growth".into(), json!(growth(&enter99)));
    m.insert("poll_p50_us".into(), Value::Object(poll50));
    m.insert("poll_p99_us".into(), Value::Object(poll99));
    m.insert("enter_p50_us".into(), Value::Object(enter50));
    m.insert("enter_p99_us".into(), Value::Object(enter99));
    // (`bytes_per_waiter` itself is redis_scale's: a line filled through the script.)
    m.insert(
        "bytes_per_waiter_server_fill".into(),
        json!(last_bytes.round() as u64),
    );
    m.insert("bytes_per_waiter_by_scale".into(), Value::Object(bytes));
    m.insert(
        "redis_usec_per_call_by_scale".into(),
        Value::Object(server_us),
    );
    m.insert("fill_seconds".into(), Value::Object(fill_s));
    Ok(m)
}

/// The embedded store's scales: its line is in process memory, so these are the same in every
/// mode (the smoke run too: filling 100 000 takes about a second even in a debug build).
pub(crate) const MEMORY_SCALES: [u64; 2] = [1_000, 100_000];

/// The embedded store at [`MEMORY_SCALES`] waiters: p50/p99 of a poll of a random waiter (its
/// position is checked), and the ratio of the p99s, largest to smallest. Called directly, in
/// process: the store's futures are ready at once.
pub(crate) fn memory_scale_scenarios(settings: &Settings) -> Result<Map<String, Value>, BoxError> {
    let mut poll50 = Map::new();
    let mut poll99 = Map::new();
    // Polls are a microsecond or two: ten times the samples of the Redis scales, for a p99 that
    // is not just the worst one.
    let samples = settings.latency_samples * 10;
    for n in MEMORY_SCALES {
        let store = MemoryStore::new();
        let hour = Duration::from_secs(3_600);
        let policy = RoomPolicy::new("benchmemory", 1)
            .with_ttls(hour, hour, hour)
            .with_max_queue_len(n * 2);
        let mut waiters = Vec::with_capacity(n as usize);
        now_or_never(store.enter(&policy, SessionId::random()))?;
        let t = Instant::now();
        for i in 1..=n {
            let s = SessionId::random();
            match now_or_never(store.enter(&policy, s))? {
                Decision::Waiting { position, .. } if position == i => waiters.push(s),
                other => return Err(format!("memory enter {i} of {n}: {other:?}").into()),
            }
        }
        let fill = t.elapsed();
        let mut polls = Vec::with_capacity(samples);
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..samples {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = x % n;
            // Fetched before the clock starts: the bench's own array is not the store's cost.
            let s = std::hint::black_box(waiters[i as usize]);
            let t = Instant::now();
            let d = now_or_never(store.poll(&policy, s))?;
            polls.push(t.elapsed().as_secs_f64() * 1e6);
            match d {
                Decision::Waiting { position, .. } if position == i + 1 => {}
                other => return Err(format!("memory poll of waiter {i} of {n}: {other:?}").into()),
            }
        }
        let key = n.to_string();
        poll50.insert(key.clone(), json!(round(percentile(&polls, 50.0), 2)));
        poll99.insert(key, json!(round(percentile(&polls, 99.0), 2)));
        eprintln!(
            "memory {n:>9}: poll p50 {:>6.2} us p99 {:>6.2} us (filled in {:.2} s)",
            percentile(&polls, 50.0),
            percentile(&polls, 99.0),
            fill.as_secs_f64()
        );
    }
    let first = MEMORY_SCALES[0].to_string();
    let last = MEMORY_SCALES[MEMORY_SCALES.len() - 1].to_string();
    let ratio =
        poll99[&last].as_f64().unwrap_or(0.0) / poll99[&first].as_f64().unwrap_or(1.0).max(0.001);
    let mut m = Map::new();
    m.insert("memory_poll_p50_us".into(), Value::Object(poll50));
    m.insert("memory_poll_p99_us".into(), Value::Object(poll99));
    m.insert("memory_poll_p99_ratio".into(), json!(round(ratio, 2)));
    Ok(m)
}
