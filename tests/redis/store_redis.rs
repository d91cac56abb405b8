//! The store conformance suite against real servers: a single Redis (or Valkey, with
//! `TWR_REDIS_SERVER` naming its binary) and a 3-node Redis Cluster, both started here.
//!
//! The damage cases (`heals_*`) damage a room with real Redis commands (`DEL`, `SET`, `HSET`,
//! `ZREM`, `ZADD`) on the room's own keys, as an eviction or an operator would.

use crate::redis_harness;
use crate::redis_store_v2::member;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use tower_waiting_room::__private::redis_keys;
use tower_waiting_room::clock::Clock;
use tower_waiting_room::store::SETTINGS_VERSION;
use tower_waiting_room::store::{RedisStore, ADMISSION_BUCKETS, ADMISSION_BUCKET_MS};
use tower_waiting_room::testing::conformance::{
    self, BadNumber, Damage, DamageFuture, Field, Part,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::RoomPolicy;

/// The script is sent the manual clock's time, so the suite can move time as it does for the
/// embedded store. (In production the script reads Redis `TIME`.)
fn harness<C>(
    store: tower_waiting_room::store::RedisStoreBuilder,
    clock: ManualClock,
    conn: C,
) -> conformance::Harness
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let store = store
        .timeout(Duration::from_secs(2))
        .manual_clock(clock.clone())
        .build()
        .expect("store builds");
    let damaged = store.clone();
    let time = clock.clone();
    conformance::Harness::new(Arc::new(store), clock).with_damage(
        move |policy: &RoomPolicy, damage: Damage| -> DamageFuture {
            let keys = redis_keys(&damaged, &policy.room);
            let now = time.now_ms();
            let mut conn = conn.clone();
            Box::pin(async move {
                for cmd in damage_commands(&keys, damage, now)? {
                    match cmd.query_async::<redis::Value>(&mut conn).await {
                        Ok(_) => {}
                        // What a sorted set's score may be differs between servers (Valkey
                        // refuses `0x10`, which Redis reads as 16; both refuse ` 7`): a refused
                        // score leaves the set as it was, so that damage cannot be done here.
                        Err(e)
                            if !e.is_io_error()
                                && matches!(
                                    damage,
                                    Damage::BadNumber(Field::SlotExpiries, _) | Damage::Place(..)
                                ) =>
                        {
                            return Err("the server refuses that score");
                        }
                        Err(e) => panic!("damage {damage:?}: {e}"),
                    }
                }
                Ok(())
            })
        },
    )
}

/// The Redis commands that do `damage` to the room whose keys are `keys` (in the script's order).
fn damage_commands(
    keys: &[String],
    damage: Damage,
    now: u64,
) -> Result<Vec<redis::Cmd>, &'static str> {
    // A part's keys by name (`{prefix}:{room}:<name>`): the check-ins (`Seen`) are the liveness
    // bitmaps of both rings since store v2, which has no `seen` zset.
    let keys_of = |part: Part| -> Vec<String> {
        let name = format!("{part:?}").to_ascii_lowercase();
        keys.iter()
            .filter(|k| {
                let tail = k.rsplit(':').next().unwrap();
                if name == "seen" {
                    tail.starts_with("turn") || tail.starts_with("abandon")
                } else {
                    tail == name
                }
            })
            .cloned()
            .collect()
    };
    let key = |part: Part| keys_of(part)[0].clone();
    let mut cmds = Vec::new();
    match damage {
        Damage::Lost(part) => {
            for k in keys_of(part) {
                cmds.push(redis::cmd("DEL").arg(k).clone());
            }
        }
        Damage::WrongType(part) => {
            for k in keys_of(part) {
                cmds.push(redis::cmd("DEL").arg(&k).clone());
                // A bitmap is a string: its wrong type is a hash, as the sequence's.
                if part == Part::Seq || format!("{part:?}") == "Seen" {
                    cmds.push(redis::cmd("HSET").arg(&k).arg("f").arg(1).clone());
                } else {
                    cmds.push(redis::cmd("SET").arg(&k).arg("garbage").clone());
                }
            }
        }
        Damage::NotANumber(Part::Seq) => {
            cmds.push(redis::cmd("SET").arg(key(Part::Seq)).arg("x").clone());
        }
        Damage::NotANumber(Part::Bucket) => cmds.push(
            redis::cmd("HSET")
                .arg(key(Part::Bucket))
                .arg("milli")
                .arg("x")
                .arg("last")
                .arg("x")
                .clone(),
        ),
        Damage::NotANumber(Part::Admitted) => {
            let bucket = now / ADMISSION_BUCKET_MS;
            let slot = bucket % ADMISSION_BUCKETS;
            cmds.push(
                redis::cmd("HSET")
                    .arg(key(Part::Admitted))
                    .arg(format!("t{slot}"))
                    .arg(bucket)
                    .arg(format!("n{slot}"))
                    .arg("x")
                    .clone(),
            );
        }
        Damage::NotANumber(Part::Settings) => cmds.push(
            redis::cmd("HSET")
                .arg(key(Part::Settings))
                .arg("capacity")
                .arg("x")
                .clone(),
        ),
        Damage::NotANumber(_) => return Err("that part holds no number but sorted-set scores"),
        // A gateway of another version writes its settings and its fast path's window in one
        // step (its main keeps or closes the window): the window goes with the version.
        Damage::SettingsVersion(v) => {
            cmds.push(
                redis::cmd("HSET")
                    .arg(key(Part::Settings))
                    .arg("v")
                    .arg(v)
                    .clone(),
            );
            cmds.push(redis::cmd("DEL").arg(fast_key(keys)).clone());
        }
        Damage::NewerAdditiveSettings(v) => {
            cmds.push(
                redis::cmd("HSET")
                    .arg(key(Part::Settings))
                    .arg("v")
                    .arg(v)
                    .arg("vmin")
                    .arg(SETTINGS_VERSION)
                    .clone(),
            );
            cmds.push(redis::cmd("DEL").arg(fast_key(keys)).clone());
        }
        Damage::BadNumber(field, form) => bad_number(&mut cmds, keys, field, form, now)?,
        // The session's score in line, only if it has one (`XX`).
        Damage::Place(s, form) => {
            if refused_score(form) {
                return Err("Redis refuses that score");
            }
            cmds.push(
                redis::cmd("ZADD")
                    .arg(key(Part::Line))
                    .arg("XX")
                    .arg(form.text())
                    .arg(member(&s))
                    .clone(),
            );
        }
        Damage::BucketFieldLost => {
            cmds.push(
                redis::cmd("HDEL")
                    .arg(key(Part::Bucket))
                    .arg("last")
                    .clone(),
            );
        }
        // Check-ins are bits in Bloom filters that sessions share (store v2): one session's
        // cannot be lost alone, and a stray one is a false positive, which the bitmaps'
        // own tests (tests/redis/redis_store_v2.rs) cover.
        Damage::CheckInLost(_) => {
            return Err("the Redis store keeps check-ins in shared Bloom bitmaps, not per session")
        }
        Damage::StrayCheckIn(..) => {
            return Err("the Redis store keeps check-ins in shared Bloom bitmaps, not per session")
        }
        Damage::SlotHolderInLine(s) => {
            // At the back: one more than the highest sequence number handed out.
            cmds.push(redis::cmd("INCR").arg(key(Part::Seq)).clone());
            cmds.push(
                redis::cmd("EVAL")
                    .arg("return redis.call('ZADD', KEYS[1], redis.call('GET', KEYS[2]), ARGV[1])")
                    .arg(2)
                    .arg(key(Part::Line))
                    .arg(key(Part::Seq))
                    .arg(member(&s))
                    .clone(),
            );
        }
        // The session's ticket key, beside the room's own (`{prefix}:{room}:tk:<session>`).
        Damage::TicketLost(s) => {
            let (room, _) = keys[0].rsplit_once(':').expect("a room key");
            cmds.push(redis::cmd("DEL").arg(format!("{room}:tk:{s}")).clone());
        }
        _ => return Err("damage this harness does not know"),
    }
    Ok(cmds)
}

/// The forms no sorted set's score holds, on any server (`ZADD` refuses them).
fn refused_score(form: BadNumber) -> bool {
    matches!(
        form,
        BadNumber::NotANumber | BadNumber::Overflow | BadNumber::Empty
    )
}

/// The fast path's window key.
fn fast_key(keys: &[String]) -> String {
    keys.iter().find(|k| k.ends_with(":fast")).unwrap().clone()
}

/// The commands that write `form` into every field `field` names (see `Field`).
fn bad_number(
    cmds: &mut Vec<redis::Cmd>,
    keys: &[String],
    field: Field,
    form: BadNumber,
    now: u64,
) -> Result<(), &'static str> {
    let named = |name: &str| {
        keys.iter()
            .find(|k| k.ends_with(&format!(":{name}")))
            .unwrap()
            .clone()
    };
    let text = form.text();
    let hset = |key: String, fields: &[String]| {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(key);
        for f in fields {
            cmd.arg(f).arg(text);
        }
        cmd
    };
    let settings = |fields: &[&str]| {
        hset(
            named("settings"),
            &fields.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
        )
    };
    // Every member's score (or, for the arrivals, every member) written as `text`, by a script
    // of the harness's own.
    let rescore = |key: String| {
        redis::cmd("EVAL")
            .arg(
                "for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do \
                   redis.call('ZADD', KEYS[1], ARGV[1], m) end",
            )
            .arg(1)
            .arg(key)
            .arg(text)
            .clone()
    };
    let cmd = match field {
        Field::Capacity => settings(&["capacity"]),
        Field::Rate => settings(&["rate"]),
        Field::Paused => settings(&["paused"]),
        Field::Open => settings(&["open"]),
        Field::Born => settings(&["born"]),
        Field::FirstMove => settings(&["moved", "early"]),
        Field::Due => settings(&["due"]),
        Field::Bans => settings(&["bans"]),
        Field::Noted => settings(&["noted"]),
        Field::Cursor => settings(&["cursor"]),
        Field::CapacityChange => settings(&["cap_before", "cap_at"]),
        Field::Pauses => settings(&["paused_at", "pause_start", "pause_end"]),
        Field::Schedule => settings(&["opens_at", "closes_at"]),
        Field::Epochs | Field::FirstNumbers => {
            let rings = (0..6)
                .map(|i| format!("turn{i}"))
                .chain((0..4).map(|i| format!("abandon{i}")));
            let fields: Vec<String> = match field {
                Field::Epochs => rings.collect(),
                _ => rings
                    .map(|r| format!("{r}from"))
                    .chain((0..6).map(|i| format!("turn{i}first")))
                    .collect(),
            };
            hset(named("settings"), &fields)
        }
        Field::Seq => redis::cmd("SET").arg(named("seq")).arg(text).clone(),
        Field::Budget => hset(named("bucket"), &["milli".into(), "last".into()]),
        Field::AdmissionCounts => {
            let slot = now / ADMISSION_BUCKET_MS % ADMISSION_BUCKETS;
            hset(
                named("admitted"),
                &[format!("t{slot}"), format!("n{slot}"), format!("k{slot}")],
            )
        }
        Field::Arrivals => redis::cmd("EVAL")
            .arg(
                "local a = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES') \
                 redis.call('DEL', KEYS[1]) \
                 for i = 1, #a, 2 do redis.call('ZADD', KEYS[1], a[i + 1], ARGV[1]) end",
            )
            .arg(1)
            .arg(named("arrivals"))
            .arg(text)
            .clone(),
        Field::SlotExpiries => {
            if refused_score(form) {
                return Err("Redis refuses that score");
            }
            cmds.push(rescore(named("active")));
            rescore(named("granted"))
        }
        _ => return Err("a number this harness does not know"),
    };
    cmds.push(cmd);
    Ok(())
}

mod single {
    use super::*;

    async fn make_harness() -> conformance::Harness {
        let server = redis_harness::shared_server();
        let clock = ManualClock::new(conformance::START_MS);
        let conn = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .expect("a connection for the damage hook");
        harness(RedisStore::builder().url(server.url()), clock, conn)
    }

    conformance::conformance_tests!(make_harness);
}

mod cluster {
    use super::*;

    async fn make_harness() -> conformance::Harness {
        let cluster = tokio::task::spawn_blocking(redis_harness::shared_cluster)
            .await
            .unwrap();
        let clock = ManualClock::new(conformance::START_MS);
        let conn = redis::cluster::ClusterClient::new(cluster.urls())
            .unwrap()
            .get_async_connection()
            .await
            .expect("a cluster connection for the damage hook");
        harness(
            RedisStore::builder().cluster_nodes(cluster.urls()),
            clock,
            conn,
        )
    }

    conformance::conformance_tests!(make_harness);
}
