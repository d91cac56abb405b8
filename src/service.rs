//! [`WaitingRoom`], the middleware service.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{Request, Response};
use tower_service::Service;

use crate::body::ResponseBody;
use crate::future::ResponseFuture;
use crate::room::{Issued, Next, Room, Slot, Then};
use crate::telemetry::{Outcome, Stage};

/// Middleware that puts a waiting room in front of `S`. Made by
/// [`WaitingRoomLayer`](crate::WaitingRoomLayer).
///
/// Requests the room answers itself (first visits, waiting visitors, the room's endpoints) get
/// a response, never an error: `Error` is `S::Error`.
///
/// # Readiness
///
/// The room is always ready ([`poll_ready`](Service::poll_ready) returns `Ready(Ok(()))` at
/// once): its own answers must not wait for the app, which is saturated exactly when waiters ask
/// most. Only a request that passes readies the inner service, in `call` when it is ready right
/// away (then it is called at once, without a clone) or else in the response future, which waits
/// for it. So:
///
/// - behind a `ConcurrencyLimit` or a `Buffer`, waiters are answered while every permit is taken,
///   and an admitted request waits its turn inside its response future;
/// - an error from the inner's `poll_ready` comes out of the response future of the request that
///   needed it, not out of the room's `poll_ready`;
/// - a layer *outside* the room that reacts to readiness (`LoadShed`, a balancer's ready cache)
///   never sees the app as busy: put load shedding *inside* the room (between the room and the
///   app), where it sheds only admitted requests.
pub struct WaitingRoom<S> {
    inner: S,
    room: Arc<Room>,
}

impl<S> WaitingRoom<S> {
    pub(crate) fn new(inner: S, room: Arc<Room>) -> Self {
        Self { inner, room }
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

impl<S: Clone> Clone for WaitingRoom<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            room: self.room.clone(),
        }
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for WaitingRoom<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoom")
            .field("inner", &self.inner)
            .field("room", &self.room.config().room())
            .finish()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for WaitingRoom<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: http_body::Body<Data = Bytes>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    /// Always ready: the room's own answers (redirects, the waiting page, status polls, leave)
    /// must not wait for the inner service, which may be saturated: that is when waiters ask
    /// most. Only a request that passes readies the inner service, in [`call`](Self::call) or
    /// in the response future, as [`tower::util::Oneshot`] does.
    ///
    /// [`tower::util::Oneshot`]: https://docs.rs/tower/latest/tower/util/struct.Oneshot.html
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        // No span (nothing allocated, entered or recorded) unless a subscriber wants DEBUG here.
        let Self { inner, room } = self;
        crate::telemetry::in_request_span(room.config().room(), || decide(inner, room, &[], req))
    }
}

/// The dispatch of a request to `room` in front of `inner`: its gated routes (which no bypass
/// rule skips), the room's bypass rules, then its endpoints and three stages. Shared by [`WaitingRoom`] and the several
/// rooms of [`WaitingRooms`](crate::routing::WaitingRooms), which has chosen the room. `others`:
/// the other rooms behind the same layer, for a gate to tell `other_room` from `invalid`.
#[inline]
pub(crate) fn decide<S, ReqBody, ResBody>(
    inner: &mut S,
    room: &Arc<Room>,
    others: &[Arc<Room>],
    req: Request<ReqBody>,
) -> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    // A gate first: a bypass rule that also covered a spelling of a gated route
    // (`/static/..%2fcheckout`, which a server in front may resolve) would let anyone past it.
    let next = if room.is_gated(&req) {
        room.gate(&req, others)
    } else if room.bypasses(&req) {
        // Not the room's business: straight to the inner service.
        room.metrics().request(Stage::Bypass, Outcome::Passed);
        return pass(inner, req, None, None);
    } else {
        room.classify(&req)
    };
    carry_out(inner, room, next, req)
}

/// Does what the room said: pass the request to `inner`, answer it, or ask the store first.
#[inline]
pub(crate) fn carry_out<S, ReqBody, ResBody>(
    inner: &mut S,
    room: &Arc<Room>,
    next: Next,
    req: Request<ReqBody>,
) -> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    let mut req = req;
    match room.settle(next, &mut req) {
        Then::Pass { set_cookie, slot } => pass(inner, req, set_cookie, slot),
        // The inner service is neither readied nor called: it reserves nothing.
        Then::Answer(res) => ResponseFuture::answer(res),
        Then::Events(res) => ResponseFuture::events(res),
        // A clone goes with the request, readied only if the store lets the request pass,
        // so a store round trip never holds the inner's capacity.
        Then::Ask(pending) => ResponseFuture::ask(pending, req, inner.clone(), room.clone()),
    }
}

/// Calls the inner service with a request that passes. The fast path: when the inner is ready
/// right now it is called at once, with no clone. Otherwise the inner (with whatever place in
/// line its `poll_ready` took) moves into the future, which readies it before the call, and
/// `inner` is left a fresh clone. Either way `inner` is left un-readied, holding no reservation
/// between requests.
#[inline]
pub(crate) fn pass<S, ReqBody>(
    inner: &mut S,
    req: Request<ReqBody>,
    set_cookie: Option<Issued>,
    slot: Option<(Slot, Arc<Room>)>,
) -> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>> + Clone,
{
    let mut cx = Context::from_waker(Waker::noop());
    match inner.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => ResponseFuture::pass(inner.call(req), set_cookie, slot),
        Poll::Ready(Err(e)) => ResponseFuture::failed(e),
        Poll::Pending => {
            let clone = inner.clone();
            let readied = std::mem::replace(inner, clone);
            ResponseFuture::ready_then_call(readied, req, set_cookie, slot)
        }
    }
}
