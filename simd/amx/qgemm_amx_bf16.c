/* qgemm_amx_bf16.c: the GEMM on bf16 packs (F16 / BF16 weights) with AMX bf16 tiles
 * (TDPBF16PS). No block scales: the four C tiles of a 2 x 2 block (two 16-row weight
 * groups x two 16-row activation tiles) accumulate in f32 over all of K and go to memory
 * once. */
#include "tiles.h"

void simd_amx_qpack_gemm_bf16(float *out, size_t ldo, const void *xq, const simd_qpack *p,
                              int M, float beta, int n_begin, int n_end)
{
    if (M <= 0 || n_begin >= n_end)
        return;
    _Alignas(64) float acc[4][QP_ROWS][QP_ROWS];
    size_t xrow = (size_t)p->K * 2;
    int cur[2] = {0, 0};
    int g_end = (n_end + QP_ROWS - 1) / QP_ROWS;
    for (int g = n_begin / QP_ROWS; g < g_end; g += 2) {
        int ng = g + 1 < g_end ? 2 : 1;
        for (int m0 = 0; m0 < M; m0 += 2 * QP_ROWS) {
            int mr[2] = {M - m0 < QP_ROWS ? M - m0 : QP_ROWS, M - m0 - QP_ROWS};
            mr[1] = mr[1] < 0 ? 0 : mr[1] > QP_ROWS ? QP_ROWS : mr[1];
            if (mr[0] != cur[0] || mr[1] != cur[1]) {
                tiles_config(mr, 64);
                cur[0] = mr[0], cur[1] = mr[1];
            }
            const uint8_t *a0 = (const uint8_t *)xq + (size_t)m0 * xrow;
            const uint8_t *a1 = a0 + QP_ROWS * xrow;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int b = 0; b < p->n_blk; b++) {
                if (m0 == 0)
                    for (int h = 0; h < ng; h++)
                        tiles_prefetch(p, qpack_unit(p, g + h, b));
                _tile_loadd(4, a0 + (size_t)b * 64, (long)xrow);
                _tile_loadd(6, qpack_unit(p, g, b), 64);
                _tile_dpbf16ps(0, 4, 6);
                if (ng > 1) {
                    _tile_loadd(7, qpack_unit(p, g + 1, b), 64);
                    _tile_dpbf16ps(1, 4, 7);
                }
                if (mr[1] > 0) {
                    _tile_loadd(5, a1 + (size_t)b * 64, (long)xrow);
                    _tile_dpbf16ps(2, 5, 6);
                    if (ng > 1)
                        _tile_dpbf16ps(3, 5, 7);
                }
            }
            _tile_stored(0, acc[0], 64);
            _tile_stored(1, acc[1], 64);
            _tile_stored(2, acc[2], 64);
            _tile_stored(3, acc[3], 64);
            for (int h = 0; h < ng; h++)
                for (int i = 0; i < 2 && mr[i] > 0; i++)
                    qp_store_rows(out + (size_t)(m0 + QP_ROWS * i) * ldo + (g + h) * QP_ROWS,
                                  ldo, (const float(*)[QP_ROWS])acc[2 * i + h], mr[i],
                                  qp_group_mask(g + h, n_begin, n_end), beta);
        }
    }
    _tile_release();
}
