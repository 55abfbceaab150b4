/* qgemm_amx.c: the GEMM on packed quantized weights with AMX int8 tiles (TDPBSSD), the
 * block scales applied with AVX-512 exactly as the twin in ref/qpack.c applies them.
 *
 * Work goes in blocks of two 16-row weight groups x two 16-row tiles of activations (four
 * independent tile products in flight; a lone group or tile where the shape ends). Each
 * sub-block j of each activation block is one tile product C (16 x 16 int32) = A (16
 * activation rows x sub int8) . B (sub x 16 weight rows, VNNI order). C goes to memory
 * and is folded into the block's integer sum with the sub-block scales (vpmulld: exact),
 * then into the f32 accumulator with the block scales. */
#include <immintrin.h>
#include <string.h>

#include "../qpack_internal.h"

typedef struct tile_cfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

/* Tiles of a 2 x 2 block: C[i][h] = 2i + h (activation tile i, weight group h), A[i] =
 * 4 + i, B[h] = 6 + h; activation tile i has mr[i] rows, sub-blocks have sub elements. */
static void cfg_load(const int mr[2], int sub)
{
    tile_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 2; i++) {
        int rows = mr[i] > 0 ? mr[i] : 1;
        c.rows[2 * i] = c.rows[2 * i + 1] = c.rows[4 + i] = (uint8_t)rows;
        c.colsb[2 * i] = c.colsb[2 * i + 1] = QP_ROWS * 4;
        c.colsb[4 + i] = (uint16_t)sub;
        c.rows[6 + i] = (uint8_t)(sub / 4);
        c.colsb[6 + i] = QP_ROWS * 4;
    }
    _tile_loadconfig(&c);
}

/* What one 2 x 2 block works on: nm activation tiles of mr[i] rows from x0 (row stride
 * xrow), ng weight groups from g. */
typedef struct block2 {
    const simd_qpack *p;
    const uint8_t *x0;
    size_t xrow;
    int mr[2], nm, ng, g;
} block2;

/* C tiles of sub-block j of block b into cbuf[2i + h] (16 x 16 int32 each). */
static void tiles_sub(const block2 *k, int b, int j, int32_t cbuf[4][QP_ROWS][QP_ROWS])
{
    const simd_qpack *p = k->p;
    const uint8_t *xa = k->x0 + (size_t)b * p->act_blk_bytes + p->act_qs_off + (size_t)j * p->sub;
    size_t wq = (size_t)j * p->sub * QP_ROWS;
    _tile_zero(0);
    _tile_loadd(4, xa, (long)k->xrow);
    _tile_loadd(6, qpack_unit(p, k->g, b) + wq, QP_ROWS * 4);
    _tile_dpbssd(0, 4, 6);
    if (k->ng > 1) {
        _tile_zero(1);
        _tile_loadd(7, qpack_unit(p, k->g + 1, b) + wq, QP_ROWS * 4);
        _tile_dpbssd(1, 4, 7);
    }
    if (k->nm > 1) {
        _tile_zero(2);
        _tile_loadd(5, xa + QP_ROWS * k->xrow, (long)k->xrow);
        _tile_dpbssd(2, 5, 6);
        if (k->ng > 1) {
            _tile_zero(3);
            _tile_dpbssd(3, 5, 7);
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

/* acc[2i + h] (16, 16) += block b's f32 terms for activation tile i, group h, from the
 * block's integer sums isum[2i + h]. */
static void block_f32(float acc[4][QP_ROWS][QP_ROWS], int32_t isum[4][QP_ROWS][QP_ROWS],
                      const block2 *k, int b)
{
    const simd_qpack *p = k->p;
    for (int h = 0; h < k->ng; h++) {
        const uint8_t *unit = qpack_unit(p, k->g + h, b);
        __m512 dw = _mm512_load_ps((const float *)(unit + p->off_d));
        __m512 dmin = p->has_min ? _mm512_load_ps((const float *)(unit + p->off_dmin))
                                 : _mm512_setzero_ps();
        const int16_t *mn = (const int16_t *)(unit + p->off_mn);
        for (int i = 0; i < k->nm; i++) {
            float(*a)[QP_ROWS] = acc[2 * i + h];
            for (int r = 0; r < k->mr[i]; r++) {
                const uint8_t *xr =
                    k->x0 + (size_t)(QP_ROWS * i + r) * k->xrow + (size_t)b * p->act_blk_bytes;
                float dx;
                memcpy(&dx, xr, sizeof dx);
                __m512 vdx = _mm512_set1_ps(dx);
                __m512 v = _mm512_load_ps(a[r]);
                v = _mm512_fmadd_ps(_mm512_mul_ps(dw, vdx),
                                    _mm512_cvtepi32_ps(_mm512_load_si512(isum[2 * i + h][r])), v);
                if (p->has_min) {
                    const int16_t *bs = ((const qa_q8_k *)xr)->bsums;
                    __m512i ms = _mm512_setzero_si512();
                    for (int jj = 0; jj < p->n_sub / 2; jj++) {
                        uint32_t lo = (uint16_t)(bs[4 * jj] + bs[4 * jj + 1]);
                        uint32_t hi = (uint16_t)(bs[4 * jj + 2] + bs[4 * jj + 3]);
                        __m512i pair = _mm512_set1_epi32((int)(lo | hi << 16));
                        ms = _mm512_add_epi32(
                            ms, _mm512_madd_epi16(_mm512_load_si512(mn + jj * QP_ROWS * 2), pair));
                    }
                    v = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, vdx), _mm512_cvtepi32_ps(ms), v);
                }
                _mm512_store_ps(a[r], v);
            }
        }
    }
}

/* acc[2i + h] = the f32 sums of the block's activation tiles against its groups over all
 * of K. cbuf is double-buffered so one sub-block's folding overlaps the next one's tiles. */
static void block_run(float acc[4][QP_ROWS][QP_ROWS], const block2 *k)
{
    const simd_qpack *p = k->p;
    _Alignas(64) int32_t cbuf[2][4][QP_ROWS][QP_ROWS];
    _Alignas(64) int32_t isum[4][QP_ROWS][QP_ROWS];
    memset(acc, 0, sizeof(float) * 4 * QP_ROWS * QP_ROWS);
    for (int b = 0; b < p->n_blk; b++) {
        if (p->n_sub == 1) {
            tiles_sub(k, b, 0, isum);
        } else {
            memset(isum, 0, sizeof isum);
            for (int j = 0; j < p->n_sub; j++) {
                int32_t(*c)[QP_ROWS][QP_ROWS] = cbuf[j & 1];
                tiles_sub(k, b, j, c);
                for (int h = 0; h < k->ng; h++) {
                    const uint8_t *unit = qpack_unit(p, k->g + h, b);
                    __m512i sc = _mm512_cvtepi8_epi32(_mm_load_si128(
                        (const __m128i *)(unit + p->off_sc + (size_t)j * QP_ROWS)));
                    for (int i = 0; i < k->nm; i++)
                        for (int r = 0; r < k->mr[i]; r++) {
                            int32_t *s = isum[2 * i + h][r];
                            __m512i prod = _mm512_mullo_epi32(
                                _mm512_load_si512(c[2 * i + h][r]), sc);
                            _mm512_store_si512(s, _mm512_add_epi32(_mm512_load_si512(s), prod));
                        }
                }
            }
        }
        block_f32(acc, isum, k, b);
    }
}

void simd_amx_qpack_gemm(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end)
{
    if (M <= 0 || n_begin >= n_end)
        return;
    _Alignas(64) float acc[4][QP_ROWS][QP_ROWS];
    size_t xrow = (size_t)p->n_blk * p->act_blk_bytes;
    __m512 vbeta = _mm512_set1_ps(beta);
    int cur[2] = {0, 0};
    int g_end = (n_end + QP_ROWS - 1) / QP_ROWS;
    for (int g = n_begin / QP_ROWS; g < g_end; g += 2) {
        for (int m0 = 0; m0 < M; m0 += 2 * QP_ROWS) {
            block2 k = {.p = p, .x0 = (const uint8_t *)xq + (size_t)m0 * xrow, .xrow = xrow,
                        .g = g, .ng = g + 1 < g_end ? 2 : 1};
            k.mr[0] = M - m0 < QP_ROWS ? M - m0 : QP_ROWS;
            k.mr[1] = M - m0 - QP_ROWS;
            k.mr[1] = k.mr[1] < 0 ? 0 : k.mr[1] > QP_ROWS ? QP_ROWS : k.mr[1];
            k.nm = k.mr[1] > 0 ? 2 : 1;
            if (k.mr[0] != cur[0] || k.mr[1] != cur[1]) {
                cfg_load(k.mr, p->sub);
                cur[0] = k.mr[0], cur[1] = k.mr[1];
            }
            block_run(acc, &k);
            for (int h = 0; h < k.ng; h++) {
                int n0 = (g + h) * QP_ROWS;
                int lo = n_begin > n0 ? n_begin - n0 : 0;
                int hi = n_end < n0 + QP_ROWS ? n_end - n0 : QP_ROWS;
                __mmask16 mask = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
                for (int i = 0; i < k.nm; i++)
                    for (int r = 0; r < k.mr[i]; r++) {
                        float *o = out + (size_t)(m0 + QP_ROWS * i + r) * ldo + n0;
                        __m512 a = _mm512_load_ps(acc[2 * i + h][r]);
                        if (beta != 0.0f)
                            a = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(mask, o), a);
                        _mm512_mask_storeu_ps(o, mask, a);
                    }
            }
        }
    }
    _tile_release();
}
