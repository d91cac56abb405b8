//! A room's side of the controller: the samples of the admitted requests it passes to the app,
//! reported to the store about once a second; and, on the gateway that holds the room's lease,
//! one decision per window, written to the store as the room's capacity.
//!
//! A request is a sample when it holds a slot (not bypassed, not let in by the fail policy,
//! not one of the room's own answers): its latency from the call to the app until the
//! response's head, and its class (below 500 and not 429: ok; 5xx, 429, or the app's service
//! failing: an error; ok but slower than the terms' timeout: a timeout), unless a layer between
//! the room and the app said more ([`Measured`](super::Measured): the client's fault, not
//! counted; or the app's own time, from the request's body sent). Recording one is a few
//! relaxed atomic additions. The first sample after a report interval takes the counts and
//! reports them in a task of its own ([`AutoStore::auto_report`]): every gateway's counts meet
//! in the store's one window. The gateway that holds the lease is handed the window when it is
//! over, reads the people inside and waiting from the store, runs the controller's law and
//! writes the decision ([`AutoStore::auto_apply`]); the store refuses it if the lease moved
//! on, and turns the controller off for every gateway if the capacity is not the one it last
//! wrote (an operator, an older gateway). Other gateways show the decision the store holds.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::StatusCode;

use super::histogram::BUCKETS;
use super::LatencyHistogram;
use super::{status, AutoCapacity, AutoStatus, Change, Controller, Decision, Reason, Window};
use crate::config::RoomPolicy;
use crate::store::{AutoApplied, AutoOff, AutoReport, AutoStore, GatewayId, Store};
use crate::telemetry::RoomMetrics;

/// How often a gateway reports at most: once a second, or four times a window if shorter.
const REPORT_MS: u64 = 1_000;

/// What became of a request that held a slot.
pub(crate) enum Sampled {
    /// The app answered with this status after this long, saying this load (its
    /// [`APP_LOAD_HEADER`](crate::config::defaults::APP_LOAD_HEADER)), if it did.
    Answered(StatusCode, Duration, Option<u8>),
    /// The app's service failed it.
    Failed,
}

/// The controller of one room, on this gateway.
pub(crate) struct AutoStage {
    /// The terms the room was built with: those it decides by unless an operator set others
    /// while it runs (the store keeps them for every gateway).
    configured: AutoCapacity,
    /// The terms' timeout and window now, read on every sample without the lock.
    timeout_ms: AtomicU64,
    window_ms: AtomicU64,
    gateway: GatewayId,
    shared: Arc<dyn AutoStore>,
    ok: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    buckets: Box<[AtomicU64]>,
    /// The highest load the app said since the last report, plus one (0: it said none).
    load: AtomicU64,
    last_report_ms: AtomicU64,
    reporting: AtomicBool,
    state: Mutex<State>,
}

struct State {
    /// The terms it decides by.
    terms: AutoCapacity,
    /// The law's state while this gateway decides; dropped when another one does or the
    /// controller is off.
    controller: Option<Controller>,
    /// Why it is off, as the store last said (or as this gateway just switched it).
    off: Option<AutoOff>,
    deciding: bool,
    /// The room's last decision: this gateway's own, or the one the store holds.
    last: Option<Decision>,
}

impl AutoStage {
    pub(crate) fn new(terms: AutoCapacity, shared: Arc<dyn AutoStore>) -> Self {
        Self {
            configured: terms,
            timeout_ms: AtomicU64::new(millis(terms.timeout())),
            window_ms: AtomicU64::new(millis(terms.get_window())),
            gateway: GatewayId::random(),
            shared,
            ok: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            load: AtomicU64::new(0),
            // The first sample reports at once: the lease and the window start with the
            // room's first admitted request, not one interval after it.
            last_report_ms: AtomicU64::new(u64::MAX),
            reporting: AtomicBool::new(false),
            state: Mutex::new(State {
                terms,
                controller: None,
                off: None,
                deciding: false,
                last: None,
            }),
        }
    }

    fn window_ms(&self) -> u64 {
        self.window_ms.load(Ordering::Relaxed)
    }

    /// Decides by `terms` from now on: the controller starts again from the capacity it
    /// finds, by them.
    fn take_terms(&self, state: &mut State, terms: AutoCapacity) {
        if state.terms != terms {
            state.terms = terms;
            state.controller = None;
            self.timeout_ms
                .store(millis(terms.timeout()), Ordering::Relaxed);
            self.window_ms
                .store(millis(terms.get_window()), Ordering::Relaxed);
        }
    }

    /// How long the lease lasts without a report from its holder: two windows and a second,
    /// so a holder that goes quiet for a moment keeps it, and one that dies hands it on
    /// within that.
    pub(crate) fn lease_ms(&self) -> u64 {
        self.window_ms().saturating_mul(2).saturating_add(1_000)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one request.
    pub(crate) fn sample(&self, sampled: Sampled) {
        if let Sampled::Answered(_, _, Some(load)) = sampled {
            self.load.fetch_max(u64::from(load) + 1, Ordering::Relaxed);
        }
        match sampled {
            Sampled::Answered(status, _, _)
                if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS =>
            {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
            Sampled::Answered(_, latency, _)
                if millis(latency) > self.timeout_ms.load(Ordering::Relaxed) =>
            {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
            }
            Sampled::Answered(_, latency, _) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
                self.buckets[LatencyHistogram::bucket_of(latency)].fetch_add(1, Ordering::Relaxed);
            }
            Sampled::Failed => {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The counts since the last report when one is due at `now_ms` and none is under way:
    /// the caller reports them ([`report`](Self::report)).
    pub(crate) fn due(&self, now_ms: u64) -> Option<Window> {
        let last = self.last_report_ms.load(Ordering::Relaxed);
        let every = REPORT_MS.min(self.window_ms() / 4).max(1);
        // A clock that went back reports at once rather than waiting for it.
        if now_ms >= last && now_ms - last < every {
            return None;
        }
        if self.reporting.swap(true, Ordering::Acquire) {
            return None;
        }
        self.last_report_ms.store(now_ms, Ordering::Relaxed);
        let mut counts = Window {
            ok: self.ok.swap(0, Ordering::Relaxed),
            errors: self.errors.swap(0, Ordering::Relaxed),
            timeouts: self.timeouts.swap(0, Ordering::Relaxed),
            load: match self.load.swap(0, Ordering::Relaxed) {
                0 => None,
                said => u8::try_from(said - 1).ok(),
            },
            ..Window::default()
        };
        for (index, bucket) in self.buckets.iter().enumerate() {
            let n = bucket.swap(0, Ordering::Relaxed);
            if n > 0 {
                counts.latencies.add_to_bucket(index, n);
            }
        }
        Some(counts)
    }

    /// Gives up the report [`due`](Self::due) handed out (nothing to send it with); its counts
    /// are lost, as those of a report the store did not take.
    pub(crate) fn skip(&self) {
        self.reporting.store(false, Ordering::Release);
    }

    /// Reports `counts` (taken by [`due`](Self::due)) and, when the store hands this gateway
    /// the window, decides it.
    pub(crate) async fn report(
        self: Arc<Self>,
        counts: Window,
        store: Arc<dyn Store>,
        policy: RoomPolicy,
        metrics: Arc<RoomMetrics>,
    ) {
        let answer = self
            .shared
            .auto_report(
                &policy,
                self.gateway,
                &counts,
                self.window_ms(),
                self.lease_ms(),
            )
            .await;
        match answer {
            Ok(report) => {
                if let Some(window) = self.heard(report, &policy.room) {
                    self.decide(window, &store, &policy, &metrics).await;
                }
            }
            Err(e) => {
                tracing::debug!(room = %policy.room, error = %e, "auto capacity: a report was lost");
            }
        }
        self.reporting.store(false, Ordering::Release);
    }

    /// Takes in what the store said; the window to decide, if this gateway decides it.
    fn heard(&self, report: AutoReport, room: &str) -> Option<Window> {
        let mut state = self.lock();
        if report.deciding && !state.deciding {
            tracing::debug!(room, gateway = %self.gateway, "auto capacity: this gateway decides");
        }
        state.deciding = report.deciding;
        state.off = report.off;
        // Terms an operator set while the room runs, for every gateway; those that cannot be
        // read or run with (another version's, damage) are none: the room's own.
        let shared = report
            .terms
            .as_deref()
            .and_then(|t| t.parse::<AutoCapacity>().ok())
            .filter(|t| t.check().is_ok());
        self.take_terms(&mut state, shared.unwrap_or(self.configured));
        if report.off.is_some() || !report.deciding {
            state.controller = None;
        }
        if !report.deciding || state.last.is_none() {
            state.last = report.status.as_deref().and_then(status::read);
        }
        report
            .window
            .filter(|_| report.off.is_none() && report.deciding)
    }

    /// Decides `window`: the people inside and waiting from the store, the controller's law,
    /// and the decision written.
    async fn decide(
        &self,
        mut window: Window,
        store: &Arc<dyn Store>,
        policy: &RoomPolicy,
        metrics: &RoomMetrics,
    ) {
        let stats = match store.stats(policy).await {
            Ok(stats) => stats,
            Err(e) => {
                tracing::debug!(room = %policy.room, error = %e, "auto capacity: no stats; the window is skipped");
                return;
            }
        };
        let settings = &stats.settings;
        if settings.paused || !settings.open {
            return;
        }
        let live = u32::try_from(stats.capacity).unwrap_or(u32::MAX);
        window.inside = (stats.admitted + stats.granted) as f64;
        window.waiting = stats.waiting;
        let (decision, before, rate) = {
            let mut state = self.lock();
            let terms = state.terms;
            // A gateway that takes over from another (or from a capacity set by hand) goes on
            // from the capacity it finds, past the start; only the room's very first decider
            // starts with the fast growth of the start.
            let first = state.last.is_none();
            // A controller whose capacity is not the room's goes: an operator set one by hand on
            // another gateway and turned the controller back on before this one heard it off
            // (or another gateway decided meanwhile). Deciding from its own would overwrite the
            // room's; it goes on from that, as one taking over. (A room's capacity outside the
            // bounds is the controller's, brought within them: below.)
            if state
                .controller
                .as_ref()
                .is_some_and(|c| c.capacity() != live.clamp(terms.get_min(), terms.get_max()))
            {
                state.controller = None;
            }
            let controller = state.controller.get_or_insert_with(|| {
                if first {
                    Controller::new(terms, live)
                } else {
                    Controller::taking_over(terms, live)
                }
            });
            let mut decision = controller.decide(&window);
            if decision.change == Change::Hold && decision.capacity != live {
                // The live capacity was outside the bounds (the room's own, at the start): the
                // decision brings it within them, and says so.
                decision.change = if decision.capacity > live {
                    Change::Grow
                } else {
                    Change::BackOff
                };
                decision.reason = Reason::AtBound;
            }
            let rate = terms
                .get_rate_follows()
                .then(|| follow_rate(policy, settings.admission_rate, live, decision.capacity))
                .flatten();
            (decision, state.last, rate)
        };
        let written = self
            .shared
            .auto_apply(
                policy,
                self.gateway,
                decision.capacity,
                rate,
                &status::write(&decision),
            )
            .await;
        let mut state = self.lock();
        match written {
            Ok(AutoApplied::Applied { .. }) => {
                state.last = Some(decision);
                drop(state);
                metrics.auto(&decision);
                log(&policy.room, before, &decision);
            }
            Ok(AutoApplied::NotDeciding) => {
                state.deciding = false;
                state.controller = None;
            }
            Ok(AutoApplied::Off(why)) => {
                state.off = Some(why);
                state.controller = None;
            }
            Ok(AutoApplied::ChangedElsewhere) => {
                state.off = Some(AutoOff::ChangedElsewhere);
                state.controller = None;
                tracing::info!(room = %policy.room, capacity = live, "auto capacity off: the capacity was changed by someone else");
            }
            Err(e) => {
                tracing::warn!(room = %policy.room, error = %e, "auto capacity: the decision could not be stored");
            }
        }
    }

    /// Turns the controller off (`Some`) or on for every gateway: here at once, in the store
    /// for the others (they see it at their next report).
    pub(crate) async fn switch(
        &self,
        policy: &RoomPolicy,
        off: Option<AutoOff>,
        terms: Option<AutoCapacity>,
    ) -> Result<(), crate::store::StoreError> {
        {
            let mut state = self.lock();
            state.off = off;
            state.controller = None;
            if let Some(terms) = terms {
                self.take_terms(&mut state, terms);
            }
        }
        let text = terms.map(|t| t.to_string());
        self.shared.auto_switch(policy, off, text.as_deref()).await
    }

    /// The terms it decides by now.
    pub(crate) fn terms(&self) -> AutoCapacity {
        self.lock().terms
    }

    pub(crate) fn status(&self) -> AutoStatus {
        let state = self.lock();
        AutoStatus::new(&state.terms, state.off, state.deciding, state.last)
    }
}

/// The admission rate that follows `capacity`, in the proportion the room was built with
/// (`policy`'s rate over its capacity, at least 1 a second); `None` when the room has no rate,
/// or its rate is not the one that proportion gives for the `live` capacity (an operator set
/// it otherwise: theirs stands), or it would not change.
fn follow_rate(policy: &RoomPolicy, rate: Option<u32>, live: u32, capacity: u32) -> Option<u32> {
    let (built, rate) = (policy.admission_rate?, rate?);
    let at = |capacity: u32| {
        let r = f64::from(built) * f64::from(capacity) / f64::from(policy.capacity.max(1));
        (r.round() as u32).max(1)
    };
    (rate == at(live) && at(capacity) != rate).then(|| at(capacity))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One `info` line when the capacity turns (up after down, or down after up), not per window.
fn log(room: &str, before: Option<Decision>, now: &Decision) {
    let direction = |d: &Decision| match d.change {
        Change::Grow => 1,
        Change::BackOff | Change::Cut => -1,
        _ => 0,
    };
    let turned = direction(now) != 0 && before.is_none_or(|b| direction(&b) != direction(now));
    if turned {
        tracing::info!(
            room,
            capacity = now.capacity,
            change = ?now.change,
            reason = ?now.reason,
            p95_ms = now.p95.map(|d| d.as_millis() as u64),
            error_rate = now.error_rate,
            "auto capacity"
        );
    } else {
        tracing::debug!(room, capacity = now.capacity, change = ?now.change, reason = ?now.reason, "auto capacity");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_follows_the_capacity_in_the_rooms_proportion_unless_set_otherwise() {
        // Built with 100 people and 10 a second.
        let policy = RoomPolicy::new("r", 100).with_admission_rate(Some(10));
        assert_eq!(follow_rate(&policy, Some(10), 100, 150), Some(15));
        assert_eq!(follow_rate(&policy, Some(15), 150, 100), Some(10));
        // Small steps: rounded in the proportion, never drifting from it, never below 1.
        assert_eq!(follow_rate(&policy, Some(10), 100, 104), None);
        assert_eq!(follow_rate(&policy, Some(10), 104, 106), Some(11));
        assert_eq!(follow_rate(&policy, Some(11), 106, 3), Some(1));
        // A rate an operator set otherwise, or none: left alone.
        assert_eq!(follow_rate(&policy, Some(25), 100, 150), None);
        assert_eq!(follow_rate(&policy, None, 100, 150), None);
        let unlimited = RoomPolicy::new("r", 100);
        assert_eq!(follow_rate(&unlimited, Some(10), 100, 150), None);
    }
}
