//! Signing keys and rotation.
//!
//! Both stateless stages of a room rest on HMAC-SHA256 ([`MacKey`](super::mac::MacKey)): the server hands out a
//! small signed value and later checks it without any store. A [`Keyring`] holds the current
//! [`SigningKey`] (used to sign) and optionally the previous one (still accepted when verifying),
//! each with a short key id carried in the signed value so keys can rotate without logging anyone
//! out.
//!
//! ```
//! use tower_waiting_room::{Keyring, SigningKey};
//!
//! let current = SigningKey::new("2026-11", [7u8; 32]).unwrap();
//! let previous = SigningKey::new("2026-10", [9u8; 32]).unwrap();
//! let keyring = Keyring::new(current).with_previous(previous);
//! assert_eq!(keyring.current().id(), "2026-11");
//!
//! // Secrets shorter than 32 bytes are refused, and never shown in `Debug`.
//! assert!(SigningKey::new("weak", b"too short").is_err());
//! let key = SigningKey::new("k1", [1u8; 32]).unwrap();
//! assert!(!format!("{key:?}").contains("1, 1"));
//! ```

use std::fmt;
use std::sync::Arc;

use ring::rand::{SecureRandom, SystemRandom};

use super::mac::MacKey;
use super::verified::VerifiedValues;
use crate::encoding::{decode_hex, is_plain_id};
use crate::vocab::ConfigError;

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 32;
/// The longest key id accepted.
pub const MAX_KEY_ID_LEN: usize = 16;

/// One HMAC-SHA256 key with its id. The secret is never printed.
#[derive(Clone)]
pub struct SigningKey {
    id: Box<str>,
    key: MacKey,
}

impl SigningKey {
    /// A key from a secret of at least [`MIN_SECRET_LEN`](crate::config::MIN_SECRET_LEN) bytes and an id of 1 to
    /// [`MAX_KEY_ID_LEN`](crate::config::MAX_KEY_ID_LEN) characters from `[A-Za-z0-9_-]`; else
    /// [`ConfigError::SecretTooShort`] or [`ConfigError::InvalidKeyId`].
    pub fn new(id: impl Into<String>, secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        let id = id.into();
        if !is_plain_id(&id, MAX_KEY_ID_LEN) {
            return Err(ConfigError::InvalidKeyId { id });
        }
        let secret = secret.as_ref();
        if secret.len() < MIN_SECRET_LEN {
            return Err(ConfigError::SecretTooShort {
                key_id: id,
                len: secret.len(),
            });
        }
        Ok(Self {
            id: id.into_boxed_str(),
            key: MacKey::new(secret),
        })
    }

    /// A key from a hex-encoded secret (at least 64 hex digits); hex that does not decode is
    /// [`ConfigError::InvalidSecretHex`].
    pub fn from_hex(id: impl Into<String>, hex: &str) -> Result<Self, ConfigError> {
        let id = id.into();
        let secret = decode_hex(hex.trim())
            .ok_or_else(|| ConfigError::InvalidSecretHex { key_id: id.clone() })?;
        Self::new(id, secret)
    }

    /// A key with 32 fresh random bytes, for development and tests. Every process that generates
    /// its own key signs differently: gateways that share a queue must share a configured key.
    ///
    /// # Panics
    /// If the operating system's random source fails, as [`SessionId::random`](crate::SessionId::random)
    /// does: without it no session id could be made either.
    pub fn generate(id: impl Into<String>) -> Result<Self, ConfigError> {
        let mut secret = [0u8; MIN_SECRET_LEN];
        SystemRandom::new()
            .fill(&mut secret)
            .expect("the system random source failed");
        Self::new(id, secret)
    }

    /// The key id carried in every value this key signs.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn mac(&self) -> &MacKey {
        &self.key
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// The current key, which signs, and optionally the previous one, which is still accepted.
///
/// To rotate: make the old current key the previous one and add a new current key. Values signed
/// with the previous key keep working until they expire; a key that is neither current nor
/// previous is retired, and its values count as no value at all.
///
/// A keyring remembers (a bounded number of) the values whose MAC it has checked, so that the
/// same value sent again costs no second HMAC; everything else about a value is checked every
/// time. Clones share that memory (they hold the same keys); a keyring with other keys starts
/// without it.
#[derive(Clone, Debug)]
pub struct Keyring {
    current: SigningKey,
    previous: Option<SigningKey>,
    verified: Arc<VerifiedValues>,
}

impl Keyring {
    /// A keyring with only a current key.
    pub fn new(current: SigningKey) -> Self {
        Self {
            current,
            previous: None,
            verified: Arc::new(VerifiedValues::new()),
        }
    }

    /// Also accept values signed with `previous`.
    pub fn with_previous(mut self, previous: SigningKey) -> Self {
        self.previous = Some(previous);
        // Other keys: nothing remembered under the old ones carries over.
        self.verified = Arc::new(VerifiedValues::new());
        self
    }

    /// The values whose MAC this keyring has checked.
    pub(crate) fn verified(&self) -> &VerifiedValues {
        &self.verified
    }

    /// The key that signs.
    pub fn current(&self) -> &SigningKey {
        &self.current
    }

    /// The key that is still accepted, if any.
    pub fn previous(&self) -> Option<&SigningKey> {
        self.previous.as_ref()
    }

    /// The id the current and previous keys share, if they do (a keyring the builder refuses).
    pub(crate) fn duplicate_id(&self) -> Option<&str> {
        self.previous
            .as_ref()
            .filter(|p| p.id == self.current.id)
            .map(SigningKey::id)
    }

    /// The key with id `id`, if it is current or previous.
    pub(crate) fn find(&self, id: &str) -> Option<&SigningKey> {
        if *self.current.id == *id {
            return Some(&self.current);
        }
        self.previous.as_ref().filter(|k| *k.id == *id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_validation() {
        assert!(matches!(
            SigningKey::new("k", [0u8; 31]),
            Err(ConfigError::SecretTooShort { len: 31, .. })
        ));
        assert!(matches!(
            SigningKey::new("bad id", [0u8; 32]),
            Err(ConfigError::InvalidKeyId { .. })
        ));
        assert!(SigningKey::from_hex("k", &"ab".repeat(32)).is_ok());
        assert!(matches!(
            SigningKey::from_hex("k", "xyz"),
            Err(ConfigError::InvalidSecretHex { .. })
        ));
        let dup = Keyring::new(SigningKey::new("k", [0u8; 32]).unwrap())
            .with_previous(SigningKey::new("k", [1u8; 32]).unwrap());
        assert_eq!(dup.duplicate_id(), Some("k"));
    }

    #[test]
    fn debug_hides_secret() {
        let key = SigningKey::from_hex("k", &"5a".repeat(32)).unwrap();
        let shown = format!("{key:?} {:?}", Keyring::new(key.clone()));
        assert!(shown.contains("<redacted>"));
        assert!(!shown.contains("5a5a") && !shown.contains("90, 90"));
    }
}
