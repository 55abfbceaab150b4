/* qgemm_amx_bf16.c: the GEMM on bf16 packs (F16 / BF16 weights) with AMX bf16 tiles
 * (TDPBF16PS). Weights and activations are each a hi and a lo bf16 (ref/qpack_bf16.c says
 * why); an activation tile meets two weight groups at a time, each C tile summing, per 32
 * elements of K, x hi * w hi + x lo * w hi (+ x hi * w lo for F16's lo plane) in f32 over
 * all of K, and going to memory once. No block scales. */
#include "tiles.h"

/* Tiles: 0, 1 the sums of the two weight groups; 2, 3 group 0's hi and lo, 4, 5 group 1's;
 * 6, 7 the activations' hi and lo, rows rows (1-16). */
static void bf16_tiles_config(int rows)
{
    tile_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        bool weights = t >= 2 && t <= 5;
        c.rows[t] = (uint8_t)(weights ? QP_ROWS : rows);
        c.colsb[t] = QP_ROWS * 4;
    }
    _tile_loadconfig(&c);
}

void simd_amx_qpack_gemm_bf16(float *out, size_t ldo, const void *xq, const simd_qpack *p,
                              int M, float beta, int n_begin, int n_end)
{
    if (M <= 0 || n_begin >= n_end)
        return;
    _Alignas(64) float acc[2][QP_ROWS][QP_ROWS];
    enum { PLANE = QP_ROWS * 64 }; /* bytes of a unit's hi plane; its lo plane follows */
    bool w_lo = p->unit_bytes == 2 * PLANE;
    size_t xrow = (size_t)p->K * 4; /* a row's hi K bf16, then its lo K */
    int cur = 0;
    int g_end = (n_end + QP_ROWS - 1) / QP_ROWS;
    for (int g = n_begin / QP_ROWS; g < g_end; g += 2) {
        int ng = g + 1 < g_end ? 2 : 1;
        for (int m0 = 0; m0 < M; m0 += QP_ROWS) {
            int mr = M - m0 < QP_ROWS ? M - m0 : QP_ROWS;
            if (mr != cur) {
                bf16_tiles_config(mr);
                cur = mr;
            }
            const uint8_t *xh = (const uint8_t *)xq + (size_t)m0 * xrow, *xl = xh + xrow / 2;
            _tile_zero(0);
            _tile_zero(1);
            for (int b = 0; b < p->n_blk; b++) {
                const uint8_t *u0 = qpack_unit(p, g, b);
                if (m0 == 0)
                    for (int h = 0; h < ng; h++)
                        tiles_prefetch(p, qpack_unit(p, g + h, b));
                _tile_loadd(6, xh + (size_t)b * 64, (long)xrow);
                _tile_loadd(7, xl + (size_t)b * 64, (long)xrow);
                _tile_loadd(2, u0, 64);
                _tile_dpbf16ps(0, 6, 2);
                _tile_dpbf16ps(0, 7, 2);
                if (w_lo) {
                    _tile_loadd(3, u0 + PLANE, 64);
                    _tile_dpbf16ps(0, 6, 3);
                }
                if (ng > 1) {
                    const uint8_t *u1 = qpack_unit(p, g + 1, b);
                    _tile_loadd(4, u1, 64);
                    _tile_dpbf16ps(1, 6, 4);
                    _tile_dpbf16ps(1, 7, 4);
                    if (w_lo) {
                        _tile_loadd(5, u1 + PLANE, 64);
                        _tile_dpbf16ps(1, 6, 5);
                    }
                }
            }
            _tile_stored(0, acc[0], 64);
            _tile_stored(1, acc[1], 64);
            for (int h = 0; h < ng; h++)
                qp_store_rows(out + (size_t)m0 * ldo + (g + h) * QP_ROWS, ldo,
                              (const float(*)[QP_ROWS])acc[h], mr,
                              qp_group_mask(g + h, n_begin, n_end), beta);
        }
    }
    _tile_release();
}
