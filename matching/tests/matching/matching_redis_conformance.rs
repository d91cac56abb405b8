//! The matching conformance suite against real servers: the same cases as
//! `tests/matching/matching_memory.rs`, on a single Redis and on a 3-node Redis Cluster, both
//! started here. The script is sent the manual clock's time, so the cases move time as they do
//! for the embedded store.

use crate::redis_harness;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_waiting_room::store::{RedisStore, RedisStoreBuilder};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::RedisMatchStore;
use tower_waiting_room_matching::testing::{Harness, START_MS};

/// A harness on `builder`'s server, under a prefix of its own (cases share the server).
fn harness(builder: RedisStoreBuilder) -> Harness {
    static N: AtomicU64 = AtomicU64::new(0);
    let clock = ManualClock::new(START_MS);
    let room = builder
        .prefix(format!(
            "mc{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ))
        .timeout(Duration::from_secs(5))
        .manual_clock(clock.clone())
        .build()
        .expect("store builds");
    Harness::new(Arc::new(RedisMatchStore::new(&room)), clock)
}

mod single_node {
    use super::*;

    async fn make_harness() -> Harness {
        harness(RedisStore::builder().url(redis_harness::shared_server().url()))
    }

    tower_waiting_room_matching::matching_conformance_tests!(make_harness);
}

mod cluster {
    use super::*;

    async fn make_harness() -> Harness {
        let cluster = tokio::task::spawn_blocking(redis_harness::shared_cluster)
            .await
            .unwrap();
        harness(RedisStore::builder().cluster_nodes(cluster.urls()))
    }

    tower_waiting_room_matching::matching_conformance_tests!(make_harness);
}
