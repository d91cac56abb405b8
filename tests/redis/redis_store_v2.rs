//! The Redis store's v2 layout, against a real `redis-server`: members are the
//! session ids' raw bytes (their first 14 since version 6), there is no `seen` zset, liveness lives in Bloom bitmaps that a
//! gateway's `sync` sets, housekeeping runs exactly when due, and a snapshot's checkpoints are
//! the exact ranks.

use crate::redis_harness;

use std::time::Duration;

use redis::AsyncCommands;
use redis_harness::Server;
use tower_waiting_room::__private::{redis_bloom_bits, redis_keys, redis_member};
use tower_waiting_room::store::snapshot::checkpoint_ranks;
use tower_waiting_room::store::{
    Decision, Place, RedisStore, SeenWaiters, SettingsChange, SnapshotStore, Store,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{RoomPolicy, SessionId};

pub(crate) const START_MS: u64 = 1_800_000_000_000;

pub(crate) fn store(server: &Server, clock: &ManualClock) -> RedisStore {
    RedisStore::builder()
        .url(server.url())
        .timeout(Duration::from_secs(5))
        .manual_clock(clock.clone())
        .build()
        .expect("store builds")
}

/// A room of capacity 1 with hour-long slots, a minute to claim, `queue_ttl` 8 s (turn epochs
/// of 2 s, six keys) and a line of at most 1 000.
pub(crate) fn policy_8s(room: &str) -> RoomPolicy {
    RoomPolicy::new(room, 1)
        .with_ttls(
            Duration::from_secs(3_600),
            Duration::from_secs(60),
            Duration::from_secs(8),
        )
        .with_max_queue_len(1_000)
}

/// `room` with one slot held for an hour, a minute to claim it, two to wait unseen, and a line
/// of at most 1 000.
pub(crate) fn one_slot(room: &str) -> RoomPolicy {
    RoomPolicy::new(room, 1)
        .with_ttls(
            Duration::from_secs(3_600),
            Duration::from_secs(60),
            Duration::from_secs(120),
        )
        .with_max_queue_len(1_000)
}

/// Waits for the first 100 ms of a second of the system clock (the server's, on this machine).
/// The fast path's window, when a call opens it by the server's clock, ends with that second:
/// a test that reads or uses the window after opening it starts early in one, and has most of
/// a second however loaded the machine is.
pub(crate) async fn early_in_a_second() {
    loop {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("a clock after 1970")
            .subsec_millis();
        if ms < 100 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(u64::from(1_000 - ms) + 5)).await;
    }
}

pub(crate) async fn conn(server: &Server) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

pub(crate) fn advance(clock: &ManualClock, ms: u64) {
    clock.advance(Duration::from_millis(ms));
}

pub(crate) async fn admitted(store: &RedisStore, policy: &RoomPolicy) -> SessionId {
    let s = SessionId::random();
    let d = store.enter(policy, s).await.unwrap();
    assert!(matches!(d, Decision::Admitted { .. }), "{d:?}");
    s
}

pub(crate) async fn waiter(store: &RedisStore, policy: &RoomPolicy) -> (SessionId, u64) {
    let s = SessionId::random();
    match store.enter(policy, s).await.unwrap() {
        Decision::Waiting {
            place: Some(Place::Seq(seq)),
            ..
        } => (s, seq),
        other => panic!("not waiting with a sequence number: {other:?}"),
    }
}

/// A session's two liveness bits in bitmaps of `m` bits (the big-endian u32 of its id's bytes
/// 0..4 and 4..8, mod `m`), as the gateway computes them.
pub(crate) fn bloom_offsets(s: &SessionId, m: u64) -> (u64, u64) {
    let b = s.as_bytes();
    (
        u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])) % m,
        u64::from(u32::from_be_bytes([b[4], b[5], b[6], b[7]])) % m,
    )
}

/// Makes the room of `keys` one of settings version 5, before its first call: as an earlier
/// library made it, keeping each session as its whole 16-byte id (this version reads such a
/// room as it is, and keeps it so).
pub(crate) async fn version_5_room(c: &mut redis::aio::MultiplexedConnection, keys: &[String]) {
    let _: () = c.hset(key(keys, "settings"), "v", 5).await.unwrap();
}

/// A session's member in a room of this version: its id's first 14 bytes.
pub(crate) fn member(s: &SessionId) -> Vec<u8> {
    redis_member(s).to_vec()
}

pub(crate) fn key<'a>(keys: &'a [String], name: &str) -> &'a str {
    keys.iter()
        .find(|k| k.ends_with(&format!(":{name}")))
        .unwrap_or_else(|| panic!("no key {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_raw_bytes_and_there_is_no_seen_key() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let policy = RoomPolicy::new("bytes", 1);
    let holder = admitted(&store, &policy).await;
    let (w, seq) = waiter(&store, &policy).await;
    let mut c = conn(&server).await;
    let keys = redis_keys(&store, &policy.room);
    let line: Vec<(Vec<u8>, f64)> = c
        .zrange_withscores(key(&keys, "line"), 0, -1)
        .await
        .unwrap();
    assert_eq!(line, vec![(member(&w), seq as f64)]);
    let active: Vec<Vec<u8>> = c.zrange(key(&keys, "active"), 0, -1).await.unwrap();
    assert_eq!(active, vec![member(&holder)]);
    let all: Vec<String> = c.keys("*").await.unwrap();
    assert!(!all.iter().any(|k| k.ends_with(":seen")), "{all:?}");
    assert!(
        all.iter().any(|k| k.contains(":turn")) && all.iter().any(|k| k.contains(":abandon")),
        "the join set liveness bits in both rings: {all:?}"
    );
    // A poll of the waiter says the same place.
    match store.poll(&policy, w).await.unwrap() {
        Decision::Waiting {
            position: 1,
            waiting: 1,
            place,
            ..
        } => assert_eq!(place, Some(Place::Seq(seq))),
        other => panic!("{other:?}"),
    }
}

/// queue_ttl 8 s: epochs of 2 s, silent for more than 10 s is skipped at the turn. A and C are
/// only ever seen through a gateway's sync (their polls answered from its snapshot); B is silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_keeps_seen_waiters_alive_and_a_silent_one_is_skipped() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let policy = RoomPolicy::new("liveness", 1).with_ttls(
        Duration::from_secs(3_600),
        Duration::from_secs(60),
        Duration::from_secs(8),
    );
    let holder = admitted(&store, &policy).await;
    let (a, _) = waiter(&store, &policy).await;
    let (b, _) = waiter(&store, &policy).await;
    let (c, _) = waiter(&store, &policy).await;
    let stranger = SessionId::random();
    for _ in 0..6 {
        advance(&clock, 2_000);
        let snap = store
            .sync(&policy, vec![a, c, stranger].into())
            .await
            .unwrap();
        assert_eq!(snap.waiting, 3, "nobody swept, nobody created: {snap:?}");
    }
    // 12 s on: B was last seen at the join.
    let snap = store.sync(&policy, vec![a, c].into()).await.unwrap();
    assert_eq!(snap.pace.silent, 1, "B alone is silent: {snap:?}");
    assert_eq!(
        store.poll(&policy, stranger).await.unwrap(),
        Decision::Unknown
    );
    assert!(store.release(&policy, holder).await.unwrap());
    assert!(
        matches!(
            store.poll(&policy, a).await.unwrap(),
            Decision::Admitted { .. }
        ),
        "A, seen by sync, at their turn"
    );
    assert!(store.release(&policy, a).await.unwrap());
    assert_eq!(
        store.poll(&policy, b).await.unwrap(),
        Decision::Unknown,
        "B, silent, skipped"
    );
    assert!(
        matches!(
            store.poll(&policy, c).await.unwrap(),
            Decision::Admitted { .. }
        ),
        "C next"
    );
    assert_eq!(store.stats(&policy).await.unwrap().pace.current_skipped, 1);
}

/// A claimed slot frees itself exactly at its expiry: not a millisecond before, at the first
/// call from then (housekeeping only when due).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn housekeeping_frees_a_slot_exactly_when_due() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let policy = RoomPolicy::new("due", 1).with_ttls(
        Duration::from_secs(5),
        Duration::from_secs(30),
        Duration::from_secs(120),
    );
    admitted(&store, &policy).await;
    let (w, _) = waiter(&store, &policy).await;
    let mut c = conn(&server).await;
    let keys = redis_keys(&store, &policy.room);
    let due: u64 = c.hget(key(&keys, "settings"), "due").await.unwrap();
    assert_eq!(due, START_MS + 5_000);
    advance(&clock, 4_999);
    assert!(matches!(
        store.poll(&policy, w).await.unwrap(),
        Decision::Waiting { position: 1, .. }
    ));
    advance(&clock, 1);
    assert!(
        matches!(
            store.poll(&policy, w).await.unwrap(),
            Decision::Admitted { .. }
        ),
        "the slot expired at its time and went to the head"
    );
    // The grant's expiry is now the one due.
    let due: u64 = c.hget(key(&keys, "settings"), "due").await.unwrap();
    assert_eq!(due, START_MS + 5_000 + 30_000);
}

/// A line of 1 000 with every seventh waiter gone: the snapshot's checkpoints are the schedule's
/// ranks, each with the score ZRANGE finds at that exact rank.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_checkpoints_are_the_exact_ranks() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let policy = RoomPolicy::new("ranks", 1);
    admitted(&store, &policy).await;
    let mut line = Vec::new();
    for _ in 0..1_000 {
        line.push(waiter(&store, &policy).await);
    }
    for (i, (s, _)) in line.iter().enumerate() {
        if i % 7 == 3 {
            assert!(store.release(&policy, *s).await.unwrap());
        }
    }
    let snap = store.sync(&policy, Vec::new().into()).await.unwrap();
    let mut c = conn(&server).await;
    let keys = redis_keys(&store, &policy.room);
    let exact: Vec<(Vec<u8>, f64)> = c
        .zrange_withscores(key(&keys, "line"), 0, -1)
        .await
        .unwrap();
    assert_eq!(snap.waiting, exact.len() as u64);
    assert_eq!(snap.waiting, 1_000 - 143);
    assert_eq!(snap.head, Some(exact[0].1));
    let ranks: Vec<u64> = snap.checkpoints.iter().map(|cp| cp.rank).collect();
    assert_eq!(ranks, checkpoint_ranks(snap.waiting).collect::<Vec<_>>());
    for cp in &snap.checkpoints {
        let rank: u64 = c
            .zrank(key(&keys, "line"), &exact[cp.rank as usize].0)
            .await
            .unwrap();
        assert_eq!(rank, cp.rank);
        assert_eq!(cp.score, exact[cp.rank as usize].1, "rank {}", cp.rank);
    }
    // Every waiter's position by the snapshot is within 1 % of the exact one.
    for (rank, (_, score)) in exact.iter().enumerate() {
        let shown = snap.position_of(*score).unwrap();
        let exact = rank as u64 + 1;
        assert!(shown.abs_diff(exact) * 100 <= exact, "{shown} vs {exact}");
    }
}

/// Each bitmap is a Bloom filter of M bits, M 128 under the allocator's size class >= 16 *
/// max_queue_len (jemalloc's four to a power of two), so that the string (M bits, the sentinel
/// bit M, Redis's header and NUL) fits that class: `MEMORY USAGE` of a bitmap is at most the
/// class and the key's own few dozen bytes (at the class itself a 4 MiB bitmap took 5 MiB with
/// jemalloc). A session whose first four bytes are M - 1 sets the last bit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bitmaps_have_m_bits_and_fit_their_size_class() {
    assert_eq!(redis_bloom_bits(2_000_000), (1 << 25) - 128);
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    // Size classes are jemalloc's (Redis's own allocator, and Debian's): there a bitmap takes
    // its class and the key's few dozen bytes. A server built with libc malloc (as some Valkey
    // builds are) rounds a large allocation up to whole pages, its header included.
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut c)
        .await
        .unwrap();
    let allocator = info
        .lines()
        .find_map(|l| l.strip_prefix("mem_allocator:"))
        .unwrap_or("?")
        .trim()
        .to_owned();
    let slack = if allocator.starts_with("jemalloc") {
        256
    } else {
        8_192
    };
    // (room, max_queue_len, the class in bits: the least of P / 2 + j * P / 8 at or above 16
    // bits a waiter, never under 2^16)
    for (room, max_queue_len, class) in [
        ("m-small", 1_000u64, 1u64 << 16),
        ("m-large", 100_000, 7 << 18),
        ("m-2m", 2_000_000, 1 << 25),
        ("m-2500k", 2_500_000, 5 << 23),
    ] {
        let policy = RoomPolicy::new(room, 1).with_max_queue_len(max_queue_len);
        let m = redis_bloom_bits(max_queue_len);
        assert_eq!(m, class - 128, "{room}");
        admitted(&store, &policy).await;
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(&u32::try_from(m - 1).unwrap().to_be_bytes());
        let d = store
            .enter(&policy, SessionId::from_bytes(id))
            .await
            .unwrap();
        assert!(matches!(d, Decision::Waiting { .. }), "{d:?}");
        // The join sets no bits (alive by it): its poll does.
        let d = store
            .poll(&policy, SessionId::from_bytes(id))
            .await
            .unwrap();
        assert!(matches!(d, Decision::Waiting { .. }), "{d:?}");
        let keys = redis_keys(&store, room);
        for ring in ["turn", "abandon"] {
            let mut longest = 0u64;
            let mut written = 0;
            for k in keys.iter().filter(|k| k.contains(&format!(":{ring}"))) {
                let len: u64 = c.strlen(k).await.unwrap();
                longest = longest.max(len);
                if len == 0 {
                    continue;
                }
                written += 1;
                let last: u8 = c.getbit(k, (m - 1) as usize).await.unwrap();
                assert_eq!(last, 1, "{room}: {k} has the session's last bit");
                let usage: u64 = redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(k)
                    .query_async(&mut c)
                    .await
                    .unwrap();
                assert!(
                    usage <= class / 8 + slack,
                    "{room}: {k} takes {usage} bytes, over its {} byte class ({allocator})",
                    class / 8
                );
            }
            assert_eq!(written, 1, "{room}: one epoch of the {ring} ring written");
            // M bits, and the sentinel at bit M (the bitmap's loss is told by it).
            assert_eq!(longest, m / 8 + 1, "{room}: the {ring} ring's bitmap");
        }
    }
}

/// A registrant's score is no integer: sync carries the head's and the checkpoints' scores as
/// strings, so they arrive exact (Redis would truncate a Lua number), and a registrant's place
/// is `Drawn` once the room opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrants_scores_arrive_exact() {
    use std::time::UNIX_EPOCH;
    use tower_waiting_room::config::EventSchedule;
    use tower_waiting_room::store::snapshot::draw_score;
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let schedule = EventSchedule::new(
        UNIX_EPOCH + Duration::from_millis(START_MS + 60_000),
        [7u8; 32],
    );
    let policy = RoomPolicy::new("drawn", 1).with_schedule(Some(schedule.clone()));
    let registrants: Vec<SessionId> = (0..5).map(|_| SessionId::random()).collect();
    for &s in &registrants {
        let d = store.enter(&policy, s).await.unwrap();
        assert!(matches!(d, Decision::Scheduled { .. }), "{d:?}");
    }
    let mut scores: Vec<f64> = registrants
        .iter()
        .map(|&s| draw_score(schedule.draw(s)))
        .collect();
    scores.sort_by(f64::total_cmp);
    let snap = store.sync(&policy, Vec::new().into()).await.unwrap();
    assert!(snap.before_opening);
    assert_eq!(snap.head, Some(scores[0]));
    assert!(scores[0] > -1.0 && scores[0] < 0.0 && scores[0].fract() != 0.0);
    let got: Vec<f64> = snap.checkpoints.iter().map(|c| c.score).collect();
    assert_eq!(got, scores);
    // Opened: the first is admitted, the others wait with a drawn place.
    advance(&clock, 60_000);
    let first = registrants
        .iter()
        .copied()
        .find(|&s| draw_score(schedule.draw(s)) == scores[0])
        .unwrap();
    let d = store.enter(&policy, first).await.unwrap();
    assert!(matches!(d, Decision::Admitted { .. }), "{d:?}");
    let second = registrants
        .iter()
        .copied()
        .find(|&s| draw_score(schedule.draw(s)) == scores[1])
        .unwrap();
    match store.poll(&policy, second).await.unwrap() {
        Decision::Waiting {
            position: 1, place, ..
        } => assert_eq!(place, Some(Place::Drawn)),
        other => panic!("{other:?}"),
    }
}

/// A sync's check-in sets the same two bits as a waiter's poll: the gateway sends each seen
/// session's Bloom offsets with its id (the big-endian u32 of bytes 0..4 and 4..8, mod M), and
/// the script sets exactly those, in the key of the sync's epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_sets_the_bits_the_gateway_computed() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    // queue_ttl 8 s: turn epochs of 2 s, six keys.
    let policy = policy_8s("sync-bits");
    let m = redis_bloom_bits(1_000);
    admitted(&store, &policy).await;
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 1, 0, 3]);
    id[15] = 7;
    let w = SessionId::from_bytes(id);
    let d = store.enter(&policy, w).await.unwrap();
    assert!(matches!(d, Decision::Waiting { .. }), "{d:?}");
    let (x, y) = ((u64::from(u32::MAX) % m), 65_539 % m);
    let keys = redis_keys(&store, "sync-bits");
    let turn: Vec<&String> = keys.iter().filter(|k| k.contains(":turn")).collect();
    let marked = marked_keys(&mut c, &turn, (x, y), m).await;
    assert!(
        marked.is_empty(),
        "a join sets no bits (alive by it): {marked:?}"
    );
    let d = store.poll(&policy, w).await.unwrap();
    assert!(matches!(d, Decision::Waiting { .. }), "{d:?}");
    let marked = marked_keys(&mut c, &turn, (x, y), m).await;
    assert_eq!(marked.len(), 1, "the poll's epoch");
    advance(&clock, 2_000);
    let snap = store.sync(&policy, vec![w].into()).await.unwrap();
    assert!(snap.unknown.is_empty(), "{snap:?}");
    let now_marked = marked_keys(&mut c, &turn, (x, y), m).await;
    assert_eq!(now_marked.len(), 2, "the sync's epoch, in the next key");
}

/// A bitmap lost in the middle of its epoch (evicted: the ring keys are the room's only keys
/// with a TTL) and made again by a later check-in of that epoch does not forget the check-ins
/// it had: the waiter seen before the loss keeps their turn, and the bitmap made again still
/// expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bitmap_lost_mid_epoch_forgets_nobody() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let policy = RoomPolicy::new("lost-bits", 1).with_ttls(
        Duration::from_secs(300),
        Duration::from_secs(30),
        Duration::from_secs(8),
    );
    let mut c = conn(&server).await;
    let holder = admitted(&store, &policy).await;
    let (w, _) = waiter(&store, &policy).await;
    let keys = redis_keys(&store, &policy.room);
    let turn: Vec<&String> = keys.iter().filter(|k| k.contains(":turn")).collect();
    // Lost: every turn bitmap. Then another waiter joins in the same epoch, writing it again.
    for k in &turn {
        let _: () = c.del(*k).await.unwrap();
    }
    let (x, _) = waiter(&store, &policy).await;
    for k in &turn {
        let len: u64 = c.strlen(*k).await.unwrap();
        if len > 0 {
            let ttl: i64 = c.pttl(*k).await.unwrap();
            assert!(ttl > 0, "{k}: made again without a lifetime");
        }
    }
    // W's turn comes within queue_ttl of being seen: W is granted, not skipped.
    advance(&clock, 3_000);
    assert!(store.release(&policy, holder).await.unwrap());
    match store.enter(&policy, w).await.unwrap() {
        Decision::Admitted { .. } => {}
        other => panic!("the waiter seen before the loss lost their turn: {other:?}"),
    }
    // And X, seen after the loss, still waits behind W.
    assert!(matches!(
        store.poll(&policy, x).await.unwrap(),
        Decision::Waiting { position: 1, .. }
    ));
}

/// The keys of `keys` with bits set, each asserted to hold exactly one session's two bits
/// `(x, y)` and the sentinel (bit `m`); a bitmap holding the sentinel alone (an epoch opened
/// with no check-in yet) is not one of them.
async fn marked_keys(
    c: &mut redis::aio::MultiplexedConnection,
    keys: &[&String],
    (x, y): (u64, u64),
    m: u64,
) -> Vec<String> {
    let mut marked = Vec::new();
    for k in keys {
        let count: u64 = redis::cmd("BITCOUNT").arg(*k).query_async(c).await.unwrap();
        let bx: u8 = c.getbit(*k, x as usize).await.unwrap();
        let by: u8 = c.getbit(*k, y as usize).await.unwrap();
        let sentinel: u8 = c.getbit(*k, m as usize).await.unwrap();
        if count == 1 && sentinel == 1 {
            continue;
        }
        if count > 0 {
            assert_eq!(
                (count, bx, by, sentinel),
                (3, 1, 1, 1),
                "{k}: exactly one session's two bits, and the sentinel"
            );
            marked.push((*k).clone());
        }
    }
    marked
}

/// The settings key lost (evicted, deleted) right after a waiter joined: the liveness bitmaps'
/// epochs are no longer known, and the bitmap of the current epoch holds the waiter's join.
/// The next sync that checks someone in must not delete it (a gateway sends each waiter's
/// check-in once per epoch, so the waiter would be silent to the store until the next): the
/// sweep keeps the waiter, and at their turn they are let in, not skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_settings_key_forgets_no_check_in() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let policy = RoomPolicy::new("lost-settings", 1).with_ttls(
        Duration::from_secs(300),
        Duration::from_secs(30),
        Duration::from_secs(8),
    );
    let mut c = conn(&server).await;
    let holder = admitted(&store, &policy).await;
    let (w, _) = waiter(&store, &policy).await;
    let (other, _) = waiter(&store, &policy).await;
    let keys = redis_keys(&store, &policy.room);
    advance(&clock, 100);
    let _: () = c.del(key(&keys, "settings")).await.unwrap();
    // Another gateway's sync, checking in the other waiter: the first write after the loss.
    let snap = store.sync(&policy, vec![other].into()).await.unwrap();
    assert_eq!(snap.waiting, 2, "nobody swept: {snap:?}");
    let snap = store.sync(&policy, vec![other].into()).await.unwrap();
    assert_eq!(
        snap.waiting, 2,
        "nobody swept by the next sync either: {snap:?}"
    );
    advance(&clock, 3_000);
    assert!(store.release(&policy, holder).await.unwrap());
    match store.poll(&policy, w).await.unwrap() {
        Decision::Admitted { .. } => {}
        other => panic!("the waiter whose join was in the current bitmap was skipped: {other:?}"),
    }
}

/// A newcomer's join is their check-in: it sets no bits, since the epoch's first sequence
/// number says who joined since. A waiter silent since the join is let in at their turn while
/// the join's epoch counts (within queue_ttl), and skipped after it (silent beyond 5/4
/// queue_ttl). And when seq went back (lost) below an epoch's first number, the join cannot be
/// told by its number: its bits are set, and the waiter is still let in at their turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_is_a_check_in_without_bits_until_seq_goes_back() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    // queue_ttl 8 s: turn epochs of 2 s.
    let policy = policy_8s("joined-since");
    let m = redis_bloom_bits(1_000);
    let keys = redis_keys(&store, "joined-since");
    let rings: Vec<&String> = keys
        .iter()
        .filter(|k| k.contains(":turn") || k.contains(":abandon"))
        .collect();
    let bits_of = |s: SessionId| bloom_offsets(&s, m);
    let holder = admitted(&store, &policy).await;
    let (a, _) = waiter(&store, &policy).await;
    let (b, _) = waiter(&store, &policy).await;
    for s in [a, b] {
        assert!(marked_keys(&mut c, &rings, bits_of(s), m).await.is_empty());
    }
    // 6 s on, A's turn: silent since the join, whose epoch still counts.
    advance(&clock, 6_000);
    assert!(store.release(&policy, holder).await.unwrap());
    assert!(
        matches!(
            store.poll(&policy, a).await.unwrap(),
            Decision::Admitted { .. }
        ),
        "A, silent since joining 6 s ago, let in"
    );
    // 12 s after B's join, B's turn: silent beyond 5/4 queue_ttl, skipped.
    advance(&clock, 6_000);
    assert!(store.release(&policy, a).await.unwrap());
    assert_eq!(
        store.poll(&policy, b).await.unwrap(),
        Decision::Unknown,
        "B skipped"
    );

    // The line is empty and seq is at 3. A new epoch opens with first number 3 (C's join), then
    // seq is lost: D's number (1 again, nobody in line to be after) is no later than it.
    let holder = admitted(&store, &policy).await;
    advance(&clock, 2_000);
    let (c_seq_holder, _) = waiter(&store, &policy).await;
    let _: () = c.del(key(&keys, "seq")).await.unwrap();
    assert!(store.release(&policy, holder).await.unwrap());
    assert!(matches!(
        store.poll(&policy, c_seq_holder).await.unwrap(),
        Decision::Admitted { .. }
    ));
    // D joins through main (the fast path's window taken away), E through the fast path
    // (its window is kept again by D's call): both decide alike.
    let _: () = c.del(key(&keys, "fast")).await.unwrap();
    let (d, d_seq) = waiter(&store, &policy).await;
    assert_eq!(d_seq, 1, "seq went back");
    let (e, e_seq) = waiter(&store, &policy).await;
    assert_eq!(e_seq, 2);
    for (who, s) in [("D", d), ("E", e)] {
        let (x, y) = bits_of(s);
        let mut holding = 0;
        for k in &rings {
            let bx: u8 = c.getbit(*k, x as usize).await.unwrap();
            let by: u8 = c.getbit(*k, y as usize).await.unwrap();
            holding += usize::from(bx == 1 && by == 1);
        }
        assert_eq!(
            holding, 2,
            "{who}'s join is told by its bits, in both rings"
        );
    }
    advance(&clock, 6_000);
    assert!(store.release(&policy, c_seq_holder).await.unwrap());
    assert!(
        matches!(
            store.poll(&policy, d).await.unwrap(),
            Decision::Admitted { .. }
        ),
        "D, silent since joining 6 s ago, let in"
    );
}

/// The fast path's window is a key of its own: `<since>:<from>:<till>:<for>`, whose TTL ends it
/// 1 ms before `till` (within the current second), deleted when anything main looks at is no
/// longer settled (a pause), made again by the next run of main that finds it settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_is_a_key_of_its_own_that_ends_by_its_ttl() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS + 250);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("window-key");
    let keys = redis_keys(&store, "window-key");
    let window = key(&keys, "fast").to_owned();
    admitted(&store, &policy).await;
    for _ in 0..3 {
        waiter(&store, &policy).await;
    }
    // Text only, even in a room of one slot: the holder is not named.
    let value: Vec<u8> = c.get(&window).await.unwrap();
    assert!(!value.contains(&0), "no holder named: {value:?}");
    let held = String::from_utf8(value).unwrap();
    let parts: Vec<&str> = held.splitn(4, ':').collect();
    let (from, till): (u64, u64) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
    assert!(from >= START_MS + 250 && from < till, "{held}");
    assert_eq!(till, START_MS + 1_000, "ends with the second: {held}");
    let version = format!("#{}", tower_waiting_room::store::SETTINGS_VERSION);
    assert_eq!(
        parts[3],
        format!("1000:8000:1800000{version}"),
        "kept for the call's numbers and this version: {held}"
    );
    let pttl: i64 = c.pttl(&window).await.unwrap();
    assert!(
        pttl > 0 && pttl <= (till - 1 - from) as i64,
        "gone by till - 1: {pttl} ms"
    );
    let fields: Vec<String> = c.hkeys(key(&keys, "settings")).await.unwrap();
    assert!(!fields.iter().any(|f| f.starts_with("fast_")), "{fields:?}");

    // A pause closes the window; the resume and the next joins open it again.
    let pause = tower_waiting_room::store::SettingsChange::new().paused(true);
    store.configure(&policy, pause).await.unwrap();
    let held: Option<Vec<u8>> = c.get(&window).await.unwrap();
    assert_eq!(held, None, "closed");
    let resume = tower_waiting_room::store::SettingsChange::new().paused(false);
    store.configure(&policy, resume).await.unwrap();
    advance(&clock, 1_000);
    waiter(&store, &policy).await;
    let held: Option<Vec<u8>> = c.get(&window).await.unwrap();
    assert!(held.is_some(), "open again");

    // A window that main of an older version opened (its `for` names no version, as version
    // 4's) is not answered from: the next enter runs main, which writes this version's window
    // over it (the fast path never writes the window).
    let mut older = held.unwrap();
    let at = older
        .windows(version.len())
        .position(|w| w == version.as_bytes())
        .expect("the window names its version");
    older.drain(at..at + version.len());
    let _: () = redis::cmd("SET")
        .arg(&window)
        .arg(&older)
        .arg("PX")
        .arg(60_000)
        .query_async(&mut c)
        .await
        .unwrap();
    waiter(&store, &policy).await;
    let now: Vec<u8> = c.get(&window).await.unwrap();
    assert_ne!(now, older, "main ran and kept its own window");
    assert!(
        now.windows(version.len()).any(|w| w == version.as_bytes()),
        "{now:?}"
    );
}

/// The settings key lost (evicted, deleted) while waiters are kept alive by first numbers
/// alone (one seen only behind a sync's turn horizon, a newcomer who only joined): its ring
/// keys are marked lost by the first call that finds the key gone, whatever that call is, so
/// nobody is skipped or swept for the bits the first numbers stood in for; the lost key also
/// takes the operator's live capacity back to the default, so the line jumps past the horizon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_settings_key_skips_nobody_the_first_numbers_kept() {
    #[derive(Clone, Copy, Debug)]
    enum FirstCall {
        AdmitNext,
        Release,
        EmptySync,
    }
    let server = Server::start(&[]);
    for (n, first_call) in [
        FirstCall::AdmitNext,
        FirstCall::Release,
        FirstCall::EmptySync,
    ]
    .into_iter()
    .enumerate()
    {
        let clock = ManualClock::new(START_MS);
        let store = store(&server, &clock);
        let mut c = conn(&server).await;
        // Default capacity 10, live capacity 1 (an operator's).
        let policy = RoomPolicy::new(&format!("lost{n}"), 10)
            .with_ttls(
                Duration::from_secs(3_600),
                Duration::from_secs(60),
                Duration::from_secs(8),
            )
            .with_max_queue_len(1_000);
        store
            .configure(&policy, SettingsChange::new().capacity(1))
            .await
            .unwrap();
        let holder = admitted(&store, &policy).await;
        let mut line = Vec::new();
        for _ in 0..5 {
            line.push(waiter(&store, &policy).await);
        }
        let horizon = Some(line[1].1 as f64);
        for _ in 0..4 {
            let seen = [line[0], line[3]].map(|(s, q)| (s, q as f64));
            store
                .sync(&policy, SeenWaiters::with_horizon(horizon, seen))
                .await
                .unwrap();
            advance(&clock, 8_000 / 3);
            store.heartbeat(&policy, holder).await.unwrap();
        }
        // A newcomer, alive by their join alone (no bits).
        let (newcomer, _) = waiter(&store, &policy).await;
        let keys = redis_keys(&store, &policy.room);
        let _: () = c.del(key(&keys, "settings")).await.unwrap();
        match first_call {
            FirstCall::AdmitNext => {
                store.admit_next(&policy, 4).await.unwrap();
            }
            FirstCall::Release => assert!(store.release(&policy, holder).await.unwrap()),
            FirstCall::EmptySync => {
                store.sync(&policy, SeenWaiters::default()).await.unwrap();
            }
        }
        let behind = store.poll(&policy, line[3].0).await.unwrap();
        assert!(
            matches!(behind, Decision::Admitted { .. }),
            "{first_call:?}: seen behind the horizon {} s ago: {behind:?}",
            8 / 3
        );
        let joined = store.poll(&policy, newcomer).await.unwrap();
        assert!(
            !matches!(joined, Decision::Unknown),
            "{first_call:?}: the newcomer neither skipped nor swept: {joined:?}"
        );
    }
}
