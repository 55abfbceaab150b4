/* gemm.c: the reference skinny GEMM out = x . w^T + beta * out, one dot product at a time,
 * and out = x . w (gemm_nn), each element a chain of fused multiply-adds over k. */
#include <math.h>

#include "simd_internal.h"

void simd_ref_gemm_nt(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                      int M, int N, int K, float beta, int n_begin, int n_end)
{
    /* out (M, ldo), x (M, lda), w (N, K); columns [n_begin, n_end) of out */
    (void)N;
    for (int m = 0; m < M; m++) {
        const float *xm = x + (size_t)m * lda;
        float *om = out + (size_t)m * ldo;
        for (int n = n_begin; n < n_end; n++) {
            const float *wn = w + (size_t)n * K;
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += xm[k] * wn[k];
            om[n] = beta == 0.0f ? s : s + beta * om[n]; /* beta 0 never reads out */
        }
    }
}

void simd_ref_gemm_nn(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                      size_t ldw, int M, int N, int K)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s = fmaf(x[(size_t)m * lda + k], w[(size_t)k * ldw + n], s);
            out[(size_t)m * ldo + n] = s;
        }
}
