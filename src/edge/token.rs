//! The edge token, format `wr1` ([`EdgeClaims`], signed with an [`EdgeKey`]): ASCII, four parts
//! joined by `.`, `wr1.<kid>.<claims>.<signature>`, where `<claims>` is the base64url (no
//! padding) of five lines of text (room, session, issued at, expires at, scope) and
//! `<signature>` the base64url of the Ed25519 signature of everything before the last `.`.
//! `docs/edge.md` has it byte by byte; `edge/verify.mjs` verifies it at an edge, and
//! [`EdgeClaims::verify`] here, by the same rules.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use super::keys::{EdgeKey, EdgeKeySet, MAX_EDGE_KEY_ID_LEN};
use crate::encoding::{is_plain_id, parse_u64, push_u64};
use crate::session::SessionId;

/// The format's name and version, the token's first part.
pub const EDGE_FORMAT: &str = "wr1";
/// The longest token, in characters.
pub const MAX_EDGE_TOKEN_LEN: usize = 1024;
/// The longest claims text, in bytes.
pub const MAX_EDGE_CLAIMS_LEN: usize = 512;
/// How far a verifier's clock may be from the signer's, in seconds, either way.
pub const EDGE_SKEW_SECS: u64 = 10;
/// The most digits of a time in the claims.
const MAX_TIME_DIGITS: usize = 12;
/// The longest room id the claims hold.
const MAX_ROOM_LEN: usize = 64;

/// What an edge token says: whose admission, to which room, for how long, over which routes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeClaims {
    /// The room.
    pub room: String,
    /// The admitted session.
    pub session: SessionId,
    /// When it was signed, Unix seconds.
    pub issued_at: u64,
    /// When it ends, Unix seconds.
    pub expires_at: u64,
    /// The path prefixes the admission covers, each starting with `/`.
    pub scope: Vec<String>,
}

impl EdgeClaims {
    /// The token of these claims, signed with `key`. The claims must be as the format allows
    /// (a room id and scope the builder checked): they are written as they are.
    pub fn sign(&self, key: &EdgeKey) -> String {
        let mut text = String::with_capacity(128);
        text.push_str(&self.room);
        text.push('\n');
        text.push_str(&self.session.to_string());
        text.push('\n');
        push_u64(&mut text, self.issued_at);
        text.push('\n');
        push_u64(&mut text, self.expires_at);
        text.push('\n');
        text.push_str(&self.scope.join(" "));
        let mut token = String::with_capacity(320);
        token.push_str(EDGE_FORMAT);
        token.push('.');
        token.push_str(key.id());
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(text.as_bytes(), &mut token);
        let signature = key.sign(token.as_bytes());
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature, &mut token);
        token
    }

    /// The claims of `token` if it is a valid token of `room`, signed by the key of `keys` it
    /// names (any of them, as at an edge), and not expired at `now_secs` (with
    /// [`EDGE_SKEW_SECS`] either way); `None` for anything else, never a panic.
    pub fn verify(keys: &EdgeKeySet, room: &str, token: &str, now_secs: u64) -> Option<Self> {
        if token.len() > MAX_EDGE_TOKEN_LEN {
            return None;
        }
        let (signed, signature) = token.rsplit_once('.')?;
        let mut parts = signed.splitn(3, '.');
        let (format, kid, claims) = (parts.next()?, parts.next()?, parts.next()?);
        if format != EDGE_FORMAT
            || !is_plain_id(kid, MAX_EDGE_KEY_ID_LEN)
            || claims.contains('.')
            || claims.len() > MAX_EDGE_CLAIMS_LEN.div_ceil(3) * 4
        {
            return None;
        }
        let key = keys.verifying(kid)?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        if signature.len() != 64 || !key.verifies(signed.as_bytes(), &signature) {
            return None;
        }
        let text = URL_SAFE_NO_PAD.decode(claims).ok()?;
        let claims = Self::read(std::str::from_utf8(&text).ok()?)?;
        let fresh = claims.issued_at <= now_secs.saturating_add(EDGE_SKEW_SECS)
            && now_secs < claims.expires_at.saturating_add(EDGE_SKEW_SECS);
        (fresh && claims.room == room).then_some(claims)
    }

    /// The claims text's five lines, each as the format writes it.
    fn read(text: &str) -> Option<Self> {
        if text.len() > MAX_EDGE_CLAIMS_LEN {
            return None;
        }
        let lines: Vec<&str> = text.split('\n').collect();
        let [room, session, issued_at, expires_at, scope] = lines.as_slice() else {
            return None;
        };
        if !is_plain_id(room, MAX_ROOM_LEN) {
            return None;
        }
        let session = SessionId::from_hex(session)?;
        let time = |s: &str| (s.len() <= MAX_TIME_DIGITS).then(|| parse_u64(s)).flatten();
        let (issued_at, expires_at) = (time(issued_at)?, time(expires_at)?);
        // No room mints a token living longer than MAX_EDGE_TTL: one that says so was not made
        // by a room, and if a signing key leaked, the tokens made with it would otherwise pass
        // for as long as the key stays in the set.
        if expires_at <= issued_at || expires_at - issued_at > super::MAX_EDGE_TTL.as_secs() {
            return None;
        }
        let scope = scope
            .split(' ')
            .map(|prefix| is_scope_prefix(prefix).then(|| prefix.to_owned()))
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            room: (*room).to_owned(),
            session,
            issued_at,
            expires_at,
            scope,
        })
    }

    /// Whether the admission covers `path`: it starts with one of the scope's prefixes, at a
    /// `/` (`/shop` covers `/shop` and `/shop/cart`, not `/shopping`).
    pub fn covers(&self, path: &str) -> bool {
        self.scope.iter().any(|prefix| {
            path.strip_prefix(prefix.as_str()).is_some_and(|rest| {
                prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/')
            })
        })
    }
}

/// A path prefix the scope may hold: it starts with `/`, and holds no space or control
/// character (the claims' separators). Its length is bounded by the claims' 512 bytes.
pub(crate) fn is_scope_prefix(prefix: &str) -> bool {
    prefix.starts_with('/') && !prefix.chars().any(|c| c == ' ' || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> EdgeKeySet {
        EdgeKeySet::new(EdgeKey::from_seed("k2", &[2; 32]).unwrap())
            .with_previous(EdgeKey::from_seed("k1", &[1; 32]).unwrap())
            .with_next(EdgeKey::from_seed("k3", &[3; 32]).unwrap())
    }

    fn claims() -> EdgeClaims {
        EdgeClaims {
            room: "shop".to_owned(),
            session: SessionId::from_bytes([0xab; 16]),
            issued_at: 1_800_000_000,
            expires_at: 1_800_000_060,
            scope: vec!["/shop".to_owned(), "/checkout/".to_owned()],
        }
    }

    #[test]
    fn a_signed_token_verifies_and_says_its_claims() {
        let set = keys();
        let token = claims().sign(set.current());
        assert!(token.starts_with("wr1.k2."), "{token}");
        assert!(token.len() < 300, "cookie-sized: {}", token.len());
        assert!(token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)));
        let now = 1_800_000_030;
        assert_eq!(
            EdgeClaims::verify(&set, "shop", &token, now),
            Some(claims())
        );
        // Every key of the set verifies, as at an edge: the previous one's tokens until they
        // expire, the next one's (it signs none yet) as soon as it does.
        for key in set.keys() {
            let token = claims().sign(key);
            assert!(
                EdgeClaims::verify(&set, "shop", &token, now).is_some(),
                "{}",
                key.id()
            );
        }
    }

    #[test]
    fn anything_but_a_valid_fresh_token_of_the_room_is_none() {
        let set = keys();
        let token = claims().sign(set.current());
        let at = |now| EdgeClaims::verify(&set, "shop", &token, now);
        assert!(at(1_800_000_069).is_some(), "within the skew");
        assert_eq!(at(1_800_000_070), None, "expired");
        assert!(at(1_799_999_990).is_some(), "within the skew");
        assert_eq!(at(1_799_999_989), None, "not yet issued");
        assert_eq!(
            EdgeClaims::verify(&set, "other", &token, 1_800_000_030),
            None
        );
        // Every byte changed, every truncation.
        for i in 0..token.len() {
            let mut bytes = token.clone().into_bytes();
            bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
            let changed = String::from_utf8(bytes).unwrap();
            assert_eq!(at_token(&set, &changed), None, "byte {i}");
            assert_eq!(at_token(&set, &token[..i]), None, "first {i}");
        }
        // A key not in the set.
        let stranger = EdgeKey::from_seed("k2", &[9; 32]).unwrap();
        assert_eq!(at_token(&set, &claims().sign(&stranger)), None);
        // Claims the format does not allow, properly signed.
        let signed = |text: &str| {
            let mut token = format!("wr1.k2.{}", URL_SAFE_NO_PAD.encode(text));
            let sig = set.current().sign(token.as_bytes());
            token.push('.');
            token.push_str(&URL_SAFE_NO_PAD.encode(sig));
            token
        };
        let session = "ab".repeat(16);
        let good = format!("shop\n{session}\n1800000000\n1800000060\n/");
        assert!(at_token(&set, &signed(&good)).is_some());
        for bad in [
            format!("shop\n{session}\n1800000000\n1800000060"),
            format!("shop\n{session}\n1800000000\n1800000060\n/\n"),
            format!("shop\n{}\n1800000000\n1800000060\n/", "AB".repeat(16)),
            format!("shop\n{session}\n01800000000\n1800000060\n/"),
            format!("shop\n{session}\n1800000060\n1800000060\n/"),
            format!("shop\n{session}\n1800000000\n1800000060\nshop"),
            format!("shop\n{session}\n1800000000\n1800000060\n/a  /b"),
            format!("sh op\n{session}\n1800000000\n1800000060\n/"),
            format!(
                "shop\n{session}\n1800000000\n1800000060\n/{}",
                "a".repeat(600)
            ),
        ] {
            assert_eq!(at_token(&set, &signed(&bad)), None, "{bad:?}");
        }
        assert_eq!(at_token(&set, &"a".repeat(5_000)), None);
    }

    #[test]
    fn a_token_living_longer_than_a_room_mints_is_none() {
        let set = keys();
        let at = |claims: EdgeClaims| {
            EdgeClaims::verify(&set, "shop", &claims.sign(set.current()), 1_800_000_030)
        };
        let longest = 1_800_000_000 + super::super::MAX_EDGE_TTL.as_secs();
        assert!(at(EdgeClaims {
            expires_at: longest,
            ..claims()
        })
        .is_some());
        for (issued_at, expires_at) in [(1_800_000_000, longest + 1), (0, 999_999_999_999)] {
            let forged = EdgeClaims {
                issued_at,
                expires_at,
                ..claims()
            };
            assert_eq!(at(forged), None, "{issued_at} to {expires_at}");
        }
    }

    fn at_token(set: &EdgeKeySet, token: &str) -> Option<EdgeClaims> {
        EdgeClaims::verify(set, "shop", token, 1_800_000_030)
    }

    #[test]
    fn the_scope_covers_paths_under_its_prefixes_at_a_slash() {
        let c = claims();
        for (path, covered) in [
            ("/shop", true),
            ("/shop/cart", true),
            ("/shopping", false),
            ("/checkout/", true),
            ("/checkout/pay", true),
            ("/checkout", false),
            ("/", false),
        ] {
            assert_eq!(c.covers(path), covered, "{path}");
        }
        let all = EdgeClaims {
            scope: vec!["/".to_owned()],
            ..claims()
        };
        assert!(all.covers("/anything/at/all"));
    }
}
