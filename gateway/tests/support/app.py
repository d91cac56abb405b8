"""The app behind the gateway in its tests: Python's http.server, not Rust.

    python3 app.py PORT

Routes:
  GET  /, /shop/..., /api/...   a small HTML page naming the path
  ANY  /echo                    JSON: method, path, headers, body length (what reached the app)
  GET  /seen                    JSON: every request line the app received so far
  GET  /slow?s=N                answers after N seconds
  ANY  /stall?s=N               answers after N seconds without reading the request's body
  GET  /ws                      a WebSocket echo (RFC 6455, text and binary, unmasked replies)
  GET  /garbage                 writes bytes that are not HTTP, then closes
  POST /mirror                  the request body sent back as it arrived (Content-Length or
                                chunked; PUT, PATCH, GET too); X-Body-Framing says which,
                                X-Got-Content-Length the Content-Length received ("none");
                                records "MIRRORED N" in /seen once the whole body was read
  GET  /big?n=N                 N bytes (byte i is i % 251), chunked, no Content-Length
  GET  /drip?s=S                chunked: "first\n", then S seconds later "second\n"
  GET  /hop                     a page with hop-by-hop headers (Connection: X-App-Hop, ...)
  GET  /gz                      a gzip-compressed page, Content-Encoding: gzip (the app's own)
  GET  /close                   closes the connection without answering
  GET  /tunnel                  a lenient app: switches to any protocol an Upgrade header asks
                                for (101, then echoes bytes), or with ?always=1 unasked;
                                else "no upgrade asked"
Prints "ready PORT" on stdout once listening.
"""

import base64
import hashlib
import json
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

SEEN = []
SEEN_LOCK = threading.Lock()
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self):
        with SEEN_LOCK:
            SEEN.append(self.command + " " + self.path)

    def send(self, status, body, ctype="text/html; charset=utf-8", extra=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def handle_any(self):
        self.record()
        url = urlsplit(self.path)
        if url.path == "/stall":
            # Reads nothing of the body: an app stuck before it.
            time.sleep(float(parse_qs(url.query).get("s", ["5"])[0]))
            self.close_connection = True
            return self.send(200, "<p>stalled</p>")
        if url.path == "/echo":
            body = self.read_body()
            info = {
                "method": self.command,
                "path": self.path,
                "headers": [[k.lower(), v] for k, v in self.headers.items()],
                "body_bytes": len(body),
            }
            return self.send(200, json.dumps(info), "application/json")
        self.read_body()
        if url.path == "/seen":
            with SEEN_LOCK:
                return self.send(200, json.dumps(SEEN), "application/json")
        if url.path == "/slow":
            time.sleep(float(parse_qs(url.query).get("s", ["5"])[0]))
            return self.send(200, "<p>slow page</p>")
        if url.path == "/ws":
            return self.websocket()
        if url.path == "/peer":
            # The connection the request came on: its client-side port.
            return self.send(200, str(self.client_address[1]), "text/plain")
        if url.path == "/garbage":
            self.wfile.write(b"\x00\x01 this is not HTTP at all\r\n\r\n")
            self.wfile.flush()
            self.close_connection = True
            return None
        extra = EXTRA_ROUTES.get(url.path)
        if extra is not None:
            return extra(self, url)
        return self.send(200, "<!doctype html><title>app</title><h1>app page %s</h1>" % url.path)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any

    def websocket(self):
        key = self.headers.get("Sec-WebSocket-Key")
        if not key or self.headers.get("Upgrade", "").lower() != "websocket":
            return self.send(400, "not a websocket handshake")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        sock = self.connection
        while True:
            head = recv_exact(sock, 2)
            if not head:
                break
            opcode = head[0] & 0x0F
            masked = head[1] & 0x80
            n = head[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", recv_exact(sock, 2))[0]
            elif n == 127:
                n = struct.unpack(">Q", recv_exact(sock, 8))[0]
            mask = recv_exact(sock, 4) if masked else b"\0\0\0\0"
            payload = bytearray(recv_exact(sock, n))
            for i in range(n):
                payload[i] ^= mask[i % 4]
            if opcode == 8:
                sock.sendall(b"\x88\x00")
                break
            if opcode in (1, 2):
                frame = bytes([0x80 | opcode])
                if n < 126:
                    frame += bytes([n])
                elif n < 65536:
                    frame += bytes([126]) + struct.pack(">H", n)
                else:
                    frame += bytes([127]) + struct.pack(">Q", n)
                sock.sendall(frame + bytes(payload))
        self.close_connection = True


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


# Routes added for the gateway's proxying, failures and hostile tests. `handle_any` has already
# recorded the request line and read a Content-Length body (so /mirror is dispatched before
# that: see `mirror_first`).


def read_chunked(rfile):
    """A chunked body, strictly: a connection closed before the last chunk is an error (a body
    cut short must never look whole)."""
    data = b""
    while True:
        line = rfile.readline()
        if not line.endswith(b"\n"):
            raise ConnectionError("closed inside a chunked body")
        size = int(line.split(b";")[0].strip(), 16)
        if size == 0:
            while True:
                trailer = rfile.readline()
                if not trailer.endswith(b"\n"):
                    raise ConnectionError("closed inside a chunked body's trailers")
                if trailer in (b"\r\n", b"\n"):
                    return data
        chunk = rfile.read(size)
        if len(chunk) != size or rfile.readline() not in (b"\r\n", b"\n"):
            raise ConnectionError("closed inside a chunk")
        data += chunk


def send_chunked_head(handler, status, ctype, extra=()):
    handler.send_response(status)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Transfer-Encoding", "chunked")
    for k, v in extra:
        handler.send_header(k, v)
    handler.end_headers()


def write_chunk(handler, data):
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    handler.wfile.flush()


def route_big(handler, url):
    n = int(parse_qs(url.query).get("n", ["1000000"])[0])
    pattern = bytes(i % 251 for i in range(251 * 263))
    send_chunked_head(handler, 200, "application/octet-stream")
    sent = 0
    while sent < n:
        piece = min(n - sent, 65536)
        start = sent % 251
        write_chunk(handler, pattern[start : start + piece])
        sent += piece
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


def route_drip(handler, url):
    s = float(parse_qs(url.query).get("s", ["1"])[0])
    send_chunked_head(handler, 200, "text/plain")
    write_chunk(handler, b"first\n")
    time.sleep(s)
    write_chunk(handler, b"second\n")
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


def route_hop(handler, url):
    handler.send(
        200,
        "<p>hop</p>",
        extra=(
            ("Connection", "X-App-Hop"),
            ("X-App-Hop", "1"),
            ("Keep-Alive", "timeout=5"),
            ("Proxy-Authenticate", 'Basic realm="app"'),
            ("Proxy-Connection", "keep-alive"),
            ("Upgrade", "h2c"),
            ("X-App-End", "kept"),
        ),
    )


def route_gz(handler, url):
    import gzip

    body = gzip.compress(b"<p>the app compressed this itself</p>\n" * 200, mtime=0)
    handler.send(200, body, extra=(("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")))


def route_close(handler, url):
    handler.close_connection = True


def route_tunnel(handler, url):
    asked = handler.headers.get("Upgrade")
    if not asked and "always=1" not in (url.query or ""):
        return handler.send(200, "no upgrade asked", "text/plain")
    handler.send_response(101)
    handler.send_header("Upgrade", asked or "h2c")
    handler.send_header("Connection", "Upgrade")
    handler.end_headers()
    handler.wfile.flush()
    sock = handler.connection
    while True:
        data = sock.recv(4096)
        if not data:
            break
        sock.sendall(b"TUNNEL:" + data)
    handler.close_connection = True


EXTRA_ROUTES = {
    "/big": route_big,
    "/drip": route_drip,
    "/hop": route_hop,
    "/gz": route_gz,
    "/close": route_close,
    "/tunnel": route_tunnel,
}


def mirror_first(original):
    def handle(self):
        if urlsplit(self.path).path != "/mirror":
            return original(self)
        self.record()
        framing = "none"
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            framing, body = "chunked", read_chunked(self.rfile)
        elif self.headers.get("Content-Length") is not None:
            framing, body = "length", self.read_body()
        else:
            body = b""
        with SEEN_LOCK:
            SEEN.append("MIRRORED %d" % len(body))
        return self.send(
            200,
            body,
            self.headers.get("Content-Type", "application/octet-stream"),
            extra=(
                ("X-Body-Framing", framing),
                ("X-Body-Bytes", str(len(body))),
                ("X-Got-Content-Length", self.headers.get("Content-Length") or "none"),
            ),
        )

    return handle


Handler.do_GET = Handler.do_POST = Handler.do_PUT = Handler.do_PATCH = mirror_first(
    Handler.handle_any
)
Handler.do_DELETE = Handler.do_OPTIONS = mirror_first(Handler.handle_any)


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("ready %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
