//! The store conformance suite against real servers: a single Redis (or Valkey, with
//! `TWR_REDIS_SERVER` naming its binary) and a 3-node Redis Cluster, both started here.
#![cfg(feature = "redis")]

mod redis_harness;

use std::sync::Arc;
use std::time::Duration;

use tower_waiting_room::clock::ManualClock;
use tower_waiting_room::store::RedisStore;
use tower_waiting_room::testing::conformance;

/// The script is sent the manual clock's time, so the suite can move time as it does for the
/// embedded store. (In production the script reads Redis `TIME`.)
fn harness(
    store: tower_waiting_room::store::RedisStoreBuilder,
    clock: ManualClock,
) -> conformance::Harness {
    let store = store
        .timeout(Duration::from_secs(2))
        .clock(clock.clone())
        .build()
        .expect("store builds");
    conformance::Harness::new(Arc::new(store), clock)
}

mod single {
    use super::*;

    async fn make_harness() -> conformance::Harness {
        let server = redis_harness::shared_server();
        let clock = ManualClock::new(conformance::START_MS);
        harness(RedisStore::builder().url(server.url()), clock)
    }

    conformance::conformance_tests!(make_harness);
}

mod cluster {
    use super::*;

    async fn make_harness() -> conformance::Harness {
        let cluster = tokio::task::spawn_blocking(redis_harness::shared_cluster)
            .await
            .unwrap();
        let clock = ManualClock::new(conformance::START_MS);
        harness(RedisStore::builder().cluster_nodes(cluster.urls()), clock)
    }

    conformance::conformance_tests!(make_harness);
}
