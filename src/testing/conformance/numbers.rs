//! Bad days, continued: a stored number damaged into something a lax reader takes for a number
//! (`inf`, `nan`, `2.5`, `0x10`, 20 digits: [`BadNumber`]), in each of the numbers a store keeps
//! ([`Field`]), and in a waiter's own place in line ([`Damage::Place`]). Whatever the damage, the
//! room answers every call within the protocol, never has more than its capacity inside, keeps
//! everyone's place in line, and shows the operator the value it repaired (the field's default),
//! never the damage read as a number.

use super::{admitted, is_waiting, waiting, BadNumber, Damage, Damaged, Field, Harness};
use crate::store::snapshot::Place;
use crate::store::{Decision, RoomSettings, RoomStats};
use crate::SessionId;

/// The settings a damaged room must show: the policy's, which it was built with and which the
/// damage cases never change (capacity 3, 1 000 admissions per second, running, open).
fn repaired(stats: &RoomStats, what: &str) {
    assert_eq!(
        (
            stats.capacity,
            stats.settings.capacity,
            stats.settings.admission_rate,
            stats.settings.paused,
            stats.settings.open
        ),
        (3, 3, Some(1_000), false, true),
        "{what}: the settings shown are not the repaired ones: {stats:?}"
    );
}

/// Every number of a room damaged, one at a time, with each bad form: the store answers every
/// call; nobody goes ahead of anyone who was ahead of them (a newcomer joins at the back, and
/// whoever is let in is let in from the head of the line); never more than the capacity
/// inside; the operator's stats show the settings repaired.
pub async fn heals_bad_numbers(h: &Harness) {
    for field in Field::ALL {
        for form in BadNumber::ALL {
            let d = Damaged::new(h).await;
            if !h.damage(&d.p, Damage::BadNumber(field, form)).await {
                continue;
            }
            let what = format!("after {field:?} became {:?}", form.text());
            keeps_order_and_capacity(h, &d, &what).await;
        }
    }
}

/// After damage to `d`'s room: a newcomer waits at the back, the line keeps its order, nobody
/// is over capacity, the settings shown are the repaired ones; and a slot freed goes to the
/// head of the line.
async fn keeps_order_and_capacity(h: &Harness, d: &Damaged, what: &str) {
    let p = &d.p;
    let n = SessionId::random();
    is_waiting(
        h.enter(p, n).await,
        &format!("{what}: a newcomer to a full room"),
    );
    // In order: each is let in (their grant or a freed slot) only if everyone ahead was.
    let order = [d.w1, d.w2, n];
    let mut waiting_ahead = 0;
    for (i, s) in order.into_iter().enumerate() {
        match h.poll(p, s).await {
            Decision::Admitted { .. } => assert_eq!(
                waiting_ahead, 0,
                "{what}: #{i} of the line let in while someone ahead waits"
            ),
            Decision::Waiting { position, .. } => {
                waiting_ahead += 1;
                assert_eq!(
                    position, waiting_ahead,
                    "{what}: #{i} of the line lost their place"
                );
            }
            other => panic!("{what}: #{i} of the line polled: {other:?}"),
        }
    }
    let stats = h.stats(p).await;
    assert!(
        stats.admitted + stats.granted <= 3,
        "{what}: over capacity: {stats:?}"
    );
    assert_eq!(stats.waiting, waiting_ahead, "{what}: {stats:?}");
    repaired(&stats, what);
    // A slot freed goes to the head of what is left of the line.
    let mut freed = false;
    for holder in [d.a, d.b, d.g] {
        if h.release(p, holder).await {
            freed = true;
            break;
        }
    }
    if freed && waiting_ahead > 0 {
        let head = order[order.len() - waiting_ahead as usize];
        admitted(
            h.poll(p, head).await,
            &format!("{what}: the head of the line after a release"),
        );
    }
    let stats = h.stats(p).await;
    assert!(
        stats.admitted + stats.granted <= 3,
        "{what}: over capacity: {stats:?}"
    );
    repaired(&stats, what);
}

/// The capacity damaged while the room is full (one inside, capacity one): every bad form reads
/// as the room's default capacity, so twenty newcomers all wait, in order, and the operator sees
/// capacity 1, never `inf` read as 4 294 967 295 nor `2.5` as 2.
pub async fn heals_a_damaged_capacity(h: &Harness) {
    for form in BadNumber::ALL {
        let p = h.policy(1);
        let holder = h.enter_admitted(&p).await;
        if !h.damage(&p, Damage::BadNumber(Field::Capacity, form)).await {
            return;
        }
        let what = format!("capacity {:?}", form.text());
        let mut line = Vec::new();
        for i in 1..=20 {
            let s = SessionId::random();
            match h.enter(&p, s).await {
                Decision::Waiting {
                    position, waiting, ..
                } => assert_eq!((position, waiting), (i, i), "{what}: newcomer #{i}"),
                other => panic!("{what}: newcomer #{i} got {other:?}"),
            }
            line.push(s);
        }
        let stats = h.stats(&p).await;
        Harness::check_stats(stats, 1, 0, 20);
        assert_eq!(
            (stats.capacity, stats.settings),
            (
                1,
                RoomSettings {
                    capacity: 1,
                    ..stats.settings
                }
            ),
            "{what}: {stats:?}"
        );
        assert!(h.release(&p, holder).await, "{what}: release");
        admitted(h.poll(&p, line[0]).await, &format!("{what}: the head"));
        is_waiting(h.poll(&p, line[1]).await, &format!("{what}: the next"));
        Harness::check_stats(h.stats(&p).await, 0, 1, 19);
    }
}

/// The largest place a reply may carry: a sequence number within 2^53 (beyond it, doubles give
/// two waiters one number; a reply cannot carry `1e300` or `inf`).
const MAX_PLACE: u64 = 1 << 53;

/// What a sorted set's score makes of `form` when it is a place in line (a registrant's draw
/// in [-1, 0), or a whole number from 1 to 2^53): the store keeps its waiter there, wherever
/// that is. `None` for the forms that are no place (`inf`, `-inf`, beyond 2^53, `2.5`, `0`),
/// whose waiter the store moves to the back of the line, and for those no score holds (`nan`,
/// `1e999`, empty).
fn place_read_as(form: BadNumber) -> Option<f64> {
    match form {
        // A registrant's draw, as the score is read.
        BadNumber::Negative => Some(-1.0),
        BadNumber::Hexadecimal => Some(16.0),
        BadNumber::LeadingZero => Some(1.0),
        BadNumber::Padded | BadNumber::PlusSign | BadNumber::Spaced => Some(7.0),
        BadNumber::Exponent => Some(1_000.0),
        // No place: a fraction would be answered as another waiter's place, 0 is neither a
        // draw nor a sequence number; nor anything beyond 2^53 or infinite.
        _ => None,
    }
}

/// The position of a `Waiting` among `of` waiters, whose place (if the store says one) is
/// within the protocol: a sequence number within 2^53, or a registrant's draw. Anything else
/// (an admission, `Unknown`, another line length) is a panic naming `what`.
#[track_caller]
fn waits_within_the_protocol(d: Decision, of: u64, what: &str) -> (u64, Option<Place>) {
    match d {
        Decision::Waiting {
            position,
            waiting,
            place,
            ..
        } => {
            assert!(
                (1..=waiting).contains(&position) && waiting == of,
                "{what}: position {position} of {waiting} (expected one of {of})"
            );
            if let Some(Place::Seq(seq)) = place {
                assert!(seq <= MAX_PLACE, "{what}: place {seq} beyond 2^53");
            }
            (position, place)
        }
        other => panic!("{what}: expected Waiting (the room is full), got {other:?}"),
    }
}

/// A waiter's own place in line damaged ([`Damage::Place`]), with each bad form a score can
/// hold, the last waiter's in a full room (two inside, one granted, two waiting); their first
/// call after it a poll, then an enter (which a store may answer on a fast path). The store
/// answers every call within the protocol (a position within the line, a place within 2^53,
/// never an error a gateway's fail policy would let the waiter in by); the damaged waiter
/// waits, never let in while the room is full. A form that is no place (`inf`, `-inf`, beyond
/// 2^53, `2.5`, `0`) sends its waiter to the back, behind the other waiter, with a fresh number; one the
/// score reads as a place (`01` is 1, `1e3` 1000, `-1` a draw) keeps them there, ahead of the
/// other waiter when it reads as less than their place, behind when more. Either way a
/// newcomer waits at the back, nobody's place moves again, the slots are as they were, and the
/// slot freed goes to the head of the line and to nobody else.
pub async fn heals_a_damaged_place(h: &Harness) {
    for form in BadNumber::ALL {
        for by_enter in [false, true] {
            let d = Damaged::new(h).await;
            let p = &d.p;
            if !h.damage(p, Damage::Place(d.w2, form)).await {
                continue;
            }
            let call = if by_enter { "enter" } else { "poll" };
            let what = format!("w2's place {:?}, then w2's {call}", form.text());
            let first = if by_enter {
                h.enter(p, d.w2).await
            } else {
                h.poll(p, d.w2).await
            };
            let (w2_at, w2_place) =
                waits_within_the_protocol(first, 2, &format!("{what}: w2's {call}"));
            let (w1_at, w1_place) =
                waits_within_the_protocol(h.poll(p, d.w1).await, 2, &format!("{what}: w1"));
            assert_eq!(
                w1_at + w2_at,
                3,
                "{what}: w1 at {w1_at} and w2 at {w2_at} of 2"
            );
            match (place_read_as(form), w1_place) {
                // No place: moved to the back, with a number after everyone's.
                (None, _) => {
                    assert_eq!((w1_at, w2_at), (1, 2), "{what}: w2 not sent to the back");
                    if let (Some(Place::Seq(w1)), Some(Place::Seq(w2))) = (w1_place, w2_place) {
                        assert!(w2 > w1, "{what}: w2's fresh place {w2} not after w1's {w1}");
                    }
                }
                // A place: kept, in the order of the places.
                (Some(x), Some(Place::Seq(w1))) if x != w1 as f64 => {
                    let expected = if x < w1 as f64 { (2, 1) } else { (1, 2) };
                    assert_eq!(
                        (w1_at, w2_at),
                        expected,
                        "{what}: w2's place read as {x}, w1's is {w1}"
                    );
                }
                _ => {}
            }
            let (head, next) = if w1_at == 1 {
                (d.w1, d.w2)
            } else {
                (d.w2, d.w1)
            };
            let n = SessionId::random();
            let newcomer = format!("{what}: a newcomer");
            let (n_at, n_place) = waits_within_the_protocol(h.enter(p, n).await, 3, &newcomer);
            assert_eq!(n_at, 3, "{newcomer} not at the back");
            for (s, at, place) in [(d.w1, w1_at, w1_place), (d.w2, w2_at, w2_place)] {
                if let (Some(Place::Seq(seq)), Some(Place::Seq(newcomer))) = (place, n_place) {
                    assert!(
                        newcomer > seq,
                        "{what}: the newcomer's place {newcomer} not after {seq}"
                    );
                }
                let (again, _) =
                    waits_within_the_protocol(h.poll(p, s).await, 3, &format!("{what}: again"));
                assert_eq!(again, at, "{what}: a waiter's place moved again");
            }
            let stats = h.stats(p).await;
            assert_eq!(
                (stats.admitted, stats.granted, stats.waiting),
                (2, 1, 3),
                "{what}: (admitted, granted, waiting): {stats:?}"
            );
            repaired(&stats, &what);
            // A slot freed: to the head of the line, and nobody else.
            assert!(h.release(p, d.a).await, "{what}: release");
            admitted(
                h.poll(p, head).await,
                &format!("{what}: the head after a release"),
            );
            waiting(
                h.poll(p, next).await,
                1,
                2,
                &format!("{what}: the next after a release"),
            );
            waiting(
                h.poll(p, n).await,
                2,
                2,
                &format!("{what}: the newcomer after a release"),
            );
            let stats = h.stats(p).await;
            assert_eq!(
                (stats.admitted, stats.granted, stats.waiting),
                (1, 2, 2),
                "{what}: after a release (admitted, granted, waiting): {stats:?}"
            );
            repaired(&stats, &what);
        }
    }
}
