// An example Cloudflare Worker in front of a site with a waiting room: a request whose edge token
// is valid, of the room, and whose path the token's scope covers goes straight to the origin;
// every other request goes to the room's gateway. When anything fails (no token, a bad one, no
// key set) the request goes to the gateway, never to the origin: the gateway decides then.
//
// Settings (edge/README.md): ROOM, KEYS_URL, ORIGIN_URL, GATEWAY_URL, and optionally
// EDGE_COOKIE (default wr_demo_e) and KEYS_TTL_SECONDS (default 300).

import { covers, verify } from "./verify.mjs";

// A kid this key set lacks refetches it at once, but not sooner than this after the last fetch:
// a token naming a made-up kid must not turn every request into a fetch. A fetch that failed
// is not retried sooner either.
const REFETCH_SECONDS = 10;
const WR1_KID = /^wr1\.([A-Za-z0-9_-]{1,32})\./;

// The gateway's key set, shared by the requests this isolate serves.
const keyCache = { keys: null, fetchedAt: -Infinity, triedAt: -Infinity, failed: false };

export default {
  async fetch(request, env) {
    const admitted = await isAdmitted(request, env).catch(() => false);
    return forward(request, admitted ? env.ORIGIN_URL : env.GATEWAY_URL);
  },
};

async function isAdmitted(request, env) {
  const token = cookie(request.headers.get("cookie"), env.EDGE_COOKIE || "wr_demo_e");
  // Without a room to check against, a token of any room would do: refuse them all.
  if (token === null || !env.ROOM || !env.ORIGIN_URL) return false;
  const now = Date.now() / 1000;
  let keys = await keySet(env, now, false);
  const kid = WR1_KID.exec(token)?.[1];
  if (keys !== null && kid !== undefined && !keys.keys.some((key) => key?.kid === kid)) {
    keys = await keySet(env, now, true); // a key published since the last fetch, perhaps
  }
  if (keys === null) return false;
  const claims = await verify(token, keys, now, { room: env.ROOM });
  return claims !== null && covers(claims, new URL(request.url).pathname);
}

// The key set, fetched again when older than KEYS_TTL_SECONDS or when `unknownKid`; null when
// there is no fresh one.
async function keySet(env, now, unknownKid) {
  const ttl = seconds(env.KEYS_TTL_SECONDS, 300);
  const fresh = keyCache.keys !== null && now - keyCache.fetchedAt < ttl;
  const recent = now - keyCache.triedAt < REFETCH_SECONDS;
  if (fresh && (!unknownKid || recent)) return keyCache.keys;
  if (!fresh && keyCache.failed && recent) return null;
  keyCache.triedAt = now;
  try {
    keyCache.keys = await fetchKeys(env.KEYS_URL);
    keyCache.fetchedAt = now;
    keyCache.failed = false;
  } catch {
    keyCache.failed = true;
    if (!fresh) return null; // A stale set is not used: the gateway decides.
  }
  return keyCache.keys;
}

async function fetchKeys(url) {
  const response = await fetch(url, { headers: { accept: "application/json" } });
  if (!response.ok) throw new Error(`key set: HTTP ${response.status}`);
  const keys = JSON.parse(await response.text());
  if (!Array.isArray(keys?.keys)) throw new Error("key set: not a JWKS");
  return keys;
}

// The value of the first cookie named `name`, or null.
function cookie(header, name) {
  for (const pair of (header ?? "").split(";")) {
    const at = pair.indexOf("=");
    if (at > 0 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim();
  }
  return null;
}

function seconds(value, otherwise) {
  const n = Number(value);
  return value !== undefined && value !== "" && Number.isFinite(n) && n >= 0 ? n : otherwise;
}

// The request, to the same path and query at `base` (its own path is replaced). The path is set,
// not resolved against `base`, so a path such as //elsewhere.example/ stays a path.
function forward(request, base) {
  const url = new URL(request.url);
  const target = new URL(base);
  target.pathname = url.pathname;
  target.search = url.search;
  return fetch(new Request(target, request));
}
