//! Matching: joins and polls through `RedisMatchStore` (by way of `Matchmaker`) next to a trivial
//! `EVALSHA`, and a poll's p50/p99 with many users waiting.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tower_waiting_room::store::RedisStore;
use tower_waiting_room_matching::store::RedisMatchStore;
use tower_waiting_room_matching::{
    GroupSize, JoinOutcome, MatchState, Matchmaker, Queue, Topic, UserId,
};

use super::measure::{concurrent_ops, median, percentile, round};
use super::redis_server::RedisServer;
use super::{BoxError, Settings};

/// Users waiting for the poll-cost scenario: 1 000 and 100 000 (the smoke run: 1 000 and 10 000).
fn matching_scales(settings: &Settings) -> [u64; 2] {
    if settings.mode == "smoke" {
        [1_000, 10_000]
    } else {
        [1_000, 100_000]
    }
}

pub(crate) async fn matching_scenarios(
    settings: &Settings,
    redis: &RedisServer,
) -> Result<Map<String, Value>, BoxError> {
    let hour = Duration::from_secs(3_600);
    let matchmaker = |prefix: &str| -> Result<Matchmaker, BoxError> {
        let store = RedisStore::builder()
            .url(redis.url())
            .prefix(prefix)
            .timeout(Duration::from_secs(5))
            .build()?;
        // Nothing expires during the run: a group of 3 needs three waiters, and pairs of
        // waiters stay waiting.
        Ok(Matchmaker::builder()
            .fallback_after(hour)
            .timeout(2 * hour)
            .confirm_ttl(hour)
            .keep_confirmed(hour)
            .build(RedisMatchStore::new(&store))?)
    };
    let queue = |n: u64| Queue::new(Topic::new(format!("topic-{n}")).unwrap(), GroupSize::TRIO);
    let user = |prefix: &str, n: u64| UserId::new(format!("{prefix}-{n}")).unwrap();

    // Joins and polls: half the operations are a newcomer joining one of 1 000 queues of 3
    // (every third join forms a group), half a poll of an earlier newcomer.
    let client = redis::Client::open(redis.url())?;
    let conn = client.get_connection_manager().await?;
    let trivial = Arc::new(redis::Script::new("return 1"));
    let mut runs = Vec::new();
    let mut evalsha_runs = Vec::new();
    let mut usec = Vec::new();
    for round in 0..settings.repeats {
        let m = matchmaker(&format!("benchmatch{round}"))?;
        redis.command(&["CONFIG", "RESETSTAT"])?;
        // Operation numbers from one counter: each newcomer joins exactly once.
        let counter = Arc::new(AtomicU64::new(0));
        let ops = concurrent_ops(settings, {
            let m = m.clone();
            move |_| {
                let m = m.clone();
                let i = counter.fetch_add(1, Ordering::Relaxed);
                async move {
                    if i.is_multiple_of(2) {
                        let u = user("j", i / 2);
                        matches!(
                            m.join(u, queue(i / 2 % 1_000)).await,
                            Ok(JoinOutcome::Joined(_))
                        )
                    } else {
                        // An earlier newcomer (its join is done or under way: idle counts).
                        let u = user("j", (i / 2).saturating_sub(64));
                        m.status(u).await.is_ok()
                    }
                }
            }
        })
        .await;
        runs.push(ops);
        // Matching's steps are functions of its library: FCALL (the room is not called here).
        usec.push(redis.usec_per_call("fcall"));
        redis.command(&["CONFIG", "RESETSTAT"])?;
        let ops = concurrent_ops(settings, {
            let (conn, script) = (conn.clone(), trivial.clone());
            move |_| {
                let (mut conn, script) = (conn.clone(), script.clone());
                async move { matches!(script.invoke_async::<_, i64>(&mut conn).await, Ok(1)) }
            }
        })
        .await;
        evalsha_runs.push(ops);
        eprintln!(
            "round {}/{}: matching joins+polls {:>8.0} ops/s  EVALSHA return 1 {:>8.0} ops/s",
            round + 1,
            settings.repeats,
            runs[round],
            evalsha_runs[round]
        );
    }
    let ops = median(&runs);
    let evalsha = median(&evalsha_runs);

    // A poll's cost with many waiting: pairs of waiters in queues of 3 (no group forms), then
    // polls of random waiters, one at a time.
    let mut p50 = Map::new();
    let mut p99 = Map::new();
    for n in matching_scales(settings) {
        let prefix = format!("benchmatchscale{n}");
        let m = matchmaker(&prefix)?;
        let next = Arc::new(AtomicU64::new(0));
        let mut fill = Vec::new();
        for _ in 0..settings.script_concurrency {
            let (m, next) = (m.clone(), next.clone());
            fill.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    let joined = m.join(user("w", i), queue(i / 2)).await;
                    assert!(
                        matches!(joined, Ok(JoinOutcome::Joined(MatchState::Waiting(_)))),
                        "{joined:?}"
                    );
                }
            }));
        }
        for t in fill {
            t.await?;
        }
        let mut samples = Vec::with_capacity(settings.latency_samples);
        for k in 0..settings.latency_samples as u64 {
            let u = user("w", (k * 7_919) % n);
            let t0 = Instant::now();
            let state = m.status(u).await?;
            samples.push(t0.elapsed().as_secs_f64() * 1e6);
            assert!(matches!(state, MatchState::Waiting(_)), "{state:?}");
        }
        p50.insert(n.to_string(), json!(round(median(&samples), 1)));
        p99.insert(n.to_string(), json!(round(percentile(&samples, 99.0), 1)));
        eprintln!(
            "matching: {n} waiting: poll p50 {:.0} us, p99 {:.0} us",
            median(&samples),
            percentile(&samples, 99.0)
        );
    }
    let [small, large] = matching_scales(settings).map(|n| n.to_string());
    let ratio = p99[&large].as_f64().unwrap_or(f64::NAN) / p99[&small].as_f64().unwrap_or(f64::NAN);
    let mut m = Map::new();
    m.insert("matching_ops_per_sec".into(), json!(round(ops, 0)));
    m.insert(
        "matching_evalsha_ops_per_sec".into(),
        json!(round(evalsha, 0)),
    );
    m.insert("matching_ratio".into(), json!(round(ops / evalsha, 3)));
    m.insert(
        "matching_usec_per_script_call".into(),
        json!(round(median(&usec), 2)),
    );
    m.insert("matching_poll_p50_us".into(), Value::Object(p50));
    m.insert("matching_poll_p99_us".into(), Value::Object(p99));
    m.insert("matching_poll_p99_ratio".into(), json!(round(ratio, 2)));
    Ok(m)
}
