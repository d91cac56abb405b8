//! Optional proof of work before joining the line: a bot farm that keeps cookies pays for every
//! place it takes.
//!
//! The stateless cookie check makes a place in line cost a round trip, and the per-IP limit makes
//! it cost addresses; neither costs a bot much CPU. With proof of work on
//! ([`WaitingRoomBuilder::proof_of_work`](crate::WaitingRoomBuilder::proof_of_work)), a visitor
//! whose queue cookie is not yet *proven* does not reach the store: it gets a challenge
//! instead, a value signed by the room, bound to the visitor's session and expiring after
//! [`ProofOfWork::challenge_ttl`]. The visitor must find a `nonce` such that
//!
//! ```text
//! SHA-256("<challenge>:<nonce>")      nonce in decimal, no leading zeros
//! ```
//!
//! starts with at least [`ProofOfWork::difficulty`] zero bits (on average `2^difficulty`
//! tries), and send `<challenge>:<nonce>` in the `waiting-room-proof` header of a `POST` to
//! `{prefix}/{room}/proof`. The room checks it without any store (one HMAC, one SHA-256), and
//! answers with the same queue cookie marked proven; only then does the visitor join the line.
//! Browsers do all this by themselves: the challenge page solves it with WebCrypto. API clients get the challenge in the JSON answer and solve it themselves,
//! for example with [`solve`].
//!
//! A solution is bound to its session (the session id is signed into the challenge) and
//! single-use: the room remembers the challenges it accepted until they expire (in process
//! memory, bounded). Across several gateways a replayed solution can at most mark the *same*
//! session proven again, which gives nothing: one session holds one place.
//!
//! What it costs, measured, is in `docs/security.md`.
//!
//! ```
//! use tower_waiting_room::defences::proof_of_work::{is_solution, solve};
//!
//! // A challenge as the room hands it out (the JSON's `challenge`): opaque text to a client.
//! let challenge = "<the challenge from the room's JSON answer>";
//! // What a client does: find a nonce (about 2^8 tries at difficulty 8)...
//! let nonce = solve(challenge, 8);
//! assert!(is_solution(challenge, nonce, 8));
//! // ...and send `<challenge>:<nonce>` in the `waiting-room-proof` header. The room also checks
//! // its own signature, the session and the expiry, which no client can fake.
//! ```

use std::sync::Mutex;
use std::time::Duration;

use ring::digest;

use super::generations::Generations;
use crate::clock::duration_ms;
use crate::encoding::{decimal, parse_u64};
use crate::session::SessionId;
use crate::token::{Challenge, Keyring, MAX_ISSUED_AHEAD_MS, MAX_SIGNED_LEN};

/// The lowest difficulty accepted, in leading zero bits.
#[doc(hidden)]
pub const MIN_DIFFICULTY: u8 = 1;
/// The highest difficulty accepted: 2^32 SHA-256 tries is hours for a browser.
#[doc(hidden)]
pub const MAX_DIFFICULTY: u8 = 32;
/// How long a challenge is valid by default.
#[doc(hidden)]
pub const DEFAULT_CHALLENGE_TTL: Duration = Duration::from_secs(300);
/// The request header that carries a solution, `<challenge>:<nonce>`.
pub const PROOF_HEADER: &str = "waiting-room-proof";

/// Most accepted challenges remembered per generation; see [`UsedChallenges`].
const MAX_REMEMBERED: usize = 65_536;

/// The proof-of-work settings: how hard, and how long a challenge stays valid.
///
/// ```
/// use std::time::Duration;
/// use tower_waiting_room::ProofOfWork;
///
/// let pow = ProofOfWork::new(18).with_challenge_ttl(Duration::from_secs(120));
/// assert_eq!(pow.expected_tries(), 262_144);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProofOfWork {
    difficulty: u8,
    challenge_ttl: Duration,
}

impl ProofOfWork {
    /// Challenges that need `difficulty` leading zero bits ([`MIN_DIFFICULTY`] to
    /// [`MAX_DIFFICULTY`], checked by the builder), valid for [`DEFAULT_CHALLENGE_TTL`].
    pub const fn new(difficulty: u8) -> Self {
        Self {
            difficulty,
            challenge_ttl: DEFAULT_CHALLENGE_TTL,
        }
    }

    /// How long a challenge stays valid (at least a second). A solution to an expired challenge
    /// is refused, and the visitor gets a new challenge.
    pub const fn with_challenge_ttl(mut self, ttl: Duration) -> Self {
        self.challenge_ttl = ttl;
        self
    }

    /// Leading zero bits a solution's hash needs.
    pub fn difficulty(&self) -> u8 {
        self.difficulty
    }

    /// How long a challenge stays valid.
    pub fn challenge_ttl(&self) -> Duration {
        self.challenge_ttl
    }

    /// The average number of hashes a solution takes: `2^difficulty`.
    pub fn expected_tries(&self) -> u64 {
        1u64 << self.difficulty.min(63)
    }
}

/// Leading zero bits of a hash.
pub(crate) fn leading_zero_bits(hash: &[u8]) -> u32 {
    let mut bits = 0;
    for &b in hash {
        if b != 0 {
            return bits + b.leading_zeros();
        }
        bits += 8;
    }
    bits
}

/// Whether `SHA-256("<challenge>:<nonce>")` has at least `difficulty` leading zero bits.
pub fn is_solution(challenge: &str, nonce: u64, difficulty: u8) -> bool {
    let mut input = Vec::with_capacity(challenge.len() + 21);
    input.extend_from_slice(challenge.as_bytes());
    input.push(b':');
    meets(&mut input, challenge.len() + 1, nonce, difficulty)
}

/// The smallest nonce that solves `challenge` at `difficulty` (the waiting page's script splits
/// the nonces among Web Workers and takes the first solution any of them finds). A reference
/// solver for API clients written in Rust, and the measure of what a solution costs natively
/// (`examples/pow_cost.rs`).
pub fn solve(challenge: &str, difficulty: u8) -> u64 {
    let mut input = Vec::with_capacity(challenge.len() + 21);
    input.extend_from_slice(challenge.as_bytes());
    input.push(b':');
    let prefix = input.len();
    (0..=u64::MAX)
        .find(|&nonce| meets(&mut input, prefix, nonce, difficulty))
        .expect("some nonce below 2^64 solves any difficulty up to 32")
}

/// Writes `nonce` after the first `prefix` bytes of `input` and checks the hash.
fn meets(input: &mut Vec<u8>, prefix: usize, nonce: u64, difficulty: u8) -> bool {
    input.truncate(prefix);
    let mut digits = [0u8; 20];
    let start = decimal(nonce, &mut digits);
    input.extend_from_slice(&digits[start..]);
    let hash = digest::digest(&digest::SHA256, input);
    leading_zero_bits(hash.as_ref()) >= u32::from(difficulty)
}

/// A solution as sent in [`PROOF_HEADER`]: the challenge text and the nonce, in canonical
/// decimal (`007` is not `7`).
pub(crate) fn parse_proof(text: &str) -> Option<(&str, u64)> {
    if text.len() > MAX_SIGNED_LEN + 21 {
        return None;
    }
    let (challenge, nonce) = text.rsplit_once(':')?;
    Some((challenge, parse_u64(nonce)?))
}

/// Why a solution was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not `<challenge>:<nonce>`, or the challenge is forged, of another room, or expired.
    Invalid,
    /// A valid challenge of another session.
    OtherSession,
    /// The hash has too few leading zero bits.
    NotSolved,
    /// This challenge was already used.
    Replayed,
}

/// The room's proof-of-work check: the settings and the challenges already used.
pub(crate) struct ProofGate {
    pub(crate) settings: ProofOfWork,
    used: UsedChallenges,
}

impl ProofGate {
    pub(crate) fn new(settings: ProofOfWork) -> Self {
        Self {
            settings,
            used: UsedChallenges::new(
                duration_ms(settings.challenge_ttl).saturating_add(MAX_ISSUED_AHEAD_MS),
                MAX_REMEMBERED,
            ),
        }
    }

    /// A fresh signed challenge for `session`.
    pub(crate) fn challenge(
        &self,
        keys: &Keyring,
        room: &str,
        session: SessionId,
        now_ms: u64,
    ) -> String {
        Challenge::issue(session, now_ms, duration_ms(self.settings.challenge_ttl)).sign(keys, room)
    }

    /// Checks a solution sent by `session`; on success the challenge is used up.
    pub(crate) fn accept(
        &self,
        keys: &Keyring,
        room: &str,
        proof: &str,
        session: SessionId,
        now_ms: u64,
    ) -> Result<(), Refused> {
        let (text, nonce) = parse_proof(proof).ok_or(Refused::Invalid)?;
        let challenge = Challenge::verify(keys, room, text, now_ms).ok_or(Refused::Invalid)?;
        // The memory of used challenges keeps each for its window after accepting it: one that
        // expires later (issued ahead of this clock by more than that allows) could be
        // replayed once forgotten.
        if challenge.expires_at_ms() > now_ms.saturating_add(self.used.window_ms()) {
            return Err(Refused::Invalid);
        }
        if challenge.session() != session {
            return Err(Refused::OtherSession);
        }
        if !is_solution(text, nonce, self.settings.difficulty) {
            return Err(Refused::NotSolved);
        }
        if !self.used.insert(&challenge, now_ms) {
            return Err(Refused::Replayed);
        }
        Ok(())
    }
}

/// The challenges accepted and not yet expired, in two generations of a window each: the
/// challenges' `ttl` and [`MAX_ISSUED_AHEAD_MS`].
///
/// A challenge accepted at `t` expires by `t + window`: it is valid for `ttl` from its issue
/// time, which may be ahead of this clock (another gateway's), by up to `MAX_ISSUED_AHEAD_MS`;
/// [`ProofGate::accept`] refuses one that would expire later. A generation collects the
/// challenges accepted during a window; when it is a window old it becomes the previous one, and
/// the previous one is dropped: every challenge in it was accepted at least a window ago, so it
/// has expired and would be refused anyway. At most `max` per
/// generation: a generation that fills up is turned over early, which can forget a challenge
/// before it expires; replaying it then gives its own session a proven cookie again, nothing
/// more.
struct UsedChallenges {
    window_ms: u64,
    table: Mutex<Generations<(SessionId, u64), ()>>,
}

impl UsedChallenges {
    fn new(window_ms: u64, max: usize) -> Self {
        let table = Generations::new(window_ms, max);
        Self {
            window_ms: table.window_ms(),
            table: Mutex::new(table),
        }
    }

    /// How long an accepted challenge is remembered at least.
    fn window_ms(&self) -> u64 {
        self.window_ms
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Generations<(SessionId, u64), ()>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers `challenge` as used; `false` if it already was.
    fn insert(&self, challenge: &Challenge, now_ms: u64) -> bool {
        let key = (challenge.session(), challenge.issued_at_ms());
        let mut g = self.lock();
        g.advance(now_ms);
        if g.get(&key) != (None, None) {
            return false;
        }
        g.entry(key, now_ms);
        true
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::SigningKey;

    fn keys() -> Keyring {
        Keyring::new(SigningKey::new("k1", [7u8; 32]).unwrap())
    }

    #[test]
    fn leading_zero_bits_counts_across_bytes() {
        assert_eq!(leading_zero_bits(&[0x80]), 0);
        assert_eq!(leading_zero_bits(&[0x01]), 7);
        assert_eq!(leading_zero_bits(&[0x00, 0x00, 0x10]), 19);
        assert_eq!(leading_zero_bits(&[0x00, 0x00]), 16);
    }

    #[test]
    fn solve_finds_the_smallest_solution() {
        let challenge = "c1.k1.example";
        let nonce = solve(challenge, 10);
        assert!(is_solution(challenge, nonce, 10));
        assert!((0..nonce).all(|n| !is_solution(challenge, n, 10)));
        // The input is exactly `<challenge>:<nonce>`.
        let hash = digest::digest(&digest::SHA256, format!("{challenge}:{nonce}").as_bytes());
        assert!(leading_zero_bits(hash.as_ref()) >= 10);
    }

    #[test]
    fn proofs_parse_canonically() {
        assert_eq!(parse_proof("c1.a.b:42"), Some(("c1.a.b", 42)));
        assert_eq!(parse_proof("c1.a.b:042"), None);
        assert_eq!(parse_proof("c1.a.b:+42"), None);
        assert_eq!(parse_proof("c1.a.b"), None);
        assert_eq!(parse_proof(&format!("{}:1", "x".repeat(400))), None);
    }

    #[test]
    fn a_solution_is_bound_to_its_session_and_single_use() {
        let keys = keys();
        let gate = ProofGate::new(ProofOfWork::new(6));
        let me = SessionId::random();
        let text = gate.challenge(&keys, "shop", me, 1_000);
        let proof = format!("{text}:{}", solve(&text, 6));
        assert_eq!(
            gate.accept(&keys, "shop", &proof, SessionId::random(), 2_000),
            Err(Refused::OtherSession)
        );
        assert_eq!(
            gate.accept(&keys, "other", &proof, me, 2_000),
            Err(Refused::Invalid)
        );
        assert_eq!(gate.accept(&keys, "shop", &proof, me, 2_000), Ok(()));
        assert_eq!(
            gate.accept(&keys, "shop", &proof, me, 3_000),
            Err(Refused::Replayed)
        );
        // Expired: refused whether or not it was used.
        let later = 1_000 + duration_ms(DEFAULT_CHALLENGE_TTL);
        assert_eq!(
            gate.accept(&keys, "shop", &proof, me, later),
            Err(Refused::Invalid)
        );
    }

    #[test]
    fn a_challenge_issued_ahead_of_this_clock_stays_used_until_it_expires() {
        let keys = keys();
        let ttl = Duration::from_secs(10);
        let gate = ProofGate::new(ProofOfWork::new(6).with_challenge_ttl(ttl));
        let me = SessionId::random();
        // Signed by a gateway whose clock runs 30 s ahead: valid until 41 000 here.
        let now = 1_000;
        let text = gate.challenge(&keys, "shop", me, now + 30_000);
        let proof = format!("{text}:{}", solve(&text, 6));
        assert_eq!(gate.accept(&keys, "shop", &proof, me, now), Ok(()));
        // Every replay until it expires is refused as one, across the memory's turns.
        for t in (now..now + 40_000).step_by(500) {
            assert_eq!(
                gate.accept(&keys, "shop", &proof, me, t),
                Err(Refused::Replayed),
                "at {t}"
            );
        }
        // Issued further ahead than the memory could keep it: refused outright.
        let far = gate.challenge(&keys, "shop", me, now + MAX_ISSUED_AHEAD_MS + 1);
        let proof = format!("{far}:{}", solve(&far, 6));
        assert_eq!(
            gate.accept(&keys, "shop", &proof, me, now),
            Err(Refused::Invalid)
        );
    }

    #[test]
    fn an_unsolved_challenge_is_refused() {
        let keys = keys();
        let gate = ProofGate::new(ProofOfWork::new(12));
        let me = SessionId::random();
        let text = gate.challenge(&keys, "shop", me, 1_000);
        let wrong = (0..).find(|&n| !is_solution(&text, n, 12)).unwrap();
        assert_eq!(
            gate.accept(&keys, "shop", &format!("{text}:{wrong}"), me, 2_000),
            Err(Refused::NotSolved)
        );
        // Refusing it did not use the challenge up.
        let right = solve(&text, 12);
        assert_eq!(
            gate.accept(&keys, "shop", &format!("{text}:{right}"), me, 2_000),
            Ok(())
        );
    }

    #[test]
    fn used_challenges_are_remembered_until_they_expire_and_memory_is_bounded() {
        let ttl = 10_000;
        let used = UsedChallenges::new(ttl, 100);
        let c = Challenge::issue(SessionId::random(), 5_000, ttl);
        assert!(used.insert(&c, 14_999));
        // Until the challenge expires (15 000), and across generation turns, it stays used.
        for now in [15_000, 20_000, 24_998] {
            assert!(!used.insert(&c, now), "{now}");
        }
        for i in 0..10_000u64 {
            let c = Challenge::issue(SessionId::random(), i, ttl);
            assert!(used.insert(&c, 30_000));
        }
        assert!(used.len() <= 200, "{}", used.len());
    }
}
