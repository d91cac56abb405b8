// Signs wr1 edge tokens as a gateway does, with Web Crypto's Ed25519, for the tests and
// check-tokens.mjs. Node's test runner runs every .mjs under test/; this one defines no tests.

export function base64url(bytes) {
  return Buffer.from(bytes).toString("base64url");
}

/** A new Ed25519 key named `kid`: its signer and its public key as a JWK. */
export async function newKey(kid) {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const raw = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
  return {
    kid,
    privateKey: pair.privateKey,
    raw,
    jwk: { kty: "OKP", crv: "Ed25519", kid, x: base64url(raw), use: "sig", alg: "EdDSA" },
  };
}

/** The claims text of claims shaped as verify() answers them. */
export function claimsText({ room, session, issuedAt, expiresAt, scope }) {
  return [room, session, issuedAt, expiresAt, scope.join(" ")].join("\n");
}

/** A token of the claims `text` (any text or bytes, valid or not), signed with `key`. */
export function signText(key, text, kid = key.kid) {
  const bytes = typeof text === "string" ? new TextEncoder().encode(text) : text;
  return signParts(key, kid, base64url(bytes));
}

/** The token `wr1.<kid>.<claimsPart>.<signature>`, whatever the parts, signed with `key`. */
export async function signParts(key, kid, claimsPart) {
  const signed = `wr1.${kid}.${claimsPart}`;
  const sig = await crypto.subtle.sign({ name: "Ed25519" }, key.privateKey, Buffer.from(signed));
  return `${signed}.${base64url(new Uint8Array(sig))}`;
}

/** A token of `claims` (shaped as verify() answers them), signed with `key`. */
export function sign(key, claims) {
  return signText(key, claimsText(claims));
}

/** A seeded PRNG (mulberry32): the same numbers in [0, 1) on every run. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
