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
