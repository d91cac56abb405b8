//! [`ConfigError`]'s messages, next to the bounds they name. The enum itself is declared on the
//! ground floor (`vocab`), so that the signing keys below `config` can answer it too.

use std::error::Error;
use std::fmt;

use super::validate::valid_path_prefix;
use super::{defaults, MAX_ROOM_ID_LEN, MIN_ADMIN_TOKEN_LEN};
use crate::vocab::ConfigError;

impl fmt::Display for ConfigError {
    // Long, but flat: one arm (one message) per variant.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::InvalidRoomId { room } => write!(
                f,
                "invalid room id {room:?}: use 1 to {MAX_ROOM_ID_LEN} characters from [A-Za-z0-9_-]"
            ),
            ConfigError::MissingCapacity => f.write_str("capacity must be set and at least 1"),
            ConfigError::ZeroAdmissionRate => {
                f.write_str("admission_rate must be at least 1 per second (or unset)")
            }
            ConfigError::ZeroMaxQueueLen => f.write_str("max_queue_len must be at least 1"),
            ConfigError::InvalidDuration { setting } => {
                write!(
                    f,
                    "{setting} must be longer than zero and at most ~584 million years"
                )
            }
            ConfigError::BeyondStoreLimit { setting } => write!(
                f,
                "{setting} is beyond what the store keeps (at most 16777216 waiters, or 7 days)"
            ),
            ConfigError::RefreshNotShorterThanActiveTtl => {
                f.write_str("refresh must be shorter than active_ttl")
            }
            ConfigError::AbandonAfterShorterThanQueueTtl => {
                f.write_str("abandon_after must be at least queue_ttl")
            }
            ConfigError::MissingSigningKey => f.write_str(
                "a signing key is required: set .secret(..) (32 bytes or more) or .signing_key(..)",
            ),
            // A user who only called `.secret(..)` never named a key: do not show them "k1".
            ConfigError::SecretTooShort { key_id, len } if key_id == defaults::KEY_ID => write!(
                f,
                "the secret is {len} bytes; at least {} are required",
                crate::token::MIN_SECRET_LEN
            ),
            ConfigError::SecretTooShort { key_id, len } => write!(
                f,
                "the secret of signing key {key_id:?} is {len} bytes; at least {} are required",
                crate::token::MIN_SECRET_LEN
            ),
            ConfigError::InvalidSecretHex { key_id } if key_id == defaults::KEY_ID => {
                f.write_str("the secret is not valid hex")
            }
            ConfigError::InvalidSecretHex { key_id } => {
                write!(f, "the secret of signing key {key_id:?} is not valid hex")
            }
            ConfigError::InvalidKeyId { id } => write!(
                f,
                "invalid key id {id:?}: use 1 to {} characters from [A-Za-z0-9_-]",
                crate::token::MAX_KEY_ID_LEN
            ),
            ConfigError::DuplicateKeyId { id } if id == defaults::KEY_ID => write!(
                f,
                "current and previous keys share the id {id:?} (the id .secret(..) gives): \
                 name the keys with SigningKey::new"
            ),
            ConfigError::DuplicateKeyId { id } => {
                write!(f, "current and previous keys share the id {id:?}")
            }
            // Only the admin service refuses a prefix a room takes: its own paths start there.
            ConfigError::InvalidPathPrefix { prefix } if valid_path_prefix(prefix) => write!(
                f,
                "admin prefix {prefix:?}: the admin service's own paths start with /rooms; \
                 mount it elsewhere, such as \"/admin\""
            ),
            ConfigError::InvalidPathPrefix { prefix } => write!(
                f,
                "invalid path prefix {prefix:?}: start with '/', do not end with '/', and \
                 no empty, '.' or '..' segment"
            ),
            ConfigError::InvalidCookieSetting { setting } => {
                write!(f, "cookie {setting} has characters a cookie cannot carry")
            }
            ConfigError::CookiePathMissesEndpoints {
                cookie_path,
                path_prefix,
            } => write!(
                f,
                "cookie path {cookie_path:?} does not cover the room's endpoints under \
                 {path_prefix:?}: browsers would not send the room's cookies there; give the \
                 room a path_prefix under it (or a cookie path over both)"
            ),
            ConfigError::SameSiteNoneNeedsSecure => {
                f.write_str("SameSite=None needs Secure cookies")
            }
            ConfigError::InvalidHeaderName { setting } => write!(
                f,
                "{setting} is not a valid header name, or both headers have the same name"
            ),
            ConfigError::InvalidRateLimit { setting } => write!(
                f,
                "{setting} must allow at least 1 event per window of at least 1 ms (or be None)"
            ),
            ConfigError::InvalidProofOfWork => write!(
                f,
                "proof_of_work difficulty must be {} to {} bits, with a challenge TTL of at least 1 s",
                crate::defences::proof_of_work::MIN_DIFFICULTY,
                crate::defences::proof_of_work::MAX_DIFFICULTY
            ),
            ConfigError::DuplicateRoom { room } => {
                write!(f, "two rooms given have the id {room:?}")
            }
            ConfigError::SharedCookieName { name } => write!(
                f,
                "two rooms use the cookie name {name:?}: give one of them its own cookie_name"
            ),
            ConfigError::UnknownGateRoom { room } => write!(
                f,
                "a gate names the room {room:?}, which was not given to the builder"
            ),
            ConfigError::InvalidRule { rule } => write!(
                f,
                "invalid rule ({rule}): paths start with '/', may end in '*' and hold no '?' \
                 or '#' (a request's path has neither), hosts are names or addresses (no \
                 scheme, no path), and at least one method"
            ),
            ConfigError::OverlappingRules {
                first_room,
                first_rule,
                second_room,
                second_rule,
            } => write!(
                f,
                "the rule for room {first_room:?} ({first_rule}) and the rule for room \
                 {second_room:?} ({second_rule}) can match the same request: make them disjoint"
            ),
            ConfigError::StoreWithoutTickets => f.write_str(
                "single_use_tickets needs a store that keeps tickets (Store::tickets answers a \
                 TicketStore), such as the embedded store or the Redis store",
            ),
            ConfigError::NestedEndpoints {
                outer_room,
                inner_room,
            } => write!(
                f,
                "the endpoints of room {inner_room:?} lie under those of room {outer_room:?}: \
                 give the rooms path prefixes that do not nest"
            ),
            ConfigError::ClosesBeforeOpening => f.write_str("closes_at must be after opens_at"),
            ConfigError::InvalidNetwork { network } => write!(
                f,
                "risky_networks: {network:?} is neither an address nor a range such as \
                 203.0.113.0/24 or 2001:db8::/32 (with no bits set past the prefix length)"
            ),
            ConfigError::UnknownPlaceholder { name } => {
                write!(f, "unknown placeholder {{{name}}} in a page template")
            }
            ConfigError::AdminTokenTooShort { len } => write!(
                f,
                "admin bearer token: {len} bytes, at least {MIN_ADMIN_TOKEN_LEN} are needed"
            ),
            ConfigError::AdminTokenNotSendable => f.write_str(
                "admin bearer token: only visible ASCII characters (no spaces) can be sent in \
                 an Authorization header",
            ),
            ConfigError::AdminAuthNotChosen => f.write_str(
                "admin service: choose bearer_token(..), or without_token() if your own auth \
                 layer is in front of it",
            ),
            ConfigError::AdminWithoutRooms => f.write_str("admin service: no room to control"),
            ConfigError::InvalidAutoCapacity { why } => write!(f, "auto capacity: {why}"),
            ConfigError::InvalidEdgeKeys { why } => write!(f, "edge keys: {why}"),
            ConfigError::InvalidEdgeTokens { why } => write!(f, "edge tokens: {why}"),
            ConfigError::UnknownLanguage { tag } => write!(
                f,
                "language {tag:?}: not one of the built-in languages ({}) and no texts given \
                 for it, or a default language the room does not offer",
                crate::response::BUILT_IN_LANGUAGES.join(", ")
            ),
            ConfigError::StoreWithoutAuto => f.write_str(
                "auto_capacity needs a store that shares the decision among gateways \
                 (Store::auto answers an AutoStore), such as the embedded store or the Redis \
                 store",
            ),
        }
    }
}

impl Error for ConfigError {}
