//! The script before matching's library (one `EVALSHA` script) and the library sharing a queue,
//! as gateways do during a rolling upgrade.

use std::time::Duration;

use tower_waiting_room::clock::Clock;
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::MatchStore;
use tower_waiting_room_matching::{AppGroupId, ConfirmOutcome, MatchState};

use super::{
    joined, matched, names, pointer_key, policy, queue, queue_key, store, user, Backend, Raw,
    START_MS,
};

/// The script before matching's library: one `EVALSHA` script whose first argument names the
/// operation, kept as it shipped in `matching/tests/fixtures/matching_evalsha.lua` (commit `c28b560`),
/// sent after a `#!lua` line and the crate's reader of stored numbers, as its store sent it.
const EVALSHA_SCRIPT: &str = concat!(
    "#!lua\n",
    include_str!("../../../../src/store/redis/script/stored.lua"),
    include_str!("../../fixtures/matching_evalsha.lua")
);

/// A call of the script before the library, as a gateway still running it makes one.
async fn evalsha_call(raw: &mut Raw, keys: &[String], args: &[&str]) -> Vec<redis::Value> {
    let mut script = redis::cmd("EVAL");
    script
        .arg(EVALSHA_SCRIPT)
        .arg(keys.len())
        .arg(keys)
        .arg(args);
    raw.query(&script).await
}

/// The arguments every queue call of the script before the library took after its operation:
/// `now`, the queue's size, `policy()`'s timings, the work bound, the claim's grace and memory.
fn evalsha_queue_args(now: u64, size: u64) -> Vec<String> {
    [
        now, size, 10_000, 60_000, 20_000, 30_000, 100, 10_000, 60_000,
    ]
    .map(|n| n.to_string())
    .to_vec()
}

fn value(s: &str) -> redis::Value {
    redis::Value::BulkString(s.as_bytes().to_vec())
}

/// The library kept the keys, the values and the replies of the script before it: a gateway
/// still running that script (a rolling upgrade) and one running the library share a queue,
/// each finding the other's claims, waiters and groups, and answering the same.
pub(super) async fn the_script_before_the_library_shares_a_queue(backend: Backend) {
    let clock = ManualClock::new(START_MS);
    let (store, prefix) = store(backend, &clock).await;
    let mut raw = Raw::open(backend).await;
    let (p, q) = (policy(), queue("chess", 2));
    // The queue's keys in the order of the script's header.
    let queue_keys: Vec<String> = "meta line expiry users groups pending confirmed used"
        .split(' ')
        .map(|k| queue_key(&prefix, &q, k))
        .collect();
    let now = clock.now_ms().to_string();
    let ttl = (2 * (60_000 + 20_000) + 30_000 + 3_600_000u64).to_string();
    // The old gateway joins ann: its claim, then its queue's enter.
    let ann_pointer = vec![pointer_key(&prefix, "ann")];
    let reply = evalsha_call(
        &mut raw,
        &ann_pointer,
        &["claim", &now, "", &q.key(), "00ff00ff00ff00ff", &ttl],
    )
    .await;
    let claim = format!("{}|{now}|00ff00ff00ff00ff", q.key());
    assert_eq!(reply, [redis::Value::Int(1), value(&claim)]);
    let mut args = vec!["enter".to_owned()];
    args.extend(evalsha_queue_args(clock.now_ms(), 2));
    args.extend(["ann".to_owned(), claim.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(
        evalsha_call(&mut raw, &queue_keys, &args).await,
        [3, 0]
            .map(redis::Value::Int)
            .into_iter()
            .chain([
                value("w"),
                redis::Value::Int(1),
                redis::Value::Int(1),
                redis::Value::Int(0),
                redis::Value::Int(60_000),
            ])
            .collect::<Vec<_>>(),
        "joined, waiting first of one"
    );
    // The library finds her waiting under that claim, and pairs bob with her.
    clock.advance(Duration::from_secs(2));
    let MatchState::Waiting(w) = store.status(&p, user("ann")).await.unwrap() else {
        panic!("ann waits")
    };
    assert_eq!(
        (w.position, w.waiting, w.waited),
        (1, 1, Duration::from_secs(2))
    );
    let g = matched(joined(
        store.join(&p, user("bob"), q.clone()).await.unwrap(),
    ));
    assert_eq!((g.id.number, names(&g)), (1, vec!["ann", "bob"]));
    // The old gateway reads bob's claim and finds him in the group; then confirms it.
    let bob_pointer = vec![pointer_key(&prefix, "bob")];
    let reply = evalsha_call(&mut raw, &bob_pointer, &["read", "0", &ttl]).await;
    let [redis::Value::Int(1), redis::Value::BulkString(bob_claim)] = reply.as_slice() else {
        panic!("bob's claim: {reply:?}")
    };
    let bob_claim = String::from_utf8(bob_claim.clone()).unwrap();
    assert!(
        bob_claim.starts_with(&format!("{}|", q.key())),
        "{bob_claim}"
    );
    let group = |code: i64, app: &str| -> Vec<redis::Value> {
        vec![
            redis::Value::Int(code),
            redis::Value::Int(0),
            value("m"),
            redis::Value::Int(1),
            redis::Value::Int(20_000),
            value(app),
            value("ann"),
            value("bob"),
        ]
    };
    let mut args = vec!["enter".to_owned()];
    args.extend(evalsha_queue_args(clock.now_ms(), 2));
    args.extend(["bob".to_owned(), bob_claim]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(
        evalsha_call(&mut raw, &queue_keys, &args).await,
        group(1, ""),
        "present under this claim, in the group"
    );
    let mut args = vec!["confirm".to_owned()];
    args.extend(evalsha_queue_args(clock.now_ms(), 2));
    args.extend(["1".to_owned(), "conv-1".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut confirmed = group(6, "conv-1");
    confirmed[4] = redis::Value::Int(30_000);
    assert_eq!(evalsha_call(&mut raw, &queue_keys, &args).await, confirmed);
    // The library sees the confirmation, and answers a retry as the script would.
    let g = matched(store.status(&p, user("ann")).await.unwrap());
    assert_eq!(g.confirmed.as_ref().map(AppGroupId::as_str), Some("conv-1"));
    assert_eq!(
        store
            .confirm(&p, g.id.clone(), AppGroupId::new("conv-1").unwrap())
            .await
            .unwrap(),
        ConfirmOutcome::Confirmed(g)
    );
}
