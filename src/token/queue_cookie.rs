//! Stage 1: the stateless cookie check and its signed queue cookie.
//!
//! A first visit creates no server state at all: the visitor gets a [`QueueCookie`] (a random
//! [`SessionId`] with an issue and expiry time, signed with the room's key) and a redirect back to
//! the same URL. Only a request that comes back with a valid queue cookie ever reaches the store,
//! so a flood of cookie-less requests costs one HMAC each and nothing else.

use super::format::{self, Claims, ValueKind};
use super::keys::Keyring;
use crate::session::SessionId;

/// The visitor's signed place-holder: who they are, not where they stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueCookie {
    claims: Claims,
    proven: bool,
}

impl QueueCookie {
    /// A new cookie with a fresh random session id, valid for `ttl_ms` from `now_ms`.
    pub fn issue(now_ms: u64, ttl_ms: u64) -> Self {
        Self::for_session(SessionId::random(), now_ms, ttl_ms)
    }

    /// A cookie for a known session id.
    pub fn for_session(session: SessionId, now_ms: u64, ttl_ms: u64) -> Self {
        Self {
            claims: Claims {
                session,
                issued_at_ms: now_ms,
                expires_at_ms: now_ms.saturating_add(ttl_ms),
            },
            proven: false,
        }
    }

    /// The same cookie, marked as belonging to a session that has solved a proof-of-work
    /// challenge ([`crate::defences::proof_of_work`]). The mark is signed: a cookie without it cannot be
    /// edited into one with it.
    pub fn into_proven(self) -> Self {
        Self {
            proven: true,
            ..self
        }
    }

    /// Whether the session has solved a proof-of-work challenge.
    pub fn is_proven(&self) -> bool {
        self.proven
    }

    /// The visitor's session id.
    pub fn session(&self) -> SessionId {
        self.claims.session
    }

    /// When it was issued (ms since the epoch).
    pub fn issued_at_ms(&self) -> u64 {
        self.claims.issued_at_ms
    }

    /// When it stops being valid (ms since the epoch).
    pub fn expires_at_ms(&self) -> u64 {
        self.claims.expires_at_ms
    }

    /// The signed cookie value for `room`, with the keyring's current key.
    pub fn sign(&self, keys: &Keyring, room: &str) -> String {
        format::sign(keys, self.kind(), room, &self.claims)
    }

    /// The cookie, if `value` is a queue cookie of `room` signed by a key of the keyring and not
    /// expired at `now_ms`; anything else is `None`, exactly like no cookie.
    pub fn verify(keys: &Keyring, room: &str, value: &str, now_ms: u64) -> Option<Self> {
        let proven = value.starts_with(ValueKind::ProvenQueue.prefix());
        let kind = if proven {
            ValueKind::ProvenQueue
        } else {
            ValueKind::Queue
        };
        let claims = format::verify_unexpired(keys, kind, room, value, now_ms)?;
        Some(Self { claims, proven })
    }

    /// Whether `value` could be a queue cookie (proven or not) at all, by its prefix and length:
    /// a cheap test, no parsing, no HMAC.
    pub(crate) fn could_be(value: &str) -> bool {
        format::could_be(ValueKind::Queue, value) || format::could_be(ValueKind::ProvenQueue, value)
    }

    fn kind(&self) -> ValueKind {
        if self.proven {
            ValueKind::ProvenQueue
        } else {
            ValueKind::Queue
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::keys::{Keyring, SigningKey};

    #[test]
    fn module_example() {
        let keys = Keyring::new(SigningKey::new("k1", [42u8; 32]).unwrap());
        let cookie = QueueCookie::issue(1_000, 60_000);
        let text = cookie.sign(&keys, "shop");
        assert_eq!(
            QueueCookie::verify(&keys, "shop", &text, 2_000),
            Some(cookie)
        );
        // Another room, a tampered value, or an expired one is no cookie at all.
        assert_eq!(QueueCookie::verify(&keys, "other", &text, 2_000), None);
        assert_eq!(
            QueueCookie::verify(&keys, "shop", &text.replace('.', "-"), 2_000),
            None
        );
        assert_eq!(QueueCookie::verify(&keys, "shop", &text, 61_000), None);

        // With proof of work on, a session that solved its challenge gets the same cookie, marked.
        let proven = cookie.into_proven().sign(&keys, "shop");
        assert!(QueueCookie::verify(&keys, "shop", &proven, 2_000)
            .unwrap()
            .is_proven());
        assert_eq!(
            QueueCookie::verify(&keys, "shop", &proven.replacen("p1", "q1", 1), 2_000),
            None
        );
    }
}
