/* bench_gemm.c: the step GEMM out (M, N) = x (M, K) . W^T for the stories110m weight
 * shapes, OpenBLAS (the engine's BLAS path: sgemv at M = 1, else sgemm) against the SIMD
 * skinny GEMM split over the threads (fwd_gemm), in GFLOP/s and GB/s of weights read;
 * then the matmul time of one whole stories110m step per M.
 * Usage: build/bench_gemm [--quick] [--kernel-only]   (threads: OMP_NUM_THREADS, default all
 * cores). --kernel-only skips OpenBLAS, for tuning runs of the kernel. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/membw.h"
#include "model/forward_batch.h"

typedef struct shape {
    const char *name;
    int N, K;
    int per_step; /* matrices of this shape in one stories110m step */
} shape;

static const shape shapes[] = {
    {"qkv", 2304, 768, 12}, {"wo", 768, 768, 12},      {"w13", 4096, 768, 12},
    {"w2", 768, 2048, 12},  {"output", 32000, 768, 1},
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])
static const int ms[] = {1, 2, 4, 8, 16, 32, 64, 128};
#define N_MS (int)(sizeof ms / sizeof ms[0])

/* Seconds per call: the best pass over n_copies distinct copies of W (so that W comes
 * from memory, as in a model step), each copy one call. */
static double time_calls(const simd_kernels *k, fwd_gemm_path path, float *out, float *x,
                         const float *w, int n_copies, int M, int N, int K, double budget_s)
{
    double best = 1e30, spent = 0.0;
    for (int rep = 0; rep < 200 && (rep < 3 || spent < budget_s); rep++) {
        double t0 = omp_get_wtime();
        for (int c = 0; c < n_copies; c++) {
            simd_qmat wm = model_qmat_f32(w + (size_t)c * N * K, N, K);
            const simd_qmat *wp = &wm;
            fwd_gemm(k, path, NULL, out, (size_t)N, x, K, NULL, &wp, 1, M, 0.0f);
        }
        double t = (omp_get_wtime() - t0) / n_copies;
        spent += t * n_copies;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    int quick = 0, kernel_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--kernel-only") == 0)
            kernel_only = 1;
        else {
            fprintf(stderr, "usage: bench_gemm [--quick] [--kernel-only]\n");
            return 2;
        }
    }
    const simd_kernels *k = simd_init();
    double bw = membw_read((size_t)1 << 30, 5) / 1e9;
    printf("read bandwidth: %.1f GB/s (1 GiB, %d threads, best of 5); kernel table %s\n\n", bw,
           omp_get_max_threads(), k->name);
    printf("%-6s %5s %5s %4s | %8s %7s | %8s %7s %6s | %6s\n", "shape", "N", "K", "M",
           "blas GF/s", "GB/s", "kern GF/s", "GB/s", "of bw", "x blas");

    double step_t[2][N_MS] = {{0}};
    /* 1 GiB of copies: more than three times the 16-core Xeon's 300 MB L3 */
    size_t min_bytes = (size_t)(quick ? 64 : 1024) << 20;
    int max_m = ms[N_MS - 1];
    for (int s = 0; s < N_SHAPES; s++) {
        int N = shapes[s].N, K = shapes[s].K;
        size_t wsize = (size_t)N * K;
        int n_copies = (int)((min_bytes + wsize * 4 - 1) / (wsize * 4));
        float *w = malloc(wsize * n_copies * sizeof(float));
        float *x = malloc((size_t)max_m * K * sizeof(float));
        float *out = malloc((size_t)max_m * N * sizeof(float));
        if (!w || !x || !out) {
            fprintf(stderr, "bench_gemm: out of memory\n");
            return 1;
        }
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < wsize * n_copies; i++)
            w[i] = (float)((i * 2654435761u) % 2001u) * 1e-3f - 1.0f;
        for (size_t i = 0; i < (size_t)max_m * K; i++)
            x[i] = (float)((i * 40503u) % 1001u) * 2e-3f - 1.0f;
        for (int mi = 0; mi < N_MS; mi++) {
            int M = ms[mi];
            double budget = quick ? 0.05 : 0.3;
            double tb = kernel_only
                            ? 0.0
                            : time_calls(k, FWD_GEMM_BLAS, out, x, w, n_copies, M, N, K, budget);
            double tk = time_calls(k, FWD_GEMM_KERNEL, out, x, w, n_copies, M, N, K, budget);
            step_t[0][mi] += tb * shapes[s].per_step;
            step_t[1][mi] += tk * shapes[s].per_step;
            double flop = 2.0 * M * N * K, bytes = 4.0 * N * K;
            printf("%-6s %5d %5d %4d | ", shapes[s].name, N, K, M);
            if (kernel_only)
                printf("%8s %7s | ", "-", "-");
            else
                printf("%8.1f %7.1f | ", flop / tb / 1e9, bytes / tb / 1e9);
            printf("%8.1f %7.1f %5.0f%% | ", flop / tk / 1e9, bytes / tk / 1e9,
                   100.0 * bytes / tk / 1e9 / bw);
            if (kernel_only)
                printf("%6s\n", "-");
            else
                printf("%6.2f\n", tb / tk);
        }
        fflush(stdout);
        free(w), free(x), free(out);
    }

    printf("\nstories110m step, matmuls only (12 x (qkv, wo, w13, w2) + output, 438 MB):\n");
    printf("%4s | %9s %9s | %9s %9s | %6s | %13s\n", "M", "blas ms", "tok/s", "kern ms",
           "tok/s", "x blas", "kern x M=1");
    for (int mi = 0; mi < N_MS; mi++) {
        printf("%4d | ", ms[mi]);
        if (kernel_only)
            printf("%9s %9s | ", "-", "-");
        else
            printf("%9.2f %9.0f | ", step_t[0][mi] * 1e3, ms[mi] / step_t[0][mi]);
        printf("%9.2f %9.0f | ", step_t[1][mi] * 1e3, ms[mi] / step_t[1][mi]);
        if (kernel_only)
            printf("%6s | ", "-");
        else
            printf("%6.2f | ", step_t[0][mi] / step_t[1][mi]);
        printf("%13.2f\n", ms[mi] / step_t[1][mi] / (1.0 / step_t[1][0]));
    }
    return 0;
}
