//! Defaults that are not a setting's alone: the header with which the app ends a slot (public
//! API: the app sends it), the default names of the headers clients without cookies speak (the
//! settings `queue_header` and `token_header`, whose docs give them), and a few values the
//! crate's docs and tests refer to (hidden from the docs; they may change).
//! Every other default is written next to its setting, in the settings' one declaration, from
//! which the settings table of `docs/configuration.md` is rendered. Two
//! defaults live with the types they belong to: a proof-of-work challenge's lifetime and how
//! many keys a limiter tracks.

use std::time::Duration;

use crate::defences::RateLimit;

/// Request and response header with the signed queue value (the visitor's place in line),
/// for apps without a cookie jar. The room reads it when the queue cookie is missing, and
/// sends it back, with the value it issues, to clients that sent none of its cookies.
pub(crate) const QUEUE_HEADER: &str = "waiting-room-session";
/// Request and response header with the signed admission token, for apps without a cookie
/// jar; read and sent like [`QUEUE_HEADER`].
pub(crate) const TOKEN_HEADER: &str = "waiting-room-token";

/// Response header with which the app behind the layer ends the visitor's slot (checkout
/// finished), any value: the layer frees the slot before sending the response, removes the
/// admission cookie, and always strips the header, so clients never see it. The same as
/// [`Admission::end_slot`](crate::Admission::end_slot); see
/// [ending a slot](crate::outcome#ending-a-slot-checkout-finished).
pub const END_SLOT_HEADER: &str = "waiting-room-end-slot";

/// Response header with which the app behind the layer tells a room whose capacity follows it
/// ([`auto_capacity`](crate::WaitingRoomBuilder::auto_capacity)) how loaded it is: a whole
/// number from 0 to 100. At 85 or more the controller stops growing the capacity; it never
/// lowers it for this header alone, so a wrong value can at most hold the capacity where it
/// is. Anything else (missing, not a number, over 100) is ignored. The layer always strips
/// it, so clients never see it.
pub const APP_LOAD_HEADER: &str = "waiting-room-load";

/// Most visitors [`FailPolicy::Drain`](super::FailPolicy::Drain) lets in from the front of the line during one outage.
#[doc(hidden)]
pub const DRAIN_BUDGET: u64 = 1_000;
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
