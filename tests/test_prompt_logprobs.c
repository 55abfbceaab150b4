/* test_prompt_logprobs.c: the engine's prompt scoring (prompt_logprobs): each prompt
 * token's log-probability equals what the same token got when the engine generated it,
 * whatever the chunking, the prefix cache and max_tokens 0; and the sampler's history
 * through the engine (DRY on the model's own greedy text). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine_util.h"
#include "tessera/engine.h"

enum { N_GEN = 24, TOP = 3, MAX_EV = 512 };

typedef struct scored {
    int n_prompt, n_token, n_done;
    bool prompt_after_token; /* a PROMPT event came after a TOKEN event */
    ts_finish_reason finish;
    int32_t token[MAX_EV];
    float logprob[MAX_EV];
    int32_t top1[MAX_EV];    /* the first alternative */
    int32_t gen[MAX_EV];     /* TOKEN events' tokens */
    float gen_logprob[MAX_EV];
} scored;

static void read_all(ts_request *req, scored *out)
{
    memset(out, 0, sizeof *out);
    ts_event ev;
    ts_status st;
    while ((st = ts_request_next_event(req, &ev, 20000)) == TS_OK) {
        assert_int_not_equal(ev.kind, TS_EVENT_ERROR);
        if (ev.kind == TS_EVENT_PROMPT) {
            assert_true(out->n_prompt < MAX_EV);
            assert_int_equal(ev.index, 0);
            assert_int_equal(ev.n_top, TOP);
            out->prompt_after_token |= out->n_token > 0;
            /* the rank: the token's place among the alternatives, or past them */
            int at = 0;
            while (at < ev.n_top && ev.top[at].token != ev.token)
                at++;
            if (at < ev.n_top)
                assert_int_equal(ev.rank, at + 1);
            else
                assert_true(ev.rank > ev.n_top);
            out->token[out->n_prompt] = ev.token;
            out->logprob[out->n_prompt] = ev.logprob;
            out->top1[out->n_prompt++] = ev.top[0].token;
        } else if (ev.kind == TS_EVENT_TOKEN) {
            assert_true(out->n_token < MAX_EV);
            out->gen_logprob[out->n_token] = ev.logprob;
            out->gen[out->n_token++] = ev.token;
        } else if (ev.kind == TS_EVENT_DONE) {
            out->n_done++;
            out->finish = ev.finish;
        }
        ts_event_clear(&ev);
    }
    assert_int_equal(st, TS_ERR_NOT_FOUND);
}

static ts_request_params scoring(const int32_t *tokens, int n, int max_tokens)
{
    ts_request_params p = eu_greedy(tokens, n, max_tokens);
    p.prompt_logprobs = true;
    p.sampling.logprobs = true;
    p.sampling.top_logprobs = TOP;
    return p;
}

/* Scores q (n) on an engine of options o, twice (the second time its blocks are in the
 * prefix cache), and checks both against each other and the prompt. */
static void score_twice(const ts_engine_options *o, const int32_t *q, int n, scored *out)
{
    ts_engine *e = eu_start(eu_model, o);
    static scored again;
    for (int round = 0; round < 2; round++) {
        ts_request_params p = scoring(q, n, 0);
        ts_request *req = eu_submit_params(e, &p);
        read_all(req, round ? &again : out);
        ts_request_release(req);
    }
    ts_engine_destroy(e);
    assert_int_equal(out->n_prompt, n - 1);
    assert_int_equal(out->n_token, 0);
    assert_int_equal(out->n_done, 1);
    assert_int_equal(out->finish, TS_FINISH_LENGTH);
    assert_int_equal(again.n_prompt, n - 1);
    for (int i = 0; i < n - 1; i++) {
        assert_int_equal(out->token[i], q[i + 1]);
        assert_true(isfinite(out->logprob[i]) && out->logprob[i] <= 0.0f);
        assert_true(fabsf(again.logprob[i] - out->logprob[i]) < 1e-5f);
    }
}

static void test_prompt_matches_generation(void **state)
{
    (void)state;
    int n_p = 0;
    int32_t *p = eu_tokenize(eu_model, "Once upon a time, there was a little", &n_p);
    ts_engine *e = eu_start(eu_model, NULL);
    ts_request_params gp = eu_greedy(p, n_p, N_GEN);
    gp.sampling.logprobs = true;
    gp.sampling.top_logprobs = TOP;
    ts_request *req = eu_submit_params(e, &gp);
    static scored gen;
    read_all(req, &gen);
    ts_request_release(req);
    ts_engine_destroy(e);
    assert_int_equal(gen.n_prompt, 0); /* not asked for */
    assert_true(gen.n_token >= 8);

    /* the prompt followed by what was generated, scored as one prompt */
    int n_q = n_p + gen.n_token;
    int32_t *q = malloc((size_t)n_q * sizeof *q);
    assert_non_null(q);
    memcpy(q, p, (size_t)n_p * sizeof *q);
    memcpy(q + n_p, gen.gen, (size_t)gen.n_token * sizeof *q);

    static scored one, chunked;
    score_twice(NULL, q, n_q, &one);
    for (int k = 0; k < gen.n_token; k++) {
        int i = n_p - 1 + k; /* the event of q[n_p + k] */
        assert_int_equal(one.token[i], gen.gen[k]);
        assert_true(fabsf(one.logprob[i] - gen.gen_logprob[k]) < 1e-4f);
        assert_int_equal(one.top1[i], gen.gen[k]); /* greedy: the most likely token */
    }

    /* small steps and a small batch: the prompt in chunks of a few rows, cut to the
     * logits rows the batch has */
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.step_tokens = 8;
    o.prefill_cap = 8;
    o.max_seqs = 3;
    score_twice(&o, q, n_q, &chunked);
    for (int i = 0; i < n_q - 1; i++)
        assert_true(fabsf(chunked.logprob[i] - one.logprob[i]) < 1e-4f);
    free(q);
    free(p);
}

/* With tokens to generate as well: every PROMPT event before the first TOKEN. */
static void test_prompt_then_generation(void **state)
{
    (void)state;
    int n_p = 0;
    int32_t *p = eu_tokenize(eu_model, "The cat sat on the mat and", &n_p);
    ts_engine *e = eu_start(eu_model, NULL);
    ts_request_params sp = scoring(p, n_p, 5);
    ts_request *req = eu_submit_params(e, &sp);
    static scored r;
    read_all(req, &r);
    ts_request_release(req);
    assert_int_equal(r.n_prompt, n_p - 1);
    assert_false(r.prompt_after_token);
    assert_true(r.finish == TS_FINISH_LENGTH ? r.n_token == 5 : r.n_token < 5);
    assert_int_equal(r.n_done, 1);

    /* max_tokens 0 needs prompt_logprobs and one completion */
    ts_request_params bad = eu_greedy(p, n_p, 0);
    ts_request *none = NULL;
    ts_error err = {0};
    assert_int_equal(ts_engine_submit(e, &bad, &none, &err), TS_ERR_INVALID_ARG);
    bad = scoring(p, n_p, 0);
    bad.n = 2;
    assert_int_equal(ts_engine_submit(e, &bad, &none, &err), TS_ERR_INVALID_ARG);
    assert_null(none);
    ts_engine_destroy(e);
    free(p);
}

/* Generates greedily (dry_multiplier, the n_breakers strings of breakers) and returns the
 * number of generated tokens that complete a trigram seen earlier in prompt + text. */
static int repeated_trigrams(const int32_t *p, int n_p, float dry_multiplier,
                             const char *const *breakers, int n_breakers)
{
    enum { N = 120 };
    ts_engine *e = eu_start(eu_model, NULL);
    ts_request_params gp = eu_greedy(p, n_p, N);
    gp.ignore_eos = true;
    gp.sampling.dry_multiplier = dry_multiplier;
    gp.sampling.n_dry_breakers = n_breakers;
    for (int i = 0; i < n_breakers; i++)
        strcpy(gp.sampling.dry_breakers[i], breakers[i]);
    ts_request *req = eu_submit_params(e, &gp);
    static scored r;
    read_all(req, &r);
    ts_request_release(req);
    ts_engine_destroy(e);
    assert_int_equal(r.n_token, N);
    int32_t all[256];
    memcpy(all, p, (size_t)n_p * sizeof *all);
    memcpy(all + n_p, r.gen, (size_t)N * sizeof *all);
    int repeats = 0;
    for (int i = n_p; i < n_p + N; i++) {
        bool seen = false;
        for (int k = 2; k < i && !seen; k++)
            seen = all[k - 2] == all[i - 2] && all[k - 1] == all[i - 1] && all[k] == all[i];
        repeats += seen;
    }
    return repeats;
}

/* DRY with a multiplier that outweighs any logit gap: greedy never extends a repeat of
 * two tokens (dry_allowed_length) into a repeated trigram, which the model's own greedy
 * text does. */
static void test_dry_on_model(void **state)
{
    (void)state;
    int n_p = 0;
    int32_t *p = eu_tokenize(eu_model, "Once upon a time", &n_p);
    int plain = repeated_trigrams(p, n_p, 0.0f, NULL, 0);
    assert_true(plain >= 3);
    assert_int_equal(repeated_trigrams(p, n_p, 100.0f, NULL, 0), 0);
    /* breakers in nearly every token's text (a space starts each word): a repeat never
     * reaches two tokens, and the text is the plain one */
    static const char *const most[] = {" ", "e", "a", "o", "i", "u", ".", ","};
    assert_int_equal(repeated_trigrams(p, n_p, 100.0f, most, 8), plain);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prompt_matches_generation),
        cmocka_unit_test(test_prompt_then_generation),
        cmocka_unit_test(test_dry_on_model),
    };
    return cmocka_run_group_tests_name("prompt_logprobs", tests, eu_setup_stories,
                                       eu_teardown_stories);
}
