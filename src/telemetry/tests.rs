#[cfg(feature = "metrics")]
use super::recorder::{at, recorder_address, Keys};
use super::*;

#[test]
fn label_tables_follow_the_enums() {
    for (i, stage) in Stage::ALL.iter().enumerate() {
        assert_eq!(*stage as usize, i);
    }
    for (i, outcome) in Outcome::ALL.iter().enumerate() {
        assert_eq!(*outcome as usize, i);
    }
    for (i, op) in StoreOp::ALL.iter().enumerate() {
        assert_eq!(*op as usize, i);
    }
    for (i, change) in crate::auto::Change::ALL.iter().enumerate() {
        assert_eq!(*change as usize, i);
    }
}

/// Every metric's place in the key tables holds its key.
#[cfg(feature = "metrics")]
#[test]
fn each_metrics_place_holds_its_key() {
    let keys = Keys::new(&Arc::from("r"));
    assert_eq!(keys.counters.len(), at::COUNTERS);
    assert_eq!(keys.gauges.len(), at::GAUGES);
    assert_eq!(keys.histograms.len(), at::HISTOGRAMS);
    for stage in Stage::ALL {
        for outcome in Outcome::ALL {
            let key = text(&keys.counters[at::request(stage, outcome)]);
            let (s, o) = (stage.as_str(), outcome.as_str());
            assert!(key.starts_with(REQUESTS_TOTAL), "{key}");
            assert!(key.contains(&format!("stage={s}, outcome={o}")), "{key}");
        }
    }
    for op in StoreOp::ALL {
        for (i, result) in RESULTS.iter().enumerate() {
            let key = text(&keys.counters[at::store_call(op, i)]);
            assert!(key.starts_with(STORE_CALLS_TOTAL), "{key}");
            let labels = format!("op={}, result={result}", op.as_str());
            assert!(key.contains(&labels), "{key}");
        }
        let key = text(&keys.histograms[at::store_seconds(op)]);
        assert!(key.starts_with(STORE_CALL_SECONDS), "{key}");
        assert!(key.contains(&format!("op={}", op.as_str())), "{key}");
    }
    for (by, name) in [
        (EndedBy::Header, "header"),
        (EndedBy::Admission, "admission"),
    ] {
        let key = text(&keys.counters[at::ended(by)]);
        assert!(key.starts_with(SLOTS_ENDED_TOTAL), "{key}");
        assert!(key.contains(&format!("by={name}")), "{key}");
    }
    for risk in RISKS {
        for by in DECIDERS {
            let key = text(&keys.counters[at::risk(risk, by)]);
            let labels = format!("risk={}, by={}", risk.as_str(), by.as_str());
            assert!(key.starts_with(RISK_DECISIONS_TOTAL), "{key}");
            assert!(key.contains(&labels), "{key}");
        }
    }
    assert!(text(&keys.counters[at::VERSION_MIX]).starts_with(VERSION_MIX_TOTAL));
    for change in crate::auto::Change::ALL {
        let key = text(&keys.counters[at::auto_decision(change)]);
        assert!(key.starts_with(AUTO_DECISIONS_TOTAL), "{key}");
        assert!(
            key.contains(&format!("change={}", change.as_str())),
            "{key}"
        );
    }
    for (i, name) in [
        (at::WAITING, WAITING),
        (at::INSIDE, INSIDE),
        (at::GRANTED, GRANTED),
    ]
    .into_iter()
    .chain([(at::AUTO_CAPACITY, AUTO_CAPACITY)])
    {
        assert_eq!(text(&keys.gauges[i]), format!("{name}{{room=r}}"));
    }
}

/// `key` as `name{label=value, ...}`.
#[cfg(feature = "metrics")]
fn text(key: &metrics::Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    format!("{}{{{}}}", key.name(), labels.join(", "))
}

/// A recorder that counts, by key, for the tests below.
#[cfg(feature = "metrics")]
#[derive(Clone, Default)]
struct Counting(
    Arc<std::sync::Mutex<std::collections::HashMap<String, Arc<std::sync::atomic::AtomicU64>>>>,
);

#[cfg(feature = "metrics")]
impl Counting {
    fn handle(&self, key: &metrics::Key) -> Arc<std::sync::atomic::AtomicU64> {
        let mut all = self.0.lock().unwrap();
        all.entry(text(key)).or_default().clone()
    }
    /// The fast path's count of admitted requests, in room `room`.
    fn passed(&self, room: &str) -> u64 {
        let key = format!("{REQUESTS_TOTAL}{{room={room}, stage=fast_path, outcome=passed}}");
        let all = self.0.lock().unwrap();
        all.get(&key)
            .map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed))
    }
}

#[cfg(feature = "metrics")]
impl metrics::Recorder for Counting {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(self.handle(key))
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::from_arc(self.handle(key))
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

/// Handles are kept only for a recorder that lives as long as the process: a local recorder
/// gets every count, and so does another one later at the very same address (the same
/// stack slot), which handles kept for the first would have missed.
#[cfg(feature = "metrics")]
#[test]
fn every_local_recorder_gets_its_counts() {
    let room = RoomMetrics::new(&Arc::from("local"));
    let counted = |n: usize| {
        let recorder = Counting::default();
        metrics::with_local_recorder(&recorder, || {
            for _ in 0..n {
                room.request(Stage::FastPath, Outcome::Passed);
            }
        });
        recorder.passed("local")
    };
    assert_eq!(counted(3), 3);
    assert_eq!(counted(2), 2);
    assert_eq!(counted(4), 4);
}

/// A global recorder installed after the room was built (and had recorded into the no-op)
/// gets the room's counts, and the room keeps handles for it. (The only test of this binary
/// to install a global recorder: there is one per process.)
#[cfg(feature = "metrics")]
#[test]
fn a_recorder_installed_after_the_room_is_built_gets_its_counts() {
    let room = RoomMetrics::new(&Arc::from("late"));
    room.request(Stage::FastPath, Outcome::Passed);
    let recorder = Counting::default();
    metrics::set_global_recorder(recorder.clone()).expect("the binary's one global recorder");
    let global = metrics::with_recorder(recorder_address);
    let bound = || {
        room.bound
            .iter()
            .any(|set| set.get().is_some_and(|b| b.recorder == global))
    };
    let mut sent = 0;
    // Another test asking a new thread about its local recorder at that moment would leave
    // a request or two unbound (counted all the same), never more.
    while !bound() && sent < 100 {
        room.request(Stage::FastPath, Outcome::Passed);
        sent += 1;
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(bound(), "the global recorder's handles are kept");
    for _ in 0..5 {
        room.request(Stage::FastPath, Outcome::Passed);
    }
    assert_eq!(recorder.passed("late"), sent + 5);
}

#[cfg(feature = "metrics")]
#[test]
fn risk_keys_follow_their_tables() {
    for (r, risk) in RISKS.iter().enumerate() {
        for (b, by) in DECIDERS.iter().enumerate() {
            assert_eq!(risk_index(*risk, *by), r * DECIDERS.len() + b);
        }
    }
}

#[cfg(feature = "metrics")]
#[test]
fn results_are_the_error_kinds_in_snake_case() {
    for kind in [
        StoreErrorKind::Unavailable,
        StoreErrorKind::Timeout,
        StoreErrorKind::Busy,
        StoreErrorKind::Protocol,
        StoreErrorKind::Config,
        StoreErrorKind::Misconfigured,
    ] {
        let snake = format!("{kind:?}").to_lowercase();
        assert_eq!(RESULTS[result_index(kind)], snake);
    }
}
