// Checks edge/verify.mjs against a fixture of tokens whose verdicts are known, such as the one
// the crate's tests/operations/edge_node.rs writes from tokens the crate signs:
//
//   node edge/test/tools/check-tokens.mjs <fixture.json>
//
//   {"keys": <JWKS>, "now": <Unix seconds>, "room": "<room>",
//    "valid": [{"token": "...", "claims": {...as verify() answers them...}}, ...],
//    "invalid": ["token", ...]}
//
// Each token is verified with options.room = room: a valid one must answer exactly its claims,
// an invalid one null. One line per token that is not as expected, then a summary. Exit 0 when
// all are as expected, 1 otherwise, 2 when the fixture cannot be read.
//
//   node edge/test/tools/check-tokens.mjs --bench <N> [fixture.json]
//
// The cost of verify() per token, in µs, beside an HMAC-SHA256 verify (Web Crypto, a 32-byte
// key) of a message as long as the token, measured in the same run in interleaved rounds; the
// token is the fixture's first valid one, or one signed here.
//
// Without arguments (as Node's test runner runs every .mjs under test/): the same check on a
// fixture of tokens signed here.

import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";

import { verify } from "../../verify.mjs";
import { newKey, sign, signText } from "./sign.mjs";

/** The tokens of `fixture` that verify() does not judge as it says, one line each. */
async function disagreements(fixture) {
  const { keys, now, room } = fixture;
  const lines = [];
  for (const [i, { token, claims }] of fixture.valid.entries()) {
    const got = await verify(token, keys, now, { room });
    if (!isDeepStrictEqual(got, claims)) {
      const [was, want] = [JSON.stringify(got), JSON.stringify(claims)];
      lines.push(`valid #${i}: got ${was}, want ${want}: ${show(token)}`);
    }
  }
  for (const [i, token] of fixture.invalid.entries()) {
    const got = await verify(token, keys, now, { room });
    if (got !== null) {
      lines.push(`invalid #${i}: got ${JSON.stringify(got)}, want null: ${show(token)}`);
    }
  }
  return lines;
}

// A token as a line shows it: JSON-quoted, a long one cut.
function show(token) {
  if (token.length <= 120) return JSON.stringify(token);
  return `${JSON.stringify(token.slice(0, 120))}... (${token.length} chars)`;
}

// What a fixture must hold; a message saying what is wrong, or null.
function fixtureProblem(f) {
  if (f === null || typeof f !== "object") return "not a JSON object";
  if (f.keys === null || typeof f.keys !== "object") return '"keys" is not a JWKS object';
  if (typeof f.now !== "number" || !Number.isFinite(f.now)) return '"now" is not a number';
  if (typeof f.room !== "string") return '"room" is not a string';
  if (!Array.isArray(f.valid)) return '"valid" is not an array';
  if (!Array.isArray(f.invalid)) return '"invalid" is not an array';
  for (const [i, v] of f.valid.entries()) {
    if (typeof v?.token !== "string" || v.claims === null || typeof v.claims !== "object") {
      return `valid #${i} is not {"token": "...", "claims": {...}}`;
    }
  }
  for (const [i, t] of f.invalid.entries()) {
    if (typeof t !== "string") return `invalid #${i} is not a string`;
  }
  return null;
}

// A fixture of tokens signed here: a few valid ones, and changes of them that are not.
async function localFixture() {
  const now = 1_800_000_030;
  const k1 = await newKey("k1");
  const k2 = await newKey("k2");
  const stranger = await newKey("k2");
  const claims = (n) => ({
    room: "shop",
    session: n.toString(16).padStart(32, "0"),
    issuedAt: now - 30 - n,
    expiresAt: now + 30 + n,
    scope: n % 2 ? ["/"] : ["/shop", "/checkout/"],
  });
  const valid = [];
  const invalid = ["", ".", "wr1...", "wr1.k2..", "A".repeat(5000)];
  for (let n = 0; n < 8; n++) {
    const key = n % 2 ? k1 : k2;
    const token = await sign(key, claims(n));
    valid.push({ token, claims: { version: 1, kid: key.kid, ...claims(n) } });
    const [f, kid, body, sig] = token.split(".");
    invalid.push(
      token.slice(0, -1),
      `${f}.${kid}.${body}.${sig.slice(0, 20)}${sig[20] === "A" ? "B" : "A"}${sig.slice(21)}`,
      `${f}.${kid}.${sig}`,
      `${token}=`,
      await sign(stranger, claims(n)),
      await sign(key, { ...claims(n), room: "other" }),
      await sign(key, { ...claims(n), expiresAt: now - 10 }),
      await signText(key, `shop\n${claims(n).session}\n1\n2\n/\n`),
    );
  }
  return { keys: { keys: [k1.jwk, k2.jwk] }, now, room: "shop", valid, invalid };
}

// µs per verify() of `token`, and per HMAC-SHA256 verify of a message of the token's length,
// in interleaved rounds so both see the same machine.
async function bench(n, fixture) {
  const f = fixture ?? (await localFixture());
  const { token, claims } = f.valid[0] ?? {};
  if (token === undefined) throw new Error("the fixture has no valid token to measure");
  if (!isDeepStrictEqual(await verify(token, f.keys, f.now, { room: f.room }), claims)) {
    throw new Error("the token does not verify as the fixture says");
  }
  const hmacKey = await crypto.subtle.importKey(
    "raw",
    crypto.getRandomValues(new Uint8Array(32)),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign", "verify"],
  );
  const message = new TextEncoder().encode(token);
  const mac = await crypto.subtle.sign("HMAC", hmacKey, message);
  const rounds = 20;
  const perRound = Math.max(1, Math.ceil(n / rounds));
  let edgeNs = 0;
  let hmacNs = 0;
  for (let r = -1; r < rounds; r++) {
    // Round -1 warms both up and is not counted.
    let t = process.hrtime.bigint();
    for (let i = 0; i < perRound; i++) {
      const claims = await verify(token, f.keys, f.now, { room: f.room });
      if (claims === null) throw new Error("refused");
    }
    const edge = process.hrtime.bigint() - t;
    t = process.hrtime.bigint();
    for (let i = 0; i < perRound; i++) {
      if (!(await crypto.subtle.verify("HMAC", hmacKey, mac, message))) throw new Error("refused");
    }
    const hmac = process.hrtime.bigint() - t;
    if (r >= 0) {
      edgeNs += Number(edge);
      hmacNs += Number(hmac);
    }
  }
  const count = rounds * perRound;
  const edgeUs = edgeNs / count / 1000;
  const hmacUs = hmacNs / count / 1000;
  console.log(
    `${count} tokens of ${token.length} chars, ${rounds} interleaved rounds: ` +
      `verify ${edgeUs.toFixed(1)} µs, HMAC-SHA256 verify ${hmacUs.toFixed(1)} µs, ` +
      `ratio ${(edgeUs / hmacUs).toFixed(1)}x (node ${process.version})`,
  );
}

async function main(args) {
  if (args[0] === "--bench") {
    const n = Number(args[1]);
    if (!Number.isInteger(n) || n < 1) return usage("--bench needs a count");
    const fixture = args[2] === undefined ? null : readFixture(args[2]);
    if (fixture === undefined) return 2;
    await bench(n, fixture);
    return 0;
  }
  if (args.length > 1) return usage("one fixture at a time");
  const fixture = args.length === 0 ? await localFixture() : readFixture(args[0]);
  if (fixture === undefined) return 2;
  const lines = await disagreements(fixture);
  for (const line of lines) console.log(line);
  const total = fixture.valid.length + fixture.invalid.length;
  const what = `${fixture.valid.length} valid, ${fixture.invalid.length} invalid tokens`;
  console.log(
    lines.length === 0
      ? `${what}${args.length === 0 ? " (signed here)" : ""}: all as expected`
      : `${what}: ${lines.length} of ${total} not as expected`,
  );
  return lines.length === 0 ? 0 : 1;
}

// The fixture at `path`, or undefined (having said why).
function readFixture(path) {
  let fixture;
  try {
    fixture = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    console.error(`bad fixture ${path}: ${e.message}`);
    return undefined;
  }
  const problem = fixtureProblem(fixture);
  if (problem !== null) {
    console.error(`bad fixture ${path}: ${problem}`);
    return undefined;
  }
  return fixture;
}

function usage(why) {
  console.error(`${why}\nusage: check-tokens.mjs [<fixture.json>] | --bench <N> [<fixture.json>]`);
  return 2;
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (e) {
  console.error(e?.stack ?? String(e));
  process.exitCode = 2;
}
