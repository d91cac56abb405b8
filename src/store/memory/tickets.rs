//! The embedded store's single-use ticket records: the same facts as the Redis store's ticket
//! keys (nonce, used or not, ended with its slot or not, expiry), with an index by expiry so
//! that expired records are dropped oldest first, a bounded number per call. A record here is
//! a typed value, so it is never damaged, but it can be lost (the conformance suite's damage
//! hook drops one, as a Redis key is evicted or deleted): a renewal's mint then writes a used
//! record of no known nonce, as the Redis functions do.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::session::SessionId;
use crate::store::{MintFor, Minted, Redeemed, TicketNonce, MAX_TICKET_SWEEP_PER_CALL};

/// One session's ticket in one room.
#[derive(Clone, Copy)]
struct Record {
    /// `None` for a used record written in place of a lost one (Redis: the nonce `0`): its
    /// nonce is not known, so every ticket of the session reads as used.
    nonce: Option<TicketNonce>,
    used: bool,
    /// The slot it came with was released or banned: its ticket never passes again, and the
    /// session's next admission's mint replaces it with a fresh record.
    ended: bool,
    expires_at_ms: u64,
}

/// Every room's ticket records. A record past its expiry counts as none, whether or not it
/// has been dropped yet.
#[derive(Default)]
pub(super) struct Tickets {
    records: HashMap<(Arc<str>, SessionId), Record>,
    /// The records by expiry, for the sweep.
    by_expiry: BTreeSet<(u64, Arc<str>, SessionId)>,
}

impl Tickets {
    /// Drops up to [`MAX_TICKET_SWEEP_PER_CALL`] expired records, oldest first. Each call adds
    /// at most one record, so expired ones never pile up.
    fn sweep(&mut self, now: u64) {
        for _ in 0..MAX_TICKET_SWEEP_PER_CALL {
            match self.by_expiry.first() {
                Some((expires, _, _)) if *expires <= now => {}
                _ => break,
            }
            let (_, room, session) = self.by_expiry.pop_first().expect("just seen");
            self.records.remove(&(room, session));
        }
    }

    /// The live record of `session` in `room`; an expired one is dropped.
    fn live(&mut self, key: &(Arc<str>, SessionId), now: u64) -> Option<&mut Record> {
        let expires = self.records.get(key)?.expires_at_ms;
        if expires <= now {
            self.records.remove(key);
            self.by_expiry.remove(&(expires, key.0.clone(), key.1));
            return None;
        }
        self.records.get_mut(key)
    }

    /// The session's ticket of this admission: its live record, its expiry moved to
    /// `expires_at_ms` if that is later (never earlier); or, without one (none, expired, or
    /// ended with its slot), a new record holding `fresh` at the admission's first mint, and
    /// "used" for a renewal (a missing record was lost: written back as used, of no known
    /// nonce; an ended one is kept).
    pub(super) fn mint(
        &mut self,
        room: &Arc<str>,
        session: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
        mint_for: MintFor,
        now: u64,
    ) -> Minted {
        self.sweep(now);
        let key = (room.clone(), session);
        let live = self.live(&key, now).copied();
        if let Some(record) = live.filter(|r| !r.ended) {
            let extended = self.extend(&key, record, expires_at_ms);
            return match extended.nonce {
                Some(nonce) if !extended.used => Minted::Ticket {
                    nonce,
                    expires_at_ms: extended.expires_at_ms,
                },
                _ => Minted::Used,
            };
        }
        let nonce = match mint_for {
            MintFor::Admission => Some(fresh),
            // An ended record is kept as it is.
            MintFor::Renewal if live.is_some() => return Minted::Used,
            MintFor::Renewal => None,
        };
        if expires_at_ms > now {
            self.forget(&key);
            self.by_expiry
                .insert((expires_at_ms, room.clone(), session));
            self.records.insert(
                key,
                Record {
                    nonce,
                    used: nonce.is_none(),
                    ended: false,
                    expires_at_ms,
                },
            );
        }
        // An expiry already past: as in Redis, the record is gone as soon as it is made.
        if nonce.is_none() {
            return Minted::Used;
        }
        Minted::Ticket {
            nonce: fresh,
            expires_at_ms,
        }
    }

    /// `record` (held under `key`) with its expiry moved to `expires_at_ms` if that is later,
    /// stored and returned.
    fn extend(
        &mut self,
        key: &(Arc<str>, SessionId),
        record: Record,
        expires_at_ms: u64,
    ) -> Record {
        if expires_at_ms <= record.expires_at_ms {
            return record;
        }
        self.by_expiry
            .remove(&(record.expires_at_ms, key.0.clone(), key.1));
        self.by_expiry.insert((expires_at_ms, key.0.clone(), key.1));
        let extended = Record {
            expires_at_ms,
            ..record
        };
        self.records.insert(key.clone(), extended);
        extended
    }

    /// Drops the record under `key`, live or not.
    fn forget(&mut self, key: &(Arc<str>, SessionId)) {
        if let Some(old) = self.records.remove(key) {
            self.by_expiry
                .remove(&(old.expires_at_ms, key.0.clone(), key.1));
        }
    }

    /// The record of `session` in `room` is lost, as a Redis key is evicted or deleted (the
    /// conformance suite's damage).
    #[cfg(feature = "testing")]
    pub(super) fn lose(&mut self, room: &Arc<str>, session: SessionId) {
        self.forget(&(room.clone(), session));
    }

    /// The session's slot was released or banned: its live record (if any) ends with it.
    pub(super) fn end(&mut self, room: &Arc<str>, session: SessionId, now: u64) {
        self.sweep(now);
        if let Some(record) = self.live(&(room.clone(), session), now) {
            record.ended = true;
        }
    }

    /// Uses the ticket `nonce`. `slot_expires`: when the session's claimed slot ends, if it
    /// holds one that has not expired. An accepted ticket's record lives at least as long as
    /// that slot, so the admission it was used in cannot mint a second one.
    pub(super) fn redeem(
        &mut self,
        room: &Arc<str>,
        session: SessionId,
        nonce: TicketNonce,
        slot_expires: Option<u64>,
        now: u64,
    ) -> Redeemed {
        self.sweep(now);
        let key = (room.clone(), session);
        let record = match self.live(&key, now) {
            // Written in place of a lost record: no ticket of the session passes.
            Some(record) if record.nonce.is_none() => return Redeemed::Used,
            Some(record) if record.nonce == Some(nonce) => *record,
            _ => return Redeemed::Unknown,
        };
        match slot_expires {
            _ if record.used => Redeemed::Used,
            // Ended with its slot: a slot held now is a later admission's, not this ticket's.
            Some(slot) if !record.ended => {
                let used = Record {
                    used: true,
                    ..record
                };
                self.records.insert(key.clone(), used);
                self.extend(&key, used, slot);
                Redeemed::Accepted
            }
            _ => Redeemed::SlotEnded,
        }
    }

    /// How many records are held, expired or not (for the test of bounded memory).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_records_are_dropped_as_calls_go() {
        let mut t = Tickets::default();
        let room: Arc<str> = Arc::from("r");
        for i in 0..1_000u64 {
            let s = SessionId::from_bytes((i as u128).to_be_bytes());
            t.mint(
                &room,
                s,
                TicketNonce::random(),
                1_000 + i,
                MintFor::Admission,
                0,
            );
        }
        assert_eq!(t.len(), 1_000);
        // Every call past their expiry drops up to the bound; ten calls drop them all.
        for _ in 0..10 {
            t.redeem(
                &room,
                SessionId::random(),
                TicketNonce::random(),
                Some(6_000),
                5_000,
            );
        }
        assert_eq!(t.len(), 0);
        assert!(t.by_expiry.is_empty());
    }
}
