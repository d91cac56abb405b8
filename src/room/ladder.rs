//! The failure ladder: what a visitor without a slot gets when the store could not decide,
//! decided here once for every asker (the room's pages, its status endpoint, its gates), which
//! only render the [`Rung`] they are given.
//!
//! The rungs, tried in order:
//! 1. **busy**, when the store answered after all (busy, out of memory, or outside the
//!    protocol: a damaged key or a refused argument behind it): it is saying "not now", never
//!    "down, let everyone in", so no fail policy applies;
//! 2. **scheduled**, before a scheduled opening by the gateway's clock, whatever the fail
//!    policy: an outage never opens the room early;
//! 3. **closed**, after a scheduled closing that turns this visitor away (everyone without a
//!    slot when the line is not kept; with it kept, a visitor whose place was issued at or after
//!    the closing: certainly a newcomer);
//! 4. **the fail policy**: open lets them in (at a gate, only a visitor who came through the
//!    room); drain lets the front of the line in at its last pace and shows the others their
//!    place moved up (see [`drain`](super::drain)); closed is busy;
//! 5. **busy** otherwise: "try again soon".

use super::drain::Drained;
use super::reply::scheduled_rejection;
use super::shared::Core;
use super::snapshot::LineView;
use crate::config::FailPolicy;
use crate::outcome::{AdmittedBy, Rejection};
use crate::store::StoreError;
use crate::telemetry::Outcome;
use crate::token::QueueCookie;

/// Who asked the store, and so how a rung is rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Asker {
    /// A request for the site: an entry into the line (stage 3).
    Page,
    /// The status endpoint.
    Status,
    /// A gated route, while the store seems down (no store call was made for it).
    Gate,
}

/// The store call that failed, and who it was for.
pub(super) struct Failed<'a> {
    pub(super) error: &'a StoreError,
    /// The visitor's queue cookie, if the request carries a valid one: their place in line.
    pub(super) cookie: Option<&'a QueueCookie>,
    pub(super) asker: Asker,
    pub(super) now: u64,
}

/// What the visitor gets.
#[derive(Debug)]
pub(super) enum Rung {
    /// Before a scheduled opening: the `scheduled` answer.
    Scheduled(Rejection),
    /// After a scheduled closing that turns the visitor away: `closed`.
    Closed,
    /// Let in by the fail policy, without a slot.
    In(AdmittedBy),
    /// Draining: still in line, their place moved up by those drained ahead of them.
    Waiting(Rejection),
    /// Busy (or failing closed): "try again soon".
    Busy,
}

impl Rung {
    /// The `outcome` a failed call counts as, once its rung is known.
    pub(super) fn outcome(&self, e: &StoreError) -> Outcome {
        match self {
            Rung::In(AdmittedBy::Drained) => Outcome::Drained,
            Rung::In(_) => Outcome::FailOpen,
            Rung::Waiting(_) => Outcome::Waiting,
            Rung::Closed => Outcome::Closed,
            Rung::Scheduled(_) | Rung::Busy => Outcome::of_error(e, false),
        }
    }
}

/// The rung for `failed` (see the module's docs). `line`: the gateway's snapshot, which the
/// drain policy goes by.
pub(super) fn climb(core: &Core, line: &LineView, failed: &Failed<'_>) -> Rung {
    if failed.error.store_answered() {
        return Rung::Busy;
    }
    let now = failed.now;
    if let Some(schedule) = core.config.policy.schedule.as_ref() {
        if schedule.before_opening(now) {
            return Rung::Scheduled(scheduled_rejection(schedule.opens_at_ms, now));
        }
        if let Some(closes_at) = schedule.closes_at_ms.filter(|&c| now >= c) {
            let newcomer = failed
                .cookie
                .is_none_or(|cookie| cookie.issued_at_ms() >= closes_at);
            if !schedule.keep_line_after_close || newcomer {
                return Rung::Closed;
            }
        }
    }
    match core.config.settings.fail_policy {
        FailPolicy::Open if failed.asker == Asker::Gate && failed.cookie.is_none() => Rung::Busy,
        FailPolicy::Open => Rung::In(AdmittedBy::FailOpen),
        FailPolicy::Closed => Rung::Busy,
        FailPolicy::Drain { .. } => match Drained::of(core, line, failed.cookie, now) {
            Drained::In => Rung::In(AdmittedBy::Drained),
            Drained::Waiting(rejection) => Rung::Waiting(rejection),
            Drained::Out => Rung::Busy,
        },
    }
}
