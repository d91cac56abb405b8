//! One capacity decision for a whole fleet of gateways: the [`AutoStore`] capability, through
//! which the gateways of a room whose capacity follows the app
//! ([`auto_capacity`](crate::WaitingRoomBuilder::auto_capacity)) pool their measurements and
//! let one of them decide.
//!
//! Every gateway measures the admitted requests it passes to the app and reports its counts
//! about once a second ([`auto_report`](AutoStore::auto_report)). The store adds them into the
//! room's one window, on the store's clock, so gateways' clocks never move a window. One
//! gateway holds the room's lease, taken by the first report that finds it free and renewed by
//! each of its reports: that gateway alone is handed the window, once it has lasted the
//! window's length, merged over every gateway's reports, and decides; it writes its decision
//! with [`auto_apply`](AutoStore::auto_apply), which checks, in the same step as the write, that
//! it still holds the lease and that nobody changed the capacity since the controller last
//! wrote it. A gateway that dies or loses the store stops renewing: its lease runs out, the
//! capacity it last wrote stands, and the next report of another gateway takes the lease (and
//! the counts gathered meanwhile). An operator turns the controller off or on for every gateway
//! at once ([`auto_switch`](AutoStore::auto_switch)); a capacity written by anyone else (an
//! operator, an older gateway) turns it off at the next decision instead of being overwritten.
//!
//! The exact rules, which the conformance suite's `auto_*` cases check:
//! - the record of a room's controller is the store's own, apart from the line and the slots: a
//!   report touches nothing else; an apply writes the capacity (and the admission rate, when
//!   it is given one) as [`configure`](super::Store::configure) does (the capacity before it
//!   remembered for the wait estimate, a raise promoting at once), and nothing else of the
//!   room;
//! - the lease: a report by the holder, or one that finds it free or run out, gives it to the
//!   reporter until `now + lease_ms`. A lease that ends further than `lease_ms` from now (a clock
//!   that went back) has run out;
//! - the window begins at the first report after the last hand-over (or ever), and a window
//!   that begins in the future (a clock that went back) begins again now, its counts kept; a
//!   report by the holder once the window is `window_ms` old is answered the window, from its
//!   beginning to now, and the next one begins;
//! - a report of a controller that is off is still counted (the counts are the app's, whoever
//!   decides), and answers why it is off;
//! - an apply writes nothing unless the controller is on and the caller holds the lease; when
//!   the room's capacity is not the one the controller last wrote (none written yet, or since
//!   switched on: any capacity is), it turns the controller off (`changed_elsewhere`) and writes
//!   nothing;
//! - terms set with a switch are kept until others are set, whatever else happens to the
//!   controller, and answered with every report;
//! - a lost or damaged record reads as a new one: on, no lease, an empty window, no capacity
//!   written, no terms set (each gateway decides by its own). Damage thus never moves the capacity outside the operator's bounds, nor lets
//!   anyone in: the capacity is written only within them, and the line's rules do the rest.

use std::fmt;

use super::{StoreError, StoreErrorKind, StoreFuture};
use crate::auto::Window;
use crate::config::RoomPolicy;

/// Who reports and decides: one id per room and gateway process, random.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct GatewayId(u64);

impl GatewayId {
    /// A fresh random id.
    pub fn random() -> Self {
        let [a, b, c, d, e, f, g, h, ..] = crate::encoding::random_128();
        Self(u64::from_le_bytes([a, b, c, d, e, f, g, h]) | 1)
    }

    /// The id as a number (never 0).
    pub fn get(self) -> u64 {
        self.0
    }

    /// The id of a number; `None` for 0.
    pub fn from_u64(id: u64) -> Option<Self> {
        (id != 0).then_some(Self(id))
    }
}

impl fmt::Debug for GatewayId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GatewayId({self})")
    }
}

impl fmt::Display for GatewayId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Why a room's controller is off, as the store keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AutoOff {
    /// An operator set the capacity by hand, or switched the controller off.
    SetByHand,
    /// The capacity was not the one the controller last wrote: someone else changed it.
    ChangedElsewhere,
}

impl AutoOff {
    /// In snake case, as the admin's JSON and the stores write it.
    pub fn as_str(self) -> &'static str {
        match self {
            AutoOff::SetByHand => "set_by_hand",
            AutoOff::ChangedElsewhere => "changed_elsewhere",
        }
    }

    /// The reason written as [`as_str`](Self::as_str) does; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "set_by_hand" => Some(AutoOff::SetByHand),
            "changed_elsewhere" => Some(AutoOff::ChangedElsewhere),
            _ => None,
        }
    }
}

/// The most bytes of a decision's status ([`AutoStore::auto_apply`]) a store keeps.
pub const MAX_AUTO_STATUS: usize = 200;

/// What a report is answered.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct AutoReport {
    /// Why the controller is off for the room; `None`: on.
    pub off: Option<AutoOff>,
    /// Whether the reporter holds the lease: it decides.
    pub deciding: bool,
    /// The window to decide on, to the lease holder once it is over: the counts, latencies and
    /// highest load of every gateway's reports, from its beginning to now (store time). Its
    /// people inside and waiting are left at zero: the decider reads them from the room.
    pub window: Option<Window>,
    /// The status the decider last wrote with its decision (at most [`MAX_AUTO_STATUS`] bytes),
    /// for every gateway to show.
    pub status: Option<String>,
    /// The terms an operator set while the room runs ([`auto_switch`](AutoStore::auto_switch)),
    /// for every gateway to decide by instead of its own; `None`: none set.
    pub terms: Option<String>,
}

impl AutoReport {
    /// An answer: on or off, deciding or not, with a window and a status.
    pub fn new(
        off: Option<AutoOff>,
        deciding: bool,
        window: Option<Window>,
        status: Option<String>,
    ) -> Self {
        Self {
            off,
            deciding,
            window,
            status,
            terms: None,
        }
    }

    /// With the terms an operator set.
    pub fn with_terms(mut self, terms: Option<String>) -> Self {
        self.terms = terms;
        self
    }
}

/// What became of a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AutoApplied {
    /// The capacity is now the decided one; it was `before`.
    Applied {
        /// The capacity before.
        before: u32,
    },
    /// The caller does not hold the lease (any more): nothing written.
    NotDeciding,
    /// The controller is off: nothing written.
    Off(AutoOff),
    /// The capacity was not the one the controller last wrote: the controller is now off
    /// ([`AutoOff::ChangedElsewhere`]), nothing written.
    ChangedElsewhere,
}

/// A store that lets a fleet of gateways take one capacity decision per room: an optional
/// capability of a [`Store`](super::Store), found by [`Store::auto`](super::Store::auto). The
/// rules are in the [module docs](self).
pub trait AutoStore: Send + Sync {
    /// Adds `counts` (what `gateway` measured since its last report: [`Window::ok`],
    /// [`errors`](Window::errors), [`timeouts`](Window::timeouts),
    /// [`latencies`](Window::latencies) and [`load`](Window::load); the rest is not read) to the
    /// room's window, takes or renews the lease when it is free or `gateway`'s, and answers the
    /// controller's state, with the window when `gateway` decides and it is over.
    fn auto_report(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        counts: &Window,
        window_ms: u64,
        lease_ms: u64,
    ) -> StoreFuture<AutoReport>;

    /// Writes `capacity` (at least 1) as the room's, and `rate` (at least 1) as its admission
    /// rate if given (`None` leaves the rate as it is), with `status` (what every gateway
    /// shows, at most [`MAX_AUTO_STATUS`] bytes), if `gateway` holds the lease, the controller
    /// is on and the capacity is the one it last wrote.
    fn auto_apply(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        capacity: u32,
        rate: Option<u32>,
        status: &str,
    ) -> StoreFuture<AutoApplied>;

    /// Turns the room's controller on (`None`: from whatever capacity the room has) or off
    /// (with why), for every gateway; with `terms` (at most [`MAX_AUTO_STATUS`] bytes), keeps
    /// them as the terms every gateway decides by from its next report, on or off (`None`
    /// leaves those kept as they are).
    fn auto_switch(
        &self,
        policy: &RoomPolicy,
        off: Option<AutoOff>,
        terms: Option<&str>,
    ) -> StoreFuture<()>;
}

/// The longest window or lease a report may name: an hour, in ms.
pub(crate) const MAX_AUTO_TERM_MS: u64 = 3_600_000;

/// A report's window and lease, as every store takes them: 1 ms to an hour each.
pub(crate) fn check_auto_terms(window_ms: u64, lease_ms: u64) -> Result<(), StoreError> {
    let within = |ms: u64| (1..=MAX_AUTO_TERM_MS).contains(&ms);
    if within(window_ms) && within(lease_ms) {
        Ok(())
    } else {
        Err(refused("a window or lease outside 1 ms to an hour"))
    }
}

/// Terms as every store takes them: at most [`MAX_AUTO_STATUS`] bytes.
pub(crate) fn check_auto_switch(terms: Option<&str>) -> Result<(), StoreError> {
    if terms.is_some_and(|t| t.len() > MAX_AUTO_STATUS) {
        Err(refused("terms longer than 200 bytes"))
    } else {
        Ok(())
    }
}

/// A decision as every store takes it: a capacity and a rate (if any) of at least 1, a status
/// of at most [`MAX_AUTO_STATUS`] bytes.
pub(crate) fn check_auto_apply(
    capacity: u32,
    rate: Option<u32>,
    status: &str,
) -> Result<(), StoreError> {
    if capacity == 0 || rate == Some(0) {
        Err(refused("a capacity or rate of 0"))
    } else if status.len() > MAX_AUTO_STATUS {
        Err(refused("a status longer than 200 bytes"))
    } else {
        Ok(())
    }
}

/// A call refused for its arguments: a protocol error, never an outage (nobody is let in by it).
fn refused(why: &'static str) -> StoreError {
    StoreError::with_source(StoreErrorKind::Protocol, why)
}
