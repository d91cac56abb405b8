//! A long line's far checkpoints, shared between the syncs of half a second
//! (`src/store/redis/script/checkpoints.lua`), against a real `redis-server`: a sync just after
//! another reads only the ranks below `EXACT_RANKS` and the last waiter, and its far ranks are
//! moved by the places the line moved since; a `far` field that is stale, ahead of the clock,
//! damaged or of another shape is not used, and a short line never writes one. While silence is
//! excused no checkpoint says its waiter is silent, and none is kept for the syncs after.

use crate::redis_harness;
use crate::redis_store_v2::{conn, store, START_MS};

use std::time::Duration;

use redis::AsyncCommands;
use redis_harness::Server;
use tower_waiting_room::__private::{
    redis_keys, redis_member, room_script_numbers, ROOM_LIBRARY_NAME,
};
use tower_waiting_room::store::snapshot::{RoomSnapshot, EXACT_RANKS};
use tower_waiting_room::store::{Decision, RedisStore, SnapshotStore, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{RoomPolicy, SessionId};

/// Past the script's SHARED_FROM (10 000).
const LINE: usize = 12_000;

/// One slot, held for an hour; two minutes to wait unseen.
fn policy(room: &str) -> RoomPolicy {
    RoomPolicy::new(room, 1)
        .with_ttls(
            Duration::from_secs(3_600),
            Duration::from_secs(60),
            Duration::from_secs(120),
        )
        .with_max_queue_len(20_000)
}

/// The slot taken, then `n` waiters (joins 200 at a time), in the order of their places.
async fn fill(store: &RedisStore, policy: &RoomPolicy, n: usize) -> Vec<SessionId> {
    let first = store.enter(policy, SessionId::random()).await.unwrap();
    assert!(matches!(first, Decision::Admitted { .. }), "{first:?}");
    let mut line = Vec::with_capacity(n);
    while line.len() < n {
        let mut joins = tokio::task::JoinSet::new();
        for _ in 0..200.min(n - line.len()) {
            let (store, policy) = (store.clone(), policy.clone());
            joins.spawn(async move {
                let s = SessionId::random();
                let d = store.join(&policy, s).await.unwrap();
                assert!(matches!(d, Decision::Waiting { .. }), "{d:?}");
                s
            });
        }
        while let Some(s) = joins.join_next().await {
            line.push(s.unwrap());
        }
    }
    line
}

fn key(store: &RedisStore, room: &str, name: &str) -> String {
    redis_keys(store, room)
        .into_iter()
        .find(|k| k.ends_with(&format!(":{name}")))
        .unwrap()
}

/// A sync with nobody seen, and the `ZRANGE`s it made.
async fn sync(server: &Server, store: &RedisStore, policy: &RoomPolicy) -> (RoomSnapshot, u64) {
    let before = server.command_calls("zrange");
    let snap = store.sync(policy, Vec::new().into()).await.unwrap();
    (snap, server.command_calls("zrange") - before)
}

/// Each checkpoint's true rank now: how many in line have a lower score.
async fn true_ranks(
    c: &mut redis::aio::MultiplexedConnection,
    line_key: &str,
    snap: &RoomSnapshot,
) -> Vec<(u64, u64)> {
    let line: Vec<(Vec<u8>, f64)> = c.zrange_withscores(line_key, 0, -1).await.unwrap();
    let scores: Vec<f64> = line.iter().map(|(_, s)| *s).collect();
    assert_eq!(snap.waiting, scores.len() as u64);
    snap.checkpoints
        .iter()
        .map(|cp| {
            let rank = scores.partition_point(|&s| s < cp.score) as u64;
            assert_eq!(
                scores.get(rank as usize),
                Some(&cp.score),
                "a waiter in line"
            );
            (cp.rank, rank)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_just_after_another_takes_the_far_ranks_moved_by_the_line() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let policy = policy("shared");
    let line = fill(&store, &policy, LINE).await;
    let line_key = key(&store, "shared", "line");
    let mut c = conn(&server).await;

    let (a, read) = sync(&server, &store, &policy).await;
    assert!(
        read > 400,
        "the first sync reads the far ranks: {read} ZRANGEs"
    );
    for (shown, exact) in true_ranks(&mut c, &line_key, &a).await {
        assert_eq!(shown, exact);
    }

    // 100 ms later: the same checkpoints, from two reads (the near ranks and the last waiter).
    clock.advance(Duration::from_millis(100));
    let (b, read) = sync(&server, &store, &policy).await;
    assert!(read <= 3, "a sync just after reads {read} ZRANGEs");
    assert_eq!(
        a.checkpoints
            .iter()
            .map(|c| (c.rank, c.score))
            .collect::<Vec<_>>(),
        b.checkpoints
            .iter()
            .map(|c| (c.rank, c.score))
            .collect::<Vec<_>>()
    );

    // The head moves by 40 (let in), and the 30 at ranks 6 000.. leave from the middle.
    assert_eq!(store.admit_next(&policy, 40).await.unwrap(), 40);
    let middle: Vec<(Vec<u8>, f64)> = c.zrange_withscores(&line_key, 6_000, 6_029).await.unwrap();
    for (member, _) in &middle {
        let s = line
            .iter()
            .find(|s| redis_member(s) == member.as_slice())
            .unwrap();
        assert!(store.release(&policy, *s).await.unwrap());
    }
    let lowest_leaver = middle[0].1;
    clock.advance(Duration::from_millis(100));
    let (moved, read) = sync(&server, &store, &policy).await;
    assert!(read <= 3, "still shared: {read} ZRANGEs");
    assert_eq!(moved.waiting, (LINE - 40 - 30) as u64);
    let ranks = true_ranks(&mut c, &line_key, &moved).await;
    assert!(ranks.windows(2).all(|w| w[0].0 < w[1].0), "ranks rise");
    for (cp, (shown, exact)) in moved.checkpoints.iter().zip(&ranks) {
        if *exact < EXACT_RANKS || cp.score < lowest_leaver {
            // Read now, or ahead of everyone who left from the middle: moved by the head's 40.
            assert_eq!(shown, exact, "score {}", cp.score);
        } else {
            // Behind them: high by at most the 30, who were not seen leaving.
            assert!(shown >= exact && shown - exact <= 30, "{shown} vs {exact}");
        }
    }
    // Every waiter's position is still within 1 % of the exact one.
    let now: Vec<(Vec<u8>, f64)> = c.zrange_withscores(&line_key, 0, -1).await.unwrap();
    for (rank, (_, score)) in now.iter().enumerate() {
        let shown = moved.position_of(*score).unwrap();
        let exact = rank as u64 + 1;
        assert!(shown.abs_diff(exact) * 100 <= exact, "{shown} vs {exact}");
    }

    // Half a second after the read: read again, exact.
    clock.advance(Duration::from_millis(300));
    let (again, read) = sync(&server, &store, &policy).await;
    assert!(read > 400, "a stale far read again: {read} ZRANGEs");
    for (shown, exact) in true_ranks(&mut c, &line_key, &again).await {
        assert_eq!(shown, exact);
    }
}

/// A `far` field's bytes, kept at the time given.
type FarAt = Box<dyn Fn(u64) -> Vec<u8>>;

/// msgpack of an array of unsigned integers and strings, as cmsgpack reads it.
fn msgpack(items: &[Result<u64, &str>]) -> Vec<u8> {
    let mut out = vec![0xdc];
    out.extend_from_slice(&(items.len() as u16).to_be_bytes());
    for item in items {
        match item {
            Ok(n) => {
                out.push(0xcf);
                out.extend_from_slice(&n.to_be_bytes());
            }
            Err(s) => {
                out.push(0xd9);
                out.push(s.len() as u8);
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_far_field_that_cannot_serve_is_read_again() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let policy = policy("farbad");
    fill(&store, &policy, LINE).await;
    let settings = key(&store, "farbad", "settings");
    let line_key = key(&store, "farbad", "line");
    let mut c = conn(&server).await;
    let (a, _) = sync(&server, &store, &policy).await;
    let head: Vec<(Vec<u8>, f64)> = c.zrange_withscores(&line_key, 99, 99).await.unwrap();
    let before = head[0].1 as u64;

    let score = |n: u64| n.to_string();
    let (s1, s2) = (score(before + 1), score(before + 2));
    // Each kept at `at` (the time of the sync that reads it, unless said otherwise).
    let cases: Vec<(&str, FarAt)> = vec![
        ("not msgpack", Box::new(|_| b"\xc1garbage".to_vec())),
        ("a string", Box::new(|_| b"\xa3abc".to_vec())),
        (
            "too short",
            Box::new(move |at| msgpack(&[Ok(at), Ok(before)])),
        ),
        (
            "ranks that do not rise",
            Box::new(move |at| {
                msgpack(&[
                    Ok(at),
                    Ok(before),
                    Ok(100),
                    Err(&s1),
                    Ok(0),
                    Ok(100),
                    Err(&s2),
                    Ok(0),
                ])
            }),
        ),
        (
            "a score that is no number",
            Box::new(move |at| msgpack(&[Ok(at), Ok(before), Ok(100), Err("x"), Ok(0)])),
        ),
        (
            "kept ahead of the clock",
            Box::new(move |at| {
                msgpack(&[
                    Ok(at + 1),
                    Ok(before),
                    Ok(100),
                    Err(&score(before + 1)),
                    Ok(0),
                ])
            }),
        ),
    ];
    let mut now = START_MS;
    for (what, far) in cases {
        now += 50;
        clock.set(now);
        let _: () = c.hset(&settings, "far", far(now)).await.unwrap();
        let (snap, read) = sync(&server, &store, &policy).await;
        assert!(read > 400, "{what}: read again ({read} ZRANGEs)");
        assert_eq!(snap.checkpoints.len(), a.checkpoints.len(), "{what}");
        for (shown, exact) in true_ranks(&mut c, &line_key, &snap).await {
            assert_eq!(shown, exact, "{what}");
        }
        // And written anew, for the next sync.
        now += 50;
        clock.set(now);
        let (_, read) = sync(&server, &store, &policy).await;
        assert!(read <= 3, "{what}: shared after it ({read} ZRANGEs)");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_line_keeps_no_far_field() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let policy = policy("farshort");
    fill(&store, &policy, 2_000).await;
    let (_, first) = sync(&server, &store, &policy).await;
    clock.advance(Duration::from_millis(100));
    let (_, second) = sync(&server, &store, &policy).await;
    assert_eq!(first, second, "every sync reads its own ranks");
    assert!(first > 100);
    let mut c = conn(&server).await;
    let kept: bool = c
        .hexists(key(&store, "farshort", "settings"), "far")
        .await
        .unwrap();
    assert!(!kept);
}

/// A sync called by hand at `now` (a manual clock's, as the store's own calls name it), nobody seen, with silence excused (`"1"`, as the store's own
/// call says for a gateway that failed to reach Redis within `queue_ttl`) or not: each
/// checkpoint's silence, and the pace's count of the silent.
async fn sync_by_hand(
    c: &mut redis::aio::MultiplexedConnection,
    store: &RedisStore,
    policy: &RoomPolicy,
    now: u64,
    excused: &str,
) -> (Vec<i64>, i64) {
    let keys = redis_keys(store, &policy.room);
    let [line, numbers] = room_script_numbers(policy);
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(format!("{ROOM_LIBRARY_NAME}_sync")).arg(keys.len());
    for k in &keys {
        cmd.arg(k);
    }
    cmd.arg(format!("m{now}"))
        .arg(line)
        .arg(numbers)
        .arg(excused);
    for _ in 0..11 {
        cmd.arg("");
    }
    let reply: Vec<redis::Value> = cmd.query_async(c).await.unwrap();
    let int = |v: &redis::Value| match v {
        redis::Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    };
    // The reply's 21 pace numbers from index 10 (the silent count the 17th), then the
    // checkpoints' count and each checkpoint's rank, score and silence.
    let count = int(&reply[31]) as usize;
    let silent = (0..count).map(|i| int(&reply[32 + 3 * i + 2])).collect();
    (silent, int(&reply[10 + 16]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_silence_is_excused_no_checkpoint_is_silent_and_none_is_shared() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let policy = policy("farexcused");
    fill(&store, &policy, LINE).await;
    let settings = key(&store, "farexcused", "settings");
    let mut c = conn(&server).await;
    // Nobody checked in for twice `queue_ttl`: every waiter is silent by the turn's rule.
    let later = START_MS + 240_000;
    let (silent, count) = sync_by_hand(&mut c, &store, &policy, later, "1").await;
    assert!(silent.len() > 400, "{} checkpoints", silent.len());
    assert!(
        silent.iter().all(|&s| s == 0) && count == 0,
        "excused: {count} counted silent, checkpoints {:?}",
        &silent[..10]
    );
    let kept: bool = c.hexists(&settings, "far").await.unwrap();
    assert!(!kept, "a sync with silence excused kept its checkpoints");
    // The same sync, not excused: they are silent, and kept for the syncs after it.
    let (silent, count) = sync_by_hand(&mut c, &store, &policy, later + 1, "0").await;
    assert!(
        silent.iter().all(|&s| s == 1) && count as usize >= LINE - 1,
        "not excused: {count} counted silent, checkpoints {:?}",
        &silent[..10]
    );
    let kept: bool = c.hexists(&settings, "far").await.unwrap();
    assert!(kept, "the far checkpoints not kept");
}
