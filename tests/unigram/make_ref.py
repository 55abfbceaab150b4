#!/usr/bin/env python3
"""make_ref.py: writes ugm_ref.txt, the llama.cpp peer's Unigram (t5) token ids for a small
vocabulary, which test_tokenizer_ugm.c compares tessera's with.

usage: make_ref.py TESSERA_BINARY LLAMA_SERVER_BINARY OUT.txt

The vocabulary (512 pieces with log-probability scores: <s> <pad> </s> <unk>, a
user-defined and an unused token, single characters, '▁'-prefixed words, subword pieces,
accented, CJK and emoji pieces) is written as a vocabulary-only GGUF; `tessera synth --tiny
--shape bge-small --vocab` copies it, through tessera's GGUF writer, into a tiny bert model
that llama-server can load; /tokenize, with add_special and without, then gives the ids of
each text of TEXTS under each configuration of CONFIGS (add_space_prefix,
remove_extra_whitespaces, and a small precompiled charsmap or none). Output lines, strings as hex of their UTF-8 bytes:
    token HEX TYPE SCORE   (one per token, in id order; SCORE the float32's bits in hex)
    config ADD_SPACE_PREFIX REMOVE_EXTRA_WHITESPACES CHARSMAP_HEX_or_-
    text HEX
    ids N id_1 ... id_N     (/tokenize with add_special)
    plain N id_1 ... id_N   (the same without add_special)
"""
import os, random, struct, subprocess, sys, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peer_server import PeerServer  # noqa: E402  (tests/peer_server.py)

N_VOCAB = 512
TYPE_NORMAL, TYPE_CONTROL, TYPE_USER, TYPE_UNUSED = 1, 3, 4, 5
SP = "\u2581"
CHARS = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") +
         list(".,!?;:'\"()-/") + ["é", "è", "ü", "ñ", "ç", "ß", "ö", "à", "中", "文", "日",
                                  "本", "語", "你", "好", "😀", "\u0301", "€", "α", "β"])
WORDS = ("the a an is was it of to and in on for with he she they we you i this that hello "
         "world token tokenizer tokenization embed embedding embeddings rerank model quick "
         "brown fox jumps over lazy dog café résumé naïve über straße zürich niño garçon "
         "中文 日本語 你好 new york city don can not 2024 100 10 1 multi lingual fi "
         "ab abc abcd er ing ed ly tion s es un re pre super cal").split()
SUBWORDS = ["ing", "ed", "er", "ly", "tion", "s", "es", "ation", "ize", "izer", "ization",
            "ding", "dings", "bed", "ank", "el", "lo", "orld", "ok", "en", "中文", "本語",
            "é", "ée", "😀😀", "ll", "he", "th", "qu", "ick"]
CONFIGS = [(1, 1, True), (1, 0, False), (0, 0, False), (1, 0, True)]

TEXTS = [
    "", " ", "  ", "   \t\n  ", "a", "hello", "hello world", "Hello World", "HELLO WORLD",
    " hello", "hello ", "  hello   world  ", "hello\tworld", "hello\nworld", "hello\r\nworld",
    "the quick brown fox jumps over the lazy dog", "tokenization tokenizer tokenized",
    "embeddings rerank multilingual", "unbelievable superstring", "preheated",
    "café résumé naïve", "über straße zürich", "niño garçon", "cafe\u0301 re\u0301sume\u0301",
    "CAFÉ", "crème brûlée", "中文", "日本語", "你好世界", "hello中文world", "中 文 日本",
    "漢字かな", "😀", "emoji 😀 here 😀😀", "😀😀😀", "💥🔥", "€100", "α β γ", "αβγδ",
    "ΑΒΓ", "Привет мир", "مرحبا", "שלום", "नमस्ते", "한국어", "zzzz", "qqq xxx",
    "\u200bzero\u200bwidth", "a\u00a0b", "a\u3000b", "Ｆｕｌｌｗｉｄｔｈ", "ﬁne ﬂow",
    "①②③", "½ ¼", "x²", "\u2126", "[USR]", "hello [USR] world", "[USR][USR]",
    "<s> hello </s>", "<unk>", "<pad>", "don't can't", "(hello) [world] {x}", "a+b=c",
    "1 10 100 2024", "12345678901234567890", "new york city", "New York City",
    "hello, world! how are you?", "...", "!!!", "-- --", "a-b-c", "a/b\\c", "@home #tag",
    "x" * 200, "ab" * 50, "hello " * 30, "\x07bell", "nul\x00byte", "\xff", "a\u0301",
    "\u0301", "e\u0301\u0301", "tab\t\ttab", "\n\n\n", "mixed123abc", "ÀÉÎÕÜ", "àéîõü",
    "Ελληνικά", "ÿ", "\U0001F600\U0001F601", "\U00010348", "\ufeffbom", "\ufffd",
    "ok ok ok", "superlongwordwithoutanyspacesatallreally", "the the the", "i", "I",
    "lo el lo", "ding dings embedding", "résumé résumés",
]


def vocab():
    toks = [("<s>", TYPE_CONTROL), ("<pad>", TYPE_CONTROL), ("</s>", TYPE_CONTROL),
            ("<unk>", 2), ("[USR]", TYPE_USER), ("<unused0>", TYPE_UNUSED)]
    seen = {t for t, _ in toks}
    pieces = ([SP] + CHARS + [SP + w for w in WORDS] + SUBWORDS + [SP + c for c in CHARS[:40]])
    for p in pieces:
        if p not in seen:
            seen.add(p)
            toks.append((p, TYPE_NORMAL))
    rng = random.Random(7)
    letters = "abcdefghilmnoprstuvz"
    while len(toks) < N_VOCAB:
        p = "".join(rng.choice(letters) for _ in range(rng.randint(2, 5)))
        if rng.random() < 0.5:
            p = SP + p
        if p not in seen:
            seen.add(p)
            toks.append((p, TYPE_NORMAL))
    out = []
    for t, ty in toks:
        if ty != TYPE_NORMAL:
            score = 0.0
        else:
            n = len(t.replace(SP, "x"))
            score = -12.0 + 1.7 * n + rng.uniform(-1.5, 1.5) if n > 1 else rng.uniform(-9.0, -6.0)
            score = -0.5 if score > -0.5 else score
        score = struct.unpack("<f", struct.pack("<f", score))[0]
        out.append((t, ty, score))
    return out


def charsmap():
    """A precompiled charsmap (SentencePiece's: a u32 size, the XOR-compressed double array,
    the NUL-terminated replacements) of a few NFKC-like rules, built from a byte trie."""
    rules = {"Ａ": "A", "ｕ": "u", "Ｆ": "F", "ｌ": "l", "ｗ": "w", "ｉ": "i", "ｄ": "d",
             "ｔ": "t", "ｈ": "h", "ﬁ": "fi", "ﬂ": "fl", "①": "1", "②": "2", "③": "3",
             "½": "1/2", "\u3000": " ", "\t": " ", "\n": " ", "\r": "", "\u200b": "",
             "e\u0301": "é", "a\u0301": "á", "\u00a0": " ", "x²": "x2", "\u2126": "Ω",
             "ÀÉ": "AE"}
    strings, offset = b"", {}
    for k, v in sorted(rules.items()):
        offset[k] = len(strings)
        strings += v.encode() + b"\0"
    trie = {}
    for k in rules:
        node = trie
        for b in k.encode():
            node = node.setdefault(b, {})
        node[None] = offset[k]
    used, entries = {0}, {}
    def place(node):
        kids = [c for c in node if c is not None]
        x = 1
        while (x in used or any((x ^ c) in used for c in kids)):
            x += 1
        used.add(x)  # the value slot (child 0) or reserved
        for c in kids:
            used.add(x ^ c)
        if None in node:
            entries[x] = (1 << 31) | node[None]
        for c in kids:
            cx = place(node[c])
            leaf = 1 if None in node[c] else 0
            entries[x ^ c] = ((x ^ c ^ cx) << 10) | (leaf << 8) | c
        return x
    root = place(trie)
    entries[0] = root << 10
    size = (max(max(entries), max(used)) | 255) + 1  # every BASE ^ byte stays inside, as in
    assert size < (1 << 21)                          # SentencePiece's arrays of 256-entry blocks
    blob = b"".join(struct.pack("<I", entries.get(i, 0)) for i in range(size))
    return struct.pack("<I", len(blob)) + blob + strings


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


def write_vocab(path, toks, prefix, remove_ws, cmap):
    n = len(toks)
    meta = [
        kv("tokenizer.ggml.model", 8, gstr("t5")),
        kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, n) + b"".join(gstr(t) for t, _, _ in toks)),
        kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, n) +
           b"".join(struct.pack("<f", s) for _, _, s in toks)),
        kv("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, n) +
           b"".join(struct.pack("<i", ty) for _, ty, _ in toks)),
        kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 0)),
        kv("tokenizer.ggml.padding_token_id", 4, struct.pack("<I", 1)),
        kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 2)),
        kv("tokenizer.ggml.unknown_token_id", 4, struct.pack("<I", 3)),
        kv("tokenizer.ggml.add_bos_token", 7, struct.pack("<B", 1)),
        kv("tokenizer.ggml.add_eos_token", 7, struct.pack("<B", 1)),
        kv("tokenizer.ggml.add_space_prefix", 7, struct.pack("<B", prefix)),
        kv("tokenizer.ggml.remove_extra_whitespaces", 7, struct.pack("<B", remove_ws)),
    ]
    if cmap:
        meta.append(kv("tokenizer.ggml.precompiled_charsmap", 9,
                       struct.pack("<IQ", 0, len(cmap)) + cmap))
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta)) + b"".join(meta))


def peer_ids(tessera, server, tmp, toks, prefix, remove_ws, cmap):
    vpath, model = os.path.join(tmp, "vocab.gguf"), os.path.join(tmp, "bert.gguf")
    write_vocab(vpath, toks, prefix, remove_ws, cmap)
    subprocess.run([tessera, "synth", "--tiny", "--shape", "bge-small", "--vocab", vpath,
                    "-o", model], check=True, stdout=subprocess.DEVNULL)
    with PeerServer(server, model, os.path.join(tmp, "log"),
                    ["--embedding", "-c", "512"]) as peer:
        return peer.tokenize_lines(TEXTS)


def main():
    tessera, server, out_path = sys.argv[1:4]
    toks = vocab()
    cmap = charsmap()
    lines = [f"token {t.encode().hex()} {ty} {struct.unpack('<I', struct.pack('<f', s))[0]:08x}"
             for t, ty, s in toks]
    with tempfile.TemporaryDirectory() as tmp:
        for prefix, remove_ws, with_map in CONFIGS:
            m = cmap if with_map else b""
            lines.append(f"config {prefix} {remove_ws} {m.hex() if m else '-'}")
            lines += peer_ids(tessera, server, tmp, toks, prefix, remove_ws, m)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
