/* quant_types.c: the tensor type table (names, block layouts) and the plain-C decoding of
 * every supported type's blocks to f32, value for value what llama.cpp's dequantisation
 * gives. Built with -ffp-contract=off (simd/CMakeLists.txt): a fused d * q - m would change
 * the last bit. */
#include <stddef.h>
#include <string.h>

#include "quant.h"
#include "simd_internal.h"

_Static_assert(sizeof(qb_q4_0) == 18, "Q4_0 block");
_Static_assert(sizeof(qb_q4_1) == 20, "Q4_1 block");
_Static_assert(sizeof(qb_q5_0) == 22, "Q5_0 block");
_Static_assert(sizeof(qb_q5_1) == 24, "Q5_1 block");
_Static_assert(sizeof(qb_q8_0) == 34, "Q8_0 block");
_Static_assert(sizeof(qb_iq4_nl) == 18, "IQ4_NL block");
_Static_assert(sizeof(qb_q2_k) == 84, "Q2_K block");
_Static_assert(sizeof(qb_q3_k) == 110, "Q3_K block");
_Static_assert(sizeof(qb_q4_k) == 144, "Q4_K block");
_Static_assert(sizeof(qb_q5_k) == 176, "Q5_K block");
_Static_assert(sizeof(qb_q6_k) == 210, "Q6_K block");
_Static_assert(sizeof(qb_iq4_xs) == 136, "IQ4_XS block");
_Static_assert(sizeof(qa_q8_32) == 40, "activation block of 32");
_Static_assert(sizeof(qa_q8_k) == 320 && offsetof(qa_q8_k, qs) == 64, "activation super-block");

const int8_t qt_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

/* Every number ggml gave a type, retired ones included, so that a file of any of them is
 * refused by name. */
static const char *const type_names[] = {
    [0] = "F32",         [1] = "F16",         [2] = "Q4_0",        [3] = "Q4_1",
    [4] = "Q4_2",        [5] = "Q4_3",        [6] = "Q5_0",        [7] = "Q5_1",
    [8] = "Q8_0",        [9] = "Q8_1",        [10] = "Q2_K",       [11] = "Q3_K",
    [12] = "Q4_K",       [13] = "Q5_K",       [14] = "Q6_K",       [15] = "Q8_K",
    [16] = "IQ2_XXS",    [17] = "IQ2_XS",     [18] = "IQ3_XXS",    [19] = "IQ1_S",
    [20] = "IQ4_NL",     [21] = "IQ3_S",      [22] = "IQ2_S",      [23] = "IQ4_XS",
    [24] = "I8",         [25] = "I16",        [26] = "I32",        [27] = "I64",
    [28] = "F64",        [29] = "IQ1_M",      [30] = "BF16",       [31] = "Q4_0_4_4",
    [32] = "Q4_0_4_8",   [33] = "Q4_0_8_8",   [34] = "TQ1_0",      [35] = "TQ2_0",
    [36] = "IQ4_NL_4_4", [37] = "IQ4_NL_4_8", [38] = "IQ4_NL_8_8", [39] = "MXFP4",
};

enum { N_TYPE_NAMES = sizeof type_names / sizeof type_names[0] };

/* The types tessera computes on; name NULL elsewhere. */
static const qtype_info type_table[N_TYPE_NAMES] = {
    [QT_F32] = {"F32", 1, 4, QACT_F32},
    [QT_F16] = {"F16", 1, 2, QACT_F32},
    [QT_BF16] = {"BF16", 1, 2, QACT_F32},
    [QT_Q4_0] = {"Q4_0", QK_32, sizeof(qb_q4_0), QACT_Q8_32},
    [QT_Q4_1] = {"Q4_1", QK_32, sizeof(qb_q4_1), QACT_Q8_32},
    [QT_Q5_0] = {"Q5_0", QK_32, sizeof(qb_q5_0), QACT_Q8_32},
    [QT_Q5_1] = {"Q5_1", QK_32, sizeof(qb_q5_1), QACT_Q8_32},
    [QT_Q8_0] = {"Q8_0", QK_32, sizeof(qb_q8_0), QACT_Q8_32},
    [QT_IQ4_NL] = {"IQ4_NL", QK_32, sizeof(qb_iq4_nl), QACT_Q8_32},
    [QT_Q2_K] = {"Q2_K", QK_K, sizeof(qb_q2_k), QACT_Q8_K},
    [QT_Q3_K] = {"Q3_K", QK_K, sizeof(qb_q3_k), QACT_Q8_K},
    [QT_Q4_K] = {"Q4_K", QK_K, sizeof(qb_q4_k), QACT_Q8_K},
    [QT_Q5_K] = {"Q5_K", QK_K, sizeof(qb_q5_k), QACT_Q8_K},
    [QT_Q6_K] = {"Q6_K", QK_K, sizeof(qb_q6_k), QACT_Q8_K},
    [QT_IQ4_XS] = {"IQ4_XS", QK_K, sizeof(qb_iq4_xs), QACT_Q8_K},
};

const qtype_info *qtype_get(uint32_t type)
{
    return type < N_TYPE_NAMES && type_table[type].name ? &type_table[type] : NULL;
}

const char *qtype_name(uint32_t type)
{
    return type < N_TYPE_NAMES ? type_names[type] : NULL;
}

size_t qtype_row_bytes(uint32_t type, int64_t k)
{
    const qtype_info *t = qtype_get(type);
    if (!t || k <= 0 || k % t->block_elems != 0)
        return 0;
    return (size_t)(k / t->block_elems) * t->block_bytes;
}

double qtype_bits_per_weight(uint32_t type)
{
    const qtype_info *t = qtype_get(type);
    return t ? 8.0 * t->block_bytes / t->block_elems : 0.0;
}

size_t qact_row_bytes(qact a, int64_t k)
{
    if (k <= 0)
        return 0;
    switch (a) {
    case QACT_F32:
        return (size_t)k * sizeof(float);
    case QACT_Q8_32:
        return k % QK_32 ? 0 : (size_t)(k / QK_32) * sizeof(qa_q8_32);
    case QACT_Q8_K:
        return k % QK_K ? 0 : (size_t)(k / QK_K) * sizeof(qa_q8_k);
    }
    return 0;
}

/* ---- one block each: out gets block_elems values ---- */

static float half(uint16_t h)
{
    return simd_f16_to_f32_scalar(h);
}

/* _0/_1 types: byte j's low nibble is element j, its high nibble element j + 16. */
static void block_q4_0(float *out, const qb_q4_0 *b)
{
    float d = half(b->d);
    for (int j = 0; j < QK_32 / 2; j++) {
        out[j] = (float)((b->qs[j] & 0x0f) - 8) * d;
        out[j + 16] = (float)((b->qs[j] >> 4) - 8) * d;
    }
}

static void block_q4_1(float *out, const qb_q4_1 *b)
{
    float d = half(b->d), m = half(b->m);
    for (int j = 0; j < QK_32 / 2; j++) {
        out[j] = (float)(b->qs[j] & 0x0f) * d + m;
        out[j + 16] = (float)(b->qs[j] >> 4) * d + m;
    }
}

/* Bit i of the little-endian qh is element i's fifth bit. */
static uint32_t load_qh(const uint8_t qh[4])
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
           (uint32_t)qh[3] << 24;
}

static void block_q5_0(float *out, const qb_q5_0 *b)
{
    float d = half(b->d);
    uint32_t qh = load_qh(b->qh);
    for (int j = 0; j < QK_32 / 2; j++) {
        int lo = (b->qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
        int hi = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        out[j] = (float)(lo - 16) * d;
        out[j + 16] = (float)(hi - 16) * d;
    }
}

static void block_q5_1(float *out, const qb_q5_1 *b)
{
    float d = half(b->d), m = half(b->m);
    uint32_t qh = load_qh(b->qh);
    for (int j = 0; j < QK_32 / 2; j++) {
        int lo = (b->qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
        int hi = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        out[j] = (float)lo * d + m;
        out[j + 16] = (float)hi * d + m;
    }
}

static void block_q8_0(float *out, const qb_q8_0 *b)
{
    float d = half(b->d);
    for (int j = 0; j < QK_32; j++)
        out[j] = (float)b->qs[j] * d;
}

static void block_iq4_nl(float *out, const qb_iq4_nl *b)
{
    float d = half(b->d);
    for (int j = 0; j < QK_32 / 2; j++) {
        out[j] = d * (float)qt_iq4nl_values[b->qs[j] & 0x0f];
        out[j + 16] = d * (float)qt_iq4nl_values[b->qs[j] >> 4];
    }
}

/* K types: each 128 elements take 32 bytes of 2-bit quants (Q2_K, Q3_K), shifted by
 * 0, 2, 4, 6 for the four runs of 32; the sub-block scale is applied as (d * scale) * q,
 * the minimum as (dmin * min), subtracted. */
static void block_q2_k(float *out, const qb_q2_k *b)
{
    float d = half(b->d), dmin = half(b->dmin);
    for (int e = 0; e < QK_K; e++) {
        int half_i = e / 128, run = (e % 128) / 32, l = e % 32;
        int sub = e / 16; /* scale index: 16 elements each, in element order */
        int q = (b->qs[half_i * 32 + l] >> (2 * run)) & 3;
        float dl = d * (float)(b->scales[sub] & 0x0f);
        float ml = dmin * (float)(b->scales[sub] >> 4);
        out[e] = dl * (float)q - ml;
    }
}

/* Q3_K's 16 scales of 6 bits: low 4 bits in bytes 0-7 (low nibbles for scales 0-7, high
 * nibbles for 8-15), high 2 bits in bytes 8-11 (scale j: byte 8 + j % 4, bits 2 * (j / 4)).
 * They are stored offset by 32. */
static int q3_k_scale(const uint8_t s[K_SCALE_SIZE], int j)
{
    int lo = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

static void block_q3_k(float *out, const qb_q3_k *b)
{
    float d = half(b->d);
    float dl[QK_K / 16];
    for (int j = 0; j < QK_K / 16; j++)
        dl[j] = d * (float)q3_k_scale(b->scales, j);
    for (int e = 0; e < QK_K; e++) {
        int half_i = e / 128, run = (e % 128) / 32, l = e % 32;
        int q = (b->qs[half_i * 32 + l] >> (2 * run)) & 3;
        /* the high bit set means no offset; clear means minus 4 */
        if (!(b->hmask[l] & (1u << (4 * half_i + run))))
            q -= 4;
        out[e] = dl[e / 16] * (float)q;
    }
}

/* Q4_K / Q5_K: 8 scales and 8 mins of 6 bits in 12 bytes. For j < 4, scale j is bits 0-5
 * of byte j and min j bits 0-5 of byte j + 4; for j >= 4 the low 4 bits sit in byte
 * j + 4 (scale low nibble, min high nibble) and the top 2 bits in bits 6-7 of bytes j - 4
 * (scale) and j (min). */
static void k4_scale_min(const uint8_t s[K_SCALE_SIZE], int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4;
        *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Each 64 elements: 32 bytes, low nibbles the first 32 (sub-block 2i), high nibbles the
 * next 32 (sub-block 2i + 1). Q5_K's fifth bit of element 64i + 32h + l is bit 2i + h of
 * qh[l]. */
static void block_q45_k(float *out, uint16_t d16, uint16_t dmin16,
                        const uint8_t scales[K_SCALE_SIZE], const uint8_t *qs,
                        const uint8_t *qh)
{
    float d = half(d16), dmin = half(dmin16);
    for (int sub = 0; sub < QK_K / 32; sub++) {
        int sc, mn;
        k4_scale_min(scales, sub, &sc, &mn);
        float dl = d * (float)sc, ml = dmin * (float)mn;
        const uint8_t *q = qs + (sub / 2) * 32;
        int shift = 4 * (sub % 2);
        for (int l = 0; l < 32; l++) {
            int v = (q[l] >> shift) & 0x0f;
            if (qh && (qh[l] >> sub) & 1)
                v += 16;
            out[sub * 32 + l] = dl * (float)v - ml;
        }
    }
}

static void block_q4_k(float *out, const qb_q4_k *b)
{
    block_q45_k(out, b->d, b->dmin, b->scales, b->qs, NULL);
}

static void block_q5_k(float *out, const qb_q5_k *b)
{
    block_q45_k(out, b->d, b->dmin, b->scales, b->qs, b->qh);
}

/* Q6_K: each 128 elements take 64 bytes of ql and 32 of qh. Element 32r + l (r = 0..3) has
 * its low 4 bits in ql[l + 32 * (r % 2)] (low nibble for r < 2, high for r >= 2) and its
 * high 2 bits at bits 2r of qh[l]; values are offset by 32, and each 16 share an int8
 * scale. */
static void block_q6_k(float *out, const qb_q6_k *b)
{
    float d = half(b->d);
    for (int e = 0; e < QK_K; e++) {
        int half_i = e / 128, r = (e % 128) / 32, l = e % 32;
        const uint8_t *ql = b->ql + 64 * half_i, *qh = b->qh + 32 * half_i;
        int lo = (ql[l + 32 * (r % 2)] >> (4 * (r / 2))) & 0x0f;
        int hi = (qh[l] >> (2 * r)) & 3;
        float dl = d * (float)b->scales[e / 16];
        out[e] = dl * (float)((lo | hi << 4) - 32);
    }
}

/* IQ4_XS: 8 sub-blocks of 32 like IQ4_NL's, each with a 6-bit scale (offset by 32): low 4
 * bits in scales_l (nibble j % 2 of byte j / 2), high 2 bits at bits 2j of scales_h. */
static void block_iq4_xs(float *out, const qb_iq4_xs *b)
{
    float d = half(b->d);
    for (int j = 0; j < QK_K / 32; j++) {
        int ls = ((b->scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) |
                 ((b->scales_h >> (2 * j)) & 3) << 4;
        float dl = d * (float)(ls - 32);
        const uint8_t *qs = b->qs + 16 * j;
        for (int l = 0; l < 16; l++) {
            out[32 * j + l] = dl * (float)qt_iq4nl_values[qs[l] & 0x0f];
            out[32 * j + l + 16] = dl * (float)qt_iq4nl_values[qs[l] >> 4];
        }
    }
}

void qtype_dequant_row(float *out, const void *row, uint32_t type, int64_t k)
{
    /* out (k); row: qtype_row_bytes(type, k) bytes, any alignment */
    const uint8_t *p = row;
    const qtype_info *t = qtype_get(type);
    if (!t)
        return;
    if (type == QT_F32) {
        memcpy(out, p, (size_t)k * sizeof(float));
        return;
    }
    if (type == QT_F16 || type == QT_BF16) {
        for (int64_t i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, sizeof h);
            if (type == QT_F16) {
                out[i] = half(h);
            } else { /* bf16 is the top half of an f32 */
                uint32_t bits = (uint32_t)h << 16;
                memcpy(&out[i], &bits, sizeof bits);
            }
        }
        return;
    }
    for (int64_t i = 0; i < k; i += t->block_elems, p += t->block_bytes) {
        float *o = out + i;
        union { /* the block copied out, so row needs no alignment */
            qb_q4_0 q4_0; qb_q4_1 q4_1; qb_q5_0 q5_0; qb_q5_1 q5_1; qb_q8_0 q8_0;
            qb_iq4_nl iq4_nl; qb_q2_k q2_k; qb_q3_k q3_k; qb_q4_k q4_k; qb_q5_k q5_k;
            qb_q6_k q6_k; qb_iq4_xs iq4_xs;
        } b;
        memcpy(&b, p, t->block_bytes);
        switch ((qtype)type) {
        case QT_Q4_0: block_q4_0(o, &b.q4_0); break;
        case QT_Q4_1: block_q4_1(o, &b.q4_1); break;
        case QT_Q5_0: block_q5_0(o, &b.q5_0); break;
        case QT_Q5_1: block_q5_1(o, &b.q5_1); break;
        case QT_Q8_0: block_q8_0(o, &b.q8_0); break;
        case QT_IQ4_NL: block_iq4_nl(o, &b.iq4_nl); break;
        case QT_Q2_K: block_q2_k(o, &b.q2_k); break;
        case QT_Q3_K: block_q3_k(o, &b.q3_k); break;
        case QT_Q4_K: block_q4_k(o, &b.q4_k); break;
        case QT_Q5_K: block_q5_k(o, &b.q5_k); break;
        case QT_Q6_K: block_q6_k(o, &b.q6_k); break;
        case QT_IQ4_XS: block_iq4_xs(o, &b.iq4_xs); break;
        case QT_F32: case QT_F16: case QT_BF16: break; /* handled above */
        }
    }
}
