//! The drain fail policy with the store killed mid-run: admissions go on from the front of the
//! line, in order, never faster than the pace the line had, within the budget; newcomers are
//! refused; nobody is let in twice over by two gateways. Real Redis, killed for real.
//!
//! What a gateway may let in is measured from the snapshot it held, not from the wall clock:
//! each gateway's store is wrapped to keep every snapshot its syncs brought back, with the
//! time (on the gateways' own clock) the test sent the request that made the sync, which is no
//! later than the moment the gateway dates it from. So when an answer comes back, the
//! snapshot's age by the gateway is at most that answer's time less the request's, and by
//! `src/room/drain.rs` the gateway let in at most the places its pace covers in that time
//! (within its budget), counted from the front of its snapshot's line.

use crate::common;
use crate::redis_harness;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use common::{call, keys, Jar, Reply, SECRET};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use redis_harness::Server;
use tower_waiting_room::__private::QueueCookie;
use tower_waiting_room::clock::Clock;
use tower_waiting_room::store::{
    Decision, RedisStore, RoomSnapshot, RoomStats, SeenWaiters, SettingsChange, SettingsUpdate,
    SnapshotStore, Store, StoreFuture, ADMISSION_BUCKET_MS,
};
use tower_waiting_room::{AdmittedBy, FailPolicy, RoomPolicy, SessionId, WaitingRoomLayer};

/// The room's admission rate: the pace the line keeps while the store is up.
const RATE: u32 = 4;
const WAITERS: usize = 120;
const ROOM: &str = "drain";
/// Complete buckets in a snapshot's "last minute" and "last five minutes" counts (see
/// `AdmissionCounts`).
const MINUTE_BUCKETS: u64 = 6;
const FIVE_MINUTE_BUCKETS: u64 = 30;

/// The gateways' clock: the system's time when the test began, then a monotonic count of
/// milliseconds, so that the test reads the very clock the gateways date their snapshots by.
#[derive(Clone)]
struct Steady {
    origin: Instant,
    origin_ms: u64,
}

impl Steady {
    fn new() -> Self {
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        Self {
            origin: Instant::now(),
            origin_ms: since_epoch.as_millis() as u64,
        }
    }
}

impl Clock for Steady {
    fn now_ms(&self) -> u64 {
        self.origin_ms + self.origin.elapsed().as_millis() as u64
    }
}

/// A snapshot a gateway's sync brought back, and when (gateway ms) the request that made the
/// sync was sent: no later than the time the gateway dates the snapshot from.
#[derive(Clone)]
struct Synced {
    asked_at_ms: u64,
    snapshot: RoomSnapshot,
}

/// The Redis store as the room sees it, keeping every snapshot its syncs bring back.
struct Recording {
    store: RedisStore,
    snapshots: Arc<dyn SnapshotStore>,
    /// When the request in flight was sent (set by [`Gateway::get`]).
    asked_at_ms: Arc<AtomicU64>,
    synced: Arc<Mutex<Vec<Synced>>>,
}

impl Store for Recording {
    fn enter(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.store.enter(p, s)
    }
    fn join(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.store.join(p, s)
    }
    fn poll(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.store.poll(p, s)
    }
    fn heartbeat(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
        self.store.heartbeat(p, s)
    }
    fn release(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<bool> {
        self.store.release(p, s)
    }
    fn stats(&self, p: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.store.stats(p)
    }
    fn configure(&self, p: &RoomPolicy, c: SettingsChange) -> StoreFuture<SettingsUpdate> {
        self.store.configure(p, c)
    }
    fn admit_next(&self, p: &RoomPolicy, n: u32) -> StoreFuture<u64> {
        self.store.admit_next(p, n)
    }
    fn ban(&self, p: &RoomPolicy, s: SessionId, until: u64) -> StoreFuture<bool> {
        self.store.ban(p, s, until)
    }
    fn snapshots(self: Arc<Self>) -> Option<Arc<dyn SnapshotStore>> {
        Some(self)
    }
}

impl SnapshotStore for Recording {
    fn sync(&self, policy: &RoomPolicy, seen: SeenWaiters) -> StoreFuture<RoomSnapshot> {
        let asked_at_ms = self.asked_at_ms.load(Ordering::SeqCst);
        let synced = Arc::clone(&self.synced);
        let call = self.snapshots.sync(policy, seen);
        Box::pin(async move {
            let answer = call.await;
            if let Ok(snapshot) = &answer {
                synced.lock().unwrap().push(Synced {
                    asked_at_ms,
                    snapshot: snapshot.clone(),
                });
            }
            answer
        })
    }
}

/// One gateway: the room in front of `common::app`, on its own connection to the server.
struct Gateway {
    name: &'static str,
    app: Router,
    budget: u64,
    clock: Steady,
    asked_at_ms: Arc<AtomicU64>,
    synced: Arc<Mutex<Vec<Synced>>>,
}

impl Gateway {
    fn new(name: &'static str, server: &Server, policy: FailPolicy, clock: &Steady) -> Self {
        let FailPolicy::Drain { budget } = policy else {
            panic!("a drain policy")
        };
        let store = RedisStore::builder()
            .url(server.url())
            // Generous: while the store is up every admission must be the store's, and a call
            // kept waiting by a busy machine must not count as an outage. A dead store is
            // refused at once (connection refused), so the outage below is met as soon as it
            // starts.
            .timeout(Duration::from_secs(2))
            .build()
            .expect("store builds");
        let snapshots = Arc::new(store.clone())
            .snapshots()
            .expect("the Redis store keeps snapshots");
        let (asked_at_ms, synced) = (Arc::default(), Arc::default());
        let recording = Recording {
            store,
            snapshots,
            asked_at_ms: Arc::clone(&asked_at_ms),
            synced: Arc::clone(&synced),
        };
        let layer = WaitingRoomLayer::builder(ROOM)
            .capacity(10_000)
            .admission_rate(RATE)
            .secret(SECRET)
            .secure_cookies(false)
            // Every visitor of the test comes from one address, and polls often.
            .new_visitor_limit(None)
            .poll_limit(None)
            .fail_policy(policy)
            .clock(clock.clone())
            .store(recording)
            .build()
            .unwrap();
        Self {
            name,
            app: common::app(layer),
            budget,
            clock: clock.clone(),
            asked_at_ms,
            synced,
        }
    }

    /// `GET /` as an API client with the jar's cookies, and (gateway ms) when its answer came
    /// back.
    async fn get(&self, jar: &mut Jar) -> (Reply, u64) {
        let mut headers = vec![(header::ACCEPT, HeaderValue::from_static("application/json"))];
        headers.extend(jar.header().map(|c| (header::COOKIE, c)));
        let sent = self.clock.now_ms();
        self.asked_at_ms.store(sent, Ordering::SeqCst);
        let reply = call(&self.app, Method::GET, "/", &headers).await;
        let answered = self.clock.now_ms();
        jar.absorb(&reply);
        (reply, answered)
    }

    /// The last snapshot a sync brought back: the one the gateway holds once the store is
    /// gone.
    fn held(&self) -> Synced {
        let synced = self.synced.lock().unwrap();
        synced
            .last()
            .cloned()
            .expect("a snapshot before the outage")
    }

    /// How many syncs brought a snapshot back so far.
    fn syncs(&self) -> usize {
        self.synced.lock().unwrap().len()
    }
}

/// How a visitor was let in, if they were.
fn admitted_by(reply: &Reply) -> Option<String> {
    (reply.status == StatusCode::OK).then(|| reply.handler_saw()["by"].as_str().unwrap().to_owned())
}

/// Admissions per second the drain goes by (`src/room/drain.rs`): the snapshot's last complete
/// minute's (or, if none, its last five minutes'), never above the live admission rate. A room
/// younger than the window is measured over the complete buckets it lived through, its first
/// (partial) one counted whole.
fn drain_pace(s: &RoomSnapshot) -> f64 {
    let lived = s.pace.observed_ms.saturating_sub(s.pace.into_bucket_ms);
    let buckets = lived.div_ceil(ADMISSION_BUCKET_MS).max(1);
    let per_second = |admissions: u64, window_buckets: u64| {
        admissions as f64 / (buckets.min(window_buckets) * ADMISSION_BUCKET_MS) as f64 * 1_000.0
    };
    let measured = if s.recent.last_minute > 0 {
        per_second(s.recent.last_minute, MINUTE_BUCKETS)
    } else {
        per_second(s.recent.last_five_minutes, FIVE_MINUTE_BUCKETS)
    };
    match s.pace.admission_rate {
        Some(rate) => measured.min(f64::from(rate)),
        None => measured,
    }
}

/// The most places `held` lets a gateway with `budget` drain by `at_ms`: its pace over the
/// snapshot's greatest possible age then, at most the budget; none while paused.
fn most_drained(held: &Synced, budget: u64, at_ms: u64) -> u64 {
    if held.snapshot.paused {
        return 0;
    }
    let age_ms = at_ms.saturating_sub(held.asked_at_ms);
    let places = (drain_pace(&held.snapshot) * age_ms as f64 / 1_000.0).floor();
    (places as u64).min(budget)
}

/// Each waiter's position in `snapshot`'s line, by the place their queue cookie carries;
/// `None` for a place ahead of its head (their turn had come), and for those let in already
/// (`inside`).
fn positions(
    snapshot: &RoomSnapshot,
    jars: &[Jar],
    inside: &[bool],
    now_ms: u64,
) -> Vec<Option<u64>> {
    jars.iter()
        .zip(inside)
        .map(|(jar, &inside)| {
            if inside {
                return None;
            }
            let value = jar.get("wr_drain_q").expect("a queue cookie");
            let cookie = QueueCookie::verify(&keys(), ROOM, value, now_ms).expect("a live cookie");
            let place = cookie
                .place()
                .expect("a waiter's cookie carries their place");
            snapshot.position_of(place.score(|| unreachable!("no scheduled opening")))
        })
        .collect()
}

/// What one gateway did while the store was dead.
#[derive(Default)]
struct Drained {
    /// Each waiter it let in: the round, and their position in its snapshot's line.
    at: BTreeMap<usize, (u32, u64)>,
    /// Waiters it refused whose place was still in its snapshot's line.
    refused: u32,
    /// Waiters it refused whose turn had come by its snapshot (granted, not yet claimed: only
    /// the store can tell them from someone who left), as `src/room/drain.rs` says.
    turn_came: BTreeSet<usize>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_drains_in_order_at_the_last_pace_while_the_store_is_dead() {
    let mut server = Server::start(&[]);
    let clock = Steady::new();
    let a = Gateway::new("a", &server, FailPolicy::drain(), &clock);
    // A second gateway with a budget of 2: it lets in no more than that, however long.
    let b = Gateway::new("b", &server, FailPolicy::Drain { budget: 2 }, &clock);

    // The line: WAITERS visitors in arrival order, each with their place in the queue cookie.
    let mut jars = Vec::new();
    let mut inside = [false; WAITERS];
    for is_inside in inside.iter_mut() {
        let mut jar = Jar::new();
        assert_eq!(a.get(&mut jar).await.0.status, StatusCode::FOUND);
        // The first few are let in at once (the rate's burst); the others wait.
        *is_inside = admitted_by(&a.get(&mut jar).await.0).is_some();
        jars.push(jar);
    }
    // The line moves at RATE a second for a while, through both gateways (each refreshes its
    // snapshot as it answers); who got in is out of the line.
    let up_until = Instant::now() + Duration::from_secs(13);
    while Instant::now() < up_until {
        for (i, jar) in jars.iter_mut().enumerate() {
            if inside[i] {
                continue;
            }
            let gw = if i % 2 == 0 { &a } else { &b };
            if let Some(by) = admitted_by(&gw.get(jar).await.0) {
                assert_eq!(by, format!("{:?}", AdmittedBy::Store));
                inside[i] = true;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let let_in_by_store = inside.iter().filter(|&&x| x).count();
    assert!(
        (10..WAITERS - 40).contains(&let_in_by_store),
        "{let_in_by_store} let in while the store was up"
    );

    // The store dies. What each gateway holds from now on: its last snapshot, and where each
    // waiter stands in it.
    server.stop();
    let killed = Instant::now();
    let gateways = [&a, &b];
    let held = gateways.map(Gateway::held);
    let syncs = gateways.map(Gateway::syncs);
    let place_in = held
        .clone()
        .map(|h| positions(&h.snapshot, &jars, &inside, clock.now_ms()));
    for (gw, h) in gateways.iter().zip(&held) {
        let pace = drain_pace(&h.snapshot);
        eprintln!(
            "gateway {}: snapshot asked for {} ms before the kill, pace {pace:.2}/s, {} waiting",
            gw.name,
            clock.now_ms() - h.asked_at_ms,
            h.snapshot.waiting
        );
        assert!(
            pace > 0.0 && pace <= f64::from(RATE),
            "gateway {}: the line moved, and no faster than the rate: {pace}",
            gw.name
        );
    }

    // Everyone still waiting keeps polling both gateways. Each round goes from the back of the
    // line to the front, so a front waiter is asked after those behind: if the front moved on
    // for one behind, it did for the front too.
    let mut drained = [Drained::default(), Drained::default()];
    let mut round = 0;
    while killed.elapsed() < Duration::from_secs(10) {
        round += 1;
        for i in (0..WAITERS).rev() {
            if inside[i] {
                continue;
            }
            for (g, gw) in gateways.iter().enumerate() {
                let (reply, answered) = gw.get(&mut jars[i]).await;
                let position = place_in[g][i];
                let most = most_drained(&held[g], gw.budget, answered);
                match admitted_by(&reply) {
                    Some(by) => {
                        assert_eq!(
                            by,
                            format!("{:?}", AdmittedBy::Drained),
                            "gateway {}",
                            gw.name
                        );
                        // Never faster than the pace: within the places drained by then.
                        let p = position.unwrap_or_else(|| {
                            panic!(
                                "gateway {} let in waiter {i}, ahead of its snapshot's head",
                                gw.name
                            )
                        });
                        assert!(
                            p <= most,
                            "gateway {} let in position {p} by {} ms after its snapshot was \
                             asked for: more than its pace ({:.2}/s) or budget ({}) allow ({most})",
                            gw.name,
                            answered - held[g].asked_at_ms,
                            drain_pace(&held[g].snapshot),
                            gw.budget
                        );
                        drained[g].at.entry(i).or_insert((round, p));
                    }
                    None => {
                        assert!(
                            reply.status == StatusCode::TOO_MANY_REQUESTS
                                || reply.status == StatusCode::SERVICE_UNAVAILABLE,
                            "{reply:?}"
                        );
                        let body = reply.json();
                        match position {
                            // Still waiting: their place, moved up by no more than the
                            // drained front.
                            Some(p) if body["state"] == "waiting" => {
                                let shown = body["position"].as_u64().unwrap();
                                assert!(
                                    shown >= 1 && shown <= p && p - shown <= most,
                                    "gateway {}: waiter {i} at {p} shown {shown}, {most} drained at most",
                                    gw.name
                                );
                            }
                            Some(_) => {
                                if drained[g].refused == 0 {
                                    eprintln!("refused by {}: {body}", gw.name);
                                }
                                drained[g].refused += 1;
                            }
                            // Their turn had come: only the store can say more.
                            None => {
                                assert_eq!(body["state"], "unavailable", "{body}");
                                drained[g].turn_came.insert(i);
                            }
                        }
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // The snapshots measured by were the last: no sync brought one back after the kill.
    assert_eq!(
        gateways.map(Gateway::syncs),
        syncs,
        "a sync answered after the kill"
    );

    let waiting: Vec<usize> = (0..WAITERS).filter(|&i| !inside[i]).collect();
    for (g, gw) in gateways.iter().enumerate() {
        let d = &drained[g];
        eprintln!(
            "gateway {}: let in {} in {round} rounds; refused {} whose turn had come",
            gw.name,
            d.at.len(),
            d.turn_came.len()
        );
        assert_eq!(
            d.refused, 0,
            "gateway {}: a waiter with a place is never refused while draining",
            gw.name
        );
        // In order: those it let in are exactly the front of who was still waiting in its
        // snapshot's line.
        let mut line: Vec<(u64, usize)> = waiting
            .iter()
            .filter_map(|&i| Some((place_in[g][i]?, i)))
            .collect();
        line.sort();
        let front: Vec<usize> = line[..d.at.len()].iter().map(|&(_, i)| i).collect();
        let let_in: BTreeSet<usize> = d.at.keys().copied().collect();
        assert_eq!(
            let_in,
            front.iter().copied().collect(),
            "gateway {}: drained out of order",
            gw.name
        );
        // And in round order along the line: nobody got in a round before someone ahead of
        // them.
        let rounds: Vec<u32> = front.iter().map(|i| d.at[i].0).collect();
        assert!(rounds.windows(2).all(|w| w[0] <= w[1]), "{rounds:?}");
        assert!(
            d.at.len() as u64 <= gw.budget,
            "gateway {} let in {} with a budget of {}",
            gw.name,
            d.at.len(),
            gw.budget
        );
    }
    // Admissions went on.
    let let_in: BTreeSet<usize> = drained.iter().flat_map(|d| d.at.keys().copied()).collect();
    assert!(
        let_in.len() >= 5,
        "only {} let in while draining",
        let_in.len()
    );

    // A newcomer gets nothing while the store is away: no place to drain by.
    let mut newcomer = Jar::new();
    a.get(&mut newcomer).await;
    let (reply, _) = a.get(&mut newcomer).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{reply:?}");
}
