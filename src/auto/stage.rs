//! A room's side of the controller: the samples of the admitted requests it passes to the app,
//! and, when a window is over, one decision written to the store as the room's capacity.
//!
//! A request is a sample when it holds a slot (not bypassed, not let in by the fail policy,
//! not one of the room's own answers): its latency from the call to the app until the
//! response's head, and its class (below 500 and not 429: ok; 5xx, 429, or the app's service
//! failing: an error; ok but slower than the terms' timeout: a timeout). Recording one is a few
//! relaxed atomic additions. The first sample after a window's end takes the window's counts
//! and decides in a task of its own: the room's counts of people inside and waiting from the
//! store, the controller's law, and the new capacity written to the store when it moved.
//!
//! The capacity written is remembered: when the store's capacity differs from it at the next
//! decision, someone else changed it (an operator, the admin API, another gateway deciding for
//! the same room) and the controller turns itself off rather than overwrite them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use serde::Serialize;

use super::histogram::BUCKETS;
use super::{AutoCapacity, Change, Controller, Decision, LatencyHistogram, Reason, Window};
use crate::config::RoomPolicy;
use crate::store::{SettingsChange, Store};
use crate::telemetry::RoomMetrics;

/// What became of a request that held a slot.
pub(crate) enum Sampled {
    /// The app answered with this status after this long.
    Answered(StatusCode, Duration),
    /// The app's service failed it.
    Failed,
}

/// The controller of one room, on this gateway.
pub(crate) struct AutoStage {
    terms: AutoCapacity,
    ok: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    buckets: Box<[AtomicU64]>,
    window_start_ms: AtomicU64,
    deciding: AtomicBool,
    state: Mutex<State>,
}

/// Why it is off: the capacity was set through the room's handle or the admin API.
const SET_BY_HAND: &str = "set_by_hand";
/// Why it is off: the store's capacity was not the one it wrote (another gateway deciding, an
/// operator on another gateway).
const CHANGED_ELSEWHERE: &str = "changed_elsewhere";

#[derive(Default)]
struct State {
    controller: Option<Controller>,
    off: Option<&'static str>,
    written: Option<u32>,
    last: Option<Decision>,
}

/// What the controller of a room is doing, as an operator sees it (in the admin's JSON,
/// `"auto"`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AutoStatus {
    /// Whether it moves the capacity.
    pub enabled: bool,
    /// The lowest capacity it may set.
    pub min: u32,
    /// The highest.
    pub max: u32,
    /// The p95 it aims at, in ms.
    pub target_ms: u64,
    /// The share of errors it tolerates.
    pub error_budget: f64,
    /// The last decided window's p95 of admitted requests, in ms.
    pub p95_ms: Option<u64>,
    /// Its median, in ms.
    pub p50_ms: Option<u64>,
    /// Its share of errors and timeouts.
    pub error_rate: Option<f64>,
    /// Its requests.
    pub samples: u64,
    /// The capacity it last decided.
    pub capacity: Option<u32>,
    /// How that moved the capacity.
    pub change: Option<Change>,
    /// Why, in snake case: the last decision's [`Reason`](super::Reason), or why it is off
    /// (`set_by_hand`, `changed_elsewhere`).
    pub reason: Option<&'static str>,
}

impl AutoStage {
    pub(crate) fn new(terms: AutoCapacity, now_ms: u64) -> Self {
        Self {
            terms,
            ok: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            window_start_ms: AtomicU64::new(now_ms),
            deciding: AtomicBool::new(false),
            state: Mutex::new(State::default()),
        }
    }

    /// Counts one request.
    pub(crate) fn sample(&self, sampled: Sampled) {
        match sampled {
            Sampled::Answered(status, _)
                if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS =>
            {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
            Sampled::Answered(_, latency) if latency > self.terms.timeout() => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
            }
            Sampled::Answered(_, latency) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
                self.buckets[LatencyHistogram::bucket_of(latency)].fetch_add(1, Ordering::Relaxed);
            }
            Sampled::Failed => {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The window's counts when it is over at `now_ms` and nobody else is deciding it: the
    /// caller decides ([`decide`](Self::decide)).
    pub(crate) fn due(&self, now_ms: u64) -> Option<Window> {
        let start = self.window_start_ms.load(Ordering::Relaxed);
        let window_ms = u64::try_from(self.terms.get_window().as_millis()).unwrap_or(u64::MAX);
        // A clock that went back starts the window again rather than waiting for it.
        if now_ms >= start && now_ms - start < window_ms {
            return None;
        }
        if self.deciding.swap(true, Ordering::Acquire) {
            return None;
        }
        self.window_start_ms.store(now_ms, Ordering::Relaxed);
        let mut window = Window {
            start_ms: start.min(now_ms),
            end_ms: now_ms,
            ok: self.ok.swap(0, Ordering::Relaxed),
            errors: self.errors.swap(0, Ordering::Relaxed),
            timeouts: self.timeouts.swap(0, Ordering::Relaxed),
            ..Window::default()
        };
        for (index, bucket) in self.buckets.iter().enumerate() {
            let n = bucket.swap(0, Ordering::Relaxed);
            if n > 0 {
                window.latencies.add_to_bucket(index, n);
            }
        }
        Some(window)
    }

    /// Gives up deciding the window [`due`](Self::due) handed out (nothing to decide it on).
    pub(crate) fn skip(&self) {
        self.deciding.store(false, Ordering::Release);
    }

    /// Decides `window` (taken by [`due`](Self::due)): the people inside and waiting from the
    /// store, the controller's law, and the capacity written when it moved.
    pub(crate) async fn decide(
        self: Arc<Self>,
        mut window: Window,
        store: Arc<dyn Store>,
        policy: RoomPolicy,
        metrics: Arc<RoomMetrics>,
    ) {
        let stats = store.stats(&policy).await;
        let outcome = match stats {
            Ok(stats) => self.apply(&mut window, &stats, &store, &policy).await,
            Err(e) => {
                tracing::debug!(room = %policy.room, error = %e, "auto capacity: no stats; the window is skipped");
                None
            }
        };
        if let Some((before, decision)) = outcome {
            metrics.auto(&decision);
            log(&policy.room, before, &decision);
        }
        self.deciding.store(false, Ordering::Release);
    }

    async fn apply(
        &self,
        window: &mut Window,
        stats: &crate::store::RoomStats,
        store: &Arc<dyn Store>,
        policy: &RoomPolicy,
    ) -> Option<(Option<Decision>, Decision)> {
        let live = u32::try_from(stats.capacity).unwrap_or(u32::MAX);
        window.inside = (stats.admitted + stats.granted) as f64;
        window.waiting = stats.waiting;
        let (decision, before) = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.off.is_some() {
                return None;
            }
            if state.written.is_some_and(|w| w != live) {
                state.off = Some(CHANGED_ELSEWHERE);
                state.controller = None;
                tracing::info!(room = %policy.room, capacity = live, "auto capacity off: the capacity was changed by someone else");
                return None;
            }
            let settings = &stats.settings;
            if settings.paused || !settings.open {
                return None;
            }
            let terms = self.terms;
            let controller = state
                .controller
                .get_or_insert_with(|| Controller::new(terms, live));
            let mut decision = controller.decide(window);
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
            let before = state.last.replace(decision);
            (decision, before)
        };
        if decision.capacity != live {
            match store
                .configure(policy, SettingsChange::new().capacity(decision.capacity))
                .await
            {
                Ok(_) => {
                    let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    state.written = Some(decision.capacity);
                }
                Err(e) => {
                    tracing::warn!(room = %policy.room, error = %e, "auto capacity: the new capacity could not be stored")
                }
            }
        } else {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.written = Some(live);
        }
        Some((before, decision))
    }

    /// Turns the controller off: an operator set the capacity by hand.
    pub(crate) fn set_by_hand(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.off = Some(SET_BY_HAND);
        state.controller = None;
    }

    /// Turns it back on, from the capacity the store has at its next decision.
    pub(crate) fn turn_on(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *state = State::default();
    }

    pub(crate) fn status(&self) -> AutoStatus {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let last = state.last;
        AutoStatus {
            enabled: state.off.is_none(),
            min: self.terms.get_min(),
            max: self.terms.get_max(),
            target_ms: ms(self.terms.get_target_p95()),
            error_budget: self.terms.get_error_budget(),
            p95_ms: last.and_then(|d| d.p95).map(ms),
            p50_ms: last.and_then(|d| d.p50).map(ms),
            error_rate: last.map(|d| d.error_rate),
            samples: last.map_or(0, |d| d.samples),
            capacity: last.map(|d| d.capacity),
            change: last.map(|d| d.change),
            reason: state.off.or(last.map(|d| d.reason.as_str())),
        }
    }
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
