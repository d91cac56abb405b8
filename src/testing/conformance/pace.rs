//! The wait estimate's part of the suite: what a waiting answer says about the room's pace
//! ([`RoomPace`]): how long the store has seen the room, its first movement, the admissions of
//! each recent minute, the waiters gone silent, skipped turns, and the operators' changes.

use std::sync::Arc;

use super::{admitted, Harness, QUEUE_MS};
use crate::store::{AdmissionCounts, Decision, RoomPace, SettingsChange, ADMISSION_BUCKET_MS};
use crate::{RoomPolicy, SessionId};

const MINUTE_MS: u64 = 6 * ADMISSION_BUCKET_MS;

impl Harness {
    /// The room's pace after a `poll` of `waiter`, who must be waiting (else a panic naming
    /// `what`), read where gateways read it: from a [`sync`](Harness::sync)'s snapshot if the
    /// store keeps snapshots (its poll answer need not carry the pace then), else from the poll
    /// answer.
    pub async fn pace(&self, policy: &RoomPolicy, waiter: SessionId, what: &str) -> RoomPace {
        self.waiting_with(policy, waiter, what).await.1
    }

    /// The room's admission counts after a `poll` of `waiter`, who must be waiting (else a
    /// panic naming `what`), read where gateways read them, as [`pace`](Self::pace).
    pub async fn counts(
        &self,
        policy: &RoomPolicy,
        waiter: SessionId,
        what: &str,
    ) -> AdmissionCounts {
        self.waiting_with(policy, waiter, what).await.0
    }

    /// The counts and the pace of a waiting answer to `waiter`'s poll, from a snapshot if the
    /// store keeps them.
    async fn waiting_with(
        &self,
        policy: &RoomPolicy,
        waiter: SessionId,
        what: &str,
    ) -> (AdmissionCounts, RoomPace) {
        match self.poll(policy, waiter).await {
            Decision::Waiting { recent, pace, .. } => {
                if Arc::clone(&self.store).snapshots().is_some() {
                    let snapshot = self.sync(policy, Vec::new()).await;
                    (snapshot.recent, snapshot.pace)
                } else {
                    (recent, pace)
                }
            }
            other => panic!("{what}: expected Waiting, got {other:?}"),
        }
    }
}

/// A waiting answer says how long the store has seen the room (from its first call), how far
/// into the current bucket it is, and the live capacity.
pub async fn pace_measures_the_room_from_its_first_sighting(h: &Harness) {
    let p = h.policy(1);
    h.advance_ms(ADMISSION_BUCKET_MS - h.now() % ADMISSION_BUCKET_MS + 2_000);
    let a = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    h.advance_ms(ADMISSION_BUCKET_MS + 500);
    admitted(h.heartbeat(&p, a).await, "the holder stays");
    let pace = h.pace(&p, w, "pace #1").await;
    assert_eq!(pace.observed_ms, ADMISSION_BUCKET_MS + 500, "{pace:?}");
    assert_eq!(pace.into_bucket_ms, 2_500, "{pace:?}");
    assert_eq!(pace.capacity, 1, "{pace:?}");
    assert_eq!(pace.current, 0, "nobody let in in this bucket: {pace:?}");
    // Buckets are complete when their ten seconds are over: the opening's is.
    assert_eq!(pace.minutes, [1, 0, 0, 0, 0], "{pace:?}");
    assert_eq!(pace.first_move_ms_ago, None, "nobody left yet: {pace:?}");
}

/// The first admission beyond the opening's capacity (a slot freed by someone leaving) is the
/// room's first movement, and the waiting answers say how long ago it was.
pub async fn pace_notes_the_first_movement(h: &Harness) {
    let p = h.policy(2);
    let holders = [h.enter_admitted(&p).await, h.enter_admitted(&p).await];
    let line = h.enter_waiters(&p, 2).await;
    h.advance_ms(7_000);
    assert_eq!(h.pace(&p, line[1], "before").await.first_move_ms_ago, None);
    assert!(h.release(&p, holders[0]).await);
    admitted(h.poll(&p, line[0]).await, "the head gets the freed slot");
    h.advance_ms(3_000);
    let pace = h.pace(&p, line[1], "after").await;
    assert_eq!(pace.first_move_ms_ago, Some(3_000), "{pace:?}");
    assert_eq!(pace.observed_ms, 10_000, "{pace:?}");
    // The operators' stats carry the same pace (for the wait of a newcomer).
    let stats = h.stats(&p).await;
    assert_eq!(stats.pace.first_move_ms_ago, Some(3_000), "{stats:?}");
    assert_eq!(stats.pace.observed_ms, 10_000, "{stats:?}");
    admitted(h.heartbeat(&p, holders[1]).await, "the other holder stays");
}

/// The admissions of each of the last five complete minutes, most recent first; the current
/// bucket's apart.
pub async fn pace_counts_admissions_per_minute(h: &Harness) {
    let p = h.policy(1);
    // Start on a bucket's edge, so that minutes are whole.
    h.advance_ms(ADMISSION_BUCKET_MS - h.now() % ADMISSION_BUCKET_MS);
    let start = h.now();
    let mut holder = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 8).await;
    let last = *line.last().unwrap();
    let mut next = 0;
    // Minute by minute, oldest first: 1, then 3, then 2 admissions (counting the first holder's
    // in the first minute), then one in the current bucket.
    for (minute, turns) in [0, 3, 2].into_iter().enumerate() {
        for _ in 0..turns {
            assert!(h.release(&p, holder).await);
            holder = line[next];
            next += 1;
            admitted(h.enter(&p, holder).await, "the head claims the freed slot");
        }
        // To the minute's end, the holder and the rest of the line checking in on the way.
        while h.now() < start + MINUTE_MS * (minute as u64 + 1) {
            h.advance_ms(MINUTE_MS / 4);
            admitted(h.heartbeat(&p, holder).await, "the holder stays");
            for &w in &line[next..] {
                h.poll(&p, w).await;
            }
        }
    }
    assert!(h.release(&p, holder).await);
    admitted(
        h.enter(&p, line[next]).await,
        "one more, in the current bucket",
    );
    let pace = h.pace(&p, last, "pace #3").await;
    assert_eq!(pace.minutes, [2, 3, 1, 0, 0], "{pace:?}");
    assert_eq!(pace.current, 1, "{pace:?}");
}

/// Waiters silent for longer than `queue_ttl` (to the second) are counted: unless they come
/// back, they will be skipped at their turn. One who comes back is no longer counted; one
/// skipped at their turn is counted among the skipped.
pub async fn pace_counts_silent_waiters_and_skipped_turns(h: &Harness) {
    let p = h.policy(1);
    let holder = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 4).await;
    let (gone, back, live) = ([line[0], line[1]], line[2], line[3]);
    assert_eq!(h.pace(&p, live, "pace #4").await.silent, 0);
    // Everyone but the first two polls past queue_ttl (and a second more, for the rounding).
    for _ in 0..4 {
        h.advance_ms(QUEUE_MS / 3 + 300);
        admitted(h.heartbeat(&p, holder).await, "the holder stays");
        h.poll(&p, live).await;
    }
    let pace = h.pace(&p, live, "pace #5").await;
    assert_eq!(pace.silent, 3, "the two gone and one more: {pace:?}");
    assert_eq!(
        pace.silent_after_ms, QUEUE_MS,
        "silent is for longer than queue_ttl"
    );
    h.poll(&p, back).await;
    assert_eq!(
        h.pace(&p, live, "pace #6").await.silent,
        2,
        "the one back is not silent"
    );
    // The slot frees: the two silent heads are skipped, the one back gets it.
    assert!(h.release(&p, holder).await);
    admitted(
        h.enter(&p, back).await,
        "the first live waiter gets the slot, and claims it",
    );
    let pace = h.pace(&p, live, "pace #7").await;
    assert_eq!(pace.silent, 0, "{pace:?}");
    assert_eq!(pace.current_skipped, 2, "{pace:?}");
    for s in gone {
        assert_eq!(h.poll(&p, s).await, Decision::Unknown, "skipped");
    }
    // Once their bucket is complete, the skips count in the last minute and five.
    h.advance_ms(ADMISSION_BUCKET_MS);
    let pace = h.pace(&p, live, "pace #8").await;
    assert_eq!(pace.skipped, AdmissionCounts::new(2, 2), "{pace:?}");
    assert_eq!(pace.current_skipped, 0, "{pace:?}");
}

/// A capacity change and a pause are in the pace: the capacity before and how long ago it
/// changed; when the last pause began and ended.
pub async fn pace_follows_capacity_changes_and_pauses(h: &Harness) {
    let p = h.policy(1);
    let holder = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    let last = line[2];
    h.configure(&p, SettingsChange::new().paused(true)).await;
    h.advance_ms(20_000);
    h.configure(&p, SettingsChange::new().paused(false)).await;
    h.advance_ms(5_000);
    let pace = h.pace(&p, last, "pace #9").await;
    assert_eq!(pace.last_pause_ms_ago, Some((25_000, 5_000)), "{pace:?}");
    assert_eq!(pace.capacity_changed_ms_ago, None, "{pace:?}");
    assert_eq!(pace.capacity_before, 1, "never changed: the live one");
    h.configure(&p, SettingsChange::new().capacity(2)).await;
    h.advance_ms(4_000);
    let pace = h.pace(&p, last, "pace #10").await;
    assert_eq!(pace.capacity, 2, "{pace:?}");
    assert_eq!(pace.capacity_before, 1, "{pace:?}");
    assert_eq!(pace.capacity_changed_ms_ago, Some(4_000), "{pace:?}");
    admitted(h.heartbeat(&p, holder).await, "the holder stays throughout");
}

/// A waiting answer and the stats carry the live admission rate (`None`: unlimited), so an
/// operator's limit caps the estimate at once, on every gateway.
pub async fn pace_carries_the_live_admission_rate(h: &Harness) {
    let p = h.policy(1);
    let holder = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    assert_eq!(h.pace(&p, w, "unlimited").await.admission_rate, None);
    h.configure(&p, SettingsChange::new().admission_rate(Some(3)))
        .await;
    assert_eq!(h.pace(&p, w, "limited").await.admission_rate, Some(3));
    assert_eq!(h.stats(&p).await.pace.admission_rate, Some(3));
    h.configure(&p, SettingsChange::new().admission_rate(None))
        .await;
    assert_eq!(h.pace(&p, w, "lifted").await.admission_rate, None);
    admitted(h.heartbeat(&p, holder).await, "the holder stays throughout");
}

/// The people holding a slot, claimed or granted, where gateways read the pace and in `stats`:
/// after a cut below them nobody moves until enough have left, and the wait estimate counts
/// that gap. A store that does not say (`None`) skips the case.
pub async fn pace_says_who_holds_a_slot(h: &Harness) {
    let p = h.policy(2);
    let holders = [h.enter_admitted(&p).await, h.enter_admitted(&p).await];
    let w = h.enter_waiters(&p, 2).await;
    let Some(inside) = h.pace(&p, w[1], "two inside").await.inside else {
        eprintln!("skipped: the store does not say who holds a slot (RoomPace::inside)");
        return;
    };
    assert_eq!(inside, 2);
    // Two claimed slots, and a third granted to the first waiter.
    h.configure(&p, SettingsChange::new().capacity(3)).await;
    assert_eq!(h.stats(&p).await.pace.inside, Some(3));
    // Cut below them: nobody is sent out, and the pace says so.
    h.configure(&p, SettingsChange::new().capacity(1)).await;
    assert_eq!(h.pace(&p, w[1], "after the cut").await.inside, Some(3));
    h.release(&p, holders[0]).await;
    let stats = h.stats(&p).await;
    assert_eq!(stats.pace.inside, Some(stats.admitted + stats.granted));
    assert_eq!(stats.pace.inside, Some(2));
}
