//! Confirmation: pending groups confirmed with the application's id, retries and conflicts,
//! unknown groups, and groups never confirmed going back to the front with their seniority.

use super::{
    confirmed, matched, pending, wait, Harness, CONFIRM_TTL, FALLBACK_AFTER, KEEP_CONFIRMED, MS,
    SEC, TIMEOUT,
};
use crate::{ConfirmOutcome, Group, GroupId, MatchState};

/// A pending group confirmed with the application's id is confirmed for every member, its
/// record kept `keep_confirmed` from the confirmation.
pub async fn confirm_a_pending_group(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    let (a, b) = (h.user("a"), h.user("b"));
    let g = h.form_group(&[a.clone(), b.clone()], &q).await;
    h.advance(CONFIRM_TTL - MS);
    let c = confirmed(&g, "chat-7", KEEP_CONFIRMED);
    assert_eq!(
        h.confirm(&g.id, "chat-7").await,
        ConfirmOutcome::Confirmed(c.clone()),
        "confirmed a millisecond before confirm_ttl"
    );
    h.check_members(&c, "confirmed").await;
    h.advance(CONFIRM_TTL * 2);
    let c = confirmed(&g, "chat-7", KEEP_CONFIRMED - CONFIRM_TTL * 2);
    h.check_members(&c, "a confirmed group is not undone").await;
}

/// A retried confirmation with the same id answers the group again (and changes nothing: the
/// record's keeping counts from the first); another id is a conflict that changes nothing.
pub async fn confirm_is_idempotent_and_refuses_another_id(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let users = h.users("u", 3);
    let g = h.form_group(&users, &q).await;
    h.confirm(&g.id, "game-1").await;
    h.advance(2 * SEC);
    let c = confirmed(&g, "game-1", KEEP_CONFIRMED - 2 * SEC);
    assert_eq!(
        h.confirm(&g.id, "game-1").await,
        ConfirmOutcome::Confirmed(c.clone()),
        "the same id again"
    );
    assert_eq!(
        h.confirm(&g.id, "game-2").await,
        ConfirmOutcome::Conflict(c.clone()),
        "another id"
    );
    h.check_members(&c, "after the conflict").await;
}

/// A group that does not exist confirms as unknown: never formed (a number not reached, a queue
/// of another size or topic), or its record expired.
pub async fn confirm_unknown_groups(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    assert_eq!(
        h.confirm(&GroupId::new(q.clone(), 1), "x").await,
        ConfirmOutcome::Unknown,
        "nothing formed yet"
    );
    let g = h.form_group(&h.users("u", 2), &q).await;
    assert_eq!(g.id.number, 1);
    for never in [
        GroupId::new(q.clone(), 2),
        GroupId::new(q.clone(), 1_000),
        GroupId::new(h.queue("pair", 3), 1),
        GroupId::new(h.queue("other", 2), 1),
    ] {
        assert_eq!(
            h.confirm(&never, "x").await,
            ConfirmOutcome::Unknown,
            "{never}"
        );
    }
    h.check_members(&g, "untouched").await;
    h.confirm(&g.id, "x").await;
    h.advance(KEEP_CONFIRMED);
    assert_eq!(
        h.confirm(&g.id, "x").await,
        ConfirmOutcome::Unknown,
        "its record expired"
    );
}

/// A group not confirmed `confirm_ttl` after it formed is undone: its members go back to the
/// front of the line, ahead of those who joined after them, in their order, and form a new
/// group (a new number) at once; the old id is then unknown. A millisecond before, it is still
/// pending.
pub async fn unconfirmed_group_goes_back_to_the_front(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("trio", 3);
    let first = h.users("a", 3);
    let g1 = h.form_group(&first, &q).await;
    h.advance(SEC);
    let later = h.users("z", 2);
    h.join_all_waiting(&later, &q, 0).await;
    h.advance(CONFIRM_TTL - SEC - MS);
    assert_eq!(
        h.status(&first[0]).await,
        matched(&Group {
            expires_in: MS,
            ..g1.clone()
        }),
        "a millisecond before"
    );
    h.advance(MS);
    // The undoing and the new group are seen by a later joiner's status.
    assert_eq!(
        h.status(&later[0]).await,
        wait(&q, 1, 2, CONFIRM_TTL - SEC, TIMEOUT - CONFIRM_TTL + SEC),
        "the later joiners still wait: the first three went ahead"
    );
    let g2 = pending(&q, 2, &[&first[0], &first[1], &first[2]], CONFIRM_TTL);
    h.check_members(&g2, "re-formed as group 2").await;
    assert_eq!(h.confirm(&g1.id, "x").await, ConfirmOutcome::Unknown);
    assert_eq!(
        h.confirm(&g2.id, "y").await,
        ConfirmOutcome::Confirmed(confirmed(&g2, "y", KEEP_CONFIRMED))
    );
    assert_eq!(
        h.status(&later[1]).await,
        wait(&q, 2, 2, CONFIRM_TTL - SEC, TIMEOUT - CONFIRM_TTL + SEC)
    );
}

/// A group undone more than `timeout + confirm_ttl` after it expired (nothing touched its
/// queue meanwhile) drops its members instead of putting them back in line: the Redis store's
/// pointers outlive a group only that long, and a member whose pointer expired may be in
/// another group by then. A moment before, they go back as any undone group's do.
pub async fn a_group_undone_long_after_its_expiry_drops_its_members(h: &Harness) {
    let h = &h.fresh();
    // The group expires `CONFIRM_TTL` after it forms, and is stale `TIMEOUT + CONFIRM_TTL` later.
    let stale = CONFIRM_TTL + TIMEOUT + CONFIRM_TTL;
    for back in [true, false] {
        let q = h.queue(if back { "pair-back" } else { "pair-gone" }, 2);
        let two = h.users(if back { "b" } else { "g" }, 2);
        let g = h.form_group(&two, &q).await;
        h.advance(if back { stale - MS } else { stale });
        let seen = h.status(&two[0]).await;
        if back {
            let again = pending(&q, 2, &[&two[0], &two[1]], CONFIRM_TTL);
            assert_eq!(seen, matched(&again), "put back and grouped again");
        } else {
            assert_eq!(seen, MatchState::Idle, "dropped");
            assert_eq!(h.status(&two[1]).await, MatchState::Idle, "both");
        }
        assert_eq!(h.confirm(&g.id, "x").await, ConfirmOutcome::Unknown);
    }
}

/// Undone members go back ahead of a later joiner and are matched before them; with the time
/// they waited counted from their first join, an undone fallback pair forms again at once.
pub async fn undone_groups_keep_their_seniority(h: &Harness) {
    let h = &h.fresh();
    let pairs = h.queue("pair", 2);
    let [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map(|n| h.user(n));
    let g1 = h.form_group(&[a.clone(), b.clone()], &pairs).await;
    h.advance(SEC);
    let g2 = h.form_group(&[c.clone(), d.clone()], &pairs).await;
    h.advance(SEC);
    h.join_waiting(&e, &pairs, 1, 1).await;
    h.advance(CONFIRM_TTL - 2 * SEC);
    // Group 1 is undone: a and b go ahead of e and pair again.
    assert_eq!(
        h.status(&e).await,
        wait(
            &pairs,
            1,
            1,
            CONFIRM_TTL - 2 * SEC,
            TIMEOUT - CONFIRM_TTL + 2 * SEC
        )
    );
    let g3 = pending(&pairs, 3, &[&a, &b], CONFIRM_TTL);
    h.check_members(&g3, "group 1 re-formed").await;
    h.advance(SEC);
    // Group 2 too, a second later.
    assert_eq!(h.tick(&pairs).await, 1);
    let g4 = pending(&pairs, 4, &[&c, &d], CONFIRM_TTL);
    h.check_members(&g4, "group 2 re-formed").await;
    for old in [&g1.id, &g2.id] {
        assert_eq!(h.confirm(old, "x").await, ConfirmOutcome::Unknown, "{old}");
    }

    // A fallback pair undone forms again at once: its oldest has waited long enough.
    let trios = h.queue("trio", 3);
    let (x, y) = (h.user("x"), h.user("y"));
    h.join_all_waiting(&[x.clone(), y.clone()], &trios, 0).await;
    h.advance(FALLBACK_AFTER);
    let f1 = pending(&trios, 1, &[&x, &y], CONFIRM_TTL);
    h.check_members(&f1, "the fallback pair").await;
    h.advance(CONFIRM_TTL);
    assert_eq!(h.tick(&trios).await, 1, "undone and formed again");
    let f2 = pending(&trios, 2, &[&x, &y], CONFIRM_TTL);
    h.check_members(&f2, "the fallback pair, again").await;
}
