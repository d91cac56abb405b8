// Verifies the waiting room's edge tokens, format version 1 ("wr1"), at a CDN edge.
//
//   wr1.<kid>.<base64url claims>.<base64url Ed25519 signature>
//
// docs/edge.md describes the format byte by byte. A token is accepted when its signature
// verifies with the key of its kid in the room's JWKS, its claims are exactly as the format
// writes them, and it was issued no later than SKEW_SECONDS from now and expires later than
// SKEW_SECONDS ago: a clock skew of 10 s is allowed either way.
//
// Dependency-free: Web Crypto only (globalThis.crypto.subtle), so the module runs unchanged in
// Node 20+, Deno, Cloudflare Workers and Vercel's edge runtime.
//
// verify() never throws and never rejects, whatever it is given: anything it cannot accept,
// including input of the wrong type or size and a key set it cannot read, is null.

export const FORMAT = "wr1";
export const SKEW_SECONDS = 10;
// The longest a room's token lives (the crate's MAX_EDGE_TTL): one that says longer was not
// made by a room, and if a signing key leaked would pass for as long as the key is in the set.
export const MAX_LIFETIME_SECONDS = 3600;

const MAX_TOKEN_CHARS = 1024;
const MAX_CLAIMS_BYTES = 512;
// The base64url of 512 bytes: 171 groups of 4 characters. Checked before decoding, so a huge
// claims part costs nothing.
const MAX_CLAIMS_CHARS = Math.ceil(MAX_CLAIMS_BYTES / 3) * 4;
// A 64-byte signature in base64url without padding.
const SIGNATURE_CHARS = 86;
// A 32-byte public key in base64url without padding.
const KEY_CHARS = 43;
// A JWKS holds a few keys (current, next, previous); text far longer is not one.
const MAX_KEY_SET_CHARS = 64 * 1024;
const MAX_CACHED_KEYS = 16;

const KID = /^[A-Za-z0-9_-]{1,32}$/;
const BASE64URL = /^[A-Za-z0-9_-]*$/;
const ROOM = /^[A-Za-z0-9_-]{1,64}$/;
const SESSION = /^[0-9a-f]{32}$/;
// No sign, no leading zero (but 0), at most 12 digits: below 2^53, so exact as a Number.
const TIME = /^(?:0|[1-9][0-9]{0,11})$/;
// A path prefix: a "/", then no space or control character (Unicode's Cc: U+0000-U+001F,
// U+007F-U+009F), the claims' separators among them.
const SCOPE_PREFIX = /^\/[^\u0000-\u0020\u007f-\u009f]*$/;

// fatal: text that is not UTF-8 is refused, not patched with U+FFFD. ignoreBOM: a leading
// U+FEFF stays in the text (and fails the room's check) instead of being silently dropped.
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const ASCII = new TextEncoder();

/**
 * The claims of `token` if it is a valid, unexpired wr1 token signed by a key of `keySet`
 * (a JWKS object or its JSON text) at `nowSeconds` (Unix time), of the room `options.room`;
 * otherwise null (and always null without `options.room`: every room of a site signs with the
 * same keys, so a token is only ever good for the room it names). Never throws.
 *
 * @returns {Promise<null | {version: 1, kid: string, room: string, session: string,
 *   issuedAt: number, expiresAt: number, scope: string[]}>}
 */
export async function verify(token, keySet, nowSeconds, options = {}) {
  try {
    return await verifyOrNull(token, keySet, nowSeconds, options);
  } catch {
    return null;
  }
}

async function verifyOrNull(token, keySet, nowSeconds, options) {
  // Lengths and shape first: nothing is decoded before the sizes are known to be small.
  if (typeof token !== "string" || token.length > MAX_TOKEN_CHARS) return null;
  if (typeof nowSeconds !== "number" || !Number.isFinite(nowSeconds)) return null;
  const parts = token.split(".");
  if (parts.length !== 4) return null;
  const [format, kid, claimsPart, signaturePart] = parts;
  if (format !== FORMAT || !KID.test(kid)) return null;
  if (claimsPart.length > MAX_CLAIMS_CHARS || signaturePart.length !== SIGNATURE_CHARS) return null;

  const claimsBytes = base64urlDecode(claimsPart);
  if (claimsBytes === null || claimsBytes.length > MAX_CLAIMS_BYTES) return null;
  const claims = readClaims(UTF8.decode(claimsBytes));
  if (claims === null) return null;
  // Expired, not yet issued, or another room's: refused before any cryptography, which is the
  // cost of a verify.
  if (!(claims.issuedAt <= nowSeconds + SKEW_SECONDS)) return null;
  if (!(nowSeconds < claims.expiresAt + SKEW_SECONDS)) return null;
  const room = options == null ? undefined : options.room;
  if (typeof room !== "string" || claims.room !== room) return null;

  const signature = base64urlDecode(signaturePart);
  if (signature === null || signature.length !== 64) return null;
  const x = keyOf(keySet, kid);
  if (x === null) return null;
  const key = await importKey(x);
  if (key === null) return null;
  const signed = ASCII.encode(token.slice(0, token.length - SIGNATURE_CHARS - 1));
  const ok = await crypto.subtle.verify({ name: "Ed25519" }, key, signature, signed);
  if (ok !== true) return null;

  return { version: 1, kid, ...claims };
}

// The five lines of the claims text, each exactly as the format writes it; null otherwise.
function readClaims(text) {
  const lines = text.split("\n");
  if (lines.length !== 5) return null;
  const [room, session, issuedAt, expiresAt, scopeLine] = lines;
  if (!ROOM.test(room) || !SESSION.test(session)) return null;
  if (!TIME.test(issuedAt) || !TIME.test(expiresAt)) return null;
  const iat = Number(issuedAt);
  const exp = Number(expiresAt);
  if (!(exp > iat) || exp - iat > MAX_LIFETIME_SECONDS) return null;
  // One space between prefixes: a double, leading or trailing space leaves an empty one.
  const scope = scopeLine.split(" ");
  if (!scope.every((prefix) => SCOPE_PREFIX.test(prefix))) return null;
  return { room, session, issuedAt: iat, expiresAt: exp, scope };
}

/**
 * Whether the token's scope covers `path` (a URL's path, as `new URL(...).pathname` gives it):
 * the path starts with one of the scope's prefixes, at a "/". "/shop" covers "/shop" and
 * "/shop/cart", not "/shopping"; "/shop/" covers "/shop/cart", not "/shop". A path with a "."
 * or ".." segment is covered by no scope, as the gateway refuses it: `new URL` resolves plain
 * and "%2e" dot segments but keeps "/shop/..%2fcheckout", which an origin that decodes "%2f"
 * would serve as "/checkout". Never throws.
 */
export function covers(claims, path) {
  try {
    if (typeof path !== "string" || !Array.isArray(claims?.scope)) return false;
    if (hasDotSegment(path)) return false;
    return claims.scope.some((prefix) => {
      if (typeof prefix !== "string" || !prefix.startsWith("/") || !path.startsWith(prefix)) {
        return false;
      }
      const rest = path.slice(prefix.length);
      return prefix.endsWith("/") || rest === "" || rest.startsWith("/");
    });
  } catch {
    return false;
  }
}

// Whether `path` has a segment of one or two dots, plain or "%2e", ended by the path's end, a
// ";" (Java servers read "..;" as "..") or a separator ("/", "\\", "%2f", "%5c"): the same rule
// as the gateway's guard (gateway/src/guard.rs, has_dot_segment).
function hasDotSegment(path) {
  const encoded = (at, hex) =>
    path[at] === "%" && path[at + 1] === "2" && path[at + 2]?.toLowerCase() === hex;
  const separator = (at) => {
    if (path[at] === "/" || path[at] === "\\") return 1;
    if (encoded(at, "f")) return 3;
    if (path.slice(at, at + 3).toLowerCase() === "%5c") return 3;
    return 0;
  };
  let at = 0;
  while (at <= path.length) {
    let dots = 0;
    for (;;) {
      if (path[at] === ".") at += 1;
      else if (encoded(at, "e")) at += 3;
      else break;
      dots += 1;
    }
    // Then spaces, tabs or NULs, percent-encoded: a server that trims them reads "..%20" as "..".
    let end = at;
    while (["%20", "%09", "%00"].includes(path.slice(end, end + 3))) end += 3;
    if (dots >= 1 && dots <= 2 && (end === path.length || path[end] === ";" || separator(end) > 0)) {
      return true;
    }
    for (;;) {
      if (at >= path.length) return false;
      const len = separator(at);
      if (len > 0) {
        at += len;
        break;
      }
      at += 1;
    }
  }
  return false;
}

// The key set as an object, parsed once per text: an edge usually hands the same JWKS text in
// for every request.
let lastKeySetText = null;
let lastKeySet = null;

// The x (base64url public key) of the key named `kid` in the set, or null. Keys of another type
// or length are no keys: an entry that does not qualify is skipped as if absent.
function keyOf(keySet, kid) {
  if (typeof keySet === "string") {
    if (keySet.length > MAX_KEY_SET_CHARS) return null;
    if (keySet !== lastKeySetText) {
      lastKeySet = JSON.parse(keySet);
      lastKeySetText = keySet;
    }
    keySet = lastKeySet;
  }
  const keys = keySet?.keys;
  if (!Array.isArray(keys)) return null;
  for (const jwk of keys) {
    if (
      jwk !== null &&
      typeof jwk === "object" &&
      jwk.kid === kid &&
      jwk.kty === "OKP" &&
      jwk.crv === "Ed25519" &&
      typeof jwk.x === "string" &&
      jwk.x.length === KEY_CHARS &&
      base64urlDecode(jwk.x)?.length === 32
    ) {
      return jwk.x;
    }
  }
  return null;
}

// Imported keys by their x: importing costs about as much as a verify, and a room has a few
// keys. Bounded, oldest out first, so a key set that changes often cannot grow it.
const importedKeys = new Map();

async function importKey(x) {
  const cached = importedKeys.get(x);
  if (cached !== undefined) return cached;
  let key;
  try {
    key = await crypto.subtle.importKey("raw", base64urlDecode(x), { name: "Ed25519" }, false, [
      "verify",
    ]);
  } catch {
    return null; // Not a point on the curve: no key, and not cached.
  }
  if (importedKeys.size >= MAX_CACHED_KEYS) {
    importedKeys.delete(importedKeys.keys().next().value);
  }
  importedKeys.set(x, key);
  return key;
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const VALUE = new Uint8Array(128);
for (let i = 0; i < ALPHABET.length; i++) VALUE[ALPHABET.charCodeAt(i)] = i;

// RFC 4648 §5 without padding, canonical only: no "=", no other character, no length that no
// byte string encodes to, and unused trailing bits zero. Lenient decoders accept several
// spellings of one signature; this one accepts the signer's only, so any changed character
// changes the bytes. Null when `s` is not such text.
function base64urlDecode(s) {
  if (!BASE64URL.test(s) || s.length % 4 === 1) return null;
  const out = new Uint8Array(Math.floor((s.length * 3) / 4));
  let bits = 0;
  let n = 0;
  let o = 0;
  for (let i = 0; i < s.length; i++) {
    bits = ((bits << 6) | VALUE[s.charCodeAt(i)]) & 0x3fff; // at most 7 + 6 bits pending
    n += 6;
    if (n >= 8) {
      n -= 8;
      out[o++] = (bits >> n) & 0xff;
    }
  }
  // The 2 or 4 bits left over must be zero.
  if ((bits & ((1 << n) - 1)) !== 0) return null;
  return out;
}
