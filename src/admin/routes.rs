//! What each admin request gets: routing, the token check, reading and checking bodies, and the
//! answers.

use std::sync::{Arc, OnceLock};

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use serde_json::{json, Map, Value};

use super::bodies::{capped, patch, release_count, Json, Patch};
use super::shared::Inner;
use super::{AdminBody, DASHBOARD};
use crate::body::{collect_limited, json_response, Collect};
use crate::control::{ControlError, RoomControl};
use crate::session::SessionId;
use crate::store::StoreError;

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
            match patch(body) {
                Ok(patch) => patch_room(control, patch).await,
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
        // JSON, but with a key given twice inside a member (bodies.rs) is no syntax error.
        let why = match e.classify() {
            serde_json::error::Category::Data => format!("a bad body: {e}"),
            _ => format!("the body is not JSON: {e}"),
        };
        error(StatusCode::BAD_REQUEST, &why)
    })
}

/// A room's `PATCH`: the settings changed, then the capacity controller switched (so that a
/// capacity and `"auto": {"enabled": true}` together set where it goes on from).
async fn patch_room(control: &RoomControl, patch: Patch) -> Response<AdminBody> {
    // Terms given are put together with those the controller decides by now and checked as a
    // whole (a min above the max), before anything is changed.
    let terms = patch
        .auto
        .and_then(|auto| control.auto_terms().and_then(|now| auto.terms(now)));
    if let Some(Err(e)) = terms.map(|t| t.check()) {
        return error(StatusCode::BAD_REQUEST, &e.to_string());
    }
    if !patch.change.is_empty() {
        if let Err(e) = control.change(patch.change).await {
            return control_error(control, e);
        }
    }
    let switched = match patch.auto {
        Some(auto) => {
            control
                .switch_auto(auto.enabled.unwrap_or(true), terms)
                .await
        }
        None => Ok(true),
    };
    let switched = match switched {
        Ok(switched) => switched,
        Err(e) => return control_error(control, e),
    };
    if !switched {
        return error(
            StatusCode::BAD_REQUEST,
            "this room's capacity does not follow the app (it was built without auto_capacity)",
        );
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
