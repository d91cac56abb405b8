//! The gateway's service, layer by layer, built from a checked [`Config`].
//!
//! ```text
//! request ─► tower-http: sensitive headers marked, x-request-id set, traced, id echoed back
//!         ─► guard (Host, CONNECT)                  ─► 400 / 405
//!         ─► the gateway's own paths: health, metrics, admin
//!         ─► forwarding headers, the client IP
//!         ─► tower-http: body limit (413), body timeout (408), compression of the room's pages
//!         ─► the rooms (the crate's `WaitingRooms`: lines, admission, gates, bypass)
//!         ─► the proxy to the app                   ─► 502 / 504
//! ```
//!
//! A [`Stack`] is rebuilt on every reload; what must outlive a reload (the store with its
//! lines, the health's draining flag, the metrics recorder) is [`Shared`].

use std::convert::Infallible;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpInfo;
use ipnet::IpNet;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_http::body::Limited;
use tower_http::compression::predicate::{DefaultPredicate, Predicate};
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::sensitive_headers::{
    SetSensitiveRequestHeadersLayer, SetSensitiveResponseHeadersLayer,
};
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutBody};
use tower_http::trace::{DefaultOnFailure, TraceLayer};
use tower_waiting_room::admin::AdminService;
use tower_waiting_room::control::SharedCounts;
use tower_waiting_room::routing::{Rule, WaitingRooms};
use tower_waiting_room::store::Store;
use tower_waiting_room::WaitingRoomLayer;

use crate::config::{BearerToken, Config, FileError, Paths, RoomPlan};
use crate::forwarded::{self, ClientAddr};
use crate::guard;
use crate::pages::Problem;
use crate::proxy::{BoxError, Proxy, ProxySettings};
use crate::service::{ArcFuture, ArcService};

/// What the rooms and the proxy get: the visitor's body within the limit and the timeout.
type SiteRequest = Request<TimeoutBody<Limited<Incoming>>>;

type SiteService = ArcService<Request<Incoming>, Response<GatewayBody>>;

/// Every body the gateway answers with.
pub type GatewayBody = UnsyncBoxBody<Bytes, BoxError>;

/// The gateway as one service, as [`serve`](tower_waiting_room::serve::serve) takes it.
pub type GatewayService = ArcService<Request<Incoming>, Response<GatewayBody>>;

/// What outlives a reload.
#[derive(Clone)]
pub struct Shared {
    /// The store every room of every version of the file uses: the lines live here.
    pub store: Arc<dyn Store>,
    /// Set when the gateway is shutting down: the health check answers `503` so that load
    /// balancers stop sending new visitors while the ones in flight finish.
    pub draining: Arc<AtomicBool>,
}

/// One version of the file, built.
pub struct Stack {
    /// The service.
    pub service: GatewayService,
    /// Its rooms, in the file's order.
    pub rooms: Vec<WaitingRoomLayer>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rooms: Vec<&str> = self.rooms.iter().map(|r| r.config().room()).collect();
        f.debug_struct("Stack").field("rooms", &rooms).finish()
    }
}

/// Builds the gateway for `config`; a room the crate refuses (a missing secret, a rule two
/// rooms share) is an error naming its line.
pub fn build(config: &Config, shared: &Shared) -> Result<Stack, FileError> {
    let mut rooms = Vec::with_capacity(config.rooms.len());
    for plan in &config.rooms {
        rooms.push(room(plan, &shared.store, &config.path)?);
    }
    let routing = routing(config, &rooms)?;
    let admin = match &config.admin_token {
        Some(token) => Some(
            rooms
                .iter()
                .fold(
                    AdminService::builder()
                        .bearer_token(&token.0)
                        .prefix(config.paths.admin.clone()),
                    |b, r| b.room(r.control()),
                )
                .build()
                .map_err(|e| FileError::whole(&config.path, format!("admin: {e}")))?,
        ),
        None => None,
    };
    let proxy = Proxy::new(ProxySettings {
        upstreams: config.upstreams.clone(),
        timeout: config.limits.upstream_timeout,
        connect_timeout: config.limits.connect_timeout,
        idle_per_upstream: config.limits.upstream_idle_connections,
        idle_timeout: config.limits.upstream_idle_timeout,
        workers: config.workers.get(),
    });
    let site = match routing {
        Some(rooms) => site(rooms, proxy, &config.limits),
        None => site(tower::layer::util::Identity::new(), proxy, &config.limits),
    };
    let front = Front {
        site,
        own: Arc::new(Own {
            paths: config.paths.clone(),
            trusted: config.trusted_proxies.clone(),
            admin,
            metrics_token: config.metrics_token.clone(),
            counts: rooms.iter().map(SharedCounts::new).collect(),
            draining: Arc::clone(&shared.draining),
            max_body_bytes: config.limits.max_body_bytes,
        }),
    };
    let service = ServiceBuilder::new()
        .map_response(|res: Response<_>| res.map(box_body))
        .layer(SetSensitiveRequestHeadersLayer::new([
            header::AUTHORIZATION,
            header::PROXY_AUTHORIZATION,
            header::COOKIE,
        ]))
        .map_request(fit_request_id)
        .layer(SetRequestIdLayer::x_request_id(MakeId::new()))
        .layer(
            // A 5xx the gateway answers itself (a full line, a closed sale, the app away) is
            // the room at work, not a fault of the gateway: tower-http's default logs each at
            // ERROR, a flood in a sale. Failures of the app are logged by the proxy, once.
            TraceLayer::new_for_http()
                .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetSensitiveResponseHeadersLayer::new([header::SET_COOKIE]))
        .service(front);
    Ok(Stack {
        service: ArcService::new(service),
        rooms,
    })
}

/// The part of the gateway behind the forwarding headers: tower-http's body limit, body
/// timeout and compression, around `rooms` (or nothing) around the proxy.
fn site<L, B>(rooms: L, proxy: Proxy, limits: &crate::config::Limits) -> SiteService
where
    L: tower::Layer<Proxy>,
    L::Service: Service<SiteRequest, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as Service<SiteRequest>>::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError> + Send + 'static,
{
    let body_limit = usize::try_from(limits.max_body_bytes).unwrap_or(usize::MAX);
    ArcService::new(
        ServiceBuilder::new()
            .map_response(|res: Response<_>| res.map(box_body))
            .layer(RequestBodyLimitLayer::new(body_limit))
            .layer(RequestBodyTimeoutLayer::new(limits.body_timeout))
            .layer(CompressionLayer::new().compress_when(DefaultPredicate::new().and(OwnAnswers)))
            .layer(rooms)
            .service(proxy),
    )
}

fn box_body<B>(body: B) -> GatewayBody
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(Into::into).boxed_unsync()
}

/// One room, from its settings and routes.
fn room(
    plan: &RoomPlan,
    store: &Arc<dyn Store>,
    path: &Path,
) -> Result<WaitingRoomLayer, FileError> {
    let name = plan.settings.room().to_owned();
    let refused = |e: &dyn std::fmt::Display| {
        FileError::at_line(path, plan.line, format!("room `{name}`: {e}"))
    };
    let mut builder = plan
        .settings
        .builder()
        .map_err(|e| refused(&e))?
        .shared_store(Arc::clone(store))
        .client_ip_with(|req| req.extensions().get::<ClientAddr>().map(|c| c.0));
    if !plan.bypass.is_empty() {
        let bypass = plan.bypass.clone();
        builder = builder.bypass(move |req| bypass.iter().any(|p| under(req.path(), p)));
    }
    builder.build().map_err(|e| refused(&e))
}

/// `path` is `prefix` or below it, by segments (`/static` covers `/static/app.js`, not
/// `/statics`).
fn under(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    prefix.is_empty()
        || path == prefix
        || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'/'))
}

/// The rooms' routes and gates as one `WaitingRooms` layer; `None` with no room (a plain
/// proxy).
fn routing(config: &Config, rooms: &[WaitingRoomLayer]) -> Result<Option<WaitingRooms>, FileError> {
    if rooms.is_empty() {
        return Ok(None);
    }
    let mut builder = WaitingRooms::builder();
    for (plan, layer) in config.rooms.iter().zip(rooms) {
        if plan.is_default() {
            builder = builder.default_room(layer.clone());
        } else {
            let paths: Vec<&str> = if plan.paths.is_empty() {
                vec!["/"]
            } else {
                plan.paths.iter().map(String::as_str).collect()
            };
            let hosts: Vec<Option<&str>> = if plan.hosts.is_empty() {
                vec![None]
            } else {
                plan.hosts.iter().map(|h| Some(h.as_str())).collect()
            };
            for host in &hosts {
                for path in &paths {
                    let rule = match host {
                        Some(host) => Rule::host(*host).with_path_prefix(*path),
                        None => Rule::path_prefix(*path),
                    };
                    builder = builder.room(rule, layer.clone());
                }
            }
        }
        for (methods, pattern) in &plan.gates {
            let mut rule = Rule::path(pattern.clone());
            if !methods.is_empty() {
                rule = rule.with_methods(methods.clone());
            }
            builder = builder.gate(rule, plan.settings.room());
        }
    }
    builder.build().map(Some).map_err(|e| {
        let line = config.rooms.first().map_or(1, |r| r.line);
        FileError::at_line(&config.path, line, format!("rooms: {e}"))
    })
}

/// Request ids: this process's random prefix and a counter (`3f9c…-2a`). Unique and cheap (a
/// UUID v4 reads the OS's random source on every request); not a secret, nor meant to be one.
#[derive(Clone)]
struct MakeId {
    prefix: Arc<str>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl MakeId {
    fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        // std's hasher keys are drawn from the OS once per process (then stepped per thread).
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Self {
            prefix: format!("{random:016x}").into(),
            next: Arc::new(std::sync::atomic::AtomicU64::new(1)),
        }
    }
}

impl MakeRequestId for MakeId {
    fn make_request_id<B>(&mut self, _request: &Request<B>) -> Option<RequestId> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        crate::values::written(|w| write!(w, "{}-{n:x}", self.prefix)).map(RequestId::new)
    }
}

/// The request with the `X-Request-Id` it came with when that is an id (a load balancer in
/// front sets one): 1 to 128 visible ASCII characters, given once. Another (8 000 characters,
/// spaces and quotes that make a log line read two ways) is removed, and the gateway sets its
/// own.
fn fit_request_id<B>(mut req: Request<B>) -> Request<B> {
    let mut given = req.headers().get_all("x-request-id").iter();
    let fit = match (given.next(), given.next()) {
        (None, _) => true,
        (Some(v), None) => {
            let b = v.as_bytes();
            !b.is_empty()
                && b.len() <= 128
                && b.iter().all(u8::is_ascii_graphic)
                && !b.contains(&b'"')
        }
        (Some(_), Some(_)) => false,
    };
    if !fit {
        req.headers_mut().remove("x-request-id");
    }
    req
}

/// Compress what the gateway and its rooms write (pages, JSON), never the app's answers: the
/// app compresses its own, or chose not to. An answer from the app is the one that carries
/// hyper-util's `HttpInfo` (the connection it came on), which its client puts in every response
/// it receives: a marker that costs nothing more.
#[derive(Clone, Copy)]
struct OwnAnswers;

impl Predicate for OwnAnswers {
    fn should_compress<B: http_body::Body>(&self, response: &Response<B>) -> bool {
        response.extensions().get::<HttpInfo>().is_none()
    }
}

/// The guard, the gateway's own paths and the forwarding headers, in front of the site.
#[derive(Clone)]
struct Front {
    site: SiteService,
    own: Arc<Own>,
}

struct Own {
    paths: Paths,
    trusted: Vec<IpNet>,
    admin: Option<AdminService>,
    /// The metrics' bearer token, if they need one.
    metrics_token: Option<BearerToken>,
    /// The rooms' counts, which refresh their gauges for the metrics: read from the store at
    /// most once a second however often the metrics are (the path needs no token unless
    /// `[metrics]` names one, and a flood of requests to it must not become a flood of calls
    /// to the store every gateway shares).
    counts: Vec<SharedCounts>,
    draining: Arc<AtomicBool>,
    max_body_bytes: u64,
}

/// The body's length as its `Content-Length` declares it.
fn declared_length<B>(req: &Request<B>) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

type FrontFuture = ArcFuture<Response<GatewayBody>>;

impl Service<Request<Incoming>> for Front {
    type Response = Response<GatewayBody>;
    type Error = Infallible;
    type Future = FrontFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Incoming>) -> FrontFuture {
        if let Err(problem) = guard::check(&req) {
            tracing::debug!(code = problem.code(), "request refused");
            let res = problem.response(req.headers()).map(box_body);
            return Box::pin(async move { Ok(res) });
        }
        let own = &self.own;
        if declared_length(&req).is_some_and(|n| n > own.max_body_bytes) {
            // tower-http's limit would answer this too, in plain text of its own; the same page
            // as a body found too large on the way (the proxy's) instead.
            let res = Problem::TooLarge.response(req.headers()).map(box_body);
            return Box::pin(async move { Ok(res) });
        }
        let path = req.uri().path();
        if path == own.paths.health {
            let res = health(own.draining.load(Ordering::Relaxed));
            return Box::pin(async move { Ok(res) });
        }
        if own.paths.metrics.as_deref() == Some(path) {
            if let Some(token) = &own.metrics_token {
                if !token.admits(req.headers().get(header::AUTHORIZATION)) {
                    let res = unauthorized();
                    return Box::pin(async move { Ok(res) });
                }
            }
            let counts = own.counts.clone();
            return Box::pin(async move { Ok(metrics(counts).await) });
        }
        if path == own.paths.admin || under(path, &own.paths.admin) {
            let Some(admin) = own.admin.clone() else {
                return Box::pin(async move { Ok(not_found()) });
            };
            return Box::pin(async move {
                let res = admin.oneshot(req).await?;
                Ok(res.map(box_body))
            });
        }
        forwarded::forward(&mut req, &own.trusted);
        self.site.call_shared(req)
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<GatewayBody> {
    let mut res = Response::new(box_body(Full::new(Bytes::from_static(text.as_bytes()))));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// The metrics asked for without their token.
fn unauthorized() -> Response<GatewayBody> {
    let mut res = plain(
        StatusCode::UNAUTHORIZED,
        "the metrics need their bearer token\n",
    );
    res.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"metrics\""),
    );
    res
}

fn health(draining: bool) -> Response<GatewayBody> {
    if draining {
        let mut res = plain(StatusCode::SERVICE_UNAVAILABLE, "draining\n");
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        res
    } else {
        plain(StatusCode::OK, "ok\n")
    }
}

fn not_found() -> Response<GatewayBody> {
    plain(StatusCode::NOT_FOUND, "not found\n")
}

/// The process's Prometheus recorder, installed once; `None` when another recorder was
/// installed first (a test process, say).
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let handle = PrometheusBuilder::new().install_recorder().ok()?;
            crate::proxy::register_metrics();
            Some(handle)
        })
        .as_ref()
}

/// The metrics, the gauges of the rooms of `counts` refreshed from the store first (at most
/// once a second: `SharedCounts`).
async fn metrics(counts: Vec<SharedCounts>) -> Response<GatewayBody> {
    let Some(handle) = prometheus() else {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics recorder unavailable\n",
        );
    };
    // The rooms' gauges (people inside, waiting) are refreshed from the store first; a store
    // failure is counted in the store-call metrics themselves, and the rest still renders.
    for room in &counts {
        let _ = room.get().await;
    }
    let mut res = Response::new(box_body(Full::new(Bytes::from(handle.render()))));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

#[cfg(test)]
mod tests {
    use super::under;

    #[test]
    fn bypass_prefixes_go_by_segments() {
        assert!(under("/static/app.js", "/static"));
        assert!(under("/static", "/static/"));
        assert!(!under("/statics", "/static"));
        assert!(under("/anything", "/"));
    }
}
