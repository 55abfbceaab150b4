#!/usr/bin/env python3
"""make_ref.py: writes tiny_ref.txt, the llama.cpp peer's embeddings of tiny
random-weight embedding models of several families, which test_embed.c compares
tessera's with; with `encoders` as a fifth argument, encoder_ref.txt, the same for
the encoder families (bert, nomic-bert), which test_embed_encoder.c reads.

usage: make_ref.py TESSERA_BINARY LLAMA_SERVER_BINARY SHARED_DIR OUT.txt [encoders|rerank]

With `rerank`, rerank_ref.txt: the peer's /v1/rerank scores (llama-server --reranking) of
a tiny bge-reranker-base (a bert file with a classification head), F32 and Q8_0, for
RERANK_QUERY and RERANK_DOCUMENTS; test_server_rerank_encoder.c reads it. Lines:
    model NAME
    score INDEX VALUE

For the encoders, the peer is also asked for every input in one request (a batch),
and its batched vectors must match its single ones (cosine 0.99999).

For each model of MODELS (qwen3 with each pooling, last again in Q8_0, and mean pooling
on the other families) it makes the file with `tessera synth --shape SHAPE --tiny
--pooling P --type T --vocab SHARED/models/stories260K/stories260K.gguf --seed 1` (the
bytes test_embed.c makes again with model_synth_write), starts llama-server --embedding
on it and asks /v1/embeddings for each input of token ids. Output lines:
    model POOLING
    input N id_1 ... id_N
    vector D v_1 ... v_D
"""
import os, subprocess, sys, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peer_server import PeerServer  # noqa: E402  (tests/peer_server.py)

# name, synth shape, pooling, type
MODELS = [
    ("last", "qwen3-4b", "last", "F32"),
    ("mean", "qwen3-4b", "mean", "F32"),
    ("cls", "qwen3-4b", "cls", "F32"),
    ("last-q8_0", "qwen3-4b", "last", "Q8_0"),
    ("gemma3-mean", "gemma3-4b", "mean", "F32"),
    ("gemma2-mean", "gemma2-9b", "mean", "F32"),
    ("qwen2-mean", "qwen2.5-7b", "mean", "F32"),
    ("llama-mean", "tinyllama-1.1b", "mean", "F32"),
]

# the encoders: BERT (bge-small's shape) with mean and CLS pooling, nomic-bert
ENCODERS = [
    ("bert-mean", "bge-small", "mean", "F32"),
    ("bert-cls", "bge-small", "cls", "F32"),
    ("bert-cls-q8_0", "bge-small", "cls", "Q8_0"),
    ("bert-mean-f16", "bge-small", "mean", "F16"),
    ("nomic-mean", "nomic-embed-text", "mean", "F32"),
    ("nomic-mean-q8_0", "nomic-embed-text", "mean", "Q8_0"),
    ("nomic-cls-f16", "nomic-embed-text", "cls", "F16"),
]

RERANKERS = [("rerank", "F32"), ("rerank-q8_0", "Q8_0")]
RERANK_QUERY = "Where did the dog run?"
RERANK_DOCUMENTS = ["The dog ran to the park.", "Lily ate a red apple.",
                    "A cat slept on the mat.", "The dog ran home fast.",
                    "Once upon a time there was a little girl named Lily."]

def rerank_lines(peer, name):
    """The peer's scores of the documents, by index."""
    body = {"query": RERANK_QUERY, "documents": RERANK_DOCUMENTS}
    results = sorted(peer.post("/v1/rerank", body)["results"], key=lambda r: r["index"])
    assert len(results) == len(RERANK_DOCUMENTS)
    return [f"model {name}"] + [f"score {r['index']} %.8g" % r["relevance_score"] for r in results]

def inputs():
    """Token-id inputs of 1, 7, 33 (past one KV block) and 90 tokens, from a fixed LCG."""
    x, out = 12345, []
    for n in (1, 7, 33, 90):
        ids = []
        for _ in range(n):
            x = (x * 1103515245 + 12345) % (1 << 31)
            ids.append(3 + x % 509)
        out.append(ids)
    return out

def embed(peer, inp):
    """The peer's vectors of inp (token ids, or a list of them), in order."""
    data = peer.post("/v1/embeddings", {"input": inp})["data"]
    return [d["embedding"] for d in sorted(data, key=lambda d: d["index"])]

def main():
    tessera, server, shared, out_path = sys.argv[1:5]
    mode = sys.argv[5] if len(sys.argv) > 5 else "decoders"
    encoders = mode == "encoders"
    vocab = os.path.join(shared, "models/stories260K/stories260K.gguf")
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        models = ([(n, "bge-reranker-base", "rank", t) for n, t in RERANKERS] if mode == "rerank"
                  else ENCODERS if encoders else MODELS)
        for name, shape, pooling, qtype in models:
            model = os.path.join(tmp, f"{name}.gguf")
            subprocess.run([tessera, "synth", "--shape", shape, "--tiny", "--pooling", pooling,
                            "--type", qtype, "--vocab", vocab, "--seed", "1", "-o", model],
                           check=True)
            mode_flag = "--reranking" if mode == "rerank" else "--embedding"
            with PeerServer(server, model, os.path.join(tmp, "peer.log"),
                            [mode_flag, "-c", "256"]) as peer:
                if mode == "rerank":
                    lines += rerank_lines(peer, name)
                    continue
                lines.append(f"model {name}")
                singles = []
                for ids in inputs():
                    vec = embed(peer, ids)[0]
                    singles.append(vec)
                    lines.append(f"input {len(ids)} " + " ".join(map(str, ids)))
                    lines.append(f"vector {len(vec)} " + " ".join("%.8g" % v for v in vec))
                if encoders:
                    for a, b in zip(singles, embed(peer, inputs())):
                        cos = sum(x * y for x, y in zip(a, b))
                        assert cos > 0.99999, (name, cos)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")

main()
