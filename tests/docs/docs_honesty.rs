//! The documentation states defaults and status codes; these tests hold it to the code.
//!
//! - The settings table of `docs/configuration.md` is rendered from the settings' declaration
//!   (`settings_table.rs` compares the page with it), so the defaults it writes (`"5m"`,
//!   `100000`, `true`) are the declaration's. What the rendering cannot vouch for is checked
//!   here against a built room: the words of a default that is unset ("required", "none", the
//!   value it resolves to), every one of which needs a check (or a line in [`NOT_CHECKED`]
//!   saying why it cannot have one); the limits and the cookies as a room really applies them;
//!   and the hand-written rows: the keys a file has besides the settings, the settings set in
//!   code only, and the sentences about cookies and the drain budget.
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
use tower_waiting_room::config::{table, RoomFile};
use tower_waiting_room::store::{
    Decision, RoomStats, SettingsChange, SettingsUpdate, Store, StoreError, StoreErrorKind,
    StoreFuture,
};
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{
    ConfigError, FailPolicy, PeerAddr, ProofOfWork, RoomPolicy, SessionId, SigningKey,
    WaitingRoomBuilder, WaitingRoomLayer,
};

/// A time on whole minutes, so that rate-limit windows start with the test.
const T0_MS: u64 = 1_767_225_600_000;

/// Rows that name a setting whose default cannot be observed through the public API, and why.
const NOT_CHECKED: &[(&str, &str)] = &[
    ("store/shared_store", "a store has no identity to compare"),
    ("clock", "the system clock has no identity to compare"),
    ("renderer", "a renderer has no identity to compare"),
    ("bypass", "\"none\": nothing to compare"),
    ("gate", "\"none\": nothing to compare"),
];

// ===== reading the docs =====

fn read(rel: &str) -> String {
    let path = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
}

/// The settings page.
const CONFIGURATION: &str = "docs/configuration.md";

/// One row of a markdown table.
#[derive(Debug)]
struct Row {
    /// `file:line`, for messages.
    at: String,
    cells: Vec<String>,
}

/// The rows of the table whose header cells are `header`. Panics when the table is missing: a
/// renamed header must not turn the test into a no-op.
fn table(file: &str, text: &str, header: &[&str]) -> Vec<Row> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
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
/// (`store/shared_store`), or the cell's text when it has none.
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

/// A duration as a file writes it, one part (`30m`, `10s`, `1m`), or a unit alone (`m`: one).
fn file_duration(text: &str) -> Option<Duration> {
    let text = text.trim().trim_matches('"');
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let n: u64 = if n.is_empty() { 1 } else { n.parse().ok()? };
    let ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    Some(Duration::from_millis(n * ms))
}

/// A rate limit as a file writes it: `"60/1m"`, `"30/10s"`.
fn file_rate(cell: &str) -> Option<(u32, Duration)> {
    let text = spans(cell).into_iter().next()?;
    let (max, per) = text.trim_matches('"').split_once('/')?;
    Some((max.parse().ok()?, file_duration(per)?))
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
    "/__waitingroom/x/status"
}

// ===== the settings table: what the rendering cannot vouch for =====

/// Compares one documented default with the room. `Ok(None)` when the setting has no check
/// here, `Ok(Some(()))` when it matches, `Err(why)` otherwise.
async fn check(setting: &str, default: &str) -> Result<Option<()>, String> {
    let l = layer();
    let c = l.config();
    let p = c.policy();
    let eq = |what: &str, doc: String, code: String| {
        if doc == code {
            Ok(Some(()))
        } else {
            Err(format!("{what}: documented {doc}, the room has {code}"))
        }
    };
    let words = |want: &str| {
        if default == want {
            Ok(())
        } else {
            Err(format!("expected {want:?}, the docs say {default:?}"))
        }
    };
    match setting {
        // The generated table's unset defaults.
        "capacity" => required(
            default,
            builder_without_capacity(),
            ConfigError::MissingCapacity,
        ),
        "admission_rate" => {
            words("none")?;
            eq(
                "admission rate",
                "None".into(),
                format!("{:?}", p.admission_rate),
            )
        }
        "abandon_after" => abandon_after(default),
        "cookie_name" => {
            let base = first_span(default)?
                .trim_matches('"')
                .replace("{room}", c.room());
            eq(
                "cookie names",
                format!("{base}_q / {base}_a / {base}_t"),
                format!(
                    "{} / {} / {}",
                    c.cookies().queue_name(),
                    c.cookies().admission_name(),
                    c.cookies().ticket_name()
                ),
            )
        }
        "cookie_domain" => {
            words("unset (host-only cookies)")?;
            let (set, _) = first_visit(&app(layer())).await;
            if set.contains("Domain=") {
                return Err(format!("the queue cookie has a Domain: {set}"));
            }
            eq(
                "cookie domain",
                "None".into(),
                format!("{:?}", c.cookies().domain()),
            )
        }
        "client_ip_header" | "client_ip_with" => client_ip_default(default).await,
        "proof_of_work" => proof_of_work_off(default).await,
        "proof_of_work_challenge_ttl" => {
            let ttl = file_duration(&first_span(default)?)
                .ok_or_else(|| format!("no duration in {default:?}"))?;
            eq(
                "challenge lifetime",
                format!("{ttl:?}"),
                format!("{:?}", ProofOfWork::new(8).challenge_ttl()),
            )
        }
        "risky_networks" => risky_networks_none(default).await,
        "opens_at" => {
            words("none (open now)")?;
            // Open now: a second visit is admitted.
            let app = app(layer());
            let (_, cookie) = first_visit(&app).await;
            let a = send(&app, request(Method::GET, "/", Some(&cookie))).await;
            if a.status != StatusCode::OK {
                return Err(format!(
                    "a visitor of a new room got {}: {}",
                    a.status, a.body
                ));
            }
            eq("schedule", "None".into(), format!("{:?}", p.schedule))
        }
        "closes_at" => {
            words("none")?;
            eq("schedule", "None".into(), format!("{:?}", p.schedule))
        }
        // Written defaults whose effect is checked on a room.
        "new_visitor_limit" => new_visitor_limit(default).await,
        "poll_limit" => poll_limit(default).await,
        "keep_line_after_close" => {
            let doc = match first_span(default)?.as_str() {
                "false" => false,
                "true" => true,
                other => return Err(format!("not true/false: {other:?}")),
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
        // The settings set in code only.
        "secret/signing_key/previous_signing_key/keyring" => secrets_row(default),
        "risk" => risk_default(default).await,
        _ => Ok(None),
    }
}

fn first_span(cell: &str) -> Result<String, String> {
    spans(cell)
        .into_iter()
        .next()
        .ok_or_else(|| format!("no `code` in {cell:?}"))
}

fn builder_without_capacity() -> Result<WaitingRoomLayer, ConfigError> {
    WaitingRoomLayer::builder("x").secret([7u8; 32]).build()
}

fn required(
    default: &str,
    built: Result<WaitingRoomLayer, ConfigError>,
    want: ConfigError,
) -> Result<Option<()>, String> {
    if default != "required" {
        return Err(format!("expected \"required\", the docs say {default:?}"));
    }
    match built {
        Err(e) if e == want => Ok(Some(())),
        Err(e) => Err(format!("without it the builder says {e:?}, not {want:?}")),
        Ok(_) => Err("documented as required, but the room builds without it".into()),
    }
}

/// `"30m"`, or `queue_ttl` if longer.
fn abandon_after(default: &str) -> Result<Option<()>, String> {
    let after = file_duration(&first_span(default)?)
        .ok_or_else(|| format!("no duration in {default:?}"))?;
    if !default.contains("`queue_ttl` if longer") {
        return Err(format!(
            "expected \"... or `queue_ttl` if longer\": {default:?}"
        ));
    }
    let ms = |d: Duration| d.as_millis() as u64;
    let got = layer().config().policy().abandon_after_ms;
    if got != ms(after) {
        return Err(format!("documented {after:?}, the room has {got} ms"));
    }
    let longer = after + Duration::from_secs(600);
    let stretched = builder()
        .queue_ttl(longer)
        .build()
        .map_err(|e| e.to_string())?
        .config()
        .policy()
        .abandon_after_ms;
    if stretched != ms(longer) {
        return Err(format!(
            "with queue_ttl {longer:?}, abandon_after is {stretched} ms"
        ));
    }
    Ok(Some(()))
}

/// Keys are required; secrets have at least 32 bytes; `from_hex` takes 64+ hex digits.
fn secrets_row(default: &str) -> Result<Option<()>, String> {
    if default != "required" {
        return Err(format!("expected \"required\", the docs say {default:?}"));
    }
    let missing = WaitingRoomLayer::builder("x").capacity(1).build().err();
    if missing != Some(ConfigError::MissingSigningKey) {
        return Err(format!("without a key the builder says {missing:?}"));
    }
    Ok(Some(()))
}

/// The meaning cell of the secrets row: "secrets of at least N bytes" and
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
async fn new_visitor_limit(default: &str) -> Result<Option<()>, String> {
    let (max, per) = file_rate(default).ok_or_else(|| format!("no rate in {default:?}"))?;
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
    Ok(Some(()))
}

/// `max` status polls of one session pass, the next is `429` (same shape as above).
async fn poll_limit(default: &str) -> Result<Option<()>, String> {
    let (max, per) = file_rate(default).ok_or_else(|| format!("no rate in {default:?}"))?;
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
    Ok(Some(()))
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
async fn client_ip_default(default: &str) -> Result<Option<()>, String> {
    if !default.contains("connection") {
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
    Ok(Some(()))
}

/// Proof of work is off: a visitor with a queue cookie goes to the store, no challenge.
async fn proof_of_work_off(default: &str) -> Result<Option<()>, String> {
    if default != "off" {
        return Err(format!("expected \"off\", the docs say {default:?}"));
    }
    let app = app(layer());
    let (_, cookie) = first_visit(&app).await;
    let a = send(&app, request(Method::GET, "/", Some(&cookie))).await;
    if a.status == StatusCode::FORBIDDEN || a.state().as_deref() == Some("challenge") {
        return Err(format!("a new visitor got a challenge: {}", a.body));
    }
    Ok(Some(()))
}

/// The default scorer decides with proof of work on: a browser's first visit gets a cleared
/// (proven) queue cookie, a client without a browser's headers an unproven one.
async fn risk_default(default: &str) -> Result<Option<()>, String> {
    if !default.starts_with("the default scorer") {
        return Err(format!(
            "expected \"the default scorer ...\", got {default:?}"
        ));
    }
    let app = app(builder()
        .proof_of_work(ProofOfWork::new(8))
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
    Ok(Some(()))
}

/// No networks are listed: a new visitor from anywhere gets its first-visit redirect.
async fn risky_networks_none(default: &str) -> Result<Option<()>, String> {
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
    Ok(Some(()))
}

/// Every setting whose default the table gives in words has a check, and passes it; so do the
/// written defaults checked on a room (the limits, the line after a closing).
#[tokio::test]
async fn settings_table_defaults_in_words_are_the_rooms() {
    let mut failures = Vec::new();
    for row in table::rows() {
        match check(row.key, &row.default).await {
            Ok(Some(())) => {}
            // A default the table writes as a file would: it is the declaration's.
            Ok(None) if !row.in_words => {}
            Ok(None) => failures.push(format!(
                "`{}`: the default {:?} is words, and has no check: add one to \
                 tests/docs/docs_honesty.rs",
                row.key, row.default
            )),
            Err(why) => failures.push(format!("`{}`: {why}", row.key)),
        }
    }
    assert!(
        failures.is_empty(),
        "the settings table (rendered from src/config/settings.rs) is not the room's:\n{}",
        failures.join("\n")
    );
}

/// The settings set in code only, a hand-written table of `docs/configuration.md`.
#[tokio::test]
async fn code_only_settings_table_matches_the_builder() {
    let text = read(CONFIGURATION);
    let mut failures = Vec::new();
    for row in table(
        CONFIGURATION,
        &text,
        &["builder method", "default", "meaning"],
    ) {
        let name = setting(&row.cells[0]);
        if NOT_CHECKED.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let default = row.cells.get(1).map(String::as_str).unwrap_or("");
        match check(&name, default).await {
            Ok(Some(())) => {}
            Ok(None) => failures.push(format!(
                "{}: `{name}`: no check: add one to tests/docs/docs_honesty.rs (or a line in \
                 NOT_CHECKED saying why it cannot have one)",
                row.at
            )),
            Err(why) => failures.push(format!("{}: `{name}`: {why}", row.at)),
        }
        if name == "secret/signing_key/previous_signing_key/keyring" {
            if let Err(why) = secret_lengths(row.cells.get(2).map_or("", String::as_str)) {
                failures.push(format!("{}: `{name}`: {why}", row.at));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the settings set in code only, in {CONFIGURATION}, are not the room's:\n{}",
        failures.join("\n")
    );
}

/// "Cookies are always `HttpOnly`. With the defaults they are `wr_{room}_q` ..., `Path=/`,
/// `Secure`, `SameSite=Lax`, host-only": against a real `Set-Cookie`.
#[tokio::test]
async fn configuration_cookie_sentence_is_a_real_cookie() {
    let text = read(CONFIGURATION);
    let sentence: String = text
        .split("\n\n")
        .find(|p| p.starts_with("Cookies are always `HttpOnly`."))
        .unwrap_or_else(|| {
            panic!("{CONFIGURATION}: no paragraph \"Cookies are always `HttpOnly`.\"")
        })
        .to_owned();
    let l = layer();
    let names = l.config().cookies().clone();
    let (set, _) = first_visit(&app(l)).await;
    let attributes: Vec<&str> = set.split(';').skip(1).map(str::trim).collect();
    for span in spans(&sentence) {
        if span.contains("{room}") {
            let name = span.replace("{room}", "x");
            assert!(
                name == names.queue_name() || name == names.admission_name(),
                "{CONFIGURATION}: cookie {name}: the room's are {} and {}",
                names.queue_name(),
                names.admission_name()
            );
        } else {
            assert!(
                attributes.contains(&span.as_str()),
                "{CONFIGURATION}: `{span}` is not an attribute of the queue cookie: {set}"
            );
        }
    }
    assert!(
        sentence.contains("host-only") && !set.contains("Domain="),
        "{CONFIGURATION}: host-only cookies: {set}"
    );
}

/// "`"drain"` alone has a budget of N".
#[test]
fn configuration_drain_budget_is_the_rooms() {
    let text = read(CONFIGURATION).replace('\n', " ");
    let at = text
        .find("`\"drain\"` alone has a budget of ")
        .unwrap_or_else(|| panic!("{CONFIGURATION}: no sentence on the budget of \"drain\""));
    let budget = number(&text[at..]).expect("a number");
    let file: RoomFile = toml::from_str("room = \"x\"\nfail_policy = \"drain\"").unwrap();
    let layer = file
        .builder()
        .unwrap()
        .secret([7u8; 32])
        .capacity(1)
        .build()
        .unwrap();
    assert_eq!(
        layer.config().fail_policy(),
        FailPolicy::Drain { budget },
        "{CONFIGURATION}: the budget of \"drain\""
    );
}

/// The keys of a settings file, from serde's "unknown field" error, which lists them.
fn file_keys() -> Vec<String> {
    let err = toml::from_str::<RoomFile>("room = \"x\"\nno_such_key = 1")
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

/// Every key of a file is in the settings table or in the table of the file's own keys, and
/// every key those tables name is one.
#[test]
fn configuration_tables_have_a_row_for_every_key_of_a_file() {
    // Refused in a file, whatever its value (the secret is never written in the settings).
    const REFUSED: &[&str] = &["secret"];
    let text = read(CONFIGURATION);
    let mut named: BTreeSet<String> = table::rows().iter().map(|r| r.key.to_owned()).collect();
    for row in table(CONFIGURATION, &text, &["key", "default", "value"]) {
        named.insert(setting(&row.cells[0]));
    }
    let keys: BTreeSet<String> = file_keys()
        .into_iter()
        .filter(|k| !REFUSED.contains(&k.as_str()))
        .collect();
    assert!(keys.len() >= 30, "too few keys: {keys:?}");
    assert_eq!(
        named, keys,
        "{CONFIGURATION}: the keys its tables name are not the keys of a file"
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
