//! Several gateways, one queue.
//!
//! Four independent `WaitingRoomLayer`s (same room, same signing key, each with its own
//! `RedisStore` connection and no clock override, so Redis `TIME` is the only clock) serve real
//! HTTP on loopback in front of one `redis-server`. A thousand simulated visitors join
//! one after another and then each polls in its own task, sending every request to a randomly
//! chosen gateway (queue cookies and admission tokens work on all of them: they share the key).
//! Some abandon while waiting, some vanish once inside, the rest browse a little and leave.
//!
//! The shape of the run does not depend on the machine's speed: the first `CAPACITY` visitors
//! ("blockers") get in through the gateways and hold the whole room, keeping their slots alive,
//! until more than half of all visitors have joined (so are certainly waiting) and every waiter
//! planned to abandon meanwhile has given up; then they leave and the line drains while the rest
//! keep joining. In every block of `ROLE_BLOCK` later arrivals the seed picks one visitor who
//! vanishes and another who abandons if its first answer is "waiting" (always so while the room
//! is held). Waiters far back, or in a line that does not move, check in rarely (queue and grant
//! TTLs of a few seconds allow that), so even a long line costs a loaded machine little.
//!
//! What is checked, each in a way that can fail:
//! 1. never more than `capacity` inside at once: by the store's own counts (sampled every
//!    ~10 ms) and by what the visitors themselves observe;
//! 2. nobody is admitted twice (one store admission per admitted session, none after a visitor
//!    left or vanished, and a departed session is really gone from the store);
//! 3. first come, first served among those who keep waiting (an ordering check that relies only
//!    on causality, never on timing);
//! 4. everyone who keeps waiting gets in, and the room empties by itself.

use crate::common;
use crate::redis_harness;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{app_seeing, carries_cookie, cookie, keys, serve, Http, Jar, Reply, PREFIX, SECRET};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use redis_harness::Server;
use serde_json::Value;
use tower_waiting_room::__private::QueueCookie;
use tower_waiting_room::store::{RedisStore, RoomStats};
use tower_waiting_room::{AdmittedBy, FailPolicy, Keyring, SessionId, WaitingRoomLayer};

const ROOM: &str = "launch";
const QUEUE_COOKIE: &str = "wr_launch_q";
const ADMISSION_COOKIE: &str = "wr_launch_a";

const GATEWAYS: usize = 4;
const CAPACITY: u32 = 20;
const VISITORS: usize = 1_000;
/// The first arrivals, who hold the whole room while the line builds up.
const BLOCKERS: usize = CAPACITY as usize;
/// The blockers leave once this many visitors (blockers included) have joined: everyone after
/// the blockers joined a full room, so well over half of all visitors certainly wait.
const HOLD_UNTIL: usize = BLOCKERS + VISITORS * 11 / 20;
/// After the blockers, visitors come in blocks of this many: in each, the seed picks one who
/// vanishes once inside and another who abandons if its first answer is "waiting" (always the
/// case while the room is held). So at least `(VISITORS - BLOCKERS) / ROLE_BLOCK` vanish and at
/// least `(HOLD_UNTIL - BLOCKERS) / ROLE_BLOCK` abandon, whatever the machine's speed.
const ROLE_BLOCK: usize = 20;
/// Longest a visitor who joins the held room waits before abandoning (if it does).
const HELD_PATIENCE: Duration = Duration::from_millis(1_500);
/// Most time the arrivals wait for the abandoners planned while the room is held to settle.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

const ACTIVE_TTL: Duration = Duration::from_secs(2);
const REFRESH: Duration = Duration::from_secs(1);
// Waiters far back (or in a line that does not move) check in about every `POLL_CAP`: the
// queue and grant TTLs are long enough for that to stay well apart from `LAPSE` even when a
// loaded machine answers slowly, while a line of hundreds polls only a few hundred times a
// second.
const GRANT_TTL: Duration = Duration::from_secs(6);
const QUEUE_TTL: Duration = Duration::from_secs(6);

/// A waiter whose consecutive check-ins were this far apart may legitimately have been skipped
/// as silent (or lost an unclaimed grant): `min(queue_ttl, grant_ttl)` with a margin.
const LAPSE: Duration = Duration::from_millis(5_100);
/// Longest pause of a waiter between check-ins (before jitter): well under `LAPSE`.
const POLL_CAP: Duration = Duration::from_millis(2_000);
/// Every visitor must be done by then (from the start of the run).
const DEADLINE: Duration = Duration::from_secs(50);
/// Most requests one visitor makes while waiting.
const MAX_POLLS: u32 = 2_000;
/// Most retries of a request answered 503 or lost on the wire.
const MAX_RETRIES: u32 = 50;
/// Deadline of one HTTP exchange.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

// ===== small tools =====

/// splitmix64: reproducible randomness without a dependency.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn gateway(&mut self) -> usize {
        self.below(GATEWAYS as u64) as usize
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

/// One HTTP exchange, read to the end, and when it happened.
struct Answer {
    reply: Reply,
    /// Taken just before the request was handed to the client.
    sent: Instant,
    /// Taken once the whole answer was in.
    received: Instant,
}

impl Answer {
    /// The body as JSON, or `null` (a malformed body shows up as a missing field).
    fn json(&self) -> Value {
        serde_json::from_slice(&self.reply.body).unwrap_or(Value::Null)
    }

    /// A non-empty admission cookie set by this answer.
    fn sets_admission(&self) -> bool {
        self.reply
            .cookie_value(ADMISSION_COOKIE)
            .is_some_and(|v| !v.is_empty())
    }

    fn describe(&self) -> String {
        format!(
            "{} {}",
            self.reply.status,
            String::from_utf8_lossy(&self.reply.body)
        )
    }
}

/// The visitors' side of the network: a client for each gateway, shared by all of them.
#[derive(Clone)]
struct Net {
    gateways: Arc<Vec<Http>>,
    /// Requests sent.
    sent: Arc<AtomicU64>,
}

impl Net {
    async fn send(
        &self,
        gateway: usize,
        method: Method,
        path: &str,
        cookie: Option<&HeaderValue>,
    ) -> Result<Answer, String> {
        let gateway = &self.gateways[gateway];
        let mut headers = vec![(header::ACCEPT, HeaderValue::from_static("application/json"))];
        headers.extend(cookie.map(|c| (header::COOKIE, c.clone())));
        let req = gateway.request(method, path, &headers);
        let sent = Instant::now();
        self.sent.fetch_add(1, Ordering::Relaxed);
        let reply = tokio::time::timeout(REQUEST_TIMEOUT, gateway.exchange(req))
            .await
            .map_err(|_| format!("no answer within {REQUEST_TIMEOUT:?}"))?
            .map_err(|e| e.to_string())?;
        Ok(Answer {
            reply,
            sent,
            received: Instant::now(),
        })
    }
}

// ===== the gateways =====

/// What the handler behind a gateway saw: one request that got through.
#[derive(Clone, Copy, Debug)]
struct Seen {
    session: SessionId,
    by: AdmittedBy,
    /// The request carried an admission cookie (so a store admission was an extension).
    with_token: bool,
    gateway: usize,
    at: Instant,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn layer(redis_url: &str, capacity: u32) -> WaitingRoomLayer {
    // Production-like: no clock override, Redis TIME is the clock of every gateway. A generous
    // store deadline keeps a noisy machine from turning slow calls into errors, and fail-closed
    // makes sure nobody ever gets in without a slot.
    let store = RedisStore::builder()
        .url(redis_url)
        .timeout(Duration::from_secs(2))
        .build()
        .expect("the store builds");
    WaitingRoomLayer::builder(ROOM)
        .capacity(capacity)
        .secret(SECRET)
        .active_ttl(ACTIVE_TTL)
        .refresh(REFRESH)
        .grant_ttl(GRANT_TTL)
        .queue_ttl(QUEUE_TTL)
        .secure_cookies(false)
        .fail_policy(FailPolicy::Closed)
        .store(store)
        .build()
        .expect("the layer builds")
}

/// Serves the app behind `layer` on an ephemeral loopback port; every request that gets
/// through is logged.
async fn serve_gateway(layer: WaitingRoomLayer, gateway: usize, log: Log) -> Http {
    serve(app_seeing(layer, move |a, headers| {
        log.lock().unwrap().push(Seen {
            session: a.session(),
            by: a.admitted_by(),
            with_token: carries_cookie(headers, ADMISSION_COOKIE),
            gateway,
            at: Instant::now(),
        });
    }))
    .await
}

// ===== who is inside, as the visitors see it =====

/// Visitors inside, by their own observation: added on their first 200, refreshed on every
/// later 200, removed just before they send `leave`.
///
/// A member counts only while the slot it was told about is certainly still held: until the
/// expiry the gateway put in the answer (Redis `TIME` and the system clock are the same clock
/// here), since only a `leave` frees a slot earlier. So a visitor who vanishes stays counted
/// until its slot expires (the store must keep that slot for it), and a visitor stalled by the
/// scheduler past its slot's expiry stops counting (the store may give that slot away).
#[derive(Default)]
struct Inside {
    /// Visitor → expiry of its slot (ms since the epoch).
    members: HashMap<usize, u64>,
    max_counted: usize,
    violations: Vec<String>,
}

impl Inside {
    fn observe(&mut self, visitor: usize, expires_at_ms: u64) {
        self.members.insert(visitor, expires_at_ms);
        let now = wall_ms();
        self.members.retain(|_, &mut expires| now + 10 < expires);
        let counted = self.members.len();
        self.max_counted = self.max_counted.max(counted);
        if counted > CAPACITY as usize {
            let mut who: Vec<usize> = self.members.keys().copied().collect();
            who.sort_unstable();
            self.violations.push(format!(
                "{counted} visitors inside at once when visitor {visitor} got in: {who:?}"
            ));
        }
    }

    fn remove(&mut self, visitor: usize) {
        self.members.remove(&visitor);
    }
}

// ===== the visitors =====

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// One of the first arrivals: once inside, keeps its slot alive (a request every ~250 ms)
    /// until the room is released, then leaves.
    Block,
    /// Once inside: this many more requests, then leave.
    Stay { extra: u32 },
    /// Stops polling for good after waiting this long (if not admitted before).
    Abandon { after: Duration },
    /// Once inside: gone without leaving.
    Vanish,
}

/// One visitor's story, as the visitor saw it.
#[derive(Debug)]
struct Visitor {
    arrival: usize,
    plan: Plan,
    /// From the signed queue cookie.
    session: SessionId,
    queue_cookie: String,
    /// Answers `429` (waiting).
    waits: u32,
    /// When the last request answered `429` was sent.
    last_wait_sent: Option<Instant>,
    /// When the first `200` was received.
    admitted_at: Option<Instant>,
    /// Stopped polling for good while waiting.
    abandoned: bool,
    /// Two consecutive check-ins while waiting were at least `LAPSE` apart.
    lapsed: bool,
    longest_gap: Duration,
    /// When the visitor stopped using the site: just before `leave`, on vanishing, or on
    /// abandoning. It sends nothing after this but `leave` and a status probe.
    gone_at: Option<Instant>,
    /// Admission cookies received on requests sent without one: new admissions.
    fresh_admissions: u32,
    /// Admission cookies received on requests sent with one: extensions.
    extensions: u32,
    /// Requests answered `429` after the visitor had been admitted (slot lost).
    lost_slot: u32,
    /// The state the status endpoint reported for the queue cookie just after `leave`.
    after_leave: Option<String>,
    /// `503` answers and transport errors.
    unavailable: u32,
    errors: u32,
    problems: Vec<String>,
}

struct Shared {
    net: Net,
    inside: Mutex<Inside>,
    keys: Keyring,
    deadline: Instant,
    /// Set once the blockers are to leave.
    released: AtomicBool,
    /// Visitors planned to abandon who have stopped waiting (abandoned, got in, or failed).
    settled_abandoners: AtomicUsize,
}

/// Counts a planned abandoner as settled when dropped, whichever way its waiting ends.
struct Settles<'a>(Option<&'a AtomicUsize>);

impl Drop for Settles<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.0 {
            n.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn position_of(answer: &Answer) -> u64 {
    answer.json()["position"].as_u64().unwrap_or(1)
}

/// When a waiter checks in next. Near the front often, farther back less often; and while its
/// place does not move (the room is full and nobody leaves), less and less often, but near the
/// front never so rarely that the first slots to free up would wait long to be claimed. Never
/// more than `POLL_CAP` (+10%) apart, well within `queue_ttl` and `grant_ttl`.
fn poll_interval(position: u64, moved: bool, previous: Duration, rng: &mut Rng) -> Duration {
    let cap = POLL_CAP.as_millis() as u64;
    let base = (10 + 8 * position).clamp(25, cap);
    let ms = if moved {
        base
    } else {
        (2 * previous.as_millis() as u64).clamp(base, cap.min(8 * base))
    };
    Duration::from_millis(ms - ms / 10 + rng.below(ms / 5 + 1))
}

/// A request that must be answered by the room or the app: retried on 503 and on transport
/// errors (counted), up to `MAX_RETRIES` times.
async fn request(
    shared: &Shared,
    v: &mut Visitor,
    rng: &mut Rng,
    method: Method,
    path: &str,
    cookie: Option<&HeaderValue>,
) -> Option<Answer> {
    for _ in 0..MAX_RETRIES {
        match shared
            .net
            .send(rng.gateway(), method.clone(), path, cookie)
            .await
        {
            Ok(a) if a.reply.status == StatusCode::SERVICE_UNAVAILABLE => v.unavailable += 1,
            Ok(a) => return Some(a),
            Err(e) => {
                v.errors += 1;
                if v.errors <= 3 {
                    eprintln!("visitor {}: {method} {path}: {e}", v.arrival);
                }
            }
        }
        if Instant::now() > shared.deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    v.problems
        .push(format!("{method} {path}: no usable answer"));
    None
}

/// One more request from inside. `false` if the visitor should stop browsing: its slot is gone
/// (it was stalled past the slot's expiry), or there was no usable answer.
async fn browse(shared: &Shared, v: &mut Visitor, jar: &mut Jar, rng: &mut Rng) -> bool {
    let cookies = jar.header();
    let had_token = jar.get(ADMISSION_COOKIE).is_some();
    let Some(r) = request(shared, v, rng, Method::GET, "/", cookies.as_ref()).await else {
        return false;
    };
    match r.reply.status {
        StatusCode::OK => {
            if r.sets_admission() {
                if had_token {
                    v.extensions += 1;
                } else {
                    v.fresh_admissions += 1;
                }
            }
            jar.absorb(&r.reply);
            let body = r.json();
            if body["session"].as_str() != Some(&v.session.to_string()) {
                v.problems
                    .push(format!("inside as another session: {body}"));
            }
            let expires = body["expires_at_ms"].as_u64().unwrap_or(0);
            shared.inside.lock().unwrap().observe(v.arrival, expires);
            true
        }
        StatusCode::TOO_MANY_REQUESTS => {
            // Only possible if this visitor stalled past its slot's expiry; leave then.
            v.lost_slot += 1;
            false
        }
        _ => {
            v.problems
                .push(format!("inside: unexpected {}", r.describe()));
            false
        }
    }
}

/// A visitor who has joined (its first store answer is `first`): waits, gets in, and does
/// what its plan says.
async fn live(
    shared: Arc<Shared>,
    mut v: Visitor,
    mut jar: Jar,
    first: Answer,
    mut rng: Rng,
) -> Visitor {
    // --- waiting ---
    let abandon_at = match v.plan {
        Plan::Abandon { after } => Some(first.received + after),
        _ => None,
    };
    let settles = Settles(abandon_at.is_some().then_some(&shared.settled_abandoners));
    let mut answer = first;
    let mut last_touch_sent = answer.sent;
    let mut polls = 0;
    let (mut last_position, mut interval) = (u64::MAX, Duration::ZERO);
    loop {
        match answer.reply.status {
            StatusCode::OK => break,
            StatusCode::TOO_MANY_REQUESTS => {
                v.waits += 1;
                v.last_wait_sent = Some(answer.sent);
            }
            _ => {
                v.problems
                    .push(format!("while waiting: unexpected {}", answer.describe()));
                return v;
            }
        }
        if abandon_at.is_some_and(|t| Instant::now() >= t) {
            v.abandoned = true;
            v.gone_at = Some(Instant::now());
            return v;
        }
        polls += 1;
        if polls > MAX_POLLS || Instant::now() > shared.deadline {
            v.problems.push(format!(
                "still waiting after {polls} polls: {}",
                answer.describe()
            ));
            return v;
        }
        let position = position_of(&answer);
        interval = poll_interval(position, position < last_position, interval, &mut rng);
        last_position = position;
        tokio::time::sleep(interval).await;
        let cookies = jar.header();
        let Some(next) = request(
            &shared,
            &mut v,
            &mut rng,
            Method::GET,
            "/",
            cookies.as_ref(),
        )
        .await
        else {
            return v;
        };
        // Both answers touched the store between their sending and receiving: the silence the
        // store saw is at most this long.
        let gap = next.received - last_touch_sent;
        v.longest_gap = v.longest_gap.max(gap);
        if gap >= LAPSE {
            v.lapsed = true;
        }
        last_touch_sent = next.sent;
        answer = next;
    }

    drop(settles);

    // --- admitted ---
    v.admitted_at = Some(answer.received);
    let body = answer.json();
    if body["by"] != "Store" {
        v.problems
            .push(format!("first admission not by the store: {body}"));
    }
    if body["session"].as_str() != Some(&v.session.to_string()) {
        v.problems.push(format!(
            "admitted as {} but the queue cookie says {}",
            body["session"], v.session
        ));
    }
    if answer.sets_admission() {
        v.fresh_admissions += 1;
    } else {
        v.problems
            .push("first admission without an admission cookie".to_owned());
    }
    jar.absorb(&answer.reply);
    let expires = body["expires_at_ms"].as_u64().unwrap_or(0);
    shared.inside.lock().unwrap().observe(v.arrival, expires);

    match v.plan {
        Plan::Vanish => {
            // Gone without a word: stays in `inside` until its slot expires.
            v.gone_at = Some(Instant::now());
            return v;
        }
        // --- holding the room: a request every ~250 ms keeps the slot alive (heartbeats) ---
        Plan::Block => {
            let mut requests = 0;
            while !shared.released.load(Ordering::SeqCst)
                && requests < MAX_POLLS
                && Instant::now() < shared.deadline
            {
                tokio::time::sleep(Duration::from_millis(200 + rng.below(100))).await;
                requests += 1;
                if !browse(&shared, &mut v, &mut jar, &mut rng).await {
                    break;
                }
            }
        }
        // --- inside: a few more requests on the fast path ---
        Plan::Stay { extra } => {
            for _ in 0..extra {
                tokio::time::sleep(Duration::from_millis(rng.below(30))).await;
                if !browse(&shared, &mut v, &mut jar, &mut rng).await {
                    break;
                }
            }
        }
        // Admitted before giving up: behaves like a visitor who stays for one more request.
        Plan::Abandon { .. } => {
            tokio::time::sleep(Duration::from_millis(rng.below(30))).await;
            browse(&shared, &mut v, &mut jar, &mut rng).await;
        }
    }

    // --- leave ---
    shared.inside.lock().unwrap().remove(v.arrival);
    v.gone_at = Some(Instant::now());
    let cookies = jar.header();
    let leave = format!("{PREFIX}/{ROOM}/leave");
    let Some(r) = request(
        &shared,
        &mut v,
        &mut rng,
        Method::POST,
        &leave,
        cookies.as_ref(),
    )
    .await
    else {
        return v;
    };
    if r.reply.status != StatusCode::OK || r.json()["state"] != "left" {
        v.problems
            .push(format!("leave: unexpected {}", r.describe()));
    }
    jar.absorb(&r.reply);
    if jar.get(QUEUE_COOKIE).is_some() || jar.get(ADMISSION_COOKIE).is_some() {
        v.problems
            .push("leave did not clear the cookies".to_owned());
    }
    // The departed session must be gone from the store: neither a slot nor a place in line.
    // (Asked with the queue cookie only; the token would be answered without the store.)
    let probe = cookie(QUEUE_COOKIE, &v.queue_cookie);
    let status = format!("{PREFIX}/{ROOM}/status");
    if let Some(r) = request(
        &shared,
        &mut v,
        &mut rng,
        Method::GET,
        &status,
        Some(&probe),
    )
    .await
    {
        v.after_leave = Some(r.json()["state"].as_str().unwrap_or("?").to_owned());
    }
    v
}

/// Who in the current block of `ROLE_BLOCK` arrivals vanishes, and who would abandon.
#[derive(Clone, Copy, Default)]
struct Roles {
    vanisher: usize,
    abandoner: usize,
}

impl Roles {
    fn draw(rng: &mut Rng) -> Roles {
        let n = ROLE_BLOCK as u64;
        let vanisher = rng.below(n);
        let abandoner = (vanisher + 1 + rng.below(n - 1)) % n;
        Roles {
            vanisher: vanisher as usize,
            abandoner: abandoner as usize,
        }
    }
}

/// The plan of visitor `arrival` (`held`: it joins while the blockers hold the room), and how
/// long it waits before abandoning if its first answer is "waiting" (its plan then becomes
/// `Abandon`). Every draw is made for every visitor, so the seed alone decides who does what.
fn plan_for(
    arrival: usize,
    held: bool,
    roles: &mut Roles,
    rng: &mut Rng,
) -> (Plan, Option<Duration>) {
    if arrival >= BLOCKERS && (arrival - BLOCKERS).is_multiple_of(ROLE_BLOCK) {
        *roles = Roles::draw(rng);
    }
    let extra = 1 + rng.below(3) as u32;
    let patience = Duration::from_millis(rng.below(HELD_PATIENCE.as_millis() as u64));
    if arrival < BLOCKERS {
        return (Plan::Block, None);
    }
    let role = (arrival - BLOCKERS) % ROLE_BLOCK;
    if role == roles.vanisher {
        (Plan::Vanish, None)
    } else if role == roles.abandoner {
        // After the hold, more patient: some get in before they would have given up.
        let after = if held {
            patience
        } else {
            patience + Duration::from_millis(500)
        };
        (Plan::Stay { extra }, Some(after))
    } else {
        (Plan::Stay { extra }, None)
    }
}

/// Visitor `arrival`'s first visit: the stateless redirect that hands out its signed queue
/// cookie. It involves no store, so the next visitor's is fetched while one joins.
async fn arrive(
    shared: Arc<Shared>,
    arrival: usize,
    plan: Plan,
    mut rng: Rng,
) -> (Visitor, Jar, Rng) {
    let mut v = Visitor {
        arrival,
        plan,
        session: SessionId::from_bytes([0; 16]),
        queue_cookie: String::new(),
        waits: 0,
        last_wait_sent: None,
        admitted_at: None,
        abandoned: false,
        lapsed: false,
        longest_gap: Duration::ZERO,
        gone_at: None,
        fresh_admissions: 0,
        extensions: 0,
        lost_slot: 0,
        after_leave: None,
        unavailable: 0,
        errors: 0,
        problems: Vec::new(),
    };
    let mut jar = Jar::default();
    let first = request(&shared, &mut v, &mut rng, Method::GET, "/", None)
        .await
        .expect("the first visit is answered");
    assert_eq!(
        first.reply.status,
        StatusCode::FOUND,
        "a first visit is redirected: {}",
        first.describe()
    );
    jar.absorb(&first.reply);
    v.queue_cookie = jar
        .get(QUEUE_COOKIE)
        .expect("a queue cookie on the first visit")
        .to_owned();
    v.session = QueueCookie::verify(&shared.keys, ROOM, &v.queue_cookie, wall_ms())
        .expect("the queue cookie verifies with the shared key")
        .session();
    (v, jar, rng)
}

/// Joins a visitor who has its queue cookie: its first store answer. Visitors join strictly one
/// after another, so their arrival order is the order the store saw them in.
async fn join(
    shared: &Shared,
    mut v: Visitor,
    jar: Jar,
    abandon: Option<Duration>,
    rng: &mut Rng,
) -> (Visitor, Jar, Answer) {
    let cookies = jar.header();
    let answer = request(shared, &mut v, rng, Method::GET, "/", cookies.as_ref())
        .await
        .expect("the first store answer");
    // Abandoning is planned only among those known to wait: a first answer "waiting".
    if let (Some(after), StatusCode::TOO_MANY_REQUESTS) = (abandon, answer.reply.status) {
        v.plan = Plan::Abandon { after };
    }
    (v, jar, answer)
}

// ===== the stats sampler =====

#[derive(Debug, Default)]
struct Sampled {
    samples: u64,
    errors: u64,
    max_inside: u64,
    max_waiting: u64,
    violations: Vec<String>,
}

/// Asks the store for the room's counts every ~10 ms until told to stop.
fn sample(layer: WaitingRoomLayer, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Sampled> {
    tokio::spawn(async move {
        let mut s = Sampled::default();
        let until = Instant::now() + DEADLINE + Duration::from_secs(20);
        while !stop.load(Ordering::Relaxed) && Instant::now() < until {
            match layer.stats().await {
                Ok(RoomStats {
                    admitted,
                    granted,
                    waiting,
                    ..
                }) => {
                    s.samples += 1;
                    s.max_waiting = s.max_waiting.max(waiting);
                    s.max_inside = s.max_inside.max(admitted + granted);
                    if admitted + granted > u64::from(CAPACITY) {
                        s.violations
                            .push(format!("{admitted} admitted + {granted} granted"));
                    }
                }
                Err(_) => s.errors += 1,
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        s
    })
}

// ===== the test =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_gateways_share_one_fair_queue() {
    let started = Instant::now();
    let seed = std::env::var("TWR_MULTI_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| wall_ms() ^ u64::from(std::process::id()));
    println!("seed {seed} (set TWR_MULTI_SEED to replay the same plans and gateway choices)");
    let mut rng = Rng(seed);

    let redis = Server::start(&[]);
    let log: Log = Arc::default();
    let mut layers = Vec::new();
    let mut gateways = Vec::new();
    for g in 0..GATEWAYS {
        let layer = layer(&redis.url(), CAPACITY);
        gateways.push(serve_gateway(layer.clone(), g, log.clone()).await);
        layers.push(layer);
    }
    let net = Net {
        gateways: Arc::new(gateways),
        sent: Arc::default(),
    };
    let shared = Arc::new(Shared {
        net,
        inside: Mutex::default(),
        keys: keys(),
        deadline: started + DEADLINE,
        released: AtomicBool::new(false),
        settled_abandoners: AtomicUsize::new(0),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(layers[0].clone(), stop.clone());

    // --- arrivals, strictly one after another; each visitor then lives in its own task ---
    // The blockers come first and hold the room until `HOLD_UNTIL` visitors have joined and
    // every abandoner planned meanwhile has stopped waiting; then they are told to leave.
    let mut tasks = Vec::with_capacity(VISITORS);
    let (mut held_abandoners, mut released_after) = (0usize, Duration::ZERO);
    let (mut line_at_release, mut roles) = (None, Roles::default());
    // Plans and the visitors' own randomness are drawn in arrival order, from the seed only.
    let prepare = |arrival: usize, roles: &mut Roles, rng: &mut Rng| {
        let held = (BLOCKERS..HOLD_UNTIL).contains(&arrival);
        let (plan, abandon) = plan_for(arrival, held, roles, rng);
        let redirect = tokio::spawn(arrive(shared.clone(), arrival, plan, Rng(rng.next())));
        (held, abandon, redirect)
    };
    let mut upcoming = Some(prepare(0, &mut roles, &mut rng));
    for arrival in 0..VISITORS {
        if arrival == HOLD_UNTIL {
            let settle_until = Instant::now() + SETTLE_LIMIT;
            while shared.settled_abandoners.load(Ordering::SeqCst) < held_abandoners
                && Instant::now() < settle_until
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            line_at_release = layers[0].stats().await.ok().map(|s| s.waiting);
            shared.released.store(true, Ordering::SeqCst);
            released_after = started.elapsed();
        }
        let (held, abandon, redirect) = upcoming.take().expect("prepared");
        let (v, jar, mut visitor_rng) = redirect.await.expect("an arrival panicked");
        if arrival + 1 < VISITORS {
            upcoming = Some(prepare(arrival + 1, &mut roles, &mut rng));
        }
        let (v, jar, first) = join(&shared, v, jar, abandon, &mut visitor_rng).await;
        if matches!(v.plan, Plan::Abandon { .. }) && held {
            held_abandoners += 1;
        }
        tasks.push(tokio::spawn(live(
            shared.clone(),
            v,
            jar,
            first,
            visitor_rng,
        )));
    }
    let joined_after = started.elapsed();
    let mut visitors = Vec::with_capacity(VISITORS);
    for t in tasks {
        visitors.push(t.await.expect("a visitor task panicked"));
    }
    let done_after = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let sampled = sampler.await.expect("the sampler panicked");

    // --- the room empties by itself: vanished slots and abandoned places expire ---
    tokio::time::sleep(ACTIVE_TTL.max(GRANT_TTL).max(QUEUE_TTL) + Duration::from_millis(700)).await;
    let mut final_stats = Vec::new();
    for l in &layers {
        final_stats.push(l.stats().await.expect("stats at the end"));
    }
    // Sessions that never left: their store state must be gone too. Asked with the queue
    // cookie only, through the status endpoint (which creates nothing).
    let mut lingering = Vec::new();
    for v in visitors.iter().filter(|v| v.after_leave.is_none()) {
        let probe = cookie(QUEUE_COOKIE, &v.queue_cookie);
        let path = format!("{PREFIX}/{ROOM}/status");
        let r = shared
            .net
            .send(v.arrival % GATEWAYS, Method::GET, &path, Some(&probe))
            .await
            .expect("status answered");
        let state = r.json()["state"].as_str().unwrap_or("?").to_owned();
        if state != "unknown" {
            lingering.push(format!("visitor {} ({:?}): {state}", v.arrival, v.plan));
        }
    }
    let total = started.elapsed();

    // ===== report =====
    let log = std::mem::take(&mut *log.lock().unwrap());
    let inside = std::mem::take(&mut *shared.inside.lock().unwrap());
    let count = |f: &dyn Fn(&Visitor) -> bool| visitors.iter().filter(|v| f(v)).count();
    let admitted = count(&|v| v.admitted_at.is_some());
    let abandoned = count(&|v| v.abandoned);
    let vanished = count(&|v| v.plan == Plan::Vanish && v.admitted_at.is_some());
    let waited = count(&|v| v.waits > 0);
    let lapsed = count(&|v| v.lapsed);
    let longest_gap = visitors
        .iter()
        .map(|v| v.longest_gap)
        .max()
        .unwrap_or_default();
    let unavailable: u32 = visitors.iter().map(|v| v.unavailable).sum();
    let errors: u32 = visitors.iter().map(|v| v.errors).sum();
    let extensions: u32 = visitors.iter().map(|v| v.extensions).sum();
    let lost_slot: u32 = visitors.iter().map(|v| v.lost_slot).sum();
    let mut per_gateway = [0usize; GATEWAYS];
    for s in &log {
        per_gateway[s.gateway] += 1;
    }
    println!(
        "{VISITORS} visitors over {GATEWAYS} gateways, capacity {CAPACITY}: joined in {joined_after:.1?}, \
         all done in {done_after:.1?}, total {total:.1?}; {} requests",
        shared.net.sent.load(Ordering::Relaxed)
    );
    println!(
        "{BLOCKERS} blockers held the room until {HOLD_UNTIL} had joined and {held_abandoners} \
         abandoners had settled: released after {released_after:.1?}, line then {line_at_release:?}"
    );
    println!(
        "admitted {admitted}, waited {waited}, abandoned {abandoned}, vanished {vanished}; \
         lapsed waiters {lapsed} (longest check-in gap {longest_gap:.0?}); \
         503s {unavailable}, transport errors {errors}; extensions {extensions}, lost slots {lost_slot}"
    );
    println!(
        "store samples {} (errors {}), most inside by the store {}, longest line {}; most inside \
         seen by visitors {}; requests through per gateway {per_gateway:?}",
        sampled.samples,
        sampled.errors,
        sampled.max_inside,
        sampled.max_waiting,
        inside.max_counted
    );

    // ===== the checks =====
    let mut failures: Vec<String> = Vec::new();
    let mut fail = |what: &str, details: Vec<String>| {
        if !details.is_empty() {
            let n = details.len();
            let shown: Vec<_> = details.into_iter().take(10).collect();
            failures.push(format!("{what} ({n}):\n    {}", shown.join("\n    ")));
        }
    };

    // 0. Every visitor's story went as planned, with no unexpected answers.
    fail(
        "visitors with unexpected answers",
        visitors
            .iter()
            .filter(|v| !v.problems.is_empty())
            .map(|v| format!("visitor {} ({:?}): {:?}", v.arrival, v.plan, v.problems))
            .collect(),
    );

    // 1. Never more than capacity inside at once.
    fail(
        "the store counted more than capacity admitted + granted",
        sampled.violations.clone(),
    );
    fail(
        "visitors saw more than capacity inside at once",
        inside.violations.clone(),
    );

    // 2. Nobody admitted twice; nobody admitted again after leaving or vanishing.
    let by_session: HashMap<SessionId, usize> =
        visitors.iter().map(|v| (v.session, v.arrival)).collect();
    let mut seen_by: HashMap<usize, Vec<Seen>> = HashMap::new();
    let mut strangers = Vec::new();
    for s in &log {
        match by_session.get(&s.session) {
            Some(&i) => seen_by.entry(i).or_default().push(*s),
            None => strangers.push(format!("{s:?}")),
        }
    }
    fail("requests through for sessions of no visitor", strangers);
    let mut twice = Vec::new();
    let mut after_gone = Vec::new();
    let mut still_held = Vec::new();
    let mut not_by_store_or_token = Vec::new();
    for v in &visitors {
        let seen = seen_by.get(&v.arrival).map_or(&[][..], Vec::as_slice);
        let fresh = seen
            .iter()
            .filter(|s| s.by == AdmittedBy::Store && !s.with_token)
            .count();
        let expected = usize::from(v.admitted_at.is_some());
        if fresh != expected || v.fresh_admissions as usize != expected {
            twice.push(format!(
                "visitor {} ({:?}): {fresh} store admissions without a token seen by the app, \
                 {} admission cookies on requests without one, expected {expected}",
                v.arrival, v.plan, v.fresh_admissions
            ));
        }
        if let Some(gone) = v.gone_at {
            for s in seen.iter().filter(|s| s.at > gone) {
                after_gone.push(format!(
                    "visitor {} ({:?}) let in {:?} after it was gone: {s:?}",
                    v.arrival,
                    v.plan,
                    s.at - gone
                ));
            }
        }
        for s in seen
            .iter()
            .filter(|s| !matches!(s.by, AdmittedBy::Store | AdmittedBy::Token))
        {
            not_by_store_or_token.push(format!("visitor {}: {s:?}", v.arrival));
        }
        if let Some(state) = &v.after_leave {
            if state != "unknown" {
                still_held.push(format!(
                    "visitor {} still known to the store after leaving: {state}",
                    v.arrival
                ));
            }
        }
    }
    fail("sessions not admitted exactly once", twice);
    fail("sessions let in after leaving or vanishing", after_gone);
    fail(
        "sessions still in the store right after leaving",
        still_held,
    );
    fail("requests let in without a slot", not_by_store_or_token);
    fail(
        "sessions still in the store at the end (abandoned or vanished)",
        lingering,
    );

    // 3. First come, first served among those who keep waiting. If i arrived before j and was
    // still answered "waiting" for a request it sent after j had already received its first
    // 200, the store admitted j while i was in line ahead of it. Waiters whose check-ins were
    // ever LAPSE apart may have been skipped as silent; they are left out as the earlier one.
    // (Abandoners are in until they stop: up to then they wait like everyone else.)
    let mut fifo = Vec::new();
    let mut latest_wait: Option<(Instant, usize)> = None;
    let (mut pairs_checked, mut closest) = (0usize, Duration::MAX);
    for v in &visitors {
        if let (Some(admitted_at), Some((wait_sent, i))) = (v.admitted_at, latest_wait) {
            pairs_checked += 1;
            if admitted_at >= wait_sent {
                closest = closest.min(admitted_at - wait_sent);
            } else {
                fifo.push(format!(
                    "visitor {} got in {:?} before visitor {i}, who arrived earlier, sent a \
                     request that was still answered \"waiting\"",
                    v.arrival,
                    wait_sent - admitted_at
                ));
            }
        }
        if let (false, Some(t)) = (v.lapsed, v.last_wait_sent) {
            match latest_wait {
                Some((latest, _)) if latest >= t => {}
                _ => latest_wait = Some((t, v.arrival)),
            }
        }
    }
    println!(
        "ordering check: {pairs_checked} admitted visitors checked against every earlier waiter; \
         closest call {closest:?}"
    );
    fail("first come, first served broken", fifo);

    // 4. Everyone who kept waiting got in; the room is empty at the end.
    fail(
        "visitors who kept waiting but never got in",
        visitors
            .iter()
            .filter(|v| !v.abandoned && v.admitted_at.is_none())
            .map(|v| format!("visitor {} ({:?}), {} waits", v.arrival, v.plan, v.waits))
            .collect(),
    );
    fail(
        "the room is not empty at the end",
        final_stats
            .iter()
            .enumerate()
            .filter(|(_, s)| (s.admitted, s.granted, s.waiting) != (0, 0, 0))
            .map(|(g, s)| format!("gateway {g}: {s:?}"))
            .collect(),
    );

    // The run must have exercised what it checks: a full room, a long line, abandoners and
    // vanishers, and (almost) every waiter in the ordering check.
    let mut thin = Vec::new();
    if sampled.max_inside < u64::from(CAPACITY) {
        thin.push(format!(
            "the room was never full (at most {})",
            sampled.max_inside
        ));
    }
    if waited < VISITORS / 2 {
        thin.push(format!("only {waited} visitors waited"));
    }
    if abandoned < VISITORS / 100 || vanished < VISITORS / 100 {
        thin.push(format!(
            "only {abandoned} abandoned and {vanished} vanished"
        ));
    }
    if lapsed > waited / 10 {
        thin.push(format!(
            "{lapsed} of {waited} waiters lapsed: the machine is too slow for the ordering check"
        ));
    }
    fail("the run was too thin to mean much", thin);

    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
}
