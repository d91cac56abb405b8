//! The HTTP scenarios: plain, fast path, cookie check and queue poll, interleaved round by
//! round, and the memory an open event stream holds beside an idle connection.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tower_waiting_room::__private::{AdmissionToken, QueueCookie};
use tower_waiting_room::store::snapshot::NEAR_HEAD;
use tower_waiting_room::store::{Decision, Store};
use tower_waiting_room::{Keyring, SessionId, WaitingRoomLayer};

use super::load::{load, Target};
use super::machine::ServerCpu;
use super::measure::{median, now_ms, round};
use super::servers::Servers;
use super::{BoxError, Settings, POLL_ROOM};

/// One fresh admission token per connection, as its `Cookie` header value, minted with the
/// public API exactly as the room does.
fn admission_cookies(layer: &WaitingRoomLayer, keyring: &Keyring, n: usize) -> Vec<HeaderValue> {
    let name = layer.config().cookies().admission_name();
    let now = now_ms();
    (0..n)
        .map(|_| {
            let token = AdmissionToken::new(SessionId::random(), now, now + 300_000);
            let value = token.sign(keyring, layer.config().room());
            HeaderValue::from_str(&format!("{name}={value}")).expect("cookie")
        })
        .collect()
}

pub(crate) async fn http_scenarios(
    settings: &Settings,
    servers: &Servers,
    keyring: &Keyring,
    cpu: &ServerCpu,
) -> Result<Map<String, Value>, BoxError> {
    // Queue poll: one visitor holds the only slot; every connection's visitor waits in line.
    let policy = servers.poll_layer.config().policy().clone();
    let holder = SessionId::random();
    servers.poll_store.enter(&policy, holder).await?;
    // The polling waiters stand behind others (more than NEAR_HEAD), as most of a long line
    // does: their polls are answered from the gateway's snapshot, by the place in their
    // cookie (which the store's answer to their joining gives).
    for _ in 0..2 * NEAR_HEAD {
        servers
            .poll_store
            .enter(&policy, SessionId::random())
            .await?;
    }
    let (waiters, poll_cookies) = in_line(servers, keyring, settings.connections).await?;
    let poll_path: &'static str =
        Box::leak(format!("/__waitingroom/{POLL_ROOM}/status").into_boxed_str());

    let mut runs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut cpu_runs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut errors = 0;
    for round in 0..settings.repeats {
        for &w in &waiters {
            match servers.poll_store.enter(&policy, w).await? {
                Decision::Waiting { .. } => {}
                other => return Err(format!("a poll visitor is not waiting: {other:?}").into()),
            }
        }
        let no_cookie = || Arc::new(Vec::new());
        // Fresh admission tokens, minted right before each run: younger than `refresh` (15 s)
        // for the whole run. Plain gets the very same Cookie header as the fast path, so both
        // servers parse the same bytes; the plain router simply ignores it.
        let tokens = || {
            Arc::new(admission_cookies(
                &servers.fast_layer,
                keyring,
                settings.connections,
            ))
        };
        #[allow(clippy::type_complexity)]
        let scenarios: [(
            &str,
            SocketAddr,
            &'static str,
            &dyn Fn() -> Arc<Vec<HeaderValue>>,
            StatusCode,
        ); 5] = [
            ("plain", servers.plain, "/", &tokens, StatusCode::OK),
            ("fast_path", servers.layered, "/", &tokens, StatusCode::OK),
            ("plain", servers.plain, "/", &no_cookie, StatusCode::OK),
            (
                "cookie_check",
                servers.layered,
                "/",
                &no_cookie,
                StatusCode::FOUND,
            ),
            (
                "queue_poll",
                servers.poll,
                poll_path,
                &|| Arc::new(poll_cookies.clone()),
                StatusCode::OK,
            ),
        ];
        for (name, addr, path, cookies, expect) in scenarios {
            let r = load(
                settings,
                &Target {
                    addr,
                    path,
                    cookies: cookies(),
                    expect,
                },
                cpu,
            )
            .await?;
            eprintln!(
                "round {}/{}: {name:<13} {:>9.0} req/s  server CPU {:>6.2} us/req{}",
                round + 1,
                settings.repeats,
                r.rps,
                r.cpu_us,
                if r.errors > 0 {
                    format!("  ({} unexpected answers)", r.errors)
                } else {
                    String::new()
                }
            );
            errors += r.errors;
            runs.entry(name).or_default().push(r.rps);
            cpu_runs.entry(name).or_default().push(r.cpu_us);
        }
    }
    // A poll answered "waiting" (not "unknown"): the scenario measured what it claims.
    let check = http_get_status_body(servers.poll, poll_path, &poll_cookies[0]).await?;
    if !check.contains("\"state\":\"waiting\"") {
        return Err(format!("queue poll answered {check}").into());
    }

    let mut m = Map::new();
    // `plain` ran twice per round (before the fast path and before the cookie check): each
    // layered run is compared with the plain run right before it.
    let plain_all = &runs["plain"];
    let plain_a: Vec<f64> = plain_all.iter().step_by(2).copied().collect();
    let plain_b: Vec<f64> = plain_all.iter().skip(1).step_by(2).copied().collect();
    let plain_rps = median(plain_all);
    m.insert("plain_rps".into(), json!(round(plain_rps, 0)));
    for (name, plain) in [
        ("fast_path", &plain_a),
        ("cookie_check", &plain_b),
        ("queue_poll", &plain_b),
    ] {
        let rps = median(&runs[name]);
        let paired: Vec<f64> = runs[name]
            .iter()
            .zip(plain.iter())
            .map(|(l, p)| l / p)
            .collect();
        m.insert(format!("{name}_rps"), json!(round(rps, 0)));
        m.insert(format!("{name}_ratio"), json!(round(median(&paired), 3)));
    }
    let cpu_plain = median(&cpu_runs["plain"]);
    m.insert("plain_cpu_us".into(), json!(round(cpu_plain, 2)));
    for name in ["fast_path", "cookie_check", "queue_poll"] {
        let c = median(&cpu_runs[name]);
        m.insert(format!("{name}_cpu_us"), json!(round(c, 2)));
        m.insert(
            format!("{name}_cpu_ratio"),
            json!(round(if c > 0.0 { cpu_plain / c } else { 0.0 }, 3)),
        );
    }
    m.insert("http_errors".into(), json!(errors));
    m.extend(event_streams(settings, servers, keyring).await?);
    m.insert(
        "http_runs".into(),
        json!({ "rps": runs, "server_cpu_us": cpu_runs }),
    );
    Ok(m)
}

/// `count` more visitors in the poll room's line, as the store placed them: their sessions,
/// and their queue cookies (`Cookie` header values) carrying their places.
async fn in_line(
    servers: &Servers,
    keyring: &Keyring,
    count: usize,
) -> Result<(Vec<SessionId>, Vec<HeaderValue>), BoxError> {
    let policy = servers.poll_layer.config().policy();
    let q_name = servers.poll_layer.config().cookies().queue_name();
    let now = now_ms();
    let mut waiters = Vec::with_capacity(count);
    let mut cookies = Vec::with_capacity(count);
    for _ in 0..count {
        let session = SessionId::random();
        waiters.push(session);
        let Decision::Waiting {
            place: Some(place), ..
        } = servers.poll_store.enter(policy, session).await?
        else {
            return Err("a poll visitor did not get a place".into());
        };
        let value = QueueCookie::for_session(session, now, 86_400_000)
            .with_place(place)
            .sign(keyring, POLL_ROOM);
        cookies.push(HeaderValue::from_str(&format!("{q_name}={value}"))?);
    }
    Ok((waiters, cookies))
}

/// Memory per open event stream (`GET .../events`, Server-Sent Events fed by the gateway's
/// snapshot), next to memory per idle keep-alive connection that made one status poll, side
/// by side on the same server. Both figures are the whole process's resident memory growth
/// over the connections opened (client sockets included, as the server's): the stream's own
/// cost is the difference. Each stream is a waiter of its own (a session holds two at most).
async fn event_streams(
    settings: &Settings,
    servers: &Servers,
    keyring: &Keyring,
) -> Result<Map<String, Value>, BoxError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let n = match settings.mode {
        "smoke" => 50,
        "quick" => 1_000,
        _ => 4_000,
    };
    let addr = servers.poll;
    let (_, cookies) = in_line(servers, keyring, n).await?;
    let request = |path: &str, cookie: &HeaderValue| {
        format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nCookie: {}\r\n\r\n",
            cookie.to_str().unwrap_or_default()
        )
    };
    let events: Vec<String> = cookies
        .iter()
        .map(|c| request(&format!("/__waitingroom/{POLL_ROOM}/events"), c))
        .collect();
    let status: Vec<String> = cookies
        .iter()
        .map(|c| request(&format!("/__waitingroom/{POLL_ROOM}/status"), c))
        .collect();
    // Opens a connection per request of `reqs`, each read until `until` arrives; kept open.
    let open = |reqs: Vec<String>, until: &'static str| async move {
        let mut held = Vec::with_capacity(n);
        for req in reqs {
            let mut s = tokio::net::TcpStream::connect(addr).await?;
            s.write_all(req.as_bytes()).await?;
            let mut got = Vec::new();
            let mut buf = [0u8; 2048];
            while !String::from_utf8_lossy(&got).contains(until) {
                let k = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await??;
                if k == 0 {
                    return Err::<_, BoxError>(
                        format!("closed before {until:?}: {}", String::from_utf8_lossy(&got))
                            .into(),
                    );
                }
                got.extend_from_slice(&buf[..k]);
            }
            held.push(s);
        }
        Ok(held)
    };
    let settle = || tokio::time::sleep(Duration::from_millis(300));
    settle().await;
    let before = resident_bytes();
    let idle = open(status, "\"state\":\"waiting\"").await?;
    settle().await;
    let with_idle = resident_bytes();
    let streams = open(events, "\"state\":\"waiting\"").await?;
    // Each stream has looked at the snapshot a few times (one refresh a second).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let with_streams = resident_bytes();
    let per = |a: u64, b: u64| round(b.saturating_sub(a) as f64 / n as f64, 0);
    let mut m = Map::new();
    m.insert("event_streams_open".into(), json!(streams.len()));
    m.insert(
        "idle_connection_bytes".into(),
        json!(per(before, with_idle)),
    );
    m.insert(
        "event_stream_bytes".into(),
        json!(per(with_idle, with_streams)),
    );
    eprintln!(
        "event streams: {n} open, {} bytes each (an idle keep-alive connection: {} bytes)",
        per(with_idle, with_streams),
        per(before, with_idle)
    );
    drop((idle, streams));
    Ok(m)
}

/// This process's resident memory, from `/proc/self/statm` (0 where there is none).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4_096)
}

async fn http_get_status_body(
    addr: SocketAddr,
    path: &str,
    cookie: &HeaderValue,
) -> Result<String, BoxError> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = Request::get(path)
        .header(header::HOST, addr.to_string())
        .header(header::COOKIE, cookie.clone())
        .body(Empty::new())?;
    let res = sender.send_request(req).await?;
    let body = res.into_body().collect().await?.to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}
