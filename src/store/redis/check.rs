//! [`RedisStore::check`]: a start-up check of the server behind a store.

use std::fmt;
use std::time::Duration;

use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, FromRedisValue, RedisError};

use super::breaker::ErrorClass;
use super::calls::LIBRARY;
use super::protocol::{classify, SCRIPT};
use super::{Connection, RedisStore};
use crate::store::{StoreError, StoreErrorKind};

/// Whether the room's keys carry a TTL. They do not (the room's script sets none; a test keeps it
/// so), so a `volatile-*` eviction policy, which only evicts keys with a TTL, cannot evict
/// them: a full Redis answers `OOM` instead, which the store reports as `Busy`. The one
/// exception is the liveness bitmaps (store v2), which expire with their ring: one evicted
/// counts everyone as seen in its epoch, so losing it skips or sweeps nobody; and the fast
/// path's window (`fast`), which ends by its TTL: one evicted is a closed window (main answers
/// until it keeps one again). The single-use tickets' records (`script/tickets.lua`, keys of
/// their own, not the room's) end with their slot by a TTL too. The capacity controller's
/// record (`script/auto.lua`, a hash of a bounded number of fields) has none: an operator's
/// switch must outlast any quiet spell, so it is never evicted under a `volatile-*` policy.
const ROOM_KEYS_HAVE_TTL: bool = false;

/// The least time each step of [`RedisStore::check`] gets: a start-up check may open the first
/// connection, which the per-call deadline is not meant for.
const CHECK_STEP_TIMEOUT: Duration = Duration::from_secs(2);

/// What [`RedisStore::check`] found out about the server.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisServerInfo {
    /// `"redis"` or `"valkey"` (from `INFO server`), `"unknown"` if `INFO` was refused.
    pub server: String,
    /// The server's version, if `INFO` answered.
    pub version: Option<String>,
    /// Whether the store talks to a Redis Cluster.
    pub cluster: bool,
    /// Whether the store was pointed at a replica (`INFO replication` role `slave`).
    pub replica: bool,
    /// `maxmemory-policy` (from `INFO memory`, else `CONFIG GET`); `None` when both were
    /// refused (managed services often refuse `CONFIG`).
    pub maxmemory_policy: Option<String>,
    /// The room's function library (`twr_room_v11`, the single-use tickets' functions
    /// included), as loaded by `FUNCTION LOAD REPLACE`.
    pub function_library: String,
}

impl fmt::Display for RedisServerInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.server)?;
        if let Some(v) = &self.version {
            write!(f, " {v}")?;
        }
        let topology = match (self.cluster, self.replica) {
            (true, _) => "cluster",
            (false, true) => "replica",
            (false, false) => "single node",
        };
        write!(
            f,
            ", {topology}, maxmemory-policy {}, library {}",
            self.maxmemory_policy.as_deref().unwrap_or("unknown"),
            self.function_library,
        )
    }
}

/// Why [`RedisStore::check`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisCheckError {
    /// A step of the check failed (`PING`, `INFO`, `FUNCTION LOAD`): unreachable, timed out,
    /// refused (`NOPERM` on `FUNCTION LOAD` is [`Misconfigured`](StoreErrorKind::Misconfigured)).
    Store(StoreError),
    /// `maxmemory-policy` lets Redis evict the room's keys when memory is full: the line, the
    /// slots and the sequence would vanish. Use `noeviction` (or a `volatile-*` policy).
    EvictingPolicy {
        /// The policy, e.g. `allkeys-lru`.
        policy: String,
        /// What else the check found.
        server: Box<RedisServerInfo>,
    },
    /// The store points at a replica: every call would get `READONLY`.
    Replica {
        /// What else the check found.
        server: Box<RedisServerInfo>,
    },
}

impl RedisCheckError {
    /// The kind of store error this is: a failed step's own kind;
    /// [`Misconfigured`](StoreErrorKind::Misconfigured) for a policy or a replica.
    pub fn kind(&self) -> StoreErrorKind {
        match self {
            RedisCheckError::Store(e) => e.kind(),
            _ => StoreErrorKind::Misconfigured,
        }
    }
}

impl fmt::Display for RedisCheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisCheckError::Store(e) => write!(f, "Redis check failed: {e}"),
            RedisCheckError::EvictingPolicy { policy, server } => write!(
                f,
                "Redis may evict the waiting room's keys: maxmemory-policy is {policy} \
                 (use noeviction or a volatile-* policy) [{server}]"
            ),
            RedisCheckError::Replica { server } => write!(
                f,
                "the Redis store points at a replica, which refuses writes [{server}]"
            ),
        }
    }
}

impl std::error::Error for RedisCheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisCheckError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StoreError> for RedisCheckError {
    fn from(e: StoreError) -> Self {
        RedisCheckError::Store(e)
    }
}

/// Whether `policy` can evict the room's keys. `allkeys-*` evicts any key; `volatile-*` only
/// keys with a TTL, which the room's keys do not have.
pub(crate) fn evicts_room_keys(policy: &str) -> bool {
    policy.starts_with("allkeys-") || (ROOM_KEYS_HAVE_TTL && policy.starts_with("volatile-"))
}

/// `field` of an `INFO` reply (`field:value` lines).
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::trim)
    })
}

impl RedisStore {
    /// Checks the server at start-up, before the first visitor: `PING`, then what the server
    /// is (`INFO`: Redis or Valkey, its version, cluster, replica, `maxmemory-policy`, else
    /// `CONFIG GET maxmemory-policy`). A policy that the server refuses to tell is reported as
    /// unknown (`None`), not an error. Then, on a primary, `FUNCTION LOAD REPLACE` of the room
    /// library, the single-use tickets' functions included (`FCALL` needs Redis 7.0+ or Valkey
    /// 7.2+); in a cluster it goes to every primary (as redis-rs routes it).
    ///
    /// Errors: [`RedisCheckError::Store`] when a step fails (its kind says why),
    /// [`RedisCheckError::EvictingPolicy`] for an `allkeys-*` policy, which can evict the line
    /// (`volatile-*` cannot: the room's keys carry no TTL), and [`RedisCheckError::Replica`]
    /// for a URL that points at a replica. Each step has the store's timeout, and at least
    /// 2 s (the first connection is made here). The circuit breaker is not involved.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = tower_waiting_room::store::RedisStore::from_url("redis://127.0.0.1/")?;
    /// let server = store.check().await?;
    /// println!("waiting room store: {server}");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check(&self) -> Result<RedisServerInfo, RedisCheckError> {
        let _: String = self.check_step(&redis::cmd("PING"), false).await?;
        // INFO may be refused by an ACL; the check then knows less, and says so.
        let info: Option<String> = self.check_answer(&redis::cmd("INFO")).await?;
        let info = info.unwrap_or_default();
        let server = match info_field(&info, "server_name") {
            Some(name) => name.to_owned(),
            None if info_field(&info, "valkey_version").is_some() => "valkey".to_owned(),
            None if info_field(&info, "redis_version").is_some() => "redis".to_owned(),
            None => "unknown".to_owned(),
        };
        let version = info_field(&info, "valkey_version")
            .filter(|_| server == "valkey")
            .or_else(|| info_field(&info, "redis_version"))
            .map(str::to_owned);
        let mut maxmemory_policy = info_field(&info, "maxmemory_policy").map(str::to_owned);
        if maxmemory_policy.is_none() {
            let mut get = redis::cmd("CONFIG");
            get.arg("GET").arg("maxmemory-policy");
            let pair: Option<Vec<String>> = self.check_answer(&get).await?;
            maxmemory_policy = pair.and_then(|p| p.get(1).cloned());
        }
        let info = RedisServerInfo {
            server,
            version,
            cluster: matches!(self.conn, Connection::Cluster(_))
                || info_field(&info, "cluster_enabled") == Some("1"),
            replica: info_field(&info, "role") == Some("slave"),
            maxmemory_policy,
            // Loaded below: a replica refuses it (a write).
            function_library: String::new(),
        };
        if info.replica {
            return Err(RedisCheckError::Replica {
                server: Box::new(info),
            });
        }
        let mut info = info;
        let mut load = redis::cmd("FUNCTION");
        load.arg("LOAD").arg("REPLACE").arg(SCRIPT);
        let function_library: String = self.check_step(&load, true).await?;
        if function_library != LIBRARY {
            return Err(StoreError::with_source(
                StoreErrorKind::Protocol,
                format!("FUNCTION LOAD answered {function_library}, not {LIBRARY}"),
            )
            .into());
        }
        info.function_library = function_library;
        if let Some(policy) = info
            .maxmemory_policy
            .as_deref()
            .filter(|p| evicts_room_keys(p))
        {
            return Err(RedisCheckError::EvictingPolicy {
                policy: policy.to_owned(),
                server: Box::new(info),
            });
        }
        Ok(info)
    }

    /// `check_step`, with a refusal (an answer: `NOPERM`, an unknown command) as `None`.
    async fn check_answer<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
    ) -> Result<Option<T>, RedisCheckError> {
        match self.check_run(cmd, false).await {
            Ok(v) => Ok(Some(v)),
            Err((ErrorClass::Misconfigured | ErrorClass::Protocol, _)) => Ok(None),
            Err((_, e)) => Err(e.into()),
        }
    }

    async fn check_step<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        all_nodes: bool,
    ) -> Result<T, RedisCheckError> {
        self.check_run(cmd, all_nodes)
            .await
            .map_err(|(_, e)| e.into())
    }

    /// Runs `cmd` on the server (in a cluster: on every node with `all_nodes`, as redis-rs
    /// routes it, else on one primary), within the check's deadline.
    async fn check_run<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        all_nodes: bool,
    ) -> Result<T, (ErrorClass, StoreError)> {
        let deadline = self.timeout.max(CHECK_STEP_TIMEOUT);
        let run = async {
            match self.conn.clone() {
                Connection::Single(mut c) => cmd.query_async::<T>(&mut c).await,
                Connection::Sentinel(s) => {
                    let mut c = s.get().await?;
                    cmd.query_async::<T>(&mut c).await
                }
                Connection::Cluster(mut c) => {
                    if all_nodes {
                        // Routed to every node by redis-rs.
                        cmd.query_async::<T>(&mut c).await
                    } else {
                        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary);
                        let value = c.route_command(cmd.clone(), routing).await?;
                        redis::from_redis_value(value).map_err(RedisError::from)
                    }
                }
            }
        };
        match tokio::time::timeout(deadline, run).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(classify(e)),
            Err(_) => Err((
                ErrorClass::Timeout,
                StoreError::with_source(
                    StoreErrorKind::Timeout,
                    format!("no answer within {deadline:?}"),
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_policies_that_can_evict_keys_without_ttl_are_refused() {
        for p in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
            assert!(evicts_room_keys(p), "{p}");
        }
        for p in [
            "noeviction",
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
        ] {
            assert!(!evicts_room_keys(p), "{p}");
        }
    }

    /// `volatile-*` policies are accepted because the room's keys carry no TTL. A script that
    /// starts setting TTLs must revisit `ROOM_KEYS_HAVE_TTL` (and docs/redis.md).
    #[test]
    fn the_room_script_sets_no_ttl() {
        for line in SCRIPT.lines() {
            // The liveness bitmaps' lifetime: see ROOM_KEYS_HAVE_TTL.
            if line.trim() == "redis.call('PEXPIRE', key, string.format('%d', math.max(1, ms)))" {
                continue;
            }
            // The fast path's window's end: see ROOM_KEYS_HAVE_TTL.
            if line.trim() == "'PX', string.format('%d', till - 1 - R.now))" {
                continue;
            }
            // A ticket record's end, its own key's (script/tickets.lua): see ROOM_KEYS_HAVE_TTL.
            if line.trim()
                == "redis.call('SET', key, state .. ':' .. n .. ':' .. string.format('%d', exp), 'PX', exp - now)"
            {
                continue;
            }
            let code = line.split("--").next().unwrap_or("").to_ascii_uppercase();
            for word in [
                "EXPIRE", "SETEX", "GETEX", "'EX'", "'PX'", "'EXAT'", "'PXAT'", "RESTORE",
            ] {
                assert!(
                    !code.contains(word),
                    "the room's script sets a TTL ({word}): revisit ROOM_KEYS_HAVE_TTL: {line}"
                );
            }
        }
    }

    #[test]
    fn info_fields_are_read_by_name() {
        let info =
            "# Server\r\nredis_version:7.0.15\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "server_name"), Some("valkey"));
        assert_eq!(info_field(info, "valkey"), None);
    }
}
