/* qpack.c: repacks quantized weights into the tile layout (qpack_internal.h), and the
 * plain-C twin of the kernels on it. Which kernel runs a pack is dispatch.c's choice. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../qpack_internal.h"
#include "../simd_internal.h"

bool simd_qpack_supports(uint32_t type)
{
    return type == QT_Q8_0 || type == QT_Q4_0 || type == QT_Q4_K || type == QT_Q5_K ||
           type == QT_Q6_K || type == QT_F16 || type == QT_BF16;
}

/* ---- unpacking one block of the file into integers ---- */

/* One weight row's block: q[i] integers (weight i = d * sc[i / sub] * q[i] - dmin *
 * mn[i / sub]), as the GGUF layouts define them. */
typedef struct unpacked {
    int8_t q[QK_K];
    int sc[QK_K / 16], mn[QK_K / 16];
    uint16_t d, dmin; /* f16, as the file has them */
} unpacked;

/* Q4_K / Q5_K: eight 6-bit scales and minimums in 12 bytes. */
static void k_scale_min(int j, const uint8_t *s, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void unpack_block(unpacked *u, uint32_t type, const uint8_t *blk)
{
    u->dmin = 0;
    switch (type) {
    case QT_Q8_0: {
        const qb_q8_0 *b = (const qb_q8_0 *)blk;
        u->d = b->d;
        memcpy(u->q, b->qs, QK_32);
        u->sc[0] = 1;
        break;
    }
    case QT_Q4_0: {
        const qb_q4_0 *b = (const qb_q4_0 *)blk;
        u->d = b->d;
        for (int i = 0; i < QK_32 / 2; i++) {
            u->q[i] = (int8_t)((b->qs[i] & 0x0f) - 8);
            u->q[i + QK_32 / 2] = (int8_t)((b->qs[i] >> 4) - 8);
        }
        u->sc[0] = 1;
        break;
    }
    case QT_Q4_K:
    case QT_Q5_K: {
        /* Each 64 elements: 32 low nibbles (sub-block 2c), then 32 high (2c + 1); Q5_K's
         * fifth bit of element 32 * s + l is bit s of qh[l]. */
        const qb_q4_k *b4 = (const qb_q4_k *)blk;
        const qb_q5_k *b5 = (const qb_q5_k *)blk;
        bool five = type == QT_Q5_K;
        const uint8_t *scales = five ? b5->scales : b4->scales;
        const uint8_t *qs = five ? b5->qs : b4->qs;
        u->d = five ? b5->d : b4->d;
        u->dmin = five ? b5->dmin : b4->dmin;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int lo = qs[32 * c + l] & 0x0f, hi = qs[32 * c + l] >> 4;
                if (five) {
                    lo |= ((b5->qh[l] >> (2 * c)) & 1) << 4;
                    hi |= ((b5->qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                u->q[64 * c + l] = (int8_t)lo;
                u->q[64 * c + 32 + l] = (int8_t)hi;
            }
        for (int j = 0; j < 8; j++)
            k_scale_min(j, scales, &u->sc[j], &u->mn[j]);
        break;
    }
    case QT_Q6_K: {
        /* Each 128 elements h: ql[64h ..] low nibbles then high nibbles, two bits each from
         * qh[32h + l] at shifts 0, 2, 4, 6 for the four runs of 32; value - 32. */
        const qb_q6_k *b = (const qb_q6_k *)blk;
        u->d = b->d;
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *ql = b->ql + 64 * h;
                int qh = b->qh[32 * h + l];
                int8_t *q = u->q + 128 * h;
                q[l] = (int8_t)(((ql[l] & 0x0f) | ((qh & 3) << 4)) - 32);
                q[l + 32] = (int8_t)(((ql[l + 32] & 0x0f) | (((qh >> 2) & 3) << 4)) - 32);
                q[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh >> 4) & 3) << 4)) - 32);
                q[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh >> 6) & 3) << 4)) - 32);
            }
        for (int j = 0; j < 16; j++)
            u->sc[j] = b->scales[j];
        break;
    }
    default:
        break;
    }
}

/* Writes weight row n (0..15 in its group) of block u into unit, as u + off in the
 * unit's bits (qpack_internal.h). */
static void unit_put(uint8_t *unit, const simd_qpack *p, int n, const unpacked *u)
{
    int half = p->blk / 8;
    uint64_t *hi = (uint64_t *)(unit + p->off_hi);
    for (int e = 0; e < p->blk; e++) {
        int v = u->q[e] + p->off, r = e / 4, i = e % 4;
        if (p->bits == 8) {
            unit[(size_t)r * 64 + n * 4 + i] = (uint8_t)v;
            continue;
        }
        unit[(size_t)(r % half) * 64 + n * 4 + i] |= (uint8_t)((v & 15) << (r < half ? 0 : 4));
        for (int t = 0; t < p->bits - 4; t++)
            hi[(size_t)t * (p->blk / 4) + r] |= (uint64_t)((v >> (4 + t)) & 1) << (4 * n + i);
    }
    ((uint16_t *)(unit + p->off_d))[n] = u->d;
    if (p->has_min)
        ((uint16_t *)(unit + p->off_dmin))[n] = u->dmin;
    if (p->n_sub > 1)
        for (int j = 0; j < p->n_sub; j++)
            ((int8_t *)(unit + p->off_sc))[j * QP_ROWS + n] = (int8_t)u->sc[j];
    if (p->has_min)
        for (int j = 0; j < p->n_sub; j++)
            (unit + p->off_mn)[(j / 2) * QP_ROWS * 2 + n * 2 + j % 2] = (uint8_t)u->mn[j];
}

static size_t round_up(size_t x) { return (x + QP_ALIGN - 1) / QP_ALIGN * QP_ALIGN; }

simd_qpack *simd_qpack_make(const simd_qmat *w)
{
    if (w->type == QT_F16 || w->type == QT_BF16)
        return qpack_bf16_make(w);
    const qtype_info *info = qtype_get(w->type);
    if (!simd_qpack_supports(w->type) || w->N < 1 || w->K < 1 ||
        w->row_bytes != qtype_row_bytes(w->type, w->K) || w->row_bytes == 0)
        return NULL;
    int elems = (int)info->block_elems;
    size_t block_bytes = info->block_bytes;
    simd_qpack *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->type = w->type;
    p->N = w->N;
    p->K = w->K;
    p->blk = elems;
    p->n_blk = w->K / p->blk;
    p->sub = w->type == QT_Q6_K ? 16 : 32;
    p->n_sub = p->blk / p->sub;
    p->bits = w->type == QT_Q4_K ? 4 : w->type == QT_Q5_K ? 5 : w->type == QT_Q6_K ? 6 : 8;
    p->off = w->type == QT_Q8_0 ? 128 : w->type == QT_Q4_0 ? 8 : w->type == QT_Q6_K ? 32 : 0;
    p->has_min = w->type == QT_Q4_K || w->type == QT_Q5_K;
    p->act = info->act;
    p->act_blk_bytes = p->blk == QK_K ? sizeof(qa_q8_k) : sizeof(qa_q8_32);
    p->act_qs_off = p->blk == QK_K ? offsetof(qa_q8_k, qs) : offsetof(qa_q8_32, qs);
    size_t off = (size_t)p->blk * QP_ROWS / (p->bits == 8 ? 1 : 2); /* q */
    p->off_hi = off;
    off += p->bits > 4 && p->bits < 8 ? (size_t)(p->bits - 4) * (p->blk / 4) * sizeof(uint64_t) : 0;
    p->off_d = off;
    off += sizeof(uint16_t) * QP_ROWS;
    p->off_dmin = off;
    off += p->has_min ? sizeof(uint16_t) * QP_ROWS : 0;
    p->off_sc = off;
    off += p->n_sub > 1 ? (size_t)p->n_sub * QP_ROWS : 0;
    p->off_mn = off;
    off += p->has_min ? (size_t)p->n_sub * QP_ROWS : 0;
    p->unit_bytes = round_up(off);
    size_t groups = ((size_t)w->N + QP_ROWS - 1) / QP_ROWS;
    p->bytes = groups * p->n_blk * p->unit_bytes;
    p->data = aligned_alloc(QP_ALIGN, p->bytes);
    if (!p->data) {
        free(p);
        return NULL;
    }
    /* padding rows: weights u = off (q = 0) and zero scales; nibbles and planes are or-ed */
    memset(p->data, 0, p->bytes);
    unpacked u, zero;
    memset(&u, 0, sizeof u);
    memset(&zero, 0, sizeof zero);
    for (size_t g = 0; g < groups; g++)
        for (int n = (int)(g * QP_ROWS); n < (int)((g + 1) * QP_ROWS); n++) {
            const uint8_t *row = (const uint8_t *)w->data + (size_t)n * w->row_bytes;
            for (int b = 0; b < p->n_blk; b++) {
                if (n < w->N)
                    unpack_block(&u, w->type, row + (size_t)b * block_bytes);
                unit_put((uint8_t *)qpack_unit(p, (int)g, b), p, n % QP_ROWS,
                         n < w->N ? &u : &zero);
            }
        }
    return p;
}

void simd_qpack_free(simd_qpack *p)
{
    if (!p)
        return;
    free(p->data);
    free(p);
}

size_t simd_qpack_bytes(const simd_qpack *p) { return p ? p->bytes : 0; }

/* ---- the twin ---- */

/* Output (m, n) as the header's comment says; ublk[b] are n's units. */
static float twin_one(const uint8_t *xrow, const simd_qpack *p, int group, int n)
{
    float acc = 0.0f;
    for (int b = 0; b < p->n_blk; b++) {
        const uint8_t *unit = qpack_unit(p, group, b);
        const uint8_t *xb = xrow + (size_t)b * p->act_blk_bytes;
        const int8_t *xs = (const int8_t *)(xb + p->act_qs_off);
        float dx;
        memcpy(&dx, xb, sizeof dx); /* d leads both activation blocks */
        int32_t isum = 0;
        for (int j = 0; j < p->n_sub; j++) {
            int32_t dot = 0;
            for (int e = j * p->sub; e < (j + 1) * p->sub; e++)
                dot += (int32_t)xs[e] * (qpack_u(p, unit, n, e) - p->off);
            int sc = p->n_sub > 1 ? ((const int8_t *)(unit + p->off_sc))[j * QP_ROWS + n] : 1;
            isum += sc * dot;
        }
        float dw = simd_f16_to_f32_scalar(((const uint16_t *)(unit + p->off_d))[n]);
        acc = fmaf(dw * dx, (float)isum, acc);
        if (p->has_min) {
            const qa_q8_k *xk = (const qa_q8_k *)xb;
            const uint8_t *mn = unit + p->off_mn;
            int32_t msum = 0;
            for (int j = 0; j < p->n_sub; j++)
                msum += mn[(j / 2) * QP_ROWS * 2 + n * 2 + j % 2] *
                        (xk->bsums[2 * j] + xk->bsums[2 * j + 1]);
            float dmin = simd_f16_to_f32_scalar(((const uint16_t *)(unit + p->off_dmin))[n]);
            acc = fmaf(-(dmin * dx), (float)msum, acc);
        }
    }
    return acc;
}

void simd_qpack_gemm_ref(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end)
{
    if (p->type == QT_F16 || p->type == QT_BF16) {
        qpack_bf16_gemm_ref(out, ldo, xq, p, M, beta, n_begin, n_end);
        return;
    }
    size_t xrow_bytes = (size_t)p->n_blk * p->act_blk_bytes;
    for (int m = 0; m < M; m++) {
        const uint8_t *xrow = (const uint8_t *)xq + (size_t)m * xrow_bytes;
        for (int n = n_begin; n < n_end; n++) {
            float acc = twin_one(xrow, p, n / QP_ROWS, n % QP_ROWS);
            float *o = out + (size_t)m * ldo + n;
            *o = beta == 0.0f ? acc : fmaf(beta, *o, acc);
        }
    }
}
