//! A connection to the primary that Redis Sentinel names, which follows a failover.
//!
//! redis-rs's [`SentinelClient`] finds the primary (asking the sentinels, then checking the
//! node's `ROLE`) but its connections stay on the node they were opened to. This keeps one
//! multiplexed connection to the current primary, shared by every clone of the store, and
//! forgets it when a call says the node is gone or no longer the primary (a connection error,
//! a timeout, `READONLY`…): the next call asks the sentinels again, so a failover is followed as
//! soon as the sentinels have promoted a replica, not waited out.

use std::sync::{Arc, Mutex, PoisonError};

use redis::aio::MultiplexedConnection;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{AsyncConnectionConfig, RedisConnectionInfo, RedisResult};

use super::url::SentinelTarget;

#[derive(Clone)]
pub(super) struct SentinelConnection {
    inner: Arc<Inner>,
}

struct Inner {
    /// The sentinels; one lookup at a time.
    client: tokio::sync::Mutex<SentinelClient>,
    /// The connection to the primary, once found.
    current: Mutex<Option<MultiplexedConnection>>,
    config: AsyncConnectionConfig,
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
            target.sentinels,
            target.service,
            Some(SentinelNodeConnectionInfo::default().set_redis_connection_info(node)),
            SentinelServerType::Master,
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                client: tokio::sync::Mutex::new(client),
                current: Mutex::new(None),
                config,
            }),
        })
    }

    fn cached(&self) -> Option<MultiplexedConnection> {
        self.inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The connection to the current primary, asking the sentinels when there is none.
    pub(super) async fn get(&self) -> RedisResult<MultiplexedConnection> {
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let mut client = self.inner.client.lock().await;
        // Another call may have found the primary while this one waited for the lock.
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let conn = client
            .get_async_connection_with_config(&self.inner.config)
            .await?;
        *self
            .inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(conn.clone());
        Ok(conn)
    }

    /// Drops the connection to the primary: the next call asks the sentinels again.
    pub(super) fn forget(&self) {
        self.inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}
