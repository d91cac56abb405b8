//! [`Settings`]: every setting of a room that is plain data, declared once, with its doc and
//! its default, by the [`settings!`] list below. The list makes the struct that the builder
//! holds and that a settings file or the environment deserializes ([`RoomFile`](super::RoomFile)),
//! under the same names; the builder's setter of each setting, with the doc written here (so
//! the doc is the builder method's); the getters of [`RoomConfig`](super::RoomConfig) that
//! are public API; and [`DECLARED`], from which [`table`](super::table) renders the settings
//! table of `docs/configuration.md` (the first sentence of each doc is its meaning there). A
//! new setting is an entry here, its check in [`validate`](super::validate), and the code that
//! uses it (reading `config.settings`).

use std::time::{Duration, SystemTime};

use serde::Deserialize;

use super::{defaults, readable, FailPolicy, SameSite};
use crate::auto::AutoCapacity;
use crate::defences::{ProofOfWork, RateLimit};

/// One declared setting, as the settings table shows it (see [`table`](super::table)).
pub(crate) struct Declared {
    /// The field's name: the builder method, the file key.
    pub(crate) name: &'static str,
    /// The field's type, as written in the declaration.
    pub(crate) ty: &'static str,
    /// The `serde` attributes of the field (how a file reads it), as written; empty for a
    /// plain field.
    pub(crate) serde: &'static str,
    /// The doc of the builder's setter; its first sentence is the table's meaning.
    pub(crate) doc: &'static str,
    /// What the table says for a default that is unset (`None`, an empty list): required,
    /// none, or the value it resolves to.
    pub(crate) unset: Option<&'static str>,
    /// The default as a file writes it (`None`: unset), from [`Settings::default`].
    pub(crate) written: fn(&Settings) -> Option<String>,
}

/// Declares the settings. Each entry is
///
/// ```text
/// /// The doc of the builder's setter: its first sentence is its meaning in the settings
/// /// table, later ones say the default.
/// #[serde(...)]                  // how a file or the environment reads it, if not plain
/// name: Type = default,
///     unset "text",                     // the table's default when `default` is unset
///     set(param: ParamType) => value,   // the setter: `self.settings.name = value`
///     get { pub fn name(&self) ... },   // a getter of `RoomConfig`, if it has one
/// ;
/// ```
///
/// An entry without `set` has a handwritten setter in the builder (its doc then stays here, in
/// the source and the settings table only). It makes [`Settings`] and its [`Default`], the
/// getters, [`DECLARED`], and `builder_setters!`, which the builder invokes in its `impl` to get
/// the setters (so that the settings do not depend on the builder).
macro_rules! settings {
    (@setter [$($doc:tt)*] $name:ident ($param:ident: $pty:ty) => $set:expr) => {
        $($doc)*
        pub fn $name(mut self, $param: $pty) -> Self {
            self.settings.$name = $set;
            self
        }
    };
    (@setter [$($doc:tt)*] $name:ident) => {};
    (@unset) => { None };
    (@unset $unset:literal) => { Some($unset) };
    ($(
        $(#[doc = $doc:literal])+
        $(#[serde($($serde:tt)*)])*
        $name:ident: $ty:ty = $default:expr
        $(, unset $unset:literal)?
        $(, set($param:ident: $pty:ty) => $set:expr)?
        $(, get { $($get:tt)* })?
        ;
    )*) => {
        /// The room's settings that are data, each documented on its builder setter. A key
        /// missing from a file keeps the [`Default`], which is the builder's. In a built
        /// room's [`RoomConfig`](super::RoomConfig), defaults that follow from other settings
        /// are resolved (`abandon_after`, `cookie_name`, the challenge's lifetime).
        #[derive(Clone, Debug, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub(crate) struct Settings {
            $(
                $(#[serde($($serde)*)])*
                pub(crate) $name: $ty,
            )*
        }

        impl Default for Settings {
            fn default() -> Self {
                Self {
                    $($name: $default,)*
                }
            }
        }

        impl super::RoomConfig {
            $($($($get)*)?)*
        }

        /// Every setting, in the order of the declaration: what the settings table shows.
        pub(crate) const DECLARED: &[Declared] = &[
            $(
                Declared {
                    name: stringify!($name),
                    ty: stringify!($ty),
                    serde: concat!("" $(, stringify!($($serde)*))*),
                    doc: concat!($($doc, "\n"),+),
                    unset: settings!(@unset $($unset)?),
                    written: |s: &Settings| super::table::Written::written(&s.$name),
                },
            )*
        ];

        /// The builder's setters of the settings declared with `set`.
        macro_rules! builder_setters {
            () => {
                $(
                    $crate::config::settings::settings!(
                        @setter [$(#[doc = $doc])*] $name $(($param: $pty) => $set)?
                    );
                )*
            };
        }
        pub(crate) use builder_setters;
    };
}
pub(crate) use settings;

settings! {
    /// Visitors inside at once, counting granted but unclaimed slots. Required.
    capacity: Option<u32> = None,
        unset "required",
        set(capacity: u32) => Some(capacity);

    /// At most this many admissions per second (on top of capacity). Unset by default.
    admission_rate: Option<u32> = None,
        unset "none",
        set(per_second: u32) => Some(per_second);

    /// Slot lifetime, extended by activity. Default 300 s.
    #[serde(deserialize_with = "readable::duration")]
    active_ttl: Duration = Duration::from_secs(300),
        set(ttl: Duration) => ttl;

    /// Time a promoted visitor has to come back and claim the slot. Default 30 s.
    #[serde(deserialize_with = "readable::duration")]
    grant_ttl: Duration = Duration::from_secs(30),
        set(ttl: Duration) => ttl;

    /// A waiter silent for longer is skipped when their turn comes. Default 120 s.
    #[serde(deserialize_with = "readable::duration")]
    queue_ttl: Duration = Duration::from_secs(120),
        set(ttl: Duration) => ttl;

    /// A waiter silent for longer is dropped from the line wherever they stand, so the positions
    /// others see do not count people long gone. Default 30 min (or `queue_ttl`, if that is
    /// set longer); when set, it must be at least `queue_ttl`.
    /// A waiter silent for longer than `queue_ttl` but back within `abandon_after` keeps their
    /// place, unless their turn came while they were away.
    #[serde(deserialize_with = "readable::some_duration")]
    abandon_after: Option<Duration> = None,
        unset "`\"30m\"`, or `queue_ttl` if longer",
        set(after: Duration) => Some(after);

    /// Age under which an admission token is trusted without a store call; shorter than
    /// `active_ttl`. Default 15 s. Each gateway counts it on its own clock from the token's
    /// issue time, and asks the store about a token issued ahead of its clock; so a slot that
    /// ended (or a session the operators dropped) is out within `refresh` plus the difference
    /// between the gateways' clocks: keep them within a second of each other (NTP).
    #[serde(deserialize_with = "readable::duration")]
    refresh: Duration = Duration::from_secs(15),
        set(refresh: Duration) => refresh,
        get {
            /// Age under which an admission token is trusted without a store call.
            pub fn refresh(&self) -> Duration {
                self.settings.refresh
            }
        };

    /// Lifetime of the signed queue cookie. Default 24 h.
    #[serde(deserialize_with = "readable::duration")]
    session_ttl: Duration = Duration::from_secs(24 * 3600),
        set(ttl: Duration) => ttl,
        get {
            /// Lifetime of the signed queue cookie.
            pub fn session_ttl(&self) -> Duration {
                self.settings.session_ttl
            }
        };

    /// Longest line; beyond it visitors get the "full" answer. Default 100 000.
    max_queue_len: u64 = 100_000,
        set(max: u64) => max;

    /// What new visitors get while the store is unreachable. Default [`FailPolicy::Open`].
    #[serde(deserialize_with = "readable::fail_policy")]
    fail_policy: FailPolicy = FailPolicy::Open,
        set(policy: FailPolicy) => policy,
        get {
            /// What new visitors get while the store is unreachable.
            pub fn fail_policy(&self) -> FailPolicy {
                self.settings.fail_policy
            }
        };

    /// Base name of the cookies: `{name}_q` (queue), `{name}_a` (admission) and `{name}_t`
    /// (single-use ticket). Default `wr_{room}`, so two rooms on one site do not collide.
    cookie_name: Option<String> = None,
        unset "`\"wr_{room}\"`",
        set(name: impl Into<String>) => Some(name.into());

    /// `Path` of the cookies. Default `/`. It must cover `path_prefix` (else
    /// [`ConfigError::CookiePathMissesEndpoints`](crate::ConfigError::CookiePathMissesEndpoints)):
    /// browsers send no cookie outside it.
    cookie_path: String = "/".to_owned(),
        set(path: impl Into<String>) => path.into();

    /// `Domain` of the cookies. Unset by default (host-only cookies).
    cookie_domain: Option<String> = None,
        unset "unset (host-only cookies)",
        set(domain: impl Into<String>) => Some(domain.into());

    /// Whether cookies carry `Secure`; turn off only for plain-http development. Default `true`.
    secure_cookies: bool = true,
        set(secure: bool) => secure;

    /// `SameSite` of the cookies; `None` needs `Secure`. Default [`SameSite::Lax`].
    #[serde(deserialize_with = "readable::same_site")]
    same_site: SameSite = SameSite::Lax,
        set(same_site: SameSite) => same_site;

    /// Where the room's own endpoints live. Default `/__waitingroom`.
    path_prefix: String = "/__waitingroom".to_owned(),
        set(prefix: impl Into<String>) => prefix.into(),
        get {
            /// Where the room's own endpoints live (`{prefix}/{room}/status`,
            /// `{prefix}/{room}/leave`, and with proof of work on, `{prefix}/{room}/proof`).
            pub fn path_prefix(&self) -> &str {
                &self.settings.path_prefix
            }
        };

    /// The header carrying the signed queue value for apps without a cookie jar. Default
    /// `waiting-room-session`.
    queue_header: String = defaults::QUEUE_HEADER.to_owned(),
        set(name: impl Into<String>) => name.into();

    /// The header carrying the signed admission token for apps without a cookie jar. Default
    /// `waiting-room-token`.
    token_header: String = defaults::TOKEN_HEADER.to_owned(),
        set(name: impl Into<String>) => name.into();

    /// The capacity follows the app's health within these terms: in a file, `"20-2000, p95
    /// 300ms"` (the bounds and the p95 target; optionally `", errors 1%"`, `", window 5s"`, and
    /// `", rate follows"` for an `admission_rate` that moves with the capacity in the room's
    /// proportion), or `"off"`. Off by default. See
    /// [`auto_capacity`](crate::WaitingRoomBuilder::auto_capacity).
    #[serde(deserialize_with = "readable::auto_capacity")]
    auto_capacity: Option<AutoCapacity> = None;

    /// How many new queue entries (fresh queue cookies, stage 1) one client (an IPv4 address, an
    /// IPv6 /64) gets; over it the answer is `429` with `Retry-After` and no cookie. Default
    /// [`NEW_VISITORS_PER_IP`](crate::config::defaults::NEW_VISITORS_PER_IP) (60 a minute);
    /// `None` turns it off. Kept in process memory, so with several gateways each counts its own. See
    /// [`client`](crate::client) for where the IP comes from; with no IP there is no limit.
    #[serde(deserialize_with = "readable::rate_limit")]
    new_visitor_limit: Option<RateLimit> = Some(defaults::NEW_VISITORS_PER_IP),
        set(limit: impl Into<Option<RateLimit>>) => limit.into();

    /// How many store questions one session may cause: stage 3 (waiting polls answered from the
    /// gateway's snapshot included), heartbeats of admission tokens past `refresh` (and the
    /// entry when the slot is gone), the status and leave endpoints.
    /// Over it the store is not asked: the answer is `429` with `Retry-After`, except that a
    /// valid admission token passes without its heartbeat (it needs no store). Default
    /// [`POLLS_PER_SESSION`](crate::config::defaults::POLLS_PER_SESSION) (30 per 10 s); `None`
    /// turns it off.
    #[serde(deserialize_with = "readable::rate_limit")]
    poll_limit: Option<RateLimit> = Some(defaults::POLLS_PER_SESSION),
        set(limit: impl Into<Option<RateLimit>>) => limit.into();

    /// Take the client IP from the **right-most** address in this header (`X-Forwarded-For`,
    /// `X-Real-IP`, ...) instead of the connection: for services behind a reverse proxy that
    /// appends the address it saw. **Only behind such a proxy**: a client can write anything
    /// into the header, and the right-most entry is the only one your proxy vouches for. Behind
    /// several proxies, use [`client_ip_with`](crate::WaitingRoomBuilder::client_ip_with).
    client_ip_header: Option<String> = None,
        unset "unset (the connection's address)",
        set(name: impl Into<String>) => Some(name.into());

    /// Bind admission tokens to the visitor's network: the /24 of an IPv4 address, the /48 of an
    /// IPv6 address (an IPv4-mapped IPv6 address counts as IPv4), signed into the token. A token
    /// presented from another network is treated exactly like no token: a visitor who still has
    /// the queue cookie goes to the store, which finds their slot and hands them a token for the
    /// new network; someone who only copied the token starts at the back of the line. Default
    /// **off**.
    ///
    /// Why off: people move between networks during a visit (Wi-Fi to mobile data, a VPN
    /// switching exits, a carrier's NAT changing address), and with binding on, each move costs
    /// a store call and, for clients without the queue cookie, the slot. And it is only a weak
    /// defence against shared tokens: anyone on the same /24 or /48 (an office, a university, a
    /// carrier's NAT) can still use a copied token.
    ///
    /// The network comes from the same place as for the limits (see [`client`](crate::client)):
    /// [`client_ip_with`](crate::WaitingRoomBuilder::client_ip_with),
    /// [`client_ip_header`](crate::WaitingRoomBuilder::client_ip_header), or the connection.
    /// **No client IP** when a token is issued binds it to "unknown", and such
    /// a token admits only requests whose IP is unknown too; a token bound to a real network
    /// never admits a request without an IP. A room that never finds the IP thus behaves as
    /// without binding (and logs one warning), and hiding one's IP never unlocks a token.
    /// Unbound tokens (issued before binding was turned on) count as no token while it is on;
    /// bound tokens admit from anywhere once it is turned off again.
    bind_tokens_to_network: bool = false,
        set(bind: bool) => bind,
        get {
            /// Whether admission tokens are bound to the visitor's network (IPv4 /24, IPv6
            /// /48); see
            /// [`bind_tokens_to_network`](crate::WaitingRoomBuilder::bind_tokens_to_network).
            pub fn bind_tokens_to_network(&self) -> bool {
                self.settings.bind_tokens_to_network
            }
        };

    /// Mint a **single-use checkout ticket** at admission, for routes that must be used once
    /// per admission (a checkout, a purchase): a gated route consumes it atomically in the
    /// store, so a ticket shared or replayed goes through exactly once across all gateways.
    /// Default **off**; on, each admission (a new slot or a claimed grant) and each heartbeat
    /// that extends the slot costs one more store call.
    ///
    /// The ticket is signed for the room (kind `t1`) and lives as long as the slot: each
    /// heartbeat extends its store record and re-issues it (the same ticket) with the slot's new
    /// expiry; releasing the slot (leave, `end_slot`) or a ban ends it, and the next admission
    /// gets a new one. Browsers get it as the `HttpOnly` cookie `wr_{room}_t` (the
    /// [cookie name](crate::WaitingRoomBuilder::cookie_name) with `_t`), clients that use
    /// headers in the `X-Admission-Ticket` response header. If the store cannot mint it at
    /// admission the visitor still gets in, without a ticket; the status endpoint hands it out
    /// later (idempotently: one ticket per admission, however often asked; `"ticket_used": true`
    /// once used). The store must keep tickets ([`Store::tickets`](crate::store::Store::tickets):
    /// the embedded store and the Redis store do).
    ///
    /// ```
    /// use tower_waiting_room::WaitingRoomLayer;
    ///
    /// let layer = WaitingRoomLayer::builder("shop")
    ///     .capacity(100)
    ///     .secret(b"an example secret of at least thirty-two bytes".to_vec())
    ///     .single_use_tickets(true)
    ///     .build()
    ///     .unwrap();
    /// assert!(layer.config().single_use_tickets());
    /// assert_eq!(layer.config().cookies().ticket_name(), "wr_shop_t");
    /// ```
    single_use_tickets: bool = false,
        set(on: bool) => on,
        get {
            /// Whether the room mints a single-use checkout ticket at admission; see
            /// [`single_use_tickets`](crate::WaitingRoomBuilder::single_use_tickets).
            pub fn single_use_tickets(&self) -> bool {
                self.settings.single_use_tickets
            }
        };

    /// Most waiters listening at once, on this gateway, for their position as Server-Sent
    /// Events (`GET {prefix}/{room}/events`); 0 turns streams off. Default 10 000. A stream is
    /// fed by the gateway's snapshot of the line, so it needs a store that keeps snapshots (the
    /// embedded store and the Redis store do) and a Tokio runtime; without them,
    /// beyond this number, or in a browser without `EventSource`, the waiting page polls the
    /// status endpoint as before. Each open stream holds a connection and a little memory (see
    /// `docs/benchmarks.md`), and is checked in for its waiter like a poll. One visitor holds
    /// two at most (a page and a second tab): a third replaces the oldest, so a few visitors
    /// cannot use up this number.
    ///
    /// ```
    /// use tower_waiting_room::WaitingRoomLayer;
    ///
    /// let layer = WaitingRoomLayer::builder("shop")
    ///     .capacity(100)
    ///     .secret(b"an example secret of at least thirty-two bytes".to_vec())
    ///     .max_event_streams(50_000)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(layer.config().max_event_streams(), 50_000);
    /// ```
    max_event_streams: usize = 10_000,
        set(max: usize) => max,
        get {
            /// Most event streams open at once on this gateway; see
            /// [`max_event_streams`](crate::WaitingRoomBuilder::max_event_streams).
            pub fn max_event_streams(&self) -> usize {
                self.settings.max_event_streams
            }
        };

    /// The proof-of-work difficulty in bits, 1 to 32: a new visitor the risk decision finds
    /// medium risk solves a signed, expiring SHA-256 challenge before joining the line (the
    /// waiting page does it by itself). Default: off (`None`). Set with
    /// `proof_of_work_challenge_ttl` by the builder's handwritten
    /// [`proof_of_work`](crate::WaitingRoomBuilder::proof_of_work).
    proof_of_work: Option<u8> = None,
        unset "off";

    /// How long a proof-of-work challenge stays valid; needs `proof_of_work`. Default (`None`):
    /// [`DEFAULT_CHALLENGE_TTL`](crate::defences::proof_of_work::DEFAULT_CHALLENGE_TTL).
    #[serde(deserialize_with = "readable::some_duration")]
    proof_of_work_challenge_ttl: Option<Duration> = None,
        unset "`\"5m\"`";

    /// Address ranges the operator lists as data centres or known bots, in CIDR notation
    /// (`203.0.113.0/24`, `2001:db8::/32`) or as single addresses: the default
    /// [risk](crate::defences::risk) scorer refuses new visitors from them (`403`, state
    /// `refused`). None by default. A [`risk`](crate::WaitingRoomBuilder::risk) hook sees
    /// whether it is ([`NewVisitor::in_listed_network`](crate::defences::risk::NewVisitor::in_listed_network))
    /// and decides. Listing any turns the risk decision on, with or without proof of work. An
    /// entry in IPv4-mapped IPv6 form is listed as IPv4 (`::ffff:192.0.2.0/120` as
    /// `192.0.2.0/24`; a mapped range shorter than `/96` would reach past IPv4 and is refused),
    /// and a client IP in that form is looked up as its IPv4 address; `config()` still reports
    /// each entry as written. A range with bits set past its prefix length (`203.0.113.7/24`)
    /// is refused ([`ConfigError::InvalidNetwork`](crate::ConfigError::InvalidNetwork)): it
    /// would list another range than the one meant. A file or the environment writes them as
    /// one string, separated by commas.
    ///
    /// ```
    /// use tower_waiting_room::WaitingRoomLayer;
    ///
    /// let layer = WaitingRoomLayer::builder("shop")
    ///     .capacity(100)
    ///     .secret(b"an example secret of at least thirty-two bytes".to_vec())
    ///     .risky_networks(["192.0.2.0/24", "2001:db8::/32", "198.51.100.7"])
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(layer.config().risky_networks().len(), 3);
    /// ```
    #[serde(deserialize_with = "readable::networks")]
    risky_networks: Vec<String> = Vec::new(),
        unset "none",
        set(networks: impl IntoIterator<Item = impl Into<String>>) => {
            networks.into_iter().map(Into::into).collect()
        },
        get {
            /// The address ranges listed as data centres or known bots; see
            /// [`risky_networks`](crate::WaitingRoomBuilder::risky_networks).
            pub fn risky_networks(&self) -> &[String] {
                &self.settings.risky_networks
            }
        };

    /// Opens the room at `opens_at`, with a fair, shuffled pre-queue before it; the store's clock
    /// decides (see [`EventSchedule`](crate::config::EventSchedule)). Before then, arrivals are registered
    /// in a pre-queue and told when it opens (state `scheduled`, a countdown page); nobody is
    /// admitted, on any gateway, not even by [`admit_next`](crate::control::RoomControl). At
    /// the opening the registrants stand in a uniformly random order, fixed by a keyed draw of
    /// their session (secret per event, derived from the current signing key, the room and the
    /// opening), ahead of everyone who comes later. A time in the past opens at once.
    #[serde(deserialize_with = "readable::unix_time")]
    opens_at: Option<SystemTime> = None,
        unset "none (open now)",
        set(at: SystemTime) => Some(at);

    /// Stops taking newcomers at `closes_at` (state `closed`); those in line keep their place
    /// unless [`keep_line_after_close`](crate::WaitingRoomBuilder::keep_line_after_close) is
    /// off, and slots run their course either way. Must be after
    /// [`opens_at`](crate::WaitingRoomBuilder::opens_at)
    /// ([`ConfigError::ClosesBeforeOpening`](crate::ConfigError::ClosesBeforeOpening)).
    #[serde(deserialize_with = "readable::unix_time")]
    closes_at: Option<SystemTime> = None,
        unset "none",
        set(at: SystemTime) => Some(at);

    /// After [`closes_at`](crate::WaitingRoomBuilder::closes_at): whether those in line keep
    /// their place and the line keeps moving (`true`, the default), or everyone without a slot
    /// is told `closed` and nobody is promoted (as an operator's close).
    keep_line_after_close: bool = true,
        set(keep: bool) => keep;
}

/// A waiter silent for longer is dropped from the line wherever they stand, so positions do not
/// count people long gone and the line's memory stays bounded: the default of `abandon_after`.
/// Much longer than `queue_ttl`: a visitor whose tab slept for a few minutes keeps their place
/// until their turn.
const ABANDON_AFTER: Duration = Duration::from_secs(30 * 60);

impl Settings {
    /// The abandonment time: as set, or the default stretched to `queue_ttl`.
    pub(crate) fn effective_abandon_after(&self) -> Duration {
        self.abandon_after
            .unwrap_or_else(|| ABANDON_AFTER.max(self.queue_ttl))
    }

    /// Proof of work as the room runs it, if on.
    pub(crate) fn proof_of_work(&self) -> Option<ProofOfWork> {
        let pow = ProofOfWork::new(self.proof_of_work?);
        Some(match self.proof_of_work_challenge_ttl {
            Some(ttl) => pow.with_challenge_ttl(ttl),
            None => pow,
        })
    }

    /// Sets (or with `None`, turns off) proof of work.
    pub(crate) fn set_proof_of_work(&mut self, pow: Option<ProofOfWork>) {
        self.proof_of_work = pow.map(|p| p.difficulty());
        self.proof_of_work_challenge_ttl = pow.map(|p| p.challenge_ttl());
    }
}
