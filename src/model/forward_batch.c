/* forward_batch.c: the batched forward pass over the paged KV cache. Each weight matrix
 * is read once per step by one GEMM over all rows in its own type (forward_gemm.c);
 * attention runs per (chunk of rows, run of kv heads) in parallel through the SIMD kernels;
 * the whole step runs on one OpenMP team where no matrix goes to OpenBLAS. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/run_delay.h"
#include "model/encoder.h"
#include "model/forward_batch.h"

/* Activation buffers for the forms the model's matrices take, for the longest input. */
static ts_status state_qbuf_init(fwd_state *s, const ts_model *m, ts_error *err)
{
    const ts_model_config *c = &m->cfg;
    int n = model_matrices(&m->w);
    const simd_qmat **mats = malloc((size_t)n * sizeof *mats);
    if (!mats)
        return ts_error_set(err, TS_ERR_NOMEM, "matrix list of %d layers", c->n_layers);
    for (int i = 0; i < n; i++)
        mats[i] = model_matrix(&m->w, i);
    int q_dim = c->n_heads * c->head_dim, max_k = c->dim > q_dim ? c->dim : q_dim;
    max_k = c->hidden_dim > max_k ? c->hidden_dim : max_k;
    max_k = c->shared_ffn_dim > max_k ? c->shared_ffn_dim : max_k;
    /* a mixture's passes run on every (row, expert) pair of the step */
    int pairs = s->max_rows * (c->n_experts > 0 ? c->n_experts_used : 1);
    int rows = pairs > s->max_logits ? pairs : s->max_logits;
    ts_status st = fwd_qbuf_init(&s->qbuf, mats, n, rows, max_k, err);
    free(mats);
    return st;
}

/* A mixture of experts' buffers for steps of s->max_rows rows; all NULL for a dense model. */
static ts_status moe_init(fwd_moe *mo, const ts_model_config *c, int max_rows, ts_error *err)
{
    memset(mo, 0, sizeof *mo);
    if (c->n_experts == 0)
        return TS_OK;
    size_t T = (size_t)max_rows, E = (size_t)c->n_experts, TU = T * c->n_experts_used;
    size_t sh = (size_t)c->shared_ffn_dim;
    mo->col = (int)(2 * sh);
    mo->ld = (int)(E + (sh > 0 ? 2 * sh + 1 : 0));
    mo->router = malloc(T * (size_t)mo->ld * sizeof(float));
    if (sh > 0 && !(mo->shared = malloc(T * (size_t)c->dim * sizeof(float))))
        return ts_error_set(err, TS_ERR_NOMEM, "shared expert buffers for %d rows", max_rows);
    mo->expert = malloc(TU * sizeof(int32_t));
    mo->weight = malloc(TU * sizeof(float));
    mo->slot = malloc(TU * sizeof(int32_t));
    mo->src = malloc(TU * sizeof(int32_t));
    mo->count = malloc(E * sizeof(int32_t));
    mo->first = malloc(E * sizeof(int32_t));
    mo->groups = calloc(2 * E, sizeof(fwd_group));
    mo->scratch = malloc((E * FWD_MAX_PARTS + 1) * sizeof(int));
    mo->in = malloc(TU * (size_t)c->dim * sizeof(float));
    mo->gu = malloc(TU * 2 * (size_t)c->hidden_dim * sizeof(float));
    mo->out = malloc(TU * (size_t)c->dim * sizeof(float));
    if (!mo->router || !mo->expert || !mo->weight || !mo->slot || !mo->src || !mo->count ||
        !mo->first || !mo->groups || !mo->scratch || !mo->in || !mo->gu || !mo->out)
        return ts_error_set(err, TS_ERR_NOMEM, "mixture-of-experts buffers for %d rows",
                            max_rows);
    return TS_OK;
}

static void moe_free(fwd_moe *mo)
{
    free(mo->router);
    free(mo->shared);
    free(mo->expert);
    free(mo->weight);
    free(mo->slot);
    free(mo->src);
    free(mo->count);
    free(mo->first);
    free(mo->groups);
    free(mo->scratch);
    free(mo->in);
    free(mo->gu);
    free(mo->out);
    memset(mo, 0, sizeof *mo);
}

/* A step's rows stay below 2^CHUNK_ROW_BITS: an attention chunk's sort key holds its cost
 * above its first row (attention_plan). */
enum { CHUNK_ROW_BITS = 24 };

ts_status fwd_state_init(fwd_state *s, const ts_model *m, int max_rows, int max_logits,
                         ts_error *err)
{
    const ts_model_config *c = &m->cfg;
    memset(s, 0, sizeof *s);
    s->gemm_path = FWD_GEMM_AUTO;
    for (int i = 1; i < model_matrices(&m->w); i++)
        s->f32_layers |= model_matrix(&m->w, i)->N > 0 && model_matrix(&m->w, i)->type == QT_F32;
    if (max_rows < 1 || max_rows >= 1 << CHUNK_ROW_BITS)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "steps of %d rows: 1 to %d", max_rows,
                            (1 << CHUNK_ROW_BITS) - 1);
    s->max_rows = max_rows;
    s->max_logits = max_logits;
    size_t R = (size_t)max_rows, dim = (size_t)c->dim;
    s->x = malloc(R * dim * sizeof(float));
    s->xn = malloc(R * dim * sizeof(float));
    s->qkv = malloc(R * (size_t)model_qkv_rows(c) * sizeof(float));
    s->att = malloc(R * (size_t)c->n_heads * c->head_dim * sizeof(float));
    s->gu = malloc(R * 2 * (size_t)c->hidden_dim * sizeof(float));
    if (c->encoder) {
        s->keys_t = malloc(R * (size_t)c->n_kv_heads * c->head_dim * sizeof(float));
        s->att_pack_off = malloc(R * sizeof(size_t));
    }
    s->pos = malloc(R * sizeof(int32_t));
    s->seq = malloc(R * sizeof(int32_t));
    s->chunk = malloc(R * sizeof(int32_t));
    s->chunk_key = malloc(R * sizeof(int64_t));
    s->chunk_spans = malloc(R * sizeof(int32_t));
    s->chunk_task0 = malloc((R + 1) * sizeof(int32_t));
    size_t split_rows = (size_t)max_logits * FWD_ATT_MAX_SPANS;
    s->att_part = malloc(split_rows * (size_t)c->n_heads * c->head_dim * sizeof(float));
    s->att_lse = malloc(split_rows * (size_t)c->n_heads * sizeof(float));
    s->rope = malloc(R * SIMD_ROPE_TABLE_FLOATS(c->head_dim) * sizeof(float));
    bool swa_rope = c->swa_window > 0 && memcmp(m->w.rope_freq, m->w.rope_freq_swa,
                                                (size_t)c->head_dim / 2 * sizeof(float)) != 0;
    if (swa_rope)
        s->rope_swa = malloc(R * SIMD_ROPE_TABLE_FLOATS(c->head_dim) * sizeof(float));
    s->xs = malloc((size_t)max_logits * dim * sizeof(float));
    /* an encoder has no LM head: its logits buffer is a token one */
    s->logits = malloc(c->encoder ? sizeof(float)
                                  : (size_t)max_logits * c->vocab_size * sizeof(float));
    s->pooled = malloc((size_t)max_logits * dim * sizeof(float));
    ts_status st = state_qbuf_init(s, m, err);
    if (st == TS_OK)
        st = moe_init(&s->moe, c, max_rows, err);
    if (st != TS_OK) {
        fwd_state_free(s);
        return st;
    }
    if (!s->x || !s->xn || !s->qkv || !s->att || !s->gu ||
        (c->encoder && (!s->keys_t || !s->att_pack_off)) || !s->pos || !s->seq || !s->chunk ||
        !s->chunk_key || !s->chunk_spans || !s->chunk_task0 || !s->att_part || !s->att_lse ||
        !s->rope || (swa_rope && !s->rope_swa) || !s->xs || !s->logits || !s->pooled) {
        fwd_state_free(s);
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate step buffers for %d rows",
                            max_rows);
    }
    return TS_OK;
}

fwd_moe_counts fwd_moe_take_counts(fwd_state *s)
{
    fwd_moe_counts c = s->moe.counts;
    s->moe.counts = (fwd_moe_counts){0};
    return c;
}

int fwd_scored_ids(const fwd_state *s, const ts_model *m)
{
    int vocab = m->cfg.vocab_size;
    return s->head_rows > 0 && s->head_rows < vocab ? s->head_rows : vocab;
}

void fwd_state_free(fwd_state *s)
{
    free(s->x);
    free(s->xn);
    free(s->qkv);
    free(s->att);
    free(s->keys_t);
    free(s->att_packs);
    free(s->att_pack_off);
    free(s->gu);
    free(s->pos);
    free(s->seq);
    free(s->chunk);
    free(s->chunk_key);
    free(s->chunk_spans);
    free(s->chunk_task0);
    free(s->att_part);
    free(s->att_lse);
    free(s->rope);
    free(s->rope_swa);
    free(s->xs);
    free(s->logits);
    free(s->pooled);
    fwd_qbuf_free(&s->qbuf);
    moe_free(&s->moe);
    memset(s, 0, sizeof *s);
}

/* One step as its stages see it. forward_batch runs the step either inside one parallel
 * region whose threads all walk the same loop, each stage a worksharing loop that ends at
 * a barrier (team), or on the calling thread with a region per stage where its work is
 * worth one (when OpenBLAS takes a matrix: called inside a region it would run on one
 * thread). */
typedef struct fwd_step {
    fwd_state *s;
    const ts_model *m;
    kv_pool *pool;
    kv_layout lay;
    const simd_kernels *k;
    const fwd_batch *b;
    simd_rope_style rope_style;
    bool team;
    ts_status st;   /* the first K/V store error: shared, read after the store's barrier */
    ts_error *err;
} fwd_step;

/* Runs a stage of the step, a call whose worksharing loops (`omp for`) split its rows: on
 * the step's team as it is, or, where the step has none, in a region of its own when its
 * work reaches min_work (below, the region's start costs more than it saves). */
#define STAGE(f, work, min_work, call)                                   \
    do {                                                                 \
        if ((f)->team) {                                                 \
            call;                                                        \
        } else {                                                         \
            bool stage_parallel_ = (long)(work) >= (long)(min_work);     \
            _Pragma("omp parallel if (stage_parallel_)") call;           \
        }                                                                \
    } while (0)

/* Adds the time since *t to phase and restarts *t. Every thread of a team calls it after
 * the phase's barrier; the first one (the calling thread where there is no team) times. */
static void lap(fwd_state *s, ts_step_phase phase, double *t)
{
    if (omp_get_thread_num() != 0)
        return;
    double now = clock_now_s();
    s->seconds[phase] += now - *t;
    *t = now;
}

/* Below this many floats of work a region of row kernels costs more than it saves. The row
 * kernels (RoPE and K/V stores, the embedding) take about a nanosecond an element or less
 * on one core; a region's start costs 4-6 us on a 16-core Xeon at 16 threads (spinning,
 * bench_layers), so 16 rows of a 2048-wide model (32K elements) are worth splitting: with
 * 64K as the bound, TinyLlama's 16-stream steps spent 2.2-2.4 ms of 25-27 in serial norms
 * and RoPE there, and 1.3-1.7 with 16K. A team splits every stage:
 * there it costs a barrier (1.4 us). The norms and the SwiGLU have no stage: the GEMM
 * that reads their rows runs them (fwd_pre). */
enum { ROW_MIN_WORK = 1 << 14 };

/* Each row's RoPE terms (the windowed layers' too where their base differs) and
 * embedding (the lookup decodes only the rows the step needs; scaled by sqrt(dim) where
 * the family says), rows split: a 512-token prompt's cost ~2 ms on one thread. */
static void embed_rows(const fwd_step *f)
{
    fwd_state *s = f->s;
    const ts_model_config *c = &f->m->cfg;
    const model_weights *w = &f->m->w;
    int hd = c->head_dim;
    float scale = sqrtf((float)c->dim);
#pragma omp for schedule(static)
    for (int r = 0; r < f->b->n_rows; r++) {
        size_t at = (size_t)r * SIMD_ROPE_TABLE_FLOATS(hd);
        simd_rope_table(s->rope + at, s->pos + r, 1, hd, w->rope_freq, f->rope_style);
        if (s->rope_swa)
            simd_rope_table(s->rope_swa + at, s->pos + r, 1, hd, w->rope_freq_swa, f->rope_style);
        float *x = s->x + (size_t)r * c->dim;
        qtype_dequant_row(x,
                          (const char *)w->tok_embd.data +
                              (size_t)f->b->tokens[r] * w->tok_embd.row_bytes,
                          w->tok_embd.type, c->dim);
        for (int i = 0; c->embd_scaled && i < c->dim; i++)
            x[i] *= scale;
    }
}

/* Finishes the new Q, K and V rows of a layer, rows split (a long prompt's rows too: each
 * row writes its own slots of blocks reserved before the step): the family's biases and
 * per-head norms, then RoPE by the layer's table; and writes K and V into each
 * sequence's blocks. A failed store sets f->st. */
static void rope_and_store(fwd_step *f, int layer)
{
    const fwd_state *s = f->s;
    const ts_model_config *c = &f->m->cfg;
    const model_weights *w = &f->m->w;
    int hd = c->head_dim, q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
    size_t qkv_rows = (size_t)model_qkv_rows(c);
    const float *bias = w->qkv_bias ? w->qkv_bias + (size_t)layer * qkv_rows : NULL;
    const float *tables = s->rope_swa && ts_model_layer_window(c, layer) ? s->rope_swa : s->rope;
#pragma omp for schedule(static)
    for (int r = 0; r < f->b->n_rows; r++) {
        float *row = s->qkv + (size_t)r * qkv_rows;
        const float *table = tables + (size_t)r * SIMD_ROPE_TABLE_FLOATS(hd);
        for (size_t i = 0; bias && i < qkv_rows; i++)
            row[i] += bias[i];
        if (c->qk_norm) { /* each head a row of hd */
            f->k->rmsnorm(row, row, w->q_norm + (size_t)layer * hd, c->n_heads, hd, c->rms_eps);
            f->k->rmsnorm(row + q_dim, row + q_dim, w->k_norm + (size_t)layer * hd,
                          c->n_kv_heads, hd, c->rms_eps);
        }
        f->k->rope(row, table, 1, qkv_rows, c->n_heads, hd, f->rope_style);
        f->k->rope(row + q_dim, table, 1, qkv_rows, c->n_kv_heads, hd, f->rope_style);
        ts_error row_err;
        if (kv_table_write(f->pool, f->b->seqs[s->seq[r]].table, layer, s->pos[r], row + q_dim,
                           row + q_dim + kv_dim, &row_err) != TS_OK) {
#pragma omp critical(fwd_store_error)
            if (f->st == TS_OK) {
                f->st = row_err.status;
                *f->err = row_err;
            }
        }
    }
}

/* Query rows of one sequence a task of the attention region: a long prompt's rows spread
 * over the threads (each row attends to its own causal prefix, so a chunk of rows is
 * independent of the others), where one task per sequence and kv head had left a single
 * 512-token prompt of a 4-kv-head model on 4 of 16 threads. */
enum { ATT_CHUNK_ROWS = 32 };

/* Tasks a thread the attention aims at: enough for the threads to even out sequences of
 * different lengths, few enough that taking them costs little (~80 ns each when 16
 * threads ask at once). stories110m's 16-stream decode steps had 16 x 12 tasks of one
 * row and one kv head each, ~1 us or less of work apiece. */
enum { ATT_TASKS_PER_THREAD = 4 };

/* Descending order of int64_t keys. */
static int key_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* Spans a chunk's context is split into: a decoding row (one row that samples) with at
 * least two spans' worth of positions; anything else keeps one. The count depends on the
 * sequence alone, never on the step around it, so its output is the same in any batch. */
static int chunk_spans(const fwd_seq *sq, int n_rows)
{
    if (n_rows != 1 || sq->logits_row < 0)
        return 1;
    int spans = (sq->pos0 + 1) / FWD_ATT_SPAN_MIN;
    return spans < 1 ? 1 : spans > FWD_ATT_MAX_SPANS ? FWD_ATT_MAX_SPANS : spans;
}

/* The step's attention tasks, the same in every layer: the first rows of each sequence's
 * chunks of rows in s->chunk, costliest first (rows x the keys they reach, shared among
 * a chunk's spans: threads take tasks in order, and a 512-token prompt's last chunk costs
 * 31 times its first, so taken last it had kept the other threads waiting for it), each
 * chunk's spans and first task, the kv heads a task covers (one where there are few tasks,
 * as for a long prompt; all where there are many), and the work (~ K/V floats read: each
 * sequence reads its whole context once per kv head) that decides whether they run in
 * parallel. */
static void attention_plan(fwd_state *s, const ts_model_config *c, const fwd_batch *b,
                           int threads)
{
    s->n_chunks = 0;
    s->att_work = 0;
    for (int i = 0; i < b->n_seqs; i++) {
        const fwd_seq *sq = &b->seqs[i];
        for (int j = 0; j < sq->n_rows; j += ATT_CHUNK_ROWS) {
            int64_t n = sq->n_rows - j < ATT_CHUNK_ROWS ? sq->n_rows - j : ATT_CHUNK_ROWS;
            int64_t cost = n * (sq->pos0 + j + (n + 1) / 2) / chunk_spans(sq, (int)n);
            s->chunk_key[s->n_chunks++] = cost << CHUNK_ROW_BITS | (sq->row0 + j);
        }
        s->att_work += (long)(sq->pos0 + sq->n_rows) * c->head_dim * 2 * c->n_kv_heads;
    }
    qsort(s->chunk_key, (size_t)s->n_chunks, sizeof *s->chunk_key, key_desc);
    s->chunk_task0[0] = 0;
    s->att_split = false;
    for (int i = 0; i < s->n_chunks; i++) {
        int r0 = (int32_t)(s->chunk_key[i] & ((1 << CHUNK_ROW_BITS) - 1));
        const fwd_seq *sq = &b->seqs[s->seq[r0]];
        int j0 = r0 - sq->row0;
        s->chunk[i] = r0;
        s->chunk_spans[i] = chunk_spans(
            sq, sq->n_rows - j0 < ATT_CHUNK_ROWS ? sq->n_rows - j0 : ATT_CHUNK_ROWS);
        s->chunk_task0[i + 1] = s->chunk_task0[i] + s->chunk_spans[i];
        s->att_split |= s->chunk_spans[i] > 1;
    }
    long tasks = s->chunk_task0[s->n_chunks];
    int heads = (int)(tasks * c->n_kv_heads / (ATT_TASKS_PER_THREAD * threads));
    s->att_heads = heads < 1 ? 1 : heads > c->n_kv_heads ? c->n_kv_heads : heads;
}

/* Span p of n of the positions [lo, hi] a row attends to: [*begin, *end), cut at whole
 * KV blocks; every position lies in exactly one span. */
static void span_of(int lo, int hi, int p, int n, int *begin, int *end)
{
    long len = (long)hi - lo + 1;
    int b = p == 0 ? lo : (int)(lo + len * p / n) / TS_KV_BLOCK * TS_KV_BLOCK;
    int e = p == n - 1 ? hi + 1 : (int)(lo + len * (p + 1) / n) / TS_KV_BLOCK * TS_KV_BLOCK;
    *begin = b < lo ? lo : b;
    *end = e < *begin ? *begin : e;
}

/* att = causal attention of every sequence's rows over its paged K/V for one layer; the
 * tasks are (chunk of a sequence's rows, span of its context, run of s->att_heads kv
 * heads). A split row's spans go to att_part and att_lse, then merge into att. */
static void attention(const fwd_step *f, int layer)
{
    const fwd_state *s = f->s;
    const ts_model_config *c = &f->m->cfg;
    int nkv = c->n_kv_heads, group = c->n_heads / c->n_kv_heads, heads = s->att_heads;
    int q_dim = c->n_heads * c->head_dim, qkv_rows = model_qkv_rows(c);
    int runs = (nkv + heads - 1) / heads, window = ts_model_layer_window(c, layer);
#pragma omp for schedule(dynamic, 1)
    for (int item = 0; item < s->chunk_task0[s->n_chunks] * runs; item++) {
        int task = item / runs, kv0 = item % runs * heads;
        int lo = 0, hi = s->n_chunks - 1; /* the chunk i with task0[i] <= task < task0[i+1] */
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (s->chunk_task0[mid] <= task)
                lo = mid;
            else
                hi = mid - 1;
        }
        int i = lo, span = task - s->chunk_task0[i], n_spans = s->chunk_spans[i];
        int r0 = s->chunk[i], kv1 = kv0 + heads < nkv ? kv0 + heads : nkv;
        const fwd_seq *sq = &f->b->seqs[s->seq[r0]];
        int j0 = r0 - sq->row0;
        simd_kv_view view = {
            .pool = f->lay.base,
            .type = f->lay.dtype == KV_DTYPE_Q8_0  ? SIMD_KV_Q8_0
                    : f->lay.dtype == KV_DTYPE_F16 ? SIMD_KV_F16
                                                   : SIMD_KV_F32,
            .block_stride = f->lay.block_stride,
            .k_offset = (size_t)layer * f->lay.layer_stride,
            .v_offset = (size_t)layer * f->lay.layer_stride + f->lay.v_offset,
            .head_stride = f->lay.head_stride,
            .block_table = sq->table->blocks,
        };
        simd_attn_shape shape = {
            .n_heads = c->n_heads,
            .n_kv_heads = nkv,
            .head_dim = c->head_dim,
            .pos0 = sq->pos0 + j0,
            .n_rows = sq->n_rows - j0 < ATT_CHUNK_ROWS ? sq->n_rows - j0 : ATT_CHUNK_ROWS,
            .q_stride = (size_t)qkv_rows,
            .out_stride = (size_t)q_dim,
            .scale = c->attn_scale,
            .softcap = c->attn_softcap,
            .window = window,
        };
        float *out = s->att + (size_t)r0 * q_dim;
        if (n_spans > 1) { /* one row: its positions split, the window's if it has one */
            int last = shape.pos0, first = window > 0 && last >= window ? last - window + 1 : 0;
            span_of(first, last, span, n_spans, &shape.span_begin, &shape.span_end);
            size_t slot = (size_t)sq->logits_row * FWD_ATT_MAX_SPANS + span;
            out = s->att_part + slot * q_dim;
            shape.lse = s->att_lse + slot * c->n_heads;
        }
        f->k->attention(out, s->qkv + (size_t)r0 * qkv_rows, &view, &shape, kv0 * group,
                        kv1 * group);
    }
    if (!s->att_split)
        return; /* no merge, and no barrier for one (every thread sees the same plan) */
#pragma omp for schedule(static)
    for (int i = 0; i < s->n_chunks; i++) {
        if (s->chunk_spans[i] == 1)
            continue;
        int r0 = s->chunk[i];
        size_t slot = (size_t)f->b->seqs[s->seq[r0]].logits_row * FWD_ATT_MAX_SPANS;
        simd_attn_merge(s->att + (size_t)r0 * q_dim, s->att_part + slot * q_dim,
                        s->att_lse + slot * c->n_heads, s->chunk_spans[i], c->n_heads,
                        c->head_dim, 0, c->n_heads);
    }
}

/* One GEMM pass (fwd_gemm's contract) on the step's team, or with a region of its own. */
static void gemm(const fwd_step *f, float *out, size_t ldo, float *a, int lda,
                 const fwd_pre *pre, const simd_qmat *const *w, int n_w, int M, float beta)
{
    if (f->team)
        fwd_gemm_team(f->k, &f->s->qbuf, out, ldo, a, lda, pre, w, n_w, M, beta);
    else
        fwd_gemm(f->k, f->s->gemm_path, &f->s->qbuf, out, ldo, a, lda, pre, w, n_w, M, beta);
}

/* x[r] += rmsnorm(y[r]) * weight for the step's rows, rows split: a block's output
 * normalised before the residual add (the family's post-norms; weight NULL: none, y
 * added as it is); y is overwritten. */
static void add_normed(const fwd_step *f, float *y, const float *weight)
{
    const ts_model_config *c = &f->m->cfg;
    int dim = c->dim;
#pragma omp for schedule(static)
    for (int r = 0; r < f->b->n_rows; r++) {
        float *yr = y + (size_t)r * dim, *xr = f->s->x + (size_t)r * dim;
        if (weight)
            f->k->rmsnorm(yr, yr, weight, 1, dim, c->rms_eps);
        for (int i = 0; i < dim; i++)
            xr[i] += yr[i];
    }
}

/* logits = cap * tanh(logits / cap) for the rows that sample (the final soft-cap), in
 * their first `scored` columns (the ids the head scored). */
static void softcap_logits(const fwd_step *f, int scored)
{
    const ts_model_config *c = &f->m->cfg;
    float cap = c->final_softcap, inv = 1.0f / cap;
#pragma omp for collapse(2) schedule(static)
    for (int r = 0; r < f->b->n_logits; r++)
        for (int v = 0; v < scored; v++) {
            float *x = f->s->logits + (size_t)r * c->vocab_size + v;
            *x = cap * tanhf(*x * inv);
        }
}

/* The matrices of parts (n) that hold rows, into out: a fused matrix leaves its other
 * parts empty. Returns how many. */
static int held(const simd_qmat **out, const simd_qmat *const *parts, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (parts[i]->N > 0)
            out[k++] = parts[i];
    return k;
}

/* One block's output projection (the GEMM of the step's rows of a, lda wide, rewritten
 * by pre first, by w) added to the residual stream: straight into x, or through the
 * family's post-norm (into s->xn, which the block no longer needs, then normalised and
 * added). */
static void project_add(fwd_step *f, float *a, int lda, const fwd_pre *pre,
                        const simd_qmat *w, const float *post_norm, double *t)
{
    fwd_state *s = f->s;
    int T = f->b->n_rows, dim = f->m->cfg.dim;
    const simd_qmat *ws[] = {w};
    if (!post_norm) {
        gemm(f, s->x, (size_t)dim, a, lda, pre, ws, 1, T, 1.0f);
        lap(s, TS_PHASE_GEMM, t);
        return;
    }
    gemm(f, s->xn, (size_t)dim, a, lda, pre, ws, 1, T, 0.0f);
    lap(s, TS_PHASE_GEMM, t);
    STAGE(f, (long)T * dim, ROW_MIN_WORK, add_normed(f, s->xn, post_norm));
    lap(s, TS_PHASE_ROWWISE, t);
}

/* ---- a mixture of experts ----------------------------------------------------------- */

/* Each row's experts from its router logits, rows split: the softmax over all experts,
 * the n_used most probable (ties to the lower index), their probabilities renormalised to
 * sum to 1 (as llama.cpp routes Qwen3 and Mixtral models) or kept as they are
 * (experts_unnormed: Qwen2-MoE). */
static void moe_route(const fwd_step *f)
{
    const ts_model_config *c = &f->m->cfg;
    const fwd_moe *mo = &f->s->moe;
    int E = c->n_experts, U = c->n_experts_used;
#pragma omp for schedule(static)
    for (int r = 0; r < f->b->n_rows; r++) {
        float *p = mo->router + (size_t)r * mo->ld + mo->col;
        f->k->softmax(p, (size_t)E);
        int32_t *ex = mo->expert + (size_t)r * U;
        float *w = mo->weight + (size_t)r * U, sum = 0.0f;
        for (int j = 0; j < U; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                bool taken = false;
                for (int i = 0; i < j && !taken; i++)
                    taken = ex[i] == e;
                if (!taken && (best < 0 || p[e] > p[best]))
                    best = e;
            }
            ex[j] = best;
            w[j] = p[best];
            sum += w[j];
        }
        for (int j = 0; j < U && !c->experts_unnormed; j++)
            w[j] /= sum;
    }
}

/* The step's (row, expert) pairs grouped by expert, on one thread: expert e's rows are
 * the moe rows [first[e], first[e] + count[e]) in row order, slot[r][j] is where pair
 * (r, j) went, src the step row of each moe row; and the grouped passes' groups, the
 * expert's gate and up for the first, its down for the second (`part` 0 or 1) is filled
 * in by moe_groups. */
static void moe_sort(const fwd_step *f)
{
    const ts_model_config *c = &f->m->cfg;
    const fwd_moe *mo = &f->s->moe;
    int E = c->n_experts, U = c->n_experts_used, T = f->b->n_rows;
    memset(mo->count, 0, (size_t)E * sizeof *mo->count);
    for (int i = 0; i < T * U; i++)
        mo->count[mo->expert[i]]++;
    for (int e = 0, at = 0; e < E; at += mo->count[e], e++)
        mo->first[e] = at;
    memset(mo->count, 0, (size_t)E * sizeof *mo->count);
    for (int i = 0; i < T * U; i++) { /* pairs in row order: each expert's rows ascending */
        int e = mo->expert[i], at = mo->first[e] + mo->count[e]++;
        mo->slot[i] = at;
        mo->src[at] = i / U;
    }
    fwd_moe_counts *counted = &f->s->moe.counts;
    counted->layers++;
    counted->pairs += (uint64_t)T * U;
    for (int e = 0; e < E; e++)
        counted->experts_read += mo->count[e] > 0;
}

/* The groups of the first (gate | up) or second (down) grouped pass of layer ly, into
 * mo->groups from 0 or from n_experts. */
static void moe_groups(const fwd_step *f, const model_layer *ly, bool down)
{
    const fwd_moe *mo = &f->s->moe;
    int E = f->m->cfg.n_experts;
    for (int e = 0; e < E; e++) {
        const simd_qmat *ex = ly->experts + (size_t)e * MODEL_EXPERT_MATRICES;
        fwd_group *g = &mo->groups[(down ? E : 0) + e];
        g->row0 = mo->first[e];
        g->n_rows = mo->count[e];
        g->n_w = down ? 1 : 2;
        g->w[0] = down ? &ex[MODEL_EXPERT_DOWN] : &ex[MODEL_EXPERT_GATE];
        g->w[1] = &ex[MODEL_EXPERT_UP];
    }
}

/* The pairs grouped by expert and both passes' groups (moe_sort, moe_groups), on one
 * thread of the team. */
static void moe_plan(const fwd_step *f, const model_layer *ly)
{
    moe_sort(f);
    moe_groups(f, ly, false);
    moe_groups(f, ly, true);
}

/* xn[r] = the weighted sum of row r's experts' outputs, in the order of its experts (best
 * first), then the shared expert's output scaled by the sigmoid of its gate logit where
 * the model has one, rows split as add_normed splits them (schedule(static) over the same
 * rows), which reads them with no barrier between: the same sum whatever else the step
 * holds. */
static void moe_combine(const fwd_step *f)
{
    const fwd_moe *mo = &f->s->moe;
    int dim = f->m->cfg.dim, U = f->m->cfg.n_experts_used, E = f->m->cfg.n_experts;
#pragma omp for schedule(static) nowait
    for (int r = 0; r < f->b->n_rows; r++) {
        float *y = f->s->xn + (size_t)r * dim;
        for (int j = 0; j < U; j++) {
            const float *o = mo->out + (size_t)mo->slot[r * U + j] * dim;
            float w = mo->weight[r * U + j];
            for (int i = 0; i < dim; i++)
                y[i] = j == 0 ? w * o[i] : y[i] + w * o[i];
        }
        if (!mo->shared)
            continue;
        float g = mo->router[(size_t)r * mo->ld + mo->col + E], scale = 1.0f / (1.0f + expf(-g));
        const float *o = mo->shared + (size_t)r * dim;
        for (int i = 0; i < dim; i++)
            y[i] += scale * o[i];
    }
}

/* A mixture's feed-forward block: the router's GEMM (the norm inside it, as for a dense
 * block's W1|W3; a shared expert's gate | up and gate logit in the same pass), the
 * routing, the rows gathered by expert, each expert's gate | up and then down multiplied
 * with its rows only (an expert no row chose is not read), the shared expert's down over
 * every row as a dense block's, and the weighted outputs added to the residual stream
 * (through the family's post-norm). */
static void moe_ffn(fwd_step *f, int l, const fwd_pre *act, double *t)
{
    fwd_state *s = f->s;
    const ts_model_config *c = &f->m->cfg;
    const model_weights *w = &f->m->w;
    const model_layer *ly = &w->layers[l];
    fwd_moe *mo = &s->moe;
    int T = f->b->n_rows, dim = c->dim, ffn = c->hidden_dim, pairs = T * c->n_experts_used;
    fwd_pre ffn_norm = {.kind = FWD_PRE_RMSNORM, .x = s->x, .weight = w->rms_ffn + (size_t)l * dim,
                        .eps = c->rms_eps};
    const simd_qmat *front[4];
    int n_front = 0;
    if (mo->shared) {
        front[n_front++] = &ly->shexp_gate;
        front[n_front++] = &ly->shexp_up;
    }
    front[n_front++] = &ly->router;
    if (mo->shared)
        front[n_front++] = &ly->shexp_gate_inp;
    gemm(f, mo->router, (size_t)mo->ld, s->xn, dim, &ffn_norm, front, n_front, T, 0.0f);
    lap(s, TS_PHASE_GEMM, t);
    STAGE(f, (long)T * c->n_experts * 8, ROW_MIN_WORK, moe_route(f));
    if (f->team) {
#pragma omp single
        moe_plan(f, ly);
    } else {
        moe_plan(f, ly);
    }
    lap(s, TS_PHASE_ROWWISE, t);
    /* the step's normalised rows gathered by expert as the pass's own first stage */
    fwd_pre gather = {.kind = FWD_PRE_GATHER, .x = s->xn, .rows = mo->src};
    fwd_gemm_grouped(f->k, &s->qbuf, mo->gu, 2 * (size_t)ffn, mo->in, dim, &gather, mo->groups,
                     c->n_experts, pairs, mo->scratch, f->team);
    fwd_gemm_grouped(f->k, &s->qbuf, mo->out, (size_t)dim, mo->gu, 2 * ffn, act,
                     mo->groups + c->n_experts, c->n_experts, pairs, mo->scratch, f->team);
    if (mo->shared) { /* act(gate) * up of the front pass's first columns, in place */
        const simd_qmat *down[] = {&ly->shexp_down};
        gemm(f, mo->shared, (size_t)dim, mo->router, mo->ld, act, down, 1, T, 0.0f);
    }
    lap(s, TS_PHASE_GEMM, t);
    STAGE(f, (long)pairs * dim, ROW_MIN_WORK, moe_combine(f));
    STAGE(f, (long)T * dim, ROW_MIN_WORK,
          add_normed(f, s->xn, w->rms_post_ffn ? w->rms_post_ffn + (size_t)l * dim : NULL));
    lap(s, TS_PHASE_ROWWISE, t);
}

/* The RMS norm of x's rows by weight w into the GEMM's input rows (fwd_pre). */
static fwd_pre norm_pre(const ts_model_config *c, const float *x, const float *w)
{
    return (fwd_pre){.kind = FWD_PRE_RMSNORM, .x = x, .weight = w, .eps = c->rms_eps};
}

/* Each pooling sequence's chunk into s->pooled (fwd_state.pooled): the rows the model's
 * pooling takes, final-normalised (into xn, free after the layers), summed in row order.
 * Sequences split over the threads. */
static void pool_rows(const fwd_step *f)
{
    fwd_state *s = f->s;
    const ts_model_config *c = &f->m->cfg;
    const fwd_batch *b = f->b;
    int dim = c->dim;
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < b->n_seqs; i++) {
        const fwd_seq *sq = &b->seqs[i];
        if (sq->pool_row < 0)
            continue;
        float *out = s->pooled + (size_t)sq->pool_row * dim;
        memset(out, 0, (size_t)dim * sizeof(float));
        int first = sq->row0, last = sq->row0 + sq->n_rows - 1;
        if (c->pooling == TS_POOLING_CLS)
            last = sq->pos0 == 0 ? first : first - 1;
        else if (c->pooling == TS_POOLING_LAST)
            first = last;
        for (int r = first; r <= last; r++) {
            float *xn = s->xn + (size_t)r * dim;
            f->k->rmsnorm(xn, s->x + (size_t)r * dim, f->m->w.rms_final, 1, dim, c->rms_eps);
            for (int d = 0; d < dim; d++)
                out[d] += xn[d];
        }
    }
}

/* The step's rows through the embedding, the layers and the LM head: run by every
 * thread of the team, or by the calling thread alone. */
static void run_layers(fwd_step *f)
{
    fwd_state *s = f->s;
    const ts_model_config *c = &f->m->cfg;
    const model_weights *w = &f->m->w;
    const fwd_batch *b = f->b;
    int T = b->n_rows, dim = c->dim, ffn = c->hidden_dim, qkv_rows = model_qkv_rows(c);
    double t = clock_now_s();
    STAGE(f, (long)T * dim, ROW_MIN_WORK, embed_rows(f));
    lap(s, TS_PHASE_ROWWISE, &t);
    fwd_pre act = {.kind = c->ffn_act == TS_FFN_GELU_TANH ? FWD_PRE_GELU_MUL : FWD_PRE_SILU_MUL};
    for (int l = 0; l < c->n_layers; l++) {
        const model_layer *ly = &w->layers[l];
        const simd_qmat *qkv_parts[] = {&ly->wq, &ly->wk, &ly->wv}, *ffn_parts[] = {&ly->w1, &ly->w3};
        const simd_qmat *qkv[3], *w13[2];
        int n_qkv = held(qkv, qkv_parts, 3), n_w13 = held(w13, ffn_parts, 2);
        size_t ld = (size_t)l * dim;
        /* attention block: the norm runs inside the QKV GEMM, on the rows it quantizes */
        fwd_pre att_norm = norm_pre(c, s->x, w->rms_att + ld);
        gemm(f, s->qkv, (size_t)qkv_rows, s->xn, dim, &att_norm, qkv, n_qkv, T, 0.0f);
        lap(s, TS_PHASE_GEMM, &t);
        STAGE(f, (long)T * qkv_rows, ROW_MIN_WORK, rope_and_store(f, l));
        if (f->st != TS_OK)
            return; /* every thread: f->st is read after the store's barrier */
        lap(s, TS_PHASE_ROWWISE, &t);
        STAGE(f, s->att_work, FWD_PARALLEL_MIN_WORK, attention(f, l));
        lap(s, TS_PHASE_ATTENTION, &t);
        project_add(f, s->att, ly->wo.K, NULL, &ly->wo,
                    w->rms_post_att ? w->rms_post_att + ld : NULL, &t);

        if (c->n_experts > 0) {
            moe_ffn(f, l, &act, &t);
            continue;
        }
        /* feed-forward block: the norm inside W1|W3's GEMM, act(gate) * up inside W2's */
        fwd_pre ffn_norm = norm_pre(c, s->x, w->rms_ffn + ld);
        gemm(f, s->gu, 2 * (size_t)ffn, s->xn, dim, &ffn_norm, w13, n_w13, T, 0.0f);
        lap(s, TS_PHASE_GEMM, &t);
        project_add(f, s->gu, 2 * ffn, &act, &ly->w2,
                    w->rms_post_ffn ? w->rms_post_ffn + ld : NULL, &t);
    }

    if (b->n_pooled > 0)
        pool_rows(f);
    /* LM head, only for the rows that sample or are scored */
    if (b->n_logits > 0) {
#pragma omp for schedule(static)
        for (int i = 0; i < b->n_seqs; i++) {
            const fwd_seq *sq = &b->seqs[i];
            /* its last rows: every one (all_logits, ending at logits_row), or the
             * decoded row and its drafts (logits_rows, from logits_row) */
            int nl = sq->all_logits ? sq->n_rows : sq->logits_rows > 1 ? sq->logits_rows : 1;
            int first = sq->all_logits ? sq->logits_row - nl + 1 : sq->logits_row;
            if (sq->logits_row >= 0)
                memcpy(s->xs + (size_t)first * dim,
                       s->x + (size_t)(sq->row0 + sq->n_rows - nl) * dim,
                       (size_t)nl * dim * sizeof(float));
        }
        fwd_pre final_norm = norm_pre(c, s->xs, w->rms_final);
        simd_qmat head = w->output; /* its first rows: a prefix of the pack too */
        head.N = fwd_scored_ids(s, f->m);
        const simd_qmat *out[] = {&head};
        gemm(f, s->logits, (size_t)c->vocab_size, s->xs, dim, &final_norm, out, 1, b->n_logits,
             0.0f);
        if (c->final_softcap > 0.0f)
            STAGE(f, (long)b->n_logits * head.N, ROW_MIN_WORK, softcap_logits(f, head.N));
    }
    lap(s, TS_PHASE_LM_HEAD, &t);
}

ts_status forward_batch(fwd_state *s, const ts_model *m, kv_pool *pool, const simd_kernels *k,
                        const fwd_batch *b, ts_error *err)
{
    const ts_model_config *c = &m->cfg;
    int T = b->n_rows, threads = omp_get_max_threads();
    if (T > s->max_rows || b->n_logits > s->max_logits || b->n_pooled > s->max_logits)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "step of %d rows / %d logits / %d pooled over %d / %d", T,
                            b->n_logits, b->n_pooled, s->max_rows, s->max_logits);
    for (int r = 0; r < T; r++)
        if (b->tokens[r] < 0 || b->tokens[r] >= c->vocab_size)
            return ts_error_set(err, TS_ERR_INVALID_ARG, "token id %d outside the vocabulary",
                                b->tokens[r]);
    if (c->encoder) /* whole sequences, no K/V: the encoder's own pass */
        return forward_encoder(s, m, k, b, err);

    for (int i = 0; i < b->n_seqs; i++)
        for (int j = 0; j < b->seqs[i].n_rows; j++) {
            int r = b->seqs[i].row0 + j;
            s->pos[r] = b->seqs[i].pos0 + j;
            s->seq[r] = i;
        }
    attention_plan(s, c, b, threads);
    fwd_step f = {
        .s = s, .m = m, .pool = pool, .lay = kv_pool_layout(pool), .k = k, .b = b,
        .rope_style = c->rope_neox ? SIMD_ROPE_NEOX : SIMD_ROPE_NORMAL, .st = TS_OK, .err = err,
    };
    /* One region for the whole step where nothing in it calls OpenBLAS: each stage then
     * costs a barrier (1.4 us on a 16-core Xeon at 16 threads) instead of a region's
     * start (4.5 us), about 90-180 of them a step. */
    f.team = threads > 1 &&
             !(s->f32_layers && fwd_gemm_takes_blas(k, s->gemm_path, T)) &&
             !(m->w.output.type == QT_F32 && fwd_gemm_takes_blas(k, s->gemm_path, b->n_logits));
    s->team_threads = 0;
    if (f.team) {
        /* how long each thread waited for a core since its last step: the engine's team
         * size (engine/team.h) follows the threads that did */
#pragma omp parallel
        {
            run_layers(&f);
            int i = omp_get_thread_num(), n = omp_get_num_threads();
            if (n <= FWD_TEAM_MAX) {
                s->waited[i] = run_delay_since_s();
                if (i == 0)
                    s->team_threads = n;
            }
        }
    } else {
        run_layers(&f);
    }
    return f.st;
}
