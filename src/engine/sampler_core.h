/* sampler_core.h: the sampler's types and what every sampling stage shares (sampler.c's
 * kept sets and draw, sampler_filters.c's named samplers): the request's generator, the
 * canonical order, selection in it, and the softmax numerators. */
#ifndef TESSERA_ENGINE_SAMPLER_CORE_H
#define TESSERA_ENGINE_SAMPLER_CORE_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "tessera/sampling.h"

/* Canonical order of tokens, used wherever a set is cut: penalised logit descending,
 * then token id ascending. It is a strict total order, so every kept set (sampler.h) is
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

/* ---------------------------------------------------------------- generator */

/* Seeds rng (xoshiro256**'s state) from seed through splitmix64. */
void sampler__seed(uint64_t rng[4], uint64_t seed);

/* The next number in [0, 1) from the request's generator (53 random bits). */
double sampler_uniform(sampler *s);

/* ---------------------------------------------------------------- canonical order */

/* NaN -> -inf, +inf -> FLT_MAX; written without branches so loops vectorize. */
static inline float sampler__clean_logit(float x)
{
    x = x != x ? -INFINITY : x;
    return x > FLT_MAX ? FLT_MAX : x;
}

/* a comes before b in the canonical order. */
static inline int sampler__cand_before(const sampler_cand *a, const sampler_cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* qsort comparator of the canonical order. */
int sampler__cand_cmp(const void *a, const void *b);

/* Rearranges c (n) so that c[0..k) are its first k in canonical order (unsorted). */
void sampler__select_first(sampler_cand *c, int n, int k);

/* Up to this k, top-k scans the logits with a k-entry heap (no vocabulary-sized copy;
 * O(n) when few tokens displace the heap, O(n log k) at worst); above it, quickselect. */
#define SAMPLER_TOP_K_HEAP_MAX 1024

/* c[0..k) = the first k of logits (n) in canonical order, unsorted, p = 0; 0 < k < n. */
void sampler__top_k_heap(sampler_cand *c, const float *logits, int n, int k);

/* The shortest canonical prefix of c (n, p unnormalised, summing to total) whose mass
 * reaches top_p * total, sorted in place. Returns its length. */
int sampler__top_p_prefix(sampler_cand *c, int n, double total, float top_p);

/* ---------------------------------------------------------------- softmax numerators */

/* The loops that touch the whole vocabulary keep SAMPLER_LANES independent accumulators:
 * one running max or sum would be a serial dependency chain (4 cycles an element), and
 * separate lanes let the compiler vectorize without -ffast-math. */
#define SAMPLER_LANES 16

/* The largest cleaned logit of x (n); -inf when none. */
float sampler__max_logit(const float *x, int n);

/* First maximal index of x (n), as llama2.c's argmax (NaN never wins, +inf counts as
 * FLT_MAX). */
int32_t sampler__argmax(const float *x, int n);

/* e^x for x <= 0 (the softmax numerators e^((logit - max) / T)): a polynomial the
 * compiler vectorizes, within 2e-7 relative of libm's expf; exactly 1 at 0, exactly 0
 * below -87 (and for -inf). Arguments above 0 are treated as 0. */
float sampler_expf(float x);

/* out[i] = e^((clean(x[i]) - lmax) * inv_t) for i < n (lmax finite, >= every cleaned
 * x[i], NaN as -inf); returns their sum. */
double sampler__exp_sum(float *out, const float *x, int n, float lmax, float inv_t);

#endif /* TESSERA_ENGINE_SAMPLER_CORE_H */
