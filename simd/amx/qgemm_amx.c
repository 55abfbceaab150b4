/* qgemm_amx.c: the GEMM on packed quantized weights with AMX int8 tiles (TDPBSSD), the
 * block scales applied with AVX-512 exactly as the twin in ref/qpack.c applies them.
 *
 * For each 16-row weight group and each 16-row tile of activations, each sub-block j of
 * each activation block is one tile product C (16 x 16 int32) = A (16 activation rows x
 * sub int8) . B (sub x 16 weight rows, VNNI order). C goes to memory and is folded into
 * the block's integer sum with the sub-block scales (vpmulld: exact), then into the f32
 * accumulator with the block scales. Tiles: 0 = C, 1 = A, 2 = B. */
#include <immintrin.h>
#include <string.h>

#include "../qpack_internal.h"

typedef struct tile_cfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

/* Tiles for mr activation rows and sub-blocks of sub elements. */
static void cfg_load(int mr, int sub)
{
    tile_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = (uint8_t)mr;
    c.colsb[0] = QP_ROWS * 4;
    c.rows[1] = (uint8_t)mr;
    c.colsb[1] = (uint16_t)sub;
    c.rows[2] = (uint8_t)(sub / 4);
    c.colsb[2] = QP_ROWS * 4;
    _tile_loadconfig(&c);
}

/* acc (16, 16) = the f32 sums of activation rows [0, mr) at x0 (row stride xrow) against
 * weight group g. Rows mr .. 15 of acc hold nothing of use. */
static void group_tile(float acc[QP_ROWS][QP_ROWS], int32_t cbuf[QP_ROWS][QP_ROWS],
                       const uint8_t *x0, size_t xrow, int mr, const simd_qpack *p, int g)
{
    for (int r = 0; r < QP_ROWS; r++)
        _mm512_store_ps(acc[r], _mm512_setzero_ps());
    for (int b = 0; b < p->n_blk; b++) {
        const uint8_t *unit = qpack_unit(p, g, b);
        const uint8_t *xb = x0 + (size_t)b * p->act_blk_bytes;
        const uint8_t *xa = xb + p->act_qs_off;
        __m512i isum[QP_ROWS];
        for (int r = 0; r < QP_ROWS; r++)
            isum[r] = _mm512_setzero_si512();
        for (int j = 0; j < p->n_sub; j++) {
            _tile_zero(0);
            _tile_loadd(1, xa + (size_t)j * p->sub, (long)xrow);
            _tile_loadd(2, unit + (size_t)j * p->sub * QP_ROWS, QP_ROWS * 4);
            _tile_dpbssd(0, 1, 2);
            _tile_stored(0, cbuf, QP_ROWS * 4);
            if (p->n_sub == 1) {
                for (int r = 0; r < QP_ROWS; r++)
                    isum[r] = _mm512_load_si512(cbuf[r]);
            } else {
                __m512i sc = _mm512_cvtepi8_epi32(
                    _mm_load_si128((const __m128i *)(unit + p->off_sc + (size_t)j * QP_ROWS)));
                for (int r = 0; r < QP_ROWS; r++)
                    isum[r] = _mm512_add_epi32(
                        isum[r], _mm512_mullo_epi32(_mm512_load_si512(cbuf[r]), sc));
            }
        }
        __m512 dw = _mm512_load_ps((const float *)(unit + p->off_d));
        __m512 dmin = p->has_min ? _mm512_load_ps((const float *)(unit + p->off_dmin))
                                 : _mm512_setzero_ps();
        for (int r = 0; r < mr; r++) {
            const uint8_t *xr = xb + (size_t)r * xrow;
            float dx;
            memcpy(&dx, xr, sizeof dx);
            __m512 vdx = _mm512_set1_ps(dx);
            __m512 a = _mm512_load_ps(acc[r]);
            a = _mm512_fmadd_ps(_mm512_mul_ps(dw, vdx), _mm512_cvtepi32_ps(isum[r]), a);
            if (p->has_min) {
                const int16_t *bs = ((const qa_q8_k *)xr)->bsums;
                const int16_t *mn = (const int16_t *)(unit + p->off_mn);
                __m512i ms = _mm512_setzero_si512();
                for (int jj = 0; jj < p->n_sub / 2; jj++) {
                    uint32_t lo = (uint16_t)(bs[4 * jj] + bs[4 * jj + 1]);
                    uint32_t hi = (uint16_t)(bs[4 * jj + 2] + bs[4 * jj + 3]);
                    __m512i pair = _mm512_set1_epi32((int)(lo | hi << 16));
                    ms = _mm512_add_epi32(
                        ms, _mm512_madd_epi16(_mm512_load_si512(mn + jj * QP_ROWS * 2), pair));
                }
                a = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, vdx), _mm512_cvtepi32_ps(ms), a);
            }
            _mm512_store_ps(acc[r], a);
        }
    }
}

void simd_amx_qpack_gemm(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end)
{
    if (M <= 0 || n_begin >= n_end)
        return;
    _Alignas(64) float acc[QP_ROWS][QP_ROWS];
    _Alignas(64) int32_t cbuf[QP_ROWS][QP_ROWS];
    memset(cbuf, 0, sizeof cbuf); /* rows past a short tile are read, never used */
    size_t xrow = (size_t)p->n_blk * p->act_blk_bytes;
    __m512 vbeta = _mm512_set1_ps(beta);
    int cur_mr = 0;
    for (int g = n_begin / QP_ROWS; g * QP_ROWS < n_end; g++) {
        int n0 = g * QP_ROWS;
        int lo = n_begin > n0 ? n_begin - n0 : 0;
        int hi = n_end < n0 + QP_ROWS ? n_end - n0 : QP_ROWS;
        __mmask16 mask = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
        for (int m0 = 0; m0 < M; m0 += QP_ROWS) {
            int mr = M - m0 < QP_ROWS ? M - m0 : QP_ROWS;
            if (mr != cur_mr) {
                cfg_load(mr, p->sub);
                cur_mr = mr;
            }
            group_tile(acc, cbuf, (const uint8_t *)xq + (size_t)m0 * xrow, xrow, mr, p, g);
            for (int r = 0; r < mr; r++) {
                float *o = out + (size_t)(m0 + r) * ldo + n0;
                __m512 a = _mm512_load_ps(acc[r]);
                if (beta != 0.0f)
                    a = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(mask, o), a);
                _mm512_mask_storeu_ps(o, mask, a);
            }
        }
    }
    _tile_release();
}
