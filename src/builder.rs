//! [`WaitingRoomBuilder`]: the setters, and `build`, which validates every setting and
//! assembles the room.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::auto::AutoCapacity;
use crate::client::{ClientIp, ClientIpFn, RequestInfo};
use crate::clock::{Clock, SharedClock, SystemClock};
use crate::config::settings::Settings;
use crate::config::{
    defaults, validate, ConfigError, EventSchedule, FailPolicy, RoomConfig, RoomFile,
    RoomFileError, RoomPolicy, SameSite,
};
use crate::defences::risk::{NewVisitor, Risk, RiskFn};
use crate::defences::{
    BypassFn, Defences, Limiter, ProofGate, ProofOfWork, RateLimit, RiskGate, MAX_TRACKED,
};
use crate::edge::EdgeTokens;
use crate::layer::WaitingRoomLayer;
use crate::response::{DefaultRenderer, Languages, Render};
use crate::room::{Room, RoomParts};
use crate::store::{MemoryStore, Store};
use crate::token::{Keyring, SigningKey};
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
    current_key: Option<Result<SigningKey, ConfigError>>,
    previous_key: Option<Result<SigningKey, ConfigError>>,
    clock: Option<SharedClock>,
    store: Option<Arc<dyn Store>>,
    renderer: Arc<dyn Render>,
    bypass: Vec<Box<BypassFn>>,
    client_ip: ClientIp,
    gates: Vec<Rule>,
    risk: Option<Box<RiskFn>>,
    edge: Option<Result<EdgeTokens, ConfigError>>,
    /// The languages of the default renderer, when set (the admin status shows them); a
    /// settings file's that cannot be used, for `build` to say.
    languages: Option<Result<Vec<String>, ConfigError>>,
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
            risk: None,
            edge: None,
            languages: Some(Ok(crate::response::BUILT_IN_LANGUAGES
                .iter()
                .map(|t| t.to_string())
                .collect())),
        }
    }

    // Every setter of a setting that is data, each with its doc, as the settings declare them.
    crate::config::settings::builder_setters!();

    /// The capacity follows the app's health within `terms` ([`crate::auto`]): every gateway
    /// of the room measures the admitted requests it passes to the app and reports them to the
    /// store, and the one holding the room's lease decides the capacity each window and writes
    /// it there, where every gateway reads it. Give every gateway of a fleet the same terms. A
    /// capacity set by hand ([`RoomControl::set_capacity`](crate::control::RoomControl::set_capacity),
    /// the admin API) turns it off for all of them until
    /// [`RoomControl::resume_auto`](crate::control::RoomControl::resume_auto). Terms it cannot
    /// run with are refused at build ([`ConfigError::InvalidAutoCapacity`]), and so is a store
    /// that cannot share the decision ([`ConfigError::StoreWithoutAuto`]).
    pub fn auto_capacity(mut self, terms: AutoCapacity) -> Self {
        self.settings.auto_capacity = Some(terms);
        self
    }

    /// Admitted visitors also get a short-lived token signed with Ed25519 that a CDN edge can
    /// check with the room's public keys ([`crate::edge`]), issued with every admission token
    /// (never per request); the keys are served as a JWKS at `{prefix}/{room}/keys`. Tokens
    /// the room cannot issue are refused at build ([`ConfigError::InvalidEdgeTokens`]).
    pub fn edge_tokens(mut self, tokens: EdgeTokens) -> Self {
        self.edge = Some(Ok(tokens));
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

    /// How rejections are rendered. Default [`DefaultRenderer`], in every built-in language.
    pub fn renderer(mut self, renderer: impl Render) -> Self {
        self.renderer = Arc::new(renderer);
        self.languages = None;
        self
    }

    /// The [`DefaultRenderer`] in these languages, chosen per request from `Accept-Language`
    /// ([`Languages`]): the room's renderer from now on (a later
    /// [`renderer`](Self::renderer) replaces it, as this replaces an earlier one). The admin
    /// status shows them.
    pub fn languages(mut self, languages: Languages) -> Self {
        self.languages = Some(Ok(languages.tags().to_vec()));
        self.renderer = Arc::new(DefaultRenderer::new().with_languages(languages));
        self
    }

    /// Requests for which `rule` returns `true` skip the room entirely: they go straight to the
    /// inner service, with no [`Admission`](crate::Admission) in their extensions, no cookie and
    /// no store call, and no limit counts them. Health checks, static assets, webhooks, admin
    /// addresses. Several rules: a request matching any of them bypasses. Rules run on every
    /// request, before anything but the gates (a gated route is never bypassed), so keep them
    /// cheap.
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

    /// The risk decision for each new visitor (one without a queue cookie), made by `decide`:
    /// [`Risk::Low`] joins the line at once (no challenge, even with proof of work on),
    /// [`Risk::Medium`] solves the proof-of-work challenge first (when it is on),
    /// [`Risk::High`] is refused with `403`, state `refused`. Without a hook, the default
    /// scorer decides when proof of work is on or [`risky_networks`](Self::risky_networks) are
    /// listed ([`NewVisitor::default_risk`]); `decide` can call it too. A hook runs for every
    /// new visitor, before anything is signed: keep it cheap. See
    /// [`risk`](crate::defences::risk), also for challenging everyone (`|_| Risk::Medium`).
    ///
    /// ```
    /// use tower_waiting_room::defences::risk::Risk;
    /// use tower_waiting_room::{ProofOfWork, WaitingRoomLayer};
    ///
    /// let room = WaitingRoomLayer::builder("drop")
    ///     .capacity(500)
    ///     .secret([7u8; 32])
    ///     .proof_of_work(ProofOfWork::new(18))
    ///     // Visitors from the app's own mobile app, known by its path, always solve it.
    ///     .risk(|visitor| match visitor.request().path().starts_with("/api/") {
    ///         true => Risk::Medium,
    ///         false => visitor.default_risk(),
    ///     })
    ///     .build();
    /// assert!(room.is_ok());
    /// ```
    pub fn risk<F>(mut self, decide: F) -> Self
    where
        F: Fn(&NewVisitor<'_>) -> Risk + Send + Sync + 'static,
    {
        self.risk = Some(Box::new(decide));
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

    /// Validates the configuration and builds the layer. Nothing is half-built: every
    /// setting is checked first, and the first one refused is the error.
    pub fn build(self) -> Result<WaitingRoomLayer, ConfigError> {
        // Validate: every check, before anything is assembled.
        let checked = validate::settings(&self.room, self.settings, &self.gates)?;
        let s = checked.settings;
        let keys = validate::keyring(self.current_key, self.previous_key)?;
        let auto = s.auto_capacity;
        if let Some(terms) = &auto {
            terms.check()?;
        }
        let languages = self.languages.transpose()?.unwrap_or_default();
        let edge = self.edge.transpose()?;
        if let Some(edge) = &edge {
            edge.check(&self.room, s.refresh)?;
        }
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
        if s.new_visitor_limit.is_some() || s.bind_tokens_to_network || !s.risky_networks.is_empty()
        {
            client_ip.log_source(&self.room);
        }
        // The risk decision runs when something can come of it: the app's hook, a challenge to
        // give (medium), or networks to refuse (high).
        let risk = (self.risk.is_some()
            || checked.proof_of_work.is_some()
            || !checked.risky_networks.is_empty())
        .then(|| RiskGate::new(self.risk, checked.risky_networks));
        let defences = Defences {
            bypass: self.bypass,
            client_ip,
            new_visitors: s.new_visitor_limit.map(|l| Limiter::new(l, MAX_TRACKED)),
            polls: s.poll_limit.map(|l| Limiter::new(l, MAX_TRACKED)),
            proof: checked.proof_of_work.map(ProofGate::new),
            risk,
            warned_no_ip: Default::default(),
        };
        let clock: SharedClock = self.clock.unwrap_or_else(|| Arc::new(SystemClock));
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(MemoryStore::with_shared_clock(clock.clone())));
        if s.single_use_tickets && Arc::clone(&store).tickets().is_none() {
            return Err(ConfigError::StoreWithoutTickets);
        }
        if auto.is_some() && Arc::clone(&store).auto().is_none() {
            return Err(ConfigError::StoreWithoutAuto);
        }
        let policy = RoomPolicy::new(&self.room, checked.capacity)
            .with_admission_rate(s.admission_rate)
            .with_ttls(s.active_ttl, s.grant_ttl, s.queue_ttl)
            .with_abandon_after(s.effective_abandon_after())
            .with_max_queue_len(s.max_queue_len)
            .with_schedule(schedule);
        let config = RoomConfig {
            policy,
            settings: s,
            cookies: checked.cookies,
            queue_header: checked.queue_header,
            token_header: checked.token_header,
            languages,
        };
        let room = Room::new(RoomParts {
            config,
            keys,
            store,
            clock,
            renderer: self.renderer,
            defences,
            gates: self.gates,
            auto,
            edge,
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
        let (settings, secret) = self.settings_and_secret(&env)?;
        let mut builder = WaitingRoomLayer::builder(self.room());
        builder.settings = settings.clone();
        // Keys that cannot be used are the builder's error, at `build`.
        match self.edge.read(&env)? {
            Some(Ok(tokens)) => builder.edge = Some(Ok(tokens)),
            Some(Err(e)) => builder.edge = Some(Err(e)),
            None => {}
        }
        match self.languages.read() {
            Some(Ok(languages)) => builder = builder.languages(languages),
            Some(Err(e)) => builder.languages = Some(Err(e)),
            None => {}
        }
        // The current key under the file's id for it, and a previous one still accepted.
        match secret {
            Some(secret) => builder.current_key = Some(self.rotation.current(&secret)),
            None if self.rotation.secret_id.is_some() => {
                return Err(RoomFileError::KeyIdWithoutSecret {
                    key: "secret_id".to_owned(),
                })
            }
            None => {}
        }
        if let Some(previous) = self.rotation.previous(&env)? {
            builder.previous_key = Some(previous);
        }
        Ok(builder)
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
        EventSchedule::derived(keys.current().mac(), room, opens_at)
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
