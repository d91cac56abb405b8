//! A visitor's life once it has joined: waiting, getting in, browsing as its plan says, and
//! leaving, every request through a randomly chosen gateway.

use super::inside::Inside;
use super::tools::{Answer, Net, Rng};
use super::{
    ADMISSION_COOKIE, GATEWAYS, LAPSE, MAX_POLLS, MAX_RETRIES, POLL_CAP, QUEUE_COOKIE, ROOM,
};
use crate::common::{cookie, Jar, PREFIX};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::header::HeaderValue;
use http::{Method, StatusCode};
use tower_waiting_room::{Keyring, SessionId};

// ===== the visitors =====

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plan {
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
pub(super) struct Visitor {
    pub(super) arrival: usize,
    pub(super) plan: Plan,
    /// From the signed queue cookie.
    pub(super) session: SessionId,
    pub(super) queue_cookie: String,
    /// Answers `429` (waiting).
    pub(super) waits: u32,
    /// When the last request answered `429` was sent.
    pub(super) last_wait_sent: Option<Instant>,
    /// When the first `200` was received.
    pub(super) admitted_at: Option<Instant>,
    /// Stopped polling for good while waiting.
    pub(super) abandoned: bool,
    /// Two consecutive check-ins while waiting were at least `LAPSE` apart.
    pub(super) lapsed: bool,
    pub(super) longest_gap: Duration,
    /// When the visitor stopped using the site: just before `leave`, on vanishing, or on
    /// abandoning. It sends nothing after this but `leave` and a status probe.
    pub(super) gone_at: Option<Instant>,
    /// Admission cookies received on requests sent without one: new admissions.
    pub(super) fresh_admissions: u32,
    /// Admission cookies received on requests sent with one: extensions.
    pub(super) extensions: u32,
    /// Requests answered `429` after the visitor had been admitted (slot lost).
    pub(super) lost_slot: u32,
    /// The state the status endpoint reported for the queue cookie just after `leave`.
    pub(super) after_leave: Option<String>,
    /// `503` answers and transport errors.
    pub(super) unavailable: u32,
    pub(super) errors: u32,
    pub(super) problems: Vec<String>,
}

pub(super) struct Shared {
    pub(super) net: Net,
    pub(super) inside: Mutex<Inside>,
    pub(super) keys: Keyring,
    pub(super) deadline: Instant,
    /// Set once the blockers are to leave.
    pub(super) released: AtomicBool,
    /// Visitors planned to abandon who have stopped waiting (abandoned, got in, or failed).
    pub(super) settled_abandoners: AtomicUsize,
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
pub(super) async fn request(
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
            .send(
                rng.below(GATEWAYS as u64) as usize,
                method.clone(),
                path,
                cookie,
            )
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
pub(super) async fn live(
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
