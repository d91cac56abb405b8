//! The room itself: the three stages wired together, shared by every clone of the layer.
//!
//! [`Room::classify`] runs the two stateless stages synchronously and says what to do next
//! ([`Next`]): pass the request through, answer it here, or ask the store. A store question is a
//! [`Pending`] step that carries its own context and, once the store has answered, says what to
//! do next in the same terms. The service and its future only carry these out.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Room`] and the dispatch of a request |
//! | `fast_path` | stage 2 for an admitted visitor whose fresh token this gateway has verified before: the least code per request |
//! | `visitor` | who a request comes from: its admission token, queue cookie, network |
//! | `endpoints` | the room's own endpoints: status, leave, proof |
//! | `events` | the events endpoint: a waiter's Server-Sent Events stream, fed by the snapshot |
//! | `gate` | gated routes: admitted (by cookie, token header or ticket header; with single-use tickets, by the ticket, once) or `403 not_admitted` (`ticket_used`) |
//! | `pending` | the store steps and what each answer means, the fail policy included |
//! | `snapshot` | waiting polls answered at the gateway from its snapshot of the line, and the check-ins it batches |
//! | `drain` | the drain fail policy: letting the front of the line in, at the last known pace, while the store is away |
//! | `reply` | redirects, rejections, issued cookies, the headers every answer carries |
//! | `ticket` | single-use checkout tickets: minted at admission and on the status endpoint, and the redeem step of a gated route |

mod drain;
mod ending;
mod endpoints;
pub(crate) mod events;
mod fast_path;
mod gate;
mod observe;
mod pending;
mod reply;
mod snapshot;
mod ticket;
mod visitor;

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::Request;

pub(crate) use self::ending::{strip_end_slot, Slot};
use self::pending::FailureLog;
pub(crate) use self::pending::{Next, Pending};
pub(crate) use self::reply::{with_room_headers, Issued};
use self::snapshot::{Asking, LineView};
use self::visitor::{Carried, Visitor};
use crate::client::RequestInfo;
use crate::clock::SharedClock;
use crate::config::RoomConfig;
use crate::defences::{Defences, Limiter};
use crate::outcome::{Admission, AdmittedBy};
use crate::response::Render;
use crate::session::SessionId;
use crate::store::{RoomStats, Store, StoreFuture};
use crate::telemetry::{self, Outcome, RoomMetrics, Stage};
use crate::token::{AdmissionToken, Keyring, QueueCookie};
use crate::vocab::Rule;

/// What the builder assembles a room from.
pub(crate) struct RoomParts {
    pub(crate) config: RoomConfig,
    pub(crate) keys: Keyring,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: SharedClock,
    pub(crate) renderer: Arc<dyn Render>,
    pub(crate) defences: Defences,
    /// Routes of the room that are gated: admitted or refused, never queued.
    pub(crate) gates: Vec<Rule>,
}

/// One room: its configuration, keys, store, clock, renderer and defences, and the paths of
/// its endpoints. Immutable once built, shared by every clone of the layer and service.
pub(crate) struct Room {
    config: RoomConfig,
    keys: Keyring,
    store: Arc<dyn Store>,
    clock: SharedClock,
    renderer: Arc<dyn Render>,
    defences: Defences,
    gates: Vec<Rule>,
    paths: EndpointPaths,
    /// Whether the room has warned that it binds tokens to networks without knowing the IP.
    warned_unknown_network: AtomicBool,
    /// Failed store calls, reported at most once per interval.
    store_failures: FailureLog,
    metrics: Arc<RoomMetrics>,
    /// The gateway's snapshot of the line, for waiting polls answered without the store.
    line: Arc<LineView>,
    /// Event streams open on this gateway ([`events`]).
    event_streams: Arc<AtomicUsize>,
}

/// `{prefix}/{room}/status`, `…/events`, `…/leave`, `…/proof`, made once.
struct EndpointPaths {
    status: String,
    events: String,
    leave: String,
    proof: String,
}

impl Room {
    pub(crate) fn new(parts: RoomParts) -> Self {
        let endpoint = |name: &str| {
            let c = &parts.config;
            format!("{}/{}/{name}", c.path_prefix, c.room())
        };
        let paths = EndpointPaths {
            status: endpoint("status"),
            events: endpoint("events"),
            leave: endpoint("leave"),
            proof: endpoint("proof"),
        };
        let metrics = Arc::new(RoomMetrics::new(&parts.config.policy.room));
        let line = Arc::new(LineView::new(parts.store.keeps_snapshots()));
        Self {
            config: parts.config,
            keys: parts.keys,
            // Every store call the room makes is counted and timed, whatever the store.
            store: telemetry::metered(parts.store, &metrics),
            clock: parts.clock,
            renderer: parts.renderer,
            defences: parts.defences,
            gates: parts.gates,
            paths,
            warned_unknown_network: AtomicBool::new(false),
            store_failures: FailureLog::new(),
            metrics,
            line,
            event_streams: Arc::default(),
        }
    }

    pub(crate) fn config(&self) -> &RoomConfig {
        &self.config
    }

    pub(crate) fn keys(&self) -> &Keyring {
        &self.keys
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Counts for the room, from the store.
    pub(crate) fn stats(&self) -> StoreFuture<RoomStats> {
        self.store.stats(&self.config.policy)
    }

    pub(crate) fn metrics(&self) -> &RoomMetrics {
        &self.metrics
    }

    /// Keys tracked by the new-visitor and the poll limiters.
    pub(crate) fn limiter_sizes(&self) -> (usize, usize) {
        let d = &self.defences;
        (
            d.new_visitors.as_ref().map_or(0, Limiter::len),
            d.polls.as_ref().map_or(0, Limiter::len),
        )
    }

    /// Whether a bypass rule matches: the request skips the room entirely (no admission, no
    /// cookie, no store call, not counted by any limit).
    pub(crate) fn bypasses<B>(&self, req: &Request<B>) -> bool {
        !self.defences.bypass.is_empty() && self.defences.bypasses(&RequestInfo::new(req))
    }

    /// The room's own gated routes ([`WaitingRoomBuilder::gate`](crate::WaitingRoomBuilder::gate)).
    pub(crate) fn gates(&self) -> &[Rule] {
        &self.gates
    }

    /// Whether `req` is for one of the room's gated routes (never one of its endpoints).
    pub(crate) fn is_gated<B>(&self, req: &Request<B>) -> bool {
        !self.gates.is_empty()
            && !self.is_endpoint_path(req.uri().path())
            && self.gates.iter().any(|rule| rule.matches(req))
    }

    /// Whether `path` is under `{prefix}/{room}/`, where the room's endpoints are.
    fn is_endpoint_path(&self, path: &str) -> bool {
        let c = &self.config;
        path.strip_prefix(c.path_prefix.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|rest| rest.strip_prefix(c.room()))
            .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Stages 1 and 2, and the room's own endpoints.
    pub(crate) fn classify<B>(&self, req: &Request<B>) -> Next {
        let now = self.clock.now_ms();
        // The one read of the request's cookies; everything below works from it.
        let carried = self.carried(req);
        // Stage 2 for nearly every request of a sale, with the least code run (`fast_path`).
        if let Some(admission) = self.fast_path(req, &carried, now) {
            return self.counted(Stage::FastPath, Outcome::Passed, Next::pass(admission));
        }
        self.classify_whole(req, &carried, now)
    }

    /// [`classify`](Self::classify) of a request the fast path left. Out of line, so that the
    /// fast path's code stays together and small.
    #[inline(never)]
    fn classify_whole<B>(&self, req: &Request<B>, carried: &Carried<'_>, now: u64) -> Next {
        if let Some(next) = self.endpoint(req, carried, now) {
            return next;
        }
        let uses_headers = carried.uses_headers();
        match self.visitor(req, carried, now) {
            // Stage 2: a valid admission token, fresh enough to need no store call.
            Some(Visitor::Admitted(token)) if token.is_fresh(now, self.config.refresh) => self
                .counted(
                    Stage::FastPath,
                    Outcome::Passed,
                    Next::pass(self.token_admission(&token)),
                ),
            // Past refresh: a heartbeat, within the session's poll limit. Over it, the token is
            // still valid and the fast path needs no store: it passes, not renewed.
            Some(Visitor::Admitted(token)) => match self.check_polls(token.session(), now) {
                Ok(()) => self.ask_heartbeat(token, uses_headers),
                Err(_) => self.counted(
                    Stage::FastPath,
                    Outcome::Passed,
                    Next::pass(self.token_admission(&token)),
                ),
            },
            // Proof of work on and not yet solved: the challenge, no store call.
            Some(Visitor::Queued(cookie)) if self.needs_proof(&cookie) => self.counted(
                Stage::CookieCheck,
                Outcome::Challenge,
                Next::Answer(self.challenge(req, cookie.session(), now)),
            ),
            Some(Visitor::Queued(cookie)) => match self.check_polls(cookie.session(), now) {
                Ok(()) => self
                    .waiting_poll_at_gateway(req, cookie, uses_headers, Asking::Page, now)
                    .unwrap_or_else(|| {
                        self.ask_enter(cookie.session(), Some(cookie), false, uses_headers)
                    }),
                Err(wait) => self.counted(
                    Stage::CookieCheck,
                    Outcome::Limited,
                    Next::Answer(self.limited(wait, req)),
                ),
            },
            // Stage 1: no queue cookie, no state: sign one and send the visitor back here.
            None => match self.check_new_visitor(req, now) {
                Ok(()) => self.counted(
                    Stage::CookieCheck,
                    Outcome::NewVisitor,
                    Next::Answer(self.first_visit(req, uses_headers, now)),
                ),
                Err(wait) => self.counted(
                    Stage::CookieCheck,
                    Outcome::Limited,
                    Next::Answer(self.limited(wait, req)),
                ),
            },
        }
    }

    /// The per-session limit on store questions: every store call a session can cause goes
    /// through it (entering, heartbeats, the entry after a heartbeat that found no slot, the
    /// status and leave endpoints), and so do proof submissions. A refused check counts nothing.
    fn check_polls(&self, session: SessionId, now: u64) -> Result<(), Duration> {
        match &self.defences.polls {
            Some(limiter) => limiter.check(session, now),
            None => Ok(()),
        }
    }

    /// The per-client-IP limit on new queue entries (stage 1). No IP found: no limit, and one
    /// warning in the log.
    fn check_new_visitor<B>(&self, req: &Request<B>, now: u64) -> Result<(), Duration> {
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

    /// The client IP, from wherever the room was told to find it (see [`client`](crate::client)).
    fn client_ip<B>(&self, req: &Request<B>) -> Option<IpAddr> {
        self.defences.client_ip.find(&RequestInfo::new(req))
    }

    /// Whether this queue cookie must solve a proof-of-work challenge before it joins the line.
    fn needs_proof(&self, cookie: &QueueCookie) -> bool {
        self.defences.proof.is_some() && !cookie.is_proven()
    }

    fn admission(&self, session: SessionId, expires_at_ms: u64, by: AdmittedBy) -> Admission {
        Admission {
            room: self.config.policy.room.clone(),
            session,
            expires_at_ms,
            by,
            ended: ending::end_flag(),
        }
    }

    /// An admission that the token alone vouches for.
    fn token_admission(&self, token: &AdmissionToken) -> Admission {
        self.admission(token.session(), token.expires_at_ms(), AdmittedBy::Token)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{header, HeaderValue, Request, Response, StatusCode};
    use tower::{service_fn, Layer, ServiceExt};

    use crate::cookies::steps_so_far;
    use crate::testing::TestRoom;

    /// Sends `req` through the room and says how many times its cookies were read.
    async fn reads(room: &TestRoom, path: &str, method: &str, cookies: &[&HeaderValue]) -> usize {
        let mut req = Request::builder().method(method).uri(path);
        for c in cookies {
            req = req.header(header::COOKIE, (*c).clone());
        }
        let svc = room.layer().layer(service_fn(|_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::new(String::new()))
        }));
        let before = steps_so_far().1;
        let res = svc.oneshot(req.body(()).unwrap()).await.unwrap();
        assert!(res.status() != StatusCode::INTERNAL_SERVER_ERROR);
        steps_so_far().1 - before
    }

    #[tokio::test(flavor = "current_thread")]
    async fn each_request_reads_its_cookies_once() {
        let room = TestRoom::new("once", 1);
        let (_, inside) = room.admit().await;
        let (_, queued) = room.queue_cookie();
        let (_, stale) = room.token_without_slot();
        let status = "/__waitingroom/once/status";
        let leave = "/__waitingroom/once/leave";
        let cases: [(&str, &str, &str, Vec<&HeaderValue>); 7] = [
            ("first visit", "/", "GET", vec![]),
            ("fresh token", "/", "GET", vec![&inside]),
            ("in line", "/", "GET", vec![&queued]),
            ("status", status, "GET", vec![&queued]),
            ("leave", leave, "POST", vec![&queued]),
            (
                "in line again, headers of its own",
                "/",
                "GET",
                vec![&queued, &queued],
            ),
            ("stale token and place", "/", "GET", vec![&inside, &queued]),
        ];
        for (what, path, method, cookies) in &cases {
            assert_eq!(reads(&room, path, method, cookies).await, 1, "{what}");
        }
        // Past refresh: a heartbeat, then (no slot) an entry, then an answer.
        room.clock().advance(Duration::from_secs(20));
        assert_eq!(reads(&room, "/", "GET", &[&stale]).await, 1, "stale token");
        assert_eq!(reads(&room, "/", "GET", &[&inside]).await, 1, "heartbeat");
    }
}
