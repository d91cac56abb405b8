//! The admission rate (bursts, a steady pace, one budget for promotions and direct
//! admissions), bounded work per call, and the admissions counted for the pace.

use super::*;

/// With rate r per second and a large capacity, a burst gets exactly r in at once.
pub async fn admission_rate_burst(h: &Harness) {
    let r = 5u64;
    let p = h.policy(1_000).with_admission_rate(Some(r as u32));
    for _ in 0..r {
        h.enter_admitted(&p).await;
    }
    for i in 1..=10 {
        waiting(
            h.enter(&p, SessionId::random()).await,
            i,
            i,
            "over the rate, newcomers wait despite free capacity",
        );
    }
    Harness::check_stats(h.stats(&p).await, r, 0, 10);
}

/// After the burst, about r per second get in as the clock advances, never more than the bucket
/// allows.
pub async fn admission_rate_steady(h: &Harness) {
    let r = 5u64;
    let p = h.policy(1_000).with_admission_rate(Some(r as u32));
    for _ in 0..r {
        h.enter_admitted(&p).await;
    }
    let n = 100;
    h.enter_waiters(&p, n).await;
    let start = h.now();
    let step = 100;
    for _ in 0..(10_000 / step) {
        h.advance_ms(step);
        let elapsed = h.now() - start;
        let promoted = n - h.stats(&p).await.waiting;
        let budget = r * elapsed / 1_000;
        assert!(
            promoted <= budget,
            "{promoted} promoted after {elapsed} ms at {r}/s"
        );
        assert!(
            promoted + 1 >= budget,
            "only {promoted} promoted after {elapsed} ms at {r}/s"
        );
    }
    let stats = h.stats(&p).await;
    assert_eq!(stats.admitted, r, "nobody claimed");
    assert!(stats.granted >= 10 * r - 1 && stats.granted <= 10 * r);
}

/// Promotions and direct admissions spend the same admission-rate budget.
pub async fn admission_rate_shared_by_promotions_and_direct(h: &Harness) {
    let p = h.policy(100).with_admission_rate(Some(2));
    h.enter_admitted(&p).await;
    h.enter_admitted(&p).await;
    let c = SessionId::random();
    waiting(h.enter(&p, c).await, 1, 1, "the budget is spent");
    h.advance_ms(500);
    // One admission's worth refilled: it goes to c, not to the newcomer d.
    let d = SessionId::random();
    waiting(h.enter(&p, d).await, 1, 1, "the refill went to c");
    admitted(h.poll(&p, c).await, "c was promoted");
    h.advance_ms(500);
    let e = SessionId::random();
    waiting(h.enter(&p, e).await, 1, 1, "the refill went to d");
    admitted(h.poll(&p, d).await, "d was promoted");
    h.advance_ms(1_000);
    // Two refilled: one promotes e, the other admits f directly.
    let f = SessionId::random();
    admitted(h.enter(&p, f).await, "f gets the second admission");
    admitted(h.poll(&p, e).await, "e was promoted first");
    let g = SessionId::random();
    waiting(h.enter(&p, g).await, 1, 1, "the budget is spent again");
    Harness::check_stats(h.stats(&p).await, 3, 3, 1);
}

// Long by design: builds a line of silent waiters, then checks step by step that each call
// does bounded work and that the line still drains in order.
/// Bounded work: with more silent waiters at the head than one call may skip, one call does not
/// clear them all, repeated calls do, and the live waiter behind them is eventually admitted,
/// before a newcomer who arrived while the line was still being cleared.
pub async fn bounded_work_with_many_silent_waiters(h: &Harness) {
    let per_call = u64::from(MAX_PROMOTIONS_PER_CALL + MAX_SWEEP_PER_CALL);
    let silent_n = 4 * per_call + 50;
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    h.enter_waiters(&p, silent_n).await;
    h.advance_ms(QUEUE_MS / 2);
    let live = h.enter_waiters(&p, 1).await[0];
    // The first ones are now silent for longer than 5/4 of queue_ttl (liveness is to the
    // epoch; changed for store v2 from "just past queue_ttl"); the live one is not.
    h.advance_ms(QUEUE_MS * 3 / 4 + 1_000);

    let mut left = silent_n + 1;
    let now_left = h.stats(&p).await.waiting;
    assert!(
        now_left + per_call >= left,
        "one call removed {} silent waiters; at most {per_call} allowed",
        left - now_left
    );
    assert!(
        now_left > 1,
        "one call cleared all {silent_n} silent waiters"
    );
    left = now_left;

    // Releasing the holder is a call too: still bounded.
    assert!(h.release(&p, a).await);
    let now_left = h.stats(&p).await.waiting;
    // Two calls (release and stats) since the last count.
    assert!(
        now_left + 2 * per_call >= left,
        "two calls removed {} silent waiters; at most {} allowed",
        left - now_left,
        2 * per_call
    );
    assert!(now_left > per_call + 1, "too few left to go on");

    // The slot is free, but silent waiters (then the live one) are still ahead of a newcomer.
    let newcomer = SessionId::random();
    assert!(
        matches!(h.enter(&p, newcomer).await, Decision::Waiting { .. }),
        "a newcomer jumped the line while it was being cleared"
    );

    let mut calls = 0;
    loop {
        calls += 1;
        assert!(
            calls <= silent_n,
            "the live waiter was never admitted after {calls} polls"
        );
        match h.poll(&p, live).await {
            Decision::Admitted { .. } => break,
            Decision::Waiting { .. } => {}
            other => panic!("the live waiter got {other:?}"),
        }
    }
    admitted(h.enter(&p, live).await, "the live waiter claims");
    waiting(
        h.poll(&p, newcomer).await,
        1,
        1,
        "the newcomer is next, behind the live waiter",
    );
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
}

/// The bound also holds for `release`, which frees a slot and promotes in the same call.
pub async fn bounded_work_in_release(h: &Harness) {
    let per_call = u64::from(MAX_PROMOTIONS_PER_CALL + MAX_SWEEP_PER_CALL);
    let silent_n = 2 * per_call + 50;
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    h.enter_waiters(&p, silent_n).await;
    // Silent for longer than 5/4 of queue_ttl (liveness is to the epoch; changed for store v2
    // from "just past queue_ttl").
    h.advance_ms(QUEUE_MS * 5 / 4 + 1_000);
    let before = silent_n; // nothing has run since the clock moved
    assert!(h.release(&p, a).await);
    // `stats` is one more call.
    let after = h.stats(&p).await.waiting;
    assert!(
        after + 2 * per_call >= before,
        "release and stats removed {} silent waiters; at most {} allowed",
        before - after,
        2 * per_call
    );
}

// ---------------------------------------------------------------------------------------------
// Admission counts (for the wait estimate)
// ---------------------------------------------------------------------------------------------

/// Moves the clock to the start of the next admission bucket.
fn to_next_bucket(h: &Harness) {
    h.advance_ms(ADMISSION_BUCKET_MS - h.now() % ADMISSION_BUCKET_MS);
}

// Long by design: walks the clock through several buckets and checks each count on the way.
/// Direct admissions and promotions' grants are counted; claims, heartbeats, polls, re-entries
/// and releases are not. Counts cover complete 10-second buckets: an admission shows from the
/// next bucket on, leaves the last minute after six buckets and the last five minutes after
/// thirty.
pub async fn admissions_are_counted_in_buckets(h: &Harness) {
    let hour = Duration::from_secs(3_600);
    let p = h.policy(2).with_ttls(hour, hour, hour);
    to_next_bucket(h);
    let t0 = h.now();
    let a = h.enter_admitted(&p).await;
    let b = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 3).await;
    // (The counts are read from `sync` and `stats`, as gateways do: a store's enter and poll
    // answers need not carry them since store v2, if it keeps snapshots.)
    assert_eq!(
        h.counts(&p, w[0], "in the first bucket").await,
        AdmissionCounts::new(0, 0),
        "the current bucket is not counted yet"
    );
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(0, 0));

    h.advance_ms(ADMISSION_BUCKET_MS);
    assert_eq!(
        h.counts(&p, w[0], "second bucket").await,
        AdmissionCounts::new(2, 2),
        "two direct admissions"
    );
    // A promotion counts; the grantee's claim, a heartbeat, a re-entry and polls do not.
    assert!(h.release(&p, a).await);
    admitted(h.enter(&p, w[0]).await, "claim");
    admitted(h.heartbeat(&p, b).await, "heartbeat");
    admitted(h.enter(&p, b).await, "re-entry of an admitted visitor");
    h.poll(&p, w[1]).await;
    h.advance_ms(ADMISSION_BUCKET_MS);
    let seen = h.counts(&p, w[1], "third bucket").await;
    assert_eq!(seen, AdmissionCounts::new(3, 3), "one promotion more");
    assert_eq!(
        h.stats(&p).await.recent,
        seen,
        "stats agree with the snapshot"
    );
    is_waiting(h.poll(&p, w[2]).await, "another waiter");
    if h.snapshots().is_some() {
        assert_eq!(
            h.sync(&p, vec![w[2]]).await.recent,
            seen,
            "every gateway's snapshot has the same counts"
        );
    }

    // The first bucket leaves the last minute 70 s after it began, the second one 80 s after.
    h.clock.set(t0 + 70_000 - 1);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(3, 3));
    h.clock.set(t0 + 70_000);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(1, 3));
    h.clock.set(t0 + 80_000);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(0, 3));
    // ... and the last five minutes after 310 s and 320 s.
    h.clock.set(t0 + 310_000 - 1);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(0, 3));
    h.clock.set(t0 + 310_000);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(0, 1));
    h.clock.set(t0 + 320_000);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(0, 0));
    // Hours later (every slot and place has expired), a reused ring slot does not bring old
    // counts back.
    h.clock.set(t0 + 3 * 3_600_000);
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    h.enter_admitted(&p).await;
    h.advance_ms(ADMISSION_BUCKET_MS);
    assert_eq!(h.stats(&p).await.recent, AdmissionCounts::new(1, 1));
}

/// A line drained at a steady rate (the admission-rate budget, 2 per second) is counted at
/// that rate: about 120 in the last minute.
pub async fn admission_counts_follow_a_steady_drain(h: &Harness) {
    let p = h.policy(10_000).with_admission_rate(Some(2));
    to_next_bucket(h);
    h.enter_admitted(&p).await;
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 400).await;
    // The waiters must keep checking in (queue_ttl is 30 s): one poll per step keeps the head
    // alive; the others are checked in every 20 s.
    for step in 0..280u64 {
        h.advance_ms(250);
        if step % 80 == 0 {
            for &s in &line {
                h.poll(&p, s).await;
            }
        } else {
            h.stats(&p).await;
        }
    }
    // 70 s of draining at 2/s; the last complete minute is 60 s of it.
    let recent = h.stats(&p).await.recent;
    assert!(
        (118..=122).contains(&recent.last_minute),
        "about 120 in the last minute, got {recent:?}"
    );
    assert!(
        recent.last_five_minutes >= recent.last_minute
            && recent.last_five_minutes <= 2 + 2 * 70 + 2,
        "{recent:?}"
    );
}
