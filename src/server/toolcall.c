/* toolcall.c: the tool calls of an answer, found as it streams (toolcall.h). A small state
 * machine over the text held back: plain text, the JSON of a call after its marker (its
 * end found by counting brackets outside strings, then parsed whole), Hermes' closing tag,
 * and the whitespace between calls, which is dropped. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/toolcall.h"

enum {
    TOOLCALL_MAX_HELD = 1 << 20, /* bytes of one call's text; past it the call is text */
};

typedef enum state {
    S_TEXT,    /* content, watching for the marker */
    S_START,   /* LLAMA3, JSON: the answer's leading whitespace, before a '{' or text */
    S_PAYLOAD, /* held = marker, whitespace, the call's JSON so far */
    S_CLOSE,   /* HERMES: the call's JSON is whole; its closing tag next */
    S_AFTER,   /* after a call: whitespace (dropped), another call, or text */
} state;

static const char HERMES_CLOSE[] = "</tool_call>";
static const char MISTRAL_ARGS[] = "[ARGS]";

toolcall_syntax toolcall_syntax_for(chat_template_kind kind)
{
    switch (kind) {
    case CHAT_TEMPLATE_LLAMA3: return TOOLCALL_SYNTAX_LLAMA3;
    case CHAT_TEMPLATE_MISTRAL: return TOOLCALL_SYNTAX_MISTRAL;
    default: return TOOLCALL_SYNTAX_HERMES;
    }
}

const char *toolcall_marker(toolcall_syntax syntax)
{
    switch (syntax) {
    case TOOLCALL_SYNTAX_HERMES: return "<tool_call>";
    case TOOLCALL_SYNTAX_MISTRAL: return "[TOOL_CALLS]";
    case TOOLCALL_SYNTAX_LLAMA3: return "<|python_tag|>";
    default: return NULL;
    }
}

int32_t toolcall_marker_token(const ts_tokenizer *tok, toolcall_syntax syntax)
{
    const char *mk = toolcall_marker(syntax);
    ts_tokenize_opts o = {.parse_special = true};
    int32_t id[2];
    size_t n = 0, len = 1;
    if (!mk || ts_tokenize_ex(tok, mk, strlen(mk), &o, id, 2, &n) != TS_OK || n != 1)
        return -1;
    ts_token_bytes(tok, id[0], &len);
    return len == 0 ? id[0] : -1;
}

static void calls_free(toolcall_call *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(c[i].name);
        free(c[i].arguments);
    }
    free(c);
}

void toolcall_out_reset(toolcall_out *out)
{
    for (size_t i = 0; i < out->n_calls; i++) {
        free(out->calls[i].name);
        free(out->calls[i].arguments);
    }
    out->n_calls = 0;
    strbuf_reset(&out->content);
    out->failed = out->content.failed;
}

void toolcall_out_free(toolcall_out *out)
{
    toolcall_out_reset(out);
    free(out->calls);
    strbuf_free(&out->content);
    *out = (toolcall_out){0};
}

void toolcall_init(toolcall_parser *p, toolcall_syntax syntax)
{
    *p = (toolcall_parser){.syntax = syntax};
    p->state = syntax == TOOLCALL_SYNTAX_LLAMA3 || syntax == TOOLCALL_SYNTAX_JSON ? S_START
                                                                                   : S_TEXT;
}

void toolcall_parser_free(toolcall_parser *p)
{
    strbuf_free(&p->held);
    calls_free(p->pending, p->n_pending);
    *p = (toolcall_parser){0};
}

void toolcall_declare(toolcall_parser *p, const cJSON *tools)
{
    p->tools = tools;
}

/* ---- decoding a call's JSON */

/* Whether JSON text s[0..n) spells a NUL (\u0000, at any depth of string escaping): cJSON
 * would decode it into the C strings of a name or arguments and cut them there, so such a
 * call is left as the text it is. */
static bool spells_nul(const char *s, size_t n)
{
    for (size_t i = 0; i + 5 < n; i++)
        if (s[i] == '\\' && s[i + 1] == 'u' && !memcmp(s + i + 2, "0000", 4))
            return true;
    return false;
}

/* Whether name is among the declared tools (p->tools; NULL: any name is). */
static bool declared(const toolcall_parser *p, const char *name)
{
    if (!p->tools)
        return true;
    const cJSON *t;
    cJSON_ArrayForEach(t, p->tools)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
            return true;
    }
    return false;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* {"name": string, "arguments": object or a string holding one} (LLAMA3: "parameters",
 * required) into *c; false when it is not a call. */
static bool call_from(const cJSON *o, bool llama, toolcall_call *c)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, llama ? "parameters" : "arguments");
    if (!args)
        args = cJSON_GetObjectItemCaseSensitive(o, llama ? "arguments" : "parameters");
    if (!cJSON_IsObject(o) || !cJSON_IsString(name) || !name->valuestring[0] || (llama && !args))
        return false;
    cJSON *parsed = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
    const cJSON *obj = parsed ? parsed : args;
    if (obj && !cJSON_IsObject(obj)) {
        cJSON_Delete(parsed);
        return false;
    }
    c->name = strdup(name->valuestring);
    c->arguments = obj ? cJSON_PrintUnformatted(obj) : strdup("{}");
    cJSON_Delete(parsed);
    return true; /* a NULL string (out of memory) is the caller's to see */
}

/* The calls in s[0..n) (a whole JSON value) into *out (malloc'd, *n_out of them); -1 when
 * it is not the syntax's calls, 0 when out of memory, 1 when done. */
static int decode(toolcall_syntax syntax, const char *s, size_t n, toolcall_call **out,
                  size_t *n_out)
{
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, n, &end, false);
    if (!v || end != s + n) {
        cJSON_Delete(v);
        return -1;
    }
    bool list = cJSON_IsArray(v);
    size_t count = list ? (size_t)cJSON_GetArraySize(v) : 1;
    if (count == 0 || (list && (syntax == TOOLCALL_SYNTAX_HERMES ||
                                syntax == TOOLCALL_SYNTAX_LLAMA3))) {
        cJSON_Delete(v);
        return -1;
    }
    toolcall_call *calls = calloc(count, sizeof *calls);
    int rc = calls ? 1 : 0;
    size_t k = 0;
    for (const cJSON *o = list ? v->child : v; rc == 1 && o; o = list ? o->next : NULL, k++) {
        if (!call_from(o, syntax == TOOLCALL_SYNTAX_LLAMA3, &calls[k]))
            rc = -1;
        else if (!calls[k].name || !calls[k].arguments)
            rc = 0;
    }
    cJSON_Delete(v);
    if (rc != 1) {
        calls_free(calls, count);
        return rc;
    }
    *out = calls;
    *n_out = count;
    return 1;
}

/* A call whose name came before its arguments (name, n bytes) and whose arguments are
 * the JSON object s[0..len); the same returns as decode. */
static int decode_named(const char *name, size_t n, const char *s, size_t len,
                        toolcall_call **out, size_t *n_out)
{
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, len, &end, false);
    if (!cJSON_IsObject(v) || end != s + len) {
        cJSON_Delete(v);
        return -1;
    }
    toolcall_call *c = calloc(1, sizeof *c);
    if (c) {
        c->name = strndup(name, n);
        c->arguments = cJSON_PrintUnformatted(v);
    }
    cJSON_Delete(v);
    if (!c || !c->name || !c->arguments) {
        calls_free(c, c ? 1 : 0);
        return 0;
    }
    *out = c;
    *n_out = 1;
    return 1;
}

/* ---- output */

static void emit(toolcall_out *out, const char *s, size_t n)
{
    if (n && !strbuf_add(&out->content, s, n))
        out->failed = true;
}

/* Moves calls (n, malloc'd) to out. */
static void emit_calls(toolcall_out *out, toolcall_call *calls, size_t n)
{
    if (out->n_calls + n > out->cap_calls) {
        size_t cap = out->cap_calls ? out->cap_calls : 4;
        while (cap < out->n_calls + n)
            cap *= 2;
        toolcall_call *c = realloc(out->calls, cap * sizeof *c);
        if (!c) {
            out->failed = true;
            calls_free(calls, n);
            return;
        }
        out->calls = c;
        out->cap_calls = cap;
    }
    memcpy(out->calls + out->n_calls, calls, n * sizeof *calls);
    out->n_calls += n;
    free(calls);
}

/* Drops the first k bytes of held. */
static void consume(toolcall_parser *p, size_t k)
{
    memmove(p->held.s, p->held.s + k, p->held.len - k + 1);
    p->held.len -= k;
}

/* Emits held[0..k) as content and goes back to plain text. */
static void as_text(toolcall_parser *p, toolcall_out *out, size_t k)
{
    emit(out, p->held.s, k);
    consume(p, k);
    calls_free(p->pending, p->n_pending);
    p->pending = NULL;
    p->n_pending = 0;
    p->state = S_TEXT;
}

static void start_payload(toolcall_parser *p, size_t scan_from)
{
    p->state = S_PAYLOAD;
    p->value_at = SIZE_MAX;
    p->scan = scan_from;
    p->depth = 0;
    p->in_str = p->esc = false;
    p->name_at = p->name_end = 0;
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.';
}

/* Whether the n bytes at s are a beginning of the NUL-terminated w (all of it or less). */
static bool begins(const char *s, size_t n, const char *w)
{
    size_t m = strlen(w);
    return !memcmp(s, w, n < m ? n : m);
}

/* ---- the states; each returns true when it changed state (run again), false when it
 * needs more text */

static bool in_text(toolcall_parser *p, toolcall_out *out, bool final)
{
    const char *mk = toolcall_marker(p->syntax);
    size_t n = p->held.len, m = mk ? strlen(mk) : 0;
    for (size_t i = 0; mk && i < n; i++) {
        if (p->held.s[i] != mk[0] || !begins(p->held.s + i, n - i, mk))
            continue;
        if (n - i < m) { /* a marker's beginning: held until it is decided */
            if (final)
                break;
            emit(out, p->held.s, i);
            consume(p, i);
            return false;
        }
        emit(out, p->held.s, i);
        consume(p, i);
        start_payload(p, m);
        return true;
    }
    emit(out, p->held.s, n);
    consume(p, n);
    return false;
}

static bool at_start(toolcall_parser *p, toolcall_out *out, bool final)
{
    size_t i = 0;
    while (i < p->held.len && is_space(p->held.s[i]))
        i++;
    if (i == p->held.len) {
        if (final)
            as_text(p, out, p->held.len);
        return false;
    }
    char c = p->held.s[i];
    if (c == '{' || (c == '[' && p->syntax == TOOLCALL_SYNTAX_JSON))
        start_payload(p, 0);
    else
        p->state = S_TEXT;
    return true;
}

static bool in_payload(toolcall_parser *p, toolcall_out *out, bool final)
{
    const char *s = p->held.s;
    size_t n = p->held.len, end = 0;
    for (; p->scan < n && !end; p->scan++) {
        char c = s[p->scan];
        if (p->value_at == SIZE_MAX) { /* whitespace, then '{' (or '[' for a list) */
            bool mistral = p->syntax == TOOLCALL_SYNTAX_MISTRAL;
            if (is_space(c) && !p->name_end)
                continue;
            if (mistral && is_name_char(c) && (!p->name_end || p->name_end == p->scan)) {
                p->name_at = p->name_end ? p->name_at : p->scan; /* name[ARGS]{...} */
                p->name_end = p->scan + 1;
                continue;
            }
            size_t m = sizeof MISTRAL_ARGS - 1;
            if (p->name_end == p->scan && begins(s + p->scan, n - p->scan, MISTRAL_ARGS)) {
                if (n - p->scan >= m) {
                    p->scan += m - 1;
                    continue;
                }
                if (final)
                    as_text(p, out, n);
                return final; /* [ARGS] may still come whole */
            }
            bool list_ok = !p->name_end && (mistral || p->syntax == TOOLCALL_SYNTAX_JSON);
            if (c != '{' && !(c == '[' && list_ok)) {
                as_text(p, out, p->scan);
                return true;
            }
            p->value_at = p->scan;
        }
        if (p->in_str) {
            if (p->esc)
                p->esc = false;
            else if (c == '\\')
                p->esc = true;
            else if (c == '"')
                p->in_str = false;
        } else if (c == '"') {
            p->in_str = true;
        } else if (c == '{' || c == '[') {
            p->depth++;
        } else if ((c == '}' || c == ']') && --p->depth == 0) {
            end = p->scan + 1;
        }
    }
    if (!end) {
        if (final || n > TOOLCALL_MAX_HELD)
            as_text(p, out, n);
        return final || n > TOOLCALL_MAX_HELD;
    }
    toolcall_call *calls = NULL;
    size_t n_calls = 0;
    int rc = p->name_end ? decode_named(s + p->name_at, p->name_end - p->name_at,
                                        s + p->value_at, end - p->value_at, &calls, &n_calls)
                         : decode(p->syntax, s + p->value_at, end - p->value_at, &calls, &n_calls);
    if (rc == 0)
        out->failed = true;
    /* a NUL in the call's text, a raw one in a name before [ARGS], or an undeclared tool:
     * not a call the client asked for, so the model's text goes out as it is */
    bool nul = spells_nul(s + p->value_at, end - p->value_at) ||
               (p->name_end && memchr(s + p->name_at, '\0', p->name_end - p->name_at));
    for (size_t i = 0; rc == 1 && i < n_calls; i++)
        if (nul || !declared(p, calls[i].name))
            rc = -1;
    if (rc == -1 && calls) {
        calls_free(calls, n_calls);
        calls = NULL;
    }
    if (rc != 1) { /* not a call: its text is content */
        as_text(p, out, end);
        return true;
    }
    if (p->syntax == TOOLCALL_SYNTAX_HERMES) { /* whole once its tag closes */
        p->pending = calls;
        p->n_pending = n_calls;
        p->block_end = end;
        p->state = S_CLOSE;
        return true;
    }
    emit_calls(out, calls, n_calls);
    consume(p, end);
    p->state = S_AFTER;
    return true;
}

static bool at_close(toolcall_parser *p, toolcall_out *out, bool final)
{
    size_t j = p->block_end, n = p->held.len, m = strlen(HERMES_CLOSE);
    while (j < n && is_space(p->held.s[j]))
        j++;
    bool whole = n - j >= m && !memcmp(p->held.s + j, HERMES_CLOSE, m);
    if (!whole && !begins(p->held.s + j, n - j, HERMES_CLOSE)) { /* other text: no call */
        as_text(p, out, j);
        return true;
    }
    if (!whole && !final)
        return false; /* the tag may still come */
    emit_calls(out, p->pending, p->n_pending); /* closed, or the answer ended */
    p->pending = NULL;
    p->n_pending = 0;
    consume(p, whole ? j + m : n);
    p->state = S_AFTER;
    return true;
}

static bool after_call(toolcall_parser *p, bool final)
{
    bool llama = p->syntax == TOOLCALL_SYNTAX_LLAMA3;
    size_t i = 0, n = p->held.len;
    while (i < n && (is_space(p->held.s[i]) || (llama && p->held.s[i] == ';')))
        i++;
    if (i == n) {
        if (final)
            consume(p, n); /* whitespace after the last call is not content */
        return false;
    }
    const char *mk = toolcall_marker(p->syntax);
    if (mk && begins(p->held.s + i, n - i, mk)) {
        if (n - i < strlen(mk) && !final)
            return false;
        if (n - i >= strlen(mk)) {
            consume(p, i);
            start_payload(p, strlen(mk));
            return true;
        }
    }
    if (llama && p->held.s[i] == '{') {
        consume(p, i);
        start_payload(p, 0);
        return true;
    }
    p->state = S_TEXT; /* text after the calls: content, with the whitespace before it */
    return true;
}

static bool run(toolcall_parser *p, toolcall_out *out, bool final)
{
    if (!p->held.s && !strbuf_add(&p->held, "", 0)) {
        out->failed = true;
        return false;
    }
    for (bool again = true; again;) {
        switch (p->state) {
        case S_TEXT: again = in_text(p, out, final); break;
        case S_START: again = at_start(p, out, final); break;
        case S_PAYLOAD: again = in_payload(p, out, final); break;
        case S_CLOSE: again = at_close(p, out, final); break;
        default: again = after_call(p, final); break;
        }
    }
    return !out->failed;
}

bool toolcall_feed(toolcall_parser *p, const char *text, size_t len, toolcall_out *out)
{
    if (p->syntax == TOOLCALL_SYNTAX_NONE) {
        emit(out, text, len);
        return !out->failed;
    }
    if (len && !strbuf_add(&p->held, text, len)) {
        out->failed = true;
        return false;
    }
    return run(p, out, false);
}

bool toolcall_finish(toolcall_parser *p, toolcall_out *out)
{
    return p->syntax == TOOLCALL_SYNTAX_NONE || run(p, out, true);
}
