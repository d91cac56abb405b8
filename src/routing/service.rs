//! [`WaitingRoomsService`], the middleware service of several rooms.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use tower_service::Service;

use super::layer::{Rooms, Route};
use crate::body::ResponseBody;
use crate::future::ResponseFuture;
use crate::room::Room;
use crate::service::{carry_out, decide, pass};

/// Middleware that puts several waiting rooms in front of `S`. Made by
/// [`WaitingRooms`](super::WaitingRooms).
///
/// The rooms' own answers (redirects, waiting pages, endpoints, a gate's `403`) are responses,
/// never errors: `Error` is `S::Error`.
///
/// # Readiness
///
/// As for a single [`WaitingRoom`](crate::WaitingRoom): always ready, and only a request that
/// passes (through a room, a gate, or no rule at all) readies the inner service, in `call` when
/// it is ready right away, or else in the response future, which takes the readied inner with
/// it and leaves a clone behind.
pub struct WaitingRoomsService<S> {
    inner: S,
    rooms: Arc<Rooms>,
}

impl<S> WaitingRoomsService<S> {
    pub(crate) fn new(inner: S, rooms: Arc<Rooms>) -> Self {
        Self { inner, rooms }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone> Clone for WaitingRoomsService<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            rooms: self.rooms.clone(),
        }
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for WaitingRoomsService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rooms: Vec<&str> = self.rooms.all().iter().map(|r| r.config().room()).collect();
        f.debug_struct("WaitingRoomsService")
            .field("inner", &self.inner)
            .field("rooms", &rooms)
            .finish()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for WaitingRoomsService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: http_body::Body<Data = Bytes>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    /// Always ready, as a single room is: see [Readiness](Self#readiness).
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let (room, gated) = match self.rooms.route(&req) {
            // No room's business: untouched, no span.
            Route::Pass => return pass(&mut self.inner, req, None, None),
            Route::Room(room) => (room.clone(), false),
            Route::Gate(room) => (room.clone(), true),
        };
        crate::telemetry::in_request_span(room.config().room(), || {
            if gated {
                gate(&mut self.inner, &room, self.rooms.all(), req)
            } else {
                decide(&mut self.inner, &room, self.rooms.all(), req)
            }
        })
    }
}

/// A gated request: admitted or refused; never queued, never bypassed (a gate is a route
/// only the admitted reach; a bypass is a convenience, and one that also covered a spelling of
/// the gated route would let anyone past it).
fn gate<S, ReqBody, ResBody>(
    inner: &mut S,
    room: &Arc<Room>,
    others: &[Arc<Room>],
    req: Request<ReqBody>,
) -> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    let next = room.gate(&req, others);
    carry_out(inner, room, next, req)
}
