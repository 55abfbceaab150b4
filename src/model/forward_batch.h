/* forward_batch.h: the batched forward pass. One call runs every row of an engine step
 * (decode tokens and prefill chunks of many sequences) through the layer stack with one
 * GEMM per weight matrix, reading and writing K/V in the paged pool. */
#ifndef TESSERA_MODEL_FORWARD_BATCH_H
#define TESSERA_MODEL_FORWARD_BATCH_H

#include <stdint.h>

#include "kv/kv.h"
#include "model/model.h"
#include "simd.h"
#include "tessera/step_phase.h"

/* One sequence's share of a step: rows row0 .. row0+n_rows-1 hold its tokens at positions
 * pos0 .. pos0+n_rows-1. */
typedef struct fwd_seq {
    int row0;
    int n_rows;
    int pos0;
    const kv_table *table; /* borrowed: reserved through position pos0 + n_rows - 1 */
    int logits_row;        /* row of the logits output for its last row; -1: no logits */
} fwd_seq;

typedef struct fwd_batch {
    int n_rows;
    const int32_t *tokens; /* (n_rows) borrowed */
    int n_seqs;
    const fwd_seq *seqs;   /* (n_seqs) borrowed, rows in order, no gaps */
    int n_logits;          /* sequences with logits_row >= 0; rows 0..n_logits-1 */
} fwd_batch;

/* How the step multiplies activation rows by a weight matrix. */
typedef enum fwd_gemm_path {
    FWD_GEMM_AUTO,   /* the SIMD skinny GEMM up to the table's gemm_nt_max_rows, OpenBLAS above */
    FWD_GEMM_BLAS,   /* OpenBLAS always (cblas_sgemv for one row) */
    FWD_GEMM_KERNEL, /* the SIMD skinny GEMM always */
} fwd_gemm_path;

/* Scratch for steps of up to max_rows rows, max_logits of which sample. */
typedef struct fwd_state {
    int max_rows, max_logits;
    fwd_gemm_path gemm_path; /* auto after fwd_state_init; the engine sets its option's */
    float *x;       /* (max_rows, dim) residual stream */
    float *xn;      /* (max_rows, dim) normalised */
    float *qkv;     /* (max_rows, (nh + 2*nkv)*hd) */
    float *att;     /* (max_rows, nh*hd) attention output */
    float *gu;      /* (max_rows, 2*ffn) gate | up, then silu(gate)*up in the gate half */
    int32_t *pos;   /* (max_rows) position of each row */
    float *rope;    /* (max_rows, SIMD_ROPE_TABLE_FLOATS(head_dim)) RoPE terms of the step */
    float *xs;      /* (max_logits, dim) final-normalised rows that sample */
    float *logits;  /* (max_logits, vocab) */
    double seconds[TS_PHASE_COUNT]; /* wall time forward_batch spent per phase (rowwise,
                                     * gemm, attention, lm_head), added up; the caller
                                     * reads and resets it */
} fwd_state;

/* Fails only when out of memory. */
ts_status fwd_state_init(fwd_state *s, const ts_model *m, int max_rows, int max_logits,
                         ts_error *err);
/* Accepts a zeroed or half-built state. */
void fwd_state_free(fwd_state *s);

/* out (M, N) = a (M, K; row stride lda) . w^T + beta * out, w (N, K) row-major, through
 * `path` (FWD_GEMM_AUTO picks by M). The kernel path splits N over the OpenMP threads.
 * All pointers borrowed; out must not overlap a or w. */
void fwd_gemm(const simd_kernels *k, fwd_gemm_path path, float *out, const float *a, int lda,
              const float *w, int M, int N, int K, float beta);

/* Runs the batch. K/V of every row are written into the pool (the tables must be
 * reserved and their blocks unshared for those positions); logits land in s->logits. */
ts_status forward_batch(fwd_state *s, const ts_model *m, kv_pool *pool, const simd_kernels *k,
                        const fwd_batch *b, ts_error *err);

#endif /* TESSERA_MODEL_FORWARD_BATCH_H */
