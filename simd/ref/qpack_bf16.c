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

simd_qpack *qpack_bf16_make(const simd_qmat *w)
{
    if (w->N < 1 || w->K < 1 || w->K % BF_STEP != 0 || w->row_bytes != (size_t)w->K * 2)
        return NULL;
    simd_qpack *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->type = w->type;
    p->N = w->N;
    p->K = w->K;
    p->blk = p->sub = BF_STEP;
    p->n_sub = 1;
    p->n_blk = w->K / BF_STEP;
    p->act = QACT_F32;
    p->act_blk_bytes = BF_STEP * 2;
    p->unit_bytes = w->type == QT_F16 ? 2 * BF_UNIT : BF_UNIT; /* hi, then lo */
    size_t groups = ((size_t)w->N + QP_ROWS - 1) / QP_ROWS;
    p->bytes = groups * p->n_blk * p->unit_bytes;
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
