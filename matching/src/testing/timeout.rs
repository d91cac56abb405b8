//! The timeout: a waiter not matched within `timeout` is idle; matched users never time out.

use super::{wait, Harness, CONFIRM_TTL, FALLBACK_AFTER, MS, SEC, TIMEOUT};
use crate::{Group, MatchState};

/// A waiter not matched `timeout` after joining is idle: waiting a millisecond before, idle at
/// `timeout`; they may join again, as a newcomer.
pub async fn timeout_drops_a_waiter(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    let a = h.user("a");
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(TIMEOUT - MS);
    assert_eq!(h.status(&a).await, wait(&q, 1, 1, TIMEOUT - MS, MS));
    h.advance(MS);
    assert_eq!(h.status(&a).await, MatchState::Idle, "at timeout");
    assert_eq!(h.leave(&a).await, MatchState::Idle);
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(SEC);
    assert_eq!(h.status(&a).await, wait(&q, 1, 1, SEC, TIMEOUT - SEC));

    // A timed-out waiter nobody asked about is dropped before the next joiner could be matched
    // with them (here by the fallback).
    let q = h.queue("trio", 3);
    let [b, c, d] = ["b", "c", "d"].map(|n| h.user(n));
    h.join_waiting(&b, &q, 1, 1).await;
    h.advance(FALLBACK_AFTER - SEC);
    h.join_waiting(&c, &q, 2, 2).await;
    h.leave(&c).await;
    h.advance(TIMEOUT - FALLBACK_AFTER + SEC);
    h.join_waiting(&d, &q, 1, 1).await;
    assert_eq!(h.status(&b).await, MatchState::Idle);
}

/// The timeout is only for waiting: a matched user is not dropped when their wait would have
/// timed out.
pub async fn matched_users_do_not_time_out(h: &Harness) {
    let h = &h.fresh();
    let q = h.queue("pair", 2);
    let (a, b) = (h.user("a"), h.user("b"));
    h.join_waiting(&a, &q, 1, 1).await;
    h.advance(TIMEOUT - 2 * SEC);
    let g = h.join_matched(&b, &q).await;
    h.advance(5 * SEC);
    let g = Group {
        expires_in: CONFIRM_TTL - 5 * SEC,
        ..g
    };
    h.check_members(&g, "past a's timeout").await;
    assert_eq!(h.tick(&q).await, 0);
    h.check_members(&g, "after a tick").await;
}
