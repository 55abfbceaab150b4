#!/usr/bin/env python3
"""hub.py MODEL PORTFILE LOGFILE: a loopback stand-in for the Hugging Face hub that
`tessera pull` talks to (tests/pull/pull.sh). It answers the file list
(/api/models/OWNER/NAME/tree/main), resolve URLs (a 302 to /cdn/FILE, as the hub
redirects to its CDN) and byte ranges, and misbehaves on purpose: the first whole-file
request for tiny.Q4_K_M.gguf is cut off halfway, bad.Q4_K_M.gguf is listed with a wrong
sha256, endless.Q4_K_M.gguf never ends (up to 16 MiB), drip.Q4_K_M.gguf comes at 2 KB/s,
page.Q4_K_M.gguf is an HTML page listed without a checksum, and test/esc-GGUF names files
with an ESC and a newline. Every file request's Range header goes to LOGFILE. Standard
library only."""
import hashlib
import http.server
import json
import sys
import threading
import time

model = open(sys.argv[1], "rb").read()
files = {
    "tiny.Q4_K_M.gguf": model,
    "tiny.Q8_0.gguf": model[:4096] + bytes(range(256)) * 64,
    "bad.Q4_K_M.gguf": b"GGUF" + bytes(5000),
    "big-Q4_K_M-00001-of-00002.gguf": b"GGUF",
    "page.Q4_K_M.gguf": b"<html><body>Sign in to continue</body></html>\n" * 20,
}
# Listed without a checksum; served by endless() and drip() rather than from files.
endless_size = 5000
drip_size = 400000
unlisted_sum = {"page.Q4_K_M.gguf"}
repos = {
    "test/tiny-GGUF": ["README.md", "tiny.Q4_K_M.gguf", "tiny.Q8_0.gguf"],
    "test/badsum-GGUF": ["bad.Q4_K_M.gguf"],
    "test/split-GGUF": ["big-Q4_K_M-00001-of-00002.gguf"],
    "test/endless-GGUF": ["endless.Q4_K_M.gguf"],
    "test/drip-GGUF": ["drip.Q4_K_M.gguf"],
    "test/page-GGUF": ["page.Q4_K_M.gguf"],
    "test/esc-GGUF": ["x\x1b[31m.Q4_K_M.gguf", "y\n.Q8_0.gguf"],
}
lock = threading.Lock()
cut_once = {"tiny.Q4_K_M.gguf"}
log = open(sys.argv[3], "a")


def entry(name):
    if name == "endless.Q4_K_M.gguf":
        return {"type": "file", "path": name, "size": endless_size}
    if name == "drip.Q4_K_M.gguf":
        return {"type": "file", "path": name, "size": drip_size}
    if name in unlisted_sum:
        return {"type": "file", "path": name, "size": len(files[name])}
    if name not in files:
        return {"type": "file", "path": name, "size": 10, "oid": "0" * 40}
    data = files[name]
    digest = hashlib.sha256(data).hexdigest()
    if name.startswith("bad."):
        digest = "0" * 64
    return {"type": "file", "path": name, "size": len(data), "oid": "1" * 40,
            "lfs": {"oid": digest, "size": len(data), "pointerSize": 134}}


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = self.path.split("/")
        if self.path.startswith("/api/models/") and self.path.endswith("/tree/main"):
            repo = "/".join(parts[3:5])
            if repo not in repos:
                return self.send(404, b'{"error":"Repository not found"}')
            body = json.dumps([entry(n) for n in repos[repo]]).encode()
            return self.send(200, body, [("Content-Type", "application/json")])
        if len(parts) >= 6 and parts[3:5] == ["resolve", "main"]:
            return self.send(302, b"", [("Location", "/cdn/" + "/".join(parts[5:]))])
        if parts[1] == "cdn" and parts[2] == "endless.Q4_K_M.gguf":
            return self.endless()
        if parts[1] == "cdn" and parts[2] == "drip.Q4_K_M.gguf":
            return self.drip()
        if parts[1] == "cdn" and parts[2] in files:
            return self.serve_file(parts[2])
        self.send(404, b"not found")

    def endless(self):
        """A body without Content-Length that goes on until the client hangs up (16 MiB at
        most, so that a client without a bound still finishes)."""
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = b"GGUF" + bytes(65532)
        try:
            for _ in range(256):
                self.wfile.write(chunk)
        except OSError:
            pass

    def drip(self):
        """The listed length announced, then 2 KB a second (for 200 s at most)."""
        self.send_response(200)
        self.send_header("Content-Length", str(drip_size))
        self.end_headers()
        self.close_connection = True
        try:
            self.wfile.write(b"GGUF")
            for _ in range(200):
                time.sleep(1)
                self.wfile.write(bytes(2048))
                self.wfile.flush()
        except OSError:
            pass

    def serve_file(self, name):
        data = files[name]
        rng = self.headers.get("Range")
        with lock:
            log.write("%s %s\n" % (name, rng or "whole"))
            log.flush()
            cut = rng is None and name in cut_once
            cut_once.discard(name)
        start = 0
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                return self.send(416, b"", [("Content-Range", "bytes */%d" % len(data))])
        body = data[start:]
        self.send_response(206 if rng else 200)
        if rng:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if cut:  # a dropped connection: half the promised bytes, then the socket closes
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
with open(sys.argv[2], "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
