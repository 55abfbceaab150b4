/* kernels.c: the aarch64 NEON vector vocabulary; the kernels are in vec_kernels.h. */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

typedef float32x4_t V;
#define VW 4
#define V_ACCS 16 /* accumulators a kernel may keep live (of 32 registers) */
#define SIMD_TABLE simd_neon_table
#define SIMD_NAME "neon"
#define GEMM_MAX_ROWS 16 /* not measured on Arm: the AVX2 figure */

static inline V v_zero(void) { return vdupq_n_f32(0.0f); }
static inline V v_set1(float f) { return vdupq_n_f32(f); }
static inline V v_load(const float *p) { return vld1q_f32(p); }
static inline void v_store(float *p, V v) { vst1q_f32(p, v); }
static inline V v_loadn(const float *p, size_t n)
{
    float t[VW] = {0};
    memcpy(t, p, n * sizeof *p);
    return vld1q_f32(t);
}
static inline void v_storen(float *p, V v, size_t n)
{
    float t[VW];
    vst1q_f32(t, v);
    memcpy(p, t, n * sizeof *p);
}
static inline V v_load_h(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
static inline void v_store_h(uint16_t *p, V v) { vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v))); }
#include "vec_tail_h.h"
static inline V v_add(V a, V b) { return vaddq_f32(a, b); }
static inline V v_sub(V a, V b) { return vsubq_f32(a, b); }
static inline V v_mul(V a, V b) { return vmulq_f32(a, b); }
static inline V v_div(V a, V b) { return vdivq_f32(a, b); }
static inline V v_max(V a, V b) { return vmaxq_f32(a, b); }
static inline V v_min(V a, V b) { return vminq_f32(a, b); }
static inline V v_fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }
static inline float v_reduce_add(V v) { return vaddvq_f32(v); }
static inline float v_reduce_max(V v) { return vmaxvq_f32(v); }
/* Lane i of the result is the sum of the lanes of a[i], i < 4. */
static inline V v_reduce_lanes(const V *a)
{
    return vpaddq_f32(vpaddq_f32(a[0], a[1]), vpaddq_f32(a[2], a[3]));
}
static inline V v_swap_pairs(V v) { return vrev64q_f32(v); }
static inline V v_round(V v) { return vrndnq_f32(v); }
static inline V v_pow2n(V n)
{
    int32x4_t e = vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127));
    return vreinterpretq_f32_s32(vshlq_n_s32(e, 23));
}

/* Keeps v in a register: stops the compiler from folding a reused load into every
 * instruction that uses it (which doubles the loads of the GEMM tile). */
static inline V v_in_reg(V v)
{
    __asm__("" : "+w"(v));
    return v;
}

#include "vec_kernels.h"
