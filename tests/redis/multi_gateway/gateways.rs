//! The gateways: one layer each on the shared Redis, the app behind it logging every request
//! that got through, and the sampler of the store's own counts.

use super::{
    ACTIVE_TTL, ADMISSION_COOKIE, CAPACITY, DEADLINE, GRANT_TTL, QUEUE_TTL, REFRESH, ROOM,
};
use crate::common::{app_seeing, carries_cookie, serve, Http, SECRET};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_waiting_room::store::{RedisStore, RoomStats};
use tower_waiting_room::{AdmittedBy, FailPolicy, SessionId, WaitingRoomLayer};

// ===== the gateways =====

/// What the handler behind a gateway saw: one request that got through.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    pub(super) session: SessionId,
    pub(super) by: AdmittedBy,
    /// The request carried an admission cookie (so a store admission was an extension).
    pub(super) with_token: bool,
    pub(super) gateway: usize,
    pub(super) at: Instant,
}

pub(super) type Log = Arc<Mutex<Vec<Seen>>>;

pub(super) fn layer(redis_url: &str, capacity: u32) -> WaitingRoomLayer {
    // Production-like: no clock override, Redis TIME is the clock of every gateway. A generous
    // store deadline keeps a noisy machine from turning slow calls into errors, and fail-closed
    // makes sure nobody ever gets in without a slot.
    let store = RedisStore::builder()
        .url(redis_url)
        .timeout(Duration::from_secs(2))
        .build()
        .expect("the store builds");
    WaitingRoomLayer::builder(ROOM)
        .capacity(capacity)
        .secret(SECRET)
        .active_ttl(ACTIVE_TTL)
        .refresh(REFRESH)
        .grant_ttl(GRANT_TTL)
        .queue_ttl(QUEUE_TTL)
        .secure_cookies(false)
        .fail_policy(FailPolicy::Closed)
        .store(store)
        .build()
        .expect("the layer builds")
}

/// Serves the app behind `layer` on an ephemeral loopback port; every request that gets
/// through is logged.
pub(super) async fn serve_gateway(layer: WaitingRoomLayer, gateway: usize, log: Log) -> Http {
    serve(app_seeing(layer, move |a, headers| {
        log.lock().unwrap().push(Seen {
            session: a.session(),
            by: a.admitted_by(),
            with_token: carries_cookie(headers, ADMISSION_COOKIE),
            gateway,
            at: Instant::now(),
        });
    }))
    .await
}

// ===== the stats sampler =====

#[derive(Debug, Default)]
pub(super) struct Sampled {
    pub(super) samples: u64,
    pub(super) errors: u64,
    pub(super) max_inside: u64,
    pub(super) max_waiting: u64,
    pub(super) violations: Vec<String>,
}

/// Asks the store for the room's counts every ~10 ms until told to stop.
pub(super) fn sample(
    layer: WaitingRoomLayer,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Sampled> {
    tokio::spawn(async move {
        let mut s = Sampled::default();
        let until = Instant::now() + DEADLINE + Duration::from_secs(20);
        while !stop.load(Ordering::Relaxed) && Instant::now() < until {
            match layer.stats().await {
                Ok(RoomStats {
                    admitted,
                    granted,
                    waiting,
                    ..
                }) => {
                    s.samples += 1;
                    s.max_waiting = s.max_waiting.max(waiting);
                    s.max_inside = s.max_inside.max(admitted + granted);
                    if admitted + granted > u64::from(CAPACITY) {
                        s.violations
                            .push(format!("{admitted} admitted + {granted} granted"));
                    }
                }
                Err(_) => s.errors += 1,
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        s
    })
}
