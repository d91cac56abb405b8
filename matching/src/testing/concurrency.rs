//! Concurrency: joins made at once from many tasks (on a multi-thread runtime), of many users
//! and of one user to many queues, keep one place per user and the order of arrival.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use super::{Harness, FALLBACK_AFTER};
use crate::{AppGroupId, ConfirmOutcome, Group, GroupId, JoinOutcome, MatchState, Queue, UserId};

/// Hundreds of users joining queues concurrently (on a multi-thread runtime), some of them the
/// same user in two queues at once, then ticks past the fallback: exactly one join of each
/// user succeeds, nobody is in two groups, every group has its queue's size (but at most one
/// fallback group per queue, its last, of 2 up to the size), every member of a group has it as
/// their status, group numbers run from 1 without a gap, and users who joined one after
/// another are grouped in their order.
pub async fn concurrent_joins_keep_one_place_and_order(h: &Harness) {
    const RANDOM: usize = 300;
    const DOUBLE: usize = 60;
    const CHAIN: usize = 20;
    let h = &h.fresh();
    let queues: Vec<Queue> = ["t0", "t1", "t2"]
        .iter()
        .flat_map(|t| [2, 3, 4].map(|s| h.queue(t, s)))
        .collect();
    let policy = h.policy();
    let mut rng = tower_waiting_room::__private::Rng(0x9e37_79b9_7f4a_7c15);
    let mut tasks = tokio::task::JoinSet::new();
    let mut all: Vec<UserId> = Vec::new();
    let mut chains: Vec<(Queue, Vec<UserId>)> = Vec::new();
    // Chains: per queue, users who join one after another, in a known order.
    for (i, q) in queues.iter().enumerate() {
        let chain = h.users(&format!("c{i}-"), CHAIN);
        all.extend(chain.iter().cloned());
        chains.push((q.clone(), chain.clone()));
        let (store, q) = (h.store.clone(), q.clone());
        tasks.spawn(async move {
            let mut out = Vec::new();
            for u in chain {
                let o = store
                    .join(&policy, u.clone(), q.clone())
                    .await
                    .expect("join");
                out.push((u, o));
                tokio::task::yield_now().await;
            }
            out
        });
    }
    // Random users, one join each; and users joining two queues at once.
    for i in 0..RANDOM + DOUBLE {
        let u = h.user(&format!("r{i}"));
        all.push(u.clone());
        let first = queues[rng.below(queues.len() as u64) as usize].clone();
        let joins = if i < RANDOM {
            vec![first]
        } else {
            let mut second = queues[rng.below(queues.len() as u64) as usize].clone();
            if second == first {
                second = h.queue("t9", 2);
            }
            vec![first, second]
        };
        for q in joins {
            let (store, u) = (h.store.clone(), u.clone());
            tasks.spawn(async move {
                let o = store.join(&policy, u.clone(), q).await.expect("join");
                vec![(u, o)]
            });
        }
    }
    let mut outcomes: HashMap<UserId, Vec<JoinOutcome>> = HashMap::new();
    let collect = async {
        while let Some(res) = tasks.join_next().await {
            for (u, o) in res.expect("a join task failed") {
                outcomes.entry(u).or_default().push(o);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), collect)
        .await
        .expect("the concurrent joins did not finish");
    for u in &all {
        let outs = &outcomes[u];
        let joined = outs
            .iter()
            .filter(|o| matches!(o, JoinOutcome::Joined(_)))
            .count();
        assert_eq!(joined, 1, "{u}: exactly one join succeeds: {outs:?}");
        for o in outs {
            match o {
                JoinOutcome::Joined(MatchState::Idle) | JoinOutcome::Conflict(MatchState::Idle) => {
                    panic!("{u}: {o:?}")
                }
                _ => {}
            }
        }
    }
    // Before any fallback is due: full groups only, fewer than `size` left waiting.
    let first = Snapshot::take(h, &all).await;
    first.check(&extra_queues(h, &queues), false);
    first.check_chains(&chains);
    // The application confirms every group, concurrently; then, past the fallback, every
    // queue's leftovers form one smaller group (if at least two wait).
    let mut confirms = tokio::task::JoinSet::new();
    for id in first.groups.keys() {
        let (store, id) = (h.store.clone(), id.clone());
        confirms.spawn(async move {
            let app = AppGroupId::new(id.to_string()).expect("an app id");
            store.confirm(&policy, id, app).await.expect("confirm")
        });
    }
    while let Some(res) = confirms.join_next().await {
        let out = res.expect("a confirm task failed");
        assert!(matches!(out, ConfirmOutcome::Confirmed(_)), "{out:?}");
    }
    h.advance(FALLBACK_AFTER);
    for q in &extra_queues(h, &queues) {
        while h.tick(q).await > 0 {}
    }
    let second = Snapshot::take(h, &all).await;
    second.check(&extra_queues(h, &queues), true);
    second.check_chains(&chains);
    for (id, g) in &first.groups {
        assert_eq!(
            second.groups[id].members, g.members,
            "{id} kept its members"
        );
        assert!(second.groups[id].confirmed.is_some(), "{id} confirmed");
    }
}

fn extra_queues(h: &Harness, queues: &[Queue]) -> Vec<Queue> {
    let mut all = queues.to_vec();
    all.push(h.queue("t9", 2));
    all
}

/// Where everyone stands, from their statuses.
struct Snapshot {
    groups: BTreeMap<GroupId, Group>,
    group_of: HashMap<UserId, GroupId>,
    waiting_in: HashMap<Queue, Vec<UserId>>,
}

impl Snapshot {
    async fn take(h: &Harness, users: &[UserId]) -> Self {
        let mut groups: BTreeMap<GroupId, Group> = BTreeMap::new();
        let mut group_of = HashMap::new();
        let mut waiting_in: HashMap<Queue, Vec<UserId>> = HashMap::new();
        for u in users {
            match h.status(u).await {
                MatchState::Matched(g) => {
                    assert!(g.members.contains(u), "{u} is a member of {g:?}");
                    if let Some(seen) = groups.get(&g.id) {
                        assert_eq!(seen, &g, "one group, one answer");
                    }
                    group_of.insert(u.clone(), g.id.clone());
                    groups.insert(g.id.clone(), g);
                }
                MatchState::Waiting(w) => waiting_in.entry(w.queue).or_default().push(u.clone()),
                MatchState::Idle => panic!("{u} joined and nobody left, nobody timed out"),
            }
        }
        Self {
            groups,
            group_of,
            waiting_in,
        }
    }

    /// Nobody in two groups, every member's status is their group, numbers from 1 without a
    /// gap, full groups (but, with `fallback`, the last of each queue: 2 up to the size), and
    /// what is left waiting cannot form a group.
    fn check(&self, queues: &[Queue], fallback: bool) {
        let mut members_seen = HashSet::new();
        for g in self.groups.values() {
            for m in &g.members {
                assert!(members_seen.insert(m.clone()), "{m} is in two groups");
                assert_eq!(
                    self.group_of.get(m),
                    Some(&g.id),
                    "{m}'s status is {}",
                    g.id
                );
            }
        }
        for q in queues {
            let size = usize::from(q.size.get());
            let ids: Vec<&GroupId> = self.groups.keys().filter(|id| id.queue == *q).collect();
            let numbers: Vec<u64> = ids.iter().map(|id| id.number).collect();
            let count = numbers.len() as u64;
            assert_eq!(
                numbers,
                (1..=count).collect::<Vec<_>>(),
                "{q:?}: numbers 1.."
            );
            for id in ids {
                let len = self.groups[id].members.len();
                if fallback && id.number == count {
                    assert!((2..=size).contains(&len), "{id}: {len} members");
                } else {
                    assert_eq!(len, size, "{id}: a full group");
                }
            }
            let left = self.waiting_in.get(q).map_or(0, Vec::len);
            let most = if fallback { 1 } else { size - 1 };
            assert!(left <= most, "{left} still wait in {q:?}");
        }
    }

    /// Users who joined one after another are grouped in their order.
    fn check_chains(&self, chains: &[(Queue, Vec<UserId>)]) {
        for (q, chain) in chains {
            let mut last: Option<(u64, usize)> = None;
            for (i, u) in chain.iter().enumerate() {
                // One still waiting comes after every group.
                let Some(id) = self.group_of.get(u) else {
                    let key = (u64::MAX, i);
                    if let Some(prev) = last {
                        assert!(prev < key, "{u} waits, {prev:?} was grouped after");
                    }
                    last = Some(key);
                    continue;
                };
                assert_eq!(&id.queue, q);
                let at = self.groups[id]
                    .members
                    .iter()
                    .position(|m| m == u)
                    .expect("a member");
                let key = (id.number, at);
                if let Some(prev) = last {
                    assert!(
                        prev < key,
                        "{u} grouped before an earlier joiner: {prev:?} vs {key:?}"
                    );
                }
                last = Some(key);
            }
        }
    }
}

/// The same user joining many queues at once from many tasks: exactly one join succeeds and the
/// user is in that one place.
pub async fn concurrent_joins_of_one_user(h: &Harness) {
    let h = &h.fresh();
    let policy = h.policy();
    for round in 0..20 {
        let u = h.user(&format!("u{round}"));
        let queues: Vec<Queue> = (0..8)
            .map(|i| h.queue(&format!("q{round}-{i}"), 3))
            .collect();
        let mut tasks = tokio::task::JoinSet::new();
        for q in queues.clone() {
            let (store, u) = (h.store.clone(), u.clone());
            tasks.spawn(async move { store.join(&policy, u, q).await.expect("join") });
        }
        let mut joined = Vec::new();
        while let Some(res) = tasks.join_next().await {
            match res.expect("a join task failed") {
                JoinOutcome::Joined(st) => joined.push(st),
                JoinOutcome::Conflict(MatchState::Waiting(_)) => {}
                other => panic!("{u}: {other:?}"),
            }
        }
        assert_eq!(joined.len(), 1, "{u}: {joined:?}");
        let MatchState::Waiting(w) = &joined[0] else {
            panic!("{u}: {joined:?}")
        };
        assert_eq!((w.position, w.waiting), (1, 1));
        assert_eq!(h.status(&u).await, joined[0]);
        for q in queues.iter().filter(|q| **q != w.queue) {
            let other = h.user(&format!("o{round}-{}", q.topic));
            h.join_waiting(&other, q, 1, 1).await;
        }
    }
}
