//! The ground floor: the shared vocabulary that the room, the store, the signed values and the
//! routing of several rooms all speak, kept below every one of them so that no import runs
//! upward. Nothing here depends on any other module of the crate but `client` (what a request
//! is), `encoding` and `session`.
//!
//! | file | what | public as |
//! |---|---|---|
//! | `config_error.rs` | [`ConfigError`]: every way a configuration can be refused (its messages are written in `config`, next to the bounds they name) | `ConfigError`, `config::ConfigError` |
//! | `rule.rs` | [`Rule`]: which requests go to a room, or are gated by one | `routing::Rule` |
//! | `loose_path.rs` | a path as the most lenient app reads it, which the gates match | |
//! | `place.rs` | [`Place`]: where a waiter stands in the line | `store::Place` |
//! | `nonce.rs` | [`TicketNonce`]: which single-use ticket a signed ticket stands for | `store::TicketNonce` |
//! | here | [`ADMISSION_TICKET_HEADER`]: the header that carries an admission to gated routes | `routing::ADMISSION_TICKET_HEADER` |
//! | here | [`BREAKER_STATE`]: the gauge the Redis store's circuit breaker sets | `telemetry::BREAKER_STATE` |

mod config_error;
mod loose_path;
mod nonce;
mod place;
mod rule;

pub use config_error::ConfigError;
pub(crate) use loose_path::{loose, loose_under};
pub use nonce::TicketNonce;
pub use place::{draw_score, Place, DRAW_BITS};
pub(crate) use rule::override_method;
pub use rule::Rule;

/// The request header that carries an admission to gated routes, for clients without cookies
/// (a mobile app, another backend): the admission token (`a1.…`), or, for a room with
/// [single-use tickets](crate::WaitingRoomBuilder::single_use_tickets), its one-time ticket
/// (`t1.…`). The status endpoint hands it to admitted clients that use headers, in its JSON
/// (`"ticket"`) and in this response header.
pub const ADMISSION_TICKET_HEADER: &str = "x-admission-ticket";

/// [`ADMISSION_TICKET_HEADER`] as a header name: the one the gates, the status endpoint and the
/// single-use tickets read and write.
pub(crate) const ADMISSION_TICKET: http::HeaderName =
    http::HeaderName::from_static(ADMISSION_TICKET_HEADER);

/// The Redis store's circuit breaker, labelled `store` with the store's key prefix: 0 closed,
/// 1 open, 2 half-open (one probe in flight). Set on each change. Gauge.
pub const BREAKER_STATE: &str = "waiting_room_store_breaker_state";
