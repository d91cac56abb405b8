//! The visitor's session id: 128 random bits, the visitor's place in line.

use std::fmt;

use crate::encoding::{hex_128, parse_hex_128, random_128, write_hex_128};

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
        Self(random_128())
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
        parse_hex_128(s).map(Self)
    }

    /// The 32 hex digits as bytes, without allocating.
    pub(crate) fn hex(&self) -> [u8; 32] {
        hex_128(&self.0)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex_128(f, &self.0)
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
