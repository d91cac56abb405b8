//! The invariants, checked on the whole recorded history once the run is over
//! (`docs/reliability.md` says what each means and why it is sound), and their violations.

use std::collections::{BTreeMap, HashMap};

use tower_waiting_room::{AdmittedBy, SessionId};

use super::gateways::Seen;
use super::tools::rel;
use super::visitors::{Episode, Story};
use super::windows::{loss_windows, maybe_lost, rebuild_windows, Window};
use super::{FAIL_OPEN_GRACE_MS, LAPSE_MS, STORE_TIMEOUT};

/// When a reported position was true, as far as the harness can know. A gateway's answer from
/// its snapshot: at the snapshot's time (its `waiting-room-position-as-of`, by the store's clock,
/// which is this machine's). The store's own answer: at some moment between the request's
/// sending and its answer, when the script ran; the harness cannot see which. Right after an
/// outage the line moves by several places in tens of milliseconds, so a snapshot taken while a
/// store call was under way may show the line of just before that call ran: the two are then in
/// no known order, and neither says the place went back.
#[derive(Clone, Copy, Debug)]
struct Moment {
    from: u64,
    to: u64,
}

impl Moment {
    fn of(sent: u64, received: u64, as_of: Option<u64>) -> Self {
        match as_of {
            Some(t) => Moment { from: t, to: t },
            None => Moment {
                from: sent,
                to: received,
            },
        }
    }

    /// Whether this moment is surely not before `other`.
    fn not_before(self, other: Moment) -> bool {
        self.from >= other.to
    }
}

/// Violations, by kind.
#[derive(Default)]
pub(super) struct Violations(pub(super) BTreeMap<&'static str, Vec<String>>);

impl Violations {
    pub(super) fn add(&mut self, kind: &'static str, what: String) {
        self.0.entry(kind).or_default().push(what);
    }

    pub(super) fn count(&self, kind: &str) -> usize {
        self.0.get(kind).map_or(0, Vec::len)
    }

    pub(super) fn total(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }
}

pub(super) const V_CAPACITY: &str = "capacity";
const V_ONCE: &str = "admitted-twice";
const V_FIFO: &str = "fifo";
const V_PLACE: &str = "place-lost";
pub(super) const V_LIVENESS: &str = "liveness";
pub(super) const V_5XX: &str = "5xx";
const V_FAIL_OPEN: &str = "fail-open";
pub(super) const V_BREAKER: &str = "breaker";
pub(super) const V_VISITOR: &str = "unexpected-answer";
pub(super) const V_THIN: &str = "thin-run";
pub(super) const KINDS: [&str; 10] = [
    V_CAPACITY,
    V_ONCE,
    V_FIFO,
    V_PLACE,
    V_LIVENESS,
    V_5XX,
    V_FAIL_OPEN,
    V_BREAKER,
    V_VISITOR,
    V_THIN,
];

/// Never more than `capacity` inside: each store admission (`AdmittedBy::Store`, a new slot or
/// an extension) holds its session inside from when the app saw it until the expiry it carries,
/// cut short by the first `POST leave` of that visitor and by the deletion of a key that holds
/// slots (the store forgot them; later token requests of those sessions are counted as ghosts),
/// or of the settings key during a rebuild of the slots (`Window::frees_slots`). A damaged
/// `active` or `granted` cuts nothing short: the store rebuilds the slots. Fast-path (`Token`) requests carry the expiry of the store admission that issued the token,
/// so they add nothing. A store admission seen while a write may be lost in a failover
/// (`loss_windows`) is not counted: the new primary may never have heard of that slot (the
/// session's next heartbeat, a second later, counts it again if it was kept). Returns the most
/// inside at once, the ghost requests, and the admissions not counted for a failover.
pub(super) fn check_capacity(
    log: &[Seen],
    stories: &[Story],
    windows: &[Window],
    capacity: usize,
    v: &mut Violations,
) -> (usize, usize, usize) {
    let losses = loss_windows(windows);
    let mut uncounted = 0;
    let leave_at: HashMap<SessionId, u64> = stories
        .iter()
        .filter_map(|s| Some((s.session?, s.leave_sent?)))
        .collect();
    // When exactly `DEL` ran inside its window is not known: any time in it. A damaged `active`
    // or `granted` is no loss (`Window::frees_slots`): its slots are rebuilt, the room full
    // meanwhile, and every span counts in full.
    let rebuilds = rebuild_windows(windows);
    let slot_losses: Vec<(u64, u64)> = windows
        .iter()
        .filter(|w| w.frees_slots(&rebuilds))
        .map(|w| (w.start, w.end))
        .collect();
    let mut edges: Vec<(u64, i64, SessionId)> = Vec::new();
    let mut by_session: HashMap<SessionId, Vec<(u64, u64)>> = HashMap::new();
    for s in log.iter().filter(|s| s.by == AdmittedBy::Store) {
        if maybe_lost(
            &losses,
            s.at.saturating_sub(STORE_TIMEOUT.as_millis() as u64),
            s.at,
        ) {
            uncounted += 1;
            continue;
        }
        let mut end = s.expires_at_ms;
        if let Some(&l) = leave_at.get(&s.session) {
            end = end.min(l);
        }
        if let Some(&(from, _)) = slot_losses
            .iter()
            .find(|&&(from, to)| s.at <= to && from < end)
        {
            end = from.max(s.at);
        }
        if s.at < end {
            by_session.entry(s.session).or_default().push((s.at, end));
        }
    }
    let mut ghosts = 0;
    for s in log.iter().filter(|s| s.by == AdmittedBy::Token) {
        let counted = by_session
            .get(&s.session)
            .is_some_and(|spans| spans.iter().any(|&(a, e)| a <= s.at && s.at < e));
        if !counted {
            ghosts += 1;
        }
    }
    for (session, mut spans) in by_session {
        spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (a, e) in spans {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((a, e)),
            }
        }
        for (a, e) in merged {
            edges.push((a, 1, session));
            edges.push((e, -1, session));
        }
    }
    // Ends before starts at the same instant: a slot that expires at t is free at t.
    edges.sort_by_key(|&(t, d, _)| (t, d));
    let (mut inside, mut most) = (0i64, 0usize);
    let mut over_since: Option<u64> = None;
    for (t, d, _) in edges {
        inside += d;
        most = most.max(inside as usize);
        if inside as usize > capacity {
            if over_since.is_none() {
                over_since = Some(t);
                v.add(
                    V_CAPACITY,
                    format!("{inside} inside at {} (capacity {capacity})", rel(t)),
                );
            }
        } else {
            over_since = None;
        }
    }
    (most, ghosts, uncounted)
}

/// No place admitted twice, nobody admitted as someone else, nobody let in after leaving, and a
/// departed session is gone from the store, unless its `leave` was written while a write may
/// be lost in a failover (then the store may still hold it; counted, returned).
pub(super) fn check_once(
    log: &[Seen],
    stories: &[Story],
    windows: &[Window],
    v: &mut Violations,
) -> usize {
    let losses = loss_windows(windows);
    let mut leaves_lost = 0;
    let by_session: HashMap<SessionId, &Story> = stories
        .iter()
        .filter_map(|s| Some((s.session?, s)))
        .collect();
    for seen in log {
        match by_session.get(&seen.session) {
            None => v.add(V_ONCE, format!("a session of no visitor got in: {seen:?}")),
            Some(s) => {
                if let Some(left) = s.left.filter(|&l| seen.at > l) {
                    v.add(
                        V_ONCE,
                        format!(
                            "visitor {} let in {} ms after it left: {seen:?}",
                            s.id,
                            seen.at - left
                        ),
                    );
                }
            }
        }
    }
    for s in stories {
        let leave_maybe_lost = match (s.left_sent, s.left) {
            (Some(sent), Some(left)) => maybe_lost(&losses, sent, left),
            _ => false,
        };
        if let Some(state) = s.after_leave.as_deref().filter(|&st| st != "unknown") {
            if leave_maybe_lost {
                leaves_lost += 1;
            } else {
                v.add(
                    V_ONCE,
                    format!("visitor {}: still {state} in the store after leaving", s.id),
                );
            }
        }
        for p in s.problems.iter().filter(|p| p.contains("another session")) {
            v.add(V_ONCE, format!("visitor {}: {p}", s.id));
        }
    }
    leaves_lost
}

/// Whether an episode is held to the ordering checks: it kept polling (never `LAPSE_MS`
/// between check-ins), no key whose loss reorders the line was deleted (or damaged so that the
/// library deletes it: `Window::reorders`) while it waited, and its place was not written while
/// a write may be lost in a failover.
fn ordered(ep: &Episode, reorders: &[(u64, u64)], losses: &[(u64, u64)]) -> bool {
    let waited_until = ep.end().min(ep.last_touch_sent + LAPSE_MS);
    !lapsed(ep, losses)
        && ep.join_received != 0
        && !place_maybe_lost(ep, losses)
        && !reorders
            .iter()
            .any(|&(from, to)| ep.place_since <= to && from <= waited_until)
}

/// The episode may have lost its place for silence: two consecutive check-ins `LAPSE_MS` apart
/// (or a lapse after an ambiguous request, `Episode::lapsed`), counting only the check-ins that
/// no failover may have lost. A check-in the old primary answered and the new one never saw
/// leaves the waiter silent since the one before, as far as the store knows.
fn lapsed(ep: &Episode, losses: &[(u64, u64)]) -> bool {
    if ep.lapsed {
        return true;
    }
    let kept: Vec<&(u64, u64)> = ep
        .touches
        .iter()
        .filter(|&&(sent, received)| !maybe_lost(losses, sent, received))
        .collect();
    kept.windows(2)
        .any(|w| w[1].1.saturating_sub(w[0].0) >= LAPSE_MS)
}

/// The request that made the episode's place (its join, or for a visitor back from a silence,
/// the join of its first episode) may have been answered by a primary that a failover then
/// replaced before the write reached the replica: the place may be gone.
fn place_maybe_lost(ep: &Episode, losses: &[(u64, u64)]) -> bool {
    match ep.place_made {
        (_, 0) => true,
        (sent, received) => maybe_lost(losses, sent, received),
    }
}

/// First come, first served among waiters who kept polling. Episode `i` joined before `j` when
/// `i`'s joining request was answered before `j`'s was sent. If `j` was admitted (its `200`
/// received) before `i` sent a request that was still answered "waiting", the store let `j` in
/// while `i` was ahead of it in line: a violation. Only ordered episodes are compared, as `i`
/// and as `j`; an episode whose score was damaged (a `corrupt` of kind `score`) is held to no
/// place, so it is no `i`, but it is still a `j`. Also, an ordered waiter's place never goes
/// back (but by one for each member scored `-inf` added meanwhile), and the status endpoint
/// never says it has none. Returns the admissions checked, the returning waiters checked, and the
/// episodes left out because a failover may have lost their place or their slot.
pub(super) fn check_fifo(
    log: &[Seen],
    stories: &[Story],
    windows: &[Window],
    v: &mut Violations,
) -> (usize, usize, usize) {
    let losses = loss_windows(windows);
    // A visitor whose store admission may have been lost in a failover may still hold its
    // place in line (the new primary never saw it leave the line): the episode it then begins,
    // told its slot is gone, may be let in from that old place, so it is not used as `j`.
    let store_calls = STORE_TIMEOUT.as_millis() as u64;
    let mut lost_admissions: HashMap<SessionId, Vec<u64>> = HashMap::new();
    for s in log.iter().filter(|s| {
        s.by == AdmittedBy::Store && maybe_lost(&losses, s.at.saturating_sub(store_calls), s.at)
    }) {
        lost_admissions.entry(s.session).or_default().push(s.at);
    }
    let after_lost_admission: std::collections::HashSet<(usize, u64)> = stories
        .iter()
        .filter_map(|s| Some((lost_admissions.get(&s.session?)?, s)))
        .flat_map(|(lost, s)| {
            s.episodes.windows(2).filter_map(move |p| {
                lost.iter()
                    .any(|&t| p[0].join_sent <= t && t <= p[1].join_sent)
                    .then_some((p[1].visitor, p[1].join_sent))
            })
        })
        .collect();
    let exempt = stories
        .iter()
        .flat_map(|s| &s.episodes)
        .filter(|e| {
            e.join_received != 0 && place_maybe_lost(e, &losses)
                || after_lost_admission.contains(&(e.visitor, e.join_sent))
        })
        .count();
    let reorders: Vec<(u64, u64)> = windows
        .iter()
        .filter(|w| w.reorders())
        .map(|w| (w.start, w.end))
        .collect();
    // A waiter whose score was damaged goes to the back: from then on it is not held to its
    // place, nor anyone to waiting behind it (it is no `i`); it is still a `j`, never let in
    // ahead of those who joined before it. Nobody else is relaxed.
    let rescored: Vec<(SessionId, u64, u64)> = windows
        .iter()
        .filter_map(|w| Some((w.damage.as_ref()?.rescored?, w.start, w.end)))
        .collect();
    let rescored_in = |session: Option<SessionId>, from: u64, to: u64| {
        rescored
            .iter()
            .any(|&(s, start, end)| Some(s) == session && from <= end && start <= to)
    };
    let lost_place: std::collections::HashSet<(usize, u64)> = stories
        .iter()
        .flat_map(|s| s.episodes.iter().map(move |e| (s.session, e)))
        .filter(|(session, e)| {
            rescored_in(
                *session,
                e.place_since,
                e.end().min(e.last_touch_sent + LAPSE_MS),
            )
        })
        .map(|(_, e)| (e.visitor, e.join_sent))
        .collect();
    // A member scored `-inf` ranks ahead of everyone until it is moved or skipped: a place told
    // after it came may be one more than one told before.
    let aheads: Vec<(u64, u64)> = windows
        .iter()
        .filter(|w| w.damage.as_ref().is_some_and(|d| d.ahead))
        .map(|w| (w.start, w.end))
        .collect();
    let ahead_between = |earlier: Moment, later: Moment| -> u64 {
        aheads
            .iter()
            .filter(|&&(start, end)| earlier.from <= end && start <= later.to)
            .count() as u64
    };
    let ordered_eps: Vec<&Episode> = stories
        .iter()
        .flat_map(|s| &s.episodes)
        .filter(|e| ordered(e, &reorders, &losses))
        .collect();
    let eps: Vec<&Episode> = ordered_eps
        .iter()
        .copied()
        .filter(|e| !lost_place.contains(&(e.visitor, e.join_sent)))
        .collect();
    for e in &eps {
        for (i, w) in e.positions.windows(2).enumerate() {
            // A snapshot's answer is the store's word as of the snapshot's time: a failover
            // after it may undo what it says, as for an answer of the store's own.
            let said = e.positions_as_of[i].map_or(w[0].0, |t| t.min(w[0].0));
            let undone = maybe_lost(&losses, said, e.positions_received[i]);
            // A gateway's answer from its snapshot shows the position as of the snapshot's
            // time, within 1 % (docs/scale.md): the two answers are compared in the order of the
            // moments they describe (`Moment`), with that margin, when that order is known. The
            // store's answers are exact.
            let moment = |j: usize| {
                Moment::of(
                    w[j].0,
                    e.positions_received[i + j],
                    e.positions_as_of[i + j],
                )
            };
            let order = if moment(1).not_before(moment(0)) {
                Some((0, 1))
            } else if moment(0).not_before(moment(1)) {
                Some((1, 0))
            } else {
                None
            };
            let from_snapshot =
                e.positions_as_of[i].is_some() || e.positions_as_of[i + 1].is_some();
            let margin = if from_snapshot {
                w[0].1.max(w[1].1).div_ceil(100)
            } else {
                0
            };
            let went_back = order.is_some_and(|(earlier, later)| {
                w[later].1 > w[earlier].1 + margin + ahead_between(moment(earlier), moment(later))
            });
            if went_back && !undone {
                v.add(
                    V_PLACE,
                    format!(
                        "visitor {}: place went back from {} (asked at {}) to {} (asked at {}), \
                         joined at {}",
                        e.visitor,
                        w[0].1,
                        rel(w[0].0),
                        w[1].1,
                        rel(w[1].0),
                        rel(e.join_sent)
                    ),
                );
            }
        }
        // (The first answer after a silence is about the old place: judged below.)
        for &t in e
            .unknown_at
            .iter()
            .filter(|&&t| !(e.returned && t <= e.join_received))
        {
            v.add(
                V_PLACE,
                format!("visitor {}: status says no place at {}", e.visitor, rel(t)),
            );
        }
    }
    // i by when its join was answered; the latest "waiting" request of the earlier ones.
    let mut earlier: Vec<(u64, u64, usize)> = eps
        .iter()
        .filter_map(|e| Some((e.join_received, e.last_wait_sent?, e.visitor)))
        .collect();
    earlier.sort_unstable();
    let mut latest: Vec<(u64, usize)> = Vec::with_capacity(earlier.len());
    for &(_, wait, who) in &earlier {
        let prev = latest.last().copied().unwrap_or((0, usize::MAX));
        latest.push(if wait > prev.0 { (wait, who) } else { prev });
    }
    let mut returners = 0;
    // A waiter who went silent keeps its place until its turn: silent waiters are skipped when
    // their turn comes (README), not before. If a waiter who joined before it and kept polling
    // still waited after it came back, its turn had not come: it must find its place again
    // (the status endpoint knows it, and its place has not gone back).
    for st in stories {
        for pair in st.episodes.windows(2) {
            let (before, back) = (&pair[0], &pair[1]);
            let intact = before.stopped
                && back.returned
                && !lapsed(before, &losses)
                && before.join_received != 0
                && back.join_received != 0
                && !place_maybe_lost(before, &losses)
                && !reorders
                    .iter()
                    .any(|&(from, to)| before.place_since <= to && from <= back.join_received)
                && !rescored_in(st.session, before.place_since, back.join_received);
            let Some(&(was_sent, was)) = before.positions.last() else {
                continue;
            };
            let was_received = before
                .positions_received
                .last()
                .copied()
                .unwrap_or(u64::MAX);
            if maybe_lost(&losses, was_sent, was_received) {
                continue;
            }
            if !intact {
                continue;
            }
            let first_position = back.positions.first().copied();
            // Either answer may come from a gateway's snapshot: within 1 % (docs/scale.md), and
            // as of the snapshot's time. As within an episode (above), the two are compared in
            // the order of the moments they describe: an answer after the silence from an older
            // snapshot (another gateway's, during an outage) may show the longer line of before.
            let was_as_of = before.positions_as_of.last().copied().flatten();
            let back_as_of = back.positions_as_of.first().copied().flatten();
            let from_snapshot = was_as_of.is_some() || back_as_of.is_some();
            let margin = |now: u64| {
                if from_snapshot {
                    now.max(was).div_ceil(100)
                } else {
                    0
                }
            };
            let was_moment = Moment::of(was_sent, was_received, was_as_of);
            let back_received = back.positions_received.first().copied().unwrap_or(u64::MAX);
            let went_back = |(t, now): (u64, u64)| {
                let back_moment = Moment::of(t, back_received, back_as_of);
                back_moment.not_before(was_moment)
                    && now > was + margin(now) + ahead_between(was_moment, back_moment)
            };
            let lost = match (back.unknown_at.first(), first_position) {
                (Some(&u), Some((t, _))) if u < t => Some("no place".to_owned()),
                (Some(_), None) => Some("no place".to_owned()),
                (_, Some(p)) if went_back(p) => Some(format!("place {}", p.1)),
                _ => None,
            };
            let n = earlier.partition_point(|&(joined, _, _)| joined < before.place_since);
            let ahead_waits = n > 0 && latest[n - 1].0 > back.join_received;
            returners += usize::from(ahead_waits);
            if let (Some(lost), true) = (lost, ahead_waits) {
                let (wait, i) = latest[n - 1];
                if i != st.id {
                    v.add(
                        V_PLACE,
                        format!(
                            "visitor {}: silent from {} to {}, came back to {lost} (was {was}), \
                             while visitor {i}, ahead of it, still waited at {}",
                            st.id,
                            rel(before.last_touch_sent),
                            rel(back.join_sent),
                            rel(wait)
                        ),
                    );
                }
            }
        }
    }
    let mut checked = 0;
    for j in ordered_eps.iter().filter(|e| {
        e.admitted.is_some()
            && !e.returned
            && !e.with_token
            && !after_lost_admission.contains(&(e.visitor, e.join_sent))
    }) {
        let admitted = j.end();
        let n = earlier.partition_point(|&(joined, _, _)| joined < j.join_sent);
        if n == 0 {
            continue;
        }
        checked += 1;
        let (wait, i) = latest[n - 1];
        if wait > admitted && i != j.visitor {
            // Let in for a damaged score: say so.
            let session = stories.get(j.visitor).and_then(|s| s.session);
            let damaged: Vec<String> = windows
                .iter()
                .filter(|w| {
                    w.start <= admitted
                        && w.damage
                            .as_ref()
                            .is_some_and(|d| d.rescored.is_some() && d.rescored == session)
                })
                .map(|w| format!(" (its score damaged at {})", rel(w.start)))
                .collect();
            v.add(
                V_FIFO,
                format!(
                    "visitor {} (joined at {}) got in at {}{}, but visitor {i}, who joined \
                     earlier, was still told \"waiting\" for a request sent {} ms later",
                    j.visitor,
                    rel(j.join_sent),
                    rel(admitted),
                    damaged.concat(),
                    wait - admitted
                ),
            );
        }
    }
    (checked, returners, exempt)
}

/// Fail-open admissions only while the store is away during the fail-open phase.
pub(super) fn check_fail_open(
    log: &[Seen],
    windows: &[Window],
    open: (u64, u64),
    v: &mut Violations,
) -> usize {
    let mut n = 0;
    for s in log.iter().filter(|s| s.by == AdmittedBy::FailOpen) {
        n += 1;
        let in_phase = open.0 <= s.at && s.at <= open.1 + FAIL_OPEN_GRACE_MS;
        let away = windows
            .iter()
            .any(|w| w.fault.store_away() && w.start <= s.at && s.at <= w.end + FAIL_OPEN_GRACE_MS);
        if !(in_phase && away) {
            v.add(
                V_FAIL_OPEN,
                format!(
                    "fail-open admission outside a fail-open window at {} (gateway {})",
                    rel(s.at),
                    s.gateway
                ),
            );
        }
    }
    n
}
