//! Store v2's part of the suite: [`SnapshotStore::sync`](crate::store::SnapshotStore::sync),
//! the snapshot a gateway answers waiting polls from ([`RoomSnapshot`]), the place a waiting
//! answer carries ([`Place`]), and liveness to the epoch ([`LivenessRule`]). The cases of
//! snapshots run on a store that keeps them ([`Harness::snapshots`]), and are skipped on one
//! that does not (the turn's part of the liveness case runs on every store).

use std::time::Duration;

use super::{
    admitted, waiting, Harness, ABANDON_AFTER, ABANDON_MS, GRANT_TTL, QUEUE_MS, QUEUE_TTL,
};
use crate::store::snapshot::{
    checkpoint_ranks, draw_score, Checkpoint, LivenessRule, Place, RoomSnapshot,
    CHECKPOINT_GAP_DIVISOR, EXACT_RANKS,
};
use crate::store::{Decision, SeenWaiters, SettingsChange};
use crate::testing::case::Rng;
use crate::{RoomPolicy, SessionId};

/// The position and the place of a `Waiting`, or a panic naming `what`.
#[track_caller]
fn place_of(d: Decision, what: &str) -> (u64, Place) {
    match d {
        Decision::Waiting {
            position,
            place: Some(place),
            ..
        } => (position, place),
        other => panic!("{what}: expected Waiting with a place, got {other:?}"),
    }
}

/// The sequence number of a `Waiting`, or a panic naming `what`.
#[track_caller]
fn seq_of(d: Decision, what: &str) -> (u64, u64) {
    match place_of(d, what) {
        (position, Place::Seq(seq)) => (position, seq),
        other => panic!("{what}: expected a sequence number, got {other:?}"),
    }
}

/// Enters `n` newcomers into `p`'s line (which must be held shut by a slot holder), checking
/// each one's position and that sequence numbers increase by arrival; returns them with their
/// sequence numbers, in order.
async fn line_with_places(h: &Harness, p: &RoomPolicy, n: u64) -> Vec<(SessionId, u64)> {
    let before = h.stats(p).await.waiting;
    let mut out: Vec<(SessionId, u64)> = Vec::new();
    for i in 1..=n {
        let s = SessionId::random();
        let (position, seq) = seq_of(h.enter(p, s).await, "a newcomer");
        assert_eq!(position, before + i, "newcomer #{i}'s position");
        if let Some(&(_, last)) = out.last() {
            assert!(
                seq > last,
                "sequence numbers increase by arrival: {last} then {seq}"
            );
        }
        out.push((s, seq));
    }
    out
}

/// The line's scores by exact rank (0-based), built from the positions the store answers to
/// each of `kept` (who must be in line, in this order), checking their places did not change.
async fn exact_ranks(h: &Harness, p: &RoomPolicy, kept: &[(SessionId, u64)]) -> Vec<f64> {
    let mut by_rank = vec![f64::NAN; kept.len()];
    for &(s, seq) in kept {
        let (position, place) = place_of(h.poll(p, s).await, "a waiter");
        assert_eq!(place, Place::Seq(seq), "a waiter's place never changes");
        let rank = usize::try_from(position - 1).expect("a small line");
        assert!(rank < kept.len(), "position {position} of {}", kept.len());
        by_rank[rank] = seq as f64;
    }
    assert!(
        by_rank.iter().all(|score| !score.is_nan()),
        "two waiters were told the same position"
    );
    by_rank
}

/// Asserts the snapshot's line: its length, head and checkpoints, against the exact ranks.
#[track_caller]
fn check_line(snap: &RoomSnapshot, by_rank: &[f64], what: &str) {
    assert_eq!(snap.waiting, by_rank.len() as u64, "{what}: waiting");
    assert_eq!(snap.head, by_rank.first().copied(), "{what}: head");
    let want: Vec<(f64, u64)> = checkpoint_ranks(by_rank.len() as u64)
        .map(|rank| (by_rank[rank as usize], rank))
        .collect();
    let got: Vec<(f64, u64)> = snap
        .checkpoints
        .iter()
        .map(|&Checkpoint { score, rank, .. }| (score, rank))
        .collect();
    assert_eq!(got, want, "{what}: checkpoints");
}

/// Each checkpoint of a snapshot says whether its waiter is silent by the turn's liveness rule
/// ([`Checkpoint::silent`]): one who stopped polling for longer than queue_ttl (5/4 of it, to
/// the epoch) is; one who kept checking in (by a poll or a gateway's sync), one who came back
/// and a newcomer are not. Every store marks the same waiters, so the wait estimate counts the
/// same silent waiters ahead of anyone whichever store the room is on. A line longer than its
/// checkpoints (past twice [`EXACT_RANKS`]), so that they are a sample of it.
pub async fn sync_snapshot_says_which_checkpoint_waiters_are_silent(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let p = h.policy(1);
    let holder = h.enter_admitted(&p).await;
    let n = 2 * EXACT_RANKS + 50;
    let line = h.enter_waiters(&p, n).await;
    let snap = h.sync(&p, Vec::new()).await;
    assert!(
        snap.checkpoints.len() < line.len() && snap.checkpoints.iter().all(|c| !c.silent),
        "a sample of the line, nobody silent yet: {:?}",
        snap.checkpoints
    );
    // Every third from the second on goes silent; the others check in through a gateway's
    // sync, but the first, who polls, past queue_ttl (and a second more, for the rounding).
    let silent = |rank: usize| rank % 3 == 1;
    let synced: Vec<SessionId> = (1..line.len())
        .filter(|&r| !silent(r))
        .map(|r| line[r])
        .collect();
    for _ in 0..4 {
        h.advance_ms(QUEUE_MS / 3 + 300);
        admitted(h.heartbeat(&p, holder).await, "the holder stays");
        h.poll(&p, line[0]).await;
        h.sync(&p, synced.clone()).await;
    }
    let newcomer = h.enter_waiters(&p, 1).await[0];
    let marks = |snap: &RoomSnapshot| -> Vec<(u64, bool)> {
        snap.checkpoints
            .iter()
            .map(|c| (c.rank, c.silent))
            .collect()
    };
    let want = |back: Option<usize>| -> Vec<(u64, bool)> {
        checkpoint_ranks(n + 1)
            .map(|rank| {
                let r = rank as usize;
                (rank, r < line.len() && silent(r) && back != Some(r))
            })
            .collect()
    };
    let snap = h.sync(&p, Vec::new()).await;
    assert_eq!(snap.waiting, n + 1);
    assert_eq!(marks(&snap), want(None), "the silent checkpoint waiters");
    assert!(
        snap.pace.silent > 0,
        "the pace counts silent waiters too: {:?}",
        snap.pace
    );
    // One of them comes back: no longer silent. The newcomer never was.
    h.poll(&p, line[4]).await;
    let snap = h.sync(&p, Vec::new()).await;
    assert_eq!(marks(&snap), want(Some(4)), "the one back is not silent");
    let last = snap.checkpoints.last().expect("a line");
    assert_eq!(
        (last.rank, last.silent),
        (n, false),
        "the newcomer {newcomer:?}"
    );
}

/// `sync` checks in only the sessions of its `seen` list that have a place in line: it makes
/// nothing for a stranger, a slot holder or someone who left (no place, no count), and answers
/// the line as it stands.
pub async fn sync_checks_in_only_waiters_with_a_place(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let p = h.policy(1);
    let holder = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    assert!(h.release(&p, line[1]).await);
    let stranger = SessionId::random();
    let before = h.stats(&p).await;
    let snap = h
        .sync(
            &p,
            vec![stranger, holder, line[1], line[0], stranger, line[2]],
        )
        .await;
    assert_eq!(snap.waiting, 2, "{snap:?}");
    assert_eq!(snap.taken_at_ms, h.now(), "taken at the store's now");
    // Those without a place are answered back, in the order sent (a slot holder has none).
    assert_eq!(
        snap.unknown,
        vec![stranger, holder, line[1], stranger],
        "the sessions without a place"
    );
    assert_eq!(
        h.stats(&p).await,
        before,
        "sync made nothing for those without a place"
    );
    assert_eq!(
        h.poll(&p, stranger).await,
        Decision::Unknown,
        "no place made"
    );
    assert_eq!(
        h.poll(&p, line[1]).await,
        Decision::Unknown,
        "the leaver stays gone"
    );
    waiting(
        h.poll(&p, line[2]).await,
        2,
        2,
        "the waiters keep their places",
    );
    waiting(
        h.enter(&p, stranger).await,
        3,
        3,
        "the stranger joins at the back when entering",
    );
    assert!(h.release(&p, holder).await);
    assert_eq!(
        h.poll(&p, holder).await,
        Decision::Unknown,
        "the holder was given no place by sync"
    );
    admitted(h.poll(&p, line[0]).await, "the head got the freed slot");
}

/// A waiter kept alive only through the `seen` lists of syncs (a gateway answered their polls
/// from its snapshot) is not skipped at their turn; a silent one (for longer than 5/4 of
/// queue_ttl) is, and is counted silent in the snapshot's pace until then.
pub async fn sync_keeps_a_waiter_alive_at_their_turn(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 3).await;
    let (kept, silent, last) = (line[0], line[1], line[2]);
    for step in 0..4 {
        h.advance_ms(QUEUE_MS / 3);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
        let snap = h.sync(&p, vec![kept, last]).await;
        assert_eq!(snap.waiting, 3, "step {step}: nobody swept or skipped yet");
    }
    // 40 s: `silent` is silent for longer than 5/4 of queue_ttl; the others were seen by sync.
    let pace = h.sync(&p, vec![kept, last]).await.pace;
    assert_eq!(pace.silent, 1, "one silent waiter: {pace:?}");
    assert!(h.release(&p, a).await);
    admitted(
        h.poll(&p, kept).await,
        "the waiter kept alive by sync gets their turn",
    );
    admitted(h.enter(&p, kept).await, "and claims");
    assert!(h.release(&p, kept).await);
    assert_eq!(
        h.poll(&p, silent).await,
        Decision::Unknown,
        "the silent one was skipped at their turn"
    );
    admitted(h.poll(&p, last).await, "the next live waiter got the slot");
    let snap = h.sync(&p, Vec::new()).await;
    assert_eq!(snap.waiting, 0, "{snap:?}");
    assert_eq!(snap.pace.current_skipped, 1, "{:?}", snap.pace);
}

/// A waiter seen only behind a sync's turn horizon ([`SeenWaiters::with_horizon`]: the store
/// may leave their turn check-in out) is still not skipped at their turn, nor one behind a
/// horizon named in an earlier epoch that still counts; a silent waiter ahead of the horizon
/// is skipped. (Whether a silent one behind it is skipped is the store's to say: it cannot tell
/// them from the ones left out.)
pub async fn sync_keeps_a_waiter_behind_the_horizon_alive_at_their_turn(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = h.enter_waiters(&p, 5).await;
    let mut scores = Vec::new();
    for &w in &line {
        let (_, place) = place_of(h.poll(&p, w).await, "a waiter");
        scores.push(place.score(|| 0));
    }
    // The horizon at the second waiter's score: the first and the second are ahead of it (the
    // second silent), the third silent behind it, the fourth and fifth seen behind it: the
    // fourth in every sync, the fifth only in the second (queue_ttl ago at their turn).
    let horizon = Some(scores[1]);
    for step in 0..4 {
        let mut seen = vec![(line[0], scores[0]), (line[3], scores[3])];
        if step == 1 {
            seen.push((line[4], scores[4]));
        }
        let seen = SeenWaiters::with_horizon(horizon, seen);
        assert_eq!(seen.beyond().len(), if step == 1 { 2 } else { 1 });
        let snap = h.sync(&p, seen).await;
        assert_eq!(snap.waiting, 5, "step {step}: nobody swept or skipped yet");
        h.advance_ms(QUEUE_MS / 3);
        admitted(h.heartbeat(&p, a).await, "the holder stays");
    }
    // 40 s on: the second and third silent for longer than 5/4 of queue_ttl, the fifth seen
    // 30 s ago (queue_ttl), in an epoch that still counts.
    // Room for everyone at once: the turns come in one promotion.
    h.configure(&p, SettingsChange::new().capacity(10)).await;
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, line[0]).await, "seen ahead of the horizon: in");
    assert_eq!(
        h.poll(&p, line[1]).await,
        Decision::Unknown,
        "silent ahead of the horizon: skipped at their turn"
    );
    admitted(
        h.poll(&p, line[3]).await,
        "seen behind the horizon: never skipped",
    );
    admitted(
        h.poll(&p, line[4]).await,
        "seen behind the horizon within queue_ttl: never skipped",
    );
}

/// Liveness is to the epoch ([`LivenessRule`]), wherever in an epoch a check-in falls: a waiter
/// seen within queue_ttl is never skipped at their turn, one silent for longer than 5/4 of it
/// is; a waiter seen within abandon_after is never swept by `sync`, one silent for longer than
/// 3/2 of it is.
pub async fn liveness_is_to_the_epoch(h: &Harness) {
    let hour = Duration::from_secs(3_600);
    let turn_width = LivenessRule::for_turn(&h.policy(1)).width_ms;
    // Only `sync` sweeps: a store without snapshots has no sweep to check.
    let sweeps = h.snapshots().is_some();
    for phase in [0, 1, turn_width / 2, turn_width - 1] {
        // Seen exactly queue_ttl ago: kept at their turn.
        let p = h.policy(1);
        let a = h.enter_admitted(&p).await;
        h.advance_ms(turn_width - h.now() % turn_width + phase);
        let w = h.enter_waiters(&p, 1).await[0];
        h.advance_ms(QUEUE_MS);
        assert!(h.release(&p, a).await);
        admitted(
            h.poll(&p, w).await,
            &format!("phase {phase}: seen queue_ttl ago, kept at their turn"),
        );

        // Silent for just over 5/4 of queue_ttl: skipped at their turn.
        let p = h.policy(1);
        let a = h.enter_admitted(&p).await;
        h.advance_ms(turn_width - h.now() % turn_width + phase);
        let line = h.enter_waiters(&p, 2).await;
        h.advance_ms(QUEUE_MS / 2);
        waiting(h.poll(&p, line[1]).await, 2, 2, "the second polls");
        h.advance_ms(QUEUE_MS * 3 / 4 + 1);
        assert!(h.release(&p, a).await);
        assert_eq!(
            h.poll(&p, line[0]).await,
            Decision::Unknown,
            "phase {phase}: silent for longer than 5/4 of queue_ttl, skipped"
        );
        admitted(h.poll(&p, line[1]).await, "the next live waiter");
        if !sweeps {
            continue;
        }

        // The sweep: kept when seen abandon_after ago, swept after 3/2 of it.
        let p = h
            .policy(1)
            .with_ttls(hour, GRANT_TTL, QUEUE_TTL)
            .with_abandon_after(ABANDON_AFTER);
        let abandon_width = LivenessRule::for_abandon(&p).width_ms;
        h.enter_admitted(&p).await;
        h.advance_ms(abandon_width - h.now() % abandon_width + phase);
        let w = h.enter_waiters(&p, 1).await[0];
        h.advance_ms(ABANDON_MS);
        assert_eq!(
            h.sync(&p, Vec::new()).await.waiting,
            1,
            "phase {phase}: seen abandon_after ago, not swept"
        );
        h.advance_ms(ABANDON_MS / 2 + 1);
        assert_eq!(
            h.sync(&p, Vec::new()).await.waiting,
            0,
            "phase {phase}: silent for longer than 3/2 of abandon_after, swept"
        );
        assert_eq!(h.poll(&p, w).await, Decision::Unknown, "swept");
    }
}

/// A snapshot's line is exact: `waiting`, the head's score, and a checkpoint for every rank of
/// [`checkpoint_ranks`] holding the score of the waiter at that exact rank, for a line of a
/// few hundred with gaps (some left); the head moves on as the line does.
pub async fn sync_snapshot_has_exact_checkpoints(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let p = h.policy(1);
    let a = h.enter_admitted(&p).await;
    let line = line_with_places(h, &p, 330).await;
    // Gaps: every seventh leaves, and a run of twenty.
    let mut kept = Vec::new();
    for (i, &(s, seq)) in line.iter().enumerate() {
        if i % 7 == 3 || (150..170).contains(&i) {
            assert!(h.release(&p, s).await);
        } else {
            kept.push((s, seq));
        }
    }
    let by_rank = exact_ranks(h, &p, &kept).await;
    let snap = h.sync(&p, Vec::new()).await;
    check_line(&snap, &by_rank, "with gaps");
    assert_eq!(snap.taken_at_ms, h.now());

    // The head gets in: the snapshot's line starts at the next.
    assert!(h.release(&p, a).await);
    admitted(h.poll(&p, kept[0].0).await, "the head got the slot");
    let snap = h.sync(&p, Vec::new()).await;
    check_line(&snap, &by_rank[1..], "after the head got in");
    assert_eq!(
        snap.position_of(by_rank[0]),
        None,
        "a place ahead of the head: the store decides"
    );
}

/// A snapshot says whether the room is paused or open, before its scheduled opening, or past a
/// closing that keeps no line.
pub async fn sync_snapshot_says_paused_open_and_schedule(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let p = h.policy(1);
    let snap = h.sync(&p, Vec::new()).await;
    assert_eq!(
        (snap.head, snap.waiting, snap.checkpoints.len()),
        (None, 0, 0),
        "an empty room: {snap:?}"
    );
    assert!(snap.open && !snap.paused && !snap.before_opening && !snap.line_closed);
    assert!(snap.answers_waiters());
    h.configure(&p, SettingsChange::new().paused(true)).await;
    let snap = h.sync(&p, Vec::new()).await;
    assert!(snap.paused && snap.open, "paused: {snap:?}");
    h.configure(&p, SettingsChange::new().paused(false).open(false))
        .await;
    let snap = h.sync(&p, Vec::new()).await;
    assert!(!snap.paused && !snap.open, "closed: {snap:?}");
    assert!(!snap.answers_waiters());
    h.configure(&p, SettingsChange::new().open(true)).await;
    assert!(h.sync(&p, Vec::new()).await.open, "reopened");

    // A scheduled opening, and a closing that keeps no line.
    let p = h.scheduled_policy(1, 60_000, Some(120_000), false);
    let schedule = p.schedule.clone().expect("a scheduled policy");
    let snap = h.sync(&p, Vec::new()).await;
    assert!(
        snap.before_opening && !snap.line_closed,
        "before the opening: {snap:?}"
    );
    assert!(!snap.answers_waiters());
    let mut registrants: Vec<SessionId> = (0..2).map(|_| SessionId::random()).collect();
    for &s in &registrants {
        assert!(matches!(h.enter(&p, s).await, Decision::Scheduled { .. }));
    }
    registrants.sort_by_key(|&s| (schedule.draw(s), s));
    let scores: Vec<f64> = registrants
        .iter()
        .map(|&s| draw_score(schedule.draw(s)))
        .collect();
    check_line(
        &h.sync(&p, Vec::new()).await,
        &scores,
        "the pre-queue, by draw",
    );
    h.advance_ms(60_000);
    let snap = h.sync(&p, Vec::new()).await;
    assert!(!snap.before_opening && !snap.line_closed, "open: {snap:?}");
    check_line(&snap, &scores[1..], "the first by draw got the slot");
    h.advance_ms(60_000);
    let snap = h.sync(&p, Vec::new()).await;
    assert!(snap.line_closed && !snap.before_opening, "closed: {snap:?}");
    assert!(!snap.answers_waiters());
}

/// Every `Waiting` answer says the waiter's place: their sequence number (increasing by
/// arrival, the same on every answer) or, for a registrant of a scheduled opening, `Drawn`,
/// whose score in the snapshot is `draw_score` of the policy's draw.
pub async fn waiting_answers_say_the_place(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    let line = line_with_places(h, &p, 3).await;
    for (i, &(s, seq)) in line.iter().enumerate() {
        assert_eq!(
            place_of(h.poll(&p, s).await, "a poll"),
            (i as u64 + 1, Place::Seq(seq))
        );
        assert_eq!(
            place_of(h.enter(&p, s).await, "a re-entry"),
            (i as u64 + 1, Place::Seq(seq))
        );
    }

    let p = h.scheduled_policy(1, 10_000, None, true);
    let schedule = p.schedule.clone().expect("a scheduled policy");
    let mut registrants: Vec<SessionId> = (0..3).map(|_| SessionId::random()).collect();
    for &s in &registrants {
        assert!(matches!(h.enter(&p, s).await, Decision::Scheduled { .. }));
    }
    registrants.sort_by_key(|&s| (schedule.draw(s), s));
    h.advance_ms(10_000);
    admitted(h.poll(&p, registrants[0]).await, "the first by draw");
    for (i, &s) in registrants.iter().enumerate().skip(1) {
        assert_eq!(
            place_of(h.poll(&p, s).await, "a registrant"),
            (i as u64, Place::Drawn)
        );
    }
    let newcomer = SessionId::random();
    let (position, seq) = seq_of(h.enter(&p, newcomer).await, "a newcomer after the opening");
    assert_eq!(position, 3);
    let scores = [
        draw_score(schedule.draw(registrants[1])),
        draw_score(schedule.draw(registrants[2])),
        seq as f64,
    ];
    check_line(
        &h.sync(&p, Vec::new()).await,
        &scores,
        "registrants by their draw scores, then the newcomer",
    );
}

/// A position from a snapshot ([`RoomSnapshot::position_of`]) is within the bound of the
/// snapshot's docs for every waiter of a line of a thousand with gaps: exact below
/// [`EXACT_RANKS`], within 1 / [`CHECKPOINT_GAP_DIVISOR`] of the exact position above.
pub async fn snapshot_positions_are_within_the_bound(h: &Harness) {
    if h.snapshots().is_none() {
        return;
    }
    let p = h.policy(1);
    h.enter_admitted(&p).await;
    let line = line_with_places(h, &p, 1_200).await;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut kept = Vec::new();
    for &(s, seq) in &line {
        // About a third leave, at random.
        if rng.below(3) == 0 {
            assert!(h.release(&p, s).await);
        } else {
            kept.push((s, seq));
        }
    }
    let by_rank = exact_ranks(h, &p, &kept).await;
    let snap = h.sync(&p, Vec::new()).await;
    check_line(&snap, &by_rank, "a thousand with gaps");
    for (rank, &score) in by_rank.iter().enumerate() {
        let exact = rank as u64 + 1;
        let shown = snap
            .position_of(score)
            .unwrap_or_else(|| panic!("position {exact} not placed"));
        if exact <= EXACT_RANKS {
            assert_eq!(shown, exact, "exact near the head");
        } else {
            assert!(
                shown.abs_diff(exact) * CHECKPOINT_GAP_DIVISOR <= exact,
                "shown {shown} for exact position {exact}"
            );
        }
    }
}
