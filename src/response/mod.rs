//! The room's own answers: waiting page, JSON for API clients, and the status body.
//!
//! Rejections are responses, not errors: the layer's `Error` is the inner service's. What a
//! rejected request sees is rendered by a [`Render`] implementation: the [`DefaultRenderer`]
//! gives browsers (`Accept` includes `text/html`) an HTML page and everyone else JSON (the
//! status body of `docs/api.md`) with `Retry-After`.
//!
//! The pages speak the visitor's language: seventeen are built in ([`BUILT_IN_LANGUAGES`]),
//! chosen per request from `Accept-Language` among those the room offers ([`Languages`]).
//!
//! Three ways to change the pages, from small to large:
//! - reword or translate them: [`DefaultRenderer::with_texts`] with your [`Texts`] for a
//!   language (they replace the built-in ones for it), [`DefaultRenderer::with_languages`] for
//!   which languages the room offers;
//! - your own HTML with named placeholders: [`PageTemplate`] and
//!   [`DefaultRenderer::with_waiting_template`] (and `..._notice_`, `..._left_template`);
//! - your own renderer: any [`Render`] type, or a closure:
//!
//! ```
//! use bytes::Bytes;
//! use http::{Response, StatusCode};
//! use tower_waiting_room::response::RenderContext;
//! use tower_waiting_room::Rejection;
//!
//! let render = |rejection: &Rejection, _cx: &RenderContext<'_>| {
//!     let mut res = Response::new(Bytes::from(format!("please wait: {}", rejection.state())));
//!     *res.status_mut() = rejection.status();
//!     res
//! };
//! # let _ = render;
//! // WaitingRoomLayer::builder("shop").renderer(render) ...
//! ```
//!
//! Whatever the renderer returns, the layer adds `Retry-After`, `Cache-Control: no-store` and
//! `X-Robots-Tag: noindex` when they are missing, and the room's cookies.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use serde::Serialize;

use crate::outcome::Rejection;

mod lang;
mod page;
mod template;
mod texts;

pub use lang::{Languages, BUILT_IN_LANGUAGES};
pub use page::{LEFT_TEMPLATE, NOTICE_TEMPLATE, SCRIPT, STYLE, WAITING_TEMPLATE};
pub use template::PageTemplate;
pub use texts::Texts;

/// What a renderer may want to know about the request it answers.
#[derive(Debug)]
#[non_exhaustive]
pub struct RenderContext<'a> {
    /// The room's id.
    pub room: &'a str,
    /// The request's headers.
    pub headers: &'a HeaderMap,
    /// The path and query the visitor asked for, to go back to once admitted.
    pub return_to: &'a str,
    /// `GET` here tells where the visitor stands (JSON).
    pub status_path: &'a str,
    /// `GET` here, from an `EventSource`, streams the waiter's status as Server-Sent Events
    /// (`None` when the room offers no streams: its store keeps no snapshots, or
    /// [`max_event_streams`](crate::WaitingRoomBuilder::max_event_streams) is 0).
    pub events_path: Option<&'a str>,
    /// `POST` here leaves the line.
    pub leave_path: &'a str,
    /// `POST` a proof-of-work solution here (when proof of work is on).
    pub proof_path: &'a str,
    /// For [`Rejection::Challenge`]: the signed challenge to solve.
    pub challenge: Option<&'a str>,
}

impl RenderContext<'_> {
    /// Whether the client asked for HTML (`Accept` names `text/html`).
    pub fn wants_html(&self) -> bool {
        self.headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains("text/html"))
    }
}

/// Turns a [`Rejection`] into a response.
pub trait Render: Send + Sync + 'static {
    /// The response for `rejection`.
    fn render(&self, rejection: &Rejection, cx: &RenderContext<'_>) -> Response<Bytes>;

    /// The page a browser gets after leaving the line without JavaScript (`POST` to the leave
    /// endpoint); the status is `200`. By default the [`DefaultRenderer`]'s.
    fn render_left(&self, cx: &RenderContext<'_>) -> Response<Bytes> {
        DefaultRenderer::shared().render_left(cx)
    }
}

impl<F> Render for F
where
    F: Fn(&Rejection, &RenderContext<'_>) -> Response<Bytes> + Send + Sync + 'static,
{
    fn render(&self, rejection: &Rejection, cx: &RenderContext<'_>) -> Response<Bytes> {
        self(rejection, cx)
    }
}

/// HTML for browsers, JSON for everyone else.
///
/// The pages are made from three [`PageTemplate`]s ([`WAITING_TEMPLATE`], [`NOTICE_TEMPLATE`]
/// for full, unavailable, busy, limited and the proof-of-work challenge, [`LEFT_TEMPLATE`]) and
/// the words of a [`Texts`]; replace any of them. Each page is one self-contained document
/// (inline CSS and JS, no external assets; the waiting page about 11 KB), works without
/// JavaScript (a `<noscript>` meta refresh; the proof-of-work challenge alone needs
/// JavaScript), and is accessible: semantic markup, the position in a polite live region, AA
/// contrast.
///
/// ```
/// use tower_waiting_room::response::{DefaultRenderer, Texts};
///
/// let mut texts = Texts::default();
/// texts.waiting_title = "Thanks for waiting".into();
/// let renderer = DefaultRenderer::new().with_texts(texts);
/// # let _ = renderer;
/// ```
#[derive(Clone, Debug)]
pub struct DefaultRenderer {
    languages: Arc<Languages>,
    waiting: Arc<PageTemplate>,
    notice: Arc<PageTemplate>,
    left: Arc<PageTemplate>,
}

impl Default for DefaultRenderer {
    fn default() -> Self {
        Self::shared().clone()
    }
}

impl DefaultRenderer {
    /// The English pages.
    pub fn new() -> Self {
        Self::default()
    }

    fn shared() -> &'static Self {
        static DEFAULT: std::sync::OnceLock<DefaultRenderer> = std::sync::OnceLock::new();
        DEFAULT.get_or_init(|| {
            let parse = |t| Arc::new(PageTemplate::new(t).expect("the default templates parse"));
            DefaultRenderer {
                languages: Arc::new(Languages::all()),
                waiting: parse(WAITING_TEMPLATE),
                notice: parse(NOTICE_TEMPLATE),
                left: parse(LEFT_TEMPLATE),
            }
        })
    }

    /// The pages' words in their language ([`Texts::lang`]): they replace the built-in ones
    /// for it, or add the language to those the room offers.
    pub fn with_texts(mut self, texts: Texts) -> Self {
        self.languages = Arc::new((*self.languages).clone().with_texts(texts));
        self
    }

    /// The languages the pages speak (default: every built-in one, English the default).
    pub fn with_languages(mut self, languages: Languages) -> Self {
        self.languages = Arc::new(languages);
        self
    }

    /// The languages the pages speak.
    pub fn languages(&self) -> &Languages {
        &self.languages
    }

    /// The waiting page (default [`WAITING_TEMPLATE`]).
    pub fn with_waiting_template(mut self, template: PageTemplate) -> Self {
        self.waiting = Arc::new(template);
        self
    }

    /// The full, unavailable, busy, limited, refused and challenge pages (default
    /// [`NOTICE_TEMPLATE`]).
    pub fn with_notice_template(mut self, template: PageTemplate) -> Self {
        self.notice = Arc::new(template);
        self
    }

    /// The page after leaving without JavaScript (default [`LEFT_TEMPLATE`]).
    pub fn with_left_template(mut self, template: PageTemplate) -> Self {
        self.left = Arc::new(template);
        self
    }

    /// The default language's words.
    pub fn texts(&self) -> &Texts {
        self.languages.default_texts()
    }

    /// The words for the request of `cx`: the language its `Accept-Language` prefers among
    /// those offered, else the default.
    pub fn texts_for(&self, cx: &RenderContext<'_>) -> &Texts {
        let accept = cx
            .headers
            .get(header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok());
        self.languages.choose(accept)
    }

    /// The HTML page for `rejection`, in the request's language.
    pub fn html(&self, rejection: &Rejection, cx: &RenderContext<'_>) -> String {
        let template = match rejection {
            Rejection::Waiting { .. } => &self.waiting,
            _ => &self.notice,
        };
        page::render(template, self.texts_for(cx), Some(rejection), cx)
    }

    /// A page's response: its language said (`Content-Language`), and, when the room offers
    /// several, that it varies by `Accept-Language` (caches keep one copy per language).
    fn page(&self, status: StatusCode, html: String, texts: &Texts) -> Response<Bytes> {
        let mut res = html_response(status, html);
        if let Ok(lang) = HeaderValue::from_str(&texts.lang) {
            res.headers_mut().insert(header::CONTENT_LANGUAGE, lang);
        }
        if self.languages.tags().len() > 1 {
            res.headers_mut()
                .append(header::VARY, HeaderValue::from_static("Accept-Language"));
        }
        res
    }
}

fn html_response(status: StatusCode, html: String) -> Response<Bytes> {
    let mut res = Response::new(Bytes::from(html));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    res
}

impl Render for DefaultRenderer {
    fn render_left(&self, cx: &RenderContext<'_>) -> Response<Bytes> {
        let texts = self.texts_for(cx);
        self.page(
            StatusCode::OK,
            page::render(&self.left, texts, None, cx),
            texts,
        )
    }

    fn render(&self, rejection: &Rejection, cx: &RenderContext<'_>) -> Response<Bytes> {
        if cx.wants_html() {
            let texts = self.texts_for(cx);
            self.page(rejection.status(), self.html(rejection, cx), texts)
        } else {
            json_response(
                rejection.status(),
                &StatusBody::from_rejection(cx.room, rejection).with_context(cx),
            )
        }
    }
}

/// The JSON body of the status endpoint and of API rejections. The contract (the whole of it,
/// with curl examples, is in `docs/api.md`):
///
/// | field | type | meaning |
/// |---|---|---|
/// | `room` | string | the room's id |
/// | `state` | string | `admitted`, `waiting`, `full`, `unavailable`, `busy`, `limited`, `refused`, `challenge`, `proven`, `unknown`, `left` or `scheduled` |
/// | `position` | number or null | 1-based place in line while waiting |
/// | `ahead` | number or null | how many are ahead while waiting (`position - 1`) |
/// | `waiting` | number or null | how many are in line |
/// | `eta_seconds` | number or null | estimated wait while waiting, on the safe side of the most likely one; null while `estimating`, paused, or when nobody was admitted in the last five minutes |
/// | `eta_low_seconds`, `eta_high_seconds` | number or null | the likely range of the wait, with `eta_seconds` |
/// | `estimating` | `true`, or left out | the room is too young to know its pace |
/// | `paused` | `true`, or left out | waiting in a paused room |
/// | `retry_after` | number or null | seconds until the client should ask again |
/// | `challenge` | string, only in `challenge` answers | the proof-of-work challenge to solve |
/// | `difficulty` | number, only in `challenge` answers | leading zero bits the solution's hash needs |
/// | `proof_path` | string, only in `challenge` answers | where to `POST` the solution |
/// | `ticket` | string, only in `admitted` answers to clients that use headers | the admission token, to send as `X-Admission-Ticket` to gated routes |
/// | `opens_at` | number, only in `scheduled` answers | when the room opens, in Unix seconds (rounded up) |
// The room's own serialization of its answers: the contract is the JSON (`docs/api.md`), not
// this type, so it is hidden from the docs (a renderer of one's own delegates JSON to the
// `DefaultRenderer`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
#[doc(hidden)]
pub struct StatusBody<'a> {
    /// The room's id.
    pub room: &'a str,
    /// The visitor's state.
    pub state: &'static str,
    /// 1-based place in line while waiting.
    pub position: Option<u64>,
    /// How many are ahead while waiting.
    pub ahead: Option<u64>,
    /// How many are in line.
    pub waiting: Option<u64>,
    /// Estimated wait in seconds while waiting and the line moves.
    pub eta_seconds: Option<u64>,
    /// The short end of the likely wait, in seconds, with `eta_seconds`.
    pub eta_low_seconds: Option<u64>,
    /// The long end of the likely wait, in seconds, with `eta_seconds`.
    pub eta_high_seconds: Option<u64>,
    /// `true` while the room is too young to estimate (no `eta_seconds` yet); left out otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimating: bool,
    /// `true` while waiting in a paused room (the line does not move); left out otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Seconds until the client should ask again.
    pub retry_after: Option<u64>,
    /// The proof-of-work challenge, in `challenge` answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub challenge: Option<&'a str>,
    /// Leading zero bits a solution needs, in `challenge` answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difficulty: Option<u8>,
    /// Where to `POST` the solution, in `challenge` answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof_path: Option<&'a str>,
    /// The admission token, in `admitted` status answers to clients that carry the room's
    /// values in headers (never to browsers, whose tokens are `HttpOnly`): sent as
    /// `X-Admission-Ticket`, it admits to the room's gated routes without cookies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ticket: Option<&'a str>,
    /// When the room opens, in Unix seconds (rounded up), in `scheduled` answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opens_at: Option<u64>,
}

impl<'a> StatusBody<'a> {
    /// The body for a rejection.
    pub fn from_rejection(room: &'a str, rejection: &Rejection) -> Self {
        Self {
            room,
            state: rejection.state(),
            position: rejection.position(),
            ahead: rejection.ahead(),
            waiting: rejection.waiting(),
            eta_seconds: rejection.eta().map(|d| d.as_secs()),
            eta_low_seconds: rejection.eta_range().map(|(low, _)| low.as_secs()),
            eta_high_seconds: rejection.eta_range().map(|(_, high)| high.as_secs()),
            estimating: rejection.estimating(),
            paused: rejection.paused(),
            retry_after: Some(rejection.retry_after().as_secs()),
            challenge: None,
            difficulty: rejection.difficulty(),
            proof_path: None,
            ticket: None,
            opens_at: rejection.opens_at().map(|t| {
                let ms = crate::config::unix_ms(t);
                ms.div_ceil(1000)
            }),
        }
    }

    /// Adds what the body needs from the request's context: for a challenge, the challenge and
    /// where to send its solution.
    pub fn with_context(mut self, cx: &RenderContext<'a>) -> Self {
        if let Some(challenge) = cx.challenge {
            self.challenge = Some(challenge);
            self.proof_path = Some(cx.proof_path);
        }
        self
    }

    /// A body for a state without a line position (`admitted`, `proven`, `unknown`, `left`).
    pub fn plain(room: &'a str, state: &'static str) -> Self {
        Self {
            room,
            state,
            position: None,
            ahead: None,
            waiting: None,
            eta_seconds: None,
            eta_low_seconds: None,
            eta_high_seconds: None,
            estimating: false,
            paused: false,
            retry_after: None,
            challenge: None,
            difficulty: None,
            proof_path: None,
            ticket: None,
            opens_at: None,
        }
    }
}

/// The JSON body of a gated route's refusal (`403`): the request needs an admission of the
/// room (or, for a room with [single-use tickets](crate::WaitingRoomBuilder::single_use_tickets),
/// an unused ticket of it), and has none that is valid. Never a place in line: gated routes (API
/// calls such as `POST /checkout`) are not queued. See `docs/api.md`.
///
/// | field | type | meaning |
/// |---|---|---|
/// | `error` | string | `not_admitted`; `ticket_used` for a single-use ticket used before |
/// | `room` | string | the room whose admission the route needs |
/// | `status` | string | the room's status endpoint (`{prefix}/{room}/status`) |
/// | `reason` | string | without single-use tickets: `missing` (no value), `invalid` (not a token of the room: garbage, tampered, unknown key), `expired`, `other_room` (a token of another room behind the same layer), `other_network` (bound to another network), `slot_gone` (the store no longer holds its slot). With them: `ticket_missing` (no ticket; an admission alone is none), `ticket_invalid`, `ticket_expired`, `other_room` (a ticket of another room behind the same layer), `slot_ended` (the visitor no longer holds the slot), `ticket_used` |
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
#[doc(hidden)]
pub struct NotAdmittedBody<'a> {
    /// `not_admitted`, or `ticket_used` for a single-use ticket used before.
    pub error: &'static str,
    /// The room whose admission the route needs.
    pub room: &'a str,
    /// The room's status endpoint.
    pub status: &'a str,
    /// Why the request's admission or ticket (if any) was refused.
    pub reason: &'static str,
}

pub(crate) fn json_response(status: StatusCode, body: &impl Serialize) -> Response<Bytes> {
    let bytes = serde_json::to_vec(body).expect("status bodies serialize");
    let mut res = Response::new(Bytes::from(bytes));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// `1234567` → `1,234,567` (with `sep` = `,`).
pub(crate) fn group_thousands(n: u64, sep: &str) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 * sep.len());
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push_str(sep);
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands() {
        assert_eq!(group_thousands(0, ","), "0");
        assert_eq!(group_thousands(999, ","), "999");
        assert_eq!(group_thousands(1_342, ","), "1,342");
        assert_eq!(group_thousands(1_234_567, ","), "1,234,567");
        assert_eq!(
            group_thousands(1_234_567, "\u{202f}"),
            "1\u{202f}234\u{202f}567"
        );
    }
}
