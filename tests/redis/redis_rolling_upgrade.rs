//! A rolling deploy from the previous room library to this one, on one real `redis-server`:
//! gateways of both versions in front of the same room at once. The previous library,
//! `twr_room_v5` (settings version 4, liveness bitmaps of a power of two), is kept as it shipped
//! in `tests/fixtures/room_v5.lua` and called the way its gateways called it. This version's
//! bitmaps are of another size (their bits sit at other offsets), so the two must never answer
//! from each other's fast-path window: version 4's fast path would set its check-ins' bits where
//! this version does not read them. So the room is upgraded in place by this version's first
//! call, the older library then refuses it (its gateways answer by their fail policy), and
//! nobody loses their place or their order. And from `twr_room_v6` to this library (the same
//! data): a waiter whose turn check-ins this version left out behind a turn horizon is never
//! skipped by the older library's promotion. And from `twr_room_v7` (the same data, one
//! function for every operation), `twr_room_v8` (the same data, one function per operation,
//! without the capacity controller's) and `twr_room_v9` (the same data, a snapshot without each
//! checkpoint's silence) to this library: each shares a room of settings version 5 with it,
//! and a capacity an older gateway writes turns this library's controller off instead of being
//! overwritten. A room this library makes (settings version 6, its members the ids' first 14
//! bytes) is refused by each of them.

use crate::redis_harness;
use crate::redis_store_v2::{early_in_a_second, key, one_slot};

use std::time::Duration;

use redis::AsyncCommands;
use redis_harness::Server;
use tower_waiting_room::__private::{
    redis_keys, redis_member, room_script_numbers, ROOM_LIBRARY_NAME,
};
use tower_waiting_room::auto::Window;
use tower_waiting_room::clock::Clock;
use tower_waiting_room::store::{
    AutoApplied, AutoOff, AutoStore, Decision, GatewayId, Place, RedisStore, SeenWaiters,
    SnapshotStore, Store, SETTINGS_VERSION,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{RoomPolicy, SessionId};

/// The previous room library, as it shipped (commit `00fa75c`).
const PREVIOUS_LIBRARY: &str = include_str!("../fixtures/room_v5.lua");
const PREVIOUS_FUNCTION: &str = "twr_room_v5";

/// An older library's `FCALL` of `op` for `session`, as its gateways called it for an operation
/// without arguments of its own: the keys, `op`, the id, `now` (`"0"`: the server's clock),
/// the packed numbers, silence not excused. The reply, or the error's text.
async fn older_call(
    c: &mut redis::aio::MultiplexedConnection,
    function: &str,
    keys: &[String],
    policy: &RoomPolicy,
    (op, session, now): (&str, SessionId, &str),
) -> Result<Vec<redis::Value>, String> {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(function).arg(keys.len());
    for k in keys {
        cmd.arg(k);
    }
    cmd.arg(op).arg(&session.as_bytes()[..]).arg(now);
    for n in room_script_numbers(policy) {
        cmd.arg(n);
    }
    cmd.arg("0");
    cmd.query_async(c).await.map_err(|e| e.to_string())
}

/// A gateway of the previous version: a newcomer's `join` by the server's clock.
async fn previous_join(
    c: &mut redis::aio::MultiplexedConnection,
    keys: &[String],
    policy: &RoomPolicy,
    session: SessionId,
) -> Result<Vec<redis::Value>, String> {
    older_call(c, PREVIOUS_FUNCTION, keys, policy, ("join", session, "0")).await
}

/// A fresh server with an older version of the room library loaded, as the gateways still on
/// that version would have left it, and a connection to it.
async fn server_with(library: &str) -> (Server, redis::aio::MultiplexedConnection) {
    let server = Server::start(&[]);
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(library)
        .query_async(&mut c)
        .await
        .unwrap();
    (server, c)
}

/// A gateway of this version on `server`, by the server's clock.
fn gateway(server: &Server) -> RedisStore {
    RedisStore::builder()
        .url(server.url())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// The reply's code: 1 admitted, 2 waiting.
fn code(reply: &[redis::Value]) -> i64 {
    match reply.first() {
        Some(redis::Value::Int(n)) => *n,
        other => panic!("no reply code: {other:?}"),
    }
}

/// The fast path's window, made to outlive the test's steps (its TTL ends it within the
/// second): whatever main wrote, kept as it is for a minute. The TTL is extended before the
/// window is read, so a window that is read is one that was kept.
async fn hold_window(c: &mut redis::aio::MultiplexedConnection, window: &str) -> Vec<u8> {
    let value = try_hold_window(c, window).await;
    assert!(!value.is_empty(), "main kept a window");
    value
}

/// [`hold_window`] for a window that may already have ended: empty when it has.
async fn try_hold_window(c: &mut redis::aio::MultiplexedConnection, window: &str) -> Vec<u8> {
    let kept: bool = c.pexpire(window, 60_000).await.unwrap();
    if !kept {
        return Vec::new();
    }
    c.get(window).await.unwrap()
}

fn names_version(window: &[u8], version: u32) -> bool {
    let mark = format!("#{version}");
    window.windows(mark.len()).any(|w| w == mark.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_upgrades_the_room_once_and_never_mixes_the_versions() {
    assert_eq!(ROOM_LIBRARY_NAME, "twr_room_v11");
    assert_eq!(SETTINGS_VERSION, 6);
    let (server, mut c) = server_with(PREVIOUS_LIBRARY).await;
    let (store, policy) = (gateway(&server), one_slot("rolling"));
    let keys = redis_keys(&store, "rolling").to_vec();
    let settings = keys.iter().find(|k| k.ends_with(":settings")).unwrap();
    let window = keys.iter().find(|k| k.ends_with(":fast")).unwrap().clone();

    // The previous version's gateways open the room: one in, two waiting, and its main keeps
    // its window (which names no version). Each window ends with its second: held early in one.
    early_in_a_second().await;
    let holder = SessionId::random();
    let (a, b) = (SessionId::random(), SessionId::random());
    assert_eq!(
        code(&previous_join(&mut c, &keys, &policy, holder).await.unwrap()),
        1
    );
    assert_eq!(
        code(&previous_join(&mut c, &keys, &policy, a).await.unwrap()),
        2
    );
    assert_eq!(
        code(&previous_join(&mut c, &keys, &policy, b).await.unwrap()),
        2
    );
    let v: u32 = c.hget(settings, "v").await.unwrap();
    assert_eq!(v, 4);
    let previous_window = hold_window(&mut c, &window).await;
    assert!(!names_version(&previous_window, 5), "{previous_window:?}");

    // This version's first call does not answer from that window: its main upgrades the room
    // (to settings version 5, whose members are whole ids, as version 4's are) and keeps its
    // own window, which names that version.
    let newcomer = SessionId::random();
    early_in_a_second().await;
    let d = store.enter(&policy, newcomer).await.unwrap();
    assert!(
        matches!(d, Decision::Waiting { position: 3, .. }),
        "behind the two already waiting: {d:?}"
    );
    let v: u32 = c.hget(settings, "v").await.unwrap();
    assert_eq!(v, 5, "upgraded in place");
    let window_now = hold_window(&mut c, &window).await;
    assert_ne!(window_now, previous_window);
    assert!(names_version(&window_now, 5), "{window_now:?}");

    // A gateway still on the previous version does not answer from this version's window
    // either: its main refuses the room, and it answers by its fail policy. Nobody joins.
    let late = SessionId::random();
    let refused = previous_join(&mut c, &keys, &policy, late)
        .await
        .unwrap_err();
    assert!(refused.contains("WRSETTINGS"), "{refused}");
    let line: u64 = c
        .zcard(keys.iter().find(|k| k.ends_with(":line")).unwrap())
        .await
        .unwrap();
    assert_eq!(line, 3, "the refused newcomer took no place");

    // Everyone who joined under either version keeps their place, in order.
    for (s, position) in [(a, 1), (b, 2), (newcomer, 3)] {
        let d = store.poll(&policy, s).await.unwrap();
        assert!(
            matches!(d, Decision::Waiting { position: p, .. } if p == position),
            "{d:?} for position {position}"
        );
    }
    assert!(store.release(&policy, holder).await.unwrap());
    assert!(matches!(
        store.poll(&policy, a).await.unwrap(),
        Decision::Admitted { .. }
    ));
}

/// The library before this one, `twr_room_v6` (settings version 5, the same data), kept as it
/// shipped in `tests/fixtures/room_v6.lua` (commit `77967bd`).
const V6_LIBRARY: &str = include_str!("../fixtures/room_v6.lua");
const V6_FUNCTION: &str = "twr_room_v6";

/// A `twr_room_v6` gateway's call of `op` for `session` at `now_ms`: the reply's code, or the
/// error.
async fn v6_call(
    c: &mut redis::aio::MultiplexedConnection,
    keys: &[String],
    policy: &RoomPolicy,
    op: &str,
    session: SessionId,
    now_ms: u64,
) -> Result<i64, String> {
    let now = now_ms.to_string();
    let reply = older_call(c, V6_FUNCTION, keys, policy, (op, session, &now)).await?;
    Ok(code(&reply))
}

/// This version's syncs name a turn horizon and leave out the turn check-ins of the waiters
/// behind it, lowering the turn epoch's first number instead (the data stay version 5). A
/// gateway still on `twr_room_v6`, in the same room, reads that first number as "joined
/// since": a waiter seen only behind the horizon is let in at their turn by its promotion too,
/// never skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_library_never_skips_a_waiter_left_out_behind_a_horizon() {
    const T0: u64 = 1_800_000_000_000;
    let (server, mut c) = server_with(V6_LIBRARY).await;
    let clock = ManualClock::new(T0);
    let store = RedisStore::builder()
        .url(server.url())
        .timeout(Duration::from_secs(5))
        .manual_clock(clock.clone())
        .build()
        .unwrap();
    // queue_ttl 8 s: turn epochs of 2 s; silent for more than 10 s is skipped at the turn.
    let policy = RoomPolicy::new("behind", 1)
        .with_ttls(
            Duration::from_secs(3_600),
            Duration::from_secs(60),
            Duration::from_secs(8),
        )
        .with_max_queue_len(1_000);
    let keys = redis_keys(&store, "behind").to_vec();
    // The room as the previous version's gateways keep it (settings version 5, whole ids),
    // which this version reads as it is.
    let settings = keys.iter().find(|k| k.ends_with(":settings")).unwrap();
    let _: () = c.hset(settings, "v", 5).await.unwrap();
    let holder = SessionId::random();
    assert!(matches!(
        store.enter(&policy, holder).await.unwrap(),
        Decision::Admitted { .. }
    ));
    let waiter = SessionId::random();
    let seq = match store.enter(&policy, waiter).await.unwrap() {
        Decision::Waiting {
            place: Some(Place::Seq(s)),
            ..
        } => s,
        other => panic!("not waiting with a place: {other:?}"),
    };
    // 4 s on, this version's gateway answered the waiter from its snapshot: behind its horizon.
    clock.advance(Duration::from_secs(4));
    let seen = SeenWaiters::with_horizon(Some(seq as f64 - 1.0), [(waiter, seq as f64)]);
    assert_eq!(seen.beyond(), &[waiter]);
    store.sync(&policy, seen).await.unwrap();
    // 11 s after the join, 7 s after the sync: the previous version's gateway frees the slot,
    // and its promotion reaches the waiter, silent since the join but for the sync.
    clock.advance(Duration::from_secs(7));
    let now = clock.now_ms();
    assert_eq!(
        v6_call(&mut c, &keys, &policy, "release", holder, now).await,
        Ok(4)
    );
    assert_eq!(
        v6_call(&mut c, &keys, &policy, "poll", waiter, now).await,
        Ok(1),
        "seen within queue_ttl, behind the horizon: let in, not skipped"
    );
}

/// An older library, `twr_room_v7` (settings version 5, the same data, one function for every
/// operation, told by its first argument), kept as it shipped in `tests/fixtures/room_v7.lua`
/// (commit `b21f3af`).
const V7_LIBRARY: &str = include_str!("../fixtures/room_v7.lua");
const V7_FUNCTION: &str = "twr_room_v7";

/// An older library, `twr_room_v8` (settings version 5, the same data, one function per
/// operation, no capacity controller), kept as it shipped in `tests/fixtures/room_v8.lua`
/// (commit `6e8a55d`, its files assembled in the order of that commit's protocol.rs).
const V8_LIBRARY: &str = include_str!("../fixtures/room_v8.lua");

/// The library before this one, `twr_room_v9` (settings version 5, the same data and
/// functions; its sync's checkpoints do not say who is silent), kept as it shipped in
/// `tests/fixtures/room_v9.lua` (commit `d07370d`, its files assembled in the order of that
/// commit's protocol.rs).
const V9_LIBRARY: &str = include_str!("../fixtures/room_v9.lua");

/// The library before this one, `twr_room_v10` (settings version 5: whole ids; its sync's
/// checkpoints say who is silent, and it writes the abandon ring's next epoch early), kept as
/// it was at commit `ba8507e` (its files assembled in the order of that commit's protocol.rs).
const V10_LIBRARY: &str = include_str!("../fixtures/room_v10.lua");

/// A gateway of an older library that shares this one's data (settings version 5), called the
/// way its gateways called it: by the server's clock, silence not excused.
#[derive(Clone, Copy, Debug)]
enum Older {
    /// `twr_room_v7`: one function, the operation its first argument.
    V7,
    /// `twr_room_v8`: `twr_room_v8_<op>`, the call's four arguments first.
    V8,
    /// `twr_room_v9`: `twr_room_v9_<op>`, called as v8's.
    V9,
    /// `twr_room_v10`: `twr_room_v10_<op>`, called as v8's.
    V10,
}

impl Older {
    const ALL: [Older; 4] = [Older::V7, Older::V8, Older::V9, Older::V10];

    /// Whether it reads a newer settings key whose `vmin` names its settings version.
    fn reads_vmin(self) -> bool {
        matches!(self, Older::V8 | Older::V9 | Older::V10)
    }

    fn library(self) -> &'static str {
        match self {
            Older::V7 => V7_LIBRARY,
            Older::V8 => V8_LIBRARY,
            Older::V9 => V9_LIBRARY,
            Older::V10 => V10_LIBRARY,
        }
    }

    /// Its gateway's visitor call of `op` for `session`: the reply, or the error's text.
    async fn call(
        self,
        c: &mut redis::aio::MultiplexedConnection,
        keys: &[String],
        policy: &RoomPolicy,
        op: &str,
        session: SessionId,
    ) -> Result<Vec<redis::Value>, String> {
        match self {
            Older::V7 => older_call(c, V7_FUNCTION, keys, policy, (op, session, "0")).await,
            Older::V8 => v8_call(c, keys, policy, op, &[&session.as_bytes()[..]]).await,
            Older::V9 | Older::V10 => {
                let library = match self {
                    Older::V9 => "twr_room_v9",
                    _ => "twr_room_v10",
                };
                function_call(c, library, keys, policy, op, &[&session.as_bytes()[..]]).await
            }
        }
    }
}

/// A `twr_room_v8` gateway's call of `op` (`FCALL twr_room_v8_<op>`): the room's keys, the call's
/// four arguments (the server's clock, the packed numbers, silence not excused), then `own`.
async fn v8_call(
    c: &mut redis::aio::MultiplexedConnection,
    keys: &[String],
    policy: &RoomPolicy,
    op: &str,
    own: &[&[u8]],
) -> Result<Vec<redis::Value>, String> {
    function_call(c, "twr_room_v8", keys, policy, op, own).await
}

/// A call of `op` by a gateway of `library` (v8 or later: `FCALL <library>_<op>`), as
/// [`v8_call`].
async fn function_call(
    c: &mut redis::aio::MultiplexedConnection,
    library: &str,
    keys: &[String],
    policy: &RoomPolicy,
    op: &str,
    own: &[&[u8]],
) -> Result<Vec<redis::Value>, String> {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(format!("{library}_{op}")).arg(keys.len());
    for k in keys {
        cmd.arg(k);
    }
    cmd.arg("0");
    for n in room_script_numbers(policy) {
        cmd.arg(n);
    }
    cmd.arg("0");
    for a in own {
        cmd.arg(*a);
    }
    cmd.query_async(c).await.map_err(|e| e.to_string())
}

/// The number at `i` of a reply.
fn int_at(reply: &[redis::Value], i: usize) -> i64 {
    match reply.get(i) {
        Some(redis::Value::Int(n)) => *n,
        other => panic!("no number at {i}: {other:?}"),
    }
}

/// v8 only changed the call (one function per operation), v9 only added the capacity
/// controller's functions, and this version only says in its sync's reply which checkpoint
/// waiters are silent: gateways of v7, v8 or v9 and of this version share a room,
/// loaded side by side, each placing newcomers behind the other's, each finding the other's
/// waiters in their places, and a slot freed by one claimed through the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_libraries_and_this_one_share_a_room() {
    for older in Older::ALL {
        share_a_room(older).await;
    }
}

async fn share_a_room(older: Older) {
    let (server, mut c) = server_with(older.library()).await;
    let (store, policy) = (gateway(&server), one_slot("shared"));
    let keys = redis_keys(&store, "shared").to_vec();
    let holder = SessionId::random();
    let (a, b, d) = (
        SessionId::random(),
        SessionId::random(),
        SessionId::random(),
    );
    let reply = older
        .call(&mut c, &keys, &policy, "join", holder)
        .await
        .unwrap();
    assert_eq!(code(&reply), 1, "{older:?} lets the first in: {reply:?}");
    let reply = older.call(&mut c, &keys, &policy, "join", a).await.unwrap();
    assert_eq!((code(&reply), int_at(&reply, 1)), (2, 1), "{reply:?}");
    assert!(matches!(
        store.join(&policy, b).await.unwrap(),
        Decision::Waiting { position: 2, .. }
    ));
    let reply = older.call(&mut c, &keys, &policy, "join", d).await.unwrap();
    assert_eq!(
        (code(&reply), int_at(&reply, 1)),
        (2, 3),
        "{older:?} places a newcomer behind this version's: {reply:?}"
    );
    assert!(matches!(
        store.enter(&policy, a).await.unwrap(),
        Decision::Waiting { position: 1, .. }
    ));
    let reply = older
        .call(&mut c, &keys, &policy, "enter", b)
        .await
        .unwrap();
    assert_eq!((code(&reply), int_at(&reply, 1)), (2, 2), "{reply:?}");
    // The holder leaves through this version; the head of the line, granted, claims through
    // the older one.
    assert!(store.release(&policy, holder).await.unwrap());
    let reply = older
        .call(&mut c, &keys, &policy, "enter", a)
        .await
        .unwrap();
    assert_eq!(
        code(&reply),
        1,
        "the next in line claims the freed slot: {reply:?}"
    );
    assert!(matches!(
        store.enter(&policy, b).await.unwrap(),
        Decision::Waiting { position: 1, .. }
    ));
}

/// A room this version makes is of settings version 6 (each session kept as its id's first 14
/// bytes), which no older library reads: each refuses it before any write (`WRSETTINGS`), so a
/// gateway not yet upgraded answers by its fail policy and never places a whole id beside the
/// room's short ones, while this version's gateways go on with everyone in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_this_version_makes_is_refused_by_the_older_libraries() {
    for older in Older::ALL {
        let (server, mut c) = server_with(older.library()).await;
        let (store, policy) = (gateway(&server), one_slot("new"));
        let keys = redis_keys(&store, "new").to_vec();
        let line = keys.iter().find(|k| k.ends_with(":line")).unwrap().clone();
        let (holder, a, late) = (
            SessionId::random(),
            SessionId::random(),
            SessionId::random(),
        );
        assert!(matches!(
            store.enter(&policy, holder).await.unwrap(),
            Decision::Admitted { .. }
        ));
        assert!(matches!(
            store.enter(&policy, a).await.unwrap(),
            Decision::Waiting { position: 1, .. }
        ));
        for (op, s) in [("join", late), ("enter", a), ("enter", holder)] {
            let refused = older.call(&mut c, &keys, &policy, op, s).await.unwrap_err();
            assert!(refused.contains("WRSETTINGS"), "{older:?} {op}: {refused}");
        }
        let waiting: Vec<Vec<u8>> = c.zrange(&line, 0, -1).await.unwrap();
        assert_eq!(
            waiting,
            vec![redis_member(&a).to_vec()],
            "{older:?} wrote nothing"
        );
        assert!(matches!(
            store.poll(&policy, a).await.unwrap(),
            Decision::Waiting { position: 1, .. }
        ));
        assert!(store.release(&policy, holder).await.unwrap());
        assert!(matches!(
            store.enter(&policy, a).await.unwrap(),
            Decision::Admitted { .. }
        ));
    }
}

/// An hour from now, in ms since the epoch (the server's clock is the system's).
fn an_hour_on() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    now.as_millis() as u64 + 3_600_000
}

/// A settings key lost from a room of version 6 while older gateways still run may be written
/// again by one of them, with its own version 5 and no look at the members: the room would then
/// be read as one of whole ids by everyone, its waiters not found, its slot holders turned
/// away and its bans evaded. This version takes the room back by what it holds at its next
/// call: version 6 again (the older gateways refused again), everyone where they were. A
/// `vmin` left on a key whose version is lost goes with it, so that no older library reads the
/// key written again as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_of_this_version_relabelled_by_an_older_library_is_taken_back() {
    for older in Older::ALL {
        let (server, mut c) = server_with(older.library()).await;
        let (store, policy) = (gateway(&server), one_slot("back"));
        let keys = redis_keys(&store, "back").to_vec();
        let named = |name: &str| {
            keys.iter()
                .find(|k| k.ends_with(&format!(":{name}")))
                .unwrap()
                .clone()
        };
        let settings = named("settings");
        let (holder, a, banned) = (
            SessionId::random(),
            SessionId::random(),
            SessionId::random(),
        );
        assert!(matches!(
            store.enter(&policy, holder).await.unwrap(),
            Decision::Admitted { .. }
        ));
        assert!(matches!(
            store.enter(&policy, a).await.unwrap(),
            Decision::Waiting { position: 1, .. }
        ));
        assert!(matches!(
            store.enter(&policy, banned).await.unwrap(),
            Decision::Waiting { position: 2, .. }
        ));
        assert!(store.ban(&policy, banned, an_hour_on()).await.unwrap());

        // The key lost; the older gateway's next call writes it again as version 5.
        let _: () = c.del(&settings).await.unwrap();
        let _: () = c.del(named("fast")).await.unwrap();
        let _ = older.call(&mut c, &keys, &policy, "poll", a).await;
        let v: u32 = c.hget(&settings, "v").await.unwrap();
        assert_eq!(v, 5, "{older:?} wrote its own version");

        let d = store.poll(&policy, a).await.unwrap();
        assert!(
            matches!(d, Decision::Waiting { position: 1, .. }),
            "{older:?}: the waiter in place: {d:?}"
        );
        let v: u32 = c.hget(&settings, "v").await.unwrap();
        assert_eq!(v, 6, "{older:?}: taken back");
        assert!(matches!(
            store.heartbeat(&policy, holder).await.unwrap(),
            Decision::Admitted { .. }
        ));
        assert!(matches!(
            store.enter(&policy, banned).await.unwrap(),
            Decision::Banned
        ));
        let refused = older
            .call(&mut c, &keys, &policy, "join", SessionId::random())
            .await
            .unwrap_err();
        assert!(refused.contains("WRSETTINGS"), "{older:?}: {refused}");

        // A `vmin` naming version 5 left on the key, its version damaged: written again as
        // version 6 without it, and the older library refuses the room.
        let _: () = c.hset(&settings, "vmin", 5).await.unwrap();
        let _: () = c.hset(&settings, "v", "inf").await.unwrap();
        let _: () = c.del(named("fast")).await.unwrap();
        assert!(matches!(
            store.poll(&policy, a).await.unwrap(),
            Decision::Waiting { position: 1, .. }
        ));
        let v: u32 = c.hget(&settings, "v").await.unwrap();
        let vmin: Option<u32> = c.hget(&settings, "vmin").await.unwrap();
        assert_eq!((v, vmin), (6, None), "{older:?}");
        let refused = older
            .call(&mut c, &keys, &policy, "enter", a)
            .await
            .unwrap_err();
        assert!(refused.contains("WRSETTINGS"), "{older:?}: {refused}");
        let waiting: u64 = c.zcard(named("line")).await.unwrap();
        assert_eq!(waiting, 1, "{older:?}: nobody placed twice");
    }
}

/// The same, when the older gateway's own call put a whole id at the front of a set the room's
/// form is read from (here the only slot holder, let in by it while the line is empty): a short
/// member anywhere else (here a ban) says the room is of version 6. Read by the first member of
/// the line or the slots alone, the banned session got in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relabelled_room_is_taken_back_whatever_the_older_library_placed_first() {
    for older in Older::ALL {
        let (server, mut c) = server_with(older.library()).await;
        let store = gateway(&server);
        let mut policy = one_slot("ends");
        policy.capacity = 2;
        let keys = redis_keys(&store, "ends").to_vec();
        let settings = key(&keys, "settings");
        // A ban of a session not in the room yet: the room's only member.
        let banned = SessionId::random();
        assert!(!store.ban(&policy, banned, an_hour_on()).await.unwrap());
        let v: u32 = c.hget(settings, "v").await.unwrap();
        assert_eq!(v, 6);

        // The key lost; the older gateway writes it again and lets a newcomer in.
        let _: () = c.del(settings).await.unwrap();
        let _: () = c.del(key(&keys, "fast")).await.unwrap();
        let reply = older
            .call(&mut c, &keys, &policy, "enter", SessionId::random())
            .await
            .unwrap();
        assert_eq!(code(&reply), 1, "{older:?} let the newcomer in: {reply:?}");
        let v: u32 = c.hget(settings, "v").await.unwrap();
        assert_eq!(v, 5, "{older:?} wrote its own version");

        assert_eq!(
            store.enter(&policy, banned).await.unwrap(),
            Decision::Banned,
            "{older:?}: the ban holds"
        );
        let v: u32 = c.hget(settings, "v").await.unwrap();
        assert_eq!(v, 6, "{older:?}: taken back");
    }
}

/// The previous library has no capacity controller and never reads its record, which is a key
/// of its own: a capacity this version's controller writes is the room's for the previous
/// library's gateways too, a raise letting the next waiter in at once; a capacity a gateway of
/// the previous library writes (its operator's configure) is not overwritten by the controller,
/// which turns off (`changed_elsewhere`) at its next decision, for every gateway, writing
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_the_previous_library_writes_turns_the_controller_off() {
    let (server, mut c) = server_with(V8_LIBRARY).await;
    let (store, policy) = (gateway(&server), one_slot("controlled"));
    let keys = redis_keys(&store, "controlled").to_vec();
    let v8 = Older::V8;
    let (holder, a, b) = (
        SessionId::random(),
        SessionId::random(),
        SessionId::random(),
    );
    let reply = v8
        .call(&mut c, &keys, &policy, "join", holder)
        .await
        .unwrap();
    assert_eq!(code(&reply), 1, "{reply:?}");
    let reply = v8.call(&mut c, &keys, &policy, "join", a).await.unwrap();
    assert_eq!((code(&reply), int_at(&reply, 1)), (2, 1), "{reply:?}");

    // This version's controller raises the capacity: the waiter is granted a slot at once, and
    // claims it through the previous library, which holds the room to the new capacity.
    let gateway = GatewayId::random();
    let quiet = Window::default();
    let report = store
        .auto_report(&policy, gateway, &quiet, 5_000, 10_000)
        .await
        .unwrap();
    assert!(report.deciding && report.off.is_none(), "{report:?}");
    assert_eq!(
        store
            .auto_apply(&policy, gateway, 2, None, "raised")
            .await
            .unwrap(),
        AutoApplied::Applied { before: 1 }
    );
    let reply = v8.call(&mut c, &keys, &policy, "enter", a).await.unwrap();
    assert_eq!(code(&reply), 1, "granted by the raise: {reply:?}");
    let reply = v8.call(&mut c, &keys, &policy, "join", b).await.unwrap();
    assert_eq!((code(&reply), int_at(&reply, 1)), (2, 1), "{reply:?}");

    // The previous library's operator sets the capacity: it stands, and the controller's next
    // decision turns it off instead.
    let reply = v8_call(
        &mut c,
        &keys,
        &policy,
        "configure",
        &[b"3", b"-1", b"-1", b"-1", b"0"],
    )
    .await
    .unwrap();
    assert_eq!(
        (code(&reply), int_at(&reply, 1), int_at(&reply, 5)),
        (8, 3, 2),
        "{reply:?}"
    );
    assert_eq!(
        store
            .auto_apply(&policy, gateway, 4, None, "raised again")
            .await
            .unwrap(),
        AutoApplied::ChangedElsewhere
    );
    let stats = store.stats(&policy).await.unwrap();
    assert_eq!(stats.settings.capacity, 3, "the previous library's stands");
    assert_eq!((stats.admitted + stats.granted, stats.waiting), (3, 0));
    let other = store
        .auto_report(&policy, GatewayId::random(), &quiet, 5_000, 10_000)
        .await
        .unwrap();
    assert_eq!(other.off, Some(AutoOff::ChangedElsewhere), "{other:?}");
    assert_eq!(other.status.as_deref(), Some("raised"));
}

/// v7 writes a small room's slot holders into the fast path's window (after a NUL); this
/// library does not, and reads such a window by its text alone: a newcomer's join is answered
/// from it, and a holder it names is still told by the slot lookups (a claim, main's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_naming_holders_is_answered_from_by_this_library() {
    let (server, mut c) = server_with(V7_LIBRARY).await;
    let (store, policy) = (gateway(&server), one_slot("holders"));
    let keys = redis_keys(&store, "holders").to_vec();
    let window = keys.iter().find(|k| k.ends_with(":fast")).unwrap().clone();
    let v7 = |op, session| (op, session, "0");
    let (holder, a, b) = (
        SessionId::random(),
        SessionId::random(),
        SessionId::random(),
    );
    let reply = older_call(&mut c, V7_FUNCTION, &keys, &policy, v7("join", holder))
        .await
        .unwrap();
    assert_eq!(code(&reply), 1, "v7 lets the first in: {reply:?}");
    // A window v7's main opened in the same second as the join that noted the arrival.
    let mut held = Vec::new();
    for _ in 0..20 {
        let _: u64 = c.del(&window).await.unwrap();
        let reply = older_call(&mut c, V7_FUNCTION, &keys, &policy, v7("enter", a))
            .await
            .unwrap();
        assert_eq!(code(&reply), 2, "{reply:?}");
        held = try_hold_window(&mut c, &window).await;
        if !held.is_empty() {
            break;
        }
    }
    let mut named = vec![0u8];
    named.extend_from_slice(holder.as_bytes());
    assert!(held.ends_with(&named), "v7 names the holder: {held:?}");

    assert!(matches!(
        store.join(&policy, b).await.unwrap(),
        Decision::Waiting { position: 2, .. }
    ));
    let now: Vec<u8> = c.get(&window).await.unwrap();
    assert_eq!(
        now, held,
        "the join was answered from v7's window, main not run"
    );
    assert!(
        matches!(
            store.enter(&policy, holder).await.unwrap(),
            Decision::Admitted { .. }
        ),
        "the holder claims their slot"
    );
}

/// Both directions of a version mix, with each older library as it shipped (`twr_room_v7`,
/// `twr_room_v8` and the previous one, `twr_room_v9`) and this one on the same keys, in a room
/// of settings version 5 (as theirs are: this version keeps such a room's whole ids and its
/// version): each reads the other's key, placing newcomers behind the other's and holding one
/// capacity. A key of a newer version (`v 7`) is refused by both before
/// any write: this one answers it as a busy store (a version mix), the older one with
/// `WRSETTINGS` (v7's crate took that for a misconfigured store and answered by the fail
/// policy: with `FailPolicy::Open`, in without a slot; the rolling-upgrade rule in
/// docs/redis.md is for that). A newer key that names this version as a reader (`vmin 5`, an
/// additive change) is read by this one and by v8 and v9, which read `vmin` too, and never lowered;
/// v7 still refuses it. Throughout: nobody admitted without a slot, never over capacity,
/// nobody's place lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_settings_key_is_refused_or_read_never_opens_the_doors() {
    for older in Older::ALL {
        newer_key_with(older).await;
    }
}

async fn newer_key_with(older: Older) {
    let (server, mut c) = server_with(older.library()).await;
    let (store, policy) = (gateway(&server), one_slot("mix"));
    let keys = redis_keys(&store, "mix").to_vec();
    let named = |name: &str| {
        keys.iter()
            .find(|k| k.ends_with(&format!(":{name}")))
            .unwrap()
            .clone()
    };
    let (settings, line, active, granted) = (
        named("settings"),
        named("line"),
        named("active"),
        named("granted"),
    );
    let (holder, a, b) = (
        SessionId::random(),
        SessionId::random(),
        SessionId::random(),
    );
    // The room is of version 5, as the older gateways make it; this version opens it, keeping
    // its version, and the older one reads it.
    let _: () = c.hset(&settings, "v", 5).await.unwrap();
    assert!(matches!(
        store.enter(&policy, holder).await.unwrap(),
        Decision::Admitted { .. }
    ));
    let reply = older.call(&mut c, &keys, &policy, "join", a).await.unwrap();
    assert_eq!(
        (code(&reply), int_at(&reply, 1)),
        (2, 1),
        "{older:?} holds the capacity: {reply:?}"
    );
    assert!(matches!(
        store.join(&policy, b).await.unwrap(),
        Decision::Waiting { position: 2, .. }
    ));
    let v: u32 = c.hget(&settings, "v").await.unwrap();
    assert_eq!(v, 5);
    let places = |c: &mut redis::aio::MultiplexedConnection| {
        let (line, active, granted) = (line.clone(), active.clone(), granted.clone());
        let mut c = c.clone();
        async move {
            let waiting: Vec<(Vec<u8>, f64)> = c.zrange_withscores(&line, 0, -1).await.unwrap();
            let inside: u64 = c.zcard(&active).await.unwrap();
            let granted: u64 = c.zcard(&granted).await.unwrap();
            (waiting, inside + granted)
        }
    };
    let before = places(&mut c).await;
    assert_eq!((before.0.len(), before.1), (2, 1));

    // A newer version's key whose changes this one cannot read: refused by both, nothing
    // written (the newer gateway's window goes with its key).
    let _: () = c.hset(&settings, "v", 7).await.unwrap();
    let _: () = c.del(named("fast")).await.unwrap();
    let late = SessionId::random();
    let e = store.enter(&policy, late).await.unwrap_err();
    assert!(e.is_version_mix(), "{e}");
    let e = store.poll(&policy, a).await.unwrap_err();
    assert!(e.is_version_mix(), "{e}");
    let refused = older
        .call(&mut c, &keys, &policy, "join", late)
        .await
        .unwrap_err();
    assert!(refused.contains("WRSETTINGS"), "{refused}");
    let refused = older
        .call(&mut c, &keys, &policy, "enter", b)
        .await
        .unwrap_err();
    assert!(refused.contains("WRSETTINGS"), "{refused}");
    assert_eq!(places(&mut c).await, before, "nothing written by either");

    // The newer version's changes are additive (vmin 5): this one reads the key, and so does
    // v8 (which reads vmin); v7 still refuses it, and writes nothing.
    let _: () = c.hset(&settings, "vmin", 5).await.unwrap();
    let joined = older.call(&mut c, &keys, &policy, "join", late).await;
    if older.reads_vmin() {
        let reply = joined.unwrap();
        assert_eq!((code(&reply), int_at(&reply, 1)), (2, 3), "{reply:?}");
    } else {
        let refused = joined.unwrap_err();
        assert!(refused.contains("WRSETTINGS"), "{refused}");
        assert_eq!(places(&mut c).await, before, "nothing written by {older:?}");
    }
    for (s, position) in [(a, 1), (b, 2)] {
        let d = store.poll(&policy, s).await.unwrap();
        assert!(
            matches!(d, Decision::Waiting { position: p, .. } if p == position),
            "{d:?} for position {position}"
        );
    }
    assert!(matches!(
        store.enter(&policy, late).await.unwrap(),
        Decision::Waiting { position: 3, .. }
    ));
    assert!(store.release(&policy, holder).await.unwrap());
    assert!(matches!(
        store.poll(&policy, a).await.unwrap(),
        Decision::Admitted { .. }
    ));
    let stats = store.stats(&policy).await.unwrap();
    assert_eq!((stats.admitted + stats.granted, stats.waiting), (1, 2));
    let v: u32 = c.hget(&settings, "v").await.unwrap();
    assert_eq!(v, 7, "never lowered by this version's writes, nor v8's");

    // The newer gateways gone, the key back to version 5 (as a rollback leaves it): the older
    // one reads it again, everyone where this version left them.
    let _: () = c.hset(&settings, "v", 5).await.unwrap();
    let _: () = c.hdel(&settings, "vmin").await.unwrap();
    let reply = older
        .call(&mut c, &keys, &policy, "enter", b)
        .await
        .unwrap();
    assert_eq!((code(&reply), int_at(&reply, 1)), (2, 1), "{reply:?}");
    let reply = older
        .call(&mut c, &keys, &policy, "enter", a)
        .await
        .unwrap();
    assert_eq!(
        code(&reply),
        1,
        "the granted slot claimed through {older:?}: {reply:?}"
    );
    let stats = store.stats(&policy).await.unwrap();
    assert_eq!((stats.admitted + stats.granted, stats.waiting), (1, 2));
}
