/* test_server_guided.c: the constraint fields of llama.cpp and vLLM clients through a real
 * in-process server (stories260K, loopback, libcurl): grammar, json_schema, guided_regex,
 * guided_choice, guided_grammar, guided_json and structured_outputs on both routes give
 * answers their constraint accepts (checked by regexec, cJSON, membership), are not
 * listed as ignored, and every fault is a 400 naming its field. */
#include <regex.h>
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

typedef enum check_kind { CHECK_REGEX, CHECK_CHOICE, CHECK_JSON_N, CHECK_JSON_OBJECT } check_kind;

/* The answer text of a 200 (malloc'd) with its finish reason in finish (static copy). */
static char *answer(const char *route, const char *body, char *finish, size_t cap)
{
    sv_answer a;
    sv_post(sv_group.url, route, body, &a);
    if (a.status != 200)
        fail_msg("%s %s: %ld %s", route, body, a.status, a.body.s);
    char *ignored = sv_header(&a, "X-Tessera-Ignored-Fields");
    if (ignored)
        fail_msg("%s: fields listed as ignored: %s", body, ignored);
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(a.json, "choices"), 0);
    const cJSON *t = cJSON_GetObjectItem(c, "text");
    if (!t)
        t = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "content");
    const cJSON *f = cJSON_GetObjectItem(c, "finish_reason");
    assert_true(cJSON_IsString(t));
    assert_true(cJSON_IsString(f));
    snprintf(finish, cap, "%s", f->valuestring);
    char *s = strdup(t->valuestring);
    sv_answer_free(&a);
    return s;
}

static void expect_400(const char *route, const char *body, const char *param)
{
    sv_answer a;
    sv_post(sv_group.url, route, body, &a);
    if (a.status != 400)
        fail_msg("%s %s: want 400, got %ld %s", route, body, a.status, a.body.s);
    const cJSON *p = cJSON_GetObjectItem(cJSON_GetObjectItem(a.json, "error"), "param");
    if (!cJSON_IsString(p) || strncmp(p->valuestring, param, strlen(param)))
        fail_msg("%s %s: want param %s, got %s", route, body, param, a.body.s);
    sv_answer_free(&a);
}

static bool check(check_kind k, const char *text)
{
    switch (k) {
    case CHECK_REGEX: {
        regex_t re;
        assert_int_equal(regcomp(&re, "^[0-9]{3}-[a-z]{2}$", REG_EXTENDED | REG_NOSUB), 0);
        bool ok = regexec(&re, text, 0, NULL, 0) == 0;
        regfree(&re);
        return ok;
    }
    case CHECK_CHOICE:
        return !strcmp(text, "red") || !strcmp(text, "green") || !strcmp(text, "blue");
    default: {
        cJSON *j = cJSON_Parse(text);
        bool ok = cJSON_IsObject(j);
        if (k == CHECK_JSON_N)
            ok = ok && cJSON_IsNumber(cJSON_GetObjectItem(j, "n")) &&
                 cJSON_GetArraySize(j) == 1;
        cJSON_Delete(j);
        return ok;
    }
    }
}

#define SCHEMA "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}}, " \
               "\"required\": [\"n\"], \"additionalProperties\": false}"

static void test_fields_constrain(void **state)
{
    (void)state;
    static const struct { const char *field; check_kind k; } cases[] = {
        {"\"grammar\": \"root ::= [0-9]{3} \\\"-\\\" [a-z] [a-z]\"", CHECK_REGEX},
        {"\"guided_grammar\": \"root ::= (\\\"red\\\" | \\\"green\\\" | \\\"blue\\\")\"",
         CHECK_CHOICE},
        {"\"guided_regex\": \"\\\\d{3}-[a-z]{2}\"", CHECK_REGEX},
        {"\"guided_choice\": [\"red\", \"green\", \"blue\"]", CHECK_CHOICE},
        {"\"guided_json\": " SCHEMA, CHECK_JSON_N},
        {"\"json_schema\": " SCHEMA, CHECK_JSON_N},
        {"\"structured_outputs\": {\"regex\": \"[0-9]{3}-[a-z]{2}\"}", CHECK_REGEX},
        {"\"structured_outputs\": {\"choice\": [\"red\", \"green\", \"blue\"]}", CHECK_CHOICE},
        {"\"structured_outputs\": {\"grammar\": \"root ::= [0-9]{3} \\\"-\\\" [a-z]{2}\"}",
         CHECK_REGEX},
        {"\"structured_outputs\": {\"json\": " SCHEMA "}", CHECK_JSON_N},
        {"\"structured_outputs\": {\"json_object\": true}", CHECK_JSON_OBJECT},
    };
    char body[1024], finish[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int chat = 0; chat < 2; chat++) {
            if (chat)
                snprintf(body, sizeof body,
                         "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                         "\"max_tokens\": 80, \"temperature\": 1, \"seed\": %zu, %s}", i,
                         cases[i].field);
            else
                snprintf(body, sizeof body,
                         "{\"prompt\": \"Once upon a time\", \"max_tokens\": 80, "
                         "\"temperature\": 1, \"seed\": %zu, %s}", i, cases[i].field);
            char *text = answer(chat ? "/v1/chat/completions" : "/v1/completions", body,
                                finish, sizeof finish);
            if (!check(cases[i].k, text) || strcmp(finish, "stop"))
                fail_msg("%s: finish %s, \"%s\"", body, finish, text);
            free(text);
        }
}

static void test_fields_refused(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"\"grammar\": \"root ::= root \\\"a\\\"\"", "grammar"},
        {"\"grammar\": 3", "grammar"},
        {"\"guided_grammar\": \"root ::= (\"", "guided_grammar"},
        {"\"guided_regex\": \"(?=x)\"", "guided_regex"},
        {"\"guided_choice\": []", "guided_choice"},
        {"\"guided_choice\": [\"a\", 1]", "guided_choice"},
        {"\"guided_json\": \"{not json\"", "guided_json"},
        {"\"json_schema\": {\"type\": \"object\", \"properties\": {\"a\": "
         "{\"type\": \"strnig\"}}}", "json_schema"},
        {"\"structured_outputs\": {\"regex\": \"a\", \"choice\": [\"b\"]}",
         "structured_outputs"},
        {"\"structured_outputs\": {\"structural_tag\": {}}", "structured_outputs"},
        {"\"structured_outputs\": {}", "structured_outputs"},
        {"\"structured_outputs\": {\"json\": {\"type\": \"nope\"}}", "structured_outputs.json"},
        {"\"grammar\": \"root ::= \\\"a\\\"\", \"guided_regex\": \"a\"", "guided_regex"},
        {"\"response_format\": {\"type\": \"json_object\"}, \"guided_choice\": [\"a\"]",
         "guided_choice"},
    };
    char body[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(body, sizeof body, "{\"prompt\": \"Hi\", \"max_tokens\": 4, %s}", cases[i][0]);
        expect_400("/v1/completions", body, cases[i][1]);
        snprintf(body, sizeof body,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                 "\"max_tokens\": 4, %s}", cases[i][0]);
        expect_400("/v1/chat/completions", body, cases[i][1]);
    }
    /* An empty grammar is none, as llama.cpp reads it. */
    char finish[32];
    char *text = answer("/v1/completions", "{\"prompt\": \"Once\", \"max_tokens\": 3, "
                        "\"temperature\": 0, \"grammar\": \"\"}", finish, sizeof finish);
    assert_string_equal(finish, "length");
    free(text);
    /* A forced tool call already constrains the answer. */
    expect_400("/v1/chat/completions",
               "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 4, "
               "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], "
               "\"tool_choice\": \"required\", \"guided_choice\": [\"a\"]}", "tool_choice");
}

/* With max_tokens at the shortest answer, the grammar's answer is still complete. */
static void test_small_budget_completes(void **state)
{
    (void)state;
    char body[512], finish[32];
    for (int seed = 1; seed <= 4; seed++) {
        snprintf(body, sizeof body,
                 "{\"prompt\": \"Once\", \"max_tokens\": 6, \"temperature\": 1.5, "
                 "\"seed\": %d, \"guided_regex\": \"[0-9]{3}-[a-z]{2}\"}", seed);
        char *text = answer("/v1/completions", body, finish, sizeof finish);
        if (!check(CHECK_REGEX, text) || strcmp(finish, "stop"))
            fail_msg("seed %d: finish %s, \"%s\"", seed, finish, text);
        free(text);
        snprintf(body, sizeof body,
                 "{\"prompt\": \"Once\", \"max_tokens\": 3, \"temperature\": 1.5, "
                 "\"seed\": %d, \"response_format\": {\"type\": \"json_object\"}}", seed);
        text = answer("/v1/completions", body, finish, sizeof finish);
        if (!check(CHECK_JSON_OBJECT, text) || strcmp(finish, "stop"))
            fail_msg("json_object seed %d: finish %s, \"%s\"", seed, finish, text);
        free(text);
    }
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_constrain),
        cmocka_unit_test(test_fields_refused),
        cmocka_unit_test(test_small_budget_completes),
    };
    int rc = cmocka_run_group_tests(tests, sv_setup_group, sv_teardown_group);
    curl_global_cleanup();
    return rc;
}
