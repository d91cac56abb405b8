//! Stage 1: the stateless cookie check and its signed queue cookie.
//!
//! A first visit creates no server state at all: the visitor gets a [`QueueCookie`] (a random
//! [`SessionId`] with an issue and expiry time, signed with the room's key) and a redirect back to
//! the same URL. Only a request that comes back with a valid queue cookie ever reaches the store,
//! so a flood of cookie-less requests costs one HMAC each and nothing else.
//!
//! ```
//! use tower_waiting_room::{Keyring, QueueCookie, SigningKey};
//!
//! let keys = Keyring::new(SigningKey::new("k1", [42u8; 32]).unwrap());
//! let cookie = QueueCookie::issue(1_000, 60_000);
//! let text = cookie.sign(&keys, "shop");
//! assert_eq!(QueueCookie::verify(&keys, "shop", &text, 2_000), Some(cookie));
//! // Another room, a tampered value, or an expired one is no cookie at all.
//! assert_eq!(QueueCookie::verify(&keys, "other", &text, 2_000), None);
//! assert_eq!(QueueCookie::verify(&keys, "shop", &text.replace('.', "-"), 2_000), None);
//! assert_eq!(QueueCookie::verify(&keys, "shop", &text, 61_000), None);
//! ```

use crate::session::SessionId;
use crate::signing::{self, Claims, Keyring, Kind};

/// The visitor's signed place-holder: who they are, not where they stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueCookie {
    session: SessionId,
    issued_at_ms: u64,
    expires_at_ms: u64,
}

impl QueueCookie {
    /// A new cookie with a fresh random session id, valid for `ttl_ms` from `now_ms`.
    pub fn issue(now_ms: u64, ttl_ms: u64) -> Self {
        Self::for_session(SessionId::random(), now_ms, ttl_ms)
    }

    /// A cookie for a known session id.
    pub fn for_session(session: SessionId, now_ms: u64, ttl_ms: u64) -> Self {
        Self {
            session,
            issued_at_ms: now_ms,
            expires_at_ms: now_ms.saturating_add(ttl_ms),
        }
    }

    /// The visitor's session id.
    pub fn session(&self) -> SessionId {
        self.session
    }

    /// When it was issued (ms since the epoch).
    pub fn issued_at_ms(&self) -> u64 {
        self.issued_at_ms
    }

    /// When it stops being valid (ms since the epoch).
    pub fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }

    /// The signed cookie value for `room`, with the keyring's current key.
    pub fn sign(&self, keys: &Keyring, room: &str) -> String {
        signing::sign(keys, Kind::Queue, room, &self.claims())
    }

    /// The cookie, if `value` is a queue cookie of `room` signed by a key of the keyring and not
    /// expired at `now_ms`; anything else is `None`, exactly like no cookie.
    pub fn verify(keys: &Keyring, room: &str, value: &str, now_ms: u64) -> Option<Self> {
        let c = signing::verify(keys, Kind::Queue, room, value)?;
        (now_ms < c.expires_at_ms && c.issued_at_ms <= c.expires_at_ms).then_some(Self {
            session: c.session,
            issued_at_ms: c.issued_at_ms,
            expires_at_ms: c.expires_at_ms,
        })
    }

    fn claims(&self) -> Claims {
        Claims {
            session: self.session,
            issued_at_ms: self.issued_at_ms,
            expires_at_ms: self.expires_at_ms,
        }
    }
}
