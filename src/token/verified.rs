//! A bounded memory of signed values whose MAC has been checked, so that a visitor who sends
//! the same value again (an admitted visitor's token on every request, a waiter's queue cookie
//! on every poll) costs no second HMAC.
//!
//! Only the HMAC and the parsing are skipped (an entry keeps what the text said): the value's
//! kind is checked, its key must still be in the keyring, and everything the callers check
//! (expiry, room, network) is checked as before. An entry is the exact text of a value together
//! with the room it was verified for (the room is signed but not written in the text), so a hit
//! is a value byte for byte identical to one that verified for the same room, kind and key:
//! exactly what the parse and the HMAC would say again.
//!
//! The memory is a fixed table ([`SHARDS`] shards of [`SLOTS_PER_SHARD`] slots), indexed by the
//! value's tag; a new entry overwrites whatever held its slot. Each shard has its own lock,
//! taken with `try_lock`: a lookup or insert that finds it held simply does the full check, so
//! requests never wait on each other here. Values only enter after their MAC checked, so
//! forged values cannot fill it; a flood of genuine ones (queue cookies are free to get) only
//! evicts entries, which then cost one HMAC again.
//!
//! The memory belongs to a [`Keyring`](super::Keyring) and is shared by its clones, which hold
//! the same keys; a keyring with other keys (made with `new` or `with_previous`) starts empty,
//! so a key that is no longer in the keyring has nothing remembered for it either.

use std::sync::Mutex;

use super::claims::Parsed;

/// Shards of the table: independent locks.
pub(crate) const SHARDS: usize = 16;
/// Slots per shard: `SHARDS * SLOTS_PER_SHARD` (16 384) values remembered at most, a few
/// hundred bytes each when full (the text, the room and what the text said); an empty slot
/// is one pointer.
pub(crate) const SLOTS_PER_SHARD: usize = 1024;

/// One remembered value: the room's bytes, then the value's, and what the value said.
struct Entry {
    room_len: usize,
    bytes: Box<[u8]>,
    parsed: Parsed,
}

impl Entry {
    /// Whether this is `value` verified for `room`. Not constant-time in the lengths (public),
    /// but with no early exit over the bytes: a mismatch only sends the value to the full
    /// (constant-time) HMAC check, so the comparison cannot get a forged value accepted, and
    /// without an early exit its time does not tell an attacker how much of a forged value
    /// matches a genuine remembered one either (which could otherwise reveal another
    /// visitor's value a few bytes at a time).
    fn is(&self, room: &str, value: &str) -> bool {
        if self.room_len != room.len() || self.bytes.len() != room.len() + value.len() {
            return false;
        }
        let (r, v) = self.bytes.split_at(self.room_len);
        let diff = xor_or(r, room.as_bytes()) | xor_or(v, value.as_bytes());
        std::hint::black_box(diff) == 0
    }
}

/// The OR of the words of `a ^ b` (slices of equal length): 0 exactly when they are equal,
/// with no early exit. Eight bytes at a time: a byte at a time was most of a cache hit's cost.
fn xor_or(a: &[u8], b: &[u8]) -> u64 {
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or_default());
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = wa
        .remainder()
        .iter()
        .zip(wb.remainder())
        .fold(0u64, |acc, (x, y)| acc | u64::from(x ^ y));
    wa.zip(wb)
        .fold(tail, |acc, (x, y)| acc | (word(x) ^ word(y)))
}

/// One shard's slots, behind its own lock.
type Shard = Mutex<Box<[Option<Box<Entry>>]>>;

/// The table. See the module docs.
pub(crate) struct VerifiedValues {
    shards: Box<[Shard]>,
}

impl VerifiedValues {
    pub(crate) fn new() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new((0..SLOTS_PER_SHARD).map(|_| None).collect()))
                .collect(),
        }
    }

    /// The shard and slot of a value, from its tag's text (base64 of an HMAC: uniformly
    /// distributed, 6 bits a character).
    fn index(tag_b64: &str) -> (usize, usize) {
        let mut word = [0u8; 8];
        let n = tag_b64.len().min(8);
        word[..n].copy_from_slice(&tag_b64.as_bytes()[..n]);
        // SplitMix64's finaliser: every input bit moves every output bit.
        let mut h = u64::from_le_bytes(word);
        h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let h = (h ^ (h >> 31)) as usize;
        (h % SHARDS, (h / SHARDS) % SLOTS_PER_SHARD)
    }

    /// What `value` (whose tag is `tag_b64`) said when it verified for `room`; `None` when it
    /// has not, or when its shard is busy: then the caller parses it and checks the MAC.
    pub(crate) fn get(&self, room: &str, value: &str, tag_b64: &str) -> Option<Parsed> {
        let (shard, slot) = Self::index(tag_b64);
        let slots = self.shards[shard].try_lock().ok()?;
        slots[slot]
            .as_ref()
            .filter(|e| e.is(room, value))
            .map(|e| e.parsed.clone())
    }

    /// Whether `value` has verified for `room` (tests).
    #[cfg(test)]
    pub(crate) fn contains(&self, room: &str, value: &str, tag_b64: &str) -> bool {
        self.get(room, value, tag_b64).is_some()
    }

    /// Remembers that `value` verified for `room` and what it said, unless its shard is busy.
    pub(crate) fn insert(&self, room: &str, value: &str, tag_b64: &str, parsed: Parsed) {
        let (shard, slot) = Self::index(tag_b64);
        let mut bytes = Vec::with_capacity(room.len() + value.len());
        bytes.extend_from_slice(room.as_bytes());
        bytes.extend_from_slice(value.as_bytes());
        let entry = Box::new(Entry {
            room_len: room.len(),
            bytes: bytes.into_boxed_slice(),
            parsed,
        });
        if let Ok(mut slots) = self.shards[shard].try_lock() {
            slots[slot] = Some(entry);
        }
    }

    /// How many values are remembered (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap().iter().flatten().count())
            .sum()
    }
}

/// Shows only how many values it can hold: the values are bearer credentials.
impl std::fmt::Debug for VerifiedValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedValues")
            .field("capacity", &(SHARDS * SLOTS_PER_SHARD))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::claims::Claims;

    fn parsed() -> Parsed {
        Parsed {
            claims: Claims {
                session: crate::session::SessionId::from_bytes([1; 16]),
                issued_at_ms: 1,
                expires_at_ms: 2,
            },
            kid: 3..5,
            extra: None,
        }
    }

    #[test]
    fn remembers_exact_value_and_room_only_and_stays_bounded() {
        let t = VerifiedValues::new();
        let value = "a1.k1.00.1.2.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        let tag = value.rsplit_once('.').unwrap().1;
        assert!(!t.contains("shop", value, tag));
        t.insert("shop", value, tag, parsed());
        assert_eq!(t.get("shop", value, tag), Some(parsed()));
        assert!(!t.contains("shoq", value, tag));
        assert!(!t.contains("sho", &format!("p{value}"), tag));
        assert!(!t.contains("shop", &value.replace("k1", "k2"), tag));
        assert!(!t.contains("shop", &value[..value.len() - 1], tag));
        // Many more values than slots: the table keeps at most its capacity.
        for i in 0..3 * SHARDS * SLOTS_PER_SHARD {
            let tag = format!("{i:08}{}", "A".repeat(35));
            t.insert("shop", &format!("a1.k1.{tag}"), &tag, parsed());
        }
        assert!(t.len() <= SHARDS * SLOTS_PER_SHARD);
        assert!(t.len() > SHARDS * SLOTS_PER_SHARD / 2, "{}", t.len());
        assert!(!format!("{t:?}").contains("a1."));
    }
}
