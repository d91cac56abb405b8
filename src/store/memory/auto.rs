//! The controller's record of a room ([`AutoStore`](crate::store::AutoStore)): the lease, the
//! window the gateways' reports add into, the capacity it last wrote. The same rules as
//! `src/store/redis/script/auto.lua`; the rules themselves are in `src/store/auto.rs`.

use super::{operator, RoomState};
use crate::auto::Window;
use crate::config::RoomPolicy;
use crate::store::{AutoApplied, AutoOff, AutoReport, GatewayId, SettingsChange};

/// One room's controller record (the script's `auto` hash).
#[derive(Debug, Default)]
pub(super) struct Record {
    off: Option<AutoOff>,
    /// The lease: its holder and when it ends.
    lease: Option<(GatewayId, u64)>,
    /// When the window began; `None` before the first report after a hand-over.
    since: Option<u64>,
    /// The window's counts so far (its times are `since` and the hand-over's).
    counts: Window,
    /// The capacity the controller last wrote; `None`: any capacity is accepted next.
    cap: Option<u32>,
    status: Option<String>,
    /// Terms an operator set while the room runs.
    terms: Option<String>,
}

/// A gateway's report: its counts added, the lease taken or renewed, the window handed over.
pub(super) fn report(
    record: &mut Record,
    gateway: GatewayId,
    counts: &Window,
    window_ms: u64,
    lease_ms: u64,
    now: u64,
) -> AutoReport {
    // A lease that ends further ahead than a lease lasts was taken on a clock since gone back.
    let holder = record
        .lease
        .filter(|&(_, until)| now < until && until <= now.saturating_add(lease_ms))
        .map(|(holder, _)| holder);
    let deciding = holder.is_none_or(|holder| holder == gateway);
    if deciding {
        record.lease = Some((gateway, now.saturating_add(lease_ms)));
    }
    // A window that begins in the future began on a clock since gone back: it begins now.
    let since = record.since.map_or(now, |since| since.min(now));
    record.since = Some(since);
    add(&mut record.counts, counts);
    let window = (deciding && now - since >= window_ms).then(|| {
        record.since = Some(now);
        let mut window = std::mem::take(&mut record.counts);
        (window.start_ms, window.end_ms) = (since, now);
        window
    });
    AutoReport::new(record.off, deciding, window, record.status.clone())
        .with_terms(record.terms.clone())
}

/// The counts of a report added to the window's: what a store keeps of a [`Window`].
fn add(window: &mut Window, counts: &Window) {
    window.ok = window.ok.saturating_add(counts.ok);
    window.errors = window.errors.saturating_add(counts.errors);
    window.timeouts = window.timeouts.saturating_add(counts.timeouts);
    window.latencies.merge(&counts.latencies);
    window.load = window.load.max(counts.load.filter(|&load| load <= 100));
}

/// The decider's capacity, written as [`configure`](operator::configure) writes one, if it
/// still decides and nobody changed the capacity since it last wrote.
pub(super) fn apply(
    room: &mut RoomState,
    policy: &RoomPolicy,
    gateway: GatewayId,
    (capacity, rate): (u32, Option<u32>),
    status: &str,
    now: u64,
) -> AutoApplied {
    let before = room.live().capacity;
    let record = &mut room.auto;
    if let Some(off) = record.off {
        return AutoApplied::Off(off);
    }
    if !record
        .lease
        .is_some_and(|(holder, until)| holder == gateway && now < until)
    {
        return AutoApplied::NotDeciding;
    }
    if record.cap.is_some_and(|cap| cap != before) {
        record.off = Some(AutoOff::ChangedElsewhere);
        return AutoApplied::ChangedElsewhere;
    }
    record.cap = Some(capacity);
    record.status = Some(status.to_owned());
    let mut change = SettingsChange::new();
    if capacity != before {
        change = change.capacity(capacity);
    }
    if let Some(rate) = rate.filter(|&r| room.live().admission_rate != Some(r)) {
        change = change.admission_rate(Some(rate));
    }
    if !change.is_empty() {
        operator::configure(room, policy, change, now);
    }
    AutoApplied::Applied { before }
}

/// The controller on (from whatever capacity the room has) or off, for every gateway.
pub(super) fn switch(record: &mut Record, off: Option<AutoOff>, terms: Option<&str>) {
    if let Some(terms) = terms {
        record.terms = Some(terms.to_owned());
    }
    record.off = off;
    if off.is_none() {
        record.cap = None;
    }
}
