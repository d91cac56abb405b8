//! Stage 1: the stateless cookie check and its signed queue cookie.
//!
//! A first visit creates no server state at all: the visitor gets a [`QueueCookie`] (a random
//! [`SessionId`] with an issue and expiry time, signed with the room's key) and a redirect back to
//! the same URL. Only a request that comes back with a valid queue cookie ever reaches the store,
//! so a flood of cookie-less requests costs one HMAC each and nothing else.
//!
//! Once the visitor has a place in line, the cookie also carries it ([`QueueCookie::with_place`]):
//! their sequence number (`s<seq>`) or, for a registrant of a scheduled opening, the mark that
//! their place is their draw (`d`). The place is inside the MAC like everything else, so a gateway
//! can place the visitor in its snapshot of the line without asking the store, and a visitor
//! cannot move themselves forward by editing it.

use super::format::{self, Claims, Signed, ValueKind};
use super::keys::Keyring;
use crate::encoding::{decimal, parse_u64};
use crate::session::SessionId;
use crate::vocab::Place;

/// Longest text of a place: `s` and the 20 digits of `u64::MAX`.
const PLACE_TEXT_LEN: usize = 21;

/// The visitor's signed place-holder: who they are, and, once they have one, their place in
/// line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueCookie {
    claims: Claims,
    proven: bool,
    place: Option<Place>,
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
            place: None,
        }
    }

    /// The same cookie, carrying the visitor's place in line (signed with the rest).
    pub fn with_place(self, place: Place) -> Self {
        Self {
            place: Some(place),
            ..self
        }
    }

    /// The same cookie without a place: the store said the session has none any more.
    pub fn without_place(self) -> Self {
        Self {
            place: None,
            ..self
        }
    }

    /// The visitor's place in line, if the cookie carries one.
    pub fn place(&self) -> Option<Place> {
        self.place
    }

    /// The same cookie, marked as cleared to join the line with proof of work on: its session
    /// solved a challenge ([`crate::defences::proof_of_work`]), or the risk decision found it low
    /// risk at its first visit ([`crate::defences::risk`]). The mark is signed: a cookie without
    /// it cannot be edited into one with it.
    pub fn into_proven(self) -> Self {
        Self {
            proven: true,
            ..self
        }
    }

    /// Whether the session is cleared to join the line with proof of work on (solved a
    /// challenge, or low risk at its first visit).
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
        // Exactly as long as the text, as `format::sign_with_extra` makes it.
        self.signed(keys, room).as_str().to_owned()
    }

    /// [`sign`](Self::sign)'s text on the stack, for a response's headers to be written from
    /// without a `String` in between (the first visit's).
    pub(crate) fn signed(&self, keys: &Keyring, room: &str) -> Signed {
        let mut text = [0u8; PLACE_TEXT_LEN];
        let place = self.place.map(|place| encode_place(place, &mut text));
        format::signed(keys, self.kind(), room, &self.claims, place)
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
        let (claims, place) = format::verify_with_extra(keys, kind, room, value)?;
        if !claims.unexpired(now_ms) {
            return None;
        }
        let place = match place {
            None => None,
            Some(text) => Some(parse_place(text)?),
        };
        Some(Self {
            claims,
            proven,
            place,
        })
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

/// A place's text, written into `out`: `s` and the sequence in canonical decimal, or `d`.
/// Exactly one spelling per place, all alphanumeric (a valid extra field).
fn encode_place(place: Place, out: &mut [u8; PLACE_TEXT_LEN]) -> &str {
    let len = match place {
        Place::Seq(seq) => {
            let mut digits = [0u8; 20];
            let start = decimal(seq, &mut digits);
            let n = digits.len() - start;
            out[0] = b's';
            out[1..=n].copy_from_slice(&digits[start..]);
            1 + n
        }
        Place::Drawn => {
            out[0] = b'd';
            1
        }
    };
    std::str::from_utf8(&out[..len]).expect("ASCII")
}

/// Strict parse of a place's text: only the exact spelling [`encode_place`] writes.
fn parse_place(text: &str) -> Option<Place> {
    match text.strip_prefix('s') {
        Some(digits) => parse_u64(digits).map(Place::Seq),
        None => (text == "d").then_some(Place::Drawn),
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

        // Once in line, the cookie carries the visitor's place, signed with the rest.
        let placed = cookie.with_place(Place::Seq(123));
        let text = placed.sign(&keys, "shop");
        let back = QueueCookie::verify(&keys, "shop", &text, 2_000).unwrap();
        assert_eq!(back.place(), Some(Place::Seq(123)));
        assert_eq!(back.session(), cookie.session());
        assert_eq!(
            QueueCookie::verify(&keys, "shop", &text.replacen(".s123.", ".s122.", 1), 2_000),
            None
        );
    }

    fn keys() -> Keyring {
        Keyring::new(SigningKey::new("k2", [2u8; 32]).unwrap())
            .with_previous(SigningKey::new("k1", [1u8; 32]).unwrap())
    }

    fn cookie() -> QueueCookie {
        QueueCookie::for_session(SessionId::from_bytes([0xab; 16]), 1_000, 300_000)
    }

    #[test]
    fn place_round_trip() {
        for place in [
            Place::Seq(0),
            Place::Seq(7),
            Place::Seq(1_700_000_000_123),
            Place::Seq(u64::MAX),
            Place::Drawn,
        ] {
            for cookie in [cookie(), cookie().into_proven()] {
                let placed = cookie.with_place(place);
                let text = placed.sign(&keys(), "shop");
                assert_eq!(text.split('.').count(), 7, "{text}");
                assert!(QueueCookie::could_be(&text), "{text}");
                let back = QueueCookie::verify(&keys(), "shop", &text, 2_000).unwrap();
                assert_eq!(back, placed);
                assert_eq!(back.place(), Some(place));
                assert_eq!(back.is_proven(), cookie.is_proven());
                // Again, remembered by the keyring: the same place, proven or not.
                let keys_again = keys();
                for _ in 0..2 {
                    let again = QueueCookie::verify(&keys_again, "shop", &text, 2_000);
                    assert_eq!(again, Some(placed));
                }
                assert_eq!(keys_again.verified().len(), 1);
                // Expiry still applies.
                assert_eq!(QueueCookie::verify(&keys(), "shop", &text, 301_000), None);
            }
        }
        // Without a place: the very text of before, and no place.
        let plain = cookie().sign(&keys(), "shop");
        assert_eq!(plain.split('.').count(), 6, "{plain}");
        assert_eq!(
            QueueCookie::verify(&keys(), "shop", &plain, 2_000).map(|c| c.place()),
            Some(None)
        );
    }

    #[test]
    fn place_text_is_canonical() {
        let mut buf = [0u8; PLACE_TEXT_LEN];
        assert_eq!(encode_place(Place::Seq(0), &mut buf), "s0");
        assert_eq!(
            encode_place(Place::Seq(u64::MAX), &mut buf),
            format!("s{}", u64::MAX)
        );
        assert_eq!(encode_place(Place::Drawn, &mut buf), "d");
        assert_eq!(parse_place("s123"), Some(Place::Seq(123)));
        assert_eq!(parse_place("d"), Some(Place::Drawn));
        for bad in [
            "",
            "s",
            "s0123",
            "S1",
            "s1a",
            "d0",
            "D",
            "x",
            "u",
            "4cb0071",
            "s18446744073709551616",
        ] {
            assert_eq!(parse_place(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_place_is_inside_the_mac() {
        let text = cookie().with_place(Place::Seq(123)).sign(&keys(), "shop");
        assert!(text.contains(".s123."), "{text}");
        // Another sequence, the other kind of place, the place removed.
        for (from, to) in [
            (".s123.", ".s124."),
            (".s123.", ".s12."),
            (".s123.", ".s1230."),
            (".s123.", ".s0123."),
            (".s123.", ".d."),
            (".s123.", "."),
        ] {
            let edited = text.replacen(from, to, 1);
            assert_ne!(edited, text);
            assert_eq!(
                QueueCookie::verify(&keys(), "shop", &edited, 2_000),
                None,
                "{edited}"
            );
        }
        let drawn = cookie().with_place(Place::Drawn).sign(&keys(), "shop");
        assert_eq!(
            QueueCookie::verify(&keys(), "shop", &drawn.replacen(".d.", ".s0.", 1), 2_000),
            None
        );
        // A place added to a cookie signed without one.
        let plain = cookie().sign(&keys(), "shop");
        let (head, tag) = plain.rsplit_once('.').unwrap();
        assert_eq!(
            QueueCookie::verify(&keys(), "shop", &format!("{head}.s0.{tag}"), 2_000),
            None
        );
        // Every single byte change.
        for i in 0..text.len() {
            for c in [b'0', b'4', b's', b'd', b'A', b'.', b'-'] {
                let mut bytes = text.clone().into_bytes();
                if bytes[i] == c {
                    continue;
                }
                bytes[i] = c;
                let t = String::from_utf8(bytes).unwrap();
                assert_eq!(
                    QueueCookie::verify(&keys(), "shop", &t, 2_000),
                    None,
                    "byte {i} -> {}",
                    c as char
                );
            }
        }
    }

    #[test]
    fn a_placed_cookie_is_no_token_and_no_other_rooms_cookie() {
        use crate::token::AdmissionToken;
        for cookie in [cookie(), cookie().into_proven()] {
            let text = cookie.with_place(Place::Seq(123)).sign(&keys(), "shop");
            assert_eq!(QueueCookie::verify(&keys(), "other", &text, 2_000), None);
            assert_eq!(AdmissionToken::verify(&keys(), "shop", &text, 2_000), None);
            assert!(!AdmissionToken::could_be(&text));
            let as_token = format!("a1{}", &text[2..]);
            assert_eq!(
                AdmissionToken::verify(&keys(), "shop", &as_token, 2_000),
                None
            );
        }
        // Nor the other way round: a network-bound token is no queue cookie.
        let token = AdmissionToken::new(SessionId::from_bytes([0xab; 16]), 1_000, 300_000)
            .bound_to(crate::client::network::Network::Unknown)
            .sign(&keys(), "shop");
        let as_cookie = format!("q1{}", &token[2..]);
        assert_eq!(
            QueueCookie::verify(&keys(), "shop", &as_cookie, 2_000),
            None
        );
    }

    #[test]
    fn the_longest_placed_cookie_fits_the_length_bound() {
        let longest_id = "k".repeat(crate::token::MAX_KEY_ID_LEN);
        let keys = Keyring::new(SigningKey::new(longest_id, [5u8; 32]).unwrap());
        let cookie = QueueCookie::for_session(SessionId::from_bytes([0xff; 16]), u64::MAX, 0)
            .into_proven()
            .with_place(Place::Seq(u64::MAX));
        assert_eq!(cookie.expires_at_ms(), u64::MAX);
        let text = cookie.sign(&keys, "shop");
        assert!(
            text.len() <= crate::token::MAX_SIGNED_LEN,
            "{} > {}",
            text.len(),
            crate::token::MAX_SIGNED_LEN
        );
        assert!(QueueCookie::could_be(&text), "{text}");
        assert_eq!(QueueCookie::verify(&keys, "shop", &text, 0), Some(cookie));
    }
}
