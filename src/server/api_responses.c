/* api_responses.c: OpenAI's Responses API, stateless: a request's input items,
 * instructions, function tools and text.format become a chat body; the answer
 * becomes a "response" object with message and function_call output items, or
 * its stream of response.* events. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/api.h"

/* docs/API.md's Responses table says the same; keep them together. */
static const api_field fields[] = {
    {"model", API_FIELD_COPY, NULL},
    {"input", API_FIELD_OWN, NULL},
    {"instructions", API_FIELD_OWN, NULL},
    {"tools", API_FIELD_OWN, NULL},
    {"tool_choice", API_FIELD_OWN, NULL},
    {"text", API_FIELD_OWN, NULL},
    {"parallel_tool_calls", API_FIELD_COPY, NULL},
    {"max_output_tokens", API_FIELD_COPY, "max_tokens"},
    {"temperature", API_FIELD_COPY, NULL},
    {"top_p", API_FIELD_COPY, NULL},
    {"stream", API_FIELD_COPY, NULL},
    {"user", API_FIELD_COPY, NULL},
    /* tessera's sampling extensions, as on chat completions */
    {"top_k", API_FIELD_COPY, NULL},
    {"min_p", API_FIELD_COPY, NULL},
    {"seed", API_FIELD_COPY, NULL},
    {"stop", API_FIELD_COPY, NULL},
    {"ignore_eos", API_FIELD_COPY, NULL},
    {"metadata", API_FIELD_NOOP, NULL},
    {"include", API_FIELD_NOOP, NULL},
    {"reasoning", API_FIELD_NOOP, NULL},
    {"service_tier", API_FIELD_NOOP, NULL},
    {"safety_identifier", API_FIELD_NOOP, NULL},
    {"prompt_cache_key", API_FIELD_NOOP, NULL},
    {"truncation", API_FIELD_NOOP, NULL},
    {"top_logprobs", API_FIELD_NOOP, NULL},
    {"stream_options", API_FIELD_NOOP, NULL},
    {"max_tool_calls", API_FIELD_NOOP, NULL},
    {"previous_response_id", API_FIELD_REFUSED,
     "tessera keeps no responses; send the whole conversation in 'input'"},
    {"store", API_FIELD_REFUSED, "tessera keeps no responses; send store: false or leave it out"},
    {"conversation", API_FIELD_REFUSED,
     "tessera keeps no conversations; send the whole conversation in 'input'"},
    {"background", API_FIELD_REFUSED, "background responses need a store tessera does not keep"},
    {"prompt", API_FIELD_REFUSED, "stored prompt templates are not supported"},
};

/* A string member key of o, or NULL. */

/* ---- the request */

/* A message item's content (a string, or parts input_text / output_text /
 * refusal) as chat content: the string, or text parts. */
static ts_status message_content(const cJSON *c, const char *name, cJSON **out, oai_error *err)
{
    if (cJSON_IsString(c))
        return (*out = cJSON_CreateString(c->valuestring)) ? TS_OK : api__oom(err);
    if (!cJSON_IsArray(c))
        return api__wrong_type(err, name, "a string or an array of content parts");
    if (!(*out = cJSON_CreateArray()))
        return api__oom(err);
    int k = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c)
    {
        char pname[96];
        snprintf(pname, sizeof pname, "%s[%d]", name, k++);
        const char *type = api__string(p, "type");
        const char *text = api__string(p, "text");
        if (type && !strcmp(type, "refusal"))
            text = api__string(p, "refusal");
        bool is_text = type && (!strcmp(type, "input_text") || !strcmp(type, "output_text") ||
                                !strcmp(type, "text") || !strcmp(type, "refusal"));
        if (!cJSON_IsObject(p) || !type)
            return api__wrong_type(err, pname, "a content part with a 'type'");
        if (!is_text)
            return oai_error_set(err, 400, pname, "unsupported_value",
                                 "'%s' is a %.40s part; only text parts (input_text, "
                                 "output_text) are supported",
                                 pname, type);
        if (!text)
            return api__wrong_type(err, pname, "a text part with a string 'text'");
        cJSON *part = cJSON_CreateObject();
        if (!part || !cJSON_AddStringToObject(part, "type", "text") ||
            !cJSON_AddStringToObject(part, "text", text) || !cJSON_AddItemToArray(*out, part)) {
            cJSON_Delete(part);
            return api__oom(err);
        }
    }
    return TS_OK;
}

static ts_status message_item(const cJSON *it, const char *name, cJSON *msgs, oai_error *err)
{
    char field[96];
    snprintf(field, sizeof field, "%s.role", name);
    const char *role = api__string(it, "role");
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
                  strcmp(role, "developer")))
        return api__wrong_type(err, field, "\"user\", \"assistant\", \"system\" or \"developer\"");
    snprintf(field, sizeof field, "%s.content", name);
    cJSON *content = NULL;
    if (message_content(cJSON_GetObjectItemCaseSensitive(it, "content"), field, &content, err) !=
        TS_OK) {
        cJSON_Delete(content);
        return TS_ERR_INVALID_ARG;
    }
    return api__add_message(msgs, role, content) ? TS_OK : api__oom(err);
}

/* A function_call item: a tool call of the assistant turn it follows (a new
 * turn when the previous message is not the assistant's). */
static ts_status call_item(const cJSON *it, const char *name, cJSON *msgs, oai_error *err)
{
    char field[96];
    static const char *const keys[] = {"call_id", "name", "arguments"};
    for (size_t k = 0; k < 3; k++)
        if (!api__string(it, keys[k])) {
            snprintf(field, sizeof field, "%s.%s", name, keys[k]);
            return api__wrong_type(err, field, "a string");
        }
    cJSON *args = cJSON_Parse(api__string(it, "arguments"));
    bool object = cJSON_IsObject(args);
    cJSON_Delete(args);
    if (!object) {
        snprintf(field, sizeof field, "%s.arguments", name);
        return api__wrong_type(err, field, "the JSON text of an object");
    }
    cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    const char *role = last ? api__string(last, "role") : NULL;
    if (!role || strcmp(role, "assistant"))
        last = api__add_message(msgs, "assistant", NULL);
    cJSON *calls = last ? cJSON_GetObjectItemCaseSensitive(last, "tool_calls") : NULL;
    if (last && !calls)
        calls = cJSON_AddArrayToObject(last, "tool_calls");
    cJSON *call = cJSON_CreateObject(), *fn = cJSON_CreateObject();
    bool ok = calls && call && fn &&
              cJSON_AddStringToObject(call, "id", api__string(it, "call_id")) &&
              cJSON_AddStringToObject(call, "type", "function") &&
              cJSON_AddStringToObject(fn, "name", api__string(it, "name")) &&
              cJSON_AddStringToObject(fn, "arguments", api__string(it, "arguments")) &&
              cJSON_AddItemToObject(call, "function", fn);
    if (!ok)
        cJSON_Delete(fn);
    if (!ok || !cJSON_AddItemToArray(calls, call)) {
        cJSON_Delete(call);
        return api__oom(err);
    }
    return TS_OK;
}

/* A function_call_output item: the tool message answering call_id. */
static ts_status output_item(const cJSON *it, const char *name, cJSON *msgs, oai_error *err)
{
    char field[96];
    snprintf(field, sizeof field, "%s.call_id", name);
    const char *id = api__string(it, "call_id");
    if (!id)
        return api__wrong_type(err, field, "a string");
    snprintf(field, sizeof field, "%s.output", name);
    cJSON *content = NULL;
    if (message_content(cJSON_GetObjectItemCaseSensitive(it, "output"), field, &content, err) !=
        TS_OK) {
        cJSON_Delete(content);
        return TS_ERR_INVALID_ARG;
    }
    cJSON *m = api__add_message(msgs, "tool", content);
    return m && cJSON_AddStringToObject(m, "tool_call_id", id) ? TS_OK : api__oom(err);
}

/* input: a string (one user message) or items: messages (type "message" or
 * none), function_call, function_call_output; reasoning items are skipped. */
static ts_status read_input(const cJSON *root, cJSON *msgs, oai_error *err)
{
    const cJSON *instr = cJSON_GetObjectItemCaseSensitive(root, "instructions");
    if (instr && !cJSON_IsNull(instr)) {
        if (!cJSON_IsString(instr))
            return api__wrong_type(err, "instructions", "a string");
        if (!api__add_message(msgs, "system", cJSON_CreateString(instr->valuestring)))
            return api__oom(err);
    }
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input");
    if (!input || cJSON_IsNull(input))
        return oai_error_set(err, 400, "input", "missing_required_parameter",
                             "'input' is required");
    if (cJSON_IsString(input))
        return api__add_message(msgs, "user", cJSON_CreateString(input->valuestring))
                   ? TS_OK
                   : api__oom(err);
    if (!cJSON_IsArray(input) || !cJSON_GetArraySize(input))
        return api__wrong_type(err, "input", "a string or a non-empty array of items");
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, input)
    {
        char name[48];
        snprintf(name, sizeof name, "input[%d]", i++);
        if (!cJSON_IsObject(it))
            return api__wrong_type(err, name, "an object");
        const cJSON *tv = cJSON_GetObjectItemCaseSensitive(it, "type");
        const char *type = cJSON_IsString(tv) ? tv->valuestring : tv ? NULL : "message";
        ts_status st;
        if (!type)
            st = api__wrong_type(err, name, "an item whose 'type' is a string");
        else if (!strcmp(type, "message"))
            st = message_item(it, name, msgs, err);
        else if (!strcmp(type, "function_call"))
            st = call_item(it, name, msgs, err);
        else if (!strcmp(type, "function_call_output"))
            st = output_item(it, name, msgs, err);
        else if (!strcmp(type, "reasoning"))
            st = TS_OK;
        else
            st = oai_error_set(err, 400, name, "unsupported_value",
                               "'%s' is a %.40s item; the items supported are message, "
                               "function_call and function_call_output",
                               name, type);
        if (st != TS_OK)
            return st;
    }
    return TS_OK;
}

/* tools: Responses' flat function tools ({"type": "function", "name",
 * "description", "parameters", "strict"}) as chat's ({"type": "function",
 * "function": {...}}). */
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
        snprintf(name, sizeof name, "tools[%d].type", i++);
        const char *type = api__string(t, "type");
        if (!type || strcmp(type, "function"))
            return oai_error_set(err, 400, name, "unsupported_value",
                                 "'%s' must be \"function\": hosted tools (web_search, "
                                 "file_search, ...) are not supported",
                                 name);
        cJSON *fn = cJSON_Duplicate(t, true);
        cJSON_DeleteItemFromObjectCaseSensitive(fn, "type");
        cJSON *tool = api__function_tool(fn);
        if (!tool || !cJSON_AddItemToArray(out, tool)) {
            cJSON_Delete(tool);
            return api__oom(err);
        }
    }
    return TS_OK;
}

/* tool_choice: "none", "auto", "required" or {"type": "function", "name"}. */
static ts_status read_tool_choice(const cJSON *root, cJSON *chat, oai_error *err)
{
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (!tc || cJSON_IsNull(tc))
        return TS_OK;
    cJSON *out;
    if (cJSON_IsString(tc)) {
        out = cJSON_CreateString(tc->valuestring);
    } else {
        const char *type = api__string(tc, "type"), *name = api__string(tc, "name");
        if (!type || strcmp(type, "function") || !name)
            return api__wrong_type(err, "tool_choice",
                                   "\"none\", \"auto\", \"required\" or {\"type\": "
                                   "\"function\", \"name\": string}");
        out = api__function_choice(name);
    }
    if (!out || !cJSON_AddItemToObject(chat, "tool_choice", out)) {
        cJSON_Delete(out);
        return api__oom(err);
    }
    return TS_OK;
}

/* text.format: {"type": "text"}, {"type": "json_object"} or {"type":
 * "json_schema", "name", "schema", "strict"?, "description"?} as chat's
 * response_format. */
static ts_status read_text(const cJSON *root, cJSON *chat, oai_error *err)
{
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text");
    if (!text || cJSON_IsNull(text))
        return TS_OK;
    if (!cJSON_IsObject(text))
        return api__wrong_type(err, "text", "an object");
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(text, "format");
    if (!format || cJSON_IsNull(format))
        return TS_OK;
    const char *type = api__string(format, "type");
    if (!cJSON_IsObject(format) || !type)
        return api__wrong_type(err, "text.format", "an object with a string 'type'");
    cJSON *rf = cJSON_CreateObject();
    bool ok = rf && cJSON_AddStringToObject(rf, "type", type);
    if (ok && !strcmp(type, "json_schema")) {
        cJSON *js = cJSON_Duplicate(format, true);
        cJSON_DeleteItemFromObjectCaseSensitive(js, "type");
        ok = js && cJSON_AddItemToObject(rf, "json_schema", js);
        if (!ok)
            cJSON_Delete(js);
    }
    if (!ok || !cJSON_AddItemToObject(chat, "response_format", rf)) {
        cJSON_Delete(rf);
        return api__oom(err);
    }
    return TS_OK;
}

static ts_status responses_to_chat(const cJSON *root, cJSON **chat, char *ignored, oai_error *err)
{
    *chat = cJSON_CreateObject();
    cJSON *msgs = *chat ? cJSON_AddArrayToObject(*chat, "messages") : NULL;
    if (!msgs)
        return api__oom(err);
    ts_status st = api__fields(root, fields, sizeof fields / sizeof fields[0], *chat, ignored, err);
    if (st == TS_OK)
        st = read_input(root, msgs, err);
    if (st == TS_OK)
        st = read_tools(root, *chat, err);
    if (st == TS_OK)
        st = read_tool_choice(root, *chat, err);
    if (st == TS_OK)
        st = read_text(root, *chat, err);
    if (st != TS_OK) {
        cJSON_Delete(*chat);
        *chat = NULL;
    }
    return st;
}

/* ---- the answer */

/* prefix + what follows the first '_' of id (the whole id when it has none). */
static void derived_id(char *out, size_t cap, const char *prefix, const char *id)
{
    const char *u = strchr(id, '_');
    snprintf(out, cap, "%s%s", prefix, u ? u + 1 : id);
}

/* The message item of the answer's text; status "in_progress", "completed", or
 * "incomplete" when max_output_tokens cut it. */
static cJSON *message_json(const oai_meta *m, const char *text, size_t len, const char *status)
{
    char id[64];
    derived_id(id, sizeof id, "msg_", m->id);
    cJSON *it = cJSON_CreateObject(), *content = cJSON_CreateArray();
    cJSON *part = text ? cJSON_CreateObject() : NULL;
    bool ok = it && content && cJSON_AddStringToObject(it, "id", id) &&
              cJSON_AddStringToObject(it, "type", "message") &&
              cJSON_AddStringToObject(it, "status", status) &&
              cJSON_AddStringToObject(it, "role", "assistant");
    if (ok && part) {
        cJSON *s = oai_bytes_string(text, len);
        ok = s && cJSON_AddStringToObject(part, "type", "output_text") &&
             cJSON_AddItemToObject(part, "text", s) &&
             cJSON_AddArrayToObject(part, "annotations") &&
             cJSON_AddArrayToObject(part, "logprobs") && cJSON_AddItemToArray(content, part);
        if (!ok && !cJSON_GetObjectItemCaseSensitive(part, "text"))
            cJSON_Delete(s);
        if (!ok)
            cJSON_Delete(part);
    }
    if (!ok || !cJSON_AddItemToObject(it, "content", content)) {
        cJSON_Delete(content);
        cJSON_Delete(it);
        return NULL;
    }
    return it;
}

/* The function_call item of call; arguments "" until done. */
static cJSON *call_json(const oai_tool_call *call, bool done)
{
    char id[64];
    derived_id(id, sizeof id, "fc_", call->id);
    cJSON *it = cJSON_CreateObject();
    bool ok = it && cJSON_AddStringToObject(it, "id", id) &&
              cJSON_AddStringToObject(it, "type", "function_call") &&
              cJSON_AddStringToObject(it, "status", done ? "completed" : "in_progress") &&
              cJSON_AddStringToObject(it, "call_id", call->id) &&
              cJSON_AddStringToObject(it, "name", call->name) &&
              cJSON_AddStringToObject(it, "arguments", done ? call->arguments : "");
    if (!ok) {
        cJSON_Delete(it);
        return NULL;
    }
    return it;
}

/* The response object: in progress (a NULL) with no output, or the answer a. */
static cJSON *response_json(const oai_meta *m, const api_answer *a)
{
    const char *finish = a ? a->finish : NULL;
    const char *status = !a                             ? "in_progress"
                         : !strcmp(finish, "length")    ? "incomplete"
                         : !strcmp(finish, "cancelled") ? "cancelled"
                                                        : "completed";
    cJSON *r = cJSON_CreateObject(), *out = NULL;
    bool ok = r && cJSON_AddStringToObject(r, "id", m->id) &&
              cJSON_AddStringToObject(r, "object", "response") &&
              cJSON_AddNumberToObject(r, "created_at", (double)m->created) &&
              cJSON_AddStringToObject(r, "status", status) && cJSON_AddNullToObject(r, "error") &&
              cJSON_AddStringToObject(r, "model", m->model) &&
              (out = cJSON_AddArrayToObject(r, "output")) &&
              cJSON_AddBoolToObject(r, "parallel_tool_calls", true) &&
              cJSON_AddNullToObject(r, "previous_response_id") &&
              cJSON_AddBoolToObject(r, "store", false) && cJSON_AddObjectToObject(r, "metadata");
    if (ok && a && !strcmp(status, "incomplete")) {
        cJSON *d = cJSON_AddObjectToObject(r, "incomplete_details");
        ok = d && cJSON_AddStringToObject(d, "reason", "max_output_tokens");
    } else if (ok) {
        ok = cJSON_AddNullToObject(r, "incomplete_details") != NULL;
    }
    if (ok && a) {
        if (a->text_len || !a->n_calls) {
            cJSON *msg = message_json(m, a->text, a->text_len,
                                      strcmp(status, "incomplete") ? "completed" : "incomplete");
            ok = msg && cJSON_AddItemToArray(out, msg);
            if (!ok)
                cJSON_Delete(msg);
        }
        for (size_t k = 0; ok && k < a->n_calls; k++) {
            cJSON *c = call_json(&a->calls[k], true);
            ok = c && cJSON_AddItemToArray(out, c);
            if (!ok)
                cJSON_Delete(c);
        }
        cJSON *u = ok ? cJSON_AddObjectToObject(r, "usage") : NULL;
        cJSON *in = u ? cJSON_AddObjectToObject(u, "input_tokens_details") : NULL;
        cJSON *od = u ? cJSON_AddObjectToObject(u, "output_tokens_details") : NULL;
        ok = in && od && cJSON_AddNumberToObject(u, "input_tokens", a->usage.prompt_tokens) &&
             cJSON_AddNumberToObject(u, "output_tokens", a->usage.completion_tokens) &&
             cJSON_AddNumberToObject(u, "total_tokens",
                                     a->usage.prompt_tokens + a->usage.completion_tokens) &&
             cJSON_AddNumberToObject(in, "cached_tokens", a->usage.cached_tokens) &&
             cJSON_AddNumberToObject(od, "reasoning_tokens", 0);
    } else if (ok) {
        ok = cJSON_AddNullToObject(r, "usage") != NULL;
    }
    if (!ok) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

static char *responses_json(const api_answer *a) { return api__print(response_json(a->meta, a)); }

/* ---- the stream */

/* An event {"type": name, "sequence_number", ...}: j gets both (NULL stays
 * NULL). */
static bool event(api_stream *s, strbuf *out, const char *name, cJSON *j)
{
    if (j && (!cJSON_AddStringToObject(j, "type", name) ||
              !cJSON_AddNumberToObject(j, "sequence_number", s->seq))) {
        cJSON_Delete(j);
        j = NULL;
    }
    s->seq++;
    return api__sse(out, name, j);
}

/* {"output_index": i, key: item}, without output_index for i < 0 (item taken;
 * NULL stays NULL). */
static cJSON *with_item(int i, const char *key, cJSON *item)
{
    cJSON *j = item ? cJSON_CreateObject() : NULL;
    if (!j || (i >= 0 && !cJSON_AddNumberToObject(j, "output_index", i)) ||
        !cJSON_AddItemToObject(j, key, item)) {
        if (!cJSON_GetObjectItemCaseSensitive(j, key))
            cJSON_Delete(item);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* {"item_id", "output_index", "content_index": 0} of the open text item, or of
 * the function_call item of call. */
static cJSON *item_ref(const api_stream *s, int index, const oai_tool_call *call)
{
    char id[64];
    if (call)
        derived_id(id, sizeof id, "fc_", call->id);
    else
        derived_id(id, sizeof id, "msg_", s->meta->id);
    cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddStringToObject(j, "item_id", id) ||
        !cJSON_AddNumberToObject(j, "output_index", index) ||
        (!call && !cJSON_AddNumberToObject(j, "content_index", 0))) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* An output_text part of the open item's text so far. */
static cJSON *text_part(const api_stream *s)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *t =
        oai_bytes_string(s->text.s ? s->text.s + s->item_start : "", s->text.len - s->item_start);
    if (!p || !t || !cJSON_AddStringToObject(p, "type", "output_text") ||
        !cJSON_AddItemToObject(p, "text", t) || !cJSON_AddArrayToObject(p, "annotations")) {
        if (!cJSON_GetObjectItemCaseSensitive(p, "text"))
            cJSON_Delete(t);
        cJSON_Delete(p);
        return NULL;
    }
    return p;
}

static bool begin(api_stream *s, strbuf *out)
{
    return event(s, out, "response.created",
                 with_item(-1, "response", response_json(s->meta, NULL))) &&
           event(s, out, "response.in_progress",
                 with_item(-1, "response", response_json(s->meta, NULL)));
}

/* Closes the open text item: output_text.done, content_part.done,
 * output_item.done with the item's status. */
static bool close_text(api_stream *s, const char *status, strbuf *out)
{
    if (s->text_item < 0)
        return true;
    int i = s->text_item;
    s->text_item = -1;
    cJSON *done = item_ref(s, i, NULL);
    cJSON *t =
        oai_bytes_string(s->text.s ? s->text.s + s->item_start : "", s->text.len - s->item_start);
    if (done && (!t || !cJSON_AddItemToObject(done, "text", t))) {
        cJSON_Delete(done);
        done = NULL;
    }
    if (!done)
        cJSON_Delete(t);
    cJSON *pd = item_ref(s, i, NULL);
    cJSON *part = text_part(s);
    if (pd && (!part || !cJSON_AddItemToObject(pd, "part", part))) {
        cJSON_Delete(pd);
        pd = NULL;
    }
    if (!pd)
        cJSON_Delete(part);
    const char *text = s->text.s ? s->text.s + s->item_start : "";
    return event(s, out, "response.output_text.done", done) &&
           event(s, out, "response.content_part.done", pd) &&
           event(s, out, "response.output_item.done",
                 with_item(i, "item",
                           message_json(s->meta, text, s->text.len - s->item_start, status)));
}

static bool text(api_stream *s, const char *t, size_t len, strbuf *out)
{
    if (s->text_item < 0) {
        s->text_item = s->n_items++;
        s->item_start = s->text.len;
        cJSON *added = item_ref(s, s->text_item, NULL);
        cJSON *part = text_part(s);
        if (added && (!part || !cJSON_AddItemToObject(added, "part", part))) {
            cJSON_Delete(added);
            added = NULL;
        }
        if (!added)
            cJSON_Delete(part);
        if (!event(s, out, "response.output_item.added",
                   with_item(s->text_item, "item", message_json(s->meta, NULL, 0, "in_progress"))) ||
            !event(s, out, "response.content_part.added", added))
            return false;
    }
    if (!strbuf_add(&s->text, t, len))
        return false;
    cJSON *d = item_ref(s, s->text_item, NULL);
    cJSON *delta = oai_bytes_string(t, len);
    if (d && (!delta || !cJSON_AddItemToObject(d, "delta", delta) ||
              !cJSON_AddArrayToObject(d, "logprobs"))) {
        if (!cJSON_GetObjectItemCaseSensitive(d, "delta"))
            cJSON_Delete(delta);
        cJSON_Delete(d);
        d = NULL;
    } else if (!d) {
        cJSON_Delete(delta);
    }
    return event(s, out, "response.output_text.delta", d);
}

static bool call(api_stream *s, const oai_tool_call *c, strbuf *out)
{
    if (!close_text(s, "completed", out))
        return false;
    int i = s->n_items++;
    cJSON *delta = item_ref(s, i, c), *done = item_ref(s, i, c);
    bool ok = delta && done && cJSON_AddStringToObject(delta, "delta", c->arguments) &&
              cJSON_AddStringToObject(done, "arguments", c->arguments);
    if (!ok) {
        cJSON_Delete(delta);
        cJSON_Delete(done);
        return false;
    }
    return event(s, out, "response.output_item.added", with_item(i, "item", call_json(c, false))) &&
           event(s, out, "response.function_call_arguments.delta", delta) &&
           event(s, out, "response.function_call_arguments.done", done) &&
           event(s, out, "response.output_item.done", with_item(i, "item", call_json(c, true)));
}

static bool end(api_stream *s, const api_answer *a, strbuf *out)
{
    if (!close_text(s, strcmp(a->finish, "length") ? "completed" : "incomplete", out))
        return false;
    api_answer whole = *a;
    whole.text = s->text.s ? s->text.s : "";
    whole.text_len = s->text.len;
    cJSON *r = response_json(s->meta, &whole);
    const char *status = r ? api__string(r, "status") : NULL;
    const char *name = !status                         ? "response.completed"
                       : !strcmp(status, "incomplete") ? "response.incomplete"
                       : !strcmp(status, "cancelled")  ? "response.failed"
                                                       : "response.completed";
    return event(s, out, name, with_item(-1, "response", r));
}

const api_ops api__responses_ops = {responses_to_chat, responses_json, begin, text, call, end};
