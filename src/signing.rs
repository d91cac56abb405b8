//! Signing keys and the signed-claims format shared by the queue cookie and the admission token.
//!
//! Both stateless stages of a room rest on HMAC-SHA256 (`ring::hmac`): the server hands out a
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
use std::net::IpAddr;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use crate::config::ConfigError;
use crate::session::SessionId;

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 32;
/// The longest key id accepted.
pub const MAX_KEY_ID_LEN: usize = 16;
/// Signed values longer than this are rejected before any parsing.
pub(crate) const MAX_SIGNED_LEN: usize = 256;

const TAG_LEN: usize = 32;
const TAG_B64_LEN: usize = 43;

/// One HMAC-SHA256 key with its id. The secret is never printed.
#[derive(Clone)]
pub struct SigningKey {
    id: Box<str>,
    key: hmac::Key,
}

impl SigningKey {
    /// A key from a secret of at least [`MIN_SECRET_LEN`] bytes and an id of 1 to
    /// [`MAX_KEY_ID_LEN`] characters from `[A-Za-z0-9_-]`.
    pub fn new(id: impl Into<String>, secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        let id = id.into();
        if id.is_empty()
            || id.len() > MAX_KEY_ID_LEN
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
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
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        })
    }

    /// A key from a hex-encoded secret (at least 64 hex digits).
    pub fn from_hex(id: impl Into<String>, hex: &str) -> Result<Self, ConfigError> {
        let id = id.into();
        let secret = decode_hex(hex.trim())
            .ok_or_else(|| ConfigError::InvalidSecretHex { key_id: id.clone() })?;
        Self::new(id, secret)
    }

    /// A key with 32 fresh random bytes, for development and tests. Every process that generates
    /// its own key signs differently: gateways that share a queue must share a configured key.
    pub fn generate(id: impl Into<String>) -> Result<Self, ConfigError> {
        let mut secret = [0u8; MIN_SECRET_LEN];
        SystemRandom::new()
            .fill(&mut secret)
            .map_err(|_| ConfigError::Random)?;
        Self::new(id, secret)
    }

    /// The key id carried in every value this key signs.
    pub fn id(&self) -> &str {
        &self.id
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
#[derive(Clone, Debug)]
pub struct Keyring {
    current: SigningKey,
    previous: Option<SigningKey>,
}

impl Keyring {
    /// A keyring with only a current key.
    pub fn new(current: SigningKey) -> Self {
        Self {
            current,
            previous: None,
        }
    }

    /// Also accept values signed with `previous`.
    pub fn with_previous(mut self, previous: SigningKey) -> Self {
        self.previous = Some(previous);
        self
    }

    /// The key that signs.
    pub fn current(&self) -> &SigningKey {
        &self.current
    }

    /// The key that is still accepted, if any.
    pub fn previous(&self) -> Option<&SigningKey> {
        self.previous.as_ref()
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match &self.previous {
            Some(p) if p.id == self.current.id => Err(ConfigError::DuplicateKeyId {
                id: p.id.to_string(),
            }),
            _ => Ok(()),
        }
    }

    fn find(&self, id: &str) -> Option<&SigningKey> {
        if *self.current.id == *id {
            return Some(&self.current);
        }
        self.previous.as_ref().filter(|k| *k.id == *id)
    }
}

/// What a signed value says. `kind` separates queue cookies from admission tokens, and the room
/// is part of the signed message (not of the text), so a value of one room or kind never verifies
/// as another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Claims {
    pub(crate) session: SessionId,
    pub(crate) issued_at_ms: u64,
    pub(crate) expires_at_ms: u64,
}

/// The network an admission token is bound to: the /24 of an IPv4 address, the /48 of an IPv6
/// address (an IPv4-mapped IPv6 address counts as IPv4), or `Unknown` when the client IP could
/// not be found. It is signed into the token (inside the MAC), so it cannot be edited.
///
/// Text form, fixed length and lowercase hex so that exactly one spelling exists: `u`, `4` and
/// the 3 prefix bytes (`4cb0071` for 203.0.113.0/24), or `6` and the 6 prefix bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Network {
    /// No client IP was known.
    Unknown,
    /// An IPv4 /24.
    V4([u8; 3]),
    /// An IPv6 /48.
    V6([u8; 6]),
}

/// Longest text form of a [`Network`]: `6` and 12 hex digits.
const NETWORK_TEXT_LEN: usize = 13;

impl Network {
    /// The network of a client IP, or `Unknown` without one.
    pub(crate) fn of(ip: Option<IpAddr>) -> Self {
        match ip.map(|ip| ip.to_canonical()) {
            None => Network::Unknown,
            Some(IpAddr::V4(v4)) => {
                let o = v4.octets();
                Network::V4([o[0], o[1], o[2]])
            }
            Some(IpAddr::V6(v6)) => {
                let o = v6.octets();
                Network::V6([o[0], o[1], o[2], o[3], o[4], o[5]])
            }
        }
    }

    /// The text form, written into `out`; returns its length.
    fn encode(self, out: &mut [u8; NETWORK_TEXT_LEN]) -> usize {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let (tag, bytes): (u8, &[u8]) = match &self {
            Network::Unknown => (b'u', &[]),
            Network::V4(b) => (b'4', b),
            Network::V6(b) => (b'6', b),
        };
        out[0] = tag;
        for (i, b) in bytes.iter().enumerate() {
            out[1 + 2 * i] = HEX[usize::from(b >> 4)];
            out[2 + 2 * i] = HEX[usize::from(b & 0x0f)];
        }
        1 + 2 * bytes.len()
    }

    /// Strict parse of the text form: only the exact spelling [`encode`](Self::encode) writes.
    fn parse(s: &str) -> Option<Self> {
        fn fill(hex: &[u8], out: &mut [u8]) -> Option<()> {
            if hex.len() != 2 * out.len() {
                return None;
            }
            let nibble = |c: u8| match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            };
            for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
                *o = (nibble(pair[0])? << 4) | nibble(pair[1])?;
            }
            Some(())
        }
        let (tag, rest) = s.as_bytes().split_first()?;
        match tag {
            b'u' if rest.is_empty() => Some(Network::Unknown),
            b'4' => {
                let mut b = [0u8; 3];
                fill(rest, &mut b)?;
                Some(Network::V4(b))
            }
            b'6' => {
                let mut b = [0u8; 6];
                fill(rest, &mut b)?;
                Some(Network::V6(b))
            }
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Queue,
    /// A queue cookie whose session has solved a proof-of-work challenge.
    ProvenQueue,
    Admission,
    /// A proof-of-work challenge.
    Challenge,
}

impl Kind {
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Kind::Queue => "q1",
            Kind::ProvenQueue => "p1",
            Kind::Admission => "a1",
            Kind::Challenge => "c1",
        }
    }
}

/// A small stack buffer for the signed message, so verifying allocates nothing.
struct MessageBuf {
    buf: [u8; 2 * MAX_SIGNED_LEN],
    len: usize,
}

impl MessageBuf {
    fn new() -> Self {
        Self {
            buf: [0; 2 * MAX_SIGNED_LEN],
            len: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) -> Option<()> {
        let end = self.len.checked_add(bytes.len())?;
        self.buf.get_mut(self.len..end)?.copy_from_slice(bytes);
        self.len = end;
        Some(())
    }

    fn push_u64(&mut self, n: u64) -> Option<()> {
        let mut digits = [0u8; 20];
        let start = decimal(n, &mut digits);
        self.push(&digits[start..])
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// `n` in decimal at the end of `digits`; returns where the digits start.
pub(crate) fn decimal(mut n: u64, digits: &mut [u8; 20]) -> usize {
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return i;
        }
    }
}

/// Appends `n` in decimal, without the formatting machinery.
pub(crate) fn push_u64(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let start = decimal(n, &mut digits);
    out.push_str(std::str::from_utf8(&digits[start..]).expect("ASCII digits"));
}

/// The signed message, `twr|<kind>|<room>|<kid>|<session>|<iat>|<exp>`, and `|<network>` for a
/// token bound to a network, written into `m` (in place: the buffer is never moved). No field
/// can contain `|`, so a bound and an unbound message never coincide.
fn message(
    m: &mut MessageBuf,
    kind: Kind,
    room: &str,
    kid: &str,
    claims: &Claims,
    network: Option<Network>,
) -> Option<()> {
    m.push(b"twr|")?;
    m.push(kind.prefix().as_bytes())?;
    m.push(b"|")?;
    m.push(room.as_bytes())?;
    m.push(b"|")?;
    m.push(kid.as_bytes())?;
    m.push(b"|")?;
    m.push(&claims.session.hex())?;
    m.push(b"|")?;
    m.push_u64(claims.issued_at_ms)?;
    m.push(b"|")?;
    m.push_u64(claims.expires_at_ms)?;
    if let Some(network) = network {
        let mut text = [0u8; NETWORK_TEXT_LEN];
        let n = network.encode(&mut text);
        m.push(b"|")?;
        m.push(&text[..n])?;
    }
    Some(())
}

/// Signs claims with the current key: `<kind>.<kid>.<session>.<iat>.<exp>.<tag>`, all characters
/// safe in a cookie value and a header.
pub(crate) fn sign(keyring: &Keyring, kind: Kind, room: &str, claims: &Claims) -> String {
    sign_with_network(keyring, kind, room, claims, None)
}

/// Like [`sign`], and with a network: `<kind>.<kid>.<session>.<iat>.<exp>.<network>.<tag>`, the
/// network signed too. Without one the text is exactly what [`sign`] writes.
pub(crate) fn sign_with_network(
    keyring: &Keyring,
    kind: Kind,
    room: &str,
    claims: &Claims,
    network: Option<Network>,
) -> String {
    let key = &keyring.current;
    let mut msg = MessageBuf::new();
    message(&mut msg, kind, room, &key.id, claims, network)
        .expect("room and key id lengths are validated");
    let tag = hmac::sign(&key.key, msg.as_bytes());
    let mut out = String::with_capacity(
        2 + 1 + key.id.len() + 1 + 32 + 2 * 21 + NETWORK_TEXT_LEN + 1 + TAG_B64_LEN,
    );
    out.push_str(kind.prefix());
    out.push('.');
    out.push_str(&key.id);
    out.push('.');
    out.push_str(std::str::from_utf8(&claims.session.hex()).expect("hex digits are ASCII"));
    out.push('.');
    push_u64(&mut out, claims.issued_at_ms);
    out.push('.');
    push_u64(&mut out, claims.expires_at_ms);
    out.push('.');
    if let Some(network) = network {
        let mut text = [0u8; NETWORK_TEXT_LEN];
        let n = network.encode(&mut text);
        out.push_str(std::str::from_utf8(&text[..n]).expect("ASCII"));
        out.push('.');
    }
    URL_SAFE_NO_PAD.encode_string(tag.as_ref(), &mut out);
    out
}

/// Verifies a signed value of `kind` for `room`. Anything malformed, oversized, signed by an
/// unknown key or for another room or kind gives `None`, exactly like no value at all. Expiry is
/// checked by the caller, which knows the time.
pub(crate) fn verify(keyring: &Keyring, kind: Kind, room: &str, value: &str) -> Option<Claims> {
    match verify_with_network(keyring, kind, room, value)? {
        (claims, None) => Some(claims),
        (_, Some(_)) => None,
    }
}

/// Like [`verify`], and the value must not be expired at `now_ms` (nor claim to be issued after
/// its expiry): the check of the queue cookie and the proof-of-work challenge.
pub(crate) fn verify_unexpired(
    keyring: &Keyring,
    kind: Kind,
    room: &str,
    value: &str,
    now_ms: u64,
) -> Option<Claims> {
    verify(keyring, kind, room, value)
        .filter(|c| now_ms < c.expires_at_ms && c.issued_at_ms <= c.expires_at_ms)
}

/// Like [`verify`], and also accepts a value with a signed network (admission tokens only),
/// which it returns. The network is inside the MAC: a value whose network was edited, added or
/// removed does not verify.
pub(crate) fn verify_with_network(
    keyring: &Keyring,
    kind: Kind,
    room: &str,
    value: &str,
) -> Option<(Claims, Option<Network>)> {
    if value.len() > MAX_SIGNED_LEN {
        return None;
    }
    let mut parts = value.split('.');
    if parts.next()? != kind.prefix() {
        return None;
    }
    let kid = parts.next()?;
    let session = SessionId::from_hex(parts.next()?)?;
    let issued_at_ms = parse_u64(parts.next()?)?;
    let expires_at_ms = parse_u64(parts.next()?)?;
    let fifth = parts.next()?;
    let (network, tag_b64) = match parts.next() {
        None => (None, fifth),
        Some(tag_b64) if kind == Kind::Admission => (Some(Network::parse(fifth)?), tag_b64),
        Some(_) => return None,
    };
    if parts.next().is_some() || tag_b64.len() != TAG_B64_LEN {
        return None;
    }
    let mut tag = [0u8; TAG_LEN + 1];
    let n = URL_SAFE_NO_PAD
        .decode_slice(tag_b64.as_bytes(), &mut tag)
        .ok()?;
    if n != TAG_LEN {
        return None;
    }
    let key = keyring.find(kid)?;
    let claims = Claims {
        session,
        issued_at_ms,
        expires_at_ms,
    };
    let mut msg = MessageBuf::new();
    message(&mut msg, kind, room, kid, &claims, network)?;
    hmac::verify(&key.key, msg.as_bytes(), &tag[..TAG_LEN]).ok()?;
    Some((claims, network))
}

/// Strict, canonical decimal: digits only, no sign, no leading zero, at most 20 digits. Only the
/// exact text that was signed verifies: `0123` is not another spelling of `123`.
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty()
        || s.len() > 20
        || (s.len() > 1 && s.starts_with('0'))
        || !s.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyring() -> Keyring {
        Keyring::new(SigningKey::new("k2", [2u8; 32]).unwrap())
            .with_previous(SigningKey::new("k1", [1u8; 32]).unwrap())
    }

    fn claims() -> Claims {
        Claims {
            session: SessionId::from_bytes([0xab; 16]),
            issued_at_ms: 1_000,
            expires_at_ms: 301_000,
        }
    }

    #[test]
    fn round_trip() {
        let kr = keyring();
        let v = sign(&kr, Kind::Admission, "shop", &claims());
        assert!(v.starts_with("a1.k2."));
        assert_eq!(verify(&kr, Kind::Admission, "shop", &v), Some(claims()));
    }

    #[test]
    fn signed_text_is_exact() {
        let kr = keyring();
        let c = Claims {
            session: SessionId::from_bytes([0x0f; 16]),
            issued_at_ms: 0,
            expires_at_ms: u64::MAX,
        };
        let v = sign(&kr, Kind::Queue, "shop", &c);
        let (head, tag) = v.rsplit_once('.').unwrap();
        assert_eq!(head, format!("q1.k2.{}.0.{}", "0f".repeat(16), u64::MAX));
        let mut msg = MessageBuf::new();
        message(&mut msg, Kind::Queue, "shop", "k2", &c, None).unwrap();
        assert_eq!(
            msg.as_bytes(),
            format!("twr|q1|shop|k2|{}|0|{}", "0f".repeat(16), u64::MAX).as_bytes()
        );
        let expected = hmac::sign(&kr.current().key, msg.as_bytes());
        assert_eq!(tag, URL_SAFE_NO_PAD.encode(expected.as_ref()));
        let mut s = String::new();
        for n in [0, 7, 10, 1_700_000_000_123, u64::MAX] {
            s.clear();
            push_u64(&mut s, n);
            assert_eq!(s, n.to_string());
        }
    }

    #[test]
    fn other_room_or_kind_is_no_value() {
        let kr = keyring();
        let v = sign(&kr, Kind::Admission, "shop", &claims());
        assert_eq!(verify(&kr, Kind::Admission, "other", &v), None);
        // Same text with the kind prefix swapped does not verify either.
        let swapped = v.replacen("a1.", "q1.", 1);
        assert_eq!(verify(&kr, Kind::Queue, "shop", &swapped), None);
    }

    #[test]
    fn every_single_byte_change_is_rejected() {
        let kr = keyring();
        let v = sign(&kr, Kind::Queue, "shop", &claims());
        for i in 0..v.len() {
            for replacement in [b'0', b'A', b'.', b'-', b'z'] {
                let mut bytes = v.clone().into_bytes();
                if bytes[i] == replacement {
                    continue;
                }
                bytes[i] = replacement;
                let tampered = String::from_utf8(bytes).unwrap();
                assert_eq!(
                    verify(&kr, Kind::Queue, "shop", &tampered),
                    None,
                    "byte {i} changed to {} still verified",
                    replacement as char
                );
            }
        }
    }

    #[test]
    fn every_single_byte_insertion_is_rejected() {
        // Found by the fuzzer: a leading zero inserted into a number was accepted.
        let kr = keyring();
        let v = sign(&kr, Kind::Admission, "shop", &claims());
        for i in 0..=v.len() {
            for inserted in ['0', '1', 'a', 'A', '.', '-', '_'] {
                let mut changed = v.clone();
                changed.insert(i, inserted);
                assert_eq!(
                    verify(&kr, Kind::Admission, "shop", &changed),
                    None,
                    "{inserted:?} inserted at {i} still verified"
                );
            }
        }
    }

    #[test]
    fn truncated_and_oversized_are_rejected() {
        let kr = keyring();
        let v = sign(&kr, Kind::Queue, "shop", &claims());
        for end in 0..v.len() {
            assert_eq!(verify(&kr, Kind::Queue, "shop", &v[..end]), None);
        }
        let long = format!("{v}{}", "A".repeat(MAX_SIGNED_LEN));
        assert_eq!(verify(&kr, Kind::Queue, "shop", &long), None);
    }

    #[test]
    fn rotation_accepts_previous_and_refuses_retired() {
        let old = Keyring::new(SigningKey::new("k1", [1u8; 32]).unwrap());
        let v = sign(&old, Kind::Admission, "shop", &claims());
        // k1 is now the previous key: still accepted.
        assert!(verify(&keyring(), Kind::Admission, "shop", &v).is_some());
        // k1 retired: the value is no value.
        let retired = Keyring::new(SigningKey::new("k3", [3u8; 32]).unwrap())
            .with_previous(SigningKey::new("k2", [2u8; 32]).unwrap());
        assert_eq!(verify(&retired, Kind::Admission, "shop", &v), None);
        // A key with a known id but another secret does not verify.
        let impostor = Keyring::new(SigningKey::new("k1", [9u8; 32]).unwrap());
        assert_eq!(verify(&impostor, Kind::Admission, "shop", &v), None);
    }

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
        assert!(matches!(
            dup.validate(),
            Err(ConfigError::DuplicateKeyId { .. })
        ));
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn network_of_an_address() {
        assert_eq!(Network::of(ip("203.0.113.7")), Network::V4([203, 0, 113]));
        assert_eq!(
            Network::of(ip("203.0.113.7")),
            Network::of(ip("203.0.113.99"))
        );
        assert_ne!(
            Network::of(ip("203.0.113.7")),
            Network::of(ip("203.0.112.7"))
        );
        // An IPv4-mapped IPv6 address is its IPv4 address.
        assert_eq!(
            Network::of(ip("::ffff:203.0.113.200")),
            Network::V4([203, 0, 113])
        );
        assert_eq!(
            Network::of(ip("2001:db8:1:2::1")),
            Network::of(ip("2001:db8:1:ffff::9"))
        );
        assert_ne!(
            Network::of(ip("2001:db8:1::1")),
            Network::of(ip("2001:db8:2::1"))
        );
        assert_eq!(Network::of(None), Network::Unknown);
    }

    #[test]
    fn network_text_is_canonical() {
        for (net, text) in [
            (Network::Unknown, "u"),
            (Network::V4([203, 0, 113]), "4cb0071"),
            (Network::V6([0x20, 0x01, 0x0d, 0xb8, 0, 1]), "620010db80001"),
        ] {
            let mut buf = [0u8; NETWORK_TEXT_LEN];
            let n = net.encode(&mut buf);
            assert_eq!(&buf[..n], text.as_bytes());
            assert_eq!(Network::parse(text), Some(net));
        }
        for bad in [
            "", "U", "u0", "4", "4CB0071", "4cb007", "4cb00710", "6cb0071", "x", "4cb007g",
            "+cb0071",
        ] {
            assert_eq!(Network::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn network_round_trip_and_format() {
        let kr = keyring();
        for net in [
            Network::Unknown,
            Network::V4([203, 0, 113]),
            Network::V6([0x20, 0x01, 0x0d, 0xb8, 0, 1]),
        ] {
            let v = sign_with_network(&kr, Kind::Admission, "shop", &claims(), Some(net));
            assert_eq!(v.split('.').count(), 7, "{v}");
            assert_eq!(
                verify_with_network(&kr, Kind::Admission, "shop", &v),
                Some((claims(), Some(net)))
            );
            // A bound value is no value where no network is expected.
            assert_eq!(verify(&kr, Kind::Admission, "shop", &v), None);
        }
        // Unbound: the very text `sign` writes, and verifies with no network.
        let unbound = sign_with_network(&kr, Kind::Admission, "shop", &claims(), None);
        assert_eq!(unbound, sign(&kr, Kind::Admission, "shop", &claims()));
        assert_eq!(
            verify_with_network(&kr, Kind::Admission, "shop", &unbound),
            Some((claims(), None))
        );
        // Queue cookies never carry a network.
        let q = sign_with_network(&kr, Kind::Queue, "shop", &claims(), Some(Network::Unknown));
        assert_eq!(verify_with_network(&kr, Kind::Queue, "shop", &q), None);
    }

    #[test]
    fn network_is_inside_the_mac() {
        let kr = keyring();
        let net = Network::V4([203, 0, 113]);
        let v = sign_with_network(&kr, Kind::Admission, "shop", &claims(), Some(net));
        let (head, tag) = v.rsplit_once('.').unwrap();
        let (head, text) = head.rsplit_once('.').unwrap();
        assert_eq!(text, "4cb0071");
        // Another network with the same tag, the network removed, a network added.
        for other in ["4c63364", "4cb0070", "u", "620010db80001"] {
            let edited = format!("{head}.{other}.{tag}");
            assert_eq!(
                verify_with_network(&kr, Kind::Admission, "shop", &edited),
                None,
                "{other}"
            );
        }
        let removed = format!("{head}.{tag}");
        assert_eq!(
            verify_with_network(&kr, Kind::Admission, "shop", &removed),
            None
        );
        let unbound = sign(&kr, Kind::Admission, "shop", &claims());
        let (uhead, utag) = unbound.rsplit_once('.').unwrap();
        let added = format!("{uhead}.4cb0071.{utag}");
        assert_eq!(
            verify_with_network(&kr, Kind::Admission, "shop", &added),
            None
        );
        // Every single byte change or insertion.
        for i in 0..v.len() {
            for c in [b'0', b'4', b'6', b'u', b'A', b'.', b'-', b'f'] {
                let mut bytes = v.clone().into_bytes();
                if bytes[i] != c {
                    bytes[i] = c;
                    let t = String::from_utf8(bytes).unwrap();
                    assert_eq!(
                        verify_with_network(&kr, Kind::Admission, "shop", &t),
                        None,
                        "byte {i} -> {}",
                        c as char
                    );
                }
                let mut t = v.clone();
                t.insert(i, c as char);
                assert_eq!(
                    verify_with_network(&kr, Kind::Admission, "shop", &t),
                    None,
                    "{} inserted at {i}",
                    c as char
                );
            }
        }
    }

    #[test]
    fn debug_hides_secret() {
        let key = SigningKey::from_hex("k", &"5a".repeat(32)).unwrap();
        let shown = format!("{key:?} {:?}", Keyring::new(key.clone()));
        assert!(shown.contains("<redacted>"));
        assert!(!shown.contains("5a5a") && !shown.contains("90, 90"));
    }
}
