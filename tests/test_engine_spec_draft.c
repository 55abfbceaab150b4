/* test_engine_spec_draft.c: speculative decoding with a draft model: greedy text identical
 * with the draft model on and off (alone, 8 sequences batched, n > 1, cut by stop strings,
 * on a quantized target, with a small KV pool), seeded sampling identical token for token,
 * the opt-out and a JSON constraint, both acceptance regimes reached (a Q4_K draft of the
 * F32 target accepts part of its drafts, the target as its own draft all of them, or part
 * with its head restricted to the first ids), a draft model of another vocabulary refused
 * naming the difference, forced acceptance for measurements, no drafts in a step already
 * spec_rows wide, the CLI's options, and both KV pools consistent after the rollbacks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "engine/spec_draft.h"
#include "engine/state.h"
#include "engine_util.h"
#include "kv/kv.h"
#include "step_util.h"
#include "tiny_gguf.h"
#include "util.h"

static const char *const PROMPTS[] = {
    "Once upon a time, there was a little girl named Lily.", "Lily and Tom went to the beach",
    "The cat sat on the mat.", "One day", "Tim had a big red ball", "The sun was hot",
    "Mom said", "A little bird"};
enum { N_PROMPTS = 8, GREEDY_TOKENS = 100 };

static ts_engine *start_on(const ts_model *m, const ts_model *draft, int max_seqs,
                           int kv_blocks)
{
    ts_engine *e = eu_start_spec(m, draft ? TS_SPEC_DRAFT : TS_SPEC_OFF, draft, max_seqs,
                                 kv_blocks);
    spec_draft_set_checking(e, true);
    return e;
}

/* Both pools of an idle engine are consistent, and no block is held: every rollback of
 * the target's and of the draft's tables gave its blocks back, and freed sequences their
 * draft tables. */
static void assert_pools_clean(ts_engine *e)
{
    eu_wait_idle(e);
    if (spec_draft_breach(e)[0])
        fail_msg("after a verification: %s", spec_draft_breach(e));
    ts_error err = {0};
    const kv_table *none[1] = {NULL};
    if (kv_pool_check(e->step.pool, none, 0, &err) != TS_OK)
        fail_msg("target pool: %s", err.msg);
    const kv_pool *dp = spec_draft_pool(e);
    assert_non_null(dp);
    if (kv_pool_check(dp, none, 0, &err) != TS_OK)
        fail_msg("draft pool: %s", err.msg);
    kv_stats ks;
    kv_pool_stats(&ks, dp);
    assert_int_equal(ks.blocks_used, 0);
    assert_int_equal(ks.blocks_cached, 0); /* the draft's blocks are never published */
}

/* The greedy texts of PROMPTS on off, each alone; and then on `on` alone and all at once
 * (with an n = 2 request beside them), each the same as off's. */
static void check_greedy(const ts_model *m, ts_engine *off, ts_engine *on)
{
    int32_t *ids[N_PROMPTS];
    int n[N_PROMPTS];
    eu_result ref[N_PROMPTS];
    for (int i = 0; i < N_PROMPTS; i++) {
        ids[i] = eu_tokenize(m, PROMPTS[i], &n[i]);
        ts_request_params p = eu_greedy(ids[i], n[i], GREEDY_TOKENS);
        ref[i] = eu_run(off, &p);
        if (i < 2) {
            eu_result alone = eu_run(on, &p);
            eu_assert_same(&alone, &ref[i], 1);
            eu_result_free(&alone);
        }
    }
    ts_request *reqs[N_PROMPTS + 1];
    for (int i = 0; i < N_PROMPTS; i++) {
        ts_request_params p = eu_greedy(ids[i], n[i], GREEDY_TOKENS);
        reqs[i] = eu_submit_params(on, &p);
    }
    ts_request_params two = eu_greedy(ids[1], n[1], GREEDY_TOKENS);
    two.n = 2;
    reqs[N_PROMPTS] = eu_submit_params(on, &two);
    for (int i = 0; i <= N_PROMPTS; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        assert_false(r.error);
        const eu_result *want = &ref[i == N_PROMPTS ? 1 : i];
        eu_assert_same(&r, want, 1);
        if (i == N_PROMPTS) {
            assert_int_equal(r.n_done, 2);
            assert_string_equal(r.text[1], want->text[0]);
        }
        eu_result_free(&r);
    }
    for (int i = 0; i < N_PROMPTS; i++) {
        eu_result_free(&ref[i]);
        free(ids[i]);
    }
}

/* ---- greedy text and the acceptance regimes */

/* A Q4_K draft of the F32 target: the text is the target's, alone and batched, and the
 * draft is right often but not always (drafts were rejected and rolled back). */
static void test_q4k_draft_partial_acceptance(void **state)
{
    (void)state;
    ts_model *draft = su_load_type("Q4_K_M");
    ts_engine *off = start_on(eu_model, NULL, 16, 0), *on = start_on(eu_model, draft, 16, 0);
    check_greedy(eu_model, off, on);
    ts_engine_stats st = eu_stats(on);
    assert_true(st.spec_accepted > 100);             /* the draft paid */
    assert_true(st.spec_drafted > st.spec_accepted); /* and was wrong at times */
    assert_int_equal(eu_stats(off).spec_drafted, 0);
    /* all of it counted under the draft model, none under prompt lookup */
    const ts_spec_source_stats *dm = &st.spec_source[TS_SPEC_SOURCE_DRAFT_MODEL];
    assert_int_equal(dm->drafted, st.spec_drafted);
    assert_int_equal(dm->accepted, st.spec_accepted);
    assert_int_equal(st.spec_source[TS_SPEC_SOURCE_NGRAM].drafted, 0);
    assert_int_equal(st.spec_source[TS_SPEC_SOURCE_NGRAM].accepted, 0);
    assert_true(st.spec_draft_model_seconds > 0); /* the draft steps were timed */
    assert_true(eu_stats(off).spec_draft_model_seconds == 0);
    assert_pools_clean(on);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    ts_model_free(draft);
}

/* The target as its own draft: every draft is accepted, which holds only while the draft's
 * K/V follow the target's tokens through every verification (a stale or misplaced row
 * would change its proposals). */
static void test_self_draft_full_acceptance(void **state)
{
    (void)state;
    ts_model *draft = eu_load_stories();
    ts_engine *off = start_on(eu_model, NULL, 16, 0), *on = start_on(eu_model, draft, 16, 0);
    check_greedy(eu_model, off, on);
    ts_engine_stats st = eu_stats(on);
    assert_true(st.spec_drafted > 200);
    assert_int_equal(st.spec_accepted, st.spec_drafted);
    assert_pools_clean(on);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    ts_model_free(draft);
}

/* The target as its own draft with its head restricted to the first 400 of 512 ids
 * (--draft-vocab): the text is the target's still; a draft is right exactly when the
 * target's token is among those ids, so some drafts are taken and some not, where the
 * whole head took all (above); and a count at or past the vocabulary is the whole head. */
static void test_draft_vocab(void **state)
{
    (void)state;
    ts_model *draft = eu_load_stories();
    ts_engine *off = start_on(eu_model, NULL, 16, 0);
    int counts[2] = {400, 512};
    for (int i = 0; i < 2; i++) {
        ts_engine_options o;
        eu_spec_options(&o, TS_SPEC_DRAFT, draft, 16, 0);
        o.spec_draft_vocab = counts[i];
        ts_engine *on = eu_start(eu_model, &o);
        spec_draft_set_checking(on, true);
        check_greedy(eu_model, off, on);
        ts_engine_stats st = eu_stats(on);
        assert_true(st.spec_drafted > 200);
        if (counts[i] < eu_model->cfg.vocab_size)
            assert_true(st.spec_accepted > 0 && st.spec_accepted < st.spec_drafted);
        else
            assert_int_equal(st.spec_accepted, st.spec_drafted);
        assert_pools_clean(on);
        ts_engine_destroy(on);
    }
    ts_engine_destroy(off);
    ts_model_free(draft);
}

/* What a draft costs is learnt from draft steps of one row a sequence: a first step that
 * also catches the draft up on a whole prompt (a cost paid once per sequence, however
 * many drafts follow) would make every later draft look dear, and the engine stop
 * drafting. A request of 3 tokens drafts once, in that catch-up step alone: its draft
 * steps are timed but teach no cost; a longer one's later steps do. */
static void test_catch_up_not_a_draft_cost(void **state)
{
    (void)state;
    ts_model *draft = eu_load_stories();
    ts_engine *on = start_on(eu_model, draft, 4, 0);
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, PROMPTS[0], &n);
    assert_true(n > 8);
    ts_request_params p = eu_greedy(ids, n, 3);
    eu_result r = eu_run(on, &p);
    eu_result_free(&r);
    ts_engine_stats st = eu_stats(on);
    assert_true(st.spec_drafted >= 1);
    assert_true(st.spec_draft_model_seconds > 0);
    assert_true(spec_draft_seconds(on) == 0.0);
    p = eu_greedy(ids, n, 40);
    r = eu_run(on, &p);
    eu_result_free(&r);
    assert_true(spec_draft_seconds(on) > 0.0);
    assert_pools_clean(on);
    ts_engine_destroy(on);
    ts_model_free(draft);
    free(ids);
}

/* The drafts of 8 sequences run together, max_tokens each past end-of-generation, with
 * spec_rows rows a step to draft into: how many tokens the engine drafted, and the texts
 * (the same whatever spec_rows is, the greedy text of each prompt). */
static uint64_t drafted_together(const ts_model *draft, int spec_rows, int max_tokens,
                                 eu_result *out)
{
    ts_engine_options o;
    eu_spec_options(&o, TS_SPEC_DRAFT, draft, N_PROMPTS, 0);
    o.spec_rows = spec_rows;
    ts_engine *e = eu_start(eu_model, &o);
    ts_request *reqs[N_PROMPTS];
    int32_t *ids[N_PROMPTS];
    for (int i = 0; i < N_PROMPTS; i++) {
        int n = 0;
        ids[i] = eu_tokenize(eu_model, PROMPTS[i], &n);
        ts_request_params p = eu_greedy(ids[i], n, max_tokens);
        p.ignore_eos = true;
        reqs[i] = eu_submit_params(e, &p);
    }
    for (int i = 0; i < N_PROMPTS; i++) {
        eu_collect(reqs[i], &out[i]);
        ts_request_release(reqs[i]);
        assert_false(out[i].error);
        assert_int_equal(out[i].tokens[0], max_tokens);
        free(ids[i]);
    }
    uint64_t drafted = eu_stats(e).spec_drafted;
    assert_pools_clean(e);
    ts_engine_destroy(e);
    return drafted;
}

/* A step already as wide as spec_rows takes no drafts: 8 sequences decoding together with
 * room for 4 rows may draft only in last steps of fewer than 4 rows (sequences that came in
 * a step late; none did here), far less than with room for all of them; the texts are the
 * same. This is what keeps a busy server's draft model from costing anything. */
static void test_full_step_drafts_nothing(void **state)
{
    (void)state;
    ts_model *draft = eu_load_stories();
    enum { TOKENS = 48 };
    eu_result busy[N_PROMPTS], free_room[N_PROMPTS];
    uint64_t with_room = drafted_together(draft, 64, TOKENS, free_room);
    uint64_t without = drafted_together(draft, 4, TOKENS, busy);
    assert_true(with_room >= (uint64_t)N_PROMPTS * TOKENS / 2); /* the target as its own draft */
    if (without * 8 > with_room)
        fail_msg("%llu tokens drafted with room for 4 rows beside 8 sequences, %llu with room "
                 "for all", (unsigned long long)without, (unsigned long long)with_room);
    for (int i = 0; i < N_PROMPTS; i++) {
        eu_assert_same(&busy[i], &free_room[i], 1);
        eu_result_free(&busy[i]);
        eu_result_free(&free_room[i]);
    }
    ts_model_free(draft);
}

/* A quantized target (Q4_K_M) with a Q8_0 draft: its own greedy text. */
static void test_quantized_target(void **state)
{
    (void)state;
    ts_model *target = su_load_type("Q4_K_M"), *draft = su_load_type("Q8_0");
    ts_engine *off = start_on(target, NULL, 16, 0), *on = start_on(target, draft, 16, 0);
    check_greedy(target, off, on);
    assert_true(eu_stats(on).spec_accepted > 100);
    assert_pools_clean(on);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    ts_model_free(target);
    ts_model_free(draft);
}

/* A pool of few blocks: sequences are preempted and the draft's pool (as many blocks) runs
 * short; drafting gives way and the text stays the target's. */
static void test_small_pools(void **state)
{
    (void)state;
    ts_model *draft = su_load_type("Q4_K_M");
    ts_engine *off = start_on(eu_model, NULL, 8, 0), *on = start_on(eu_model, draft, 8, 14);
    check_greedy(eu_model, off, on);
    ts_engine_stats st = eu_stats(on);
    assert_true(st.preemptions > 0);
    assert_true(st.spec_accepted > 0);
    assert_pools_clean(on);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    ts_model_free(draft);
}

/* Stop strings that fall inside runs of accepted drafts cut the text where they do
 * without speculation. */
static void test_stop_strings_across_accepted_runs(void **state)
{
    (void)state;
    ts_model *draft = eu_load_stories();
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, PROMPTS[0], &n);
    ts_engine *off = start_on(eu_model, NULL, 4, 0), *on = start_on(eu_model, draft, 4, 0);
    ts_request_params p = eu_greedy(ids, n, 80);
    eu_result full = eu_run(off, &p);
    const char *ref = full.text[0];
    assert_true(strlen(ref) > 80);
    for (int at = 3; at < 70; at += 5) {
        char stop[8];
        memcpy(stop, ref + at, 4);
        stop[4] = '\0';
        size_t cut = (size_t)(strstr(ref, stop) - ref);
        ts_request_params q = p;
        q.stop[0] = stop;
        q.n_stop = 1;
        eu_result a = eu_run(off, &q), b = eu_run(on, &q);
        eu_assert_same(&a, &b, 1);
        assert_int_equal(b.finish[0], TS_FINISH_STOP);
        assert_int_equal(strlen(b.text[0]), cut);
        eu_result_free(&a);
        eu_result_free(&b);
    }
    assert_true(eu_stats(on).spec_accepted > 40);
    assert_pools_clean(on);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    eu_result_free(&full);
    free(ids);
    ts_model_free(draft);
}

/* ---- sampled output, opt-out, constraints */

typedef struct token_trace {
    int n;
    int32_t token[64];
    float logprob[64];
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
            t->logprob[t->n++] = ev.logprob;
        }
        ts_event_clear(&ev);
    }
    ts_request_release(req);
}

/* The draft model's draft is one token (q one-hot): accepting it when the target's own
 * draw equals it consumes the request's random stream as a plain decode does, so a seed
 * gives the same tokens and logprobs with the draft model on and off. */
static void test_seeded_sampling_identical(void **state)
{
    (void)state;
    ts_model *draft = su_load_type("Q4_K_M");
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, PROMPTS[0], &n);
    ts_engine *off = start_on(eu_model, NULL, 4, 0), *on = start_on(eu_model, draft, 4, 0);
    for (uint64_t seed = 1; seed <= 4; seed++) {
        ts_request_params p = eu_seeded(ids, n, 48, 0.5f + 0.1f * (float)seed, seed);
        p.ignore_eos = true;
        p.sampling.top_k = seed % 2 ? 40 : 0;
        p.sampling.logprobs = true;
        token_trace a, b;
        trace(off, &p, &a);
        trace(on, &p, &b);
        assert_int_equal(a.n, 48);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.token, b.token, sizeof a.token);
        assert_memory_equal(a.logprob, b.logprob, sizeof a.logprob);
    }
    ts_engine_stats st = eu_stats(on);
    assert_true(st.spec_accepted > 0 && st.spec_accepted < st.spec_drafted);
    assert_pools_clean(on);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    free(ids);
    ts_model_free(draft);
}

/* A request that opts out drafts nothing; a JSON-object constraint speculates (the draft
 * model proposes unconstrained, each draft row is masked) and keeps its text. */
static void test_opt_out_and_constraint(void **state)
{
    (void)state;
    ts_model *draft = eu_load_stories();
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, PROMPTS[1], &n);
    ts_engine *off = start_on(eu_model, NULL, 4, 0), *on = start_on(eu_model, draft, 4, 0);
    ts_request_params p = eu_greedy(ids, n, 60);
    p.no_speculation = true;
    eu_result a = eu_run(on, &p), b = eu_run(off, &p);
    eu_assert_same(&a, &b, 1);
    assert_int_equal(eu_stats(on).spec_drafted, 0);
    eu_result_free(&a);
    eu_result_free(&b);

    const char *json = "{\"name\": \"Lily\", \"friend\": \"Tom\", \"name\"";
    int nj = 0;
    int32_t *jids = eu_tokenize(eu_model, json, &nj);
    ts_request_params c = eu_greedy(jids, nj, 40);
    c.constraint = TS_CONSTRAINT_JSON_OBJECT;
    eu_result x = eu_run(off, &c), y = eu_run(on, &c);
    eu_assert_same(&x, &y, 1);
    assert_true(eu_stats(on).spec_drafted > 0);
    assert_pools_clean(on);
    eu_result_free(&x);
    eu_result_free(&y);
    ts_engine_destroy(off);
    ts_engine_destroy(on);
    free(ids);
    free(jids);
    ts_model_free(draft);
}

/* ---- forced acceptance (a measuring aid) */

/* At probability 1 every draft is taken; at 0.5 about half of them once the one before
 * was: fewer than all, more than none. */
static void test_forced_acceptance(void **state)
{
    (void)state;
    ts_model *draft = eu_load_stories();
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, PROMPTS[3], &n);
    double ps[2] = {1.0, 0.5};
    for (int i = 0; i < 2; i++) {
        ts_engine_options o;
        ts_engine_options_default(&o);
        o.spec = TS_SPEC_DRAFT;
        o.draft_model = draft;
        o.spec_eager = true;
        o.spec_max = 4;
        o.spec_force_accept = ps[i];
        ts_engine *e = eu_start(eu_model, &o);
        ts_request_params p = eu_greedy(ids, n, 120);
        p.ignore_eos = true;
        eu_result r = eu_run(e, &p);
        assert_int_equal(r.tokens[0], 120);
        ts_engine_stats st = eu_stats(e);
        assert_true(st.spec_drafted > 20);
        if (ps[i] == 1.0)
            assert_int_equal(st.spec_accepted, st.spec_drafted);
        else
            assert_true(st.spec_accepted > 0 && st.spec_accepted < st.spec_drafted);
        assert_pools_clean(e);
        eu_result_free(&r);
        ts_engine_destroy(e);
    }
    free(ids);
    ts_model_free(draft);
}

/* ---- refusals */

static void expect_refused(const ts_model *draft, const char *needle)
{
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.spec = TS_SPEC_DRAFT;
    o.draft_model = draft;
    ts_engine *e = NULL;
    ts_error err = {0};
    assert_int_equal(ts_engine_create(eu_model, &o, &e, &err), TS_ERR_INVALID_ARG);
    assert_null(e);
    if (!strstr(err.msg, needle))
        fail_msg("'%s' does not say '%s'", err.msg, needle);
}

/* Writes the 8-token tiny Llama to path. */
static void write_tiny(const char *path)
{
    gguf_writer *w = NULL;
    uint8_t *bytes = NULL;
    size_t len = 0;
    ts_error err = {0};
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    tiny_gguf_add_llama(w, &tiny_honest);
    assert_int_equal(gguf_writer_finish(w, &bytes, &len, &err), TS_OK);
    gguf_writer_free(w);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    free(bytes);
}

/* A draft of another vocabulary size, and one of the same size (a Qwen3 family's tiny
 * model on another vocabulary padded to 512) are refused naming the difference; the same
 * family on the target's vocabulary is taken; and a draft kind without a draft model. */
static void test_vocabulary_mismatch_refused(void **state)
{
    (void)state;
    char *tiny = strdup(tu_tmp_path("draft-tiny8.gguf"));
    char *other = strdup(tu_tmp_path("draft-other-vocab.gguf"));
    char *same = strdup(tu_tmp_path("draft-same-vocab.gguf"));
    write_tiny(tiny);
    ts_model *small = su_load_path(tiny);
    expect_refused(small, "has 8 tokens, the target's 512");

    char *a[] = {"synth", "--shape", "qwen3-8b", "--tiny", "--vocab", tiny, "-o", other, NULL};
    assert_int_equal(cli_synth(8, a), 0);
    ts_model *padded = su_load_path(other);
    assert_int_equal(padded->cfg.vocab_size, 512);
    expect_refused(padded, "the draft model's");

    char *b[] = {"synth", "--shape", "qwen3-8b", "--tiny", "-o", same, NULL};
    assert_int_equal(cli_synth(6, b), 0);
    ts_model *alike = su_load_path(same);
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.spec = TS_SPEC_DRAFT;
    o.draft_model = alike;
    ts_engine *e = eu_start(eu_model, &o);
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, PROMPTS[2], &n);
    ts_request_params p = eu_greedy(ids, n, 20);
    eu_result r = eu_run(e, &p);
    assert_true(r.tokens[0] > 0);
    assert_pools_clean(e);
    eu_result_free(&r);
    ts_engine_destroy(e);

    expect_refused(NULL, "needs");
    free(ids);
    ts_model_free(small);
    ts_model_free(padded);
    ts_model_free(alike);
    remove(tiny);
    remove(other);
    remove(same);
    free(tiny);
    free(other);
    free(same);
}

/* ---- the CLI's options */

static int engine_arg(ts_engine_options *o, const char *a, const char *v)
{
    char *argv[] = {(char *)a, (char *)v, NULL};
    int i = 0;
    return cli_engine_option(v ? 2 : 1, argv, &i, o);
}

static void test_cli_options(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    assert_int_equal(engine_arg(&o, "--spec", "draft"), 1);
    assert_int_equal(o.spec, TS_SPEC_DRAFT);
    assert_int_equal(engine_arg(&o, "--spec", "drafts"), -1);
    o.spec = TS_SPEC_OFF;
    assert_int_equal(engine_arg(&o, "--draft-model", su_kpath("stories260K-k-%s.gguf", "Q8_0")),
                     1);
    assert_non_null(o.draft_model);
    assert_int_equal(o.spec, TS_SPEC_DRAFT); /* a draft model selects it */
    assert_int_equal(engine_arg(&o, "--draft-model", "/nonexistent/draft.gguf"), -1);
    assert_null(o.draft_model);
    o.spec = TS_SPEC_NGRAM;
    assert_int_equal(engine_arg(&o, "--draft-model", su_kpath("stories260K-k-%s.gguf", "Q8_0")),
                     1);
    assert_int_equal(o.spec, TS_SPEC_NGRAM); /* an explicit kind stays */
    assert_int_equal(engine_arg(&o, "--draft-vocab", "32768"), 1);
    assert_int_equal(o.spec_draft_vocab, 32768);
    assert_int_equal(engine_arg(&o, "--draft-vocab", "-1"), -1);
    cli_free_draft_model(&o);
    assert_null(o.draft_model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4k_draft_partial_acceptance),
        cmocka_unit_test(test_self_draft_full_acceptance),
        cmocka_unit_test(test_draft_vocab),
        cmocka_unit_test(test_catch_up_not_a_draft_cost),
        cmocka_unit_test(test_full_step_drafts_nothing),
        cmocka_unit_test(test_quantized_target),
        cmocka_unit_test(test_small_pools),
        cmocka_unit_test(test_stop_strings_across_accepted_runs),
        cmocka_unit_test(test_seeded_sampling_identical),
        cmocka_unit_test(test_opt_out_and_constraint),
        cmocka_unit_test(test_forced_acceptance),
        cmocka_unit_test(test_vocabulary_mismatch_refused),
        cmocka_unit_test(test_cli_options),
    };
    return cmocka_run_group_tests(tests, eu_setup_stories, eu_teardown_stories);
}
