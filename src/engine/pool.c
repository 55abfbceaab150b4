/* pool.c: embed requests after the forward pass: pooled chunks added up, the vector
 * finished and sent (pool.h). */
#include <math.h>
#include <string.h>

#include "common/l2norm.h"
#include "engine/pool.h"
#include "engine/seq.h"

/* Adds (or, for a chunk that starts the input or for last-token pooling, copies) the
 * chunk's pooled row into s's vector. */
static void take_chunk(const ts_engine *e, seq *s, const fwd_seq *fs)
{
    const ts_model_config *c = &e->model->cfg;
    const float *row = e->step.fwd.pooled + (size_t)fs->pool_row * c->dim;
    if (fs->pos0 == 0 || c->pooling == TS_POOLING_LAST) {
        memcpy(s->pooled, row, (size_t)c->dim * sizeof(float));
        return;
    }
    for (int d = 0; d < c->dim; d++)
        s->pooled[d] += row[d];
}

/* s's input is all in: its vector finished and sent, the sequence ended. */
static void finish_vector(ts_engine *e, seq *s)
{
    const ts_model_config *c = &e->model->cfg;
    if (c->pooling == TS_POOLING_MEAN)
        for (int d = 0; d < c->dim; d++)
            s->pooled[d] /= (float)s->n_tokens;
    if (c->pooling != TS_POOLING_RANK) /* a reranker's scores stay as they are */
        l2_normalize(s->pooled, c->dim);
    int i = engine_seq_find(e->step.running, e->step.n_running, s);
    if (i >= 0)
        engine_seq_remove_at(e->step.running, &e->step.n_running, i);
    engine_finish_seq(e, s, TS_FINISH_STOP);
}

void pool_collect(ts_engine *e, const fwd_batch *b, int n)
{
    if (b->n_pooled == 0)
        return;
    for (int i = 0; i < n; i++) {
        seq *s = e->step.order[i];
        const fwd_seq *fs = &b->seqs[i];
        if (fs->pool_row < 0 || s->done || !s->pooled)
            continue;
        take_chunk(e, s, fs);
        if (s->n_computed == s->n_tokens)
            finish_vector(e, s);
    }
}
