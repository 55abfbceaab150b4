/* kernels.c: the AVX-512 (F/VL/BW) vector vocabulary; the kernels are in vec_kernels.h. */
#include <immintrin.h>
#include <stdint.h>

typedef __m512 V;
#define VW 16
#define V_ACCS 16 /* accumulators a kernel may keep live (of 32 registers) */
#ifndef SIMD_TABLE /* avx512vnni/kernels.c builds this file again under its own name */
#define SIMD_TABLE simd_avx512_table
#define SIMD_NAME "avx512"
#endif
/* Skinny GEMM for every step of the default engine (step_tokens 512 + 64 decodes): on the
 * 16-core Xeon it beat OpenBLAS at every M measured, prefill steps included
 * (docs/BENCHMARKS.md, "Skinny GEMM"). */
#define GEMM_MAX_ROWS 576
/* Skinny-GEMM tile: 6 weight rows x 4 activation rows (24 accumulators + 6 weight vectors
 * + 1 activation vector of the 32 registers), next tile prefetched into L2. On the 16-core
 * Xeon it ran a stories110m step's matmuls 13% faster than 4 x 4 at M = 16..128 and no
 * slower at M = 1; 8 x 2, 8 x 3 and prefetching 2 or 4 tiles ahead were slower
 * (bench_gemm --kernel-only with -D overrides, docs/BENCHMARKS.md). */
#ifndef GEMM_NR
#define GEMM_NR 6
#define GEMM_MR 4
#define GEMM_PF_LOCALITY 2
#endif

/* First n lanes, n in [0, 16]. */
static inline __mmask16 v_mask(size_t n) { return (__mmask16)((1u << n) - 1u); }

static inline V v_zero(void) { return _mm512_setzero_ps(); }
static inline V v_set1(float f) { return _mm512_set1_ps(f); }
static inline V v_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_store(float *p, V v) { _mm512_storeu_ps(p, v); }
static inline V v_loadn(const float *p, size_t n) { return _mm512_maskz_loadu_ps(v_mask(n), p); }
static inline void v_storen(float *p, V v, size_t n) { _mm512_mask_storeu_ps(p, v_mask(n), v); }
static inline V v_load_h(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline V v_loadn_h(const uint16_t *p, size_t n)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(v_mask(n), p));
}
static inline V v_load_i8(const int8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
static inline V v_loadn_i8(const int8_t *p, size_t n)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(v_mask(n), p)));
}
/* v's lanes, integers in [-128, 127], as VW int8 at p. */
static inline void v_store_i8(int8_t *p, V v)
{
    _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
}
static inline void v_store_h(uint16_t *p, V v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
static inline void v_storen_h(uint16_t *p, V v, size_t n)
{
    _mm256_mask_storeu_epi16(p, v_mask(n), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
static inline V v_add(V a, V b) { return _mm512_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm512_sub_ps(a, b); }
static inline V v_mul(V a, V b) { return _mm512_mul_ps(a, b); }
static inline V v_div(V a, V b) { return _mm512_div_ps(a, b); }
static inline V v_max(V a, V b) { return _mm512_max_ps(a, b); }
static inline V v_min(V a, V b) { return _mm512_min_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline float v_reduce_add(V v) { return _mm512_reduce_add_ps(v); }
static inline float v_reduce_max(V v) { return _mm512_reduce_max_ps(v); }
/* Lane i of the result is the sum of the lanes of a[i], i < 16, added in this order:
 * f[k] = a[i][k] + a[i][k + 8], then ((f0 + f1) + (f2 + f3)) + ((f4 + f5) + (f6 + f7)),
 * the order of the hadd trees this replaced (the same bits). Two inputs share a register
 * from the first step on: 46 instructions against their 75. */
static inline V v_reduce_lanes(const V *a)
{
    V f[8], h[4], g[2];
    for (int i = 0; i < 8; i++) /* f of a[2i] in lanes 0-7, of a[2i + 1] in 8-15 */
        f[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++) /* adjacent pairs of f */
        h[i] = _mm512_add_ps(_mm512_shuffle_ps(f[2 * i], f[2 * i + 1], 0x88),
                             _mm512_shuffle_ps(f[2 * i], f[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++) /* pairs of pairs: each input's two half sums */
        g[i] = _mm512_add_ps(_mm512_shuffle_ps(h[2 * i], h[2 * i + 1], 0x88),
                             _mm512_shuffle_ps(h[2 * i], h[2 * i + 1], 0xDD));
    /* the halves' sums, inputs in the order 0 2 4 6 1 3 5 7 8 10 12 14 9 11 13 15 */
    V r = _mm512_add_ps(_mm512_shuffle_f32x4(g[0], g[1], 0x88),
                        _mm512_shuffle_f32x4(g[0], g[1], 0xDD));
    return _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15), r);
}
static inline V v_swap_pairs(V v) { return _mm512_permute_ps(v, 0xb1); }
static inline V v_round(V v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline V v_pow2n(V n)
{
    __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}

/* Keeps v in a register: stops the compiler from folding a reused load into every
 * instruction that uses it (which doubles the loads of the GEMM tile). */
static inline V v_in_reg(V v)
{
    __asm__("" : "+v"(v));
    return v;
}

/* Quantized GEMM tile: 4 weight rows x 4 activation rows (16 int accumulators of 32). */
#define QG_NR 4
#define QG_MR 4
#include "qdot_x86.h"

/* The nearest bf16 of each lane of u (f32 bits), as 32-bit lanes, ties to even; a NaN
 * stays NaN, made quiet: bf16_of in ref/qpack_bf16.c, 16 lanes at a time. */
static inline __m512i v512_bf16_of(__m512i u)
{
    __m512i top = _mm512_srli_epi32(u, 16);
    __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                    _mm512_and_si512(top, _mm512_set1_epi32(1)));
    __m512i near = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_or_epi32(near, nan, top, _mm512_set1_epi32(0x40));
}

/* n (<= 16) lanes of x split into hi, the nearest bf16, and lo, the nearest bf16 of
 * x - hi (0 where that is not finite): bf16_split in ref/qpack_bf16.c. */
static inline void v512_bf16_split(uint16_t *hi, uint16_t *lo, const float *x, int n)
{
    __mmask16 m = v_mask((size_t)n);
    __m512 v = _mm512_maskz_loadu_ps(m, x);
    __m512i h = v512_bf16_of(_mm512_castps_si512(v));
    __m512 rest = _mm512_sub_ps(v, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
    __m512i r = _mm512_castps_si512(rest);
    __mmask16 finite = _mm512_cmplt_epu32_mask(_mm512_and_si512(r, _mm512_set1_epi32(0x7fffffff)),
                                               _mm512_set1_epi32(0x7f800000));
    __m512i l = _mm512_maskz_mov_epi32(finite, v512_bf16_of(r));
    _mm256_mask_storeu_epi16(hi, m, _mm512_cvtepi32_epi16(h));
    _mm256_mask_storeu_epi16(lo, m, _mm512_cvtepi32_epi16(l));
}

/* The bf16 tiles' activation rows (simd.h's bf16_rows), 16 values at a time. */
static void v512_bf16_rows(uint16_t *out, const float *x, size_t lda, int M, int K)
{
    for (int r = 0; r < M; r++) {
        uint16_t *hi = out + (size_t)r * 2 * K, *lo = hi + K;
        const float *row = x + (size_t)r * lda;
        for (int k = 0; k < K; k += VW)
            v512_bf16_split(hi + k, lo + k, row + k, K - k < VW ? K - k : VW);
    }
}
#define V_BF16_ROWS v512_bf16_rows

#include "vec_kernels.h"
