//! Leaving groups: a pending or a confirmed one, leaving when idle, the group formed after the
//! leaver left, and a confirmed group's record kept for `keep_confirmed`, then idle.

use std::time::Duration;

use super::{
    confirmed, matched, pending, wait, Harness, CONFIRM_TTL, FALLBACK_AFTER, KEEP_CONFIRMED, MS,
    SEC, TIMEOUT,
};
use crate::{ConfirmOutcome, Group, MatchState};

/// A member who leaves a pending group dissolves it: the leaver is idle, the others go back to
/// the front in their order, with a fresh timeout (their wait counted from their first join),
/// and the group's id is unknown.
pub async fn leave_a_pending_group(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("quad", 4);
    let [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map(|n| h.user(n));
    let g = h
        .form_group(&[a.clone(), b.clone(), c.clone(), d.clone()], &q)
        .await;
    h.advance(2 * SEC);
    let before = Group {
        expires_in: CONFIRM_TTL - 2 * SEC,
        ..g.clone()
    };
    assert_eq!(h.leave(&b).await, matched(&before), "b stood in the group");
    assert_eq!(h.status(&b).await, MatchState::Idle);
    for (i, u) in [&a, &c, &d].into_iter().enumerate() {
        assert_eq!(
            h.status(u).await,
            wait(&q, i as u64 + 1, 3, 2 * SEC, TIMEOUT),
            "{u} is back at the front, with a fresh timeout"
        );
    }
    assert_eq!(h.confirm(&g.id, "x").await, ConfirmOutcome::Unknown);
    let g2 = h.join_matched(&e, &q).await;
    assert_eq!(g2, pending(&q, 2, &[&a, &c, &d, &e], CONFIRM_TTL));

    // The fresh timeout holds: in a queue of 2 the one left waits a full `timeout` more.
    let pairs = h.queue("pair", 2);
    let (x, y) = (h.user("x"), h.user("y"));
    h.join_waiting(&x, &pairs, 1, 1).await;
    h.advance(30 * SEC);
    h.join_matched(&y, &pairs).await;
    h.advance(5 * SEC);
    h.leave(&y).await;
    h.advance(TIMEOUT - MS);
    let waited = 35 * SEC + TIMEOUT - MS;
    assert_eq!(h.status(&x).await, wait(&pairs, 1, 1, waited, MS));
    h.advance(MS);
    assert_eq!(h.status(&x).await, MatchState::Idle);
}

/// A member who leaves a confirmed group is idle (and free to join again); the others keep the
/// group, unchanged.
pub async fn leave_a_confirmed_group(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let users = h.users("u", 3);
    let g = h.form_group(&users, &q).await;
    h.confirm(&g.id, "game").await;
    h.advance(SEC);
    let c = confirmed(&g, "game", KEEP_CONFIRMED - SEC);
    assert_eq!(h.leave(&users[1]).await, matched(&c));
    assert_eq!(h.status(&users[1]).await, MatchState::Idle);
    for u in [&users[0], &users[2]] {
        assert_eq!(h.status(u).await, matched(&c), "{u} keeps the group");
    }
    assert_eq!(
        h.confirm(&g.id, "game").await,
        ConfirmOutcome::Confirmed(c.clone())
    );
    h.join_waiting(&users[1], &q, 1, 1).await;
    assert_eq!(
        h.leave(&users[1]).await,
        wait(&q, 1, 1, Duration::ZERO, TIMEOUT)
    );
}

/// Leaving when idle answers idle and changes nothing.
pub async fn leave_when_idle(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let [a, b] = ["a", "b"].map(|n| h.user(n));
    h.join_waiting(&a, &q, 1, 1).await;
    assert_eq!(h.leave(&b).await, MatchState::Idle);
    assert_eq!(h.status(&b).await, MatchState::Idle);
    assert_eq!(h.status(&a).await, wait(&q, 1, 1, Duration::ZERO, TIMEOUT));
}

/// A leave is about the leaver: its formation runs after they left, so a waiter who leaves just
/// as the fallback comes due is not put in a group by their own leave; those left are.
pub async fn leave_forms_after_the_leaver_left(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("quad", 4);
    let [a, b, c] = ["a", "b", "c"].map(|n| h.user(n));
    h.join_all_waiting(&[a.clone(), b.clone(), c.clone()], &q, 0)
        .await;
    h.advance(FALLBACK_AFTER);
    assert_eq!(
        h.leave(&c).await,
        wait(&q, 3, 3, FALLBACK_AFTER, TIMEOUT - FALLBACK_AFTER),
        "c left from the line"
    );
    assert_eq!(h.status(&c).await, MatchState::Idle);
    let g = pending(&q, 1, &[&a, &b], CONFIRM_TTL);
    h.check_members(&g, "the two left form group 1").await;

    // The same when the leaver's pending group is due to be undone.
    let pairs = h.queue("pair", 2);
    let [x, y] = ["x", "y"].map(|n| h.user(n));
    let g = h.form_group(&[x.clone(), y.clone()], &pairs).await;
    h.advance(CONFIRM_TTL);
    assert_eq!(
        h.leave(&x).await,
        wait(&pairs, 1, 2, CONFIRM_TTL, TIMEOUT),
        "x's group was undone: x stood at the front"
    );
    assert_eq!(h.status(&x).await, MatchState::Idle);
    assert_eq!(h.status(&y).await, wait(&pairs, 1, 1, CONFIRM_TTL, TIMEOUT));
    assert_eq!(h.confirm(&g.id, "x").await, ConfirmOutcome::Unknown);
    let z = h.user("z");
    let g2 = h.join_matched(&z, &pairs).await;
    assert_eq!(
        g2,
        pending(&pairs, 2, &[&y, &z], CONFIRM_TTL),
        "no group number was spent on the leaver"
    );
}

/// A confirmed group's record answers its members' status for `keep_confirmed`, then they are
/// idle and may join again.
pub async fn confirmed_record_is_kept_then_idle(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    let [a, b] = ["a", "b"].map(|n| h.user(n));
    let g = h.form_group(&[a.clone(), b.clone()], &q).await;
    h.advance(3 * SEC);
    h.confirm(&g.id, "chat").await;
    h.advance(KEEP_CONFIRMED - MS);
    h.check_members(&confirmed(&g, "chat", MS), "a millisecond before")
        .await;
    h.advance(MS);
    assert_eq!(h.status(&a).await, MatchState::Idle);
    assert_eq!(h.status(&b).await, MatchState::Idle);
    h.join_waiting(&b, &q, 1, 1).await;
    let g2 = h.join_matched(&a, &q).await;
    assert_eq!(g2, pending(&q, 2, &[&b, &a], CONFIRM_TTL));
}
