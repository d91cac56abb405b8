//! The store conformance suite run against the embedded [`MemoryStore`].

use std::sync::Arc;

use tower_waiting_room::clock::ManualClock;
use tower_waiting_room::store::MemoryStore;
use tower_waiting_room::testing::conformance;

async fn make_harness() -> conformance::Harness {
    let clock = ManualClock::new(conformance::START_MS);
    conformance::Harness::new(Arc::new(MemoryStore::with_clock(clock.clone())), clock)
}

conformance::conformance_tests!(make_harness);
