//! Single-use tickets ([`TicketStore::mint_ticket`], [`TicketStore::redeem_ticket`]): one
//! ticket per session and admission, living as long as the slot (a mint extends it), used
//! exactly once whatever the concurrency, only while its session holds its slot, and ended with
//! the slot by `release` and `ban`, and never minted a second time for one admission, whatever
//! was lost. Each case runs on a store that keeps tickets ([`Harness::tickets`]), and is
//! skipped on one that does not.

use std::sync::Arc;

use super::{admitted, Damage, Harness, ACTIVE_MS};
use crate::store::{Decision, MintFor, Minted, Redeemed, TicketNonce, TicketStore};
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
        mint_for: MintFor,
    ) -> Minted {
        self.ticket_store()
            .mint_ticket(policy, session, fresh, expires_at_ms, mint_for)
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
        let minted = self
            .mint_ticket(policy, session, fresh, expires, MintFor::Admission)
            .await;
        let stored = Minted::Ticket {
            nonce: fresh,
            expires_at_ms: expires,
        };
        assert_eq!(minted, stored, "a first mint stores its nonce and expiry");
        fresh
    }
}

/// Minting again while the record lives answers the first nonce, not the new one, whichever
/// mint it is: two gateways minting at once agree on one ticket, and a reload does not make a
/// second. An expiry no later than the record's leaves it as it is.
pub async fn ticket_mint_is_idempotent(h: &Harness) {
    if h.tickets().is_none() {
        return;
    }
    let p = h.policy(10);
    let s = SessionId::random();
    let expires = h.now() + ACTIVE_MS;
    let first = h.fresh_ticket(&p, s).await;
    h.advance_ms(1_000);
    for mint_for in [MintFor::Admission, MintFor::Renewal, MintFor::Admission] {
        let again = h
            .mint_ticket(&p, s, TicketNonce::random(), expires, mint_for)
            .await;
        let want = Minted::Ticket {
            nonce: first,
            expires_at_ms: expires,
        };
        assert_eq!(again, want, "a second mint ({mint_for:?})");
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
    let renew = |s, fresh, expires| h.mint_ticket(&p, s, fresh, expires, MintFor::Renewal);
    let again = renew(s, TicketNonce::random(), extended).await;
    assert_eq!(again, same(extended), "extended with the slot");
    for earlier in [first_expiry, h.now() + 1, h.now()] {
        let again = renew(s, TicketNonce::random(), earlier).await;
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
    assert_eq!(renew(s, fresh, last).await, Minted::Used);
    h.advance_ms(extended - h.now());
    for mint_for in [MintFor::Renewal, MintFor::Admission] {
        let again = h
            .mint_ticket(&p, s, TicketNonce::random(), last, mint_for)
            .await;
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
        // A renewal's mint that comes after the end (a heartbeat that raced the release) is no
        // admission's: it answers "used", and leaves the ended record as it is.
        for s in [unused, used] {
            let late = h
                .mint_ticket(
                    &p,
                    s,
                    TicketNonce::random(),
                    h.now() + ACTIVE_MS,
                    MintFor::Renewal,
                )
                .await;
            assert_eq!(late, Minted::Used, "{ending}: a renewal after the end");
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
            let minted = h
                .mint_ticket(&p, s, fresh, expires, MintFor::Admission)
                .await;
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
    h.mint_ticket(&p, s, stray, h.now() + ACTIVE_MS, MintFor::Admission)
        .await;
    assert!(!h.release(&p, s).await);
    let fresh = TicketNonce::random();
    let minted = h
        .mint_ticket(&p, s, fresh, h.now() + ACTIVE_MS, MintFor::Admission)
        .await;
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
    for mint_for in [MintFor::Renewal, MintFor::Admission] {
        let after = h
            .mint_ticket(&p, s, TicketNonce::random(), h.now() + ACTIVE_MS, mint_for)
            .await;
        assert_eq!(
            after,
            Minted::Used,
            "no second ticket in one admission window ({mint_for:?})"
        );
    }
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
        h.mint_ticket(&p, late, fresh, now, MintFor::Admission)
            .await,
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
    h.mint_ticket(&p, stranger, fresh, h.now() + ACTIVE_MS, MintFor::Admission)
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
    h.mint_ticket(
        &p,
        outlived,
        fresh,
        h.now() + 2 * ACTIVE_MS,
        MintFor::Admission,
    )
    .await;
    h.advance_ms(ACTIVE_MS);
    assert_eq!(
        h.redeem_ticket(&p, outlived, fresh).await,
        Redeemed::SlotEnded
    );
}

/// A ticket record lost while its admission goes on (a Redis key evicted or deleted) is never a
/// second ticket: the renewal's mint at the next heartbeat knows the admission had its ticket,
/// so it answers "used" (not a fresh ticket) and writes a used record back, for as long as the
/// slot lives; every ticket of the session is then told "used", the one already used as well
/// as one never used (it cannot be shown unused any more). The admission's first mint still
/// makes a new ticket, and so does the session's next admission once the slot ended.
pub async fn a_lost_ticket_record_is_never_a_second_ticket(h: &Harness) {
    if h.tickets().is_none() {
        return;
    }
    let p = h.policy(10);
    let (used, unused) = (SessionId::random(), SessionId::random());
    let a = h.fresh_ticket(&p, used).await;
    let b = h.fresh_ticket(&p, unused).await;
    assert_eq!(h.redeem_ticket(&p, used, a).await, Redeemed::Accepted);
    for s in [used, unused] {
        if !h.damage(&p, Damage::TicketLost(s)).await {
            return;
        }
    }
    h.advance_ms(ACTIVE_MS / 2);
    let renewed = admitted(h.heartbeat(&p, used).await, "a heartbeat");
    admitted(h.heartbeat(&p, unused).await, "a heartbeat");
    let stray = TicketNonce::random();
    for s in [used, unused] {
        let minted = h.mint_ticket(&p, s, stray, renewed, MintFor::Renewal).await;
        assert_eq!(minted, Minted::Used, "a lost record renewed is used");
    }
    for (s, nonce) in [(used, a), (unused, b), (used, stray), (unused, stray)] {
        assert_eq!(h.redeem_ticket(&p, s, nonce).await, Redeemed::Used);
    }
    // It sticks, whichever mint comes next, and lives with the slot.
    h.advance_ms(ACTIVE_MS / 2);
    let last = admitted(h.heartbeat(&p, used).await, "a heartbeat");
    for mint_for in [MintFor::Renewal, MintFor::Admission] {
        let again = h
            .mint_ticket(&p, used, TicketNonce::random(), last, mint_for)
            .await;
        assert_eq!(again, Minted::Used, "{mint_for:?}");
    }
    assert_eq!(h.redeem_ticket(&p, used, a).await, Redeemed::Used);
    // The slot ends: the next admission gets a new ticket, which passes once.
    assert!(h.release(&p, used).await, "the slot was held");
    assert_eq!(h.redeem_ticket(&p, used, a).await, Redeemed::Used);
    h.advance_ms(1_000);
    let fresh = h.fresh_ticket(&p, used).await;
    assert_eq!(h.redeem_ticket(&p, used, fresh).await, Redeemed::Accepted);
    assert_eq!(h.redeem_ticket(&p, used, fresh).await, Redeemed::Used);
    assert_eq!(h.redeem_ticket(&p, used, a).await, Redeemed::Unknown);
    // The record written for the lost one ends at the expiry it was given.
    h.advance_ms(renewed - h.now());
    assert_eq!(h.redeem_ticket(&p, unused, b).await, Redeemed::Unknown);
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
