//! The signed-claims wire format shared by the queue cookie, the admission token and the
//! proof-of-work challenge.
//!
//! A value is `<kind>.<kid>.<session>.<iat>.<exp>[.<extra>].<tag>`: the kind carries the format
//! version (`q1`, `p1`, `a1`, `c1`, `m1`, `t1`; a new format would be a new prefix, verified beside
//! the old one while values in the old one live), `kid` names the [`SigningKey`](super::SigningKey),
//! `extra` is an admission token's network, a ticket's nonce or a queue cookie's place in line,
//! and the tag is the HMAC-SHA256 ([`MacKey`](super::mac::MacKey)) of
//! `twr|<kind>|<room>|<kid>|<session>|<iat>|<exp>[|<extra>]`. The room is
//! signed but not written, so a value of one room or kind never verifies as another. The format is
//! private to the crate: nothing outside reads or writes it.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

pub(crate) use super::claims::Claims;
use super::claims::Parsed;
use super::keys::Keyring;
use super::mac::TAG_LEN;
use crate::client::network::Network;
use crate::encoding::{hex_into, lower_hex_to};
use crate::encoding::{parse_u64, Digits};
use crate::session::SessionId;

/// Signed values longer than this are rejected before any parsing.
pub(crate) const MAX_SIGNED_LEN: usize = 256;

const TAG_B64_LEN: usize = 43;
/// Longest text form of a [`Network`]: `6` and 12 hex digits.
const NETWORK_TEXT_LEN: usize = 13;

/// Which signed value a text is; its prefix also carries the format's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueKind {
    Queue,
    /// A queue cookie cleared to join the line with proof of work on: its session solved a
    /// challenge, or was low risk at its first visit.
    ProvenQueue,
    Admission,
    /// A proof-of-work challenge.
    Challenge,
    /// A matching session: who a visitor is to matching (`tower-waiting-room-matching`) when the
    /// application does not say.
    MatchSession,
    /// A single-use checkout ticket; its nonce is the signed extra field.
    Ticket,
}

impl ValueKind {
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            ValueKind::Queue => "q1",
            ValueKind::ProvenQueue => "p1",
            ValueKind::Admission => "a1",
            ValueKind::Challenge => "c1",
            ValueKind::MatchSession => "m1",
            ValueKind::Ticket => "t1",
        }
    }

    /// Whether values of this kind may carry the extra field: an admission token's network
    /// (optional), a ticket's nonce (required, checked by the ticket), a queue cookie's place
    /// in line (optional, proven or not).
    fn has_extra(self) -> bool {
        matches!(
            self,
            ValueKind::Admission | ValueKind::Ticket | ValueKind::Queue | ValueKind::ProvenQueue
        )
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

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The fields of a value as the text writes them and the message signs them: the session's
/// 32 hex digits, the times in canonical decimal, the extra as written. Signing renders each
/// once for both; verifying takes them from the text itself, which parsed strictly (exactly
/// one spelling per value), so they are the very bytes that rendering would give.
struct Fields<'a> {
    session: &'a [u8],
    issued_at: &'a [u8],
    expires_at: &'a [u8],
    extra: Option<&'a [u8]>,
}

/// The signed message, `twr|<kind>|<room>|<kid>|<session>|<iat>|<exp>`, and `|<extra>` for a
/// token bound to a network or a ticket's nonce, written into `m` (in place: the buffer is never
/// moved). No field can contain `|` (an extra is alphanumeric), so a message with an extra and
/// one without never coincide.
#[cfg(test)]
fn message(
    m: &mut MessageBuf,
    kind: ValueKind,
    room: &str,
    kid: &str,
    claims: &Claims,
    extra: Option<&[u8]>,
) -> Option<()> {
    let (iat, exp) = (
        Digits::of(claims.issued_at_ms),
        Digits::of(claims.expires_at_ms),
    );
    let fields = Fields {
        session: &claims.session.hex(),
        issued_at: iat.as_bytes(),
        expires_at: exp.as_bytes(),
        extra,
    };
    message_of(m, kind, room, kid, &fields)
}

/// [`message`] from fields already written as text.
fn message_of(
    m: &mut MessageBuf,
    kind: ValueKind,
    room: &str,
    kid: &str,
    fields: &Fields<'_>,
) -> Option<()> {
    m.push(b"twr|")?;
    m.push(kind.prefix().as_bytes())?;
    m.push(b"|")?;
    m.push(room.as_bytes())?;
    m.push(b"|")?;
    m.push(kid.as_bytes())?;
    m.push(b"|")?;
    m.push(fields.session)?;
    m.push(b"|")?;
    m.push(fields.issued_at)?;
    m.push(b"|")?;
    m.push(fields.expires_at)?;
    if let Some(extra) = fields.extra {
        m.push(b"|")?;
        m.push(extra)?;
    }
    Some(())
}

/// Signs claims with the current key: `<kind>.<kid>.<session>.<iat>.<exp>.<tag>`, all characters
/// safe in a cookie value and a header.
pub(crate) fn sign(keyring: &Keyring, kind: ValueKind, room: &str, claims: &Claims) -> String {
    sign_with_network(keyring, kind, room, claims, None)
}

/// Like [`sign`], and with a network: `<kind>.<kid>.<session>.<iat>.<exp>.<network>.<tag>`, the
/// network signed too. Without one the text is exactly what [`sign`] writes.
pub(crate) fn sign_with_network(
    keyring: &Keyring,
    kind: ValueKind,
    room: &str,
    claims: &Claims,
    network: Option<Network>,
) -> String {
    let mut text = [0u8; NETWORK_TEXT_LEN];
    let extra = network.map(|network| {
        let n = encode_network(network, &mut text);
        std::str::from_utf8(&text[..n]).expect("ASCII")
    });
    sign_with_extra(keyring, kind, room, claims, extra)
}

/// Like [`sign`], and with an extra field (alphanumeric, at most [`MAX_EXTRA_LEN`] bytes):
/// `<kind>.<kid>.<session>.<iat>.<exp>.<extra>.<tag>`, the extra signed too.
pub(crate) fn sign_with_extra(
    keyring: &Keyring,
    kind: ValueKind,
    room: &str,
    claims: &Claims,
    extra: Option<&str>,
) -> String {
    // Exactly as long as the text (`len == capacity`): made a header value, it becomes the
    // header's bytes as it is, with no second allocation (see `Signed`).
    signed(keyring, kind, room, claims, extra)
        .as_str()
        .to_owned()
}

/// A signed value's text, on the stack: a first visit writes its queue cookie's `Set-Cookie`
/// (and header) straight from it, with no `String` in between.
pub(crate) struct Signed {
    buf: [u8; SIGNED_TEXT_CAP],
    len: usize,
}

/// Room for the longest text [`signed`] writes: `p1`, a 16-character key id, the session, two
/// 20-digit times, a 32-character extra, the tag and six dots (171 bytes; a test checks the
/// longest fits [`MAX_SIGNED_LEN`]).
const SIGNED_TEXT_CAP: usize = MAX_SIGNED_LEN;

impl Signed {
    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// The text's bytes: printable ASCII, valid in a cookie value and a header.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("a signed value is ASCII")
    }
}

/// [`sign_with_extra`]'s text, written on the stack. Each field is rendered once (the session's
/// hex, the times' digits) for both the message and the text; the tag is encoded straight into
/// the text.
pub(crate) fn signed(
    keyring: &Keyring,
    kind: ValueKind,
    room: &str,
    claims: &Claims,
    extra: Option<&str>,
) -> Signed {
    debug_assert!(extra.is_none_or(valid_extra), "{extra:?}");
    let key = keyring.current();
    let session = claims.session.hex();
    let (iat, exp) = (
        Digits::of(claims.issued_at_ms),
        Digits::of(claims.expires_at_ms),
    );
    let fields = Fields {
        session: &session,
        issued_at: iat.as_bytes(),
        expires_at: exp.as_bytes(),
        extra: extra.map(str::as_bytes),
    };
    let mut msg = MessageBuf::new();
    message_of(&mut msg, kind, room, key.id(), &fields)
        .expect("room and key id lengths are validated");
    let tag = key.mac().sign(msg.as_bytes());
    let mut out = Signed {
        buf: [0; SIGNED_TEXT_CAP],
        len: 0,
    };
    for piece in [
        kind.prefix().as_bytes(),
        b".",
        key.id().as_bytes(),
        b".",
        fields.session,
        b".",
        fields.issued_at,
        b".",
        fields.expires_at,
        b".",
    ] {
        out.push(piece);
    }
    if let Some(extra) = fields.extra {
        out.push(extra);
        out.push(b".");
    }
    let n = URL_SAFE_NO_PAD
        .encode_slice(tag.as_ref(), &mut out.buf[out.len..])
        .expect("room for the tag");
    out.len += n;
    out
}

/// Shortest signed value: `q1.k.<32 hex digits>.0.0.<tag>`.
const MIN_SIGNED_LEN: usize = 2 + 1 + 1 + 1 + 32 + 1 + 1 + 1 + 1 + 1 + TAG_B64_LEN;

/// Whether `value` could be a signed value of `kind` at all, by its prefix and length: the
/// cheap test that keeps junk (planted cookies of the same name, say) from being kept for
/// [`verify`], which parses and then computes an HMAC.
pub(crate) fn could_be(kind: ValueKind, value: &str) -> bool {
    (MIN_SIGNED_LEN..=MAX_SIGNED_LEN).contains(&value.len())
        && value.as_bytes()[..2] == *kind.prefix().as_bytes()
        && value.as_bytes()[2] == b'.'
}

/// Verifies a signed value of `kind` for `room`. Anything malformed, oversized, signed by an
/// unknown key or for another room or kind gives `None`, exactly like no value at all. Expiry is
/// checked by the caller, which knows the time.
pub(crate) fn verify(
    keyring: &Keyring,
    kind: ValueKind,
    room: &str,
    value: &str,
) -> Option<Claims> {
    match verify_with_extra(keyring, kind, room, value)? {
        (claims, None) => Some(claims),
        (_, Some(_)) => None,
    }
}

/// Like [`verify`], and the value must not be expired at `now_ms` (nor claim to be issued after
/// its expiry): the check of the queue cookie and the proof-of-work challenge.
pub(crate) fn verify_unexpired(
    keyring: &Keyring,
    kind: ValueKind,
    room: &str,
    value: &str,
    now_ms: u64,
) -> Option<Claims> {
    verify(keyring, kind, room, value).filter(|c| c.unexpired(now_ms))
}

/// Like [`verify`], and also accepts a value with a signed network (admission tokens only),
/// which it returns. The network is inside the MAC: a value whose network was edited, added or
/// removed does not verify.
pub(crate) fn verify_with_network(
    keyring: &Keyring,
    kind: ValueKind,
    room: &str,
    value: &str,
) -> Option<(Claims, Option<Network>)> {
    if kind != ValueKind::Admission {
        return verify(keyring, kind, room, value).map(|claims| (claims, None));
    }
    with_network(verify_with_extra(keyring, kind, room, value)?)
}

/// [`verify_with_network`] of a value already verified for this room ([`remembered`]): `None`
/// when it is not remembered, whatever it is.
pub(crate) fn remembered_with_network(
    keyring: &Keyring,
    kind: ValueKind,
    room: &str,
    value: &str,
) -> Option<(Claims, Option<Network>)> {
    with_network(remembered(keyring, kind, room, value)?)
}

/// The claims and the network of a verified value's extra field (an admission token's);
/// `None` when the extra is not a network.
fn with_network((claims, extra): (Claims, Option<&str>)) -> Option<(Claims, Option<Network>)> {
    match extra {
        None => Some((claims, None)),
        Some(text) => Some((claims, Some(parse_network(text)?))),
    }
}

/// Longest extra field: a ticket's nonce (32 hex digits); a network's text and a queue
/// cookie's place (`s` and at most 20 digits) are shorter.
const MAX_EXTRA_LEN: usize = 32;

/// An extra field is 1 to [`MAX_EXTRA_LEN`] ASCII letters and digits: it can hold neither the
/// text's `.` nor the message's `|`.
fn valid_extra(extra: &str) -> bool {
    (1..=MAX_EXTRA_LEN).contains(&extra.len()) && extra.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// What [`verify_with_extra`] says of `value` when it is the very text already verified for
/// this room, without the parse or the HMAC; `None` when it is not remembered (then only the
/// full check can tell). Its MAC holds and what it says is what it said then; its kind (its
/// prefix) and its key (still in the keyring) are checked again, and the callers' checks
/// (expiry, network) run as for any value.
pub(crate) fn remembered<'v>(
    keyring: &Keyring,
    kind: ValueKind,
    room: &str,
    value: &'v str,
) -> Option<(Claims, Option<&'v str>)> {
    let tag_start = value.len().checked_sub(TAG_B64_LEN)?;
    let hit = keyring
        .verified()
        .get(room, value, value.get(tag_start..)?)?;
    let kid = value.get(hit.kid.clone())?;
    let kind_ok = value
        .as_bytes()
        .get(..3)
        .is_some_and(|head| head[..2] == *kind.prefix().as_bytes() && head[2] == b'.');
    if !kind_ok || keyring.find(kid).is_none() {
        return None;
    }
    let extra = match hit.extra {
        Some(range) => Some(value.get(range)?),
        None => None,
    };
    Some((hit.claims, extra))
}

/// Like [`verify`], and also accepts a value with a signed extra field (the kinds that have
/// one: admission tokens, tickets, queue cookies), which it returns as written. The extra is inside the MAC:
/// a value whose extra was edited, added or removed does not verify.
pub(crate) fn verify_with_extra<'v>(
    keyring: &Keyring,
    kind: ValueKind,
    room: &str,
    value: &'v str,
) -> Option<(Claims, Option<&'v str>)> {
    if value.len() > MAX_SIGNED_LEN {
        return None;
    }
    if let Some(hit) = remembered(keyring, kind, room, value) {
        return Some(hit);
    }
    let mut parts = value.split('.');
    if parts.next()? != kind.prefix() {
        return None;
    }
    let kid = parts.next()?;
    let session_text = parts.next()?;
    let issued_at_text = parts.next()?;
    let expires_at_text = parts.next()?;
    let session = SessionId::from_hex(session_text)?;
    let issued_at_ms = parse_u64(issued_at_text)?;
    let expires_at_ms = parse_u64(expires_at_text)?;
    let fifth = parts.next()?;
    let (extra, tag_b64) = match parts.next() {
        None => (None, fifth),
        Some(tag_b64) if kind.has_extra() && valid_extra(fifth) => (Some(fifth), tag_b64),
        Some(_) => return None,
    };
    if parts.next().is_some() || tag_b64.len() != TAG_B64_LEN {
        return None;
    }
    let key = keyring.find(kid)?;
    let claims = Claims {
        session,
        issued_at_ms,
        expires_at_ms,
    };
    let mut tag = [0u8; TAG_LEN + 1];
    let n = URL_SAFE_NO_PAD
        .decode_slice(tag_b64.as_bytes(), &mut tag)
        .ok()?;
    if n != TAG_LEN {
        return None;
    }
    // The fields as the text has them: each parsed strictly above (one spelling per value),
    // so these are exactly the bytes signing rendered, without rendering them again.
    let fields = Fields {
        session: session_text.as_bytes(),
        issued_at: issued_at_text.as_bytes(),
        expires_at: expires_at_text.as_bytes(),
        extra: extra.map(str::as_bytes),
    };
    let mut msg = MessageBuf::new();
    message_of(&mut msg, kind, room, kid, &fields)?;
    if !key.mac().verify(msg.as_bytes(), &tag[..TAG_LEN]) {
        return None;
    }
    let offset = |part: &str| part.as_ptr() as usize - value.as_ptr() as usize;
    let parsed = Parsed {
        claims,
        kid: offset(kid)..offset(kid) + kid.len(),
        extra: extra.map(|e| offset(e)..offset(e) + e.len()),
    };
    keyring.verified().insert(room, value, tag_b64, parsed);
    Some((claims, extra))
}

/// A network's text form, written into `out`; returns its length. Fixed length and lowercase hex
/// so that exactly one spelling exists: `u`, `4` and the 3 prefix bytes (`4cb0071` for
/// 203.0.113.0/24), or `6` and the 6 prefix bytes.
fn encode_network(network: Network, out: &mut [u8; NETWORK_TEXT_LEN]) -> usize {
    let (tag, bytes): (u8, &[u8]) = match &network {
        Network::Unknown => (b'u', &[]),
        Network::V4(b) => (b'4', b),
        Network::V6(b) => (b'6', b),
    };
    out[0] = tag;
    let len = 1 + 2 * bytes.len();
    hex_into(bytes, &mut out[1..len]);
    len
}

/// Strict parse of the text form: only the exact spelling [`encode_network`] writes.
fn parse_network(s: &str) -> Option<Network> {
    let (tag, rest) = s.as_bytes().split_first()?;
    match tag {
        b'u' if rest.is_empty() => Some(Network::Unknown),
        b'4' => {
            let mut b = [0u8; 3];
            lower_hex_to(rest, &mut b)?;
            Some(Network::V4(b))
        }
        b'6' => {
            let mut b = [0u8; 6];
            lower_hex_to(rest, &mut b)?;
            Some(Network::V6(b))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::keys::SigningKey;

    #[test]
    fn every_signed_value_could_be_one_and_the_shortest_is_the_minimum() {
        let short = Keyring::new(SigningKey::new("k", [3u8; 32]).unwrap());
        let zero = Claims {
            session: SessionId::from_bytes([0; 16]),
            issued_at_ms: 0,
            expires_at_ms: 0,
        };
        for kind in [
            ValueKind::Queue,
            ValueKind::ProvenQueue,
            ValueKind::Admission,
            ValueKind::Challenge,
            ValueKind::MatchSession,
            ValueKind::Ticket,
        ] {
            let shortest = sign(&short, kind, "r", &zero);
            assert_eq!(shortest.len(), MIN_SIGNED_LEN, "{shortest}");
            assert!(could_be(kind, &shortest));
            let value = sign(&keyring(), kind, "room", &claims());
            assert!(could_be(kind, &value), "{value}");
            let other = if kind == ValueKind::Queue {
                ValueKind::Admission
            } else {
                ValueKind::Queue
            };
            assert!(!could_be(other, &value), "{value}");
            assert!(!could_be(kind, &value[..MIN_SIGNED_LEN - 1]));
            assert!(!could_be(
                kind,
                &format!("{value}{}", "x".repeat(MAX_SIGNED_LEN))
            ));
        }
        let bound = Network::of(Some("2001:db8::1".parse().unwrap()));
        let value = sign_with_network(
            &keyring(),
            ValueKind::Admission,
            "room",
            &claims(),
            Some(bound),
        );
        assert!(could_be(ValueKind::Admission, &value), "{value}");
        assert!(!could_be(ValueKind::Queue, "q1"), "shorter than a prefix");
    }

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
        let v = sign(&kr, ValueKind::Admission, "shop", &claims());
        assert!(v.starts_with("a1.k2."));
        assert_eq!(
            verify(&kr, ValueKind::Admission, "shop", &v),
            Some(claims())
        );
    }

    #[test]
    fn signed_text_is_exact() {
        let kr = keyring();
        let c = Claims {
            session: SessionId::from_bytes([0x0f; 16]),
            issued_at_ms: 0,
            expires_at_ms: u64::MAX,
        };
        let v = sign(&kr, ValueKind::Queue, "shop", &c);
        let (head, tag) = v.rsplit_once('.').unwrap();
        assert_eq!(head, format!("q1.k2.{}.0.{}", "0f".repeat(16), u64::MAX));
        let mut msg = MessageBuf::new();
        message(&mut msg, ValueKind::Queue, "shop", "k2", &c, None).unwrap();
        assert_eq!(
            msg.as_bytes(),
            format!("twr|q1|shop|k2|{}|0|{}", "0f".repeat(16), u64::MAX).as_bytes()
        );
        let expected = kr.current().mac().sign(msg.as_bytes());
        assert_eq!(tag, URL_SAFE_NO_PAD.encode(expected.as_ref()));
        // The text on the stack is the very text returned.
        let on_stack = signed(&kr, ValueKind::Queue, "shop", &c, None);
        assert_eq!(on_stack.as_str(), v);
        assert_eq!(on_stack.as_bytes(), v.as_bytes());
    }

    #[test]
    fn other_room_or_kind_is_no_value() {
        let kr = keyring();
        let v = sign(&kr, ValueKind::Admission, "shop", &claims());
        assert_eq!(verify(&kr, ValueKind::Admission, "other", &v), None);
        // Same text with the kind prefix swapped does not verify either.
        let swapped = v.replacen("a1.", "q1.", 1);
        assert_eq!(verify(&kr, ValueKind::Queue, "shop", &swapped), None);
    }

    #[test]
    fn every_single_byte_change_is_rejected() {
        let kr = keyring();
        let v = sign(&kr, ValueKind::Queue, "shop", &claims());
        for i in 0..v.len() {
            for replacement in [b'0', b'A', b'.', b'-', b'z'] {
                let mut bytes = v.clone().into_bytes();
                if bytes[i] == replacement {
                    continue;
                }
                bytes[i] = replacement;
                let tampered = String::from_utf8(bytes).unwrap();
                assert_eq!(
                    verify(&kr, ValueKind::Queue, "shop", &tampered),
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
        let v = sign(&kr, ValueKind::Admission, "shop", &claims());
        for i in 0..=v.len() {
            for inserted in ['0', '1', 'a', 'A', '.', '-', '_'] {
                let mut changed = v.clone();
                changed.insert(i, inserted);
                assert_eq!(
                    verify(&kr, ValueKind::Admission, "shop", &changed),
                    None,
                    "{inserted:?} inserted at {i} still verified"
                );
            }
        }
    }

    #[test]
    fn truncated_and_oversized_are_rejected() {
        let kr = keyring();
        let v = sign(&kr, ValueKind::Queue, "shop", &claims());
        for end in 0..v.len() {
            assert_eq!(verify(&kr, ValueKind::Queue, "shop", &v[..end]), None);
        }
        let long = format!("{v}{}", "A".repeat(MAX_SIGNED_LEN));
        assert_eq!(verify(&kr, ValueKind::Queue, "shop", &long), None);
    }

    #[test]
    fn rotation_accepts_previous_and_refuses_retired() {
        let old = Keyring::new(SigningKey::new("k1", [1u8; 32]).unwrap());
        let v = sign(&old, ValueKind::Admission, "shop", &claims());
        // k1 is now the previous key: still accepted.
        assert!(verify(&keyring(), ValueKind::Admission, "shop", &v).is_some());
        // k1 retired: the value is no value.
        let retired = Keyring::new(SigningKey::new("k3", [3u8; 32]).unwrap())
            .with_previous(SigningKey::new("k2", [2u8; 32]).unwrap());
        assert_eq!(verify(&retired, ValueKind::Admission, "shop", &v), None);
        // A key with a known id but another secret does not verify.
        let impostor = Keyring::new(SigningKey::new("k1", [9u8; 32]).unwrap());
        assert_eq!(verify(&impostor, ValueKind::Admission, "shop", &v), None);
    }

    #[test]
    fn network_round_trip_and_format() {
        let kr = keyring();
        for net in [
            Network::Unknown,
            Network::V4([203, 0, 113]),
            Network::V6([0x20, 0x01, 0x0d, 0xb8, 0, 1]),
        ] {
            let v = sign_with_network(&kr, ValueKind::Admission, "shop", &claims(), Some(net));
            assert_eq!(v.split('.').count(), 7, "{v}");
            assert_eq!(
                verify_with_network(&kr, ValueKind::Admission, "shop", &v),
                Some((claims(), Some(net)))
            );
            // A bound value is no value where no network is expected.
            assert_eq!(verify(&kr, ValueKind::Admission, "shop", &v), None);
        }
        // Unbound: the very text `sign` writes, and verifies with no network.
        let unbound = sign_with_network(&kr, ValueKind::Admission, "shop", &claims(), None);
        assert_eq!(unbound, sign(&kr, ValueKind::Admission, "shop", &claims()));
        assert_eq!(
            verify_with_network(&kr, ValueKind::Admission, "shop", &unbound),
            Some((claims(), None))
        );
        // Queue cookies never carry a network.
        let q = sign_with_network(
            &kr,
            ValueKind::Queue,
            "shop",
            &claims(),
            Some(Network::Unknown),
        );
        assert_eq!(verify_with_network(&kr, ValueKind::Queue, "shop", &q), None);
    }

    #[test]
    fn network_is_inside_the_mac() {
        let kr = keyring();
        let net = Network::V4([203, 0, 113]);
        let v = sign_with_network(&kr, ValueKind::Admission, "shop", &claims(), Some(net));
        let (head, tag) = v.rsplit_once('.').unwrap();
        let (head, text) = head.rsplit_once('.').unwrap();
        assert_eq!(text, "4cb0071");
        // Another network with the same tag, the network removed, a network added.
        for other in ["4c63364", "4cb0070", "u", "620010db80001"] {
            let edited = format!("{head}.{other}.{tag}");
            assert_eq!(
                verify_with_network(&kr, ValueKind::Admission, "shop", &edited),
                None,
                "{other}"
            );
        }
        let removed = format!("{head}.{tag}");
        assert_eq!(
            verify_with_network(&kr, ValueKind::Admission, "shop", &removed),
            None
        );
        let unbound = sign(&kr, ValueKind::Admission, "shop", &claims());
        let (uhead, utag) = unbound.rsplit_once('.').unwrap();
        let added = format!("{uhead}.4cb0071.{utag}");
        assert_eq!(
            verify_with_network(&kr, ValueKind::Admission, "shop", &added),
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
                        verify_with_network(&kr, ValueKind::Admission, "shop", &t),
                        None,
                        "byte {i} -> {}",
                        c as char
                    );
                }
                let mut t = v.clone();
                t.insert(i, c as char);
                assert_eq!(
                    verify_with_network(&kr, ValueKind::Admission, "shop", &t),
                    None,
                    "{} inserted at {i}",
                    c as char
                );
            }
        }
    }

    #[test]
    fn network_text_is_canonical() {
        for (net, text) in [
            (Network::Unknown, "u"),
            (Network::V4([203, 0, 113]), "4cb0071"),
            (Network::V6([0x20, 0x01, 0x0d, 0xb8, 0, 1]), "620010db80001"),
        ] {
            let mut buf = [0u8; NETWORK_TEXT_LEN];
            let n = encode_network(net, &mut buf);
            assert_eq!(&buf[..n], text.as_bytes());
            assert_eq!(parse_network(text), Some(net));
        }
        for bad in [
            "", "U", "u0", "4", "4CB0071", "4cb007", "4cb00710", "6cb0071", "x", "4cb007g",
            "+cb0071",
        ] {
            assert_eq!(parse_network(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_remembered_value_skips_only_the_hmac() {
        let kr = keyring();
        let v = sign(&kr, ValueKind::Admission, "shop", &claims());
        assert_eq!(kr.verified().len(), 0, "signing remembers nothing");
        // A forged value is never remembered.
        let forged = format!("{}A", &v[..v.len() - 1]);
        assert_eq!(verify(&kr, ValueKind::Admission, "shop", &forged), None);
        assert_eq!(kr.verified().len(), 0);
        // Verified once: remembered, and the clones (same keys) share it.
        assert_eq!(
            verify(&kr, ValueKind::Admission, "shop", &v),
            Some(claims())
        );
        assert_eq!(kr.verified().len(), 1);
        let clone = kr.clone();
        assert!(clone
            .verified()
            .contains("shop", &v, v.rsplit_once('.').unwrap().1));
        for _ in 0..3 {
            assert_eq!(
                verify(&clone, ValueKind::Admission, "shop", &v),
                Some(claims())
            );
        }
        // Still no value for another room or kind, nor any edited text.
        assert_eq!(verify(&kr, ValueKind::Admission, "other", &v), None);
        assert_eq!(verify(&kr, ValueKind::Queue, "shop", &v), None);
        let as_queue = v.replacen("a1.", "q1.", 1);
        assert_eq!(verify(&kr, ValueKind::Queue, "shop", &as_queue), None);
        for i in 0..v.len() {
            let mut bytes = v.clone().into_bytes();
            bytes[i] = if bytes[i] == b'0' { b'1' } else { b'0' };
            let t = String::from_utf8(bytes).unwrap();
            assert_eq!(
                verify(&kr, ValueKind::Admission, "shop", &t),
                None,
                "byte {i}"
            );
        }
        // Expiry is the callers' check, made on every call: a remembered value expires.
        let q = sign(&kr, ValueKind::Queue, "shop", &claims());
        assert!(verify_unexpired(&kr, ValueKind::Queue, "shop", &q, 2_000).is_some());
        assert!(verify_unexpired(&kr, ValueKind::Queue, "shop", &q, 2_000).is_some());
        assert_eq!(
            verify_unexpired(&kr, ValueKind::Queue, "shop", &q, 301_000),
            None
        );
    }

    #[test]
    fn a_remembered_value_of_a_retired_key_is_no_value() {
        // Remembered under k1 as current...
        let old = Keyring::new(SigningKey::new("k1", [1u8; 32]).unwrap());
        let v = sign(&old, ValueKind::Admission, "shop", &claims());
        assert!(verify(&old, ValueKind::Admission, "shop", &v).is_some());
        assert!(verify(&old, ValueKind::Admission, "shop", &v).is_some());
        // ...k1 retired: no value, remembered or not.
        let retired = Keyring::new(SigningKey::new("k3", [3u8; 32]).unwrap())
            .with_previous(SigningKey::new("k2", [2u8; 32]).unwrap());
        assert_eq!(verify(&retired, ValueKind::Admission, "shop", &v), None);
        // A keyring given another previous key forgets what it remembered.
        let rotated = old
            .clone()
            .with_previous(SigningKey::new("k0", [0u8; 32]).unwrap());
        assert_eq!(rotated.verified().len(), 0);
        assert_eq!(old.verified().len(), 1);
        // The same key id with another secret: nothing carries over.
        let impostor = Keyring::new(SigningKey::new("k1", [9u8; 32]).unwrap());
        assert_eq!(verify(&impostor, ValueKind::Admission, "shop", &v), None);
    }
}
