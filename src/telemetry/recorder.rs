//! One room's metrics: their keys, made once when the room is built, and the recorder's
//! handles for them, made once per key on first use.

use super::*;

/// The metrics' target: the telemetry module's path, as it was before the recorder's part had a
/// file of its own (a recorder may filter by it).
#[cfg(feature = "metrics")]
const TARGET: &str = concat!(env!("CARGO_CRATE_NAME"), "::telemetry");

#[cfg(feature = "metrics")]
static METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new(TARGET, metrics::Level::INFO, Some(TARGET));

/// One room's metrics: their keys, made once when the room is built, and the recorder's handles
/// for them, made once per key on first use. Recording a request is then a thread-local read,
/// two atomic loads and the handle's own increment: no label is hashed, cloned or compared, and
/// the recorder's registry is not searched. (Asking the recorder for the handle on every call,
/// as `counter!` does, was most of what metrics cost a request: Prometheus' recorder clones the
/// key, hashes its name and labels, takes its registry's lock, compares the key and clones the
/// handle, about a tenth of a plain axum request's whole cost.)
pub(crate) struct RoomMetrics {
    #[cfg(feature = "metrics")]
    keys: Keys,
    /// The handles, each set bound to one recorder (see [`Bound`]): the first a thread without a
    /// local recorder of its own was seen recording into (the global recorder, or the `metrics`
    /// no-op before any is installed), and the second (the global recorder installed after
    /// that). The global recorder is set once for the life of the process, so no third is needed.
    #[cfg(feature = "metrics")]
    pub(super) bound: [OnceLock<Bound>; 2],
}

/// The counters' keys in one table, the gauges' and the histograms' in two more; each metric's
/// place in its table is given by the functions of [`at`].
#[cfg(feature = "metrics")]
pub(super) struct Keys {
    pub(super) counters: Vec<metrics::Key>,
    pub(super) gauges: Vec<metrics::Key>,
    pub(super) histograms: Vec<metrics::Key>,
}

/// Where each metric is in the tables of [`Keys`] (and of [`Bound`]).
#[cfg(feature = "metrics")]
pub(super) mod at {
    use super::{DecidedBy, EndedBy, Outcome, Risk, Stage, StoreOp, DECIDERS, RESULTS, RISKS};

    const REQUESTS: usize = 0;
    const STORE_CALLS: usize = REQUESTS + Stage::ALL.len() * Outcome::ALL.len();
    const ENDED: usize = STORE_CALLS + StoreOp::ALL.len() * RESULTS.len();
    const RISK_DECISIONS: usize = ENDED + 2;
    pub(in crate::telemetry) const VERSION_MIX: usize =
        RISK_DECISIONS + RISKS.len() * DECIDERS.len();
    const AUTO_DECISIONS: usize = VERSION_MIX + 1;
    pub(in crate::telemetry) const COUNTERS: usize =
        AUTO_DECISIONS + crate::auto::Change::ALL.len();

    pub(in crate::telemetry) const WAITING: usize = 0;
    pub(in crate::telemetry) const INSIDE: usize = 1;
    pub(in crate::telemetry) const GRANTED: usize = 2;
    pub(in crate::telemetry) const AUTO_CAPACITY: usize = 3;
    pub(in crate::telemetry) const GAUGES: usize = 4;

    pub(in crate::telemetry) const HISTOGRAMS: usize = StoreOp::ALL.len();

    pub(in crate::telemetry) fn request(stage: Stage, outcome: Outcome) -> usize {
        REQUESTS + stage as usize * Outcome::ALL.len() + outcome as usize
    }
    /// `result`: an index into `RESULTS`.
    pub(in crate::telemetry) fn store_call(op: StoreOp, result: usize) -> usize {
        STORE_CALLS + op as usize * RESULTS.len() + result
    }
    pub(in crate::telemetry) fn ended(by: EndedBy) -> usize {
        ENDED + by as usize
    }
    pub(in crate::telemetry) fn risk(risk: Risk, by: DecidedBy) -> usize {
        RISK_DECISIONS + super::risk_index(risk, by)
    }
    pub(in crate::telemetry) fn auto_decision(change: crate::auto::Change) -> usize {
        AUTO_DECISIONS + change as usize
    }
    /// The store call histogram's place.
    pub(in crate::telemetry) fn store_seconds(op: StoreOp) -> usize {
        op as usize
    }
}

/// The handles of one room's metrics in one recorder, each registered the first time it is
/// recorded (registering them all at once would show every label combination, never seen,
/// as a zero in the exporter's output).
///
/// Only a recorder that outlives the process is ever bound: the one a thread without a local
/// recorder records into (`metrics::with_recorder` gives a thread's local recorder first, then
/// the global one, then a no-op), which is never dropped. A local recorder (set for a scope
/// with `metrics::with_local_recorder`, as tests do) is asked for the handle on every call, as
/// before: another one could later sit at the same address, and handles cached for the first
/// would record into it unseen.
#[cfg(feature = "metrics")]
pub(super) struct Bound {
    /// The recorder's address, its identity (see [`recorder_address`]).
    pub(super) recorder: usize,
    counters: Box<[OnceLock<metrics::Counter>]>,
    gauges: Box<[OnceLock<metrics::Gauge>]>,
    histograms: Box<[OnceLock<metrics::Histogram>]>,
}

#[cfg(feature = "metrics")]
impl Bound {
    fn new(recorder: usize) -> Self {
        fn table<T>(n: usize) -> Box<[OnceLock<T>]> {
            (0..n).map(|_| OnceLock::new()).collect()
        }
        Self {
            recorder,
            counters: table(at::COUNTERS),
            gauges: table(at::GAUGES),
            histograms: table(at::HISTOGRAMS),
        }
    }
}

/// `recorder`'s address: what tells recorders apart. Only the data pointer, not the vtable (the
/// same recorder may be reached through different copies of its vtable): two recorders alive at
/// once never share an address, but zero-sized ones, which hold no state of their own (the
/// `metrics` no-op among them).
#[cfg(feature = "metrics")]
#[inline]
pub(super) fn recorder_address(recorder: &dyn metrics::Recorder) -> usize {
    std::ptr::from_ref(recorder).cast::<()>() as usize
}

/// The address of the recorder a thread without a local recorder records into, as last learnt
/// (0: never asked yet).
#[cfg(feature = "metrics")]
static UNLOCAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// For which recorder's address, and when, a new thread was last asked for [`UNLOCAL`].
#[cfg(feature = "metrics")]
static ASKED: std::sync::Mutex<Option<(usize, std::time::Instant)>> = std::sync::Mutex::new(None);

/// Whether `recorder` (at `address`) is the recorder a thread without a local recorder records
/// into, and so can be bound. Cold: each room asks it once or twice in the life of the process
/// (first, and if a recorder is installed after the room's first request), and otherwise only
/// while a local recorder is set.
#[cfg(feature = "metrics")]
#[cold]
#[inline(never)]
fn is_unlocal(address: usize) -> bool {
    use std::sync::atomic::Ordering;
    if UNLOCAL.load(Ordering::Acquire) == address {
        return true;
    }
    // Not the one last learnt: a local recorder, or a global one installed since. Only a new
    // thread, which has no local recorder, can tell. It is asked about the same recorder at
    // most once a second (a test under a local recorder would otherwise start a thread per
    // request), a recorder not asked about last at once (a global recorder just installed);
    // meanwhile, and while another thread asks, the recorder is asked for each handle, as
    // before: "no" is never wrong, only slower.
    let Ok(mut asked) = ASKED.try_lock() else {
        return false;
    };
    let now = std::time::Instant::now();
    if asked.is_some_and(|(last, at)| {
        last == address && now.duration_since(at) < std::time::Duration::from_secs(1)
    }) {
        return false;
    }
    *asked = Some((address, now));
    let Ok(learnt) = std::thread::Builder::new()
        .name("waiting-room-metrics".into())
        .spawn(|| metrics::with_recorder(recorder_address))
        .map_err(|_| ())
        .and_then(|thread| thread.join().map_err(|_| ()))
    else {
        return false;
    };
    UNLOCAL.store(learnt, Ordering::Release);
    learnt == address
}

impl RoomMetrics {
    pub(crate) fn new(room: &Arc<str>) -> Self {
        describe();
        #[cfg(not(feature = "metrics"))]
        let _ = room;
        Self {
            #[cfg(feature = "metrics")]
            keys: Keys::new(room),
            #[cfg(feature = "metrics")]
            bound: [OnceLock::new(), OnceLock::new()],
        }
    }

    /// The handles bound to `recorder`, if it can have them.
    #[cfg(feature = "metrics")]
    #[inline]
    fn bound(&self, recorder: &dyn metrics::Recorder) -> Option<&Bound> {
        // A recorder of no size (the `metrics` no-op among them) has no address of its own:
        // another of no size may sit at the same one, so its handles are never kept (asking the
        // no-op for one is nothing anyway).
        if std::mem::size_of_val(recorder) == 0 {
            return None;
        }
        let address = recorder_address(recorder);
        for set in &self.bound {
            match set.get() {
                Some(bound) if bound.recorder == address => return Some(bound),
                Some(_) => {}
                None => break,
            }
        }
        self.bind(address)
    }

    /// [`Self::bound`] when `recorder` has no handles yet: bound if it outlives the process.
    #[cfg(feature = "metrics")]
    #[cold]
    #[inline(never)]
    fn bind(&self, address: usize) -> Option<&Bound> {
        if !is_unlocal(address) {
            return None;
        }
        // Two threads may bind at once: both find the same set.
        self.bound
            .iter()
            .map(|set| set.get_or_init(|| Bound::new(address)))
            .find(|bound| bound.recorder == address)
    }

    /// Counter `i` (a place in `Keys::counters`) plus one, in the recorder in force here.
    #[cfg(feature = "metrics")]
    #[inline]
    fn count(&self, i: usize) {
        metrics::with_recorder(|r| {
            let key = &self.keys.counters[i];
            match self.bound(r) {
                Some(bound) => bound.counters[i]
                    .get_or_init(|| r.register_counter(key, &METADATA))
                    .increment(1),
                None => r.register_counter(key, &METADATA).increment(1),
            }
        });
    }

    /// Gauge `i` (a place in `Keys::gauges`) set to `value`.
    #[cfg(feature = "metrics")]
    fn set(&self, i: usize, value: u64) {
        metrics::with_recorder(|r| {
            let key = &self.keys.gauges[i];
            match self.bound(r) {
                Some(bound) => bound.gauges[i]
                    .get_or_init(|| r.register_gauge(key, &METADATA))
                    .set(value as f64),
                None => r.register_gauge(key, &METADATA).set(value as f64),
            }
        });
    }

    /// Histogram `i` (a place in `Keys::histograms`) given `value`.
    #[cfg(feature = "metrics")]
    fn record(&self, i: usize, value: f64) {
        metrics::with_recorder(|r| {
            let key = &self.keys.histograms[i];
            match self.bound(r) {
                Some(bound) => bound.histograms[i]
                    .get_or_init(|| r.register_histogram(key, &METADATA))
                    .record(value),
                None => r.register_histogram(key, &METADATA).record(value),
            }
        });
    }

    /// The room decided a request: counted, and written on the request's span.
    #[inline]
    pub(crate) fn request(&self, stage: Stage, outcome: Outcome) {
        #[cfg(feature = "metrics")]
        self.count(at::request(stage, outcome));
        // The span is at DEBUG: below that level there is none to write on, and looking up the
        // current span would cost more than the rest.
        if tracing::level_enabled!(tracing::Level::DEBUG) {
            let span = tracing::Span::current();
            span.record("stage", stage.as_str());
            span.record("outcome", outcome.as_str());
        }
    }

    /// A store answer said how many wait.
    #[inline]
    pub(crate) fn waiting(&self, waiting: u64) {
        #[cfg(feature = "metrics")]
        self.set(at::WAITING, waiting);
        #[cfg(not(feature = "metrics"))]
        let _ = waiting;
    }

    /// The room's counts, from the store.
    pub(crate) fn stats(&self, stats: &RoomStats) {
        #[cfg(feature = "metrics")]
        {
            self.set(at::WAITING, stats.waiting);
            self.set(at::INSIDE, stats.admitted);
            self.set(at::GRANTED, stats.granted);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = stats;
    }

    /// A decision of the room's capacity controller.
    pub(crate) fn auto(&self, decision: &crate::auto::Decision) {
        #[cfg(feature = "metrics")]
        {
            self.count(at::auto_decision(decision.change));
            self.set(at::AUTO_CAPACITY, u64::from(decision.capacity));
        }
        #[cfg(not(feature = "metrics"))]
        let _ = decision;
    }

    /// The app ended a slot.
    pub(crate) fn ended(&self, by: EndedBy) {
        #[cfg(feature = "metrics")]
        self.count(at::ended(by));
        #[cfg(not(feature = "metrics"))]
        let _ = by;
    }

    /// The risk decision for a new visitor.
    pub(crate) fn risk(&self, risk: Risk, by: DecidedBy) {
        #[cfg(feature = "metrics")]
        self.count(at::risk(risk, by));
        #[cfg(not(feature = "metrics"))]
        let _ = (risk, by);
    }

    /// A `stats` call, counted and timed, whose answer sets the room's gauges.
    pub(crate) fn stats_call(
        self: &Arc<Self>,
        call: StoreFuture<RoomStats>,
    ) -> StoreFuture<RoomStats> {
        #[cfg(feature = "metrics")]
        {
            let this = self.clone();
            let call = self.timed(StoreOp::Stats, call);
            Box::pin(async move {
                let stats = call.await?;
                this.stats(&stats);
                Ok(stats)
            })
        }
        #[cfg(not(feature = "metrics"))]
        call
    }

    /// `call`, counted and timed as store operation `op` when it finishes. Without the feature,
    /// `call` itself.
    pub(crate) fn timed<T: Send + 'static>(
        self: &Arc<Self>,
        op: StoreOp,
        call: StoreFuture<T>,
    ) -> StoreFuture<T> {
        #[cfg(feature = "metrics")]
        {
            let this = self.clone();
            let start = std::time::Instant::now();
            Box::pin(async move {
                let answer = call.await;
                let result = answer
                    .as_ref()
                    .map_or_else(|e| result_index(e.kind()), |_| 0);
                this.count(at::store_call(op, result));
                if answer.as_ref().is_err_and(StoreError::is_version_mix) {
                    this.count(at::VERSION_MIX);
                }
                this.record(at::store_seconds(op), start.elapsed().as_secs_f64());
                answer
            })
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = op;
            call
        }
    }
}

#[cfg(feature = "metrics")]
impl Keys {
    pub(super) fn new(room: &Arc<str>) -> Self {
        use metrics::{Key, Label, SharedString};
        let room_label = || Label::new("room", SharedString::from(room.clone()));
        let key = |name: &'static str, more: &[(&'static str, &'static str)]| {
            let mut labels = vec![room_label()];
            labels.extend(more.iter().map(|&(k, v)| Label::from_static_parts(k, v)));
            Key::from_parts(name, labels)
        };
        // In the order of `at`'s places (a test checks them).
        let mut counters = Vec::with_capacity(at::COUNTERS);
        for stage in Stage::ALL {
            for outcome in Outcome::ALL {
                let labels = [("stage", stage.as_str()), ("outcome", outcome.as_str())];
                counters.push(key(REQUESTS_TOTAL, &labels));
            }
        }
        for op in StoreOp::ALL {
            for result in RESULTS {
                counters.push(key(
                    STORE_CALLS_TOTAL,
                    &[("op", op.as_str()), ("result", result)],
                ));
            }
        }
        counters.push(key(SLOTS_ENDED_TOTAL, &[("by", "header")]));
        counters.push(key(SLOTS_ENDED_TOTAL, &[("by", "admission")]));
        for risk in RISKS {
            for by in DECIDERS {
                let labels = [("risk", risk.as_str()), ("by", by.as_str())];
                counters.push(key(RISK_DECISIONS_TOTAL, &labels));
            }
        }
        counters.push(key(VERSION_MIX_TOTAL, &[]));
        for change in crate::auto::Change::ALL {
            counters.push(key(AUTO_DECISIONS_TOTAL, &[("change", change.as_str())]));
        }
        Self {
            counters,
            gauges: vec![
                key(WAITING, &[]),
                key(INSIDE, &[]),
                key(GRANTED, &[]),
                key(AUTO_CAPACITY, &[]),
            ],
            histograms: StoreOp::ALL
                .iter()
                .map(|op| key(STORE_CALL_SECONDS, &[("op", op.as_str())]))
                .collect(),
        }
    }
}
