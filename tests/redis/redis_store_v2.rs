//! The Redis store's v2 layout, against a real `redis-server`: members are the
//! session ids' 16 raw bytes, there is no `seen` zset, liveness lives in Bloom bitmaps that a
//! gateway's `sync` sets, housekeeping runs exactly when due, and a snapshot's checkpoints are
//! the exact ranks.

use crate::redis_harness;

use std::time::Duration;

use redis::AsyncCommands;
use redis_harness::Server;
use tower_waiting_room::__private::{redis_bloom_bits, redis_keys};
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
    assert_eq!(line, vec![(w.as_bytes().to_vec(), seq as f64)]);
    let active: Vec<Vec<u8>> = c.zrange(key(&keys, "active"), 0, -1).await.unwrap();
    assert_eq!(active, vec![holder.as_bytes().to_vec()]);
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

/// A room kept by version 2 of the crate (its settings say `v` 2, and its epochs have no first
/// sequence numbers) is upgraded in place by this version's first call: nobody loses their place,
/// the settings say this version (5) from then on (so version 2's library refuses the room rather than read
/// bit-less joins as silence), and a newcomer joining before the epochs are made again is
/// checked in with bits (their join cannot be told by its number yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_of_version_2_is_upgraded_in_place() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("upgrade");
    let m = redis_bloom_bits(1_000);
    let keys = redis_keys(&store, "upgrade");
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
    assert_eq!(v, tower_waiting_room::store::SETTINGS_VERSION);
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
/// here an open one) is upgraded in place by this version's first call: the settings say this version (5) and
/// no longer hold the old window's fields (version 3's library, which reads and keeps its
/// window there, then refuses the room), nobody loses their place, and the window is this
/// version's own key from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_of_version_3_is_upgraded_in_place() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("upgrade3");
    let keys = redis_keys(&store, "upgrade3");
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
    assert_eq!(v, tower_waiting_room::store::SETTINGS_VERSION);
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
/// other offsets) is upgraded in place by this version's first call: the settings say 5, and
/// every epoch the rings' fields name is marked lost (negative), so a waiter whose check-ins
/// are only in the older bitmaps is not skipped at their turn; read with this version's offsets
/// those bitmaps would say the waiter was silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_of_version_4_is_upgraded_in_place() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let policy = policy_8s("upgrade4");
    let keys = redis_keys(&store, "upgrade4");
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
    assert_eq!(v, tower_waiting_room::store::SETTINGS_VERSION);
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
    // BITFIELD count would mix the liveness reads in).
    let probe = *line.last().unwrap();
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
