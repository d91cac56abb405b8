//! `redis-server` on a free port, stopped with this process: the test harness's server, with the
//! binary's name and version for the report, and what the bench reads from it.

use std::process::Command;

use super::BoxError;

#[path = "../../../tests/redis_harness/mod.rs"]
mod redis_harness;

/// The test harness's server (free port, stopped with this process however it ends), with the
/// binary's name and version for the report.
pub(crate) struct RedisServer {
    server: redis_harness::Server,
    pub(crate) binary: String,
    pub(crate) version: String,
}

impl RedisServer {
    pub(crate) fn start() -> Result<Self, BoxError> {
        Self::start_with(&[])
    }

    /// Started with `extra` arguments for `redis-server`.
    pub(crate) fn start_with(extra: &[&str]) -> Result<Self, BoxError> {
        let binary = redis_harness::server_bin();
        let version = Command::new(&binary)
            .arg("--version")
            .output()
            .map_err(|e| {
                format!(
                    "cannot run {binary} ({e}); install it (apt-get install redis-server, as scripts/test does) or set TWR_REDIS_SERVER"
                )
            })?;
        let version = String::from_utf8_lossy(&version.stdout)
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or("?")
            .to_owned();
        Ok(Self {
            server: redis_harness::Server::start(extra),
            binary,
            version,
        })
    }

    pub(crate) fn port(&self) -> u16 {
        self.server.port
    }

    pub(crate) fn url(&self) -> String {
        self.server.url()
    }

    /// One command in RESP over a fresh connection; the raw reply text.
    pub(crate) fn command(&self, args: &[&str]) -> std::io::Result<String> {
        self.server.command(args)
    }

    pub(crate) fn info_field(&self, section: &str, field: &str) -> Option<String> {
        self.server.info_field(section, field)
    }

    pub(crate) fn used_memory(&self) -> Result<u64, BoxError> {
        Ok(self
            .info_field("memory", "used_memory")
            .and_then(|v| v.parse().ok())
            .ok_or("INFO memory has no used_memory")?)
    }

    /// Redis-side microseconds per call of `command` since the last `CONFIG RESETSTAT`.
    pub(crate) fn usec_per_call(&self, command: &str) -> f64 {
        self.info_field("commandstats", &format!("cmdstat_{command}"))
            .and_then(|v| {
                v.split(',')
                    .find_map(|kv| kv.strip_prefix("usec_per_call="))
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0.0)
    }
}
