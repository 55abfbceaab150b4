/* membw.c: parallel read bandwidth of a large buffer. */
#include <omp.h>
#include <stdlib.h>

#include "common/membw.h"
#include "common/own_thread.h"

enum { STREAMS = 4, CHUNK = 16, PREFETCH_FLOATS = 512 };

/* Sum of n floats read as STREAMS interleaved sequential streams, each prefetched 2 KB
 * ahead: the access pattern of the GEMM kernels (a tile of weight rows at a time). One
 * stream per thread leaves the core's miss buffers half used and reads ~30% below what
 * the kernels stream on the 16-core Xeon. Independent accumulators keep it memory bound. */
static float sum_range(const float *x, size_t n)
{
    float acc[STREAMS][CHUNK] = {{0}};
    size_t len = n / STREAMS / CHUNK * CHUNK; /* floats per stream, whole chunks */
    for (size_t i = 0; i < len; i += CHUNK)
        for (int s = 0; s < STREAMS; s++) {
            const float *p = x + (size_t)s * len + i;
            __builtin_prefetch(p + PREFETCH_FLOATS, 0, 3); /* a chunk is one cache line */
            for (int j = 0; j < CHUNK; j++)
                acc[s][j] += p[j];
        }
    for (size_t i = (size_t)STREAMS * len; i < n; i++)
        acc[0][0] += x[i];
    float total = 0.0f;
    for (int s = 0; s < STREAMS; s++)
        for (int j = 0; j < CHUNK; j++)
            total += acc[s][j];
    return total;
}

typedef struct membw_job {
    size_t bytes;
    int passes;
    double best;
} membw_job;

static void membw_run(void *arg)
{
    membw_job *j = arg;
    size_t n = j->bytes / sizeof(float);
    float *x = n ? malloc(n * sizeof(float)) : NULL;
    if (!x)
        return;
    /* Each thread first touches the pages it reads later. */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i & 7);
    volatile float sink = 0.0f;
    for (int p = 0; p < j->passes; p++) {
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
        if (dt > 0 && (double)(n * sizeof(float)) / dt > j->best)
            j->best = (double)(n * sizeof(float)) / dt;
    }
    free(x);
}

double membw_read(size_t bytes, int passes)
{
    /* On a thread of its own (common/own_thread.h): a pool left on the caller would make
     * every region of the engine wake its threads from sleep (0.1 ms each on a 2-core VM,
     * a third of a decode step's time at 16 streams). */
    membw_job j = {.bytes = bytes, .passes = passes};
    return own_thread_run(membw_run, &j) ? j.best : 0.0;
}
