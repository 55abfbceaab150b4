/* qunpack.h: weight blocks unpacked into one integer form that every qgemm kernel (the
 * reference and each ISA) multiplies with the int8 activation blocks. Plain C, static
 * inline: each kernel file compiles it with its own flags. Activation quantization in the
 * one rounding every ISA reproduces is here too.
 *
 * The form, for a weight row over a run of elements (a whole number of float blocks):
 *   q[e]     the element's integer value, int8 (signed only for Q8_0 / IQ4_NL / IQ4_XS)
 *   sc[16g + j]  the integer scale of element 32g + 16 * (j / 8) + (0..15), i.e. each group
 *            of 32 elements holds its two 16-element sub-block scales, each 8 times: the
 *            int16 pattern one maddubs/madd pair multiplies by (K types and IQ4_XS only)
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

static inline float qg_h(uint16_t h) { return simd_f16_to_f32_scalar(h); }

/* Sets the 16 sc entries of the 32-element group at e (elements e .. e + 31). */
static inline void qg_set_sc(int16_t *sc, int e, int s_lo, int s_hi)
{
    int16_t *p = sc + e / 2;
    for (int j = 0; j < 8; j++)
        p[j] = (int16_t)s_lo, p[8 + j] = (int16_t)s_hi;
}

/* ggml's 6-bit scale and minimum j (0..7) of a Q4_K / Q5_K block. */
static inline void qg_scale_min_k4(int j, const uint8_t *s, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Unpacks nb blocks of type (nb * block_elems elements) from src into the form above:
 * q (nb * block_elems), sc and mn (nb * block_elems / 2 and nb * 16, 256-element types),
 * d and m (one per float block). */
static inline void qg_unpack(int8_t *q, int16_t *sc, int16_t *mn, float *d, float *m,
                             const void *src, uint32_t type, int nb)
{
    switch (type) {
    case QT_Q8_0:
        for (int b = 0; b < nb; b++) {
            const qb_q8_0 *x = (const qb_q8_0 *)src + b;
            memcpy(q + 32 * b, x->qs, 32);
            d[b] = qg_h(x->d), m[b] = 0.0f;
        }
        break;
    case QT_Q4_0:
    case QT_Q4_1:
    case QT_IQ4_NL:
        for (int b = 0; b < nb; b++) {
            const uint8_t *qs;
            float db, mb;
            if (type == QT_Q4_1) {
                const qb_q4_1 *x = (const qb_q4_1 *)src + b;
                qs = x->qs, db = qg_h(x->d), mb = qg_h(x->m);
            } else { /* qb_q4_0 and qb_iq4_nl share their layout */
                const qb_q4_0 *x = (const qb_q4_0 *)src + b;
                qs = x->qs, db = qg_h(x->d), mb = -8.0f * db;
            }
            int8_t *o = q + 32 * b;
            for (int j = 0; j < 16; j++) {
                int lo = qs[j] & 0xF, hi = qs[j] >> 4;
                o[j] = (int8_t)(type == QT_IQ4_NL ? qt_iq4nl_values[lo] : lo);
                o[j + 16] = (int8_t)(type == QT_IQ4_NL ? qt_iq4nl_values[hi] : hi);
            }
            d[b] = db, m[b] = type == QT_IQ4_NL ? 0.0f : mb;
        }
        break;
    case QT_Q5_0:
    case QT_Q5_1:
        for (int b = 0; b < nb; b++) {
            const uint8_t *qs, *qhp;
            float db, mb;
            if (type == QT_Q5_1) {
                const qb_q5_1 *x = (const qb_q5_1 *)src + b;
                qs = x->qs, qhp = x->qh, db = qg_h(x->d), mb = qg_h(x->m);
            } else {
                const qb_q5_0 *x = (const qb_q5_0 *)src + b;
                qs = x->qs, qhp = x->qh, db = qg_h(x->d), mb = -16.0f * db;
            }
            uint32_t qh = (uint32_t)qhp[0] | (uint32_t)qhp[1] << 8 | (uint32_t)qhp[2] << 16 |
                          (uint32_t)qhp[3] << 24;
            int8_t *o = q + 32 * b;
            for (int j = 0; j < 16; j++) {
                o[j] = (int8_t)((qs[j] & 0xF) | ((qh >> j) & 1) << 4);
                o[j + 16] = (int8_t)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
            }
            d[b] = db, m[b] = mb;
        }
        break;
    case QT_Q2_K:
        for (int b = 0; b < nb; b++) {
            const qb_q2_k *x = (const qb_q2_k *)src + b;
            int8_t *o = q + 256 * b;
            for (int h = 0; h < 2; h++) /* half h, bit pair j of byte l */
                for (int j = 0; j < 4; j++)
                    for (int l = 0; l < 32; l++)
                        o[128 * h + 32 * j + l] = (int8_t)((x->qs[32 * h + l] >> (2 * j)) & 3);
            for (int s = 0; s < 16; s += 2)
                qg_set_sc(sc, 256 * b + 16 * s, x->scales[s] & 0xF, x->scales[s + 1] & 0xF);
            for (int s = 0; s < 16; s++)
                mn[16 * b + s] = (int16_t)(x->scales[s] >> 4);
            d[b] = qg_h(x->d), m[b] = qg_h(x->dmin);
        }
        break;
    case QT_Q3_K:
        for (int b = 0; b < nb; b++) {
            const qb_q3_k *x = (const qb_q3_k *)src + b;
            const uint8_t *s = x->scales;
            int8_t *o = q + 256 * b;
            for (int h = 0; h < 2; h++) /* value lo - 4 * !hb = o[e] - 4 */
                for (int j = 0; j < 4; j++)
                    for (int l = 0; l < 32; l++) {
                        int lo = (x->qs[32 * h + l] >> (2 * j)) & 3;
                        int hb = (x->hmask[l] >> (4 * h + j)) & 1;
                        o[128 * h + 32 * j + l] = (int8_t)(lo | hb << 2);
                    }
            int scl[16];
            for (int i = 0; i < 16; i++) { /* low 4 bits from bytes 0..7, high 2 from 8..11 */
                int low = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
                int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
                scl[i] = (low | high << 4) - 32;
            }
            for (int i = 0; i < 16; i += 2)
                qg_set_sc(sc, 256 * b + 16 * i, scl[i], scl[i + 1]);
            for (int i = 0; i < 16; i++)
                mn[16 * b + i] = (int16_t)(4 * scl[i]);
            d[b] = qg_h(x->d), m[b] = 0.0f;
        }
        break;
    case QT_Q4_K:
    case QT_Q5_K:
        for (int b = 0; b < nb; b++) {
            const uint8_t *scales, *qs, *qh = NULL;
            float db, dm;
            if (type == QT_Q4_K) {
                const qb_q4_k *x = (const qb_q4_k *)src + b;
                scales = x->scales, qs = x->qs, db = qg_h(x->d), dm = qg_h(x->dmin);
            } else {
                const qb_q5_k *x = (const qb_q5_k *)src + b;
                scales = x->scales, qs = x->qs, qh = x->qh, db = qg_h(x->d), dm = qg_h(x->dmin);
            }
            int8_t *o = q + 256 * b;
            for (int c = 0; c < 4; c++) /* 64 elements: low nibbles, then high */
                for (int l = 0; l < 32; l++) {
                    o[64 * c + l] = (int8_t)(qs[32 * c + l] & 0xF);
                    o[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
                }
            if (qh)
                for (int c = 0; c < 4; c++)
                    for (int l = 0; l < 32; l++) {
                        o[64 * c + l] |= (int8_t)(((qh[l] >> (2 * c)) & 1) << 4);
                        o[64 * c + 32 + l] |= (int8_t)(((qh[l] >> (2 * c + 1)) & 1) << 4);
                    }
            for (int j = 0; j < 8; j++) {
                int s, mm;
                qg_scale_min_k4(j, scales, &s, &mm);
                qg_set_sc(sc, 256 * b + 32 * j, s, s);
                mn[16 * b + 2 * j] = mn[16 * b + 2 * j + 1] = (int16_t)mm;
            }
            d[b] = db, m[b] = dm;
        }
        break;
    case QT_Q6_K:
        for (int b = 0; b < nb; b++) {
            const qb_q6_k *x = (const qb_q6_k *)src + b;
            int8_t *o = q + 256 * b;
            for (int h = 0; h < 2; h++) /* half h, quarter c, index l; value o[e] - 32 */
                for (int c = 0; c < 4; c++)
                    for (int l = 0; l < 32; l++) {
                        int lo = (x->ql[64 * h + 32 * (c & 1) + l] >> (4 * (c >> 1))) & 0xF;
                        int hb = (x->qh[32 * h + l] >> (2 * c)) & 3;
                        o[128 * h + 32 * c + l] = (int8_t)(lo | hb << 4);
                    }
            for (int i = 0; i < 16; i += 2)
                qg_set_sc(sc, 256 * b + 16 * i, x->scales[i], x->scales[i + 1]);
            for (int i = 0; i < 16; i++)
                mn[16 * b + i] = (int16_t)(32 * x->scales[i]);
            d[b] = qg_h(x->d), m[b] = 0.0f;
        }
        break;
    case QT_IQ4_XS:
        for (int b = 0; b < nb; b++) {
            const qb_iq4_xs *x = (const qb_iq4_xs *)src + b;
            int8_t *o = q + 256 * b;
            for (int g = 0; g < 8; g++) {
                const uint8_t *qs = x->qs + 16 * g;
                for (int j = 0; j < 16; j++) {
                    o[32 * g + j] = qt_iq4nl_values[qs[j] & 0xF];
                    o[32 * g + j + 16] = qt_iq4nl_values[qs[j] >> 4];
                }
                int ls = ((x->scales_l[g / 2] >> (4 * (g % 2))) & 0xF) |
                         ((x->scales_h >> (2 * g)) & 3) << 4;
                qg_set_sc(sc, 256 * b + 32 * g, ls - 32, ls - 32);
            }
            for (int i = 0; i < 16; i++)
                mn[16 * b + i] = 0;
            d[b] = qg_h(x->d), m[b] = 0.0f;
        }
        break;
    default:
        break;
    }
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
