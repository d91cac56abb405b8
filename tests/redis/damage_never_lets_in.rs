//! Damage is never a way in: a damaged key, a caller's bad argument or a clock far from the
//! server's makes the room's library repair, refuse or answer within the protocol, never fail
//! in a way the gateway's fail policy (open, by default) would answer by letting people in.
//! Over HTTP on a real `redis-server` where it is about letting people in; by hand (`FCALL`)
//! where it is about what a misbehaving caller may send.

use crate::common;
use crate::redis_harness;

use std::time::Duration;

use common::{app, serve, Jar, SECRET};
use http::{Method, StatusCode};
use redis_harness::Server;
use tower_waiting_room::__private::{redis_keys, room_script_numbers};
use tower_waiting_room::store::{RedisStore, SnapshotStore, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{RoomPolicy, WaitingRoomLayer};

fn store(redis: &Server) -> RedisStore {
    RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(5))
        .build()
        .expect("the store builds")
}

/// A gateway of the room `room` (capacity 1, the default fail policy: open) over `store`,
/// served on loopback; and its layer.
async fn gateway(room: &str, store: RedisStore) -> (common::Http, WaitingRoomLayer) {
    let layer = WaitingRoomLayer::builder(room)
        .capacity(1)
        .secret(SECRET)
        .secure_cookies(false)
        .store(store)
        .build()
        .expect("the room builds");
    (serve(app(layer.clone())).await, layer)
}

/// A newcomer's two requests: the first visit (a queue cookie), then the store's answer.
async fn newcomer(http: &common::Http) -> (common::Reply, Jar) {
    let mut jar = Jar::new();
    let first = http.visit(&mut jar, Method::GET, "/").await;
    assert_eq!(first.status, StatusCode::FOUND, "{}", first.text());
    let second = http.visit(&mut jar, Method::GET, "/").await;
    (second, jar)
}

/// `cmd`'s reply from `redis`.
async fn try_query<T: redis::FromRedisValue>(
    redis: &Server,
    cmd: &redis::Cmd,
) -> redis::RedisResult<T> {
    let mut c = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    cmd.query_async(&mut c).await
}

async fn query<T: redis::FromRedisValue>(redis: &Server, cmd: &redis::Cmd) -> T {
    try_query(redis, cmd).await.unwrap()
}

/// The key `name` of `room` (`twr:{room}:<name>`).
fn key(room: &str, name: &str) -> String {
    format!("twr:{{{room}}}:{name}")
}

/// `n` newcomers to a full room of capacity 1: each must wait, at the back, in order
/// (positions `first`, `first + 1`, ...); none is let in.
async fn newcomers_wait_in_order(http: &common::Http, n: u64, first: u64, what: &str) {
    for i in 0..n {
        let (reply, _) = newcomer(http).await;
        assert_eq!(
            reply.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{what}: newcomer #{i} got {}: {}",
            reply.status,
            reply.text()
        );
        assert_eq!(
            reply.json()["position"].as_u64(),
            Some(first + i),
            "{what}: newcomer #{i}: {}",
            reply.text()
        );
    }
}

/// `seq` in a form the strict reader once took for a number but Redis's `INCR` refuses (`01`,
/// `-0`, `007`, `00`): every join failed, and the default fail policy let every newcomer in.
/// Now the form reads as damage: the sequence is set past the last waiter, and each newcomer
/// waits at the back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequence_incr_refuses_heals_and_lets_nobody_in() {
    let redis = Server::start(&["--save", ""]);
    for (i, form) in ["01", "-0", "007", "00"].into_iter().enumerate() {
        let room = format!("seq{i}");
        let (http, layer) = gateway(&room, store(&redis)).await;
        let (inside, _) = newcomer(&http).await;
        assert_eq!(inside.status, StatusCode::OK, "the first visitor is let in");
        newcomers_wait_in_order(&http, 2, 1, "before the damage").await;
        redis.command(&["SET", &key(&room, "seq"), form]).unwrap();
        let what = format!("seq {form:?}");
        newcomers_wait_in_order(&http, 5, 3, &what).await;
        let stats = layer.stats().await.unwrap();
        assert_eq!(
            (stats.admitted + stats.granted, stats.waiting),
            (1, 7),
            "{what}: {stats:?}"
        );
    }
}

/// A waiter's own score in line damaged to a number no reply can carry (`1e20`, `1e300`, `inf`):
/// Redis truncated their place in the reply, the gateway read it as a protocol error, and the
/// default fail policy let that waiter in on each page load. Now the waiter is moved to the back
/// with a fresh number, and keeps waiting; nobody else loses their place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_place_is_no_number_waits_at_the_back() {
    let redis = Server::start(&["--save", ""]);
    for (i, form) in ["1e20", "1e300", "inf", "-inf", "-5"]
        .into_iter()
        .enumerate()
    {
        let room = format!("place{i}");
        let (http, layer) = gateway(&room, store(&redis)).await;
        let (inside, _) = newcomer(&http).await;
        assert_eq!(inside.status, StatusCode::OK, "the first visitor is let in");
        let (first, mut damaged) = newcomer(&http).await;
        assert_eq!(first.status, StatusCode::TOO_MANY_REQUESTS);
        let (second, mut other) = newcomer(&http).await;
        assert_eq!(second.json()["position"].as_u64(), Some(2));
        // The first waiter's member, by its place: the head of the line.
        let head: Vec<Vec<u8>> = query(
            &redis,
            redis::cmd("ZRANGE").arg(key(&room, "line")).arg(0).arg(0),
        )
        .await;
        query::<i64>(
            &redis,
            redis::cmd("ZADD")
                .arg(key(&room, "line"))
                .arg(form)
                .arg(&head[0][..]),
        )
        .await;
        let what = format!("a place of {form}");
        for load in 0..3 {
            let reply = http.visit(&mut damaged, Method::GET, "/").await;
            assert_eq!(
                reply.status,
                StatusCode::TOO_MANY_REQUESTS,
                "{what}: page load {load}: {}",
                reply.text()
            );
        }
        // At the back, behind the other waiter, who is first now.
        let reply = http.visit(&mut damaged, Method::GET, "/").await;
        assert_eq!(reply.json()["position"].as_u64(), Some(2), "{what}");
        let reply = http.visit(&mut other, Method::GET, "/").await;
        assert_eq!(reply.json()["position"].as_u64(), Some(1), "{what}");
        let stats = layer.stats().await.unwrap();
        assert_eq!((stats.admitted + stats.granted, stats.waiting), (1, 2));
    }
}

/// A junk member at either end of the line, scored so that no snapshot can carry it (`1e300`,
/// `inf` at the tail, `-inf` at the head): every sync failed. Now the sync moves it to the back
/// with a fresh number and answers, its head and checkpoints all places.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_junk_member_at_either_end_never_stops_the_snapshot() {
    let redis = Server::start(&["--save", ""]);
    let store = store(&redis);
    for (i, form) in ["1e300", "inf", "-inf"].into_iter().enumerate() {
        let room = format!("junk{i}");
        let policy = RoomPolicy::new(&room, 1);
        for _ in 0..3 {
            store
                .enter(&policy, tower_waiting_room::SessionId::random())
                .await
                .unwrap();
        }
        query::<i64>(
            &redis,
            redis::cmd("ZADD")
                .arg(key(&room, "line"))
                .arg(form)
                .arg("junk-member-0000"),
        )
        .await;
        let snap = store
            .sync(&policy, Vec::new().into())
            .await
            .unwrap_or_else(|e| panic!("{form}: the sync failed: {e}"));
        let stats = store.stats(&policy).await.unwrap();
        assert_eq!((stats.admitted, stats.waiting), (1, 3), "{form}: {stats:?}");
        assert!(snap.waiting == 3, "{form}: {snap:?}");
        let tail: Vec<String> = query(
            &redis,
            redis::cmd("ZRANGE")
                .arg(key(&room, "line"))
                .arg(-1)
                .arg(-1)
                .arg("WITHSCORES"),
        )
        .await;
        assert_eq!(tail[0], "junk-member-0000", "{form}: moved to the back");
        let score: f64 = tail[1].parse().unwrap();
        assert!(
            (1.0..=9e15).contains(&score),
            "{form}: a fresh number: {tail:?}"
        );
    }
}

/// A gateway whose clock runs an hour ahead of the server's: one of its calls used to expire
/// every slot and place (two newcomers let in while two holders were inside, three waiters
/// lost their places). Now its calls are refused (a busy store: nobody is let in by them), and
/// the room is as it was for the gateway on the server's clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_far_ahead_is_refused_never_obeyed() {
    let redis = Server::start(&["--save", ""]);
    let room = "ahead";
    let (honest, layer) = gateway(room, store(&redis)).await;
    let (inside, mut holder) = newcomer(&honest).await;
    assert_eq!(inside.status, StatusCode::OK);
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let (reply, jar) = newcomer(&honest).await;
        assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
        waiters.push(jar);
    }
    let real_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for (ahead_ms, what) in [
        (3_600_000, "an hour ahead"),
        (365 * 86_400_000, "a year ahead"),
        (1_000_000_000_000_000, "1e15 ms"),
    ] {
        let fast = RedisStore::builder()
            .url(redis.url())
            .timeout(Duration::from_secs(5))
            .clock(ManualClock::new(real_now + ahead_ms))
            .build()
            .unwrap();
        let (ahead, _) = gateway(room, fast.clone()).await;
        for i in 0..3 {
            let (reply, _) = newcomer(&ahead).await;
            assert_eq!(
                reply.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{what}: newcomer #{i} through the fast gateway: {}",
                reply.text()
            );
            assert_eq!(reply.json()["state"].as_str(), Some("busy"), "{what}");
        }
        let policy = RoomPolicy::new(room, 1);
        let e = fast.stats(&policy).await.unwrap_err();
        assert_eq!(
            e.kind(),
            tower_waiting_room::store::StoreErrorKind::Protocol,
            "{what}: {e}"
        );
        let e = fast.sync(&policy, Vec::new().into()).await.unwrap_err();
        assert!(e.to_string().contains("WRCLOCK"), "{what}: {e}");
    }
    // Nothing changed for the honest gateway: the holder inside, the three in line in order.
    let reply = honest.visit(&mut holder, Method::GET, "/").await;
    assert_eq!(reply.status, StatusCode::OK, "the holder keeps their slot");
    for (i, jar) in waiters.iter_mut().enumerate() {
        let reply = honest.visit(jar, Method::GET, "/").await;
        assert_eq!(reply.json()["position"].as_u64(), Some(i as u64 + 1));
    }
    let stats = layer.stats().await.unwrap();
    assert_eq!((stats.admitted + stats.granted, stats.waiting), (1, 3));
    // A clock within the tolerance is taken.
    let near = RedisStore::builder()
        .url(redis.url())
        .clock(tower_waiting_room::clock::SystemClock)
        .build()
        .unwrap();
    let stats = near.stats(&RoomPolicy::new(room, 1)).await.unwrap();
    assert_eq!(stats.waiting, 3);
}

/// Calls by hand with arguments a gateway of this crate never sends: each is refused with
/// `WRARGS` before anything runs, and the room is as it was (capacity `inf`, `1e10` or `2.5`
/// promoted waiters past capacity; a stats history of `inf` looped for ever inside Redis; sync
/// offsets beyond the bitmaps grew them to 32 MiB each; a line bound or a lifetime without
/// bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_out_of_bounds_are_refused_before_anything_runs() {
    let redis = Server::start(&["--save", "", "--maxmemory", "64mb"]);
    let store = store(&redis);
    let room = "args";
    let policy = RoomPolicy::new(room, 1);
    for _ in 0..4 {
        store
            .enter(&policy, tower_waiting_room::SessionId::random())
            .await
            .unwrap();
    }
    let keys = redis_keys(&store, room);
    let [line, numbers] = room_script_numbers(&policy);
    let call_at = |now: &str, function: &str, line: &str, numbers: &str, own: &[&str]| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(format!("twr_room_v11_{function}")).arg(keys.len());
        for k in &keys {
            cmd.arg(k);
        }
        cmd.arg(now).arg(line).arg(numbers).arg("0");
        for a in own {
            cmd.arg(*a);
        }
        cmd
    };
    let call = |function: &str, line: &str, numbers: &str, own: &[&str]| {
        call_at("0", function, line, numbers, own)
    };
    // A moment within the last half of an abandon epoch (15 minutes), where a sync's early
    // check-ins are read, by a manual clock (taken as it is).
    let in_window = format!("m{}", 2_000_000u64 * 900_000 + 800_000);
    let redis = &redis;
    let refused = |what: String, cmd: redis::Cmd| async move {
        let e = try_query::<redis::Value>(redis, &cmd)
            .await
            .expect_err(&what);
        assert_eq!(e.code(), Some("WRARGS"), "{what}: {e}");
    };
    for capacity in ["inf", "1e10", "2.5", "01", "-1", "4294967296"] {
        refused(
            format!("configure capacity {capacity}"),
            call(
                "configure",
                &line,
                &numbers,
                &[capacity, "-1", "-1", "-1", "0"],
            ),
        )
        .await;
    }
    for history in ["inf", "1e9", "31", "-1", "1e3"] {
        refused(
            format!("stats history {history}"),
            call("stats", &line, &numbers, &[history]),
        )
        .await;
    }
    refused(
        "admit_next of a million".to_owned(),
        call("admit_next", &line, &numbers, &["1000000"]),
    )
    .await;
    // Sync: an offset beyond the bitmaps, in each list of offsets (the early check-ins' at a
    // moment they are written).
    let beyond = "268435000 268435001 ";
    for list in 0..7 {
        let mut own = vec![""; 11];
        own[[1, 4, 5, 6, 7, 8, 10][list]] = beyond;
        refused(
            format!("sync offsets in list {list}"),
            call_at(&in_window, "sync", &line, &numbers, &own),
        )
        .await;
    }
    // Sync: offsets that are not numbers, in a list it writes (the gateway names no epoch).
    for list in 0..7 {
        let mut own = vec![""; 11];
        own[[1, 4, 5, 6, 7, 8, 10][list]] = "12 3x4 ";
        refused(
            format!("sync offsets not numbers in list {list}"),
            call_at(&in_window, "sync", &line, &numbers, &own),
        )
        .await;
    }
    // A sync of an earlier build (no early list) for a room with a schedule: the schedule lands
    // where the early list goes, and is refused there, never read as a sync without a schedule.
    let mut own = vec![""; 10];
    own.push("schedule:1800000000000:0:1:0");
    refused(
        "sync of an earlier build with a schedule".to_owned(),
        call("sync", &line, &numbers, &own),
    )
    .await;
    // One argument short (the sync of a gateway before early check-ins), or one too many.
    for n in [10, 13] {
        refused(
            format!("sync with {n} arguments of its own"),
            call("sync", &line, &numbers, &vec![""; n]),
        )
        .await;
    }
    // Sync: a session to look up with one offset instead of two, or three.
    for offsets in ["5 ", "5 6 7 "] {
        let mut own = vec![""; 11];
        (own[0], own[6]) = ("0123456789abcdef", offsets);
        refused(
            format!("sync offsets {offsets:?} for one session"),
            call("sync", &line, &numbers, &own),
        )
        .await;
    }
    // Sync: more sessions looked up only than are behind the horizon (one session, none or
    // it ahead), or a horizon of another form.
    for horizon in ["0 5 2", "1 5 1", "0 5 1 1", "0 5 x"] {
        let mut own = vec![""; 11];
        (own[0], own[9]) = ("0123456789abcdef", horizon);
        refused(
            format!("sync horizon {horizon:?} for one session"),
            call("sync", &line, &numbers, &own),
        )
        .await;
    }
    // The packed numbers: a line bound or a lifetime beyond the limits, a zero, a fraction.
    let line_parts: Vec<&str> = line.split(':').collect();
    for (i, bad) in [
        (0, "16777217"),
        (0, "0"),
        (1, "604800001"),
        (2, "1e9"),
        (1, "01"),
    ] {
        let mut parts = line_parts.clone();
        parts[i] = bad;
        refused(
            format!("line_numbers {i} = {bad}"),
            call("stats", &parts.join(":"), &numbers, &["0"]),
        )
        .await;
    }
    let room_parts: Vec<&str> = numbers.split(':').collect();
    for (i, bad) in [
        (0, "inf"),
        (0, "0"),
        (2, "604800001"),
        (3, "2.5"),
        (8, "100001"),
    ] {
        let mut parts = room_parts.clone();
        parts[i] = bad;
        refused(
            format!("room_numbers {i} = {bad}"),
            call("stats", &line, &parts.join(":"), &["0"]),
        )
        .await;
    }
    // Nothing moved: one inside, three waiting, and no bitmap grew.
    let stats = store.stats(&policy).await.unwrap();
    assert_eq!((stats.admitted + stats.granted, stats.waiting), (1, 3));
    let used: String = query(redis, redis::cmd("INFO").arg("memory")).await;
    let bytes: u64 = used
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(bytes < 16 << 20, "memory grew to {bytes} bytes");
    // The crate's own calls still pass.
    assert!(store.stats(&policy).await.is_ok());
}

/// `due` damaged to a time far ahead (a year, `9e15`): housekeeping never ran, and slots never
/// freed themselves. Now a `due` later than any slot a call could give is none: the expired
/// slots go, and the head of the line is let in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_far_ahead_never_keeps_slots_from_freeing() {
    let redis = Server::start(&["--save", ""]);
    let clock = ManualClock::new(1_800_000_000_000);
    let store = RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(5))
        .manual_clock(clock.clone())
        .build()
        .unwrap();
    for (i, due) in ["9000000000000000", "9e15", "1831536000000"]
        .into_iter()
        .enumerate()
    {
        let room = format!("due{i}");
        let policy = RoomPolicy::new(&room, 1).with_ttls(
            Duration::from_secs(4),
            Duration::from_secs(4),
            Duration::from_secs(60),
        );
        let holder = tower_waiting_room::SessionId::random();
        assert!(matches!(
            store.enter(&policy, holder).await.unwrap(),
            tower_waiting_room::store::Decision::Admitted { .. }
        ));
        let waiter = tower_waiting_room::SessionId::random();
        store.enter(&policy, waiter).await.unwrap();
        redis
            .command(&["HSET", &key(&room, "settings"), "due", due])
            .unwrap();
        clock.advance(Duration::from_secs(5));
        let got = store.poll(&policy, waiter).await.unwrap();
        assert!(
            matches!(got, tower_waiting_room::store::Decision::Admitted { .. }),
            "due {due}: the waiter is still waiting after the slot ended: {got:?}"
        );
    }
}

/// A room of capacity 2 over `redis` (refresh 1 s), served, with its two holders inside.
async fn full_room_of_two(
    redis: &Server,
    room: &str,
) -> (common::Http, WaitingRoomLayer, Vec<Jar>) {
    let layer = WaitingRoomLayer::builder(room)
        .capacity(2)
        .secret(SECRET)
        .secure_cookies(false)
        .refresh(Duration::from_secs(1))
        .store(store(redis))
        .build()
        .expect("the room builds");
    let http = serve(app(layer.clone())).await;
    let mut holders = Vec::new();
    for _ in 0..2 {
        let (reply, jar) = newcomer(&http).await;
        assert_eq!(reply.status, StatusCode::OK, "the first two are let in");
        holders.push(jar);
    }
    (http, layer, holders)
}

/// Past refresh, each holder's request is a heartbeat, which finds their slot gone (its key was
/// damaged) and claims it again: every holder stays in.
async fn holders_claim_their_slots_again(http: &common::Http, holders: &mut [Jar], what: &str) {
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    for (h, jar) in holders.iter_mut().enumerate() {
        let reply = http.visit(jar, Method::GET, "/").await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "{what}: holder #{h}: {}",
            reply.text()
        );
    }
}

/// `active` of the wrong type (a hand edit, another program): repair deleted it, and for one
/// refresh four people were inside a room of capacity 2, the two holders on their tokens and
/// two newcomers on the freed capacity. Now the slots are rebuilt: nobody new is let in while
/// the holders' heartbeats claim their slots again, and they stay in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_active_is_rebuilt_from_its_holders_never_handed_to_newcomers() {
    let redis = Server::start(&["--save", ""]);
    for (i, part) in ["active", "granted"].into_iter().enumerate() {
        let room = format!("rebuilt{i}");
        let (http, layer, mut holders) = full_room_of_two(&redis, &room).await;
        redis
            .command(&["SET", &key(&room, part), "garbage"])
            .unwrap();
        let what = format!("{part} of the wrong type");
        newcomers_wait_in_order(&http, 3, 1, &what).await;
        holders_claim_their_slots_again(&http, &mut holders, &what).await;
        newcomers_wait_in_order(&http, 2, 4, &what).await;
        let stats = layer.stats().await.unwrap();
        assert_eq!(
            (stats.admitted + stats.granted, stats.waiting),
            (2, 5),
            "{what}: {stats:?}"
        );
    }
}

/// The tickets' calls hold to the server's clock and to their bounds as the room's calls do: a
/// gateway an hour ahead found every ticket record past its expiry and minted a second ticket
/// for an admission whose ticket was used (a second pass through `/checkout`). Now its mint is
/// refused (`WRCLOCK`, a busy store), and a call by hand with a nonce, an expiry or a renewal
/// flag a gateway never sends is refused (`WRARGS`) before the record is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticket_calls_hold_to_the_servers_clock_and_bounds() {
    use tower_waiting_room::store::{
        Decision, MintFor, Minted, Redeemed, StoreErrorKind, TicketNonce, TicketStore,
    };
    let redis = Server::start(&["--save", ""]);
    let honest = store(&redis);
    let policy = RoomPolicy::new("tickets", 1);
    let s = tower_waiting_room::SessionId::random();
    let Decision::Admitted { expires_at_ms } = honest.enter(&policy, s).await.unwrap() else {
        panic!("the first visitor is let in");
    };
    let Minted::Ticket { nonce, .. } = honest
        .mint_ticket(
            &policy,
            s,
            TicketNonce::random(),
            expires_at_ms,
            MintFor::Admission,
        )
        .await
        .unwrap()
    else {
        panic!("the admission's first ticket");
    };
    assert_eq!(
        honest.redeem_ticket(&policy, s, nonce).await.unwrap(),
        Redeemed::Accepted
    );
    let real_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let ahead = RedisStore::builder()
        .url(redis.url())
        .timeout(Duration::from_secs(5))
        .clock(ManualClock::new(real_now + 3_600_000))
        .build()
        .unwrap();
    for mint_for in [MintFor::Admission, MintFor::Renewal] {
        let e = ahead
            .mint_ticket(
                &policy,
                s,
                TicketNonce::random(),
                real_now + 3_660_000,
                mint_for,
            )
            .await
            .expect_err("a mint an hour ahead");
        assert_eq!(e.kind(), StoreErrorKind::Protocol, "{e}");
        assert!(e.to_string().contains("WRCLOCK"), "{e}");
    }
    let e = ahead
        .redeem_ticket(&policy, s, nonce)
        .await
        .expect_err("a redeem an hour ahead");
    assert!(e.to_string().contains("WRCLOCK"), "{e}");
    // The used ticket is still used, and no second one was made.
    assert_eq!(
        honest.redeem_ticket(&policy, s, nonce).await.unwrap(),
        Redeemed::Used
    );
    assert_eq!(
        honest
            .mint_ticket(
                &policy,
                s,
                TicketNonce::random(),
                expires_at_ms,
                MintFor::Admission
            )
            .await
            .unwrap(),
        Minted::Used
    );
    // By hand: each argument a gateway never sends is refused before the record is read.
    let ticket_key = format!("twr:{{tickets}}:tk:{s}");
    let nonce_hex = "0a".repeat(16);
    let in_a_minute = (real_now + 60_000).to_string();
    let eight_days = (real_now + 8 * 86_400_000).to_string();
    let mint = |args: [&str; 4]| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg("twr_room_v11_ticket_mint").arg(1).arg(&ticket_key);
        for a in args {
            cmd.arg(a);
        }
        cmd
    };
    for (what, args, code) in [
        (
            "a clock a year ahead",
            [&nonce_hex, "1", &in_a_minute, "0"],
            "WRCLOCK",
        ),
        (
            "a clock of inf",
            [&nonce_hex, "inf", &in_a_minute, "0"],
            "WRCLOCK",
        ),
        ("a short nonce", ["0a", "0", &in_a_minute, "0"], "WRARGS"),
        (
            "an uppercase nonce",
            [&"0A".repeat(16), "0", &in_a_minute, "0"],
            "WRARGS",
        ),
        (
            "an expiry eight days ahead",
            [&nonce_hex, "0", &eight_days, "0"],
            "WRARGS",
        ),
        (
            "an expiry of 1e15",
            [&nonce_hex, "0", "1e15", "0"],
            "WRARGS",
        ),
        (
            "a renewal of 2",
            [&nonce_hex, "0", &in_a_minute, "2"],
            "WRARGS",
        ),
    ] {
        let e = try_query::<redis::Value>(&redis, &mint(args))
            .await
            .expect_err(what);
        assert_eq!(e.code(), Some(code), "{what}: {e}");
    }
    // Nothing was read or written: the record is the used one.
    assert_eq!(
        honest.redeem_ticket(&policy, s, nonce).await.unwrap(),
        Redeemed::Used
    );
}

/// A waiter whose score was set to `-inf` sorts first in line, but it is no one's turn: a
/// promotion (a slot freed) and an operator's `admit_next` used to grant it ahead of everyone
/// who waited (the chaos run's corruption fault found it). Now the head whose score is no place
/// goes to the back, and the true head of the line is let in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_scored_minus_infinity_is_never_let_in_ahead() {
    use tower_waiting_room::store::Decision;
    use tower_waiting_room::SessionId;
    let redis = Server::start(&["--save", ""]);
    let store = store(&redis);
    for by_operator in [false, true] {
        let room = format!("minusinf{}", u8::from(by_operator));
        let policy = RoomPolicy::new(&room, 1);
        let holder = SessionId::random();
        assert!(matches!(
            store.enter(&policy, holder).await.unwrap(),
            Decision::Admitted { .. }
        ));
        let line: Vec<SessionId> = (0..3).map(|_| SessionId::random()).collect();
        for &s in &line {
            assert!(matches!(
                store.enter(&policy, s).await.unwrap(),
                Decision::Waiting { .. }
            ));
        }
        let _: i64 = query(
            &redis,
            redis::cmd("ZADD")
                .arg(key(&room, "line"))
                .arg("XX")
                .arg("-inf")
                .arg(tower_waiting_room::__private::redis_member(&line[2])),
        )
        .await;
        let what = if by_operator {
            "admit_next"
        } else {
            "a release"
        };
        if by_operator {
            assert_eq!(store.admit_next(&policy, 1).await.unwrap(), 1, "{what}");
        } else {
            assert!(store.release(&policy, holder).await.unwrap(), "{what}");
        }
        assert!(
            matches!(
                store.poll(&policy, line[0]).await.unwrap(),
                Decision::Admitted { .. }
            ),
            "{what}: the head of the line is let in"
        );
        for (i, &s) in line[1..].iter().enumerate() {
            match store.poll(&policy, s).await.unwrap() {
                Decision::Waiting { position, .. } => {
                    assert_eq!(position, i as u64 + 1, "{what}: waiter #{}", i + 2)
                }
                other => panic!("{what}: waiter #{} got {other:?}", i + 2),
            }
        }
    }
}

/// A rebuild of the slots under way (after `active` of the wrong type), its end damaged (`01`,
/// text, a year ahead): it used to end at once, and the room let newcomers in while the
/// holders were still inside on their tokens (81 inside a room of 80 in the chaos run). Now a
/// rebuild whose end cannot be read starts again: the newcomers wait, the holders keep their
/// slots, and nobody is over capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_rebuild_is_never_ended_early() {
    let redis = Server::start(&["--save", ""]);
    let year_ahead = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 365 * 86_400_000)
        .to_string();
    for (i, form) in ["01", "x", year_ahead.as_str(), "1e3"]
        .into_iter()
        .enumerate()
    {
        let room = format!("rebuild{i}");
        let (http, layer, mut holders) = full_room_of_two(&redis, &room).await;
        redis
            .command(&["SET", &key(&room, "active"), "garbage"])
            .unwrap();
        let what = format!("rebuild damaged to {form:?}");
        newcomers_wait_in_order(&http, 1, 1, &what).await;
        redis
            .command(&["HSET", &key(&room, "settings"), "rebuild", form])
            .unwrap();
        newcomers_wait_in_order(&http, 2, 2, &what).await;
        holders_claim_their_slots_again(&http, &mut holders, &what).await;
        newcomers_wait_in_order(&http, 1, 4, &what).await;
        let stats = layer.stats().await.unwrap();
        assert_eq!(
            (stats.admitted + stats.granted, stats.waiting),
            (2, 4),
            "{what}: {stats:?}"
        );
    }
}
