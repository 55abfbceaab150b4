/* test_sampler.c: sampling parameters, penalties, the top-k / min-p / top-p kept sets,
 * seeded draws, sampling frequencies and logprobs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine/sampler.h"
#include "tessera/sampling.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t test_rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

typedef struct fixture {
    sampler s;
    sampler_scratch sc;
} fixture;

static void setup_sampler(fixture *f, const ts_sampling_params *p, int vocab)
{
    ts_error err = {0};
    assert_int_equal(sampler_init(&f->s, p, vocab, 1234, &err), TS_OK);
    assert_int_equal(sampler_scratch_init(&f->sc, vocab, &err), TS_OK);
}

/* Runs sampler_candidates and returns the kept set as a bitmask over ids (vocab <= 64). */
static uint64_t kept_mask(const ts_sampling_params *p, const float *logits, int vocab)
{
    fixture f;
    setup_sampler(&f, p, vocab);
    int n = -1;
    assert_int_equal(sampler_candidates(&f.s, &f.sc, &n, logits, NULL), TS_OK);
    assert_true(n >= 1 && n <= vocab);
    uint64_t mask = 0;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        int id = f.sc.cand[i].id;
        assert_true(id >= 0 && id < vocab);
        assert_false(mask & (1ULL << id)); /* no duplicates */
        mask |= 1ULL << id;
        sum += f.sc.cand[i].p;
    }
    assert_true(fabs(sum - 1.0) < 1e-5);
    sampler_scratch_free(&f.sc);
    return mask;
}

#define BIT(i) (1ULL << (i))

static ts_sampling_params params_t(float temperature)
{
    ts_sampling_params p = ts_sampling_params_default();
    p.temperature = temperature;
    return p;
}

/* ---------------------------------------------------------------- parameters */

static void test_defaults_are_valid(void **state)
{
    (void)state;
    ts_sampling_params p = ts_sampling_params_default();
    assert_int_equal(ts_sampling_params_validate(&p, NULL), TS_OK);
    assert_true(p.temperature == 1.0f && p.top_p == 1.0f && p.top_k == 0 && p.min_p == 0.0f);
    assert_true(p.repetition_penalty == 1.0f && p.repeat_last_n == 64 && !p.has_seed);

    /* edge values inside the ranges */
    p.temperature = 0.0f;
    p.top_p = 1.0f;
    p.min_p = 1.0f;
    p.top_k = 1000000;
    p.repeat_last_n = -1;
    p.presence_penalty = -2.0f;
    p.frequency_penalty = 2.0f;
    p.logprobs = true;
    p.top_logprobs = 20;
    p.repetition_penalty = 10.0f;
    assert_int_equal(ts_sampling_params_validate(&p, NULL), TS_OK);
    p.temperature = 2.0f;
    p.top_p = 1e-6f;
    assert_int_equal(ts_sampling_params_validate(&p, NULL), TS_OK);
}

static void test_validation_names_the_field(void **state)
{
    (void)state;
    typedef struct { const char *field; int which; float f; int i; } bad;
    const bad bads[] = {
        { "temperature", 0, -0.1f, 0 },  { "temperature", 0, 2.01f, 0 },
        { "temperature", 0, NAN, 0 },    { "top_k", 1, 0, -1 },
        { "top_p", 2, 0.0f, 0 },         { "top_p", 2, 1.01f, 0 },
        { "top_p", 2, NAN, 0 },          { "min_p", 3, -0.01f, 0 },
        { "min_p", 3, 1.5f, 0 },         { "repetition_penalty", 4, 0.0f, 0 },
        { "repetition_penalty", 4, -1.0f, 0 }, { "repetition_penalty", 4, 11.0f, 0 },
        { "repeat_last_n", 5, 0, -2 },   { "presence_penalty", 6, 2.5f, 0 },
        { "presence_penalty", 6, -2.5f, 0 }, { "frequency_penalty", 7, 3.0f, 0 },
        { "frequency_penalty", 7, INFINITY, 0 }, { "top_logprobs", 8, 0, 21 },
        { "top_logprobs", 8, 0, -1 },
    };
    for (size_t k = 0; k < sizeof bads / sizeof bads[0]; k++) {
        ts_sampling_params p = ts_sampling_params_default();
        p.logprobs = true;
        switch (bads[k].which) {
        case 0: p.temperature = bads[k].f; break;
        case 1: p.top_k = bads[k].i; break;
        case 2: p.top_p = bads[k].f; break;
        case 3: p.min_p = bads[k].f; break;
        case 4: p.repetition_penalty = bads[k].f; break;
        case 5: p.repeat_last_n = bads[k].i; break;
        case 6: p.presence_penalty = bads[k].f; break;
        case 7: p.frequency_penalty = bads[k].f; break;
        default: p.top_logprobs = bads[k].i; break;
        }
        ts_error err = {0};
        assert_int_equal(ts_sampling_params_validate(&p, &err), TS_ERR_INVALID_ARG);
        assert_int_equal(err.status, TS_ERR_INVALID_ARG);
        /* the message starts with the field's name */
        assert_int_equal(strncmp(err.msg, bads[k].field, strlen(bads[k].field)), 0);
        assert_true(err.msg[strlen(bads[k].field)] == ' ');
        /* sampler_init refuses the same parameters */
        sampler s;
        assert_int_equal(sampler_init(&s, &p, 10, 0, NULL), TS_ERR_INVALID_ARG);
    }

    ts_sampling_params p = ts_sampling_params_default();
    p.top_logprobs = 3; /* without logprobs */
    ts_error err = {0};
    assert_int_equal(ts_sampling_params_validate(&p, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "top_logprobs"));
    assert_non_null(strstr(err.msg, "logprobs to be true"));
    assert_int_equal(ts_sampling_params_validate(NULL, NULL), TS_ERR_INVALID_ARG);

    sampler s;
    p = ts_sampling_params_default();
    assert_int_equal(sampler_init(&s, &p, 0, 0, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "vocab_size"));
}

static void test_scratch_errors(void **state)
{
    (void)state;
    sampler_scratch sc;
    ts_error err = {0};
    assert_int_equal(sampler_scratch_init(&sc, -5, &err), TS_ERR_INVALID_ARG);
    sampler_scratch_free(&sc); /* freeable after failure */
    sampler_scratch_free(NULL);

    ts_sampling_params p = ts_sampling_params_default();
    sampler s;
    assert_int_equal(sampler_init(&s, &p, 100, 0, NULL), TS_OK);
    assert_int_equal(sampler_scratch_init(&sc, 50, NULL), TS_OK);
    float logits[100] = {0};
    int32_t tok = -1;
    assert_int_equal(sampler_sample(&s, &sc, &tok, NULL, logits, NULL, 0, 0, &err),
                     TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "scratch"));
    sampler_scratch_free(&sc);

    assert_int_equal(sampler_scratch_init(&sc, 100, NULL), TS_OK);
    int32_t hist[2] = { 1, 2 };
    assert_int_equal(sampler_sample(&s, &sc, &tok, NULL, logits, hist, 2, 3, &err),
                     TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "n_gen"));
    assert_int_equal(sampler_sample(&s, &sc, &tok, NULL, logits, hist, -1, 0, NULL),
                     TS_ERR_INVALID_ARG);
    sampler_scratch_free(&sc);
}

/* ---------------------------------------------------------------- greedy */

static void test_greedy_picks_first_max(void **state)
{
    (void)state;
    ts_sampling_params p = params_t(0.0f);
    p.top_k = 1; /* filters do not matter when greedy */
    p.top_p = 0.1f;
    const float logits[6] = { 1.0f, 3.0f, -2.0f, 3.0f, 2.9f, 3.0f };
    assert_int_equal(kept_mask(&p, logits, 6), BIT(1));

    /* the same through sampler_sample, for many seeds */
    for (uint64_t seed = 0; seed < 20; seed++) {
        p.seed = seed;
        p.has_seed = true;
        fixture f;
        setup_sampler(&f, &p, 6);
        float l[6];
        memcpy(l, logits, sizeof l);
        int32_t tok = -1;
        assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, NULL, l, NULL, 0, 0, NULL), TS_OK);
        assert_int_equal(tok, 1);
        sampler_scratch_free(&f.sc);
    }

    /* a denormal temperature acts as 0 rather than producing NaN */
    ts_sampling_params tiny = params_t(1e-45f);
    assert_int_equal(kept_mask(&tiny, logits, 6), BIT(1));
    tiny.temperature = 1e-30f; /* small, 1/T finite: sampling among the three tied best */
    tiny.min_p = 1e-6f;
    assert_int_equal(kept_mask(&tiny, logits, 6), BIT(1) | BIT(3) | BIT(5));

    const float first[3] = { 5.0f, 5.0f, 5.0f };
    assert_int_equal(kept_mask(&p, first, 3), BIT(0));
    const float nan0[3] = { NAN, -1.0f, -3.0f };
    assert_int_equal(kept_mask(&p, nan0, 3), BIT(1));
    const float last[4] = { -INFINITY, -INFINITY, -INFINITY, -5.0f };
    assert_int_equal(kept_mask(&p, last, 4), BIT(3));
}

/* ---------------------------------------------------------------- kept sets */

static void test_top_k_keeps_exact_set(void **state)
{
    (void)state;
    ts_sampling_params p = params_t(1.0f);
    const float l[6] = { 0.0f, 5.0f, 3.0f, 5.0f, 3.0f, 1.0f };
    p.top_k = 1;
    assert_int_equal(kept_mask(&p, l, 6), BIT(1)); /* tie at the top: lower id */
    p.top_k = 2;
    assert_int_equal(kept_mask(&p, l, 6), BIT(1) | BIT(3));
    p.top_k = 3; /* ids 2 and 4 tie for third place: 2 is kept */
    assert_int_equal(kept_mask(&p, l, 6), BIT(1) | BIT(3) | BIT(2));
    p.top_k = 5;
    assert_int_equal(kept_mask(&p, l, 6), BIT(1) | BIT(2) | BIT(3) | BIT(4) | BIT(5));
    p.top_k = 6; /* == vocab: off */
    assert_int_equal(kept_mask(&p, l, 6), 0x3F);
    p.top_k = 1000; /* larger than the vocabulary */
    assert_int_equal(kept_mask(&p, l, 6), 0x3F);
    p.top_k = 0;
    assert_int_equal(kept_mask(&p, l, 6), 0x3F);

    /* masked tokens: top-k may keep -inf tokens but they get probability 0 */
    const float m[4] = { -INFINITY, 2.0f, -INFINITY, -INFINITY };
    p.top_k = 2;
    fixture f;
    setup_sampler(&f, &p, 4);
    int n = 0;
    assert_int_equal(sampler_candidates(&f.s, &f.sc, &n, m, NULL), TS_OK);
    assert_int_equal(n, 2);
    for (int i = 0; i < n; i++) {
        if (f.sc.cand[i].id == 1)
            assert_true(f.sc.cand[i].p == 1.0f);
        else
            assert_int_equal(f.sc.cand[i].id, 0); /* lowest id of the -inf ties */
    }
    sampler_scratch_free(&f.sc);

    /* nothing possible: the lowest id alone */
    const float none[3] = { -INFINITY, NAN, -INFINITY };
    p.top_k = 0;
    assert_int_equal(kept_mask(&p, none, 3), BIT(0));
}

/* logits whose softmax (temperature 1) is probs */
static void log_probs(float *l, const double *probs, int n)
{
    for (int i = 0; i < n; i++)
        l[i] = (float)log(probs[i]);
}

static void test_top_p_keeps_exact_set(void **state)
{
    (void)state;
    const double probs[4] = { 0.1, 0.4, 0.2, 0.3 };
    float l[4];
    log_probs(l, probs, 4);
    ts_sampling_params p = params_t(1.0f);
    p.top_p = 0.01f;
    assert_int_equal(kept_mask(&p, l, 4), BIT(1));
    p.top_p = 0.39f;
    assert_int_equal(kept_mask(&p, l, 4), BIT(1));
    p.top_p = 0.41f;
    assert_int_equal(kept_mask(&p, l, 4), BIT(1) | BIT(3));
    p.top_p = 0.65f;
    assert_int_equal(kept_mask(&p, l, 4), BIT(1) | BIT(3));
    p.top_p = 0.75f;
    assert_int_equal(kept_mask(&p, l, 4), BIT(1) | BIT(3) | BIT(2));
    p.top_p = 0.95f;
    assert_int_equal(kept_mask(&p, l, 4), 0xF);
    p.top_p = 1.0f;
    assert_int_equal(kept_mask(&p, l, 4), 0xF);

    /* temperature applies before top-p: at T = 0.5, p ~ probs^2 = {.033 .533 .133 .3} */
    p.temperature = 0.5f;
    p.top_p = 0.8f;
    assert_int_equal(kept_mask(&p, l, 4), BIT(1) | BIT(3));
    p.temperature = 1.0f;
    assert_int_equal(kept_mask(&p, l, 4), BIT(1) | BIT(3) | BIT(2));

    /* ties: the canonical order cuts among equal tokens by id */
    const float flat[4] = { 1.0f, 1.0f, 1.0f, 1.0f };
    p.top_p = 0.3f;
    assert_int_equal(kept_mask(&p, flat, 4), BIT(0) | BIT(1));
    p.top_p = 0.55f;
    assert_int_equal(kept_mask(&p, flat, 4), BIT(0) | BIT(1) | BIT(2));
    p.top_p = 0.1f;
    assert_int_equal(kept_mask(&p, flat, 4), BIT(0));
    /* exact boundaries (each p is exactly 1/4): the prefix stops once it reaches top_p */
    p.top_p = 0.5f;
    assert_int_equal(kept_mask(&p, flat, 4), BIT(0) | BIT(1));
    p.top_p = 0.75f;
    assert_int_equal(kept_mask(&p, flat, 4), BIT(0) | BIT(1) | BIT(2));
}

static void test_min_p_keeps_exact_set(void **state)
{
    (void)state;
    const double probs[4] = { 0.1, 0.4, 0.2, 0.3 };
    float l[4];
    log_probs(l, probs, 4);
    ts_sampling_params p = params_t(1.0f);
    p.min_p = 0.0f;
    assert_int_equal(kept_mask(&p, l, 4), 0xF);
    p.min_p = 0.2f; /* p >= 0.08 */
    assert_int_equal(kept_mask(&p, l, 4), 0xF);
    p.min_p = 0.6f; /* p >= 0.24 */
    assert_int_equal(kept_mask(&p, l, 4), BIT(1) | BIT(3));
    p.min_p = 0.8f; /* p >= 0.32 */
    assert_int_equal(kept_mask(&p, l, 4), BIT(1));
    p.temperature = 2.0f; /* flatter: p ~ sqrt(probs), ratios .5 1 .71 .87 */
    p.min_p = 0.6f;
    assert_int_equal(kept_mask(&p, l, 4), BIT(1) | BIT(2) | BIT(3));
    p.temperature = 1.0f;

    /* min_p 1 keeps exactly the tokens tied with the best, ties included */
    const float t[5] = { 2.0f, 5.0f, 5.0f, 4.999f, 5.0f };
    p.min_p = 1.0f;
    assert_int_equal(kept_mask(&p, t, 5), BIT(1) | BIT(2) | BIT(4));

    /* order: top-k first, then min-p relative to the best survivor, then top-p */
    p.min_p = 0.6f;
    p.top_k = 2;
    assert_int_equal(kept_mask(&p, l, 4), BIT(1) | BIT(3));
    p.top_p = 0.5f; /* of {1: .571, 3: .429} */
    assert_int_equal(kept_mask(&p, l, 4), BIT(1));
}

static void test_kept_probabilities_are_renormalised(void **state)
{
    (void)state;
    const double probs[5] = { 0.05, 0.4, 0.2, 0.3, 0.05 };
    float l[5];
    log_probs(l, probs, 5);
    ts_sampling_params p = params_t(1.0f);
    p.top_k = 3;
    fixture f;
    setup_sampler(&f, &p, 5);
    int n = 0;
    assert_int_equal(sampler_candidates(&f.s, &f.sc, &n, l, NULL), TS_OK);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++) {
        int id = f.sc.cand[i].id;
        assert_true(fabs(f.sc.cand[i].p - probs[id] / 0.9) < 1e-6);
        assert_true(f.sc.cand[i].logit == l[id]);
    }
    sampler_scratch_free(&f.sc);
}

/* Reference for a large vocabulary: a full sort in the canonical order, then the
 * definitions applied literally. Returns the kept count; keep[] gets the flags. */
typedef struct ref_tok { int id; float l; } ref_tok;

static int ref_cmp(const void *pa, const void *pb)
{
    const ref_tok *a = pa, *b = pb;
    if (a->l != b->l)
        return a->l > b->l ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int reference_kept(const ts_sampling_params *p, const float *logits, int V, char *keep)
{
    ref_tok *t = malloc((size_t)V * sizeof *t);
    assert_non_null(t);
    for (int i = 0; i < V; i++)
        t[i] = (ref_tok){ i, logits[i] };
    qsort(t, (size_t)V, sizeof *t, ref_cmp);
    int n = p->top_k > 0 && p->top_k < V ? p->top_k : V;
    float lmax = t[0].l;
    /* min-p keeps a subset of a canonical prefix that is itself a prefix */
    int m = 0;
    for (int i = 0; i < n; i++) {
        float z = (t[i].l - lmax) * (1.0f / p->temperature);
        if (p->min_p > 0.0f && z < logf(p->min_p))
            break;
        m++;
    }
    n = m;
    if (p->top_p < 1.0f) {
        double total = 0.0, cum = 0.0;
        for (int i = 0; i < n; i++)
            total += sampler_expf((t[i].l - lmax) * (1.0f / p->temperature));
        for (int i = 0; i < n; i++) {
            cum += sampler_expf((t[i].l - lmax) * (1.0f / p->temperature));
            if (cum >= p->top_p * total) {
                n = i + 1;
                break;
            }
        }
    }
    memset(keep, 0, (size_t)V);
    for (int i = 0; i < n; i++)
        keep[t[i].id] = 1;
    free(t);
    return n;
}

/* Logits for the large-vocabulary tests: pattern 0 a peaked, heavy-tailed random
 * distribution (quantised when quant > 0, for many ties), 1 ascending (every token
 * displaces a top-k heap), 2 descending, 3 constant, 4 random with masked (-inf) and NaN
 * tokens. */
static void make_logits(float *logits, int V, int pattern, float quant, uint64_t *x)
{
    for (int i = 0; i < V; i++) {
        double u = (double)(test_rng(x) >> 11) * 0x1.0p-53;
        float v = (float)(8.0 * pow(u, 6.0) - 2.0 + (double)(test_rng(x) % 100) / 50.0);
        if (quant > 0.0f)
            v = roundf(v / quant) * quant;
        switch (pattern) {
        case 1: v = (float)i * 1e-3f; break;
        case 2: v = (float)(V - i) * 1e-3f; break;
        case 3: v = 0.5f; break;
        case 4: v = i % 3 == 0 ? -INFINITY : (i % 1001 == 5 ? NAN : v); break;
        default: break;
        }
        logits[i] = v;
    }
}

static void test_large_vocab_matches_reference(void **state)
{
    (void)state;
    const int V = 32003; /* not a multiple of the vector blocks: tails are exercised */
    float *logits = malloc((size_t)V * sizeof *logits);
    float *clean = malloc((size_t)V * sizeof *clean);
    char *keep = malloc((size_t)V);
    assert_non_null(logits);
    assert_non_null(clean);
    assert_non_null(keep);
    const struct { float t; int k; float top_p, min_p; float quant; int pattern; } cfg[] = {
        { 1.0f, 40, 1.0f, 0.0f, 0.0f, 0 },   { 1.0f, 40, 1.0f, 0.0f, 0.5f, 0 },
        { 0.7f, 0, 0.9f, 0.0f, 0.0f, 0 },    { 1.0f, 0, 0.95f, 0.0f, 0.25f, 0 },
        { 1.5f, 0, 0.999f, 0.0f, 0.0f, 0 },  { 1.0f, 0, 1.0f, 0.05f, 0.0f, 0 },
        { 0.8f, 100, 0.9f, 0.02f, 0.1f, 0 }, { 1.0f, 5000, 0.5f, 0.0f, 1.0f, 0 },
        { 2.0f, 0, 0.99f, 0.0f, 0.0f, 0 },   { 1.0f, 1, 1.0f, 0.0f, 2.0f, 0 },
        { 1.0f, 1024, 0.9f, 0.0f, 0.0f, 1 }, { 1.0f, 1025, 0.9f, 0.0f, 0.0f, 1 },
        { 1.0f, 50, 1.0f, 0.0f, 0.0f, 2 },   { 1.0f, 0, 0.5f, 0.0f, 0.0f, 2 },
        { 1.0f, 7, 0.3f, 0.5f, 0.0f, 3 },    { 1.0f, 0, 0.001f, 0.0f, 0.0f, 3 },
        { 1.0f, 300, 1.0f, 0.0f, 0.0f, 4 },  { 0.9f, 0, 0.9f, 0.01f, 0.0f, 4 },
        { 1.0f, 20000, 0.97f, 0.0f, 0.0f, 4 },
    };
    uint64_t x = 88172645463325252ULL;
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        make_logits(logits, V, cfg[c].pattern, cfg[c].quant, &x);
        for (int i = 0; i < V; i++) /* the reference sees NaN as -inf, as documented */
            clean[i] = isnan(logits[i]) ? -INFINITY : logits[i];
        ts_sampling_params p = params_t(cfg[c].t);
        p.top_k = cfg[c].k;
        p.top_p = cfg[c].top_p;
        p.min_p = cfg[c].min_p;
        int want = reference_kept(&p, clean, V, keep);
        fixture f;
        setup_sampler(&f, &p, V);
        int n = 0;
        assert_int_equal(sampler_candidates(&f.s, &f.sc, &n, logits, NULL), TS_OK);
        assert_int_equal(n, want);
        double sum = 0.0;
        for (int i = 0; i < n; i++) {
            assert_int_equal(keep[f.sc.cand[i].id], 1);
            keep[f.sc.cand[i].id] = 2; /* no duplicates */
            sum += f.sc.cand[i].p;
        }
        assert_true(fabs(sum - 1.0) < 1e-4);
        sampler_scratch_free(&f.sc);
    }
    free(logits);
    free(clean);
    free(keep);
}

/* Masked (-inf) and far-below tokens get probability exactly 0 on the vectorized path,
 * and a draw never picks them. */
static void test_masked_tokens_get_zero(void **state)
{
    (void)state;
    enum { V = 1000 };
    float logits[V];
    for (int i = 0; i < V; i++)
        logits[i] = i % 100 == 7 ? 1.0f : (i % 2 ? -INFINITY : -200.0f);
    ts_sampling_params p = params_t(1.0f);
    p.seed = 3;
    p.has_seed = true;
    fixture f;
    setup_sampler(&f, &p, V);
    int n = 0;
    assert_int_equal(sampler_candidates(&f.s, &f.sc, &n, logits, NULL), TS_OK);
    assert_int_equal(n, V);
    for (int i = 0; i < n; i++) {
        if (f.sc.cand[i].id % 100 == 7)
            assert_true(fabsf(f.sc.cand[i].p - 0.1f) < 1e-6f);
        else
            assert_true(f.sc.cand[i].p == 0.0f);
    }
    for (int d = 0; d < 2000; d++) {
        float l[V];
        memcpy(l, logits, sizeof l);
        int32_t tok = -1;
        assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, NULL, l, NULL, 0, 0, NULL), TS_OK);
        assert_int_equal(tok % 100, 7);
    }
    sampler_scratch_free(&f.sc);
}

/* Top logprobs over a large vocabulary against a double-precision reference. */
static void test_large_vocab_logprobs(void **state)
{
    (void)state;
    const int V = 32003;
    float *logits = malloc((size_t)V * sizeof *logits);
    ref_tok *t = malloc((size_t)V * sizeof *t);
    assert_non_null(logits);
    assert_non_null(t);
    uint64_t x = 77;
    for (int pattern = 0; pattern < 5; pattern++) {
        make_logits(logits, V, pattern, pattern == 0 ? 0.25f : 0.0f, &x);
        ts_sampling_params p = params_t(0.8f);
        p.logprobs = true;
        p.top_logprobs = 20;
        p.seed = (uint64_t)pattern;
        p.has_seed = true;
        fixture f;
        setup_sampler(&f, &p, V);
        sampler_logprobs lp;
        int32_t tok = -1;
        assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, &lp, logits, NULL, 0, 0, NULL), TS_OK);
        for (int i = 0; i < V; i++)
            t[i] = (ref_tok){ i, isnan(logits[i]) ? -INFINITY : logits[i] };
        qsort(t, (size_t)V, sizeof *t, ref_cmp);
        double z = 0.0;
        for (int i = 0; i < V; i++)
            z += exp(((double)t[i].l - t[0].l) / 0.8);
        assert_int_equal(lp.n_top, 20);
        for (int i = 0; i < 20; i++) {
            assert_int_equal(lp.top[i].id, t[i].id);
            double want = ((double)t[i].l - t[0].l) / 0.8 - log(z);
            assert_true(fabs(lp.top[i].logprob - want) < 1e-4);
        }
        double want_tok = ((double)logits[tok] - t[0].l) / 0.8 - log(z);
        assert_true(fabs(lp.logprob - want_tok) < 1e-4);
        sampler_scratch_free(&f.sc);
    }
    free(logits);
    free(t);
}

/* A temperature so small that the runner-up's scaled exponent falls far below -87 (here
 * -95) without being greedy (1 / T is finite): the top token is sampled every time, and
 * probabilities and log-probabilities stay numbers. Exponents past the fast exponential's
 * range once made weights negative: the runner-up won and every logprob was NaN. */
static void test_tiny_temperature_stays_finite(void **state)
{
    (void)state;
    enum { V = 256 };
    float logits[V] = {0};
    logits[0] = 3.0f;
    logits[1] = 3.0f;
    for (int i = 0; i < 4; i++)
        logits[1] = nextafterf(logits[1], 0.0f);
    for (uint64_t seed = 0; seed < 16; seed++) {
        ts_sampling_params p = params_t(1e-8f);
        p.logprobs = true;
        p.top_logprobs = 2;
        p.seed = seed;
        p.has_seed = true;
        fixture f;
        setup_sampler(&f, &p, V);
        sampler_logprobs lp;
        int32_t tok = -1;
        assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, &lp, logits, NULL, 0, 0, NULL), TS_OK);
        assert_int_equal(tok, 0);
        assert_true(isfinite(lp.logprob) && lp.logprob > -1e-3f && lp.logprob <= 0.0f);
        assert_int_equal(lp.top[0].id, 0);
        assert_false(isnan(lp.top[1].logprob));
        sampler_scratch_free(&f.sc);
    }
}

/* The fast exponential against libm in double: relative error, special values. */
static void test_expf_matches_libm(void **state)
{
    (void)state;
    double worst = 0.0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -87.0f * (float)i / 2000000.0f;
        double want = exp((double)x);
        double rel = fabs((double)sampler_expf(x) - want) / want;
        worst = rel > worst ? rel : worst;
    }
    assert_true(worst < 2e-7);
    assert_true(sampler_expf(0.0f) == 1.0f);
    assert_true(sampler_expf(-0.0f) == 1.0f);
    assert_true(sampler_expf(-INFINITY) == 0.0f);
    assert_true(sampler_expf(-87.5f) == 0.0f);
    assert_true(sampler_expf(-1e30f) == 0.0f);
    assert_true(sampler_expf(3.0f) == 1.0f); /* outside the domain: clamped */
    assert_true(fabs(sampler_expf(-1.0f) - 0.36787944117) < 1e-7);
}

/* ---------------------------------------------------------------- draws */

static void draw_sequence(int32_t *out, int n, const ts_sampling_params *p, uint64_t fallback)
{
    const int V = 50;
    sampler s;
    sampler_scratch sc;
    assert_int_equal(sampler_init(&s, p, V, fallback, NULL), TS_OK);
    assert_int_equal(sampler_scratch_init(&sc, V, NULL), TS_OK);
    for (int t = 0; t < n; t++) {
        float l[50];
        for (int i = 0; i < V; i++)
            l[i] = (float)((i * 7 + t) % 13) * 0.3f;
        assert_int_equal(sampler_sample(&s, &sc, &out[t], NULL, l, out, t, t, NULL), TS_OK);
        assert_true(out[t] >= 0 && out[t] < V);
    }
    sampler_scratch_free(&sc);
}

static void test_seed_determinism(void **state)
{
    (void)state;
    enum { N = 200 };
    int32_t a[N], b[N], c[N], d[N];
    ts_sampling_params p = params_t(1.0f);
    p.top_p = 0.95f;
    p.frequency_penalty = 0.3f;
    p.seed = 42;
    p.has_seed = true;
    draw_sequence(a, N, &p, 1);
    draw_sequence(b, N, &p, 999); /* the fallback is ignored when a seed is given */
    assert_memory_equal(a, b, sizeof a);
    p.seed = 43;
    draw_sequence(c, N, &p, 1);
    assert_memory_not_equal(a, c, sizeof a);

    p.has_seed = false; /* the fallback seeds the generator */
    draw_sequence(c, N, &p, 7);
    draw_sequence(d, N, &p, 7);
    assert_memory_equal(c, d, sizeof c);
    draw_sequence(d, N, &p, 8);
    assert_memory_not_equal(c, d, sizeof c);

    /* the uniform stream is in [0, 1) and seeds give different streams */
    sampler s1, s2;
    p.has_seed = true;
    p.seed = 0;
    assert_int_equal(sampler_init(&s1, &p, 10, 0, NULL), TS_OK);
    p.seed = 1;
    assert_int_equal(sampler_init(&s2, &p, 10, 0, NULL), TS_OK);
    int same = 0;
    for (int i = 0; i < 1000; i++) {
        double u1 = sampler_uniform(&s1), u2 = sampler_uniform(&s2);
        assert_true(u1 >= 0.0 && u1 < 1.0);
        same += u1 == u2;
    }
    assert_int_equal(same, 0);
}

static void test_frequencies_match_softmax(void **state)
{
    (void)state;
    enum { V = 6, DRAWS = 100000 };
    const float l[V] = { 1.0f, 2.0f, 0.5f, -1.0f, 2.0f, 0.0f };
    const struct { float t; int k; float top_p; } cfg[] = {
        { 1.0f, 0, 1.0f }, { 0.5f, 0, 1.0f }, { 1.7f, 3, 1.0f }, { 1.0f, 0, 0.8f },
    };
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        ts_sampling_params p = params_t(cfg[c].t);
        p.top_k = cfg[c].k;
        p.top_p = cfg[c].top_p;
        p.seed = 2024 + c;
        p.has_seed = true;
        fixture f;
        setup_sampler(&f, &p, V);
        /* expected: softmax at temperature t over the kept set */
        int n = 0;
        assert_int_equal(sampler_candidates(&f.s, &f.sc, &n, l, NULL), TS_OK);
        double want[V] = {0}, z = 0.0;
        for (int i = 0; i < n; i++)
            z += exp(l[f.sc.cand[i].id] / cfg[c].t);
        for (int i = 0; i < n; i++)
            want[f.sc.cand[i].id] = exp(l[f.sc.cand[i].id] / cfg[c].t) / z;
        int hist[V] = {0};
        for (int d = 0; d < DRAWS; d++) {
            float x[V];
            memcpy(x, l, sizeof x);
            int32_t tok = -1;
            assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, NULL, x, NULL, 0, 0, NULL), TS_OK);
            hist[tok]++;
        }
        for (int i = 0; i < V; i++) {
            double freq = (double)hist[i] / DRAWS;
            /* sd <= 0.0016 at 100k draws; 0.01 is over 6 sd, and the seed is fixed */
            assert_true(fabs(freq - want[i]) < 0.01);
            if (want[i] == 0.0)
                assert_int_equal(hist[i], 0);
        }
        sampler_scratch_free(&f.sc);
    }
}

/* ---------------------------------------------------------------- penalties */

static void test_repetition_penalty(void **state)
{
    (void)state;
    enum { V = 6 };
    const float base[V] = { 2.0f, -2.0f, 1.0f, 3.0f, 0.5f, 0.0f };
    ts_sampling_params p = params_t(1.0f);
    p.repetition_penalty = 2.0f;
    p.repeat_last_n = 4;
    fixture f;
    setup_sampler(&f, &p, V);
    /* window = last 4 = {0, 1, 0, 4} (+ out-of-range ids that are ignored) */
    const int32_t hist[7] = { 3, 2, 0, 1, 0, 4, 5 };
    float l[V];
    memcpy(l, base, sizeof l);
    assert_int_equal(sampler_apply_penalties(&f.s, &f.sc, l, hist, 6, 0, NULL), TS_OK);
    const float want[V] = { 1.0f, -4.0f, 1.0f, 3.0f, 0.25f, 0.0f }; /* 0 listed once */
    assert_memory_equal(l, want, sizeof l);

    const int32_t odd[4] = { 0, -7, 99, 5 };
    memcpy(l, base, sizeof l);
    assert_int_equal(sampler_apply_penalties(&f.s, &f.sc, l, odd, 4, 0, NULL), TS_OK);
    const float want_odd[V] = { 1.0f, -2.0f, 1.0f, 3.0f, 0.5f, 0.0f }; /* 0 * 2 = 0 */
    assert_memory_equal(l, want_odd, sizeof l);
    for (int i = 0; i < V; i++)
        assert_int_equal(f.sc.count[i], 0); /* scratch left clean */
    sampler_scratch_free(&f.sc);

    /* -1 covers everything, 0 turns the penalty off */
    p.repeat_last_n = -1;
    setup_sampler(&f, &p, V);
    memcpy(l, base, sizeof l);
    assert_int_equal(sampler_apply_penalties(&f.s, &f.sc, l, hist, 6, 0, NULL), TS_OK);
    const float want_all[V] = { 1.0f, -4.0f, 0.5f, 1.5f, 0.25f, 0.0f };
    assert_memory_equal(l, want_all, sizeof l);
    sampler_scratch_free(&f.sc);
    p.repeat_last_n = 0;
    setup_sampler(&f, &p, V);
    memcpy(l, base, sizeof l);
    assert_int_equal(sampler_apply_penalties(&f.s, &f.sc, l, hist, 6, 0, NULL), TS_OK);
    assert_memory_equal(l, base, sizeof l);
    sampler_scratch_free(&f.sc);
}

static void test_presence_frequency_penalties(void **state)
{
    (void)state;
    enum { V = 6 };
    const float base[V] = { 2.0f, -2.0f, 1.0f, 3.0f, 0.5f, 0.0f };
    ts_sampling_params p = params_t(1.0f);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    fixture f;
    setup_sampler(&f, &p, V);
    /* prompt {3, 3}, generated {2, 2, 4, 2, 77}: only generated tokens count */
    const int32_t hist[7] = { 3, 3, 2, 2, 4, 2, 77 };
    float l[V];
    memcpy(l, base, sizeof l);
    assert_int_equal(sampler_apply_penalties(&f.s, &f.sc, l, hist, 7, 5, NULL), TS_OK);
    const float want[V] = { 2.0f, -2.0f, 1.0f - 0.5f - 0.75f, 3.0f, 0.5f - 0.5f - 0.25f, 0.0f };
    for (int i = 0; i < V; i++)
        assert_true(fabsf(l[i] - want[i]) < 1e-6f);
    for (int i = 0; i < V; i++)
        assert_int_equal(f.sc.count[i], 0);

    /* negative penalties encourage */
    sampler_scratch_free(&f.sc);
    p.presence_penalty = -1.0f;
    p.frequency_penalty = 0.0f;
    setup_sampler(&f, &p, V);
    memcpy(l, base, sizeof l);
    assert_int_equal(sampler_apply_penalties(&f.s, &f.sc, l, hist, 7, 5, NULL), TS_OK);
    assert_true(l[2] == 2.0f && l[4] == 1.5f && l[3] == 3.0f);

    /* with repetition: repetition first (divide), then subtract */
    sampler_scratch_free(&f.sc);
    p.repetition_penalty = 2.0f;
    p.repeat_last_n = -1;
    setup_sampler(&f, &p, V);
    memcpy(l, base, sizeof l);
    assert_int_equal(sampler_apply_penalties(&f.s, &f.sc, l, hist, 7, 5, NULL), TS_OK);
    assert_true(l[2] == 1.5f && l[3] == 1.5f && l[4] == 1.25f && l[0] == 2.0f);
    sampler_scratch_free(&f.sc);

    /* penalties feed the greedy choice through sampler_sample */
    p = params_t(0.0f);
    p.frequency_penalty = 2.0f;
    setup_sampler(&f, &p, V);
    memcpy(l, base, sizeof l);
    const int32_t gen[1] = { 3 };
    int32_t tok = -1;
    assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, NULL, l, gen, 1, 1, NULL), TS_OK);
    assert_int_equal(tok, 0); /* 3 fell from 3.0 to 1.0 */
    sampler_scratch_free(&f.sc);
}

/* ---------------------------------------------------------------- logprobs */

static void test_logprobs(void **state)
{
    (void)state;
    enum { V = 7 };
    const float base[V] = { 0.3f, 2.0f, -1.0f, 2.0f, 1.5f, -INFINITY, 0.0f };
    const float temps[3] = { 1.0f, 0.6f, 0.0f };
    for (int ti = 0; ti < 3; ti++) {
        ts_sampling_params p = params_t(temps[ti]);
        p.logprobs = true;
        p.top_logprobs = 20; /* more than the vocabulary: capped */
        p.top_k = 1;         /* truncation does not change the reported distribution */
        p.seed = 5;
        p.has_seed = true;
        fixture f;
        setup_sampler(&f, &p, V);
        float l[V];
        memcpy(l, base, sizeof l);
        sampler_logprobs lp;
        int32_t tok = -1;
        assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, &lp, l, NULL, 0, 0, NULL), TS_OK);
        assert_int_equal(tok, 1);
        assert_int_equal(lp.token, 1);
        assert_int_equal(lp.n_top, V);

        const double t = temps[ti] > 0.0f ? temps[ti] : 1.0;
        double z = 0.0;
        for (int i = 0; i < V; i++)
            z += exp(base[i] / t);
        double sum = 0.0;
        for (int i = 0; i < V; i++) {
            int id = lp.top[i].id;
            double want = base[id] == -INFINITY ? -INFINITY : base[id] / t - log(z);
            if (want == -INFINITY)
                assert_true(lp.top[i].logprob == -INFINITY);
            else
                assert_true(fabs(lp.top[i].logprob - want) < 1e-5);
            sum += exp(lp.top[i].logprob);
            if (i > 0) /* canonical order: descending, ties by id */
                assert_true(lp.top[i - 1].logprob > lp.top[i].logprob ||
                            (lp.top[i - 1].logprob == lp.top[i].logprob &&
                             lp.top[i - 1].id < id));
        }
        assert_true(fabs(sum - 1.0) < 1e-5);
        assert_int_equal(lp.top[0].id, 1);
        assert_int_equal(lp.top[1].id, 3);
        assert_int_equal(lp.top[6].id, 5);
        assert_true(lp.logprob == lp.top[0].logprob);
        sampler_scratch_free(&f.sc);
    }

    /* every token impossible: -inf throughout, never NaN */
    {
        ts_sampling_params q = params_t(0.7f);
        q.logprobs = true;
        q.top_logprobs = 3;
        fixture g;
        setup_sampler(&g, &q, 4);
        float none[4] = { -INFINITY, NAN, -INFINITY, -INFINITY };
        sampler_logprobs lpn;
        int32_t t = -1;
        assert_int_equal(sampler_sample(&g.s, &g.sc, &t, &lpn, none, NULL, 0, 0, NULL), TS_OK);
        assert_int_equal(t, 0);
        assert_true(lpn.logprob == -INFINITY);
        assert_int_equal(lpn.n_top, 3);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(lpn.top[i].id, i == 0 ? 0 : i == 1 ? 1 : 2);
            assert_true(lpn.top[i].logprob == -INFINITY);
        }
        sampler_scratch_free(&g.sc);
    }

    /* top N smaller than the vocabulary; chosen token outside the top N */
    ts_sampling_params p = params_t(1.0f);
    p.logprobs = true;
    p.top_logprobs = 2;
    p.min_p = 1.0f;
    fixture f;
    const float l2[V] = { 0.3f, 2.0f, -1.0f, 2.0f, 1.5f, 9.0f, 0.0f };
    setup_sampler(&f, &p, V);
    float l[V];
    memcpy(l, l2, sizeof l);
    const int32_t gen[1] = { 5 };
    f.s.params.frequency_penalty = 9.5f; /* 5 becomes the least likely */
    sampler_logprobs lp;
    int32_t tok = -1;
    assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, &lp, l, gen, 1, 1, NULL), TS_OK);
    assert_true(tok == 1 || tok == 3); /* min_p 1 keeps the two tied at 2.0 */
    assert_int_equal(lp.token, tok);
    assert_int_equal(lp.n_top, 2);
    assert_int_equal(lp.top[0].id, 1);
    assert_int_equal(lp.top[1].id, 3);
    assert_true(lp.top[0].logprob == lp.top[1].logprob);
    double z = 0.0;
    for (int i = 0; i < V; i++)
        z += exp(i == 5 ? -0.5 : l2[i]);
    assert_true(fabs(lp.logprob - (2.0 - log(z))) < 1e-5);
    sampler_scratch_free(&f.sc);
}

/* logit_bias: -100 bans the greedy token, +100 lifts a poor one above it, small biases add
 * to the logit; bad entries are refused naming the field, ids past the vocabulary only by
 * the vocabulary check. */
static void test_logit_bias(void **state)
{
    (void)state;
    enum { V = 8 };
    const float logits[V] = {0.5f, 3.0f, 1.0f, -2.0f, 2.5f, 0.0f, 0.1f, -1.0f};
    ts_sampling_params p = ts_sampling_params_default();
    p.temperature = 0.0f;
    int32_t tok = -1;
    float work[V];
    fixture f;

    p.n_logit_bias = 1;
    p.logit_bias[0] = (ts_logit_bias){1, -100.0f};
    setup_sampler(&f, &p, V);
    memcpy(work, logits, sizeof work);
    assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, NULL, work, NULL, 0, 0, NULL), TS_OK);
    assert_int_equal(tok, 4); /* the runner-up */
    assert_true(isinf(work[1]) && work[1] < 0);
    sampler_scratch_free(&f.sc);

    p.logit_bias[0] = (ts_logit_bias){3, 100.0f};
    setup_sampler(&f, &p, V);
    memcpy(work, logits, sizeof work);
    assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, NULL, work, NULL, 0, 0, NULL), TS_OK);
    assert_int_equal(tok, 3);
    sampler_scratch_free(&f.sc);

    p.n_logit_bias = 2; /* 0.5 + 2.6 = 3.1 beats 3.0; 1.0 - 99.9 stays finite */
    p.logit_bias[0] = (ts_logit_bias){0, 2.6f};
    p.logit_bias[1] = (ts_logit_bias){2, -99.9f};
    setup_sampler(&f, &p, V);
    memcpy(work, logits, sizeof work);
    assert_int_equal(sampler_sample(&f.s, &f.sc, &tok, NULL, work, NULL, 0, 0, NULL), TS_OK);
    assert_int_equal(tok, 0);
    assert_true(isfinite(work[2]) && fabsf(work[2] - (1.0f - 99.9f)) < 1e-4f);
    sampler_scratch_free(&f.sc);

    const char *field = NULL;
    p.n_logit_bias = 1;
    p.logit_bias[0] = (ts_logit_bias){5, 100.5f};
    assert_int_equal(ts_sampling_params_check(&p, &field, NULL), TS_ERR_INVALID_ARG);
    assert_string_equal(field, "logit_bias");
    p.logit_bias[0] = (ts_logit_bias){5, NAN};
    assert_int_equal(ts_sampling_params_check(&p, &field, NULL), TS_ERR_INVALID_ARG);
    p.logit_bias[0] = (ts_logit_bias){-1, 1.0f};
    field = NULL;
    assert_int_equal(ts_sampling_params_check(&p, &field, NULL), TS_ERR_INVALID_ARG);
    assert_string_equal(field, "logit_bias");
    p.logit_bias[0] = (ts_logit_bias){V, 1.0f};
    assert_int_equal(ts_sampling_params_check(&p, &field, NULL), TS_OK);
    assert_int_equal(ts_sampling_params_check_vocab(&p, V + 1, &field, NULL), TS_OK);
    ts_error err = {0};
    assert_int_equal(ts_sampling_params_check_vocab(&p, V, &field, &err), TS_ERR_INVALID_ARG);
    assert_string_equal(field, "logit_bias");
    assert_non_null(strstr(err.msg, "outside the vocabulary"));
    p.n_logit_bias = TS_SAMPLING_MAX_LOGIT_BIAS + 1;
    assert_int_equal(ts_sampling_params_check(&p, &field, NULL), TS_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_valid),
        cmocka_unit_test(test_validation_names_the_field),
        cmocka_unit_test(test_scratch_errors),
        cmocka_unit_test(test_greedy_picks_first_max),
        cmocka_unit_test(test_top_k_keeps_exact_set),
        cmocka_unit_test(test_top_p_keeps_exact_set),
        cmocka_unit_test(test_min_p_keeps_exact_set),
        cmocka_unit_test(test_kept_probabilities_are_renormalised),
        cmocka_unit_test(test_large_vocab_matches_reference),
        cmocka_unit_test(test_large_vocab_logprobs),
        cmocka_unit_test(test_tiny_temperature_stays_finite),
        cmocka_unit_test(test_masked_tokens_get_zero),
        cmocka_unit_test(test_expf_matches_libm),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_frequencies_match_softmax),
        cmocka_unit_test(test_repetition_penalty),
        cmocka_unit_test(test_presence_frequency_penalties),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_logit_bias),
    };
    return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
