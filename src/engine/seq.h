/* seq.h: a sequence's life (seq.c), the bottom of the engine's step. */
#ifndef TESSERA_ENGINE_SEQ_H
#define TESSERA_ENGINE_SEQ_H

#include "engine/state.h"

/* False when fault injection says this allocation must fail. Every allocation the step
 * thread makes on a request's behalf asks first. */
bool engine_alloc_ok(ts_engine *e);

/* Creates sequence `index` of job j holding a copy of tokens, appended to the waiting
 * queue. */
ts_status engine_seq_create(ts_engine *e, job *j, int index, const int32_t *tokens,
                            int n_tokens, seq **out, ts_error *err);

/* Appends s to the waiting queue. */
ts_status engine_waiting_add(ts_engine *e, seq *s);

/* Position of s in arr (n), or -1; removal of the entry at i, keeping the order. */
/* Whether s still has prompt tokens to score (its request's prompt_logprobs): the first
 * completion does, up to the prompt's last token. */
bool engine_seq_scores(const seq *s);

int engine_seq_find(seq *const *arr, int n, const seq *s);
void engine_seq_remove_at(seq **arr, int *n, int i);

/* Offers each block of s that its computed tokens filled to the prefix cache (when on). */
void engine_seq_publish(ts_engine *e, seq *s);

/* Runs bytes (NULL: the end of the text) through s's detokenizer and stop matcher; *out
 * (malloc'd, n_out bytes) receives what may be shown now. */
ts_status engine_seq_text(seq *s, const char *bytes, size_t len, char **out, size_t *n_out,
                          ts_error *err);

/* Ends sequence s with finish reason `why`: flushes its held-back text into a DONE
 * event, releases its blocks, marks it done. The caller has removed it from running and
 * waiting. When it was its request's last sequence the request is closed. */
void engine_finish_seq(ts_engine *e, seq *s, ts_finish_reason why);

/* Fails request j with an ERROR event: removes its sequences from running and waiting
 * and ends them. Counted as failed, or as cancelled when st is TS_ERR_CANCELLED. Queue
 * accounting (n_pending) of a never-admitted request is the caller's. */
void engine_fail_request(ts_engine *e, job *j, ts_status st, const char *msg);

/* Frees the sequences and requests that ended during the step. */
void engine_free_dead(ts_engine *e);

#endif /* TESSERA_ENGINE_SEQ_H */
