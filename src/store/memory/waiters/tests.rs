use super::*;
use proptest::prelude::*;

/// Both epochs at `t` (the tests' rules are one epoch per unit).
fn at(t: u64) -> Epochs {
    Epochs {
        turn: t,
        abandon: t,
    }
}

impl Waiters {
    /// The sweep of those last seen before epoch `before`.
    fn sweep_older_than(&mut self, before: u64, max: u32) -> u32 {
        self.sweep(|epoch| epoch >= before, max)
    }
}

fn sessions(n: usize) -> Vec<SessionId> {
    (0..n).map(|_| SessionId::random()).collect()
}

fn line_of(s: &[SessionId]) -> Waiters {
    let mut w = Waiters::default();
    for (t, &x) in s.iter().enumerate() {
        w.push(x);
        w.check_in(x, at(t as u64));
    }
    w
}

#[test]
fn positions_follow_joins_and_departures() {
    let s = sessions(5);
    let mut line = line_of(&s);
    assert_eq!(line.head(), Some(s[0]));
    for (i, &x) in s.iter().enumerate() {
        assert_eq!(line.position(x), Some(i as u64 + 1));
    }
    assert!(line.remove(s[2]));
    assert!(!line.remove(s[2]));
    assert_eq!(line.position(s[2]), None);
    assert_eq!(line.touch(s[3], at(10)).map(|p| p.0), Some(3));
    assert_eq!(line.seen(s[3]), Some(at(10)));
    assert!(line.remove(s[0]));
    assert_eq!(line.head(), Some(s[1]));
    assert_eq!(line.position(s[4]), Some(3));
    assert_eq!(line.len(), 3);
    assert_eq!(line.touch(SessionId::random(), at(10)), None);
}

/// Sequence numbers never change (the queue cookie carries them), however often the slots
/// are renumbered; `score_at` and `head` follow the line.
#[test]
fn sequence_numbers_are_kept_through_renumbering() {
    let s = sessions(1_000);
    let mut w = line_of(&s);
    let seq_of = |w: &Waiters, x: SessionId| match w.entries[&x].spot {
        Spot::Slot(slot) => w.line[slot].0,
        other => panic!("{other:?}"),
    };
    let before: Vec<u64> = s.iter().map(|&x| seq_of(&w, x)).collect();
    assert!(before.windows(2).all(|p| p[1] == p[0] + 1));
    // Every other one leaves, then the first half: several renumberings.
    let mut kept: Vec<usize> = (0..s.len()).filter(|i| i % 2 == 1).collect();
    for i in (0..s.len()).step_by(2) {
        assert!(w.remove(s[i]));
    }
    for &i in &kept[..250] {
        assert!(w.remove(s[i]));
    }
    kept.drain(..250);
    assert_eq!(w.len(), kept.len());
    for (rank, &i) in kept.iter().enumerate() {
        assert_eq!(seq_of(&w, s[i]), before[i], "#{i} kept its sequence number");
        assert_eq!(w.position(s[i]), Some(rank as u64 + 1));
        assert_eq!(w.score_at(rank as u64), Some(before[i] as f64));
    }
    assert_eq!(w.score_at(kept.len() as u64), None);
    assert_eq!(w.head(), Some(s[kept[0]]));
    assert!(w.line.len() <= 2 * w.len() + SLACK);
    // A newcomer comes after the last, with the next number.
    let x = SessionId::random();
    w.push(x);
    assert_eq!(seq_of(&w, x), before[999] + 1);
}

#[test]
fn the_ranks_stay_within_twice_the_line() {
    let keep = sessions(10);
    let mut line = line_of(&keep);
    // A long churn behind the same ten: people join at the back and leave.
    for _ in 0..10_000 {
        let x = SessionId::random();
        line.push(x);
        assert!(line.remove(x));
        assert!(line.ranks.slots() <= 2 * line.len() + SLACK + 64);
    }
    // And a head that moves on: everyone is served in turn.
    let more = sessions(1_000);
    for &x in &more {
        line.push(x);
    }
    for (i, &x) in keep.iter().chain(&more).enumerate() {
        assert_eq!(line.head(), Some(x), "served in order, #{i}");
        assert!(line.remove(x));
        assert!(line.ranks.slots() <= 2 * line.len() + SLACK + 64);
    }
    assert!(line.is_empty());
    assert!(line.entries.is_empty(), "no record left behind");
}

#[test]
fn damaged_parts_are_independent() {
    let s = sessions(3);
    let mut line = line_of(&s[..2]);
    line.forget_last_seq();
    line.push(s[2]);
    assert_eq!(line.position(s[2]), Some(3), "never ahead of the line");
    line.remove_check_in(s[0]);
    assert_eq!((line.position(s[0]), line.seen(s[0])), (Some(1), None));
    line.clear_places();
    assert!(line.is_empty());
    assert_eq!(line.seen(s[1]), Some(at(1)), "check-ins stay");
    line.push(s[0]);
    assert_eq!(line.position(s[0]), Some(1));
    line.clear_check_ins();
    assert_eq!((line.position(s[0]), line.seen(s[0])), (Some(1), None));
    assert_eq!(line.entries.len(), 1);
}

#[test]
fn the_sweep_takes_the_oldest_current_check_ins() {
    let s = sessions(4);
    let mut w = Waiters::default();
    for &x in &s {
        w.push(x);
    }
    w.check_in(s[0], at(10));
    w.check_in(s[1], at(20));
    w.check_in(s[2], at(30));
    w.check_in(s[0], at(40)); // checks in again: no longer the oldest
    w.check_in(s[3], at(40));
    w.check_in(s[3], at(40)); // the same millisecond twice: one entry
    assert_eq!(w.live.queue.len(), 5);
    assert!(w.remove(s[2]));
    assert_eq!(w.sweep_older_than(35, 100), 1);
    assert_eq!(w.position(s[1]), None, "swept: place and check-in");
    assert_eq!(w.sweep_older_than(35, 100), 0);
    assert_eq!(w.sweep_older_than(41, 1), 1);
    assert_eq!(w.sweep_older_than(41, 1), 1);
    assert!(w.is_empty() && w.live.queue.is_empty() && w.entries.is_empty());
}

#[test]
fn the_queue_stays_within_twice_the_check_ins() {
    let s = sessions(10);
    let mut w = line_of(&s);
    for t in 0..10_000u64 {
        w.touch(s[(t % 10) as usize], at(t));
        assert!(w.live.queue.len() <= 2 * 10 + SLACK + 1);
    }
    // A session removed and added again at the same time is not doubled by a compaction.
    for _ in 0..1_000 {
        w.remove_check_in(s[0]);
        w.check_in(s[0], at(20_000));
    }
    assert!(w.live.queue.len() <= 2 * 10 + SLACK + 1);
    assert_eq!(w.sweep_older_than(u64::MAX, 100), 10);
}

#[test]
fn the_pre_queue_ranks_by_draw_ahead_of_the_line() {
    let mut w = Waiters::default();
    let later = sessions(3);
    // Draws spread over the range, and a cluster in one bucket (ties broken by session).
    let mut model: Vec<(u64, SessionId)> = (0..3_000u64)
        .map(|i| {
            let draw = if i % 10 == 0 {
                7
            } else {
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 12
            };
            (draw, SessionId::random())
        })
        .collect();
    for &(draw, s) in &model {
        w.push_pre(s, draw, 5);
        w.check_in(s, at(5));
    }
    for &s in &later {
        w.push_at(s, Some(6));
    }
    model.sort();
    let check = |w: &Waiters, model: &[(u64, SessionId)]| {
        for (i, &(draw, s)) in model.iter().enumerate() {
            assert_eq!(w.position(s), Some(i as u64 + 1), "registrant #{i}");
            assert_eq!(w.score_at(i as u64), Some(draw_score(draw)), "#{i}'s score");
        }
        for (i, &s) in later.iter().enumerate() {
            assert_eq!(
                w.position(s),
                Some((model.len() + i) as u64 + 1),
                "later #{i}"
            );
        }
        assert_eq!(w.head(), model.first().map(|m| m.1).or(Some(later[0])));
        assert_eq!(w.len(), model.len() + later.len());
    };
    check(&w, &model);
    assert_eq!(
        w.head_joined(),
        Some(5),
        "a registrant waits since the first registration"
    );
    // Leaving (and a registrant re-registering: no second place), from anywhere.
    for i in (0..model.len()).rev().step_by(3) {
        let (_, s) = model.remove(i);
        assert!(w.remove(s));
    }
    w.push_pre(model[0].1, 1, 9);
    check(&w, &model);
    // Until the pre-queue is gone: the line is the later arrivals, in turn.
    for (_, s) in std::mem::take(&mut model) {
        assert_eq!(w.head(), Some(s));
        assert!(w.remove(s));
    }
    check(&w, &model);
    assert!(w.pre.counts.is_empty(), "an empty pre-queue keeps no tree");
}

#[derive(Clone, Debug)]
enum Op {
    Push,
    /// Remove the waiter at this index (modulo the line's length).
    Remove(usize),
    /// Check in the waiter at this index, one millisecond later.
    Touch(usize),
    /// Sweep those not checked in for this many milliseconds.
    Sweep(u8),
    ForgetSeq,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => Just(Op::Push),
        3 => any::<usize>().prop_map(Op::Remove),
        3 => any::<usize>().prop_map(Op::Touch),
        1 => any::<u8>().prop_map(Op::Sweep),
        1 => Just(Op::ForgetSeq),
    ]
}

proptest! {
    /// Against a naive model (a vector in order, with each one's last check-in): the same
    /// head, length, position and check-in of every waiter after every step, and the sweep
    /// takes exactly those checked in before the cutoff (with a bound high enough).
    #[test]
    fn waiters_match_a_naive_model(ops in prop::collection::vec(op(), 1..400)) {
        let mut w = Waiters::default();
        let mut model: Vec<(SessionId, u64)> = Vec::new();
        let mut now = 0u64;
        for op in ops {
            now += 1;
            match op {
                Op::Push => {
                    let s = SessionId::random();
                    w.push(s);
                    w.check_in(s, at(now));
                    model.push((s, now));
                }
                Op::Remove(i) if !model.is_empty() => {
                    let (s, _) = model.remove(i % model.len());
                    prop_assert!(w.remove(s));
                }
                Op::Remove(_) => prop_assert!(!w.remove(SessionId::random())),
                Op::Touch(i) if !model.is_empty() => {
                    let i = i % model.len();
                    model[i].1 = now;
                    prop_assert_eq!(w.touch(model[i].0, at(now)).map(|p| p.0), Some(i as u64 + 1));
                }
                Op::Touch(_) => {}
                Op::Sweep(age) => {
                    let before = now.saturating_sub(u64::from(age));
                    let gone = model.iter().filter(|(_, t)| *t < before).count();
                    model.retain(|(_, t)| *t >= before);
                    prop_assert_eq!(w.sweep_older_than(before, 1_000) as usize, gone);
                }
                Op::ForgetSeq => w.forget_last_seq(),
            }
            prop_assert_eq!(w.len(), model.len());
            prop_assert_eq!(w.head(), model.first().map(|m| m.0));
            for (i, &(s, t)) in model.iter().enumerate() {
                prop_assert_eq!(w.position(s), Some(i as u64 + 1));
                prop_assert_eq!(w.seen(s), Some(at(t)));
            }
            prop_assert_eq!(w.entries.len(), model.len(), "no stray records");
        }
    }
}
