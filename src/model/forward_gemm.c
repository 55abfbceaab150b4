/* forward_gemm.c: the step's weight GEMM. Each matrix runs as simd_qmat_plan() chose at
 * load (qmat.h): the pass makes each activation form its matrices ask for once, then
 * calls simd_qmat_gemm() once per chunk of a matrix's rows; only f32 matrices of large
 * steps leave that path, for OpenBLAS (fwd_gemm_takes_blas). Matrices that share an input
 * run as one pass over their concatenated output columns (Wq|Wk|Wv, W1|W3): one parallel
 * region, one output buffer, no concatenated copy of the weights. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/forward_batch.h"
#include "qmat.h"

/* Chunks of N per thread. Threads take chunks in turn, so one held up (by another
 * process or an interrupt) delays the GEMM by a chunk, not by its whole share, and the
 * threads that finish first wait for at most one chunk: with 4 a thread, the tail of each
 * of a step's ~90 GEMMs cost up to a quarter of it. On a 16-core Xeon with AMX
 * (bench_layers, TinyLlama Q4_K_M, 16 threads) 8 chunks a thread of 16-row groups made
 * 16- and 64-row steps' GEMMs 8-19% faster than 4 of 32-row pairs, and 16 a further 3-9%
 * at 1, 16 and 64 rows (512 the same). */
enum { GEMM_CHUNKS_PER_THREAD = 16 };

/* But no chunk smaller than this, in weights x (rows + 8): a chunk's cost, its weights
 * streamed (about what 8 rows of products cost beside them) and multiplied with every
 * row. Taking a chunk costs ~80 ns when 16 threads ask at once (an empty dynamic loop
 * of 256 chunks: 20 us on a 16-core Xeon), and stories110m's matrices at 16 threads
 * made chunks of 16 rows x 768 of about a microsecond. 500K is ~2 us there; with it (and
 * 16 a thread otherwise) bench_layers, stories110m Q4_K_M, 16 rows: 2.67 / 2.78 ms a
 * step against 3.05 / 3.07 with 16 chunks a thread alone; TinyLlama's chunks were
 * already larger at 16 and 64 rows (two rounds each). */
enum { GEMM_MIN_CHUNK_COST = 500000 };

/* The most activation bytes a chunk reads, and its most rows: a step's rows go in blocks
 * of about this much, each block's chunks before the next's, so that a thread's chunks of
 * one block find the block's activations in its own L2 (2 MiB a core on a 16-core Xeon
 * with AMX). Without blocks every chunk read all of a step's rows, and a 512-row step of
 * TinyLlama's W2 (K = 5632: 3.3 MB of Q8_K activations) streamed them again from L3 for
 * each 16 weight rows. No more than 256 rows a block: the tile kernels go over a chunk's
 * rows in passes of 256 (SPLIT_ROWS, simd/amx/tiles_split.h), so a longer block only
 * widens what a chunk reads. On that Xeon (bench_layers, TinyLlama Q4_K_M, 512 rows, two
 * rounds): 294-309 ms a step with 1 MiB blocks against 349-371
 * without; 1.5 MiB ones made W2's blocks 176 rows rather than 128 (45-47 ms against 50-53
 * for its Q4_K layers) but left K = 2048's 512 rows in one block (6% slower there). */
enum { GEMM_BLOCK_BYTES = 3 << 19, GEMM_BLOCK_MAX_ROWS = 256 };

/* Passes that make bf16 rows (F16 / BF16 weights on AMX) split a long step by its rows:
 * a task is a block of up to GEMM_ROWS_TASK rows, which one thread rounds to bf16 into a
 * slot of its own and multiplies with every column, so the rows never leave its cache;
 * split by columns, every thread first rounded a share of all rows into memory and then
 * read blocks that other threads had rounded, and the rounding waited on memory (24% of
 * a bge-small F16 embedding step with 16 threads). The cost is each task streaming the
 * pass's weights, so only small passes split by rows (2 MiB in the file's type: the bf16
 * pack is twice that; bge-small's passes are 0.3-1.2 MB), and only with at least two
 * tasks of GEMM_ROWS_TASK_MIN rows a thread. On a 16-core Xeon with AMX (bench --embed,
 * bge-small F16, 64 documents of 256 tokens, 16 threads, two rounds): 38188 / 38375 tok/s
 * with tasks of 128 rows taken in turn against 27541 / 27690 by columns; 256-row tasks
 * 27511 / 27012; 128 rows dealt out in turn (static) 33158 / 34339. Q8_0's activations
 * (bge-small Q8_0) moved within the rounds' spread, so the int8 forms keep the columns. */
enum {
    GEMM_ROWS_TASK = 128,
    GEMM_ROWS_TASK_MIN = 64,
    GEMM_ROWS_MAX_WEIGHT_BYTES = 2 << 20,
};

/* Rows a task of a row split takes for M rows on `threads` threads: GEMM_ROWS_TASK, fewer
 * (whole 16-row tiles) so that each thread has two tasks, 0 (split by columns) under
 * GEMM_ROWS_TASK_MIN. Thread t's slot is rows [t * R, (t + 1) * R) of the step's
 * activation buffer, which holds M rows: two tasks a thread keep the slots inside it. */
static int rows_task(int M, int threads)
{
    int r = M / (2 * threads) / 16 * 16;
    r = r < GEMM_ROWS_TASK ? r : GEMM_ROWS_TASK;
    return r >= GEMM_ROWS_TASK_MIN ? r : 0;
}

int fwd_gemm_rows_task(const simd_qmat *const *w, int n_w, int M, int threads)
{
    long bytes = 0;
    for (int i = 0; i < n_w && i < FWD_MAX_PARTS; i++) {
        if (simd_qmat_act(w[i]) != SIMD_ACT_BF16)
            return 0;
        bytes += (long)qtype_row_bytes(w[i]->type, w[i]->K) * w[i]->N;
    }
    return threads > 1 && bytes <= GEMM_ROWS_MAX_WEIGHT_BYTES ? rows_task(M, threads) : 0;
}

static size_t round_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

/* n to the nearest multiple of a, at least a: a chunk size that keeps the count of chunks
 * near the one asked for (rounding up made TinyLlama's QKV chunks of 40 rows 64 at 4
 * chunks a thread, leaving 16 threads 2.5 chunks each). */
static size_t round_near(size_t n, size_t a)
{
    return n < a ? a : (n + a / 2) / a * a;
}

ts_status fwd_qbuf_init(fwd_qbuf *q, const simd_qmat *const *mats, int n_mats, int max_rows,
                        int max_k, ts_error *err)
{
    memset(q, 0, sizeof *q);
    bool need[SIMD_ACT_FORMS] = {false};
    for (int i = 0; i < n_mats; i++)
        if (simd_qmat_act(mats[i]) != SIMD_ACT_ROWS)
            need[simd_qmat_act(mats[i])] = true;
    for (int a = 0; a < SIMD_ACT_FORMS; a++) {
        if (!need[a])
            continue;
        q->row_cap[a] = simd_act_row_bytes(a, (int)round_up((size_t)max_k, QK_K));
        size_t bytes = round_up(q->row_cap[a] * (size_t)max_rows, 64);
        if (!(q->form[a] = aligned_alloc(64, bytes))) {
            fwd_qbuf_free(q);
            return ts_error_set(err, TS_ERR_NOMEM, "activation blocks for %d rows", max_rows);
        }
    }
    return TS_OK;
}

void fwd_qbuf_free(fwd_qbuf *q)
{
    for (int a = 0; a < SIMD_ACT_FORMS; a++)
        free(q->form[a]);
    memset(q, 0, sizeof *q);
}

/* Rows [r0, r1) of a (stride lda, K inputs) into form f at out (whole rows of the form). */
static void quantize_part(const simd_kernels *k, void *out, const float *a, int lda, int r0,
                          int r1, int K, int f)
{
    simd_act_make(k, (char *)out + (size_t)r0 * simd_act_row_bytes(f, K), a + (size_t)r0 * lda,
                  (size_t)lda, r1 - r0, K, f);
}

/* Whether w goes to OpenBLAS in a pass that sends f32 matrices there (`blas`): the one
 * place a step overrides a matrix's plan. */
static bool on_blas(const simd_qmat *w, bool blas)
{
    return blas && w->type == QT_F32;
}

/* out[:, col0 ..] (M, N; stride ldo) = a . w^T + beta * out through OpenBLAS (f32 only);
 * sgemv for one row: OpenBLAS 0.3.21's sgemm packs W even for M = 1, which costs a copy
 * of every weight and made single-stream decode ~3x slower than streaming W once. */
static void blas_gemm(float *out, size_t ldo, const float *a, int lda, const simd_qmat *w,
                      int M, float beta)
{
    const float *wf = w->data;
    if (M == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, w->N, w->K, 1.0f, wf, w->K, a, 1, beta, out, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, w->N, w->K, 1.0f, a, lda, wf,
                    w->K, beta, out, (int)ldo);
}

/* What a pass runs on the kernels: its matrices but those OpenBLAS takes, their first
 * output column and their chunks, their activations, and the forms to make first. */
typedef struct gemm_plan {
    const simd_qmat *part[FWD_MAX_PARTS];
    int col0[FWD_MAX_PARTS], chunk[FWD_MAX_PARTS], chunk0[FWD_MAX_PARTS + 1], n_parts;
    const char *x[FWD_MAX_PARTS];  /* each part's activation rows in its form */
    size_t x_row[FWD_MAX_PARTS];   /* bytes between them */
    const void *xq[SIMD_ACT_FORMS]; /* the rows of each form the pass reads */
    int todo[SIMD_ACT_FORMS], n_todo; /* forms the pass makes from a first */
    int K;
    int block_rows, n_blocks; /* the step's rows in n_blocks blocks of block_rows (the last
                                 may be shorter), each block's chunks in turn */
    bool parallel; /* enough work to split over threads */
    int split_rows; /* > 0: split the step's rows instead, this many a task (gemm_rows_run) */
    bool made[FWD_MAX_PARTS]; /* part p reads a form the pass makes (not rows in place) */
} gemm_plan;

/* The plan of a pass over w on `threads` threads, leaving out the f32 matrices when
 * `blas` (the caller runs those through OpenBLAS). Plain arithmetic on its arguments:
 * every thread of a team makes the same plan. */
static void gemm_plan_make(gemm_plan *g, const fwd_qbuf *qb, const float *a, int lda,
                           const simd_qmat *const *w, int n_w, int M, bool blas, int threads)
{
    memset(g, 0, sizeof *g);
    long work = 0;
    int col = 0, K = w[0]->K;
    g->K = K;
    for (int i = 0; i < n_w && i < FWD_MAX_PARTS; col += w[i]->N, i++) {
        if (on_blas(w[i], blas))
            continue;
        int f = simd_qmat_act(w[i]);
        if (f == SIMD_ACT_ROWS) {
            g->x[g->n_parts] = (const char *)a;
            g->x_row[g->n_parts] = (size_t)lda * sizeof(float);
        } else {
            /* each activation form once for all the matrices that take it */
            if (!g->xq[f] && f == QACT_F32 && lda == K) {
                g->xq[f] = a;
            } else if (!g->xq[f]) {
                g->xq[f] = qb->form[f];
                g->todo[g->n_todo++] = f;
            }
            g->made[g->n_parts] = g->xq[f] != a;
            g->x[g->n_parts] = g->xq[f];
            g->x_row[g->n_parts] = simd_act_row_bytes(f, K);
        }
        g->part[g->n_parts] = w[i];
        g->col0[g->n_parts++] = col;
        work += (long)w[i]->N * K;
    }
    g->parallel = work >= FWD_PARALLEL_MIN_WORK && threads > 1;
    g->split_rows = g->parallel ? fwd_gemm_rows_task(w, n_w, M, threads) : 0;
    /* rows a block: the widest form a chunk reads within GEMM_BLOCK_BYTES, whole 16-row
     * tiles, the blocks of a step as even as that allows */
    size_t row_bytes = (size_t)K * sizeof(float);
    for (int f = 0; f < SIMD_ACT_FORMS; f++)
        if (g->xq[f] && simd_act_row_bytes(f, K) > row_bytes)
            row_bytes = simd_act_row_bytes(f, K);
    long fit = (long)(GEMM_BLOCK_BYTES / row_bytes) / 16 * 16;
    fit = fit < 16 ? 16 : fit > GEMM_BLOCK_MAX_ROWS ? GEMM_BLOCK_MAX_ROWS : fit;
    g->n_blocks = M > fit ? (int)((M + fit - 1) / fit) : 1;
    g->block_rows = (int)round_up((size_t)(M + g->n_blocks - 1) / (size_t)g->n_blocks, 16);
    int n_want = g->parallel ? threads * GEMM_CHUNKS_PER_THREAD : 1; /* one thread: one */
    n_want = (n_want + g->n_blocks - 1) / g->n_blocks;
    int rows_b = M < g->block_rows ? M : g->block_rows;
    long rows = (work / K + n_want - 1) / n_want;
    long min_rows = GEMM_MIN_CHUNK_COST / ((long)K * (rows_b + 8));
    rows = rows > min_rows ? rows : min_rows;
    for (int p = 0; p < g->n_parts; p++) {
        const simd_qmat *m = g->part[p];
        g->chunk[p] = (int)round_near((size_t)rows, (size_t)m->mul.n_align);
        g->chunk0[p + 1] = g->chunk0[p] + (m->N + g->chunk[p] - 1) / g->chunk[p];
    }
}

/* Rows [r0, r1) of a (stride lda, K wide) rewritten by pre, one row at a time as the
 * separate stages did. */
static void pre_rows(const simd_kernels *k, const fwd_pre *pre, float *a, int lda, int r0,
                     int r1, int K)
{
    for (int r = r0; r < r1; r++) {
        float *row = a + (size_t)r * lda;
        if (pre->kind == FWD_PRE_RMSNORM)
            k->rmsnorm(row, pre->x + (size_t)r * lda, pre->weight, 1, K, pre->eps);
        else if (pre->kind == FWD_PRE_GATHER)
            memcpy(row, pre->x + (size_t)pre->rows[r] * K, (size_t)K * sizeof *row);
        else if (pre->kind == FWD_PRE_SILU_MUL)
            k->silu_mul(row, row, row + K, (size_t)K);
        else
            k->gelu_mul(row, row, row + K, (size_t)K);
    }
}

/* Runs a row-split plan (GEMM_ROWS_TASK says when) on the threads of the enclosing team:
 * each task, a block of split_rows rows, is pre on those rows, their bf16 form into the
 * thread's own slot of qb (rows_task), then every part's columns for them. No thread
 * reads what another made. */
static void gemm_rows_run(const gemm_plan *g, const simd_kernels *k, const fwd_qbuf *qb,
                          float *out, size_t ldo, float *a, int lda, const fwd_pre *pre, int M,
                          float beta)
{
    int K = g->K, R = g->split_rows, t = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
    for (int r0 = 0; r0 < M; r0 += R) {
        int rows = M - r0 < R ? M - r0 : R;
        if (pre)
            pre_rows(k, pre, a, lda, r0, r0 + rows, K);
        for (int i = 0; i < g->n_todo; i++) {
            int f = g->todo[i];
            simd_act_make(k, (char *)qb->form[f] + (size_t)t * R * simd_act_row_bytes(f, K),
                          a + (size_t)r0 * lda, (size_t)lda, rows, K, f);
        }
        for (int p = 0; p < g->n_parts; p++) {
            const char *x = g->made[p] ? g->x[p] + (size_t)t * R * g->x_row[p]
                                       : g->x[p] + (size_t)r0 * g->x_row[p];
            simd_qmat_gemm(out + (size_t)r0 * ldo + g->col0[p], ldo, x, (size_t)lda, g->part[p],
                           rows, beta, 0, g->part[p]->N);
        }
    }
}

/* Runs a plan on the threads of the enclosing team (worksharing loops, each ending at a
 * barrier; outside a region, on the calling thread alone): pre and the activations'
 * quantization, each thread a slice of the rows, then the chunks. */
static void gemm_plan_run(const gemm_plan *g, const simd_kernels *k, const fwd_qbuf *qb,
                          float *out, size_t ldo, float *a, int lda, const fwd_pre *pre, int M,
                          float beta)
{
    int nt = omp_get_num_threads(), K = g->K;
    if (g->split_rows > 0) {
        gemm_rows_run(g, k, qb, out, ldo, a, lda, pre, M, beta);
        return;
    }
    if (g->n_todo > 0 || pre) {
#pragma omp for schedule(static)
        for (int t = 0; t < nt; t++) {
            int r0 = (int)((long)M * t / nt), r1 = (int)((long)M * (t + 1) / nt);
            if (r0 < r1 && pre)
                pre_rows(k, pre, a, lda, r0, r1, K);
            for (int i = 0; r0 < r1 && i < g->n_todo; i++)
                quantize_part(k, qb->form[g->todo[i]], a, lda, r0, r1, K, g->todo[i]);
        }
    }
    /* each chunk is a contiguous range of one matrix's rows, streamed once per block */
    int per_block = g->chunk0[g->n_parts];
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < g->n_blocks * per_block; i++) {
        int r0 = i / per_block * g->block_rows, c = i % per_block, p = 0;
        int rows = M - r0 < g->block_rows ? M - r0 : g->block_rows;
        while (c >= g->chunk0[p + 1])
            p++;
        const simd_qmat *m = g->part[p];
        int nb = (c - g->chunk0[p]) * g->chunk[p];
        int ne = nb + g->chunk[p] < m->N ? nb + g->chunk[p] : m->N;
        simd_qmat_gemm(out + (size_t)r0 * ldo + g->col0[p], ldo, g->x[p] + (size_t)r0 * g->x_row[p],
                       (size_t)lda, m, rows, beta, nb, ne);
    }
}

bool fwd_gemm_takes_blas(const simd_kernels *k, fwd_gemm_path path, int M)
{
    return path == FWD_GEMM_BLAS || (path == FWD_GEMM_AUTO && M > k->gemm_nt_max_rows);
}

void fwd_gemm(const simd_kernels *k, fwd_gemm_path path, const fwd_qbuf *qb, float *out,
              size_t ldo, float *a, int lda, const fwd_pre *pre, const simd_qmat *const *w,
              int n_w, int M, float beta)
{
    bool blas = fwd_gemm_takes_blas(k, path, M);
    int col = 0;
    for (int i = 0; i < n_w && i < FWD_MAX_PARTS; col += w[i]->N, i++) {
        if (!on_blas(w[i], blas))
            continue;
        if (pre) { /* OpenBLAS reads every row: pre goes over them all first */
            long work = (long)M * w[0]->K;
#pragma omp parallel for schedule(static) if (work >= FWD_PARALLEL_MIN_WORK)
            for (int r = 0; r < M; r++)
                pre_rows(k, pre, a, lda, r, r + 1, w[0]->K);
            pre = NULL;
        }
        blas_gemm(out + col, ldo, a, lda, w[i], M, beta);
    }
    gemm_plan g;
    gemm_plan_make(&g, qb, a, lda, w, n_w, M, blas, omp_get_max_threads());
    if (g.n_parts == 0)
        return;
    /* One region: pre and the quantization, a barrier, the chunks. A region of its own for
     * the quantization cost a start (4-6 us at 16 threads) in each of a step's ~90 GEMMs. */
#pragma omp parallel if (g.parallel)
    gemm_plan_run(&g, k, qb, out, ldo, a, lda, pre, M, beta);
}

void fwd_gemm_team(const simd_kernels *k, const fwd_qbuf *qb, float *out, size_t ldo,
                   float *a, int lda, const fwd_pre *pre, const simd_qmat *const *w, int n_w,
                   int M, float beta)
{
    gemm_plan g;
    gemm_plan_make(&g, qb, a, lda, w, n_w, M, false, omp_get_num_threads());
    gemm_plan_run(&g, k, qb, out, ldo, a, lda, pre, M, beta);
}

/* ---- grouped passes (a mixture's experts) ------------------------------------------- */

/* Rows of matrix m (in a group of n_rows rows, K inputs) a chunk of a grouped pass takes:
 * the matrix's share of threads * GEMM_CHUNKS_PER_THREAD chunks by its share of the
 * pass's work (total), no chunk under GEMM_MIN_CHUNK_COST, whole tiles. Plain arithmetic:
 * every thread gets the same. */
static int grouped_chunk(const simd_qmat *m, int n_rows, int K, long total, int threads)
{
    long work = (long)m->N * K * n_rows;
    long want = total > 0 ? (long)threads * GEMM_CHUNKS_PER_THREAD * work / total : 1;
    want = want < 1 ? 1 : want;
    long rows = (m->N + want - 1) / want;
    long min_rows = GEMM_MIN_CHUNK_COST / ((long)K * (n_rows + 8));
    rows = rows > min_rows ? rows : min_rows;
    return (int)round_near((size_t)rows, (size_t)m->mul.n_align);
}

/* The matrix of part p of groups g (group p / FWD_MAX_PARTS), or NULL where that group has
 * no such part or no rows. */
static const simd_qmat *grouped_part(const fwd_group *g, int p)
{
    const fwd_group *gr = &g[p / FWD_MAX_PARTS];
    int j = p % FWD_MAX_PARTS;
    return j < gr->n_w && gr->n_rows > 0 && gr->w[j]->N > 0 ? gr->w[j] : NULL;
}

/* The grouped pass on the threads of the enclosing team (worksharing loops; outside a
 * region, on the calling thread alone): pre and the activations' forms, each thread a
 * slice of the rows, then every group's chunks in one loop. */
static void grouped_run(const simd_kernels *k, const fwd_qbuf *qb, float *out, size_t ldo,
                        float *a, int lda, const fwd_pre *pre, const fwd_group *g,
                        int n_groups, int M, int K, int *chunk0)
{
    int nt = omp_get_num_threads(), n_parts = n_groups * FWD_MAX_PARTS;
    const void *xq[SIMD_ACT_FORMS] = {0};
    int todo[SIMD_ACT_FORMS], n_todo = 0;
    long total = 0;
    for (int p = 0; p < n_parts; p++) {
        const simd_qmat *m = grouped_part(g, p);
        if (!m)
            continue;
        total += (long)m->N * K * g[p / FWD_MAX_PARTS].n_rows;
        int f = simd_qmat_act(m);
        if (f == SIMD_ACT_ROWS)
            continue;
        if (!xq[f] && f == QACT_F32 && lda == K) {
            xq[f] = a;
        } else if (!xq[f]) {
            xq[f] = qb->form[f];
            todo[n_todo++] = f;
        }
    }
#pragma omp for schedule(static)
    for (int t = 0; t < nt; t++) {
        int r0 = (int)((long)M * t / nt), r1 = (int)((long)M * (t + 1) / nt);
        if (r0 < r1 && pre)
            pre_rows(k, pre, a, lda, r0, r1, K);
        for (int i = 0; r0 < r1 && i < n_todo; i++)
            quantize_part(k, qb->form[todo[i]], a, lda, r0, r1, K, todo[i]);
        if (t == 0) { /* the chunk list, under the same barrier as the rows */
            chunk0[0] = 0;
            for (int p = 0; p < n_parts; p++) {
                const simd_qmat *m = grouped_part(g, p);
                int c = m ? grouped_chunk(m, g[p / FWD_MAX_PARTS].n_rows, K, total, nt) : 1;
                chunk0[p + 1] = chunk0[p] + (m ? (m->N + c - 1) / c : 0);
            }
        }
    }
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < chunk0[n_parts]; i++) {
        int lo = 0, hi = n_parts - 1; /* the part p with chunk0[p] <= i < chunk0[p + 1] */
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (chunk0[mid] <= i)
                lo = mid;
            else
                hi = mid - 1;
        }
        int p = lo;
        const fwd_group *gr = &g[p / FWD_MAX_PARTS];
        const simd_qmat *m = gr->w[p % FWD_MAX_PARTS];
        int col0 = 0;
        for (int j = 0; j < p % FWD_MAX_PARTS; j++)
            col0 += gr->w[j]->N;
        int c = grouped_chunk(m, gr->n_rows, K, total, nt);
        int nb = (i - chunk0[p]) * c, ne = nb + c < m->N ? nb + c : m->N;
        int f = simd_qmat_act(m);
        const char *x = f == SIMD_ACT_ROWS
                            ? (const char *)(a + (size_t)gr->row0 * lda)
                            : (const char *)xq[f] + (size_t)gr->row0 * simd_act_row_bytes(f, K);
        simd_qmat_gemm(out + (size_t)gr->row0 * ldo + col0, ldo, x, (size_t)lda, m, gr->n_rows,
                       0.0f, nb, ne);
    }
}

void fwd_gemm_grouped(const simd_kernels *k, const fwd_qbuf *qb, float *out, size_t ldo,
                      float *a, int lda, const fwd_pre *pre, const fwd_group *g, int n_groups,
                      int M, int *scratch, bool team)
{
    int K = 0;
    long work = 0;
    for (int p = 0; p < n_groups * FWD_MAX_PARTS; p++) {
        const simd_qmat *m = grouped_part(g, p);
        if (m) {
            K = m->K;
            work += (long)m->N * m->K * g[p / FWD_MAX_PARTS].n_rows;
        }
    }
    if (K == 0)
        return; /* no group has rows */
    if (team) {
        grouped_run(k, qb, out, ldo, a, lda, pre, g, n_groups, M, K, scratch);
        return;
    }
    bool parallel = work >= FWD_PARALLEL_MIN_WORK && omp_get_max_threads() > 1;
#pragma omp parallel if (parallel)
    grouped_run(k, qb, out, ldo, a, lda, pre, g, n_groups, M, K, scratch);
}
