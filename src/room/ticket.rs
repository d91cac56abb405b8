//! Single-use checkout tickets in the room (with
//! [`single_use_tickets`](crate::WaitingRoomBuilder::single_use_tickets) on): minting one when
//! the store admits a visitor and on the status endpoint, and the redeem step a gated route
//! runs to let a request through on a ticket exactly once.
//!
//! A ticket is checked at the gateway first (MAC, room, expiry: no store call for a forged,
//! tampered, other-room or expired one), then used in the store in one atomic step
//! ([`Store::redeem_ticket`](crate::store::Store::redeem_ticket)), so of any number of uses of
//! one ticket through any number of gateways exactly one passes. The answers:
//!
//! | ticket | answer |
//! |---|---|
//! | accepted by the store | pass, admitted [`AdmittedBy::Ticket`]; the ticket cookie is removed |
//! | used before | `403 {"error":"ticket_used"}` |
//! | none in the request | `403 {"error":"not_admitted","reason":"ticket_missing"}` |
//! | forged, tampered, of another room (the room is inside the MAC, so it reads as forged), or unknown to the store | `403 {"error":"not_admitted","reason":"ticket_invalid"}` |
//! | past its expiry | `403 {"error":"not_admitted","reason":"ticket_expired"}` |
//! | the store failed | `503` with `Retry-After` (`busy` or `unavailable`), under either fail policy |
//! | over the session's poll limit | `429` with `Retry-After` |

use std::ops::Not;

use bytes::Bytes;
use http::header::{self, HeaderName};
use http::{Request, Response, StatusCode};
use serde::Serialize;

use super::pending::{Next, Pending};
use super::reply::{store_error_json, Issued};
use super::visitor::header_value;
use super::Room;
use crate::clock::secs_ceil;
use crate::cookies::{self, Wanted};
use crate::outcome::{Admission, AdmittedBy};
use crate::response::{json_response, StatusBody};
use crate::session::SessionId;
use crate::store::{Minted, Redeemed, StoreError, TicketNonce};
use crate::telemetry::{Outcome, Stage};
use crate::token::{AdmissionTicket, TicketRefusal};

/// The header that carries a ticket for clients that use headers instead of cookies: the room
/// sends it on admission and on the status endpoint, and a gated route reads a ticket (`t1.`)
/// from it.
pub(crate) const TICKET_HEADER: HeaderName = HeaderName::from_static("x-admission-ticket");

/// Why a request's ticket cannot be used, before any store call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TicketProblem {
    /// No ticket in the request.
    Missing,
    /// Forged, tampered with, of another room, or unknown to the store.
    Invalid,
    /// A genuine ticket past its expiry.
    Expired,
}

impl TicketProblem {
    fn reason(self) -> &'static str {
        match self {
            TicketProblem::Missing => "ticket_missing",
            TicketProblem::Invalid => "ticket_invalid",
            TicketProblem::Expired => "ticket_expired",
        }
    }
}

/// A valid ticket found in a request, and whether it came in the ticket cookie (which the
/// answer then removes: the ticket is of no further use).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Presented {
    ticket: AdmissionTicket,
    from_cookie: bool,
}

/// What minting a ticket needs to issue it once the store answers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Minting {
    session: SessionId,
    /// The slot's expiry: the ticket's, and its record's.
    expires_at_ms: u64,
    uses_headers: bool,
    now: u64,
}

/// The body of a refused ticket: `{"error":"ticket_used"}`, or `{"error":"not_admitted",
/// "reason":...}`.
#[derive(Serialize)]
struct TicketRefused {
    error: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
}

/// The status endpoint's answer to an admitted visitor with tickets on: the usual body, and
/// the ticket (for clients that use headers only: a page's scripts must not read a browser's
/// `HttpOnly` ticket) or the note that it was used.
#[derive(Serialize)]
struct TicketStatus<'a> {
    #[serde(flatten)]
    status: StatusBody<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ticket: Option<&'a str>,
    #[serde(skip_serializing_if = "Not::not")]
    ticket_used: bool,
}

impl Room {
    /// Whether the room mints single-use tickets.
    pub(super) fn mints_tickets(&self) -> bool {
        self.config.single_use_tickets
    }

    /// The store admitted the visitor (`pass`, with its fresh admission token): with tickets
    /// on, one more store call mints their ticket before the request passes; otherwise `pass`.
    pub(super) fn with_ticket(
        &self,
        pass: Next,
        expires_at_ms: u64,
        uses_headers: bool,
        now: u64,
    ) -> Next {
        match pass {
            Next::Pass {
                admission,
                set_cookie,
            } if self.mints_tickets() => {
                let minting = Minting {
                    session: admission.session,
                    expires_at_ms,
                    uses_headers,
                    now,
                };
                Next::Ask(Pending::MintAtAdmission {
                    call: self.mint(&minting),
                    admission,
                    token: set_cookie,
                    minting,
                })
            }
            next => next,
        }
    }

    fn mint(&self, m: &Minting) -> crate::store::StoreFuture<Minted> {
        self.store.mint_ticket(
            &self.config.policy,
            m.session,
            TicketNonce::random(),
            m.expires_at_ms,
        )
    }

    /// The mint at admission answered: pass, with the ticket when there is one. A failed mint
    /// still passes: the admission is real, and the status endpoint hands the ticket out later.
    pub(super) fn after_mint_at_admission(
        &self,
        answer: Result<Minted, StoreError>,
        admission: Admission,
        token: Option<Issued>,
        minting: Minting,
    ) -> Next {
        let ticket = match answer {
            Ok(Minted::Ticket {
                nonce,
                expires_at_ms,
            }) => Some(self.issue_ticket(&minting, nonce, expires_at_ms)),
            Ok(_) => None,
            Err(e) => {
                self.log_store_failure(&e, "mint_ticket (admitted without a ticket for now)");
                None
            }
        };
        let set_cookie = match (token, ticket) {
            (Some(token), Some(ticket)) => Some(token.and(ticket)),
            (token, ticket) => token.or(ticket),
        };
        Next::Pass {
            admission,
            set_cookie,
        }
    }

    /// The ticket `nonce` of `m`'s session, expiring with its store record at `expires_at_ms`,
    /// signed and issued: the ticket cookie, and the ticket header for clients that use headers.
    fn issue_ticket(&self, m: &Minting, nonce: TicketNonce, expires_at_ms: u64) -> Issued {
        let value = self.sign_ticket(m, nonce, expires_at_ms);
        self.issue_ticket_value(m, value, expires_at_ms)
    }

    fn issue_ticket_value(&self, m: &Minting, value: String, expires_at_ms: u64) -> Issued {
        self.issue(
            m.uses_headers,
            &self.config.cookies.ticket_name,
            &TICKET_HEADER,
            value,
            secs_ceil(expires_at_ms.saturating_sub(m.now)),
        )
    }

    /// The signed ticket: the record's expiry, not the one asked for, so a ticket found (made
    /// by an earlier mint) ends with its record.
    fn sign_ticket(&self, m: &Minting, nonce: TicketNonce, expires_at_ms: u64) -> String {
        AdmissionTicket::new(m.session, nonce, m.now, expires_at_ms)
            .sign(&self.keys, self.config.room())
    }

    /// The status endpoint for a visitor with a valid admission token, tickets on: mints (or
    /// finds) their ticket, within the session's poll limit like every store question.
    pub(super) fn ask_status_ticket(
        &self,
        session: SessionId,
        expires_at_ms: u64,
        uses_headers: bool,
        now: u64,
    ) -> Next {
        let minting = Minting {
            session,
            expires_at_ms,
            uses_headers,
            now,
        };
        Next::Ask(Pending::StatusTicket {
            call: self.mint(&minting),
            minting,
        })
    }

    /// `200 {"state":"admitted",...}`, with the ticket (cookie; and header and `"ticket"` for
    /// header clients), or `"ticket_used": true`. A failed mint answers without a ticket: the
    /// visitor is admitted all the same, and can ask again.
    pub(super) fn after_status_ticket(
        &self,
        answer: Result<Minted, StoreError>,
        minting: Minting,
    ) -> Response<Bytes> {
        let room = self.config.room();
        let mut body = TicketStatus {
            status: StatusBody::plain(room, "admitted"),
            ticket: None,
            ticket_used: false,
        };
        let mut issued = None;
        let value;
        match answer {
            Ok(Minted::Ticket {
                nonce,
                expires_at_ms,
            }) => {
                value = self.sign_ticket(&minting, nonce, expires_at_ms);
                if minting.uses_headers {
                    body.ticket = Some(&value);
                }
                issued = Some(self.issue_ticket_value(&minting, value.clone(), expires_at_ms));
            }
            Ok(_) => body.ticket_used = true,
            Err(e) => self.log_store_failure(&e, "mint_ticket (status without a ticket)"),
        }
        let mut res = json_response(StatusCode::OK, &body);
        if let Some(issued) = issued {
            issued.apply(res.headers_mut());
        }
        self.counted(Stage::Endpoint, Outcome::Admitted, res)
    }

    /// The redeem step of a gated route: the request's ticket, checked here (MAC, room,
    /// expiry) and then used in the store. Says [`Next::Pass`] (admitted
    /// [`AdmittedBy::Ticket`]) exactly once per ticket across all gateways, and otherwise
    /// answers `403` with the reason, `429` over the session's poll limit, or `503` when the
    /// store fails (see the [module docs](self)). Nothing is asked of the store for a missing,
    /// forged, tampered, other-room or expired ticket.
    #[cfg_attr(not(test), allow(dead_code))] // Called by the gates, wired in by the lead.
    pub(crate) fn redeem_ticket<B>(&self, req: &Request<B>) -> Next {
        let now = self.now_ms();
        let presented = match self.presented_ticket(req, now) {
            Ok(presented) => presented,
            Err(problem) => return Next::Answer(ticket_refused(problem)),
        };
        let session = presented.ticket.session();
        if let Err(wait) = self.check_polls(session, now) {
            return Next::Answer(self.limited(wait, req));
        }
        Next::Ask(Pending::Redeem {
            call: self
                .store
                .redeem_ticket(&self.config.policy, session, presented.ticket.nonce()),
            presented,
        })
    }

    /// The store's answer to a redeem.
    pub(super) fn after_redeem(
        &self,
        answer: Result<Redeemed, StoreError>,
        presented: Presented,
    ) -> Next {
        let ticket = presented.ticket;
        match answer {
            Ok(Redeemed::Accepted) => Next::Pass {
                admission: self.admission(
                    ticket.session(),
                    ticket.expires_at_ms(),
                    AdmittedBy::Ticket,
                ),
                set_cookie: presented
                    .from_cookie
                    .then(|| Issued::cookie_only(self.clear_ticket_cookie())),
            },
            Ok(Redeemed::Used) => {
                let mut res = json_response(
                    StatusCode::FORBIDDEN,
                    &TicketRefused {
                        error: "ticket_used",
                        reason: None,
                    },
                );
                if presented.from_cookie {
                    res.headers_mut()
                        .append(header::SET_COOKIE, self.clear_ticket_cookie());
                }
                Next::Answer(res)
            }
            // A genuine ticket the store does not hold: its record was lost (an eviction, a
            // flushed store), or ended on the store's clock before the gateway's. It cannot be
            // shown unused, so it is refused.
            Ok(_) => Next::Answer(ticket_refused(TicketProblem::Invalid)),
            // A single-use ticket cannot be honoured without the store: only the store knows
            // whether it was used, and letting it through (fail open) would let every copy of
            // it through. So `503` under either fail policy; the ticket stays unused (nothing
            // was written), and the visitor can try again.
            Err(e) => {
                self.log_store_failure(&e, "redeem_ticket");
                Next::Answer(store_error_json(self.config.room(), &e))
            }
        }
    }

    /// The ticket of `req`: the first valid one of the ticket cookie's values, or else the
    /// ticket header's when it holds a ticket (`t1.`; the same header may carry other values on
    /// gated routes). Refused: the most telling problem found (expired before invalid before
    /// missing).
    fn presented_ticket<B>(&self, req: &Request<B>, now: u64) -> Result<Presented, TicketProblem> {
        let c = &self.config.cookies;
        let [cookie] = cookies::read(
            req.headers(),
            [Wanted {
                name: &c.ticket_name,
                could_be: AdmissionTicket::could_be,
            }],
        );
        let mut problem = if cookie.is_present() {
            TicketProblem::Invalid
        } else {
            TicketProblem::Missing
        };
        let mut check = |value: &str| {
            match AdmissionTicket::check(&self.keys, self.config.room(), value, now) {
                Ok(ticket) => return Some(ticket),
                Err(TicketRefusal::Expired) => problem = TicketProblem::Expired,
                Err(_) if problem == TicketProblem::Missing => problem = TicketProblem::Invalid,
                Err(_) => {}
            }
            None
        };
        if let Some(ticket) = cookie.find_valid(&mut check) {
            return Ok(Presented {
                ticket,
                from_cookie: true,
            });
        }
        let header = header_value(req, &TICKET_HEADER)
            .map(str::trim)
            .filter(|v| v.starts_with("t1."));
        match header.and_then(&mut check) {
            Some(ticket) => Ok(Presented {
                ticket,
                from_cookie: false,
            }),
            None => Err(problem),
        }
    }

    fn clear_ticket_cookie(&self) -> http::HeaderValue {
        let c = &self.config.cookies;
        cookies::clear_cookie(c, &c.ticket_name)
    }
}

/// `403` with the reason a ticket cannot be used.
fn ticket_refused(problem: TicketProblem) -> Response<Bytes> {
    json_response(
        StatusCode::FORBIDDEN,
        &TicketRefused {
            error: "not_admitted",
            reason: Some(problem.reason()),
        },
    )
}
