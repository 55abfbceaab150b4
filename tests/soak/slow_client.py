#!/usr/bin/env python3
# slow_client.py: a client that reads an SSE stream one byte per second must not stall
# other clients or the engine: once its unread output passes --max-buffered the engine
# cancels its request (a log line says so), its KV blocks are freed while the client
# still holds the connection, and concurrent clients keep their normal latency.
import argparse
import json
import socket
import threading
import time

import common

MAX_BUFFERED = 8192


def normal_round(port, n):
    """n concurrent non-streamed completions; returns their latencies (or None: failed)."""
    lat = []
    lock = threading.Lock()

    def go(i):
        t0 = time.time()
        st, _, body = common.request(port, "POST", "/v1/completions",
                                     json.dumps({"prompt": "Tom had %d" % i, "max_tokens": 32,
                                                 "ignore_eos": True}),
                                     {"Authorization": "Bearer sk-normal"}, 60)
        ok = st == 200 and json.loads(body)["usage"]["completion_tokens"] == 32
        with lock:
            lat.append(time.time() - t0 if ok else None)

    ts = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(90)
    return lat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=common.ROOT + "/build/tessera")
    ap.add_argument("--model", default=common.DEFAULT_MODEL)
    ap.add_argument("--slow-seconds", type=int, default=8)
    args = ap.parse_args()
    checks = common.Checks()
    srv = common.Server(args.binary, args.model, ["--max-buffered", str(MAX_BUFFERED)])
    try:
        base = normal_round(srv.port, 8)
        checks.check("baseline round answers", None not in base, repr(base))

        # The slow reader: a small receive buffer so that the kernel holds little, then
        # one byte a second.
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        s.connect(("127.0.0.1", srv.port))
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 2000, "ignore_eos": True,
                           "stream": True, "logprobs": 5}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-high\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        got = b""
        t_slow = time.time()
        cancelled_at = None
        during = []
        while time.time() - t_slow < args.slow_seconds:
            got += s.recv(1)
            m = common.metrics(srv.port)
            if cancelled_at is None and common.metric_sum(m, "tessera_engine_requests_cancelled_total") == 1:
                cancelled_at = time.time() - t_slow
                freed = (common.metric_sum(m, "tessera_running_sequences") == 0 and
                         common.metric_sum(m, "tessera_kv_blocks", state="used") == 0)
            if not during:
                during = normal_round(srv.port, 8)  # while the slow client holds its stream
            time.sleep(1)
        generated = common.metric_sum(common.metrics(srv.port), "tessera_engine_generated_tokens_total")
        # A byte a loop turn, and a turn lasts a second or more (the scrapes and the round
        # beside it): how many bytes arrive depends on the machine's load, not the server.
        status_line = b"HTTP/1.1 200"
        head = got[:len(status_line)]
        checks.check("the slow reader got its first bytes (of its status line)",
                     len(head) > 0 and status_line.startswith(head), repr(got))
        checks.check("the slow request is cancelled once over the limit", cancelled_at is not None)
        checks.check("its sequence and KV blocks are freed while the client still reads",
                     cancelled_at is not None and freed)
        checks.check("the engine stopped generating for it (far fewer than 2000 tokens)",
                     generated < 8 * 32 * 2 + 1500, "%d tokens in all" % generated)
        checks.check("concurrent clients answered", during and None not in during, repr(during))
        if during and None not in during and None not in base:
            checks.check("their latency stays normal (worst < 3x baseline worst + 1 s)",
                         max(during) < 3 * max(base) + 1.0,
                         "%.2f s vs baseline %.2f s" % (max(during), max(base)))
        s.close()
        _, idle = common.wait_idle(srv.port, 30)
        checks.check("idle after the slow client leaves", idle)
        time.sleep(0.5)
        checks.check("a log line says why",
                     "the client reads too slowly" in srv.stderr(), srv.stderr()[-500:])
        checks.check("health 200", common.request(srv.port, "GET", "/health", timeout=2)[0] == 200)
    finally:
        status = srv.stop()
    checks.check("SIGTERM exits 0", status == 0, "status %r" % status)
    checks.exit()


if __name__ == "__main__":
    main()
