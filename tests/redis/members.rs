//! How the Redis store keeps a session in its sorted sets, against a real `redis-server`: a
//! room of settings version 6 by its id's first 14 bytes (Redis holds such a member in half
//! the memory of a 16-byte one), a room of version 5 (made by an earlier library) by its whole
//! id, kept so while it lives, so that gateways of both share it; and a room whose settings key
//! was lost keeps the members it holds.

use crate::redis_harness;
use crate::redis_store_v2::{
    admitted, conn, key, member, one_slot, store, version_5_room, waiter, START_MS,
};

use redis::AsyncCommands;
use redis_harness::Server;
use tower_waiting_room::__private::{redis_keys, room_visitor_call};
use tower_waiting_room::store::{
    Decision, MintFor, Minted, Redeemed, RedisStore, SeenWaiters, SnapshotStore, Store,
    TicketNonce, TicketStore, SETTINGS_VERSION,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::SessionId;

/// Every member of every sorted set of the room that holds sessions.
async fn members(c: &mut redis::aio::MultiplexedConnection, keys: &[String]) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for name in ["line", "active", "granted", "banned"] {
        let held: Vec<Vec<u8>> = c.zrange(key(keys, name), 0, -1).await.unwrap();
        all.extend(held);
    }
    all
}

async fn version(c: &mut redis::aio::MultiplexedConnection, keys: &[String]) -> u32 {
    c.hget(key(keys, "settings"), "v").await.unwrap()
}

/// The fast path's window, '' when none is open.
async fn window(c: &mut redis::aio::MultiplexedConnection, keys: &[String]) -> String {
    let held: Option<String> = c.get(key(keys, "fast")).await.unwrap();
    held.unwrap_or_default()
}

/// Everything a room does with a session, in a room whose members are `width` bytes of each
/// id: a holder let in, five waiting (two of them placed by a batch's fast path and one by an
/// enter's, from the window main opens once the room is full: returned as it was then), a sync that finds the waiters and answers a stranger
/// back, a ban, a release whose slot the head is granted and claims, and the claimed slot's ticket redeemed.
async fn a_room_lives_on(
    store: &RedisStore,
    c: &mut redis::aio::MultiplexedConnection,
    room: &str,
    width: usize,
) -> String {
    let p = one_slot(room);
    let keys = redis_keys(store, room).to_vec();
    let holder = admitted(store, &p).await;
    let (a, _) = waiter(store, &p).await;
    let (b, _) = waiter(store, &p).await;
    let open = window(c, &keys).await;
    // Two newcomers in one batch, placed by the batch's fast path from that window.
    let (e, f) = (SessionId::random(), SessionId::random());
    let ids: Vec<u8> = [e, f].iter().flat_map(|s| *s.as_bytes()).collect();
    let (function, argv) = room_visitor_call("join_batch", &p, &ids, None).unwrap();
    let mut batch = redis::cmd("FCALL");
    batch.arg(function).arg(keys.len()).arg(&keys).arg(argv);
    let placed: Vec<redis::Value> = batch.query_async(c).await.unwrap();
    assert_eq!(placed.first(), Some(&redis::Value::Int(17)), "{placed:?}");
    let (d, _) = waiter(store, &p).await;
    let stranger = SessionId::random();
    let snapshot = store
        .sync(&p, SeenWaiters::new(vec![a, b, e, f, d, stranger]))
        .await
        .unwrap();
    assert_eq!(
        snapshot.unknown,
        vec![stranger],
        "the waiters found, the stranger answered back whole"
    );
    assert!(matches!(
        store.poll(&p, b).await.unwrap(),
        Decision::Waiting { position: 2, .. }
    ));
    assert!(store.ban(&p, d, START_MS + 3_600_000).await.unwrap());
    let held = members(c, &keys).await;
    assert_eq!(
        held.len(),
        6,
        "a, b, e, f in line, the holder inside, d banned"
    );
    assert!(
        held.iter().all(|m| m.len() == width),
        "{width} bytes of each id: {held:?}"
    );
    for s in [holder, a, b, e, f, d] {
        assert!(held.contains(&s.as_bytes()[..width].to_vec()), "{s:?}");
    }
    assert!(store.release(&p, holder).await.unwrap());
    assert!(matches!(
        store.poll(&p, a).await.unwrap(),
        Decision::Admitted { .. }
    ));
    assert!(matches!(
        store.poll(&p, b).await.unwrap(),
        Decision::Waiting { position: 1, .. }
    ));
    let expires = match store.enter(&p, a).await.unwrap() {
        Decision::Admitted { expires_at_ms } => expires_at_ms,
        other => panic!("the head claims the freed slot: {other:?}"),
    };
    let inside: Vec<Vec<u8>> = c.zrange(key(&keys, "active"), 0, -1).await.unwrap();
    assert_eq!(inside, vec![a.as_bytes()[..width].to_vec()]);
    let fresh = TicketNonce::random();
    let minted = store
        .mint_ticket(&p, a, fresh, expires, MintFor::Admission)
        .await
        .unwrap();
    assert!(matches!(minted, Minted::Ticket { .. }), "{minted:?}");
    assert_eq!(
        store.redeem_ticket(&p, a, fresh).await.unwrap(),
        Redeemed::Accepted,
        "the slot found by its member"
    );
    assert!(matches!(store.poll(&p, d).await.unwrap(), Decision::Banned));
    open
}

/// A room this version makes is of settings version 6 and keeps each session as its id's first
/// 14 bytes, in line, among the slots and the bans; its fast path's window names version 6.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_of_this_version_keeps_each_session_in_14_bytes() {
    assert_eq!(SETTINGS_VERSION, 6);
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let open = a_room_lives_on(&store, &mut c, "short", 14).await;
    let keys = redis_keys(&store, "short").to_vec();
    assert_eq!(version(&mut c, &keys).await, 6);
    assert!(open.ends_with("#6"), "{open}");
}

/// A room of settings version 5, as an earlier library made it, keeps its whole ids and its
/// version through everything this version does in it, its fast path's window naming version
/// 5 (the earlier library's fast path reads it alike).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_of_version_5_keeps_its_whole_ids() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    let keys = redis_keys(&store, "whole").to_vec();
    version_5_room(&mut c, &keys).await;
    let open = a_room_lives_on(&store, &mut c, "whole", 16).await;
    assert_eq!(version(&mut c, &keys).await, 5);
    assert!(open.ends_with("#5"), "{open}");
    // Its members found whole once, under this key: not looked at again while it lasts.
    let whole: Option<String> = c.hget(key(&keys, "settings"), "whole").await.unwrap();
    assert_eq!(whole.as_deref(), Some("1"));
}

/// A settings key lost (evicted, deleted) is written again with the version whose members the
/// room still holds: whole ids keep version 5, short ones version 6; everyone keeps their place
/// and the holder their slot. A new room, holding nobody, is of this version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_settings_key_keeps_the_members_the_room_holds() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    for (room, was) in [("lost5", 5), ("lost6", 6)] {
        let p = one_slot(room);
        let keys = redis_keys(&store, room).to_vec();
        if was == 5 {
            version_5_room(&mut c, &keys).await;
        }
        let holder = admitted(&store, &p).await;
        let (a, _) = waiter(&store, &p).await;
        assert_eq!(version(&mut c, &keys).await, was);
        let _: () = c.del(key(&keys, "settings")).await.unwrap();
        let _: () = c.del(key(&keys, "fast")).await.unwrap();
        let (b, _) = waiter(&store, &p).await;
        assert_eq!(version(&mut c, &keys).await, was, "{room}");
        assert!(matches!(
            store.poll(&p, a).await.unwrap(),
            Decision::Waiting { position: 1, .. }
        ));
        assert!(matches!(
            store.heartbeat(&p, holder).await.unwrap(),
            Decision::Admitted { .. }
        ));
        // The slot holder alone in the room: the lost key found by the slot's member.
        assert!(store.release(&p, a).await.unwrap());
        assert!(store.release(&p, b).await.unwrap());
        let _: () = c.del(key(&keys, "settings")).await.unwrap();
        let _: () = c.del(key(&keys, "fast")).await.unwrap();
        assert!(matches!(
            store.heartbeat(&p, holder).await.unwrap(),
            Decision::Admitted { .. }
        ));
        assert_eq!(version(&mut c, &keys).await, was, "{room}, the slot alone");
        let width = if was == 5 { 16 } else { 14 };
        let held = members(&mut c, &keys).await;
        assert_eq!(held, vec![holder.as_bytes()[..width].to_vec()]);
    }
    let p = one_slot("new");
    let keys = redis_keys(&store, "new").to_vec();
    admitted(&store, &p).await;
    assert_eq!(version(&mut c, &keys).await, SETTINGS_VERSION);
    let held = members(&mut c, &keys).await;
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].len(), member(&SessionId::random()).len());
}

/// A session argument of another length than an id's is refused by every call (`WRARGS`),
/// main's and the fast path's: a member of another length would make a room of whole ids
/// look like one of short ones (or the other way) to the next call, and it would then look its
/// holders, waiters and bans up in the wrong form. The room, its version and its people stay
/// as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_argument_of_another_length_is_refused() {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let store = store(&server, &clock);
    let mut c = conn(&server).await;
    for (room, was) in [("odd5", 5), ("odd6", 6)] {
        let p = one_slot(room);
        let keys = redis_keys(&store, room).to_vec();
        if was == 5 {
            version_5_room(&mut c, &keys).await;
        }
        let holder = admitted(&store, &p).await;
        let banned = SessionId::random();
        // A stranger: no place or slot to drop, the ban held all the same.
        assert!(!store.ban(&p, banned, START_MS + 3_600_000).await.unwrap());
        let before = members(&mut c, &keys).await;
        for odd in [
            &b"x"[..],
            &[7u8; 14][..],
            &[7u8; 15][..],
            &[7u8; 17][..],
            &[][..],
        ] {
            for op in ["enter", "join", "poll", "heartbeat", "release"] {
                let (function, argv) = room_visitor_call(op, &p, odd, None).unwrap();
                let mut call = redis::cmd("FCALL");
                call.arg(function).arg(keys.len()).arg(&keys).arg(argv);
                let refused = call
                    .query_async::<redis::Value>(&mut c)
                    .await
                    .unwrap_err()
                    .to_string();
                assert!(
                    refused.contains("WRARGS"),
                    "{room}, {op} of {} bytes: {refused}",
                    odd.len()
                );
            }
        }
        assert_eq!(
            members(&mut c, &keys).await,
            before,
            "{room}: nothing written"
        );
        assert_eq!(version(&mut c, &keys).await, was, "{room}");
        assert!(matches!(
            store.heartbeat(&p, holder).await.unwrap(),
            Decision::Admitted { .. }
        ));
        assert_eq!(store.enter(&p, banned).await.unwrap(), Decision::Banned);
    }
}
