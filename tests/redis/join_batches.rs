//! Joins in batches on a real `redis-server` (`src/store/redis/batch.rs`, `script/batch.lua`):
//! newcomers who arrive while a join call is in flight are placed by few calls, in order, by
//! the batch's fast path when the room is settled; a run of batches answers and writes exactly
//! what the same joins one after the other answer and write; a batch that fails with the store
//! gives each of its newcomers the error a single join would get.

use crate::redis_harness;
use crate::redis_store_v2::early_in_a_second;

use std::time::Duration;

use redis::AsyncCommands;
use redis_harness::Server;
use tower_waiting_room::__private::redis_keys;
use tower_waiting_room::store::{Decision, RedisStore, Store, StoreErrorKind};
use tower_waiting_room::{RoomPolicy, SessionId};

fn store(server: &Server) -> RedisStore {
    RedisStore::builder()
        .url(server.url())
        .timeout(Duration::from_secs(5))
        .build()
        .expect("store builds")
}

fn policy(room: &str, capacity: u32) -> RoomPolicy {
    RoomPolicy::new(room, capacity)
        .with_ttls(
            Duration::from_secs(600),
            Duration::from_secs(60),
            Duration::from_secs(600),
        )
        .with_max_queue_len(100_000)
}

/// How many times the server ran `command` (its `INFO commandstats`, which counts the commands
/// a function runs too).
fn calls(server: &Server, command: &str) -> u64 {
    server
        .info_field("commandstats", &format!("cmdstat_{command}"))
        .and_then(|v| {
            v.split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .map(|n| n.parse().unwrap())
        })
        .unwrap_or(0)
}

/// An answer as text, a slot's expiry left out (the twin rooms' clocks are a few ms apart).
fn text(d: Result<Decision, tower_waiting_room::store::StoreError>) -> String {
    match d {
        Ok(Decision::Admitted { .. }) => "Admitted".to_owned(),
        other => format!("{other:?}"),
    }
}

/// The answers to joins all made before any is awaited, in their order.
async fn together(store: &RedisStore, p: &RoomPolicy, sessions: &[SessionId]) -> Vec<String> {
    let calls: Vec<_> = sessions.iter().map(|&s| store.join(p, s)).collect();
    let mut out = Vec::new();
    for call in calls {
        out.push(text(call.await));
    }
    out
}

/// The same joins, each awaited before the next is made: batches of one.
async fn one_by_one(store: &RedisStore, p: &RoomPolicy, sessions: &[SessionId]) -> Vec<String> {
    let mut out = Vec::new();
    for &s in sessions {
        out.push(text(store.join(p, s).await));
    }
    out
}

// One thread: the 300 joins are all made before the batch's task first runs, so they arrive
// together however loaded the machine is. On two threads that task raced the loop making them,
// and a busy machine that stopped the loop between joins split them into small batches.
#[tokio::test]
async fn newcomers_arriving_together_are_placed_by_few_calls_in_their_order() {
    let server = Server::start(&[]);
    let store = store(&server);
    let p = policy("batched", 1);
    // The window opened below ends with its second: the batches go well within it.
    early_in_a_second().await;
    store.enter(&p, SessionId::random()).await.unwrap();
    // One waiter by main: the room is settled, and the fast path's window open.
    store.enter(&p, SessionId::random()).await.unwrap();
    server.command(&["CONFIG", "RESETSTAT"]).unwrap();

    let sessions: Vec<SessionId> = (0..300).map(|_| SessionId::random()).collect();
    let answers: Vec<Decision> = {
        let calls: Vec<_> = sessions.iter().map(|&s| store.join(&p, s)).collect();
        let mut out = Vec::new();
        for call in calls {
            out.push(call.await.unwrap());
        }
        out
    };
    let mut last = 0;
    for (i, d) in answers.iter().enumerate() {
        let Decision::Waiting {
            position,
            waiting,
            place: Some(tower_waiting_room::store::Place::Seq(place)),
            ..
        } = *d
        else {
            panic!("newcomer #{i}: {d:?}")
        };
        assert_eq!((position, waiting), (i as u64 + 2, i as u64 + 2), "#{i}");
        assert!(place > last, "#{i}: place {place} after {last}");
        last = place;
    }
    // All 300 waiting when the first batch goes, at most 64 a batch: 64, 64, 64, 64 and 44.
    let fcalls = calls(&server, "fcall");
    assert_eq!(fcalls, 5, "{fcalls} calls for 300 joins");
    // Placed by the batch's fast path: one INCRBY a batch, no INCR of one newcomer.
    assert!(calls(&server, "incrby") >= 5, "the batch's fast path ran");
    assert_eq!(
        calls(&server, "incr"),
        0,
        "no newcomer was placed alone by join's"
    );
    eprintln!("300 joins in {fcalls} calls");
}

/// Seeded batches of every kind of join (newcomers, waiters again, the slot holder, the same
/// session twice, a banned one, joins past the line's bound), with the holder released and the
/// line moving between them: room A takes each batch's joins together, room B one by one. Every
/// answer, and every key of the two rooms at the end, must be the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_answer_and_write_what_joins_one_by_one_do() {
    let server = Server::start(&[]);
    let store = store(&server);
    let (a, b) = (policy("twin-a", 2), policy("twin-b", 2));
    let (a, b) = (a.with_max_queue_len(800), b.with_max_queue_len(800));
    let mut rng = 0x0BA7_C4E5_u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut known: Vec<SessionId> = Vec::new();
    let banned = SessionId::random();
    let (mut fast, mut full) = (0, 0);
    for round in 0..40 {
        if round == 25 {
            // A ban in force closes the fast path's window: the last rounds are main's.
            let until = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
                + 600_000;
            for p in [&a, &b] {
                store.ban(p, banned, until).await.unwrap();
            }
        }
        let n = 1 + next(60) as usize;
        let mut batch = Vec::with_capacity(n);
        // Every other batch newcomers only, as most are in an opening; the others mixed.
        let mixed = round % 2 == 1;
        for _ in 0..n {
            let s = match if mixed { next(20) } else { 0 } {
                0..=13 => SessionId::random(),
                14..=16 if !known.is_empty() => known[next(known.len() as u64) as usize],
                17 if !batch.is_empty() => batch[next(batch.len() as u64) as usize],
                18 if round >= 25 => banned,
                _ => SessionId::random(),
            };
            batch.push(s);
        }
        let incrby = calls(&server, "incrby");
        let got_a = together(&store, &a, &batch).await;
        fast += u64::from(calls(&server, "incrby") > incrby);
        full += got_a.iter().filter(|d| d.starts_with("Ok(Full")).count();
        let got_b = one_by_one(&store, &b, &batch).await;
        for (i, (x, y)) in got_a.iter().zip(&got_b).enumerate() {
            assert_eq!(x, y, "round {round}, join #{i} of {n}");
        }
        known.extend(batch);
        if round % 5 == 4 {
            // The line moves: the head is let in as the slots free.
            for p in [&a, &b] {
                let stats = store.stats(p).await.unwrap();
                assert!(stats.admitted <= 2);
            }
            let head = known[next(known.len() as u64) as usize];
            for p in [&a, &b] {
                store.release(p, head).await.unwrap();
            }
        }
    }
    assert!(
        fast >= 10,
        "the batch's fast path placed only {fast} batches"
    );
    assert!(
        full > 0,
        "the line never filled: the run did not reach its bound"
    );
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let (keys_a, keys_b) = (redis_keys(&store, "twin-a"), redis_keys(&store, "twin-b"));
    for (ka, kb) in keys_a.iter().zip(&keys_b) {
        let name = ka.rsplit(':').next().unwrap();
        if !["line", "active", "granted", "seq", "banned"].contains(&name) {
            continue;
        }
        let kind: String = redis::cmd("TYPE")
            .arg(ka)
            .query_async(&mut c)
            .await
            .unwrap();
        let (x, y) = if kind == "zset" {
            let x: Vec<(Vec<u8>, f64)> = c.zrange_withscores(ka, 0, -1).await.unwrap();
            let y: Vec<(Vec<u8>, f64)> = c.zrange_withscores(kb, 0, -1).await.unwrap();
            // Slots' expiries are times, a few ms apart: their members must match.
            if name == "active" || name == "granted" {
                let members = |v: Vec<(Vec<u8>, f64)>| {
                    let mut m: Vec<Vec<u8>> = v.into_iter().map(|e| e.0).collect();
                    m.sort();
                    m
                };
                (format!("{:?}", members(x)), format!("{:?}", members(y)))
            } else {
                (format!("{x:?}"), format!("{y:?}"))
            }
        } else {
            let x: Option<Vec<u8>> = c.get(ka).await.unwrap();
            let y: Option<Vec<u8>> = c.get(kb).await.unwrap();
            (format!("{x:?}"), format!("{y:?}"))
        };
        assert_eq!(x, y, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_store_fails_gives_each_newcomer_the_error_of_a_single_join() {
    let mut server = Server::start(&[]);
    let store = RedisStore::builder()
        .url(server.url())
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let p = policy("failing", 1);
    store.enter(&p, SessionId::random()).await.unwrap();
    server.stop();
    let sessions: Vec<SessionId> = (0..20).map(|_| SessionId::random()).collect();
    let calls: Vec<_> = sessions.iter().map(|&s| store.join(&p, s)).collect();
    for (i, call) in calls.into_iter().enumerate() {
        let e = call.await.expect_err("no store, no place");
        assert!(
            matches!(
                e.kind(),
                StoreErrorKind::Unavailable | StoreErrorKind::Timeout
            ),
            "#{i}: {e}"
        );
    }
}
