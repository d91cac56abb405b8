//! Matching's proofs, with real parts: two gateway processes (this test binary, started again
//! as a child running `gateway_process`) serve matching over real HTTP on one real
//! `redis-server`; this process plays the users and the application that confirms groups.
//!
//! - 3 000 users join random topics and sizes at once, some leave, all poll: nobody in two
//!   groups, every group of its size or the fallback, groups in join order within a queue, no
//!   waiting user left behind when enough others wait, timeouts on time.
//! - The crash path: the gateway that would confirm a group is killed between formation and
//!   confirmation; after `confirm_ttl` the members are back at the front, in order.

use crate::common;
use crate::redis_harness;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Http, Reply};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use tower::ServiceExt;
use tower_waiting_room::store::RedisStore;
use tower_waiting_room_matching::service::MatchingService;
use tower_waiting_room_matching::store::RedisMatchStore;
use tower_waiting_room_matching::{
    AppGroupId, ConfirmOutcome, GroupId, Matchmaker, MatchmakerBuilder,
};

const PATH: &str = "/api/matching";
/// The child's configuration: `<redis url> <fallback ms> <timeout ms> <confirm_ttl ms>
/// <auto-confirm delay ms, 0: never>`.
const GATEWAY_ENV: &str = "TWR_MATCHING_GATEWAY";

fn builder(fallback_ms: u64, timeout_ms: u64, confirm_ms: u64) -> MatchmakerBuilder {
    Matchmaker::builder()
        .fallback_after(Duration::from_millis(fallback_ms))
        .timeout(Duration::from_millis(timeout_ms))
        .confirm_ttl(Duration::from_millis(confirm_ms))
}

fn matchmaker_on(url: &str, b: MatchmakerBuilder) -> Matchmaker {
    let store = RedisStore::builder()
        .url(url)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("the store builds");
    b.build(RedisMatchStore::new(&store))
        .expect("valid timings")
}

/// Not a test: the body of a gateway process, started by the proofs as a child of this binary
/// (it returns at once when run any other way). Serves the matching API with users named by
/// `X-User`, ticks every 200 ms, and, if asked, confirms each group it answers as formed after
/// a delay, as an application that records conversations would. Exits when its parent closes
/// its stdin (the parent ended, however).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a gateway process of the matching proofs, started by them"]
async fn gateway_process() {
    let Ok(spec) = std::env::var(GATEWAY_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let ms = |i: usize| parts[i].parse::<u64>().unwrap();
    let matchmaker = matchmaker_on(parts[0], builder(ms(1), ms(2), ms(3)));
    let auto_confirm = (ms(4) > 0).then(|| Duration::from_millis(ms(4)));
    let service = MatchingService::builder(matchmaker.clone())
        .identify(|parts| Some(parts.headers.get("x-user")?.to_str().ok()?.to_owned()))
        .build()
        .unwrap();
    let _ticker = matchmaker.spawn_ticker(Duration::from_millis(200));
    let confirming = matchmaker.clone();
    let handler = move |req: axum::extract::Request| {
        let service = service.clone();
        let confirming = confirming.clone();
        async move {
            let res = service.oneshot(req).await.unwrap();
            let (parts, body) = res.into_parts();
            let bytes = body.collect().await.unwrap().to_bytes();
            if let Some(delay) = auto_confirm {
                let answer: Value = serde_json::from_slice(&bytes).unwrap_or_default();
                if answer["state"] == "matched" && answer["confirmed"] == false {
                    let id: GroupId = answer["group"].as_str().unwrap().parse().unwrap();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let app = AppGroupId::new(format!("app-{id}")).unwrap();
                        let _ = confirming.confirm(id, app).await;
                    });
                }
            }
            http::Response::from_parts(parts, axum::body::Body::from(bytes))
        }
    };
    let app = axum::Router::new().route(PATH, axum::routing::any(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("READY {}", listener.local_addr().unwrap().port());
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        std::process::exit(0);
    });
    axum::serve(listener, app).await.unwrap();
}

/// A gateway process and a client for it; killed when dropped.
struct Gateway {
    child: Child,
    http: Http,
}

impl Gateway {
    fn start(redis: &str, timings: (u64, u64, u64), auto_confirm_ms: u64) -> Gateway {
        let (fallback, timeout, confirm) = timings;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "matching_proof::gateway_process",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(
                GATEWAY_ENV,
                format!("{redis} {fallback} {timeout} {confirm} {auto_confirm_ms}"),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the gateway starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("the gateway says READY before it ends")
                .unwrap();
            if let Some(port) = line.strip_prefix("READY ") {
                break port.trim().parse::<u16>().unwrap();
            }
        };
        // Keep reading its output so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Gateway {
            child,
            http: Http::new(([127, 0, 0, 1], port).into()),
        }
    }

    /// Ends the process at once (`SIGKILL`): no cleanup, no pending confirmations.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn send(http: &Http, method: Method, user: &str, body: Option<Value>) -> Reply {
    let mut req: Request<Full<Bytes>> = http.request(
        method,
        PATH,
        &[(
            HeaderName::from_static("x-user"),
            HeaderValue::from_str(user).unwrap(),
        )],
    );
    if let Some(body) = body {
        *req.body_mut() = Full::new(Bytes::from(body.to_string()));
    }
    http.exchange(req).await.expect("the gateway answers")
}

/// A small deterministic generator (splitmix64): the draws are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one user went through.
#[derive(Clone, Debug, Default)]
struct Fate {
    left: bool,
    joined_at: Option<Instant>,
    /// The confirmed group the user was last seen in.
    group: Option<String>,
    members: Vec<String>,
    /// When the user was first seen idle after waiting (timed out).
    idle_at: Option<Instant>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_thousand_users_on_two_gateways_and_one_redis() {
    const USERS: usize = 3_000;
    const TOPICS: u64 = 10;
    // Short timings, so the whole sale fits in a test: fallback after 3 s, timeout after 8 s.
    let timings = (3_000, 8_000, 15_000);
    let server = redis_harness::Server::start(&[]);
    let gateways = [
        Gateway::start(&server.url(), timings, 0),
        Gateway::start(&server.url(), timings, 0),
    ];
    let http = [gateways[0].http.clone(), gateways[1].http.clone()];
    // The application: confirms every group it learns of, once.
    let app = matchmaker_on(&server.url(), builder(timings.0, timings.1, timings.2));

    let mut rng = Rng(16);
    let mut fates: Vec<Fate> = Vec::with_capacity(USERS);
    let mut queues: BTreeMap<(String, u64), Vec<usize>> = BTreeMap::new();
    for u in 0..USERS {
        let queue = (format!("topic-{}", rng.below(TOPICS)), 2 + rng.below(2));
        fates.push(Fate {
            left: rng.below(20) == 0,
            ..Fate::default()
        });
        queues.entry(queue).or_default().push(u);
    }
    let fates = Arc::new(Mutex::new(fates));
    let confirmed: Arc<Mutex<HashSet<String>>> = Arc::default();

    // Every queue at once; within a queue, joins one by one (so their order is known), through
    // both gateways by turns. A leaver leaves at once, before the next join of the queue.
    let started = Instant::now();
    let mut tasks = Vec::new();
    for ((topic, size), users) in queues.clone() {
        let (http, fates, app, confirmed) =
            (http.clone(), fates.clone(), app.clone(), confirmed.clone());
        tasks.push(tokio::spawn(async move {
            for (i, u) in users.into_iter().enumerate() {
                let gw = &http[i % 2];
                let name = format!("user-{u}");
                let res = send(
                    gw,
                    Method::POST,
                    &name,
                    Some(json!({"topic": topic, "size": size})),
                )
                .await;
                assert!(
                    res.status == StatusCode::ACCEPTED || res.status == StatusCode::OK,
                    "{name}: {} {}",
                    res.status,
                    res.text()
                );
                fates.lock().unwrap()[u].joined_at = Some(Instant::now());
                let answer = res.json();
                if answer["state"] == "matched" {
                    confirm(&app, &confirmed, &answer).await;
                }
                let leaves = fates.lock().unwrap()[u].left;
                if leaves && answer["state"] == "waiting" {
                    let res = send(gw, Method::DELETE, &name, None).await;
                    assert_eq!(res.json()["was"], "waiting", "{name}");
                } else if leaves {
                    fates.lock().unwrap()[u].left = false; // matched at once: stays
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let joins_took = started.elapsed();

    // Everyone polls (32 at a time, by turns on both gateways) until confirmed in a group or
    // timed out.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let open: Vec<usize> = {
            let f = fates.lock().unwrap();
            (0..USERS)
                .filter(|&u| !f[u].left && f[u].group.is_none() && f[u].idle_at.is_none())
                .collect()
        };
        if open.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{} users still open", open.len());
        let sem = Arc::new(tokio::sync::Semaphore::new(32));
        let mut polls = Vec::new();
        for u in open {
            let permit = sem.clone().acquire_owned().await.unwrap();
            let (gw, fates, app, confirmed) = (
                http[u % 2].clone(),
                fates.clone(),
                app.clone(),
                confirmed.clone(),
            );
            polls.push(tokio::spawn(async move {
                let _permit = permit;
                let res = send(&gw, Method::GET, &format!("user-{u}"), None).await;
                let answer = res.json();
                match answer["state"].as_str() {
                    Some("matched") if answer["confirmed"] == true => {
                        let mut f = fates.lock().unwrap();
                        f[u].group = Some(answer["group"].as_str().unwrap().to_owned());
                        f[u].members = answer["members"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|m| m.as_str().unwrap().to_owned())
                            .collect();
                    }
                    Some("matched") => confirm(&app, &confirmed, &answer).await,
                    Some("waiting") => {}
                    _ => {
                        assert_eq!(res.status, StatusCode::NOT_FOUND, "{}", res.text());
                        fates.lock().unwrap()[u].idle_at = Some(Instant::now());
                    }
                }
            }));
        }
        for p in polls {
            p.await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let fates = fates.lock().unwrap().clone();
    let name = |u: usize| format!("user-{u}");
    // Nobody in two groups: every group's members say that group, and each user is in one.
    let mut groups: HashMap<String, Vec<String>> = HashMap::new();
    for (u, f) in fates.iter().enumerate() {
        if let Some(g) = &f.group {
            let members = groups.entry(g.clone()).or_insert_with(|| f.members.clone());
            assert_eq!(
                *members,
                f.members,
                "{} sees group {g} as the others do",
                name(u)
            );
            assert!(
                members.contains(&name(u)),
                "{} is in its own group",
                name(u)
            );
        }
    }
    let mut seen = HashSet::new();
    for members in groups.values() {
        for m in members {
            assert!(seen.insert(m.clone()), "{m} is in two groups");
        }
    }
    let mut idle = 0;
    for ((_, size), users) in &queues {
        // The queue's users in join order, leavers out.
        let stayed: Vec<usize> = users.iter().copied().filter(|&u| !fates[u].left).collect();
        // Groups in the order they formed (their numbers), each of its size or the fallback's.
        let mut formed: Vec<(u64, Vec<String>)> = stayed
            .iter()
            .filter_map(|&u| fates[u].group.clone())
            .collect::<HashSet<_>>()
            .into_iter()
            .map(|g| {
                let number = g.rsplit('.').next().unwrap().parse::<u64>().unwrap();
                (number, groups[&g].clone())
            })
            .collect();
        formed.sort();
        for (_, members) in &formed {
            let n = members.len() as u64;
            assert!(
                n == *size || (*size == 3 && n == 2),
                "a group of {n} in a queue of {size}"
            );
        }
        // Oldest first: the groups, in order, are the queue's joiners in order.
        let grouped: Vec<String> = formed.into_iter().flat_map(|(_, m)| m).collect();
        let in_order: Vec<String> = stayed
            .iter()
            .map(|&u| name(u))
            .take(grouped.len())
            .collect();
        assert_eq!(grouped, in_order, "groups formed in join order");
        // Nobody left behind: those not grouped are the last ones, too few to form a group
        // even with the fallback, and they timed out on time.
        let behind = &stayed[grouped.len()..];
        assert!(
            behind.len() < 2,
            "{} left behind in a queue of {size}",
            behind.len()
        );
        for &u in behind {
            let f = &fates[u];
            let waited = f.idle_at.unwrap() - f.joined_at.unwrap();
            assert!(
                waited >= Duration::from_millis(timings.1) - Duration::from_millis(50)
                    && waited <= Duration::from_millis(timings.1) + Duration::from_secs(3),
                "{} timed out after {waited:?}",
                name(u)
            );
            idle += 1;
        }
    }
    let leavers = fates.iter().filter(|f| f.left).count();
    println!(
        "{USERS} users: {} groups, {leavers} left, {idle} timed out; joins took {joins_took:?}",
        groups.len()
    );
    assert!(groups.len() > 1_000, "{} groups", groups.len());
    assert!(
        leavers > 50,
        "{leavers} leavers: the leaving path was exercised"
    );
}

/// The application's confirmation of the group in a `matched` answer (once per group).
async fn confirm(app: &Matchmaker, done: &Mutex<HashSet<String>>, answer: &Value) {
    let id = answer["group"].as_str().unwrap().to_owned();
    if !done.lock().unwrap().insert(id.clone()) {
        return;
    }
    let outcome = app
        .confirm(
            id.parse().unwrap(),
            AppGroupId::new(format!("app-{id}")).unwrap(),
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, ConfirmOutcome::Confirmed(_)),
        "{id}: {outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_confirming_gateway_died_goes_back_to_the_front_in_order() {
    // Confirmation within 2 s; the confirming gateway would confirm after 1.5 s, and dies first.
    let timings = (30_000, 60_000, 2_000);
    let server = redis_harness::Server::start(&[]);
    let mut confirming = Gateway::start(&server.url(), timings, 1_500);
    let other = Gateway::start(&server.url(), timings, 0);
    let app = matchmaker_on(&server.url(), builder(timings.0, timings.1, timings.2));
    let join = |gw: &Http, user: &'static str| {
        let gw = gw.clone();
        async move {
            send(
                &gw,
                Method::POST,
                user,
                Some(json!({"topic": "crash", "size": 3})),
            )
            .await
        }
    };
    assert_eq!(join(&other.http, "u1").await.status, StatusCode::ACCEPTED);
    assert_eq!(join(&other.http, "u2").await.status, StatusCode::ACCEPTED);
    let formed = join(&confirming.http, "u3").await;
    assert_eq!(formed.status, StatusCode::OK, "{}", formed.text());
    let first = formed.json();
    assert_eq!(first["members"], json!(["u1", "u2", "u3"]));
    // Killed between formation and confirmation.
    confirming.kill();
    let behind = join(&other.http, "u4").await.json();
    assert_eq!(behind["position"], 1, "u4 waits: u1-u3 are in a group");

    // Before `confirm_ttl`: still the pending group.
    let status = send(&other.http, Method::GET, "u2", None).await.json();
    assert_eq!(status["group"], first["group"]);
    assert_eq!(status["confirmed"], false);

    tokio::time::sleep(Duration::from_millis(2_300)).await;
    // Undone: back at the front in their order (ahead of u4), and, three of them waiting
    // first, formed again at once as a new group, still pending.
    let again = send(&other.http, Method::GET, "u1", None).await.json();
    assert_eq!(again["state"], "matched", "{again}");
    assert_ne!(again["group"], first["group"], "a new group");
    assert_eq!(
        again["members"],
        json!(["u1", "u2", "u3"]),
        "in their order"
    );
    assert_eq!(again["confirmed"], false);
    let u4 = send(&other.http, Method::GET, "u4", None).await.json();
    assert_eq!(u4["state"], "waiting");
    assert_eq!(u4["position"], 1, "still behind them");
    // The dead gateway's group can no longer be confirmed; the new one can.
    let old: GroupId = first["group"].as_str().unwrap().parse().unwrap();
    let outcome = app
        .confirm(old, AppGroupId::new("late").unwrap())
        .await
        .unwrap();
    assert_eq!(outcome, ConfirmOutcome::Unknown);
    let new: GroupId = again["group"].as_str().unwrap().parse().unwrap();
    let outcome = app
        .confirm(new, AppGroupId::new("app").unwrap())
        .await
        .unwrap();
    assert!(
        matches!(outcome, ConfirmOutcome::Confirmed(_)),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_a_join_is_told_to_wait_never_a_500() {
    let mut server = redis_harness::Server::start(&[]);
    let gateway = Gateway::start(&server.url(), (3_000, 8_000, 5_000), 0);
    let ok = send(
        &gateway.http,
        Method::POST,
        "ann",
        Some(json!({"topic": "t", "size": 2})),
    )
    .await;
    assert_eq!(ok.status, StatusCode::ACCEPTED);
    server.stop();
    for method in [Method::POST, Method::GET, Method::DELETE] {
        let body = (method == Method::POST).then(|| json!({"topic": "t", "size": 2}));
        let res = send(&gateway.http, method.clone(), "bob", body).await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{method}: {}", res.text());
        let answer = res.json();
        assert_eq!(answer["state"], "waiting", "{method}");
        assert_eq!(answer["unavailable"], true, "{method}");
        assert!(
            answer.get("group").is_none(),
            "no group that does not exist"
        );
        assert!(res.retry_after() >= 1, "{method}");
    }
}
