/* tiles_split.h: the loop the Q4_K and Q6_K tile kernels share (qgemm_amx_q4k.c,
 * qgemm_amx_q6k.c), which multiply 256-element blocks with per-sub-block scales without a
 * fold per sub-block. Each kernel turns a unit's weights and scales into two B operands of
 * bytes, B0 and B1 (64 B-rows each, 8 KiB), chosen so that the block's integer sum of
 * activation row m against weight row n (qpack.h) is
 *     isum = (C0 << shift) + C1,   C0 = A . B0,   C1 = A . B1
 * exactly, A being the row's 256 int8 activations: C0 and C1 accumulate in tiles over the
 * whole block (four K = 64 steps each), B1 as unsigned bytes (TDPBSUD), B0 as unsigned
 * (Q4_K) or signed bytes (Q6_K: TDPBSSD). The float terms are then added with qp_f32_row,
 * so the results are the twin's bits.
 *
 * Work goes per 16-row weight group: each block's unit is turned into its operands once,
 * then every 16-row activation tile runs against them (tiles: C0 and C1, A, and the two
 * B), its float sums kept per row in acc (up to 256 rows x 16 lanes, on the stack: longer
 * steps go in passes of 256 rows) until the group's last block. One activation tile at a
 * time, not a pair sharing the B loads: on a 16-core Xeon with AMX (16 threads, two
 * rounds) bench_qpack's Q6_K at 256 rows made 7912-9108 GOP/s against 6654-7003 with
 * pairs, TinyLlama Q4_K_M's 512-row GEMM took 219-223 ms against 243-246 (bench_layers),
 * its 16 x 512 prefill 1930-1949 tok/s against 1462-1607; one thread alone ran both the
 * same (bench_amx_parts), and pairs with their A and B loads double-buffered were no
 * faster than pairs. AVX-512 F/BW and AMX-INT8; include from the kernels' files. */
#ifndef TESSERA_SIMD_AMX_TILES_SPLIT_H
#define TESSERA_SIMD_AMX_TILES_SPLIT_H

#include "../qpack_x86.h"
#include "tiles.h"

enum { SPLIT_ROWS = 256 }; /* activation rows a pass over the groups: their sums, 16 KiB */

typedef uint8_t split_bops[2][QK_K / 4][64]; /* B0, B1 of one unit: 64 B-rows each */
typedef void (*split_operands_fn)(const simd_qpack *p, const uint8_t *unit, split_bops b);

/* What a type puts in the shared loop. */
typedef struct split_kind {
    split_operands_fn operands; /* a unit into its B0, B1 */
    int shift;                  /* isum = (C0 << shift) + C1 */
    bool b0_signed;             /* B0's bytes are signed (TDPBSSD), else unsigned (TDPBSUD) */
    bool has_min;               /* the type has minimums (qp_f32_row) */
} split_kind;

/* byte 4n + i of a B-row belongs to weight row n; within each 16-byte lane L (rows 4L ..
 * 4L + 3), vpshufb's index of that row's scale in a copy of the 16 scales */
static const _Alignas(64) uint8_t ROW_OF_BYTE[64] = {
    0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
    4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7,
    8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11,
    12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15,
};

/* Sub-block j's scales as a B-row: each byte the scale of its weight row (AVX-512 BW). */
static inline __m512i split_scales(const simd_qpack *p, const uint8_t *unit, int j)
{
    __m128i sc = _mm_loadu_si128((const __m128i *)(unit + p->off_sc + 16 * j));
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(sc), _mm512_load_si512(ROW_OF_BYTE));
}

/* C0 in tile 0, C1 in tile 1, A in 4, B0 in 6, B1 in 7, for the 16 (or fewer, as
 * configured) activation rows from xa, xrow bytes apart; cbuf[k] = Ck. */
static inline void split_tiles(const uint8_t *xa, size_t xrow, split_bops b,
                               int32_t cbuf[2][QP_ROWS][QP_ROWS], bool b0_signed)
{
    _tile_zero(0);
    _tile_zero(1);
    for (int c = 0; c < 4; c++) { /* K = 64 c .. 64 c + 63: B-rows 16 c .. 16 c + 15 */
        _tile_loadd(4, xa + 64 * c, (long)xrow);
        _tile_loadd(6, b[0][16 * c], 64);
        _tile_loadd(7, b[1][16 * c], 64);
        if (b0_signed)
            _tile_dpbssd(0, 4, 6);
        else
            _tile_dpbsud(0, 4, 6);
        _tile_dpbsud(1, 4, 7);
    }
    _tile_stored(0, cbuf[0], QP_ROWS * 4);
    _tile_stored(1, cbuf[1], QP_ROWS * 4);
}

/* Rows [0, M) of xq (M <= SPLIT_ROWS) against the groups of [n_begin, n_end). */
static inline void split_rows(float *out, size_t ldo, const uint8_t *xq, const simd_qpack *p,
                              int M, float beta, int n_begin, int n_end, const split_kind *kind)
{
    _Alignas(64) split_bops b;
    _Alignas(64) int32_t cbuf[2][QP_ROWS][QP_ROWS];
    _Alignas(64) float acc[SPLIT_ROWS][QP_ROWS];
    const __m128i shift = _mm_cvtsi32_si128(kind->shift);
    size_t xrow = (size_t)p->n_blk * p->act_blk_bytes;
    int cur = 0; /* rows of the configured activation tile */
    for (int g = n_begin / QP_ROWS; g * QP_ROWS < n_end; g++) {
        memset(acc, 0, sizeof(float) * QP_ROWS * (size_t)M);
        for (int bl = 0; bl < p->n_blk; bl++) {
            const uint8_t *unit = qpack_unit(p, g, bl);
            tiles_prefetch(p, unit);
            kind->operands(p, unit, b);
            qp_terms t;
            qp_unit_terms(&t, p, unit, kind->has_min);
            for (int m0 = 0; m0 < M; m0 += QP_ROWS) {
                int mr = M - m0 < QP_ROWS ? M - m0 : QP_ROWS;
                if (mr != cur) {
                    tiles_config((int[2]){mr, 0}, 64);
                    cur = mr;
                }
                const uint8_t *x0 = xq + (size_t)m0 * xrow + (size_t)bl * p->act_blk_bytes;
                split_tiles(x0 + p->act_qs_off, xrow, b, cbuf, kind->b0_signed);
                for (int r = 0; r < mr; r++) {
                    __m512i isum = _mm512_add_epi32(
                        _mm512_sll_epi32(_mm512_load_si512(cbuf[0][r]), shift),
                        _mm512_load_si512(cbuf[1][r]));
                    float *a = acc[m0 + r];
                    _mm512_store_ps(a, qp_f32_row(_mm512_load_ps(a), isum, &t,
                                                  x0 + (size_t)r * xrow, kind->has_min));
                }
            }
        }
        qp_store_rows(out + (size_t)g * QP_ROWS, ldo, (const float(*)[QP_ROWS])acc, M,
                      qp_group_mask(g, n_begin, n_end), beta);
    }
}

/* The qpack_gemm_fn contract (qpack.h) on a pack of kind's type. */
static inline void split_gemm(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                              float beta, int n_begin, int n_end, const split_kind *kind)
{
    if (M <= 0 || n_begin >= n_end)
        return;
    size_t xrow = (size_t)p->n_blk * p->act_blk_bytes;
    for (int m0 = 0; m0 < M; m0 += SPLIT_ROWS) /* rows are independent: the same bits */
        split_rows(out + (size_t)m0 * ldo, ldo, (const uint8_t *)xq + (size_t)m0 * xrow, p,
                   M - m0 < SPLIT_ROWS ? M - m0 : SPLIT_ROWS, beta, n_begin, n_end, kind);
    _tile_release();
}

#endif
