//! Stage 2: the signed-token fast path.
//!
//! An admitted visitor carries an [`AdmissionToken`]: session id, issue time and slot expiry,
//! signed with HMAC-SHA256 for one room. While it is younger than the room's `refresh` the request
//! goes straight to the inner service with no store call at all. Older but unexpired, one
//! heartbeat extends the slot and a fresh token rides back on the response.

use std::time::Duration;

use super::claims::MAX_ISSUED_AHEAD_MS;
use super::format::{self, Claims, ValueKind};
use super::keys::Keyring;
use crate::client::network::Network;
use crate::clock::duration_ms;
use crate::session::SessionId;

/// Why [`AdmissionToken::check`] refused a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenFault {
    /// Not an admission token of the room signed by one of its keys: garbage, tampered, another
    /// kind of value, another room's, or signed by an unknown key.
    Invalid,
    /// Genuine, but past its expiry (or issued implausibly far in the future).
    Expired,
}

/// Proof that a visitor holds a slot, until `expires_at_ms`.
///
/// With [`bind_tokens_to_network`](crate::WaitingRoomBuilder::bind_tokens_to_network) the room
/// also signs the visitor's network (IPv4 /24, IPv6 /48) into the token, and a token presented
/// from another network counts as no token. Tokens made with [`new`](Self::new) are unbound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdmissionToken {
    session: SessionId,
    issued_at_ms: u64,
    expires_at_ms: u64,
    network: Option<Network>,
}

impl AdmissionToken {
    /// A token for `session`, issued at `issued_at_ms`, valid until `expires_at_ms`.
    pub fn new(session: SessionId, issued_at_ms: u64, expires_at_ms: u64) -> Self {
        Self {
            session,
            issued_at_ms,
            expires_at_ms,
            network: None,
        }
    }

    /// The same token, bound to `network` (signed into it).
    pub(crate) fn bound_to(mut self, network: Network) -> Self {
        self.network = Some(network);
        self
    }

    /// The network the token is bound to, if any.
    pub(crate) fn network(&self) -> Option<Network> {
        self.network
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

    /// Young enough to be trusted without asking the store: issued at or before `now_ms`, less
    /// than `refresh` ago. So each gateway trusts a token for `refresh` at most, counted on its
    /// own clock from the token's issue time. A token issued ahead of this clock (by a gateway
    /// whose clock runs ahead) is not fresh until this clock reaches its issue time: the store
    /// is asked meanwhile, as for a token past `refresh`. Counted as issued now, it would pass
    /// for as long as it is ahead, plus `refresh`, whatever became of its slot.
    pub fn is_fresh(&self, now_ms: u64, refresh: Duration) -> bool {
        now_ms
            .checked_sub(self.issued_at_ms)
            .is_some_and(|age| age < duration_ms(refresh))
    }

    /// The signed token for `room`, with the keyring's current key.
    pub fn sign(&self, keys: &Keyring, room: &str) -> String {
        format::sign_with_network(
            keys,
            ValueKind::Admission,
            room,
            &Claims {
                session: self.session,
                issued_at_ms: self.issued_at_ms,
                expires_at_ms: self.expires_at_ms,
            },
            self.network,
        )
    }

    /// Whether `value` could be an admission token at all, by its prefix and length: a cheap
    /// test, no parsing, no HMAC.
    pub(crate) fn could_be(value: &str) -> bool {
        format::could_be(ValueKind::Admission, value)
    }

    /// The token, if `value` is an admission token of `room` signed by a key of the keyring and
    /// not expired at `now_ms`; anything else is `None`, exactly like no token.
    pub fn verify(keys: &Keyring, room: &str, value: &str, now_ms: u64) -> Option<Self> {
        Self::check(keys, room, value, now_ms).ok()
    }

    /// Like [`verify`](Self::verify), and says why a value is refused: not a token of `room`
    /// under these keys at all, or a genuine one that has expired (or was issued too far in
    /// the future). For answers that tell the client why (a gated route's `403`); the room's
    /// own stages treat both alike, as no token.
    pub(crate) fn check(
        keys: &Keyring,
        room: &str,
        value: &str,
        now_ms: u64,
    ) -> Result<Self, TokenFault> {
        let verified = format::verify_with_network(keys, ValueKind::Admission, room, value)
            .ok_or(TokenFault::Invalid)?;
        Self::valid_at(verified, now_ms)
    }

    /// Like [`verify`](Self::verify), for a value this keyring has already verified for `room`
    /// (no parse, no HMAC): `None` when it has not, whatever the value is, so a caller that
    /// gets `None` still has to [`verify`](Self::verify) it. Expiry is checked as there.
    pub(crate) fn remembered(keys: &Keyring, room: &str, value: &str, now_ms: u64) -> Option<Self> {
        let verified = format::remembered_with_network(keys, ValueKind::Admission, room, value)?;
        Self::valid_at(verified, now_ms).ok()
    }

    /// The token of verified claims, if they are valid at `now_ms`: not expired, nor issued
    /// more than [`MAX_ISSUED_AHEAD_MS`] ahead of this clock.
    fn valid_at((c, network): (Claims, Option<Network>), now_ms: u64) -> Result<Self, TokenFault> {
        if now_ms < c.expires_at_ms && c.issued_at_ms <= now_ms.saturating_add(MAX_ISSUED_AHEAD_MS)
        {
            Ok(Self {
                session: c.session,
                issued_at_ms: c.issued_at_ms,
                expires_at_ms: c.expires_at_ms,
                network,
            })
        } else {
            Err(TokenFault::Expired)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::keys::SigningKey;

    fn keys() -> Keyring {
        Keyring::new(SigningKey::new("k1", [42u8; 32]).unwrap())
    }

    #[test]
    fn bound_token_round_trip() {
        let session = SessionId::from_bytes([7; 16]);
        for ip in ["203.0.113.7", "2001:db8:1::7", "::ffff:203.0.113.7"] {
            let net = Network::of(Some(ip.parse().unwrap()));
            let token = AdmissionToken::new(session, 10_000, 310_000).bound_to(net);
            let text = token.sign(&keys(), "shop");
            let back = AdmissionToken::verify(&keys(), "shop", &text, 12_000).unwrap();
            assert_eq!(back, token);
            // Again (the keyring remembers it): the same network, still signed into it.
            let again = AdmissionToken::verify(&keys(), "shop", &text, 12_000).unwrap();
            assert_eq!(again.network(), Some(net));
            assert_eq!(back.network(), Some(net));
            // Expiry and room still apply.
            assert_eq!(
                AdmissionToken::verify(&keys(), "shop", &text, 310_000),
                None
            );
            assert_eq!(
                AdmissionToken::verify(&keys(), "other", &text, 12_000),
                None
            );
        }
        let unknown = AdmissionToken::new(session, 10_000, 310_000).bound_to(Network::Unknown);
        let text = unknown.sign(&keys(), "shop");
        assert_eq!(
            AdmissionToken::verify(&keys(), "shop", &text, 12_000).and_then(|t| t.network()),
            Some(Network::Unknown)
        );
    }

    #[test]
    fn unbound_tokens_are_unchanged() {
        let token = AdmissionToken::new(SessionId::from_bytes([7; 16]), 10_000, 310_000);
        let text = token.sign(&keys(), "shop");
        assert_eq!(text.split('.').count(), 6);
        let back = AdmissionToken::verify(&keys(), "shop", &text, 12_000).unwrap();
        assert_eq!(back.network(), None);
    }

    #[test]
    fn the_network_cannot_be_edited() {
        let net = Network::of(Some("203.0.113.7".parse().unwrap()));
        let token = AdmissionToken::new(SessionId::from_bytes([7; 16]), 10_000, 310_000);
        let text = token.bound_to(net).sign(&keys(), "shop");
        assert!(text.contains(".4cb0071."), "{text}");
        for other in ["4c63364", "u", "6cb00710000", "4cb0072"] {
            let edited = text.replacen("4cb0071", other, 1);
            assert_eq!(
                AdmissionToken::verify(&keys(), "shop", &edited, 12_000),
                None,
                "{edited}"
            );
        }
        // Dropping the network field does not make it an unbound token.
        let dropped = text.replacen(".4cb0071", "", 1);
        assert_eq!(
            AdmissionToken::verify(&keys(), "shop", &dropped, 12_000),
            None
        );
    }

    #[test]
    fn module_example() {
        use std::time::Duration;

        let keys = Keyring::new(SigningKey::new("k1", [42u8; 32]).unwrap());
        let token = AdmissionToken::new(SessionId::random(), 10_000, 310_000);
        let text = token.sign(&keys, "shop");
        let checked = AdmissionToken::verify(&keys, "shop", &text, 12_000).unwrap();
        assert!(checked.is_fresh(12_000, Duration::from_secs(15)));
        assert!(!checked.is_fresh(26_000, Duration::from_secs(15)));
        // Expired.
        assert_eq!(AdmissionToken::verify(&keys, "shop", &text, 310_000), None);
    }

    #[test]
    fn a_token_from_ahead_of_this_clock_is_trusted_for_refresh_at_most() {
        let refresh = Duration::from_secs(15);
        // Issued 55 s ahead of this gateway's clock (now = 100 s): still a valid token (up to
        // a minute ahead is accepted), but never fresh before this clock reaches its issue
        // time, so the store is asked about it.
        let token = AdmissionToken::new(SessionId::random(), 155_000, 455_000);
        let text = token.sign(&keys(), "shop");
        for now in [100_000, 101_000, 120_000, 145_000, 154_999] {
            assert!(AdmissionToken::verify(&keys(), "shop", &text, now).is_some());
            assert!(!token.is_fresh(now, refresh), "fresh at {now}, 55 s early");
        }
        // From its issue time on this clock, `refresh` like any other token, and no longer.
        assert!(token.is_fresh(155_000, refresh));
        assert!(token.is_fresh(169_999, refresh));
        assert!(!token.is_fresh(170_000, refresh));
        let windows = (90_000..200_000)
            .step_by(500)
            .filter(|&now| token.is_fresh(now, refresh))
            .count();
        assert_eq!(windows as u64 * 500, duration_ms(refresh));
        // Issued this very millisecond: fresh.
        assert!(
            AdmissionToken::new(SessionId::random(), 100_000, 400_000).is_fresh(100_000, refresh)
        );
    }
}
