/* quant_row.c: one row of f32 into each block type: the searches of quant_fit.c, then the
 * bits packed where simd/quant.h's layouts put them. */
#include <math.h>
#include <stddef.h>
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

/* What a block's search chose, for its type's pack to store. The scales are the values the
 * file's f16 fields will decode to. */
typedef struct block_fit {
    uint8_t q[QK_K];    /* level indices, one per value of the block (32 or QK_K) */
    float d;            /* the block's scale (K types: the super-block's) */
    float m;            /* Q4_1, Q5_1: the offset, x ~ d * q + m */
    float dmin;         /* affine K types: x ~ d * sc[k] * q - dmin * mn[k] */
    int sc[16], mn[16]; /* K types: sub-block scales, and the affine ones' mins (n_sub) */
} block_fit;

/* Symmetric block of 32: d rounded to f16, q the indices for that stored scale. */
static void fit_sym32(block_fit *f, const float *x, const quant_grid *g)
{
    float d;
    quant__fit_sym(f->q, &d, x, 32, g);
    f->d = quant__f16_round(d);
    quant__grid_round(f->q, x, 32, f->d, g); /* nearest levels for the scale the file holds */
}

/* Affine block of 32 (Q4_1, Q5_1): d and m rounded to f16, q the indices for those. */
static void fit_affine32(block_fit *f, const float *x, int nmax)
{
    float a, b;
    quant__fit_affine(f->q, &a, &b, x, 32, nmax, false);
    float ah = quant__f16_round(a), bh = quant__f16_round(b), ia = ah > 0.0f ? 1.0f / ah : 0.0f;
    for (int i = 0; i < 32; i++) {
        float r = nearbyintf((x[i] - bh) * ia);
        f->q[i] = (uint8_t)(r > 0.0f ? (r < (float)nmax ? r : (float)nmax) : 0.0f); /* NaN: 0 */
    }
    f->d = ah;
    f->m = bh;
}

/* ---- blocks of 32: where each type puts a fit ---- */

static void pack_q8_0(void *blk, const block_fit *f)
{
    qb_q8_0 *o = blk;
    o->d = f16(f->d);
    for (int j = 0; j < 32; j++)
        o->qs[j] = (int8_t)(f->q[j] - 128);
}

/* Also IQ4_NL's: the same layout, its nibbles indices into the codebook. */
static void pack_q4_0(void *blk, const block_fit *f)
{
    qb_q4_0 *o = blk;
    o->d = f16(f->d);
    pack_nibbles32(o->qs, NULL, f->q);
}
_Static_assert(sizeof(qb_iq4_nl) == sizeof(qb_q4_0) &&
                   offsetof(qb_iq4_nl, qs) == offsetof(qb_q4_0, qs),
               "IQ4_NL's block has Q4_0's layout");

static void pack_q5_0(void *blk, const block_fit *f)
{
    qb_q5_0 *o = blk;
    o->d = f16(f->d);
    pack_nibbles32(o->qs, o->qh, f->q);
}

static void pack_q4_1(void *blk, const block_fit *f)
{
    qb_q4_1 *o = blk;
    o->d = f16(f->d);
    o->m = f16(f->m);
    pack_nibbles32(o->qs, NULL, f->q);
}

static void pack_q5_1(void *blk, const block_fit *f)
{
    qb_q5_1 *o = blk;
    o->d = f16(f->d);
    o->m = f16(f->m);
    pack_nibbles32(o->qs, o->qh, f->q);
}

/* ---- K types (super-blocks of 256) ---- */

static void pack_q2_k(void *blk, const block_fit *f)
{
    qb_q2_k *o = blk;
    memset(o, 0, sizeof *o);
    o->d = f16(f->d);
    o->dmin = f16(f->dmin);
    for (int k = 0; k < 16; k++)
        o->scales[k] = (uint8_t)(f->sc[k] | f->mn[k] << 4);
    /* element e: byte 32 * (e / 128) + e % 32, bits 2 * ((e % 128) / 32) */
    for (int e = 0; e < QK_K; e++)
        o->qs[32 * (e / 128) + e % 32] |= (uint8_t)(f->q[e] << (2 * ((e % 128) / 32)));
}

static void pack_q3_k(void *blk, const block_fit *f)
{
    qb_q3_k *o = blk;
    memset(o, 0, sizeof *o);
    o->d = f16(f->d);
    for (int k = 0; k < 16; k++) { /* 6-bit sc + 32: low nibbles, then 2-bit tops */
        int u = f->sc[k] + 32;
        o->scales[k % 8] |= (uint8_t)((u & 15) << (4 * (k / 8)));
        o->scales[8 + k % 4] |= (uint8_t)((u >> 4) << (2 * (k / 4)));
    }
    for (int e = 0; e < QK_K; e++) { /* index = low 2 bits + 4 * high bit */
        int h = e / 128, j = (e % 128) / 32, l = e % 32;
        o->qs[32 * h + l] |= (uint8_t)((f->q[e] & 3) << (2 * j));
        o->hmask[l] |= (uint8_t)((f->q[e] >> 2) << (4 * h + j));
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

static void pack_q4_k(void *blk, const block_fit *f)
{
    qb_q4_k *o = blk;
    const uint8_t *q = f->q;
    o->d = f16(f->d);
    o->dmin = f16(f->dmin);
    pack_scales_k4(o->scales, f->sc, f->mn);
    for (int s = 0; s < 8; s += 2) /* sub-blocks s, s + 1 share 32 bytes */
        for (int l = 0; l < 32; l++)
            o->qs[16 * s + l] = (uint8_t)(q[32 * s + l] | q[32 * s + 32 + l] << 4);
}

static void pack_q5_k(void *blk, const block_fit *f)
{
    qb_q5_k *o = blk;
    const uint8_t *q = f->q;
    memset(o->qh, 0, sizeof o->qh);
    o->d = f16(f->d);
    o->dmin = f16(f->dmin);
    pack_scales_k4(o->scales, f->sc, f->mn);
    for (int s = 0; s < 8; s += 2)
        for (int l = 0; l < 32; l++)
            o->qs[16 * s + l] = (uint8_t)((q[32 * s + l] & 15) | (q[32 * s + 32 + l] & 15) << 4);
    for (int e = 0; e < QK_K; e++) /* fifth bit of sub-block s at bit s of byte e % 32 */
        o->qh[e % 32] |= (uint8_t)((q[e] >> 4) << (e / 32));
}

static void pack_q6_k(void *blk, const block_fit *f)
{
    qb_q6_k *o = blk;
    memset(o, 0, sizeof *o);
    o->d = f16(f->d);
    for (int k = 0; k < 16; k++)
        o->scales[k] = (int8_t)f->sc[k];
    for (int e = 0; e < QK_K; e++) {
        /* half h, quarter k of the half, lane l: low nibbles in ql (quarters 0/1 in the
         * low nibbles of two 32-byte rows, 2/3 in the high), top 2 bits in qh */
        int h = e / 128, k = (e % 128) / 32, l = e % 32;
        o->ql[64 * h + 32 * (k % 2) + l] |= (uint8_t)((f->q[e] & 15) << (4 * (k / 2)));
        o->qh[32 * h + l] |= (uint8_t)((f->q[e] >> 4) << (2 * k));
    }
}

static void pack_iq4_xs(void *blk, const block_fit *f)
{
    qb_iq4_xs *o = blk;
    memset(o, 0, sizeof *o);
    o->d = f16(f->d);
    for (int k = 0; k < 8; k++) {
        int u = f->sc[k] + 32;
        o->scales_l[k / 2] |= (uint8_t)((u & 15) << (4 * (k % 2)));
        o->scales_h |= (uint16_t)((u >> 4) << (2 * k));
        pack_nibbles32(o->qs + 16 * k, NULL, f->q + 32 * k);
    }
}

/* ---- every block type: one search, one pack ---- */

/* How a block type's values are fitted, and its pack. A block of 32 has one scale (Q4_1 and
 * Q5_1 an offset too); a K type's super-block of QK_K has n_sub sub-blocks of len values
 * with integer scales (and, affine, integer mins). Indices of bits bits are unsigned when
 * affine (0 .. 2^bits - 1), else signed (-2^(bits-1) .. 2^(bits-1) - 1); likewise the K
 * types' sub-block scales and mins of sbits bits. */
typedef struct block_spec {
    size_t bytes;           /* one block */
    int n_sub, len;         /* 1 x 32, or QK_K as 8 x 32 or 16 x 16 */
    bool affine;            /* x ~ d * q + m (K: d * sc[k] * q - dmin * mn[k]), else d * q */
    int bits, sbits;        /* of an index; of a sub-block scale (K types; 0 for blocks of 32) */
    void (*pack)(void *blk, const block_fit *f);
    const int8_t *codebook; /* symmetric: IQ4's 16 levels instead of the uniform ones */
} block_spec;

static const block_spec block_specs[QT_BF16 + 1] = {
    /* bytes, n_sub, len, affine, bits, sbits, pack, codebook (left out: NULL) */
    [QT_Q8_0]   = {sizeof(qb_q8_0),    1, 32, false, 8, 0, pack_q8_0},
    [QT_Q4_0]   = {sizeof(qb_q4_0),    1, 32, false, 4, 0, pack_q4_0},
    [QT_Q5_0]   = {sizeof(qb_q5_0),    1, 32, false, 5, 0, pack_q5_0},
    [QT_IQ4_NL] = {sizeof(qb_iq4_nl),  1, 32, false, 4, 0, pack_q4_0, qt_iq4nl_values},
    [QT_Q4_1]   = {sizeof(qb_q4_1),    1, 32, true,  4, 0, pack_q4_1},
    [QT_Q5_1]   = {sizeof(qb_q5_1),    1, 32, true,  5, 0, pack_q5_1},
    [QT_Q2_K]   = {sizeof(qb_q2_k),   16, 16, true,  2, 4, pack_q2_k},
    [QT_Q3_K]   = {sizeof(qb_q3_k),   16, 16, false, 3, 6, pack_q3_k},
    [QT_Q4_K]   = {sizeof(qb_q4_k),    8, 32, true,  4, 6, pack_q4_k},
    [QT_Q5_K]   = {sizeof(qb_q5_k),    8, 32, true,  5, 6, pack_q5_k},
    [QT_Q6_K]   = {sizeof(qb_q6_k),   16, 16, false, 6, 8, pack_q6_k},
    [QT_IQ4_XS] = {sizeof(qb_iq4_xs),  8, 32, false, 4, 6, pack_iq4_xs, qt_iq4nl_values},
};

/* nb blocks of type t from x (nb * n_sub * len values) into dst. */
static void row_blocks(uint8_t *dst, const float *x, int64_t nb, const block_spec *t)
{
    int n = t->n_sub * t->len;
    int qtop = (1 << t->bits) - 1, sctop = (1 << t->sbits) - 1;   /* unsigned: 0 .. top */
    int qhalf = 1 << (t->bits - 1), schalf = 1 << t->sbits >> 1; /* signed: -half .. half - 1 */
    quant_grid g;
    if (t->codebook)
        quant__grid_codebook(&g, t->codebook, 16);
    else if (!t->affine)
        quant__grid_uniform(&g, -qhalf, qhalf - 1);
    block_fit f;
    for (int64_t i = 0; i < nb; i++, x += n, dst += t->bytes) {
        if (t->n_sub == 1 && t->affine)
            fit_affine32(&f, x, qtop);
        else if (t->n_sub == 1)
            fit_sym32(&f, x, &g);
        else if (t->affine)
            quant__kaffine(f.q, f.sc, f.mn, &f.d, &f.dmin, x, t->n_sub, t->len, qtop, sctop);
        else
            quant__ksym(f.q, f.sc, &f.d, x, t->n_sub, t->len, &g, -schalf, schalf - 1);
        t->pack(dst, &f);
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
    switch (type) {
    case QT_F32:
        memcpy(dst, src, (size_t)k * sizeof *src);
        return true;
    case QT_F16:
        for (int64_t i = 0; i < k; i++)
            ((uint16_t *)dst)[i] = f16(src[i]);
        return true;
    case QT_BF16:
        for (int64_t i = 0; i < k; i++)
            ((uint16_t *)dst)[i] = bf16(src[i]);
        return true;
    default:
        break;
    }
    const block_spec *t = &block_specs[type];
    int64_t blk = (int64_t)t->n_sub * t->len;
    if (k % blk)
        return false;
    row_blocks(dst, src, k / blk, t);
    return true;
}
