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

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use http::{header, HeaderValue, Request, StatusCode};
    use tower::{service_fn, Layer, ServiceExt};

    use super::*;
    use crate::clock::Clock;
    use crate::config::{FailPolicy, RoomPolicy};
    use crate::room::Next;
    use crate::store::{
        Decision, MemoryStore, RoomStats, SettingsChange, SettingsUpdate, Store, StoreErrorKind,
        StoreFuture,
    };
    use crate::testing::{ManualClock, TEST_EPOCH_MS};
    use crate::token::{Keyring, SigningKey};
    use crate::{SessionId, WaitingRoomBuilder, WaitingRoomLayer};

    /// The embedded store, whose ticket calls are counted (the mints with what they were for)
    /// and can be made to fail.
    #[derive(Clone, Default)]
    struct Tickets {
        inner: MemoryStore,
        mints: Arc<AtomicUsize>,
        minted_for: Arc<std::sync::Mutex<Vec<MintFor>>>,
        redeems: Arc<AtomicUsize>,
        fail: Arc<AtomicBool>,
    }

    impl Tickets {
        fn on(clock: &ManualClock) -> Self {
            Self {
                inner: MemoryStore::with_clock(clock.clone()),
                ..Self::default()
            }
        }

        fn failing<T: Send + 'static>(&self) -> Option<StoreFuture<T>> {
            self.fail.load(Ordering::SeqCst).then(|| {
                let e = StoreError::new(StoreErrorKind::Unavailable);
                Box::pin(std::future::ready(Err(e))) as StoreFuture<T>
            })
        }
    }

    impl Store for Tickets {
        fn enter(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
            self.inner.enter(p, s)
        }
        fn join(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
            self.inner.join(p, s)
        }
        fn poll(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
            self.inner.poll(p, s)
        }
        fn heartbeat(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
            self.inner.heartbeat(p, s)
        }
        fn release(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<bool> {
            self.inner.release(p, s)
        }
        fn stats(&self, p: &RoomPolicy) -> StoreFuture<RoomStats> {
            self.inner.stats(p)
        }
        fn configure(&self, p: &RoomPolicy, c: SettingsChange) -> StoreFuture<SettingsUpdate> {
            self.inner.configure(p, c)
        }
        fn admit_next(&self, p: &RoomPolicy, n: u32) -> StoreFuture<u64> {
            self.inner.admit_next(p, n)
        }
        fn ban(&self, p: &RoomPolicy, s: SessionId, until: u64) -> StoreFuture<bool> {
            self.inner.ban(p, s, until)
        }
        fn tickets(self: Arc<Self>) -> Option<Arc<dyn TicketStore>> {
            Some(self)
        }
    }

    impl TicketStore for Tickets {
        fn mint_ticket(
            &self,
            p: &RoomPolicy,
            s: SessionId,
            fresh: TicketNonce,
            expires_at_ms: u64,
            mint_for: MintFor,
        ) -> StoreFuture<Minted> {
            self.mints.fetch_add(1, Ordering::SeqCst);
            self.minted_for.lock().unwrap().push(mint_for);
            self.failing()
                .unwrap_or_else(|| self.inner.mint_ticket(p, s, fresh, expires_at_ms, mint_for))
        }
        fn redeem_ticket(
            &self,
            p: &RoomPolicy,
            s: SessionId,
            nonce: TicketNonce,
        ) -> StoreFuture<Redeemed> {
            self.redeems.fetch_add(1, Ordering::SeqCst);
            self.failing()
                .unwrap_or_else(|| self.inner.redeem_ticket(p, s, nonce))
        }
    }

    const KEY: [u8; 32] = [0x5e; 32];

    fn builder(room: &str) -> WaitingRoomBuilder {
        WaitingRoomLayer::builder(room)
            .capacity(10)
            .signing_key(SigningKey::new("test", KEY).unwrap())
            .secure_cookies(false)
            .single_use_tickets(true)
    }

    /// A room with tickets on, on `store` and `clock`.
    fn room_on(b: WaitingRoomBuilder, store: &Tickets, clock: &ManualClock) -> WaitingRoomLayer {
        b.clock(clock.clone()).store(store.clone()).build().unwrap()
    }

    fn site() -> (WaitingRoomLayer, Tickets, ManualClock) {
        let clock = ManualClock::new(TEST_EPOCH_MS);
        let store = Tickets::on(&clock);
        (room_on(builder("shop"), &store, &clock), store, clock)
    }

    /// `req` through the layer, in front of an app that answers `200 app`.
    async fn send(layer: &WaitingRoomLayer, req: Request<()>) -> Response<String> {
        let svc = layer.layer(service_fn(|_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::new("app".to_owned()))
        }));
        let res = svc.oneshot(req).await.unwrap();
        let (parts, body) = res.into_parts();
        let bytes = http_body_util::BodyExt::collect(body)
            .await
            .unwrap()
            .to_bytes();
        Response::from_parts(parts, String::from_utf8(bytes.to_vec()).unwrap())
    }

    /// The value of the `name` cookie set by `res`.
    fn set_cookie<'r, B>(res: &'r Response<B>, name: &str) -> Option<&'r str> {
        res.headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix(name)?.strip_prefix('='))
            .map(|v| v.split(';').next().unwrap())
    }

    /// A visitor the store admits through the layer, as a browser (cookies): their admission
    /// token and ticket cookie values.
    async fn admitted_browser(layer: &WaitingRoomLayer) -> (String, Option<String>) {
        let first = send(layer, Request::get("/").body(()).unwrap()).await;
        let queue = set_cookie(&first, "wr_shop_q").unwrap().to_owned();
        let req = Request::get("/")
            .header(header::COOKIE, format!("wr_shop_q={queue}"))
            .body(())
            .unwrap();
        let res = send(layer, req).await;
        assert_eq!(
            res.status(),
            StatusCode::OK,
            "admitted: {:?}",
            res.headers()
        );
        assert!(
            res.headers().get(TICKET_HEADER).is_none(),
            "browsers get no header"
        );
        let token = set_cookie(&res, "wr_shop_a").unwrap().to_owned();
        (token, set_cookie(&res, "wr_shop_t").map(str::to_owned))
    }

    /// The redeem step for `req`, run to its end as the service future would.
    async fn redeem(layer: &WaitingRoomLayer, req: &Request<()>) -> Next {
        let room = layer.room();
        let mut next = room.gate(req, &[]);
        while let Next::Ask(mut pending) = next {
            next = poll_fn(|cx| room.poll_pending(&mut pending, cx, req)).await;
        }
        next
    }

    fn with_ticket_cookie(ticket: &str) -> Request<()> {
        Request::post("/checkout")
            .header(header::COOKIE, format!("other=1; wr_shop_t={ticket}"))
            .body(())
            .unwrap()
    }

    fn with_ticket_header(ticket: &str) -> Request<()> {
        Request::post("/checkout")
            .header(TICKET_HEADER, ticket)
            .body(())
            .unwrap()
    }

    /// A gate's `403` body for room "shop".
    fn refusal(error: &str, reason: &str) -> String {
        format!(
            r#"{{"error":"{error}","room":"shop","status":"/__waitingroom/shop/status","reason":"{reason}"}}"#
        )
    }

    fn not_admitted(reason: &str) -> String {
        refusal("not_admitted", reason)
    }

    fn used() -> String {
        refusal("ticket_used", "ticket_used")
    }

    #[track_caller]
    fn refused(next: Next, status: StatusCode, body: &str) {
        match next {
            Next::Answer(res) => {
                assert_eq!(res.status(), status);
                assert_eq!(std::str::from_utf8(res.body()).unwrap(), body);
            }
            Next::Pass { .. } => panic!("passed, expected {status} {body}"),
            Next::Ask(_) => panic!("still asking"),
            Next::Events(_) => panic!("a stream, expected {status} {body}"),
        }
    }

    #[track_caller]
    fn passed(next: Next, session: SessionId) -> Option<Issued> {
        match next {
            Next::Pass {
                admission,
                set_cookie,
            } => {
                assert_eq!(admission.by, AdmittedBy::Ticket);
                assert_eq!(admission.session, session);
                set_cookie
            }
            Next::Answer(res) => panic!("answered {} {:?}", res.status(), res.body()),
            Next::Ask(_) => panic!("still asking"),
            Next::Events(_) => panic!("a stream"),
        }
    }

    fn ticket_of(layer: &WaitingRoomLayer, value: &str) -> AdmissionTicket {
        let now = layer.room().now_ms();
        AdmissionTicket::verify(layer.room().keys(), "shop", value, now).unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_admission_mints_a_ticket_that_passes_exactly_once() {
        let (layer, store, _) = site();
        let (token, ticket) = admitted_browser(&layer).await;
        let ticket = ticket.expect("a ticket cookie at admission");
        assert_eq!(store.mints.load(Ordering::SeqCst), 1);
        let t = ticket_of(&layer, &ticket);
        let now = layer.room().now_ms();
        let token = crate::token::AdmissionToken::verify(layer.room().keys(), "shop", &token, now);
        let token = token.unwrap();
        assert_eq!(t.session(), token.session());
        assert_eq!(
            t.expires_at_ms(),
            token.expires_at_ms(),
            "expires with the slot"
        );

        let issued = passed(
            redeem(&layer, &with_ticket_cookie(&ticket)).await,
            t.session(),
        );
        // The used ticket's cookie stays, so the browser's next use is told `ticket_used`.
        assert!(issued.is_none(), "{issued:?}");
        for _ in 0..3 {
            let replay = redeem(&layer, &with_ticket_cookie(&ticket)).await;
            refused(replay, StatusCode::FORBIDDEN, &used());
            let by_header = redeem(&layer, &with_ticket_header(&ticket)).await;
            refused(by_header, StatusCode::FORBIDDEN, &used());
        }
        assert_eq!(store.redeems.load(Ordering::SeqCst), 7);
    }

    /// The ticket header may carry several values (an admission token as well as the ticket):
    /// the ticket is found among them, whichever comes first, and used once.
    #[tokio::test(flavor = "current_thread")]
    async fn the_ticket_is_found_among_several_header_values() {
        let (layer, _store, _clock) = site();
        let (token, ticket) = admitted_browser(&layer).await;
        let ticket = ticket.expect("a ticket cookie at admission");
        let t = ticket_of(&layer, &ticket);
        let both = || {
            Request::post("/checkout")
                .header(TICKET_HEADER, token.as_str())
                .header(TICKET_HEADER, "t1.not.a.ticket")
                .header(TICKET_HEADER, ticket.as_str())
                .body(())
                .unwrap()
        };
        passed(redeem(&layer, &both()).await, t.session());
        refused(
            redeem(&layer, &both()).await,
            StatusCode::FORBIDDEN,
            &used(),
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn bad_tickets_get_403_with_the_reason_and_no_store_call() {
        let (layer, store, clock) = site();
        let (_, ticket) = admitted_browser(&layer).await;
        let ticket = ticket.unwrap();
        let missing = &not_admitted("ticket_missing");
        let invalid = &not_admitted("ticket_invalid");
        let expired = &not_admitted("ticket_expired");
        let forbidden = StatusCode::FORBIDDEN;

        let none = Request::post("/checkout").body(()).unwrap();
        refused(redeem(&layer, &none).await, forbidden, missing);
        // An admission token in the ticket header is not a ticket.
        let token_header = with_ticket_header("a1.test.0.0.0.x");
        refused(redeem(&layer, &token_header).await, forbidden, missing);

        // Tampered: every byte of the ticket changed in turn. In the header, a value that no
        // longer starts `t1.` is no ticket (the header may carry other values on gated routes).
        for i in 0..ticket.len() {
            let mut bytes = ticket.clone().into_bytes();
            bytes[i] = if bytes[i] == b'0' { b'1' } else { b'0' };
            let tampered = String::from_utf8(bytes).unwrap();
            refused(
                redeem(&layer, &with_ticket_cookie(&tampered)).await,
                forbidden,
                invalid,
            );
            let in_header = if i < 3 { missing } else { invalid };
            refused(
                redeem(&layer, &with_ticket_header(&tampered)).await,
                forbidden,
                in_header,
            );
        }
        // Junk under the cookie's name; a ticket of another room; a forged one.
        refused(
            redeem(&layer, &with_ticket_cookie("junk")).await,
            forbidden,
            invalid,
        );
        let t = ticket_of(&layer, &ticket);
        let keys = layer.room().keys();
        let elsewhere = t.sign(keys, "other");
        refused(
            redeem(&layer, &with_ticket_cookie(&elsewhere)).await,
            forbidden,
            invalid,
        );
        let forger = Keyring::new(SigningKey::new("test", [1u8; 32]).unwrap());
        let forged = t.sign(&forger, "shop");
        refused(
            redeem(&layer, &with_ticket_header(&forged)).await,
            forbidden,
            invalid,
        );
        assert_eq!(store.redeems.load(Ordering::SeqCst), 0, "no store call");

        // Expired: told apart, still no store call; a junk value beside it does not hide it.
        clock.advance(Duration::from_millis(t.expires_at_ms() - clock.now_ms()));
        refused(
            redeem(&layer, &with_ticket_cookie(&ticket)).await,
            forbidden,
            expired,
        );
        let both = Request::post("/checkout")
            .header(
                header::COOKIE,
                format!("wr_shop_t=junk; wr_shop_t={ticket}"),
            )
            .body(())
            .unwrap();
        refused(redeem(&layer, &both).await, forbidden, expired);
        assert_eq!(store.redeems.load(Ordering::SeqCst), 0, "no store call");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_ticket_of_a_visitor_who_left_is_refused_and_stays_unused() {
        let (layer, store, _) = site();
        let (token, ticket) = admitted_browser(&layer).await;
        let ticket = ticket.unwrap();
        let leave = Request::post("/__waitingroom/shop/leave")
            .header(header::COOKIE, format!("wr_shop_a={token}"))
            .body(())
            .unwrap();
        assert_eq!(send(&layer, leave).await.status(), StatusCode::OK);
        let slot_ended = &not_admitted("slot_ended");
        for _ in 0..2 {
            let next = redeem(&layer, &with_ticket_cookie(&ticket)).await;
            refused(next, StatusCode::FORBIDDEN, slot_ended);
        }
        assert_eq!(store.redeems.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_valid_ticket_beside_junk_is_found() {
        let (layer, _, _) = site();
        let (_, ticket) = admitted_browser(&layer).await;
        let ticket = ticket.unwrap();
        let session = ticket_of(&layer, &ticket).session();
        // A planted cookie of the same name first, and junk in the header: the real one counts.
        let req = Request::post("/checkout")
            .header(
                header::COOKIE,
                format!("wr_shop_t=t1.x; wr_shop_t={ticket}"),
            )
            .header(TICKET_HEADER, "t1.junk")
            .body(())
            .unwrap();
        passed(redeem(&layer, &req).await, session);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_store_failure_on_redeem_is_503_under_either_policy_and_keeps_the_ticket() {
        for policy in [FailPolicy::Open, FailPolicy::Closed] {
            let clock = ManualClock::new(TEST_EPOCH_MS);
            let store = Tickets::on(&clock);
            let layer = room_on(builder("shop").fail_policy(policy), &store, &clock);
            let (_, ticket) = admitted_browser(&layer).await;
            let ticket = ticket.unwrap();
            store.fail.store(true, Ordering::SeqCst);
            match redeem(&layer, &with_ticket_cookie(&ticket)).await {
                Next::Answer(res) => {
                    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "{policy:?}");
                    assert!(res.headers().contains_key(header::RETRY_AFTER));
                }
                _ => panic!("{policy:?}: a ticket passed without the store"),
            }
            // Nothing was used: once the store is back, the ticket passes, once.
            store.fail.store(false, Ordering::SeqCst);
            let session = ticket_of(&layer, &ticket).session();
            passed(redeem(&layer, &with_ticket_cookie(&ticket)).await, session);
            let replay = redeem(&layer, &with_ticket_cookie(&ticket)).await;
            refused(replay, StatusCode::FORBIDDEN, &used());
        }
    }

    fn status(token: &str) -> Request<()> {
        Request::get("/__waitingroom/shop/status")
            .header(header::COOKIE, format!("wr_shop_a={token}"))
            .body(())
            .unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_status_endpoint_hands_out_the_admissions_ticket_until_it_is_used() {
        let (layer, store, _) = site();
        let (token, ticket) = admitted_browser(&layer).await;
        let ticket = ticket_of(&layer, &ticket.unwrap());
        let res = send(&layer, status(&token)).await;
        assert_eq!(res.status(), StatusCode::OK);
        let body: serde_json::Value = serde_json::from_str(res.body()).unwrap();
        assert_eq!(body["state"], "admitted");
        // A browser's ticket is never in the JSON (page scripts could read it), nor a header.
        assert!(body.get("ticket").is_none(), "{body}");
        assert!(res.headers().get(TICKET_HEADER).is_none());
        let found = set_cookie(&res, "wr_shop_t").unwrap().to_owned();
        // The admission's one ticket, found (a renewal's mint), as often as it is asked.
        for res in [res, send(&layer, status(&token)).await] {
            let same = ticket_of(&layer, set_cookie(&res, "wr_shop_t").unwrap());
            assert_eq!(same.nonce(), ticket.nonce());
        }
        let minted_for = store.minted_for.lock().unwrap().clone();
        let want = [MintFor::Admission, MintFor::Renewal, MintFor::Renewal];
        assert_eq!(minted_for, want);
        // Used: the status says so, and sets no ticket.
        let session = ticket.session();
        passed(redeem(&layer, &with_ticket_cookie(&found)).await, session);
        let used = send(&layer, status(&token)).await;
        let body: serde_json::Value = serde_json::from_str(used.body()).unwrap();
        assert_eq!(body["state"], "admitted");
        assert_eq!(body["ticket_used"], true, "{body}");
        assert_eq!(set_cookie(&used, "wr_shop_t"), None);
    }

    /// A failed mint at admission still admits, without a ticket. No later renewal (the status
    /// endpoint, a heartbeat) makes one up: it cannot tell a record never made from one lost
    /// after its ticket was used, so it says "used". The next admission gets a ticket.
    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_mint_still_admits_and_no_renewal_makes_the_ticket_up_later() {
        let (layer, store, _) = site();
        let first = send(&layer, Request::get("/").body(()).unwrap()).await;
        let queue = format!("wr_shop_q={}", set_cookie(&first, "wr_shop_q").unwrap());
        let enter = || {
            Request::get("/")
                .header(header::COOKIE, queue.as_str())
                .body(())
                .unwrap()
        };
        store.fail.store(true, Ordering::SeqCst);
        let res = send(&layer, enter()).await;
        assert_eq!(res.status(), StatusCode::OK, "admitted");
        assert_eq!(
            set_cookie(&res, "wr_shop_t"),
            None,
            "no ticket: the mint failed"
        );
        let token = set_cookie(&res, "wr_shop_a").unwrap().to_owned();
        store.fail.store(false, Ordering::SeqCst);
        let res = send(&layer, status(&token)).await;
        assert_eq!(res.status(), StatusCode::OK);
        let body: serde_json::Value = serde_json::from_str(res.body()).unwrap();
        assert_eq!(body["state"], "admitted");
        assert_eq!(body["ticket_used"], true, "{body}");
        assert_eq!(set_cookie(&res, "wr_shop_t"), None);
        // Leaves, and is admitted again: a ticket for the new admission.
        let leave = Request::post("/__waitingroom/shop/leave")
            .header(header::COOKIE, format!("wr_shop_a={token}"))
            .body(())
            .unwrap();
        assert_eq!(send(&layer, leave).await.status(), StatusCode::OK);
        let res = send(&layer, enter()).await;
        assert_eq!(res.status(), StatusCode::OK, "admitted again");
        let ticket = set_cookie(&res, "wr_shop_t").expect("a ticket for the next admission");
        let session = ticket_of(&layer, ticket).session();
        passed(redeem(&layer, &with_ticket_cookie(ticket)).await, session);
    }

    /// A used ticket whose record is then lost (evicted, deleted) is not minted afresh at the
    /// visitor's next heartbeat: the heartbeat's mint is a renewal, so the lost record reads as
    /// used, and the ticket never passes a second time.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "current_thread")]
    async fn a_used_ticket_whose_record_is_lost_does_not_pass_again_after_a_heartbeat() {
        let (layer, store, clock) = site();
        let (token, ticket) = admitted_browser(&layer).await;
        let ticket = ticket.unwrap();
        let session = ticket_of(&layer, &ticket).session();
        passed(redeem(&layer, &with_ticket_cookie(&ticket)).await, session);
        let lost = crate::store::damage::Damage::TicketLost(session);
        store.inner.__damage("shop", lost).unwrap();
        clock.advance(Duration::from_secs(20));
        let beat = Request::get("/")
            .header(header::COOKIE, format!("wr_shop_a={token}"))
            .body(())
            .unwrap();
        let res = send(&layer, beat).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert!(set_cookie(&res, "wr_shop_a").is_some(), "a fresh token");
        assert_eq!(set_cookie(&res, "wr_shop_t"), None, "no second ticket");
        let minted_for = store.minted_for.lock().unwrap().clone();
        assert_eq!(minted_for, [MintFor::Admission, MintFor::Renewal]);
        let replay = redeem(&layer, &with_ticket_cookie(&ticket)).await;
        refused(replay, StatusCode::FORBIDDEN, &used());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn header_clients_get_the_ticket_in_a_header_and_in_the_status_json() {
        let (layer, _, _) = site();
        let first = send(&layer, Request::get("/").body(()).unwrap()).await;
        let queue = first.headers()["waiting-room-session"].clone();
        let res = send(
            &layer,
            Request::get("/")
                .header("waiting-room-session", queue)
                .body(())
                .unwrap(),
        )
        .await;
        assert_eq!(res.status(), StatusCode::OK);
        let ticket = res.headers()[TICKET_HEADER].to_str().unwrap().to_owned();
        let token: HeaderValue = res.headers()["waiting-room-token"].clone();
        let status = send(
            &layer,
            Request::get("/__waitingroom/shop/status")
                .header("waiting-room-token", token)
                .body(())
                .unwrap(),
        )
        .await;
        let body: serde_json::Value = serde_json::from_str(status.body()).unwrap();
        assert_eq!(body["state"], "admitted");
        assert_eq!(body["ticket"], ticket.as_str(), "{body}");
        assert_eq!(status.headers()[TICKET_HEADER], ticket.as_str());
        let session = ticket_of(&layer, &ticket).session();
        passed(redeem(&layer, &with_ticket_header(&ticket)).await, session);
        let replay = redeem(&layer, &with_ticket_header(&ticket)).await;
        refused(replay, StatusCode::FORBIDDEN, &used());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn heartbeats_extend_the_same_ticket_and_tickets_off_mint_nothing() {
        let (layer, store, clock) = site();
        let (mut token, ticket) = admitted_browser(&layer).await;
        let mut ticket = ticket.unwrap();
        let first = ticket_of(&layer, &ticket);
        assert_eq!(store.mints.load(Ordering::SeqCst), 1);
        let heartbeat = |token: &str| {
            Request::get("/")
                .header(header::COOKIE, format!("wr_shop_a={token}"))
                .body(())
                .unwrap()
        };
        let token_of = |value: &str| {
            let now = layer.room().now_ms();
            crate::token::AdmissionToken::verify(layer.room().keys(), "shop", value, now).unwrap()
        };
        // Past refresh: a heartbeat extends the slot, and re-issues the same ticket (same
        // nonce) with the slot's new expiry, three times over.
        let mut expires = first.expires_at_ms();
        for beat in 1..=3 {
            clock.advance(Duration::from_secs(20));
            let res = send(&layer, heartbeat(&token)).await;
            assert_eq!(res.status(), StatusCode::OK);
            token = set_cookie(&res, "wr_shop_a")
                .expect("a fresh token")
                .to_owned();
            ticket = set_cookie(&res, "wr_shop_t")
                .expect("the ticket")
                .to_owned();
            let renewed = ticket_of(&layer, &ticket);
            assert_eq!(renewed.nonce(), first.nonce(), "the same ticket");
            assert_eq!(renewed.expires_at_ms(), token_of(&token).expires_at_ms());
            assert!(renewed.expires_at_ms() > expires, "beat {beat}: extended");
            expires = renewed.expires_at_ms();
            assert_eq!(store.mints.load(Ordering::SeqCst), 1 + beat);
        }
        // A failed mint: the visitor passes with a fresh token, without a ticket cookie.
        store.fail.store(true, Ordering::SeqCst);
        clock.advance(Duration::from_secs(20));
        let res = send(&layer, heartbeat(&token)).await;
        assert_eq!(res.status(), StatusCode::OK);
        token = set_cookie(&res, "wr_shop_a")
            .expect("a fresh token")
            .to_owned();
        assert_eq!(set_cookie(&res, "wr_shop_t"), None);
        assert_eq!(store.mints.load(Ordering::SeqCst), 5);
        store.fail.store(false, Ordering::SeqCst);
        // Used: a heartbeat still extends the record (a mint) but sets no ticket.
        let session = first.session();
        passed(redeem(&layer, &with_ticket_cookie(&ticket)).await, session);
        clock.advance(Duration::from_secs(20));
        let res = send(&layer, heartbeat(&token)).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert!(set_cookie(&res, "wr_shop_a").is_some(), "a fresh token");
        assert_eq!(set_cookie(&res, "wr_shop_t"), None);
        assert_eq!(store.mints.load(Ordering::SeqCst), 6);
        // The admission's mint, then every heartbeat's a renewal.
        let minted_for = store.minted_for.lock().unwrap().clone();
        assert_eq!(minted_for[0], MintFor::Admission);
        assert!(minted_for[1..].iter().all(|m| *m == MintFor::Renewal));

        let off = room_on(builder("shop").single_use_tickets(false), &store, &clock);
        let (token, ticket) = admitted_browser(&off).await;
        assert_eq!(ticket, None);
        let status = Request::get("/__waitingroom/shop/status")
            .header(header::COOKIE, format!("wr_shop_a={token}"))
            .body(())
            .unwrap();
        let res = send(&off, status).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(set_cookie(&res, "wr_shop_t"), None);
        assert_eq!(store.mints.load(Ordering::SeqCst), 6);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fifty_concurrent_uses_through_three_gateways_pass_once() {
        let clock = ManualClock::new(TEST_EPOCH_MS);
        let store = Tickets::on(&clock);
        let gateways: Vec<_> = (0..3)
            .map(|_| room_on(builder("shop"), &store, &clock))
            .collect();
        let (_, ticket) = admitted_browser(&gateways[0]).await;
        let ticket = ticket.unwrap();
        let mut uses = tokio::task::JoinSet::new();
        for i in 0..50 {
            let (layer, ticket) = (gateways[i % 3].clone(), ticket.clone());
            uses.spawn(async move {
                let req = if i % 2 == 0 {
                    with_ticket_cookie(&ticket)
                } else {
                    with_ticket_header(&ticket)
                };
                match redeem(&layer, &req).await {
                    Next::Pass { .. } => StatusCode::OK,
                    Next::Answer(res) => res.status(),
                    Next::Ask(_) | Next::Events(_) => unreachable!(),
                }
            });
        }
        let mut statuses = Vec::new();
        while let Some(status) = uses.join_next().await {
            statuses.push(status.unwrap());
        }
        let passed = statuses.iter().filter(|s| s.is_success()).count();
        let used = statuses
            .iter()
            .filter(|s| **s == StatusCode::FORBIDDEN)
            .count();
        assert_eq!((passed, used), (1, 49), "{statuses:?}");
    }

    #[test]
    fn a_store_without_tickets_is_refused_at_build() {
        struct Plain(MemoryStore);
        impl Store for Plain {
            fn enter(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
                self.0.enter(p, s)
            }
            fn poll(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
                self.0.poll(p, s)
            }
            fn heartbeat(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
                self.0.heartbeat(p, s)
            }
            fn release(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<bool> {
                self.0.release(p, s)
            }
            fn stats(&self, p: &RoomPolicy) -> StoreFuture<RoomStats> {
                self.0.stats(p)
            }
            fn configure(&self, p: &RoomPolicy, c: SettingsChange) -> StoreFuture<SettingsUpdate> {
                self.0.configure(p, c)
            }
            fn admit_next(&self, p: &RoomPolicy, n: u32) -> StoreFuture<u64> {
                self.0.admit_next(p, n)
            }
            fn ban(&self, p: &RoomPolicy, s: SessionId, until: u64) -> StoreFuture<bool> {
                self.0.ban(p, s, until)
            }
        }
        let plain = || Plain(MemoryStore::with_clock(ManualClock::new(TEST_EPOCH_MS)));
        let err = builder("shop").store(plain()).build().err();
        assert_eq!(err, Some(crate::ConfigError::StoreWithoutTickets));
        assert!(builder("shop")
            .single_use_tickets(false)
            .store(plain())
            .build()
            .is_ok());
        // It offers no tickets: nothing to call that could answer wrongly.
        assert!(Arc::new(plain()).tickets().is_none());
    }
}
