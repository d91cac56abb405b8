//! [`ConfigError`]: every way a configuration can be refused, in one enum. It is declared here,
//! below everything that checks a setting (the signing keys of `token` among them), and its
//! messages are written in `config`, next to the bounds they name.

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
    /// A setting the store keeps for every gateway is beyond what the store accepts:
    /// `max_queue_len` above 16 777 216 waiters, or `active_ttl`, `grant_ttl`, `queue_ttl` or
    /// `abandon_after` above seven days (the Redis store refuses such a call, so that no
    /// gateway can grow its memory or lifetimes without bound; see `docs/redis.md`).
    BeyondStoreLimit {
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
    /// The path prefix must start with `/`, not end with `/`, hold only URL path characters, and
    /// have no empty, `.` or `..` segment (no request reaching the room has one).
    /// The admin service's (`AdminBuilder::prefix`) may also not be `/rooms` or lie under it:
    /// its own paths start there.
    InvalidPathPrefix {
        /// The refused prefix.
        prefix: String,
    },
    /// A cookie name, path or domain has characters a cookie cannot carry.
    InvalidCookieSetting {
        /// The setting's name.
        setting: &'static str,
    },
    /// The cookie path does not cover the room's own endpoints (`path_prefix`): browsers would
    /// not send the room's cookies to its status endpoint, and a visitor would be sent round
    /// a first visit for ever.
    CookiePathMissesEndpoints {
        /// The cookie path.
        cookie_path: String,
        /// The room's endpoints' prefix.
        path_prefix: String,
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
    /// Two rooms given to [`WaitingRooms`](crate::routing::WaitingRooms), or to the admin
    /// service (`AdminBuilder::room`), have the same id.
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
    /// other than a trailing one, or a `?` or `#`, which no request's path holds), a host that
    /// is empty or no host (`https://shop.example`, an IPv6 address out of brackets), no
    /// methods.
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
    /// A page template names a placeholder that does not exist (see
    /// [`PageTemplate`](crate::response::PageTemplate) for the names).
    UnknownPlaceholder {
        /// The name between the braces.
        name: String,
    },
    /// The admin service's bearer token (`AdminBuilder::bearer_token`) is shorter than 32
    /// bytes. The token itself is never held here.
    AdminTokenTooShort {
        /// Its length in bytes.
        len: usize,
    },
    /// The admin service's bearer token has a character a client cannot send in an
    /// `Authorization` header (only visible ASCII, no spaces).
    AdminTokenNotSendable,
    /// The admin service was given neither `AdminBuilder::bearer_token` nor
    /// `AdminBuilder::without_token`.
    AdminAuthNotChosen,
    /// The admin service was given no room to control.
    AdminWithoutRooms,
    /// An [`AutoCapacity`](crate::auto::AutoCapacity) the controller cannot run with: `min`
    /// of zero or above `max`, a latency target of zero, an error budget outside (0, 1), a
    /// window outside 1 to 60 seconds.
    InvalidAutoCapacity {
        /// What is wrong, in words.
        why: &'static str,
    },
    /// [`auto_capacity`](crate::WaitingRoomBuilder::auto_capacity) is set, but the store
    /// cannot share the decision among gateways ([`Store::auto`](crate::store::Store::auto)
    /// answers `None`: it offers no [`AutoStore`](crate::store::AutoStore)).
    StoreWithoutAuto,
    /// Edge keys that cannot be read or used ([`EdgeKeySet::parse`](crate::edge::EdgeKeySet::parse),
    /// [`EdgeKey::from_seed`](crate::edge::EdgeKey::from_seed)): no current key, a role or id
    /// given twice, a seed that is not 32 bytes of base64url. The keys themselves are never held
    /// here.
    InvalidEdgeKeys {
        /// What is wrong, in words.
        why: &'static str,
    },
    /// [`EdgeTokens`](crate::edge::EdgeTokens) a room cannot issue: a lifetime shorter than the
    /// room's `refresh` or longer than an hour, a scope that is not path prefixes, claims too
    /// long for the format.
    InvalidEdgeTokens {
        /// What is wrong, in words.
        why: &'static str,
    },
    /// A language the pages cannot speak: a tag that is none
    /// ([`Languages`](crate::response::Languages)), or one with no built-in texts and none of
    /// the app's, or a default language the room does not offer.
    UnknownLanguage {
        /// The refused tag, as given (at most 35 characters of it).
        tag: String,
    },
}
