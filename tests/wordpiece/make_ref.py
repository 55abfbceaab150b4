#!/usr/bin/env python3
"""make_ref.py: writes wpm_ref.txt, the llama.cpp peer's WordPiece token ids for a small
BERT vocabulary, which test_tokenizer_wpm.c compares tessera's with.

usage: make_ref.py LLAMA_SERVER_BINARY OUT.txt

The vocabulary (VOCAB below: [PAD] [UNK] [CLS] [SEP] [MASK], whole words, "##" pieces,
punctuation, CJK characters, accented words) goes, in llama.cpp's GGUF form ('▁' before
word-initial pieces, continuation pieces bare), into a tiny random-weight bert model that
llama-server can load (the peer has no vocabulary-only mode); /tokenize, with
add_special and without, then gives the ids of each text of TEXTS, under each normalizer
of CONFIGS (uncased: lowercase and accents folded; cased; cased with accents folded; and
uncased in a file whose add_bos_token and add_sep_token say false). Output lines, every
string as hex of its UTF-8 bytes:
    token HEX TYPE        (one per token, in id order; TYPE as tokenizer.ggml.token_type)
    config LOWERCASE STRIP_ACCENTS [ADD_BOS ADD_SEP]   (0 or 1 each; the flags only where
                          the file has those keys; the texts below are under it)
    text HEX
    ids N id_1 ... id_N     (/tokenize with add_special)
    plain N id_1 ... id_N   (the same without add_special)
"""
import os, random, struct, sys, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peer_server import PeerServer  # noqa: E402  (tests/peer_server.py)

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the a an is was it of to and in on for with he she they we you i this that hello "
         "world un ##believ ##able token ##izer ##ization ##s ##ed ##ing ##er ##ly play run "
         "walk ##ation nation cafe resume naive ##ive over fly ##ing em ##bed ##ding ##dings "
         "re ##rank word ##piece bert model quick brown fox jump ##ed lazy dog can ' t s "
         "don 1 2 3 4 5 ##0 ##1 ##2 10 100 year ##s x ##y ##z a ##b ##c ##d ##e ##f ##g ##h "
         "e ##i ##o ##u l ##l ##m ##n ##p ##r ##t ##v ##w ##k ##a straße ##ß über zurich "
         "co ##ol ##op ##ope ##oper ##operation super ##cal ##ifrag ##ilistic ##expi ##ali "
         "##docious long ##er ##est").split()
PUNCT = list(".,!?;:'\"()[]{}-_/\\@#$%^&*+=<>|~`") + ["¿", "¡", "—", "…", "«", "»", "·"]
CJK = list("中文字日本語漢你好世界人") + ["##中", "##文"]
ACCENTED = ["café", "naïve", "résumé", "élan", "##é", "ñ", "ü", "Hello", "World", "Café",
            "##ÉS", "É"]
TYPE_NORMAL, TYPE_CONTROL = 1, 3
# (tokenizer.ggml.normalizer.lowercase, .strip_accents, and tokenizer.ggml.add_bos_token
# and .add_sep_token both; None = key absent)
CONFIGS = [(1, None, None), (0, None, None), (0, 1, None), (1, None, 0)]

TEXTS = [
    "", " ", "   \t\n  ", "hello world", "Hello, World!", "HELLO WORLD",
    "unbelievable tokenization", "Tokenizers tokenize tokenized tokens",
    "Café résumé naïve élan", "CAFÉ ÜBER Straße Zürich", "crème brûlée",
    "中文字 日本語", "你好世界人", "hello中文world", "漢字かな",
    "don't can't it's", "(quick) [brown] {fox} <lazy> dog...", "a+b=c; x*y/z",
    "¿qué? ¡sí! — «quotes» …", "supercalifragilisticexpialidocious",
    "cooperation cooperations", "zzzzzz qqq", "hello zzz world", "embeddings rerank wordpiece",
    "1 12 100 1000 2024", "a\u00a0b\u2003c", "tab\tseparated\nlines\r\nhere",
    "walking jumped flying", "ΑΒΓ αβγ", "emoji 😀 here", "x" * 300,
    "[CLS] hello [SEP]", "hello [MASK] world", "the\u0301 e\u0301", "\u200bzero\u200bwidth",
    "control\x07char", "mixed123abc", "long longer longest longerest",
]


def vocab():
    toks = [(s, TYPE_CONTROL) for s in SPECIAL]
    seen = set(SPECIAL)
    for w in WORDS + PUNCT + CJK + ACCENTED:
        g = w[2:] if w.startswith("##") else "\u2581" + w
        if g not in seen:
            seen.add(g)
            toks.append((g, TYPE_NORMAL))
    return toks


# ---- a minimal GGUF v3 writer (F32 tensors only)
def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


def write_model(path, toks, lowercase, strip, flags=None):
    n_embd, n_ff, n_ctx, n_vocab = 8, 16, 512, len(toks)
    meta = [
        kv("general.architecture", 8, gstr("bert")),
        kv("bert.context_length", 4, struct.pack("<I", n_ctx)),
        kv("bert.embedding_length", 4, struct.pack("<I", n_embd)),
        kv("bert.feed_forward_length", 4, struct.pack("<I", n_ff)),
        kv("bert.block_count", 4, struct.pack("<I", 1)),
        kv("bert.attention.head_count", 4, struct.pack("<I", 2)),
        kv("bert.attention.layer_norm_epsilon", 6, struct.pack("<f", 1e-12)),
        kv("bert.attention.causal", 7, struct.pack("<B", 0)),
        kv("bert.pooling_type", 4, struct.pack("<I", 1)),
        kv("tokenizer.ggml.model", 8, gstr("bert")),
        kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, n_vocab) +
           b"".join(gstr(t) for t, _ in toks)),
        kv("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, n_vocab) +
           b"".join(struct.pack("<i", ty) for _, ty in toks)),
        kv("tokenizer.ggml.token_type_count", 4, struct.pack("<I", 2)),
        kv("tokenizer.ggml.padding_token_id", 4, struct.pack("<I", 0)),
        kv("tokenizer.ggml.unknown_token_id", 4, struct.pack("<I", 1)),
        kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 2)),
        kv("tokenizer.ggml.seperator_token_id", 4, struct.pack("<I", 3)),
        kv("tokenizer.ggml.mask_token_id", 4, struct.pack("<I", 4)),
        kv("tokenizer.ggml.normalizer.lowercase", 7, struct.pack("<B", lowercase)),
    ]
    if strip is not None:
        meta.append(kv("tokenizer.ggml.normalizer.strip_accents", 7, struct.pack("<B", strip)))
    if flags is not None:
        for key in ("add_bos_token", "add_sep_token"):
            meta.append(kv("tokenizer.ggml." + key, 7, struct.pack("<B", flags)))
    tensors = [("token_embd.weight", [n_embd, n_vocab]), ("token_types.weight", [n_embd, 2]),
               ("position_embd.weight", [n_embd, n_ctx]),
               ("token_embd_norm.weight", [n_embd]), ("token_embd_norm.bias", [n_embd])]
    for name, shape in [("attn_q", [n_embd, n_embd]), ("attn_k", [n_embd, n_embd]),
                        ("attn_v", [n_embd, n_embd]), ("attn_output", [n_embd, n_embd]),
                        ("attn_output_norm", [n_embd]), ("ffn_up", [n_embd, n_ff]),
                        ("ffn_down", [n_ff, n_embd]), ("layer_output_norm", [n_embd])]:
        tensors.append((f"blk.0.{name}.weight", shape))
        if name.endswith("norm"):
            tensors.append((f"blk.0.{name}.bias", shape))
    rng = random.Random(1)
    infos, data, off = b"", b"", 0
    for name, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        infos += gstr(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        infos += struct.pack("<IQ", 0, off)
        blob = b"".join(struct.pack("<f", rng.uniform(-0.1, 0.1)) for _ in range(n))
        blob += b"\0" * ((-len(blob)) % 32)
        data += blob
        off += len(blob)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta) + infos
    head += b"\0" * ((-len(head)) % 32)
    with open(path, "wb") as f:
        f.write(head + data)


def peer_ids(server, tmp, toks, lowercase, strip, flags):
    model = os.path.join(tmp, "bert.gguf")
    write_model(model, toks, lowercase, strip, flags)
    with PeerServer(server, model, os.path.join(tmp, "log"),
                    ["--embedding", "-c", "512"]) as peer:
        return peer.tokenize_lines(TEXTS)


def main():
    server, out_path = sys.argv[1:3]
    toks = vocab()
    lines = [f"token {t.encode().hex()} {ty}" for t, ty in toks]
    with tempfile.TemporaryDirectory() as tmp:
        for lowercase, strip, flags in CONFIGS:
            line = f"config {lowercase} {lowercase if strip is None else strip}"
            lines.append(line if flags is None else f"{line} {flags} {flags}")
            lines += peer_ids(server, tmp, toks, lowercase, strip, flags)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
