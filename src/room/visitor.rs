//! Who a request comes from: its valid signed values (admission token, queue cookie) from
//! cookies or headers, and, with network binding on, its network.

use std::sync::atomic::Ordering;

use http::{HeaderName, Request};

use super::Room;
use crate::client::network::Network;
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

impl Carried<'_> {
    /// Whether the client carries the room's values in headers rather than cookies: it sent
    /// neither room cookie (with any value). Values the room issues are then also sent back in
    /// response headers. A browser, once it has the queue cookie, always sends it, so its
    /// (`HttpOnly`) tokens are never exposed in a header that the page's scripts could read.
    pub(super) fn uses_headers(&self) -> bool {
        !self.queue.is_present() && !self.admission.is_present()
    }
}

impl Room {
    /// The room's cookies in `req`: the one pass over its `Cookie` headers, whose result
    /// everything else about the request reads.
    pub(super) fn carried<'r, B>(&self, req: &'r Request<B>) -> Carried<'r> {
        let c = &self.config.cookies;
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

    /// Who the request comes from: an admitted visitor (a valid admission token), or else one
    /// with a valid queue cookie.
    pub(super) fn visitor<B>(
        &self,
        req: &Request<B>,
        carried: &Carried<'_>,
        now: u64,
    ) -> Option<Visitor> {
        match self.admission_token(req, carried, now) {
            Some(token) => Some(Visitor::Admitted(token)),
            None => self.queue_cookie(req, carried, now).map(Visitor::Queued),
        }
    }

    /// A valid admission token from the cookie (the first valid one of any number sent), or
    /// else from the token header. With network binding on, a token bound to another network
    /// (or not bound at all) is no token.
    fn admission_token<B>(
        &self,
        req: &Request<B>,
        carried: &Carried<'_>,
        now: u64,
    ) -> Option<AdmissionToken> {
        let expected = self.network_binding(req);
        let verify = |v: &str| {
            AdmissionToken::verify(&self.keys, self.config.room(), v, now)
                .filter(|t| expected.is_none() || t.network() == expected)
        };
        carried
            .admission
            .find_valid(verify)
            .or_else(|| header_value(req, &self.config.token_header).and_then(|v| verify(v.trim())))
    }

    /// A valid queue value from the cookie (the first valid one of any number sent), or else
    /// from the queue header.
    pub(super) fn queue_cookie<B>(
        &self,
        req: &Request<B>,
        carried: &Carried<'_>,
        now: u64,
    ) -> Option<QueueCookie> {
        let verify = |v: &str| QueueCookie::verify(&self.keys, self.config.room(), v, now);
        carried
            .queue
            .find_valid(verify)
            .or_else(|| header_value(req, &self.config.queue_header).and_then(|v| verify(v.trim())))
    }

    /// With network binding on, the request's network (the client IP's /24 or /48), which
    /// tokens are bound to when issued and must match when checked; `Unknown` without a client
    /// IP (one warning in the log). `None` when binding is off.
    pub(super) fn network_binding<B>(&self, req: &Request<B>) -> Option<Network> {
        if !self.config.bind_tokens_to_network {
            return None;
        }
        let ip = self.client_ip(req);
        if ip.is_none() && !self.warned_unknown_network.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                room = self.config.room(),
                "no client IP for a request while admission tokens are bound to networks: \
                 tokens issued without an IP admit only requests without an IP (said once): {}",
                self.defences.client_ip.remedy()
            );
        }
        Some(Network::of(ip))
    }
}

/// A header value of the request, as text.
pub(super) fn header_value<'r, B>(req: &'r Request<B>, name: &HeaderName) -> Option<&'r str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}
