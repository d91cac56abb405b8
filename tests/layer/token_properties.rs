//! Property tests of the signed values: sign/verify round-trips, and any change is rejected.

use proptest::prelude::*;
use tower_waiting_room::__private::Challenge;
use tower_waiting_room::__private::{AdmissionTicket, AdmissionToken, QueueCookie};
use tower_waiting_room::defences::proof_of_work::{is_solution, solve};
use tower_waiting_room::store::TicketNonce;
use tower_waiting_room::{Keyring, SessionId, SigningKey};

fn keyring(secret: [u8; 32]) -> Keyring {
    Keyring::new(SigningKey::new("cur", secret).unwrap())
        .with_previous(SigningKey::new("old", [0xaa; 32]).unwrap())
}

fn room() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_-]{1,64}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn admission_tokens_round_trip(
        secret in any::<[u8; 32]>(),
        session in any::<[u8; 16]>(),
        room in room(),
        issued in 0u64..4_000_000_000_000,
        lifetime in 1u64..100_000_000,
        age in 0u64..100_000_000,
    ) {
        let keys = keyring(secret);
        let token = AdmissionToken::new(SessionId::from_bytes(session), issued, issued + lifetime);
        let text = token.sign(&keys, &room);
        let now = issued + age.min(lifetime - 1);
        prop_assert_eq!(AdmissionToken::verify(&keys, &room, &text, now), Some(token));
        // Expired at its expiry, and never valid for another room.
        prop_assert_eq!(AdmissionToken::verify(&keys, &room, &text, issued + lifetime), None);
        let other = format!("{room}x");
        prop_assert_eq!(AdmissionToken::verify(&keys, &other, &text, now), None);
        // Not a queue cookie either.
        prop_assert_eq!(QueueCookie::verify(&keys, &room, &text, now), None);
    }

    #[test]
    fn queue_cookies_round_trip(
        secret in any::<[u8; 32]>(),
        room in room(),
        now in 0u64..4_000_000_000_000,
        ttl in 1u64..100_000_000,
    ) {
        let keys = keyring(secret);
        let cookie = QueueCookie::issue(now, ttl);
        let text = cookie.sign(&keys, &room);
        prop_assert_eq!(QueueCookie::verify(&keys, &room, &text, now), Some(cookie));
        prop_assert_eq!(AdmissionToken::verify(&keys, &room, &text, now), None);
    }

    #[test]
    fn any_byte_change_is_rejected(
        secret in any::<[u8; 32]>(),
        session in any::<[u8; 16]>(),
        at in any::<prop::sample::Index>(),
        byte in 0x21u8..0x7f,
    ) {
        let keys = keyring(secret);
        let now = 1_767_225_600_000;
        let token = AdmissionToken::new(SessionId::from_bytes(session), now, now + 300_000);
        let text = token.sign(&keys, "room");
        let i = at.index(text.len());
        prop_assume!(text.as_bytes()[i] != byte);
        let mut bytes = text.clone().into_bytes();
        bytes[i] = byte;
        let changed = String::from_utf8(bytes).unwrap();
        prop_assert_eq!(AdmissionToken::verify(&keys, "room", &changed, now), None);
    }

    #[test]
    fn any_byte_insertion_is_rejected(
        secret in any::<[u8; 32]>(),
        at in any::<prop::sample::Index>(),
        byte in 0x21u8..0x7f,
    ) {
        let keys = keyring(secret);
        let now = 1_767_225_600_000;
        let text = QueueCookie::issue(now, 60_000).sign(&keys, "room");
        let i = at.index(text.len() + 1);
        let mut bytes = text.into_bytes();
        bytes.insert(i, byte);
        let changed = String::from_utf8(bytes).unwrap();
        prop_assert_eq!(QueueCookie::verify(&keys, "room", &changed, now), None);
    }

    #[test]
    fn truncated_or_extended_values_are_rejected(
        secret in any::<[u8; 32]>(),
        cut in any::<prop::sample::Index>(),
        tail in "[A-Za-z0-9._-]{1,40}",
    ) {
        let keys = keyring(secret);
        let now = 1_767_225_600_000;
        let text = QueueCookie::issue(now, 60_000).sign(&keys, "room");
        let short = &text[..cut.index(text.len())];
        prop_assert_eq!(QueueCookie::verify(&keys, "room", short, now), None);
        let long = format!("{text}{tail}");
        prop_assert_eq!(QueueCookie::verify(&keys, "room", &long, now), None);
    }

    #[test]
    fn arbitrary_strings_never_verify(s in "\\PC{0,300}") {
        let keys = keyring([9; 32]);
        prop_assert_eq!(AdmissionToken::verify(&keys, "room", &s, 0), None);
        prop_assert_eq!(QueueCookie::verify(&keys, "room", &s, 0), None);
        prop_assert_eq!(Challenge::verify(&keys, "room", &s, 0), None);
    }

    #[test]
    fn proven_cookies_and_challenges_round_trip_and_keep_their_kind(
        secret in any::<[u8; 32]>(),
        session in any::<[u8; 16]>(),
        room in room(),
        now in 0u64..4_000_000_000_000,
        ttl in 1u64..100_000_000,
    ) {
        let keys = keyring(secret);
        let session = SessionId::from_bytes(session);
        let proven = QueueCookie::for_session(session, now, ttl).into_proven();
        let text = proven.sign(&keys, &room);
        prop_assert_eq!(QueueCookie::verify(&keys, &room, &text, now), Some(proven));
        prop_assert_eq!(Challenge::verify(&keys, &room, &text, now), None);
        let challenge = Challenge::issue(session, now, ttl);
        let text = challenge.sign(&keys, &room);
        prop_assert_eq!(Challenge::verify(&keys, &room, &text, now), Some(challenge));
        prop_assert_eq!(Challenge::verify(&keys, &room, &text, now + ttl), None);
        // A challenge is neither a queue cookie (proven or not) nor a token.
        prop_assert_eq!(QueueCookie::verify(&keys, &room, &text, now), None);
        prop_assert_eq!(AdmissionToken::verify(&keys, &room, &text, now), None);
    }

    #[test]
    fn any_byte_change_in_a_proven_cookie_or_challenge_is_rejected(
        secret in any::<[u8; 32]>(),
        session in any::<[u8; 16]>(),
        at in any::<prop::sample::Index>(),
        byte in 0x21u8..0x7f,
    ) {
        let keys = keyring(secret);
        let now = 1_767_225_600_000;
        let session = SessionId::from_bytes(session);
        let proven = QueueCookie::for_session(session, now, 60_000).into_proven().sign(&keys, "room");
        let challenge = Challenge::issue(session, now, 60_000).sign(&keys, "room");
        for text in [proven, challenge] {
            let i = at.index(text.len());
            prop_assume!(text.as_bytes()[i] != byte);
            let mut bytes = text.clone().into_bytes();
            bytes[i] = byte;
            let changed = String::from_utf8(bytes).unwrap();
            prop_assert_eq!(QueueCookie::verify(&keys, "room", &changed, now), None);
            prop_assert_eq!(Challenge::verify(&keys, "room", &changed, now), None);
        }
    }

    #[test]
    fn solve_finds_the_smallest_solution(
        session in any::<[u8; 16]>(),
        difficulty in 1u8..12,
    ) {
        let keys = keyring([3; 32]);
        let text = Challenge::issue(SessionId::from_bytes(session), 0, 60_000).sign(&keys, "room");
        let nonce = solve(&text, difficulty);
        prop_assert!(is_solution(&text, nonce, difficulty));
        // `solve` finds the smallest solution: nothing before it solves.
        prop_assert!((0..nonce).all(|n| !is_solution(&text, n, difficulty)));
    }

    #[test]
    fn tickets_round_trip_and_keep_their_kind(
        secret in any::<[u8; 32]>(),
        session in any::<[u8; 16]>(),
        nonce in any::<[u8; 16]>(),
        room in room(),
        issued in 0u64..4_000_000_000_000,
        lifetime in 1u64..100_000_000,
        age in 0u64..100_000_000,
    ) {
        let keys = keyring(secret);
        let ticket = AdmissionTicket::new(
            SessionId::from_bytes(session),
            TicketNonce::from_bytes(nonce),
            issued,
            issued + lifetime,
        );
        let text = ticket.sign(&keys, &room);
        let now = issued + age.min(lifetime - 1);
        prop_assert_eq!(AdmissionTicket::verify(&keys, &room, &text, now), Some(ticket));
        prop_assert_eq!(AdmissionTicket::verify(&keys, &room, &text, issued + lifetime), None);
        let other = format!("{room}x");
        prop_assert_eq!(AdmissionTicket::verify(&keys, &other, &text, now), None);
        // Neither an admission token nor a queue cookie.
        prop_assert_eq!(AdmissionToken::verify(&keys, &room, &text, now), None);
        prop_assert_eq!(QueueCookie::verify(&keys, &room, &text, now), None);
    }

    #[test]
    fn any_byte_change_or_insertion_in_a_ticket_is_rejected(
        secret in any::<[u8; 32]>(),
        session in any::<[u8; 16]>(),
        nonce in any::<[u8; 16]>(),
        at in any::<prop::sample::Index>(),
        byte in 0x21u8..0x7f,
    ) {
        let keys = keyring(secret);
        let now = 1_767_225_600_000;
        let ticket = AdmissionTicket::new(
            SessionId::from_bytes(session),
            TicketNonce::from_bytes(nonce),
            now,
            now + 300_000,
        );
        let text = ticket.sign(&keys, "room");
        let i = at.index(text.len());
        if text.as_bytes()[i] != byte {
            let mut bytes = text.clone().into_bytes();
            bytes[i] = byte;
            let changed = String::from_utf8(bytes).unwrap();
            prop_assert_eq!(AdmissionTicket::verify(&keys, "room", &changed, now), None);
        }
        let mut bytes = text.into_bytes();
        bytes.insert(at.index(bytes.len() + 1), byte);
        let inserted = String::from_utf8(bytes).unwrap();
        prop_assert_eq!(AdmissionTicket::verify(&keys, "room", &inserted, now), None);
    }

    #[test]
    fn arbitrary_strings_are_never_tickets(s in "\\PC{0,300}") {
        let keys = keyring([9; 32]);
        prop_assert_eq!(AdmissionTicket::verify(&keys, "room", &s, 0), None);
        let t1 = format!("t1.{s}");
        prop_assert_eq!(AdmissionTicket::verify(&keys, "room", &t1, 0), None);
    }

    #[test]
    fn another_secret_never_verifies(a in any::<[u8; 32]>(), b in any::<[u8; 32]>()) {
        prop_assume!(a != b);
        let now = 1_767_225_600_000;
        let text = QueueCookie::issue(now, 60_000).sign(&keyring(a), "room");
        prop_assert_eq!(QueueCookie::verify(&keyring(b), "room", &text, now), None);
    }
}
