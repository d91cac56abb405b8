//! Who a request comes from: its valid signed values (admission token, queue cookie) from
//! cookies or headers, and, with network binding on, its network.

use http::{HeaderName, Request};

use super::shared::Core;
use crate::cookies::{self, Candidates, Wanted};
use crate::session::SessionId;
use crate::token::{AdmissionToken, QueueCookie};

/// Who a request comes from, by its valid signed values.
pub(super) enum Visitor {
    /// A valid admission token: past the line.
    Admitted(AdmissionToken),
    /// No valid token, a valid queue cookie: has (or is about to take) a place in line.
    Queued(QueueCookie),
}

impl Visitor {
    pub(super) fn session(&self) -> SessionId {
        match self {
            Visitor::Admitted(token) => token.session(),
            Visitor::Queued(cookie) => cookie.session(),
        }
    }
}

/// The room's cookies in a request, read from its `Cookie` headers once: every value of the
/// queue cookie's and the admission cookie's names that could be one, not yet verified.
pub(super) struct Carried<'r> {
    queue: Candidates<'r>,
    pub(super) admission: Candidates<'r>,
}

impl<'r> Carried<'r> {
    /// The room's cookies in `req`: the one pass over its `Cookie` headers, whose result
    /// everything else about the request reads.
    pub(super) fn read<B>(core: &Core, req: &'r Request<B>) -> Self {
        let c = &core.config.cookies;
        let [queue, admission] = cookies::read(
            req.headers(),
            [
                Wanted {
                    name: &c.queue_name,
                    could_be: QueueCookie::could_be,
                },
                Wanted {
                    name: &c.admission_name,
                    could_be: AdmissionToken::could_be,
                },
            ],
        );
        Carried { queue, admission }
    }

    /// Whether the client carries the room's values in headers rather than cookies: it sent
    /// neither room cookie (with any value). Values the room issues are then also sent back in
    /// response headers. A browser, once it has the queue cookie, always sends it, so its
    /// (`HttpOnly`) tokens are never exposed in a header that the page's scripts could read.
    pub(super) fn uses_headers(&self) -> bool {
        !self.queue.is_present() && !self.admission.is_present()
    }

    /// Who the request comes from: an admitted visitor (a valid admission token), or else one
    /// with a valid queue cookie.
    pub(super) fn visitor<B>(&self, core: &Core, req: &Request<B>, now: u64) -> Option<Visitor> {
        match self.admission_token(core, req, now) {
            Some(token) => Some(Visitor::Admitted(token)),
            None => self.queue_cookie(core, req, now).map(Visitor::Queued),
        }
    }

    /// A valid admission token from the cookie (the first valid one of any number sent), or
    /// else from the token header. With network binding on, a token bound to another network
    /// (or not bound at all) is no token.
    fn admission_token<B>(
        &self,
        core: &Core,
        req: &Request<B>,
        now: u64,
    ) -> Option<AdmissionToken> {
        let expected = core.network_binding(req);
        let verify = |v: &str| {
            AdmissionToken::verify(&core.keys, core.config.room(), v, now)
                .filter(|t| expected.is_none() || t.network() == expected)
        };
        self.admission
            .find_valid(verify)
            .or_else(|| header_value(req, &core.config.token_header).and_then(|v| verify(v.trim())))
    }

    /// A valid queue value from the cookie (the first valid one of any number sent), or else
    /// from the queue header.
    pub(super) fn queue_cookie<B>(
        &self,
        core: &Core,
        req: &Request<B>,
        now: u64,
    ) -> Option<QueueCookie> {
        let verify = |v: &str| QueueCookie::verify(&core.keys, core.config.room(), v, now);
        self.queue
            .find_valid(verify)
            .or_else(|| header_value(req, &core.config.queue_header).and_then(|v| verify(v.trim())))
    }
}

/// The queue cookie of `req`, read again (on the rare paths of a failed store call: the
/// request's first read was not kept).
pub(super) fn queue_cookie_again<B>(
    core: &Core,
    req: &Request<B>,
    now: u64,
) -> Option<QueueCookie> {
    Carried::read(core, req).queue_cookie(core, req, now)
}

/// A header value of the request, as text.
pub(super) fn header_value<'r, B>(req: &'r Request<B>, name: &HeaderName) -> Option<&'r str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}
