/* qgemm_amx.c: the GEMM on 8-bit packs (Q8_0, Q4_0; qpack_internal.h) with AMX int8
 * tiles, for steps of QP_TILE_MIN_M rows or more (simd_qmat_gemm takes the vector kernel
 * below that). The 4-6 bit types have their own tile kernels (Q4_K, Q6_K: tiles_split.h),
 * or none (Q5_K: a fold per sub-block made tiles no faster than the vector kernel).
 *
 * Work goes in blocks of two 16-row weight groups x two 16-row activation tiles (four
 * independent tile products in flight; a lone group or tile where the shape ends). Each
 * activation block is one tile product C (16 x 16 int32) = A (16 activation rows x 32
 * int8, signed) . B (the unit's 8 B-rows, unsigned): TDPBSUD. C goes to memory, and each
 * of its rows, less off times the activation block's sum (qa_q8_32.sum), is the block's
 * integer sum of that row against the 16 weight rows: its float terms are added with
 * qp_f32_row, so the results are the twin's bits. */
#include "../qpack_x86.h"
#include "tiles.h"

/* What one 2 x 2 block works on: nm activation tiles of mr[i] rows from x0 (row stride
 * xrow), ng weight groups from g. */
typedef struct block2 {
    const simd_qpack *p;
    const uint8_t *x0;
    size_t xrow;
    int mr[2], nm, ng, g;
    bool first; /* the groups' first pass: their units come from memory, so prefetch */
} block2;

/* C tiles of block b into cbuf[2i + h] (16 x 16 int32 each). */
static void tiles_block(const block2 *k, int b, int32_t cbuf[4][QP_ROWS][QP_ROWS])
{
    const simd_qpack *p = k->p;
    const uint8_t *xa = k->x0 + (size_t)b * p->act_blk_bytes + p->act_qs_off;
    _tile_zero(0);
    _tile_loadd(4, xa, (long)k->xrow);
    _tile_loadd(6, qpack_unit(p, k->g, b), 64);
    _tile_dpbsud(0, 4, 6);
    if (k->ng > 1) {
        _tile_zero(1);
        _tile_loadd(7, qpack_unit(p, k->g + 1, b), 64);
        _tile_dpbsud(1, 4, 7);
    }
    if (k->nm > 1) {
        _tile_zero(2);
        _tile_loadd(5, xa + QP_ROWS * k->xrow, (long)k->xrow);
        _tile_dpbsud(2, 5, 6);
        if (k->ng > 1) {
            _tile_zero(3);
            _tile_dpbsud(3, 5, 7);
        }
    }
    _tile_stored(0, cbuf[0], QP_ROWS * 4);
    if (k->ng > 1)
        _tile_stored(1, cbuf[1], QP_ROWS * 4);
    if (k->nm > 1) {
        _tile_stored(2, cbuf[2], QP_ROWS * 4);
        if (k->ng > 1)
            _tile_stored(3, cbuf[3], QP_ROWS * 4);
    }
}

/* acc[2i + h] = the f32 sums of the block's activation tiles against its groups over all
 * of K. */
static void block_run(float acc[4][QP_ROWS][QP_ROWS], const block2 *k)
{
    const simd_qpack *p = k->p;
    _Alignas(64) int32_t cbuf[4][QP_ROWS][QP_ROWS];
    memset(acc, 0, sizeof(float) * 4 * QP_ROWS * QP_ROWS);
    for (int b = 0; b < p->n_blk; b++) {
        if (k->first)
            for (int h = 0; h < k->ng; h++)
                tiles_prefetch(p, qpack_unit(p, k->g + h, b));
        tiles_block(k, b, cbuf);
        for (int h = 0; h < k->ng; h++) {
            const uint8_t *unit = qpack_unit(p, k->g + h, b);
            qp_terms t;
            qp_unit_terms(&t, p, unit, false); /* 8-bit packs: no minimums */
            for (int i = 0; i < k->nm; i++)
                for (int r = 0; r < k->mr[i]; r++) {
                    int m = QP_ROWS * i + r;
                    const uint8_t *xb = k->x0 + (size_t)m * k->xrow + (size_t)b * p->act_blk_bytes;
                    __m512i isum = _mm512_sub_epi32(
                        _mm512_load_si512(cbuf[2 * i + h][r]),
                        _mm512_set1_epi32(p->off * ((const qa_q8_32 *)xb)->sum));
                    __m512 a = _mm512_load_ps(acc[2 * i + h][r]);
                    _mm512_store_ps(acc[2 * i + h][r], qp_f32_row(a, isum, &t, xb, false));
                }
        }
    }
}

void simd_amx_qpack_gemm(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end)
{
    if (M <= 0 || n_begin >= n_end)
        return;
    _Alignas(64) float acc[4][QP_ROWS][QP_ROWS];
    size_t xrow = (size_t)p->n_blk * p->act_blk_bytes;
    int cur[2] = {0, 0};
    int g_end = (n_end + QP_ROWS - 1) / QP_ROWS;
    for (int g = n_begin / QP_ROWS; g < g_end; g += 2) {
        int ng = g + 1 < g_end ? 2 : 1;
        for (int m0 = 0; m0 < M; m0 += 2 * QP_ROWS) {
            block2 k = {.p = p, .x0 = (const uint8_t *)xq + (size_t)m0 * xrow, .xrow = xrow,
                        .g = g, .ng = ng, .first = m0 == 0};
            k.mr[0] = M - m0 < QP_ROWS ? M - m0 : QP_ROWS;
            k.mr[1] = M - m0 - QP_ROWS;
            k.mr[1] = k.mr[1] < 0 ? 0 : k.mr[1] > QP_ROWS ? QP_ROWS : k.mr[1];
            k.nm = k.mr[1] > 0 ? 2 : 1;
            if (k.mr[0] != cur[0] || k.mr[1] != cur[1]) {
                tiles_config(k.mr, QK_32);
                cur[0] = k.mr[0], cur[1] = k.mr[1];
            }
            block_run(acc, &k);
            for (int h = 0; h < ng; h++)
                for (int i = 0; i < k.nm; i++)
                    qp_store_rows(out + (size_t)(m0 + QP_ROWS * i) * ldo + (g + h) * QP_ROWS,
                                  ldo, (const float(*)[QP_ROWS])acc[2 * i + h], k.mr[i],
                                  qp_group_mask(g + h, n_begin, n_end), beta);
        }
    }
    _tile_release();
}
