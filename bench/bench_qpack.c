/* bench_qpack.c: the GEMM on packed quantized weights (simd/qpack.h: the vector kernel, AMX
 * tiles from the pack's tile_min_m rows where usable) against the best kernel table's qgemm
 * on the file's blocks and its f32 skinny GEMM on the same shape, split over the OpenMP
 * threads in chunks of 64 weight rows (QP_CHUNK=16 sets 16); also the pack's time and
 * size. QP_NO_QGEMM=1 / QP_NO_F32=1 skip the comparisons; QP_VECTOR=1 times the vector
 * kernel at every M (no tiles); QP_MS=4,8,16 sets the step sizes (default 1,4,16,64,512)
 * and QP_TYPES=Q4_K,Q6_K the types (of Q4_K, Q8_0, Q6_K, BF16, F16). From QP_TILE_MIN_M
 * rows up to the pack's tile_min_m (Q4_K's is more), where simd_qmat_gemm takes the vector
 * kernel, the tile kernel is timed beside it ("tiles"), to tune tile_min_m; where a pack
 * has a second tile kernel (Q4_K's without VBMI, beside the one with it), that one is
 * timed too ("other tiles").
 * Usage: build/bench_qpack [N K]   (default 5632 2048, TinyLlama's FFN; threads:
 * OMP_NUM_THREADS). Builds stand-alone with -fopenmp and the simd sources.
 * Every step reads the same matrix, so a matrix smaller than the last-level cache times
 * the kernel from that cache, not from memory: for a streaming figure make the packed
 * matrix several times the L3 (one 16-core Xeon had 300 MiB, and a 151 MB Q4_K matrix
 * read at 267 GB/s there, three times its memory's). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/qpack_data.h"
#include "qpack.h"
#include "qmat.h"
#include "qpack_internal.h"
#include "simd.h"

static int chunk_rows = 64; /* weight rows per task; QP_CHUNK in the environment overrides */
static int vector_only;     /* QP_VECTOR=1 */

typedef struct job {
    const simd_qpack *pack;
    const simd_qmat *packed; /* the weights planned on pack */
    simd_qpack_fn kernel; /* a tile kernel to time instead of the plan's choice */
    const simd_qmat *w;
    const void *xq, *xq_file; /* activations for the pack, for qgemm on the file's blocks */
    const simd_kernels *k;
    const float *x, *wf;
    float *out;
    int M, N, K;
} job;

static void run_qpack(const job *j)
{
    int chunks = (j->N + chunk_rows - 1) / chunk_rows;
#pragma omp parallel for schedule(dynamic, 1)
    for (int c = 0; c < chunks; c++) {
        int ne = (c + 1) * chunk_rows < j->N ? (c + 1) * chunk_rows : j->N;
        if (j->kernel)
            j->kernel(j->out, (size_t)j->N, j->xq, j->pack, j->M, 0.0f, c * chunk_rows, ne);
        else if (vector_only)
            j->packed->mul.gemm(j->out, (size_t)j->N, j->xq, j->pack, j->M, 0.0f, c * chunk_rows,
                                ne);
        else
            simd_qmat_gemm(j->out, (size_t)j->N, j->xq, 0, j->packed, j->M, 0.0f, c * chunk_rows,
                           ne);
    }
}

static void run_qgemm(const job *j)
{
    int chunks = (j->N + chunk_rows - 1) / chunk_rows;
#pragma omp parallel for schedule(dynamic, 1)
    for (int c = 0; c < chunks; c++) {
        int ne = (c + 1) * chunk_rows < j->N ? (c + 1) * chunk_rows : j->N;
        j->k->qgemm(j->out, (size_t)j->N, j->xq_file, j->w, j->M, 0.0f, c * chunk_rows, ne);
    }
}

static void run_f32(const job *j)
{
    int chunks = (j->N + chunk_rows - 1) / chunk_rows;
#pragma omp parallel for schedule(dynamic, 1)
    for (int c = 0; c < chunks; c++) {
        int ne = (c + 1) * chunk_rows < j->N ? (c + 1) * chunk_rows : j->N;
        j->k->gemm_nt(j->out, (size_t)j->N, j->x, (size_t)j->K, j->wf, j->M, j->N, j->K, 0.0f,
                      c * chunk_rows, ne);
    }
}

/* Best seconds per call over about budget seconds (at least 3 calls after a warm-up). */
static double best_time(void (*f)(const job *), const job *j, double budget)
{
    f(j);
    double best = 1e30, spent = 0.0;
    for (int rep = 0; rep < 3 || (spent < budget && rep < 200); rep++) {
        double t0 = omp_get_wtime();
        f(j);
        double t = omp_get_wtime() - t0;
        spent += t;
        best = t < best ? t : best;
    }
    return best;
}

/* Whether name is one of the comma-separated list's entries (QP_TYPES). */
static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p; p += *p == ',') {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p += len;
    }
    return false;
}

int main(int argc, char **argv)
{
    int N = argc > 2 ? atoi(argv[1]) : 5632, K = argc > 2 ? atoi(argv[2]) : 2048;
    static const uint32_t types[] = {QT_Q4_K, QT_Q8_0, QT_Q6_K, QT_BF16, QT_F16};
    static const char *names[] = {"Q4_K", "Q8_0", "Q6_K", "BF16", "F16"};
    int Ms[16] = {1, 4, 16, 64, 512}, n_m = 5;
    if (getenv("QP_MS")) {
        n_m = 0;
        for (char *p = getenv("QP_MS"); *p && n_m < 16; p += *p == ',') {
            int v = (int)strtol(p, &p, 10);
            Ms[n_m++] = v < 1 ? 1 : v > 512 ? 512 : v;
            if (*p && *p != ',')
                break;
        }
    }
    const char *only = getenv("QP_TYPES");
    const simd_kernels *k = simd_init();
    vector_only = getenv("QP_VECTOR") && atoi(getenv("QP_VECTOR")) == 1;
    if (getenv("QP_CHUNK"))
        chunk_rows = atoi(getenv("QP_CHUNK")) > 0 ? atoi(getenv("QP_CHUNK")) : chunk_rows;
    printf("bench_qpack: N=%d K=%d threads=%d chunk=%d amx=%s table=%s\n", N, K,
           omp_get_max_threads(), chunk_rows, simd_amx_usable() ? "yes" : "no", k->name);
    float *wf = malloc(sizeof(float) * (size_t)N * K);
    float *x = malloc(sizeof(float) * (size_t)512 * K);
    float *out = malloc(sizeof(float) * (size_t)512 * N);
    for (size_t i = 0; i < (size_t)N * K; i++)
        wf[i] = qd_unit(-1.0f, 1.0f);
    for (size_t i = 0; i < (size_t)512 * K; i++)
        x[i] = qd_unit(-1.0f, 1.0f);
    for (int t = 0; t < 5; t++) {
        if (only && !listed(only, names[t]))
            continue;
        size_t wrow, xrow;
        uint8_t *w, *xq;
        const void *xq_file;
        if (types[t] == QT_BF16 || types[t] == QT_F16) {
            wrow = (size_t)K * 2; /* bf16: the top halves of the f32 weights; f16: rounded */
            uint16_t *wh = malloc(wrow * N);
            for (size_t i = 0; i < (size_t)N * K; i++) {
                uint32_t u;
                memcpy(&u, &wf[i], 4);
                wh[i] = types[t] == QT_F16 ? simd_f32_to_f16_scalar(wf[i]) : (uint16_t)(u >> 16);
            }
            w = (uint8_t *)wh;
            xq = malloc((size_t)512 * K * 4); /* hi and lo bf16 */
            double c0 = omp_get_wtime();
            simd_qpack_bf16_rows((uint16_t *)xq, x, (size_t)K, 512, K);
            double c1 = omp_get_wtime();
            k->bf16_rows((uint16_t *)xq, x, (size_t)K, 512, K);
            printf("%s: activations to bf16, 512 rows, one thread: %.3f ms plain C, %.3f ms "
                   "%s\n", names[t], (c1 - c0) * 1e3, (omp_get_wtime() - c1) * 1e3, k->name);
            xq_file = x; /* qgemm takes F16 / BF16 activations as f32 */
        } else {
            w = qd_weights(types[t], N, K, &wrow);
            xq = qd_acts(types[t], 512, K, NULL, &xrow);
            xq_file = xq;
        }
        simd_qmat qm = {.type = types[t], .N = N, .K = K, .row_bytes = wrow, .data = w};
        simd_qmat packed = qm;
        double t0 = omp_get_wtime();
        simd_qmat_plan(&packed, k, SIMD_PACK_ALWAYS);
        double pack_s = omp_get_wtime() - t0;
        simd_qpack *p = packed.pack;
        if (!p) {
            printf("%s: pack refused\n", names[t]);
            return 1;
        }
        printf("%s: pack %.1f ms (one thread), %.1f MB for %.1f MB of blocks (%.2fx)\n",
               names[t], pack_s * 1e3, simd_qpack_bytes(p) / 1e6, (double)wrow * N / 1e6,
               simd_qpack_bytes(p) / ((double)wrow * N));
        for (int i = 0; i < n_m; i++) {
            job j = {.pack = p, .packed = &packed, .w = &qm, .xq = xq, .xq_file = xq_file, .k = k, .x = x,
                     .wf = wf, .out = out, .M = Ms[i], .N = N, .K = K};
            double flop = 2.0 * Ms[i] * (double)N * K;
            double tp = best_time(run_qpack, &j, 0.5);
            printf("  M=%4d  packed %8.3f ms %6.0f GOP/s", Ms[i], tp * 1e3, flop / tp / 1e9);
            simd_qpack_fn tiles[2];
            int n_tiles = vector_only || Ms[i] < QP_TILE_MIN_M ? 0 : qpack_tile_kernels(p, tiles);
            for (int c = Ms[i] >= packed.mul.tile_min_m; c < n_tiles; c++) { /* not "packed"'s own */
                job o = j;
                o.kernel = tiles[c];
                double to = best_time(run_qpack, &o, 0.5);
                printf("   %s %8.3f ms %6.0f GOP/s", c ? "other tiles" : "tiles", to * 1e3,
                       flop / to / 1e9);
            }
            if (!getenv("QP_NO_QGEMM")) {
                double tq = best_time(run_qgemm, &j, 0.5);
                printf("   %s qgemm %8.3f ms %6.0f GOP/s (%.2fx)", k->name, tq * 1e3,
                       flop / tq / 1e9, tq / tp);
            }
            if (!getenv("QP_NO_F32")) {
                double tf = best_time(run_f32, &j, 0.5);
                printf("   f32 %8.3f ms %6.0f GFLOP/s (%.2fx)", tf * 1e3, flop / tf / 1e9,
                       tf / tp);
            }
            printf("\n");
        }
        simd_qpack_free(p);
        free(w), free(xq);
    }
    free(wf), free(x), free(out);
    return 0;
}
