/* sampler_filters.h: the samplers llama.cpp's and vLLM's clients ask for by name, as
 * stages sampler.c calls; they build on sampler_core.h and never call back up. */
#ifndef TESSERA_ENGINE_SAMPLER_FILTERS_H
#define TESSERA_ENGINE_SAMPLER_FILTERS_H

#include "engine/sampler_core.h"
#include "tessera/status.h"

/* The lowest logit top-n-sigma keeps among logits (n): max - top_n_sigma * sigma over
 * the finite ones; -inf when top_n_sigma <= 0 or no logit is finite. */
float sampler__sigma_floor(const sampler *s, const float *logits, int n);

/* Locally typical sampling over the kept set c (n, p unnormalised summing to total): keeps
 * the shortest prefix in the order of |-ln p - H| (then canonical) whose mass exceeds
 * typical_p, at least min_keep tokens. Returns the new count; p stays unnormalised. */
int sampler__typical(const sampler *s, sampler_cand *c, int n, double total);

/* XTC over the kept set c (n, p normalised): one draw from s's generator when XTC is on;
 * returns the new count (p renormalised over it). */
int sampler__xtc(sampler *s, sampler_cand *c, int n);

/* Mirostat's kept set of logits (vocab, penalised and biased) in sc->cand, p normalised;
 * returns its count (>= 1). */
int sampler__mirostat_cut(const sampler *s, sampler_scratch *sc, const float *logits);
/* Mirostat's learning step after drawing a token of probability p within the kept set. */
void sampler__mirostat_update(sampler *s, float p);

/* DRY's penalties on logits (vocab) for the history tokens (n_tokens). TS_ERR_NOMEM when
 * its work array cannot be had. */
ts_status sampler__dry(const sampler *s, sampler_scratch *sc, float *logits,
                       const int32_t *tokens, int n_tokens, ts_error *err);

#endif /* TESSERA_ENGINE_SAMPLER_FILTERS_H */
