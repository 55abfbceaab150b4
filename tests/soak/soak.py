#!/usr/bin/env python3
# soak.py: drives `tessera serve` (loopback, free port, a KV pool of ~20 blocks so that
# preemption happens) with 64 concurrent clients for a bounded time: mixed tiers and
# routes, streams and not, stop strings, client hang-ups, requests that can never fit,
# malformed bodies and bad keys. Then checks answers, deadlines, /metrics arithmetic,
# idle state, RSS against a post-warm-up baseline, /health latency and, for an ASan
# binary, LeakSanitizer's verdict at shutdown. A fault phase follows (--faults).
import argparse
import json
import os
import random
import socket
import threading
import time

import common

STOPS = ["the", ".", "Lily", "\n", "and", "ing", "!"]
PROMPTS = ["Once upon a time", "Tom had a dog", "Lily went to the park", "The sun",
           "A little bird", "One day, a girl named Sue", "Ben and Mia"]


class Stats:
    def __init__(self):
        self.mu = threading.Lock()
        self.counts = {}        # outcome -> count
        self.failures = []      # (kind, detail), first few kept
        self.n_failures = 0
        self.latency_max = 0.0

    def add(self, outcome, latency=0.0):
        with self.mu:
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
            self.latency_max = max(self.latency_max, latency)

    def fail(self, kind, detail):
        with self.mu:
            self.n_failures += 1
            if len(self.failures) < 20:
                self.failures.append((kind, detail[:300]))


def valid_text_json(body, kind, n, max_tokens, stops):
    """None when body is a valid answer, else what is wrong."""
    try:
        j = json.loads(body)
    except ValueError as e:
        return "not JSON: %s" % e
    want = "chat.completion" if kind == "chat" else "text_completion"
    if j.get("object") != want:
        return "object %r" % j.get("object")
    ch = j.get("choices", [])
    if len(ch) != n:
        return "%d choices for n=%d" % (len(ch), n)
    for c in ch:
        if c.get("finish_reason") not in ("stop", "length"):
            return "finish_reason %r" % c.get("finish_reason")
        text = c["message"]["content"] if kind == "chat" else c["text"]
        if c["finish_reason"] == "stop" and any(s in text for s in stops):
            return "stop string in the text %r" % text
    u = j.get("usage", {})
    if not (0 <= u.get("completion_tokens", -1) <= n * max_tokens and
            u.get("total_tokens") == u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)):
        return "usage %r" % u
    return None


def valid_stream(body, kind, n, stops):
    """None when body is a complete, well-formed SSE stream, else what is wrong."""
    events = [e for e in body.decode("utf-8").split("\n\n") if e]
    if not events or events[-1] != "data: [DONE]":
        return "no [DONE] at the end (%d events)" % len(events)
    finished = {}
    texts = {}
    for e in events[:-1]:
        if not e.startswith("data: "):
            return "event without data: %r" % e[:80]
        j = json.loads(e[6:])
        if "error" in j:
            return "error event %r" % j["error"]
        for c in j.get("choices", []):
            i = c["index"]
            piece = c.get("delta", {}).get("content") if kind == "chat" else c.get("text")
            texts[i] = texts.get(i, "") + (piece or "")
            if c.get("finish_reason"):
                if i in finished:
                    return "two finish_reason for choice %d" % i
                finished[i] = c["finish_reason"]
    if sorted(finished) != list(range(n)):
        return "finish_reason for choices %r, n=%d" % (sorted(finished), n)
    for i, why in finished.items():
        if why not in ("stop", "length"):
            return "finish_reason %r" % why
        if why == "stop" and any(s in texts.get(i, "") for s in stops):
            return "stop string in the streamed text"
    return None


class Client(threading.Thread):
    """One of the concurrent clients: picks a scenario per request until the end time."""

    def __init__(self, port, end, deadline, seed, stats, max_requests, ctx, pool_blocks):
        super().__init__(daemon=True)
        self.port, self.end, self.deadline = port, end, deadline
        self.rng = random.Random(seed)
        self.stats, self.max_requests = stats, max_requests
        self.ctx, self.pool_blocks = ctx, pool_blocks

    def run(self):
        done = 0
        while time.time() < self.end and done < self.max_requests:
            done += 1
            try:
                self.one()
            except Exception as e:  # a client bug or a broken answer: never silent
                self.stats.fail("exception", repr(e))

    def key(self):
        return self.rng.choice(list(common.KEYS))

    def send(self, path, body, key, stream_read=None):
        """Sends one request; returns (status, headers, body, seconds) or None on hang-up."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                "Content-Type: application/json\r\nContent-Length: %d\r\n" % (path, len(data)))
        if key:
            head += "Authorization: Bearer %s\r\n" % key
        t0 = time.time()
        s = socket.create_connection(("127.0.0.1", self.port), timeout=self.deadline)
        try:
            s.sendall(head.encode() + b"\r\n" + data)
            buf = b""
            while True:
                if time.time() - t0 > self.deadline:
                    self.stats.fail("hung", "%s past its %ss deadline" % (path, self.deadline))
                    return None
                if stream_read is not None and buf.count(b"data: ") >= stream_read:
                    return None  # the client hangs up mid-stream
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except socket.timeout:
            self.stats.fail("hung", "%s: no byte for %ss" % (path, self.deadline))
            return None
        finally:
            s.close()
        status, headers, payload = common.parse_response(buf)
        return status, headers, payload, time.time() - t0

    def completion_body(self, kind, stream):
        r = self.rng
        body = {"max_tokens": r.randint(1, 48), "temperature": r.choice([0, 0.7, 1.0]),
                "seed": r.randint(0, 1 << 30)}
        if kind == "chat":
            body["messages"] = [{"role": "user", "content": r.choice(PROMPTS)}]
        else:
            body["prompt"] = r.choice(PROMPTS)
        if r.random() < 0.5:
            body["stop"] = r.sample(STOPS, r.randint(1, 4))
        if r.random() < 0.2:
            body["n"] = 2
        if stream:
            body["stream"] = True
        return body

    def one(self):
        r = self.rng
        kind = r.choice(["chat", "text"])
        path = {"chat": "/v1/chat/completions", "text": "/v1/completions"}[kind]
        if r.random() < 0.15:
            path = path.replace("/v1/", "/v1/batch/")
        x = r.random()
        if x < 0.06:  # can never fit: over the context, or over the whole KV pool
            body = {"prompt": "a", "max_tokens": self.ctx + r.randint(1, 100)}
            if r.random() < 0.5:
                body["max_tokens"] = self.pool_blocks * common.KV_BLOCK_TOKENS
            self.expect(path.replace("chat/", "") if kind == "chat" else path, body, 400,
                        "unfit", code="context_length_exceeded")
            return
        if x < 0.14:  # malformed
            bad = r.choice([b'{"prompt": ', b'{"prompt": "x", "max_tokens": "ten"}',
                            b'{"prompt": "caf\xff"}', b'', b'[1, 2]', b'{"prompt": "x", "n": 99}',
                            b'{"messages": 3}', b'{"prompt": "x", "stop": ["a","b","c","d","e"]}'])
            self.expect(path, bad, 400, "malformed")
            return
        if x < 0.17:  # bad key
            self.expect(path, self.completion_body(kind, False), 401, "bad_key", key="sk-nope")
            return
        stream = r.random() < 0.5
        body = self.completion_body(kind, stream)
        if x < 0.27:  # hang up: mid-stream after a few events, or before a whole answer
            if stream:
                body["max_tokens"] = 48
                res = self.send(path, body, self.key(), stream_read=r.randint(1, 6))
            else:
                res = self.send_and_drop(path, body, r.uniform(0.0, 0.3))
            if res is None:
                self.stats.add("hangup")
                return
        else:
            res = self.send(path, body, self.key())
            if res is None:
                return
        status, headers, payload, secs = res
        n = body.get("n", 1)
        stops = body.get("stop", [])
        if status == 429 and "retry-after" in headers:
            self.stats.add("429", secs)
            return
        if status != 200:
            self.stats.fail("status", "%s answered %d: %r" % (path, status, payload[:200]))
            return
        if stream:
            why = valid_stream(payload, kind, n, stops)
        else:
            why = valid_text_json(payload, kind, n, body["max_tokens"], stops)
        if why:
            self.stats.fail("invalid", "%s: %s" % (path, why))
        else:
            self.stats.add("stream_ok" if stream else "ok", secs)

    def send_and_drop(self, path, body, after):
        data = json.dumps(body).encode()
        s = socket.create_connection(("127.0.0.1", self.port), timeout=self.deadline)
        s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer "
                   "%s\r\nContent-Length: %d\r\n\r\n" % (path, self.key(), len(data))).encode()
                  + data)
        s.settimeout(after if after > 0 else 0.001)
        buf = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except socket.timeout:
            s.close()
            return None  # hung up before the answer
        s.close()
        status, headers, payload = common.parse_response(buf)
        return status, headers, payload, 0.0

    def expect(self, path, body, want, outcome, key=None, code=None):
        res = self.send(path, body, key or self.key())
        if res is None:
            return
        status, _, payload, secs = res
        ok = status == want
        if ok:
            try:
                err = json.loads(payload)["error"]
                ok = bool(err.get("message")) and (code is None or err.get("code") == code)
            except (ValueError, KeyError, TypeError):
                ok = False
        if ok:
            self.stats.add(outcome, secs)
        else:
            self.stats.fail(outcome, "%s %r -> %d %r" % (path, body if isinstance(body, dict)
                                                          else body[:40], status, payload[:200]))


class Prober(threading.Thread):
    """GET /health every second; records the worst latency and any failure."""

    def __init__(self, srv):
        super().__init__(daemon=True)
        self.srv = srv
        self.stop_flag = threading.Event()
        self.n = self.bad = 0
        self.worst = 0.0
        self.rss_peak = 0

    def run(self):
        while not self.stop_flag.is_set():
            t0 = time.time()
            try:
                status, _, _ = common.request(self.srv.port, "GET", "/health", timeout=1.0)
            except OSError:
                status = 0
            dt = time.time() - t0
            self.n += 1
            self.worst = max(self.worst, dt)
            if status != 200 or dt >= 1.0:
                self.bad += 1
            rss = self.srv.rss_kib()
            self.rss_peak = max(self.rss_peak, rss)
            if self.n % 60 == 0:
                print("  t=%ds RSS %d KiB" % (self.n, rss), flush=True)
            self.stop_flag.wait(max(0.0, 1.0 - dt))


def run_load(srv, seconds, clients, deadline, seed, ctx, pool_blocks, max_requests):
    stats = Stats()
    end = time.time() + seconds
    threads = [Client(srv.port, end, deadline, seed * 1000 + i, stats, max_requests, ctx,
                      pool_blocks) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 2 * deadline + 30)
    stuck = sum(t.is_alive() for t in threads)
    if stuck:
        stats.fail("hung", "%d clients still running after the load" % stuck)
    return stats


def fault_phase(args, checks):
    """TESSERA_FAIL_ALLOC_AT=N: the N-th step-thread allocation fails, once. The request it
    belonged to gets a 500 or an SSE error event; the others complete; health stays OK."""
    for n in args.fail_at:
        srv = common.Server(args.binary, args.model, ["--threads", "1"],
                            env={"TESSERA_FAIL_ALLOC_AT": str(n)})
        try:
            results = []
            lock = threading.Lock()

            def go(i):
                body = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": 16,
                        "ignore_eos": True, "stream": i % 2 == 1}
                st, _, payload = common.request(srv.port, "POST", "/v1/completions",
                                                json.dumps(body),
                                                {"Authorization": "Bearer sk-normal"}, 60)
                text = payload.decode("utf-8", "replace")
                if st == 200 and body["stream"]:
                    outcome = "error" if '"error"' in text else (
                        "ok" if text.rstrip().endswith("data: [DONE]") else "broken")
                elif st == 200:
                    outcome = "ok" if json.loads(text)["usage"]["completion_tokens"] == 16 else "broken"
                else:
                    outcome = "error" if st == 500 and '"engine_error"' in text else "broken:%d" % st
                with lock:
                    results.append(outcome)

            ts = [threading.Thread(target=go, args=(i,)) for i in range(10)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(90)
            m, idle = common.wait_idle(srv.port, 30)
            failed = common.metric_sum(m, "tessera_engine_requests_failed_total")
            health = common.request(srv.port, "GET", "/health", timeout=2)[0]
            checks.check("fault at allocation %d: one request errs, 9 complete" % n,
                         sorted(results) == ["error"] + ["ok"] * 9, repr(sorted(results)))
            checks.check("fault at allocation %d: engine counts one failure, idle after" % n,
                         failed == 1 and idle, "failed=%d idle=%s" % (failed, idle))
            checks.check("fault at allocation %d: server survives (health 200)" % n, health == 200)
            checks.check("fault at allocation %d: a log line names the failure" % n,
                         "request failed (out of memory)" in srv.stderr())
        finally:
            status = srv.stop()
        checks.check("fault at allocation %d: clean exit" % n, status == 0, "status %r" % status)
        check_leaks(args, srv, checks, "fault at %d" % n)


def check_leaks(args, srv, checks, what):
    err = srv.stderr()
    if args.asan:
        checks.check("%s: no LeakSanitizer report at shutdown" % what,
                     "LeakSanitizer" not in err and "AddressSanitizer" not in err,
                     err[err.find("Sanitizer") - 200:][:2000] if "Sanitizer" in err else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--binary", default=common.ROOT + "/build/tessera")
    ap.add_argument("--model", default=common.DEFAULT_MODEL)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=30, help="seconds of warm-up load")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--deadline", type=float, default=120, help="seconds any request may take")
    ap.add_argument("--kv-blocks", type=int, default=20)
    ap.add_argument("--rss-tolerance", type=float, default=10, help="percent")
    ap.add_argument("--max-requests", type=int, default=1000000, help="per client")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--asan", action="store_true", help="the binary is an ASan build")
    ap.add_argument("--faults", action="store_true", help="then run the fault phase")
    ap.add_argument("--fail-at", type=int, nargs="*", default=[1, 9, 60, 150])
    ap.add_argument("--no-load", action="store_true", help="only the fault phase")
    args = ap.parse_args()
    if args.asan:
        # A small quarantine keeps freed memory from looking like growth in the RSS check.
        os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "detect_leaks=1") + \
            ":quarantine_size_mb=16"
        os.environ.setdefault("LSAN_OPTIONS", "suppressions=%s/tests/lsan.supp" % common.ROOT)
    checks = common.Checks()
    if not args.no_load:
        load_phase(args, checks)
    if args.faults:
        fault_phase(args, checks)
    checks.exit()


def load_phase(args, checks):
    cfg = common.model_config(args.binary, args.model)
    kv_mem = cfg["block_bytes"] * args.kv_blocks
    srv = common.Server(args.binary, args.model, ["--kv-mem", str(kv_mem), "--max-queue", "256"])
    print("server pid %d port %d, KV pool %d bytes (%d-byte blocks)" %
          (srv.proc.pid, srv.port, kv_mem, cfg["block_bytes"]), flush=True)
    try:
        m0 = common.metrics(srv.port)
        blocks = int(common.metric_sum(m0, "tessera_kv_pool_blocks"))
        checks.check("KV pool holds %d blocks" % args.kv_blocks, blocks == args.kv_blocks,
                     "got %d" % blocks)
        rss_start = srv.rss_kib()
        # Warm-up: pools and arenas are allocated up front or on first use; the baseline
        # is the RSS once a round of the same load has run and the server is idle again.
        warm = run_load(srv, args.warmup, args.clients, args.deadline, args.seed + 7,
                        cfg["context_len"], blocks, args.max_requests)
        _, idle = common.wait_idle(srv.port, 60)
        time.sleep(1)
        rss_base = srv.rss_kib()
        print("RSS: start %d KiB, after warm-up %d KiB (warm-up: %r, %d failures)" %
              (rss_start, rss_base, warm.counts, warm.n_failures), flush=True)
        before = common.metrics(srv.port)

        prober = Prober(srv)
        prober.start()
        t0 = time.time()
        stats = run_load(srv, args.seconds, args.clients, args.deadline, args.seed,
                         cfg["context_len"], blocks, args.max_requests)
        elapsed = time.time() - t0
        prober.stop_flag.set()
        prober.join()
        m, idle = common.wait_idle(srv.port, 60)
        time.sleep(1)
        rss_end = srv.rss_kib()
        report(args, stats, prober, before, m, rss_base, rss_end, elapsed, checks, idle, warm)
    finally:
        status = srv.stop()
    checks.check("SIGTERM exits 0", status == 0, "status %r" % status)
    check_leaks(args, srv, checks, "soak")


def delta(before, after, name, **labels):
    return common.metric_sum(after, name, **labels) - common.metric_sum(before, name, **labels)


def report(args, stats, prober, before, m, rss_base, rss_end, elapsed, checks, idle, warm):
    c = stats.counts
    total = sum(c.values())
    routes = ["chat_completions", "completions", "batch_chat_completions", "batch_completions"]
    by_status = {}
    for st in ("200", "400", "401", "429", "500", "503", "other"):
        n = sum(delta(before, m, "tessera_requests_total", route=r, status=st) for r in routes)
        if n:
            by_status[st] = int(n)
    eng = {k: int(delta(before, m, "tessera_engine_requests_%s_total" % k))
           for k in ("submitted", "completed", "failed", "cancelled")}
    preempt = int(delta(before, m, "tessera_preemptions_total"))
    tokens = int(delta(before, m, "tessera_engine_generated_tokens_total"))
    print("\n== soak summary (%.0f s, %d clients, binary %s)" % (elapsed, args.clients, args.binary))
    print("client outcomes: %s (total %d, %.1f req/s), failures %d, slowest %.2f s" %
          (json.dumps(c, sort_keys=True), total, total / max(elapsed, 1), stats.n_failures,
           stats.latency_max))
    print("server answers by status (completion routes): %s" % json.dumps(by_status, sort_keys=True))
    print("engine requests: %s; preemptions %d; generated tokens %d" % (eng, preempt, tokens))
    print("health probes: %d, bad %d, worst %.3f s" % (prober.n, prober.bad, prober.worst))
    print("RSS: baseline %d KiB, peak %d KiB, final %d KiB" % (rss_base, prober.rss_peak, rss_end))
    for kind, detail in stats.failures:
        print("  failure %s: %s" % (kind, detail))

    checks.check("every request answered validly before its deadline", stats.n_failures == 0,
                 "%d failures" % stats.n_failures)
    checks.check("warm-up answered validly", warm.n_failures == 0, "%d failures" % warm.n_failures)
    checks.check("load ran (over 100 requests)", total > 100, "%d" % total)
    checks.check("idle after the load: no sequence, no queued request, no KV block used", idle)
    checks.check("engine: submitted = completed + failed + cancelled",
                 eng["submitted"] == eng["completed"] + eng["failed"] + eng["cancelled"], repr(eng))
    checks.check("engine: no failed request", eng["failed"] == 0, repr(eng))
    checks.check("engine: cancelled only by hang-ups", eng["cancelled"] <= c.get("hangup", 0),
                 "%d cancelled, %d hang-ups" % (eng["cancelled"], c.get("hangup", 0)))
    ok_answers = c.get("ok", 0) + c.get("stream_ok", 0)
    checks.check("engine completed at least the valid answers", eng["completed"] >= ok_answers,
                 "%d completed, %d valid answers" % (eng["completed"], ok_answers))
    checks.check("server counted each 400 and 401",
                 by_status.get("400", 0) == c.get("unfit", 0) + c.get("malformed", 0) and
                 by_status.get("401", 0) == c.get("bad_key", 0), repr(by_status))
    served = sum(by_status.values())
    checks.check("server counted every request sent (hang-ups may be unanswered)",
                 total - c.get("hangup", 0) <= served <= total, "%d counted, %d sent" % (served, total))
    checks.check("preemption happened", preempt > 0, "%d" % preempt)
    checks.check("/health answered within 1 s every second", prober.bad == 0 and prober.n > 0,
                 "%d of %d bad, worst %.2f s" % (prober.bad, prober.n, prober.worst))
    tol = args.rss_tolerance / 100
    checks.check("RSS back within %g%% of the post-warm-up baseline" % args.rss_tolerance,
                 rss_end <= rss_base * (1 + tol), "%d vs %d KiB" % (rss_end, rss_base))


if __name__ == "__main__":
    main()
