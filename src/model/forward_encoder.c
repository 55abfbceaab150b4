/* forward_encoder.c: the encoder's pass (encoder.h). Each sequence of the step is whole,
 * so attention reads its keys and values straight from the step's QKV rows, every row
 * seeing every row of its sequence; no K/V is kept. The weight GEMMs are the decoder's
 * (fwd_gemm, one per matrix over every row of the step). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "model/encoder.h"
#include "qpack.h"
#include "quant/quantize.h"

/* Below this many floats of row work a parallel region costs more than it saves. */
enum { ENC_ROW_MIN_WORK = 1 << 14 };

enum { LN_LANES = 8 }; /* independent partial sums: the adds need not wait on each other */

/* The sum of (x[i] - shift)^power (power 1 or 2) over x (n), in double: LN_LANES partial
 * sums over i mod LN_LANES, then added in lane order, then the tail. A fixed order that
 * depends on n alone, and the compiler may keep the lanes in vector registers. */
static double ln_sum(const float *x, int n, double shift, int power)
{
    double lane[LN_LANES] = {0};
    int i = 0;
    for (; i + LN_LANES <= n; i += LN_LANES)
        for (int l = 0; l < LN_LANES; l++) {
            double d = x[i + l] - shift;
            lane[l] += power == 1 ? d : d * d;
        }
    double sum = 0.0;
    for (int l = 0; l < LN_LANES; l++)
        sum += lane[l];
    for (; i < n; i++) {
        double d = x[i] - shift;
        sum += power == 1 ? d : d * d;
    }
    return sum;
}

/* out = LayerNorm(x) * wb[0, n) + wb[n, 2n), x (n); out may equal x. Mean and variance
 * summed in double (ln_sum): a row's result does not depend on the rows beside it. */
static void layer_norm(float *out, const float *x, const float *wb, int n, float eps)
{
    double mean = ln_sum(x, n, 0.0, 1) / n;
    double var = ln_sum(x, n, mean, 2) / n;
    float inv = (float)(1.0 / sqrt(var + (double)eps)), m = (float)mean;
    for (int i = 0; i < n; i++)
        out[i] = (x[i] - m) * inv * wb[i] + wb[n + i];
}

/* x[r] = LayerNorm(x[r] + y[r] + bias) by wb for the step's T rows (y, bias dim wide). */
static void add_norm(float *x, const float *y, const float *bias, const float *wb, int T,
                     int dim, float eps)
{
#pragma omp parallel for schedule(static) if ((long)T * dim >= ENC_ROW_MIN_WORK)
    for (int r = 0; r < T; r++) {
        float *xr = x + (size_t)r * dim;
        const float *yr = y + (size_t)r * dim;
        for (int i = 0; i < dim; i++)
            xr[i] += yr[i] + bias[i];
        layer_norm(xr, xr, wb, dim, eps);
    }
}

/* x = LayerNorm(token row + token type 0's row + position row) for every row; the RoPE
 * terms of each row's position where the family rotates. */
static void embed(fwd_state *s, const ts_model *m, const fwd_batch *b, simd_rope_style style)
{
    const ts_model_config *c = &m->cfg;
    const model_weights *w = &m->w;
    const model_encoder *e = w->enc;
    int dim = c->dim, hd = c->head_dim;
#pragma omp parallel for schedule(static) if ((long)b->n_rows * dim >= ENC_ROW_MIN_WORK)
    for (int r = 0; r < b->n_rows; r++) {
        float *x = s->x + (size_t)r * dim;
        qtype_dequant_row(x,
                          (const char *)w->tok_embd.data +
                              (size_t)b->tokens[r] * w->tok_embd.row_bytes,
                          w->tok_embd.type, dim);
        const float *pos = e->pos_embd ? e->pos_embd + (size_t)s->pos[r] * dim : NULL;
        for (int i = 0; i < dim; i++)
            x[i] += e->type_embd[i] + (pos ? pos[i] : 0.0f);
        layer_norm(x, x, e->embd_norm, dim, c->rms_eps);
        if (!c->pos_embd)
            simd_rope_table(s->rope + (size_t)r * SIMD_ROPE_TABLE_FLOATS(hd), s->pos + r, 1, hd,
                            w->rope_freq, style);
    }
}

/* The layer's Q, K and V biases added, then RoPE on Q and K where the family rotates. */
static void finish_qkv(fwd_state *s, const ts_model *m, const simd_kernels *k, int T, int l,
                       simd_rope_style style)
{
    const ts_model_config *c = &m->cfg;
    int hd = c->head_dim, qkv_rows = model_qkv_rows(c), q_dim = c->n_heads * hd;
    const float *bias = m->w.enc->qkv_b + (size_t)l * qkv_rows;
#pragma omp parallel for schedule(static) if ((long)T * qkv_rows >= ENC_ROW_MIN_WORK)
    for (int r = 0; r < T; r++) {
        float *row = s->qkv + (size_t)r * qkv_rows;
        for (int i = 0; i < qkv_rows; i++)
            row[i] += bias[i];
        if (c->pos_embd)
            continue;
        const float *table = s->rope + (size_t)r * SIMD_ROPE_TABLE_FLOATS(hd);
        k->rope(row, table, 1, (size_t)qkv_rows, c->n_heads, hd, style);
        k->rope(row + q_dim, table, 1, (size_t)qkv_rows, c->n_kv_heads, hd, style);
    }
}

/* Query rows of one attention task: a task's scores fit in its scratch (ATT_ROWS x n),
 * and a long sequence's rows spread over the threads. */
enum { ATT_ROWS = 64 };

/* Bidirectional attention of query head h of one sequence (n rows from row0) for its query
 * rows [i0, i0 + m), on the kernel table's gemm_nn: S = Q (scale K)^T against the head's
 * keys scaled and transposed (kt, hd x n), each row's softmax, then S V on the values where
 * they lie in the step's QKV rows. sc (m, n) holds the scores. */
static void attend_rows(fwd_state *s, const ts_model_config *c, const simd_kernels *k,
                        int row0, int n, int h, int i0, int m, const float *kt, float *sc)
{
    int hd = c->head_dim, qkv_rows = model_qkv_rows(c), q_dim = c->n_heads * hd;
    int kvh = h / (c->n_heads / c->n_kv_heads);
    const float *base = s->qkv + (size_t)row0 * qkv_rows;
    const float *vh = base + q_dim + (size_t)c->n_kv_heads * hd + (size_t)kvh * hd;
    const float *q = base + (size_t)i0 * qkv_rows + (size_t)h * hd;
    k->gemm_nn(sc, (size_t)n, q, (size_t)qkv_rows, kt, (size_t)n, m, n, hd);
    for (int i = 0; i < m; i++)
        k->softmax(sc + (size_t)i * n, (size_t)n);
    float *out = s->att + (size_t)(row0 + i0) * q_dim + (size_t)h * hd;
    k->gemm_nn(out, (size_t)q_dim, sc, (size_t)n, vh, (size_t)qkv_rows, m, hd, n);
}

enum { KT_AHEAD = 8 }; /* key rows keys_transposed asks for ahead of the one it reads */

/* kt = key head kvh of one sequence (n rows from row0), times scale, transposed (hd x n) */
static void keys_transposed(float *kt, const fwd_state *s, const ts_model_config *c, int row0,
                            int n, int kvh, float scale)
{
    int hd = c->head_dim, qkv_rows = model_qkv_rows(c);
    const float *kh = s->qkv + (size_t)row0 * qkv_rows + (size_t)c->n_heads * hd + (size_t)kvh * hd;
    for (int j = 0; j < n; j++) {
        /* rows qkv_rows floats apart, a page or more: the hardware prefetcher misses them */
        if (j + KT_AHEAD < n)
            for (int d = 0; d < hd; d += 16)
                __builtin_prefetch(kh + (size_t)(j + KT_AHEAD) * qkv_rows + d, 0, 3);
        for (int d = 0; d < hd; d++)
            kt[(size_t)d * n + j] = scale * kh[(size_t)j * qkv_rows + d];
    }
}

/* Where keys_transposed puts key head kvh of sequence sq in s->keys_t: the sequence's
 * n x kv_dim floats from row0 x kv_dim, by head. */
static float *seq_keys(const fwd_state *s, const ts_model_config *c, const fwd_seq *sq, int kvh)
{
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    return s->keys_t + (size_t)sq->row0 * kv_dim + (size_t)kvh * c->head_dim * sq->n_rows;
}

/* The bf16 form (model_encoder.att_bf16): key head kvh of sequence seq (n rows) as a pack
 * of n rows of hd values, or its value head as a pack of hd rows of n values (`values`),
 * in s->att_packs from the sequence's s->att_pack_off, by head, keys then values. */
static uint8_t *seq_pack(const fwd_state *s, const ts_model_config *c, int seq, int n, int kvh,
                         bool values)
{
    size_t kb = simd_qpack_f32_bytes(n, c->head_dim), vb = simd_qpack_f32_bytes(c->head_dim, n);
    return s->att_packs + s->att_pack_off[seq] + (size_t)kvh * (kb + vb) + (values ? kb : 0);
}

/* Room in s->att_packs for every sequence's packs (seq_pack), grown to the step's need:
 * once a step, as every layer lays its packs out the same. */
static ts_status reserve_packs(fwd_state *s, const ts_model_config *c, const fwd_batch *b,
                               ts_error *err)
{
    int hd = c->head_dim;
    size_t total = 0;
    for (int i = 0; i < b->n_seqs; i++) {
        int n = b->seqs[i].n_rows;
        s->att_pack_off[i] = total;
        total += (simd_qpack_f32_bytes(n, hd) + simd_qpack_f32_bytes(hd, n)) * c->n_kv_heads;
    }
    if (total <= s->att_pack_bytes)
        return TS_OK;
    free(s->att_packs);
    s->att_packs = aligned_alloc(64, (total + 63) / 64 * 64);
    s->att_pack_bytes = s->att_packs ? total : 0;
    return s->att_packs ? TS_OK
                        : ts_error_set(err, TS_ERR_NOMEM, "attention packs of %zu bytes", total);
}

/* attend_rows on the sequence's packs (seq_pack): S = Q K^T, scaled, each row's softmax,
 * then S V. sc (m, n32) holds the scores, n32 = simd_qpack_f32_k(n), the columns past n
 * zero; xb the bf16 rows of Q, then of S. */
static void attend_rows_bf16(fwd_state *s, const ts_model_config *c, const simd_kernels *k,
                             const fwd_seq *sq, int seq, int h, int i0, int m, float scale,
                             float *sc, uint16_t *xb)
{
    int hd = c->head_dim, qkv_rows = model_qkv_rows(c), q_dim = c->n_heads * hd;
    int n = sq->n_rows, n32 = simd_qpack_f32_k(n), kvh = h / (c->n_heads / c->n_kv_heads);
    const float *q = s->qkv + (size_t)(sq->row0 + i0) * qkv_rows + (size_t)h * hd;
    k->bf16_rows(xb, q, (size_t)qkv_rows, m, hd);
    simd_qpack_f32_gemm(sc, (size_t)n32, xb, seq_pack(s, c, seq, n, kvh, false), n, hd, m);
    for (int i = 0; i < m; i++) {
        float *row = sc + (size_t)i * n32;
        for (int j = 0; j < n; j++)
            row[j] *= scale;
        k->softmax(row, (size_t)n);
        memset(row + n, 0, (size_t)(n32 - n) * sizeof(float));
    }
    k->bf16_rows(xb, sc, (size_t)n32, m, n32);
    float *out = s->att + (size_t)(sq->row0 + i0) * q_dim + (size_t)h * hd;
    simd_qpack_f32_gemm(out, (size_t)q_dim, xb, seq_pack(s, c, seq, n, kvh, true), hd, n, m);
}

/* The packs of key and value head kvh of sequence seq (seq_pack); tmp for the maker. */
static void make_packs(fwd_state *s, const ts_model_config *c, const simd_kernels *k,
                       const fwd_seq *sq, int seq, int kvh, uint16_t *tmp)
{
    int hd = c->head_dim, qkv_rows = model_qkv_rows(c), n = sq->n_rows;
    const float *kh = s->qkv + (size_t)sq->row0 * qkv_rows + (size_t)c->n_heads * hd +
                      (size_t)kvh * hd;
    const float *vh = kh + (size_t)c->n_kv_heads * hd;
    simd_qpack_f32_make(k, seq_pack(s, c, seq, n, kvh, false), tmp, kh, (size_t)qkv_rows, false,
                        n, hd);
    simd_qpack_f32_make(k, seq_pack(s, c, seq, n, kvh, true), tmp, vh, (size_t)qkv_rows, true,
                        hd, n);
}

/* att = every sequence's attention. First every (sequence, key head)'s keys are made
 * ready once: on bf16 packs (make_packs, with its values, where reserve_packs laid them
 * out at the step's start) where the model says, else scaled and transposed into
 * s->keys_t (seq_keys). Then tasks (sequence, query head, run of ATT_ROWS query rows) run
 * over the threads, each with its own scores. */
static ts_status attention(fwd_state *s, const ts_model *model, const simd_kernels *k,
                           const fwd_batch *b, ts_error *err)
{
    const ts_model_config *c = &model->cfg;
    bool packs = model->w.enc->att_bf16;
    int longest = 0, tasks = 0, hd = c->head_dim;
    long work = 0;
    for (int i = 0; i < b->n_seqs; i++) {
        int n = b->seqs[i].n_rows;
        longest = n > longest ? n : longest;
        tasks += (n + ATT_ROWS - 1) / ATT_ROWS * c->n_heads;
        work += (long)n * n * c->n_heads * hd;
    }
    float scale = c->attn_scale > 0.0f ? c->attn_scale : 1.0f / sqrtf((float)hd);
    size_t n32 = (size_t)simd_qpack_f32_k(longest), side = n32 > (size_t)hd ? n32 : (size_t)hd;
    bool ok = true;
#pragma omp parallel if (work >= ENC_ROW_MIN_WORK) reduction(&& : ok)
    {
        float *sc = malloc(sizeof(float) * ATT_ROWS * n32);
        uint16_t *xb = packs ? malloc(sizeof(uint16_t) * 2 * ATT_ROWS * side) : NULL;
        uint16_t *tmp = packs ? malloc(sizeof(uint16_t) * simd_qpack_f32_tmp(longest, hd)) : NULL;
        ok = sc != NULL && (!packs || (xb && tmp));
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < b->n_seqs * c->n_kv_heads; t++) {
            int seq = t / c->n_kv_heads, kvh = t % c->n_kv_heads;
            const fwd_seq *sq = &b->seqs[seq];
            if (!packs)
                keys_transposed(seq_keys(s, c, sq, kvh), s, c, sq->row0, sq->n_rows, kvh, scale);
            else if (ok)
                make_packs(s, c, k, sq, seq, kvh, tmp);
        }
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < tasks; t++) {
            int seq = 0, first = 0; /* the task's sequence: its tasks are numbered in order */
            for (;; seq++) {
                int n_t = (b->seqs[seq].n_rows + ATT_ROWS - 1) / ATT_ROWS * c->n_heads;
                if (t < first + n_t)
                    break;
                first += n_t;
            }
            const fwd_seq *sq = &b->seqs[seq];
            int local = t - first, h = local % c->n_heads, i0 = local / c->n_heads * ATT_ROWS;
            int m = sq->n_rows - i0 < ATT_ROWS ? sq->n_rows - i0 : ATT_ROWS, n = sq->n_rows;
            if (!ok)
                continue;
            if (packs)
                attend_rows_bf16(s, c, k, sq, seq, h, i0, m, scale, sc, xb);
            else
                attend_rows(s, c, k, sq->row0, n, h, i0, m,
                            seq_keys(s, c, sq, h / (c->n_heads / c->n_kv_heads)), sc);
        }
        free(sc);
        free(xb);
        free(tmp);
    }
    return ok ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "attention scratch of %d rows", longest);
}

/* gu's first ffn columns = act(...) of the feed-forward's first GEMM: GELU of up + bias
 * (BERT), or silu(gate) * up (nomic-bert; its matrices have no biases). */
static void ffn_activate(fwd_state *s, const ts_model *m, const simd_kernels *k, int T, int l)
{
    const ts_model_config *c = &m->cfg;
    int ffn = c->hidden_dim;
    const model_encoder *e = m->w.enc;
    const float *bias = e->up_b + (size_t)l * ffn;
#pragma omp parallel for schedule(static) if ((long)T * ffn >= ENC_ROW_MIN_WORK)
    for (int r = 0; r < T; r++) {
        float *g = s->gu + (size_t)r * 2 * ffn;
        if (c->ffn_act == TS_FFN_GELU) {
            for (int i = 0; i < ffn; i++)
                g[i] += bias[i];
            k->gelu_mul(g, g, e->ones, (size_t)ffn);
        } else {
            k->silu_mul(g, g, g + ffn, (size_t)ffn);
        }
    }
}

/* x (n) rounded as a GEMM on weights of type wtype rounds its input (llama.cpp's
 * vec_dot_type): to int8 blocks of 32 for the block-quantized types, to f16 or bf16 for
 * those; f32 as it is. scratch holds a quantized row of n. */
static void round_input(float *x, int n, uint32_t wtype, void *scratch)
{
    const qtype_info *q = qtype_get(wtype);
    uint32_t act = wtype == QT_F16 || wtype == QT_BF16 ? wtype
                   : q && q->block_elems > 1 && n % 32 == 0 ? QT_Q8_0
                                                            : QT_F32;
    if (act != QT_F32 && quant_row(scratch, x, act, n))
        qtype_dequant_row(x, scratch, act, n);
}

/* out (dim, zeroed by the caller) = a reranker's scores of its CLS row h (dim), as
 * encoder.h's head says; without a head, h's first cls_out values. */
static void classify(float *out, const float *h, const model_encoder *e,
                     const ts_model_config *c)
{
    int dim = c->dim;
    float *dense = malloc(2 * (size_t)dim * sizeof(float));
    void *scratch = malloc((size_t)dim * sizeof(float));
    if (!dense || !scratch) { /* out stays zero: a score of 0 rather than a crash */
        free(dense);
        free(scratch);
        return;
    }
    float *in = dense + dim;
    memcpy(in, h, (size_t)dim * sizeof(float));
    const float *x = in;
    if (e->cls) {
        round_input(in, dim, e->cls_type, scratch);
        h = in;
        for (int o = 0; o < dim; o++) {
            double sum = e->cls_b[o];
            for (int i = 0; i < dim; i++)
                sum += (double)e->cls[(size_t)o * dim + i] * h[i];
            dense[o] = tanhf((float)sum);
        }
        x = dense;
    }
    if (e->cls_out)
        round_input((float *)x, dim, e->cls_out_type, scratch);
    for (int o = 0; o < c->cls_out; o++) {
        double sum = e->cls_out ? e->cls_out_b[o] : x[o];
        for (int i = 0; e->cls_out && i < dim; i++)
            sum += (double)e->cls_out[(size_t)o * dim + i] * x[i];
        out[o] = (float)sum;
    }
    free(dense);
    free(scratch);
}

/* Each sequence's pooled row: the sum of its rows (mean), its first (CLS) or last, or
 * a reranker's scores of its first. */
static void pool(fwd_state *s, const ts_model *m, const fwd_batch *b)
{
    const ts_model_config *c = &m->cfg;
    int dim = c->dim;
    for (int i = 0; i < b->n_seqs; i++) {
        const fwd_seq *sq = &b->seqs[i];
        if (sq->pool_row < 0)
            continue;
        float *out = s->pooled + (size_t)sq->pool_row * dim;
        int first = sq->row0, last = sq->row0 + sq->n_rows - 1;
        if (c->pooling == TS_POOLING_RANK) {
            memset(out, 0, (size_t)dim * sizeof(float));
            classify(out, s->x + (size_t)first * dim, m->w.enc, c);
            continue;
        }
        if (c->pooling == TS_POOLING_CLS)
            last = first;
        else if (c->pooling == TS_POOLING_LAST)
            first = last;
        memset(out, 0, (size_t)dim * sizeof(float));
        for (int r = first; r <= last; r++)
            for (int d = 0; d < dim; d++)
                out[d] += s->x[(size_t)r * dim + d];
    }
}

/* Adds the time since *t to the step's phase and restarts *t (fwd_state.seconds). */
static void lap(fwd_state *s, ts_step_phase phase, double *t)
{
    double now = clock_now_s();
    s->seconds[phase] += now - *t;
    *t = now;
}

/* The held matrices of parts (n) into out; returns how many. */
static int held(const simd_qmat **out, const simd_qmat *const *parts, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (parts[i]->N > 0)
            out[k++] = parts[i];
    return k;
}

ts_status forward_encoder(fwd_state *s, const ts_model *m, const simd_kernels *k,
                          const fwd_batch *b, ts_error *err)
{
    const ts_model_config *c = &m->cfg;
    const model_weights *w = &m->w;
    const model_encoder *e = w->enc;
    int T = b->n_rows, dim = c->dim, ffn = c->hidden_dim, qkv_rows = model_qkv_rows(c);
    for (int i = 0; i < b->n_seqs; i++) {
        const fwd_seq *sq = &b->seqs[i];
        if (sq->pos0 != 0 || sq->n_rows > c->context_len)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "an encoder computes a sequence whole: rows from position %d "
                                "(of %d, context %d)", sq->pos0, sq->n_rows, c->context_len);
        for (int j = 0; j < sq->n_rows; j++)
            s->pos[sq->row0 + j] = j;
    }
    if (e->att_bf16) {
        ts_status st = reserve_packs(s, c, b, err);
        if (st != TS_OK)
            return st;
    }
    simd_rope_style style = c->rope_neox ? SIMD_ROPE_NEOX : SIMD_ROPE_NORMAL;
    double t = clock_now_s();
    embed(s, m, b, style);
    lap(s, TS_PHASE_ROWWISE, &t);
    for (int l = 0; l < c->n_layers; l++) {
        const model_layer *ly = &w->layers[l];
        const simd_qmat *qkv_parts[] = {&ly->wq, &ly->wk, &ly->wv}, *ffn_parts[] = {&ly->w1, &ly->w3};
        const simd_qmat *qkv[3], *w13[2], *wo[] = {&ly->wo}, *w2[] = {&ly->w2};
        int n_qkv = held(qkv, qkv_parts, 3), n_w13 = held(w13, ffn_parts, 2);
        size_t ld = (size_t)l * dim;
        /* attention block, then x = LN(x + att . Wo^T + b) */
        fwd_gemm(k, s->gemm_path, &s->qbuf, s->qkv, (size_t)qkv_rows, s->x, dim, NULL, qkv,
                 n_qkv, T, 0.0f);
        lap(s, TS_PHASE_GEMM, &t);
        finish_qkv(s, m, k, T, l, style);
        lap(s, TS_PHASE_ROWWISE, &t);
        ts_status st = attention(s, m, k, b, err);
        if (st != TS_OK)
            return st;
        lap(s, TS_PHASE_ATTENTION, &t);
        fwd_gemm(k, s->gemm_path, &s->qbuf, s->xn, (size_t)dim, s->att, ly->wo.K, NULL, wo, 1,
                 T, 0.0f);
        lap(s, TS_PHASE_GEMM, &t);
        add_norm(s->x, s->xn, e->out_b + ld, e->att_norm + 2 * ld, T, dim, c->rms_eps);
        lap(s, TS_PHASE_ROWWISE, &t);
        /* feed-forward block, then x = LN(x + ffn(x) + b) */
        fwd_gemm(k, s->gemm_path, &s->qbuf, s->gu, 2 * (size_t)ffn, s->x, dim, NULL, w13, n_w13,
                 T, 0.0f);
        lap(s, TS_PHASE_GEMM, &t);
        ffn_activate(s, m, k, T, l);
        lap(s, TS_PHASE_ROWWISE, &t);
        fwd_gemm(k, s->gemm_path, &s->qbuf, s->xn, (size_t)dim, s->gu, 2 * ffn, NULL, w2, 1, T,
                 0.0f);
        lap(s, TS_PHASE_GEMM, &t);
        add_norm(s->x, s->xn, e->down_b + ld, e->out_norm + 2 * ld, T, dim, c->rms_eps);
        lap(s, TS_PHASE_ROWWISE, &t);
    }
    if (b->n_pooled > 0)
        pool(s, m, b);
    lap(s, TS_PHASE_LM_HEAD, &t); /* the pooling, and a reranker's head */
    return TS_OK;
}
