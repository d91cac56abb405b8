// edge/verify.mjs against tokens signed here, as a gateway signs them, and everything a forger,
// a broken proxy or a careless caller could hand it instead. Run: node --test edge/test/

import assert from "node:assert/strict";
import { before, describe, test } from "node:test";

import { covers, FORMAT, MAX_LIFETIME_SECONDS, SKEW_SECONDS, verify } from "../verify.mjs";
import { base64url, claimsText, newKey, prng, sign, signParts, signText } from "./tools/sign.mjs";

const NOW = 1_800_000_030;
const CLAIMS = {
  room: "shop",
  session: "ab".repeat(16),
  issuedAt: 1_800_000_000,
  expiresAt: 1_800_000_060,
  scope: ["/shop", "/checkout/"],
};
const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

let k1, k2, stranger, keySet, token;
const check = (t, now = NOW, options = { room: "shop" }, keys = keySet) =>
  verify(t, keys, now, options);

before(async () => {
  k1 = await newKey("k1");
  k2 = await newKey("k2");
  stranger = await newKey("k2"); // the same kid, another key
  keySet = { keys: [k1.jwk, k2.jwk] };
  token = await sign(k2, CLAIMS);
});

describe("a valid token", () => {
  test("answers exactly its claims", async () => {
    assert.equal(FORMAT, "wr1");
    assert.equal(SKEW_SECONDS, 10);
    assert.match(token, /^wr1\.k2\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{86}$/);
    assert.deepEqual(await check(token), { version: 1, kid: "k2", ...CLAIMS });
  });

  test("with the key set as JSON text, with any key of the set", async () => {
    const want = { version: 1, kid: "k2", ...CLAIMS };
    assert.deepEqual(await verify(token, JSON.stringify(keySet), NOW, { room: "shop" }), want);
    const byK1 = await sign(k1, CLAIMS);
    assert.deepEqual(await check(byK1), { ...want, kid: "k1" });
  });

  test("never without the room it is for: every room of a site signs with the same keys", async () => {
    assert.equal(await verify(token, keySet, NOW), null);
    assert.equal(await verify(token, keySet, NOW), null);
    assert.equal(await verify(token, keySet, NOW, null), null);
    assert.equal(await verify(token, keySet, NOW, { room: undefined }), null);
    assert.equal(await verify(token, keySet, NOW, { room: ["shop"] }), null);
  });

  test("living at most MAX_LIFETIME_SECONDS, as a room mints it", async () => {
    assert.equal(MAX_LIFETIME_SECONDS, 3600);
    const { issuedAt } = CLAIMS;
    const longest = await sign(k2, { ...CLAIMS, expiresAt: issuedAt + MAX_LIFETIME_SECONDS });
    assert.notEqual(await check(longest), null);
    for (const expiresAt of [issuedAt + MAX_LIFETIME_SECONDS + 1, 999_999_999_999]) {
      const forged = await sign(k2, { ...CLAIMS, expiresAt });
      assert.equal(await check(forged), null, String(expiresAt));
    }
    const ancient = await sign(k2, { ...CLAIMS, issuedAt: 0, expiresAt: 999_999_999_999 });
    assert.equal(await check(ancient), null);
  });

  test("within the skew either way, not beyond", async () => {
    const { issuedAt, expiresAt } = CLAIMS;
    assert.notEqual(await check(token, expiresAt + SKEW_SECONDS - 1), null);
    assert.notEqual(await check(token, expiresAt + SKEW_SECONDS - 0.001), null);
    assert.equal(await check(token, expiresAt + SKEW_SECONDS), null, "expired");
    assert.equal(await check(token, expiresAt + 3600), null, "expired");
    assert.notEqual(await check(token, issuedAt - SKEW_SECONDS), null);
    assert.equal(await check(token, issuedAt - SKEW_SECONDS - 1), null, "not yet issued");
    assert.equal(await check(token, issuedAt - 3600), null, "not yet issued");
  });

  test("of another room is null when a room is asked for", async () => {
    assert.equal(await check(token, NOW, { room: "other" }), null);
    assert.equal(await check(token, NOW, { room: "" }), null);
    assert.equal(await check(token, NOW, { room: null }), null);
    const other = await sign(k2, { ...CLAIMS, room: "other" });
    assert.equal(await check(other), null);
    assert.equal((await check(other, NOW, { room: "other" })).room, "other");
  });
});

describe("a changed token is null", () => {
  test("every character changed to every other base64url character or '.'", async () => {
    let tried = 0;
    for (let i = 0; i < token.length; i++) {
      for (const c of B64URL + ".") {
        if (c === token[i]) continue;
        const changed = token.slice(0, i) + c + token.slice(i + 1);
        assert.equal(await check(changed), null, `position ${i} to ${c}: ${changed}`);
        tried++;
      }
    }
    assert.equal(tried, token.length * 64);
  });

  test("every character changed to a character base64url does not have", async () => {
    for (let i = 0; i < token.length; i++) {
      for (const c of "+/= %\0\u00e9") {
        const changed = token.slice(0, i) + c + token.slice(i + 1);
        assert.equal(await check(changed), null, `position ${i} to ${JSON.stringify(c)}`);
      }
    }
  });

  test("the signature's last character in another spelling of the same bytes", async () => {
    // 64 bytes leave 4 unused bits in the last character: a lenient decoder reads "A" to "P"
    // after a "Q"... as the same signature. Only the signer's spelling is the token.
    const last = B64URL.indexOf(token.at(-1));
    for (let v = last & 0x30; v < (last & 0x30) + 16; v++) {
      if (v === last) continue;
      assert.equal(await check(token.slice(0, -1) + B64URL[v]), null, B64URL[v]);
    }
  });

  test("truncated at every length", async () => {
    for (let n = 0; n < token.length; n++) {
      assert.equal(await check(token.slice(0, n)), null, `first ${n}`);
    }
  });

  test("with parts added, dropped, swapped or padded", async () => {
    const [f, kid, claims, sig] = token.split(".");
    for (const t of [
      `${token}=`,
      `${token}.`,
      `${token}.x`,
      `.${token}`,
      `${f}.${kid}.${sig}`,
      `${f}.${claims}.${sig}`,
      `${f}.${kid}.${claims}`,
      `${f}.${kid}.${sig}.${claims}`,
      `wr2.${kid}.${claims}.${sig}`,
      `WR1.${kid}.${claims}.${sig}`,
      `${f}.${kid}.${claims}=.${sig}`,
      `${f}.${kid}.${claims}.${sig}==`,
      `${f}.${kid}.${claims}.${sig.replaceAll("-", "+").replaceAll("_", "/")}`,
      ` ${token}`,
      `${token} `,
    ]) {
      if (t === token) continue; // a signature with no "-" or "_" reads the same in base64
      assert.equal(await check(t), null, t);
    }
  });

  test("signed by a key not in the set, or naming a kid the set lacks", async () => {
    assert.equal(await check(await sign(stranger, CLAIMS)), null, "a stranger's k2");
    const k9 = await newKey("k9");
    assert.equal(await check(await sign(k9, CLAIMS)), null, "unknown kid");
    // k1's token relabelled k2, and the reverse: the kid is signed too.
    const [, , claims, sig] = (await sign(k1, CLAIMS)).split(".");
    assert.equal(await check(`wr1.k2.${claims}.${sig}`), null);
  });

  test("the claims of one token under another's signature", async () => {
    const other = await sign(k2, { ...CLAIMS, expiresAt: CLAIMS.expiresAt + 3600 });
    const [f, kid, , sig] = token.split(".");
    assert.equal(await check(`${f}.${kid}.${other.split(".")[2]}.${sig}`), null);
  });
});

describe("anything else is null, never a throw", () => {
  test("1,000 random strings (seeded)", async () => {
    const random = prng(0xed9e);
    const int = (n) => Math.floor(random() * n);
    const from = (alphabet, n) => Array.from({ length: n }, () => alphabet[int(alphabet.length)]);
    const [, , claims, sig] = token.split(".");
    for (let i = 0; i < 1000; i++) {
      let s;
      switch (i % 5) {
        case 0: // base64url and dots
          s = from(B64URL + "....", int(300)).join("");
          break;
        case 1: // the shape of a token, random parts
          s = `wr1.k2.${from(B64URL, int(300)).join("")}.${from(B64URL, 86).join("")}`;
          break;
        case 2: // a real token's parts with a random signature, or random claims
          s =
            i % 2
              ? `wr1.k2.${claims}.${from(B64URL, 86).join("")}`
              : `wr1.k2.${from(B64URL, claims.length).join("")}.${sig}`;
          break;
        case 3: // any UTF-16 code units, lone surrogates among them
          s = String.fromCharCode(...Array.from({ length: int(200) }, () => int(0x10000)));
          break;
        default: // printable ASCII
          s = from(Array.from({ length: 95 }, (_, c) => String.fromCharCode(32 + c)), int(400));
          s = s.join("");
      }
      assert.equal(await check(s), null, JSON.stringify(s));
    }
  });

  test("a token that is not a string, a time that is not a number", async () => {
    for (const t of [undefined, null, 0, 1n, true, {}, [], [token], Symbol("t"), () => token]) {
      assert.equal(await check(t), null, String(t?.toString?.()));
    }
    for (const now of [undefined, null, NaN, Infinity, -Infinity, `${NOW}`, BigInt(NOW), {}]) {
      assert.equal(await verify(token, keySet, now, { room: "shop" }), null, String(now));
    }
    const valueOf = { valueOf: () => NOW };
    assert.equal(await check(token, valueOf), null);
    assert.equal(await verify(token, keySet), null, "no time");
    assert.equal(await verify(token), null, "no key set");
    assert.equal(await verify(), null, "nothing");
  });

  test("a key set that is not JSON, not a JWKS, or throws when read", async () => {
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error("boom");
        },
      },
    );
    const sets = [
      undefined,
      null,
      "",
      "{",
      "null",
      "[]",
      '{"keys": {}}',
      "x".repeat(100_000),
      42,
      [],
      [k2.jwk],
      {},
      { keys: null },
      { keys: "k2" },
      { keys: [null, 1, "k2", [], {}] },
      { keys: { 0: k2.jwk, length: 1 } },
      hostile,
      { keys: [hostile] },
    ];
    for (const [i, keys] of sets.entries()) {
      assert.equal(await verify(token, keys, NOW, { room: "shop" }), null, `key set #${i}`);
    }
  });

  test("a key of the wrong type, curve or length is no key", async () => {
    const x = k2.jwk.x;
    const bytes = Buffer.from(x, "base64url");
    const wrong = {
      kty: [undefined, "EC", "RSA", "oct", "okp"],
      crv: [undefined, "X25519", "Ed448", "P-256", "ed25519"],
      x: [
        undefined,
        null,
        Array.from(bytes),
        "",
        base64url(bytes.subarray(0, 31)),
        base64url(Buffer.concat([bytes, Buffer.from([0])])),
        `${x}=`,
        x.replaceAll("-", "+").replaceAll("_", "/").slice(0, 42) + "+",
        `${x.slice(0, 42)}!`,
        `${x.slice(0, 42)}${B64URL[B64URL.indexOf(x.at(-1)) ^ 1]}`, // non-zero unused bits
        k1.jwk.x,
      ],
      kid: [undefined, "K2", "k2 ", 2],
    };
    for (const [member, values] of Object.entries(wrong)) {
      for (const value of values) {
        const jwk = { ...k2.jwk, [member]: value };
        if (value === undefined) delete jwk[member];
        const keys = { keys: [k1.jwk, jwk] };
        assert.equal(await check(token, NOW, { room: "shop" }, keys), null, `${member}: ${value}`);
      }
    }
    // An entry that is no key is passed over, as if absent: a good k2 after it still counts.
    const keys = { keys: [{ ...k2.jwk, kty: "EC" }, k2.jwk] };
    assert.notEqual(await check(token, NOW, { room: "shop" }, keys), null);
  });

  test("a huge token, claims part or key set, quickly", async () => {
    const huge = [
      "A".repeat(1025),
      `${token}${"A".repeat(1025 - token.length)}`,
      "wr1.k2." + "A".repeat(10_000_000) + "." + token.split(".")[3],
      ".".repeat(5_000_000),
      `wr1.k2.${"A".repeat(685)}.${token.split(".")[3]}`,
    ];
    const hugeKeys = JSON.stringify({ keys: [k2.jwk], pad: "x".repeat(10_000_000) });
    const started = performance.now();
    for (const t of huge) assert.equal(await check(t), null);
    assert.equal(await check(token, NOW, { room: "shop" }, hugeKeys), null);
    const ms = performance.now() - started;
    assert.ok(ms < 100, `${ms} ms`);
  });

  test("claims over 512 bytes, properly signed", async () => {
    const pad = (n) => claimsText({ ...CLAIMS, scope: ["/" + "a".repeat(n)] });
    const fits = pad(512 - pad(0).length);
    assert.equal(Buffer.byteLength(fits), 512);
    assert.notEqual(await check(await signText(k2, fits)), null, "512 bytes");
    const over = pad(513 - pad(0).length);
    assert.equal(await check(await signText(k2, over)), null, "513 bytes");
    // 512 bytes, under 1,024 characters, in multi-byte characters: bytes are what count.
    const euros = claimsText({ ...CLAIMS, scope: ["/" + "€".repeat(160)] });
    assert.ok(Buffer.byteLength(euros) > 512);
    assert.equal(await check(await signText(k2, euros)), null, "€");
  });
});

describe("claims the format does not allow, properly signed, are null", () => {
  const session = "ab".repeat(16);
  const good = `shop\n${session}\n1800000000\n1800000060\n/`;

  test("the same text, allowed, verifies (so only the claims can refuse the rest)", async () => {
    const claims = await check(await signText(k2, good));
    assert.deepEqual(claims, {
      version: 1,
      kid: "k2",
      room: "shop",
      session,
      issuedAt: 1_800_000_000,
      expiresAt: 1_800_000_060,
      scope: ["/"],
    });
    // The edges of what is allowed: a 64-character room, time 0, 12 digits, the longest
    // lifetime, Unicode scope.
    const room = "R-_9".repeat(16);
    const edge = `${room}\n${session}\n999999996399\n999999999999\n/é/€ /%E2%82%AC /a.b~c`;
    const answered = await check(await signText(k2, edge), 999_999_999_000, { room });
    assert.equal(answered?.expiresAt, 999_999_999_999);
    assert.deepEqual(answered?.scope, ["/é/€", "/%E2%82%AC", "/a.b~c"]);
    const early = `${room}\n${session}\n0\n3600\n/`;
    assert.equal((await check(await signText(k2, early), 10, { room }))?.issuedAt, 0);
  });

  const bad = {
    "4 lines": `shop\n${session}\n1800000000\n1800000060`,
    "6 lines": `shop\n${session}\n1800000000\n1800000060\n/\n/`,
    "a trailing newline": `${good}\n`,
    "a leading newline": `\n${good}`,
    "CRLF lines": good.replaceAll("\n", "\r\n"),
    "an empty room": `\n${session}\n1800000000\n1800000060\n/`,
    "a room with a space": `sh op\n${session}\n1800000000\n1800000060\n/`,
    "a room of 65 characters": `${"r".repeat(65)}\n${session}\n1800000000\n1800000060\n/`,
    "a room after a BOM": `\ufeff${good}`,
    "an uppercase session": `shop\n${"AB".repeat(16)}\n1800000000\n1800000060\n/`,
    "a session of 31 digits": `shop\n${session.slice(1)}\n1800000000\n1800000060\n/`,
    "a session of 33 digits": `shop\n${session}a\n1800000000\n1800000060\n/`,
    "a session not hex": `shop\n${"zz".repeat(16)}\n1800000000\n1800000060\n/`,
    "a leading zero in issued at": `shop\n${session}\n01800000000\n1800000060\n/`,
    "a leading zero in expires at": `shop\n${session}\n1800000000\n01800000060\n/`,
    "00": `shop\n${session}\n00\n1800000060\n/`,
    "a sign": `shop\n${session}\n+1800000000\n1800000060\n/`,
    "a decimal point": `shop\n${session}\n1800000000.0\n1800000060\n/`,
    "an exponent": `shop\n${session}\n1.8e9\n1800000060\n/`,
    "13 digits": `shop\n${session}\n1800000000\n1000000000000\n/`,
    "an empty time": `shop\n${session}\n\n1800000060\n/`,
    // Both times within the skew of NOW, so only their order can refuse them.
    "expires at = issued at": `shop\n${session}\n1800000030\n1800000030\n/`,
    "expires at < issued at": `shop\n${session}\n1800000031\n1800000030\n/`,
    "a scope without /": `shop\n${session}\n1800000000\n1800000060\nshop`,
    "a scope with a double space": `shop\n${session}\n1800000000\n1800000060\n/a  /b`,
    "a scope with a leading space": `shop\n${session}\n1800000000\n1800000060\n /a`,
    "a scope with a trailing space": `shop\n${session}\n1800000000\n1800000060\n/a `,
    "an empty scope": `shop\n${session}\n1800000000\n1800000060\n`,
    "a prefix without /": `shop\n${session}\n1800000000\n1800000060\n/a b`,
    "a tab in the scope": `shop\n${session}\n1800000000\n1800000060\n/a\t/b`,
    "a NUL in the scope": `shop\n${session}\n1800000000\n1800000060\n/a\0`,
    "a DEL in the scope": `shop\n${session}\n1800000000\n1800000060\n/a\x7f`,
    "a C1 control in the scope": `shop\n${session}\n1800000000\n1800000060\n/a\u0085`,
  };
  for (const [what, text] of Object.entries(bad)) {
    test(what, async () => {
      const t = await signText(k2, text);
      // Asked for the room the text names: only the claims' form can refuse them.
      const room = text instanceof Uint8Array ? "shop" : text.split("\n")[0];
      assert.equal(await check(t, NOW, { room }), null, JSON.stringify(text));
    });
  }

  test("claims in base64url no encoder writes, properly signed", async () => {
    const part = base64url(new TextEncoder().encode(good));
    assert.notEqual(await check(await signParts(k2, "k2", part), NOW), null);
    // A whole number of 3-byte groups, then one character more: a length no byte string
    // encodes to, read by a lenient decoder as the same bytes.
    const whole = good + "a".repeat((3 - (good.length % 3)) % 3);
    const wholePart = base64url(new TextEncoder().encode(whole));
    assert.equal(wholePart.length % 4, 0);
    assert.notEqual(await check(await signParts(k2, "k2", wholePart), NOW), null);
    const extra = await signParts(k2, "k2", `${wholePart}A`);
    // Unused bits set in the last character.
    assert.notEqual(part.length % 4, 0, "the claims leave unused bits");
    const last = B64URL.indexOf(part.at(-1));
    const spelled = await signParts(k2, "k2", `${part.slice(0, -1)}${B64URL[last | 1]}`);
    for (const t of [extra, spelled, await signParts(k2, "k2", `${part}=`)]) {
      assert.equal(await check(t, NOW), null, t);
    }
  });

  test("a kid the format does not allow, even with a key of that kid in the set", async () => {
    const part = base64url(new TextEncoder().encode(good));
    const long = "k".repeat(32);
    const fits = await newKey(long);
    assert.notEqual(await check(await sign(fits, CLAIMS), NOW, { room: "shop" }, { keys: [fits.jwk] }), null);
    for (const kid of ["", "k".repeat(33), "k 2", "k+2", "k/2", "k=", "kü", "k\n2", "k%32"]) {
      const key = await newKey(kid);
      const t = await signParts(key, kid, part);
      assert.equal(await check(t, NOW, { room: "shop" }, { keys: [key.jwk] }), null, JSON.stringify(kid));
    }
  });

  test("text that is not UTF-8", async () => {
    const ok = new TextEncoder().encode(good);
    for (const bytes of [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xc0, 0xaf]]) {
      const text = new Uint8Array([...ok, ...bytes]); // in the scope's prefix
      assert.equal(await check(await signText(k2, text), NOW), null, String(bytes));
    }
  });
});

describe("the key cache", () => {
  test("many keys in turn, each still verifies its own tokens and no other's", async () => {
    const keys = [];
    for (let i = 0; i < 40; i++) keys.push(await newKey(`r${i}`));
    const tokens = await Promise.all(keys.map((k) => sign(k, CLAIMS)));
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < keys.length; i++) {
        const own = { keys: [keys[i].jwk] };
        assert.notEqual(await check(tokens[i], NOW, { room: "shop" }, own), null, `r${i}`);
        // Another key under this kid: its cached import must not answer for it.
        const impostor = { keys: [{ ...keys[(i + 1) % keys.length].jwk, kid: `r${i}` }] };
        assert.equal(await check(tokens[i], NOW, { room: "shop" }, impostor), null, `r${i} impostor`);
      }
    }
  });
});

describe("covers", () => {
  const claims = { ...CLAIMS, scope: ["/shop", "/checkout/"] };
  for (const [path, covered] of [
    ["/shop", true],
    ["/shop/", true],
    ["/shop/cart", true],
    ["/shop/cart/item?x", true],
    ["/shopping", false],
    ["/shop.html", false],
    ["/sho", false],
    ["/Shop", false],
    ["/checkout/", true],
    ["/checkout/pay", true],
    ["/checkout", false],
    ["/checkoutx", false],
    ["/", false],
    ["", false],
    ["/other/shop", false],
  ]) {
    test(`${JSON.stringify(path)}: ${covered}`, () => {
      assert.equal(covers(claims, path), covered);
    });
  }

  test("/ covers every path", () => {
    const all = { ...CLAIMS, scope: ["/"] };
    for (const path of ["/", "/a", "/a/b/c", "//x"]) assert.equal(covers(all, path), true, path);
    assert.equal(covers(all, ""), false);
    assert.equal(covers(all, "a"), false);
  });

  test("a path with a dot segment, plain or encoded, is covered by no scope", () => {
    const all = { ...CLAIMS, scope: ["/", "/shop", "/static/"] };
    // The gateway's guard refuses the same (gateway/src/guard.rs).
    for (const path of [
      "/shop/../checkout",
      "/shop/..",
      "/./checkout",
      "/shop/%2e%2e/checkout",
      "/shop/%2E./checkout",
      "/shop/..%2fcheckout",
      "/shop/..%2Fcheckout",
      "/shop/..%5Ccheckout",
      "/shop/..\\checkout",
      "/shop/..;/checkout",
      "/shop/.;x/checkout",
      "/static%2f..%2fcheckout",
      "/shop/x/%2e%2e%2f%2e%2e%2fcheckout",
      "/..",
      "/.",
      "/shop/..%20/checkout",
      "/shop/..%09/checkout",
      "/shop/..%00/checkout",
    ]) {
      assert.equal(covers(all, path), false, path);
    }
    for (const path of [
      "/shop/app.js",
      "/.well-known/security.txt",
      "/shop/a..b/c",
      "/shop/...",
      "/shop/x/.../y",
      "/shop/file.",
      "/shop/%2e%2e%2e",
      "/shop/..x",
      "/shop/..%20x/y",
    ]) {
      assert.equal(covers(all, path), true, path);
    }
  });

  test("anything but claims and a path is not covered, never a throw", () => {
    for (const c of [undefined, null, {}, { scope: "/" }, { scope: [1, null, "", "shop"] }]) {
      assert.equal(covers(c, "/shop"), false, JSON.stringify(c));
    }
    for (const path of [undefined, null, 1, ["/shop"], { toString: () => "/shop" }]) {
      assert.equal(covers(claims, path), false, String(path));
    }
  });

  test("the claims verify() answers", async () => {
    const claims = await check(token);
    assert.equal(covers(claims, "/shop/cart"), true);
    assert.equal(covers(claims, "/account"), false);
    assert.equal(covers(null, "/shop"), false, "a null verdict covers nothing");
  });
});
