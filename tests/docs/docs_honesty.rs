//! The documentation states defaults and status codes; these tests hold it to the code.
//!
//! - The settings table of the `config` module docs (`| setting | default | in a file | meaning |`)
//!   and the README's configuration table (`| builder method | default | meaning |`): every row's
//!   default is compared with what a built room really does. A row this file does not know
//!   fails, so a new setting gets a check (or a line in [`NOT_CHECKED`] saying why it cannot
//!   have one); and every key of a settings file must have its row in the `config` table, so a
//!   new setting cannot be left out of it.
//! - The table of the status endpoint's answers in `docs/api.md` (`| status | when | body |`):
//!   its statuses are the ones a live room gives.
//! - The README's secret recipe: run under `sh`, it yields a key the demo's `--secret` accepts.
//!
//! The tables are read at run time from the source tree, so editing a number in a table is
//! enough to make these tests fail.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;
use tower_waiting_room::store::{
    Decision, RoomStats, SettingsChange, SettingsUpdate, Store, StoreError, StoreErrorKind,
    StoreFuture,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{
    ConfigError, FailPolicy, PeerAddr, RoomPolicy, SessionId, SigningKey, WaitingRoomBuilder,
    WaitingRoomLayer,
};

/// A time on whole minutes, so that rate-limit windows start with the test.
const T0_MS: u64 = 1_767_225_600_000;

/// Rows that name a setting whose default cannot be observed through the public API, and why.
const NOT_CHECKED: &[(&str, &str)] = &[
    ("store/shared_store", "a store has no identity to compare"),
    ("clock", "the system clock has no identity to compare"),
    ("renderer", "a renderer has no identity to compare"),
    ("bypass", "\"none\": nothing to compare"),
];

// ===== reading the docs =====

fn read(rel: &str) -> String {
    let path = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
}

/// The header of the `config` module's settings table.
const CONFIG_TABLE: &[&str] = &["setting", "default", "in a file", "meaning"];

/// The `config` module's source, wherever the module lives.
fn config_source() -> (String, String) {
    let header = format!("| {} |", CONFIG_TABLE.join(" | "));
    for rel in ["src/config.rs", "src/config/mod.rs"] {
        let path = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
        if let Ok(text) = std::fs::read_to_string(&path) {
            if text.contains(&header) {
                return (rel.to_owned(), text);
            }
        }
    }
    panic!(
        "no settings table (`{header}`) in src/config.rs or src/config/mod.rs: if the config \
         module moved, add its path to config_source()"
    );
}

/// One row of a markdown table.
#[derive(Debug)]
struct Row {
    /// `file:line`, for messages.
    at: String,
    cells: Vec<String>,
}

/// The rows of the table whose header cells are `header` (module docs' `//!` prefixes are
/// stripped first). Panics when the table is missing: a renamed header must not turn the test
/// into a no-op.
fn table(file: &str, text: &str, header: &[&str]) -> Vec<Row> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let l = l.trim_start();
            let l = l.strip_prefix("//!").map_or(l, |rest| rest.trim_start());
            (i + 1, l.trim_end())
        })
        .collect();
    let start = lines
        .iter()
        .position(|(_, l)| cells(l) == header)
        .unwrap_or_else(|| panic!("{file}: no table with the header {header:?}"));
    let rows: Vec<Row> = lines[start + 2..]
        .iter()
        .take_while(|(_, l)| l.starts_with('|'))
        .map(|(n, l)| Row {
            at: format!("{file}:{n}"),
            cells: cells(l),
        })
        .collect();
    assert!(!rows.is_empty(), "{file}: the table {header:?} has no rows");
    rows
}

fn cells(line: &str) -> Vec<String> {
    let line = line.trim();
    if !line.starts_with('|') {
        return Vec::new();
    }
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_owned())
        .collect()
}

/// The contents of the `code spans` of a cell.
fn spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The setting a row is about: its code spans without argument lists, joined by `/`
/// (`queue_header/token_header`), or the cell's text when it has none (`cookies`).
fn setting(cell: &str) -> String {
    let names: Vec<String> = spans(cell)
        .iter()
        .map(|s| s.split('(').next().unwrap_or(s).to_owned())
        .collect();
    if names.is_empty() {
        cell.to_owned()
    } else {
        names.join("/")
    }
}

/// The first whole number of a cell, with thousands separators (`100 000`, `1_000`) joined.
fn number(cell: &str) -> Option<u64> {
    number_and_rest(cell).map(|(n, _)| n)
}

/// The first whole number of a cell and the text after it.
fn number_and_rest(cell: &str) -> Option<(u64, &str)> {
    let start = cell.find(|c: char| c.is_ascii_digit())?;
    let b = cell.as_bytes();
    let mut end = start;
    let mut digits = String::new();
    loop {
        while end < b.len() && b[end].is_ascii_digit() {
            digits.push(b[end] as char);
            end += 1;
        }
        // A separator followed by exactly three digits continues the number.
        let group = b.get(end + 1..end + 4);
        let after = b.get(end + 4);
        if matches!(b.get(end), Some(b' ' | b'_' | b','))
            && group.is_some_and(|g| g.iter().all(u8::is_ascii_digit))
            && !after.is_some_and(u8::is_ascii_digit)
        {
            end += 1;
            continue;
        }
        break;
    }
    Some((digits.parse().ok()?, &cell[end..]))
}

/// A duration written as `<number> <unit>` (`300 s`, `24 h`, `5 min`, `10 s`).
fn duration(cell: &str) -> Option<Duration> {
    let (n, rest) = number_and_rest(cell)?;
    let unit: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    let secs = match unit.as_str() {
        "ms" => return Some(Duration::from_millis(n)),
        "s" | "sec" | "second" | "seconds" => n,
        "min" | "minute" | "minutes" => n * 60,
        "h" | "hour" | "hours" => n * 3600,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

/// A rate written as `N a minute`, `N a second` or `N per <duration>` (at the start of the cell).
fn rate(cell: &str) -> Option<(u32, Duration)> {
    let (max, rest) = number_and_rest(cell)?;
    let per = if rest.starts_with(" a minute") {
        Duration::from_secs(60)
    } else if rest.starts_with(" a second") {
        Duration::from_secs(1)
    } else {
        duration(rest.strip_prefix(" per ")?)?
    };
    Some((u32::try_from(max).ok()?, per))
}

// ===== the room =====

fn builder() -> WaitingRoomBuilder {
    WaitingRoomLayer::builder("x").capacity(1).secret([7u8; 32])
}

fn layer() -> WaitingRoomLayer {
    builder().build().expect("the documented minimum builds")
}

fn app(layer: WaitingRoomLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "inside" }))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found") })
        .layer(layer)
}

/// A room on a manual clock standing at [`T0_MS`].
fn clocked(b: WaitingRoomBuilder) -> (Router, ManualClock) {
    let clock = ManualClock::new(T0_MS);
    let layer = b.clock(clock.clone()).build().expect("valid room");
    (app(layer), clock)
}

struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: String,
}

impl Answer {
    /// The JSON body's `state`, if any.
    fn state(&self) -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(&self.body).ok()?;
        v.get("state")?.as_str().map(str::to_owned)
    }
    fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn send(app: &Router, req: Request<Body>) -> Answer {
    let res: Response<Body> = app.clone().oneshot(req).await.expect("infallible");
    let (parts, body) = res.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn request(method: Method, path: &str, cookie: Option<&str>) -> Request<Body> {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .body(Body::empty())
        .unwrap();
    if let Some(c) = cookie {
        req.headers_mut()
            .insert(header::COOKIE, HeaderValue::from_str(c).unwrap());
    }
    req
}

/// A first visit: the room's `Set-Cookie` value and the `name=value` pair to send back.
async fn first_visit(app: &Router) -> (String, String) {
    let a = send(app, request(Method::GET, "/", None)).await;
    assert_eq!(a.status, StatusCode::FOUND, "a first visit is redirected");
    let set = a
        .header(header::SET_COOKIE)
        .expect("a first visit gets the queue cookie")
        .to_owned();
    let pair = set.split(';').next().unwrap().trim().to_owned();
    (set, pair)
}

fn status_path() -> &'static str {
    // The default prefix is checked against the table separately.
    "/__waitingroom/x/status"
}

// ===== one check per documented setting =====

/// Compares one row's default with the room. `Ok(())` when it matches; `Err(why)` otherwise.
async fn check(setting: &str, default: &str) -> Result<(), String> {
    let l = layer();
    let c = l.config();
    let p = c.policy();
    let dur = || duration(default).ok_or_else(|| format!("no duration in {default:?}"));
    let eq = |what: &str, doc: String, code: String| {
        if doc == code {
            Ok(())
        } else {
            Err(format!("{what}: documented {doc}, the room has {code}"))
        }
    };
    match setting {
        "capacity" => required(
            default,
            builder_without_capacity(),
            ConfigError::MissingCapacity,
        ),
        "admission_rate" => eq(
            "admission rate",
            documented_option(default)?,
            format!("{:?}", p.admission_rate),
        ),
        "active_ttl" => eq(
            "active_ttl",
            ms(dur()?),
            p.active_ttl_ms.to_string() + " ms",
        ),
        "grant_ttl" => eq("grant_ttl", ms(dur()?), p.grant_ttl_ms.to_string() + " ms"),
        "queue_ttl" => eq("queue_ttl", ms(dur()?), p.queue_ttl_ms.to_string() + " ms"),
        "abandon_after" => eq(
            "abandon_after",
            ms(dur()?),
            p.abandon_after_ms.to_string() + " ms",
        ),
        "refresh" => eq("refresh", ms(dur()?), ms(c.refresh())),
        "session_ttl" => eq("session_ttl", ms(dur()?), ms(c.session_ttl())),
        "max_queue_len" => eq(
            "max_queue_len",
            number(default)
                .ok_or_else(|| format!("no number in {default:?}"))?
                .to_string(),
            p.max_queue_len.to_string(),
        ),
        "fail_policy" => {
            let doc = default.to_ascii_lowercase();
            let documented = if doc.contains("open") {
                FailPolicy::Open
            } else if doc.contains("closed") {
                FailPolicy::Closed
            } else {
                return Err(format!("no fail policy in {default:?}"));
            };
            eq(
                "fail policy",
                format!("{documented:?}"),
                format!("{:?}", c.fail_policy()),
            )
        }
        "path_prefix" => eq("path prefix", first_span(default)?, c.path_prefix().into()),
        "queue_header/token_header" => {
            let s = spans(default);
            eq(
                "headers",
                s.join(" / "),
                format!("{} / {}", c.queue_header(), c.token_header()),
            )
        }
        "cookies" => cookies_row(default).await,
        "cookie_name" => {
            let base = first_span(default)?.replace("{room}", c.room());
            eq(
                "cookie names",
                format!("{base}_q / {base}_a"),
                format!(
                    "{} / {}",
                    c.cookies().queue_name(),
                    c.cookies().admission_name()
                ),
            )
        }
        "cookie_path" => eq(
            "cookie path",
            first_span(default)?,
            c.cookies().path().into(),
        ),
        "cookie_domain" => {
            if !default.contains("unset") {
                return Err(format!("expected \"unset\" in {default:?}"));
            }
            eq(
                "cookie domain",
                "None".into(),
                format!("{:?}", c.cookies().domain()),
            )
        }
        "secure_cookies" => eq(
            "Secure",
            first_span(default)?,
            c.cookies().secure().to_string(),
        ),
        "same_site" => eq(
            "SameSite",
            first_span(default)?,
            format!("{:?}", c.cookies().same_site()),
        ),
        "(always)" => {
            // "cookies are `HttpOnly`", in the meaning column.
            let (set, _) = first_visit(&app(layer())).await;
            if set.split(';').any(|a| a.trim() == "HttpOnly") {
                Ok(())
            } else {
                Err(format!("the queue cookie is not HttpOnly: {set}"))
            }
        }
        "secret/signing_key/previous_signing_key/keyring" => secrets_row(default),
        "bind_tokens_to_network" => {
            let doc = match default.trim_matches('`') {
                "off" | "false" => false,
                "on" | "true" => true,
                other => return Err(format!("not on/off: {other:?}")),
            };
            eq(
                "network binding",
                doc.to_string(),
                c.bind_tokens_to_network().to_string(),
            )
        }
        "single_use_tickets" => {
            let doc = match default.trim_matches('`') {
                "off" | "false" => false,
                "on" | "true" => true,
                other => return Err(format!("not on/off: {other:?}")),
            };
            eq(
                "single-use tickets",
                doc.to_string(),
                c.single_use_tickets().to_string(),
            )
        }
        "max_event_streams" => eq(
            "max_event_streams",
            number(default)
                .ok_or_else(|| format!("no number in {default:?}"))?
                .to_string(),
            c.max_event_streams().to_string(),
        ),
        "new_visitor_limit" => new_visitor_limit(default).await,
        "poll_limit" => poll_limit(default).await,
        "client_ip_header/client_ip_with" => client_ip_default(default).await,
        "proof_of_work" | "proof_of_work/proof_of_work_challenge_ttl" => {
            proof_of_work_off(default).await
        }
        "risk" => risk_default(default).await,
        "risky_networks" => risky_networks_none(default).await,
        "opens_at/closes_at" => {
            if default != "none" {
                return Err(format!("expected \"none\", got {default:?}"));
            }
            eq("schedule", "None".into(), format!("{:?}", p.schedule))
        }
        "keep_line_after_close" => {
            let doc = match default.trim_matches('`') {
                "off" | "false" => false,
                "on" | "true" => true,
                other => return Err(format!("not on/off: {other:?}")),
            };
            let scheduled = builder()
                .opens_at(std::time::UNIX_EPOCH)
                .build()
                .map_err(|e| e.to_string())?;
            let keeps = scheduled
                .config()
                .policy()
                .schedule
                .as_ref()
                .map(|s| s.keep_line_after_close);
            eq(
                "keep_line_after_close",
                format!("{:?}", Some(doc)),
                format!("{keeps:?}"),
            )
        }
        other => Err(format!(
            "no check for the setting {other:?}: add one to tests/docs/docs_honesty.rs \
             (or a line in NOT_CHECKED saying why it cannot have one)"
        )),
    }
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

fn first_span(cell: &str) -> Result<String, String> {
    spans(cell)
        .into_iter()
        .next()
        .ok_or_else(|| format!("no `code` in {cell:?}"))
}

/// "none" is `None`, a number is `Some(n)`.
fn documented_option(cell: &str) -> Result<String, String> {
    if cell.trim() == "none" {
        Ok("None".into())
    } else {
        number(cell)
            .map(|n| format!("Some({n})"))
            .ok_or_else(|| format!("neither \"none\" nor a number: {cell:?}"))
    }
}

fn builder_without_capacity() -> Result<WaitingRoomLayer, ConfigError> {
    WaitingRoomLayer::builder("x").secret([7u8; 32]).build()
}

fn required(
    default: &str,
    built: Result<WaitingRoomLayer, ConfigError>,
    want: ConfigError,
) -> Result<(), String> {
    if default != "required" {
        return Err(format!("expected \"required\", the docs say {default:?}"));
    }
    match built {
        Err(e) if e == want => Ok(()),
        Err(e) => Err(format!("without it the builder says {e:?}, not {want:?}")),
        Ok(_) => Err("documented as required, but the room builds without it".into()),
    }
}

/// `wr_{room}_q` / `wr_{room}_a` and the attributes, against a real `Set-Cookie`.
async fn cookies_row(default: &str) -> Result<(), String> {
    let l = layer();
    let names = l.config().cookies();
    let (set, _) = first_visit(&app(l.clone())).await;
    let attributes: Vec<&str> = set.split(';').skip(1).map(str::trim).collect();
    for span in spans(default) {
        if span.contains("{room}") {
            let name = span.replace("{room}", "x");
            if name != names.queue_name() && name != names.admission_name() {
                return Err(format!(
                    "cookie {name}: the room's are {} and {}",
                    names.queue_name(),
                    names.admission_name()
                ));
            }
        } else if !attributes.contains(&span.as_str()) {
            return Err(format!(
                "`{span}` is not an attribute of the queue cookie: {set}"
            ));
        }
    }
    Ok(())
}

/// Keys are required; secrets have at least 32 bytes; `from_hex` takes 64+ hex digits.
fn secrets_row(default: &str) -> Result<(), String> {
    if default != "required" {
        return Err(format!("expected \"required\", the docs say {default:?}"));
    }
    let missing = WaitingRoomLayer::builder("x").capacity(1).build().err();
    if missing != Some(ConfigError::MissingSigningKey) {
        return Err(format!("without a key the builder says {missing:?}"));
    }
    Ok(())
}

/// The README's meaning cell of the secrets row: "secrets of at least N bytes" and
/// "`SigningKey::from_hex` takes M+ hex digits".
fn secret_lengths(meaning: &str) -> Result<(), String> {
    let bytes = meaning
        .find("at least ")
        .and_then(|i| number(&meaning[i..]))
        .ok_or_else(|| format!("no \"at least N bytes\" in {meaning:?}"))? as usize;
    let short = WaitingRoomLayer::builder("x")
        .capacity(1)
        .secret(vec![7u8; bytes - 1])
        .build();
    if !matches!(short, Err(ConfigError::SecretTooShort { .. })) {
        return Err(format!("a secret of {} bytes is not refused", bytes - 1));
    }
    if let Err(e) = builder_with_secret(vec![7u8; bytes]) {
        return Err(format!("a secret of {bytes} bytes is refused: {e:?}"));
    }
    let digits = meaning
        .find("from_hex")
        .and_then(|i| number(&meaning[i..]))
        .ok_or_else(|| format!("no hex digit count after from_hex in {meaning:?}"))?
        as usize;
    if SigningKey::from_hex("k", &"ab".repeat(digits / 2 - 1)).is_ok() {
        return Err(format!("from_hex takes {} hex digits", digits - 2));
    }
    if let Err(e) = SigningKey::from_hex("k", &"ab".repeat(digits / 2)) {
        return Err(format!("from_hex refuses {digits} hex digits: {e:?}"));
    }
    Ok(())
}

fn builder_with_secret(secret: Vec<u8>) -> Result<WaitingRoomLayer, ConfigError> {
    WaitingRoomLayer::builder("x")
        .capacity(1)
        .secret(secret)
        .build()
}

/// `max` first visits from one address pass, the next one is `429` asking to wait at most
/// `per`; the address is still limited just before `per` has passed, and free again after two
/// windows.
async fn new_visitor_limit(default: &str) -> Result<(), String> {
    let (max, per) = rate(default).ok_or_else(|| format!("no rate in {default:?}"))?;
    let (app, clock) = clocked(builder());
    // One client address, a new source port (connection) every time.
    let port = std::cell::Cell::new(1024u16);
    let visit = || {
        let mut req = request(Method::GET, "/", None);
        port.set(port.get() + 1);
        req.extensions_mut()
            .insert(PeerAddr(SocketAddr::from(([203, 0, 113, 7], port.get()))));
        req
    };
    for i in 1..=max {
        let a = send(&app, visit()).await;
        if a.status != StatusCode::FOUND {
            return Err(format!("first visit {i} of {max} got {}", a.status));
        }
    }
    limited(
        send(&app, visit()).await,
        max,
        per,
        "first visits from one address",
    )?;
    clock.advance(per - Duration::from_millis(1));
    let a = send(&app, visit()).await;
    if a.status != StatusCode::TOO_MANY_REQUESTS {
        return Err(format!("limited for less than {per:?}: {}", a.status));
    }
    clock.advance(per + Duration::from_millis(1));
    let a = send(&app, visit()).await;
    if a.status != StatusCode::FOUND {
        return Err(format!(
            "still limited two windows of {per:?} later: {}",
            a.status
        ));
    }
    Ok(())
}

/// `max` status polls of one session pass, the next is `429` (same shape as above).
async fn poll_limit(default: &str) -> Result<(), String> {
    let (max, per) = rate(default).ok_or_else(|| format!("no rate in {default:?}"))?;
    let (app, clock) = clocked(builder());
    let (_, cookie) = first_visit(&app).await;
    let poll = || request(Method::GET, status_path(), Some(&cookie));
    for i in 1..=max {
        let a = send(&app, poll()).await;
        if a.status != StatusCode::OK {
            return Err(format!("poll {i} of {max} got {}", a.status));
        }
    }
    limited(send(&app, poll()).await, max, per, "polls of one session")?;
    clock.advance(per - Duration::from_millis(1));
    let a = send(&app, poll()).await;
    if a.status != StatusCode::TOO_MANY_REQUESTS {
        return Err(format!("limited for less than {per:?}: {}", a.status));
    }
    clock.advance(per + Duration::from_millis(1));
    let a = send(&app, poll()).await;
    if a.status != StatusCode::OK {
        return Err(format!(
            "still limited two windows of {per:?} later: {}",
            a.status
        ));
    }
    Ok(())
}

fn limited(a: Answer, max: u32, per: Duration, what: &str) -> Result<(), String> {
    if a.status != StatusCode::TOO_MANY_REQUESTS || a.state().as_deref() != Some("limited") {
        return Err(format!(
            "{what}: number {} got {} {}, not 429 limited",
            max + 1,
            a.status,
            a.body
        ));
    }
    let wait: u64 = a
        .header(header::RETRY_AFTER)
        .and_then(|v| v.parse().ok())
        .ok_or("a 429 without Retry-After")?;
    if wait == 0 || wait > per.as_secs().max(1) {
        return Err(format!(
            "{what}: Retry-After {wait} s, longer than the documented window of {per:?}"
        ));
    }
    Ok(())
}

/// By default the client IP is the connection's: a spoofed `X-Forwarded-For` does not give a
/// fresh budget.
async fn client_ip_default(default: &str) -> Result<(), String> {
    if !default.contains("connection") && !default.contains("peer") {
        return Err(format!(
            "expected the connection's address, the docs say {default:?}"
        ));
    }
    let (app, _clock) =
        clocked(builder().new_visitor_limit(tower_waiting_room::RateLimit::per_minute(1)));
    let mut statuses = Vec::new();
    for i in 0..2u8 {
        let mut req = request(Method::GET, "/", None);
        req.extensions_mut()
            .insert(PeerAddr(SocketAddr::from(([203, 0, 113, 7], 1000))));
        req.headers_mut().insert(
            "x-forwarded-for",
            HeaderValue::from_str(&format!("198.51.100.{i}")).unwrap(),
        );
        statuses.push(send(&app, req).await.status);
    }
    if statuses != [StatusCode::FOUND, StatusCode::TOO_MANY_REQUESTS] {
        return Err(format!(
            "X-Forwarded-For changed the client IP by default: {statuses:?}"
        ));
    }
    Ok(())
}

/// Proof of work is off: a visitor with a queue cookie goes to the store, no challenge.
async fn proof_of_work_off(default: &str) -> Result<(), String> {
    if default != "off" {
        return Err(format!("expected \"off\", the docs say {default:?}"));
    }
    let app = app(layer());
    let (_, cookie) = first_visit(&app).await;
    let a = send(&app, request(Method::GET, "/", Some(&cookie))).await;
    if a.status == StatusCode::FORBIDDEN || a.state().as_deref() == Some("challenge") {
        return Err(format!("a new visitor got a challenge: {}", a.body));
    }
    Ok(())
}

/// The default scorer decides with proof of work on: a browser's first visit gets a cleared
/// (proven) queue cookie, a client without a browser's headers an unproven one.
async fn risk_default(default: &str) -> Result<(), String> {
    if !default.starts_with("the default scorer") {
        return Err(format!(
            "expected \"the default scorer ...\", got {default:?}"
        ));
    }
    let app = app(builder()
        .proof_of_work(tower_waiting_room::ProofOfWork::new(8))
        .build()
        .map_err(|e| e.to_string())?);
    let browser = Request::builder()
        .uri("/")
        .header(header::HOST, "shop.example")
        .header(header::USER_AGENT, "Mozilla/5.0")
        .header(header::ACCEPT_LANGUAGE, "en")
        .body(Body::empty())
        .unwrap();
    let cookie = |a: &Answer| a.header(header::SET_COOKIE).unwrap_or("").to_owned();
    let low = cookie(&send(&app, browser).await);
    let medium = cookie(&send(&app, request(Method::GET, "/", None)).await);
    if !low.contains("=p1.") || !medium.contains("=q1.") {
        return Err(format!(
            "with proof of work on, a browser's cookie is not cleared ({low}) or a script's is ({medium})"
        ));
    }
    Ok(())
}

/// No networks are listed: a new visitor from anywhere gets its first-visit redirect.
async fn risky_networks_none(default: &str) -> Result<(), String> {
    if default != "none" {
        return Err(format!("expected \"none\", got {default:?}"));
    }
    let layer = layer();
    if !layer.config().risky_networks().is_empty() {
        return Err(format!("listed: {:?}", layer.config().risky_networks()));
    }
    let mut req = request(Method::GET, "/", None);
    req.extensions_mut()
        .insert(PeerAddr(SocketAddr::from(([203, 0, 113, 7], 1000))));
    let a = send(&app(layer), req).await;
    if a.status != StatusCode::FOUND {
        return Err(format!("a new visitor got {}: {}", a.status, a.body));
    }
    Ok(())
}

async fn check_table(file: &str, text: &str, header: &[&str]) -> Vec<String> {
    let mut failures = Vec::new();
    for row in table(file, text, header) {
        let name = setting(&row.cells[0]);
        if NOT_CHECKED.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let default = row.cells.get(1).map(String::as_str).unwrap_or("");
        if let Err(why) = check(&name, default).await {
            failures.push(format!("{}: `{name}`: {why}", row.at));
        }
        if name == "secret/signing_key/previous_signing_key/keyring" {
            if let Err(why) = secret_lengths(row.cells.get(2).map_or("", String::as_str)) {
                failures.push(format!("{}: `{name}`: {why}", row.at));
            }
        }
    }
    failures
}

#[tokio::test]
async fn config_module_defaults_table_matches_the_builder() {
    let (file, text) = config_source();
    let failures = check_table(&file, &text, CONFIG_TABLE).await;
    assert!(
        failures.is_empty(),
        "the defaults documented in {file} are not the room's:\n{}",
        failures.join("\n")
    );
}

/// The keys of a settings file, from serde's "unknown field" error, which lists them.
fn file_keys() -> Vec<String> {
    let err =
        toml::from_str::<tower_waiting_room::config::RoomFile>("room = \"x\"\nno_such_key = 1")
            .expect_err("an unknown key is refused");
    let message = err.message().to_owned();
    let list = message
        .split("expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("serde lists the keys: {message}"));
    list.split(", ")
        .map(|k| k.trim_matches('`').to_owned())
        .collect()
}

#[test]
fn config_module_table_has_a_row_for_every_key_of_a_file() {
    // Keys of the file itself, not settings of the room (documented with `RoomFile`).
    const FILE_ONLY: &[&str] = &["room", "secret_env", "secret_file", "secret"];
    let (file, text) = config_source();
    let named: BTreeSet<String> = table(&file, &text, CONFIG_TABLE)
        .iter()
        .flat_map(|row| {
            setting(&row.cells[0])
                .split('/')
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let keys = file_keys();
    assert!(keys.len() >= 30, "too few keys: {keys:?}");
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !FILE_ONLY.contains(&k.as_str()) && !named.contains(*k))
        .collect();
    assert!(
        missing.is_empty(),
        "{file}: the settings table has no row for {missing:?}"
    );
}

#[tokio::test]
async fn readme_configuration_table_matches_the_builder() {
    let text = read("README.md");
    let failures = check_table(
        "README.md",
        &text,
        &["builder method", "default", "meaning"],
    )
    .await;
    assert!(
        failures.is_empty(),
        "the README's configuration table is not the room's:\n{}",
        failures.join("\n")
    );
}

// ===== docs/api.md: the status endpoint =====

/// A store that always fails with `kind`.
struct FailingStore(StoreErrorKind);

impl FailingStore {
    fn fail<T: Send + 'static>(&self) -> StoreFuture<T> {
        let kind = self.0;
        Box::pin(async move { Err(StoreError::new(kind)) })
    }
}

impl Store for FailingStore {
    fn enter(&self, _: &RoomPolicy, _: SessionId) -> StoreFuture<Decision> {
        self.fail()
    }
    fn poll(&self, _: &RoomPolicy, _: SessionId) -> StoreFuture<Decision> {
        self.fail()
    }
    fn heartbeat(&self, _: &RoomPolicy, _: SessionId) -> StoreFuture<Decision> {
        self.fail()
    }
    fn release(&self, _: &RoomPolicy, _: SessionId) -> StoreFuture<bool> {
        self.fail()
    }
    fn stats(&self, _: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.fail()
    }
    fn configure(&self, _: &RoomPolicy, _: SettingsChange) -> StoreFuture<SettingsUpdate> {
        self.fail()
    }
    fn admit_next(&self, _: &RoomPolicy, _: u32) -> StoreFuture<u64> {
        self.fail()
    }
    fn ban(&self, _: &RoomPolicy, _: SessionId, _: u64) -> StoreFuture<bool> {
        self.fail()
    }
}

#[tokio::test]
async fn api_status_endpoint_table_matches_a_live_room() {
    let rows = table(
        "docs/api.md",
        &read("docs/api.md"),
        &["status", "when", "body"],
    );
    let documented: BTreeSet<u16> = rows
        .iter()
        .map(|r| number(&r.cells[0]).unwrap_or_else(|| panic!("{}: no status", r.at)) as u16)
        .collect();

    // What the room answers, and the states it names.
    let mut seen: Vec<(u16, Option<String>, String)> = Vec::new();
    let mut record = |what: &str, a: Answer| {
        seen.push((a.status.as_u16(), a.state(), what.to_owned()));
    };

    let (app, _clock) = clocked(builder());
    let (_, cookie) = first_visit(&app).await;
    let get = || request(Method::GET, status_path(), Some(&cookie));
    record("GET with a place", send(&app, get()).await);
    record(
        "HEAD with a place",
        send(&app, request(Method::HEAD, status_path(), Some(&cookie))).await,
    );
    record(
        "GET without a place",
        send(&app, request(Method::GET, status_path(), None)).await,
    );
    for method in [Method::POST, Method::PUT, Method::DELETE] {
        let a = send(&app, request(method.clone(), status_path(), None)).await;
        assert_eq!(
            a.header(header::ALLOW),
            Some("GET, HEAD"),
            "{method} status: Allow"
        );
        record("another method", a);
    }
    // Over the poll limit.
    for _ in 0..200 {
        let a = send(&app, get()).await;
        if a.status == StatusCode::TOO_MANY_REQUESTS {
            record("over the poll limit", a);
            break;
        }
    }
    // A failing store, under either fail policy.
    for kind in [StoreErrorKind::Unavailable, StoreErrorKind::Busy] {
        for policy in [FailPolicy::Open, FailPolicy::Closed] {
            let (app, _clock) = clocked(builder().store(FailingStore(kind)).fail_policy(policy));
            let (_, cookie) = first_visit(&app).await;
            let a = send(&app, request(Method::GET, status_path(), Some(&cookie))).await;
            record("a failing store", a);
        }
    }

    // Operators: a closed room, a banned session.
    {
        let layer = builder()
            .clock(ManualClock::new(T0_MS))
            .build()
            .expect("valid room");
        let app = self::app(layer.clone());
        let (_, cookie) = first_visit(&app).await;
        let session = cookie.split('=').nth(1).unwrap();
        // The value is `<kind>.<kid>.<session>.<iat>.<exp>.<tag>`.
        let session = SessionId::from_hex(session.split('.').nth(2).unwrap()).expect("a session");
        layer
            .control()
            .close(tower_waiting_room::control::Closing::KeepInside)
            .await
            .unwrap();
        let a = send(&app, request(Method::GET, status_path(), Some(&cookie))).await;
        record("a closed room", a);
        layer.control().open().await.unwrap();
        layer.control().drop_session(session).await.unwrap();
        let a = send(&app, request(Method::GET, status_path(), Some(&cookie))).await;
        record("a banned session", a);
    }

    let observed: BTreeSet<u16> = seen.iter().map(|(s, _, _)| *s).collect();
    assert_eq!(
        documented, observed,
        "docs/api.md documents the statuses {documented:?} for the status endpoint; a live \
         room answered {seen:?}"
    );
    // Every state a row names in quotes ("limited", "busy", ...) is one the room gave with
    // that status.
    for row in &rows {
        let status = number(&row.cells[0]).unwrap() as u16;
        let body = row.cells.get(2).map_or("", String::as_str);
        for state in body.split('"').skip(1).step_by(2) {
            assert!(
                seen.iter()
                    .any(|(s, st, _)| *s == status && st.as_deref() == Some(state)),
                "{}: state {state:?} with {status}: the room never answered that ({seen:?})",
                row.at
            );
        }
    }
}

// ===== README: the secret recipe =====

#[cfg(unix)]
#[test]
fn readme_secret_recipe_makes_a_key_the_demo_accepts() {
    let readme = read("README.md");
    let recipes: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("secret=$("))
        .collect();
    assert!(!recipes.is_empty(), "README.md: no `secret=$(...)` recipe");
    for recipe in recipes {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{recipe}\nprintf '%s' \"$secret\""))
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{recipe}: {out:?}");
        let secret = String::from_utf8(out.stdout).unwrap();
        // The demo's rule for --secret: at least 64 hex digits, then SigningKey::from_hex.
        assert!(
            secret.len() >= 64 && secret.bytes().all(|b| b.is_ascii_hexdigit()),
            "{recipe}: {secret:?} is not 64+ hex digits"
        );
        SigningKey::from_hex("k1", &secret)
            .unwrap_or_else(|e| panic!("{recipe}: the demo would refuse {secret:?}: {e}"));
    }
}
