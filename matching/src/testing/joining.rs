//! Joining and waiting: a join's position and times, a stranger who is idle, the group formed in
//! the join that completes it, one place per user, the oldest first, and positions that shift
//! when someone leaves the line.

use std::time::Duration;

use super::{
    confirmed, matched, pending, wait, Harness, CONFIRM_TTL, KEEP_CONFIRMED, MS, SEC, TIMEOUT,
};
use crate::{ConfirmOutcome, GroupId, JoinOutcome, MatchState};

/// A join waits: position and line length, how long waited (from the store clock) and when the
/// wait times out; a status answers the same, with the time that passed.
pub async fn join_waits_with_position_and_times(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("chess", 3);
    let (ann, bob) = (h.user("ann"), h.user("bob"));
    h.join_waiting(&ann, &q, 1, 1).await;
    h.advance(3 * SEC);
    assert_eq!(
        h.status(&ann).await,
        wait(&q, 1, 1, 3 * SEC, TIMEOUT - 3 * SEC),
        "ann after 3 s"
    );
    h.join_waiting(&bob, &q, 2, 2).await;
    h.advance(1_500 * MS);
    assert_eq!(
        h.status(&ann).await,
        wait(&q, 1, 2, 4_500 * MS, TIMEOUT - 4_500 * MS),
        "ann sees bob behind her"
    );
    assert_eq!(
        h.status(&bob).await,
        wait(&q, 2, 2, 1_500 * MS, TIMEOUT - 1_500 * MS),
        "bob"
    );
}

/// A stranger (never joined) is idle; asking does not make them anything.
pub async fn status_of_a_stranger_is_idle(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("chess", 2);
    let ghost = h.user("ghost");
    assert_eq!(h.status(&ghost).await, MatchState::Idle);
    assert_eq!(h.leave(&ghost).await, MatchState::Idle);
    assert_eq!(h.tick(&q).await, 0, "an unknown queue forms nothing");
    h.join_waiting(&h.user("ann"), &q, 1, 1).await;
    assert_eq!(h.status(&ghost).await, MatchState::Idle);
}

/// The `size`-th join forms a group in that very join: pending, members oldest first, numbered
/// from 1 in each queue; every member's status answers it.
pub async fn group_forms_in_the_join_that_completes_it(h: &Harness) {
    let h = &h.fresh();
    let pairs = h.queue("go", 2);
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|n| h.user(n));
    h.join_waiting(&a, &pairs, 1, 1).await;
    h.advance(2 * SEC);
    let g1 = h.join_matched(&b, &pairs).await;
    assert_eq!(
        g1,
        pending(&pairs, 1, &[&a, &b], CONFIRM_TTL),
        "the first pair"
    );
    h.check_members(&g1, "group 1").await;
    h.join_waiting(&c, &pairs, 1, 1).await;
    let g2 = h.join_matched(&d, &pairs).await;
    assert_eq!(
        g2,
        pending(&pairs, 2, &[&c, &d], CONFIRM_TTL),
        "the second pair"
    );
    h.advance(4 * SEC);
    assert_eq!(
        h.status(&a).await,
        matched(&pending(&pairs, 1, &[&a, &b], CONFIRM_TTL - 4 * SEC)),
        "group 1 counts down to its undoing"
    );

    let trios = h.queue("go", 3);
    let [x, y, z] = ["x", "y", "z"].map(|n| h.user(n));
    let g = h
        .form_group(&[x.clone(), y.clone(), z.clone()], &trios)
        .await;
    assert_eq!(g, pending(&trios, 1, &[&x, &y, &z], CONFIRM_TTL), "a trio");

    let fives = h.queue("go", 5);
    let five = h.users("f", 5);
    let g = h.form_group(&five, &fives).await;
    assert_eq!(g.members, five, "five, oldest first");
    assert_eq!(g.id, GroupId::new(fives, 1));
}

/// One place per user: joining again (the same queue, another queue; while waiting, pending or
/// confirmed) is a conflict that carries where the user stands, and changes nothing.
pub async fn one_place_per_user(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("chess", 3);
    let other = h.queue("go", 2);
    let [ann, bob, cat, dan] = ["ann", "bob", "cat", "dan"].map(|n| h.user(n));
    h.join_waiting(&ann, &q, 1, 1).await;
    h.join_waiting(&bob, &q, 2, 2).await;
    h.advance(SEC);
    let stands = wait(&q, 1, 2, SEC, TIMEOUT - SEC);
    assert_eq!(
        h.join(&ann, &q).await,
        JoinOutcome::Conflict(stands.clone()),
        "again, the same queue"
    );
    assert_eq!(
        h.join(&ann, &other).await,
        JoinOutcome::Conflict(stands.clone()),
        "another queue"
    );
    assert_eq!(
        h.join(&ann, &h.queue("chess", 2)).await,
        JoinOutcome::Conflict(stands.clone()),
        "the same topic, another size"
    );
    assert_eq!(h.status(&ann).await, stands, "ann kept her place and time");
    assert_eq!(
        h.status(&bob).await,
        wait(&q, 2, 2, SEC, TIMEOUT - SEC),
        "nobody was added"
    );
    // Nobody waits in the other queue: dan is first there, alone.
    h.join_waiting(&dan, &other, 1, 1).await;
    assert_eq!(
        h.leave(&dan).await,
        wait(&other, 1, 1, Duration::ZERO, TIMEOUT)
    );

    // Pending.
    let g = h.join_matched(&cat, &q).await;
    assert_eq!(g, pending(&q, 1, &[&ann, &bob, &cat], CONFIRM_TTL));
    h.advance(SEC);
    let g = pending(&q, 1, &[&ann, &bob, &cat], CONFIRM_TTL - SEC);
    for (u, queue) in [(&ann, &q), (&bob, &other), (&cat, &q)] {
        assert_eq!(
            h.join(u, queue).await,
            JoinOutcome::Conflict(matched(&g)),
            "{u} while pending"
        );
    }
    h.check_members(&g, "after the conflicts").await;

    // Confirmed.
    let ConfirmOutcome::Confirmed(c) = h.confirm(&g.id, "room-1").await else {
        panic!("confirm")
    };
    assert_eq!(c, confirmed(&g, "room-1", KEEP_CONFIRMED));
    h.advance(SEC);
    let c = confirmed(&g, "room-1", KEEP_CONFIRMED - SEC);
    for (u, queue) in [(&ann, &other), (&bob, &q)] {
        assert_eq!(
            h.join(u, queue).await,
            JoinOutcome::Conflict(matched(&c)),
            "{u} while confirmed"
        );
    }
    h.check_members(&c, "after the conflicts").await;
    // Still nobody in the other queue.
    h.join_waiting(&dan, &other, 1, 1).await;
}

/// Oldest first: many joins form groups in join order, positions count from the oldest and
/// restart as groups form.
pub async fn oldest_first_across_many_joins(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("poker", 4);
    let users = h.users("u", 22);
    let mut number = 0;
    for chunk in users.chunks(4) {
        for (i, u) in chunk.iter().enumerate() {
            if i + 1 < 4 {
                let n = i as u64 + 1;
                h.join_waiting(u, &q, n, n).await;
                h.advance(100 * MS);
                // Every earlier waiter of the chunk moved nowhere and sees the new one.
                for (j, earlier) in chunk[..=i].iter().enumerate() {
                    let st = h.status(earlier).await;
                    let MatchState::Waiting(w) = &st else {
                        panic!("{earlier}: {st:?}")
                    };
                    assert_eq!((w.position, w.waiting), (j as u64 + 1, n), "{earlier}");
                }
            } else {
                number += 1;
                let g = h.join_matched(u, &q).await;
                assert_eq!(g.members, chunk, "group {number}: the chunk, oldest first");
                assert_eq!(g.id.number, number);
            }
        }
    }
    // The last two wait, at positions 1 and 2.
    for (i, u) in users[20..].iter().enumerate() {
        let st = h.status(u).await;
        let MatchState::Waiting(w) = &st else {
            panic!("{u}: {st:?}")
        };
        assert_eq!((w.position, w.waiting), (i as u64 + 1, 2), "{u}");
    }
    // Every group kept its members.
    for (k, chunk) in users[..20].chunks(4).enumerate() {
        let g = h.group_of(&chunk[0]).await;
        assert_eq!(g.id.number, k as u64 + 1);
        assert_eq!(g.members, chunk);
    }
}

/// A waiter who leaves is out at once: those behind move up, the leave answers where the leaver
/// stood, and the next group is formed without them.
pub async fn leaving_the_line_shifts_positions(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("bridge", 4);
    let [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map(|n| h.user(n));
    h.join_all_waiting(&[a.clone(), b.clone(), c.clone()], &q, 0)
        .await;
    h.advance(SEC);
    assert_eq!(
        h.leave(&b).await,
        wait(&q, 2, 3, SEC, TIMEOUT - SEC),
        "b's leave answers where b stood"
    );
    assert_eq!(h.status(&b).await, MatchState::Idle);
    assert_eq!(h.status(&a).await, wait(&q, 1, 2, SEC, TIMEOUT - SEC));
    assert_eq!(h.status(&c).await, wait(&q, 2, 2, SEC, TIMEOUT - SEC));
    assert_eq!(h.leave(&b).await, MatchState::Idle, "a second leave");
    h.join_waiting(&d, &q, 3, 3).await;
    let g = h.join_matched(&e, &q).await;
    assert_eq!(g, pending(&q, 1, &[&a, &c, &d, &e], CONFIRM_TTL));
    assert_eq!(h.status(&b).await, MatchState::Idle);
    // The oldest leaves: the next is first.
    let [f, g2, k] = ["f", "g", "k"].map(|n| h.user(n));
    h.join_all_waiting(&[f.clone(), g2.clone(), k.clone()], &q, 0)
        .await;
    assert_eq!(h.leave(&f).await, wait(&q, 1, 3, Duration::ZERO, TIMEOUT));
    assert_eq!(h.status(&g2).await, wait(&q, 1, 2, Duration::ZERO, TIMEOUT));
    assert_eq!(h.status(&k).await, wait(&q, 2, 2, Duration::ZERO, TIMEOUT));
}
