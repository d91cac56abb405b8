//! What every part measures with: the wall clock in milliseconds, medians, percentiles and
//! rounding, and operations per second from concurrent tasks.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::Settings;

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub(crate) fn median(v: &[f64]) -> f64 {
    percentile(v, 50.0)
}

pub(crate) fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = (p / 100.0 * (s.len() - 1) as f64).round() as usize;
    s[rank.min(s.len() - 1)]
}

pub(crate) fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// `script_concurrency` tasks calling `op(i)` in a loop; operations per second after warm-up.
/// Panics (failing the bench) if an operation does not give the expected answer.
pub(crate) async fn concurrent_ops<F, Fut>(settings: &Settings, op: F) -> f64
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..settings.script_concurrency as u64 {
        let (op, done, bad, stop) = (op.clone(), done.clone(), bad.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while !stop.load(Ordering::Relaxed) {
                if op(i).await {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
        }));
    }
    tokio::time::sleep(settings.warmup).await;
    let (n0, t0) = (done.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(settings.run).await;
    let (n1, elapsed) = (done.load(Ordering::Relaxed), t0.elapsed());
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let bad = bad.load(Ordering::Relaxed);
    assert_eq!(bad, 0, "{bad} script calls gave an unexpected answer");
    (n1 - n0) as f64 / elapsed.as_secs_f64()
}
