//! The response future of [`AdminService`](super::AdminService).

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;

use super::AdminBody;

type Boxed = Pin<Box<dyn Future<Output = Response<AdminBody>> + Send + 'static>>;

/// Response future of [`AdminService`](super::AdminService): reads the request's body (up to
/// the limit), asks the store, and answers. Never fails.
///
/// Boxed: an operator's call is rare next to a visitor's, so one allocation per call buys a
/// plain `async` implementation over a hand-written state machine.
pub struct ResponseFuture {
    inner: Boxed,
}

impl ResponseFuture {
    pub(crate) fn new(f: impl Future<Output = Response<AdminBody>> + Send + 'static) -> Self {
        Self { inner: Box::pin(f) }
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response<AdminBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx).map(Ok)
    }
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
