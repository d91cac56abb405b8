//! The response future of [`WaitingRoom`](crate::WaitingRoom).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::body::ResponseBody;
use crate::room::{finish, Answered, Issued, Next, Pending, Room, Step};

pin_project! {
    /// Response future of [`WaitingRoom`](crate::WaitingRoom): the inner service's future,
    /// the room's own answer, or a store check that ends in one of the two.
    pub struct ResponseFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        kind: Kind<S, ReqBody>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        /// The request goes through.
        PassThrough {
            #[pin]
            future: S::Future,
            set_cookie: Option<Issued>,
        },
        /// Waiting for the store; holds the request and the readied inner service.
        Checking {
            pending: Pending,
            step: Step,
            request: Option<Request<ReqBody>>,
            inner: Option<S>,
            room: Arc<Room>,
        },
        /// The room answers.
        Answer {
            response: Option<Response<Bytes>>,
        },
    }
}

impl<S, ReqBody> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn pass(future: S::Future, set_cookie: Option<Issued>) -> Self {
        Self {
            kind: Kind::PassThrough { future, set_cookie },
        }
    }

    pub(crate) fn answer(response: Response<Bytes>) -> Self {
        Self {
            kind: Kind::Answer {
                response: Some(response),
            },
        }
    }

    pub(crate) fn ask(
        pending: Pending,
        step: Step,
        request: Request<ReqBody>,
        inner: S,
        room: Arc<Room>,
    ) -> Self {
        Self {
            kind: Kind::Checking {
                pending,
                step,
                request: Some(request),
                inner: Some(inner),
                room,
            },
        }
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let next = match this.kind.as_mut().project() {
                KindProj::PassThrough { future, set_cookie } => {
                    let mut res = ready!(future.poll(cx))?;
                    if let Some(issued) = set_cookie.take() {
                        issued.apply(res.headers_mut());
                    }
                    return Poll::Ready(Ok(res.map(ResponseBody::inner)));
                }
                KindProj::Answer { response } => {
                    let res = response.take().expect("polled after completion");
                    return Poll::Ready(Ok(finish(res).map(ResponseBody::room)));
                }
                KindProj::Checking {
                    pending,
                    step,
                    request,
                    inner,
                    room,
                } => {
                    let answered = match pending {
                        Pending::Decision(f) => Answered::Decision(ready!(f.as_mut().poll(cx))),
                        Pending::Released(f) => Answered::Released(ready!(f.as_mut().poll(cx))),
                    };
                    let req = request.as_mut().expect("polled after completion");
                    match room.after_store(*step, answered, req) {
                        Next::Pass {
                            admission,
                            set_cookie,
                        } => {
                            let mut req = request.take().expect("polled after completion");
                            req.extensions_mut().insert(admission);
                            let mut svc = inner.take().expect("polled after completion");
                            Kind::PassThrough {
                                future: svc.call(req),
                                set_cookie,
                            }
                        }
                        Next::Answer(response) => Kind::Answer {
                            response: Some(response),
                        },
                        Next::Ask {
                            pending: next,
                            step: next_step,
                        } => {
                            *pending = next;
                            *step = next_step;
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
