//! What every clone of [`AdminService`](super::AdminService) shares: the rooms, where it is
//! mounted, and how callers are checked. Built by the builder, read by the routes.

use ring::hmac;

use crate::control::RoomControl;

/// The service's settings, behind one `Arc` for all its clones.
pub(super) struct Inner {
    pub(super) auth: Auth,
    pub(super) rooms: Vec<RoomControl>,
    pub(super) prefix: Option<String>,
    pub(super) body_limit: usize,
}

/// How callers are checked.
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
