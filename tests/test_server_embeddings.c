/* test_server_embeddings.c: POST /v1/embeddings: the request's shapes and their errors
 * (embed_parse), base64, and the route on a tiny qwen3 embedding model (last-token
 * pooling, EOS after each text) served in process: every input form, usage, base64 equal to the floats,
 * dimensions, the context limit and truncate, a model that does not pool. */
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
#include "server/embeddings.h"
#include "server_util.h"
#include "tokenizer/vocab.h"
#include "util.h"

enum { DIM = 64 };

static ts_model *model;
static ts_engine *engine;
static sv_served served;

static int setup(void **state)
{
    (void)state;
    ts_model_config c;
    assert_true(model_synth_shape(&c, "qwen3-4b"));
    model_synth_shrink(&c);
    c.pooling = TS_POOLING_LAST;
    tokenizer_vocab v;
    ts_error err = {0};
    tu_stories_vocab(&v);
    v.add_eos = true; /* inputs end with EOS, as Qwen3-Embedding's */
    model = tu_synth_model(&c, "F32", &v, "server-embed.gguf");
    vocab_clear(&v);
    engine = eu_start(model, NULL);
    ts_server_options so;
    ts_server_options_default(&so);
    if (!sv_serve(&served, engine, &so, &err))
        fail_msg("serve: %s", err.msg);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sv_stop(&served);
    ts_engine_destroy(engine);
    ts_model_free(model);
    return 0;
}

/* ---- parsing, no model */

static void expect_parse_error(const char *body, const char *param)
{
    embed_request r;
    oai_error e;
    if (embed_parse(body, strlen(body), &r, &e) == TS_OK)
        fail_msg("accepted: %s", body);
    assert_int_equal(e.http_status, 400);
    assert_string_equal(e.param, param);
    assert_null(r.inputs);
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_parse_error("{}", "input");
    expect_parse_error("{\"input\": \"\"}", "input");
    expect_parse_error("{\"input\": []}", "input");
    expect_parse_error("{\"input\": 7}", "input");
    expect_parse_error("{\"input\": [\"a\", 3]}", "input[1]");
    expect_parse_error("{\"input\": [\"a\", []]}", "input[1]");
    expect_parse_error("{\"input\": [1, -2]}", "input");
    expect_parse_error("{\"input\": [[1], [2.5]]}", "input[1]");
    expect_parse_error("{\"input\": \"a\", \"encoding_format\": \"hex\"}", "encoding_format");
    expect_parse_error("{\"input\": \"a\", \"dimensions\": 0}", "dimensions");
    expect_parse_error("{\"input\": \"a\", \"truncate\": 1}", "truncate");
    expect_parse_error("{\"input\": \"a\", \"model\": 3}", "model");
    strbuf b = {0};
    strbuf_addf(&b, "{\"input\": [");
    for (int i = 0; i <= EMBED_MAX_INPUTS; i++)
        strbuf_addf(&b, i ? ",\"x\"" : "\"x\"");
    strbuf_addf(&b, "]}");
    expect_parse_error(b.s, "input");
    strbuf_free(&b);
}

static void test_parse_shapes(void **state)
{
    (void)state;
    embed_request r;
    oai_error e;
    const char *body = "{\"input\": [[1, 2, 3], \"two\"], \"encoding_format\": \"base64\", "
                       "\"dimensions\": 8, \"truncate\": true, \"model\": \"m\", \"user\": \"u\"}";
    assert_int_equal(embed_parse(body, strlen(body), &r, &e), TS_OK);
    assert_int_equal(r.n_inputs, 2);
    assert_int_equal(r.inputs[0].n_ids, 3);
    assert_int_equal(r.inputs[0].ids[2], 3);
    assert_string_equal(r.inputs[1].text, "two");
    assert_true(r.base64 && r.truncate);
    assert_int_equal(r.dimensions, 8);
    assert_string_equal(r.model, "m");
    embed_request_clear(&r);
    body = "{\"input\": [5, 6]}"; /* one input of token ids */
    assert_int_equal(embed_parse(body, strlen(body), &r, &e), TS_OK);
    assert_int_equal(r.n_inputs, 1);
    assert_int_equal(r.inputs[0].n_ids, 2);
    assert_false(r.base64);
    embed_request_clear(&r);
}

static void test_base64(void **state)
{
    (void)state;
    char out[16];
    assert_int_equal(embed_base64(out, "foobar", 6), 8);
    assert_string_equal(out, "Zm9vYmFy");
    embed_base64(out, "fooba", 5);
    assert_string_equal(out, "Zm9vYmE=");
    embed_base64(out, "f", 1);
    assert_string_equal(out, "Zg==");
    unsigned char bytes[4];
    float one = 1.0f;
    embed_float_bytes(bytes, &one, 1);
    assert_memory_equal(bytes, "\x00\x00\x80\x3f", 4);
}

/* ---- the route */

/* The embeddings of body: status 200, n items in order, each of dims floats (copied into
 * out, n * dims); returns usage.prompt_tokens. */
static int post_floats(const char *body, int n, int dims, float *out)
{
    sv_answer a;
    sv_post(served.url, "/v1/embeddings", body, &a);
    if (a.status != 200)
        fail_msg("%ld: %s", a.status, a.body.s);
    assert_string_equal(cJSON_GetObjectItem(a.json, "object")->valuestring, "list");
    assert_string_equal(cJSON_GetObjectItem(a.json, "model")->valuestring, "stories");
    const cJSON *data = cJSON_GetObjectItem(a.json, "data");
    assert_int_equal(cJSON_GetArraySize(data), n);
    for (int i = 0; i < n; i++) {
        const cJSON *d = cJSON_GetArrayItem(data, i);
        assert_string_equal(cJSON_GetObjectItem(d, "object")->valuestring, "embedding");
        assert_int_equal(cJSON_GetObjectItem(d, "index")->valueint, i);
        const cJSON *v = cJSON_GetObjectItem(d, "embedding");
        assert_int_equal(cJSON_GetArraySize(v), dims);
        double sq = 0;
        for (int k = 0; k < dims; k++) {
            out[i * dims + k] = (float)cJSON_GetArrayItem(v, k)->valuedouble;
            sq += (double)out[i * dims + k] * out[i * dims + k];
        }
        assert_true(fabs(sq - 1.0) < 1e-5);
    }
    const cJSON *usage = cJSON_GetObjectItem(a.json, "usage");
    int prompt = cJSON_GetObjectItem(usage, "prompt_tokens")->valueint;
    assert_int_equal(cJSON_GetObjectItem(usage, "total_tokens")->valueint, prompt);
    sv_answer_free(&a);
    return prompt;
}

static void test_input_forms(void **state)
{
    (void)state;
    static float a[2 * DIM], b[2 * DIM], c[DIM];
    /* "Hello world" is its ids with BOS and EOS: 2 strings vs 2 id arrays */
    const ts_tokenizer *tok = ts_model_get_tokenizer(model);
    assert_true(ts_tokenizer_add_eos(tok));
    int n = 0;
    int32_t *ids = eu_tokenize(model, "Hello world", &n);
    ids = realloc(ids, (size_t)(n + 1) * sizeof *ids);
    assert_non_null(ids);
    ids[n++] = ts_tokenizer_eos(tok);
    strbuf body = {0};
    strbuf_addf(&body, "{\"input\": [[");
    for (int i = 0; i < n; i++)
        strbuf_addf(&body, i ? ",%d" : "%d", ids[i]);
    strbuf_addf(&body, "], [1, 300, 301]]}");
    int tokens = post_floats("{\"input\": [\"Hello world\", \"one two\"]}", 2, DIM, a);
    assert_true(tokens > n);
    assert_int_equal(post_floats(body.s, 2, DIM, b), n + 3);
    assert_memory_equal(a, b, DIM * sizeof(float)); /* the same tokens, the same vector */
    assert_int_equal(post_floats("{\"input\": \"Hello world\"}", 1, DIM, c), n);
    assert_memory_equal(a, c, DIM * sizeof(float));
    assert_int_equal(post_floats("{\"input\": [1, 300, 301]}", 1, DIM, c), 3);
    assert_memory_equal(b + DIM, c, DIM * sizeof(float));
    strbuf_free(&body);
    free(ids);
}

/* Decodes base64 text (no whitespace) into out; returns the bytes. */
static size_t unbase64(const char *s, unsigned char *out)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (; *s && *s != '='; s++) {
        acc = acc << 6 | (unsigned)(strchr(A, *s) - A);
        if ((bits += 6) >= 8) {
            bits -= 8;
            out[n++] = (unsigned char)(acc >> bits);
        }
    }
    return n;
}

static void test_base64_and_dimensions(void **state)
{
    (void)state;
    static float full[DIM], part[16];
    post_floats("{\"input\": \"a cat sat\"}", 1, DIM, full);
    sv_answer a;
    sv_post(served.url, "/v1/embeddings", "{\"input\": \"a cat sat\", \"encoding_format\": \"base64\"}", &a);
    assert_int_equal(a.status, 200);
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(a.json, "data"), 0);
    const cJSON *v = cJSON_GetObjectItem(d, "embedding");
    assert_true(cJSON_IsString(v));
    unsigned char bytes[4 * DIM + 3];
    assert_int_equal(unbase64(v->valuestring, bytes), 4 * DIM);
    for (int k = 0; k < DIM; k++) {
        uint32_t u = (uint32_t)bytes[4 * k] | (uint32_t)bytes[4 * k + 1] << 8 |
                     (uint32_t)bytes[4 * k + 2] << 16 | (uint32_t)bytes[4 * k + 3] << 24;
        float f;
        memcpy(&f, &u, 4);
        assert_true(fabsf(f - full[k]) <= 1e-7f); /* the floats print to 9 digits: exact */
    }
    sv_answer_free(&a);

    post_floats("{\"input\": \"a cat sat\", \"dimensions\": 16}", 1, 16, part);
    double sq = 0;
    for (int k = 0; k < 16; k++)
        sq += (double)full[k] * full[k];
    for (int k = 0; k < 16; k++)
        assert_true(fabs(part[k] - full[k] / sqrt(sq)) < 1e-6);
    sv_expect(served.url, "/v1/embeddings", "{\"input\": \"a\", \"dimensions\": 65}", 400,
              "dimensions", NULL);
}

static void test_limits(void **state)
{
    (void)state;
    strbuf body = {0};
    strbuf_addf(&body, "{\"input\": [");
    for (int i = 0; i < 257; i++)
        strbuf_addf(&body, i ? ",%d" : "%d", 3 + i % 400);
    strbuf_addf(&body, "]");
    sv_answer a;
    char *plain = malloc(body.len + 2);
    assert_non_null(plain);
    memcpy(plain, body.s, body.len);
    memcpy(plain + body.len, "}", 2);
    sv_expect(served.url, "/v1/embeddings", plain, 400, "limit of 256 tokens",
              "context_length_exceeded", NULL);
    free(plain);
    strbuf_addf(&body, ", \"truncate\": true}");
    static float v[DIM];
    assert_int_equal(post_floats(body.s, 1, DIM, v), 256);
    strbuf_free(&body);

    sv_expect(served.url, "/v1/embeddings", "{\"input\": [3, 100000]}", 400, NULL);
    sv_expect(served.url, "/v1/embeddings", "{\"input\": \"x\", \"model\": \"nope\"}", 404, NULL);
    sv_post(served.url, "/v1/embeddings", "{\"input\": \"", &a);
    assert_int_equal(a.status, 400);
    assert_non_null(cJSON_GetObjectItem(a.json, "error"));
    sv_answer_free(&a);

    /* the route's answers and tokens are counted */
    sv_post(served.url, "/metrics", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body.s, "tessera_requests_total{route=\"embeddings\",status=\"200\"}"));
    assert_non_null(strstr(a.body.s, "tessera_requests_total{route=\"embeddings\",status=\"400\"}"));
    const char *pt = strstr(a.body.s, "\ntessera_prompt_tokens_total ");
    assert_non_null(pt);
    assert_true(atol(pt + strlen("\ntessera_prompt_tokens_total ")) >= 256);
    sv_answer_free(&a);
}

/* 300 inputs on an engine that queues 16 requests: answered in full and in order (the
 * route keeps a window of its inputs in the engine and reads as it goes). */
static void test_many_inputs_small_queue(void **state)
{
    (void)state;
    ts_engine_options eo;
    ts_engine_options_default(&eo);
    eo.max_queue = 16;
    ts_engine *e = eu_start(model, &eo);
    ts_server_options so;
    ts_server_options_default(&so);
    sv_served s;
    ts_error err = {0};
    if (!sv_serve(&s, e, &so, &err))
        fail_msg("serve: %s", err.msg);
    strbuf body = {0};
    strbuf_addf(&body, "{\"input\": [");
    for (int i = 0; i < 300; i++)
        strbuf_addf(&body, "%s\"%s\"", i ? "," : "", (const char *[]){"red", "green fox", "a blue sky"}[i % 3]);
    strbuf_addf(&body, "]}");
    sv_answer a;
    sv_post(s.url, "/v1/embeddings", body.s, &a);
    strbuf_free(&body);
    if (a.status != 200)
        fail_msg("%ld: %.300s", a.status, a.body.s);
    const cJSON *data = cJSON_GetObjectItem(a.json, "data");
    assert_int_equal(cJSON_GetArraySize(data), 300);
    for (int i = 0; i < 300; i++) {
        const cJSON *d = cJSON_GetArrayItem(data, i);
        assert_int_equal(cJSON_GetObjectItem(d, "index")->valueint, i);
        const cJSON *v = cJSON_GetObjectItem(d, "embedding");
        const cJSON *w = cJSON_GetObjectItem(cJSON_GetArrayItem(data, i % 3), "embedding");
        for (int k = 0; k < DIM; k++)
            assert_true(fabs(cJSON_GetArrayItem(v, k)->valuedouble -
                             cJSON_GetArrayItem(w, k)->valuedouble) < 1e-5);
    }
    const cJSON *v0 = cJSON_GetObjectItem(cJSON_GetArrayItem(data, 0), "embedding");
    const cJSON *v1 = cJSON_GetObjectItem(cJSON_GetArrayItem(data, 1), "embedding");
    assert_true(fabs(cJSON_GetArrayItem(v0, 0)->valuedouble - cJSON_GetArrayItem(v1, 0)->valuedouble) > 1e-6);
    sv_answer_free(&a);
    sv_stop(&s);
    ts_engine_destroy(e);
}

/* A generative model (no pooling) answers 400 naming the reason. */
static void test_not_embedding_model(void **state)
{
    (void)state;
    ts_model *stories = eu_load_stories();
    ts_engine *e = eu_start(stories, NULL);
    ts_server_options so;
    ts_server_options_default(&so);
    sv_served s;
    ts_error err = {0};
    if (!sv_serve(&s, e, &so, &err))
        fail_msg("serve: %s", err.msg);
    sv_expect(s.url, "/v1/embeddings", "{\"input\": \"hello\"}", 400, "model_not_embedding",
              "pooling_type", NULL);
    sv_stop(&s);
    ts_engine_destroy(e);
    ts_model_free(stories);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_shapes),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_input_forms),
        cmocka_unit_test(test_base64_and_dimensions),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_many_inputs_small_queue),
        cmocka_unit_test(test_not_embedding_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
