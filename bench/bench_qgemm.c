/* bench_qgemm.c: the quantized GEMM per weight type against the f32 path (the same kernel
 * table's qgemm on F32 weights = gemm_nt), split over the threads in n chunks as the model
 * step splits its GEMMs: GB/s of weights read and GFLOP/s, activation quantization
 * included, with the weights in memory (copies past the last-level cache).
 * Usage: build/bench_qgemm [--types Q4_K,Q8_0,...] [--shapes 5632x2048,...] [--ms 1,16,64]
 *                          [--isa avx2|avx512|avx512vnni|...] [--quick]
 * (threads: OMP_NUM_THREADS, default all cores; the table: the best this CPU runs) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/membw.h"
#include "simd.h"

#define MAX_LIST 32

static int parse_ints(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        out[n++] = (int)strtol(s, (char **)&s, 10);
        if (*s == ',' || *s == 'x')
            s++;
    }
    return n;
}

static uint32_t type_by_name(const char *name, size_t len)
{
    for (uint32_t t = 0; t < 64; t++) {
        const qtype_info *info = qtype_get(t);
        if (info && strlen(info->name) == len && strncmp(info->name, name, len) == 0)
            return t;
    }
    return UINT32_MAX;
}

/* Deterministic bytes, then f16 scales of 1/64 (0x2400) where a type keeps them, so no
 * block holds inf or NaN. */
static void fill(uint8_t *w, size_t bytes, uint32_t type)
{
    const qtype_info *info = qtype_get(type);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < bytes; i++)
        w[i] = (uint8_t)((i * 2654435761u) >> 13);
    if (type == QT_F32) {
        float *f = (float *)w;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < bytes / 4; i++)
            f[i] = (float)((i * 2654435761u) % 2001u) * 1e-3f - 1.0f;
        return;
    }
    if (type == QT_F16 || type == QT_BF16) {
        uint16_t *h = (uint16_t *)w;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < bytes / 2; i++)
            h[i] = (uint16_t)(0x3000 + (i * 2654435761u) % 0x800); /* small finite values */
        return;
    }
    size_t nb = bytes / info->block_bytes;
    /* offsets of the f16 scales in each block */
    size_t offs[2] = {0, SIZE_MAX};
    switch (type) {
    case QT_Q4_1:
    case QT_Q5_1:
    case QT_Q4_K:
    case QT_Q5_K:
        offs[1] = 2;
        break;
    case QT_Q2_K:
        offs[0] = offsetof(qb_q2_k, d), offs[1] = offsetof(qb_q2_k, dmin);
        break;
    case QT_Q3_K:
        offs[0] = offsetof(qb_q3_k, d);
        break;
    case QT_Q6_K:
        offs[0] = offsetof(qb_q6_k, d);
        break;
    default:
        break;
    }
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++)
        for (int j = 0; j < 2; j++)
            if (offs[j] != SIZE_MAX) {
                uint16_t h = 0x2400;
                memcpy(w + b * info->block_bytes + offs[j], &h, 2);
            }
}

/* out (M, N) = x . W^T: quantize x, then chunks of rows over the threads. */
static void qgemm_threads(const simd_kernels *k, float *out, void *xq, const float *x,
                          const simd_qmat *w, int M)
{
    k->quantize_act(xq, x, (size_t)w->K, M, w->K, qtype_get(w->type)->act);
    int threads = omp_get_max_threads();
    int chunk = (w->N + threads * 4 - 1) / (threads * 4);
    chunk = (chunk + 15) / 16 * 16;
    int n_chunks = (w->N + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n_chunks; i++) {
        int nb = i * chunk, ne = nb + chunk < w->N ? nb + chunk : w->N;
        k->qgemm(out, (size_t)w->N, xq, w, M, 0.0f, nb, ne);
    }
}

/* Seconds per call, best pass over the copies. */
static double time_calls(const simd_kernels *k, float *out, void *xq, const float *x,
                         const simd_qmat *mats, int n_copies, int M, double budget)
{
    double best = 1e30, spent = 0.0;
    for (int rep = 0; rep < 100 && (rep < 3 || spent < budget); rep++) {
        double t0 = omp_get_wtime();
        for (int c = 0; c < n_copies; c++)
            qgemm_threads(k, out, xq, x, &mats[c], M);
        double t = (omp_get_wtime() - t0) / n_copies;
        spent += t * n_copies;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    static const uint32_t all_types[] = {QT_F32,  QT_F16,  QT_BF16, QT_Q8_0, QT_Q4_0,
                                         QT_Q4_1, QT_Q5_0, QT_Q5_1, QT_Q2_K, QT_Q3_K,
                                         QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_IQ4_NL, QT_IQ4_XS};
    uint32_t types[MAX_LIST];
    int n_types = 0, shapes[2 * MAX_LIST] = {5632, 2048, 2048, 5632}, n_shapes = 2;
    int ms[MAX_LIST] = {1, 16, 64}, n_ms = 3, quick = 0;
    const simd_kernels *k = simd_init();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--types") == 0 && i + 1 < argc) {
            for (const char *s = argv[++i]; *s && n_types < MAX_LIST;) {
                size_t len = strcspn(s, ",");
                types[n_types] = type_by_name(s, len);
                if (types[n_types] == UINT32_MAX) {
                    fprintf(stderr, "bench_qgemm: unknown type %.*s\n", (int)len, s);
                    return 2;
                }
                n_types++;
                s += len + (s[len] == ',');
            }
        } else if (strcmp(argv[i], "--shapes") == 0 && i + 1 < argc) {
            n_shapes = parse_ints(argv[++i], shapes, 2 * MAX_LIST) / 2;
        } else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            i++;
            k = NULL;
            for (int isa = 0; isa < SIMD_ISA_COUNT && !k; isa++)
                if (strcmp(simd_isa_name((simd_isa)isa), argv[i]) == 0)
                    k = simd_kernels_for((simd_isa)isa);
            if (!k) {
                fprintf(stderr, "bench_qgemm: no table %s on this CPU\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
            n_ms = parse_ints(argv[++i], ms, MAX_LIST);
        } else {
            fprintf(stderr, "usage: bench_qgemm [--types Q4_K,...] [--shapes NxK,...] "
                            "[--ms 1,16,...] [--isa NAME] [--quick]\n");
            return 2;
        }
    }
    if (n_types == 0)
        for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++)
            types[n_types++] = all_types[i];

    double bw = membw_read((size_t)1 << 30, 5) / 1e9;
    printf("read bandwidth: %.1f GB/s (1 GiB, %d threads, best of 5); kernel table %s\n\n", bw,
           omp_get_max_threads(), k->name);
    printf("%-7s %5s %5s %4s | %8s %7s %6s | %9s\n", "type", "N", "K", "M", "GFLOP/s", "GB/s",
           "of bw", "x f32");
    /* copies of W past the 16-core Xeon's 300 MB L3, so W comes from memory */
    size_t min_bytes = (size_t)(quick ? 768 : 1536) << 20;
    int max_m = 0;
    for (int i = 0; i < n_ms; i++)
        max_m = ms[i] > max_m ? ms[i] : max_m;
    for (int s = 0; s < n_shapes; s++) {
        int N = shapes[2 * s], K = shapes[2 * s + 1];
        float *x = malloc(sizeof(float) * (size_t)max_m * K);
        float *out = malloc(sizeof(float) * (size_t)max_m * N);
        void *xq = malloc(sizeof(float) * (size_t)max_m * K); /* the largest form: f32 */
        for (size_t i = 0; i < (size_t)max_m * K; i++)
            x[i] = (float)((i * 40503u) % 1001u) * 2e-3f - 1.0f;
        double t_f32[MAX_LIST] = {0};
        for (int ti = -1; ti < n_types; ti++) { /* -1: the f32 baseline first */
            uint32_t type = ti < 0 ? QT_F32 : types[ti];
            size_t row = qtype_row_bytes(type, K), bytes = row * (size_t)N;
            if (row == 0) {
                printf("%-7s %5d %5d: K not a whole number of blocks\n", qtype_get(type)->name, N, K);
                continue;
            }
            int n_copies = (int)((min_bytes + bytes - 1) / bytes);
            uint8_t *w = malloc(bytes * n_copies);
            simd_qmat mats[256];
            n_copies = n_copies > 256 ? 256 : n_copies;
            if (!w || !x || !out || !xq) {
                fprintf(stderr, "bench_qgemm: out of memory\n");
                return 1;
            }
            fill(w, bytes * n_copies, type);
            for (int c = 0; c < n_copies; c++)
                mats[c] = (simd_qmat){.type = type, .N = N, .K = K, .row_bytes = row,
                                     .data = w + (size_t)c * bytes};
            for (int mi = 0; mi < n_ms; mi++) {
                int M = ms[mi];
                double t = time_calls(k, out, xq, x, mats, n_copies, M, quick ? 0.1 : 0.4);
                if (ti < 0)
                    t_f32[mi] = t;
                printf("%-7s %5d %5d %4d | %8.1f %7.1f %5.0f%% | %9.2f\n", qtype_get(type)->name,
                       N, K, M, 2.0 * M * N * K / t / 1e9, bytes / t / 1e9,
                       100.0 * bytes / t / 1e9 / bw, t_f32[mi] / t);
            }
            fflush(stdout);
            free(w);
        }
        free(x), free(out), free(xq);
    }
    return 0;
}
