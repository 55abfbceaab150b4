/* test_kv_q8.c: K/V kept in q8_0 (int8, an f16 scale per 32 values): the pool's stores
 * and reads within half a step of their group's scale, copy on write of a q8_0 block, its
 * size; and the model with q8_0 K/V against f16 K/V on stories260K-k: teacher-forced top-1
 * agreement and perplexity on the shared reference texts within stated bounds, and the
 * batched pass against the reference pass rounding its K/V the same way. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine_util.h"
#include "model/forward_ref.h"
#include "simd.h"
#include "step_util.h"
#include "util.h"

/* ---- the pool ---- */

static void test_q8_rows_round_trip(void **state)
{
    (void)state;
    enum { HD = 80, NKV = 3 }; /* groups of 32, 32 and 16 */
    kv_config c = {.n_layers = 2, .n_kv_heads = NKV, .head_dim = HD, .dtype = KV_DTYPE_Q8_0,
                   .n_blocks = 4};
    assert_int_equal(kv_block_bytes(&c), 2 * 2 * NKV * SIMD_KV_Q8_RUN_BYTES(HD));
    kv_config f16 = c;
    f16.dtype = KV_DTYPE_F16;
    assert_true(kv_block_bytes(&c) * 10 < kv_block_bytes(&f16) * 6); /* 0.55x here */
    kv_config wide = c;
    wide.head_dim = SIMD_KV_Q8_MAX_HEAD_DIM + 2;
    kv_pool *bad = NULL;
    assert_int_equal(kv_pool_init(&bad, &wide, NULL), TS_ERR_INVALID_ARG);
    assert_null(bad);

    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &c, NULL), TS_OK);
    kv_table a, b;
    kv_table_init(&a);
    kv_table_init(&b);
    assert_int_equal(kv_table_reserve(pool, &a, 40, NULL), TS_OK);
    float k[NKV * HD], v[NKV * HD], k2[NKV * HD], v2[NKV * HD];
    for (int pos = 0; pos < 40; pos++)
        for (int layer = 0; layer < 2; layer++) {
            for (int i = 0; i < NKV * HD; i++) { /* groups of very different magnitudes */
                k[i] = sinf((float)(pos * 7 + i + layer)) * (i % 32 < 16 ? 3.0f : 0.01f);
                v[i] = cosf((float)(pos * 3 + i)) * (float)(1 + i / 32);
            }
            v[5] = NAN; /* a non-finite value is stored as a finite one, no trap */
            assert_int_equal(kv_table_write(pool, &a, layer, pos, k, v, NULL), TS_OK);
        }
    /* copy on write of the shared partial block keeps the values and the scales */
    assert_int_equal(kv_table_fork(pool, &b, &a, NULL), TS_OK);
    assert_int_equal(kv_table_reserve(pool, &b, 1, NULL), TS_OK);
    for (int pos = 0; pos < 40; pos++)
        for (int layer = 0; layer < 2; layer++) {
            for (int i = 0; i < NKV * HD; i++) {
                k[i] = sinf((float)(pos * 7 + i + layer)) * (i % 32 < 16 ? 3.0f : 0.01f);
                v[i] = cosf((float)(pos * 3 + i)) * (float)(1 + i / 32);
            }
            const kv_table *t = pos % 2 ? &a : &b;
            assert_int_equal(kv_table_read(k2, v2, pool, t, layer, pos, NULL), TS_OK);
            for (int i = 0; i < NKV * HD; i++) {
                int g0 = i / HD * HD + (i % HD) / 32 * 32, g1 = g0 + 32;
                g1 = g1 > i / HD * HD + HD ? i / HD * HD + HD : g1;
                float kmax = 0, vmax = 0;
                for (int j = g0; j < g1; j++) {
                    kmax = fmaxf(kmax, fabsf(k[j]));
                    vmax = j == 5 ? vmax : fmaxf(vmax, fabsf(v[j]));
                }
                /* half a step of the scale, plus the scale's own f16 rounding */
                assert_true(fabsf(k2[i] - k[i]) <= kmax / 127.0f * 0.51f + kmax * 1e-3f);
                assert_true(isfinite(v2[i]));
                if (i != 5)
                    assert_true(fabsf(v2[i] - v[i]) <= vmax / 127.0f * 0.51f + vmax * 1e-3f);
            }
        }
    const kv_table *tabs[2] = {&a, &b};
    assert_int_equal(kv_pool_check(pool, tabs, 2, NULL), TS_OK);
    kv_table_free(pool, &a);
    kv_table_free(pool, &b);
    kv_pool_free(pool);
}

/* ---- the model ---- */

/* A reference text of the shared set, tokenized with BOS. */
static int32_t *read_text(const ts_model *m, const char *name, int *n_out)
{
    char rel[128];
    snprintf(rel, sizeof rel, "reference/stories260K-greedy/%s.out", name);
    size_t len = 0;
    char *text = tu_read_file(tu_shared(rel), &len);
    assert_non_null(text);
    int32_t *ids = NULL;
    size_t n = 0;
    ts_tokenize_opts o = {.add_special = true};
    assert_int_equal(ts_tokenize_alloc(ts_model_get_tokenizer(m), text, len, &o, &ids, &n), TS_OK);
    free(text);
    *n_out = (int)n;
    return ids;
}

/* The logits after every token of ids[0 .. n - 1), one token a step, K/V as dtype:
 * (n - 1, vocab), malloc'd. */
static float *logits_along(const ts_model *m, const int32_t *ids, int n, kv_dtype dtype)
{
    int vocab = m->cfg.vocab_size;
    float *all = malloc((size_t)(n - 1) * vocab * sizeof(float));
    assert_non_null(all);
    su_runner r;
    su_runner_init_kv(&r, m, simd_init(), 4, dtype);
    for (int i = 0; i + 1 < n; i++) {
        int32_t tok = ids[i];
        int32_t *toks[SU_MAX_SEQS] = {&tok};
        int cnt[SU_MAX_SEQS] = {1};
        float *out[SU_MAX_SEQS] = {all + (size_t)i * vocab};
        su_runner_step(&r, toks, cnt, out);
    }
    su_runner_free(&r);
    return all;
}

/* -log p(ids[i + 1]) under logits row i, summed. */
static double nll_sum(const float *logits, const int32_t *ids, int n, int vocab)
{
    double sum = 0.0;
    for (int i = 0; i + 1 < n; i++) {
        const float *x = logits + (size_t)i * vocab;
        double mx = x[0], z = 0.0;
        for (int j = 1; j < vocab; j++)
            mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < vocab; j++)
            z += exp(x[j] - mx);
        sum += -(x[ids[i + 1]] - mx - log(z));
    }
    return sum;
}

/* Bounds of q8_0 K/V against f16 K/V, teacher-forced along the reference texts (the same
 * tokens fed to both): top-1 agreement at least Q8_TOP1_FLOOR of positions, and
 * perplexity within Q8_PPL_BOUND of f16's (relative). Measured on the f32, Q8_0 and Q4_K_M
 * files of stories260K-k (head_dim 8: one scale per row of a kv head): see the printout. */
#define Q8_TOP1_FLOOR 0.95
#define Q8_PPL_BOUND 0.02

static void test_q8_against_f16_on_the_model(void **state)
{
    (void)state;
    static const char *const types[] = {"f32", "Q8_0", "Q4_K_M"};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        ts_model *m = su_load_type(types[t]);
        int vocab = m->cfg.vocab_size, agree = 0, positions = 0;
        double nll_q8 = 0, nll_f16 = 0;
        for (int p = 0; p < 2; p++) {
            int n = 0;
            int32_t *ids = read_text(m, p ? "02" : "01", &n);
            assert_true(n > 100);
            float *a = logits_along(m, ids, n, KV_DTYPE_Q8_0);
            float *b = logits_along(m, ids, n, KV_DTYPE_F16);
            for (int i = 0; i + 1 < n; i++)
                agree += su_argmax(a + (size_t)i * vocab, vocab) ==
                         su_argmax(b + (size_t)i * vocab, vocab);
            positions += n - 1;
            /* the two caches differ: q8_0 is not f16 under another name */
            assert_true(su_rel_err(a, b, n - 1, vocab) > 0.0);
            nll_q8 += nll_sum(a, ids, n, vocab);
            nll_f16 += nll_sum(b, ids, n, vocab);
            free(a);
            free(b);
            free(ids);
        }
        double ppl_q8 = exp(nll_q8 / positions), ppl_f16 = exp(nll_f16 / positions);
        printf("  %-6s K/V q8_0 vs f16: top-1 %d/%d (%.1f%%), perplexity %.4f vs %.4f (%+.2f%%)\n",
               types[t], agree, positions, 100.0 * agree / positions, ppl_q8, ppl_f16,
               100.0 * (ppl_q8 / ppl_f16 - 1.0));
        assert_true(agree >= Q8_TOP1_FLOOR * positions);
        assert_true(fabs(ppl_q8 / ppl_f16 - 1.0) <= Q8_PPL_BOUND);
        ts_model_free(m);
    }
}

/* The reference pass rounding its K/V through q8_0 against the batched pass on a q8_0
 * pool: nearly the same stored values (a K/V value whose f32 sums differ in the last bit
 * between the passes may round to the neighbouring int8 step), so their logits stay
 * several times closer than the reference's with q8_0 and with exact K/V (measured
 * 4.7e-3 against 3.8e-2). */
static void test_reference_pass_with_q8(void **state)
{
    (void)state;
    ts_model *m = su_load_type("f32");
    int n = 0, vocab = m->cfg.vocab_size;
    int32_t *ids = read_text(m, "01", &n);
    n = n > 60 ? 60 : n;
    float *batched = logits_along(m, ids, n, KV_DTYPE_Q8_0);
    float *ref_q8 = malloc((size_t)(n - 1) * vocab * sizeof(float));
    float *ref_f32 = malloc((size_t)(n - 1) * vocab * sizeof(float));
    assert_non_null(ref_q8);
    assert_non_null(ref_f32);
    for (int pass = 0; pass < 2; pass++) {
        ref_forward f;
        assert_int_equal(ref_forward_init(&f, m, n, NULL), TS_OK);
        f.kv_type = pass ? SIMD_KV_Q8_0 : SIMD_KV_F32;
        float *dst = pass ? ref_q8 : ref_f32;
        for (int i = 0; i + 1 < n; i++)
            memcpy(dst + (size_t)i * vocab, ref_forward_token(&f, ids[i], i),
                   (size_t)vocab * sizeof(float));
        ref_forward_free(&f);
    }
    double same = su_rel_err(batched, ref_q8, n - 1, vocab);
    double exact = su_rel_err(ref_f32, ref_q8, n - 1, vocab);
    printf("  batched q8_0 vs reference q8_0: %.2e; reference q8_0 vs exact K/V: %.2e\n", same,
           exact);
    assert_true(same < 1e-2);
    assert_true(exact > 4 * same);
    free(batched);
    free(ref_q8);
    free(ref_f32);
    free(ids);
    ts_model_free(m);
}

/* Bytes of a and b that agree from the start. */
static size_t common_prefix(const char *a, const char *b)
{
    size_t n = 0;
    while (a[n] && a[n] == b[n])
        n++;
    return n;
}

/* The engine with --kv-type q8_0 end to end: it says so, its greedy text of the reference
 * prompts follows f16's for at least Q8_ENGINE_FLOOR of its bytes, and a kv_type past the
 * enum is refused. Free-running texts part at the first near tie (measured on AVX-512:
 * 96% and 61% of the bytes; prompt 02 walks through many ties), so the floor is loose;
 * the teacher-forced test above bounds the quality. */
#define Q8_ENGINE_FLOOR 0.4
static void test_engine_with_q8(void **state)
{
    (void)state;
    ts_model *m = su_load_type("f32");
    char *text[2][2] = {{0}};
    for (int kv = 0; kv < 2; kv++) {
        ts_engine_options o;
        ts_engine_options_default(&o);
        o.kv_type = kv ? TS_KV_Q8_0 : TS_KV_F16;
        ts_engine *e = eu_start(m, &o);
        assert_int_equal(ts_engine_kv_type(e), o.kv_type);
        for (int p = 0; p < 2; p++) {
            char rel[64];
            snprintf(rel, sizeof rel, "reference/stories260K-greedy/0%d.prompt", p + 1);
            size_t len = 0;
            char *prompt = tu_read_file(tu_shared(rel), &len);
            assert_non_null(prompt);
            int n = 0;
            int32_t *ids = eu_tokenize(m, prompt, &n);
            eu_result r = {0};
            ts_request *req = eu_submit(e, ids, n, 120, TS_PRIORITY_NORMAL);
            eu_collect(req, &r);
            ts_request_release(req);
            assert_false(r.error);
            assert_int_equal(r.n_done, 1);
            text[kv][p] = strdup(r.text[0]);
            eu_result_free(&r);
            free(ids);
            free(prompt);
        }
        ts_engine_destroy(e);
    }
    for (int p = 0; p < 2; p++) {
        size_t same = common_prefix(text[0][p], text[1][p]), len = strlen(text[0][p]);
        printf("  engine, prompt %d: q8_0 K/V follows f16's text for %zu of %zu bytes\n", p + 1,
               same, len);
        assert_true(len > 100);
        assert_true(same >= Q8_ENGINE_FLOOR * len);
        free(text[0][p]);
        free(text[1][p]);
    }
    ts_engine_options bad;
    ts_engine_options_default(&bad);
    bad.kv_type = (ts_kv_type)(TS_KV_Q8_0 + 1);
    ts_engine *e = NULL;
    assert_int_equal(ts_engine_create(m, &bad, &e, NULL), TS_ERR_INVALID_ARG);
    assert_null(e);
    ts_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_rows_round_trip),
        cmocka_unit_test(test_q8_against_f16_on_the_model),
        cmocka_unit_test(test_reference_pass_with_q8),
        cmocka_unit_test(test_engine_with_q8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
