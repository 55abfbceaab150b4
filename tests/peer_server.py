"""peer_server.py: llama.cpp's llama-server, the peer whose answers the make_ref.py scripts
write down: started on one model (127.0.0.1, a free port, one thread, one slot), waited for
until /health answers, asked with JSON posts, and stopped by its own PID.

    with PeerServer(LLAMA_SERVER_BINARY, model, log, ["--embedding", "-c", "512"]) as peer:
        ids = peer.post("/tokenize", {"content": text, "add_special": True})["tokens"]

The scripts import it with tests/ on sys.path (they live one folder below)."""
import json
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PeerServer:
    """llama-server (the binary at server) serving model with the extra arguments args; its
    output goes to the file log. Raises RuntimeError, with the log's tail, when it exits or
    does not answer /health within start_timeout seconds. As a context manager it stops the
    server on leaving, and writes the log's tail to stderr when leaving on an exception."""

    def __init__(self, server, model, log, args=(), start_timeout=60):
        self.port = free_port()
        self.log = log
        self.logf = open(log, "w")
        self.proc = subprocess.Popen(
            [server, "-m", model, "--host", "127.0.0.1", "--port", str(self.port),
             "-np", "1", "-t", "1"] + list(args),
            stdout=self.logf, stderr=subprocess.STDOUT)
        try:
            self._wait_healthy(start_timeout)
        except Exception:
            self.stop()
            raise

    def _wait_healthy(self, timeout):
        t0 = time.time()
        while True:
            try:
                with urllib.request.urlopen(self.url("/health"), timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                pass
            if self.proc.poll() is not None or time.time() - t0 > timeout:
                raise RuntimeError("llama-server did not start:\n" + self.log_tail())
            time.sleep(0.2)

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def post(self, path, body):
        """The decoded JSON answer to body posted as JSON to path."""
        req = urllib.request.Request(self.url(path), data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    def tokenize_lines(self, texts):
        """The reference lines of each text's /tokenize ids: "text HEX" (its UTF-8 bytes),
        "ids N id..." with add_special and "plain N id..." without. A list in texts is
        llama.cpp's mixed "content" (strings and ids): its line is "content HEX", the
        UTF-8 bytes of its JSON."""
        lines = []
        for text in texts:
            if isinstance(text, list):
                content = json.dumps(text, separators=(",", ":"))
                ids = self.post("/tokenize", {"content": text, "add_special": True})["tokens"]
                plain = self.post("/tokenize", {"content": text, "add_special": False})["tokens"]
                lines.append(f"content {content.encode().hex()}")
                lines.append("ids " + " ".join(str(x) for x in [len(ids)] + ids))
                lines.append("plain " + " ".join(str(x) for x in [len(plain)] + plain))
                continue
            try:
                ids = self.post("/tokenize", {"content": text, "add_special": True})["tokens"]
                plain = self.post("/tokenize", {"content": text, "add_special": False})["tokens"]
            except Exception as e:
                raise RuntimeError(f"/tokenize {text!r}: {e}") from e
            lines.append(f"text {text.encode().hex()}")
            lines.append("ids " + " ".join(str(x) for x in [len(ids)] + ids))
            lines.append("plain " + " ".join(str(x) for x in [len(plain)] + plain))
        return lines

    def log_tail(self, n=3000):
        if not self.logf.closed:
            self.logf.flush()
        with open(self.log, errors="replace") as f:
            return f.read()[-n:]

    def stop(self):
        """Stops this server (its PID only), killing it if it does not exit in 20 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.logf.closed:
            self.logf.close()

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is not None:
            sys.stderr.write(self.log_tail())
        self.stop()
        return False
