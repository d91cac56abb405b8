//! A connection to the primary that Redis Sentinel names, which follows a failover.
//!
//! redis-rs's [`SentinelClient`] finds the primary (asking the sentinels, then checking the
//! node's `ROLE`) but its connections stay on the node they were opened to. This keeps one
//! multiplexed connection to the current primary, shared by every clone of the store, and
//! forgets it, so that the next call asks the sentinels again:
//!
//! - when a call says the node is gone or no longer the primary (a connection error, a
//!   timeout, `READONLY`…): a crashed primary is left as soon as the sentinels have promoted a
//!   replica. Only the connection that call used is forgotten, by its [`Generation`]: a call
//!   sent to the old primary before a failover may time out after another call has already
//!   connected to the new one, and dropping that fresh connection would make the next calls
//!   ask the sentinels again, slower on a loaded machine, time out in turn and keep the store
//!   failing long after the failover;
//! - when a watcher, which asks the sentinels for the primary's address every
//!   [`WATCH_EVERY`], sees it change: after a planned failover (`SENTINEL FAILOVER`) the old
//!   primary keeps accepting writes until the sentinels demote it, which takes them up to
//!   10 s; writes sent there meanwhile would be lost with its data set.
//!
//! Finding the primary (asking the sentinels, checking its `ROLE`) and connecting to it take
//! several round trips, and are the store's work, not one call's: they run in a task of their
//! own, for up to [`CONNECT_DEADLINES`] call deadlines, and the calls that need the connection
//! wait for it within their own deadlines. A call that gives up leaves the task running, so
//! the connection is there for the next call. Made inside a call and dropped with it, a
//! connection that takes longer than one deadline to make (a slow sentinel, a gateway too
//! loaded to read the answers in time) would never be made, and the store would fail every
//! call while Redis was up. (redis-rs's `ConnectionManager`, the single-node store's, likewise
//! reconnects in a task of its own.)

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{AsyncConnectionConfig, ConnectionAddr, RedisConnectionInfo, RedisError, RedisResult};
use tokio::sync::watch;

use super::url::SentinelTarget;

/// How often the watcher asks the sentinels where the primary is.
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(1);

/// How many call deadlines finding the primary and connecting to it may take, in their own
/// task, before it gives up (a node that accepts connections but does not answer) and the next
/// call starts over.
pub(crate) const CONNECT_DEADLINES: u32 = 4;

#[derive(Clone)]
pub(super) struct SentinelConnection {
    inner: Arc<Inner>,
}

struct Inner {
    /// The sentinels; one lookup at a time (the connecting task's).
    client: tokio::sync::Mutex<SentinelClient>,
    /// The connection to the primary, its address and its generation, once found, and the
    /// connection being made.
    current: Mutex<Cached<MultiplexedConnection>>,
    config: AsyncConnectionConfig,
    /// How long the connecting task may take.
    connect_within: Duration,
    /// The sentinels' URLs and the master name, for the watcher.
    sentinels: Vec<String>,
    service: String,
    /// Whether the watcher runs (it starts with the first connection, inside a runtime).
    watching: std::sync::atomic::AtomicBool,
}

impl SentinelConnection {
    /// A connection to the primary the sentinels of `target` name, with `config` for the
    /// primary's connection and `timeout`, a call's deadline (see [`CONNECT_DEADLINES`]).
    pub(super) fn new(
        target: SentinelTarget,
        config: AsyncConnectionConfig,
        timeout: Duration,
    ) -> RedisResult<Self> {
        let mut node = RedisConnectionInfo::default().set_db(target.db);
        if let Some(user) = &target.username {
            node = node.set_username(user);
        }
        if let Some(password) = &target.password {
            node = node.set_password(password);
        }
        let client = SentinelClient::build(
            target.sentinels.clone(),
            target.service.clone(),
            Some(SentinelNodeConnectionInfo::default().set_redis_connection_info(node)),
            SentinelServerType::Master,
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                client: tokio::sync::Mutex::new(client),
                current: Mutex::new(Cached::new()),
                config,
                connect_within: timeout * CONNECT_DEADLINES,
                sentinels: target.sentinels,
                service: target.service,
                watching: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// The connection to the current primary, asking the sentinels when there is none.
    pub(super) async fn get(&self) -> RedisResult<MultiplexedConnection> {
        self.get_with_generation().await.map(|(c, _)| c)
    }

    /// The connection to the current primary and its generation, asking the sentinels when
    /// there is none. A call that fails on it passes the generation to [`Self::forget`].
    ///
    /// Without a connection, this waits for the connecting task (starting it if none runs):
    /// dropping this future (the call's deadline) leaves the task running.
    pub(super) async fn get_with_generation(
        &self,
    ) -> RedisResult<(MultiplexedConnection, Generation)> {
        let mut made = {
            let mut cached = self.inner.lock();
            if let Some(found) = cached.get() {
                return Ok(found);
            }
            match cached.connecting.clone() {
                Some(made) => made,
                None => {
                    let (tx, rx) = watch::channel(None);
                    cached.connecting = Some(rx.clone());
                    tokio::spawn(connect(Arc::clone(&self.inner), tx));
                    rx
                }
            }
        };
        let outcome = match made.wait_for(Option::is_some).await {
            Ok(outcome) => outcome.clone(),
            // The task ended without an outcome (its runtime shut down).
            Err(_) => None,
        };
        outcome.unwrap_or_else(|| Err(gave_up("the connection to the primary was not made")))
    }

    /// Drops the connection a failed call `used`, so that the next call asks the sentinels
    /// again, unless it was replaced meanwhile: a late timeout of a call sent to the old
    /// primary must not drop the connection another call has made to the new one. A call that
    /// got no connection (the sentinels did not answer in time) passes `None` and forgets
    /// nothing: whatever is cached was made by another call.
    pub(super) fn forget(&self, used: Option<Generation>) {
        self.inner.lock().forget(used);
    }
}

/// What the connecting task made: the connection and its generation, or the error it met;
/// `None` until it is done.
type Made<C = MultiplexedConnection> = Option<RedisResult<(C, Generation)>>;

/// A timeout for a connection that was not made: the calls waiting for it fail as timeouts.
fn gave_up(what: &'static str) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, what))
}

/// The connecting task: finds the primary and connects to it within `connect_within`, caches
/// the connection, and tells the calls waiting for it through `tx`.
async fn connect(inner: Arc<Inner>, tx: watch::Sender<Made>) {
    // However this task ends (done, or dropped with its runtime), the next call may start
    // another.
    let turn = Turn {
        inner: &inner,
        mine: tx.subscribe(),
    };
    let found = tokio::time::timeout(inner.connect_within, find_primary(&inner))
        .await
        .unwrap_or_else(|_| Err(gave_up("the primary was not found in time")));
    let made = {
        // Cached and the turn ended in one step: a call finds either the connection or this
        // task's outcome to wait for.
        let mut cached = inner.lock();
        turn.end(&mut cached);
        found.map(|(conn, addr)| {
            let generation = cached.set(conn.clone(), addr);
            (conn, generation)
        })
    };
    drop(turn);
    if made.is_ok() {
        inner.watch();
    }
    tx.send_replace(Some(made));
}

/// The connecting task's turn, which ends when the task does.
struct Turn<'a> {
    inner: &'a Inner,
    /// The task's own channel: a turn ends only itself, never a later task's.
    mine: watch::Receiver<Made>,
}

impl Turn<'_> {
    fn end(&self, cached: &mut Cached<MultiplexedConnection>) {
        if cached
            .connecting
            .as_ref()
            .is_some_and(|c| c.same_channel(&self.mine))
        {
            cached.connecting = None;
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.end(&mut self.inner.lock());
    }
}

/// Asks the sentinels for the primary (redis-rs checks its `ROLE`) and connects to it.
async fn find_primary(inner: &Inner) -> RedisResult<(MultiplexedConnection, (String, u16))> {
    let mut client = inner.client.lock().await;
    let primary = client.async_get_client().await?;
    let addr = match primary.get_connection_info().addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            (host.clone(), *port)
        }
        _ => (String::new(), 0),
    };
    let conn = primary
        .get_multiplexed_async_connection_with_config(&inner.config)
        .await?;
    Ok((conn, addr))
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Cached<MultiplexedConnection>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the watcher once. It holds only a weak reference: it ends with the last clone of
    /// the store.
    fn watch(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        tokio::spawn(watch(Arc::downgrade(self)));
    }
}

/// The number of a cached connection: each connection cached gets a new one. A failed call
/// forgets the connection by the generation it used, so that it cannot drop one cached after
/// it (see [`SentinelConnection::forget`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Generation(u64);

/// The cached connection `C` to the primary, with its address and generation, and the number
/// of connections cached so far. Generic so that the forgetting rules can be tested without a
/// server.
struct Cached<C> {
    current: Option<(C, (String, u16), Generation)>,
    /// Connections cached so far: the generation of the last one.
    made: u64,
    /// The connecting task's outcome, while it runs: one at a time.
    connecting: Option<watch::Receiver<Made<C>>>,
}

impl<C: Clone> Cached<C> {
    const fn new() -> Self {
        Self {
            current: None,
            made: 0,
            connecting: None,
        }
    }

    /// Caches `conn` to `addr`, replacing any other, under a new generation.
    fn set(&mut self, conn: C, addr: (String, u16)) -> Generation {
        self.made += 1;
        let generation = Generation(self.made);
        self.current = Some((conn, addr, generation));
        generation
    }

    /// The cached connection and its generation.
    fn get(&self) -> Option<(C, Generation)> {
        self.current.as_ref().map(|(c, _, g)| (c.clone(), *g))
    }

    /// The address of the cached connection.
    fn addr(&self) -> Option<(String, u16)> {
        self.current.as_ref().map(|(_, a, _)| a.clone())
    }

    /// Drops the cached connection if it is still the one of generation `used`; with `None`
    /// (a call that got no connection), nothing.
    fn forget(&mut self, used: Option<Generation>) {
        if used.is_some() && self.current.as_ref().map(|(_, _, g)| *g) == used {
            self.current = None;
        }
    }

    /// Drops the cached connection if it is still to `addr` (the watcher's rule: the sentinels
    /// name another primary than `addr`).
    fn forget_if_at(&mut self, addr: &(String, u16)) {
        if self.current.as_ref().map(|(_, a, _)| a) == Some(addr) {
            self.current = None;
        }
    }
}

/// Every [`WATCH_EVERY`], asks a sentinel where the primary is and forgets the connection if it
/// is elsewhere.
async fn watch(weak: Weak<Inner>) {
    let mut sentinel: Option<MultiplexedConnection> = None;
    let mut next = 0;
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let Some(current) = inner.lock().addr() else {
            continue;
        };
        let asked =
            tokio::time::timeout(WATCH_EVERY, primary_addr(&inner, &mut sentinel, &mut next)).await;
        match asked {
            Ok(Ok(addr)) if addr != current => {
                tracing::info!(
                    service = inner.service,
                    from = format!("{}:{}", current.0, current.1),
                    to = format!("{}:{}", addr.0, addr.1),
                    "the sentinels name another primary; the store follows"
                );
                // Only if it is still a connection to the address we compared with.
                inner.lock().forget_if_at(&current);
            }
            Ok(Ok(_)) => {}
            // A sentinel that does not answer: try the next one next time. Calls keep their
            // own failure handling; the watcher only speeds up a switch.
            _ => {
                sentinel = None;
                next += 1;
            }
        }
    }
}

/// `SENTINEL GET-MASTER-ADDR-BY-NAME` on one of the sentinels (connecting to the `next` one when
/// there is no connection).
async fn primary_addr(
    inner: &Inner,
    sentinel: &mut Option<MultiplexedConnection>,
    next: &mut usize,
) -> RedisResult<(String, u16)> {
    if sentinel.is_none() {
        let url = &inner.sentinels[*next % inner.sentinels.len()];
        let client = redis::Client::open(url.as_str())?;
        *sentinel = Some(
            client
                .get_multiplexed_async_connection_with_config(&inner.config)
                .await?,
        );
    }
    let conn = sentinel.as_mut().expect("connected above");
    let (host, port): (String, u16) = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(&inner.service)
        .query_async(conn)
        .await?;
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(port: u16) -> (String, u16) {
        ("127.0.0.1".to_owned(), port)
    }

    #[test]
    fn a_late_failure_on_an_old_connection_keeps_the_new_one() {
        let mut cached = Cached::new();
        let old = cached.set(1_u32, at(6379));
        // A failover: another call connects to the new primary before the old call times out.
        let new = cached.set(2, at(6380));
        assert_ne!(old, new);
        cached.forget(Some(old));
        assert_eq!(cached.get(), Some((2, new)));
        assert_eq!(cached.addr(), Some(at(6380)));
    }

    #[test]
    fn a_failure_on_the_current_connection_drops_it() {
        let mut cached = Cached::new();
        cached.set(1_u32, at(6379));
        let current = cached.set(2, at(6380));
        cached.forget(Some(current));
        assert_eq!(cached.get(), None);
        assert_eq!(cached.addr(), None);
    }

    #[test]
    fn a_generation_forgotten_once_does_not_drop_its_successor() {
        let mut cached = Cached::new();
        let first = cached.set(1_u32, at(6379));
        cached.forget(Some(first));
        assert_eq!(cached.get(), None);
        // Reconnected, to the same address: a late failure of another call that used the first
        // connection forgets nothing.
        let second = cached.set(2, at(6379));
        cached.forget(Some(first));
        assert_eq!(cached.get(), Some((2, second)));
    }

    #[test]
    fn a_call_that_got_no_connection_forgets_nothing() {
        let mut cached = Cached::new();
        cached.forget(None);
        assert_eq!(cached.get(), None);
        let current = cached.set(1_u32, at(6379));
        cached.forget(None);
        assert_eq!(cached.get(), Some((1, current)));
    }

    #[test]
    fn the_watcher_drops_only_a_connection_to_the_address_it_compared() {
        let mut cached = Cached::new();
        cached.set(1_u32, at(6379));
        let new = cached.set(2, at(6380));
        cached.forget_if_at(&at(6379));
        assert_eq!(cached.get(), Some((2, new)));
        cached.forget_if_at(&at(6380));
        assert_eq!(cached.get(), None);
    }
}
