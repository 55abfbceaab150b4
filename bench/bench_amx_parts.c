/* bench_amx_parts.c: where the Q4_K and Q6_K tile kernels' time goes (simd/amx/
 * qgemm_amx_q4k.c, qgemm_amx_q6k.c, their loop tiles_split.h), one thread, weights in
 * cache: the whole kernel, then each of its parts alone over the same units (the two B
 * operands' making, the tile products with their C stores, the float fold of C per
 * activation row), in ns per unit (16 weight rows x 256 elements) and 16 activation rows.
 * The parts' sum against the whole says whether they overlap. Needs AMX-INT8 (skips,
 * saying so, elsewhere). Usage: build/bench_amx_parts [M ...] (default 16 64 256). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(TS_BENCH_AMX)
#pragma GCC target("amx-tile,amx-int8,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#include <immintrin.h>
/* the kernels under other names, so they do not clash with the library's */
#define simd_amx_qpack_gemm_q4k parts_q4k
#define simd_amx_qpack_gemm_q4k_bw parts_q4k_bw
#define simd_amx_qpack_gemm_q6k parts_q6k
#include "../simd/amx/qgemm_amx_q4k.c"
#include "../simd/amx/qgemm_amx_q6k.c"
#undef simd_amx_qpack_gemm_q4k
#undef simd_amx_qpack_gemm_q4k_bw
#undef simd_amx_qpack_gemm_q6k
#define PARTS_RUN 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../tests/qpack_data.h"
#include "qpack.h"
#include "qpack_internal.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#ifdef PARTS_RUN
enum { N = 256, K = 2048 }; /* 16 groups x 8 blocks: 1 MiB of pack, in L2 */

typedef struct parts {
    const simd_qpack *p;
    const split_kind *kind; /* Q4_K's with VBMI where the CPU says it has it */
    simd_qpack_fn whole;    /* the kernel on kind */
    const uint8_t *xq;
    size_t xrow;
    int M;
    float *out;
} parts;

static void run_whole(const parts *t)
{
    t->whole(t->out, N, t->xq, t->p, t->M, 0.0f, 0, N);
}

static void run_operands(const parts *t)
{
    _Alignas(64) split_bops b;
    for (int g = 0; g < N / QP_ROWS; g++)
        for (int bl = 0; bl < t->p->n_blk; bl++)
            t->kind->operands(t->p, qpack_unit(t->p, g, bl), b);
}

/* the tile products of every unit and 16-row activation tile against one unpacked unit,
 * C stored; from_l1: every tile reads the first 16 rows (A in L1, as at 16 rows) */
static void tiles_over(const parts *t, bool from_l1)
{
    _Alignas(64) split_bops b;
    _Alignas(64) int32_t cbuf[2][QP_ROWS][QP_ROWS];
    t->kind->operands(t->p, qpack_unit(t->p, 0, 0), b);
    tiles_config((int[2]){QP_ROWS, 0}, 64);
    for (int g = 0; g < N / QP_ROWS; g++)
        for (int bl = 0; bl < t->p->n_blk; bl++)
            for (int m0 = 0; m0 < t->M; m0 += QP_ROWS)
                split_tiles(t->xq + (from_l1 ? 0 : (size_t)m0 * t->xrow) +
                                (size_t)bl * t->p->act_blk_bytes + t->p->act_qs_off,
                            t->xrow, b, cbuf, t->kind->b0_signed);
    _tile_release();
}

static void run_tiles(const parts *t)
{
    tiles_over(t, false);
}

static void run_tiles_l1(const parts *t)
{
    tiles_over(t, true);
}

/* the fold of every unit's C (one buffer, as if just stored) into each row's sums */
static void run_fold(const parts *t)
{
    _Alignas(64) int32_t cbuf[2][QP_ROWS][QP_ROWS];
    _Alignas(64) static float acc[256][QP_ROWS];
    const __m128i shift = _mm_cvtsi32_si128(t->kind->shift);
    for (int i = 0; i < 2 * QP_ROWS * QP_ROWS; i++)
        (&cbuf[0][0][0])[i] = i % 97 - 48;
    for (int g = 0; g < N / QP_ROWS; g++)
        for (int bl = 0; bl < t->p->n_blk; bl++) {
            const uint8_t *unit = qpack_unit(t->p, g, bl);
            qp_terms terms;
            qp_unit_terms(&terms, t->p, unit, t->p->has_min);
            for (int m = 0; m < t->M; m++) {
                int r = m % QP_ROWS;
                __m512i isum = _mm512_add_epi32(
                    _mm512_sll_epi32(_mm512_load_si512(cbuf[0][r]), shift),
                    _mm512_load_si512(cbuf[1][r]));
                const uint8_t *xb = t->xq + (size_t)m * t->xrow + (size_t)bl * t->p->act_blk_bytes;
                _mm512_store_ps(acc[m], qp_f32_row(_mm512_load_ps(acc[m]), isum, &terms, xb,
                                                   t->p->has_min));
            }
        }
}

/* ns per unit and 16 activation rows, best of repeats over about 0.2 s */
static double ns_per(void (*f)(const parts *), const parts *t)
{
    f(t);
    double best = 1e30, spent = 0.0;
    for (int rep = 0; rep < 5 || (spent < 0.2 && rep < 2000); rep++) {
        double t0 = now_s();
        f(t);
        double s = now_s() - t0;
        spent += s, best = s < best ? s : best;
    }
    double units = (double)(N / QP_ROWS) * t->p->n_blk * (t->M / (double)QP_ROWS);
    return best * 1e9 / units;
}

int main(int argc, char **argv)
{
    if (!(qpack_amx_caps() & QP_CAP_INT8)) {
        printf("bench_amx_parts: skipped: no AMX-INT8 here\n");
        return 0;
    }
    bool vbmi = qpack_amx_caps() & QP_CAP_VBMI;
    int def[] = {16, 64, 256}, n_m = argc > 1 ? argc - 1 : 3, Ms[64];
    for (int i = 0; i < n_m && i < 64; i++) {
        Ms[i] = argc > 1 ? atoi(argv[i + 1]) : def[i];
        if (Ms[i] < 16 || Ms[i] > 256 || Ms[i] % 16) {
            printf("M must be a multiple of 16 in [16, 256]\n");
            return 2;
        }
    }
    n_m = n_m < 64 ? n_m : 64;
    printf("bench_amx_parts: N=%d K=%d, one thread, Q4_K's operands %s VBMI; ns per unit "
           "(16 x 256) and 16 rows (operands: per unit, once for all M rows; ops-BW: Q4_K's\n"
           "without VBMI; tiles: the 16-row activation tiles as the kernel runs them, and all\n"
           "reading the first 16 rows (A in L1))\n", N, K,
           vbmi ? "with" : "without");
    static const uint32_t types[] = {QT_Q4_K, QT_Q6_K};
    for (int ti = 0; ti < 2; ti++) {
        uint32_t type = types[ti];
        size_t wrow, xrow;
        uint8_t *w = qd_weights(type, N, K, &wrow);
        uint8_t *xq = qd_acts(type, 256, K, NULL, &xrow);
        simd_qmat qm = {.type = type, .N = N, .K = K, .row_bytes = wrow, .data = w};
        simd_qpack *p = simd_qpack_make(&qm);
        float *out = malloc(sizeof(float) * 256 * N);
        printf("%s\n   M    whole  operands  ops-BW  tiles+C  A-in-L1   fold\n",
               type == QT_Q4_K ? "Q4_K" : "Q6_K");
        for (int i = 0; i < n_m; i++) {
            int M = Ms[i];
            parts t = {.p = p, .xq = xq, .xrow = xrow, .M = M, .out = out};
            if (type == QT_Q4_K)
                t.kind = vbmi ? &Q4K_VBMI : &Q4K_BW, t.whole = vbmi ? parts_q4k : parts_q4k_bw;
            else
                t.kind = &Q6K, t.whole = parts_q6k;
            printf("%4d %8.1f %9.1f ", M, ns_per(run_whole, &t),
                   ns_per(run_operands, &t) * M / QP_ROWS);
            if (type == QT_Q4_K) {
                parts bw = t;
                bw.kind = &Q4K_BW;
                printf("%7.1f", ns_per(run_operands, &bw) * M / QP_ROWS);
            } else {
                printf("%7s", "-");
            }
            printf(" %8.1f %8.1f %6.1f\n", ns_per(run_tiles, &t), ns_per(run_tiles_l1, &t),
                   ns_per(run_fold, &t));
        }
        simd_qpack_free(p);
        free(w), free(xq), free(out);
    }
    return 0;
}
#else
int main(void)
{
    printf("bench_amx_parts: skipped: built without AMX (x86-64 GCC with the tile kernels)\n");
    (void)now_s;
    return 0;
}
#endif
