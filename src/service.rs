//! [`WaitingRoom`], the middleware service.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use tower_service::Service;

use crate::body::ResponseBody;
use crate::future::ResponseFuture;
use crate::room::{Next, Room};

/// Middleware that puts a waiting room in front of `S`. Made by
/// [`WaitingRoomLayer`](crate::WaitingRoomLayer).
///
/// Requests the room answers itself (first visits, waiting visitors, the room's endpoints) get
/// a response, never an error: `Error` is `S::Error`.
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
            .field("room", &self.room.config.room())
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

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        if self.room.bypasses(&req) {
            // Not the room's business: the readied service is called right now.
            return ResponseFuture::pass(self.inner.call(req), None);
        }
        match self.room.classify(&req) {
            Next::Pass {
                admission,
                set_cookie,
            } => {
                // The fast path: the readied service is called right now, no clone needed.
                req.extensions_mut().insert(admission);
                ResponseFuture::pass(self.inner.call(req), set_cookie)
            }
            Next::Answer(res) => {
                // The inner is not called: drop the readied service (releasing whatever its
                // readiness reserved, such as a concurrency-limit permit) and keep a fresh clone
                // for the next `poll_ready`.
                let clone = self.inner.clone();
                drop(std::mem::replace(&mut self.inner, clone));
                ResponseFuture::answer(res)
            }
            Next::Ask { pending, step } => {
                // The readied service goes with the request, to be called once the store has
                // answered; `self` keeps a fresh clone that the next `poll_ready` readies.
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                ResponseFuture::ask(pending, step, req, inner, self.room.clone())
            }
        }
    }
}
