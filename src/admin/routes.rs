//! What each admin request gets: routing, the token check, reading and checking bodies, and the
//! answers.

use std::sync::{Arc, OnceLock};

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Map, Value};

use super::shared::Inner;
use super::{AdminBody, DASHBOARD};
use crate::body::{collect_limited, json_response, Collect};
use crate::control::{ControlError, RoomControl};
use crate::session::SessionId;
use crate::store::{SettingsChange, StoreError};

/// What a (relative) path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route<'a> {
    Dashboard,
    Rooms,
    Room(&'a str),
    Release(&'a str),
    Session(&'a str, &'a str),
}

impl Route<'_> {
    fn allow(&self) -> &'static str {
        match self {
            Route::Dashboard | Route::Rooms => "GET, HEAD",
            Route::Room(_) => "GET, HEAD, PATCH",
            Route::Release(_) => "POST",
            Route::Session(..) => "DELETE",
        }
    }

    fn allows(&self, method: &Method) -> bool {
        match self {
            Route::Dashboard | Route::Rooms => *method == Method::GET || *method == Method::HEAD,
            Route::Room(_) => matches!(*method, Method::GET | Method::HEAD | Method::PATCH),
            Route::Release(_) => *method == Method::POST,
            Route::Session(..) => *method == Method::DELETE,
        }
    }
}

/// The route of `path`, relative to the mount point: `prefix` removed when the path starts with
/// it (a server handing full paths), taken as it is otherwise (`nest_service` removed it
/// already). Empty segments are ignored, so a trailing slash does not matter.
fn route<'a>(path: &'a str, prefix: Option<&str>) -> Option<Route<'a>> {
    let relative = match prefix {
        Some(p) => match path.strip_prefix(p) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => path,
        },
        None => path,
    };
    let segments: Vec<&str> = relative.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        [] => Some(Route::Dashboard),
        ["rooms"] => Some(Route::Rooms),
        ["rooms", room] => Some(Route::Room(room)),
        ["rooms", room, "release"] => Some(Route::Release(room)),
        ["rooms", room, "sessions", session] => Some(Route::Session(room, session)),
        _ => None,
    }
}

/// The answer to `req`, with the headers every answer has.
pub(super) async fn answer<B>(inner: Arc<Inner>, req: Request<B>) -> Response<AdminBody>
where
    B: Body + Send + 'static,
{
    let head = req.method() == Method::HEAD;
    let mut res = dispatch(&inner, req).await;
    let headers = res.headers_mut();
    // Operator data must not linger in a shared cache, nor be sniffed into something else.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if head {
        // The length of the body a GET gets, and no body: without it a client such as
        // `curl -X HEAD` waits for a body until the connection closes.
        let len = res.body().size_hint().exact().unwrap_or_default();
        res.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        *res.body_mut() = AdminBody::empty();
    }
    res
}

async fn dispatch<B>(inner: &Inner, req: Request<B>) -> Response<AdminBody>
where
    B: Body + Send + 'static,
{
    let (parts, body) = req.into_parts();
    let route = route(parts.uri.path(), inner.prefix.as_deref());
    // The page itself holds no data: anyone may load it; it asks for the token.
    if route != Some(Route::Dashboard) {
        if let Some(res) = unauthorized(inner, &parts.headers) {
            return res;
        }
    }
    let Some(route) = route else {
        return error(StatusCode::NOT_FOUND, "no such admin path");
    };
    if !route.allows(&parts.method) {
        let mut res = error(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!(
                "{} is not allowed here; allowed: {}",
                capped(parts.method.as_str()),
                route.allow()
            ),
        );
        res.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(route.allow()));
        return res;
    }
    let room = match route {
        Route::Dashboard => return dashboard(),
        Route::Rooms => {
            let rooms: Vec<&str> = inner.rooms.iter().map(RoomControl::room).collect();
            return json_response(StatusCode::OK, &json!({ "rooms": rooms }));
        }
        Route::Room(room) | Route::Release(room) | Route::Session(room, _) => room,
    };
    let Some(control) = inner.rooms.iter().find(|c| c.room() == room) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no room {:?} here", capped(room)),
        );
    };
    match (route, &parts.method) {
        (Route::Room(_), &Method::PATCH) => {
            let body = match read_json(inner, &parts.headers, body).await {
                Ok(v) => v,
                Err(res) => return res,
            };
            match settings_change(body) {
                Ok(change) => change_settings(control, change).await,
                Err(why) => error(StatusCode::BAD_REQUEST, &why),
            }
        }
        (Route::Room(_), _) => match control.status().await {
            Ok(status) => json_response(StatusCode::OK, &status),
            Err(e) => control_error(control, e),
        },
        (Route::Release(_), _) => {
            let body = match read_json(inner, &parts.headers, body).await {
                Ok(v) => v,
                Err(res) => return res,
            };
            match release_count(body) {
                Ok(count) => match control.release(count).await {
                    Ok(released) => json_response(StatusCode::OK, &json!({ "released": released })),
                    Err(e) => control_error(control, e),
                },
                Err(why) => error(StatusCode::BAD_REQUEST, &why),
            }
        }
        (Route::Session(_, session), _) => drop_session(control, session).await,
        (Route::Dashboard | Route::Rooms, _) => unreachable!("answered above"),
    }
}

/// `None` if the request may go on; otherwise the `401`.
fn unauthorized(inner: &Inner, headers: &HeaderMap) -> Option<Response<AdminBody>> {
    if !inner.auth.required() {
        return None;
    }
    let sent = credentials(headers);
    if inner.auth.accepts(match sent {
        Credentials::Token(t) => Some(t),
        _ => None,
    }) {
        return None;
    }
    // RFC 6750, 3.1: a request without bearer credentials gets the bare challenge, with no
    // error code; a bearer header without a token is malformed; a wrong token is invalid.
    let (message, challenge) = match sent {
        Credentials::None => (
            "an operator token is needed: Authorization: Bearer <token>",
            "Bearer realm=\"waiting room admin\"",
        ),
        Credentials::Empty => (
            "the bearer token is empty: Authorization: Bearer <token>",
            "Bearer realm=\"waiting room admin\", error=\"invalid_request\"",
        ),
        Credentials::Token(_) => (
            "the operator token is wrong",
            "Bearer realm=\"waiting room admin\", error=\"invalid_token\"",
        ),
    };
    let mut res = error(StatusCode::UNAUTHORIZED, message);
    res.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    Some(res)
}

/// What a request's `Authorization` offers.
#[derive(Debug, PartialEq, Eq)]
enum Credentials<'a> {
    /// No header, or another scheme (`Basic`, ...).
    None,
    /// The `Bearer` scheme without a token.
    Empty,
    /// `Bearer <token>`.
    Token(&'a [u8]),
}

fn credentials(headers: &HeaderMap) -> Credentials<'_> {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
    else {
        return Credentials::None;
    };
    if let Some(token) = bearer_token(value) {
        return Credentials::Token(token);
    }
    let scheme = value.split(|&b| b == b' ').next().unwrap_or_default();
    if scheme.eq_ignore_ascii_case(b"bearer") {
        Credentials::Empty
    } else {
        Credentials::None
    }
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in any case).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let space = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// A body's JSON: an object's members in the order sent, **every one of them** (a key given
/// twice is there twice, where `serde_json::Value` would keep only the last), or another value.
#[derive(Debug, PartialEq)]
enum Json {
    Object(Vec<(String, Value)>),
    Other(Value),
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct JsonVisitor;

        impl<'de> Visitor<'de> for JsonVisitor {
            type Value = Json;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, Value>()? {
                    members.push(member);
                }
                Ok(Json::Object(members))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Value>()? {
                    items.push(item);
                }
                Ok(Json::Other(Value::Array(items)))
            }

            fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
                Ok(Json::Other(Value::Bool(b)))
            }

            fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
                Ok(Json::Other(Value::from(n)))
            }

            fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
                Ok(Json::Other(Value::from(n)))
            }

            fn visit_f64<E>(self, n: f64) -> Result<Json, E> {
                Ok(Json::Other(Value::from(n)))
            }

            fn visit_str<E>(self, s: &str) -> Result<Json, E> {
                Ok(Json::Other(Value::from(s)))
            }

            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Other(Value::Null))
            }
        }

        deserializer.deserialize_any(JsonVisitor)
    }
}

#[cfg(test)]
impl From<Value> for Json {
    fn from(value: Value) -> Self {
        match value {
            Value::Object(fields) => Json::Object(fields.into_iter().collect()),
            other => Json::Other(other),
        }
    }
}

/// The members of an object body, or the message for a body that is not one, or that gives a
/// key twice (JSON leaves duplicates to the reader; read as the last, they would hide a
/// mistake: `{"capacity": 0, "capacity": 7}` is refused, not taken as 7).
fn members(body: Json, shape: &str) -> Result<Vec<(String, Value)>, String> {
    let Json::Object(members) = body else {
        return Err(shape.to_owned());
    };
    for (i, (name, _)) in members.iter().enumerate() {
        if members[..i].iter().any(|(seen, _)| seen == name) {
            return Err(format!(
                "`{}` given twice: give each field once",
                capped(name)
            ));
        }
    }
    Ok(members)
}

/// Reads a `PATCH` or `POST` body as JSON: `415` unless it is sent as JSON, `413` over the
/// limit, `400` unreadable or not JSON.
async fn read_json<B>(
    inner: &Inner,
    headers: &HeaderMap,
    body: B,
) -> Result<Json, Response<AdminBody>>
where
    B: Body + Send + 'static,
{
    // Only JSON: a cross-site HTML form cannot send it, so a browser session of an operator
    // (behind the app's own cookie auth) cannot be made to change the room by another site.
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the body as Content-Type: application/json",
        ));
    }
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the body is larger than {} bytes", inner.body_limit),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > inner.body_limit as u64) {
        return Err(too_large());
    }
    let bytes = match collect_limited(body, inner.body_limit).await {
        Ok(b) => b,
        Err(Collect::TooLarge) => return Err(too_large()),
        Err(Collect::Failed) => {
            return Err(error(StatusCode::BAD_REQUEST, "the body could not be read"))
        }
    };
    if bytes.is_empty() {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "the body is empty: send a JSON object",
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            &format!("the body is not JSON: {e}"),
        )
    })
}

const FIELDS: &str = "capacity, rate, paused, open and end_slots";

/// The change a `PATCH` body asks for, or a message saying what is wrong with it (and then
/// nothing is changed).
fn settings_change(body: Json) -> Result<SettingsChange, String> {
    let fields = members(
        body,
        "the body must be a JSON object, such as {\"capacity\": 100}",
    )?;
    if fields.is_empty() {
        return Err(format!("nothing to change: give any of {FIELDS}"));
    }
    let mut change = SettingsChange::new();
    let mut end_slots = false;
    for (name, value) in &fields {
        change =
            match name.as_str() {
                "capacity" => change.capacity(match value.as_u64() {
                    Some(0) => return Err("capacity must be at least 1".to_owned()),
                    Some(n) if n <= u64::from(u32::MAX) => n as u32,
                    _ => {
                        return Err(format!(
                            "capacity must be a whole number from 1 to {}{}, not {}",
                            u32::MAX,
                            written(value, |n| (1..=u64::from(u32::MAX)).contains(&n)),
                            shown(value)
                        ))
                    }
                }),
                "rate" => change.admission_rate(match value {
                    Value::Null => None,
                    v => match v.as_u64() {
                        Some(0) => return Err(
                            "rate must be at least 1 admission per second; null removes the limit"
                                .to_owned(),
                        ),
                        Some(n) if n <= u64::from(u32::MAX) => Some(n as u32),
                        _ => {
                            return Err(format!(
                                "rate must be a whole number of admissions per second{}, or \
                                 null for no limit, not {}",
                                written(value, |n| (1..=u64::from(u32::MAX)).contains(&n)),
                                shown(value)
                            ))
                        }
                    },
                }),
                "paused" => change.paused(boolean(name, value)?),
                "open" => change.open(boolean(name, value)?),
                // Only ever `true`: `false` would be a change that changes nothing.
                "end_slots" => {
                    if *value != Value::Bool(true) {
                        return Err(format!(
                            "end_slots can only be true, with \"open\": false (it ends every \
                             slot on closing); leave it out otherwise, not {}",
                            capped(&value.to_string())
                        ));
                    }
                    end_slots = true;
                    change
                }
                other => {
                    return Err(format!(
                        "unknown field {:?}: the fields are {FIELDS}",
                        capped(other)
                    ))
                }
            };
    }
    if end_slots {
        if change.get_open() != Some(false) {
            return Err(
                "end_slots goes with \"open\": false (it ends every slot on closing)".into(),
            );
        }
        change = change.end_slots();
    }
    Ok(change)
}

/// For a whole number sent as a decimal (`1000.0`, `1e3`, `-0`: JSON reads them as floats,
/// which are refused), the words that say how to write it, with the number to send when it
/// `fits`; nothing for any other value.
fn written(value: &Value, fits: impl Fn(u64) -> bool) -> String {
    const WRITTEN: &str = ", written without a decimal point or exponent";
    match value.as_f64() {
        Some(f) if value.is_f64() && f.fract() == 0.0 => {
            // Below 2^64 (`u64::MAX as f64` is 2^64), the cast is exact.
            if (0.0..u64::MAX as f64).contains(&f) && fits(f as u64) {
                format!("{WRITTEN} (as {})", f as u64)
            } else {
                WRITTEN.to_owned()
            }
        }
        _ => String::new(),
    }
}

/// A value sent, as JSON writes it, capped.
fn shown(value: &Value) -> String {
    capped(&value.to_string()).into_owned()
}

fn boolean(name: &str, value: &Value) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("{name} must be true or false, not {}", shown(value)))
}

/// The `count` of a release body.
fn release_count(body: Json) -> Result<u64, String> {
    const SHAPE: &str = "the body must be {\"count\": n}, n at least 1";
    let mut count = None;
    for (name, value) in members(body, SHAPE)? {
        if name != "count" {
            return Err(format!("unknown field {:?}: {SHAPE}", capped(&name)));
        }
        count = Some(value);
    }
    match count.as_ref().map(|v| (v, v.as_u64())) {
        None => Err(format!("count is missing: {SHAPE}")),
        Some((_, Some(0))) => Err("count must be at least 1".to_owned()),
        Some((_, Some(n))) => Ok(n),
        Some((v, None)) => Err(format!(
            "count must be a whole number of at least 1{}, not {}",
            written(v, |n| n >= 1),
            shown(v)
        )),
    }
}

async fn change_settings(control: &RoomControl, change: SettingsChange) -> Response<AdminBody> {
    if let Err(e) = control.change(change).await {
        return control_error(control, e);
    }
    match control.status().await {
        Ok(status) => json_response(StatusCode::OK, &status),
        Err(e) => control_error(control, e),
    }
}

async fn drop_session(control: &RoomControl, session: &str) -> Response<AdminBody> {
    let Some(id) = SessionId::from_hex(&session.to_ascii_lowercase()) else {
        return error(
            StatusCode::BAD_REQUEST,
            &format!(
                "the session must be 32 hex digits, as the room shows it, not {:?}",
                capped(session)
            ),
        );
    };
    match control.drop_session(id).await {
        Ok(true) => json_response(
            StatusCode::OK,
            &json!({ "dropped": true, "session": id.to_string() }),
        ),
        Ok(false) => error(
            StatusCode::NOT_FOUND,
            &format!(
                "session {id} has no place or slot in room {:?}; it is refused from now on all \
                 the same",
                control.room()
            ),
        ),
        Err(e) => control_error(control, e),
    }
}

fn control_error(control: &RoomControl, e: ControlError) -> Response<AdminBody> {
    match e {
        ControlError::Invalid(why) => error(StatusCode::BAD_REQUEST, why),
        // The store answers, but with the room's settings of a version this gateway cannot read:
        // no outage, a rolling upgrade to finish. Said as such, with the versions (the script's
        // words: no host).
        ControlError::Store(e) if e.is_version_mix() => {
            tracing::warn!(room = control.room(), error = %e, "admin request: a version mix");
            error(
                StatusCode::CONFLICT,
                &format!(
                    "the room's settings were written by a version of tower-waiting-room this \
                     gateway cannot read ({}): it answers visitors \"busy\" (nobody let in, \
                     nobody's place lost) and makes no change until it runs that version; ask a \
                     gateway of that version, or finish the upgrade (docs/redis.md, \"Settings\")",
                    std::error::Error::source(&e).map_or_else(String::new, |s| s.to_string())
                ),
            )
        }
        ControlError::Store(e) => {
            tracing::warn!(room = control.room(), error = %e, "admin request: the room's store failed");
            // The kind only: the full error may name hosts, which the log has.
            let kind = StoreError::new(e.kind());
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the room's store failed ({kind}); a change may or may not have been made: read the room again"),
            )
        }
    }
}

/// `text` as an answer shows it: at most its first 64 characters, then `…` if there was more
/// (what a caller sent is echoed to say what was wrong, not repeated at any length).
fn capped(text: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 64;
    match text.char_indices().nth(MAX) {
        None => text.into(),
        Some((end, _)) => format!("{}…", &text[..end]).into(),
    }
}

fn error(status: StatusCode, message: &str) -> Response<AdminBody> {
    let mut body = Map::new();
    body.insert("error".to_owned(), Value::from(message));
    json_response(status, &body)
}

/// The dashboard, with a policy that lets it run its own inline script and style, talk only to
/// its own origin, and never be framed (its buttons must not be clickjacked).
fn dashboard() -> Response<AdminBody> {
    static CSP: OnceLock<HeaderValue> = OnceLock::new();
    let csp = CSP.get_or_init(|| {
        let script = inline(DASHBOARD, "<script>", "</script>");
        let style = inline(DASHBOARD, "<style>", "</style>");
        let policy = format!(
            "default-src 'none'; script-src '{}'; style-src '{}'; connect-src 'self'; \
             img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            sha256_source(script),
            sha256_source(style),
        );
        HeaderValue::from_str(&policy).expect("a CSP is a header value")
    });
    let mut res = Response::new(AdminBody::from(DASHBOARD));
    let headers = res.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CONTENT_SECURITY_POLICY, csp.clone());
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    res
}

/// The text between the first `open` and the `close` after it.
fn inline<'a>(page: &'a str, open: &str, close: &str) -> &'a str {
    let start = page.find(open).expect("the dashboard has the element") + open.len();
    let len = page[start..].find(close).expect("the element is closed");
    &page[start..start + len]
}

fn sha256_source(text: &str) -> String {
    use base64::Engine as _;
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_relative_and_with_a_prefix() {
        assert_eq!(route("/", None), Some(Route::Dashboard));
        assert_eq!(route("", None), Some(Route::Dashboard));
        assert_eq!(route("/rooms/", None), Some(Route::Rooms));
        assert_eq!(route("/rooms/a", None), Some(Route::Room("a")));
        assert_eq!(route("/rooms/a/release", None), Some(Route::Release("a")));
        assert_eq!(
            route("/rooms/a/sessions/ff", None),
            Some(Route::Session("a", "ff"))
        );
        assert_eq!(route("/rooms/a/other", None), None);
        assert_eq!(route("/admin/rooms", None), None);
        let p = Some("/admin");
        assert_eq!(route("/admin", p), Some(Route::Dashboard));
        assert_eq!(route("/admin/", p), Some(Route::Dashboard));
        assert_eq!(route("/admin/rooms/a", p), Some(Route::Room("a")));
        // Already relative (nest_service took the prefix off): as it is.
        assert_eq!(route("/rooms/a", p), Some(Route::Room("a")));
        // Not a segment boundary: not the prefix.
        assert_eq!(route("/administer/rooms", p), None);
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Bearer"), None);
    }

    #[test]
    fn credentials_by_scheme() {
        let of = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            credentials(&headers).kind()
        };
        assert_eq!(credentials(&HeaderMap::new()), Credentials::None);
        assert_eq!(of("Basic abc"), "none");
        assert_eq!(of("Bearerish abc"), "none");
        assert_eq!(of(""), "none");
        assert_eq!(of("Bearer"), "empty");
        assert_eq!(of("bearer   "), "empty");
        assert_eq!(of("Bearer abc"), "token abc");
    }

    impl Credentials<'_> {
        fn kind(&self) -> String {
            match self {
                Credentials::None => "none".to_owned(),
                Credentials::Empty => "empty".to_owned(),
                Credentials::Token(t) => format!("token {}", String::from_utf8_lossy(t)),
            }
        }
    }

    #[test]
    fn patch_bodies() {
        let ok =
            settings_change(json!({"capacity": 5, "rate": null, "paused": true}).into()).unwrap();
        assert_eq!(ok.get_capacity(), Some(5));
        assert_eq!(ok.get_admission_rate(), Some(None));
        assert_eq!(ok.get_paused(), Some(true));
        let close = settings_change(json!({"open": false, "end_slots": true}).into()).unwrap();
        assert!(close.ends_slots());
        for bad in [
            json!({}),
            json!([]),
            json!({"capacity": 0}),
            json!({"capacity": -1}),
            json!({"capacity": 1.5}),
            json!({"capacity": "5"}),
            json!({"capacity": 4_294_967_296u64}),
            json!({"rate": 0}),
            json!({"rate": "fast"}),
            json!({"paused": 1}),
            json!({"capcity": 5}),
            json!({"end_slots": true}),
            json!({"open": true, "end_slots": true}),
        ] {
            assert!(
                settings_change(bad.clone().into()).is_err(),
                "{bad} was accepted"
            );
        }
    }

    #[test]
    fn release_bodies() {
        assert_eq!(release_count(json!({"count": 3}).into()), Ok(3));
        for bad in [
            json!({}),
            json!({"count": 0}),
            json!({"count": -2}),
            json!({"count": "3"}),
            json!({"count": 3, "all": true}),
            json!(3),
        ] {
            assert!(
                release_count(bad.clone().into()).is_err(),
                "{bad} was accepted"
            );
        }
    }

    /// A body as the service reads it, duplicate keys and all.
    fn parse(body: &str) -> Json {
        serde_json::from_str(body).unwrap()
    }

    #[test]
    fn bodies_keep_every_member() {
        assert_eq!(
            parse(r#"{"a": 1, "a": [2], "b": null}"#),
            Json::Object(vec![
                ("a".to_owned(), json!(1)),
                ("a".to_owned(), json!([2])),
                ("b".to_owned(), Value::Null)
            ])
        );
        for other in ["[1, {\"a\": 2}]", "true", "-3", "7", "2.5", "\"x\"", "null"] {
            let value: Value = serde_json::from_str(other).unwrap();
            assert_eq!(parse(other), Json::Other(value), "{other}");
        }
        assert!(serde_json::from_str::<Json>("{\"a\": 1} x").is_err());
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        for (body, name) in [
            (r#"{"capacity": 0, "capacity": 7}"#, "capacity"),
            (r#"{"paused": true, "paused": false}"#, "paused"),
            (r#"{"capacity": 5, "rate": 1, "rate": null}"#, "rate"),
            (
                r#"{"open": false, "end_slots": true, "end_slots": true}"#,
                "end_slots",
            ),
            (r#"{"nope": 1, "nope": 2}"#, "nope"),
        ] {
            let why = settings_change(parse(body)).unwrap_err();
            assert!(
                why.contains(&format!("`{name}` given twice")),
                "{body}: {why}"
            );
        }
        let why = release_count(parse(r#"{"count": 1, "count": 2}"#)).unwrap_err();
        assert!(why.contains("`count` given twice"), "{why}");
        assert_eq!(release_count(parse(r#"{"count": 2}"#)), Ok(2));
    }

    #[test]
    fn end_slots_is_true_with_closing_or_absent() {
        for bad in [
            json!({"end_slots": false}),
            json!({"open": true, "end_slots": false}),
            json!({"open": false, "end_slots": false}),
            json!({"capacity": 5, "end_slots": false}),
            json!({"open": false, "end_slots": null}),
            json!({"open": false, "end_slots": 1}),
            json!({"paused": true, "end_slots": true}),
        ] {
            let why = settings_change(bad.clone().into()).unwrap_err();
            assert!(why.contains("end_slots"), "{bad}: {why}");
        }
        assert!(!settings_change(json!({"open": false}).into())
            .unwrap()
            .ends_slots());
    }

    #[test]
    fn whole_numbers_written_as_decimals_are_refused_saying_so() {
        let why = |body: &str| settings_change(parse(body)).unwrap_err();
        let written = "written without a decimal point or exponent";
        for body in [
            r#"{"capacity": 1e3}"#,
            r#"{"capacity": 1000.0}"#,
            r#"{"capacity": 10E2}"#,
        ] {
            assert_eq!(
                why(body),
                format!(
                    "capacity must be a whole number from 1 to 4294967295, {written} (as 1000), \
                     not 1000.0"
                ),
                "{body}"
            );
        }
        // Out of range, or no admissible whole number at all: no suggestion.
        assert_eq!(
            why(r#"{"capacity": -0}"#),
            format!("capacity must be a whole number from 1 to 4294967295, {written}, not -0.0")
        );
        assert!(why(r#"{"capacity": 1e10}"#).ends_with(&format!("{written}, not 10000000000.0")));
        assert!(why(r#"{"capacity": -2.0}"#).ends_with(&format!("{written}, not -2.0")));
        assert_eq!(
            why(r#"{"rate": 2e1}"#),
            format!(
                "rate must be a whole number of admissions per second, {written} (as 20), or \
                 null for no limit, not 20.0"
            )
        );
        assert!(why(r#"{"rate": -0.0}"#).contains(&format!("{written}, or null")));
        // 2^64: no u64, so no suggestion (a saturating cast would suggest u64::MAX).
        assert_eq!(
            release_count(parse(r#"{"count": 18446744073709551616.0}"#)),
            Err(format!(
                "count must be a whole number of at least 1, {written}, not 1.8446744073709552e+19"
            ))
        );
        assert_eq!(
            release_count(parse(r#"{"count": 3.0}"#)),
            Err(format!(
                "count must be a whole number of at least 1, {written} (as 3), not 3.0"
            ))
        );
        // Not whole, or not numbers: as before, without the clause.
        assert_eq!(
            why(r#"{"capacity": 2.5}"#),
            "capacity must be a whole number from 1 to 4294967295, not 2.5"
        );
        assert_eq!(
            release_count(parse(r#"{"count": "3"}"#)),
            Err("count must be a whole number of at least 1, not \"3\"".to_owned())
        );
        // Whole numbers as whole numbers are fine.
        assert_eq!(
            settings_change(parse(r#"{"capacity": 1000}"#))
                .unwrap()
                .get_capacity(),
            Some(1000)
        );
    }

    #[test]
    fn echoes_are_capped() {
        assert_eq!(capped("short"), "short");
        let exact = "é".repeat(64);
        assert_eq!(capped(&exact), exact);
        let long = "é".repeat(5000);
        assert_eq!(capped(&long), format!("{}…", "é".repeat(64)));
    }

    #[test]
    fn the_dashboard_is_self_contained() {
        for external in ["http://", "https://", "src=\"//", "href=\"//", "@import"] {
            assert!(!DASHBOARD.contains(external), "{external} in the dashboard");
        }
        let res = dashboard();
        let csp = res.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(csp.contains("script-src 'sha256-"), "{csp}");
    }
}
