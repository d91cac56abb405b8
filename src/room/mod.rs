//! The room itself: its stages wired together, shared by every clone of the layer.
//!
//! [`Room::classify`] runs the two stateless stages synchronously and says what to do next
//! ([`Next`]): pass the request through, answer it here, or ask the store. A store question is a
//! [`Pending`] step that carries its own context; [`Room::poll_pending`] hands its answer to the
//! stage it belongs to, which says what to do next in the same terms. [`Room::settle`] reads a
//! `Next` once ([`Then`]), and the service and its future only carry that out.
//!
//! [`Room`] holds what every stage shares ([`Core`]) and the stages that keep state of their
//! own, and composes them: no stage names `Room`. Each stage is a type in its own file whose
//! methods are handed the parts they read (`tickets.with_slot(core, ..)`, a `Reads` or an
//! `Endpoints` listing them), so what a stage reads is in its signature and where a method
//! lives is its module path.
//!
//! | file | type | what |
//! |---|---|---|
//! | `mod.rs` | [`Room`], [`Then`] | the shared parts and the stages, the dispatch of a request (`classify`), of a store answer (`poll_pending`), and the reading of what to do (`settle`) |
//! | `shared` | [`Core`] | configuration, keys, store, clock, renderer, defences, metrics, the endpoints' paths; the per-session and per-IP limits |
//! | `fast_path` | (`admit`) | stage 2 for an admitted visitor whose fresh token this gateway has verified before: the least code per request |
//! | `visitor` | `Carried`, `Visitor` | who a request comes from: its admission token, queue cookie, network |
//! | `decision` | `Enter`, `Heartbeat`, `Status`, `Leave` | stage 3: the store's decision for a visitor, made the visitor's answer |
//! | `endpoints` | `Endpoints` | the room's own endpoints: status, events, leave, proof |
//! | `events` | `EventStreams`, `EventStream` | the events endpoint: a waiter's Server-Sent Events stream, fed by the snapshot, and the count of open streams |
//! | `gate` | `Gates`, `GateHeartbeat`, `Refusal` | gated routes: admitted (by cookie, token header or ticket header; with single-use tickets, by the ticket, once) or `403 not_admitted` (`ticket_used`) |
//! | `pending` | [`Next`], [`Pending`] | what to do with a request, and the store questions in flight; the stages' verdicts made the room's |
//! | `verdict` | `Verdict` | what a stage says of a request in its own terms: pass, answer, or the stage's own next step |
//! | `failure` | `FailureLog` | the memory of failed store calls (reported once per interval; whether the store seems down) |
//! | `ladder` | `Rung` | what a visitor without a slot gets when the store could not decide: scheduled, closed, the fail policy, busy; decided once for pages, the status endpoint and gates |
//! | `snapshot` | `LineView` | the gateway's snapshot of the line: waiting polls answered from it, and the check-ins it batches |
//! | `drain` | `Drained` | the drain fail policy: letting the front of the line in, at the last known pace, while the store is away |
//! | `reply` | `Replies`, [`Issued`] | redirects, rejections, issued cookies, the headers every answer carries |
//! | `ticket` | `Tickets` | single-use checkout tickets: minted at admission and on the status endpoint, and the redeem step of a gated route |
//! | `ending` | [`Slot`] | the app ending a visitor's slot (checkout finished) |

mod decision;
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
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Request, Response};

use self::decision::{Enter, Heartbeat, Reads};
pub(crate) use self::ending::{strip_app_headers, AppSaid, Slot};
use self::endpoints::Endpoints;
use self::events::EventStream;
use self::events::{EventStreams, EventsStart, Watched};
use self::failure::FailureLog;
use self::gate::Gates;
pub(crate) use self::pending::{Next, Pending};
use self::reply::Replies;
pub(crate) use self::reply::{with_room_headers, Issued};
use self::shared::{Core, OtherRooms};
use self::snapshot::{Asking, LineView};
use self::ticket::Tickets;
use self::visitor::{Carried, Visitor};
use crate::auto::{AutoCapacity, AutoStage, Measured, Sampled};
use crate::body::Chunks;
use crate::client::RequestInfo;
use crate::clock::SharedClock;
use crate::config::RoomConfig;
use crate::defences::risk::Risk;
use crate::defences::{Defences, Limiter};
use crate::edge::EdgeTokens;
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
    /// The capacity controller's terms, when the capacity follows the app.
    pub(crate) auto: Option<AutoCapacity>,
    /// Edge tokens, issued with every admission token, when the room has them.
    pub(crate) edge: Option<EdgeTokens>,
}

/// One room: the parts its stages share ([`Core`]) and the stages that keep state of their
/// own. Immutable once built (but for that state), shared by every clone of the layer and
/// service.
pub(crate) struct Room {
    /// Shared with the event streams open on this gateway, which outlive a request.
    core: Arc<Core>,
    /// The room's gated routes.
    gates: Gates,
    /// Failed store calls, reported at most once per interval, and whether the store seems
    /// down (the fail policy's memory).
    failures: Arc<FailureLog>,
    /// The gateway's snapshot of the line, for waiting polls answered without the store.
    line: Arc<LineView>,
    /// Event streams open on this gateway ([`events`]).
    streams: EventStreams,
    /// Single-use checkout tickets.
    tickets: Tickets,
    /// The capacity controller, when the capacity follows the app ([`crate::auto`]).
    auto: Option<Arc<AutoStage>>,
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
        // The builder refused auto capacity on a store that cannot share the decision.
        let auto = parts
            .auto
            .zip(Arc::clone(&store).auto())
            .map(|(terms, shared)| Arc::new(AutoStage::new(terms, shared)));
        Self {
            core: Arc::new(Core::new(
                parts.config,
                parts.keys,
                store,
                parts.clock,
                parts.renderer,
                parts.defences,
                metrics,
                offers_events,
                parts.edge,
            )),
            gates: Gates::new(parts.gates),
            failures: Arc::new(FailureLog::new()),
            line,
            streams: EventStreams::new(),
            tickets,
            auto,
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
        let core = &*self.core;
        if self.tickets.mints() {
            return self.tickets.redeem(core, req, &others).into();
        }
        self.gates
            .admit(core, &self.failures, &self.line, req, &others)
            .into()
    }

    /// Waits for the store's answer to `pending`, then says what to do next: each step's
    /// answer goes to the stage it belongs to, with the parts that stage reads.
    pub(crate) fn poll_pending<B>(
        &self,
        pending: &mut Pending,
        cx: &mut Context<'_>,
        req: &Request<B>,
    ) -> Poll<Next> {
        let (core, failures, line, tickets) =
            (&*self.core, &*self.failures, &*self.line, &self.tickets);
        let reads = Reads {
            core,
            failures,
            line,
            tickets,
        };
        Poll::Ready(match pending {
            Pending::Enter(step) => ready!(step.poll_next(cx, reads, req)),
            Pending::Heartbeat(step) => ready!(step.poll_next(cx, reads, req)),
            Pending::Status(step) => Next::Answer(ready!(step.poll_answer(cx, reads))),
            Pending::Leave(step) => Next::Answer(ready!(step.poll_answer(cx, core, failures, req))),
            Pending::Sync(step) => match ready!(step.poll_answer(cx, line, core, failures, req)) {
                Ok(res) => Next::Answer(res),
                Err(poll) => reads.unanswered(poll),
            },
            Pending::Gate(step) => ready!(step.poll_next(cx, core, failures, req)).into(),
            Pending::MintWithSlot(step) => {
                ready!(step.poll_next(cx, tickets, core, failures)).into()
            }
            Pending::StatusTicket(step) => {
                Next::Answer(ready!(step.poll_answer(cx, tickets, core, failures)))
            }
            Pending::Redeem(step) => ready!(step.poll_next(cx, tickets, core, failures)).into(),
        })
    }

    /// The response that opens a waiter's event stream (see [`events`]).
    pub(crate) fn open_events(&self, start: EventsStart) -> Response<EventStream> {
        events::open(
            Watched {
                core: Arc::clone(&self.core),
                line: Arc::clone(&self.line),
                failures: Arc::clone(&self.failures),
            },
            start,
        )
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
        let endpoints = Endpoints {
            core,
            line: &self.line,
            streams: &self.streams,
            tickets: &self.tickets,
        };
        if let Some(next) = endpoints::answer(endpoints, req, carried, now) {
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
            // Past refresh: a heartbeat, within the session's poll limit. Over it, a token not
            // yet twice `refresh` old passes, not renewed; an older one waits for the limit.
            Some(Visitor::Admitted(token)) => match core.check_polls(token.session(), now) {
                Ok(()) => Heartbeat::ask(core, token, uses_headers),
                Err(_) if core.passes_unrenewed(&token, now) => core.counted(
                    Stage::FastPath,
                    Outcome::Passed,
                    Next::pass(core.token_admission(&token)),
                ),
                Err(wait) => core.counted(
                    Stage::Store,
                    Outcome::Limited,
                    Next::Answer(Replies(core).limited(wait, req)),
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
                        Enter::ask(core, cookie.session(), Some(cookie), false, uses_headers)
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

/// A [`Next`] read once, for the service and its response future to carry out alike: the
/// admission already put into the request, the slot the app may end, the event stream opened.
pub(crate) enum Then {
    /// Call the inner service (the request carries its admission), adding `set_cookie` to the
    /// response; `slot`: the slot the app may end with its response.
    Pass {
        set_cookie: Option<Issued>,
        slot: Option<(Slot, Arc<Room>)>,
    },
    /// Answer here.
    Answer(Response<Bytes>),
    /// Answer with a waiter's event stream. Boxed (the stream is large), so that a pass
    /// stays small to move.
    Events(Response<Box<dyn Chunks>>),
    /// Ask the store first.
    Ask(Box<Pending>),
}

impl Room {
    /// Reads `next` for `req`: the one place where what the room decided becomes what the
    /// service and its future do.
    pub(crate) fn settle<B>(self: &Arc<Self>, next: Next, req: &mut Request<B>) -> Then {
        match next {
            Next::Pass {
                admission,
                set_cookie,
            } => {
                let slot = Slot::of(&admission).map(|mut slot| {
                    if self.auto.is_some() {
                        slot.started = Some(tokio::time::Instant::now());
                    }
                    (slot, Arc::clone(self))
                });
                // In place: a request is a few hundred bytes to copy.
                req.extensions_mut().insert(admission);
                Then::Pass { set_cookie, slot }
            }
            Next::Answer(res) => Then::Answer(res),
            Next::Events(start) => Then::Events(
                self.open_events(start)
                    .map(|stream| Box::new(stream) as Box<dyn Chunks>),
            ),
            Next::Ask(pending) => Then::Ask(pending),
        }
    }
}

impl Room {
    /// Counts a request that held a slot, once the app answered it (`Some` status) or failed
    /// it, and decides the window if it is over (in a task of its own).
    /// `measured`: what a layer between the room and the app said of the answer (its
    /// [`Measured`] extension).
    pub(crate) fn sampled(
        &self,
        slot: &Slot,
        answer: Option<(http::StatusCode, AppSaid)>,
        measured: Option<Measured>,
    ) {
        let (Some(auto), Some(started)) = (&self.auto, slot.started) else {
            return;
        };
        let took = match measured {
            Some(Measured::ClientFault) => return,
            Some(Measured::AppTook(took)) => took,
            None => started.elapsed(),
        };
        auto.sample(match answer {
            Some((status, said)) => Sampled::Answered(status, took, said.load),
            None => Sampled::Failed,
        });
        if let Some(counts) = auto.due(self.now_ms()) {
            let decide = Arc::clone(auto).report(
                counts,
                Arc::clone(self.store()),
                self.config().policy.clone(),
                Arc::clone(&self.core.metrics),
            );
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(decide);
                }
                // Outside a runtime nothing can be asked of the store: the counts are dropped.
                Err(_) => {
                    drop(decide);
                    auto.skip();
                }
            }
        }
    }

    /// The capacity controller, when the room has one.
    pub(crate) fn auto(&self) -> Option<&Arc<AutoStage>> {
        self.auto.as_ref()
    }
}

/// The other rooms behind the same layer, for a gate of one of them (see [`OtherRooms`]).
impl OtherRooms for &[Arc<Room>] {
    fn any_other(&self, own: &Core, signed: &mut dyn FnMut(&Core) -> bool) -> bool {
        self.iter()
            .any(|o| !std::ptr::eq(&*o.core, own) && signed(&o.core))
    }
}

#[cfg(test)]
mod tests;
