//! [`WaitingRoomBuilder`]: the setters, and `build`, which validates every setting and
//! assembles the room.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::client::{ClientIp, ClientIpFn, RequestInfo};
use crate::clock::{Clock, SharedClock, SystemClock};
use crate::config::settings::Settings;
use crate::config::{
    defaults, validate, ConfigError, EventSchedule, FailPolicy, RoomConfig, RoomFile,
    RoomFileError, RoomPolicy, SameSite,
};
use crate::defences::{
    BypassFn, Defences, Limiter, ProofGate, ProofOfWork, RateLimit, MAX_TRACKED,
};
use crate::layer::WaitingRoomLayer;
use crate::response::{DefaultRenderer, Render};
use crate::room::{Room, RoomParts};
use crate::store::{MemoryStore, Store};
use crate::token::{KeyError, Keyring, SigningKey};
use crate::vocab::Rule;

// The layer's entry point lives here, beside the builder it starts, so that the layer does
// not depend on its builder.
impl WaitingRoomLayer {
    /// Starts configuring the room `room` (`[A-Za-z0-9_-]{1,64}`).
    pub fn builder(room: impl Into<String>) -> WaitingRoomBuilder {
        WaitingRoomBuilder::new(room.into())
    }
}

/// Configures a [`WaitingRoomLayer`]; [`build`](Self::build) validates everything and returns a
/// [`ConfigError`] instead of panicking. Defaults are in the [`config`](crate::config) docs.
#[must_use]
pub struct WaitingRoomBuilder {
    room: String,
    /// Every setting that is data; the setters write its fields.
    settings: Settings,
    current_key: Option<Result<SigningKey, KeyError>>,
    previous_key: Option<Result<SigningKey, KeyError>>,
    clock: Option<SharedClock>,
    store: Option<Arc<dyn Store>>,
    renderer: Arc<dyn Render>,
    bypass: Vec<Box<BypassFn>>,
    client_ip: ClientIp,
    gates: Vec<Rule>,
}

impl WaitingRoomBuilder {
    pub(crate) fn new(room: String) -> Self {
        Self {
            room,
            settings: Settings::default(),
            current_key: None,
            previous_key: None,
            clock: None,
            store: None,
            renderer: Arc::new(DefaultRenderer::new()),
            bypass: Vec::new(),
            client_ip: ClientIp::Peer,
            gates: Vec::new(),
        }
    }

    /// Visitors inside at once, counting granted but unclaimed slots. Required.
    pub fn capacity(mut self, capacity: u32) -> Self {
        self.settings.capacity = Some(capacity);
        self
    }

    /// At most this many admissions per second (on top of capacity). Unset by default.
    pub fn admission_rate(mut self, per_second: u32) -> Self {
        self.settings.admission_rate = Some(per_second);
        self
    }

    /// Slot lifetime, extended by activity. Default 300 s.
    pub fn active_ttl(mut self, ttl: Duration) -> Self {
        self.settings.active_ttl = ttl;
        self
    }

    /// Time a promoted visitor has to come back and claim the slot. Default 30 s.
    pub fn grant_ttl(mut self, ttl: Duration) -> Self {
        self.settings.grant_ttl = ttl;
        self
    }

    /// A waiter silent for longer is skipped when their turn comes. Default 120 s.
    pub fn queue_ttl(mut self, ttl: Duration) -> Self {
        self.settings.queue_ttl = ttl;
        self
    }

    /// A waiter silent for longer is dropped from the line wherever they stand, so the positions
    /// others see do not count people long gone. Default 30 min (or `queue_ttl`, if that is
    /// set longer); when set, it must be at least `queue_ttl`.
    /// A waiter silent for longer than `queue_ttl` but back within `abandon_after` keeps their
    /// place, unless their turn came while they were away.
    pub fn abandon_after(mut self, after: Duration) -> Self {
        self.settings.abandon_after = Some(after);
        self
    }

    /// Age under which an admission token is trusted without a store call. Default 15 s; must
    /// be shorter than `active_ttl`.
    pub fn refresh(mut self, refresh: Duration) -> Self {
        self.settings.refresh = refresh;
        self
    }

    /// Lifetime of the signed queue cookie. Default 24 h.
    pub fn session_ttl(mut self, ttl: Duration) -> Self {
        self.settings.session_ttl = ttl;
        self
    }

    /// Longest line; beyond it visitors get the "full" answer. Default 100 000.
    pub fn max_queue_len(mut self, max: u64) -> Self {
        self.settings.max_queue_len = max;
        self
    }

    /// What new visitors get while the store is unreachable. Default [`FailPolicy::Open`].
    pub fn fail_policy(mut self, policy: FailPolicy) -> Self {
        self.settings.fail_policy = policy;
        self
    }

    /// Base name of the cookies: `{name}_q` (queue) and `{name}_a` (admission). Default
    /// `wr_{room}`, so two rooms on one site do not collide.
    pub fn cookie_name(mut self, name: impl Into<String>) -> Self {
        self.settings.cookie_name = Some(name.into());
        self
    }

    /// `Path` of the cookies. Default `/`.
    pub fn cookie_path(mut self, path: impl Into<String>) -> Self {
        self.settings.cookie_path = path.into();
        self
    }

    /// `Domain` of the cookies. Unset by default (host-only cookies).
    pub fn cookie_domain(mut self, domain: impl Into<String>) -> Self {
        self.settings.cookie_domain = Some(domain.into());
        self
    }

    /// Whether cookies carry `Secure`. Default `true`; turn off only for plain-http development.
    pub fn secure_cookies(mut self, secure: bool) -> Self {
        self.settings.secure_cookies = secure;
        self
    }

    /// `SameSite` of the cookies. Default [`SameSite::Lax`].
    pub fn same_site(mut self, same_site: SameSite) -> Self {
        self.settings.same_site = same_site;
        self
    }

    /// Where the room's own endpoints live. Default `/__waitingroom`.
    pub fn path_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.settings.path_prefix = prefix.into();
        self
    }

    /// The header carrying the signed queue value for apps without a cookie jar. Default
    /// [`waiting-room-session`](defaults::QUEUE_HEADER).
    pub fn queue_header(mut self, name: impl Into<String>) -> Self {
        self.settings.queue_header = name.into();
        self
    }

    /// The header carrying the signed admission token for apps without a cookie jar. Default
    /// [`waiting-room-token`](defaults::TOKEN_HEADER).
    pub fn token_header(mut self, name: impl Into<String>) -> Self {
        self.settings.token_header = name.into();
        self
    }

    /// The secret of the current signing key: at least 32 bytes, used as they are (a hex string
    /// is not decoded; for that, use [`signing_key`](Self::signing_key) with
    /// [`SigningKey::from_hex`]). Its key id is [`k1`](defaults::KEY_ID); name your own keys
    /// with [`SigningKey::new`] to rotate them.
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.current_key = Some(SigningKey::new(defaults::KEY_ID, secret));
        self
    }

    /// The current signing key.
    pub fn signing_key(mut self, key: SigningKey) -> Self {
        self.current_key = Some(Ok(key));
        self
    }

    /// A previous signing key, still accepted when verifying.
    pub fn previous_signing_key(mut self, key: SigningKey) -> Self {
        self.previous_key = Some(Ok(key));
        self
    }

    /// Current and previous keys at once.
    pub fn keyring(mut self, keys: Keyring) -> Self {
        self.current_key = Some(Ok(keys.current().clone()));
        self.previous_key = keys.previous().cloned().map(Ok);
        self
    }

    /// The clock for tokens and (when no store is given) the embedded store. Default: system.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The store. Default: a new [`MemoryStore`] on the builder's clock.
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// A shared store, for several layers over one store object.
    pub fn shared_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// How rejections are rendered. Default [`DefaultRenderer`].
    pub fn renderer(mut self, renderer: impl Render) -> Self {
        self.renderer = Arc::new(renderer);
        self
    }

    /// Requests for which `rule` returns `true` skip the room entirely: they go straight to the
    /// inner service, with no [`Admission`](crate::Admission) in their extensions, no cookie and
    /// no store call, and no limit counts them. Health checks, static assets, webhooks, admin
    /// addresses. Several rules: a request matching any of them bypasses. Rules run on every
    /// request, before anything else, so keep them cheap.
    ///
    /// ```
    /// use http::Method;
    /// use tower_waiting_room::WaitingRoomLayer;
    ///
    /// let builder = WaitingRoomLayer::builder("shop")
    ///     .bypass(|req| req.path() == "/healthz")
    ///     .bypass(|req| req.method() == Method::GET && req.path().starts_with("/assets/"))
    ///     // Webhooks authenticate themselves; the payment provider must never wait in line.
    ///     .bypass(|req| req.method() == Method::POST && req.path() == "/webhooks/payments");
    /// # let _ = builder;
    /// ```
    ///
    /// A rule on a header a client can send (`User-Agent`, a made-up `X-Internal`) lets anyone
    /// skip the line: match on paths that are not worth queueing, or on a secret the caller
    /// proves.
    pub fn bypass<F>(mut self, rule: F) -> Self
    where
        F: Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static,
    {
        self.bypass.push(Box::new(rule));
        self
    }

    /// How many new queue entries (fresh queue cookies, stage 1) one client IP gets; over it the
    /// answer is `429` with `Retry-After` and no cookie. Default
    /// [`NEW_VISITORS_PER_IP`](defaults::NEW_VISITORS_PER_IP) (60 a minute; IPv6
    /// clients counted by /64); `None`
    /// turns it off. Kept in process memory, so with several gateways each counts its own. See
    /// [`client`](crate::client) for where the IP comes from; with no IP there is no limit.
    pub fn new_visitor_limit(mut self, limit: impl Into<Option<RateLimit>>) -> Self {
        self.settings.new_visitor_limit = limit.into();
        self
    }

    /// How many store questions one session may cause: stage 3, heartbeats of admission tokens
    /// past `refresh` (and the entry when the slot is gone), the status and leave endpoints.
    /// Over it the store is not asked: the answer is `429` with `Retry-After`, except that a
    /// valid admission token passes without its heartbeat (it needs no store). Default
    /// [`POLLS_PER_SESSION`](defaults::POLLS_PER_SESSION) (30 per 10 s); `None` turns it off.
    pub fn poll_limit(mut self, limit: impl Into<Option<RateLimit>>) -> Self {
        self.settings.poll_limit = limit.into();
        self
    }

    /// Take the client IP from the **right-most** address in this header (`X-Forwarded-For`,
    /// `X-Real-IP`, ...) instead of the connection: for services behind a reverse proxy that
    /// appends the address it saw. **Only behind such a proxy**: a client can write anything
    /// into the header, and the right-most entry is the only one your proxy vouches for. Behind
    /// several proxies, use [`client_ip_with`](Self::client_ip_with).
    pub fn client_ip_header(mut self, name: impl Into<String>) -> Self {
        self.settings.client_ip_header = Some(name.into());
        self
    }

    /// Find the client IP with your own function (for example behind several proxies, or from
    /// axum's `ConnectInfo<SocketAddr>` without the `axum` feature; see
    /// [`client`](crate::client)). Overrides [`client_ip_header`](Self::client_ip_header).
    pub fn client_ip_with<F>(mut self, find: F) -> Self
    where
        F: Fn(&RequestInfo<'_>) -> Option<IpAddr> + Send + Sync + 'static,
    {
        self.client_ip = ClientIp::With(Box::new(find) as Box<ClientIpFn>);
        self
    }

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
    /// [`client_ip_with`](Self::client_ip_with), [`client_ip_header`](Self::client_ip_header),
    /// or the connection. **No client IP** when a token is issued binds it to "unknown", and such
    /// a token admits only requests whose IP is unknown too; a token bound to a real network
    /// never admits a request without an IP. A room that never finds the IP thus behaves as
    /// without binding (and logs one warning), and hiding one's IP never unlocks a token.
    /// Unbound tokens (issued before binding was turned on) count as no token while it is on;
    /// bound tokens admit from anywhere once it is turned off again.
    pub fn bind_tokens_to_network(mut self, bind: bool) -> Self {
        self.settings.bind_tokens_to_network = bind;
        self
    }

    /// Ask visitors to solve a proof-of-work challenge before they join the line: a visitor
    /// whose queue cookie is not yet proven gets `403` and a signed, expiring challenge bound to
    /// its session instead of a store call; browsers solve it by themselves (WebCrypto), API
    /// clients get it in the JSON. Default **off**. See [`proof_of_work`](crate::defences::proof_of_work)
    /// for the protocol, and `docs/security.md` for what each difficulty costs a browser and a
    /// bot farm.
    ///
    /// ```
    /// use tower_waiting_room::ProofOfWork;
    /// use tower_waiting_room::{ConfigError, WaitingRoomLayer};
    ///
    /// let room = WaitingRoomLayer::builder("drop")
    ///     .capacity(500)
    ///     .secret([7u8; 32])
    ///     .proof_of_work(ProofOfWork::new(16))
    ///     .build();
    /// assert!(room.is_ok());
    ///
    /// let too_hard = WaitingRoomLayer::builder("drop")
    ///     .capacity(500)
    ///     .secret([7u8; 32])
    ///     .proof_of_work(ProofOfWork::new(40))
    ///     .build();
    /// assert_eq!(too_hard.err(), Some(ConfigError::InvalidProofOfWork));
    /// ```
    pub fn proof_of_work(mut self, settings: impl Into<Option<ProofOfWork>>) -> Self {
        self.settings.set_proof_of_work(settings.into());
        self
    }

    /// Requests matching `rule` are gated by this room: they pass with a valid admission of
    /// the room (its admission cookie, its token header, or the `X-Admission-Ticket` header) and
    /// are otherwise refused with `403` JSON `not_admitted`; never queued, never a store write.
    /// For API routes of the site behind the room (`POST /checkout`, `/api/orders/*`). Several
    /// gates: a request matching any of them is gated. The room's endpoints are never gated.
    /// See [`routing`](crate::routing) for the answers, and for gates to a room that is not in front
    /// of the route ([`WaitingRoomsBuilder::gate`](crate::routing::WaitingRoomsBuilder::gate)).
    ///
    /// ```
    /// use tower_waiting_room::routing::Rule;
    /// use tower_waiting_room::{ConfigError, WaitingRoomLayer};
    ///
    /// let room = WaitingRoomLayer::builder("drop")
    ///     .capacity(100)
    ///     .secret([7u8; 32])
    ///     .gate(Rule::post("/checkout"))
    ///     .gate(Rule::path("/api/orders/*"))
    ///     .build();
    /// assert!(room.is_ok());
    ///
    /// let bad = WaitingRoomLayer::builder("drop")
    ///     .capacity(100)
    ///     .secret([7u8; 32])
    ///     .gate(Rule::path("checkout"))
    ///     .build();
    /// assert!(matches!(bad, Err(ConfigError::InvalidRule { .. })));
    /// ```
    pub fn gate(mut self, rule: Rule) -> Self {
        self.gates.push(rule);
        self
    }

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
    /// [cookie name](Self::cookie_name) with `_t`), clients that use headers in the
    /// `X-Admission-Ticket` response header. If the store cannot mint it at admission the
    /// visitor still gets in, without a ticket; the status endpoint hands it out later
    /// (idempotently: one ticket per admission, however often asked; `"ticket_used": true`
    /// once used). The store must keep tickets ([`Store::tickets`]: the embedded store and the
    /// Redis store do).
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
    pub fn single_use_tickets(mut self, on: bool) -> Self {
        self.settings.single_use_tickets = on;
        self
    }

    /// Most waiters listening at once, on this gateway, for their position as Server-Sent
    /// Events (`GET {prefix}/{room}/events`; 10 000 by default, 0 turns streams off). A
    /// stream is fed by the gateway's snapshot of the line, so it needs a store that keeps
    /// snapshots (the embedded store and the Redis store do) and a Tokio runtime; without them,
    /// beyond this number, or in a browser without `EventSource`, the waiting page polls the
    /// status endpoint as before. Each open stream holds a connection and a little memory (see
    /// `docs/benchmarks.md`), and is checked in for its waiter like a poll.
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
    pub fn max_event_streams(mut self, max: usize) -> Self {
        self.settings.max_event_streams = max;
        self
    }

    /// Opens the room at `opens_at` (the store's clock decides; see
    /// [`EventSchedule`](crate::config::EventSchedule)). Before then, arrivals are registered
    /// in a pre-queue and told when it opens (state `scheduled`, a countdown page); nobody is
    /// admitted, on any gateway, not even by [`admit_next`](crate::control::RoomControl). At
    /// the opening the registrants stand in a uniformly random order, fixed by a keyed draw of
    /// their session (secret per event, derived from the current signing key, the room and the
    /// opening), ahead of everyone who comes later. A time in the past opens at once.
    pub fn opens_at(mut self, at: SystemTime) -> Self {
        self.settings.opens_at = Some(at);
        self
    }

    /// Stops taking newcomers at `closes_at` (state `closed`); those in line keep their place
    /// unless [`keep_line_after_close`](Self::keep_line_after_close) is off, and slots run their
    /// course either way. Must be after [`opens_at`](Self::opens_at)
    /// ([`ConfigError::ClosesBeforeOpening`]).
    pub fn closes_at(mut self, at: SystemTime) -> Self {
        self.settings.closes_at = Some(at);
        self
    }

    /// After [`closes_at`](Self::closes_at): whether those in line keep their place and the
    /// line keeps moving (`true`, the default), or everyone without a slot is told `closed`
    /// and nobody is promoted (as an operator's close).
    pub fn keep_line_after_close(mut self, keep: bool) -> Self {
        self.settings.keep_line_after_close = keep;
        self
    }

    /// Validates the configuration and builds the layer. Nothing is half-built: every
    /// setting is checked first, and the first one refused is the error.
    pub fn build(self) -> Result<WaitingRoomLayer, ConfigError> {
        // Validate: every check, before anything is assembled.
        let s = self.settings;
        let checked = validate::settings(&self.room, &s, &self.gates)?;
        let keys = validate::keyring(self.current_key, self.previous_key)?;
        let schedule = schedule(
            &self.room,
            (s.opens_at, s.closes_at),
            s.keep_line_after_close,
            &keys,
        );

        // Assemble.
        let client_ip = match (self.client_ip, checked.client_ip_header) {
            (ClientIp::Peer, Some(name)) => ClientIp::Header(name),
            (client_ip, _) => client_ip,
        };
        if s.new_visitor_limit.is_some() || s.bind_tokens_to_network {
            client_ip.log_source(&self.room);
        }
        let defences = Defences {
            bypass: self.bypass,
            client_ip,
            new_visitors: s.new_visitor_limit.map(|l| Limiter::new(l, MAX_TRACKED)),
            polls: s.poll_limit.map(|l| Limiter::new(l, MAX_TRACKED)),
            proof: checked.proof_of_work.map(ProofGate::new),
            warned_no_ip: Default::default(),
        };
        let clock: SharedClock = self.clock.unwrap_or_else(|| Arc::new(SystemClock));
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(MemoryStore::with_shared_clock(clock.clone())));
        if s.single_use_tickets && Arc::clone(&store).tickets().is_none() {
            return Err(ConfigError::StoreWithoutTickets);
        }
        let policy = RoomPolicy::new(&self.room, checked.capacity)
            .with_admission_rate(s.admission_rate)
            .with_ttls(s.active_ttl, s.grant_ttl, s.queue_ttl)
            .with_abandon_after(checked.abandon_after)
            .with_max_queue_len(s.max_queue_len)
            .with_schedule(schedule);
        let config = RoomConfig {
            policy,
            refresh: s.refresh,
            session_ttl: s.session_ttl,
            fail_policy: s.fail_policy,
            cookies: checked.cookies,
            path_prefix: s.path_prefix,
            queue_header: checked.queue_header,
            token_header: checked.token_header,
            bind_tokens_to_network: s.bind_tokens_to_network,
            single_use_tickets: s.single_use_tickets,
            max_event_streams: s.max_event_streams,
        };
        let room = Room::new(RoomParts {
            config,
            keys,
            store,
            clock,
            renderer: self.renderer,
            defences,
            gates: self.gates,
        });
        Ok(WaitingRoomLayer::from_room(Arc::new(room)))
    }
}

// A settings file is applied here, so that the settings do not depend on the builder.
impl RoomFile {
    /// A builder with these settings: settings left out keep the builder's defaults, and
    /// [`build`](WaitingRoomBuilder::build) validates them as it validates settings made in
    /// code. Reads the secret named by `secret_env` or `secret_file` now; without one, `build`
    /// asks for a key ([`MissingSigningKey`](crate::ConfigError::MissingSigningKey)) unless you
    /// add one to the builder.
    pub fn builder(&self) -> Result<WaitingRoomBuilder, RoomFileError> {
        self.builder_with_env(|name| std::env::var(name).ok())
    }

    /// [`builder`](Self::builder), with `env` standing for the process environment.
    fn builder_with_env(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<WaitingRoomBuilder, RoomFileError> {
        let (settings, secret) = self.settings_and_secret(env)?;
        let mut builder = WaitingRoomLayer::builder(self.room());
        builder.settings = settings.clone();
        Ok(match secret {
            Some(secret) => builder.secret(secret),
            None => builder,
        })
    }
}

/// The event schedule, if an opening or a closing is set: its draw key derived from the current
/// signing key (a closing alone opens at once).
fn schedule(
    room: &str,
    (opens_at, closes_at): (Option<SystemTime>, Option<SystemTime>),
    keep_line_after_close: bool,
    keys: &Keyring,
) -> Option<EventSchedule> {
    if opens_at.is_none() && closes_at.is_none() {
        return None;
    }
    let opens_at = opens_at.unwrap_or(UNIX_EPOCH);
    Some(
        EventSchedule::derived(keys.current().hmac(), room, opens_at)
            .with_closes_at(closes_at)
            .with_keep_line_after_close(keep_line_after_close),
    )
}

impl std::fmt::Debug for WaitingRoomBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoomBuilder")
            .field("room", &self.room)
            .field("capacity", &self.settings.capacity)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::{RoomFile, RoomFileError};
    use crate::{ConfigError, WaitingRoomLayer};

    fn room() -> super::WaitingRoomBuilder {
        WaitingRoomLayer::builder("shop")
            .capacity(1)
            .secret([7u8; 32])
    }

    #[test]
    fn abandon_after_is_at_least_queue_ttl() {
        let minute = Duration::from_secs(60);
        let err = room()
            .queue_ttl(2 * minute)
            .abandon_after(minute)
            .build()
            .err();
        assert_eq!(err, Some(ConfigError::AbandonAfterShorterThanQueueTtl));
        let err = room().abandon_after(Duration::ZERO).build().err();
        assert_eq!(
            err,
            Some(ConfigError::InvalidDuration {
                setting: "abandon_after"
            })
        );
        let ok = room().queue_ttl(minute).abandon_after(minute).build();
        assert_eq!(ok.unwrap().config().policy().abandon_after_ms, 60_000);
    }

    #[test]
    fn the_default_abandon_after_stretches_to_a_longer_queue_ttl() {
        let p = room().build().unwrap().config().policy().clone();
        assert_eq!(p.abandon_after_ms, 30 * 60 * 1_000);
        let hours = Duration::from_secs(2 * 3_600);
        let p = room()
            .queue_ttl(hours)
            .build()
            .unwrap()
            .config()
            .policy()
            .clone();
        assert_eq!(p.abandon_after_ms, 2 * 3_600 * 1_000);
    }

    #[test]
    fn the_secret_from_secret_env_reaches_the_builder() {
        let settings = RoomFile {
            secret_env: Some("TEST_SECRET".to_owned()),
            ..RoomFile::new("shop".to_owned())
        };
        let mut settings = settings;
        settings.settings.capacity = Some(1);
        let env = |name: &str| (name == "TEST_SECRET").then(|| "s".repeat(32));
        assert!(settings.builder_with_env(env).unwrap().build().is_ok());
        let short = |name: &str| (name == "TEST_SECRET").then(|| "s".repeat(31));
        let err = settings.builder_with_env(short).unwrap().build().err();
        assert_eq!(
            err,
            Some(crate::ConfigError::SecretTooShort {
                key_id: "k1".to_owned(),
                len: 31
            })
        );
        let err = settings.builder_with_env(|_| None).err().unwrap();
        assert!(
            matches!(err, RoomFileError::SecretEnv { ref variable } if variable == "TEST_SECRET")
        );
    }
}
