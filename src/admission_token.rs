//! Stage 2: the signed-token fast path.
//!
//! An admitted visitor carries an [`AdmissionToken`]: session id, issue time and slot expiry,
//! signed with HMAC-SHA256 for one room. While it is younger than the room's `refresh` the request
//! goes straight to the inner service with no store call at all. Older but unexpired, one
//! heartbeat extends the slot and a fresh token rides back on the response.
//!
//! ```
//! use std::time::Duration;
//! use tower_waiting_room::{AdmissionToken, Keyring, SessionId, SigningKey};
//!
//! let keys = Keyring::new(SigningKey::new("k1", [42u8; 32]).unwrap());
//! let token = AdmissionToken::new(SessionId::random(), 10_000, 310_000);
//! let text = token.sign(&keys, "shop");
//! let checked = AdmissionToken::verify(&keys, "shop", &text, 12_000).unwrap();
//! assert!(checked.is_fresh(12_000, Duration::from_secs(15)));
//! assert!(!checked.is_fresh(26_000, Duration::from_secs(15)));
//! assert_eq!(AdmissionToken::verify(&keys, "shop", &text, 310_000), None); // expired
//! ```

use std::time::Duration;

use crate::clock::duration_ms;
use crate::session::SessionId;
use crate::signing::{self, Claims, Keyring, Kind};

/// Proof that a visitor holds a slot, until `expires_at_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdmissionToken {
    session: SessionId,
    issued_at_ms: u64,
    expires_at_ms: u64,
}

impl AdmissionToken {
    /// A token for `session`, issued at `issued_at_ms`, valid until `expires_at_ms`.
    pub fn new(session: SessionId, issued_at_ms: u64, expires_at_ms: u64) -> Self {
        Self {
            session,
            issued_at_ms,
            expires_at_ms,
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

    /// When the slot it stands for expires unless extended (ms since the epoch).
    pub fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }

    /// Young enough to be trusted without asking the store.
    pub fn is_fresh(&self, now_ms: u64, refresh: Duration) -> bool {
        now_ms.saturating_sub(self.issued_at_ms) < duration_ms(refresh)
    }

    /// The signed token for `room`, with the keyring's current key.
    pub fn sign(&self, keys: &Keyring, room: &str) -> String {
        signing::sign(
            keys,
            Kind::Admission,
            room,
            &Claims {
                session: self.session,
                issued_at_ms: self.issued_at_ms,
                expires_at_ms: self.expires_at_ms,
            },
        )
    }

    /// The token, if `value` is an admission token of `room` signed by a key of the keyring and
    /// not expired at `now_ms`; anything else is `None`, exactly like no token.
    pub fn verify(keys: &Keyring, room: &str, value: &str, now_ms: u64) -> Option<Self> {
        let c = signing::verify(keys, Kind::Admission, room, value)?;
        (now_ms < c.expires_at_ms && c.issued_at_ms <= now_ms.saturating_add(60_000)).then_some(
            Self {
                session: c.session,
                issued_at_ms: c.issued_at_ms,
                expires_at_ms: c.expires_at_ms,
            },
        )
    }
}
