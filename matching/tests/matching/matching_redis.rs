//! `RedisMatchStore` against real servers (a single Redis and a 3-node Redis Cluster, started by
//! the harness): the rules step by step, a differential run against `MemoryMatchStore` on the
//! same clock, and concurrent joins of the same users to several queues.

use crate::redis_harness;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tower_waiting_room::clock::Clock;
use tower_waiting_room::store::RedisStore;
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::{
    MatchPolicy, MatchStore, MemoryMatchStore, RedisMatchStore,
};
use tower_waiting_room_matching::{
    AppGroupId, ConfirmOutcome, Group, GroupId, GroupSize, JoinOutcome, MatchState, Queue, Topic,
    UserId,
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

async fn pair_forms_in_the_second_join(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let (p, q) = (policy(), queue("chess", 2));
    let MatchState::Waiting(w) = joined(store.join(&p, user("ann"), q.clone()).await.unwrap())
    else {
        panic!("ann waits")
    };
    assert_eq!((w.position, w.waiting), (1, 1));
    assert_eq!(w.expires_in, Duration::from_secs(60));
    clock.advance(Duration::from_secs(3));
    let g = matched(joined(
        store.join(&p, user("bob"), q.clone()).await.unwrap(),
    ));
    assert_eq!(g.id, GroupId::new(q.clone(), 1));
    assert_eq!(names(&g), ["ann", "bob"]);
    assert_eq!(g.confirmed, None);
    assert_eq!(g.expires_in, Duration::from_secs(20));
    assert_eq!(store.tick(&p, q).await.unwrap(), 0);
}

async fn status_and_leave_follow_the_user(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let (p, q) = (policy(), queue("go", 3));
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    store.join(&p, user("ann"), q.clone()).await.unwrap();
    store.join(&p, user("bob"), q.clone()).await.unwrap();
    clock.advance(Duration::from_secs(2));
    let MatchState::Waiting(w) = store.status(&p, user("bob")).await.unwrap() else {
        panic!("bob waits")
    };
    assert_eq!((w.position, w.waiting), (2, 2));
    assert_eq!(w.waited, Duration::from_secs(2));
    assert_eq!(w.expires_in, Duration::from_secs(58));
    let before = store.leave(&p, user("ann")).await.unwrap();
    assert_eq!(before.name(), "waiting");
    assert_eq!(
        store.leave(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    let MatchState::Waiting(w) = store.status(&p, user("bob")).await.unwrap() else {
        panic!("bob waits")
    };
    assert_eq!((w.position, w.waiting), (1, 1));
    // Ann may join again after leaving, anywhere.
    joined(store.join(&p, user("ann"), queue("go", 2)).await.unwrap());
}

async fn fallback_forms_a_smaller_group_after_the_wait(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let (p, q) = (policy(), queue("trio", 3));
    store.join(&p, user("ann"), q.clone()).await.unwrap();
    clock.advance(Duration::from_secs(4));
    store.join(&p, user("bob"), q.clone()).await.unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(store.tick(&p, q.clone()).await.unwrap(), 0, "9 s: not yet");
    clock.advance(Duration::from_secs(1));
    assert_eq!(store.tick(&p, q.clone()).await.unwrap(), 1, "10 s: a pair");
    let g = matched(store.status(&p, user("bob")).await.unwrap());
    assert_eq!(names(&g), ["ann", "bob"]);
}

async fn timeout_drops_a_waiter(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let (p, q) = (policy(), queue("slow", 2));
    store.join(&p, user("ann"), q.clone()).await.unwrap();
    clock.advance(Duration::from_millis(59_999));
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap().name(),
        "waiting"
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    // Bob does not meet a ghost: he waits alone, and Ann may join again.
    let state = joined(store.join(&p, user("bob"), q.clone()).await.unwrap());
    assert_eq!(state.name(), "waiting");
    let g = matched(joined(store.join(&p, user("ann"), q).await.unwrap()));
    assert_eq!(names(&g), ["bob", "ann"]);
}

async fn undone_group_goes_back_to_the_front_in_order(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let p = policy().fallback_after(Duration::from_secs(3600));
    let q = queue("lobby", 3);
    for name in ["ann", "bob", "cat"] {
        store.join(&p, user(name), q.clone()).await.unwrap();
        clock.advance(Duration::from_secs(1));
    }
    store.join(&p, user("dan"), q.clone()).await.unwrap();
    // Cat leaves the pending group: Ann and Bob go back ahead of Dan, with their old sequence
    // numbers, and a group forms at once.
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        matched(store.leave(&p, user("cat")).await.unwrap())
            .id
            .number,
        1
    );
    let g = matched(store.status(&p, user("dan")).await.unwrap());
    assert_eq!(g.id.number, 2);
    assert_eq!(names(&g), ["ann", "bob", "dan"]);
    // Not confirmed within confirm_ttl: undone; alone, Ann and Bob wait at the front with a
    // fresh timeout, and their wait counts from their first join.
    // (Dan's leave first undoes group 2, his own, so he leaves as a waiter; nobody is grouped
    // by his leave.)
    clock.advance(Duration::from_secs(20));
    let MatchState::Waiting(left) = store.leave(&p, user("dan")).await.unwrap() else {
        panic!("dan left as a waiter")
    };
    assert_eq!(left.position, 3, "behind Ann and Bob, back at the front");
    let MatchState::Waiting(w) = store.status(&p, user("bob")).await.unwrap() else {
        panic!("bob waits again")
    };
    assert_eq!((w.position, w.waiting), (2, 2));
    assert_eq!(w.expires_in, Duration::from_secs(60));
    assert_eq!(w.waited, Duration::from_secs(23));
    store.join(&p, user("eve"), q.clone()).await.unwrap();
    let g = matched(store.status(&p, user("eve")).await.unwrap());
    assert_eq!((g.id.number, names(&g)), (3, vec!["ann", "bob", "eve"]));
}

async fn confirm_keeps_the_record_then_idle(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let (p, q) = (policy(), queue("talk", 2));
    store.join(&p, user("ann"), q.clone()).await.unwrap();
    let g = matched(joined(
        store.join(&p, user("bob"), q.clone()).await.unwrap(),
    ));
    let app = AppGroupId::new("conv-1").unwrap();
    let ConfirmOutcome::Confirmed(c) = store.confirm(&p, g.id.clone(), app.clone()).await.unwrap()
    else {
        panic!("confirmed")
    };
    assert_eq!(c.confirmed, Some(app.clone()));
    assert_eq!(c.expires_in, Duration::from_secs(30));
    // A retry is harmless; another id is a conflict; an unknown group is unknown.
    assert!(matches!(
        store.confirm(&p, g.id.clone(), app.clone()).await.unwrap(),
        ConfirmOutcome::Confirmed(_)
    ));
    assert!(matches!(
        store
            .confirm(&p, g.id.clone(), AppGroupId::new("other").unwrap())
            .await
            .unwrap(),
        ConfirmOutcome::Conflict(_)
    ));
    assert_eq!(
        store
            .confirm(&p, GroupId::new(q.clone(), 9), app.clone())
            .await
            .unwrap(),
        ConfirmOutcome::Unknown
    );
    // Ann leaves her confirmed group: she is idle, Bob keeps his record.
    store.leave(&p, user("ann")).await.unwrap();
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    clock.advance(Duration::from_secs(29));
    let kept = matched(store.status(&p, user("bob")).await.unwrap());
    assert_eq!(names(&kept), ["ann", "bob"]);
    assert_eq!(kept.expires_in, Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        store.status(&p, user("bob")).await.unwrap(),
        MatchState::Idle
    );
    assert_eq!(
        store.confirm(&p, g.id, app).await.unwrap(),
        ConfirmOutcome::Unknown
    );
}

async fn conflict_across_queues_changes_nothing(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let p = policy();
    let (a, b) = (queue("a", 2), queue("b", 2));
    let waiting = joined(store.join(&p, user("ann"), a.clone()).await.unwrap());
    clock.advance(Duration::from_secs(1));
    let JoinOutcome::Conflict(MatchState::Waiting(w)) =
        store.join(&p, user("ann"), b.clone()).await.unwrap()
    else {
        panic!("a conflict with her wait in a")
    };
    assert_eq!(w.queue, a);
    assert_eq!(w.waited, Duration::from_secs(1));
    assert_eq!(waiting.name(), "waiting");
    assert!(matches!(
        store.join(&p, user("ann"), a.clone()).await.unwrap(),
        JoinOutcome::Conflict(MatchState::Waiting(_))
    ));
    // Nothing changed in b: Bob waits alone there.
    let MatchState::Waiting(w) = joined(store.join(&p, user("bob"), b).await.unwrap()) else {
        panic!("bob waits")
    };
    assert_eq!(w.waiting, 1);
}

async fn a_claim_in_flight_is_completed_never_idle(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, prefix) = store(backend, &clock).await;
    let mut conn = Raw::open(backend).await;
    let p = policy();
    let (a, b) = (queue("a", 3), queue("b", 2));
    // A process claimed Ann for a and stopped before its queue step (a crash, a pause).
    let claim = format!("{}|{}|00000000deadbeef", a.key(), clock.now_ms());
    let _: () = conn
        .query(
            redis::cmd("SET")
                .arg(pointer_key(&prefix, "ann"))
                .arg(&claim),
        )
        .await;
    clock.advance(Duration::from_secs(2));
    // Her join to b completes the join in flight: a conflict with her wait in a, never idle.
    let JoinOutcome::Conflict(MatchState::Waiting(w)) =
        store.join(&p, user("ann"), b.clone()).await.unwrap()
    else {
        panic!("conflict with the join in flight")
    };
    assert_eq!((w.queue, w.position), (a.clone(), 1));
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap().name(),
        "waiting"
    );
    // The same for a status that finds a claim in flight.
    let claim = format!("{}|{}|00000000feedbeef", a.key(), clock.now_ms());
    let _: () = conn
        .query(
            redis::cmd("SET")
                .arg(pointer_key(&prefix, "bob"))
                .arg(&claim),
        )
        .await;
    let MatchState::Waiting(w) = store.status(&p, user("bob")).await.unwrap() else {
        panic!("bob's join completed")
    };
    assert_eq!((w.position, w.waiting), (2, 2));
}

async fn a_finished_claim_is_replaced(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, prefix) = store(backend, &clock).await;
    let mut conn = Raw::open(backend).await;
    let p = policy();
    let (a, b) = (queue("a", 2), queue("b", 2));
    // A claim older than the grace that never joined: finished, whoever made it.
    let claim = format!("{}|{}|0000000000000001", a.key(), clock.now_ms() - 10_000);
    let _: () = conn
        .query(
            redis::cmd("SET")
                .arg(pointer_key(&prefix, "ann"))
                .arg(&claim),
        )
        .await;
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    let _: () = conn
        .query(
            redis::cmd("SET")
                .arg(pointer_key(&prefix, "ann"))
                .arg(&claim),
        )
        .await;
    let MatchState::Waiting(w) = joined(store.join(&p, user("ann"), b.clone()).await.unwrap())
    else {
        panic!("ann waits in b")
    };
    assert_eq!(w.queue, b);
    // A claim that joined and whose user timed out (the pointer outlives the wait): replaced.
    clock.advance(Duration::from_secs(60));
    let MatchState::Waiting(w) = joined(store.join(&p, user("ann"), a.clone()).await.unwrap())
    else {
        panic!("ann waits in a")
    };
    assert_eq!(w.queue, a);
    // Nobody is left in b; the pointer names a.
    let in_b: Vec<String> = conn
        .query(redis::cmd("HKEYS").arg(users_key(&prefix, &b)))
        .await;
    assert!(in_b.is_empty());
}

/// Many tasks join the same users to four queues at once, over several rounds: each user joins
/// exactly once per round, is in at most one queue's users, and in at most one group.
async fn concurrent_joins_never_put_anyone_in_two_groups(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, prefix) = store(backend, &clock).await;
    let mut conn = Raw::open(backend).await;
    let p = policy();
    let queues: Vec<Queue> = ["w", "x", "y", "z"].iter().map(|t| queue(t, 2)).collect();
    let users: Vec<UserId> = (0..24).map(|i| user(&format!("u{i}"))).collect();
    for round in 0..5 {
        let mut tasks = Vec::new();
        for u in &users {
            for q in &queues {
                let (store, u, q) = (store.clone(), u.clone(), q.clone());
                tasks.push(tokio::spawn(async move {
                    let out = store.join(&p, u.clone(), q).await.unwrap();
                    (u, matches!(out, JoinOutcome::Joined(_)))
                }));
            }
        }
        let mut joins: HashMap<UserId, usize> = HashMap::new();
        for t in tasks {
            let (u, ok) = t.await.unwrap();
            *joins.entry(u).or_default() += usize::from(ok);
        }
        for u in &users {
            assert_eq!(joins.get(u), Some(&1), "round {round}: {u} joined once");
        }
        // Every user is in at most one queue.
        let mut seen: HashSet<String> = HashSet::new();
        for q in &queues {
            let here: Vec<String> = conn
                .query(redis::cmd("HKEYS").arg(users_key(&prefix, q)))
                .await;
            for u in here {
                assert!(seen.insert(u.clone()), "round {round}: {u} in two queues");
            }
        }
        assert_eq!(seen.len(), users.len(), "round {round}");
        // Every group formed, through the public API: nobody in two.
        let mut grouped: HashSet<UserId> = HashSet::new();
        for q in &queues {
            for n in 1..=200 {
                let id = GroupId::new(q.clone(), n);
                let app = AppGroupId::new(format!("r{round}-{n}")).unwrap();
                match store.confirm(&p, id, app).await.unwrap() {
                    ConfirmOutcome::Confirmed(g) if g.confirmed.is_some() => {
                        for m in g.members {
                            assert!(grouped.insert(m.clone()), "round {round}: {m} twice");
                        }
                    }
                    _ => {}
                }
            }
        }
        // Each user's status agrees with where they are.
        for u in &users {
            let state = store.status(&p, u.clone()).await.unwrap();
            assert_eq!(
                state.name() == "matched",
                grouped.contains(u),
                "round {round}: {u} {state:?}"
            );
            store.leave(&p, u.clone()).await.unwrap();
        }
        // Confirmed records of earlier rounds must not count in the next.
        clock.advance(Duration::from_secs(31));
    }
}

/// A small deterministic generator (xorshift), so a failing sequence can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The same seeded sequence of joins, polls, leaves, confirmations, ticks and clock moves on the
/// embedded store and the Redis store, on one clock: every answer must be identical.
async fn differential_against_the_memory_store(backend: Backend) {
    let slow = MatchPolicy::default()
        .fallback_after(Duration::from_secs(5))
        .timeout(Duration::from_secs(20))
        .confirm_ttl(Duration::from_secs(8))
        .keep_confirmed(Duration::from_secs(15));
    // Everything expires within a few moves of the clock: timeouts, undone groups and dropped
    // records on most steps.
    let fast = MatchPolicy::default()
        .fallback_after(Duration::from_secs(2))
        .timeout(Duration::from_secs(6))
        .confirm_ttl(Duration::from_secs(3))
        .keep_confirmed(Duration::from_secs(4));
    let mut seen = String::new();
    for (seed, p) in [
        (0x9e37_79b9_7f4a_7c15_u64, slow),
        (42, slow),
        (7_777_777, fast),
        (123_456_789, fast),
    ] {
        let clock = ManualClock::new(START_MS);
        let (redis_store, _) = store(backend, &clock).await;
        let memory = MemoryMatchStore::with_clock(clock.clone());
        let queues: Vec<Queue> = ["red", "green", "blue"]
            .iter()
            .flat_map(|t| [queue(t, 2), queue(t, 3)])
            .collect();
        let users: Vec<UserId> = (0..14).map(|i| user(&format!("p{i}"))).collect();
        let apps = [
            AppGroupId::new("one").unwrap(),
            AppGroupId::new("two").unwrap(),
        ];
        let mut rng = Rng(seed);
        let mut known: Vec<GroupId> = Vec::new();
        let mut log = Vec::new();
        for step in 0..600 {
            let u = users[rng.below(users.len() as u64) as usize].clone();
            let q = queues[rng.below(queues.len() as u64) as usize].clone();
            let (what, mem, red) = match rng.below(100) {
                0..=34 => (
                    format!("join {u} {}", q.key()),
                    format!("{:?}", memory.join(&p, u.clone(), q.clone()).await),
                    format!("{:?}", redis_store.join(&p, u, q).await),
                ),
                35..=59 => (
                    format!("status {u}"),
                    format!("{:?}", memory.status(&p, u.clone()).await),
                    format!("{:?}", redis_store.status(&p, u).await),
                ),
                60..=69 => (
                    format!("leave {u}"),
                    format!("{:?}", memory.leave(&p, u.clone()).await),
                    format!("{:?}", redis_store.leave(&p, u).await),
                ),
                70..=79 => {
                    let id = if known.is_empty() || rng.below(5) == 0 {
                        GroupId::new(q, 1 + rng.below(4))
                    } else {
                        known[rng.below(known.len() as u64) as usize].clone()
                    };
                    let app = apps[rng.below(2) as usize].clone();
                    (
                        format!("confirm {id} {app}"),
                        format!("{:?}", memory.confirm(&p, id.clone(), app.clone()).await),
                        format!("{:?}", redis_store.confirm(&p, id, app).await),
                    )
                }
                80..=87 => (
                    format!("tick {}", q.key()),
                    format!("{:?}", memory.tick(&p, q.clone()).await),
                    format!("{:?}", redis_store.tick(&p, q).await),
                ),
                _ => {
                    let by = Duration::from_millis(rng.below(6_000));
                    clock.advance(by);
                    log.push(format!("{step}: advance {by:?}"));
                    continue;
                }
            };
            log.push(format!("{step}: {what} -> {mem}"));
            seen.push_str(&mem);
            assert_eq!(
                mem,
                red,
                "seed {seed}, step {step}: {what}\nmemory: {mem}\nredis:  {red}\nsequence:\n{}",
                log.join("\n")
            );
            // Remember the groups seen, for later confirmations.
            for id in queues
                .iter()
                .flat_map(|q| (1..=40).map(move |n| GroupId::new(q.clone(), n)))
            {
                if mem.contains(&format!("{:?}", id)) && !known.contains(&id) {
                    known.push(id);
                }
            }
        }
    }
    // The sequences reached every kind of answer.
    for kind in [
        "Joined(Waiting",
        "Joined(Matched",
        "Conflict(Waiting",
        "Conflict(Matched",
        "Confirmed(",
        "Conflict(Group",
        "Unknown",
        "Ok(Idle)",
        "Ok(1)",
    ] {
        assert!(seen.contains(kind), "no {kind} in the sequences");
    }
}

/// More expiries and groups than one step may handle: the embedded store and the Redis store
/// catch up over the same steps.
async fn differential_bounded_work_per_step(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (redis_store, _) = store(backend, &clock).await;
    let memory = MemoryMatchStore::with_clock(clock.clone());
    let p = policy();
    let (pairs, trios) = (queue("bulk", 2), queue("bulk", 3));
    let users: Vec<UserId> = (0..250).map(|i| user(&format!("b{i:03}"))).collect();
    macro_rules! same {
        ($call:ident($($arg:expr),*)) => {{
            let m = memory.$call(&p, $($arg.clone()),*).await.unwrap();
            let r = redis_store.$call(&p, $($arg),*).await.unwrap();
            assert_eq!(m, r, "{}", stringify!($call($($arg),*)));
            m
        }};
    }
    // 125 pending groups, all undone at the same time.
    for u in &users {
        same!(join(u.clone(), pairs.clone()));
    }
    let g = GroupId::new(pairs.clone(), 7);
    same!(confirm(g, AppGroupId::new("seven").unwrap()));
    clock.advance(Duration::from_secs(20));
    for _ in 0..3 {
        same!(tick(pairs.clone()));
    }
    for u in &users {
        same!(status(u.clone()));
    }
    for u in &users {
        same!(leave(u.clone()));
    }
    // A trio queue's fallback pair, then 150 lone waiters timing out at the same millisecond.
    for u in users.iter().take(2) {
        same!(join(u.clone(), trios.clone()));
    }
    clock.advance(Duration::from_secs(10));
    same!(tick(trios.clone()));
    for u in users.iter().take(2) {
        same!(leave(u.clone()));
    }
    let lone: Vec<Queue> = (0..150).map(|i| queue(&format!("lone{i}"), 2)).collect();
    for (u, q) in users.iter().zip(&lone) {
        same!(join(u.clone(), q.clone()));
    }
    clock.advance(Duration::from_secs(60));
    for (u, q) in users.iter().zip(&lone).take(20) {
        same!(tick(q.clone()));
        same!(status(u.clone()));
    }
}

/// Every number the script reads back damaged, one form at a time (`inf`, `nan`, `2.5`, `0x10`,
/// 20 digits...): the last sequence number and group number (`meta`), a waiter's record, a
/// group's expiry. The script reads each as missing and repairs it: no newcomer goes ahead of
/// the line, no group number is handed out twice (so nobody is in two groups), a waiter keeps
/// their place, and every call answers.
async fn damaged_numbers_are_read_as_missing_and_repaired(backend: Backend) {
    // The forms of `testing::conformance::BadNumber`.
    for t in [
        "inf",
        "-inf",
        "nan",
        "1e999",
        "2.5",
        "-1",
        "0x10",
        "",
        "99999999999999999999",
    ] {
        let what = format!("{t:?}");
        let clock = ManualClock::new(START_MS);
        let (store, prefix) = store(backend, &clock).await;
        let mut raw = Raw::open(backend).await;
        let p = policy().fallback_after(Duration::from_secs(3600));
        let q = queue("damage", 3);
        let hset = |key: String, field: &str, value: &str| {
            redis::cmd("HSET").arg(key).arg(field).arg(value).clone()
        };
        // The last sequence number: a newcomer still joins behind the two waiting.
        store.join(&p, user("ann"), q.clone()).await.unwrap();
        store.join(&p, user("bob"), q.clone()).await.unwrap();
        let _: i64 = raw
            .query(&hset(queue_key(&prefix, &q, "meta"), "seq", t))
            .await;
        let g = matched(joined(
            store.join(&p, user("cat"), q.clone()).await.unwrap(),
        ));
        assert_eq!(
            (g.id.number, names(&g)),
            (1, vec!["ann", "bob", "cat"]),
            "{what}"
        );
        // The last group number: the next group gets a new one, never group 1's again.
        let _: i64 = raw
            .query(&hset(queue_key(&prefix, &q, "meta"), "formed", t))
            .await;
        for name in ["dan", "eve"] {
            store.join(&p, user(name), q.clone()).await.unwrap();
        }
        let g = matched(joined(
            store.join(&p, user("fay"), q.clone()).await.unwrap(),
        ));
        assert_eq!(
            (g.id.number, names(&g)),
            (2, vec!["dan", "eve", "fay"]),
            "{what}"
        );
        let first = matched(store.status(&p, user("ann")).await.unwrap());
        assert_eq!(
            (first.id.number, names(&first)),
            (1, vec!["ann", "bob", "cat"]),
            "{what}"
        );
        // A group's expiry: read from its pending entry.
        let groups = queue_key(&prefix, &q, "groups");
        let record: String = raw.query(redis::cmd("HGET").arg(&groups).arg("1")).await;
        let (_, rest) = record.split_once('\n').unwrap();
        let _: i64 = raw
            .query(&hset(groups.clone(), "1", &format!("{}\n{rest}", t)))
            .await;
        let g = matched(store.status(&p, user("bob")).await.unwrap());
        assert_eq!(g.expires_in, Duration::from_secs(20), "{what}");
        // A waiter's record: its numbers damaged; the place in line is kept.
        store.join(&p, user("gus"), q.clone()).await.unwrap();
        store.join(&p, user("hal"), q.clone()).await.unwrap();
        let users = users_key(&prefix, &q);
        let record: String = raw.query(redis::cmd("HGET").arg(&users).arg("gus")).await;
        let claim = record.rsplit('\n').next().unwrap().to_owned();
        let _: i64 = raw
            .query(&hset(
                users.clone(),
                "gus",
                &format!("w\n{t}\n{t}\n{t}\n{claim}"),
            ))
            .await;
        let MatchState::Waiting(w) = store.status(&p, user("gus")).await.unwrap() else {
            panic!("{what}: gus waits")
        };
        assert_eq!(
            (w.position, w.waiting),
            (1, 2),
            "{what}: gus kept his place"
        );
        assert_eq!(w.expires_in, Duration::from_secs(60), "{what}");
        let g = matched(joined(
            store.join(&p, user("ivy"), q.clone()).await.unwrap(),
        ));
        assert_eq!(
            (g.id.number, names(&g)),
            (3, vec!["gus", "hal", "ivy"]),
            "{what}"
        );
        assert_eq!(store.tick(&p, q.clone()).await.unwrap(), 0, "{what}");
    }
}

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

/// The script before matching's library: one `EVALSHA` script whose first argument names the
/// operation, kept as it shipped in `matching/tests/fixtures/matching_evalsha.lua` (commit `c28b560`),
/// sent after a `#!lua` line and the crate's reader of stored numbers, as its store sent it.
const EVALSHA_SCRIPT: &str = concat!(
    "#!lua\n",
    include_str!("../../../src/store/redis/script/stored.lua"),
    include_str!("../fixtures/matching_evalsha.lua")
);

/// A call of the script before the library, as a gateway still running it makes one.
async fn evalsha_call(raw: &mut Raw, keys: &[String], args: &[&str]) -> Vec<redis::Value> {
    let mut script = redis::cmd("EVAL");
    script
        .arg(EVALSHA_SCRIPT)
        .arg(keys.len())
        .arg(keys)
        .arg(args);
    raw.query(&script).await
}

/// The arguments every queue call of the script before the library took after its operation:
/// `now`, the queue's size, `policy()`'s timings, the work bound, the claim's grace and memory.
fn evalsha_queue_args(now: u64, size: u64) -> Vec<String> {
    [
        now, size, 10_000, 60_000, 20_000, 30_000, 100, 10_000, 60_000,
    ]
    .map(|n| n.to_string())
    .to_vec()
}

fn value(s: &str) -> redis::Value {
    redis::Value::BulkString(s.as_bytes().to_vec())
}

/// The library kept the keys, the values and the replies of the script before it: a gateway
/// still running that script (a rolling upgrade) and one running the library share a queue,
/// each finding the other's claims, waiters and groups, and answering the same.
async fn the_script_before_the_library_shares_a_queue(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, prefix) = store(backend, &clock).await;
    let mut raw = Raw::open(backend).await;
    let (p, q) = (policy(), queue("chess", 2));
    // The queue's keys in the order of the script's header.
    let queue_keys: Vec<String> = "meta line expiry users groups pending confirmed used"
        .split(' ')
        .map(|k| queue_key(&prefix, &q, k))
        .collect();
    let now = clock.now_ms().to_string();
    let ttl = (2 * (60_000 + 20_000) + 30_000 + 3_600_000u64).to_string();
    // The old gateway joins ann: its claim, then its queue's enter.
    let ann_pointer = vec![pointer_key(&prefix, "ann")];
    let reply = evalsha_call(
        &mut raw,
        &ann_pointer,
        &["claim", &now, "", &q.key(), "00ff00ff00ff00ff", &ttl],
    )
    .await;
    let claim = format!("{}|{now}|00ff00ff00ff00ff", q.key());
    assert_eq!(reply, [redis::Value::Int(1), value(&claim)]);
    let mut args = vec!["enter".to_owned()];
    args.extend(evalsha_queue_args(clock.now_ms(), 2));
    args.extend(["ann".to_owned(), claim.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(
        evalsha_call(&mut raw, &queue_keys, &args).await,
        [3, 0]
            .map(redis::Value::Int)
            .into_iter()
            .chain([
                value("w"),
                redis::Value::Int(1),
                redis::Value::Int(1),
                redis::Value::Int(0),
                redis::Value::Int(60_000),
            ])
            .collect::<Vec<_>>(),
        "joined, waiting first of one"
    );
    // The library finds her waiting under that claim, and pairs bob with her.
    clock.advance(Duration::from_secs(2));
    let MatchState::Waiting(w) = store.status(&p, user("ann")).await.unwrap() else {
        panic!("ann waits")
    };
    assert_eq!(
        (w.position, w.waiting, w.waited),
        (1, 1, Duration::from_secs(2))
    );
    let g = matched(joined(
        store.join(&p, user("bob"), q.clone()).await.unwrap(),
    ));
    assert_eq!((g.id.number, names(&g)), (1, vec!["ann", "bob"]));
    // The old gateway reads bob's claim and finds him in the group; then confirms it.
    let bob_pointer = vec![pointer_key(&prefix, "bob")];
    let reply = evalsha_call(&mut raw, &bob_pointer, &["read", "0", &ttl]).await;
    let [redis::Value::Int(1), redis::Value::BulkString(bob_claim)] = reply.as_slice() else {
        panic!("bob's claim: {reply:?}")
    };
    let bob_claim = String::from_utf8(bob_claim.clone()).unwrap();
    assert!(
        bob_claim.starts_with(&format!("{}|", q.key())),
        "{bob_claim}"
    );
    let group = |code: i64, app: &str| -> Vec<redis::Value> {
        vec![
            redis::Value::Int(code),
            redis::Value::Int(0),
            value("m"),
            redis::Value::Int(1),
            redis::Value::Int(20_000),
            value(app),
            value("ann"),
            value("bob"),
        ]
    };
    let mut args = vec!["enter".to_owned()];
    args.extend(evalsha_queue_args(clock.now_ms(), 2));
    args.extend(["bob".to_owned(), bob_claim]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(
        evalsha_call(&mut raw, &queue_keys, &args).await,
        group(1, ""),
        "present under this claim, in the group"
    );
    let mut args = vec!["confirm".to_owned()];
    args.extend(evalsha_queue_args(clock.now_ms(), 2));
    args.extend(["1".to_owned(), "conv-1".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut confirmed = group(6, "conv-1");
    confirmed[4] = redis::Value::Int(30_000);
    assert_eq!(evalsha_call(&mut raw, &queue_keys, &args).await, confirmed);
    // The library sees the confirmation, and answers a retry as the script would.
    let g = matched(store.status(&p, user("ann")).await.unwrap());
    assert_eq!(g.confirmed.as_ref().map(AppGroupId::as_str), Some("conv-1"));
    assert_eq!(
        store
            .confirm(&p, g.id.clone(), AppGroupId::new("conv-1").unwrap())
            .await
            .unwrap(),
        ConfirmOutcome::Confirmed(g)
    );
}
