#!/usr/bin/env python3
# limits.py: every documented limit answers with its 4xx (or 503) and a JSON error, and
# no route touches a file named by a request (docs/SECURITY.md lists the limits).
import argparse
import json
import socket
import time

import common

K = {"Authorization": "Bearer sk-normal"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=common.ROOT + "/build/tessera")
    ap.add_argument("--model", default=common.DEFAULT_MODEL)
    args = ap.parse_args()
    checks = common.Checks()
    cfg = common.model_config(args.binary, args.model)
    ctx = cfg["context_len"]
    srv = common.Server(args.binary, args.model,
                        ["--max-connections", "4", "--max-body", "8192"])
    port = srv.port

    def post(body, path="/v1/completions", headers=K):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        st, h, payload = common.request(port, "POST", path, data, headers, 30)
        try:
            err = json.loads(payload).get("error", {})
        except ValueError:
            err = {}
        return st, err, h

    def expect(name, got, status, code=None, param=None):
        st, err, _ = got
        ok = st == status and bool(err.get("message"))
        ok = ok and (code is None or err.get("code") == code) and (param is None or err.get("param") == param)
        checks.check("%s -> %d" % (name, status), ok, "%d %r" % (st, err))

    try:
        expect("body over --max-body", post({"prompt": "a" * 9000}), 413, "request_too_large")
        st, h, _ = common.request(port, "POST", "/v1/completions", '{"prompt": "x"}',
                                  dict(K, **{"X-Big": "b" * 40000}), 10)
        checks.check("headers over the 32 KiB buffer -> 431", st == 431, "%d" % st)
        st, _, _ = common.request(port, "GET", "/health", headers={"X-Big": "b" * 20000}, timeout=10)
        checks.check("20 KB of headers still fit", st == 200, "%d" % st)
        expect("prompt over the context (tokens)",
               post({"prompt": "a " * ctx, "max_tokens": 1}), 400, "context_length_exceeded")
        expect("prompt + max_tokens over the context",
               post({"prompt": "x", "max_tokens": ctx}), 400, "context_length_exceeded", "max_tokens")
        expect("max_tokens 0", post({"prompt": "x", "max_tokens": 0}), 400, param="max_tokens")
        expect("n over 16", post({"prompt": "x", "n": 17}), 400, param="n")
        expect("5 stop strings", post({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}), 400,
               param="stop")
        expect("stop string over 256 bytes", post({"prompt": "x", "stop": ["s" * 257]}), 400,
               param="stop")
        expect("top_logprobs over 20", post({"messages": [{"role": "user", "content": "x"}],
                                             "logprobs": True, "top_logprobs": 21},
                                            "/v1/chat/completions"), 400, param="top_logprobs")
        expect("no key", post({"prompt": "x"}, headers={}), 401, "invalid_api_key")

        # No file is ever opened on a request's behalf: paths are routes, models are names.
        st, _, _ = common.request(port, "GET", "/../../etc/passwd", headers=K, timeout=5)
        checks.check("a path outside the routes -> 404", st == 404, "%d" % st)
        expect("a model named like a file", post({"prompt": "x", "model": "/etc/passwd"}), 404,
               "model_not_found", "model")
        expect("a model named like a relative path",
               post({"prompt": "x", "model": "../shared/models/stories260K/stories260K.gguf"}),
               404, "model_not_found", "model")

        # Connections: 4 open ones fill --max-connections 4; the next gets 503 (with
        # Retry-After and Connection: close); /health still answers.
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        time.sleep(0.3)
        st, err, h = post({"prompt": "x", "max_tokens": 1})
        checks.check("a connection past --max-connections -> 503",
                     st == 503 and err.get("code") == "too_many_connections" and
                     h.get("retry-after") == "1", "%d %r %r" % (st, err, h))
        st, _, _ = common.request(port, "GET", "/health", timeout=5)
        checks.check("/health answers past --max-connections", st == 200, "%d" % st)
        for s in idle:
            s.close()
        time.sleep(0.3)
        expect_ok = post({"prompt": "x", "max_tokens": 1})
        checks.check("connections freed -> 200 again", expect_ok[0] == 200, "%d" % expect_ok[0])
    finally:
        status = srv.stop()
    checks.check("SIGTERM exits 0", status == 0, "status %r" % status)
    checks.exit()


if __name__ == "__main__":
    main()
