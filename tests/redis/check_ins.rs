//! A gateway's check-ins on the Redis store, against a real `redis-server` with a manual clock:
//! each waiter's liveness bits set once per epoch of each ring (src/store/redis/checked_in.rs),
//! again when another caller's epochs took a ring key, none in the turn ring behind a sync's turn
//! horizon; and its look-ups, once in the waiter's own abandon epoch (`found.rs`), most of which
//! come while the ring's epoch has not turned: the waiter's bits are set in it already. Behind
//! the turn horizon such a waiter is looked up only, its bits not written again; one that left
//! the line is still answered back, and one found ahead of the horizon still gets its turn
//! check-in.

use crate::redis_harness;
use crate::redis_store_v2::{
    admitted, advance, bloom_offsets, conn, key, policy_8s, store, waiter, START_MS,
};

use std::time::Duration;

use redis::AsyncCommands;
use redis_harness::Server;
use tower_waiting_room::__private::{
    redis_bloom_bits, redis_keys, room_script_numbers, ROOM_LIBRARY_NAME,
};
use tower_waiting_room::store::{Decision, SeenWaiters, SnapshotStore, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{RoomPolicy, SessionId};

/// The abandon ring's epoch (15 minutes: `abandon_after`'s default of 30, in two): `START_MS` is
/// the first moment of one.
const ABANDON_MS: u64 = 900_000;

/// Whether a session's own abandon epoch (found.rs: the ring's width, shifted by a phase from
/// its id's bytes 12..16) turns between `START_MS` and `START_MS + ABANDON_MS / 2`: then a
/// gateway looks it up again in the second half of the ring's epoch.
fn looked_up_again(s: &SessionId) -> bool {
    looked_up_again_within(s, ABANDON_MS / 2)
}

/// Whether a session's own abandon epoch turns between `START_MS` and `START_MS + ms`.
fn looked_up_again_within(s: &SessionId, ms: u64) -> bool {
    let b = s.as_bytes();
    let phase = u64::from(u32::from_be_bytes([b[12], b[13], b[14], b[15]])) % ABANDON_MS;
    (START_MS + phase) / ABANDON_MS != (START_MS + ms + phase) / ABANDON_MS
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_looked_up_again_in_the_same_epoch_is_not_written_again() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    // Bitmaps of about 1.6 million bits: two of these waiters seldom share one (those who do
    // are left out of the check below).
    let policy = policy_8s("lookups").with_max_queue_len(100_000);
    let m = redis_bloom_bits(policy.max_queue_len);
    // The holder keeps the one slot for an hour: nobody is promoted, skipped or let in.
    admitted(&store, &policy).await;
    let mut line = Vec::new();
    for _ in 0..60 {
        line.push(waiter(&store, &policy).await);
    }
    let keys = redis_keys(&store, &policy.room);
    let abandon = key(&keys, "abandon0").to_owned();
    // The horizon at the 20th waiter's place; every waiter is sent behind it (by a place
    // the gateway guessed too far back), so the 20 ahead of it are found ahead by the script.
    let horizon = line[19].1;
    let seen = || {
        SeenWaiters::with_horizon(
            Some(horizon as f64),
            line.iter().map(|&(s, _)| (s, (horizon + 1_000) as f64)),
        )
    };
    assert_eq!(seen().beyond().len(), line.len());
    // The first sync looks everyone up and writes their abandon bits.
    let first = store.sync(&policy, seen()).await.unwrap();
    assert!(first.unknown.is_empty());
    // Those looked up again half an epoch on: some ahead of the horizon, some behind it, and
    // one behind it who leaves the line before.
    let again: Vec<usize> = (0..line.len())
        .filter(|&i| looked_up_again(&line[i].0))
        .collect();
    let behind: Vec<usize> = again.iter().copied().filter(|&i| i >= 20).collect();
    let ahead: Vec<usize> = again.iter().copied().filter(|&i| i < 20).collect();
    assert!(
        behind.len() >= 3 && !ahead.is_empty(),
        "ids drawn so that too few are looked up again: {again:?}"
    );
    let leaver = line[behind[0]].0;
    // Whether a sync wrote a waiter's bits is seen by clearing one of them before it.
    for &(s, _) in &line {
        let (x, _) = bloom_offsets(&s, m);
        let _: u8 = c.setbit(&abandon, x as usize, false).await.unwrap();
    }
    // Half an epoch on, in the same abandon epoch of the ring: each of `again` is looked up.
    store.release(&policy, leaver).await.unwrap();
    advance(&clock, ABANDON_MS / 2);
    let zmscore_before = server.command_calls("zmscore");
    let turn = {
        let i = (START_MS + ABANDON_MS / 2) / 2_000 % 6;
        key(&keys, &format!("turn{i}")).to_owned()
    };
    let snap = store.sync(&policy, seen()).await.unwrap();
    assert!(
        server.command_calls("zmscore") > zmscore_before,
        "the second half's sync looked nobody up"
    );
    // The leaver is answered back (looked up, no place), the others not.
    assert_eq!(snap.unknown, vec![leaver], "answered back");
    // A bit another waiter's write also set says nothing of its own.
    let shared = |i: usize, x: u64| {
        line.iter().enumerate().any(|(j, &(t, _))| {
            let (tx, ty) = bloom_offsets(&t, m);
            j != i && (tx == x || ty == x)
        })
    };
    for (i, &(s, _)) in line.iter().enumerate() {
        let (x, y) = bloom_offsets(&s, m);
        if shared(i, x) {
            continue;
        }
        let bx: u8 = c.getbit(&abandon, x as usize).await.unwrap();
        // Found ahead of the horizon by their score, a waiter looked up gets its check-in in
        // both rings, as before; behind it, nothing is written again.
        let found_ahead = ahead.contains(&i);
        assert_eq!(bx == 1, found_ahead, "waiter {i}: its abandon bit");
        if found_ahead {
            let tx: u8 = c.getbit(&turn, x as usize).await.unwrap();
            let ty: u8 = c.getbit(&turn, y as usize).await.unwrap();
            assert_eq!(
                (tx, ty),
                (1, 1),
                "waiter {i}: found ahead, no turn check-in"
            );
        }
    }
}

/// A gateway sets each waiter's liveness bits once per epoch of each ring, not with every sync
/// (src/store/redis/checked_in.rs): a second sync in the same epochs writes no bit (one cleared
/// stays clear), a sync in the next turn epoch writes the turn ring alone. Yet after a dozen seconds of such syncs
/// (six turn epochs) every waiter's two bits are in both rings' current bitmaps, the waiter at
/// the head is let in at their turn, and the one silent since their join is skipped before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_sets_each_check_in_once_per_epoch() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    // Turn epochs of 2 s; abandon epochs of 15 min (abandon_after's default of 30).
    let policy = policy_8s("once");
    let m = redis_bloom_bits(policy.max_queue_len);
    let holder = admitted(&store, &policy).await;
    let (silent, _) = waiter(&store, &policy).await;
    let mut line = Vec::new();
    for _ in 0..50 {
        line.push(waiter(&store, &policy).await.0);
    }
    let keys = redis_keys(&store, &policy.room);
    // Whether a sync wrote a session's bits is seen by clearing one of them before it (the
    // BITFIELD count would mix the liveness reads in). The probe is a waiter whose bits no other
    // shares (a cleared bit of another's would go missing below), and whose own look-up epoch
    // (found.rs, phased by its id) holds for the test's 17 s: a session looked up ahead of the
    // horizon has its bits written in both rings with the look-up.
    let offsets = |s: &SessionId| {
        let (x, y) = bloom_offsets(s, m);
        [x, y]
    };
    let probe = *line
        .iter()
        .rev()
        .find(|&p| {
            !looked_up_again_within(p, 17_000)
                && line
                    .iter()
                    .filter(|&s| s != p)
                    .all(|s| offsets(s).iter().all(|o| !offsets(p).contains(o)))
        })
        .expect("fifty random waiters: one fits");
    let (px, py) = bloom_offsets(&probe, m);
    let bit = |c: &redis::aio::MultiplexedConnection, k: String, o: u64| {
        let mut c = c.clone();
        async move {
            let b: u8 = c.getbit(&k, o as usize).await.unwrap();
            b
        }
    };
    let clear = |c: &redis::aio::MultiplexedConnection, k: String| {
        let mut c = c.clone();
        async move {
            let _: u8 = c.setbit(&k, px as usize, false).await.unwrap();
        }
    };
    // Epoch 900 000 000 of the turn ring (2 s) is key turn0; 2 000 000 of the abandon ring
    // (15 min) is abandon0.
    let (turn0, turn1, abandon0) = (
        key(&keys, "turn0").to_owned(),
        key(&keys, "turn1").to_owned(),
        key(&keys, "abandon0").to_owned(),
    );
    // The first sync looks everyone up and writes both rings; the second writes nothing.
    store.sync(&policy, line.clone().into()).await.unwrap();
    assert_eq!(bit(&c, turn0.clone(), px).await, 1, "the first sync writes");
    clear(&c, turn0.clone()).await;
    clear(&c, abandon0.clone()).await;
    store.sync(&policy, line.clone().into()).await.unwrap();
    assert_eq!(
        (
            bit(&c, turn0.clone(), px).await,
            bit(&c, abandon0.clone(), px).await
        ),
        (0, 0),
        "the same epochs: no write"
    );
    // The turn ring's next epoch (the abandon ring's is the same): the turn ring alone.
    advance(&clock, 2_000);
    store.sync(&policy, line.clone().into()).await.unwrap();
    assert_eq!(
        (
            bit(&c, turn1.clone(), px).await,
            bit(&c, turn1.clone(), py).await,
            bit(&c, abandon0.clone(), px).await
        ),
        (1, 1, 0),
        "the turn ring alone"
    );
    for _ in 0..5 {
        advance(&clock, 2_000);
        for _ in 0..3 {
            store.sync(&policy, line.clone().into()).await.unwrap();
            advance(&clock, 300);
        }
    }
    // Every waiter's bits are in the current epoch of each ring (the probe's cleared one
    // excepted: nothing wrote it again in that abandon epoch).
    let now = START_MS + 12_000 + 5 * 900;
    let current = |ring: &str, width: u64, len: u64| {
        let i = (now / width) % len;
        key(&keys, &format!("{ring}{i}")).to_owned()
    };
    for (ring, k) in [
        ("turn", current("turn", 2_000, 6)),
        ("abandon", current("abandon", 900_000, 4)),
    ] {
        for s in line.iter().filter(|&&s| ring == "turn" || s != probe) {
            let (x, y) = bloom_offsets(s, m);
            let bx: u8 = c.getbit(&k, x as usize).await.unwrap();
            let by: u8 = c.getbit(&k, y as usize).await.unwrap();
            assert_eq!(
                (bx, by),
                (1, 1),
                "{ring} ring ({k}): a waiter's bits missing"
            );
        }
    }
    assert!(store.release(&policy, holder).await.unwrap());
    assert!(
        matches!(
            store.poll(&policy, line[0]).await.unwrap(),
            Decision::Admitted { .. }
        ),
        "the first waiter seen by sync, at their turn"
    );
    assert_eq!(
        store.poll(&policy, silent).await.unwrap(),
        Decision::Unknown,
        "the silent one, skipped"
    );
}

/// A gateway's copy of the bits it set names an epoch; the script skips the write only while
/// the ring's key still holds that epoch. Another gateway with another `queue_ttl` (a rolling
/// change: turn epochs of 1 s here against 2 s) takes the same key for its own epoch, deleting
/// it: the first gateway's next sync writes its waiters' bits again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ring_key_taken_by_other_epochs_is_written_again() {
    let server = Server::start(&[]);
    // Turn epoch 900 000 000 of 2 s and 1 800 000 000 of 1 s: both in key turn0.
    let clock = ManualClock::new(START_MS);
    let store_a = store(&server, &clock);
    let store_b = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy_a = policy_8s("taken");
    let policy_b = RoomPolicy::new("taken", 1)
        .with_ttls(
            Duration::from_secs(3_600),
            Duration::from_secs(60),
            Duration::from_secs(4),
        )
        .with_max_queue_len(1_000);
    let m = redis_bloom_bits(policy_a.max_queue_len);
    admitted(&store_a, &policy_a).await;
    let mut line = Vec::new();
    for _ in 0..20 {
        line.push(waiter(&store_a, &policy_a).await.0);
    }
    store_a.sync(&policy_a, line.clone().into()).await.unwrap();
    store_a.sync(&policy_a, line.clone().into()).await.unwrap();
    // B's waiter's poll checks in into B's epoch, in the same key: deleted and made anew.
    let (b_waiter, _) = waiter(&store_b, &policy_b).await;
    store_b.poll(&policy_b, b_waiter).await.unwrap();
    let keys = redis_keys(&store_a, "taken");
    let turn0 = key(&keys, "turn0").to_owned();
    let has_bits = |c: &mut redis::aio::MultiplexedConnection, s: SessionId| {
        let (mut c, k) = (c.clone(), turn0.clone());
        async move {
            let (x, y) = bloom_offsets(&s, m);
            let bx: u8 = c.getbit(&k, x as usize).await.unwrap();
            let by: u8 = c.getbit(&k, y as usize).await.unwrap();
            (bx, by) == (1, 1)
        }
    };
    assert!(has_bits(&mut c, b_waiter).await, "B's check-in is in turn0");
    let mut kept = 0;
    for s in &line {
        kept += usize::from(has_bits(&mut c, *s).await);
    }
    assert!(kept < line.len(), "B made turn0 anew: A's bits are gone");
    // A's next sync, in the same epoch of its own: everyone's bits again.
    store_a.sync(&policy_a, line.clone().into()).await.unwrap();
    for s in &line {
        assert!(
            has_bits(&mut c, *s).await,
            "a waiter of A without bits in turn0"
        );
    }
}

/// A sync with a turn horizon writes no turn-ring bits for the waiters behind it, only their
/// abandon-ring bits, and lowers the turn epoch's first number to the horizon (so everyone
/// behind it counts as joined since: `script/liveness.lua`), never raising it again in that
/// epoch; the epoch's first number as made is kept apart. The waiters ahead of it get both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_writes_no_turn_bits_behind_its_horizon() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("horizon");
    let m = redis_bloom_bits(policy.max_queue_len);
    admitted(&store, &policy).await;
    let mut line = Vec::new();
    for _ in 0..20 {
        line.push(waiter(&store, &policy).await);
    }
    let keys = redis_keys(&store, &policy.room);
    let settings = key(&keys, "settings").to_owned();
    // A turn epoch of its own (2 s on): the joins' epoch is not the one the sync writes.
    advance(&clock, 2_000);
    let i = (START_MS + 2_000) / 2_000 % 6;
    let (turn, abandon) = (
        key(&keys, &format!("turn{i}")).to_owned(),
        key(&keys, "abandon0").to_owned(),
    );
    let horizon = line[9].1;
    let seen = |h: u64| {
        SeenWaiters::with_horizon(Some(h as f64), line.iter().map(|&(s, q)| (s, q as f64)))
    };
    let first = seen(horizon);
    assert_eq!((first.near().len(), first.beyond().len()), (10, 10));
    store.sync(&policy, first).await.unwrap();
    let both_bits = |c: &redis::aio::MultiplexedConnection, k: String, s: SessionId| {
        let mut c = c.clone();
        async move {
            let (x, y) = bloom_offsets(&s, m);
            let bx: u8 = c.getbit(&k, x as usize).await.unwrap();
            let by: u8 = c.getbit(&k, y as usize).await.unwrap();
            bx == 1 && by == 1
        }
    };
    for (n, &(s, _)) in line.iter().enumerate() {
        assert!(
            both_bits(&c, abandon.clone(), s).await,
            "waiter {n}: the abandon ring's bits"
        );
        assert_eq!(
            both_bits(&c, turn.clone(), s).await,
            n < 10,
            "waiter {n}: turn bits only ahead of the horizon"
        );
    }
    let fields = |c: &redis::aio::MultiplexedConnection| {
        let mut c = c.clone();
        let settings = settings.clone();
        async move {
            let v: (u64, u64) = redis::cmd("HMGET")
                .arg(&settings)
                .arg(format!("turn{i}from"))
                .arg(format!("turn{i}first"))
                .query_async(&mut c)
                .await
                .unwrap();
            v
        }
    };
    let tail = line.last().unwrap().1;
    assert_eq!(
        fields(&c).await,
        (horizon, tail),
        "first number lowered to the horizon; as made, kept apart"
    );
    // A later sync in the same epoch with a horizon further back does not raise it.
    store.sync(&policy, seen(horizon + 5)).await.unwrap();
    assert_eq!(
        fields(&c).await,
        (horizon, tail),
        "the lowest horizon holds"
    );
    store.sync(&policy, seen(horizon - 3)).await.unwrap();
    assert_eq!(fields(&c).await.0, horizon - 3, "a lower one lowers it");
    // The turn ring's next epoch: a new first number, lowered by the next horizon.
    advance(&clock, 2_000);
    store.sync(&policy, seen(horizon)).await.unwrap();
    let j = (i + 1) % 6;
    let from: u64 = c.hget(&settings, format!("turn{j}from")).await.unwrap();
    assert_eq!(from, horizon);
    let next_turn = key(&keys, &format!("turn{j}")).to_owned();
    assert!(both_bits(&c, next_turn.clone(), line[0].0).await);
    assert!(!both_bits(&c, next_turn, line[19].0).await);
}

/// Early check-ins (src/store/redis/early.rs): in the last half of an abandon epoch a
/// gateway's syncs write its waiters into the ring's next epoch, each at a moment of its own
/// (so the writes are spread over the window, not all in one sync), none before the window.
/// When the epoch begins their bits are set already and the gateway's sync writes nothing
/// again; a waiter it did not see in the window is written then, as before; nobody is swept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_writes_the_next_abandon_epoch_early_at_moments_of_its_own() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let c = conn(&server).await;
    let policy = policy_8s("early");
    let m = redis_bloom_bits(policy.max_queue_len);
    admitted(&store, &policy).await;
    let mut line = Vec::new();
    for _ in 0..40 {
        line.push(waiter(&store, &policy).await.0);
    }
    let (unseen, _) = waiter(&store, &policy).await;
    let keys = redis_keys(&store, &policy.room);
    let settings = key(&keys, "settings").to_owned();
    // Epoch 2 000 000 of the abandon ring is key abandon0; the next, abandon1.
    let next = key(&keys, "abandon1").to_owned();
    let both_bits = |s: SessionId| {
        let mut c = c.clone();
        let next = next.clone();
        async move {
            let (x, y) = bloom_offsets(&s, m);
            let bx: u8 = c.getbit(&next, x as usize).await.unwrap();
            let by: u8 = c.getbit(&next, y as usize).await.unwrap();
            bx == 1 && by == 1
        }
    };
    let written = || async {
        let mut n = 0;
        for &s in &line {
            n += usize::from(both_bits(s).await);
        }
        n
    };
    store.sync(&policy, line.clone().into()).await.unwrap();
    // Just before the window: nothing written into the next epoch, its key not made.
    let window = ABANDON_MS / 2;
    advance(&clock, window - 1_000);
    store.sync(&policy, line.clone().into()).await.unwrap();
    let mut conn = c.clone();
    let made: bool = conn.exists(&next).await.unwrap();
    assert!(!made, "the next epoch's key made before the window");
    // Through the window, a sync every 10 s: the waiters are written a few at a time.
    advance(&clock, 1_000);
    let mut counts = Vec::new();
    for _ in 0..44 {
        store.sync(&policy, line.clone().into()).await.unwrap();
        counts.push(written().await);
        advance(&clock, 10_000);
    }
    assert!(
        counts[0] < line.len() / 4,
        "{} of {} written in the window's first sync",
        counts[0],
        line.len()
    );
    // Four fifths of the window (360 s) in: everyone, from about 36 syncs in.
    assert_eq!(counts[37], line.len(), "not all written early: {counts:?}");
    let mut steps = counts.clone();
    steps.dedup();
    assert!(
        steps.len() >= 10,
        "the writes came in few syncs, not spread: {counts:?}"
    );
    assert!(!both_bits(unseen).await, "a waiter not seen, written");
    let held: i64 = conn.hget(&settings, "abandon1").await.unwrap();
    assert_eq!(held, 2_000_001, "the next epoch's key names its epoch");
    // Whether the sync at the turn writes a waiter again is seen by clearing one of its bits:
    // one whose own epoch of look-ups (found.rs) does not turn by then (looked up, a waiter's
    // bits are written with it).
    let turns = |s: &SessionId, from: u64, to: u64| {
        let b = s.as_bytes();
        let phase = u64::from(u32::from_be_bytes([b[12], b[13], b[14], b[15]])) % ABANDON_MS;
        (from + phase) / ABANDON_MS != (to + phase) / ABANDON_MS
    };
    // And one whose cleared bit no other session's write could set again.
    let shares_bit = |p: &SessionId| {
        let (px, _) = bloom_offsets(p, m);
        line.iter().chain([&unseen]).any(|s| {
            let (x, y) = bloom_offsets(s, m);
            s != p && (x == px || y == px)
        })
    };
    let probe = *line
        .iter()
        .find(|s| !turns(s, START_MS + 880_000, START_MS + ABANDON_MS + 100) && !shares_bit(s))
        .expect("a waiter not looked up again");
    let (px, _) = bloom_offsets(&probe, m);
    let _: u8 = conn.setbit(&next, px as usize, false).await.unwrap();
    // The epoch begins: nothing written again, but for the waiter not seen in the window.
    // (The clock is at 890 s into the epoch: the last sync was at 880 s.)
    advance(&clock, ABANDON_MS - 890_000 + 100);
    let mut seen = line.clone();
    seen.push(unseen);
    store.sync(&policy, seen.clone().into()).await.unwrap();
    let bit: u8 = conn.getbit(&next, px as usize).await.unwrap();
    assert_eq!(bit, 0, "a waiter written early, written again at the turn");
    assert!(
        both_bits(unseen).await,
        "the waiter not seen early, not written"
    );
    // Nobody swept or lost their place by it.
    let stats = store.stats(&policy).await.unwrap();
    assert_eq!(stats.waiting, 41);
}

/// The script writes early check-ins only within the window, by its own clock: a sync by hand
/// that sends some at a moment outside it has nothing written and its reply names no epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_check_ins_outside_the_window_are_not_written() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("outside");
    admitted(&store, &policy).await;
    let keys = redis_keys(&store, &policy.room);
    let [line, numbers] = room_script_numbers(&policy);
    let sync_at = |now: u64| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(format!("{ROOM_LIBRARY_NAME}_sync")).arg(keys.len());
        for k in &keys {
            cmd.arg(k);
        }
        cmd.arg(format!("m{now}")).arg(&line).arg(&numbers).arg("0");
        for i in 0..11 {
            // The early check-ins (ARGV 15): one session's two offsets.
            cmd.arg(if i == 10 { "5 6 " } else { "" });
        }
        cmd
    };
    let next = key(&keys, "abandon1").to_owned();
    for (now, inside) in [
        (START_MS + ABANDON_MS / 4, false),
        (START_MS + ABANDON_MS / 2 - 1, false),
        (START_MS + ABANDON_MS / 2 + 1, true),
    ] {
        let reply: Vec<redis::Value> = sync_at(now).query_async(&mut c).await.unwrap();
        let named = match reply.last() {
            Some(redis::Value::BulkString(b)) => String::from_utf8(b.clone()).unwrap(),
            other => panic!("no early epoch in the reply: {other:?}"),
        };
        let bit: u8 = c.getbit(&next, 5).await.unwrap();
        assert_eq!((bit == 1, !named.is_empty()), (inside, inside), "at {now}");
        if inside {
            assert!(named.starts_with("2000001:900000:"), "{named}");
        }
    }
}

/// The settings key lost while the abandon ring's next epoch holds early check-ins: its key is
/// taken as that epoch, lost (everyone alive in it), and kept with its bits, never deleted and
/// made again empty while the gateways count on what they wrote there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_settings_key_keeps_the_early_epochs_bits() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("earlylost");
    let m = redis_bloom_bits(policy.max_queue_len);
    admitted(&store, &policy).await;
    let mut line = Vec::new();
    for _ in 0..10 {
        line.push(waiter(&store, &policy).await.0);
    }
    let keys = redis_keys(&store, &policy.room);
    let (settings, next) = (
        key(&keys, "settings").to_owned(),
        key(&keys, "abandon1").to_owned(),
    );
    store.sync(&policy, line.clone().into()).await.unwrap();
    // Late in the window everyone is due: written into epoch 2 000 001 early (by the second
    // sync: the first looks up again those whose own epoch of look-ups turned, found.rs).
    advance(&clock, 850_000);
    store.sync(&policy, line.clone().into()).await.unwrap();
    advance(&clock, 1_000);
    store.sync(&policy, line.clone().into()).await.unwrap();
    let all_set = |c: &redis::aio::MultiplexedConnection| {
        let mut c = c.clone();
        let (line, next) = (line.clone(), next.clone());
        async move {
            for s in &line {
                let (x, y) = bloom_offsets(s, m);
                let bx: u8 = c.getbit(&next, x as usize).await.unwrap();
                let by: u8 = c.getbit(&next, y as usize).await.unwrap();
                if (bx, by) != (1, 1) {
                    return false;
                }
            }
            true
        }
    };
    assert!(all_set(&c).await, "not written early");
    let _: () = c.del(&settings).await.unwrap();
    // A newcomer, looked up by one sync and written early by the next: the next epoch's key is
    // written into again after the loss. Three syncs, 5 s apart: a session's own epoch of
    // look-ups (found.rs: phased by its id's last bytes) may turn between the first two, a
    // chance of 5 s in 900, and the second then looks the newcomer up again; it turns at most
    // once in 10 s.
    let (late, _) = waiter(&store, &policy).await;
    let mut seen = line.clone();
    seen.push(late);
    for _ in 0..3 {
        advance(&clock, 5_000);
        store.sync(&policy, seen.clone().into()).await.unwrap();
    }
    let (lx, _) = bloom_offsets(&late, m);
    let late_bit: u8 = c.getbit(&next, lx as usize).await.unwrap();
    assert_eq!(late_bit, 1, "the newcomer not written early");
    assert!(all_set(&c).await, "the early epoch's bits deleted");
    let held: i64 = c.hget(&settings, "abandon1").await.unwrap();
    assert_eq!(
        held, -2_000_001,
        "the early epoch's key, taken as that epoch, lost"
    );
    assert_eq!(store.stats(&policy).await.unwrap().waiting, 11);
}
