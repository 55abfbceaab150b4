/* test_quantize.c: the row quantizers (round trips through the decoder, error bounds,
 * edge blocks), llama.cpp's ftype mixes (every tensor of every stories260K-k file, and the
 * layer rules of larger models), and whole files quantized from stories260K-k-f32: types
 * as llama.cpp's files have them, metadata copied, and each tensor's RMS error at most
 * 1.1x that of llama.cpp's file of the same type. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "model/synth.h"
#include "quant.h"
#include "quant/quantize.h"
#include "tokenizer/vocab.h"
#include "util.h"

/* AddressSanitizer's shadow memory makes RSS say nothing about our allocations. */
#if defined(__SANITIZE_ADDRESS__)
#define QT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QT_ASAN 1
#endif
#endif
#ifndef QT_ASAN
#define QT_ASAN 0
#endif

/* Where tests/CMakeLists.txt extracts ../shared/models/stories260K-k.tar.xz. */
#define K_DIR TS_BUILD_DIR "/stories260K-k"

static const char *const k_types[] = {"F16",  "BF16",   "Q8_0",   "Q4_0",   "Q4_1",
                                      "Q5_0", "Q5_1",   "Q2_K",   "Q3_K_M", "Q4_K_S",
                                      "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"};
enum { N_K_TYPES = sizeof k_types / sizeof *k_types };

static const uint32_t row_types[] = {QT_F16,  QT_BF16, QT_Q8_0, QT_Q4_0, QT_Q4_1,
                                     QT_Q5_0, QT_Q5_1, QT_Q2_K, QT_Q3_K, QT_Q4_K,
                                     QT_Q5_K, QT_Q6_K, QT_IQ4_NL, QT_IQ4_XS};

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Roughly normal values (sum of uniforms) of standard deviation about std. */
static void fill_random(float *x, int n, uint64_t seed, float std)
{
    for (int i = 0; i < n; i++) {
        float s = 0.0f;
        for (int k = 0; k < 4; k++)
            s += (float)(rng_next(&seed) >> 40) / 16777216.0f - 0.5f;
        x[i] = s * std * 1.7320508f;
    }
}

static double rms_diff(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / (double)n);
}

/* The RMS error of quantizing x (n) to type and decoding it. */
static double round_trip(const float *x, int n, uint32_t type, float *out)
{
    uint8_t *q = malloc(qtype_row_bytes(type, n));
    assert_non_null(q);
    assert_true(quant_row(q, x, type, n));
    qtype_dequant_row(out, q, type, n);
    free(q);
    return rms_diff(x, out, (size_t)n);
}

/* Bits per weight of each type bound its error: a uniform grid of 2^b levels over about
 * +-3 std has RMS error near 6 std / 2^b / sqrt(12); every type must do at least that well
 * (with room for the scales' own rounding), and a type of more bits no worse than half as
 * well as one of fewer. */
static void test_row_round_trip(void **state)
{
    (void)state;
    enum { N = 4 * 256 };
    float x[N], out[N];
    fill_random(x, N, 7, 1.0f);
    static const struct {
        uint32_t type;
        double bound; /* RMS error / std */
    } want[] = {
        {QT_F16, 1e-3},  {QT_BF16, 5e-3}, {QT_Q8_0, 0.01}, {QT_Q6_K, 0.03}, {QT_Q5_0, 0.06},
        {QT_Q5_1, 0.06}, {QT_Q5_K, 0.06}, {QT_Q4_0, 0.12}, {QT_Q4_1, 0.12}, {QT_Q4_K, 0.12},
        {QT_IQ4_NL, 0.12}, {QT_IQ4_XS, 0.12}, {QT_Q3_K, 0.25}, {QT_Q2_K, 0.45},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        double e = round_trip(x, N, want[i].type, out);
        if (!(e < want[i].bound))
            fail_msg("%s: RMS error %g of unit normals, over %g", qtype_name(want[i].type), e,
                     want[i].bound);
    }
    /* a row of zeros decodes to zeros; a row scaled by a power of two is quantized to the
     * same integers (the searches have no absolute thresholds) */
    float zero[N] = {0}, tiny[N];
    for (int i = 0; i < N; i++)
        tiny[i] = x[i] * 0.25f;
    for (size_t i = 0; i < sizeof row_types / sizeof *row_types; i++) {
        uint32_t t = row_types[i];
        assert_true(round_trip(zero, N, t, out) == 0.0);
        double e1 = round_trip(x, N, t, out), e3 = round_trip(tiny, N, t, out);
        if (!(fabs(e3 - 0.25 * e1) <= 1e-3 * e1))
            fail_msg("%s: error %g at std 1/4 against %g at std 1", qtype_name(t), e3, e1);
    }
}

/* Odd blocks: all one value, all positive (the K types' minimum is then 0), one spike,
 * values already on a type's grid (which must come back exactly or nearly). */
static void test_row_edge_blocks(void **state)
{
    (void)state;
    enum { N = 256 };
    float x[N], out[N];
    for (size_t i = 0; i < sizeof row_types / sizeof *row_types; i++) {
        uint32_t t = row_types[i];
        for (int k = 0; k < N; k++)
            x[k] = 0.25f;
        double e = round_trip(x, N, t, out);
        if (!(e < 2e-3))
            fail_msg("%s: constant row error %g", qtype_name(t), e);
        for (int k = 0; k < N; k++)
            x[k] = 1.0f + (float)(k % 16) / 16.0f;
        if (!((e = round_trip(x, N, t, out)) < 0.2))
            fail_msg("%s: positive row error %g", qtype_name(t), e);
        memset(x, 0, sizeof x);
        x[77] = -3.0f;
        round_trip(x, N, t, out);
        if (!(fabsf(out[77] + 3.0f) < 0.02f))
            fail_msg("%s: spike -3 decoded as %g", qtype_name(t), (double)out[77]);
    }
    /* integers -8..7 times 0.5 sit on Q4_0's grid; -16..15 on Q5_0's */
    for (int k = 0; k < N; k++)
        x[k] = 0.5f * (float)(k % 16 - 8);
    assert_true(round_trip(x, N, QT_Q4_0, out) == 0.0);
    for (int k = 0; k < N; k++)
        x[k] = 0.5f * (float)(k % 32 - 16);
    assert_true(round_trip(x, N, QT_Q5_0, out) == 0.0);
    /* a partial block and an unknown type are refused */
    uint8_t buf[1024];
    assert_false(quant_row(buf, x, QT_Q4_K, 128));
    assert_false(quant_row(buf, x, QT_Q4_0, 48));
    assert_false(quant_row(buf, x, 16 /* IQ2_XXS */, 256));
}

/* ---- mixes ---- */

static gguf_file *open_or_fail(const char *path)
{
    gguf_file *f = NULL;
    ts_error err = {0};
    if (gguf_open(path, &f, &err) != TS_OK)
        fail_msg("%s: %s", path, err.msg);
    return f;
}

static void name_of(char *out, size_t cap, gguf_str s)
{
    snprintf(out, cap, "%.*s", (int)s.len, s.ptr);
}

/* Every tensor of every llama.cpp file of the archive has the type our mix gives it. */
static void test_mix_matches_llama_files(void **state)
{
    (void)state;
    gguf_file *src = open_or_fail(K_DIR "/stories260K-k-f32.gguf");
    quant_model_info m = {.n_layers = 5, .n_gqa = 2, .has_output = true};
    for (int i = 0; i < N_K_TYPES; i++) {
        char path[4096], name[256];
        snprintf(path, sizeof path, K_DIR "/stories260K-k-%s.gguf", k_types[i]);
        gguf_file *f = open_or_fail(path);
        quant_ftype ft;
        assert_true(quant_ftype_parse(&ft, k_types[i]));
        int64_t file_type = -1;
        assert_int_equal(gguf_get_i64(f, "general.file_type", &file_type, NULL), TS_OK);
        assert_int_equal(file_type, ft);
        assert_int_equal(f->n_tensors, src->n_tensors);
        for (uint64_t k = 0; k < f->n_tensors; k++) {
            const gguf_tensor *t = &f->tensors[k];
            name_of(name, sizeof name, t->name);
            uint32_t ours = quant_mix_type(ft, &m, name, t->n_dims, t->ne[0]);
            if (ours != t->type)
                fail_msg("%s: %s is %s in llama.cpp's file, %s in our mix", k_types[i], name,
                         qtype_name(t->type), qtype_name(ours));
        }
        gguf_close(f);
    }
    gguf_close(src);
}

/* The layer rules at Llama 3.1 8B's size (32 layers, 4 query heads per KV head), the tied
 * LM head, and the fallbacks for rows that are not whole super-blocks. */
static void test_mix_rules_larger_models(void **state)
{
    (void)state;
    quant_model_info m = {.n_layers = 32, .n_gqa = 4, .has_output = true};
    char name[64];
    /* Q4_K_M: layers 0-3, 28-31 and every third from 6 (6, 9, ..., 27) get Q6_K */
    int n_q6 = 0;
    for (int l = 0; l < 32; l++) {
        bool more = l < 4 || l >= 28 || (l - 4) % 3 == 2;
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        uint32_t t = quant_mix_type(QUANT_FTYPE_Q4_K_M, &m, name, 2, 4096);
        assert_int_equal(t, more ? QT_Q6_K : QT_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_K_M, &m, name, 2, 14336),
                         more ? QT_Q6_K : QT_Q4_K);
        n_q6 += more;
        /* Q3_K_M: ffn_down Q5_K in the first 32/16 = 2 layers; attn_v Q5_K in 2 layers */
        assert_int_equal(quant_mix_type(QUANT_FTYPE_Q3_K_M, &m, name, 2, 14336),
                         l < 2 ? QT_Q5_K : QT_Q4_K);
        /* IQ4_XS: ffn_down Q5_K in the first eighth; attn_v Q5_K with n_gqa >= 4 */
        assert_int_equal(quant_mix_type(QUANT_FTYPE_IQ4_XS, &m, name, 2, 14336),
                         l < 4 ? QT_Q5_K : QT_IQ4_XS);
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        assert_int_equal(quant_mix_type(QUANT_FTYPE_IQ4_XS, &m, name, 2, 4096), QT_Q5_K);
        assert_int_equal(quant_mix_type(QUANT_FTYPE_Q2_K, &m, name, 2, 4096), QT_Q4_K);
    }
    assert_int_equal(n_q6, 4 + 4 + 8);
    /* 1-D tensors stay F32; the LM head is Q6_K; with no output.weight the token
     * embedding is the LM head */
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_K_M, &m, "blk.0.attn_norm.weight", 1, 4096),
                     QT_F32);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_0, &m, "output.weight", 2, 4096), QT_Q6_K);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_0, &m, "token_embd.weight", 2, 4096),
                     QT_Q4_0);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q8_0, &m, "output.weight", 2, 4096), QT_Q8_0);
    quant_model_info tied = m;
    tied.has_output = false;
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_K_M, &tied, "token_embd.weight", 2, 2048),
                     QT_Q6_K);
    /* rows of 960 (SmolLM2-360M): not whole super-blocks */
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_K_M, &m, "blk.5.attn_q.weight", 2, 960),
                     QT_Q5_0);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q5_K_M, &m, "blk.5.attn_q.weight", 2, 960),
                     QT_Q5_1);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q2_K, &m, "blk.5.attn_q.weight", 2, 960),
                     QT_IQ4_NL);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_IQ4_XS, &m, "blk.5.attn_q.weight", 2, 960),
                     QT_IQ4_NL);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q6_K, &m, "blk.5.attn_q.weight", 2, 960),
                     QT_Q8_0);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_K_M, &tied, "token_embd.weight", 2, 960),
                     QT_Q8_0);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_K_M, &m, "blk.5.attn_q.weight", 2, 100),
                     QT_F16);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_0, &m, "blk.5.attn_q.weight", 2, 100),
                     QUANT_TYPE_NONE);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_0, &m, "output.weight", 2, 100),
                     QUANT_TYPE_NONE);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_F16, &m, "blk.5.attn_q.weight", 2, 100),
                     QT_F16);
    /* 70B (80 layers): attn_v gets Q5_K where it would get Q3_K / Q4_K */
    quant_model_info big = {.n_layers = 80, .n_gqa = 8, .has_output = true, .is_70b = true};
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_K_S, &big, "blk.50.attn_v.weight", 2, 8192),
                     QT_Q5_K);
    /* a fused attn_qkv (other architectures) gets more bits in the _M mixes */
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_K_M, &m, "blk.3.attn_qkv.weight", 2, 4096),
                     QT_Q5_K);
    assert_int_equal(quant_mix_type(QUANT_FTYPE_Q4_K_S, &m, "blk.3.attn_qkv.weight", 2, 4096),
                     QT_Q4_K);
    quant_ftype f;
    assert_true(quant_ftype_parse(&f, "q4_k_m"));
    assert_int_equal(f, QUANT_FTYPE_Q4_K_M);
    assert_false(quant_ftype_parse(&f, "Q4_K_X"));
}

/* ---- whole files ---- */

typedef struct ratio_stats {
    double worst, sum;
    int n;
    char worst_name[64];
} ratio_stats;

/* Compares tensor t of ours (decoded) and llama.cpp's decoded ref against the original. */
static void compare_quality(ratio_stats *rs, const char *type, const gguf_tensor *src,
                            const gguf_tensor *ours, const gguf_tensor *ref)
{
    size_t n = (size_t)src->n_elems;
    float *x = malloc(n * sizeof *x), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_true(x && a && b);
    ts_error err = {0};
    assert_int_equal(gguf_tensor_to_f32(x, src, n, &err), TS_OK);
    assert_int_equal(gguf_tensor_to_f32(a, ours, n, &err), TS_OK);
    assert_int_equal(gguf_tensor_to_f32(b, ref, n, &err), TS_OK);
    double eo = rms_diff(x, a, n), el = rms_diff(x, b, n);
    char name[64];
    name_of(name, sizeof name, src->name);
    double ratio = el > 0.0 ? eo / el : (eo > 0.0 ? INFINITY : 1.0);
    if (!(ratio <= 1.1))
        fail_msg("%s: %s: RMS error %.4g, llama.cpp's %.4g (ratio %.3f > 1.1)", type, name, eo,
                 el, ratio);
    if (ratio > rs->worst || rs->n == 0) {
        rs->worst = ratio;
        snprintf(rs->worst_name, sizeof rs->worst_name, "%s", name);
    }
    rs->sum += ratio;
    rs->n++;
    free(x);
    free(a);
    free(b);
}

/* Quantizes in (F32, F16 or BF16 tensors) to llama.cpp's ftype type and checks the file:
 * metadata copied, each tensor of llama.cpp's type, and its RMS error against orig (the
 * f32 weights) at most 1.1x that of llama.cpp's file. */
static void quantize_and_compare(const gguf_file *in, const gguf_file *orig, const char *type)
{
    const char *out = tu_tmp_path("quantized.gguf");
    char path[4096], name[256];
    quant_ftype ft;
    assert_true(quant_ftype_parse(&ft, type));
    ts_error err = {0};
    if (quant_gguf_write(out, in, ft, NULL, NULL, &err) != TS_OK)
        fail_msg("%s: %s", type, err.msg);
    gguf_file *q = open_or_fail(out);
    snprintf(path, sizeof path, K_DIR "/stories260K-k-%s.gguf", type);
    gguf_file *ll = open_or_fail(path);
    snprintf(path, sizeof path, K_DIR "/dequant/stories260K-k-%s.dequant-f32.gguf", type);
    gguf_file *deq = open_or_fail(path);
    /* metadata: every key of the input (the token list too), file_type replaced */
    int64_t v = -1;
    assert_int_equal(gguf_get_i64(q, "general.file_type", &v, NULL), TS_OK);
    assert_int_equal(v, ft);
    assert_true(q->n_kv >= in->n_kv);
    const gguf_value *tok_a = NULL, *tok_b = NULL;
    assert_int_equal(gguf_get_array(in, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tok_a, NULL),
                     TS_OK);
    assert_int_equal(gguf_get_array(q, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tok_b, NULL),
                     TS_OK);
    assert_int_equal(tok_a->v.arr.n, tok_b->v.arr.n);
    for (uint64_t k = 0; k < tok_a->v.arr.n; k++) {
        gguf_str sa = gguf_array_str(tok_a, k), sb = gguf_array_str(tok_b, k);
        assert_true(sa.len == sb.len && !memcmp(sa.ptr, sb.ptr, sa.len));
    }
    double eps_a, eps_b;
    assert_int_equal(gguf_get_f64(in, "llama.attention.layer_norm_rms_epsilon", &eps_a, NULL),
                     TS_OK);
    assert_int_equal(gguf_get_f64(q, "llama.attention.layer_norm_rms_epsilon", &eps_b, NULL),
                     TS_OK);
    assert_true(eps_a == eps_b);
    /* tensors: llama.cpp's types, and its error or better */
    ratio_stats rs = {0};
    assert_int_equal(q->n_tensors, orig->n_tensors);
    for (uint64_t k = 0; k < orig->n_tensors; k++) {
        name_of(name, sizeof name, orig->tensors[k].name);
        const gguf_tensor *t = gguf_find_tensor(q, name), *lt = gguf_find_tensor(ll, name);
        const gguf_tensor *dt = gguf_find_tensor(deq, name);
        assert_true(t && lt && dt);
        if (t->type != lt->type)
            fail_msg("%s: %s is %s, llama.cpp's %s", type, name, qtype_name(t->type),
                     qtype_name(lt->type));
        assert_memory_equal(t->ne, orig->tensors[k].ne, sizeof t->ne);
        if (t->n_dims >= 2)
            compare_quality(&rs, type, &orig->tensors[k], t, dt);
    }
    print_message("%-7s RMS error ours / llama.cpp's: mean %.3f, worst %.3f (%s)\n", type,
                  rs.sum / rs.n, rs.worst, rs.worst_name);
    gguf_close(q);
    gguf_close(ll);
    gguf_close(deq);
    remove(out);
}

static void test_quantize_files(void **state)
{
    (void)state;
    gguf_file *src = open_or_fail(K_DIR "/stories260K-k-f32.gguf");
    for (int i = 0; i < N_K_TYPES; i++)
        quantize_and_compare(src, src, k_types[i]);
    gguf_close(src);
}

/* F16 and BF16 inputs (llama.cpp's files of those types) quantize as well as F32. */
static void test_quantize_half_inputs(void **state)
{
    (void)state;
    gguf_file *orig = open_or_fail(K_DIR "/stories260K-k-f32.gguf");
    gguf_file *h = open_or_fail(K_DIR "/stories260K-k-F16.gguf");
    gguf_file *b = open_or_fail(K_DIR "/stories260K-k-BF16.gguf");
    assert_int_equal(gguf_find_tensor(h, "blk.0.attn_q.weight")->type, QT_F16);
    assert_int_equal(gguf_find_tensor(b, "blk.0.attn_q.weight")->type, QT_BF16);
    quantize_and_compare(h, orig, "Q4_K_M");
    quantize_and_compare(b, orig, "Q8_0");
    gguf_close(orig);
    gguf_close(h);
    gguf_close(b);
}

static const char *llama_first_type(const gguf_file *f)
{
    return qtype_name(f->tensors[0].type);
}

/* Quantized inputs are refused naming the tensor and its type; nothing is written. */
static void test_quantize_refuses_quantized_input(void **state)
{
    (void)state;
    gguf_file *in = open_or_fail(K_DIR "/stories260K-k-Q4_K_M.gguf");
    const char *out = tu_tmp_path("refused.gguf");
    ts_error err = {0};
    assert_int_equal(quant_gguf_write(out, in, QUANT_FTYPE_Q8_0, NULL, NULL, &err),
                     TS_ERR_UNSUPPORTED);
    /* the first tensor of llama.cpp's Q4_K_M file is output.weight, in Q6_K */
    const char *q = llama_first_type(in);
    if (!strstr(err.msg, q) || !strstr(err.msg, ".weight"))
        fail_msg("message '%s' does not name the tensor and type %s", err.msg, q);
    FILE *f = fopen(out, "rb");
    assert_null(f);
    gguf_close(in);
}

/* NaN and infinity: every row type copes (no read out of bounds, no crash), and a file
 * holding one is refused naming the tensor and row. */
/* Fills this much of the stack below the caller with v. */
static __attribute__((noinline)) void poison_stack(unsigned char v)
{
    unsigned char junk[32768];
    memset(junk, v, sizeof junk);
    __asm__ volatile("" : : "r"(junk) : "memory");
}

/* Values past f16's range, which no block scale can hold: every type still writes the row,
 * and the same bytes whatever the stack held (a search pass whose errors were all infinite
 * used to leave sub-block scales unset and then read them). */
static void test_values_past_f16(void **state)
{
    (void)state;
    enum { N = 256 };
    float x[N];
    uint8_t a[4 * N], b[4 * N];
    fill_random(x, N, 9, 1e9f);
    for (size_t i = 0; i < sizeof row_types / sizeof *row_types; i++) {
        uint32_t t = row_types[i];
        poison_stack(0x00);
        assert_true(quant_row(a, x, t, N));
        poison_stack(0xA5);
        assert_true(quant_row(b, x, t, N));
        if (memcmp(a, b, qtype_row_bytes(t, N)) != 0)
            fail_msg("%s: a row past f16's range quantizes to different bytes each time",
                     qtype_name(t));
    }
}

static void test_non_finite_input(void **state)
{
    (void)state;
    enum { N = 256 };
    float x[N], out[N];
    uint8_t q[4 * N];
    for (int k = 0; k < 3; k++) {
        fill_random(x, N, 3, 1.0f);
        x[5] = k == 0 ? NAN : k == 1 ? INFINITY : -INFINITY;
        for (size_t i = 0; i < sizeof row_types / sizeof *row_types; i++) {
            assert_true(quant_row(q, x, row_types[i], N));
            qtype_dequant_row(out, q, row_types[i], N);
        }
    }
    float w[4 * N];
    fill_random(w, 4 * N, 5, 0.02f);
    w[2 * N + 7] = NAN;
    const uint64_t ne[2] = {N, 4};
    gguf_writer *g = NULL;
    assert_int_equal(gguf_writer_create(0, &g, NULL), TS_OK);
    gguf_writer_add_str(g, "general.architecture", "llama");
    gguf_writer_add_tensor(g, "blk.0.attn_q.weight", QT_F32, 2, ne, w, sizeof w);
    uint8_t *bytes = NULL;
    size_t len = 0;
    assert_int_equal(gguf_writer_finish(g, &bytes, &len, NULL), TS_OK);
    gguf_writer_free(g);
    gguf_file *f = NULL;
    assert_int_equal(gguf_open_buffer(bytes, len, &f, NULL), TS_OK);
    const char *path = tu_tmp_path("nan.gguf");
    ts_error err = {0};
    assert_int_equal(quant_gguf_write(path, f, QUANT_FTYPE_Q4_K_M, NULL, NULL, &err),
                     TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'blk.0.attn_q.weight'"));
    assert_non_null(strstr(err.msg, "row 2"));
    assert_null(fopen(path, "rb"));
    gguf_close(f);
    free(bytes);
}

/* `tessera quantize` holds about one chunk of its input in memory, not the whole file: a
 * 74 MB F32 model quantizes with a peak RSS under 45 MB (the mapped input pages of the
 * rows done are given back as it goes). */
static void test_quantize_memory_stays_small(void **state)
{
    (void)state;
    if (QT_ASAN) {
        print_message("skipped: RSS under AddressSanitizer counts its shadow memory\n");
        skip();
    }
    ts_model_config c;
    assert_true(model_synth_shape(&c, "test-tiny"));
    c.dim = 512;
    c.hidden_dim = 1024;
    c.n_layers = 6;
    c.n_heads = 8;
    c.n_kv_heads = 4;
    c.head_dim = 64;
    c.vocab_size = 4096;
    gguf_file *f = open_or_fail(K_DIR "/stories260K-k-f32.gguf");
    tokenizer_vocab v;
    assert_int_equal(vocab_read_gguf(&v, f, NULL), TS_OK);
    gguf_close(f);
    char *in = strdup(tu_tmp_path("mem-in.gguf")), *out = strdup(tu_tmp_path("mem-out.gguf"));
    ts_error err = {0};
    if (model_synth_write(in, &c, "F32", &v, 1, &err) != TS_OK)
        fail_msg("%s", err.msg);
    vocab_clear(&v);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "%s/tessera quantize %s %s Q4_0 2>/dev/null", TS_BUILD_DIR, in,
             out);
    assert_int_equal(system(cmd), 0);
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_CHILDREN, &ru), 0);
    struct stat st;
    assert_int_equal(stat(in, &st), 0);
    assert_true(st.st_size > 70 * 1000 * 1000);
    if (ru.ru_maxrss > 45 * 1024)
        fail_msg("quantize of a %lld-byte file peaked at %ld KiB", (long long)st.st_size,
                 ru.ru_maxrss);
    remove(in);
    remove(out);
    free(in);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_round_trip),
        cmocka_unit_test(test_row_edge_blocks),
        cmocka_unit_test(test_mix_matches_llama_files),
        cmocka_unit_test(test_mix_rules_larger_models),
        cmocka_unit_test(test_quantize_files),
        cmocka_unit_test(test_quantize_half_inputs),
        cmocka_unit_test(test_quantize_refuses_quantized_input),
        cmocka_unit_test(test_values_past_f16),
        cmocka_unit_test(test_non_finite_input),
        cmocka_unit_test(test_quantize_memory_stays_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
