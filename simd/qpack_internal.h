/* qpack_internal.h: the packed layout shared by the packer and twin (ref/qpack.c) and the
 * tile kernel (amx/qgemm_amx.c). */
#ifndef TESSERA_SIMD_QPACK_INTERNAL_H
#define TESSERA_SIMD_QPACK_INTERNAL_H

#include "qpack.h"

enum {
    QP_ROWS = 16, /* weight rows per group: the tile's 16 int32 columns */
    QP_ALIGN = 64,
};

typedef void (*qpack_gemm_fn)(float *out, size_t ldo, const void *xq, const simd_qpack *p,
                              int M, float beta, int n_begin, int n_end);

/* One unit = one 16-row group x one activation block (blk elements), at
 * data + (group * n_blk + b) * unit_bytes, 64-byte aligned:
 *   q     int8 [n_sub][sub / 4][16][4]: sub-block j's weights in the tile's VNNI order,
 *         q[j][r][n][i] = weight (n, j * sub + 4r + i), unpacked to a signed integer
 *   d     f32 [16]: the block's scale per row (0 for padding rows)
 *   dmin  f32 [16]: the block's scale of the minimums (has_min)
 *   sc    int8 [n_sub][16]: sub-block scales (n_sub > 1)
 *   mn    int16 [n_sub / 2][16][2]: sub-block minimums, two per 32-bit lane (has_min) */
struct simd_qpack {
    uint32_t type;
    int N, K;
    int blk;        /* elements per activation block: 32 or 256 */
    int sub;        /* elements per sub-block: 32, or 16 for Q6_K */
    int n_sub;      /* sub-blocks per activation block */
    int n_blk;      /* K / blk */
    int has_min;    /* Q4_K, Q5_K */
    int act;        /* qact of the activations */
    size_t act_blk_bytes; /* sizeof(qa_q8_32) or sizeof(qa_q8_k) */
    size_t act_qs_off;    /* offsetof the int8 quants in an activation block */
    size_t off_d, off_dmin, off_sc, off_mn; /* offsets inside a unit */
    size_t unit_bytes;
    size_t bytes;         /* groups * n_blk * unit_bytes */
    uint8_t *data;        /* owned, 64-byte aligned */
    qpack_gemm_fn gemm;
};

static inline const uint8_t *qpack_unit(const simd_qpack *p, int group, int b)
{
    return p->data + ((size_t)group * p->n_blk + b) * p->unit_bytes;
}

/* What the tile kernels may use here, asked once (ref/qpack.c). */
enum { QP_CAP_INT8 = 1, QP_CAP_BF16 = 2 };
int qpack_amx_caps(void);

/* F16 / BF16 packs (ref/qpack_bf16.c): one unit per 16-row group and 32 elements of K,
 * uint16 bf16 [16][16][2]: q[r][n][i] = weight (n, 32 b + 2r + i); no scales. */
simd_qpack *qpack_bf16_make(const simd_qmat *w);
void qpack_bf16_gemm_ref(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end);

/* Whether p's gemm is a tile kernel (not the twin). */
bool qpack_on_tiles(const simd_qpack *p);

/* The tile kernels (amx/), built only with TS_HAVE_AMX. */
void simd_amx_qpack_gemm(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end);
void simd_amx_qpack_gemm_bf16(float *out, size_t ldo, const void *xq, const simd_qpack *p,
                              int M, float beta, int n_begin, int n_end);

#endif
