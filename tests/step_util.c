/* step_util.c: stepping models through the batched forward pass in tests, and the paths
 * of the stories260K-k files. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "step_util.h"
#include "util.h"

const char *const su_types[SU_N_TYPES] = {"f32",  "F16",    "BF16",   "Q8_0",   "Q4_0",
                                          "Q4_1", "Q5_0",   "Q5_1",   "Q2_K",   "Q3_K_M",
                                          "Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL",
                                          "IQ4_XS"};

const char *su_kpath(const char *fmt, const char *type)
{
    static char buf[4096], rel[256];
    snprintf(rel, sizeof rel, fmt, type);
    const char *dir = getenv("TESSERA_BUILD_DIR"); /* binaries run elsewhere (a bench host) */
    snprintf(buf, sizeof buf, "%s/stories260K-k/%s", dir && *dir ? dir : TS_BUILD_DIR, rel);
    return buf;
}

ts_model *su_load_path(const char *path)
{
    ts_model *m = NULL;
    ts_error err = {0};
    if (ts_model_load(path, NULL, &m, &err) != TS_OK)
        fail_msg("loading %s: %s", path, err.msg);
    return m;
}

ts_model *su_load_type(const char *type)
{
    return su_load_path(su_kpath("stories260K-k-%s.gguf", type));
}

int su_argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

static double max_abs(const float *x, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

double su_rel_err(const float *a, const float *b, int rows, int vocab)
{
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        const float *x = a + (size_t)r * vocab, *y = b + (size_t)r * vocab;
        double d = 0;
        for (int i = 0; i < vocab; i++)
            d = fmax(d, fabs((double)x[i] - y[i]));
        worst = fmax(worst, d / fmax(1.0, max_abs(y, vocab)));
    }
    return worst;
}

void su_runner_init(su_runner *r, const ts_model *m, const simd_kernels *k, int max_rows)
{
    su_runner_init_kv(r, m, k, max_rows, KV_DTYPE_F32);
}

void su_runner_init_kv(su_runner *r, const ts_model *m, const simd_kernels *k, int max_rows,
                       kv_dtype dtype)
{
    memset(r, 0, sizeof *r);
    r->m = m;
    r->k = k;
    kv_config kc = {.n_layers = m->cfg.n_layers, .n_kv_heads = m->cfg.n_kv_heads,
                    .head_dim = m->cfg.head_dim, .dtype = dtype, .n_blocks = 64};
    assert_int_equal(kv_pool_init(&r->pool, &kc, NULL), TS_OK);
    for (int s = 0; s < SU_MAX_SEQS; s++)
        kv_table_init(&r->tables[s]);
    assert_int_equal(fwd_state_init(&r->fs, m, max_rows, SU_MAX_SEQS, NULL), TS_OK);
}

void su_runner_free(su_runner *r)
{
    for (int s = 0; s < SU_MAX_SEQS; s++)
        kv_table_free(r->pool, &r->tables[s]);
    fwd_state_free(&r->fs);
    kv_pool_free(r->pool);
}

void su_runner_step(su_runner *r, int32_t *const *toks, const int *cnt, float **out)
{
    fwd_seq seqs[SU_MAX_SEQS];
    int32_t rows_tok[512];
    int n = 0, rows = 0;
    for (int s = 0; s < SU_MAX_SEQS; s++) {
        if (cnt[s] == 0)
            continue;
        assert_true(rows + cnt[s] <= (int)(sizeof rows_tok / sizeof *rows_tok));
        assert_int_equal(kv_table_reserve(r->pool, &r->tables[s], cnt[s], NULL), TS_OK);
        memcpy(rows_tok + rows, toks[s], (size_t)cnt[s] * sizeof(int32_t));
        seqs[n] = (fwd_seq){.row0 = rows, .n_rows = cnt[s], .pos0 = r->pos[s],
                            .table = &r->tables[s], .logits_row = n};
        rows += cnt[s];
        n++;
    }
    fwd_batch b = {.n_rows = rows, .tokens = rows_tok, .n_seqs = n, .seqs = seqs, .n_logits = n};
    ts_error err = {0};
    if (forward_batch(&r->fs, r->m, r->pool, r->k, &b, &err) != TS_OK)
        fail_msg("forward_batch: %s", err.msg);
    int vocab = r->m->cfg.vocab_size;
    for (int i = 0, s = 0; s < SU_MAX_SEQS; s++) {
        if (cnt[s] == 0)
            continue;
        memcpy(out[s], r->fs.logits + (size_t)i++ * vocab, (size_t)vocab * sizeof(float));
        r->pos[s] += cnt[s];
    }
}

double su_step_rss_cost(const ts_model *m, long before, double *kv_bytes)
{
    su_runner r;
    su_runner_init(&r, m, simd_init(), 8);
    kv_pool_prefault(r.pool);
    kv_stats ks;
    kv_pool_stats(&ks, r.pool);
    *kv_bytes = (double)ks.bytes_per_block * (double)ks.blocks_total;
    int32_t tok[8] = {1, 20, 30, 40, 50, 60, 70, 80};
    int32_t *toks[SU_MAX_SEQS] = {tok};
    int cnt[SU_MAX_SEQS] = {8};
    float *out[SU_MAX_SEQS] = {malloc((size_t)m->cfg.vocab_size * sizeof(float))};
    assert_non_null(out[0]);
    su_runner_step(&r, toks, cnt, out);
    double cost = (double)(tu_rss_bytes() - before) - *kv_bytes;
    free(out[0]);
    su_runner_free(&r);
    return cost;
}

float *su_logits_of_a(const ts_model *m, bool others, const su_schedule *sch)
{
    enum { LEN = 64, STEPS = SU_A_STEPS };
    int vocab = m->cfg.vocab_size;
    int32_t tok[3][LEN];
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < LEN; i++)
            tok[s][i] = i == 0 ? 1 : 3 + (i * 37 + s * 101) % (vocab - 3);
    assert_true(sch->n_b >= 0 && sch->n_b <= (int)(sizeof sch->b_rows / sizeof *sch->b_rows));
    su_runner r;
    su_runner_init(&r, m, simd_init(), 64);
    float *got = malloc((size_t)STEPS * vocab * sizeof(float)), *out[SU_MAX_SEQS];
    assert_non_null(got);
    for (int s = 0; s < SU_MAX_SEQS; s++)
        assert_non_null(out[s] = malloc((size_t)vocab * sizeof(float)));
    for (int step = 0, done = 0, b_done = 0; step < STEPS; step++) {
        int cnt[SU_MAX_SEQS] = {0};
        int32_t *toks[SU_MAX_SEQS] = {0};
        cnt[0] = step == 0 ? sch->a_prefill : 1;
        toks[0] = tok[0] + done;
        if (others) {
            cnt[1] = step < sch->n_b ? sch->b_rows[step] : 1;
            toks[1] = tok[1] + b_done;
            cnt[2] = 1;
            toks[2] = tok[2] + step;
        }
        assert_true(done + cnt[0] <= LEN && b_done + cnt[1] <= LEN);
        su_runner_step(&r, toks, cnt, out);
        memcpy(got + (size_t)step * vocab, out[0], (size_t)vocab * sizeof(float));
        done += cnt[0];
        b_done += cnt[1];
    }
    for (int s = 0; s < SU_MAX_SEQS; s++)
        free(out[s]);
    su_runner_free(&r);
    return got;
}
