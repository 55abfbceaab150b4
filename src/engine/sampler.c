/* sampler.c: the per-request generator, penalties, the top-k / min-p / top-p kept set,
 * the draw, and logprobs. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler.h"
#include "engine/sampler_internal.h"

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

/* ---------------------------------------------------------------- selection */

/* NaN -> -inf, +inf -> FLT_MAX; written without branches so loops vectorize. */
static inline float clean_logit(float x)
{
    x = x != x ? -INFINITY : x;
    return x > FLT_MAX ? FLT_MAX : x;
}

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

/* Up to this k, top-k scans the logits with a k-entry heap (no vocabulary-sized copy;
 * O(n) when few tokens displace the heap, O(n log k) at worst); above it, quickselect. */
#define TOP_K_HEAP_MAX 1024

/* Restores the heap h (k) below i: each entry comes before its children in the reverse
 * canonical order, so the root is the canonical last of the kept tokens. */
static void heap_sift_down(sampler_cand *h, int k, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < k && cand_before(&h[w], &h[l]))
            w = l;
        if (r < k && cand_before(&h[w], &h[r]))
            w = r;
        if (w == i)
            return;
        cand_swap(&h[i], &h[w]);
        i = w;
    }
}

/* c[0..k) = the first k of logits (n) in canonical order, unsorted; 0 < k < n. Ids come
 * in increasing order, so a logit equal to the root's never displaces it. */
static void top_k_heap(sampler_cand *c, const float *logits, int n, int k)
{
    for (int i = 0; i < k; i++)
        c[i] = (sampler_cand){ .id = i, .logit = clean_logit(logits[i]), .p = 0.0f };
    for (int i = k / 2 - 1; i >= 0; i--)
        heap_sift_down(c, k, i);
    for (int i = k; i < n; i++) {
        const float l = clean_logit(logits[i]);
        if (l > c[0].logit) {
            c[0] = (sampler_cand){ .id = i, .logit = l, .p = 0.0f };
            heap_sift_down(c, k, 0);
        }
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

/* The loops below that touch the whole vocabulary keep LANES independent accumulators:
 * one running max or sum would be a serial dependency chain (4 cycles an element), and
 * separate lanes let the compiler vectorize without -ffast-math. */
#define LANES 16

/* Largest cleaned logit of x (n); -inf when none. */
static float max_logit(const float *x, int n)
{
    float m[LANES];
    for (int j = 0; j < LANES; j++)
        m[j] = -INFINITY;
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float v = clean_logit(x[i + j]);
            m[j] = v > m[j] ? v : m[j];
        }
    for (; i < n; i++) {
        float v = clean_logit(x[i]);
        m[0] = v > m[0] ? v : m[0];
    }
    for (int j = 1; j < LANES; j++)
        m[0] = m[j] > m[0] ? m[j] : m[0];
    return m[0];
}

/* First maximal index, as llama2.c's argmax (NaN never wins, +inf counts as FLT_MAX):
 * the maximum in one vectorized pass, then the first index holding it. */
static int32_t argmax(const float *x, int n)
{
    const float m = max_logit(x, n);
    for (int i = 0; i < n; i++)
        if (clean_logit(x[i]) == m)
            return i;
    return 0; /* unreachable: some cleaned logit equals the maximum */
}

/* e^x for x in [-87.1, 0] times keep (an all-ones or all-zero mask): Cephes expf.
 * x = n ln2 + r with |r| <= ln2/2, e^r by a degree-7 polynomial, 2^n by building the
 * exponent bits. No float conditionals: under -ftrapping-math they keep loops scalar. */
static inline float exp_core(float x, int32_t keep)
{
    /* round to nearest by the 1.5 * 2^23 trick (floorf would also keep the loop scalar) */
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const union { int32_t i; float f; } scale = { .i = (((int32_t)n + 127) << 23) & keep };
    return p * scale.f; /* a scale of +0.0 when keep is 0 */
}

float sampler_expf(float x)
{
    const float xc = x < -87.0f ? -87.0f : (x > 0.0f ? 0.0f : x);
    return exp_core(xc, -(int32_t)(x >= -87.0f));
}

/* out[i] = e^((clean(x[i]) - lmax) * inv_t) for i < n (lmax finite, >= every clean x);
 * returns their sum, in float within blocks of LANES * 16 terms and in double across
 * blocks. A term whose exponent falls under -87 contributes exactly 0. The clamp is on
 * the scaled exponent itself: a bound on the logit (lmax - 87 / inv_t) rounds in float,
 * and at temperatures near 1e-8 let exponents past exp_core's range through, whose
 * weights came out negative. */
static double exp_sum(float *out, const float *x, int n, float lmax, float inv_t)
{
    /* -87 (lmax is finite), worked out from lmax so that GCC takes it for a variable:
     * against a constant it keeps the clamp a branch and the loop scalar */
    const float lo = (lmax - lmax) - 87.0f;
    double total = 0.0;
    int i = 0;
    for (; i + LANES * 16 <= n; i += LANES * 16) {
        float acc[LANES] = { 0 };
        for (int k = 0; k < LANES * 16; k += LANES)
            for (int j = 0; j < LANES; j++) {
                const float z = (clean_logit(x[i + k + j]) - lmax) * inv_t;
                const int32_t keep = -(int32_t)(z >= lo);
                const float e = exp_core(z > lo ? z : lo, keep);
                out[i + k + j] = e;
                acc[j] += e;
            }
        float b = 0.0f;
        for (int j = 0; j < LANES; j++)
            b += acc[j];
        total += b;
    }
    for (; i < n; i++) {
        out[i] = sampler_expf((clean_logit(x[i]) - lmax) * inv_t);
        total += out[i];
    }
    return total;
}

int sampler__cand_cmp(const void *a, const void *b) { return cand_cmp(a, b); }

void sampler__select_first(sampler_cand *c, int n, int k) { select_first(c, n, k); }

double sampler__exp_sum(float *out, const float *x, int n, float lmax, float inv_t)
{
    return exp_sum(out, x, n, lmax, inv_t);
}

float sampler__max_logit(const float *x, int n) { return max_logit(x, n); }

/* Temperature 0, or one so small that 1 / T overflows: argmax. */
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
    if (top_k && p->top_k <= TOP_K_HEAP_MAX) {
        top_k_heap(c, logits, n, p->top_k);
    } else {
        for (int i = 0; i < n; i++)
            c[i] = (sampler_cand){ .id = i, .logit = clean_logit(logits[i]), .p = 0.0f };
        if (top_k)
            select_first(c, n, p->top_k);
    }
    n = top_k ? p->top_k : n;
    const int m = p->min_keep < n ? p->min_keep : n;
    select_first(c, n, m);
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
        int32_t id = argmax(logits, n);
        c[0] = (sampler_cand){ .id = id, .logit = clean_logit(logits[id]), .p = 1.0f };
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
        if (p->top_k <= TOP_K_HEAP_MAX) {
            top_k_heap(c, logits, n, p->top_k);
        } else {
            for (int i = 0; i < n; i++)
                c[i] = (sampler_cand){ .id = i, .logit = clean_logit(logits[i]), .p = 0.0f };
            select_first(c, n, p->top_k);
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
        lmax = max_logit(logits, n);
        if (lmax == -INFINITY) {
            c[0] = (sampler_cand){ .id = 0, .logit = clean_logit(logits[0]), .p = 1.0f };
            *n_kept = 1;
            return TS_OK;
        }
        /* numerators for the whole vocabulary in one vectorized pass */
        total = exp_sum(sc->prob, logits, n, lmax, inv_t);
        if (cuts) {
            int m = 0;
            total = 0.0;
            for (int i = 0; i < n; i++) {
                float l = clean_logit(logits[i]);
                if ((l - lmax) * inv_t < log_min_p || l < sigma_floor)
                    continue;
                c[m++] = (sampler_cand){ .id = i, .logit = l, .p = sc->prob[i] };
                total += sc->prob[i];
            }
            n = m;
        } else {
            for (int i = 0; i < n; i++)
                c[i] = (sampler_cand){ .id = i, .logit = clean_logit(logits[i]), .p = sc->prob[i] };
        }
    }
    if (cuts && n < p->min_keep)
        n = keep_first_uncut(s, sc, logits, top_k, lmax, inv_t, &total);

    if (p->top_p < 1.0f) {
        int m = top_p_prefix(c, n, total, p->top_p);
        if (m < p->min_keep) {
            m = p->min_keep < n ? p->min_keep : n;
            select_first(c, n, m);
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
    const float lmax = max_logit(logits, V);
    const double sum = lmax > -INFINITY ? exp_sum(sc->prob, logits, V, lmax, inv_t) : 0.0;
    const double log_z = lmax > -INFINITY ? log(sum) : 0.0;

    const int n_top = top < V ? top : V;
    sampler_cand best[TS_SAMPLING_MAX_TOP_LOGPROBS]; /* (nb), canonical order */
    int nb = 0;
    for (int i0 = 0; i0 < V && n_top > 0; i0 += LANES) {
        const int end = V - i0 < LANES ? V : i0 + LANES;
        /* once the list is full, a block whose maximum does not beat its last entry is
         * skipped whole (ids rise, so a tie never enters): most blocks, vectorized */
        if (nb == n_top && end - i0 == LANES) {
            const float thr = best[nb - 1].logit;
            int any = 0;
            for (int j = 0; j < LANES; j++)
                any |= clean_logit(logits[i0 + j]) > thr;
            if (!any)
                continue;
        }
        for (int i = i0; i < end; i++) {
            const sampler_cand x = { .id = i, .logit = clean_logit(logits[i]) };
            if (nb == n_top && !(x.logit > best[nb - 1].logit))
                continue;
            int j = nb < n_top ? nb++ : nb - 1; /* insertion into a short sorted list */
            while (j > 0 && cand_before(&x, &best[j - 1])) {
                best[j] = best[j - 1];
                j--;
            }
            best[j] = x;
        }
    }

    lp->token = chosen;
    lp->logprob = log_prob(clean_logit(logits[chosen]), lmax, inv_t, log_z);
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
