/* qpack.c: the GEMM on the int8-type packs (qpack_internal.h) with AVX-512 VNNI, for any
 * number of activation rows. A unit's B-row (16 weight rows x 4 elements, one 64-byte
 * vector of unsigned integers) times 4 activations broadcast is one vpdpbusd, whose 16
 * lanes are the 16 rows' sums: no horizontal sums, and the unpacking of 4-6 bit weights is
 * done once for all the rows of a tile. Sub-block sums are scaled with vpmulld (exact
 * integers), then each block's float terms are applied lane by lane in the twin's order,
 * so the results are the twin's bits (ref/qpack.c). */
#include <immintrin.h>
#include <string.h>

#include "../qpack_x86.h"

#define ALWAYS_INLINE QP_INLINE
/* Whether a pack of BITS has minimums (ref/qpack.c: Q4_K's 4 and Q5_K's 5): a constant for
 * the 8-bit packs, whose kernel then carries no minimum code (on a 2-core AMD EPYC, 16 to
 * 256 rows, 10-23% faster than testing p->has_min), but tested at run time for the 4-6
 * bit ones: as a constant there Q6_K's 16-64 rows ran 5-10% slower (other code, the same
 * work). */
#define QP_BITS_MIN(BITS, p) ((BITS) == 8 ? false : (p)->has_min)


enum {
    VQ_MR = 4,      /* activation rows a tile on 4-6 bit packs that sums sub-blocks in pairs
                     * (low and high nibbles): 4 x (2 int sums + isum + acc) registers */
    VQ_MR_WIDE = 8, /* the most rows a tile: 8-bit packs (8 x (int sum + acc)) and 4-6 bit
                     * tiles of 5 or more rows, which sum one sub-block at a time
                     * (8 x (int sum + isum + acc)) */
    VQ_ROW_BLOCK = 32, /* activation rows a block: 75-205 KB of Q8_K blocks at K 2048-5632 */
};

/* c + the 16 lanes' dot products of w's unsigned bytes with the 4 signed activations at
 * x, broadcast as the instruction's own memory operand ({1to16}): one micro-fused uop
 * where the intrinsic on _mm512_set1_epi32 takes a broadcast load beside it (GCC does not
 * fold the broadcast into vpdpbusd). */
ALWAYS_INLINE __m512i dpbusd_x4(__m512i c, __m512i w, const int8_t *x)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(c) : "v"(w), "m"(*(const int32_t *)x));
    return c;
}

/* The 64 B-rows of a 4-6 bit unit as unsigned bytes (unit_unpack), for the tiles of rows
 * after the first to read from L1 instead of unpacking the unit again. */
typedef uint8_t vq_brows[QK_K / 4][64];

/* ub = unit's B-rows, prefetching QP_PF ahead as unit_isum does. */
ALWAYS_INLINE void unit_unpack(vq_brows ub, const simd_qpack *p, const uint8_t *unit,
                               const int BITS)
{
#pragma GCC unroll 8
    for (int r = 0; r < 32; r++) {
        __m512i lo, hi;
        qp_brows(p, unit, r, &lo, &hi, BITS);
        qp_prefetch(unit + 128 * r);
        qp_prefetch(unit + 128 * r + 64);
        _mm512_store_si512(ub[r], lo);
        _mm512_store_si512(ub[r + 32], hi);
    }
}

/* isum[m] of one unit (qpack_internal.h) for MR activation rows; xb[m] is row m's
 * activation block. BITS: p->bits, a constant. A 4-6 bit unit's B-rows come from ub where
 * it is given (unit_unpack's), else they are unpacked here. */
ALWAYS_INLINE void unit_isum(__m512i *isum, const simd_qpack *p, const uint8_t *unit,
                             vq_brows ub, const uint8_t *const *xb, const int BITS, const int MR)
{
    if (BITS == 8) { /* 8 B-rows, one block of 32, u = q + off */
        const int8_t *x[VQ_MR_WIDE];
        __m512i c[VQ_MR_WIDE];
#pragma GCC unroll 8
        for (int m = 0; m < MR; m++)
            x[m] = (const int8_t *)(xb[m] + offsetof(qa_q8_32, qs)), c[m] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            __m512i w = _mm512_load_si512(unit + 64 * r);
            qp_prefetch(unit + 64 * r);
#pragma GCC unroll 8
            for (int m = 0; m < MR; m++)
                c[m] = dpbusd_x4(c[m], w, x[m] + 4 * r);
        }
#pragma GCC unroll 8
        for (int m = 0; m < MR; m++)
            isum[m] = _mm512_sub_epi32(
                c[m], _mm512_set1_epi32(p->off * ((const qa_q8_32 *)xb[m])->sum));
        return;
    }
    /* 256 elements in nibbles: byte row t holds B-rows t (low) and t + 32 (high) */
    const int8_t *x[VQ_MR_WIDE];
    const int16_t *bs[VQ_MR_WIDE];
#pragma GCC unroll 8
    for (int m = 0; m < MR; m++) {
        x[m] = ((const qa_q8_k *)xb[m])->qs;
        bs[m] = ((const qa_q8_k *)xb[m])->bsums;
        isum[m] = _mm512_setzero_si512();
    }
    const int RS = BITS == 6 ? 4 : 8; /* B-rows a sub-block: 16 or 32 elements */
    if (MR > VQ_MR) {
        /* The low nibbles' sub-blocks, then the high nibbles', one sum a row: half the
         * registers of the pairs below, so tiles of up to 8 rows unpack (or load) each
         * B-row once for twice the rows; with 4 rows or fewer the pairs are faster. The
         * sum of the same integer terms: the same isum. Q5_K and Q6_K tiles of more than
         * 4 rows come only from group_run_shared, with ub. */
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            for (int j = 0; j < 32 / RS; j++) {
                int jj = j + h * (32 / RS);
                __m512i c[VQ_MR_WIDE];
#pragma GCC unroll 8
                for (int m = 0; m < MR; m++)
                    c[m] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int r = j * RS; r < (j + 1) * RS; r++) {
                    __m512i w; /* B-row r + 32 h: from ub, or unpacked from a Q4_K unit */
                    if (BITS == 4 && !ub) {
                        __m512i v = _mm512_load_si512(unit + 64 * r);
                        w = _mm512_and_si512(h ? _mm512_srli_epi16(v, 4) : v,
                                             _mm512_set1_epi8(0x0F));
                        if (!h) { /* as unit_unpack prefetches */
                            qp_prefetch(unit + 128 * r);
                            qp_prefetch(unit + 128 * r + 64);
                        }
                    } else {
                        w = _mm512_load_si512(ub[r + 32 * h]);
                    }
#pragma GCC unroll 8
                    for (int m = 0; m < MR; m++)
                        c[m] = dpbusd_x4(c[m], w, x[m] + 128 * h + 4 * r);
                }
                __m512i sc = qp_scales(p, unit, jj);
#pragma GCC unroll 8
                for (int m = 0; m < MR; m++) {
                    if (BITS == 6) /* u = q + 32 over 16 elements: less 32 times their sum */
                        c[m] = _mm512_sub_epi32(c[m], _mm512_set1_epi32(32 * bs[m][jj]));
                    isum[m] = _mm512_add_epi32(isum[m], _mm512_mullo_epi32(c[m], sc));
                }
            }
        }
        return;
    }
    for (int j = 0; j < 32 / RS; j++) { /* sub-blocks j (low nibbles) and j + 32 / RS (high) */
        __m512i clo[VQ_MR_WIDE], chi[VQ_MR_WIDE];
#pragma GCC unroll 8
        for (int m = 0; m < MR; m++)
            clo[m] = chi[m] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int r = j * RS; r < (j + 1) * RS; r++) {
            __m512i lo, hi;
            if (ub) {
                lo = _mm512_load_si512(ub[r]);
                hi = _mm512_load_si512(ub[r + 32]);
            } else {
                qp_brows(p, unit, r, &lo, &hi, BITS);
                qp_prefetch(unit + 128 * r);
                qp_prefetch(unit + 128 * r + 64);
            }
#pragma GCC unroll 8
            for (int m = 0; m < MR; m++) {
                clo[m] = dpbusd_x4(clo[m], lo, x[m] + 4 * r);
                chi[m] = dpbusd_x4(chi[m], hi, x[m] + 128 + 4 * r);
            }
        }
        int jh = j + 32 / RS;
        __m512i slo = qp_scales(p, unit, j), shi = qp_scales(p, unit, jh);
#pragma GCC unroll 8
        for (int m = 0; m < MR; m++) {
            if (BITS == 6) { /* u = q + 32 over 16 elements: less 32 times their sum */
                clo[m] = _mm512_sub_epi32(clo[m], _mm512_set1_epi32(32 * bs[m][j]));
                chi[m] = _mm512_sub_epi32(chi[m], _mm512_set1_epi32(32 * bs[m][jh]));
            }
            isum[m] = _mm512_add_epi32(isum[m], _mm512_add_epi32(_mm512_mullo_epi32(clo[m], slo),
                                                                 _mm512_mullo_epi32(chi[m], shi)));
        }
    }
}

/* xb[m] = activation block b of row m from x0 (xrow bytes apart), and isum[m] the unit's
 * integer sums against them, for MR rows (ub: as unit_isum). */
ALWAYS_INLINE void block_isum(__m512i *isum, const uint8_t **xb, const uint8_t *x0, size_t xrow,
                              int b, const simd_qpack *p, const uint8_t *unit, vq_brows ub,
                              const int BITS, const int MR)
{
#pragma GCC unroll 8
    for (int m = 0; m < MR; m++)
        xb[m] = x0 + (size_t)m * xrow + (size_t)b * p->act_blk_bytes;
    unit_isum(isum, p, unit, ub, xb, BITS, MR);
}

/* MR activation rows from x0 (xrow bytes apart) against groups [g0, g1), the columns of
 * [n_begin, n_end) stored. */
ALWAYS_INLINE void rows_run(float *out, size_t ldo, const uint8_t *x0, size_t xrow,
                            const simd_qpack *p, float beta, int n_begin, int n_end,
                            const int BITS, const int MR)
{
    for (int g = n_begin / QP_ROWS; g * QP_ROWS < n_end; g++) {
        __m512 acc[VQ_MR_WIDE];
#pragma GCC unroll 8
        for (int m = 0; m < MR; m++)
            acc[m] = _mm512_setzero_ps();
        const uint8_t *unit = qpack_unit(p, g, 0);
        for (int b = 0; b < p->n_blk; b++, unit += p->unit_bytes) {
            const uint8_t *xb[VQ_MR_WIDE];
            __m512i isum[VQ_MR_WIDE];
            block_isum(isum, xb, x0, xrow, b, p, unit, NULL, BITS, MR);
            qp_terms t;
            qp_unit_terms(&t, p, unit, QP_BITS_MIN(BITS, p));
#pragma GCC unroll 8
            for (int m = 0; m < MR; m++)
                acc[m] = qp_f32_row(acc[m], isum[m], &t, xb[m], QP_BITS_MIN(BITS, p));
        }
        __mmask16 mask = qp_group_mask(g, n_begin, n_end);
#pragma GCC unroll 8
        for (int m = 0; m < MR; m++)
            qp_store_row(out + (size_t)m * ldo + (size_t)g * QP_ROWS, acc[m], mask, beta);
    }
}

/* The most activation rows a tile_run tile of p takes: VQ_MR_WIDE on 8- and 4-bit packs,
 * VQ_MR on Q5_K and Q6_K (their wider tiles read a unit unpacked once, group_run_shared). */
static int tile_rows(const simd_qpack *p)
{
    return p->bits == 4 || p->bits == 8 ? VQ_MR_WIDE : VQ_MR;
}

/* One tile of mr rows from x0 against the columns [n_begin, n_end): the instance of
 * rows_run for the pack's bits and mr (1 to tile_rows(p)). */
static void tile_run(float *o, size_t ldo, const uint8_t *x0, size_t xrow, const simd_qpack *p,
                     float beta, int n_begin, int n_end, int mr)
{
#define VQ_RUN(BITS, MR) rows_run(o, ldo, x0, xrow, p, beta, n_begin, n_end, BITS, MR)
#define VQ_BITS(BITS)                  \
    switch (mr) {                      \
    case 1: VQ_RUN(BITS, 1); break;    \
    case 2: VQ_RUN(BITS, 2); break;    \
    case 3: VQ_RUN(BITS, 3); break;    \
    default: VQ_RUN(BITS, 4); break;   \
    }
#define VQ_BITS_WIDE(BITS)                  \
    if (mr <= VQ_MR) {                      \
        VQ_BITS(BITS)                       \
    } else {                                \
        switch (mr) {                       \
        case 5: VQ_RUN(BITS, 5); break;     \
        case 6: VQ_RUN(BITS, 6); break;     \
        case 7: VQ_RUN(BITS, 7); break;     \
        default: VQ_RUN(BITS, 8); break;    \
        }                                   \
    }
    switch (p->bits) {
    case 8: VQ_BITS_WIDE(8) break;
    case 4: VQ_BITS_WIDE(4) break;
    case 5: VQ_BITS(5) break;
    default: VQ_BITS(6) break;
    }
#undef VQ_BITS_WIDE
#undef VQ_BITS
#undef VQ_RUN
}

/* acc[m] += block b's float terms for MR rows from x0, the unit's B-rows read from ub. */
ALWAYS_INLINE void tile_fold(float (*acc)[QP_ROWS], const uint8_t *x0, size_t xrow, int b,
                             const simd_qpack *p, const uint8_t *unit, vq_brows ub,
                             const int BITS, const int MR)
{
    const uint8_t *xb[VQ_MR_WIDE];
    __m512i isum[VQ_MR_WIDE];
    block_isum(isum, xb, x0, xrow, b, p, unit, ub, BITS, MR);
    qp_terms t;
    qp_unit_terms(&t, p, unit, QP_BITS_MIN(BITS, p));
#pragma GCC unroll 8
    for (int m = 0; m < MR; m++)
        _mm512_store_ps(acc[m],
                        qp_f32_row(_mm512_load_ps(acc[m]), isum[m], &t, xb[m],
                                   QP_BITS_MIN(BITS, p)));
}

/* Rows [0, rows) (rows <= VQ_ROW_BLOCK) from x0 against group g of a 4-6 bit pack, the
 * columns of [n_begin, n_end) stored: each unit is unpacked once and every tile of up to
 * VQ_MR_WIDE rows reads its B-rows from L1, the rows' float sums waiting in acc from unit to unit.
 * Unpacking is a third of a tile's vector work on Q4_K, which rows_run repeats for every
 * tile. Each row's terms are added in the same order as rows_run adds them: the same bits. */
ALWAYS_INLINE void group_run_shared(float *out, size_t ldo, const uint8_t *x0, size_t xrow,
                                    int rows, const simd_qpack *p, float beta, int g,
                                    int n_begin, int n_end, const int BITS)
{
    _Alignas(64) vq_brows ub;
    _Alignas(64) float acc[VQ_ROW_BLOCK][QP_ROWS];
    memset(acc, 0, sizeof(float) * QP_ROWS * (size_t)rows);
    const uint8_t *unit = qpack_unit(p, g, 0);
    for (int b = 0; b < p->n_blk; b++, unit += p->unit_bytes) {
        unit_unpack(ub, p, unit, BITS);
        for (int m0 = 0; m0 < rows; m0 += VQ_MR_WIDE) {
            const uint8_t *xt = x0 + (size_t)m0 * xrow;
            switch (rows - m0 < VQ_MR_WIDE ? rows - m0 : VQ_MR_WIDE) {
            case 1: tile_fold(acc + m0, xt, xrow, b, p, unit, ub, BITS, 1); break;
            case 2: tile_fold(acc + m0, xt, xrow, b, p, unit, ub, BITS, 2); break;
            case 3: tile_fold(acc + m0, xt, xrow, b, p, unit, ub, BITS, 3); break;
            case 4: tile_fold(acc + m0, xt, xrow, b, p, unit, ub, BITS, 4); break;
            case 5: tile_fold(acc + m0, xt, xrow, b, p, unit, ub, BITS, 5); break;
            case 6: tile_fold(acc + m0, xt, xrow, b, p, unit, ub, BITS, 6); break;
            case 7: tile_fold(acc + m0, xt, xrow, b, p, unit, ub, BITS, 7); break;
            default: tile_fold(acc + m0, xt, xrow, b, p, unit, ub, BITS, 8); break;
            }
        }
    }
    qp_store_rows(out + (size_t)g * QP_ROWS, ldo, (const float(*)[QP_ROWS])acc, rows,
                  qp_group_mask(g, n_begin, n_end), beta);
}

/* group_run_shared for the pack's bits (4, 5 or 6). */
static void group_shared(float *out, size_t ldo, const uint8_t *x0, size_t xrow, int rows,
                         const simd_qpack *p, float beta, int g, int n_begin, int n_end)
{
    switch (p->bits) {
    case 4: group_run_shared(out, ldo, x0, xrow, rows, p, beta, g, n_begin, n_end, 4); break;
    case 5: group_run_shared(out, ldo, x0, xrow, rows, p, beta, g, n_begin, n_end, 5); break;
    default: group_run_shared(out, ldo, x0, xrow, rows, p, beta, g, n_begin, n_end, 6); break;
    }
}

void simd_vnni_qpack_gemm(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                          float beta, int n_begin, int n_end)
{
    if (M <= 0 || n_begin >= n_end)
        return;
    size_t xrow = (size_t)p->n_blk * p->act_blk_bytes;
    int mr = tile_rows(p);
    qp_prefetch_start(qpack_unit(p, n_begin / QP_ROWS, 0));
    /* Rows in blocks of VQ_ROW_BLOCK, and within a block group by group, every tile of
     * rows: a group's units (16 weight rows x K) are read from L1 by the block's tiles
     * after the first, and the block's activations stay in L2. With tiles outside groups,
     * each tile read the whole range's weights again from L2 or beyond. */
    for (int mb = 0; mb < M; mb += VQ_ROW_BLOCK) {
        int me = M - mb < VQ_ROW_BLOCK ? M : mb + VQ_ROW_BLOCK;
        for (int g = n_begin / QP_ROWS; g * QP_ROWS < n_end; g++) {
            int nb = g * QP_ROWS > n_begin ? g * QP_ROWS : n_begin;
            int ne = (g + 1) * QP_ROWS < n_end ? (g + 1) * QP_ROWS : n_end;
            if (p->bits >= 5 && p->bits <= 6 && me - mb > VQ_MR) { /* see group_run_shared */
                group_shared(out + (size_t)mb * ldo, ldo, (const uint8_t *)xq + (size_t)mb * xrow,
                             xrow, me - mb, p, beta, g, nb, ne);
                continue;
            }
            for (int m0 = mb; m0 < me; m0 += mr)
                tile_run(out + (size_t)m0 * ldo, ldo, (const uint8_t *)xq + (size_t)m0 * xrow,
                         xrow, p, beta, nb, ne, me - m0 < mr ? me - m0 : mr);
        }
    }
}
