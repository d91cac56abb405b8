//! Which waiters a gateway already found in line this abandon epoch, so that its `sync` looks
//! each session up (`ZMSCORE`, to answer back the ones without a place) once per epoch rather
//! than with every check-in: at two million waiters the lookups were most of the script's work.
//!
//! Per room, a bitmap of [`FOUND_BITS`] bits indexed by bytes 8..11 of the session id (the
//! Bloom offsets use bytes 0..7), cleared when the abandon epoch changes. A false positive only
//! skips a lookup: the session's bits are set as for one found, and a session without a place
//! among them is told at its next epoch instead (it sees a stale place meanwhile, never an
//! admission: only the store grants).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::session::SessionId;

/// Bits of one room's bitmap: 2 MiB, a false positive rate under 12 % with two million
/// waiters found by one gateway in an epoch.
pub(crate) const FOUND_BITS: usize = 1 << 24;

/// One bitmap per room, shared by a store's clones.
#[derive(Default)]
pub(crate) struct FoundInLine {
    rooms: Mutex<HashMap<String, Found>>,
}

struct Found {
    epoch: u64,
    words: Vec<u64>,
}

fn index(session: &SessionId) -> usize {
    let b = session.as_bytes();
    (u32::from_be_bytes([b[8], b[9], b[10], b[11]]) as usize) % FOUND_BITS
}

impl FoundInLine {
    /// `seen`, split into the sessions to look up and those already found in `room` this
    /// `epoch`.
    pub(crate) fn split(
        &self,
        room: &str,
        epoch: u64,
        seen: Vec<SessionId>,
    ) -> (Vec<SessionId>, Vec<SessionId>) {
        let rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(found) = rooms.get(room).filter(|f| f.epoch == epoch) else {
            return (seen, Vec::new());
        };
        seen.into_iter().partition(|s| {
            let i = index(s);
            found.words[i / 64] & (1 << (i % 64)) == 0
        })
    }

    /// The sessions of `looked_up` that are not in `unknown` were found in `room` this `epoch`.
    pub(crate) fn found(
        &self,
        room: &str,
        epoch: u64,
        looked_up: &[SessionId],
        unknown: &[SessionId],
    ) {
        if looked_up.is_empty() {
            return;
        }
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let found = rooms.entry(room.to_owned()).or_insert_with(|| Found {
            epoch,
            words: vec![0; FOUND_BITS / 64],
        });
        if found.epoch != epoch {
            found.epoch = epoch;
            found.words.fill(0);
        }
        let unknown: std::collections::HashSet<&SessionId> = unknown.iter().collect();
        for s in looked_up.iter().filter(|s| !unknown.contains(s)) {
            let i = index(s);
            found.words[i / 64] |= 1 << (i % 64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_session_is_looked_up_once_an_epoch_unless_it_had_no_place() {
        let f = FoundInLine::default();
        let (a, b, gone) = (
            SessionId::random(),
            SessionId::random(),
            SessionId::random(),
        );
        let (look, known) = f.split("r", 7, vec![a, b, gone]);
        assert_eq!((look.len(), known.len()), (3, 0));
        f.found("r", 7, &look, &[gone]);
        let (look, known) = f.split("r", 7, vec![a, gone, b]);
        assert_eq!(look, vec![gone], "told again while it has no place");
        assert_eq!(known, vec![a, b]);
        // Another room, another epoch: looked up again.
        assert_eq!(f.split("s", 7, vec![a]).0, vec![a]);
        assert_eq!(f.split("r", 8, vec![a]).0, vec![a]);
    }
}
