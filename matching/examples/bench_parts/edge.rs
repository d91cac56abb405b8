//! What edge tokens cost the gateway, measured side by side in one run.
//!
//! An edge token is signed (Ed25519) only when an admission token is issued: at an admission
//! and at each refresh of the slot, never on the fast path. So the two figures that matter:
//!
//! - **signing**: one edge token's Ed25519 signature beside one admission token's HMAC-SHA256,
//!   interleaved batch by batch (`edge_token_sign_ns`, `token_sign_ns_beside_edge`, and their
//!   ratio `edge_sign_ratio`): what an admission pays on top;
//! - **the fast path**: the very same layer with edge tokens off and on, in process, interleaved
//!   (`edge_fast_path_ratio`, on over off, in time per request: 1.00 is no cost), and over HTTP
//!   by `wrk` in [`super::wrk`] (`wrk_edge_tokens_ratio`: the layer with edge tokens beside the
//!   same layer without, in requests per second).

use serde_json::{json, Map, Value};
use tower::Layer;
use tower_waiting_room::__private::AdmissionToken;
use tower_waiting_room::edge::{EdgeClaims, EdgeKey, EdgeKeySet, EdgeTokens};
use tower_waiting_room::store::MemoryStore;
use tower_waiting_room::{Keyring, SessionId, WaitingRoomLayer};

use super::measure::{now_ms, round};
use super::micro::{time_ns, time_service};
use super::{BoxError, Settings, ROOM};

/// The edge key's seed: fixed, so every process of a run signs with the same key.
const EDGE_SEED: [u8; 32] = *b"bench-edge-seed-0123456789abcdef";

/// The bench's layer (the fast path's: a room of a million on the embedded store), with edge
/// tokens on when `edge` is true and nothing else changed.
pub(crate) fn layer(keyring: &Keyring, edge: bool) -> Result<WaitingRoomLayer, BoxError> {
    let builder = WaitingRoomLayer::builder(ROOM)
        .capacity(1_000_000)
        .keyring(keyring.clone())
        .store(MemoryStore::new());
    let builder = if edge {
        builder.edge_tokens(EdgeTokens::new(EdgeKeySet::new(key()?)))
    } else {
        builder
    };
    Ok(builder.build()?)
}

fn key() -> Result<EdgeKey, BoxError> {
    Ok(EdgeKey::from_seed("e1", &EDGE_SEED)?)
}

/// Signing and the in-process fast path, edge tokens off and on (see the module docs).
pub(crate) fn micro(
    settings: &Settings,
    keyring: &Keyring,
) -> Result<Map<String, Value>, BoxError> {
    let iters = settings.micro_iters;
    let key = key()?;
    let now = now_ms();
    let session = SessionId::random();
    let claims = EdgeClaims {
        room: ROOM.to_owned(),
        session,
        issued_at: now / 1_000,
        expires_at: now / 1_000 + 60,
        scope: vec!["/".to_owned()],
    };
    let token = AdmissionToken::new(session, now, now + 300_000);

    // Interleaved, three times each: a slower stretch of the machine hits both alike, and the
    // best batch of each is kept.
    let (mut edge_ns, mut hmac_ns) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        hmac_ns = hmac_ns.min(time_ns(iters, |_| {
            std::hint::black_box(token.sign(keyring, std::hint::black_box(ROOM)));
        }));
        edge_ns = edge_ns.min(time_ns(iters / 4 + 1, |_| {
            std::hint::black_box(std::hint::black_box(&claims).sign(&key));
        }));
    }

    let mut off = layer(keyring, false)?.layer(super::micro::ok_inner());
    let mut on = layer(keyring, true)?.layer(super::micro::ok_inner());
    let admission_name = layer(keyring, false)?
        .config()
        .cookies()
        .admission_name()
        .to_owned();
    let cookie = || {
        let now = now_ms();
        let value =
            AdmissionToken::new(SessionId::random(), now, now + 300_000).sign(keyring, ROOM);
        http::HeaderValue::from_str(&format!("{admission_name}={value}")).ok()
    };
    let (mut off_ns, mut on_ns) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        off_ns = off_ns.min(time_service(iters, &mut off, cookie, http::StatusCode::OK)?);
        on_ns = on_ns.min(time_service(iters, &mut on, cookie, http::StatusCode::OK)?);
    }
    eprintln!(
        "micro: edge token sign {edge_ns:.0} ns beside an admission token's {hmac_ns:.0} ns ({:.1}x); fast path {off_ns:.0} ns, with edge tokens {on_ns:.0} ns ({:.3})",
        edge_ns / hmac_ns,
        on_ns / off_ns,
    );
    let mut m = Map::new();
    m.insert("edge_token_sign_ns".into(), json!(round(edge_ns, 0)));
    m.insert("token_sign_ns_beside_edge".into(), json!(round(hmac_ns, 0)));
    m.insert("edge_sign_ratio".into(), json!(round(edge_ns / hmac_ns, 2)));
    m.insert("edge_fast_path_ns".into(), json!(round(on_ns, 0)));
    m.insert("edge_off_fast_path_ns".into(), json!(round(off_ns, 0)));
    m.insert(
        "edge_fast_path_ratio".into(),
        json!(round(on_ns / off_ns, 3)),
    );
    Ok(m)
}
