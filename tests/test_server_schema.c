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
#include <strings.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "common/strbuf.h"
#include "engine_util.h"
#include "schema_check.h"
#include "tessera/server.h"

static ts_engine *g_engine;
static ts_server *g_server;
static char g_url[64];

static int setup(void **state)
{
    if (eu_setup_stories(state))
        return -1;
    ts_error err = {0};
    g_engine = eu_start(eu_model, NULL);
    ts_server_options so;
    ts_server_options_default(&so);
    so.port = 0;
    if (ts_server_create(&so, &g_server, &err) != TS_OK ||
        ts_server_add_model(g_server, "stories", g_engine, &err) != TS_OK ||
        ts_server_start(g_server, &err) != TS_OK) {
        fprintf(stderr, "server: %s\n", err.msg);
        return -1;
    }
    snprintf(g_url, sizeof g_url, "http://127.0.0.1:%d", ts_server_port(g_server));
    return 0;
}

static int teardown(void **state)
{
    ts_server_stop(g_server);
    ts_engine_destroy(g_engine);
    ts_server_destroy(g_server);
    return eu_teardown_stories(state);
}

typedef struct answer {
    long status;
    strbuf body;    /* NUL-terminated */
    strbuf headers; /* NUL-terminated, lower-cased names not guaranteed */
    cJSON *json;    /* the parsed body, or NULL */
} answer;

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *user)
{
    return strbuf_add(user, ptr, size * nmemb) ? size * nmemb : 0;
}

/* POSTs body (NULL: GET) to route; fails the test when no answer came. */
static void request(const char *route, const char *body, answer *a)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", g_url, route);
    *a = (answer){0};
    CURL *c = curl_easy_init();
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a->headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        fail_msg("%s: %s", route, curl_easy_strerror(rc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
    curl_easy_cleanup(c);
    strbuf_add(&a->body, "", 0);
    strbuf_add(&a->headers, "", 0);
    a->json = cJSON_Parse(a->body.s);
}

static void answer_free(answer *a)
{
    strbuf_free(&a->body);
    strbuf_free(&a->headers);
    cJSON_Delete(a->json);
}

/* The value of header name in a (malloc'd, without CRLF), or NULL when absent. */
static char *header(const answer *a, const char *name)
{
    size_t n = strlen(name);
    for (const char *l = a->headers.s; l && *l;) {
        const char *end = strstr(l, "\r\n");
        if (!end)
            break;
        if (!strncasecmp(l, name, n) && l[n] == ':') {
            const char *v = l + n + 1;
            while (*v == ' ')
                v++;
            return strndup(v, (size_t)(end - v));
        }
        l = end + 2;
    }
    return NULL;
}

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
static int check_choices(const answer *a, const cJSON *schema)
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
            answer a;
            request(route == 0 ? "/v1/chat/completions" : "/v1/completions", b, &a);
            stops += check_choices(&a, schema);
            char *ignored = header(&a, "X-Tessera-Ignored-Fields");
            assert_null(ignored); /* response_format is used on both routes */
            answer_free(&a);
            free(b);
        }
    assert_true(stops >= 8);
    /* No schema: any JSON value. */
    char *b = schema_body(true, NULL, ", \"seed\": 3");
    answer a;
    request("/v1/chat/completions", b, &a);
    check_choices(&a, NULL);
    answer_free(&a);
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
    answer a;
    request("/v1/chat/completions", b, &a);
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
    answer_free(&a);
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
         "\"string\", \"format\": \"email\"}}}", "response_format.json_schema.schema.format", "email"},
        {"{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"anyOf\": "
         "[{\"type\": \"string\", \"pattern\": \"(?!a)\"}]}}}",
         "response_format.json_schema.schema.anyOf[0].pattern", "lookaround"},
        {"{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": "
         "\"integer\", \"minimum\": 3, \"maximum\": 1}}}", "response_format.json_schema.schema",
         "no JSON value"},
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
            answer a;
            request(route ? "/v1/completions" : "/v1/chat/completions", body, &a);
            const cJSON *e = cJSON_GetObjectItem(a.json, "error");
            const cJSON *p = cJSON_GetObjectItem(e, "param"), *m = cJSON_GetObjectItem(e, "message");
            if (a.status != 400 || !cJSON_IsString(p) || strcmp(p->valuestring, cases[i].param) ||
                !cJSON_IsString(m) || !strstr(m->valuestring, cases[i].in_msg))
                fail_msg("case %zu route %d: %ld %s", i, route, a.status, a.body.s);
            answer_free(&a);
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
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
