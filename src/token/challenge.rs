//! The proof-of-work challenge: a signed value (kind `c1`) that binds a challenge to a session
//! and an expiry, so the room needs no memory to check a solution's challenge.

use super::format::{self, Claims, ValueKind};
use super::keys::Keyring;
use crate::session::SessionId;

/// A proof-of-work challenge: which session it was issued to, and when it expires. Signed with
/// the room's key like the queue cookie (kind `c1`), so it cannot be forged, moved to another
/// session or room, or extended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Challenge(Claims);

impl Challenge {
    /// A challenge for `session`, valid for `ttl_ms` from `now_ms`.
    pub fn issue(session: SessionId, now_ms: u64, ttl_ms: u64) -> Self {
        Self(Claims {
            session,
            issued_at_ms: now_ms,
            expires_at_ms: now_ms.saturating_add(ttl_ms),
        })
    }

    /// The session it is bound to.
    pub fn session(&self) -> SessionId {
        self.0.session
    }

    /// When it was issued (ms since the epoch).
    pub fn issued_at_ms(&self) -> u64 {
        self.0.issued_at_ms
    }

    /// When it stops being valid (ms since the epoch).
    pub fn expires_at_ms(&self) -> u64 {
        self.0.expires_at_ms
    }

    /// The signed challenge text for `room`.
    pub fn sign(&self, keys: &Keyring, room: &str) -> String {
        format::sign(keys, ValueKind::Challenge, room, &self.0)
    }

    /// The challenge, if `value` is one of `room`, signed by a key of the keyring and not expired
    /// at `now_ms`; anything else is `None`.
    pub fn verify(keys: &Keyring, room: &str, value: &str, now_ms: u64) -> Option<Self> {
        format::verify_unexpired(keys, ValueKind::Challenge, room, value, now_ms).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::keys::SigningKey;

    #[test]
    fn bound_to_session_room_and_time() {
        let keys = Keyring::new(SigningKey::new("k1", [42u8; 32]).unwrap());
        let session = SessionId::random();
        let challenge = Challenge::issue(session, 1_000, 60_000).sign(&keys, "shop");
        let checked = Challenge::verify(&keys, "shop", &challenge, 2_000).unwrap();
        assert_eq!(checked.session(), session);
        assert_eq!(Challenge::verify(&keys, "shop", &challenge, 61_000), None);
        assert_eq!(Challenge::verify(&keys, "other", &challenge, 2_000), None);
    }
}
