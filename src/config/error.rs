//! [`ConfigError`]: every way a configuration can be refused, in one enum.

use std::error::Error;
use std::fmt;

use super::defaults;
use super::MAX_ROOM_ID_LEN;
use crate::token::KeyError;

/// A configuration the builder refused. Nothing is ever half-built: fix the setting and build
/// again.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The room id is empty, too long, or has characters outside `[A-Za-z0-9_-]`.
    InvalidRoomId {
        /// The refused id.
        room: String,
    },
    /// No capacity was set, or it is zero.
    MissingCapacity,
    /// The admission rate is zero (leave it unset for no limit).
    ZeroAdmissionRate,
    /// `max_queue_len` is zero.
    ZeroMaxQueueLen,
    /// A duration is zero or too large to count in milliseconds.
    InvalidDuration {
        /// The setting's name.
        setting: &'static str,
    },
    /// `refresh` must be shorter than `active_ttl`, or an admission would outlive its slot
    /// without ever being checked.
    RefreshNotShorterThanActiveTtl,
    /// `abandon_after` must be at least `queue_ttl`: a waiter is skipped at their turn after
    /// `queue_ttl` of silence, and dropped from anywhere in the line only after `abandon_after`.
    AbandonAfterShorterThanQueueTtl,
    /// No signing key was given.
    MissingSigningKey,
    /// A secret is shorter than [`MIN_SECRET_LEN`](crate::config::MIN_SECRET_LEN) bytes.
    SecretTooShort {
        /// Id of the key.
        key_id: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A hex secret did not decode.
    InvalidSecretHex {
        /// Id of the key.
        key_id: String,
    },
    /// A key id is empty, too long or has characters outside `[A-Za-z0-9_-]`.
    InvalidKeyId {
        /// The refused id.
        id: String,
    },
    /// The current and previous keys have the same id.
    DuplicateKeyId {
        /// The id.
        id: String,
    },
    /// The path prefix must start with `/`, not end with `/`, and hold only URL path characters.
    InvalidPathPrefix {
        /// The refused prefix.
        prefix: String,
    },
    /// A cookie name, path or domain has characters a cookie cannot carry.
    InvalidCookieSetting {
        /// The setting's name.
        setting: &'static str,
    },
    /// `SameSite=None` without `Secure` is refused by browsers.
    SameSiteNoneNeedsSecure,
    /// A header name is not a valid HTTP header name, or the queue and token headers are the
    /// same.
    InvalidHeaderName {
        /// The setting's name.
        setting: &'static str,
    },
    /// A rate limit allows zero events, or over a zero (or absurdly long) window; use `None` to
    /// turn a limit off.
    InvalidRateLimit {
        /// The setting's name.
        setting: &'static str,
    },
    /// The proof-of-work difficulty is outside
    /// [`MIN_DIFFICULTY`](crate::defences::proof_of_work::MIN_DIFFICULTY) to
    /// [`MAX_DIFFICULTY`](crate::defences::proof_of_work::MAX_DIFFICULTY) bits, or its challenge TTL is
    /// under a second.
    InvalidProofOfWork,
    /// Two rooms given to [`WaitingRooms`](crate::routing::WaitingRooms) have the same id.
    DuplicateRoom {
        /// The id.
        room: String,
    },
    /// Two rooms given to [`WaitingRooms`](crate::routing::WaitingRooms) use the same cookie
    /// name: a browser keeps one value per name, so one room's cookie would overwrite the
    /// other's. Give one of them its own [`cookie_name`](crate::WaitingRoomBuilder::cookie_name).
    SharedCookieName {
        /// The cookie name.
        name: String,
    },
    /// A gate names a room that was not given to the builder.
    UnknownGateRoom {
        /// The room id the gate names.
        room: String,
    },
    /// A [`Rule`](crate::routing::Rule) is malformed: a path not starting with `/` (or with a `*`
    /// other than a trailing one), an empty host, no methods.
    InvalidRule {
        /// The rule, in words.
        rule: String,
    },
    /// Two rules of different rooms (or two gates to different rooms) can match the same
    /// request, so which room it goes to would depend on their order.
    OverlappingRules {
        /// The room of the first rule.
        first_room: String,
        /// The first rule, in words.
        first_rule: String,
        /// The room of the second rule.
        second_room: String,
        /// The second rule, in words.
        second_rule: String,
    },
    /// [`single_use_tickets`](crate::WaitingRoomBuilder::single_use_tickets) is on, but the
    /// store does not keep tickets ([`Store::tickets`](crate::store::Store::tickets) answers
    /// `None`: it offers no [`TicketStore`](crate::store::TicketStore)).
    StoreWithoutTickets,
    /// One room's endpoints (`{prefix}/{room}/`) lie under another's, so requests for them
    /// would reach the other room: give the rooms path prefixes that do not nest.
    NestedEndpoints {
        /// The room whose endpoints hold the other's.
        outer_room: String,
        /// The room whose endpoints would be shadowed.
        inner_room: String,
    },
    /// `closes_at` is not after `opens_at`: the event would never take anyone.
    ClosesBeforeOpening,
    /// An entry of [`risky_networks`](crate::WaitingRoomBuilder::risky_networks) is neither an
    /// address nor a range in CIDR notation, or has bits set past its prefix length.
    InvalidNetwork {
        /// The refused entry.
        network: String,
    },
}

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
            ConfigError::InvalidPathPrefix { prefix } => write!(
                f,
                "invalid path prefix {prefix:?}: start with '/', do not end with '/'"
            ),
            ConfigError::InvalidCookieSetting { setting } => {
                write!(f, "cookie {setting} has characters a cookie cannot carry")
            }
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
                write!(f, "two different rooms have the id {room:?}")
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
                "invalid rule ({rule}): paths start with '/' and may end in '*', hosts are \
                 names or addresses, and at least one method"
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
        }
    }
}

impl Error for ConfigError {}

impl From<KeyError> for ConfigError {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::InvalidId { id } => ConfigError::InvalidKeyId { id },
            KeyError::SecretTooShort { key_id, len } => ConfigError::SecretTooShort { key_id, len },
            KeyError::InvalidHex { key_id } => ConfigError::InvalidSecretHex { key_id },
        }
    }
}
