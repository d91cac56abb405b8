//! Single-use checkout tickets in the room (with
//! [`single_use_tickets`](crate::WaitingRoomBuilder::single_use_tickets) on): minting one when
//! the store admits a visitor and on the status endpoint, extending it (the same ticket, re-issued
//! with the slot's new expiry) whenever a heartbeat extends the slot, and the redeem step a gated
//! route runs to let a request through on a ticket exactly once.
//!
//! Each mint tells the store which it is ([`MintFor`]): the first of an admission the store has
//! just made (an enter), or the renewal of one that goes on (a heartbeat, the status endpoint
//! of a visitor holding an admission token). A renewal's admission had its ticket, so a record
//! missing then (evicted, deleted) reads as used: a lost record never becomes a second ticket.
//!
//! A ticket is checked at the gateway first (MAC, room, expiry: no store call for a forged,
//! tampered, other-room or expired one), then used in the store in one atomic step
//! ([`TicketStore::redeem_ticket`]), so of any number of uses of one ticket through any number
//! of gateways exactly one passes. The room's gates
//! ([`Room::gate`](super::Room::gate)) run this step instead of the admission token's check. The answers, every
//! `403` in the gates' one shape ([`NotAdmittedBody`](crate::response::NotAdmittedBody):
//! `error`, `room`, `status`, `reason`):
//!
//! | ticket | answer |
//! |---|---|
//! | accepted by the store | pass, admitted [`AdmittedBy::Ticket`]; the used ticket's cookie stays until it expires, so that a second use of it is told `ticket_used` |
//! | used before, or its record damaged, or lost and then renewed (it cannot be shown unused) | `403`, `"error":"ticket_used"` (`"reason":"ticket_used"`) |
//! | none in the request (an admission token alone is none) | `403` `not_admitted`, `ticket_missing` |
//! | forged, tampered, or unknown to the store (its record lost, before a renewal; or replaced by the ticket of the visitor's next admission) | `403` `not_admitted`, `ticket_invalid` |
//! | a genuine ticket of another room behind the same layer | `403` `not_admitted`, `other_room` |
//! | past its expiry | `403` `not_admitted`, `ticket_expired` |
//! | unused, but its visitor's slot has ended (left, dropped, closed out, or ended by the app) | `403` `not_admitted`, `slot_ended`; the ticket stays unused |
//! | the store failed | `503` with `Retry-After` (`busy` or `unavailable`), under either fail policy |
//! | over the session's poll limit | `429` with `Retry-After` |

use std::ops::Not;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use serde::Serialize;

use super::failure::FailureLog;
use super::gate::Refusal;
use super::reply::{store_error_json, Issued, Replies};
use super::shared::{Core, OtherRooms};
use super::verdict::Verdict;
use crate::clock::secs_ceil;
use crate::cookies::{self, Wanted};
use crate::outcome::{Admission, AdmittedBy};
use crate::response::{json_response, StatusBody};
use crate::session::SessionId;
use crate::store::{
    MintFor, Minted, Redeemed, StoreError, StoreErrorKind, StoreFuture, TicketNonce, TicketStore,
};
use crate::telemetry::{Outcome, Stage};
use crate::token::{AdmissionTicket, TicketRefusal};
use crate::vocab::ADMISSION_TICKET as TICKET_HEADER;

/// A valid ticket found in a request, on its way to the store.
#[derive(Clone, Copy, Debug)]
struct Presented {
    ticket: AdmissionTicket,
}

/// What minting a ticket needs to issue it once the store answers.
#[derive(Clone, Copy, Debug)]
struct Minting {
    session: SessionId,
    /// The slot's expiry: the ticket's, and its record's.
    expires_at_ms: u64,
    /// The admission's first mint, or the renewal of one that goes on.
    mint_for: MintFor,
    uses_headers: bool,
    now: u64,
}

/// The store just granted or extended the visitor's slot (a new slot, a claimed grant, or a
/// heartbeat), and is asked for their ticket (minted, or found and extended with the slot)
/// before the request passes.
pub(crate) struct MintWithSlot {
    call: StoreFuture<Minted>,
    admission: Admission,
    /// The fresh admission token.
    token: Option<Issued>,
    minting: Minting,
}

impl MintWithSlot {
    /// Waits for the mint, then passes (see [`Tickets::after_mint`]).
    pub(super) fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        tickets: &Tickets,
        core: &Core,
        failures: &FailureLog,
    ) -> Poll<Verdict> {
        let answer = ready!(self.call.as_mut().poll(cx));
        Poll::Ready(tickets.after_mint(
            core,
            failures,
            answer,
            self.admission.clone(),
            self.token.take(),
            self.minting,
        ))
    }
}

/// The status endpoint for a visitor with a valid admission token: their ticket, being minted
/// or found.
pub(crate) struct StatusTicket {
    call: StoreFuture<Minted>,
    minting: Minting,
}

impl StatusTicket {
    /// Waits for the mint, then answers (see [`Tickets::after_status`]).
    pub(super) fn poll_answer(
        &mut self,
        cx: &mut Context<'_>,
        tickets: &Tickets,
        core: &Core,
        failures: &FailureLog,
    ) -> Poll<Response<Bytes>> {
        Poll::Ready(tickets.after_status(
            core,
            failures,
            ready!(self.call.as_mut().poll(cx)),
            self.minting,
        ))
    }
}

/// A gated route's single-use ticket, being used.
pub(crate) struct Redeem {
    call: StoreFuture<Redeemed>,
    presented: Presented,
}

impl Redeem {
    /// Waits for the store, then passes or refuses (see [`Tickets::after_redeem`]).
    pub(super) fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        tickets: &Tickets,
        core: &Core,
        failures: &FailureLog,
    ) -> Poll<Verdict> {
        Poll::Ready(tickets.after_redeem(
            core,
            failures,
            ready!(self.call.as_mut().poll(cx)),
            self.presented,
        ))
    }
}

/// Single-use checkout tickets: minted with a slot or on the status endpoint, redeemed once at
/// a gate (see the [module docs](self)).
pub(super) struct Tickets {
    /// The store's tickets (metered), if the room mints them
    /// ([`single_use_tickets`](crate::WaitingRoomBuilder::single_use_tickets)).
    store: Option<Arc<dyn TicketStore>>,
}

/// The status endpoint's answer to an admitted visitor with tickets on: the usual body (with
/// the ticket, for clients that use headers only: a page's scripts must not read a browser's
/// `HttpOnly` ticket) or the note that it was used.
#[derive(Serialize)]
struct TicketStatus<'a> {
    #[serde(flatten)]
    status: StatusBody<'a>,
    #[serde(skip_serializing_if = "Not::not")]
    ticket_used: bool,
}

impl Tickets {
    /// The stage of a room that mints tickets in `store`, or of one that does not (`None`).
    pub(super) fn new(store: Option<Arc<dyn TicketStore>>) -> Self {
        Self { store }
    }

    /// Whether the room mints single-use tickets.
    pub(super) fn mints(&self) -> bool {
        self.store.is_some()
    }

    /// The store granted or extended the visitor's slot (the request passes as `admission`,
    /// with its fresh admission token): with tickets on, one more store call mints their
    /// ticket, or finds it and extends it to the slot's new expiry, before the request passes;
    /// otherwise it passes now. So the ticket (its record and its cookie) lives as long as the
    /// slot, however often it is renewed. `mint_for`: [`MintFor::Admission`] when the store
    /// has just admitted the visitor (an enter), [`MintFor::Renewal`] when a heartbeat of a
    /// visitor holding an admission token extended the slot: that admission's ticket was
    /// minted already, so a record lost since reads as used, never as room for a second one.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn with_slot(
        &self,
        core: &Core,
        admission: Admission,
        token: Option<Issued>,
        expires_at_ms: u64,
        mint_for: MintFor,
        uses_headers: bool,
        now: u64,
    ) -> Verdict<MintWithSlot> {
        if !self.mints() {
            return Verdict::Pass {
                admission,
                set_cookie: token,
            };
        }
        let minting = Minting {
            session: admission.session,
            expires_at_ms,
            mint_for,
            uses_headers,
            now,
        };
        Verdict::Step(MintWithSlot {
            call: self.mint(core, &minting),
            admission,
            token,
            minting,
        })
    }

    fn mint(&self, core: &Core, m: &Minting) -> StoreFuture<Minted> {
        let Some(store) = &self.store else {
            return tickets_off();
        };
        store.mint_ticket(
            &core.config.policy,
            m.session,
            TicketNonce::random(),
            m.expires_at_ms,
            m.mint_for,
        )
    }

    /// The mint after an admission or a heartbeat answered: pass, with the (re-issued) ticket
    /// when it is unused; a used one sets nothing. A failed mint still passes: the admission is
    /// real. A heartbeat's failed mint leaves the record as it was, so the next heartbeat (or
    /// the status endpoint) hands the ticket out again. An admission's failed mint leaves none,
    /// and a later renewal cannot tell a record never made from one lost, so it reads as used:
    /// the visitor has no ticket until their next admission (a rare cost of the store failing
    /// between its two calls, in exchange for a lost record never being a second ticket).
    fn after_mint(
        &self,
        core: &Core,
        failures: &FailureLog,
        answer: Result<Minted, StoreError>,
        admission: Admission,
        token: Option<Issued>,
        minting: Minting,
    ) -> Verdict {
        let ticket = match answer {
            Ok(Minted::Ticket {
                nonce,
                expires_at_ms,
            }) => Some(Self::issue(core, &minting, nonce, expires_at_ms)),
            Ok(_) => None,
            Err(e) => {
                failures.log(core, &e, "mint_ticket (passed without a fresh ticket)");
                None
            }
        };
        let set_cookie = match (token, ticket) {
            (Some(token), Some(ticket)) => Some(token.and(ticket)),
            (token, ticket) => token.or(ticket),
        };
        Verdict::Pass {
            admission,
            set_cookie,
        }
    }

    /// The ticket `nonce` of `m`'s session, expiring with its store record at `expires_at_ms`,
    /// signed and issued: the ticket cookie, and the ticket header for clients that use headers.
    fn issue(core: &Core, m: &Minting, nonce: TicketNonce, expires_at_ms: u64) -> Issued {
        let value = Self::sign(core, m, nonce, expires_at_ms);
        Self::issue_value(core, m, value, expires_at_ms)
    }

    fn issue_value(core: &Core, m: &Minting, value: String, expires_at_ms: u64) -> Issued {
        Replies(core).issue(
            m.uses_headers,
            &core.config.cookies.ticket_name,
            &TICKET_HEADER,
            value,
            secs_ceil(expires_at_ms.saturating_sub(m.now)),
        )
    }

    /// The signed ticket: the record's expiry, not the one asked for, so a ticket found (made
    /// by an earlier mint) ends with its record.
    fn sign(core: &Core, m: &Minting, nonce: TicketNonce, expires_at_ms: u64) -> String {
        AdmissionTicket::new(m.session, nonce, m.now, expires_at_ms)
            .sign(&core.keys, core.config.room())
    }

    /// The status endpoint for a visitor with a valid admission token, tickets on: finds their
    /// ticket (a renewal's mint: the admission goes on, and its ticket was minted when it was
    /// admitted), within the session's poll limit like every store question.
    pub(super) fn ask_status(
        &self,
        core: &Core,
        session: SessionId,
        expires_at_ms: u64,
        uses_headers: bool,
        now: u64,
    ) -> StatusTicket {
        let minting = Minting {
            session,
            expires_at_ms,
            mint_for: MintFor::Renewal,
            uses_headers,
            now,
        };
        StatusTicket {
            call: self.mint(core, &minting),
            minting,
        }
    }

    /// `200 {"state":"admitted",...}`, with the ticket (cookie; and header and `"ticket"` for
    /// header clients), or `"ticket_used": true`. A failed mint answers without a ticket: the
    /// visitor is admitted all the same, and can ask again.
    fn after_status(
        &self,
        core: &Core,
        failures: &FailureLog,
        answer: Result<Minted, StoreError>,
        minting: Minting,
    ) -> Response<Bytes> {
        let room = core.config.room();
        let mut body = TicketStatus {
            status: StatusBody::plain(room, "admitted"),
            ticket_used: false,
        };
        let mut issued = None;
        let value;
        match answer {
            Ok(Minted::Ticket {
                nonce,
                expires_at_ms,
            }) => {
                value = Self::sign(core, &minting, nonce, expires_at_ms);
                if minting.uses_headers {
                    body.status.ticket = Some(&value);
                }
                issued = Some(Self::issue_value(
                    core,
                    &minting,
                    value.clone(),
                    expires_at_ms,
                ));
            }
            Ok(_) => body.ticket_used = true,
            Err(e) => failures.log(core, &e, "mint_ticket (status without a ticket)"),
        }
        let mut res = json_response(StatusCode::OK, &body);
        if let Some(issued) = issued {
            issued.apply(res.headers_mut());
        }
        core.counted(Stage::Endpoint, Outcome::Admitted, res)
    }

    /// The redeem step of a gated route of a room with tickets on (see
    /// [`Gates::admit`](super::gate::Gates::admit)): the request's ticket, checked here (MAC, room, expiry) and then
    /// used in the store. Says [`Verdict::Pass`] (admitted [`AdmittedBy::Ticket`]) exactly once
    /// per ticket across all gateways, and otherwise answers `403` with the reason, `429` over
    /// the session's poll limit, or `503` when the store fails (see the [module docs](self)).
    /// Nothing is asked of the store for a missing, forged, tampered, other-room or expired
    /// ticket. `others`: the other rooms behind the same layer, to tell `other_room`. Counted
    /// once, at stage `gate`.
    pub(super) fn redeem<B>(
        &self,
        core: &Core,
        req: &Request<B>,
        others: &dyn OtherRooms,
    ) -> Verdict<Redeem> {
        let now = core.now_ms();
        let presented = match Self::presented(core, req, others, now) {
            Ok(presented) => presented,
            Err(refusal) => return Verdict::Answer(refusal.answer(core)),
        };
        let session = presented.ticket.session();
        if let Err(wait) = core.check_polls(session, now) {
            let res = Replies(core).limited(wait, req);
            return core.counted(Stage::Gate, Outcome::Limited, Verdict::Answer(res));
        }
        let call = match &self.store {
            Some(store) => {
                store.redeem_ticket(&core.config.policy, session, presented.ticket.nonce())
            }
            None => tickets_off(),
        };
        Verdict::Step(Redeem { call, presented })
    }

    /// The store's answer to a redeem.
    fn after_redeem(
        &self,
        core: &Core,
        failures: &FailureLog,
        answer: Result<Redeemed, StoreError>,
        presented: Presented,
    ) -> Verdict {
        let ticket = presented.ticket;
        match answer {
            // The ticket cookie stays (until its expiry): the browser's next use of it (a
            // second submit) is told `ticket_used`, not sent to look for a ticket.
            Ok(Redeemed::Accepted) => core.counted(
                Stage::Gate,
                Outcome::Admitted,
                Verdict::pass(core.admission(
                    ticket.session(),
                    ticket.expires_at_ms(),
                    AdmittedBy::Ticket,
                )),
            ),
            Ok(Redeemed::Used) => Verdict::Answer(Refusal::TicketUsed.answer(core)),
            // The visitor left (or was dropped, or the app ended the slot): the ticket would let
            // someone past the capacity, so it is refused (and stays unused).
            Ok(Redeemed::SlotEnded) => Verdict::Answer(Refusal::SlotEnded.answer(core)),
            // A genuine ticket the store does not hold: its record was lost (an eviction, a
            // flushed store), replaced by the ticket of the session's next admission, or ended
            // on the store's clock before the gateway's. It cannot be shown unused, so it is
            // refused.
            Ok(_) => Verdict::Answer(Refusal::TicketInvalid.answer(core)),
            // A single-use ticket cannot be honoured without the store: only the store knows
            // whether it was used, and letting it through (fail open) would let every copy of
            // it through. So `503` under either fail policy; the ticket stays unused (nothing
            // was written), and the visitor can try again.
            Err(e) => {
                failures.log(core, &e, "redeem_ticket");
                core.metrics
                    .request(Stage::Gate, Outcome::of_error(&e, false));
                Verdict::Answer(store_error_json(core.config.room(), &e))
            }
        }
    }

    /// The ticket of `req`: the first valid one of the ticket cookie's values, or else the
    /// ticket header's when it holds a ticket (`t1.`; the same header carries admission tokens
    /// to the gates of rooms without tickets, and an admission token is no ticket). Refused:
    /// the most telling refusal found (expired, then another room's, then invalid, then
    /// missing).
    fn presented<B>(
        core: &Core,
        req: &Request<B>,
        others: &dyn OtherRooms,
        now: u64,
    ) -> Result<Presented, Refusal> {
        let c = &core.config.cookies;
        let [cookie] = cookies::read(
            req.headers(),
            [Wanted {
                name: &c.ticket_name,
                could_be: AdmissionTicket::could_be,
            }],
        );
        let mut refusal = if cookie.is_present() {
            Refusal::TicketInvalid
        } else {
            Refusal::TicketMissing
        };
        let room = core.config.room();
        let mut check = |value: &str| {
            let why = match AdmissionTicket::check(&core.keys, room, value, now) {
                Ok(ticket) => return Some(ticket),
                Err(TicketRefusal::Expired) => Refusal::TicketExpired,
                // Only on the refusal's path, and only for what looks like a ticket (garbage
                // costs no signature check): another room's signatures, to say why.
                Err(TicketRefusal::Invalid)
                    if AdmissionTicket::could_be(value)
                        && others.any_other(core, &mut |o| Self::signed(o, value, now)) =>
                {
                    Refusal::TicketOtherRoom
                }
                Err(TicketRefusal::Invalid) => Refusal::TicketInvalid,
            };
            refusal = refusal.max(why);
            None
        };
        if let Some(ticket) = cookie.find_valid(&mut check) {
            return Ok(Presented { ticket });
        }
        // Every value of the header, not only the first: a client may send its admission
        // (`a1.`) there as well as its ticket.
        let ticket = req
            .headers()
            .get_all(&TICKET_HEADER)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| v.starts_with("t1."))
            .find_map(&mut check);
        match ticket {
            Some(ticket) => Ok(Presented { ticket }),
            None => Err(refusal),
        }
    }

    /// Whether `value` is a valid ticket of this room (for another room's gate, to tell
    /// `other_room` from `ticket_invalid`).
    fn signed(core: &Core, value: &str, now: u64) -> bool {
        AdmissionTicket::verify(&core.keys, core.config.room(), value, now).is_some()
    }
}

/// The answer of a ticket call in a room that mints none: never asked for (the room's stages
/// ask only when it [mints](Tickets::mints)), and refused rather than passed if it were.
fn tickets_off<T: Send + 'static>() -> StoreFuture<T> {
    Box::pin(std::future::ready(Err(StoreError::with_source(
        StoreErrorKind::Misconfigured,
        "single-use tickets are off in this room",
    ))))
}
