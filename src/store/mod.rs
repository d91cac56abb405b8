//! Stage 3: the store, which holds the line and the slots and decides.
//!
//! A [`Store`] holds the line (five operations) and answers operators (four); every call first
//! does the room's housekeeping (expire slots, promote from the head of the line into free
//! slots; only [`sync`](SnapshotStore::sync) sweeps abandoned waiters) and then answers. Three
//! more capabilities are optional, each a trait of its own that a store offers through an
//! accessor of [`Store`] answering `Some(self)` (`None` by default), asked once when a room is
//! built: single-use tickets ([`TicketStore`], through [`Store::tickets`]), one capacity
//! decision for a fleet ([`AutoStore`], through [`Store::auto`]: the rules in [`auto`]'s docs)
//! and the gateways'
//! snapshots of the line ([`SnapshotStore`], through `Store::snapshots`: an unstable protocol
//! for the crate's own stores, hidden from these docs, see [`snapshot`]).
//!
//! | operation | of | for | answer |
//! |---|---|---|---|
//! | [`enter`](Store::enter) | the line | a visitor with a queue cookie but no fresh admission | joins the line (or keeps their place), or claims a granted slot |
//! | [`join`](Store::join) | the line | the same, when the cookie carries no place yet (default: `enter`) | the same answers as `enter`; a store may look for the place last |
//! | [`poll`](Store::poll) | the line | the status endpoint | where the visitor stands; creates nothing |
//! | [`heartbeat`](Store::heartbeat) | the line | an admitted visitor whose token is older than `refresh` | extends the slot, or says it is gone |
//! | [`release`](Store::release) | the line | the leave endpoint | frees the place or slot now |
//! | [`stats`](Store::stats) | operations | operators | counts, settings, the oldest wait, admissions per minute |
//! | [`configure`](Store::configure) | operations | operators | reads or changes the room's live [settings](RoomSettings) |
//! | [`admit_next`](Store::admit_next) | operations | operators | lets the first `n` of the line in now, whatever the capacity |
//! | [`ban`](Store::ban) | operations | operators | drops a session's place or slot and refuses it until a time |
//! | [`mint_ticket`](TicketStore::mint_ticket) | tickets | a room with single-use tickets, at admission, after each heartbeat that extends the slot, and on the status endpoint (the last two a renewal: [`MintFor`]) | the session's one ticket of this admission (extended with the slot), or "used" (also for a record lost while the admission goes on) |
//! | [`redeem_ticket`](TicketStore::redeem_ticket) | tickets | a gated route presenting a ticket | accepted exactly once, then "used" |
//! | [`sync`](SnapshotStore::sync) | snapshots | each gateway, about once a second | checks in the waiters it answered, sweeps, and answers the room's [`RoomSnapshot`] |
//! | [`auto_report`](AutoStore::auto_report) | auto capacity | each gateway of a room with [`auto_capacity`](crate::WaitingRoomBuilder::auto_capacity), about once a second | adds its counts to the room's window, takes or renews the lease, hands the lease holder the window once over |
//! | [`auto_apply`](AutoStore::auto_apply) | auto capacity | the lease holder, once per window | writes its capacity, if it still holds the lease and nobody else changed the capacity (else turns the controller off) |
//! | [`auto_switch`](AutoStore::auto_switch) | auto capacity | operators | turns the controller off or on for every gateway |
//!
//! # Writing a store
//!
//! A store of your own implements [`Store`]: eight methods ([`join`](Store::join) has a
//! default). To keep single-use tickets it also implements [`TicketStore`] and answers
//! `Some(self)` from [`Store::tickets`]; for rooms whose capacity follows the app, it
//! implements [`AutoStore`] and answers `Some(self)` from [`Store::auto`]. Run the conformance
//! suite on it (`testing::conformance`, feature `testing`): its ticket and `auto_*` cases run
//! when the store offers those capabilities.
//!
//! ```
//! use std::sync::Arc;
//!
//! use tower_waiting_room::store::{
//!     Decision, MemoryStore, MintFor, Minted, Redeemed, RoomStats, SettingsChange,
//!     SettingsUpdate, Store, StoreFuture, TicketNonce, TicketStore,
//! };
//! use tower_waiting_room::{RoomPolicy, SessionId};
//!
//! /// A store that hands every call to the embedded one (yours would keep the line itself).
//! struct Mine(MemoryStore);
//!
//! impl Store for Mine {
//!     fn enter(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
//!         self.0.enter(p, s)
//!     }
//!     fn poll(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
//!         self.0.poll(p, s)
//!     }
//!     fn heartbeat(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<Decision> {
//!         self.0.heartbeat(p, s)
//!     }
//!     fn release(&self, p: &RoomPolicy, s: SessionId) -> StoreFuture<bool> {
//!         self.0.release(p, s)
//!     }
//!     fn stats(&self, p: &RoomPolicy) -> StoreFuture<RoomStats> {
//!         self.0.stats(p)
//!     }
//!     fn configure(&self, p: &RoomPolicy, c: SettingsChange) -> StoreFuture<SettingsUpdate> {
//!         self.0.configure(p, c)
//!     }
//!     fn admit_next(&self, p: &RoomPolicy, n: u32) -> StoreFuture<u64> {
//!         self.0.admit_next(p, n)
//!     }
//!     fn ban(&self, p: &RoomPolicy, s: SessionId, until_ms: u64) -> StoreFuture<bool> {
//!         self.0.ban(p, s, until_ms)
//!     }
//!     // Only for a store that keeps single-use tickets:
//!     fn tickets(self: Arc<Self>) -> Option<Arc<dyn TicketStore>> {
//!         Some(self)
//!     }
//! }
//!
//! impl TicketStore for Mine {
//!     fn mint_ticket(
//!         &self,
//!         p: &RoomPolicy,
//!         s: SessionId,
//!         fresh: TicketNonce,
//!         expires_at_ms: u64,
//!         mint_for: MintFor,
//!     ) -> StoreFuture<Minted> {
//!         self.0.mint_ticket(p, s, fresh, expires_at_ms, mint_for)
//!     }
//!     fn redeem_ticket(&self, p: &RoomPolicy, s: SessionId, n: TicketNonce) -> StoreFuture<Redeemed> {
//!         self.0.redeem_ticket(p, s, n)
//!     }
//! }
//!
//! let layer = tower_waiting_room::WaitingRoomLayer::builder("shop")
//!     .capacity(100)
//!     .secret("a secret of at least thirty-two bytes!")
//!     .single_use_tickets(true)
//!     .store(Mine(MemoryStore::new()))
//!     .build();
//! assert!(layer.is_ok());
//! ```
//!
//! The semantics every store implements exactly (the [`MemoryStore`] is the reference):
//! - never more than `capacity` slots at once, counting granted-but-unclaimed ones;
//! - first come, first served by a store-side sequence; a newcomer is admitted at once only when
//!   nobody is waiting and a slot (and the admission-rate budget) is free; re-entering keeps the
//!   old place;
//! - promotion grants a slot for `grant_ttl`, which becomes `active_ttl` when the visitor comes
//!   back; work per call is bounded (100 promotions and 100 swept waiters at most);
//! - absence: a waiter silent for longer than `queue_ttl` keeps their place until their turn
//!   comes (they are at the head and a slot is free) and is skipped then; back before it, they
//!   carry on from the same place. A waiter silent for longer than `abandon_after` (never less
//!   than `queue_ttl`) is dropped from anywhere in the line, so positions do not count people
//!   long gone and a line's memory stays bounded;
//! - liveness is to the epoch ([`LivenessRule`], in [`snapshot`]): a check-in (a join, an
//!   `enter` or `poll` of a waiter, or the waiter in a [`sync`](SnapshotStore::sync)'s `seen`
//!   list) marks the epoch of its time (the opening's, before a scheduled opening) in both rules, and a store
//!   keeps epochs, not times. At their turn: seen within `queue_ttl`, never skipped; silent for
//!   longer than `queue_ttl * 5 / 4`, skipped. The sweep: seen within `abandon_after`, kept;
//!   silent for longer than `abandon_after * 3 / 2` (Redis: up to `* 7 / 4`, see
//!   [`snapshot`]), swept. [`RoomPace::silent`] counts the
//!   waiters not alive by the turn's rule (the embedded store exactly, Redis from the checkpoint
//!   waiters it reads);
//! - the sweep of abandoned waiters runs only in [`sync`](SnapshotStore::sync), at most
//!   100 waiters per call (`enter`, `poll`, `heartbeat`, `release` expire
//!   slots and promote, but sweep nobody), so it is part of the snapshot capability;
//! - [`sync`](SnapshotStore::sync), in one step: checks in every session of its `seen` list
//!   that has a place in line (nothing is made for the others), does the housekeeping with the
//!   sweep, and answers a [`RoomSnapshot`]: the head's score, how many wait, the exact rank and score of the
//!   waiters at [`checkpoint_ranks`](snapshot::checkpoint_ranks), the paused, open,
//!   before-opening and line-closed flags, and the admission counts and pace. A waiter's score
//!   is their sequence number, or a registrant's [`draw_score`](snapshot::draw_score); every
//!   `Waiting` answer says which ([`Place`]). Read the counts and pace from `sync` or `stats`: a
//!   store that keeps snapshots may leave them at their defaults in its `enter` and `poll`
//!   answers (gateways read them from their snapshot); a store without snapshots fills them in,
//!   as its rooms estimate the wait from them;
//! - a damaged room heals: a part lost (a Redis key evicted or deleted) counts as empty, a part
//!   of the wrong type is dropped, a place without a check-in counts as seen now, a check-in
//!   without a place is dropped, a slot holder with a place keeps the slot and loses the place,
//!   a damaged budget counts as full, a newcomer always goes after the last waiter, a number
//!   that is not one in its range (`inf`, `nan`, `2.5`, `0x10`, 20 digits) is read as missing
//!   and repaired, never used as read. A store answers every call, never fails on its own data
//!   (the conformance suite's `heals_*` cases);
//! - settings written by a version of the crate the store cannot read are a version mix:
//!   every call fails as [`Busy`](StoreErrorKind::Busy)
//!   ([`StoreError::is_version_mix`]), so nobody is let in by it and nobody loses their place;
//! - slots expire by time, never by trusting the browser; `release` frees at once;
//! - the admission rate, when set, is a token bucket of one second's admissions, spent in the
//!   same step as capacity by promotions and direct admissions alike;
//! - every admission (a direct admission of a newcomer or a promotion's grant; not a claim, not a
//!   heartbeat) is counted in [`ADMISSION_BUCKET_MS`] time buckets, kept for
//!   182 buckets in a fixed ring (bounded memory, old buckets overwritten).
//!   [`stats`](Store::stats) reads 30 minutes of them, per minute. Every
//!   `Waiting` answer carries the counts of the last complete minute and five minutes
//!   ([`AdmissionCounts`]), from which the layer estimates the wait. All gateways share them;
//! - live settings ([`RoomSettings`]: capacity, admission rate, paused, open) are the store's,
//!   read by every call in the same step: written from the call's [`RoomPolicy`] when the store
//!   first sees the room (or lost them), changed only by [`configure`](Store::configure). Paused:
//!   no promotion and no direct admission, newcomers join the line, claims of granted slots and
//!   heartbeats go on. Closed: [`Decision::Closed`] for everyone without a slot (nothing is
//!   stored for newcomers; a waiter's poll still checks them in, so they keep their place for a
//!   reopening), no promotion, and claimed slots are not extended: they run out. A granted slot
//!   is still claimed (its visitor was let in before the close, or by [`admit_next`](Store::admit_next));
//! - a banned session ([`ban`](Store::ban)) gets [`Decision::Banned`] instead of a place until
//!   the ban ends; bans are few (operators make them), so they are kept in full and dropped once
//!   past;
//! - the oldest wait: how long the head of the line has waited since joining (a store may round
//!   it up by at most 1 s); a registrant of a scheduled opening (below)
//!   has waited since the pre-queue's first registration;
//! - single-use tickets ([`TicketStore`]) are records of their own, one per session
//!   and room, that touch nothing of the line or the slots (no housekeeping runs for them):
//!   `mint_ticket` answers the session's live record (its nonce while unused, [`Minted::Used`]
//!   once used), its expiry moved to the given time if that is later (never earlier: the room
//!   mints again whenever a heartbeat extends the slot, so the record lives as long as the
//!   slot); without one, the admission's first mint ([`MintFor::Admission`]) creates one with
//!   the given nonce, expiring at the given time, and a renewal's ([`MintFor::Renewal`]: the
//!   admission goes on, and had its ticket) answers [`Minted::Used`], writing back a used record
//!   that no nonce redeems in place of a lost one (an ended one is kept);
//!   `redeem_ticket` turns a live unused record with the same nonce into a used one (kept until
//!   it expires, and at least as long as the slot, so a replay is told [`Redeemed::Used`] and
//!   the admission never gets a second ticket), atomically: of any number of
//!   concurrent redeems of one ticket through any number of gateways exactly one is
//!   [`Redeemed::Accepted`]; and only while the session holds a claimed slot that has not
//!   expired ([`Redeemed::SlotEnded`] otherwise, the record left unused). `release` and `ban`
//!   end the session's record in the same step as its slot: its ticket never passes again
//!   ([`Redeemed::SlotEnded`] while unused, [`Redeemed::Used`] once used, whatever slot the
//!   session holds later), and the next admission's mint replaces it with a new record. A
//!   record past its expiry counts as none; expired records are dropped as the store goes (at
//!   most 100 a call) or expire by themselves, so their memory stays bounded. A record that
//!   cannot be read (damaged) is never taken for none: it reads as used (both calls answer
//!   "used") and is written back as such a used record, ending at the mint's expiry or the
//!   slot's, or dropped once the session holds no slot;
//! - a scheduled opening ([`RoomPolicy::schedule`], an
//!   [`EventSchedule`](crate::config::EventSchedule)), by the store's clock: before `opens_at`
//!   nobody is admitted (no promotion, no direct admission, [`admit_next`](Store::admit_next)
//!   lets nobody in); a newcomer joins the line with the score `draw / 2^52 - 1` in `[-1, 0)`,
//!   its draw being the policy's keyed draw of the session (computed by the caller, never by the
//!   store), so ahead of every sequence number, registrants in draw order (ties by session id);
//!   registrants and waiters are answered [`Decision::Scheduled`]; a check-in before the opening
//!   counts as made at the opening, so nobody is skipped or swept for waiting for it. At the
//!   opening nothing moves (the line is already in order: no step of O(n), whatever the
//!   pre-queue's size) and later arrivals take sequence numbers behind every registrant. From
//!   `closes_at`, a newcomer (no place, no slot) gets [`Decision::Closed`] and nothing is stored; waiters keep their place and the line
//!   moves, unless `keep_line_after_close` is off: then everyone without a slot gets `Closed`
//!   (checked in, as for an operator's close) and nobody is promoted. Slots run their course.
//!   The room's pace ([`RoomPace::observed_ms`]) is measured from the opening, so a room that
//!   just opened is estimating its pace, not stalled;
//! - store v2 ([`snapshot`]): liveness is to the epoch ([`LivenessRule`]): a check-in (a join,
//!   an `enter` or `poll` of a waiter, or the session in a gateway's
//!   [`sync`](SnapshotStore::sync)) marks its epoch; a waiter is skipped at their turn when not alive by the turn rule (seen within
//!   `queue_ttl`: never; silent for more than 5/4 of it: skipped), and only `sync` sweeps
//!   abandoned waiters, at most 100 examined per call. Every `Waiting`
//!   answer says the waiter's [`Place`]. The Redis store's `enter` and `poll` answer no
//!   admission counts and no pace (`Default`): a gateway reads them from its snapshot. The
//!   Redis store keeps liveness in Bloom bitmaps: a false positive only makes a silent waiter
//!   look alive (granted, and the grant expires unclaimed), never an admission out of order.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;

use crate::config::RoomPolicy;
use crate::session::SessionId;

pub mod auto;
#[cfg(feature = "testing")]
pub(crate) mod damage;
mod error;
pub(crate) mod limits;
mod memory;
#[cfg(feature = "redis")]
mod redis;
mod settings;
// The snapshot protocol is for the crate's own stores and gateways: unstable, hidden from the
// docs, public only so that a store of one's own can still name it.
#[doc(hidden)]
pub mod snapshot;
mod tickets;

#[cfg(feature = "redis")]
pub(crate) use self::redis::bloom_bits as redis_bloom_bits;
#[cfg(feature = "redis")]
pub(crate) use self::redis::member as redis_member;
#[cfg(feature = "redis")]
pub(crate) use self::redis::protocol_numbers as redis_protocol_numbers;
#[cfg(feature = "redis")]
pub(crate) use self::redis::visitor_call as redis_visitor_call;
#[cfg(feature = "redis")]
pub(crate) use self::redis::ROOM_JOIN_FUNCTION as REDIS_ROOM_JOIN_FUNCTION;
#[cfg(feature = "redis")]
pub(crate) use self::redis::ROOM_LIBRARY as REDIS_ROOM_LIBRARY;
#[cfg(feature = "redis")]
pub(crate) use self::redis::ROOM_LIBRARY_NAME as REDIS_ROOM_LIBRARY_NAME;
/// The Lua the crate's Redis function libraries share, as the room's library holds it: for
/// another library that runs on a [`RedisStore`] ([`RedisStore::run_function`]) and reads the
/// same stored numbers and the same time argument. Not public API: its text may change in any
/// release, with the libraries that hold it.
#[cfg(feature = "redis")]
#[doc(hidden)]
pub mod redis_script {
    /// The reader of stored numbers (`script/stored.lua`).
    pub const STORED_LUA: &str = include_str!("redis/script/stored.lua");
    /// The reader of a call's time argument (`script/time.lua`,
    /// [`RedisStore::time_arg`](crate::store::RedisStore::time_arg)).
    pub const TIME_LUA: &str = include_str!("redis/script/time.lua");
}
#[cfg(feature = "redis")]
pub use self::redis::{RedisCheckError, RedisServerInfo, RedisStore, RedisStoreBuilder};
// The breaker's counters: the `metrics` feature exports the same, as metrics.
#[cfg(feature = "redis")]
#[doc(hidden)]
pub use self::redis::RedisStoreMetrics;
pub use auto::{AutoApplied, AutoOff, AutoReport, AutoStore, GatewayId, MAX_AUTO_STATUS};
pub use error::{StoreError, StoreErrorKind};
pub use memory::MemoryStore;
#[doc(hidden)]
pub use settings::SETTINGS_VERSION;
pub use settings::{RoomSettings, SettingsChange, SettingsUpdate};
#[doc(hidden)]
pub use snapshot::{Checkpoint, LivenessRule, Place, RoomSnapshot, SeenWaiters, SnapshotStore};
pub(crate) use tickets::MAX_TICKET_SWEEP_PER_CALL;
pub use tickets::{MintFor, Minted, Redeemed, TicketNonce, TicketStore};

/// Most waiters promoted (or skipped as silent) in one call.
pub(crate) const MAX_PROMOTIONS_PER_CALL: u32 = 100;
/// Most abandoned waiters (silent for longer than `abandon_after`) swept from anywhere in the
/// line in one call.
pub(crate) const MAX_SWEEP_PER_CALL: u32 = 100;

/// The longest line a room may keep (`max_queue_len`): the Redis library sizes its liveness
/// bitmaps by it (at most 32 MiB each), and refuses a call that sends more
/// (`script/call.lua`, `LIMIT_QUEUE`); the builder refuses it too.
pub(crate) const MAX_QUEUE_LEN_LIMIT: u64 = 1 << 24;
/// The longest lifetime a room may give a slot, a grant or a waiter's check-in (`active_ttl`,
/// `grant_ttl`, `queue_ttl`, `abandon_after`): seven days, in ms. The Redis library refuses a
/// call that sends a longer one (`script/call.lua`, `LIMIT_TTL`), and drops a slot whose
/// expiry lies beyond it as damage; the builder refuses it too.
pub(crate) const MAX_STORED_TTL_MS: u64 = 7 * 24 * 3_600_000;

/// Most waiters [`admit_next`](Store::admit_next) lets in per call; callers ask again for more.
pub(crate) const MAX_ADMIT_NEXT_PER_CALL: u32 = 1_000;

/// How much a store may round up [`RoomStats::oldest_wait_ms`]: the Redis store notes the time of
/// the first arrival of each second, not of every arrival.
#[doc(hidden)]
pub const OLDEST_WAIT_GRANULARITY_MS: u64 = 1_000;

/// Minutes of admissions [`RoomStats::admissions_per_minute`] covers.
pub(crate) const HISTORY_MINUTES: usize = 30;

/// Width of one admission-counting bucket, in milliseconds.
#[doc(hidden)]
pub const ADMISSION_BUCKET_MS: u64 = 10_000;
/// Buckets kept in a room's admission ring: the 30 minutes shown to operators, the
/// current bucket and one spare.
#[doc(hidden)]
pub const ADMISSION_BUCKETS: u64 = HISTORY_BUCKETS + 2;
/// Complete buckets in the operators' history.
pub(crate) const HISTORY_BUCKETS: u64 = HISTORY_MINUTES as u64 * MINUTE_BUCKETS;
/// Complete buckets in the "last minute" count.
pub(crate) const MINUTE_BUCKETS: u64 = 6;
/// Complete buckets in the "last five minutes" count.
pub(crate) const FIVE_MINUTE_BUCKETS: u64 = 30;

/// The future a store operation returns.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'static>>;

/// A room's line and slots: the line's five operations and the operators' four, which every
/// room needs, and the accessors of the optional capabilities ([`tickets`](Store::tickets)).
/// Implementations must follow the semantics in the [module docs](self), which also show a
/// store of one's own; the crate's conformance tests check them.
///
/// Methods take what they need by value or clone it, so the returned futures are `'static` and
/// can live in the layer's response future.
pub trait Store: Send + Sync + 'static {
    // The line.

    /// A visitor wants in: joins the line, keeps their place, or claims their slot.
    fn enter(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision>;
    /// [`enter`](Store::enter) for a visitor who, as far as the gateway knows, has no place in
    /// line yet (their queue cookie carries none): the same answer in every case (they may have
    /// a place or a slot after all: a reply lost on its way, another gateway), which a store
    /// may reach by looking for a place last instead of first. The layer calls it for such a
    /// visitor; the default is `enter`.
    fn join(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        self.enter(policy, session)
    }
    /// Where the visitor stands, refreshing their check-in; [`Decision::Unknown`] if nowhere.
    fn poll(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision>;
    /// Extends an admitted visitor's slot to `active_ttl` from now; [`Decision::Unknown`] if the
    /// slot is gone (expired or released).
    fn heartbeat(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision>;
    /// Frees the visitor's place or slot now, and ends their single-use ticket record (if the
    /// store keeps them: [`TicketStore`]) in the same step. `true` if there was a place or a slot.
    fn release(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<bool>;

    // Operations.

    /// Counts for the room.
    fn stats(&self, policy: &RoomPolicy) -> StoreFuture<RoomStats>;
    /// Applies `change` to the room's live settings in one step and answers the settings before
    /// and after it (an empty change reads them). Raising the capacity or resuming promotes at
    /// once; closing with [`SettingsChange::end_slots`] ends every slot.
    fn configure(&self, policy: &RoomPolicy, change: SettingsChange)
        -> StoreFuture<SettingsUpdate>;
    /// Grants a slot to the first `count` waiters now (at most 1 000 per
    /// call), whatever the capacity, the rate, a pause or a close (but nobody before a scheduled
    /// opening: see [`EventSchedule`](crate::config::EventSchedule)); waiters silent for longer
    /// than `queue_ttl` are skipped (dropped) as at their turn. Answers how many were let in:
    /// fewer than asked when the line ran out.
    fn admit_next(&self, policy: &RoomPolicy, count: u32) -> StoreFuture<u64>;
    /// Drops the session's place or slot (the next in line is promoted), ends its single-use
    /// ticket record in the same step, and refuses it ([`Decision::Banned`]) until `until_ms`.
    /// `true` if it had a place or a slot.
    fn ban(&self, policy: &RoomPolicy, session: SessionId, until_ms: u64) -> StoreFuture<bool>;

    // Optional capabilities, each answered `Some(self)` by a store that has it.

    /// This store's single-use tickets, if it keeps them: a store that also implements
    /// [`TicketStore`] answers `Some(self)`. `None` by default. A room with
    /// [`single_use_tickets`](crate::WaitingRoomBuilder::single_use_tickets) on asks once, when
    /// it is built, and refuses a store that answers `None`
    /// ([`ConfigError::StoreWithoutTickets`](crate::ConfigError::StoreWithoutTickets)). The
    /// embedded and the Redis store keep tickets. It takes and answers an `Arc`, so that the room
    /// holds the capability itself from then on: `Some(self)` is all a store writes.
    fn tickets(self: Arc<Self>) -> Option<Arc<dyn TicketStore>> {
        None
    }

    /// This store's shared capacity decisions, if it takes them: a store that also implements
    /// [`AutoStore`] answers `Some(self)`. `None` by default: a room whose capacity follows the
    /// app ([`auto_capacity`](crate::WaitingRoomBuilder::auto_capacity)) cannot be built on it
    /// ([`ConfigError::StoreWithoutAuto`](crate::ConfigError::StoreWithoutAuto)).
    /// Asked once, when the room is built.
    fn auto(self: Arc<Self>) -> Option<Arc<dyn AutoStore>> {
        None
    }

    /// This store's snapshots of the line, if it keeps them: a store that also implements
    /// [`SnapshotStore`] answers `Some(self)`. `None` by default: a room on such a store asks
    /// it for every waiting poll, and offers no event streams. Asked once, when the room is
    /// built. Unstable, as the whole [`snapshot`] protocol: for the crate's own stores.
    #[doc(hidden)]
    fn snapshots(self: Arc<Self>) -> Option<Arc<dyn SnapshotStore>> {
        None
    }
}

/// A store operation: the metrics' `op` label ([`as_str`](Self::as_str)), one per timed call of
/// a store's ([`Store`], [`TicketStore`], [`SnapshotStore`]; a join is timed as
/// [`Enter`](Self::Enter)); the Redis store also reads it for a schedule's draw, which only
/// [`Enter`](Self::Enter) sends. No Redis function takes it as an argument: each operation is a
/// function of its own (`<library>_<op>`, named in `redis/calls.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StoreOp {
    Enter,
    Poll,
    Heartbeat,
    Release,
    Stats,
    Configure,
    AdmitNext,
    Ban,
    MintTicket,
    RedeemTicket,
    Sync,
    AutoReport,
    AutoApply,
    AutoSwitch,
}

impl StoreOp {
    /// Every operation, in the order of the metrics' keys.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const ALL: [StoreOp; 14] = [
        StoreOp::Enter,
        StoreOp::Poll,
        StoreOp::Heartbeat,
        StoreOp::Release,
        StoreOp::Stats,
        StoreOp::Configure,
        StoreOp::AdmitNext,
        StoreOp::Ban,
        StoreOp::MintTicket,
        StoreOp::RedeemTicket,
        StoreOp::Sync,
        StoreOp::AutoReport,
        StoreOp::AutoApply,
        StoreOp::AutoSwitch,
    ];

    /// The operation's name, as the metrics spell it: the store method's (`mint_ticket`,
    /// `redeem_ticket`), which the Redis functions' names follow but for the tickets'
    /// (`<library>_ticket_mint`, `<library>_ticket_redeem`).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StoreOp::Enter => "enter",
            StoreOp::Poll => "poll",
            StoreOp::Heartbeat => "heartbeat",
            StoreOp::Release => "release",
            StoreOp::Stats => "stats",
            StoreOp::Configure => "configure",
            StoreOp::AdmitNext => "admit_next",
            StoreOp::Ban => "ban",
            StoreOp::MintTicket => "mint_ticket",
            StoreOp::RedeemTicket => "redeem_ticket",
            StoreOp::Sync => "sync",
            StoreOp::AutoReport => "auto_report",
            StoreOp::AutoApply => "auto_apply",
            StoreOp::AutoSwitch => "auto_switch",
        }
    }
}

/// What a store decided for one visitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[expect(
    clippy::large_enum_variant,
    reason = "made once per request and moved once, by value: a box would cost an allocation \
              on every waiting poll to save copying a couple of hundred bytes, and lose `Copy`"
)]
pub enum Decision {
    /// The visitor holds a slot until `expires_at_ms` (store clock, ms since the epoch).
    Admitted {
        /// When the slot expires unless extended.
        expires_at_ms: u64,
    },
    /// The visitor is in line.
    Waiting {
        /// 1-based place in line.
        position: u64,
        /// How many are in line in all.
        waiting: u64,
        /// How many were admitted lately, for the wait estimate.
        recent: AdmissionCounts,
        /// The room is paused: the line does not move until it resumes.
        paused: bool,
        /// What the admission counts were measured over, for the wait estimate.
        pace: RoomPace,
        /// Where the visitor stands in the store's order, for the queue cookie (`None` from a
        /// store that does not say): with it, a gateway answers their next polls from its
        /// [`RoomSnapshot`].
        place: Option<Place>,
    },
    /// The line is at `max_queue_len`; the visitor was not added.
    Full {
        /// How many are in line.
        waiting: u64,
    },
    /// The visitor has neither a place nor a slot.
    Unknown,
    /// The sale is closed ([`RoomSettings::open`] is `false`): nobody is admitted. A waiter who
    /// asked keeps their place (checked in); a newcomer was not added.
    Closed,
    /// The session is banned ([`Store::ban`]).
    Banned,
    /// The room opens at `opens_at_ms` (store clock, ms since the epoch; see
    /// [`EventSchedule`](crate::config::EventSchedule)): the visitor is registered in the
    /// pre-queue (or already was), and nobody is admitted before then.
    Scheduled {
        /// When the room opens.
        opens_at_ms: u64,
    },
}

/// How many visitors a room admitted lately (direct admissions and promotions' grants), shared
/// by every gateway of the room.
///
/// Counts cover whole [`ADMISSION_BUCKET_MS`] buckets before the current one: `last_minute` is
/// the six complete 10-second buckets before now (so exactly 60 s of history, ending up to 10 s
/// ago), `last_five_minutes` the thirty before now. A room younger than the window counts only
/// what it has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
#[doc(hidden)]
pub struct AdmissionCounts {
    /// Admissions in the last complete minute.
    pub last_minute: u64,
    /// Admissions in the last complete five minutes (includes `last_minute`).
    pub last_five_minutes: u64,
}

impl AdmissionCounts {
    /// Counts for the last minute and the last five minutes.
    pub const fn new(last_minute: u64, last_five_minutes: u64) -> Self {
        Self {
            last_minute,
            last_five_minutes,
        }
    }

    /// Admissions per second over the last minute.
    pub fn per_second_last_minute(&self) -> f64 {
        self.last_minute as f64 / (MINUTE_BUCKETS * ADMISSION_BUCKET_MS / 1000) as f64
    }

    /// Admissions per second over the last five minutes.
    pub fn per_second_last_five_minutes(&self) -> f64 {
        self.last_five_minutes as f64 / (FIVE_MINUTE_BUCKETS * ADMISSION_BUCKET_MS / 1000) as f64
    }
}

/// What a room's admission counts were measured over, beyond the complete buckets of
/// [`AdmissionCounts`]: the wait estimate ([`crate::eta`]) needs it to use the window the room
/// has actually seen (a young room is not five minutes old) and the admissions of the current
/// bucket (the last complete one can be ten seconds old).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
#[doc(hidden)]
pub struct RoomPace {
    /// Admissions in the current, incomplete bucket.
    pub current: u64,
    /// How far into the current bucket the store's clock is, in ms.
    pub into_bucket_ms: u64,
    /// How long ago the store first saw the room, in ms.
    pub observed_ms: u64,
    /// The room's live capacity.
    pub capacity: u32,
    /// Waiters skipped as silent at their turn (the line moved without an admission), in the
    /// same complete buckets as the admission counts.
    pub skipped: AdmissionCounts,
    /// Waiters skipped in the current bucket.
    pub current_skipped: u64,
    /// The capacity before its last change (the live one if it never changed).
    pub capacity_before: u32,
    /// How long ago the capacity last changed, in ms; `None` if it never did.
    pub capacity_changed_ms_ago: Option<u64>,
    /// The last pause that ended: how long ago it began and ended, in ms.
    pub last_pause_ms_ago: Option<(u64, u64)>,
    /// Admissions in each of the last 5 complete minutes, most recent first
    /// (each six complete buckets; the first ends where the current bucket begins): how much
    /// the pace varies from one minute to the next, for the estimate's margin.
    pub minutes: [u64; PACE_MINUTES],
    /// Waiters in line silent for longer than `queue_ttl`, to the epoch of the turn's
    /// [`LivenessRule`]: unless they come back, they are skipped at their turn, and move
    /// nobody's wait.
    pub silent: u64,
    /// The silence after which a waiter counts as [`silent`](Self::silent) (the room's
    /// `queue_ttl`), in ms.
    pub silent_after_ms: u64,
    /// How long ago the room first let someone in beyond its opening's capacity, in ms: when a
    /// slot was first freed by someone leaving. `None` if not yet.
    pub first_move_ms_ago: Option<u64>,
    /// The room's live admission rate (per second), `None` if unlimited: the line moves no
    /// faster, whatever its slots allow, from the moment an operator sets it.
    pub admission_rate: Option<u32>,
    /// People holding a slot (claimed or granted), `None` if the store does not say: after a
    /// cut of the capacity below it, nobody is let in until enough of them have left.
    pub inside: Option<u64>,
}

/// The minutes of admissions in a [`RoomPace`].
pub(crate) const PACE_MINUTES: usize = 5;

impl RoomPace {
    /// A pace from its main parts: nobody skipped, the capacity never changed.
    pub const fn new(current: u64, into_bucket_ms: u64, observed_ms: u64, capacity: u32) -> Self {
        Self {
            current,
            into_bucket_ms,
            observed_ms,
            capacity,
            skipped: AdmissionCounts::new(0, 0),
            current_skipped: 0,
            capacity_before: capacity,
            capacity_changed_ms_ago: None,
            last_pause_ms_ago: None,
            minutes: [0; PACE_MINUTES],
            silent: 0,
            silent_after_ms: 0,
            first_move_ms_ago: None,
            admission_rate: None,
            inside: None,
        }
    }

    /// With the people holding a slot.
    pub const fn with_inside(mut self, inside: u64) -> Self {
        self.inside = Some(inside);
        self
    }

    /// With the silence after which a waiter counts as silent (the room's `queue_ttl`).
    pub const fn with_silent_after(mut self, ms: u64) -> Self {
        self.silent_after_ms = ms;
        self
    }

    /// With the time of the room's first movement.
    pub const fn with_first_move(mut self, ms_ago: u64) -> Self {
        self.first_move_ms_ago = Some(ms_ago);
        self
    }

    /// With the admissions of the last 5 minutes (most recent first) and the
    /// waiters silent for longer than `queue_ttl`.
    pub const fn with_line(mut self, minutes: [u64; PACE_MINUTES], silent: u64) -> Self {
        self.minutes = minutes;
        self.silent = silent;
        self
    }

    /// With the last pause that ended: how long ago it began and ended.
    pub const fn with_last_pause(mut self, began_ms_ago: u64, ended_ms_ago: u64) -> Self {
        self.last_pause_ms_ago = Some((began_ms_ago, ended_ms_ago));
        self
    }

    /// With waiters skipped as silent: in the complete buckets, and in the current one.
    pub const fn with_skipped(mut self, skipped: AdmissionCounts, current: u64) -> Self {
        self.skipped = skipped;
        self.current_skipped = current;
        self
    }

    /// With the capacity's last change: what it was before, and how long ago.
    pub const fn with_capacity_change(mut self, before: u32, ms_ago: u64) -> Self {
        self.capacity_before = before;
        self.capacity_changed_ms_ago = Some(ms_ago);
        self
    }

    /// With the live admission rate per second (`None`: unlimited).
    pub const fn with_admission_rate(mut self, per_second: Option<u32>) -> Self {
        self.admission_rate = per_second;
        self
    }
}

/// Counts for one room.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RoomStats {
    /// Visitors holding a claimed slot.
    pub admitted: u64,
    /// Slots granted to promoted visitors who have not come back yet.
    pub granted: u64,
    /// Visitors in line.
    pub waiting: u64,
    /// The room's capacity (the live one, as in `settings`).
    pub capacity: u64,
    /// Admissions lately.
    pub recent: AdmissionCounts,
    /// The room's live settings.
    pub settings: RoomSettings,
    /// How long the first in line has waited since joining, in ms (rounded up by at most
    /// 1 s); `None` when nobody waits (or the store lost track).
    pub oldest_wait_ms: Option<u64>,
    /// Admissions in each of the last 30 complete minutes, oldest first (each
    /// minute is six complete buckets; the last ends where the current bucket begins).
    pub admissions_per_minute: [u64; HISTORY_MINUTES],
    /// The room's pace, as a waiting answer carries it (for the wait of a newcomer).
    pub pace: RoomPace,
}

/// The admission ring of one room: bucket `i` (time `i * ADMISSION_BUCKET_MS`) lives in slot
/// `i % ADMISSION_BUCKETS`, tagged with `i` so a stale slot reads as zero. Fixed size, O(1)
/// updates, O(30) reads: the reference for the Redis script's `admissions` hash.
#[derive(Clone, Debug)]
pub(crate) struct AdmissionRing {
    slots: [(u64, u64); ADMISSION_BUCKETS as usize],
    /// Waiters skipped as silent at their turn, per bucket (`k<i>` in the script's hash).
    skips: [(u64, u64); ADMISSION_BUCKETS as usize],
}

impl Default for AdmissionRing {
    fn default() -> Self {
        Self {
            slots: [(u64::MAX, 0); ADMISSION_BUCKETS as usize],
            skips: [(u64::MAX, 0); ADMISSION_BUCKETS as usize],
        }
    }
}

/// Adds one to the bucket holding `now_ms` in `ring`, resetting a slot that holds an older one.
fn count_in(ring: &mut [(u64, u64); ADMISSION_BUCKETS as usize], now_ms: u64) {
    let bucket = now_ms / ADMISSION_BUCKET_MS;
    let slot = &mut ring[(bucket % ADMISSION_BUCKETS) as usize];
    if slot.0 != bucket {
        *slot = (bucket, 0);
    }
    slot.1 += 1;
}

/// The counts of the `buckets` complete buckets before the one holding `now_ms`, each with how
/// many buckets back it is (1 = the last complete one); stale slots are skipped.
fn complete_buckets(
    ring: &[(u64, u64); ADMISSION_BUCKETS as usize],
    now_ms: u64,
    buckets: u64,
) -> impl Iterator<Item = (u64, u64)> + '_ {
    let current = now_ms / ADMISSION_BUCKET_MS;
    (1..=buckets.min(current)).filter_map(move |back| {
        let bucket = current - back;
        let (tag, n) = ring[(bucket % ADMISSION_BUCKETS) as usize];
        (tag == bucket).then_some((back, n))
    })
}

/// The last minute's and the last five minutes' counts of `ring`'s complete buckets.
fn recent_counts(ring: &[(u64, u64); ADMISSION_BUCKETS as usize], now_ms: u64) -> AdmissionCounts {
    let mut out = AdmissionCounts::default();
    for (back, n) in complete_buckets(ring, now_ms, FIVE_MINUTE_BUCKETS) {
        out.last_five_minutes += n;
        if back <= MINUTE_BUCKETS {
            out.last_minute += n;
        }
    }
    out
}

/// The count of the bucket holding `now_ms` (incomplete).
fn current_count(ring: &[(u64, u64); ADMISSION_BUCKETS as usize], now_ms: u64) -> u64 {
    let bucket = now_ms / ADMISSION_BUCKET_MS;
    match ring[(bucket % ADMISSION_BUCKETS) as usize] {
        (tag, n) if tag == bucket => n,
        _ => 0,
    }
}

impl AdmissionRing {
    /// Counts one admission at `now_ms`.
    pub(crate) fn count(&mut self, now_ms: u64) {
        count_in(&mut self.slots, now_ms);
    }

    /// Counts one waiter skipped as silent at their turn at `now_ms`.
    pub(crate) fn count_skip(&mut self, now_ms: u64) {
        count_in(&mut self.skips, now_ms);
    }

    /// Admissions per minute over the 30 complete minutes before the bucket
    /// holding `now_ms`, oldest first.
    pub(crate) fn per_minute(&self, now_ms: u64) -> [u64; HISTORY_MINUTES] {
        let mut out = [0; HISTORY_MINUTES];
        for (back, n) in complete_buckets(&self.slots, now_ms, HISTORY_BUCKETS) {
            out[HISTORY_MINUTES - 1 - ((back - 1) / MINUTE_BUCKETS) as usize] += n;
        }
        out
    }

    /// Admissions in each of the 5 complete minutes before the bucket holding
    /// `now_ms`, most recent first.
    pub(crate) fn last_minutes(&self, now_ms: u64) -> [u64; PACE_MINUTES] {
        let mut out = [0; PACE_MINUTES];
        for (back, n) in complete_buckets(&self.slots, now_ms, FIVE_MINUTE_BUCKETS) {
            out[((back - 1) / MINUTE_BUCKETS) as usize] += n;
        }
        out
    }

    /// Skipped waiters: in the complete buckets (as [`counts`](Self::counts)) and in the current.
    pub(crate) fn skipped(&self, now_ms: u64) -> (AdmissionCounts, u64) {
        (
            recent_counts(&self.skips, now_ms),
            current_count(&self.skips, now_ms),
        )
    }

    /// Admissions in the bucket holding `now_ms` (incomplete).
    pub(crate) fn current(&self, now_ms: u64) -> u64 {
        current_count(&self.slots, now_ms)
    }

    /// The counts of the complete buckets before the one holding `now_ms`.
    pub(crate) fn counts(&self, now_ms: u64) -> AdmissionCounts {
        recent_counts(&self.slots, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_counts_complete_buckets_only() {
        let mut ring = AdmissionRing::default();
        let t0 = 1_000 * ADMISSION_BUCKET_MS;
        ring.count(t0);
        ring.count(t0 + 9_999);
        assert_eq!(
            ring.counts(t0 + 9_999),
            AdmissionCounts::new(0, 0),
            "current bucket"
        );
        assert_eq!(ring.counts(t0 + 10_000), AdmissionCounts::new(2, 2));
        // Still in the last minute six buckets later, gone from it at the seventh.
        assert_eq!(ring.counts(t0 + 69_999), AdmissionCounts::new(2, 2));
        assert_eq!(ring.counts(t0 + 70_000), AdmissionCounts::new(0, 2));
        assert_eq!(ring.counts(t0 + 309_999), AdmissionCounts::new(0, 2));
        assert_eq!(ring.counts(t0 + 310_000), AdmissionCounts::new(0, 0));
    }

    #[test]
    fn ring_slots_are_reused_without_leaking_old_counts() {
        let mut ring = AdmissionRing::default();
        let t0 = 77 * ADMISSION_BUCKET_MS;
        ring.count(t0);
        // Exactly one ring later, the same slot: the old count is dropped, not added.
        let later = t0 + ADMISSION_BUCKETS * ADMISSION_BUCKET_MS;
        ring.count(later);
        assert_eq!(
            ring.counts(later + ADMISSION_BUCKET_MS),
            AdmissionCounts::new(1, 1)
        );
        // A ring that was idle for hours reads zero.
        assert_eq!(ring.counts(later + 3_600_000), AdmissionCounts::default());
    }

    #[test]
    fn rates() {
        let c = AdmissionCounts::new(30, 300);
        assert!((c.per_second_last_minute() - 0.5).abs() < 1e-9);
        assert!((c.per_second_last_five_minutes() - 1.0).abs() < 1e-9);
    }
}
