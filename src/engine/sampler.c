/* sampler.c: the sampler's set-up, penalties, the top-k / min-p / top-p kept set, the
 * draw (mirostat and XTC through sampler_filters.c), and logprobs. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler.h"
#include "engine/sampler_filters.h"

ts_status sampler_init(sampler *s, const ts_sampling_params *params, int vocab_size,
                       uint64_t fallback_seed, ts_error *err)
{
    ts_status st = ts_sampling_params_validate(params, err);
    if (st != TS_OK)
        return st;
    if (vocab_size <= 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampler: vocab_size %d must be > 0",
                            vocab_size);
    memset(s, 0, sizeof *s);
    s->params = *params;
    s->vocab_size = vocab_size;
    sampler__seed(s->rng, params->has_seed ? params->seed : fallback_seed);
    s->mirostat_mu = 2.0f * params->mirostat_tau;
    return TS_OK;
}

void sampler_set_dry_breakers(sampler *s, const uint8_t *bits) { s->dry_breakers = bits; }

/* ---------------------------------------------------------------- scratch */

ts_status sampler_scratch_init(sampler_scratch *sc, int vocab_size, ts_error *err)
{
    memset(sc, 0, sizeof *sc);
    if (vocab_size <= 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampler scratch: vocab_size %d must be > 0",
                            vocab_size);
    sc->cand = malloc((size_t)vocab_size * sizeof *sc->cand);
    sc->prob = malloc((size_t)vocab_size * sizeof *sc->prob);
    sc->count = calloc((size_t)vocab_size, sizeof *sc->count);
    if (!sc->cand || !sc->prob || !sc->count)
        goto fail;
    sc->vocab_size = vocab_size;
    return TS_OK;
fail:
    sampler_scratch_free(sc);
    return ts_error_set(err, TS_ERR_NOMEM, "sampler scratch: no memory for %d tokens",
                        vocab_size);
}

void sampler_scratch_free(sampler_scratch *sc)
{
    if (!sc)
        return;
    free(sc->cand);
    free(sc->prob);
    free(sc->count);
    memset(sc, 0, sizeof *sc);
}

static ts_status check_call(const sampler *s, const sampler_scratch *sc, ts_error *err)
{
    if (!sc->cand || sc->vocab_size < s->vocab_size)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler scratch serves %d tokens, the sampler needs %d",
                            sc->vocab_size, s->vocab_size);
    return TS_OK;
}

/* ---------------------------------------------------------------- penalties */

ts_status sampler_apply_penalties(const sampler *s, sampler_scratch *sc, float *logits,
                                  const int32_t *tokens, int n_tokens, int n_gen,
                                  ts_error *err)
{
    ts_status st = check_call(s, sc, err);
    if (st != TS_OK)
        return st;
    if (n_tokens < 0 || n_gen < 0 || n_gen > n_tokens || (n_tokens > 0 && !tokens))
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: bad token history (n_tokens %d, n_gen %d)", n_tokens, n_gen);
    const ts_sampling_params *p = &s->params;
    const int V = s->vocab_size;
    uint32_t *count = sc->count; /* zero on entry, zero again on exit */

    if (p->repetition_penalty != 1.0f && p->repeat_last_n != 0) {
        int w = p->repeat_last_n < 0 || p->repeat_last_n > n_tokens ? n_tokens : p->repeat_last_n;
        const int32_t *t = tokens + (n_tokens - w);
        for (int i = 0; i < w; i++) {
            int32_t id = t[i];
            if (id < 0 || id >= V || count[id])
                continue;
            count[id] = 1;
            if (logits[id] > 0.0f)
                logits[id] /= p->repetition_penalty;
            else
                logits[id] *= p->repetition_penalty;
        }
        for (int i = 0; i < w; i++)
            if (t[i] >= 0 && t[i] < V)
                count[t[i]] = 0;
    }

    if (p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f) {
        const int32_t *g = tokens + (n_tokens - n_gen);
        for (int i = 0; i < n_gen; i++)
            if (g[i] >= 0 && g[i] < V)
                count[g[i]]++;
        for (int i = 0; i < n_gen; i++) {
            int32_t id = g[i];
            if (id < 0 || id >= V || !count[id])
                continue;
            logits[id] -= p->presence_penalty + p->frequency_penalty * (float)count[id];
            count[id] = 0;
        }
    }
    return sampler__dry(s, sc, logits, tokens, n_tokens, err);
}

/* Temperature 0, or one so small that 1 / T overflows: sampler__argmax. */
static bool is_greedy(const ts_sampling_params *p)
{
    return p->temperature == 0.0f || isinf(1.0f / p->temperature);
}

/* Every kept token is impossible: keep the canonical first (lowest id) alone. */
static ts_status keep_lowest_id(sampler_cand *c, int n, int *n_kept)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        best = c[i].id < c[best].id ? i : best;
    c[0] = c[best];
    c[0].p = 1.0f;
    *n_kept = 1;
    return TS_OK;
}

/* min_keep over min-p and top-n-sigma: when they cut below min_keep tokens, the first
 * min_keep of the uncut set (the top-k set, or the vocabulary) instead, their numerators
 * in sc->cand, their sum in *total. Returns their count. */
static int keep_first_uncut(const sampler *s, sampler_scratch *sc, const float *logits,
                            bool top_k, float lmax, float inv_t, double *total)
{
    const ts_sampling_params *p = &s->params;
    sampler_cand *c = sc->cand;
    int n = s->vocab_size;
    if (top_k && p->top_k <= SAMPLER_TOP_K_HEAP_MAX) {
        sampler__top_k_heap(c, logits, n, p->top_k);
    } else {
        for (int i = 0; i < n; i++)
            c[i] = (sampler_cand){ .id = i, .logit = sampler__clean_logit(logits[i]), .p = 0.0f };
        if (top_k)
            sampler__select_first(c, n, p->top_k);
    }
    n = top_k ? p->top_k : n;
    const int m = p->min_keep < n ? p->min_keep : n;
    sampler__select_first(c, n, m);
    *total = 0.0;
    for (int i = 0; i < m; i++) {
        c[i].p = sampler_expf((c[i].logit - lmax) * inv_t);
        *total += c[i].p;
    }
    return m;
}

ts_status sampler_candidates(const sampler *s, sampler_scratch *sc, int *n_kept,
                             const float *logits, ts_error *err)
{
    ts_status st = check_call(s, sc, err);
    if (st != TS_OK)
        return st;
    const ts_sampling_params *p = &s->params;
    sampler_cand *c = sc->cand;
    int n = s->vocab_size;

    if (is_greedy(p)) {
        int32_t id = sampler__argmax(logits, n);
        c[0] = (sampler_cand){ .id = id, .logit = sampler__clean_logit(logits[id]), .p = 1.0f };
        *n_kept = 1;
        return TS_OK;
    }

    const float inv_t = 1.0f / p->temperature;
    const float log_min_p = p->min_p > 0.0f ? logf(p->min_p) : -INFINITY;
    const float sigma_floor = sampler__sigma_floor(s, logits, n);
    const bool cuts = p->min_p > 0.0f || sigma_floor > -INFINITY;
    const bool top_k = p->top_k > 0 && p->top_k < n;
    double total = 0.0;
    float lmax;
    if (top_k) {
        if (p->top_k <= SAMPLER_TOP_K_HEAP_MAX) {
            sampler__top_k_heap(c, logits, n, p->top_k);
        } else {
            for (int i = 0; i < n; i++)
                c[i] = (sampler_cand){
                    .id = i, .logit = sampler__clean_logit(logits[i]), .p = 0.0f };
            sampler__select_first(c, n, p->top_k);
        }
        n = p->top_k;
        lmax = -INFINITY;
        for (int i = 0; i < n; i++)
            lmax = c[i].logit > lmax ? c[i].logit : lmax;
        if (lmax == -INFINITY)
            return keep_lowest_id(c, n, n_kept);
        int m = 0; /* softmax numerators, min-p and top-n-sigma in one pass */
        for (int i = 0; i < n; i++) {
            float z = (c[i].logit - lmax) * inv_t;
            if (z < log_min_p || c[i].logit < sigma_floor)
                continue;
            c[m] = c[i];
            c[m].p = sampler_expf(z);
            total += c[m].p;
            m++;
        }
        n = m;
    } else {
        lmax = sampler__max_logit(logits, n);
        if (lmax == -INFINITY) {
            c[0] = (sampler_cand){ .id = 0, .logit = sampler__clean_logit(logits[0]), .p = 1.0f };
            *n_kept = 1;
            return TS_OK;
        }
        /* numerators for the whole vocabulary in one vectorized pass */
        total = sampler__exp_sum(sc->prob, logits, n, lmax, inv_t);
        if (cuts) {
            int m = 0;
            total = 0.0;
            for (int i = 0; i < n; i++) {
                float l = sampler__clean_logit(logits[i]);
                if ((l - lmax) * inv_t < log_min_p || l < sigma_floor)
                    continue;
                c[m++] = (sampler_cand){ .id = i, .logit = l, .p = sc->prob[i] };
                total += sc->prob[i];
            }
            n = m;
        } else {
            for (int i = 0; i < n; i++)
                c[i] = (sampler_cand){
                    .id = i, .logit = sampler__clean_logit(logits[i]), .p = sc->prob[i] };
        }
    }
    if (cuts && n < p->min_keep)
        n = keep_first_uncut(s, sc, logits, top_k, lmax, inv_t, &total);

    if (p->top_p < 1.0f) {
        int m = sampler__top_p_prefix(c, n, total, p->top_p);
        if (m < p->min_keep) {
            m = p->min_keep < n ? p->min_keep : n;
            sampler__select_first(c, n, m);
        }
        n = m;
        total = 0.0;
        for (int i = 0; i < n; i++)
            total += c[i].p;
    }
    if (p->typical_p < 1.0f) {
        n = sampler__typical(s, c, n, total);
        total = 0.0;
        for (int i = 0; i < n; i++)
            total += c[i].p;
    }
    const float inv_total = (float)(1.0 / total);
    for (int i = 0; i < n; i++)
        c[i].p *= inv_total;
    *n_kept = n;
    return TS_OK;
}

/* ---------------------------------------------------------------- logprobs */

/* log softmax of one cleaned logit; -inf for impossible tokens, and for every token when
 * all are impossible (where the arithmetic would give NaN). */
static float log_prob(float l, float lmax, float inv_t, double log_z)
{
    if (l == -INFINITY || lmax == -INFINITY)
        return -INFINITY;
    return (float)((double)((l - lmax) * inv_t) - log_z);
}

static void fill_logprobs(sampler_logprobs *lp, const sampler *s, sampler_scratch *sc,
                          const float *logits, int32_t chosen, float inv_t, int top)
{
    const int V = s->vocab_size;
    const float lmax = sampler__max_logit(logits, V);
    const double sum = lmax > -INFINITY ? sampler__exp_sum(sc->prob, logits, V, lmax, inv_t) : 0.0;
    const double log_z = lmax > -INFINITY ? log(sum) : 0.0;

    const int n_top = top < V ? top : V;
    sampler_cand best[TS_SAMPLING_MAX_TOP_LOGPROBS]; /* (nb), canonical order */
    int nb = 0;
    for (int i0 = 0; i0 < V && n_top > 0; i0 += SAMPLER_LANES) {
        const int end = V - i0 < SAMPLER_LANES ? V : i0 + SAMPLER_LANES;
        /* once the list is full, a block whose maximum does not beat its last entry is
         * skipped whole (ids rise, so a tie never enters): most blocks, vectorized */
        if (nb == n_top && end - i0 == SAMPLER_LANES) {
            const float thr = best[nb - 1].logit;
            int any = 0;
            for (int j = 0; j < SAMPLER_LANES; j++)
                any |= sampler__clean_logit(logits[i0 + j]) > thr;
            if (!any)
                continue;
        }
        for (int i = i0; i < end; i++) {
            const sampler_cand x = { .id = i, .logit = sampler__clean_logit(logits[i]) };
            if (nb == n_top && !(x.logit > best[nb - 1].logit))
                continue;
            int j = nb < n_top ? nb++ : nb - 1; /* insertion into a short sorted list */
            while (j > 0 && sampler__cand_before(&x, &best[j - 1])) {
                best[j] = best[j - 1];
                j--;
            }
            best[j] = x;
        }
    }

    lp->token = chosen;
    lp->logprob = log_prob(sampler__clean_logit(logits[chosen]), lmax, inv_t, log_z);
    lp->n_top = nb;
    for (int i = 0; i < nb; i++) {
        lp->top[i].id = best[i].id;
        lp->top[i].logprob = log_prob(best[i].logit, lmax, inv_t, log_z);
    }
}

/* ---------------------------------------------------------------- sampling */

/* logit_bias after the penalties; ids outside the vocabulary are skipped (submit refuses
 * them). */
static void apply_logit_bias(const sampler *s, float *logits)
{
    const ts_sampling_params *p = &s->params;
    for (int i = 0; i < p->n_logit_bias; i++) {
        const ts_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= s->vocab_size)
            continue;
        logits[b->token] = b->bias <= TS_SAMPLING_BIAS_BAN ? -INFINITY
                                                           : logits[b->token] + b->bias;
    }
}

ts_status sampler_sample(sampler *s, sampler_scratch *sc, int32_t *token,
                         sampler_logprobs *lp, float *logits, const int32_t *tokens,
                         int n_tokens, int n_gen, ts_error *err)
{
    ts_status st = sampler_apply_penalties(s, sc, logits, tokens, n_tokens, n_gen, err);
    if (st != TS_OK)
        return st;
    apply_logit_bias(s, logits);
    int n = 0;
    const bool mirostat = s->params.mirostat != 0 && !is_greedy(&s->params);
    if (mirostat) {
        st = check_call(s, sc, err);
        n = st == TS_OK ? sampler__mirostat_cut(s, sc, logits) : 0;
    } else {
        st = sampler_candidates(s, sc, &n, logits, err);
        if (st == TS_OK && !is_greedy(&s->params))
            n = sampler__xtc(s, sc->cand, n);
    }
    if (st != TS_OK)
        return st;

    const sampler_cand *c = sc->cand;
    double u = sampler_uniform(s), cum = 0.0;
    int pick = -1, last_possible = 0;
    for (int i = 0; i < n && pick < 0; i++) {
        if (c[i].p > 0.0f)
            last_possible = i;
        cum += c[i].p;
        if (u < cum)
            pick = i;
    }
    if (pick < 0) /* u landed in the rounding gap above the sum */
        pick = last_possible;
    *token = c[pick].id;
    if (mirostat)
        sampler__mirostat_update(s, c[pick].p);
    if (lp)
        fill_logprobs(lp, s, sc, logits, *token,
                      is_greedy(&s->params) ? 1.0f : 1.0f / s->params.temperature,
                      s->params.top_logprobs);
    return TS_OK;
}

ts_status sampler_score(const sampler *s, sampler_scratch *sc, sampler_logprobs *lp,
                        const float *logits, int32_t token, ts_error *err)
{
    ts_status st = check_call(s, sc, err);
    if (st != TS_OK)
        return st;
    if (token < 0 || token >= s->vocab_size)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampler: token %d outside the vocabulary",
                            (int)token);
    fill_logprobs(lp, s, sc, logits, token, 1.0f, s->params.top_logprobs);
    return TS_OK;
}
