//! The estimate's unit tests: each rule of the method (docs/eta.md) on rooms made by hand.

use super::*;
use crate::store::AdmissionCounts;

const MIN: u64 = MINUTE_MS;

/// A room `observed_ms` old with `capacity`, `minutes` of admissions (most recent first)
/// and nothing in the current bucket, which it entered `into_ms` ago.
fn pace(observed_ms: u64, capacity: u32, minutes: [u64; PACE_MINUTES]) -> RoomPace {
    RoomPace::new(0, 0, observed_ms, capacity).with_line(minutes, 0)
}

fn shown(position: u64, waiting: u64, pace: RoomPace) -> u64 {
    let eta = estimate(&EtaInput::new(position, waiting, pace, false));
    eta.shown().unwrap_or_else(|| panic!("{eta:?}")).as_secs()
}

#[test]
fn a_steady_room_is_about_right_and_on_the_safe_side() {
    // 20 a minute for ten minutes: 60 ahead is about 3 minutes.
    let steady = pace(10 * MIN, 10, [20; PACE_MINUTES]);
    let s = shown(61, 100, steady);
    assert!((180..=230).contains(&s), "{s}");
}

#[test]
fn a_young_room_divides_by_its_age_not_five_minutes() {
    // 40 s old, capacity 5 filled at once, then 10 more let in since its first movement
    // 20 s ago: about 0.33 a second (half the still opening counts), not 10 / 300 s.
    let young = RoomPace::new(15, 40_000 % MIN, 40_000, 5).with_first_move(20_000);
    let s = shown(11, 11, young);
    assert!((25..=60).contains(&s), "{s}");
}

#[test]
fn the_current_bucket_counts() {
    // 8 s old: no complete bucket yet, but 12 let in beyond the fill of 2.
    let input = EtaInput::new(4, 4, RoomPace::new(14, 8_000, 8_000, 2), false);
    assert!(estimate(&input).shown().is_some(), "{:?}", estimate(&input));
}

#[test]
fn no_basis_says_estimating_a_still_line_stalled_a_paused_one_paused() {
    let young = EtaInput::new(4, 4, RoomPace::new(2, 3_000, 3_000, 5), false);
    assert_eq!(estimate(&young), Eta::Estimating);
    let only_fill = EtaInput::new(4, 4, pace(30_000, 5, [5, 0, 0, 0, 0]), false);
    assert_eq!(estimate(&only_fill), Eta::Estimating);
    let still = EtaInput::new(4, 4, pace(60 * MIN, 5, [0; PACE_MINUTES]), false);
    assert_eq!(estimate(&still), Eta::Stalled);
    let paused = EtaInput::new(4, 4, pace(10 * MIN, 5, [20; PACE_MINUTES]), true);
    assert_eq!(estimate(&paused), Eta::Paused);
}

#[test]
fn a_slowdown_is_followed_at_once_and_a_speed_up_once_it_is_clear() {
    let steady = shown(101, 200, pace(10 * MIN, 10, [20; PACE_MINUTES]));
    // The last minute let in half as many: the estimate follows it.
    let slower = shown(101, 200, pace(10 * MIN, 10, [10, 20, 20, 20, 20]));
    assert!(slower as f64 > 1.7 * steady as f64, "{slower} vs {steady}");
    // Twice as many for two minutes: the older three are set aside.
    let faster = shown(101, 200, pace(10 * MIN, 10, [40, 40, 20, 20, 20]));
    assert!(
        (faster as f64) < 0.65 * steady as f64,
        "{faster} vs {steady}"
    );
    // One busy minute among steady ones is noise, not a change: no shorter than steady.
    let noisy = shown(101, 200, pace(10 * MIN, 10, [24, 20, 20, 20, 20]));
    assert!(noisy as f64 >= 0.9 * steady as f64, "{noisy} vs {steady}");
}

#[test]
fn the_margin_grows_with_the_measured_error() {
    let even = shown(101, 200, pace(10 * MIN, 10, [20; PACE_MINUTES]));
    let uneven = shown(101, 200, pace(10 * MIN, 10, [20, 28, 12, 27, 13]));
    assert!(uneven > even, "{uneven} vs {even}");
}

#[test]
fn waiters_who_gave_up_are_taken_off_the_line_ahead() {
    let all = shown(101, 200, pace(10 * MIN, 10, [20; PACE_MINUTES]));
    // Half the line silent: about half of those ahead will be skipped.
    let silent = shown(
        101,
        200,
        pace(10 * MIN, 10, [20; PACE_MINUTES]).with_line([20; PACE_MINUTES], 100),
    );
    assert!((silent as f64) < 0.6 * all as f64, "{silent} vs {all}");
    // A quarter of the turns lately were skipped, and nobody is silent now: so will a
    // quarter of those ahead be by that share, and hardly any by the patience the room has
    // measured (five give-ups over five minutes of a line of 200); their mean takes off an
    // eighth.
    let skipping = shown(
        101,
        200,
        pace(10 * MIN, 10, [15; PACE_MINUTES]).with_skipped(AdmissionCounts::new(5, 25), 0),
    );
    let unskipped = shown(101, 200, pace(10 * MIN, 10, [15; PACE_MINUTES]));
    assert!(
        (skipping as f64) < 0.9 * unskipped as f64,
        "{skipping} vs {unskipped}"
    );
}

#[test]
fn a_lowered_admission_rate_caps_the_pace_at_once() {
    // 60 a minute measured; the operators now let in one a second at most.
    let measured = pace(10 * MIN, 10, [60; PACE_MINUTES]);
    let free = shown(121, 200, measured);
    let limited = shown(121, 200, measured.with_admission_rate(Some(1)));
    assert!(limited >= 120, "120 ahead at one a second: {limited}");
    assert!(free < 130, "{free}");
    // A limit above the measured pace changes nothing.
    assert_eq!(shown(121, 200, measured.with_admission_rate(Some(5))), free);
}

#[test]
fn the_silent_are_counted_nearer_the_front() {
    // None ahead of the first; all of them ahead of the last.
    assert_eq!(silent_ahead(10, 100, 0.0), 0.0);
    assert!((silent_ahead(10, 100, 100.0) - 10.0).abs() < 1e-9);
    // Halfway back, three quarters of them: the front half has waited longer.
    let half = silent_ahead(10, 100, 50.0);
    assert!((7.0..8.0).contains(&half), "{half}");
    // More silent than waiting (a count read a moment apart) is capped at the line.
    assert!((silent_ahead(500, 100, 100.0) - 100.0).abs() < 1e-9);
}

#[test]
fn give_ups_seen_at_a_steady_rate_are_forecast_for_those_ahead() {
    // 20 of the 100 waiting went silent over five minutes: as many again of those ahead
    // will give up before their turn as their wait allows, not only the silent now.
    let with_time_to_see = pace(5 * MIN, 10, [20; PACE_MINUTES])
        .with_line([20; PACE_MINUTES], 20)
        .with_silent_after(30_000);
    // The same count, with no time to have seen anyone give up (silent after five
    // minutes): only the silent now are taken off.
    let without = with_time_to_see.with_silent_after(5 * MIN);
    // (Shorter, though the forecast's own uncertainty widens the margin.)
    let forecast = shown(101, 100, with_time_to_see);
    let silent_only = shown(101, 100, without);
    assert!(
        (forecast as f64) < 0.97 * silent_only as f64,
        "{forecast} vs {silent_only}"
    );
}

#[test]
fn a_silent_waiter_ahead_may_cost_a_turn_the_margin_allows_for_it() {
    // 60 of 200 silent, no turn skipped yet (a wave of quitters, not seen at the front),
    // 20 a minute: were the silent anywhere in line, 30 of the 100 ahead would be, and the
    // wait 70 turns, 210 s. Nearer the front (the usual guess) 45 would be: about 170 s,
    // and with the pace's margin alone about 180 s. The margin allows for the other guess.
    let wave = pace(10 * MIN, 10, [20; PACE_MINUTES])
        .with_line([20; PACE_MINUTES], 60)
        .with_silent_after(5 * MIN);
    let eta = estimate(&EtaInput::new(101, 200, wave, false));
    let shown = eta.shown().unwrap().as_secs();
    assert!((195..=240).contains(&shown), "{eta:?}");
    // Its margin is wider than that of a line where everyone stays.
    let all_stay = pace(10 * MIN, 10, [20; PACE_MINUTES]);
    assert!(
        shown_margin(wave) > 1.2 * shown_margin(all_stay),
        "{} vs {}",
        shown_margin(wave),
        shown_margin(all_stay)
    );
}

#[test]
fn the_silent_counted_where_they_stand_replace_the_guess() {
    // 60 of 200 silent, no turn skipped yet, 20 a minute, 100 ahead (as above).
    let wave = pace(10 * MIN, 10, [20; PACE_MINUTES])
        .with_line([20; PACE_MINUTES], 60)
        .with_silent_after(5 * MIN);
    let input = EtaInput::new(101, 200, wave, false);
    let guessed = estimate(&input).shown().unwrap().as_secs();
    // The snapshot says 30 of the 100 ahead are silent, exactly: 70 turns, 210 s, and a
    // margin of the pace's alone (no guess of where they stand).
    let counted = estimate(&input.with_silent_ahead(30, 0));
    let shown = counted.shown().unwrap().as_secs();
    assert!((210..=235).contains(&shown), "{counted:?}");
    assert!(shown > guessed - 20, "{shown} vs {guessed}");
    // None of them ahead: the whole 100 turns, 300 s and more.
    let none = estimate(&input.with_silent_ahead(0, 0)).shown().unwrap();
    assert!(none.as_secs() >= 300, "{none:?}");
    // All of them ahead (60 of 100): 40 turns, about 2 minutes, shorter than the guess.
    let front = estimate(&input.with_silent_ahead(60, 0)).shown().unwrap();
    assert!(front.as_secs() < guessed, "{front:?} vs {guessed}");
    // An uncertain count widens the margin.
    let unsure = estimate(&input.with_silent_ahead(30, 10)).shown().unwrap();
    assert!(unsure.as_secs() > shown, "{unsure:?} vs {shown}");
    // More silent than ahead (a count a moment older) is capped at those ahead.
    let over = estimate(&input.with_silent_ahead(500, 0)).shown().unwrap();
    assert_eq!(
        over,
        estimate(&input.with_silent_ahead(100, 0)).shown().unwrap()
    );
}

#[test]
fn a_burst_of_give_ups_is_not_taken_for_a_rate_that_goes_on() {
    // 40 of 200 went silent over five minutes and none was skipped yet, 20 a minute: a
    // rate of giving up that, if it goes on, takes some of the 100 ahead before their turn.
    let line = pace(10 * MIN, 10, [20; PACE_MINUTES])
        .with_line([20; PACE_MINUTES], 40)
        .with_silent_after(30_000);
    let input = EtaInput::new(101, 200, line, false).with_silent_ahead(20, 0);
    let room = estimate(&input).shown().unwrap();
    // Minutes as even as one rate makes them: the same estimate.
    let even = GiveUpMinutes::new(&[8, 9, 7, 8, 8]).unwrap();
    assert_eq!(
        estimate(&input.with_give_ups_lately(even)).shown(),
        Some(room)
    );
    // All 40 in one minute: nobody else gave up, so only the 20 silent ahead come off:
    // 80 turns, four minutes, and more than if the rate went on.
    let burst = GiveUpMinutes::new(&[0, 0, 40, 0, 0]).unwrap();
    let after = estimate(&input.with_give_ups_lately(burst))
        .shown()
        .unwrap();
    assert!(after > room, "{after:?} vs {room:?}");
    assert!(after.as_secs() >= 240, "{after:?}");
}

#[test]
fn the_minutes_of_give_ups_never_shorten_a_wait() {
    // A burst set aside means fewer give-ups forecast: a longer likely wait, and a smaller
    // margin for give-ups, which alone could shorten what is shown. Over a grid of rooms,
    // whatever else they say, nothing shown gets shorter.
    let bursts = [
        GiveUpMinutes::new(&[2, 3, 30, 2, 4]).unwrap(),
        GiveUpMinutes::new(&[0, 0, 40, 0, 0]).unwrap(),
    ];
    for admitted in [2, 20, 60] {
        for (silent, skipped) in [(0, 5), (1, 0), (50, 5), (400, 30)] {
            for ttl in [10_000, 42_000, 120_000] {
                for position in [2, 50, 500, 1_524] {
                    let room = pace(10 * MIN, 10, [admitted; PACE_MINUTES])
                        .with_line([admitted; PACE_MINUTES], silent)
                        .with_skipped(AdmissionCounts::new(skipped, skipped * 5), 0)
                        .with_silent_after(ttl);
                    let base = EtaInput::new(position, 1_562, room, false);
                    for input in [base, base.with_silent_ahead(silent.min(position) / 2, 1)] {
                        let without = estimate(&input);
                        for burst in bursts {
                            let with = estimate(&input.with_give_ups_lately(burst));
                            let (Some(a), Some(b)) = (without.shown(), with.shown()) else {
                                assert_eq!(with, without);
                                continue;
                            };
                            let ((la, ha), (lb, hb)) =
                                (without.range().unwrap(), with.range().unwrap());
                            assert!(
                                b >= a && lb >= la && hb >= ha,
                                "{input:?}: {with:?} < {without:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_line_refilled_after_a_pause_is_not_stalled_while_the_first_visits_end() {
    // Ten minutes old, 20 a minute; its opening took 20 s to move. Paused two minutes,
    // resumed `ago` ms ago, every slot filled at once (10) and nobody let in since.
    let resumed = |ago: u64| {
        RoomPace::new(10, ago % (MIN / 6), 10 * MIN, 10)
            .with_line([0, 0, 20, 20, 20], 0)
            .with_first_move(10 * MIN - 20_000)
            .with_last_pause(2 * MIN + ago, ago)
    };
    // Just now: the line moves at the pace before the pause.
    let eta = estimate(&EtaInput::new(61, 100, resumed(5_000), false));
    let shown = eta.shown().unwrap_or_else(|| panic!("{eta:?}")).as_secs();
    assert!((180..=260).contains(&shown), "{eta:?}");
    // Still nobody, twice as long as the opening took: something is wrong.
    let still = estimate(&EtaInput::new(61, 100, resumed(50_000), false));
    assert_eq!(still, Eta::Stalled);
}

/// The shown value over the likely one's lower bound (`low` is `likely * (1 - spread)`,
/// `shown` is `likely * (1 + MARGIN_Z * spread)`): how wide the margin is.
fn shown_margin(pace: RoomPace) -> f64 {
    let eta = estimate(&EtaInput::new(101, 200, pace, false));
    let (low, _) = eta.range().unwrap();
    eta.shown().unwrap().as_secs_f64() / low.as_secs_f64()
}

#[test]
fn a_raised_capacity_scales_the_pace_measured_before_it() {
    // Capacity 5 -> 10 two and a half minutes ago (its fill of 5 in that minute), after
    // minutes of 10: with visits as long as before, the line now moves at 20 a minute.
    let raised = RoomPace::new(0, 0, 10 * MIN, 10)
        .with_line([20, 20, 25, 10, 10], 0)
        .with_capacity_change(5, 2 * MIN + MIN / 2);
    let before = shown(101, 200, pace(10 * MIN, 5, [10; PACE_MINUTES]));
    let after = shown(101, 200, raised);
    let always = shown(101, 200, pace(10 * MIN, 10, [20; PACE_MINUTES]));
    assert!((after as f64) < 0.6 * before as f64, "{after} vs {before}");
    assert!(
        (after as f64) < 1.15 * always as f64,
        "{after} vs {always} at that capacity all along"
    );
}

#[test]
fn a_cut_below_the_people_inside_adds_the_drain_before_anyone_moves() {
    // Capacity 20 cut to 10 just now, after minutes of 20 at 20 (visits of a minute):
    // the line will move at 10 a minute, once 10 of the 20 inside have left, which takes
    // half a minute (they leave at 20 a minute): 5 turns at the new pace.
    let cut = |inside| {
        RoomPace::new(0, 0, 10 * MIN, 10)
            .with_line([20; PACE_MINUTES], 0)
            .with_capacity_change(20, 1_000)
            .with_inside(inside)
    };
    let drained = shown(31, 100, cut(10));
    let draining = shown(31, 100, cut(20));
    // 30 ahead at 10 a minute: about 3 minutes; the drain adds 5 turns, about 30 s.
    assert!((180..=240).contains(&drained), "{drained}");
    let added = draining - drained;
    assert!((25..=45).contains(&added), "{draining} vs {drained}");
    // Within the capacity, or unknown: nothing added.
    assert_eq!(shown(31, 100, cut(7)), drained);
    let unknown = RoomPace::new(0, 0, 10 * MIN, 10)
        .with_line([20; PACE_MINUTES], 0)
        .with_capacity_change(20, 1_000);
    assert_eq!(shown(31, 100, unknown), drained);
}

#[test]
fn the_range_holds_the_shown_value_and_narrows_with_more_evidence() {
    let few = estimate(&EtaInput::new(
        20,
        20,
        RoomPace::new(0, 0, 70_000, 1).with_line([12, 0, 0, 0, 0], 0),
        false,
    ));
    let many = estimate(&EtaInput::new(
        20,
        20,
        pace(60 * MIN, 1, [100; PACE_MINUTES]),
        false,
    ));
    for eta in [few, many] {
        let (low, high) = eta.range().unwrap();
        let shown = eta.shown().unwrap();
        assert!(low <= shown && shown <= high, "{eta:?}");
    }
    let width = |e: Eta| {
        let (l, h) = e.range().unwrap();
        h.as_secs_f64() / l.as_secs_f64().max(1.0)
    };
    assert!(width(many) < width(few), "{few:?} {many:?}");
}

#[test]
fn estimates_stay_finite() {
    let trickle = pace(10 * MIN, 1, [3; PACE_MINUTES]);
    assert_eq!(
        estimate(&EtaInput::new(u64::MAX, u64::MAX, trickle, false)).shown(),
        Some(Duration::from_secs(365 * 86_400))
    );
    assert_eq!(
        estimate(&EtaInput::new(0, 0, trickle, false)),
        estimate(&EtaInput::new(1, 0, trickle, false))
    );
}
