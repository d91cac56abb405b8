//! Slots: never more than capacity inside (granted slots counted, under random and concurrent
//! operations), grants that expire to the next in line, slots that expire, heartbeats that
//! extend them, releases that free them at once, and rooms that share nothing.

use super::*;

/// Never more than `capacity` admitted at once: the first `capacity` newcomers get in, the next
/// ones wait.
pub async fn capacity_is_never_exceeded(h: &Harness) {
    let p = h.policy(3);
    for _ in 0..3 {
        h.enter_admitted(&p).await;
    }
    for i in 1..=5 {
        let d = h.enter(&p, SessionId::random()).await;
        waiting(d, i, i, "a newcomer to a full room waits");
    }
    let stats = h.stats(&p).await;
    Harness::check_stats(stats, 3, 0, 5);
    assert_eq!(stats.capacity, 3);
}

/// Granted-but-unclaimed slots count against capacity: a slot granted to the head of the line is
/// not given to anyone else before it is claimed or expires.
pub async fn granted_slots_count_against_capacity(h: &Harness) {
    let p = h.policy(2);
    let a = h.enter_admitted(&p).await;
    let _b = h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 2).await;
    assert!(h.release(&p, a).await);
    // w[0] now holds a granted slot without having come back.
    Harness::check_stats(h.stats(&p).await, 1, 1, 1);
    let n = SessionId::random();
    waiting(
        h.enter(&p, n).await,
        2,
        2,
        "a newcomer waits while the free slot is granted to someone else",
    );
    waiting(
        h.poll(&p, w[1]).await,
        1,
        2,
        "the second waiter does not get the granted slot",
    );
    Harness::check_stats(h.stats(&p).await, 1, 1, 2);
    // Time passing within grant_ttl changes nothing.
    h.advance_ms(GRANT_MS / 2);
    Harness::check_stats(h.stats(&p).await, 1, 1, 2);
    admitted(h.enter(&p, w[0]).await, "the grantee claims");
    Harness::check_stats(h.stats(&p).await, 2, 0, 2);
}

// Long by design: one seeded random walk over every operation, with the reference model of
// capacity and line kept beside it and checked after each step.
/// Random enters, polls, heartbeats, releases and clock moves never leave more than `capacity`
/// sessions holding a live slot, and every answer is consistent with what the store said before.
pub async fn capacity_holds_under_random_operations(h: &Harness) {
    let cap = 4u64;
    let p = h.policy(cap as u32);
    let sessions: Vec<SessionId> = (0..24).map(|_| SessionId::random()).collect();
    // What each session was last told it holds: (expires_at_ms, claimed).
    let mut held: HashMap<SessionId, (u64, bool)> = HashMap::new();
    let mut rng = crate::testing::case::Rng(0x9e37_79b9_7f4a_7c15);
    for step in 0..3000 {
        let s = sessions[rng.below(sessions.len() as u64) as usize];
        let now = h.now();
        let live = held.get(&s).copied().filter(|&(e, _)| e > now);
        match rng.below(100) {
            0..=39 => match h.enter(&p, s).await {
                Decision::Admitted { expires_at_ms } => {
                    assert_eq!(expires_at_ms, now + p.active_ttl_ms, "step {step}: enter");
                    held.insert(s, (expires_at_ms, true));
                }
                Decision::Waiting {
                    position, waiting, ..
                } => {
                    assert!(
                        live.is_none(),
                        "step {step}: a slot holder was told to wait"
                    );
                    assert!(
                        (1..=waiting).contains(&position),
                        "step {step}: {position}/{waiting}"
                    );
                    held.remove(&s);
                }
                other => panic!("step {step}: enter answered {other:?}"),
            },
            40..=64 => match h.poll(&p, s).await {
                Decision::Admitted { expires_at_ms } => {
                    assert!(expires_at_ms > now, "step {step}: poll of an expired slot");
                    match live {
                        Some((e, claimed)) => {
                            assert_eq!(expires_at_ms, e, "step {step}: poll changed the expiry");
                            held.insert(s, (e, claimed));
                        }
                        None => {
                            assert!(
                                expires_at_ms <= now + p.grant_ttl_ms,
                                "step {step}: a new grant lasts at most grant_ttl"
                            );
                            held.insert(s, (expires_at_ms, false));
                        }
                    }
                }
                Decision::Waiting {
                    position, waiting, ..
                } => {
                    assert!(
                        live.is_none(),
                        "step {step}: a slot holder was told to wait"
                    );
                    assert!(
                        (1..=waiting).contains(&position),
                        "step {step}: {position}/{waiting}"
                    );
                    held.remove(&s);
                }
                Decision::Unknown => {
                    assert!(live.is_none(), "step {step}: a slot holder is unknown");
                    held.remove(&s);
                }
                other => panic!("step {step}: poll answered {other:?}"),
            },
            65..=74 => match h.heartbeat(&p, s).await {
                Decision::Admitted { expires_at_ms } => {
                    assert_eq!(
                        expires_at_ms,
                        now + p.active_ttl_ms,
                        "step {step}: heartbeat"
                    );
                    held.insert(s, (expires_at_ms, true));
                }
                Decision::Unknown => {
                    assert!(live.is_none(), "step {step}: heartbeat lost a live slot");
                    held.remove(&s);
                }
                other => panic!("step {step}: heartbeat answered {other:?}"),
            },
            75..=89 => {
                let released = h.release(&p, s).await;
                assert!(
                    released || live.is_none(),
                    "step {step}: release of a live slot said false"
                );
                held.remove(&s);
            }
            _ => h.advance_ms(rng.below(4_000)),
        }
        let now = h.now();
        let holders = held.values().filter(|&&(e, _)| e > now).count() as u64;
        let stats = h.stats(&p).await;
        assert!(
            holders <= cap,
            "step {step}: {holders} sessions hold a live slot"
        );
        assert!(
            stats.admitted + stats.granted <= cap,
            "step {step}: stats over capacity: {stats:?}"
        );
        assert!(
            stats.admitted + stats.granted >= holders,
            "step {step}: {holders} known live slots but stats {stats:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Grants and slots
// ---------------------------------------------------------------------------------------------

/// A promoted visitor who does not come back within grant_ttl loses the slot; it goes to the
/// next in line.
pub async fn unclaimed_grant_expires_to_next(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    let (b, c) = (line[0], line[1]);
    assert!(h.release(&p, a).await);
    let granted_at = h.now();
    let e = admitted(h.poll(&p, b).await, "b is promoted");
    assert_eq!(e, granted_at + GRANT_MS, "a grant lasts grant_ttl");
    Harness::check_stats(h.stats(&p).await, 0, 1, 1);
    h.advance_ms(GRANT_MS / 2);
    waiting(h.poll(&p, c).await, 1, 1, "c waits while b may still claim");
    h.advance_ms(GRANT_MS / 2 + 1);
    let e = admitted(h.poll(&p, c).await, "b's grant expired; c is promoted");
    assert_eq!(e, h.now() + GRANT_MS, "c's grant lasts grant_ttl");
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);
    assert_eq!(h.poll(&p, b).await, Decision::Unknown, "b lost the slot");
    assert_eq!(
        h.heartbeat(&p, b).await,
        Decision::Unknown,
        "b has no slot to extend"
    );
    waiting(
        h.enter(&p, b).await,
        1,
        1,
        "b coming back late joins the back of the line",
    );
    admitted(h.enter(&p, c).await, "c claims");
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
}

/// Claiming within grant_ttl turns the grant into a full slot of active_ttl.
pub async fn claim_within_grant_ttl(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let b = h.enter_waiters(&p, 1).await[0];
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, b).await, "b is promoted");
    h.advance_ms(GRANT_MS - 1);
    let e = admitted(h.enter(&p, b).await, "b claims just in time");
    assert_eq!(e, h.now() + ACTIVE_MS, "a claimed slot lasts active_ttl");
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
    // Past the grant's end, the claimed slot stays.
    h.advance_ms(2);
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
    h.advance_ms(ACTIVE_MS - 10);
    assert_eq!(
        h.poll(&p, b).await,
        Decision::Admitted { expires_at_ms: e },
        "poll reports the slot without changing it"
    );
    let n = SessionId::random();
    waiting(h.enter(&p, n).await, 1, 1, "the room is still full");
}

/// Slots expire by time and free capacity.
pub async fn active_slot_expires(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let expires = h.now() + ACTIVE_MS;
    let b = h.enter_waiters(&p, 1).await[0];
    while h.now() + QUEUE_MS / 2 < expires {
        h.advance_ms(QUEUE_MS / 2);
        waiting(h.poll(&p, b).await, 1, 1, "b waits while a's slot lasts");
    }
    h.advance_ms(expires - 1 - h.now());
    waiting(h.poll(&p, b).await, 1, 1, "1 ms before a's slot ends");
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
    h.advance_ms(2);
    admitted(h.poll(&p, b).await, "a's slot expired; b is promoted");
    assert_eq!(h.poll(&p, a).await, Decision::Unknown, "a's slot is gone");
    Harness::check_stats(h.stats(&p).await, 0, 1, 0);

    // With nobody waiting, the expired slot lets a newcomer straight in.
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    h.advance_ms(ACTIVE_MS + 1);
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    h.enter_admitted(&p).await;
}

/// Heartbeat extends the slot to active_ttl from now, so it outlives its first expiry.
pub async fn heartbeat_extends(h: &Harness) {
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let first_expiry = h.now() + ACTIVE_MS;
    h.advance_ms(ACTIVE_MS * 2 / 3);
    let e = admitted(h.heartbeat(&p, a).await, "heartbeat");
    assert_eq!(
        e,
        h.now() + ACTIVE_MS,
        "heartbeat extends to active_ttl from now"
    );
    h.advance_ms(first_expiry + 1_000 - h.now());
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
    let n = SessionId::random();
    waiting(
        h.enter(&p, n).await,
        1,
        1,
        "the extended slot still fills the room",
    );
    let e2 = admitted(h.heartbeat(&p, a).await, "heartbeat again");
    assert_eq!(e2, h.now() + ACTIVE_MS);
    assert_eq!(
        h.poll(&p, a).await,
        Decision::Admitted { expires_at_ms: e2 }
    );
}

/// Heartbeat of an expired, released, unknown or merely waiting session is `Unknown` and
/// creates nothing.
pub async fn heartbeat_of_gone_slot_is_unknown(h: &Harness) {
    let p = h.policy(2);
    let expired = h.enter_admitted(&p).await;
    h.advance_ms(ACTIVE_MS + 1);
    let released = h.enter_admitted(&p).await;
    let holder = h.enter_admitted(&p).await;
    let _w = h.enter_waiters(&p, 1).await[0];
    assert!(h.release(&p, released).await);
    // w got the released slot as a grant.
    Harness::check_stats(h.stats(&p).await, 1, 1, 0);
    let before = h.stats(&p).await;
    assert_eq!(h.heartbeat(&p, expired).await, Decision::Unknown, "expired");
    assert_eq!(
        h.heartbeat(&p, released).await,
        Decision::Unknown,
        "released"
    );
    assert_eq!(
        h.heartbeat(&p, SessionId::random()).await,
        Decision::Unknown,
        "never seen"
    );
    assert_eq!(
        h.stats(&p).await,
        before,
        "heartbeats of gone slots created something"
    );
    assert_eq!(h.poll(&p, expired).await, Decision::Unknown);
    assert_eq!(h.poll(&p, released).await, Decision::Unknown);
    admitted(h.heartbeat(&p, holder).await, "the live holder");

    // A waiter's heartbeat does not admit them.
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    let w = h.enter_waiters(&p, 1).await[0];
    assert_eq!(
        h.heartbeat(&p, w).await,
        Decision::Unknown,
        "a waiter has no slot"
    );
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
    waiting(h.poll(&p, w).await, 1, 1, "and keeps their place");
}

/// Release frees the slot at once and the head of the line gets it in the same call.
pub async fn release_frees_at_once(h: &Harness) {
    let p = h.policy(2);
    let a = h.enter_admitted(&p).await;
    let b = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    assert!(h.release(&p, a).await, "release of a slot");
    Harness::check_stats(h.stats(&p).await, 1, 1, 2);
    admitted(h.poll(&p, line[0]).await, "the head got it");
    waiting(h.poll(&p, line[1]).await, 1, 2, "next moved up");
    assert!(!h.release(&p, a).await, "a second release finds nothing");
    assert_eq!(h.heartbeat(&p, a).await, Decision::Unknown);
    assert_eq!(h.poll(&p, a).await, Decision::Unknown);
    // Releasing an unclaimed grant passes it on too.
    assert!(h.release(&p, line[0]).await, "release of a grant");
    admitted(h.poll(&p, line[1]).await, "the next head got it");
    Harness::check_stats(h.stats(&p).await, 1, 1, 1);
    // The grant is made by the release itself: it runs from the release, not from the next call.
    assert!(h.release(&p, b).await);
    let released_at = h.now();
    h.advance_ms(1_000);
    assert_eq!(
        h.poll(&p, line[2]).await,
        Decision::Admitted {
            expires_at_ms: released_at + GRANT_MS
        },
        "the last one got b's slot, granted at the release"
    );
    Harness::check_stats(h.stats(&p).await, 0, 2, 0);
    // With nobody waiting, a release lets a newcomer straight in.
    assert!(h.release(&p, line[1]).await);
    h.enter_admitted(&p).await;
}

/// Release of a waiter takes them out of the line.
pub async fn release_waiter_leaves_line(h: &Harness) {
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    assert!(h.release(&p, line[0]).await, "release of a waiter");
    assert_eq!(h.poll(&p, line[0]).await, Decision::Unknown);
    waiting(h.poll(&p, line[1]).await, 1, 1, "moved up");
    assert!(!h.release(&p, line[0]).await, "second release");
    Harness::check_stats(h.stats(&p).await, 1, 0, 1);
}

/// Release of a session the store never saw returns false and changes nothing.
pub async fn release_unknown_is_false(h: &Harness) {
    let p = h.policy(1);
    assert!(!h.release(&p, SessionId::random()).await, "fresh room");
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
    h.enter_admitted(&p).await;
    h.enter_waiters(&p, 1).await;
    let before = h.stats(&p).await;
    assert!(!h.release(&p, SessionId::random()).await, "busy room");
    assert_eq!(h.stats(&p).await, before);
}

// ---------------------------------------------------------------------------------------------
// Stats and rooms
// ---------------------------------------------------------------------------------------------

/// Stats count admitted, granted, waiting and report the capacity.
pub async fn stats_counts(h: &Harness) {
    let p = h.policy(3);
    let s = h.stats(&p).await;
    Harness::check_stats(s, 0, 0, 0);
    assert_eq!(s.capacity, 3);
    let a = h.enter_admitted(&p).await;
    Harness::check_stats(h.stats(&p).await, 1, 0, 0);
    h.enter_admitted(&p).await;
    h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 2).await;
    Harness::check_stats(h.stats(&p).await, 3, 0, 2);
    assert!(h.release(&p, a).await);
    Harness::check_stats(h.stats(&p).await, 2, 1, 1);
    admitted(h.enter(&p, line[0]).await, "claim");
    Harness::check_stats(h.stats(&p).await, 3, 0, 1);
    assert!(h.release(&p, line[1]).await);
    let s = h.stats(&p).await;
    Harness::check_stats(s, 3, 0, 0);
    assert_eq!(s.capacity, 3);
}

/// Two rooms share nothing: not capacity, not sessions, not the rate budget.
pub async fn rooms_are_independent(h: &Harness) {
    let p1 = h.policy(1);
    let p2 = h.policy(1);
    assert_ne!(p1.room, p2.room);
    let a = h.enter_admitted(&p1).await;
    let b = h.enter_admitted(&p2).await;
    let c = SessionId::random();
    waiting(h.enter(&p1, c).await, 1, 1, "room 1 is full");
    Harness::check_stats(h.stats(&p1).await, 1, 0, 1);
    Harness::check_stats(h.stats(&p2).await, 1, 0, 0);
    assert_eq!(
        h.poll(&p2, a).await,
        Decision::Unknown,
        "a is in room 1 only"
    );
    assert_eq!(h.heartbeat(&p2, a).await, Decision::Unknown);
    assert!(!h.release(&p2, a).await);
    assert_eq!(
        h.poll(&p2, c).await,
        Decision::Unknown,
        "c waits in room 1 only"
    );
    Harness::check_stats(h.stats(&p1).await, 1, 0, 1);
    assert!(h.release(&p1, a).await);
    admitted(h.poll(&p1, c).await, "c gets room 1's slot");
    Harness::check_stats(h.stats(&p2).await, 1, 0, 0);
    admitted(h.poll(&p2, b).await, "b is untouched");
    // The same session may be in both rooms.
    let both = SessionId::random();
    waiting(h.enter(&p1, both).await, 1, 1, "room 1");
    waiting(h.enter(&p2, both).await, 1, 1, "room 2");
    // Rate budgets are per room.
    let r1 = h.policy(10).with_admission_rate(Some(1));
    let r2 = h.policy(10).with_admission_rate(Some(1));
    h.enter_admitted(&r1).await;
    h.enter_admitted(&r2).await;
    waiting(h.enter(&r1, SessionId::random()).await, 1, 1, "r1 spent");
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

/// Many tasks entering, waiting, claiming and releasing concurrently (on a multi-thread runtime)
/// never see more than `capacity` inside, and everyone gets in eventually.
pub async fn concurrent_never_exceeds_capacity(h: &Harness) {
    const CAP: usize = 5;
    const TASKS: usize = 32;
    const ROUNDS: usize = 5;
    let p = Arc::new(h.policy(CAP as u32));
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..TASKS {
        let (store, p) = (h.store.clone(), p.clone());
        let (inside, peak, done) = (inside.clone(), peak.clone(), done.clone());
        tasks.spawn(async move {
            for _ in 0..ROUNDS {
                let s = SessionId::random();
                let mut d = store.enter(&p, s).await.expect("enter");
                while !matches!(d, Decision::Admitted { .. }) {
                    assert!(matches!(d, Decision::Waiting { .. }), "got {d:?}");
                    tokio::task::yield_now().await;
                    d = store.poll(&p, s).await.expect("poll");
                }
                // Holding a slot (granted or claimed) from here until release.
                let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                assert!(n <= CAP, "{n} inside a room of {CAP}");
                let d = store.enter(&p, s).await.expect("claim");
                assert!(matches!(d, Decision::Admitted { .. }), "claim got {d:?}");
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(store.release(&p, s).await.expect("release"), "release");
            }
            done.fetch_add(1, Ordering::SeqCst);
        });
    }
    // Watch the store's own counts while the tasks run.
    let watcher = {
        let (store, p, done) = (h.store.clone(), p.clone(), done.clone());
        tokio::spawn(async move {
            while done.load(Ordering::SeqCst) < TASKS {
                let s = store.stats(&p).await.expect("stats");
                assert!(
                    s.admitted + s.granted <= CAP as u64,
                    "stats over capacity: {s:?}"
                );
                tokio::task::yield_now().await;
            }
        })
    };
    let all = async {
        while let Some(res) = tasks.join_next().await {
            res.expect("a task failed");
        }
        watcher.await.expect("the watcher failed");
    };
    tokio::time::timeout(Duration::from_secs(20), all)
        .await
        .expect("the concurrent run did not finish (deadlock or starvation)");
    assert!(peak.load(Ordering::SeqCst) <= CAP);
    Harness::check_stats(h.stats(&p).await, 0, 0, 0);
}
