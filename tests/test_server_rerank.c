/* test_server_rerank.c: POST /v1/rerank: the request's shapes and their errors
 * (rerank_parse), the score and the order; the engine's scoring request against the
 * reference forward pass's "yes" and "no" logits; the route on a tiny qwen3 reranker (rank
 * pooling) served in process: results sorted by score, top_n, return_documents, usage,
 * the aliases, the context limit, and a model that is no reranker (unless --rerank). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "engine_util.h"
#include "gguf/gguf.h"
#include "model/forward_ref.h"
#include "model/synth.h"
#include "server/rerank.h"
#include "server_util.h"
#include "tokenizer/vocab.h"
#include "util.h"

/* The tokens renamed "yes" and "no" in the tiny vocabulary (stories260K's has neither). */
enum { YES_ID = 510, NO_ID = 511, CONTEXT = 1024 };

static ts_model *reranker, *plain;
static ts_engine *engine, *plain_engine;
static sv_served served, plain_served;

/* The tiny qwen3 model with pooling p, its vocabulary holding "yes" and "no". */
static ts_model *make_model(ts_pooling p, const char *name)
{
    ts_model_config c;
    assert_true(model_synth_shape(&c, "qwen3-4b"));
    model_synth_shrink(&c);
    c.context_len = CONTEXT; /* the prompt's fixed turns take ~250 of the tiny vocabulary */
    c.pooling = p;
    tokenizer_vocab v;
    tu_stories_vocab(&v);
    /* no space before the first piece of a text: the chat's markup and its messages are
     * tokenized apart, and a prefix would make that differ from the text tokenized whole */
    v.add_space_prefix = false;
    const char *names[2] = {"yes", "no"};
    int ids[2] = {YES_ID, NO_ID};
    for (int k = 0; k < 2; k++) {
        vocab_token *t = &v.tokens[ids[k]];
        free(t->text);
        t->text = strdup(names[k]);
        t->len = (uint32_t)strlen(names[k]);
        t->score = 0.0f;
        t->type = VOCAB_TOKEN_USER_DEFINED;
    }
    ts_model *m = tu_synth_model(&c, "F32", &v, name);
    vocab_clear(&v);
    return m;
}

static int setup(void **state)
{
    (void)state;
    reranker = make_model(TS_POOLING_RANK, "rerank.gguf");
    plain = make_model(TS_POOLING_NONE, "rerank-plain.gguf");
    engine = eu_start(reranker, NULL);
    plain_engine = eu_start(plain, NULL);
    ts_server_options so;
    ts_server_options_default(&so);
    so.chat_template = "chatml";
    ts_error err = {0};
    if (!sv_serve(&served, engine, &so, &err) || !sv_serve(&plain_served, plain_engine, &so, &err))
        fail_msg("serve: %s", err.msg);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sv_stop(&served);
    sv_stop(&plain_served);
    ts_engine_destroy(engine);
    ts_engine_destroy(plain_engine);
    ts_model_free(reranker);
    ts_model_free(plain);
    return 0;
}

/* ---- parsing, score and order, no model */

static void expect_parse_error(const char *body, const char *param)
{
    rerank_request r;
    oai_error e;
    if (rerank_parse(body, strlen(body), &r, &e) == TS_OK)
        fail_msg("accepted: %s", body);
    assert_int_equal(e.http_status, 400);
    if (param)
        assert_string_equal(e.param, param);
    assert_null(r.documents);
    assert_null(r.query);
}

static void test_parse(void **state)
{
    (void)state;
    expect_parse_error("[1]", NULL);
    expect_parse_error("{\"documents\": [\"a\"]}", "query");
    expect_parse_error("{\"query\": \"\", \"documents\": [\"a\"]}", "query");
    expect_parse_error("{\"query\": 3, \"documents\": [\"a\"]}", "query");
    expect_parse_error("{\"query\": \"q\"}", "documents");
    expect_parse_error("{\"query\": \"q\", \"documents\": []}", "documents");
    expect_parse_error("{\"query\": \"q\", \"documents\": \"a\"}", "documents");
    expect_parse_error("{\"query\": \"q\", \"documents\": [\"a\", 7]}", "documents[1]");
    expect_parse_error("{\"query\": \"q\", \"documents\": [{\"txt\": \"a\"}]}", "documents[0]");
    expect_parse_error("{\"query\": \"q\", \"documents\": [\"a\"], \"top_n\": -1}", "top_n");
    expect_parse_error("{\"query\": \"q\", \"documents\": [\"a\"], \"top_n\": 1.5}", "top_n");
    expect_parse_error("{\"query\": \"q\", \"documents\": [\"a\"], \"return_documents\": 1}",
                       "return_documents");
    expect_parse_error("{\"query\": \"q\", \"documents\": [\"a\"], \"model\": 1}", "model");

    rerank_request r;
    oai_error e;
    const char *body = "{\"model\": \"m\", \"query\": \"q\", \"documents\": [\"a\", {\"text\": "
                       "\"b\"}, \"\"], \"top_n\": 2, \"return_documents\": true}";
    assert_int_equal(rerank_parse(body, strlen(body), &r, &e), TS_OK);
    assert_string_equal(r.model, "m");
    assert_string_equal(r.query, "q");
    assert_string_equal(r.instruction, RERANK_DEFAULT_INSTRUCTION);
    assert_int_equal(r.n_documents, 3);
    assert_string_equal(r.documents[1], "b");
    assert_string_equal(r.documents[2], "");
    assert_int_equal(r.top_n, 2);
    assert_true(r.return_documents);
    rerank_request_clear(&r);
    body = "{\"query\": \"q\", \"documents\": [\"a\", \"b\"], \"top_n\": 9, \"instruction\": \"I\"}";
    assert_int_equal(rerank_parse(body, strlen(body), &r, &e), TS_OK);
    assert_int_equal(r.top_n, 2);
    assert_false(r.return_documents);
    assert_string_equal(r.instruction, "I");
    rerank_request_clear(&r);
}

static void test_score_and_order(void **state)
{
    (void)state;
    assert_float_equal(rerank_score(0.0, 0.0), 0.5, 1e-12);
    assert_float_equal(rerank_score(1.0, 0.0), 1.0 / (1.0 + exp(-1.0)), 1e-12);
    assert_float_equal(rerank_score(-3.0, 2.0), 1.0 / (1.0 + exp(5.0)), 1e-12);
    assert_float_equal(rerank_score(1000.0, -1000.0), 1.0, 1e-12);
    assert_float_equal(rerank_score(-1000.0, 1000.0), 0.0, 1e-12);
    const double scores[5] = {0.2, 0.9, 0.2, 0.5, 0.95};
    size_t order[5];
    rerank_order(scores, 5, order);
    const size_t want[5] = {4, 1, 3, 0, 2}; /* ties keep the documents' order */
    for (int i = 0; i < 5; i++)
        assert_int_equal(order[i], want[i]);
    char *u = rerank_user_turn("I", "Q", "D");
    assert_string_equal(u, "<Instruct>: I\n<Query>: Q\n<Document>: D");
    free(u);
}

/* ---- the engine's scoring request against the reference forward pass */

/* P(yes) of the softmax over the two logits at prompt's last position, by forward_ref. */
static double reference_score(const int32_t *prompt, int n)
{
    ref_forward f;
    ts_error err = {0};
    if (ref_forward_init(&f, reranker, n, &err) != TS_OK)
        fail_msg("ref: %s", err.msg);
    const float *logits = NULL;
    for (int i = 0; i < n; i++)
        logits = ref_forward_token(&f, prompt[i], i);
    double yes = logits[YES_ID], no = logits[NO_ID];
    ref_forward_free(&f);
    return 1.0 / (1.0 + exp(no - yes));
}

static double engine_score(const int32_t *prompt, int n)
{
    ts_request_params p;
    rerank_params(&p, prompt, (size_t)n, YES_ID, NO_ID);
    ts_request *req = eu_submit_params(engine, &p);
    ts_event ev = {0};
    double score = -1.0;
    int tokens = 0;
    while (ts_request_next_event(req, &ev, 5000) == TS_OK) {
        if (ev.kind == TS_EVENT_TOKEN) {
            tokens++;
            assert_true(rerank_event_score(&ev, YES_ID, NO_ID, &score));
            assert_true(ev.token == YES_ID || ev.token == NO_ID);
        }
        assert_int_not_equal(ev.kind, TS_EVENT_ERROR);
        ts_event_clear(&ev);
    }
    ts_request_release(req);
    assert_int_equal(tokens, 1);
    return score;
}

static void test_engine_score_is_softmax_of_logits(void **state)
{
    (void)state;
    const char *texts[3] = {"Once upon a time there was a cat.", "The dog ran to the park",
                            "Lily had a big red ball and she liked it"};
    double seen[3];
    for (int t = 0; t < 3; t++) {
        int n = 0;
        int32_t *ids = eu_tokenize(reranker, texts[t], &n);
        double want = reference_score(ids, n), got = engine_score(ids, n);
        assert_true(got > 0.0 && got < 1.0);
        if (fabs(got - want) > 2e-4)
            fail_msg("%s: engine %.6f, reference %.6f", texts[t], got, want);
        seen[t] = got;
        free(ids);
    }
    /* the scores depend on the prompt: a constant would pass the comparison too */
    assert_true(fabs(seen[0] - seen[1]) > 1e-6 || fabs(seen[1] - seen[2]) > 1e-6);
}

/* ---- the route */

static const char *const docs[4] = {"The cat sat on the mat.", "A dog ran in the park.",
                                    "Lily ate a big red apple.", "Tom and Sue went home."};

#define RERANK_BODY(extra)                                                                   \
    "{\"query\": \"Where did the dog run?\", \"documents\": [\"The cat sat on the mat.\", " \
    "{\"text\": \"A dog ran in the park.\"}, \"Lily ate a big red apple.\", \"Tom and Sue " \
    "went home.\"]" extra "}"

/* The results of an answer (status 200 checked): index and score of each, in order. */
static int read_results(const sv_answer *a, int *index, double *score, bool with_docs)
{
    if (a->status != 200)
        fail_msg("%ld: %s", a->status, a->body.s);
    const cJSON *results = cJSON_GetObjectItem(a->json, "results");
    assert_true(cJSON_IsArray(results));
    int n = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, results)
    {
        index[n] = cJSON_GetObjectItem(r, "index")->valueint;
        score[n] = cJSON_GetObjectItem(r, "relevance_score")->valuedouble;
        assert_true(index[n] >= 0 && index[n] < 4);
        assert_true(score[n] > 0.0 && score[n] < 1.0);
        if (n > 0)
            assert_true(score[n - 1] >= score[n]);
        const cJSON *doc = cJSON_GetObjectItem(r, "document");
        if (with_docs)
            assert_string_equal(cJSON_GetObjectItem(doc, "text")->valuestring, docs[index[n]]);
        else
            assert_null(doc);
        n++;
    }
    const cJSON *usage = cJSON_GetObjectItem(a->json, "usage");
    int prompt = cJSON_GetObjectItem(usage, "prompt_tokens")->valueint;
    assert_true(prompt > 4 * 20);
    assert_int_equal(cJSON_GetObjectItem(usage, "total_tokens")->valueint, prompt);
    return n;
}

/* The prompt the route builds for docs[d], made here from the server's own rendering of
 * the chat (/apply-template) and the think block, as ids (malloc'd, *n of them). */
static int32_t *pair_prompt(int d, const char *query, size_t *n)
{
    char *user = rerank_user_turn(RERANK_DEFAULT_INSTRUCTION, query, docs[d]);
    cJSON *root = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(root, "messages");
    cJSON *sys = cJSON_CreateObject(), *usr = cJSON_CreateObject();
    cJSON_AddStringToObject(sys, "role", "system");
    cJSON_AddStringToObject(sys, "content", RERANK_SYSTEM);
    cJSON_AddStringToObject(usr, "role", "user");
    cJSON_AddStringToObject(usr, "content", user);
    cJSON_AddItemToArray(msgs, sys);
    cJSON_AddItemToArray(msgs, usr);
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    free(user);
    sv_answer a;
    sv_post(served.url, "/apply-template", body, &a);
    free(body);
    assert_int_equal(a.status, 200);
    const char *prompt = cJSON_GetObjectItem(a.json, "prompt")->valuestring;
    size_t len = strlen(prompt) + 32;
    char *text = malloc(len);
    snprintf(text, len, "%s<think>\n\n</think>\n\n", prompt);
    sv_answer_free(&a);
    ts_tokenize_opts o = {.add_special = true, .parse_special = true};
    int32_t *ids = NULL;
    assert_int_equal(ts_tokenize_alloc(ts_model_get_tokenizer(reranker), text, strlen(text), &o,
                                       &ids, n),
                     TS_OK);
    free(text);
    return ids;
}

static void test_route_order_top_n_documents(void **state)
{
    (void)state;
    sv_answer a;
    int index[4], top_index[4];
    double score[4], top_score[4];
    sv_post(served.url, "/v1/rerank", RERANK_BODY(""), &a);
    assert_int_equal(read_results(&a, index, score, false), 4);
    assert_string_equal(cJSON_GetObjectItem(a.json, "object")->valuestring, "list");
    sv_answer_free(&a);
    bool all[4] = {false};
    for (int i = 0; i < 4; i++)
        all[index[i]] = true;
    for (int i = 0; i < 4; i++)
        assert_true(all[i]);
    assert_true(score[0] - score[3] > 1e-6); /* the documents score apart */
    for (int k = 0; k < 4; k += 3) { /* the best and the worst: the model's own P(yes) */
        size_t n = 0;
        int32_t *ids = pair_prompt(index[k], "Where did the dog run?", &n);
        double want = reference_score(ids, (int)n);
        free(ids);
        if (fabs(score[k] - want) > 2e-4)
            fail_msg("documents[%d]: route %.6f, reference %.6f", index[k], score[k], want);
    }

    sv_post(served.url, "/rerank", RERANK_BODY(", \"top_n\": 2, \"return_documents\": true"),
            &a);
    assert_int_equal(read_results(&a, top_index, top_score, true), 2);
    sv_answer_free(&a);
    for (int i = 0; i < 2; i++) { /* the same best two, the same scores */
        assert_int_equal(top_index[i], index[i]);
        assert_float_equal(top_score[i], score[i], 1e-6);
    }
    sv_post(served.url, "/v1/reranking", RERANK_BODY(", \"instruction\": \"Find animals\""), &a);
    assert_int_equal(read_results(&a, top_index, top_score, false), 4);
    sv_answer_free(&a);
    bool changed = false; /* the instruction is part of the prompt */
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++)
            if (top_index[k] == index[i] && fabs(top_score[k] - score[i]) > 1e-6)
                changed = true;
    assert_true(changed);
}

static void test_route_errors(void **state)
{
    (void)state;
    sv_expect(served.url, "/v1/rerank", "{\"documents\": [\"a\"]}", 400, "query", NULL);

    /* a document past the context names itself */
    size_t len = 4 * CONTEXT * 2;
    char *body = malloc(len + 100);
    int at = snprintf(body, len + 100, "{\"query\": \"q\", \"documents\": [\"a\", \"");
    for (size_t i = 0; i < len / 4; i++)
        at += snprintf(body + at, len + 100 - (size_t)at, "cat ");
    snprintf(body + at, len + 100 - (size_t)at, "\"]}");
    sv_expect(served.url, "/v1/rerank", body, 400, "documents[1]", "context_length_exceeded",
              NULL);
    free(body);

    /* a reranker serves no embeddings */
    sv_expect(served.url, "/v1/embeddings", "{\"input\": \"a cat\"}", 400, "model_not_embedding",
              NULL);

    /* a model whose GGUF names no rank pooling answers 400 ... */
    sv_expect(plain_served.url, "/v1/rerank", RERANK_BODY(""), 400, "model_not_reranker", NULL);
}

/* ... unless the server is told every model reranks (--rerank). */
static void test_rerank_option(void **state)
{
    (void)state;
    ts_engine *e = eu_start(plain, NULL);
    sv_served s;
    ts_server_options so;
    ts_server_options_default(&so);
    so.chat_template = "chatml";
    so.rerank = true;
    ts_error err = {0};
    if (!sv_serve(&s, e, &so, &err))
        fail_msg("serve: %s", err.msg);
    sv_answer a;
    int index[4];
    double score[4];
    sv_post(s.url, "/v1/rerank", RERANK_BODY(", \"top_n\": 3"), &a);
    assert_int_equal(read_results(&a, index, score, false), 3);
    sv_answer_free(&a);
    sv_stop(&s);
    ts_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_score_and_order),
        cmocka_unit_test(test_engine_score_is_softmax_of_logits),
        cmocka_unit_test(test_route_order_top_n_documents),
        cmocka_unit_test(test_route_errors),
        cmocka_unit_test(test_rerank_option),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
