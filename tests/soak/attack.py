#!/usr/bin/env python3
# attack.py: the outside attacks of issue 17 against `tessera serve` on loopback, each a
# check that failed before its fix (docs/SECURITY.md lists the defences). Bounded: about
# 30 s in all. Run one section with --only NAME.
import argparse
import concurrent.futures
import json
import select
import socket
import threading
import time

import common

K = {"Authorization": "Bearer sk-normal"}
DRIBBLE = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"b" * 4000


def dribblers(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.setblocking(False)
        socks.append(s)
    return socks


def closed(s):
    """True once the server has closed s (end of input or reset)."""
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        return False
    try:
        return s.recv(4096) == b""
    except (ConnectionResetError, BlockingIOError):
        return True


def slowloris(args, checks):
    # 40 connections send one header byte every 0.25 s: more than the table holds (8 + 16).
    srv = common.Server(args.binary, args.model, ["--max-connections", "8", "--read-timeout", "2"])
    try:
        socks = dribblers(srv.port, 40)
        opened = time.time()
        closed_at = [None] * len(socks)
        health = []
        pos = 0
        while time.time() - opened < 5:
            for i, s in enumerate(socks):
                if closed_at[i] is None:
                    if closed(s):
                        closed_at[i] = time.time() - opened
                    else:
                        try:
                            s.send(DRIBBLE[pos:pos + 1])
                        except OSError:
                            closed_at[i] = time.time() - opened
            pos += 1
            if pos in (4, 12):
                t = time.time()
                st, _, _ = common.request(srv.port, "GET", "/health", timeout=3)
                health.append((st, time.time() - t))
            time.sleep(0.25)
        checks.check("/health answers while dribblers fill the table",
                     len(health) == 2 and all(st == 200 and dt < 2 for st, dt in health),
                     repr(health))
        late = [t for t in closed_at if t is None or t > 3.5]
        checks.check("dribbling connections closed by the 2 s read deadline (not per byte)",
                     not late, "%d of %d still open or late: %r" % (len(late), len(socks), closed_at))
        for s in socks:
            s.close()
        st, _, _ = common.request(srv.port, "GET", "/health", timeout=3)
        checks.check("the server answers after the attack", st == 200, "%d" % st)
    finally:
        srv.stop()

    # One address holding --max-per-address reading connections: a new one shuts the
    # oldest down at once (no 2 s wait).
    srv = common.Server(args.binary, args.model, ["--max-per-address", "3"])
    try:
        socks = dribblers(srv.port, 3)
        time.sleep(0.2)
        extra = dribblers(srv.port, 1)
        t = time.time()
        gone = False
        while time.time() - t < 1.5 and not gone:
            gone = closed(socks[0])
            time.sleep(0.05)
        checks.check("a 4th reading connection from one address closes the oldest", gone,
                     "%.2f s" % (time.time() - t))
        for s in socks + extra:
            s.close()
    finally:
        srv.stop()


def raw(port, data, timeout=5):
    """Sends data as it is; returns (status, headers, the rest) once the server closes, or
    what came within timeout seconds (a connection kept open reads as status 0)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    buf = b""
    try:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    except socket.timeout:
        return 0, {}, buf
    finally:
        s.close()
    return common.parse_response(buf)


def valid_json(body):
    try:
        json.loads(body.decode("utf-8"))
        return True
    except (UnicodeDecodeError, ValueError):
        return False


def framing(args, checks):
    srv = common.Server(args.binary, args.model)
    port = srv.port
    try:
        # Log injection: a path with a newline and an ESC forges no log line.
        common.request(port, "GET", "/%0aGET%20/health%20200%20FORGED%1b[31m", timeout=5)
        log = srv.stderr()
        checks.check("a path's newline and ESC are escaped in the log",
                     "\x1b" not in log and not any(l.startswith("GET /health 200 FORGED")
                                                    for l in log.splitlines()),
                     repr([l for l in log.splitlines() if "FORGED" in l]))

        # Two Content-Length headers: 400, and the connection closes (no smuggled request).
        smuggled = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        body = b'{"text": "a"}'
        req = (b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-normal\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\nContent-Length: %d\r\n\r\n"
               % (len(body), len(body) + len(smuggled))) + body + smuggled
        st, h, payload = raw(port, req)
        checks.check("two Content-Length headers -> 400 and close",
                     st == 400 and h.get("connection", "").lower() == "close" and
                     payload.count(b"HTTP/1.1") == 0, "%d %r" % (st, h))

        # Many short headers (433 are 4.7 KB): answered 431 before any work, never lost.
        # Up to about 430 the error is ours (JSON); past it libmicrohttpd's own.
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
        for n in (101, 300, 425, 433):
            many = "".join("X-H%d: v\r\n" % i for i in range(n)).encode()
            req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                   b"Authorization: Bearer sk-normal\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n" % len(body)) + many + b"\r\n" + body
            st, _, payload = raw(port, req, 30)
            checks.check("%d short headers -> 431" % n,
                         st == 431 and (n > 430 or valid_json(payload)), "%d %r" % (st, payload[:80]))
        st, _, _ = common.request(port, "GET", "/health", headers={"X-Big": "b" * 20000}, timeout=10)
        checks.check("20 KB in one header still fits", st == 200, "%d" % st)

        # Every JSON body is valid UTF-8.
        st, _, payload = common.request(port, "GET", "/%ff%fe", timeout=5)
        checks.check("/%ff%fe -> 404 in valid UTF-8", st == 404 and valid_json(payload),
                     "%d %r" % (st, payload[:200]))
        name = "a" + "\u00e9" * 150
        st, _, payload = common.request(port, "POST", "/v1/completions",
                                        json.dumps({"model": name, "prompt": "x"}), K, 10)
        checks.check("a long model name cut in a character -> valid UTF-8",
                     st == 404 and valid_json(payload), "%d %r" % (st, payload[-80:]))

        # A NUL in the path is not decoded: /metrics%00x is no route.
        st, _, _ = common.request(port, "GET", "/metrics%00x", timeout=5)
        checks.check("/metrics%00x -> 404", st == 404, "%d" % st)
    finally:
        srv.stop()


def http_req(path, body, headers=K, close=True):
    data = json.dumps(body).encode()
    h = {"Host": "127.0.0.1", "Content-Type": "application/json",
         "Content-Length": str(len(data))}
    if close:
        h["Connection"] = "close"
    h.update(headers)
    return ("POST %s HTTP/1.1\r\n" % path + "".join("%s: %s\r\n" % kv for kv in h.items()) +
            "\r\n").encode() + data


def small_socket(port):
    """A client whose receive window is tiny: what it does not read stays on the server."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    return s


def answers(args, checks):
    big = {"prompt": "Once", "max_tokens": 400, "n": 16, "logprobs": 20, "ignore_eos": True}
    srv = common.Server(args.binary, args.model,
                        ["--max-answer", "250000", "--max-answers-total", "400000",
                         "--read-timeout", "3"])
    port = srv.port
    try:
        st, _, payload = raw(port, http_req("/v1/completions", big), 30)
        err = json.loads(payload).get("error", {}) if valid_json(payload) else {}
        checks.check("a non-streamed answer past --max-answer -> 400 response_too_large",
                     st == 400 and err.get("code") == "response_too_large", "%d %r" % (st, payload[:120]))

        # Two answers built at once hold more than --max-answers-total: one is refused.
        mid = {"prompt": "Once", "max_tokens": 200, "n": 4, "logprobs": 5, "ignore_eos": True}
        res = []
        ts = [threading.Thread(target=lambda: res.append(raw(port, http_req("/v1/completions", mid), 60)))
              for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        codes = sorted(r[0] for r in res)
        checks.check("two answers past --max-answers-total at once -> a 503 server_busy",
                     503 in codes and any(b"server_busy" in r[2] for r in res), repr(codes))
        st, _, _ = raw(port, http_req("/v1/completions", mid), 60)
        checks.check("their bytes are released: the same answer alone -> 200", st == 200, "%d" % st)

        # Half-close: the request is in, the client shuts its write side, the answer comes.
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(http_req("/v1/completions", {"prompt": "Once", "max_tokens": 8}))
        s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        s.close()
        st, _, payload = common.parse_response(buf)
        checks.check("half-close after the request -> the answer (200)", st == 200,
                     "%d %r" % (st, payload[:80]))

        # A stream's client that hangs up: usage counts what was generated anyway.
        s = small_socket(port)
        s.sendall(http_req("/v1/completions", {"prompt": "Once", "max_tokens": 480, "stream": True,
                                               "logprobs": 5, "ignore_eos": True}))
        got = b""
        while got.count(b"data: ") < 3:
            got += s.recv(2048)
        time.sleep(1.0)
        s.close()
        deadline = time.time() + 10
        while True:  # the log line comes once the engine has seen the hang-up
            lines = [l for l in srv.stderr().splitlines()
                     if "POST /v1/completions 200" in l and "closed early" in l]
            if lines or time.time() > deadline:
                break
            time.sleep(0.05)
        toks = [int(l.split("completion_tokens=")[1].split()[0]) for l in lines]
        m = common.metrics(port)
        gen = common.metric_sum(m, "tessera_generated_tokens_total")
        checks.check("a hung-up stream logs its generated tokens", toks and toks[-1] > 3,
                     repr(lines[-1:]))
        checks.check("tessera_generated_tokens_total counts them", gen >= (toks[-1] if toks else 1),
                     "%r" % gen)
    finally:
        srv.stop()


def tenants(args, checks):
    import os
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="tessera-attack-")
    path = os.path.join(d, "keys.json")
    with open(path, "w") as f:
        json.dump({"sk-a": {"name": "a"}, "sk-b": {"name": "b"},
                   "sk-org1": {"cache_namespace": "org"}, "sk-org2": {"cache_namespace": "org"}}, f)
    srv = common.Server(args.binary, args.model, ["--api-keys", path], keys=False)
    secret = "The patient has diabetes and takes insulin every morning before school. " * 3

    def cached(key, prompt, salt=None):
        body = {"prompt": prompt, "max_tokens": 1}
        if salt:
            body["cache_salt"] = salt
        st, _, payload = raw(srv.port, http_req("/v1/completions", body,
                                                 {"Authorization": "Bearer " + key}), 30)
        usage = json.loads(payload).get("usage", {}) if st == 200 else {}
        return (usage.get("prompt_tokens_details") or {}).get("cached_tokens", -1)

    try:
        cached("sk-a", secret)
        a2, b1 = cached("sk-a", secret), cached("sk-b", secret)
        checks.check("the same key hits its own cached prompt", a2 > 0, "%d" % a2)
        checks.check("another key's cached_tokens for it is 0", b1 == 0, "%d" % b1)
        s1 = cached("sk-a", secret, "s1")
        checks.check("a cache_salt narrows the namespace", s1 == 0, "%d" % s1)
        cached("sk-org1", secret + " org")
        o2 = cached("sk-org2", secret + " org")
        checks.check("keys of one cache_namespace share", o2 > 0, "%d" % o2)
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)


def pool(args, checks):
    # --max-seqs 1: the default KV pool holds one full context (a 2-token prompt and
    # max_tokens up to the context) with the partial blocks it needs.
    ctx = common.model_config(args.binary, args.model)["context_len"]
    srv = common.Server(args.binary, args.model, ["--max-seqs", "1"])
    try:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(http_req("/v1/completions", {"prompt": "Once", "max_tokens": ctx - 8,
                                               "stream": True}))
        st, _, payload = common.parse_response(s.recv(4096))
        s.close()
        checks.check("--max-seqs 1 fits a prompt + max_tokens of %d -> 200" % (ctx - 6), st == 200,
                     "%d %r" % (st, payload[:160]))
    finally:
        srv.stop()


def parsing(args, checks):
    srv = common.Server(args.binary, args.model)
    port = srv.port

    def post(body, path="/v1/completions", ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            st, _, payload = common.request(port, "POST", path, data,
                                            dict(K, **{"Content-Type": ctype}), 30)
        except socket.timeout:
            return 0, None, b""
        try:
            j = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            j = None
        return st, j, payload

    def refused(name, got, param):
        st, j, payload = got
        err = (j or {}).get("error", {})
        checks.check(name, st == 400 and err.get("param") == param, "%d %r" % (st, payload[:160]))

    try:
        refused("a NUL in a prompt -> 400 naming prompt", post({"prompt": "a\u0000b"}), "prompt")
        refused("a NUL in chat content -> 400 naming content",
                post({"messages": [{"role": "user", "content": "a\u0000b"}]},
                     "/v1/chat/completions"), "content")
        refused("a NUL in a model name -> 400 naming model",
                post({"model": "stories260K\u0000x", "prompt": "a"}), "model")
        st, j, payload = post({"tokens": [1, 3, 3]}, "/detokenize")
        checks.check("/detokenize of NUL tokens keeps them, escaped",
                     st == 200 and j is not None and "\u0000" in j.get("prompt", "") and
                     b"\\u0000" in payload, "%d %r" % (st, payload[:160]))
        st, j, _ = post(b'{"prompt": "a", "max_tokens": 1} {"x": 1}')
        checks.check("JSON followed by trailing garbage -> 400", st == 400, "%d" % st)
        refused("content parts checked for UTF-8 one by one",
                post(b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "\xc3"}, '
                     b'{"type": "text", "text": "\xa9"}]}]}', "/v1/chat/completions"),
                "messages[0].content")
        refused("top_p 1e-50 -> 400 naming top_p", post({"prompt": "a", "top_p": 1e-50}), "top_p")
    finally:
        srv.stop()


def browser(args, checks):
    srv = common.Server(args.binary, args.model, ["--allowed-hosts", "tessera.internal",
                                                  "--cors", "https://app.example"])
    port = srv.port
    body = json.dumps({"prompt": "a", "max_tokens": 1})

    def post(headers):
        h = dict(K)
        h.update(headers)
        return common.request(port, "POST", "/v1/completions", body, h, 30)

    try:
        st, _, _ = post({"Host": "evil.example"})
        checks.check("a Host that is no loopback name -> 403 (DNS rebinding)", st == 403, "%d" % st)
        st, _, _ = post({"Host": "localhost:%d" % port})
        checks.check("Host localhost:PORT -> 200", st == 200, "%d" % st)
        st, _, _ = post({"Host": "tessera.internal"})
        checks.check("a Host named by --allowed-hosts -> 200", st == 200, "%d" % st)
        st, _, _ = post({"Origin": "https://evil.example"})
        checks.check("a cross-origin request -> 403", st == 403, "%d" % st)
        own = "127.0.0.1:%d" % port
        st, _, _ = post({"Host": own, "Origin": "http://" + own})
        checks.check("a same-origin page's request -> 200", st == 200, "%d" % st)
        st, h, _ = post({"Origin": "https://app.example"})
        checks.check("an origin named by --cors -> 200 with Access-Control-Allow-Origin",
                     st == 200 and h.get("access-control-allow-origin") == "https://app.example",
                     "%d %r" % (st, h))
        st, h, _ = common.request(port, "OPTIONS", "/v1/completions", None,
                                  {"Origin": "https://app.example",
                                   "Access-Control-Request-Method": "POST"}, 10)
        checks.check("its preflight -> 204 with the CORS headers",
                     st == 204 and "access-control-allow-headers" in h, "%d %r" % (st, h))
        st, _, _ = post({"Content-Type": "text/plain"})
        checks.check("a text/plain body on a JSON route -> 415", st == 415, "%d" % st)
        st, _, _ = post({"Content-Type": "application/x-www-form-urlencoded",
                         "Origin": "http://" + own, "Host": own})
        checks.check("a form body from a browser page -> 415", st == 415, "%d" % st)
        st, _, _ = post({"Content-Type": "application/x-www-form-urlencoded"})
        checks.check("curl -d's form type without Origin -> 200", st == 200, "%d" % st)
    finally:
        srv.stop()


def fuzz(args, checks):
    """Raw-socket corpus against the HTTP framing (libmicrohttpd cannot be driven in
    process): seeded mutations of valid requests (headers, chunked and Content-Length
    bodies), each answered or closed in time, and the server healthy after them all."""
    import random
    rng = random.Random(17)
    body = b'{"prompt": "a", "max_tokens": 1}'
    seeds = [
        http_req("/v1/completions", {"prompt": "a", "max_tokens": 1}),
        (b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-normal\r\n"
         b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"d\r\n{\"text\": \"ab\"}\r\n0\r\n\r\n"),
        (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n" % len(body)) + body,
        b"GET /health HTTP/1.0\r\n\r\n",
    ]
    tokens = [b"\r\n", b"\n", b"\r", b"\x00", b":", b" ", b"\xff", b"%00", b"%", b"0x",
              b"Content-Length: 5\r\n", b"Transfer-Encoding: chunked\r\n", b"ffffffff\r\n",
              b"-1", b"\t", b"HTTP/1.1", b"\x1b[2J"]
    corpus = []
    for i in range(300):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data) + 1)
            op = rng.randrange(3)
            if op == 0:
                data[at:at] = rng.choice(tokens)
            elif op == 1 and at < len(data):
                data[at] = rng.randrange(256)
            else:
                del data[at:at + rng.randint(1, 8)]
        corpus.append(bytes(data) + b"\r\n\r\n")

    def send(item):
        """(seconds, request index, status) of one mangled request."""
        i, data = item
        t = time.time()
        st, _, _ = raw(srv.port, data, 10)
        return (time.time() - t, i, st)

    srv = common.Server(args.binary, args.model, ["--read-timeout", "2"])
    try:
        # Four connections at a time: a request left incomplete, or answered and kept
        # alive, holds its connection until the 2 s deadline, and one at a time those
        # waits add up to most of the run.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            took = list(pool.map(send, enumerate(corpus)))
        # An incomplete request is closed by the 2 s read deadline, an answered keep-alive
        # one after 2 s idle: 3x that is late (a sanitizer build beside other tests on two
        # cores has taken over 4 s), 10 s is a hang.
        slow = [x for x in took if x[0] > 6]
        took.sort(reverse=True)
        st, _, _ = common.request(srv.port, "GET", "/health", timeout=5)
        checks.check("300 mangled requests: each answered or closed in time, server healthy",
                     st == 200 and not slow and srv.proc.poll() is None,
                     "health %d, %d slow; slowest (s, request, status): %s" %
                     (st, len(slow), ", ".join("%.2f %d %d" % x for x in took[:3])))
    finally:
        srv.stop()


SECTIONS = {"fuzz": fuzz, "browser": browser, "parsing": parsing, "pool": pool, "slowloris": slowloris, "framing": framing, "answers": answers, "tenants": tenants}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=common.ROOT + "/build/tessera")
    ap.add_argument("--model", default=common.DEFAULT_MODEL)
    ap.add_argument("--only", choices=sorted(SECTIONS))
    args = ap.parse_args()
    checks = common.Checks()
    for name, fn in SECTIONS.items():
        if not args.only or args.only == name:
            print("== %s" % name, flush=True)
            fn(args, checks)
    checks.exit()


if __name__ == "__main__":
    main()
