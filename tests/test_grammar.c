/* test_grammar.c: constrained decoding: the JSON automaton on valid and invalid texts, the
 * token-trie mask against a brute-force mask over the whole vocabulary (SentencePiece with
 * byte fallback, byte-level BPE), and the engine: a constrained completion is JSON, ends
 * with stop when the object closes, and is the same alone and among 15 others. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "engine_util.h"
#include "grammar/constraint.h"
#include "grammar/json_pda.h"
#include "grammar/token_trie.h"
#include "tessera/tokenizer.h"
#include "util.h"

static const char *const valid_docs[] = {
    "{}",
    "{\"name\": \"Zo\xC3\xAB \\u00e9\\n\\\"\", \"n\": [1, -0.5e+3, 0, 10E2, true, false, null, "
    "{}, []], \"o\": {\"k\": [[]]}}",
    "{\"story\": \"Once upon a time there was a girl\"}",
    "{ \"a\" : 0 ,\n  \"b\":\"x\\\\y\\/\" , \"\xE2\x82\xAC\xF0\x9F\x98\x80\": -0.0}",
    /* escapes around the surrogates: D7FF, a pair (U+1F600), E000 */
    "{\"s\": \"\\ud7ff\\uD83D\\uDE00\\ue000\"}",
};

/* Bytes the automaton must refuse at the last byte (everything before is a valid prefix). */
static const char *const invalid_docs[] = {
    "[", "1", " ", "\"", "{\"a\" 1", "{\"a\":01", "{\"a\":tru}", "{\"a\":\"\x01",
    "{,", "{\"a\":1,}", "{\"a\":[1,]", "{\"a\":\"\xC0", "{\"a\":\"\xE0\x80", "{}x", "{} ",
    "{\"a\":\"\\x", "{\"a\":\"\\u12G", "{\"a\":-}", "{\"a\":1.}", "{\"a\":1e}", "{\"a\"]",
    "{\"a\":[}", "{\"a\":\"\xED\xA0", "{\"a\":\"\xF4\x90",
    /* surrogates only in pairs (cJSON refuses a lone one; the fuzzer found \uddEC): a low
     * one alone, a high one not followed by "\u" and a low one */
    "{\"a\":\"\\uDC", "{\"a\":\"\\udd", "{\"a\":\"\\uD800x", "{\"a\":\"\\uDBFF\\n",
    "{\"a\":\"\\uD800\\uE", "{\"a\":\"\\uD800\\uDB",
};

static bool feed(json_pda *p, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!json_pda_step(p, (uint8_t)s[i]))
            return false;
    return true;
}

static void test_json_pda(void **state)
{
    (void)state;
    for (size_t d = 0; d < sizeof valid_docs / sizeof valid_docs[0]; d++) {
        const char *s = valid_docs[d];
        json_pda p;
        json_pda_init(&p);
        for (size_t i = 0; s[i]; i++) {
            assert_false(json_pda_accepted(&p)); /* not complete before its end */
            if (!json_pda_step(&p, (uint8_t)s[i]))
                fail_msg("doc %zu refused at byte %zu", d, i);
        }
        assert_true(json_pda_accepted(&p));
        cJSON *j = cJSON_Parse(s); /* the oracle agrees */
        assert_true(cJSON_IsObject(j));
        cJSON_Delete(j);
    }
    for (size_t d = 0; d < sizeof invalid_docs / sizeof invalid_docs[0]; d++) {
        const char *s = invalid_docs[d];
        size_t n = strlen(s);
        json_pda p;
        json_pda_init(&p);
        if (!feed(&p, s, n - 1))
            fail_msg("invalid doc %zu: its prefix was refused", d);
        json_pda before = p;
        if (json_pda_step(&p, (uint8_t)s[n - 1]))
            fail_msg("invalid doc %zu (\"%s\") accepted", d, s);
        assert_memory_equal(&p, &before, sizeof p); /* a refused byte changes nothing */
    }
    /* Nesting past the depth limit and endless whitespace are refused. */
    json_pda p;
    json_pda_init(&p);
    assert_true(feed(&p, "{\"a\":", 5));
    int depth = 1;
    while (json_pda_step(&p, '['))
        depth++;
    assert_int_equal(depth, JSON_PDA_MAX_DEPTH);
    json_pda_init(&p);
    assert_true(json_pda_step(&p, '{'));
    int ws = 0;
    while (json_pda_step(&p, ' '))
        ws++;
    assert_int_equal(ws, JSON_PDA_MAX_WS);
}

static bool pda_step(void *s, uint8_t b) { return json_pda_step(s, b); }

/* The mask of every prefix state of the valid documents equals the brute force: each
 * usable token's bytes fed to a copy of the state. */
static void check_mask(const ts_tokenizer *tok, const char *name)
{
    token_trie t;
    ts_error err = {0};
    assert_int_equal(token_trie_build(&t, tok, &err), TS_OK);
    int V = ts_tokenizer_vocab_size(tok);
    assert_int_equal(t.vocab_size, V);
    uint8_t *got = malloc((size_t)V), *prev_mask = malloc((size_t)V);
    assert_non_null(got);
    assert_non_null(prev_mask);
    json_pda prev;
    bool have_prev = false;
    int reused = 0;
    int n_usable = 0, multi = 0, high_byte = 0, states = 0;
    for (int id = 0; id < V; id++)
        n_usable += token_trie_usable(tok, id);
    assert_int_equal(t.n_tokens, n_usable);
    for (size_t d = 0; d < sizeof valid_docs / sizeof valid_docs[0]; d++) {
        const char *s = valid_docs[d];
        json_pda p;
        json_pda_init(&p);
        for (size_t i = 0;; i++) {
            int n_allowed = token_trie_allowed(&t, pda_step, &p, sizeof p, got);
            int n_brute = 0;
            for (int id = 0; id < V; id++) {
                size_t len = 0;
                const char *b = ts_token_bytes(tok, id, &len);
                json_pda q = p;
                bool want = token_trie_usable(tok, id) && feed(&q, b, len);
                if (want != (bool)got[id])
                    fail_msg("%s: doc %zu byte %zu token %d: trie %d, brute force %d", name, d, i,
                             id, got[id], want);
                n_brute += want;
                if (want && len > 1) {
                    int kinds = 0; /* syntax bytes of different kinds in one token */
                    for (const char *c = "\"{}[]:,"; *c; c++)
                        kinds += memchr(b, *c, len) != NULL;
                    multi += kinds >= 2;
                }
                high_byte += want && len == 1 && (uint8_t)b[0] >= 0x80;
            }
            assert_int_equal(n_allowed, n_brute);
            if (have_prev && json_pda_same(&prev, &p)) { /* the engine reuses such masks */
                assert_memory_equal(prev_mask, got, (size_t)V);
                reused++;
            }
            memcpy(prev_mask, got, (size_t)V);
            prev = p;
            have_prev = true;
            states++;
            if (!s[i])
                break;
            assert_true(json_pda_step(&p, (uint8_t)s[i]));
        }
    }
    assert_true(states > 100);
    assert_true(reused > 20); /* consecutive bytes of strings */
    if (strstr(name, "gpt-2")) /* tokens spanning several syntax elements occurred */
        assert_true(multi > 0);
    if (strstr(name, "spm") || strstr(name, "stories"))
        assert_true(high_byte > 0);    /* byte-fallback tokens allowed inside strings */
    fprintf(stderr, "%s: %d usable tokens, %d trie nodes, %d states checked, %d reused\n",
            name, n_usable, t.n_nodes, states, reused);
    free(got);
    free(prev_mask);
    token_trie_free(&t);
}

static void test_mask_matches_brute_force(void **state)
{
    (void)state;
    static const char *const vocabs[] = {
        "models/stories260K/stories260K.gguf",
        "vocab/ggml-vocab-llama-spm.gguf",
        "vocab/ggml-vocab-gpt-2.gguf",
    };
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        ts_tokenizer *tok = NULL;
        ts_error err = {0};
        if (ts_tokenizer_load_gguf(tu_shared(vocabs[v]), &tok, &err) != TS_OK)
            fail_msg("%s: %s", vocabs[v], err.msg);
        check_mask(tok, vocabs[v]);
        ts_tokenizer_free(tok);
    }
}

/* ---- the engine */

static ts_request *submit_json(ts_engine *e, const char *prompt, int max_tokens,
                               float temperature, uint64_t seed, int32_t lift)
{
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, prompt, &n);
    ts_request_params p = eu_seeded(ids, n, max_tokens, temperature, seed);
    p.constraint = TS_CONSTRAINT_JSON_OBJECT;
    if (lift >= 0) {
        p.sampling.n_logit_bias = 1;
        p.sampling.logit_bias[0] = (ts_logit_bias){lift, 100.0f};
    }
    ts_request *r = eu_submit_params(e, &p);
    free(ids);
    return r;
}

/* The text so far is a prefix the automaton accepts; a stop means a complete object. */
static void check_json_result(const eu_result *res)
{
    assert_false(res->error);
    assert_int_equal(res->n_done, 1);
    const char *s = res->text[0];
    json_pda p;
    json_pda_init(&p);
    assert_true(feed(&p, s, strlen(s)));
    if (res->finish[0] == TS_FINISH_STOP) {
        assert_true(json_pda_accepted(&p));
        cJSON *j = cJSON_Parse(s);
        if (!cJSON_IsObject(j))
            fail_msg("not a JSON object: %s", s);
        cJSON_Delete(j);
    } else {
        assert_int_equal(res->finish[0], TS_FINISH_LENGTH);
        assert_false(json_pda_accepted(&p));
    }
}

/* A constraint that reaches its accepting state ends the sequence with stop: with '}'
 * lifted by logit_bias, "{" then "}" is the whole answer. Sampled answers at several
 * temperatures and seeds are JSON prefixes, and objects when they stop. */
static void test_engine_json_object(void **state)
{
    (void)state;
    ts_engine *e = eu_start(eu_model, NULL);
    int32_t close = -1;
    int V = ts_tokenizer_vocab_size(ts_model_get_tokenizer(eu_model));
    for (int32_t id = 0; id < V && close < 0; id++) {
        size_t len = 0;
        const char *b = ts_token_bytes(ts_model_get_tokenizer(eu_model), id, &len);
        if (len == 1 && b[0] == '}')
            close = id;
    }
    assert_true(close >= 0);
    eu_result res;
    ts_request *r = submit_json(e, "Once upon a time", 40, 0.0f, 1, close);
    eu_collect(r, &res);
    assert_string_equal(res.text[0], "{}");
    assert_int_equal(res.finish[0], TS_FINISH_STOP);
    assert_int_equal(res.tokens[0], 2);
    eu_result_free(&res);
    ts_request_release(r);

    static const float temps[] = {0.0f, 0.7f, 1.0f, 1.5f, 2.0f};
    int stops = 0;
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            r = submit_json(e, "Lily had a ball", 60, temps[t], seed, -1);
            eu_collect(r, &res);
            check_json_result(&res);
            stops += res.finish[0] == TS_FINISH_STOP;
            eu_result_free(&res);
            ts_request_release(r);
        }
    fprintf(stderr, "%d of 15 sampled answers closed their object in 60 tokens\n", stops);
    ts_engine_destroy(e);
}

/* Batch invariance: a constrained greedy answer is the same alone and among 15 others
 * (7 constrained on other prompts, 8 free). */
static void test_engine_batch_invariance(void **state)
{
    (void)state;
    ts_engine *e = eu_start(eu_model, NULL);
    eu_result alone;
    ts_request *r = submit_json(e, "The cat sat", 48, 0.0f, 7, -1);
    eu_collect(r, &alone);
    ts_request_release(r);
    check_json_result(&alone);

    static const char *const prompts[] = {"Tim ran", "A big dog", "She said", "Once there",
                                          "The sun", "Mom gave", "They played", "One day"};
    ts_request *others[15];
    for (int i = 0; i < 15; i++) {
        if (i % 2 == 0) {
            others[i] = submit_json(e, prompts[i % 8], 48, 0.0f, 7, -1);
        } else {
            int n = 0;
            int32_t *ids = eu_tokenize(eu_model, prompts[i % 8], &n);
            ts_request_params p = eu_greedy(ids, n, 48);
            ts_error err = {0};
            assert_int_equal(ts_engine_submit(e, &p, &others[i], &err), TS_OK);
            free(ids);
        }
        if (i == 7) /* the constrained request joins a running batch */
            r = submit_json(e, "The cat sat", 48, 0.0f, 7, -1);
    }
    eu_result among;
    eu_collect(r, &among);
    assert_string_equal(alone.text[0], among.text[0]);
    assert_int_equal(alone.finish[0], among.finish[0]);
    ts_request_release(r);
    for (int i = 0; i < 15; i++) {
        eu_result o;
        eu_collect(others[i], &o);
        if (i % 2 == 0)
            check_json_result(&o);
        eu_result_free(&o);
        ts_request_release(others[i]);
    }
    eu_result_free(&alone);
    eu_result_free(&among);
    ts_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_pda),
        cmocka_unit_test(test_mask_matches_brute_force),
        cmocka_unit_test(test_engine_json_object),
        cmocka_unit_test(test_engine_batch_invariance),
    };
    return cmocka_run_group_tests(tests, eu_setup_stories, eu_teardown_stories);
}
