//! The store conformance suite run against the embedded [`MemoryStore`].

use std::sync::Arc;

use tower_waiting_room::store::MemoryStore;
use tower_waiting_room::testing::{conformance, ManualClock};

async fn make_harness() -> conformance::Harness {
    let clock = ManualClock::new(conformance::START_MS);
    let store = MemoryStore::with_clock(clock.clone());
    let damaged = store.clone();
    conformance::Harness::new(Arc::new(store), clock).with_damage(move |policy, damage| {
        let done = damaged.__damage(&policy.room, damage);
        Box::pin(std::future::ready(done))
    })
}

conformance::conformance_tests!(make_harness);

/// The suite on a store that offers neither optional capability (a store of one's own keeping
/// only the line and the operations): the cases of tickets and snapshots skip, every other one
/// passes.
mod without_capabilities {
    use std::sync::Arc;

    use tower_waiting_room::store::{
        Decision, MemoryStore, RoomStats, SettingsChange, SettingsUpdate, Store, StoreFuture,
    };
    use tower_waiting_room::testing::{conformance, ManualClock};
    use tower_waiting_room::{RoomPolicy, SessionId};

    /// The embedded store, with its line and operations only.
    struct Plain(MemoryStore);

    impl Store for Plain {
        fn enter(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
            self.0.enter(p, s)
        }
        fn poll(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
            self.0.poll(p, s)
        }
        fn heartbeat(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
            self.0.heartbeat(p, s)
        }
        fn release(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<bool> {
            self.0.release(p, s)
        }
        fn stats(&self, p: &RoomPolicy) -> StoreFuture<RoomStats> {
            self.0.stats(p)
        }
        fn configure(&self, p: &RoomPolicy, c: SettingsChange) -> StoreFuture<SettingsUpdate> {
            self.0.configure(p, c)
        }
        fn admit_next(&self, p: &RoomPolicy, n: u32) -> StoreFuture<u64> {
            self.0.admit_next(p, n)
        }
        fn ban(&self, p: &RoomPolicy, s: SessionId, until_ms: u64) -> StoreFuture<bool> {
            self.0.ban(p, s, until_ms)
        }
    }

    async fn make_harness() -> conformance::Harness {
        let clock = ManualClock::new(conformance::START_MS);
        let store = MemoryStore::with_clock(clock.clone());
        let damaged = store.clone();
        let harness = conformance::Harness::new(Arc::new(Plain(store)), clock);
        assert!(harness.tickets().is_none() && harness.snapshots().is_none());
        harness.with_damage(move |policy, damage| {
            let done = damaged.__damage(&policy.room, damage);
            Box::pin(std::future::ready(done))
        })
    }

    conformance::conformance_tests!(make_harness);
}

/// A waiter's poll is O(log n): at the back of a line of 100 000 it costs about what it costs in
/// a line of 1 000 (it used to count everyone ahead, O(position): about 100 times more). Timed
/// as the best of several rounds, so a busy machine does not fail it; the bound is loose
/// (5x) next to both the old cost and the new one (about 1.5x).
#[test]
fn poll_cost_does_not_grow_with_the_line() {
    use std::time::{Duration, Instant};
    use tower_waiting_room::store::{Decision, Store};
    use tower_waiting_room::{RoomPolicy, SessionId};

    fn per_poll(n: usize) -> Duration {
        let clock = ManualClock::new(conformance::START_MS);
        let store = MemoryStore::with_clock(clock.clone());
        let hour = Duration::from_secs(3_600);
        let policy = RoomPolicy::new("big", 1)
            .with_ttls(hour, hour, hour)
            // The longest line a store keeps (2^24), far above the test's 100 000.
            .with_max_queue_len(1 << 24);
        let ready = |f: tower_waiting_room::store::StoreFuture<Decision>| {
            futures_now(f).expect("the embedded store does not fail")
        };
        ready(store.enter(&policy, SessionId::random()));
        let line: Vec<SessionId> = (0..n).map(|_| SessionId::random()).collect();
        for &s in &line {
            ready(store.enter(&policy, s));
        }
        // The back quarter of the line, where counting everyone ahead costs the most.
        let back = &line[n * 3 / 4..];
        let rounds = 7;
        let per_round = 300;
        let mut best = Duration::MAX;
        for r in 0..rounds {
            let started = Instant::now();
            for k in 0..per_round {
                let i = (r * per_round + k) * 7919 % back.len();
                let d = ready(store.poll(&policy, back[i]));
                assert!(matches!(d, Decision::Waiting { .. }), "{d:?}");
            }
            best = best.min(started.elapsed() / per_round as u32);
        }
        best
    }

    let small = per_poll(1_000);
    let big = per_poll(100_000);
    let ratio = big.as_secs_f64() / small.as_secs_f64();
    eprintln!("poll: {small:?} at 1 000 waiters, {big:?} at 100 000 (x{ratio:.2})");
    assert!(
        ratio < 5.0,
        "a poll at 100 000 waiters costs {ratio:.1} times one at 1 000 ({big:?} vs {small:?})"
    );
}

/// The embedded store's futures are ready at once.
fn futures_now<T>(
    f: tower_waiting_room::store::StoreFuture<T>,
) -> Result<T, tower_waiting_room::store::StoreError> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut f = f;
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => panic!("the embedded store's future was not ready"),
    }
}
