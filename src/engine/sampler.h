/* sampler.h: the per-request token sampler (penalties, greedy, temperature, top-k,
 * min-p, top-p, a seeded draw, logprobs) and the per-thread scratch it works in. */
#ifndef TESSERA_ENGINE_SAMPLER_H
#define TESSERA_ENGINE_SAMPLER_H

#include <stdint.h>

#include "tessera/sampling.h"
#include "tessera/status.h"

/* Canonical order of tokens, used wherever a set is cut: penalised logit descending,
 * then token id ascending. It is a strict total order, so every kept set below is
 * exactly defined, ties included: top-k keeps the first k tokens in this order (of
 * tokens tied at the k-th logit, the lower ids), top-p the shortest prefix in this order
 * whose probability reaches top_p, min-p every token with p >= min_p * p_max (all ties
 * of the boundary), evaluated as (logit - max) / temperature >= ln(min_p). */

/* Per-request state: the parameters, the request's own random generator
 * (xoshiro256** seeded through splitmix64) and mirostat's mu. Owns no memory; no free
 * function. */
typedef struct sampler {
    ts_sampling_params params;
    int vocab_size;
    uint64_t rng[4];
    float mirostat_mu;           /* mirostat's current bound on surprise, in bits */
    const uint8_t *dry_breakers; /* borrowed, (vocab_size bits): DRY's breaker tokens
                                  * (sampler_set_dry_breakers); NULL: none */
} sampler;

/* One candidate token. */
typedef struct sampler_cand {
    int32_t id;
    float logit; /* penalised logit, before temperature */
    float p;     /* probability within the kept set (they sum to 1) */
    float key;   /* a filter's sort key (typical-p's distance from the entropy) */
} sampler_cand;

/* Vocabulary-sized work arrays, kept apart from the sampler so that an engine needs one
 * per sampling thread rather than one per request (24 bytes per vocabulary entry:
 * 3 MiB for a 128k vocabulary). Not safe for concurrent use. */
typedef struct sampler_scratch {
    int vocab_size;     /* the largest vocabulary this scratch serves */
    sampler_cand *cand; /* (vocab_size) */
    float *prob;        /* (vocab_size) softmax numerators */
    uint32_t *count;    /* (vocab_size) token counts, all zero between calls */
} sampler_scratch;

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

/* e^x for x <= 0 (the softmax numerators e^((logit - max) / T)): a polynomial the
 * compiler vectorizes, within 2e-7 relative of libm's expf; exactly 1 at 0, exactly 0
 * below -87 (and for -inf). Arguments above 0 are treated as 0. */
float sampler_expf(float x);

/* The next number in [0, 1) from the request's generator (53 random bits). */
double sampler_uniform(sampler *s);

#endif /* TESSERA_ENGINE_SAMPLER_H */
