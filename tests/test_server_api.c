/* test_server_api.c: the Responses and Messages APIs: each request shape becomes the chat
 * request it stands for, bad shapes get a 400 naming the API's own field, answers and
 * streams are written in each API's shape; and on a real server /v1/messages takes its key
 * from x-api-key and answers errors in Anthropic's shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "engine_util.h"
#include "server/api.h"
#include "server_util.h"
#include "util.h"

static ts_status parse(api_kind k, const char *body, oai_request *r, oai_error *e)
{
    return api_parse_request(k, body, strlen(body), r, e);
}

static void parse_ok(api_kind k, const char *body, oai_request *r)
{
    oai_error e = {0};
    if (parse(k, body, r, &e) != TS_OK)
        fail_msg("refused (%s): %s", e.param, e.message);
    assert_int_equal(r->kind, OAI_CHAT);
    assert_int_equal(r->n, 1);
}

/* The body must be refused with status (400, ...) naming param ("" for none) and the
 * message holding words. */
static void expect_refused(api_kind k, const char *body, const char *param, const char *words)
{
    oai_request r;
    oai_error e = {0};
    assert_int_equal(parse(k, body, &r, &e), TS_ERR_INVALID_ARG);
    assert_int_equal(e.http_status, 400);
    if (strcmp(e.param, param))
        fail_msg("param '%s', want '%s' (%s)", e.param, param, e.message);
    if (!strstr(e.message, words))
        fail_msg("message '%s' lacks '%s'", e.message, words);
    assert_null(r.messages);
    assert_null(r.chat_vars);
}

/* The chat variables' message i (a template reads these). */
static const cJSON *var_message(const oai_request *r, int i)
{
    const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItem(r->chat_vars, "messages"), i);
    assert_non_null(m);
    return m;
}

/* ---- Responses requests */

static void test_responses_text_input(void **state)
{
    (void)state;
    oai_request r;
    parse_ok(API_RESPONSES,
             "{\"model\":\"m\",\"input\":\"Hello\",\"instructions\":\"Be brief.\","
             "\"max_output_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,\"store\":false,"
             "\"metadata\":{\"a\":\"b\"},\"frobnicate\":1,\"stream\":true}",
             &r);
    assert_string_equal(r.model, "m");
    assert_int_equal(r.n_messages, 2);
    assert_string_equal(r.messages[0].role, "system");
    assert_string_equal(r.messages[0].content, "Be brief.");
    assert_string_equal(r.messages[1].role, "user");
    assert_string_equal(r.messages[1].content, "Hello");
    assert_int_equal(r.max_tokens, 7);
    assert_float_equal(r.sampling.temperature, 0.5f, 1e-6);
    assert_float_equal(r.sampling.top_p, 0.9f, 1e-6);
    assert_true(r.stream);
    assert_string_equal(r.ignored, "frobnicate"); /* metadata is a documented no-op */
    assert_int_equal(r.tools.n, 0);
    oai_request_clear(&r);
}

static void test_responses_items_and_tools(void **state)
{
    (void)state;
    oai_request r;
    parse_ok(API_RESPONSES,
             "{\"input\":["
             "{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Weather?\"}]},"
             "{\"type\":\"reasoning\",\"summary\":[]},"
             "{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"get_weather\","
             "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"},"
             "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"21 C\"},"
             "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
             "\"text\":\"It is 21 C.\"}]}],"
             "\"tools\":[{\"type\":\"function\",\"name\":\"get_weather\",\"description\":\"d\","
             "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
             "\"required\":[\"city\"]},\"strict\":true}],"
             "\"tool_choice\":{\"type\":\"function\",\"name\":\"get_weather\"},"
             "\"parallel_tool_calls\":false}",
             &r);
    assert_int_equal(r.n_messages, 4);
    assert_string_equal(r.messages[0].role, "user");
    assert_string_equal(r.messages[0].content, "Weather?");
    assert_string_equal(r.messages[1].role, "assistant");
    assert_string_equal(r.messages[2].role, "tool");
    assert_string_equal(r.messages[2].content, "21 C");
    assert_string_equal(r.messages[3].role, "assistant");
    assert_string_equal(r.messages[3].content, "It is 21 C.");
    const cJSON *call =
        cJSON_GetArrayItem(cJSON_GetObjectItem(var_message(&r, 1), "tool_calls"), 0);
    assert_string_equal(cJSON_GetObjectItem(call, "id")->valuestring, "call_1");
    const cJSON *fn = cJSON_GetObjectItem(call, "function");
    assert_string_equal(cJSON_GetObjectItem(fn, "name")->valuestring, "get_weather");
    assert_string_equal(cJSON_GetObjectItem(var_message(&r, 2), "tool_call_id")->valuestring,
                        "call_1");
    assert_int_equal(r.tools.n, 1);
    assert_int_equal(r.tools.choice, OAI_TOOL_CHOICE_NAMED);
    assert_int_equal(r.tools.named, 0);
    assert_false(r.tools.parallel);
    assert_non_null(r.tools.schema);
    oai_request_clear(&r);
}

static void test_responses_text_format(void **state)
{
    (void)state;
    oai_request r;
    parse_ok(API_RESPONSES,
             "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"n\","
             "\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}},"
             "\"strict\":true}}}",
             &r);
    assert_int_equal(r.format, OAI_FORMAT_JSON_SCHEMA);
    assert_non_null(r.schema);
    oai_request_clear(&r);
    parse_ok(API_RESPONSES, "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_object\"}}}",
             &r);
    assert_int_equal(r.format, OAI_FORMAT_JSON_OBJECT);
    oai_request_clear(&r);
    parse_ok(API_RESPONSES, "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"text\"}}}", &r);
    assert_int_equal(r.format, OAI_FORMAT_TEXT);
    oai_request_clear(&r);
}

static void test_responses_refusals(void **state)
{
    (void)state;
    const api_kind R = API_RESPONSES;
    expect_refused(R, "{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}",
                   "previous_response_id", "keeps no responses");
    expect_refused(R, "{\"input\":\"x\",\"store\":true}", "store", "store");
    expect_refused(R, "{\"input\":\"x\",\"background\":true}", "background", "background");
    expect_refused(R, "{\"model\":\"m\"}", "input", "'input' is required");
    expect_refused(R, "{\"input\":[]}", "input", "non-empty");
    expect_refused(R, "{\"input\":5}", "input", "a string or");
    expect_refused(R, "{\"input\":[7]}", "input[0]", "an object");
    expect_refused(R,
                   "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\","
                   "\"image_url\":\"http://x\"}]}]}",
                   "input[0].content[0]", "only text parts");
    expect_refused(R, "{\"input\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "input[0].role",
                   "\"user\"");
    expect_refused(R, "{\"input\":[{\"type\":\"item_reference\",\"id\":\"x\"}]}", "input[0]",
                   "item_reference");
    expect_refused(R,
                   "{\"input\":[{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]}",
                   "input[0].call_id", "a string");
    expect_refused(R,
                   "{\"input\":[{\"role\":\"user\",\"content\":\"a\"},{\"type\":\"function_call\","
                   "\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"[1]\"}]}",
                   "input[1].arguments", "JSON text of an object");
    expect_refused(R, "{\"input\":\"x\",\"instructions\":3}", "instructions", "a string");
    expect_refused(R, "{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0].type",
                   "hosted tools");
    /* the chat parser's checks, renamed to Responses' fields */
    expect_refused(R, "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"a b\"}]}",
                   "tools[0].name", "tools[0].name");
    expect_refused(R, "{\"input\":\"x\",\"max_output_tokens\":-1}", "max_output_tokens",
                   "max_output_tokens");
    expect_refused(
        R,
        "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"n\","
        "\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"strin\"}}}}}}",
        "text.format.schema.properties.a.type", "text.format.schema");
    expect_refused(R, "{\"input\":\"x\",\"tool_choice\":{\"type\":\"file_search\"}}", "tool_choice",
                   "\"function\"");
    expect_refused(R, "{\"input\":\"x\"", "", "not valid JSON");
    expect_refused(R, "[1]", "", "JSON object");
    expect_refused(R, "{\"input\":\"a\\u0000b\"}", "", "NUL");
    expect_refused(R, "{\"input\":\"a\xff\"}", "", "UTF-8");
    expect_refused(API_MESSAGES,
                   "{\"max_tokens\":1,\"system\":\"s\",\"messages\":[{\"role\":\"user\","
                   "\"content\":\"\xc3\"}]}",
                   "", "UTF-8");
}

/* ---- Messages requests */

static void test_messages_blocks_and_tools(void **state)
{
    (void)state;
    oai_request r;
    parse_ok(
        API_MESSAGES,
        "{\"model\":\"m\",\"max_tokens\":32,\"system\":[{\"type\":\"text\",\"text\":\"Sys.\"}],"
        "\"messages\":["
        "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\"},"
        "{\"type\":\"text\",\"text\":\"Let me look.\"},{\"type\":\"tool_use\","
        "\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Paris\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\","
        "\"content\":[{\"type\":\"text\",\"text\":\"21 C\"}]},{\"type\":\"text\",\"text\":"
        "\"Thanks\"}]}],"
        "\"tools\":[{\"name\":\"get_weather\",\"description\":\"d\",\"input_schema\":"
        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}],"
        "\"tool_choice\":{\"type\":\"any\",\"disable_parallel_tool_use\":true},"
        "\"stop_sequences\":[\"END\",\"STOP\"],\"top_k\":5,\"temperature\":0.2,"
        "\"metadata\":{\"user_id\":\"u\"},\"thinking\":{\"type\":\"disabled\"},\"zzz\":0}",
        &r);
    assert_int_equal(r.max_tokens, 32);
    assert_int_equal(r.n_messages, 5);
    assert_string_equal(r.messages[0].role, "system");
    assert_string_equal(r.messages[0].content, "Sys.");
    assert_string_equal(r.messages[1].role, "user");
    assert_string_equal(r.messages[2].role, "assistant");
    assert_string_equal(r.messages[2].content, "Let me look.");
    assert_string_equal(r.messages[3].role, "tool");
    assert_string_equal(r.messages[3].content, "21 C");
    assert_string_equal(r.messages[4].role, "user");
    assert_string_equal(r.messages[4].content, "Thanks");
    const cJSON *call =
        cJSON_GetArrayItem(cJSON_GetObjectItem(var_message(&r, 2), "tool_calls"), 0);
    assert_string_equal(cJSON_GetObjectItem(call, "id")->valuestring, "toolu_1");
    const cJSON *args = cJSON_GetObjectItem(cJSON_GetObjectItem(call, "function"), "arguments");
    /* chat_vars holds the arguments parsed, as a template reads them */
    assert_string_equal(cJSON_GetObjectItem(args, "city")->valuestring, "Paris");
    assert_string_equal(cJSON_GetObjectItem(var_message(&r, 3), "tool_call_id")->valuestring,
                        "toolu_1");
    assert_int_equal(r.tools.n, 1);
    assert_int_equal(r.tools.choice, OAI_TOOL_CHOICE_REQUIRED);
    assert_false(r.tools.parallel);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[1], "STOP");
    assert_int_equal(r.sampling.top_k, 5);
    assert_string_equal(r.ignored, "zzz");
    oai_request_clear(&r);

    parse_ok(API_MESSAGES,
             "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
             "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],"
             "\"tool_choice\":{\"type\":\"tool\",\"name\":\"f\"}}",
             &r);
    assert_int_equal(r.tools.choice, OAI_TOOL_CHOICE_NAMED);
    assert_true(r.tools.parallel);
    oai_request_clear(&r);

    /* an assistant turn of tool_use blocks alone: no text, its call kept (the sanitizer
     * build's leak check covers the empty text list this turn leaves behind) */
    parse_ok(API_MESSAGES,
             "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
             "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\","
             "\"name\":\"f\",\"input\":{}}]}],"
             "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}]}",
             &r);
    assert_int_equal(r.n_messages, 2);
    assert_string_equal(r.messages[1].role, "assistant");
    call = cJSON_GetArrayItem(cJSON_GetObjectItem(var_message(&r, 1), "tool_calls"), 0);
    assert_string_equal(cJSON_GetObjectItem(call, "id")->valuestring, "t");
    oai_request_clear(&r);
}

static void test_messages_refusals(void **state)
{
    (void)state;
    const api_kind M = API_MESSAGES;
#define HI "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
    expect_refused(M, "{" HI "}", "max_tokens", "'max_tokens' is required");
    expect_refused(M, "{\"max_tokens\":0," HI "}", "max_tokens", "max_tokens");
    expect_refused(M, "{\"max_tokens\":4}", "messages", "'messages' is required");
    expect_refused(M, "{\"max_tokens\":4,\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}",
                   "messages[0].role", "\"user\" or \"assistant\"");
    expect_refused(M,
                   "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                   "\"image\",\"source\":{}}]}]}",
                   "messages[0].content[0]", "image block");
    expect_refused(M,
                   "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                   "\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":{}}]}]}",
                   "messages[0].content[0]", "tool_result");
    expect_refused(M,
                   "{\"max_tokens\":4,\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":"
                   "\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":[]}]}]}",
                   "messages[0].content[0].input", "an object");
    expect_refused(M,
                   "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                   "\"tool_result\",\"content\":\"x\"}]}]}",
                   "messages[0].content[0].tool_use_id", "a string");
    expect_refused(M, "{\"max_tokens\":4,\"system\":[{\"type\":\"image\"}]," HI "}", "system[0]",
                   "text block");
    expect_refused(
        M, "{\"max_tokens\":4," HI ",\"tools\":[{\"type\":\"bash_20250124\",\"name\":\"bash\"}]}",
        "tools[0].type", "not supported");
    expect_refused(M, "{\"max_tokens\":4," HI ",\"tools\":[{\"name\":\"f\"}]}",
                   "tools[0].input_schema", "an object");
    expect_refused(M,
                   "{\"max_tokens\":4," HI ",\"tools\":[{\"name\":\"a b\",\"input_schema\":{}}]}",
                   "tools[0].name", "tools[0].name");
    expect_refused(M, "{\"max_tokens\":4," HI ",\"tool_choice\":{\"type\":\"tool\"}}",
                   "tool_choice", "\"tool\"");
    expect_refused(
        M, "{\"max_tokens\":4," HI ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024}}",
        "thinking", "not supported");
    expect_refused(M,
                   "{\"max_tokens\":4," HI ",\"stop_sequences\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}",
                   "stop_sequences", "stop_sequences");
    expect_refused(M, "{\"max_tokens\":4," HI ",\"temperature\":\"hot\"}", "temperature",
                   "temperature");
#undef HI
}

/* ---- answers */

static const oai_tool_call k_call = {"call_abc", "get_weather", "{\"city\":\"Paris\"}"};
static const oai_meta k_resp_meta = {OAI_CHAT, "resp_1234", 1700000000, "stories"};
static const oai_meta k_msg_meta = {OAI_CHAT, "msg_1234", 1700000000, "stories"};

static cJSON *answer(api_kind k, const char *text, const char *finish, size_t n_calls)
{
    api_answer a = {k == API_MESSAGES ? &k_msg_meta : &k_resp_meta,
                    text,
                    strlen(text),
                    finish,
                    &k_call,
                    n_calls,
                    {.prompt_tokens = 11, .completion_tokens = 5, .cached_tokens = 3},
                    NULL,
                    NULL,
                    0,
                    NULL,
                    NULL,
                    0};
    char *s = api_answer_json(k, &a);
    assert_non_null(s);
    cJSON *j = cJSON_Parse(s);
    free(s);
    assert_non_null(j);
    return j;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    if (!cJSON_IsString(v))
        fail_msg("'%s' is not a string", key);
    return v->valuestring;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    if (!cJSON_IsNumber(v))
        fail_msg("'%s' is not a number", key);
    return v->valuedouble;
}

static void test_responses_answer(void **state)
{
    (void)state;
    cJSON *j = answer(API_RESPONSES, "Hi", "tool_calls", 1);
    assert_string_equal(str(j, "object"), "response");
    assert_string_equal(str(j, "id"), "resp_1234");
    assert_string_equal(str(j, "status"), "completed");
    const cJSON *out = cJSON_GetObjectItem(j, "output");
    assert_int_equal(cJSON_GetArraySize(out), 2);
    const cJSON *m = cJSON_GetArrayItem(out, 0), *fc = cJSON_GetArrayItem(out, 1);
    assert_string_equal(str(m, "type"), "message");
    assert_string_equal(str(m, "id"), "msg_1234");
    assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "content"), 0), "text"),
                        "Hi");
    assert_string_equal(str(fc, "type"), "function_call");
    assert_string_equal(str(fc, "id"), "fc_abc");
    assert_string_equal(str(fc, "call_id"), "call_abc");
    assert_string_equal(str(fc, "arguments"), "{\"city\":\"Paris\"}");
    const cJSON *u = cJSON_GetObjectItem(j, "usage");
    assert_int_equal((int)num(u, "input_tokens"), 11);
    assert_int_equal((int)num(u, "output_tokens"), 5);
    assert_int_equal((int)num(u, "total_tokens"), 16);
    assert_int_equal((int)num(cJSON_GetObjectItem(u, "input_tokens_details"), "cached_tokens"), 3);
    cJSON_Delete(j);

    j = answer(API_RESPONSES, "", "length", 0); /* an empty text is still a message item */
    assert_string_equal(str(j, "status"), "incomplete");
    assert_string_equal(str(cJSON_GetObjectItem(j, "incomplete_details"), "reason"),
                        "max_output_tokens");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "output")), 1);
    cJSON_Delete(j);
}

static void test_messages_answer(void **state)
{
    (void)state;
    cJSON *j = answer(API_MESSAGES, "Hi", "tool_calls", 1);
    assert_string_equal(str(j, "type"), "message");
    assert_string_equal(str(j, "role"), "assistant");
    assert_string_equal(str(j, "stop_reason"), "tool_use");
    const cJSON *c = cJSON_GetObjectItem(j, "content");
    assert_int_equal(cJSON_GetArraySize(c), 2);
    assert_string_equal(str(cJSON_GetArrayItem(c, 0), "text"), "Hi");
    const cJSON *use = cJSON_GetArrayItem(c, 1);
    assert_string_equal(str(use, "type"), "tool_use");
    assert_string_equal(str(use, "id"), "call_abc");
    assert_string_equal(str(cJSON_GetObjectItem(use, "input"), "city"), "Paris");
    assert_int_equal((int)num(cJSON_GetObjectItem(j, "usage"), "input_tokens"), 11);
    assert_int_equal((int)num(cJSON_GetObjectItem(j, "usage"), "output_tokens"), 5);
    cJSON_Delete(j);
    j = answer(API_MESSAGES, "x", "length", 0);
    assert_string_equal(str(j, "stop_reason"), "max_tokens");
    cJSON_Delete(j);
    j = answer(API_MESSAGES, "x", "stop", 0);
    assert_string_equal(str(j, "stop_reason"), "end_turn");
    cJSON_Delete(j);
}

static void test_error_shapes(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *type;
    } rows[] = {
        {400, "invalid_request_error"}, {401, "authentication_error"}, {404, "not_found_error"},
        {413, "request_too_large"},     {429, "rate_limit_error"},     {500, "api_error"},
        {503, "overloaded_error"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        oai_error e;
        oai_error_set(&e, rows[i].status, "p", "c", "bad %d", rows[i].status);
        char *s = api_error_json(API_MESSAGES, &e);
        cJSON *j = cJSON_Parse(s);
        free(s);
        assert_non_null(j);
        assert_string_equal(str(j, "type"), "error");
        const cJSON *in = cJSON_GetObjectItem(j, "error");
        assert_string_equal(str(in, "type"), rows[i].type);
        assert_non_null(strstr(str(in, "message"), "bad"));
        cJSON_Delete(j);
        s = api_error_json(API_RESPONSES, &e); /* OpenAI's shape */
        j = cJSON_Parse(s);
        free(s);
        assert_string_equal(str(cJSON_GetObjectItem(j, "error"), "param"), "p");
        cJSON_Delete(j);
    }
}

/* ---- streams */

/* The events of an SSE text: each "event: NAME" line must match its data's "type". Fills
 * names (up to cap) and returns the count; *datas gets each data parsed (caller frees). */
static int split_events(const char *sse, char names[][64], cJSON **datas, int cap)
{
    int n = 0;
    const char *p = sse;
    while (*p) {
        assert_true(n < cap);
        assert_int_equal(strncmp(p, "event: ", 7), 0);
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        snprintf(names[n], 64, "%.*s", (int)(nl - p - 7), p + 7);
        p = nl + 1;
        assert_int_equal(strncmp(p, "data: ", 6), 0);
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        datas[n] = cJSON_ParseWithLength(p + 6, (size_t)(end - p - 6));
        assert_non_null(datas[n]);
        assert_string_equal(str(datas[n], "type"), names[n]);
        p = end + 2;
        n++;
    }
    return n;
}

/* Runs a stream of text "Hel" + "lo", one call, end (finish) into SSE text. */
static char *run_stream(api_kind k, const char *finish)
{
    api_stream s;
    api_stream_init(&s, k, k == API_MESSAGES ? &k_msg_meta : &k_resp_meta);
    strbuf out = {0};
    assert_true(api_stream_begin(&s, &out));
    assert_true(api_stream_text(&s, "Hel", 3, &out));
    assert_true(api_stream_text(&s, "", 0, &out)); /* nothing */
    assert_true(api_stream_text(&s, "lo", 2, &out));
    assert_true(api_stream_call(&s, &k_call, &out));
    api_answer a = {s.meta, NULL, 0, finish, &k_call, 1,
                     {.prompt_tokens = 11, .completion_tokens = 5}, NULL, NULL, 0,
                     NULL, NULL, 0};
    assert_true(api_stream_end(&s, &a, &out));
    api_stream_free(&s);
    assert_false(out.failed);
    return out.s;
}

static void test_responses_stream(void **state)
{
    (void)state;
    char *sse = run_stream(API_RESPONSES, "tool_calls");
    char names[32][64];
    cJSON *d[32];
    int n = split_events(sse, names, d, 32);
    static const char *const want[] = {
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    };
    assert_int_equal(n, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i < n; i++) {
        assert_string_equal(names[i], want[i]);
        assert_int_equal((int)num(d[i], "sequence_number"), i);
    }
    assert_string_equal(str(d[0] ? cJSON_GetObjectItem(d[0], "response") : NULL, "status"),
                        "in_progress");
    assert_string_equal(str(d[4], "delta"), "Hel");
    assert_string_equal(str(d[6], "text"), "Hello");
    assert_int_equal((int)num(d[6], "output_index"), 0);
    assert_int_equal((int)num(d[9], "output_index"), 1);
    assert_string_equal(str(cJSON_GetObjectItem(d[9], "item"), "arguments"), "");
    assert_string_equal(str(d[10], "delta"), k_call.arguments);
    assert_string_equal(str(d[10], "item_id"), "fc_abc");
    assert_string_equal(str(d[11], "arguments"), k_call.arguments);
    const cJSON *r = cJSON_GetObjectItem(d[13], "response");
    assert_string_equal(str(r, "status"), "completed");
    const cJSON *out = cJSON_GetObjectItem(r, "output");
    assert_int_equal(cJSON_GetArraySize(out), 2);
    assert_string_equal(
        str(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "content"), 0),
            "text"),
        "Hello");
    for (int i = 0; i < n; i++)
        cJSON_Delete(d[i]);
    free(sse);

    sse = run_stream(API_RESPONSES, "length");
    n = split_events(sse, names, d, 32);
    assert_string_equal(names[n - 1], "response.incomplete");
    for (int i = 0; i < n; i++)
        cJSON_Delete(d[i]);
    free(sse);
}

static void test_messages_stream(void **state)
{
    (void)state;
    char *sse = run_stream(API_MESSAGES, "tool_calls");
    char names[32][64];
    cJSON *d[32];
    int n = split_events(sse, names, d, 32);
    static const char *const want[] = {
        "message_start",      "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta",      "message_stop",
    };
    assert_int_equal(n, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i < n; i++)
        assert_string_equal(names[i], want[i]);
    const cJSON *m = cJSON_GetObjectItem(d[0], "message");
    assert_string_equal(str(m, "id"), "msg_1234");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(m, "stop_reason")));
    assert_int_equal((int)num(d[1], "index"), 0);
    assert_string_equal(str(cJSON_GetObjectItem(d[2], "delta"), "type"), "text_delta");
    assert_string_equal(str(cJSON_GetObjectItem(d[3], "delta"), "text"), "lo");
    assert_int_equal((int)num(d[5], "index"), 1);
    const cJSON *block = cJSON_GetObjectItem(d[5], "content_block");
    assert_string_equal(str(block, "type"), "tool_use");
    assert_string_equal(str(block, "name"), "get_weather");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(block, "input")), 0);
    const cJSON *jd = cJSON_GetObjectItem(d[6], "delta");
    assert_string_equal(str(jd, "type"), "input_json_delta");
    assert_string_equal(str(jd, "partial_json"), k_call.arguments);
    assert_string_equal(str(cJSON_GetObjectItem(d[8], "delta"), "stop_reason"), "tool_use");
    assert_int_equal((int)num(cJSON_GetObjectItem(d[8], "usage"), "output_tokens"), 5);
    for (int i = 0; i < n; i++)
        cJSON_Delete(d[i]);
    free(sse);
}

/* ---- a real server with a key */

#define KEY "sk-api-test"

static sv_served g_srv;
static char g_keys[512];

static int server_setup(void **state)
{
    if (eu_setup_stories(state))
        return -1;
    snprintf(g_keys, sizeof g_keys, "%s", tu_tmp_path("api_keys.json"));
    FILE *f = fopen(g_keys, "w");
    if (!f)
        return -1;
    fputs("{\"" KEY "\": {}}", f);
    if (fclose(f))
        return -1;
    ts_server_options so;
    ts_server_options_default(&so);
    so.api_keys_path = g_keys;
    sv_start(&g_srv, NULL, &so);
    return 0;
}

static int server_teardown(void **state)
{
    sv_stop(&g_srv);
    unlink(g_keys);
    return eu_teardown_stories(state);
}

/* POSTs body to path with one extra header line (NULL: none); the answer's status, and its
 * body parsed in *json (caller frees). */
static long post(const char *path, const char *header, const char *body, cJSON **json)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", g_srv.url, path);
    strbuf got = {0};
    CURL *c = curl_easy_init();
    assert_non_null(c);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (header)
        h = curl_slist_append(h, header);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sv_on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    strbuf_add(&got, "", 0);
    *json = cJSON_Parse(got.s);
    strbuf_free(&got);
    assert_non_null(*json);
    return status;
}

static void test_server_keys_and_shapes(void **state)
{
    (void)state;
    const char *msg = "{\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}";
    cJSON *j;
    assert_int_equal(post("/v1/messages", "x-api-key: " KEY, msg, &j), 200);
    assert_string_equal(str(j, "type"), "message");
    assert_int_equal((int)num(cJSON_GetObjectItem(j, "usage"), "output_tokens"), 3);
    assert_string_equal(str(j, "stop_reason"), "max_tokens");
    cJSON_Delete(j);
    /* Anthropic's shape for every error of /v1/messages, from auth to the body */
    assert_int_equal(post("/v1/messages", "x-api-key: sk-wrong", msg, &j), 401);
    assert_string_equal(str(j, "type"), "error");
    assert_string_equal(str(cJSON_GetObjectItem(j, "error"), "type"), "authentication_error");
    assert_non_null(strstr(str(cJSON_GetObjectItem(j, "error"), "message"), "x-api-key"));
    cJSON_Delete(j);
    assert_int_equal(post("/v1/messages", "x-api-key: " KEY, "{\"messages\":[]}", &j), 400);
    assert_string_equal(str(cJSON_GetObjectItem(j, "error"), "type"), "invalid_request_error");
    cJSON_Delete(j);
    assert_int_equal(post("/v1/messages", "Authorization: Bearer " KEY, msg, &j), 200);
    cJSON_Delete(j);
    /* /v1/responses: the same key either way, OpenAI's error shape */
    const char *resp = "{\"input\":\"Hi\",\"max_output_tokens\":2}";
    assert_int_equal(post("/v1/responses", "x-api-key: " KEY, resp, &j), 200);
    assert_string_equal(str(j, "object"), "response");
    assert_int_equal((int)num(cJSON_GetObjectItem(j, "usage"), "output_tokens"), 2);
    cJSON_Delete(j);
    assert_int_equal(post("/v1/responses", NULL, resp, &j), 401);
    assert_string_equal(str(cJSON_GetObjectItem(j, "error"), "type"), "authentication_error");
    cJSON_Delete(j);
    assert_int_equal(
        post("/v1/responses", "x-api-key: " KEY, "{\"input\":\"Hi\",\"store\":true}", &j), 400);
    assert_string_equal(str(cJSON_GetObjectItem(j, "error"), "param"), "store");
    cJSON_Delete(j);
    /* refused at submit, past the parse: still named as the API names it */
    assert_int_equal(post("/v1/responses", "x-api-key: " KEY,
                          "{\"input\":\"Hi\",\"max_output_tokens\":5000}", &j),
                     400);
    assert_string_equal(str(cJSON_GetObjectItem(j, "error"), "param"), "max_output_tokens");
    assert_non_null(strstr(str(cJSON_GetObjectItem(j, "error"), "message"), "max_output_tokens"));
    cJSON_Delete(j);
}

int main(void)
{
    const struct CMUnitTest shapes[] = {
        cmocka_unit_test(test_responses_text_input),
        cmocka_unit_test(test_responses_items_and_tools),
        cmocka_unit_test(test_responses_text_format),
        cmocka_unit_test(test_responses_refusals),
        cmocka_unit_test(test_messages_blocks_and_tools),
        cmocka_unit_test(test_messages_refusals),
        cmocka_unit_test(test_responses_answer),
        cmocka_unit_test(test_messages_answer),
        cmocka_unit_test(test_error_shapes),
        cmocka_unit_test(test_responses_stream),
        cmocka_unit_test(test_messages_stream),
    };
    const struct CMUnitTest served[] = {
        cmocka_unit_test(test_server_keys_and_shapes),
    };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int failed = cmocka_run_group_tests_name("server_api_shapes", shapes, NULL, NULL);
    failed +=
        cmocka_run_group_tests_name("server_api_served", served, server_setup, server_teardown);
    curl_global_cleanup();
    return failed;
}
