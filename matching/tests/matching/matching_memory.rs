//! The matching conformance suite run against the embedded [`MemoryMatchStore`].

use std::sync::Arc;

use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::MemoryMatchStore;
use tower_waiting_room_matching::testing::{Harness, START_MS};

async fn make_harness() -> Harness {
    let clock = ManualClock::new(START_MS);
    Harness::new(Arc::new(MemoryMatchStore::with_clock(clock.clone())), clock)
}

tower_waiting_room_matching::matching_conformance_tests!(make_harness);

/// Every case in turn on one harness (one store, one clock), as `run_all` runs them: the cases
/// keep to their own names, so they can share a store.
#[tokio::test]
async fn all_cases_share_one_store() {
    let harness = make_harness().await;
    tower_waiting_room_matching::testing::run_all(&harness).await;
}
