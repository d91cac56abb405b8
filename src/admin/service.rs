//! [`AdminService`], the Tower service.

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use ring::hmac;
use tower_service::Service;

use super::builder::AdminBuilder;
use super::routes;
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

pub(super) struct Inner {
    pub(super) auth: Auth,
    pub(super) rooms: Vec<RoomControl>,
    pub(super) prefix: Option<String>,
    pub(super) body_limit: usize,
}

pub(super) enum Auth {
    /// `Authorization: Bearer <token>` whose HMAC under `key` is `tag`.
    Bearer { key: hmac::Key, tag: Vec<u8> },
    /// The app's own auth is in front.
    None,
}

impl Auth {
    /// Whether `token` (from the request) is the one: the HMACs of both are compared in constant
    /// time, whatever the length of what was sent.
    pub(super) fn accepts(&self, token: Option<&[u8]>) -> bool {
        match self {
            Auth::None => true,
            Auth::Bearer { key, tag } => token.is_some_and(|t| hmac::verify(key, t, tag).is_ok()),
        }
    }

    pub(super) fn required(&self) -> bool {
        matches!(self, Auth::Bearer { .. })
    }
}

impl AdminService {
    /// Starts building the service: choose [`bearer_token`](AdminBuilder::bearer_token) or
    /// [`without_token`](AdminBuilder::without_token), add each room's
    /// [`control`](crate::WaitingRoomLayer::control), then [`build`](AdminBuilder::build).
    ///
    /// ```
    /// use tower_waiting_room::admin::AdminService;
    /// use tower_waiting_room::testing::TestRoom;
    ///
    /// let room = TestRoom::new("drop", 10);
    /// // Behind the app's own operator auth (not shown): no token.
    /// let admin = AdminService::builder()
    ///     .without_token()
    ///     .room(room.layer().control())
    ///     .prefix("/ops/waiting-room")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(admin.rooms().collect::<Vec<_>>(), ["drop"]);
    /// ```
    pub fn builder() -> AdminBuilder {
        AdminBuilder::default()
    }

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
