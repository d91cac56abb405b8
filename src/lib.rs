//! A fair virtual waiting room for any Tower/HTTP service.
//!
//! When more people arrive than a site can serve, [`WaitingRoomLayer`] lets in only as many as it
//! can handle (`capacity`), in the order they arrived, and tells everyone else their place in
//! line honestly.
//!
//! # The three stages
//!
//! Every request passes the cheapest check that can decide it:
//!
//! ```text
//!   request ──► bypass rule matches? ── yes ──────────────────────────────────────► app
//!      │         (defences)                                         (no Admission, no cookie)
//!      ▼
//!   {prefix}/{room}/status | leave | proof ? ── yes ──► answered here   (room/endpoints)
//!      │
//!      ▼
//!   ② valid admission token? (token/admission: one HMAC, no store)
//!      ├─ fresh (younger than `refresh`) ──────────────────────────────────────► app
//!      ├─ older ─► ③ heartbeat ─┬─ slot still held ─► app, with a fresh token
//!      │   (poll limit first;   └─ slot gone ─► ③ enter, as a queued visitor (below)
//!      │    over it: app, no store call)
//!      ▼ no token
//!   ① valid queue cookie? (token/queue_cookie)
//!      ├─ no ─► the risk decision (defences/risk): high ─► 403 refused, nothing stored
//!      │        else 302 + a signed queue cookie (proven if low); nothing stored
//!      │                                                      (per-IP limit: defences)
//!      ├─ not proven while proof of work is on ─► 403 + a signed challenge, no store call
//!      ▼ yes (per-session poll limit first: defences)
//!   ③ the store, one atomic step  (store: memory | redis + script/*.lua; room/pending)
//!      ├─ admitted ─────────────────────────────► app, with a fresh admission token
//!      ├─ waiting ─► 429, page or JSON with position and ETA     (room/reply, response)
//!      ├─ full ─► 503
//!      └─ out of memory ─► 503 busy; unreachable (or refused) ─► the fail policy:
//!                          open ─► app (and waiters polling are told "open"), closed ─► 503
//! ```
//!
//! 1. **Stateless cookie check**: a visitor without a valid signed queue cookie gets one and a
//!    redirect back to the same URL. Nothing is stored, so cookie-less floods never reach the
//!    store.
//! 2. **Signed-token fast path**: a visitor with a valid admission token younger than `refresh`
//!    goes straight through, no store call.
//! 3. **Store** ([`store`]): otherwise the store decides: admitted (a token is issued), waiting
//!    with a position, full, or unavailable.
//!
//! Outcomes are typed ([`Admission`] for handlers, [`Rejection`] for the room's own answers,
//! rendered by [`response::Render`]). The room also answers `GET {prefix}/{room}/status`,
//! `POST {prefix}/{room}/leave` and, with [proof of work](defences::proof_of_work) on,
//! `POST {prefix}/{room}/proof`. The signed values' wire formats are private to the crate; only
//! the room writes and reads them.
//!
//! The room's own answers never wait for the inner service: [`WaitingRoom`] is always ready, and
//! only a request that passes readies the inner service, so waiters are answered while the app
//! is saturated.
//!
//! # Getting started
//!
//! ```
//! use axum::{routing::get, Router};
//! use tower_waiting_room::WaitingRoomLayer;
//!
//! # fn main() -> Result<(), tower_waiting_room::ConfigError> {
//! let room = WaitingRoomLayer::builder("drop")
//!     .capacity(1_000)
//!     .secret(*b"a secret of at least thirty-two bytes!!")
//!     .build()?;
//! let app: Router = Router::new().route("/", get(|| async { "you are in" })).layer(room);
//! # let _ = app;
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//!
//! | module | what it holds |
//! |---|---|
//! | [`WaitingRoomLayer`], [`WaitingRoomBuilder`], [`WaitingRoom`], [`future`] | the Tower layer and its builder, the service (`poll_ready`/`call`) and its future (pass, ask the store, answer) |
//! | `room` (private) | the three stages wired together: dispatch, who a visitor is, the endpoints, the store steps, the replies |
//! | `token` (private; [`SigningKey`], [`Keyring`] public) | signed values: keys and rotation, the wire format, queue cookie (stage 1), admission token (stage 2), challenge |
//! | [`store`] | stage 3: the [`Store`](store::Store) trait and its error, the [`MemoryStore`](store::MemoryStore) and (feature `redis`) the `RedisStore`: builder, protocol, breaker and its Lua script (`src/store/redis/script/`) |
//! | [`config`] | settings, [`defaults`](config::defaults) in one place, validation, [`ConfigError`] |
//! | [`client`] | who a request comes from: [`RequestInfo`], [`PeerAddr`], (feature `axum`, on by default) axum's `ConnectInfo`, the client IP and the network prefixes |
//! | [`defences`] | bypass rules, rate limits, [proof of work](defences::proof_of_work), the [risk decision](defences::risk) for new visitors |
//! | [`outcome`], `eta` (hidden: internal), [`response`] | typed outcomes, the wait estimate, and how they are rendered (pages, templates, texts, JSON) |
//! | [`control`], [`admin`] | the operator's handle on a running room ([`RoomControl`](control::RoomControl)), and (feature `admin`, on by default) its HTTP API and dashboard ([`AdminService`](admin::AdminService)) |
//! | [`edge`] | admission a CDN edge can check: short-lived Ed25519 tokens beside the admission cookie, the keys as a JWKS, rotation |
//! | [`auto`] | a capacity that follows the app: the [`Controller`](auto::Controller) that turns windows of admitted requests' latency and errors into the next capacity, within [`AutoCapacity`](auto::AutoCapacity)'s bounds |
//! | [`clock`] | injectable time |
//! | [`telemetry`] | metric names (feature `metrics`, on by default) and the per-request `tracing` span |
//! | [`routing`] | several rooms behind one layer ([`WaitingRooms`](routing::WaitingRooms)), routed by the [`Rule`](routing::Rule)s that pick the room, and gated routes (`403 not_admitted`, the `X-Admission-Ticket` header) |
//! | [`serve`] | (feature `serve`, on by default) serving that survives a sale: [`serve::serve`](serve::serve()) over hyper's HTTP/1 within [`Limits`](serve::Limits) (timeouts, a connection cap, a cap on request heads), with a [`PeerAddr`] in each request and a graceful shutdown |
//! | [`testing`] | [`TestRoom`](testing::TestRoom) for testing handlers behind the layer, the [`ManualClock`](testing::ManualClock) tests move by hand; with the `testing` feature, the store conformance suite |

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

#[cfg(feature = "admin")]
pub mod admin;
pub mod auto;
mod body;
mod builder;
pub mod client;
pub mod clock;
pub mod config;
pub mod control;
mod cookies;
pub mod defences;
pub mod edge;
mod encoding;
// The wait estimate's model is internal: hidden from the docs, public for its doc tests.
#[doc(hidden)]
pub mod eta;
// The services' response futures: named by their `Service` impls, never in ordinary use;
// hidden from the docs.
#[doc(hidden)]
pub mod future;
mod layer;
pub mod outcome;
pub mod response;
mod room;
pub mod routing;
// The function libraries' headers, read by the tests that hold them to their Rust structs
// (this crate's and matching's, through `__private`).
#[cfg(feature = "redis")]
#[doc(hidden)]
pub mod script_header;
#[cfg(feature = "serve")]
pub mod serve;
mod service;
mod session;
pub mod store;
pub mod telemetry;
pub mod testing;
mod token;
mod vocab;

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The event guide's example (docs/events.md), compiled as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../docs/events.md")]
pub struct EventsGuideDoctests;

// The body of the crate's own services (admin, matching's): named by their `Service` impls only.
#[doc(hidden)]
pub use body::FullBody;
pub use body::ResponseBody;
pub use builder::WaitingRoomBuilder;
pub use client::{PeerAddr, RequestInfo};
pub use config::{ConfigError, FailPolicy, RoomConfig, RoomPolicy, SameSite};
pub use defences::{ProofOfWork, RateLimit};
pub use layer::WaitingRoomLayer;
pub use outcome::{Admission, AdmittedBy, Rejection};
pub use service::WaitingRoom;
pub use session::SessionId;
pub use token::{Keyring, SigningKey};

/// Not public API. The crate's own fuzz targets, property tests and benchmark reach the private
/// wire formats through this module; it may change in any release, and nothing in it is
/// documented as stable.
#[doc(hidden)]
pub mod __private {

    /// An environment variable's name as an error shows it: the name, or a note that the
    /// value given is none (it may be a secret), for the gateway's errors.
    pub fn shown_variable(name: &str) -> String {
        crate::config::shown_variable(name)
    }
    pub use crate::token::{AdmissionTicket, AdmissionToken, Challenge, QueueCookie};

    /// The Redis room functions' `line_numbers` and `room_numbers` for `policy` (its numbers,
    /// packed), for the tests that call an older library by hand.
    #[cfg(feature = "redis")]
    pub fn room_script_numbers(policy: &crate::RoomPolicy) -> [String; 2] {
        crate::store::redis_protocol_numbers(policy)
    }

    /// The name of the Redis room function library (what `FUNCTION LOAD` answers).
    #[cfg(feature = "redis")]
    pub const ROOM_LIBRARY_NAME: &str = crate::store::REDIS_ROOM_LIBRARY_NAME;

    /// The name of the Redis room function of a newcomer's enter (`join`), for the benchmark's
    /// `redis-benchmark` command.
    #[cfg(feature = "redis")]
    pub const ROOM_JOIN_FUNCTION: &str = crate::store::REDIS_ROOM_JOIN_FUNCTION;

    /// A Redis room function's call by hand, for the benchmark and the fault tests: the name of
    /// `op`'s function (`"enter"`, `"join"`, `"poll"`, `"heartbeat"`, `"release"`, or
    /// `"join_batch"` with the newcomers' ids one after the other as `session`; `None` for
    /// another) and its `ARGV` for `policy`, the session given as its raw bytes, `now` the
    /// server's clock, silence not excused, and `schedule` last when given.
    #[cfg(feature = "redis")]
    pub fn room_visitor_call(
        op: &str,
        policy: &crate::RoomPolicy,
        session: &[u8],
        schedule: Option<String>,
    ) -> Option<(&'static str, Vec<Vec<u8>>)> {
        crate::store::redis_visitor_call(op, policy, session, schedule)
    }

    /// The Redis room function library's source (`FUNCTION LOAD REPLACE`), as the store loads
    /// it, for the benchmark and the tests that load it by hand.
    #[cfg(feature = "redis")]
    pub const ROOM_LIBRARY: &str = crate::store::REDIS_ROOM_LIBRARY;

    /// The keys of `room` in `store`, in the Redis script's order, for the crate's fault tests and
    /// benchmark.
    #[cfg(feature = "redis")]
    pub fn redis_keys(store: &crate::store::RedisStore, room: &str) -> [String; 20] {
        store.keys(room)
    }

    /// The size in bits of each liveness bitmap of the Redis store for a line of at most
    /// `max_queue_len`, for the tests and the benchmark's memory figures.
    #[cfg(feature = "redis")]
    pub fn redis_bloom_bits(max_queue_len: u64) -> u64 {
        crate::store::redis_bloom_bits(max_queue_len)
    }

    /// A session's member in the sorted sets of a Redis room of this settings version (its id's
    /// first 14 bytes), for the tests and the benchmark that read a room's keys.
    #[cfg(feature = "redis")]
    pub fn redis_member(session: &crate::SessionId) -> &[u8] {
        crate::store::redis_member(session)
    }

    /// How many keys the new-visitor (per IP) and poll (per session) limiters of `layer` track,
    /// for the tests that check their memory stays bounded.
    pub fn limiter_sizes(layer: &crate::WaitingRoomLayer) -> (usize, usize) {
        layer.room().limiter_sizes()
    }

    /// Leading zero bits of a hash, as the proof-of-work check counts them.
    pub fn leading_zero_bits(hash: &[u8]) -> u32 {
        crate::defences::proof_of_work::leading_zero_bits(hash)
    }

    // The plumbing of matching's service (`tower-waiting-room-matching`): the crate's body
    // reader and JSON answer, and the signed session cookie of its own kind.
    pub use crate::body::{collect_limited, json_response, Collect};
    pub use crate::token::match_session::SessionCookie;

    /// The readers of the function libraries' headers (`ARGV` names, code without comments,
    /// each file once), for the tests of matching's library as for the room's.
    #[cfg(feature = "redis")]
    pub use crate::script_header;

    // The conformance suites' cases (matching's suite builds its own on them).
    #[cfg(feature = "testing")]
    pub use crate::testing::case::{Case, CaseFuture, Rng};
}
