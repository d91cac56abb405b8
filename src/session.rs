//! The visitor's session id: 128 random bits, the visitor's place in line.

use std::fmt;

use ring::rand::{SecureRandom, SystemRandom};

use crate::encoding::{hex_into, lower_hex_to};

/// A visitor's session id: 128 random bits, shown as 32 lowercase hex digits.
///
/// It is created by the stateless cookie check on the first visit, carried in the signed queue
/// cookie, and names the visitor's place in line and slot in the store.
///
/// ```
/// use tower_waiting_room::SessionId;
///
/// let id = SessionId::random();
/// let text = id.to_string();
/// assert_eq!(text.len(), 32);
/// assert_eq!(SessionId::from_hex(&text), Some(id));
/// assert_eq!(SessionId::from_hex("not hex"), None);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId([u8; 16]);

impl SessionId {
    /// A fresh random session id from the operating system's secure random source.
    pub fn random() -> Self {
        let mut bytes = [0u8; 16];
        SystemRandom::new()
            .fill(&mut bytes)
            .expect("the system random source failed");
        Self(bytes)
    }

    /// A session id from raw bytes.
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Parses exactly 32 lowercase hex digits.
    pub fn from_hex(s: &str) -> Option<Self> {
        let mut out = [0u8; 16];
        lower_hex_to(s.as_bytes(), &mut out)?;
        Some(Self(out))
    }

    /// The 32 hex digits as bytes, without allocating.
    pub(crate) fn hex(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        hex_into(&self.0, &mut out);
        out
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.hex();
        f.write_str(std::str::from_utf8(&hex).expect("hex digits are ASCII"))
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionId({self})")
    }
}

impl serde::Serialize for SessionId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
