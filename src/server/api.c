/* api.c: the Responses and Messages APIs' entry points: a body parsed into the
 * chat request it stands for (errors renamed to the API's fields), the error
 * shapes, and the answer's and stream's dispatch to api_responses.c or
 * api_messages.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/api.h"
#include "server/utf8.h"

static const api_ops *ops_of(api_kind k)
{
    return k == API_MESSAGES ? &api__messages_ops
           : k == API_LLAMA  ? &api__llama_ops
                             : &api__responses_ops;
}

/* Whether the JSON text holds a \u0000 escape: cJSON would cut the string
 * there, and the chat parser, which sees the translated body, could no longer
 * tell. */
static bool has_nul_escape(const char *s, size_t n)
{
    for (size_t i = 0; i + 6 <= n; i++) {
        if (s[i] != '\\')
            continue;
        if (!memcmp(s + i, "\\u0000", 6))
            return true;
        i++; /* an escaped character, a backslash included */
    }
    return false;
}

/* Replaces each occurrence of from in buf (cap bytes) with to, as far as it
 * fits. */
static void replace_all(char *buf, size_t cap, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to);
    char *p = buf;
    while ((p = strstr(p, from))) {
        size_t tail = strlen(p + nf);
        if ((size_t)(p - buf) + nt + tail + 1 > cap)
            return;
        memmove(p + nt, p + nf, tail + 1);
        memcpy(p, to, nt);
        p += nt;
    }
}

/* "tools[3].function.x" -> "tools[3].x" in buf (it only shrinks). */
static void drop_function_level(char *buf)
{
    char *p = buf;
    while ((p = strstr(p, "tools["))) {
        char *close = strchr(p, ']');
        if (!close)
            return;
        if (!strncmp(close + 1, ".function.", 10))
            memmove(close + 1, close + 10, strlen(close + 10) + 1);
        p = close;
    }
}

void api_error_rename(api_kind k, oai_error *e)
{
    if (k == API_CHAT)
        return;
    static const char *const responses[][2] = {
        {"response_format.json_schema.", "text.format."},
        {"response_format", "text.format"},
        {"max_tokens", "max_output_tokens"},
        {"messages", "input"},
    };
    static const char *const llama[][2] = {
        {"max_tokens", "n_predict"},
    };
    static const char *const messages[][2] = {
        {"stop", "stop_sequences"},
        {"parameters", "input_schema"},
        {"response_format", "output_format"},
    };
    char *bufs[2] = {e->param, e->message};
    size_t caps[2] = {sizeof e->param, sizeof e->message};
    for (int b = 0; b < 2; b++) {
        drop_function_level(bufs[b]);
        if (k == API_RESPONSES)
            for (size_t i = 0; i < sizeof responses / sizeof responses[0]; i++)
                replace_all(bufs[b], caps[b], responses[i][0], responses[i][1]);
        else if (k == API_LLAMA)
            for (size_t i = 0; i < sizeof llama / sizeof llama[0]; i++)
                replace_all(bufs[b], caps[b], llama[i][0], llama[i][1]);
        else
            for (size_t i = 0; i < sizeof messages / sizeof messages[0]; i++)
                replace_all(bufs[b], caps[b], messages[i][0], messages[i][1]);
    }
}

typedef ts_status to_chat_fn(const cJSON *root, cJSON **chat, char *ignored, oai_error *err);

/* api_parse_request with the translation to_chat; k names the fields of errors. */
static ts_status parse_with(api_kind k, to_chat_fn *to_chat, const char *body, size_t len,
                            oai_request *out, oai_error *err)
{
    memset(out, 0, sizeof *out);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false), *chat = NULL;
    char ignored[OAI_IGNORED_LEN] = "";
    for (const char *p = end; root && p && p < body + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            root = NULL;
        }
    if (!root)
        return oai_error_set(err, 400, NULL, "invalid_json",
                             "the request body is not valid JSON (near byte %zu)",
                             end && end >= body ? (size_t)(end - body) : (size_t)0);
    ts_status st = TS_ERR_INVALID_ARG;
    if (!cJSON_IsObject(root))
        oai_error_set(err, 400, NULL, "invalid_json", "the request body must be a JSON object");
    else if (!utf8_valid(body, len)) /* checked here: the chat parser's message would
                                      * count the translated messages, not the API's */
        oai_error_set(err, 400, NULL, "invalid_utf8", "the request body is not valid UTF-8");
    else if (has_nul_escape(body, len))
        oai_error_set(err, 400, NULL, "invalid_value",
                      "a string holds a NUL character (\\u0000), which is not accepted");
    else
        st = to_chat(root, &chat, ignored, err);
    cJSON_Delete(root);
    char *text = st == TS_OK ? cJSON_PrintUnformatted(chat) : NULL;
    cJSON_Delete(chat);
    if (st == TS_OK && !text)
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    if (st != TS_OK)
        return st;
    st = oai_parse_request(k == API_LLAMA ? OAI_COMPLETION : OAI_CHAT, text, strlen(text), out,
                           err);
    free(text);
    if (st != TS_OK) {
        api_error_rename(k, err);
        return st;
    }
    if (k != API_LLAMA) /* its body went to the parser as it came: the parser's list */
        memcpy(out->ignored, ignored, sizeof out->ignored);
    return TS_OK;
}

ts_status api_parse_request(api_kind k, const char *body, size_t len, oai_request *out,
                            oai_error *err)
{
    return parse_with(k, ops_of(k)->to_chat, body, len, out, err);
}

ts_status api_parse_count_tokens(const char *body, size_t len, oai_request *out, oai_error *err)
{
    return parse_with(API_MESSAGES, api__messages_count_to_chat, body, len, out, err);
}

/* Anthropic's error types by HTTP status. */
static const char *anthropic_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

char *api_error_json(api_kind k, const oai_error *e)
{
    if (k != API_MESSAGES)
        return oai_error_json(e);
    char *msg = utf8_sanitize(e->message, strlen(e->message));
    cJSON *root = msg ? cJSON_CreateObject() : NULL;
    bool ok = root && cJSON_AddStringToObject(root, "type", "error");
    cJSON *o = ok ? cJSON_AddObjectToObject(root, "error") : NULL;
    ok = o && cJSON_AddStringToObject(o, "type", anthropic_type(e->http_status)) &&
         cJSON_AddStringToObject(o, "message", msg);
    free(msg);
    char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return s;
}

char *api_answer_json(api_kind k, const api_answer *a)
{
    return ops_of(k)->answer_json(a);
}

void api_stream_init(api_stream *s, api_kind k, const oai_meta *meta)
{
    memset(s, 0, sizeof *s);
    s->kind = k;
    s->meta = meta;
    s->text_item = -1;
}

void api_stream_free(api_stream *s)
{
    strbuf_free(&s->text);
}

bool api_stream_begin(api_stream *s, strbuf *out)
{
    return ops_of(s->kind)->begin(s, out);
}

bool api_stream_text(api_stream *s, const char *text, size_t len, strbuf *out)
{
    return len == 0 || ops_of(s->kind)->text(s, text, len, out);
}

bool api_stream_call(api_stream *s, const oai_tool_call *call, strbuf *out)
{
    return ops_of(s->kind)->call(s, call, out);
}

bool api_stream_end(api_stream *s, const api_answer *a, strbuf *out)
{
    return ops_of(s->kind)->end(s, a, out);
}

bool api_stream_error(api_stream *s, const oai_error *e, strbuf *out)
{
    char *body = api_error_json(s->kind, e);
    cJSON *j = body ? cJSON_Parse(body) : NULL;
    free(body);
    if (j && s->kind == API_RESPONSES) { /* {"type": "error", "code", "message", "param"} */
        cJSON *inner = cJSON_DetachItemFromObject(j, "error");
        cJSON_Delete(j);
        j = inner;
        if (j) {
            cJSON_DeleteItemFromObject(j, "type");
            cJSON_AddStringToObject(j, "type", "error");
            cJSON_AddNumberToObject(j, "sequence_number", s->seq++);
        }
    }
    return api__sse(out, "error", j);
}
