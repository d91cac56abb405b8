//! A Redis Sentinel for tests, started on a free port and always stopped, like the servers of
//! `redis_harness` (whose binary it runs as `<server> <config> --sentinel`, so a Valkey run gets
//! Valkey's sentinel). Include it with `#[path = "common/sentinel.rs"] mod sentinel;` next to
//! `mod redis_harness;`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::redis_harness::{free_port, server_bin};

/// The name under which the sentinel monitors the primary.
pub const MASTER: &str = "twr";

/// One sentinel monitoring one primary (quorum 1), quick to fail over: the primary is down
/// after 1 s without an answer. Dropping it stops the sentinel.
pub struct Sentinel {
    pub port: u16,
    dir: PathBuf,
    shell: Child,
    lifeline: Option<ChildStdin>,
}

impl Sentinel {
    /// Starts a sentinel monitoring the primary on `primary_port` and waits until it knows
    /// `replicas` replicas of it.
    pub fn start(primary_port: u16, replicas: usize) -> Sentinel {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("twr-sentinel-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create sentinel dir");
        let conf = dir.join("sentinel.conf");
        // The sentinel rewrites its configuration file: it must be a file of its own.
        std::fs::write(
            &conf,
            format!(
                "port {port}\n\
                 bind 127.0.0.1\n\
                 dir {dir}\n\
                 logfile {dir}/sentinel.log\n\
                 sentinel monitor {MASTER} 127.0.0.1 {primary_port} 1\n\
                 sentinel down-after-milliseconds {MASTER} 1000\n\
                 sentinel failover-timeout {MASTER} 5000\n\
                 sentinel parallel-syncs {MASTER} 1\n",
                dir = dir.display()
            ),
        )
        .expect("write sentinel.conf");
        // As in redis_harness: the shell stops the sentinel when our end of its stdin closes,
        // however this process ends.
        let script = format!(
            "{} {} --sentinel & srv=$!; cat >/dev/null; kill $srv 2>/dev/null; \
             for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 $srv 2>/dev/null || break; sleep 0.1; done; \
             kill -9 $srv 2>/dev/null; wait",
            server_bin(),
            conf.display()
        );
        let mut shell = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start sh for the sentinel");
        let lifeline = shell.stdin.take();
        let sentinel = Sentinel {
            port,
            dir,
            shell,
            lifeline,
        };
        sentinel.wait_for_replicas(replicas);
        sentinel
    }

    /// `redis://` URL of the sentinel itself.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(2))
    }

    /// The address the sentinel gives for the primary now.
    pub fn primary_port(&self) -> Option<u16> {
        let mut c = self.connection().ok()?;
        let addr: Vec<String> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER)
            .query(&mut c)
            .ok()?;
        addr.get(1)?.parse().ok()
    }

    /// `SENTINEL FAILOVER`: a planned failover. An error while another is in progress
    /// (`INPROG`) or when no replica is fit to be promoted (`NOGOODSLAVE`).
    pub fn failover(&self) -> redis::RedisResult<()> {
        let mut c = self.connection()?;
        redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(MASTER)
            .query::<()>(&mut c)
    }

    /// The sentinel's flags for the primary (`SENTINEL MASTER`): `master` when all is well,
    /// with `s_down`, `o_down`, `failover_in_progress`… while it is not.
    pub fn master_flags(&self) -> Option<String> {
        let mut c = self.connection().ok()?;
        let fields: Vec<String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(MASTER)
            .query(&mut c)
            .ok()?;
        let at = fields.iter().position(|f| f == "flags")?;
        fields.get(at + 1).cloned()
    }

    fn known_replicas(&self) -> usize {
        let Ok(mut c) = self.connection() else {
            return 0;
        };
        redis::cmd("SENTINEL")
            .arg("REPLICAS")
            .arg(MASTER)
            .query::<Vec<redis::Value>>(&mut c)
            .map_or(0, |r| r.len())
    }

    fn wait_for_replicas(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.known_replicas() < n {
            if Instant::now() > deadline {
                let log =
                    std::fs::read_to_string(self.dir.join("sentinel.log")).unwrap_or_default();
                panic!(
                    "the sentinel on port {} did not see {n} replica(s) within 20 s; log:\n{log}",
                    self.port
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The sentinel's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sentinel.log")).unwrap_or_default()
    }

    /// How many times the sentinel has gone into TILT so far: its timer ran over 2 s late (a
    /// starved or paused machine, or a clock that jumped), after which it acts on nothing for
    /// 30 s and then must see the replicas afresh before it fails over.
    pub fn tilts(&self) -> usize {
        self.log().matches("+tilt").count()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.lifeline.take();
        let _ = self.shell.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
