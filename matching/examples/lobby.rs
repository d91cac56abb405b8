//! A topic chat lobby: people pick a topic and a group size (2 or 3) and are put together in
//! groups, oldest first, by the crate's matching (`docs/matching.md`), on the embedded store (or
//! Redis with `--redis`).
//!
//! ```text
//! cargo run -p tower-waiting-room-matching --example lobby
//! ```
//!
//! then open <http://127.0.0.1:3100> in two browsers (or a normal and a private window), give
//! each a name, pick the same topic and size 2, and press Join in both: the second join forms
//! the group, and about a second later the "app" confirms it (it "recorded the conversation").
//! With size 3 and two people, the pair forms after `--fallback-after`. Run with `--help` for
//! all flags; `--no-confirm` shows what happens when the app never confirms (it crashed): the
//! group is undone after `--confirm-ttl` and its members go back to the front of their queue.
//!
//! Routes:
//! - `GET /`: the lobby page (one file, inline script, no external assets). It sends the name
//!   typed in as the `X-User` header and polls `GET /api/matching` every second while waiting
//!   or pending.
//! - `POST|GET|DELETE /api/matching`: the crate's [`MatchingService`], mounted with axum's
//!   `route_service`, wrapped in a small middleware that shows this app's side of matching:
//!   it reads each answer and, for a pending group, confirms it a second later (see
//!   [`Recorder`]).
//!
//! Users are named by the `X-User` header: a stand-in for the application's own
//! authentication, for this example only. Anybody can send any `X-User`; a real app identifies
//! users from its session or a verified token (or uses the service's signed `session_cookie`).

#[path = "../../examples/shared/mod.rs"]
mod shared;

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::Value;
use tower_waiting_room_matching::service::MatchingService;
use tower_waiting_room_matching::store::{MatchStore, MemoryMatchStore};
use tower_waiting_room_matching::{
    AppGroupId, ConfirmOutcome, GroupId, MatchConfigError, Matchmaker, Ticker, Topic, UserId,
};

const USAGE: &str = "\
tower-waiting-room lobby: a topic chat lobby that matches people in groups of 2 or 3.

USAGE:
    cargo run -p tower-waiting-room-matching --example lobby -- [FLAGS]

FLAGS:
    --port <N>              port to listen on, on 127.0.0.1 (default 3100; 0 picks a
                            free one)
    --redis <URL>           match through Redis/Valkey (redis://host:port), shared by
                            every lobby process pointed at it (default: the embedded
                            store, this process only)
    --fallback-after <SECS> a group of 3 forms with 2 once its oldest has waited this
                            long (default 20)
    --timeout <SECS>        a waiter not matched this long after joining is dropped
                            (default 300)
    --confirm-ttl <SECS>    a group the app has not confirmed this long after it formed
                            is undone: its members go back to the front of their queue
                            (default 10)
    --no-confirm            the app never confirms (as if it crashed after matching):
                            every group is undone after --confirm-ttl
    -h, --help              print this help

ROUTES:
    GET    /                 the lobby page
    POST   /api/matching     join: {\"topic\": \"rust\", \"size\": 2}, as the X-User header
    GET    /api/matching     where X-User stands
    DELETE /api/matching     X-User leaves
";

/// Where the matching API is mounted.
pub(crate) const API: &str = "/api/matching";

/// The topics offered: the service's `topics` hook refuses others (`400` `unknown_topic`). Short
/// words, so that `conv-<group id>` is always a valid [`AppGroupId`] (a group id holds the topic
/// in hex).
pub(crate) const TOPICS: &[&str] = &["rust", "go", "music", "films", "books", "random"];

/// How long the app takes to "record the conversation" before it confirms a group.
pub(crate) const CONFIRM_AFTER: Duration = Duration::from_secs(1);

/// How often the matchmaker's ticker runs: groups form (and are undone) with nobody polling.
const TICK_EVERY: Duration = Duration::from_secs(1);

/// What the command line asked for.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) port: u16,
    pub(crate) redis: Option<String>,
    pub(crate) fallback_after: u64,
    pub(crate) timeout: u64,
    pub(crate) confirm_ttl: u64,
    pub(crate) confirm: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            port: 3100,
            redis: None,
            fallback_after: 20,
            timeout: 300,
            confirm_ttl: 10,
            confirm: true,
        }
    }
}

/// `Ok(None)` means `--help` was asked for.
pub(crate) fn parse_args(
    args: impl IntoIterator<Item = String>,
) -> Result<Option<Options>, String> {
    let mut opts = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        // Both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let is_switch = matches!(flag.as_str(), "-h" | "--help" | "--no-confirm");
        if is_switch && inline.is_some() {
            return Err(format!("{flag} takes no value"));
        }
        let mut value = || -> Result<String, String> {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--port" => {
                let v = value()?;
                opts.port = v
                    .parse()
                    .map_err(|_| format!("--port needs a port number, got {v:?}"))?;
            }
            "--redis" => opts.redis = Some(value()?),
            "--fallback-after" => opts.fallback_after = seconds(&flag, &value()?)?,
            "--timeout" => opts.timeout = seconds(&flag, &value()?)?,
            "--confirm-ttl" => opts.confirm_ttl = seconds(&flag, &value()?)?,
            "--no-confirm" => opts.confirm = false,
            other if other.starts_with('-') => return Err(format!("unknown flag {other}")),
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    Ok(Some(opts))
}

fn seconds(flag: &str, v: &str) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(0) => Err(format!("{flag} must be at least 1 second")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{flag} needs a whole number of seconds, got {v:?}")),
    }
}

/// The lobby: its routes, and the matchmaker's ticker, which runs as long as this is kept.
pub(crate) struct Lobby {
    pub(crate) router: Router,
    ticker: Ticker,
}

/// Builds the lobby from the options (inside a Tokio runtime: the ticker is a task); an error
/// is for the user, not a panic.
pub(crate) fn build(opts: &Options) -> Result<Lobby, String> {
    // ---- Store selection -------------------------------------------------------------------
    // The embedded store keeps every queue in this process; `--redis <url>` matches through
    // Redis, so every lobby process pointed at it matches from the same queues.
    let store: Arc<dyn MatchStore> = match &opts.redis {
        Some(url) => redis_store(url)?,
        None => Arc::new(MemoryMatchStore::new()),
    };
    let matchmaker = Matchmaker::builder()
        .fallback_after(Duration::from_secs(opts.fallback_after))
        .timeout(Duration::from_secs(opts.timeout))
        .confirm_ttl(Duration::from_secs(opts.confirm_ttl))
        .build_shared(store)
        .map_err(|e| match e {
            MatchConfigError::FallbackAfterTimeout => {
                "--fallback-after must be shorter than --timeout".to_owned()
            }
            e => format!("invalid matching configuration: {e}"),
        })?;
    let service = MatchingService::builder(matchmaker.clone())
        // The stand-in for the app's authentication: whoever the `X-User` header names. No
        // name is nobody (`401`); an invalid one (a control character, more than 128 bytes)
        // is a `400` naming the field `user`.
        .identify(|parts| Some(parts.headers.get("x-user")?.to_str().ok()?.to_owned()))
        .topics(|topic: &Topic| TOPICS.contains(&topic.as_str()))
        .build()
        .map_err(|e| format!("invalid matching service: {e}"))?;

    let api = Router::new().route_service(API, service);
    let api = if opts.confirm {
        let recorder = Recorder {
            matchmaker: matchmaker.clone(),
            scheduled: Arc::default(),
        };
        api.layer(middleware::from_fn_with_state(recorder, watch_answers))
    } else {
        // `--no-confirm`: nobody confirms, as when the app crashed after a group formed.
        api
    };
    let page = Html(page());
    let router = Router::new()
        .route("/", get(move || async move { page }))
        .merge(api);

    // Groups form in the step that makes them possible (a join, a poll); the ticker also forms
    // them, and undoes unconfirmed ones, when nobody polls.
    let ticker = matchmaker.spawn_ticker(TICK_EVERY);
    Ok(Lobby { router, ticker })
}

/// The Redis match store at `url`: every lobby process pointed at the same Redis matches from
/// the same queues (each queue's keys share one hash tag, so Redis Cluster works too).
#[cfg(feature = "redis")]
fn redis_store(url: &str) -> Result<Arc<dyn MatchStore>, String> {
    use tower_waiting_room::store::RedisStore;
    use tower_waiting_room_matching::store::RedisMatchStore;
    let store = RedisStore::from_url(url).map_err(|e| format!("--redis {url}: {e}"))?;
    Ok(Arc::new(RedisMatchStore::new(&store)))
}

#[cfg(not(feature = "redis"))]
fn redis_store(url: &str) -> Result<Arc<dyn MatchStore>, String> {
    Err(format!(
        "--redis {url}: this example was built without the `redis` feature"
    ))
}

/// The app's side of matching. A real app, once a group forms, records it (creates the
/// conversation) and then confirms the group with the record's id; a group it never confirms
/// (the app crashed in between) is undone after `confirm_ttl` and its members go back to the
/// front of their queue, so nobody is stuck in a conversation that does not exist.
///
/// The matching API has no "groups formed" feed, and this example adds no store API for one:
/// the app learns of a group from the API's own answers, which it reads on their way out (a
/// member's join or poll shows it; the page polls every second). For each pending group it
/// sees, it "records the conversation" (waits [`CONFIRM_AFTER`]) and confirms the group as
/// `conv-<group id>`. The id follows from the group's, so a repeated confirmation (two polls
/// seen before the first confirm, two lobby processes on one Redis) is harmless: the same id
/// again changes nothing. A group no member polls is never seen, never confirmed, and undone:
/// what should happen to a conversation nobody showed up to.
#[derive(Clone)]
pub(crate) struct Recorder {
    matchmaker: Matchmaker,
    /// Groups whose confirmation is under way, so that each is recorded once at a time.
    scheduled: Arc<Mutex<HashSet<GroupId>>>,
}

impl Recorder {
    /// Looks at one answer of the API for a pending group: at its top (a join or a poll) or in
    /// a `409`'s `current` (joined twice).
    fn saw(&self, answer: &Value) {
        for state in [answer, &answer["current"]] {
            if state["state"] == "matched" && state["confirmed"] == false {
                if let Some(id) = state["group"].as_str().and_then(|g| g.parse().ok()) {
                    self.schedule(id);
                }
            }
        }
    }

    fn schedule(&self, id: GroupId) {
        let new = (self.scheduled.lock().unwrap_or_else(|e| e.into_inner())).insert(id.clone());
        if !new {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(CONFIRM_AFTER).await;
            this.confirm(&id).await;
            // If the confirmation failed, the next poll that shows the group pending schedules
            // it again.
            (this.scheduled.lock().unwrap_or_else(|e| e.into_inner())).remove(&id);
        });
    }

    async fn confirm(&self, id: &GroupId) {
        let app_id = match AppGroupId::new(format!("conv-{id}")) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(group = %id, error = %e, "no conversation id for this group");
                return;
            }
        };
        match self.matchmaker.confirm(id.clone(), app_id.clone()).await {
            Ok(ConfirmOutcome::Confirmed(group)) => {
                let members: Vec<&str> = group.members.iter().map(UserId::as_str).collect();
                println!(
                    "conversation {app_id} recorded: group {id} confirmed ({})",
                    members.join(", ")
                );
            }
            Ok(ConfirmOutcome::Conflict(group)) => tracing::warn!(
                group = %id,
                confirmed_as = ?group.confirmed.as_ref().map(AppGroupId::as_str),
                "group confirmed before with another id"
            ),
            // A member left (dissolving it), or it was undone: a real app drops its record.
            Ok(ConfirmOutcome::Unknown) => {
                println!("group {id} is gone (a member left, or it was undone): no conversation")
            }
            Ok(other) => tracing::warn!(group = %id, outcome = ?other, "unexpected confirmation"),
            Err(e) => tracing::warn!(group = %id, error = %e, "confirmation failed"),
        }
    }
}

/// The largest answer read: the API's answers are small JSON (a group of 8 members of 128
/// bytes each is about 2 KiB).
const ANSWER_LIMIT: usize = 64 * 1024;

/// The middleware around the API: passes the request on, shows the answer to the
/// [`Recorder`], and sends it on unchanged.
async fn watch_answers(State(recorder): State<Recorder>, req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let (parts, body) = res.into_parts();
    let bytes = match axum::body::to_bytes(body, ANSWER_LIMIT).await {
        Ok(b) => b,
        // The service answers in one small chunk that cannot fail: not expected.
        Err(e) => {
            tracing::warn!(error = %e, "could not read the matching answer");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    if let Ok(answer) = serde_json::from_slice::<Value>(&bytes) {
        recorder.saw(&answer);
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// Serves the lobby on `listener` until `shutdown` completes, within the crate's serving
/// limits ([`tower_waiting_room::serve`]: slow clients are hung up on, connections are capped).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    lobby: Lobby,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let Lobby { router, ticker } = lobby;
    tower_waiting_room::serve::serve(listener, router, Default::default(), shutdown).await;
    // The ticks stop with the server.
    drop(ticker);
    Ok(())
}

/// The page, with the topics as options (constant words: nothing from users goes into it).
pub(crate) fn page() -> String {
    let options: String = TOPICS
        .iter()
        .map(|t| {
            assert!(t.bytes().all(|b| b.is_ascii_lowercase()), "a plain word");
            format!("<option value=\"{t}\">{t}</option>")
        })
        .collect();
    PAGE.replace("{{TOPICS}}", &options)
}

/// The lobby page: one file, inline style and script, no external assets. Everything from the
/// API (names, topics, ids) goes into the DOM as `textContent`, never as HTML.
const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Topic lobby</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 36rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
  h1 { font-size: 1.5rem; }
  form { display: grid; gap: .75rem; padding: 1rem; border: 1px solid #ccc; border-radius: .5rem; }
  fieldset { border: none; padding: 0; margin: 0; display: flex; gap: 1rem; align-items: center; }
  legend { float: left; margin-right: 1rem; }
  input[type=text], select { font: inherit; padding: .3rem; }
  .buttons { display: flex; gap: .5rem; }
  button { font: inherit; padding: .4rem 1rem; }
  #status { margin-top: 1.5rem; padding: 1rem; border-radius: .5rem; background: #f4f4f4; }
  #status.waiting { background: #fff7e0; }
  #status.matched { background: #e8f5e9; }
  dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: .5rem 0 0; }
  dt { color: #555; }
  dd { margin: 0; }
  .error { color: #b00020; }
  .hint { color: #555; font-size: .9rem; }
  #note:empty, #error:empty { display: none; }
</style>
</head>
<body>
<main>
  <h1>Topic lobby</h1>
  <p class="hint">Open this page in two browsers (or a normal and a private window), give each a
  name, pick the same topic and size, and press Join in both.</p>
  <form id="form">
    <label>Your name
      <input id="name" type="text" maxlength="32" autocomplete="off" placeholder="ann"></label>
    <label>Topic <select id="topic">{{TOPICS}}</select></label>
    <fieldset>
      <legend>Group of</legend>
      <label><input type="radio" name="size" value="2" checked> 2</label>
      <label><input type="radio" name="size" value="3"> 3</label>
    </fieldset>
    <div class="buttons">
      <button id="join" type="submit">Join</button>
      <button id="leave" type="button" disabled>Leave</button>
    </div>
  </form>
  <section id="status" aria-live="polite">
    <h2 id="headline">Not waiting</h2>
    <p id="note"></p>
    <dl id="details"></dl>
    <p id="error" class="error"></p>
  </section>
</main>
<script>
"use strict";
const API = "/api/matching";
const NAME_KEY = "lobby-user";
const $ = (id) => document.getElementById(id);
let timer = null;

$("name").value = localStorage.getItem(NAME_KEY) || "";

// The name goes in a header: keep it to plain ASCII that any browser sends as is.
function user() {
  const name = $("name").value.trim();
  return /^[A-Za-z0-9_.-]{1,32}$/.test(name) ? name : null;
}

async function call(method, body) {
  const who = user();
  if (!who) {
    stopPolling();
    $("error").textContent = "Enter a name: 1 to 32 letters, digits, '_', '.' or '-'.";
    return null;
  }
  localStorage.setItem(NAME_KEY, who);
  const init = { method, headers: { "X-User": who }, cache: "no-store" };
  if (body) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  try {
    const res = await fetch(API, init);
    return { status: res.status, data: await res.json() };
  } catch (e) {
    $("error").textContent = "The lobby did not answer (" + e.message + "); trying again.";
    poll(true);
    return null;
  }
}

function duration(s) {
  if (s === null || s === undefined) return "unknown";
  return s < 60 ? s + " s" : Math.floor(s / 60) + " min " + (s % 60) + " s";
}

function row(term, value) {
  const dt = document.createElement("dt");
  dt.textContent = term;
  const dd = document.createElement("dd");
  dd.textContent = String(value);
  $("details").append(dt, dd);
}

// Shows a state of the API (docs/matching.md) and says whether to poll again.
function show(s) {
  $("details").replaceChildren();
  $("status").className = s.state;
  let again = false;
  if (s.state === "waiting" && s.unavailable) {
    $("headline").textContent = "The lobby's store is unavailable: trying again";
    again = true;
  } else if (s.state === "waiting") {
    $("headline").textContent = "Waiting for a group of " + s.size + " on \u201c" + s.topic + "\u201d";
    row("Position", s.position + " of " + s.waiting);
    row("Waited", duration(s.waited_seconds));
    row("Expires in", duration(s.expires_in_seconds));
    row("Estimate", s.estimate_seconds === null
      ? "when enough people join"
      : "at most " + duration(s.estimate_seconds) + " (then a smaller group)");
    again = true;
  } else if (s.state === "matched") {
    $("headline").textContent = s.confirmed
      ? "Matched: your conversation is ready"
      : "Matched: waiting for the app to confirm the group";
    row("Group", s.group);
    row("Topic", s.topic);
    row("Members", s.members.join(", "));
    row("Size", s.size < s.queue_size
      ? s.size + " (asked for " + s.queue_size + ": the fallback)"
      : s.size);
    row("Confirmed", s.confirmed ? "yes, as " + s.app_group_id : "not yet");
    row(s.confirmed ? "Kept for" : "Undone unless confirmed in", duration(s.expires_in_seconds));
    again = !s.confirmed;
  } else {
    $("headline").textContent = "Not waiting";
  }
  $("join").disabled = s.state !== "idle";
  $("leave").disabled = s.state === "idle";
  poll(again);
}

function handle(r) {
  if (!r) return;
  const d = r.data;
  $("error").textContent = "";
  $("note").textContent = "";
  if (r.status === 409) {
    $("note").textContent = "You already have a place (leave it to join another):";
    show(d.current);
  } else if (d.error) {
    $("error").textContent = "Refused: " + d.error + (d.field ? " (" + d.field + ": " + d.reason + ")" : "");
  } else {
    show(d);
  }
}

function stopPolling() {
  clearTimeout(timer);
  timer = null;
}

function poll(again) {
  stopPolling();
  if (again) timer = setTimeout(async () => handle(await call("GET")), 1000);
}

$("form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const size = Number(document.querySelector("input[name=size]:checked").value);
  handle(await call("POST", { topic: $("topic").value, size }));
});
$("leave").addEventListener("click", async () => handle(await call("DELETE")));
// Another name is another user: show where they stand.
$("name").addEventListener("change", async () => handle(await call("GET")));
if (user()) call("GET").then(handle);
</script>
</body>
</html>
"#;

async fn shutdown_signal() {
    let _ = tokio::signal::ctrl_c().await;
    println!("shutting down");
}

#[tokio::main]
async fn main() -> ExitCode {
    shared::init_logging();
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
    let lobby = match build(&opts) {
        Ok(lobby) => lobby,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, opts.port));
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = listener.local_addr().unwrap_or(addr);
    println!(
        "lobby: {}; topics {}; sizes 2 and 3",
        match &opts.redis {
            Some(url) => format!("Redis store at {}", shared::without_password(url)),
            None => "embedded store (this process only)".to_owned(),
        },
        TOPICS.join(", ")
    );
    println!(
        "timings: groups of 3 fall back to 2 after {} s, waiters time out after {} s, \
         unconfirmed groups are undone after {} s",
        opts.fallback_after, opts.timeout, opts.confirm_ttl
    );
    if opts.confirm {
        println!(
            "the app confirms each group about {} s after it sees it",
            CONFIRM_AFTER.as_secs()
        );
    } else {
        println!(
            "--no-confirm: the app never confirms; every group is undone after {} s and its \
             members go back to the front of their queue",
            opts.confirm_ttl
        );
    }
    let api = format!("http://{local}{API}");
    let json = "-H 'Content-Type: application/json'";
    println!("try it with curl (X-User stands in for the app's login):");
    println!("  curl -i -H 'X-User: ann' {json} -d '{{\"topic\":\"rust\",\"size\":2}}' {api}");
    println!("  curl -i -H 'X-User: bob' {json} -d '{{\"topic\":\"rust\",\"size\":2}}' {api}");
    println!("  curl -i -H 'X-User: ann' {api}");
    println!("  curl -i -X DELETE -H 'X-User: ann' {api}");
    println!("open http://{local}/ in two browsers (or a normal and a private window)");

    if let Err(e) = serve(listener, lobby, shutdown_signal()).await {
        eprintln!("error: server failed: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<Options>, String> {
        parse_args(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn defaults_and_flags() {
        let o = parse(&[]).unwrap().unwrap();
        assert_eq!(
            (
                o.port,
                o.fallback_after,
                o.timeout,
                o.confirm_ttl,
                o.confirm
            ),
            (3100, 20, 300, 10, true)
        );
        let o = parse(&[
            "--port=0",
            "--fallback-after",
            "5",
            "--timeout=60",
            "--confirm-ttl",
            "2",
            "--no-confirm",
            "--redis",
            "redis://127.0.0.1:6379",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                o.port,
                o.fallback_after,
                o.timeout,
                o.confirm_ttl,
                o.confirm
            ),
            (0, 5, 60, 2, false)
        );
        assert_eq!(o.redis.as_deref(), Some("redis://127.0.0.1:6379"));
        assert!(parse(&["--help"]).unwrap().is_none());
    }

    #[test]
    fn bad_flags_are_errors_not_panics() {
        for bad in [
            &["--port"][..],
            &["--port", "x"],
            &["--timeout", "0"],
            &["--confirm-ttl", "-1"],
            &["--no-confirm=yes"],
            &["--what"],
            &["extra"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_topic_makes_a_valid_conversation_id() {
        for topic in TOPICS {
            let queue = tower_waiting_room_matching::Queue::new(
                Topic::new(*topic).unwrap(),
                tower_waiting_room_matching::GroupSize::TRIO,
            );
            let id = GroupId::new(queue, u64::MAX);
            assert!(AppGroupId::new(format!("conv-{id}")).is_ok(), "{id}");
        }
    }
}
