//! Edge tokens from the gateway, as an edge meets them: the keys named in the file
//! (`edge_keys_env`, `edge_keys_file`), an admitted visitor's `wr_sale_e` cookie verified with
//! the public keys the gateway serves (by the crate's verifier and by `edge/verify.mjs` under
//! Node), the token gone with a leave, a rotation by rewriting the keys file and `SIGHUP`, and
//! the private keys never in the log; `--check` names a missing variable.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tower_waiting_room::edge::{EdgeClaims, EdgeKeySet};

use crate::support::*;

const LIMIT: Duration = Duration::from_secs(5);
const JSON: [(&str, &str); 1] = [("accept", "application/json")];
const EDGE_COOKIE: &str = "wr_sale_e";

// Three private keys (32-byte seeds, base64url), random once: a test looks for them in the log.
const SEED_1: &str = "Wxe6f5oReB0ouWccr-n2b1Lase8M9FIjKNdJ7nFbDaU";
const SEED_2: &str = "Zb5Mr8WWx-y74M9P8pd38894-T53Ojbr_vINV3D23l4";
const SEED_3: &str = "vgH6Qmln5a4jUulkzjH3v3nkcgpeLgvwYjARxF3xkOA";

/// The room `sale` of capacity 1 with edge tokens, its keys where `keys` says
/// (`edge_keys_env = ...` or `edge_keys_file = ...`), for the paths under `/shop`.
fn edge_room(keys: &str) -> String {
    format!(
        "{}{keys}\nedge_token_ttl = \"30s\"\nedge_scope = \"/shop /checkout/\"\n",
        sale_room(1)
    )
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The gateway's answer to an edge fetching the room's public keys.
fn keys_answer(gw: &Gateway) -> Response {
    let res = request(
        gw.addr,
        "GET",
        "/__waitingroom/sale/keys",
        &JSON,
        b"",
        &mut Jar::default(),
    );
    assert_eq!(res.status, 200, "{}", res.text());
    res
}

/// The public keys the gateway serves for the room, as an edge fetches them.
fn fetch_keys(gw: &Gateway) -> Value {
    keys_answer(gw).json()
}

/// The key ids of a JWKS, in order.
fn kids(jwks: &Value) -> Vec<String> {
    jwks["keys"]
        .as_array()
        .expect("a JWKS has keys")
        .iter()
        .map(|k| k["kid"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_admitted_visitor_holds_an_edge_token_that_the_served_keys_verify() {
    let app = App::start();
    let keys = format!("current e1 {SEED_1}\nnext e2 {SEED_2}");
    let gw = Gateway::start_with(
        &config(&app.url(), &edge_room("edge_keys_env = \"SALE_EDGE_KEYS\"")),
        &[],
        &[("SALE_EDGE_KEYS", keys.as_str())],
    );
    let jar = admitted(gw.addr, "/shop/item", LIMIT);
    let token = jar
        .0
        .get(EDGE_COOKIE)
        .expect("an edge token beside the admission");
    assert!(
        token.starts_with("wr1.e1."),
        "signed by the current key: {token}"
    );

    // The keys as an edge fetches them: public halves only, cacheable, current and next.
    let res = keys_answer(&gw);
    let cache = res.header("cache-control").unwrap_or_default();
    assert!(
        cache.contains("public"),
        "edges may cache the keys: {cache}"
    );
    let jwks = res.json();
    assert_eq!(kids(&jwks), ["e1", "e2"], "{jwks}");
    for key in jwks["keys"].as_array().unwrap() {
        assert_eq!(
            (&key["kty"], &key["crv"]),
            (&json!("OKP"), &json!("Ed25519"))
        );
        assert!(key.get("d").is_none(), "no private half is served: {key}");
    }
    let text = res.text();
    for seed in [SEED_1, SEED_2] {
        assert!(!text.contains(seed), "a private key in the JWKS");
        assert!(!gw.log().contains(seed), "a private key in the log");
    }

    // What the token says, by the crate's verifier with the same key set.
    let set = EdgeKeySet::parse(&keys).unwrap();
    let now = now_secs();
    let claims = EdgeClaims::verify(&set, "sale", token, now).expect("a valid edge token");
    assert_eq!(claims.scope, ["/shop", "/checkout/"]);
    assert!(claims.expires_at <= now + 31, "the file's 30 s: {claims:?}");
    assert!(EdgeClaims::verify(&set, "other", token, now).is_none());

    // And by the edge's verifier under Node, with nothing but the JWKS the gateway served.
    let mut changed = token.clone().into_bytes();
    let last = changed.len() - 1;
    changed[last] = if changed[last] == b'A' { b'B' } else { b'A' };
    let fixture = json!({
        "keys": jwks,
        "now": now,
        "room": "sale",
        "valid": [{"token": token, "claims": {
            "version": 1,
            "kid": "e1",
            "room": "sale",
            "session": claims.session.to_string(),
            "issuedAt": claims.issued_at,
            "expiresAt": claims.expires_at,
            "scope": claims.scope,
        }}],
        "invalid": [String::from_utf8(changed).unwrap()],
    });
    node_agrees(&fixture);
}

/// `edge/test/tools/check-tokens.mjs` under Node judges the fixture's tokens as it says.
fn node_agrees(fixture: &Value) {
    let node = std::process::Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "node is needed for this test (apt-get install nodejs; scripts/test installs it)"
    );
    let path = scratch("edge").join(format!("fixture-{}.json", std::process::id()));
    std::fs::write(&path, fixture.to_string()).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../edge/test/tools/check-tokens.mjs"
    );
    let out = std::process::Command::new("node")
        .arg(script)
        .arg(&path)
        .output()
        .expect("node runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the edge verifier disagrees: {said}");
    std::fs::remove_file(&path).ok();
}

#[test]
fn a_leave_takes_the_edge_token_with_the_admission() {
    let app = App::start();
    let keys = format!("current e1 {SEED_1}");
    let gw = Gateway::start_with(
        &config(&app.url(), &edge_room("edge_keys_env = \"SALE_EDGE_KEYS\"")),
        &[],
        &[("SALE_EDGE_KEYS", keys.as_str())],
    );
    let mut jar = admitted(gw.addr, "/shop", LIMIT);
    assert!(jar.0.contains_key(EDGE_COOKIE), "{:?}", jar.0);
    let res = request(
        gw.addr,
        "POST",
        "/__waitingroom/sale/leave",
        &JSON,
        b"",
        &mut jar,
    );
    assert!(res.status < 300, "{} {}", res.status, res.text());
    let cleared = res
        .headers
        .iter()
        .filter(|(k, _)| k == "set-cookie")
        .any(|(_, v)| v.starts_with(&format!("{EDGE_COOKIE}=")) && v.contains("Max-Age=0"));
    assert!(cleared, "the edge cookie is cleared: {:?}", res.headers);
    assert!(!jar.0.contains_key(EDGE_COOKIE), "{:?}", jar.0);
}

#[test]
fn keys_rotate_by_rewriting_the_file_and_sighup_without_refusing_anyone() {
    let app = App::start();
    let file = scratch("edge").join(format!("keys-{}.txt", std::process::id()));
    std::fs::write(&file, format!("current e1 {SEED_1}\n")).unwrap();
    let room = edge_room(&format!("edge_keys_file = \"{}\"", file.display()));
    let gw = Gateway::start(&config(&app.url(), &room));
    let jar = admitted(gw.addr, "/shop", LIMIT);
    let first = jar.0[EDGE_COOKIE].clone();
    assert_eq!(kids(&fetch_keys(&gw)), ["e1"]);

    // Step 1: the next key published before it signs.
    std::fs::write(&file, format!("current e1 {SEED_1}\nnext e2 {SEED_2}\n")).unwrap();
    gw.signal("HUP");
    assert!(
        eventually(LIMIT, || kids(&fetch_keys(&gw)) == ["e1", "e2"]),
        "the next key is published: {}",
        gw.log()
    );
    // Step 2: it signs; the one before stays published while its tokens live.
    std::fs::write(
        &file,
        format!("current e2 {SEED_2}\nprevious e1 {SEED_1}\n"),
    )
    .unwrap();
    gw.signal("HUP");
    assert!(
        eventually(LIMIT, || kids(&fetch_keys(&gw)).first().map(String::as_str)
            == Some("e2")),
        "the next key signs: {}",
        gw.log()
    );
    let jwks = fetch_keys(&gw);
    assert_eq!(kids(&jwks), ["e2", "e1"], "{jwks}");

    // An edge holding the published set still takes the token signed before the rotation,
    // and a new admission is signed with the new key.
    let set = EdgeKeySet::parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(EdgeClaims::verify(&set, "sale", &first, now_secs()).is_some());
    let res = request(
        gw.addr,
        "POST",
        "/__waitingroom/sale/leave",
        &JSON,
        b"",
        &mut jar.clone(),
    );
    assert!(res.status < 300, "{} {}", res.status, res.text());
    let next = admitted(gw.addr, "/shop", LIMIT);
    let token = &next.0[EDGE_COOKIE];
    assert!(
        token.starts_with("wr1.e2."),
        "signed by the new key: {token}"
    );
    assert!(EdgeClaims::verify(&set, "sale", token, now_secs()).is_some());

    // A file that is not a key set is refused, and the running keys kept.
    std::fs::write(&file, format!("current e3 {SEED_3}x\n")).unwrap();
    gw.signal("HUP");
    assert!(gw.wait_log("reload refused", LIMIT), "{}", gw.log());
    assert_eq!(kids(&fetch_keys(&gw)), ["e2", "e1"]);
    for seed in [SEED_1, SEED_2, SEED_3] {
        assert!(!gw.log().contains(seed), "a private key in the log");
    }
    std::fs::remove_file(&file).ok();
}

#[test]
fn check_names_the_missing_keys_variable_and_never_echoes_a_key() {
    let dir = scratch("edge");
    let path = dir.join(format!("check-{}.toml", std::process::id()));
    let room = edge_room("edge_keys_env = \"SALE_EDGE_KEYS\"");
    std::fs::write(&path, config("http://127.0.0.1:9", &room)).unwrap();
    let path = path.to_str().unwrap();

    let (code, _, err) = run_bin(&["--check", path], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("SALE_EDGE_KEYS"), "names the variable: {err}");

    let bad = format!("current e1 {SEED_1}x");
    let (code, _, err) = run_bin(&["--check", path], &[("SALE_EDGE_KEYS", bad.as_str())]);
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains(SEED_1), "a key echoed: {err}");

    let good = format!("current e1 {SEED_1}");
    let (code, out, err) = run_bin(&["--check", path], &[("SALE_EDGE_KEYS", good.as_str())]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!format!("{out}{err}").contains(SEED_1), "a key echoed");
}
