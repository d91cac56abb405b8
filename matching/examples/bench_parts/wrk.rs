//! The fast path and the cookie check measured with an external load generator: `wrk`, in its
//! own process, against servers in their own processes that differ only by the layer.
//!
//! ```text
//! apt-get install -y wrk     # Debian's wrk; scripts/test installs it when missing
//! cargo run --release -p tower-waiting-room-matching --example bench -- serve --scenario plain|fast_path|cookie_check|noop_layer --port 8080
//! wrk -t1 -c32 -d5s -H "Cookie: $(cargo run -q --release -p tower-waiting-room-matching --example bench -- cookie)" http://127.0.0.1:8080/
//! ```
//!
//! `bench serve` runs one server under test (one Tokio worker thread, as in the in-process
//! scenarios) until it is killed: **plain** is the bench's tiny axum app, **fast_path** and
//! **cookie_check** the very same app behind the layer (the embedded store, never called by
//! either), and **noop_layer** the app behind a layer that does nothing (`MapRequestLayer` with
//! the identity): the floor any layer pays in axum, whose `Router::layer` boxes the layered
//! route and its response per request. With `--port 0` it picks a free port. Either way it prints `listening on ADDR` once
//! it accepts connections. `bench cookie` prints an admission cookie the `fast_path` server
//! takes on its fast path for 15 s (its `refresh`; older, it goes the whole way), for runs by hand.
//!
//! The floors, what the room's parts cost with no room around them: **extension_floor**, the
//! no-op layer putting a value of an `Admission`'s size into the request's extensions;
//! **admission_floor**, that and a response body of the layer's own type (which axum boxes, as
//! it boxes `ResponseBody`): the least any admission layer does in axum before it decides
//! anything; **redirect_only**, no layer, a handler answering every request with a first
//! visit's `302` and its headers made of constants; **first_visit_floor**, the same around a
//! queue cookie issued and signed by the crate's own code (`QueueCookie::issue` and `sign`: a
//! random session id, the clock, one HMAC-SHA256, the text): the least a first visit does. Each runs beside plain like the others (`wrk_<floor>_ratio`).
//!
//! The driver (part of every bench run) runs each layered server **side by side** with a plain
//! one: both servers at once, each with its own `wrk -t1 -c32 -d<secs>` at the same time. With
//! two cores or more and `taskset`, both servers are pinned to core 1 and both wrk to core 0,
//! so the two servers share one core: the scheduler gives each half of it, both are saturated,
//! and the ratio of their rates is the ratio of their costs per request, under the very same
//! interference from the rest of the machine. (Run one after the other, as this driver did
//! before, plain alone moved between 33k and 68k req/s from run to run on the shared 2-core
//! VM, and a ratio with it.) The pairs, round by round: fast path (both with the admission
//! cookie: a fresh admission token minted with the bench's key right before the round), cookie
//! check (no cookie: every layered request a first visit, `302` with a signed queue cookie;
//! plain answers `200`), the no-op layer (admission cookie), and a control of plain beside
//! plain, whose ratio shows what the method itself tilts (near 1). The layered server starts
//! first every other round. The medians of the rounds' ratios are `wrk_fast_path_ratio`,
//! `wrk_cookie_check_ratio`, `wrk_noop_layer_ratio` and `wrk_plain_control_ratio`. A check
//! request before and after each run makes sure each server answered what the scenario claims
//! (`200` by token, or `302`).
//!
//! One pair runs beside another layered server instead of plain: **fast_path_edge**, the very
//! same layer with edge tokens on ([`super::edge`]), beside **fast_path**; the median of its
//! rounds' ratios is `wrk_edge_tokens_ratio`, what edge tokens cost a request that holds a
//! fresh admission (signing happens only when an admission is issued or refreshed).
//!
//! Two more pairs put each path directly beside its floor, so that its gap to the floor is
//! measured in one pair rather than as the quotient of two ratios to plain (each with its own
//! noise): **cookie_check** beside **redirect_only** (no cookie: both answer `302`), whose
//! median ratio is `wrk_cookie_check_vs_redirect_only`, and **fast_path** beside
//! **admission_floor** (the admission cookie: both answer `200`), `wrk_fast_path_vs_admission_floor`.
//! Each side of a pair is checked for its own answer. Their `_rps` and `_cpu_us` are the path's
//! own beside its floor, and, as for `edge_tokens`, the floor's figures there count only in
//! the pair's ratio.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tower_waiting_room::__private::{AdmissionToken, QueueCookie};
use tower_waiting_room::store::MemoryStore;
use tower_waiting_room::{Keyring, SessionId, SigningKey, WaitingRoomLayer};

use super::measure::{median, now_ms, round};
use super::servers::app;
use super::{BoxError, Settings, ROOM, SECRET};

/// Connections wrk keeps open, as the in-process scenarios do.
const CONNECTIONS: usize = 32;

/// The servers under test, by name.
const SCENARIOS: [&str; 9] = [
    "plain",
    "fast_path",
    "fast_path_edge",
    "cookie_check",
    "noop_layer",
    "extension_floor",
    "admission_floor",
    "redirect_only",
    "first_visit_floor",
];

/// `bench serve ...` runs a server under test (until killed); `bench wrk [--secs N]
/// [--rounds N]` runs only these scenarios and prints their part of the summary as JSON.
/// Returns the exit code for those command lines, `None` for every other.
pub(crate) fn subcommand() -> Option<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => {}
        Some("wrk") => return Some(wrk_only(&args[1..])),
        // For a fast-path server run by hand: `wrk -H "Cookie: $(bench cookie)" ...`.
        Some("cookie") => {
            return Some(match admission_cookie() {
                Ok(cookie) => {
                    println!("{cookie}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("bench cookie failed: {e}");
                    ExitCode::FAILURE
                }
            })
        }
        _ => return None,
    }
    let mut scenario = None;
    let mut port = 0u16;
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        match (arg.as_str(), rest.next()) {
            ("--scenario", Some(s)) if SCENARIOS.contains(&s.as_str()) => scenario = Some(s),
            ("--port", Some(p)) if p.parse::<u16>().is_ok() => port = p.parse().unwrap_or(0),
            _ => {
                eprintln!("usage: bench serve --scenario plain|fast_path|cookie_check|noop_layer [--port N]");
                return Some(ExitCode::from(2));
            }
        }
    }
    let Some(scenario) = scenario else {
        eprintln!(
            "usage: bench serve --scenario plain|fast_path|cookie_check|noop_layer [--port N]"
        );
        return Some(ExitCode::from(2));
    };
    Some(match serve_one(scenario, port) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench serve failed: {e}");
            ExitCode::FAILURE
        }
    })
}

/// `bench wrk`: only the external load generator's scenarios (5 s runs, 3 rounds unless told).
fn wrk_only(args: &[String]) -> ExitCode {
    let mut settings = Settings::quick();
    settings.run = Duration::from_secs(5);
    let mut only = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let value = rest.next();
        let n = value.and_then(|n| n.parse::<u64>().ok()).filter(|&n| n > 0);
        match (arg.as_str(), n, value) {
            ("--secs", Some(n), _) => settings.run = Duration::from_secs(n),
            ("--rounds", Some(n), _) => settings.repeats = n as usize,
            ("--pair", _, Some(pair)) if PAIRS.contains(&pair.as_str()) => only.push(pair.clone()),
            _ => {
                eprintln!(
                    "usage: bench wrk [--secs N] [--rounds N] [--pair NAME]...\n  pairs: {}",
                    PAIRS.join(", ")
                );
                return ExitCode::from(2);
            }
        }
    }
    match pairs(&settings, &only) {
        Ok(m) => {
            println!("{}", serde_json::to_string_pretty(&m).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench wrk failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The bench's keyring: the driver mints admission tokens with it for the server to accept.
fn keyring() -> Result<Keyring, BoxError> {
    Ok(Keyring::new(SigningKey::new("k1", SECRET)?))
}

/// One server under test on `127.0.0.1:port`, on one Tokio worker thread, until killed.
fn serve_one(scenario: &str, port: u16) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-server")
        .enable_all()
        .build()?;
    rt.block_on(async {
        let router = match scenario {
            "plain" => app(),
            // The floor any layer pays in axum: `Router::layer` with a layer that does
            // nothing (axum boxes the layered route per request as it does ours).
            "noop_layer" => app().layer(tower::util::MapRequestLayer::new(
                |r: http::Request<axum::body::Body>| r,
            )),
            // The shape of a first visit's answer without the room: no layer, a handler that
            // answers every request with the `302` and the headers a first visit gets (a
            // constant queue cookie of a real one's length: no session id, no HMAC). What
            // that answer costs next to plain's `200 ok` is a floor under the cookie check.
            "redirect_only" => axum::Router::new().route("/", axum::routing::get(redirect_only)),
            // A value of an `Admission`'s size put into every request's extensions (where
            // handlers find it), and nothing else: the no-op layer and that insert.
            "extension_floor" => app().layer(tower::util::MapRequestLayer::new(
                |mut r: http::Request<axum::body::Body>| {
                    r.extensions_mut().insert(FloorAdmission([7; 7]));
                    r
                },
            )),
            // The least any admission layer does in axum, with no decision: the extension
            // above, and the response's body made a body type of the layer's own (the inner's,
            // or the layer's answer), which axum boxes as it boxes `ResponseBody`.
            "admission_floor" => app().layer(
                tower::ServiceBuilder::new()
                    .map_request(|mut r: http::Request<axum::body::Body>| {
                        r.extensions_mut().insert(FloorAdmission([7; 7]));
                        r
                    })
                    .map_response(|r: http::Response<axum::body::Body>| {
                        r.map(http_body_util::Either::<_, http_body_util::Full<bytes::Bytes>>::Left)
                    }),
            ),
            // The least a first visit does, with no room around it: a queue cookie issued
            // and signed by the crate's own code, in a `Set-Cookie` and a header of its own,
            // on the `302` with the headers a first visit gets.
            "first_visit_floor" => {
                // Shared: axum clones the handler for every request.
                let keyring = std::sync::Arc::new(keyring()?);
                axum::Router::new().route(
                    "/",
                    axum::routing::get(move || std::future::ready(first_visit_floor(&keyring))),
                )
            }
            // The same layer with edge tokens on, and nothing else changed: beside
            // `fast_path`, what edge tokens cost a request that holds a fresh admission.
            "fast_path_edge" => app().layer(super::edge::layer(&keyring()?, true)?),
            // Exactly the in-process scenarios' layer.
            _ => app().layer(super::edge::layer(&keyring()?, false)?),
        };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        println!("listening on {}", listener.local_addr()?);
        std::io::stdout().flush()?;
        axum::serve(listener, router).await?;
        Ok::<_, BoxError>(())
    })
}

/// [`serve_one`]'s `redirect_only` handler: a first visit's answer made of constants (no
/// session id, no HMAC, no formatting: every header value static).
async fn redirect_only() -> http::Response<axum::body::Body> {
    use http::header::{HeaderName, HeaderValue, CACHE_CONTROL, LOCATION, SET_COOKIE};
    const COOKIE: &str = "q1.k1.d072dd379695958fa0f4eb878b6b534a.1796208520543.1796294920543.\
                          6jCd0kCj3iAPhQHHordA1uKx0zEry03qWWzYEFISwPo";
    const SET: &str = concat!(
        "wr_bench_q=q1.k1.d072dd379695958fa0f4eb878b6b534a.1796208520543.1796294920543.",
        "6jCd0kCj3iAPhQHHordA1uKx0zEry03qWWzYEFISwPo; Path=/; Max-Age=86400; HttpOnly; ",
        "SameSite=Lax; Secure"
    );
    let mut res = http::Response::new(axum::body::Body::empty());
    *res.status_mut() = http::StatusCode::FOUND;
    let h = res.headers_mut();
    h.insert(LOCATION, HeaderValue::from_static("/"));
    h.insert(SET_COOKIE, HeaderValue::from_static(SET));
    h.insert(
        HeaderName::from_static("waiting-room-session"),
        HeaderValue::from_static(COOKIE),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        HeaderName::from_static("x-robots-tag"),
        HeaderValue::from_static("noindex"),
    );
    res
}

/// What [`serve_one`]'s `admission_floor` puts into every request: as large as an `Admission`.
#[derive(Clone)]
struct FloorAdmission(#[allow(dead_code)] [u64; 7]);

/// [`serve_one`]'s `first_visit_floor` answer: a first visit's `302` around a queue cookie
/// freshly issued and signed by the crate's own code (`QueueCookie::issue` and `sign`: a
/// random session id, the clock, the HMAC, the text), with no room around it.
fn first_visit_floor(keyring: &Keyring) -> http::Response<axum::body::Body> {
    use http::header::{HeaderName, HeaderValue, CACHE_CONTROL, LOCATION, SET_COOKIE};
    let value = QueueCookie::issue(now_ms(), 86_400_000).sign(keyring, ROOM);
    let mut cookie = String::with_capacity(value.len() + 80);
    for piece in [
        "wr_bench_q=",
        &value,
        "; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax; Secure",
    ] {
        cookie.push_str(piece);
    }
    let mut res = http::Response::new(axum::body::Body::empty());
    *res.status_mut() = http::StatusCode::FOUND;
    let h = res.headers_mut();
    h.insert(LOCATION, HeaderValue::from_static("/"));
    if let (Ok(cookie), Ok(value)) = (HeaderValue::try_from(cookie), HeaderValue::try_from(value)) {
        h.insert(SET_COOKIE, cookie);
        h.insert(HeaderName::from_static("waiting-room-session"), value);
    }
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        HeaderName::from_static("x-robots-tag"),
        HeaderValue::from_static("noindex"),
    );
    res
}

/// A server under test in its own process, killed when dropped.
struct ServerProcess {
    child: Child,
    addr: SocketAddr,
}

/// With two cores or more and `taskset` (util-linux) at hand: the cores of the load
/// generators (0) and of the servers (1). Both servers of a pair share core 1 and both wrk
/// processes core 0, so the two servers meet the same interference and neither trades places
/// with a generator (unpinned, one scenario's req/s moved by a fifth from run to run on a
/// 2-core VM). `None`: unpinned. Looked up once per bench run.
fn pinned_cores() -> Option<(&'static str, &'static str)> {
    static PINNED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let pinned = *PINNED.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let taskset = Command::new("taskset")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        cores >= 2 && taskset
    });
    pinned.then_some(("0", "1"))
}

/// `program args...`, on `core` when pinning (see [`pinned_cores`]).
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

impl ServerProcess {
    fn start(scenario: &str) -> Result<Self, BoxError> {
        let core = pinned_cores().map(|(_, server)| server);
        let mut child = command_on(core, std::env::current_exe()?)
            .args(["serve", "--scenario", scenario, "--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok());
        match addr {
            Some(addr) => Ok(Self { child, addr }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("bench serve --scenario {scenario} said {line:?}").into())
            }
        }
    }

    /// The process's CPU time so far (user + system), in nanoseconds: from each thread's
    /// `/proc/PID/task/TID/schedstat` (the scheduler's nanoseconds on a CPU), or else
    /// `/proc/PID/stat` (10 ms ticks). With pinning the server runs under `taskset`, which
    /// `exec`s it: the same process id.
    fn cpu_ns(&self) -> Option<u64> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.child.id()));
        let from_schedstat = tasks.ok().and_then(|tasks| {
            let mut sum = 0;
            for task in tasks {
                let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
                sum += stat.split_whitespace().next()?.parse::<u64>().ok()?;
            }
            Some(sum)
        });
        if let Some(ns) = from_schedstat.filter(|&ns| ns > 0) {
            return Some(ns);
        }
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // Fields after the command name (which may hold spaces) end with `)`.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        // USER_HZ is 100 on every Linux this runs on.
        Some(ticks * 10_000_000)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `GET /` with `cookie`; the answer's status code.
fn check_status(addr: SocketAddr, cookie: Option<&str>) -> Result<u16, BoxError> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let cookie = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {addr}\r\n{cookie}Connection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    answer
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {answer:?}").into())
}

/// What one wrk run measured.
struct WrkRun {
    rps: f64,
    /// Server CPU time per request, in microseconds (10 ms resolution over the run).
    cpu_us: f64,
    /// Socket errors and non-2xx/3xx answers wrk counted.
    errors: u64,
}

/// `wrk -t1 -c32 -d<secs>s` against `server`, with `cookie` on every request.
fn wrk(
    server: &ServerProcess,
    secs: u64,
    cookie: Option<&str>,
    pinned: Option<(&str, &str)>,
) -> Result<WrkRun, BoxError> {
    let mut cmd = command_on(pinned.map(|(wrk, _)| wrk), "wrk");
    cmd.args([
        "-t1".to_owned(),
        format!("-c{CONNECTIONS}"),
        format!("-d{secs}s"),
    ]);
    if let Some(cookie) = cookie {
        cmd.args(["-H".to_owned(), format!("Cookie: {cookie}")]);
    }
    cmd.arg(format!("http://{}/", server.addr));
    let cpu0 = server.cpu_ns();
    let out = cmd.output().map_err(|e| {
        format!("cannot run wrk ({e}): install it from Debian with `apt-get install -y wrk` (scripts/test does)")
    })?;
    let cpu1 = server.cpu_ns();
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
    let non_2xx_3xx: u64 = field("Non-2xx or 3xx responses:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // `Socket errors: connect 0, read 0, write 0, timeout 0`
    let socket_errors: u64 = field("Socket errors:").map_or(0, |v| {
        v.split(',')
            .filter_map(|kv| kv.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    });
    let cpu_us = match (cpu0, cpu1) {
        (Some(a), Some(b)) if requests > 0.0 => b.saturating_sub(a) as f64 / 1_000.0 / requests,
        _ => 0.0,
    };
    Ok(WrkRun {
        rps,
        cpu_us,
        errors: non_2xx_3xx + socket_errors,
    })
}

/// A fresh admission token as a `Cookie` header value, minted as the room does (and as the
/// in-process fast path's are).
fn admission_cookie() -> Result<String, BoxError> {
    let now = now_ms();
    let token = AdmissionToken::new(SessionId::random(), now, now + 300_000);
    // The layer's default cookie name, read from the same builder the server uses.
    let layer = WaitingRoomLayer::builder(ROOM)
        .capacity(1_000_000)
        .keyring(keyring()?)
        .store(MemoryStore::new())
        .build()?;
    let name = layer.config().cookies().admission_name();
    Ok(format!("{name}={}", token.sign(&keyring()?, ROOM)))
}

/// Seconds per wrk run: the in-process run's length, at least 1 s (the smoke run: 1 s).
fn run_secs(settings: &Settings) -> u64 {
    settings.run.as_secs().max(1)
}

/// Every round, each layered server side by side with a plain one (see the module docs):
/// fast path (admission cookie), cookie check (no cookie), the no-op layer (admission cookie),
/// a plain server beside another plain one, the method's own bias, and the floors (the
/// admission cookie for the two layers, none for the two first-visit answers); then edge
/// tokens beside the fast path, and each path beside its floor; the medians and the paired
/// ratios.
pub(crate) fn scenarios(settings: &Settings) -> Result<Map<String, Value>, BoxError> {
    pairs(settings, &[])
}

/// The pairs [`scenarios`] runs, by name (`bench wrk --pair NAME` runs only those named).
const PAIRS: [&str; 11] = [
    "fast_path",
    "cookie_check",
    "noop_layer",
    "plain_control",
    "extension_floor",
    "admission_floor",
    "redirect_only",
    "first_visit_floor",
    "edge_tokens",
    "cookie_check_vs_redirect_only",
    "fast_path_vs_admission_floor",
];

/// [`scenarios`], only the pairs named in `only` (every pair when it is empty): one pair's
/// rounds take seconds where all of them take minutes, for trying a change to one path.
fn pairs(settings: &Settings, only: &[String]) -> Result<Map<String, Value>, BoxError> {
    let secs = run_secs(settings);
    let pinned = pinned_cores();
    eprintln!(
        "bench: wrk -t1 -c{CONNECTIONS} -d{secs}s against pairs of server processes side by side{}, {} rounds",
        if pinned.is_some() { " (servers on core 1, wrk on core 0)" } else { " (not pinned)" },
        settings.repeats
    );
    let mut rps: Map<String, Value> = Map::new();
    let mut runs: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut cpu: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut ratios: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut cpu_ratios: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut errors = 0;
    for round_no in 0..settings.repeats {
        // The pair's name, the server under test and the one beside which it runs, the
        // cookie, and the answer each side must give (a `302` for the first-visit servers).
        for (name, layered, beside, cookie, expect, beside_expect) in [
            ("fast_path", "fast_path", "plain", Some(()), 200, 200),
            ("cookie_check", "cookie_check", "plain", None, 302, 200),
            ("noop_layer", "noop_layer", "plain", Some(()), 200, 200),
            ("plain_control", "plain", "plain", Some(()), 200, 200),
            // The floors (see `serve_one`): what the layer's parts cost without the room.
            (
                "extension_floor",
                "extension_floor",
                "plain",
                Some(()),
                200,
                200,
            ),
            (
                "admission_floor",
                "admission_floor",
                "plain",
                Some(()),
                200,
                200,
            ),
            ("redirect_only", "redirect_only", "plain", None, 302, 200),
            (
                "first_visit_floor",
                "first_visit_floor",
                "plain",
                None,
                302,
                200,
            ),
            // Edge tokens on beside the same layer without them: the ratio is their cost.
            (
                "edge_tokens",
                "fast_path_edge",
                "fast_path",
                Some(()),
                200,
                200,
            ),
            // Each path beside its own floor, directly: a ratio of two ratios to plain carries
            // the noise of both pairs, these carry that of one.
            (
                "cookie_check_vs_redirect_only",
                "cookie_check",
                "redirect_only",
                None,
                302,
                302,
            ),
            (
                "fast_path_vs_admission_floor",
                "fast_path",
                "admission_floor",
                Some(()),
                200,
                200,
            ),
        ] {
            debug_assert!(PAIRS.contains(&name), "{name} is not in PAIRS");
            if !only.is_empty() && !only.iter().any(|p| p == name) {
                continue;
            }
            // A fresh admission token for each pair: a round outlives the fast path's
            // `refresh` (15 s), and an older token goes the whole way.
            let token = admission_cookie()?;
            let cookie = cookie.map(|()| token.as_str());
            // Every other round the layered server starts first: nothing about the order
            // (process ids, which wrk the scheduler wakes first) favours one side.
            let (plain, other) = if round_no % 2 == 0 {
                let p = ServerProcess::start(beside)?;
                (p, ServerProcess::start(layered)?)
            } else {
                let o = ServerProcess::start(layered)?;
                (ServerProcess::start(beside)?, o)
            };
            let check = |server: &ServerProcess, expect: u16| -> Result<(), BoxError> {
                let status = check_status(server.addr, cookie)?;
                if status != expect {
                    return Err(format!("wrk {name}: expected {expect}, got {status}").into());
                }
                Ok(())
            };
            check(&plain, beside_expect)?;
            check(&other, expect)?;
            let (p, o) = std::thread::scope(|scope| {
                let p = scope.spawn(|| wrk(&plain, secs, cookie, pinned));
                let o = wrk(&other, secs, cookie, pinned);
                (
                    p.join()
                        .unwrap_or_else(|_| Err("wrk thread panicked".into())),
                    o,
                )
            });
            let (p, o) = (p?, o?);
            check(&plain, beside_expect)?;
            check(&other, expect)?;
            drop((plain, other));
            eprintln!(
                "wrk round {}/{}: {name:<13} {:>8.0} req/s beside {beside} {:>8.0}: {:.3}  server CPU {:>6.2} / {:>6.2} us/req{}",
                round_no + 1,
                settings.repeats,
                o.rps,
                p.rps,
                o.rps / p.rps.max(1.0),
                o.cpu_us,
                p.cpu_us,
                if p.errors + o.errors > 0 {
                    format!("  ({} errors)", p.errors + o.errors)
                } else {
                    String::new()
                }
            );
            errors += p.errors + o.errors;
            if p.rps > 0.0 {
                ratios.entry(name).or_default().push(o.rps / p.rps);
            }
            if o.cpu_us > 0.0 {
                cpu_ratios
                    .entry(name)
                    .or_default()
                    .push(p.cpu_us / o.cpu_us);
            }
            // A layered server's figures are its own beside plain: those beside another
            // layered server count only in that pair's ratio.
            if beside == "plain" {
                runs.entry(beside).or_default().push(p.rps);
                cpu.entry(beside).or_default().push(p.cpu_us);
            }
            runs.entry(name).or_default().push(o.rps);
            cpu.entry(name).or_default().push(o.cpu_us);
        }
    }
    let mut m = Map::new();
    for (name, v) in &runs {
        m.insert(format!("wrk_{name}_rps"), json!(round(median(v), 0)));
        m.insert(
            format!("wrk_{name}_cpu_us"),
            json!(round(median(&cpu[name]), 2)),
        );
        rps.insert((*name).to_owned(), json!(v));
    }
    for (name, v) in &ratios {
        // A pair of a path and its floor is named for both (`<path>_vs_<floor>`), and its key
        // is that name: `wrk_cookie_check_vs_redirect_only`, as `joins_placed_vs_evalsha`.
        let key = if name.contains("_vs_") {
            format!("wrk_{name}")
        } else {
            format!("wrk_{name}_ratio")
        };
        m.insert(key, json!(round(median(v), 3)));
        // Server CPU per request, the plain neighbour's over the layer's, run by run.
        if let Some(c) = cpu_ratios.get(name) {
            m.insert(format!("wrk_{name}_cpu_ratio"), json!(round(median(c), 3)));
        }
    }
    m.insert("wrk_errors".into(), json!(errors));
    m.insert(
        "wrk_runs".into(),
        json!({
            "rps": rps,
            "server_cpu_us": cpu,
            "ratios": ratios,
            "secs": secs,
            "connections": CONNECTIONS,
            "pinned": pinned.is_some(),
        }),
    );
    if errors > 0 {
        return Err(format!("wrk counted {errors} errors or unexpected answers").into());
    }
    Ok(m)
}
