/* emit.h: the stages of a step after the forward pass (emit.c). */
#ifndef TESSERA_ENGINE_EMIT_H
#define TESSERA_ENGINE_EMIT_H

#include "engine/state.h"

/* Draws the tokens of every sequence of b (n) that samples now into picks, rows in
 * parallel (each thread on its own scratch; a sequence's sampler is its own). */
void emit_sample(ts_engine *e, const fwd_batch *b, int n);

/* The PROMPT events of the step's sequences that score prompt rows (fwd_seq.all_logits),
 * from their logits rows, which it leaves as they are: it runs before emit_sample. */
void emit_prompt_logprobs(ts_engine *e, const fwd_batch *b, int n);

/* Appends each sampled token and emits its text, ending the sequences that are done; the
 * prompt sequence of an n > 1 request whose prompt just finished forks into its n
 * completions, which sample their first tokens from its logits. */
void emit_tokens(ts_engine *e, const fwd_batch *b, int n);

/* Draws s's next token from logits (vocab; modified) into out, on the step thread with
 * its first sampler scratch: the sampling of one row, for rows drawn one after another. */
void emit_sample_row(ts_engine *e, seq *s, float *logits, sampled *out);

/* Appends the token drawn for s and emits its text, ending s when it is done (or failing
 * its request when sampling failed). */
void emit_append(ts_engine *e, seq *s, const sampled *pick);

#endif /* TESSERA_ENGINE_EMIT_H */
