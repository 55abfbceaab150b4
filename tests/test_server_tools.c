/* test_server_tools.c: a chat request's tools, tool_choice and parallel_tool_calls
 * (accepted shapes, and 400s naming the field), the tool fields of its messages, and the
 * JSON Schema a forced tool_choice constrains the answer to. No model needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "server/openai.h"

#define MSG "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]"
#define TOOL(name)                                                                              \
    "{\"type\": \"function\", \"function\": {\"name\": \"" name "\", \"description\": \"d\", "   \
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "             \
    "\"string\"}}, \"required\": [\"city\"]}}}"
#define TOOLS "\"tools\": [" TOOL("get_weather") ", " TOOL("get-time_2") "]"

static ts_status parse(const char *body, oai_request *r, oai_error *e)
{
    return oai_parse_request(OAI_CHAT, body, strlen(body), r, e);
}

/* {MSG, extra} parsed into *r (oai_request_clear it); fails the test when it is refused. */
static void parse_ok(const char *extra, oai_request *r)
{
    char body[4096];
    snprintf(body, sizeof body, "{" MSG ", %s}", extra);
    oai_error e;
    if (parse(body, r, &e) != TS_OK)
        fail_msg("%s: %s", body, e.message);
}

/* {MSG, extra}: accepted, with the tool fields as said. */
static void expect_tools(const char *extra, oai_tool_choice choice, int n, int named,
                         bool parallel)
{
    oai_request r;
    parse_ok(extra, &r);
    assert_int_equal(r.tools.choice, choice);
    assert_int_equal(r.tools.n, n);
    assert_int_equal(cJSON_GetArraySize(r.tools.defs), n);
    if (choice == OAI_TOOL_CHOICE_NAMED)
        assert_int_equal(r.tools.named, named);
    assert_int_equal(r.tools.parallel, parallel);
    oai_request_clear(&r);
}

/* {MSG, extra} (or body itself when it starts with '{'): 400 naming param. */
static void expect_400(const char *extra, const char *param)
{
    char body[4096];
    if (extra[0] == '{')
        snprintf(body, sizeof body, "%s", extra);
    else
        snprintf(body, sizeof body, "{" MSG ", %s}", extra);
    oai_request r;
    oai_error e;
    if (parse(body, &r, &e) == TS_OK)
        fail_msg("accepted: %s", body);
    assert_int_equal(e.http_status, 400);
    if (strcmp(e.param, param))
        fail_msg("%s: param '%s', want '%s' (%s)", body, e.param, param, e.message);
    const char *last = strrchr(param, '.'); /* a schema's fault: its keyword at least */
    assert_true(strstr(e.message, param) || (last && strstr(e.message, last + 1)));
    assert_null(r.tools.defs);
}

static void test_accepted(void **state)
{
    (void)state;
    expect_tools("\"tool_choice\": \"none\"", OAI_TOOL_CHOICE_NONE, 0, 0, true);
    expect_tools("\"tool_choice\": \"auto\"", OAI_TOOL_CHOICE_AUTO, 0, 0, true);
    expect_tools("\"tools\": []", OAI_TOOL_CHOICE_NONE, 0, 0, true);
    expect_tools(TOOLS, OAI_TOOL_CHOICE_AUTO, 2, 0, true);
    expect_tools(TOOLS ", \"tool_choice\": \"none\"", OAI_TOOL_CHOICE_NONE, 2, 0, true);
    expect_tools(TOOLS ", \"tool_choice\": \"required\", \"parallel_tool_calls\": false",
                 OAI_TOOL_CHOICE_REQUIRED, 2, 0, false);
    expect_tools(TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
                       "\"get-time_2\"}}",
                 OAI_TOOL_CHOICE_NAMED, 2, 1, true);
    expect_tools("\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], "
                 "\"tool_choice\": null, \"parallel_tool_calls\": null",
                 OAI_TOOL_CHOICE_AUTO, 1, 0, true);
}

static void test_refused(void **state)
{
    (void)state;
    expect_400("\"tools\": {}", "tools");
    expect_400("\"tools\": [3]", "tools[0]");
    expect_400("\"tools\": [{\"function\": {\"name\": \"f\"}}]", "tools[0].type");
    expect_400("\"tools\": [{\"type\": \"code\", \"function\": {\"name\": \"f\"}}]",
               "tools[0].type");
    expect_400("\"tools\": [{\"type\": \"function\"}]", "tools[0].function");
    expect_400("\"tools\": [{\"type\": \"function\", \"function\": \"f\"}]", "tools[0].function");
    expect_400("\"tools\": [" TOOL("f") ", {\"type\": \"function\", \"function\": {}}]",
               "tools[1].function.name");
    expect_400("\"tools\": [{\"type\": \"function\", \"function\": {\"name\": 7}}]",
               "tools[0].function.name");
    expect_400("\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]",
               "tools[0].function.name");
    expect_400("\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"\"}}]",
               "tools[0].function.name");
    expect_400("\"tools\": [" TOOL("f") ", " TOOL("f") "]", "tools[1].function.name");
    expect_400("\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
               "\"parameters\": \"x\"}}]", "tools[0].function.parameters");
    expect_400("\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
               "\"description\": 1}}]", "tools[0].function.description");
    expect_400("\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
               "\"strict\": \"yes\"}}]", "tools[0].function.strict");
    /* tool_choice */
    expect_400("\"tool_choice\": \"required\"", "tool_choice");
    expect_400("\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"f\"}}",
               "tool_choice");
    expect_400(TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
                     "\"nope\"}}", "tool_choice");
    expect_400(TOOLS ", \"tool_choice\": \"sometimes\"", "tool_choice");
    expect_400(TOOLS ", \"tool_choice\": 1", "tool_choice");
    expect_400(TOOLS ", \"tool_choice\": {\"type\": \"custom\", \"function\": {\"name\": "
                     "\"get_weather\"}}", "tool_choice");
    expect_400(TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {}}",
               "tool_choice");
    expect_400(TOOLS ", \"tool_choice\": \"required\", \"response_format\": {\"type\": "
                     "\"json_object\"}", "tool_choice");
    expect_400(TOOLS ", \"parallel_tool_calls\": \"yes\"", "parallel_tool_calls");
    /* a forced choice compiles the parameters: a keyword outside the subset is named in
     * the tool that has it; with auto, nothing is compiled */
    expect_400("\"tools\": [" TOOL("f") ", {\"type\": \"function\", \"function\": {\"name\": "
               "\"g\", \"parameters\": {\"type\": \"object\", \"properties\": {\"t\": {\"type\": "
               "\"array\", \"uniqueItems\": true}}}}}], \"tool_choice\": \"required\"",
               "tools[1].function.parameters.properties.t.uniqueItems");
    expect_tools("\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"g\", "
                 "\"parameters\": {\"type\": \"object\", \"properties\": {\"t\": {\"type\": "
                 "\"array\", \"uniqueItems\": true}}}}}]",
                 OAI_TOOL_CHOICE_AUTO, 1, 0, true);
    /* the tool fields of messages */
    expect_400("{\"messages\": [{\"role\": \"tool\", \"content\": \"1\"}]}",
               "messages[0].tool_call_id");
    expect_400("{\"messages\": [{\"role\": \"tool\", \"content\": \"1\", \"tool_call_id\": 5}]}",
               "messages[0].tool_call_id");
    expect_400("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": "
               "\"assistant\", \"content\": \"x\", \"tool_calls\": {}}]}",
               "messages[1].tool_calls");
    expect_400("{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"type\": "
               "\"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}]}",
               "messages[0].tool_calls[0].id");
    expect_400("{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"c\", "
               "\"function\": {\"arguments\": \"{}\"}}]}]}",
               "messages[0].tool_calls[0].function.name");
    expect_400("{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"c\", "
               "\"type\": \"web\", \"function\": {\"name\": \"f\"}}]}]}",
               "messages[0].tool_calls[0].type");
    expect_400("{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"c\", "
               "\"function\": {\"name\": \"f\", \"arguments\": \"{oops\"}}]}]}",
               "messages[0].tool_calls[0].function.arguments");
    expect_400("{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"c\", "
               "\"function\": {\"name\": \"f\", \"arguments\": 5}}]}]}",
               "messages[0].tool_calls[0].function.arguments");
}

/* A tool round as a client sends it back: the call's arguments a JSON string, content
 * null; the template variables get the arguments as an object. */
static void test_round_trip_messages(void **state)
{
    (void)state;
    const char *body =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"weather?\"}, {\"role\": "
        "\"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", \"type\": "
        "\"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
        "\"{\\\"city\\\": \\\"Paris\\\"}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": "
        "\"call_1\", \"content\": \"sunny\"}], " TOOLS "}";
    oai_request r;
    oai_error e;
    if (parse(body, &r, &e) != TS_OK)
        fail_msg("%s", e.message);
    assert_int_equal(r.n_messages, 3);
    assert_string_equal(r.messages[1].content, "");
    assert_string_equal(r.messages[2].role, "tool");
    const cJSON *m1 = cJSON_GetArrayItem(cJSON_GetObjectItem(r.chat_vars, "messages"), 1);
    const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(m1, "tool_calls"),
                                                             0), "function");
    const cJSON *args = cJSON_GetObjectItem(fn, "arguments");
    assert_true(cJSON_IsObject(args));
    assert_string_equal(cJSON_GetObjectItem(args, "city")->valuestring, "Paris");
    oai_request_clear(&r);
}

/* The schema of tool_choice choice (named: tool `named`) over the tools of extra (its
 * text, exactly); NULL for none. */
static void expect_schema(const char *extra, oai_tool_choice choice, int named, bool parallel,
                          const char *want)
{
    oai_request r;
    parse_ok(extra, &r);
    r.tools.choice = choice;
    r.tools.named = named;
    r.tools.parallel = parallel;
    cJSON *j = oai_tools_schema(&r.tools);
    char *got = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!want)
        assert_null(got);
    else if (!got || strcmp(got, want))
        fail_msg("%s:\ngot  %s\nwant %s", extra, got ? got : "(null)", want);
    free(got);
    oai_request_clear(&r);
}

#define CALL(name, params)                                                                      \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"" name "\"},\"arguments\":"     \
    params "},\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}"
#define PARAMS                                                                                  \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":"        \
    "[\"city\"]}"

static void test_schemas(void **state)
{
    (void)state;
    expect_schema(TOOLS, OAI_TOOL_CHOICE_AUTO, 0, true, NULL);
    expect_schema(TOOLS, OAI_TOOL_CHOICE_NONE, 0, true, NULL);
    expect_schema(TOOLS, OAI_TOOL_CHOICE_NAMED, 1, true, CALL("get-time_2", PARAMS));
    expect_schema(TOOLS, OAI_TOOL_CHOICE_REQUIRED, 0, false,
                  "{\"anyOf\":[" CALL("get_weather", PARAMS) "," CALL("get-time_2", PARAMS) "]}");
    expect_schema(TOOLS, OAI_TOOL_CHOICE_REQUIRED, 0, true,
                  "{\"type\":\"array\",\"items\":{\"anyOf\":[" CALL("get_weather", PARAMS) ","
                  CALL("get-time_2", PARAMS) "]},\"minItems\":1,\"maxItems\":8}");
    /* one tool: no anyOf; no parameters: the empty object */
    expect_schema("\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"now\"}}]",
                  OAI_TOOL_CHOICE_REQUIRED, 0, true,
                  "{\"type\":\"array\",\"items\":" CALL("now", "{\"type\":\"object\","
                  "\"properties\":{},\"additionalProperties\":false}") ",\"minItems\":1,"
                  "\"maxItems\":8}");
}

/* The JSON of a whole answer with tool calls (content null without text, the calls in
 * OpenAI's shape) and of the two chunks of a streamed call. */
static void test_response_shapes(void **state)
{
    (void)state;
    static const oai_meta meta = {OAI_CHAT, "chatcmpl-1", 1700000000, "m"};
    oai_tool_call calls[2] = {{"call_a", "f", "{\"x\":1}"}, {"call_b", "g", "{}"}};
    oai_choice ch[2] = {{"", 0, "tool_calls", NULL, 0, calls, 2},
                        {"Let me see.", 11, "tool_calls", NULL, 0, calls + 1, 1}};
    oai_usage u = {.prompt_tokens = 1, .completion_tokens = 2, .cached_tokens = 0};
    char *text = oai_response_json(&meta, ch, 2, &u);
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"),
                                                              0), "message");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(msg, "content")));
    const cJSON *tc = cJSON_GetObjectItem(msg, "tool_calls");
    assert_int_equal(cJSON_GetArraySize(tc), 2);
    char *c0 = cJSON_PrintUnformatted(cJSON_GetArrayItem(tc, 0));
    assert_string_equal(c0, "{\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":"
                            "\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}");
    free(c0);
    msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 1), "message");
    assert_string_equal(cJSON_GetObjectItem(msg, "content")->valuestring, "Let me see.");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(msg, "tool_calls")), 1);
    cJSON_Delete(j);

    const char *want[2] = {
        "{\"index\":1,\"delta\":{\"tool_calls\":[{\"index\":3,\"id\":\"call_a\",\"type\":"
        "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]},\"logprobs\":null,"
        "\"finish_reason\":null}",
        "{\"index\":1,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":"
        "\"{\\\"x\\\":1}\"}}]},\"logprobs\":null,\"finish_reason\":null}"};
    for (int head = 1; head >= 0; head--) {
        text = oai_tool_chunk_json(&meta, 1, 3, &calls[0], head);
        j = cJSON_Parse(text);
        free(text);
        assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring,
                            "chat.completion.chunk");
        char *c = cJSON_PrintUnformatted(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0));
        assert_string_equal(c, want[1 - head]);
        free(c);
        cJSON_Delete(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_round_trip_messages),
        cmocka_unit_test(test_schemas),
        cmocka_unit_test(test_response_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
