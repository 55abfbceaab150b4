/* qdot_x86.h: the int8 dot-product vocabulary of vec_qgemm.h on 256-bit integer vectors,
 * for the AVX2 and AVX-512 files: maddubs + madd, or with AVX-512 VNNI (__AVX512VNNI__)
 * vpdpbusd for plain dots and vpdpwssd for scaled ones. Signed weights go through maddubs
 * and vpdpbusd as |w| times the activation with w's sign, which cannot saturate: pairs are
 * at most 2 * 128 * 127. Include before vec_kernels.h. */
#ifndef TESSERA_SIMD_QDOT_X86_H
#define TESSERA_SIMD_QDOT_X86_H

#include <immintrin.h>
#include <stdint.h>

typedef __m256i QI;
typedef __m256i QS;
typedef __m256 QF;
typedef struct QW {
    __m256i u; /* |w| (unsigned operand) */
    __m256i s; /* w, for its signs */
} QW;

static inline QI qi_load(const int8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline QW qw_prep(QI w, const int sgn)
{
    QW r = {sgn ? _mm256_abs_epi8(w) : w, w};
    return r;
}
static inline QS qs_zero(void) { return _mm256_setzero_si256(); }
static inline QS qs_sub(QS a, QS b) { return _mm256_sub_epi32(a, b); }
/* The activation with the weight's signs where the weight is signed. */
static inline QI qi_signed(QW w, QI a, const int sgn) { return sgn ? _mm256_sign_epi8(a, w.s) : a; }
static inline QS qs_dot(QS acc, QW w, QI a, const int sgn)
{
#ifdef __AVX512VNNI__
    return _mm256_dpbusd_epi32(acc, w.u, qi_signed(w, a, sgn));
#else
    __m256i p = _mm256_maddubs_epi16(w.u, qi_signed(w, a, sgn));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
}
static inline QS qs_dot_sc(QS acc, QW w, QI a, const int16_t *sc, const int sgn)
{
    __m256i p = _mm256_maddubs_epi16(w.u, qi_signed(w, a, sgn));
    __m256i s = _mm256_loadu_si256((const __m256i *)sc);
#ifdef __AVX512VNNI__
    return _mm256_dpwssd_epi32(acc, p, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
#endif
}
static inline QS qs_mins(const int16_t *mn, const int16_t *bs)
{
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)mn),
                             _mm256_loadu_si256((const __m256i *)bs));
}
static inline QF qf_zero(void) { return _mm256_setzero_ps(); }
static inline QF qf_fma(QF acc, float x, QS s)
{
    return _mm256_fmadd_ps(_mm256_set1_ps(x), _mm256_cvtepi32_ps(s), acc);
}
static inline float qf_reduce(QF v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

#endif
