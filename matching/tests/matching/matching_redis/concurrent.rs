//! Concurrent joins of the same users to several queues: nobody in two queues or two groups.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::MatchStore;
use tower_waiting_room_matching::{
    AppGroupId, ConfirmOutcome, GroupId, JoinOutcome, Queue, UserId,
};

use super::{policy, queue, store, user, users_key, Backend, Raw, START_MS};

/// Many tasks join the same users to four queues at once, over several rounds: each user joins
/// exactly once per round, is in at most one queue's users, and in at most one group.
pub(super) async fn concurrent_joins_never_put_anyone_in_two_groups(backend: Backend) {
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
