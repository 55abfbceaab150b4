/* test_server_structured.c: request fields through a real in-process server (stories260K,
 * loopback, libcurl): logit_bias moves greedy text, bad entries are 400 naming the field;
 * every field is used, a documented no-op, refused by name, or listed as ignored. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "engine_util.h"
#include "server_util.h"
#include "tessera/tokenizer.h"

/* The text of a 200 answer's first choice (malloc'd). */
static char *ok_text(const char *route, const char *body)
{
    sv_answer a;
    sv_post(sv_group.url, route, body, &a);
    if (a.status != 200)
        fail_msg("%s %s: %ld %s", route, body, a.status, a.body.s);
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(a.json, "choices"), 0);
    const cJSON *t = cJSON_GetObjectItem(c, "text");
    if (!t)
        t = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "content");
    assert_true(cJSON_IsString(t));
    char *s = strdup(t->valuestring);
    sv_answer_free(&a);
    return s;
}

/* A 400 naming param. */
static void expect_400(const char *route, const char *body, const char *param)
{
    sv_answer a;
    sv_post(sv_group.url, route, body, &a);
    if (a.status != 400)
        fail_msg("%s %s: want 400, got %ld %s", route, body, a.status, a.body.s);
    const cJSON *p = cJSON_GetObjectItem(cJSON_GetObjectItem(a.json, "error"), "param");
    if (!cJSON_IsString(p) || strcmp(p->valuestring, param))
        fail_msg("%s %s: want param %s, got %s", route, body, param, a.body.s);
    sv_answer_free(&a);
}

#define COMPLETION(extra)                                                                  \
    "{\"prompt\": \"Once upon a time\", \"max_tokens\": 12, \"temperature\": 0" extra "}"

/* The token ids of text (no BOS) through /tokenize. */
static int token_ids(const char *text, int32_t *ids, int cap)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "prompt", text);
    cJSON_AddBoolToObject(b, "add_special", false);
    char *body = cJSON_PrintUnformatted(b);
    sv_answer a;
    sv_post(sv_group.url, "/tokenize", body, &a);
    assert_int_equal(a.status, 200);
    const cJSON *t, *arr = cJSON_GetObjectItem(a.json, "tokens");
    int n = 0;
    cJSON_ArrayForEach(t, arr) {
        assert_true(n < cap);
        ids[n++] = (int32_t)t->valuedouble;
    }
    sv_answer_free(&a);
    free(body);
    cJSON_Delete(b);
    return n;
}

/* -100 on the greedy tokens changes the text, on both routes; +100 on a token puts it in
 * the text; a zero bias changes nothing. */
static void test_logit_bias_moves_greedy_text(void **state)
{
    (void)state;
    char *plain = ok_text("/v1/completions", COMPLETION(""));
    char *zero = ok_text("/v1/completions", COMPLETION(", \"logit_bias\": {\"300\": 0}"));
    assert_string_equal(plain, zero);
    int32_t ids[64];
    int n = token_ids(plain, ids, 64);
    assert_true(n > 0);
    char bias[64 * 16] = "";
    for (int i = 0; i < n; i++)
        snprintf(bias + strlen(bias), sizeof bias - strlen(bias), "%s\"%d\": -100",
                 i ? ", " : "", (int)ids[i]);
    char body[2048];
    snprintf(body, sizeof body, COMPLETION(", \"logit_bias\": {%s}"), bias);
    char *banned = ok_text("/v1/completions", body);
    assert_string_not_equal(plain, banned);

    /* +100 on a token whose text the greedy text does not hold: its text appears. */
    int32_t cand[32], lift = -1;
    int n_cand = token_ids("elephant zebra quixotic", cand, 32);
    sv_answer d = {0};
    const char *piece = NULL;
    for (int i = 0; i < n_cand && lift < 0; i++) {
        sv_answer_free(&d);
        snprintf(body, sizeof body, "{\"tokens\": [%d]}", (int)cand[i]);
        sv_post(sv_group.url, "/detokenize", body, &d);
        assert_int_equal(d.status, 200);
        const cJSON *pj = cJSON_GetObjectItem(d.json, "prompt");
        assert_true(cJSON_IsString(pj));
        piece = pj->valuestring;
        if (strlen(piece) >= 2 && !strchr(piece, ' ') && !strstr(plain, piece))
            lift = cand[i];
    }
    assert_true(lift >= 0);
    int32_t cat[1] = {lift};
    snprintf(body, sizeof body, COMPLETION(", \"logit_bias\": {\"%d\": 100}"), (int)cat[0]);
    char *lifted = ok_text("/v1/completions", body);
    assert_non_null(strstr(lifted, piece));
    snprintf(body, sizeof body,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 6, "
             "\"temperature\": 0, \"logit_bias\": {\"%d\": 100}}", (int)cat[0]);
    char *chat = ok_text("/v1/chat/completions", body);
    assert_non_null(strstr(chat, piece));
    sv_answer_free(&d);
    free(plain);
    free(zero);
    free(banned);
    free(lifted);
    free(chat);
}

static void test_logit_bias_refused(void **state)
{
    (void)state;
    expect_400("/v1/completions", COMPLETION(", \"logit_bias\": {\"5\": 100.5}"), "logit_bias");
    expect_400("/v1/completions", COMPLETION(", \"logit_bias\": {\"5\": -101}"), "logit_bias");
    expect_400("/v1/completions", COMPLETION(", \"logit_bias\": {\"512\": 1}"), "logit_bias");
    expect_400("/v1/completions", COMPLETION(", \"logit_bias\": {\"-1\": 1}"), "logit_bias");
    expect_400("/v1/completions", COMPLETION(", \"logit_bias\": {\"a\": 1}"), "logit_bias");
    expect_400("/v1/completions", COMPLETION(", \"logit_bias\": {\"5\": \"x\"}"), "logit_bias");
    expect_400("/v1/completions", COMPLETION(", \"logit_bias\": [1]"), "logit_bias");
    expect_400("/v1/chat/completions",
               "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
               "\"logit_bias\": {\"99999\": 1}}", "logit_bias");
}

/* Ignored fields are named in the header, streamed or not; known fields, no-ops included,
 * are not; a name cannot break the header line. */
static void test_unknown_fields_listed(void **state)
{
    (void)state;
    sv_answer a;
    sv_post(sv_group.url, "/v1/completions",
            COMPLETION(", \"user\": \"u1\", \"frobnicate\": 1, "
                       "\"cache_prompt\": [2], \"a\\r\\nX-Evil: 1\": 0"), &a);
    assert_int_equal(a.status, 200);
    char *h = sv_header(&a, "X-Tessera-Ignored-Fields");
    assert_non_null(h);
    assert_string_equal(h, "frobnicate, cache_prompt, a__X-Evil__1");
    assert_null(sv_header(&a, "X-Evil"));
    free(h);
    sv_answer_free(&a);

    sv_post(sv_group.url, "/v1/chat/completions",
            "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 3, "
            "\"user\": \"u\", \"metadata\": {\"k\": \"v\"}, \"store\": false, "
            "\"service_tier\": \"auto\", \"prompt_cache_key\": \"p\", \"modalities\": [\"text\"], "
            "\"response_format\": {\"type\": \"text\"}, \"tool_choice\": \"none\", "
            "\"parallel_tool_calls\": true, \"safety_identifier\": \"s\"}", &a);
    assert_int_equal(a.status, 200);
    assert_null(sv_header(&a, "X-Tessera-Ignored-Fields"));
    sv_answer_free(&a);

    sv_post(sv_group.url, "/v1/chat/completions",
            "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 3, "
            "\"stream\": true, \"prompt\": \"x\"}", &a);
    assert_int_equal(a.status, 200);
    h = sv_header(&a, "X-Tessera-Ignored-Fields");
    assert_non_null(h);
    assert_string_equal(h, "prompt"); /* a completions field on the chat route */
    free(h);
    sv_answer_free(&a);
}

/* Fields tessera cannot honour are 400 naming them; no-ops of the wrong type too. */
static void test_unsupported_fields_refused(void **state)
{
    (void)state;
    static const char *const chat[][2] = {
        {"\"audio\": {\"voice\": \"x\"}", "audio"},
        {"\"functions\": []", "functions"},
        {"\"function_call\": \"auto\"", "function_call"},
        {"\"prediction\": {}", "prediction"},
        {"\"web_search_options\": {}", "web_search_options"},
        {"\"store\": \"yes\"", "store"},
        {"\"metadata\": 3", "metadata"},
        {"\"modalities\": [\"text\", \"audio\"]", "modalities"},
        {"\"response_format\": {\"type\": \"xml\"}", "response_format"},
        {"\"response_format\": \"json\"", "response_format"},
        {"\"tool_choice\": \"sometimes\"", "tool_choice"},
        {"\"tool_choice\": \"required\"", "tool_choice"},
        {"\"tools\": {}", "tools"},
        {"\"parallel_tool_calls\": 1", "parallel_tool_calls"},
    };
    char body[512];
    for (size_t i = 0; i < sizeof chat / sizeof chat[0]; i++) {
        snprintf(body, sizeof body,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], %s}", chat[i][0]);
        expect_400("/v1/chat/completions", body, chat[i][1]);
    }
    expect_400("/v1/completions", COMPLETION(", \"best_of\": 3"), "best_of");
    expect_400("/v1/completions", COMPLETION(", \"suffix\": \"end\""), "suffix");
    expect_400("/v1/completions", COMPLETION(", \"echo\": true, \"n\": 2"), "echo");
    char *t = ok_text("/v1/completions", COMPLETION(", \"best_of\": 1, \"suffix\": \"\""));
    free(t);
}

/* GET /v1/models/{id}: the model object; an unknown id is 404. */
static void test_model_retrieve(void **state)
{
    (void)state;
    sv_answer a;
    sv_post(sv_group.url, "/v1/models/stories", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(cJSON_GetObjectItem(a.json, "id")->valuestring, "stories");
    assert_string_equal(cJSON_GetObjectItem(a.json, "object")->valuestring, "model");
    sv_answer_free(&a);
    sv_post(sv_group.url, "/v1/models/nope", NULL, &a);
    assert_int_equal(a.status, 404);
    sv_answer_free(&a);
    sv_post(sv_group.url, "/v1/models/stories", "{}", &a);
    assert_int_equal(a.status, 405);
    sv_answer_free(&a);
}

/* response_format json_object: with '}' lifted, the answer is "{}" with finish_reason
 * stop; sampled answers are JSON objects or, cut at max_tokens, their beginnings. */
static void test_json_object_format(void **state)
{
    (void)state;
    const ts_tokenizer *tok = ts_model_get_tokenizer(eu_model);
    int32_t close = -1;
    for (int32_t id = 0; id < ts_tokenizer_vocab_size(tok) && close < 0; id++) {
        size_t len = 0;
        const char *b = ts_token_bytes(tok, id, &len);
        if (len == 1 && b[0] == '}')
            close = id;
    }
    assert_true(close >= 0);
    char body[512];
    snprintf(body, sizeof body,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"JSON please\"}], "
             "\"max_tokens\": 30, \"response_format\": {\"type\": \"json_object\"}, "
             "\"n\": 2, \"logit_bias\": {\"%d\": 100}}", (int)close);
    sv_answer a;
    sv_post(sv_group.url, "/v1/chat/completions", body, &a);
    assert_int_equal(a.status, 200);
    for (int i = 0; i < 2; i++) { /* each completion of n has its own constraint state */
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(a.json, "choices"), i);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "content")
                                ->valuestring, "{}");
        assert_string_equal(cJSON_GetObjectItem(c, "finish_reason")->valuestring, "stop");
    }
    sv_answer_free(&a);
    for (int seed = 1; seed <= 3; seed++) {
        snprintf(body, sizeof body,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"JSON please\"}], "
                 "\"max_tokens\": 30, \"seed\": %d, \"response_format\": "
                 "{\"type\": \"json_object\"}}", seed);
        char *text = ok_text("/v1/chat/completions", body);
        assert_true(text[0] == '{');
        free(text);
    }
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logit_bias_moves_greedy_text),
        cmocka_unit_test(test_logit_bias_refused),
        cmocka_unit_test(test_unknown_fields_listed),
        cmocka_unit_test(test_unsupported_fields_refused),
        cmocka_unit_test(test_model_retrieve),
        cmocka_unit_test(test_json_object_format),
    };
    int rc = cmocka_run_group_tests(tests, sv_setup_group, sv_teardown_group);
    curl_global_cleanup();
    return rc;
}
