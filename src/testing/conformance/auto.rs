//! One capacity decision for a fleet ([`AutoStore`]): the gateways' counts meet in one window
//! on the store's clock, one lease holder is handed it, its decision is written only while it
//! holds the lease and nobody else changed the capacity, and an operator's switch holds for
//! every gateway. Each case runs on a store that offers the capability ([`Harness::auto`]), and
//! is skipped on one that does not.

use std::sync::Arc;
use std::time::Duration;

use super::Harness;
use crate::auto::Window;
use crate::store::{AutoApplied, AutoOff, AutoReport, AutoStore, Decision, GatewayId};
use crate::{RoomPolicy, SessionId};

/// The window the cases report with.
const WINDOW_MS: u64 = 5_000;
/// The lease they report with.
const LEASE_MS: u64 = 11_000;

impl Harness {
    /// The store's shared capacity decisions, if it offers them (a case that needs them is
    /// skipped, saying so on stderr, when it does not).
    pub fn auto(&self) -> Option<Arc<dyn AutoStore>> {
        let auto = Arc::clone(&self.store).auto();
        if auto.is_none() {
            eprintln!("skipped: the store takes no shared capacity decisions (Store::auto)");
        }
        auto
    }

    /// `auto_report` with the cases' window and lease, failing the test on a store error.
    pub async fn auto_report(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        counts: &Window,
    ) -> AutoReport {
        self.auto_store()
            .auto_report(policy, gateway, counts, WINDOW_MS, LEASE_MS)
            .await
            .unwrap_or_else(|e| panic!("auto_report failed: {e}"))
    }

    /// `auto_apply`, failing the test on a store error.
    pub async fn auto_apply(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        capacity: u32,
        status: &str,
    ) -> AutoApplied {
        self.auto_store()
            .auto_apply(policy, gateway, capacity, None, status)
            .await
            .unwrap_or_else(|e| panic!("auto_apply failed: {e}"))
    }

    /// `auto_switch`, failing the test on a store error.
    pub async fn auto_switch(&self, policy: &RoomPolicy, off: Option<AutoOff>) {
        self.auto_switch_terms(policy, off, None).await;
    }

    /// `auto_switch` with terms, failing the test on a store error.
    pub async fn auto_switch_terms(
        &self,
        policy: &RoomPolicy,
        off: Option<AutoOff>,
        terms: Option<&str>,
    ) {
        self.auto_store()
            .auto_switch(policy, off, terms)
            .await
            .unwrap_or_else(|e| panic!("auto_switch failed: {e}"));
    }

    fn auto_store(&self) -> Arc<dyn AutoStore> {
        Arc::clone(&self.store)
            .auto()
            .expect("an auto call: the store takes no shared capacity decisions")
    }

    async fn capacity(&self, policy: &RoomPolicy) -> u32 {
        self.stats(policy).await.settings.capacity
    }
}

/// Counts as a gateway reports them: `ok` requests at `ms`, `errors` failed, a load.
fn counts(ok: u64, ms: u64, errors: u64, load: Option<u8>) -> Window {
    let mut w = Window {
        ok,
        errors,
        timeouts: errors / 2,
        load,
        ..Window::default()
    };
    w.latencies.record_n(Duration::from_millis(ms), ok);
    w
}

/// Two gateways: the first to report holds the lease and alone is handed the window, once it
/// has lasted the window's length, with both gateways' counts in it (latencies merged, the
/// highest load); the next window starts empty.
pub async fn auto_one_lease_and_one_merged_window(h: &Harness) {
    if h.auto().is_none() {
        return;
    }
    let p = h.policy(10);
    let (a, b) = (GatewayId::random(), GatewayId::random());
    let start = h.now();
    let first = h.auto_report(&p, a, &counts(10, 20, 0, Some(40))).await;
    assert!(
        first.deciding && first.off.is_none() && first.window.is_none(),
        "{first:?}"
    );
    h.advance_ms(1_000);
    let other = h.auto_report(&p, b, &counts(30, 400, 4, Some(70))).await;
    assert!(!other.deciding && other.window.is_none(), "{other:?}");
    h.advance_ms(WINDOW_MS - 1_001);
    let early = h.auto_report(&p, a, &Window::default()).await;
    assert!(
        early.deciding && early.window.is_none(),
        "not over yet: {early:?}"
    );
    h.advance_ms(1);
    // The other gateway never gets the window, over or not.
    let not_b = h.auto_report(&p, b, &counts(0, 0, 2, None)).await;
    assert!(!not_b.deciding && not_b.window.is_none(), "{not_b:?}");
    let handed = h.auto_report(&p, a, &counts(5, 20, 0, None)).await;
    let w = handed.window.expect("the window, to the lease holder");
    assert_eq!((w.start_ms, w.end_ms), (start, start + WINDOW_MS));
    assert_eq!((w.ok, w.errors, w.timeouts), (45, 6, 3), "{w:?}");
    assert_eq!(w.latencies.count(), 45);
    assert_eq!(
        w.latencies.quantile(0.5),
        counts(1, 400, 0, None).latencies.quantile(0.5)
    );
    assert_eq!(w.load, Some(70));
    assert_eq!(
        (w.inside, w.waiting),
        (0.0, 0),
        "the decider reads those from the room"
    );
    // The next window starts empty, now.
    h.advance_ms(WINDOW_MS);
    let next = h.auto_report(&p, a, &Window::default()).await;
    let w = next.window.expect("the next window");
    assert_eq!(
        (w.start_ms, w.samples(), w.load),
        (start + WINDOW_MS, 0, None)
    );
}

/// A holder that stops reporting keeps the lease until it runs out, then the next reporter
/// takes it, with the counts gathered meanwhile; the old holder's decision is refused.
pub async fn auto_lease_runs_out_and_passes_on(h: &Harness) {
    if h.auto().is_none() {
        return;
    }
    let p = h.policy(4);
    let (a, b) = (GatewayId::random(), GatewayId::random());
    assert!(h.auto_report(&p, a, &counts(1, 10, 0, None)).await.deciding);
    h.advance_ms(LEASE_MS - 1);
    assert!(!h.auto_report(&p, b, &counts(7, 10, 0, None)).await.deciding);
    h.advance_ms(1);
    let taken = h.auto_report(&p, b, &counts(2, 10, 0, None)).await;
    assert!(taken.deciding, "the lease ran out: {taken:?}");
    let w = taken.window.expect("a window long over");
    assert_eq!(
        w.ok, 10,
        "nothing reported is lost when the decider changes"
    );
    let old = h.auto_report(&p, a, &Window::default()).await;
    assert!(!old.deciding, "{old:?}");
    assert_eq!(
        h.auto_apply(&p, a, 9, "old").await,
        AutoApplied::NotDeciding
    );
    assert_eq!(h.capacity(&p).await, 4, "nothing written");
    assert_eq!(
        h.auto_apply(&p, b, 5, "new").await,
        AutoApplied::Applied { before: 4 }
    );
}

/// A decision is written as `configure` writes a capacity: a raise lets the next waiters in
/// at once; every gateway's report carries the status written with it; a capacity of 0 is
/// refused and writes nothing.
pub async fn auto_apply_writes_the_capacity_and_lets_people_in(h: &Harness) {
    if h.auto().is_none() {
        return;
    }
    let p = h.policy(1);
    h.enter(&p, SessionId::random()).await;
    for _ in 0..3 {
        h.enter(&p, SessionId::random()).await;
    }
    let (a, b) = (GatewayId::random(), GatewayId::random());
    assert!(h.auto_report(&p, a, &Window::default()).await.deciding);
    assert_eq!(
        h.auto_apply(&p, a, 3, "d1 grew").await,
        AutoApplied::Applied { before: 1 }
    );
    let stats = h.stats(&p).await;
    assert_eq!(stats.settings.capacity, 3);
    assert_eq!((stats.admitted, stats.granted, stats.waiting), (1, 2, 1));
    let seen = h.auto_report(&p, b, &Window::default()).await;
    assert_eq!(seen.status.as_deref(), Some("d1 grew"));
    assert!(h
        .auto_store()
        .auto_apply(&p, a, 0, None, "zero")
        .await
        .is_err());
    let no_rate = h.auto_store().auto_apply(&p, a, 2, Some(0), "zero");
    assert!(no_rate.await.is_err());
    let too_long = "x".repeat(crate::store::MAX_AUTO_STATUS + 1);
    assert!(h
        .auto_store()
        .auto_apply(&p, a, 2, None, &too_long)
        .await
        .is_err());
    assert_eq!(h.capacity(&p).await, 3, "a refused decision writes nothing");
    // The same capacity again: written (nothing moves), the status kept.
    let same = h.auto_apply(&p, a, 3, "d1 held").await;
    assert_eq!(same, AutoApplied::Applied { before: 3 });
    let seen = h.auto_report(&p, b, &Window::default()).await;
    assert_eq!(seen.status.as_deref(), Some("d1 held"));
}

/// A capacity written by anyone else turns the controller off for every gateway at its next
/// decision, which writes nothing; switched back on, it goes on from that capacity.
pub async fn auto_someone_elses_capacity_turns_it_off(h: &Harness) {
    if h.auto().is_none() {
        return;
    }
    let p = h.policy(4);
    let (a, b) = (GatewayId::random(), GatewayId::random());
    assert!(h.auto_report(&p, a, &Window::default()).await.deciding);
    assert_eq!(
        h.auto_apply(&p, a, 5, "five").await,
        AutoApplied::Applied { before: 4 }
    );
    h.configure(&p, crate::store::SettingsChange::new().capacity(8))
        .await;
    assert_eq!(
        h.auto_apply(&p, a, 6, "six").await,
        AutoApplied::ChangedElsewhere
    );
    assert_eq!(
        h.capacity(&p).await,
        8,
        "the other writer's capacity stands"
    );
    let seen = h.auto_report(&p, b, &Window::default()).await;
    assert_eq!(seen.off, Some(AutoOff::ChangedElsewhere));
    assert_eq!(
        h.auto_apply(&p, a, 6, "six").await,
        AutoApplied::Off(AutoOff::ChangedElsewhere)
    );
    h.auto_switch(&p, None).await;
    assert_eq!(h.auto_report(&p, b, &Window::default()).await.off, None);
    assert_eq!(
        h.auto_apply(&p, a, 7, "seven").await,
        AutoApplied::Applied { before: 8 }
    );
    assert_eq!(h.capacity(&p).await, 7);
}

/// An operator's switch holds for every gateway: off, no decision is written and every report
/// says why (counts are still taken: they are the app's); on again, decisions are written from
/// the capacity the room has.
pub async fn auto_switch_holds_for_every_gateway(h: &Harness) {
    if h.auto().is_none() {
        return;
    }
    let p = h.policy(4);
    let (a, b) = (GatewayId::random(), GatewayId::random());
    assert!(h.auto_report(&p, a, &counts(3, 10, 0, None)).await.deciding);
    h.auto_switch(&p, Some(AutoOff::SetByHand)).await;
    h.configure(&p, crate::store::SettingsChange::new().capacity(9))
        .await;
    for g in [a, b] {
        let seen = h.auto_report(&p, g, &counts(1, 10, 0, None)).await;
        assert_eq!(seen.off, Some(AutoOff::SetByHand), "{seen:?}");
    }
    assert_eq!(
        h.auto_apply(&p, a, 2, "two").await,
        AutoApplied::Off(AutoOff::SetByHand)
    );
    assert_eq!(h.capacity(&p).await, 9);
    h.advance_ms(WINDOW_MS);
    let w = h.auto_report(&p, a, &Window::default()).await.window;
    assert_eq!(w.map(|w| w.ok), Some(5), "counted while off");
    h.auto_switch(&p, None).await;
    assert_eq!(
        h.auto_apply(&p, a, 10, "ten").await,
        AutoApplied::Applied { before: 9 }
    );
}

/// A clock that went back does not keep a dead holder's lease for as long as it went back,
/// nor a window from being handed over: a lease that ends further ahead than a lease lasts has
/// run out, and a window that begins in the future begins now.
pub async fn auto_a_clock_gone_back_holds_no_lease(h: &Harness) {
    if h.auto().is_none() {
        return;
    }
    let p = h.policy(4);
    let (a, b) = (GatewayId::random(), GatewayId::random());
    let start = h.now();
    assert!(h.auto_report(&p, a, &counts(1, 10, 0, None)).await.deciding);
    h.clock.set(start - 3_600_000);
    let taken = h.auto_report(&p, b, &counts(1, 10, 0, None)).await;
    assert!(taken.deciding, "{taken:?}");
    assert!(taken.window.is_none());
    h.advance_ms(WINDOW_MS);
    let w = h.auto_report(&p, b, &Window::default()).await.window;
    let w = w.expect("a window from when the clock went back");
    assert_eq!((w.start_ms, w.ok), (start - 3_600_000, 2));
}

/// A report with a window or lease of 0 or over an hour is refused, and takes nothing: not
/// the lease, not its counts.
pub async fn auto_refuses_bad_terms_and_takes_nothing(h: &Harness) {
    if h.auto().is_none() {
        return;
    }
    let p = h.policy(4);
    let (a, b) = (GatewayId::random(), GatewayId::random());
    let store = h.auto_store();
    for (window, lease) in [
        (0, LEASE_MS),
        (WINDOW_MS, 0),
        (3_600_001, LEASE_MS),
        (WINDOW_MS, u64::MAX),
    ] {
        let refused = store
            .auto_report(&p, a, &counts(50, 10, 5, None), window, lease)
            .await;
        assert!(refused.is_err(), "window {window}, lease {lease}");
    }
    assert!(
        h.auto_report(&p, b, &Window::default()).await.deciding,
        "the lease was free"
    );
    h.advance_ms(WINDOW_MS);
    let w = h
        .auto_report(&p, b, &Window::default())
        .await
        .window
        .unwrap();
    assert_eq!(w.samples(), 0, "{w:?}");
    // Nothing of the line was touched either.
    assert!(matches!(
        h.enter(&p, SessionId::random()).await,
        Decision::Admitted { .. }
    ));
}

/// Terms set with a switch are kept for every gateway, on or off, until others are set; a
/// switch without terms leaves them; terms over 200 bytes are refused and change nothing.
pub async fn auto_terms_are_kept_for_every_gateway(h: &Harness) {
    if h.auto().is_none() {
        return;
    }
    let p = h.policy(4);
    let (a, b) = (GatewayId::random(), GatewayId::random());
    let none = h.auto_report(&p, a, &Window::default()).await;
    assert_eq!(
        none.terms, None,
        "none set: each gateway decides by its own"
    );
    let first = "10-100, p95 250ms, errors 2%, window 5000ms";
    h.auto_switch_terms(&p, None, Some(first)).await;
    for g in [a, b] {
        let seen = h.auto_report(&p, g, &Window::default()).await;
        assert_eq!((seen.terms.as_deref(), seen.off), (Some(first), None));
    }
    h.auto_switch(&p, Some(AutoOff::SetByHand)).await;
    let off = h.auto_report(&p, b, &Window::default()).await;
    assert_eq!(
        (off.terms.as_deref(), off.off),
        (Some(first), Some(AutoOff::SetByHand))
    );
    let second = "10-200, p95 250ms, errors 2%, window 5000ms";
    h.auto_switch_terms(&p, Some(AutoOff::SetByHand), Some(second))
        .await;
    h.auto_switch(&p, None).await;
    let on = h.auto_report(&p, a, &Window::default()).await;
    assert_eq!((on.terms.as_deref(), on.off), (Some(second), None));
    let too_long = "x".repeat(crate::store::MAX_AUTO_STATUS + 1);
    let refused = h
        .auto_store()
        .auto_switch(&p, Some(AutoOff::SetByHand), Some(&too_long));
    assert!(refused.await.is_err());
    let kept = h.auto_report(&p, a, &Window::default()).await;
    assert_eq!(
        (kept.terms.as_deref(), kept.off),
        (Some(second), None),
        "nothing changed"
    );
}

/// A decision may carry the admission rate: written with the capacity, in the same step; one
/// without leaves the rate as it is.
pub async fn auto_apply_writes_the_rate_it_is_given(h: &Harness) {
    if h.auto().is_none() {
        return;
    }
    let p = h.policy(4).with_admission_rate(Some(2));
    let a = GatewayId::random();
    assert!(h.auto_report(&p, a, &Window::default()).await.deciding);
    let applied = h.auto_store().auto_apply(&p, a, 6, Some(3), "six").await;
    assert_eq!(applied.unwrap(), AutoApplied::Applied { before: 4 });
    let settings = h.stats(&p).await.settings;
    assert_eq!((settings.capacity, settings.admission_rate), (6, Some(3)));
    let same = h.auto_apply(&p, a, 6, "held").await;
    assert_eq!(same, AutoApplied::Applied { before: 6 });
    assert_eq!(h.stats(&p).await.settings.admission_rate, Some(3));
    // Only the rate: written all the same.
    let rate_only = h.auto_store().auto_apply(&p, a, 6, Some(5), "rate").await;
    assert_eq!(rate_only.unwrap(), AutoApplied::Applied { before: 6 });
    assert_eq!(h.stats(&p).await.settings.admission_rate, Some(5));
}
