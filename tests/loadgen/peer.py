#!/usr/bin/env python3
"""peer.py: a loopback stand-in for an OpenAI-compatible server whose streams each break the
format in one named way, for `tessera loadgen --stream` (tests/loadgen/deviations.py).

The first path segment picks the mode: POST /MODE/v1/completions (or .../chat/completions)
answers with 4 content deltas 20 ms apart, a finish_reason chunk, a usage chunk and
[DONE], over HTTP/1.1 chunked encoding with every event cut into pieces sent apart, as a
real server's writes arrive, except where MODE changes that. Run alone:
peer.py PORTFILE (writes the port it listens on, serves until killed).
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTENT = [b"Once", b" upon", b" a", b" time"]


def json_bytes(b):
    """b as the inside of a JSON string, bytes >= 0x80 written raw (valid or not)."""
    out = bytearray()
    for x in b:
        if x in (0x22, 0x5C):
            out += b"\\" + bytes([x])
        elif x < 0x20:
            out += b"\\u%04x" % x
        else:
            out.append(x)
    return bytes(out)


def chunk(mode, chat, text=None, finish=None, usage=None, choices=True, extra=None):
    """One chunk as JSON bytes; text is bytes (may be invalid UTF-8, written raw)."""
    marker = "@@TEXT@@"
    c = {"id": "cmpl-1", "object": "chat.completion.chunk" if chat else "text_completion",
         "created": 1700000000, "model": "fake"}
    if choices:
        ch = {"index": 0, "logprobs": None, "finish_reason": finish}
        if chat:
            ch["delta"] = {"content": marker} if text is not None else {}
        else:
            ch["text"] = marker if text is not None else ""
        c["choices"] = [ch]
    else:
        c["choices"] = []
    if usage:
        c["usage"] = usage
    if extra:
        c.update(extra)
    if mode == "missing_fields":
        del c["id"]
    return json.dumps(c, separators=(",", ":")).encode().replace(marker.encode(), json_bytes(text or b""))


def deltas(mode):
    """The content deltas of a mode, as raw bytes."""
    if mode == "invalid_utf8":
        return [b"Once", b" up\xffon", b" a", b" time"]
    if mode == "split_utf8":  # "caf\xc3\xa9" split inside the character
        return [b"Once", b" caf\xc3", b"\xa9 a", b" time"]
    if mode == "replacement":
        return [b"Once", b" \xef\xbf\xbd", b" a", b" time"]
    return list(CONTENT)


def events(mode, chat):
    """The stream's events, each the bytes of one whole SSE event."""
    nl = b"\r\n" if mode == "crlf" else b"\n"

    def ev(data):
        if mode == "crlf" and data.startswith(b"{") and b',"created"' in data:
            a, b = data.split(b',"created"', 1)  # one JSON object over two data lines
            return b"data: " + a + b"," + nl + b"data:\"created\"" + b + nl + nl
        return b"data: " + data + nl + nl

    out = []
    extra = {"timings": {"predicted_n": 4}} if mode == "extra_fields" else None
    for i, d in enumerate(deltas(mode)):
        if mode == "sse_field":
            out.append(b"event: message" + nl + b"id: %d" % i + nl + ev(chunk(mode, chat, d)))
            continue
        out.append(ev(chunk(mode, chat, d, extra=extra)))
        if mode == "crlf":
            out.append(b": keep-alive" + nl + nl)
        if mode == "invalid_json" and i == 1:
            out.append(ev(b"{\"choices\": [ truncated"))
        if mode == "error_event" and i == 1:
            out.append(ev(b'{"error":{"code":500,"message":"boom \xff in the middle",'
                          b'"type":"server_error"}}'))
            return out
    if mode == "truncated":
        return out
    if mode != "missing_finish":
        out.append(ev(chunk(mode, chat, b"", finish="length")))
    if mode != "missing_usage":
        out.append(ev(chunk(mode, chat, choices=False,
                            usage={"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9})))
    if mode != "missing_done":
        done = b"data: [DONE]" + nl
        out.append(done if mode == "unterminated" else done + nl)
    if mode == "after_done":
        out.append(ev(chunk(mode, chat, choices=False)))
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send_piece(self, b):
        self.wfile.write(b"%x\r\n" % len(b) + b + b"\r\n")
        self.wfile.flush()

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        parts = self.path.strip("/").split("/")
        mode = parts[0] if len(parts) > 2 else "ok"
        chat = self.path.endswith("/chat/completions")
        if not body.get("stream"):
            self.send_error(400, "stream only")
            return
        self.send_response(200)
        ctype = "application/json" if mode == "content_type" else "text/event-stream"
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        if mode == "crlf":
            self.send_piece(b"\xef\xbb")  # a BOM, itself split
            self.send_piece(b"\xbf")
        for k, e in enumerate(events(mode, chat)):
            time.sleep(0.02 if e.startswith(b"data: {") or e.startswith(b"event") else 0)
            # three pieces: cut inside "data:", inside the JSON, and before the blank line
            cuts = sorted({min(3, len(e)), len(e) // 2, max(len(e) - 1, 0)})
            prev = 0
            for c in cuts + [len(e)]:
                if c > prev:
                    self.send_piece(e[prev:c])
                    time.sleep(0.001)
                prev = max(prev, c)
        self.wfile.write(b"0\r\n\r\n")  # "truncated" too: a clean end, no [DONE]
        self.wfile.flush()
        self.close_connection = True


def serve(port_file):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    with open(port_file, "w") as f:
        f.write(str(srv.server_address[1]))
    srv.serve_forever()
    return srv


if __name__ == "__main__":
    serve(sys.argv[1])
