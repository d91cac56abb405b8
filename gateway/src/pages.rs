//! The gateway's own answers: a short page for each error it gives instead of the app's
//! (the app down or slow, a request refused), in HTML for browsers and JSON for clients that ask
//! for it, never cached.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::Full;

/// Why the gateway answers itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The app could not be reached, or answered something that is not HTTP.
    BadGateway,
    /// The app did not answer within the upstream timeout.
    GatewayTimeout,
    /// The request is malformed or ambiguous (both `Content-Length` and `Transfer-Encoding`, a
    /// bad `Host`).
    BadRequest(&'static str),
    /// The body is larger than the limit.
    TooLarge,
    /// The body stopped arriving.
    BodyTimeout,
    /// The body ended before it was complete (the client closed or broke off its request).
    IncompleteBody,
    /// A method a gateway does not pass on (`CONNECT`).
    MethodNotAllowed,
}

impl Problem {
    /// Its status.
    pub fn status(self) -> StatusCode {
        match self {
            Problem::BadGateway => StatusCode::BAD_GATEWAY,
            Problem::GatewayTimeout => StatusCode::GATEWAY_TIMEOUT,
            Problem::BadRequest(_) => StatusCode::BAD_REQUEST,
            Problem::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Problem::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Problem::IncompleteBody => StatusCode::BAD_REQUEST,
            Problem::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        }
    }

    /// A short code for JSON clients and logs.
    pub fn code(self) -> &'static str {
        match self {
            Problem::BadGateway => "bad_gateway",
            Problem::GatewayTimeout => "gateway_timeout",
            Problem::BadRequest(_) => "bad_request",
            Problem::TooLarge => "payload_too_large",
            Problem::BodyTimeout => "request_timeout",
            Problem::IncompleteBody => "incomplete_body",
            Problem::MethodNotAllowed => "method_not_allowed",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Problem::BadGateway => {
                "The site cannot be reached right now. Please try again in a moment."
            }
            Problem::GatewayTimeout => {
                "The site is taking too long to answer. Please try again in a moment."
            }
            Problem::BadRequest(why) => why,
            Problem::TooLarge => "The request is larger than this site accepts.",
            Problem::BodyTimeout => "The request took too long to arrive.",
            Problem::IncompleteBody => "The request ended before its body was complete.",
            Problem::MethodNotAllowed => "This method is not accepted here.",
        }
    }

    /// Whether the client caused it (its request refused, or its body failed on the way):
    /// nothing it says of the app.
    pub fn is_clients(self) -> bool {
        !matches!(self, Problem::BadGateway | Problem::GatewayTimeout)
    }

    /// The answer, HTML or (when the request's `Accept` prefers it) JSON.
    pub fn response(self, request: &HeaderMap) -> Response<Full<Bytes>> {
        self.response_to(request.get(header::ACCEPT))
    }

    /// The answer to a request whose `Accept` header was `accept` (what the proxy keeps of a
    /// request it passed on, in case the app fails it).
    pub fn response_to(self, accept: Option<&HeaderValue>) -> Response<Full<Bytes>> {
        let status = self.status();
        let json = wants_json(accept);
        let body = if json {
            serde_json::json!({ "error": self.code(), "message": self.text() }).to_string()
        } else {
            let title = format!(
                "{} {}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("Error")
            );
            format!(
                "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
                 <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
                 <title>{title}</title><style>body{{font-family:system-ui,sans-serif;\
                 max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}}</style></head>\
                 <body><h1>{title}</h1><p>{}</p></body></html>\n",
                self.text()
            )
        };
        let mut res = Response::new(Full::new(Bytes::from(body)));
        *res.status_mut() = status;
        let h = res.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(if json {
                "application/json"
            } else {
                "text/html; charset=utf-8"
            }),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if matches!(self, Problem::BadGateway | Problem::GatewayTimeout) {
            h.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        if matches!(
            self,
            Problem::BadRequest(_)
                | Problem::TooLarge
                | Problem::BodyTimeout
                | Problem::IncompleteBody
        ) {
            // The connection may hold the rest of a request the gateway did not read.
            h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        res
    }
}

/// A client that asks for JSON before HTML (`Accept: application/json`).
fn wants_json(accept: Option<&HeaderValue>) -> bool {
    let Some(accept) = accept.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let json = accept.find("application/json");
    let html = accept.find("text/html");
    match (json, html) {
        (Some(j), Some(h)) => j < h,
        (Some(_), None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browsers_get_html_and_api_clients_json() {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html,*/*"));
        let res = Problem::GatewayTimeout.response(&h);
        assert_eq!(res.status(), 504);
        assert_eq!(
            res.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert_eq!(res.headers()[header::RETRY_AFTER], "5");
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let res = Problem::BadGateway.response(&h);
        assert_eq!(res.status(), 502);
        assert_eq!(res.headers()[header::CONTENT_TYPE], "application/json");
    }
}
