/* test_simd_attention.c: paged attention of every ISA against the reference, and the
 * reference against a naive two-pass softmax over a contiguous copy of K and V, with and
 * without sliding windows and soft-capped scores, K/V in f32, f16 and q8_0; q8_0 against
 * f16 on the same keys and values within a bound; and a context split into spans whose
 * outputs simd_attn_merge() joins (split-K) against the whole. */
#include <stdbool.h>
#include <string.h>

#include "simd_check.h"

#define N_LAYERS 2
#define LAYER 1 /* the layer attended, so k_offset and v_offset are not zero */

typedef struct attn_scores_case {
    int window;    /* > 0: each row sees its last `window` positions */
    float softcap; /* > 0: scores capped by softcap * tanh(s / softcap) */
    float scale;   /* > 0: the scores' scale, else 1 / sqrt(head_dim) */
} attn_scores_case;

typedef struct attn_case {
    int head_dim, n_heads, n_kv_heads, pos0, n_rows;
    simd_kv_type type;
    attn_scores_case sc; /* zero: causal over every position, 1 / sqrt(head_dim) */
} attn_case;

/* A pool holding one sequence of pos0 + n_rows tokens in shuffled physical blocks, with
 * spare blocks and the unwritten slots of the last block full of NaN (q8_0: NaN scales). */
typedef struct test_kv {
    void *pool;          /* (n_phys, block_stride) elements */
    int32_t *table;      /* (n_blocks) */
    float *k, *v;        /* (len, n_kv_heads, head_dim) contiguous decoded copies */
    simd_kv_view view;
} test_kv;

static void kv_build(test_kv *kv, const attn_case *c)
{
    int hd = c->head_dim, nkv = c->n_kv_heads, len = c->pos0 + c->n_rows;
    int n_blocks = (len + TS_KV_BLOCK - 1) / TS_KV_BLOCK, n_phys = n_blocks + 3;
    bool q8 = c->type == SIMD_KV_Q8_0;
    size_t run = q8 ? SIMD_KV_Q8_RUN_BYTES(hd) : (size_t)TS_KV_BLOCK * hd;
    size_t layer_size = 2 * (size_t)nkv * run;
    /* odd padding between blocks (q8_0: even, so its f16 scales stay aligned) */
    size_t block_stride = N_LAYERS * layer_size + (q8 ? 6 : 7);
    size_t es = q8 ? 1 : c->type == SIMD_KV_F16 ? 2 : 4, n_el = (size_t)n_phys * block_stride;
    kv->pool = malloc(n_el * es);
    kv->table = malloc(sizeof(int32_t) * n_blocks);
    kv->k = malloc(sizeof(float) * len * nkv * hd);
    kv->v = malloc(sizeof(float) * len * nkv * hd);
    float *pf = kv->pool;
    uint16_t *ph = kv->pool;
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF);
    uint16_t nan_h = 0x7e00;
    for (size_t i = 0; i < n_el; i++) {
        if (q8)
            ((uint8_t *)kv->pool)[i] = i % 2 ? 0x7e : 0x00; /* f16 NaN where scales lie */
        else if (c->type == SIMD_KV_F16)
            ph[i] = nan_h;
        else
            pf[i] = NAN;
    }
    /* physical ids: a shuffled permutation, skipping the spares */
    int32_t *perm = malloc(sizeof(int32_t) * n_phys);
    for (int i = 0; i < n_phys; i++)
        perm[i] = i;
    for (int i = n_phys - 1; i > 0; i--) {
        int j = (int)sc_uniform(0.0f, (float)i + 0.999f);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    memcpy(kv->table, perm, sizeof(int32_t) * n_blocks);
    free(perm);
    kv->view = (simd_kv_view){
        .pool = kv->pool, .type = c->type, .block_stride = block_stride,
        .k_offset = LAYER * layer_size, .v_offset = LAYER * layer_size + nkv * run,
        .head_stride = run, .block_table = kv->table,
    };
    for (int t = 0; t < len; t++) {
        for (int g = 0; g < nkv; g++) {
            size_t at = (size_t)kv->table[t / TS_KV_BLOCK] * block_stride + (size_t)g * run +
                        (size_t)(t % TS_KV_BLOCK) * hd;
            for (int s = 0; s < 2; s++) {
                float *dst = (s ? kv->v : kv->k) + ((size_t)t * nkv + g) * hd;
                size_t off = at + (s ? kv->view.v_offset : kv->view.k_offset);
                sc_fill(dst, (size_t)hd, -1.0f, 1.0f);
                if (q8) { /* the copy holds what the pool decodes to */
                    uint8_t *p = kv->pool;
                    size_t run0 = off - (size_t)(t % TS_KV_BLOCK) * hd;
                    int8_t *qs = (int8_t *)p + off;
                    uint16_t *sc = (uint16_t *)(void *)(p + run0 + (size_t)TS_KV_BLOCK * hd) +
                                   (size_t)(t % TS_KV_BLOCK) * SIMD_KV_Q8_GROUPS(hd);
                    simd_kv_q8_quantize(qs, sc, dst, hd);
                    simd_kv_q8_dequantize(dst, qs, sc, hd);
                } else if (c->type == SIMD_KV_F16) { /* the copy holds what the pool decodes to */
                    ref->f32_to_f16(ph + off, dst, (size_t)hd);
                    ref->f16_to_f32(dst, ph + off, (size_t)hd);
                } else {
                    memcpy(pf + off, dst, sizeof(float) * hd);
                }
            }
        }
    }
}

static void kv_free(test_kv *kv)
{
    free(kv->pool), free(kv->table), free(kv->k), free(kv->v);
}

/* Two passes over all scores, in double, over the contiguous copies. */
static void naive_attention(float *out, const float *q, const test_kv *kv, const attn_case *c,
                            size_t q_stride, size_t out_stride)
{
    int hd = c->head_dim, group = c->n_heads / c->n_kv_heads, len = c->pos0 + c->n_rows;
    double *s = malloc(sizeof(double) * len), *acc = malloc(sizeof(double) * hd);
    for (int j = 0; j < c->n_rows; j++) {
        for (int h = 0; h < c->n_heads; h++) {
            const float *qh = q + j * q_stride + (size_t)h * hd;
            int g = h / group, n = c->pos0 + j + 1;
            int t0 = c->sc.window > 0 && n > c->sc.window ? n - c->sc.window : 0;
            double scale = c->sc.scale > 0.0f ? c->sc.scale : 1.0 / sqrt((double)hd);
            double mx = -INFINITY, sum = 0.0;
            for (int t = t0; t < n; t++) {
                const float *k = kv->k + ((size_t)t * c->n_kv_heads + g) * hd;
                double dot = 0.0;
                for (int d = 0; d < hd; d++)
                    dot += (double)qh[d] * k[d];
                s[t] = dot * scale;
                if (c->sc.softcap > 0.0f)
                    s[t] = c->sc.softcap * tanh(s[t] / c->sc.softcap);
                mx = s[t] > mx ? s[t] : mx;
            }
            memset(acc, 0, sizeof(double) * hd);
            for (int t = t0; t < n; t++) {
                double p = exp(s[t] - mx);
                sum += p;
                const float *v = kv->v + ((size_t)t * c->n_kv_heads + g) * hd;
                for (int d = 0; d < hd; d++)
                    acc[d] += p * v[d];
            }
            for (int d = 0; d < hd; d++)
                out[j * out_stride + (size_t)h * hd + d] = (float)(acc[d] / sum);
        }
    }
    free(s), free(acc);
}

/* Output rows with their gaps: only (n_heads * head_dim) of each row are compared. */
static double rows_err(const float *a, const float *b, const attn_case *c, size_t stride)
{
    double worst = 0.0;
    for (int j = 0; j < c->n_rows; j++) {
        double e = sc_norm_err(a + j * stride, b + j * stride, (size_t)c->n_heads * c->head_dim);
        worst = e > worst ? e : worst;
    }
    return worst;
}

static void run_case(const attn_case *c)
{
    int hd = c->head_dim;
    size_t width = (size_t)c->n_heads * hd;
    size_t q_stride = width + 2 * (size_t)c->n_kv_heads * hd, out_stride = width + 3;
    size_t q_n = c->n_rows * q_stride, out_n = c->n_rows * out_stride;
    float *q = malloc(sizeof(float) * q_n), *naive = malloc(sizeof(float) * out_n);
    float *want = malloc(sizeof(float) * out_n), *got = malloc(sizeof(float) * out_n);
    sc_fill(q, q_n, -2.0f, 2.0f); /* sharp enough that the softmax is not flat */
    test_kv kv;
    kv_build(&kv, c);
    simd_attn_shape shape = {
        .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = hd, .pos0 = c->pos0,
        .n_rows = c->n_rows, .q_stride = q_stride, .out_stride = out_stride,
        .scale = c->sc.scale, .softcap = c->sc.softcap, .window = c->sc.window,
    };
    const char *ty = c->type == SIMD_KV_Q8_0 ? "q8_0" : c->type == SIMD_KV_F16 ? "f16" : "f32";

    naive_attention(naive, q, &kv, c, q_stride, out_stride);
    for (size_t i = 0; i < out_n; i++)
        want[i] = NAN; /* the kernels must not read their output before writing it */
    simd_kernels_for(SIMD_ISA_REF)->attention(want, q, &kv.view, &shape, 0, c->n_heads);
    double e = rows_err(want, naive, c, out_stride);
    SC_CHECK(e < 1e-5, "ref vs naive %s hd=%d heads=%d/%d pos0=%d rows=%d window=%d cap=%g: "
             "err %g", ty, hd, c->n_heads, c->n_kv_heads, c->pos0, c->n_rows, c->sc.window,
             (double)c->sc.softcap, e);

    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    for (int i = 0; i < n_isa; i++) {
        for (size_t k = 0; k < out_n; k++)
            got[k] = NAN;
        isas[i]->attention(got, q, &kv.view, &shape, 0, c->n_heads);
        e = rows_err(got, want, c, out_stride);
        SC_CHECK(e < 1e-5, "%s vs ref %s hd=%d heads=%d/%d pos0=%d rows=%d window=%d cap=%g: "
                 "err %g", isas[i]->name, ty, hd, c->n_heads, c->n_kv_heads, c->pos0,
                 c->n_rows, c->sc.window, (double)c->sc.softcap, e);
        /* the same heads split in two calls at a point inside a group */
        int split = c->n_heads > 1 ? c->n_heads / 2 + (c->n_heads > 2) : 1;
        for (size_t k = 0; k < out_n; k++)
            got[k] = NAN;
        isas[i]->attention(got, q, &kv.view, &shape, 0, split);
        isas[i]->attention(got, q, &kv.view, &shape, split, c->n_heads);
        e = rows_err(got, want, c, out_stride);
        SC_CHECK(e < 1e-5, "%s split at head %d, %s hd=%d: err %g", isas[i]->name, split, ty, hd, e);
    }
    kv_free(&kv);
    free(q), free(naive), free(want), free(got);
}

static void check_decode(void)
{
    static const int dims[] = {6, 10, 18, 48, 64, 80, 128};
    static const int lens[] = {1, 2, 31, 32, 33, 100, 640, 2048};
    static const int gqa[] = {1, 2, 4, 8};
    int n = 0;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            if (SC_SANITIZED && lens[li] > 640)
                continue;
            int ratio = gqa[(di + li) % 4], n_kv = 1 + (int)(li % 2);
            attn_case c = {dims[di], ratio * n_kv, n_kv, lens[li] - 1, 1,
                           (di + li) % 2 ? SIMD_KV_F16 : SIMD_KV_F32, {0, 0, 0}};
            run_case(&c);
            c.type = c.type == SIMD_KV_F16 ? SIMD_KV_F32 : SIMD_KV_F16;
            if (lens[li] <= 100)
                run_case(&c);
            c.type = SIMD_KV_Q8_0;
            if (lens[li] <= 640)
                run_case(&c);
            n++;
        }
    }
    SC_CHECK(n > 20, "ran %d decode shapes", n);
}

static void check_prefill(void)
{
    static const attn_case cases[] = {
        {64, 4, 4, 0, 40, SIMD_KV_F32, {0, 0, 0}},   /* a whole prompt, multi-head */
        {18, 8, 2, 45, 37, SIMD_KV_F16, {0, 0, 0}},  /* a chunk starting mid-block, GQA 4 */
        {10, 8, 1, 13, 100, SIMD_KV_F32, {0, 0, 0}}, /* GQA 8, rows of one tile span blocks */
        {80, 6, 3, 31, 2, SIMD_KV_F16, {0, 0, 0}},   /* GQA 2, two rows across a block edge */
        {128, 2, 2, 64, 33, SIMD_KV_F32, {0, 0, 0}},
        {48, 16, 2, 200, 9, SIMD_KV_F16, {0, 0, 0}},
        {6, 3, 3, 0, 1, SIMD_KV_F32, {0, 0, 0}},     /* the first token */
        {128, 8, 2, 64, 33, SIMD_KV_Q8_0, {0, 0, 0}}, /* q8_0: four scale groups a row */
        {80, 6, 3, 31, 2, SIMD_KV_Q8_0, {0, 0, 0}},   /* a short last group */
        {10, 8, 1, 13, 100, SIMD_KV_Q8_0, {0, 0, 0}}, /* one group under a vector */
        {96, 32, 8, 300, 40, SIMD_KV_Q8_0, {0, 0, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}

/* A row whose keys are all equal averages the values; one dominant key selects its value. */
static void check_exact_cases(void)
{
    attn_case c = {8, 2, 1, 69, 1, SIMD_KV_F32, {0, 0, 0}};
    test_kv kv;
    kv_build(&kv, &c);
    float q[2 * 8 + 2 * 8] = {0}, out[2 * 8];
    float *pool = kv.pool;
    simd_attn_shape shape = {.n_heads = 2, .n_kv_heads = 1, .head_dim = 8, .pos0 = 69,
                             .n_rows = 1, .q_stride = sizeof q / sizeof q[0], .out_stride = 16};
    for (int t = 0; t < 70; t++) {
        size_t at = (size_t)kv.table[t / TS_KV_BLOCK] * kv.view.block_stride + (t % TS_KV_BLOCK) * 8;
        for (int d = 0; d < 8; d++) {
            pool[at + kv.view.k_offset + d] = t == 50 ? 100.0f : 0.0f;
            pool[at + kv.view.v_offset + d] = (float)t;
        }
    }
    q[0] = 0.0f;  /* head 0: q = 0, every score 0: mean of 0..69 */
    q[8] = 10.0f; /* head 1: position 50's score dominates */
    for (int k = SIMD_ISA_REF; k < SIMD_ISA_COUNT; k++) {
        const simd_kernels *t = simd_kernels_for((simd_isa)k);
        if (!t)
            continue;
        t->attention(out, q, &kv.view, &shape, 0, 2);
        for (int d = 0; d < 8; d++) {
            SC_CHECK(fabsf(out[d] - 34.5f) < 1e-4f, "%s uniform average: %g", t->name, out[d]);
            SC_CHECK(fabsf(out[8 + d] - 50.0f) < 1e-4f, "%s dominant key: %g", t->name, out[8 + d]);
        }
    }
    kv_free(&kv);
}

/* Sliding windows (Gemma's local layers): windows inside one block, across block edges,
 * of one position, and longer than the context; prefill chunks whose rows' windows start
 * in different blocks (a tile's first block then holds nothing for some of its rows);
 * and the soft-cap and scale of Gemma 2's scores, alone and with a window. */
static void check_window_and_caps(void)
{
    static const attn_case cases[] = {
        {16, 4, 2, 99, 1, SIMD_KV_F32, {64, 0, 0}},   /* decode past the window */
        {32, 4, 2, 199, 1, SIMD_KV_F16, {64, 0, 0}},  /* a window of two whole blocks */
        {16, 4, 2, 40, 1, SIMD_KV_F32, {1, 0, 0}},    /* only itself */
        {16, 2, 2, 10, 1, SIMD_KV_F32, {4096, 0, 0}}, /* longer than the context */
        {8, 8, 2, 70, 60, SIMD_KV_F32, {16, 0, 0}},   /* prefill, windows in several blocks */
        {64, 4, 1, 0, 130, SIMD_KV_F16, {64, 0, 0}},  /* a whole prompt past its window */
        {10, 6, 3, 33, 17, SIMD_KV_F32, {33, 0, 0}},  /* odd sizes, a window across an edge */
        {32, 4, 2, 50, 20, SIMD_KV_F32, {0, 5.0f, 0}}, /* Gemma 2's attention soft-cap */
        {32, 4, 2, 90, 9, SIMD_KV_F16, {64, 5.0f, 0.3f}}, /* cap, window, another scale */
        {16, 2, 1, 30, 1, SIMD_KV_F32, {0, 0, 0.05f}},    /* a scale alone */
        {64, 4, 1, 0, 130, SIMD_KV_Q8_0, {64, 0, 0}},     /* q8_0 with a window */
        {32, 4, 2, 90, 9, SIMD_KV_Q8_0, {64, 5.0f, 0.3f}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}

/* The case's attention as spans cut at cuts[0 .. n_cuts) (positions, ascending), each
 * span one kernel call with its log-sum-exps, merged row by row, against the whole in
 * one call of the reference; a span that holds none of a row's positions must give that
 * row zeros and an lse of -inf. */
static void run_spans(const attn_case *c, const int *cuts, int n_cuts)
{
    int hd = c->head_dim, nh = c->n_heads, n_spans = n_cuts + 1;
    size_t width = (size_t)nh * hd, q_stride = width + 2 * (size_t)c->n_kv_heads * hd;
    size_t q_n = c->n_rows * q_stride, out_n = c->n_rows * width;
    float *q = malloc(sizeof(float) * q_n), *want = malloc(sizeof(float) * out_n);
    float *got = malloc(sizeof(float) * out_n);
    float *part = malloc(sizeof(float) * out_n * n_spans);
    float *lse = malloc(sizeof(float) * (size_t)c->n_rows * nh * n_spans);
    float *row_part = malloc(sizeof(float) * width * n_spans);
    float *row_lse = malloc(sizeof(float) * (size_t)nh * n_spans);
    sc_fill(q, q_n, -2.0f, 2.0f);
    test_kv kv;
    kv_build(&kv, c);
    simd_attn_shape shape = {
        .n_heads = nh, .n_kv_heads = c->n_kv_heads, .head_dim = hd, .pos0 = c->pos0,
        .n_rows = c->n_rows, .q_stride = q_stride, .out_stride = width,
        .scale = c->sc.scale, .softcap = c->sc.softcap, .window = c->sc.window,
    };
    simd_kernels_for(SIMD_ISA_REF)->attention(want, q, &kv.view, &shape, 0, nh);

    const simd_kernels *isas[SIMD_ISA_COUNT + 1];
    int n_isa = sc_simd_tables(isas);
    isas[n_isa++] = simd_kernels_for(SIMD_ISA_REF);
    for (int i = 0; i < n_isa; i++) {
        for (int p = 0; p < n_spans; p++) {
            simd_attn_shape sp = shape;
            sp.span_begin = p == 0 ? 0 : cuts[p - 1];
            sp.span_end = p == n_cuts ? 0 : cuts[p];
            sp.lse = lse + (size_t)p * c->n_rows * nh;
            float *out = part + (size_t)p * out_n;
            for (size_t k = 0; k < out_n; k++)
                out[k] = NAN;
            isas[i]->attention(out, q, &kv.view, &sp, 0, nh);
            for (int j = 0; j < c->n_rows; j++) { /* rows none of whose positions are here */
                int hi = c->pos0 + j, lo = c->sc.window > 0 && hi >= c->sc.window
                                               ? hi - c->sc.window + 1 : 0;
                if (hi >= sp.span_begin && (sp.span_end == 0 || lo < sp.span_end))
                    continue;
                for (int h = 0; h < nh; h++)
                    SC_CHECK(isinf(sp.lse[j * nh + h]) && sp.lse[j * nh + h] < 0 &&
                                 out[j * width + (size_t)h * hd] == 0.0f,
                             "%s span %d row %d head %d: lse %g, out %g (want -inf, 0)",
                             isas[i]->name, p, j, h, (double)sp.lse[j * nh + h],
                             (double)out[j * width + (size_t)h * hd]);
            }
        }
        for (int j = 0; j < c->n_rows; j++) {
            for (int p = 0; p < n_spans; p++) {
                memcpy(row_part + p * width, part + (size_t)p * out_n + j * width,
                       width * sizeof(float));
                memcpy(row_lse + (size_t)p * nh, lse + ((size_t)p * c->n_rows + j) * nh,
                       (size_t)nh * sizeof(float));
            }
            simd_attn_merge(got + j * width, row_part, row_lse, n_spans, nh, hd, 0, nh);
        }
        double e = 0.0;
        for (int j = 0; j < c->n_rows; j++) {
            double ej = sc_norm_err(got + j * width, want + j * width, width);
            e = ej > e ? ej : e;
        }
        SC_CHECK(e < 1e-5, "%s %d spans, hd=%d pos0=%d rows=%d window=%d: err %g",
                 isas[i]->name, n_spans, hd, c->pos0, c->n_rows, c->sc.window, e);
    }
    kv_free(&kv);
    free(q), free(want), free(got), free(part), free(lse), free(row_part), free(row_lse);
}

static void check_spans(void)
{
    static const int even[] = {128, 256, 384}, odd[] = {5, 100, 101, 700};
    static const int past[] = {40, 1000}; /* the second span is empty for every row */
    attn_case decode = {64, 8, 2, 511, 1, SIMD_KV_F16, {0, 0, 0}};
    run_spans(&decode, even, 3);
    decode.type = SIMD_KV_F32;
    run_spans(&decode, odd, 4);
    attn_case window = {32, 4, 2, 300, 1, SIMD_KV_F16, {64, 5.0f, 0}}; /* spans before it */
    run_spans(&window, even, 3);
    attn_case prefill = {16, 4, 1, 20, 50, SIMD_KV_F32, {0, 0, 0}}; /* rows before a cut */
    run_spans(&prefill, odd, 3);
    run_spans(&prefill, past, 2);
    attn_case wide = {256, 8, 4, 300, 1, SIMD_KV_F16, {0, 0, 0}}; /* Gemma's head size */
    run_spans(&wide, even, 2);
}

/* Attention output of K/V kept as type t, over the keys and values (and queries) drawn
 * from one seed: out (n_rows, out_stride) of c's shape, by kernel table k. */
static void attention_of(float *out, const attn_case *c, simd_kv_type t, const simd_kernels *k,
                         size_t q_stride, size_t out_stride)
{
    attn_case ct = *c;
    ct.type = t;
    sc_rng_state = 0x2545f4914f6cdd1dull; /* the same draws for every type */
    test_kv kv;
    kv_build(&kv, &ct);
    size_t q_n = (size_t)c->n_rows * q_stride;
    float *q = malloc(sizeof(float) * q_n);
    sc_fill(q, q_n, -2.0f, 2.0f);
    simd_attn_shape shape = {
        .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
        .pos0 = c->pos0, .n_rows = c->n_rows, .q_stride = q_stride, .out_stride = out_stride,
    };
    k->attention(out, q, &kv.view, &shape, 0, c->n_heads);
    kv_free(&kv);
    free(q);
}

/* q8_0 against f16 on the same keys and values, on every table: the output stays within
 * Q8_F16_BOUND of f16's (relative to its largest value). Values in [-1, 1] keep ~1/254 of
 * their group's largest magnitude as q8_0 (f16: ~1/2048); measured worst 0.6% over these
 * shapes. */
#define Q8_F16_BOUND 0.02
static void check_q8_against_f16(void)
{
    static const attn_case cases[] = {
        {128, 8, 2, 500, 1, SIMD_KV_Q8_0, {0, 0, 0}},
        {64, 4, 4, 0, 40, SIMD_KV_Q8_0, {0, 0, 0}},
        {8, 32, 16, 150, 3, SIMD_KV_Q8_0, {0, 0, 0}}, /* stories260K-k's heads */
    };
    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    isas[n_isa++] = simd_kernels_for(SIMD_ISA_REF);
    double worst = 0.0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const attn_case *c = &cases[i];
        size_t width = (size_t)c->n_heads * c->head_dim;
        size_t q_stride = width + 2 * (size_t)c->n_kv_heads * c->head_dim;
        size_t out_n = (size_t)c->n_rows * width;
        float *a = malloc(sizeof(float) * out_n), *b = malloc(sizeof(float) * out_n);
        for (int k = 0; k < n_isa; k++) {
            attention_of(a, c, SIMD_KV_Q8_0, isas[k], q_stride, width);
            attention_of(b, c, SIMD_KV_F16, isas[k], q_stride, width);
            double e = rows_err(a, b, c, width);
            worst = e > worst ? e : worst;
            SC_CHECK(e < Q8_F16_BOUND && e > 0.0, "%s q8_0 vs f16 hd=%d heads=%d/%d pos0=%d "
                     "rows=%d: err %g", isas[k]->name, c->head_dim, c->n_heads, c->n_kv_heads,
                     c->pos0, c->n_rows, e);
        }
        free(a), free(b);
    }
    printf("  q8_0 vs f16: worst relative error %.4f (bound %.2f)\n", worst, Q8_F16_BOUND);
}

#define CHECKS(X)                                                                         \
    X(check_exact_cases) X(check_decode) X(check_prefill) X(check_window_and_caps)         \
        X(check_q8_against_f16) X(check_spans)
SC_MAIN("simd_attention", CHECKS)
