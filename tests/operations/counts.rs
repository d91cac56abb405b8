//! `SharedCounts`: the room's counts for routes anyone may ask for, read from the store at most
//! once a second of the room's clock, however often and however concurrently they are asked.

use crate::common::{clock, keys, TestStore};

use std::sync::Arc;
use std::time::Duration;

use tower_waiting_room::clock::Clock;
use tower_waiting_room::control::{SharedCounts, COUNTS_FRESH_MS};
use tower_waiting_room::store::{Store, StoreErrorKind};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{SessionId, WaitingRoomLayer};

fn room(clock: &ManualClock) -> (TestStore, WaitingRoomLayer) {
    let store = TestStore::new(clock.clone());
    let shared: Arc<dyn Store> = Arc::new(store.clone());
    let layer = WaitingRoomLayer::builder("counted")
        .capacity(1)
        .keyring(keys())
        .clock(clock.clone())
        .shared_store(shared)
        .build()
        .unwrap();
    (store, layer)
}

/// A thousand asks in one second, two hundred of them at once while the first read is under
/// way (the store takes 50 ms): one store call; the next second, one more, which sees what
/// changed meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_asks_is_one_store_call_a_second() {
    let clock = clock();
    let (store, layer) = room(&clock);
    store.delay_stats(Duration::from_millis(50));
    let counts = SharedCounts::new(&layer);
    let mut asks = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let counts = counts.clone();
        asks.spawn(async move { counts.get().await.unwrap() });
    }
    while let Some(stats) = asks.join_next().await {
        assert_eq!(stats.unwrap().waiting, 0);
    }
    let policy = layer.config().policy().clone();
    let inner = store.inner().clone();
    inner.enter(&policy, SessionId::random()).await.unwrap();
    inner.enter(&policy, SessionId::random()).await.unwrap();
    clock.advance(Duration::from_millis(COUNTS_FRESH_MS - 1));
    for _ in 0..800 {
        let stats = counts.get().await.unwrap();
        assert_eq!((stats.admitted, stats.waiting), (0, 0), "the second's read");
    }
    assert_eq!(store.stats_calls(), 1);
    clock.advance(Duration::from_millis(1));
    let stats = counts.get().await.unwrap();
    assert_eq!((stats.admitted, stats.waiting), (1, 1));
    assert_eq!(store.stats_calls(), 2);
    // Each read is the store's own count, as `stats()` gives it.
    assert_eq!(stats, layer.stats().await.unwrap());
}

/// A failed read answers an error of the same kind for the rest of its second (a store that is
/// away is not asked more often either), and the next second asks again.
#[tokio::test]
async fn a_failed_read_is_not_retried_within_its_second() {
    let clock = clock();
    let (store, layer) = room(&clock);
    let counts = SharedCounts::new(&layer);
    store.fail_stats_with(Some(StoreErrorKind::Timeout));
    for _ in 0..50 {
        let e = counts.get().await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Timeout);
    }
    assert_eq!(store.stats_calls(), 1);
    store.fail_stats_with(None);
    clock.advance(Duration::from_secs(1));
    assert_eq!(counts.get().await.unwrap().waiting, 0);
    assert_eq!(store.stats_calls(), 2);
}

/// The second is the room's clock's: a clock that went back reads again rather than keep a
/// read from its future for as long as it takes to catch up.
#[tokio::test]
async fn a_clock_that_went_back_reads_again() {
    let clock = clock();
    let (store, layer) = room(&clock);
    let counts = SharedCounts::new(&layer);
    counts.get().await.unwrap();
    clock.set(clock.now_ms() - 3_600_000);
    counts.get().await.unwrap();
    assert_eq!(store.stats_calls(), 2);
    counts.get().await.unwrap();
    assert_eq!(store.stats_calls(), 2, "then a second from there");
}

/// A read slower than a second of the room's clock is still shared: those who came while it
/// was under way take it when it ends, rather than each reading again in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_read_is_shared_with_those_who_waited_for_it() {
    let clock = clock();
    let (store, layer) = room(&clock);
    store.delay_stats(Duration::from_millis(200));
    let counts = SharedCounts::new(&layer);
    let first = tokio::spawn({
        let counts = counts.clone();
        async move { counts.get().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut waiting = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let counts = counts.clone();
        waiting.spawn(async move { counts.get().await });
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    clock.advance(Duration::from_secs(2));
    first.await.unwrap().unwrap();
    while let Some(got) = waiting.join_next().await {
        got.unwrap().unwrap();
    }
    assert_eq!(store.stats_calls(), 1);
}

/// A caller that gives up waiting (its future dropped mid-read) does not undo the limit: the
/// read counts as asked, and until its second is over the next callers are answered without a
/// store call (an `Unavailable` error here, as no read ended before it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_given_up_still_counts_as_asked() {
    let clock = clock();
    let (store, layer) = room(&clock);
    store.delay_stats(Duration::from_millis(300));
    let counts = SharedCounts::new(&layer);
    let gave_up = tokio::time::timeout(Duration::from_millis(20), counts.get()).await;
    assert!(
        gave_up.is_err(),
        "the store is slower than the caller's patience"
    );
    for _ in 0..5 {
        let e = counts.get().await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Unavailable);
    }
    assert_eq!(store.stats_calls(), 1);
    clock.advance(Duration::from_secs(1));
    store.delay_stats(Duration::ZERO);
    assert_eq!(counts.get().await.unwrap().waiting, 0);
    assert_eq!(store.stats_calls(), 2);
}
