/* kernels.c: the AVX2 + FMA + F16C vector vocabulary; the kernels are in vec_kernels.h. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

typedef __m256 V;
#define VW 8
#define V_ACCS 8 /* accumulators a kernel may keep live (of 16 registers) */
#define SIMD_TABLE simd_avx2_table
#define SIMD_NAME "avx2"
/* Skinny GEMM up to 16 rows: on the 2-core EPYC (Zen 3) OpenBLAS's packed sgemm wins
 * from about 32 rows (docs/BENCHMARKS.md, "Skinny GEMM"). */
#define GEMM_MAX_ROWS 16

static const int32_t v_mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
/* First n lanes set, n in [0, 8]. */
static inline __m256i v_mask(size_t n) { return _mm256_loadu_si256((const __m256i *)(v_mask_tab + 8 - n)); }

static inline V v_zero(void) { return _mm256_setzero_ps(); }
static inline V v_set1(float f) { return _mm256_set1_ps(f); }
static inline V v_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_store(float *p, V v) { _mm256_storeu_ps(p, v); }
static inline V v_loadn(const float *p, size_t n) { return _mm256_maskload_ps(p, v_mask(n)); }
static inline void v_storen(float *p, V v, size_t n) { _mm256_maskstore_ps(p, v_mask(n), v); }
static inline V v_load_h(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline void v_store_h(uint16_t *p, V v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
static inline V v_load_i8(const int8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
/* v's lanes, integers in [-128, 127], as VW int8 at p. */
static inline void v_store_i8(int8_t *p, V v)
{
    __m256i i = _mm256_cvtps_epi32(v);
    __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    _mm_storel_epi64((__m128i *)p, _mm_packs_epi16(w, w));
}
#include "vec_tail_h.h"
static inline V v_add(V a, V b) { return _mm256_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm256_sub_ps(a, b); }
static inline V v_mul(V a, V b) { return _mm256_mul_ps(a, b); }
static inline V v_div(V a, V b) { return _mm256_div_ps(a, b); }
static inline V v_max(V a, V b) { return _mm256_max_ps(a, b); }
static inline V v_min(V a, V b) { return _mm256_min_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline float v_reduce_add(V v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
static inline float v_reduce_max(V v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_shuffle_ps(s, s, 1)));
}
/* Lane i of the result is the sum of the lanes of a[i], i < 8. */
static inline V v_reduce_lanes(const V *a)
{
    V h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
    V h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
    V lo = _mm256_hadd_ps(h01, h23), hi = _mm256_hadd_ps(h45, h67);
    return _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
}
static inline V v_swap_pairs(V v) { return _mm256_permute_ps(v, 0xb1); }
static inline V v_round(V v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline V v_pow2n(V n)
{
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}

/* Keeps v in a register: stops the compiler from folding a reused load into every
 * instruction that uses it (which doubles the loads of the GEMM tile). */
static inline V v_in_reg(V v)
{
    __asm__("" : "+x"(v));
    return v;
}

/* Quantized GEMM tile: 4 weight rows x 2 activation rows (8 int accumulators of 16). */
#define QG_NR 4
#define QG_MR 2
#include "qdot_x86.h"

#include "vec_kernels.h"
