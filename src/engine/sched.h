/* sched.h: the stages of a step before the forward pass (sched.c), in order. */
#ifndef TESSERA_ENGINE_SCHED_H
#define TESSERA_ENGINE_SCHED_H

#include "engine/state.h"

/* Ends every sequence whose request asked to be cancelled. */
void sched_cancel(ts_engine *e);

/* Admits waiting sequences, best effective priority first, while slots and KV blocks
 * allow. */
void sched_admit(ts_engine *e, double now);

/* Decides each running sequence's rows for this step and reserves their KV slots,
 * preempting the worst sequences when the pool runs dry. */
void sched_plan(ts_engine *e, double now);

/* Packs the scheduled rows into b (the sequence of b->seqs[i] is step.order[i]) and counts
 * the decode rows among them (step.step_decode); returns the number of sequences. */
int sched_pack(ts_engine *e, fwd_batch *b);

#endif /* TESSERA_ENGINE_SCHED_H */
