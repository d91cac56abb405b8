//! Single-use tickets ([`TicketStore::mint_ticket`], [`TicketStore::redeem_ticket`]): one
//! ticket per session and admission, living as long as the slot (a mint extends it), used
//! exactly once whatever the concurrency, only while its session holds its slot, and ended with
//! the slot by `release` and `ban`. Each case runs on a store that keeps tickets
//! ([`Harness::tickets`]), and is skipped on one that does not.

use std::sync::Arc;

use super::{admitted, Harness, ACTIVE_MS};
use crate::store::{Decision, Minted, Redeemed, TicketNonce, TicketStore};
use crate::{RoomPolicy, SessionId};

impl Harness {
    /// `mint_ticket`, failing the test on a store error, or if the store keeps no tickets (a
    /// case asks [`tickets`](Self::tickets) first).
    pub async fn mint_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
    ) -> Minted {
        self.ticket_store()
            .mint_ticket(policy, session, fresh, expires_at_ms)
            .await
            .unwrap_or_else(|e| panic!("mint_ticket failed: {e}"))
    }

    /// `redeem_ticket`, failing the test on a store error, or if the store keeps no tickets.
    pub async fn redeem_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        nonce: TicketNonce,
    ) -> Redeemed {
        self.ticket_store()
            .redeem_ticket(policy, session, nonce)
            .await
            .unwrap_or_else(|e| panic!("redeem_ticket failed: {e}"))
    }

    fn ticket_store(&self) -> Arc<dyn TicketStore> {
        Arc::clone(&self.store)
            .tickets()
            .expect("a ticket call: the store keeps no tickets")
    }

    /// `session` admitted (a slot of its own, taken now), and a fresh ticket of it expiring
    /// with the slot, as a room mints it at admission; fails the test unless the store admitted
    /// the session and made a new record with the nonce it was given.
    async fn fresh_ticket(&self, policy: &RoomPolicy, session: SessionId) -> TicketNonce {
        let expires = match self.store.enter(policy, session).await {
            Ok(Decision::Admitted { expires_at_ms }) => expires_at_ms,
            other => panic!("a ticket's session is admitted first: got {other:?}"),
        };
        assert_eq!(expires, self.now() + ACTIVE_MS);
        let fresh = TicketNonce::random();
        let minted = self.mint_ticket(policy, session, fresh, expires).await;
        let stored = Minted::Ticket {
            nonce: fresh,
            expires_at_ms: expires,
        };
        assert_eq!(minted, stored, "a first mint stores its nonce and expiry");
        fresh
    }
}

/// Minting again while the record lives answers the first nonce, not the new one: two gateways
/// minting at once agree on one ticket, and a reload does not make a second. An expiry no later
/// than the record's leaves it as it is.
pub async fn ticket_mint_is_idempotent(h: &Harness) {
    if h.tickets().is_none() {
        return;
    }
    let p = h.policy(10);
    let s = SessionId::random();
    let expires = h.now() + ACTIVE_MS;
    let first = h.fresh_ticket(&p, s).await;
    h.advance_ms(1_000);
    for _ in 0..3 {
        let again = h.mint_ticket(&p, s, TicketNonce::random(), expires).await;
        let want = Minted::Ticket {
            nonce: first,
            expires_at_ms: expires,
        };
        assert_eq!(again, want, "a second mint");
    }
    // Another session gets a ticket of its own.
    let other = h.fresh_ticket(&p, SessionId::random()).await;
    assert_ne!(other, first);
}

/// A mint extends the live record to the expiry it is given when that is later, never earlier,
/// and answers the record as it is (the same nonce; or "used"): the room mints again whenever a
/// heartbeat extends the slot, so the ticket lives as long as the slot, and a used one stays
/// used for the whole admission (no second ticket after the first expiry).
pub async fn ticket_mint_extends_and_never_shortens(h: &Harness) {
    if h.tickets().is_none() {
        return;
    }
    let p = h.policy(10);
    let s = SessionId::random();
    let first_expiry = h.now() + ACTIVE_MS;
    let nonce = h.fresh_ticket(&p, s).await;
    h.advance_ms(ACTIVE_MS / 2);
    let extended = admitted(h.heartbeat(&p, s).await, "a heartbeat");
    assert!(extended > first_expiry);
    let same = |expires_at_ms| Minted::Ticket {
        nonce,
        expires_at_ms,
    };
    let again = h.mint_ticket(&p, s, TicketNonce::random(), extended).await;
    assert_eq!(again, same(extended), "extended with the slot");
    for earlier in [first_expiry, h.now() + 1, h.now()] {
        let again = h.mint_ticket(&p, s, TicketNonce::random(), earlier).await;
        assert_eq!(again, same(extended), "never shortened ({earlier})");
    }
    // Past its first expiry, the ticket lives on with the slot, and is used once.
    h.advance_ms(ACTIVE_MS / 2);
    assert_eq!(h.now(), first_expiry);
    assert_eq!(h.redeem_ticket(&p, s, nonce).await, Redeemed::Accepted);
    // Used, then extended with the slot again: still used, for as long as the slot lives.
    h.advance_ms(ACTIVE_MS / 4);
    let last = admitted(h.heartbeat(&p, s).await, "a heartbeat after the use");
    let fresh = TicketNonce::random();
    assert_eq!(h.mint_ticket(&p, s, fresh, last).await, Minted::Used);
    h.advance_ms(extended - h.now());
    for _ in 0..2 {
        let again = h.mint_ticket(&p, s, TicketNonce::random(), last).await;
        assert_eq!(again, Minted::Used, "no second ticket in one admission");
        assert_eq!(h.redeem_ticket(&p, s, nonce).await, Redeemed::Used);
    }
    assert_eq!(h.redeem_ticket(&p, s, fresh).await, Redeemed::Unknown);
    // The record ends with the slot's last expiry.
    h.advance_ms(last - h.now());
    assert_eq!(h.redeem_ticket(&p, s, nonce).await, Redeemed::Unknown);
}

/// `release` and `ban` end the session's ticket record in the same step: its ticket never
/// passes again (an unused one is told `SlotEnded`, a used one `Used`), not even once the
/// session holds a slot again, and the session's next admission gets a new ticket that is used
/// once.
pub async fn release_and_ban_end_the_ticket(h: &Harness) {
    if h.tickets().is_none() {
        return;
    }
    let p = h.policy(10);
    for ending in ["release", "ban"] {
        let (unused, used) = (SessionId::random(), SessionId::random());
        let a = h.fresh_ticket(&p, unused).await;
        let b = h.fresh_ticket(&p, used).await;
        assert_eq!(h.redeem_ticket(&p, used, b).await, Redeemed::Accepted);
        for s in [unused, used] {
            let ended = match ending {
                "release" => h.release(&p, s).await,
                _ => h.ban(&p, s, h.now() + 1_000).await,
            };
            assert!(ended, "{ending}: the slot was held");
        }
        assert_eq!(h.redeem_ticket(&p, unused, a).await, Redeemed::SlotEnded);
        assert_eq!(h.redeem_ticket(&p, used, b).await, Redeemed::Used);
        h.advance_ms(1_000);
        // Admitted again: the old ticket does not pass on the new slot, before or after the
        // new admission's mint; the new ticket passes once.
        for (s, old, told) in [(unused, a, Redeemed::SlotEnded), (used, b, Redeemed::Used)] {
            admitted(h.enter(&p, s).await, "admitted again");
            let stale = h.redeem_ticket(&p, s, old).await;
            assert_eq!(stale, told, "{ending}: the old ticket on the new slot");
            let fresh = TicketNonce::random();
            let expires = h.now() + ACTIVE_MS;
            let minted = h.mint_ticket(&p, s, fresh, expires).await;
            let want = Minted::Ticket {
                nonce: fresh,
                expires_at_ms: expires,
            };
            assert_eq!(minted, want, "{ending}: a new ticket for the new admission");
            assert_eq!(h.redeem_ticket(&p, s, old).await, Redeemed::Unknown);
            assert_eq!(h.redeem_ticket(&p, s, fresh).await, Redeemed::Accepted);
            assert_eq!(h.redeem_ticket(&p, s, fresh).await, Redeemed::Used);
        }
    }
    // A release that finds no slot ends the record all the same (it is no admission's now).
    let s = SessionId::random();
    let stray = TicketNonce::random();
    h.mint_ticket(&p, s, stray, h.now() + ACTIVE_MS).await;
    assert!(!h.release(&p, s).await);
    let fresh = TicketNonce::random();
    let minted = h.mint_ticket(&p, s, fresh, h.now() + ACTIVE_MS).await;
    assert!(
        matches!(minted, Minted::Ticket { nonce, .. } if nonce == fresh),
        "{minted:?}"
    );
}

/// A redeem is accepted once; a replay is told the ticket was used; minting after the use
/// gives no new ticket while the record lives.
pub async fn ticket_is_redeemed_exactly_once(h: &Harness) {
    if h.tickets().is_none() {
        return;
    }
    let p = h.policy(1);
    let s = SessionId::random();
    let nonce = h.fresh_ticket(&p, s).await;
    assert_eq!(h.redeem_ticket(&p, s, nonce).await, Redeemed::Accepted);
    for _ in 0..3 {
        assert_eq!(
            h.redeem_ticket(&p, s, nonce).await,
            Redeemed::Used,
            "replay"
        );
    }
    h.advance_ms(ACTIVE_MS / 2);
    let after = h
        .mint_ticket(&p, s, TicketNonce::random(), h.now() + ACTIVE_MS)
        .await;
    assert_eq!(
        after,
        Minted::Used,
        "no second ticket in one admission window"
    );
    assert_eq!(h.redeem_ticket(&p, s, nonce).await, Redeemed::Used);
}

/// A nonce the store does not hold for the session is unknown, and changes nothing: the real
/// ticket is still accepted afterwards. So is a ticket of a session without a record, or of
/// another room.
pub async fn ticket_of_another_nonce_session_or_room_is_unknown(h: &Harness) {
    if h.tickets().is_none() {
        return;
    }
    let p = h.policy(10);
    let s = SessionId::random();
    let nonce = h.fresh_ticket(&p, s).await;
    for _ in 0..3 {
        let forged = TicketNonce::random();
        assert_eq!(h.redeem_ticket(&p, s, forged).await, Redeemed::Unknown);
    }
    let stranger = SessionId::random();
    assert_eq!(
        h.redeem_ticket(&p, stranger, nonce).await,
        Redeemed::Unknown
    );
    let elsewhere = h.policy(1);
    assert_eq!(
        h.redeem_ticket(&elsewhere, s, nonce).await,
        Redeemed::Unknown
    );
    assert_eq!(h.redeem_ticket(&p, s, nonce).await, Redeemed::Accepted);
    // Used: another nonce is still unknown, not "used".
    assert_eq!(
        h.redeem_ticket(&p, s, TicketNonce::random()).await,
        Redeemed::Unknown
    );
}

/// A record ends at the expiry it was minted with, used or not: its ticket is unknown then,
/// and the session's next mint (a later admission) makes a new ticket.
pub async fn ticket_records_expire(h: &Harness) {
    if h.tickets().is_none() {
        return;
    }
    let p = h.policy(10);
    let (unused, used) = (SessionId::random(), SessionId::random());
    let a = h.fresh_ticket(&p, unused).await;
    let b = h.fresh_ticket(&p, used).await;
    assert_eq!(h.redeem_ticket(&p, used, b).await, Redeemed::Accepted);
    h.advance_ms(ACTIVE_MS - 1);
    assert_eq!(h.redeem_ticket(&p, used, b).await, Redeemed::Used);
    h.advance_ms(1);
    assert_eq!(h.redeem_ticket(&p, unused, a).await, Redeemed::Unknown);
    assert_eq!(h.redeem_ticket(&p, used, b).await, Redeemed::Unknown);
    let renewed = h.fresh_ticket(&p, used).await;
    assert_ne!(renewed, b);
    assert_eq!(h.redeem_ticket(&p, used, renewed).await, Redeemed::Accepted);
    // An expiry already past stores nothing: the nonce is answered, but cannot be redeemed.
    let late = SessionId::random();
    let fresh = TicketNonce::random();
    let now = h.now();
    assert_eq!(
        h.mint_ticket(&p, late, fresh, now).await,
        Minted::Ticket {
            nonce: fresh,
            expires_at_ms: now
        }
    );
    assert_eq!(h.redeem_ticket(&p, late, fresh).await, Redeemed::Unknown);
}

/// An unused ticket works only while its session holds its claimed slot: after a release, a
/// ban or the slot's expiry it is refused ([`Redeemed::SlotEnded`]) and stays unused, so a
/// visitor who left cannot get anyone past the capacity with it. A used ticket still says
/// "used".
pub async fn ticket_needs_its_sessions_slot(h: &Harness) {
    if h.tickets().is_none() {
        return;
    }
    let p = h.policy(10);
    let (left, banned, used) = (
        SessionId::random(),
        SessionId::random(),
        SessionId::random(),
    );
    let a = h.fresh_ticket(&p, left).await;
    let b = h.fresh_ticket(&p, banned).await;
    let c = h.fresh_ticket(&p, used).await;
    assert_eq!(h.redeem_ticket(&p, used, c).await, Redeemed::Accepted);
    assert!(h.store.release(&p, left).await.expect("release"));
    assert!(h.ban(&p, banned, h.now() + ACTIVE_MS).await);
    assert!(h.store.release(&p, used).await.expect("release"));
    for _ in 0..2 {
        assert_eq!(h.redeem_ticket(&p, left, a).await, Redeemed::SlotEnded);
        assert_eq!(h.redeem_ticket(&p, banned, b).await, Redeemed::SlotEnded);
        assert_eq!(h.redeem_ticket(&p, used, c).await, Redeemed::Used);
    }
    // A record whose session never held a slot.
    let stranger = SessionId::random();
    let fresh = TicketNonce::random();
    h.mint_ticket(&p, stranger, fresh, h.now() + ACTIVE_MS)
        .await;
    assert_eq!(
        h.redeem_ticket(&p, stranger, fresh).await,
        Redeemed::SlotEnded
    );
    // A record that outlives its slot: the slot expired (no call has swept it yet).
    let outlived = SessionId::random();
    let d = h.store.enter(&p, outlived).await.expect("enter");
    assert!(matches!(d, Decision::Admitted { .. }), "{d:?}");
    let fresh = TicketNonce::random();
    h.mint_ticket(&p, outlived, fresh, h.now() + 2 * ACTIVE_MS)
        .await;
    h.advance_ms(ACTIVE_MS);
    assert_eq!(
        h.redeem_ticket(&p, outlived, fresh).await,
        Redeemed::SlotEnded
    );
}

/// Many tasks redeeming one ticket at once: exactly one is accepted, every other is told it
/// was used.
pub async fn concurrent_redeems_accept_exactly_once(h: &Harness) {
    let Some(tickets) = h.tickets() else {
        return;
    };
    const TASKS: usize = 32;
    let p = Arc::new(h.policy(10));
    for _ in 0..3 {
        let s = SessionId::random();
        let nonce = h.fresh_ticket(&p, s).await;
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..TASKS {
            let (store, p) = (tickets.clone(), p.clone());
            tasks.spawn(async move { store.redeem_ticket(&p, s, nonce).await.expect("redeem") });
        }
        let (mut accepted, mut used) = (0, 0);
        while let Some(answer) = tasks.join_next().await {
            match answer.expect("task") {
                Redeemed::Accepted => accepted += 1,
                Redeemed::Used => used += 1,
                other => panic!("a concurrent redeem got {other:?}"),
            }
        }
        assert_eq!((accepted, used), (1, TASKS - 1));
    }
}
