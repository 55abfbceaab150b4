/* test_server_toolcall.c: the tool-call parsers of each family on fixed answers: calls
 * well formed, malformed (they stay text), several, with text before and after; and each
 * answer fed in two pieces at every split point, and byte by byte, gives exactly what it
 * gives fed whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "gguf/gguf.h"
#include "server/toolcall.h"
#include "util.h"

/* What a whole answer gave: content, then "name(args)" per call joined by " | ". */
typedef struct result {
    strbuf content;
    strbuf calls;
} result;

static void add_out(result *r, const toolcall_out *o)
{
    strbuf_add(&r->content, o->content.s ? o->content.s : "", o->content.len);
    for (size_t i = 0; i < o->n_calls; i++)
        strbuf_addf(&r->calls, "%s%s(%s)", r->calls.len ? " | " : "", o->calls[i].name,
                    o->calls[i].arguments);
}

/* The declared tools the parsers check calls against (toolcall_declare); NULL: none
 * declared, any name is a call. Set by the test that needs it. */
static const cJSON *declared_tools;

/* Feeds text cut at the offsets in cuts (ascending, n_cuts of them), resetting the output
 * after each piece as a stream does. */
static void parse_pieces(toolcall_syntax syn, const char *text, const size_t *cuts,
                         size_t n_cuts, result *r)
{
    toolcall_parser p;
    toolcall_out o = {0};
    toolcall_init(&p, syn);
    if (declared_tools)
        toolcall_declare(&p, declared_tools);
    *r = (result){0};
    size_t at = 0, len = strlen(text);
    for (size_t k = 0; k <= n_cuts; k++) {
        size_t to = k < n_cuts ? cuts[k] : len;
        assert_true(toolcall_feed(&p, text + at, to - at, &o));
        add_out(r, &o);
        toolcall_out_reset(&o);
        at = to;
    }
    assert_true(toolcall_finish(&p, &o));
    add_out(r, &o);
    strbuf_add(&r->content, "", 0);
    strbuf_add(&r->calls, "", 0);
    toolcall_out_free(&o);
    toolcall_parser_free(&p);
}

static void result_free(result *r)
{
    strbuf_free(&r->content);
    strbuf_free(&r->calls);
}

/* text parsed whole gives content and calls; and so does every way of cutting it in two,
 * and byte by byte. */
static void expect(toolcall_syntax syn, const char *text, const char *content, const char *calls)
{
    result whole;
    parse_pieces(syn, text, NULL, 0, &whole);
    if (strcmp(whole.content.s, content) || strcmp(whole.calls.s, calls))
        fail_msg("%s\ncontent '%s' (want '%s')\ncalls '%s' (want '%s')", text, whole.content.s,
                 content, whole.calls.s, calls);
    size_t len = strlen(text);
    for (size_t cut = 0; cut <= len; cut++) {
        result r;
        parse_pieces(syn, text, &cut, 1, &r);
        if (strcmp(r.content.s, content) || strcmp(r.calls.s, calls))
            fail_msg("%s cut at %zu:\ncontent '%s'\ncalls '%s'", text, cut, r.content.s,
                     r.calls.s);
        result_free(&r);
    }
    size_t *every = malloc((len + 1) * sizeof *every);
    for (size_t i = 0; i < len; i++)
        every[i] = i + 1;
    result r;
    parse_pieces(syn, text, every, len ? len - 1 : 0, &r);
    if (strcmp(r.content.s, content) || strcmp(r.calls.s, calls))
        fail_msg("%s byte by byte:\ncontent '%s'\ncalls '%s'", text, r.content.s, r.calls.s);
    result_free(&r);
    free(every);
    result_free(&whole);
}

#define CALL_JSON "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
#define CALL_OUT "get_weather({\"city\":\"Paris\"})"

/* Only declared tools are called: an undeclared name stays the text the model wrote, in
 * every syntax; and a NUL spelled in a name or in the arguments (cJSON would cut the C
 * strings there) leaves the call as its text, the escape kept. */
static void test_declared_tools_only(void **state)
{
    (void)state;
    cJSON *tools = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": "
                               "\"get_weather\", \"parameters\": {\"type\": \"object\"}}}]");
    assert_non_null(tools);
    declared_tools = tools;
    expect(TOOLCALL_SYNTAX_HERMES, "<tool_call>" CALL_JSON "</tool_call>", "", CALL_OUT);
    const char *evil = "<tool_call>{\"name\": \"delete_all_files\", \"arguments\": {}}</tool_call>";
    expect(TOOLCALL_SYNTAX_HERMES, evil, evil, "");
    const char *evil_json = "{\"name\": \"delete_all_files\", \"arguments\": {}}";
    expect(TOOLCALL_SYNTAX_JSON, evil_json, evil_json, "");
    const char *evil_mistral = "[TOOL_CALLS]delete_all_files[ARGS]{\"path\": \"/\"}";
    expect(TOOLCALL_SYNTAX_MISTRAL, evil_mistral, evil_mistral, "");
    const char *nul_name =
        "<tool_call>{\"name\": \"get_weather\\u0000evil\", \"arguments\": {}}</tool_call>";
    expect(TOOLCALL_SYNTAX_HERMES, nul_name, nul_name, "");
    const char *nul_args = "<tool_call>{\"name\": \"get_weather\", \"arguments\": "
                           "{\"city\": \"Paris\\u0000; rm -rf /\"}}</tool_call>";
    expect(TOOLCALL_SYNTAX_HERMES, nul_args, nul_args, "");
    declared_tools = NULL;
    /* with nothing declared, a name is a name, but a NUL still leaves the text */
    expect(TOOLCALL_SYNTAX_HERMES, evil, "", "delete_all_files({})");
    expect(TOOLCALL_SYNTAX_HERMES, nul_name, nul_name, "");
    cJSON_Delete(tools);
}

static void test_hermes(void **state)
{
    (void)state;
    toolcall_syntax h = TOOLCALL_SYNTAX_HERMES;
    expect(h, "<tool_call>\n" CALL_JSON "\n</tool_call>", "", CALL_OUT);
    expect(h, "Let me check.\n<tool_call>\n" CALL_JSON "\n</tool_call>", "Let me check.\n",
           CALL_OUT);
    /* several calls; whitespace between and after them is dropped */
    expect(h,
           "<tool_call>\n" CALL_JSON "\n</tool_call>\n<tool_call>\n{\"name\": \"now\", "
           "\"arguments\": {}}\n</tool_call>\n",
           "", CALL_OUT " | now({})");
    /* text after a call stays content */
    expect(h, "<tool_call>" CALL_JSON "</tool_call>\nDone.", "\nDone.", CALL_OUT);
    /* the closing tag may be missing when the answer ends (or cut) */
    expect(h, "<tool_call>\n" CALL_JSON "\n</tool", "", CALL_OUT);
    expect(h, "<tool_call>\n" CALL_JSON, "", CALL_OUT);
    /* arguments given as a string of JSON, or left out */
    expect(h, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": [1, 2]}\"}</tool_call>",
           "", "f({\"x\":[1,2]})");
    expect(h, "<tool_call>{\"name\": \"f\"}</tool_call>", "", "f({})");
    /* malformed: stays text, and the parser goes on */
    expect(h, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": }}</tool_call>",
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": }}</tool_call>", "");
    expect(h, "<tool_call>{\"arguments\": {}}</tool_call>",
           "<tool_call>{\"arguments\": {}}</tool_call>", "");
    expect(h, "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>",
           "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>", "");
    expect(h, "<tool_call>hello</tool_call>", "<tool_call>hello</tool_call>", "");
    expect(h, "<tool_call>{\"name\": \"f\"} and more", "<tool_call>{\"name\": \"f\"} and more",
           "");
    expect(h, "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"}\"", 
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"}\"", "");
    expect(h, "a <tool_call>x</tool_call> b <tool_call>{\"name\": \"g\"}</tool_call>",
           "a <tool_call>x</tool_call> b ", "g({})");
    /* brackets and quotes inside strings do not end the JSON */
    expect(h, "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"}]\\\"{\"}}</tool_call>", "",
           "f({\"s\":\"}]\\\"{\"})");
    /* a marker's beginning that never completes is text */
    expect(h, "x < y and <tool", "x < y and <tool", "");
    expect(h, "Hello, world", "Hello, world", "");
    expect(h, "", "", "");
}

static void test_mistral(void **state)
{
    (void)state;
    toolcall_syntax m = TOOLCALL_SYNTAX_MISTRAL;
    expect(m, "[TOOL_CALLS][" CALL_JSON "]", "", CALL_OUT);
    expect(m, "[TOOL_CALLS] [" CALL_JSON ", {\"name\": \"now\", \"arguments\": {}, \"id\": "
              "\"abcDEF123\"}]",
           "", CALL_OUT " | now({})");
    expect(m, "Sure. [TOOL_CALLS][" CALL_JSON "]\n", "Sure. ", CALL_OUT);
    expect(m, "[TOOL_CALLS]" CALL_JSON, "", CALL_OUT); /* one object without the list */
    expect(m, "[TOOL_CALLS][]", "[TOOL_CALLS][]", "");
    expect(m, "[TOOL_CALLS][{\"name\": \"f\"}, 3]", "[TOOL_CALLS][{\"name\": \"f\"}, 3]", "");
    expect(m, "[TOOL_CALLS][{\"name\": \"f\"", "[TOOL_CALLS][{\"name\": \"f\"", "");
    expect(m, "[TOOL_CALLS] hello", "[TOOL_CALLS] hello", "");
    expect(m, "[INST] is not [TOOL", "[INST] is not [TOOL", "");

    /* Small 3.2, Magistral, Devstral: [TOOL_CALLS]name[ARGS]{arguments} per call; [ARGS]
     * is a control token in their vocabularies, so its text may be missing */
    expect(m, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", "", CALL_OUT);
    expect(m, "[TOOL_CALLS]get_weather{\"city\": \"Paris\"}", "", CALL_OUT);
    expect(m, "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]now[ARGS]{}",
           "Sure.", CALL_OUT " | now({})");
    expect(m, "[TOOL_CALLS]f[ARGS][1]", "[TOOL_CALLS]f[ARGS][1]", "");
    expect(m, "[TOOL_CALLS]f[ARGS]\"x\"", "[TOOL_CALLS]f[ARGS]\"x\"", "");
    expect(m, "[TOOL_CALLS]get weather", "[TOOL_CALLS]get weather", "");
    expect(m, "[TOOL_CALLS]f[ARG", "[TOOL_CALLS]f[ARG", "");
    expect(m, "[TOOL_CALLS]f[ARGS]{\"a\": 1", "[TOOL_CALLS]f[ARGS]{\"a\": 1", "");
    expect(m, "[TOOL_CALLS]f[X]{}", "[TOOL_CALLS]f[X]{}", "");
}

/* The real templates of Qwen 2.5 and Mistral Nemo (../shared/chat-templates) pick the
 * syntax their models answer in; Qwen3's answers put their thinking before the calls. */
static void test_family_templates(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        toolcall_syntax syntax;
    } fam[] = {
        {"chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja", TOOLCALL_SYNTAX_HERMES},
        {"chat-templates/NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
         TOOLCALL_SYNTAX_HERMES},
        {"chat-templates/mistralai-Mistral-Nemo-Instruct-2407.jinja", TOOLCALL_SYNTAX_MISTRAL},
        {"chat-templates/meta-llama-Llama-3.1-8B-Instruct.jinja", TOOLCALL_SYNTAX_LLAMA3},
    };
    for (size_t i = 0; i < sizeof fam / sizeof *fam; i++) {
        char *t = tu_read_file(tu_shared(fam[i].file), NULL);
        assert_non_null(t);
        assert_int_equal(toolcall_syntax_for(chat_template_detect(t)), fam[i].syntax);
        free(t);
    }
    expect(TOOLCALL_SYNTAX_HERMES,
           "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n" CALL_JSON
           "\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
           "<think>\nThe user wants the weather.\n</think>\n\n", CALL_OUT " | now({})");
}

static void test_llama3(void **state)
{
    (void)state;
    toolcall_syntax l = TOOLCALL_SYNTAX_LLAMA3;
    expect(l, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", CALL_OUT);
    expect(l, "\n {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n", "",
           CALL_OUT);
    expect(l, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
           "", CALL_OUT);
    expect(l, "Checking. <|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "Checking. ",
           "f({})");
    expect(l,
           "{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {\"a\": 1}}",
           "", "f({}) | g({\"a\":1})");
    /* JSON that is no call, a call not at the start, and text: content */
    expect(l, "{\"a\": 1} is JSON", "{\"a\": 1} is JSON", "");
    expect(l, "{\"name\": \"f\"}", "{\"name\": \"f\"}", ""); /* no parameters: no call */
    expect(l, "Use {\"name\": \"f\", \"parameters\": {}}", "Use {\"name\": \"f\", "
              "\"parameters\": {}}", "");
    expect(l, "  Hello", "  Hello", "");
    expect(l, "{\"name\": \"f\", \"parameters\": {}} then text", " then text", "f({})");
}

static void test_json(void **state)
{
    (void)state;
    toolcall_syntax j = TOOLCALL_SYNTAX_JSON;
    expect(j, CALL_JSON, "", CALL_OUT);
    expect(j, "[" CALL_JSON ",{\"name\":\"now\",\"arguments\":{}}]", "", CALL_OUT " | now({})");
    /* cut short by max_tokens: not a call, the text is the content */
    expect(j, "[{\"name\":\"now\",\"argu", "[{\"name\":\"now\",\"argu", "");
    expect(j, "{\"name\":\"now\"", "{\"name\":\"now\"", "");
}

static void test_none(void **state)
{
    (void)state;
    expect(TOOLCALL_SYNTAX_NONE, "<tool_call>" CALL_JSON "</tool_call>",
           "<tool_call>" CALL_JSON "</tool_call>", "");
    assert_int_equal(toolcall_syntax_for(CHAT_TEMPLATE_CHATML), TOOLCALL_SYNTAX_HERMES);
    assert_int_equal(toolcall_syntax_for(CHAT_TEMPLATE_LLAMA3), TOOLCALL_SYNTAX_LLAMA3);
    assert_int_equal(toolcall_syntax_for(CHAT_TEMPLATE_MISTRAL), TOOLCALL_SYNTAX_MISTRAL);
    assert_int_equal(toolcall_syntax_for(CHAT_TEMPLATE_PLAIN), TOOLCALL_SYNTAX_HERMES);
    assert_string_equal(toolcall_marker(TOOLCALL_SYNTAX_MISTRAL), "[TOOL_CALLS]");
    assert_null(toolcall_marker(TOOLCALL_SYNTAX_JSON));
}

/* A marker the vocabulary holds as a control token (never printed) is found by its id;
 * one it holds as a user-defined token (printed) or not at all is not. */
static void test_marker_tokens(void **state)
{
    (void)state;
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "[TOOL_CALLS]", "<tool_call>", "a"};
    static const int32_t types[] = {2, 3, 3, 3, 4, 1};
    gguf_writer *w = NULL;
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, 6);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 6);
    const char *path = tu_tmp_path("markers.gguf");
    ts_error err = {0};
    assert_int_equal(gguf_writer_write_file(w, path, &err), TS_OK);
    gguf_writer_free(w);
    ts_tokenizer *tok = NULL;
    if (ts_tokenizer_load_gguf(path, &tok, &err) != TS_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(toolcall_marker_token(tok, TOOLCALL_SYNTAX_MISTRAL), 3);
    assert_int_equal(toolcall_marker_token(tok, TOOLCALL_SYNTAX_HERMES), -1);
    assert_int_equal(toolcall_marker_token(tok, TOOLCALL_SYNTAX_LLAMA3), -1);
    assert_int_equal(toolcall_marker_token(tok, TOOLCALL_SYNTAX_JSON), -1);
    ts_tokenizer_free(tok);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_declared_tools_only), cmocka_unit_test(test_hermes), cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_llama3), cmocka_unit_test(test_json),
        cmocka_unit_test(test_none),   cmocka_unit_test(test_marker_tokens),
        cmocka_unit_test(test_family_templates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
