//! The room's configuration, its defaults, and the typed error a bad one gives.
//!
//! A [`RoomConfig`] is built and validated by [`WaitingRoomLayer::builder`](crate::WaitingRoomLayer::builder);
//! once built it never changes. The part of it that a [`Store`](crate::store::Store) needs travels
//! with every store call as a [`RoomPolicy`], so one store serves any number of rooms.
//!
//! # Settings
//!
//! Every setting is a [`WaitingRoomBuilder`](crate::WaitingRoomBuilder) method of the same
//! name, whose docs give its meaning and its default. The settings that are data are also keys
//! of a settings file and environment variables, read by [`RoomFile`]; durations in a file are
//! readable (`"30s"`, `"5m"`, see [readable durations](RoomFile#readable-durations)). Each is
//! declared once, with its doc and its default, and the table of them all (key, environment
//! variable, default, how a file writes it, meaning) in `docs/configuration.md` is rendered
//! from that declaration; a test holds the page to it.
//!
//! Set in code only: signing keys ([`secret`](crate::WaitingRoomBuilder::secret),
//! [`signing_key`](crate::WaitingRoomBuilder::signing_key),
//! [`keyring`](crate::WaitingRoomBuilder::keyring); a file names where the secret is instead,
//! see [`RoomFile`], "Secrets"), the [`store`](crate::WaitingRoomBuilder::store), the
//! [`clock`](crate::WaitingRoomBuilder::clock), the
//! [`renderer`](crate::WaitingRoomBuilder::renderer),
//! [`bypass`](crate::WaitingRoomBuilder::bypass) rules,
//! [`client_ip_with`](crate::WaitingRoomBuilder::client_ip_with), the
//! [`risk`](crate::WaitingRoomBuilder::risk) hook and [`gate`](crate::WaitingRoomBuilder::gate)s.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;

use crate::clock::duration_ms;

pub mod defaults;
mod edge_file;
mod error;
mod file;
pub(crate) use file::shown_variable;
mod lang_file;
pub(crate) mod readable;
mod rotation_file;
mod schedule;
pub(crate) mod settings;
#[doc(hidden)]
pub mod table;
pub(crate) mod validate;
mod value;

/// Reads a [readable duration](RoomFile#readable-durations) (`"30s"`, `"5m"`, `"1h30m"`, or a
/// bare number of seconds) with any serde format, refusing a bad one with the value and a hint;
/// for the settings files of programs built on this crate, which write their durations as the
/// room's file does: `#[serde(deserialize_with = "tower_waiting_room::config::readable_duration")]`.
pub fn readable_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    readable::duration(d)
}

#[doc(hidden)]
pub use crate::token::MAX_KEY_ID_LEN;
pub use crate::token::MIN_SECRET_LEN;
pub use crate::vocab::ConfigError;
pub use file::{RoomFile, RoomFileError};
pub(crate) use schedule::unix_ms;
pub use schedule::EventSchedule;
#[doc(hidden)]
pub use schedule::DRAW_BITS;

/// Longest room id accepted.
#[doc(hidden)]
pub const MAX_ROOM_ID_LEN: usize = 64;

/// The shortest bearer token the admin service accepts, in bytes: 32 random bytes (64 hex
/// digits, or 43 characters of base64) cannot be guessed, and a shorter token is more likely a
/// password someone chose.
pub(crate) const MIN_ADMIN_TOKEN_LEN: usize = 32;

/// What new visitors get while the store cannot be reached (unreachable, timed out, failing
/// over, or refusing the room by configuration). Visitors holding a valid admission token are
/// let through either way: their check needs no store. Waiters get at least what a newcomer
/// gets: under `Open` the status endpoint tells the waiting page to come in. A store that is up
/// but full (`OOM`, a busy script) is never a reason to fail open: everyone is told "busy, try
/// again soon" under either policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailPolicy {
    /// Let new visitors in, without a slot: the site stays up, the queue is not enforced while
    /// the store is down. Nothing in the store is emptied.
    #[default]
    Open,
    /// Answer new visitors with a "try again soon" response.
    Closed,
    /// Keep letting the line in from the front, in order, at no more than its last known pace,
    /// up to `budget` visitors; everyone else keeps their place and waits, and newcomers get
    /// "try again soon". The gateway goes by the last snapshot of the line it held (see
    /// [`crate::store::snapshot`]) and the place in each waiter's signed queue cookie, so it
    /// needs neither the store nor the other gateways: every gateway lets in the same front of
    /// the line, and together no faster than the pace. The pace is the admissions per second of
    /// the last minute before the outage (never above the live admission rate, when one is
    /// set); a room that admitted nobody in that minute goes by the last five minutes', and
    /// one that admitted nobody in those drains nobody. `budget` bounds how many
    /// are let in this way, however long the outage lasts.
    ///
    /// Those let in have no slot in the store: when it is back, they are still at the front of
    /// its line, and are the first it admits. See `docs/reliability.md`.
    Drain {
        /// Most visitors let in from the front while the store is away (counted from the last
        /// snapshot before it went).
        budget: u64,
    },
}

impl FailPolicy {
    /// [`FailPolicy::Drain`] with the default budget, [`defaults::DRAIN_BUDGET`].
    pub const fn drain() -> Self {
        FailPolicy::Drain {
            budget: defaults::DRAIN_BUDGET,
        }
    }
}

/// The `SameSite` attribute of the room's cookies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SameSite {
    /// Sent on top-level navigation from other sites, not on cross-site subrequests or POSTs.
    #[default]
    Lax,
    /// Sent only on same-site requests.
    Strict,
    /// Sent everywhere; needs `Secure`.
    None,
}

impl SameSite {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SameSite::Lax => "Lax",
            SameSite::Strict => "Strict",
            SameSite::None => "None",
        }
    }
}

/// A cookie's name: checked at build time (see the builder), then compared with the keys of
/// every `Cookie` header's pairs.
#[derive(Clone)]
pub(crate) struct CookieName {
    name: Box<str>,
}

impl CookieName {
    pub(crate) fn new(name: String) -> Self {
        Self {
            name: name.into_boxed_str(),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.name
    }
}

impl std::ops::Deref for CookieName {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

/// The name, as a string shows it (not the searcher's insides).
impl std::fmt::Debug for CookieName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for CookieName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Cookie attributes of the room. Cookies are always `HttpOnly`.
#[derive(Clone, Debug)]
pub struct CookieSettings {
    pub(crate) queue_name: CookieName,
    pub(crate) admission_name: CookieName,
    /// `{name}_t`: the single-use ticket, with [`RoomConfig::single_use_tickets`] on.
    pub(crate) ticket_name: CookieName,
    /// `{name}_e`: the edge token, with [`edge_tokens`](crate::WaitingRoomBuilder::edge_tokens).
    pub(crate) edge_name: CookieName,
    pub(crate) path: String,
    pub(crate) domain: Option<String>,
    pub(crate) secure: bool,
    pub(crate) same_site: SameSite,
}

impl CookieSettings {
    /// Name of the signed queue cookie (the visitor's place in line).
    pub fn queue_name(&self) -> &str {
        &self.queue_name
    }
    /// Name of the admission token cookie.
    pub fn admission_name(&self) -> &str {
        &self.admission_name
    }
    /// Name of the single-use ticket cookie (`wr_{room}_t` by default), set with
    /// [`single_use_tickets`](crate::WaitingRoomBuilder::single_use_tickets) on.
    pub fn ticket_name(&self) -> &str {
        &self.ticket_name
    }
    /// Name of the edge token cookie (`wr_{room}_e` by default), set with
    /// [`edge_tokens`](crate::WaitingRoomBuilder::edge_tokens).
    pub fn edge_name(&self) -> &str {
        &self.edge_name
    }
    /// `Path` attribute.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// `Domain` attribute, if set.
    pub fn domain(&self) -> Option<&str> {
        self.domain.as_deref()
    }
    /// Whether the `Secure` attribute is set.
    pub fn secure(&self) -> bool {
        self.secure
    }
    /// The `SameSite` attribute.
    pub fn same_site(&self) -> SameSite {
        self.same_site
    }
}

/// What a store needs to know about a room to decide: sent along with every store call.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RoomPolicy {
    /// The room id (`[A-Za-z0-9_-]{1,64}`).
    pub room: Arc<str>,
    /// Visitors inside at once, counting granted but unclaimed slots.
    pub capacity: u32,
    /// Admissions per second, if limited.
    pub admission_rate: Option<u32>,
    /// Slot lifetime in milliseconds, extended by activity.
    pub active_ttl_ms: u64,
    /// Time a promoted visitor has to claim the slot, in milliseconds.
    pub grant_ttl_ms: u64,
    /// A waiter silent for longer is skipped when their turn comes, in milliseconds.
    pub queue_ttl_ms: u64,
    /// A waiter silent for longer is dropped from the line wherever they stand, in milliseconds.
    /// Stores use the larger of this and `queue_ttl_ms`.
    pub abandon_after_ms: u64,
    /// Waiters beyond this get [`Decision::Full`](crate::store::Decision::Full).
    pub max_queue_len: u64,
    /// A scheduled opening (and closing), if any; see [`EventSchedule`].
    pub schedule: Option<EventSchedule>,
}

impl RoomPolicy {
    /// A policy with the documented defaults, for stores used directly (tests, tools).
    pub fn new(room: &str, capacity: u32) -> Self {
        let defaults = settings::Settings::default();
        Self {
            room: Arc::from(room),
            capacity,
            admission_rate: defaults.admission_rate,
            active_ttl_ms: duration_ms(defaults.active_ttl),
            grant_ttl_ms: duration_ms(defaults.grant_ttl),
            queue_ttl_ms: duration_ms(defaults.queue_ttl),
            abandon_after_ms: duration_ms(defaults.effective_abandon_after()),
            max_queue_len: defaults.max_queue_len,
            schedule: None,
        }
    }

    /// Sets the admission rate per second.
    pub fn with_admission_rate(mut self, per_second: Option<u32>) -> Self {
        self.admission_rate = per_second;
        self
    }

    /// Sets the slot, grant and queue lifetimes.
    pub fn with_ttls(mut self, active: Duration, grant: Duration, queue: Duration) -> Self {
        self.active_ttl_ms = duration_ms(active);
        self.grant_ttl_ms = duration_ms(grant);
        self.queue_ttl_ms = duration_ms(queue);
        self
    }

    /// Sets the abandonment time: a waiter silent for longer is dropped from the line wherever
    /// they stand (a waiter silent for longer than `queue_ttl` only is skipped when their turn
    /// comes, and keeps their place if back before then).
    pub fn with_abandon_after(mut self, after: Duration) -> Self {
        self.abandon_after_ms = duration_ms(after);
        self
    }

    /// The abandonment time stores go by: never shorter than `queue_ttl`, whatever a policy
    /// built by hand says.
    pub fn effective_abandon_after_ms(&self) -> u64 {
        self.abandon_after_ms.max(self.queue_ttl_ms)
    }

    /// Sets the longest line.
    pub fn with_max_queue_len(mut self, max: u64) -> Self {
        self.max_queue_len = max;
        self
    }

    /// Sets the scheduled opening and closing ([`EventSchedule`]).
    pub fn with_schedule(mut self, schedule: Option<EventSchedule>) -> Self {
        self.schedule = schedule;
        self
    }

    /// Whether `now_ms` (store clock) is before the scheduled opening: nobody is admitted.
    pub fn before_opening(&self, now_ms: u64) -> bool {
        self.schedule
            .as_ref()
            .is_some_and(|s| s.before_opening(now_ms))
    }
}

/// A validated room configuration; see the [module docs](self) for the settings and defaults.
#[derive(Clone, Debug)]
pub struct RoomConfig {
    pub(crate) policy: RoomPolicy,
    /// The settings as validated, with the defaults that follow from other settings resolved.
    /// Getters of the settings that are public API are declared with them.
    pub(crate) settings: settings::Settings,
    /// Made of the settings: derived once, at build time.
    pub(crate) cookies: CookieSettings,
    pub(crate) queue_header: HeaderName,
    pub(crate) token_header: HeaderName,
    /// The languages of the pages, the default first; empty for a renderer of the app's own.
    pub(crate) languages: Vec<String>,
}

impl RoomConfig {
    /// The room id.
    pub fn room(&self) -> &str {
        &self.policy.room
    }
    /// What the store is told about the room.
    pub fn policy(&self) -> &RoomPolicy {
        &self.policy
    }
    /// Cookie names and attributes.
    pub fn cookies(&self) -> &CookieSettings {
        &self.cookies
    }
    /// The header that carries the signed queue value (the place in line) for clients without
    /// cookies (default `waiting-room-session`).
    pub fn queue_header(&self) -> &HeaderName {
        &self.queue_header
    }
    /// The header that carries the signed admission token for clients without cookies
    /// (default `waiting-room-token`).
    pub fn token_header(&self) -> &HeaderName {
        &self.token_header
    }
}
