/* bench_kernels.c: the machine's read bandwidth, then decode attention over a paged KV
 * cache per kernel table, in GB/s of KV read, against that bandwidth and against ref; then
 * a 512-token prompt's attention (causal, in the engine's tasks of 32 query rows x one kv
 * head) per SIMD table but ref, in GFLOP/s (4 x head_dim a query and key it reaches: q.k
 * and p v).
 * Usage: build/bench_kernels [--quick] [--prefill] [--heads H KV] [--ctx N ...]
 *   --prefill   that part alone
 *   --heads     query and kv heads (default 32 8, TinyLlama's; 12 12 is stories110m's)
 *   --ctx       the decode contexts (default 1024 4096; the last option on the line)
 * threads: OMP_NUM_THREADS, default all cores */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/membw.h"
#include "simd.h"

/* A realistic decode shape: 22 layers of 32 query heads over 8 kv heads of 64 (--heads
 * changes the heads). */
#define N_LAYERS 22
#define HEAD_DIM 64
static int N_HEADS = 32, N_KV = 8;

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
    simd_attn_shape shape = {.n_heads = N_HEADS, .n_kv_heads = N_KV, .head_dim = HEAD_DIM,
                             .pos0 = ctx - 1, .n_rows = 1, .q_stride = N_HEADS * HEAD_DIM,
                             .out_stride = N_HEADS * HEAD_DIM};
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

typedef double (*step_fn)(const simd_kernels *k, const bench_kv *kv, int n, const float *q,
                          float *out);

/* Best seconds of step over at least 3 repeats and ~1 s (0.2 with quick); the reference
 * table, slow and only a yardstick, twice. */
static double best_of(step_fn step, const simd_kernels *k, const bench_kv *kv, int n,
                      const float *q, float *out, int quick)
{
    double best = 1e30, spent = 0.0;
    for (int rep = 0; rep < 50 && (rep < 3 || spent < (quick ? 0.2 : 1.0)); rep++) {
        double t = step(k, kv, n, q, out);
        spent += t;
        best = t < best ? t : best;
        if (k == simd_kernels_for(SIMD_ISA_REF) && rep >= 1)
            break;
    }
    return best;
}

/* Query rows of a prefill task, as the engine's ATT_CHUNK_ROWS. */
enum { PREFILL_CHUNK = 32 };

/* Seconds for one prompt step's attention: rows 0 .. n - 1 of one sequence, every layer;
 * each (layer, chunk of rows, kv head) is one work item. */
static double prefill_step(const simd_kernels *k, const bench_kv *kv, int n, const float *q,
                           float *out)
{
    int group = N_HEADS / N_KV, chunks = (n + PREFILL_CHUNK - 1) / PREFILL_CHUNK;
    size_t row = (size_t)N_HEADS * HEAD_DIM;
    double t0 = now_s();
#pragma omp parallel for schedule(dynamic, 1)
    for (int item = 0; item < N_LAYERS * chunks * N_KV; item++) {
        int layer = item / (chunks * N_KV), c = item / N_KV % chunks, g = item % N_KV;
        size_t layer_off = (size_t)layer * 2 * N_KV * TS_KV_BLOCK * HEAD_DIM;
        simd_kv_view view = {
            .pool = kv->pool, .type = kv->type, .block_stride = kv->block_stride,
            .k_offset = layer_off, .v_offset = layer_off + (size_t)N_KV * TS_KV_BLOCK * HEAD_DIM,
            .head_stride = (size_t)TS_KV_BLOCK * HEAD_DIM, .block_table = kv->table,
        };
        int r0 = c * PREFILL_CHUNK;
        simd_attn_shape shape = {.n_heads = N_HEADS, .n_kv_heads = N_KV, .head_dim = HEAD_DIM,
                                 .pos0 = r0,
                                 .n_rows = n - r0 < PREFILL_CHUNK ? n - r0 : PREFILL_CHUNK,
                                 .q_stride = row, .out_stride = row};
        size_t at = ((size_t)layer * n + r0) * row;
        k->attention(out + at, q + at, &view, &shape, g * group, (g + 1) * group);
    }
    return now_s() - t0;
}

static int prefill_part(int quick)
{
    enum { N = 512 };
    printf("\nprefill attention: %d-token prompt, %d layers x %d heads / %d kv heads x %d, "
           "tasks of %d rows x 1 kv head, %d threads\n",
           N, N_LAYERS, N_HEADS, N_KV, HEAD_DIM, PREFILL_CHUNK, omp_get_max_threads());
    printf("%4s %-11s %9s %9s\n", "kv", "kernel", "ms/step", "GFLOP/s");
    size_t qn = (size_t)N_LAYERS * N * N_HEADS * HEAD_DIM;
    float *q = malloc(qn * sizeof(float)), *out = malloc(qn * sizeof(float));
    int rc = q && out ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < qn; i++)
        q[i] = sinf((float)i * 0.37f);
    double flops = 4.0 * HEAD_DIM * N_LAYERS * N_HEADS * (double)N * (N + 1) / 2;
    for (int ty = 0; rc == 0 && ty < 2; ty++) {
        bench_kv kv;
        if ((rc = kv_make(&kv, N, ty ? SIMD_KV_F16 : SIMD_KV_F32)) != 0)
            break;
        for (int isa = SIMD_ISA_REF + 1; isa < SIMD_ISA_COUNT; isa++) { /* ref: minutes */
            const simd_kernels *k = simd_kernels_for((simd_isa)isa);
            if (!k)
                continue;
            double best = best_of(prefill_step, k, &kv, N, q, out, quick);
            printf("%4s %-11s %9.3f %9.1f\n", ty ? "f16" : "f32", k->name, best * 1e3,
                   flops / best / 1e9);
        }
        free(kv.pool);
        free(kv.table);
    }
    free(q);
    free(out);
    return rc;
}

int main(int argc, char **argv)
{
    int quick = 0, prefill_only = 0, n_ctx = 2;
    int ctxs[16] = {1024, 4096};
    for (int i = 1; i < argc; i++) {
        quick |= strcmp(argv[i], "--quick") == 0;
        prefill_only |= strcmp(argv[i], "--prefill") == 0;
        if (strcmp(argv[i], "--heads") == 0 && i + 2 < argc) {
            N_HEADS = atoi(argv[i + 1]);
            N_KV = atoi(argv[i + 2]);
            i += 2;
        } else if (strcmp(argv[i], "--ctx") == 0) {
            for (n_ctx = 0; i + 1 < argc && n_ctx < 16 && atoi(argv[i + 1]) > 0; i++)
                ctxs[n_ctx++] = atoi(argv[i + 1]);
        }
    }
    if (N_HEADS < 1 || N_KV < 1 || N_HEADS % N_KV || n_ctx < 1) {
        fprintf(stderr, "bench_kernels: --heads H KV: H a multiple of KV; --ctx N ... > 0\n");
        return 2;
    }
    if (prefill_only && prefill_part(quick) != 0) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        return 1;
    }
    if (prefill_only)
        return 0;
    int threads = omp_get_max_threads();
    double bw = membw_read((size_t)1 << 30, 5) / 1e9;
    printf("read bandwidth: %.1f GB/s (1 GiB, %d threads, best of 5)\n\n", bw, threads);
    printf("decode attention: %d layers x %d heads / %d kv heads x %d, one sequence, %d threads\n",
           N_LAYERS, N_HEADS, N_KV, HEAD_DIM, threads);
    printf("%6s %4s %-7s %9s %8s %7s %7s\n", "ctx", "kv", "kernel", "ms/step", "GB/s", "of bw", "x ref");

    size_t qn = (size_t)N_LAYERS * N_HEADS * HEAD_DIM;
    float *q = malloc(qn * sizeof(float)), *out = malloc(qn * sizeof(float));
    for (size_t i = 0; i < qn; i++)
        q[i] = sinf((float)i * 0.37f);
    for (int c = 0; c < n_ctx; c++) {
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
                double best = best_of(attention_step, k, &kv, ctxs[c], q, out, quick);
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
    if (prefill_part(quick) != 0) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        return 1;
    }
    return 0;
}
