/* forward_batch.h: the batched forward pass. One call runs every row of an engine step
 * (decode tokens and prefill chunks of many sequences) through the layer stack with one
 * GEMM per weight matrix, reading and writing K/V in the paged pool. */
#ifndef TESSERA_MODEL_FORWARD_BATCH_H
#define TESSERA_MODEL_FORWARD_BATCH_H

#include <stdint.h>

#include "kv/kv.h"
#include "model/model.h"
#include "simd.h"

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

/* Scratch for steps of up to max_rows rows, max_logits of which sample. */
typedef struct fwd_state {
    int max_rows, max_logits;
    float *x;       /* (max_rows, dim) residual stream */
    float *xn;      /* (max_rows, dim) normalised */
    float *qkv;     /* (max_rows, (nh + 2*nkv)*hd) */
    float *att;     /* (max_rows, nh*hd) attention output */
    float *gu;      /* (max_rows, 2*ffn) gate | up, then silu(gate)*up in the gate half */
    int32_t *pos;   /* (max_rows) position of each row */
    float *xs;      /* (max_logits, dim) final-normalised rows that sample */
    float *logits;  /* (max_logits, vocab) */
} fwd_state;

ts_status fwd_state_init(fwd_state *s, const ts_model *m, int max_rows, int max_logits,
                         ts_error *err);
/* Accepts a zeroed or half-built state. */
void fwd_state_free(fwd_state *s);

/* Runs the batch. K/V of every row are written into the pool (the tables must be
 * reserved and their blocks unshared for those positions); logits land in s->logits. */
ts_status forward_batch(fwd_state *s, const ts_model *m, kv_pool *pool, const simd_kernels *k,
                        const fwd_batch *b, ts_error *err);

#endif /* TESSERA_MODEL_FORWARD_BATCH_H */
