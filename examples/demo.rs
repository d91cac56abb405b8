//! A small axum app behind two waiting rooms, on the embedded store (or Redis with `--redis`).
//!
//! ```text
//! cargo run --example demo -- --insecure-cookies
//! ```
//!
//! then open <http://127.0.0.1:3000> in three browser profiles (or one normal and two private
//! windows): with the default capacity of 2, the first two get in and the third waits in line
//! until one of the others presses "Leave" (or their slot expires). `/vip` is a room of its
//! own, with its own capacity (`--vip-capacity`, default 1) and line: being inside one room does
//! not let anyone into the other. Run with `--help` for all flags.
//!
//! The rooms are one [`WaitingRooms`] layer: the default room (`--room`, default "demo") for
//! every page no other rule takes, "vip" for `/vip`, and `POST /checkout` gated by the default
//! room (never queued: `403 not_admitted` JSON without an admission). The layer is the last call
//! on the router that holds the pages and the app's fallback, so every room's endpoints reach it.
//!
//! Routes:
//! - `GET /` (behind the default room): who you are, how you were admitted, when your slot
//!   expires, and a button that posts to the room's leave endpoint `/__waitingroom/{room}/leave`.
//! - `GET /vip` (behind the "vip" room): the same page, for the VIP room.
//! - `POST /checkout` (gated by the default room): `200` JSON for an admitted visitor (admission
//!   cookie, token header, or the `X-Admission-Ticket` header that the status endpoint hands to
//!   clients without cookies); `403` JSON `not_admitted` with the reason for anyone else. With
//!   `--single-use-tickets` it takes the visitor's one-time ticket instead (the cookie
//!   `wr_{room}_t` set at admission, or the `t1.…` ticket the status endpoint hands to clients
//!   without cookies, in `X-Admission-Ticket`), once: a second use of the same ticket, on any
//!   gateway, is `403 {"error":"ticket_used",...}`.
//! - `GET /stats` (NOT behind the room): the room's counts as JSON, read from the store at most
//!   once a second ([`SharedCounts`]: a route anyone can reach must not turn a flood of
//!   requests into a flood of store calls). Every route
//!   behind the layer is queued like any page, so an operator route like this one lives on an
//!   outer router without the layer, merged with the layered one.
//! - `GET /metrics` (NOT behind the room): the room's metrics in Prometheus' text format
//!   (`metrics-exporter-prometheus`; the names are in docs/operations.md).
//! - `GET|POST /__waitingroom/{room}/status|leave`: answered by the room itself.
//! - `/admin/...` (NOT behind the room), only with `--admin-token <TOKEN>` (or `ADMIN_TOKEN`):
//!   the [`AdminService`]: the dashboard at `/admin/` and the admin API (`docs/api.md`, "Admin
//!   API"), for both rooms (the default room and `vip`). Without a token there is no admin at
//!   all.
//!
//! A sale that opens later: `--opens-in 60` opens the default room a minute after start-up
//! (the VIP room stays open). Until then every visitor is registered and shown a countdown (JSON
//! clients: `503`, `state: "scheduled"`, `opens_at`); at the opening they stand in line in a
//! random order, ahead of later arrivals. `--closes-in <SECS>` stops taking newcomers then
//! (those in line keep their place). Gateways sharing a queue through Redis take the same
//! `--opens-at <UNIX SECS>` (and `--closes-at`) instead, so they open at the same instant.
//!
//! It serves within limits a sale survives (`tower_waiting_room::serve`: 10 s to send a request
//! header, 30 s for the app to answer, at most 10 000 connections, request heads of at most
//! 64 KiB) and puts each connection's address in its requests, so the room sees each visitor's address and limits new visitors per IP (60 a
//! minute by default). It logs (the room's start-up line, and a warning if it ever finds no
//! client IP) on stderr at `info`; `RUST_LOG` changes the level.

#[path = "shared/mod.rs"]
mod shared;

#[path = "demo_parts/args.rs"]
mod args;
#[path = "demo_parts/knee.rs"]
mod knee;

pub(crate) use args::{parse_args, Options, USAGE};

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use tower_waiting_room::admin::AdminService;
use tower_waiting_room::auto::AutoCapacity;
use tower_waiting_room::control::SharedCounts;
use tower_waiting_room::defences::risk::Risk;
use tower_waiting_room::edge::{EdgeKey, EdgeKeySet, EdgeTokens};
use tower_waiting_room::response::Languages;
use tower_waiting_room::routing::{Rule, WaitingRooms};
use tower_waiting_room::serve::Limits;
use tower_waiting_room::{Admission, AdmittedBy, ProofOfWork, SigningKey, WaitingRoomLayer};

/// Builds the default room from the options; an error is for the user, not a panic. Its
/// single-use tickets (`--single-use-tickets`) are for the checkout it gates.
pub(crate) fn build_layer(opts: &Options) -> Result<WaitingRoomLayer, String> {
    let builder = WaitingRoomLayer::builder(opts.room.clone())
        .capacity(opts.capacity)
        .single_use_tickets(opts.single_use_tickets);
    configure(builder, opts, true)
}

/// The default room's edge keys (`--edge-tokens`): `EDGE_KEYS` from the environment (every
/// process of a fleet must sign with the same), or a fresh current key, said on stderr.
fn edge_keys() -> Result<EdgeKeySet, String> {
    match std::env::var("EDGE_KEYS") {
        Ok(text) => EdgeKeySet::parse(&text).map_err(|e| format!("EDGE_KEYS: {e}")),
        Err(_) => {
            eprintln!(
                "warning: --edge-tokens without EDGE_KEYS: a fresh key each start, so edges \
                 must fetch the keys again after a restart, and gateways that share a queue \
                 must share EDGE_KEYS (docs/edge.md)."
            );
            EdgeKey::generate("demo")
                .map(EdgeKeySet::new)
                .map_err(|e| e.to_string())
        }
    }
}

/// The id of the demo's second room, served at `/vip`.
pub(crate) const VIP_ROOM: &str = "vip";

/// Builds the "vip" room: the same settings as the default room, its own capacity
/// (`--vip-capacity`), and (without `--secret`) its own random key.
pub(crate) fn build_vip_layer(opts: &Options) -> Result<WaitingRoomLayer, String> {
    let builder = WaitingRoomLayer::builder(VIP_ROOM).capacity(opts.vip_capacity);
    configure(builder, opts, false)
}

/// The rooms of the demo: the default room for every page no other rule takes, `vip` (when
/// given) for `/vip` and under it, and `POST /checkout` gated by the default room.
pub(crate) fn build_rooms(
    main: &WaitingRoomLayer,
    vip: Option<&WaitingRoomLayer>,
) -> Result<WaitingRooms, String> {
    let mut rooms = WaitingRooms::builder().default_room(main.clone());
    if let Some(vip) = vip {
        rooms = rooms.room(Rule::path_prefix("/vip"), vip.clone());
    }
    rooms
        .gate(Rule::post("/checkout"), main.config().room())
        .build()
        .map_err(|e| format!("invalid rooms: {e}"))
}

/// Every setting but the room id and capacity, from the options. `default_room`: say so when
/// the key is a random one (once per process is enough), and schedule the sale (`--opens-*`,
/// `--closes-*`), which is the default room's.
fn configure(
    mut builder: tower_waiting_room::WaitingRoomBuilder,
    opts: &Options,
    default_room: bool,
) -> Result<WaitingRoomLayer, String> {
    // ---- Store selection -------------------------------------------------------------------
    // The embedded (in-process) store is the builder's default; `--redis <url>` shares one
    // queue between every process pointed at the same Redis (with the same --room and --secret).
    if let Some(url) = &opts.redis {
        #[cfg(feature = "redis")]
        {
            let store = tower_waiting_room::store::RedisStore::builder()
                .url(url.clone())
                .build()
                .map_err(|e| format!("--redis {url}: {e}"))?;
            builder = builder.store(store);
        }
        #[cfg(not(feature = "redis"))]
        return Err(format!(
            "--redis {url}: this demo was built without the `redis` feature"
        ));
    }
    // ----------------------------------------------------------------------------------------

    if let Some(rate) = opts.rate {
        builder = builder.admission_rate(rate);
    }
    if let Some(s) = opts.active_ttl {
        builder = builder.active_ttl(Duration::from_secs(s));
    }
    if let Some(s) = opts.grant_ttl {
        builder = builder.grant_ttl(Duration::from_secs(s));
    }
    if let Some(s) = opts.queue_ttl {
        builder = builder.queue_ttl(Duration::from_secs(s));
    }
    if let Some(s) = opts.refresh {
        builder = builder.refresh(Duration::from_secs(s));
    }
    if let Some(n) = opts.max_queue {
        builder = builder.max_queue_len(n);
    }
    if let Some(policy) = opts.fail_policy {
        builder = builder.fail_policy(policy);
    }
    if opts.insecure_cookies {
        builder = builder.secure_cookies(false);
    }
    if let Some(bits) = opts.proof_of_work {
        builder = builder.proof_of_work(ProofOfWork::new(bits));
    }
    // Without a hook, the default risk scorer decides who solves the challenge (the scripted)
    // and who is refused (the listed networks).
    if opts.challenge_everyone {
        builder = builder.risk(|_| Risk::Medium);
    }
    if opts.no_visitor_limit {
        builder = builder.new_visitor_limit(None);
    }
    if !opts.risky_networks.is_empty() {
        builder = builder.risky_networks(opts.risky_networks.iter().cloned());
    }

    let key = match &opts.secret {
        Some(hex) => {
            let digits = hex.trim().len();
            if digits < 64 {
                return Err(format!(
                    "--secret needs at least 64 hex digits (32 bytes), got {digits}"
                ));
            }
            SigningKey::from_hex("k1", hex).map_err(|e| format!("--secret: {e}"))?
        }
        None => {
            if default_room {
                println!(
                "note: no --secret given, so this process signs with a random key of its own.\n      \
                 Cookies die with the process, and gateways that share a queue need a shared\n      \
                 secret (--secret <64+ hex digits>)."
                );
            }
            SigningKey::generate("k1").map_err(|e| e.to_string())?
        }
    };
    builder = builder.signing_key(key);
    if let Some(tags) = &opts.languages {
        let languages = Languages::only(tags).map_err(|e| format!("--languages: {e}"))?;
        builder = builder.languages(languages);
    }
    if default_room && opts.edge_tokens {
        builder = builder.edge_tokens(EdgeTokens::new(edge_keys()?));
    }
    if let (true, Some((min, max))) = (default_room, opts.auto_capacity) {
        builder = builder.auto_capacity(AutoCapacity::new(
            min,
            max,
            Duration::from_millis(opts.latency_target_ms),
        ));
    }
    // A scheduled sale, of the default room only (the VIP room is open): at a Unix time, the
    // same for every gateway, or a time from start-up (a closing before the opening is refused
    // by the builder, with its own message).
    if default_room {
        let started = SystemTime::now();
        let at = |flag: &str, unix: Option<u64>, from_start: Option<u64>| {
            let t = match (unix, from_start) {
                (Some(secs), _) => UNIX_EPOCH.checked_add(Duration::from_secs(secs)),
                (None, Some(secs)) => started.checked_add(Duration::from_secs(secs)),
                (None, None) => return Ok(None),
            };
            t.map(Some)
                .ok_or_else(|| format!("{flag}: too far in the future"))
        };
        if let Some(t) = at("--opens-at/--opens-in", opts.opens_at, opts.opens_in)? {
            builder = builder.opens_at(t);
        }
        if let Some(t) = at("--closes-at/--closes-in", opts.closes_at, opts.closes_in)? {
            builder = builder.closes_at(t);
        }
    }

    builder
        .build()
        .map_err(|e| format!("invalid room configuration: {e}"))
}

/// The admin service for `rooms` (the default room and the VIP room), when a token is given
/// (`--admin-token`, or `ADMIN_TOKEN` when `env` has it): `Ok(None)` means no admin at all. A
/// token too short is an error for the user.
pub(crate) fn build_admin(
    opts: &Options,
    rooms: &[WaitingRoomLayer],
    env: Option<String>,
) -> Result<Option<AdminService>, String> {
    let Some(token) = opts.admin_token.clone().or(env) else {
        return Ok(None);
    };
    rooms
        .iter()
        .fold(AdminService::builder().bearer_token(token), |b, room| {
            b.room(room.control())
        })
        .build()
        .map(Some)
        .map_err(|e| format!("--admin-token: {e}"))
}

/// The protected page: who you are, how you got in, when your slot expires, and a leave button.
/// Written piece by piece into one buffer (the room id and session id are `[A-Za-z0-9_-]` and
/// hex: nothing to escape): an admitted visitor's every request renders it, and the
/// `format!`s it was made of cost more than the room's own check (`scripts/demo-pair`).
async fn home(admission: Option<Extension<Admission>>, prefix: Arc<str>) -> Response {
    use std::fmt::Write as _;
    const HEAD: &str = r#"<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>You are in</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}
code{background:#f0f0f0;padding:0 .25rem}button{font:inherit;padding:.4rem 1rem}</style></head>
<body><h1>You are in</h1>
<p>Room <code>"#;
    const TAIL: &str = r#""><button type="submit">Leave and give my place to the next visitor</button></form>
<p><a href="/">The shop</a> · <a href="/vip">The VIP room</a> · <a href="/stats">Room stats (JSON)</a></p>
</body></html>"#;
    let Some(Extension(a)) = admission else {
        // Only if the page were mounted without the layer.
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "this page is not behind the waiting room",
        )
            .into_response();
    };
    let how = match a.admitted_by() {
        AdmittedBy::Token => "by your signed admission token (fast path, no store call)",
        AdmittedBy::Store => "by the store (a new slot, a claimed grant, or a renewed slot)",
        AdmittedBy::FailOpen => "without a slot: the store is unreachable and the room fails open",
        AdmittedBy::Drained => {
            "without a slot, from the front of the line: the store is unreachable and the room \
             drains at the line's last pace"
        }
        _ => "in a way this demo does not know yet",
    };
    let secs = a
        .expires_at()
        .duration_since(SystemTime::now())
        .map_or(0, |d| d.as_secs());
    let mut page = String::with_capacity(1_024);
    page.push_str(HEAD);
    page.push_str(a.room());
    page.push_str("</code>, session <code>");
    // (Writing into a String never fails.)
    let _ = write!(page, "{}", a.session());
    page.push_str("</code>.</p>\n<p>You were admitted ");
    page.push_str(how);
    page.push_str(".</p>\n<p>");
    if matches!(a.admitted_by(), AdmittedBy::FailOpen | AdmittedBy::Drained) {
        let _ = write!(
            page,
            "You hold no slot; the room asks the store again in about {secs} s."
        );
    } else {
        let _ = write!(
            page,
            "Your slot expires in <strong>{secs} s</strong> unless you stay active: \
             requests after the refresh time extend it."
        );
    }
    page.push_str("</p>\n<form method=\"post\" action=\"");
    page.push_str(&prefix);
    page.push('/');
    page.push_str(a.room());
    page.push_str("/leave");
    page.push_str(TAIL);
    Html(page).into_response()
}

/// The checkout, gated by the default room: only an admitted visitor gets here (everyone else
/// got `403 not_admitted` from the rooms).
async fn checkout(Extension(a): Extension<Admission>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "ordered": true,
        "room": a.room(),
        "session": a.session().to_string(),
    }))
}

/// The room's counts; mounted outside the layer so operators are never queued.
async fn stats(counts: Arc<SharedCounts>) -> Response {
    match counts.get().await {
        Ok(stats) => Json(stats).into_response(),
        // Not an outage: the room's settings were written by a version this gateway cannot
        // read (a rolling upgrade to finish); visitors are told the store is busy meanwhile.
        Err(e) if e.is_version_mix() => (StatusCode::CONFLICT, e.to_string()).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}

/// The process's Prometheus recorder, installed on first use (once per process: `main` does it
/// before building the room, so the metrics' help texts are in it).
fn prometheus() -> &'static metrics_exporter_prometheus::PrometheusHandle {
    static HANDLE: std::sync::OnceLock<metrics_exporter_prometheus::PrometheusHandle> =
        std::sync::OnceLock::new();
    HANDLE.get_or_init(|| {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .expect("the only metrics recorder of the process")
    })
}

/// The metrics, with the room's gauges refreshed from the store first (at most once a second);
/// mounted outside the layer.
async fn metrics(counts: Arc<SharedCounts>) -> String {
    // A store failure is counted in the store-call metrics themselves; the rest still renders.
    let _ = counts.get().await;
    let handle = prometheus();
    handle.run_upkeep();
    handle.render()
}

fn app(layer: WaitingRoomLayer, rooms: WaitingRooms, knee: Option<usize>) -> Router {
    let prefix: Arc<str> = layer.config().path_prefix().into();

    // Everything here is behind the rooms: the rooms' layer is this router's last call, and the
    // router holds the app's fallback, so every path that no open route below takes (every
    // room's endpoints, `/__waitingroom/{room}/...`, included) reaches the rooms.
    let protected = Router::new()
        .route(
            "/",
            get({
                let prefix = Arc::clone(&prefix);
                move |a| home(a, Arc::clone(&prefix))
            }),
        )
        .route("/vip", {
            let prefix = Arc::clone(&prefix);
            get(move |a| home(a, Arc::clone(&prefix)))
        })
        .route("/checkout", post(checkout));
    let protected = match knee {
        Some(k) => {
            let knee = knee::Knee::new(k);
            protected.route("/work", get(move || knee::work(Arc::clone(&knee))))
        }
        None => protected,
    }
    .fallback(|| async { (StatusCode::NOT_FOUND, "not found") })
    .layer(rooms);

    // Not behind the room: operator routes that must answer even when the room is full. No
    // cookie needed, so their counts come from the store at most once a second (`counts`).
    let counts = Arc::new(SharedCounts::new(&layer));
    let open = Router::new()
        .route(
            "/stats",
            get({
                let counts = Arc::clone(&counts);
                move || stats(Arc::clone(&counts))
            }),
        )
        .route(
            &format!("{prefix}/keys"),
            get({
                let layer = layer.clone();
                move || edge_keys_here(layer.clone())
            }),
        )
        .route("/metrics", get(move || metrics(Arc::clone(&counts))));

    open.merge(protected)
}

/// Serves the app on `listener` until `shutdown` completes, within the limits a sale needs
/// ([`tower_waiting_room::serve`]: a client that sends half a request header is hung up on, a
/// slow answer becomes a `503`, and connections are capped), with each connection's address
/// (`PeerAddr`) in its requests: the room takes the client IP for its per-IP limit on new
/// visitors from there. Plain `axum::serve(listener, app)` would wait for ever on slow clients and leave the
/// room blind to who is who.
// Without an admin: what tests/layer/client_ip.rs runs (main itself calls `serve_with_admin`).
#[allow(dead_code)]
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    layer: WaitingRoomLayer,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_admin(listener, layer, None, shutdown).await
}

/// [`serve`], with the admin at `/admin` when there is one: next to the room, not behind it, so
/// operators are never queued.
pub(crate) async fn serve_with_admin(
    listener: tokio::net::TcpListener,
    layer: WaitingRoomLayer,
    admin: Option<AdminService>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let rooms = build_rooms(&layer, None).map_err(std::io::Error::other)?;
    serve_rooms(listener, layer, rooms, admin, None, shutdown).await
}

/// `GET {prefix}/keys`: the default room's public edge keys (`--edge-tokens`), as the room
/// itself serves them at `{prefix}/{room}/keys`; `404` without edge tokens.
async fn edge_keys_here(layer: WaitingRoomLayer) -> Response {
    use tower::{Layer, ServiceExt};
    let path = format!(
        "{}/{}/keys",
        layer.config().path_prefix(),
        layer.config().room()
    );
    let room = layer.layer(tower::service_fn(|_| async {
        Ok::<_, std::convert::Infallible>(StatusCode::NOT_FOUND.into_response())
    }));
    let req = axum::http::Request::get(path)
        .body(axum::body::Body::empty())
        .expect("a valid request");
    let Ok(res) = room.oneshot(req).await;
    if res.status() == StatusCode::OK {
        res.map(axum::body::Body::new).into_response()
    } else {
        (
            StatusCode::NOT_FOUND,
            "no edge tokens: start the demo with --edge-tokens",
        )
            .into_response()
    }
}

/// The limits the demo serves within ([`Limits`]' defaults).
pub(crate) fn limits() -> Limits {
    Limits::default()
}

/// [`serve_with_admin`], with the rooms given: what `main` runs (with the "vip" room).
pub(crate) async fn serve_rooms(
    listener: tokio::net::TcpListener,
    layer: WaitingRoomLayer,
    rooms: WaitingRooms,
    admin: Option<AdminService>,
    knee: Option<usize>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut app = app(layer, rooms, knee);
    if let Some(admin) = admin {
        app = app.nest_service("/admin", admin);
    }
    tower_waiting_room::serve::serve(listener, app, limits(), shutdown).await;
    Ok(())
}

/// Ctrl-C or SIGTERM ([`tower_waiting_room::serve::shutdown_signal`]), said on stdout.
async fn shutdown_signal() {
    tower_waiting_room::serve::shutdown_signal().await;
    println!("shutting down");
}

/// With `--redis`, checks the server before the first visitor (`RedisStore::check`): a policy
/// that can evict the line, a replica, a user without scripting or a bad password stop the demo
/// here, with the reason. A Redis that is down is only reported: the room starts anyway and
/// follows its fail policy until Redis is back.
async fn check_store(opts: &Options) -> Result<(), String> {
    #[cfg(feature = "redis")]
    if let Some(url) = &opts.redis {
        use tower_waiting_room::store::{RedisStore, StoreErrorKind};
        let store = RedisStore::from_url(url).map_err(|e| format!("--redis {url}: {e}"))?;
        match store.check().await {
            Ok(server) => println!("Redis store checked: {server}"),
            Err(e)
                if matches!(
                    e.kind(),
                    StoreErrorKind::Unavailable | StoreErrorKind::Timeout
                ) =>
            {
                tracing::warn!(error = %e, "Redis is not reachable yet; starting anyway");
            }
            Err(e) => return Err(format!("--redis: {e}")),
        }
    }
    #[cfg(not(feature = "redis"))]
    let _ = opts;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    shared::init_logging();
    prometheus();
    let opts = match parse_args(std::env::args().skip(1)) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\nRun with --help for the flags.");
            return ExitCode::from(2);
        }
    };
    let layer = match build_layer(&opts) {
        Ok(layer) => layer,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };

    let rooms = match build_vip_layer(&opts).and_then(|vip| build_rooms(&layer, Some(&vip))) {
        Ok(rooms) => rooms,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };

    // Both rooms on the dashboard and in the admin API.
    let managed: Vec<WaitingRoomLayer> = rooms.room_ids().filter_map(|id| rooms.room(id)).collect();
    let admin = match build_admin(&opts, &managed, std::env::var("ADMIN_TOKEN").ok()) {
        Ok(admin) => admin,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };

    if let Err(e) = check_store(&opts).await {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }

    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, opts.port));
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = listener.local_addr().unwrap_or(addr);
    let config = layer.config();
    println!(
        "waiting room {:?}: capacity {}, {}",
        config.room(),
        config.policy().capacity,
        match &opts.redis {
            Some(url) => format!("Redis store at {}", shared::without_password(url)),
            None => "embedded store".to_owned(),
        }
    );
    println!(
        "waiting room {VIP_ROOM:?}: capacity {}, at /vip; POST /checkout is gated by {:?}{}",
        opts.vip_capacity,
        config.room(),
        if config.single_use_tickets() {
            " (single-use tickets: once per admission)"
        } else {
            ""
        }
    );
    if !opts.insecure_cookies {
        println!(
            "hint: cookies are `Secure`. Browsers keep them on http://127.0.0.1, but some \
             HTTP clients drop them over plain http and loop on the redirect; add \
             --insecure-cookies if yours does."
        );
    }
    println!("room stats (not queued): http://{local}/stats");
    println!("metrics (not queued): http://{local}/metrics");
    if admin.is_some() {
        println!("admin dashboard (not queued; asks for the token): http://{local}/admin/");
    }
    println!("serving within limits: {}", limits().describe());
    println!("open http://{local}/");

    if let Err(e) = serve_rooms(listener, layer, rooms, admin, opts.knee, shutdown_signal()).await {
        eprintln!("error: server failed: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_waiting_room::FailPolicy;

    fn parse(args: &[&str]) -> Result<Option<Options>, String> {
        parse_args(args.iter().map(|s| s.to_string()))
    }

    #[tokio::test]
    async fn languages_are_the_pages_and_an_unknown_one_is_refused() {
        let o = parse(&["--languages", "de, ar"]).unwrap().unwrap();
        let layer = build_layer(&o).unwrap();
        let status = layer.control().status().await.unwrap();
        assert_eq!(status.languages, ["de", "ar"]);
        let o = parse(&["--languages", "en,xx"]).unwrap().unwrap();
        let e = build_layer(&o).unwrap_err();
        assert!(e.contains("--languages") && e.contains("xx"), "{e}");
    }

    /// The operator routes' counts come from the store at most once a second: a capacity set
    /// meanwhile shows only after that.
    #[tokio::test]
    async fn the_operator_routes_read_the_store_at_most_once_a_second() {
        let layer = build_layer(&Options::default()).unwrap();
        let counts = SharedCounts::new(&layer);
        let before = counts.get().await.unwrap().capacity;
        layer
            .control()
            .set_capacity(before as u32 + 7)
            .await
            .unwrap();
        assert_eq!(
            counts.get().await.unwrap().capacity,
            before,
            "read again too soon"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
        assert_eq!(counts.get().await.unwrap().capacity, before + 7);
    }

    #[tokio::test]
    async fn edge_tokens_serve_the_keys_at_the_short_path_too() {
        let o = parse(&["--edge-tokens"]).unwrap().unwrap();
        assert!(o.edge_tokens);
        let keys = |opts: &Options| {
            let layer = build_layer(opts).unwrap();
            edge_keys_here(layer)
        };
        let with = keys(&o).await;
        assert_eq!(with.status(), StatusCode::OK);
        let body = axum::body::to_bytes(with.into_body(), 1 << 16)
            .await
            .unwrap();
        let jwks: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(jwks["keys"][0]["kty"], "OKP", "{jwks}");
        let without = keys(&Options::default()).await;
        assert_eq!(without.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn auto_capacity_flags_turn_it_on_for_the_default_room_only() {
        let o = parse(&[
            "--auto-capacity",
            "5:500",
            "--latency-target-ms",
            "250",
            "--knee",
            "50",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(o.knee, Some(50));
        let auto = build_layer(&o).unwrap().control().auto().unwrap();
        assert_eq!((auto.min, auto.max, auto.target_ms), (5, 500, 250));
        assert!(build_vip_layer(&o).unwrap().control().auto().is_none());
        assert!(build_layer(&Options::default())
            .unwrap()
            .control()
            .auto()
            .is_none());
        for bad in [
            &["--auto-capacity", "5"][..],
            &["--auto-capacity", "a:b"],
            &["--knee", "0"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let backwards = parse(&["--auto-capacity", "50:5"]).unwrap().unwrap();
        assert!(build_layer(&backwards)
            .unwrap_err()
            .contains("min is above max"));
    }

    #[test]
    fn defaults_and_flags() {
        let o = parse(&[]).unwrap().unwrap();
        assert_eq!((o.port, o.capacity, o.room.as_str()), (3000, 2, "demo"));
        assert_eq!(o.vip_capacity, 1);
        let o = parse(&["--vip-capacity", "3"]).unwrap().unwrap();
        assert_eq!(o.vip_capacity, 3);
        let o = parse(&["--port=8080", "--capacity", "5", "--fail-closed"])
            .unwrap()
            .unwrap();
        assert_eq!((o.port, o.capacity), (8080, 5));
        assert_eq!(o.fail_policy, Some(FailPolicy::Closed));
        assert!(parse(&["--help"]).unwrap().is_none());
        let o = parse(&["--single-use-tickets"]).unwrap().unwrap();
        assert!(build_layer(&o).unwrap().config().single_use_tickets());
        assert!(!build_vip_layer(&o).unwrap().config().single_use_tickets());
        assert!(!build_layer(&Options::default())
            .unwrap()
            .config()
            .single_use_tickets());
        assert!(parse(&["--single-use-tickets=yes"]).is_err());
        let o = parse(&["--risky-networks", "203.0.113.0/24, 2001:db8::/32"])
            .unwrap()
            .unwrap();
        let layer = build_layer(&o).unwrap();
        assert_eq!(
            layer.config().risky_networks(),
            ["203.0.113.0/24", "2001:db8::/32"]
        );
        let bad = parse(&["--risky-networks=203.0.113.7/24"])
            .unwrap()
            .unwrap();
        assert!(build_layer(&bad).unwrap_err().contains("203.0.113.7/24"));
        assert!(
            parse(&["--challenge-everyone"])
                .unwrap()
                .unwrap()
                .challenge_everyone
        );
        assert!(parse(&["--challenge-everyone=no"]).is_err());
    }

    #[test]
    fn a_scheduled_sale() {
        let o = parse(&["--opens-in", "60", "--closes-in=120"])
            .unwrap()
            .unwrap();
        assert_eq!((o.opens_in, o.closes_in), (Some(60), Some(120)));
        let layer = build_layer(&o).unwrap();
        let schedule = layer.config().policy().schedule.clone().unwrap();
        assert_eq!(
            schedule.closes_at_ms.unwrap() - schedule.opens_at_ms,
            60_000
        );
        let backwards = Options {
            opens_in: Some(60),
            closes_in: Some(30),
            ..Options::default()
        };
        assert!(build_layer(&backwards)
            .unwrap_err()
            .contains("closes_at must be after opens_at"));
        assert!(parse(&["--opens-in", "soon"]).is_err());
        // At a Unix time: the same on every gateway, whenever each starts.
        let at = parse(&["--opens-at", "4102444800", "--closes-at=4102448400"])
            .unwrap()
            .unwrap();
        let schedule = build_layer(&at)
            .unwrap()
            .config()
            .policy()
            .schedule
            .clone()
            .unwrap();
        assert_eq!(schedule.opens_at_ms, 4_102_444_800_000);
        assert_eq!(schedule.closes_at_ms, Some(4_102_448_400_000));
        // Only the default room is scheduled: the VIP room is open.
        assert!(build_vip_layer(&at)
            .unwrap()
            .config()
            .policy()
            .schedule
            .is_none());
        // Too far ahead to count: an error, not a panic.
        for flag in ["--opens-in", "--closes-in", "--opens-at"] {
            let far = parse(&[flag, "18446744073709551615"]).unwrap().unwrap();
            assert!(build_layer(&far).is_err(), "{flag}");
        }
    }

    #[test]
    fn bad_flags_are_errors_not_panics() {
        assert!(parse(&["--port"]).is_err());
        assert!(parse(&["--port", "x"]).is_err());
        assert!(parse(&["--capacity", "0"]).is_err());
        assert!(parse(&["--vip-capacity", "0"]).is_err());
        // The default room cannot be the VIP room: two rooms, one id.
        let clash = parse(&["--room", "vip"]).unwrap().unwrap();
        let main = build_layer(&clash).unwrap();
        let vip = build_vip_layer(&clash).unwrap();
        assert!(build_rooms(&main, Some(&vip)).unwrap_err().contains("vip"));
        assert!(parse(&["--what"]).is_err());
        assert!(parse(&["--fail-open", "--fail-closed"]).is_err());
        let short = Options {
            secret: Some("abcd".into()),
            ..Options::default()
        };
        assert!(build_layer(&short).is_err());
        let redis = Options {
            redis: Some("nonsense://127.0.0.1".into()),
            ..Options::default()
        };
        assert!(build_layer(&redis).unwrap_err().contains("--redis"));
        assert!(parse(&["--proof-of-work", "many"]).is_err());
        let too_hard = parse(&["--proof-of-work", "40"]).unwrap().unwrap();
        assert!(build_layer(&too_hard)
            .unwrap_err()
            .contains("proof_of_work"));
        let pow = parse(&["--proof-of-work", "16"]).unwrap().unwrap();
        assert!(build_layer(&pow).is_ok());
        let layer = build_layer(&Options::default()).unwrap();
        let short = parse(&["--admin-token", "hunter2"]).unwrap().unwrap();
        let err = build_admin(&short, std::slice::from_ref(&layer), None).unwrap_err();
        assert!(
            err.contains("--admin-token") && !err.contains("hunter2"),
            "{err}"
        );
        assert!(
            build_admin(&Options::default(), std::slice::from_ref(&layer), None)
                .unwrap()
                .is_none()
        );
        let from_env = Some("an-admin-token-of-at-least-32-bytes".to_owned());
        assert!(
            build_admin(&Options::default(), std::slice::from_ref(&layer), from_env)
                .unwrap()
                .is_some()
        );
    }
}
