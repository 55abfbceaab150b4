/* chat_tools.c: the built-in families' renderings of chats with tools, tool calls or tool
 * results, as the families' tool-trained models' templates write them: chatml as Qwen 2.5
 * (Hermes' tags), llama3 as Llama 3.1, mistral as Mistral Nemo; the other families get
 * the tools, calls and results as plain text in Qwen's words. */
#include <stdlib.h>
#include <string.h>

#include "template/chat_internal.h"
#include "template/jinja.h"

#define markup chat_template__markup

/* Qwen 2.5's tool instructions, around one JSON line per tool. */
static const char QWEN_TOOLS_HEAD[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char QWEN_TOOLS_TAIL[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
/* Llama 3.1's, before the tools in the first user message (tools_in_user_message). */
static const char LLAMA31_TOOLS_HEAD[] =
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\nRespond in the format "
    "{\"name\": function name, \"parameters\": dictionary of argument name and its value}."
    "Do not use variables.\n\n";

static bool is(const chat_message *m, const char *role) { return !strcmp(m->role, role); }

static void text(chat_render *out, const char *s, bool trim)
{
    chat_template__content(out, s, strlen(s), trim, trim);
}

/* A call's function object ({"name", "arguments"}), or the call itself when it has none,
 * as Qwen's template reads it. */
static const cJSON *call_function(const cJSON *call)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
    return cJSON_IsObject(fn) ? fn : call;
}

static const char *call_name(const cJSON *fn)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    return cJSON_IsString(name) ? name->valuestring : "";
}

/* The call's arguments as JSON (an object unless the client sent something else); {}
 * when it sent none. */
static bool call_args(chat_render *out, const cJSON *fn)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    if (args)
        return chat_template__json(out, args, -1);
    markup(out, "{}", NULL);
    return true;
}

/* ---- chatml: Qwen 2.5 (its default system text left out, as Qwen 3 does) */

static bool render_chatml(chat_render *out, const chat_message *m, size_t n, const cJSON *tools)
{
    bool ok = true;
    size_t i = 0;
    if (cJSON_GetArraySize(tools) > 0) {
        markup(out, "<|im_start|>system\n", NULL);
        if (n > 0 && is(&m[0], "system")) {
            text(out, m[0].content, false);
            markup(out, "\n\n", NULL);
            i = 1;
        }
        markup(out, QWEN_TOOLS_HEAD, NULL);
        const cJSON *t;
        cJSON_ArrayForEach(t, tools) {
            markup(out, "\n", NULL);
            ok = ok && chat_template__json(out, t, -1);
        }
        markup(out, QWEN_TOOLS_TAIL, "<|im_end|>\n", NULL);
    }
    for (; i < n; i++) {
        if (is(&m[i], "tool")) { /* consecutive results share one user turn */
            if (i == 0 || !is(&m[i - 1], "tool"))
                markup(out, "<|im_start|>user", NULL);
            markup(out, "\n<tool_response>\n", NULL);
            text(out, m[i].content, false);
            markup(out, "\n</tool_response>", NULL);
            if (i + 1 == n || !is(&m[i + 1], "tool"))
                markup(out, "<|im_end|>\n", NULL);
        } else if (is(&m[i], "assistant") && cJSON_GetArraySize(m[i].tool_calls) > 0) {
            markup(out, "<|im_start|>assistant", NULL);
            if (m[i].content[0]) {
                markup(out, "\n", NULL);
                text(out, m[i].content, false);
            }
            const cJSON *c;
            cJSON_ArrayForEach(c, m[i].tool_calls) {
                markup(out, "\n<tool_call>\n{\"name\": \"", NULL);
                text(out, call_name(call_function(c)), false);
                markup(out, "\", \"arguments\": ", NULL);
                ok = ok && call_args(out, call_function(c));
                markup(out, "}\n</tool_call>", NULL);
            }
            markup(out, "<|im_end|>\n", NULL);
        } else {
            markup(out, "<|im_start|>", m[i].role, "\n", NULL);
            text(out, m[i].content, false);
            markup(out, "<|im_end|>\n", NULL);
        }
    }
    markup(out, "<|im_start|>assistant\n", NULL);
    return ok;
}

/* ---- llama3: Llama 3.1 (tools in the first user message, its default date) */

static void llama3_header(chat_render *out, const char *role)
{
    markup(out, "<|start_header_id|>", role, "<|end_header_id|>\n\n", NULL);
}

static bool render_llama31(chat_render *out, const chat_message *m, size_t n, const cJSON *tools)
{
    bool ok = true, with_tools = cJSON_GetArraySize(tools) > 0;
    size_t i = 0;
    llama3_header(out, "system");
    if (with_tools)
        markup(out, "Environment: ipython\n", NULL);
    markup(out, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n", NULL);
    if (n > 0 && is(&m[0], "system"))
        text(out, m[i++].content, true);
    markup(out, "<|eot_id|>", NULL);
    if (with_tools) {
        llama3_header(out, "user");
        markup(out, LLAMA31_TOOLS_HEAD, NULL);
        const cJSON *t;
        cJSON_ArrayForEach(t, tools) {
            ok = ok && chat_template__json(out, t, 4);
            markup(out, "\n\n", NULL);
        }
        if (i < n && is(&m[i], "user"))
            text(out, m[i++].content, true);
        markup(out, "<|eot_id|>", NULL);
    }
    for (; i < n; i++) {
        if (is(&m[i], "tool")) {
            llama3_header(out, "ipython");
            cJSON *s = cJSON_CreateString(m[i].content); /* a string: tojson quotes it */
            ok = ok && s && chat_template__json(out, s, -1);
            cJSON_Delete(s);
        } else if (is(&m[i], "assistant") && cJSON_GetArraySize(m[i].tool_calls) > 0) {
            llama3_header(out, "assistant");
            const cJSON *c;
            cJSON_ArrayForEach(c, m[i].tool_calls) { /* Llama 3.1 makes one call a turn */
                markup(out, c == m[i].tool_calls->child ? "" : "; ", "{\"name\": \"", NULL);
                text(out, call_name(call_function(c)), false);
                markup(out, "\", \"parameters\": ", NULL);
                ok = ok && call_args(out, call_function(c));
                markup(out, "}", NULL);
            }
        } else {
            llama3_header(out, m[i].role);
            text(out, m[i].content, true);
        }
        markup(out, "<|eot_id|>", NULL);
    }
    llama3_header(out, "assistant");
    return ok;
}

/* ---- mistral: Mistral Nemo (tools and the system text before the last user message) */

static bool render_nemo(chat_render *out, const chat_message *m, size_t n, const cJSON *tools)
{
    bool ok = true;
    const char *system = n > 0 && is(&m[0], "system") ? m[0].content : NULL;
    size_t last_user = n;
    for (size_t i = 0; i < n; i++)
        if (is(&m[i], "user"))
            last_user = i;
    for (size_t i = system ? 1 : 0; i < n; i++) {
        if (is(&m[i], "user")) {
            if (i == last_user && cJSON_GetArraySize(tools) > 0) {
                markup(out, "[AVAILABLE_TOOLS][", NULL);
                const cJSON *t;
                cJSON_ArrayForEach(t, tools) { /* the function's members but "return" */
                    cJSON *fn = cJSON_Duplicate(call_function(t), true);
                    cJSON_DeleteItemFromObjectCaseSensitive(fn, "return");
                    markup(out, t == tools->child ? "" : ", ",
                           "{\"type\": \"function\", \"function\": ", NULL);
                    ok = ok && fn && chat_template__json(out, fn, -1);
                    markup(out, "}", NULL);
                    cJSON_Delete(fn);
                }
                markup(out, "][/AVAILABLE_TOOLS]", NULL);
            }
            markup(out, "[INST]", NULL);
            if (i == last_user && system) {
                text(out, system, false);
                markup(out, "\n\n", NULL);
            }
            text(out, m[i].content, false);
            markup(out, "[/INST]", NULL);
        } else if (is(&m[i], "assistant") && cJSON_GetArraySize(m[i].tool_calls) > 0) {
            markup(out, "[TOOL_CALLS][", NULL);
            const cJSON *c;
            cJSON_ArrayForEach(c, m[i].tool_calls) {
                const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
                /* tojson of {"name", "arguments"} less its closing brace, then the id */
                markup(out, c == m[i].tool_calls->child ? "" : ", ", "{\"name\": \"", NULL);
                text(out, call_name(call_function(c)), false);
                markup(out, "\", \"arguments\": ", NULL);
                ok = ok && call_args(out, call_function(c));
                markup(out, ", \"id\": \"", NULL);
                text(out, cJSON_IsString(id) ? id->valuestring : "", false);
                markup(out, "\"}", NULL);
            }
            markup(out, "]</s>", NULL);
        } else if (is(&m[i], "assistant")) {
            text(out, m[i].content, false);
            markup(out, "</s>", NULL);
        } else if (is(&m[i], "tool")) {
            markup(out, "[TOOL_RESULTS]{\"content\": ", NULL);
            text(out, m[i].content, false);
            markup(out, ", \"call_id\": \"", NULL);
            text(out, m[i].tool_call_id ? m[i].tool_call_id : "", false);
            markup(out, "\"}[/TOOL_RESULTS]", NULL);
        } /* a system message after the first: Nemo has no place for it */
    }
    return ok;
}

/* ---- the other families: messages rewritten as plain text, then rendered as usual */

/* Appends to b the text of an assistant's calls in Hermes' tags. */
static bool calls_text(strbuf *b, const cJSON *calls)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = call_function(c);
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        char *a = args ? jinja_tojson(args, -1) : NULL;
        if (args && !a)
            return false;
        strbuf_addf(b, "%s<tool_call>\n{\"name\": \"%s\", \"arguments\": %s}\n</tool_call>",
                    c == calls->child ? "" : "\n", call_name(fn), a ? a : "{}");
        free(a);
    }
    return !b->failed;
}

static ts_status render_rewritten(chat_render *out, chat_template_kind kind,
                                  const chat_message *m, size_t n, const cJSON *tools,
                                  chat_plain_renderer *render)
{
    chat_message *mm = calloc(n + 1, sizeof *mm);
    strbuf *own = calloc(n + 1, sizeof *own); /* rewritten texts, by index in mm */
    bool ok = mm && own;
    size_t k = 0, i = 0;
    if (ok && cJSON_GetArraySize(tools) > 0) {
        if (n > 0 && is(&m[0], "system"))
            strbuf_addf(&own[k], "%s\n\n", m[i++].content);
        strbuf_add(&own[k], QWEN_TOOLS_HEAD, strlen(QWEN_TOOLS_HEAD));
        const cJSON *t;
        cJSON_ArrayForEach(t, tools) {
            char *j = jinja_tojson(t, -1);
            ok = ok && j && strbuf_addf(&own[k], "\n%s", j);
            free(j);
        }
        strbuf_add(&own[k], QWEN_TOOLS_TAIL, strlen(QWEN_TOOLS_TAIL));
        mm[k++].role = "system";
    }
    for (; ok && i < n; i++) {
        if (is(&m[i], "tool")) { /* consecutive results share one user turn */
            if (!(i > 0 && is(&m[i - 1], "tool")))
                mm[k++].role = "user";
            strbuf_addf(&own[k - 1], "%s<tool_response>\n%s\n</tool_response>",
                        i > 0 && is(&m[i - 1], "tool") ? "\n" : "", m[i].content);
        } else if (is(&m[i], "assistant") && cJSON_GetArraySize(m[i].tool_calls) > 0) {
            strbuf_addf(&own[k], "%s%s", m[i].content, m[i].content[0] ? "\n" : "");
            ok = calls_text(&own[k], m[i].tool_calls);
            mm[k++].role = "assistant";
        } else {
            mm[k++] = m[i];
        }
    }
    for (size_t j = 0; ok && j < k; j++) {
        ok = !own[j].failed;
        if (own[j].s)
            mm[j].content = own[j].s;
    }
    if (ok)
        render(out, kind, mm, k);
    for (size_t j = 0; own && j <= n; j++)
        strbuf_free(&own[j]);
    free(own);
    free(mm);
    return ok ? TS_OK : TS_ERR_NOMEM;
}

ts_status chat_template__render_tools(chat_render *out, chat_template_kind kind,
                                      const chat_message *m, size_t n, const cJSON *tools,
                                      chat_plain_renderer *render)
{
    bool ok;
    switch (kind) {
    case CHAT_TEMPLATE_CHATML: ok = render_chatml(out, m, n, tools); break;
    case CHAT_TEMPLATE_LLAMA3: ok = render_llama31(out, m, n, tools); break;
    case CHAT_TEMPLATE_MISTRAL: ok = render_nemo(out, m, n, tools); break;
    default: return render_rewritten(out, kind, m, n, tools, render);
    }
    return ok ? TS_OK : TS_ERR_NOMEM;
}
