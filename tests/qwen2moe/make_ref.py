#!/usr/bin/env python3
"""make_ref.py: writes qwen2moe_ref.txt, the llama.cpp peer's greedy tokens and top-5
probabilities on tiny qwen2moe models (routed experts without renormalisation, a
sigmoid-gated shared expert, Q/K/V biases), which test_model_qwen2moe.c compares tessera's
with. There is no reference file of this family in ../shared, so the models are tessera's
own synth output with peaked weights (--peaked: the logits spread widely, so greedy text
has clear margins), made by the same arguments the test gives model_synth_write_with():

    tessera synth --shape qwen2moe-a2.7b --tiny --peaked --seed SEED --type TYPE
                  --vocab ../shared/models/stories260K/stories260K.gguf

The file's sha256 goes into the reference: the test checks that it makes the same bytes.

usage: make_ref.py TESSERA_BINARY PEER_DIR OUT.txt
  PEER_DIR holds llama-server and llama-completion (../shared/peers/llama.cpp-3f545be.tar.xz).

For each type and prompt (../shared/reference/stories260K-greedy/0N.prompt), llama-server
(127.0.0.1, one thread, stopped by its PID) tokenizes the prompt with BOS and generates
N_PREDICT tokens greedily (temperature 0) with the top N_PROBS probabilities of the full
softmax at each step (post_sampling_probs false); llama-completion's greedy text of the
same prompt must equal the server's, or the script stops. Output lines:
    model TYPE SEED SHA256
    prompt TYPE NN N id_1 .. id_N                 (BOS included)
    output TYPE NN N id_1 .. id_N                 (the greedy continuation)
    top TYPE NN I id p id p ...                   (before output token I: the top N_PROBS)
"""
import hashlib
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peer_server import PeerServer  # noqa: E402  (tests/peer_server.py)

SHAPE = "qwen2moe-a2.7b"
SEED = 5
TYPES = ["F32", "Q8_0"]
N_PREDICT = 32
N_PROBS = 5
HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared"))
VOCAB = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
PROMPTS = [("01", os.path.join(SHARED, "reference", "stories260K-greedy", "01.prompt")),
           ("02", os.path.join(SHARED, "reference", "stories260K-greedy", "02.prompt"))]


def completion_text(peer, model, prompt_file):
    """llama-completion's greedy continuation (its stdout less the closing blank line)."""
    for _ in range(8):  # its asynchronous logger sometimes cuts stdout short under load
        p = subprocess.run([os.path.join(peer, "llama-completion"), "-m", model, "-f", prompt_file,
                            "-n", str(N_PREDICT), "--temp", "0", "-no-cnv", "--no-display-prompt",
                            "--no-escape", "-c", "256", "-t", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        if p.returncode != 0:
            raise RuntimeError("llama-completion failed: " + p.stderr.decode(errors="replace")[-2000:])
        if p.stdout.endswith(b"\n\n"):
            return p.stdout[:-2]
    raise RuntimeError("llama-completion's stdout always cut short")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    tessera, peer, out = sys.argv[1:]
    lines = ["# made by tests/qwen2moe/make_ref.py with llama.cpp 3f545be (see its docstring)"]
    with tempfile.TemporaryDirectory() as tmp:
        for typ in TYPES:
            model = os.path.join(tmp, "qwen2moe-%s.gguf" % typ)
            subprocess.run([tessera, "synth", "--shape", SHAPE, "--tiny", "--peaked", "--seed",
                            str(SEED), "--type", typ, "--vocab", VOCAB, "-o", model], check=True)
            sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
            lines.append("model %s %d %s" % (typ, SEED, sha))
            with PeerServer(os.path.join(peer, "llama-server"), model,
                            os.path.join(tmp, "server-%s.log" % typ),
                            ["-c", "256", "--no-webui"]) as srv:
                for nn, pf in PROMPTS:
                    text = open(pf, encoding="utf-8").read()
                    ids = srv.post("/tokenize", {"content": text, "add_special": True})["tokens"]
                    r = srv.post("/completion", {"prompt": ids, "n_predict": N_PREDICT,
                                                 "n_probs": N_PROBS, "temperature": 0,
                                                 "cache_prompt": False, "return_tokens": True,
                                                 "post_sampling_probs": False})
                    got = r["tokens"]
                    want = completion_text(peer, model, pf)
                    if r["content"].encode() != want:
                        raise RuntimeError("%s %s: llama-server's text %r differs from "
                                           "llama-completion's %r" % (typ, nn, r["content"], want))
                    lines.append("prompt %s %s %d %s" % (typ, nn, len(ids), " ".join(map(str, ids))))
                    lines.append("output %s %s %d %s" % (typ, nn, len(got), " ".join(map(str, got))))
                    for i, step in enumerate(r["completion_probabilities"]):
                        top = " ".join("%d %.6f" % (t["id"], math.exp(t["logprob"]))
                                       for t in step["top_logprobs"])
                        lines.append("top %s %s %d %s" % (typ, nn, i, top))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
