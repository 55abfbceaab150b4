/* test_server_tool_calls.c: tool calls through a real in-process server on stories260K
 * (loopback, libcurl). tool_choice required and named give calls whose arguments are
 * valid against the tools' schemas for every seed and temperature, streamed or not, and
 * a stream's chunks put together equal the whole answer; the calls and their results go
 * back and the model answers; with auto, a llama3-family model's answer that is a call is
 * returned as tool_calls (the answer forced into that shape by response_format); the
 * mistral family's ids are the 9 characters its templates take back; bad tool fields are
 * 400s naming them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "engine_util.h"
#include "server_util.h"

static ts_engine *g_engine;

static sv_served g_plain, g_llama3, g_mistral; /* the model's own family (plain), and two
                                                * families forced, all on g_engine */

static void serve(sv_served *s, const char *family)
{
    ts_server_options so;
    ts_server_options_default(&so);
    so.chat_template = family;
    ts_error err = {0};
    if (!sv_serve(s, g_engine, &so, &err))
        fail_msg("server: %s", err.msg);
}

static int setup(void **state)
{
    if (eu_setup_stories(state))
        return -1;
    g_engine = eu_start(eu_model, NULL);
    serve(&g_plain, NULL);
    serve(&g_llama3, "llama3");
    serve(&g_mistral, "mistral");
    return 0;
}

static int teardown(void **state)
{
    ts_server_stop(g_plain.server);
    ts_server_stop(g_llama3.server);
    ts_server_stop(g_mistral.server);
    ts_engine_destroy(g_engine);
    ts_server_destroy(g_plain.server);
    ts_server_destroy(g_llama3.server);
    ts_server_destroy(g_mistral.server);
    return eu_teardown_stories(state);
}

/* An answer's first choice as a message: {"content", "tool_calls", "finish_reason"}, from
 * a whole answer or put together from a stream's chunks (whose shapes are checked). */
static cJSON *answer(const sv_served *s, const char *body, bool stream)
{
    cJSON *req = cJSON_Parse(body);
    assert_non_null(req);
    cJSON_AddBoolToObject(req, "stream", stream);
    char *text = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    sv_answer b;
    sv_post(s->url, "/v1/chat/completions", text, &b);
    if (b.status != 200)
        fail_msg("%s: %ld %s", text, b.status, b.body.s);
    free(text);
    cJSON *msg = NULL;
    if (!stream) {
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(b.json, "choices"), 0);
        msg = cJSON_Duplicate(cJSON_GetObjectItem(ch, "message"), true);
        cJSON_AddItemToObject(msg, "finish_reason",
                              cJSON_Duplicate(cJSON_GetObjectItem(ch, "finish_reason"), true));
        sv_answer_free(&b);
        return msg;
    }
    msg = cJSON_CreateObject();
    strbuf content = {0};
    bool any_content = false;
    cJSON *calls = cJSON_AddArrayToObject(msg, "tool_calls");
    for (char *ev = strstr(b.body.s, "data: "), *end; ev; ev = strstr(end + 2, "data: ")) {
        ev += 6;
        end = strstr(ev, "\n\n");
        assert_non_null(end);
        *end = '\0';
        if (!strcmp(ev, "[DONE]"))
            break;
        cJSON *chunk = cJSON_Parse(ev);
        assert_non_null(chunk);
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(chunk, "choices"), 0);
        const cJSON *delta = cJSON_GetObjectItem(ch, "delta"), *d;
        const cJSON *c = cJSON_GetObjectItem(delta, "content");
        if (cJSON_IsString(c) && c->valuestring[0]) {
            strbuf_add(&content, c->valuestring, strlen(c->valuestring));
            any_content = true;
        }
        cJSON_ArrayForEach(d, cJSON_GetObjectItem(delta, "tool_calls")) {
            int k = cJSON_GetObjectItem(d, "index")->valueint;
            const cJSON *fn = cJSON_GetObjectItem(d, "function");
            const cJSON *args = cJSON_GetObjectItem(fn, "arguments");
            assert_true(cJSON_IsString(args));
            cJSON *call = cJSON_GetArrayItem(calls, k);
            if (!call) { /* a call's first chunk: its id, type and name */
                assert_int_equal(k, cJSON_GetArraySize(calls));
                call = cJSON_Duplicate(d, true);
                cJSON_DeleteItemFromObject(call, "index");
                cJSON_AddItemToArray(calls, call);
                assert_true(cJSON_IsString(cJSON_GetObjectItem(call, "id")));
                assert_true(cJSON_IsString(cJSON_GetObjectItem(fn, "name")));
            } else {
                cJSON *have = cJSON_GetObjectItem(cJSON_GetObjectItem(call, "function"),
                                                  "arguments");
                char *joined = malloc(strlen(have->valuestring) + strlen(args->valuestring) + 1);
                strcpy(joined, have->valuestring);
                strcat(joined, args->valuestring);
                cJSON_SetValuestring(have, joined);
                free(joined);
            }
        }
        const cJSON *fr = cJSON_GetObjectItem(ch, "finish_reason");
        if (cJSON_IsString(fr))
            cJSON_AddStringToObject(msg, "finish_reason", fr->valuestring);
        cJSON_Delete(chunk);
    }
    strbuf_add(&content, "", 0);
    if (any_content)
        cJSON_AddStringToObject(msg, "content", content.s);
    else
        cJSON_AddNullToObject(msg, "content");
    if (!cJSON_GetArraySize(calls))
        cJSON_DeleteItemFromObject(msg, "tool_calls");
    strbuf_free(&content);
    sv_answer_free(&b);
    return msg;
}

#define TOOLS                                                                                   \
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "       \
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"enum\": "       \
    "[\"Paris\", \"London\", \"Tokyo\"]}, \"unit\": {\"type\": \"string\", \"enum\": "          \
    "[\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\", \"unit\"], "                     \
    "\"additionalProperties\": false}}}, {\"type\": \"function\", \"function\": {\"name\": "   \
    "\"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {\"zone\": "          \
    "{\"type\": \"string\", \"enum\": [\"UTC\", \"CET\"]}}, \"required\": [\"zone\"], "         \
    "\"additionalProperties\": false}}}, {\"type\": \"function\", \"function\": {\"name\": "    \
    "\"now\"}}]"
#define ASK "\"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris?\"}]"

/* Whether v is one of the strings of a NULL-terminated list. */
static bool one_of(const cJSON *v, const char *const *list)
{
    for (; cJSON_IsString(v) && *list; list++)
        if (!strcmp(v->valuestring, *list))
            return true;
    return false;
}

/* Whether args (JSON text) is valid against tool name's parameters in TOOLS. */
static bool valid_args(const char *name, const char *args)
{
    static const char *const cities[] = {"Paris", "London", "Tokyo", NULL};
    static const char *const units[] = {"celsius", "fahrenheit", NULL};
    static const char *const zones[] = {"UTC", "CET", NULL};
    cJSON *a = cJSON_Parse(args);
    bool ok = cJSON_IsObject(a);
    int n = cJSON_GetArraySize(a);
    if (!strcmp(name, "get_weather"))
        ok = ok && n == 2 && one_of(cJSON_GetObjectItem(a, "city"), cities) &&
             one_of(cJSON_GetObjectItem(a, "unit"), units);
    else if (!strcmp(name, "get_time"))
        ok = ok && n == 1 && one_of(cJSON_GetObjectItem(a, "zone"), zones);
    else
        ok = ok && !strcmp(name, "now") && n == 0;
    cJSON_Delete(a);
    return ok;
}

/* msg answered with calls, each valid, ids "call_" + 24 letters or digits, all distinct;
 * returns how many. */
static int expect_calls(const cJSON *msg, const char *body)
{
    char *text = cJSON_PrintUnformatted(msg);
    const cJSON *calls = cJSON_GetObjectItem(msg, "tool_calls"), *c;
    if (!cJSON_IsArray(calls) || !cJSON_GetArraySize(calls) ||
        strcmp(cJSON_GetObjectItem(msg, "finish_reason")->valuestring, "tool_calls") ||
        !cJSON_IsNull(cJSON_GetObjectItem(msg, "content")))
        fail_msg("%s:\n%s", body, text);
    int n = 0;
    cJSON_ArrayForEach(c, calls) {
        const char *id = cJSON_GetObjectItem(c, "id")->valuestring;
        const cJSON *fn = cJSON_GetObjectItem(c, "function");
        if (strlen(id) != 29 || strncmp(id, "call_", 5) ||
            strspn(id + 5, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") !=
                24 ||
            strcmp(cJSON_GetObjectItem(c, "type")->valuestring, "function") ||
            !valid_args(cJSON_GetObjectItem(fn, "name")->valuestring,
                        cJSON_GetObjectItem(fn, "arguments")->valuestring))
            fail_msg("%s: call %d is not valid:\n%s", body, n, text);
        for (const cJSON *d = calls->child; d != c; d = d->next)
            assert_string_not_equal(cJSON_GetObjectItem(d, "id")->valuestring, id);
        n++;
    }
    free(text);
    return n;
}

/* The calls without their ids (which differ from request to request). */
static char *calls_text(const cJSON *msg)
{
    cJSON *calls = cJSON_Duplicate(cJSON_GetObjectItem(msg, "tool_calls"), true), *c;
    cJSON_ArrayForEach(c, calls) cJSON_DeleteItemFromObject(c, "id");
    char *s = cJSON_PrintUnformatted(calls);
    cJSON_Delete(calls);
    return s;
}

/* required, for several seeds and temperatures: valid calls (the tiny model calls until
 * the list's bound, 8), and the stream gives the same ones; parallel_tool_calls false:
 * exactly one. max_tokens is left to its default, the rest of the context. */
static void test_required(void **state)
{
    (void)state;
    static const char *const temps[] = {"0", "1", "1.5"};
    for (int seed = 1; seed <= 4; seed++) {
        for (int t = 0; t < 3; t++) {
            char body[4096];
            snprintf(body, sizeof body,
                     "{" ASK ", \"tools\": " TOOLS ", \"tool_choice\": \"required\", "
                     "\"seed\": %d, \"temperature\": %s%s}",
                     seed, temps[t], t == 2 ? ", \"parallel_tool_calls\": false" : "");
            cJSON *whole = answer(&g_plain, body, false), *streamed = answer(&g_plain, body, true);
            int n = expect_calls(whole, body);
            assert_int_equal(expect_calls(streamed, body), n);
            if (t == 2)
                assert_int_equal(n, 1);
            char *a = calls_text(whole), *b = calls_text(streamed);
            assert_string_equal(a, b);
            free(a);
            free(b);
            cJSON_Delete(whole);
            cJSON_Delete(streamed);
        }
    }
}

/* A named function: one call of it, the one with no parameters too. */
static void test_named(void **state)
{
    (void)state;
    static const char *const names[] = {"get_time", "get_weather", "now"};
    for (int i = 0; i < 3; i++) {
        char body[4096];
        snprintf(body, sizeof body,
                 "{" ASK ", \"tools\": " TOOLS ", \"tool_choice\": {\"type\": \"function\", "
                 "\"function\": {\"name\": \"%s\"}}, \"max_tokens\": 200, \"seed\": %d}",
                 names[i], i);
        for (int stream = 0; stream < 2; stream++) {
            cJSON *msg = answer(&g_plain, body, stream);
            assert_int_equal(expect_calls(msg, body), 1);
            const cJSON *fn =
                cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(msg, "tool_calls"), 0),
                                    "function");
            assert_string_equal(cJSON_GetObjectItem(fn, "name")->valuestring, names[i]);
            cJSON_Delete(msg);
        }
    }
}

/* The calls and their results go back (arguments as JSON strings, content null); the
 * answer is text, streamed or not. */
static void test_round_trip(void **state)
{
    (void)state;
    const char *body = "{" ASK ", \"tools\": " TOOLS ", \"tool_choice\": \"required\", "
                       "\"seed\": 3}";
    cJSON *msg = answer(&g_plain, body, false);
    expect_calls(msg, body);
    cJSON *req = cJSON_Parse("{" ASK ", \"tools\": " TOOLS ", \"max_tokens\": 12, "
                             "\"temperature\": 0}");
    cJSON *msgs = cJSON_GetObjectItem(req, "messages"), *c;
    cJSON *asst = cJSON_Duplicate(msg, true);
    cJSON_DeleteItemFromObject(asst, "finish_reason");
    cJSON_AddItemToArray(msgs, asst);
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(msg, "tool_calls")) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "role", "tool");
        cJSON_AddStringToObject(t, "tool_call_id", cJSON_GetObjectItem(c, "id")->valuestring);
        cJSON_AddStringToObject(t, "content", "{\"temp_c\": 21}");
        cJSON_AddItemToArray(msgs, t);
    }
    char *round = cJSON_PrintUnformatted(req);
    cJSON *whole = answer(&g_plain, round, false), *streamed = answer(&g_plain, round, true);
    for (int i = 0; i < 2; i++) {
        const cJSON *m = i ? streamed : whole;
        assert_true(cJSON_IsString(cJSON_GetObjectItem(m, "content")));
        assert_null(cJSON_GetObjectItem(m, "tool_calls"));
        assert_string_not_equal(cJSON_GetObjectItem(m, "finish_reason")->valuestring,
                                "tool_calls");
    }
    assert_string_equal(cJSON_GetObjectItem(whole, "content")->valuestring,
                        cJSON_GetObjectItem(streamed, "content")->valuestring);
    free(round);
    cJSON_Delete(req);
    cJSON_Delete(msg);
    cJSON_Delete(whole);
    cJSON_Delete(streamed);
}

/* tool_choice auto on a llama3-family model: an answer that is a call in Llama 3.1's
 * syntax (forced here by response_format) comes back as tool_calls; one that is other
 * JSON stays content. */
static void test_auto_detects_llama3_calls(void **state)
{
    (void)state;
    const char *call =
        "{" ASK ", \"tools\": " TOOLS ", \"max_tokens\": 200, \"seed\": 5, \"response_format\": "
        "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"c\", \"schema\": {\"type\": "
        "\"object\", \"properties\": {\"name\": {\"const\": \"get_time\"}, \"parameters\": "
        "{\"type\": \"object\", \"properties\": {\"zone\": {\"enum\": [\"UTC\", \"CET\"]}}, "
        "\"required\": [\"zone\"], \"additionalProperties\": false}}, \"required\": [\"name\", "
        "\"parameters\"], \"additionalProperties\": false}}}}";
    for (int stream = 0; stream < 2; stream++) {
        cJSON *msg = answer(&g_llama3, call, stream);
        expect_calls(msg, call);
        cJSON_Delete(msg);
    }
    const char *other =
        "{" ASK ", \"tools\": " TOOLS ", \"max_tokens\": 200, \"seed\": 5, \"response_format\": "
        "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"c\", \"schema\": {\"type\": "
        "\"object\", \"properties\": {\"zone\": {\"enum\": [\"UTC\", \"CET\"]}}, \"required\": "
        "[\"zone\"], \"additionalProperties\": false}}}}";
    for (int stream = 0; stream < 2; stream++) {
        cJSON *msg = answer(&g_llama3, other, stream);
        assert_null(cJSON_GetObjectItem(msg, "tool_calls"));
        assert_string_equal(cJSON_GetObjectItem(msg, "finish_reason")->valuestring, "stop");
        cJSON *obj = cJSON_Parse(cJSON_GetObjectItem(msg, "content")->valuestring);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(obj, "zone")));
        cJSON_Delete(obj);
        cJSON_Delete(msg);
    }
}

/* The mistral family's ids are 9 letters or digits (its templates refuse others when the
 * calls come back), and such a round renders and answers. */
static void test_mistral_ids(void **state)
{
    (void)state;
    const char *body = "{" ASK ", \"tools\": " TOOLS ", \"tool_choice\": {\"type\": "
                       "\"function\", \"function\": {\"name\": \"get_time\"}}, \"seed\": 2}";
    cJSON *msg = answer(&g_mistral, body, false);
    const cJSON *call = cJSON_GetArrayItem(cJSON_GetObjectItem(msg, "tool_calls"), 0);
    assert_non_null(call);
    const char *id = cJSON_GetObjectItem(call, "id")->valuestring;
    assert_int_equal(strlen(id), 9);
    assert_int_equal(strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
                     9);
    char round[4096];
    char *fn = cJSON_PrintUnformatted(cJSON_GetObjectItem(call, "function"));
    snprintf(round, sizeof round,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Time?\"}, {\"role\": "
             "\"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"%s\", \"type\": "
             "\"function\", \"function\": %s}]}, {\"role\": \"tool\", \"tool_call_id\": "
             "\"%s\", \"content\": \"12:00\"}], \"tools\": " TOOLS ", \"max_tokens\": 5}",
             id, fn, id);
    cJSON *fin = answer(&g_mistral, round, false);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(fin, "content")));
    free(fn);
    cJSON_Delete(fin);
    cJSON_Delete(msg);
}

/* A 400 naming param. */
static void expect_400(const char *body, const char *param)
{
    sv_answer a;
    sv_post(g_plain.url, "/v1/chat/completions", body, &a);
    const cJSON *p = cJSON_GetObjectItem(cJSON_GetObjectItem(a.json, "error"), "param");
    if (a.status != 400 || !cJSON_IsString(p) || strcmp(p->valuestring, param))
        fail_msg("%s: want 400 naming %s, got %ld %s", body, param, a.status, a.body.s);
    sv_answer_free(&a);
}

static void test_refusals(void **state)
{
    (void)state;
    expect_400("{" ASK ", \"tools\": " TOOLS ", \"tool_choice\": {\"type\": \"function\", "
               "\"function\": {\"name\": \"nope\"}}}", "tool_choice");
    expect_400("{" ASK ", \"tool_choice\": \"required\"}", "tool_choice");
    expect_400("{" ASK ", \"tools\": " TOOLS ", \"tool_choice\": 5}", "tool_choice");
    expect_400("{" ASK ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
               "\"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"x\": "
               "{\"type\": \"array\", \"uniqueItems\": true}}}}}], \"tool_choice\": \"required\"}",
               "tools[0].function.parameters.properties.x.uniqueItems");
    expect_400("{" ASK ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
               "\"f g\"}}]}", "tools[0].function.name");
    expect_400("{\"messages\": [{\"role\": \"tool\", \"content\": \"1\"}]}",
               "messages[0].tool_call_id");
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_required),   cmocka_unit_test(test_named),
        cmocka_unit_test(test_round_trip), cmocka_unit_test(test_auto_detects_llama3_calls),
        cmocka_unit_test(test_mistral_ids), cmocka_unit_test(test_refusals),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
