//! The operator's handle on a running room: [`RoomControl`], from
//! [`WaitingRoomLayer::control`](crate::WaitingRoomLayer::control); and the room's counts for
//! routes anyone may ask for, read from the store at most once a second: [`SharedCounts`].
//!
//! Every change goes to the store in one atomic step and is enforced by every gateway of the
//! room on its next store call (see [`RoomSettings`]): raise the capacity when the backend
//! holds, pause when checkout breaks, let a batch in, close at the end.
//!
//! ```
//! use tower_waiting_room::testing::TestRoom;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let room = TestRoom::new("drop", 1);
//! let control = room.layer().control();
//! let (_, _inside) = room.admit().await; // the one slot is taken
//! let (_, _waiting) = room.queue_cookie();
//!
//! control.set_capacity(2).await?; // from now on, two inside at once, on every gateway
//! control.pause().await?; // nobody new gets in; those inside stay
//! let status = control.status().await?;
//! assert_eq!((status.capacity, status.paused, status.inside), (2, true, 1));
//! control.resume().await?;
//! # Ok::<_, tower_waiting_room::control::ControlError>(())
//! # }).unwrap();
//! ```
//!
//! Changes are logged at `info` level (room, what changed, the settings after it); every
//! method answers a [`ControlError`] rather than panicking: a bad value
//! ([`ControlError::Invalid`]) never reaches the store.

mod counts;

pub use counts::{SharedCounts, COUNTS_FRESH_MS};

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::auto::{AutoCapacity, AutoStatus};
use crate::config::EventSchedule;
use crate::eta::{estimate, Eta, EtaInput};
use crate::room::Room;
use crate::session::SessionId;
use crate::store::AutoOff;
use crate::store::{
    RoomSettings, RoomStats, SettingsChange, StoreError, HISTORY_MINUTES, MAX_ADMIT_NEXT_PER_CALL,
};
use crate::ConfigError;

/// A handle on one room's live settings, shared by every gateway through the store. Cheap to
/// clone.
#[derive(Clone)]
pub struct RoomControl {
    room: Arc<Room>,
}

impl fmt::Debug for RoomControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoomControl")
            .field("room", &self.room.config().room())
            .finish()
    }
}

/// What went wrong with an operator's request.
#[derive(Debug)]
#[non_exhaustive]
pub enum ControlError {
    /// A value the room cannot run with (capacity 0); nothing was changed.
    Invalid(&'static str),
    /// The store could not be asked; nothing is known to have changed.
    Store(StoreError),
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::Invalid(why) => f.write_str(why),
            ControlError::Store(e) => write!(f, "the room's store failed: {e}"),
        }
    }
}

impl std::error::Error for ControlError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ControlError::Invalid(_) => None,
            ControlError::Store(e) => Some(e),
        }
    }
}

impl From<StoreError> for ControlError {
    fn from(e: StoreError) -> Self {
        ControlError::Store(e)
    }
}

/// Whether closing ends the slots of those inside.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Closing {
    /// Those inside keep their slots until they expire (not extended while closed).
    #[default]
    KeepInside,
    /// Every slot ends now: those inside are out at their next request after their admission
    /// token's `refresh` (the token alone is trusted until then).
    EndSlots,
}

/// Where a room stands, as an operator sees it ([`RoomStatus::state`]; in JSON, the name in
/// lower case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RoomState {
    /// Before its scheduled opening: arrivals are registered (they see a countdown, no place
    /// and no count), nobody is admitted.
    Scheduled,
    /// Admitting.
    Open,
    /// Open, with admissions paused by the operators.
    Paused,
    /// Closed by the operators, or past its scheduled closing: newcomers are refused.
    Closed,
}

impl RoomState {
    /// The state of a room with `settings` and `schedule` at `now_ms`. The operators' close
    /// comes first (it is the emergency brake, before an opening too), then the schedule, then
    /// the pause.
    fn of(settings: &RoomSettings, schedule: Option<&EventSchedule>, now_ms: u64) -> Self {
        if !settings.open || schedule.is_some_and(|s| s.after_closing(now_ms)) {
            RoomState::Closed
        } else if schedule.is_some_and(|s| s.before_opening(now_ms)) {
            RoomState::Scheduled
        } else if settings.paused {
            RoomState::Paused
        } else {
            RoomState::Open
        }
    }
}

/// A room as an operator sees it: where it stands, its schedule, settings, counts and the wait
/// a newcomer faces. The admin API's `GET /rooms/{room}` body.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RoomStatus {
    /// The room id.
    pub room: String,
    /// Where the room stands: scheduled, open, paused or closed, by this gateway's schedule
    /// and clock and the live settings.
    pub state: RoomState,
    /// When the room opens (or opened), in Unix seconds rounded up: the schedule this gateway
    /// was built with; `None` without one.
    pub opens_at: Option<u64>,
    /// When the room stops taking newcomers, in Unix seconds rounded up; `None` if never.
    pub closes_at: Option<u64>,
    /// Before the opening, the visitors registered for it (in line, at the places their draws
    /// gave them); `None` from the opening on, and without a schedule.
    pub registrants: Option<u64>,
    /// Whether the sale is open (the operators' open and close).
    pub open: bool,
    /// Whether admissions are paused.
    pub paused: bool,
    /// Visitors inside at once.
    pub capacity: u32,
    /// Admissions per second, if limited.
    pub rate: Option<u32>,
    /// Visitors holding a claimed slot.
    pub inside: u64,
    /// Slots granted to promoted visitors who have not come back yet.
    pub granted: u64,
    /// Visitors in line.
    pub waiting: u64,
    /// Admissions in the last complete minute.
    pub admitted_last_minute: u64,
    /// Admissions in the last complete five minutes.
    pub admitted_last_five_minutes: u64,
    /// The estimated wait of a newcomer joining now, in seconds, as the waiting page would show
    /// it: 0 when nobody waits and a slot is free (they are let in at once); `None` when the
    /// line does not move (nobody let in for five minutes, paused or closed), before a
    /// scheduled opening, or while [`estimating`](Self::estimating).
    pub eta_seconds: Option<u64>,
    /// The room is too young, or has let too few in, to know its pace yet: waiters see
    /// "Estimating…". Only ever `true` in the [`Open`](RoomState::Open) state.
    pub estimating: bool,
    /// How long the first in line has waited, in seconds; `None` when nobody waits.
    pub oldest_wait_seconds: Option<u64>,
    /// Admissions in each of the last 30 complete minutes, oldest first.
    pub admissions_per_minute: Vec<u64>,
    /// The capacity controller, when the room's capacity follows the app (left out of the
    /// JSON otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<AutoStatus>,
    /// The languages the room's pages speak, the default first (left out of the JSON for a
    /// renderer of the app's own, whose languages the room does not know).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub languages: Vec<String>,
}

/// The wait of a newcomer joining now, as a waiter at the back of the line would be told.
fn newcomer_eta(stats: &RoomStats) -> Eta {
    let position = stats.waiting + 1;
    estimate(&EtaInput::new(
        position,
        position,
        stats.pace,
        stats.settings.paused,
    ))
}

impl RoomStatus {
    fn new(room: &str, stats: &RoomStats, schedule: Option<&EventSchedule>, now_ms: u64) -> Self {
        let s = stats.settings;
        let state = RoomState::of(&s, schedule, now_ms);
        let free = u64::from(s.capacity).saturating_sub(stats.admitted + stats.granted);
        let (eta, estimating) = if !s.admits() || state != RoomState::Open {
            (None, false)
        } else if stats.waiting == 0 && free > 0 {
            // Nobody waits and a slot is free: a newcomer is let in at once.
            (Some(0), false)
        } else {
            let eta = newcomer_eta(stats);
            (eta.shown().map(|d| d.as_secs()), eta == Eta::Estimating)
        };
        debug_assert_eq!(stats.admissions_per_minute.len(), HISTORY_MINUTES);
        let seconds = |ms: u64| ms.div_ceil(1000);
        Self {
            room: room.to_owned(),
            state,
            opens_at: schedule.map(|s| seconds(s.opens_at_ms)),
            closes_at: schedule.and_then(|s| s.closes_at_ms).map(seconds),
            registrants: (state == RoomState::Scheduled).then_some(stats.waiting),
            open: s.open,
            paused: s.paused,
            capacity: s.capacity,
            rate: s.admission_rate,
            inside: stats.admitted,
            granted: stats.granted,
            waiting: stats.waiting,
            admitted_last_minute: stats.recent.last_minute,
            admitted_last_five_minutes: stats.recent.last_five_minutes,
            eta_seconds: eta,
            estimating,
            oldest_wait_seconds: stats.oldest_wait_ms.map(|ms| ms / 1000),
            admissions_per_minute: stats.admissions_per_minute.to_vec(),
            auto: None,
            languages: Vec::new(),
        }
    }
}

impl RoomControl {
    pub(crate) fn new(room: Arc<Room>) -> Self {
        Self { room }
    }

    /// The room id.
    pub fn room(&self) -> &str {
        self.room.config().room()
    }

    /// The room's counts, settings and history, from the store.
    pub async fn stats(&self) -> Result<RoomStats, ControlError> {
        Ok(self.room.stats().await?)
    }

    /// The room as an operator sees it (the admin API's body).
    pub async fn status(&self) -> Result<RoomStatus, ControlError> {
        let stats = self.stats().await?;
        let schedule = self.room.config().policy.schedule.as_ref();
        let mut status = RoomStatus::new(self.room(), &stats, schedule, self.room.now_ms());
        status.auto = self.auto();
        status.languages = self.room.config().languages.clone();
        Ok(status)
    }

    /// The room's live settings.
    pub async fn settings(&self) -> Result<RoomSettings, ControlError> {
        self.change(SettingsChange::new()).await
    }

    /// Applies `change` in one atomic step and answers the settings after it. A capacity of 0
    /// is refused ([`ControlError::Invalid`]); an empty change only reads.
    pub async fn change(&self, change: SettingsChange) -> Result<RoomSettings, ControlError> {
        if change.capacity == Some(0) {
            return Err(ControlError::Invalid("capacity must be at least 1"));
        }
        let policy = &self.room.config().policy;
        if let (Some(_), Some(auto)) = (change.capacity, self.room.auto()) {
            // Before the write: a decision in flight then finds the controller off. If the
            // store misses this, it still finds a capacity the controller did not write at
            // its next decision, and turns itself off then.
            if let Err(e) = auto.switch(policy, Some(AutoOff::SetByHand), None).await {
                tracing::debug!(room = self.room(), error = %e, "auto capacity: the switch-off was not stored");
            }
        }
        let update = self.room.store().configure(policy, change).await?;
        log_change(self.room(), &update.before, &update.after, &change);
        Ok(update.after)
    }

    /// What the capacity controller is doing, when the room's capacity follows the app
    /// ([`auto_capacity`](crate::WaitingRoomBuilder::auto_capacity)); `None` without one.
    pub fn auto(&self) -> Option<AutoStatus> {
        self.room.auto().map(|auto| auto.status())
    }

    /// Turns the capacity controller off, for every gateway of the room, the capacity left
    /// where it is. `false` when the room has no controller.
    pub async fn stop_auto(&self) -> Result<bool, ControlError> {
        self.switch_auto(false, None).await
    }

    /// Turns the capacity controller back on, for every gateway of the room, after a capacity
    /// set by hand: it goes on from the capacity the store has. `false` when the room has no
    /// controller.
    pub async fn resume_auto(&self) -> Result<bool, ControlError> {
        self.switch_auto(true, None).await
    }

    /// Gives the capacity controller new terms (bounds, target, error budget, window) for every
    /// gateway of the room, in place of those it was built with, and turns it on: it goes on
    /// from the capacity the store has, by them. Terms it cannot run with are refused
    /// ([`ControlError::Invalid`]); `false` when the room has no controller. The store keeps
    /// them until others are set.
    pub async fn set_auto_terms(&self, terms: AutoCapacity) -> Result<bool, ControlError> {
        self.switch_auto(true, Some(terms)).await
    }

    /// The controller on or off, with new terms or not, for every gateway.
    pub(crate) async fn switch_auto(
        &self,
        on: bool,
        terms: Option<AutoCapacity>,
    ) -> Result<bool, ControlError> {
        let Some(auto) = self.room.auto() else {
            return Ok(false);
        };
        if let Some(Err(ConfigError::InvalidAutoCapacity { why })) = terms.map(|t| t.check()) {
            return Err(ControlError::Invalid(why));
        }
        let off = (!on).then_some(AutoOff::SetByHand);
        auto.switch(&self.room.config().policy, off, terms).await?;
        match terms {
            Some(terms) => {
                tracing::info!(room = self.room(), on, %terms, "auto capacity: new terms")
            }
            None if on => tracing::info!(room = self.room(), "auto capacity back on"),
            None => tracing::info!(room = self.room(), "auto capacity off"),
        }
        Ok(true)
    }

    /// The terms the capacity controller decides by now (the store's, when an operator set
    /// some while the room runs, as this gateway last heard); `None` without one.
    pub fn auto_terms(&self) -> Option<AutoCapacity> {
        self.room.auto().map(|auto| auto.terms())
    }

    /// Sets the capacity (at least 1). Raising it lets the next in line in at once; lowering it
    /// sends nobody out: those inside keep their slots, and nobody is let in until fewer than
    /// the new capacity are inside. A room whose capacity follows the app stops following it
    /// (until [`resume_auto`](Self::resume_auto)).
    pub async fn set_capacity(&self, capacity: u32) -> Result<RoomSettings, ControlError> {
        self.change(SettingsChange::new().capacity(capacity)).await
    }

    /// Sets the admission rate per second; `None` (or 0) removes the limit.
    pub async fn set_rate(&self, per_second: Option<u32>) -> Result<RoomSettings, ControlError> {
        self.change(SettingsChange::new().admission_rate(per_second))
            .await
    }

    /// Pauses admissions: nobody new is let in (newcomers join the line even with free slots);
    /// those inside keep their slots.
    pub async fn pause(&self) -> Result<RoomSettings, ControlError> {
        self.change(SettingsChange::new().paused(true)).await
    }

    /// Resumes admissions: free slots go to the head of the line at once.
    pub async fn resume(&self) -> Result<RoomSettings, ControlError> {
        self.change(SettingsChange::new().paused(false)).await
    }

    /// Opens the sale (the line moves again where it stood).
    pub async fn open(&self) -> Result<RoomSettings, ControlError> {
        self.change(SettingsChange::new().open(true)).await
    }

    /// Closes the sale: newcomers and waiters are told `closed` (`503`); waiters who keep the
    /// page open keep their place for a reopening; those inside keep their slots until they
    /// expire, or lose them now with [`Closing::EndSlots`].
    pub async fn close(&self, closing: Closing) -> Result<RoomSettings, ControlError> {
        let mut change = SettingsChange::new().open(false);
        if closing == Closing::EndSlots {
            change = change.end_slots();
        }
        self.change(change).await
    }

    /// Lets the first `count` of the line in now, whatever the capacity, rate, pause or close
    /// (an emergency release). Answers how many were let in: the whole line if it is shorter;
    /// none before a scheduled opening ([`opens_at`](crate::WaitingRoomBuilder::opens_at)).
    /// Silent waiters at the head are skipped as at their turn. Done in steps of at most
    /// 1 000 per store call, each atomic.
    pub async fn release(&self, count: u64) -> Result<u64, ControlError> {
        let policy = &self.room.config().policy;
        let mut released = 0;
        while released < count {
            let step = u32::try_from(count - released)
                .unwrap_or(u32::MAX)
                .min(MAX_ADMIT_NEXT_PER_CALL);
            let n = self.room.store().admit_next(policy, step).await?;
            released += n;
            if n < u64::from(step) {
                break;
            }
        }
        if released > 0 || count > 0 {
            tracing::info!(
                room = self.room(),
                asked = count,
                released,
                "waiting room released waiters"
            );
        }
        Ok(released)
    }

    /// Drops one session (a ban): its place or slot is freed now (the next in line is
    /// promoted) and the session is refused (`403 banned`) until its queue cookie would have
    /// expired (`session_ttl`). An admission token it holds is trusted until `refresh`, so it is
    /// out at its next request after that. `true` if it had a place or a slot.
    ///
    /// The ban is of the session, not of the person: a visitor who drops their cookies comes
    /// back as a new visitor, at the back of the line (within the per-IP limit on new places).
    pub async fn drop_session(&self, session: SessionId) -> Result<bool, ControlError> {
        let config = self.room.config();
        let until = self.room.now_ms() + crate::clock::duration_ms(config.settings.session_ttl);
        let had = self
            .room
            .store()
            .ban(&config.policy, session, until)
            .await?;
        tracing::info!(
            room = self.room(),
            had_place_or_slot = had,
            "waiting room dropped a session"
        );
        Ok(had)
    }

    /// Ends a visitor's slot (or place) now, as the app's end-of-visit header does: the next in
    /// line is promoted at once. `true` if there was one. No ban: the visitor can join again.
    pub async fn end_slot(&self, session: SessionId) -> Result<bool, ControlError> {
        let policy = &self.room.config().policy;
        Ok(self.room.store().release(policy, session).await?)
    }
}

/// One `info` line per change of settings, with what changed; opening and closing, pausing and
/// resuming have lines of their own words, so an operator can grep the log of a sale.
fn log_change(room: &str, before: &RoomSettings, after: &RoomSettings, change: &SettingsChange) {
    if before.open != after.open {
        if after.open {
            tracing::info!(room, "waiting room opened");
        } else {
            tracing::info!(room, end_slots = change.ends_slots(), "waiting room closed");
        }
    }
    if before.paused != after.paused {
        if after.paused {
            tracing::info!(room, "waiting room paused");
        } else {
            tracing::info!(room, "waiting room resumed");
        }
    }
    if before.capacity != after.capacity || before.admission_rate != after.admission_rate {
        tracing::info!(
            room,
            capacity = after.capacity,
            previous_capacity = before.capacity,
            rate = ?after.admission_rate,
            previous_rate = ?before.admission_rate,
            "waiting room settings changed"
        );
    }
}
