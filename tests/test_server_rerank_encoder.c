/* test_server_rerank_encoder.c: POST /v1/rerank on a classifier reranker (a bert file with
 * rank pooling and a classification head, bge-reranker's layout): tiny random-weight
 * models (model_synth_write) served in process, their scores against the llama.cpp
 * peer's /v1/rerank (tests/embed/rerank_ref.txt, `tests/embed/make_ref.py ... rerank`)
 * in F32 and Q8_0; the pair's input as llama-server lays it out; an encoder without a
 * head refused; the embedding encoder's /v1/embeddings at and over its context. */
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
#include "model/synth.h"
#include "server/rerank.h"
#include "server_util.h"
#include "tokenizer/vocab.h"
#include "ref_util.h"
#include "util.h"

/* make_ref.py's RERANKERS, RERANK_QUERY and RERANK_DOCUMENTS. */
enum { MODELS = 2, DOCS = 5 };
static const char *const names[MODELS] = {"rerank", "rerank-q8_0"};
static const char *const types[MODELS] = {"F32", "Q8_0"};
#define QUERY "Where did the dog run?"
static const char *const docs[DOCS] = {
    "The dog ran to the park.", "Lily ate a red apple.", "A cat slept on the mat.",
    "The dog ran home fast.", "Once upon a time there was a little girl named Lily."};
#define BODY                                                                             \
    "{\"query\": \"" QUERY "\", \"documents\": [\"The dog ran to the park.\", \"Lily ate a " \
    "red apple.\", \"A cat slept on the mat.\", \"The dog ran home fast.\", \"Once upon a "  \
    "time there was a little girl named Lily.\"]}"

static double ref_scores[MODELS][DOCS];
static ts_model *models[MODELS], *embedder;
static ts_engine *engines[MODELS], *embed_engine;
static sv_served served[MODELS], embed_served;

/* The tiny shape with pooling p and type, loaded (the file removed after). */
static ts_model *make_model(const char *shape, ts_pooling p, const char *type, const char *name)
{
    ts_model_config c;
    assert_true(model_synth_shape(&c, shape));
    model_synth_shrink(&c);
    c.pooling = p;
    c.cls_out = p == TS_POOLING_RANK;
    tokenizer_vocab v;
    tu_stories_vocab(&v);
    ts_model *m = tu_synth_model(&c, type, &v, name);
    vocab_clear(&v);
    return m;
}

static void read_refs(void)
{
    char *text = ref_read(TS_SOURCE_DIR "/tests/embed/rerank_ref.txt", NULL), *cursor = text;
    int p = -1, scores = 0;
    for (char *line; (line = ref_next_line(&cursor)) != NULL;) {
        if (!strncmp(line, "model ", 6)) {
            p = -1;
            for (int k = 0; k < MODELS; k++)
                if (!strcmp(line + 6, names[k]))
                    p = k;
            assert_true(p >= 0);
        } else if (!strncmp(line, "score ", 6)) {
            char *rest = NULL;
            long i = strtol(line + 6, &rest, 10);
            assert_true(p >= 0 && i >= 0 && i < DOCS);
            ref_scores[p][i] = strtod(rest, NULL);
            scores++;
        }
    }
    free(text);
    assert_int_equal(scores, MODELS * DOCS);
}

static int setup(void **state)
{
    (void)state;
    read_refs();
    ts_server_options so;
    ts_server_options_default(&so);
    ts_error err = {0};
    for (int i = 0; i < MODELS; i++) {
        char file[64];
        snprintf(file, sizeof file, "encoder-%s.gguf", names[i]);
        models[i] = make_model("bge-reranker-base", TS_POOLING_RANK, types[i], file);
        assert_int_equal(ts_model_get_config(models[i])->cls_out, 1);
        engines[i] = eu_start(models[i], NULL);
        if (!sv_serve(&served[i], engines[i], &so, &err))
            fail_msg("serve: %s", err.msg);
    }
    embedder = make_model("bge-small", TS_POOLING_CLS, "F32", "encoder-embed.gguf");
    embed_engine = eu_start(embedder, NULL);
    so.rerank = true; /* told to rerank, an encoder without a head still cannot */
    if (!sv_serve(&embed_served, embed_engine, &so, &err))
        fail_msg("serve: %s", err.msg);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < MODELS; i++) {
        sv_stop(&served[i]);
        ts_engine_destroy(engines[i]);
        ts_model_free(models[i]);
    }
    sv_stop(&embed_served);
    ts_engine_destroy(embed_engine);
    ts_model_free(embedder);
    return 0;
}

/* Every document's score within 2e-3 of the peer's in F32 (they agree to ~4e-4:
 * llama.cpp's GELU is a table of f16 values), 1e-2 in Q8_0 (both round the activations of
 * every matrix to int8, and a value a rounding step away now and then lands on another
 * integer: these tiny models' sharp weights carry that to ~1% of a score, as their
 * embeddings' cosine of 0.9999 says); results best first. */
static void test_scores_match_peer(void **state)
{
    (void)state;
    for (int p = 0; p < MODELS; p++) {
        double tolerance = strcmp(types[p], "F32") ? 1e-2 : 2e-3;
        sv_answer a;
        sv_post(served[p].url, "/v1/rerank", BODY, &a);
        if (a.status != 200)
            fail_msg("%ld: %s", a.status, a.body.s);
        const cJSON *results = cJSON_GetObjectItem(a.json, "results"), *r;
        assert_int_equal(cJSON_GetArraySize(results), DOCS);
        double prev = INFINITY;
        bool seen[DOCS] = {false};
        cJSON_ArrayForEach(r, results)
        {
            int i = cJSON_GetObjectItem(r, "index")->valueint;
            double score = cJSON_GetObjectItem(r, "relevance_score")->valuedouble;
            assert_true(i >= 0 && i < DOCS && !seen[i]);
            seen[i] = true;
            assert_true(score <= prev);
            prev = score;
            if (fabs(score - ref_scores[p][i]) > tolerance)
                fail_msg("%s, documents[%d]: %.6f, llama.cpp %.6f", names[p], i, score,
                         ref_scores[p][i]);
        }
        sv_answer_free(&a);
    }
    /* the reference's documents score apart, so the comparison sees each pair */
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < DOCS; i++) {
        lo = fmin(lo, ref_scores[0][i]);
        hi = fmax(hi, ref_scores[0][i]);
    }
    assert_true(hi - lo > 0.02);
}

/* The pair's input for a SentencePiece vocabulary (BOS, no EOS, no separator): BOS, the
 * query's tokens, the document's, each text tokenized on its own. */
static void test_pair_ids(void **state)
{
    (void)state;
    const ts_tokenizer *tok = ts_model_get_tokenizer(models[0]);
    int32_t *ids = NULL, *q = NULL, *d = NULL;
    size_t n = 0, nq = 0, nd = 0;
    ts_tokenize_opts o = {0};
    assert_int_equal(rerank_pair_ids(tok, QUERY, docs[1], &ids, &n), TS_OK);
    assert_int_equal(ts_tokenize_alloc(tok, QUERY, strlen(QUERY), &o, &q, &nq), TS_OK);
    assert_int_equal(ts_tokenize_alloc(tok, docs[1], strlen(docs[1]), &o, &d, &nd), TS_OK);
    assert_true(ts_tokenizer_add_bos(tok) && ts_tokenizer_sep(tok) < 0);
    assert_int_equal(n, 1 + nq + nd);
    assert_int_equal(ids[0], ts_tokenizer_bos(tok));
    assert_memory_equal(ids + 1, q, nq * sizeof *q);
    assert_memory_equal(ids + 1 + nq, d, nd * sizeof *d);
    free(ids);
    free(q);
    free(d);
}

/* An embedding encoder (no head) is no reranker even with --rerank; a document over the
 * context is a 400 naming it. */
static void test_refusals(void **state)
{
    (void)state;
    sv_answer a;
    sv_post(embed_served.url, "/v1/rerank", BODY, &a);
    assert_int_equal(a.status, 400);
    assert_non_null(strstr(a.body.s, "model_not_reranker"));
    sv_answer_free(&a);

    size_t len = 300 * 6 + 128;
    char *body = malloc(len);
    assert_non_null(body);
    int at = snprintf(body, len, "{\"query\": \"dog\", \"documents\": [\"a\", \"");
    for (int i = 0; i < 300; i++)
        at += snprintf(body + at, len - (size_t)at, "%s", "happy ");
    snprintf(body + at, len - (size_t)at, "\"]}");
    sv_post(served[0].url, "/v1/rerank", body, &a);
    free(body);
    assert_int_equal(a.status, 400);
    assert_non_null(strstr(a.body.s, "documents[1]"));
    sv_answer_free(&a);
}

/* The embedding encoder over HTTP: an input of its context (256 tokens) embeds, one over
 * it is a 400 naming the limit, a chat completion a 400. */
static void test_embeddings_route(void **state)
{
    (void)state;
    size_t len = 8 * 300 + 64;
    char *body = malloc(len);
    assert_non_null(body);
    for (int n = 256; n <= 257; n++) {
        int at = snprintf(body, len, "{\"input\": [");
        for (int i = 0; i < n; i++)
            at += snprintf(body + at, len - (size_t)at, "%s%d", i ? "," : "", 3 + i % 500);
        snprintf(body + at, len - (size_t)at, "]}");
        sv_answer a;
        sv_post(embed_served.url, "/v1/embeddings", body, &a);
        if (n == 256) {
            assert_int_equal(a.status, 200);
            const cJSON *data = cJSON_GetArrayItem(cJSON_GetObjectItem(a.json, "data"), 0);
            assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(data, "embedding")), 32);
        } else {
            assert_int_equal(a.status, 400);
            assert_non_null(strstr(a.body.s, "context_length_exceeded"));
            assert_non_null(strstr(a.body.s, "256"));
        }
        sv_answer_free(&a);
    }
    free(body);
    sv_answer a;
    sv_post(embed_served.url, "/v1/chat/completions",
            "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", &a);
    assert_int_equal(a.status, 400);
    assert_non_null(strstr(a.body.s, "encoder"));
    sv_answer_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scores_match_peer),
        cmocka_unit_test(test_pair_ids),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_embeddings_route),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
