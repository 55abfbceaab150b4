/* qdot_x86.h: the int8 dot-product vocabulary of vec_qgemm.h on 256-bit integer vectors,
 * for the AVX2 and AVX-512 files: maddubs + madd, or with AVX-512 VNNI (__AVX512VNNI__)
 * vpdpbusd for plain dots and vpdpwssd for scaled ones. Signed weights go through maddubs
 * and vpdpbusd as |w| times the activation with w's sign, which cannot saturate: pairs are
 * at most 2 * 128 * 127. Include before vec_kernels.h. */
#ifndef TESSERA_SIMD_QDOT_X86_H
#define TESSERA_SIMD_QDOT_X86_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

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
static inline void qi_store(int8_t *p, QI v) { _mm256_storeu_si256((__m256i *)p, v); }
static inline QI qi_load_u(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline QI qi_or(QI a, QI b) { return _mm256_or_si256(a, b); }
static inline QI qi_bits(QI v, int s, int mask)
{
    return _mm256_and_si256(_mm256_srli_epi16(v, s), _mm256_set1_epi8((char)mask));
}
static inline QI qi_shl(QI v, int s) { return _mm256_slli_epi16(v, s); }
static inline QI qi_nibbles16(const uint8_t *p)
{
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(b), _mm_srli_epi16(b, 4), 1);
    return _mm256_and_si256(v, _mm256_set1_epi8(0xF));
}
static inline QI qi_iq4(QI v)
{
    __m128i t = _mm_loadu_si128((const __m128i *)qt_iq4nl_values);
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(t), v);
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
/* sc[0] in the 8 int16 of the low half (the pairs of elements 0..15), sc[1] in the high. */
typedef __m256i QC;
static inline QC qc_make(const int16_t *sc)
{
    int32_t two;
    memcpy(&two, sc, sizeof two);
    const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2,
                                          3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    return _mm256_shuffle_epi8(_mm256_set1_epi32(two), pick);
}
static inline QS qs_dot_sc(QS acc, QW w, QI a, QC s, const int sgn)
{
    __m256i p = _mm256_maddubs_epi16(w.u, qi_signed(w, a, sgn));
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

#if defined(__AVX512BW__) && !defined(QG_NARROW) /* -DQG_NARROW: 32 wide, for tuning runs */
/* The 256-element types 64 elements a vector (vec_qgemm.h's wide set): twice the work of
 * each instruction. AVX-512 has no vpsignb: a masked negation gives the signs. */
#define QG_KW 64
typedef __m512i QIW;
typedef __m512i QSW;
typedef __m512i QCW;
typedef __m512 QFW;
typedef struct QWW {
    __m512i u;      /* |w| */
    __mmask64 neg;  /* w < 0 */
} QWW;
static inline QIW qiw_load(const int8_t *p) { return _mm512_loadu_si512(p); }
static inline QWW qww_prep(QIW w, const int sgn)
{
    QWW r = {sgn ? _mm512_abs_epi8(w) : w, sgn ? _mm512_movepi8_mask(w) : 0};
    return r;
}
/* sc[0..3]: the scales of elements 0..15, .., 48..63, each in the int16 of its 128-bit lane. */
static inline QCW qcw_make(const int16_t *sc)
{
    int64_t four;
    memcpy(&four, sc, sizeof four);
    const __m512i pick = _mm512_set_epi64(0x0706070607060706, 0x0706070607060706,
                                          0x0504050405040504, 0x0504050405040504,
                                          0x0302030203020302, 0x0302030203020302,
                                          0x0100010001000100, 0x0100010001000100);
    return _mm512_shuffle_epi8(_mm512_set1_epi64(four), pick);
}
static inline QSW qsw_zero(void) { return _mm512_setzero_si512(); }
static inline QSW qsw_sub(QSW a, QSW b) { return _mm512_sub_epi32(a, b); }
static inline QSW qsw_dot_sc(QSW acc, QWW w, QIW a, QCW s, const int sgn)
{
    if (sgn)
        a = _mm512_mask_sub_epi8(a, w.neg, _mm512_setzero_si512(), a);
    __m512i p = _mm512_maddubs_epi16(w.u, a);
#ifdef __AVX512VNNI__
    return _mm512_dpwssd_epi32(acc, p, s);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, s));
#endif
}
static inline QSW qsw_mins(const int16_t *mn, const int16_t *bs)
{
    return _mm512_zextsi256_si512(qs_mins(mn, bs));
}
static inline QFW qfw_zero(void) { return _mm512_setzero_ps(); }
static inline QFW qfw_fma(QFW acc, float x, QSW s)
{
    return _mm512_fmadd_ps(_mm512_set1_ps(x), _mm512_cvtepi32_ps(s), acc);
}
static inline float qfw_reduce(QFW v)
{
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    return qf_reduce(h);
}

/* The direct set (vec_qgemm.h's few-row kernel): K-type blocks unpacked straight into
 * registers, 64 elements at a time, and a block's 16 sub-block scales held as int16. */
#define QG_DIRECT 1
typedef __m256i QSC;
static inline QIW qiw_load_u(const uint8_t *p) { return _mm512_loadu_si512(p); }
static inline QIW qiw_or(QIW a, QIW b) { return _mm512_or_si512(a, b); }
static inline QIW qiw_shl(QIW v, int s) { return _mm512_slli_epi16(v, (unsigned)s); }
static inline QIW qiw_bits(QIW v, int s, int mask)
{
    return _mm512_and_si512(_mm512_srli_epi16(v, (unsigned)s), _mm512_set1_epi8((char)mask));
}
/* The 32 bytes at p in both halves, shifted right by s0 in the low half and s1 in the
 * high, & mask in each byte. */
static inline QIW qiw_dup_bits(const uint8_t *p, int s0, int s1, int mask)
{
    __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
    __m512i n = _mm512_inserti64x4(_mm512_set1_epi16((short)s0), _mm256_set1_epi16((short)s1), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(v, n), _mm512_set1_epi8((char)mask));
}
/* Byte j of b8 in int16 lanes 2j and 2j + 1. */
static inline QSC qsc_pairs(uint64_t b8)
{
    __m128i v = _mm_cvtsi64_si128((long long)b8);
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(v, v));
}
/* 16 signed bytes. */
static inline QSC qsc_i8(const int8_t *p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)); }
static inline QSC qsc_shl(QSC v, int s) { return _mm256_slli_epi16(v, s); }
/* qcw_make of the four scales 4g .. 4g + 3 of s. */
static inline QCW qcw_pick(QSC s, int g)
{
    __m512i idx = _mm512_add_epi16(_mm512_set1_epi16((short)(4 * g)),
                                   _mm512_set_epi64(0x0003000300030003, 0x0003000300030003,
                                                    0x0002000200020002, 0x0002000200020002,
                                                    0x0001000100010001, 0x0001000100010001, 0, 0));
    return _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(s));
}
/* qsw_mins with the minimums in a register. */
static inline QSW qsw_mins_r(QSC mn, const int16_t *bs)
{
    return _mm512_zextsi256_si512(_mm256_madd_epi16(mn, _mm256_loadu_si256((const __m256i *)bs)));
}
#endif

#endif
