//! Joins made together: a gateway's newcomers who arrive at once (which a store may place in
//! one call, as the Redis store's batches do) are placed in the order their joins were made,
//! and each is answered on their own, exactly as one join after the other would be.

use super::*;

/// The answers to `sessions`' joins, all made before any is awaited (a store that gathers
/// joins in flight places them together), in their order.
async fn joins_made_together(
    h: &Harness,
    policy: &RoomPolicy,
    sessions: &[SessionId],
) -> Vec<Decision> {
    let calls: Vec<_> = sessions.iter().map(|&s| h.store.join(policy, s)).collect();
    let mut out = Vec::with_capacity(calls.len());
    for call in calls {
        out.push(call.await.expect("join"));
    }
    out
}

/// The place of a `Waiting` answer, or a panic naming `what`.
#[track_caller]
fn seq(d: &Decision, what: &str) -> u64 {
    match d {
        Decision::Waiting {
            place: Some(crate::vocab::Place::Seq(seq)),
            ..
        } => *seq,
        other => panic!("{what}: expected a numbered place, got {other:?}"),
    }
}

/// A hundred newcomers joining at once, while the room is full, stand in the order of their
/// joins, each at the position one join after the other would give them, with rising places;
/// they keep those positions, and the line is served in that order.
pub async fn joins_made_together_keep_their_order(h: &Harness) {
    let p = h.policy(1);
    let holder = h.enter_admitted(&p).await;
    let sessions: Vec<SessionId> = (0..100).map(|_| SessionId::random()).collect();
    let answers = joins_made_together(h, &p, &sessions).await;
    let mut last = 0;
    for (i, d) in answers.iter().enumerate() {
        let n = i as u64 + 1;
        waiting(*d, n, n, &format!("newcomer #{n} of the batch"));
        let place = seq(d, "a newcomer");
        assert!(place > last, "newcomer #{n}: place {place} after {last}");
        last = place;
    }
    for (i, &s) in sessions.iter().enumerate().step_by(9) {
        let n = i as u64 + 1;
        waiting(h.poll(&p, s).await, n, 100, "the place is kept");
    }
    assert!(h.release(&p, holder).await);
    admitted(
        h.poll(&p, sessions[0]).await,
        "the first join is served first",
    );
    waiting(h.poll(&p, sessions[1]).await, 1, 99, "the second is next");
}

/// Newcomers joining at once are each answered on their own: a banned one is refused, a
/// waiter among them keeps their place, a session twice in the batch gets one place, and those
/// beyond the line's bound find it full; the others are placed, in their order, as one join
/// after the other would place them.
pub async fn joins_made_together_are_answered_each_on_their_own(h: &Harness) {
    let p = h.policy(1).with_max_queue_len(5);
    h.enter_admitted(&p).await;
    let waiter = h.enter_waiters(&p, 1).await[0];
    let banned = SessionId::random();
    // Banned before they ever came (the answer says whether they had a place: no).
    h.store
        .ban(&p, banned, h.now() + 60_000)
        .await
        .expect("ban");
    let n: Vec<SessionId> = (0..6).map(|_| SessionId::random()).collect();
    let batch = [n[0], banned, waiter, n[1], n[0], n[2], n[3], n[4], n[5]];
    let answers = joins_made_together(h, &p, &batch).await;
    let what = |i: usize| format!("join #{} of the batch: {:?}", i + 1, answers[i]);
    waiting(answers[0], 2, 2, &what(0));
    assert_eq!(answers[1], Decision::Banned, "{}", what(1));
    waiting(answers[2], 1, 2, &what(2));
    waiting(answers[3], 3, 3, &what(3));
    waiting(answers[4], 2, 3, &what(4));
    assert_eq!(
        seq(&answers[4], "the same session again"),
        seq(&answers[0], "its first join"),
        "one place for a session joining twice"
    );
    waiting(answers[5], 4, 4, &what(5));
    waiting(answers[6], 5, 5, &what(6));
    for i in [7, 8] {
        assert!(
            matches!(answers[i], Decision::Full { waiting: 5 }),
            "{}",
            what(i)
        );
    }
    Harness::check_stats(h.stats(&p).await, 1, 0, 5);
}
