/* test_team.c: the engine's team size (engine/team.c) fed run delays of its own, the
 * run delay it reads (common/run_delay.c) from two threads sharing one CPU, and an engine
 * whose two threads share one CPU running its steps on one. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cmocka.h>

#include "common/clock.h"
#include "common/run_delay.h"
#include "engine/team.h"
#include "engine_util.h"

/* Feeds steps of `step` seconds from *now until `until`, thread i waiting share[i] of each
 * (n threads), and returns the team's last answer. */
static int run_steps(team_size *t, const double *share, int n, double *now, double until,
                     double step)
{
    int answer = t->n;
    double waited[TEAM_MAX_THREADS];
    while (*now < until) {
        double start = *now;
        *now += step;
        for (int i = 0; i < n; i++)
            waited[i] = share[i] * step;
        answer = team_observe(t, waited, n, start, *now);
        if (answer != n)
            return answer; /* the caller's team changes size */
    }
    return answer;
}

static void test_quiet_team_keeps_its_threads(void **state)
{
    (void)state;
    team_size t;
    double now = 100.0, share[8] = {0.01, 0.02, 0, 0, 0.05, 0, 0, 0.2};
    team_init(&t, 8, now);
    assert_int_equal(run_steps(&t, share, 8, &now, 110.0, 0.004), 8);
    assert_int_equal(t.cuts, 0);
}

static void test_starved_threads_are_cut_then_tried_again(void **state)
{
    (void)state;
    team_size t;
    double now = 0.0, share[8] = {0};
    team_init(&t, 8, now);
    share[2] = share[5] = 0.5; /* two threads share their cores with other processes */
    int n = run_steps(&t, share, 8, &now, 1.0, 0.004);
    assert_int_equal(n, 6);
    assert_int_equal(t.cuts, 1);
    assert_true(now <= 2 * TEAM_WINDOW_S + 0.01); /* within the first windows */

    /* On 6 threads nobody waits: one more is tried TEAM_PROBE_FIRST_S after the cut. */
    double cut_at = now, zero[8] = {0};
    n = run_steps(&t, zero, 6, &now, cut_at + 10.0, 0.004);
    assert_int_equal(n, 7);
    assert_true(now >= cut_at + TEAM_PROBE_FIRST_S);
    assert_true(now <= cut_at + TEAM_PROBE_FIRST_S + 2 * TEAM_WINDOW_S);

    /* The 7th thread starves again: back to 6, the next try twice as late. */
    double share7[8] = {0, 0, 0, 0, 0, 0, 0.6, 0};
    double tried_at = now;
    n = run_steps(&t, share7, 7, &now, tried_at + 5.0, 0.004);
    assert_int_equal(n, 6);
    assert_int_equal(t.cuts, 2);
    double cut2 = now;
    n = run_steps(&t, zero, 6, &now, cut2 + 20.0, 0.004);
    assert_int_equal(n, 7);
    assert_true(now >= cut2 + 2 * TEAM_PROBE_FIRST_S);

    /* Now the 7th has its core: it holds a window, and the 8th is tried a second later. */
    double held = now;
    n = run_steps(&t, zero, 7, &now, held + 10.0, 0.004);
    assert_int_equal(n, 8);
    assert_true(now <= held + 2 * TEAM_WINDOW_S + TEAM_PROBE_MIN_S + 0.02);
    assert_int_equal(run_steps(&t, zero, 8, &now, now + 30.0, 0.004), 8);
    assert_int_equal(t.cuts, 2);
}

static void test_every_thread_starved_leaves_one(void **state)
{
    (void)state;
    team_size t;
    double now = 0.0, share[4] = {0.9, 0.9, 0.9, 0.9};
    team_init(&t, 4, now);
    assert_int_equal(run_steps(&t, share, 4, &now, 1.0, 0.01), 1);
}

static void test_idle_gaps_and_unknown_delays_decide_nothing(void **state)
{
    (void)state;
    team_size t;
    team_init(&t, 4, 0.0);
    /* steps far apart (an idle engine): each starts a window afresh, however long a
     * thread waited since its previous step */
    double waited[4] = {0, 0.5, 0, 0};
    for (int k = 1; k <= 20; k++)
        assert_int_equal(team_observe(&t, waited, 4, k * 1.0, k * 1.0 + 0.01), 4);
    /* no delays from the kernel (negative), or a step without a team (n = 0) */
    double unknown[4] = {-1, 0.5, -1, -1};
    for (int k = 0; k < 200; k++) {
        double at = 30.0 + k * 0.01;
        assert_int_equal(team_observe(&t, unknown, 4, at, at + 0.01), 4);
        assert_int_equal(team_observe(&t, NULL, 0, at, at + 0.01), 4);
    }
    /* a step on another number of threads starts a window without its waits */
    double three[3] = {0.004, 0.004, 0.004}, quiet[4] = {0, 0, 0, 0};
    double at = 40.0;
    for (int k = 0; k < 200; k++, at += 0.005) {
        assert_int_equal(team_observe(&t, k % 2 ? three : quiet, k % 2 ? 3 : 4, at,
                                      at + 0.005), 4);
    }
    assert_int_equal(t.cuts, 0);
}

/* ---- the kernel's run delay ---------------------------------------------------------- */

typedef struct spinner {
    int cpu;
    double seconds, waited; /* run delay gained while spinning; < 0: unknown */
    double since;           /* the same by run_delay_since_s */
} spinner;

static void *spin_on(void *arg)
{
    spinner *s = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(s->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    run_delay_since_s(); /* the mark */
    double d0 = run_delay_s(), t0 = clock_now_s();
    volatile uint64_t n = 0;
    while (clock_now_s() - t0 < s->seconds)
        n++;
    double d1 = run_delay_s();
    s->since = run_delay_since_s();
    s->waited = d0 < 0 || d1 < 0 ? -1.0 : d1 - d0;
    return NULL;
}

/* A CPU this process may run on. */
static int some_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            return c;
    return 0;
}

static void test_run_delay_counts_a_shared_cpu(void **state)
{
    (void)state;
    if (run_delay_s() < 0) {
        skip(); /* cmocka prints it; the kernel has no /proc/thread-self/schedstat */
        return;
    }
    spinner s[2] = {{.cpu = some_cpu(), .seconds = 0.3}, {.cpu = some_cpu(), .seconds = 0.3}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, spin_on, &s[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    /* each had the CPU about half the time: together they waited at least ~0.3 s */
    assert_true(s[0].waited >= 0 && s[1].waited >= 0);
    assert_true(s[0].waited + s[1].waited > 0.2);
    for (int i = 0; i < 2; i++) /* from the mark: at least what the spin waited */
        assert_true(s[i].since >= s[i].waited && s[i].since < s[i].waited + 0.1);
}

/* ---- an engine whose threads share one CPU ------------------------------------------- */

static void test_engine_runs_on_the_threads_that_have_a_core(void **state)
{
    (void)state;
    if (run_delay_s() < 0) {
        skip();
        return;
    }
    /* The engine's threads, made from here, inherit one CPU for the two of them. */
    cpu_set_t saved, one;
    assert_int_equal(sched_getaffinity(0, sizeof saved, &saved), 0);
    CPU_ZERO(&one);
    CPU_SET(some_cpu(), &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    ts_model *m = eu_load_stories();
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.n_threads = 2;
    ts_engine *e = eu_start(m, &o);
    int n_tok = 0;
    int32_t *tok = eu_tokenize(m, "Once upon a time", &n_tok);
    ts_engine_stats st = {0};
    double t0 = clock_now_s();
    /* steps until a cut shows (a few windows), bounded; the stats are read while the
     * requests run, so a cut is seen before a later try of two threads could follow */
    while (st.thread_cuts == 0 && clock_now_s() - t0 < 30.0) {
        ts_request *r[8];
        for (int i = 0; i < 8; i++)
            r[i] = eu_submit(e, tok, n_tok, 400, TS_PRIORITY_NORMAL);
        do {
            struct timespec ms = {0, 2000000};
            nanosleep(&ms, NULL);
            ts_engine_get_stats(e, &st);
        } while (st.thread_cuts == 0 && st.generated_tokens < 8 * 400 && clock_now_s() - t0 < 30.0);
        for (int i = 0; i < 8; i++) {
            eu_result res = {0};
            eu_collect(r[i], &res);
            assert_false(res.error);
            eu_result_free(&res);
            ts_request_release(r[i]);
        }
    }
    printf("engine on one CPU: %d thread(s), %llu cut(s), %.1f s of steps\n", st.threads,
           (unsigned long long)st.thread_cuts, clock_now_s() - t0);
    assert_true(st.thread_cuts >= 1);
    assert_int_equal(st.threads, 1);
    ts_engine_destroy(e);
    free(tok);
    ts_model_free(m);
    sched_setaffinity(0, sizeof saved, &saved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quiet_team_keeps_its_threads),
        cmocka_unit_test(test_starved_threads_are_cut_then_tried_again),
        cmocka_unit_test(test_every_thread_starved_leaves_one),
        cmocka_unit_test(test_idle_gaps_and_unknown_delays_decide_nothing),
        cmocka_unit_test(test_run_delay_counts_a_shared_cpu),
        cmocka_unit_test(test_engine_runs_on_the_threads_that_have_a_core),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
