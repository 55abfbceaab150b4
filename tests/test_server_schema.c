/* test_server_schema.c: response_format json_schema through a real in-process server
 * (stories260K, loopback, libcurl), on both routes: answers parse and validate against
 * the schema (schema_check.c's validator), streamed or not; schemas outside the subset and
 * malformed json_schema fields are 400s whose param points at the offending keyword. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "schema_check.h"
#include "server_util.h"

static const char *const mood_schema =
    "{\"type\": \"object\", \"properties\": {\"mood\": {\"enum\": [\"happy\", \"sad\"]}, "
    "\"n\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 99}, \"note\": {\"type\": "
    "\"string\", \"maxLength\": 8}}, \"required\": [\"mood\", \"n\"], "
    "\"additionalProperties\": false}";

/* The body of a request on route with response_format json_schema of schema (NULL: none)
 * and extra fields. */
static char *schema_body(bool chat, const char *schema, const char *extra)
{
    char *b = malloc(8192);
    snprintf(b, 8192,
             "{%s, \"max_tokens\": 128, \"response_format\": {\"type\": \"json_schema\", "
             "\"json_schema\": {\"name\": \"answer\", \"strict\": true%s%s}}%s}",
             chat ? "\"messages\": [{\"role\": \"user\", \"content\": \"How are you?\"}]"
                  : "\"prompt\": \"Tim felt\"",
             schema ? ", \"schema\": " : "", schema ? schema : "", extra);
    return b;
}

/* Each choice's text parses and validates when it stopped; returns how many stopped. */
static int check_choices(const sv_answer *a, const cJSON *schema)
{
    if (a->status != 200)
        fail_msg("%ld %s", a->status, a->body.s);
    int stops = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(a->json, "choices")) {
        const cJSON *t = cJSON_GetObjectItem(c, "text");
        if (!t)
            t = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "content");
        const char *finish = cJSON_GetObjectItem(c, "finish_reason")->valuestring;
        assert_true(cJSON_IsString(t));
        if (strcmp(finish, "stop"))
            continue;
        stops++;
        cJSON *v = cJSON_Parse(t->valuestring);
        char why[300];
        if (!v || (schema && !sc_validate(schema, v, why, sizeof why)))
            fail_msg("invalid answer %s: %s", t->valuestring, v ? why : "not JSON");
        cJSON_Delete(v);
    }
    return stops;
}

static void test_schema_answers(void **state)
{
    (void)state;
    sc_init();
    cJSON *schema = cJSON_Parse(mood_schema);
    int stops = 0;
    for (int route = 0; route < 2; route++)
        for (int seed = 1; seed <= 4; seed++) {
            char extra[96];
            snprintf(extra, sizeof extra, ", \"seed\": %d, \"temperature\": %s, \"n\": 2", seed,
                     seed == 1 ? "0" : seed == 2 ? "0.7" : seed == 3 ? "1.3" : "2");
            char *b = schema_body(route == 0, mood_schema, extra);
            sv_answer a;
            sv_post(sv_group.url, route == 0 ? "/v1/chat/completions" : "/v1/completions", b, &a);
            stops += check_choices(&a, schema);
            char *ignored = sv_header(&a, "X-Tessera-Ignored-Fields");
            assert_null(ignored); /* response_format is used on both routes */
            sv_answer_free(&a);
            free(b);
        }
    assert_true(stops >= 8);
    /* No schema: any JSON value. */
    char *b = schema_body(true, NULL, ", \"seed\": 3");
    sv_answer a;
    sv_post(sv_group.url, "/v1/chat/completions", b, &a);
    check_choices(&a, NULL);
    sv_answer_free(&a);
    free(b);
    cJSON_Delete(schema);
}

/* Streamed: the deltas put together are the same valid JSON, with finish_reason stop. */
static void test_schema_stream(void **state)
{
    (void)state;
    sc_init();
    cJSON *schema = cJSON_Parse(mood_schema);
    char *b = schema_body(true, mood_schema, ", \"seed\": 1, \"temperature\": 0, \"stream\": true");
    sv_answer a;
    sv_post(sv_group.url, "/v1/chat/completions", b, &a);
    assert_int_equal(a.status, 200);
    char text[4096] = "", finish[32] = "";
    for (const char *l = strstr(a.body.s, "data: "); l; l = strstr(l + 1, "data: ")) {
        cJSON *chunk = cJSON_Parse(l + 6);
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(chunk, "choices"), 0);
        const cJSON *d = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "delta"), "content");
        const cJSON *f = cJSON_GetObjectItem(c, "finish_reason");
        if (cJSON_IsString(d))
            strncat(text, d->valuestring, sizeof text - strlen(text) - 1);
        if (cJSON_IsString(f))
            snprintf(finish, sizeof finish, "%s", f->valuestring);
        cJSON_Delete(chunk);
    }
    assert_string_equal(finish, "stop");
    cJSON *v = cJSON_Parse(text);
    char why[300];
    if (!v || !sc_validate(schema, v, why, sizeof why))
        fail_msg("streamed %s: %s", text, v ? why : "not JSON");
    cJSON_Delete(v);
    sv_answer_free(&a);
    free(b);
    cJSON_Delete(schema);
}

/* Outside the subset, or malformed: 400, param pointing at the keyword, message naming it. */
static void test_schema_refused(void **state)
{
    (void)state;
    static const struct {
        const char *format, *param, *in_msg;
    } cases[] = {
        {"{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": "
         "\"object\", \"properties\": {\"tags\": {\"type\": \"array\", \"uniqueItems\": true}}}}}",
         "response_format.json_schema.schema.properties.tags.uniqueItems", "uniqueItems"},
        {"{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": "
         "\"string\", \"format\": \"idn-email\"}}}", "response_format.json_schema.schema.format", "idn-email"},
        {"{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"anyOf\": "
         "[{\"type\": \"string\", \"pattern\": \"(?!a)\"}]}}}",
         "response_format.json_schema.schema.anyOf[0].pattern", "lookaround"},
        {"{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": "
         "\"integer\", \"minimum\": 3, \"maximum\": 1}}}", "response_format.json_schema.schema",
         "no JSON value"},
        /* the bounds reach the compiler exactly: no number of 6 fraction digits is
         * 3.6999999999999997 (printed by cJSON as 3.7, which would be taken) */
        {"{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": "
         "\"number\", \"minimum\": 3.6999999999999997, \"maximum\": 3.6999999999999997}}}",
         "response_format.json_schema.schema", "no JSON value"},
        {"{\"type\": \"json_schema\"}", "response_format.json_schema", "object"},
        {"{\"type\": \"json_schema\", \"json_schema\": {\"name\": 3}}", "response_format.json_schema.name",
         "string"},
        {"{\"type\": \"json_schema\", \"json_schema\": {\"strict\": \"yes\"}}",
         "response_format.json_schema.strict", "boolean"},
        {"{\"type\": \"json_schema\", \"json_schema\": {\"schema\": \"x\"}}",
         "response_format.json_schema.schema", "JSON Schema"},
    };
    char body[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int route = 0; route < 2; route++) {
            snprintf(body, sizeof body, "{%s, \"response_format\": %s}",
                     route ? "\"prompt\": \"Hi\"" : "\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]",
                     cases[i].format);
            sv_answer a;
            sv_post(sv_group.url, route ? "/v1/completions" : "/v1/chat/completions", body, &a);
            const cJSON *e = cJSON_GetObjectItem(a.json, "error");
            const cJSON *p = cJSON_GetObjectItem(e, "param"), *m = cJSON_GetObjectItem(e, "message");
            if (a.status != 400 || !cJSON_IsString(p) || strcmp(p->valuestring, cases[i].param) ||
                !cJSON_IsString(m) || !strstr(m->valuestring, cases[i].in_msg))
                fail_msg("case %zu route %d: %ld %s", i, route, a.status, a.body.s);
            sv_answer_free(&a);
        }
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_answers),
        cmocka_unit_test(test_schema_stream),
        cmocka_unit_test(test_schema_refused),
    };
    int rc = cmocka_run_group_tests(tests, sv_setup_group, sv_teardown_group);
    curl_global_cleanup();
    return rc;
}
