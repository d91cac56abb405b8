//! Admission a CDN edge can check: besides the gateway's own admission cookie (HMAC, checked
//! only by gateways), an admitted visitor holds a short-lived token signed with Ed25519, which
//! an edge verifies with the room's public keys and can never mint.
//!
//! - [`EdgeTokens`], given to [`edge_tokens`](crate::WaitingRoomBuilder::edge_tokens): the
//!   [`EdgeKeySet`] (current, next, previous), the tokens' lifetime (60 s by default, never
//!   shorter than the room's `refresh`) and the routes an admission covers (`/` by default).
//! - The token ([`EdgeClaims`], format `wr1`): set with every admission token the room issues
//!   (at admission and at each refresh, never per request), as the cookie
//!   `{cookie prefix}_{room}_e` (and the `waiting-room-edge-token` header for clients that use
//!   headers). It expires with the slot, or at its lifetime, whichever comes first: a ban, a
//!   leave or the end of the slot takes effect at the edge within that lifetime.
//! - The public keys as a JWKS at `{prefix}/{room}/keys`, for edges to fetch
//!   ([`EdgeKeySet::jwks`]).
//! - A verifier for edge runtimes, `edge/verify.mjs`, checks the same tokens by the same rules
//!   as [`EdgeClaims::verify`]; `docs/edge.md` has the format byte by byte, the threat model
//!   and rotation step by step.
//!
//! ```
//! use std::time::Duration;
//! use tower_waiting_room::edge::{EdgeKey, EdgeKeySet, EdgeTokens};
//! use tower_waiting_room::WaitingRoomLayer;
//!
//! let keys = EdgeKeySet::new(EdgeKey::generate("2026-12").unwrap());
//! let layer = WaitingRoomLayer::builder("shop")
//!     .capacity(100)
//!     .secret("a secret of at least thirty-two bytes!")
//!     .edge_tokens(EdgeTokens::new(keys).ttl(Duration::from_secs(60)).scope(["/shop"]))
//!     .build();
//! assert!(layer.is_ok());
//! ```

mod keys;
mod token;

use std::sync::Arc;
use std::time::Duration;

pub use self::keys::{EdgeKey, EdgeKeySet, Jwk, Jwks, MAX_EDGE_KEY_ID_LEN};
pub use self::token::{
    EdgeClaims, EDGE_FORMAT, EDGE_SKEW_SECS, MAX_EDGE_CLAIMS_LEN, MAX_EDGE_TOKEN_LEN,
};
use crate::session::SessionId;
use crate::vocab::ConfigError;

/// The response header that carries the edge token to clients that use headers instead of
/// cookies.
pub const EDGE_TOKEN_HEADER: &str = "waiting-room-edge-token";
/// The longest lifetime of an edge token.
pub const MAX_EDGE_TTL: Duration = Duration::from_secs(3_600);

/// A room's edge tokens: the keys that sign them, how long each lives, and the routes an
/// admission covers.
#[derive(Clone, Debug)]
pub struct EdgeTokens {
    keys: Arc<EdgeKeySet>,
    ttl: Duration,
    scope: Vec<String>,
}

impl EdgeTokens {
    /// Tokens signed with `keys`' current key, living 60 s, covering the whole site (`/`).
    pub fn new(keys: EdgeKeySet) -> Self {
        Self {
            keys: Arc::new(keys),
            ttl: Duration::from_secs(60),
            scope: vec!["/".to_owned()],
        }
    }

    /// How long a token lives (it ends with the slot if that is sooner): at least the room's
    /// `refresh` (so that the request an edge sends back to the gateway when the token ends
    /// refreshes the admission, and with it the token), at most an hour. A ban, a leave or
    /// the end of the slot reaches the edge within it.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The path prefixes an admission covers at the edge, each starting with `/` (`/shop`
    /// covers `/shop` and `/shop/...`, not `/shopping`); the whole site (`/`) by default.
    pub fn scope<I, S>(mut self, prefixes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scope = prefixes.into_iter().map(Into::into).collect();
        self
    }

    /// The keys.
    pub fn keys(&self) -> &EdgeKeySet {
        &self.keys
    }

    /// The lifetime.
    pub fn get_ttl(&self) -> Duration {
        self.ttl
    }

    /// The scope.
    pub fn get_scope(&self) -> &[String] {
        &self.scope
    }

    /// `Err` with what is wrong when a room with `refresh` cannot issue these tokens.
    pub(crate) fn check(&self, room: &str, refresh: Duration) -> Result<(), ConfigError> {
        let why = if self.ttl < refresh {
            "the tokens' lifetime is shorter than the room's refresh"
        } else if self.ttl > MAX_EDGE_TTL || self.ttl < Duration::from_secs(1) {
            "the tokens' lifetime must be from 1 second to an hour"
        } else if self.scope.is_empty() || !self.scope.iter().all(|p| token::is_scope_prefix(p)) {
            "the scope must be path prefixes, each starting with / and without spaces"
        } else if longest_claims(room, &self.scope) > MAX_EDGE_CLAIMS_LEN || room.len() > 64 {
            "the room id and scope do not fit a token's 512 bytes of claims"
        } else if self.keys.shares_an_id() {
            "two keys of the set have the same id"
        } else {
            return Ok(());
        };
        Err(ConfigError::InvalidEdgeTokens { why })
    }

    /// The token of an admission of `session` to `room`, issued at `now_ms`, whose slot ends
    /// at `slot_expires_ms`.
    pub(crate) fn issue(
        &self,
        room: &str,
        session: SessionId,
        now_ms: u64,
        slot_expires_ms: u64,
    ) -> (String, Duration) {
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let ends_ms = now_ms.saturating_add(ttl_ms).min(slot_expires_ms);
        let issued_at = now_ms / 1000;
        let expires_at = (ends_ms / 1000).max(issued_at + 1);
        let claims = EdgeClaims {
            room: room.to_owned(),
            session,
            issued_at,
            expires_at,
            scope: self.scope.clone(),
        };
        let lives = Duration::from_secs(expires_at - issued_at);
        (claims.sign(self.keys.current()), lives)
    }
}

/// The longest claims text a room signs: its id, a session, two times of 12 digits, the scope,
/// with their separators.
fn longest_claims(room: &str, scope: &[String]) -> usize {
    room.len() + 1 + 32 + 1 + 12 + 1 + 12 + 1 + scope.iter().map(|p| p.len() + 1).sum::<usize>()
}
