//! The drain fail policy with the store killed mid-run: admissions go on from the front of the
//! line, in order, never faster than the pace the line had, within the budget; newcomers are
//! refused; nobody is let in twice over by two gateways. Real Redis, killed for real.

use crate::common;
use crate::redis_harness;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use axum::Router;
use common::{call, Jar, Reply, SECRET};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use redis_harness::Server;
use tower_waiting_room::store::RedisStore;
use tower_waiting_room::{AdmittedBy, FailPolicy, WaitingRoomLayer};

/// The room's admission rate: the pace the line keeps while the store is up.
const RATE: u32 = 4;
const WAITERS: usize = 120;

fn gateway(server: &Server, policy: FailPolicy) -> Router {
    let store = RedisStore::builder()
        .url(server.url())
        // Generous: while the store is up every admission must be the store's, and a call kept
        // waiting by a busy machine must not count as an outage. A dead store is refused at
        // once (connection refused), so the outage below is met as soon as it starts.
        .timeout(Duration::from_secs(2))
        .build()
        .expect("store builds");
    let layer = WaitingRoomLayer::builder("drain")
        .capacity(10_000)
        .admission_rate(RATE)
        .secret(SECRET)
        .secure_cookies(false)
        // Every visitor of the test comes from one address, and polls often.
        .new_visitor_limit(None)
        .poll_limit(None)
        .fail_policy(policy)
        .store(store)
        .build()
        .unwrap();
    common::app(layer)
}

async fn get(app: &Router, jar: &mut Jar) -> Reply {
    let mut headers = vec![(header::ACCEPT, HeaderValue::from_static("application/json"))];
    headers.extend(jar.header().map(|c| (header::COOKIE, c)));
    let reply = call(app, Method::GET, "/", &headers).await;
    jar.absorb(&reply);
    reply
}

/// How a visitor was let in, if they were.
fn admitted_by(reply: &Reply) -> Option<String> {
    (reply.status == StatusCode::OK).then(|| reply.handler_saw()["by"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_drains_in_order_at_the_last_pace_while_the_store_is_dead() {
    let mut server = Server::start(&[]);
    let a = gateway(&server, FailPolicy::drain());
    // A second gateway with a budget of 2: it lets in no more than that, however long.
    let b = gateway(&server, FailPolicy::Drain { budget: 2 });

    // The line: WAITERS visitors in arrival order, each with their place in the queue cookie.
    let mut jars = Vec::new();
    let mut inside = [false; WAITERS];
    for is_inside in inside.iter_mut() {
        let mut jar = Jar::new();
        assert_eq!(get(&a, &mut jar).await.status, StatusCode::FOUND);
        // The first few are let in at once (the rate's burst); the others wait.
        *is_inside = admitted_by(&get(&a, &mut jar).await).is_some();
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
            let app = if i % 2 == 0 { &a } else { &b };
            if let Some(by) = admitted_by(&get(app, jar).await) {
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

    // The store dies.
    server.stop();
    let killed = Instant::now();

    // Everyone still waiting keeps polling both gateways. Each round goes from the back of the
    // line to the front, so a front waiter is asked after those behind: if the front moved on
    // for one behind, it did for the front too.
    // Each drained waiter's round and the time their answer came: two let in by one round
    // answer back to front, so the line's order shows in rounds, the pace in times.
    let mut drained_at: BTreeMap<usize, (u32, Duration)> = BTreeMap::new();
    let mut by_b = std::collections::BTreeSet::new();
    let mut refused = 0;
    let mut round = 0;
    while killed.elapsed() < Duration::from_secs(10) {
        round += 1;
        for i in (0..WAITERS).rev() {
            if inside[i] {
                continue;
            }
            for (name, app) in [("a", &a), ("b", &b)] {
                let reply = get(app, &mut jars[i]).await;
                match admitted_by(&reply) {
                    Some(by) => {
                        assert_eq!(by, format!("{:?}", AdmittedBy::Drained), "gateway {name}");
                        drained_at.entry(i).or_insert((round, killed.elapsed()));
                        if name == "b" {
                            by_b.insert(i);
                        }
                    }
                    None => {
                        assert!(
                            reply.status == StatusCode::TOO_MANY_REQUESTS
                                || reply.status == StatusCode::SERVICE_UNAVAILABLE,
                            "{reply:?}"
                        );
                        let body = reply.json();
                        // Still waiting: their place, moved up by the drained front.
                        if body["state"] == "waiting" {
                            assert!(body["position"].as_u64().unwrap() >= 1);
                        } else {
                            if refused == 0 {
                                eprintln!("refused by {name}: {body}");
                            }
                            refused += 1;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        refused, 0,
        "a waiter with a place is never refused while draining"
    );

    // In order: those let in are exactly the front of who was still waiting.
    let waiting: Vec<usize> = (0..WAITERS).filter(|&i| !inside[i]).collect();
    let drained: Vec<usize> = drained_at.keys().copied().collect();
    assert_eq!(
        drained,
        waiting[..drained.len()].to_vec(),
        "drained out of order"
    );
    // And in round order along the line: nobody got in a round before someone ahead of them.
    let rounds: Vec<u32> = drained.iter().map(|i| drained_at[i].0).collect();
    assert!(rounds.windows(2).all(|w| w[0] <= w[1]), "{rounds:?}");
    let mut times: Vec<Duration> = drained_at.values().map(|&(_, t)| t).collect();
    times.sort();
    // Admissions went on, and never faster than the pace: at most RATE a second since the
    // last snapshot (received at most two refreshes before the kill), and one more for the
    // rounding.
    assert!(
        drained.len() >= 5,
        "only {} let in while draining",
        drained.len()
    );
    for (n, t) in times.iter().enumerate() {
        let allowed = (f64::from(RATE) * (t.as_secs_f64() + 2.0)).floor() as usize + 1;
        assert!(
            n < allowed,
            "{} let in by {t:?} after the kill: faster than {RATE}/s",
            n + 1
        );
    }
    // Gateway b, budget 2: the first two places of its snapshot, and those whose turn had
    // come before the kill (granted, not yet claimed: at most a poll round's grants).
    assert!(
        by_b.len() <= 2 + RATE as usize,
        "gateway b let in {} with a budget of 2",
        by_b.len()
    );
    assert!(by_b.iter().all(|i| drained.contains(i)));

    // A newcomer gets nothing while the store is away: no place to drain by.
    let mut newcomer = Jar::new();
    get(&a, &mut newcomer).await;
    let reply = get(&a, &mut newcomer).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{reply:?}");
}
