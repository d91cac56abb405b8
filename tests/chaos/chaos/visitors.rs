//! The visitors: how each behaves (`Plan`), what it records (`Story`, `Episode`, `Tally`), and
//! the task that plays one from its first visit to its departure.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::{cookie, session_in, Http, Jar, Reply};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use serde_json::Value;
use tower_waiting_room::{AdmittedBy, SessionId};

use super::tools::{now_ms, rel, sleep_ms, Rng};
use super::{
    ACTIVE_TTL, ADMISSION_COOKIE, AMBIGUOUS_LAPSE_MS, FAR_BACK, GATEWAYS, IMPATIENT, LAPSE_MS,
    PATIENT, POLL_CAP_MS, QUEUE_COOKIE, QUEUE_TTL,
};

/// Counts of answers, by what they were.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) requests: AtomicU64,
    pub(super) transport_errors: AtomicU64,
    pub(super) impatient_drops: AtomicU64,
    pub(super) by_status: Mutex<BTreeMap<u16, u64>>,
    /// 5xx answers that are not the documented 503s.
    pub(super) bad_5xx: Mutex<Vec<String>>,
}

/// One waiting episode of a visitor: from joining the line (or re-joining it) until admitted by
/// the store, or until the visitor stopped polling.
#[derive(Clone, Debug)]
pub(super) struct Episode {
    pub(super) visitor: usize,
    /// First attempt of the request that joined (ms).
    pub(super) join_sent: u64,
    /// Its answer.
    pub(super) join_received: u64,
    /// The last store check-in so far (sent), to measure gaps.
    pub(super) last_touch_sent: u64,
    /// The last moment the visitor was told they waited: the request's sending, or for an
    /// answer from a gateway's snapshot the snapshot's time (its `waiting-room-position-as-of`).
    pub(super) last_wait_sent: Option<u64>,
    /// First `200` from the store (received).
    pub(super) admitted: Option<u64>,
    /// Two consecutive check-ins were `LAPSE_MS` apart: the place may have been lost.
    pub(super) lapsed: bool,
    /// The visitor stopped polling (silent, abandoned, left) before getting in.
    pub(super) stopped: bool,
    /// Places reported, in order: (sent, position). A place that goes back means it was lost.
    pub(super) positions: Vec<(u64, u64)>,
    /// When each of those answers was received: a place told by a primary that a failover then
    /// replaced may be undone (the grants that moved it forward lost).
    pub(super) positions_received: Vec<u64>,
    /// For each of those answers given from a gateway's snapshot of the line, when the
    /// position it shows was true (its `waiting-room-position-as-of`); `None` for the store's
    /// own answers, true when given.
    pub(super) positions_as_of: Vec<Option<u64>>,
    /// The status endpoint said `unknown` while waiting (sent).
    pub(super) unknown_at: Vec<u64>,
    /// A request since the last check-in may have been run by the store without the visitor
    /// learning the outcome (sent).
    ambiguous_since: Option<u64>,
    /// Back from a silence while waiting: whether its old place was kept is not known, so when
    /// it joined is not known either.
    pub(super) returned: bool,
    /// It began with an admission token in the jar (back from a silence inside): the slot may
    /// still be held (a heartbeat it never heard of may have renewed it), so a store admission
    /// may be that slot's, not a new one.
    pub(super) with_token: bool,
    /// When the place it waits in may have been made: `join_sent`, or for a visitor back from a
    /// silence, when its earlier episode joined.
    pub(super) place_since: u64,
    /// The request whose answer first confirmed that place (sent, received; 0: none yet): the
    /// store wrote or read it then. A place confirmed by a primary that a failover then
    /// replaced may be lost; one confirmed earlier or later is not (see `loss_windows`).
    pub(super) place_made: (u64, u64),
    /// Every store answer (sent, received), to find again the gaps between check-ins when some
    /// of them may have been lost in a failover.
    pub(super) touches: Vec<(u64, u64)>,
}

impl Episode {
    fn new(visitor: usize, sent: u64) -> Self {
        Self {
            visitor,
            join_sent: sent,
            join_received: 0,
            last_touch_sent: sent,
            last_wait_sent: None,
            admitted: None,
            lapsed: false,
            stopped: false,
            positions: Vec::new(),
            positions_received: Vec::new(),
            positions_as_of: Vec::new(),
            unknown_at: Vec::new(),
            ambiguous_since: None,
            returned: false,
            with_token: false,
            place_since: sent,
            place_made: (0, 0),
            touches: Vec::new(),
        }
    }

    pub(super) fn end(&self) -> u64 {
        self.admitted.unwrap_or(u64::MAX)
    }

    /// A store answer to a request sent at `sent`, received at `received`.
    fn touch(&mut self, sent: u64, received: u64) {
        self.touches.push((sent, received));
        let claimed_slot_lapsed = self
            .ambiguous_since
            .take()
            .is_some_and(|t| received.saturating_sub(t) >= AMBIGUOUS_LAPSE_MS);
        if self.join_received == 0 {
            self.join_received = received;
            if !self.returned {
                self.place_made = (sent, received);
            }
        } else if claimed_slot_lapsed || received.saturating_sub(self.last_touch_sent) >= LAPSE_MS {
            self.lapsed = true;
        }
        self.last_touch_sent = sent;
    }

    /// A request sent at `sent` got no answer from the store, or a deadline answer: the store
    /// may have run it, and a grant it claimed lives only `active_ttl` unless renewed.
    fn ambiguous(&mut self, sent: u64) {
        self.ambiguous_since.get_or_insert(sent);
    }
}

/// How a visitor behaves, drawn from the seed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    arrival_ms: u64,
    /// Polls the status endpoint while waiting (else the protected route).
    status_poller: bool,
    /// Gives up on a request after `IMPATIENT` (dropping the connection).
    impatient: bool,
    /// After this many polls while waiting: silent for `.1` ms, then back (`.2`) or gone.
    silent_waiting: Option<(u32, u64, bool)>,
    /// After this many polls while waiting: `POST leave` and gone.
    leave_waiting: Option<u32>,
    /// Once inside, silent for this long (past its slot), then back.
    silent_inside: Option<u64>,
    /// Requests inside before going.
    browse: u32,
    /// Gone without `leave` once inside.
    vanish: bool,
}

pub(super) fn plan(rng: &mut Rng, arrival_ms: u64) -> Plan {
    let silent_waiting = rng.chance(15).then(|| {
        let back = rng.chance(60);
        // Half come back within queue_ttl, half after it (from far back in line, so that their
        // turn has often not come yet: they keep their place all the same).
        let ms = if rng.chance(50) {
            rng.between(500, 4_000)
        } else {
            let ttl = QUEUE_TTL.as_millis() as u64;
            rng.between(ttl + 500, ttl + 2_500)
        };
        (rng.between(1, 6) as u32, ms, back)
    });
    Plan {
        arrival_ms,
        status_poller: rng.chance(50),
        impatient: rng.chance(20),
        silent_waiting,
        leave_waiting: rng.chance(5).then(|| rng.between(1, 5) as u32),
        silent_inside: rng.chance(5).then(|| {
            let slot = ACTIVE_TTL.as_millis() as u64;
            rng.between(slot + 500, slot + 3_000)
        }),
        browse: rng.between(1, 6) as u32,
        vanish: rng.chance(10),
    }
}

/// One visitor's whole story.
#[derive(Debug, Default)]
pub(super) struct Story {
    pub(super) id: usize,
    pub(super) session: Option<SessionId>,
    queue_cookie: String,
    pub(super) episodes: Vec<Episode>,
    /// `POST leave` first sent, and answered `200 left`.
    pub(super) leave_sent: Option<u64>,
    pub(super) left: Option<u64>,
    /// The `leave` request answered `200 left` was sent at this time.
    pub(super) left_sent: Option<u64>,
    /// The status endpoint's answer for the old queue cookie after leaving.
    pub(super) after_leave: Option<String>,
    /// Still waiting (and polling) when the run ended.
    pub(super) stuck: bool,
    /// Admitted as a session other than its own, and other surprises.
    pub(super) problems: Vec<String>,
    /// Every request and its answer, for the report on a visitor named in a violation.
    pub(super) trace: Vec<String>,
}

pub(super) struct Shared {
    pub(super) gateways: Vec<Http>,
    pub(super) tally: Tally,
    pub(super) start: u64,
    /// Visitors give up on everything at this time (ms).
    pub(super) deadline: u64,
}

/// One exchange, read to the end.
struct Answer {
    reply: Reply,
    sent: u64,
    received: u64,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.reply.body).unwrap_or(Value::Null)
    }

    fn state(&self) -> String {
        self.json()["state"].as_str().unwrap_or("").to_owned()
    }

    fn describe(&self) -> String {
        format!(
            "{} {}",
            self.reply.status,
            String::from_utf8_lossy(&self.reply.body)
        )
    }
}

/// What one answer means to a visitor.
enum Meaning {
    /// The app answered, admitted this way.
    In(AdmittedBy),
    Waiting(u64),
    /// The status endpoint: a slot is granted (or held).
    StatusAdmitted,
    /// The status endpoint: no place.
    Unknown,
    /// A documented 503 (unavailable, busy, full), or a lost request.
    TryLater,
    Other,
}

impl Shared {
    /// Sends one request (to a gateway chosen by `rng`); records the answer's kind.
    async fn send(
        &self,
        rng: &mut Rng,
        plan: &Plan,
        method: Method,
        path: &str,
        cookies: Option<HeaderValue>,
        trace: &mut Vec<String>,
    ) -> Option<Answer> {
        let g = rng.below(GATEWAYS as u64) as usize;
        let http = &self.gateways[g];
        let mut headers = vec![(header::ACCEPT, HeaderValue::from_static("application/json"))];
        headers.extend(cookies.map(|c| (header::COOKIE, c)));
        let req = http.request(method.clone(), path, &headers);
        let sent = now_ms();
        self.tally.requests.fetch_add(1, Ordering::Relaxed);
        let limit = if plan.impatient { IMPATIENT } else { PATIENT };
        let result = tokio::time::timeout(limit, http.exchange(req)).await;
        trace.push(format!(
            "{} g{g} {method} {path} -> {}",
            rel(sent),
            match &result {
                Ok(Ok(r)) => format!("{} {}", r.status.as_u16(), String::from_utf8_lossy(&r.body)),
                Ok(Err(e)) => format!("error {e}"),
                Err(_) => "no answer in time".to_owned(),
            }
        ));
        let reply = match result {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => {
                let n = self.tally.transport_errors.fetch_add(1, Ordering::Relaxed);
                if n < 5 {
                    eprintln!("chaos: {method} {path}: {e}");
                }
                return None;
            }
            Err(_) if plan.impatient => {
                self.tally.impatient_drops.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            Err(_) => {
                let n = self.tally.transport_errors.fetch_add(1, Ordering::Relaxed);
                if n < 5 {
                    eprintln!("chaos: {method} {path}: no answer within {limit:?}");
                }
                return None;
            }
        };
        let answer = Answer {
            reply,
            sent,
            received: now_ms(),
        };
        let status = answer.reply.status;
        *self
            .tally
            .by_status
            .lock()
            .unwrap()
            .entry(status.as_u16())
            .or_default() += 1;
        if status.is_server_error() {
            let documented = status == StatusCode::SERVICE_UNAVAILABLE
                && matches!(answer.state().as_str(), "unavailable" | "busy" | "full");
            if !documented {
                self.tally.bad_5xx.lock().unwrap().push(format!(
                    "{method} {path} at +{} ms: {}",
                    sent - self.start,
                    answer.describe()
                ));
            }
        }
        Some(answer)
    }
}

fn meaning(a: &Answer, status_endpoint: bool) -> Meaning {
    match (a.reply.status, status_endpoint) {
        (StatusCode::OK, false) => match a.json()["by"].as_str() {
            Some("Store") => Meaning::In(AdmittedBy::Store),
            Some("Token") => Meaning::In(AdmittedBy::Token),
            Some("FailOpen") => Meaning::In(AdmittedBy::FailOpen),
            _ => Meaning::Other,
        },
        (StatusCode::OK, true) => match a.state().as_str() {
            // "open": the store failed and the room fails open; go in (without a slot).
            "admitted" | "open" => Meaning::StatusAdmitted,
            "waiting" => Meaning::Waiting(a.json()["position"].as_u64().unwrap_or(0)),
            "unknown" => Meaning::Unknown,
            _ => Meaning::Other,
        },
        (StatusCode::TOO_MANY_REQUESTS, _) if a.state() == "waiting" => {
            Meaning::Waiting(a.json()["position"].as_u64().unwrap_or(0))
        }
        (StatusCode::SERVICE_UNAVAILABLE, _) => Meaning::TryLater,
        _ => Meaning::Other,
    }
}

/// How long a waiter at `position` waits before polling again.
fn poll_interval(position: u64, rng: &mut Rng) -> u64 {
    let base = (50 + 4 * position).min(POLL_CAP_MS);
    base - base / 5 + rng.below(base / 2 + 1)
}

/// Back-off after a 503 or a lost request.
fn backoff(rng: &mut Rng) -> u64 {
    rng.between(150, 600)
}

const STATUS: &str = "/__waitingroom/chaos/status";
const LEAVE: &str = "/__waitingroom/chaos/leave";

/// One visitor, from its first visit to its departure (or the end of the run).
pub(super) async fn visitor(shared: Arc<Shared>, id: usize, plan: Plan, mut rng: Rng) -> Story {
    let mut s = Story {
        id,
        ..Story::default()
    };
    sleep_ms(plan.arrival_ms).await;

    // First visit: the stateless redirect with a queue cookie (no store call).
    let mut jar = Jar::new();
    loop {
        if now_ms() > shared.deadline {
            s.problems.push("no queue cookie before the end".into());
            return s;
        }
        match shared
            .send(&mut rng, &plan, Method::GET, "/", None, &mut s.trace)
            .await
        {
            Some(a) if a.reply.status == StatusCode::FOUND => {
                jar.absorb(&a.reply);
                break;
            }
            Some(a) => {
                s.problems.push(format!("first visit: {}", a.describe()));
                return s;
            }
            None => sleep_ms(backoff(&mut rng)).await,
        }
    }
    let Some(q) = jar.get(QUEUE_COOKIE).map(str::to_owned) else {
        s.problems.push("no queue cookie".into());
        return s;
    };
    s.session = SessionId::from_hex(&session_in(&q));
    s.queue_cookie = q;
    let me = s.session.map(|x| x.to_string()).unwrap_or_default();

    let mut silent_waiting = plan.silent_waiting;
    let mut leave_waiting = plan.leave_waiting;
    let mut silent_inside = plan.silent_inside;
    // An answer that already put the visitor back in line (its slot was gone).
    let mut carried: Option<Answer> = None;
    let mut returned = false;
    'lives: for _life in 0..6 {
        // ----- waiting -----
        let mut ep = Episode::new(id, carried.as_ref().map_or_else(now_ms, |a| a.sent));
        ep.returned = std::mem::take(&mut returned);
        ep.with_token = carried.is_none() && jar.get(ADMISSION_COOKIE).is_some();
        if ep.returned {
            ep.place_since = s.episodes.last().map_or(ep.join_sent, |e| e.place_since);
            ep.place_made = s.episodes.last().map_or((0, 0), |e| e.place_made);
        }
        let mut polls = 0u32;
        // Back from a silence, a visitor first asks where it stands (which creates nothing).
        let mut next_is_status = ep.returned;
        let mut pause = 0;
        loop {
            if now_ms() > shared.deadline {
                s.stuck = true;
                s.episodes.push(ep);
                return s;
            }
            let path = if next_is_status { STATUS } else { "/" };
            let a = match carried.take() {
                Some(a) => a,
                None => {
                    sleep_ms(pause).await;
                    let had_token = jar.get(ADMISSION_COOKIE).is_some();
                    let Some(a) = shared
                        .send(
                            &mut rng,
                            &plan,
                            Method::GET,
                            path,
                            jar.header(),
                            &mut s.trace,
                        )
                        .await
                    else {
                        // Lost on the way: the store may have acted on it.
                        ep.ambiguous(now_ms());
                        pause = backoff(&mut rng);
                        continue;
                    };
                    if had_token
                        && matches!(meaning(&a, next_is_status), Meaning::In(AdmittedBy::Token))
                    {
                        // Still inside on a token it held: not a new admission.
                        jar.absorb(&a.reply);
                        ep.touch(a.sent, a.received);
                        ep.admitted = Some(a.received);
                        break;
                    }
                    a
                }
            };
            match meaning(&a, next_is_status) {
                Meaning::In(AdmittedBy::Store) => {
                    ep.touch(a.sent, a.received);
                    ep.admitted = Some(a.received);
                    if a.json()["session"].as_str() != Some(me.as_str()) {
                        s.problems
                            .push(format!("admitted as another session: {}", a.describe()));
                    }
                    jar.absorb(&a.reply);
                    break;
                }
                Meaning::In(by) => {
                    // Fail-open: in without a slot; the visitor keeps asking for a real one.
                    if by != AdmittedBy::FailOpen {
                        s.problems
                            .push(format!("waiting, let in by {by:?}: {}", a.describe()));
                    }
                    jar.absorb(&a.reply);
                    next_is_status = false;
                    pause = poll_interval(1, &mut rng);
                    continue;
                }
                Meaning::Waiting(position) => {
                    ep.touch(a.sent, a.received);
                    // An answer from a gateway's snapshot says the visitor waited as of the
                    // snapshot's time (its header), not as of this request: the FIFO check
                    // takes that moment.
                    let as_of: Option<u64> = a
                        .reply
                        .header("waiting-room-position-as-of")
                        .and_then(|v| v.parse().ok());
                    let waited = as_of.map_or(a.sent, |t| t.min(a.sent));
                    ep.last_wait_sent = Some(ep.last_wait_sent.map_or(waited, |w| w.max(waited)));
                    ep.positions.push((a.sent, position));
                    ep.positions_received.push(a.received);
                    ep.positions_as_of.push(as_of);
                    jar.absorb(&a.reply);
                    pause = poll_interval(position, &mut rng);
                    next_is_status = plan.status_poller;
                }
                Meaning::StatusAdmitted => {
                    // "open" is not a check-in: failing open, the status endpoint says so
                    // without the store. Either way, claim it now: a real grant answers the
                    // claim from the store.
                    next_is_status = false;
                    pause = 0;
                    continue;
                }
                Meaning::Unknown => {
                    ep.touch(a.sent, a.received);
                    ep.unknown_at.push(a.sent);
                    next_is_status = false;
                    pause = 0;
                    continue;
                }
                Meaning::TryLater => {
                    // "unavailable" may be a deadline missed by a script that still ran (and
                    // claimed a grant); "busy" and "full" are refusals.
                    if a.state() == "unavailable" {
                        ep.ambiguous(a.sent);
                    }
                    pause = backoff(&mut rng);
                    continue;
                }
                Meaning::Other => {
                    s.problems
                        .push(format!("while waiting: {} {}", path, a.describe()));
                    pause = backoff(&mut rng);
                    continue;
                }
            }
            polls += 1;
            if leave_waiting.is_some_and(|n| polls >= n) {
                ep.stopped = true;
                s.episodes.push(ep);
                leave(&shared, &mut s, &mut jar, &plan, &mut rng).await;
                return s;
            }
            let far_back = ep.positions.last().is_some_and(|&(_, p)| p >= FAR_BACK);
            if let Some((_, ms, back)) = silent_waiting
                .filter(|&(n, ms, _)| polls >= n && (far_back || ms < QUEUE_TTL.as_millis() as u64))
            {
                silent_waiting = None;
                leave_waiting = None;
                ep.stopped = true;
                s.episodes.push(ep);
                if !back {
                    return s;
                }
                sleep_ms(ms).await;
                returned = true;
                continue 'lives;
            }
        }
        s.episodes.push(ep);

        // ----- inside -----
        for _ in 0..plan.browse {
            sleep_ms(rng.between(80, 400)).await;
            let Some(a) = shared
                .send(
                    &mut rng,
                    &plan,
                    Method::GET,
                    "/",
                    jar.header(),
                    &mut s.trace,
                )
                .await
            else {
                continue;
            };
            match meaning(&a, false) {
                Meaning::In(_) => {
                    jar.absorb(&a.reply);
                    if a.json()["session"].as_str() != Some(me.as_str()) {
                        s.problems
                            .push(format!("inside as another session: {}", a.describe()));
                    }
                }
                // The slot is gone (stalled past its expiry, or its key deleted): wait again.
                Meaning::Waiting(_) => {
                    jar.absorb(&a.reply);
                    carried = Some(a);
                    continue 'lives;
                }
                Meaning::TryLater => {}
                _ => s.problems.push(format!("inside: {}", a.describe())),
            }
        }
        if let Some(ms) = silent_inside.take() {
            sleep_ms(ms).await;
            continue 'lives;
        }
        if !plan.vanish {
            leave(&shared, &mut s, &mut jar, &plan, &mut rng).await;
        }
        return s;
    }
    s
}

/// `POST leave` until it is answered `200 left`, then ask the status endpoint about the old
/// queue cookie: the store must have forgotten it.
async fn leave(shared: &Shared, s: &mut Story, jar: &mut Jar, plan: &Plan, rng: &mut Rng) {
    // A patient client from here on: the answers are checked.
    let plan = Plan {
        impatient: false,
        ..*plan
    };
    s.leave_sent = Some(now_ms());
    loop {
        if now_ms() > shared.deadline {
            return;
        }
        match shared
            .send(rng, &plan, Method::POST, LEAVE, jar.header(), &mut s.trace)
            .await
        {
            Some(a) if a.reply.status == StatusCode::OK && a.state() == "left" => {
                s.left = Some(a.received);
                s.left_sent = Some(a.sent);
                jar.absorb(&a.reply);
                break;
            }
            Some(a) if a.reply.status == StatusCode::SERVICE_UNAVAILABLE => {}
            Some(a) => {
                s.problems.push(format!("leave: {}", a.describe()));
                return;
            }
            None => {}
        }
        sleep_ms(backoff(rng)).await;
    }
    if !jar.is_empty() {
        s.problems.push("leave kept a cookie".into());
    }
    let probe = cookie(QUEUE_COOKIE, &s.queue_cookie);
    let mut admitted_answers = 0;
    while now_ms() < shared.deadline {
        match shared
            .send(
                rng,
                &plan,
                Method::GET,
                STATUS,
                Some(probe.clone()),
                &mut s.trace,
            )
            .await
        {
            Some(a) if a.reply.status == StatusCode::OK => {
                s.after_leave = Some(a.state());
                // Failing open, the status endpoint answers "open" (the store was not asked):
                // ask again. Only a store that keeps saying "admitted" for a few seconds holds
                // the slot.
                admitted_answers += u32::from(a.state() == "admitted");
                if !matches!(a.state().as_str(), "admitted" | "open") || admitted_answers >= 10 {
                    return;
                }
            }
            _ => {}
        }
        sleep_ms(backoff(rng)).await;
    }
}
