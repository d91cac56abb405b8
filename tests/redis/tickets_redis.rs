//! Single-use tickets on real Redis: the store-level twin of "50 concurrent uses of one ticket
//! across 3 gateways: exactly one 2xx". Three `RedisStore`s (three gateways: each its own
//! connection, no clock override, so Redis `TIME` is the one clock) share one `redis-server`,
//! and a 3-node Redis Cluster.

use crate::redis_harness;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::AsyncCommands;
use tower_waiting_room::store::{
    Decision, MintFor, Minted, Redeemed, RedisStore, Store, TicketNonce, TicketStore,
};
use tower_waiting_room::{RoomPolicy, SessionId};

const GATEWAYS: usize = 3;
const USES: usize = 50;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A room of its own, so runs and tests never share a ticket.
fn policy() -> RoomPolicy {
    RoomPolicy::new(&format!("tk-{}", SessionId::random()), 10)
}

fn single_gateways() -> Vec<RedisStore> {
    let url = redis_harness::shared_server().url();
    (0..GATEWAYS)
        .map(|_| {
            RedisStore::builder()
                .url(url.clone())
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap()
        })
        .collect()
}

async fn cluster_gateways() -> Vec<RedisStore> {
    let cluster = tokio::task::spawn_blocking(redis_harness::shared_cluster)
        .await
        .unwrap();
    (0..GATEWAYS)
        .map(|_| {
            RedisStore::builder()
                .cluster_nodes(cluster.urls())
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap()
        })
        .collect()
}

/// `s` admitted through the first gateway, and its ticket minted there, expiring with the slot
/// (as a room does at admission).
async fn mint(gateways: &[RedisStore], p: &RoomPolicy, s: SessionId) -> TicketNonce {
    let expires = match gateways[0].enter(p, s).await.unwrap() {
        Decision::Admitted { expires_at_ms } => expires_at_ms,
        other => panic!("not admitted: {other:?}"),
    };
    let fresh = TicketNonce::random();
    let minted = gateways[0].mint_ticket(p, s, fresh, expires, MintFor::Admission);
    match minted.await.unwrap() {
        Minted::Ticket { nonce, .. } => {
            assert_eq!(nonce, fresh, "a first mint keeps the nonce it was given");
            nonce
        }
        other => panic!("a first mint answered {other:?}"),
    }
}

/// `USES` concurrent redeems of one ticket, spread over the gateways: how many were accepted
/// and how many told "used".
async fn concurrent_redeems(gateways: &[RedisStore]) -> (usize, usize) {
    let p = policy();
    let s = SessionId::random();
    let nonce = mint(gateways, &p, s).await;
    let mut uses = tokio::task::JoinSet::new();
    for i in 0..USES {
        let (store, p) = (gateways[i % GATEWAYS].clone(), p.clone());
        uses.spawn(async move { store.redeem_ticket(&p, s, nonce).await.unwrap() });
    }
    let (mut accepted, mut used) = (0, 0);
    while let Some(answer) = uses.join_next().await {
        match answer.unwrap() {
            Redeemed::Accepted => accepted += 1,
            Redeemed::Used => used += 1,
            other => panic!("a concurrent redeem answered {other:?}"),
        }
    }
    // And after the race, every gateway says "used".
    for store in gateways {
        assert_eq!(
            store.redeem_ticket(&p, s, nonce).await.unwrap(),
            Redeemed::Used
        );
    }
    (accepted, used)
}

/// Concurrent mints with different fresh nonces and expiries through every gateway: all answer
/// one ticket (one nonce), each with an expiry no earlier than it asked for, and the record
/// ends at the latest expiry asked.
async fn concurrent_mints_agree(gateways: &[RedisStore]) {
    const MINTS: u64 = 30;
    let p = policy();
    let s = SessionId::random();
    let expires = now_ms() + 60_000;
    let mut mints = tokio::task::JoinSet::new();
    for i in 0..MINTS {
        let (store, p) = (gateways[i as usize % GATEWAYS].clone(), p.clone());
        mints.spawn(async move {
            let asked = expires + i;
            let minted = store
                .mint_ticket(&p, s, TicketNonce::random(), asked, MintFor::Admission)
                .await
                .unwrap();
            (asked, minted)
        });
    }
    let mut nonces = Vec::new();
    while let Some(answer) = mints.join_next().await {
        match answer.unwrap() {
            (
                asked,
                Minted::Ticket {
                    nonce,
                    expires_at_ms,
                },
            ) => {
                assert!(expires_at_ms >= asked, "{expires_at_ms} < {asked}");
                nonces.push(nonce);
            }
            (_, other) => panic!("a concurrent mint answered {other:?}"),
        }
    }
    assert!(
        nonces.iter().all(|n| *n == nonces[0]),
        "mints disagree: {nonces:?}"
    );
    let last = gateways[0]
        .mint_ticket(&p, s, TicketNonce::random(), expires, MintFor::Renewal)
        .await
        .unwrap();
    let want = Minted::Ticket {
        nonce: nonces[0],
        expires_at_ms: expires + MINTS - 1,
    };
    assert_eq!(last, want, "the latest expiry asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_uses_over_three_gateways_accept_exactly_one() {
    let gateways = single_gateways();
    for _ in 0..5 {
        assert_eq!(concurrent_redeems(&gateways).await, (1, USES - 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_fifty_concurrent_uses_over_three_gateways_accept_exactly_one() {
    let gateways = cluster_gateways().await;
    for _ in 0..5 {
        assert_eq!(concurrent_redeems(&gateways).await, (1, USES - 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_mints_over_three_gateways_agree_on_one_ticket() {
    concurrent_mints_agree(&single_gateways()).await;
    concurrent_mints_agree(&cluster_gateways().await).await;
}

/// The ticket key: in the room's hash tag (so a Cluster keeps it in the room's slot), with a
/// TTL at the slot's expiry, extended by a later mint, kept (used) after a redeem for at least
/// the slot's life, ended (upper-cased, TTL kept) by a release; damage (a key of another type,
/// a value the script did not write) does not stop a release, and once no slot is held it reads
/// as used and is dropped, so the session's next admission gets a new ticket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticket_keys_live_with_the_room_expire_and_heal() {
    let server = redis_harness::shared_server();
    let store = RedisStore::builder()
        .url(server.url())
        .prefix("tktest")
        .build()
        .unwrap();
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let p = policy();
    let s = SessionId::random();
    let key = format!("tktest:{{{}}}:tk:{s}", p.room);
    let admitted = store.enter(&p, s).await.unwrap();
    let Decision::Admitted {
        expires_at_ms: slot,
    } = admitted
    else {
        panic!("{admitted:?}")
    };
    let expires = now_ms() + 30_000;
    let nonce = TicketNonce::random();
    store
        .mint_ticket(&p, s, nonce, expires, MintFor::Admission)
        .await
        .unwrap();
    let value: String = conn.get(&key).await.unwrap();
    assert_eq!(value, format!("n:{nonce}:{expires}"));
    let ttl: i64 = conn.pttl(&key).await.unwrap();
    assert!((25_000..=30_000).contains(&ttl), "PTTL {ttl}");
    // A later expiry (the slot renewed) extends the value and the TTL; an earlier one does not.
    let later = expires + 20_000;
    for asked in [later, expires] {
        let minted = store
            .mint_ticket(&p, s, TicketNonce::random(), asked, MintFor::Renewal)
            .await
            .unwrap();
        assert_eq!(
            minted,
            Minted::Ticket {
                nonce,
                expires_at_ms: later
            }
        );
        let value: String = conn.get(&key).await.unwrap();
        assert_eq!(value, format!("n:{nonce}:{later}"));
        let ttl: i64 = conn.pttl(&key).await.unwrap();
        assert!((45_000..=50_000).contains(&ttl), "extended, PTTL {ttl}");
    }

    // Used: kept at least as long as the slot it was used in.
    assert!(slot > later, "the slot ({slot}) outlives the test's record");
    // The script sets the TTL to the slot's end as seen at the use, so it can be no longer
    // than the slot's end as seen just before the call (read before, not after: on a loaded
    // machine milliseconds pass between the use and this test's next clock read).
    let before_use = now_ms();
    assert_eq!(
        store.redeem_ticket(&p, s, nonce).await.unwrap(),
        Redeemed::Accepted
    );
    let value: String = conn.get(&key).await.unwrap();
    assert_eq!(value, format!("u:{nonce}:{slot}"));
    let ttl: i64 = conn.pttl(&key).await.unwrap();
    let until_slot = (slot - before_use) as i64;
    assert!(
        (until_slot - 5_000..=until_slot).contains(&ttl),
        "used, PTTL {ttl}"
    );

    // Released: the room's script ends the record in the same step (`U`, TTL kept).
    assert!(store.release(&p, s).await.unwrap());
    let value: String = conn.get(&key).await.unwrap();
    assert_eq!(value, format!("U:{nonce}:{slot}"));
    let kept: i64 = conn.pttl(&key).await.unwrap();
    assert!((ttl - 5_000..=ttl).contains(&kept), "ended, PTTL {kept}");
    assert_eq!(
        store.redeem_ticket(&p, s, nonce).await.unwrap(),
        Redeemed::Used
    );

    // In a Cluster, the ticket key hashes to the room's slot.
    let cluster = tokio::task::spawn_blocking(redis_harness::shared_cluster)
        .await
        .unwrap();
    let slot = |k: &str| {
        let out = cluster.nodes[0]
            .command(&["CLUSTER", "KEYSLOT", k])
            .unwrap();
        out.trim().trim_start_matches(':').parse::<u16>().unwrap()
    };
    let room_key = format!("tktest:{{{}}}:line", p.room);
    assert_eq!(slot(&key), slot(&room_key));

    // Damage: a hash under the key, then a value of no known shape. Each reads as used; with no
    // slot held (released above), no admission goes on, so the redeem drops it, and the next
    // admission's mint writes a fresh record.
    for damage in ["hash", "garbage"] {
        let damaged = || async {
            let mut conn = conn.clone();
            let _: () = conn.del(&key).await.unwrap();
            if damage == "hash" {
                let _: () = conn.hset(&key, "f", "1").await.unwrap();
            } else {
                let _: () = conn.set(&key, "n:zz:not-a-time").await.unwrap();
            }
        };
        // A release (or a ban) with damage under the ticket key still answers.
        damaged().await;
        assert!(!store.release(&p, s).await.unwrap(), "{damage}");
        damaged().await;
        assert_eq!(
            store.redeem_ticket(&p, s, nonce).await.unwrap(),
            Redeemed::Used,
            "{damage}"
        );
        let gone: bool = conn.exists(&key).await.unwrap();
        assert!(!gone, "{damage}: dropped, no slot being held");
        let fresh = TicketNonce::random();
        let minted = store
            .mint_ticket(&p, s, fresh, expires, MintFor::Admission)
            .await
            .unwrap();
        assert_eq!(
            minted,
            Minted::Ticket {
                nonce: fresh,
                expires_at_ms: expires
            },
            "{damage}"
        );
        let _: () = conn.del(&key).await.unwrap();
    }
}

/// A ticket record whose expiry is damaged (20 digits: a lax reader takes it for a time 3
/// billion years ahead) is never good forever, nor no ticket: it reads as used, and is written
/// back as a used record that ends with the slot. The session's next admission gets a new
/// ticket.
#[tokio::test]
async fn a_ticket_with_a_damaged_expiry_reads_as_used_until_the_slot_ends() {
    let server = redis_harness::shared_server();
    let store = RedisStore::builder()
        .url(server.url())
        .prefix("tkdamage")
        .build()
        .unwrap();
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let p = policy();
    let s = SessionId::random();
    let key = format!("tkdamage:{{{}}}:tk:{s}", p.room);
    let Decision::Admitted { expires_at_ms } = store.enter(&p, s).await.unwrap() else {
        panic!("not admitted")
    };
    let nonce = TicketNonce::random();
    store
        .mint_ticket(&p, s, nonce, expires_at_ms, MintFor::Admission)
        .await
        .unwrap();
    let _: () = conn
        .set(&key, format!("n:{nonce}:99999999999999999999"))
        .await
        .unwrap();
    let before = now_ms();
    assert_eq!(
        store.redeem_ticket(&p, s, nonce).await.unwrap(),
        Redeemed::Used
    );
    let value: String = conn.get(&key).await.unwrap();
    assert_eq!(
        value,
        format!("u:0:{expires_at_ms}"),
        "written back as used"
    );
    let ttl: i64 = conn.pttl(&key).await.unwrap();
    assert!(
        (1..=(expires_at_ms - before) as i64).contains(&ttl),
        "ends with the slot: PTTL {ttl}"
    );
    for mint_for in [MintFor::Renewal, MintFor::Admission] {
        let minted = store
            .mint_ticket(&p, s, TicketNonce::random(), expires_at_ms, mint_for)
            .await
            .unwrap();
        assert_eq!(minted, Minted::Used, "{mint_for:?}");
    }
    assert!(store.release(&p, s).await.unwrap());
    let Decision::Admitted { expires_at_ms } = store.enter(&p, s).await.unwrap() else {
        panic!("not admitted again")
    };
    let fresh = TicketNonce::random();
    assert_eq!(
        store
            .mint_ticket(&p, s, fresh, expires_at_ms, MintFor::Admission)
            .await
            .unwrap(),
        Minted::Ticket {
            nonce: fresh,
            expires_at_ms
        }
    );
    assert_eq!(
        store.redeem_ticket(&p, s, fresh).await.unwrap(),
        Redeemed::Accepted
    );
}

/// What may become of a used ticket's record behind the functions' backs: a value they did not
/// write (its expiry, state or nonce of another shape, an empty string), a key of another type,
/// or no key at all. The name, and the commands that do it to `key` (which holds
/// `u:<nonce>:<expiry>`).
fn record_damage(
    key: &str,
    nonce: TicketNonce,
    expires: u64,
) -> Vec<(&'static str, Vec<redis::Cmd>)> {
    let set = |value: String| vec![redis::cmd("SET").arg(key).arg(value).clone()];
    let upper = nonce.to_string().to_ascii_uppercase();
    let hash = vec![
        redis::cmd("DEL").arg(key).clone(),
        redis::cmd("HSET")
            .arg(key)
            .arg("u")
            .arg(nonce.to_string())
            .clone(),
    ];
    vec![
        ("expiry .0", set(format!("u:{nonce}:.0"))),
        ("expiry 1e15", set(format!("u:{nonce}:1e15"))),
        (
            "expiry of 20 digits",
            set(format!("u:{nonce}:99999999999999999999")),
        ),
        ("state x", set(format!("x:{nonce}:{expires}"))),
        ("nonce in capitals", set(format!("u:{upper}:{expires}"))),
        ("empty string", set(String::new())),
        ("a hash", hash),
        ("deleted", vec![redis::cmd("DEL").arg(key).clone()]),
    ]
}

/// Does `form` of [`record_damage`] to `key`; its name.
async fn damage_record(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    nonce: TicketNonce,
    expires: u64,
    form: usize,
) -> &'static str {
    let (what, cmds) = record_damage(key, nonce, expires).swap_remove(form);
    for cmd in cmds {
        let _: () = cmd.query_async(conn).await.unwrap();
    }
    what
}

/// A used ticket whose record is then damaged or deleted is never a second ticket: at the
/// visitor's next heartbeat the room mints again (a renewal, the admission going on), which
/// answers "used" rather than a fresh ticket, and writes back a used record that lives with the
/// slot; every redeem of the session's tickets is then told "used", never accepted. Once the
/// slot ends, the session's next admission gets a new ticket, which passes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_ticket_damaged_or_deleted_is_never_minted_again() {
    let server = redis_harness::shared_server();
    let store = RedisStore::builder()
        .url(server.url())
        .prefix("tkused")
        .build()
        .unwrap();
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let p = policy();
    let forms = record_damage("", TicketNonce::random(), 0).len();
    assert_eq!(forms, 8);
    for form in 0..forms {
        let s = SessionId::random();
        let key = format!("tkused:{{{}}}:tk:{s}", p.room);
        let Decision::Admitted { expires_at_ms } = store.enter(&p, s).await.unwrap() else {
            panic!("not admitted")
        };
        let nonce = TicketNonce::random();
        let first = store
            .mint_ticket(&p, s, nonce, expires_at_ms, MintFor::Admission)
            .await
            .unwrap();
        assert!(matches!(first, Minted::Ticket { .. }), "{first:?}");
        assert_eq!(
            store.redeem_ticket(&p, s, nonce).await.unwrap(),
            Redeemed::Accepted
        );
        let what = damage_record(&mut conn, &key, nonce, expires_at_ms, form).await;

        // The heartbeat, then its mint: "used", never a fresh ticket.
        let Decision::Admitted { expires_at_ms } = store.heartbeat(&p, s).await.unwrap() else {
            panic!("{what}: the heartbeat lost the slot")
        };
        let before = now_ms();
        let stray = TicketNonce::random();
        let minted = store
            .mint_ticket(&p, s, stray, expires_at_ms, MintFor::Renewal)
            .await
            .unwrap();
        assert_eq!(minted, Minted::Used, "{what}: a second ticket");
        for used in [nonce, stray, nonce] {
            let redeemed = store.redeem_ticket(&p, s, used).await.unwrap();
            assert_eq!(
                redeemed,
                Redeemed::Used,
                "{what}: the checkout passed again"
            );
        }
        // Kept, well-formed, with the slot's lifetime, so the answer sticks.
        let value: String = conn.get(&key).await.unwrap();
        assert_eq!(value, format!("u:0:{expires_at_ms}"), "{what}");
        let ttl: i64 = conn.pttl(&key).await.unwrap();
        assert!(
            (1..=(expires_at_ms - before) as i64).contains(&ttl),
            "{what}: PTTL {ttl}"
        );
        for mint_for in [MintFor::Renewal, MintFor::Admission] {
            let again = store
                .mint_ticket(&p, s, TicketNonce::random(), expires_at_ms, mint_for)
                .await
                .unwrap();
            assert_eq!(again, Minted::Used, "{what}: {mint_for:?}");
        }

        // The slot ends; the next admission gets a new ticket, which passes once.
        assert!(store.release(&p, s).await.unwrap(), "{what}");
        assert_eq!(
            store.redeem_ticket(&p, s, nonce).await.unwrap(),
            Redeemed::Used,
            "{what}"
        );
        let Decision::Admitted { expires_at_ms } = store.enter(&p, s).await.unwrap() else {
            panic!("{what}: not admitted again")
        };
        let fresh = TicketNonce::random();
        let next = store
            .mint_ticket(&p, s, fresh, expires_at_ms, MintFor::Admission)
            .await
            .unwrap();
        let want = Minted::Ticket {
            nonce: fresh,
            expires_at_ms,
        };
        assert_eq!(next, want, "{what}: the next admission's ticket");
        assert_eq!(
            store.redeem_ticket(&p, s, fresh).await.unwrap(),
            Redeemed::Accepted
        );
        assert_eq!(
            store.redeem_ticket(&p, s, fresh).await.unwrap(),
            Redeemed::Used
        );
        assert!(store.release(&p, s).await.unwrap());
    }
}

/// A used ticket's record damaged, then presented at a gate before any mint: told "used" (a
/// record that cannot be read may have been used), and written back as a used record that ends
/// with the slot, so a mint after it answers "used" too.
#[tokio::test]
async fn a_damaged_record_redeemed_before_any_mint_is_used() {
    let server = redis_harness::shared_server();
    let store = RedisStore::builder()
        .url(server.url())
        .prefix("tkredeem")
        .build()
        .unwrap();
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let p = policy();
    let forms = record_damage("", TicketNonce::random(), 0).len();
    // All but the deleted record: a record that is gone holds no ticket to tell of
    // (`Unknown`, refused all the same), and the mints above cover its loss.
    for form in 0..forms - 1 {
        let s = SessionId::random();
        let key = format!("tkredeem:{{{}}}:tk:{s}", p.room);
        let Decision::Admitted { expires_at_ms } = store.enter(&p, s).await.unwrap() else {
            panic!("not admitted")
        };
        let nonce = TicketNonce::random();
        store
            .mint_ticket(&p, s, nonce, expires_at_ms, MintFor::Admission)
            .await
            .unwrap();
        let what = damage_record(&mut conn, &key, nonce, expires_at_ms, form).await;
        for _ in 0..2 {
            let redeemed = store.redeem_ticket(&p, s, nonce).await.unwrap();
            assert_eq!(redeemed, Redeemed::Used, "{what}");
        }
        let value: String = conn.get(&key).await.unwrap();
        assert_eq!(value, format!("u:0:{expires_at_ms}"), "{what}");
        let minted = store
            .mint_ticket(
                &p,
                s,
                TicketNonce::random(),
                expires_at_ms,
                MintFor::Renewal,
            )
            .await
            .unwrap();
        assert_eq!(minted, Minted::Used, "{what}");
    }
}

/// The tickets are functions of the room's library (`twr_room_v11_ticket_mint`, `_redeem`): a
/// server that lost it (`FUNCTION FLUSH`, a restart without it, a failover to a replica that
/// missed the load) gets the library loaded by the next ticket call, which goes on, as a room
/// call does; and no ticket call goes by the script cache (`EVALSHA`, `SCRIPT LOAD`).
#[tokio::test]
async fn ticket_calls_load_the_library_a_server_lost() {
    let server = redis_harness::Server::start(&[]);
    let store = RedisStore::builder()
        .url(server.url())
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let p = policy();
    let s = SessionId::random();
    let Decision::Admitted { expires_at_ms } = store.enter(&p, s).await.unwrap() else {
        panic!("not admitted")
    };
    server.command(&["FUNCTION", "FLUSH"]).unwrap();
    let nonce = TicketNonce::random();
    assert_eq!(
        store
            .mint_ticket(&p, s, nonce, expires_at_ms, MintFor::Admission)
            .await
            .unwrap(),
        Minted::Ticket {
            nonce,
            expires_at_ms
        },
        "a mint loads the library"
    );
    server.command(&["FUNCTION", "FLUSH"]).unwrap();
    assert_eq!(
        store.redeem_ticket(&p, s, nonce).await.unwrap(),
        Redeemed::Accepted,
        "a redeem loads the library"
    );
    let m = store.metrics();
    assert_eq!((m.misconfigured, m.protocol_errors), (0, 0), "{m:?}");
    for command in ["evalsha", "eval", "script|load"] {
        assert_eq!(
            server.info_field("commandstats", &format!("cmdstat_{command}")),
            None,
            "{command}"
        );
    }
    // The enter, and each ticket call twice (function not found, then again once loaded).
    let fcalls = server.info_field("commandstats", "cmdstat_fcall").unwrap();
    let calls: u64 = fcalls
        .split(',')
        .find_map(|kv| kv.strip_prefix("calls="))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(calls >= 3, "{fcalls}");
}
