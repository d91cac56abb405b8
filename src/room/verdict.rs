//! [`Verdict`]: what a stage says of a request, in its own terms. The stages sit below the
//! room's decision code (`pending`, `mod.rs`): each answers with a verdict whose step is its
//! own type, and the decision code turns it into the room's [`Next`](super::Next), so no stage
//! needs to know the room's whole list of store steps.

use std::convert::Infallible;

use bytes::Bytes;
use http::Response;

use super::reply::Issued;
use crate::outcome::Admission;

/// What a stage says to do with a request: pass it, answer it here, or take the stage's own
/// next step `S` (a store call with what its answer needs, or an event stream to open). A
/// verdict that can take no step is a `Verdict<Infallible>`.
pub(crate) enum Verdict<S = Infallible> {
    /// Call the inner service (see [`Next::Pass`](super::Next::Pass)).
    Pass {
        admission: Admission,
        set_cookie: Option<Issued>,
    },
    /// Answer here.
    Answer(Response<Bytes>),
    /// The stage's own next step.
    Step(S),
}

impl<S> Verdict<S> {
    /// Pass, with nothing to add to the response.
    pub(crate) fn pass(admission: Admission) -> Self {
        Verdict::Pass {
            admission,
            set_cookie: None,
        }
    }
}
