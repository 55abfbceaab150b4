/* sampler.c: sampling parameters, the per-request generator, penalties, the top-k /
 * min-p / top-p kept set, the draw, and logprobs. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler.h"

/* ---------------------------------------------------------------- parameters */

ts_sampling_params ts_sampling_params_default(void)
{
    return (ts_sampling_params){
        .temperature = 1.0f,
        .top_k = 0,
        .top_p = 1.0f,
        .min_p = 0.0f,
        .repetition_penalty = 1.0f,
        .repeat_last_n = 64,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .seed = 0,
        .has_seed = false,
        .logprobs = false,
        .top_logprobs = 0,
    };
}

/* Written so that NaN fails every check. */
#define CHECK_RANGE(cond, field, range, value)                                         \
    do {                                                                               \
        if (!(cond))                                                                   \
            return ts_error_set(err, TS_ERR_INVALID_ARG, field " must be in " range    \
                                ", got %g", (double)(value));                          \
    } while (0)

ts_status ts_sampling_params_validate(const ts_sampling_params *p, ts_error *err)
{
    if (!p)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampling params are NULL");
    CHECK_RANGE(p->temperature >= 0.0f && p->temperature <= 2.0f, "temperature", "[0, 2]",
                p->temperature);
    CHECK_RANGE(p->top_k >= 0, "top_k", "[0, inf)", p->top_k);
    CHECK_RANGE(p->top_p > 0.0f && p->top_p <= 1.0f, "top_p", "(0, 1]", p->top_p);
    CHECK_RANGE(p->min_p >= 0.0f && p->min_p <= 1.0f, "min_p", "[0, 1]", p->min_p);
    CHECK_RANGE(p->repetition_penalty > 0.0f && p->repetition_penalty <= 10.0f,
                "repetition_penalty", "(0, 10]", p->repetition_penalty);
    CHECK_RANGE(p->repeat_last_n >= -1, "repeat_last_n", "[-1, inf)", p->repeat_last_n);
    CHECK_RANGE(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f,
                "presence_penalty", "[-2, 2]", p->presence_penalty);
    CHECK_RANGE(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f,
                "frequency_penalty", "[-2, 2]", p->frequency_penalty);
    CHECK_RANGE(p->top_logprobs >= 0 && p->top_logprobs <= TS_SAMPLING_MAX_TOP_LOGPROBS,
                "top_logprobs", "[0, 20]", p->top_logprobs);
    if (p->top_logprobs > 0 && !p->logprobs)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "top_logprobs = %d requires logprobs to be true", p->top_logprobs);
    return TS_OK;
}

/* ---------------------------------------------------------------- generator */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman and Vigna). */
static uint64_t rng_next(uint64_t s[4])
{
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sampler_uniform(sampler *s) { return (double)(rng_next(s->rng) >> 11) * 0x1.0p-53; }

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
    uint64_t x = params->has_seed ? params->seed : fallback_seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    return TS_OK;
}

/* ---------------------------------------------------------------- scratch */

ts_status sampler_scratch_init(sampler_scratch *sc, int vocab_size, ts_error *err)
{
    memset(sc, 0, sizeof *sc);
    if (vocab_size <= 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampler scratch: vocab_size %d must be > 0",
                            vocab_size);
    sc->cand = malloc((size_t)vocab_size * sizeof *sc->cand);
    sc->count = calloc((size_t)vocab_size, sizeof *sc->count);
    if (!sc->cand || !sc->count)
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
    return TS_OK;
}

/* ---------------------------------------------------------------- selection */

/* a comes before b in the canonical order. */
static inline int cand_before(const sampler_cand *a, const sampler_cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cand_cmp(const void *pa, const void *pb)
{
    const sampler_cand *a = pa, *b = pb;
    return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

static inline void cand_swap(sampler_cand *a, sampler_cand *b)
{
    sampler_cand t = *a;
    *a = *b;
    *b = t;
}

/* Rearranges c (n) so that c[0..k) are the first k in canonical order (unsorted).
 * Quickselect with a median-of-three pivot; past a depth limit it sorts the remaining
 * range, so the worst case is O(n log n). */
static void select_first(sampler_cand *c, int n, int k)
{
    int lo = 0, hi = n - 1, depth = 0, limit = 2;
    for (int m = n; m > 1; m >>= 1)
        limit += 2;
    while (lo < hi) {
        if (++depth > limit) {
            qsort(c + lo, (size_t)(hi - lo + 1), sizeof *c, cand_cmp);
            return;
        }
        int mid = lo + (hi - lo) / 2;
        if (cand_before(&c[mid], &c[lo]))
            cand_swap(&c[mid], &c[lo]);
        if (cand_before(&c[hi], &c[lo]))
            cand_swap(&c[hi], &c[lo]);
        if (cand_before(&c[hi], &c[mid]))
            cand_swap(&c[hi], &c[mid]);
        sampler_cand pivot = c[mid];
        int i = lo, j = hi;
        while (i <= j) { /* Hoare partition around pivot */
            while (cand_before(&c[i], &pivot))
                i++;
            while (cand_before(&pivot, &c[j]))
                j--;
            if (i <= j) {
                cand_swap(&c[i], &c[j]);
                i++;
                j--;
            }
        }
        /* now c[lo..j] come before c[i..hi]; elements between equal the pivot */
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            return;
    }
}

/* The shortest canonical prefix of c (n, p unnormalised, summing to total) whose mass
 * reaches top_p * total. Sorts that prefix in place, growing it in doubling chunks so a
 * peaked distribution over a large vocabulary costs O(n). Returns its length. */
static int top_p_prefix(sampler_cand *c, int n, double total, float top_p)
{
    const double target = (double)top_p * total;
    double cum = 0.0;
    int done = 0, chunk = 64;
    while (done < n) {
        int m = n - done < chunk ? n - done : chunk;
        if (m < n - done)
            select_first(c + done, n - done, m);
        qsort(c + done, (size_t)m, sizeof *c, cand_cmp);
        for (int i = done; i < done + m; i++) {
            cum += c[i].p;
            if (cum >= target)
                return i + 1;
        }
        done += m;
        chunk *= 2;
    }
    return n;
}

static inline float clean_logit(float x)
{
    if (isnan(x))
        return -INFINITY;
    return x > FLT_MAX ? FLT_MAX : x;
}

/* First maximal index, exactly as llama2.c's argmax; NaN never wins. */
static int32_t argmax(const float *x, int n)
{
    int32_t best = 0;
    float v = clean_logit(x[0]);
    for (int i = 1; i < n; i++) {
        if (x[i] > v) {
            v = x[i];
            best = i;
        }
    }
    return best;
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

    if (p->temperature == 0.0f) {
        int32_t id = argmax(logits, n);
        c[0] = (sampler_cand){ .id = id, .logit = clean_logit(logits[id]), .p = 1.0f };
        *n_kept = 1;
        return TS_OK;
    }

    for (int i = 0; i < n; i++)
        c[i] = (sampler_cand){ .id = i, .logit = clean_logit(logits[i]), .p = 0.0f };
    if (p->top_k > 0 && p->top_k < n) {
        select_first(c, n, p->top_k);
        n = p->top_k;
    }

    float lmax = -INFINITY;
    for (int i = 0; i < n; i++)
        lmax = c[i].logit > lmax ? c[i].logit : lmax;
    if (lmax == -INFINITY) { /* nothing is possible: keep the canonical first alone */
        int best = 0;
        for (int i = 1; i < n; i++)
            best = c[i].id < c[best].id ? i : best;
        c[0] = c[best];
        c[0].p = 1.0f;
        *n_kept = 1;
        return TS_OK;
    }

    /* softmax numerators and min-p in one pass */
    const float inv_t = 1.0f / p->temperature;
    const float log_min_p = p->min_p > 0.0f ? logf(p->min_p) : -INFINITY;
    double total = 0.0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        float z = (c[i].logit - lmax) * inv_t;
        if (z < log_min_p)
            continue;
        c[m] = c[i];
        c[m].p = expf(z);
        total += c[m].p;
        m++;
    }
    n = m;

    if (p->top_p < 1.0f) {
        n = top_p_prefix(c, n, total, p->top_p);
        total = 0.0;
        for (int i = 0; i < n; i++)
            total += c[i].p;
    }
    for (int i = 0; i < n; i++)
        c[i].p = (float)(c[i].p / total);
    *n_kept = n;
    return TS_OK;
}

/* ---------------------------------------------------------------- logprobs */

static void fill_logprobs(sampler_logprobs *lp, const sampler *s, const float *logits,
                          int32_t chosen)
{
    const int V = s->vocab_size;
    const float inv_t = s->params.temperature > 0.0f ? 1.0f / s->params.temperature : 1.0f;
    float lmax = -INFINITY;
    for (int i = 0; i < V; i++) {
        float l = clean_logit(logits[i]);
        lmax = l > lmax ? l : lmax;
    }
    double sum = 0.0;
    if (lmax > -INFINITY)
        for (int i = 0; i < V; i++)
            sum += exp((double)((clean_logit(logits[i]) - lmax) * inv_t));
    const double log_z = lmax > -INFINITY ? log(sum) : INFINITY;

    int n_top = s->params.top_logprobs < V ? s->params.top_logprobs : V;
    sampler_cand best[TS_SAMPLING_MAX_TOP_LOGPROBS];
    int nb = 0;
    for (int i = 0; i < V && n_top > 0; i++) {
        sampler_cand x = { .id = i, .logit = clean_logit(logits[i]) };
        if (nb == n_top && !cand_before(&x, &best[nb - 1]))
            continue;
        int j = nb < n_top ? nb++ : nb - 1; /* insertion into a short sorted list */
        while (j > 0 && cand_before(&x, &best[j - 1])) {
            best[j] = best[j - 1];
            j--;
        }
        best[j] = x;
    }

    lp->token = chosen;
    lp->logprob = (float)((double)((clean_logit(logits[chosen]) - lmax) * inv_t) - log_z);
    lp->n_top = nb;
    for (int i = 0; i < nb; i++) {
        lp->top[i].id = best[i].id;
        lp->top[i].logprob = (float)((double)((best[i].logit - lmax) * inv_t) - log_z);
    }
}

/* ---------------------------------------------------------------- sampling */

ts_status sampler_sample(sampler *s, sampler_scratch *sc, int32_t *token,
                         sampler_logprobs *lp, float *logits, const int32_t *tokens,
                         int n_tokens, int n_gen, ts_error *err)
{
    ts_status st = sampler_apply_penalties(s, sc, logits, tokens, n_tokens, n_gen, err);
    if (st != TS_OK)
        return st;
    int n = 0;
    st = sampler_candidates(s, sc, &n, logits, err);
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
    if (lp)
        fill_logprobs(lp, s, logits, *token);
    return TS_OK;
}
