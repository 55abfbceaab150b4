/* qpack_x86.h: what the AVX-512 VNNI kernel (avx512vnni/qpack.c) and the AMX tile kernels
 * (amx/) share on the packs (qpack_internal.h): the masked store of a group's output
 * rows, unpacking a unit's 4-6 bit weights into B-rows of unsigned bytes, and a block's
 * float terms for one activation row, lane by lane in the twin's order, so every kernel
 * gives the twin's bits.
 * AVX-512 F/BW and VNNI; include from files built with them. */
#ifndef TESSERA_SIMD_QPACK_X86_H
#define TESSERA_SIMD_QPACK_X86_H

#include <immintrin.h>
#include <string.h>

#include "qpack_internal.h"

#define QP_INLINE static inline __attribute__((always_inline))

/* Asks for the packed weights' cache line QP_PF bytes after at (qpack_internal.h). The
 * kernels call it for each line they read, a unit ahead at a time. */
QP_INLINE void qp_prefetch(const void *at)
{
    _mm_prefetch((const char *)at + QP_PF, _MM_HINT_T0);
}

/* The first QP_PF bytes from at, which qp_prefetch runs ahead of: asked for as a kernel
 * starts on a range of units. */
QP_INLINE void qp_prefetch_start(const void *at)
{
    for (int off = 0; off < QP_PF; off += 64)
        _mm_prefetch((const char *)at + off, _MM_HINT_T0);
}

/* The lanes of weight group g (columns 16 g .. 16 g + 15) that [n_begin, n_end) keeps. */
QP_INLINE __mmask16 qp_group_mask(int g, int n_begin, int n_end)
{
    int n0 = g * QP_ROWS;
    int lo = n_begin > n0 ? n_begin - n0 : 0;
    int hi = n_end < n0 + QP_ROWS ? n_end - n0 : QP_ROWS;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* o[lanes of mask] = a (+ beta * o): one output row of a group; the other lanes of the 16
 * at o are neither read nor written. */
QP_INLINE void qp_store_row(float *o, __m512 a, __mmask16 mask, float beta)
{
    if (beta != 0.0f)
        a = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, o), a);
    _mm512_mask_storeu_ps(o, mask, a);
}

/* qp_store_row of rows acc[0 .. rows) at out, ldo floats apart. */
QP_INLINE void qp_store_rows(float *out, size_t ldo, const float (*acc)[QP_ROWS], int rows,
                             __mmask16 mask, float beta)
{
    for (int r = 0; r < rows; r++)
        qp_store_row(out + (size_t)r * ldo, _mm512_load_ps(acc[r]), mask, beta);
}

/* v + (1 << bit) in the bytes whose bit of the plane word is set. */
QP_INLINE __m512i qp_plane_add(__m512i v, uint64_t plane, int bit)
{
    return _mm512_mask_add_epi8(v, (__mmask64)plane, v, _mm512_set1_epi8((char)(1 << bit)));
}

/* B-rows r and r + 32 of a 256-element unit of BITS (4, 5 or 6) bits, as unsigned bytes:
 * the low and high nibbles of byte row r, plus the bit planes. */
QP_INLINE void qp_brows(const simd_qpack *p, const uint8_t *unit, int r, __m512i *lo, __m512i *hi,
                        const int BITS)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i v = _mm512_load_si512(unit + 64 * r);
    *lo = _mm512_and_si512(v, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    const uint64_t *h0 = (const uint64_t *)(unit + p->off_hi), *h1 = h0 + 64;
    if (BITS >= 5)
        *lo = qp_plane_add(*lo, h0[r], 4), *hi = qp_plane_add(*hi, h0[r + 32], 4);
    if (BITS == 6)
        *lo = qp_plane_add(*lo, h1[r], 5), *hi = qp_plane_add(*hi, h1[r + 32], 5);
}

/* Sub-block j's scales of a unit as 16 int32 lanes. */
QP_INLINE __m512i qp_scales(const simd_qpack *p, const uint8_t *unit, int j)
{
    return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(unit + p->off_sc + 16 * j)));
}

/* A unit's float scales and minimums, unpacked once for all the rows that use them (an
 * f16 -> f32 conversion and four byte widenings a unit: a row's terms in tile loops that
 * store their sums to memory would redo them for every row). */
typedef struct qp_terms {
    __m512 d, dmin;
    __m512i mn[4]; /* minimums of sub-blocks 2jj, 2jj + 1 as int16 pairs (has_min) */
} qp_terms;

/* has_min: p->has_min, or a constant false where a kernel only ever sees types without
 * minimums (the 8-bit packs: avx512vnni/qpack.c's QP_BITS_MIN, qgemm_amx.c), so that it
 * carries none of the minimum term's code. */
QP_INLINE void qp_unit_terms(qp_terms *t, const simd_qpack *p, const uint8_t *unit,
                             const bool has_min)
{
    const __m256i *mn = (const __m256i *)(unit + p->off_mn);
    t->d = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(unit + p->off_d)));
    t->dmin = has_min ? _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(unit + p->off_dmin)))
                      : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int jj = 0; jj < 4; jj++)
        t->mn[jj] = has_min ? _mm512_cvtepu8_epi16(_mm256_load_si256(mn + jj))
                            : _mm512_setzero_si512();
}

/* acc + one unit's float terms (t) for one activation row (its block xb, d first), from
 * the block's integer sums isum (lane n: weight row n), exactly as the twin adds them:
 * fmaf(d * dx, isum, acc), then for K types with minimums fmaf(-(dmin * dx), msum, acc). */
QP_INLINE __m512 qp_f32_row(__m512 acc, __m512i isum, const qp_terms *t, const uint8_t *xb,
                            const bool has_min)
{
    float dx;
    memcpy(&dx, xb, sizeof dx); /* d leads both activation blocks */
    __m512 vdx = _mm512_set1_ps(dx);
    acc = _mm512_fmadd_ps(_mm512_mul_ps(t->d, vdx), _mm512_cvtepi32_ps(isum), acc);
    if (has_min) {
        /* The activation sums of the 8 sub-blocks of 32 (Q4_K, Q5_K), sums32, as int16
         * pairs (2jj, 2jj + 1): each dword broadcast from memory into one vpdpwssd with
         * the pair's minimums. Built in registers from bsums (a madd, a pack and four
         * permutes a row and unit) they cost 11 more uops a row. */
        const int32_t *pairs = (const int32_t *)((const qa_q8_k *)xb)->sums32;
        __m512i ms = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int jj = 0; jj < 4; jj++) /* minimums of sub-blocks 2jj, 2jj + 1 */
            __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(ms) : "v"(t->mn[jj]), "m"(pairs[jj]));
        acc = _mm512_fnmadd_ps(_mm512_mul_ps(t->dmin, vdx), _mm512_cvtepi32_ps(ms), acc);
    }
    return acc;
}

#endif
