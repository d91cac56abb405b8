//! The fallback: a smaller group formed once the oldest has waited `fallback_after` (seen by a
//! status, a join or a tick), only with two waiters, never for pairs, and in larger queues.

use super::{matched, pending, wait, Harness, CONFIRM_TTL, FALLBACK_AFTER, MS, SEC, TIMEOUT};

/// In a queue of 3, two who wait are matched together exactly when the oldest has waited
/// `fallback_after` (from the oldest's join), not a millisecond before; seen by a status.
pub async fn fallback_exactly_at_fallback_after(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let (a, b) = (h.user("a"), h.user("b"));
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(5 * SEC);
    h.join_waiting(&b, &q, 2, 2).await;
    h.advance(FALLBACK_AFTER - 5 * SEC - MS);
    assert_eq!(
        h.status(&b).await,
        wait(
            &q,
            2,
            2,
            FALLBACK_AFTER - 5 * SEC - MS,
            TIMEOUT - FALLBACK_AFTER + 5 * SEC + MS
        ),
        "a millisecond before the fallback"
    );
    assert_eq!(
        h.status(&a).await,
        wait(&q, 1, 2, FALLBACK_AFTER - MS, TIMEOUT - FALLBACK_AFTER + MS),
    );
    h.advance(MS);
    let g = pending(&q, 1, &[&a, &b], CONFIRM_TTL);
    assert_eq!(
        h.status(&b).await,
        matched(&g),
        "b's status forms the fallback pair as a's wait reaches fallback_after"
    );
    h.check_members(&g, "the fallback pair").await;
    // The queue goes on: the next three make a full group, numbered 2.
    let next = h.users("n", 3);
    let g2 = h.form_group(&next, &q).await;
    assert_eq!(g2.id.number, 2);
    assert_eq!(g2.members, next);
}

/// The fallback forms in a tick when nobody polls, exactly at `fallback_after`.
pub async fn fallback_by_tick(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let (a, b) = (h.user("a"), h.user("b"));
    h.join_waiting(&a, &q, 1, 1).await;
    h.join_waiting(&b, &q, 2, 2).await;
    h.advance(FALLBACK_AFTER - MS);
    assert_eq!(h.tick(&q).await, 0, "a millisecond before");
    h.advance(MS);
    assert_eq!(h.tick(&q).await, 1, "at fallback_after");
    assert_eq!(h.tick(&q).await, 0, "nothing more");
    let g = pending(&q, 1, &[&a, &b], CONFIRM_TTL);
    h.check_members(&g, "the fallback pair").await;
}

/// The fallback needs two: one waiter alone past `fallback_after` keeps waiting, and the next
/// joiner forms a pair with them in that join.
pub async fn fallback_needs_two_waiters(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let (a, b) = (h.user("a"), h.user("b"));
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(FALLBACK_AFTER + 5 * SEC);
    assert_eq!(h.tick(&q).await, 0);
    let waited = FALLBACK_AFTER + 5 * SEC;
    assert_eq!(h.status(&a).await, wait(&q, 1, 1, waited, TIMEOUT - waited));
    let g = h.join_matched(&b, &q).await;
    assert_eq!(
        g,
        pending(&q, 1, &[&a, &b], CONFIRM_TTL),
        "b's join makes two"
    );
}

/// No fallback in a queue of 2: one waiter stays alone, however long, until the timeout.
pub async fn no_fallback_for_pairs(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    let a = h.user("a");
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(FALLBACK_AFTER * 2);
    assert_eq!(h.tick(&q).await, 0);
    let waited = FALLBACK_AFTER * 2;
    assert_eq!(h.status(&a).await, wait(&q, 1, 1, waited, TIMEOUT - waited));
}

/// In a queue of 4 the fallback takes whoever waits, up to 3 (or 2), oldest first, once the
/// oldest has waited `fallback_after`, however short the others' wait.
pub async fn fallback_in_larger_queues(h: &Harness) {
    let h = &h.fresh();
    let q3 = h.queue("quad", 4);
    let [a, b, c] = ["a", "b", "c"].map(|n| h.user(n));
    h.join_waiting(&a, &q3, 1, 1).await;
    h.advance(15 * SEC);
    h.join_waiting(&b, &q3, 2, 2).await;
    h.advance(FALLBACK_AFTER - 15 * SEC - MS);
    h.join_waiting(&c, &q3, 3, 3).await;
    h.advance(MS);
    assert_eq!(h.tick(&q3).await, 1);
    let g = pending(&q3, 1, &[&a, &b, &c], CONFIRM_TTL);
    h.check_members(&g, "three of four").await;

    let q2 = h.queue("quad-too", 4);
    let [d, e] = ["d", "e"].map(|n| h.user(n));
    h.join_all_waiting(&[d.clone(), e.clone()], &q2, 0).await;
    h.advance(FALLBACK_AFTER);
    let g = pending(&q2, 1, &[&d, &e], CONFIRM_TTL);
    assert_eq!(h.status(&e).await, matched(&g), "two of four");
}
