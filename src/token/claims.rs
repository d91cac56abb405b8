//! What a signed value says, once parsed: the one vocabulary the wire format and the keyring's
//! memory of verified values share. Kept apart from both so that neither imports the other's
//! file (the keyring owns the memory, and the format verifies with the keyring).

use std::ops::Range;

use crate::session::SessionId;

/// How far ahead of a gateway's clock the issue time of an admission token or a ticket may be
/// and the value still verify: gateways' clocks differ a little, and a value is often used on
/// another gateway than the one that signed it. Beyond it, no value the room writes says this.
/// Verifying is not trusting: an admission token is fresh only from its issue time on the
/// verifying gateway's clock ([`AdmissionToken::is_fresh`](super::AdmissionToken::is_fresh)).
pub(crate) const MAX_ISSUED_AHEAD_MS: u64 = 60_000;

/// What a signed value says. `kind` separates queue cookies from admission tokens, and the room
/// is part of the signed message (not of the text), so a value of one room or kind never verifies
/// as another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Claims {
    pub(crate) session: SessionId,
    pub(crate) issued_at_ms: u64,
    pub(crate) expires_at_ms: u64,
}

impl Claims {
    /// Not expired at `now_ms`, and not claiming to be issued after its expiry: the expiry
    /// check of the queue cookie and the proof-of-work challenge.
    pub(crate) fn unexpired(&self, now_ms: u64) -> bool {
        now_ms < self.expires_at_ms && self.issued_at_ms <= self.expires_at_ms
    }
}

/// What a verified value's text said: its claims, where its key id and its extra field are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) claims: Claims,
    pub(crate) kid: Range<usize>,
    pub(crate) extra: Option<Range<usize>>,
}
