/* gen_gguf_seeds.c: writes the small GGUF seeds of tests/fuzz/corpus/fuzz_gguf/ with the
 * GGUF writer: a complete tiny Llama model (F32, SentencePiece vocabulary), a byte-level
 * BPE vocabulary-only file, a file of every metadata type with F16/Q8_0/Q4_0/BF16
 * tensors, and a file with a two-row tensor of every quantized type.
 * Usage: gen_gguf_seeds OUT_DIR */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant.h"
#include "tiny_gguf.h"

static int finish(gguf_writer *w, const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ts_error err = {0};
    ts_status st = gguf_writer_write_file(w, path, &err);
    gguf_writer_free(w);
    if (st != TS_OK)
        fprintf(stderr, "gen_gguf_seeds: %s: %s\n", path, err.msg);
    return st == TS_OK ? 0 : 1;
}

/* tiny_gguf.h's model, with the metadata a converted model carries besides. */
static int tiny_model(const char *dir)
{
    gguf_writer *w;
    if (gguf_writer_create(0, &w, NULL) != TS_OK)
        return 1;
    tiny_gguf_add_llama(w, &tiny_honest);
    gguf_writer_add_str(w, "general.name", "fuzz-tiny");
    gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_writer_add_f32(w, "llama.rope.freq_base", 10000.0f);
    gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
    gguf_writer_add_str(w, "tokenizer.chat_template",
                        "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}");
    return finish(w, dir, "tiny-llama");
}

/* GPT-2 style: the 256 byte stand-ins would be large; a handful of tokens and merges. */
static int bpe_vocab(const char *dir)
{
    gguf_writer *w;
    if (gguf_writer_create(0, &w, NULL) != TS_OK)
        return 1;
    gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_str(w, "tokenizer.ggml.pre", "gpt-2");
    const char *tokens[9] = {"a", "b", "\xc4\xa0", "ab", "\xc4\xa0\x61" /* "Ġa" */,
                             "<|endoftext|>", "c", "\xc4\x8a", "bc"};
    int32_t types[9] = {1, 1, 1, 1, 1, 3, 1, 1, 1};
    const char *merges[2] = {"a b", "\xc4\xa0 a"};
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", tokens, NULL, 9);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 9);
    gguf_writer_add_str_array(w, "tokenizer.ggml.merges", merges, NULL, 2);
    gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 5);
    gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 5);
    return finish(w, dir, "bpe-vocab");
}

/* Every metadata value type, a nested array, and tensors of each dequantised type. */
static int all_types(const char *dir)
{
    gguf_writer *w;
    if (gguf_writer_create(64, &w, NULL) != TS_OK)
        return 1;
    gguf_writer_add_u32(w, "general.alignment", 64);
    gguf_writer_add_i32(w, "t.i32", -7);
    gguf_writer_add_f32(w, "t.f32", 0.5f);
    gguf_writer_add_bool(w, "t.bool", false);
    gguf_writer_add_str(w, "t.str", "caf\xc3\xa9");
    uint8_t u8[3] = {1, 2, 255};
    int16_t i16[2] = {-1, 300};
    uint64_t u64[2] = {1, UINT64_MAX};
    double f64[2] = {1.5, -2.25};
    gguf_writer_add_array(w, "t.u8s", GGUF_TYPE_UINT8, u8, 3);
    gguf_writer_add_array(w, "t.i16s", GGUF_TYPE_INT16, i16, 2);
    gguf_writer_add_array(w, "t.u64s", GGUF_TYPE_UINT64, u64, 2);
    gguf_writer_add_array(w, "t.f64s", GGUF_TYPE_FLOAT64, f64, 2);
    /* [[1, 2], [3]] as uint32: ARRAY of ARRAY, encoded by hand. */
    static const uint8_t nested[] = {
        9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,                         /* 2 arrays: */
        4, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, /* UINT32 [1, 2] */
        4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0};            /* UINT32 [3] */
    gguf_writer_add_raw(w, "t.nested", GGUF_TYPE_ARRAY, nested, sizeof nested);
    uint64_t ne[2] = {32, 2};
    uint16_t f16[64];
    for (int i = 0; i < 64; i++)
        f16[i] = gguf_f32_to_f16((float)i / 8);
    gguf_writer_add_tensor(w, "t.f16", GGUF_TENSOR_F16, 2, ne, f16, sizeof f16);
    gguf_writer_add_tensor(w, "t.bf16", GGUF_TENSOR_BF16, 2, ne, f16, sizeof f16);
    uint8_t q8[2 * 34], q4[2 * 18];
    for (size_t i = 0; i < sizeof q8; i++)
        q8[i] = (uint8_t)(i * 7);
    for (size_t i = 0; i < sizeof q4; i++)
        q4[i] = (uint8_t)(i * 13);
    q8[0] = q8[1] = q8[34] = q8[35] = 0x3c; /* f16 scales */
    q4[0] = q4[1] = q4[18] = q4[19] = 0x3c;
    gguf_writer_add_tensor(w, "t.q8_0", GGUF_TENSOR_Q8_0, 2, ne, q8, sizeof q8);
    gguf_writer_add_tensor(w, "t.q4_0", GGUF_TENSOR_Q4_0, 2, ne, q4, sizeof q4);
    return finish(w, dir, "all-types");
}

/* Stores f as the half at byte offset off of every block of a tensor. */
static void put_half(uint8_t *p, size_t n_blocks, size_t block_bytes, size_t off, float f)
{
    uint16_t h = gguf_f32_to_f16(f);
    for (size_t b = 0; b < n_blocks; b++)
        memcpy(p + b * block_bytes + off, &h, sizeof h);
}

/* Two rows of one block of each quantized type: pseudo-random quants, small scales. */
static int quant_types(const char *dir)
{
    static const uint32_t types[] = {QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1, QT_Q8_0,
                                     QT_IQ4_NL, QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K,
                                     QT_Q6_K, QT_IQ4_XS};
    static uint8_t data[sizeof types / sizeof types[0]][2 * sizeof(qb_q6_k)];
    gguf_writer *w;
    if (gguf_writer_create(0, &w, NULL) != TS_OK)
        return 1;
    uint32_t seed = 12345;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const qtype_info *t = qtype_get(types[i]);
        uint8_t *p = data[i];
        for (size_t k = 0; k < 2 * t->block_bytes; k++)
            p[k] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 16);
        size_t off_d = 0, off_m = 0; /* the block's scale halves (off_m 0: none) */
        switch (types[i]) {
        case QT_Q4_1: case QT_Q5_1: off_m = 2; break;
        case QT_Q4_K: case QT_Q5_K: off_m = 2; break;
        case QT_Q2_K: off_d = offsetof(qb_q2_k, d), off_m = offsetof(qb_q2_k, dmin); break;
        case QT_Q3_K: off_d = offsetof(qb_q3_k, d); break;
        case QT_Q6_K: off_d = offsetof(qb_q6_k, d); break;
        default: break;
        }
        put_half(p, 2, t->block_bytes, off_d, 0.0625f);
        if (off_m)
            put_half(p, 2, t->block_bytes, off_m, 0.03125f);
        char name[32];
        snprintf(name, sizeof name, "t.%s", t->name);
        uint64_t ne[2] = {t->block_elems, 2};
        gguf_writer_add_tensor(w, name, types[i], 2, ne, p, 2 * t->block_bytes);
    }
    return finish(w, dir, "quant-types");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_gguf_seeds OUT_DIR\n");
        return 2;
    }
    return tiny_model(argv[1]) | bpe_vocab(argv[1]) | all_types(argv[1]) | quant_types(argv[1]);
}
