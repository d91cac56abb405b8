//! The edge verifier (`edge/verify.mjs`, under Node) against the crate: tokens the crate signs,
//! with random claims and keys of the set, and mutations of them (a byte changed, a part
//! dropped or swapped, a truncation, the wrong room, expired, a key not in the set), each
//! judged by the crate's own verifier; `edge/test/tools/check-tokens.mjs` must reach the same
//! verdict on every one, and the same claims for the valid ones. Node is a test dependency
//! (`scripts/test` installs Debian's `nodejs`): this test fails, saying so, without it.

use std::path::Path;
use std::process::Command;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};
use tower_waiting_room::__private::Rng;
use tower_waiting_room::edge::{EdgeClaims, EdgeKey, EdgeKeySet};
use tower_waiting_room::SessionId;

const ROOM: &str = "shop";
const NOW: u64 = 1_800_000_030;
/// Tokens of random claims, each signed, then mutated a few ways.
const TOKENS: usize = 300;

fn keys() -> EdgeKeySet {
    let key = |id: &str, byte| EdgeKey::from_seed(id, &[byte; 32]).unwrap();
    EdgeKeySet::new(key("k2", 2))
        .with_next(key("k3", 3))
        .with_previous(key("k1", 1))
}

/// The claims as the edge verifier answers them.
fn as_edge(kid: &str, c: &EdgeClaims) -> Value {
    json!({
        "version": 1,
        "kid": kid,
        "room": c.room,
        "session": c.session.to_string(),
        "issuedAt": c.issued_at,
        "expiresAt": c.expires_at,
        "scope": c.scope,
    })
}

fn random_claims(rng: &mut Rng) -> EdgeClaims {
    // A long one too: alone it fits the claims' 512 bytes, with others it may not.
    let long = format!("/{}", "p".repeat(400));
    let prefixes = [
        "/",
        "/shop",
        "/a/b/",
        "/x-y_z.html",
        "/%E2%82%AC",
        "/é/€",
        &long,
    ];
    let issued_at = NOW - 90 + rng.below(100);
    let n = 1 + rng.below(3) as usize;
    EdgeClaims {
        room: if rng.below(8) == 0 { "other" } else { ROOM }.to_owned(),
        session: SessionId::random(),
        issued_at,
        expires_at: issued_at + 1 + rng.below(120),
        scope: (0..n)
            .map(|_| prefixes[rng.below(prefixes.len() as u64) as usize].to_owned())
            .collect(),
    }
}

/// `token` changed the ways a forger or a broken proxy would.
fn mutations(token: &str, rng: &mut Rng) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = token.as_bytes();
    let at = rng.below(bytes.len() as u64) as usize;
    let mut changed = bytes.to_vec();
    changed[at] = if changed[at] == b'A' { b'B' } else { b'A' };
    out.push(String::from_utf8(changed).unwrap());
    out.push(token[..rng.below(token.len() as u64) as usize].to_owned());
    let parts: Vec<&str> = token.split('.').collect();
    out.push(format!("{}.{}.{}", parts[0], parts[1], parts[3]));
    out.push(format!("{}.k1.{}.{}", parts[0], parts[2], parts[3]));
    out.push(format!("wr2.{}.{}.{}", parts[1], parts[2], parts[3]));
    out.push(format!("{token}="));
    out.push(format!("{token}.x"));
    // The claims of another token under this one's signature.
    let mut claims = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    let last = claims.len() - 1;
    claims[last] ^= 1;
    out.push(format!(
        "{}.{}.{}.{}",
        parts[0],
        parts[1],
        URL_SAFE_NO_PAD.encode(claims),
        parts[3]
    ));
    out
}

#[test]
fn the_edge_verifier_agrees_with_the_crate_on_every_token() {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "node is needed for this test (apt-get install nodejs; scripts/test installs it)"
    );
    let set = keys();
    let stranger = EdgeKey::from_seed("k2", &[9; 32]).unwrap();
    let mut rng = Rng(0x00ed_9e70_cafe_f00d);
    let (mut valid, mut invalid) = (Vec::new(), Vec::new());
    let mut judge = |token: String| {
        match EdgeClaims::verify(&set, ROOM, &token, NOW) {
            Some(c) => {
                let kid = token.split('.').nth(1).unwrap().to_owned();
                valid.push(json!({"token": token, "claims": as_edge(&kid, &c)}))
            }
            None => invalid.push(Value::String(token)),
        };
    };
    let signers: Vec<&EdgeKey> = set.keys().collect();
    for _ in 0..TOKENS {
        let claims = random_claims(&mut rng);
        let key = signers[rng.below(signers.len() as u64) as usize];
        let token = claims.sign(key);
        for m in mutations(&token, &mut rng) {
            judge(m);
        }
        judge(claims.sign(&stranger));
        judge(token);
    }
    for junk in ["", ".", "wr1...", "wr1.k2..", &"A".repeat(5_000)] {
        judge(junk.to_owned());
    }
    let (n_valid, n_invalid) = (valid.len(), invalid.len());
    assert!(n_valid > TOKENS / 3, "{n_valid} valid of {TOKENS}");
    assert!(n_invalid > TOKENS * 8, "{n_invalid} invalid");
    let fixture = json!({
        "keys": set.jwks(),
        "now": NOW,
        "room": ROOM,
        "valid": valid,
        "invalid": invalid,
    });
    let dir = std::env::temp_dir().join(format!("edge-node-{}", SessionId::random()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fixture.json");
    std::fs::write(&path, serde_json::to_vec(&fixture).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("edge/test/tools/check-tokens.mjs");
    let out = Command::new("node")
        .arg(&script)
        .arg(&path)
        .output()
        .expect("node runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{n_valid} valid, {n_invalid} invalid tokens: {said}");
    assert!(out.status.success(), "the edge verifier disagrees: {said}");
    std::fs::remove_dir_all(&dir).ok();
}
