//! A connection to the primary that Redis Sentinel names, which follows a failover.
//!
//! redis-rs's [`SentinelClient`] finds the primary (asking the sentinels, then checking the
//! node's `ROLE`) but its connections stay on the node they were opened to. This keeps one
//! multiplexed connection to the current primary, shared by every clone of the store, and
//! forgets it, so that the next call asks the sentinels again:
//!
//! - when a call says the node is gone or no longer the primary (a connection error, a
//!   timeout, `READONLY`…): a crashed primary is left as soon as the sentinels have promoted a
//!   replica;
//! - when a watcher, which asks the sentinels for the primary's address every
//!   [`WATCH_EVERY`], sees it change: after a planned failover (`SENTINEL FAILOVER`) the old
//!   primary keeps accepting writes until the sentinels demote it, which takes them up to
//!   10 s; writes sent there meanwhile would be lost with its data set.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{AsyncConnectionConfig, ConnectionAddr, RedisConnectionInfo, RedisResult};

use super::url::SentinelTarget;

/// How often the watcher asks the sentinels where the primary is.
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub(super) struct SentinelConnection {
    inner: Arc<Inner>,
}

struct Inner {
    /// The sentinels; one lookup at a time.
    client: tokio::sync::Mutex<SentinelClient>,
    /// The connection to the primary and its address, once found.
    current: Mutex<Option<(MultiplexedConnection, (String, u16))>>,
    config: AsyncConnectionConfig,
    /// The sentinels' URLs and the master name, for the watcher.
    sentinels: Vec<String>,
    service: String,
    /// Whether the watcher runs (it starts with the first connection, inside a runtime).
    watching: std::sync::atomic::AtomicBool,
}

impl SentinelConnection {
    pub(super) fn new(target: SentinelTarget, config: AsyncConnectionConfig) -> RedisResult<Self> {
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
                current: Mutex::new(None),
                config,
                sentinels: target.sentinels,
                service: target.service,
                watching: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// The connection to the current primary, asking the sentinels when there is none.
    pub(super) async fn get(&self) -> RedisResult<MultiplexedConnection> {
        if let Some(c) = self.inner.cached() {
            return Ok(c);
        }
        let mut client = self.inner.client.lock().await;
        // Another call may have found the primary while this one waited for the lock.
        if let Some(c) = self.inner.cached() {
            return Ok(c);
        }
        let primary = client.async_get_client().await?;
        let addr = match primary.get_connection_info().addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                (host.clone(), *port)
            }
            _ => (String::new(), 0),
        };
        let conn = primary
            .get_multiplexed_async_connection_with_config(&self.inner.config)
            .await?;
        *self.inner.lock() = Some((conn.clone(), addr));
        self.watch();
        Ok(conn)
    }

    /// Drops the connection to the primary: the next call asks the sentinels again.
    pub(super) fn forget(&self) {
        self.inner.lock().take();
    }

    /// Starts the watcher once. It holds only a weak reference: it ends with the last clone of
    /// the store.
    fn watch(&self) {
        use std::sync::atomic::Ordering;
        if self.inner.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(watch(weak));
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(MultiplexedConnection, (String, u16))>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn cached(&self) -> Option<MultiplexedConnection> {
        self.lock().as_ref().map(|(c, _)| c.clone())
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
        let Some(current) = inner.lock().as_ref().map(|(_, addr)| addr.clone()) else {
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
                // Only if it is still the connection we compared with.
                let mut guard = inner.lock();
                if guard.as_ref().map(|(_, a)| a) == Some(&current) {
                    guard.take();
                }
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
