//! Ticks (a queue's housekeeping and formation when nobody polls) and queues that share
//! nothing.

use std::time::Duration;

use super::{
    confirmed, matched, pending, wait, Harness, CONFIRM_TTL, FALLBACK_AFTER, KEEP_CONFIRMED, MS,
    TIMEOUT,
};
use crate::{ConfirmOutcome, GroupId};

/// A tick does a queue's housekeeping and formation when nobody polls, and answers how many
/// groups it formed.
pub async fn tick_forms_undoes_and_counts(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let users = h.users("u", 8);
    h.form_group(&users[..3], &q).await;
    h.form_group(&users[3..6], &q).await;
    h.join_all_waiting(&users[6..], &q, 0).await;
    assert_eq!(h.tick(&q).await, 0, "the joins formed everything");
    h.advance(CONFIRM_TTL);
    assert_eq!(h.tick(&q).await, 2, "both groups undone and formed again");
    assert_eq!(h.tick(&q).await, 0);
    let g3 = pending(&q, 3, &[&users[0], &users[1], &users[2]], CONFIRM_TTL);
    let g4 = pending(&q, 4, &[&users[3], &users[4], &users[5]], CONFIRM_TTL);
    h.check_members(&g3, "group 3").await;
    h.check_members(&g4, "group 4").await;
    // Confirmed, they stay; the two later ones fall back when the older of them has waited
    // long enough.
    h.confirm(&g3.id, "g3").await;
    h.confirm(&g4.id, "g4").await;
    h.advance(FALLBACK_AFTER - CONFIRM_TTL - MS);
    assert_eq!(h.tick(&q).await, 0);
    h.advance(MS);
    assert_eq!(h.tick(&q).await, 1, "their fallback pair");
    let g5 = pending(&q, 5, &[&users[6], &users[7]], CONFIRM_TTL);
    h.check_members(&g5, "group 5").await;
    // A tick of another queue touches nothing here.
    h.advance(CONFIRM_TTL);
    assert_eq!(h.tick(&h.queue("trio", 2)).await, 0);
    assert_eq!(h.tick(&h.queue("other", 3)).await, 0);
    assert_eq!(h.tick(&q).await, 1, "group 5 undone and formed again");
    h.check_members(
        &confirmed(&g3, "g3", KEEP_CONFIRMED - FALLBACK_AFTER),
        "group 3 confirmed",
    )
    .await;
    let g6 = pending(&q, 6, &[&users[6], &users[7]], CONFIRM_TTL);
    h.check_members(&g6, "group 6").await;
}

/// Queues share nothing: another topic, or the same topic with another size, is another line
/// with its own group numbers.
pub async fn queues_are_independent(h: &Harness) {
    let h = &h.fresh();
    let x2 = h.queue("x", 2);
    let x3 = h.queue("x", 3);
    let y2 = h.queue("y", 2);
    let [a, b, c, d, e, f] = ["a", "b", "c", "d", "e", "f"].map(|n| h.user(n));
    h.join_waiting(&a, &x2, 1, 1).await;
    h.join_waiting(&b, &y2, 1, 1).await;
    h.join_waiting(&c, &x3, 1, 1).await;
    h.join_waiting(&d, &x3, 2, 2).await;
    let g = h.join_matched(&e, &x2).await;
    assert_eq!(g, pending(&x2, 1, &[&a, &e], CONFIRM_TTL));
    assert_eq!(
        h.confirm(&GroupId::new(x3.clone(), 1), "no").await,
        ConfirmOutcome::Unknown,
        "x2's group 1 is not x3's"
    );
    assert_eq!(h.status(&b).await, wait(&y2, 1, 1, Duration::ZERO, TIMEOUT));
    let g = h.join_matched(&f, &x3).await;
    assert_eq!(g, pending(&x3, 1, &[&c, &d, &f], CONFIRM_TTL));
    // Fallback, timeouts and undoing in one queue leave the others alone.
    h.advance(CONFIRM_TTL);
    assert_eq!(h.tick(&x2).await, 1);
    assert_eq!(
        h.status(&b).await,
        wait(&y2, 1, 1, CONFIRM_TTL, TIMEOUT - CONFIRM_TTL)
    );
    assert_eq!(
        h.status(&c).await,
        matched(&pending(&x3, 2, &[&c, &d, &f], CONFIRM_TTL)),
        "x3's own status undid its own group"
    );
    assert_eq!(
        h.status(&a).await,
        matched(&pending(&x2, 2, &[&a, &e], CONFIRM_TTL))
    );
}
