//! The defaults, in one place: the builder starts from these, and a test checks the table in
//! the [`config`](crate::config) docs against them. That table is their documentation: only the
//! headers, which clients speak, are public API here; the other values are hidden from the
//! docs (the crate and its tests read them) and may change with the defaults. Two defaults live
//! with the types they belong to: a proof-of-work challenge's lifetime and how many keys a
//! limiter tracks.
use std::time::Duration;

use super::{FailPolicy, SameSite};
use crate::defences::RateLimit;

/// Slot lifetime, extended by activity.
#[doc(hidden)]
pub const ACTIVE_TTL: Duration = Duration::from_secs(300);
/// Time a promoted visitor has to come back and claim the slot.
#[doc(hidden)]
pub const GRANT_TTL: Duration = Duration::from_secs(30);
/// A waiter silent for longer is skipped when their turn comes.
#[doc(hidden)]
pub const QUEUE_TTL: Duration = Duration::from_secs(120);
/// A waiter silent for longer is dropped from the line wherever they stand, so positions do not
/// count people long gone and the line's memory stays bounded. Much longer than
/// [`QUEUE_TTL`]: a visitor whose tab slept for a few minutes keeps their place until their turn.
#[doc(hidden)]
pub const ABANDON_AFTER: Duration = Duration::from_secs(30 * 60);
/// Age under which an admission token is trusted without any store call.
#[doc(hidden)]
pub const REFRESH: Duration = Duration::from_secs(15);
/// Lifetime of the signed queue cookie.
#[doc(hidden)]
pub const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);
/// Longest line.
#[doc(hidden)]
pub const MAX_QUEUE_LEN: u64 = 100_000;
/// Where the room's own endpoints live.
#[doc(hidden)]
pub const PATH_PREFIX: &str = "/__waitingroom";
/// Request and response header with the signed queue value (the visitor's place in line),
/// for apps without a cookie jar. The room reads it when the queue cookie is missing, and
/// sends it back, with the value it issues, to clients that sent none of its cookies.
pub const QUEUE_HEADER: &str = "waiting-room-session";
/// Request and response header with the signed admission token, for apps without a cookie
/// jar; read and sent like [`QUEUE_HEADER`].
pub const TOKEN_HEADER: &str = "waiting-room-token";

/// Response header with which the app behind the layer ends the visitor's slot (checkout
/// finished), any value: the layer frees the slot before sending the response, removes the
/// admission cookie, and always strips the header, so clients never see it. The same as
/// [`Admission::end_slot`](crate::Admission::end_slot); see
/// [ending a slot](crate::outcome#ending-a-slot-checkout-finished).
pub const END_SLOT_HEADER: &str = "waiting-room-end-slot";

/// What new visitors get while the store is unreachable.
#[doc(hidden)]
pub const FAIL_POLICY: FailPolicy = FailPolicy::Open;
/// Most visitors [`FailPolicy::Drain`] lets in from the front of the line during one outage.
#[doc(hidden)]
pub const DRAIN_BUDGET: u64 = 1_000;
/// `Path` of the room's cookies.
#[doc(hidden)]
pub const COOKIE_PATH: &str = "/";
/// Cookies are `Secure` unless turned off for plain-http development.
#[doc(hidden)]
pub const SECURE_COOKIES: bool = true;
/// `SameSite` of the room's cookies.
#[doc(hidden)]
pub const SAME_SITE: SameSite = SameSite::Lax;
/// The key id [`secret`](crate::WaitingRoomBuilder::secret) gives its key. Signed values carry
/// it, so keys can rotate: name your own with [`SigningKey::new`](crate::SigningKey::new) and
/// [`signing_key`](crate::WaitingRoomBuilder::signing_key) to rotate without logging anyone out.
#[doc(hidden)]
pub const KEY_ID: &str = "k1";
/// New queue entries per client (an IPv4 address or an IPv6 /64): 60 a minute. Real
/// visitors mint one queue cookie per browser, but many of them can share one address
/// (offices, universities, mobile carriers' NAT); a bot on one address mints thousands a
/// minute. Sites whose audience sits behind carrier NAT or other big NATs may want to raise
/// it with [`new_visitor_limit`](crate::WaitingRoomBuilder::new_visitor_limit).
#[doc(hidden)]
pub const NEW_VISITORS_PER_IP: RateLimit = RateLimit::per_minute(60);
/// Waiting polls and store questions per session (also those answered from the gateway's
/// snapshot): 3 a second on average, counted over 10 s, so a burst of
/// up to 30 passes (a page whose admission token just expired may ask for a few resources
/// at once). The waiting page asks every 2 to 30 s.
#[doc(hidden)]
pub const POLLS_PER_SESSION: RateLimit = RateLimit::new(30, Duration::from_secs(10));
/// Admission tokens are not bound to the visitor's network unless turned on (see
/// [`bind_tokens_to_network`](crate::WaitingRoomBuilder::bind_tokens_to_network)).
#[doc(hidden)]
pub const BIND_TOKENS_TO_NETWORK: bool = false;
/// Rooms mint no single-use checkout tickets unless turned on (see
/// [`single_use_tickets`](crate::WaitingRoomBuilder::single_use_tickets)).
#[doc(hidden)]
pub const SINGLE_USE_TICKETS: bool = false;
/// Event streams open at once per room on one gateway (see
/// [`max_event_streams`](crate::WaitingRoomBuilder::max_event_streams)).
#[doc(hidden)]
pub const MAX_EVENT_STREAMS: usize = 10_000;
