//! [`Settings`]: every setting of a room that is plain data, declared once. The builder holds
//! one (its setters write its fields), and a settings file or the environment deserializes
//! the same struct ([`RoomFile`](super::RoomFile)), under the same names. A new setting is a
//! field here with its doc and its default, its check in [`validate`](super::validate), and the
//! code that uses it.

use std::time::{Duration, SystemTime};

use serde::Deserialize;

use super::{defaults, readable, FailPolicy, SameSite};
use crate::defences::{ProofOfWork, RateLimit};

/// The room's settings that are data; see the [`config`](super) docs for what each means. A
/// key missing from a file keeps the [`Default`] below, which is the builder's.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Settings {
    /// Visitors inside at once, counting granted but unclaimed slots. Required: no default.
    pub(crate) capacity: Option<u32>,
    /// Admissions per second, on top of capacity. Default: unlimited.
    pub(crate) admission_rate: Option<u32>,
    /// Slot lifetime, extended by activity. Default [`defaults::ACTIVE_TTL`].
    #[serde(deserialize_with = "readable::duration")]
    pub(crate) active_ttl: Duration,
    /// Time a promoted visitor has to claim the slot. Default [`defaults::GRANT_TTL`].
    #[serde(deserialize_with = "readable::duration")]
    pub(crate) grant_ttl: Duration,
    /// A waiter silent for longer is skipped when their turn comes. Default
    /// [`defaults::QUEUE_TTL`].
    #[serde(deserialize_with = "readable::duration")]
    pub(crate) queue_ttl: Duration,
    /// A waiter silent for longer is dropped from the line. Default (`None`):
    /// [`defaults::ABANDON_AFTER`], or `queue_ttl` when that is longer.
    #[serde(deserialize_with = "readable::some_duration")]
    pub(crate) abandon_after: Option<Duration>,
    /// Age under which an admission token is trusted without a store call. Default
    /// [`defaults::REFRESH`].
    #[serde(deserialize_with = "readable::duration")]
    pub(crate) refresh: Duration,
    /// Lifetime of the signed queue cookie. Default [`defaults::SESSION_TTL`].
    #[serde(deserialize_with = "readable::duration")]
    pub(crate) session_ttl: Duration,
    /// Longest line. Default [`defaults::MAX_QUEUE_LEN`].
    pub(crate) max_queue_len: u64,
    /// What new visitors get while the store is unreachable. Default [`defaults::FAIL_POLICY`].
    #[serde(deserialize_with = "readable::fail_policy")]
    pub(crate) fail_policy: FailPolicy,
    /// Base name of the cookies. Default (`None`): `wr_{room}`.
    pub(crate) cookie_name: Option<String>,
    /// `Path` of the cookies. Default [`defaults::COOKIE_PATH`].
    pub(crate) cookie_path: String,
    /// `Domain` of the cookies. Default: none (host-only cookies).
    pub(crate) cookie_domain: Option<String>,
    /// Whether the cookies carry `Secure`. Default [`defaults::SECURE_COOKIES`].
    pub(crate) secure_cookies: bool,
    /// `SameSite` of the cookies. Default [`defaults::SAME_SITE`].
    #[serde(deserialize_with = "readable::same_site")]
    pub(crate) same_site: SameSite,
    /// Where the room's own endpoints live. Default [`defaults::PATH_PREFIX`].
    pub(crate) path_prefix: String,
    /// The header with the signed queue value. Default [`defaults::QUEUE_HEADER`].
    pub(crate) queue_header: String,
    /// The header with the signed admission token. Default [`defaults::TOKEN_HEADER`].
    pub(crate) token_header: String,
    /// New queue entries per client IP (`None`: off). Default
    /// [`defaults::NEW_VISITORS_PER_IP`].
    #[serde(deserialize_with = "readable::rate_limit")]
    pub(crate) new_visitor_limit: Option<RateLimit>,
    /// Store questions per session (`None`: off). Default [`defaults::POLLS_PER_SESSION`].
    #[serde(deserialize_with = "readable::rate_limit")]
    pub(crate) poll_limit: Option<RateLimit>,
    /// The header whose right-most address is the client IP. Default: none (the peer).
    pub(crate) client_ip_header: Option<String>,
    /// Whether admission tokens are bound to the visitor's network. Default
    /// [`defaults::BIND_TOKENS_TO_NETWORK`].
    pub(crate) bind_tokens_to_network: bool,
    /// Whether admission mints a single-use checkout ticket. Default
    /// [`defaults::SINGLE_USE_TICKETS`].
    pub(crate) single_use_tickets: bool,
    /// Most event streams open at once per room on one gateway (0: none). Default
    /// [`defaults::MAX_EVENT_STREAMS`].
    pub(crate) max_event_streams: usize,
    /// The proof-of-work difficulty in bits (`None`: off). Default: off.
    pub(crate) proof_of_work: Option<u8>,
    /// How long a proof-of-work challenge stays valid; needs `proof_of_work`. Default (`None`):
    /// [`DEFAULT_CHALLENGE_TTL`](crate::defences::proof_of_work::DEFAULT_CHALLENGE_TTL).
    #[serde(deserialize_with = "readable::some_duration")]
    pub(crate) proof_of_work_challenge_ttl: Option<Duration>,
    /// The scheduled opening (in files, Unix seconds). Default: none.
    #[serde(deserialize_with = "readable::unix_time")]
    pub(crate) opens_at: Option<SystemTime>,
    /// The scheduled closing (in files, Unix seconds). Default: none.
    #[serde(deserialize_with = "readable::unix_time")]
    pub(crate) closes_at: Option<SystemTime>,
    /// After `closes_at`, whether those in line keep their place. Default: yes.
    pub(crate) keep_line_after_close: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            capacity: None,
            admission_rate: None,
            active_ttl: defaults::ACTIVE_TTL,
            grant_ttl: defaults::GRANT_TTL,
            queue_ttl: defaults::QUEUE_TTL,
            abandon_after: None,
            refresh: defaults::REFRESH,
            session_ttl: defaults::SESSION_TTL,
            max_queue_len: defaults::MAX_QUEUE_LEN,
            fail_policy: defaults::FAIL_POLICY,
            cookie_name: None,
            cookie_path: defaults::COOKIE_PATH.to_owned(),
            cookie_domain: None,
            secure_cookies: defaults::SECURE_COOKIES,
            same_site: defaults::SAME_SITE,
            path_prefix: defaults::PATH_PREFIX.to_owned(),
            queue_header: defaults::QUEUE_HEADER.to_owned(),
            token_header: defaults::TOKEN_HEADER.to_owned(),
            new_visitor_limit: Some(defaults::NEW_VISITORS_PER_IP),
            poll_limit: Some(defaults::POLLS_PER_SESSION),
            client_ip_header: None,
            bind_tokens_to_network: defaults::BIND_TOKENS_TO_NETWORK,
            single_use_tickets: defaults::SINGLE_USE_TICKETS,
            max_event_streams: defaults::MAX_EVENT_STREAMS,
            proof_of_work: None,
            proof_of_work_challenge_ttl: None,
            opens_at: None,
            closes_at: None,
            keep_line_after_close: true,
        }
    }
}

impl Settings {
    /// The abandonment time: as set, or the default stretched to `queue_ttl`.
    pub(crate) fn effective_abandon_after(&self) -> Duration {
        self.abandon_after
            .unwrap_or_else(|| defaults::ABANDON_AFTER.max(self.queue_ttl))
    }

    /// Proof of work as the room runs it, if on.
    pub(crate) fn proof_of_work(&self) -> Option<ProofOfWork> {
        let pow = ProofOfWork::new(self.proof_of_work?);
        Some(match self.proof_of_work_challenge_ttl {
            Some(ttl) => pow.with_challenge_ttl(ttl),
            None => pow,
        })
    }

    /// Sets (or with `None`, turns off) proof of work.
    pub(crate) fn set_proof_of_work(&mut self, pow: Option<ProofOfWork>) {
        self.proof_of_work = pow.map(|p| p.difficulty());
        self.proof_of_work_challenge_ttl = pow.map(|p| p.challenge_ttl());
    }
}
