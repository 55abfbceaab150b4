/* qpack_data.h: random quantized weights and activations for the packed-GEMM test and
 * benchmark. Header-only: the stand-alone builds compile one .c file. */
#ifndef TESSERA_TESTS_QPACK_DATA_H
#define TESSERA_TESTS_QPACK_DATA_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "simd_internal.h"

/* xorshift64*, its own state so the benchmark and the test draw alike. */
static uint64_t qd_state = 0x2545f4914f6cdd1dull;
static inline uint32_t qd_u32(void)
{
    qd_state ^= qd_state >> 12;
    qd_state ^= qd_state << 25;
    qd_state ^= qd_state >> 27;
    return (uint32_t)((qd_state * 0x2545f4914f6cdd1dull) >> 32);
}
static inline float qd_unit(float lo, float hi)
{
    return lo + (hi - lo) * (float)(qd_u32() >> 8) * (1.0f / 16777216.0f);
}

static inline int qd_block_elems(uint32_t t) { return t == QT_Q8_0 || t == QT_Q4_0 ? 32 : 256; }
static inline size_t qd_block_bytes(uint32_t t) { return qtype_get(t)->block_bytes; }

/* N rows of K weights of type t: random bytes, with scales in a sane f16 range. Owned. */
static inline uint8_t *qd_weights(uint32_t t, int N, int K, size_t *row_bytes)
{
    size_t bb = qd_block_bytes(t), nb = (size_t)N * (K / qd_block_elems(t));
    *row_bytes = (size_t)(K / qd_block_elems(t)) * bb;
    uint8_t *w = malloc(nb * bb);
    for (size_t i = 0; i < nb * bb; i++)
        w[i] = (uint8_t)qd_u32();
    for (size_t i = 0; i < nb; i++) {
        uint8_t *blk = w + i * bb;
        uint16_t d = simd_f32_to_f16_scalar(qd_unit(0.0005f, 0.01f));
        uint16_t dmin = simd_f32_to_f16_scalar(qd_unit(0.0005f, 0.01f));
        switch (t) {
        case QT_Q8_0: ((qb_q8_0 *)blk)->d = d; break;
        case QT_Q4_0: ((qb_q4_0 *)blk)->d = d; break;
        case QT_Q4_K: ((qb_q4_k *)blk)->d = d, ((qb_q4_k *)blk)->dmin = dmin; break;
        case QT_Q5_K: ((qb_q5_k *)blk)->d = d, ((qb_q5_k *)blk)->dmin = dmin; break;
        default: ((qb_q6_k *)blk)->d = d; break;
        }
    }
    return w;
}

/* M rows of K activations in the blocks type t multiplies with (random int8, d, sums),
 * and their values xf (M, K). Owned. */
static inline uint8_t *qd_acts(uint32_t t, int M, int K, float *xf, size_t *row_bytes)
{
    int kblk = qd_block_elems(t) == 32;
    size_t bsz = kblk ? sizeof(qa_q8_32) : sizeof(qa_q8_k);
    int nb = K / qd_block_elems(t);
    *row_bytes = (size_t)nb * bsz;
    uint8_t *x = calloc((size_t)M, *row_bytes);
    for (int m = 0; m < M; m++)
        for (int b = 0; b < nb; b++) {
            uint8_t *blk = x + (size_t)m * *row_bytes + (size_t)b * bsz;
            float d = qd_unit(0.001f, 0.02f);
            int8_t *qs = kblk ? ((qa_q8_32 *)blk)->qs : ((qa_q8_k *)blk)->qs;
            int n = qd_block_elems(t), sum = 0;
            for (int i = 0; i < n; i++) {
                qs[i] = (int8_t)((int)(qd_u32() % 255) - 127);
                sum += qs[i];
                if (xf)
                    xf[(size_t)m * K + (size_t)b * n + i] = d * qs[i];
            }
            if (kblk) {
                ((qa_q8_32 *)blk)->d = d;
                ((qa_q8_32 *)blk)->sum = sum;
            } else {
                qa_q8_k *k = (qa_q8_k *)blk;
                k->d = d;
                memset(k->pad, 0, sizeof k->pad);
                for (int j = 0; j < 16; j++) {
                    int s = 0;
                    for (int i = 0; i < 16; i++)
                        s += qs[16 * j + i];
                    k->bsums[j] = (int16_t)s;
                }
                qa_q8_k_sums32(k);
            }
        }
    return x;
}

/* Overwrites w (N rows of K weights of type t, as qd_weights made them) and xq (M rows of
 * activations, as qd_acts made them) with the largest integers every field can hold, so
 * every sum takes its widest value: activations of magnitude 127 with alternating signs
 * (each 16 sums to 0, so bsums are 0), weight bytes at their extremes (Q8_0 -128 and 127,
 * Q4_0 all 0 or all 15, Q4_K / Q5_K values all ones with scales and minimums 63). Q6_K:
 * q = -32 in even elements and 31 in odd ones, which the activations' signs follow (a row's
 * products x q all of one sign), and scales -128 in even blocks (sc q = 4096, the most)
 * and 127 in odd ones (sc q = -4064, the least). d and dmin are kept. */
static inline void qd_extreme(uint32_t t, uint8_t *w, int N, int K, uint8_t *xq, int M)
{
    size_t bb = qd_block_bytes(t), nb = (size_t)N * (K / qd_block_elems(t));
    for (size_t i = 0; i < nb; i++) {
        uint8_t *b = w + i * bb;
        switch (t) {
        case QT_Q8_0:
            for (int e = 0; e < 32; e++)
                ((qb_q8_0 *)b)->qs[e] = (int8_t)(e % 2 ? 127 : -128);
            break;
        case QT_Q4_0:
            memset(((qb_q4_0 *)b)->qs, i % 2 ? 0xFF : 0x00, 16);
            break;
        case QT_Q4_K:
            memset(((qb_q4_k *)b)->scales, 0xFF, K_SCALE_SIZE);
            memset(((qb_q4_k *)b)->qs, 0xFF, QK_K / 2);
            break;
        case QT_Q5_K:
            memset(((qb_q5_k *)b)->scales, 0xFF, K_SCALE_SIZE);
            memset(((qb_q5_k *)b)->qh, 0xFF, QK_K / 8);
            memset(((qb_q5_k *)b)->qs, 0xFF, QK_K / 2);
            break;
        default: { /* element e's bits come from ql and qh bytes of e's parity */
            qb_q6_k *q6 = (qb_q6_k *)b;
            for (int k = 0; k < QK_K / 2; k++)
                q6->ql[k] = k % 2 ? 0xFF : 0x00;
            for (int k = 0; k < QK_K / 4; k++)
                q6->qh[k] = k % 2 ? 0xFF : 0x00;
            memset(q6->scales, i % 2 ? 127 : 0x80, QK_K / 16);
            break;
        }
        }
    }
    int be = qd_block_elems(t), nblk = K / be;
    size_t bsz = be == 32 ? sizeof(qa_q8_32) : sizeof(qa_q8_k);
    for (int m = 0; m < M; m++)
        for (int j = 0; j < nblk; j++) {
            uint8_t *blk = xq + ((size_t)m * nblk + j) * bsz;
            int8_t *qs = be == 32 ? ((qa_q8_32 *)blk)->qs : ((qa_q8_k *)blk)->qs;
            int sum = 0;
            for (int e = 0; e < be; e++)
                sum += qs[e] = (int8_t)((e + m) % 2 ? 127 : -127);
            if (be == 32)
                ((qa_q8_32 *)blk)->sum = sum;
            else
                memset(((qa_q8_k *)blk)->bsums, 0, 64 - sizeof(float)); /* alternating signs:
                                                                             * each 16 sums to 0 */
        }
}

#endif
