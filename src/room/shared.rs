//! [`Core`]: what every stage of the room shares (configuration, keys, store, clock, renderer,
//! defences, metrics, the endpoints' paths), and the few decisions made from those alone. A
//! stage is handed it explicitly (`tickets.mint(core, ..)`), so what a stage reads is in its
//! signature.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::Request;

use crate::client::network::Network;
use crate::client::RequestInfo;
use crate::clock::SharedClock;
use crate::config::RoomConfig;
use crate::defences::risk::Risk;
use crate::defences::Defences;
use crate::edge::EdgeTokens;
use crate::outcome::{Admission, AdmittedBy};
use crate::response::Render;
use crate::session::SessionId;
use crate::store::Store;
use crate::telemetry::{Outcome, RoomMetrics, Stage};
use crate::token::{AdmissionToken, Keyring, QueueCookie};
use crate::vocab::loose;

/// The room's shared parts. Immutable once built (but for its once-only warnings).
pub(crate) struct Core {
    pub(super) config: RoomConfig,
    pub(super) keys: Keyring,
    /// Metered: every store call the room makes is counted and timed, whatever the store.
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: SharedClock,
    pub(super) renderer: Arc<dyn Render>,
    pub(super) defences: Defences,
    pub(super) metrics: Arc<RoomMetrics>,
    pub(super) paths: EndpointPaths,
    /// Whether waiters can listen for events here: the store keeps snapshots and streams are
    /// not turned off (the waiting page is then given the endpoint). Fixed when the room is
    /// built.
    pub(super) offers_events: bool,
    /// Edge tokens, issued with every admission token ([`crate::edge`]).
    pub(super) edge: Option<EdgeTokens>,
    /// Whether the room has warned that it binds tokens to networks without knowing the IP.
    warned_unknown_network: AtomicBool,
}

/// The other rooms behind the same layer, as a gate of one of them sees them: a value that is
/// none of this room's may be another's, and the refusal then says `other_room`, not `invalid`.
pub(crate) trait OtherRooms {
    /// Whether `signed` holds for the shared parts of some room other than `own`.
    fn any_other(&self, own: &Core, signed: &mut dyn FnMut(&Core) -> bool) -> bool;
}

/// `{prefix}/{room}/status`, `…/events`, `…/leave`, `…/proof`, `…/keys`, made once.
pub(super) struct EndpointPaths {
    pub(super) status: String,
    pub(super) events: String,
    pub(super) leave: String,
    pub(super) proof: String,
    pub(super) keys: String,
}

impl EndpointPaths {
    pub(super) fn new(config: &RoomConfig) -> Self {
        let endpoint =
            |name: &str| format!("{}/{}/{name}", config.settings.path_prefix, config.room());
        Self {
            status: endpoint("status"),
            events: endpoint("events"),
            leave: endpoint("leave"),
            proof: endpoint("proof"),
            keys: endpoint("keys"),
        }
    }
}

impl Core {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        config: RoomConfig,
        keys: Keyring,
        store: Arc<dyn Store>,
        clock: SharedClock,
        renderer: Arc<dyn Render>,
        defences: Defences,
        metrics: Arc<RoomMetrics>,
        offers_events: bool,
        edge: Option<EdgeTokens>,
    ) -> Self {
        Self {
            paths: EndpointPaths::new(&config),
            edge,
            config,
            keys,
            store,
            clock,
            renderer,
            defences,
            metrics,
            offers_events,
            warned_unknown_network: AtomicBool::new(false),
        }
    }

    pub(super) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// `x`, the answer of a decision at `stage` with `outcome`, counted: one call at each
    /// point where the room decides, so a decision is counted exactly once.
    #[inline]
    pub(super) fn counted<T>(&self, stage: Stage, outcome: Outcome, x: T) -> T {
        self.metrics.request(stage, outcome);
        x
    }

    /// Whether `path` is under `{prefix}/{room}/`, where the room's endpoints are.
    pub(super) fn is_endpoint_path(&self, path: &str) -> bool {
        let c = &self.config;
        let prefix = c.settings.path_prefix.as_str();
        path.strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|rest| rest.strip_prefix(c.room()))
            .is_some_and(|rest| rest.starts_with('/'))
            // Still under them read as an app may (`/__waitingroom/main/..%2fcheckout` is not).
            && {
                let read = loose(path);
                let room = c.room();
                read.strip_prefix(&*loose(prefix))
                    .and_then(|rest| rest.strip_prefix('/'))
                    .filter(|rest| rest.get(..room.len()).is_some_and(|r| r.eq_ignore_ascii_case(room)))
                    .is_some_and(|rest| rest[room.len()..].starts_with('/'))
            }
    }

    /// The per-session limit on store questions: every store call a session can cause goes
    /// through it (entering, heartbeats, the entry after a heartbeat that found no slot, the
    /// status and leave endpoints), and so do proof submissions. A refused check counts nothing.
    pub(super) fn check_polls(&self, session: SessionId, now: u64) -> Result<(), Duration> {
        match &self.defences.polls {
            Some(limiter) => limiter.check(session, now),
            None => Ok(()),
        }
    }

    /// Whether an admission token past `refresh`, whose heartbeat the poll limit holds back,
    /// may pass without it: while younger than twice `refresh`, so that a burst of requests
    /// carrying the token the browser had (a page's assets, all at once) is not refused while
    /// one of them renews it. Past that it passes only renewed: a visitor the store no longer
    /// counts inside (dropped by an operator, left, their slot ended or expired) would
    /// otherwise stay in for the token's whole life by keeping over the limit, the few
    /// heartbeats it lets through refused and every other request passed.
    pub(super) fn passes_unrenewed(&self, token: &AdmissionToken, now: u64) -> bool {
        token.is_fresh(now, self.config.settings.refresh.saturating_mul(2))
    }

    /// The per-client-IP limit on new queue entries (stage 1). No IP found: no limit, and one
    /// warning in the log.
    pub(super) fn check_new_visitor<B>(&self, req: &Request<B>, now: u64) -> Result<(), Duration> {
        let Some(limiter) = &self.defences.new_visitors else {
            return Ok(());
        };
        match self.client_ip(req) {
            Some(ip) => limiter.check_client(ip, now),
            None => {
                if !self.defences.warned_no_ip.swap(true, Ordering::Relaxed) {
                    self.defences.client_ip.warn_not_found(self.config.room());
                }
                Ok(())
            }
        }
    }

    /// The risk of a new visitor (stage 1), counted; `None` when the room makes no risk
    /// decision (no hook, no proof of work, no listed networks).
    pub(super) fn risk_of<B>(&self, req: &Request<B>) -> Option<Risk> {
        let gate = self.defences.risk.as_ref()?;
        let (risk, by) = gate.decide(RequestInfo::new(req), self.client_ip(req));
        self.metrics.risk(risk, by);
        Some(risk)
    }

    /// The client IP, from wherever the room was told to find it (see [`client`](crate::client)).
    fn client_ip<B>(&self, req: &Request<B>) -> Option<IpAddr> {
        self.defences.client_ip.find(&RequestInfo::new(req))
    }

    /// With network binding on, the request's network (the client IP's /24 or /48), which
    /// tokens are bound to when issued and must match when checked; `Unknown` without a client
    /// IP (one warning in the log). `None` when binding is off.
    pub(super) fn network_binding<B>(&self, req: &Request<B>) -> Option<Network> {
        if !self.config.settings.bind_tokens_to_network {
            return None;
        }
        let ip = self.client_ip(req);
        if ip.is_none() && !self.warned_unknown_network.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                room = self.config.room(),
                "no client IP for a request while admission tokens are bound to networks: \
                 tokens issued without an IP admit only requests without an IP (said once): {}",
                self.defences.client_ip.remedy()
            );
        }
        Some(Network::of(ip))
    }

    /// Whether this queue cookie must solve a proof-of-work challenge before it joins the line.
    pub(super) fn needs_proof(&self, cookie: &QueueCookie) -> bool {
        self.defences.proof.is_some() && !cookie.is_proven()
    }

    pub(super) fn admission(
        &self,
        session: SessionId,
        expires_at_ms: u64,
        by: AdmittedBy,
    ) -> Admission {
        Admission {
            room: self.config.policy.room.clone(),
            session,
            expires_at_ms,
            by,
            ended: super::ending::end_flag(),
        }
    }

    /// An admission that the token alone vouches for.
    pub(super) fn token_admission(&self, token: &AdmissionToken) -> Admission {
        self.admission(token.session(), token.expires_at_ms(), AdmittedBy::Token)
    }
}
