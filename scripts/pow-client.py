#!/usr/bin/env python3
"""An API client that solves the waiting room's proof-of-work challenge: standard library only.

    python3 scripts/pow-client.py http://127.0.0.1:3000/

It uses the header protocol (no cookie jar) described in docs/api.md:

1. GET the page: 302 and a `waiting-room-session` header (the signed queue value).
2. GET it again with that header: 403 and JSON {"state": "challenge", "challenge", "difficulty",
   "proof_path"}.
3. Find the smallest nonce with SHA-256("<challenge>:<nonce>") starting with `difficulty` zero
   bits, and POST "<challenge>:<nonce>" in the `waiting-room-proof` header to `proof_path`:
   200 {"state": "proven"} and a new `waiting-room-session` value, marked proven.
4. GET the page with the proven value: admitted (200), or in line (429 with a position).

Prints each step; exits 0 when the client ends up admitted or in line, 1 otherwise. CI runs it
against the demo (.ci/run).
"""

import hashlib
import http.client
import json
import sys
import time
import urllib.parse

SESSION = "waiting-room-session"
PROOF = "waiting-room-proof"


def leading_zero_bits(digest: bytes) -> int:
    bits = 0
    for byte in digest:
        if byte == 0:
            bits += 8
            continue
        return bits + 8 - byte.bit_length()
    return bits


def solve(challenge: str, difficulty: int) -> int:
    nonce = 0
    while True:
        digest = hashlib.sha256(f"{challenge}:{nonce}".encode()).digest()
        if leading_zero_bits(digest) >= difficulty:
            return nonce
        nonce += 1


def request(conn, method, path, headers):
    conn.request(method, path, headers=headers)
    res = conn.getresponse()
    body = res.read()
    return res.status, res.headers, body


def main() -> int:
    url = urllib.parse.urlsplit(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:3000/")
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=10)
    path = url.path or "/"
    accept = {"Accept": "application/json"}

    status, headers, _ = request(conn, "GET", path, accept)
    session = headers.get(SESSION)
    print(f"1. first visit: {status}, session value {'present' if session else 'MISSING'}")
    if status != 302 or not session:
        return 1

    status, headers, body = request(conn, "GET", path, {**accept, SESSION: session})
    answer = json.loads(body)
    print(f"2. with the session: {status} {answer.get('state')}, difficulty {answer.get('difficulty')}")
    if status != 403 or answer.get("state") != "challenge":
        return 1

    started = time.monotonic()
    nonce = solve(answer["challenge"], answer["difficulty"])
    spent = time.monotonic() - started
    print(f"3. solved: nonce {nonce} ({nonce + 1} hashes in {spent:.2f} s)")
    proof = f"{answer['challenge']}:{nonce}"
    status, headers, body = request(
        conn, "POST", answer["proof_path"], {**accept, SESSION: session, PROOF: proof}
    )
    proven = headers.get(SESSION)
    print(f"   proof: {status} {json.loads(body).get('state')}")
    if status != 200 or not proven or not proven.startswith("p1."):
        return 1

    # The same solution again is refused: it is single-use.
    status, _, body = request(
        conn, "POST", answer["proof_path"], {**accept, SESSION: session, PROOF: proof}
    )
    print(f"   replayed: {status} {json.loads(body).get('state')}")
    if status != 403:
        return 1

    status, headers, body = request(conn, "GET", path, {**accept, SESSION: proven})
    print(f"4. with the proven session: {status}")
    if status == 200:
        return 0
    if status == 429 and json.loads(body).get("state") == "waiting":
        print(f"   in line: {body.decode()}")
        return 0
    print(body.decode())
    return 1


if __name__ == "__main__":
    sys.exit(main())
