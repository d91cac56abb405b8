//! The line: first come, first served, no queue jumping, places kept on re-entry and while
//! polling, silent waiters skipped at their turn or swept when abandoned, and a full line.

use super::*;

/// First come, first served: many waiters, released one slot at a time, are admitted strictly in
/// arrival order, and everyone's position is exact at every step.
pub async fn fifo_order(h: &Harness) {
    let p = h.policy(1);
    let mut holder = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 15).await;
    let n = line.len() as u64;
    for (i, &next) in line.iter().enumerate() {
        let i = i as u64;
        assert!(h.release(&p, holder).await, "release of the holder");
        admitted(h.poll(&p, next).await, "the head of the line gets the slot");
        for (j, &behind) in line.iter().enumerate().skip(i as usize + 1) {
            let j = j as u64;
            waiting(
                h.poll(&p, behind).await,
                j - i,
                n - i - 1,
                "the rest keep waiting in order",
            );
        }
        admitted(h.enter(&p, next).await, "the grantee claims");
        holder = next;
    }
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
}

/// FIFO also holds when several slots free at once: the freed slots go to the first in line.
pub async fn fifo_order_several_slots(h: &Harness) {
    let p = h.policy(3);
    let inside = [
        h.enter_admitted(&p).await,
        h.enter_admitted(&p).await,
        h.enter_admitted(&p).await,
    ];
    let line = h.enter_waiters(&p, 6).await;
    assert!(h.release(&p, inside[1]).await);
    assert!(h.release(&p, inside[2]).await);
    admitted(h.poll(&p, line[0]).await, "first in line");
    admitted(h.poll(&p, line[1]).await, "second in line");
    for (j, &w) in line.iter().enumerate().skip(2) {
        waiting(h.poll(&p, w).await, j as u64 - 1, 4, "the rest wait");
    }
    Harness::check_stats(h.stats(&p).await, 1, 2, 4);
}

/// No queue jumping: a newcomer waits while someone is waiting, even right after a slot frees
/// (by release or by expiry); the freed slot goes to the head of the line.
pub async fn no_queue_jumping(h: &Harness) {
    // Freed by release.
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    assert!(h.release(&p, a).await);
    let n = SessionId::random();
    waiting(
        h.enter(&p, n).await,
        1,
        1,
        "a newcomer after a release waits",
    );
    admitted(h.poll(&p, w).await, "the head got the freed slot");

    // Freed by expiry, and the newcomer's call is the first one after it.
    let p = h.policy(1);
    let _a = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    for _ in 0..2 {
        h.advance_ms(ACTIVE_MS / 3);
        waiting(h.poll(&p, w).await, 1, 1, "still waiting");
    }
    h.advance_ms(ACTIVE_MS / 3 - 1);
    waiting(h.poll(&p, w).await, 1, 1, "1 ms before the slot ends");
    h.advance_ms(2);
    let n = SessionId::random();
    waiting(
        h.enter(&p, n).await,
        1,
        1,
        "a newcomer arriving as a slot expires waits",
    );
    admitted(h.poll(&p, w).await, "the head got the expired slot");
    Harness::check_stats(h.stats(&p).await, 0, 1, 1);
}

/// Re-entering keeps the old place: same position, no duplicate entry, for waiters; no second
/// slot for holders.
pub async fn reentering_keeps_place(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    h.advance_ms(1_000);
    waiting(h.enter(&p, line[1]).await, 2, 3, "re-entering, middle");
    waiting(h.enter(&p, line[1]).await, 2, 3, "re-entering again");
    waiting(h.enter(&p, line[0]).await, 1, 3, "re-entering, head");
    waiting(h.enter(&p, line[2]).await, 3, 3, "re-entering, tail");
    Harness::check_stats(h.stats(&p).await, 1, 0, 3);
    let late = h.enter_waiters(&p, 1).await[0];
    waiting(
        h.enter(&p, line[1]).await,
        2,
        4,
        "re-entering after newcomers",
    );
    waiting(h.poll(&p, late).await, 4, 4, "the newcomer is behind");

    // The holder re-entering keeps (and extends) its one slot.
    h.advance_ms(1_000);
    let e = admitted(h.enter(&p, a).await, "the holder re-enters");
    assert_eq!(e, h.now() + ACTIVE_MS, "re-entering extends the slot");
    Harness::check_stats(h.stats(&p).await, 1, 0, 4);
    waiting(
        h.poll(&p, line[0]).await,
        1,
        4,
        "nobody moved up: no slot was taken twice or freed",
    );
}

/// Positions are 1-based, `waiting` is the length of the line, and positions move up as people
/// ahead leave or get in.
pub async fn positions_move_up(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 5).await;
    for (i, &w) in line.iter().enumerate() {
        waiting(h.poll(&p, w).await, i as u64 + 1, 5, "initial positions");
    }
    // The third leaves.
    assert!(h.release(&p, line[2]).await);
    waiting(h.poll(&p, line[0]).await, 1, 4, "ahead of the leaver");
    waiting(h.poll(&p, line[1]).await, 2, 4, "ahead of the leaver");
    waiting(h.poll(&p, line[3]).await, 3, 4, "behind the leaver");
    waiting(h.poll(&p, line[4]).await, 4, 4, "behind the leaver");
    assert_eq!(
        h.poll(&p, line[2]).await,
        Decision::Unknown,
        "the leaver is gone"
    );
    // The head gets in.
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, line[0]).await, "the head is promoted");
    waiting(h.poll(&p, line[1]).await, 1, 3, "moved up");
    waiting(h.poll(&p, line[3]).await, 2, 3, "moved up");
    waiting(h.poll(&p, line[4]).await, 3, 3, "moved up");
    Harness::check_stats(h.stats(&p).await, 0, 1, 3);
}

// ---------------------------------------------------------------------------------------------
// Poll
// ---------------------------------------------------------------------------------------------

/// Poll of an unknown session is `Unknown` and creates nothing: no place, no slot, no count.
pub async fn poll_unknown_creates_nothing(h: &Harness) {
    // In a fresh room with free capacity.
    let p = h.policy(1);
    let x = SessionId::random();
    assert_eq!(h.poll(&p, x).await, Decision::Unknown);
    assert_eq!(h.poll(&p, x).await, Decision::Unknown, "still unknown");
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    h.enter_admitted(&p).await;

    // In a busy room.
    let p = h.policy(2);
    h.enter_admitted(&p).await;
    h.enter_admitted(&p).await;
    h.enter_waiters(&p, 2).await;
    let before = h.stats(&p).await;
    let y = SessionId::random();
    assert_eq!(h.poll(&p, y).await, Decision::Unknown);
    assert_eq!(
        h.stats(&p).await,
        before,
        "poll of an unknown changed the room"
    );
    waiting(
        h.enter(&p, y).await,
        3,
        3,
        "after the poll, entering joins at the back",
    );
}

/// A waiter who keeps polling keeps their place for as long as they poll, far beyond queue_ttl.
pub async fn polling_waiter_is_not_skipped(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    for _ in 0..10 {
        h.advance_ms(QUEUE_MS / 3);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        waiting(h.poll(&p, line[0]).await, 1, 2, "head keeps polling");
        waiting(h.poll(&p, line[1]).await, 2, 2, "second keeps polling");
    }
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, line[0]).await, "the polling head gets the slot");
    waiting(h.poll(&p, line[1]).await, 1, 1, "second moves up");
}

/// A waiter silent for longer than queue_ttl is skipped when their turn comes: the slot goes to
/// the next live waiter, and the silent one has lost their place.
pub async fn silent_waiter_is_skipped(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    let (silent, live) = (line[0], line[1]);
    for _ in 0..4 {
        h.advance_ms(QUEUE_MS / 3);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        assert!(
            matches!(h.poll(&p, live).await, Decision::Waiting { .. }),
            "the live waiter waits"
        );
    }
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, live).await, "the live waiter gets the slot");
    assert_eq!(
        h.poll(&p, silent).await,
        Decision::Unknown,
        "the silent waiter lost their place"
    );
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);
    waiting(
        h.enter(&p, silent).await,
        1,
        1,
        "coming back, the silent one joins at the back and gets no slot",
    );
}

/// A waiter silent for longer than queue_ttl (but not abandon_after) who comes back before their
/// turn keeps their place: from the middle of the line, and from its head while no slot has
/// freed yet.
pub async fn returning_waiter_keeps_place(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    // The head and the second go away for twice queue_ttl; the third keeps polling.
    for _ in 0..6 {
        h.advance_ms(QUEUE_MS / 3);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        waiting(h.poll(&p, line[2]).await, 3, 3, "the absent still count");
    }
    Harness::check_stats(h.stats(&p).await, 1, 0, 3);
    waiting(
        h.poll(&p, line[1]).await,
        2,
        3,
        "back in the middle: same place",
    );
    waiting(
        h.poll(&p, line[0]).await,
        1,
        3,
        "back at the head before any slot freed: same place",
    );
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, line[0]).await, "the returned head gets the slot");
    waiting(
        h.poll(&p, line[1]).await,
        1,
        2,
        "the returned second moves up",
    );
    waiting(h.poll(&p, line[2]).await, 2, 2, "the third moves up");
}

/// A waiter who went silent in the middle of the line and is still silent (for longer than
/// queue_ttl) when their turn comes is skipped then: the slot goes to the next live waiter.
pub async fn silent_at_their_turn_is_skipped(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    let (first, silent, last) = (line[0], line[1], line[2]);
    for _ in 0..4 {
        h.advance_ms(QUEUE_MS / 3);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        waiting(h.poll(&p, first).await, 1, 3, "the head polls");
        waiting(h.poll(&p, last).await, 3, 3, "the tail polls");
    }
    assert!(h.release(&p, a).await);
    admitted(
        h.enter(&p, first).await,
        "the live head gets the slot and claims",
    );
    waiting(
        h.poll(&p, last).await,
        2,
        2,
        "the silent one is at the head now, but it is not their turn",
    );
    assert!(h.release(&p, first).await);
    admitted(
        h.poll(&p, last).await,
        "at the silent one's turn, the slot goes to the next live waiter",
    );
    assert_eq!(
        h.poll(&p, silent).await,
        Decision::Unknown,
        "the silent one lost their place"
    );
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);
}

/// A waiter silent for longer than abandon_after is dropped from anywhere in the line by the
/// sweep of [`SnapshotStore::sync`] (liveness is to the epoch: seen within abandon_after, kept;
/// silent for longer than 3/2 of it, swept): the positions of those behind and the line's
/// length no longer count them. No other call sweeps. On a store that keeps snapshots.
pub async fn abandoned_waiters_are_swept(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 4).await;
    let entered = h.now();
    // line[1] and line[2] go silent; the head and the tail keep polling, the holder stays, so
    // nobody is promoted or skipped at the head.
    let step = QUEUE_MS / 3;
    while h.now() + step < entered + ABANDON_MS {
        h.advance_ms(step);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        waiting(h.poll(&p, line[0]).await, 1, 4, "the head polls");
        waiting(
            h.poll(&p, line[3]).await,
            4,
            4,
            "before abandon_after, the silent still count",
        );
        assert_eq!(
            h.sync(&p, Vec::new()).await.waiting,
            4,
            "seen within abandon_after: not swept"
        );
    }
    // Changed for store v2: liveness is to the epoch, so the silent are certainly swept only
    // once silent for longer than 3/2 of abandon_after (was: just past abandon_after), and only
    // by `sync` (was: by any call).
    while h.now() + step < entered + ABANDON_MS * 3 / 2 + 1_000 {
        h.advance_ms(step);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        h.poll(&p, line[0]).await;
        h.poll(&p, line[3]).await;
    }
    h.advance_ms(entered + ABANDON_MS * 3 / 2 + 1_000 - h.now());
    admitted(h.heartbeat(&p, a).await, "the holder stays");
    Harness::check_stats(h.stats(&p).await, 1, 0, 4);
    waiting(
        h.poll(&p, line[3]).await,
        4,
        4,
        "only sync sweeps: the silent still count before it",
    );
    assert_eq!(h.sync(&p, Vec::new()).await.waiting, 2, "swept by sync");
    Harness::check_stats(h.stats(&p).await, 1, 0, 2);
    waiting(h.poll(&p, line[0]).await, 1, 2, "the head stays");
    waiting(h.poll(&p, line[3]).await, 2, 2, "the tail moved up");
    assert_eq!(h.poll(&p, line[1]).await, Decision::Unknown, "swept");
    assert_eq!(h.poll(&p, line[2]).await, Decision::Unknown, "swept");
}

/// The sweep of abandoned waiters is bounded: at most 100 per `sync` call
/// (no other call sweeps), and no waiter silent for less than abandon_after is swept with them.
pub async fn abandoned_sweep_is_bounded(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let per_call = u64::from(MAX_SWEEP_PER_CALL);
    let n = 2 * per_call + 50;
    let hour = Duration::from_secs(3_600);
    let p = h
        .policy(1)
        .with_ttls(hour, GRANT_TTL, QUEUE_TTL)
        .with_abandon_after(ABANDON_AFTER);
    let _a = h.enter_admitted(&p).await;
    h.enter_waiters(&p, n).await;
    // Changed for store v2: the abandoned are silent for longer than 3/2 of abandon_after
    // (liveness is to the epoch), the live one for less than abandon_after; the sweep is
    // `sync`'s, so the calls counted are syncs (was: stats).
    h.advance_ms(ABANDON_MS);
    let live = h.enter_waiters(&p, 1).await[0];
    h.advance_ms(ABANDON_MS * 3 / 5 + 1_000);
    let mut left = n + 1;
    assert_eq!(h.stats(&p).await.waiting, left, "stats does not sweep");
    waiting(h.poll(&p, live).await, left, left, "poll does not sweep");
    for call in 1..=3 {
        let now_left = h.sync(&p, Vec::new()).await.waiting;
        assert!(
            now_left < left && now_left + per_call >= left,
            "call {call} swept {} abandoned waiters; at most {per_call} allowed",
            left as i64 - now_left as i64
        );
        left = now_left;
    }
    assert_eq!(left, 1, "only the live waiter is left");
    waiting(h.poll(&p, live).await, 1, 1, "the live waiter moved up");
}

// ---------------------------------------------------------------------------------------------
// A full line
// ---------------------------------------------------------------------------------------------

/// At max_queue_len the answer is `Full { waiting }` and the line stops growing; people already
/// in line keep their place; once someone leaves, a newcomer can join.
pub async fn full_line(h: &Harness) {
    let p = h.policy(1).with_max_queue_len(3);
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    for _ in 0..3 {
        let x = SessionId::random();
        assert_eq!(h.enter(&p, x).await, Decision::Full { waiting: 3 });
        assert_eq!(h.poll(&p, x).await, Decision::Unknown, "not added");
    }
    Harness::check_stats(h.stats(&p).await, 1, 0, 3);
    waiting(
        h.enter(&p, line[2]).await,
        3,
        3,
        "a waiter re-entering a full line keeps their place",
    );
    assert!(h.release(&p, line[0]).await);
    let x = SessionId::random();
    waiting(h.enter(&p, x).await, 3, 3, "room in the line again");
    assert_eq!(
        h.enter(&p, SessionId::random()).await,
        Decision::Full { waiting: 3 }
    );
}
