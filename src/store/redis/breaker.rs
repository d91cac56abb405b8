//! The circuit breaker shared by every clone of a [`RedisStore`](crate::store::RedisStore), with the
//! store's counters and its logs.
//!
//! States: **closed** (every call goes to Redis), **open** (calls are skipped until the cooldown
//! ends), **half-open** (the cooldown is over and exactly one call, the probe, goes through).
//! Every outcome of the probe ends the half-open state:
//!
//! | probe outcome | breaker |
//! |---|---|
//! | success | closes |
//! | transport failure or failover in progress ([`ErrorClass::trips`]) | re-opens for a cooldown |
//! | misconfiguration (`NOPERM`, auth, `WRONGTYPE`, …) | re-opens for a cooldown |
//! | `OOM`, `BUSY`, a version mix, a protocol error: Redis answered | closes (it is reachable) |
//! | the probe's future is dropped (the client left, an outer timeout) | no verdict: the next call becomes the probe |
//! | the probe's future is never polled again | after the call timeout the probe is taken as lost and the next call probes |
//!
//! Logs describe changes, never one line per request: one line when the breaker opens (with the
//! error class), one when it closes (with how many calls were skipped and how many probes failed
//! meanwhile), and one when an error class is first seen, then at most one per class every
//! [`REPORT_EVERY`] with the count.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::store::{StoreError, StoreErrorKind};

/// Counters of a [`RedisStore`](crate::store::RedisStore)'s calls, by outcome. Every failed call
/// is counted in exactly one error class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisStoreMetrics {
    /// Calls sent to Redis.
    pub attempts: u64,
    /// Calls not sent because the circuit breaker was open.
    pub skipped: u64,
    /// Calls that failed for lack of a connection or an answer in time, or because a failover
    /// was in progress: `connection_errors + timeouts + failover_errors`.
    pub transport_failures: u64,
    /// Whether the breaker is open (or half-open) now.
    pub breaker_open: bool,
    /// Refused, dropped or failed connections, I/O errors ([`StoreErrorKind::Unavailable`]).
    pub connection_errors: u64,
    /// Calls without an answer within the deadline ([`StoreErrorKind::Timeout`]).
    pub timeouts: u64,
    /// `READONLY`, `LOADING`, `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`, `NOREPLICAS`: a failover
    /// or restart in progress ([`StoreErrorKind::Unavailable`]).
    pub failover_errors: u64,
    /// `OOM` answers ([`StoreErrorKind::Busy`]).
    pub out_of_memory: u64,
    /// `BUSY` answers: another script runs too long ([`StoreErrorKind::Busy`]).
    pub script_busy: u64,
    /// `NOPERM`, `NOAUTH`, `WRONGPASS`, `WRONGTYPE`, `MISCONF`, a `NOSCRIPT` (or a room function
    /// not found) that survives a reload… ([`StoreErrorKind::Misconfigured`]).
    pub misconfigured: u64,
    /// Anything else Redis answered that this crate did not expect ([`StoreErrorKind::Protocol`]).
    pub protocol_errors: u64,
    /// `WRSETTINGS`: the room's settings key was written by a version of the crate this one
    /// cannot read, a rolling upgrade's mix ([`StoreErrorKind::Busy`], see
    /// [`StoreError::is_version_mix`]).
    pub version_mix: u64,
}

/// What went wrong with one call, finer than [`StoreErrorKind`]: one counter and one log line
/// each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// Refused, dropped or failed connection, I/O error.
    Connection,
    /// No answer within the call's deadline.
    Timeout,
    /// `READONLY`, `LOADING`, `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`, `NOREPLICAS`.
    Failover,
    /// `OOM`.
    OutOfMemory,
    /// `BUSY`.
    ScriptBusy,
    /// `NOPERM`, auth, `WRONGTYPE`, `MISCONF`, persistent `NOSCRIPT`, an unknown sentinel master.
    Misconfigured,
    /// Anything else.
    Protocol,
    /// `WRSETTINGS`: the room's settings of a version this crate cannot read.
    VersionMix,
}

impl ErrorClass {
    const ALL: [ErrorClass; 8] = [
        ErrorClass::Connection,
        ErrorClass::Timeout,
        ErrorClass::Failover,
        ErrorClass::OutOfMemory,
        ErrorClass::ScriptBusy,
        ErrorClass::Misconfigured,
        ErrorClass::Protocol,
        ErrorClass::VersionMix,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// The kind the layer sees.
    pub(crate) fn kind(self) -> StoreErrorKind {
        match self {
            ErrorClass::Connection | ErrorClass::Failover => StoreErrorKind::Unavailable,
            ErrorClass::Timeout => StoreErrorKind::Timeout,
            ErrorClass::OutOfMemory | ErrorClass::ScriptBusy | ErrorClass::VersionMix => {
                StoreErrorKind::Busy
            }
            ErrorClass::Misconfigured => StoreErrorKind::Misconfigured,
            ErrorClass::Protocol => StoreErrorKind::Protocol,
        }
    }

    /// Whether this error opens the breaker: Redis cannot serve the room right now and will not
    /// within the next call (unreachable, failing over, or refusing us by configuration), so
    /// every request would wait on it for nothing. `OOM`, `BUSY`, a version mix and protocol
    /// errors are quick answers from a reachable server: they do not.
    pub(crate) fn trips(self) -> bool {
        matches!(
            self,
            ErrorClass::Connection
                | ErrorClass::Timeout
                | ErrorClass::Failover
                | ErrorClass::Misconfigured
        )
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Connection => "connection",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Failover => "failover",
            ErrorClass::OutOfMemory => "out of memory",
            ErrorClass::ScriptBusy => "script busy",
            ErrorClass::Misconfigured => "misconfigured",
            ErrorClass::Protocol => "protocol",
            ErrorClass::VersionMix => "version mix",
        }
    }
}

/// How often an error class that keeps happening is logged again (with its count).
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(60);

/// The states of the breaker's gauge, [`BREAKER_STATE`](crate::telemetry::BREAKER_STATE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BreakerState {
    Closed = 0,
    Open = 1,
    HalfOpen = 2,
}

/// Sets the breaker's gauge of the store whose key prefix is `store`. Only on a change of state,
/// so its label is made here.
fn breaker_state(store: &Arc<str>, state: BreakerState) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(
        crate::vocab::BREAKER_STATE,
        "store" => metrics::SharedString::from(store.clone())
    )
    .set(state as u8 as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = (store, state);
}

/// The circuit breaker shared by every clone of a store, with the store's counters.
pub(super) struct Breaker {
    attempts: AtomicU64,
    skipped: AtomicU64,
    errors: [AtomicU64; ErrorClass::ALL.len()],
    /// Milliseconds (see [`Breaker::now`]) when each class was last logged; 0: never.
    reported_at: [AtomicU64; ErrorClass::ALL.len()],
    /// The count of each class when it was last logged.
    reported_count: [AtomicU64; ErrorClass::ALL.len()],
    cooldown: Duration,
    /// After this long a probe that has not finished (a future never polled again) is taken as
    /// lost and another call may probe.
    probe_deadline: Duration,
    start: Instant,
    /// Milliseconds since `start` until which calls are skipped; 0 when closed.
    open_until: AtomicU64,
    /// When the current probe started (ms, as `open_until`); 0 when no probe is in flight.
    probe_started: AtomicU64,
    /// The class of the error that opened the breaker, for the calls it skips.
    open_class: AtomicU8,
    /// Milliseconds since `start` of the last call that failed for a class that trips, or was
    /// skipped; 0 when none.
    last_failure: AtomicU64,
    /// How many times `last_failure` was set: a gateway's copy of the liveness bits it set
    /// (`checked_in.rs`) holds only while this stays the same.
    troubles: AtomicU64,
    /// `skipped` and the probes that failed when the breaker last opened, for the closing log.
    skipped_at_open: AtomicU64,
    failed_probes: AtomicU64,
    /// The store's name in the breaker's gauge: its key prefix, never its URL (which may hold
    /// a password).
    id: Arc<str>,
}

/// The right to send one call; every call that got one reports its outcome with
/// [`Permit::finish`]. A probe's permit dropped without an outcome (its future was dropped)
/// frees the half-open state so the next call probes.
#[must_use]
pub(super) struct Permit<'a> {
    breaker: &'a Breaker,
    /// `Some(start)` for the half-open probe.
    probe: Option<u64>,
}

impl Breaker {
    pub(super) fn new(cooldown: Duration, probe_deadline: Duration) -> Self {
        Self {
            attempts: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            errors: Default::default(),
            reported_at: Default::default(),
            reported_count: Default::default(),
            cooldown,
            probe_deadline,
            start: Instant::now(),
            open_until: AtomicU64::new(0),
            probe_started: AtomicU64::new(0),
            open_class: AtomicU8::new(ErrorClass::Connection as u8),
            last_failure: AtomicU64::new(0),
            troubles: AtomicU64::new(0),
            skipped_at_open: AtomicU64::new(0),
            failed_probes: AtomicU64::new(0),
            id: Arc::from(""),
        }
    }

    /// The breaker of the store with key prefix `id`, for its gauge.
    pub(super) fn named(mut self, id: Arc<str>) -> Self {
        self.id = id;
        breaker_state(&self.id, BreakerState::Closed);
        self
    }

    fn now(&self) -> u64 {
        // +1 so that 0 always means "closed" / "none".
        self.start.elapsed().as_millis() as u64 + 1
    }

    /// A permit to call the store now, or `Err` with the error for a skipped call (the breaker
    /// is open, or half-open with its probe in flight).
    pub(super) fn allow(&self) -> Result<Permit<'_>, StoreError> {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Ok(self.permit(None));
        }
        let now = self.now();
        if now >= until {
            // Half-open: exactly one probe, unless the one in flight is lost.
            let started = self.probe_started.load(Ordering::Acquire);
            let lost = started != 0
                && now.saturating_sub(started) > self.probe_deadline.as_millis() as u64;
            if (started == 0 || lost)
                && self
                    .probe_started
                    .compare_exchange(started, now, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                breaker_state(&self.id, BreakerState::HalfOpen);
                return Ok(self.permit(Some(now)));
            }
        }
        self.skipped.fetch_add(1, Ordering::Relaxed);
        self.note_failure();
        // A skipped call did not wait: it is `Unavailable`, unless Redis refuses the room by
        // configuration, which stays loud.
        let kind = if self.open_class.load(Ordering::Relaxed) == ErrorClass::Misconfigured as u8 {
            StoreErrorKind::Misconfigured
        } else {
            StoreErrorKind::Unavailable
        };
        Err(StoreError::with_source(
            kind,
            "circuit breaker open after a recent store failure",
        ))
    }

    fn permit(&self, probe: Option<u64>) -> Permit<'_> {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        Permit {
            breaker: self,
            probe,
        }
    }

    /// Notes a failed or skipped call: when (`failed_within`) and one more trouble.
    fn note_failure(&self) {
        self.last_failure.store(self.now(), Ordering::Relaxed);
        self.troubles.fetch_add(1, Ordering::Relaxed);
    }

    /// How many calls failed (for a class that trips) or were skipped so far: what a write
    /// acknowledged before it may have been lost with (a failover, a restart) comes with.
    pub(super) fn troubles(&self) -> u64 {
        self.troubles.load(Ordering::Relaxed)
    }

    /// Whether a call failed (or was skipped) within the last `window_ms`: the waiters'
    /// check-ins through this store failed meanwhile, so their silence is the outage's, not
    /// theirs (the room script then skips nobody for silence).
    pub(super) fn failed_within(&self, window_ms: u64) -> bool {
        let last = self.last_failure.load(Ordering::Relaxed);
        last != 0 && self.now().saturating_sub(last) <= window_ms
    }

    /// Opens (or re-opens) the breaker for a cooldown after an error of `class`.
    fn open(&self, class: ErrorClass, probe: bool) {
        self.note_failure();
        let until = self.now() + self.cooldown.as_millis() as u64;
        self.open_class.store(class as u8, Ordering::Relaxed);
        if probe {
            self.failed_probes.fetch_add(1, Ordering::Relaxed);
        }
        let was_closed = self.open_until.swap(until, Ordering::AcqRel) == 0;
        if was_closed || probe {
            // Closed or half-open to open; a second failure while open changes nothing.
            breaker_state(&self.id, BreakerState::Open);
        }
        if was_closed {
            // A change: closed to open. A failed probe or a second failure while open is not.
            self.skipped_at_open
                .store(self.skipped.load(Ordering::Relaxed), Ordering::Relaxed);
            self.failed_probes.store(0, Ordering::Relaxed);
            let cooldown = self.cooldown;
            let error_class = class.as_str();
            if class == ErrorClass::Misconfigured {
                tracing::error!(error_class, ?cooldown, "waiting room store refuses the room's calls (misconfigured); circuit breaker open");
            } else {
                tracing::warn!(
                    error_class,
                    ?cooldown,
                    "waiting room store cannot serve; circuit breaker open"
                );
            }
        }
    }

    /// Closes the breaker: Redis answered.
    fn close(&self) {
        // Load first: the common case (closed already) writes nothing.
        if self.open_until.load(Ordering::Acquire) != 0
            && self.open_until.swap(0, Ordering::AcqRel) != 0
        {
            breaker_state(&self.id, BreakerState::Closed);
            let skipped =
                self.skipped.load(Ordering::Relaxed) - self.skipped_at_open.load(Ordering::Relaxed);
            let failed_probes = self.failed_probes.load(Ordering::Relaxed);
            tracing::info!(
                skipped,
                failed_probes,
                "waiting room store answers again; circuit breaker closed"
            );
        }
    }

    /// Counts an error of `class`, and logs it when it is new or last logged long ago.
    fn count(&self, class: ErrorClass) {
        let i = class.index();
        let total = self.errors[i].fetch_add(1, Ordering::Relaxed) + 1;
        let now = self.now();
        let last = self.reported_at[i].load(Ordering::Relaxed);
        if (last == 0 || now.saturating_sub(last) >= REPORT_EVERY.as_millis() as u64)
            && self.reported_at[i]
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let since_last = total - self.reported_count[i].swap(total, Ordering::Relaxed);
            let error_class = class.as_str();
            if matches!(class, ErrorClass::Misconfigured | ErrorClass::VersionMix) {
                tracing::error!(error_class, total, since_last, "waiting room store error");
            } else {
                tracing::warn!(error_class, total, since_last, "waiting room store error");
            }
        }
    }

    pub(super) fn metrics(&self) -> RedisStoreMetrics {
        let n = |c: ErrorClass| self.errors[c.index()].load(Ordering::Relaxed);
        let connection_errors = n(ErrorClass::Connection);
        let timeouts = n(ErrorClass::Timeout);
        let failover_errors = n(ErrorClass::Failover);
        RedisStoreMetrics {
            attempts: self.attempts.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
            transport_failures: connection_errors + timeouts + failover_errors,
            breaker_open: self.open_until.load(Ordering::Acquire) != 0,
            connection_errors,
            timeouts,
            failover_errors,
            out_of_memory: n(ErrorClass::OutOfMemory),
            script_busy: n(ErrorClass::ScriptBusy),
            misconfigured: n(ErrorClass::Misconfigured),
            protocol_errors: n(ErrorClass::Protocol),
            version_mix: n(ErrorClass::VersionMix),
        }
    }
}

impl Permit<'_> {
    /// Reports the call's outcome: `Ok` or the class of its error.
    pub(super) fn finish(self, outcome: Result<(), ErrorClass>) {
        let b = self.breaker;
        match outcome {
            Ok(()) => b.close(),
            Err(class) => {
                b.count(class);
                if class.trips() {
                    b.open(class, self.probe.is_some());
                } else {
                    // OOM, BUSY, an unexpected answer: Redis is reachable and answered.
                    b.close();
                }
            }
        }
        // Drop ends the half-open state.
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let Some(started) = self.probe {
            // Only our own probe: a lost probe's permit must not free its successor's.
            let _ = self.breaker.probe_started.compare_exchange(
                started,
                0,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOLDOWN: Duration = Duration::from_millis(40);

    /// A breaker that has just tripped and whose cooldown is over: the next call is the probe.
    fn half_open() -> Breaker {
        let b = Breaker::new(COOLDOWN, Duration::from_secs(60));
        b.allow().unwrap().finish(Err(ErrorClass::Connection));
        assert!(b.allow().is_err(), "open during the cooldown");
        std::thread::sleep(COOLDOWN + Duration::from_millis(20));
        b
    }

    fn is_closed(b: &Breaker) -> bool {
        !b.metrics().breaker_open && b.allow().is_ok() && b.allow().is_ok()
    }

    #[test]
    fn breaker_skips_then_lets_one_probe_through() {
        let b = half_open();
        let probe = b.allow().expect("one probe after the cooldown");
        assert!(b.allow().is_err(), "only one probe at a time");
        probe.finish(Ok(()));
        assert!(is_closed(&b));
    }

    #[test]
    fn a_probe_that_succeeds_closes_the_breaker() {
        let b = half_open();
        b.allow().unwrap().finish(Ok(()));
        assert!(is_closed(&b));
    }

    #[test]
    fn a_probe_with_a_transport_error_reopens_for_a_cooldown() {
        let b = half_open();
        b.allow().unwrap().finish(Err(ErrorClass::Timeout));
        assert!(b.metrics().breaker_open);
        assert!(b.allow().is_err(), "a fresh cooldown");
        std::thread::sleep(COOLDOWN + Duration::from_millis(20));
        assert!(b.allow().is_ok(), "then a new probe");
    }

    #[test]
    fn a_probe_answered_busy_closes_the_breaker() {
        let b = half_open();
        b.allow().unwrap().finish(Err(ErrorClass::OutOfMemory));
        assert!(is_closed(&b), "OOM means Redis is reachable");
        let b = half_open();
        b.allow().unwrap().finish(Err(ErrorClass::ScriptBusy));
        assert!(is_closed(&b), "BUSY means Redis is reachable");
        let b = half_open();
        b.allow().unwrap().finish(Err(ErrorClass::VersionMix));
        assert!(is_closed(&b), "a version mix means Redis answered");
    }

    #[test]
    fn a_probe_with_a_protocol_error_closes_the_breaker() {
        let b = half_open();
        b.allow().unwrap().finish(Err(ErrorClass::Protocol));
        assert!(is_closed(&b), "Redis answered");
    }

    #[test]
    fn a_probe_refused_by_configuration_reopens_the_breaker() {
        let b = half_open();
        b.allow().unwrap().finish(Err(ErrorClass::Misconfigured));
        let e = b.allow().err().expect("open again");
        assert_eq!(
            e.kind(),
            StoreErrorKind::Misconfigured,
            "skipped as it failed"
        );
    }

    #[test]
    fn a_dropped_probe_lets_the_next_call_probe() {
        let b = half_open();
        let probe = b.allow().unwrap();
        assert!(b.allow().is_err());
        drop(probe);
        let next = b.allow().expect("the next call is the probe");
        next.finish(Ok(()));
        assert!(is_closed(&b));
    }

    #[test]
    fn a_probe_never_finished_is_taken_as_lost_after_its_deadline() {
        let b = Breaker::new(COOLDOWN, Duration::from_millis(30));
        b.allow().unwrap().finish(Err(ErrorClass::Connection));
        std::thread::sleep(COOLDOWN + Duration::from_millis(20));
        let stuck = b.allow().unwrap();
        assert!(b.allow().is_err());
        std::thread::sleep(Duration::from_millis(50));
        let next = b.allow().expect("a lost probe does not block the breaker");
        // The lost probe's late drop does not free its successor's half-open state.
        drop(stuck);
        assert!(b.allow().is_err());
        next.finish(Ok(()));
        assert!(is_closed(&b));
    }

    #[test]
    fn errors_are_counted_by_class() {
        let b = Breaker::new(COOLDOWN, COOLDOWN);
        for class in ErrorClass::ALL {
            // Closed by hand, so that every call is attempted.
            b.open_until.store(0, Ordering::Release);
            b.allow().unwrap().finish(Err(class));
        }
        b.open_until.store(0, Ordering::Release);
        let m = b.metrics();
        assert_eq!(
            [
                m.connection_errors,
                m.timeouts,
                m.failover_errors,
                m.out_of_memory,
                m.script_busy,
                m.misconfigured,
                m.protocol_errors,
                m.version_mix
            ],
            [1; 8]
        );
        assert_eq!(m.transport_failures, 3);
    }
}
