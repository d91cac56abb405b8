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

use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;
use tower_waiting_room::config::table;
use tower_waiting_room::testing::ManualClock;
use tower_waiting_room::{WaitingRoomBuilder, WaitingRoomLayer};

mod api_status;
mod configuration_rows;
mod readme_secret;
mod settings_defaults;

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
