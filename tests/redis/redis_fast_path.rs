//! The room function's fast path (`script/fast_path.lua`) answers an enter (or a
//! join: the enter of a visitor whose cookie has no place) exactly as the function's main path
//! would. Proof by difference, against a real
//! `redis-server`: one seeded run of every store operation (newcomers, waiters' enters, claims,
//! polls, heartbeats, releases, syncs, pauses, bans, admissions by hand, a full line, expiries,
//! silent waiters skipped, closes and capacity changes, liveness bitmaps lost, time going by) is
//! made on two stores sharing one clock, for a room without a schedule and for one that opens
//! and closes during the run. Store A runs as shipped; store B's fast-path window is deleted
//! before each of its calls, so main answers every one. Every answer must be the same, and so
//! must every key at the end (the line, the slots, the sequence, the liveness bitmaps and their
//! lifetimes, the settings; all but the window's own key). A `MONITOR` on A counts how many of its enters the
//! fast path answered, so the run proves it was exercised.

use crate::redis_harness;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use redis::AsyncCommands;
use redis_harness::Server;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tower_waiting_room::__private::redis_keys;
use tower_waiting_room::clock::Clock;
use tower_waiting_room::config::EventSchedule;
use tower_waiting_room::store::{RedisStore, SettingsChange, SnapshotStore, Store};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{RoomPolicy, SessionId};

const START_MS: u64 = 1_800_000_000_000;

/// A small deterministic generator (xorshift64*): the run is the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        if v.is_empty() {
            None
        } else {
            Some(&v[self.below(v.len() as u64) as usize])
        }
    }
}

/// The same call on both stores (`both!(a, b, enter(&policy, s))`), each answer as text.
macro_rules! both {
    ($a:expr, $b:expr, $($call:tt)+) => {
        (
            format!("{:?}", $a.$($call)+.await),
            format!("{:?}", $b.$($call)+.await),
        )
    };
}

/// An enter (or, with `by_join`, a join) on both stores; a session it admits on A goes into
/// `admitted`.
macro_rules! enter_both {
    ($a:expr, $b:expr, $policy:expr, $s:expr, by_join: $join:expr, $admitted:expr) => {{
        let answers = if $join {
            both!($a, $b, join(&$policy, $s))
        } else {
            both!($a, $b, enter(&$policy, $s))
        };
        if answers.0.starts_with("Ok(Admitted") {
            $admitted.push($s);
        }
        answers
    }};
}

/// The lines MONITOR prints (one `+<line>` per command, the room function's own included) that
/// `keep` keeps, gathered from now on over a plain connection.
async fn monitor(
    server: &Server,
    keep: impl Fn(&str) -> bool + Send + 'static,
) -> Arc<Mutex<Vec<String>>> {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut monitor = tokio::net::TcpStream::connect(("127.0.0.1", server.port))
        .await
        .unwrap();
    monitor.write_all(b"MONITOR\r\n").await.unwrap();
    let mut monitor = BufReader::new(monitor).lines();
    assert_eq!(monitor.next_line().await.unwrap().as_deref(), Some("+OK"));
    let lines = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok(Some(line)) = monitor.next_line().await {
            if keep(&line) || line.contains(MARK) {
                lines.lock().unwrap().push(line);
            }
        }
    });
    seen
}

/// The marker [`drained`] sends, which every [`monitor`] keeps.
const MARK: &str = "twr-monitor-drained";

/// The lines `seen` holds once MONITOR has printed every command run before this call: it sends
/// a marker and waits for MONITOR to print it, which it does after every command the server ran
/// before it. The marker's own line is left out.
async fn drained(
    c: &mut redis::aio::MultiplexedConnection,
    seen: &Arc<Mutex<Vec<String>>>,
) -> Vec<String> {
    let _: String = redis::cmd("ECHO").arg(MARK).query_async(c).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        {
            let lines = seen.lock().unwrap();
            if lines.iter().any(|l| l.contains(MARK)) {
                return lines
                    .iter()
                    .filter(|l| !l.contains(MARK))
                    .cloned()
                    .collect();
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "MONITOR never printed the marker"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn store(server: &Server, clock: &ManualClock, prefix: &str) -> RedisStore {
    RedisStore::builder()
        .url(server.url())
        .prefix(prefix)
        .timeout(Duration::from_secs(5))
        .manual_clock(clock.clone())
        .build()
        .expect("store builds")
}

/// Everything the two rooms hold, key by key (by the key's own name, without the prefix), as
/// comparable text: zsets with their scores, strings as bytes, hashes; not the fast path's
/// window (`fast`), which only A keeps.
async fn contents(
    c: &mut redis::aio::MultiplexedConnection,
    keys: &[String],
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for k in keys {
        let name = k.rsplit(':').next().unwrap().to_owned();
        if name == "fast" {
            continue;
        }
        let kind: String = redis::cmd("TYPE").arg(k).query_async(c).await.unwrap();
        let text = match kind.as_str() {
            "zset" => {
                let v: Vec<(Vec<u8>, f64)> = c.zrange_withscores(k, 0, -1).await.unwrap();
                format!("{v:?}")
            }
            "string" => {
                let v: Vec<u8> = c.get(k).await.unwrap();
                format!("{v:?}")
            }
            "hash" => {
                let v: BTreeMap<String, String> = c.hgetall(k).await.unwrap();
                format!("{v:?}")
            }
            "none" => "none".to_owned(),
            other => panic!("{k} is a {other}"),
        };
        out.insert(name.clone(), text);
        // The key's lifetime (see `same_lifetimes`).
        let pttl: i64 = c.pttl(k).await.unwrap();
        out.insert(format!("{name} ttl"), pttl.to_string());
    }
    out
}

/// Both rooms' keys were given their lifetimes from the same clock, but a few milliseconds
/// apart in real time, and are read a few milliseconds apart: the same lifetime is two
/// remaining times within `LIFETIME_SLACK_MS` of each other (none, -1, is none on both sides).
/// A lifetime off by an epoch (a second here) is far outside it.
fn same_lifetimes(a: &str, b: &str) -> bool {
    let (a, b): (i64, i64) = (a.parse().unwrap(), b.parse().unwrap());
    if a < 0 || b < 0 {
        return a == b;
    }
    (a - b).abs() <= LIFETIME_SLACK_MS
}

const LIFETIME_SLACK_MS: i64 = 250;

/// Small numbers, so that every path is taken many times: a full line, slots that expire,
/// waiters silent past their turn, epochs (queue_ttl / 4 = 1 s) that turn over.
fn policy(room: &str) -> RoomPolicy {
    RoomPolicy::new(room, 3)
        .with_ttls(
            Duration::from_millis(5_000),
            Duration::from_millis(2_000),
            Duration::from_millis(4_000),
        )
        .with_max_queue_len(25)
}

/// A room of 3 slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fast_path_answers_every_enter_as_main_does() {
    // 8 %: about 90 of the 920 enters it may answer (holders' enters, a twentieth of the steps,
    // are main's and not counted; every one before the first slot is taken is main's too).
    run(policy("diff"), 0x5EED_1234_ABCD_0001, 8).await;
}

/// A room of 20 slots, more than a window names: the fast path looks the caller's slot up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fast_path_answers_as_main_does_in_a_larger_room() {
    let mut p = policy("difflarge");
    p.capacity = 20;
    // Twenty slots take longer to fill and to turn over: fewer enters find the room full.
    run(p.with_max_queue_len(60), 0x5EED_1234_ABCD_0003, 5).await;
}

/// A room with a schedule sends it on every call: before the opening main answers (the
/// pre-queue), after it the fast path may, and after the closing newcomers are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fast_path_answers_as_main_does_in_a_scheduled_room() {
    let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(START_MS + ms);
    let schedule = EventSchedule::new(at(8_000), [9u8; 32]).with_closes_at(Some(at(70_000)));
    run(
        policy("diffsched").with_schedule(Some(schedule)),
        0x5EED_1234_ABCD_0002,
        // Main answers everyone before the opening and every newcomer after the closing.
        4,
    )
    .await;
}

/// The seeded run on two stores (see the file's header); at least `min_percent` of the enters
/// must have been answered by the fast path.
async fn run(policy: RoomPolicy, seed: u64, min_percent: u64) {
    let server = Server::start(&[]);
    let clock = ManualClock::new(START_MS);
    let a = store(&server, &clock, "fast");
    let b = store(&server, &clock, "main");
    let keys_a = redis_keys(&a, &policy.room);
    let keys_b = redis_keys(&b, &policy.room);
    let settings_a = keys_a.iter().find(|k| k.ends_with(":settings")).unwrap();
    let fast_a = keys_a.iter().find(|k| k.ends_with(":fast")).unwrap();
    let fast_b = keys_b
        .iter()
        .find(|k| k.ends_with(":fast"))
        .unwrap()
        .clone();
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();

    // Every HMGET of A's settings key and every GET of its window.
    let settings_name = settings_a.clone();
    let window_read = format!("\"GET\" \"{fast_a}\"");
    let seen = monitor(&server, move |line| {
        (line.contains(&settings_name) && line.contains("\"HMGET\"")) || line.contains(&window_read)
    })
    .await;

    let mut rng = Rng(seed);
    let mut sessions: Vec<SessionId> = Vec::new();
    // The last sessions an enter admitted: most of them still hold their slot, and their enters
    // must not be taken for a newcomer's (the fast path looks their slot up).
    let mut admitted: Vec<SessionId> = Vec::new();
    let mut enters = 0u64;
    let mut calls_on_a = 0u64;
    for step in 0..1_500 {
        let roll = rng.below(100);
        let rng_copy = rng.next();
        // The window of B is gone before each of its calls: main answers all of them.
        let _: u64 = c.del(&fast_b).await.unwrap();
        let (da, db) = match roll {
            0..=39 => {
                let s = SessionId::random();
                sessions.push(s);
                enters += 1;
                // Mostly by join (a cookie without a place); every third by enter (a cookie
                // that lost it): the same answers.
                let by_join = !roll.is_multiple_of(3);
                enter_both!(a, b, policy, s, by_join: by_join, admitted)
            }
            40..=59 => {
                // A holder's enter is main's (a claim or an extension): not counted among the
                // enters the fast path may answer.
                let holder = roll >= 54 && !admitted.is_empty();
                let from = if holder {
                    &admitted[admitted.len().saturating_sub(5)..]
                } else {
                    &sessions[..]
                };
                let Some(&s) = rng.pick(from) else {
                    continue;
                };
                enters += u64::from(!holder);
                // Mostly by enter (their cookie has the place); some by join (a reply lost, or
                // another gateway's cookie): the same answers.
                let by_join = roll.is_multiple_of(4);
                enter_both!(a, b, policy, s, by_join: by_join, admitted)
            }
            60..=67 => {
                let Some(&s) = rng.pick(&sessions) else {
                    continue;
                };
                both!(a, b, poll(&policy, s))
            }
            68..=71 => {
                let Some(&s) = rng.pick(&sessions) else {
                    continue;
                };
                both!(a, b, heartbeat(&policy, s))
            }
            72..=76 => {
                let Some(&s) = rng.pick(&sessions) else {
                    continue;
                };
                both!(a, b, release(&policy, s))
            }
            77..=80 => {
                // A gateway's sync, with some of the sessions it answered.
                let seen: Vec<SessionId> = (0..rng.below(6))
                    .filter_map(|_| rng.pick(&sessions).copied())
                    .collect();
                both!(a, b, sync(&policy, seen.clone().into()))
            }
            81..=82 => {
                let paused = rng.below(2) == 0;
                let change = || SettingsChange::new().paused(paused);
                both!(a, b, configure(&policy, change()))
            }
            83 => {
                let Some(&s) = rng.pick(&sessions) else {
                    continue;
                };
                let until = clock.now_ms() + rng.below(3_000);
                both!(a, b, ban(&policy, s, until))
            }
            84 => both!(a, b, admit_next(&policy, 1)),
            85 => {
                // A close (ending no slots) or a reopening, or another capacity.
                let change = || match rng_copy % 3 {
                    0 => SettingsChange::new().open(false),
                    1 => SettingsChange::new().open(true),
                    _ => {
                        SettingsChange::new().capacity(policy.capacity - 2 + (rng_copy % 5) as u32)
                    }
                };
                both!(a, b, configure(&policy, change()))
            }
            89 => {
                // The sequence lost in both rooms (evicted, deleted): the next newcomer's number
                // is made anew and must still go after the line's last waiter, on either path.
                for keys in [&keys_a, &keys_b] {
                    let seq = keys.iter().find(|k| k.ends_with(":seq")).unwrap();
                    let _: u64 = c.del(seq).await.unwrap();
                }
                let s = SessionId::random();
                sessions.push(s);
                enters += 1;
                both!(a, b, join(&policy, s))
            }
            86..=88 => {
                // The current liveness bitmap of one ring lost (evicted, deleted) in both rooms
                // between two newcomers: the first opens the fast path's window if main answers
                // it, the second then writes into the lost key (the sentinel tells).
                let first = SessionId::random();
                let (fa, fb) = (a.join(&policy, first).await, b.join(&policy, first).await);
                assert_eq!(format!("{fa:?}"), format!("{fb:?}"), "step {step}");
                sessions.push(first);
                let now = clock.now_ms();
                let turn_width = policy.queue_ttl_ms / 4;
                let abandon_width = policy.effective_abandon_after_ms() / 2;
                // Mostly the turn ring: the abandon ring's epoch (15 minutes) outlasts the run,
                // so after its first loss it is only ever lost again.
                let i = if rng.below(4) != 0 {
                    9 + (now / turn_width % 6) as usize
                } else {
                    15 + (now / abandon_width % 4) as usize
                };
                let _: u64 = c.del(&keys_a[i]).await.unwrap();
                let _: u64 = c.del(&keys_b[i]).await.unwrap();
                let s = SessionId::random();
                sessions.push(s);
                enters += 2;
                calls_on_a += 1;
                let _: u64 = c.del(&fast_b).await.unwrap();
                both!(a, b, enter(&policy, s))
            }
            _ => {
                clock.advance(Duration::from_millis(rng.below(700)));
                continue;
            }
        };
        calls_on_a += 1;
        assert_eq!(
            da, db,
            "step {step} (roll {roll}): the fast path answered otherwise"
        );
        assert!(!da.contains("Err"), "step {step}: {da}");
    }

    let (ca, cb) = (
        contents(&mut c, &keys_a).await,
        contents(&mut c, &keys_b).await,
    );
    for (name, a_side) in &ca {
        let b_side = &cb[name];
        // A bitmap is 8 KiB: shown shortened when it differs.
        let short = |v: &str| v.chars().take(300).collect::<String>();
        let same = if name.ends_with(" ttl") {
            same_lifetimes(a_side, b_side)
        } else {
            a_side == b_side
        };
        assert!(
            same,
            "{name} differs: fast path's room {} / main's {}",
            short(a_side),
            short(b_side)
        );
    }

    // Once MONITOR has printed every call, count: each call on A reads the settings once in
    // main (`... "noted" ...`) unless the fast path answered it; the fast path reads the window
    // first (`"GET" "<prefix>:{room}:fast"`).
    let lines = drained(&mut c, &seen).await;
    let mains = lines.iter().filter(|l| l.contains("\"noted\"")).count() as u64;
    let fast_tries = lines.iter().filter(|l| l.contains("\"GET\"")).count() as u64;
    let fast_answers = calls_on_a - mains;
    eprintln!(
        "{calls_on_a} calls on A, {enters} enters: {fast_tries} tried the fast path, {fast_answers} answered by it"
    );
    assert!(fast_tries >= enters, "every enter tries the fast path");
    assert!(
        fast_answers >= 50 && fast_answers * 100 >= enters * min_percent,
        "the fast path answered {fast_answers} of {enters} enters: the run did not exercise it"
    );
    // Waiting polls etc. are main's: only enters can be answered by the fast path.
    assert!(fast_answers <= enters);
    // And the sale went on: the line moved and people were let in and skipped.
    let b_side = contents(&mut c, &keys_b).await;
    assert_ne!(b_side["admitted"], "none", "nobody was ever admitted");
}

/// With the server's clock (no injected one: every gateway's case), a newcomer's `join` through
/// the fast path reads no clock at all: the window's end is its key's expiry, which Redis
/// judges by the same clock `TIME` reads. A waiter's enter does read it (their check-in goes
/// into the current epoch's bitmaps). Seen with `MONITOR`, call by call; and the window's key
/// ends within the second main opened it in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_servers_clock_a_newcomer_joins_without_reading_it() {
    let server = Server::start(&[]);
    let store = RedisStore::builder()
        .url(server.url())
        .prefix("srv")
        .timeout(Duration::from_secs(5))
        .build()
        .expect("store builds");
    let policy = RoomPolicy::new("servertime", 1).with_max_queue_len(1_000);
    let keys = redis_keys(&store, &policy.room);
    let window = keys.iter().find(|k| k.ends_with(":fast")).unwrap().clone();
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    assert!(store.enter(&policy, SessionId::random()).await.is_ok());

    let seen = monitor(&server, |_| true).await;

    let mut waiters = Vec::new();
    for _ in 0..40 {
        let s = SessionId::random();
        let d = format!("{:?}", store.join(&policy, s).await.unwrap());
        assert!(d.starts_with("Waiting"), "{d}");
        waiters.push(s);
    }
    for &s in &waiters[..10] {
        let d = format!("{:?}", store.enter(&policy, s).await.unwrap());
        assert!(d.starts_with("Waiting"), "{d}");
    }
    // The window lasts to the end of the second main opened it in: read it and its TTL in one
    // round trip right after an enter (which keeps it, or has main open it again in a second
    // whose arrival is noted), and again if the second turned in between. Under the whole suite's load (and MONITOR) a round trip
    // can take long enough for many seconds to turn in a row: tries for up to 30 s.
    let mut tries = 0;
    let started = std::time::Instant::now();
    let (value, pttl) = loop {
        let d = format!("{:?}", store.enter(&policy, waiters[0]).await.unwrap());
        assert!(d.starts_with("Waiting"), "{d}");
        let (value, pttl): (Vec<u8>, i64) = redis::pipe()
            .atomic()
            .get(&window)
            .pttl(&window)
            .query_async(&mut c)
            .await
            .unwrap();
        if !value.is_empty() {
            break (value, pttl);
        }
        // Main opens the window only in a second whose first arrival it noted: once the
        // second of the last join has turned, only a newcomer's join (main's, with no window
        // open: never a fast one) lets the next enter find it.
        let d = format!(
            "{:?}",
            store.join(&policy, SessionId::random()).await.unwrap()
        );
        assert!(d.starts_with("Waiting"), "{d}");
        tries += 1;
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no window read within its second in {tries} tries"
        );
    };
    // Text only: no slot holders' ids after it, however small the room.
    assert!(
        !value.contains(&0),
        "the window names no holders: {value:?}"
    );
    let held = String::from_utf8(value.clone()).unwrap();
    let parts: Vec<u64> = held
        .split(':')
        .take(3)
        .map(|n| n.parse().unwrap())
        .collect();
    let (from, till) = (parts[1], parts[2]);
    assert!(
        from < till && till <= (from / 1_000 + 1) * 1_000,
        "the window ends with the second it was opened in: {held}"
    );
    // 0 is a TTL in its last millisecond (read in the same transaction as the value, so the
    // key was there); -1, no TTL, fails.
    assert!((0..1_000).contains(&pttl), "ends by its TTL: {pttl} ms");

    let lines = drained(&mut c, &seen).await;
    // Each call's commands: from its FCALL to the next one.
    let mut calls: Vec<Vec<&str>> = Vec::new();
    for l in &lines {
        if l.contains("\"FCALL\"") {
            calls.push(vec![l]);
        } else if let Some(call) = calls.last_mut() {
            call.push(l);
        }
    }
    let fast = |call: &Vec<&str>| {
        call.get(1).is_some_and(|l| l.contains("\"GET\""))
            && !call.iter().any(|l| l.contains("\"HMGET\""))
    };
    let (newcomers, returners) = calls.split_at(40);
    let fast_joins: Vec<_> = newcomers.iter().filter(|c| fast(c)).collect();
    assert!(
        fast_joins.len() >= 20,
        "{} of 40 joins answered by the fast path",
        fast_joins.len()
    );
    for call in &fast_joins {
        assert!(
            !call.iter().any(|l| l.contains("\"TIME\"")),
            "a fast join read the clock: {call:#?}"
        );
        assert!(call
            .iter()
            .any(|l| l.contains("\"ZADD\"") && l.contains("\"NX\"")));
    }
    let fast_returns: Vec<_> = returners.iter().filter(|c| fast(c)).collect();
    assert!(!fast_returns.is_empty(), "no waiter's enter was fast");
    for call in &fast_returns {
        assert!(
            call.iter().any(|l| l.contains("\"TIME\"")),
            "a waiter's check-in without the time: {call:#?}"
        );
        assert!(call.iter().any(|l| l.contains("\"BITFIELD\"")));
    }
}
