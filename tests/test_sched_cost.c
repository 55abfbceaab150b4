/* test_sched_cost.c: the step cost model behind the adaptive prefill budget (engine/cost.c),
 * fed timings of known costs, straight and curved, with noise: it estimates them, follows
 * a change of machine speed, stays sane when the steps never vary, forgets ranges of rows
 * no step visits, and sizes the prefill chunk from them, as a 64-stream start on the
 * benchmark host needs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/cost.h"
#include "tessera/engine.h"

/* The true cost of a fake machine: a + b (D + P) seconds, times (1 + noise). */
typedef struct truth {
    double a, b;
    double noise; /* relative, uniform in [-noise, noise] */
    uint32_t rng;
} truth;

static double frand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / (double)(1u << 24);
}

static double truth_secs(truth *t, int d, int p)
{
    double secs = t->a + t->b * (d + p);
    return secs * (1.0 + t->noise * (2.0 * frand(&t->rng) - 1.0));
}

/* Feeds n steps of varying rows, as a busy engine runs them: decode counts that drift,
 * prompt chunks that come and go. */
static void feed(step_cost *c, truth *t, int n)
{
    for (int i = 0; i < n; i++) {
        int d = 8 + (int)(56 * frand(&t->rng));
        int p = frand(&t->rng) < 0.3 ? 0 : 32 + (int)(224 * frand(&t->rng));
        cost_observe(c, d, p, truth_secs(t, d, p));
    }
}

static void assert_near(double got, double want, double rel)
{
    if (fabs(got - want) > rel * fabs(want))
        fail_msg("%g is not within %.0f%% of %g", got, 100 * rel, want);
}

static void test_estimates_the_true_costs(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    assert_true(cost_estimate(&c, 64, 0) == 0.0); /* nothing seen */
    truth t = {.a = 0.020, .b = 0.00075, .noise = 0.03, .rng = 7};
    feed(&c, &t, 300);
    /* what the budget uses: steps of the kinds it sizes */
    assert_near(cost_estimate(&c, 64, 0), 0.020 + 0.048, 0.05);
    assert_near(cost_estimate(&c, 32, 64), 0.020 + 0.072, 0.05);
    assert_near(cost_estimate(&c, 64, 128), 0.020 + 0.144, 0.05);
    /* past the largest steps seen (~320 rows), in proportion to them: more than a line
     * with a fixed part says, never less */
    double big = cost_estimate(&c, 64, 1000);
    assert_true(big > 0.020 + 0.00075 * 1064);
    assert_true(big < 1.1 * (0.020 / 320 + 0.00075) * 1064);
}

/* Steps whose cost is not a straight line in rows, as on the benchmark host (TinyLlama
 * Q4_K_M, 16 threads, session 16: 6 ms at 1 row, 16.3 at 16, 33.4 at 52, 71 at 129, 231
 * at 512): between the ranges of rows the steps had, the model follows the curve. */
static const double HOST_ROWS[] = {1, 16, 52, 129, 512};
static const double HOST_SECS[] = {0.0060, 0.0163, 0.0334, 0.0710, 0.2310};

static double host_secs(int rows)
{
    int n = (int)(sizeof HOST_ROWS / sizeof *HOST_ROWS);
    if (rows >= HOST_ROWS[n - 1])
        return HOST_SECS[n - 1] * rows / HOST_ROWS[n - 1];
    int i = 1;
    while (rows > HOST_ROWS[i])
        i++;
    return HOST_SECS[i - 1] + (HOST_SECS[i] - HOST_SECS[i - 1]) * (rows - HOST_ROWS[i - 1]) /
                                  (HOST_ROWS[i] - HOST_ROWS[i - 1]);
}

static void test_follows_a_curve(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    uint32_t rng = 5;
    for (int i = 0; i < 400; i++) {
        int rows = 1 + (int)(511 * frand(&rng) * frand(&rng)); /* more small steps */
        cost_observe(&c, rows, 0, host_secs(rows));
    }
    for (int rows = 8; rows <= 512; rows *= 2)
        assert_near(cost_estimate(&c, rows, 0), host_secs(rows), 0.08);
    assert_near(cost_estimate(&c, 40, 60), host_secs(100), 0.08);
}

static void test_budget_from_the_model(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    truth t = {.a = 0.020, .b = 0.00075, .noise = 0.0, .rng = 3};
    assert_int_equal(cost_prefill_budget(&c, 64, 64, 2.0, 32, 448), -1); /* nothing seen */
    feed(&c, &t, 200);
    /* 64 decoding, the batch full: a second step's worth, 68 ms, buys 90 prompt rows */
    int rows = cost_prefill_budget(&c, 64, 64, 2.0, 8, 448);
    assert_in_range(rows, 86, 94);
    /* 4 decoding while 64 fill the batch: room up to 2 x 68 ms, 154 rows */
    rows = cost_prefill_budget(&c, 4, 64, 2.0, 8, 508);
    assert_in_range(rows, 146, 154);
    /* bounds: never under the floor, never over the room left */
    assert_int_equal(cost_prefill_budget(&c, 64, 64, 1.0, 32, 448), 32);
    assert_int_equal(cost_prefill_budget(&c, 64, 64, 100.0, 32, 448), 448);
    assert_int_equal(cost_prefill_budget(&c, 64, 64, 1.0, 32, 16), 16);
}

/* The engine's default target keeps a mixed step of a full batch, as the model sees it,
 * within 1.5x a full decode step: the bound on the p99 inter-token gap is 2x the
 * median, and at a target of 2 the model's own error alone went past it. */
static void test_default_target_leaves_room_under_2x(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    step_cost c;
    cost_init(&c);
    truth t = {.a = 0.020, .b = 0.00075, .noise = 0.0, .rng = 5};
    feed(&c, &t, 200);
    int rows = cost_prefill_budget(&c, 64, 64, o.itl_target, 1, 448);
    double full = t.a + t.b * 64, mixed = full + t.b * rows;
    assert_true(rows > 0);
    assert_true(mixed <= 1.5 * full * 1.02);
    assert_true(mixed < 0.8 * 2.0 * full); /* a fifth of 2x left for the model's error */
}

/* The machine gets twice as slow (another job takes half the cores): the model follows
 * within a few dozen steps. */
static void test_follows_a_change(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    truth t = {.a = 0.020, .b = 0.00075, .noise = 0.02, .rng = 11};
    feed(&c, &t, 200);
    assert_near(cost_estimate(&c, 32, 64), 0.092, 0.05);
    t.a *= 2;
    t.b *= 2;
    feed(&c, &t, 60);
    assert_near(cost_estimate(&c, 32, 64), 0.184, 0.08);
}

/* Steps that never vary (16 decode rows, no prompt) pin their own cost; larger steps are
 * taken to cost in proportion, so the budget is finite. */
static void test_unvaried_steps_stay_sane(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    for (int i = 0; i < 100; i++)
        cost_observe(&c, 16, 0, 0.040);
    assert_near(cost_estimate(&c, 16, 0), 0.040, 0.02);
    assert_near(cost_estimate(&c, 16, 16), 0.080, 0.02);
    int rows = cost_prefill_budget(&c, 16, 16, 2.0, 1, 100000);
    assert_in_range(rows, 15, 16);
    /* nonsense timings are ignored */
    cost_observe(&c, 16, 0, -1.0);
    cost_observe(&c, 16, 0, NAN);
    cost_observe(&c, 16, 0, INFINITY);
    cost_observe(&c, 0, 0, 1.0);
    cost_observe(&c, -5, 2, 1.0);
    assert_int_equal(c.seen, 100);
    assert_near(cost_estimate(&c, 16, 0), 0.040, 0.02);
}

/* A range no step visits any more drops out: a machine that was slow for large steps an
 * hour ago does not hold their estimate there; the recent steps' proportion does. */
static void test_old_ranges_drop_out(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    for (int i = 0; i < 20; i++)
        cost_observe(&c, 0, 256, 1.0); /* a slow past */
    for (int i = 0; i < 200; i++)
        cost_observe(&c, 64, 0, 0.040);
    assert_near(cost_estimate(&c, 0, 256), 0.160, 0.02);
}

/* The burst that a 64-stream start is, on the benchmark host's curve: 16 streams have been
 * decoding, 48 prompts of 32 tokens wait and are taken in chunks while the decoders grow
 * from 16 to 64. After the first two steps (sized while the model has seen no step near
 * 64 rows) each mixed step lasts at most 1.6x a step decoding all 64. The one straight
 * line the model fitted before (time = a + b_decode D + b_prefill P over every step),
 * fed the same steps, sized steps of up to 2.1x. */
static void test_host_burst_stays_near_the_target(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    for (int i = 0; i < 8; i++)
        cost_observe(&c, 1, 0, host_secs(1));
    for (int i = 0; i < 60; i++)
        cost_observe(&c, 16, 0, host_secs(16));
    cost_observe(&c, 0, 512, host_secs(512));
    int decoding = 16, waiting = 48 * 32, step = 0;
    double full = host_secs(64), worst = 0.0;
    while (waiting > 0) {
        int p = cost_prefill_budget(&c, decoding, 64, 1.5, 32, 128);
        p = p < waiting ? p : waiting;
        double secs = host_secs(decoding + p);
        if (step++ >= 2)
            worst = fmax(worst, secs);
        cost_observe(&c, decoding, p, secs);
        waiting -= p;
        decoding = 64 - (waiting + 31) / 32;
    }
    if (worst > 1.6 * full)
        fail_msg("a mixed step took %.2fx a full decode step", worst / full);
    assert_true(step > 12); /* the prompts were not all taken at once */
}

/* Mixed steps (decode and prompt rows together) that take 1.5x what steps of their rows
 * take otherwise, as prompt rows deep into a long prompt do (their attention reads every
 * position before them): each round has one mixed step, sized by the budget, and one
 * decode step of the full batch. Within a few rounds the mixed steps keep near the target,
 * 1.5x a full decode step: at most 1.73x (their own times lift the range of rows they
 * fall in, and the correction measures against that); without the correction by
 * step_cost.mixed 1.95x. */
static void test_mixed_steps_dearer_than_the_model(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    truth t = {.a = 0.020, .b = 0.00075, .noise = 0.0, .rng = 7};
    feed(&c, &t, 200);
    const double full = t.a + t.b * 64;
    double first = 0.0, worst = 0.0;
    for (int i = 0; i < 16; i++) {
        int d = 24 + i % 3 * 8;
        int rows = cost_prefill_budget(&c, d, 64, 1.5, 1, 512);
        double secs = 1.5 * (t.a + t.b * (d + rows));
        if (i == 0)
            first = secs;
        else if (i >= 4)
            worst = fmax(worst, secs);
        cost_observe(&c, d, rows, secs);
        cost_observe(&c, 64, 0, full);
    }
    assert_true(first > 2.0 * full); /* sized before any mixed step was seen */
    if (worst > 1.5 * full * 1.2)
        fail_msg("mixed steps still took %.2fx a full decode step", worst / full);
    assert_true(c.mixed > 1.1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimates_the_true_costs),
        cmocka_unit_test(test_follows_a_curve),
        cmocka_unit_test(test_budget_from_the_model),
        cmocka_unit_test(test_default_target_leaves_room_under_2x),
        cmocka_unit_test(test_follows_a_change),
        cmocka_unit_test(test_unvaried_steps_stay_sane),
        cmocka_unit_test(test_old_ranges_drop_out),
        cmocka_unit_test(test_host_burst_stays_near_the_target),
        cmocka_unit_test(test_mixed_steps_dearer_than_the_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
