// edge/cloudflare-worker.mjs with fetch stood in for: where each request goes, how often the key
// set is fetched, and that nothing reaches the origin when verifying fails or the key set
// cannot be had.

import assert from "node:assert/strict";
import { afterEach, beforeEach, test } from "node:test";

import { newKey, sign } from "./tools/sign.mjs";

const ENV = {
  ROOM: "shop",
  KEYS_URL: "https://gateway.example/__waitingroom/keys",
  ORIGIN_URL: "https://origin.example",
  GATEWAY_URL: "https://gateway.example",
};
const T0 = 1_800_000_000;

let clock; // seconds
let keyServer; // () => Response, or throws
let keyFetches;
let realFetch;
let realNow;
let instance = 0;

beforeEach(() => {
  clock = T0;
  keyFetches = 0;
  realFetch = globalThis.fetch;
  realNow = Date.now;
  Date.now = () => clock * 1000;
  globalThis.fetch = async (input, init) => {
    const url = typeof input === "string" ? input : input.url;
    if (url === ENV.KEYS_URL) {
      keyFetches++;
      return keyServer();
    }
    return new Response(null, { status: 204, headers: { "x-to": url } });
  };
});

afterEach(() => {
  globalThis.fetch = realFetch;
  Date.now = realNow;
});

// A fresh copy of the Worker, with its own key cache.
async function worker() {
  instance++;
  return (await import(`../cloudflare-worker.mjs?instance=${instance}`)).default;
}

// Where the Worker sends a request for `path` with `cookies`.
async function destination(w, path, cookies, env = ENV) {
  const headers = cookies === undefined ? {} : { cookie: cookies };
  const response = await w.fetch(new Request(`https://shop.example${path}`, { headers }), env);
  return response.headers.get("x-to");
}

const jwks = (...keys) => () => Response.json({ keys: keys.map((k) => k.jwk) });
const claims = (over = {}) => ({
  room: "shop",
  session: "0123456789abcdef".repeat(2),
  issuedAt: T0,
  expiresAt: T0 + 60,
  scope: ["/shop"],
  ...over,
});

test("a valid token of the room, covering the path: the origin, path and query kept", async () => {
  const k = await newKey("k1");
  keyServer = jwks(k);
  const w = await worker();
  const token = await sign(k, claims());
  assert.equal(
    await destination(w, "/shop/cart?item=1&x=%20", `a=b; wr_demo_e=${token}; c=d`),
    "https://origin.example/shop/cart?item=1&x=%20",
  );
  assert.equal(await destination(w, "/shop", `wr_demo_e=${token}`), "https://origin.example/shop");
  // A path that reads as another host, resolved against the origin, stays a path on it.
  const all = await sign(k, claims({ scope: ["/"] }));
  assert.equal(
    await destination(w, "//evil.example/x?y", `wr_demo_e=${all}`),
    "https://origin.example//evil.example/x?y",
  );
  assert.equal(keyFetches, 1, "the key set is fetched once and kept");
});

test("everything else goes to the gateway", async () => {
  const k = await newKey("k1");
  const stranger = await newKey("k1");
  keyServer = jwks(k);
  const w = await worker();
  const token = await sign(k, claims());
  const gateway = (path) => `https://gateway.example${path}`;
  for (const [path, cookies] of [
    ["/shop", undefined],
    ["/shop", "other=1"],
    ["/shop", "wr_demo_e="],
    ["/shop", "wr_demo_e=garbage"],
    ["/shopping", `wr_demo_e=${token}`],
    ["/", `wr_demo_e=${token}`],
    ["/shop", `wr_other_e=${token}`],
    ["/shop", `wr_demo_e=${token.slice(0, -1)}`],
    ["/shop", `wr_demo_e=${await sign(k, claims({ room: "other" }))}`],
    ["/shop", `wr_demo_e=${await sign(k, claims({ expiresAt: T0 - 10 }))}`],
    ["/shop", `wr_demo_e=${await sign(stranger, claims())}`],
    // A dot segment the URL parser keeps, which an origin decoding "%2f" reads as "/checkout".
    ["/shop/..%2fcheckout", `wr_demo_e=${token}`],
    ["/shop/%2e%2e%5Ccheckout", `wr_demo_e=${token}`],
    ["/shop/..;/checkout", `wr_demo_e=${token}`],
  ]) {
    assert.equal(await destination(w, path, cookies), gateway(path), `${path} ${cookies}`);
  }
  // No room, no origin: no token is good enough.
  const unset = [{ ...ENV, ROOM: undefined }, { ...ENV, ROOM: "" }, { ...ENV, ORIGIN_URL: "" }];
  for (const env of unset) {
    assert.equal(await destination(w, "/shop", `wr_demo_e=${token}`, env), gateway("/shop"));
  }
});

test("the cookie named by EDGE_COOKIE", async () => {
  const k = await newKey("k1");
  keyServer = jwks(k);
  const w = await worker();
  const token = await sign(k, claims());
  const env = { ...ENV, EDGE_COOKIE: "wr_shop_e" };
  const to = (cookies) => destination(w, "/shop", cookies, env);
  assert.equal(await to(`wr_shop_e=${token}`), "https://origin.example/shop");
  assert.equal(await to(`wr_demo_e=${token}`), "https://gateway.example/shop");
});

test("a key set that cannot be fetched or read sends everyone to the gateway", async () => {
  const k = await newKey("k1");
  const token = await sign(k, claims());
  for (const failing of [
    () => new Response("down", { status: 503 }),
    () => Response.json({ keys: [k.jwk] }, { status: 500 }), // a key set, but not an answer
    () => new Response("{", { status: 200 }),
    () => Response.json({ keys: "k1" }),
    () => {
      throw new TypeError("network");
    },
  ]) {
    keyServer = failing;
    const w = await worker();
    const to = () => destination(w, "/shop", `wr_demo_e=${token}`);
    clock = T0;
    keyFetches = 0;
    assert.equal(await to(), "https://gateway.example/shop");
    // Not retried within 10 s, then retried.
    clock = T0 + 9;
    assert.equal(await to(), "https://gateway.example/shop");
    assert.equal(keyFetches, 1);
    keyServer = jwks(k);
    clock = T0 + 10;
    assert.equal(await to(), "https://origin.example/shop");
    assert.equal(keyFetches, 2);
  }
});

test("the key set is kept KEYS_TTL_SECONDS; a stale one is never used", async () => {
  const k = await newKey("k1");
  keyServer = jwks(k);
  const w = await worker();
  const env = { ...ENV, KEYS_TTL_SECONDS: "30" };
  const token = await sign(k, claims({ expiresAt: T0 + 3600 }));
  const to = () => destination(w, "/shop", `wr_demo_e=${token}`, env);
  assert.equal(await to(), "https://origin.example/shop");
  clock = T0 + 29;
  assert.equal(await to(), "https://origin.example/shop");
  assert.equal(keyFetches, 1);
  clock = T0 + 30;
  assert.equal(await to(), "https://origin.example/shop");
  assert.equal(keyFetches, 2, "refetched when stale");
  // Stale, and the gateway cannot answer: the old set is not used.
  keyServer = () => new Response("down", { status: 503 });
  clock = T0 + 60;
  assert.equal(await to(), "https://gateway.example/shop");
});

test("a token naming a kid the set lacks refetches it, at most once every 10 s", async () => {
  const k1 = await newKey("k1");
  const k2 = await newKey("k2");
  const k3 = await newKey("k3");
  keyServer = jwks(k1);
  const w = await worker();
  const t1 = await sign(k1, claims({ expiresAt: T0 + 3600 }));
  const to = (token) => destination(w, "/shop", `wr_demo_e=${token}`);
  assert.equal(await to(t1), "https://origin.example/shop");
  assert.equal(keyFetches, 1);
  // k2 is published: its first token fetches the set again, at once (once 10 s have passed).
  keyServer = jwks(k1, k2);
  clock = T0 + 10;
  const t2 = await sign(k2, claims({ expiresAt: T0 + 3600 }));
  assert.equal(await to(t2), "https://origin.example/shop");
  assert.equal(keyFetches, 2);
  // A made-up kid within 10 s of that fetch: no fetch, the gateway.
  keyServer = jwks(k1, k2, k3);
  clock = T0 + 15;
  const t3 = await sign(k3, claims({ expiresAt: T0 + 3600 }));
  assert.equal(await to(t3), "https://gateway.example/shop");
  assert.equal(keyFetches, 2);
  assert.equal(await to(t1), "https://origin.example/shop");
  clock = T0 + 20;
  assert.equal(await to(t3), "https://origin.example/shop");
  assert.equal(keyFetches, 3);
  // A refetch that fails keeps the fresh set for the kids it has.
  keyServer = () => new Response("down", { status: 503 });
  clock = T0 + 30;
  const t9 = await sign(await newKey("k9"), claims({ expiresAt: T0 + 3600 }));
  assert.equal(await to(t9), "https://gateway.example/shop");
  assert.equal(await to(t1), "https://origin.example/shop");
  assert.equal(keyFetches, 4);
});

test("an exception while deciding sends the request to the gateway", async () => {
  const k = await newKey("k1");
  keyServer = jwks(k);
  const w = await worker();
  const token = await sign(k, claims());
  Date.now = () => {
    throw new Error("no clock");
  };
  assert.equal(await destination(w, "/shop", `wr_demo_e=${token}`), "https://gateway.example/shop");
});
