//! `GET /work` (with `--knee K`): an app with a knee, behind the default room. It works on K
//! requests at a time, 50 ms each; more wait their turn, so latency grows with the queue past
//! K requests in flight; past 2K in flight it answers `503` at once. A room with
//! `--auto-capacity` in front of it should settle where K requests are in flight.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::Semaphore;

/// How long one request takes once it is worked on.
const WORK: Duration = Duration::from_millis(50);

/// The app's capacity: K workers, and the requests in flight.
pub(crate) struct Knee {
    knee: usize,
    workers: Semaphore,
    in_flight: AtomicUsize,
}

impl Knee {
    pub(crate) fn new(knee: usize) -> Arc<Self> {
        Arc::new(Self {
            knee,
            workers: Semaphore::new(knee),
            in_flight: AtomicUsize::new(0),
        })
    }
}

/// Counts a request in flight for as long as it lives (an answer, or a client gone).
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One request's work: `503` past twice the knee, otherwise a turn of a worker.
pub(crate) async fn work(knee: Arc<Knee>) -> (StatusCode, &'static str) {
    let n = knee.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
    let _counted = InFlight(&knee.in_flight);
    if n > 2 * knee.knee {
        return (StatusCode::SERVICE_UNAVAILABLE, "overloaded\n");
    }
    let Ok(_worker) = knee.workers.acquire().await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "closed\n");
    };
    tokio::time::sleep(WORK).await;
    (StatusCode::OK, "worked\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn latency_is_flat_to_the_knee_then_queues_and_past_twice_it_fails() {
        let knee = Knee::new(4);
        let timed = |n: usize| {
            let knee = Arc::clone(&knee);
            async move {
                let started = tokio::time::Instant::now();
                let tasks: Vec<_> = (0..n)
                    .map(|_| tokio::spawn(work(Arc::clone(&knee))))
                    .collect();
                let mut failed = 0;
                for task in tasks {
                    failed += usize::from(task.await.unwrap().0 != StatusCode::OK);
                }
                (started.elapsed(), failed)
            }
        };
        assert_eq!(timed(4).await, (WORK, 0));
        assert_eq!(timed(8).await, (WORK * 2, 0));
        assert_eq!(timed(12).await, (WORK * 2, 4));
    }
}
