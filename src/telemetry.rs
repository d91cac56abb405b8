//! What the room tells operators: metrics through the [`metrics`](https://docs.rs/metrics) facade
//! (feature `metrics`, on by default) and a `tracing` span per request.
//!
//! # Metrics
//!
//! The room records through whatever recorder the application installs (for Prometheus,
//! `metrics-exporter-prometheus`); with none installed, recording costs a thread-local read and
//! nothing else: every key the room records on a request is made once, when the room is built,
//! so no label is formatted or allocated per request. Call [`describe`] after installing a
//! recorder to give every metric its help text and unit. Every metric is labelled with `room`;
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

/// One room's metric keys, made once when the room is built: recording a request clones no
/// label and allocates nothing.
pub(crate) struct RoomMetrics {
    #[cfg(feature = "metrics")]
    keys: Keys,
}

#[cfg(feature = "metrics")]
struct Keys {
    /// By `stage * Outcome::ALL.len() + outcome`.
    requests: Vec<metrics::Key>,
    /// By `op * RESULTS.len() + result`.
    store_calls: Vec<metrics::Key>,
    /// By `op`.
    store_seconds: Vec<metrics::Key>,
    /// By [`EndedBy`].
    ended: [metrics::Key; 2],
    /// By `risk * DECIDERS.len() + by`.
    risks: Vec<metrics::Key>,
    version_mix: metrics::Key,
    waiting: metrics::Key,
    inside: metrics::Key,
    granted: metrics::Key,
    auto_capacity: metrics::Key,
    /// By [`Change`](crate::auto::Change), in the order of `Change::ALL`.
    auto_decisions: Vec<metrics::Key>,
}

impl RoomMetrics {
    pub(crate) fn new(room: &Arc<str>) -> Self {
        describe();
        #[cfg(not(feature = "metrics"))]
        let _ = room;
        Self {
            #[cfg(feature = "metrics")]
            keys: Keys::new(room),
        }
    }

    /// The room decided a request: counted, and written on the request's span.
    #[inline]
    pub(crate) fn request(&self, stage: Stage, outcome: Outcome) {
        #[cfg(feature = "metrics")]
        {
            let i = stage as usize * Outcome::ALL.len() + outcome as usize;
            counter(&self.keys.requests[i]);
        }
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
        gauge(&self.keys.waiting, waiting);
        #[cfg(not(feature = "metrics"))]
        let _ = waiting;
    }

    /// The room's counts, from the store.
    pub(crate) fn stats(&self, stats: &RoomStats) {
        #[cfg(feature = "metrics")]
        {
            gauge(&self.keys.waiting, stats.waiting);
            gauge(&self.keys.inside, stats.admitted);
            gauge(&self.keys.granted, stats.granted);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = stats;
    }

    /// A decision of the room's capacity controller.
    pub(crate) fn auto(&self, decision: &crate::auto::Decision) {
        #[cfg(feature = "metrics")]
        {
            counter(&self.keys.auto_decisions[decision.change as usize]);
            gauge(&self.keys.auto_capacity, u64::from(decision.capacity));
        }
        #[cfg(not(feature = "metrics"))]
        let _ = decision;
    }

    /// The app ended a slot.
    pub(crate) fn ended(&self, by: EndedBy) {
        #[cfg(feature = "metrics")]
        counter(&self.keys.ended[by as usize]);
        #[cfg(not(feature = "metrics"))]
        let _ = by;
    }

    /// The risk decision for a new visitor.
    pub(crate) fn risk(&self, risk: Risk, by: DecidedBy) {
        #[cfg(feature = "metrics")]
        counter(&self.keys.risks[risk_index(risk, by)]);
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
                let keys = &this.keys;
                counter(&keys.store_calls[op as usize * RESULTS.len() + result]);
                if answer.as_ref().is_err_and(StoreError::is_version_mix) {
                    counter(&keys.version_mix);
                }
                metrics::with_recorder(|r| {
                    r.register_histogram(&keys.store_seconds[op as usize], &METADATA)
                        .record(start.elapsed().as_secs_f64())
                });
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
        let mut requests = Vec::new();
        for stage in Stage::ALL {
            for outcome in Outcome::ALL {
                let labels = [("stage", stage.as_str()), ("outcome", outcome.as_str())];
                requests.push(key(REQUESTS_TOTAL, &labels));
            }
        }
        let mut store_calls = Vec::new();
        for op in StoreOp::ALL {
            for result in RESULTS {
                store_calls.push(key(
                    STORE_CALLS_TOTAL,
                    &[("op", op.as_str()), ("result", result)],
                ));
            }
        }
        let store_seconds = StoreOp::ALL
            .iter()
            .map(|op| key(STORE_CALL_SECONDS, &[("op", op.as_str())]))
            .collect();
        let mut risks = Vec::new();
        for risk in RISKS {
            for by in DECIDERS {
                let labels = [("risk", risk.as_str()), ("by", by.as_str())];
                risks.push(key(RISK_DECISIONS_TOTAL, &labels));
            }
        }
        Self {
            requests,
            store_calls,
            store_seconds,
            risks,
            ended: [
                key(SLOTS_ENDED_TOTAL, &[("by", "header")]),
                key(SLOTS_ENDED_TOTAL, &[("by", "admission")]),
            ],
            version_mix: key(VERSION_MIX_TOTAL, &[]),
            waiting: key(WAITING, &[]),
            inside: key(INSIDE, &[]),
            granted: key(GRANTED, &[]),
            auto_capacity: key(AUTO_CAPACITY, &[]),
            auto_decisions: crate::auto::Change::ALL
                .iter()
                .map(|c| key(AUTO_DECISIONS_TOTAL, &[("change", c.as_str())]))
                .collect(),
        }
    }
}

#[cfg(feature = "metrics")]
#[inline]
fn counter(key: &metrics::Key) {
    metrics::with_recorder(|r| r.register_counter(key, &METADATA).increment(1));
}

#[cfg(feature = "metrics")]
fn gauge(key: &metrics::Key, value: u64) {
    metrics::with_recorder(|r| r.register_gauge(key, &METADATA).set(value as f64));
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
