/* simd_internal.h: the per-ISA kernel tables and scalar helpers shared inside simd/. */
#ifndef TESSERA_SIMD_INTERNAL_H
#define TESSERA_SIMD_INTERNAL_H

#include <stdint.h>

#include "simd.h"

/* One table per ISA directory; only those built for this target exist. */
extern const simd_kernels simd_ref_table;
extern const simd_kernels simd_avx2_table;
extern const simd_kernels simd_avx512_table;
extern const simd_kernels simd_neon_table;
extern const simd_kernels simd_avx512vnni_table;

/* Scalar IEEE binary16 <-> binary32, round to nearest even (ref/f16.c). */
uint16_t simd_f32_to_f16_scalar(float f);
float simd_f16_to_f32_scalar(uint16_t h);

/* The positions row j of an attention call attends to: [*first, *last], its causal range
 * (or window) cut to the shape's span; *first > *last where none is left. */
static inline void simd_attn_positions(const simd_attn_shape *shape, int j, int *first,
                                       int *last)
{
    int hi = shape->pos0 + j, lo = 0;
    if (shape->window > 0 && hi - shape->window + 1 > 0)
        lo = hi - shape->window + 1;
    if (shape->span_end > 0 && hi > shape->span_end - 1)
        hi = shape->span_end - 1;
    if (lo < shape->span_begin)
        lo = shape->span_begin;
    *first = lo;
    *last = hi;
}

/* The reference attention (ref/attention.c), for the reference table. */
void simd_ref_attention(float *out, const float *q, const simd_kv_view *kv,
                        const simd_attn_shape *shape, int head_begin, int head_end);

/* The reference skinny GEMM (ref/gemm.c), for the reference table. */
void simd_ref_gemm_nt(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                      int M, int N, int K, float beta, int n_begin, int n_end);
void simd_ref_gemm_nn(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                      size_t ldw, int M, int N, int K);

/* The reference activation quantization and quantized GEMM (ref/qgemm.c). */
void simd_ref_quantize_act(void *out, const float *x, size_t lda, int M, int K, qact a);
void simd_ref_qgemm(float *out, size_t ldo, const void *xq, const simd_qmat *w, int M,
                    float beta, int n_begin, int n_end);

#endif
