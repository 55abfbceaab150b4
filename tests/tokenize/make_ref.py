#!/usr/bin/env python3
"""make_ref.py: writes eos_ref.txt, the llama.cpp peer's /tokenize ids for a SentencePiece
and a byte-level BPE vocabulary whose GGUF asks for EOS after a text, which
test_server_compat.c compares tessera's /tokenize and `tessera tokenize` with.

usage: make_ref.py LLAMA_SERVER_BINARY SPM_MODEL.gguf BPE_MODEL.gguf OUT.txt

SPM_MODEL is ../shared's stories260K.gguf (a `llama` vocabulary of 512 tokens), BPE_MODEL
the archref qwen2-f32.gguf (a `gpt2` vocabulary, pre-tokenizer qwen2, 4096 tokens). Each
is copied with tokenizer.ggml.add_eos_token set true (its other keys, tensors and data
unchanged), served by llama-server, and /tokenize gives the ids of each text of TEXTS
with add_special and without, and so do the mixed arrays of CONTENTS. Output lines,
strings as hex of their UTF-8 bytes:
    vocab NAME              (spm or bpe; the texts below are under it)
    text HEX
    content HEX             (instead of text: a CONTENTS array, as JSON)
    ids N id_1 ... id_N     (/tokenize with add_special: BOS where the file says, EOS)
    plain N id_1 ... id_N   (the same without add_special)
"""
import os, struct, sys, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peer_server import PeerServer  # noqa: E402  (tests/peer_server.py)

TEXTS = ["", " ", "Hello world", "Once upon a time, there was a little girl.",
         " leading space", "two  spaces\nand a line", "caf\u00e9 \u00fcber \u4e2d\u6587 \U0001F600",
         "<s> text between </s> specials", "</s>", "123 4567 89"]
# llama.cpp's mixed "content" arrays: add_special applies to the first part only, and only
# when it is a string; ids are kept as given
CONTENTS = [["Hello world", 7, " and more"], [7, "Hello world"], [], ["</s>", 2, "x"]]

SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B",
          10: "<Q", 11: "<q", 12: "<d"}


def read_value(b, off, vtype):
    """The end offset of the value of type vtype at off."""
    if vtype in SCALAR:
        return off + struct.calcsize(SCALAR[vtype])
    if vtype == 8:
        (n,) = struct.unpack_from("<Q", b, off)
        return off + 8 + n
    assert vtype == 9, vtype
    etype, n = struct.unpack_from("<IQ", b, off)
    off += 12
    if etype in SCALAR:
        return off + n * struct.calcsize(SCALAR[etype])
    for _ in range(n):
        off = read_value(b, off, etype)
    return off


def with_add_eos(src, dst):
    """Copies GGUF src to dst with tokenizer.ggml.add_eos_token = true."""
    b = open(src, "rb").read()
    assert b[:4] == b"GGUF"
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", b, 4)
    off, kvs, align = 24, [], 32
    for _ in range(n_kv):
        start = off
        (klen,) = struct.unpack_from("<Q", b, off)
        key = b[off + 8:off + 8 + klen].decode()
        (vtype,) = struct.unpack_from("<I", b, off + 8 + klen)
        off = read_value(b, off + 12 + klen, vtype)
        if key == "general.alignment":
            (align,) = struct.unpack_from("<I", b, off - 4)
        if key != "tokenizer.ggml.add_eos_token":
            kvs.append(b[start:off])
    key = b"tokenizer.ggml.add_eos_token"
    kvs.append(struct.pack("<Q", len(key)) + key + struct.pack("<IB", 7, 1))
    infos_start = off
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", b, off)
        off += 8 + nlen
        (n_dims,) = struct.unpack_from("<I", b, off)
        off += 4 + 8 * n_dims + 4 + 8
    infos = b[infos_start:off]
    data = b[(off + align - 1) // align * align:]
    head = b"GGUF" + struct.pack("<IQQ", version, n_tensors, len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * ((-len(head)) % align)
    with open(dst, "wb") as f:
        f.write(head + data)


def peer_ids(server, model, tmp):
    with PeerServer(server, model, os.path.join(tmp, "log"), ["-c", "512"]) as peer:
        return peer.tokenize_lines(TEXTS + CONTENTS)


def main():
    server, spm, bpe, out_path = sys.argv[1:5]
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in (("spm", spm), ("bpe", bpe)):
            model = os.path.join(tmp, name + ".gguf")
            with_add_eos(src, model)
            lines.append(f"vocab {name}")
            lines += peer_ids(server, model, tmp)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
