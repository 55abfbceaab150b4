/* bench_pptg.c: llama-batched-bench's schedule on tessera's forward pass: every prompt
 * prefilled first (steps of up to step_tokens rows, prompts packed in order, logits for
 * each prompt's last row), then n_tokens decode steps of all streams together (one row a
 * stream, logits for every row, no sampling: a random token a row, as the peer feeds).
 * The same KV pool type, gemm path and threads as the engine would use. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"
#include "common/clock.h"
#include "kv/kv.h"
#include "model/forward_batch.h"

static int64_t blocks_for(int64_t tokens) { return (tokens + TS_KV_BLOCK - 1) / TS_KV_BLOCK; }

/* The pool type the engine would choose for these options. */
static kv_dtype pool_type(const ts_model *m, ts_kv_type t)
{
    if (t == TS_KV_AUTO)
        t = model_all_f32(&m->w) ? TS_KV_F32 : TS_KV_F16;
    return t == TS_KV_Q8_0 ? KV_DTYPE_Q8_0 : t == TS_KV_F16 ? KV_DTYPE_F16 : KV_DTYPE_F32;
}

/* What one run holds: the pool, a table and prompt per stream, a step's rows. */
typedef struct pptg {
    const ts_model *m;
    const simd_kernels *k;
    kv_pool *pool;
    fwd_state fs;
    kv_table *tables; /* (n) */
    int32_t *prompts; /* (n, prompt_len) */
    int32_t *rows;    /* (max_rows) a step's tokens */
    fwd_seq *seqs;    /* (n) a step's sequences */
    int n, prompt_len, max_rows;
    uint64_t rng;     /* the tokens' xorshift64* state */
} pptg;

/* The next random token id: the prompts' draws, then the decode rows'. */
static int32_t random_token(pptg *p)
{
    uint64_t *s = &p->rng;
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (int32_t)((*s * 0x2545F4914F6CDD1DULL >> 33) % (uint64_t)p->m->cfg.vocab_size);
}

static void pptg_free(pptg *p)
{
    for (int i = 0; p->tables && i < p->n; i++)
        kv_table_free(p->pool, &p->tables[i]);
    fwd_state_free(&p->fs);
    kv_pool_free(p->pool);
    free(p->tables);
    free(p->prompts);
    free(p->rows);
    free(p->seqs);
}

static ts_status pptg_init(pptg *p, const ts_model *m, const ts_engine_options *o,
                           const bench_pptg_config *c, ts_error *err)
{
    memset(p, 0, sizeof *p);
    p->m = m;
    p->k = simd_init();
    p->n = c->n_seqs;
    p->prompt_len = c->prompt_len;
    int budget = ts_engine_step_tokens(o, m);
    p->max_rows = budget > c->n_seqs ? budget : c->n_seqs;
    kv_config kc = {.n_layers = m->cfg.n_layers, .n_kv_heads = m->cfg.n_kv_heads,
                    .head_dim = m->cfg.head_dim, .dtype = pool_type(m, o->kv_type),
                    .n_blocks = (int64_t)c->n_seqs * (blocks_for(c->prompt_len + c->n_tokens) + 1),
                    .to_f16 = p->k->f32_to_f16};
    ts_status st = kv_pool_init(&p->pool, &kc, err);
    if (st == TS_OK)
        st = fwd_state_init(&p->fs, m, p->max_rows, c->n_seqs, err);
    if (st != TS_OK)
        return st;
    p->fs.gemm_path = (fwd_gemm_path)o->gemm;
    p->tables = calloc((size_t)c->n_seqs, sizeof *p->tables);
    p->prompts = malloc((size_t)c->n_seqs * (size_t)c->prompt_len * sizeof *p->prompts);
    p->rows = malloc((size_t)p->max_rows * sizeof *p->rows);
    p->seqs = malloc((size_t)c->n_seqs * sizeof *p->seqs);
    if (!p->tables || !p->prompts || !p->rows || !p->seqs)
        return ts_error_set(err, TS_ERR_NOMEM, "bench: out of memory for %d streams", c->n_seqs);
    p->rng = c->seed * 0x9E3779B97F4A7C15ULL + 1; /* prompts of the seed */
    for (size_t i = 0; i < (size_t)c->n_seqs * (size_t)c->prompt_len; i++)
        p->prompts[i] = random_token(p);
    for (int i = 0; i < c->n_seqs; i++)
        kv_table_init(&p->tables[i]);
    kv_pool_prefault(p->pool);
    return TS_OK;
}

/* Adds rows [j0, j0 + n) of stream i at positions from j0 to the step being built; logits
 * when they end its tokens (end). */
static ts_status add_rows(pptg *p, fwd_batch *b, int i, int j0, int n, const int32_t *tok,
                          bool end, ts_error *err)
{
    ts_status st = kv_table_reserve(p->pool, &p->tables[i], n, err);
    if (st != TS_OK)
        return st;
    memcpy(p->rows + b->n_rows, tok, (size_t)n * sizeof *tok);
    p->seqs[b->n_seqs++] = (fwd_seq){.row0 = b->n_rows, .n_rows = n, .pos0 = j0,
                                     .table = &p->tables[i],
                                     .logits_row = end ? b->n_logits++ : -1};
    b->n_rows += n;
    return TS_OK;
}

/* Every prompt, in steps of up to max_rows rows. */
static ts_status prefill_all(pptg *p, ts_error *err)
{
    int i = 0, j = 0;
    ts_status st = TS_OK;
    while (st == TS_OK && i < p->n) {
        fwd_batch b = {.tokens = p->rows, .seqs = p->seqs};
        while (st == TS_OK && i < p->n && b.n_rows < p->max_rows) {
            int n = p->prompt_len - j < p->max_rows - b.n_rows ? p->prompt_len - j
                                                                 : p->max_rows - b.n_rows;
            st = add_rows(p, &b, i, j, n, p->prompts + (size_t)i * p->prompt_len + j,
                          j + n == p->prompt_len, err);
            j += n;
            if (j == p->prompt_len)
                i++, j = 0;
        }
        if (st == TS_OK)
            st = forward_batch(&p->fs, p->m, p->pool, p->k, &b, err);
    }
    return st;
}

/* One decode step of every stream at position pos, each row a random token: a mixture's
 * rows then route as the peer's do (a token repeated every step would pick the same
 * experts each step). */
static ts_status decode_all(pptg *p, int pos, ts_error *err)
{
    fwd_batch b = {.tokens = p->rows, .seqs = p->seqs};
    ts_status st = TS_OK;
    for (int i = 0; st == TS_OK && i < p->n; i++) {
        int32_t tok = random_token(p);
        st = add_rows(p, &b, i, pos, 1, &tok, true, err);
    }
    return st == TS_OK ? forward_batch(&p->fs, p->m, p->pool, p->k, &b, err) : st;
}

ts_status bench_pptg_run(bench_pptg *out, const ts_model *m, const ts_engine_options *o,
                         const bench_pptg_config *c, ts_error *err)
{
    memset(out, 0, sizeof *out);
    if (c->n_seqs < 1 || c->n_seqs > 4096 || c->prompt_len < 1 || c->n_tokens < 1 ||
        (int64_t)c->prompt_len + c->n_tokens > m->cfg.context_len)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "bench pp/tg: need 1..4096 streams and prompt + n within the "
                            "model's context of %d", m->cfg.context_len);
    if (o->n_threads > 0)
        omp_set_num_threads(o->n_threads);
    pptg p;
    ts_status st = pptg_init(&p, m, o, c, err);
    /* warm-up: one row of stream 0 (pages the weights in, starts the threads), then its
     * table starts over */
    if (st == TS_OK) {
        int n = p.n;
        p.n = 1;
        st = decode_all(&p, 0, err);
        p.n = n;
        kv_table_release(p.pool, &p.tables[0]);
    }
    double t0 = clock_now_s();
    if (st == TS_OK)
        st = prefill_all(&p, err);
    double t1 = clock_now_s();
    (void)fwd_moe_take_counts(&p.fs); /* the decode steps' from here */
    for (int t = 0; st == TS_OK && t < c->n_tokens; t++)
        st = decode_all(&p, c->prompt_len + t, err);
    double t2 = clock_now_s();
    if (st == TS_OK) {
        out->n_seqs = c->n_seqs;
        fwd_moe_counts mo = fwd_moe_take_counts(&p.fs);
        out->moe_layers = mo.layers;
        out->experts_read = mo.experts_read;
        out->expert_pairs = mo.pairs;
        out->t_pp = t1 - t0;
        out->t_tg = t2 - t1;
        double pp = (double)c->n_seqs * c->prompt_len, tg = (double)c->n_seqs * c->n_tokens;
        out->s_pp = out->t_pp > 0 ? pp / out->t_pp : 0.0;
        out->s_tg = out->t_tg > 0 ? tg / out->t_tg : 0.0;
        out->s = t2 > t0 ? (pp + tg) / (t2 - t0) : 0.0;
    }
    pptg_free(&p);
    return st;
}
