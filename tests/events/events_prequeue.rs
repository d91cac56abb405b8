//! A scheduled opening with a fair, shuffled pre-queue, over two gateways and real HTTP.
//!
//! Two `WaitingRoomLayer`s with the same secret serve real HTTP on loopback, once sharing one
//! `MemoryStore` and once each with its own `RedisStore` on one `redis-server` (sent the test's
//! manual clock, so the run is the same on any machine). The room has one slot and opens a
//! minute after the start. A thousand visitors register before the opening, each on one of the
//! two gateways; their session ids come from a fixed seed and their queue cookies are minted
//! with the test secret, so every draw, and so the whole run, is reproducible.
//!
//! What is checked, each in a way that can fail:
//! 1. nobody is admitted before `opens_at`, on either gateway: every registrant (and every
//!    reload, up to the last millisecond before the opening) is answered `scheduled`, with the
//!    opening and a `Retry-After`; the store holds no slot and `admit_next` lets nobody in;
//! 2. after the opening, the registrants' places are a permutation of `0..1000` (one slot, then
//!    positions 1..999), equal to the order of their draws; the admission order, draining the
//!    room one visitor at a time over both gateways, is that order;
//! 3. the order does not follow arrival: a chi-square test of independence between arrival
//!    decile and place decile (10 x 10 table, 81 degrees of freedom, 100 per row and column, so
//!    10 expected per cell) at significance alpha = 0.001, critical value 126.08 (the 0.999
//!    quantile of the chi-square distribution with 81 degrees of freedom, R's
//!    `qchisq(0.999, 81)` = 126.0826; the Wilson-Hilferty approximation gives 126.14). A store
//!    that kept arrival order would score about 9 000;
//! 4. arrivals after the opening all stand behind every registrant, first come, first served;
//! 5. a reload (same cookie, the other gateway) before and after the opening changes nobody's
//!    place.

use crate::common;
#[cfg(feature = "redis")]
use crate::redis_harness;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use common::{cookie, keys, serve, Http, Reply, PREFIX, SECRET, T0};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::__private::QueueCookie;
use tower_waiting_room::config::EventSchedule;
use tower_waiting_room::store::{MemoryStore, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{RoomPolicy, SessionId, WaitingRoomBuilder, WaitingRoomLayer};

const ROOM: &str = "sale";
const QUEUE_COOKIE: &str = "wr_sale_q";
const REGISTRANTS: usize = 1_000;
const LATE_ARRIVALS: usize = 100;
const OPENS_IN_MS: u64 = 60_000;
/// Between two registrations: the thousand arrive over ten seconds, well before the opening.
const ARRIVAL_GAP_MS: u64 = 10;
const SEED: u64 = 0x5ca1_ab1e_0000_2026;
/// The chi-square critical value for 81 degrees of freedom at alpha = 0.001 (see the module
/// docs for its source).
const CHI_SQUARE_CRITICAL_81_DF_ALPHA_0_001: f64 = 126.08;
/// Long enough that nobody is skipped, swept or loses a grant during the run.
const LONG: Duration = Duration::from_secs(3_600);

/// splitmix64: reproducible session ids without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn session(&mut self) -> SessionId {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.next().to_be_bytes());
        b[8..].copy_from_slice(&self.next().to_be_bytes());
        SessionId::from_bytes(b)
    }
}

fn opens_at_ms() -> u64 {
    T0 + OPENS_IN_MS
}

fn builder(clock: &ManualClock) -> WaitingRoomBuilder {
    WaitingRoomLayer::builder(ROOM)
        .capacity(1)
        .secret(SECRET)
        .clock(clock.clone())
        .opens_at(UNIX_EPOCH + Duration::from_millis(opens_at_ms()))
        .active_ttl(LONG)
        .grant_ttl(LONG)
        .queue_ttl(LONG)
        .new_visitor_limit(None)
        .poll_limit(None)
}

/// The two gateways, the store to read counts from, and the room's policy.
struct Gateways {
    http: [Http; 2],
    store: Arc<dyn Store>,
    policy: RoomPolicy,
    clock: ManualClock,
}

impl Gateways {
    async fn start(
        layers: [WaitingRoomLayer; 2],
        store: Arc<dyn Store>,
        clock: ManualClock,
    ) -> Self {
        let policy = layers[0].config().policy().clone();
        assert_eq!(
            policy,
            *layers[1].config().policy(),
            "both gateways describe the room alike (the same derived draw key)"
        );
        let [a, b] = layers;
        Self {
            http: [serve(common::app(a)).await, serve(common::app(b)).await],
            store,
            policy,
            clock,
        }
    }

    fn schedule(&self) -> &EventSchedule {
        self.policy
            .schedule
            .as_ref()
            .expect("the room is scheduled")
    }

    /// `GET path` as an API client with the session's queue cookie, on gateway `g`.
    async fn get(&self, g: usize, path: &str, session: SessionId) -> Reply {
        let value = QueueCookie::for_session(session, T0, 86_400_000).sign(&keys(), ROOM);
        let headers = [
            (header::ACCEPT, HeaderValue::from_static("application/json")),
            (header::COOKIE, cookie(QUEUE_COOKIE, &value)),
        ];
        self.http[g % 2].send(Method::GET, path, &headers).await
    }

    async fn enter(&self, g: usize, session: SessionId) -> Reply {
        self.get(g, "/", session).await
    }

    async fn status(&self, g: usize, session: SessionId) -> Reply {
        self.get(g, &format!("{PREFIX}/{ROOM}/status"), session)
            .await
    }

    async fn leave(&self, g: usize, session: SessionId) {
        let value = QueueCookie::for_session(session, T0, 86_400_000).sign(&keys(), ROOM);
        let headers = [
            (header::ACCEPT, HeaderValue::from_static("application/json")),
            (header::COOKIE, cookie(QUEUE_COOKIE, &value)),
        ];
        let r = self.http[g % 2]
            .send(Method::POST, &format!("{PREFIX}/{ROOM}/leave"), &headers)
            .await;
        assert_eq!(r.status, StatusCode::OK, "leave: {}", r.text());
    }

    /// (inside: admitted + granted, waiting), from the store.
    async fn counts(&self) -> (u64, u64) {
        let s = self.store.stats(&self.policy).await.expect("stats");
        (s.admitted + s.granted, s.waiting)
    }

    /// A registrant's place after the opening, from the status endpoint: 0 for the one holding
    /// the slot, else the position in line.
    async fn place(&self, g: usize, session: SessionId) -> u64 {
        let r = self.status(g, session).await;
        let j = r.json();
        match j["state"].as_str() {
            Some("admitted") => 0,
            Some("waiting") => j["position"].as_u64().expect("a position"),
            _ => panic!("status after the opening: {j}"),
        }
    }
}

#[track_caller]
fn assert_scheduled(r: &Reply, what: &str) {
    assert_eq!(
        r.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{what}: {}",
        r.text()
    );
    let j = r.json();
    assert_eq!(j["state"], "scheduled", "{what}: {j}");
    assert_eq!(j["opens_at"], opens_at_ms().div_ceil(1000), "{what}: {j}");
    let retry = r.retry_after();
    assert!((1..=60).contains(&retry), "{what}: Retry-After {retry}");
}

/// The chi-square statistic of independence of a contingency table.
fn chi_square(table: &[[u64; 10]; 10]) -> f64 {
    let total: u64 = table.iter().flatten().sum();
    let rows: Vec<u64> = table.iter().map(|r| r.iter().sum()).collect();
    let cols: Vec<u64> = (0..10).map(|c| table.iter().map(|r| r[c]).sum()).collect();
    let mut chi = 0.0;
    for (r, row) in table.iter().enumerate() {
        for (c, &observed) in row.iter().enumerate() {
            let expected = (rows[r] * cols[c]) as f64 / total as f64;
            chi += (observed as f64 - expected).powi(2) / expected;
        }
    }
    chi
}

async fn run(gw: Gateways) {
    let mut rng = Rng(SEED);
    let registrants: Vec<SessionId> = (0..REGISTRANTS).map(|_| rng.session()).collect();

    // --- 1. the pre-queue: nobody admitted before the opening, on either gateway ---
    for (i, &s) in registrants.iter().enumerate() {
        assert_scheduled(&gw.enter(i, s).await, &format!("registrant #{i}"));
        gw.clock.advance(Duration::from_millis(ARRIVAL_GAP_MS));
    }
    assert_eq!(
        gw.counts().await,
        (0, REGISTRANTS as u64),
        "registered, nobody inside"
    );
    // A reload on the other gateway, and a status question: still registered, nobody added.
    for (i, &s) in registrants.iter().enumerate() {
        assert_scheduled(
            &gw.enter(i + 1, s).await,
            &format!("registrant #{i} reloading"),
        );
    }
    let r = gw.status(0, registrants[0]).await;
    assert_eq!(
        (r.status, r.json()["state"].as_str()),
        (StatusCode::OK, Some("scheduled"))
    );
    assert_eq!(
        gw.store
            .admit_next(&gw.policy, 10)
            .await
            .expect("admit_next"),
        0,
        "an operator lets nobody in before the opening"
    );
    gw.clock.set(opens_at_ms() - 1);
    for (g, &s) in registrants.iter().take(2).enumerate() {
        assert_scheduled(&gw.enter(g, s).await, "a millisecond before the opening");
    }
    assert_eq!(
        gw.counts().await,
        (0, REGISTRANTS as u64),
        "nobody inside before the opening"
    );

    // --- 2. the opening: the registrants' places are their draw order ---
    gw.clock.set(opens_at_ms());
    let mut by_draw = registrants.clone();
    by_draw.sort_by_key(|&s| (gw.schedule().draw(s), s));
    let mut places = Vec::with_capacity(REGISTRANTS);
    for (i, &s) in registrants.iter().enumerate() {
        places.push(gw.place(i, s).await);
    }
    let distinct: HashSet<u64> = places.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        REGISTRANTS,
        "every registrant has a place of their own"
    );
    assert!(
        places.iter().all(|&p| p < REGISTRANTS as u64),
        "places are 0..1000"
    );
    for (rank, s) in by_draw.iter().enumerate() {
        let i = registrants.iter().position(|r| r == s).unwrap();
        assert_eq!(
            places[i], rank as u64,
            "the place of registrant #{i} is its draw's rank"
        );
    }

    // --- 3. the order is independent of arrival ---
    let mut table = [[0u64; 10]; 10];
    for (i, &place) in places.iter().enumerate() {
        table[i * 10 / REGISTRANTS][place as usize * 10 / REGISTRANTS] += 1;
    }
    let chi = chi_square(&table);
    eprintln!("chi-square (81 df) of arrival decile vs place decile: {chi:.2}");
    assert!(
        chi < CHI_SQUARE_CRITICAL_81_DF_ALPHA_0_001,
        "places depend on arrival: chi-square {chi:.2} >= {CHI_SQUARE_CRITICAL_81_DF_ALPHA_0_001} \
         (alpha = 0.001); table {table:?}"
    );

    // --- 5. a reload after the opening, on the other gateway, changes nobody's place ---
    for (i, &s) in registrants.iter().enumerate() {
        let r = gw.enter(i + 1, s).await;
        if places[i] == 0 {
            r.handler_saw();
        } else {
            assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text());
            assert_eq!(r.json()["position"], places[i], "registrant #{i} reloading");
        }
    }
    for (i, &s) in registrants.iter().enumerate() {
        assert_eq!(
            gw.place(i, s).await,
            places[i],
            "registrant #{i} after the reloads"
        );
    }

    // --- 4. arrivals after the opening stand behind every registrant, in turn ---
    let late: Vec<SessionId> = (0..LATE_ARRIVALS).map(|_| rng.session()).collect();
    for (i, &s) in late.iter().enumerate() {
        let r = gw.enter(i, s).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text());
        let want = REGISTRANTS + i;
        assert_eq!(r.json()["position"], want as u64, "late arrival #{i}");
    }

    // --- 2. the admission order, one slot at a time over both gateways ---
    let mut admitted = Vec::new();
    for (k, &s) in by_draw.iter().chain(&late).enumerate() {
        let seen = gw.enter(k, s).await.handler_saw();
        assert_eq!(seen["session"], s.to_string(), "admission #{k}");
        assert_eq!(gw.counts().await.0, 1, "one inside at a time");
        admitted.push(s);
        gw.leave(k + 1, s).await;
    }
    let unique: HashSet<SessionId> = admitted.iter().copied().collect();
    assert_eq!(
        unique.len(),
        REGISTRANTS + LATE_ARRIVALS,
        "each admitted once"
    );
    assert_eq!(gw.counts().await, (0, 0), "the room emptied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prequeue_over_two_gateways_on_a_shared_memory_store() {
    let clock = ManualClock::new(T0);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::with_clock(clock.clone()));
    let layer = || {
        builder(&clock)
            .shared_store(store.clone())
            .build()
            .expect("the room builds")
    };
    run(Gateways::start([layer(), layer()], store.clone(), clock.clone()).await).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prequeue_over_two_gateways_on_redis() {
    use tower_waiting_room::store::RedisStore;

    let server = tokio::task::spawn_blocking(redis_harness::shared_server)
        .await
        .unwrap();
    let clock = ManualClock::new(T0);
    // A prefix of this run's own, so a rerun on the same server starts empty.
    let prefix = format!("twr-prequeue-{}", SessionId::random());
    let store = || {
        RedisStore::builder()
            .url(server.url())
            .prefix(prefix.clone())
            // Generous: every answer of the run is the store's to give (the manual clock makes
            // it the same on any machine), and a call kept waiting by a busy machine past the
            // default 250 ms would be an outage: the breaker's `unavailable`, or the fail
            // policy's admission.
            .timeout(Duration::from_secs(5))
            .manual_clock(clock.clone())
            .build()
            .expect("the store builds")
    };
    let (first, second) = (store(), store());
    let layer = |s: RedisStore| builder(&clock).store(s).build().expect("the room builds");
    let reader: Arc<dyn Store> = Arc::new(first.clone());
    run(Gateways::start([layer(first), layer(second)], reader, clock.clone()).await).await;
}

/// Bad input: a closing before the opening is refused at build time; an opening in the past
/// opens at once.
#[tokio::test]
async fn a_closing_before_the_opening_is_refused_and_a_past_opening_opens_at_once() {
    let clock = ManualClock::new(T0);
    let at = |ms| UNIX_EPOCH + Duration::from_millis(ms);
    for closes in [opens_at_ms() - 1, opens_at_ms()] {
        assert_eq!(
            builder(&clock).closes_at(at(closes)).build().err(),
            Some(tower_waiting_room::ConfigError::ClosesBeforeOpening),
            "closes_at {closes}"
        );
    }
    let layer = WaitingRoomLayer::builder(ROOM)
        .capacity(1)
        .secret(SECRET)
        .clock(clock.clone())
        .opens_at(at(T0 - 1_000))
        .build()
        .unwrap();
    let http = serve(common::app(layer)).await;
    let value = QueueCookie::for_session(SessionId::random(), T0, 86_400_000).sign(&keys(), ROOM);
    let r = http
        .get_with_cookie("/", Some(cookie(QUEUE_COOKIE, &value)))
        .await;
    r.handler_saw();
}

/// A store outage before the opening never opens the room early, whatever the fail policy: the
/// gateway's clock says it is not open yet, so a failed store call answers `scheduled` (an API
/// client and the status endpoint alike). A store out of memory stays `busy`. Once the gateway's
/// clock passes the opening, the fail policy decides again (here: open).
#[tokio::test]
async fn a_store_outage_before_the_opening_does_not_open_the_room() {
    use common::TestStore;
    use tower_waiting_room::store::StoreErrorKind;
    use tower_waiting_room::FailPolicy;

    let clock = ManualClock::new(T0);
    let store = TestStore::new(clock.clone());
    let layer = builder(&clock)
        .fail_policy(FailPolicy::Open)
        .store(store.clone())
        .build()
        .unwrap();
    let gw = Gateways::start(
        [layer.clone(), layer],
        Arc::new(store.inner().clone()),
        clock.clone(),
    )
    .await;
    let s = SessionId::random();
    assert_scheduled(&gw.enter(0, s).await, "with the store up");
    for kind in [StoreErrorKind::Unavailable, StoreErrorKind::Timeout] {
        store.fail_with(Some(kind));
        assert_scheduled(
            &gw.enter(0, s).await,
            &format!("a registrant, store {kind:?}"),
        );
        assert_scheduled(
            &gw.enter(1, SessionId::random()).await,
            &format!("a newcomer, store {kind:?}"),
        );
        let r = gw.status(0, s).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.json()["state"], "scheduled", "status, store {kind:?}");
    }
    store.fail_with(Some(StoreErrorKind::Busy));
    let r = gw.enter(0, s).await;
    assert_eq!(r.json()["state"], "busy", "{}", r.text());
    assert_eq!(gw.counts().await, (0, 1), "nobody inside");
    // Past the opening, by the gateway's clock: the fail policy decides again.
    store.fail_with(Some(StoreErrorKind::Unavailable));
    clock.set(opens_at_ms());
    let seen = gw.enter(0, s).await.handler_saw();
    assert_eq!(seen["by"], "FailOpen");
}

/// A store outage after a scheduled closing never lets a newcomer in, whatever the fail
/// policy: with the line kept, a place issued at or after the closing (certainly a newcomer's)
/// is told `closed`, while a place from before it gets what the fail policy gives (here: open);
/// with the line not kept, everyone without a slot is told `closed`. Busy stays busy.
#[tokio::test]
async fn a_store_outage_after_the_closing_lets_no_newcomer_in() {
    use common::TestStore;
    use tower_waiting_room::store::StoreErrorKind;
    use tower_waiting_room::FailPolicy;

    let closes_at = opens_at_ms() + 60_000;
    for keep_line in [true, false] {
        let clock = ManualClock::new(T0);
        let store = TestStore::new(clock.clone());
        let layer = builder(&clock)
            .closes_at(UNIX_EPOCH + Duration::from_millis(closes_at))
            .keep_line_after_close(keep_line)
            .fail_policy(FailPolicy::Open)
            .store(store.clone())
            .build()
            .unwrap();
        let app = common::app(layer);
        let http = serve(app).await;
        let get = |issued_at: u64| {
            let value = QueueCookie::for_session(SessionId::random(), issued_at, 86_400_000)
                .sign(&keys(), ROOM);
            let http = &http;
            async move {
                let headers = [
                    (header::ACCEPT, HeaderValue::from_static("application/json")),
                    (header::COOKIE, cookie(QUEUE_COOKIE, &value)),
                ];
                http.send(Method::GET, "/", &headers).await
            }
        };
        clock.set(closes_at + 1_000);
        store.fail_with(Some(StoreErrorKind::Unavailable));
        let newcomer = get(closes_at).await;
        assert_eq!(
            newcomer.json()["state"],
            "closed",
            "keep {keep_line}: {}",
            newcomer.text()
        );
        let earlier = get(T0).await;
        if keep_line {
            assert_eq!(
                earlier.handler_saw()["by"],
                "FailOpen",
                "a place from before the closing"
            );
        } else {
            assert_eq!(
                earlier.json()["state"],
                "closed",
                "line not kept: {}",
                earlier.text()
            );
        }
        store.fail_with(Some(StoreErrorKind::Busy));
        assert_eq!(get(closes_at).await.json()["state"], "busy");
    }
}

/// Browsers get a countdown page before the opening: the notice page's look, a `scheduled`
/// countdown for the script (the time left by the server's clock), and a refresh without
/// JavaScript after `Retry-After`.
#[tokio::test]
async fn browsers_get_a_countdown_page() {
    let clock = ManualClock::new(T0);
    let layer = builder(&clock).build().unwrap();
    let http = serve(common::app(layer)).await;
    let value = QueueCookie::for_session(SessionId::random(), T0, 86_400_000).sign(&keys(), ROOM);
    let headers = [
        (header::ACCEPT, HeaderValue::from_static("text/html")),
        (header::COOKIE, cookie(QUEUE_COOKIE, &value)),
    ];
    let r = http.send(Method::GET, "/", &headers).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.retry_after(), 60, "a minute to the opening");
    let page = r.text();
    assert!(page.contains("The sale opens soon"), "{page}");
    assert!(
        page.contains(r#"<meta http-equiv="refresh" content="60">"#),
        "{page}"
    );
    assert!(
        page.contains("&quot;kind&quot;:&quot;scheduled&quot;"),
        "{page}"
    );
    assert!(page.contains("&quot;opens_in&quot;:60000"), "{page}");
    assert!(page.contains("Opens in {time}"), "{page}");
}
