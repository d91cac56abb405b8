//! Bounded work: more expiries and groups than one call may handle (`MAX_MATCH_WORK_PER_CALL`),
//! caught up over later calls.

use std::collections::HashSet;

use super::{Harness, CONFIRM_TTL, KEEP_CONFIRMED, TIMEOUT};
use crate::store::MAX_MATCH_WORK_PER_CALL;
use crate::{ConfirmOutcome, GroupId, MatchState, Queue};

/// More groups due to be undone at once than one step may handle: ticks catch up, each forming
/// at most `MAX_MATCH_WORK_PER_CALL`, never failing; every pair is formed again together under
/// a new number, and every old id is unknown.
pub async fn bounded_work_undoing_many_groups(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("many", 2);
    let n = 2 * MAX_MATCH_WORK_PER_CALL + 10;
    let users = h.users("u", 2 * n);
    for (k, pair) in users.chunks(2).enumerate() {
        h.join_waiting(&pair[0], &q, 1, 1).await;
        assert_eq!(h.join_matched(&pair[1], &q).await.id.number, k as u64 + 1);
    }
    h.advance(CONFIRM_TTL);
    let mut formed = 0;
    for _ in 0..2 * n {
        let now = h.tick(&q).await;
        assert!(
            now <= MAX_MATCH_WORK_PER_CALL as u64,
            "a tick formed {now} groups"
        );
        formed += now;
        if now == 0 {
            break;
        }
    }
    assert_eq!(formed, n as u64, "every pair formed again");
    let mut numbers = HashSet::new();
    for pair in users.chunks(2) {
        let g = h.group_of(&pair[0]).await;
        assert_eq!(g.members, pair, "a pair stays together, in its order");
        assert_eq!(g.confirmed, None);
        assert_eq!(g.expires_in, CONFIRM_TTL);
        assert!(g.id.number > n as u64, "a new number: {}", g.id);
        assert!(numbers.insert(g.id.number), "one number per group");
        assert_eq!(h.status(&pair[1]).await, MatchState::Matched(g));
    }
    assert_eq!(numbers.len(), n);
    for old in [1, n as u64 / 2, n as u64] {
        let id = GroupId::new(q.clone(), old);
        assert_eq!(h.confirm(&id, "x").await, ConfirmOutcome::Unknown, "{id}");
    }
}

/// More confirmed records expiring at once than one step may handle: each member asking is
/// idle at once, whichever asks first, never an error.
pub async fn bounded_work_expiring_many_records(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("kept", 2);
    let n = MAX_MATCH_WORK_PER_CALL + 30;
    let users = h.users("u", 2 * n);
    let mut ids = Vec::new();
    for pair in users.chunks(2) {
        let g = h.form_group(pair, &q).await;
        assert!(matches!(
            h.confirm(&g.id, "app").await,
            ConfirmOutcome::Confirmed(_)
        ));
        ids.push(g.id);
    }
    h.advance(KEEP_CONFIRMED);
    // The last group's first: behind more than a step's work.
    for u in users.iter().rev() {
        assert_eq!(h.status(u).await, MatchState::Idle, "{u}");
    }
    for id in ids.iter().rev() {
        assert_eq!(h.confirm(id, "app").await, ConfirmOutcome::Unknown, "{id}");
    }
    assert_eq!(h.tick(&q).await, 0);
}

/// More groups due to be undone at once than one step may handle: a late confirmation of the
/// last of them is unknown, however many are due before it.
pub async fn bounded_work_late_confirmation_is_unknown(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("late", 2);
    let n = MAX_MATCH_WORK_PER_CALL + 30;
    let users = h.users("u", 2 * n);
    let mut ids = Vec::new();
    for pair in users.chunks(2) {
        ids.push(h.form_group(pair, &q).await.id);
    }
    h.advance(CONFIRM_TTL);
    let last = ids.last().expect("groups");
    assert_eq!(h.confirm(last, "late").await, ConfirmOutcome::Unknown);
    // Its members are in no group by that id.
    let [x, y] = [&users[2 * n - 2], &users[2 * n - 1]];
    for u in [x, y] {
        let st = h.status(u).await;
        if let MatchState::Matched(g) = &st {
            assert_ne!(&g.id, last, "{u}: {st:?}");
        }
    }
}

/// Many waiters timing out at once, each in a queue of their own and more of them than one
/// step's work: each is idle when asked, never an error, and their queues are empty.
pub async fn bounded_work_many_timeouts(h: &Harness) {
    let h = &h.fresh();
    let n = MAX_MATCH_WORK_PER_CALL + 20;
    let users = h.users("u", n);
    let queues: Vec<Queue> = (0..n).map(|i| h.queue(&format!("t{i}"), 2)).collect();
    for (u, q) in users.iter().zip(&queues) {
        h.join_waiting(u, q, 1, 1).await;
    }
    h.advance(TIMEOUT);
    for (i, (u, q)) in users.iter().zip(&queues).enumerate() {
        if i % 2 == 0 {
            assert_eq!(h.tick(q).await, 0);
        }
        assert_eq!(h.status(u).await, MatchState::Idle, "{u}");
        h.join_waiting(&h.user(&format!("new{i}")), q, 1, 1).await;
    }
}
