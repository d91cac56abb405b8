//! Micro: in process, no network. Token signing and checking, the layer's own work per request
//! around a service that answers at once, cookie scanning; and the timing helpers they use.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{Empty, Full};
use serde_json::{json, Map, Value};
use tower::{Layer, Service};
use tower_waiting_room::__private::{AdmissionToken, QueueCookie};
use tower_waiting_room::{Admission, AdmittedBy, Keyring, SessionId, WaitingRoomLayer};

use super::edge;
use super::measure::{now_ms, round};
use super::servers::app;
use super::{BoxError, Settings};

struct NoopWake;
impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

/// Polls a future that is expected to be ready at once (nothing in these paths waits).
pub(crate) fn now_or_never<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(NoopWake));
    let mut cx = Context::from_waker(&waker);
    match pin!(f).poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the future was not ready"),
    }
}

/// Nanoseconds per call of `f`, the best of three batches (the least disturbed).
pub(crate) fn time_ns(iters: usize, mut f: impl FnMut(usize)) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for i in 0..iters {
            f(i);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    best
}

/// Nanoseconds per request through `svc` (poll_ready + call + the future), requests built
/// beforehand so only the service is timed; the best of three runs. `cookie` is called once per
/// batch (so admission tokens are always fresh); every answer must have status `expect`.
pub(crate) fn time_service<S, B>(
    iters: usize,
    svc: &mut S,
    cookie: impl Fn() -> Option<HeaderValue>,
    expect: StatusCode,
) -> Result<f64, BoxError>
where
    S: Service<Request<Empty<Bytes>>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
{
    let batch = iters.clamp(1, 20_000);
    let rounds = iters.div_ceil(batch);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut total = Duration::ZERO;
        for _ in 0..rounds {
            let cookie = cookie();
            let reqs: Vec<_> = (0..batch)
                .map(|_| {
                    let mut r = Request::get("/?page=1")
                        .body(Empty::<Bytes>::new())
                        .expect("request");
                    r.headers_mut()
                        .insert(header::HOST, HeaderValue::from_static("shop.example"));
                    if let Some(c) = &cookie {
                        r.headers_mut().insert(header::COOKIE, c.clone());
                    }
                    r
                })
                .collect();
            let mut out = Vec::with_capacity(batch);
            let t = Instant::now();
            for req in reqs {
                now_or_never(std::future::poll_fn(|cx| svc.poll_ready(cx))).expect("ready");
                out.push(now_or_never(svc.call(req)).expect("response"));
            }
            total += t.elapsed();
            if let Some(bad) = out.iter().find(|r| r.status() != expect) {
                return Err(format!("micro: expected {expect}, got {}", bad.status()).into());
            }
            drop(out);
        }
        best = best.min(total.as_nanos() as f64 / (rounds * batch) as f64);
    }
    Ok(best)
}

/// A service that answers at once: 200 to requests without an admission (the bare service) or
/// admitted by their token (the fast path), 202 to any other, so that a run that fell off the
/// fast path fails.
pub(crate) fn ok_inner() -> impl Service<
    Request<Empty<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future: Send + 'static,
> + Clone
       + Send
       + Sync
       + 'static {
    tower::service_fn(|req: Request<Empty<Bytes>>| async move {
        let by_token = req
            .extensions()
            .get::<Admission>()
            .is_none_or(|a| a.admitted_by() == AdmittedBy::Token);
        let mut res = Response::new(Full::new(Bytes::from_static(b"ok")));
        if !by_token {
            *res.status_mut() = StatusCode::ACCEPTED;
        }
        Ok::<_, Infallible>(res)
    })
}

pub(crate) fn micro_scenarios(
    settings: &Settings,
    keyring: &Keyring,
    layer: &WaitingRoomLayer,
) -> Result<Map<String, Value>, BoxError> {
    let iters = settings.micro_iters;
    let now = now_ms();
    let room = layer.config().room();
    let token = AdmissionToken::new(SessionId::random(), now, now + 300_000);
    let signed = token.sign(keyring, room);
    let queue = QueueCookie::for_session(SessionId::random(), now, 86_400_000);
    let queue_signed = queue.sign(keyring, room);

    let sign_ns = time_ns(iters, |_| {
        std::hint::black_box(token.sign(keyring, std::hint::black_box(room)));
    });
    let verify_ns = time_ns(iters, |_| {
        let v = AdmissionToken::verify(keyring, room, std::hint::black_box(&signed), now);
        assert!(v.is_some());
    });
    let queue_verify_ns = time_ns(iters, |_| {
        let v = QueueCookie::verify(keyring, room, std::hint::black_box(&queue_signed), now);
        assert!(v.is_some());
    });
    let random_ns = time_ns(iters, |_| {
        std::hint::black_box(SessionId::random());
    });

    // The layer in-process around a service that answers at once: what it adds per request.
    // The inner answers 200 only to requests without an admission (the bare service) or
    // admitted by their token (the fast path), so a run that fell off the fast path fails.
    let inner = ok_inner();
    let mut bare = inner.clone();
    let mut layered = layer.layer(inner);
    let admission_name = layer.config().cookies().admission_name();
    let fresh_token = || {
        let now = now_ms();
        AdmissionToken::new(SessionId::random(), now, now + 300_000).sign(keyring, room)
    };
    let token_cookie =
        || HeaderValue::from_str(&format!("{admission_name}={}", fresh_token())).ok();
    // A busy site's Cookie header: 20 other cookies (~1 KB) before the room's.
    let big_cookie = || {
        let mut big = String::new();
        for i in 0..20 {
            big.push_str(&format!("_site_cookie_{i}=v{i}-{}; ", "x".repeat(32)));
        }
        big.push_str(&format!("{admission_name}={}", fresh_token()));
        HeaderValue::from_str(&big).ok()
    };
    let bare_ns = time_service(iters, &mut bare, token_cookie, StatusCode::OK)?;
    let fast_ns = time_service(iters, &mut layered, token_cookie, StatusCode::OK)?;
    let fast_big_ns = time_service(iters, &mut layered, big_cookie, StatusCode::OK)?;
    let first_visit_ns = time_service(iters, &mut layered, || None, StatusCode::FOUND)?;
    // The same with the bench's axum app as the wrk servers run it (`Router::layer`: axum
    // boxes the layered route and its response body): the layer's cost in an axum app,
    // without the network's noise.
    let mut axum_plain = app();
    let mut axum_layered = app().layer(layer.clone());
    let axum_plain_ns = time_service(iters, &mut axum_plain, token_cookie, StatusCode::OK)?;
    let axum_fast_ns = time_service(iters, &mut axum_layered, token_cookie, StatusCode::OK)?;

    eprintln!(
        "micro: sign {sign_ns:.0} ns, verify {verify_ns:.0} ns, fast path in-process +{:.0} ns (20 more cookies +{:.0} ns), first visit +{:.0} ns; axum app {axum_plain_ns:.0} ns, behind the layer +{:.0} ns",
        fast_ns - bare_ns,
        fast_big_ns - fast_ns,
        first_visit_ns - bare_ns,
        axum_fast_ns - axum_plain_ns,
    );
    let mut m = edge::micro(settings, keyring)?;
    m.insert("token_sign_ns".into(), json!(round(sign_ns, 0)));
    m.insert("token_verify_ns".into(), json!(round(verify_ns, 0)));
    m.insert(
        "queue_cookie_verify_ns".into(),
        json!(round(queue_verify_ns, 0)),
    );
    m.insert("session_random_ns".into(), json!(round(random_ns, 0)));
    m.insert("bare_service_ns".into(), json!(round(bare_ns, 0)));
    m.insert("layer_fast_path_ns".into(), json!(round(fast_ns, 0)));
    m.insert(
        "layer_fast_path_overhead_ns".into(),
        json!(round(fast_ns - bare_ns, 0)),
    );
    m.insert(
        "cookie_scan_20_ns".into(),
        json!(round(fast_big_ns - fast_ns, 0)),
    );
    m.insert(
        "layer_first_visit_ns".into(),
        json!(round(first_visit_ns, 0)),
    );
    m.insert("axum_plain_ns".into(), json!(round(axum_plain_ns, 0)));
    m.insert(
        "layer_fast_path_axum_overhead_ns".into(),
        json!(round(axum_fast_ns - axum_plain_ns, 0)),
    );
    Ok(m)
}
