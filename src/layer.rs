//! [`WaitingRoomLayer`]: the Tower layer, shared by every clone (its builder is in `builder.rs`).

use std::sync::Arc;

use tower_layer::Layer;

use crate::config::RoomConfig;
use crate::control::RoomControl;
use crate::room::Room;
use crate::service::WaitingRoom;
use crate::store::{RoomStats, StoreFuture};

/// Puts a waiting room in front of a service.
///
/// Build one with [`WaitingRoomLayer::builder`] (see [`WaitingRoomBuilder`](crate::WaitingRoomBuilder)); clones share the room (configuration, keys,
/// store), so the layer can be applied to any number of services and cloned across workers.
///
/// ```
/// use axum::{routing::get, Router};
/// use tower_waiting_room::WaitingRoomLayer;
///
/// # fn main() -> Result<(), tower_waiting_room::ConfigError> {
/// let room = WaitingRoomLayer::builder("launch")
///     .capacity(500)
///     .secret(*b"a secret of at least thirty-two bytes!!")
///     .build()?;
/// let app: Router = Router::new().route("/", get(|| async { "inside" })).layer(room);
/// # let _ = app;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct WaitingRoomLayer {
    room: Arc<Room>,
}

impl WaitingRoomLayer {
    /// The room's validated configuration.
    pub fn config(&self) -> &RoomConfig {
        self.room.config()
    }

    /// Counts for the room, from the store: one store call each time. For a route anyone may
    /// ask (a public `/stats`, `/metrics`), use [`SharedCounts`](crate::control::SharedCounts),
    /// which reads them at most once a second.
    pub fn stats(&self) -> StoreFuture<RoomStats> {
        self.room.stats()
    }

    /// The operator's handle on the room: live capacity, rate, pause, open and close, release
    /// and bans, shared by every gateway through the store. See [`RoomControl`].
    pub fn control(&self) -> RoomControl {
        RoomControl::new(self.room.clone())
    }

    pub(crate) fn from_room(room: Arc<Room>) -> Self {
        Self { room }
    }

    pub(crate) fn room(&self) -> &Arc<Room> {
        &self.room
    }
}

impl<S> Layer<S> for WaitingRoomLayer {
    type Service = WaitingRoom<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WaitingRoom::new(inner, self.room.clone())
    }
}

impl std::fmt::Debug for WaitingRoomLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoomLayer")
            .field("config", self.room.config())
            .finish_non_exhaustive()
    }
}
