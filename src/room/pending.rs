//! Stage 3: the store steps. Each [`Pending`] step holds its store call and the context its
//! answer needs, and turns the answer into the [`Next`] thing to do, so a step can never be
//! paired with another step's answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};

use super::drain::Drained;
use super::gate::GateHeartbeat;
use super::reply::{
    banned_rejection, closed_rejection, error_rejection, full_rejection, rejection_json,
    scheduled_rejection, store_error_json, waiting_rejection, Issued,
};
use super::snapshot::AfterSync;
use super::ticket::{Minting, Presented};
use super::Room;
use crate::clock::{duration_ms, secs_ceil};
use crate::config::FailPolicy;
use crate::cookies;
use crate::outcome::{Admission, AdmittedBy, Rejection};
use crate::response::{json_response, StatusBody};
use crate::session::SessionId;
use crate::store::{
    Decision, Minted, Place, Redeemed, RoomSnapshot, StoreError, StoreErrorKind, StoreFuture,
};
use crate::telemetry::{Outcome, Stage};
use crate::token::{AdmissionToken, QueueCookie};

/// What to do with a request.
pub(crate) enum Next {
    /// Call the inner service, with the admission in the request's extensions and, when the
    /// store just granted or extended the slot, a fresh admission token on the response.
    Pass {
        admission: Admission,
        set_cookie: Option<Issued>,
    },
    /// Answer here.
    Answer(Response<Bytes>),
    /// Answer here with a waiter's event stream.
    Events(super::events::EventsStart),
    /// Ask the store, then do what the step says with its answer. Boxed: the response future
    /// keeps it boxed, and the fast path's `Next` stays small to move.
    Ask(Box<Pending>),
}

impl Next {
    /// Pass, with nothing to add to the response.
    pub(super) fn pass(admission: Admission) -> Self {
        Next::Pass {
            admission,
            set_cookie: None,
        }
    }

    /// Ask the store first.
    pub(super) fn ask(pending: Pending) -> Self {
        Next::Ask(Box::new(pending))
    }
}

/// A store question in flight, with what its answer will need.
pub(crate) enum Pending {
    /// Stage 3 for a visitor with a queue cookie. `stale_token`: the visitor's admission token
    /// is still valid but its slot is gone, so a rejection also removes the token cookie.
    Enter {
        call: StoreFuture<Decision>,
        session: SessionId,
        /// The visitor's queue cookie, issued again when the store says another place.
        cookie: Option<QueueCookie>,
        stale_token: bool,
        uses_headers: bool,
    },
    /// An admitted visitor whose token is past `refresh` but not expired.
    Heartbeat {
        call: StoreFuture<Decision>,
        token: AdmissionToken,
        uses_headers: bool,
    },
    /// The status endpoint.
    Status {
        call: StoreFuture<Decision>,
        cookie: QueueCookie,
        uses_headers: bool,
    },
    /// The gateway's snapshot is due: refreshed, then the waiting poll that found it due is
    /// answered (see `snapshot`).
    Sync {
        call: StoreFuture<RoomSnapshot>,
        then: Option<AfterSync>,
    },
    /// The leave endpoint.
    Leave { call: StoreFuture<bool> },
    /// A valid admission token past `refresh` on a gated route (see `gate`).
    Gate(GateHeartbeat),
    /// Single-use tickets on: the store just granted or extended the visitor's slot (a new
    /// slot, a claimed grant, or a heartbeat), and is asked for their ticket (minted, or found
    /// and extended with the slot) before the request passes.
    MintWithSlot {
        call: StoreFuture<Minted>,
        admission: Admission,
        /// The fresh admission token.
        token: Option<Issued>,
        minting: Minting,
    },
    /// The status endpoint for a visitor with a valid admission token, single-use tickets on.
    StatusTicket {
        call: StoreFuture<Minted>,
        minting: Minting,
    },
    /// A gated route's single-use ticket, being used.
    Redeem {
        call: StoreFuture<Redeemed>,
        presented: Presented,
    },
}

impl Pending {
    /// Waits for the store's answer, then says what to do next.
    pub(crate) fn poll_next<B>(
        &mut self,
        cx: &mut Context<'_>,
        room: &Room,
        req: &Request<B>,
    ) -> Poll<Next> {
        Poll::Ready(match self {
            Pending::Enter {
                call,
                session,
                cookie,
                stale_token,
                uses_headers,
            } => {
                let answer = ready!(call.as_mut().poll(cx));
                let asked = Asked {
                    session: *session,
                    uses_headers: *uses_headers,
                    now: room.now_ms(),
                };
                room.after_enter(asked, *cookie, *stale_token, answer, req)
            }
            Pending::Heartbeat {
                call,
                token,
                uses_headers,
            } => {
                let answer = ready!(call.as_mut().poll(cx));
                let asked = Asked {
                    session: token.session(),
                    uses_headers: *uses_headers,
                    now: room.now_ms(),
                };
                room.after_heartbeat(asked, *token, answer, req)
            }
            Pending::Status {
                call,
                cookie,
                uses_headers,
            } => {
                let answer = ready!(call.as_mut().poll(cx));
                Next::Answer(room.after_status(answer, *cookie, *uses_headers))
            }
            Pending::Sync { call, then } => {
                let answer = ready!(call.as_mut().poll(cx));
                let then = then.take().expect("a sync step answers once");
                room.after_sync(then, answer, req)
            }
            Pending::Gate(step) => return step.poll_next(cx, room, req),
            Pending::MintWithSlot {
                call,
                admission,
                token,
                minting,
            } => {
                let answer = ready!(call.as_mut().poll(cx));
                room.after_mint_with_slot(answer, admission.clone(), token.take(), *minting)
            }
            Pending::StatusTicket { call, minting } => {
                Next::Answer(room.after_status_ticket(ready!(call.as_mut().poll(cx)), *minting))
            }
            Pending::Redeem { call, presented } => {
                room.after_redeem(ready!(call.as_mut().poll(cx)), *presented)
            }
            Pending::Leave { call } => Next::Answer(match ready!(call.as_mut().poll(cx)) {
                Ok(_) => room.counted(Stage::Endpoint, Outcome::Left, room.left(req)),
                // Both cookies kept, whatever the fail policy: the place or slot may still be
                // held, and leaving again later frees it.
                Err(e) => {
                    room.log_store_failure(&e, "leave");
                    room.metrics
                        .request(Stage::Endpoint, Outcome::of_error(&e, false));
                    store_error_json(room.config.room(), &e)
                }
            }),
        })
    }
}

/// Who a store answer is for, and when it came.
#[derive(Clone, Copy)]
struct Asked {
    session: SessionId,
    /// Whether the visitor carries the room's values in headers (read with the request's
    /// cookies, before the store was asked).
    uses_headers: bool,
    now: u64,
}

impl Room {
    pub(super) fn ask_enter(
        &self,
        session: SessionId,
        cookie: Option<QueueCookie>,
        stale_token: bool,
        uses_headers: bool,
    ) -> Next {
        // A cookie without a place: as far as this gateway knows, a newcomer.
        let call = if cookie.as_ref().and_then(QueueCookie::place).is_some() {
            self.store.enter(&self.config.policy, session)
        } else {
            self.store.join(&self.config.policy, session)
        };
        Next::ask(Pending::Enter {
            call,
            session,
            cookie,
            stale_token,
            uses_headers,
        })
    }

    pub(super) fn ask_heartbeat(&self, token: AdmissionToken, uses_headers: bool) -> Next {
        Next::ask(Pending::Heartbeat {
            call: self.store.heartbeat(&self.config.policy, token.session()),
            token,
            uses_headers,
        })
    }

    pub(super) fn ask_status(&self, cookie: QueueCookie, uses_headers: bool) -> Next {
        Next::ask(Pending::Status {
            call: self.store.poll(&self.config.policy, cookie.session()),
            cookie,
            uses_headers,
        })
    }

    /// `res`, with the queue cookie issued again if the store placed the visitor elsewhere
    /// than it says: the gateway answers their next polls from its snapshot by it.
    fn with_place(
        &self,
        mut res: Response<Bytes>,
        cookie: Option<QueueCookie>,
        place: Option<Place>,
        uses_headers: bool,
        now: u64,
    ) -> Response<Bytes> {
        if let (Some(cookie), Some(place)) = (cookie, place) {
            if cookie.place() != Some(place) && self.line.supported() {
                self.issue_queue_cookie(uses_headers, cookie.with_place(place), now)
                    .apply(res.headers_mut());
            }
        }
        res
    }

    pub(super) fn ask_leave(&self, session: SessionId) -> Next {
        Next::ask(Pending::Leave {
            call: self.store.release(&self.config.policy, session),
        })
    }

    fn after_enter<B>(
        &self,
        asked: Asked,
        cookie: Option<QueueCookie>,
        stale_token: bool,
        answer: Result<Decision, StoreError>,
        req: &Request<B>,
    ) -> Next {
        self.count_answer(Stage::Store, &answer);
        let next = match answer {
            Ok(Decision::Admitted { expires_at_ms }) => {
                // A new slot or a claimed grant: with tickets on, the visitor's ticket too.
                let pass = self.admitted(asked, expires_at_ms, req);
                return self.with_ticket(pass, expires_at_ms, asked.uses_headers, asked.now);
            }
            Ok(Decision::Waiting {
                position,
                waiting,
                paused,
                pace,
                place,
                ..
            }) => {
                let pace = self.pace_for(pace, asked.now);
                let res = self.reject(&waiting_rejection(position, waiting, paused, pace), req);
                Next::Answer(self.with_place(res, cookie, place, asked.uses_headers, asked.now))
            }
            Ok(Decision::Full { waiting }) => {
                Next::Answer(self.reject(&full_rejection(waiting), req))
            }
            Ok(Decision::Closed) => Next::Answer(self.reject(&closed_rejection(), req)),
            Ok(Decision::Banned) => Next::Answer(self.reject(&banned_rejection(), req)),
            Ok(Decision::Scheduled { opens_at_ms }) => {
                Next::Answer(self.reject(&scheduled_rejection(opens_at_ms, asked.now), req))
            }
            Ok(Decision::Unknown) => {
                let e = StoreError::new(StoreErrorKind::Protocol);
                self.store_failed(asked, e, req)
            }
            Err(e) => self.store_failed(asked, e, req),
        };
        // Any answer here (waiting, full, busy, closed) to a visitor whose token outlived its
        // slot also removes the token, so it stops costing a heartbeat on every request.
        match next {
            Next::Answer(res) if stale_token => Next::Answer(self.without_token(res)),
            next => next,
        }
    }

    /// `res`, also removing the admission token cookie.
    pub(super) fn without_token(&self, mut res: Response<Bytes>) -> Response<Bytes> {
        let c = &self.config.cookies;
        res.headers_mut().append(
            header::SET_COOKIE,
            cookies::clear_cookie(c, &c.admission_name),
        );
        res
    }

    fn after_heartbeat<B>(
        &self,
        asked: Asked,
        token: AdmissionToken,
        answer: Result<Decision, StoreError>,
        req: &Request<B>,
    ) -> Next {
        match answer {
            Ok(Decision::Admitted { expires_at_ms }) => {
                let pass = self.counted(
                    Stage::Store,
                    Outcome::Admitted,
                    self.admitted(asked, expires_at_ms, req),
                );
                // The slot lives on: with tickets on, so does its ticket (the same one,
                // extended; a browser never asks the status endpoint once inside).
                self.with_ticket(pass, expires_at_ms, asked.uses_headers, asked.now)
            }
            // The slot is gone (expired or released): back to stage 3 as a queued visitor, a
            // second store call, so a second count against the poll limit. Over it, the token
            // (whose slot is known to be gone) is removed, and no store call is made.
            Ok(_) => match self.check_polls(asked.session, asked.now) {
                // Without the queue cookie (not read for a token holder): a place it carries from
                // an earlier wait is ahead of the line now, so the gateway's snapshot sends the
                // next poll to the store, whose answer then goes into the cookie.
                Ok(()) => self.ask_enter(asked.session, None, true, asked.uses_headers),
                Err(wait) => Next::Answer(self.counted(
                    Stage::Store,
                    Outcome::Limited,
                    self.without_token(self.limited(wait, req)),
                )),
            },
            // The token is valid and its check needs no store: keep letting it through.
            Err(e) => {
                self.log_store_failure(&e, "heartbeat (the valid token passes)");
                self.counted(
                    Stage::Store,
                    Outcome::Passed,
                    Next::pass(self.token_admission(&token)),
                )
            }
        }
    }

    fn after_status(
        &self,
        answer: Result<Decision, StoreError>,
        cookie: QueueCookie,
        uses_headers: bool,
    ) -> Response<Bytes> {
        self.count_answer(Stage::Endpoint, &answer);
        let room = self.config.room();
        let body = |rejection| StatusBody::from_rejection(room, rejection);
        match answer {
            Ok(Decision::Admitted { .. }) => {
                json_response(StatusCode::OK, &StatusBody::plain(room, "admitted"))
            }
            Ok(Decision::Waiting {
                position,
                waiting,
                paused,
                pace,
                place,
                ..
            }) => {
                let now = self.now_ms();
                let pace = self.pace_for(pace, now);
                let res = json_response(
                    StatusCode::OK,
                    &body(&waiting_rejection(position, waiting, paused, pace)),
                );
                self.with_place(res, Some(cookie), place, uses_headers, now)
            }
            // As a request to the site would get: 503 closed, 403 banned (the page then reloads
            // and shows why).
            Ok(Decision::Closed) => rejection_json(room, &closed_rejection()),
            Ok(Decision::Banned) => rejection_json(room, &banned_rejection()),
            Ok(Decision::Scheduled { opens_at_ms }) => {
                self.scheduled_json(&scheduled_rejection(opens_at_ms, self.now_ms()))
            }
            Ok(Decision::Full { waiting }) => {
                json_response(StatusCode::OK, &body(&full_rejection(waiting)))
            }
            Ok(Decision::Unknown) => {
                let mut res = json_response(StatusCode::OK, &StatusBody::plain(room, "unknown"));
                // The place the cookie carries is nobody's now: without it, the visitor's next
                // request goes to the store (which gives a new place), not to the snapshot.
                if cookie.place().is_some() {
                    let now = self.now_ms();
                    self.issue_queue_cookie(uses_headers, cookie.without_place(), now)
                        .apply(res.headers_mut());
                }
                res
            }
            Err(e) => self.status_failed(&e, &cookie),
        }
    }

    /// A failed status question gets at least what a newcomer would: the people who waited
    /// longest must not be the only ones kept out. Failing open, newcomers are let in, so the
    /// waiting page is told `open` (the line is not enforced right now; distinct from
    /// `admitted`, which means the store holds a slot for them): it reloads the page it was
    /// for, which passes the same way (stage 3 fails, the policy lets it in). Busy, or failing
    /// closed: `503`, as for a newcomer.
    fn status_failed(&self, e: &StoreError, cookie: &QueueCookie) -> Response<Bytes> {
        self.log_store_failure(e, "status");
        let room = self.config.room();
        if let Some(rejection) = self.scheduled_on_failure(e) {
            return self.scheduled_json(&rejection);
        }
        if self.fails_open(e) {
            return json_response(StatusCode::OK, &StatusBody::plain(room, "open"));
        }
        if self.drains(e) {
            // Draining: `open` for the front (the page reloads, and its request is let in the
            // same way), the moved-up place for the others.
            match self.drained_counted(e, Some(cookie), Stage::Endpoint, self.now_ms()) {
                Drained::In => {
                    return json_response(StatusCode::OK, &StatusBody::plain(room, "open"))
                }
                Drained::Waiting(rejection) => return self.status_json(&rejection),
                Drained::Out => {}
            }
        }
        store_error_json(room, e)
    }

    /// Whether a failed store call lets the visitor in. Busy (out of memory) is the store
    /// saying "not now", never "down, let everyone in"; every other kind (unreachable, timed
    /// out, an unexpected answer, a configuration fault, and kinds added later) means the store
    /// cannot decide, and the fail policy decides instead.
    pub(super) fn fails_open(&self, e: &StoreError) -> bool {
        match e.kind() {
            StoreErrorKind::Busy => false,
            _ => self.config.fail_policy == FailPolicy::Open,
        }
    }

    /// Reports a failed store call: a warning for the first, then at most one per
    /// [`FAILURE_LOG_INTERVAL_MS`] with the number of failures since the last one, so that an
    /// outage (when every request fails) does not write a line per request. Each failure is
    /// also logged at debug level. `call` names the store call that failed (the reported one:
    /// those counted in between may have been others).
    pub(super) fn log_store_failure(&self, e: &StoreError, call: &'static str) {
        let room = self.config.room();
        let now = self.now_ms();
        if e.kind() == StoreErrorKind::Busy {
            // Busy is the store saying "not now", never "down": it answered, so an outage
            // before it is over (a gate fails open only while the store seems down).
            self.store_failures.answered();
        } else {
            self.store_failures.down_at(now);
        }
        match self.store_failures.note(now) {
            Some(unreported) => tracing::warn!(
                room,
                call,
                error = %e,
                unreported,
                "waiting room store call failed ({unreported} more failures since the last \
                 report; at most one report per {} s)",
                FAILURE_LOG_INTERVAL_MS / 1000
            ),
            None => tracing::debug!(room, call, error = %e, "waiting room store call failed"),
        }
    }

    /// A `scheduled` answer of the status endpoint: `200` (the visitor is registered, as a
    /// waiter's answer is) with the opening; as every `200` of it, the body's `retry_after`
    /// paces the polls (no header).
    fn scheduled_json(&self, rejection: &Rejection) -> Response<Bytes> {
        json_response(
            StatusCode::OK,
            &StatusBody::from_rejection(self.config.room(), rejection),
        )
    }

    /// The answer to a failed store call while the gateway's clock says the room has not opened
    /// yet: `scheduled`, whatever the fail policy, so a store outage never opens the room
    /// early. `None` when the store is only busy (that answer stands) or the room is open.
    fn scheduled_on_failure(&self, e: &StoreError) -> Option<Rejection> {
        let schedule = self.config.policy.schedule.as_ref()?;
        let now = self.now_ms();
        (e.kind() != StoreErrorKind::Busy && schedule.before_opening(now))
            .then(|| scheduled_rejection(schedule.opens_at_ms, now))
    }

    /// Whether a failed store call after a scheduled closing (by the gateway's clock) must be
    /// answered `closed` rather than by the fail policy: the closing refuses newcomers, and an
    /// outage must not let them in. With the line not kept, that is everyone without a slot;
    /// with it kept, a visitor whose place was issued at or after the closing (certainly a
    /// newcomer: those in line got theirs before), while the others get what the fail policy
    /// gives. Busy stays busy.
    fn closed_on_failure<B>(&self, e: &StoreError, req: &Request<B>) -> bool {
        let Some(schedule) = self.config.policy.schedule.as_ref() else {
            return false;
        };
        let now = self.now_ms();
        let Some(closes_at) = schedule.closes_at_ms.filter(|&c| now >= c) else {
            return false;
        };
        if e.kind() == StoreErrorKind::Busy {
            return false;
        }
        if !schedule.keep_line_after_close {
            return true;
        }
        // Read again on this rare path only (the request's first read was not kept).
        let carried = self.carried(req);
        self.queue_cookie(req, &carried, now)
            .is_none_or(|place| place.issued_at_ms() >= closes_at)
    }

    /// Whether the schedule alone answers a failed store call for anyone without a slot (before
    /// the opening, or after a closing that does not keep the line), whatever the fail policy.
    pub(super) fn schedule_shuts_out(&self, e: &StoreError) -> bool {
        let Some(schedule) = self.config.policy.schedule.as_ref() else {
            return false;
        };
        let now = self.now_ms();
        e.kind() != StoreErrorKind::Busy
            && (schedule.before_opening(now)
                || (schedule.after_closing(now) && !schedule.keep_line_after_close))
    }

    /// A failed store call for a visitor without a valid token: busy, or the fail policy (never
    /// open before a scheduled opening, nor to a newcomer after a scheduled closing).
    fn store_failed<B>(&self, asked: Asked, e: StoreError, req: &Request<B>) -> Next {
        self.log_store_failure(&e, "enter");
        if let Some(rejection) = self.scheduled_on_failure(&e) {
            return Next::Answer(self.reject(&rejection, req));
        }
        if self.closed_on_failure(&e, req) {
            if self.drains(&e) {
                // Not counted with the answer (draining counts where it decides): here.
                self.metrics.request(Stage::Store, Outcome::Closed);
            }
            return Next::Answer(self.reject(&closed_rejection(), req));
        }
        if self.fails_open(&e) {
            return Next::pass(self.admission(
                asked.session,
                asked.now + duration_ms(self.config.refresh),
                AdmittedBy::FailOpen,
            ));
        }
        let cookie = self.drains(&e).then(|| self.cookie_of(req, asked.now));
        if let Some(cookie) = cookie {
            match self.drained_counted(&e, cookie.as_ref(), Stage::Store, asked.now) {
                Drained::In => {
                    return Next::pass(self.admission(
                        asked.session,
                        asked.now + duration_ms(self.config.refresh),
                        AdmittedBy::Drained,
                    ))
                }
                Drained::Waiting(rejection) => return Next::Answer(self.reject(&rejection, req)),
                Drained::Out => {}
            }
        }
        Next::Answer(self.reject(&error_rejection(&e), req))
    }

    /// The store granted or extended the slot: pass, with a fresh admission token.
    fn admitted<B>(&self, asked: Asked, expires_at_ms: u64, req: &Request<B>) -> Next {
        let Asked {
            session,
            uses_headers,
            now,
        } = asked;
        let mut token = AdmissionToken::new(session, now, expires_at_ms);
        if let Some(network) = self.network_binding(req) {
            token = token.bound_to(network);
        }
        let value = token.sign(&self.keys, self.config.room());
        let issued = self.issue(
            uses_headers,
            &self.config.cookies.admission_name,
            &self.config.token_header,
            value,
            secs_ceil(expires_at_ms.saturating_sub(now)),
        );
        Next::Pass {
            admission: self.admission(session, expires_at_ms, AdmittedBy::Store),
            set_cookie: Some(issued),
        }
    }
}

/// At most one warning about failed store calls per this long, per room.
pub(super) const FAILURE_LOG_INTERVAL_MS: u64 = 10_000;

/// How recently a store that could not decide counts as down, for the gates' fail policy.
pub(super) const STORE_DOWN_WINDOW_MS: u64 = FAILURE_LOG_INTERVAL_MS;

/// When the room last reported a failed store call, and how many failed since; and when the
/// store last answered and last could not (for [`seems_down`](Self::seems_down)).
pub(super) struct FailureLog {
    /// Time of the last report (ms), or [`u64::MAX`] before the first.
    last_ms: AtomicU64,
    unreported: AtomicU64,
    /// Orders the two below (a clock's millisecond can hold both).
    events: AtomicU64,
    /// The event number of the store's last answer, a busy one included (0: none yet).
    answered: AtomicU64,
    /// The event number of the last call the store could not decide (unreachable, timed
    /// out...; not busy), and its time (ms).
    down: AtomicU64,
    down_ms: AtomicU64,
}

impl FailureLog {
    pub(super) fn new() -> Self {
        Self {
            last_ms: AtomicU64::new(u64::MAX),
            unreported: AtomicU64::new(0),
            events: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            down: AtomicU64::new(0),
            down_ms: AtomicU64::new(0),
        }
    }

    /// The store answered a call (a busy answer is one: the store is up).
    pub(super) fn answered(&self) {
        let n = self.events.fetch_add(1, Ordering::Relaxed) + 1;
        self.answered.fetch_max(n, Ordering::Relaxed);
    }

    /// The store could not decide a call at `now`.
    fn down_at(&self, now: u64) {
        let n = self.events.fetch_add(1, Ordering::Relaxed) + 1;
        self.down_ms.store(now, Ordering::Relaxed);
        self.down.fetch_max(n, Ordering::Relaxed);
    }

    /// Whether the store seems down at `now`: its last call failed (not busy), within the last
    /// [`STORE_DOWN_WINDOW_MS`], and nothing was answered since (busy included). Only as fresh
    /// as the room's other store calls; a gate uses it to apply the fail policy without a
    /// store call.
    pub(super) fn seems_down(&self, now: u64) -> bool {
        self.down.load(Ordering::Relaxed) > self.answered.load(Ordering::Relaxed)
            && now.saturating_sub(self.down_ms.load(Ordering::Relaxed)) <= STORE_DOWN_WINDOW_MS
    }

    /// Counts a failure at `now`. `Some(n)` when it is to be reported, with the `n` failures
    /// not reported since the last report; `None` when it is only counted. Of concurrent
    /// failures that find a report due, exactly one reports (the one whose swap succeeds). A
    /// clock that went back by an interval reports too, rather than staying silent until it
    /// catches up.
    fn note(&self, now: u64) -> Option<u64> {
        let last = self.last_ms.load(Ordering::Acquire);
        let due = last == u64::MAX || now.abs_diff(last) >= FAILURE_LOG_INTERVAL_MS;
        if due
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Some(self.unreported.swap(0, Ordering::AcqRel));
        }
        self.unreported.fetch_add(1, Ordering::AcqRel);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_reported_first_then_once_per_interval_with_a_count() {
        let log = FailureLog::new();
        let t = 1_000_000;
        assert_eq!(log.note(t), Some(0), "the first is reported at once");
        for i in 1..50 {
            assert_eq!(log.note(t + i * 100), None);
        }
        assert_eq!(log.note(t + FAILURE_LOG_INTERVAL_MS), Some(49));
        assert_eq!(log.note(t + FAILURE_LOG_INTERVAL_MS + 1), None);
        // Long quiet: the next failure is reported at once, with the one counted meanwhile.
        assert_eq!(log.note(t + 100 * FAILURE_LOG_INTERVAL_MS), Some(1));
        // A clock that jumped back does not silence the log.
        assert_eq!(log.note(t), Some(0));
    }
}
