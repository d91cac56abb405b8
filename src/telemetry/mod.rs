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

mod metered;
mod recorder;
#[cfg(test)]
mod tests;

pub(crate) use self::metered::metered;
pub(crate) use self::recorder::RoomMetrics;
