//! Which waiters a gateway already found in line, so that its `sync` looks each session up
//! (`ZMSCORE`, to answer back the ones without a place) once per abandon epoch rather than with
//! every check-in: at two million waiters the lookups were most of the script's work.
//!
//! Each session's epoch is its own: the abandon epoch's width, shifted by a phase taken from the
//! session id (bytes 12..15). The lookups of a line are so spread evenly over the epoch, where
//! with one boundary for all they fell in the poll interval after it (every 15 minutes by
//! default, 0.69 of a Redis core for 20 s with two million waiters). Only a gateway that starts
//! (or a room it has not served yet) looks everyone up in its first poll interval.
//!
//! Per room, a table of slots indexed by bytes 8..11 of the session id (the Bloom offsets use
//! bytes 0..7), each holding a tag of the epoch its session was found in (0: none), sized from
//! the room's longest line. A false positive (another session's slot with the same tag, or a
//! tag 255 epochs old) only skips a lookup: the session's bits are set as for one found, and a
//! session without a place among them is told at its next epoch instead (it sees a stale place
//! meanwhile, never an admission: only the store grants).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::session::SessionId;

/// Most slots of one room's table: 16 MiB, a false positive rate under 12 % with two million
/// waiters found by one gateway in an epoch.
pub(crate) const MAX_FOUND_SLOTS: usize = 1 << 24;

/// Fewest slots of one room's table (64 KiB).
const MIN_FOUND_SLOTS: usize = 1 << 16;

/// Slots for a line of at most `max_queue_len`: eight per waiter, a power of two.
fn slots_for(max_queue_len: u64) -> usize {
    usize::try_from(max_queue_len.saturating_mul(8))
        .unwrap_or(usize::MAX)
        .checked_next_power_of_two()
        .unwrap_or(MAX_FOUND_SLOTS)
        .clamp(MIN_FOUND_SLOTS, MAX_FOUND_SLOTS)
}

/// One table per room, shared by a store's clones.
#[derive(Default)]
pub(crate) struct FoundInLine {
    rooms: Mutex<HashMap<String, Vec<u8>>>,
}

/// Where and when: the lookups of one `sync`, at `now_ms`, with abandon epochs of `width_ms`,
/// in a room whose line is at most `max_queue_len` long.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Epochs {
    pub(crate) now_ms: u64,
    pub(crate) width_ms: u64,
    pub(crate) max_queue_len: u64,
}

impl Epochs {
    /// The tag of `session`'s own epoch at `now_ms` (1 to 255).
    fn tag(&self, session: &SessionId) -> u8 {
        let b = session.as_bytes();
        let width = self.width_ms.max(1);
        let phase = u64::from(u32::from_be_bytes([b[12], b[13], b[14], b[15]])) % width;
        let epoch = (self.now_ms + phase) / width;
        (epoch % 255) as u8 + 1
    }
}

fn index(session: &SessionId, slots: usize) -> usize {
    let b = session.as_bytes();
    (u32::from_be_bytes([b[8], b[9], b[10], b[11]]) as usize) % slots
}

impl FoundInLine {
    /// `seen`, split into the sessions to look up and those already found in `room` in their
    /// own epoch.
    pub(crate) fn split(
        &self,
        room: &str,
        at: Epochs,
        seen: Vec<SessionId>,
    ) -> (Vec<SessionId>, Vec<SessionId>) {
        let rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(table) = rooms
            .get(room)
            .filter(|t| t.len() == slots_for(at.max_queue_len))
        else {
            return (seen, Vec::new());
        };
        seen.into_iter()
            .partition(|s| table[index(s, table.len())] != at.tag(s))
    }

    /// The sessions of `looked_up` that are not in `unknown` were found in `room`, in their
    /// epoch at `at` (the time of the split).
    pub(crate) fn found(
        &self,
        room: &str,
        at: Epochs,
        looked_up: &[SessionId],
        unknown: &[SessionId],
    ) {
        if looked_up.is_empty() {
            return;
        }
        let slots = slots_for(at.max_queue_len);
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        let table = rooms.entry(room.to_owned()).or_default();
        if table.len() != slots {
            *table = vec![0; slots];
        }
        let unknown: std::collections::HashSet<&SessionId> = unknown.iter().collect();
        for s in looked_up.iter().filter(|s| !unknown.contains(s)) {
            table[index(s, slots)] = at.tag(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIDTH: u64 = 900_000;

    fn at(now_ms: u64) -> Epochs {
        Epochs {
            now_ms,
            width_ms: WIDTH,
            max_queue_len: 100_000,
        }
    }

    #[test]
    fn each_session_is_looked_up_once_in_its_epoch_unless_it_had_no_place() {
        let f = FoundInLine::default();
        let (a, b, gone) = (
            SessionId::random(),
            SessionId::random(),
            SessionId::random(),
        );
        let t = 7 * WIDTH;
        let (look, known) = f.split("r", at(t), vec![a, b, gone]);
        assert_eq!((look.len(), known.len()), (3, 0));
        f.found("r", at(t), &look, &[gone]);
        let (look, known) = f.split("r", at(t), vec![a, gone, b]);
        assert_eq!(look, vec![gone], "told again while it has no place");
        assert_eq!(known, vec![a, b]);
        // Another room: looked up again; a whole epoch later, every session's epoch has moved.
        assert_eq!(f.split("s", at(t), vec![a]).0, vec![a]);
        assert_eq!(f.split("r", at(t + WIDTH), vec![a, b]).0, vec![a, b]);
        // Another longest line: another table, empty.
        let longer = Epochs {
            max_queue_len: 2_000_000,
            ..at(t)
        };
        assert_eq!(f.split("r", longer, vec![a]).0, vec![a]);
    }

    #[test]
    fn the_lookups_of_a_line_are_spread_over_the_epoch() {
        let f = FoundInLine::default();
        let line: Vec<SessionId> = (0..20_000).map(|_| SessionId::random()).collect();
        let t = 3 * WIDTH;
        f.found("r", at(t), &line, &[]);
        // Each tenth of an epoch later, about a tenth more of the line is due again: never
        // everyone at once, as with one boundary for all.
        let mut due_before = 0;
        for tenth in 1..=10u64 {
            let (look, _) = f.split("r", at(t + tenth * WIDTH / 10), line.clone());
            let newly = look.len() - due_before;
            assert!(
                (1_400..=2_600).contains(&newly),
                "{newly} of 20 000 newly due in the tenth {tenth}"
            );
            due_before = look.len();
        }
        assert_eq!(
            due_before,
            line.len(),
            "all due once a whole epoch has passed"
        );
    }
}
