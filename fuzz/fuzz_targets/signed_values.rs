//! Queue cookies, admission tokens, proof-of-work challenges and single-use tickets from
//! arbitrary bytes: never a panic, and nothing that was not signed by the keyring ever verifies.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tower_waiting_room::__private::Challenge;
use tower_waiting_room::__private::{AdmissionTicket, AdmissionToken, QueueCookie};
use tower_waiting_room::store::TicketNonce;
use tower_waiting_room::{Keyring, SessionId, SigningKey};

fuzz_target!(|data: &[u8]| {
    let keys = Keyring::new(SigningKey::new("k2", [2u8; 32]).unwrap())
        .with_previous(SigningKey::new("k1", [1u8; 32]).unwrap());
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let now = 1_767_225_600_000;
    // Random input never verifies (a forgery would need the HMAC key).
    assert!(QueueCookie::verify(&keys, "room", text, now).is_none());
    assert!(AdmissionToken::verify(&keys, "room", text, now).is_none());
    assert!(Challenge::verify(&keys, "room", text, now).is_none());
    assert!(AdmissionTicket::verify(&keys, "room", text, now).is_none());

    // A real value with the input spliced in somewhere is rejected unless unchanged.
    let token = AdmissionToken::new(SessionId::from_bytes([7; 16]), now, now + 300_000);
    let signed = token.sign(&keys, "room");
    if data.is_empty() {
        return;
    }
    let at = data[0] as usize % (signed.len() + 1);
    let mut mutated = String::with_capacity(signed.len() + text.len());
    mutated.push_str(&signed[..at]);
    // The first input byte chose the place; the rest (from the next char boundary) is spliced in.
    let rest = text.char_indices().nth(1).map_or("", |(i, _)| &text[i..]);
    mutated.push_str(rest);
    mutated.push_str(&signed[at..]);
    if mutated != signed {
        assert!(
            AdmissionToken::verify(&keys, "room", &mutated, now).is_none(),
            "a changed token verified: {mutated:?}"
        );
    }

    // Likewise a proven queue cookie (which must not turn into any other valid value) and a
    // challenge.
    let session = SessionId::from_bytes([9; 16]);
    let proven = QueueCookie::for_session(session, now, 300_000)
        .into_proven()
        .sign(&keys, "room");
    let challenge = Challenge::issue(session, now, 300_000).sign(&keys, "room");
    let ticket = AdmissionTicket::new(session, TicketNonce::from_bytes([5; 16]), now, now + 300_000)
        .sign(&keys, "room");
    for signed in [proven, challenge, ticket] {
        let at = data[0] as usize % (signed.len() + 1);
        let mutated = format!("{}{rest}{}", &signed[..at], &signed[at..]);
        if mutated != signed {
            assert!(
                QueueCookie::verify(&keys, "room", &mutated, now).is_none(),
                "a changed value verified as a queue cookie: {mutated:?}"
            );
            assert!(
                Challenge::verify(&keys, "room", &mutated, now).is_none(),
                "a changed value verified as a challenge: {mutated:?}"
            );
            assert!(
                AdmissionTicket::verify(&keys, "room", &mutated, now).is_none(),
                "a changed value verified as a ticket: {mutated:?}"
            );
        }
    }
});
