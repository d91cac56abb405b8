//! The room itself: its stages wired together, shared by every clone of the layer.
//!
//! [`Room::classify`] runs the two stateless stages synchronously and says what to do next
//! ([`Next`]): pass the request through, answer it here, or ask the store. A store question is a
//! [`Pending`] step that carries its own context and, once the store has answered, says what to
//! do next in the same terms. The service and its future only carry these out.
//!
//! [`Room`] holds what every stage shares ([`Core`]) and the stages that keep state of their
//! own; each stage is a type in its own file, whose methods are handed the shared parts they
//! read (`room.tickets.mint(core, ..)`), so where a method lives is its module path.
//!
//! | file | type | what |
//! |---|---|---|
//! | `mod.rs` | [`Room`] | the shared parts and the stages, and the dispatch of a request (`classify`) |
//! | `shared` | [`Core`] | configuration, keys, store, clock, renderer, defences, metrics, the endpoints' paths; the per-session and per-IP limits |
//! | `fast_path` | (`admit`) | stage 2 for an admitted visitor whose fresh token this gateway has verified before: the least code per request |
//! | `visitor` | `Carried`, `Visitor` | who a request comes from: its admission token, queue cookie, network |
//! | `endpoints` | (functions) | the room's own endpoints: status, events, leave, proof |
//! | `events` | `EventStreams`, `EventStream` | the events endpoint: a waiter's Server-Sent Events stream, fed by the snapshot, and the count of open streams |
//! | `gate` | `Gates`, `GateHeartbeat`, `Refusal` | gated routes: admitted (by cookie, token header or ticket header; with single-use tickets, by the ticket, once) or `403 not_admitted` (`ticket_used`) |
//! | `pending` | [`Next`], [`Pending`] | the store steps and what each answer means; the stages' verdicts made the room's |
//! | `verdict` | `Verdict` | what a stage says of a request in its own terms: pass, answer, or the stage's own next step |
//! | `failure` | `FailureLog` | the memory of failed store calls (reported once per interval; whether the store seems down) |
//! | `ladder` | `Rung` | what a visitor without a slot gets when the store could not decide: scheduled, closed, the fail policy, busy; decided once for pages, the status endpoint and gates |
//! | `snapshot` | `LineView` | the gateway's snapshot of the line: waiting polls answered from it, and the check-ins it batches |
//! | `drain` | `Drained` | the drain fail policy: letting the front of the line in, at the last known pace, while the store is away |
//! | `reply` | `Replies`, [`Issued`] | redirects, rejections, issued cookies, the headers every answer carries |
//! | `ticket` | `Tickets` | single-use checkout tickets: minted at admission and on the status endpoint, and the redeem step of a gated route |
//! | `ending` | [`Slot`] | the app ending a visitor's slot (checkout finished) |

mod drain;
mod ending;
mod endpoints;
pub(crate) mod events;
mod failure;
mod fast_path;
mod gate;
mod ladder;
mod pending;
mod reply;
mod shared;
mod snapshot;
mod ticket;
mod verdict;
mod visitor;

use std::sync::Arc;

use http::{HeaderMap, Request};

pub(crate) use self::ending::{strip_end_slot, Slot};
use self::events::EventStreams;
use self::failure::FailureLog;
use self::gate::Gates;
pub(crate) use self::pending::{Next, Pending};
use self::reply::Replies;
pub(crate) use self::reply::{with_room_headers, Issued};
use self::shared::Core;
use self::snapshot::{Asking, LineView};
use self::ticket::Tickets;
use self::visitor::{Carried, Visitor};
use crate::client::RequestInfo;
use crate::clock::SharedClock;
use crate::config::RoomConfig;
use crate::defences::risk::Risk;
use crate::defences::{Defences, Limiter};
use crate::response::Render;
use crate::store::{RoomStats, Store, StoreError, StoreFuture};
use crate::telemetry::{self, EndedBy, Outcome, RoomMetrics, Stage};
use crate::token::Keyring;
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

/// One room: the parts its stages share ([`Core`]) and the stages that keep state of their
/// own. Immutable once built (but for that state), shared by every clone of the layer and
/// service.
pub(crate) struct Room {
    core: Core,
    /// The room's gated routes.
    gates: Gates,
    /// Failed store calls, reported at most once per interval, and whether the store seems
    /// down (the fail policy's memory).
    failures: FailureLog,
    /// The gateway's snapshot of the line, for waiting polls answered without the store.
    line: Arc<LineView>,
    /// Event streams open on this gateway ([`events`]).
    streams: EventStreams,
    /// Single-use checkout tickets.
    tickets: Tickets,
}

impl Room {
    pub(crate) fn new(parts: RoomParts) -> Self {
        let metrics = Arc::new(RoomMetrics::new(&parts.config.policy.room));
        // Every store call the room makes is counted and timed, whatever the store; the
        // stages that use a capability of the store hold it (metered too), if it has it.
        let store = telemetry::metered(parts.store, &metrics);
        let line = Arc::new(LineView::new(Arc::clone(&store).snapshots()));
        let offers_events = line.supported() && parts.config.settings.max_event_streams > 0;
        let tickets = Tickets::new(
            Arc::clone(&store)
                .tickets()
                .filter(|_| parts.config.settings.single_use_tickets),
        );
        Self {
            core: Core::new(
                parts.config,
                parts.keys,
                store,
                parts.clock,
                parts.renderer,
                parts.defences,
                metrics,
                offers_events,
            ),
            gates: Gates::new(parts.gates),
            failures: FailureLog::new(),
            line,
            streams: EventStreams::new(),
            tickets,
        }
    }

    pub(crate) fn config(&self) -> &RoomConfig {
        &self.core.config
    }

    pub(crate) fn keys(&self) -> &Keyring {
        &self.core.keys
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.core.store
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.core.now_ms()
    }

    /// Counts for the room, from the store.
    pub(crate) fn stats(&self) -> StoreFuture<RoomStats> {
        self.core.store.stats(&self.core.config.policy)
    }

    pub(crate) fn metrics(&self) -> &RoomMetrics {
        &self.core.metrics
    }

    /// Keys tracked by the new-visitor and the poll limiters.
    pub(crate) fn limiter_sizes(&self) -> (usize, usize) {
        let d = &self.core.defences;
        (
            d.new_visitors.as_ref().map_or(0, Limiter::len),
            d.polls.as_ref().map_or(0, Limiter::len),
        )
    }

    /// Whether a bypass rule matches: the request skips the room entirely (no admission, no
    /// cookie, no store call, not counted by any limit).
    pub(crate) fn bypasses<B>(&self, req: &Request<B>) -> bool {
        let d = &self.core.defences;
        !d.bypass.is_empty() && d.bypasses(&RequestInfo::new(req))
    }

    /// The room's own gated routes ([`WaitingRoomBuilder::gate`](crate::WaitingRoomBuilder::gate)).
    pub(crate) fn gates(&self) -> &[Rule] {
        self.gates.rules()
    }

    /// Whether `req` is for one of the room's gated routes (never one of its endpoints).
    pub(crate) fn is_gated<B>(&self, req: &Request<B>) -> bool {
        self.gates.matches(&self.core, req)
    }

    /// A request to a route gated by this room: with single-use tickets on, the request's
    /// ticket is used (see [`Tickets::redeem`]; an admission token alone does not pass);
    /// otherwise its admission token is checked (see [`Gates::admit`]). `others`: the other
    /// rooms behind the same layer.
    pub(crate) fn gate<B>(&self, req: &Request<B>, others: &[Arc<Room>]) -> Next {
        if self.tickets.mints() {
            return self.tickets.redeem(&self.core, req, others).into();
        }
        self.gates.admit(self, req, others).into()
    }

    /// Frees the slot the app ended (see [`Slot`]), and removes the admission cookie on its
    /// response.
    pub(crate) fn end_slot(
        &self,
        slot: &Slot,
        by: EndedBy,
        headers: &mut HeaderMap,
    ) -> StoreFuture<bool> {
        let core = &self.core;
        slot.end(&core.config, &core.metrics, &core.store, by, headers)
    }

    /// The store's answer to ending a slot. A failure is logged and otherwise ignored: the
    /// app's response goes out all the same, and the slot expires by itself.
    pub(crate) fn slot_ended(&self, answer: Result<bool, StoreError>) {
        if let Err(e) = answer {
            self.failures.log(
                &self.core,
                &e,
                "release (the app ended the slot; it will expire)",
            );
        }
    }

    /// Stages 1 and 2, and the room's own endpoints.
    pub(crate) fn classify<B>(&self, req: &Request<B>) -> Next {
        let core = &self.core;
        let now = core.clock.now_ms();
        // The one read of the request's cookies; everything below works from it.
        let carried = Carried::read(core, req);
        // Stage 2 for nearly every request of a sale, with the least code run (`fast_path`).
        if let Some(admission) = fast_path::admit(core, req, &carried, now) {
            return core.counted(Stage::FastPath, Outcome::Passed, Next::pass(admission));
        }
        self.classify_whole(req, &carried, now)
    }

    /// [`classify`](Self::classify) of a request the fast path left. Out of line, so that the
    /// fast path's code stays together and small.
    #[inline(never)]
    fn classify_whole<B>(&self, req: &Request<B>, carried: &Carried<'_>, now: u64) -> Next {
        let core = &self.core;
        if let Some(next) = endpoints::answer(self, req, carried, now) {
            return next;
        }
        let uses_headers = carried.uses_headers();
        match carried.visitor(core, req, now) {
            // Stage 2: a valid admission token, fresh enough to need no store call.
            Some(Visitor::Admitted(token)) if token.is_fresh(now, core.config.settings.refresh) => {
                core.counted(
                    Stage::FastPath,
                    Outcome::Passed,
                    Next::pass(core.token_admission(&token)),
                )
            }
            // Past refresh: a heartbeat, within the session's poll limit. Over it, the token is
            // still valid and the fast path needs no store: it passes, not renewed.
            Some(Visitor::Admitted(token)) => match core.check_polls(token.session(), now) {
                Ok(()) => Pending::heartbeat(core, token, uses_headers),
                Err(_) => core.counted(
                    Stage::FastPath,
                    Outcome::Passed,
                    Next::pass(core.token_admission(&token)),
                ),
            },
            // Proof of work on and not yet solved: the challenge, no store call.
            Some(Visitor::Queued(cookie)) if core.needs_proof(&cookie) => core.counted(
                Stage::CookieCheck,
                Outcome::Challenge,
                Next::Answer(Replies(core).challenge(req, cookie.session(), now)),
            ),
            Some(Visitor::Queued(cookie)) => match core.check_polls(cookie.session(), now) {
                Ok(()) => self
                    .line
                    .at_gateway(core, req, cookie, uses_headers, Asking::Page, now)
                    .map(Next::from)
                    .unwrap_or_else(|| {
                        Pending::enter(core, cookie.session(), Some(cookie), false, uses_headers)
                    }),
                Err(wait) => core.counted(
                    Stage::CookieCheck,
                    Outcome::Limited,
                    Next::Answer(Replies(core).limited(wait, req)),
                ),
            },
            // Stage 1: no queue cookie, no state: the risk decision, then sign one and send the
            // visitor back here.
            None => {
                let risk = core.risk_of(req);
                if risk == Some(Risk::High) {
                    return core.counted(
                        Stage::CookieCheck,
                        Outcome::Refused,
                        Next::Answer(Replies(core).refused(req)),
                    );
                }
                match core.check_new_visitor(req, now) {
                    Ok(()) => {
                        // Low risk needs no challenge: its cookie is issued cleared.
                        let cleared = risk == Some(Risk::Low);
                        let answer = Replies(core).first_visit(req, uses_headers, cleared, now);
                        core.counted(
                            Stage::CookieCheck,
                            Outcome::NewVisitor,
                            Next::Answer(answer),
                        )
                    }
                    Err(wait) => core.counted(
                        Stage::CookieCheck,
                        Outcome::Limited,
                        Next::Answer(Replies(core).limited(wait, req)),
                    ),
                }
            }
        }
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
