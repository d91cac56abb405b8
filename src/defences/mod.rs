//! Defences in process memory: bypass rules, the per-client limit on new queue entries, the
//! per-session limit on store questions, and the optional proof of work. None of them costs a
//! store call.
//!
//! - **Bypass** ([`WaitingRoomBuilder::bypass`](crate::WaitingRoomBuilder::bypass)): a predicate
//!   on the request; matching requests skip the room entirely (no cookie, no
//!   [`Admission`](crate::Admission), no store call, not counted).
//! - **New visitors per client IP**
//!   ([`new_visitor_limit`](crate::WaitingRoomBuilder::new_visitor_limit), default
//!   [`NEW_VISITORS_PER_IP`](crate::config::defaults::NEW_VISITORS_PER_IP)): how many fresh queue cookies (stage 1, the only place a
//!   new place in line is minted) one client gets per window. Over it: `429` with
//!   `Retry-After` and no cookie. A client is an IPv4 address, or an IPv6 **/64** (see
//!   [`client`](crate::client#ipv6-clients-are-grouped-by-64)).
//! - **Polls per session** ([`poll_limit`](crate::WaitingRoomBuilder::poll_limit), default
//!   [`POLLS_PER_SESSION`](crate::config::defaults::POLLS_PER_SESSION)): how many store
//!   questions one session may cause per window: every one it can cause counts (stage 3 for a
//!   visitor in line, the heartbeat of an admission token past `refresh` and, when that finds
//!   the slot gone, the entry after it, the status and leave endpoints), and so do proof
//!   submissions. Over it: `429` with `Retry-After`, and no store call; an admission token past
//!   `refresh` passes without its heartbeat instead, since a valid token needs no store.
//!
//! Both limits count in a sliding window approximated by two generations of counters, and keep
//! at most [`MAX_TRACKED`] keys per generation: a flood of distinct clients rotates the
//! generations early instead of growing memory.
//! - **Proof of work** ([`proof_of_work`], off by default): a challenge a visitor solves before
//!   joining the line.
//! - **The risk decision** ([`risk`]): for each new visitor, the app's hook or a default scorer
//!   from passive signals says low (straight to the line), medium (the challenge first) or high
//!   (refused). On with proof of work, a hook or listed networks.
//!
//! Where the client IP comes from is described in [`client`](crate::client).

mod generations;
pub mod proof_of_work;
mod rate_limit;
pub mod risk;

use std::net::IpAddr;
use std::sync::atomic::AtomicBool;

pub(crate) use self::proof_of_work::ProofGate;
pub use self::proof_of_work::ProofOfWork;
pub(crate) use rate_limit::Limiter;
pub use rate_limit::RateLimit;
pub(crate) use risk::RiskGate;

use crate::client::{ClientIp, RequestInfo};
use crate::session::SessionId;

/// Most keys a limiter tracks per generation; it holds at most twice this many.
#[doc(hidden)]
pub const MAX_TRACKED: usize = 65_536;

/// A bypass rule.
pub(crate) type BypassFn = dyn Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static;

/// The room's in-memory defences, as built from the builder.
pub(crate) struct Defences {
    pub(crate) bypass: Vec<Box<BypassFn>>,
    pub(crate) client_ip: ClientIp,
    pub(crate) new_visitors: Option<Limiter<IpAddr>>,
    pub(crate) polls: Option<Limiter<SessionId>>,
    /// Proof of work before joining the line, when on.
    pub(crate) proof: Option<ProofGate>,
    /// The risk decision for new visitors, when on (a hook, proof of work or listed networks).
    pub(crate) risk: Option<RiskGate>,
    /// Whether the room has warned that it found no client IP for the new-visitor limit.
    pub(crate) warned_no_ip: AtomicBool,
}

impl Defences {
    /// Whether a bypass rule matches.
    pub(crate) fn bypasses(&self, req: &RequestInfo<'_>) -> bool {
        self.bypass.iter().any(|rule| rule(req))
    }
}
