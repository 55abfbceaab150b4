/* qgemm_amx.c: the GEMM on packed quantized weights with AMX int8 tiles (TDPBSSD), the
 * block scales applied with AVX-512 exactly as the twin in ref/qpack.c applies them.
 *
 * Work goes in blocks of two 16-row weight groups x two 16-row tiles of activations (four
 * independent tile products in flight; a lone group or tile where the shape ends). Each
 * sub-block j of each activation block is one tile product C (16 x 16 int32) = A (16
 * activation rows x sub int8) . B (sub x 16 weight rows, VNNI order). C goes to memory
 * and is folded into the block's integer sum with the sub-block scales (vpmulld: exact),
 * then into the f32 accumulator with the block scales. */
#include <stdlib.h>

#include "tiles.h"

/* Where a call's activations are: the caller's rows as quantize_act() made them, or (with
 * QP_ACT_REPACK) a copy made at the start of the call in the tiles' order, each A tile 16
 * rows x sub contiguous and 64-byte aligned, with each row's d and pair sums beside. */
typedef struct acts {
    const uint8_t *x;   /* the caller's rows */
    size_t xrow;        /* bytes per row there */
    uint8_t *q;         /* copy: (tiles, n_blk, n_sub, 16, sub) int8, or NULL */
    float *d;           /* copy: (tiles, n_blk, 16) */
    int32_t *bp;        /* copy: (tiles, n_blk, 16, n_sub / 2) pair sums, has_min */
} acts;

/* What one 2 x 2 block works on: nm activation tiles of mr[i] rows from tile t0, ng weight
 * groups from g. */
typedef struct block2 {
    const simd_qpack *p;
    const acts *x;
    int t0;
    int mr[2], nm, ng, g;
} block2;

/* The A tile (activation tile t0 + i, block b, sub-block j) and its row stride. */
static inline const uint8_t *a_tile(const block2 *k, int i, int b, int j, long *stride)
{
    const simd_qpack *p = k->p;
    size_t t = (size_t)k->t0 + i;
    if (k->x->q) {
        *stride = p->sub;
        return k->x->q + ((t * p->n_blk + b) * p->n_sub + j) * QP_ROWS * p->sub;
    }
    *stride = (long)k->x->xrow;
    return k->x->x + t * QP_ROWS * k->x->xrow + (size_t)b * p->act_blk_bytes + p->act_qs_off +
           (size_t)j * p->sub;
}

/* Activation row r of tile t0 + i, block b: its d, and its sums of sub-blocks (2jj, 2jj + 1)
 * as two int16 in one int32 (has_min). */
static inline float a_d(const block2 *k, int i, int r, int b)
{
    const simd_qpack *p = k->p;
    size_t t = (size_t)k->t0 + i;
    if (k->x->q)
        return k->x->d[(t * p->n_blk + b) * QP_ROWS + r];
    float d;
    memcpy(&d, k->x->x + (t * QP_ROWS + r) * k->x->xrow + (size_t)b * p->act_blk_bytes, sizeof d);
    return d;
}

static inline int32_t pair_of(const int16_t *bs, int jj)
{
    uint32_t lo = (uint16_t)(bs[4 * jj] + bs[4 * jj + 1]);
    uint32_t hi = (uint16_t)(bs[4 * jj + 2] + bs[4 * jj + 3]);
    return (int32_t)(lo | hi << 16);
}

static inline int32_t a_pair(const block2 *k, int i, int r, int b, int jj)
{
    const simd_qpack *p = k->p;
    size_t t = (size_t)k->t0 + i;
    if (k->x->q)
        return k->x->bp[((t * p->n_blk + b) * QP_ROWS + r) * (p->n_sub / 2) + jj];
    const qa_q8_k *xr = (const qa_q8_k *)(k->x->x + (t * QP_ROWS + r) * k->x->xrow +
                                          (size_t)b * p->act_blk_bytes);
    return pair_of(xr->bsums, jj);
}

#ifndef QP_ALT_C
#define QP_ALT_C 0
#endif

#if QP_ALT_C
/* One weight group at a time (ng = 1), the C tiles alternating between tiles 2i (even
 * steps, B in 6) and 2i + 1 (odd steps, B in 7), so step s + 1's products need not wait
 * for step s's stores. C tiles of step s into cbuf[2i]. */
static void tiles_step(const block2 *k, int s, int32_t cbuf[4][QP_ROWS][QP_ROWS])
{
    const simd_qpack *p = k->p;
    int b = s / p->n_sub, j = s % p->n_sub;
    const uint8_t *w = qpack_unit(p, k->g, b) + (size_t)j * p->sub * QP_ROWS;
    long s0, s1;
    const uint8_t *a0 = a_tile(k, 0, b, j, &s0);
    const uint8_t *a1 = k->nm > 1 ? a_tile(k, 1, b, j, &s1) : NULL;
    if (!(s & 1)) {
        _tile_zero(0);
        _tile_loadd(4, a0, s0);
        _tile_loadd(6, w, QP_ROWS * 4);
        _tile_dpbssd(0, 4, 6);
        if (a1) {
            _tile_zero(2);
            _tile_loadd(5, a1, s1);
            _tile_dpbssd(2, 5, 6);
        }
        _tile_stored(0, cbuf[0], QP_ROWS * 4);
        if (a1)
            _tile_stored(2, cbuf[2], QP_ROWS * 4);
    } else {
        _tile_zero(1);
        _tile_loadd(4, a0, s0);
        _tile_loadd(7, w, QP_ROWS * 4);
        _tile_dpbssd(1, 4, 7);
        if (a1) {
            _tile_zero(3);
            _tile_loadd(5, a1, s1);
            _tile_dpbssd(3, 5, 7);
        }
        _tile_stored(1, cbuf[0], QP_ROWS * 4);
        if (a1)
            _tile_stored(3, cbuf[2], QP_ROWS * 4);
    }
}
#else
/* C tiles of step s (block s / n_sub, sub-block s % n_sub) into cbuf[2i + h] (16 x 16 int32 each). */
static void tiles_step(const block2 *k, int s, int32_t cbuf[4][QP_ROWS][QP_ROWS])
{
    const simd_qpack *p = k->p;
    int b = s / p->n_sub, j = s % p->n_sub;
    size_t wq = (size_t)j * p->sub * QP_ROWS;
    long s0, s1;
    const uint8_t *a0 = a_tile(k, 0, b, j, &s0);
    _tile_zero(0);
    _tile_loadd(4, a0, s0);
    _tile_loadd(6, qpack_unit(p, k->g, b) + wq, QP_ROWS * 4);
    _tile_dpbssd(0, 4, 6);
    if (k->ng > 1) {
        _tile_zero(1);
        _tile_loadd(7, qpack_unit(p, k->g + 1, b) + wq, QP_ROWS * 4);
        _tile_dpbssd(1, 4, 7);
    }
    if (k->nm > 1) {
        const uint8_t *a1 = a_tile(k, 1, b, j, &s1);
        _tile_zero(2);
        _tile_loadd(5, a1, s1);
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

#endif

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
                __m512 vdx = _mm512_set1_ps(a_d(k, i, r, b));
                __m512 v = _mm512_load_ps(a[r]);
                v = _mm512_fmadd_ps(_mm512_mul_ps(dw, vdx),
                                    _mm512_cvtepi32_ps(_mm512_load_si512(isum[2 * i + h][r])), v);
                if (p->has_min) {
                    __m512i ms = _mm512_setzero_si512();
                    for (int jj = 0; jj < p->n_sub / 2; jj++)
                        ms = _mm512_add_epi32(
                            ms, _mm512_madd_epi16(_mm512_load_si512(mn + jj * QP_ROWS * 2),
                                                  _mm512_set1_epi32(a_pair(k, i, r, b, jj))));
                    v = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, vdx), _mm512_cvtepi32_ps(ms), v);
                }
                _mm512_store_ps(a[r], v);
            }
        }
    }
}

/* Folds the C tiles c of step s (block s / n_sub, sub-block s % n_sub) into isum with the
 * sub-block scales, and a finished block into acc. Steps come in order. */
static void fold(float acc[4][QP_ROWS][QP_ROWS], int32_t isum[4][QP_ROWS][QP_ROWS],
                 int32_t c[4][QP_ROWS][QP_ROWS], const block2 *k, int s)
{
    const simd_qpack *p = k->p;
    int b = s / p->n_sub, j = s % p->n_sub;
    if (p->n_sub == 1) {
        block_f32(acc, c, k, b);
        return;
    }
    for (int h = 0; h < k->ng; h++) {
        const uint8_t *unit = qpack_unit(p, k->g + h, b);
        __m512i sc = _mm512_cvtepi8_epi32(
            _mm_load_si128((const __m128i *)(unit + p->off_sc + (size_t)j * QP_ROWS)));
        for (int i = 0; i < k->nm; i++)
            for (int r = 0; r < k->mr[i]; r++) {
                int32_t *sum = isum[2 * i + h][r];
                __m512i prod = _mm512_mullo_epi32(_mm512_load_si512(c[2 * i + h][r]), sc);
                _mm512_store_si512(sum, j == 0 ? prod
                                               : _mm512_add_epi32(_mm512_load_si512(sum), prod));
            }
    }
    if (j == p->n_sub - 1)
        block_f32(acc, isum, k, b);
}

/* acc[2i + h] = the f32 sums of the block's activation tiles against its groups over all
 * of K. Step s's tiles are issued before step s - 1 is folded (cbuf double-buffered), so
 * the folding waits less on the tile stores. */
static void block_run(float acc[4][QP_ROWS][QP_ROWS], const block2 *k)
{
    const simd_qpack *p = k->p;
    _Alignas(64) int32_t cbuf[2][4][QP_ROWS][QP_ROWS];
    _Alignas(64) int32_t isum[4][QP_ROWS][QP_ROWS];
    memset(acc, 0, sizeof(float) * 4 * QP_ROWS * QP_ROWS);
    int steps = p->n_blk * p->n_sub;
    for (int s = 0; s < steps; s++) {
        tiles_step(k, s, cbuf[s & 1]);
        if (s > 0)
            fold(acc, isum, cbuf[(s - 1) & 1], k, s - 1);
    }
    fold(acc, isum, cbuf[(steps - 1) & 1], k, steps - 1);
}

#ifndef QP_ACT_REPACK
#define QP_ACT_REPACK 0
#endif

/* The copy of acts, or x->q = NULL (the caller's rows are read) where it is off or memory
 * is short. */
static void acts_copy(acts *x, const simd_qpack *p, int M)
{
    x->q = NULL;
    if (!QP_ACT_REPACK)
        return;
    size_t tiles = ((size_t)M + QP_ROWS - 1) / QP_ROWS, units = tiles * p->n_blk;
    size_t qb = units * QP_ROWS * p->blk, db = units * QP_ROWS * sizeof(float);
    size_t pb = p->has_min ? units * QP_ROWS * (p->n_sub / 2) * sizeof(int32_t) : 0;
    uint8_t *mem = aligned_alloc(64, (qb + db + pb + 63) / 64 * 64);
    if (!mem)
        return;
    x->d = (float *)(mem + qb);
    x->bp = (int32_t *)(mem + qb + db);
    for (int m = 0; m < M; m++) {
        size_t t = (size_t)m / QP_ROWS, r = (size_t)m % QP_ROWS;
        const uint8_t *row = x->x + (size_t)m * x->xrow;
        for (int b = 0; b < p->n_blk; b++) {
            const uint8_t *blk = row + (size_t)b * p->act_blk_bytes;
            size_t u = t * p->n_blk + b;
            memcpy(&x->d[u * QP_ROWS + r], blk, sizeof(float));
            for (int j = 0; j < p->n_sub; j++)
                memcpy(mem + ((u * p->n_sub + j) * QP_ROWS + r) * p->sub,
                       blk + p->act_qs_off + (size_t)j * p->sub, (size_t)p->sub);
            for (int jj = 0; p->has_min && jj < p->n_sub / 2; jj++)
                x->bp[(u * QP_ROWS + r) * (p->n_sub / 2) + jj] =
                    pair_of(((const qa_q8_k *)blk)->bsums, jj);
        }
    }
    x->q = mem;
}

#ifndef QP_M_OUTER
#define QP_M_OUTER 0
#endif

/* The output rows [m0, m0 + 32) and columns of groups g, g + 1 (ng of them) within
 * [n_begin, n_end). cur: the tile rows now configured. */
static void out_block(float *out, size_t ldo, const simd_qpack *p, const acts *x, int M, int m0,
                      int g, int ng, int cur[2], int n_begin, int n_end, float beta)
{
    _Alignas(64) float acc[4][QP_ROWS][QP_ROWS];
    block2 k = {.p = p, .x = x, .t0 = m0 / QP_ROWS, .g = g, .ng = ng};
    k.mr[0] = M - m0 < QP_ROWS ? M - m0 : QP_ROWS;
    k.mr[1] = M - m0 - QP_ROWS;
    k.mr[1] = k.mr[1] < 0 ? 0 : k.mr[1] > QP_ROWS ? QP_ROWS : k.mr[1];
    k.nm = k.mr[1] > 0 ? 2 : 1;
    if (k.mr[0] != cur[0] || k.mr[1] != cur[1]) {
        tiles_config(k.mr, p->sub);
        cur[0] = k.mr[0], cur[1] = k.mr[1];
    }
    block_run(acc, &k);
    for (int h = 0; h < k.ng; h++) {
        int n0 = (g + h) * QP_ROWS;
        int lo = n_begin > n0 ? n_begin - n0 : 0;
        int hi = n_end < n0 + QP_ROWS ? n_end - n0 : QP_ROWS;
        for (int i = 0; i < k.nm; i++)
            tiles_write(out + (size_t)(m0 + QP_ROWS * i) * ldo + n0, ldo, acc[2 * i + h],
                        k.mr[i], lo, hi, beta);
    }
}

void simd_amx_qpack_gemm(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end)
{
    if (M <= 0 || n_begin >= n_end)
        return;
    acts x = {.x = xq, .xrow = (size_t)p->n_blk * p->act_blk_bytes};
    acts_copy(&x, p, M);
    int cur[2] = {0, 0};
    int g_begin = n_begin / QP_ROWS, g_end = (n_end + QP_ROWS - 1) / QP_ROWS;
    int gstep = QP_ALT_C ? 1 : 2;
    if (QP_M_OUTER) {
        for (int m0 = 0; m0 < M; m0 += 2 * QP_ROWS)
            for (int g = g_begin; g < g_end; g += gstep)
                out_block(out, ldo, p, &x, M, m0, g, g + 1 < g_end && gstep == 2 ? 2 : 1, cur,
                          n_begin, n_end, beta);
    } else {
        for (int g = g_begin; g < g_end; g += gstep)
            for (int m0 = 0; m0 < M; m0 += 2 * QP_ROWS)
                out_block(out, ldo, p, &x, M, m0, g, g + 1 < g_end && gstep == 2 ? 2 : 1, cur,
                          n_begin, n_end, beta);
    }
    _tile_release();
    free(x.q);
}
