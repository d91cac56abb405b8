//! The load generator: raw hyper HTTP/1.1 connections in process, each sending its next request
//! as soon as the previous answer is read (closed loop), counted for a fixed time after a warm-up.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{header, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

use super::machine::ServerCpu;
use super::{BoxError, Settings};

/// What one connection sends: the same request over and over.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) addr: SocketAddr,
    pub(crate) path: &'static str,
    /// One `Cookie` value per connection (cycled), or none.
    pub(crate) cookies: Arc<Vec<HeaderValue>>,
    pub(crate) expect: StatusCode,
}

pub(crate) struct LoadResult {
    pub(crate) rps: f64,
    /// Server CPU time per request, in microseconds.
    pub(crate) cpu_us: f64,
    pub(crate) errors: u64,
}

/// Runs `connections` closed-loop HTTP/1.1 connections against `target`: warm-up, then counts
/// answers for `settings.run`.
pub(crate) async fn load(
    settings: &Settings,
    target: &Target,
    cpu: &ServerCpu,
) -> Result<LoadResult, BoxError> {
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..settings.connections {
        let stream = tokio::net::TcpStream::connect(target.addr).await?;
        stream.set_nodelay(true)?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let cookie =
            (!target.cookies.is_empty()).then(|| target.cookies[c % target.cookies.len()].clone());
        let (done, errors, stop, target) =
            (done.clone(), errors.clone(), stop.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            let host = HeaderValue::from_str(&target.addr.to_string()).expect("address");
            while !stop.load(Ordering::Relaxed) {
                let mut req = Request::get(target.path)
                    .body(Empty::<Bytes>::new())
                    .expect("request");
                req.headers_mut().insert(header::HOST, host.clone());
                if let Some(cookie) = &cookie {
                    req.headers_mut().insert(header::COOKIE, cookie.clone());
                }
                if sender.ready().await.is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                match sender.send_request(req).await {
                    Ok(res) => {
                        let ok = res.status() == target.expect;
                        let body = res.into_body().collect().await;
                        if ok && body.is_ok() {
                            done.fetch_add(1, Ordering::Relaxed);
                        } else {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }));
    }
    tokio::time::sleep(settings.warmup).await;
    let (n0, c0, t0) = (done.load(Ordering::Relaxed), cpu.ns(), Instant::now());
    tokio::time::sleep(settings.run).await;
    let (n1, e1, c1, elapsed) = (
        done.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        cpu.ns(),
        t0.elapsed(),
    );
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let n = n1 - n0;
    Ok(LoadResult {
        rps: n as f64 / elapsed.as_secs_f64(),
        cpu_us: if n == 0 {
            0.0
        } else {
            c1.saturating_sub(c0) as f64 / 1_000.0 / n as f64
        },
        errors: e1, // every unexpected answer counts, warm-up included
    })
}
