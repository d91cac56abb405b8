//! [`Proxy`]: passes a request on to the app and its answer back, as a reverse proxy should.
//!
//! - Bodies stream both ways (nothing is buffered), over pooled keep-alive connections
//!   (hyper-util's client).
//! - Hop-by-hop headers are removed both ways (`headers.rs`); the `X-Forwarded-*` and
//!   `Forwarded` headers are set before the request gets here, by
//!   [`forward`](crate::forwarded::forward), since the room needs the client IP first.
//! - A WebSocket handshake is passed on, and once the app switches protocols the two
//!   connections are joined (`upgrade.rs`); no other upgrade is (`h2c` would hand the client a
//!   connection to the app that no room sees), and an app that switches protocols unasked is a
//!   `502`.
//! - The app unreachable, or answering what is not HTTP: `502`; no answer's head within the
//!   upstream timeout of the app's time (the request's, less what it waited for its client to
//!   send the body): `504` ([`Problem`]). Never a hang, never a `500`. A client's body cut
//!   short, too slow or too large is the client's (`400`, `408`, `413`), and a room measuring
//!   the app is told so ([`Measured`]), with the app's own time for a request with a body
//!   (`body.rs`).
//! - Several upstreams take turns.
//! - Each serving worker keeps its own pool of connections to the app (as each nginx worker
//!   does): a request is sent on a connection its own thread drives, with no hand-over
//!   between threads.

mod body;
mod headers;
mod upgrade;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri, Version};
use http_body::Body;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tower::Service;
use tower_waiting_room::auto::Measured;

use self::body::{ClientBody, Sent};
pub(crate) use headers::{is_upgrade, remove_hop_by_hop};

use crate::config::Upstream;
use crate::pages::Problem;

/// Any error a body may have.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body sent to the app.
type OutBody = UnsyncBoxBody<Bytes, BoxError>;

/// The body of a proxied response: the app's, streamed, or the gateway's own page.
pub type ProxyBody = Either<Incoming, Full<Bytes>>;

/// How the proxy reaches the app.
#[derive(Clone, Debug)]
pub struct ProxySettings {
    /// The app's addresses; requests take turns.
    pub upstreams: Vec<Upstream>,
    /// Time for the app to answer a request's head.
    pub timeout: Duration,
    /// Time to open a connection to the app.
    pub connect_timeout: Duration,
    /// Idle keep-alive connections kept per upstream (by each worker).
    pub idle_per_upstream: usize,
    /// How long an idle keep-alive connection is kept before the gateway closes it.
    pub idle_timeout: Duration,
    /// The serving workers, each with a pool of its own.
    pub workers: usize,
}

/// The reverse proxy, a `tower::Service`; cheap to clone (its clients and their pools shared).
#[derive(Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

type UpstreamClient = Client<HttpConnector, OutBody>;

struct Inner {
    /// One client per serving worker, made on its first request (inside the worker's runtime,
    /// where the client spawns its connections' tasks), and one more for any other thread.
    clients: Box<[OnceLock<UpstreamClient>]>,
    connect_timeout: Duration,
    idle_per_upstream: usize,
    idle_timeout: Duration,
    upstreams: Vec<Upstream>,
    next: AtomicUsize,
    timeout: Duration,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("upstreams", &self.inner.upstreams)
            .field("timeout", &self.inner.timeout)
            .finish()
    }
}

impl Proxy {
    /// A proxy to `settings.upstreams` (at least one).
    pub fn new(settings: ProxySettings) -> Self {
        assert!(!settings.upstreams.is_empty(), "a proxy needs an upstream");
        Self {
            inner: Arc::new(Inner {
                clients: (0..=settings.workers).map(|_| OnceLock::new()).collect(),
                connect_timeout: settings.connect_timeout,
                idle_per_upstream: settings.idle_per_upstream,
                idle_timeout: settings.idle_timeout,
                upstreams: settings.upstreams,
                next: AtomicUsize::new(0),
                timeout: settings.timeout,
            }),
        }
    }

    fn upstream(&self) -> &Upstream {
        let n = self.inner.upstreams.len();
        let i = if n == 1 {
            0
        } else {
            self.inner.next.fetch_add(1, Ordering::Relaxed) % n
        };
        &self.inner.upstreams[i]
    }
}

impl Inner {
    /// The client of the worker running this thread.
    fn client(&self) -> &UpstreamClient {
        let last = self.clients.len() - 1;
        let slot = crate::workers::current().map_or(last, |w| w.min(last));
        self.clients[slot].get_or_init(|| {
            let mut connector = HttpConnector::new();
            connector.set_connect_timeout(Some(self.connect_timeout));
            connector.set_nodelay(true);
            connector.enforce_http(true);
            Client::builder(TokioExecutor::new())
                .timer(TokioTimer::new())
                .pool_timer(TokioTimer::new())
                .pool_idle_timeout(self.idle_timeout)
                .pool_max_idle_per_host(self.idle_per_upstream)
                .build(connector)
        })
    }
}

impl<B> Service<Request<B>> for Proxy
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let upstream = self.upstream().clone();
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { Ok(forward(&inner, &upstream, req).await) })
    }
}

async fn forward<B>(inner: &Inner, upstream: &Upstream, req: Request<B>) -> Response<ProxyBody>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    // All an error page needs of the request: a reference to its `Accept` value's bytes.
    let accept = req.headers().get(http::header::ACCEPT).cloned();
    let asked = accept.as_ref();
    let upgrading = is_upgrade(req.method(), req.headers());
    let mut req = req;
    let client_side = upgrading.then(|| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    let mut uri = Uri::builder()
        .scheme(upstream.scheme.clone())
        .authority(upstream.authority.clone());
    if let Some(pq) = parts.uri.path_and_query() {
        uri = uri.path_and_query(pq.clone());
    }
    parts.uri = match uri.build() {
        Ok(uri) => uri,
        Err(_) => {
            return page(
                Problem::BadRequest("The request's target is not valid."),
                asked,
            )
        }
    };
    parts.version = Version::HTTP_11;
    // Read before the hop-by-hop headers go: `Transfer-Encoding` is one of them.
    let with_body = has_body(&parts.headers);
    remove_hop_by_hop(&mut parts.headers, upgrading);
    // A request with a body: the time spent waiting for its client is not the app's.
    let (body, upload) = if with_body {
        let (body, upload) = Sent::new(body);
        (body.boxed_unsync(), Some(upload))
    } else {
        // None, said as none: the client's body (empty, as its head says) behind tower-http's
        // wrappers tells hyper no size, and hyper would send it chunked, a `0` chunk that turns
        // an `OPTIONS` or a `DELETE` into a request with a body, and one the apps that refuse
        // chunked requests answer `411`.
        drop(body);
        (
            http_body_util::Empty::new()
                .map_err(|never| match never {})
                .boxed_unsync(),
            None,
        )
    };
    let out = Request::from_parts(parts, body);

    let request = inner.client().request(out);
    let (answered, app_took) = match upload {
        None => (
            tokio::time::timeout(inner.timeout, request).await.ok(),
            None,
        ),
        Some(upload) => apps_time(request, &upload, inner.timeout).await,
    };
    let mut res = match answered {
        None => {
            tracing::warn!(%upstream, "the app did not answer in time");
            count("timeout");
            return page(Problem::GatewayTimeout, asked);
        }
        Some(Err(e)) => {
            let problem = classify(&e);
            if problem == Problem::BadGateway {
                tracing::warn!(%upstream, error = %chain(&e), "the app could not be reached");
                count(if e.is_connect() {
                    "connect"
                } else {
                    "protocol"
                });
            }
            return page(problem, asked);
        }
        Some(Ok(res)) => res,
    };
    match (client_side, res.status()) {
        (Some(client_side), http::StatusCode::SWITCHING_PROTOCOLS) => {
            upgrade::join(client_side, hyper::upgrade::on(&mut res));
            remove_hop_by_hop(res.headers_mut(), true);
        }
        (None, http::StatusCode::SWITCHING_PROTOCOLS) => {
            tracing::warn!(%upstream, "the app switched protocols unasked");
            count("protocol");
            return page(Problem::BadGateway, asked);
        }
        _ => remove_hop_by_hop(res.headers_mut(), false),
    }
    // An app that answers in HTTP/1.0 (Python's http.server does) must not make the gateway
    // answer its clients in 1.0 too, closing every kept-alive connection after one answer.
    *res.version_mut() = Version::HTTP_11;
    if let Some(took) = app_took {
        res.extensions_mut().insert(Measured::AppTook(took));
    }
    res.map(Either::Left)
}

/// Whether an HTTP/1.1 request has a body: its head says a length other than 0, or a transfer
/// coding (the only request the gateway serves; a `GET` says neither). Its body's wrappers do
/// not tell (tower-http's timeout does not report an end).
fn has_body(headers: &http::HeaderMap) -> bool {
    headers.contains_key(http::header::TRANSFER_ENCODING)
        || headers
            .get(http::header::CONTENT_LENGTH)
            .is_some_and(|n| n.as_bytes() != b"0")
}

/// The answer to `request` (`None`: the app's time ran out), and the app's time until it: the
/// request's time less what it spent waiting for its client to send the body (`upload`). The
/// upstream timeout bounds the app's time only: a client's slow upload is bounded by the body's
/// own timeouts (between two of its parts, and the whole request's), and an app that stops
/// reading the body (hyper no longer asking for it) runs out of time as one that does not
/// answer.
async fn apps_time<F: Future>(
    request: F,
    upload: &body::Upload,
    timeout: Duration,
) -> (Option<F::Output>, Option<Duration>) {
    let start = tokio::time::Instant::now();
    let apps = |now: tokio::time::Instant| (now - start).saturating_sub(upload.client_time(now));
    let mut request = std::pin::pin!(request);
    loop {
        let left = timeout.saturating_sub(apps(tokio::time::Instant::now()));
        if left.is_zero() {
            return (None, None);
        }
        // Wakes when the app's time could have run out: later, if the client kept it waiting
        // meanwhile.
        tokio::select! {
            biased;
            answer = &mut request => {
                return (Some(answer), Some(apps(tokio::time::Instant::now())));
            }
            () = tokio::time::sleep(left) => {}
        }
    }
}

/// What a failed call to the app means for the visitor: a body past the limit, too slow to
/// arrive or cut short is the client's (`413`, `408`, `400`); anything else is the app's
/// (`502`).
fn classify(e: &hyper_util::client::legacy::Error) -> Problem {
    let mut clients = false;
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return Problem::TooLarge;
        }
        if err.is::<tower_http::timeout::TimeoutError>() {
            return Problem::BodyTimeout;
        }
        clients |= err.is::<ClientBody>();
        source = err.source();
    }
    if clients {
        Problem::IncompleteBody
    } else {
        Problem::BadGateway
    }
}

/// An error with its causes, for the log.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(err) = source {
        text.push_str(": ");
        text.push_str(&err.to_string());
        source = err.source();
    }
    text
}

/// The failures of the app the proxy counts, by their `reason` label.
const UPSTREAM_ERRORS: &str = "waiting_room_gateway_upstream_errors_total";
const REASONS: [&str; 3] = ["connect", "protocol", "timeout"];

fn count(reason: &'static str) {
    debug_assert!(REASONS.contains(&reason), "{reason}");
    metrics::counter!(UPSTREAM_ERRORS, "reason" => reason).increment(1);
}

/// Describes the proxy's metrics to the recorder and shows each at zero from the start: a
/// series that appears only at the first failure breaks a rate and an alert on its absence.
pub(crate) fn register_metrics() {
    metrics::describe_counter!(
        UPSTREAM_ERRORS,
        "Requests the app failed: not reached (connect), not HTTP (protocol), no answer in time (timeout)."
    );
    for reason in REASONS {
        metrics::counter!(UPSTREAM_ERRORS, "reason" => reason).increment(0);
    }
}

/// The gateway's page for `problem`; one that is the client's doing tells a room measuring the
/// app not to count it.
fn page(problem: Problem, accept: Option<&http::HeaderValue>) -> Response<ProxyBody> {
    let mut res = problem.response_to(accept);
    if problem.is_clients() {
        res.extensions_mut().insert(Measured::ClientFault);
    }
    res.map(Either::Right)
}
