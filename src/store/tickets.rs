//! Single-use checkout tickets in the store: the [`TicketStore`] capability, its
//! [`TicketNonce`], and the answers of its two operations ([`Minted`], [`Redeemed`]).

use super::StoreFuture;
use crate::config::RoomPolicy;
use crate::session::SessionId;
pub use crate::vocab::TicketNonce;

/// A store's single-use tickets: an optional capability of a [`Store`](super::Store), found by
/// [`Store::tickets`](super::Store::tickets).
///
/// A room with [`single_use_tickets`](crate::WaitingRoomBuilder::single_use_tickets) on asks the
/// store for a ticket when it admits a visitor, and again whenever a heartbeat extends the slot.
/// The store keeps one record per session while the admission lasts: the ticket's nonce, unused
/// or used. Each mint extends the record to the slot's new expiry (never earlier), so it lives as
/// long as the slot; [`release`](super::Store::release) and [`ban`](super::Store::ban) end it
/// with the slot, so the session's next admission gets a new ticket. Redeeming turns an unused
/// record into a used one in one atomic step, so of any number of concurrent uses of one ticket,
/// on any number of gateways, exactly one is accepted; and only while the session still holds
/// its claimed slot, so a ticket never lets anyone past the room's capacity after its visitor
/// left.
///
/// A record that is lost or cannot be read is never a way to a second ticket: the room says
/// whether it mints for an admission just made or for one that goes on ([`MintFor`]), and a
/// record missing while the admission goes on, or damaged, reads as used.
///
/// ```
/// use tower_waiting_room::testing::ManualClock;
/// use tower_waiting_room::store::{
///     Decision, MemoryStore, MintFor, Minted, Redeemed, Store, TicketNonce, TicketStore,
/// };
/// use tower_waiting_room::{RoomPolicy, SessionId};
///
/// # tokio_test_block_on(async {
/// let store = MemoryStore::with_clock(ManualClock::new(1_000));
/// let policy = RoomPolicy::new("shop", 10);
/// let session = SessionId::random();
/// // Tickets come with an admission: the session holds a slot.
/// assert!(matches!(store.enter(&policy, session).await?, Decision::Admitted { .. }));
/// // One ticket per admission: the admission's mint makes it; a renewal's (a heartbeat's)
/// // answers the same nonce, its record extended to the later expiry (the slot's, renewed),
/// // never shortened.
/// let mint = |expires_at_ms, mint_for| {
///     store.mint_ticket(&policy, session, TicketNonce::random(), expires_at_ms, mint_for)
/// };
/// let Minted::Ticket { nonce, .. } = mint(61_000, MintFor::Admission).await? else {
///     panic!("a fresh record")
/// };
/// let again = mint(90_000, MintFor::Renewal).await?;
/// assert_eq!(again, Minted::Ticket { nonce, expires_at_ms: 90_000 });
/// let earlier = mint(61_000, MintFor::Renewal).await?;
/// assert_eq!(earlier, Minted::Ticket { nonce, expires_at_ms: 90_000 });
/// // Exactly one redeem is accepted; a replay is told the ticket was used.
/// assert_eq!(store.redeem_ticket(&policy, session, nonce).await?, Redeemed::Accepted);
/// assert_eq!(store.redeem_ticket(&policy, session, nonce).await?, Redeemed::Used);
/// // No second ticket for the same admission.
/// assert_eq!(mint(90_000, MintFor::Renewal).await?, Minted::Used);
/// // Ending the slot ends its ticket: the next admission gets a new one.
/// store.release(&policy, session).await?;
/// assert!(matches!(store.enter(&policy, session).await?, Decision::Admitted { .. }));
/// let fresh = TicketNonce::random();
/// let next = store.mint_ticket(&policy, session, fresh, 61_000, MintFor::Admission).await?;
/// assert_eq!(next, Minted::Ticket { nonce: fresh, expires_at_ms: 61_000 });
/// # Ok::<_, tower_waiting_room::store::StoreError>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
///
/// The exact rules are in the [store docs](super) (single-use tickets); the conformance suite
/// checks them (`testing::conformance`, feature `testing`).
pub trait TicketStore: Send + Sync {
    /// The session's single-use ticket of this admission, for the admission just made or for
    /// one that goes on (`mint_for`):
    /// - a live record, not ended: its nonce while unused, [`Minted::Used`] once used, either
    ///   way its expiry moved to `expires_at_ms` if that is later, never earlier;
    /// - no live record (none, or expired), or one ended by [`release`](super::Store::release)
    ///   or [`ban`](super::Store::ban): for [`MintFor::Admission`], a new record holding
    ///   `fresh`, expiring at `expires_at_ms` (the slot's expiry); for [`MintFor::Renewal`],
    ///   [`Minted::Used`]: the admission had its ticket, so a missing record was lost, and is
    ///   written back as a used record that no nonce redeems, expiring at `expires_at_ms` (an
    ///   ended one is kept as it is);
    /// - a record the store cannot read (damaged, in a store that keeps text): [`Minted::Used`],
    ///   written back as that used record (or dropped if `expires_at_ms` is already past).
    ///
    /// One ticket per admission, however often it is asked, whatever was lost.
    fn mint_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
        mint_for: MintFor,
    ) -> StoreFuture<Minted>;

    /// Uses the session's ticket `nonce`, atomically: [`Redeemed::Accepted`] exactly once (the
    /// record becomes used), then [`Redeemed::Used`]; [`Redeemed::Unknown`] without a live
    /// record of that nonce; [`Redeemed::SlotEnded`] for an unused ticket whose session holds no
    /// claimed slot any more, or whose record was ended by a release or a ban (whatever slot
    /// the session holds now: that is a later admission's). An accepted record lives at least
    /// as long as the slot it was used in. [`Redeemed::Used`] too, for any nonce, when the
    /// record is a used one written in place of a lost or damaged one (its nonce is not known),
    /// and when the store cannot read the record: that one is written back as such a used
    /// record, ending with the slot, or dropped if the session holds no slot.
    fn redeem_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        nonce: TicketNonce,
    ) -> StoreFuture<Redeemed>;
}

/// Which mint a room asks [`TicketStore::mint_ticket`] for: it decides what a missing record
/// means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MintFor {
    /// The store has just admitted the session (a new slot, a claimed grant; also a slot found
    /// again by a visitor without an admission token): the admission's first mint. Without a
    /// live record, a new ticket is made.
    Admission,
    /// The admission goes on: a heartbeat that extended the slot, or the status endpoint asked
    /// by a visitor holding an admission token. Its ticket was minted when it was admitted, so
    /// a missing record was lost (evicted, deleted), and reads as used: never a second ticket
    /// for the same admission.
    Renewal,
}

/// What [`TicketStore::mint_ticket`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Minted {
    /// The session's unused ticket: the nonce and expiry given (a new record), or those of the
    /// record already held (its expiry moved to the one given, if that is later).
    Ticket {
        /// The record's nonce.
        nonce: TicketNonce,
        /// When the record ends (ms since the epoch): the signed ticket's expiry.
        expires_at_ms: u64,
    },
    /// The session's ticket of this admission was already used, or cannot be shown unused (its
    /// record lost while the admission goes on, or damaged): no new one until the record ends
    /// (with the slot: its expiry, a release or a ban).
    Used,
}

/// What [`TicketStore::redeem_ticket`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Redeemed {
    /// The ticket was unused and is now used: this use, and no other, goes through.
    Accepted,
    /// The ticket was used before.
    Used,
    /// The ticket is unused, but its session no longer holds a claimed slot (it left, was
    /// dropped or closed out, or the app ended the slot), or no longer the one the ticket came
    /// with: refused, and left unused. A ticket works only while the admission it came with
    /// does.
    SlotEnded,
    /// The store holds no such ticket: none for the session, another nonce, or expired.
    Unknown,
}

/// Most expired ticket records a store drops in one call, so a call's work stays bounded
/// (records also expire by themselves in Redis).
pub(crate) const MAX_TICKET_SWEEP_PER_CALL: u32 = 100;
