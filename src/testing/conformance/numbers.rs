//! Bad days, continued: a stored number damaged into something a lax reader takes for a number
//! (`inf`, `nan`, `2.5`, `0x10`, 20 digits: [`BadNumber`]), in each of the numbers a store keeps
//! ([`Field`]). Whatever the damage, the room answers every call, never has more than its
//! capacity inside, keeps everyone's place in line, and shows the operator the value it repaired
//! (the field's default), never the damage read as a number.

use super::{admitted, is_waiting, BadNumber, Damage, Damaged, Field, Harness};
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
