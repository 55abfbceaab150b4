/* test_engine_spec.c: speculative decoding in the batched step: prompt lookup, greedy text
 * identical with speculation on and off (alone, batched, n > 1, preempted, cut by stop
 * strings, constrained, on a quantized file), seeded sampling identical token for token
 * with its logprobs, the sampled distribution at a verified position against a
 * non-speculative one (a chi-square test that a biased acceptance rule fails), the KV
 * rollback (kv_table_truncate) and a pool left consistent. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cli/args.h"
#include "engine/spec.h"
#include "engine/state.h"
#include "engine_util.h"
#include "kv/kv.h"
#include "step_util.h"
#include "util.h"

/* A prompt that repeats itself, so prompt lookup finds drafts the model accepts. */
static const char REPEAT[] = "Once upon a time, there was a little girl named Lily. She loved to "
                             "play outside in the park. Once upon a time, there was a little";

static ts_engine *start(ts_spec_kind spec, int max_seqs, int kv_blocks)
{
    return eu_start_spec(eu_model, spec, NULL, max_seqs, kv_blocks);
}

/* Every block of an idle engine's pool is free or cached: the rollbacks leaked none. */
static void assert_pool_clean(ts_engine *e)
{
    eu_wait_idle(e);
    ts_error err = {0};
    const kv_table *none[1] = {NULL};
    if (kv_pool_check(e->step.pool, none, 0, &err) != TS_OK)
        fail_msg("kv_pool_check: %s", err.msg);
}

/* ---- prompt lookup */

static void test_ngram_draft_takes_the_latest_longest_match(void **state)
{
    (void)state;
    int32_t out[8];
    /* the last 3-gram "7 2 3" is new; the 2-gram "2 3" occurs at 1 and, latest, at 5 */
    const int32_t a[] = {1, 2, 3, 9, 5, 2, 3, 7, 2, 3};
    assert_int_equal(spec_ngram_draft(out, a, 10, 4), 3);
    assert_int_equal(out[0], 7);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 3);
    /* a 3-gram match wins over a later 1-gram one */
    const int32_t b[] = {4, 5, 6, 1, 6, 2, 4, 5, 6};
    assert_int_equal(spec_ngram_draft(out, b, 9, 2), 2);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 6);
    /* k bounds the copy; no earlier occurrence: no draft */
    assert_int_equal(spec_ngram_draft(out, b, 9, 1), 1);
    const int32_t c[] = {1, 2, 3, 4};
    assert_int_equal(spec_ngram_draft(out, c, 4, 4), 0);
    assert_int_equal(spec_ngram_draft(out, c, 1, 4), 0);
}

/* ---- options */

static int engine_arg(ts_engine_options *o, const char *a, const char *v)
{
    char *argv[] = {"tessera", (char *)a, (char *)v};
    int i = 1;
    return cli_engine_option(v ? 3 : 2, argv, &i, o);
}

static void test_options_and_their_bounds(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    assert_int_equal(o.spec, TS_SPEC_OFF); /* off unless asked for */
    assert_int_equal(o.spec_max, 8);
    assert_int_equal(o.spec_rows, 16);
    assert_int_equal(engine_arg(&o, "--spec", "ngram"), 1);
    assert_int_equal(o.spec, TS_SPEC_NGRAM);
    assert_int_equal(engine_arg(&o, "--spec-max", "3"), 1);
    assert_int_equal(o.spec_max, 3);
    assert_int_equal(engine_arg(&o, "--spec-rows", "0"), 1);
    assert_int_equal(o.spec_rows, 0);
    assert_int_equal(engine_arg(&o, "--spec-eager", NULL), 1);
    assert_true(o.spec_eager);
    assert_int_equal(engine_arg(&o, "--spec", "medusa"), -1);
    assert_int_equal(engine_arg(&o, "--spec-max", "65"), -1);
    assert_int_equal(engine_arg(&o, "--spec", "off"), 1);
    assert_int_equal(o.spec, TS_SPEC_OFF);
    /* the engine refuses what the command line would */
    ts_engine_options_default(&o);
    o.spec = TS_SPEC_NGRAM;
    o.spec_max = SPEC_MAX_DRAFT + 1;
    ts_engine *e = NULL;
    ts_error err = {0};
    assert_int_equal(ts_engine_create(eu_model, &o, &e, &err), TS_ERR_INVALID_ARG);
    assert_null(e);
    o.spec_max = 8;
    o.spec_rows = -1;
    assert_int_equal(ts_engine_create(eu_model, &o, &e, &err), TS_ERR_INVALID_ARG);
}

/* ---- how deep a step drafts */

/* A cost model that saw steps of 1..64 decode rows costing fixed + per_row each. */
static step_cost steps_costing(double fixed, double per_row)
{
    step_cost c;
    cost_init(&c);
    for (int i = 0; i < 40; i++) {
        int d = 1 << (i % 7);
        cost_observe(&c, d, 0, fixed + per_row * d);
    }
    return c;
}

static void test_drafts_follow_what_rows_cost(void **state)
{
    (void)state;
    step_cost fresh;
    cost_init(&fresh);
    assert_int_equal(spec_drafts_worth(&fresh, 64, 0, 0.1, 5), 5); /* nothing learnt yet */
    /* weights streamed once a step (40 ms) and 0.5 ms a row: every draft pays */
    step_cost bw = steps_costing(0.040, 0.0005);
    assert_int_equal(spec_drafts_worth(&bw, 1, 0, 0.7, 8), 8);
    /* four streams: a sequence's share 10.5 ms; at 0.5, 3 drafts yield most a second
     * (1.875 tokens in 12 ms), 4 fewer (1.9375 in 12.5 ms) */
    assert_int_equal(spec_drafts_worth(&bw, 4, 0, 0.5, 8), 3);
    /* compute-bound: 1 ms a row beside a 1 ms step; alone a likely draft still pays, up
     * to 3 (3.44 tokens in 5 ms: 688 a second, against 683 with 4 and 652 with 6) */
    step_cost cb = steps_costing(0.001, 0.001);
    assert_int_equal(spec_drafts_worth(&cb, 1, 0, 0.9, 8), 3);
    assert_int_equal(spec_drafts_worth(&cb, 64, 0, 0.9, 8), 0); /* 64 rows: none */
    assert_int_equal(spec_drafts_worth(&cb, 64, 0, 0.99, 8), 1);
    /* steps of one row only say nothing of what a row adds: the drafts find out */
    step_cost one;
    cost_init(&one);
    for (int i = 0; i < 40; i++)
        cost_observe(&one, 1, 0, 0.002);
    assert_int_equal(spec_drafts_worth(&one, 1, 0, 0.3, 8), 8);
    /* one stream: a 128-row prompt (400 ms), then steps of 1 to 3 decode rows at 40 ms
     * and 0.5 ms a row. Pulled towards the proportional model a decode row would cost 20
     * ms and one draft at most would pay; the steps' own fit knows 0.5. With a draft
     * model's 7 ms a draft, 3 yield most at 0.7 (2.19 tokens in 55.5 ms, 2.53 in 63) */
    step_cost solo;
    cost_init(&solo);
    cost_observe(&solo, 0, 128, 0.4);
    for (int i = 0; i < 40; i++)
        cost_observe(&solo, 1 + i % 3, 0, 0.040 + 0.0005 * (1 + i % 3));
    assert_true(solo.coef[1] > 0.004);
    assert_int_equal(spec_drafts_worth(&solo, 1, 0, 0.7, 8), 8);
    assert_int_equal(spec_drafts_worth_at(&solo, 1, 0, 0.7, 8, 0.007), 3);
    /* the acceptance record: a prior of 1/2, then the decayed hits over the trials */
    spec_seq sp = {0};
    assert_true(spec_acceptance(&sp) == 0.5);
    sp.hits = 8, sp.trials = 8;
    assert_true(spec_acceptance(&sp) == 0.9);
}

/* After a partial run the depth follows the acceptance record (the run it expects, rounded
 * up), and misses in a row rest a sequence only while its record is low: a steady 0.7
 * draws two misses in a row now and then. */
static void test_depth_and_rests_follow_the_record(void **state)
{
    (void)state;
    spec_seq sp = {.depth = 4, .hits = 14, .trials = 20};
    spec_adapt_depth(&sp, 8, 4, 1); /* record 14.6 / 22: a run of 1.97 expected */
    assert_int_equal(sp.depth, 3);
    spec_adapt_depth(&sp, 8, 3, 0);
    spec_adapt_depth(&sp, 8, 3, 0); /* two misses in a row, the record near 0.6 */
    assert_int_equal(sp.misses, 2);
    assert_true(spec_acceptance(&sp) > 0.5);
    assert_int_equal(sp.rest, 0);
    assert_int_equal(sp.depth, 3);
    spec_seq low = {.depth = 4}; /* no record: a prior of 1/2 */
    spec_adapt_depth(&low, 8, 4, 0);
    assert_int_equal(low.depth, 2);
    assert_int_equal(low.rest, 0);
    spec_adapt_depth(&low, 8, 2, 0); /* the record falls to 1 / 3.9 */
    assert_int_equal(low.rest, 2);
    spec_seq whole = {.depth = 3};
    spec_adapt_depth(&whole, 8, 3, 3);
    assert_int_equal(whole.depth, 6);
    spec_adapt_depth(&whole, 8, 6, 6);
    assert_int_equal(whole.depth, 8); /* at most max */
}

/* ---- the KV rollback */

static void check_pool(const kv_pool *pool, const kv_table *const *tables, int n)
{
    ts_error err = {0};
    if (kv_pool_check(pool, tables, n, &err) != TS_OK)
        fail_msg("kv_pool_check: %s", err.msg);
}

static void test_truncate_gives_back_draft_blocks(void **state)
{
    (void)state;
    kv_config c = {.n_layers = 1, .n_kv_heads = 1, .head_dim = 4, .dtype = KV_DTYPE_F32,
                   .n_blocks = 8};
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &c, NULL), TS_OK);
    kv_table t, f;
    kv_table_init(&t);
    kv_table_init(&f);
    const kv_table *both[] = {&t, &f};
    int32_t toks[TS_KV_BLOCK] = {0};
    assert_int_equal(kv_table_reserve(pool, &t, TS_KV_BLOCK + 5, NULL), TS_OK);
    assert_int_equal(kv_prefix_publish(pool, &t, 0, toks, NULL, NULL), TS_OK);
    assert_int_equal(kv_table_fork(pool, &f, &t, NULL), TS_OK);
    check_pool(pool, both, 2);
    /* drafts past two more blocks, then all rejected: back to 37 tokens, 2 blocks */
    assert_int_equal(kv_table_reserve(pool, &t, 2 * TS_KV_BLOCK, NULL), TS_OK);
    assert_int_equal(t.n_blocks, 4);
    check_pool(pool, both, 2);
    assert_int_equal(kv_table_truncate(pool, &t, TS_KV_BLOCK + 5, NULL), TS_OK);
    assert_int_equal(t.n_blocks, 2);
    assert_int_equal(t.n_tokens, TS_KV_BLOCK + 5);
    check_pool(pool, both, 2);
    kv_stats ks;
    kv_pool_stats(&ks, pool);
    assert_int_equal(ks.blocks_free, 8 - 3); /* shared block 0, t's and f's block 1 */
    /* to a block boundary, then to nothing: the published block stays with f */
    assert_int_equal(kv_table_truncate(pool, &t, TS_KV_BLOCK, NULL), TS_OK);
    assert_int_equal(t.n_blocks, 1);
    check_pool(pool, both, 2);
    assert_int_equal(kv_table_truncate(pool, &t, 0, NULL), TS_OK);
    check_pool(pool, both, 2);
    assert_true(kv_block_published(pool, f.blocks[0]));
    ts_error err = {0};
    assert_int_equal(kv_table_truncate(pool, &t, 1, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "outside"));
    kv_table_free(pool, &t);
    kv_table_free(pool, &f);
    check_pool(pool, both, 0);
    kv_pool_free(pool);
}

/* ---- greedy text */

static const char *const PROMPTS[] = {REPEAT, "Lily and Tom went to the beach",
                                      "The cat sat on the mat. The cat", "One day"};
enum { N_PROMPTS = 4, GREEDY_TOKENS = 120 };

static void test_greedy_identical_alone_and_batched(void **state)
{
    (void)state;
    int32_t *ids[N_PROMPTS];
    int n[N_PROMPTS];
    eu_result ref[N_PROMPTS];
    ts_engine *off = start(TS_SPEC_OFF, 8, 0), *on = start(TS_SPEC_NGRAM, 8, 0);
    for (int i = 0; i < N_PROMPTS; i++) {
        ids[i] = eu_tokenize(eu_model, PROMPTS[i], &n[i]);
        ts_request_params p = eu_greedy(ids[i], n[i], GREEDY_TOKENS);
        ref[i] = eu_run(off, &p);
        eu_result alone = eu_run(on, &p);
        eu_assert_same(&alone, &ref[i], 1);
        eu_result_free(&alone);
    }
    ts_engine_stats st = eu_stats(on);
    assert_true(st.spec_accepted > 20);           /* the lookup paid */
    assert_true(st.spec_drafted > st.spec_accepted); /* and rejections were rolled back */
    assert_int_equal(eu_stats(off).spec_drafted, 0);
    /* all of it counted under prompt lookup, none under a draft model */
    const ts_spec_source_stats *ng = &st.spec_source[TS_SPEC_SOURCE_NGRAM];
    assert_int_equal(ng->drafted, st.spec_drafted);
    assert_int_equal(ng->accepted, st.spec_accepted);
    assert_int_equal(st.spec_source[TS_SPEC_SOURCE_DRAFT_MODEL].drafted, 0);
    assert_int_equal(st.spec_source[TS_SPEC_SOURCE_DRAFT_MODEL].accepted, 0);
    assert_true(st.spec_draft_model_seconds == 0);
    assert_string_equal(ts_spec_source_name(TS_SPEC_SOURCE_NGRAM), "ngram");
    assert_string_equal(ts_spec_source_name(TS_SPEC_SOURCE_DRAFT_MODEL), "draft_model");
    assert_string_equal(ts_spec_source_name(TS_SPEC_SOURCE_COUNT), "unknown");

    /* together, with a request of n = 2 whose completions speculate apart */
    ts_request *reqs[N_PROMPTS + 1];
    for (int i = 0; i < N_PROMPTS; i++) {
        ts_request_params p = eu_greedy(ids[i], n[i], GREEDY_TOKENS);
        reqs[i] = eu_submit_params(on, &p);
    }
    ts_request_params two = eu_greedy(ids[0], n[0], GREEDY_TOKENS);
    two.n = 2;
    reqs[N_PROMPTS] = eu_submit_params(on, &two);
    for (int i = 0; i <= N_PROMPTS; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        assert_false(r.error);
        eu_assert_same(&r, &ref[i % N_PROMPTS], 1);
        assert_int_equal(r.n_done, i == N_PROMPTS ? 2 : 1);
        if (i == N_PROMPTS) {
            assert_string_equal(r.text[1], ref[0].text[0]);
            assert_int_equal(r.tokens[1], ref[0].tokens[0]);
        }
        eu_result_free(&r);
    }
    assert_true(eu_stats(on).spec_accepted > st.spec_accepted);
    assert_pool_clean(on);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    for (int i = 0; i < N_PROMPTS; i++) {
        eu_result_free(&ref[i]);
        free(ids[i]);
    }
}

/* A pool too small for every request at once: sequences are preempted and recomputed
 * while others speculate, and the text stays the text alone. */
static void test_greedy_identical_with_preemption(void **state)
{
    (void)state;
    enum { COPIES = 6, TOKENS = 150 };
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, REPEAT, &n);
    ts_engine *off = start(TS_SPEC_OFF, 8, 0);
    ts_request_params p = eu_greedy(ids, n, TOKENS);
    p.ignore_eos = true;
    eu_result ref = eu_run(off, &p);
    ts_engine *on = start(TS_SPEC_NGRAM, 8, 14);
    ts_request *reqs[COPIES];
    for (int i = 0; i < COPIES; i++) {
        ts_request_params q = p;
        q.cache_namespace = (uint64_t)i + 1; /* no sharing: each needs its own blocks */
        reqs[i] = eu_submit_params(on, &q);
    }
    for (int i = 0; i < COPIES; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        assert_false(r.error);
        eu_assert_same(&r, &ref, 1);
        eu_result_free(&r);
    }
    ts_engine_stats st = eu_stats(on);
    assert_true(st.preemptions > 0);
    assert_true(st.spec_accepted > 0);
    assert_pool_clean(on);
    ts_engine_destroy(on);
    ts_engine_destroy(off);
    eu_result_free(&ref);
    free(ids);
}

/* Stop strings cut at many offsets of a text most of which comes from accepted drafts:
 * the request stops where it stops without speculation, even inside an accepted run. */
static void test_stop_strings_across_accepted_runs(void **state)
{
    (void)state;
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, REPEAT, &n);
    ts_engine *off = start(TS_SPEC_OFF, 4, 0), *on = start(TS_SPEC_NGRAM, 4, 0);
    ts_request_params p = eu_greedy(ids, n, 80);
    eu_result full = eu_run(off, &p);
    const char *ref = full.text[0];
    assert_true(strlen(ref) > 80);
    uint64_t accepted = 0;
    for (int off_at = 3; off_at < 70; off_at += 4) {
        char stop[8];
        memcpy(stop, ref + off_at, 4);
        stop[4] = '\0';
        size_t cut = (size_t)(strstr(ref, stop) - ref);
        ts_request_params q = p;
        q.stop[0] = stop;
        q.n_stop = 1;
        eu_result a = eu_run(off, &q), b = eu_run(on, &q);
        eu_assert_same(&a, &b, 1);
        assert_int_equal(b.finish[0], TS_FINISH_STOP);
        assert_int_equal(strlen(b.text[0]), cut);
        assert_memory_equal(b.text[0], ref, cut);
        eu_result_free(&a);
        eu_result_free(&b);
    }
    accepted = eu_stats(on).spec_accepted;
    assert_true(accepted > 40);
    assert_pool_clean(on);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    eu_result_free(&full);
    free(ids);
}

/* The per-request opt-out drafts nothing; a JSON-object constraint speculates and keeps
 * its text. */
static void test_opt_out_and_constraint(void **state)
{
    (void)state;
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, REPEAT, &n);
    ts_engine *off = start(TS_SPEC_OFF, 4, 0), *on = start(TS_SPEC_NGRAM, 4, 0);
    ts_request_params p = eu_greedy(ids, n, 60);
    p.no_speculation = true;
    eu_result a = eu_run(on, &p);
    assert_int_equal(eu_stats(on).spec_drafted, 0);
    p.no_speculation = false;
    eu_result b = eu_run(off, &p);
    eu_assert_same(&a, &b, 1);
    eu_result_free(&a);
    eu_result_free(&b);

    const char *json = "{\"name\": \"Lily\", \"name\": \"Lily\", \"name\": \"Lily\"";
    int nj = 0;
    int32_t *jids = eu_tokenize(eu_model, json, &nj);
    ts_request_params c = eu_greedy(jids, nj, 40);
    c.constraint = TS_CONSTRAINT_JSON_OBJECT;
    eu_result x = eu_run(off, &c), y = eu_run(on, &c);
    eu_assert_same(&x, &y, 1);
    assert_true(eu_stats(on).spec_drafted > 0);
    assert_pool_clean(on);
    eu_result_free(&x);
    eu_result_free(&y);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    free(ids);
    free(jids);
}

/* A request cancelled while it speculates ends cancelled, and its drafts' slots go back
 * with its blocks. */
static void test_cancel_while_speculating(void **state)
{
    (void)state;
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, REPEAT, &n);
    ts_engine *on = start(TS_SPEC_NGRAM, 4, 0);
    ts_request_params p = eu_greedy(ids, n, 1000);
    p.ignore_eos = true;
    ts_request *req = eu_submit_params(on, &p);
    ts_event ev;
    int tokens = 0;
    ts_finish_reason why = TS_FINISH_NONE;
    while (ts_request_next_event(req, &ev, 10000) == TS_OK) {
        assert_int_not_equal(ev.kind, TS_EVENT_ERROR);
        if (ev.kind == TS_EVENT_TOKEN && ++tokens == 40)
            ts_request_cancel(req);
        if (ev.kind == TS_EVENT_DONE)
            why = ev.finish;
        ts_event_clear(&ev);
    }
    ts_request_release(req);
    assert_int_equal(why, TS_FINISH_CANCELLED);
    assert_true(tokens >= 40 && tokens < 1000);
    ts_engine_stats st = eu_stats(on);
    assert_true(st.spec_drafted > 0);
    assert_int_equal(st.requests_cancelled, 1);
    assert_pool_clean(on);
    ts_engine_destroy(on);
    free(ids);
}

static void test_greedy_identical_on_a_quantized_file(void **state)
{
    (void)state;
    ts_model *m = su_load_type("Q4_K_M");
    int n = 0;
    int32_t *ids = eu_tokenize(m, REPEAT, &n);
    ts_engine *off = eu_start_spec(m, TS_SPEC_OFF, NULL, 4, 0);
    ts_engine *on = eu_start_spec(m, TS_SPEC_NGRAM, NULL, 4, 0);
    ts_request_params p = eu_greedy(ids, n, 100);
    eu_result a = eu_run(off, &p);
    ts_request *reqs[3];
    for (int i = 0; i < 3; i++)
        reqs[i] = eu_submit_params(on, &p);
    for (int i = 0; i < 3; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        eu_assert_same(&r, &a, 1);
        eu_result_free(&r);
    }
    assert_true(eu_stats(on).spec_accepted > 0);
    assert_pool_clean(on);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    eu_result_free(&a);
    free(ids);
    ts_model_free(m);
}

/* ---- sampled output */

typedef struct token_trace {
    int n;
    int32_t token[64];
    float logprob[64];
    int32_t top0[64];
} token_trace;

static void trace(ts_engine *e, const ts_request_params *p, token_trace *t)
{
    ts_request *req = eu_submit_params(e, p);
    ts_event ev;
    memset(t, 0, sizeof *t);
    while (ts_request_next_event(req, &ev, 10000) == TS_OK) {
        assert_int_not_equal(ev.kind, TS_EVENT_ERROR);
        if (ev.kind == TS_EVENT_TOKEN && t->n < 64) {
            t->token[t->n] = ev.token;
            t->logprob[t->n] = ev.logprob;
            t->top0[t->n++] = ev.n_top > 0 ? ev.top[0].token : -1;
        }
        ts_event_clear(&ev);
    }
    ts_request_release(req);
}

/* Drawing from the target and accepting a draft that equals the draw consumes the
 * request's random stream as a plain decode does: a seed gives the same tokens, and the
 * same logprobs, with speculation on and off. */
static void test_seeded_sampling_identical_with_logprobs(void **state)
{
    (void)state;
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, REPEAT, &n);
    ts_engine *off = start(TS_SPEC_OFF, 4, 0), *on = start(TS_SPEC_NGRAM, 4, 0);
    for (uint64_t seed = 1; seed <= 6; seed++) {
        ts_request_params p = eu_seeded(ids, n, 48, 0.6f + 0.1f * (float)seed, seed);
        p.ignore_eos = true;
        p.sampling.top_k = seed % 2 ? 40 : 0;
        p.sampling.repetition_penalty = seed == 3 ? 1.2f : 1.0f;
        p.sampling.logprobs = true;
        p.sampling.top_logprobs = 2;
        token_trace a, b;
        trace(off, &p, &a);
        trace(on, &p, &b);
        assert_int_equal(a.n, 48);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.token, b.token, sizeof a.token);
        assert_memory_equal(a.logprob, b.logprob, sizeof a.logprob);
        assert_memory_equal(a.top0, b.top0, sizeof a.top0);
    }
    assert_true(eu_stats(on).spec_accepted > 0);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    free(ids);
}

/* ---- the distribution at a verified position */

enum { DRAWS_REQS = 80, DRAWS_N = 16, DRAWS = DRAWS_REQS * DRAWS_N, SAMPLE_TOKENS = 3 };

/* The generated tokens of DRAWS completions (DRAWS, SAMPLE_TOKENS) with seeds from seed0. */
static void draw(ts_engine *e, const int32_t *ids, int n, uint64_t seed0, int32_t *out)
{
    ts_request *reqs[DRAWS_REQS];
    for (int r = 0; r < DRAWS_REQS; r++) {
        ts_request_params p = eu_seeded(ids, n, SAMPLE_TOKENS, 2.0f, seed0 + (uint64_t)r);
        p.ignore_eos = true;
        p.n = DRAWS_N;
        reqs[r] = eu_submit_params(e, &p);
    }
    int seen[DRAWS_REQS][DRAWS_N] = {{0}};
    for (int r = 0; r < DRAWS_REQS; r++) {
        ts_event ev;
        while (ts_request_next_event(reqs[r], &ev, 10000) == TS_OK) {
            assert_int_not_equal(ev.kind, TS_EVENT_ERROR);
            if (ev.kind == TS_EVENT_TOKEN) {
                int *k = &seen[r][ev.index];
                assert_true(*k < SAMPLE_TOKENS);
                out[((size_t)r * DRAWS_N + (size_t)ev.index) * SAMPLE_TOKENS + (size_t)*k] =
                    ev.token;
                (*k)++;
            }
            ts_event_clear(&ev);
        }
        ts_request_release(reqs[r]);
    }
}

/* Two-sample chi-square of the counts of a and b (same size) over the tokens of
 * position pos, categories with fewer than 10 draws in the two together pooled into one;
 * *df gets the degrees of freedom. */
static double chi_square(const int32_t *a, const int32_t *b, int pos, int vocab, int *df)
{
    int *ca = calloc((size_t)vocab, sizeof *ca), *cb = calloc((size_t)vocab, sizeof *cb);
    for (int i = 0; i < DRAWS; i++) {
        ca[a[i * SAMPLE_TOKENS + pos]]++;
        cb[b[i * SAMPLE_TOKENS + pos]]++;
    }
    double x2 = 0;
    int cats = 0, ra = 0, rb = 0;
    for (int t = 0; t < vocab; t++) {
        if (ca[t] + cb[t] < 10) {
            ra += ca[t];
            rb += cb[t];
            continue;
        }
        x2 += (double)(ca[t] - cb[t]) * (ca[t] - cb[t]) / (ca[t] + cb[t]);
        cats++;
    }
    if (ra + rb > 0) {
        x2 += (double)(ra - rb) * (ra - rb) / (ra + rb);
        cats++;
    }
    free(ca);
    free(cb);
    *df = cats - 1;
    return x2;
}

/* The chi-square bound of df degrees of freedom at p = 0.001 (Wilson-Hilferty). */
static double chi_bound(int df)
{
    double v = 2.0 / (9.0 * df), z = 3.09;
    return df * pow(1.0 - v + z * sqrt(v), 3.0);
}

/* The draft prompt lookup proposes for position pos of draw i of a (the prompt ids (n)
 * and the draw's tokens before pos as the text); -1 when none. hist holds n +
 * SAMPLE_TOKENS tokens. */
static int32_t draft_at(const int32_t *a, int i, int pos, const int32_t *ids, int n,
                        int32_t *hist)
{
    int32_t d = -1;
    memcpy(hist, ids, (size_t)n * sizeof *hist);
    memcpy(hist + n, a + (size_t)i * SAMPLE_TOKENS, (size_t)pos * sizeof *hist);
    return spec_ngram_draft(&d, hist, n + pos, 1) == 1 ? d : -1;
}

/* Draws of a whose token at pos equals the draft proposed there: the share an acceptance
 * rule decides. */
static int draft_hits(const int32_t *a, int pos, const int32_t *ids, int n)
{
    int32_t *hist = malloc(((size_t)n + SAMPLE_TOKENS) * sizeof *hist);
    int hits = 0;
    for (int i = 0; i < DRAWS; i++)
        hits += a[i * SAMPLE_TOKENS + pos] == draft_at(a, i, pos, ids, n, hist);
    free(hist);
    return hits;
}

/* |z| of two proportions x / DRAWS and y / DRAWS. */
static double two_proportion_z(int x, int y)
{
    double p = (double)(x + y) / (2.0 * DRAWS), se = sqrt(2.0 * p * (1.0 - p) / DRAWS);
    return se > 0 ? fabs((double)(x - y) / DRAWS) / se : 0.0;
}

/* What a biased acceptance rule would have produced from the plain draws a: at each
 * position where the draft (prompt lookup over the prompt and the draws so far) differs
 * from the drawn token, the draft is taken anyway half the time ("accept d with
 * probability p(d) + (1 - p(d)) / 2"). The test below must tell it apart. */
static void bias(int32_t *out, const int32_t *a, const int32_t *ids, int n)
{
    uint64_t rng = 12345;
    int32_t *hist = malloc(((size_t)n + SAMPLE_TOKENS) * sizeof *hist);
    memcpy(out, a, (size_t)DRAWS * SAMPLE_TOKENS * sizeof *out);
    for (int i = 0; i < DRAWS; i++) {
        int32_t *t = out + (size_t)i * SAMPLE_TOKENS, d = draft_at(out, i, 1, ids, n, hist);
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        if (d >= 0 && d != t[1] && ((rng >> 33) & 1))
            t[1] = d; /* what follows would change too; position 1 is what is compared */
    }
    free(hist);
}

static void test_sampled_distribution_unchanged(void **state)
{
    (void)state;
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, REPEAT, &n);
    ts_engine *off = start(TS_SPEC_OFF, DRAWS_N, 0), *on = start(TS_SPEC_NGRAM, DRAWS_N, 0);
    int32_t *plain = malloc(DRAWS * SAMPLE_TOKENS * sizeof *plain);
    int32_t *spec = malloc(DRAWS * SAMPLE_TOKENS * sizeof *spec);
    int32_t *biased = malloc(DRAWS * SAMPLE_TOKENS * sizeof *biased);
    draw(off, ids, n, 1000, plain);
    draw(on, ids, n, 5000, spec); /* other seeds: a sample of its own */
    ts_engine_stats st = eu_stats(on);
    print_message("drafted %llu, accepted %llu\n", (unsigned long long)st.spec_drafted,
                  (unsigned long long)st.spec_accepted);
    assert_true(st.spec_accepted > 50);
    assert_true(st.spec_drafted > st.spec_accepted);
    bias(biased, plain, ids, n);
    int vocab = eu_model->cfg.vocab_size;
    for (int pos = 1; pos < SAMPLE_TOKENS; pos++) { /* the first drafted and after */
        int df = 0;
        double x2 = chi_square(plain, spec, pos, vocab, &df);
        print_message("position %d: chi2 %.1f (df %d, bound %.1f)\n", pos, x2, df,
                      chi_bound(df));
        assert_true(df >= 3);
        assert_true(x2 < chi_bound(df));
    }
    /* Position 1 is drafted after one generated token (max_tokens leaves room for one
     * draft): the share of draws equal to their draft is what a rule's bias moves. */
    int hits = draft_hits(plain, 1, ids, n), hits_spec = draft_hits(spec, 1, ids, n);
    int hits_b = draft_hits(biased, 1, ids, n);
    double z = two_proportion_z(hits, hits_spec), z_b = two_proportion_z(hits_b, hits_spec);
    print_message("draft hits of %d: plain %d, speculative %d (z %.2f), biased %d (z %.2f)\n",
                  DRAWS, hits, hits_spec, z, hits_b, z_b);
    assert_true(z < 3.29);   /* p = 0.001, two-sided */
    assert_true(z_b > 3.29);
    assert_pool_clean(on);
    free(plain);
    free(spec);
    free(biased);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    free(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ngram_draft_takes_the_latest_longest_match),
        cmocka_unit_test(test_options_and_their_bounds),
        cmocka_unit_test(test_drafts_follow_what_rows_cost),
        cmocka_unit_test(test_depth_and_rests_follow_the_record),
        cmocka_unit_test(test_truncate_gives_back_draft_blocks),
        cmocka_unit_test(test_greedy_identical_alone_and_batched),
        cmocka_unit_test(test_greedy_identical_with_preemption),
        cmocka_unit_test(test_stop_strings_across_accepted_runs),
        cmocka_unit_test(test_opt_out_and_constraint),
        cmocka_unit_test(test_cancel_while_speculating),
        cmocka_unit_test(test_greedy_identical_on_a_quantized_file),
        cmocka_unit_test(test_seeded_sampling_identical_with_logprobs),
        cmocka_unit_test(test_sampled_distribution_unchanged),
    };
    return cmocka_run_group_tests(tests, eu_setup_stories, eu_teardown_stories);
}
