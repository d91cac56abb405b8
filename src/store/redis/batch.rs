//! Joins in batches: while this store's join call for a room is in flight, the newcomers that
//! arrive gather for the next call, and one `FCALL` (`<LIBRARY>_join_batch`,
//! `script/batch.lua`) places the whole batch atomically, in the order this store received them.
//!
//! A call's fixed cost (parsing, dispatch, entering Lua, the reply) is most of a single join's;
//! a batch pays it once. There is no timer: the first newcomer of a quiet room goes at once (a
//! batch of one), and a batch only gathers behind a call already in flight, so a newcomer waits
//! at most for the call before theirs. A batch holds at most [`MAX_JOIN_BATCH`] newcomers; more
//! wait for the next.
//!
//! Fairness: newcomers are ordered by the store's receipt of their batch and, within a batch, by
//! this store's receipt of their join: the order in which [`Store::join`] was called. Each
//! newcomer gets their own answer, as a single join would give it (their place, let in, the
//! line full, banned...). A batch that fails with the store (a timeout, `OOM`, a failover) gives
//! every newcomer of it that error, so the room answers each exactly as it answers a single
//! join that failed that way. When a join after the first ends in an error inside the call, the
//! script answers those before it, and the rest are sent one by one.
//!
//! A room with a schedule draws each newcomer's place with a draw of their own, so its joins go
//! one by one; so do joins made outside a Tokio runtime (the batch's call runs as a task of its
//! own, so that a newcomer who leaves does not take the batch with them).
//!
//! [`Store::join`]: crate::store::Store::join

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

use super::calls::{JoinBatch, VisitorOp};
use super::protocol::{decision, protocol_error, reply};
use super::RedisStore;
use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::{Decision, StoreError, StoreErrorKind, StoreFuture};

/// The most newcomers one batch carries (the script takes up to its `LIMIT_BATCH`).
pub(crate) const MAX_JOIN_BATCH: usize = 64;

/// A newcomer's answer, as their join call gives it.
type Answer = oneshot::Sender<Result<Decision, StoreError>>;

/// What a batch is gathered for: the room, and the numbers the call sends for its policy (two
/// layers with other settings on one room send other arguments, and never share a call).
#[derive(Clone, PartialEq, Eq, Hash)]
struct BatchKey {
    room: Arc<str>,
    numbers: [u64; 13],
}

/// The newcomers gathered per room, shared by a store's clones. A room has an entry exactly
/// while a batch's task runs for it: its newcomers wait in it for that task's next call.
#[derive(Default)]
pub(super) struct JoinBatches {
    rooms: Mutex<HashMap<BatchKey, VecDeque<(SessionId, Answer)>>>,
}

impl JoinBatches {
    fn rooms(&self) -> std::sync::MutexGuard<'_, HashMap<BatchKey, VecDeque<(SessionId, Answer)>>> {
        // A panic while holding the lock leaves a map of whole entries: keep going.
        self.rooms.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Up to [`MAX_JOIN_BATCH`] of the room's newcomers, in their order; none (and the room's
    /// entry gone, so that the next newcomer starts a task) when nobody waits.
    fn next_batch(&self, key: &BatchKey) -> Vec<(SessionId, Answer)> {
        let mut rooms = self.rooms();
        let Some(waiting) = rooms.get_mut(key) else {
            return Vec::new();
        };
        if waiting.is_empty() {
            rooms.remove(key);
            return Vec::new();
        }
        let n = waiting.len().min(MAX_JOIN_BATCH);
        waiting.drain(..n).collect()
    }
}

impl RedisStore {
    /// A newcomer's join, in the room's next batch (see the module docs); one by one for a
    /// room with a schedule or outside a Tokio runtime.
    pub(super) fn join_in_batch(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
    ) -> StoreFuture<Decision> {
        let runtime = tokio::runtime::Handle::try_current();
        let Ok(runtime) = runtime.map_err(drop).and_then(|r| {
            // A room with a schedule: each newcomer's draw goes with their own call.
            if policy.schedule.is_some() {
                Err(())
            } else {
                Ok(r)
            }
        }) else {
            return self.decide(VisitorOp::Join, policy, session);
        };
        let key = BatchKey {
            room: policy.room.clone(),
            numbers: super::calls::policy_numbers(policy),
        };
        let (answer, answered) = oneshot::channel();
        let start = match self.join_batches.rooms().entry(key.clone()) {
            Entry::Occupied(mut waiting) => {
                waiting.get_mut().push_back((session, answer));
                false
            }
            Entry::Vacant(room) => {
                room.insert(VecDeque::from([(session, answer)]));
                true
            }
        };
        if start {
            let store = self.clone();
            let policy = policy.clone();
            runtime.spawn(async move { store.send_batches(policy, key).await });
        }
        Box::pin(async move {
            answered.await.unwrap_or_else(|_| {
                // The batch's task was dropped (its runtime shut down): nobody is let in by it.
                Err(StoreError::with_source(
                    StoreErrorKind::Busy,
                    "the join's batch was dropped before its answer",
                ))
            })
        })
    }

    /// The room's batches, one call after the other, while newcomers gather; then the room's
    /// entry is gone. If this task is dropped first, the entry goes with it (and with it the
    /// newcomers' answers: each gets an error, never a wait for ever).
    async fn send_batches(self, policy: RoomPolicy, key: BatchKey) {
        let guard = EntryGuard {
            batches: Arc::clone(&self.join_batches),
            key,
            armed: true,
        };
        let mut guard = guard;
        loop {
            let batch = self.join_batches.next_batch(&guard.key);
            if batch.is_empty() {
                guard.armed = false;
                return;
            }
            self.send_batch(&policy, batch).await;
        }
    }

    /// One batch's call, and each newcomer's answer.
    async fn send_batch(&self, policy: &RoomPolicy, batch: Vec<(SessionId, Answer)>) {
        let mut sessions = Vec::with_capacity(batch.len() * 16);
        for (session, _) in &batch {
            sessions.extend_from_slice(session.as_bytes());
        }
        let args = JoinBatch {
            call: self.call_arg(policy),
            sessions,
            schedule: None,
        }
        .argv();
        let call = self.run_room::<redis::Value, _>(
            JoinBatch::FUNCTION,
            policy,
            self.room_keys(policy, None),
            args,
        );
        let answers = match call.await.and_then(|reply| answers(reply, batch.len())) {
            Ok(answers) => answers,
            Err(e) => {
                for (_, answer) in batch {
                    let _ = answer.send(Err(e.copied()));
                }
                return;
            }
        };
        let mut batch = batch.into_iter();
        for (decided, (_, answer)) in answers.into_iter().zip(batch.by_ref()) {
            let _ = answer.send(decided);
        }
        // A join inside the call ended in an error: the rest one by one, in their order, each
        // answered as its own call answers it.
        for (session, answer) in batch {
            let decided = self.decide(VisitorOp::Join, policy, session).await;
            let _ = answer.send(decided);
        }
    }
}

/// Each newcomer's answer from the batch's reply (`script/batch.lua`): all `n` placed by the
/// batch's fast path (`{PLACED, first, waiting}`: the i-th, from 1, at place `first + i - 1`,
/// position and waiting `waiting + i`), or join's reply for each of the first ones, in their
/// order. More replies than newcomers, or a reply that is neither, is a protocol error.
fn answers(reply: redis::Value, n: usize) -> Result<Vec<Result<Decision, StoreError>>, StoreError> {
    let bad = || protocol_error(&[n as i64]);
    let redis::Value::Array(items) = reply else {
        return Err(bad());
    };
    if let [redis::Value::Int(reply::PLACED), redis::Value::Int(first), redis::Value::Int(waiting)] =
        items[..]
    {
        return Ok((1..=n as i64)
            .map(|i| decision(&[reply::WAITING, waiting + i, waiting + i, 0, first + i - 1]))
            .collect());
    }
    if items.len() > n {
        return Err(bad());
    }
    items
        .into_iter()
        .map(|item| {
            let one: Vec<i64> = redis::from_redis_value(item).map_err(|_| bad())?;
            Ok(decision(&one))
        })
        .collect()
}

/// The room's entry, removed if the task that serves it is dropped before it ends.
struct EntryGuard {
    batches: Arc<JoinBatches>,
    key: BatchKey,
    armed: bool,
}

impl Drop for EntryGuard {
    fn drop(&mut self) {
        if self.armed {
            self.batches.rooms().remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_takes_every_batch_the_store_sends() {
        let script = include_str!("script/batch.lua");
        let limit: usize = script
            .split("\nlocal LIMIT_BATCH = ")
            .nth(1)
            .and_then(|rest| rest.split('\n').next())
            .and_then(|n| n.trim().parse().ok())
            .expect("batch.lua declares LIMIT_BATCH");
        assert!(
            (1..=limit).contains(&MAX_JOIN_BATCH),
            "{MAX_JOIN_BATCH} > {limit}"
        );
    }

    #[test]
    fn a_batchs_reply_gives_each_newcomer_their_answer() {
        use redis::Value::{Array, Int};
        let placed = answers(Array(vec![Int(reply::PLACED), Int(41), Int(7)]), 3).unwrap();
        for (i, d) in placed.into_iter().enumerate() {
            let i = i as u64;
            match d.unwrap() {
                Decision::Waiting {
                    position,
                    waiting,
                    paused: false,
                    place: Some(crate::store::Place::Seq(place)),
                    ..
                } => assert_eq!((position, waiting, place), (8 + i, 8 + i, 41 + i)),
                other => panic!("newcomer {i}: {other:?}"),
            }
        }
        let one_by_one = Array(vec![
            Array(vec![Int(reply::BANNED), Int(0), Int(0)]),
            Array(vec![Int(reply::FULL), Int(0), Int(5)]),
        ]);
        let got = answers(one_by_one, 3).unwrap();
        assert_eq!(got.len(), 2, "the third is sent on its own");
        assert_eq!(*got[0].as_ref().unwrap(), Decision::Banned);
        assert_eq!(*got[1].as_ref().unwrap(), Decision::Full { waiting: 5 });
        let too_many = Array(vec![Array(vec![Int(reply::BANNED), Int(0), Int(0)]); 3]);
        assert!(answers(too_many, 2).is_err());
        assert!(answers(Int(1), 1).is_err());
        let garbled = Array(vec![Array(vec![Int(99)])]);
        assert!(
            answers(garbled, 1).unwrap()[0].is_err(),
            "a reply not in the protocol"
        );
    }
}
