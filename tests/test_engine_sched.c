/* test_engine_sched.c: the scheduler: priority order and aging, preemption with
 * recompute, cancellation (queued, running, released handles), waiting for idle, the
 * queue limit, errors that fail only the requests they touch, and steady arrivals that
 * never hold a decoding sequence back a step. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "engine_util.h"

static int32_t *prompt;
static int n_prompt;

static int setup(void **state)
{
    eu_setup_stories(state);
    prompt = eu_tokenize(eu_model, "Once upon a time", &n_prompt);
    return 0;
}

static int teardown(void **state)
{
    free(prompt);
    return eu_teardown_stories(state);
}

/* Order in which requests got their first event, recorded by the engine's notify
 * callback (called on the step thread): with one slot, the order they ran in. */
typedef struct start_order {
    int *counter;
    int rank; /* 1-based; 0 until the first event */
} start_order;

static void on_event(void *user)
{
    start_order *o = user;
    if (o->rank == 0)
        o->rank = ++*o->counter;
}

static ts_request *submit_tracked(ts_engine *e, ts_priority prio, start_order *o)
{
    ts_request_params p = eu_greedy(prompt, n_prompt, 8);
    p.priority = prio;
    p.notify = on_event;
    p.notify_user = o;
    ts_request *req = NULL;
    assert_int_equal(ts_engine_submit(e, &p, &req, NULL), TS_OK);
    return req;
}

/* Blocks until req has produced its first token (so it is running). A bound on a hang, not
 * a speed check: the wait includes the engine's start, and a sanitizer build on two loaded
 * cores (CI) once took over 10 s for it. */
static void wait_first_token(ts_request *req, char **text)
{
    ts_event ev;
    assert_int_equal(ts_request_next_event(req, &ev, 60000), TS_OK);
    assert_int_equal(ev.kind, TS_EVENT_TOKEN);
    if (text)
        *text = strdup(ev.text);
    ts_event_clear(&ev);
}

static void test_priority_order_within_one_slot(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 1;
    o.aging_per_s = 0;
    ts_engine *e = eu_start(eu_model, &o);
    ts_request *blocker = eu_submit(e, prompt, n_prompt, 300, TS_PRIORITY_NORMAL);
    wait_first_token(blocker, NULL);
    /* queued behind the blocker, lowest first */
    int counter = 0;
    start_order ord[4] = {{&counter, 0}, {&counter, 0}, {&counter, 0}, {&counter, 0}};
    ts_priority prio[4] = {TS_PRIORITY_LOW, TS_PRIORITY_NORMAL, TS_PRIORITY_HIGH, TS_PRIORITY_NORMAL};
    ts_request *reqs[4];
    for (int i = 0; i < 4; i++)
        reqs[i] = submit_tracked(e, prio[i], &ord[i]);
    ts_request_release(blocker);
    for (int i = 0; i < 4; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        assert_int_equal(r.tokens[0], 8);
        eu_result_free(&r);
    }
    /* one slot: they ran one after another, HIGH, then NORMAL in FIFO order, then LOW */
    assert_int_equal(ord[2].rank, 1);
    assert_int_equal(ord[1].rank, 2);
    assert_int_equal(ord[3].rank, 3);
    assert_int_equal(ord[0].rank, 4);
    ts_engine_destroy(e);
}

/* With fast aging a LOW request that waited longer overtakes a later HIGH one. */
static void test_aging_lets_low_overtake(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 1;
    o.aging_per_s = 1000; /* a level per millisecond */
    ts_engine *e = eu_start(eu_model, &o);
    ts_request *blocker = eu_submit(e, prompt, n_prompt, 300, TS_PRIORITY_NORMAL);
    wait_first_token(blocker, NULL);
    int counter = 0;
    start_order ol = {&counter, 0}, oh = {&counter, 0};
    ts_request *low = submit_tracked(e, TS_PRIORITY_LOW, &ol);
    usleep(20000); /* 20 ms: 20 levels of aging, far more than LOW - HIGH = 2 */
    ts_request *high = submit_tracked(e, TS_PRIORITY_HIGH, &oh);
    ts_request_release(blocker);
    eu_result rl, rh;
    eu_collect(low, &rl);
    eu_collect(high, &rh);
    assert_int_equal(ol.rank, 1);
    assert_int_equal(oh.rank, 2);
    eu_result_free(&rl);
    eu_result_free(&rh);
    ts_request_release(low);
    ts_request_release(high);
    ts_engine_destroy(e);
}

/* A pool too small for everyone at once: sequences are preempted, recomputed later, and
 * still produce exactly the reference text. */
static void test_preemption_recomputes_same_text(void **state)
{
    (void)state;
    enum { N = 8, NEW = 90 };
    int len[N];
    int32_t *ids[N];
    char *ref[N];
    unsigned rng = 99;
    for (int i = 0; i < N; i++) {
        len[i] = 20 + 7 * i;
        ids[i] = malloc((size_t)len[i] * sizeof(int32_t));
        ids[i][0] = 1;
        for (int k = 1; k < len[i]; k++) {
            rng = rng * 1103515245u + 12345u;
            ids[i][k] = 3 + (int32_t)((rng >> 8) % 509u);
        }
        ref[i] = eu_reference_greedy(eu_model, ids[i], len[i], NEW);
    }
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 8;
    o.kv_blocks = 14; /* each needs 4-6 blocks by its end: 8 of them cannot all fit */
    o.prefix_cache = false;
    ts_engine *e = eu_start(eu_model, &o);
    ts_request *reqs[N];
    for (int i = 0; i < N; i++)
        reqs[i] = eu_submit(e, ids[i], len[i], NEW, i % 2 ? TS_PRIORITY_LOW : TS_PRIORITY_HIGH);
    for (int i = 0; i < N; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        assert_false(r.error);
        assert_string_equal(r.text[0], ref[i]);
        eu_result_free(&r);
        free(ids[i]);
        free(ref[i]);
    }
    eu_wait_idle(e);
    ts_engine_stats s;
    ts_engine_get_stats(e, &s);
    assert_true(s.preemptions > 0);
    assert_int_equal(s.kv_blocks_used, 0);
    assert_int_equal(s.kv_blocks_free + s.kv_blocks_cached, s.kv_blocks_total);
    ts_engine_destroy(e);
}

/* Reads and releases the n requests of a run with one allocation made to fail: at most
 * one request fails, with TS_ERR_NOMEM, and the others give their reference text. Returns
 * whether the failure's message holds needle (NULL: whether one failed). */
static bool collect_fault_run(ts_request **reqs, int n, char *const *ref, const char *needle)
{
    int failed = 0;
    bool matched = false;
    for (int i = 0; i < n; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        if (r.error) {
            failed++;
            assert_int_equal(r.error_status, TS_ERR_NOMEM);
            matched = !needle || strstr(r.error_message, needle) != NULL;
        } else {
            assert_string_equal(r.text[0], ref[i]);
        }
        eu_result_free(&r);
    }
    assert_true(failed <= 1);
    return matched;
}

/* An allocation failure while a preempted sequence is requeued fails that request alone
 * and frees it (the sanitizer build would see a lost sequence as a leak); the others
 * finish with their text and every block comes back. Each run fails one allocation,
 * the n-th; the sweep runs until one of them hit the requeue. */
static void test_preemption_out_of_memory_frees_the_victim(void **state)
{
    (void)state;
    enum { N = 4, NEW = 60 };
    int32_t ids[N][32];
    char *ref[N];
    for (int i = 0; i < N; i++) {
        ids[i][0] = 1;
        for (int k = 1; k < 32; k++)
            ids[i][k] = 3 + (int32_t)((i * 131 + k * 17) % 509);
        ref[i] = eu_reference_greedy(eu_model, ids[i], 20 + 4 * i, NEW);
    }
    bool hit_requeue = false;
    for (int at = 1; at <= 400 && !hit_requeue; at++) {
        ts_engine_options o;
        ts_engine_options_default(&o);
        o.max_seqs = N;
        o.kv_blocks = 7; /* each needs 3-4 blocks by its end: the four cannot all fit */
        o.prefix_cache = false;
        o.fail_alloc_at = at;
        ts_engine *e = eu_start(eu_model, &o);
        ts_request *reqs[N];
        for (int i = 0; i < N; i++)
            reqs[i] = eu_submit(e, ids[i], 20 + 4 * i, NEW, TS_PRIORITY_NORMAL);
        hit_requeue |= collect_fault_run(reqs, N, ref, "requeueing a preempted");
        eu_wait_idle(e);
        ts_engine_stats st;
        ts_engine_get_stats(e, &st);
        assert_int_equal(st.kv_blocks_used, 0);
        ts_engine_destroy(e);
    }
    assert_true(hit_requeue);
    for (int i = 0; i < N; i++)
        free(ref[i]);
}

static void test_cancel_running_queued_and_released(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 2;
    ts_engine *e = eu_start(eu_model, &o);
    ts_request *running = eu_submit(e, prompt, n_prompt, 1500, TS_PRIORITY_NORMAL);
    ts_request *released = eu_submit(e, prompt, n_prompt, 1500, TS_PRIORITY_NORMAL);
    wait_first_token(running, NULL);
    wait_first_token(released, NULL);
    ts_request *queued = eu_submit(e, prompt, n_prompt, 1500, TS_PRIORITY_NORMAL);
    /* busy: waiting for idle times out, whether it looks or waits */
    assert_int_equal(ts_engine_wait_idle(e, 0), TS_ERR_TIMEOUT);
    assert_int_equal(ts_engine_wait_idle(e, 20), TS_ERR_TIMEOUT);

    ts_request_cancel(queued);
    eu_result rq;
    eu_collect(queued, &rq);
    assert_int_equal(rq.n_done, 1);
    assert_int_equal(rq.finish[0], TS_FINISH_CANCELLED);
    assert_int_equal(rq.tokens[0], 0);
    eu_result_free(&rq);

    ts_request_release(released); /* the client went away without reading */
    ts_request_cancel(running);
    ts_request_cancel(running); /* idempotent */
    eu_result rr;
    eu_collect(running, &rr);
    assert_int_equal(rr.finish[0], TS_FINISH_CANCELLED);
    assert_true(rr.tokens[0] < 1500);
    eu_result_free(&rr);

    assert_int_equal(ts_engine_wait_idle(e, 10000), TS_OK);
    assert_int_equal(ts_engine_wait_idle(e, 0), TS_OK);
    ts_engine_stats s;
    ts_engine_get_stats(e, &s);
    assert_int_equal(s.running, 0);
    assert_int_equal(s.kv_blocks_used, 0);
    assert_int_equal(s.requests_cancelled, 3);
    ts_request_release(running);
    ts_request_release(queued);
    ts_engine_destroy(e);
}

/* A ts_engine_wait_idle(e, -1) that never returns must fail the run, not hold it until
 * ctest's timeout: SIGALRM ends the process after this long (a few seconds' work). */
#define WAIT_FOREVER_LIMIT_S 120

static void wait_forever_expired(int sig)
{
    (void)sig;
    static const char msg[] = "ts_engine_wait_idle(e, -1) still waiting after 120 s\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(EXIT_FAILURE);
}

/* Waiting forever returns TS_OK once the engine has done everything, and not before: the
 * test thread reads no event until then, and afterwards finds every token counted and
 * every event already queued. */
static void test_wait_idle_forever(void **state)
{
    (void)state;
    enum { N = 3, NEW = 400 };
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = N;
    ts_engine *e = eu_start(eu_model, &o);
    struct sigaction on_alarm = {.sa_handler = wait_forever_expired}, old_alarm;
    assert_int_equal(sigaction(SIGALRM, &on_alarm, &old_alarm), 0);
    alarm(WAIT_FOREVER_LIMIT_S);

    /* nothing submitted: idle as soon as the step thread is up */
    assert_int_equal(ts_engine_wait_idle(e, -1), TS_OK);
    assert_int_equal(ts_engine_wait_idle(e, 0), TS_OK);

    ts_request *reqs[N];
    for (int i = 0; i < N; i++) {
        ts_request_params p = eu_greedy(prompt, n_prompt, NEW);
        p.ignore_eos = true;
        assert_int_equal(ts_engine_submit(e, &p, &reqs[i], NULL), TS_OK);
    }
    /* right after the submits, before the step thread may have taken them */
    assert_int_equal(ts_engine_wait_idle(e, -1), TS_OK);
    alarm(0);
    assert_int_equal(sigaction(SIGALRM, &old_alarm, NULL), 0);

    ts_engine_stats s;
    ts_engine_get_stats(e, &s);
    assert_int_equal(s.requests_submitted, N);
    assert_int_equal(s.requests_completed, N);
    assert_int_equal(s.generated_tokens, N * NEW);
    assert_int_equal(s.running, 0);
    for (int p = 0; p < TS_PRIORITY_COUNT; p++)
        assert_int_equal(s.queued[p], 0);
    assert_int_equal(s.kv_blocks_used, 0);
    assert_int_equal(ts_engine_wait_idle(e, 0), TS_OK); /* still idle: looking says so */

    for (int i = 0; i < N; i++) {
        ts_event ev;
        ts_status st;
        int tokens = 0, done = 0;
        ts_event_kind last = TS_EVENT_ERROR;
        while ((st = ts_request_next_event(reqs[i], &ev, 0)) == TS_OK) { /* never waits */
            last = ev.kind;
            tokens += ev.kind == TS_EVENT_TOKEN;
            if (ev.kind == TS_EVENT_DONE) {
                done++;
                assert_int_equal(ev.finish, TS_FINISH_LENGTH);
                assert_int_equal(ev.completion_tokens, NEW);
            }
            ts_event_clear(&ev);
        }
        assert_int_equal(st, TS_ERR_NOT_FOUND);
        assert_int_equal(tokens, NEW);
        assert_int_equal(done, 1);
        assert_int_equal(last, TS_EVENT_DONE);
        ts_request_release(reqs[i]);
    }
    ts_engine_destroy(e);
}

static void test_queue_limit(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 1;
    o.max_queue = 2;
    ts_engine *e = eu_start(eu_model, &o);
    ts_request *blocker = eu_submit(e, prompt, n_prompt, 1500, TS_PRIORITY_NORMAL);
    wait_first_token(blocker, NULL);
    ts_request *a = eu_submit(e, prompt, n_prompt, 4, TS_PRIORITY_NORMAL);
    ts_request *b = eu_submit(e, prompt, n_prompt, 4, TS_PRIORITY_NORMAL);
    ts_request_params p = eu_greedy(prompt, n_prompt, 16);
    ts_request *c = NULL;
    ts_error err = {0};
    assert_int_equal(ts_engine_submit(e, &p, &c, &err), TS_ERR_QUEUE_FULL);
    assert_null(c);
    ts_request_release(blocker);
    eu_result r;
    eu_collect(a, &r);
    assert_int_equal(r.tokens[0], 4);
    eu_result_free(&r);
    eu_collect(b, &r);
    eu_result_free(&r);
    ts_request_release(a);
    ts_request_release(b);
    ts_engine_destroy(e);
}

/* The n-th allocation of the step thread fails: that request gets an ERROR event, every
 * other one completes with the reference text, and the engine keeps serving. */
static void test_allocation_failure_fails_one_request(void **state)
{
    (void)state;
    char *ref = eu_reference_greedy(eu_model, prompt, n_prompt, 12);
    for (int at = 1; at <= 40; at += 3) {
        ts_engine_options o;
        ts_engine_options_default(&o);
        o.fail_alloc_at = at;
        ts_engine *e = eu_start(eu_model, &o);
        ts_request *reqs[4];
        for (int i = 0; i < 4; i++)
            reqs[i] = eu_submit(e, prompt, n_prompt, 12, TS_PRIORITY_NORMAL);
        collect_fault_run(reqs, 4, (char *const[]){ref, ref, ref, ref}, NULL);
        /* still serving */
        eu_result r;
        ts_request *after = eu_submit(e, prompt, n_prompt, 12, TS_PRIORITY_NORMAL);
        eu_collect(after, &r);
        ts_request_release(after);
        assert_false(r.error);
        assert_string_equal(r.text[0], ref);
        eu_result_free(&r);
        eu_wait_idle(e);
        ts_engine_stats s;
        ts_engine_get_stats(e, &s);
        assert_int_equal(s.kv_blocks_used, 0);
        ts_engine_destroy(e);
    }
    free(ref);
}

static void test_destroy_with_requests_in_flight(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 2;
    ts_engine *e = eu_start(eu_model, &o);
    ts_request *reqs[4];
    for (int i = 0; i < 4; i++)
        reqs[i] = eu_submit(e, prompt, n_prompt, 1500, TS_PRIORITY_NORMAL);
    wait_first_token(reqs[0], NULL);
    ts_engine_destroy(e);
    /* handles outlive the engine: every one ends with an ERROR (shutdown) event */
    for (int i = 0; i < 4; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        assert_true(r.error);
        assert_int_equal(r.error_status, TS_ERR_SHUTDOWN);
        eu_result_free(&r);
        ts_request_release(reqs[i]);
    }
}

/* n > 1 requests reserve slots for the completions they will fork into. The soak found
 * the step writing past the running array: a long n = 3 prompt prefilled over several
 * steps (capped while another stream decodes) while short requests took the slots its
 * completions needed. */
static void test_forks_keep_their_slots(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 4;
    o.prefill_cap = 32;
    ts_engine *e = eu_start(eu_model, &o);
    ts_request *blocker = eu_submit(e, prompt, n_prompt, 1500, TS_PRIORITY_NORMAL);
    wait_first_token(blocker, NULL);

    enum { LONG = 400, N = 6 };
    int32_t *long_prompt = malloc(LONG * sizeof(int32_t));
    unsigned rng = 5;
    long_prompt[0] = 1;
    for (int i = 1; i < LONG; i++) {
        rng = rng * 1103515245u + 12345u;
        long_prompt[i] = 3 + (int32_t)((rng >> 8) % 509u);
    }
    ts_request *reqs[N];
    for (int i = 0; i < N; i++) {
        ts_request_params p =
            i == 0 ? eu_greedy(long_prompt, LONG, 8) : eu_greedy(prompt, n_prompt, 8);
        p.n = i == 0 ? 3 : 1;
        assert_int_equal(ts_engine_submit(e, &p, &reqs[i], NULL), TS_OK);
    }
    for (int i = 0; i < N; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        assert_false(r.error);
        assert_int_equal(r.n_done, i == 0 ? 3 : 1);
        for (int c = 0; c < r.n_done; c++)
            assert_int_equal(r.tokens[c], 8);
        eu_result_free(&r);
    }
    ts_request_release(blocker);
    eu_wait_idle(e);
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 0);
    ts_engine_destroy(e);
    free(long_prompt);
}

/* Reads req to its end, which must come without an error, and releases it. */
static void finish_without_error(ts_request *req)
{
    eu_result r;
    eu_collect(req, &r);
    assert_false(r.error);
    eu_result_free(&r);
    ts_request_release(req);
}

/* The cost model sizes a prompt chunk beside decodes, and prefill_cap bounds it: with a
 * target so loose the model would take the whole step budget, a 400-token prompt that
 * arrives while another request decodes still goes in chunks of at most the cap. */
static void test_prefill_cap_bounds_adaptive_chunks(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.itl_target = 100.0;
    o.prefill_cap = 48;
    o.prefill_min = 8;
    ts_engine *e = eu_start(eu_model, &o);
    ts_request *blocker = eu_submit(e, prompt, n_prompt, 1500, TS_PRIORITY_NORMAL);
    wait_first_token(blocker, NULL);
    usleep(20000); /* dozens of decode steps: the cost model is past COST_MIN_STEPS */
    enum { LONG = 400 };
    int32_t long_prompt[LONG];
    for (int i = 0; i < LONG; i++)
        long_prompt[i] = i == 0 ? 1 : 3 + (int32_t)((i * 37u) % 509u);
    finish_without_error(eu_submit(e, long_prompt, LONG, 2, TS_PRIORITY_NORMAL));
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    const ts_step_profile *ps = &st.prompt_steps;
    assert_true(ps->mixed_steps >= LONG / 48); /* beside the blocker's decodes throughout */
    uint64_t prompt_rows = ps->mixed_rows - ps->decode_rows;
    assert_true(prompt_rows >= LONG - 1);
    assert_true(prompt_rows <= 48 * ps->mixed_steps);
    ts_request_release(blocker);
    ts_engine_destroy(e);
}

/* opts.step_log: a line a step, whose rows add up to the stats' and whose estimates come
 * from a cost model that starts where cost_init puts it (mixed steps' scale 1: the engine
 * once left it at 0, which made the first mixed steps' budget unbounded but for the cap). */
static void test_step_log(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.step_log = tmpfile();
    assert_non_null(o.step_log);
    ts_engine *e = eu_start(eu_model, &o);
    finish_without_error(eu_submit(e, prompt, n_prompt, 20, TS_PRIORITY_NORMAL));
    eu_wait_idle(e);
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    ts_engine_destroy(e);
    rewind(o.step_log);
    int decode, prompt_rows, full, lines = 0;
    double ms, est_ms, est_full_ms, mixed;
    uint64_t rows = 0;
    while (fscanf(o.step_log, "%d %d %lf %lf %d %lf %lf", &decode, &prompt_rows, &ms, &est_ms,
                  &full, &est_full_ms, &mixed) == 7) {
        assert_true(decode >= 0 && prompt_rows >= 0 && decode + prompt_rows > 0);
        assert_true(ms > 0 && est_ms >= 0 && est_full_ms >= 0);
        assert_int_equal(full, 1);
        assert_true(mixed == 1.0); /* no step both decoded and read a prompt */
        rows += (uint64_t)(decode + prompt_rows);
        lines++;
    }
    assert_true(feof(o.step_log));
    assert_int_equal(lines, st.steps);
    assert_int_equal(rows, st.decode_steps.rows + st.prompt_steps.rows);
    fclose(o.step_log);
}

/* Steady arrivals: STREAMS requests run at once, each replaced by a new one as it ends, so
 * prompts keep arriving while the others decode. Each request's events record the engine
 * step they came in (its notify runs on the step thread during the step; the step thread
 * publishes its stats after each step, so the snapshot then counts the steps before). */
enum { STEADY_MAX_TOKENS = 12 };
typedef struct step_trace {
    ts_engine *e;
    uint64_t steps[STEADY_MAX_TOKENS + 2]; /* distinct steps of its events, in order */
    int n;
    bool overflow;
} step_trace;

static void on_event_step(void *user)
{
    step_trace *t = user;
    ts_engine_stats st;
    ts_engine_get_stats(t->e, &st);
    if (t->n > 0 && t->steps[t->n - 1] == st.steps)
        return; /* another event of the same step (DONE after the last token) */
    if (t->n == STEADY_MAX_TOKENS + 2)
        t->overflow = true;
    else
        t->steps[t->n++] = st.steps;
}

static void test_steady_arrivals_keep_every_decoder_in_every_step(void **state)
{
    (void)state;
    enum { STREAMS = 6, TOTAL = 30, MAXLEN = 120 };
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 8;
    o.step_tokens = 64; /* prompts of 50-110 tokens take a few chunks */
    o.prefill_min = 8;
    o.prefix_cache = false;
    ts_engine *e = eu_start(eu_model, &o);
    int32_t *ids = malloc((size_t)TOTAL * MAXLEN * sizeof *ids);
    step_trace *trace = calloc(TOTAL, sizeof *trace);
    assert_non_null(ids);
    assert_non_null(trace);
    unsigned rng = 5;
    ts_request *slot[STREAMS] = {0};
    int submitted = 0, finished = 0;
    while (finished < TOTAL) {
        for (int k = 0; k < STREAMS; k++) {
            if (!slot[k] && submitted < TOTAL) {
                int i = submitted++, len = 50 + (i * 37) % 61;
                int32_t *p = ids + (size_t)i * MAXLEN;
                p[0] = 1;
                for (int t = 1; t < len; t++) {
                    rng = rng * 1103515245u + 12345u;
                    p[t] = 3 + (int32_t)((rng >> 8) % 509u);
                }
                trace[i].e = e;
                ts_request_params rp = eu_greedy(p, len, STEADY_MAX_TOKENS);
                rp.ignore_eos = true;
                rp.notify = on_event_step;
                rp.notify_user = &trace[i];
                assert_int_equal(ts_engine_submit(e, &rp, &slot[k], NULL), TS_OK);
            }
            if (!slot[k])
                continue;
            ts_event ev;
            ts_status st;
            while ((st = ts_request_next_event(slot[k], &ev, 1)) == TS_OK) {
                assert_int_not_equal(ev.kind, TS_EVENT_ERROR);
                ts_event_clear(&ev);
            }
            if (st == TS_ERR_NOT_FOUND) { /* every event read: the slot takes the next one */
                ts_request_release(slot[k]);
                slot[k] = NULL;
                finished++;
            }
        }
    }
    assert_int_equal(ts_engine_wait_idle(e, 10000), TS_OK);
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    for (int i = 0; i < TOTAL; i++) {
        /* first token when the prompt is done, then one token in every following step */
        assert_false(trace[i].overflow);
        assert_int_equal(trace[i].n, STEADY_MAX_TOKENS);
        for (int k = 1; k < trace[i].n; k++)
            if (trace[i].steps[k] != trace[i].steps[k - 1] + 1)
                fail_msg("request %d: token %d came %llu steps after token %d", i, k,
                         (unsigned long long)(trace[i].steps[k] - trace[i].steps[k - 1]), k - 1);
    }
    /* Every token after a request's first came from a decode row, and every decode row
     * gave a token: decode rows per step = the sequences decoding. Prompts arrived while
     * others decoded, so steps mixed both (how many decoders a prompt step carries
     * depends on when this thread refills its slots: under 1 on average in one run of
     * eight on the loaded 2-core machine once the steps got faster). */
    assert_int_equal(st.decode_steps.decode_rows + st.prompt_steps.decode_rows,
                     (uint64_t)TOTAL * (STEADY_MAX_TOKENS - 1));
    assert_true(st.prompt_steps.decode_rows > 0);
    assert_int_equal(st.preemptions, 0);
    free(trace);
    free(ids);
    ts_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_order_within_one_slot),
        cmocka_unit_test(test_aging_lets_low_overtake),
        cmocka_unit_test(test_preemption_recomputes_same_text),
        cmocka_unit_test(test_preemption_out_of_memory_frees_the_victim),
        cmocka_unit_test(test_cancel_running_queued_and_released),
        cmocka_unit_test(test_wait_idle_forever),
        cmocka_unit_test(test_queue_limit),
        cmocka_unit_test(test_allocation_failure_fails_one_request),
        cmocka_unit_test(test_destroy_with_requests_in_flight),
        cmocka_unit_test(test_forks_keep_their_slots),
        cmocka_unit_test(test_steady_arrivals_keep_every_decoder_in_every_step),
        cmocka_unit_test(test_prefill_cap_bounds_adaptive_chunks),
        cmocka_unit_test(test_step_log),
    };
    return cmocka_run_group_tests_name("engine_sched", tests, setup, teardown);
}
