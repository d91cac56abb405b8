//! The operators' part of the suite: live settings (capacity, rate, paused, open) kept by the
//! store, the emergency release ([`Store::admit_next`]), bans, the oldest wait and the history
//! of admissions.

use std::time::Duration;

use super::{admitted, waiting, Damage, Harness, ABANDON_MS, ACTIVE_MS, QUEUE_MS};
use super::{ACTIVE_TTL, GRANT_TTL, QUEUE_TTL};
use crate::store::{
    Decision, RoomSettings, SettingsChange, StoreError, StoreErrorKind, ADMISSION_BUCKET_MS,
    HISTORY_MINUTES, OLDEST_WAIT_GRANULARITY_MS, SETTINGS_VERSION,
};
use crate::{RoomPolicy, SessionId};

impl Harness {
    /// `configure`, failing the test on a store error.
    pub async fn configure(&self, policy: &RoomPolicy, change: SettingsChange) -> RoomSettings {
        self.store
            .configure(policy, change)
            .await
            .unwrap_or_else(|e| panic!("configure failed: {e}"))
            .after
    }

    /// `admit_next`, failing the test on a store error.
    pub async fn admit_next(&self, policy: &RoomPolicy, count: u32) -> u64 {
        self.store
            .admit_next(policy, count)
            .await
            .unwrap_or_else(|e| panic!("admit_next failed: {e}"))
    }

    /// `ban`, failing the test on a store error.
    pub async fn ban(&self, policy: &RoomPolicy, session: SessionId, until_ms: u64) -> bool {
        self.store
            .ban(policy, session, until_ms)
            .await
            .unwrap_or_else(|e| panic!("ban failed: {e}"))
    }
}

#[track_caller]
fn paused_waiting(d: Decision, position: u64, what: &str) {
    match d {
        Decision::Waiting {
            position: p,
            paused: true,
            ..
        } => assert_eq!(p, position, "{what}: position"),
        other => panic!("{what}: expected Waiting (paused), got {other:?}"),
    }
}

/// A room first seen runs with its policy's capacity and rate, running and open; `configure`
/// with an empty change reads them, and `stats` reports the same.
pub async fn settings_start_from_the_policy(h: &Harness) {
    let p = h.policy(2).with_admission_rate(Some(5));
    let s = h.configure(&p, SettingsChange::new()).await;
    let want = RoomSettings {
        capacity: 2,
        admission_rate: Some(5),
        paused: false,
        open: true,
    };
    assert_eq!(s, want, "a new room's settings");
    let stats = h.stats(&p).await;
    assert_eq!((stats.settings, stats.capacity), (want, 2), "{stats:?}");
}

/// Once a room's settings are in the store, they win over the policy a gateway sends: two
/// gateways built with different capacities agree on the store's. A change through one is
/// enforced through the other on its next call.
pub async fn stored_settings_win_over_a_gateways_policy(h: &Harness) {
    let first = h.policy(1);
    let mut second = first.clone();
    second.capacity = 5;
    second.admission_rate = Some(1);
    h.enter_admitted(&first).await;
    let b = SessionId::random();
    waiting(
        h.enter(&second, b).await,
        1,
        1,
        "a gateway built with capacity 5 in a room the store runs with capacity 1",
    );
    let s = h.configure(&second, SettingsChange::new()).await;
    assert_eq!((s.capacity, s.admission_rate), (1, None), "{s:?}");
    // Raised through the first gateway: the second lets the waiter in on its next call.
    h.configure(&first, SettingsChange::new().capacity(2)).await;
    admitted(
        h.poll(&second, b).await,
        "after the capacity was raised elsewhere",
    );
    assert_eq!(h.stats(&second).await.capacity, 2);
}

/// Raising the capacity promotes the next in line in the same step, without waiting for
/// anybody's next call.
pub async fn capacity_raised_promotes_at_once(h: &Harness) {
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    let update = h
        .store
        .configure(&p, SettingsChange::new().capacity(3))
        .await
        .expect("configure");
    assert_eq!(
        (update.before.capacity, update.after.capacity),
        (1, 3),
        "before and after: {update:?}"
    );
    Harness::check_stats(h.stats(&p).await, 1, 2, 1);
    admitted(h.poll(&p, line[0]).await, "first waiter");
    admitted(h.poll(&p, line[1]).await, "second waiter");
    waiting(h.poll(&p, line[2]).await, 1, 1, "third waiter");
}

/// Lowering the capacity sends nobody out: those inside keep their slots (and may extend them),
/// and nobody is let in until fewer than the new capacity are inside.
pub async fn capacity_lowered_sends_nobody_out(h: &Harness) {
    let p = h.policy(3);
    let inside = [
        h.enter_admitted(&p).await,
        h.enter_admitted(&p).await,
        h.enter_admitted(&p).await,
    ];
    let w = h.enter_waiters(&p, 1).await[0];
    h.configure(&p, SettingsChange::new().capacity(1)).await;
    for s in inside {
        admitted(
            h.heartbeat(&p, s).await,
            "a slot holder after the capacity was lowered",
        );
    }
    assert!(h.release(&p, inside[0]).await);
    waiting(h.poll(&p, w).await, 1, 1, "two inside, capacity 1");
    assert!(h.release(&p, inside[1]).await);
    waiting(h.poll(&p, w).await, 1, 1, "one inside, capacity 1");
    assert!(h.release(&p, inside[2]).await);
    admitted(h.poll(&p, w).await, "nobody inside");
}

/// Paused: newcomers join the line even with free slots, waiters are told the room is paused,
/// those inside keep (and extend) their slots, and a freed slot goes to nobody. Resuming lets
/// the head in at once.
pub async fn paused_queues_newcomers_and_keeps_those_inside(h: &Harness) {
    let p = h.policy(2);
    let a = h.enter_admitted(&p).await;
    let s = h.configure(&p, SettingsChange::new().paused(true)).await;
    assert!(s.paused && s.open, "{s:?}");
    let b = SessionId::random();
    paused_waiting(h.enter(&p, b).await, 1, "a newcomer with a slot free");
    h.advance_ms(1_000);
    assert_eq!(
        h.heartbeat(&p, a).await,
        Decision::Admitted {
            expires_at_ms: h.now() + ACTIVE_MS
        },
        "a slot holder extends while paused"
    );
    assert!(h.release(&p, a).await);
    paused_waiting(
        h.poll(&p, b).await,
        1,
        "after a slot was freed while paused",
    );
    Harness::check_stats(h.stats(&p).await, 0, 0, 1);
    let s = h.configure(&p, SettingsChange::new().paused(false)).await;
    assert!(!s.paused);
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);
    admitted(h.poll(&p, b).await, "after resuming");
}

/// A slot granted before the pause is still claimed: the visitor was already let in.
pub async fn a_grant_is_claimed_while_paused(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    assert!(h.release(&p, a).await);
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);
    h.configure(&p, SettingsChange::new().paused(true)).await;
    assert_eq!(
        h.enter(&p, w).await,
        Decision::Admitted {
            expires_at_ms: h.now() + ACTIVE_MS
        },
        "claiming a grant while paused"
    );
}

/// Closed: newcomers are told so and not added; waiters are told so and keep their place as
/// long as they keep asking (longer than `abandon_after`); nobody is promoted; claimed slots are
/// not extended and run out. Reopening lets the head in at once.
pub async fn closed_room_admits_nobody_and_keeps_the_line(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let expires = h.now() + ACTIVE_MS;
    let w = h.enter_waiters(&p, 1).await[0];
    let s = h.configure(&p, SettingsChange::new().open(false)).await;
    assert!(!s.open, "{s:?}");
    let n = SessionId::random();
    assert_eq!(h.enter(&p, n).await, Decision::Closed, "a newcomer");
    assert_eq!(h.poll(&p, n).await, Decision::Closed, "a newcomer's poll");
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
    assert_eq!(h.enter(&p, w).await, Decision::Closed, "a waiter entering");
    assert_eq!(h.poll(&p, w).await, Decision::Closed, "a waiter polling");
    h.advance_ms(10_000);
    assert_eq!(
        h.heartbeat(&p, a).await,
        Decision::Admitted {
            expires_at_ms: expires
        },
        "a slot is not extended while closed"
    );
    // Closed for longer than abandon_after, the waiter polling all along.
    let mut waited = 0;
    while waited <= ABANDON_MS + ACTIVE_MS {
        h.advance_ms(QUEUE_MS / 2);
        waited += QUEUE_MS / 2;
        assert_eq!(
            h.poll(&p, w).await,
            Decision::Closed,
            "waiter after {waited} ms"
        );
    }
    assert_eq!(
        h.heartbeat(&p, a).await,
        Decision::Unknown,
        "the slot ran out"
    );
    Harness::check_stats(h.stats(&p).await, 0, 0, 1);
    let s = h.configure(&p, SettingsChange::new().open(true)).await;
    assert!(s.open);
    admitted(h.poll(&p, w).await, "the waiter, once reopened");
    waiting(h.enter(&p, n).await, 1, 1, "the newcomer, once reopened");
}

/// Closing with `end_slots` ends every slot, claimed and granted, at once.
pub async fn closing_can_end_every_slot(h: &Harness) {
    let p = h.policy(2);
    let a = h.enter_admitted(&p).await;
    let b = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    assert!(h.release(&p, b).await);
    Harness::check_stats(h.stats(&p).await, 1, 1, 0);
    h.configure(&p, SettingsChange::new().open(false).end_slots())
        .await;
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    assert_eq!(h.heartbeat(&p, a).await, Decision::Unknown);
    assert_eq!(h.poll(&p, w).await, Decision::Closed, "the granted visitor");
    // `end_slots` without closing changes nothing.
    let q = h.policy(1);
    let c = h.enter_admitted(&q).await;
    h.configure(&q, SettingsChange::new().end_slots()).await;
    admitted(h.heartbeat(&q, c).await, "end_slots alone");
}

/// `admit_next` grants slots to the first `n` waiters in order, over the capacity; the room then
/// admits nobody else until it is back under capacity.
pub async fn admit_next_ignores_capacity_and_keeps_order(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 5).await;
    assert_eq!(h.admit_next(&p, 3).await, 3);
    Harness::check_stats(h.stats(&p).await, 1, 3, 2);
    for (i, s) in line[..3].iter().enumerate() {
        admitted(h.poll(&p, *s).await, &format!("released waiter {i}"));
    }
    waiting(h.poll(&p, line[3]).await, 1, 2, "the fourth");
    assert!(h.release(&p, a).await);
    waiting(h.poll(&p, line[3]).await, 1, 2, "still over capacity");
    h.advance_ms(ADMISSION_BUCKET_MS);
    assert_eq!(
        h.stats(&p).await.recent.last_minute,
        4,
        "released waiters count as admissions (with the first newcomer)"
    );
}

/// Asking for more than the line holds lets the whole line in.
pub async fn admit_next_larger_than_the_line_lets_everyone_in(h: &Harness) {
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    h.enter_waiters(&p, 3).await;
    assert_eq!(h.admit_next(&p, 100).await, 3);
    Harness::check_stats(h.stats(&p).await, 1, 3, 0);
    assert_eq!(h.admit_next(&p, 5).await, 0, "an empty line");
}

/// Waiters silent for longer than `queue_ttl` at the head are skipped (dropped), not let in,
/// and do not count as released.
pub async fn admit_next_skips_silent_waiters(h: &Harness) {
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    // Silent for longer than 5/4 of queue_ttl (liveness is to the epoch; changed for store v2
    // from "just past queue_ttl").
    h.advance_ms(QUEUE_MS * 5 / 4 + 1_000);
    h.poll(&p, line[1]).await;
    h.poll(&p, line[2]).await;
    assert_eq!(h.admit_next(&p, 1).await, 1);
    assert_eq!(
        h.poll(&p, line[0]).await,
        Decision::Unknown,
        "the silent one"
    );
    admitted(h.poll(&p, line[1]).await, "the next who polled");
    waiting(h.poll(&p, line[2]).await, 1, 1, "the last");
}

/// The release is the operator's override: it works while paused and while closed.
pub async fn admit_next_works_while_paused_or_closed(h: &Harness) {
    let p = h.policy(1);
    h.configure(&p, SettingsChange::new().paused(true)).await;
    let a = SessionId::random();
    paused_waiting(h.enter(&p, a).await, 1, "a newcomer while paused");
    let b = SessionId::random();
    paused_waiting(h.enter(&p, b).await, 2, "another");
    assert_eq!(h.admit_next(&p, 1).await, 1, "while paused");
    admitted(h.poll(&p, a).await, "released while paused");
    h.configure(&p, SettingsChange::new().open(false)).await;
    assert_eq!(h.admit_next(&p, 1).await, 1, "while closed");
    admitted(h.poll(&p, b).await, "released while closed");
    // Released while closed, the visitor claims a whole slot (not the grant's few seconds)...
    assert_eq!(
        h.enter(&p, b).await,
        Decision::Admitted {
            expires_at_ms: h.now() + ACTIVE_MS
        },
        "claiming a slot released while closed"
    );
    // ...which, the room being closed, runs out rather than being extended.
    h.advance_ms(ACTIVE_MS / 2);
    let claimed_until = h.now() + ACTIVE_MS / 2;
    assert_eq!(
        h.heartbeat(&p, b).await,
        Decision::Admitted {
            expires_at_ms: claimed_until
        },
        "not extended while closed"
    );
}

/// A ban frees the session's slot (the next in line is promoted) and refuses the session until
/// the ban ends; a ban of a session the room does not know still refuses it.
pub async fn ban_drops_and_refuses_until_it_ends(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    let until = h.now() + 60_000;
    assert!(h.ban(&p, a, until).await, "a slot holder");
    admitted(h.poll(&p, w).await, "the next in line, promoted at once");
    assert_eq!(h.enter(&p, a).await, Decision::Banned, "entering again");
    assert_eq!(h.poll(&p, a).await, Decision::Banned, "polling");
    assert_eq!(h.heartbeat(&p, a).await, Decision::Unknown, "no slot");
    let stranger = SessionId::random();
    assert!(!h.ban(&p, stranger, until).await, "nobody to drop");
    assert_eq!(h.enter(&p, stranger).await, Decision::Banned);
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);
    // The promoted visitor claims and keeps the slot, so the one banned must queue after it.
    admitted(h.enter(&p, w).await, "claiming");
    h.advance_ms(30_000);
    admitted(h.heartbeat(&p, w).await, "staying");
    h.advance_ms(30_001);
    waiting(h.enter(&p, a).await, 1, 1, "after the ban ended");
    let q = h.policy(1);
    h.enter_admitted(&q).await;
    let line = h.enter_waiters(&q, 2).await;
    assert!(h.ban(&q, line[0], h.now() + 1_000).await, "a waiter");
    waiting(h.poll(&q, line[1]).await, 1, 1, "moved up");
}

/// The oldest wait is how long the head has waited since joining: none in an empty line, and it
/// follows the head when the head leaves.
pub async fn oldest_wait_follows_the_head(h: &Harness) {
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    assert_eq!(h.stats(&p).await.oldest_wait_ms, None, "nobody waits");
    let first = h.enter_waiters(&p, 1).await[0];
    h.advance_ms(5_000);
    h.enter_waiters(&p, 1).await;
    h.advance_ms(3_000);
    let within = |got: Option<u64>, want: u64, what: &str| {
        let got = got.unwrap_or_else(|| panic!("{what}: no oldest wait"));
        assert!(
            (want..=want + OLDEST_WAIT_GRANULARITY_MS).contains(&got),
            "{what}: oldest wait {got} ms, want {want} ms (+ up to {OLDEST_WAIT_GRANULARITY_MS})"
        );
    };
    within(h.stats(&p).await.oldest_wait_ms, 8_000, "the first waiter");
    assert!(h.release(&p, first).await);
    within(
        h.stats(&p).await.oldest_wait_ms,
        3_000,
        "the second, now first",
    );
}

/// `admissions_per_minute` counts each complete minute of the last
/// 30 minutes, oldest first, and forgets what is older.
pub async fn admissions_per_minute_history(h: &Harness) {
    let p = h.policy(10);
    h.enter_admitted(&p).await;
    h.enter_admitted(&p).await;
    h.advance_ms(60_000);
    h.enter_admitted(&p).await;
    h.advance_ms(60_000);
    let history = h.stats(&p).await.admissions_per_minute;
    assert_eq!(
        history[HISTORY_MINUTES - 2..],
        [2, 1],
        "the last two minutes: {history:?}"
    );
    assert_eq!(history.iter().sum::<u64>(), 3, "{history:?}");
    h.advance_ms((HISTORY_MINUTES as u64 - 1) * 60_000);
    let history = h.stats(&p).await.admissions_per_minute;
    assert_eq!(history[0], 1, "the older minute has left: {history:?}");
    h.advance_ms(60_000);
    assert_eq!(
        h.stats(&p).await.admissions_per_minute,
        [0; HISTORY_MINUTES]
    );
}

/// Settings written by a version of the crate this one cannot read (the next one, whose
/// changes it does not know; or the first, long gone) are a version mix: every call is refused
/// as [`StoreErrorKind::Busy`] ([`StoreError::is_version_mix`], with a message naming the
/// version), never read as something else and never as an outage, so nobody is let in by it.
/// Nothing is written meanwhile: once the room's settings are of this version again, everyone
/// is where they were (the slot, the line in order), and a newcomer turned away has no place.
pub async fn refuses_settings_of_another_version(h: &Harness) {
    let p = h.policy(1);
    let holder = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    let newcomer = SessionId::random();
    for other in [SETTINGS_VERSION + 1, 1] {
        if !h.damage(&p, Damage::SettingsVersion(other)).await {
            return;
        }
        let what = format!("settings of version {other}");
        let refused = |e: StoreError, call: &str| {
            assert_eq!(e.kind(), StoreErrorKind::Busy, "{what}: {call}: {e}");
            assert!(e.is_version_mix(), "{what}: {call}: {e}");
            let message = e.to_string();
            assert!(
                message.contains(&format!("version {other}")),
                "{what}: {call}: a message naming the version: {message}"
            );
        };
        let e = h.store.enter(&p, newcomer).await.expect_err("a newcomer");
        refused(e, "enter");
        let e = h.store.poll(&p, line[0]).await.expect_err("a waiter");
        refused(e, "poll");
        let e = h.store.heartbeat(&p, holder).await.expect_err("the holder");
        refused(e, "heartbeat");
        let e = h.store.stats(&p).await.expect_err("stats");
        refused(e, "stats");
        let change = SettingsChange::new().capacity(5);
        let e = h.store.configure(&p, change).await.expect_err("a change");
        refused(e, "configure");
        let e = h.store.admit_next(&p, 5).await.expect_err("admit_next");
        refused(e, "admit_next");
        let e = h.store.release(&p, holder).await.expect_err("a release");
        refused(e, "release");
    }
    // This version's gateways alone again: nothing was changed while the versions were mixed.
    if !h
        .damage(&p, Damage::SettingsVersion(SETTINGS_VERSION))
        .await
    {
        return;
    }
    let stats = h.stats(&p).await;
    Harness::check_stats(stats, 1, 0, 2);
    assert_eq!(stats.capacity, 1, "the change was not made");
    waiting(h.poll(&p, line[0]).await, 1, 2, "the head kept their place");
    waiting(h.poll(&p, line[1]).await, 2, 2, "the next kept theirs");
    assert_eq!(
        h.poll(&p, newcomer).await,
        Decision::Unknown,
        "no place taken"
    );
    admitted(h.heartbeat(&p, holder).await, "the holder kept the slot");
}

/// Settings written by a newer version whose changes are additive (it names this version as
/// one that reads its key, `vmin`) are read as this version's: the room runs on, everyone in
/// their place, and an operator's change is made.
pub async fn reads_settings_of_a_newer_additive_version(h: &Harness) {
    let p = h.policy(1);
    let holder = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    if !h
        .damage(&p, Damage::NewerAdditiveSettings(SETTINGS_VERSION + 1))
        .await
    {
        return;
    }
    waiting(
        h.enter(&p, SessionId::random()).await,
        3,
        3,
        "a newcomer at the back",
    );
    waiting(h.poll(&p, line[0]).await, 1, 3, "the head in place");
    assert!(h.release(&p, holder).await);
    admitted(h.poll(&p, line[0]).await, "the freed slot to the head");
    let after = h.configure(&p, SettingsChange::new().capacity(2)).await;
    assert_eq!(after.capacity, 2);
    admitted(h.poll(&p, line[1]).await, "the raised capacity to the next");
    let stats = h.stats(&p).await;
    Harness::check_stats(stats, 0, 2, 1);
    assert_eq!(stats.capacity, 2);
}

/// A policy outside the bounds every store keeps (a lifetime beyond seven days, a capacity or
/// a longest line of 0: what a builder refuses, sent by a direct caller) is refused as
/// [`StoreErrorKind::Protocol`], never obeyed: nothing is written, so a slot whose expiry
/// overflowed never lets a second visitor in beside the first. A ban "for ever" (`u64::MAX`)
/// is kept by every store as a ban.
pub async fn refuses_a_policy_out_of_bounds_and_keeps_a_ban_for_ever(h: &Harness) {
    let p = h.policy(1);
    let holder = h.enter_admitted(&p).await;
    let week = 7 * 24 * 3_600_000;
    let day = Duration::from_millis(24 * 3_600_000);
    let mut bad = Vec::new();
    for ttl in [
        Duration::MAX,
        Duration::from_millis(week + 1),
        Duration::ZERO,
    ] {
        bad.push(p.clone().with_ttls(ttl, GRANT_TTL, QUEUE_TTL));
        bad.push(p.clone().with_ttls(ACTIVE_TTL, ttl, QUEUE_TTL));
        bad.push(p.clone().with_ttls(ACTIVE_TTL, GRANT_TTL, ttl));
    }
    bad.push(p.clone().with_abandon_after(Duration::MAX));
    bad.push(p.clone().with_max_queue_len(0));
    bad.push(p.clone().with_max_queue_len(u64::MAX));
    let mut none_inside = p.clone();
    none_inside.capacity = 0;
    bad.push(none_inside);
    for policy in &bad {
        let newcomer = SessionId::random();
        let e = h.store.enter(policy, newcomer).await.expect_err("refused");
        assert_eq!(e.kind(), StoreErrorKind::Protocol, "{policy:?}: {e}");
        let e = h
            .store
            .heartbeat(policy, holder)
            .await
            .expect_err("refused");
        assert_eq!(e.kind(), StoreErrorKind::Protocol, "{policy:?}: {e}");
    }
    // A week exactly is within the bounds, and so is an abandonment time shorter than
    // `queue_ttl` (every store takes the longer of the two).
    let week_long = p.clone().with_ttls(day * 7, GRANT_TTL, QUEUE_TTL);
    admitted(
        h.heartbeat(&week_long, holder).await,
        "the holder, still in",
    );
    let abandon_now = p.clone().with_abandon_after(Duration::ZERO);
    admitted(
        h.heartbeat(&abandon_now, holder).await,
        "taken as queue_ttl",
    );
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
    let newcomer = SessionId::random();
    waiting(
        h.enter(&p, newcomer).await,
        1,
        1,
        "nobody let in beside the holder",
    );

    assert!(h.ban(&p, holder, u64::MAX).await, "the holder had a slot");
    assert_eq!(h.poll(&p, holder).await, Decision::Banned);
    h.advance_ms(week);
    assert_eq!(h.enter(&p, holder).await, Decision::Banned, "still banned");
}
