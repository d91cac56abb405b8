//! Redis CPU per 1 000 waiting polls (part 3 of the Redis-side measurements), over HTTP through a
//! layer: visitors join as a browser would, then poll the status endpoint over keep-alive
//! connections.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tower_waiting_room::store::{RedisStore, Store};
use tower_waiting_room::{SessionId, WaitingRoomLayer};

use super::calls::{command_calls, redis_cpu_us};
use crate::measure::round;
use crate::redis_server::RedisServer;
use crate::servers::{app, serve};
use crate::BoxError;

/// One answer over HTTP: status, `Set-Cookie` lines, `Location`, body.
struct Answer {
    status: StatusCode,
    set_cookies: Vec<String>,
    location: Option<String>,
    body: String,
}

async fn get(
    addr: SocketAddr,
    path: &str,
    cookies: &BTreeMap<String, String>,
) -> Result<Answer, BoxError> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut req = Request::get(path)
        .header(header::HOST, addr.to_string())
        .body(Empty::new())?;
    if let Some(c) = cookie_header(cookies) {
        req.headers_mut().insert(header::COOKIE, c);
    }
    let res = sender.send_request(req).await?;
    let status = res.status();
    let set_cookies = res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    let location = res
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok().map(str::to_owned));
    let body = res.into_body().collect().await?.to_bytes();
    Ok(Answer {
        status,
        set_cookies,
        location,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn cookie_header(cookies: &BTreeMap<String, String>) -> Option<HeaderValue> {
    if cookies.is_empty() {
        return None;
    }
    let s: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
    HeaderValue::from_str(&s.join("; ")).ok()
}

/// A browser's cookie jar: applies `Set-Cookie`s (`Max-Age=0` removes).
fn absorb(jar: &mut BTreeMap<String, String>, answer: &Answer) {
    for line in &answer.set_cookies {
        let Some((name, value)) = line.split(';').next().and_then(|nv| nv.split_once('=')) else {
            continue;
        };
        if line.to_ascii_lowercase().contains("max-age=0") {
            jar.remove(name.trim());
        } else {
            jar.insert(name.trim().to_owned(), value.trim().to_owned());
        }
    }
}

/// Redis CPU per 1 000 waiting polls through `layer`: `visitors` join its room over HTTP as a
/// browser would (first visit, the redirects, the waiting page; their cookies as the layer set
/// them), then poll its status endpoint `polls` times in all over keep-alive connections, one
/// per visitor, as fast as answers come. Redis's CPU time (`INFO cpu`) is read before and after.
///
/// Whatever store and gateway logic the layer has is what is measured: today each poll is one
/// script call; with waiting polls answered at the gateway it is the gateways' batched syncs.
/// `holder_store` is the layer's store: the slot's holder enters through it first (capacity 1
/// in the benchmark's room), so every visitor waits. The layer must have its per-session poll
/// limit off (`poll_limit(None)`): these visitors poll back to back, which the limit would
/// answer without the store.
pub(super) async fn waiting_poll_cost(
    layer: &WaitingRoomLayer,
    holder_store: &RedisStore,
    redis: &RedisServer,
    visitors: usize,
    polls: u64,
) -> Result<Map<String, Value>, BoxError> {
    let config = layer.config();
    let status_path = format!("{}/{}/status", config.path_prefix(), config.room());
    holder_store
        .enter(config.policy(), SessionId::random())
        .await?;
    let (addr, task) = serve(
        app()
            .fallback(|| async { StatusCode::NOT_FOUND })
            .layer(layer.clone()),
    )
    .await?;

    let mut jars = Vec::with_capacity(visitors);
    let mut last_jar = BTreeMap::new();
    for v in 0..visitors {
        let mut jar = BTreeMap::new();
        let mut path = "/".to_owned();
        for _ in 0..4 {
            let a = get(addr, &path, &jar).await?;
            absorb(&mut jar, &a);
            match a.location.filter(|_| a.status.is_redirection()) {
                Some(next) if next.starts_with('/') => path = next,
                _ => break,
            }
        }
        let a = get(addr, &status_path, &jar).await?;
        absorb(&mut jar, &a);
        if !a.body.contains("\"state\":\"waiting\"") {
            return Err(format!("visitor {v} is not waiting: {} {}", a.status, a.body).into());
        }
        jars.push(cookie_header(&jar).ok_or("a waiting visitor without cookies")?);
        last_jar = jar;
    }
    // The gateway's snapshot, refreshed once everyone has joined (a poll a second later): a
    // snapshot taken while they were joining does not place those who came after it, whose
    // polls go to the store until the next refresh, and the measured run lasts about a second.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    get(addr, &status_path, &last_jar).await?;

    // Redis at rest, for reference: its own background work per second.
    let idle0 = redis_cpu_us(redis)?;
    let t = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_per_s = (redis_cpu_us(redis)? - idle0) / t.elapsed().as_secs_f64();

    redis.command(&["CONFIG", "RESETSTAT"])?;
    let left = Arc::new(AtomicU64::new(polls));
    let bad = Arc::new(AtomicU64::new(0));
    let cpu0 = redis_cpu_us(redis)?;
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for cookie in jars {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let (left, bad, path) = (left.clone(), bad.clone(), status_path.clone());
        tasks.push(tokio::spawn(async move {
            let host = HeaderValue::from_str(&addr.to_string()).expect("address");
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                let mut req = Request::get(&path)
                    .body(Empty::<Bytes>::new())
                    .expect("request");
                req.headers_mut().insert(header::HOST, host.clone());
                req.headers_mut().insert(header::COOKIE, cookie.clone());
                let ok = match sender.send_request(req).await {
                    Ok(res) => {
                        let status = res.status();
                        let body = res.into_body().collect().await;
                        status == StatusCode::OK
                            && body.is_ok_and(|b| {
                                std::str::from_utf8(&b.to_bytes())
                                    .is_ok_and(|s| s.contains("\"state\":\"waiting\""))
                            })
                    }
                    Err(_) => false,
                };
                if !ok {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = redis_cpu_us(redis)? - cpu0;
    // Store calls: the room's functions, its tickets' among them (FCALL).
    let script_calls = command_calls(redis, "fcall");
    task.abort();
    let bad = bad.load(Ordering::Relaxed);
    if bad > 0 {
        return Err(format!("{bad} of {polls} waiting polls did not answer 200 waiting").into());
    }
    let per_1000 = cpu / polls as f64 * 1_000.0;
    eprintln!(
        "waiting polls: {polls} by {visitors} visitors in {elapsed:.2} s: Redis CPU {per_1000:.0} us per 1 000 polls, {:.2} script calls per poll (Redis at rest: {idle_per_s:.0} us/s)",
        script_calls as f64 / polls as f64
    );
    let mut m = Map::new();
    m.insert(
        "redis_us_per_waiting_poll".into(),
        json!(per_1000.round() as u64),
    );
    m.insert(
        "waiting_poll_cost".into(),
        json!({
            "unit": "Redis CPU us per 1 000 waiting polls",
            "polls": polls,
            "visitors": visitors,
            "polls_per_sec": round(polls as f64 / elapsed, 0),
            "script_calls_per_poll": round(script_calls as f64 / polls as f64, 3),
            "redis_at_rest_us_per_s": round(idle_per_s, 0),
        }),
    );
    Ok(m)
}
