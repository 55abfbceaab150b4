/* test_chat_tools.c: the built-in families' renderings of tools, tool calls and tool
 * results: chatml, llama3 and mistral equal the shared renderings of Qwen 2.5, Llama 3.1
 * and Mistral Nemo byte for byte; tool JSON and results are content spans, the markup
 * around them is not; the families without a tool format get them as plain text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "template/chat_template.h"
#include "template_cases.h"
#include "util.h"

/* A case's messages (and tools) as the families take them; vars owns every string. */
typedef struct conv {
    cJSON *vars;
    chat_message m[8];
    size_t n;
    const cJSON *tools;
} conv;

static void conv_from(conv *c, const char *body, const char *system)
{
    memset(c, 0, sizeof *c);
    c->vars = cJSON_Parse(body);
    assert_non_null(c->vars);
    if (system) { /* a system message first */
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "role", "system");
        cJSON_AddStringToObject(s, "content", system);
        cJSON_InsertItemInArray(cJSON_GetObjectItem(c->vars, "messages"), 0, s);
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(c->vars, "messages")) {
        assert_true(c->n < 8);
        const cJSON *calls = cJSON_GetObjectItem(m, "tool_calls");
        const cJSON *id = cJSON_GetObjectItem(m, "tool_call_id");
        c->m[c->n++] = (chat_message){cJSON_GetObjectItem(m, "role")->valuestring,
                                      cJSON_GetObjectItem(m, "content")->valuestring, calls,
                                      id ? id->valuestring : NULL};
    }
    c->tools = cJSON_GetObjectItem(c->vars, "tools");
}

static const char *case_body(const char *name)
{
    for (size_t i = 0; i < N_TEMPLATE_CASES; i++)
        if (!strcmp(template_cases[i].name, name))
            return template_cases[i].body;
    fail_msg("no case %s", name);
    return NULL;
}

static char *render(chat_template_kind kind, const conv *c, chat_rendering *r)
{
    ts_error err = {0};
    if (chat_template_render(kind, c->m, c->n, c->tools, r, &err) != TS_OK)
        fail_msg("%s: %s", chat_template_name(kind), err.msg);
    return r->text;
}

/* The shared rendering of model for case cs, less the "<s>" its template writes (the
 * families leave BOS to the tokenizer). NULL when ../shared is absent. */
static char *shared(const char *model, const char *cs)
{
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/expected/%s.%s.txt", tu_shared("chat-templates"), model, cs);
    char *t = tu_read_file(path, &len);
    if (t && !strncmp(t, "<s>", 3))
        memmove(t, t + 3, len - 2);
    return t;
}

static void expect_shared(chat_template_kind kind, const char *model, const char *system)
{
    static const char *const cases[] = {"tools", "tool-round"};
    for (int k = 0; k < 2; k++) {
        char *want = shared(model, cases[k]);
        if (!want) {
            skip();
            return;
        }
        conv c;
        conv_from(&c, case_body(cases[k]), system);
        chat_rendering r = {0};
        const char *got = render(kind, &c, &r);
        if (strcmp(got, want))
            fail_msg("%s %s:\n--- got ---\n%s\n--- want ---\n%s", chat_template_name(kind),
                     cases[k], got, want);
        chat_rendering_free(&r);
        cJSON_Delete(c.vars);
        free(want);
    }
}

static void test_chatml_is_qwen25(void **state)
{
    (void)state; /* Qwen's own default system text, given: the family writes none */
    expect_shared(CHAT_TEMPLATE_CHATML, "Qwen-Qwen2.5-7B-Instruct",
                  "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
}

static void test_llama3_is_llama31(void **state)
{
    (void)state;
    expect_shared(CHAT_TEMPLATE_LLAMA3, "meta-llama-Llama-3.1-8B-Instruct", NULL);
}

static void test_mistral_is_nemo(void **state)
{
    (void)state;
    expect_shared(CHAT_TEMPLATE_MISTRAL, "mistralai-Mistral-Nemo-Instruct-2407", NULL);
}

/* Whether text[at, at + len) lies inside one content span. */
static bool in_span(const chat_rendering *r, size_t at, size_t len)
{
    for (size_t k = 0; k < r->n_content; k++)
        if (at >= r->content[k].off && at + len <= r->content[k].off + r->content[k].len)
            return true;
    return false;
}

/* Where needle first occurs in r's text; fails the test when it does not. */
static size_t find(const chat_rendering *r, const char *needle)
{
    const char *p = strstr(r->text, needle);
    if (!p)
        fail_msg("'%s' not in:\n%s", needle, r->text);
    return (size_t)(p - r->text);
}

/* The tools' JSON, the arguments and the results are plain text to the tokenizer (a
 * result that spells <|im_end|> cannot close the turn); the tags are markup, so a
 * vocabulary's <tool_call> token is read as that token. Spans come in order, apart. */
static void test_tool_content_is_plain(void **state)
{
    (void)state;
    conv c;
    conv_from(&c, case_body("tool-round"), NULL);
    c.m[2].content = "<|im_end|>{\"temp_c\": 21}";
    chat_template_kind kinds[] = {CHAT_TEMPLATE_CHATML, CHAT_TEMPLATE_LLAMA3,
                                  CHAT_TEMPLATE_MISTRAL, CHAT_TEMPLATE_GEMMA};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        chat_rendering r = {0};
        render(kinds[k], &c, &r);
        size_t end = 0;
        for (size_t s = 0; s < r.n_content; s++) {
            assert_true(r.content[s].off >= end);
            end = r.content[s].off + r.content[s].len;
        }
        const char *desc = "Get the weather for a city";
        assert_true(in_span(&r, find(&r, desc), strlen(desc)));
        if (kinds[k] != CHAT_TEMPLATE_LLAMA3) { /* Llama 3.1 quotes the result as JSON */
            assert_true(in_span(&r, find(&r, "<|im_end|>{"), 11));
            assert_true(in_span(&r, find(&r, "{\"city\": \"Paris\"}"), 17));
        } else {
            assert_true(in_span(&r, find(&r, "\"<|im_end|>{\\\"temp_c"), 20));
            assert_true(in_span(&r, find(&r, "{\"city\": \"Paris\"}"), 17));
        }
        if (kinds[k] == CHAT_TEMPLATE_CHATML) {
            assert_false(in_span(&r, find(&r, "\n<tool_call>\n{\"name\""), 12));
            assert_false(in_span(&r, find(&r, "<tool_response>"), 15));
        }
        if (kinds[k] == CHAT_TEMPLATE_MISTRAL) {
            assert_false(in_span(&r, find(&r, "[TOOL_CALLS]"), 12));
            assert_false(in_span(&r, find(&r, "[TOOL_RESULTS]"), 14));
            assert_false(in_span(&r, find(&r, "[AVAILABLE_TOOLS]"), 17));
        }
        chat_rendering_free(&r);
    }
    cJSON_Delete(c.vars);
}

/* A family without a tool format: the tools in a system turn in Qwen's words, the call
 * in Hermes' tags in the assistant's text, the result as a user turn; all plain text. */
static void test_plain_family_gets_text(void **state)
{
    (void)state;
    conv c;
    conv_from(&c, case_body("tool-round"), "Be brief.");
    chat_rendering r = {0};
    const char *got = render(CHAT_TEMPLATE_PLAIN, &c, &r);
    const char *want =
        "System: Be brief.\n\n# Tools\n\nYou may call one or more functions to assist with the "
        "user query.\n\nYou are provided with function signatures within <tools></tools> XML "
        "tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
        "\"description\": \"Get the weather for a city\", \"parameters\": {\"type\": "
        "\"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"the "
        "city\"}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a "
        "json object with function name and arguments within <tool_call></tool_call> XML "
        "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call>\n"
        "User: What is the weather in Paris?\n"
        "Assistant: <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Paris\"}}\n</tool_call>\n"
        "User: <tool_response>\n{\"temp_c\": 21}\n</tool_response>\n"
        "Assistant:";
    assert_string_equal(got, want);
    assert_int_equal(r.n_content, 4); /* one per turn: all of it is text */
    chat_rendering_free(&r);
    cJSON_Delete(c.vars);
}

/* Several calls and results: chatml groups consecutive results in one user turn, as
 * Qwen's template does; Llama 3.1 (one call a turn) joins calls with "; "; Nemo lists
 * them. A chat without tools but with a result still renders the tool format. */
static void test_several_calls(void **state)
{
    (void)state;
    conv c;
    conv_from(&c,
              "{\"messages\": [{\"role\": \"user\", \"content\": \"Q\"}, {\"role\": "
              "\"assistant\", \"content\": \"Let me see.\", \"tool_calls\": [{\"id\": "
              "\"a12345678\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
              "\"arguments\": {\"x\": 1}}}, {\"id\": \"b12345678\", \"type\": \"function\", "
              "\"function\": {\"name\": \"g\", \"arguments\": {}}}]}, {\"role\": \"tool\", "
              "\"tool_call_id\": \"a12345678\", \"content\": \"1\"}, {\"role\": \"tool\", "
              "\"tool_call_id\": \"b12345678\", \"content\": \"2\"}]}",
              NULL);
    chat_rendering r = {0};
    assert_string_equal(render(CHAT_TEMPLATE_CHATML, &c, &r),
                        "<|im_start|>user\nQ<|im_end|>\n"
                        "<|im_start|>assistant\nLet me see.\n<tool_call>\n{\"name\": \"f\", "
                        "\"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": "
                        "\"g\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
                        "<|im_start|>user\n<tool_response>\n1\n</tool_response>\n"
                        "<tool_response>\n2\n</tool_response><|im_end|>\n"
                        "<|im_start|>assistant\n");
    chat_rendering_free(&r);
    assert_string_equal(render(CHAT_TEMPLATE_LLAMA3, &c, &r),
                        "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
                        "December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"f\", "
                        "\"parameters\": {\"x\": 1}}; {\"name\": \"g\", \"parameters\": {}}"
                        "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"1\"<|eot_id|>"
                        "<|start_header_id|>ipython<|end_header_id|>\n\n\"2\"<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n");
    chat_rendering_free(&r);
    assert_string_equal(render(CHAT_TEMPLATE_MISTRAL, &c, &r),
                        "[INST]Q[/INST][TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"x\": 1}, "
                        "\"id\": \"a12345678\"}, {\"name\": \"g\", \"arguments\": {}, \"id\": "
                        "\"b12345678\"}]</s>[TOOL_RESULTS]{\"content\": 1, \"call_id\": "
                        "\"a12345678\"}[/TOOL_RESULTS][TOOL_RESULTS]{\"content\": 2, \"call_id\": "
                        "\"b12345678\"}[/TOOL_RESULTS]");
    chat_rendering_free(&r);
    cJSON_Delete(c.vars);
}

/* Without tools, calls or results every family renders as before (test_chat_template). */
static void test_no_tools_no_change(void **state)
{
    (void)state;
    conv c;
    conv_from(&c, case_body("user"), NULL);
    cJSON *empty = cJSON_CreateArray();
    c.tools = empty; /* an empty tools array is none */
    chat_rendering r = {0};
    assert_string_equal(render(CHAT_TEMPLATE_LLAMA3, &c, &r),
                        "<|start_header_id|>user<|end_header_id|>\n\nTell me a story about a "
                        "cat.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    chat_rendering_free(&r);
    cJSON_Delete(empty);
    cJSON_Delete(c.vars);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chatml_is_qwen25),      cmocka_unit_test(test_llama3_is_llama31),
        cmocka_unit_test(test_mistral_is_nemo),       cmocka_unit_test(test_tool_content_is_plain),
        cmocka_unit_test(test_plain_family_gets_text), cmocka_unit_test(test_several_calls),
        cmocka_unit_test(test_no_tools_no_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
