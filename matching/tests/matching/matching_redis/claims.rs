//! Claims a process left behind (it stopped between its claim and its queue step): one in
//! flight is completed, never read as idle; a finished one is replaced.

use std::time::Duration;

use tower_waiting_room::clock::Clock;
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::MatchStore;
use tower_waiting_room_matching::{JoinOutcome, MatchState};

use super::{joined, pointer_key, policy, queue, store, user, users_key, Backend, Raw, START_MS};

pub(super) async fn a_claim_in_flight_is_completed_never_idle(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, prefix) = store(backend, &clock).await;
    let mut conn = Raw::open(backend).await;
    let p = policy();
    let (a, b) = (queue("a", 3), queue("b", 2));
    // A process claimed Ann for a and stopped before its queue step (a crash, a pause).
    let claim = format!("{}|{}|00000000deadbeef", a.key(), clock.now_ms());
    let _: () = conn
        .query(
            redis::cmd("SET")
                .arg(pointer_key(&prefix, "ann"))
                .arg(&claim),
        )
        .await;
    clock.advance(Duration::from_secs(2));
    // Her join to b completes the join in flight: a conflict with her wait in a, never idle.
    let JoinOutcome::Conflict(MatchState::Waiting(w)) =
        store.join(&p, user("ann"), b.clone()).await.unwrap()
    else {
        panic!("conflict with the join in flight")
    };
    assert_eq!((w.queue, w.position), (a.clone(), 1));
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap().name(),
        "waiting"
    );
    // The same for a status that finds a claim in flight.
    let claim = format!("{}|{}|00000000feedbeef", a.key(), clock.now_ms());
    let _: () = conn
        .query(
            redis::cmd("SET")
                .arg(pointer_key(&prefix, "bob"))
                .arg(&claim),
        )
        .await;
    let MatchState::Waiting(w) = store.status(&p, user("bob")).await.unwrap() else {
        panic!("bob's join completed")
    };
    assert_eq!((w.position, w.waiting), (2, 2));
}

pub(super) async fn a_finished_claim_is_replaced(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, prefix) = store(backend, &clock).await;
    let mut conn = Raw::open(backend).await;
    let p = policy();
    let (a, b) = (queue("a", 2), queue("b", 2));
    // A claim older than the grace that never joined: finished, whoever made it.
    let claim = format!("{}|{}|0000000000000001", a.key(), clock.now_ms() - 10_000);
    let _: () = conn
        .query(
            redis::cmd("SET")
                .arg(pointer_key(&prefix, "ann"))
                .arg(&claim),
        )
        .await;
    assert_eq!(
        store.status(&p, user("ann")).await.unwrap(),
        MatchState::Idle
    );
    let _: () = conn
        .query(
            redis::cmd("SET")
                .arg(pointer_key(&prefix, "ann"))
                .arg(&claim),
        )
        .await;
    let MatchState::Waiting(w) = joined(store.join(&p, user("ann"), b.clone()).await.unwrap())
    else {
        panic!("ann waits in b")
    };
    assert_eq!(w.queue, b);
    // A claim that joined and whose user timed out (the pointer outlives the wait): replaced.
    clock.advance(Duration::from_secs(60));
    let MatchState::Waiting(w) = joined(store.join(&p, user("ann"), a.clone()).await.unwrap())
    else {
        panic!("ann waits in a")
    };
    assert_eq!(w.queue, a);
    // Nobody is left in b; the pointer names a.
    let in_b: Vec<String> = conn
        .query(redis::cmd("HKEYS").arg(users_key(&prefix, &b)))
        .await;
    assert!(in_b.is_empty());
}
