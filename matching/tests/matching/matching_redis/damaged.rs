//! Numbers damaged in Redis (`inf`, `nan`, `2.5`...), read as missing and repaired.

use std::time::Duration;

use tower_waiting_room::testing::ManualClock;
use tower_waiting_room_matching::store::MatchStore;
use tower_waiting_room_matching::MatchState;

use super::{
    joined, matched, names, policy, queue, queue_key, store, user, users_key, Backend, Raw,
    START_MS,
};

/// Every number the script reads back damaged, one form at a time (`inf`, `nan`, `2.5`, `0x10`,
/// 20 digits...): the last sequence number and group number (`meta`), a waiter's record, a
/// group's expiry. The script reads each as missing and repairs it: no newcomer goes ahead of
/// the line, no group number is handed out twice (so nobody is in two groups), a waiter keeps
/// their place, and every call answers.
pub(super) async fn damaged_numbers_are_read_as_missing_and_repaired(backend: Backend) {
    // The forms of `testing::conformance::BadNumber`.
    for t in [
        "inf",
        "-inf",
        "nan",
        "1e999",
        "2.5",
        "-1",
        "0x10",
        "",
        "99999999999999999999",
    ] {
        let what = format!("{t:?}");
        let clock = ManualClock::new(START_MS);
        let (store, prefix) = store(backend, &clock).await;
        let mut raw = Raw::open(backend).await;
        let p = policy().fallback_after(Duration::from_secs(3600));
        let q = queue("damage", 3);
        let hset = |key: String, field: &str, value: &str| {
            redis::cmd("HSET").arg(key).arg(field).arg(value).clone()
        };
        // The last sequence number: a newcomer still joins behind the two waiting.
        store.join(&p, user("ann"), q.clone()).await.unwrap();
        store.join(&p, user("bob"), q.clone()).await.unwrap();
        let _: i64 = raw
            .query(&hset(queue_key(&prefix, &q, "meta"), "seq", t))
            .await;
        let g = matched(joined(
            store.join(&p, user("cat"), q.clone()).await.unwrap(),
        ));
        assert_eq!(
            (g.id.number, names(&g)),
            (1, vec!["ann", "bob", "cat"]),
            "{what}"
        );
        // The last group number: the next group gets a new one, never group 1's again.
        let _: i64 = raw
            .query(&hset(queue_key(&prefix, &q, "meta"), "formed", t))
            .await;
        for name in ["dan", "eve"] {
            store.join(&p, user(name), q.clone()).await.unwrap();
        }
        let g = matched(joined(
            store.join(&p, user("fay"), q.clone()).await.unwrap(),
        ));
        assert_eq!(
            (g.id.number, names(&g)),
            (2, vec!["dan", "eve", "fay"]),
            "{what}"
        );
        let first = matched(store.status(&p, user("ann")).await.unwrap());
        assert_eq!(
            (first.id.number, names(&first)),
            (1, vec!["ann", "bob", "cat"]),
            "{what}"
        );
        // A group's expiry: read from its pending entry.
        let groups = queue_key(&prefix, &q, "groups");
        let record: String = raw.query(redis::cmd("HGET").arg(&groups).arg("1")).await;
        let (_, rest) = record.split_once('\n').unwrap();
        let _: i64 = raw
            .query(&hset(groups.clone(), "1", &format!("{}\n{rest}", t)))
            .await;
        let g = matched(store.status(&p, user("bob")).await.unwrap());
        assert_eq!(g.expires_in, Duration::from_secs(20), "{what}");
        // A waiter's record: its numbers damaged; the place in line is kept.
        store.join(&p, user("gus"), q.clone()).await.unwrap();
        store.join(&p, user("hal"), q.clone()).await.unwrap();
        let users = users_key(&prefix, &q);
        let record: String = raw.query(redis::cmd("HGET").arg(&users).arg("gus")).await;
        let claim = record.rsplit('\n').next().unwrap().to_owned();
        let _: i64 = raw
            .query(&hset(
                users.clone(),
                "gus",
                &format!("w\n{t}\n{t}\n{t}\n{claim}"),
            ))
            .await;
        let MatchState::Waiting(w) = store.status(&p, user("gus")).await.unwrap() else {
            panic!("{what}: gus waits")
        };
        assert_eq!(
            (w.position, w.waiting),
            (1, 2),
            "{what}: gus kept his place"
        );
        assert_eq!(w.expires_in, Duration::from_secs(60), "{what}");
        let g = matched(joined(
            store.join(&p, user("ivy"), q.clone()).await.unwrap(),
        ));
        assert_eq!(
            (g.id.number, names(&g)),
            (3, vec!["gus", "hal", "ivy"]),
            "{what}"
        );
        assert_eq!(store.tick(&p, q.clone()).await.unwrap(), 0, "{what}");
    }
}
