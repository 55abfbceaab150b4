/* membw.c: parallel read bandwidth of a large buffer. */
#include <omp.h>
#include <stdlib.h>

#include "common/membw.h"

/* Sum of n floats with enough independent accumulators to stay memory bound. */
static float sum_range(const float *x, size_t n)
{
    float acc[32] = {0};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 32; j++)
            acc[j] += x[i + j];
    for (; i < n; i++)
        acc[0] += x[i];
    float s = 0.0f;
    for (int j = 0; j < 32; j++)
        s += acc[j];
    return s;
}

double membw_read(size_t bytes, int passes)
{
    size_t n = bytes / sizeof(float);
    float *x = n ? malloc(n * sizeof(float)) : NULL;
    if (!x)
        return 0.0;
    /* Each thread first touches the pages it reads later. */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i & 7);
    double best = 0.0;
    volatile float sink = 0.0f;
    for (int p = 0; p < passes; p++) {
        double t0 = omp_get_wtime();
        float total = 0.0f;
#pragma omp parallel reduction(+ : total)
        {
            int nt = omp_get_num_threads(), it = omp_get_thread_num();
            size_t lo = n * (size_t)it / (size_t)nt, hi = n * (size_t)(it + 1) / (size_t)nt;
            total += sum_range(x + lo, hi - lo);
        }
        double dt = omp_get_wtime() - t0;
        sink = sink + total;
        if (dt > 0 && (double)(n * sizeof(float)) / dt > best)
            best = (double)(n * sizeof(float)) / dt;
    }
    free(x);
    return best;
}
