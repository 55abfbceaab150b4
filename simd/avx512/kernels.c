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
/* Lane i of the result is the sum of the lanes of a[i], i < 16: each input is folded to
 * 8 lanes, then two hadd trees reduce 8 inputs each. */
static inline __m256 fold_half(V v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }
static inline __m256 reduce8(const __m256 *a)
{
    __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
    __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
    __m256 lo = _mm256_hadd_ps(h01, h23), hi = _mm256_hadd_ps(h45, h67);
    return _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
}
static inline V v_reduce_lanes(const V *a)
{
    __m256 f[16];
    for (int i = 0; i < 16; i++)
        f[i] = fold_half(a[i]);
    return _mm512_insertf32x8(_mm512_castps256_ps512(reduce8(f)), reduce8(f + 8), 1);
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

#include "vec_kernels.h"
