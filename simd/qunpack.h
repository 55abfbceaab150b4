/* qunpack.h: weight blocks unpacked into one integer form that every qgemm kernel (the
 * reference and each ISA) multiplies with the int8 activation blocks. Plain C, static
 * inline: each kernel file compiles it with its own flags. Activation quantization in the
 * one rounding every ISA reproduces is here too.
 *
 * The form, for a weight row over a run of elements (a whole number of float blocks):
 *   q[e]     the element's integer value, int8 (signed only for Q8_0 / IQ4_NL / IQ4_XS)
 *   sc[e / 16]   the integer scale of element e's 16-element sub-block (K types and IQ4_XS;
 *            a 32-element sub-block has its scale twice)
 *   mn[16b + j]  integer minimum multiplier of elements 256b + 16j .. + 15 (K types)
 *   d[b], m[b]   float scale and float minimum of float block b (32 or 256 elements)
 * so that a weight row . activation row =
 *   32-element types: sum_b d[b] * da_b * sum(q * qa) + m[b] * sa_b
 *   256-element types: sum_b d[b] * da_b * sum_e sc(e) q(e) qa(e)
 *                      - (m[b] or d[b] when QG_MIN_SAME_D) * da_b * sum_j mn[16b + j] bsum_j
 * Each term equals ggml's dequantised value times the activation up to float rounding:
 * Q4_0 (q - 8) * d becomes q * d + (-8 d), Q6_K (q - 32) scale becomes q scale - 32 scale
 * (mn = 32 * scale), so the unsigned forms need no sign handling in maddubs. */
#ifndef TESSERA_SIMD_QUNPACK_H
#define TESSERA_SIMD_QUNPACK_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "simd_internal.h"

/* How a type's unpacked form is multiplied (constants after inlining). */
enum {
    QG_MIN_NONE,    /* no minimum term */
    QG_MIN_FLOAT,   /* 32-element types: + m[b] * sa_b */
    QG_MIN_DMIN,    /* K types: - m[b] * da * sum mn bsum */
    QG_MIN_SAME_D,  /* K types whose minimum is in the units of d: - d[b] * da * sum mn bsum */
};

typedef struct qg_traits {
    int fblk;   /* float block: 32 (QACT_Q8_32) or 256 (QACT_Q8_K) */
    int sgn;    /* q may be negative */
    int has_sc; /* sub-block scales (256-element types) */
    int min;    /* QG_MIN_* */
} qg_traits;

static inline qg_traits qg_traits_of(uint32_t type)
{
    switch (type) {
    case QT_Q8_0:
    case QT_IQ4_NL:
        return (qg_traits){32, 1, 0, QG_MIN_NONE};
    case QT_Q4_0:
    case QT_Q4_1:
    case QT_Q5_0:
    case QT_Q5_1:
        return (qg_traits){32, 0, 0, QG_MIN_FLOAT};
    case QT_Q2_K:
    case QT_Q4_K:
    case QT_Q5_K:
        return (qg_traits){256, 0, 1, QG_MIN_DMIN};
    case QT_Q3_K:
    case QT_Q6_K:
        return (qg_traits){256, 0, 1, QG_MIN_SAME_D};
    case QT_IQ4_XS:
        return (qg_traits){256, 1, 1, QG_MIN_NONE};
    default:
        return (qg_traits){0, 0, 0, QG_MIN_NONE};
    }
}

/* f16 to f32 (exact on every path). */
static inline float qg_h(uint16_t h)
{
#if defined(__F16C__)
    return _cvtsh_ss(h);
#elif defined(__aarch64__)
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
#else
    return simd_f16_to_f32_scalar(h);
#endif
}

/* Sets the scales of the two 16-element halves of the 32-element group at e. */
static inline void qg_set_sc(int16_t *restrict sc, int e, int s_lo, int s_hi)
{
    sc[e / 16] = (int16_t)s_lo, sc[e / 16 + 1] = (int16_t)s_hi;
}

/* The 32 low-then-high nibbles of 16 bytes (the _0/_1 types' element order). */
static inline void qg_nibbles(int8_t *restrict o, const uint8_t *restrict qs)
{
    for (int j = 0; j < 16; j++) {
        o[j] = (int8_t)(qs[j] & 0xF);
        o[j + 16] = (int8_t)(qs[j] >> 4);
    }
}

/* IQ4_NL values of the 32 nibbles of 16 bytes. */
static inline void qg_iq4(int8_t *restrict o, const uint8_t *restrict qs)
{
    for (int j = 0; j < 16; j++) {
        o[j] = qt_iq4nl_values[qs[j] & 0xF];
        o[j + 16] = qt_iq4nl_values[qs[j] >> 4];
    }
}

/* Bit e of the 32 bits qh (little-endian) as bit 4 of element e (Q5_0 / Q5_1). */
static inline void qg_fifth_bits(int8_t *restrict o, const uint8_t *restrict qh)
{
    for (int e = 0; e < 32; e++)
        o[e] = (int8_t)(o[e] | ((qh[e / 8] >> (e % 8)) & 1) << 4);
}

/* The integer values of nb blocks of type into q (nb * block_elems); every ISA's fast
 * path (vec_qgemm.h) writes exactly these bytes. */
static inline void qg_unpack_values(int8_t *restrict q, const void *restrict src, uint32_t type,
                                    int nb)
{
    const qtype_info *info = qtype_get(type);
    for (int b = 0; b < nb; b++) {
        const void *x = (const char *)src + (size_t)b * info->block_bytes;
        int8_t *o = q + (size_t)b * info->block_elems;
        switch (type) {
        case QT_Q8_0:
            memcpy(o, ((const qb_q8_0 *)x)->qs, 32);
            break;
        case QT_Q4_0:
        case QT_IQ4_NL: /* the same layout */
            if (type == QT_Q4_0)
                qg_nibbles(o, ((const qb_q4_0 *)x)->qs);
            else
                qg_iq4(o, ((const qb_iq4_nl *)x)->qs);
            break;
        case QT_Q4_1:
            qg_nibbles(o, ((const qb_q4_1 *)x)->qs);
            break;
        case QT_Q5_0:
            qg_nibbles(o, ((const qb_q5_0 *)x)->qs);
            qg_fifth_bits(o, ((const qb_q5_0 *)x)->qh);
            break;
        case QT_Q5_1:
            qg_nibbles(o, ((const qb_q5_1 *)x)->qs);
            qg_fifth_bits(o, ((const qb_q5_1 *)x)->qh);
            break;
        case QT_Q2_K: {
            const qb_q2_k *y = x;
            for (int h = 0; h < 2; h++) /* half h, bit pair j of byte l */
                for (int j = 0; j < 4; j++)
                    for (int l = 0; l < 32; l++)
                        o[128 * h + 32 * j + l] = (int8_t)((y->qs[32 * h + l] >> (2 * j)) & 3);
            break;
        }
        case QT_Q3_K: {
            const qb_q3_k *y = x;
            for (int h = 0; h < 2; h++) /* value lo - 4 * !hb = o[e] - 4 */
                for (int j = 0; j < 4; j++)
                    for (int l = 0; l < 32; l++) {
                        int lo = (y->qs[32 * h + l] >> (2 * j)) & 3;
                        int hb = (y->hmask[l] >> (4 * h + j)) & 1;
                        o[128 * h + 32 * j + l] = (int8_t)(lo | hb << 2);
                    }
            break;
        }
        case QT_Q4_K:
        case QT_Q5_K: {
            const uint8_t *qs = type == QT_Q4_K ? ((const qb_q4_k *)x)->qs : ((const qb_q5_k *)x)->qs;
            for (int c = 0; c < 4; c++) /* 64 elements: low nibbles, then high */
                for (int l = 0; l < 32; l++) {
                    o[64 * c + l] = (int8_t)(qs[32 * c + l] & 0xF);
                    o[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
                }
            if (type == QT_Q5_K)
                for (int c = 0; c < 4; c++)
                    for (int l = 0; l < 32; l++) {
                        const uint8_t *qh = ((const qb_q5_k *)x)->qh;
                        o[64 * c + l] |= (int8_t)(((qh[l] >> (2 * c)) & 1) << 4);
                        o[64 * c + 32 + l] |= (int8_t)(((qh[l] >> (2 * c + 1)) & 1) << 4);
                    }
            break;
        }
        case QT_Q6_K: {
            const qb_q6_k *y = x;
            for (int h = 0; h < 2; h++) /* half h, quarter c, index l; value o[e] - 32 */
                for (int c = 0; c < 4; c++)
                    for (int l = 0; l < 32; l++) {
                        int lo = (y->ql[64 * h + 32 * (c & 1) + l] >> (4 * (c >> 1))) & 0xF;
                        int hb = (y->qh[32 * h + l] >> (2 * c)) & 3;
                        o[128 * h + 32 * c + l] = (int8_t)(lo | hb << 4);
                    }
            break;
        }
        case QT_IQ4_XS:
            for (int g = 0; g < 8; g++)
                qg_iq4(o + 32 * g, ((const qb_iq4_xs *)x)->qs + 16 * g);
            break;
        default:
            break;
        }
    }
}

/* The scales of block b of type (see qg_unpack_scales). */
static inline __attribute__((always_inline)) void
qg_scales_block(int16_t *restrict sc, int16_t *restrict mn, float *restrict d, float *restrict m,
                const void *restrict src, const qtype_info *info, uint32_t type, int b)
{
    {
        const void *x = (const char *)src + (size_t)b * info->block_bytes;
        size_t kb = info->block_elems == QK_K ? (size_t)b : 0; /* sc, mn: K types only */
        int16_t *scb = sc + kb * 16, *mnb = mn + kb * 16;
        switch (type) {
        case QT_Q8_0:
        case QT_IQ4_NL: /* d first, as in Q4_0 */
        case QT_Q4_0:
        case QT_Q5_0: {
            uint16_t h;
            memcpy(&h, x, sizeof h);
            d[b] = qg_h(h);
            m[b] = type == QT_Q4_0 ? -8.0f * d[b] : type == QT_Q5_0 ? -16.0f * d[b] : 0.0f;
            break;
        }
        case QT_Q4_1:
        case QT_Q5_1: { /* d, m first */
            uint16_t h[2];
            memcpy(h, x, sizeof h);
            d[b] = qg_h(h[0]), m[b] = qg_h(h[1]);
            break;
        }
        case QT_Q2_K: {
            const qb_q2_k *y = x;
            for (int i = 0; i < 16; i += 2)
                qg_set_sc(scb, 16 * i, y->scales[i] & 0xF, y->scales[i + 1] & 0xF);
            for (int i = 0; i < 16; i++)
                mnb[i] = (int16_t)(y->scales[i] >> 4);
            d[b] = qg_h(y->d), m[b] = qg_h(y->dmin);
            break;
        }
        case QT_Q3_K: {
            const qb_q3_k *y = x;
            const uint8_t *s = y->scales;
            int scl[16];
            for (int i = 0; i < 16; i++) { /* low 4 bits from bytes 0..7, high 2 from 8..11 */
                int low = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
                int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
                scl[i] = (low | high << 4) - 32;
            }
            for (int i = 0; i < 16; i += 2)
                qg_set_sc(scb, 16 * i, scl[i], scl[i + 1]);
            for (int i = 0; i < 16; i++)
                mnb[i] = (int16_t)(4 * scl[i]);
            d[b] = qg_h(y->d), m[b] = 0.0f;
            break;
        }
        case QT_Q4_K:
        case QT_Q5_K: { /* d, dmin, scales: the same offsets in both */
            const qb_q4_k *y = x;
            /* ggml's 6-bit scales and minimums, four at a time: bytes 0..3 hold scales 0..3
             * (and the top bits of 4..7), bytes 4..7 minimums 0..3 (and the top bits of 4..7),
             * bytes 8..11 the low nibbles of scales and minimums 4..7 */
            uint32_t u[3];
            memcpy(u, y->scales, sizeof u);
            uint32_t sv[2] = {u[0] & 0x3f3f3f3fu, (u[2] & 0x0f0f0f0fu) | ((u[0] >> 6) & 0x03030303u) << 4};
            uint32_t mv[2] = {u[1] & 0x3f3f3f3fu, ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 6) & 0x03030303u) << 4};
            for (int j = 0; j < 8; j++) {
                int16_t sj = (int16_t)((sv[j / 4] >> (8 * (j % 4))) & 0xFF);
                int16_t mj = (int16_t)((mv[j / 4] >> (8 * (j % 4))) & 0xFF);
                scb[2 * j] = scb[2 * j + 1] = sj;
                mnb[2 * j] = mnb[2 * j + 1] = mj;
            }
            d[b] = qg_h(y->d), m[b] = qg_h(y->dmin);
            break;
        }
        case QT_Q6_K: {
            const qb_q6_k *y = x;
            for (int i = 0; i < 16; i += 2)
                qg_set_sc(scb, 16 * i, y->scales[i], y->scales[i + 1]);
            for (int i = 0; i < 16; i++)
                mnb[i] = (int16_t)(32 * y->scales[i]);
            d[b] = qg_h(y->d), m[b] = 0.0f;
            break;
        }
        case QT_IQ4_XS: {
            const qb_iq4_xs *y = x;
            for (int g = 0; g < 8; g++) {
                int ls = ((y->scales_l[g / 2] >> (4 * (g % 2))) & 0xF) |
                         ((y->scales_h >> (2 * g)) & 3) << 4;
                qg_set_sc(scb, 32 * g, ls - 32, ls - 32);
            }
            for (int i = 0; i < 16; i++)
                mnb[i] = 0;
            d[b] = qg_h(y->d), m[b] = 0.0f;
            break;
        }
        default:
            break;
        }
    }
}

/* The scales of nb blocks of type: sc and mn (nb * 16 each, 256-element types), d and m
 * (one per float block). GCC's SLP vectorizer packed the int16 stores through the stack (a
 * store-forwarding stall per block, 60% of an M = 1 Q4_K GEMM): plain stores instead. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-slp-vectorize")))
#endif
static inline void qg_unpack_scales(int16_t *restrict sc, int16_t *restrict mn, float *restrict d,
                                    float *restrict m, const void *restrict src, uint32_t type,
                                    int nb)
{
    const qtype_info *info = qtype_get(type);
    switch (type) { /* outside the block loop: a constant type in each */
#define QG_SCALES(T)                                              \
    case T:                                                       \
        for (int b = 0; b < nb; b++)                              \
            qg_scales_block(sc, mn, d, m, src, info, T, b);       \
        break;
        QG_SCALES(QT_Q8_0)
        QG_SCALES(QT_Q4_0)
        QG_SCALES(QT_Q4_1)
        QG_SCALES(QT_Q5_0)
        QG_SCALES(QT_Q5_1)
        QG_SCALES(QT_IQ4_NL)
        QG_SCALES(QT_IQ4_XS)
        QG_SCALES(QT_Q2_K)
        QG_SCALES(QT_Q3_K)
        QG_SCALES(QT_Q4_K)
        QG_SCALES(QT_Q5_K)
        QG_SCALES(QT_Q6_K)
#undef QG_SCALES
    default:
        break;
    }
}

/* Unpacks nb blocks of type (nb * block_elems elements) from src into the form above. */
static inline void qg_unpack(int8_t *restrict q, int16_t *restrict sc, int16_t *restrict mn,
                             float *restrict d, float *restrict m, const void *restrict src,
                             uint32_t type, int nb)
{
    qg_unpack_values(q, src, type, nb);
    qg_unpack_scales(sc, mn, d, m, src, type, nb);
}

/* ---- activations ---- */

/* The scale of a block whose largest magnitude is amax, and its inverse: the same two
 * correctly rounded divisions on every ISA. */
static inline float qg_act_scale(float amax, float *inv)
{
    float dq = amax / 127.0f;
    *inv = dq != 0.0f ? 1.0f / dq : 0.0f;
    return dq;
}

/* One block of n elements already multiplied by the inverse scale and rounded to the
 * nearest integer (ties to even) in r: clamps to [-127, 127] and stores; returns the sum.
 * Values are integral, so the conversion is exact on every ISA. */
static inline int qg_act_store(int8_t *qs, const float *r, int n)
{
    int sum = 0;
    for (int i = 0; i < n; i++) {
        float v = r[i] > 127.0f ? 127.0f : r[i] < -127.0f ? -127.0f : r[i];
        qs[i] = (int8_t)(int)v;
        sum += qs[i];
    }
    return sum;
}

#endif
