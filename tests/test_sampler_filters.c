/* test_sampler_filters.c: llama.cpp's and vLLM's samplers on crafted logits: top-n-sigma,
 * min_keep, typical-p, XTC, mirostat 1 and 2, DRY, and their parameters' checks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine/sampler.h"
#include "engine/sampler_filters.h"
#include "tessera/sampling.h"

#define BIT(i) (1ULL << (i))

typedef struct fixture {
    sampler s;
    sampler_scratch sc;
} fixture;

static void setup(fixture *f, const ts_sampling_params *p, int vocab)
{
    ts_error err = {0};
    assert_int_equal(sampler_init(&f->s, p, vocab, 99, &err), TS_OK);
    assert_int_equal(sampler_scratch_init(&f->sc, vocab, &err), TS_OK);
}

/* The kept set of sampler_candidates as a bit mask over ids (vocab <= 64). */
static uint64_t kept(const ts_sampling_params *p, const float *logits, int vocab)
{
    fixture f;
    setup(&f, p, vocab);
    int n = -1;
    assert_int_equal(sampler_candidates(&f.s, &f.sc, &n, logits, NULL), TS_OK);
    uint64_t mask = 0;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        mask |= BIT(f.sc.cand[i].id);
        sum += f.sc.cand[i].p;
    }
    assert_true(fabs(sum - 1.0) < 1e-5);
    sampler_scratch_free(&f.sc);
    return mask;
}

/* Draws n tokens from the same logits (vocab <= 64) and counts each id. */
static void draw_counts(fixture *f, const float *logits, int vocab, int n, int *count)
{
    float *work = malloc((size_t)vocab * sizeof *work);
    assert_non_null(work);
    memset(count, 0, (size_t)vocab * sizeof *count);
    for (int i = 0; i < n; i++) {
        memcpy(work, logits, (size_t)vocab * sizeof *work);
        int32_t t = -1;
        assert_int_equal(sampler_sample(&f->s, &f->sc, &t, NULL, work, NULL, 0, 0, NULL), TS_OK);
        assert_true(t >= 0 && t < vocab);
        count[t]++;
    }
    free(work);
}

static void test_params_checked(void **state)
{
    (void)state;
    const char *field = NULL;
    ts_sampling_params p = ts_sampling_params_default();
    assert_int_equal(ts_sampling_params_check(&p, &field, NULL), TS_OK);
    struct {
        const char *name;
        void (*set)(ts_sampling_params *);
    } bad[] = {
        {"typical_p", NULL}, {"top_n_sigma", NULL}, {"min_keep", NULL},
        {"xtc_probability", NULL}, {"xtc_threshold", NULL}, {"mirostat", NULL},
        {"mirostat_tau", NULL}, {"mirostat_eta", NULL}, {"dry_multiplier", NULL},
        {"dry_base", NULL}, {"dry_allowed_length", NULL}, {"dry_penalty_last_n", NULL},
        {"dry_sequence_breakers", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = ts_sampling_params_default();
        switch (i) {
        case 0: p.typical_p = 0.0f; break;
        case 1: p.top_n_sigma = 101.0f; break;
        case 2: p.min_keep = -1; break;
        case 3: p.xtc_probability = 1.5f; break;
        case 4: p.xtc_threshold = NAN; break;
        case 5: p.mirostat = 3; break;
        case 6: p.mirostat_tau = -1.0f; break;
        case 7: p.mirostat_eta = 2.0f; break;
        case 8: p.dry_multiplier = -0.5f; break;
        case 9: p.dry_base = 1000.0f; break;
        case 10: p.dry_allowed_length = -1; break;
        case 11: p.dry_penalty_last_n = -2; break;
        case 12: p.dry_breakers[1][0] = '\0'; break;
        }
        field = NULL;
        assert_int_equal(ts_sampling_params_check(&p, &field, NULL), TS_ERR_INVALID_ARG);
        assert_non_null(field);
        assert_string_equal(field, bad[i].name);
    }
}

static void test_top_n_sigma(void **state)
{
    (void)state;
    /* mean 1.25, sigma sqrt(2.1875) = 1.479: n = 1 keeps logits >= 2.52 */
    const float logits[8] = {4, 3, 2, 1, 0, 0, 0, 0};
    ts_sampling_params p = ts_sampling_params_default();
    assert_int_equal(kept(&p, logits, 8), 0xFF);
    p.top_n_sigma = 1.0f;
    assert_int_equal(kept(&p, logits, 8), BIT(0) | BIT(1));
    p.top_n_sigma = 2.0f; /* >= 1.04 */
    assert_int_equal(kept(&p, logits, 8), BIT(0) | BIT(1) | BIT(2));
    p.top_k = 4; /* with top-k: sigma is the whole vocabulary's still (over the top 4 it
                  * would be 1.118, and 1 would pass) */
    assert_int_equal(kept(&p, logits, 8), BIT(0) | BIT(1) | BIT(2));
    p.top_k = 0;
    p.top_n_sigma = 0.1f; /* >= 3.85 */
    assert_int_equal(kept(&p, logits, 8), BIT(0));
    p.min_keep = 3; /* one token passes; min_keep brings back the best three */
    assert_int_equal(kept(&p, logits, 8), BIT(0) | BIT(1) | BIT(2));
}

static void test_min_keep(void **state)
{
    (void)state;
    const float logits[6] = {5, 1, 0.5f, 0, -1, -2};
    ts_sampling_params p = ts_sampling_params_default();
    p.min_p = 0.5f;
    assert_int_equal(kept(&p, logits, 6), BIT(0));
    p.min_keep = 3;
    assert_int_equal(kept(&p, logits, 6), BIT(0) | BIT(1) | BIT(2));
    p.top_k = 4; /* through the top-k path as well */
    assert_int_equal(kept(&p, logits, 6), BIT(0) | BIT(1) | BIT(2));
    p = ts_sampling_params_default();
    p.top_p = 0.1f;
    assert_int_equal(kept(&p, logits, 6), BIT(0));
    p.min_keep = 2;
    assert_int_equal(kept(&p, logits, 6), BIT(0) | BIT(1));
    p.min_keep = 100; /* more than the vocabulary: everything */
    assert_int_equal(kept(&p, logits, 6), 0x3F);
}

static void test_typical_p(void **state)
{
    (void)state;
    /* p = .5 .2 .2 .1, H = 1.2206: |-ln p - H| = .527 .389 .389 1.082, so the order is
     * 1, 2, 0, 3 and the most likely token is not the most typical */
    const float logits[4] = {logf(0.5f), logf(0.2f), logf(0.2f), logf(0.1f)};
    ts_sampling_params p = ts_sampling_params_default();
    p.typical_p = 0.3f;
    assert_int_equal(kept(&p, logits, 4), BIT(1) | BIT(2));
    p.typical_p = 0.5f; /* .4 is not above .5: one more */
    assert_int_equal(kept(&p, logits, 4), BIT(0) | BIT(1) | BIT(2));
    p.typical_p = 0.1f;
    p.min_keep = 3;
    assert_int_equal(kept(&p, logits, 4), BIT(0) | BIT(1) | BIT(2));
    p.min_keep = 0;
    p.typical_p = 1.0f;
    assert_int_equal(kept(&p, logits, 4), 0xF);
}

static void test_xtc(void **state)
{
    (void)state;
    const float logits[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    enum { N = 20000 };
    int count[4];
    ts_sampling_params p = ts_sampling_params_default();
    p.has_seed = true;
    p.seed = 7;
    p.xtc_threshold = 0.15f;
    p.xtc_probability = 1.0f; /* 0, 1 and 2 reach .15: 0 and 1 go, 2 stays */
    fixture f;
    setup(&f, &p, 4);
    draw_counts(&f, logits, 4, N, count);
    assert_int_equal(count[0] + count[1], 0);
    assert_in_range(count[2], N * 2 / 3 - 400, N * 2 / 3 + 400);
    sampler_scratch_free(&f.sc);

    p.xtc_probability = 0.5f; /* half the draws as without XTC: p(0) = .5 * .4 */
    setup(&f, &p, 4);
    draw_counts(&f, logits, 4, N, count);
    assert_in_range(count[0], N / 5 - 300, N / 5 + 300);
    assert_in_range(count[3], 4333 - 300, 4333 + 300); /* .5 * .1 + .5 * (1/3) */
    sampler_scratch_free(&f.sc);

    p.xtc_probability = 1.0f;
    p.xtc_threshold = 0.35f; /* only one token reaches it: nothing removed */
    setup(&f, &p, 4);
    draw_counts(&f, logits, 4, N, count);
    assert_in_range(count[0], N * 4 / 10 - 400, N * 4 / 10 + 400);
    sampler_scratch_free(&f.sc);

    p.xtc_threshold = 0.0f; /* every possible token reaches it: the least likely stays,
                             * never an impossible one */
    const float banned[4] = {logf(0.4f), logf(0.3f), logf(0.3f), -INFINITY};
    setup(&f, &p, 4);
    draw_counts(&f, banned, 4, 200, count);
    assert_int_equal(count[2], 200); /* 1 and 2 tie: id order puts 2 last */
    sampler_scratch_free(&f.sc);

    p.xtc_threshold = 0.15f;
    p.min_keep = 3; /* removing two would leave two */
    setup(&f, &p, 4);
    draw_counts(&f, logits, 4, N, count);
    assert_true(count[0] > N / 4);
    sampler_scratch_free(&f.sc);
}

/* Mirostat keeps the average surprise of its draws at tau: a Zipf-like distribution over
 * 256 tokens, the same logits every step. */
static double mirostat_mean_surprise(int mode, float tau, float *mu_out)
{
    enum { V = 256, WARM = 500, N = 4000 };
    float logits[V], work[V];
    for (int i = 0; i < V; i++)
        logits[i] = -1.2f * logf((float)(i + 1));
    ts_sampling_params p = ts_sampling_params_default();
    p.mirostat = mode;
    p.mirostat_tau = tau;
    p.mirostat_eta = 0.1f;
    p.top_k = 1; /* ignored under mirostat */
    p.has_seed = true;
    p.seed = 3;
    fixture f;
    setup(&f, &p, V);
    sampler_scratch cut; /* the kept set, worked out apart from the draw */
    assert_int_equal(sampler_scratch_init(&cut, V, NULL), TS_OK);
    assert_true(f.s.mirostat_mu == 2.0f * tau);
    double sum = 0.0;
    int distinct = 0;
    bool seen[V] = {false};
    for (int i = 0; i < WARM + N; i++) {
        int n = sampler__mirostat_cut(&f.s, &cut, logits);
        memcpy(work, logits, sizeof work);
        int32_t t = -1;
        assert_int_equal(sampler_sample(&f.s, &f.sc, &t, NULL, work, NULL, 0, 0, NULL), TS_OK);
        double p_t = 0.0; /* the drawn token's probability within the kept set */
        for (int k = 0; k < n; k++)
            p_t = cut.cand[k].id == t ? cut.cand[k].p : p_t;
        assert_true(p_t > 0.0); /* drawn from the kept set */
        distinct += !seen[t];
        seen[t] = true;
        if (i >= WARM)
            sum += -log2(p_t);
    }
    assert_true(distinct > 1); /* top_k 1 did not apply */
    *mu_out = f.s.mirostat_mu;
    sampler_scratch_free(&cut);
    sampler_scratch_free(&f.sc);
    return sum / N;
}

static void test_mirostat_tracks_target(void **state)
{
    (void)state;
    float mu = 0.0f;
    for (int mode = 1; mode <= 2; mode++) {
        for (float tau = 1.5f; tau <= 3.0f; tau += 1.5f) {
            double s = mirostat_mean_surprise(mode, tau, &mu);
            assert_true(fabs(s - tau) < 0.1);
            assert_true(mu > 0.0f && mu < 4.0f * tau);
            assert_true(fabsf(mu - 2.0f * tau) > 0.1f); /* mu learnt */
        }
    }
}

/* Mirostat 2's cut: with mu of 1 bit, only tokens of p >= 1/2 stay. */
static void test_mirostat2_cut(void **state)
{
    (void)state;
    const float logits[4] = {logf(0.6f), logf(0.3f), logf(0.05f), logf(0.05f)};
    ts_sampling_params p = ts_sampling_params_default();
    p.mirostat = 2;
    p.mirostat_tau = 0.5f; /* mu starts at 1 */
    p.mirostat_eta = 0.0f; /* and stays */
    fixture f;
    setup(&f, &p, 4);
    int count[4];
    draw_counts(&f, logits, 4, 200, count);
    assert_int_equal(count[0], 200);
    sampler_scratch_free(&f.sc);
    p.mirostat_tau = 1.0f; /* mu 2: p >= 1/4 */
    setup(&f, &p, 4);
    draw_counts(&f, logits, 4, 2000, count);
    assert_int_equal(count[2] + count[3], 0);
    assert_in_range(count[1], 2000 / 3 - 120, 2000 / 3 + 120);
    sampler_scratch_free(&f.sc);
}

/* DRY's penalty on logits all 0 after the history h (n). */
static void dry_penalties(const ts_sampling_params *p, const uint8_t *breakers,
                          const int32_t *h, int n, float *logits, int vocab)
{
    fixture f;
    setup(&f, p, vocab);
    sampler_set_dry_breakers(&f.s, breakers);
    for (int i = 0; i < vocab; i++)
        logits[i] = 0.0f;
    assert_int_equal(sampler_apply_penalties(&f.s, &f.sc, logits, h, n, 0, NULL), TS_OK);
    for (int i = 0; i < vocab; i++) /* the counts are zero again */
        assert_int_equal(f.sc.count[i], 0);
    sampler_scratch_free(&f.sc);
}

static void test_dry(void **state)
{
    (void)state;
    enum { V = 16 };
    float l[V];
    ts_sampling_params p = ts_sampling_params_default();
    p.dry_multiplier = 1.0f;
    p.dry_base = 2.0f;
    p.dry_allowed_length = 2;
    /* "1 2 3" repeats "1 2 3 4": 4 would extend a repeat of 3 tokens, 2^(3-2) */
    const int32_t h[] = {1, 2, 3, 4, 5, 1, 2, 3};
    dry_penalties(&p, NULL, h, 8, l, V);
    for (int i = 0; i < V; i++)
        assert_true(l[i] == (i == 4 ? -2.0f : 0.0f));

    p.dry_multiplier = 0.5f;
    p.dry_base = 3.0f;
    const int32_t h2[] = {1, 2, 3, 4, 5, 6, 9, 1, 2, 3, 4, 5};
    dry_penalties(&p, NULL, h2, 12, l, V);
    assert_true(fabsf(l[6] - -13.5f) < 1e-4f); /* 0.5 * 3^(5-2) */
    assert_true(l[9] == 0.0f && l[1] == 0.0f);

    p.dry_penalty_last_n = 6; /* the first "1 2 3 4 5 6" is out of the window */
    dry_penalties(&p, NULL, h2, 12, l, V);
    assert_true(l[6] == 0.0f);
    p.dry_penalty_last_n = -1;

    uint8_t brk[V / 8] = {0};
    brk[0] = 1u << 3; /* token 3 breaks: the repeat behind 4 and 5 is "4 5" only */
    dry_penalties(&p, brk, h2, 12, l, V);
    assert_true(fabsf(l[6] - -0.5f) < 1e-6f); /* 0.5 * 3^(2-2) */
    brk[0] = 1u << 6; /* a breaker is never penalised */
    dry_penalties(&p, brk, h2, 12, l, V);
    assert_true(l[6] == 0.0f);

    p.dry_multiplier = 0.0f; /* off */
    dry_penalties(&p, NULL, h2, 12, l, V);
    for (int i = 0; i < V; i++)
        assert_true(l[i] == 0.0f);
}

/* DRY through sampler_sample: greedy turns away from the token that would repeat. */
static void test_dry_changes_greedy(void **state)
{
    (void)state;
    enum { V = 8 };
    float l[V] = {0};
    l[4] = 1.0f;
    l[5] = 0.5f;
    const int32_t h[] = {1, 2, 3, 4, 0, 1, 2, 3};
    ts_sampling_params p = ts_sampling_params_default();
    p.temperature = 0.0f;
    fixture f;
    setup(&f, &p, V);
    int32_t t = -1;
    float w[V];
    memcpy(w, l, sizeof w);
    assert_int_equal(sampler_sample(&f.s, &f.sc, &t, NULL, w, h, 8, 0, NULL), TS_OK);
    assert_int_equal(t, 4);
    sampler_scratch_free(&f.sc);
    p.dry_multiplier = 0.8f;
    setup(&f, &p, V);
    memcpy(w, l, sizeof w);
    assert_int_equal(sampler_sample(&f.s, &f.sc, &t, NULL, w, h, 8, 0, NULL), TS_OK);
    assert_int_equal(t, 5);
    sampler_scratch_free(&f.sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params_checked),
        cmocka_unit_test(test_top_n_sigma),
        cmocka_unit_test(test_min_keep),
        cmocka_unit_test(test_typical_p),
        cmocka_unit_test(test_xtc),
        cmocka_unit_test(test_mirostat_tracks_target),
        cmocka_unit_test(test_mirostat2_cut),
        cmocka_unit_test(test_dry),
        cmocka_unit_test(test_dry_changes_greedy),
    };
    return cmocka_run_group_tests_name("sampler_filters", tests, NULL, NULL);
}
