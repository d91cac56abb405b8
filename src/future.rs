//! The response futures: [`WaitingRoom`](crate::WaitingRoom)'s, and [`AnswerFuture`] of the crate's
//! own services.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::auto::Measured;
use crate::body::{Chunks, FullBody, ResponseBody};
use crate::room::{strip_app_headers, with_room_headers, Issued, Pending, Room, Slot, Then};
use crate::store::StoreFuture;
use crate::telemetry::InSpan;

pin_project! {
    /// Response future of [`WaitingRoom`](crate::WaitingRoom): the inner service's future,
    /// the room's own answer, or a store check that ends in one of the two; and when the app
    /// ends the visitor's slot, the store call that frees it.
    pub struct ResponseFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        kind: Kind<S, ReqBody>,
        // The request's `waiting_room` span (none when DEBUG is off), entered while polled so
        // that the room's and the app's events are inside it.
        span: Option<tracing::Span>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        /// The request goes through: the inner service's future. `slot`: the slot the request
        /// holds, which the app may end.
        PassThrough {
            #[pin]
            future: S::Future,
            set_cookie: Option<Issued>,
            slot: Option<(Slot, Arc<Room>)>,
        },
        /// The request goes through once the inner service is ready (it was not when the
        /// request came, or the request waited for the store first).
        Readying {
            inner: S,
            // Boxed, as in Checking: the fast path's future (PassThrough) stays small, so
            // moving it (into axum's box, say) copies less.
            request: Option<Box<Request<ReqBody>>>,
            set_cookie: Option<Issued>,
            slot: Option<(Slot, Arc<Room>)>,
        },
        /// Waiting for the store, with the request and a service to call if it passes.
        Checking {
            pending: Box<Pending>,
            request: Option<Box<Request<ReqBody>>>,
            inner: Option<S>,
            room: Arc<Room>,
        },
        /// The app ended the visitor's slot: its response waits for the store to free the slot,
        /// so that the next in line can come in by the time the visitor sees it. The inner
        /// service is done with; nothing here readies or calls it.
        Ending {
            response: Option<S::Response>,
            call: StoreFuture<bool>,
            room: Arc<Room>,
        },
        /// The room answers.
        Answer {
            response: Option<Response<Bytes>>,
        },
        /// The room answers with a waiter's event stream. Boxed (the stream is large), so
        /// that the fast path's future stays small to move.
        Events {
            response: Option<Response<Box<dyn Chunks>>>,
        },
        /// The inner service failed to become ready.
        Failed {
            error: Option<S::Error>,
        },
    }
}

impl<S, ReqBody> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    fn new(kind: Kind<S, ReqBody>) -> Self {
        Self { kind, span: None }
    }

    pub(crate) fn pass(
        future: S::Future,
        set_cookie: Option<Issued>,
        slot: Option<(Slot, Arc<Room>)>,
    ) -> Self {
        Self::new(Kind::PassThrough {
            future,
            set_cookie,
            slot,
        })
    }

    pub(crate) fn ready_then_call(
        inner: S,
        request: Request<ReqBody>,
        set_cookie: Option<Issued>,
        slot: Option<(Slot, Arc<Room>)>,
    ) -> Self {
        Self::new(Kind::Readying {
            inner,
            request: Some(Box::new(request)),
            set_cookie,
            slot,
        })
    }

    pub(crate) fn answer(response: Response<Bytes>) -> Self {
        Self::new(Kind::Answer {
            response: Some(response),
        })
    }

    pub(crate) fn events(response: Response<Box<dyn Chunks>>) -> Self {
        Self::new(Kind::Events {
            response: Some(response),
        })
    }

    pub(crate) fn failed(error: S::Error) -> Self {
        Self::new(Kind::Failed { error: Some(error) })
    }

    pub(crate) fn ask(
        pending: Box<Pending>,
        request: Request<ReqBody>,
        inner: S,
        room: Arc<Room>,
    ) -> Self {
        Self::new(Kind::Checking {
            pending,
            request: Some(Box::new(request)),
            inner: Some(inner),
            room,
        })
    }
}

impl<S, ReqBody> InSpan for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    fn in_span(mut self, span: Option<tracing::Span>) -> Self {
        self.span = span;
        self
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let _entered = this.span.as_ref().map(tracing::Span::enter);
        loop {
            let next = match this.kind.as_mut().project() {
                KindProj::PassThrough {
                    future,
                    set_cookie,
                    slot,
                } => {
                    let mut res = ready!(future.poll(cx));
                    let said = res
                        .as_mut()
                        .ok()
                        .map(|res| (res.status(), strip_app_headers(res.headers_mut())));
                    // Only a room measuring the app (`started` set) samples: the rest pay
                    // nothing here.
                    if let Some((slot, room)) = slot.as_ref().filter(|(s, _)| s.started.is_some()) {
                        let measured = res
                            .as_ref()
                            .ok()
                            .and_then(|res| res.extensions().get::<Measured>().copied());
                        room.sampled(slot, said, measured);
                    }
                    let mut res = res?;
                    let header = said.is_some_and(|(_, said)| said.end_slot);
                    let ending = slot.take().and_then(|(slot, room)| {
                        let Some(by) = slot.ended_by(header) else {
                            slot.done();
                            return None;
                        };
                        Some((slot, room, by))
                    });
                    match ending {
                        // The fresh token of a slot that ends now is not sent.
                        Some((slot, room, by)) => Kind::Ending {
                            call: room.end_slot(&slot, by, res.headers_mut()),
                            response: Some(res),
                            room,
                        },
                        None => {
                            if let Some(issued) = set_cookie.take() {
                                issued.apply(res.headers_mut());
                            }
                            return Poll::Ready(Ok(res.map(ResponseBody::inner)));
                        }
                    }
                }
                KindProj::Ending {
                    response,
                    call,
                    room,
                } => {
                    room.slot_ended(ready!(call.as_mut().poll(cx)));
                    let res = response.take().expect("polled after completion");
                    return Poll::Ready(Ok(res.map(ResponseBody::inner)));
                }
                KindProj::Readying {
                    inner,
                    request,
                    set_cookie,
                    slot,
                } => {
                    ready!(inner.poll_ready(cx))?;
                    let req = request.take().expect("polled after completion");
                    Kind::PassThrough {
                        future: inner.call(*req),
                        set_cookie: set_cookie.take(),
                        slot: slot.take(),
                    }
                }
                KindProj::Answer { response } => {
                    let res = response.take().expect("polled after completion");
                    return Poll::Ready(Ok(with_room_headers(res).map(ResponseBody::room)));
                }
                KindProj::Events { response } => {
                    let res = response.take().expect("polled after completion");
                    return Poll::Ready(Ok(res.map(ResponseBody::events)));
                }
                KindProj::Failed { error } => {
                    return Poll::Ready(Err(error.take().expect("polled after completion")));
                }
                KindProj::Checking {
                    pending,
                    request,
                    inner,
                    room,
                } => {
                    let req = request.as_mut().expect("polled after completion");
                    let next = ready!(room.poll_pending(pending, cx, req));
                    match room.settle(next, req) {
                        Then::Pass { set_cookie, slot } => Kind::Readying {
                            inner: inner.take().expect("polled after completion"),
                            request: request.take(),
                            set_cookie,
                            slot,
                        },
                        Then::Answer(response) => Kind::Answer {
                            response: Some(response),
                        },
                        Then::Events(response) => Kind::Events {
                            response: Some(response),
                        },
                        Then::Ask(next) => {
                            *pending = next;
                            continue;
                        }
                    }
                }
            };
            this.kind.set(next);
        }
    }
}

impl<S, ReqBody> std::fmt::Debug for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

type BoxedAnswer = Pin<Box<dyn Future<Output = Response<FullBody>> + Send + 'static>>;

/// Response future of the crate's own services, the admin API (feature `admin`) and
/// matching's (the `tower-waiting-room-matching` crate): reads the request's body (up to a limit), asks the store, and
/// answers. Never fails.
///
/// Boxed: these calls are rare next to a visitor's request through the room, or wait on the
/// store anyway, so one allocation per call buys a plain `async` implementation over a
/// hand-written state machine.
#[doc(hidden)]
pub struct AnswerFuture {
    inner: BoxedAnswer,
}

impl AnswerFuture {
    /// The answer `f` as the future of a service's call (the admin API's, matching's).
    pub fn new(f: impl Future<Output = Response<FullBody>> + Send + 'static) -> Self {
        Self { inner: Box::pin(f) }
    }
}

impl Future for AnswerFuture {
    type Output = Result<Response<FullBody>, std::convert::Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx).map(Ok)
    }
}

impl std::fmt::Debug for AnswerFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerFuture").finish_non_exhaustive()
    }
}
