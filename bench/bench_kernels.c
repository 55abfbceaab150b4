/* bench_kernels.c: the machine's read bandwidth, then decode attention over a paged KV
 * cache per kernel table, in GB/s of KV read, against that bandwidth and against ref.
 * Usage: build/bench_kernels [--quick]   (threads: OMP_NUM_THREADS, default all cores) */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/membw.h"
#include "simd.h"

/* A realistic decode shape: 22 layers of 32 query heads over 8 kv heads of 64. */
#define N_LAYERS 22
#define N_HEADS 32
#define N_KV 8
#define HEAD_DIM 64

static double now_s(void) { return omp_get_wtime(); }

/* One sequence of ctx tokens, all layers, in shuffled physical blocks. */
typedef struct bench_kv {
    void *pool;       /* (n_blocks, block_stride) */
    int32_t *table;   /* (n_blocks) */
    size_t block_stride;
    simd_kv_type type;
} bench_kv;

static int kv_make(bench_kv *kv, int ctx, simd_kv_type type)
{
    int n_blocks = (ctx + TS_KV_BLOCK - 1) / TS_KV_BLOCK;
    kv->type = type;
    kv->block_stride = (size_t)N_LAYERS * 2 * N_KV * TS_KV_BLOCK * HEAD_DIM;
    size_t n = (size_t)n_blocks * kv->block_stride, es = type == SIMD_KV_F16 ? 2 : 4;
    kv->pool = malloc(n * es);
    kv->table = malloc(sizeof(int32_t) * n_blocks);
    if (!kv->pool || !kv->table)
        return -1;
    const simd_kernels *k = simd_init();
#pragma omp parallel for schedule(static)
    for (int b = 0; b < n_blocks; b++) {
        float tmp[256];
        uint32_t s = 2463534242u + (uint32_t)b;
        for (size_t i = 0; i < kv->block_stride; i += 256) {
            size_t m = kv->block_stride - i < 256 ? kv->block_stride - i : 256;
            for (size_t j = 0; j < m; j++) {
                s ^= s << 13, s ^= s >> 17, s ^= s << 5;
                tmp[j] = (float)(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
            }
            size_t at = (size_t)b * kv->block_stride + i;
            if (type == SIMD_KV_F16)
                k->f32_to_f16((uint16_t *)kv->pool + at, tmp, m);
            else
                memcpy((float *)kv->pool + at, tmp, m * sizeof(float));
        }
    }
    for (int b = 0; b < n_blocks; b++)
        kv->table[b] = b;
    for (int b = n_blocks - 1; b > 0; b--) { /* physical order shuffled */
        int j = (int)((uint32_t)(b * 2654435761u) % (uint32_t)(b + 1));
        int32_t t = kv->table[b];
        kv->table[b] = kv->table[j];
        kv->table[j] = t;
    }
    return 0;
}

/* Seconds for one decode step's attention: every (layer, kv head) is one work item. */
static double attention_step(const simd_kernels *k, const bench_kv *kv, int ctx, const float *q,
                             float *out)
{
    simd_attn_shape shape = {N_HEADS, N_KV, HEAD_DIM, ctx - 1, 1, N_HEADS * HEAD_DIM,
                             N_HEADS * HEAD_DIM};
    int group = N_HEADS / N_KV;
    double t0 = now_s();
#pragma omp parallel for schedule(dynamic, 1)
    for (int item = 0; item < N_LAYERS * N_KV; item++) {
        int layer = item / N_KV, g = item % N_KV;
        size_t layer_off = (size_t)layer * 2 * N_KV * TS_KV_BLOCK * HEAD_DIM;
        simd_kv_view view = {
            .pool = kv->pool, .type = kv->type, .block_stride = kv->block_stride,
            .k_offset = layer_off, .v_offset = layer_off + (size_t)N_KV * TS_KV_BLOCK * HEAD_DIM,
            .head_stride = (size_t)TS_KV_BLOCK * HEAD_DIM, .block_table = kv->table,
        };
        size_t qo = (size_t)layer * N_HEADS * HEAD_DIM;
        k->attention(out + qo, q + qo, &view, &shape, g * group, (g + 1) * group);
    }
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int threads = omp_get_max_threads();
    double bw = membw_read((size_t)1 << 30, 5) / 1e9;
    printf("read bandwidth: %.1f GB/s (1 GiB, %d threads, best of 5)\n\n", bw, threads);
    printf("decode attention: %d layers x %d heads / %d kv heads x %d, one sequence, %d threads\n",
           N_LAYERS, N_HEADS, N_KV, HEAD_DIM, threads);
    printf("%6s %4s %-7s %9s %8s %7s %7s\n", "ctx", "kv", "kernel", "ms/step", "GB/s", "of bw", "x ref");

    static const int ctxs[] = {1024, 4096};
    size_t qn = (size_t)N_LAYERS * N_HEADS * HEAD_DIM;
    float *q = malloc(qn * sizeof(float)), *out = malloc(qn * sizeof(float));
    for (size_t i = 0; i < qn; i++)
        q[i] = sinf((float)i * 0.37f);
    for (int c = 0; c < 2; c++) {
        for (int ty = 0; ty < 2; ty++) {
            simd_kv_type type = ty ? SIMD_KV_F16 : SIMD_KV_F32;
            bench_kv kv;
            if (kv_make(&kv, ctxs[c], type) != 0) {
                fprintf(stderr, "bench_kernels: out of memory\n");
                return 1;
            }
            double bytes = (double)N_LAYERS * N_KV * ctxs[c] * HEAD_DIM * 2 * (ty ? 2 : 4);
            double ref_t = 0.0;
            for (int isa = SIMD_ISA_REF; isa < SIMD_ISA_COUNT; isa++) {
                const simd_kernels *k = simd_kernels_for((simd_isa)isa);
                if (!k)
                    continue;
                double best = 1e30, spent = 0.0;
                for (int rep = 0; rep < 50 && (rep < 3 || spent < (quick ? 0.2 : 1.0)); rep++) {
                    double t = attention_step(k, &kv, ctxs[c], q, out);
                    spent += t;
                    best = t < best ? t : best;
                    if (isa == SIMD_ISA_REF && rep >= 1)
                        break; /* the reference is slow and only a yardstick */
                }
                if (isa == SIMD_ISA_REF)
                    ref_t = best;
                printf("%6d %4s %-7s %9.3f %8.1f %6.0f%% %7.1f\n", ctxs[c], ty ? "f16" : "f32",
                       k->name, best * 1e3, bytes / best / 1e9, 100.0 * bytes / best / 1e9 / bw,
                       ref_t / best);
            }
            free(kv.pool);
            free(kv.table);
        }
    }
    free(q);
    free(out);
    return 0;
}
