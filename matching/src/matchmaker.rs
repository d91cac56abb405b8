//! [`Matchmaker`]: the Rust API of matching, over any [`MatchStore`].

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::store::{MatchPolicy, MatchStore, StoreError};
use super::{
    AppGroupId, ConfirmOutcome, GroupId, GroupSize, JoinOutcome, MatchState, Queue, UserId,
};

/// The most queues one process ticks: queues seen in this process's calls, the least recently
/// seen forgotten first.
pub const MAX_TICKED_QUEUES: usize = 10_000;

/// A misconfiguration of a [`Matchmaker`], found by [`MatchmakerBuilder::build`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatchConfigError {
    /// No group size allowed.
    NoSizes,
    /// A duration that must be positive is zero; names it.
    ZeroDuration(&'static str),
    /// `fallback_after` is not shorter than `timeout`: nobody would ever fall back.
    FallbackAfterTimeout,
}

impl fmt::Display for MatchConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchConfigError::NoSizes => f.write_str("no group size is allowed"),
            MatchConfigError::ZeroDuration(name) => write!(f, "`{name}` must be positive"),
            MatchConfigError::FallbackAfterTimeout => {
                f.write_str("`fallback_after` must be shorter than `timeout`")
            }
        }
    }
}

impl std::error::Error for MatchConfigError {}

/// Why a [`Matchmaker::join`] did not reach the store.
#[derive(Debug)]
#[non_exhaustive]
pub enum JoinError {
    /// The size is not one of the matchmaker's [`sizes`](MatchmakerBuilder::sizes).
    SizeNotAllowed(GroupSize),
    /// The store failed: nothing is known to have changed.
    Store(StoreError),
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::SizeNotAllowed(size) => write!(f, "groups of {size} are not offered"),
            JoinError::Store(e) => write!(f, "the store failed: {e}"),
        }
    }
}

impl std::error::Error for JoinError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            JoinError::Store(e) => Some(e),
            JoinError::SizeNotAllowed(_) => None,
        }
    }
}

/// Builds a [`Matchmaker`]; see [`Matchmaker::builder`].
#[derive(Clone, Debug)]
pub struct MatchmakerBuilder {
    policy: MatchPolicy,
    sizes: Vec<GroupSize>,
}

impl MatchmakerBuilder {
    /// After how long the oldest waiter of a queue of 3 or more may be matched with fewer (at
    /// least 2). Default 60 s.
    pub fn fallback_after(mut self, after: Duration) -> Self {
        self.policy = self.policy.fallback_after(after);
        self
    }

    /// After how long an unmatched waiter is dropped. Default 5 min.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.policy = self.policy.timeout(timeout);
        self
    }

    /// How long a formed group waits for [`Matchmaker::confirm`] before its members go back to
    /// the front of their queue. Default 30 s.
    pub fn confirm_ttl(mut self, ttl: Duration) -> Self {
        self.policy = self.policy.confirm_ttl(ttl);
        self
    }

    /// How long a confirmed group answers its members' status. Default 10 min.
    pub fn keep_confirmed(mut self, keep: Duration) -> Self {
        self.policy = self.policy.keep_confirmed(keep);
        self
    }

    /// The group sizes offered. Default 2 and 3.
    pub fn sizes(mut self, sizes: impl IntoIterator<Item = GroupSize>) -> Self {
        self.sizes = sizes.into_iter().collect();
        self.sizes.sort();
        self.sizes.dedup();
        self
    }

    /// The matchmaker, or what is wrong with the configuration.
    pub fn build(self, store: impl MatchStore) -> Result<Matchmaker, MatchConfigError> {
        self.build_shared(Arc::new(store))
    }

    /// As [`build`](Self::build), on a store shared with other owners.
    pub fn build_shared(self, store: Arc<dyn MatchStore>) -> Result<Matchmaker, MatchConfigError> {
        let p = self.policy;
        if self.sizes.is_empty() {
            return Err(MatchConfigError::NoSizes);
        }
        for (name, d) in [
            ("fallback_after", p.fallback_after),
            ("timeout", p.timeout),
            ("confirm_ttl", p.confirm_ttl),
            ("keep_confirmed", p.keep_confirmed),
        ] {
            if d.is_zero() {
                return Err(MatchConfigError::ZeroDuration(name));
            }
        }
        if p.fallback_after >= p.timeout {
            return Err(MatchConfigError::FallbackAfterTimeout);
        }
        Ok(Matchmaker {
            inner: Arc::new(Inner {
                store,
                policy: p,
                sizes: self.sizes,
                seen: Mutex::default(),
            }),
        })
    }
}

/// Matching's Rust API: [`join`](Self::join), [`status`](Self::status),
/// [`leave`](Self::leave), [`confirm`](Self::confirm), over one [`MatchStore`] shared by every
/// process. Cheap to clone.
///
/// Groups form in the step that makes them possible (a join, a poll); [`tick`](Self::tick)
/// (or [`spawn_ticker`](Self::spawn_ticker), about once a second) forms them and undoes
/// unconfirmed ones when nobody polls, for every queue this process has seen lately.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use tower_waiting_room_matching::store::MemoryMatchStore;
/// use tower_waiting_room_matching::{
///     AppGroupId, ConfirmOutcome, GroupSize, JoinOutcome, MatchState, Matchmaker, Queue, Topic,
///     UserId,
/// };
///
/// let matchmaker = Matchmaker::builder().build(MemoryMatchStore::new()).unwrap();
/// let queue = Queue::new(Topic::new("go").unwrap(), GroupSize::PAIR);
/// let (ann, bob) = (UserId::new("ann").unwrap(), UserId::new("bob").unwrap());
/// matchmaker.join(ann.clone(), queue.clone()).await.unwrap();
/// let JoinOutcome::Joined(MatchState::Matched(group)) =
///     matchmaker.join(bob, queue).await.unwrap() else { panic!("a pair") };
/// // The app records the conversation, then confirms the group with its id.
/// let confirmed = matchmaker
///     .confirm(group.id.clone(), AppGroupId::new("conversation-1").unwrap())
///     .await
///     .unwrap();
/// assert!(matches!(confirmed, ConfirmOutcome::Confirmed(_)));
/// let MatchState::Matched(seen) = matchmaker.status(ann).await.unwrap() else { panic!() };
/// assert_eq!(seen.confirmed.unwrap().as_str(), "conversation-1");
/// # });
/// ```
#[derive(Clone)]
pub struct Matchmaker {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn MatchStore>,
    policy: MatchPolicy,
    sizes: Vec<GroupSize>,
    /// Queues this process saw, with when: the ones [`Matchmaker::tick`] ticks.
    seen: Mutex<HashMap<Queue, Instant>>,
}

impl fmt::Debug for Matchmaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Matchmaker")
            .field("policy", &self.inner.policy)
            .field("sizes", &self.inner.sizes)
            .finish_non_exhaustive()
    }
}

impl Matchmaker {
    /// Starts configuring a matchmaker with the defaults (sizes 2 and 3, the seed's timings;
    /// see [`MatchPolicy::default`]).
    pub fn builder() -> MatchmakerBuilder {
        MatchmakerBuilder {
            policy: MatchPolicy::default(),
            sizes: vec![GroupSize::PAIR, GroupSize::TRIO],
        }
    }

    /// The timings.
    pub fn policy(&self) -> &MatchPolicy {
        &self.inner.policy
    }

    /// The group sizes offered, smallest first.
    pub fn sizes(&self) -> &[GroupSize] {
        &self.inner.sizes
    }

    /// `user` joins `queue`: waiting, matched at once, or a conflict (already waiting or in a
    /// group, here or in another queue).
    pub async fn join(&self, user: UserId, queue: Queue) -> Result<JoinOutcome, JoinError> {
        if !self.inner.sizes.contains(&queue.size) {
            return Err(JoinError::SizeNotAllowed(queue.size));
        }
        let outcome = self
            .inner
            .store
            .join(&self.inner.policy, user, queue)
            .await
            .map_err(JoinError::Store)?;
        // Ticked from now on: the queue the user waits or was matched in (a conflict names
        // theirs, so a client asking for queues it never joins adds nothing to tick).
        match &outcome {
            JoinOutcome::Joined(state) | JoinOutcome::Conflict(state) => self.saw_state(state),
        }
        Ok(outcome)
    }

    /// Where `user` stands.
    pub async fn status(&self, user: UserId) -> Result<MatchState, StoreError> {
        let state = self.inner.store.status(&self.inner.policy, user).await?;
        self.saw_state(&state);
        Ok(state)
    }

    /// `user` leaves whatever they are in; answers where they stood.
    pub async fn leave(&self, user: UserId) -> Result<MatchState, StoreError> {
        let before = self.inner.store.leave(&self.inner.policy, user).await?;
        self.saw_state(&before);
        Ok(before)
    }

    /// Confirms `group` with the application's id, once the application recorded it.
    pub async fn confirm(
        &self,
        group: GroupId,
        app_id: AppGroupId,
    ) -> Result<ConfirmOutcome, StoreError> {
        self.inner
            .store
            .confirm(&self.inner.policy, group, app_id)
            .await
    }

    /// Forms and undoes groups in every queue this process saw within the last
    /// `timeout + confirm_ttl + keep_confirmed` (the longest anything in it can still need a
    /// step); answers the groups formed. Queues whose tick failed are tried again next time.
    pub async fn tick(&self) -> Result<u64, StoreError> {
        let p = self.inner.policy;
        // Saturating: `Duration::MAX` for "forever" must not panic the ticker.
        let horizon = p
            .timeout
            .saturating_add(p.confirm_ttl)
            .saturating_add(p.keep_confirmed);
        let queues: Vec<Queue> = {
            let mut seen = self.inner.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.retain(|_, at| at.elapsed() < horizon);
            seen.keys().cloned().collect()
        };
        let mut formed = 0;
        let mut failed = None;
        for queue in queues {
            match self.inner.store.tick(&p, queue).await {
                Ok(n) => formed += n,
                Err(e) => failed = Some(e),
            }
        }
        match failed {
            Some(e) if formed == 0 => Err(e),
            _ => Ok(formed),
        }
    }

    /// Ticks every `every` on the current Tokio runtime until the handle is dropped.
    pub fn spawn_ticker(&self, every: Duration) -> Ticker {
        let matchmaker = self.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = matchmaker.tick().await {
                    tracing::warn!(error = %e, "matching tick failed; trying again");
                }
            }
        });
        Ticker { task }
    }

    fn saw(&self, queue: &Queue) {
        let mut seen = self.inner.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_TICKED_QUEUES && !seen.contains_key(queue) {
            if let Some(oldest) = seen
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(q, _)| q.clone())
            {
                seen.remove(&oldest);
            }
        }
        seen.insert(queue.clone(), Instant::now());
    }

    fn saw_state(&self, state: &MatchState) {
        match state {
            MatchState::Waiting(w) => self.saw(&w.queue),
            MatchState::Matched(g) => self.saw(&g.id.queue),
            _ => {}
        }
    }
}

/// The task of [`Matchmaker::spawn_ticker`]; dropping it stops the ticks.
#[derive(Debug)]
pub struct Ticker {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryMatchStore;
    use crate::Topic;
    use tower_waiting_room::testing::ManualClock;

    #[test]
    fn misconfigurations_are_typed_errors() {
        let store = MemoryMatchStore::new;
        assert_eq!(
            Matchmaker::builder().sizes([]).build(store()).unwrap_err(),
            MatchConfigError::NoSizes
        );
        assert_eq!(
            Matchmaker::builder()
                .confirm_ttl(Duration::ZERO)
                .build(store())
                .unwrap_err(),
            MatchConfigError::ZeroDuration("confirm_ttl")
        );
        assert_eq!(
            Matchmaker::builder()
                .fallback_after(Duration::from_secs(300))
                .build(store())
                .unwrap_err(),
            MatchConfigError::FallbackAfterTimeout
        );
    }

    #[tokio::test]
    async fn durations_meant_as_forever_do_not_break_the_tick() {
        let m = Matchmaker::builder()
            .keep_confirmed(Duration::MAX)
            .build(MemoryMatchStore::new())
            .unwrap();
        let queue = Queue::new(Topic::new("t").unwrap(), GroupSize::PAIR);
        m.join(UserId::new("u").unwrap(), queue).await.unwrap();
        assert_eq!(m.tick().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_size_not_offered_is_refused_before_the_store() {
        let m = Matchmaker::builder()
            .sizes([GroupSize::PAIR])
            .build(MemoryMatchStore::new())
            .unwrap();
        let queue = Queue::new(Topic::new("t").unwrap(), GroupSize::TRIO);
        let err = m.join(UserId::new("u").unwrap(), queue).await.unwrap_err();
        assert!(matches!(err, JoinError::SizeNotAllowed(s) if s == GroupSize::TRIO));
        assert_eq!(
            m.status(UserId::new("u").unwrap()).await.unwrap(),
            MatchState::Idle
        );
    }

    #[tokio::test]
    async fn a_tick_forms_fallback_groups_in_the_queues_it_saw() {
        let clock = ManualClock::new(1_000_000);
        let m = Matchmaker::builder()
            .build(MemoryMatchStore::with_clock(clock.clone()))
            .unwrap();
        let queue = Queue::new(Topic::new("t").unwrap(), GroupSize::TRIO);
        for u in ["a", "b"] {
            m.join(UserId::new(u).unwrap(), queue.clone())
                .await
                .unwrap();
        }
        assert_eq!(
            m.tick().await.unwrap(),
            0,
            "not yet: only two, not a minute"
        );
        clock.advance(Duration::from_secs(60));
        assert_eq!(
            m.tick().await.unwrap(),
            1,
            "the fallback pair, with no poll"
        );
        let MatchState::Matched(g) = m.status(UserId::new("b").unwrap()).await.unwrap() else {
            panic!("b is matched")
        };
        assert_eq!(g.members.len(), 2);
    }
}
