/* qpack_bf16.c: F16 / BF16 weights packed as bf16 for the AMX bf16 tiles (TDPBF16PS), the
 * activations' bf16 rows, and the plain-C twin of that kernel.
 *
 * Each value goes in as a sum of two bf16: hi, its nearest bf16, and lo, the nearest bf16
 * of what is left. An f16 weight's 11 significant bits fit in hi and lo exactly; an
 * activation keeps 16 of f32's 24. The products hi*hi + lo*hi + hi*lo (each exact in f32;
 * the lo*lo term, below 2^-16 of the product, is dropped) give the f32 path's result to
 * about 2^-16 relative, where bf16 alone would be 2^-8: nearer than llama.cpp, which rounds
 * an F16 matrix's activations to f16. A BF16 weight is its own hi (no lo plane). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../qpack_internal.h"
#include "../simd_internal.h"

enum { BF_STEP = 32, BF_UNIT = QP_ROWS * BF_STEP * 2 }; /* elements of K per unit; bytes */

/* Round to nearest even; NaN stays NaN (quiet). */
static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static float f32_of_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* hi = the nearest bf16 of f, *lo = the nearest bf16 of f - hi (0 for inf and NaN). */
static uint16_t bf16_split(float f, uint16_t *lo)
{
    uint16_t hi = bf16_of(f);
    float rest = f - f32_of_bf16(hi);
    *lo = isfinite(rest) ? bf16_of(rest) : 0;
    return hi;
}

void simd_qpack_bf16_rows(uint16_t *out, const float *x, size_t lda, int M, int K)
{
    for (int m = 0; m < M; m++) {
        uint16_t *hi = out + (size_t)m * 2 * K, *lo = hi + K;
        for (int k = 0; k < K; k++)
            hi[k] = bf16_split(x[(size_t)m * lda + k], &lo[k]);
    }
}

/* p's header for a bf16 pack of N rows of K (a multiple of BF_STEP) values, of type F16
 * (hi and lo planes) or BF16 (hi only); p->data is left to the caller. */
static void bf16_header(simd_qpack *p, uint32_t type, int N, int K)
{
    memset(p, 0, sizeof *p);
    p->type = type;
    p->N = N;
    p->K = K;
    p->blk = p->sub = BF_STEP;
    p->n_sub = 1;
    p->n_blk = K / BF_STEP;
    p->act = QACT_F32;
    p->act_blk_bytes = BF_STEP * 2;
    p->unit_bytes = type == QT_F16 ? 2 * BF_UNIT : BF_UNIT; /* hi, then lo */
    p->bytes = ((size_t)N + QP_ROWS - 1) / QP_ROWS * p->n_blk * p->unit_bytes;
}

simd_qpack *qpack_bf16_make(const simd_qmat *w)
{
    if (w->N < 1 || w->K < 1 || w->K % BF_STEP != 0 || w->row_bytes != (size_t)w->K * 2)
        return NULL;
    simd_qpack *p = malloc(sizeof *p);
    if (!p)
        return NULL;
    bf16_header(p, w->type, w->N, w->K);
    p->data = aligned_alloc(QP_ALIGN, p->bytes);
    if (!p->data) {
        free(p);
        return NULL;
    }
    memset(p->data, 0, p->bytes);
    for (int n = 0; n < w->N; n++) {
        const uint16_t *row = (const uint16_t *)((const uint8_t *)w->data + (size_t)n * w->row_bytes);
        for (int k = 0; k < w->K; k++) {
            uint16_t *u = (uint16_t *)qpack_unit(p, n / QP_ROWS, k / BF_STEP);
            int e = k % BF_STEP, at = ((e / 2) * QP_ROWS + n % QP_ROWS) * 2 + e % 2;
            if (w->type == QT_BF16)
                u[at] = row[k];
            else
                u[at] = bf16_split(simd_f16_to_f32_scalar(row[k]), &u[BF_UNIT / 2 + at]);
        }
    }
    return p;
}

/* out[m][n] = the sum of the products the tiles take (x hi * w hi + x lo * w hi, and
 * x hi * w lo where the pack has a lo plane) in double, rounded once; then beta. */
void qpack_bf16_gemm_ref(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end)
{
    bool lo_plane = p->unit_bytes == 2 * BF_UNIT;
    for (int m = 0; m < M; m++) {
        const uint16_t *xh = (const uint16_t *)xq + (size_t)m * 2 * p->K, *xl = xh + p->K;
        for (int n = n_begin; n < n_end; n++) {
            double s = 0.0;
            for (int k = 0; k < p->K; k++) {
                const uint16_t *u = (const uint16_t *)qpack_unit(p, n / QP_ROWS, k / BF_STEP);
                int e = k % BF_STEP, at = ((e / 2) * QP_ROWS + n % QP_ROWS) * 2 + e % 2;
                double wh = f32_of_bf16(u[at]);
                s += (f32_of_bf16(xh[k]) + (double)f32_of_bf16(xl[k])) * wh;
                if (lo_plane)
                    s += (double)f32_of_bf16(xh[k]) * f32_of_bf16(u[BF_UNIT / 2 + at]);
            }
            float *o = out + (size_t)m * ldo + n;
            *o = beta == 0.0f ? (float)s : (float)s + beta * *o;
        }
    }
}

/* ---- packs of f32 values made during a step (qpack.h) ---- */

void qpack_f32_view(simd_qpack *p, const void *pack, int N, int K)
{
    bf16_header(p, QT_F16, N, simd_qpack_f32_k(K));
    p->data = (uint8_t *)pack; /* read only: the kernels never write a pack */
}

size_t simd_qpack_f32_bytes(int N, int K)
{
    simd_qpack p;
    bf16_header(&p, QT_F16, N, simd_qpack_f32_k(K));
    return p.bytes;
}

size_t simd_qpack_f32_tmp(int N, int K)
{
    return (size_t)2 * BF_STEP * (size_t)(N > K ? N : K); /* 16 rows of 2K, 32 of 2N */
}

/* The unit word (two bf16 of values 2r, 2r + 1 of a row) of row n (of 16) at pair r. */
static inline size_t unit_word(int n, int r) { return (size_t)r * QP_ROWS + (size_t)n; }

void simd_qpack_f32_make(const simd_kernels *k, void *dst, uint16_t *tmp, const float *w,
                         size_t ldw, bool columns, int N, int K)
{
    simd_qpack p;
    qpack_f32_view(&p, dst, N, K);
    memset(dst, 0, p.bytes); /* the padding rows and values */
    uint32_t *data = dst;
    size_t plane = BF_UNIT / 4; /* words a plane */
    if (!columns) {
        /* 16 rows at a time: each row's hi and lo (tmp: row i's K hi, then K lo), their
         * pairs of values as words into the units of the group */
        for (int n0 = 0; n0 < N; n0 += QP_ROWS) {
            int rows = N - n0 < QP_ROWS ? N - n0 : QP_ROWS;
            k->bf16_rows(tmp, w + (size_t)n0 * ldw, ldw, rows, K);
            for (int i = 0; i < rows; i++) {
                const uint16_t *hi = tmp + (size_t)i * 2 * K, *lo = hi + K;
                for (int e = 0; e < K; e += 2) {
                    uint32_t *u = data + ((size_t)(n0 / QP_ROWS) * p.n_blk + e / BF_STEP) *
                                             (p.unit_bytes / 4);
                    size_t at = unit_word(i, e % BF_STEP / 2);
                    uint16_t h1 = e + 1 < K ? hi[e + 1] : 0, l1 = e + 1 < K ? lo[e + 1] : 0;
                    u[at] = hi[e] | (uint32_t)h1 << 16;
                    u[plane + at] = lo[e] | (uint32_t)l1 << 16;
                }
            }
        }
        return;
    }
    /* w's rows are the pack's values: BF_STEP of them at a time (one unit of every group),
     * split (tmp: source row j's N hi, then N lo), the pairs of source rows interleaved */
    for (int e0 = 0; e0 < K; e0 += BF_STEP) {
        int rows = K - e0 < BF_STEP ? K - e0 : BF_STEP;
        k->bf16_rows(tmp, w + (size_t)e0 * ldw, ldw, rows, N);
        for (int j = 0; j < rows; j += 2) {
            const uint16_t *h0 = tmp + (size_t)j * 2 * N, *l0 = h0 + N;
            const uint16_t *h1 = j + 1 < rows ? h0 + 2 * N : NULL, *l1 = h1 ? h1 + N : NULL;
            for (int n = 0; n < N; n++) {
                uint32_t *u = data + ((size_t)(n / QP_ROWS) * p.n_blk + e0 / BF_STEP) *
                                         (p.unit_bytes / 4);
                size_t at = unit_word(n % QP_ROWS, j / 2);
                u[at] = h0[n] | (uint32_t)(h1 ? h1[n] : 0) << 16;
                u[plane + at] = l0[n] | (uint32_t)(l1 ? l1[n] : 0) << 16;
            }
        }
    }
}
