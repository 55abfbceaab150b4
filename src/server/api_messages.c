/* api_messages.c: Anthropic's Messages API: system, messages of text, tool_use
 * and tool_result blocks, tools with an input_schema and tool_choice become a
 * chat body; the answer becomes a "message" of text and tool_use blocks, or its
 * stream of message_start, content_block_* and message_delta / message_stop
 * events. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/api.h"

/* docs/API.md's Messages table says the same; keep them together. */
static const api_field fields[] = {
    {"model", API_FIELD_COPY, NULL},
    {"max_tokens", API_FIELD_OWN, NULL},
    {"system", API_FIELD_OWN, NULL},
    {"messages", API_FIELD_OWN, NULL},
    {"tools", API_FIELD_OWN, NULL},
    {"tool_choice", API_FIELD_OWN, NULL},
    {"thinking", API_FIELD_OWN, NULL},
    {"stop_sequences", API_FIELD_COPY, "stop"},
    {"temperature", API_FIELD_COPY, NULL},
    {"top_p", API_FIELD_COPY, NULL},
    {"top_k", API_FIELD_COPY, NULL},
    {"stream", API_FIELD_COPY, NULL},
    /* tessera's sampling extensions, as on chat completions */
    {"min_p", API_FIELD_COPY, NULL},
    {"seed", API_FIELD_COPY, NULL},
    {"ignore_eos", API_FIELD_COPY, NULL},
    {"metadata", API_FIELD_NOOP, NULL},
    {"service_tier", API_FIELD_NOOP, NULL},
    {"container", API_FIELD_REFUSED, "code execution containers are not supported"},
    {"mcp_servers", API_FIELD_REFUSED, "MCP servers are not supported"},
};

/* ---- the request */

/* Adds {"type": "text", "text": text} to parts; false when out of memory. */
static bool add_text_part(cJSON *parts, const char *text)
{
    cJSON *p = cJSON_CreateObject();
    if (!p || !cJSON_AddStringToObject(p, "type", "text") ||
        !cJSON_AddStringToObject(p, "text", text) || !cJSON_AddItemToArray(parts, p)) {
        cJSON_Delete(p);
        return false;
    }
    return true;
}

/* Content as text parts: a string, or text blocks (tool results may hold only
 * these). */
static ts_status text_blocks(const cJSON *c, const char *name, cJSON **out, oai_error *err)
{
    if (!(*out = cJSON_CreateArray()))
        return api__oom(err);
    if (cJSON_IsString(c))
        return add_text_part(*out, c->valuestring) ? TS_OK : api__oom(err);
    if (!cJSON_IsArray(c))
        return api__wrong_type(err, name, "a string or an array of text blocks");
    int k = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, c)
    {
        char bname[96];
        snprintf(bname, sizeof bname, "%s[%d]", name, k++);
        const char *type = api__string(b, "type"), *text = api__string(b, "text");
        if (!type || strcmp(type, "text") || !text)
            return oai_error_set(err, 400, bname, "unsupported_value",
                                 "'%s' must be a text block ({\"type\": \"text\", \"text\": "
                                 "string}); images and documents are not supported",
                                 bname);
        if (!add_text_part(*out, text))
            return api__oom(err);
    }
    return TS_OK;
}

/* A tool_result block: the tool message answering tool_use_id. */
static ts_status tool_result(const cJSON *b, const char *name, cJSON *msgs, oai_error *err)
{
    char field[128];
    snprintf(field, sizeof field, "%s.tool_use_id", name);
    const char *id = api__string(b, "tool_use_id");
    if (!id)
        return api__wrong_type(err, field, "a string");
    snprintf(field, sizeof field, "%s.content", name);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(b, "content");
    cJSON *content = NULL;
    if (!c || cJSON_IsNull(c))
        content = cJSON_CreateString("");
    else if (text_blocks(c, field, &content, err) != TS_OK) {
        cJSON_Delete(content);
        return TS_ERR_INVALID_ARG;
    }
    cJSON *m = api__add_message(msgs, "tool", content);
    return m && cJSON_AddStringToObject(m, "tool_call_id", id) ? TS_OK : api__oom(err);
}

/* A tool_use block as a call of the assistant message m. */
static ts_status tool_use(const cJSON *b, const char *name, cJSON *m, oai_error *err)
{
    char field[128];
    static const char *const keys[] = {"id", "name"};
    for (size_t k = 0; k < 2; k++)
        if (!api__string(b, keys[k])) {
            snprintf(field, sizeof field, "%s.%s", name, keys[k]);
            return api__wrong_type(err, field, "a string");
        }
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
    snprintf(field, sizeof field, "%s.input", name);
    if (!cJSON_IsObject(input))
        return api__wrong_type(err, field, "an object");
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (!calls && !(calls = cJSON_AddArrayToObject(m, "tool_calls")))
        return api__oom(err);
    char *args = cJSON_PrintUnformatted(input);
    cJSON *call = cJSON_CreateObject(), *fn = cJSON_CreateObject();
    bool ok = args && call && fn && cJSON_AddStringToObject(call, "id", api__string(b, "id")) &&
              cJSON_AddStringToObject(call, "type", "function") &&
              cJSON_AddStringToObject(fn, "name", api__string(b, "name")) &&
              cJSON_AddStringToObject(fn, "arguments", args) &&
              cJSON_AddItemToObject(call, "function", fn);
    free(args);
    if (!ok)
        cJSON_Delete(fn);
    if (!ok || !cJSON_AddItemToArray(calls, call)) {
        cJSON_Delete(call);
        return api__oom(err);
    }
    return TS_OK;
}

/* messages[i]'s blocks: a user turn's tool_result blocks become tool messages
 * (before its text); an assistant turn's tool_use blocks become its tool_calls;
 * thinking blocks are skipped. */
static ts_status read_blocks(const cJSON *blocks, const char *name, bool user, cJSON *msgs,
                             oai_error *err)
{
    cJSON *parts = cJSON_CreateArray();
    cJSON *m = parts ? cJSON_CreateObject() : NULL; /* the assistant's, until added */
    if (!m) {
        cJSON_Delete(parts);
        return api__oom(err);
    }
    ts_status st = TS_OK;
    int k = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, blocks)
    {
        char bname[96];
        snprintf(bname, sizeof bname, "%s[%d]", name, k++);
        const char *type = api__string(b, "type");
        if (!type)
            st = api__wrong_type(err, bname, "a content block with a string 'type'");
        else if (!strcmp(type, "text"))
            st = api__string(b, "text")
                     ? (add_text_part(parts, api__string(b, "text")) ? TS_OK : api__oom(err))
                     : api__wrong_type(err, bname, "a text block with a string 'text'");
        else if (user && !strcmp(type, "tool_result"))
            st = tool_result(b, bname, msgs, err);
        else if (!user && !strcmp(type, "tool_use"))
            st = tool_use(b, bname, m, err);
        else if (!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking"))
            st = TS_OK;
        else
            st = oai_error_set(err, 400, bname, "unsupported_value",
                               "'%s' is a %.40s block; a %s turn may hold text%s blocks", bname,
                               type, user ? "user" : "assistant",
                               user ? " and tool_result" : " and tool_use");
        if (st != TS_OK)
            break;
    }
    bool calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls") != NULL;
    bool want = st == TS_OK && (cJSON_GetArraySize(parts) || calls);
    if (want) { /* the turn's own message, with its text and calls */
        cJSON *text = cJSON_GetArraySize(parts) ? parts : NULL; /* calls alone: null */
        cJSON *own = api__add_message(msgs, user ? "user" : "assistant", text);
        if (text)
            parts = NULL; /* the message owns it now (or freed it) */
        cJSON *tc = cJSON_DetachItemFromObjectCaseSensitive(m, "tool_calls");
        if (!own || (tc && !cJSON_AddItemToObject(own, "tool_calls", tc))) {
            cJSON_Delete(tc);
            st = api__oom(err);
        }
    }
    cJSON_Delete(parts);
    cJSON_Delete(m);
    return st;
}

static ts_status read_messages(const cJSON *root, cJSON *msgs, oai_error *err)
{
    const cJSON *system = cJSON_GetObjectItemCaseSensitive(root, "system");
    if (system && !cJSON_IsNull(system)) {
        cJSON *content = NULL;
        if (text_blocks(system, "system", &content, err) != TS_OK) {
            cJSON_Delete(content);
            return TS_ERR_INVALID_ARG;
        }
        if (!api__add_message(msgs, "system", content))
            return api__oom(err);
    }
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!list)
        return oai_error_set(err, 400, "messages", "missing_required_parameter",
                             "'messages' is required");
    if (!cJSON_IsArray(list) || !cJSON_GetArraySize(list))
        return api__wrong_type(err, "messages", "a non-empty array");
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, list)
    {
        char name[48];
        snprintf(name, sizeof name, "messages[%d].role", i);
        const char *role = api__string(m, "role");
        if (!cJSON_IsObject(m) || !role || (strcmp(role, "user") && strcmp(role, "assistant")))
            return api__wrong_type(err, name, "\"user\" or \"assistant\"");
        snprintf(name, sizeof name, "messages[%d].content", i++);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        ts_status st;
        if (cJSON_IsString(c))
            st = api__add_message(msgs, role, cJSON_CreateString(c->valuestring))
                     ? TS_OK
                     : api__oom(err);
        else if (cJSON_IsArray(c))
            st = read_blocks(c, name, !strcmp(role, "user"), msgs, err);
        else
            st = api__wrong_type(err, name, "a string or an array of content blocks");
        if (st != TS_OK)
            return st;
    }
    return TS_OK;
}

/* max_tokens: required to create a message, as Anthropic's API wants it; optional
 * when only counting tokens. */
static ts_status read_max_tokens(const cJSON *root, cJSON *chat, bool required, oai_error *err)
{
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "max_tokens");
    if ((!mt || cJSON_IsNull(mt)) && !required)
        return TS_OK;
    if (!mt || cJSON_IsNull(mt))
        return oai_error_set(err, 400, "max_tokens", "missing_required_parameter",
                             "'max_tokens' is required");
    cJSON *copy = cJSON_Duplicate(mt, false);
    if (!copy || !cJSON_AddItemToObject(chat, "max_tokens", copy)) {
        cJSON_Delete(copy);
        return api__oom(err);
    }
    return TS_OK;
}

/* tools: [{"name", "description"?, "input_schema", "type"?: "custom"}] as
 * chat's function tools. */
static ts_status read_tools(const cJSON *root, cJSON *chat, oai_error *err)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (!tools || cJSON_IsNull(tools))
        return TS_OK;
    if (!cJSON_IsArray(tools))
        return api__wrong_type(err, "tools", "an array");
    cJSON *out = cJSON_AddArrayToObject(chat, "tools");
    if (!out)
        return api__oom(err);
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        char name[48];
        snprintf(name, sizeof name, "tools[%d]", i);
        if (!cJSON_IsObject(t))
            return api__wrong_type(err, name, "an object");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        snprintf(name, sizeof name, "tools[%d].type", i);
        if (type && !cJSON_IsNull(type) &&
            (!cJSON_IsString(type) || strcmp(type->valuestring, "custom")))
            return oai_error_set(err, 400, name, "unsupported_value",
                                 "'%s' must be \"custom\" or left out: Anthropic's own tools "
                                 "(bash, computer, web search, ...) are not supported",
                                 name);
        snprintf(name, sizeof name, "tools[%d].input_schema", i++);
        if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(t, "input_schema")))
            return api__wrong_type(err, name, "an object (a JSON Schema)");
        cJSON *fn = cJSON_CreateObject();
        bool ok = fn != NULL;
        static const char *const keys[][2] = {
            {"name", "name"}, {"description", "description"}, {"input_schema", "parameters"}};
        for (size_t k = 0; ok && k < 3; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, keys[k][0]);
            cJSON *copy = v ? cJSON_Duplicate(v, true) : NULL;
            ok = !v || (copy && cJSON_AddItemToObject(fn, keys[k][1], copy));
            if (!ok)
                cJSON_Delete(copy);
        }
        if (!ok) {
            cJSON_Delete(fn);
            fn = NULL;
        }
        cJSON *tool = api__function_tool(fn);
        if (!tool || !cJSON_AddItemToArray(out, tool)) {
            cJSON_Delete(tool);
            return api__oom(err);
        }
    }
    return TS_OK;
}

/* tool_choice: {"type": "auto" | "any" | "tool" | "none", "name"?,
 * "disable_parallel_tool_use"?} as chat's tool_choice and parallel_tool_calls.
 */
static ts_status read_tool_choice(const cJSON *root, cJSON *chat, oai_error *err)
{
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (!tc || cJSON_IsNull(tc))
        return TS_OK;
    const char *type = api__string(tc, "type"), *name = api__string(tc, "name");
    const char *want = "{\"type\": \"auto\"}, {\"type\": \"any\"}, {\"type\": \"none\"} or "
                       "{\"type\": \"tool\", \"name\": string}";
    if (!type || (!strcmp(type, "tool") && !name))
        return api__wrong_type(err, "tool_choice", want);
    cJSON *out = NULL;
    if (!strcmp(type, "auto") || !strcmp(type, "none"))
        out = cJSON_CreateString(type);
    else if (!strcmp(type, "any"))
        out = cJSON_CreateString("required");
    else if (!strcmp(type, "tool"))
        out = api__function_choice(name);
    else
        return api__wrong_type(err, "tool_choice", want);
    if (!out || !cJSON_AddItemToObject(chat, "tool_choice", out)) {
        cJSON_Delete(out);
        return api__oom(err);
    }
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(tc, "disable_parallel_tool_use");
    if (dp && !cJSON_IsBool(dp))
        return api__wrong_type(err, "tool_choice.disable_parallel_tool_use", "a boolean");
    if (cJSON_IsTrue(dp) && !cJSON_AddFalseToObject(chat, "parallel_tool_calls"))
        return api__oom(err);
    return TS_OK;
}

/* thinking: {"type": "disabled"} is accepted; extended thinking is not
 * supported. */
static ts_status read_thinking(const cJSON *root, oai_error *err)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "thinking");
    const char *type = api__string(t, "type");
    if (!t || cJSON_IsNull(t) || (type && !strcmp(type, "disabled")))
        return TS_OK;
    return oai_error_set(err, 400, "thinking", "unsupported_parameter",
                         "'thinking' is not supported: extended thinking needs a reasoning "
                         "model; send {\"type\": \"disabled\"} or leave it out");
}

static ts_status to_chat(const cJSON *root, cJSON **chat, bool need_max_tokens, char *ignored,
                         oai_error *err)
{
    *chat = cJSON_CreateObject();
    cJSON *msgs = *chat ? cJSON_AddArrayToObject(*chat, "messages") : NULL;
    if (!msgs)
        return api__oom(err);
    ts_status st = api__fields(root, fields, sizeof fields / sizeof fields[0], *chat, ignored, err);
    if (st == TS_OK)
        st = read_max_tokens(root, *chat, need_max_tokens, err);
    if (st == TS_OK)
        st = read_thinking(root, err);
    if (st == TS_OK)
        st = read_messages(root, msgs, err);
    if (st == TS_OK)
        st = read_tools(root, *chat, err);
    if (st == TS_OK)
        st = read_tool_choice(root, *chat, err);
    if (st != TS_OK) {
        cJSON_Delete(*chat);
        *chat = NULL;
    }
    return st;
}

static ts_status messages_to_chat(const cJSON *root, cJSON **chat, char *ignored, oai_error *err)
{
    return to_chat(root, chat, true, ignored, err);
}

ts_status api__messages_count_to_chat(const cJSON *root, cJSON **chat, char *ignored,
                                      oai_error *err)
{
    return to_chat(root, chat, false, ignored, err);
}

/* ---- the answer */

/* Anthropic's stop_reason for an answer: the token limit, a tool call, one of
 * stop_sequences, else the model's own end of turn. */
static const char *stop_reason(const api_answer *a)
{
    return !strcmp(a->finish, "length")       ? "max_tokens"
           : !strcmp(a->finish, "tool_calls") ? "tool_use"
           : a->stop_sequence                 ? "stop_sequence"
                                              : "end_turn";
}

/* Adds "stop_sequence": the matched string when a stop sequence ended answer a, else
 * null (a NULL: not yet ended). */
static bool add_stop_sequence(cJSON *o, const api_answer *a)
{
    bool matched = a && a->stop_sequence && !strcmp(stop_reason(a), "stop_sequence");
    return matched ? cJSON_AddStringToObject(o, "stop_sequence", a->stop_sequence) != NULL
                   : cJSON_AddNullToObject(o, "stop_sequence") != NULL;
}

/* {"type": "text", "text": text} (text NULL: ""). */
static cJSON *text_block(const char *text, size_t len)
{
    cJSON *b = cJSON_CreateObject(), *t = oai_bytes_string(text ? text : "", text ? len : 0);
    if (!b || !t || !cJSON_AddStringToObject(b, "type", "text") ||
        !cJSON_AddItemToObject(b, "text", t)) {
        if (!cJSON_GetObjectItemCaseSensitive(b, "text"))
            cJSON_Delete(t);
        cJSON_Delete(b);
        return NULL;
    }
    return b;
}

/* {"type": "tool_use", "id", "name", "input"}: input the call's arguments, or
 * {} when streamed (they follow as input_json_delta). */
static cJSON *tool_use_block(const oai_tool_call *c, bool with_input)
{
    cJSON *b = cJSON_CreateObject();
    cJSON *input = with_input ? cJSON_Parse(c->arguments) : NULL;
    if (!cJSON_IsObject(input)) { /* arguments are an object's JSON text (toolcall.h) */
        cJSON_Delete(input);
        input = cJSON_CreateObject();
    }
    if (!b || !input || !cJSON_AddStringToObject(b, "type", "tool_use") ||
        !cJSON_AddStringToObject(b, "id", c->id) || !cJSON_AddStringToObject(b, "name", c->name) ||
        !cJSON_AddItemToObject(b, "input", input)) {
        if (!cJSON_GetObjectItemCaseSensitive(b, "input"))
            cJSON_Delete(input);
        cJSON_Delete(b);
        return NULL;
    }
    return b;
}

/* The message object: started (a NULL: no content, no stop_reason, input_tokens
 * the prompt's length) or answer a. */
static cJSON *message_json(const oai_meta *m, const api_answer *a, int input_tokens)
{
    cJSON *r = cJSON_CreateObject(), *content = NULL, *u = NULL;
    bool ok =
        r && cJSON_AddStringToObject(r, "id", m->id) &&
        cJSON_AddStringToObject(r, "type", "message") &&
        cJSON_AddStringToObject(r, "role", "assistant") &&
        cJSON_AddStringToObject(r, "model", m->model) &&
        (content = cJSON_AddArrayToObject(r, "content")) &&
        (a ? cJSON_AddStringToObject(r, "stop_reason", stop_reason(a))
           : cJSON_AddNullToObject(r, "stop_reason")) &&
        add_stop_sequence(r, a) && (u = cJSON_AddObjectToObject(r, "usage")) &&
        cJSON_AddNumberToObject(u, "input_tokens", a ? a->usage.prompt_tokens : input_tokens) &&
        cJSON_AddNumberToObject(u, "output_tokens", a ? a->usage.completion_tokens : 0) &&
        cJSON_AddNumberToObject(u, "cache_read_input_tokens", a ? a->usage.cached_tokens : 0) &&
        cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    if (ok && a && (a->text_len || !a->n_calls)) {
        cJSON *b = text_block(a->text, a->text_len);
        ok = b && cJSON_AddItemToArray(content, b);
        if (!ok)
            cJSON_Delete(b);
    }
    for (size_t k = 0; ok && a && k < a->n_calls; k++) {
        cJSON *b = tool_use_block(&a->calls[k], true);
        ok = b && cJSON_AddItemToArray(content, b);
        if (!ok)
            cJSON_Delete(b);
    }
    if (!ok) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

static char *messages_json(const api_answer *a) { return api__print(message_json(a->meta, a, 0)); }

/* ---- the stream */

/* {"type": name}, the start of an event's data; NULL when out of memory. */
static cJSON *typed(const char *name)
{
    cJSON *j = cJSON_CreateObject();
    if (j && !cJSON_AddStringToObject(j, "type", name)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* {"type": name, "index": i, key: item} (item taken; key NULL: only the index).
 */
static cJSON *at(const char *name, int i, const char *key, cJSON *item)
{
    cJSON *j = typed(name);
    if (!j || !cJSON_AddNumberToObject(j, "index", i) ||
        (key && (!item || !cJSON_AddItemToObject(j, key, item)))) {
        if (!key || !cJSON_GetObjectItemCaseSensitive(j, key))
            cJSON_Delete(item);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* {"type": type, field: value} of n bytes. */
static cJSON *delta(const char *type, const char *field, const char *value, size_t n)
{
    cJSON *d = cJSON_CreateObject(), *v = oai_bytes_string(value, n);
    if (!d || !v || !cJSON_AddStringToObject(d, "type", type) ||
        !cJSON_AddItemToObject(d, field, v)) {
        if (!cJSON_GetObjectItemCaseSensitive(d, field))
            cJSON_Delete(v);
        cJSON_Delete(d);
        return NULL;
    }
    return d;
}

static bool begin(api_stream *s, strbuf *out)
{
    cJSON *j = typed("message_start"), *m = message_json(s->meta, NULL, s->prompt_tokens);
    if (j && m && cJSON_AddItemToObject(j, "message", m))
        return api__sse(out, "message_start", j);
    cJSON_Delete(m);
    cJSON_Delete(j);
    return false;
}

static bool close_text(api_stream *s, strbuf *out)
{
    if (s->text_item < 0)
        return true;
    int i = s->text_item;
    s->text_item = -1;
    cJSON *j = at("content_block_stop", i, NULL, NULL);
    return api__sse(out, "content_block_stop", j);
}

static bool text(api_stream *s, const char *t, size_t len, strbuf *out)
{
    if (s->text_item < 0) {
        s->text_item = s->n_items++;
        cJSON *j = at("content_block_start", s->text_item, "content_block", text_block(NULL, 0));
        if (!api__sse(out, "content_block_start", j))
            return false;
    }
    if (!strbuf_add(&s->text, t, len))
        return false;
    cJSON *j =
        at("content_block_delta", s->text_item, "delta", delta("text_delta", "text", t, len));
    return api__sse(out, "content_block_delta", j);
}

static bool call(api_stream *s, const oai_tool_call *c, strbuf *out)
{
    if (!close_text(s, out))
        return false;
    int i = s->n_items++;
    cJSON *start = at("content_block_start", i, "content_block", tool_use_block(c, false));
    if (!api__sse(out, "content_block_start", start))
        return false;
    cJSON *d = at("content_block_delta", i, "delta",
                  delta("input_json_delta", "partial_json", c->arguments, strlen(c->arguments)));
    cJSON *stop = d ? at("content_block_stop", i, NULL, NULL) : NULL;
    if (!d || !stop) {
        cJSON_Delete(d);
        return false;
    }
    return api__sse(out, "content_block_delta", d) && api__sse(out, "content_block_stop", stop);
}

static bool end(api_stream *s, const api_answer *a, strbuf *out)
{
    if (!close_text(s, out))
        return false;
    cJSON *j = typed("message_delta");
    cJSON *d = j ? cJSON_AddObjectToObject(j, "delta") : NULL;
    cJSON *u = j ? cJSON_AddObjectToObject(j, "usage") : NULL;
    bool ok = d && u && cJSON_AddStringToObject(d, "stop_reason", stop_reason(a)) &&
              add_stop_sequence(d, a) &&
              cJSON_AddNumberToObject(u, "input_tokens", a->usage.prompt_tokens) &&
              cJSON_AddNumberToObject(u, "output_tokens", a->usage.completion_tokens) &&
              cJSON_AddNumberToObject(u, "cache_read_input_tokens", a->usage.cached_tokens);
    if (!ok) {
        cJSON_Delete(j);
        return false;
    }
    return api__sse(out, "message_delta", j) &&
           api__sse(out, "message_stop", typed("message_stop"));
}

const api_ops api__messages_ops = {messages_to_chat, messages_json, begin, text, call, end};
