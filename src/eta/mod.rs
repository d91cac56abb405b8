//! The wait estimate shown to waiters: how long until their turn, from what the room has
//! actually observed, which every gateway shares through the store.
//!
//! One function, [`estimate`], from one small input, [`EtaInput`]: the waiter's position, the
//! room's admission counts and what they were measured over ([`RoomPace`]), and whether the room
//! is paused. Whatever feeds the position (a store answer today, a snapshot later) and whatever
//! moves the pace (operators' capacity changes, a pause) reaches the estimate through it.
//!
//! How it estimates (`docs/eta.md` has the method, the simulation and its measured accuracy):
//! - **The window the room has**: the admissions of each of the last five minutes and of the
//!   current bucket, divided by the time they really cover: never more than the room's age (a
//!   room 20 s old is not five minutes old), less any pause.
//! - **Throughput of slots** (Little's law: the line moves as fast as slots are freed): the
//!   slots filled at once (the opening's, a raised capacity's, those freed during a pause) are
//!   fills, not pace, and are left out. Until the room's first movement nobody leaves (the
//!   shortest visits had to end first): only [`OPENING_SHARE`] of that time counts.
//! - **Operators' changes**: a capacity raised (or lowered) within the window scales the part
//!   measured before the change by the new capacity over the old (visits as long as before free
//!   slots in proportion); a capacity cut below the people inside (an operator's, or the
//!   [capacity controller](crate::auto)'s) adds the gap before anyone moves: nobody is let in
//!   until enough of them have left. A paused room says so instead of a number.
//! - **Following a change within a minute**: the rate is that of the longest window (up to five
//!   minutes) whose older part moved at the pace of the last two minutes, within
//!   [`CHANGE_Z`] standard deviations of counting noise; the last minute's when it is slower
//!   (a slowdown is followed at once: erring long is the lesser harm).
//! - **The line ahead**: waiters silent for longer than `queue_ttl` are skipped at their turn
//!   and take none of the line's time: counted where they stand when the gateway's snapshot
//!   says ([`EtaInput::with_silent_ahead`]), else the room's count placed nearer the front. So
//!   are those who will give up before it, forecast from the share of turns skipped lately and
//!   from the rate at which waiters go silent (the constant patience of queueing theory's
//!   Erlang-A model), their mean. A burst of quitters is not a rate that goes on: when one of
//!   the last few minutes had far more give-ups than the others (a gateway counts them minute
//!   by minute in its snapshots, [`GiveUpMinutes`]), both forecasts expect the others' rate.
//! - **A margin sized from the measured error**, not a fixed factor: the room's own minutes,
//!   each forecast by the ones before, say how far its pace strays (its trend and its waves),
//!   and how dispersed its admissions are; never less than [`MIN_RATE_ERROR`]. Who gives up
//!   adds its own: whether each waiter ahead stays, where the silent stand (the count's own
//!   error when counted; else nearer the front, or anywhere after a wave of quitters), and how
//!   far the two forecasts of give-ups part.
//!   The shown value adds [`MARGIN_Z`] times the resulting uncertainty of the wait; the range
//!   spans it.
//! - **No false precision**: with no basis (a room younger than [`MIN_OBSERVED_MS`], or fewer
//!   than [`MIN_EVENTS`] admissions beyond the fills) the answer is [`Eta::Estimating`]; a room
//!   that let nobody in for five minutes is [`Eta::Stalled`]; a paused one [`Eta::Paused`].

use std::time::Duration;

use crate::store::{RoomPace, ADMISSION_BUCKET_MS, PACE_MINUTES};

mod give_ups;
pub(crate) use give_ups::GiveUpHistory;
pub use give_ups::GiveUpMinutes;

/// A minute, in ms: the admission counts of a [`RoomPace`] are per minute.
const MINUTE_MS: u64 = 6 * ADMISSION_BUCKET_MS;

/// How many standard deviations of counting noise the older part of a window may differ from
/// the last two minutes before the window counts as out of date.
pub const CHANGE_Z: f64 = 1.5;
/// How many standard deviations of the estimate's uncertainty the shown value adds.
pub const MARGIN_Z: f64 = 0.75;
/// The least relative uncertainty of a rate, however steady the room looked: what no count
/// measures (the visits to come are not the visits gone).
pub const MIN_RATE_ERROR: f64 = 0.05;
/// The share of the time before the room's first movement that counts as running at its pace.
pub const OPENING_SHARE: f64 = 0.5;
/// Turns (admissions and skips) the last minute needs before its share of skips is used.
const MIN_SKIP_TURNS: u64 = 10;
/// Bounds of the measured dispersion of admissions (their variance over their mean; 1 for a
/// Poisson pace): a few minutes' counts measure it roughly.
const MIN_DISPERSION: f64 = 0.25;
const MAX_DISPERSION: f64 = 4.0;
/// A room younger than this has no basis for an estimate yet.
pub const MIN_OBSERVED_MS: u64 = 5_000;
/// Admissions (beyond the initial fill) needed before a rate is estimated.
pub const MIN_EVENTS: f64 = 10.0;
/// The longest estimate given: beyond it the number means nothing.
const MAX_SECS: f64 = 365.0 * 86_400.0;

/// What an estimate is made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EtaInput {
    /// The waiter's 1-based position.
    pub position: u64,
    /// Everyone in line.
    pub waiting: u64,
    /// The room's admissions and what they were measured over.
    pub pace: RoomPace,
    /// Whether the room is paused.
    pub paused: bool,
    /// How many of those ahead are silent now, if known, and that count's standard deviation
    /// ([`with_silent_ahead`](Self::with_silent_ahead)); `None`: only the room's
    /// [`silent`](RoomPace::silent) count is known, not where they stand.
    pub silent_ahead: Option<(u64, u64)>,
    /// How many waiters gave up in each of the last few minutes, as a gateway counted them
    /// minute by minute, if known.
    pub give_ups_lately: Option<GiveUpMinutes>,
}

impl EtaInput {
    /// An input from its parts, not knowing where the silent stand.
    pub const fn new(position: u64, waiting: u64, pace: RoomPace, paused: bool) -> Self {
        Self {
            position,
            waiting,
            pace,
            paused,
            silent_ahead: None,
            give_ups_lately: None,
        }
    }

    /// The same input, knowing that `silent` of those ahead are silent now (not alive by the
    /// turn's liveness rule: skipped at their turn unless they come back), give or take
    /// `error` (a standard deviation: nought where each waiter ahead was looked at, as a
    /// snapshot's checkpoints are near the head; more where they were counted between
    /// checkpoints). The estimate then takes these off the line ahead instead of placing the
    /// room's silent count by a guess.
    pub const fn with_silent_ahead(self, silent: u64, error: u64) -> Self {
        Self {
            silent_ahead: Some((silent, error)),
            ..self
        }
    }

    /// The same input, knowing how many waiters gave up in each of the last few minutes: when
    /// one minute had far more than the others (a burst of quitters), the forecast of give-ups
    /// still to come expects the others' rate, not the mean the room's counts over five
    /// minutes say ([`GiveUpMinutes::steady_share`]).
    pub const fn with_give_ups_lately(self, minutes: GiveUpMinutes) -> Self {
        Self {
            give_ups_lately: Some(minutes),
            ..self
        }
    }
}

/// The wait a waiter is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Eta {
    /// An estimate: `shown` is the value to show (on the safe side of the most likely wait, by
    /// the estimate's own uncertainty), within the range `low..=high`.
    Known {
        /// The value a page shows.
        shown: Duration,
        /// The short end of the likely range.
        low: Duration,
        /// The long end of the likely range.
        high: Duration,
    },
    /// The room is too young, or has let too few in, to know its pace yet.
    Estimating,
    /// Nobody was let in for five minutes: the line is not moving.
    Stalled,
    /// The room is paused: the line does not move until it resumes.
    Paused,
}

impl Eta {
    /// The value to show, if known.
    pub fn shown(&self) -> Option<Duration> {
        match *self {
            Eta::Known { shown, .. } => Some(shown),
            _ => None,
        }
    }

    /// The likely range, if known.
    pub fn range(&self) -> Option<(Duration, Duration)> {
        match *self {
            Eta::Known { low, high, .. } => Some((low, high)),
            _ => None,
        }
    }
}

/// How fast the line moved over a window of `window_ms` ending now, as the room has observed it:
/// the admissions counted (beyond the fills), their rate per second at the room's live capacity,
/// and the seconds the room ran (unpaused) in the window.
fn rate(admitted: u64, window_ms: u64, pace: &RoomPace) -> (f64, f64, f64) {
    let window_ms = window_ms.min(pace.observed_ms).max(1);
    // A pause within the window moved nobody by the line's own pace: its time is left out.
    let paused_ms = pace.last_pause_ms_ago.map_or(0, |(began, ended)| {
        began.min(window_ms).saturating_sub(ended.min(window_ms))
    });
    // Fills: slots that were empty and filled at once, not freed by anyone leaving. The room's
    // opening, if the window reaches back to it; a raised capacity, if raised within it.
    let mut fill = 0;
    if window_ms >= pace.observed_ms {
        fill += u64::from(pace.capacity.min(pace.capacity_before));
    }
    let changed = pace
        .capacity_changed_ms_ago
        .filter(|&ago| ago < window_ms && pace.capacity_before > 0);
    if changed.is_some() {
        fill += u64::from(pace.capacity.saturating_sub(pace.capacity_before));
    }
    // Slots freed during a pause are filled at once when it ends: a fill too.
    if pace
        .last_pause_ms_ago
        .is_some_and(|(_, ended)| ended < window_ms)
    {
        fill += u64::from(pace.capacity);
    }
    let events = admitted.saturating_sub(fill);
    // A window reaching back to the opening: nobody left until the shortest visits ended, which
    // says little about the pace once slots turn over; all of that time would understate the
    // pace, none of it overstate it (the first to leave are the quickest): a share counts.
    let opening_ms = match pace.first_move_ms_ago {
        Some(ago) if window_ms >= pace.observed_ms => {
            (pace.observed_ms.saturating_sub(ago) as f64 * (1.0 - OPENING_SHARE)) as u64
        }
        _ => 0,
    };
    let running_ms = window_ms.saturating_sub(paused_ms + opening_ms).max(1);
    let mut per_second = events as f64 / (running_ms as f64 / 1000.0);
    if let Some(ago) = changed {
        // Little's law: with visits as long as before, slots free up in proportion to the
        // capacity. The part of the window before the change ran at the old capacity.
        let ratio = f64::from(pace.capacity) / f64::from(pace.capacity_before);
        let before = (window_ms - ago) as f64 / window_ms as f64;
        per_second *= ratio / (before + (1.0 - before) * ratio);
    }
    (events as f64, per_second, running_ms as f64 / 1000.0)
}

/// The wait of the waiter described by `input`; see the [module docs](self).
///
/// ```
/// use std::time::Duration;
/// use tower_waiting_room::eta::{estimate, Eta, EtaInput};
/// use tower_waiting_room::store::RoomPace;
///
/// // A room 10 minutes old letting 60 in a minute, 100 in line ahead of this waiter.
/// let pace = RoomPace::new(0, 0, 600_000, 10).with_line([60; 5], 0);
/// let eta = estimate(&EtaInput::new(101, 150, pace, false));
/// let shown = eta.shown().unwrap();
/// assert!(shown >= Duration::from_secs(100) && shown < Duration::from_secs(130), "{eta:?}");
/// let (low, high) = eta.range().unwrap();
/// assert!(low <= shown && shown <= high);
/// // A room three seconds old does not know its pace yet; a paused one says so.
/// let young = RoomPace::new(3, 3_000, 3_000, 10);
/// assert_eq!(estimate(&EtaInput::new(101, 150, young, false)), Eta::Estimating);
/// assert_eq!(estimate(&EtaInput::new(101, 150, pace, true)), Eta::Paused);
/// ```
pub fn estimate(input: &EtaInput) -> Eta {
    let eta = estimate_once(input);
    // The minutes of give-ups (a burst set aside) only ever lengthen a wait: fewer give-ups
    // forecast is a longer likely wait, but also a smaller term of the margin for them, which
    // could take back more than it added. The longer of the two, bound by bound.
    match input.give_ups_lately {
        Some(minutes) if minutes.steady_share() < 1.0 => {
            let without = estimate_once(&EtaInput {
                give_ups_lately: None,
                ..*input
            });
            match (eta, without) {
                (
                    Eta::Known { shown, low, high },
                    Eta::Known {
                        shown: s,
                        low: l,
                        high: h,
                    },
                ) => Eta::Known {
                    shown: shown.max(s),
                    low: low.max(l),
                    high: high.max(h),
                },
                _ => eta,
            }
        }
        _ => eta,
    }
}

/// [`estimate`], with the forecast of give-ups as `input` says.
fn estimate_once(input: &EtaInput) -> Eta {
    if input.paused {
        return Eta::Paused;
    }
    let pace = &input.pace;
    // The rate over the last k minutes (and the current bucket), for k = 1..=5.
    let window = |k: usize| {
        let admitted = pace.minutes[..k].iter().sum::<u64>() + pace.current;
        let window_ms = k as u64 * MINUTE_MS + pace.into_bucket_ms;
        rate(admitted, window_ms, pace)
    };
    let (slow_n, _, _) = window(PACE_MINUTES);
    if pace.observed_ms < MIN_OBSERVED_MS || slow_n < MIN_EVENTS {
        return if pace.observed_ms >= PACE_MINUTES as u64 * MINUTE_MS {
            Eta::Stalled
        } else {
            Eta::Estimating
        };
    }
    // The longest window whose older part moved at the pace of the last two minutes, within the
    // noise of counting: the most precise rate that still follows a change (the windows reaching
    // back before it are set aside). Two rates from `n` admissions over `t` seconds differ by
    // noise alone with a standard deviation of `sqrt(n_a / t_a² + n_b / t_b²)`.
    let recent = window(2);
    let (n, per_second) = (3..=PACE_MINUTES)
        .rev()
        .map(window)
        .find(|&(n, per_second, secs)| {
            let (older_n, older_secs) = (n - recent.0, secs - recent.2);
            if older_secs < 1.0 {
                return true; // the room is younger than the window: nothing older
            }
            let older_rate = (per_second * secs - recent.1 * recent.2) / older_secs;
            if refilled_quiet(pace, recent) {
                return true; // not moved since a fill, as the opening was not: no change seen
            }
            let noise = (older_n.max(1.0) / older_secs.powi(2)
                + recent.0.max(1.0) / recent.2.powi(2))
            .sqrt();
            (older_rate - recent.1).abs() <= CHANGE_Z * noise
        })
        .map_or((recent.0, recent.1), |(n, per_second, _)| (n, per_second));
    // The last minute's, when slower: a slowdown is followed at once, noise or not (erring long
    // is the lesser harm: a visitor let in early is pleased, one kept past the promise is not).
    let (fast_n, fast_rate, _) = window(1);
    let (n, per_second) = if fast_n >= MIN_EVENTS && fast_rate < per_second {
        (fast_n, fast_rate)
    } else {
        (n, per_second)
    };
    // No faster than the operators' admission rate, from the moment they set it: a pace
    // measured before it was lowered is no promise.
    let per_second = match pace.admission_rate {
        Some(limit) => per_second.min(f64::from(limit)),
        None => per_second,
    };
    if per_second <= 0.0 {
        return Eta::Stalled;
    }
    // Waiters ahead who gave up are skipped at their turn and take none of the line's time.
    // How many: at least those silent now, and as many as the share of turns skipped lately
    // says. Those silent now as counted where they stand, when the snapshot says (`placement`
    // is then that count's own error); else the room's count, placed by a guess (nearer the
    // front), whose error is the gap to the other placement (anywhere in line: after a wave of
    // quitters), taken as one standard deviation: nothing tells the two apart until their
    // turns come.
    let position = input.position.max(1);
    let before_me = (position - 1) as f64;
    let (silent_ahead, placement) = match input.silent_ahead {
        Some((silent, error)) => ((silent as f64).min(before_me), error as f64),
        None => {
            let guess = silent_ahead(pace.silent, input.waiting, before_me);
            let silent = pace.silent.min(input.waiting) as f64;
            let anywhere = silent * (before_me / input.waiting.max(1) as f64).min(1.0);
            (guess, guess - anywhere)
        }
    };
    // (The last minute's share once it has seen enough turns: it follows a change.)
    let share = |skipped: u64, admitted: u64| match skipped + admitted {
        0 => 0.0,
        turns => skipped as f64 / turns as f64,
    };
    let recent = (
        pace.skipped.last_minute + pace.current_skipped,
        pace.minutes[0] + pace.current,
    );
    let skip_share = if recent.0 + recent.1 >= MIN_SKIP_TURNS {
        share(recent.0, recent.1)
    } else {
        share(
            pace.skipped.last_five_minutes + pace.current_skipped,
            pace.minutes.iter().sum::<u64>() + pace.current,
        )
    };
    let by_share = silent_ahead.max(skip_share * before_me);
    // Beyond those silent now, no more than the minutes since a burst of quitters say: the
    // burst itself is no rate (`steady_share`).
    let by_share = silent_ahead + steady_share(input) * (by_share - silent_ahead);
    // And as many as the rate of giving up says will go before their turn (the share of turns
    // skipped lags it while the line's first waiters are still to reach the front).
    let (future, seen) = future_give_ups(input, before_me - silent_ahead, per_second);
    let by_patience = silent_ahead + future;
    // The two forecasts err in opposite places: the share is late to see give-ups at the
    // opening; a constant patience overstates them once the impatient have left and the line
    // drains. Their mean is steadier than either (and than the larger, which was too short one
    // time in eight in the simulation's give-up scenario).
    let ahead = (position as f64 - 0.5 * (by_share + by_patience)).max(1.0);
    let likely = (ahead + drain_gap(pace)) / per_second;
    // Relative uncertainty of the rate: as measured on the room's own minutes when it has them
    // (else the counting noise of `n` admissions), never below `MIN_RATE_ERROR`; and of the
    // wait itself, the sum of `ahead` gaps between admissions, as dispersed as measured.
    let (rate_error, dispersion) = measured_error(pace).unwrap_or((1.0 / n.sqrt(), 1.0));
    let rate_error = rate_error.max(MIN_RATE_ERROR);
    // And of who gives up: each of those before me stays or not (a chance of `stays`, as
    // forecast), and the rate of giving up is itself measured on `seen` give-ups.
    let stays = (ahead - 1.0).max(0.0) / before_me.max(1.0);
    // Where the silent stand (`placement`, above), and the two forecasts of who will give up,
    // which disagree by as much as they err: half their gap is one more standard deviation.
    // Both are nought when nobody gives up, and then the margin is as it was.
    let disagreement = 0.5 * (by_share - by_patience);
    let gone_variance = before_me * stays * (1.0 - stays)
        + if seen > 0.0 {
            future * future / seen
        } else {
            0.0
        }
        + placement * placement
        + disagreement * disagreement;
    let spread =
        (rate_error * rate_error + dispersion / ahead + gone_variance / (ahead * ahead)).sqrt();
    let secs = |x: f64| Duration::from_secs(x.clamp(0.0, MAX_SECS).ceil() as u64);
    Eta::Known {
        shown: secs(likely * (1.0 + MARGIN_Z * spread)),
        low: secs(likely * (1.0 - spread).max(0.25)),
        high: secs(likely * (1.0 + 2.0 * spread)),
    }
}

/// Whether the `recent` window (events, rate, running seconds) let nobody in beyond a fill for
/// no longer than twice the time the room's opening took to move: after a fill (a pause's
/// end: every slot freed during it filled at once) nobody leaves until the shortest visits
/// end, as at the opening, and that quiet says nothing of the pace (visits vary, so up to twice
/// the opening's).
fn refilled_quiet(pace: &RoomPace, (events, _, running_secs): (f64, f64, f64)) -> bool {
    let refilled = pace
        .last_pause_ms_ago
        .is_some_and(|(_, ended)| ended as f64 <= running_secs * 1000.0 + 1.0);
    let opening_s = pace
        .first_move_ms_ago
        .map(|ago| pace.observed_ms.saturating_sub(ago) as f64 / 1000.0);
    refilled && events < 1.0 && opening_s.is_some_and(|quiet| running_secs <= 2.0 * quiet)
}

/// The wait a capacity cut below the people inside adds before anyone moves, in turns of the
/// line at the new capacity: nobody is let in until `inside - capacity` of them have left, and
/// they leave `inside / capacity` times as fast as the line then moves (visits as long as
/// before; Little's law again), so the gap is `(inside - capacity) * capacity / inside` turns.
/// None when the store does not say how many are inside, or they are within the capacity.
fn drain_gap(pace: &RoomPace) -> f64 {
    let capacity = f64::from(pace.capacity.max(1));
    match pace.inside {
        Some(inside) if inside as f64 > capacity => {
            let inside = inside as f64;
            (inside - capacity) * capacity / inside
        }
        _ => 0.0,
    }
}

/// How many of the `before_me` waiters ahead are silent now: the room knows how many of its
/// `waiting` are, not where. Silent waiters stay in line until their turn, so they gather at its
/// front (those who have waited longest had the longest to give up): each waiter's chance of
/// being silent is taken in proportion to how far from the back they are, which waited longer.
fn silent_ahead(silent: u64, waiting: u64, before_me: f64) -> f64 {
    if waiting == 0 {
        return 0.0;
    }
    let line = waiting as f64;
    let ahead = before_me.min(line);
    // Weights line, line - 1, ..., 1 from the front: the first `ahead` of them over all.
    let share = ahead * (2.0 * line - ahead + 1.0) / (line * (line + 1.0));
    silent.min(waiting) as f64 * share
}

/// How many of the `live` waiters ahead (not silent now) will give up before their turn and be
/// skipped at it, and the number of give-ups that forecast rests on. With the patience of
/// queueing theory's model of abandonment (Erlang-A: each waiter gives up at a constant rate
/// `h`, measured as the give-ups seen, silent now or skipped lately, over the time waited by
/// those still polling), the one `d` places ahead has its turn in `t = d / rate` seconds and is
/// skipped if silent for `queue_ttl` by then: if they gave up in the next `t - queue_ttl`
/// seconds, or in the last `queue_ttl` (gone already, not silent long enough to be seen), a
/// span of `t` in all.
fn future_give_ups(input: &EtaInput, live: f64, rate: f64) -> (f64, f64) {
    let pace = &input.pace;
    let ttl = pace.silent_after_ms as f64 / 1000.0;
    let window = pace.observed_ms.min(PACE_MINUTES as u64 * MINUTE_MS) as f64 / 1000.0;
    let skipped = (pace.skipped.last_five_minutes + pace.current_skipped) as f64;
    let seen = pace.silent as f64 + skipped;
    // Only those still polling can give up: the silent have already.
    let polling = input.waiting.saturating_sub(pace.silent).max(1) as f64;
    let exposure = polling * (window - ttl);
    let n = live.floor();
    if n < 1.0 || seen <= 0.0 || exposure <= 0.0 || rate <= 0.0 {
        return (0.0, 0.0);
    }
    let h = seen / exposure * steady_share(input);
    if h <= 0.0 {
        return (0.0, seen);
    }
    // Sum over d = 1 ..= n of 1 - exp(-a d), a = h / rate.
    let q = (-h / rate).exp();
    (n - q * (1.0 - q.powf(n)) / (1.0 - q), seen)
}

fn steady_share(input: &EtaInput) -> f64 {
    input.give_ups_lately.map_or(1.0, |m| m.steady_share())
}

/// The error of the room's pace as a forecast, measured on its own complete minutes (those it
/// ran through undisturbed: no fill, no pause; scaled to today's capacity): each minute as
/// forecast by the (up to two) minutes before it. Answers the relative error of a rate (the
/// forecasts' mean error when the pace has been falling, plus their spread: the waves of a room
/// whose visitors came in together do not average out over a few minutes) and the dispersion
/// of admissions (variance over mean; 1 for a Poisson pace). `None` with fewer than three
/// such minutes.
fn measured_error(pace: &RoomPace) -> Option<(f64, f64)> {
    let mut counts = [0.0; PACE_MINUTES];
    let mut k = 0;
    for (back, &n) in pace.minutes.iter().enumerate() {
        let newest = pace.into_bucket_ms + back as u64 * MINUTE_MS;
        let oldest = newest + MINUTE_MS;
        if oldest > pace.observed_ms {
            break; // before the room was born, or its opening fill
        }
        let paused = pace
            .last_pause_ms_ago
            .is_some_and(|(began, ended)| began > newest && ended < oldest);
        let mut n = n as f64;
        if let Some(ago) = pace.capacity_changed_ms_ago {
            if newest <= ago && ago < oldest {
                continue; // a capacity change's fill
            }
            if ago < newest && pace.capacity_before > 0 {
                n *= f64::from(pace.capacity) / f64::from(pace.capacity_before);
            }
        }
        if !paused {
            counts[k] = n;
            k += 1;
        }
    }
    let counts = &counts[..k];
    let errors: Vec<f64> = (0..k.saturating_sub(1))
        .filter_map(|j| {
            let before = &counts[j + 1..(j + 3).min(k)];
            let forecast = before.iter().sum::<f64>() / before.len() as f64;
            (forecast > 0.0).then(|| (forecast - counts[j]) / forecast)
        })
        .collect();
    if errors.len() < 2 {
        return None;
    }
    let m = errors.len() as f64;
    let bias = errors.iter().sum::<f64>() / m;
    let variance = (errors.iter().map(|e| e * e).sum::<f64>() / m - bias * bias).max(0.0);
    let mean = counts.iter().sum::<f64>() / k as f64;
    // A forecast from two minutes errs by 1.5 times one minute's own variance.
    let dispersion = (variance * mean / 1.5).clamp(MIN_DISPERSION, MAX_DISPERSION);
    Some((bias.max(0.0) + variance.sqrt(), dispersion))
}

#[cfg(test)]
mod tests;
