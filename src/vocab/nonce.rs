//! [`TicketNonce`]: which single-use ticket a signed ticket stands for, shared by the signed
//! ticket's format and the store's record of it.

use std::fmt;

use crate::encoding::{hex_128, parse_hex_128, random_128, write_hex_128};

/// A ticket's nonce: 128 random bits, shown as 32 lowercase hex digits. Which ticket of a
/// session a signed ticket stands for: the store's record holds it, and a redeem must name it.
///
/// The room draws a fresh one for every mint and the store keeps the first one it was given
/// for a session, so two gateways minting at once agree on one ticket.
///
/// ```
/// use tower_waiting_room::store::TicketNonce;
///
/// let nonce = TicketNonce::random();
/// assert_eq!(TicketNonce::from_hex(&nonce.to_string()), Some(nonce));
/// assert_eq!(TicketNonce::from_hex("not hex"), None);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TicketNonce([u8; 16]);

impl TicketNonce {
    /// A fresh nonce from the operating system's secure random source.
    pub fn random() -> Self {
        Self(random_128())
    }

    /// A nonce from raw bytes.
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
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

impl fmt::Display for TicketNonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex_128(f, &self.0)
    }
}

impl fmt::Debug for TicketNonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TicketNonce({self})")
    }
}
