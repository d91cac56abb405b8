//! Server-Sent Events for waiters: `GET {prefix}/{room}/events`, a stream fed by the gateway's
//! snapshot of the line ([`super::snapshot`]), so a waiting page is told its new position when
//! it changes instead of asking for it.
//!
//! - **Who gets a stream**: a waiter whose signed queue cookie carries their place, whom the
//!   gateway can answer from its snapshot (as a waiting poll would be), within the session's
//!   poll limit (opening a stream counts as one poll), while fewer than
//!   [`max_event_streams`](crate::WaitingRoomBuilder::max_event_streams) streams are open on
//!   this gateway. Anyone else gets `204 No Content`, which tells an `EventSource` to stop
//!   and the page to use the status endpoint; so does a server without a Tokio runtime (the
//!   stream's timer needs one). Over the poll limit: `429`, as the status endpoint answers.
//! - **How many per waiter**: one session holds at most [`STREAMS_PER_SESSION`] streams on a
//!   gateway (a page and a second tab). A newer one replaces the oldest, which ends at once
//!   with `event: end` and `{"reason":"replaced"}`: its page polls from then on instead of
//!   listening again. Replacing, not refusing, because the newest stream is the page the
//!   visitor is looking at (a tab just opened or reloaded), and the oldest is the likelier to
//!   be a forgotten tab or a connection whose close the gateway has not seen yet. So no session
//!   holds more than its share of `max_event_streams`, however often it opens one. The count is
//!   per gateway: a session that opens streams on several gateways holds up to the limit on
//!   each (only a shared store could count across them, and streams cost the store nothing).
//! - **What it sends**: the status endpoint's JSON for a waiter, as the `data` of an event
//!   whose `id` is the snapshot's time (ms, the store's clock), once when the stream opens and
//!   then only when the answer changes. A comment line every [`HEARTBEAT_MS`] keeps proxies
//!   from closing a quiet stream. Each second the stream looks at the snapshot (and refreshes
//!   it when due, as a waiting poll does, so a gateway whose waiters all listen still syncs).
//! - **When it ends**: when the snapshot can no longer answer for the waiter (their turn may
//!   have come, the store says they have no place, the line stopped moving, or the snapshot
//!   has been stale for [`STALE_TICKS`] looks: the store is away) it sends `event: end` and
//!   closes, and the page asks the status endpoint, which asks the store (and claims the turn,
//!   or applies the fail policy). After [`MAX_STREAM_MS`] (or when the queue cookie expires,
//!   if sooner) it just closes; the `EventSource` reconnects after `retry` ms with
//!   `Last-Event-ID`, and the first event is then left out if the snapshot is still the one
//!   that id names. The reconnect checks the cookie and the poll limit again.
//! - **Liveness**: a listening waiter is checked in through the gateway's batch at each look,
//!   exactly as a waiting poll answered here is: silent waiters are skipped at their turn, and
//!   a waiter whose page listens is not.
//!
//! Nothing here admits anyone: a turn is only ever given, and a slot only ever claimed, by the
//! store, through the status endpoint or a page load.

use std::collections::hash_map::{Entry, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{HeaderName, Method, Request, Response, StatusCode};
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

use super::failure::FailureLog;
use super::reply::{method_not_allowed, with_room_headers, Replies};
use super::shared::Core;
use super::snapshot::{Held, LineView, Refresh};
use super::verdict::Verdict;
use super::visitor::{Carried, Visitor};
use crate::body::Chunks;
use crate::response::StatusBody;
use crate::session::SessionId;
use crate::store::snapshot::SNAPSHOT_REFRESH_MS;
use crate::store::{Place, RoomSnapshot, StoreFuture};
use crate::telemetry::{Outcome, Stage};

/// How often a stream looks at the snapshot: as often as it is refreshed.
const LOOK_MS: u64 = SNAPSHOT_REFRESH_MS;

/// A comment line after this long without an event, so that proxies and load balancers do not
/// close the stream as idle.
pub(crate) const HEARTBEAT_MS: u64 = 15_000;

/// Looks in a row without a fresh snapshot before the stream ends (the store is away, or the
/// refreshes fail): the page then asks the status endpoint, whose answer follows the fail
/// policy.
pub(crate) const STALE_TICKS: u32 = 3;

/// Longest life of one stream: then it closes and the `EventSource` reconnects, which checks
/// the visitor's cookie and poll limit again.
pub(crate) const MAX_STREAM_MS: u64 = 10 * 60 * 1_000;

/// The reconnection delay the stream asks of the `EventSource` (its `retry` field), in ms.
pub(crate) const RETRY_MS: u64 = 3_000;

/// `Last-Event-ID`: the `id` of the last event an `EventSource` got, sent when it reconnects.
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// Streams one session may hold at once on a gateway: a waiting page and a second tab. A newer
/// stream replaces the oldest (see the [module docs](self)).
pub(crate) const STREAMS_PER_SESSION: usize = 2;

/// The last event of a stream a newer one of its session replaced: the page is to poll the
/// status endpoint from now on, not to listen again.
const REPLACED_END: &[u8] = b"event: end\ndata: {\"reason\":\"replaced\"}\n\n";

/// The streams open on this gateway, and whose they are.
#[derive(Default)]
struct Registry {
    /// Streams open, replaced ones included until they close: at most `max_event_streams`.
    open: usize,
    /// The number the next stream gets.
    next: u64,
    /// Each session's streams not replaced yet, oldest first (at most
    /// [`STREAMS_PER_SESSION`]), each with the sender that tells it it was replaced.
    sessions: HashMap<SessionId, Vec<(u64, oneshot::Sender<()>)>>,
}

fn lock(registry: &Mutex<Registry>) -> MutexGuard<'_, Registry> {
    // Nothing here can leave the registry half-changed: a panic elsewhere must not stop streams.
    registry.lock().unwrap_or_else(|e| e.into_inner())
}

impl Registry {
    /// One more stream for `session`, unless `max` are open; the session's oldest is told it was
    /// replaced if it holds [`STREAMS_PER_SESSION`] already. The receiver resolves when a newer
    /// stream of the session replaces this one.
    fn register(
        registry: &Arc<Mutex<Self>>,
        session: SessionId,
        max: usize,
    ) -> Option<(Registration, oneshot::Receiver<()>)> {
        let mut r = lock(registry);
        if r.open >= max {
            return None;
        }
        r.open += 1;
        let id = r.next;
        r.next += 1;
        let (tx, rx) = oneshot::channel();
        let held = r.sessions.entry(session).or_default();
        if held.len() >= STREAMS_PER_SESSION {
            let (_, oldest) = held.remove(0);
            // Gone already if that stream is closing on its own: then there is nobody to tell.
            let _ = oldest.send(());
        }
        held.push((id, tx));
        drop(r);
        let registration = Registration {
            registry: Arc::clone(registry),
            session,
            id,
        };
        Some((registration, rx))
    }
}

/// One open stream of the gateway's, counted (and listed under its session, until replaced)
/// while it lives.
pub(crate) struct Registration {
    registry: Arc<Mutex<Registry>>,
    session: SessionId,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut r = lock(&self.registry);
        r.open -= 1;
        if let Entry::Occupied(mut held) = r.sessions.entry(self.session) {
            held.get_mut().retain(|(id, _)| *id != self.id);
            if held.get().is_empty() {
                held.remove();
            }
        }
    }
}

/// A stream the room decided to open, for the service to start with the room's `Arc`.
pub(crate) struct EventsStart {
    session: SessionId,
    place: Place,
    /// When the stream must close at the latest (room clock, ms).
    until_ms: u64,
    /// The `Last-Event-ID` the client reconnected with.
    resume: Option<u64>,
    /// Resolves when a newer stream of the same session replaces this one.
    replaced: oneshot::Receiver<()>,
    _registration: Registration,
}

/// The event streams open on this gateway, counted (at most
/// [`max_event_streams`](crate::WaitingRoomBuilder::max_event_streams), and at most
/// [`STREAMS_PER_SESSION`] per session).
pub(super) struct EventStreams {
    registry: Arc<Mutex<Registry>>,
}

impl EventStreams {
    pub(super) fn new() -> Self {
        Self {
            registry: Arc::default(),
        }
    }

    /// `GET {prefix}/{room}/events` (see the [module docs](self)).
    pub(super) fn start<B>(
        &self,
        core: &Core,
        line: &LineView,
        req: &Request<B>,
        carried: &Carried<'_>,
        now: u64,
    ) -> Verdict<EventsStart> {
        if req.method() != Method::GET {
            return Verdict::Answer(method_not_allowed("GET"));
        }
        let no_stream = || {
            let mut res = Response::new(Bytes::new());
            *res.status_mut() = StatusCode::NO_CONTENT;
            Verdict::Answer(res)
        };
        if !core.offers_events || tokio::runtime::Handle::try_current().is_err() {
            return no_stream();
        }
        let cookie = match carried.visitor(core, req, now) {
            Some(Visitor::Queued(cookie)) if !core.needs_proof(&cookie) => cookie,
            _ => return no_stream(),
        };
        let Some(place) = cookie.place() else {
            return no_stream();
        };
        if line.is_forgotten(cookie.session()) {
            return no_stream();
        }
        if let Err(wait) = core.check_polls(cookie.session(), now) {
            let res = Replies(core).limited(wait, req);
            return core.counted(Stage::Endpoint, Outcome::Limited, Verdict::Answer(res));
        }
        let Some((registration, replaced)) = Registry::register(
            &self.registry,
            cookie.session(),
            core.config.settings.max_event_streams,
        ) else {
            return no_stream();
        };
        let resume = req
            .headers()
            .get(LAST_EVENT_ID)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        Verdict::Step(EventsStart {
            session: cookie.session(),
            place,
            until_ms: cookie
                .expires_at_ms()
                .min(now.saturating_add(MAX_STREAM_MS)),
            resume,
            replaced,
            _registration: registration,
        })
    }

    /// What the snapshot says for the waiter now (they are checked in when it answers).
    /// `seen`: the snapshot of the stream's last look, whose answer it has already made.
    fn look(
        core: &Core,
        line: &LineView,
        session: SessionId,
        place: Place,
        now: u64,
        seen: Option<&Arc<Held>>,
    ) -> Look {
        let Some(held) = line.fresh(now) else {
            return Look::Stale;
        };
        if line.is_forgotten(session) {
            return Look::Ask;
        }
        let Some(rejection) = line.waiting_by_snapshot(core, &held, session, place, now) else {
            return Look::Ask;
        };
        // The same snapshot gives the same answer: checked in, nothing more to build.
        if seen.is_some_and(|s| Arc::ptr_eq(s, &held)) {
            return Look::Same;
        }
        let body = StatusBody::from_rejection(core.config.room(), &rejection);
        let json = serde_json::to_vec(&body).expect("status bodies serialize");
        Look::Waiting {
            data: Bytes::from(json),
            id: held.snapshot.taken_at_ms,
            held,
        }
    }
}

/// What one look at the snapshot found for a waiter.
enum Look {
    /// No fresh snapshot (a refresh is late, or the store is away).
    Stale,
    /// The snapshot cannot answer for them: the store must be asked.
    Ask,
    /// Waiting, by the snapshot of the last look: the answer is the one made then.
    Same,
    /// Waiting: the status JSON, the snapshot's time (the event's id), and the snapshot.
    Waiting {
        data: Bytes,
        id: u64,
        held: Arc<Held>,
    },
}

/// What a stream reads for as long as it is open: the room's shared parts, the gateway's
/// snapshot, and the memory of failed store calls (where a refresh's failure is noted).
pub(crate) struct Watched {
    pub(super) core: Arc<Core>,
    pub(super) line: Arc<LineView>,
    pub(super) failures: Arc<FailureLog>,
}

/// The response that opens a stream.
pub(crate) fn open(watched: Watched, start: EventsStart) -> Response<EventStream> {
    let mut res = Response::new(EventStream::new(watched, start));
    let headers = res.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    // nginx buffers responses unless told not to; a buffered stream tells nothing.
    headers.insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    with_room_headers(res)
}

/// The body of an events response: one waiter's stream (see the [module docs](self)).
pub(crate) struct EventStream {
    watched: Watched,
    start: EventsStart,
    /// The data of the last event sent: only a change is sent again.
    last: Option<Bytes>,
    /// The snapshot of the last look that answered.
    seen: Option<Arc<Held>>,
    /// When the last event or comment was sent (room clock, ms).
    sent_at_ms: u64,
    /// The room clock at the last look: one that has gone back since ends the stream (see
    /// `poll_chunk`).
    looked_at_ms: u64,
    /// The next look.
    look: Pin<Box<Sleep>>,
    /// The snapshot's refresh this stream is making.
    refresh: Option<(StoreFuture<RoomSnapshot>, Refresh)>,
    /// Looks in a row without a fresh snapshot.
    stale: u32,
    /// The first frame (the `retry` field) is yet to be sent.
    greeted: bool,
    done: bool,
}

impl EventStream {
    fn new(watched: Watched, start: EventsStart) -> Self {
        let now = watched.core.now_ms();
        Self {
            watched,
            start,
            last: None,
            seen: None,
            sent_at_ms: now,
            looked_at_ms: now,
            // The first look is at once.
            look: Box::pin(tokio::time::sleep_until(Instant::now())),
            refresh: None,
            stale: 0,
            greeted: false,
            done: false,
        }
    }

    /// What the snapshot says now: an event, a comment, the end, or nothing to send.
    fn look_at_snapshot(&mut self) -> Option<Bytes> {
        let now = self.watched.core.now_ms();
        let seen = self.seen.as_ref();
        let watched = &self.watched;
        match EventStreams::look(
            &watched.core,
            &watched.line,
            self.start.session,
            self.start.place,
            now,
            seen,
        ) {
            Look::Stale => {
                self.stale += 1;
                if self.stale >= STALE_TICKS {
                    return Some(self.end());
                }
            }
            Look::Ask => return Some(self.end()),
            Look::Same => self.stale = 0,
            Look::Waiting { data, id, held } => {
                self.stale = 0;
                self.seen = Some(held);
                // Reconnected with the id of this very snapshot: the client has this event.
                let resumed = self.last.is_none() && self.start.resume == Some(id);
                if self.last.as_ref() != Some(&data) {
                    self.last = Some(data.clone());
                    if !resumed {
                        self.sent_at_ms = now;
                        self.watched
                            .core
                            .metrics
                            .request(Stage::Snapshot, Outcome::Waiting);
                        return Some(event(id, &data));
                    }
                }
            }
        }
        // A clock gone back since the last comment: one now, rather than none for as long.
        if now
            .checked_sub(self.sent_at_ms)
            .is_none_or(|quiet| quiet >= HEARTBEAT_MS)
        {
            self.sent_at_ms = now;
            return Some(Bytes::from_static(b":\n\n"));
        }
        None
    }

    /// The last event: the page is to ask the status endpoint.
    fn end(&mut self) -> Bytes {
        self.done = true;
        Bytes::from_static(b"event: end\ndata: {}\n\n")
    }
}

impl Chunks for EventStream {
    /// The next chunk of the stream; `None` once it has ended.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if !self.greeted {
            self.greeted = true;
            return Poll::Ready(Some(Bytes::from(format!("retry: {RETRY_MS}\n\n"))));
        }
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            if Pin::new(&mut self.start.replaced).poll(cx).is_ready() {
                // A newer stream of this session took this one's place.
                self.done = true;
                return Poll::Ready(Some(Bytes::from_static(REPLACED_END)));
            }
            if let Some((call, _)) = &mut self.refresh {
                let answer = ready!(call.as_mut().poll(cx));
                let (_, refresh) = self.refresh.take().expect("just polled");
                let watched = &self.watched;
                watched
                    .line
                    .refreshed(&watched.core, &watched.failures, refresh, answer);
            } else {
                ready!(self.look.as_mut().poll(cx));
                self.look
                    .as_mut()
                    .reset(Instant::now() + Duration::from_millis(LOOK_MS));
                let now = self.watched.core.now_ms();
                // The clock gone back (an NTP step, a VM resumed) would keep the stream open
                // past its `until_ms` by as much: it ends, as at its time. Not for a step
                // shorter than a look (a slewed millisecond, a leap second): every stream of
                // the gateway would end and reconnect at once.
                let went_back = now.saturating_add(LOOK_MS) < self.looked_at_ms;
                self.looked_at_ms = now;
                if now >= self.start.until_ms || went_back {
                    // A plain close: the client reconnects with Last-Event-ID.
                    self.done = true;
                    return Poll::Ready(None);
                }
                if let Some(refresh) = self.watched.line.start_refresh(&self.watched.core, now) {
                    self.refresh = Some(refresh);
                    continue;
                }
            }
            if let Some(chunk) = self.look_at_snapshot() {
                return Poll::Ready(Some(chunk));
            }
        }
    }

    /// Whether the stream has ended.
    fn is_done(&self) -> bool {
        self.done
    }
}

/// `id: <id>\ndata: <json>\n\n` (the JSON is one line).
fn event(id: u64, data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(data.len() + 32);
    b.put_slice(b"id: ");
    b.put_slice(id.to_string().as_bytes());
    b.put_slice(b"\ndata: ");
    b.put_slice(data);
    b.put_slice(b"\n\n");
    b.freeze()
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("room", &self.watched.core.config.room())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn told(rx: &mut oneshot::Receiver<()>) -> bool {
        rx.try_recv().is_ok()
    }

    fn open(registry: &Arc<Mutex<Registry>>) -> (usize, usize) {
        let r = lock(registry);
        (r.open, r.sessions.values().map(Vec::len).sum())
    }

    #[test]
    fn a_newer_stream_of_a_session_replaces_its_oldest() {
        let registry = Arc::default();
        let one = SessionId::random();
        let mut held: Vec<_> = (0..10)
            .map(|_| Registry::register(&registry, one, 100).expect("room for it"))
            .collect();
        for (i, (_, rx)) in held.iter_mut().enumerate() {
            assert_eq!(told(rx), i < 10 - STREAMS_PER_SESSION, "stream {i}");
        }
        // The replaced streams count until they close, and are no longer the session's.
        assert_eq!(open(&registry), (10, STREAMS_PER_SESSION));
        let kept = held.split_off(10 - STREAMS_PER_SESSION);
        drop(held);
        assert_eq!(open(&registry), (STREAMS_PER_SESSION, STREAMS_PER_SESSION));
        // The session's own closing makes room for it again: nothing is replaced.
        let mut kept = kept.into_iter();
        drop(kept.next());
        let (_again, mut rx) = Registry::register(&registry, one, 100).unwrap();
        let (_, mut last) = kept.next().unwrap();
        assert!(!told(&mut last) && !told(&mut rx));
        drop(_again);
        drop(last);
        assert_eq!(open(&registry), (0, 0));
        assert!(lock(&registry).sessions.is_empty(), "nothing left behind");
    }

    #[test]
    fn the_gateway_bound_holds_and_a_full_gateway_replaces_nothing() {
        let registry = Arc::default();
        let (one, two, three) = (
            SessionId::random(),
            SessionId::random(),
            SessionId::random(),
        );
        let mut ones: Vec<_> = (0..STREAMS_PER_SESSION)
            .map(|_| Registry::register(&registry, one, 3).unwrap())
            .collect();
        let _two = Registry::register(&registry, two, 3).unwrap();
        assert!(Registry::register(&registry, three, 3).is_none(), "full");
        assert!(Registry::register(&registry, one, 3).is_none(), "full");
        for (_, rx) in &mut ones {
            assert!(!told(rx), "refused: nothing replaced");
        }
        drop(ones.pop());
        assert!(Registry::register(&registry, three, 3).is_some());
    }
}
