//! Stage 2's fast path: an admitted visitor's request with a fresh token this gateway has
//! already verified, passed with the least work.
//!
//! Nearly every request a busy site gets during a sale is this one: a visitor inside, browsing,
//! with the same admission cookie on every request. Over HTTP, what such a request costs the
//! layer follows how much distinct code and data it touches (between two requests the kernel,
//! the server and the app run, and the layer's lines are no longer in the caches; see
//! docs/benchmarks.md), so this path runs only what that request needs once its cookies are
//! read: the path (not one of the room's endpoints), the first admission cookie, the keyring's
//! memory of verified values (no parse, no HMAC: see `token::verified`), the clock for
//! expiry and freshness.
//!
//! It never decides anything [`Room::classify`](super::Room::classify) would decide otherwise: whatever it is not
//! sure of (a token it has not verified yet, expired or due for a refresh, network binding on,
//! one of the room's endpoints) goes on to the whole of `classify`. So a visitor it passes is
//! one `classify` would pass, with the same admission: `classify` takes the first admission
//! cookie that verifies, and this path looks only at the first one that could be a token at
//! all, which verifies whenever it is remembered.

use http::Request;

use super::shared::Core;
use super::visitor::Carried;
use crate::outcome::Admission;
use crate::token::AdmissionToken;

/// The admission of a request that stage 2 passes at once, if this path can tell: see the
/// module docs. `None`: the rest of [`classify`](super::Room::classify) decides.
#[inline]
pub(super) fn admit<B>(
    core: &Core,
    req: &Request<B>,
    carried: &Carried<'_>,
    now: u64,
) -> Option<Admission> {
    let config = &core.config;
    if config.settings.bind_tokens_to_network || core.is_endpoint_path(req.uri().path()) {
        return None;
    }
    let value = carried.admission.first()?;
    let token = AdmissionToken::remembered(&core.keys, config.room(), value, now)?;
    token
        .is_fresh(now, config.settings.refresh)
        .then(|| core.token_admission(&token))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{header, HeaderValue, Request};

    use crate::outcome::{Admission, AdmittedBy};
    use crate::room::visitor::Carried;
    use crate::room::{Next, Room};
    use crate::testing::TestRoom;
    use crate::WaitingRoomLayer;

    fn request(path: &str, cookies: &[&HeaderValue]) -> Request<()> {
        let mut req = Request::builder().uri(path);
        for c in cookies {
            req = req.header(header::COOKIE, (*c).clone());
        }
        req.body(()).unwrap()
    }

    /// What the fast path says of `req`, and what the rest of `classify` says of it.
    fn both(room: &Room, req: &Request<()>) -> (Option<Admission>, Next) {
        let now = room.now_ms();
        let carried = Carried::read(&room.core, req);
        (
            super::admit(&room.core, req, &carried, now),
            room.classify_whole(req, &carried, now),
        )
    }

    /// A room, its layer, and a token the room has verified once (so the fast path passes it).
    fn with_a_remembered_token() -> (TestRoom, WaitingRoomLayer, HeaderValue) {
        let test = TestRoom::new("fast", 10);
        let layer = test.layer();
        let (_, token) = test.token_without_slot();
        let _ = both(layer.room(), &request("/", &[&token]));
        assert!(both(layer.room(), &request("/", &[&token])).0.is_some());
        (test, layer, token)
    }

    fn passed(next: Next) -> Option<Admission> {
        match next {
            Next::Pass { admission, .. } => Some(admission),
            _ => None,
        }
    }

    #[test]
    fn a_remembered_fresh_token_passes_with_the_admission_classify_gives() {
        let test = TestRoom::new("fast", 10);
        let layer = test.layer();
        let room = layer.room();
        let (session, token) = test.token_without_slot();
        let req = request("/shop", &[&token]);
        // Never verified on this gateway: not the fast path's to decide; the whole check
        // verifies it (and remembers it).
        let (fast, whole) = both(room, &req);
        assert!(
            fast.is_none(),
            "a token not verified yet goes the whole way"
        );
        let whole = passed(whole).expect("a fresh valid token passes");
        assert_eq!(
            (whole.session(), whole.admitted_by()),
            (session, AdmittedBy::Token)
        );
        // Now remembered: the fast path passes it, with the very same admission.
        let (fast, whole) = both(room, &req);
        assert_eq!(fast, passed(whole));
        assert_eq!(fast.map(|a| a.session()), Some(session));
    }

    #[test]
    fn whatever_it_is_not_sure_of_goes_on_to_the_whole_check() {
        let (test, layer, token) = with_a_remembered_token();
        let room = layer.room();

        // One of the room's endpoints, with the same token.
        let status = "/__waitingroom/fast/status";
        let (fast, whole) = both(room, &request(status, &[&token]));
        assert!(fast.is_none());
        assert!(passed(whole).is_none(), "the status endpoint answers");

        // A value before it that could be a token but is not one: `classify` takes the first
        // that verifies (the genuine one); the fast path looks only at the first.
        let name = room.config().cookies().admission_name();
        let forged = test.token_without_slot().1;
        let forged = forged.to_str().unwrap().replace(&format!("{name}="), "");
        let mut flipped = forged.into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        let forged =
            HeaderValue::from_str(&format!("{name}={}", String::from_utf8(flipped).unwrap()))
                .unwrap();
        let (fast, whole) = both(room, &request("/", &[&forged, &token]));
        assert!(fast.is_none(), "the first value is not remembered");
        assert!(passed(whole).is_some(), "the genuine second one passes");

        // A genuine token not verified here yet, before the remembered one: `classify` lets
        // the first one's session in, so the fast path must not pass the second's.
        let (first, unverified) = test.token_without_slot();
        let (fast, whole) = both(room, &request("/", &[&unverified, &token]));
        assert!(
            fast.is_none(),
            "only the first value is the fast path's to look at"
        );
        assert_eq!(passed(whole).map(|a| a.session()), Some(first));

        // Past `refresh`: a heartbeat is due, which only the whole check asks for.
        test.clock().advance(Duration::from_secs(20));
        let (fast, whole) = both(room, &request("/", &[&token]));
        assert!(fast.is_none());
        assert!(matches!(whole, Next::Ask(_)), "a heartbeat to the store");

        // Expired: nothing passes.
        test.clock().advance(Duration::from_secs(24 * 3_600));
        let (fast, whole) = both(room, &request("/", &[&token]));
        assert!(fast.is_none());
        assert!(passed(whole).is_none());
    }

    #[test]
    fn a_byte_flipped_remembered_token_is_no_token_here() {
        let (_test, layer, token) = with_a_remembered_token();
        let room = layer.room();
        let text = token.as_bytes().to_vec();
        let name_len = room.config().cookies().admission_name().len() + 1;
        for i in name_len..text.len() {
            let mut flipped = text.clone();
            flipped[i] ^= 0x01;
            let Ok(value) = HeaderValue::from_bytes(&flipped) else {
                continue;
            };
            let (fast, whole) = both(room, &request("/", &[&value]));
            assert!(fast.is_none(), "byte {i} flipped passed the fast path");
            assert!(passed(whole).is_none(), "byte {i} flipped passed");
        }
    }

    #[test]
    fn network_binding_always_takes_the_whole_check() {
        let test = TestRoom::with(
            WaitingRoomLayer::builder("bound")
                .capacity(10)
                .bind_tokens_to_network(true),
        );
        let layer = test.layer();
        let room = layer.room();
        let (_, token) = test.token_without_slot();
        for _ in 0..2 {
            assert!(both(room, &request("/", &[&token])).0.is_none());
        }
    }
}
