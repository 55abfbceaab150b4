/* test_engine.c: the batching engine's output against the reference forward pass:
 * golden texts, many concurrent mixed-length prompts (batch invariance), n completions,
 * stop strings, UTF-8 safety, refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/clock.h"
#include "engine_util.h"
#include "step_util.h"
#include "util.h"

static ts_engine *start(int max_seqs, int kv_blocks)
{
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = max_seqs;
    o.kv_blocks = kv_blocks;
    return eu_start(eu_model, &o);
}

/* The reference outputs: prompt text then 200 positions counting BOS and prompt. */
static void test_golden_texts_alone_and_together(void **state)
{
    (void)state;
    const char *names[] = {"01", "02"};
    char *expected[2];
    int32_t *ids[2];
    int n[2];
    ts_engine *e = start(8, 0);
    for (int i = 0; i < 2; i++) {
        char path[64];
        snprintf(path, sizeof path, "reference/stories260K-greedy/%s.prompt", names[i]);
        char *prompt = tu_read_file(tu_shared(path), NULL);
        snprintf(path, sizeof path, "reference/stories260K-greedy/%s.out", names[i]);
        char *out = tu_read_file(tu_shared(path), NULL);
        assert_non_null(prompt);
        assert_non_null(out);
        size_t plen = strlen(prompt), olen = strlen(out);
        assert_true(olen > plen && !memcmp(out, prompt, plen) && out[olen - 1] == '\n');
        out[olen - 1] = '\0';
        expected[i] = strdup(out + plen);
        ids[i] = eu_tokenize(eu_model, prompt, &n[i]);
        free(prompt);
        free(out);
    }
    /* alone, one after the other */
    for (int i = 0; i < 2; i++) {
        eu_result r;
        ts_request *req = eu_submit(e, ids[i], n[i], 201 - n[i], TS_PRIORITY_NORMAL);
        eu_collect(req, &r);
        ts_request_release(req);
        assert_false(r.error);
        assert_string_equal(r.text[0], expected[i]);
        assert_int_equal(r.finish[0], TS_FINISH_LENGTH);
        assert_int_equal(r.stop_index[0], -1);
        eu_result_free(&r);
    }
    /* together, three copies of each */
    ts_request *reqs[6];
    for (int i = 0; i < 6; i++)
        reqs[i] = eu_submit(e, ids[i % 2], n[i % 2], 201 - n[i % 2], TS_PRIORITY_NORMAL);
    for (int i = 0; i < 6; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        assert_string_equal(r.text[0], expected[i % 2]);
        eu_result_free(&r);
    }
    ts_engine_destroy(e);
    for (int i = 0; i < 2; i++) {
        free(expected[i]);
        free(ids[i]);
    }
}

/* Random prompts of lengths 1..~300 tokens, decoded greedily 24 tokens each. */
static int32_t *random_prompt(unsigned *rng, int len)
{
    int32_t *ids = malloc((size_t)len * sizeof *ids);
    ids[0] = 1;
    for (int i = 1; i < len; i++) {
        *rng = *rng * 1103515245u + 12345u;
        ids[i] = 3 + (int32_t)((*rng >> 8) % 509u);
    }
    return ids;
}

/* The prompts every concurrency level draws from, with their greedy references. */
enum { MAX_CONCURRENT = 64, CONCURRENT_NEW = 24 };
typedef struct concurrent_set {
    int32_t *ids[MAX_CONCURRENT];
    int len[MAX_CONCURRENT];
    char *ref[MAX_CONCURRENT];
} concurrent_set;

/* Runs the first count prompts of set at once: each gives its reference text. */
static void run_concurrent(const concurrent_set *set, int count)
{
    ts_engine *e = start(MAX_CONCURRENT, 0);
    ts_request *reqs[MAX_CONCURRENT];
    for (int i = 0; i < count; i++)
        reqs[i] = eu_submit(e, set->ids[i], set->len[i], CONCURRENT_NEW, TS_PRIORITY_NORMAL);
    for (int i = 0; i < count; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        assert_false(r.error);
        if (strcmp(r.text[0], set->ref[i]) != 0)
            fail_msg("%d concurrent: prompt %d (%d tokens) gave '%s', reference '%s'", count, i,
                     set->len[i], r.text[0], set->ref[i]);
        eu_result_free(&r);
    }
    ts_engine_destroy(e);
}

/* One set of 64 prompts, each reference computed once (the reference forward is most of
 * the test's time), run 1, 2, 7, 32 and 64 at a time. */
static void test_concurrent_prompts_match_reference(void **state)
{
    (void)state;
    concurrent_set set;
    unsigned rng = 777u + MAX_CONCURRENT;
    for (int i = 0; i < MAX_CONCURRENT; i++) {
        set.len[i] = 1 + (int)((rng >> 4) % 300u);
        rng = rng * 69069u + 1u;
        set.ids[i] = random_prompt(&rng, set.len[i]);
        set.ref[i] = eu_reference_greedy(eu_model, set.ids[i], set.len[i], CONCURRENT_NEW);
    }
    int counts[] = {1, 2, 7, 32, MAX_CONCURRENT};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
        run_concurrent(&set, counts[i]);
    for (int i = 0; i < MAX_CONCURRENT; i++) {
        free(set.ids[i]);
        free(set.ref[i]);
    }
}

static void test_n_completions_share_the_prompt(void **state)
{
    (void)state;
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, "Once upon a time", &n);
    ts_engine *e = start(8, 0);

    /* greedy: every completion equals the single greedy text */
    char *ref = eu_reference_greedy(eu_model, ids, n, 20);
    ts_request_params p = eu_greedy(ids, n, 20);
    p.n = 3;
    ts_request *req = NULL;
    assert_int_equal(ts_engine_submit(e, &p, &req, NULL), TS_OK);
    eu_result r;
    eu_collect(req, &r);
    ts_request_release(req);
    assert_int_equal(r.n_done, 3);
    for (int i = 0; i < 3; i++)
        assert_string_equal(r.text[i], ref);
    eu_result_free(&r);

    /* sampled with a seed: reproducible, and the completions differ from each other */
    p.sampling.temperature = 1.0f;
    p.sampling.seed = 42;
    p.sampling.has_seed = true;
    p.max_tokens = 40;
    eu_result a, b;
    assert_int_equal(ts_engine_submit(e, &p, &req, NULL), TS_OK);
    eu_collect(req, &a);
    ts_request_release(req);
    assert_int_equal(ts_engine_submit(e, &p, &req, NULL), TS_OK);
    eu_collect(req, &b);
    ts_request_release(req);
    for (int i = 0; i < 3; i++)
        assert_string_equal(a.text[i], b.text[i]);
    assert_true(strcmp(a.text[0], a.text[1]) != 0 || strcmp(a.text[1], a.text[2]) != 0);
    eu_result_free(&a);
    eu_result_free(&b);

    eu_wait_idle(e);
    ts_engine_stats s;
    ts_engine_get_stats(e, &s);
    assert_int_equal(s.kv_blocks_used, 0);
    /* three requests of n = 3: the prompt counted once each, every completion's tokens */
    assert_int_equal(s.prompt_tokens, 3 * (uint64_t)n);
    /* the sampled ones may end early at end-of-generation, on some CPUs' rounding */
    assert_in_range(s.generated_tokens, 3 * 20 + 2 * 3 * 1, 3 * 20 + 2 * 3 * 40);
    assert_int_equal(s.requests_completed, 3);
    ts_engine_destroy(e);
    free(ref);
    free(ids);
}

/* The n completion texts of a request sampled at temperature 1 with seed (copies). */
static void seeded_texts(ts_engine *e, const int32_t *ids, int n_ids, uint64_t seed, int n,
                         char **out)
{
    ts_request_params p = eu_greedy(ids, n_ids, 40);
    p.sampling.temperature = 1.0f;
    p.sampling.seed = seed;
    p.sampling.has_seed = true;
    p.n = n;
    ts_request *req = NULL;
    assert_int_equal(ts_engine_submit(e, &p, &req, NULL), TS_OK);
    eu_result r;
    eu_collect(req, &r);
    ts_request_release(req);
    assert_int_equal(r.n_done, n);
    for (int i = 0; i < n; i++)
        out[i] = strdup(r.text[i]);
    eu_result_free(&r);
}

/* Completion i of a seeded request draws from its own stream: the first from the seed
 * itself (so n does not change it), the others from the seed and their index mixed, so
 * the second completion of seed 42 is not the first of seed 43 (seed + index made them
 * one stream, and seed sweeps with n > 1 repeated samples). */
static void test_seeded_completions_have_their_own_streams(void **state)
{
    (void)state;
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, "Once upon a time", &n);
    ts_engine *e = start(8, 0);
    char *pair42[2], *alone42[1], *alone43[1];
    seeded_texts(e, ids, n, 42, 2, pair42);
    seeded_texts(e, ids, n, 42, 1, alone42);
    seeded_texts(e, ids, n, 43, 1, alone43);
    assert_string_equal(pair42[0], alone42[0]);
    assert_true(strcmp(pair42[1], alone43[0]) != 0);
    ts_engine_destroy(e);
    free(pair42[0]);
    free(pair42[1]);
    free(alone42[0]);
    free(alone43[0]);
    free(ids);
}

static void test_stop_string_across_tokens(void **state)
{
    (void)state;
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, "Lily and Tom went to the beach", &n);
    char *ref = eu_reference_greedy(eu_model, ids, n, 60);
    assert_true(strlen(ref) > 40);
    ts_engine *e = start(4, 0);
    /* Stop strings cut at many offsets: most start or end inside a token. */
    for (int off = 5; off < 35; off += 3) {
        char stop[8];
        memcpy(stop, ref + off, 5);
        stop[5] = '\0';
        const char *first = strstr(ref, stop);
        ts_request_params p = eu_greedy(ids, n, 60);
        p.stop[0] = "no such text, ever";
        p.stop[1] = stop;
        p.n_stop = 2;
        ts_request *req = NULL;
        assert_int_equal(ts_engine_submit(e, &p, &req, NULL), TS_OK);
        eu_result r;
        eu_collect(req, &r);
        ts_request_release(req);
        assert_int_equal(r.finish[0], TS_FINISH_STOP);
        assert_int_equal(r.stop_index[0], 1); /* the second string matched */
        assert_int_equal(strlen(r.text[0]), (size_t)(first - ref));
        assert_memory_equal(r.text[0], ref, (size_t)(first - ref));
        eu_result_free(&r);
    }
    ts_engine_destroy(e);
    free(ref);
    free(ids);
}

/* At temperature 2 about half of what stories260K samples are byte tokens <0x03>..
 * <0xFF>: most byte sequences are not UTF-8, and every event must still be. */
static void test_random_bytes_never_split_utf8(void **state)
{
    (void)state;
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, "Hello \xe2\x82\xac and \xf0\x9f\x98\x80", &n);
    ts_engine *e = start(8, 0);
    ts_request *reqs[8];
    for (int i = 0; i < 8; i++) {
        ts_request_params p = eu_greedy(ids, n, 150);
        p.sampling.temperature = 2.0f;
        p.sampling.seed = (uint64_t)i;
        p.sampling.has_seed = true;
        p.ignore_eos = true;
        assert_int_equal(ts_engine_submit(e, &p, &reqs[i], NULL), TS_OK);
    }
    for (int i = 0; i < 8; i++) {
        eu_result r;
        eu_collect(reqs[i], &r);
        ts_request_release(reqs[i]);
        assert_true(r.utf8_valid);
        assert_int_equal(r.tokens[0], 150);
        eu_result_free(&r);
    }
    ts_engine_destroy(e);
    free(ids);
}

static void test_refusals_name_the_numbers(void **state)
{
    (void)state;
    ts_engine *e = start(4, 16);
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, "Once upon a time", &n);
    ts_request_params p = eu_greedy(ids, n, 16);
    ts_request *req = NULL;
    ts_error err = {0};

    p.max_tokens = 2048; /* 5 + 2048 > the context of 2048 */
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_TOO_LONG);
    assert_non_null(strstr(err.msg, "2048"));
    assert_null(req);

    p.max_tokens = 1000; /* fits the context, not a 16-block pool */
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_TOO_LONG);
    assert_non_null(strstr(err.msg, "16"));

    p.max_tokens = 0;
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_INVALID_ARG);
    p.max_tokens = 4;
    int32_t bad[2] = {1, 600};
    p.prompt = bad;
    p.n_prompt = 2;
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "600"));
    p.prompt = ids;
    p.n_prompt = (size_t)n;
    p.sampling.top_p = 0.0f;
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "top_p"));

    ts_engine_destroy(e);
    free(ids);
}

/* ts_engine_max_new_tokens is the pool check of submit turned round: that many new
 * tokens are accepted, one more is refused, for prompts on and off block bounds and
 * several n; 0 when not even one token fits. */
static void test_max_new_tokens_is_the_pool_bound(void **state)
{
    (void)state;
    ts_engine *e = start(8, 16);
    int32_t ids[300];
    for (int i = 0; i < 300; i++)
        ids[i] = i == 0 ? 1 : 400 + i % 50;
    static const int prompts[] = {1, 31, 32, 33, 100, 300};
    int refused_all = 0;
    for (size_t k = 0; k < sizeof prompts / sizeof *prompts; k++) {
        for (int n = 1; n <= 5; n++) {
            int max = ts_engine_max_new_tokens(e, (size_t)prompts[k], n);
            ts_request_params p = eu_greedy(ids, prompts[k], max > 0 ? max : 1);
            p.n = n;
            ts_request *req = NULL;
            ts_error err = {0};
            if (max > 0) {
                if (ts_engine_submit(e, &p, &req, &err) != TS_OK)
                    fail_msg("prompt %d, n %d, max %d: %s", prompts[k], n, max, err.msg);
                ts_request_release(req);
                req = NULL;
                p.max_tokens = max + 1;
            } else {
                refused_all++;
            }
            assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_TOO_LONG);
            assert_null(req);
        }
    }
    assert_true(refused_all > 0); /* 300 tokens take 10 of the 16 blocks: n 3 cannot fit */
    assert_int_equal(ts_engine_max_new_tokens(e, 1, 1), 14 * 32);
    assert_int_equal(ts_engine_max_new_tokens(e, 1, 0), 0);
    ts_engine_destroy(e);
}

/* Each request keeps its own sampling parameters and random stream when many sample in
 * one step (on several threads): seeded texts come out the same alone and together.
 * The skinny-GEMM kernel for every step makes the logits bit-identical either way (its
 * sums do not depend on the rows beside a row); OpenBLAS, which takes larger prefill
 * steps on AVX2, rounds differently, which greedy decoding survives (the tests above)
 * but a sampled text may not. */
static void test_sampled_requests_alone_equal_together(void **state)
{
    (void)state;
    enum { N = 8, TOKENS = 40 };
    static const char *prompts[N] = {"Once upon a time", "The cat", "Lily and Ben", "One day",
                                     "The sun was", "Tom had a big", "She saw a", "In the park"};
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = N;
    o.gemm = TS_GEMM_KERNEL;
    ts_engine *e = eu_start(eu_model, &o);
    int32_t *ids[N];
    int n_ids[N];
    ts_request_params p[N];
    for (int i = 0; i < N; i++) {
        ids[i] = eu_tokenize(eu_model, prompts[i], &n_ids[i]);
        p[i] = eu_greedy(ids[i], n_ids[i], TOKENS);
        p[i].ignore_eos = true;
        p[i].sampling.temperature = 0.7f + 0.1f * (float)(i % 4);
        p[i].sampling.top_k = i % 2 ? 20 : 0;
        p[i].sampling.top_p = i % 3 ? 0.9f : 1.0f;
        p[i].sampling.min_p = i == 5 ? 0.05f : 0.0f;
        p[i].sampling.repetition_penalty = i % 4 == 1 ? 1.3f : 1.0f;
        p[i].sampling.frequency_penalty = i % 4 == 2 ? 0.5f : 0.0f;
        p[i].sampling.logprobs = i % 2 == 0;
        p[i].sampling.top_logprobs = i % 2 == 0 ? 3 : 0;
        p[i].sampling.seed = 1000 + (uint64_t)i;
        p[i].sampling.has_seed = true;
    }
    eu_result alone[N], together[N];
    for (int i = 0; i < N; i++) {
        ts_request *req = NULL;
        assert_int_equal(ts_engine_submit(e, &p[i], &req, NULL), TS_OK);
        eu_collect(req, &alone[i]);
        ts_request_release(req);
    }
    ts_request *reqs[N];
    for (int i = 0; i < N; i++)
        assert_int_equal(ts_engine_submit(e, &p[i], &reqs[i], NULL), TS_OK);
    for (int i = 0; i < N; i++) {
        eu_collect(reqs[i], &together[i]);
        ts_request_release(reqs[i]);
    }
    for (int i = 0; i < N; i++) {
        assert_false(alone[i].error || together[i].error);
        assert_int_equal(alone[i].tokens[0], TOKENS);
        assert_string_equal(alone[i].text[0], together[i].text[0]);
        eu_result_free(&alone[i]);
        eu_result_free(&together[i]);
        free(ids[i]);
    }
    ts_engine_destroy(e);
}

/* Every step lands in one of the two profiles, with its rows, and its phases add up. */
static void test_step_profile_counts_every_step(void **state)
{
    (void)state;
    ts_engine *e = start(4, 0);
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, "Once upon a time, there was a little dog named Max.", &n);
    eu_result r;
    double t0 = clock_now_s();
    ts_request *req = eu_submit(e, ids, n, 12, TS_PRIORITY_NORMAL);
    eu_collect(req, &r);
    ts_request_release(req);
    eu_wait_idle(e);
    double wall = clock_now_s() - t0;
    assert_false(r.error);
    assert_int_equal(r.tokens[0], 12);

    ts_engine_stats s;
    ts_engine_get_stats(e, &s);
    /* the whole prompt in one step (under the prefill cap), then one decode step per
     * further token */
    assert_int_equal(s.prompt_steps.steps, 1);
    assert_int_equal(s.prompt_steps.rows, (uint64_t)n);
    assert_int_equal(s.decode_steps.steps, 11);
    assert_int_equal(s.decode_steps.rows, 11);
    assert_int_equal(s.steps, s.prompt_steps.steps + s.decode_steps.steps);
    const ts_step_profile *both[] = {&s.prompt_steps, &s.decode_steps};
    double total = 0.0;
    for (int k = 0; k < 2; k++) {
        for (int p = 0; p < TS_PHASE_COUNT; p++) {
            assert_true(both[k]->seconds[p] >= 0.0);
            total += both[k]->seconds[p];
        }
        assert_true(both[k]->seconds[TS_PHASE_GEMM] > 0.0);
        assert_true(both[k]->seconds[TS_PHASE_LM_HEAD] > 0.0);
        assert_true(both[k]->seconds[TS_PHASE_ATTENTION] > 0.0);
    }
    /* the phases are parts of the steps, which ran inside this window */
    assert_true(total > 0.0 && total <= wall);
    assert_string_equal(ts_step_phase_name(TS_PHASE_GEMM), "gemm");
    assert_string_equal(ts_step_phase_name(TS_PHASE_COUNT), "unknown");
    eu_result_free(&r);
    free(ids);
    ts_engine_destroy(e);
}

/* The greedy text of n_new tokens after prompt by the batched forward pass with K/V in f16,
 * stored by kv's own plain-C conversion (the engine hands its pool the SIMD table's). */
static char *runner_greedy_f16(const ts_model *m, int32_t *prompt, int n, int n_new)
{
    const ts_tokenizer *tok = ts_model_get_tokenizer(m);
    su_runner r;
    su_runner_init_kv(&r, m, simd_init(), 64, KV_DTYPE_F16);
    int vocab = m->cfg.vocab_size, cnt[SU_MAX_SEQS] = {n};
    int32_t next = 0, *toks[SU_MAX_SEQS] = {prompt};
    float *out[SU_MAX_SEQS] = {malloc((size_t)vocab * sizeof(float))};
    char *text = calloc(1, 4096);
    size_t len = 0;
    for (int i = 0; i < n_new; i++) {
        su_runner_step(&r, toks, cnt, out);
        next = su_argmax(out[0], vocab);
        if (ts_token_is_eog(tok, next))
            break;
        size_t k = 0;
        const char *piece = ts_token_bytes(tok, next, &k);
        assert_true(len + k < 4096);
        memcpy(text + len, piece, k);
        len += k;
        toks[0] = &next;
        cnt[0] = 1;
    }
    free(out[0]);
    su_runner_free(&r);
    return text;
}

/* How K and V are stored: auto is f32 for the all-f32 model and f16 for a quantized file
 * (as llama.cpp's cache); the same bytes of pool then hold twice the blocks; an explicit
 * type is kept and an unknown one refused; the quantized file's greedy text through the
 * engine (its SIMD f16 stores) is the batched forward's with plain-C f16 stores. */
static void test_kv_type_follows_the_weights(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 2;
    o.kv_mem_bytes = 4 << 20;
    ts_engine *e = eu_start(eu_model, &o);
    assert_int_equal(ts_engine_kv_type(e), TS_KV_F32);
    ts_engine_destroy(e);

    ts_model *q8 = su_load_type("Q8_0");
    e = eu_start(q8, &o);
    assert_int_equal(ts_engine_kv_type(e), TS_KV_F16);
    ts_engine_stats f16, f32;
    ts_engine_get_stats(e, &f16);
    int n = 0;
    int32_t *ids = eu_tokenize(q8, "Once upon a time, there was a little", &n);
    ts_request *req = eu_submit(e, ids, n, 40, TS_PRIORITY_NORMAL);
    eu_result r = {0};
    eu_collect(req, &r);
    ts_request_release(req);
    ts_engine_destroy(e);
    char *want = runner_greedy_f16(q8, ids, n, 40);
    assert_false(r.error);
    assert_true(strlen(want) > 40);
    assert_string_equal(r.text[0], want);

    o.kv_type = TS_KV_F32;
    e = eu_start(q8, &o);
    assert_int_equal(ts_engine_kv_type(e), TS_KV_F32);
    ts_engine_get_stats(e, &f32);
    ts_engine_destroy(e);
    assert_true(f32.kv_blocks_total > 0);
    /* whole blocks of the same bytes: twice as many, or one more */
    assert_in_range(f16.kv_blocks_total, 2 * f32.kv_blocks_total, 2 * f32.kv_blocks_total + 1);

    o.kv_type = (ts_kv_type)7;
    ts_error err = {0};
    assert_int_equal(ts_engine_create(q8, &o, &e, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "kv_type 7"));
    eu_result_free(&r);
    free(want);
    free(ids);
    ts_model_free(q8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_texts_alone_and_together),
        cmocka_unit_test(test_concurrent_prompts_match_reference),
        cmocka_unit_test(test_n_completions_share_the_prompt),
        cmocka_unit_test(test_seeded_completions_have_their_own_streams),
        cmocka_unit_test(test_stop_string_across_tokens),
        cmocka_unit_test(test_random_bytes_never_split_utf8),
        cmocka_unit_test(test_refusals_name_the_numbers),
        cmocka_unit_test(test_max_new_tokens_is_the_pool_bound),
        cmocka_unit_test(test_step_profile_counts_every_step),
        cmocka_unit_test(test_sampled_requests_alone_equal_together),
        cmocka_unit_test(test_kv_type_follows_the_weights),
    };
    return cmocka_run_group_tests_name("engine", tests, eu_setup_stories, eu_teardown_stories);
}
