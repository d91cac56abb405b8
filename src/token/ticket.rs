//! The single-use checkout ticket: a signed value (kind `t1`) that names one session's ticket
//! record in the store by its nonce, for one room, until the admission's slot expiry.
//!
//! The signature proves the room issued it; only the store can say whether it was used, so a
//! gated route checks the signature, the room (inside the MAC) and the expiry here, at the
//! gateway, and asks the store only about a ticket that passes.

use super::claims::MAX_ISSUED_AHEAD_MS;
use super::format::{self, Claims, ValueKind};
use super::keys::Keyring;
use crate::session::SessionId;
use crate::vocab::TicketNonce;

/// A single-use checkout ticket: the session it was minted for, its nonce (the store record's),
/// when it was signed and when it expires (the admission's slot expiry when it was issued: a
/// heartbeat that extends the slot re-issues it with the new expiry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdmissionTicket {
    claims: Claims,
    nonce: TicketNonce,
}

/// Why a ticket value was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TicketRefusal {
    /// Not a ticket of this room signed by a key of the keyring: malformed, tampered with,
    /// signed by an unknown key, or of another room (the room is inside the MAC, so a ticket of
    /// another room cannot be told from a forged one).
    Invalid,
    /// A genuine ticket of this room, past its expiry.
    Expired,
}

impl AdmissionTicket {
    /// A ticket for `session`'s record `nonce`, issued at `issued_at_ms`, valid until
    /// `expires_at_ms`.
    pub fn new(
        session: SessionId,
        nonce: TicketNonce,
        issued_at_ms: u64,
        expires_at_ms: u64,
    ) -> Self {
        Self {
            claims: Claims {
                session,
                issued_at_ms,
                expires_at_ms,
            },
            nonce,
        }
    }

    /// The session it was minted for.
    pub fn session(&self) -> SessionId {
        self.claims.session
    }

    /// The nonce of the store's record.
    pub fn nonce(&self) -> TicketNonce {
        self.nonce
    }

    /// When it was signed (ms since the epoch).
    pub fn issued_at_ms(&self) -> u64 {
        self.claims.issued_at_ms
    }

    /// When it stops being valid (ms since the epoch).
    pub fn expires_at_ms(&self) -> u64 {
        self.claims.expires_at_ms
    }

    /// The signed ticket for `room`, with the keyring's current key:
    /// `t1.<kid>.<session>.<iat>.<exp>.<nonce>.<tag>`.
    pub fn sign(&self, keys: &Keyring, room: &str) -> String {
        let nonce = self.nonce.hex();
        let nonce = std::str::from_utf8(&nonce).expect("hex digits are ASCII");
        format::sign_with_extra(keys, ValueKind::Ticket, room, &self.claims, Some(nonce))
    }

    /// Whether `value` could be a ticket at all, by its prefix and length: a cheap test, no
    /// parsing, no HMAC.
    pub(crate) fn could_be(value: &str) -> bool {
        format::could_be(ValueKind::Ticket, value)
    }

    /// The ticket, if `value` is a ticket of `room` signed by a key of the keyring and not
    /// expired at `now_ms`; otherwise why not. No store is asked: whether it was used is the
    /// store's to say.
    pub fn check(
        keys: &Keyring,
        room: &str,
        value: &str,
        now_ms: u64,
    ) -> Result<Self, TicketRefusal> {
        let (claims, nonce) = match format::verify_with_extra(keys, ValueKind::Ticket, room, value)
        {
            Some((claims, Some(nonce))) => (claims, nonce),
            _ => return Err(TicketRefusal::Invalid),
        };
        let nonce = TicketNonce::from_hex(nonce).ok_or(TicketRefusal::Invalid)?;
        if claims.issued_at_ms > claims.expires_at_ms
            || claims.issued_at_ms > now_ms.saturating_add(MAX_ISSUED_AHEAD_MS)
        {
            // Signed by us, so not forged; but no ticket the room writes says this.
            return Err(TicketRefusal::Invalid);
        }
        if now_ms >= claims.expires_at_ms {
            return Err(TicketRefusal::Expired);
        }
        Ok(Self { claims, nonce })
    }

    /// The ticket, if `value` is a valid unexpired ticket of `room` ([`check`](Self::check));
    /// anything else is `None`.
    pub fn verify(keys: &Keyring, room: &str, value: &str, now_ms: u64) -> Option<Self> {
        Self::check(keys, room, value, now_ms).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::keys::SigningKey;
    use crate::token::{AdmissionToken, QueueCookie};

    fn keys() -> Keyring {
        Keyring::new(SigningKey::new("k2", [2u8; 32]).unwrap())
            .with_previous(SigningKey::new("k1", [1u8; 32]).unwrap())
    }

    fn ticket() -> AdmissionTicket {
        AdmissionTicket::new(
            SessionId::from_bytes([7; 16]),
            TicketNonce::from_bytes([9; 16]),
            10_000,
            310_000,
        )
    }

    #[test]
    fn module_example() {
        let keys = keys();
        let ticket = ticket();
        let text = ticket.sign(&keys, "shop");
        assert!(text.starts_with("t1.k2."), "{text}");
        assert!(AdmissionTicket::could_be(&text));
        assert_eq!(
            AdmissionTicket::check(&keys, "shop", &text, 12_000),
            Ok(ticket)
        );
        assert_eq!(
            AdmissionTicket::verify(&keys, "shop", &text, 12_000),
            Some(ticket)
        );
        // Expired is told apart from invalid; another room's ticket is invalid here.
        assert_eq!(
            AdmissionTicket::check(&keys, "shop", &text, 310_000),
            Err(TicketRefusal::Expired)
        );
        assert_eq!(
            AdmissionTicket::check(&keys, "other", &text, 12_000),
            Err(TicketRefusal::Invalid)
        );
    }

    #[test]
    fn signed_text_is_exact() {
        let text = ticket().sign(&keys(), "shop");
        let (head, _) = text.rsplit_once('.').unwrap();
        assert_eq!(
            head,
            format!("t1.k2.{}.10000.310000.{}", "07".repeat(16), "09".repeat(16))
        );
    }

    #[test]
    fn every_single_byte_change_or_insertion_is_refused() {
        let kr = keys();
        let v = ticket().sign(&kr, "shop");
        for i in 0..v.len() {
            for c in [b'0', b'9', b'a', b'f', b'A', b'.', b'-', b'_', b'|'] {
                let mut bytes = v.clone().into_bytes();
                if bytes[i] != c {
                    bytes[i] = c;
                    let t = String::from_utf8(bytes).unwrap();
                    assert_eq!(
                        AdmissionTicket::check(&kr, "shop", &t, 12_000),
                        Err(TicketRefusal::Invalid),
                        "byte {i} -> {}",
                        c as char
                    );
                }
                let mut t = v.clone();
                t.insert(i, c as char);
                assert_eq!(
                    AdmissionTicket::check(&kr, "shop", &t, 12_000),
                    Err(TicketRefusal::Invalid),
                    "{} inserted at {i}",
                    c as char
                );
            }
        }
        for end in 0..v.len() {
            assert_eq!(
                AdmissionTicket::check(&kr, "shop", &v[..end], 12_000),
                Err(TicketRefusal::Invalid)
            );
        }
    }

    #[test]
    fn the_nonce_is_inside_the_mac() {
        let kr = keys();
        let v = ticket().sign(&kr, "shop");
        let (head, tag) = v.rsplit_once('.').unwrap();
        let (head, nonce) = head.rsplit_once('.').unwrap();
        assert_eq!(nonce, "09".repeat(16));
        for other in ["08".repeat(16), "0".repeat(32), "ab".to_owned()] {
            let edited = format!("{head}.{other}.{tag}");
            assert_eq!(
                AdmissionTicket::check(&kr, "shop", &edited, 12_000),
                Err(TicketRefusal::Invalid),
                "{other}"
            );
        }
        let removed = format!("{head}.{tag}");
        assert_eq!(
            AdmissionTicket::check(&kr, "shop", &removed, 12_000),
            Err(TicketRefusal::Invalid)
        );
    }

    #[test]
    fn no_other_kind_passes_as_a_ticket_nor_a_ticket_as_another() {
        let kr = keys();
        let session = SessionId::from_bytes([7; 16]);
        let token = AdmissionToken::new(session, 10_000, 310_000).sign(&kr, "shop");
        let queue = QueueCookie::for_session(session, 10_000, 300_000).sign(&kr, "shop");
        for other in [&token, &queue] {
            assert!(!AdmissionTicket::could_be(other));
            assert_eq!(
                AdmissionTicket::check(&kr, "shop", other, 12_000),
                Err(TicketRefusal::Invalid)
            );
            // The same text with the prefix swapped: the kind is inside the MAC.
            let swapped = format!("t1{}", &other[2..]);
            assert_eq!(
                AdmissionTicket::check(&kr, "shop", &swapped, 12_000),
                Err(TicketRefusal::Invalid)
            );
        }
        let ticket = ticket().sign(&kr, "shop");
        assert_eq!(AdmissionToken::verify(&kr, "shop", &ticket, 12_000), None);
        let as_token = format!("a1{}", &ticket[2..]);
        assert_eq!(AdmissionToken::verify(&kr, "shop", &as_token, 12_000), None);
        assert_eq!(QueueCookie::verify(&kr, "shop", &ticket, 12_000), None);
    }

    #[test]
    fn rotation_and_odd_times() {
        let old = Keyring::new(SigningKey::new("k1", [1u8; 32]).unwrap());
        let v = ticket().sign(&old, "shop");
        assert!(AdmissionTicket::verify(&keys(), "shop", &v, 12_000).is_some());
        let retired = Keyring::new(SigningKey::new("k3", [3u8; 32]).unwrap());
        assert_eq!(
            AdmissionTicket::check(&retired, "shop", &v, 12_000),
            Err(TicketRefusal::Invalid)
        );
        // Issued far in the future, or after its expiry: never written by a room.
        let s = SessionId::from_bytes([7; 16]);
        let n = TicketNonce::from_bytes([9; 16]);
        let future = AdmissionTicket::new(s, n, 500_000, 900_000).sign(&keys(), "shop");
        assert_eq!(
            AdmissionTicket::check(&keys(), "shop", &future, 12_000),
            Err(TicketRefusal::Invalid)
        );
        let backwards = AdmissionTicket::new(s, n, 20_000, 15_000).sign(&keys(), "shop");
        assert_eq!(
            AdmissionTicket::check(&keys(), "shop", &backwards, 12_000),
            Err(TicketRefusal::Invalid)
        );
    }
}
