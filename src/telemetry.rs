//! What the room tells operators: metrics through the [`metrics`](https://docs.rs/metrics) facade
//! (feature `metrics`, on by default) and a `tracing` span per request.
//!
//! # Metrics
//!
//! The room records through whatever recorder the application installs (for Prometheus,
//! `metrics-exporter-prometheus`). Every key the room records on a request is made once, when
//! the room is built, and the recorder is asked for its handle for a key once, the first time
//! the key is recorded: recording a request is then a thread-local read, two atomic loads and
//! the handle's own increment (an atomic add, for Prometheus; nothing, with no recorder), with
//! no label formatted, hashed or allocated and no registry searched. A recorder installed after
//! the room is built gets the counts all the same (the room keeps handles for the global
//! recorder, whichever it is when it records); a thread's local recorder
//! (`metrics::with_local_recorder`, in tests) is asked for the handle on each call, as
//! `counter!` does. Call [`describe`] after installing a recorder to give every metric its help
//! text and unit. Every metric is labelled with `room`;
//! the table, with the meaning of each label value, is in `docs/operations.md`.
//!
//! | name | type | labels |
//! |---|---|---|
//! | [`REQUESTS_TOTAL`] | counter | `room`, `stage`, `outcome` |
//! | [`STORE_CALLS_TOTAL`] | counter | `room`, `op`, `result` |
//! | [`STORE_CALL_SECONDS`] | histogram | `room`, `op` |
//! | [`SLOTS_ENDED_TOTAL`] | counter | `room`, `by` |
//! | [`RISK_DECISIONS_TOTAL`] | counter | `room`, `risk`, `by` |
//! | [`VERSION_MIX_TOTAL`] | counter | `room` |
//! | [`WAITING`], [`INSIDE`], [`GRANTED`] | gauge | `room` |
//! | [`BREAKER_STATE`] | gauge | `store` (the Redis key prefix; never the URL) |
//!
//! With the feature off, the record functions compile to nothing.
//!
//! # Tracing
//!
//! Each request the room sees runs in a `waiting_room` span at `DEBUG` level with the fields
//! `room`, `stage` and `outcome` (the same values as the labels above), recorded when the room
//! decides. The span is entered while the response future is polled, so the app's own events
//! under the layer are inside it. No field ever holds a cookie, a token or a secret; the
//! visitor's session id is not in it either (a request's span is not a place to correlate
//! visitors). Changes of state are logged at `INFO`/`WARN` (the store's breaker opening and
//! closing, the first failed store call of an outage), never one line per request.

// Without the feature, the label tables are only for the span and its tests.
#![cfg_attr(not(feature = "metrics"), allow(dead_code))]

use std::sync::Arc;
#[cfg(feature = "metrics")]
use std::sync::OnceLock;

#[cfg(feature = "metrics")]
use crate::config::RoomPolicy;
use crate::defences::risk::{DecidedBy, Risk};
#[cfg(feature = "metrics")]
use crate::session::SessionId;
#[cfg(feature = "metrics")]
use crate::store::{
    AutoApplied, AutoOff, AutoReport, AutoStore, GatewayId, SnapshotStore, StoreErrorKind,
    TicketStore,
};
#[cfg(feature = "metrics")]
use crate::store::{Decision, SettingsChange, SettingsUpdate};
#[cfg(feature = "metrics")]
use crate::store::{MintFor, Minted, Redeemed, RoomSnapshot, SeenWaiters, TicketNonce};
use crate::store::{RoomStats, Store, StoreError, StoreFuture, StoreOp};

/// Requests the room handled, by `stage` (where it decided: `fast_path`, `cookie_check`,
/// `store`, `endpoint`, `bypass`) and `outcome` (`admitted`, `waiting`, `full`, `closed`,
/// `busy`, `unavailable`, `limited`, `refused`, `challenge`, `new_visitor`, `fail_open`,
/// `passed`, `left`, `unknown`). Counter.
pub const REQUESTS_TOTAL: &str = "waiting_room_requests_total";
/// Store calls by `op` (`enter`, `poll`, `heartbeat`, `release`, `stats`) and `result` (`ok`,
/// or the [`StoreErrorKind`] in snake case: `unavailable`, `timeout`, `busy`, `protocol`,
/// `config`, `misconfigured`). Counter.
pub const STORE_CALLS_TOTAL: &str = "waiting_room_store_calls_total";
/// How long store calls took, by `op`, in seconds, failed ones included. Histogram.
pub const STORE_CALL_SECONDS: &str = "waiting_room_store_call_seconds";
/// Slots the app ended (checkout finished), `by` the response header (`header`) or
/// [`Admission::end_slot`](crate::Admission::end_slot) (`admission`). Counter.
pub const SLOTS_ENDED_TOTAL: &str = "waiting_room_slots_ended_total";
/// The [risk decisions](crate::defences::risk) for new visitors, by `risk` (`low`, `medium`,
/// `high`) and `by` (`default`: the default scorer; `hook`: the app's). Counter.
pub const RISK_DECISIONS_TOTAL: &str = "waiting_room_risk_decisions_total";
/// Store calls refused because the room's settings were written by a version of the crate this
/// one cannot read ([`StoreError::is_version_mix`]): a rolling upgrade's mix, answered as a busy
/// store (also counted in [`STORE_CALLS_TOTAL`] as `busy`). Anything above zero needs an
/// operator: the gateways still on this version must be upgraded. Counter.
pub const VERSION_MIX_TOTAL: &str = "waiting_room_version_mix_total";
/// Visitors in line, from the last store answer that said (a waiting visitor's answer, or
/// [`WaitingRoomLayer::stats`](crate::WaitingRoomLayer::stats)). Gauge.
pub const WAITING: &str = "waiting_room_waiting";
/// Visitors holding a claimed slot, from the last
/// [`WaitingRoomLayer::stats`](crate::WaitingRoomLayer::stats). Gauge.
pub const INSIDE: &str = "waiting_room_inside";
/// Slots granted to promoted visitors who have not come back yet, from the last
/// [`WaitingRoomLayer::stats`](crate::WaitingRoomLayer::stats). Gauge.
pub const GRANTED: &str = "waiting_room_granted";
/// The capacity a room's controller decided last, when its capacity follows the app
/// ([`auto_capacity`](crate::WaitingRoomBuilder::auto_capacity)). Gauge.
pub const AUTO_CAPACITY: &str = "waiting_room_auto_capacity";
/// The controller's decisions, by `change` (`grow`, `hold`, `back_off`, `cut`). Counter.
pub const AUTO_DECISIONS_TOTAL: &str = "waiting_room_auto_decisions_total";
// The Redis store's breaker, below this module, sets it: so the name is on the ground floor.
pub use crate::vocab::BREAKER_STATE;

/// Gives every metric of the room its help text and unit, in the recorder installed now (a
/// recorder installed later does not have them). Rooms call it when they are built; call it
/// yourself when you install the recorder after building the layer. Without the `metrics`
/// feature it does nothing.
pub fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_counter!(
            REQUESTS_TOTAL,
            "Requests the waiting room handled, by the stage that decided and the outcome."
        );
        describe_counter!(
            STORE_CALLS_TOTAL,
            "Waiting room store calls, by operation and result."
        );
        describe_histogram!(
            STORE_CALL_SECONDS,
            Unit::Seconds,
            "How long waiting room store calls took, by operation."
        );
        describe_counter!(
            SLOTS_ENDED_TOTAL,
            "Slots the app ended (checkout finished), by the header or from Rust."
        );
        describe_counter!(
            RISK_DECISIONS_TOTAL,
            "Risk decisions for new visitors, by risk and by who decided."
        );
        describe_counter!(
            VERSION_MIX_TOTAL,
            "Store calls refused as busy: the room's settings were written by a version of the \
             crate this gateway cannot read (upgrade it)."
        );
        describe_gauge!(WAITING, "Visitors in line, from the store's last answer.");
        describe_gauge!(
            INSIDE,
            "Visitors holding a claimed slot, from the last stats."
        );
        describe_gauge!(
            GRANTED,
            "Slots granted to promoted visitors not back yet, from the last stats."
        );
        describe_gauge!(
            AUTO_CAPACITY,
            "The capacity the room's controller decided last (auto capacity)."
        );
        describe_counter!(
            AUTO_DECISIONS_TOTAL,
            "The auto capacity controller's decisions, by change."
        );
        describe_gauge!(
            BREAKER_STATE,
            "The store's circuit breaker: 0 closed, 1 open, 2 half-open."
        );
    }
}

/// Where the room decided a request (the `stage` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// A valid admission token: no store call.
    FastPath,
    /// Stage 1: the queue cookie (first visit, proof of work, the per-session limit).
    CookieCheck,
    /// Stage 3: the store decided (or could not).
    Store,
    /// The room's own endpoints (status, leave, proof).
    Endpoint,
    /// A bypass rule matched.
    Bypass,
    /// A gated route (several rooms' gates): admitted, or refused.
    Gate,
    /// A waiting poll answered from the gateway's snapshot of the line: no store call.
    Snapshot,
}

impl Stage {
    const ALL: [Stage; 7] = [
        Stage::FastPath,
        Stage::CookieCheck,
        Stage::Store,
        Stage::Endpoint,
        Stage::Bypass,
        Stage::Gate,
        Stage::Snapshot,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Stage::FastPath => "fast_path",
            Stage::CookieCheck => "cookie_check",
            Stage::Store => "store",
            Stage::Endpoint => "endpoint",
            Stage::Bypass => "bypass",
            Stage::Gate => "gate",
            Stage::Snapshot => "snapshot",
        }
    }
}

/// What the room decided (the `outcome` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The store granted or extended a slot (for the status endpoint: it holds one).
    Admitted,
    /// In line.
    Waiting,
    /// The line is full.
    Full,
    /// The room is closed.
    Closed,
    /// The session was banned by an operator.
    Banned,
    /// The store is out of memory (or busy running another script).
    Busy,
    /// The store cannot decide and the room fails closed.
    Unavailable,
    /// Over a limit of the room's own (new visitors per IP, store questions per session).
    Limited,
    /// A new visitor refused by the risk decision (high risk).
    Refused,
    /// A proof-of-work challenge.
    Challenge,
    /// The first-visit redirect, with a new queue cookie.
    NewVisitor,
    /// The store cannot decide and the room fails open: let in without a slot.
    FailOpen,
    /// The store cannot decide and the room drains: let in without a slot, from the front of
    /// the line.
    Drained,
    /// Let through with no new decision: a fresh token, a bypass, a valid token whose
    /// heartbeat failed or was over the limit, a solved challenge.
    Passed,
    /// The leave endpoint freed the place or slot.
    Left,
    /// The status endpoint found the visitor nowhere.
    Unknown,
}

impl Outcome {
    const ALL: [Outcome; 16] = [
        Outcome::Admitted,
        Outcome::Waiting,
        Outcome::Full,
        Outcome::Closed,
        Outcome::Banned,
        Outcome::Busy,
        Outcome::Unavailable,
        Outcome::Limited,
        Outcome::Refused,
        Outcome::Challenge,
        Outcome::NewVisitor,
        Outcome::FailOpen,
        Outcome::Drained,
        Outcome::Passed,
        Outcome::Left,
        Outcome::Unknown,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Waiting => "waiting",
            Outcome::Full => "full",
            Outcome::Closed => "closed",
            Outcome::Banned => "banned",
            Outcome::Busy => "busy",
            Outcome::Unavailable => "unavailable",
            Outcome::Limited => "limited",
            Outcome::Refused => "refused",
            Outcome::Challenge => "challenge",
            Outcome::NewVisitor => "new_visitor",
            Outcome::FailOpen => "fail_open",
            Outcome::Drained => "drained",
            Outcome::Passed => "passed",
            Outcome::Left => "left",
            Outcome::Unknown => "unknown",
        }
    }

    /// A failed store call's outcome: busy, or the fail policy's.
    pub(crate) fn of_error(e: &StoreError, fails_open: bool) -> Self {
        match (e.store_answered(), fails_open) {
            (true, _) => Outcome::Busy,
            (false, true) => Outcome::FailOpen,
            (false, false) => Outcome::Unavailable,
        }
    }
}

/// A store call's result (the `result` label): `ok` or the error's kind.
#[cfg(feature = "metrics")]
const RESULTS: [&str; 7] = [
    "ok",
    "unavailable",
    "timeout",
    "busy",
    "protocol",
    "config",
    "misconfigured",
];

#[cfg(feature = "metrics")]
fn result_index(kind: StoreErrorKind) -> usize {
    match kind {
        StoreErrorKind::Unavailable => 1,
        StoreErrorKind::Timeout => 2,
        StoreErrorKind::Busy => 3,
        StoreErrorKind::Protocol => 4,
        StoreErrorKind::Config => 5,
        StoreErrorKind::Misconfigured => 6,
    }
}

/// The risks and deciders, in the order of the risk keys.
#[cfg(feature = "metrics")]
const RISKS: [Risk; 3] = [Risk::Low, Risk::Medium, Risk::High];
#[cfg(feature = "metrics")]
const DECIDERS: [DecidedBy; 2] = [DecidedBy::Default, DecidedBy::Hook];

#[cfg(feature = "metrics")]
fn risk_index(risk: Risk, by: DecidedBy) -> usize {
    let r = match risk {
        Risk::Low => 0,
        Risk::Medium => 1,
        Risk::High => 2,
    };
    let b = match by {
        DecidedBy::Default => 0,
        DecidedBy::Hook => 1,
    };
    r * DECIDERS.len() + b
}

/// How the app ended a slot (the `by` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EndedBy {
    /// The response header.
    Header,
    /// [`Admission::end_slot`](crate::Admission::end_slot).
    Admission,
}

/// A response future that is polled inside the request's span: implemented by the futures
/// (next to them), so that this module needs nothing from them.
pub(crate) trait InSpan {
    /// The same future, polled inside `span`.
    fn in_span(self, span: Option<tracing::Span>) -> Self;
}

/// Runs `decide` inside the request's `waiting_room` span (`room`, and `stage` and `outcome`
/// written once the room decides), and returns the span for the response future to be polled
/// in; none at all unless a subscriber wants DEBUG spans here. Checked first: with `tracing`'s
/// `log` feature on (axum's default features turn it on), `debug_span!` alone still builds the
/// span's fields for the `log` crate on every request, the fast path's dearest line after the
/// cookie scan; and without a span there is none to enter, exit or drop on the fast path.
///
/// The future is made where it is returned: on the fast path it is not moved again to be
/// paired with a span (each move of a response future is a copy of a few hundred bytes).
#[inline(always)]
pub(crate) fn in_request_span<F: InSpan>(room: &str, decide: impl FnOnce() -> F) -> F {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return decide();
    }
    in_new_request_span(room, decide)
}

/// [`in_request_span`] when a subscriber wants the span: out of line, off the fast path.
#[inline(never)]
fn in_new_request_span<F: InSpan>(room: &str, decide: impl FnOnce() -> F) -> F {
    let span = tracing::debug_span!(
        "waiting_room",
        room,
        stage = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    span.in_scope(decide).in_span(Some(span))
}

/// `store`, each of its calls counted and timed in `metrics` (and its `stats` answers setting the
/// room's gauges), with the same capabilities. Without the feature, `store` itself.
pub(crate) fn metered(store: Arc<dyn Store>, metrics: &Arc<RoomMetrics>) -> Arc<dyn Store> {
    #[cfg(feature = "metrics")]
    {
        // Each capability is wrapped once, here, and only if the store has it.
        let tickets = Arc::clone(&store).tickets().map(|inner| {
            Arc::new(Metered {
                inner,
                metrics: metrics.clone(),
            }) as Arc<dyn TicketStore>
        });
        let snapshots = Arc::clone(&store).snapshots().map(|inner| {
            Arc::new(Metered {
                inner,
                metrics: metrics.clone(),
            }) as Arc<dyn SnapshotStore>
        });
        let auto = Arc::clone(&store).auto().map(|inner| {
            Arc::new(Metered {
                inner,
                metrics: metrics.clone(),
            }) as Arc<dyn AutoStore>
        });
        Arc::new(Metered {
            inner: MeteredStore {
                store,
                tickets,
                snapshots,
                auto,
            },
            metrics: metrics.clone(),
        })
    }
    #[cfg(not(feature = "metrics"))]
    {
        let _ = metrics;
        store
    }
}

/// A store, or one of its capabilities, whose calls are counted and timed: wrapped once by the
/// room, so every store (the embedded one, Redis, the app's own) is measured the same way.
#[cfg(feature = "metrics")]
struct Metered<T> {
    inner: T,
    metrics: Arc<RoomMetrics>,
}

/// The store a [`Metered`] store calls, and its capabilities, already metered.
#[cfg(feature = "metrics")]
struct MeteredStore {
    store: Arc<dyn Store>,
    tickets: Option<Arc<dyn TicketStore>>,
    snapshots: Option<Arc<dyn SnapshotStore>>,
    auto: Option<Arc<dyn AutoStore>>,
}

#[cfg(feature = "metrics")]
impl Store for Metered<MeteredStore> {
    fn enter(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        let call = self.inner.store.enter(policy, session);
        self.metrics.timed(StoreOp::Enter, call)
    }
    fn join(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        let call = self.inner.store.join(policy, session);
        self.metrics.timed(StoreOp::Enter, call)
    }
    fn poll(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        let call = self.inner.store.poll(policy, session);
        self.metrics.timed(StoreOp::Poll, call)
    }
    fn heartbeat(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        let call = self.inner.store.heartbeat(policy, session);
        self.metrics.timed(StoreOp::Heartbeat, call)
    }
    fn release(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<bool> {
        let call = self.inner.store.release(policy, session);
        self.metrics.timed(StoreOp::Release, call)
    }
    fn stats(&self, policy: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.metrics.stats_call(self.inner.store.stats(policy))
    }
    fn configure(
        &self,
        policy: &RoomPolicy,
        change: SettingsChange,
    ) -> StoreFuture<SettingsUpdate> {
        let call = self.inner.store.configure(policy, change);
        self.metrics.timed(StoreOp::Configure, call)
    }
    fn admit_next(&self, policy: &RoomPolicy, count: u32) -> StoreFuture<u64> {
        let call = self.inner.store.admit_next(policy, count);
        self.metrics.timed(StoreOp::AdmitNext, call)
    }
    fn ban(&self, policy: &RoomPolicy, session: SessionId, until_ms: u64) -> StoreFuture<bool> {
        let call = self.inner.store.ban(policy, session, until_ms);
        self.metrics.timed(StoreOp::Ban, call)
    }
    fn tickets(self: Arc<Self>) -> Option<Arc<dyn TicketStore>> {
        self.inner.tickets.clone()
    }
    fn snapshots(self: Arc<Self>) -> Option<Arc<dyn SnapshotStore>> {
        self.inner.snapshots.clone()
    }
    fn auto(self: Arc<Self>) -> Option<Arc<dyn AutoStore>> {
        self.inner.auto.clone()
    }
}

#[cfg(feature = "metrics")]
impl AutoStore for Metered<Arc<dyn AutoStore>> {
    fn auto_report(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        counts: &crate::auto::Window,
        window_ms: u64,
        lease_ms: u64,
    ) -> StoreFuture<AutoReport> {
        let call = self
            .inner
            .auto_report(policy, gateway, counts, window_ms, lease_ms);
        self.metrics.timed(StoreOp::AutoReport, call)
    }
    fn auto_apply(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        capacity: u32,
        rate: Option<u32>,
        status: &str,
    ) -> StoreFuture<AutoApplied> {
        let call = self
            .inner
            .auto_apply(policy, gateway, capacity, rate, status);
        self.metrics.timed(StoreOp::AutoApply, call)
    }
    fn auto_switch(
        &self,
        policy: &RoomPolicy,
        off: Option<AutoOff>,
        terms: Option<&str>,
    ) -> StoreFuture<()> {
        let call = self.inner.auto_switch(policy, off, terms);
        self.metrics.timed(StoreOp::AutoSwitch, call)
    }
}

#[cfg(feature = "metrics")]
impl TicketStore for Metered<Arc<dyn TicketStore>> {
    fn mint_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
        mint_for: MintFor,
    ) -> StoreFuture<Minted> {
        let call = self
            .inner
            .mint_ticket(policy, session, fresh, expires_at_ms, mint_for);
        self.metrics.timed(StoreOp::MintTicket, call)
    }
    fn redeem_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        nonce: TicketNonce,
    ) -> StoreFuture<Redeemed> {
        let call = self.inner.redeem_ticket(policy, session, nonce);
        self.metrics.timed(StoreOp::RedeemTicket, call)
    }
}

#[cfg(feature = "metrics")]
impl SnapshotStore for Metered<Arc<dyn SnapshotStore>> {
    fn sync(&self, policy: &RoomPolicy, seen: SeenWaiters) -> StoreFuture<RoomSnapshot> {
        let call = self.inner.sync(policy, seen);
        self.metrics.timed(StoreOp::Sync, call)
    }
}

#[cfg(feature = "metrics")]
static METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

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
    bound: [OnceLock<Bound>; 2],
}

/// The counters' keys in one table, the gauges' and the histograms' in two more; each metric's
/// place in its table is given by the functions of [`at`].
#[cfg(feature = "metrics")]
struct Keys {
    counters: Vec<metrics::Key>,
    gauges: Vec<metrics::Key>,
    histograms: Vec<metrics::Key>,
}

/// Where each metric is in the tables of [`Keys`] (and of [`Bound`]).
#[cfg(feature = "metrics")]
mod at {
    use super::{DecidedBy, EndedBy, Outcome, Risk, Stage, StoreOp, DECIDERS, RESULTS, RISKS};

    const REQUESTS: usize = 0;
    const STORE_CALLS: usize = REQUESTS + Stage::ALL.len() * Outcome::ALL.len();
    const ENDED: usize = STORE_CALLS + StoreOp::ALL.len() * RESULTS.len();
    const RISK_DECISIONS: usize = ENDED + 2;
    pub(super) const VERSION_MIX: usize = RISK_DECISIONS + RISKS.len() * DECIDERS.len();
    const AUTO_DECISIONS: usize = VERSION_MIX + 1;
    pub(super) const COUNTERS: usize = AUTO_DECISIONS + crate::auto::Change::ALL.len();

    pub(super) const WAITING: usize = 0;
    pub(super) const INSIDE: usize = 1;
    pub(super) const GRANTED: usize = 2;
    pub(super) const AUTO_CAPACITY: usize = 3;
    pub(super) const GAUGES: usize = 4;

    pub(super) const HISTOGRAMS: usize = StoreOp::ALL.len();

    pub(super) fn request(stage: Stage, outcome: Outcome) -> usize {
        REQUESTS + stage as usize * Outcome::ALL.len() + outcome as usize
    }
    /// `result`: an index into `RESULTS`.
    pub(super) fn store_call(op: StoreOp, result: usize) -> usize {
        STORE_CALLS + op as usize * RESULTS.len() + result
    }
    pub(super) fn ended(by: EndedBy) -> usize {
        ENDED + by as usize
    }
    pub(super) fn risk(risk: Risk, by: DecidedBy) -> usize {
        RISK_DECISIONS + super::risk_index(risk, by)
    }
    pub(super) fn auto_decision(change: crate::auto::Change) -> usize {
        AUTO_DECISIONS + change as usize
    }
    /// The store call histogram's place.
    pub(super) fn store_seconds(op: StoreOp) -> usize {
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
struct Bound {
    /// The recorder's address, its identity (see [`recorder_address`]).
    recorder: usize,
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
fn recorder_address(recorder: &dyn metrics::Recorder) -> usize {
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
    fn new(room: &Arc<str>) -> Self {
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

#[cfg(test)]
mod tests {
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
        fn register_counter(
            &self,
            key: &metrics::Key,
            _: &metrics::Metadata<'_>,
        ) -> metrics::Counter {
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
}
