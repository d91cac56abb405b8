//! The rules step by step: a pair formed in the second join, status and leave, the fallback,
//! the timeout, an undone group back at the front, confirmation, and a conflict across queues.

use std::time::Duration;

use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::MatchStore;
use tower_waiting_room_matching::{AppGroupId, ConfirmOutcome, GroupId, JoinOutcome, MatchState};

use super::{joined, matched, names, policy, queue, store, user, Backend, START_MS};

pub(super) async fn pair_forms_in_the_second_join(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let (p, q) = (policy(), queue("chess", 2));
    let MatchState::Waiting(w) = joined(store.join(&p, user("ann"), q.clone()).await.unwrap())
    else {
        panic!("ann waits")
    };
    assert_eq!((w.position, w.waiting), (1, 1));
    assert_eq!(w.expires_in, Duration::from_secs(60));
    clock.advance(Duration::from_secs(3));
    let g = matched(joined(
        store.join(&p, user("bob"), q.clone()).await.unwrap(),
    ));
    assert_eq!(g.id, GroupId::new(q.clone(), 1));
    assert_eq!(names(&g), ["ann", "bob"]);
    assert_eq!(g.confirmed, None);
    assert_eq!(g.expires_in, Duration::from_secs(20));
    assert_eq!(store.tick(&p, q).await.unwrap(), 0);
}

pub(super) async fn status_and_leave_follow_the_user(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let (p, q) = (policy(), queue("go", 3));
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    store.join(&p, user("ann"), q.clone()).await.unwrap();
    store.join(&p, user("bob"), q.clone()).await.unwrap();
    clock.advance(Duration::from_secs(2));
    let MatchState::Waiting(w) = store.status(&p, user("bob")).await.unwrap() else {
        panic!("bob waits")
    };
    assert_eq!((w.position, w.waiting), (2, 2));
    assert_eq!(w.waited, Duration::from_secs(2));
    assert_eq!(w.expires_in, Duration::from_secs(58));
    let before = store.leave(&p, user("ann")).await.unwrap();
    assert_eq!(before.name(), "waiting");
    assert_eq!(
        store.leave(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    let MatchState::Waiting(w) = store.status(&p, user("bob")).await.unwrap() else {
        panic!("bob waits")
    };
    assert_eq!((w.position, w.waiting), (1, 1));
    // Ann may join again after leaving, anywhere.
    joined(store.join(&p, user("ann"), queue("go", 2)).await.unwrap());
}

pub(super) async fn fallback_forms_a_smaller_group_after_the_wait(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let (p, q) = (policy(), queue("trio", 3));
    store.join(&p, user("ann"), q.clone()).await.unwrap();
    clock.advance(Duration::from_secs(4));
    store.join(&p, user("bob"), q.clone()).await.unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(store.tick(&p, q.clone()).await.unwrap(), 0, "9 s: not yet");
    clock.advance(Duration::from_secs(1));
    assert_eq!(store.tick(&p, q.clone()).await.unwrap(), 1, "10 s: a pair");
    let g = matched(store.status(&p, user("bob")).await.unwrap());
    assert_eq!(names(&g), ["ann", "bob"]);
}

pub(super) async fn timeout_drops_a_waiter(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let (p, q) = (policy(), queue("slow", 2));
    store.join(&p, user("ann"), q.clone()).await.unwrap();
    clock.advance(Duration::from_millis(59_999));
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap().name(),
        "waiting"
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    // Bob does not meet a ghost: he waits alone, and Ann may join again.
    let state = joined(store.join(&p, user("bob"), q.clone()).await.unwrap());
    assert_eq!(state.name(), "waiting");
    let g = matched(joined(store.join(&p, user("ann"), q).await.unwrap()));
    assert_eq!(names(&g), ["bob", "ann"]);
}

pub(super) async fn undone_group_goes_back_to_the_front_in_order(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let p = policy().fallback_after(Duration::from_secs(3600));
    let q = queue("lobby", 3);
    for name in ["ann", "bob", "cat"] {
        store.join(&p, user(name), q.clone()).await.unwrap();
        clock.advance(Duration::from_secs(1));
    }
    store.join(&p, user("dan"), q.clone()).await.unwrap();
    // Cat leaves the pending group: Ann and Bob go back ahead of Dan, with their old sequence
    // numbers, and a group forms at once.
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        matched(store.leave(&p, user("cat")).await.unwrap())
            .id
            .number,
        1
    );
    let g = matched(store.status(&p, user("dan")).await.unwrap());
    assert_eq!(g.id.number, 2);
    assert_eq!(names(&g), ["ann", "bob", "dan"]);
    // Not confirmed within confirm_ttl: undone; alone, Ann and Bob wait at the front with a
    // fresh timeout, and their wait counts from their first join.
    // (Dan's leave first undoes group 2, his own, so he leaves as a waiter; nobody is grouped
    // by his leave.)
    clock.advance(Duration::from_secs(20));
    let MatchState::Waiting(left) = store.leave(&p, user("dan")).await.unwrap() else {
        panic!("dan left as a waiter")
    };
    assert_eq!(left.position, 3, "behind Ann and Bob, back at the front");
    let MatchState::Waiting(w) = store.status(&p, user("bob")).await.unwrap() else {
        panic!("bob waits again")
    };
    assert_eq!((w.position, w.waiting), (2, 2));
    assert_eq!(w.expires_in, Duration::from_secs(60));
    assert_eq!(w.waited, Duration::from_secs(23));
    store.join(&p, user("eve"), q.clone()).await.unwrap();
    let g = matched(store.status(&p, user("eve")).await.unwrap());
    assert_eq!((g.id.number, names(&g)), (3, vec!["ann", "bob", "eve"]));
}

pub(super) async fn confirm_keeps_the_record_then_idle(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let (p, q) = (policy(), queue("talk", 2));
    store.join(&p, user("ann"), q.clone()).await.unwrap();
    let g = matched(joined(
        store.join(&p, user("bob"), q.clone()).await.unwrap(),
    ));
    let app = AppGroupId::new("conv-1").unwrap();
    let ConfirmOutcome::Confirmed(c) = store.confirm(&p, g.id.clone(), app.clone()).await.unwrap()
    else {
        panic!("confirmed")
    };
    assert_eq!(c.confirmed, Some(app.clone()));
    assert_eq!(c.expires_in, Duration::from_secs(30));
    // A retry is harmless; another id is a conflict; an unknown group is unknown.
    assert!(matches!(
        store.confirm(&p, g.id.clone(), app.clone()).await.unwrap(),
        ConfirmOutcome::Confirmed(_)
    ));
    assert!(matches!(
        store
            .confirm(&p, g.id.clone(), AppGroupId::new("other").unwrap())
            .await
            .unwrap(),
        ConfirmOutcome::Conflict(_)
    ));
    assert_eq!(
        store
            .confirm(&p, GroupId::new(q.clone(), 9), app.clone())
            .await
            .unwrap(),
        ConfirmOutcome::Unknown
    );
    // Ann leaves her confirmed group: she is idle, Bob keeps his record.
    store.leave(&p, user("ann")).await.unwrap();
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    clock.advance(Duration::from_secs(29));
    let kept = matched(store.status(&p, user("bob")).await.unwrap());
    assert_eq!(names(&kept), ["ann", "bob"]);
    assert_eq!(kept.expires_in, Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        store.status(&p, user("bob")).await.unwrap(),
        MatchState::Idle
    );
    assert_eq!(
        store.confirm(&p, g.id, app).await.unwrap(),
        ConfirmOutcome::Unknown
    );
}

pub(super) async fn conflict_across_queues_changes_nothing(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(backend, &clock).await;
    let p = policy();
    let (a, b) = (queue("a", 2), queue("b", 2));
    let waiting = joined(store.join(&p, user("ann"), a.clone()).await.unwrap());
    clock.advance(Duration::from_secs(1));
    let JoinOutcome::Conflict(MatchState::Waiting(w)) =
        store.join(&p, user("ann"), b.clone()).await.unwrap()
    else {
        panic!("a conflict with her wait in a")
    };
    assert_eq!(w.queue, a);
    assert_eq!(w.waited, Duration::from_secs(1));
    assert_eq!(waiting.name(), "waiting");
    assert!(matches!(
        store.join(&p, user("ann"), a.clone()).await.unwrap(),
        JoinOutcome::Conflict(MatchState::Waiting(_))
    ));
    // Nothing changed in b: Bob waits alone there.
    let MatchState::Waiting(w) = joined(store.join(&p, user("bob"), b).await.unwrap()) else {
        panic!("bob waits")
    };
    assert_eq!(w.waiting, 1);
}

/// A pending group in a queue nothing touches outlives its members' pointers (theirs is
/// renewed by their own calls; the group waits for the queue's next step): once a pointer has
/// expired its user is idle and may join elsewhere. The next step on the first queue undoes
/// the group long past its expiry, and drops its members rather than putting them back in
/// line: a user in one group at a time.
pub(super) async fn a_group_undone_long_after_its_expiry_drops_its_members(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, prefix) = store(backend, &clock).await;
    let p = policy();
    let (niche, other) = (queue("niche", 2), queue("other", 2));
    store.join(&p, user("ann"), niche.clone()).await.unwrap();
    let g = matched(joined(
        store.join(&p, user("bob"), niche.clone()).await.unwrap(),
    ));
    assert_eq!(names(&g), ["ann", "bob"]);
    // Both go away; nothing touches `niche`, and Ann's pointer expires (its TTL is long: made
    // to lapse now, with the clock moved past it).
    let mut raw = super::Raw::open(backend).await;
    let pointer = super::pointer_key(&prefix, "ann");
    let ttl: i64 = raw.query(redis::cmd("PTTL").arg(&pointer)).await;
    assert!(ttl > 0, "{ttl}");
    let _: i64 = raw.query(redis::cmd("PEXPIRE").arg(&pointer).arg(1)).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    clock.advance(Duration::from_millis(ttl as u64 + 1));
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    store.join(&p, user("ann"), other.clone()).await.unwrap();
    let in_other = matched(joined(
        store.join(&p, user("dan"), other.clone()).await.unwrap(),
    ));
    assert_eq!(names(&in_other), ["ann", "dan"]);
    // A step on `niche` undoes the old group: Ann is not put back there, nor is Bob.
    let cat = joined(store.join(&p, user("cat"), niche.clone()).await.unwrap());
    let MatchState::Waiting(w) = cat else {
        panic!("cat waits alone: {cat:?}")
    };
    assert_eq!((w.position, w.waiting), (1, 1));
    assert_eq!(
        store.status(&p, user("bob")).await.unwrap(),
        MatchState::Idle
    );
    let ann = matched(store.status(&p, user("ann")).await.unwrap());
    assert_eq!(
        ann.id, in_other.id,
        "Ann is in one group, the other queue's"
    );
}
