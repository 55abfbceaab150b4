/* test_sched_cost.c: the step cost model behind the adaptive prefill budget (engine/cost.c),
 * fed timings of a known linear cost with noise: it converges, follows a change of machine
 * speed, stays sane when the steps never vary, and sizes the prefill chunk from them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/cost.h"
#include "tessera/engine.h"

/* The true cost of the fake machine: a + bd * D + bp * P seconds, times (1 + noise). */
typedef struct truth {
    double a, bd, bp;
    double noise; /* relative, uniform in [-noise, noise] */
    uint32_t rng;
} truth;

static double frand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / (double)(1u << 24);
}

/* Feeds n steps of varying rows, as a busy engine runs them: decode counts that drift,
 * prompt chunks that come and go. */
static void feed(step_cost *c, truth *t, int n)
{
    for (int i = 0; i < n; i++) {
        int d = 8 + (int)(56 * frand(&t->rng));
        int p = frand(&t->rng) < 0.3 ? 0 : 32 + (int)(224 * frand(&t->rng));
        double secs = t->a + t->bd * d + t->bp * p;
        secs *= 1.0 + t->noise * (2.0 * frand(&t->rng) - 1.0);
        cost_observe(c, d, p, secs);
    }
}

static void assert_near(double got, double want, double rel)
{
    if (fabs(got - want) > rel * fabs(want))
        fail_msg("%g is not within %.0f%% of %g", got, 100 * rel, want);
}

static void test_converges_to_the_true_costs(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    truth t = {.a = 0.020, .bd = 0.0005, .bp = 0.001, .noise = 0.03, .rng = 7};
    feed(&c, &t, 300);
    assert_near(c.coef[2], t.bp, 0.10);
    assert_near(c.coef[1], t.bd, 0.25);
    assert_near(c.coef[0], t.a, 0.25);
    /* what the budget uses: steps of the kinds it sizes */
    assert_near(cost_estimate(&c, 64, 0), 0.020 + 0.032, 0.05);
    assert_near(cost_estimate(&c, 64, 128), 0.020 + 0.032 + 0.128, 0.05);
}

static void test_budget_from_the_model(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    truth t = {.a = 0.020, .bd = 0.0005, .bp = 0.001, .noise = 0.0, .rng = 3};
    assert_int_equal(cost_prefill_budget(&c, 64, 64, 2.0, 32, 448), -1); /* nothing seen */
    feed(&c, &t, 200);
    /* 64 decoding, the batch full: a second step's worth, 52 ms, buys 52 prompt rows */
    int rows = cost_prefill_budget(&c, 64, 64, 2.0, 8, 448);
    assert_in_range(rows, 50, 54);
    /* 4 decoding while 64 fill the batch: room up to 2 x 52 ms - 22 ms = 82 rows */
    rows = cost_prefill_budget(&c, 4, 64, 2.0, 8, 508);
    assert_in_range(rows, 80, 84);
    /* bounds: never under the floor, never over the room left */
    assert_int_equal(cost_prefill_budget(&c, 64, 64, 1.0, 32, 448), 32);
    assert_int_equal(cost_prefill_budget(&c, 64, 64, 100.0, 32, 448), 448);
    assert_int_equal(cost_prefill_budget(&c, 64, 64, 1.0, 32, 16), 16);
}

/* The engine's default target keeps a mixed step of a full batch, as the model sees it,
 * within 1.5x a full decode step: the bound on the p99 inter-token gap is 2x the
 * median, and at a target of 2 the fit's own error alone went past it. */
static void test_default_target_leaves_room_under_2x(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    step_cost c;
    cost_init(&c);
    truth t = {.a = 0.020, .bd = 0.0005, .bp = 0.001, .noise = 0.0, .rng = 5};
    feed(&c, &t, 200);
    int rows = cost_prefill_budget(&c, 64, 64, o.itl_target, 1, 448);
    double full = t.a + t.bd * 64, mixed = full + t.bp * rows;
    assert_true(rows > 0);
    assert_true(mixed <= 1.5 * full * 1.02);
    assert_true(mixed < 0.8 * 2.0 * full); /* a fifth of 2x left for the fit's error */
}

/* The machine gets twice as slow per prompt row (another job takes half the cores): the
 * model follows within a few dozen steps, and the budget halves with it. */
static void test_follows_a_change(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    truth t = {.a = 0.020, .bd = 0.0005, .bp = 0.001, .noise = 0.02, .rng = 11};
    feed(&c, &t, 200);
    int before = cost_prefill_budget(&c, 32, 64, 2.0, 1, 4096);
    t.bp = 0.002;
    feed(&c, &t, 100);
    assert_near(c.coef[2], 0.002, 0.10);
    int after = cost_prefill_budget(&c, 32, 64, 2.0, 1, 4096);
    assert_near(after, before / 2.0, 0.15);
}

/* Steps that never vary (16 decode rows, no prompt) pin nothing but their own cost: that
 * estimate is right, and a prompt row is taken to cost what a row costs on average, so
 * the budget is finite. */
static void test_unvaried_steps_stay_sane(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    for (int i = 0; i < 100; i++)
        cost_observe(&c, 16, 0, 0.040);
    assert_near(cost_estimate(&c, 16, 0), 0.040, 0.02);
    assert_true(c.coef[2] > 0.0);
    int rows = cost_prefill_budget(&c, 16, 16, 2.0, 1, 100000);
    assert_in_range(rows, 4, 64);
    /* nonsense timings are ignored */
    cost_observe(&c, 16, 0, -1.0);
    cost_observe(&c, 16, 0, NAN);
    cost_observe(&c, 0, 0, 1.0);
    assert_int_equal(c.seen, 100);
    assert_near(cost_estimate(&c, 16, 0), 0.040, 0.02);
}

/* Cost not linear in rows, as on a 16-core Xeon: after a linear machine, mixed steps
 * (decode and prompt rows together) take 1.5x what the linear cost says, while decode-only
 * steps keep it; each round has one mixed step, sized by the budget, and one decode step
 * of the full batch. Within a few rounds the mixed steps keep near the target, 1.5x a full
 * decode step (at most 1.72x: the model's extra cost goes partly into its fixed term).
 * Without the correction by step_cost.mixed they went on at 2-2.2x. */
static void test_mixed_steps_dearer_than_the_fit(void **state)
{
    (void)state;
    step_cost c;
    cost_init(&c);
    truth t = {.a = 0.020, .bd = 0.0005, .bp = 0.001, .noise = 0.0, .rng = 7};
    feed(&c, &t, 200);
    const double full = t.a + t.bd * 64;
    double first = 0.0, worst = 0.0;
    for (int i = 0; i < 16; i++) {
        int d = 24 + i % 3 * 8;
        int rows = cost_prefill_budget(&c, d, 64, 1.5, 1, 512);
        double secs = 1.5 * (t.a + t.bd * d + t.bp * rows);
        if (i == 0)
            first = secs;
        else if (i >= 4)
            worst = fmax(worst, secs);
        cost_observe(&c, d, rows, secs);
        cost_observe(&c, 64, 0, full);
    }
    assert_true(first > 2.0 * full); /* sized by the linear fit */
    if (worst > 1.5 * full * 1.15)
        fail_msg("mixed steps still took %.2fx a full decode step", worst / full);
    assert_true(c.mixed > 1.1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_converges_to_the_true_costs),
        cmocka_unit_test(test_budget_from_the_model),
        cmocka_unit_test(test_default_target_leaves_room_under_2x),
        cmocka_unit_test(test_follows_a_change),
        cmocka_unit_test(test_unvaried_steps_stay_sane),
        cmocka_unit_test(test_mixed_steps_dearer_than_the_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
