//! What to do with a request ([`Next`]), and the store questions in flight ([`Pending`]): each
//! step holds its store call and the context its answer needs, and its stage turns the answer
//! into the [`Next`] thing to do, so a step can never be paired with another step's answer.
//! [`Room`](super::Room) runs a step's answer through the stage it belongs to.
//!
//! The stages (gates, tickets, the snapshot, event streams) answer with a [`Verdict`] whose
//! step is their own, and the conversions here turn it into a [`Next`].

use std::convert::Infallible;

use bytes::Bytes;
use http::Response;

use super::decision::{Enter, Heartbeat, Leave, Status};
use super::events::EventsStart;
use super::gate::GateHeartbeat;
use super::reply::Issued;
use super::snapshot::SyncStep;
use super::ticket::{MintWithSlot, Redeem, StatusTicket};
use super::verdict::Verdict;
use crate::outcome::Admission;

/// What to do with a request.
pub(crate) enum Next {
    /// Call the inner service, with the admission in the request's extensions and, when the
    /// store just granted or extended the slot, a fresh admission token on the response.
    Pass {
        admission: Admission,
        set_cookie: Option<Issued>,
    },
    /// Answer here.
    Answer(Response<Bytes>),
    /// Answer here with a waiter's event stream.
    Events(EventsStart),
    /// Ask the store, then do what the step says with its answer. Boxed: the response future
    /// keeps it boxed, and the fast path's `Next` stays small to move.
    Ask(Box<Pending>),
}

impl Next {
    /// Pass, with nothing to add to the response.
    pub(crate) fn pass(admission: Admission) -> Self {
        Next::Pass {
            admission,
            set_cookie: None,
        }
    }

    /// Ask the store first.
    pub(crate) fn ask(pending: Pending) -> Self {
        Next::Ask(Box::new(pending))
    }
}

/// A stage's verdict, its own step made the room's.
impl<S: Into<Next>> From<Verdict<S>> for Next {
    fn from(verdict: Verdict<S>) -> Self {
        match verdict {
            Verdict::Pass {
                admission,
                set_cookie,
            } => Next::Pass {
                admission,
                set_cookie,
            },
            Verdict::Answer(res) => Next::Answer(res),
            Verdict::Step(step) => step.into(),
        }
    }
}

/// A verdict without a step of its own.
impl From<Infallible> for Next {
    fn from(never: Infallible) -> Self {
        match never {}
    }
}

impl From<EventsStart> for Next {
    fn from(start: EventsStart) -> Self {
        Next::Events(start)
    }
}

impl From<GateHeartbeat> for Next {
    fn from(step: GateHeartbeat) -> Self {
        Next::ask(Pending::Gate(step))
    }
}

impl From<SyncStep> for Next {
    fn from(step: SyncStep) -> Self {
        Next::ask(Pending::Sync(step))
    }
}

impl From<MintWithSlot> for Next {
    fn from(step: MintWithSlot) -> Self {
        Next::ask(Pending::MintWithSlot(step))
    }
}

impl From<StatusTicket> for Next {
    fn from(step: StatusTicket) -> Self {
        Next::ask(Pending::StatusTicket(step))
    }
}

impl From<Redeem> for Next {
    fn from(step: Redeem) -> Self {
        Next::ask(Pending::Redeem(step))
    }
}

/// A store question in flight, with what its answer will need.
pub(crate) enum Pending {
    /// Stage 3 for a visitor with a queue cookie (see `decision`).
    Enter(Enter),
    /// An admitted visitor whose token is past `refresh` but not expired.
    Heartbeat(Heartbeat),
    /// The status endpoint.
    Status(Status),
    /// The gateway's snapshot is due: refreshed, then the waiting poll that found it due is
    /// answered (see `snapshot`).
    Sync(SyncStep),
    /// The leave endpoint.
    Leave(Leave),
    /// A valid admission token past `refresh` on a gated route (see `gate`).
    Gate(GateHeartbeat),
    /// Single-use tickets on: the store just granted or extended the visitor's slot (a new
    /// slot, a claimed grant, or a heartbeat), and is asked for their ticket (minted, or found
    /// and extended with the slot) before the request passes.
    MintWithSlot(MintWithSlot),
    /// The status endpoint for a visitor with a valid admission token, single-use tickets on.
    StatusTicket(StatusTicket),
    /// A gated route's single-use ticket, being used.
    Redeem(Redeem),
}
