# common.py: helpers shared by the soak, fault and limit tests: start and stop
# `tessera serve` on a free loopback port, raw HTTP/1.1 requests, /metrics parsing, RSS.
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_MODEL = os.path.join(ROOT, "..", "shared", "models", "stories260K", "stories260K.gguf")
KV_BLOCK_TOKENS = 32

KEYS = {"sk-high": "high", "sk-normal": "normal", "sk-low": "low"}


def model_config(binary, model):
    """The model's config from `tessera info` (dims the KV block size depends on)."""
    out = subprocess.run([binary, "info", "-m", model], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    cfg = {}
    for key in ("n_layers", "n_kv_heads", "head_dim", "context_len"):
        m = re.search(r"^\s+%s\s+(\d+)$" % key, out, re.M)
        if not m:
            raise RuntimeError("tessera info did not print %s" % key)
        cfg[key] = int(m.group(1))
    # f32 K and V for every layer and kv head of 32 tokens
    cfg["block_bytes"] = KV_BLOCK_TOKENS * cfg["n_layers"] * cfg["n_kv_heads"] * cfg["head_dim"] * 2 * 4
    return cfg


class Server:
    """`tessera serve` on 127.0.0.1 with an ephemeral port; stderr goes to a file."""

    def __init__(self, binary, model, args=(), env=None, keys=True):
        self.tmp = tempfile.mkdtemp(prefix="tessera-soak-")
        self.log_path = os.path.join(self.tmp, "server.log")
        cmd = [binary, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0"]
        if keys:
            path = os.path.join(self.tmp, "keys.json")
            with open(path, "w") as f:
                json.dump({k: {"tier": t, "name": t} for k, t in KEYS.items()}, f)
            cmd += ["--api-keys", path]
        cmd += list(args)
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.log = open(self.log_path, "wb")
        self.final_log = None  # the log, kept once the server is gone with its folder
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, env=full_env)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline:
            with open(self.log_path, "rb") as f:
                m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", f.read())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if not self.port:
            self.kill()
            raise RuntimeError("server did not start:\n" + self.stderr())

    def stderr(self):
        if self.final_log is not None:
            return self.final_log
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self, timeout=120):
        """SIGTERM; returns the exit status (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        self.remove_folder()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.remove_folder()

    def remove_folder(self):
        """Keep the log in memory for stderr() and delete the server's temporary folder."""
        if self.final_log is None:
            self.log.close()
            self.final_log = self.stderr()
            shutil.rmtree(self.tmp, ignore_errors=True)


def request(port, method, path, body=None, headers=None, timeout=30.0, raw=None):
    """One HTTP/1.1 request on a fresh connection (Connection: close). Returns
    (status, headers dict lower-cased, body bytes); status 0 when the server closed the
    connection without an answer. raw sends bytes as they are instead of building a request."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        if raw is None:
            data = body if isinstance(body, bytes) else (body or "").encode()
            h = {"Host": "127.0.0.1", "Connection": "close"}
            if body is not None:
                h["Content-Type"] = "application/json"
                h["Content-Length"] = str(len(data))
            h.update(headers or {})
            head = "%s %s HTTP/1.1\r\n" % (method, path)
            head += "".join("%s: %s\r\n" % kv for kv in h.items()) + "\r\n"
            raw = head.encode() + data
        s.sendall(raw)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except (ConnectionResetError, BrokenPipeError):
        buf = b""
    finally:
        s.close()
    return parse_response(buf)


def parse_response(buf):
    if b"\r\n\r\n" not in buf:
        return 0, {}, b""
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    return status, headers, body


def dechunk(body):
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out


def metrics(port):
    """/metrics as {name{labels}: value}."""
    status, _, body = request(port, "GET", "/metrics", timeout=10)
    if status != 200:
        raise RuntimeError("/metrics answered %d" % status)
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def metric_sum(m, prefix, **labels):
    """Sum of the series named prefix whose labels include labels."""
    total = 0.0
    for key, value in m.items():
        name = key.split("{")[0]
        if name != prefix:
            continue
        if all('%s="%s"' % kv in key for kv in labels.items()):
            total += value
    return total


def wait_idle(port, timeout=60.0):
    """Waits until no sequence runs, none waits and no KV block is used; returns metrics."""
    deadline = time.time() + timeout
    m = {}
    while time.time() < deadline:
        m = metrics(port)
        if (metric_sum(m, "tessera_running_sequences") == 0 and
                metric_sum(m, "tessera_queue_depth") == 0 and
                metric_sum(m, "tessera_kv_blocks", state="used") == 0 and
                metric_sum(m, "tessera_engine_requests_submitted_total") ==
                metric_sum(m, "tessera_engine_requests_completed_total") +
                metric_sum(m, "tessera_engine_requests_failed_total") +
                metric_sum(m, "tessera_engine_requests_cancelled_total")):
            return m, True
        time.sleep(0.2)
    return m, False


class Checks:
    """Named pass/fail results; the process exit status is the verdict."""

    def __init__(self):
        self.failed = []

    def check(self, name, ok, detail=""):
        print("%s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail else ""),
              flush=True)
        if not ok:
            self.failed.append(name)
        return ok

    def exit(self):
        print("%d checks failed" % len(self.failed), flush=True)
        raise SystemExit(1 if self.failed else 0)
