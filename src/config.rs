//! The room's configuration, its defaults, and the typed error a bad one gives.
//!
//! A [`RoomConfig`] is built and validated by [`WaitingRoomLayer::builder`](crate::WaitingRoomLayer::builder);
//! once built it never changes. The part of it that a [`Store`](crate::store::Store) needs travels
//! with every store call as a [`RoomPolicy`], so one store serves any number of rooms.
//!
//! | setting | default | meaning |
//! |---|---|---|
//! | `capacity` | required | visitors inside at once, counting granted but unclaimed slots |
//! | `admission_rate` | none | admissions per second, on top of capacity |
//! | `active_ttl` | 300 s | slot lifetime, extended by activity |
//! | `grant_ttl` | 30 s | time a promoted visitor has to come back and claim the slot |
//! | `queue_ttl` | 120 s | a waiter silent for longer is skipped when their turn comes |
//! | `refresh` | 15 s | age under which an admission token is trusted without a store call |
//! | `max_queue_len` | 100 000 | waiters beyond this get the "full" answer |
//! | `session_ttl` | 24 h | lifetime of the signed queue cookie |
//! | `fail_policy` | open | what new visitors get while the store is unreachable |
//! | `path_prefix` | `/__waitingroom` | where the room's own endpoints live |
//! | cookies | `wr_{room}_q` / `wr_{room}_a`, `Path=/`, `Secure`, `HttpOnly`, `SameSite=Lax` | |
//! | `session_header` / `token_header` | `waiting-room-session` / `waiting-room-token` | the same values as request and response headers, for apps without a cookie jar |
//! | `new_visitor_limit` | 60 a minute per client (IPv4 address or IPv6 /64) | new queue entries per IP; see [`limits`](crate::limits) |
//! | `poll_limit` | 30 per 10 s per session (3 a second on average) | store questions per session |
//! | `client_ip_header` / `client_ip_with` | the connection's peer address | where the client IP comes from |
//! | `bypass` | none | requests that skip the room entirely |
//! | `bind_tokens_to_network` | off | admission tokens only admit from the network (IPv4 /24, IPv6 /48) they were issued to |
//! | `proof_of_work` | off | a proof-of-work challenge (difficulty in bits, challenge TTL 5 min) before joining the line; see [`proof_of_work`](crate::proof_of_work) |

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;

use crate::clock::duration_ms;

/// Longest room id accepted.
pub const MAX_ROOM_ID_LEN: usize = 64;

/// What new visitors get while the store cannot be reached. Visitors holding a valid admission
/// token are let through either way: their check needs no store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailPolicy {
    /// Let new visitors in, without a slot: the site stays up, the queue is not enforced while
    /// the store is down. Nothing in the store is emptied.
    #[default]
    Open,
    /// Answer new visitors with a "try again soon" response.
    Closed,
}

/// The `SameSite` attribute of the room's cookies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SameSite {
    /// Sent on top-level navigation from other sites, not on cross-site subrequests or POSTs.
    #[default]
    Lax,
    /// Sent only on same-site requests.
    Strict,
    /// Sent everywhere; needs `Secure`.
    None,
}

impl SameSite {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SameSite::Lax => "Lax",
            SameSite::Strict => "Strict",
            SameSite::None => "None",
        }
    }
}

/// Cookie attributes of the room. Cookies are always `HttpOnly`.
#[derive(Clone, Debug)]
pub struct CookieSettings {
    pub(crate) queue_name: String,
    pub(crate) admission_name: String,
    pub(crate) path: String,
    pub(crate) domain: Option<String>,
    pub(crate) secure: bool,
    pub(crate) same_site: SameSite,
}

impl CookieSettings {
    /// Name of the signed queue cookie (the visitor's place in line).
    pub fn queue_name(&self) -> &str {
        &self.queue_name
    }
    /// Name of the admission token cookie.
    pub fn admission_name(&self) -> &str {
        &self.admission_name
    }
    /// `Path` attribute.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// `Domain` attribute, if set.
    pub fn domain(&self) -> Option<&str> {
        self.domain.as_deref()
    }
    /// Whether the `Secure` attribute is set.
    pub fn secure(&self) -> bool {
        self.secure
    }
    /// The `SameSite` attribute.
    pub fn same_site(&self) -> SameSite {
        self.same_site
    }
}

/// What a store needs to know about a room to decide: sent along with every store call.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RoomPolicy {
    /// The room id (`[A-Za-z0-9_-]{1,64}`).
    pub room: Arc<str>,
    /// Visitors inside at once, counting granted but unclaimed slots.
    pub capacity: u32,
    /// Admissions per second, if limited.
    pub admission_rate: Option<u32>,
    /// Slot lifetime in milliseconds, extended by activity.
    pub active_ttl_ms: u64,
    /// Time a promoted visitor has to claim the slot, in milliseconds.
    pub grant_ttl_ms: u64,
    /// A waiter silent for longer is skipped when their turn comes, in milliseconds.
    pub queue_ttl_ms: u64,
    /// Waiters beyond this get [`Decision::Full`](crate::store::Decision::Full).
    pub max_queue_len: u64,
}

impl RoomPolicy {
    /// A policy with the documented defaults, for stores used directly (tests, tools).
    pub fn new(room: &str, capacity: u32) -> Self {
        Self {
            room: Arc::from(room),
            capacity,
            admission_rate: None,
            active_ttl_ms: duration_ms(defaults::ACTIVE_TTL),
            grant_ttl_ms: duration_ms(defaults::GRANT_TTL),
            queue_ttl_ms: duration_ms(defaults::QUEUE_TTL),
            max_queue_len: defaults::MAX_QUEUE_LEN,
        }
    }

    /// Sets the admission rate per second.
    pub fn with_admission_rate(mut self, per_second: Option<u32>) -> Self {
        self.admission_rate = per_second;
        self
    }

    /// Sets the slot, grant and queue lifetimes.
    pub fn with_ttls(mut self, active: Duration, grant: Duration, queue: Duration) -> Self {
        self.active_ttl_ms = duration_ms(active);
        self.grant_ttl_ms = duration_ms(grant);
        self.queue_ttl_ms = duration_ms(queue);
        self
    }

    /// Sets the longest line.
    pub fn with_max_queue_len(mut self, max: u64) -> Self {
        self.max_queue_len = max;
        self
    }
}

/// A validated room configuration; see the [module docs](self) for the settings and defaults.
#[derive(Clone, Debug)]
pub struct RoomConfig {
    pub(crate) policy: RoomPolicy,
    pub(crate) refresh: Duration,
    pub(crate) session_ttl: Duration,
    pub(crate) fail_policy: FailPolicy,
    pub(crate) cookies: CookieSettings,
    pub(crate) path_prefix: String,
    pub(crate) session_header: HeaderName,
    pub(crate) token_header: HeaderName,
    pub(crate) bind_tokens_to_network: bool,
}

impl RoomConfig {
    /// The room id.
    pub fn room(&self) -> &str {
        &self.policy.room
    }
    /// What the store is told about the room.
    pub fn policy(&self) -> &RoomPolicy {
        &self.policy
    }
    /// Age under which an admission token is trusted without a store call.
    pub fn refresh(&self) -> Duration {
        self.refresh
    }
    /// Lifetime of the signed queue cookie.
    pub fn session_ttl(&self) -> Duration {
        self.session_ttl
    }
    /// What new visitors get while the store is unreachable.
    pub fn fail_policy(&self) -> FailPolicy {
        self.fail_policy
    }
    /// Cookie names and attributes.
    pub fn cookies(&self) -> &CookieSettings {
        &self.cookies
    }
    /// Where the room's own endpoints live (`{prefix}/{room}/status`, `{prefix}/{room}/leave`).
    pub fn path_prefix(&self) -> &str {
        &self.path_prefix
    }
    /// The header that carries the signed queue value (the place in line) for clients without
    /// cookies; see [`defaults::SESSION_HEADER`].
    pub fn session_header(&self) -> &HeaderName {
        &self.session_header
    }
    /// The header that carries the signed admission token for clients without cookies; see
    /// [`defaults::TOKEN_HEADER`].
    pub fn token_header(&self) -> &HeaderName {
        &self.token_header
    }
    /// Whether admission tokens are bound to the visitor's network (IPv4 /24, IPv6 /48); see
    /// [`bind_tokens_to_network`](crate::WaitingRoomBuilder::bind_tokens_to_network).
    pub fn bind_tokens_to_network(&self) -> bool {
        self.bind_tokens_to_network
    }
}

/// The documented defaults.
pub mod defaults {
    use std::time::Duration;

    /// Slot lifetime, extended by activity.
    pub const ACTIVE_TTL: Duration = Duration::from_secs(300);
    /// Time a promoted visitor has to come back and claim the slot.
    pub const GRANT_TTL: Duration = Duration::from_secs(30);
    /// A waiter silent for longer is skipped when their turn comes.
    pub const QUEUE_TTL: Duration = Duration::from_secs(120);
    /// Age under which an admission token is trusted without any store call.
    pub const REFRESH: Duration = Duration::from_secs(15);
    /// Lifetime of the signed queue cookie.
    pub const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);
    /// Longest line.
    pub const MAX_QUEUE_LEN: u64 = 100_000;
    /// Where the room's own endpoints live.
    pub const PATH_PREFIX: &str = "/__waitingroom";
    /// Request and response header with the signed queue value (the visitor's place in line),
    /// for apps without a cookie jar. The room reads it when the queue cookie is missing, and
    /// sends it back, with the value it issues, to clients that sent none of its cookies.
    pub const SESSION_HEADER: &str = "waiting-room-session";
    /// Request and response header with the signed admission token, for apps without a cookie
    /// jar; read and sent like [`SESSION_HEADER`].
    pub const TOKEN_HEADER: &str = "waiting-room-token";
}

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
    /// No signing key was given.
    MissingSigningKey,
    /// A secret is shorter than [`MIN_SECRET_LEN`](crate::signing::MIN_SECRET_LEN) bytes.
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
    /// A header name is not a valid HTTP header name, or the session and token headers are the
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
    /// [`MIN_DIFFICULTY`](crate::proof_of_work::MIN_DIFFICULTY) to
    /// [`MAX_DIFFICULTY`](crate::proof_of_work::MAX_DIFFICULTY) bits, or its challenge TTL is
    /// under a second.
    InvalidProofOfWork,
    /// The system random source failed.
    Random,
}

impl fmt::Display for ConfigError {
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
            ConfigError::MissingSigningKey => f.write_str("a signing key is required"),
            ConfigError::SecretTooShort { key_id, len } => write!(
                f,
                "secret of key {key_id:?} is {len} bytes; at least {} are required",
                crate::signing::MIN_SECRET_LEN
            ),
            ConfigError::InvalidSecretHex { key_id } => {
                write!(f, "secret of key {key_id:?} is not valid hex")
            }
            ConfigError::InvalidKeyId { id } => write!(
                f,
                "invalid key id {id:?}: use 1 to {} characters from [A-Za-z0-9_-]",
                crate::signing::MAX_KEY_ID_LEN
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
                crate::proof_of_work::MIN_DIFFICULTY,
                crate::proof_of_work::MAX_DIFFICULTY
            ),
            ConfigError::Random => f.write_str("the system random source failed"),
        }
    }
}

impl Error for ConfigError {}

pub(crate) fn valid_room_id(room: &str) -> bool {
    !room.is_empty()
        && room.len() <= MAX_ROOM_ID_LEN
        && room
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

pub(crate) fn valid_path_prefix(prefix: &str) -> bool {
    prefix.len() > 1
        && prefix.starts_with('/')
        && !prefix.ends_with('/')
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.~".contains(&b))
}

/// Cookie names are RFC 6265 tokens (long enough for `wr_` + the longest room id + `_q`).
pub(crate) fn valid_cookie_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Path and domain attribute values: visible ASCII without `;` or `,`.
pub(crate) fn valid_cookie_attr(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| (0x21..0x7f).contains(&b) && b != b';' && b != b',')
}
