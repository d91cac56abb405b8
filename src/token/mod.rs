//! Signed values: the keys that sign them and the formats they are written in.
//!
//! | file | what |
//! |---|---|
//! | `keys` | [`SigningKey`], [`Keyring`] (public) |
//! | `claims` | what a signed value says once parsed, shared by `format` and `verified` (private) |
//! | `format` | the signed-claims wire format every value shares (private) |
//! | `queue_cookie` | stage 1's [`QueueCookie`] |
//! | `admission` | stage 2's [`AdmissionToken`] |
//! | `challenge` | the proof-of-work [`Challenge`] |
//! | `ticket` | the single-use checkout [`AdmissionTicket`] |
//! | `verified` | the keyring's bounded memory of values whose MAC it has checked (private) |
//!
//! The wire formats are private to the crate: only the room writes and reads them, so a format
//! can change (under a new version prefix) without breaking anyone's code.

mod admission;
mod challenge;
mod claims;
mod format;
mod keys;
pub(crate) mod mac;
pub(crate) mod match_session;
mod queue_cookie;
mod ticket;
mod verified;

pub use admission::AdmissionToken;
pub(crate) use admission::TokenFault;
pub use challenge::Challenge;
pub(crate) use claims::MAX_ISSUED_AHEAD_MS;
pub(crate) use format::MAX_SIGNED_LEN;
pub use keys::{Keyring, SigningKey, MAX_KEY_ID_LEN, MIN_SECRET_LEN};
pub use queue_cookie::QueueCookie;
pub use ticket::{AdmissionTicket, TicketRefusal};
