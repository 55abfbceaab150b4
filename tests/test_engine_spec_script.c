/* test_engine_spec_script.c: the scripted output (ts_engine_options.spec_script), the
 * measuring aid that lets prompt lookup run on an answer that copies its prompt: the text
 * is the script with speculation on and off; a script that copies the prompt has nearly
 * every draft accepted in fewer steps, a random one nearly none; a bad script is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine_util.h"
#include "tessera/tokenizer.h"

/* A short document the scripted answer copies. */
static const char DOCUMENT[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her friend Tom. One day, they found a big red ball under a tree. Lily and Tom "
    "played with the ball all day, and when the sun went down they went home happy.";

enum { SCRIPT_MAX = 256 };

static ts_engine *start(ts_spec_kind spec, const int32_t *script, int n_script)
{
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 4;
    o.gemm = TS_GEMM_KERNEL;
    o.spec = spec;
    o.spec_eager = true; /* drafts whatever this machine's step times say */
    o.spec_script = script;
    o.n_spec_script = n_script;
    return eu_start(eu_model, &o);
}

static ts_engine_stats stats_of(ts_engine *e)
{
    eu_wait_idle(e);
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    return st;
}

/* The token ids of a greedy request of prompt (n) for max_tokens, into out (their count
 * returned); fails the test on an error event. */
static int generate(ts_engine *e, const int32_t *prompt, int n, int max_tokens, int32_t *out)
{
    ts_request_params p = eu_greedy(prompt, n, max_tokens);
    p.ignore_eos = true;
    ts_request *req = eu_submit_params(e, &p);
    ts_event ev;
    int got = 0;
    while (ts_request_next_event(req, &ev, 30000) == TS_OK) {
        if (ev.kind == TS_EVENT_ERROR)
            fail_msg("request failed: %s", ev.message);
        if (ev.kind == TS_EVENT_TOKEN && got < SCRIPT_MAX)
            out[got++] = ev.token;
        ts_event_clear(&ev);
    }
    ts_request_release(req);
    return got;
}

/* A script of n tokens: the prompt's own (after BOS) when `random` is false, else plain
 * tokens of the vocabulary drawn from a fixed seed. */
static void make_script(int32_t *script, const int32_t *prompt, int n, bool random)
{
    const ts_tokenizer *tok = ts_model_get_tokenizer(eu_model);
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < n; i++) {
        script[i] = prompt[i + 1];
        while (random) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            script[i] = (int32_t)(x % (uint64_t)ts_model_get_config(eu_model)->vocab_size);
            if (ts_token_is_plain(tok, script[i]))
                break;
        }
    }
}

/* Runs the prompt with script on an engine without and with prompt lookup: both texts are
 * the script; returns the stats of each. */
static void run_both(const int32_t *prompt, int n, const int32_t *script, int n_script,
                     ts_engine_stats *off_st, ts_engine_stats *on_st)
{
    ts_engine *off = start(TS_SPEC_OFF, script, n_script);
    ts_engine *on = start(TS_SPEC_NGRAM, script, n_script);
    int32_t got[SCRIPT_MAX];
    assert_int_equal(generate(off, prompt, n, n_script, got), n_script);
    assert_memory_equal(got, script, (size_t)n_script * sizeof *got);
    assert_int_equal(generate(on, prompt, n, n_script, got), n_script);
    assert_memory_equal(got, script, (size_t)n_script * sizeof *got);
    *off_st = stats_of(off);
    *on_st = stats_of(on);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
}

static void test_copying_script_accepts_nearly_all_drafts(void **state)
{
    (void)state;
    int n = 0;
    int32_t *prompt = eu_tokenize(eu_model, DOCUMENT, &n), script[SCRIPT_MAX];
    assert_true(n > 40 && n - 1 <= SCRIPT_MAX);
    make_script(script, prompt, n - 1, false);
    ts_engine_stats off, on;
    run_both(prompt, n, script, n - 1, &off, &on);
    const ts_spec_source_stats *ng = &on.spec_source[TS_SPEC_SOURCE_NGRAM];
    print_message("copying: drafted %llu, accepted %llu; steps %llu, without speculation %llu\n",
                  (unsigned long long)ng->drafted, (unsigned long long)ng->accepted,
                  (unsigned long long)on.steps, (unsigned long long)off.steps);
    assert_true(ng->accepted > (uint64_t)n / 2);
    assert_true((double)ng->accepted >= 0.9 * (double)ng->drafted);
    assert_true(on.steps < off.steps);
    assert_int_equal(off.spec_drafted, 0);
    free(prompt);
}

static void test_random_script_accepts_nearly_nothing(void **state)
{
    (void)state;
    int n = 0;
    int32_t *prompt = eu_tokenize(eu_model, DOCUMENT, &n), script[SCRIPT_MAX];
    make_script(script, prompt, n - 1, true);
    int same = 0;
    for (int i = 0; i < n - 1; i++)
        same += script[i] == prompt[i + 1];
    assert_true(same < 5); /* the script does not copy */
    ts_engine_stats off, on;
    run_both(prompt, n, script, n - 1, &off, &on);
    const ts_spec_source_stats *ng = &on.spec_source[TS_SPEC_SOURCE_NGRAM];
    print_message("random: drafted %llu, accepted %llu\n", (unsigned long long)ng->drafted,
                  (unsigned long long)ng->accepted);
    assert_true(ng->drafted > 0); /* prompt lookup still drafted */
    assert_true(ng->accepted * 10 <= (uint64_t)(n - 1));
    free(prompt);
}

static void test_bad_script_refused(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    int32_t script[3] = {5, ts_model_get_config(eu_model)->vocab_size, 7};
    o.spec_script = script;
    o.n_spec_script = 3;
    ts_engine *e = NULL;
    ts_error err = {0};
    assert_int_equal(ts_engine_create(eu_model, &o, &e, &err), TS_ERR_INVALID_ARG);
    assert_null(e);
    assert_non_null(strstr(err.msg, "outside the vocabulary"));
    o.spec_script = NULL;
    assert_int_equal(ts_engine_create(eu_model, &o, &e, &err), TS_ERR_INVALID_ARG);
    o.n_spec_script = -1;
    assert_int_equal(ts_engine_create(eu_model, &o, &e, &err), TS_ERR_INVALID_ARG);
    assert_null(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copying_script_accepts_nearly_all_drafts),
        cmocka_unit_test(test_random_script_accepts_nearly_nothing),
        cmocka_unit_test(test_bad_script_refused),
    };
    return cmocka_run_group_tests(tests, eu_setup_stories, eu_teardown_stories);
}
