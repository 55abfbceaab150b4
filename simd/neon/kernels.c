/* kernels.c: the aarch64 NEON vector vocabulary; the kernels are in vec_kernels.h. */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

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
static inline V v_load_i8(const int8_t *p)
{
    int32_t x;
    memcpy(&x, p, sizeof x);
    int16x8_t w = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(x)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(w)));
}
/* v's lanes, integers in [-128, 127], as VW int8 at p. */
static inline void v_store_i8(int8_t *p, V v)
{
    int16x4_t w = vmovn_s32(vcvtnq_s32_f32(v));
    int32_t x = vget_lane_s32(vreinterpret_s32_s8(vmovn_s16(vcombine_s16(w, w))), 0);
    memcpy(p, &x, sizeof x);
}
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

/* ---- int8 dot products for vec_qgemm.h: sdot where the build targets it (dotprod),
 * else widening multiplies with pairwise accumulation ---- */
typedef struct QI {
    int8x16_t lo, hi; /* elements 0..15, 16..31 */
} QI;
typedef QI QW;
typedef int32x4_t QS;
typedef float32x4_t QF;
#define QG_NR 4
#define QG_MR 4

static inline QI qi_load(const int8_t *p)
{
    QI r = {vld1q_s8(p), vld1q_s8(p + 16)};
    return r;
}
static inline QW qw_prep(QI w, const int sgn)
{
    (void)sgn; /* signed by nature */
    return w;
}
static inline void qi_store(int8_t *p, QI v) { vst1q_s8(p, v.lo), vst1q_s8(p + 16, v.hi); }
static inline QI qi_load_u(const uint8_t *p) { return qi_load((const int8_t *)p); }
static inline QI qi_or(QI a, QI b)
{
    QI r = {vorrq_s8(a.lo, b.lo), vorrq_s8(a.hi, b.hi)};
    return r;
}
static inline int8x16_t qi_bits16(int8x16_t v, int s, int mask)
{
    uint8x16_t u = vshlq_u8(vreinterpretq_u8_s8(v), vdupq_n_s8((int8_t)-s));
    return vreinterpretq_s8_u8(vandq_u8(u, vdupq_n_u8((uint8_t)mask)));
}
static inline QI qi_bits(QI v, int s, int mask)
{
    QI r = {qi_bits16(v.lo, s, mask), qi_bits16(v.hi, s, mask)};
    return r;
}
static inline QI qi_shl(QI v, int s)
{
    QI r = {vshlq_s8(v.lo, vdupq_n_s8((int8_t)s)), vshlq_s8(v.hi, vdupq_n_s8((int8_t)s))};
    return r;
}
static inline QI qi_nibbles16(const uint8_t *p)
{
    uint8x16_t b = vld1q_u8(p);
    QI r = {vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0xF))), vreinterpretq_s8_u8(vshrq_n_u8(b, 4))};
    return r;
}
static inline QI qi_iq4(QI v)
{
    int8x16_t t = vld1q_s8(qt_iq4nl_values);
    QI r = {vqtbl1q_s8(t, vreinterpretq_u8_s8(v.lo)), vqtbl1q_s8(t, vreinterpretq_u8_s8(v.hi))};
    return r;
}
static inline QS qs_zero(void) { return vdupq_n_s32(0); }
static inline QS qs_sub(QS a, QS b) { return vsubq_s32(a, b); }
/* 16 products of w and a summed into 4 lanes. */
static inline int32x4_t qs_dot16(int32x4_t acc, int8x16_t w, int8x16_t a)
{
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, w, a);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(a)));
    return vpadalq_s16(acc, vmull_high_s8(w, a));
#endif
}
static inline QS qs_dot(QS acc, QW w, QI a, const int sgn)
{
    (void)sgn;
    return qs_dot16(qs_dot16(acc, w.lo, a.lo), w.hi, a.hi);
}
typedef struct QC {
    int32_t lo, hi; /* the scales of elements 0..15 and 16..31 */
} QC;
static inline QC qc_make(const int16_t *sc)
{
    QC c = {sc[0], sc[1]};
    return c;
}
static inline QS qs_dot_sc(QS acc, QW w, QI a, QC c, const int sgn)
{
    (void)sgn;
    acc = vmlaq_n_s32(acc, qs_dot16(vdupq_n_s32(0), w.lo, a.lo), c.lo);
    return vmlaq_n_s32(acc, qs_dot16(vdupq_n_s32(0), w.hi, a.hi), c.hi);
}
static inline QS qs_mins(const int16_t *mn, const int16_t *bs)
{
    int16x8_t m0 = vld1q_s16(mn), m1 = vld1q_s16(mn + 8);
    int16x8_t b0 = vld1q_s16(bs), b1 = vld1q_s16(bs + 8);
    int32x4_t r = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
    r = vmlal_high_s16(r, m0, b0);
    r = vmlal_s16(r, vget_low_s16(m1), vget_low_s16(b1));
    return vmlal_high_s16(r, m1, b1);
}
static inline QF qf_zero(void) { return vdupq_n_f32(0.0f); }
static inline QF qf_fma(QF acc, float x, QS s) { return vfmaq_n_f32(acc, vcvtq_f32_s32(s), x); }
static inline float qf_reduce(QF v) { return vaddvq_f32(v); }

#include "vec_kernels.h"
