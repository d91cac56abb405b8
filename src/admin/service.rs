//! [`AdminService`], the Tower service.

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::routes;
use super::shared::{Auth, Inner};
use super::{AdminBody, ResponseFuture};
use crate::control::RoomControl;

/// The admin HTTP API and dashboard for one or more rooms: see [the module](super) for the
/// contract, and [`AdminService::builder`].
///
/// Always ready; never fails (`Error = Infallible`): every rejection is a response. Cheap to
/// clone. `Debug` shows the rooms and how callers are checked, never the token.
#[derive(Clone)]
pub struct AdminService {
    pub(super) inner: Arc<Inner>,
}

impl AdminService {
    /// The ids of the rooms it controls, in the order they were added.
    pub fn rooms(&self) -> impl Iterator<Item = &str> + '_ {
        self.inner.rooms.iter().map(RoomControl::room)
    }
}

impl fmt::Debug for AdminService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = match self.inner.auth {
            Auth::Bearer { .. } => "bearer token",
            Auth::None => "none (the app's own auth in front)",
        };
        f.debug_struct("AdminService")
            .field("auth", &auth)
            .field("rooms", &self.rooms().collect::<Vec<_>>())
            .field("prefix", &self.inner.prefix)
            .field("body_limit", &self.inner.body_limit)
            .finish()
    }
}

impl<B> Service<Request<B>> for AdminService
where
    B: http_body::Body + Send + 'static,
{
    type Response = Response<AdminBody>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        ResponseFuture::new(routes::answer(self.inner.clone(), req))
    }
}
