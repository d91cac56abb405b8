//! A gateway looks each waiter up once in the waiter's own abandon epoch (`found.rs`), and most
//! of those look-ups come while the ring's epoch has not turned: the waiter's bits are set in it
//! already. Behind the turn horizon such a waiter is looked up only, its bits not written again;
//! one that left the line is still answered back, and one found ahead of the horizon still gets
//! its turn check-in. Against a real `redis-server`, with a manual clock.

use crate::redis_harness;
use crate::redis_store_v2::{
    admitted, advance, bloom_offsets, conn, key, policy_8s, store, waiter, START_MS,
};

use redis::AsyncCommands;
use redis_harness::Server;
use tower_waiting_room::__private::{redis_bloom_bits, redis_keys};
use tower_waiting_room::store::{SeenWaiters, SnapshotStore, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::SessionId;

/// The abandon ring's epoch (15 minutes: `abandon_after`'s default of 30, in two): `START_MS` is
/// the first moment of one.
const ABANDON_MS: u64 = 900_000;

/// Whether a session's own abandon epoch (found.rs: the ring's width, shifted by a phase from
/// its id's bytes 12..16) turns between `START_MS` and `START_MS + ABANDON_MS / 2`: then a
/// gateway looks it up again in the second half of the ring's epoch.
fn looked_up_again(s: &SessionId) -> bool {
    let b = s.as_bytes();
    let phase = u64::from(u32::from_be_bytes([b[12], b[13], b[14], b[15]])) % ABANDON_MS;
    (START_MS + phase) / ABANDON_MS != (START_MS + ABANDON_MS / 2 + phase) / ABANDON_MS
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_looked_up_again_in_the_same_epoch_is_not_written_again() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    // Bitmaps of about 1.6 million bits: no two of these waiters share one.
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
    for (i, &(s, _)) in line.iter().enumerate() {
        let (x, y) = bloom_offsets(&s, m);
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
