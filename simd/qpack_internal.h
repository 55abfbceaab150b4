/* qpack_internal.h: the packed layout shared by the packer and twin (ref/qpack.c), the
 * vector kernel (avx512vnni/qpack.c) and the tile kernels (amx/). */
#ifndef TESSERA_SIMD_QPACK_INTERNAL_H
#define TESSERA_SIMD_QPACK_INTERNAL_H

#include "qpack.h"

enum {
    QP_ROWS = 16, /* weight rows per group: the tile's 16 int32 columns */
    QP_ALIGN = 64,
};

/* The kernels on packs (the vector kernel and the tiles) prefetch weights this many bytes
 * ahead of the unit they read, a unit's worth at a time: with few activation rows they
 * read faster than the hardware prefetcher fetches. From memory, one thread of a 2-core
 * AMD EPYC, one row: Q4_K 13 GB/s without, 40 with (the file blocks' direct tile: 28);
 * Q6_K 10 and 43. The tiles at 16-64 rows likewise on a 16-core Xeon with AMX. */
#ifndef QP_PF
#define QP_PF 8192
#endif

/* One unit = one 16-row group x one activation block (blk elements), at
 * data + (group * n_blk + b) * unit_bytes, 64-byte aligned. Each weight is kept as an
 * unsigned integer u = its signed integer q + off (off: 128 Q8_0, 8 Q4_0, 32 Q6_K, 0 Q4_K
 * and Q5_K), in as many bits as the file gave it, in the tile's VNNI order: "B-row" r of
 * a unit is the 64 bytes (16 rows n x 4 elements i) u(n, 4r + i), which one vpdpbusd
 * multiplies with 4 activations, and 16 of which make an AMX B tile.
 *   q     bits 8: u8 [blk / 4][16][4], the B-rows as they are;
 *         bits 4, 5, 6: u8 [blk / 8][16][4] nibbles: the low nibble holds B-row r's low 4
 *         bits, the high nibble B-row r + blk / 8's
 *   hi    bits 5, 6: uint64 [bits - 4][blk / 4]: bit 4 + t of u(n, 4r + i) is bit 4n + i
 *         of hi[t][r]
 *   d     f16 [16]: the block's scale per row, the file's bits (0 for padding rows)
 *   dmin  f16 [16]: the block's scale of the minimums (has_min)
 *   sc    int8 [n_sub][16]: sub-block scales (n_sub > 1)
 *   mn    u8 [n_sub / 2][16][2]: sub-block minimums (6 bits), two per 16-bit pair (has_min)
 * The scales stay as small as the file's: at 16 threads a step's packed weights stream
 * from memory, and f32 d / dmin and int16 minimums had made a Q4_K unit 2560 bytes for the
 * file's 2304 (now 2368; Q5_K 3072 -> 2880; Q6_K, Q8_0 and Q4_0 round to the same 64).
 * so that, per block, isum = sum_j sc[j] * (sum_{e in j} u_e x_e - off * sum_{e in j} x_e)
 * is qpack.h's sum_j sc[j] * dot_j over the signed q, exactly. */
struct simd_qpack {
    uint32_t type;
    int N, K;
    int blk;        /* elements per activation block: 32 or 256 */
    int sub;        /* elements per sub-block: 32, or 16 for Q6_K */
    int n_sub;      /* sub-blocks per activation block */
    int n_blk;      /* K / blk */
    int bits;       /* bits a weight: 8, or 4, 5, 6 (nibbles and bit planes) */
    int off;        /* u - q */
    int has_min;    /* Q4_K, Q5_K */
    int act;        /* qact of the activations */
    size_t act_blk_bytes; /* sizeof(qa_q8_32) or sizeof(qa_q8_k) */
    size_t act_qs_off;    /* offsetof the int8 quants in an activation block */
    size_t off_hi, off_d, off_dmin, off_sc, off_mn; /* offsets inside a unit */
    size_t unit_bytes;
    size_t bytes;         /* groups * n_blk * unit_bytes */
    uint8_t *data;        /* owned, 64-byte aligned */
};

/* The fewest rows from which a step takes an int8 tile kernel where there is one: below,
 * one tile would hold mostly padding rows. dispatch.c may start a type's tiles further up,
 * where the vector kernel is faster; every tile kernel gives the twin's bits from here (the
 * tests call them from here), so the choice never shows. */
enum { QP_TILE_MIN_M = 16 };

/* The unsigned integer stored for weight (n, e) of a unit (n < 16, e < blk). */
static inline int qpack_u(const simd_qpack *p, const uint8_t *unit, int n, int e)
{
    int r = e / 4, i = e % 4;
    if (p->bits == 8)
        return unit[(size_t)r * 64 + n * 4 + i];
    int half = p->blk / 8;
    int byte = unit[(size_t)(r % half) * 64 + n * 4 + i];
    int u = r < half ? byte & 15 : byte >> 4;
    const uint64_t *hi = (const uint64_t *)(unit + p->off_hi);
    for (int t = 0; t < p->bits - 4; t++)
        u |= (int)((hi[(size_t)t * (p->blk / 4) + r] >> (4 * n + i)) & 1) << (4 + t);
    return u;
}

static inline const uint8_t *qpack_unit(const simd_qpack *p, int group, int b)
{
    return p->data + ((size_t)group * p->n_blk + b) * p->unit_bytes;
}

/* What the tile kernels may use here, asked once (dispatch.c): int8 and bf16 tiles, and
 * AVX-512 VBMI beside them (the Q4_K tiles' vpermi2b). */
enum { QP_CAP_INT8 = 1, QP_CAP_BF16 = 2, QP_CAP_VBMI = 4 };
int qpack_amx_caps(void);

/* F16 / BF16 packs (ref/qpack_bf16.c): one unit per 16-row group and 32 elements of K,
 * uint16 bf16 [16][16][2]: q[r][n][i] = weight (n, 32 b + 2r + i), for F16 its hi, then
 * the same for its lo (a unit of 2048 bytes); no scales. */
simd_qpack *qpack_bf16_make(const simd_qmat *w);
void qpack_bf16_gemm_ref(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end);
/* p = a header over a pack simd_qpack_f32_make made at pack (qpack.h), data borrowed. */
void qpack_f32_view(simd_qpack *p, const void *pack, int N, int K);

/* Every tile kernel that can run p here (dispatch.c), the one simd_qmat_plan() takes
 * first, into fns (2 at most); how many. Q4_K has two (with and without VBMI) where the
 * CPU has VBMI, for the tests. */
int qpack_tile_kernels(const simd_qpack *p, simd_qpack_fn fns[2]);

/* The vector kernel on int8-type packs (avx512vnni/), built with TS_HAVE_AVX512VNNI: the
 * twin's results for any M. */
void simd_vnni_qpack_gemm(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                          float beta, int n_begin, int n_end);

/* The tile kernels (amx/), built only with TS_HAVE_AMX: 8-bit packs, Q4_K packs (the
 * first with AVX-512 VBMI, the second without: the same bits), Q6_K packs, bf16 packs. */
void simd_amx_qpack_gemm_q4k(float *out, size_t ldo, const void *xq, const simd_qpack *p,
                             int M, float beta, int n_begin, int n_end);
void simd_amx_qpack_gemm_q4k_bw(float *out, size_t ldo, const void *xq, const simd_qpack *p,
                                int M, float beta, int n_begin, int n_end);
void simd_amx_qpack_gemm_q6k(float *out, size_t ldo, const void *xq, const simd_qpack *p,
                             int M, float beta, int n_begin, int n_end);
void simd_amx_qpack_gemm(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end);
void simd_amx_qpack_gemm_bf16(float *out, size_t ldo, const void *xq, const simd_qpack *p,
                              int M, float beta, int n_begin, int n_end);

#endif
