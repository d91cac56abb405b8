//! Gated routes: requests that need an admission of the room and are never queued.
//!
//! A gated request (an API call such as `POST /checkout`) either carries a valid admission token
//! of the gate's room and passes, like the fast path, or gets `403` JSON `not_admitted` with the
//! reason and where the room's status is: never a queue cookie, never a place in line, never a
//! store write. Only a valid token past `refresh` costs a store call: its heartbeat, as on any
//! other route; a heartbeat that finds the slot gone is a `403 slot_gone`, not an entry into the
//! line.
//!
//! With [single-use tickets](crate::WaitingRoomBuilder::single_use_tickets) on, the room's
//! gated routes take a ticket instead, checked at the gateway (a bad one costs no store call)
//! and then used once in the store (see `ticket.rs`): an admission
//! token alone is `403 not_admitted` `ticket_missing` (the status endpoint hands the ticket
//! out), and a ticket used before is `403 ticket_used`. Both kinds of refusal are one JSON shape,
//! [`NotAdmittedBody`](crate::response::NotAdmittedBody), with one vocabulary of reasons,
//! [`Refusal`].
//!
//! [`Room::gate`](super::Room::gate) is the one place that decides how a gated request is
//! admitted: by the admission token ([`Gates::admit`]), or by the ticket
//! ([`Tickets::redeem`](super::ticket::Tickets::redeem)) when the room mints them.

use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{Request, Response};

use super::failure::FailureLog;
use super::ladder::{self, Asker, Failed, Rung};
use super::reply::{not_admitted, Replies};
use super::shared::{Core, OtherRooms};
use super::snapshot::LineView;
use super::verdict::Verdict;
use super::visitor::Carried;
use crate::clock::{duration_ms, secs_ceil};
use crate::outcome::AdmittedBy;
use crate::session::SessionId;
use crate::store::{Decision, StoreError, StoreErrorKind, StoreFuture};
use crate::telemetry::{Outcome, Stage};
use crate::token::{AdmissionToken, TokenFault};
use crate::vocab::{override_method, Rule, ADMISSION_TICKET};

/// Why a gated request was refused: the `reason` of the `403 not_admitted` answer.
///
/// Ordered from the least to the most telling: of several values a request carries, the answer
/// names the most telling refusal among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Refusal {
    /// No admission value at all: no admission cookie, no token header, no ticket header.
    Missing,
    /// A value that is no admission token of the room: garbage, tampered, signed by an unknown
    /// key, or of another kind.
    Invalid,
    /// A genuine admission token of another room behind the same layer.
    OtherRoom,
    /// A genuine token of the room, bound to another network (with
    /// [`bind_tokens_to_network`](crate::WaitingRoomBuilder::bind_tokens_to_network) on).
    OtherNetwork,
    /// A genuine token of the room, past its expiry.
    Expired,
    /// A genuine, unexpired token whose slot the store no longer holds (it was released, ended,
    /// or expired there).
    SlotGone,
    // Single-use tickets (ticket.rs): each is compared only with its own kind, so their place
    // among the admission token's refusals above does not matter.
    /// No single-use ticket in the request (an admission token alone is not one).
    TicketMissing,
    /// A value that is no ticket of the room (garbage, tampered, an unknown key), or a genuine
    /// one the store does not hold (its record lost).
    TicketInvalid,
    /// A genuine ticket of another room behind the same layer.
    TicketOtherRoom,
    /// A genuine ticket of the room, past its expiry.
    TicketExpired,
    /// A genuine unused ticket whose session no longer holds its slot.
    SlotEnded,
    /// A genuine ticket, used before (by anyone, on any gateway).
    TicketUsed,
}

impl Refusal {
    /// `403` JSON `not_admitted` (or `ticket_used`), with the reason and the room's status
    /// path; counted at stage `gate`.
    pub(super) fn answer(self, core: &Core) -> Response<Bytes> {
        core.metrics.request(Stage::Gate, Outcome::Unknown);
        tracing::debug!(
            room = core.config.room(),
            reason = self.as_str(),
            "gated request refused"
        );
        not_admitted(
            core.config.room(),
            &core.paths.status,
            self.error(),
            self.as_str(),
        )
    }

    /// The reason's name in the JSON answer.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Invalid => "invalid",
            Refusal::OtherRoom => "other_room",
            Refusal::OtherNetwork => "other_network",
            Refusal::Expired => "expired",
            Refusal::SlotGone => "slot_gone",
            Refusal::TicketMissing => "ticket_missing",
            Refusal::TicketInvalid => "ticket_invalid",
            // The same word as for an admission token of another room: the client's mistake
            // (the wrong room's value) is the same.
            Refusal::TicketOtherRoom => "other_room",
            Refusal::TicketExpired => "ticket_expired",
            Refusal::SlotEnded => "slot_ended",
            Refusal::TicketUsed => "ticket_used",
        }
    }

    /// The `error` of the JSON answer: `ticket_used`, which the answer names on its own, or
    /// `not_admitted` with the reason.
    pub(crate) fn error(self) -> &'static str {
        match self {
            Refusal::TicketUsed => "ticket_used",
            _ => "not_admitted",
        }
    }
}

/// Where a gated request's admission came from: a fresh token goes back the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// The room's admission cookie.
    Cookie,
    /// The room's token header.
    TokenHeader,
    /// The `X-Admission-Ticket` header.
    Ticket,
}

/// A valid admission token past `refresh` on a gated route, waiting for its heartbeat.
pub(crate) struct GateHeartbeat {
    call: StoreFuture<Decision>,
    token: AdmissionToken,
    source: Source,
    uses_headers: bool,
}

impl GateHeartbeat {
    pub(super) fn poll_next<B>(
        &mut self,
        cx: &mut Context<'_>,
        core: &Core,
        failures: &FailureLog,
        req: &Request<B>,
    ) -> Poll<Verdict> {
        let answer = ready!(self.call.as_mut().poll(cx));
        Poll::Ready(self.after(core, failures, answer, req))
    }

    fn after<B>(
        &self,
        core: &Core,
        failures: &FailureLog,
        answer: Result<Decision, StoreError>,
        req: &Request<B>,
    ) -> Verdict {
        let token = &self.token;
        match answer {
            Ok(Decision::Admitted { expires_at_ms }) => {
                let now = core.now_ms();
                let mut fresh = AdmissionToken::new(token.session(), now, expires_at_ms);
                if let Some(network) = core.network_binding(req) {
                    fresh = fresh.bound_to(network);
                }
                let header = match self.source {
                    Source::Ticket => ADMISSION_TICKET,
                    Source::Cookie | Source::TokenHeader => core.config.token_header.clone(),
                };
                let replies = Replies(core);
                let issued = replies.issue(
                    self.uses_headers,
                    &core.config.cookies.admission_name,
                    &header,
                    fresh.sign(&core.keys, core.config.room()),
                    secs_ceil(expires_at_ms.saturating_sub(now)),
                );
                let issued = replies.with_edge(
                    issued,
                    self.uses_headers,
                    token.session(),
                    now,
                    expires_at_ms,
                );
                core.counted(
                    Stage::Gate,
                    Outcome::Admitted,
                    Verdict::Pass {
                        admission: core.admission(
                            token.session(),
                            expires_at_ms,
                            AdmittedBy::Store,
                        ),
                        set_cookie: Some(issued),
                    },
                )
            }
            // The slot is gone: refused, never a place in line, and the dead token removed so
            // it stops costing a heartbeat.
            Ok(_) => Verdict::Answer(Replies(core).without_token(Refusal::SlotGone.answer(core))),
            // The token is valid and its check needs no store: keep letting it through.
            Err(e) => {
                failures.log(core, &e, "heartbeat (the valid token passes)");
                core.counted(
                    Stage::Gate,
                    Outcome::Passed,
                    Verdict::pass(core.token_admission(token)),
                )
            }
        }
    }
}

/// The room's gated routes: admitted or refused, never queued.
pub(super) struct Gates {
    rules: Vec<Rule>,
}

impl Gates {
    pub(super) fn new(rules: Vec<Rule>) -> Self {
        Self { rules }
    }

    pub(super) fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether `req` is for one of the room's gated routes (never one of its endpoints).
    pub(super) fn matches<B>(&self, core: &Core, req: &Request<B>) -> bool {
        !self.rules.is_empty() && !core.is_endpoint_path(req.uri().path()) && {
            let overridden = override_method(req);
            self.rules
                .iter()
                .any(|rule| rule.matches_gate(req, overridden.as_ref()))
        }
    }

    /// A request to a route gated by this room, in a room without single-use tickets: its
    /// admission token is checked. `others`: the other rooms behind the same layer, so that a
    /// token of one of them is refused as `other_room` rather than `invalid`. Counted once, at
    /// stage `gate`.
    pub(super) fn admit<B>(
        &self,
        core: &Core,
        failures: &FailureLog,
        line: &LineView,
        req: &Request<B>,
        others: &dyn OtherRooms,
    ) -> Verdict<GateHeartbeat> {
        let now = core.now_ms();
        let carried = Carried::read(core, req);
        match Self::admission(core, req, &carried, others, now) {
            Ok((token, _)) if token.is_fresh(now, core.config.settings.refresh) => core.counted(
                Stage::Gate,
                Outcome::Passed,
                Verdict::pass(core.token_admission(&token)),
            ),
            // Past refresh: a heartbeat, within the session's poll limit; over it the token
            // passes unrenewed while not yet twice `refresh` old, as on any route of the room,
            // and waits for the limit after that.
            Ok((token, source)) => match core.check_polls(token.session(), now) {
                Ok(()) => Verdict::Step(GateHeartbeat {
                    call: core.store.heartbeat(&core.config.policy, token.session()),
                    token,
                    source,
                    uses_headers: carried.uses_headers(),
                }),
                Err(_) if core.passes_unrenewed(&token, now) => core.counted(
                    Stage::Gate,
                    Outcome::Passed,
                    Verdict::pass(core.token_admission(&token)),
                ),
                Err(wait) => core.counted(
                    Stage::Gate,
                    Outcome::Limited,
                    Verdict::Answer(Replies(core).limited(wait, req)),
                ),
            },
            Err(refusal) => match Self::fails_open(core, failures, line, req, &carried, now) {
                Some((session, by)) => {
                    let outcome = match by {
                        AdmittedBy::Drained => Outcome::Drained,
                        _ => Outcome::FailOpen,
                    };
                    core.counted(
                        Stage::Gate,
                        outcome,
                        Verdict::pass(core.admission(
                            session,
                            now + duration_ms(core.config.settings.refresh),
                            by,
                        )),
                    )
                }
                None => Verdict::Answer(refusal.answer(core)),
            },
        }
    }

    /// The fail policy at a gate: while the store seems down (its last call could not decide,
    /// moments ago), the failure ladder decides for a visitor who came through the room (a
    /// valid queue cookie of it), as the room's pages would: let in without a slot (failing
    /// open; draining, only the drained front of the line), the session and how. `None`
    /// otherwise: refused as usual. No store call either way. (A single-use gate needs the
    /// store to know whether a ticket was used, and answers `503` instead: see `ticket`.)
    fn fails_open<B>(
        core: &Core,
        failures: &FailureLog,
        line: &LineView,
        req: &Request<B>,
        carried: &Carried<'_>,
        now: u64,
    ) -> Option<(SessionId, AdmittedBy)> {
        if !failures.seems_down(now) {
            return None;
        }
        let cookie = carried.queue_cookie(core, req, now);
        let down = StoreError::new(StoreErrorKind::Unavailable);
        let failed = Failed {
            error: &down,
            cookie: cookie.as_ref(),
            asker: Asker::Gate,
            now,
        };
        match ladder::climb(core, line, &failed) {
            Rung::In(by) => Some((cookie?.session(), by)),
            _ => None,
        }
    }

    /// The admission a gated request carries, or why it has none: a valid admission token of
    /// this room from its admission cookie (any of the values sent), its token header, or the
    /// `X-Admission-Ticket` header, in that order. Stateless: signatures and clocks only, no
    /// store call, so refusing a forged value costs the store nothing.
    fn admission<B>(
        core: &Core,
        req: &Request<B>,
        carried: &Carried<'_>,
        others: &dyn OtherRooms,
        now: u64,
    ) -> Result<(AdmissionToken, Source), Refusal> {
        let expected = core.network_binding(req);
        let room = core.config.room();
        let consider = |value: &str| match AdmissionToken::check(&core.keys, room, value, now) {
            Ok(token) if expected.is_none() || token.network() == expected => Ok(token),
            Ok(_) => Err(Refusal::OtherNetwork),
            Err(TokenFault::Expired) => Err(Refusal::Expired),
            // Only on the refusal's path, and only for what looks like a token (garbage costs
            // no signature check): another room's signatures, to say why.
            Err(TokenFault::Invalid)
                if AdmissionToken::could_be(value)
                    && others.any_other(core, &mut |o| Self::signed(o, value, now)) =>
            {
                Err(Refusal::OtherRoom)
            }
            Err(TokenFault::Invalid) => Err(Refusal::Invalid),
        };
        let mut refusal = Refusal::Missing;
        if carried.admission.is_present() {
            // A cookie of the room's name, even one whose values could not be tokens at all.
            refusal = Refusal::Invalid;
        }
        for value in carried.admission.values() {
            match consider(value) {
                Ok(token) => return Ok((token, Source::Cookie)),
                Err(why) => refusal = refusal.max(why),
            }
        }
        for (name, source) in [
            (&core.config.token_header, Source::TokenHeader),
            (&ADMISSION_TICKET, Source::Ticket),
        ] {
            for value in req.headers().get_all(name) {
                match value.to_str().map_err(|_| Refusal::Invalid) {
                    Ok(v) => match consider(v.trim()) {
                        Ok(token) => return Ok((token, source)),
                        Err(why) => refusal = refusal.max(why),
                    },
                    Err(why) => refusal = refusal.max(why),
                }
            }
        }
        Err(refusal)
    }

    /// Whether `value` is a valid admission token of this room (for another room's gate, to
    /// tell `other_room` from `invalid`).
    fn signed(core: &Core, value: &str, now: u64) -> bool {
        AdmissionToken::verify(&core.keys, core.config.room(), value, now).is_some()
    }
}
