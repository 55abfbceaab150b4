/* pool.h: the step's stage for embed requests (pool.c), after the forward pass: each
 * chunk's pooled rows added to its sequence's vector, and the vector sent once the whole
 * input is in. */
#ifndef TESSERA_ENGINE_POOL_H
#define TESSERA_ENGINE_POOL_H

#include "engine/state.h"

/* For each sequence of b (n) with a pool_row: takes its chunk's pooled rows from the
 * forward pass into s->pooled (a chunk at position 0 starts the vector afresh, so a
 * preempted sequence recomputes cleanly); when its last row is computed, finishes the
 * pooling (the mean divides by the token count), scales the vector to unit L2 norm and
 * ends the sequence with a DONE event carrying it (a reranker's scores, rank
 * pooling, are not scaled). Runs after publish (n_computed
 * advanced). */
void pool_collect(ts_engine *e, const fwd_batch *b, int n);

#endif /* TESSERA_ENGINE_POOL_H */
