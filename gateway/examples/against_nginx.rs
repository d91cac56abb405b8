//! The gateway against nginx: the same `wrk` load through three reverse proxies in front of one
//! fast upstream, in one run, rounds interleaved.
//!
//! ```text
//! cargo run --release -p waiting-room-gateway --example against_nginx
//! cargo run --release -p waiting-room-gateway --example against_nginx -- --secs 5 --rounds 5 --connections 32 --threads 1
//! cargo run --release -p waiting-room-gateway --example against_nginx -- --no-pin     # every process on every core
//! ```
//!
//! What runs, all on loopback, configs written to a scratch directory:
//!
//! - **the upstream**: nginx serving one small static file (`worker_processes 1`, access log
//!   off, open file cache), fast enough not to be the bottleneck;
//! - **nginx proxy_pass** to it: `worker_processes 1`, an `upstream` block with `keepalive 64`,
//!   `proxy_http_version 1.1` and `proxy_set_header Connection ""` (kept-alive connections to
//!   the upstream), access log off: nginx at its best on one core;
//! - **gateway, room**: the gateway binary (`target/release/waiting-room-gateway`, built by this
//!   example with `cargo build --release` first unless `--gateway PATH` names one) with one room
//!   of capacity 1 000 000 covering every path, `refresh = "1m"` so that a whole round stays on
//!   the room's fast path (a token younger than `refresh` is trusted with no store call), and
//!   `new_visitor_limit = "off"` (every round admits a visitor from 127.0.0.1);
//! - **gateway, no room**: the same binary and file with no `[[rooms]]`: the plain proxy
//!   (tower-http's layers and hyper-util's pooled client) with nothing queued;
//! - **upstream direct** (a reference): `wrk` straight at the upstream.
//!
//! Every request to every target is the same: `GET /` with the cookies of a visitor admitted
//! through the room at the start of the round (the first visit's `302`, then the admission),
//! about 250 bytes, which the proxies pass on to the upstream.
//!
//! The gateways run as a production one would: `RUST_LOG=info`, the metrics endpoint on, and
//! one serving worker (`workers = 1`), to match nginx's one worker.
//!
//! Each round runs `wrk -t<threads> -c<connections> -d<secs>s` against every target in turn,
//! the order rotating from round to round so that no target always follows another; before
//! the rounds, one second of `wrk` warms each target up (its pooled connections to the
//! upstream). A check request before and after each run must get `200`, the upstream's file
//! and no `Set-Cookie` (so the room's target let the visitor in by its token, with no renewal,
//! the whole run), and `wrk` must count no socket error and no non-2xx/3xx answer, or the run
//! fails.
//!
//! With two cores or more and `taskset` (util-linux), the proxies run on core 1 and `wrk` and
//! the upstream on core 0 (`--no-pin`: all on every core): each proxy has one core to itself,
//! and its requests per second follow its own cost per request. Also reported: each proxy's
//! CPU time per request and how busy its core was (the proxy's CPU time over the wall time;
//! near 1.0, the proxy was the bottleneck), from `/proc/PID/task/*/schedstat` (nginx: the
//! master and its workers).
//!
//! Reported: the median requests/s of each target over the rounds, and the ratios gateway /
//! nginx, no room / nginx and gateway / no room as the median of each round's ratio.
//!
//! Needs `wrk` and `nginx` (Debian: `apt-get install -y wrk nginx`; `--nginx PATH` names
//! another binary). Ctrl-C stops everything it started (same process group).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The room's signing secret (the gateway reads it from `WAITING_ROOM_SECRET`).
const SECRET: &str = "bench-secret-0123456789abcdef0123456789abcdef";

/// The upstream's file: a small page, as an app's answer might be.
const PAGE: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>origin</title></head>\n<body><h1>origin page</h1>\n<p>A small static file served by \
nginx, the upstream behind every proxy of this benchmark. It is a few hundred bytes long, \
like a small HTML fragment or a JSON answer of an API.</p>\n</body></html>\n";

#[derive(Clone, Debug)]
struct Settings {
    secs: u64,
    rounds: usize,
    connections: usize,
    threads: usize,
    pin: bool,
    gateway: Option<PathBuf>,
    nginx: PathBuf,
}

fn usage() -> &'static str {
    "usage: against_nginx [--secs N] [--rounds N] [--connections N] [--threads N] [--no-pin] \
     [--gateway PATH] [--nginx PATH]"
}

fn parse_args() -> Result<Settings, String> {
    let mut s = Settings {
        secs: 5,
        rounds: 5,
        connections: 32,
        threads: 1,
        pin: true,
        gateway: None,
        nginx: PathBuf::from("/usr/sbin/nginx"),
    };
    if let Some(found) = find_program("nginx") {
        s.nginx = found;
    }
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let number = |v: String| {
            v.parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or(format!("not a positive number: {v}"))
        };
        match arg.as_str() {
            "--secs" => s.secs = number(value("--secs")?)?,
            "--rounds" => s.rounds = number(value("--rounds")?)? as usize,
            "--connections" => s.connections = number(value("--connections")?)? as usize,
            "--threads" => s.threads = number(value("--threads")?)? as usize,
            "--no-pin" => s.pin = false,
            "--gateway" => s.gateway = Some(PathBuf::from(value("--gateway")?)),
            "--nginx" => s.nginx = PathBuf::from(value("--nginx")?),
            "-h" | "--help" => return Err(usage().to_owned()),
            other => return Err(format!("unknown argument {other}\n{}", usage())),
        }
    }
    Ok(s)
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn main() -> ExitCode {
    let settings = match parse_args() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The cores of (`wrk` and the upstream, the proxy under test), when pinning.
fn cores(settings: &Settings) -> Option<(&'static str, &'static str)> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let taskset = Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (settings.pin && n >= 2 && taskset).then_some(("0", "1"))
}

/// `program`, on `core` when pinning.
fn command_on(core: Option<&str>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match core {
        Some(core) => {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", core]).arg(program);
            cmd
        }
        None => Command::new(program),
    }
}

/// The gateway binary: `--gateway PATH`, or the workspace's release build (built now).
fn gateway_binary(settings: &Settings) -> Result<PathBuf, BoxError> {
    if let Some(path) = &settings.gateway {
        return Ok(path.clone());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "against_nginx: cargo build --release -p waiting-room-gateway --bin waiting-room-gateway"
    );
    let ok = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "waiting-room-gateway",
            "--bin",
            "waiting-room-gateway",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()?
        .success();
    if !ok {
        return Err("cargo build --release -p waiting-room-gateway failed".into());
    }
    // This example is target/release/examples/against_nginx; the binary is target/release/.
    let exe = std::env::current_exe()?;
    let release = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot find the target directory")?;
    let bin = release.join("waiting-room-gateway");
    if !bin.is_file() {
        return Err(format!("no gateway binary at {}", bin.display()).into());
    }
    Ok(bin)
}

/// A loopback port free right now.
fn free_port() -> Result<u16, BoxError> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until something listens on `addr`.
fn wait_listening(addr: SocketAddr, child: &mut Child, what: &str) -> Result<(), BoxError> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            return Err(format!("{what} exited ({status}) before listening on {addr}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("{what} did not listen on {addr} within 10 s").into())
}

/// A server under test, stopped when dropped.
struct Server {
    name: &'static str,
    child: Child,
    addr: SocketAddr,
    /// nginx's master stops its workers on `SIGTERM`; `Child::kill` is `SIGKILL`.
    term: bool,
}

impl Server {
    /// The CPU time of the server's processes (the process and its children: nginx's workers)
    /// so far, in nanoseconds, from each thread's `schedstat`.
    fn cpu_ns(&self) -> u64 {
        let pid = self.child.id();
        let mut pids = vec![pid];
        if let Ok(procs) = std::fs::read_dir("/proc") {
            for p in procs.flatten() {
                let Some(child) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                let stat = std::fs::read_to_string(p.path().join("stat")).unwrap_or_default();
                let ppid = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u32>().ok());
                if ppid == Some(pid) {
                    pids.push(child);
                }
            }
        }
        let mut sum = 0;
        for pid in pids {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                let stat =
                    std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
                sum += stat
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
        sum
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.term {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx with `http` (the body of its `http {}` block) on one worker, in the foreground.
fn nginx(
    settings: &Settings,
    dir: &Path,
    name: &'static str,
    port: u16,
    http: &str,
    core: Option<&str>,
) -> Result<Server, BoxError> {
    let d = dir.display();
    let conf = format!(
        "worker_processes 1;\n\
         daemon off;\n\
         pid {d}/{name}.pid;\n\
         error_log {d}/{name}-error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n\
             access_log off;\n\
             client_body_temp_path {d}/{name}-body;\n\
             proxy_temp_path {d}/{name}-proxy;\n\
             fastcgi_temp_path {d}/{name}-fastcgi;\n\
             uwsgi_temp_path {d}/{name}-uwsgi;\n\
             scgi_temp_path {d}/{name}-scgi;\n\
             keepalive_requests 1000000;\n\
             keepalive_timeout 60s;\n\
         {http}\n\
         }}\n"
    );
    let path = dir.join(format!("{name}.conf"));
    std::fs::write(&path, conf)?;
    let mut child = command_on(core, &settings.nginx)
        .arg("-c")
        .arg(&path)
        .arg("-p")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot run {} ({e}): apt-get install -y nginx, or --nginx PATH",
                settings.nginx.display()
            )
        })?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr, &mut child, name)?;
    Ok(Server {
        name,
        child,
        addr,
        term: true,
    })
}

/// The gateway binary with the file `toml`, on a free port.
fn gateway(
    bin: &Path,
    dir: &Path,
    name: &'static str,
    toml: &str,
    core: Option<&str>,
) -> Result<Server, BoxError> {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml)?;
    let log = std::fs::File::create(dir.join(format!("{name}.log")))?;
    let mut child = command_on(core, bin)
        .arg("--config")
        .arg(&path)
        .env("WAITING_ROOM_SECRET", SECRET)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("no stdout")?).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("waiting-room-gateway listening on http://")
        .and_then(|a| a.parse().ok());
    match addr {
        Some(addr) => Ok(Server {
            name,
            child,
            addr,
            term: false,
        }),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
            Err(format!("the gateway ({name}) did not start: {line:?}\n{log}").into())
        }
    }
}

/// An answer to a check request.
struct Answer {
    status: u16,
    /// `name=value` of each `Set-Cookie`.
    cookies: Vec<String>,
    body: String,
}

/// `GET /` over a fresh connection, with `cookie` if any.
fn get(addr: SocketAddr, cookie: Option<&str>) -> Result<Answer, BoxError> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let cookie = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nAccept: text/html\r\n{cookie}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {raw:?}"))?;
    let cookies = lines
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case("set-cookie"))
        .filter_map(|(_, v)| v.split(';').next().map(|c| c.trim().to_owned()))
        .collect();
    Ok(Answer {
        status,
        cookies,
        body: body.to_owned(),
    })
}

/// The cookies of a visitor admitted through the room, as a `Cookie` header's value: the
/// first visit's `302` gives the queue cookie, the next request the admission.
fn admitted_cookie(addr: SocketAddr) -> Result<String, BoxError> {
    let mut jar: BTreeMap<String, String> = BTreeMap::new();
    for _ in 0..4 {
        let header = jar
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let a = get(addr, (!header.is_empty()).then_some(header.as_str()))?;
        for c in &a.cookies {
            if let Some((k, v)) = c.split_once('=') {
                if v.is_empty() {
                    jar.remove(k);
                } else {
                    jar.insert(k.to_owned(), v.to_owned());
                }
            }
        }
        if a.status == 200 {
            if !a.body.contains("origin page") {
                return Err(format!("admitted, but not the upstream's page: {}", a.body).into());
            }
            return Ok(jar
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; "));
        }
        if a.status != 302 {
            return Err(format!("the room answered {}: {}", a.status, a.body).into());
        }
    }
    Err("not admitted after four requests".into())
}

/// A target of the load.
struct Target<'a> {
    key: &'static str,
    label: &'static str,
    server: &'a Server,
    /// The server is a proxy (its CPU is reported); the upstream direct is not.
    proxy: bool,
}

/// What one `wrk` run measured.
struct Run {
    rps: f64,
    /// The proxy's CPU time per request (us), and its CPU time over the wall time.
    cpu_us: f64,
    busy: f64,
    /// The upstream's CPU time per request (us).
    upstream_us: f64,
}

fn wrk(
    settings: &Settings,
    core: Option<&str>,
    addr: SocketAddr,
    secs: u64,
    cookie: Option<&str>,
) -> Result<(f64, f64), BoxError> {
    let mut cmd = command_on(core, "wrk");
    cmd.args([
        format!("-t{}", settings.threads),
        format!("-c{}", settings.connections),
        format!("-d{secs}s"),
    ]);
    if let Some(cookie) = cookie {
        cmd.args(["-H".to_owned(), format!("Cookie: {cookie}")]);
    }
    cmd.arg(format!("http://{addr}/"));
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run wrk ({e}): apt-get install -y wrk"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "wrk failed: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .map(str::trim)
    };
    let rps: f64 = field("Requests/sec:")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no Requests/sec in wrk's output: {text}"))?;
    let requests: f64 = text
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or(0.0);
    let bad: u64 = field("Non-2xx or 3xx responses:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // `Socket errors: connect 0, read 0, write 0, timeout 0`
    let socket: u64 = field("Socket errors:").map_or(0, |v| {
        v.split(',')
            .filter_map(|kv| kv.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    });
    if bad + socket > 0 {
        return Err(format!(
            "wrk counted {bad} non-2xx/3xx answers, {socket} socket errors:\n{text}"
        )
        .into());
    }
    Ok((rps, requests))
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One run against `target`, every request with `cookie`: a check before, `wrk`, a check
/// after.
fn measure(
    settings: &Settings,
    wrk_core: Option<&str>,
    target: &Target<'_>,
    upstream: &Server,
    secs: u64,
    cookie: &str,
) -> Result<Run, BoxError> {
    let check = |when: &str| -> Result<(), BoxError> {
        let a = get(target.server.addr, Some(cookie))?;
        if a.status != 200 || !a.body.contains("origin page") || !a.cookies.is_empty() {
            return Err(format!(
                "{} {when} the run: {} (cookies set: {:?}), not the upstream's page: {}",
                target.label, a.status, a.cookies, a.body
            )
            .into());
        }
        Ok(())
    };
    check("before")?;
    let (cpu0, up0) = (target.server.cpu_ns(), upstream.cpu_ns());
    let started = Instant::now();
    let (rps, requests) = wrk(settings, wrk_core, target.server.addr, secs, Some(cookie))?;
    let wall = started.elapsed().as_nanos() as f64;
    let (cpu1, up1) = (target.server.cpu_ns(), upstream.cpu_ns());
    check("after")?;
    let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1_000.0 / requests.max(1.0);
    Ok(Run {
        rps,
        cpu_us: per(cpu0, cpu1),
        busy: cpu1.saturating_sub(cpu0) as f64 / wall,
        upstream_us: per(up0, up1),
    })
}

fn run(settings: &Settings) -> Result<(), BoxError> {
    let pinned = cores(settings);
    let (wrk_core, proxy_core) = (pinned.map(|c| c.0), pinned.map(|c| c.1));
    let bin = gateway_binary(settings)?;
    let dir = std::env::temp_dir().join(format!("wrg-bench-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("www"))?;
    std::fs::write(dir.join("www/index.html"), PAGE)?;
    // The scratch directory is left behind on an error, for its logs; removed on success.

    let upstream_port = free_port()?;
    let upstream = nginx(
        settings,
        &dir,
        "upstream",
        upstream_port,
        &format!(
            "    open_file_cache max=16 inactive=1h;\n\
             open_file_cache_valid 1h;\n\
             server {{\n\
                 listen 127.0.0.1:{upstream_port} reuseport;\n\
                 root {}/www;\n\
                 location / {{ index index.html; }}\n\
             }}",
            dir.display()
        ),
        wrk_core,
    )?;
    let proxy_port = free_port()?;
    let nginx_proxy = nginx(
        settings,
        &dir,
        "proxy",
        proxy_port,
        &format!(
            "    upstream app {{ server 127.0.0.1:{upstream_port}; keepalive 64; }}\n\
             server {{\n\
                 listen 127.0.0.1:{proxy_port} reuseport;\n\
                 location / {{\n\
                     proxy_pass http://app;\n\
                     proxy_http_version 1.1;\n\
                     proxy_set_header Connection \"\";\n\
                 }}\n\
             }}"
        ),
        proxy_core,
    )?;
    let common = format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\nupstream = \"http://127.0.0.1:{upstream_port}\"\n"
    );
    let room = "[[rooms]]\nroom = \"bench\"\ncapacity = 1000000\nrefresh = \"1m\"\n\
                active_ttl = \"10m\"\nsecure_cookies = false\nsecret_env = \"WAITING_ROOM_SECRET\"\n\
                new_visitor_limit = \"off\"\n";
    let gw_room = gateway(
        &bin,
        &dir,
        "gateway-room",
        &format!("{common}\n{room}"),
        proxy_core,
    )?;
    let gw_plain = gateway(&bin, &dir, "gateway-no-room", &common, proxy_core)?;

    let targets = [
        Target {
            key: "nginx",
            label: "nginx proxy_pass",
            server: &nginx_proxy,
            proxy: true,
        },
        Target {
            key: "room",
            label: "gateway, room (fast path)",
            server: &gw_room,
            proxy: true,
        },
        Target {
            key: "no_room",
            label: "gateway, no room",
            server: &gw_plain,
            proxy: true,
        },
        Target {
            key: "direct",
            label: "upstream direct (reference)",
            server: &upstream,
            proxy: false,
        },
    ];
    eprintln!(
        "against_nginx: wrk -t{} -c{} -d{}s, {} rounds, {}; gateway {}",
        settings.threads,
        settings.connections,
        settings.secs,
        settings.rounds,
        if pinned.is_some() {
            "proxies on core 1, wrk and the upstream on core 0"
        } else {
            "not pinned"
        },
        bin.display()
    );
    let cookie = admitted_cookie(gw_room.addr)?;
    for t in &targets {
        eprintln!(
            "against_nginx: {} ({}) on {}",
            t.label, t.server.name, t.server.addr
        );
        measure(settings, wrk_core, t, &upstream, 1, &cookie)?;
    }

    let mut runs: BTreeMap<&str, Vec<Run>> = BTreeMap::new();
    let mut ratios: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for round in 0..settings.rounds {
        let mut this: BTreeMap<&str, f64> = BTreeMap::new();
        // A visitor admitted now: every target of the round gets the same requests, with its
        // cookies, well within the room's `refresh`.
        let cookie = admitted_cookie(gw_room.addr)?;
        for i in 0..targets.len() {
            let t = &targets[(i + round) % targets.len()];
            let r = measure(settings, wrk_core, t, &upstream, settings.secs, &cookie)?;
            eprintln!(
                "round {}/{}: {:<28} {:>9.0} req/s{}  upstream {:>5.2} us/req",
                round + 1,
                settings.rounds,
                t.label,
                r.rps,
                if t.proxy {
                    format!("  proxy CPU {:>6.2} us/req, busy {:.2}", r.cpu_us, r.busy)
                } else {
                    String::new()
                },
                r.upstream_us
            );
            this.insert(t.key, r.rps);
            runs.entry(t.key).or_default().push(r);
        }
        for (name, a, b) in [
            ("room/nginx", "room", "nginx"),
            ("no_room/nginx", "no_room", "nginx"),
            ("room/no_room", "room", "no_room"),
        ] {
            ratios.entry(name).or_default().push(this[a] / this[b]);
        }
    }

    println!();
    println!(
        "wrk -t{} -c{} -d{}s, {} rounds ({}), {} cores",
        settings.threads,
        settings.connections,
        settings.secs,
        settings.rounds,
        if pinned.is_some() {
            "each proxy alone on core 1; wrk and the upstream on core 0"
        } else {
            "not pinned"
        },
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    println!();
    println!("| target | req/s (median) | rounds | proxy CPU us/req | proxy core busy |");
    println!("|---|---:|---|---:|---:|");
    for t in &targets {
        let r = &runs[t.key];
        let rps: Vec<f64> = r.iter().map(|r| r.rps).collect();
        let each = rps
            .iter()
            .map(|v| format!("{:.0}", v))
            .collect::<Vec<_>>()
            .join(", ");
        let (cpu, busy) = if t.proxy {
            (
                format!(
                    "{:.2}",
                    median(&r.iter().map(|r| r.cpu_us).collect::<Vec<_>>())
                ),
                format!(
                    "{:.2}",
                    median(&r.iter().map(|r| r.busy).collect::<Vec<_>>())
                ),
            )
        } else {
            ("".into(), "".into())
        };
        println!(
            "| {} | {:.0} | {each} | {cpu} | {busy} |",
            t.label,
            median(&rps)
        );
    }
    let cpu = |key: &str| median(&runs[key].iter().map(|r| r.cpu_us).collect::<Vec<_>>());
    println!();
    println!(
        "| ratio | req/s (median of the rounds' ratios) | rounds | by proxy CPU per request |"
    );
    println!("|---|---:|---|---:|");
    for (name, a, b) in [
        ("gateway (room) / nginx", "room/nginx", ("nginx", "room")),
        ("no room / nginx", "no_room/nginx", ("nginx", "no_room")),
        (
            "gateway (room) / no room",
            "room/no_room",
            ("no_room", "room"),
        ),
    ] {
        let v = &ratios[a];
        println!(
            "| {name} | **{:.3}** | {} | {:.3} |",
            median(v),
            v.iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
            cpu(b.0) / cpu(b.1),
        );
    }
    println!();
    println!(
        "upstream CPU per request (median over every run): {:.2} us",
        median(
            &runs
                .values()
                .flatten()
                .map(|r| r.upstream_us)
                .collect::<Vec<_>>()
        )
    );
    drop((gw_room, gw_plain, nginx_proxy, upstream));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
