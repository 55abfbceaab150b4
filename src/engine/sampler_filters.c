/* sampler_filters.c: the samplers llama.cpp's and vLLM's clients ask for by name
 * (top-n-sigma, typical-p, XTC, mirostat 1 and 2, DRY), with their meanings as
 * tessera/sampling.h states them. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "engine/sampler_filters.h"

/* ---------------------------------------------------------------- top-n-sigma */

float sampler__sigma_floor(const sampler *s, const float *logits, int n)
{
    const float k = s->params.top_n_sigma;
    if (!(k > 0.0f))
        return -INFINITY;
    double sum = 0.0, sq = 0.0, max = -INFINITY;
    int m = 0;
    for (int i = 0; i < n; i++) {
        const float l = logits[i];
        if (!isfinite(l))
            continue;
        sum += l;
        sq += (double)l * l;
        max = l > max ? l : max;
        m++;
    }
    if (m == 0)
        return -INFINITY;
    const double mean = sum / m;
    const double var = sq / m - mean * mean;
    return (float)(max - k * sqrt(var > 0.0 ? var : 0.0));
}

/* ---------------------------------------------------------------- typical-p */

/* Sorts by key (|-ln p - H|) ascending, then canonical. */
static int key_cmp(const void *pa, const void *pb)
{
    const sampler_cand *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return sampler__cand_cmp(pa, pb);
}

int sampler__typical(const sampler *s, sampler_cand *c, int n, double total)
{
    const float typical_p = s->params.typical_p;
    if (typical_p >= 1.0f || n <= 1 || !(total > 0.0))
        return n;
    double entropy = 0.0;
    for (int i = 0; i < n; i++) {
        const double p = c[i].p / total;
        entropy -= p > 0.0 ? p * log(p) : 0.0;
    }
    for (int i = 0; i < n; i++) {
        const double p = c[i].p / total;
        c[i].key = p > 0.0 ? (float)fabs(-log(p) - entropy) : INFINITY;
    }
    qsort(c, (size_t)n, sizeof *c, key_cmp);
    const int min_keep = s->params.min_keep;
    double cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += c[i].p / total;
        if (cum > typical_p && i + 1 >= min_keep)
            return i + 1;
    }
    return n;
}

/* ---------------------------------------------------------------- XTC */

int sampler__xtc(sampler *s, sampler_cand *c, int n)
{
    const ts_sampling_params *p = &s->params;
    if (!(p->xtc_probability > 0.0f) || p->xtc_threshold > 0.5f)
        return n;
    /* the draw comes first, so the stream advances whatever the kept set */
    if (sampler_uniform(s) >= p->xtc_probability || n < 2)
        return n;
    qsort(c, (size_t)n, sizeof *c, sampler__cand_cmp);
    int last = 0; /* the least likely possible token at or above the threshold */
    while (last + 1 < n && c[last + 1].p >= p->xtc_threshold && c[last + 1].p > 0.0f)
        last++;
    if (c[0].p < p->xtc_threshold || last == 0 || n - last < p->min_keep)
        return n;
    double total = 0.0;
    for (int i = last; i < n; i++) {
        c[i - last] = c[i];
        total += c[i].p;
    }
    n -= last;
    for (int i = 0; i < n; i++)
        c[i].p = (float)(c[i].p / total);
    return n;
}

/* ---------------------------------------------------------------- mirostat */

/* Zipf's exponent estimated from the first m of c (sorted canonically, p > 0), as the
 * least-squares slope of ln(p_i / p_i+1) on ln((i + 2) / (i + 1)). */
static double zipf_exponent(const sampler_cand *c, int m)
{
    double num = 0.0, den = 0.0;
    for (int i = 0; i + 1 < m; i++) {
        if (!(c[i + 1].p > 0.0f))
            break;
        const double t = log((double)(i + 2) / (double)(i + 1));
        num += t * log((double)c[i].p / (double)c[i + 1].p);
        den += t * t;
    }
    return den > 0.0 ? num / den : 0.0;
}

/* Mirostat 1's k: the top-k that gives a Zipf distribution of exponent s_hat over V
 * tokens the surprise mu. */
static int mirostat1_k(double s_hat, double mu, int V)
{
    const double eps = s_hat - 1.0;
    const double scale = fabs(eps) < 1e-6 ? 1.0 / log((double)V)
                                          : eps / (1.0 - pow((double)V, -eps));
    const double k = s_hat > 0.0 ? pow(scale * exp2(mu), 1.0 / s_hat) : (double)V;
    if (!(k >= 1.0))
        return 1;
    return k >= (double)V ? V : (int)k;
}

int sampler__mirostat_cut(const sampler *s, sampler_scratch *sc, const float *logits)
{
    const int V = s->vocab_size;
    sampler_cand *c = sc->cand;
    const float inv_t = 1.0f / s->params.temperature;
    const float lmax = sampler__max_logit(logits, V);
    if (lmax == -INFINITY) {
        c[0] = (sampler_cand){ .id = 0, .logit = -INFINITY, .p = 1.0f };
        return 1;
    }
    double total = sampler__exp_sum(sc->prob, logits, V, lmax, inv_t);
    for (int i = 0; i < V; i++)
        c[i] = (sampler_cand){ .id = i, .logit = logits[i] != logits[i] ? -INFINITY : logits[i],
                               .p = sc->prob[i] };
    int n;
    if (s->params.mirostat == 2) {
        /* surprise -log2(p / total) <= mu */
        const double floor = total * exp2(-(double)s->mirostat_mu);
        n = 0;
        for (int i = 0; i < V; i++)
            if (c[i].p > 0.0f && c[i].p >= floor)
                c[n++] = c[i];
        if (n == 0) {
            for (int i = 0; i < V; i++)
                c[i] = (sampler_cand){ .id = i, .logit = logits[i] != logits[i] ? -INFINITY
                                                                                : logits[i],
                                       .p = sc->prob[i] };
            sampler__select_first(c, V, 1);
            n = 1;
        }
    } else {
        const int m = V < 100 ? V : 100;
        sampler__select_first(c, V, m);
        qsort(c, (size_t)m, sizeof *c, sampler__cand_cmp);
        n = mirostat1_k(zipf_exponent(c, m), s->mirostat_mu, V);
        if (n > m)
            sampler__select_first(c + m, V - m, n - m);
    }
    total = 0.0;
    for (int i = 0; i < n; i++)
        total += c[i].p;
    for (int i = 0; i < n; i++)
        c[i].p = (float)(c[i].p / total);
    return n;
}

void sampler__mirostat_update(sampler *s, float p)
{
    const float surprise = p > 0.0f ? -log2f(p) : 0.0f;
    s->mirostat_mu -= s->params.mirostat_eta * (surprise - s->params.mirostat_tau);
}

/* ---------------------------------------------------------------- DRY */

static bool is_breaker(const sampler *s, int32_t id)
{
    return s->dry_breakers && id >= 0 && id < s->vocab_size &&
           ((s->dry_breakers[id >> 3] >> (id & 7)) & 1);
}

ts_status sampler__dry(const sampler *s, sampler_scratch *sc, float *logits,
                       const int32_t *tokens, int n_tokens, ts_error *err)
{
    const ts_sampling_params *p = &s->params;
    if (!(p->dry_multiplier > 0.0f) || p->dry_base < 1.0f || p->dry_penalty_last_n == 0)
        return TS_OK;
    const int w = p->dry_penalty_last_n < 0 || p->dry_penalty_last_n > n_tokens
                      ? n_tokens : p->dry_penalty_last_n;
    if (w <= p->dry_allowed_length)
        return TS_OK;
    /* r(i): the window read backwards from the newest token */
    const int32_t *last = tokens + n_tokens - 1;
#define R(i) (last[-(i)])
    int limit = w; /* a repeat reaches back no further than the newest breaker */
    for (int i = 0; i < w; i++)
        if (is_breaker(s, R(i))) {
            limit = i;
            break;
        }
    if (limit < p->dry_allowed_length)
        return TS_OK;

    /* z[k]: how many tokens back from R(k) match those back from R(0) (Z-algorithm) */
    int *z = malloc((size_t)w * sizeof *z);
    if (!z)
        return ts_error_set(err, TS_ERR_NOMEM, "sampler: no memory for DRY's %d tokens", w);
    z[0] = w;
    for (int k = 1, lo = 0, hi = 0; k < w; k++) {
        int n = k < hi ? (hi - k < z[k - lo] ? hi - k : z[k - lo]) : 0;
        while (k + n < w && R(n) == R(k + n))
            n++;
        if (k + n > hi) {
            lo = k;
            hi = k + n;
        }
        z[k] = n;
    }
    /* The token after an earlier match (R(k - 1)) would extend it: keep each token's
     * longest, stored + 1 in the zeroed count array. */
    uint32_t *best = sc->count;
    for (int k = 1; k < w; k++) {
        const int len = z[k] < limit ? z[k] : limit;
        const int32_t id = R(k - 1);
        if (len >= p->dry_allowed_length && id >= 0 && id < s->vocab_size &&
            (uint32_t)len + 1 > best[id])
            best[id] = (uint32_t)len + 1;
    }
    const int max_exp = p->dry_base > 1.000001f ? (int)(88.7228391f / logf(p->dry_base)) : 0;
    for (int k = 1; k < w; k++) {
        const int32_t id = R(k - 1);
        if (id < 0 || id >= s->vocab_size || !best[id])
            continue;
        int e = (int)best[id] - 1 - p->dry_allowed_length;
        best[id] = 0;
        if (is_breaker(s, id))
            continue;
        e = max_exp > 0 && e > max_exp ? max_exp : e;
        logits[id] -= p->dry_multiplier * powf(p->dry_base, (float)e);
    }
#undef R
    free(z);
    return TS_OK;
}
