//! The signed matching session: who a visitor is to matching (the `tower-waiting-room-matching`
//! crate) when the application does not identify its users. The same signed format as the queue cookie, of its
//! own kind (`m1`), so neither ever verifies as the other.

use http::{HeaderMap, HeaderValue};

use super::format::{self, Claims, ValueKind};
use super::keys::Keyring;
use crate::config::{CookieName, CookieSettings};
use crate::cookies::{self, Wanted};
use crate::session::SessionId;
use crate::SameSite;

/// The signed session cookie that names users to matching when the application does not: its
/// keys, its scope (what a value is signed for) and its cookie (`Path=/`, `SameSite=Lax`,
/// `HttpOnly`, `Secure` unless told otherwise). Not public API (`__private`): matching's
/// service reaches the room's cookie reader and signer through it.
#[derive(Clone, Debug)]
pub struct SessionCookie {
    keys: Keyring,
    scope: String,
    cookie: CookieSettings,
}

impl SessionCookie {
    /// The cookie `name`, signed with `keys` for `scope`; `Secure` unless `secure` is false.
    pub fn new(keys: Keyring, scope: impl Into<String>, name: &str, secure: bool) -> Self {
        Self {
            keys,
            scope: scope.into(),
            cookie: CookieSettings {
                queue_name: CookieName::new(name.to_owned()),
                admission_name: CookieName::new(String::new()),
                ticket_name: CookieName::new(String::new()),
                edge_name: CookieName::new(String::new()),
                path: "/".to_owned(),
                domain: None,
                secure,
                same_site: SameSite::Lax,
            },
        }
    }

    /// The session of the first valid, unexpired cookie of this name in `headers`, if any.
    pub fn read(&self, headers: &HeaderMap, now_ms: u64) -> Option<SessionId> {
        let [found] = cookies::read(
            headers,
            [Wanted {
                name: &self.cookie.queue_name,
                could_be,
            }],
        );
        found.find_valid(|v| verify(&self.keys, &self.scope, v, now_ms))
    }

    /// The `Set-Cookie` value of `session`, valid for `ttl_ms` from `now_ms`.
    pub fn set(&self, session: SessionId, now_ms: u64, ttl_ms: u64) -> HeaderValue {
        let value = sign(&self.keys, &self.scope, session, now_ms, now_ms + ttl_ms);
        cookies::set_cookie(
            &self.cookie,
            &self.cookie.queue_name,
            value.as_bytes(),
            ttl_ms / 1000,
        )
    }
}

/// Whether `value` could be a matching session at all (prefix and length): the cheap test
/// before any verification.
pub(crate) fn could_be(value: &str) -> bool {
    format::could_be(ValueKind::MatchSession, value)
}

/// `session`, signed for the matching service `scope` until `expires_at_ms`.
pub(crate) fn sign(
    keys: &Keyring,
    scope: &str,
    session: SessionId,
    now_ms: u64,
    expires_at_ms: u64,
) -> String {
    let claims = Claims {
        session,
        issued_at_ms: now_ms,
        expires_at_ms,
    };
    format::sign(keys, ValueKind::MatchSession, scope, &claims)
}

/// The session in `value` if it is a valid, unexpired matching session of `scope`; `None`
/// for anything else (tampered, expired, another kind or scope), exactly like no cookie.
pub(crate) fn verify(keys: &Keyring, scope: &str, value: &str, now_ms: u64) -> Option<SessionId> {
    format::verify_unexpired(keys, ValueKind::MatchSession, scope, value, now_ms).map(|c| c.session)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::SigningKey;

    #[test]
    fn a_session_verifies_in_its_scope_only_and_any_flipped_byte_fails() {
        let keys = Keyring::new(SigningKey::new("k", [7u8; 32]).unwrap());
        let session = SessionId::from_bytes([9; 16]);
        let value = sign(&keys, "lobby", session, 1_000, 2_000);
        assert!(could_be(&value));
        assert_eq!(verify(&keys, "lobby", &value, 1_500), Some(session));
        assert_eq!(verify(&keys, "other", &value, 1_500), None);
        assert_eq!(verify(&keys, "lobby", &value, 2_000), None, "expired");
        for i in 0..value.len() {
            let mut bytes = value.clone().into_bytes();
            bytes[i] ^= 0x01;
            if let Ok(flipped) = String::from_utf8(bytes) {
                assert_eq!(verify(&keys, "lobby", &flipped, 1_500), None, "byte {i}");
            }
        }
    }
}
