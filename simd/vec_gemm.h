/* vec_gemm.h: the skinny GEMM out = x . w^T + beta * out in the vector vocabulary, for
 * steps of few rows; included by vec_kernels.h after its helpers.
 *
 * Both operands run along K, so a tile of GEMM_NR weight rows x GEMM_MR activation rows
 * keeps one vector accumulator per output element over K (lanes = K positions) and
 * reduces them horizontally at the end, VW at a time (v_reduce_lanes). The weight tile is
 * streamed from memory once, by the first activation tile; the other activation tiles
 * find it in cache. Meanwhile every activation tile prefetches its share of the next
 * weight tile's rows, so memory stays busy for the whole tile (on the 16-core Xeon this
 * ran M = 16 16% faster than prefetching from the first activation tile only). Every
 * output element is summed
 * in the same order (K in steps of VW, the tail masked, then the lane tree), whatever
 * tile it falls in, so a row's result does not depend on M or on the n range. */

#ifndef GEMM_NR /* an ISA file may choose its tile; -D overrides are for tuning runs only */
#if V_ACCS >= 16
/* 4 x 4 beat 4 x 2, 3 x 4 and 2 x 4 on the 16-core Xeon (docs/BENCHMARKS.md) */
#define GEMM_NR 4 /* weight rows per tile, <= 8 */
#define GEMM_MR 4 /* activation rows per tile, <= 4 */
#else
#define GEMM_NR 3 /* 12 accumulators + 3 weight vectors + 1 activation vector: 16 registers */
#define GEMM_MR 4
#endif
#endif
#ifndef GEMM_PF_LOCALITY
#define GEMM_PF_LOCALITY 3 /* __builtin_prefetch locality: 3 into L1, 2 into L2 */
#endif
/* Accumulators rounded up to whole groups of VW for the lane reduction. */
#define GEMM_SUMS ((GEMM_NR * GEMM_MR + VW - 1) / VW * VW)

/* acc[r][i] += w row r . x row i over lanes [k, k + m). */
ALWAYS_INLINE void gemm_step(V (*acc)[GEMM_MR], const float *w, size_t K, const float *x,
                             size_t lda, size_t k, size_t m, const int NR, const int MR)
{
    V wv[GEMM_NR];
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
        wv[r] = ld(w + (size_t)r * K + k, m);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        V xv = v_in_reg(ld(x + (size_t)i * lda + k, m));
#pragma GCC unroll 8
        for (int r = 0; r < NR; r++)
            acc[r][i] = v_fma(wv[r], xv, acc[r][i]);
    }
}

/* One NR x MR tile: out (MR, ldo) columns [0, NR), x (MR, lda), w (NR, K). Prefetches
 * n_pf rows of K floats, pf_stride floats apart from pf, along the way. */
ALWAYS_INLINE void gemm_tile(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                             size_t K, float beta, const float *pf, int n_pf, size_t pf_stride,
                             const int NR, const int MR)
{
    V acc[GEMM_NR][GEMM_MR];
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
            acc[r][i] = v_zero();
    size_t k = 0, k_full = K - K % VW;
    for (; k < k_full; k += VW) {
        if (n_pf && k % 16 == 0) /* one 64-byte line per row every 16 floats */
            for (int r = 0; r < n_pf; r++)
                __builtin_prefetch(pf + (size_t)r * pf_stride + k, 0, GEMM_PF_LOCALITY);
        gemm_step(acc, w, K, x, lda, k, VW, NR, MR);
    }
    if (k < K)
        gemm_step(acc, w, K, x, lda, k, K - k, NR, MR);

    float sums[GEMM_SUMS];
#pragma GCC unroll 8
    for (int g = 0; g < NR * MR; g += VW) {
        V part[VW];
#pragma GCC unroll 16
        for (int j = 0; j < VW; j++)
            part[j] = g + j < NR * MR ? acc[(g + j) / MR][(g + j) % MR] : v_zero();
        v_store(sums + g, v_reduce_lanes(part));
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
        for (int r = 0; r < NR; r++) {
            float *o = out + (size_t)i * ldo + r;
            float s = sums[r * MR + i];
            *o = beta == 0.0f ? s : s + beta * *o; /* beta 0 never reads out */
        }
}

static void gemm_tile_any(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                          size_t K, float beta, const float *pf, int n_pf, size_t pf_stride,
                          int nr, int mr)
{
#define GEMM_CASE(NR, MR)                                                     \
    case (NR) * 8 + (MR):                                                     \
        if ((NR) <= GEMM_NR && (MR) <= GEMM_MR) /* other cases are dead code */ \
            gemm_tile(out, ldo, x, lda, w, K, beta, pf, n_pf, pf_stride, NR, MR); \
        break;
#define GEMM_ROW(NR) GEMM_CASE(NR, 1) GEMM_CASE(NR, 2) GEMM_CASE(NR, 3) GEMM_CASE(NR, 4)
    switch (nr * 8 + mr) {
        GEMM_ROW(1)
        GEMM_ROW(2)
        GEMM_ROW(3)
        GEMM_ROW(4)
        GEMM_ROW(5)
        GEMM_ROW(6)
        GEMM_ROW(7)
        GEMM_ROW(8)
    default:
        break;
    }
#undef GEMM_ROW
#undef GEMM_CASE
}

static void vec_gemm_nt(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                        int M, int N, int K, float beta, int n_begin, int n_end)
{
    /* out (M, ldo), x (M, lda), w (N, K); columns [n_begin, n_end) of out */
    (void)N;
    size_t kk = (size_t)K;
    int n_mt = (M + GEMM_MR - 1) / GEMM_MR; /* activation tiles */
    for (int n0 = n_begin; n0 < n_end; n0 += GEMM_NR) {
        int nr = n_end - n0 < GEMM_NR ? n_end - n0 : GEMM_NR;
        int pf0 = n0 + GEMM_NR; /* the next tile's first row */
        int left = n_end - pf0;
        int n_pf = left <= 0 ? 0 : left < GEMM_NR ? left : GEMM_NR;
        const float *wt = w + (size_t)n0 * kk;
        for (int m0 = 0, mt = 0; m0 < M; m0 += GEMM_MR, mt++) {
            int mr = M - m0 < GEMM_MR ? M - m0 : GEMM_MR;
            /* activation tile mt prefetches rows mt, mt + n_mt, ... of the next weight
             * tile, so the memory stream keeps going while the tiles that find the weights
             * in cache run */
            int count = n_pf > mt ? (n_pf - mt + n_mt - 1) / n_mt : 0;
            gemm_tile_any(out + (size_t)m0 * ldo + n0, ldo, x + (size_t)m0 * lda, lda, wt, kk,
                          beta, count ? w + (size_t)(pf0 + mt) * kk : NULL, count,
                          (size_t)n_mt * kk, nr, mr);
        }
    }
}

/* ---- gemm_nn: out = x . w, w stored by rows of N (simd.h) ----
 *
 * Register tiles of up to NN_NV vectors of columns x rows: at each k, the tile's columns of
 * w's row k are loaded once and every row's x[i][k], broadcast, multiplies them into its
 * accumulators. Each output element is one chain of fused multiply-adds over k in order,
 * from zero, as the reference sums it: the same bits, whatever the tile. */
#define NN_NV 4     /* column vectors a tile */
#define NN_MR_MAX 8 /* rows a tile, at most; V_ACCS / vectors of the tile otherwise */

ALWAYS_INLINE void nn_tile(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                           size_t ldw, int K, size_t last, const int MR, const int NV)
{
    V acc[NN_MR_MAX][NN_NV];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            acc[i][v] = v_zero();
    for (int k = 0; k < K; k++) {
        const float *wk = w + (size_t)k * ldw;
        V wv[NN_NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            wv[v] = ld(wk + v * VW, v == NV - 1 ? last : VW);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            V xv = v_set1(x[(size_t)i * lda + k]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                acc[i][v] = v_fma(xv, wv[v], acc[i][v]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            st(out + (size_t)i * ldo + v * VW, acc[i][v], v == NV - 1 ? last : VW);
}

/* nn_tile with rows mr (<= NN_MR_MAX, mr x nv <= V_ACCS) and nv vectors, the last of them
 * `last` lanes */
static void nn_tile_any(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                        size_t ldw, int K, size_t last, int mr, int nv)
{
#define NN_CASE(MR, NV)                                                          \
    case (MR) * 8 + (NV):                                                        \
        if ((MR) * (NV) <= V_ACCS) /* other cases are dead code */               \
            nn_tile(out, ldo, x, lda, w, ldw, K, last, (MR) < NN_MR_MAX ? (MR) : NN_MR_MAX, NV); \
        break;
#define NN_ROW(MR) NN_CASE(MR, 1) NN_CASE(MR, 2) NN_CASE(MR, 3) NN_CASE(MR, 4)
    switch (mr * 8 + nv) {
        NN_ROW(1)
        NN_ROW(2)
        NN_ROW(3)
        NN_ROW(4)
        NN_ROW(5)
        NN_ROW(6)
        NN_ROW(7)
        NN_ROW(8)
    default:
        break;
    }
#undef NN_ROW
#undef NN_CASE
}

static void vec_gemm_nn(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                        size_t ldw, int M, int N, int K)
{
    /* out (M, ldo), x (M, lda), w (K, ldw); a tile's columns stay in L1 for all M rows */
    for (int n0 = 0; n0 < N; n0 += NN_NV * VW) {
        size_t cols = (size_t)(N - n0) < (size_t)NN_NV * VW ? (size_t)(N - n0) : NN_NV * VW;
        int nv = (int)((cols + VW - 1) / VW);
        size_t last = cols - (size_t)(nv - 1) * VW;
        int rows = V_ACCS / nv < NN_MR_MAX ? V_ACCS / nv : NN_MR_MAX;
        for (int m0 = 0; m0 < M; m0 += rows)
            nn_tile_any(out + (size_t)m0 * ldo + n0, ldo, x + (size_t)m0 * lda, lda, w + n0, ldw,
                        K, last, M - m0 < rows ? M - m0 : rows, nv);
    }
}
