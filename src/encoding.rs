//! The one place text is turned into numbers and bytes and back: lowercase hex and canonical
//! decimal for signed values and session ids, and the plain ids of rooms and keys. Signed values
//! verify only in the exact spelling that was signed, so every parser here accepts exactly one
//! spelling.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// 1 to `max_len` characters from `[A-Za-z0-9_-]`: a room id or a key id.
pub(crate) fn is_plain_id(s: &str, max_len: usize) -> bool {
    !s.is_empty()
        && s.len() <= max_len
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `bytes` as lowercase hex into `out`, which must be twice as long.
pub(crate) fn hex_into(bytes: &[u8], out: &mut [u8]) {
    debug_assert_eq!(out.len(), 2 * bytes.len());
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 0x0f)];
    }
}

/// Strict lowercase hex into `out`: exactly `2 * out.len()` digits `[0-9a-f]`, nothing else.
pub(crate) fn lower_hex_to(hex: &[u8], out: &mut [u8]) -> Option<()> {
    if hex.len() != 2 * out.len() {
        return None;
    }
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *o = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(())
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Hex in either case, any even length: for secrets an operator pastes, not for signed values.
pub(crate) fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The two digits of every number below 100, for [`decimal`].
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// `n` in decimal at the end of `digits`; returns where the digits start. Two digits a step:
/// a signed value's two times are 13 digits each, written on every first visit.
pub(crate) fn decimal(mut n: u64, digits: &mut [u8; 20]) -> usize {
    let mut i = digits.len();
    while n >= 100 {
        let pair = 2 * (n % 100) as usize;
        n /= 100;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = 2 * n as usize;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        digits[i] = b'0' + n as u8;
    }
    i
}

/// A number's canonical decimal digits, written once on the stack: a signed value's text and
/// the message its MAC covers both take them from here, and neither allocates.
pub(crate) struct Digits {
    digits: [u8; 20],
    start: usize,
}

impl Digits {
    pub(crate) fn of(n: u64) -> Self {
        let mut digits = [0u8; 20];
        let start = decimal(n, &mut digits);
        Self { digits, start }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

/// Appends `n` in decimal, without the formatting machinery.
pub(crate) fn push_u64(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let start = decimal(n, &mut digits);
    out.push_str(std::str::from_utf8(&digits[start..]).expect("ASCII digits"));
}

/// Strict, canonical decimal: digits only, no sign, no leading zero, at most 20 digits. Only the
/// exact text that was signed verifies: `0123` is not another spelling of `123`.
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty()
        || s.len() > 20
        || (s.len() > 1 && s.starts_with('0'))
        || !s.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

/// Random bytes fetched from the operating system at once, per thread: [`random_128`] hands
/// them out 16 at a time, one system call per [`RANDOM_POOL_LEN`]` / 16` ids.
const RANDOM_POOL_LEN: usize = 1024;

/// A thread's unused random bytes from the operating system. Handed-out bytes are zeroed, so
/// the pool never holds an id it has issued.
struct RandomPool {
    bytes: [u8; RANDOM_POOL_LEN],
    next: usize,
}

impl Drop for RandomPool {
    fn drop(&mut self) {
        self.bytes.fill(0);
        std::hint::black_box(&self.bytes);
    }
}

thread_local! {
    static RANDOM_POOL: std::cell::RefCell<RandomPool> = const {
        std::cell::RefCell::new(RandomPool {
            bytes: [0; RANDOM_POOL_LEN],
            next: RANDOM_POOL_LEN,
        })
    };
}

/// 128 random bits from the operating system's secure random source (`getrandom`): session
/// ids and ticket nonces.
///
/// The bits are the kernel's CSPRNG output itself, fetched [`RANDOM_POOL_LEN`] bytes at a time
/// into a per-thread pool instead of 16 bytes per system call: a first visit then costs no
/// system call for its session id (the call was most of its cost). Nothing is derived or
/// expanded in user space, so the ids are exactly as unpredictable as with one call each;
/// what the pool adds is that up to 63 future ids sit in the process's memory (an attacker who
/// can read that memory has the signing keys anyway), and that a process forked while its pool
/// holds bytes would hand the same ids out in parent and child: a server does not fork its
/// request threads, and none of this crate's does.
///
/// # Panics
/// If the operating system's random source fails: without it no session id can be made.
pub(crate) fn random_128() -> [u8; 16] {
    use ring::rand::{SecureRandom, SystemRandom};
    RANDOM_POOL.with_borrow_mut(|pool| {
        if pool.next + 16 > RANDOM_POOL_LEN {
            SystemRandom::new()
                .fill(&mut pool.bytes)
                .expect("the system random source failed");
            pool.next = 0;
        }
        let taken = &mut pool.bytes[pool.next..pool.next + 16];
        let mut out = [0u8; 16];
        out.copy_from_slice(taken);
        taken.fill(0);
        pool.next += 16;
        out
    })
}

/// 128 bits from exactly 32 lowercase hex digits (the text of session ids and ticket nonces).
pub(crate) fn parse_hex_128(s: &str) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    lower_hex_to(s.as_bytes(), &mut out)?;
    Some(out)
}

/// 128 bits as 32 lowercase hex digits, without allocating.
pub(crate) fn hex_128(bytes: &[u8; 16]) -> [u8; 32] {
    let mut out = [0u8; 32];
    hex_into(bytes, &mut out);
    out
}

/// Writes 128 bits as 32 lowercase hex digits.
pub(crate) fn write_hex_128(f: &mut std::fmt::Formatter<'_>, bytes: &[u8; 16]) -> std::fmt::Result {
    let hex = hex_128(bytes);
    f.write_str(std::str::from_utf8(&hex).expect("hex digits are ASCII"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_is_lowercase_only() {
        let mut out = [0u8; 6];
        hex_into(&[0x00, 0xab, 0xff], &mut out);
        assert_eq!(&out, b"00abff");
        let mut back = [0u8; 3];
        assert_eq!(lower_hex_to(b"00abff", &mut back), Some(()));
        assert_eq!(back, [0x00, 0xab, 0xff]);
        assert_eq!(lower_hex_to(b"00ABFF", &mut back), None);
        assert_eq!(lower_hex_to(b"00abf", &mut back), None);
        assert_eq!(decode_hex("00ABff"), Some(vec![0x00, 0xab, 0xff]));
        assert_eq!(decode_hex("0g"), None);
    }

    #[test]
    fn random_ids_are_distinct_across_pool_refills_and_threads() {
        let mut seen = std::collections::HashSet::new();
        // Several refills of this thread's pool, and other threads' pools.
        for _ in 0..5 * RANDOM_POOL_LEN / 16 {
            assert!(seen.insert(random_128()));
        }
        let others: Vec<[u8; 16]> = (0..4)
            .map(|_| std::thread::spawn(|| (0..100).map(|_| random_128()).collect::<Vec<_>>()))
            .flat_map(|t| t.join().unwrap())
            .collect();
        for id in others {
            assert!(seen.insert(id));
        }
        // Not all zero (the pool's handed-out bytes are zeroed: none may be handed out twice).
        assert!(seen.iter().all(|id| *id != [0u8; 16]));
        // Every bit position takes both values.
        let or = seen
            .iter()
            .fold([0u8; 16], |acc, id| std::array::from_fn(|i| acc[i] | id[i]));
        let and = seen.iter().fold([0xffu8; 16], |acc, id| {
            std::array::from_fn(|i| acc[i] & id[i])
        });
        assert_eq!((or, and), ([0xff; 16], [0; 16]));
    }

    #[test]
    fn decimal_is_canonical() {
        let edges = [
            0,
            7,
            9,
            10,
            11,
            99,
            100,
            101,
            999,
            1_000,
            1_700_000_000_123,
            u64::MAX,
        ];
        for n in edges.into_iter().chain((0..100_000).map(|i| i * 7_919)) {
            assert_eq!(Digits::of(n).as_bytes(), n.to_string().as_bytes());
        }
        let mut s = String::new();
        push_u64(&mut s, 0);
        push_u64(&mut s, u64::MAX);
        assert_eq!(s, format!("0{}", u64::MAX));
        assert_eq!(parse_u64("123"), Some(123));
        for bad in ["", "0123", "+1", "-1", "1e3", "18446744073709551616", " 1"] {
            assert_eq!(parse_u64(bad), None, "{bad:?}");
        }
    }
}
