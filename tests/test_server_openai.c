/* test_server_openai.c: request validation (every field, wrong types, ranges) and the
 * shapes of error, response and stream-chunk JSON. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "server/openai.h"
#include "server/utf8.h"

static ts_status parse(oai_kind kind, const char *body, oai_request *r, oai_error *e)
{
    return oai_parse_request(kind, body, strlen(body), r, e);
}

/* The body must be rejected with 400 naming param (NULL: no param). */
static void expect_reject(oai_kind kind, const char *body, const char *param)
{
    oai_request r;
    oai_error e;
    assert_int_equal(parse(kind, body, &r, &e), TS_ERR_INVALID_ARG);
    assert_int_equal(e.http_status, 400);
    assert_string_equal(e.type, "invalid_request_error");
    if (param) {
        assert_string_equal(e.param, param);
        assert_non_null(strstr(e.message, param));
    }
    assert_null(r.messages);
    assert_null(r.prompt);
}

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_chat_defaults(void **state)
{
    (void)state;
    oai_request r;
    oai_error e;
    assert_int_equal(parse(OAI_CHAT, "{" MSG "}", &r, &e), TS_OK);
    assert_int_equal(r.kind, OAI_CHAT);
    assert_null(r.model);
    assert_int_equal(r.n_messages, 1);
    assert_string_equal(r.messages[0].role, "user");
    assert_string_equal(r.messages[0].content, "hi");
    assert_int_equal(r.max_tokens, 0);
    assert_true(r.sampling.temperature == 1.0f && r.sampling.top_p == 1.0f &&
                r.sampling.repetition_penalty == 1.0f);
    assert_int_equal(r.sampling.top_k, 0);
    assert_int_equal(r.n, 1);
    assert_false(r.stream || r.sampling.logprobs || r.sampling.has_seed || r.include_usage);
    assert_int_equal(r.n_stop, 0);
    assert_true(r.speculative);
    oai_request_clear(&r);
}

static void test_chat_every_field(void **state)
{
    (void)state;
    const char *body =
        "{\"model\":\"m1\",\"messages\":[{\"role\":\"developer\",\"content\":\"sys\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null}],"
        "\"max_tokens\":5,\"max_completion_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,"
        "\"top_k\":40,\"min_p\":0.05,\"presence_penalty\":-1.5,\"frequency_penalty\":2,"
        "\"repetition_penalty\":1.1,\"seed\":-3,\"stop\":[\"x\",\"yy\"],\"n\":3,"
        "\"logprobs\":true,\"top_logprobs\":4,\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true},\"user\":\"u1\",\"ignore_eos\":true,"
        "\"speculative\":false,"
        "\"unknown_field\":{\"deep\":[1,2]},\"tools\":null}";
    oai_request r;
    oai_error e;
    assert_int_equal(parse(OAI_CHAT, body, &r, &e), TS_OK);
    assert_string_equal(r.model, "m1");
    assert_int_equal(r.n_messages, 3);
    assert_string_equal(r.messages[0].role, "system");
    assert_string_equal(r.messages[1].content, "ab");
    assert_string_equal(r.messages[2].content, "");
    assert_int_equal(r.max_tokens, 7);
    assert_float_equal(r.sampling.temperature, 0.5, 1e-6);
    assert_float_equal(r.sampling.top_p, 0.9, 1e-6);
    assert_int_equal(r.sampling.top_k, 40);
    assert_float_equal(r.sampling.min_p, 0.05, 1e-6);
    assert_float_equal(r.sampling.presence_penalty, -1.5, 1e-6);
    assert_float_equal(r.sampling.frequency_penalty, 2, 1e-6);
    assert_float_equal(r.sampling.repetition_penalty, 1.1, 1e-6);
    assert_true(r.sampling.has_seed);
    assert_true(r.sampling.seed == (uint64_t)(int64_t)-3);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[0], "x");
    assert_string_equal(r.stop[1], "yy");
    assert_int_equal(r.n, 3);
    assert_true(r.sampling.logprobs);
    assert_int_equal(r.sampling.top_logprobs, 4);
    assert_true(r.stream && r.include_usage && r.ignore_eos);
    assert_false(r.speculative);
    assert_string_equal(r.user, "u1");
    oai_request_clear(&r);
    assert_null(r.model);
}

static void test_chat_wrong_types(void **state)
{
    (void)state;
    static const struct { const char *body, *param; } cases[] = {
        {"{" MSG ",\"model\":3}", "model"},
        {"{" MSG ",\"max_tokens\":\"5\"}", "max_tokens"},
        {"{" MSG ",\"max_tokens\":1.5}", "max_tokens"},
        {"{" MSG ",\"max_completion_tokens\":true}", "max_completion_tokens"},
        {"{" MSG ",\"temperature\":\"hot\"}", "temperature"},
        {"{" MSG ",\"top_p\":[1]}", "top_p"},
        {"{" MSG ",\"top_k\":2.5}", "top_k"},
        {"{" MSG ",\"min_p\":{}}", "min_p"},
        {"{" MSG ",\"presence_penalty\":\"0\"}", "presence_penalty"},
        {"{" MSG ",\"frequency_penalty\":false}", "frequency_penalty"},
        {"{" MSG ",\"repetition_penalty\":\"1\"}", "repetition_penalty"},
        {"{" MSG ",\"seed\":0.5}", "seed"},
        {"{" MSG ",\"stop\":5}", "stop"},
        {"{" MSG ",\"stop\":[\"a\",3]}", "stop"},
        {"{" MSG ",\"n\":\"2\"}", "n"},
        {"{" MSG ",\"logprobs\":1}", "logprobs"},
        {"{" MSG ",\"logprobs\":true,\"top_logprobs\":\"2\"}", "top_logprobs"},
        {"{" MSG ",\"stream\":\"yes\"}", "stream"},
        {"{" MSG ",\"stream_options\":true}", "stream_options"},
        {"{" MSG ",\"stream_options\":{\"include_usage\":1}}", "stream_options.include_usage"},
        {"{" MSG ",\"user\":7}", "user"},
        {"{" MSG ",\"ignore_eos\":0}", "ignore_eos"},
        {"{" MSG ",\"speculative\":\"no\"}", "speculative"},
        {"{\"messages\":\"hi\"}", "messages"},
        {"{\"messages\":[3]}", "messages[0]"},
        {"{\"messages\":[{\"content\":\"x\"}]}", "messages[0].role"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"robot\",\"content\":\"y\"}]}",
         "messages[1].role"},
        {"{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":null}]}", "messages[0].content"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":7}]}", "messages[0].content"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
         "messages[0].content"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_reject(OAI_CHAT, cases[i].body, cases[i].param);
}

static void test_chat_ranges(void **state)
{
    (void)state;
    static const struct { const char *body, *param; } cases[] = {
        {"{\"messages\":[]}", "messages"},
        {"{}", "messages"},
        {"{\"messages\":null}", "messages"},
        {"{" MSG ",\"max_tokens\":0}", "max_tokens"},
        {"{" MSG ",\"max_tokens\":-4}", "max_tokens"},
        {"{" MSG ",\"temperature\":2.01}", "temperature"},
        {"{" MSG ",\"temperature\":-0.1}", "temperature"},
        {"{" MSG ",\"top_p\":0}", "top_p"},
        {"{" MSG ",\"top_p\":1.5}", "top_p"},
        {"{" MSG ",\"top_k\":-1}", "top_k"},
        {"{" MSG ",\"min_p\":1.2}", "min_p"},
        {"{" MSG ",\"presence_penalty\":-2.5}", "presence_penalty"},
        {"{" MSG ",\"frequency_penalty\":3}", "frequency_penalty"},
        {"{" MSG ",\"repetition_penalty\":0}", "repetition_penalty"},
        {"{" MSG ",\"n\":0}", "n"},
        {"{" MSG ",\"n\":17}", "n"},
        {"{" MSG ",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop"},
        {"{" MSG ",\"stop\":\"\"}", "stop"},
        {"{" MSG ",\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs"},
        {"{" MSG ",\"top_logprobs\":2}", "top_logprobs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_reject(OAI_CHAT, cases[i].body, cases[i].param);
    /* A stop string of 257 bytes is too long; 256 is fine. */
    char body[1024];
    char stop[258];
    memset(stop, 'a', 257);
    stop[257] = '\0';
    snprintf(body, sizeof body, "{" MSG ",\"stop\":\"%s\"}", stop);
    expect_reject(OAI_CHAT, body, "stop");
    stop[256] = '\0';
    snprintf(body, sizeof body, "{" MSG ",\"stop\":\"%s\"}", stop);
    oai_request r;
    oai_error e;
    assert_int_equal(parse(OAI_CHAT, body, &r, &e), TS_OK);
    assert_int_equal(r.n_stop, 1);
    assert_int_equal(strlen(r.stop[0]), 256);
    oai_request_clear(&r);
}

static void test_malformed_and_utf8(void **state)
{
    (void)state;
    expect_reject(OAI_CHAT, "{\"messages\": [", NULL);
    expect_reject(OAI_CHAT, "[1,2]", NULL);
    expect_reject(OAI_CHAT, "", NULL);
    expect_reject(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\"}]}",
                  "messages[0].content");
    expect_reject(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xed\xa0\x80\"}]}",
                  "messages[0].content");
    expect_reject(OAI_COMPLETION, "{\"prompt\":\"\xc0\xaf\"}", "prompt");
    expect_reject(OAI_CHAT, "{" MSG ",\"stop\":\"\xfe\"}", "stop");
    oai_request r;
    oai_error e;
    assert_int_equal(parse(OAI_CHAT, "{\"messages\": [", &r, &e), TS_ERR_INVALID_ARG);
    assert_string_equal(e.code, "invalid_json");
    /* Escaped non-ASCII is decoded into UTF-8. */
    assert_int_equal(parse(OAI_COMPLETION, "{\"prompt\":\"caf\\u00e9 \xe2\x82\xac\"}", &r, &e), TS_OK);
    assert_string_equal(r.prompt, "caf\xc3\xa9 \xe2\x82\xac");
    oai_request_clear(&r);
}

static void test_completion_prompt_forms(void **state)
{
    (void)state;
    oai_request r;
    oai_error e;
    assert_int_equal(parse(OAI_COMPLETION, "{\"prompt\":\"Once\"}", &r, &e), TS_OK);
    assert_string_equal(r.prompt, "Once");
    assert_false(r.sampling.logprobs);
    oai_request_clear(&r);
    assert_int_equal(parse(OAI_COMPLETION, "{\"prompt\":[\"Upon\"],\"logprobs\":0}", &r, &e), TS_OK);
    assert_string_equal(r.prompt, "Upon");
    assert_true(r.sampling.logprobs);
    assert_int_equal(r.sampling.top_logprobs, 0);
    oai_request_clear(&r);
    assert_int_equal(parse(OAI_COMPLETION, "{\"prompt\":[1,2,3],\"logprobs\":3}", &r, &e), TS_OK);
    assert_null(r.prompt);
    assert_int_equal(r.n_prompt_tokens, 3);
    assert_int_equal(r.prompt_tokens[2], 3);
    assert_int_equal(r.sampling.top_logprobs, 3);
    oai_request_clear(&r);
    assert_int_equal(parse(OAI_COMPLETION, "{\"prompt\":[[7,8]],\"stop\":\"\\n\"}", &r, &e), TS_OK);
    assert_int_equal(r.n_prompt_tokens, 2);
    assert_int_equal(r.prompt_tokens[0], 7);
    assert_string_equal(r.stop[0], "\n");
    oai_request_clear(&r);
    expect_reject(OAI_COMPLETION, "{}", "prompt");
    expect_reject(OAI_COMPLETION, "{\"prompt\":5}", "prompt");
    expect_reject(OAI_COMPLETION, "{\"prompt\":[]}", "prompt");
    expect_reject(OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "prompt");
    expect_reject(OAI_COMPLETION, "{\"prompt\":[1,-2]}", "prompt");
    expect_reject(OAI_COMPLETION, "{\"prompt\":[1,\"x\"]}", "prompt");
    expect_reject(OAI_COMPLETION, "{\"prompt\":[{}]}", "prompt");
    expect_reject(OAI_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":true}", "logprobs");
    expect_reject(OAI_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":21}", "logprobs");
    expect_reject(OAI_COMPLETION, "{\"prompt\":\"a\",\"echo\":true,\"n\":3}", "echo");
    expect_reject(OAI_COMPLETION, "{\"prompt\":\"a\",\"max_tokens\":0}", "max_tokens");
}

static void test_tokenize_bodies(void **state)
{
    (void)state;
    oai_tokenize_request t;
    oai_error e;
    const char *b1 = "{\"prompt\":\"hi\"}";
    assert_int_equal(oai_parse_tokenize(b1, strlen(b1), &t, &e), TS_OK);
    assert_int_equal(t.n_parts, 1);
    assert_string_equal(t.parts[0].text, "hi");
    assert_true(t.add_special);
    assert_true(t.parse_special); /* spelled-out special tokens count, as in a prompt */
    assert_false(t.text_field_named_text);
    oai_tokenize_request_clear(&t);
    const char *b2 = "{\"model\":\"m\",\"text\":\"yo\",\"add_special\":false,"
                     "\"parse_special\":false}";
    assert_int_equal(oai_parse_tokenize(b2, strlen(b2), &t, &e), TS_OK);
    assert_string_equal(t.model, "m");
    assert_true(t.text_field_named_text);
    assert_false(t.add_special);
    assert_false(t.parse_special);
    oai_tokenize_request_clear(&t);
    const char *b3 = "{\"add_special\":1,\"prompt\":\"x\"}";
    assert_int_equal(oai_parse_tokenize(b3, strlen(b3), &t, &e), TS_ERR_INVALID_ARG);
    assert_string_equal(e.param, "add_special");
    const char *b4 = "{\"parse_special\":\"no\",\"prompt\":\"x\"}";
    assert_int_equal(oai_parse_tokenize(b4, strlen(b4), &t, &e), TS_ERR_INVALID_ARG);
    assert_string_equal(e.param, "parse_special");
    assert_int_equal(oai_parse_tokenize("{}", 2, &t, &e), TS_ERR_INVALID_ARG);
    assert_string_equal(e.param, "prompt");
    /* llama.cpp's content: a string, or strings and ids mixed, in order; no BOS unless asked */
    const char *b5 = "{\"content\":[\"a b\",7,\"c\"]}";
    assert_int_equal(oai_parse_tokenize(b5, strlen(b5), &t, &e), TS_OK);
    assert_false(t.add_special);
    assert_int_equal(t.n_parts, 3);
    assert_string_equal(t.parts[0].text, "a b");
    assert_null(t.parts[1].text);
    assert_int_equal(t.parts[1].id, 7);
    assert_string_equal(t.parts[2].text, "c");
    oai_tokenize_request_clear(&t);
    const char *b6 = "{\"content\":[]}";
    assert_int_equal(oai_parse_tokenize(b6, strlen(b6), &t, &e), TS_OK);
    assert_int_equal(t.n_parts, 0);
    oai_tokenize_request_clear(&t);
    const char *bad[] = {"{\"content\":[1,-2]}", "{\"content\":[1.5]}",
                         "{\"content\":[[1]]}", "{\"content\":{}}", "{\"content\":[null]}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(oai_parse_tokenize(bad[i], strlen(bad[i]), &t, &e), TS_ERR_INVALID_ARG);
        assert_string_equal(e.param, "content");
        assert_int_equal(e.http_status, 400);
    }

    oai_detokenize_request d;
    const char *d1 = "{\"tokens\":[1,5,9]}";
    assert_int_equal(oai_parse_detokenize(d1, strlen(d1), &d, &e), TS_OK);
    assert_int_equal(d.n_tokens, 3);
    assert_int_equal(d.tokens[1], 5);
    oai_detokenize_request_clear(&d);
    const char *d2 = "{\"tokens\":[]}";
    assert_int_equal(oai_parse_detokenize(d2, strlen(d2), &d, &e), TS_OK);
    assert_int_equal(d.n_tokens, 0);
    oai_detokenize_request_clear(&d);
    const char *d3 = "{\"tokens\":\"1 2\"}";
    assert_int_equal(oai_parse_detokenize(d3, strlen(d3), &d, &e), TS_ERR_INVALID_ARG);
    assert_string_equal(e.param, "tokens");
    assert_int_equal(oai_parse_detokenize("{}", 2, &d, &e), TS_ERR_INVALID_ARG);
    assert_string_equal(e.param, "tokens");
}

static cJSON *parse_json(char *s)
{
    assert_non_null(s);
    cJSON *j = cJSON_Parse(s);
    free(s);
    assert_non_null(j);
    return j;
}

static const cJSON *get(const cJSON *o, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    assert_non_null(f);
    return f;
}

static void test_error_json_shape(void **state)
{
    (void)state;
    oai_error e;
    assert_int_equal(oai_error_set(&e, 404, "model", "model_not_found", "no model '%s'", "x"),
                     TS_ERR_INVALID_ARG);
    cJSON *j = parse_json(oai_error_json(&e));
    const cJSON *err = get(j, "error");
    assert_string_equal(get(err, "message")->valuestring, "no model 'x'");
    assert_string_equal(get(err, "type")->valuestring, "invalid_request_error");
    assert_string_equal(get(err, "param")->valuestring, "model");
    assert_string_equal(get(err, "code")->valuestring, "model_not_found");
    cJSON_Delete(j);
    oai_error_set(&e, 401, NULL, NULL, "bad key");
    j = parse_json(oai_error_json(&e));
    err = get(j, "error");
    assert_string_equal(get(err, "type")->valuestring, "authentication_error");
    assert_true(cJSON_IsNull(get(err, "param")));
    assert_true(cJSON_IsNull(get(err, "code")));
    cJSON_Delete(j);
    oai_error_set(&e, 429, NULL, NULL, "busy");
    assert_string_equal(e.type, "rate_limit_error");
    oai_error_set(&e, 503, NULL, NULL, "down");
    assert_string_equal(e.type, "server_error");
}

static const oai_meta chat_meta = {OAI_CHAT, "chatcmpl-1", 1700000000, "stories"};
static const oai_meta cmpl_meta = {OAI_COMPLETION, "cmpl-1", 1700000000, "stories"};

static void test_response_json_chat(void **state)
{
    (void)state;
    oai_token_logprob lps[2] = {
        {.bytes = "He", .len = 2, .logprob = -0.5f, .n_top = 2,
         .top = {{"He", 2, -0.5f}, {"\xe2\x82", 2, -1.25f}}},
        {.bytes = "y", .len = 1, .logprob = -0.125f},
    };
    oai_choice ch[2] = {{"Hey", 3, "stop", lps, 2, NULL, 0}, {"Yo", 2, "length", NULL, 0, NULL, 0}};
    oai_usage u = {.prompt_tokens = 5, .completion_tokens = 3, .cached_tokens = 2};
    cJSON *j = parse_json(oai_response_json(&chat_meta, ch, 2, &u));
    assert_string_equal(get(j, "id")->valuestring, "chatcmpl-1");
    assert_string_equal(get(j, "object")->valuestring, "chat.completion");
    assert_int_equal((long long)get(j, "created")->valuedouble, 1700000000LL);
    assert_string_equal(get(j, "model")->valuestring, "stories");
    const cJSON *choices = get(j, "choices");
    assert_int_equal(cJSON_GetArraySize(choices), 2);
    const cJSON *c0 = cJSON_GetArrayItem(choices, 0), *c1 = cJSON_GetArrayItem(choices, 1);
    assert_int_equal(get(c0, "index")->valueint, 0);
    assert_string_equal(get(get(c0, "message"), "role")->valuestring, "assistant");
    assert_string_equal(get(get(c0, "message"), "content")->valuestring, "Hey");
    assert_string_equal(get(c0, "finish_reason")->valuestring, "stop");
    const cJSON *content = get(get(c0, "logprobs"), "content");
    assert_int_equal(cJSON_GetArraySize(content), 2);
    const cJSON *e0 = cJSON_GetArrayItem(content, 0);
    assert_string_equal(get(e0, "token")->valuestring, "He");
    assert_float_equal(get(e0, "logprob")->valuedouble, -0.5, 1e-9);
    assert_int_equal(cJSON_GetArraySize(get(e0, "bytes")), 2);
    assert_int_equal(cJSON_GetArrayItem(get(e0, "bytes"), 0)->valueint, 'H');
    const cJSON *tops = get(e0, "top_logprobs");
    assert_int_equal(cJSON_GetArraySize(tops), 2);
    /* A partial UTF-8 token is repaired in "token" and exact in "bytes". */
    const cJSON *t1 = cJSON_GetArrayItem(tops, 1);
    assert_string_equal(get(t1, "token")->valuestring, "\xef\xbf\xbd\xef\xbf\xbd");
    assert_int_equal(cJSON_GetArrayItem(get(t1, "bytes"), 0)->valueint, 0xe2);
    assert_int_equal(get(c1, "index")->valueint, 1);
    assert_true(cJSON_IsNull(get(c1, "logprobs")));
    assert_string_equal(get(c1, "finish_reason")->valuestring, "length");
    const cJSON *usage = get(j, "usage");
    assert_int_equal(get(usage, "prompt_tokens")->valueint, 5);
    assert_int_equal(get(usage, "completion_tokens")->valueint, 3);
    assert_int_equal(get(usage, "total_tokens")->valueint, 8);
    assert_int_equal(get(get(usage, "prompt_tokens_details"), "cached_tokens")->valueint, 2);
    assert_null(cJSON_GetObjectItem(j, "timings")); /* an untimed usage has none */
    cJSON_Delete(j);
}

/* The server's timings beside "usage": tokens after the first over first-to-last time. */
static void test_usage_timings(void **state)
{
    (void)state;
    oai_usage u = {4, 11, 0, .timed = true, .ttft_ms = 12.5, .generation_ms = 50};
    cJSON *j = parse_json(oai_usage_chunk_json(&chat_meta, &u));
    const cJSON *t = get(j, "timings");
    assert_float_equal(get(t, "time_to_first_token_ms")->valuedouble, 12.5, 1e-9);
    assert_float_equal(get(t, "generation_ms")->valuedouble, 50, 1e-9);
    assert_float_equal(get(t, "tokens_per_second")->valuedouble, 200, 1e-9);
    assert_int_equal(get(get(j, "usage"), "completion_tokens")->valueint, 11);
    cJSON_Delete(j);
    /* One token: no rate to give. */
    u = (oai_usage){4, 1, 0, .timed = true, .ttft_ms = 3, .generation_ms = 0};
    j = parse_json(oai_usage_chunk_json(&chat_meta, &u));
    assert_null(cJSON_GetObjectItem(get(j, "timings"), "tokens_per_second"));
    cJSON_Delete(j);
}

static void test_response_json_completion(void **state)
{
    (void)state;
    oai_token_logprob lps[2] = {
        {.bytes = " a", .len = 2, .logprob = -1.0f, .n_top = 1, .top = {{" a", 2, -1.0f}}},
        {.bytes = "b", .len = 1, .text_offset = 2, .logprob = -2.0f, .n_top = 1,
         .top = {{"b", 1, -2.0f}}},
    };
    oai_choice ch = {" ab", 3, "length", lps, 2, NULL, 0};
    oai_usage u = {.prompt_tokens = 1, .completion_tokens = 2, .cached_tokens = 0};
    cJSON *j = parse_json(oai_response_json(&cmpl_meta, &ch, 1, &u));
    assert_string_equal(get(j, "object")->valuestring, "text_completion");
    const cJSON *c0 = cJSON_GetArrayItem(get(j, "choices"), 0);
    assert_string_equal(get(c0, "text")->valuestring, " ab");
    const cJSON *lp = get(c0, "logprobs");
    assert_string_equal(cJSON_GetArrayItem(get(lp, "tokens"), 1)->valuestring, "b");
    assert_float_equal(cJSON_GetArrayItem(get(lp, "token_logprobs"), 1)->valuedouble, -2.0, 1e-9);
    assert_float_equal(get(cJSON_GetArrayItem(get(lp, "top_logprobs"), 0), " a")->valuedouble,
                       -1.0, 1e-9);
    assert_int_equal(cJSON_GetArrayItem(get(lp, "text_offset"), 1)->valueint, 2);
    cJSON_Delete(j);
}

static void test_chunk_json(void **state)
{
    (void)state;
    /* First chat chunk: role, empty content, finish_reason null. */
    cJSON *j = parse_json(oai_chunk_json(&chat_meta, 0, true, "", 0, NULL, NULL));
    assert_string_equal(get(j, "object")->valuestring, "chat.completion.chunk");
    const cJSON *c = cJSON_GetArrayItem(get(j, "choices"), 0);
    assert_string_equal(get(get(c, "delta"), "role")->valuestring, "assistant");
    assert_string_equal(get(get(c, "delta"), "content")->valuestring, "");
    assert_true(cJSON_IsNull(get(c, "finish_reason")));
    cJSON_Delete(j);
    /* A token chunk with logprobs. */
    oai_token_logprob lp = {.bytes = "x", .len = 1, .logprob = -0.25f};
    j = parse_json(oai_chunk_json(&chat_meta, 2, false, "x", 1, NULL, &lp));
    c = cJSON_GetArrayItem(get(j, "choices"), 0);
    assert_int_equal(get(c, "index")->valueint, 2);
    assert_null(cJSON_GetObjectItem(get(c, "delta"), "role"));
    assert_string_equal(get(get(c, "delta"), "content")->valuestring, "x");
    assert_int_equal(cJSON_GetArraySize(get(get(c, "logprobs"), "content")), 1);
    cJSON_Delete(j);
    /* The last chunk: empty delta and the finish reason. */
    j = parse_json(oai_chunk_json(&chat_meta, 0, false, NULL, 0, "stop", NULL));
    c = cJSON_GetArrayItem(get(j, "choices"), 0);
    assert_null(get(c, "delta")->child);
    assert_string_equal(get(c, "finish_reason")->valuestring, "stop");
    cJSON_Delete(j);
    /* Completions chunks carry "text". */
    lp.text_offset = 7;
    j = parse_json(oai_chunk_json(&cmpl_meta, 0, false, "ab", 2, NULL, &lp));
    c = cJSON_GetArrayItem(get(j, "choices"), 0);
    assert_string_equal(get(j, "object")->valuestring, "text_completion");
    assert_string_equal(get(c, "text")->valuestring, "ab");
    assert_int_equal(cJSON_GetArrayItem(get(get(c, "logprobs"), "text_offset"), 0)->valueint, 7);
    cJSON_Delete(j);
    /* Usage chunk: empty choices. */
    oai_usage u = {.prompt_tokens = 4, .completion_tokens = 6, .cached_tokens = 0};
    j = parse_json(oai_usage_chunk_json(&chat_meta, &u));
    assert_int_equal(cJSON_GetArraySize(get(j, "choices")), 0);
    assert_int_equal(get(get(j, "usage"), "total_tokens")->valueint, 10);
    cJSON_Delete(j);
}

/* -infinity (a token ruled out), NaN and anything under -9999 are written -9999, as
 * OpenAI does: JSON has no infinity, and cJSON would print null. */
static void test_logprobs_never_null(void **state)
{
    (void)state;
    oai_token_logprob lps[3] = {
        {.bytes = "a", .len = 1, .logprob = -INFINITY, .n_top = 2,
         .top = {{"b", 1, -0.5f}, {"a", 1, -INFINITY}}},
        {.bytes = "c", .len = 1, .logprob = NAN, .n_top = 1, .top = {{"c", 1, NAN}}},
        {.bytes = "d", .len = 1, .logprob = -1e30f, .n_top = 1, .top = {{"d", 1, -12345.0f}}},
    };
    for (int i = 0; i < 3; i++) {
        const oai_token_logprob *lp = &lps[i];
        cJSON *j = parse_json(oai_chunk_json(&chat_meta, 0, false, "x", 1, NULL, lp));
        const cJSON *e = cJSON_GetArrayItem(
            get(get(cJSON_GetArrayItem(get(j, "choices"), 0), "logprobs"), "content"), 0);
        assert_true(cJSON_IsNumber(get(e, "logprob")));
        assert_true(get(e, "logprob")->valuedouble == -9999);
        const cJSON *last = cJSON_GetArrayItem(get(e, "top_logprobs"), lp->n_top - 1);
        assert_true(cJSON_IsNumber(get(last, "logprob")));
        assert_true(get(last, "logprob")->valuedouble == -9999);
        cJSON_Delete(j);

        j = parse_json(oai_chunk_json(&cmpl_meta, 0, false, "x", 1, NULL, lp));
        const cJSON *l = get(cJSON_GetArrayItem(get(j, "choices"), 0), "logprobs");
        const cJSON *n = cJSON_GetArrayItem(get(l, "token_logprobs"), 0);
        assert_true(cJSON_IsNumber(n) && n->valuedouble == -9999);
        n = get(cJSON_GetArrayItem(get(l, "top_logprobs"), 0), lp->top[lp->n_top - 1].bytes);
        assert_true(cJSON_IsNumber(n) && n->valuedouble == -9999);
        cJSON_Delete(j);
    }
    /* The whole answer too, and a finite value is left alone. */
    oai_choice ch = {"acd", 3, "stop", lps, 3, NULL, 0};
    oai_usage u = {.prompt_tokens = 1, .completion_tokens = 3, .cached_tokens = 0};
    char *text = oai_response_json(&chat_meta, &ch, 1, &u);
    assert_non_null(text);
    assert_null(strstr(text, "\"logprob\":null"));
    cJSON *j = parse_json(text);
    const cJSON *e = cJSON_GetArrayItem(
        get(get(cJSON_GetArrayItem(get(j, "choices"), 0), "logprobs"), "content"), 0);
    assert_float_equal(get(cJSON_GetArrayItem(get(e, "top_logprobs"), 0), "logprob")->valuedouble,
                       -0.5, 1e-9);
    cJSON_Delete(j);
}

static void test_utf8(void **state)
{
    (void)state;
    assert_true(utf8_valid("", 0));
    assert_true(utf8_valid("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 10));
    assert_false(utf8_valid("\x80", 1));
    assert_false(utf8_valid("\xc3", 1));             /* truncated */
    assert_false(utf8_valid("\xc0\x80", 2));         /* overlong */
    assert_false(utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
    char *s = utf8_sanitize("a\xff" "b\xe2\x82", 5);
    assert_string_equal(s, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_defaults),
        cmocka_unit_test(test_chat_every_field),
        cmocka_unit_test(test_chat_wrong_types),
        cmocka_unit_test(test_chat_ranges),
        cmocka_unit_test(test_malformed_and_utf8),
        cmocka_unit_test(test_completion_prompt_forms),
        cmocka_unit_test(test_tokenize_bodies),
        cmocka_unit_test(test_error_json_shape),
        cmocka_unit_test(test_response_json_chat),
        cmocka_unit_test(test_usage_timings),
        cmocka_unit_test(test_response_json_completion),
        cmocka_unit_test(test_chunk_json),
        cmocka_unit_test(test_logprobs_never_null),
        cmocka_unit_test(test_utf8),
    };
    return cmocka_run_group_tests_name("server_openai", tests, NULL, NULL);
}
