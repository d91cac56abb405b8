//! Early check-ins: a gateway writes the sessions it answers into the abandon ring's *next*
//! epoch during the last half of the current one, each at a moment of its own, so that the
//! whole line is not written again in the poll interval after the epoch turns.
//!
//! The abandon ring's epochs (a quarter of an hour by default) begin at the same moment for
//! the whole line, and a gateway writes each session it answers into a new epoch once
//! (`checked_in.rs`): so in the poll interval after one began, every sync wrote all of its
//! sessions again. At ten million waiters that saturated Redis for that minute (a sync's p99
//! past a second) where the other minutes took a third of a core. Written early, a session
//! finds its bits set when the epoch begins, and the writes are spread over the window.
//!
//! The window is the last `1 / EARLY_WINDOW` of the epoch (the script checks it by its own
//! clock and writes nothing outside it); a session's moment in it is drawn from its id (bytes
//! 8..12: the Bloom offsets take 0..8, the look-ups' phase 12..16), over the window's first
//! four fifths, so that a waiter polling more often than
//! every fifth of it is written before the epoch turns. What it costs: a session written early
//! counts as seen until the next epoch stops counting, up to half an epoch longer than by a
//! check-in in the current one, so a silent waiter is swept within `abandon_after * 7 / 4` of
//! silence instead of `3 / 2`, never before `abandon_after` (`script/liveness.lua`).
//!
//! Why half an epoch: writing a session's bits from a sync's list costs Redis about 3 us
//! (parsing its offsets in the script, building and running the `BITFIELD`), so writing the
//! whole line within a window costs its length times that, spread over the window. At ten
//! million waiters a window of a quarter epoch (225 s) took about 0.17 of a core for as long
//! as it lasted; half an epoch takes half that.

use super::protocol::EARLY_WINDOW;
use crate::session::SessionId;

/// A sync's moment in the abandon ring's epochs: the gateway's clock and the epochs' width
/// (`LivenessRule::for_abandon`, as the script computes it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub(crate) now_ms: u64,
    pub(crate) width_ms: u64,
}

impl Window {
    /// The abandon ring's current epoch.
    pub(crate) fn epoch(&self) -> u64 {
        self.now_ms / self.width_ms.max(1)
    }

    /// The window's length, and how far into it `now_ms` is (`None`: not in it).
    fn in_window(&self) -> Option<(u64, u64)> {
        let width = self.width_ms.max(1);
        let len = width / EARLY_WINDOW;
        let into = (self.now_ms % width).checked_sub(width - len)?;
        (len > 0).then_some((len, into))
    }

    /// Whether it is the window of the next epoch.
    pub(crate) fn is_open(&self) -> bool {
        self.in_window().is_some()
    }

    /// Whether `session` is due to be written early: within the window, at or past its moment.
    pub(crate) fn due(&self, session: &SessionId) -> bool {
        let b = session.as_bytes();
        let seed = u64::from(u32::from_be_bytes([b[8], b[9], b[10], b[11]]));
        self.in_window().is_some_and(|(len, into)| {
            let spread = (len * 4 / 5).max(1);
            into >= seed % spread
        })
    }
}

/// The epoch number an epoch's name starts with (`'<epoch>:<width>:<bits>:<run id>'`, as the
/// script names it).
pub(crate) fn epoch_number(name: &[u8]) -> Option<u64> {
    let digits = name.split(|&b| b == b':').next()?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Whether the epoch named `a` comes after the one named `b` of the same ring on the same
/// server: the same width, bitmap size and run id, a greater number. Epochs of another width
/// (a changed `abandon_after` or `queue_ttl`) are numbered otherwise, and never compared.
pub(crate) fn later_than(a: &[u8], b: &[u8]) -> bool {
    let rest = |name: &[u8]| {
        name.iter()
            .position(|&c| c == b':')
            .map(|i| name[i..].to_vec())
    };
    rest(a).is_some_and(|r| rest(b) == Some(r))
        && matches!((epoch_number(a), epoch_number(b)), (Some(x), Some(y)) if x > y)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIDTH: u64 = 900_000;

    fn at(now_ms: u64) -> Window {
        Window {
            now_ms,
            width_ms: WIDTH,
        }
    }

    #[test]
    fn the_window_is_the_epochs_last_half() {
        let start = 40 * WIDTH;
        assert!(!at(start).is_open());
        assert!(!at(start + WIDTH / 2 - 1).is_open());
        assert!(at(start + WIDTH / 2).is_open());
        assert!(at(start + WIDTH - 1).is_open());
        assert!(!at(start + WIDTH).is_open(), "the next epoch began");
        assert_eq!(at(start + WIDTH - 1).epoch(), 40);
        // Epochs too short for a window have none.
        let tiny = Window {
            now_ms: 7,
            width_ms: 3,
        };
        assert!(!tiny.is_open() && !tiny.due(&SessionId::from_bytes([0; 16])));
    }

    #[test]
    fn the_moments_are_spread_over_the_windows_first_four_fifths() {
        let start = 40 * WIDTH + WIDTH / 2;
        let len = WIDTH / 2;
        let line: Vec<SessionId> = (0..10_000).map(|_| SessionId::random()).collect();
        let due = |into: u64| line.iter().filter(|s| at(start + into).due(s)).count();
        assert!(due(0) < 20, "{} due at the window's start", due(0));
        let half = due(len * 2 / 5);
        assert!((4_500..5_500).contains(&half), "{half} due halfway");
        assert_eq!(due(len * 4 / 5), line.len(), "all due by four fifths");
        assert_eq!(
            line.iter().filter(|s| at(start - 1).due(s)).count(),
            0,
            "none before the window"
        );
    }

    #[test]
    fn only_epochs_of_the_same_ring_and_server_are_compared() {
        assert!(later_than(b"5:900000:65408:ab", b"4:900000:65408:ab"));
        assert!(!later_than(b"4:900000:65408:ab", b"5:900000:65408:ab"));
        assert!(!later_than(b"5:900000:65408:ab", b"5:900000:65408:ab"));
        // Another width (numbers of another scale), size or server: not comparable.
        assert!(!later_than(b"5:900000:65408:ab", b"2:1800000:65408:ab"));
        assert!(!later_than(b"5:900000:65408:ab", b"4:900000:65408:cd"));
        assert!(!later_than(b"", b"4:900000:65408:ab"));
    }

    #[test]
    fn an_epochs_number_is_read_from_its_name() {
        assert_eq!(epoch_number(b"2000001:900000:65408:ab12"), Some(2_000_001));
        assert_eq!(epoch_number(b""), None);
        assert_eq!(epoch_number(b"x:1:2:3"), None);
    }
}
