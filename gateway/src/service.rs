//! [`ArcService`]: a service every connection calls through one shared reference.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Service, ServiceExt};

/// The future of an [`ArcService`]: the inner service's, boxed once.
pub type ArcFuture<Res> = Pin<Box<dyn Future<Output = Result<Res, Infallible>> + Send>>;

type CallFn<Req, Res> = dyn Fn(Req) -> ArcFuture<Res> + Send + Sync;

/// A service behind an `Arc`: cloning it is a reference count, and calling it clones the
/// service inside (its layers' clones are cheap: settings and `Arc`s) and boxes its future
/// once. Tower's `BoxCloneSyncService` allocates a box on every clone as well, and a request
/// through the gateway cloned two of them.
pub struct ArcService<Req, Res>(Arc<CallFn<Req, Res>>);

impl<Req, Res> Clone for ArcService<Req, Res> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<Req, Res> ArcService<Req, Res>
where
    Req: Send + 'static,
    Res: 'static,
{
    /// Shares `service`, which is always ready or made ready inside the returned future.
    pub fn new<S>(service: S) -> Self
    where
        S: Service<Req, Response = Res, Error = Infallible> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
    {
        Self(Arc::new(move |req| Box::pin(service.clone().oneshot(req))))
    }

    /// Calls the service; no `&mut` needed, so one shared value serves every caller.
    pub fn call_shared(&self, req: Req) -> ArcFuture<Res> {
        (self.0)(req)
    }
}

impl<Req, Res> Service<Req> for ArcService<Req, Res>
where
    Req: Send + 'static,
    Res: 'static,
{
    type Response = Res;
    type Error = Infallible;
    type Future = ArcFuture<Res>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Readiness is awaited inside the future (`oneshot`).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> ArcFuture<Res> {
        self.call_shared(req)
    }
}

impl<Req, Res> std::fmt::Debug for ArcService<Req, Res> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArcService")
    }
}
