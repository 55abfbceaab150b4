/* sampler.h: the per-request token sampler (penalties, greedy, temperature, top-k,
 * min-p, top-p, a seeded draw, logprobs) and the per-thread scratch it works in. */
#ifndef TESSERA_ENGINE_SAMPLER_H
#define TESSERA_ENGINE_SAMPLER_H

#include <stdint.h>

#include "engine/sampler_core.h"
#include "tessera/sampling.h"
#include "tessera/status.h"

typedef struct sampler_token_logprob {
    int32_t id;
    float logprob;
} sampler_token_logprob;

/* Log-probabilities as OpenAI reports them: of the model's distribution after the
 * penalties and the temperature (temperature 1 when greedy), over the whole vocabulary,
 * BEFORE top-k / min-p / top-p truncation. A token the model rules out gets -INFINITY
 * (the HTTP layer clamps it; OpenAI writes -9999). */
typedef struct sampler_logprobs {
    int32_t token; /* the chosen token */
    float logprob; /* its log-probability */
    int n_top;     /* min(params.top_logprobs, vocab_size) */
    sampler_token_logprob top[TS_SAMPLING_MAX_TOP_LOGPROBS]; /* (n_top), canonical order */
} sampler_logprobs;

/* Validates params (borrowed; copied into s) and seeds the generator from params->seed
 * when params->has_seed, else from fallback_seed (the engine passes a counter or the
 * time). vocab_size > 0. */
ts_status sampler_init(sampler *s, const ts_sampling_params *params, int vocab_size,
                       uint64_t fallback_seed, ts_error *err);

/* DRY's breakers: bit id of bits (vocab_size bits, borrowed for the sampler's life) is
 * set for a token whose text contains a breaker string (ts_sampling_params'
 * dry_breakers); the engine builds it from the vocabulary. */
void sampler_set_dry_breakers(sampler *s, const uint8_t *bits);

/* Allocates work arrays for vocabularies of up to vocab_size tokens. On failure sc is
 * left freeable. */
ts_status sampler_scratch_init(sampler_scratch *sc, int vocab_size, ts_error *err);
/* Frees the arrays (not sc itself). Accepts NULL and a zeroed or half-built scratch. */
void sampler_scratch_free(sampler_scratch *sc);

/* Applies the repetition, presence and frequency penalties and DRY to logits (vocab) in
 * place.
 * tokens (borrowed, n_tokens) is the prompt followed by the generated tokens; the last
 * n_gen of them (0 <= n_gen <= n_tokens) are the generated ones. Ids outside the
 * vocabulary are ignored. */
ts_status sampler_apply_penalties(const sampler *s, sampler_scratch *sc, float *logits,
                                  const int32_t *tokens, int n_tokens, int n_gen,
                                  ts_error *err);

/* The kept set for logits (vocab, borrowed, already penalised): greedy gives the one
 * argmax; otherwise top-n-sigma, top-k, min-p, top-p and typical-p as defined above and
 * in tessera/sampling.h, with min_keep (XTC and mirostat belong to sampler_sample, which
 * draws for them). Fills sc->cand[0..*n_kept)
 * in unspecified order, with p renormalised over the kept set. NaN logits count as
 * -inf; if every token is -inf the lowest id is kept alone. */
ts_status sampler_candidates(const sampler *s, sampler_scratch *sc, int *n_kept,
                             const float *logits, ts_error *err);

/* Samples one token: penalties and logit_bias (logits are modified in place), filtering
 * (mirostat's cut instead when on), then one draw from the request's generator (every
 * call draws once, greedy included, and once more while XTC is on, so the stream position
 * follows the number of tokens sampled). lp (may be NULL) receives logprobs.
 * tokens / n_tokens / n_gen as for sampler_apply_penalties(). */
ts_status sampler_sample(sampler *s, sampler_scratch *sc, int32_t *token,
                         sampler_logprobs *lp, float *logits, const int32_t *tokens,
                         int n_tokens, int n_gen, ts_error *err);

/* The log-probabilities of token under the model's own distribution, logits (vocab,
 * borrowed, not modified) at temperature 1 with no penalty, bias or filter, and
 * params.top_logprobs alternatives: how a prompt token is scored. */
ts_status sampler_score(const sampler *s, sampler_scratch *sc, sampler_logprobs *lp,
                        const float *logits, int32_t token, ts_error *err);

#endif /* TESSERA_ENGINE_SAMPLER_H */
