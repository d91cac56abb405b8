//! Matching's library refuses what a caller may not send, as the room's does: a process whose
//! clock runs far from the server's (it would time out every waiter and undo every group), and
//! arguments a `RedisMatchStore` never sends, each refused before anything is read or written
//! (`WRCLOCK`, `WRARGS`), on a real `redis-server` started here.

use crate::redis_harness::Server;

use std::time::Duration;

use tower_waiting_room::store::{RedisStore, StoreErrorKind};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::{MatchPolicy, MatchStore, RedisMatchStore};
use tower_waiting_room_matching::{GroupSize, JoinOutcome, MatchState, Queue, Topic, UserId};

fn queue() -> Queue {
    Queue::new(Topic::new("chess").unwrap(), GroupSize::new(3).unwrap())
}

fn real_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A match store on `server` under `prefix`, on the server's clock or, with `clock`, on that
/// clock sent as a gateway's own (held to the server's by the library).
fn store(server: &Server, prefix: &str, clock: Option<ManualClock>) -> RedisMatchStore {
    let mut builder = RedisStore::builder()
        .url(server.url())
        .prefix(prefix)
        .timeout(Duration::from_secs(5));
    if let Some(clock) = clock {
        builder = builder.clock(clock);
    }
    RedisMatchStore::new(&builder.build().unwrap())
}

async fn try_query(server: &Server, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    cmd.query_async(&mut c).await
}

/// A process an hour ahead: its calls are refused, and the waiters the honest process put in
/// line are still there, in order (an hour ahead, one tick used to time every one of them out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_far_ahead_is_refused_and_the_line_kept() {
    let server = Server::start(&["--save", ""]);
    let policy = MatchPolicy::default();
    let honest = store(&server, "mr", None);
    for name in ["ann", "bob"] {
        let outcome = honest
            .join(&policy, UserId::new(name).unwrap(), queue())
            .await
            .unwrap();
        assert!(
            matches!(outcome, JoinOutcome::Joined(MatchState::Waiting(_))),
            "{outcome:?}"
        );
    }
    for ahead_ms in [3_600_000, 365 * 86_400_000] {
        let ahead = store(&server, "mr", Some(ManualClock::new(real_now() + ahead_ms)));
        let e = ahead.tick(&policy, queue()).await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Protocol, "{e}");
        assert!(e.to_string().contains("WRCLOCK"), "{e}");
        let e = ahead
            .join(&policy, UserId::new("cat").unwrap(), queue())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("WRCLOCK"), "{e}");
        let e = ahead
            .status(&policy, UserId::new("ann").unwrap())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("WRCLOCK"), "{e}");
    }
    for (i, name) in ["ann", "bob"].into_iter().enumerate() {
        match honest
            .status(&policy, UserId::new(name).unwrap())
            .await
            .unwrap()
        {
            MatchState::Waiting(w) => {
                assert_eq!((w.position, w.waiting), (i as u64 + 1, 2), "{name}")
            }
            other => panic!("{name} lost their place: {other:?}"),
        }
    }
    // A clock within the tolerance is taken.
    let near = store(&server, "mr", Some(ManualClock::new(real_now())));
    assert!(near.tick(&policy, queue()).await.is_ok());
}

/// Calls by hand with arguments the crate never sends: each is refused before anything runs
/// (a `max_work` of `inf` or a size of 100 had no bound; a user id with a newline would split
/// its record; a claim's queue with `|` would split the claim), and the queue is as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_the_crate_never_sends_are_refused() {
    let server = Server::start(&["--save", ""]);
    let policy = MatchPolicy::default();
    let honest = store(&server, "mr", None);
    honest
        .join(&policy, UserId::new("ann").unwrap(), queue())
        .await
        .unwrap();
    let q = queue().key();
    let keys: Vec<String> = "meta line expiry users groups pending confirmed used"
        .split(' ')
        .map(|k| format!("{{mr:m:{q}}}:{k}"))
        .collect();
    let good = [
        "0", "3", "60000", "300000", "30000", "600000", "100", "10000", "60000",
    ];
    let call = |function: &str, call_args: &[&str], own: &[&str]| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(format!("twr_match_v1_{function}")).arg(keys.len());
        for k in &keys {
            cmd.arg(k);
        }
        cmd.arg(call_args).arg(own);
        cmd
    };
    let server = &server;
    let refused = |what: String, code: &'static str, cmd: redis::Cmd| async move {
        let e = try_query(server, &cmd).await.expect_err(&what);
        assert_eq!(e.code(), Some(code), "{what}: {e}");
    };
    let far = (real_now() + 3_600_000).to_string();
    for (i, bad, code) in [
        (0, far.as_str(), "WRCLOCK"),
        (0, "inf", "WRCLOCK"),
        (0, "m1e3", "WRCLOCK"),
        (1, "100", "WRARGS"),
        (1, "1", "WRARGS"),
        (3, "inf", "WRARGS"),
        (3, "2.5", "WRARGS"),
        (4, "-1", "WRARGS"),
        (6, "inf", "WRARGS"),
        (6, "0", "WRARGS"),
        (6, "1e9", "WRARGS"),
        (8, "01", "WRARGS"),
    ] {
        let mut args = good;
        args[i] = bad;
        refused(
            format!("tick with ARGV {} = {bad}", i + 1),
            code,
            call("tick", &args, &[]),
        )
        .await;
    }
    for user in ["", "a\nb", &"x".repeat(129)] {
        refused(
            format!("enter of user {user:?}"),
            "WRARGS",
            call("enter", &good, &[user, "claim"]),
        )
        .await;
    }
    refused(
        "confirm of group inf".to_owned(),
        "WRARGS",
        call("confirm", &good, &["inf", "app"]),
    )
    .await;
    refused(
        "confirm by app a\\nb".to_owned(),
        "WRARGS",
        call("confirm", &good, &["1", "a\nb"]),
    )
    .await;
    // The pointer's functions: a TTL, a nonce or a queue the crate never sends.
    let pointer = "{mr:mu:616e6e}";
    for (what, args) in [
        ("a TTL of inf", vec!["0", "", &q, "00ff00ff00ff00ff", "inf"]),
        ("a short nonce", vec!["0", "", &q, "00ff", "60000"]),
        (
            "a queue with a bar",
            vec!["0", "", "63|6865.3", "00ff00ff00ff00ff", "60000"],
        ),
        (
            "a clock ahead",
            vec![&far, "", &q, "00ff00ff00ff00ff", "60000"],
        ),
    ] {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg("twr_match_v1_claim").arg(1).arg(pointer).arg(args);
        let code = if what == "a clock ahead" {
            "WRCLOCK"
        } else {
            "WRARGS"
        };
        refused(format!("claim with {what}"), code, cmd).await;
    }
    for (function, args) in [("read", vec!["inf"]), ("touch", vec!["x", "-5"])] {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(format!("twr_match_v1_{function}"))
            .arg(1)
            .arg(pointer)
            .arg(args);
        refused(format!("{function} with a bad TTL"), "WRARGS", cmd).await;
    }
    // Nothing moved: ann waits, alone, and her pointer is hers.
    match honest
        .status(&policy, UserId::new("ann").unwrap())
        .await
        .unwrap()
    {
        MatchState::Waiting(w) => assert_eq!((w.position, w.waiting), (1, 1)),
        other => panic!("ann: {other:?}"),
    }
}
