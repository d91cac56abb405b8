//! The scheduled opening's part of the suite ([`EventSchedule`]): nobody admitted before the
//! opening, the pre-queue in draw order ahead of later arrivals, places kept across reloads,
//! registrants neither skipped nor swept for waiting for the opening, and the closing.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use super::{admitted, waiting, Harness, ABANDON_MS, ACTIVE_MS, QUEUE_MS};
use crate::config::EventSchedule;
use crate::store::Decision;
use crate::{RoomPolicy, SessionId};

/// The draw secret of the suite's scheduled rooms.
const DRAW_SECRET: &[u8; 32] = b"conformance pre-queue draw key!!";

impl Harness {
    /// A room of `capacity` opening `opens_in_ms` from now (a negative offset: in the past),
    /// and closing `closes_in_ms` from now if given, keeping its line after the closing or not.
    pub fn scheduled_policy(
        &self,
        capacity: u32,
        opens_in_ms: i64,
        closes_in_ms: Option<i64>,
        keep_line_after_close: bool,
    ) -> RoomPolicy {
        let at = |offset: i64| {
            UNIX_EPOCH + Duration::from_millis(self.now().saturating_add_signed(offset))
        };
        let schedule = EventSchedule::new(at(opens_in_ms), DRAW_SECRET)
            .with_closes_at(closes_in_ms.map(at))
            .with_keep_line_after_close(keep_line_after_close);
        self.policy(capacity).with_schedule(Some(schedule))
    }
}

fn opens_at(p: &RoomPolicy) -> u64 {
    p.schedule.as_ref().expect("a scheduled policy").opens_at_ms
}

#[track_caller]
fn scheduled(d: Decision, p: &RoomPolicy, what: &str) {
    assert_eq!(
        d,
        Decision::Scheduled {
            opens_at_ms: opens_at(p)
        },
        "{what}"
    );
}

/// `sessions` in the order their draws put them (ties by session id, as Redis orders equal
/// scores by member).
fn draw_order(p: &RoomPolicy, sessions: &[SessionId]) -> Vec<SessionId> {
    let schedule = p.schedule.as_ref().expect("a scheduled policy");
    let mut order = sessions.to_vec();
    order.sort_by_key(|&s| (schedule.draw(s), s));
    order
}

/// Before the opening nobody is admitted, with free slots and nobody else waiting: newcomers
/// are registered (`Scheduled`, counted as waiting), a reload or a poll says the same, and an
/// operator's `admit_next` lets nobody in. At the opening the slots go to registrants.
pub async fn scheduled_room_admits_nobody_before_the_opening(h: &Harness) {
    let p = h.scheduled_policy(5, 60_000, None, true);
    let mut registered = Vec::new();
    for i in 0..3 {
        let s = SessionId::random();
        scheduled(h.enter(&p, s).await, &p, &format!("registrant #{i}"));
        registered.push(s);
    }
    h.advance_ms(59_999);
    for &s in &registered {
        scheduled(h.enter(&p, s).await, &p, "a reload just before the opening");
        scheduled(h.poll(&p, s).await, &p, "a poll just before the opening");
    }
    assert_eq!(
        h.admit_next(&p, 10).await,
        0,
        "admit_next before the opening"
    );
    assert_eq!(h.poll(&p, SessionId::random()).await, Decision::Unknown);
    Harness::check_stats(h.stats(&p).await, 0, 0, 3);
    h.advance_ms(1);
    // The first call at the opening grants the free slots to the registrants.
    Harness::check_stats(h.stats(&p).await, 0, 3, 0);
    for &s in &registered {
        admitted(h.enter(&p, s).await, "a registrant at the opening");
    }
    // A newcomer now finds the line empty and a free slot.
    h.enter_admitted(&p).await;
}

/// At the opening the registrants stand in the order of their draws, whatever the order they
/// came in, and re-entering (a reload) before or after the opening keeps that place.
pub async fn pre_queue_order_is_the_draw_order(h: &Harness) {
    let p = h.scheduled_policy(1, 30_000, None, true);
    let arrivals: Vec<SessionId> = (0..24).map(|_| SessionId::random()).collect();
    for &s in &arrivals {
        scheduled(h.enter(&p, s).await, &p, "registering");
        h.advance_ms(100);
    }
    // Reloads in another order change nothing.
    for &s in arrivals.iter().rev() {
        scheduled(h.enter(&p, s).await, &p, "reloading");
    }
    let order = draw_order(&p, &arrivals);
    h.advance_ms(30_000);
    // The first by draw got the one slot; the rest stand in draw order behind.
    admitted(h.poll(&p, order[0]).await, "the first by draw");
    for (i, &s) in order.iter().enumerate().skip(1) {
        waiting(h.poll(&p, s).await, i as u64, 23, &format!("#{i} by draw"));
        waiting(
            h.enter(&p, s).await,
            i as u64,
            23,
            &format!("#{i} by draw, re-entering"),
        );
    }
}

/// Arrivals after the opening are first come, first served behind every registrant.
pub async fn arrivals_after_the_opening_wait_behind_the_registrants(h: &Harness) {
    let p = h.scheduled_policy(1, 10_000, None, true);
    let registrants: Vec<SessionId> = (0..5).map(|_| SessionId::random()).collect();
    for &s in &registrants {
        scheduled(h.enter(&p, s).await, &p, "registering");
    }
    h.advance_ms(10_000);
    let later = h.enter_waiters(&p, 3).await;
    let order = draw_order(&p, &registrants);
    for (i, &s) in order.iter().enumerate().skip(1) {
        waiting(h.poll(&p, s).await, i as u64, 7, "a registrant");
    }
    for (i, &s) in later.iter().enumerate() {
        waiting(h.poll(&p, s).await, 5 + i as u64, 7, "a later arrival");
    }
    // The line drains registrants first, in draw order, then the later arrivals in turn: each
    // is admitted (a claim of their grant) when the one before leaves.
    for (i, &s) in order.iter().chain(&later).enumerate() {
        admitted(h.enter(&p, s).await, &format!("#{i} at their turn"));
        assert!(h.release(&p, s).await);
    }
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
}

/// A registrant who waited for the opening without a word (longer than `abandon_after`) is
/// neither swept nor skipped for it: their silence counts from the opening. Silent for longer
/// than `queue_ttl` after it, they are skipped at their turn as anyone.
pub async fn registrants_are_not_skipped_or_swept_for_waiting(h: &Harness) {
    let wait = ABANDON_MS + 2 * QUEUE_MS;
    let p = h.scheduled_policy(1, wait as i64, None, true);
    let registrants: Vec<SessionId> = (0..3).map(|_| SessionId::random()).collect();
    for &s in &registrants {
        scheduled(h.enter(&p, s).await, &p, "registering");
    }
    let order = draw_order(&p, &registrants);
    h.advance_ms(wait);
    // Not swept by the sweep (`sync`'s) at the opening: silent since registering, but their
    // silence counts from the opening.
    if h.snapshots().is_some() {
        assert_eq!(h.sync(&p, Vec::new()).await.waiting, 2, "nobody swept");
    }
    Harness::check_stats(h.stats(&p).await, 0, 1, 2);
    admitted(
        h.enter(&p, order[0]).await,
        "the first by draw, silent until the opening",
    );
    waiting(
        h.poll(&p, order[1]).await,
        1,
        2,
        "the second, silent until the opening",
    );
    // The third stays silent past 5/4 of queue_ttl after the opening (liveness is to the
    // epoch; changed for store v2 from "just past queue_ttl"): skipped at their turn.
    h.advance_ms(QUEUE_MS / 2);
    waiting(h.poll(&p, order[1]).await, 1, 2, "the second, polling");
    h.advance_ms(QUEUE_MS * 3 / 4 + 1_000);
    waiting(h.poll(&p, order[1]).await, 1, 2, "the second, polling");
    assert!(h.release(&p, order[0]).await);
    admitted(h.enter(&p, order[1]).await, "the second at their turn");
    assert!(h.release(&p, order[1]).await);
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    assert_eq!(h.poll(&p, order[2]).await, Decision::Unknown, "skipped");
}

/// A scheduled room's pace is measured from its opening, however long the pre-queue was: at
/// the opening the wait estimate says "estimating", not "stalled". The oldest wait is the
/// pre-queue's, from its first registration.
pub async fn pace_is_measured_from_the_opening(h: &Harness) {
    let p = h.scheduled_policy(1, 600_000, None, true);
    let registrants: Vec<SessionId> = (0..3).map(|_| SessionId::random()).collect();
    for &s in &registrants {
        scheduled(h.enter(&p, s).await, &p, "registering");
    }
    h.advance_ms(600_000 + 2_000);
    let order = draw_order(&p, &registrants);
    // The pace is read from the snapshot, as gateways do (changed for store v2: the poll answer
    // of a store that keeps snapshots need not carry it).
    match h.poll(&p, order[2]).await {
        Decision::Waiting {
            position,
            waiting,
            pace,
            paused,
            ..
        } => {
            assert_eq!((position, waiting), (2, 2));
            let (pace, paused) = if Arc::clone(&h.store).snapshots().is_some() {
                let snapshot = h.sync(&p, Vec::new()).await;
                (snapshot.pace, snapshot.paused)
            } else {
                (pace, paused)
            };
            assert_eq!(
                pace.observed_ms, 2_000,
                "measured from the opening: {pace:?}"
            );
            let eta =
                crate::eta::estimate(&crate::eta::EtaInput::new(position, waiting, pace, paused));
            assert_eq!(eta, crate::eta::Eta::Estimating, "{pace:?}");
        }
        other => panic!("a registrant after the opening: {other:?}"),
    }
    // The oldest wait of a registrant counts from the pre-queue's first registration.
    assert_eq!(h.stats(&p).await.oldest_wait_ms, Some(602_000));
}

/// An opening in the past opens at once: a newcomer is admitted, not registered.
pub async fn an_opening_in_the_past_opens_at_once(h: &Harness) {
    let p = h.scheduled_policy(1, -1_000, None, true);
    h.enter_admitted(&p).await;
    waiting(h.enter(&p, SessionId::random()).await, 1, 1, "the next");
}

/// From the closing, newcomers get `Closed`; those in line keep their place and the line keeps
/// moving; slots run their course.
pub async fn closing_refuses_newcomers_and_keeps_the_line(h: &Harness) {
    let p = h.scheduled_policy(1, 0, Some(10_000), true);
    let a = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 2).await;
    h.advance_ms(10_000);
    let n = SessionId::random();
    assert_eq!(h.enter(&p, n).await, Decision::Closed, "a newcomer");
    assert_eq!(h.poll(&p, n).await, Decision::Closed, "a newcomer's poll");
    waiting(h.poll(&p, w[0]).await, 1, 2, "a waiter");
    waiting(h.enter(&p, w[1]).await, 2, 2, "a waiter re-entering");
    admitted(h.heartbeat(&p, a).await, "a slot holder");
    assert!(h.release(&p, a).await);
    admitted(
        h.enter(&p, w[0]).await,
        "the next in line, promoted after the closing",
    );
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
}

/// With `keep_line_after_close` off, everyone without a slot gets `Closed` from the closing
/// and nobody is promoted; slots run their course.
pub async fn closing_without_the_line_refuses_everyone_without_a_slot(h: &Harness) {
    let p = h.scheduled_policy(1, 0, Some(10_000), false);
    let a = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    h.advance_ms(10_000);
    assert_eq!(h.enter(&p, SessionId::random()).await, Decision::Closed);
    assert_eq!(h.poll(&p, w).await, Decision::Closed, "a waiter");
    assert_eq!(
        h.enter(&p, w).await,
        Decision::Closed,
        "a waiter re-entering"
    );
    let expires = admitted(h.heartbeat(&p, a).await, "a slot holder");
    assert_eq!(expires, h.now() + ACTIVE_MS, "a slot runs its course");
    assert!(h.release(&p, a).await);
    Harness::check_stats(h.stats(&p).await, 0, 0, 1);
    assert_eq!(h.poll(&p, w).await, Decision::Closed, "nobody promoted");
}

/// A call without the schedule (a gateway built without it, mid rolling deploy) follows the
/// opening the store kept from the calls that had it: before it, nobody is admitted (not the
/// registrants at the head, not a newcomer into free slots) and its newcomers are registered
/// behind the drawn registrants, first come, first served. From the opening it is a plain line.
pub async fn a_call_without_the_schedule_keeps_the_kept_opening(h: &Harness) {
    let p = h.scheduled_policy(3, 30_000, None, true);
    let mut plain = p.clone();
    plain.schedule = None;
    let registrants: Vec<SessionId> = (0..2).map(|_| SessionId::random()).collect();
    for &s in &registrants {
        scheduled(h.enter(&p, s).await, &p, "a registrant");
    }
    let newcomer = SessionId::random();
    scheduled(
        h.enter(&plain, newcomer).await,
        &p,
        "a newcomer through a gateway without the schedule",
    );
    for &s in &registrants {
        scheduled(
            h.poll(&plain, s).await,
            &p,
            "a registrant's poll without the schedule",
        );
    }
    assert_eq!(
        h.admit_next(&plain, 10).await,
        0,
        "admit_next without the schedule"
    );
    Harness::check_stats(h.stats(&plain).await, 0, 0, 3);
    h.advance_ms(30_000);
    // Opened: registrants in draw order, then the undrawn newcomer.
    for (i, &s) in draw_order(&p, &registrants).iter().enumerate() {
        admitted(
            h.enter(&plain, s).await,
            &format!("registrant #{i} at the opening"),
        );
    }
    admitted(
        h.enter(&plain, newcomer).await,
        "the undrawn newcomer, third",
    );
}

/// A pre-queue opened while waiters with sequence numbers are still in line (an earlier
/// opening's line, or a schedule set on a running room) never puts its registrants ahead of
/// them: they are registered first come, first served behind, as nobody may jump the line.
pub async fn a_pre_queue_never_jumps_an_earlier_line(h: &Harness) {
    let mut plain = h.policy(1);
    plain.schedule = None;
    let inside = h.enter_admitted(&plain).await;
    let earlier = h.enter_waiters(&plain, 2).await;
    let p = {
        let mut p = h.scheduled_policy(1, 20_000, None, true);
        p.room = plain.room.clone();
        p
    };
    let late: Vec<SessionId> = (0..3).map(|_| SessionId::random()).collect();
    for &s in &late {
        scheduled(
            h.enter(&p, s).await,
            &p,
            "a registrant behind an earlier line",
        );
    }
    // Opened (within every TTL of the suite: nobody is silent, the slot still held).
    h.advance_ms(20_000);
    for (i, &s) in earlier.iter().enumerate() {
        waiting(
            h.poll(&p, s).await,
            1 + i as u64,
            5,
            "the earlier line, still first",
        );
    }
    for (i, &s) in late.iter().enumerate() {
        waiting(
            h.poll(&p, s).await,
            3 + i as u64,
            5,
            "registrants, in arrival order",
        );
    }
    assert!(h.release(&p, inside).await);
    admitted(h.enter(&p, earlier[0]).await, "the earlier line's head");
}

/// A pre-queue emptied (its registrants left) and begun again counts its oldest wait from the
/// new first registrant, not from the old one.
pub async fn an_emptied_pre_queue_counts_its_wait_anew(h: &Harness) {
    let p = h.scheduled_policy(1, 600_000, None, true);
    let first = SessionId::random();
    scheduled(h.enter(&p, first).await, &p, "the first registrant");
    h.advance_ms(100_000);
    assert!(h.release(&p, first).await, "the first registrant leaves");
    h.advance_ms(50_000);
    scheduled(
        h.enter(&p, SessionId::random()).await,
        &p,
        "a new first registrant",
    );
    h.advance_ms(10_000);
    let oldest = h.stats(&p).await.oldest_wait_ms;
    assert!(
        oldest.is_some_and(|ms| (10_000..=11_000).contains(&ms)),
        "the oldest wait counts from the new first registrant: {oldest:?}"
    );
}
