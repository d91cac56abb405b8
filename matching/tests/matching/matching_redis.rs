//! `RedisMatchStore` against real servers (a single Redis and a 3-node Redis Cluster, started by
//! the harness): the rules step by step, a differential run against `MemoryMatchStore` on the
//! same clock, and concurrent joins of the same users to several queues.

mod claims;
mod concurrent;
mod damaged;
mod differential;
mod evalsha;
mod rules;

use crate::redis_harness;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tower_waiting_room::store::RedisStore;
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::{MatchPolicy, MatchStore, RedisMatchStore};
use tower_waiting_room_matching::{
    Group, GroupSize, JoinOutcome, MatchState, Queue, Topic, UserId,
};

use claims::{a_claim_in_flight_is_completed_never_idle, a_finished_claim_is_replaced};
use concurrent::concurrent_joins_never_put_anyone_in_two_groups;
use damaged::damaged_numbers_are_read_as_missing_and_repaired;
use differential::{differential_against_the_memory_store, differential_bounded_work_per_step};
use evalsha::the_script_before_the_library_shares_a_queue;
use rules::{
    a_group_undone_long_after_its_expiry_drops_its_members, confirm_keeps_the_record_then_idle,
    conflict_across_queues_changes_nothing, fallback_forms_a_smaller_group_after_the_wait,
    pair_forms_in_the_second_join, status_and_leave_follow_the_user, timeout_drops_a_waiter,
    undone_group_goes_back_to_the_front_in_order,
};

const START_MS: u64 = 1_700_000_000_000;

/// A fresh prefix per store, so tests sharing a server never see each other's keys.
fn prefix() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "mt{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[derive(Clone, Copy, Debug)]
enum Backend {
    Single,
    Cluster,
}

/// A store on `backend` sharing `clock`, and its key prefix.
async fn store(backend: Backend, clock: &ManualClock) -> (RedisMatchStore, String) {
    let prefix = prefix();
    let builder = match backend {
        Backend::Single => RedisStore::builder().url(redis_harness::shared_server().url()),
        Backend::Cluster => {
            let cluster = tokio::task::spawn_blocking(redis_harness::shared_cluster)
                .await
                .unwrap();
            RedisStore::builder().cluster_nodes(cluster.urls())
        }
    };
    let room = builder
        .prefix(prefix.clone())
        .timeout(Duration::from_secs(5))
        .manual_clock(clock.clone())
        .build()
        .expect("store builds");
    (RedisMatchStore::new(&room), prefix)
}

/// A raw connection for looking at (or damaging) keys, on `backend`.
enum Raw {
    Single(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Raw {
    async fn open(backend: Backend) -> Raw {
        match backend {
            Backend::Single => Raw::Single(
                redis::Client::open(redis_harness::shared_server().url())
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .unwrap(),
            ),
            Backend::Cluster => {
                let cluster = tokio::task::spawn_blocking(redis_harness::shared_cluster)
                    .await
                    .unwrap();
                Raw::Cluster(
                    redis::cluster::ClusterClient::new(cluster.urls())
                        .unwrap()
                        .get_async_connection()
                        .await
                        .unwrap(),
                )
            }
        }
    }

    async fn query<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> T {
        match self {
            Raw::Single(c) => cmd.query_async(c).await.unwrap(),
            Raw::Cluster(c) => cmd.query_async(c).await.unwrap(),
        }
    }
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn pointer_key(prefix: &str, user: &str) -> String {
    format!("{{{prefix}:mu:{}}}", hex(user))
}

fn users_key(prefix: &str, queue: &Queue) -> String {
    queue_key(prefix, queue, "users")
}

fn queue_key(prefix: &str, queue: &Queue, name: &str) -> String {
    format!("{{{prefix}:m:{}}}:{name}", queue.key())
}

fn user(name: &str) -> UserId {
    UserId::new(name).unwrap()
}

fn queue(topic: &str, size: u64) -> Queue {
    Queue::new(Topic::new(topic).unwrap(), GroupSize::new(size).unwrap())
}

fn policy() -> MatchPolicy {
    MatchPolicy::default()
        .fallback_after(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .confirm_ttl(Duration::from_secs(20))
        .keep_confirmed(Duration::from_secs(30))
}

fn joined(outcome: JoinOutcome) -> MatchState {
    match outcome {
        JoinOutcome::Joined(state) => state,
        other => panic!("expected joined, got {other:?}"),
    }
}

fn matched(state: MatchState) -> Group {
    match state {
        MatchState::Matched(group) => group,
        other => panic!("expected matched, got {other:?}"),
    }
}

fn names(group: &Group) -> Vec<&str> {
    group.members.iter().map(UserId::as_str).collect()
}

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod single {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Single).await;
                }
            )*
        }
        mod cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Cluster).await;
                }
            )*
        }
    };
}

on_both!(
    pair_forms_in_the_second_join,
    status_and_leave_follow_the_user,
    fallback_forms_a_smaller_group_after_the_wait,
    timeout_drops_a_waiter,
    undone_group_goes_back_to_the_front_in_order,
    a_group_undone_long_after_its_expiry_drops_its_members,
    confirm_keeps_the_record_then_idle,
    conflict_across_queues_changes_nothing,
    a_claim_in_flight_is_completed_never_idle,
    a_finished_claim_is_replaced,
    concurrent_joins_never_put_anyone_in_two_groups,
    differential_against_the_memory_store,
    differential_bounded_work_per_step,
    damaged_numbers_are_read_as_missing_and_repaired,
    the_script_before_the_library_shares_a_queue,
);

/// The libraries `server` has loaded, by name.
fn libraries(server: &redis_harness::Server) -> Vec<String> {
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let list: Vec<HashMap<String, redis::Value>> =
        redis::cmd("FUNCTION").arg("LIST").query(&mut c).unwrap();
    list.iter()
        .map(|library| redis::from_redis_value(library["library_name"].clone()).unwrap())
        .collect()
}

/// Matching runs as functions of its own library (`FCALL twr_match_v1_<op>`): the first call
/// loads it, and a server that lost it (`FUNCTION FLUSH`, a restart without persistence of it,
/// a failover to a replica that missed it) gets it loaded again and the call retried, with
/// nothing lost but the functions. The room's library is not needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_library_is_loaded_again() {
    let server = redis_harness::Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let room = RedisStore::builder()
        .url(server.url())
        .prefix(prefix())
        .timeout(Duration::from_secs(5))
        .manual_clock(clock.clone())
        .build()
        .expect("store builds");
    let store = RedisMatchStore::new(&room);
    let (p, q) = (policy(), queue("chess", 2));
    assert!(libraries(&server).is_empty());
    joined(store.join(&p, user("ann"), q.clone()).await.unwrap());
    assert_eq!(
        libraries(&server),
        ["twr_match_v1"],
        "loaded by the first call"
    );
    server.command(&["FUNCTION", "FLUSH"]).unwrap();
    assert!(libraries(&server).is_empty(), "flushed");
    // A pointer's function first (the join's claim), then a queue's.
    let g = matched(joined(
        store.join(&p, user("bob"), q.clone()).await.unwrap(),
    ));
    assert_eq!(names(&g), ["ann", "bob"], "ann's place kept");
    assert_eq!(libraries(&server), ["twr_match_v1"], "loaded again");
    server.command(&["FUNCTION", "FLUSH"]).unwrap();
    // A queue's function first (a tick).
    assert_eq!(store.tick(&p, q).await.unwrap(), 0);
    assert_eq!(libraries(&server), ["twr_match_v1"]);
    let m = room.metrics();
    assert_eq!((m.misconfigured, m.protocol_errors), (0, 0), "{m:?}");
}
