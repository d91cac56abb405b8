//! Differential runs against `MemoryMatchStore` on the same clock: seeded sequences of calls,
//! and more expiries and groups than one step may handle.

use std::time::Duration;

use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::{MatchPolicy, MatchStore, MemoryMatchStore};
use tower_waiting_room_matching::{AppGroupId, GroupId, Queue, UserId};

use super::{policy, queue, store, user, Backend, START_MS};

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
pub(super) async fn differential_against_the_memory_store(backend: Backend) {
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
pub(super) async fn differential_bounded_work_per_step(backend: Backend) {
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
