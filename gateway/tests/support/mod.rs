//! What the gateway's tests run: the gateway binary itself, a Python app behind it, and a small
//! HTTP/1.1 client on raw TCP (so that a test can also send what no client library would).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A secret for the rooms of the tests (the gateway reads it from `WAITING_ROOM_SECRET`).
pub const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef";

/// The admin token of the tests' gateways that have an admin (`token_env =
/// "WRG_TEST_ADMIN_TOKEN"`).
pub const ADMIN_TOKEN: &str = "wrg-test-admin-token-0123456789abcdef-0123456789";

/// How long a test waits for what should come at once.
pub const SHORT: Duration = Duration::from_secs(5);

/// The gateway binary cargo built for these tests.
pub fn gateway_bin() -> &'static str {
    env!("CARGO_BIN_EXE_waiting-room-gateway")
}

/// A scratch directory of this test process.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wrg-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A child process stopped when dropped.
pub struct Proc {
    pub child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python app (`tests/support/app.py`) on a free port.
pub struct App {
    pub addr: SocketAddr,
    _proc: Proc,
}

impl App {
    pub fn start() -> App {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/app.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg("0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the test app");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line
            .trim()
            .strip_prefix("ready ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the app did not start: {line:?}"));
        App {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            _proc: Proc { child },
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request line the app received so far.
    pub fn seen(&self) -> Vec<String> {
        let res = get(self.addr, "/seen", &mut Jar::default());
        let seen: Vec<String> = serde_json::from_slice(&res.body).unwrap();
        seen.into_iter().filter(|l| l != "GET /seen").collect()
    }
}

/// A running gateway. Dropping it kills it.
pub struct Gateway {
    pub addr: SocketAddr,
    pub config: PathBuf,
    proc: Proc,
    log: Arc<Mutex<String>>,
}

impl Gateway {
    /// Starts the gateway with `config` (TOML) on a free port of loopback, the rooms' secret in
    /// `WAITING_ROOM_SECRET`; waits until it listens.
    pub fn start(config: &str) -> Gateway {
        Self::start_with(config, &[], &[])
    }

    /// [`start`](Self::start) with extra arguments and environment variables.
    pub fn start_with(config: &str, args: &[&str], env: &[(&str, &str)]) -> Gateway {
        let dir = scratch("gw");
        let path = dir.join(format!("gateway-{}.toml", unique()));
        std::fs::write(&path, config).unwrap();
        let mut cmd = Command::new(gateway_bin());
        cmd.arg("--config")
            .arg(&path)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(args)
            .env("WAITING_ROOM_SECRET", SECRET)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("the gateway starts");
        let log = Arc::new(Mutex::new(String::new()));
        drain(child.stderr.take().unwrap(), Arc::clone(&log));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("waiting-room-gateway listening on http://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| {
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "the gateway did not start: {line:?}; its log:\n{}",
                    log.lock().unwrap()
                )
            });
        Gateway {
            addr,
            config: path,
            proc: Proc { child },
            log,
        }
    }

    /// What it logged so far (stderr).
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Sends it a signal by name (`HUP`, `TERM`, `INT`).
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.proc.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name}");
    }

    /// Waits up to `limit` for it to exit; its status code.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.proc.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Waits up to `limit` for `needle` in its log.
    pub fn wait_log(&self, needle: &str, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.log().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

fn drain(stderr: ChildStderr, log: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut log = log.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Runs the binary with `args` to the end: (exit code, stdout, stderr).
pub fn run_bin(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(gateway_bin());
    cmd.args(args).env("WAITING_ROOM_SECRET", SECRET);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A gateway file: `rooms` is appended as written (its `[[rooms]]` tables).
pub fn config(upstream: &str, rooms: &str) -> String {
    format!(
        "upstream = \"{upstream}\"\n\
         [limits]\nupstream_timeout = \"2s\"\nheader_read_timeout = \"2s\"\ngrace = \"5s\"\n\n{rooms}"
    )
}

/// One room `sale` of `capacity` covering every path, over plain http.
pub fn sale_room(capacity: u32) -> String {
    format!(
        "[[rooms]]\nroom = \"sale\"\ncapacity = {capacity}\nsecure_cookies = false\n\
         secret_env = \"WAITING_ROOM_SECRET\"\nnew_visitor_limit = \"off\"\npoll_limit = \"off\"\n"
    )
}

/// A browser's cookies, by name (one site).
#[derive(Clone, Debug, Default)]
pub struct Jar(pub BTreeMap<String, String>);

impl Jar {
    /// Its `Cookie` header's value; `None` when empty.
    pub fn header(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| {
            self.0
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    fn take(&mut self, res: &Response) {
        for (name, value) in &res.headers {
            if name == "set-cookie" {
                let pair = value.split(';').next().unwrap_or("");
                if let Some((k, v)) = pair.split_once('=') {
                    let expired = value.to_ascii_lowercase().contains("max-age=0");
                    if v.is_empty() || expired {
                        self.0.remove(k.trim());
                    } else {
                        self.0.insert(k.trim().to_owned(), v.to_owned());
                    }
                }
            }
        }
    }
}

/// An answer.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    /// Names lowercased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// `GET path` with the jar's cookies (kept up to date), as a browser asks for a page.
pub fn get(addr: SocketAddr, path: &str, jar: &mut Jar) -> Response {
    request(addr, "GET", path, &[("accept", "text/html")], b"", jar)
}

/// A request with the jar's cookies; the jar takes the answer's.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    jar: &mut Jar,
) -> Response {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(cookies) = jar.header() {
        raw.push_str(&format!("cookie: {cookies}\r\n"));
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        raw.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    raw.push_str("\r\n");
    let mut bytes = raw.into_bytes();
    bytes.extend_from_slice(body);
    let res = send_raw(addr, &bytes, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    jar.take(&res);
    res
}

/// Follows a room's redirects (and waits out its `429`s) until the app answers or `limit`
/// passes: the answer that ended it.
pub fn visit(addr: SocketAddr, path: &str, jar: &mut Jar, limit: Duration) -> Response {
    let start = Instant::now();
    let mut at = path.to_owned();
    loop {
        let res = get(addr, &at, jar);
        match res.status {
            301 | 302 | 303 | 307 => {
                let to = res.header("location").unwrap().to_owned();
                at = to
                    .strip_prefix(&format!("http://{addr}"))
                    .map(str::to_owned)
                    .unwrap_or(to);
            }
            429 | 503 if start.elapsed() < limit => {
                std::thread::sleep(Duration::from_millis(200));
                at = path.to_owned();
            }
            _ => return res,
        }
    }
}

/// Sends `bytes` as they are and reads one answer (`Err` when the connection closes with none,
/// or nothing arrives within `limit`).
pub fn send_raw(addr: SocketAddr, bytes: &[u8], limit: Duration) -> Result<Response, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(limit)).unwrap();
    s.write_all(bytes).map_err(|e| e.to_string())?;
    read_response(&mut BufReader::new(s))
}

/// Reads one HTTP/1.1 answer (Content-Length, chunked, or to the close).
pub fn read_response(r: &mut impl BufRead) -> Result<Response, String> {
    let Response {
        status, headers, ..
    } = read_head(r)?;
    let find = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if status == 101 || status == 204 || status == 304 {
    } else if find("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).map_err(|e| e.to_string())?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| format!("a bad chunk size: {size:?}"))?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = find("content-length") {
        let n: usize = n.parse().map_err(|_| "a bad content-length")?;
        body.resize(n, 0);
        r.read_exact(&mut body).map_err(|e| e.to_string())?;
    } else {
        let _ = r.read_to_end(&mut body);
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// [`request`] that says what went wrong instead of panicking (a refused connection, a
/// connection closed with no answer, nothing within `limit`): for tests that count failures.
pub fn try_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    jar: &mut Jar,
    limit: Duration,
) -> Result<Response, String> {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(cookies) = jar.header() {
        raw.push_str(&format!("cookie: {cookies}\r\n"));
    }
    raw.push_str("\r\n");
    let res = send_raw(addr, raw.as_bytes(), limit)?;
    jar.take(&res);
    Ok(res)
}

/// The room's status endpoint (`GET {prefix}/{room}/status`, JSON) for the jar's place: the
/// answer's status and body.
pub fn room_status(addr: SocketAddr, room: &str, jar: &mut Jar) -> (u16, serde_json::Value) {
    let res = request(
        addr,
        "GET",
        &format!("/__waitingroom/{room}/status"),
        &[("accept", "application/json")],
        b"",
        jar,
    );
    (res.status, res.json())
}

/// One kept-alive HTTP/1.1 connection, for requests one after the other on the same socket.
pub struct KeepAlive {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    addr: SocketAddr,
}

impl KeepAlive {
    pub fn open(addr: SocketAddr, limit: Duration) -> Result<KeepAlive, String> {
        let s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(limit)).map_err(|e| e.to_string())?;
        let reader = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        Ok(KeepAlive {
            writer: s,
            reader,
            addr,
        })
    }

    /// `GET path` with the jar's cookies on this connection; the jar takes the answer's.
    pub fn get(&mut self, path: &str, jar: &mut Jar) -> Result<Response, String> {
        let mut raw = format!("GET {path} HTTP/1.1\r\nhost: {}\r\n", self.addr);
        if let Some(cookies) = jar.header() {
            raw.push_str(&format!("cookie: {cookies}\r\n"));
        }
        raw.push_str("\r\n");
        self.writer
            .write_all(raw.as_bytes())
            .map_err(|e| e.to_string())?;
        let res = read_response(&mut self.reader)?;
        jar.take(&res);
        Ok(res)
    }
}

// ---- Added for the proxying, admission, failures, hostile and nginx tests -----------------

impl App {
    /// The app on `port` (one that was free: an app stopped before, say).
    pub fn start_on(port: u16) -> App {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/app.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the test app");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), format!("ready {port}"), "the app on {port}");
        App {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            _proc: Proc { child },
        }
    }
}

/// A port of loopback that was free a moment ago (nothing listens on it now), drawn below the
/// kernel's ephemeral range (`ip_local_port_range`): a port from that range could be taken
/// meanwhile as the local end of a connection another test makes, and the test's server could
/// then not listen on it.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768)
        .max(2_048);
    let first = low / 2;
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        ^ u64::from(std::process::id()) << 32
        ^ DRAWS
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    loop {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let port = first + (x % u64::from(low - first)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// [`visit`] with extra request headers on every step (an `X-Forwarded-For`, an `Accept`).
pub fn visit_with(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    jar: &mut Jar,
    limit: Duration,
) -> Response {
    let start = Instant::now();
    let mut at = path.to_owned();
    let mut all = vec![("accept", "text/html")];
    all.extend_from_slice(headers);
    loop {
        let res = request(addr, "GET", &at, &all, b"", jar);
        match res.status {
            301 | 302 | 303 | 307 => {
                let to = res.header("location").unwrap().to_owned();
                at = to
                    .strip_prefix(&format!("http://{addr}"))
                    .map(str::to_owned)
                    .unwrap_or(to);
            }
            429 | 503 if start.elapsed() < limit => {
                std::thread::sleep(Duration::from_millis(100));
                at = path.to_owned();
            }
            _ => return res,
        }
    }
}

/// A visitor let in by the room (its jar holds the admission): visits `path` until the app
/// answers it `200`, or panics.
pub fn admitted(addr: SocketAddr, path: &str, limit: Duration) -> Jar {
    let mut jar = Jar::default();
    let res = visit(addr, path, &mut jar, limit);
    assert_eq!(res.status, 200, "not admitted to {path}: {}", res.text());
    jar
}

/// The values of header `name` as the app received it, from `/echo`'s answer.
pub fn echoed(res: &Response, name: &str) -> Vec<String> {
    let json = res.json();
    json["headers"]
        .as_array()
        .unwrap_or_else(|| panic!("not an /echo answer: {}", res.text()))
        .iter()
        .filter(|pair| pair[0] == name)
        .map(|pair| pair[1].as_str().unwrap().to_owned())
        .collect()
}

/// Every header name the app received, from `/echo`'s answer.
pub fn echoed_names(res: &Response) -> Vec<String> {
    res.json()["headers"]
        .as_array()
        .unwrap_or_else(|| panic!("not an /echo answer: {}", res.text()))
        .iter()
        .map(|pair| pair[0].as_str().unwrap().to_owned())
        .collect()
}

/// Reads an answer's status line and headers only (for `HEAD`, or a body read by hand); the
/// body is left empty.
pub fn read_head(r: &mut impl BufRead) -> Result<Response, String> {
    let mut line = String::new();
    r.read_line(&mut line).map_err(|e| e.to_string())?;
    if line.is_empty() {
        return Err("closed with no answer".into());
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not a status line: {line:?}"))?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).map_err(|e| e.to_string())?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').ok_or("a bad header line")?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    Ok(Response {
        status,
        headers,
        body: Vec::new(),
    })
}

/// A connection with `bytes` written on it, reads timing out after `limit`.
pub fn open_raw(addr: SocketAddr, bytes: &[u8], limit: Duration) -> BufReader<TcpStream> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(limit)).unwrap();
    s.write_all(bytes).unwrap();
    BufReader::new(s)
}

/// `bytes` gunzipped (by python3's gzip module: no Rust decoder among the test dependencies).
pub fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import gzip, sys; sys.stdout.buffer.write(gzip.decompress(sys.stdin.buffer.read()))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "not gzip: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Polls `check` every 50 ms until it holds or `limit` passes; whether it held.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if check() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What is left on a connection until the other side closes it: `Err` when it stays open
/// past the connection's read timeout (or is reset).
pub fn until_closed(r: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut rest = Vec::new();
    r.read_to_end(&mut rest)?;
    Ok(rest)
}

/// A visitor who joined the line through `addr` and waits there (`429` on the first visit's
/// redirect followed).
pub fn waiting(addr: SocketAddr, path: &str) -> Jar {
    let mut jar = Jar::default();
    let res = visit(addr, path, &mut jar, Duration::ZERO);
    assert_eq!(res.status, 429, "should wait: {}", res.text());
    jar
}

/// A gateway in front of an app, its admin on (`ADMIN_TOKEN`), with one room `sale` of
/// capacity 2 whose capacity follows the app (`2-50, p95 300ms, window 1s`): two visitors
/// inside and three in line.
pub struct AutoRoom {
    pub gw: Gateway,
    /// The two inside.
    pub inside: [Jar; 2],
    _waiting: Vec<Jar>,
}

impl AutoRoom {
    pub fn start(app: &App) -> AutoRoom {
        let rooms = format!(
            "[admin]\ntoken_env = \"WRG_TEST_ADMIN_TOKEN\"\n\n{}auto_capacity = \"2-50, p95 300ms, window 1s\"\n",
            sale_room(2)
        );
        let gw = Gateway::start_with(
            &config(&app.url(), &rooms),
            &[],
            &[("WRG_TEST_ADMIN_TOKEN", ADMIN_TOKEN)],
        );
        let addr = gw.addr;
        let inside = [admitted(addr, "/", SHORT), admitted(addr, "/", SHORT)];
        let _waiting = (0..3).map(|_| waiting(addr, "/")).collect();
        AutoRoom {
            gw,
            inside,
            _waiting,
        }
    }

    /// The room as the admin shows it.
    pub fn status(&self) -> serde_json::Value {
        request(
            self.gw.addr,
            "GET",
            "/__gateway/admin/rooms/sale",
            &[
                ("authorization", &format!("Bearer {ADMIN_TOKEN}")),
                ("accept", "application/json"),
            ],
            b"",
            &mut Jar::default(),
        )
        .json()
    }

    /// Quick requests from those inside (the first after a window decides it), until the
    /// room's status says `done`: whether it did within 10 s.
    pub fn requests_until(&mut self, done: impl Fn(&serde_json::Value) -> bool) -> bool {
        eventually(Duration::from_secs(10), || {
            for i in 0..10 {
                let res = get(self.gw.addr, "/", &mut self.inside[i % 2]);
                assert_eq!(res.status, 200, "{}", res.text());
            }
            std::thread::sleep(Duration::from_millis(100));
            done(&self.status())
        })
    }
}
