/* quant_row.c: one row of f32 into each block type: the searches of quant_fit.c, then the
 * bits packed where simd/quant.h's layouts put them. */
#include <math.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant.h"
#include "quant/quant_internal.h"
#include "quant/quantize.h"

static uint16_t f16(float x)
{
    return gguf_f32_to_f16(x);
}

/* Round to nearest even, as ggml converts; NaN stays a quiet NaN. */
static uint16_t bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Indices of a block of 32 into 16 bytes: element j in the low nibble of byte j, element
 * j + 16 in the high nibble; the fifth bits (when qh) into a little-endian 32-bit mask. */
static void pack_nibbles32(uint8_t *qs, uint8_t *qh, const uint8_t *q)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        h |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    if (qh)
        memcpy(qh, &h, 4);
}

/* Symmetric block of 32 with an f16 scale: q holds indices for the scale actually stored. */
static uint16_t block_sym32(uint8_t *q, const float *x, const quant_grid *g)
{
    float d;
    quant__fit_sym(q, &d, x, 32, g);
    float dh = quant__f16_round(d);
    quant__grid_round(q, x, 32, dh, g); /* nearest levels for the scale the file holds */
    return f16(dh);
}

/* Affine block of 32 (Q4_1, Q5_1): d and m as f16, indices for those stored values. */
static void block_affine32(uint8_t *q, uint16_t *dm, const float *x, int nmax)
{
    float a, b;
    quant__fit_affine(q, &a, &b, x, 32, nmax, false);
    float ah = quant__f16_round(a), bh = quant__f16_round(b), ia = ah > 0.0f ? 1.0f / ah : 0.0f;
    for (int i = 0; i < 32; i++) {
        float r = nearbyintf((x[i] - bh) * ia);
        q[i] = (uint8_t)(r > 0.0f ? (r < (float)nmax ? r : (float)nmax) : 0.0f); /* NaN: 0 */
    }
    dm[0] = f16(ah);
    dm[1] = f16(bh);
}

static void row_q8_0(qb_q8_0 *b, const float *x, int64_t nb)
{
    quant_grid g;
    quant__grid_uniform(&g, -128, 127);
    uint8_t q[32];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        b[i].d = block_sym32(q, x, &g);
        for (int j = 0; j < 32; j++)
            b[i].qs[j] = (int8_t)(q[j] - 128);
    }
}

static void row_q4_0(qb_q4_0 *b, const float *x, int64_t nb)
{
    quant_grid g;
    quant__grid_uniform(&g, -8, 7);
    uint8_t q[32];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        b[i].d = block_sym32(q, x, &g);
        pack_nibbles32(b[i].qs, NULL, q);
    }
}

static void row_q5_0(qb_q5_0 *b, const float *x, int64_t nb)
{
    quant_grid g;
    quant__grid_uniform(&g, -16, 15);
    uint8_t q[32];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        b[i].d = block_sym32(q, x, &g);
        pack_nibbles32(b[i].qs, b[i].qh, q);
    }
}

static void row_iq4_nl(qb_iq4_nl *b, const float *x, int64_t nb)
{
    quant_grid g;
    quant__grid_codebook(&g, qt_iq4nl_values, 16);
    uint8_t q[32];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        b[i].d = block_sym32(q, x, &g);
        pack_nibbles32(b[i].qs, NULL, q);
    }
}

static void row_q4_1(qb_q4_1 *b, const float *x, int64_t nb)
{
    uint8_t q[32];
    uint16_t dm[2];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        block_affine32(q, dm, x, 15);
        b[i].d = dm[0];
        b[i].m = dm[1];
        pack_nibbles32(b[i].qs, NULL, q);
    }
}

static void row_q5_1(qb_q5_1 *b, const float *x, int64_t nb)
{
    uint8_t q[32];
    uint16_t dm[2];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        block_affine32(q, dm, x, 31);
        b[i].d = dm[0];
        b[i].m = dm[1];
        pack_nibbles32(b[i].qs, b[i].qh, q);
    }
}

/* ---- K types (super-blocks of 256) ---- */

static void row_q2_k(qb_q2_k *b, const float *x, int64_t nb)
{
    uint8_t q[QK_K];
    int sc[16], mn[16];
    float d, dmin;
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        quant__kaffine(q, sc, mn, &d, &dmin, x, 16, 16, 3, 15);
        qb_q2_k *o = &b[i];
        memset(o, 0, sizeof *o);
        o->d = f16(d);
        o->dmin = f16(dmin);
        for (int k = 0; k < 16; k++)
            o->scales[k] = (uint8_t)(sc[k] | mn[k] << 4);
        /* element e: byte 32 * (e / 128) + e % 32, bits 2 * ((e % 128) / 32) */
        for (int e = 0; e < QK_K; e++)
            o->qs[32 * (e / 128) + e % 32] |= (uint8_t)(q[e] << (2 * ((e % 128) / 32)));
    }
}

static void row_q3_k(qb_q3_k *b, const float *x, int64_t nb)
{
    quant_grid g;
    quant__grid_uniform(&g, -4, 3);
    uint8_t q[QK_K];
    int sc[16];
    float d;
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        quant__ksym(q, sc, &d, x, 16, 16, &g, -32, 31);
        qb_q3_k *o = &b[i];
        memset(o, 0, sizeof *o);
        o->d = f16(d);
        for (int k = 0; k < 16; k++) { /* 6-bit sc + 32: low nibbles, then 2-bit tops */
            int u = sc[k] + 32;
            o->scales[k % 8] |= (uint8_t)((u & 15) << (4 * (k / 8)));
            o->scales[8 + k % 4] |= (uint8_t)((u >> 4) << (2 * (k / 4)));
        }
        for (int e = 0; e < QK_K; e++) { /* index = low 2 bits + 4 * high bit */
            int h = e / 128, j = (e % 128) / 32, l = e % 32;
            o->qs[32 * h + l] |= (uint8_t)((q[e] & 3) << (2 * j));
            o->hmask[l] |= (uint8_t)((q[e] >> 2) << (4 * h + j));
        }
    }
}

/* Q4_K and Q5_K's 12 bytes of 8 6-bit scales and 8 6-bit mins. */
static void pack_scales_k4(uint8_t *s, const int *sc, const int *mn)
{
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
}

static void row_q4_k(qb_q4_k *b, const float *x, int64_t nb)
{
    uint8_t q[QK_K];
    int sc[8], mn[8];
    float d, dmin;
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        quant__kaffine(q, sc, mn, &d, &dmin, x, 8, 32, 15, 63);
        qb_q4_k *o = &b[i];
        o->d = f16(d);
        o->dmin = f16(dmin);
        pack_scales_k4(o->scales, sc, mn);
        for (int s = 0; s < 8; s += 2) /* sub-blocks s, s + 1 share 32 bytes */
            for (int l = 0; l < 32; l++)
                o->qs[16 * s + l] = (uint8_t)(q[32 * s + l] | q[32 * s + 32 + l] << 4);
    }
}

static void row_q5_k(qb_q5_k *b, const float *x, int64_t nb)
{
    uint8_t q[QK_K];
    int sc[8], mn[8];
    float d, dmin;
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        quant__kaffine(q, sc, mn, &d, &dmin, x, 8, 32, 31, 63);
        qb_q5_k *o = &b[i];
        memset(o->qh, 0, sizeof o->qh);
        o->d = f16(d);
        o->dmin = f16(dmin);
        pack_scales_k4(o->scales, sc, mn);
        for (int s = 0; s < 8; s += 2)
            for (int l = 0; l < 32; l++)
                o->qs[16 * s + l] =
                    (uint8_t)((q[32 * s + l] & 15) | (q[32 * s + 32 + l] & 15) << 4);
        for (int e = 0; e < QK_K; e++) /* fifth bit of sub-block s at bit s of byte e % 32 */
            o->qh[e % 32] |= (uint8_t)((q[e] >> 4) << (e / 32));
    }
}

static void row_q6_k(qb_q6_k *b, const float *x, int64_t nb)
{
    quant_grid g;
    quant__grid_uniform(&g, -32, 31);
    uint8_t q[QK_K];
    int sc[16];
    float d;
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        quant__ksym(q, sc, &d, x, 16, 16, &g, -128, 127);
        qb_q6_k *o = &b[i];
        memset(o, 0, sizeof *o);
        o->d = f16(d);
        for (int k = 0; k < 16; k++)
            o->scales[k] = (int8_t)sc[k];
        for (int e = 0; e < QK_K; e++) {
            /* half h, quarter k of the half, lane l: low nibbles in ql (quarters 0/1 in the
             * low nibbles of two 32-byte rows, 2/3 in the high), top 2 bits in qh */
            int h = e / 128, k = (e % 128) / 32, l = e % 32;
            o->ql[64 * h + 32 * (k % 2) + l] |= (uint8_t)((q[e] & 15) << (4 * (k / 2)));
            o->qh[32 * h + l] |= (uint8_t)((q[e] >> 4) << (2 * k));
        }
    }
}

static void row_iq4_xs(qb_iq4_xs *b, const float *x, int64_t nb)
{
    quant_grid g;
    quant__grid_codebook(&g, qt_iq4nl_values, 16);
    uint8_t q[QK_K];
    int sc[8];
    float d;
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        quant__ksym(q, sc, &d, x, 8, 32, &g, -32, 31);
        qb_iq4_xs *o = &b[i];
        memset(o, 0, sizeof *o);
        o->d = f16(d);
        for (int k = 0; k < 8; k++) {
            int u = sc[k] + 32;
            o->scales_l[k / 2] |= (uint8_t)((u & 15) << (4 * (k % 2)));
            o->scales_h |= (uint16_t)((u >> 4) << (2 * k));
            pack_nibbles32(o->qs + 16 * k, NULL, q + 32 * k);
        }
    }
}

bool quant_type_supported(uint32_t type)
{
    switch (type) {
    case QT_F32: case QT_F16: case QT_BF16: case QT_Q8_0: case QT_Q4_0: case QT_Q4_1:
    case QT_Q5_0: case QT_Q5_1: case QT_Q2_K: case QT_Q3_K: case QT_Q4_K: case QT_Q5_K:
    case QT_Q6_K: case QT_IQ4_NL: case QT_IQ4_XS:
        return true;
    default:
        return false;
    }
}

bool quant_row(void *dst, const float *src, uint32_t type, int64_t k)
{
    if (!quant_type_supported(type) || k <= 0)
        return false;
    uint32_t blk = type == QT_F32 || type == QT_F16 || type == QT_BF16 ? 1
                   : type == QT_Q8_0 || type == QT_Q4_0 || type == QT_Q4_1 ||
                           type == QT_Q5_0 || type == QT_Q5_1 || type == QT_IQ4_NL
                       ? QK_32
                       : QK_K;
    if (k % blk)
        return false;
    int64_t nb = k / blk;
    switch (type) {
    case QT_F32:
        memcpy(dst, src, (size_t)k * sizeof *src);
        break;
    case QT_F16:
        for (int64_t i = 0; i < k; i++)
            ((uint16_t *)dst)[i] = f16(src[i]);
        break;
    case QT_BF16:
        for (int64_t i = 0; i < k; i++)
            ((uint16_t *)dst)[i] = bf16(src[i]);
        break;
    case QT_Q8_0: row_q8_0(dst, src, nb); break;
    case QT_Q4_0: row_q4_0(dst, src, nb); break;
    case QT_Q4_1: row_q4_1(dst, src, nb); break;
    case QT_Q5_0: row_q5_0(dst, src, nb); break;
    case QT_Q5_1: row_q5_1(dst, src, nb); break;
    case QT_IQ4_NL: row_iq4_nl(dst, src, nb); break;
    case QT_Q2_K: row_q2_k(dst, src, nb); break;
    case QT_Q3_K: row_q3_k(dst, src, nb); break;
    case QT_Q4_K: row_q4_k(dst, src, nb); break;
    case QT_Q5_K: row_q5_k(dst, src, nb); break;
    case QT_Q6_K: row_q6_k(dst, src, nb); break;
    case QT_IQ4_XS: row_iq4_xs(dst, src, nb); break;
    default: return false;
    }
    return true;
}
