//! Rooms kept by older versions of the Redis store's data (2, 3, 4), upgraded in place by this
//! version's first call without anyone losing their place, and liveness bitmaps made at another
//! size, which count everyone alive; against a real `redis-server` with a manual clock.

use crate::redis_harness;
use crate::redis_store_v2::{
    admitted, advance, bloom_offsets, conn, key, policy_8s, store, version_5_room, waiter, START_MS,
};

use redis::AsyncCommands;
use redis_harness::Server;
use tower_waiting_room::__private::{redis_bloom_bits, redis_keys};
use tower_waiting_room::store::{Decision, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::SessionId;

/// A room kept by version 2 of the crate (its settings say `v` 2, and its epochs have no first
/// sequence numbers) is upgraded in place by this version's first call: nobody loses their place,
/// the settings say version 5 from then on (the last whose members are whole ids, as version 2's
/// are; so version 2's library refuses the room rather than read bit-less joins as silence),
/// and a newcomer joining before the epochs are made again is checked in with bits (their join
/// cannot be told by its number yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_of_version_2_is_upgraded_in_place() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("upgrade");
    let m = redis_bloom_bits(1_000);
    let keys = redis_keys(&store, "upgrade");
    // Rooms of these versions keep whole ids, as version 5 does.
    version_5_room(&mut c, &keys).await;
    let settings = key(&keys, "settings").to_owned();
    let holder = admitted(&store, &policy).await;
    let (a, _) = waiter(&store, &policy).await;
    // As version 2 left it: v 2, no first numbers, no fast path window.
    let fields: Vec<String> = c.hkeys(&settings).await.unwrap();
    let gone: Vec<&String> = fields.iter().filter(|f| f.ends_with("from")).collect();
    assert!(
        !gone.is_empty(),
        "version 4 keeps first numbers: {fields:?}"
    );
    let _: () = c.hdel(&settings, &gone).await.unwrap();
    let _: () = c.hset(&settings, "v", 2).await.unwrap();
    let _: () = c.del(key(&keys, "fast")).await.unwrap();

    let (b, _) = waiter(&store, &policy).await;
    let v: u32 = c.hget(&settings, "v").await.unwrap();
    assert_eq!(v, 5);
    assert!(matches!(
        store.poll(&policy, a).await.unwrap(),
        Decision::Waiting { position: 1, .. }
    ));
    let (x, y) = bloom_offsets(&b, m);
    let mut holding = 0;
    for k in keys
        .iter()
        .filter(|k| k.contains(":turn") || k.contains(":abandon"))
    {
        let gx: u8 = c.getbit(k, x as usize).await.unwrap();
        let gy: u8 = c.getbit(k, y as usize).await.unwrap();
        holding += usize::from(gx == 1 && gy == 1);
    }
    assert_eq!(
        holding, 2,
        "B's join, in an epoch of version 2, is told by its bits"
    );
    // A's and B's turns come, in order.
    advance(&clock, 3_000);
    assert!(store.release(&policy, holder).await.unwrap());
    assert!(matches!(
        store.poll(&policy, a).await.unwrap(),
        Decision::Admitted { .. }
    ));
    assert!(matches!(
        store.poll(&policy, b).await.unwrap(),
        Decision::Waiting { position: 1, .. }
    ));
}

/// A room kept by version 3 (its settings say `v` 3 and hold that version's fast path window,
/// here an open one) is upgraded in place by this version's first call: the settings say version
/// 5 (whole ids kept) and no longer hold the old window's fields (version 3's library, which
/// reads and keeps its window there, then refuses the room), nobody loses their place, and the
/// window is this version's own key from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_of_version_3_is_upgraded_in_place() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("upgrade3");
    let keys = redis_keys(&store, "upgrade3");
    // Rooms of these versions keep whole ids, as version 5 does.
    version_5_room(&mut c, &keys).await;
    let settings = key(&keys, "settings").to_owned();
    let window = key(&keys, "fast").to_owned();
    admitted(&store, &policy).await;
    let (a, a_seq) = waiter(&store, &policy).await;
    // As version 3 left it: v 3, its window in the settings (open for an hour), no window key.
    let _: () = c.del(&window).await.unwrap();
    let far = START_MS + 3_600_000;
    let old_window = [
        ("v", "3".to_owned()),
        ("fast_from", START_MS.to_string()),
        ("fast_until", far.to_string()),
        ("fast_for", "8000:1800000:".to_owned()),
        ("fast_seq", "0".to_owned()),
    ];
    let _: () = c.hset_multiple(&settings, &old_window).await.unwrap();

    let (b, b_seq) = waiter(&store, &policy).await;
    assert_eq!(b_seq, a_seq + 1);
    let v: u32 = c.hget(&settings, "v").await.unwrap();
    assert_eq!(v, 5);
    let fields: Vec<String> = c.hkeys(&settings).await.unwrap();
    assert!(
        !fields.iter().any(|f| f.starts_with("fast_")),
        "version 3's window fields are gone: {fields:?}"
    );
    let held: Option<Vec<u8>> = c.get(&window).await.unwrap();
    assert!(held.is_some(), "the window is the key's now");
    for (s, position) in [(a, 1), (b, 2)] {
        assert!(matches!(
            store.poll(&policy, s).await.unwrap(),
            Decision::Waiting { position: p, .. } if p == position
        ));
    }
}

/// A room kept by version 4 (its bitmaps of the older size, a power of two, whose bits sit at
/// other offsets) is upgraded in place by this version's first call: the settings say 5 (whole
/// ids kept), and every epoch the rings' fields name is marked lost (negative), so a waiter
/// whose check-ins are only in the older bitmaps is not skipped at their turn; read with this
/// version's offsets those bitmaps would say the waiter was silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_of_version_4_is_upgraded_in_place() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("upgrade4");
    let keys = redis_keys(&store, "upgrade4");
    // Rooms of these versions keep whole ids, as version 5 does.
    version_5_room(&mut c, &keys).await;
    let settings = key(&keys, "settings").to_owned();
    let holder = admitted(&store, &policy).await;
    let (a, _) = waiter(&store, &policy).await;
    // A polls 9 s after joining (the join's turn epoch no longer counts 12 s after it).
    advance(&clock, 9_000);
    assert!(matches!(
        store.poll(&policy, a).await.unwrap(),
        Decision::Waiting { position: 1, .. }
    ));
    // As version 4 would have left it: every bitmap 2^16 bits (the power of two for a line of
    // 1 000) with A's bits at offsets mod 2^16, the sentinel at 2^16; v 4; no window.
    assert_ne!(redis_bloom_bits(1_000), OLDER_BITS);
    made_again_at_older_size(&mut c, &keys, a).await;
    let _: () = c.hset(&settings, "v", 4).await.unwrap();
    let _: () = c.del(key(&keys, "fast")).await.unwrap();
    let held_before: Vec<(String, i64)> = ring_fields(&mut c, &settings).await;
    assert!(held_before.iter().all(|(_, e)| *e > 0), "{held_before:?}");

    // A's turn comes 12 s after their join, 3 s after their poll (within queue_ttl: never
    // skipped). Only the older bitmaps hold that poll.
    advance(&clock, 3_000);
    assert!(store.release(&policy, holder).await.unwrap());
    let v: u32 = c.hget(&settings, "v").await.unwrap();
    assert_eq!(v, 5);
    let held_after: Vec<(String, i64)> = ring_fields(&mut c, &settings).await;
    for (field, e) in &held_before {
        assert!(
            held_after.contains(&(field.clone(), -e)),
            "{field}'s epoch {e} marked lost: {held_after:?}"
        );
    }
    assert!(matches!(
        store.poll(&policy, a).await.unwrap(),
        Decision::Admitted { .. }
    ));
}

/// Bitmaps of another size (as version 4 left them) whose epochs no field names as lost, since
/// the settings key is lost too (eviction, a stray `DEL`): a liveness read counts everyone in
/// them as alive (they hold their bits at other offsets), so a waiter whose check-ins are only
/// in them is not skipped at their turn, as the lost settings key alone would not have them
/// skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitmaps_of_another_size_count_everyone_alive() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("other-size");
    let keys = redis_keys(&store, "other-size");
    let holder = admitted(&store, &policy).await;
    let (a, _) = waiter(&store, &policy).await;
    advance(&clock, 9_000);
    assert!(matches!(
        store.poll(&policy, a).await.unwrap(),
        Decision::Waiting { position: 1, .. }
    ));
    // Every bitmap made again at 2^16 bits (the older size for a line of 1 000) with A's bits
    // at offsets mod 2^16, the sentinel at 2^16; then the settings key lost.
    made_again_at_older_size(&mut c, &keys, a).await;
    let _: () = c.del(key(&keys, "settings")).await.unwrap();
    let _: () = c.del(key(&keys, "fast")).await.unwrap();

    // A's turn, 3 s after their poll.
    advance(&clock, 3_000);
    assert!(store.release(&policy, holder).await.unwrap());
    assert!(matches!(
        store.poll(&policy, a).await.unwrap(),
        Decision::Admitted { .. }
    ));
}

/// The liveness bitmaps' size before version 5 for a line of 1 000: the power of two itself.
const OLDER_BITS: u64 = 1 << 16;

/// Every liveness bitmap of `keys` that exists made again as version 4 made it for a line of
/// 1 000: [`OLDER_BITS`] bits, `session`'s two bits at offsets mod that size, the sentinel at
/// it, and the key's lifetime kept.
async fn made_again_at_older_size(
    c: &mut redis::aio::MultiplexedConnection,
    keys: &[String],
    session: SessionId,
) {
    let (x, y) = bloom_offsets(&session, OLDER_BITS);
    let mut rewritten = 0;
    for k in keys
        .iter()
        .filter(|k| k.contains(":turn") || k.contains(":abandon"))
    {
        let len: u64 = c.strlen(k).await.unwrap();
        if len == 0 {
            continue;
        }
        let ttl: i64 = c.pttl(k).await.unwrap();
        let _: () = c.del(k).await.unwrap();
        for bit in [x, y, OLDER_BITS] {
            let _: u8 = c.setbit(k, bit as usize, true).await.unwrap();
        }
        let _: () = c.pexpire(k, ttl).await.unwrap();
        rewritten += 1;
    }
    assert!(rewritten >= 2, "the current epochs' bitmaps: {rewritten}");
}

/// The rings' epoch fields of a settings key (`turn0` .. `abandon3`) that are set.
async fn ring_fields(
    c: &mut redis::aio::MultiplexedConnection,
    settings: &str,
) -> Vec<(String, i64)> {
    let all: Vec<(String, String)> = c.hgetall(settings).await.unwrap();
    all.into_iter()
        .filter(|(f, _)| {
            (f.starts_with("turn") || f.starts_with("abandon"))
                && f.ends_with(|ch: char| ch.is_ascii_digit())
        })
        .map(|(f, v)| {
            let e = v.parse().unwrap();
            (f, e)
        })
        .collect()
}
