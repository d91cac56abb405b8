//! The Ed25519 keys that sign edge tokens: one [`EdgeKey`] a key id and its private seed, an
//! [`EdgeKeySet`] the current key (which signs), the next one (published before it signs, so
//! edges have it in time) and the previous one (published until its tokens have expired), and
//! the set's public half as a JWKS (RFC 7517, with RFC 8037's `OKP`/`Ed25519` keys).

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use serde::Serialize;

use crate::encoding::is_plain_id;
use crate::vocab::ConfigError;

/// The longest key id an edge key may have.
pub const MAX_EDGE_KEY_ID_LEN: usize = 32;
/// An Ed25519 private key's seed, in bytes (RFC 8032).
const SEED_LEN: usize = 32;

/// One Ed25519 key with its id. The private half is never printed.
pub struct EdgeKey {
    id: Box<str>,
    pair: Ed25519KeyPair,
}

impl EdgeKey {
    /// A key from its 32-byte private seed and an id of 1 to [`MAX_EDGE_KEY_ID_LEN`]
    /// characters from `[A-Za-z0-9_-]`; else [`ConfigError::InvalidEdgeKeys`].
    pub fn from_seed(id: impl Into<String>, seed: &[u8]) -> Result<Self, ConfigError> {
        let id = id.into();
        if !is_plain_id(&id, MAX_EDGE_KEY_ID_LEN) {
            return Err(refused(
                "a key id is not 1 to 32 characters of A-Z, a-z, 0-9, _ and -",
            ));
        }
        if seed.len() != SEED_LEN {
            return Err(refused("an Ed25519 private key is 32 bytes"));
        }
        let pair = Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| refused("an Ed25519 private key that ring refuses"))?;
        Ok(Self {
            id: id.into_boxed_str(),
            pair,
        })
    }

    /// A key with a fresh random seed, for development and tests: every gateway of a fleet
    /// must sign with the same keys, so a fleet's come from a file or the environment.
    ///
    /// # Panics
    /// If the operating system's random source fails.
    pub fn generate(id: impl Into<String>) -> Result<Self, ConfigError> {
        let mut seed = [0u8; SEED_LEN];
        SystemRandom::new()
            .fill(&mut seed)
            .expect("the system random source failed");
        Self::from_seed(id, &seed)
    }

    /// The key id every token it signs names.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The public key, 32 bytes.
    pub fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    pub(crate) fn sign(&self, message: &[u8]) -> [u8; 64] {
        let mut out = [0u8; 64];
        out.copy_from_slice(self.pair.sign(message).as_ref());
        out
    }

    pub(crate) fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, self.public_key())
            .verify(message, signature)
            .is_ok()
    }
}

impl fmt::Debug for EdgeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EdgeKey")
            .field("id", &self.id)
            .field("private", &"<redacted>")
            .finish()
    }
}

/// The keys of edge tokens: the current one signs; the next one is published before it signs
/// (edges fetch the set ahead of a rotation); the previous one is published until the tokens
/// it signed have expired. A verifier accepts a token signed by any key of the set.
///
/// To rotate, one step per deploy, each after the edges' key set cache has turned over (its
/// TTL, 5 minutes by default): publish a next key; make it current (the old current becomes
/// previous); once a token lifetime has passed, drop the previous key.
///
/// From text, as a file or an environment variable holds it ([`parse`](Self::parse)): one key
/// a line (or separated by `;`), its role, id and base64url seed:
///
/// ```
/// use tower_waiting_room::edge::EdgeKeySet;
///
/// let set = EdgeKeySet::parse(
///     "current 2026-12 qkH6X1bDTtG3oVhWn2v0YJ8hE5pZ3sLcRfAaU9mQe7I\n\
///      next 2027-01 bQ4x0kz7wT2mVJp9sR6cN1dYh5LgEu3oHfAi8lWt0Ks",
/// )
/// .unwrap();
/// assert_eq!(set.current().id(), "2026-12");
/// // The private halves are never shown.
/// assert!(!format!("{set:?}").contains("qkH6"));
/// ```
#[derive(Debug)]
pub struct EdgeKeySet {
    current: EdgeKey,
    next: Option<EdgeKey>,
    previous: Option<EdgeKey>,
}

impl EdgeKeySet {
    /// A set with only a current key.
    pub fn new(current: EdgeKey) -> Self {
        Self {
            current,
            next: None,
            previous: None,
        }
    }

    /// With the key that will sign next, published ahead of it.
    pub fn with_next(mut self, next: EdgeKey) -> Self {
        self.next = Some(next);
        self
    }

    /// With the key that signed before the current one, published until its tokens have
    /// expired.
    pub fn with_previous(mut self, previous: EdgeKey) -> Self {
        self.previous = Some(previous);
        self
    }

    /// A set from text: one key a line or `;`-separated entry, `<role> <id> <seed>`, the role
    /// `current` (exactly one), `next` or `previous` (at most one each), the seed the 32-byte
    /// private key in base64url (43 characters, no padding); blank lines and lines starting
    /// with `#` are skipped. Anything else is [`ConfigError::InvalidEdgeKeys`], saying what,
    /// never echoing a seed.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let (mut current, mut next, mut previous) = (None, None, None);
        for entry in text.split(['\n', ';']).map(str::trim) {
            if entry.is_empty() || entry.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = entry.split_whitespace().collect();
            let [role, id, seed] = words.as_slice() else {
                return Err(refused(
                    "a key entry is not `<current|next|previous> <id> <base64url seed>`",
                ));
            };
            let seed = URL_SAFE_NO_PAD
                .decode(seed)
                .map_err(|_| refused("a key's seed is not base64url without padding"))?;
            let key = EdgeKey::from_seed(*id, &seed)?;
            let slot = match *role {
                "current" => &mut current,
                "next" => &mut next,
                "previous" => &mut previous,
                _ => return Err(refused("a key's role is not current, next or previous")),
            };
            if slot.replace(key).is_some() {
                return Err(refused("a role is given twice"));
            }
        }
        let current = current.ok_or_else(|| refused("no current key"))?;
        let set = Self {
            current,
            next,
            previous,
        };
        if set.shares_an_id() {
            return Err(refused("two keys have the same id"));
        }
        Ok(set)
    }

    /// Whether two keys of the set have the same id: an edge would verify the tokens of one of
    /// them with the other's key, and refuse them.
    pub(crate) fn shares_an_id(&self) -> bool {
        let ids: Vec<&str> = self.keys().map(EdgeKey::id).collect();
        (1..ids.len()).any(|i| ids[..i].contains(&ids[i]))
    }

    /// The key that signs.
    pub fn current(&self) -> &EdgeKey {
        &self.current
    }

    /// Every key of the set: current, next, previous.
    pub fn keys(&self) -> impl Iterator<Item = &EdgeKey> {
        std::iter::once(&self.current)
            .chain(self.next.as_ref())
            .chain(self.previous.as_ref())
    }

    /// The key named `id`, which verifies the tokens naming it: any key of the set, as at an
    /// edge (the next one signs nothing yet, but the set publishes it).
    pub(crate) fn verifying(&self, id: &str) -> Option<&EdgeKey> {
        self.keys().find(|k| k.id() == id)
    }

    /// The public keys as a JWKS (RFC 7517, RFC 8037), as edges fetch it.
    pub fn jwks(&self) -> Jwks {
        Jwks {
            keys: self
                .keys()
                .map(|k| Jwk {
                    kty: "OKP",
                    crv: "Ed25519",
                    kid: k.id().to_owned(),
                    x: URL_SAFE_NO_PAD.encode(k.public_key()),
                    use_: "sig",
                    alg: "EdDSA",
                })
                .collect(),
        }
    }
}

/// A JSON Web Key Set of public keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Jwks {
    /// The keys: current, next, previous.
    pub keys: Vec<Jwk>,
}

/// One public key of a [`Jwks`]: an Ed25519 `OKP` key (RFC 8037).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Jwk {
    /// `OKP`.
    pub kty: &'static str,
    /// `Ed25519`.
    pub crv: &'static str,
    /// The key id tokens name.
    pub kid: String,
    /// The public key, base64url.
    pub x: String,
    /// `sig`.
    #[serde(rename = "use")]
    pub use_: &'static str,
    /// `EdDSA`.
    pub alg: &'static str,
}

fn refused(why: &'static str) -> ConfigError {
    ConfigError::InvalidEdgeKeys { why }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(byte: u8) -> String {
        URL_SAFE_NO_PAD.encode([byte; 32])
    }

    #[test]
    fn a_key_set_reads_from_text_and_refuses_what_is_not_one() {
        let text = format!(
            "# the edge keys\ncurrent k2 {}\n\nnext k3 {}; previous k1 {}",
            seed(2),
            seed(3),
            seed(1)
        );
        let set = EdgeKeySet::parse(&text).unwrap();
        let ids: Vec<&str> = set.keys().map(EdgeKey::id).collect();
        assert_eq!(ids, ["k2", "k3", "k1"]);
        assert_eq!(set.verifying("k1").map(EdgeKey::id), Some("k1"));
        assert_eq!(set.verifying("k3").map(EdgeKey::id), Some("k3"));
        assert!(set.verifying("k4").is_none());
        let jwks = serde_json::to_value(set.jwks()).unwrap();
        assert_eq!(jwks["keys"][0]["kid"], "k2");
        assert_eq!(jwks["keys"][0]["kty"], "OKP");
        assert_eq!(jwks["keys"][0]["use"], "sig");
        assert_eq!(jwks["keys"][0]["x"].as_str().unwrap().len(), 43);
        assert!(!format!("{set:?}").contains(&seed(2)));
        for bad in [
            String::new(),
            format!("next k3 {}", seed(3)),
            format!("current k2 {}\ncurrent k4 {}", seed(2), seed(4)),
            format!("current k2 {}\nnext k2 {}", seed(2), seed(3)),
            format!("current k2 {}=", seed(2)),
            format!("current k2 {}", URL_SAFE_NO_PAD.encode([2u8; 31])),
            format!("current k 2 {}", seed(2)),
            format!("boss k2 {}", seed(2)),
            format!("current {} {}", "k".repeat(33), seed(2)),
            format!("current k2 {} extra", seed(2)),
        ] {
            let e = EdgeKeySet::parse(&bad).unwrap_err();
            assert!(matches!(e, ConfigError::InvalidEdgeKeys { .. }), "{bad:?}");
            assert!(!e.to_string().contains(&seed(2)), "{e}");
        }
    }
}
