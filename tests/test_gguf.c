/* test_gguf.c: the GGUF reader, writer and dequantisers, on real files, round trips and
 * hand-built malformed files. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gguf/gguf.h"
#include "util.h"

/* ---- a byte builder for hand-made files ---- */

typedef struct bb {
    uint8_t data[4096];
    size_t len;
} bb;

static void bb_put(bb *b, const void *p, size_t n)
{
    assert_true(b->len + n <= sizeof b->data);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}
static void bb_u32(bb *b, uint32_t v) { bb_put(b, &v, 4); }
static void bb_u64(bb *b, uint64_t v) { bb_put(b, &v, 8); }
static void bb_str(bb *b, const char *s)
{
    bb_u64(b, strlen(s));
    bb_put(b, s, strlen(s));
}
static void bb_header(bb *b, uint64_t n_tensors, uint64_t n_kv)
{
    b->len = 0;
    bb_put(b, "GGUF", 4);
    bb_u32(b, 3);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}
static void bb_pad(bb *b, size_t align)
{
    while (b->len % align)
        bb_put(b, "", 1);
}
/* One tensor info of 1 or 2 dims. */
static void bb_tensor(bb *b, const char *name, uint32_t n_dims, uint64_t ne0, uint64_t ne1,
                      uint32_t type, uint64_t offset)
{
    bb_str(b, name);
    bb_u32(b, n_dims);
    bb_u64(b, ne0);
    if (n_dims > 1)
        bb_u64(b, ne1);
    bb_u32(b, type);
    bb_u64(b, offset);
}

/* Parses len bytes from an exact-size heap copy (so ASan sees any read past the end) and
 * returns the status; err gets the message. */
static ts_status parse_bytes(const uint8_t *data, size_t len, ts_error *err)
{
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, data, len);
    gguf_file *f = NULL;
    ts_status st = gguf_open_buffer(copy, len, &f, err);
    if (st == TS_OK)
        assert_non_null(f);
    else
        assert_null(f);
    gguf_close(f);
    free(copy);
    return st;
}

static void expect_error(const bb *b, ts_status want, const char *needle)
{
    ts_error err = {0};
    assert_int_equal(parse_bytes(b->data, b->len, &err), want);
    if (!strstr(err.msg, needle))
        fail_msg("error '%s' does not mention '%s'", err.msg, needle);
}

/* ---- real files ---- */

static void test_reads_stories260k(void **state)
{
    (void)state;
    gguf_file *f = NULL;
    ts_error err = {0};
    assert_int_equal(gguf_open(tu_shared("models/stories260K/stories260K.gguf"), &f, &err),
                     TS_OK);
    assert_int_equal(f->version, 3);
    assert_int_equal(f->alignment, 32);
    assert_int_equal(f->data_offset % 32, 0);
    gguf_str arch;
    assert_int_equal(gguf_get_str(f, "general.architecture", &arch, &err), TS_OK);
    assert_true(gguf_str_eq(arch, "llama"));
    int64_t dim = 0, layers = 0;
    assert_int_equal(gguf_get_i64(f, "llama.embedding_length", &dim, &err), TS_OK);
    assert_int_equal(gguf_get_i64(f, "llama.block_count", &layers, &err), TS_OK);
    assert_int_equal(dim, 64);
    assert_int_equal(layers, 5);
    const gguf_value *tokens;
    assert_int_equal(gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, &err),
                     TS_OK);
    assert_int_equal(tokens->v.arr.n, 512);
    assert_true(gguf_str_eq(gguf_array_str(tokens, 0), "<unk>"));
    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->type, GGUF_TENSOR_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->ne[1], 512);
    assert_int_equal(t->nbytes, 64 * 512 * 4);
    assert_non_null(gguf_find_tensor(f, "blk.4.ffn_down.weight"));
    assert_null(gguf_find_tensor(f, "blk.5.ffn_down.weight"));
    assert_null(gguf_find_kv(f, "llama.no_such_key"));
    /* Every tensor lies inside the file. */
    for (uint64_t i = 0; i < f->n_tensors; i++)
        assert_true(f->tensors[i].data + f->tensors[i].nbytes <= f->base + f->size);
    gguf_close(f);
}

static void test_reads_vocab_only_files(void **state)
{
    (void)state;
    static const char *const files[] = {"vocab/ggml-vocab-llama-spm.gguf",
                                        "vocab/ggml-vocab-gpt-2.gguf"};
    for (int i = 0; i < 2; i++) {
        gguf_file *f = NULL;
        ts_error err = {0};
        assert_int_equal(gguf_open(tu_shared(files[i]), &f, &err), TS_OK);
        assert_int_equal(f->n_tensors, 0);
        const gguf_value *tokens;
        assert_int_equal(gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens,
                                        &err), TS_OK);
        assert_true(tokens->v.arr.n >= 32000);
        gguf_close(f);
    }
}

static void test_open_errors(void **state)
{
    (void)state;
    gguf_file *f = (gguf_file *)1;
    ts_error err = {0};
    assert_int_equal(gguf_open(tu_tmp_path("missing.gguf"), &f, &err), TS_ERR_IO);
    assert_null(f);
    assert_non_null(strstr(err.msg, "missing.gguf"));
    /* A llama2.c checkpoint is not GGUF: the path and the reason are both named. */
    assert_int_equal(gguf_open(tu_shared("models/stories260K/stories260K.bin"), &f, &err),
                     TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "stories260K.bin"));
    assert_non_null(strstr(err.msg, "bad magic"));
    gguf_close(NULL);
}

/* ---- writer -> reader round trip ---- */

/* Encodes an array of n_outer arrays, each holding the uint32 values 0..i. */
static size_t encode_nested(uint8_t *out, uint64_t n_outer)
{
    bb b = {.len = 0};
    bb_u32(&b, GGUF_TYPE_ARRAY);
    bb_u64(&b, n_outer);
    for (uint64_t i = 0; i < n_outer; i++) {
        bb_u32(&b, GGUF_TYPE_UINT32);
        bb_u64(&b, i + 1);
        for (uint32_t j = 0; j <= i; j++)
            bb_u32(&b, j);
    }
    memcpy(out, b.data, b.len);
    return b.len;
}

static void test_round_trip_metadata_and_tensors(void **state)
{
    (void)state;
    gguf_writer *w = NULL;
    ts_error err = {0};
    assert_int_equal(gguf_writer_create(64, &w, &err), TS_OK);
    gguf_writer_add_u32(w, "t.u32", 4000000000u);
    gguf_writer_add_i32(w, "t.i32", -7);
    gguf_writer_add_f32(w, "t.f32", 0.25f);
    gguf_writer_add_bool(w, "t.bool", true);
    gguf_writer_add_str(w, "t.str", "héllo");
    uint64_t big = UINT64_MAX;
    gguf_writer_add_raw(w, "t.u64", GGUF_TYPE_UINT64, &big, 8);
    int8_t i8 = -3;
    gguf_writer_add_raw(w, "t.i8", GGUF_TYPE_INT8, &i8, 1);
    double f64 = 1e-300;
    gguf_writer_add_raw(w, "t.f64", GGUF_TYPE_FLOAT64, &f64, 8);
    const float scores[3] = {-1.5f, 0.0f, 2.5f};
    gguf_writer_add_array(w, "t.scores", GGUF_TYPE_FLOAT32, scores, 3);
    const char *const strs[2] = {"a b", ""};
    gguf_writer_add_str_array(w, "t.strs", strs, NULL, 2);
    uint8_t nested[512];
    size_t nested_len = encode_nested(nested, 3);
    gguf_writer_add_raw(w, "t.nested", GGUF_TYPE_ARRAY, nested, nested_len);

    /* One tensor per loadable type, each 2 rows of 32. */
    float ref[64];
    for (int i = 0; i < 64; i++)
        ref[i] = (float)(i - 31) / 8.0f; /* exact in f16, bf16, and as q8_0 multiples */
    uint16_t f16[64], bf16[64];
    uint8_t q8[2 * 34], q4[2 * 18];
    for (int i = 0; i < 64; i++) {
        f16[i] = gguf_f32_to_f16(ref[i]);
        uint32_t bits;
        memcpy(&bits, &ref[i], 4);
        bf16[i] = (uint16_t)(bits >> 16);
    }
    for (int blk = 0; blk < 2; blk++) {
        uint16_t d = gguf_f32_to_f16(0.125f); /* q8: value = d * q */
        memcpy(q8 + 34 * blk, &d, 2);
        for (int j = 0; j < 32; j++)
            q8[34 * blk + 2 + j] = (uint8_t)(int8_t)(ref[32 * blk + j] * 8.0f);
        uint16_t d4 = gguf_f32_to_f16(0.5f); /* q4: value = d * (nibble - 8) */
        memcpy(q4 + 18 * blk, &d4, 2);
        for (int j = 0; j < 16; j++)
            q4[18 * blk + 2 + j] = (uint8_t)(((j + blk) & 15) | ((15 - j) << 4));
    }
    const uint64_t ne[2] = {32, 2};
    gguf_writer_add_tensor(w, "f32", GGUF_TENSOR_F32, 2, ne, ref, sizeof ref);
    gguf_writer_add_tensor(w, "f16", GGUF_TENSOR_F16, 2, ne, f16, sizeof f16);
    gguf_writer_add_tensor(w, "bf16", GGUF_TENSOR_BF16, 2, ne, bf16, sizeof bf16);
    gguf_writer_add_tensor(w, "q8_0", GGUF_TENSOR_Q8_0, 2, ne, q8, sizeof q8);
    gguf_writer_add_tensor(w, "q4_0", GGUF_TENSOR_Q4_0, 2, ne, q4, sizeof q4);
    const char *path = tu_tmp_path("roundtrip.gguf");
    assert_int_equal(gguf_writer_write_file(w, path, &err), TS_OK);
    uint8_t *mem;
    size_t mem_len;
    assert_int_equal(gguf_writer_finish(w, &mem, &mem_len, &err), TS_OK);
    gguf_writer_free(w);

    size_t file_len = 0;
    char *file = tu_read_file(path, &file_len);
    assert_non_null(file);
    assert_int_equal(file_len, mem_len);
    assert_memory_equal(file, mem, mem_len);
    free(file);
    free(mem);

    gguf_file *f = NULL;
    assert_int_equal(gguf_open(path, &f, &err), TS_OK);
    assert_int_equal(f->alignment, 64);
    assert_int_equal(f->data_offset % 64, 0);
    int64_t i = 0;
    double d = 0;
    bool b = false;
    gguf_str s;
    assert_int_equal(gguf_get_i64(f, "t.u32", &i, &err), TS_OK);
    assert_int_equal(i, 4000000000LL);
    assert_int_equal(gguf_get_i64(f, "t.i32", &i, &err), TS_OK);
    assert_int_equal(i, -7);
    assert_int_equal(gguf_get_i64(f, "t.i8", &i, &err), TS_OK);
    assert_int_equal(i, -3);
    assert_int_equal(gguf_get_f64(f, "t.f32", &d, &err), TS_OK);
    assert_true(d == 0.25);
    assert_int_equal(gguf_get_f64(f, "t.f64", &d, &err), TS_OK);
    assert_true(d == 1e-300);
    assert_int_equal(gguf_get_bool(f, "t.bool", &b, &err), TS_OK);
    assert_true(b);
    assert_int_equal(gguf_get_str(f, "t.str", &s, &err), TS_OK);
    assert_true(gguf_str_eq(s, "héllo"));

    const gguf_value *arr;
    assert_int_equal(gguf_get_array(f, "t.scores", GGUF_TYPE_FLOAT32, &arr, &err), TS_OK);
    assert_int_equal(arr->v.arr.n, 3);
    assert_true(gguf_array_f32(arr, 2) == 2.5f);
    assert_int_equal(gguf_get_array(f, "t.strs", GGUF_TYPE_STRING, &arr, &err), TS_OK);
    assert_true(gguf_str_eq(gguf_array_str(arr, 0), "a b"));
    assert_true(gguf_str_eq(gguf_array_str(arr, 1), ""));
    assert_int_equal(gguf_get_array(f, "t.nested", GGUF_TYPE_ARRAY, &arr, &err), TS_OK);
    assert_int_equal(arr->v.arr.n, 3);
    const gguf_value *inner = &arr->v.arr.items[2];
    assert_int_equal(inner->v.arr.elem, GGUF_TYPE_UINT32);
    assert_int_equal(inner->v.arr.n, 3);
    assert_int_equal(gguf_array_i32(inner, 2), 2);

    /* Typed getters name the key on a type mismatch, an overflow or a missing key. */
    assert_int_equal(gguf_get_i64(f, "t.str", &i, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'t.str' has type string"));
    assert_int_equal(gguf_get_i64(f, "t.u64", &i, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "t.u64"));
    assert_int_equal(gguf_get_str(f, "t.nope", &s, &err), TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "t.nope"));
    assert_int_equal(gguf_get_array(f, "t.scores", GGUF_TYPE_INT32, &arr, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "array of float32"));
    assert_int_equal(gguf_get_f64(f, "t.bool", &d, &err), TS_ERR_FORMAT);
    assert_int_equal(gguf_get_bool(f, "t.f32", &b, &err), TS_ERR_FORMAT);

    /* Tensors come back in place and dequantise exactly. */
    float out[64];
    static const char *const names[] = {"f32", "f16", "bf16", "q8_0"};
    for (int k = 0; k < 4; k++) {
        const gguf_tensor *t = gguf_find_tensor(f, names[k]);
        assert_non_null(t);
        assert_int_equal((uintptr_t)(t->data - f->base) % 64, 0);
        memset(out, 0, sizeof out);
        assert_int_equal(gguf_tensor_to_f32(out, t, 64, &err), TS_OK);
        assert_memory_equal(out, ref, sizeof ref);
    }
    const gguf_tensor *t = gguf_find_tensor(f, "q4_0");
    assert_int_equal(gguf_tensor_to_f32(out, t, 64, &err), TS_OK);
    for (int blk = 0; blk < 2; blk++)
        for (int j = 0; j < 16; j++) {
            assert_true(out[32 * blk + j] == 0.5f * (float)(((j + blk) & 15) - 8));
            assert_true(out[32 * blk + 16 + j] == 0.5f * (float)((15 - j) - 8));
        }
    assert_int_equal(gguf_tensor_to_f32(out, t, 63, &err), TS_ERR_INVALID_ARG);
    gguf_close(f);
}

static void test_writer_refuses_bad_input(void **state)
{
    (void)state;
    gguf_writer *w = NULL;
    ts_error err = {0};
    assert_int_equal(gguf_writer_create(48, &w, &err), TS_ERR_INVALID_ARG);
    assert_null(w);
    assert_int_equal(gguf_writer_create(0, &w, &err), TS_OK);
    const uint64_t ne[1] = {33};
    uint8_t data[64] = {0};
    /* 33 is not a multiple of the Q8_0 block: sticky error, reported by finish. */
    assert_int_equal(gguf_writer_add_tensor(w, "x", GGUF_TENSOR_Q8_0, 1, ne, data, 34),
                     TS_ERR_INVALID_ARG);
    assert_int_equal(gguf_writer_add_u32(w, "later", 1), TS_ERR_INVALID_ARG);
    uint8_t *out;
    size_t len;
    assert_int_equal(gguf_writer_finish(w, &out, &len, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "'x'"));
    assert_null(out);
    gguf_writer_free(w);
    gguf_writer_free(NULL);
}

static void test_f16_conversions(void **state)
{
    (void)state;
    /* Every finite half survives f16 -> f32 -> f16. */
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue; /* nan */
        assert_int_equal(gguf_f32_to_f16(gguf_f16_to_f32((uint16_t)h)), h);
    }
    assert_true(gguf_f16_to_f32(0x3c00) == 1.0f);
    assert_true(gguf_f16_to_f32(0xc000) == -2.0f);
    assert_true(gguf_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    assert_true(isinf(gguf_f16_to_f32(0x7c00)));
    assert_true(isnan(gguf_f16_to_f32(0x7e00)));
    assert_int_equal(gguf_f32_to_f16(1e6f), 0x7c00);
    assert_int_equal(gguf_f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(gguf_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);  /* tie to even */
    assert_int_equal(gguf_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02); /* tie up */
    assert_int_equal(gguf_f32_to_f16(ldexpf(1.0f, -30)), 0);
    assert_true(isnan(gguf_f16_to_f32(gguf_f32_to_f16(NAN))));
}

static void test_tensor_type_table(void **state)
{
    (void)state;
    uint32_t blk, bytes;
    assert_true(gguf_tensor_type_layout(GGUF_TENSOR_Q4_0, &blk, &bytes));
    assert_int_equal(blk, 32);
    assert_int_equal(bytes, 18);
    assert_true(gguf_tensor_type_layout(14, &blk, &bytes));
    assert_string_equal(gguf_tensor_type_name(14), "Q6_K");
    assert_int_equal(bytes, 210);
    assert_false(gguf_tensor_type_layout(4, &blk, &bytes)); /* retired Q4_2 */
    assert_false(gguf_tensor_type_layout(1000, &blk, &bytes));
    assert_null(gguf_tensor_type_name(1000));
    assert_string_equal(gguf_type_name(GGUF_TYPE_FLOAT64), "float64");
    assert_string_equal(gguf_type_name((gguf_type)99), "unknown");
}

/* ---- malformed files ---- */

static void test_bad_headers(void **state)
{
    (void)state;
    bb b;
    bb_header(&b, 0, 0);
    assert_int_equal(parse_bytes(b.data, b.len, NULL), TS_OK);
    memcpy(b.data, "GGUG", 4);
    expect_error(&b, TS_ERR_FORMAT, "bad magic");
    bb_header(&b, 0, 0);
    b.data[4] = 1; /* version 1 */
    expect_error(&b, TS_ERR_UNSUPPORTED, "version 1");
    b.data[4] = 0;
    b.data[7] = 3; /* version 3 written big-endian */
    expect_error(&b, TS_ERR_UNSUPPORTED, "big-endian");
    bb_header(&b, 0, (uint64_t)1 << 60);
    expect_error(&b, TS_ERR_FORMAT, "metadata count");
    bb_header(&b, UINT64_MAX, 0);
    expect_error(&b, TS_ERR_FORMAT, "tensor count");
    bb_header(&b, 0, 0);
    b.len = 20;
    expect_error(&b, TS_ERR_FORMAT, "metadata count");
    b.len = 3;
    expect_error(&b, TS_ERR_FORMAT, "truncated");
}

static void test_bad_metadata(void **state)
{
    (void)state;
    bb b;
    bb_header(&b, 0, 1);
    bb_u64(&b, 1000); /* key length past the end */
    bb_put(&b, "abcdefgh", 8);
    expect_error(&b, TS_ERR_FORMAT, "metadata entry 0");

    bb_header(&b, 0, 1);
    bb_str(&b, "");
    bb_u32(&b, GGUF_TYPE_UINT8);
    bb_put(&b, "x", 1);
    expect_error(&b, TS_ERR_FORMAT, "empty key");

    bb_header(&b, 0, 1);
    bb_str(&b, "k.type");
    bb_u32(&b, 13);
    bb_u64(&b, 0);
    expect_error(&b, TS_ERR_FORMAT, "'k.type': unknown value type 13");

    bb_header(&b, 0, 1);
    bb_str(&b, "k.bool");
    bb_u32(&b, GGUF_TYPE_BOOL);
    bb_put(&b, "\x02", 1);
    expect_error(&b, TS_ERR_FORMAT, "'k.bool': bool value 2");

    bb_header(&b, 0, 1);
    bb_str(&b, "k.str");
    bb_u32(&b, GGUF_TYPE_STRING);
    bb_u64(&b, UINT64_MAX);
    expect_error(&b, TS_ERR_FORMAT, "'k.str': string length");

    bb_header(&b, 0, 1);
    bb_str(&b, "k.arr");
    bb_u32(&b, GGUF_TYPE_ARRAY);
    bb_u32(&b, GGUF_TYPE_UINT64);
    bb_u64(&b, (uint64_t)1 << 61); /* n * 8 would overflow */
    expect_error(&b, TS_ERR_FORMAT, "'k.arr': array of 2305843009213693952 uint64");

    bb_header(&b, 0, 1);
    bb_str(&b, "k.strs");
    bb_u32(&b, GGUF_TYPE_ARRAY);
    bb_u32(&b, GGUF_TYPE_STRING);
    bb_u64(&b, 1000000);
    expect_error(&b, TS_ERR_FORMAT, "'k.strs': array of 1000000 string");

    bb_header(&b, 0, 1);
    bb_str(&b, "k.elem");
    bb_u32(&b, GGUF_TYPE_ARRAY);
    bb_u32(&b, 77);
    bb_u64(&b, 0);
    expect_error(&b, TS_ERR_FORMAT, "unknown array element type 77");

    /* Arrays nested one deeper than allowed. */
    bb_header(&b, 0, 1);
    bb_str(&b, "k.deep");
    bb_u32(&b, GGUF_TYPE_ARRAY);
    for (int d = 0; d < GGUF_MAX_ARRAY_DEPTH; d++) {
        bb_u32(&b, GGUF_TYPE_ARRAY);
        bb_u64(&b, 1);
    }
    bb_u32(&b, GGUF_TYPE_UINT8);
    bb_u64(&b, 0);
    expect_error(&b, TS_ERR_FORMAT, "nested deeper");

    bb_header(&b, 0, 2);
    for (int k = 0; k < 2; k++) {
        bb_str(&b, "k.twice");
        bb_u32(&b, GGUF_TYPE_UINT8);
        bb_put(&b, "x", 1);
    }
    expect_error(&b, TS_ERR_FORMAT, "duplicate metadata key 'k.twice'");

    bb_header(&b, 0, 1);
    bb_str(&b, "general.alignment");
    bb_u32(&b, GGUF_TYPE_UINT32);
    bb_u32(&b, 48);
    expect_error(&b, TS_ERR_FORMAT, "general.alignment 48 is not a power of two");

    bb_header(&b, 0, 1);
    bb_str(&b, "general.alignment");
    bb_u32(&b, GGUF_TYPE_INT32);
    bb_u32(&b, 64);
    expect_error(&b, TS_ERR_FORMAT, "general.alignment has type int32");
}

/* A one-tensor file: F32 (4, 2) called "w" at offset 0, then its 32 bytes. */
static void one_tensor_file(bb *b, uint32_t n_dims, uint64_t ne0, uint64_t ne1,
                            uint32_t type, uint64_t offset)
{
    bb_header(b, 1, 0);
    bb_tensor(b, "w", n_dims, ne0, ne1, type, offset);
    bb_pad(b, 32);
    for (int i = 0; i < 8; i++) {
        float x = (float)i;
        bb_put(b, &x, 4);
    }
}

static void test_bad_tensor_infos(void **state)
{
    (void)state;
    bb b;
    one_tensor_file(&b, 2, 4, 2, GGUF_TENSOR_F32, 0);
    assert_int_equal(parse_bytes(b.data, b.len, NULL), TS_OK);

    one_tensor_file(&b, 2, 4, 3, GGUF_TENSOR_F32, 0); /* 48 bytes, file holds 32 */
    expect_error(&b, TS_ERR_FORMAT, "tensor 'w': 48 bytes at data offset 0 run past the end");
    one_tensor_file(&b, 2, 4, 2, GGUF_TENSOR_F32, 32);
    expect_error(&b, TS_ERR_FORMAT, "tensor 'w': 32 bytes at data offset 32");
    one_tensor_file(&b, 2, 4, 2, GGUF_TENSOR_F32, 4);
    expect_error(&b, TS_ERR_FORMAT, "data offset 4 is not a multiple of the alignment 32");
    one_tensor_file(&b, 2, 4, 0, GGUF_TENSOR_F32, 0);
    expect_error(&b, TS_ERR_FORMAT, "tensor 'w': dimension 1");
    one_tensor_file(&b, 2, (uint64_t)1 << 40, (uint64_t)1 << 40, GGUF_TENSOR_F32, 0);
    expect_error(&b, TS_ERR_FORMAT, "overflows");
    one_tensor_file(&b, 5, 4, 2, GGUF_TENSOR_F32, 0);
    expect_error(&b, TS_ERR_FORMAT, "tensor 'w': 5 dimensions");
    one_tensor_file(&b, 2, 4, 2, 99, 0);
    expect_error(&b, TS_ERR_FORMAT, "tensor 'w': unknown tensor type 99");
    one_tensor_file(&b, 2, 4, 2, GGUF_TENSOR_Q8_0, 0);
    expect_error(&b, TS_ERR_FORMAT, "row length 4 is not a multiple of the Q8_0 block size 32");

    bb_header(&b, 2, 0);
    bb_tensor(&b, "w", 1, 4, 1, GGUF_TENSOR_F32, 0);
    bb_tensor(&b, "w", 1, 4, 1, GGUF_TENSOR_F32, 0);
    bb_pad(&b, 32);
    bb_put(&b, "0123456789abcdef", 16);
    expect_error(&b, TS_ERR_FORMAT, "duplicate tensor name 'w'");

    /* Tensor infos that end exactly at the end of the file: no data section. */
    bb_header(&b, 1, 0);
    bb_tensor(&b, "w", 1, 4, 1, GGUF_TENSOR_F32, 0);
    expect_error(&b, TS_ERR_FORMAT, "past the end");
}

/* A file of n F32 tensors "a", "b", ... of (8) floats each at the given data offsets,
 * with a data section of data_bytes. */
static void offsets_file(bb *b, int n, const uint64_t *offsets, size_t data_bytes)
{
    bb_header(b, (uint64_t)n, 0);
    for (int i = 0; i < n; i++) {
        char name[2] = {(char)('a' + i), '\0'};
        bb_tensor(b, name, 1, 8, 1, GGUF_TENSOR_F32, offsets[i]);
    }
    bb_pad(b, 32);
    for (size_t i = 0; i < data_bytes; i++)
        bb_put(b, "\x01", 1);
}

static void test_overlapping_tensors_are_refused(void **state)
{
    (void)state;
    bb b;
    /* Three tensors on the same 32 bytes: each fits in the file, together they do not. */
    offsets_file(&b, 3, (const uint64_t[]){0, 0, 0}, 32);
    expect_error(&b, TS_ERR_FORMAT,
                 "tensor 'b' at data offset 0 overlaps tensor 'a' (32 bytes at data offset 0)");
    /* Overlaps are found whatever the order of the infos, partial ones too. */
    offsets_file(&b, 3, (const uint64_t[]){64, 0, 32}, 96);
    assert_int_equal(parse_bytes(b.data, b.len, NULL), TS_OK);
    offsets_file(&b, 3, (const uint64_t[]){96, 0, 64}, 128);
    assert_int_equal(parse_bytes(b.data, b.len, NULL), TS_OK); /* a gap is allowed */
    bb_header(&b, 2, 0);
    bb_tensor(&b, "big", 1, 16, 1, GGUF_TENSOR_F32, 0); /* 64 bytes */
    bb_tensor(&b, "small", 1, 8, 1, GGUF_TENSOR_F32, 32);
    bb_pad(&b, 32);
    for (int i = 0; i < 96; i++)
        bb_put(&b, "", 1);
    expect_error(&b, TS_ERR_FORMAT, "tensor 'small' at data offset 32 overlaps tensor 'big'");
    offsets_file(&b, 4, (const uint64_t[]){96, 32, 0, 32}, 128);
    expect_error(&b, TS_ERR_FORMAT, "tensor 'd' at data offset 32 overlaps tensor 'b'");
}

/* A ggml type tessera does not compute on is refused at open, by name; a tensor of a
 * supported type decodes, and one whose bytes disagree with its shape is refused. */
static void test_unsupported_type_is_named(void **state)
{
    (void)state;
    bb b;
    bb_header(&b, 1, 0);
    bb_tensor(&b, "blk.0.attn_q.weight", 1, 256, 1, 16 /* IQ2_XXS */, 0);
    bb_pad(&b, 32);
    uint8_t block[144] = {0};
    bb_put(&b, block, 66);
    expect_error(&b, TS_ERR_UNSUPPORTED,
                 "tensor 'blk.0.attn_q.weight' has type IQ2_XXS (16), which tessera does not");
    static const struct {
        uint32_t type;
        const char *name;
    } others[] = {{19, "IQ1_S"}, {34, "TQ1_0"}, {39, "MXFP4"}, {26, "I32"}, {9, "Q8_1"}};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        bb_header(&b, 1, 0);
        bb_tensor(&b, "w", 1, 256, 1, others[i].type, 0);
        bb_pad(&b, 32);
        bb_put(&b, block, sizeof block);
        char want[64];
        snprintf(want, sizeof want, "tensor 'w' has type %s", others[i].name);
        expect_error(&b, TS_ERR_UNSUPPORTED, want);
    }

    bb_header(&b, 1, 0);
    bb_tensor(&b, "blk.0.attn_q.weight", 1, 256, 1, 12 /* Q4_K */, 0);
    bb_pad(&b, 32);
    block[0] = 0x00, block[1] = 0x3c; /* d = 1 */
    block[4] = 3;                     /* sub-block 0's scale */
    block[16] = 0x21;                 /* elements 0 and 32 */
    bb_put(&b, block, sizeof block);
    gguf_file *f = NULL;
    ts_error err = {0};
    assert_int_equal(gguf_open_buffer(b.data, b.len, &f, &err), TS_OK);
    gguf_tensor t = f->tensors[0];
    float out[256];
    assert_int_equal(gguf_tensor_to_f32(out, &t, 256, &err), TS_OK);
    assert_true(out[0] == 3.0f);
    assert_true(out[32] == 0.0f); /* sub-block 1's scale is 0 */
    assert_true(out[1] == 0.0f);
    /* tensors made by hand (not parsed) are checked too */
    t.nbytes = 143;
    assert_int_equal(gguf_tensor_to_f32(out, &t, 256, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "tensor 'blk.0.attn_q.weight': 143 bytes do not hold"));
    t.nbytes = 144;
    t.ne[0] = 128, t.ne[1] = 2;
    assert_int_equal(gguf_tensor_to_f32(out, &t, 256, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "row length 128 is not a whole number of Q4_K blocks"));
    t.ne[0] = 256, t.ne[1] = 1;
    t.type = 16;
    assert_int_equal(gguf_tensor_to_f32(out, &t, 256, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "'blk.0.attn_q.weight' has type IQ2_XXS"));
    t.type = 1000;
    assert_int_equal(gguf_tensor_to_f32(out, &t, 256, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "has type unknown (1000)"));
    gguf_close(f);

    /* at open: a row that is not whole blocks, and bytes the file does not hold */
    bb_header(&b, 1, 0);
    bb_tensor(&b, "blk.1.ffn_down.weight", 2, 128, 2, 14 /* Q6_K */, 0);
    bb_pad(&b, 32);
    bb_put(&b, block, sizeof block);
    expect_error(&b, TS_ERR_FORMAT, "tensor 'blk.1.ffn_down.weight': row length 128 is not a "
                                    "multiple of the Q6_K block size 256");
    bb_header(&b, 1, 0);
    bb_tensor(&b, "blk.1.ffn_down.weight", 2, 256, 2, 12 /* Q4_K */, 0);
    bb_pad(&b, 32);
    bb_put(&b, block, sizeof block); /* one block of the two */
    expect_error(&b, TS_ERR_FORMAT, "tensor 'blk.1.ffn_down.weight': 288 bytes at data offset 0 "
                                    "run past the end");
}

/* Every truncation of a valid file fails cleanly, and random corruption never crashes
 * (ASan checks each read against the exact-size buffer). */
static void test_truncation_and_corruption(void **state)
{
    (void)state;
    gguf_writer *w = NULL;
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    gguf_writer_add_str(w, "general.architecture", "llama");
    const char *const toks[3] = {"<s>", "</s>", "\xe2\x96\x81hi"};
    const uint32_t lens[3] = {3, 4, 5};
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, lens, 3);
    uint8_t nested[512];
    size_t nested_len = encode_nested(nested, 2);
    gguf_writer_add_raw(w, "x.nested", GGUF_TYPE_ARRAY, nested, nested_len);
    float data[64] = {0};
    const uint64_t ne[2] = {8, 4};
    gguf_writer_add_tensor(w, "a", GGUF_TENSOR_F32, 2, ne, data, 128);
    gguf_writer_add_tensor(w, "b", GGUF_TENSOR_F16, 1, ne, data, 16);
    uint8_t *file;
    size_t len;
    assert_int_equal(gguf_writer_finish(w, &file, &len, NULL), TS_OK);
    gguf_writer_free(w);

    ts_error err = {0};
    assert_int_equal(parse_bytes(file, len, &err), TS_OK);
    /* The data of "b" ends 16 bytes past its offset; the padding after it is optional. */
    gguf_file *f = NULL;
    assert_int_equal(gguf_open_buffer(file, len, &f, NULL), TS_OK);
    size_t end = (size_t)(f->tensors[1].data - f->base) + 16;
    gguf_close(f);
    for (size_t cut = 0; cut < end; cut++) {
        err.msg[0] = '\0';
        if (parse_bytes(file, cut, &err) == TS_OK)
            fail_msg("a file cut to %zu of %zu bytes parsed", cut, len);
        assert_true(strlen(err.msg) > 0);
    }
    srand(1234);
    for (int iter = 0; iter < 3000; iter++) {
        uint8_t copy[1024];
        assert_true(len <= sizeof copy);
        memcpy(copy, file, len);
        for (int k = 0; k < 1 + iter % 4; k++)
            copy[(size_t)rand() % len] ^= (uint8_t)(1u << (rand() % 8));
        parse_bytes(copy, len, NULL);
    }
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_stories260k),
        cmocka_unit_test(test_reads_vocab_only_files),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_round_trip_metadata_and_tensors),
        cmocka_unit_test(test_writer_refuses_bad_input),
        cmocka_unit_test(test_f16_conversions),
        cmocka_unit_test(test_tensor_type_table),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_bad_tensor_infos),
        cmocka_unit_test(test_overlapping_tensors_are_refused),
        cmocka_unit_test(test_unsupported_type_is_named),
        cmocka_unit_test(test_truncation_and_corruption),
    };
    return cmocka_run_group_tests_name("gguf", tests, NULL, NULL);
}
