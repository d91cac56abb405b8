//! [`RedisMatchStore`]: matching on Redis, one function of its library (`script/*.lua`,
//! `twr_match_v1`) per step; the type's docs say how, and why nobody is ever in two groups.

mod calls;

use std::time::Duration;

use redis::Value;
use ring::rand::{SecureRandom, SystemRandom};

use super::MAX_MATCH_WORK_PER_CALL;
use super::{MatchPolicy, MatchStore, StoreError, StoreErrorKind, StoreFuture};
use crate::{
    AppGroupId, ConfirmOutcome, Group, GroupId, JoinOutcome, MatchState, Queue, UserId, Waiting,
};
use tower_waiting_room::store::RedisStore;

use self::calls::{
    Confirm, Enter, Leave, PointerClaim, PointerDrop, PointerRead, PointerTouch, QueueCall, Tick,
    SCRIPT,
};

/// How long a claim may take to join its queue; an older claim that never joined is finished
/// (`expired`) and may be replaced.
pub(crate) const CLAIM_GRACE: Duration = Duration::from_secs(10);

/// How long a queue remembers the claims that joined it: longer than [`CLAIM_GRACE`], so a claim
/// is refused by its age before it is forgotten.
pub(crate) const CLAIM_MEMORY: Duration = Duration::from_secs(60);

/// Durations above this many ms are capped (Lua numbers are doubles).
const MAX_MS: u64 = 1 << 50;

/// The pointer's TTL beyond the longest membership.
const POINTER_MARGIN: Duration = Duration::from_secs(3600);

/// How many times a join re-reads a pointer that changed under it before giving up (each retry
/// means another process finished a claim meanwhile).
const MAX_CLAIM_ATTEMPTS: usize = 8;

/// The queue functions' reply codes (see `script/operations.lua`).
mod code {
    pub(super) const PRESENT: i64 = 1;
    pub(super) const PRESENT_OTHER: i64 = 2;
    pub(super) const JOINED: i64 = 3;
    pub(super) const DONE: i64 = 4;
    pub(super) const EXPIRED: i64 = 5;
    pub(super) const CONFIRMED: i64 = 6;
    pub(super) const CONFLICT: i64 = 7;
    pub(super) const UNKNOWN: i64 = 8;
    pub(super) const TICK: i64 = 9;
}

/// The Redis/Valkey match store: every process matches from the same queues.
///
/// [`RedisMatchStore`] runs the rules of [the store module](crate::store) in a Redis
/// Functions library of its own (`twr_match_v1`, `src/matching/store/redis/script/`, whose
/// headers document its keys, arguments and replies; loaded by the store itself when a server
/// has no such function), with the exact answers of the
/// [`MemoryMatchStore`](crate::store::MemoryMatchStore) given the same clock. It shares
/// a [`RedisStore`]'s connection (single node, Redis Cluster or Sentinel), key prefix, deadline,
/// circuit breaker, error classes and clock: a call fails as the room's calls do.
///
/// ```no_run
/// use tower_waiting_room_matching::store::{MatchPolicy, MatchStore, RedisMatchStore};
/// use tower_waiting_room_matching::{GroupSize, JoinOutcome, Queue, Topic, UserId};
/// use tower_waiting_room::store::RedisStore;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let room_store = RedisStore::builder().url("redis://127.0.0.1:6379/").build()?;
/// let matching = RedisMatchStore::new(&room_store);
/// let policy = MatchPolicy::default();
/// let queue = Queue::new(Topic::new("chess")?, GroupSize::PAIR);
/// match matching.join(&policy, UserId::new("ann")?, queue).await? {
///     JoinOutcome::Joined(state) => println!("ann: {}", state.name()),
///     JoinOutcome::Conflict(state) => println!("ann is already {}", state.name()),
///     _ => {}
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Keys
///
/// A queue's keys share the hash tag `{<prefix>:m:<queue key>}` (a Redis Cluster keeps a queue
/// in one slot), so each step on a queue is one atomic function call. Which queue a user is in is
/// a second fact, in another slot: the user's **pointer** `{<prefix>:mu:<hex of the user id>}`
/// holds a **claim**, `<queue key>|<claim ms>|<random nonce>`.
///
/// # One place per user, across slots
///
/// A join is two steps: (a) set the pointer to a new claim for the queue, by compare-and-set
/// on the value read (absent, or a claim found finished); (b) the queue's function `enter` with
/// that claim. Whoever finds a claim on the pointer (a join elsewhere, a status, a leave) runs the
/// same `enter` with it on the claim's queue, which answers one of:
/// - the user is in the queue (after its housekeeping): a join elsewhere is a conflict with that
///   state;
/// - the claim joined before and the user has gone (`done`), or the claim is older than
///   `CLAIM_GRACE` (10 s) and never joined (`expired`): the claim is finished, the pointer may be
///   replaced or deleted (by compare-and-set on that exact claim);
/// - otherwise the claim is **in flight** (its process is between (a) and (b), or died there):
///   `enter` completes that join now (it is the join that process asked for), so a user in
///   flight is never answered idle, and the later join elsewhere is a conflict with the user's
///   state in the first queue. The claiming process's own `enter` then finds the user there under
///   its claim and answers joined.
///
/// Why nobody is ever in two queues, hence in two groups: a queue adds a user only in `enter`,
/// only under a claim younger than `CLAIM_GRACE` (10 s) (by the queue's clock) that has not joined
/// there before, and records the claim as used (remembered until it is older than
/// `CLAIM_MEMORY` (60 s), by when the age test refuses it for good). So a claim adds its user at most
/// once, and after one `enter` answered `done` or `expired` it never adds them again: both
/// answers are permanent. The pointer leaves a claim only (i) by compare-and-set after an
/// `enter` with it answered `done` or `expired` (the user is not in its queue and will never be
/// put there by it), or (ii) by `leave`, after the queue function removed the user (the claim is
/// used, so it cannot put them back). Every new claim replaces exactly the value read, atomically
/// on the pointer's slot. Hence at any time at most one claim can have its user in its queue or
/// put them there: the pointer's current one. Two processes joining the same user to two queues
/// race on the pointer; one claim wins; the other process finds that claim, completes it if in
/// flight, and answers a conflict. The one assumption is the pointer's TTL, which outlives any
/// membership: `2 × (timeout + confirm_ttl) + keep_confirmed` plus an hour, renewed by each
/// join, status and conflict, and for every user an undone group sends back to the line. A
/// pending group waits for its queue's next step, however late: one undone later than
/// `timeout + confirm_ttl` past its expiry drops its members rather than sending them back
/// (their pointers may have expired by then, and the users joined elsewhere).
///
/// # Differences from the embedded store
///
/// - Durations are capped at 2^50 ms (35,000 years), so that Lua's doubles stay exact.
/// - With the server's clock (no injected clock), a join's two steps may read `TIME` on two
///   nodes of a cluster; a claim's age is always measured on its queue's node.
#[derive(Clone)]
pub struct RedisMatchStore {
    store: RedisStore,
    random: SystemRandom,
}

impl std::fmt::Debug for RedisMatchStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisMatchStore")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).min(MAX_MS)
}

fn protocol_error(what: impl std::fmt::Display) -> StoreError {
    StoreError::with_source(
        StoreErrorKind::Protocol,
        format!("unexpected matching function reply: {what}"),
    )
}

/// A queue function's reply, parsed.
struct Reply {
    code: i64,
    /// Users who went back to the line from an undone group, with their claims.
    requeued: Vec<(String, String)>,
    /// The rest: a state, a group, or a count.
    tail: Vec<Value>,
}

fn int(v: &Value) -> Result<i64, StoreError> {
    match v {
        Value::Int(n) => Ok(*n),
        other => Err(protocol_error(format!("{other:?} for a number"))),
    }
}

fn text(v: &Value) -> Result<String, StoreError> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).map_err(protocol_error),
        Value::SimpleString(s) => Ok(s.clone()),
        other => Err(protocol_error(format!("{other:?} for a string"))),
    }
}

fn non_negative(v: &Value) -> Result<u64, StoreError> {
    u64::try_from(int(v)?).map_err(protocol_error)
}

impl Reply {
    fn parse(values: Vec<Value>) -> Result<Self, StoreError> {
        let (code, n) = match values.as_slice() {
            [code, n, ..] => (int(code)?, non_negative(n)?),
            _ => return Err(protocol_error(format!("{values:?}"))),
        };
        // A count no reply could hold (a reply not of this library) is no reason to overflow.
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(2)?.checked_add(2))
            .filter(|&end| end <= values.len())
            .ok_or_else(|| protocol_error("short"))?;
        let pairs = &values[2..end];
        let requeued = pairs
            .chunks(2)
            .map(|p| Ok((text(&p[0])?, text(&p[1])?)))
            .collect::<Result<_, StoreError>>()?;
        Ok(Self {
            code,
            requeued,
            tail: values[end..].to_vec(),
        })
    }

    fn group(&self, queue: &Queue) -> Result<Group, StoreError> {
        match self.tail.as_slice() {
            [kind, number, expires_in, app, members @ ..] if text(kind)? == "m" => {
                let app = text(app)?;
                Ok(Group {
                    id: GroupId::new(queue.clone(), non_negative(number)?),
                    members: members
                        .iter()
                        .map(|m| UserId::new(text(m)?).map_err(protocol_error))
                        .collect::<Result<_, _>>()?,
                    confirmed: if app.is_empty() {
                        None
                    } else {
                        Some(AppGroupId::new(app).map_err(protocol_error)?)
                    },
                    expires_in: Duration::from_millis(non_negative(expires_in)?),
                })
            }
            other => Err(protocol_error(format!("{other:?} for a group"))),
        }
    }

    fn state(&self, queue: &Queue) -> Result<MatchState, StoreError> {
        let kind = self.tail.first().map(text).transpose()?;
        match (kind.as_deref(), self.tail.as_slice()) {
            (Some("i"), [_]) => Ok(MatchState::Idle),
            (Some("w"), [_, position, waiting, waited, expires_in]) => {
                Ok(MatchState::Waiting(Waiting {
                    queue: queue.clone(),
                    position: non_negative(position)?,
                    waiting: non_negative(waiting)?,
                    waited: Duration::from_millis(non_negative(waited)?),
                    expires_in: Duration::from_millis(non_negative(expires_in)?),
                }))
            }
            (Some("m"), _) => Ok(MatchState::Matched(self.group(queue)?)),
            _ => Err(protocol_error(format!("{:?} for a state", self.tail))),
        }
    }
}

/// The pointer's upkeep after a queue step that has already answered (dropping a finished
/// claim, renewing a TTL): a failure is logged, not returned, so a step that succeeded is not
/// reported as failed. A pointer not dropped is dropped by the next call that finds it finished;
/// a TTL not renewed is renewed by the next status.
fn best_effort(result: Result<(), StoreError>, what: &str) {
    if let Err(e) = result {
        tracing::warn!(error = %e, "matching: {what} failed; left for a later call");
    }
}

/// The queue a claim (`<queue key>|<ms>|<nonce>`) names.
fn claim_queue(claim: &str) -> Option<Queue> {
    Queue::from_key(claim.split('|').next()?).ok()
}

impl RedisMatchStore {
    /// A match store on `store`'s Redis: the same connection (single node, cluster or
    /// Sentinel), key prefix, deadline, circuit breaker and clock.
    pub fn new(store: &RedisStore) -> Self {
        Self {
            store: store.clone(),
            random: SystemRandom::new(),
        }
    }

    fn pointer_key(&self, user: &UserId) -> String {
        let mut hex = String::with_capacity(user.as_str().len() * 2);
        for b in user.as_str().bytes() {
            hex.push_str(&format!("{b:02x}"));
        }
        format!("{{{}:mu:{hex}}}", self.store.key_prefix())
    }

    fn queue_keys(&self, queue: &Queue) -> Vec<String> {
        let tag = format!("{{{}:m:{}}}", self.store.key_prefix(), queue.key());
        [
            "meta",
            "line",
            "expiry",
            "users",
            "groups",
            "pending",
            "confirmed",
            "used",
        ]
        .iter()
        .map(|part| format!("{tag}:{part}"))
        .collect()
    }

    /// The pointer's TTL: longer than any membership begun or renewed now (see the module docs).
    fn pointer_ttl(policy: &MatchPolicy) -> u64 {
        let cycle = ms(policy.timeout) + ms(policy.confirm_ttl);
        2 * cycle + ms(policy.keep_confirmed) + ms(POINTER_MARGIN)
    }

    fn nonce(&self) -> Result<String, StoreError> {
        let mut bytes = [0u8; 8];
        self.random
            .fill(&mut bytes)
            .map_err(|_| StoreError::with_source(StoreErrorKind::Unavailable, "no randomness"))?;
        Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// One call of `function` on a user's pointer.
    async fn pointer(
        &self,
        user: &UserId,
        function: &'static str,
        args: Vec<Vec<u8>>,
    ) -> Result<Vec<Value>, StoreError> {
        let keys = vec![self.pointer_key(user)];
        self.store
            .run_function(SCRIPT.as_str(), function, keys, args)
            .await
    }

    /// The user's claim, `None` when the pointer is absent; its time to live renewed to `ttl`
    /// in the same call (one round trip for a status's read and renewal).
    async fn read_claim(&self, user: &UserId, ttl: u64) -> Result<Option<String>, StoreError> {
        let reply = self
            .pointer(user, PointerRead::FUNCTION, PointerRead { ttl }.argv())
            .await?;
        match reply.as_slice() {
            [_, current] => {
                let current = text(current)?;
                Ok((!current.is_empty()).then_some(current))
            }
            other => Err(protocol_error(format!("{other:?}"))),
        }
    }

    /// Sets a new claim for `queue` if the pointer holds `expected` (`""`: absent). `Ok(Ok)`:
    /// the new claim; `Ok(Err)`: the pointer's value instead.
    async fn claim(
        &self,
        user: &UserId,
        now: &str,
        expected: &str,
        queue: &Queue,
        ttl: u64,
    ) -> Result<Result<String, String>, StoreError> {
        let args = PointerClaim {
            now: now.to_owned(),
            expected: expected.to_owned(),
            queue: queue.key(),
            nonce: self.nonce()?,
            ttl,
        }
        .argv();
        match self
            .pointer(user, PointerClaim::FUNCTION, args)
            .await?
            .as_slice()
        {
            [set, value] => Ok(if int(set)? == 1 {
                Ok(text(value)?)
            } else {
                Err(text(value)?)
            }),
            other => Err(protocol_error(format!("{other:?}"))),
        }
    }

    async fn drop_claim(&self, user: &UserId, claim: &str) -> Result<(), StoreError> {
        let args = PointerDrop {
            expected: claim.to_owned(),
        }
        .argv();
        self.pointer(user, PointerDrop::FUNCTION, args)
            .await
            .map(drop)
    }

    async fn touch(&self, user: &UserId, claim: &str, ttl: u64) -> Result<(), StoreError> {
        let args = PointerTouch {
            expected: claim.to_owned(),
            ttl,
        }
        .argv();
        self.pointer(user, PointerTouch::FUNCTION, args)
            .await
            .map(drop)
    }

    /// The arguments every step on `queue` takes first: `now`, the queue's size, `policy`'s
    /// timings and the bounds.
    fn queue_args(queue: &Queue, policy: &MatchPolicy, now: &str) -> QueueCall {
        QueueCall {
            now: now.to_owned(),
            size: u64::from(queue.size.get()),
            fallback_after: ms(policy.fallback_after),
            timeout: ms(policy.timeout),
            confirm_ttl: ms(policy.confirm_ttl),
            keep_confirmed: ms(policy.keep_confirmed),
            max_work: MAX_MATCH_WORK_PER_CALL as u64,
            grace: ms(CLAIM_GRACE),
            used_keep: ms(CLAIM_MEMORY),
        }
    }

    /// One step on `queue`, the call of `function` with `args`; renews the pointers of users an
    /// undone group sent back to the line.
    async fn queue_call(
        &self,
        queue: &Queue,
        policy: &MatchPolicy,
        function: &'static str,
        args: Vec<Vec<u8>>,
    ) -> Result<Reply, StoreError> {
        let reply = Reply::parse(
            self.store
                .run_function(SCRIPT.as_str(), function, self.queue_keys(queue), args)
                .await?,
        )?;
        let ttl = Self::pointer_ttl(policy);
        for (user, claim) in &reply.requeued {
            // Best effort: the TTL covers one missed renewal (it is twice a wait and a pending
            // group), and the step itself has succeeded.
            if let Ok(user) = UserId::new(user.as_str()) {
                let _ = self.touch(&user, claim, ttl).await;
            }
        }
        Ok(reply)
    }

    async fn enter(
        &self,
        queue: &Queue,
        policy: &MatchPolicy,
        now: &str,
        user: &UserId,
        claim: &str,
    ) -> Result<Reply, StoreError> {
        let args = Enter {
            call: Self::queue_args(queue, policy, now),
            user: user.as_str().to_owned(),
            claim: claim.to_owned(),
        }
        .argv();
        self.queue_call(queue, policy, Enter::FUNCTION, args).await
    }

    async fn join_async(
        self,
        policy: MatchPolicy,
        user: UserId,
        queue: Queue,
    ) -> Result<JoinOutcome, StoreError> {
        // One `now` for both steps, as the embedded store's one step has.
        let now = self.store.time_arg();
        let ttl = Self::pointer_ttl(&policy);
        let mut expected = String::new();
        for _ in 0..MAX_CLAIM_ATTEMPTS {
            match self.claim(&user, &now, &expected, &queue, ttl).await? {
                Ok(claim) => {
                    let reply = self.enter(&queue, &policy, &now, &user, &claim).await?;
                    match reply.code {
                        // Joined now, or by a process that found the claim in flight; `done`:
                        // that join happened and the user has already gone again.
                        code::JOINED | code::PRESENT | code::DONE => {
                            return Ok(JoinOutcome::Joined(reply.state(&queue)?));
                        }
                        // Only after a lost pointer: the user was there already.
                        code::PRESENT_OTHER => {
                            return Ok(JoinOutcome::Conflict(reply.state(&queue)?));
                        }
                        // This process took longer than the grace between its two steps.
                        code::EXPIRED => expected = claim,
                        other => return Err(protocol_error(format!("code {other}"))),
                    }
                }
                Err(current) => {
                    let Some(there) = claim_queue(&current) else {
                        // A damaged pointer names no queue: nobody can be in it by that claim.
                        expected = current;
                        continue;
                    };
                    let reply = self.enter(&there, &policy, &now, &user, &current).await?;
                    match reply.code {
                        code::PRESENT | code::PRESENT_OTHER | code::JOINED => {
                            best_effort(
                                self.touch(&user, &current, ttl).await,
                                "renewing a pointer",
                            );
                            return Ok(JoinOutcome::Conflict(reply.state(&there)?));
                        }
                        code::DONE | code::EXPIRED => expected = current,
                        other => return Err(protocol_error(format!("code {other}"))),
                    }
                }
            }
        }
        Err(StoreError::with_source(
            StoreErrorKind::Busy,
            "the user's pointer changed under every attempt to join",
        ))
    }

    /// The user's claim and the queue it names (the pointer read and renewed); `None` when
    /// there is none, or when it names no queue (a damaged pointer, dropped by the way).
    async fn pointed(
        &self,
        user: &UserId,
        policy: &MatchPolicy,
    ) -> Result<Option<(String, Queue)>, StoreError> {
        let Some(claim) = self.read_claim(user, Self::pointer_ttl(policy)).await? else {
            return Ok(None);
        };
        match claim_queue(&claim) {
            Some(queue) => Ok(Some((claim, queue))),
            None => {
                best_effort(
                    self.drop_claim(user, &claim).await,
                    "dropping a damaged claim",
                );
                Ok(None)
            }
        }
    }

    async fn status_async(
        self,
        policy: MatchPolicy,
        user: UserId,
    ) -> Result<MatchState, StoreError> {
        let now = self.store.time_arg();
        let Some((claim, queue)) = self.pointed(&user, &policy).await? else {
            return Ok(MatchState::Idle);
        };
        let reply = self.enter(&queue, &policy, &now, &user, &claim).await?;
        match reply.code {
            code::PRESENT | code::PRESENT_OTHER | code::JOINED => reply.state(&queue),
            code::DONE | code::EXPIRED => {
                // A finished claim: cleaned lazily, by compare-and-set on its exact value.
                best_effort(
                    self.drop_claim(&user, &claim).await,
                    "dropping a finished claim",
                );
                Ok(MatchState::Idle)
            }
            other => Err(protocol_error(format!("code {other}"))),
        }
    }

    async fn leave_async(
        self,
        policy: MatchPolicy,
        user: UserId,
    ) -> Result<MatchState, StoreError> {
        let now = self.store.time_arg();
        let Some((claim, queue)) = self.pointed(&user, &policy).await? else {
            return Ok(MatchState::Idle);
        };
        let args = Leave {
            call: Self::queue_args(&queue, &policy, &now),
            user: user.as_str().to_owned(),
            claim: claim.clone(),
        }
        .argv();
        let reply = self
            .queue_call(&queue, &policy, Leave::FUNCTION, args)
            .await?;
        // The user is out of the queue and the claim is used: it can never put them back, so
        // the pointer may go (unless another join replaced it meanwhile).
        best_effort(
            self.drop_claim(&user, &claim).await,
            "dropping a finished claim",
        );
        match reply.code {
            code::PRESENT | code::PRESENT_OTHER | code::JOINED => reply.state(&queue),
            code::DONE | code::EXPIRED => Ok(MatchState::Idle),
            other => Err(protocol_error(format!("code {other}"))),
        }
    }

    async fn confirm_async(
        self,
        policy: MatchPolicy,
        id: GroupId,
        app_id: AppGroupId,
    ) -> Result<ConfirmOutcome, StoreError> {
        let now = self.store.time_arg();
        // Numbers beyond Lua's exact integers were never formed: 0 names no group.
        let number = if id.number > MAX_MS { 0 } else { id.number };
        let args = Confirm {
            call: Self::queue_args(&id.queue, &policy, &now),
            number,
            app: app_id.as_str().to_owned(),
        }
        .argv();
        let reply = self
            .queue_call(&id.queue, &policy, Confirm::FUNCTION, args)
            .await?;
        match reply.code {
            code::CONFIRMED => Ok(ConfirmOutcome::Confirmed(reply.group(&id.queue)?)),
            code::CONFLICT => Ok(ConfirmOutcome::Conflict(reply.group(&id.queue)?)),
            code::UNKNOWN => Ok(ConfirmOutcome::Unknown),
            other => Err(protocol_error(format!("code {other}"))),
        }
    }

    async fn tick_async(self, policy: MatchPolicy, queue: Queue) -> Result<u64, StoreError> {
        let now = self.store.time_arg();
        let args = Tick {
            call: Self::queue_args(&queue, &policy, &now),
        }
        .argv();
        let reply = self
            .queue_call(&queue, &policy, Tick::FUNCTION, args)
            .await?;
        match (reply.code, reply.tail.as_slice()) {
            (code::TICK, [formed]) => non_negative(formed),
            (other, _) => Err(protocol_error(format!("code {other}"))),
        }
    }
}

impl MatchStore for RedisMatchStore {
    fn join(&self, policy: &MatchPolicy, user: UserId, queue: Queue) -> StoreFuture<JoinOutcome> {
        Box::pin(self.clone().join_async(*policy, user, queue))
    }

    fn status(&self, policy: &MatchPolicy, user: UserId) -> StoreFuture<MatchState> {
        Box::pin(self.clone().status_async(*policy, user))
    }

    fn leave(&self, policy: &MatchPolicy, user: UserId) -> StoreFuture<MatchState> {
        Box::pin(self.clone().leave_async(*policy, user))
    }

    fn confirm(
        &self,
        policy: &MatchPolicy,
        group: GroupId,
        app_id: AppGroupId,
    ) -> StoreFuture<ConfirmOutcome> {
        Box::pin(self.clone().confirm_async(*policy, group, app_id))
    }

    fn tick(&self, policy: &MatchPolicy, queue: Queue) -> StoreFuture<u64> {
        Box::pin(self.clone().tick_async(*policy, queue))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply whose count of requeued users no reply could hold (not this library's, or
    /// damaged on the way) is a protocol error, never an overflow.
    #[test]
    fn a_count_past_the_reply_is_an_error() {
        let n = |v: i64| Value::Int(v);
        let text = |t: &str| Value::BulkString(t.as_bytes().to_vec());
        let ok = Reply::parse(vec![n(1), n(1), text("ann"), text("claim"), n(7)]).unwrap();
        assert_eq!(ok.requeued, [("ann".to_owned(), "claim".to_owned())]);
        assert_eq!(ok.tail, [n(7)]);
        for count in [2, i64::MAX, i64::MAX / 2 + 1] {
            assert!(Reply::parse(vec![n(1), n(count), text("ann"), text("claim")]).is_err());
        }
        assert!(Reply::parse(vec![n(1), n(-1)]).is_err());
    }
}
