/* openai_json.c: the JSON bodies the server answers with: errors, whole responses and
 * Server-Sent-Event chunks, for chat and text completions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/strbuf.h"
#include "server/openai.h"
#include "server/utf8.h"

/* Prints and frees obj; NULL when anything failed on the way (obj may be NULL). */
static char *finish(cJSON *obj, bool ok)
{
    char *s = ok && obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    return s;
}

/* The JSON literal of the NUL-free n bytes at s (ill-formed UTF-8 repaired) without its
 * quotes, appended to out; false out of memory. */
static bool append_literal(strbuf *out, const char *s, size_t n)
{
    char *copy = utf8_sanitize(s, n);
    cJSON *j = copy ? cJSON_CreateString(copy) : NULL;
    char *lit = j ? cJSON_PrintUnformatted(j) : NULL;
    bool ok = lit && strbuf_add(out, lit + 1, strlen(lit) - 2);
    free(lit);
    cJSON_Delete(j);
    free(copy);
    return ok;
}

cJSON *oai_bytes_string(const char *s, size_t n)
{
    if (!s)
        s = "", n = 0;
    if (!memchr(s, 0, n)) {
        char *copy = utf8_sanitize(s, n);
        if (!copy)
            return NULL;
        cJSON *j = cJSON_CreateString(copy);
        free(copy);
        return j;
    }
    /* cJSON's strings end at a NUL: text holding one (a token whose text is U+0000) is
     * written as a raw literal with \u0000 escapes, never cut. */
    strbuf out = {0};
    bool ok = strbuf_add(&out, "\"", 1);
    for (size_t i = 0; ok && i <= n;) {
        const char *z = memchr(s + i, 0, n - i);
        size_t k = z ? (size_t)(z - (s + i)) : n - i;
        ok = append_literal(&out, s + i, k) &&
             (z ? strbuf_add(&out, "\\u0000", 6) : strbuf_add(&out, "\"", 1));
        i += k + 1;
    }
    cJSON *j = ok ? cJSON_CreateRaw(out.s) : NULL;
    strbuf_free(&out);
    return j;
}

#define bytes_string oai_bytes_string

/* Adds item to obj (an array when name is NULL); item is freed when it cannot be. */
static bool add(cJSON *obj, const char *name, cJSON *item)
{
    if (obj && item &&
        (name ? cJSON_AddItemToObject(obj, name, item) : cJSON_AddItemToArray(obj, item)))
        return true;
    cJSON_Delete(item);
    return false;
}

enum { LOGPROB_FLOOR = -9999 }; /* what OpenAI writes for a token ruled out */

/* Log-probabilities rounded to 6 significant digits: floats carry no more. A token the
 * model rules out has -infinity, which JSON cannot hold (cJSON would print null): it and
 * anything below the floor, or not a number at all, is written as the floor. */
static cJSON *logprob_number(float lp)
{
    if (!(lp >= LOGPROB_FLOOR))
        return cJSON_CreateNumber(LOGPROB_FLOOR);
    char buf[32];
    snprintf(buf, sizeof buf, "%.6g", (double)lp);
    return cJSON_CreateNumber(strtod(buf, NULL));
}

static cJSON *byte_array(const char *s, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)s[i]))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

char *oai_error_json(const oai_error *e)
{
    /* A message quotes request bytes (a path, a model name) and may be cut inside a
     * character: repaired here, so every error body is valid UTF-8. */
    char *msg = utf8_sanitize(e->message, strlen(e->message));
    cJSON *root = msg ? cJSON_CreateObject() : NULL;
    cJSON *o = root ? cJSON_AddObjectToObject(root, "error") : NULL;
    bool ok = o && cJSON_AddStringToObject(o, "message", msg) &&
         cJSON_AddStringToObject(o, "type", e->type) &&
         (e->param[0] ? cJSON_AddStringToObject(o, "param", e->param) != NULL
                      : cJSON_AddNullToObject(o, "param") != NULL) &&
         (e->code[0] ? cJSON_AddStringToObject(o, "code", e->code) != NULL
                     : cJSON_AddNullToObject(o, "code") != NULL);
    free(msg);
    return finish(root, ok);
}

/* Chat: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]} */
static cJSON *chat_logprob_entry(const oai_token_logprob *lp)
{
    cJSON *e = cJSON_CreateObject(), *tops = cJSON_CreateArray();
    bool ok = e && tops && add(e, "token", bytes_string(lp->bytes, lp->len)) &&
              add(e, "logprob", logprob_number(lp->logprob)) &&
              add(e, "bytes", byte_array(lp->bytes, lp->len));
    if (ok)
        ok = cJSON_AddItemToObject(e, "top_logprobs", tops);
    else
        cJSON_Delete(tops);
    for (int k = 0; ok && k < lp->n_top; k++) {
        const oai_top_logprob *t = &lp->top[k];
        cJSON *te = cJSON_CreateObject();
        ok = te && cJSON_AddItemToArray(tops, te);
        if (!ok)
            cJSON_Delete(te);
        ok = ok && add(te, "token", bytes_string(t->bytes, t->len)) &&
             add(te, "logprob", logprob_number(t->logprob)) &&
             add(te, "bytes", byte_array(t->bytes, t->len));
    }
    if (!ok) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

/* Chat logprobs: {"content": [entry...]}. */
static cJSON *chat_logprobs(const oai_token_logprob *lps, size_t n)
{
    cJSON *o = cJSON_CreateObject(), *content = cJSON_CreateArray();
    bool ok = o && content && cJSON_AddItemToObject(o, "content", content);
    if (!ok)
        cJSON_Delete(content);
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *e = chat_logprob_entry(&lps[i]);
        ok = e && cJSON_AddItemToArray(content, e);
        if (!ok)
            cJSON_Delete(e);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Completions logprobs: {"tokens", "token_logprobs", "top_logprobs": [{tok: lp}],
 * "text_offset"}; an offset counts the bytes of text emitted before the token's, so a
 * whole answer and a stream give the same ones. */
static cJSON *completion_logprobs(const oai_token_logprob *lps, size_t n)
{
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_CreateArray(), *lpa = cJSON_CreateArray(),
          *tops = cJSON_CreateArray(), *offs = cJSON_CreateArray();
    bool ok = o && toks && lpa && tops && offs;
    if (ok) {
        cJSON_AddItemToObject(o, "tokens", toks);
        cJSON_AddItemToObject(o, "token_logprobs", lpa);
        cJSON_AddItemToObject(o, "top_logprobs", tops);
        cJSON_AddItemToObject(o, "text_offset", offs);
    } else {
        cJSON_Delete(toks);
        cJSON_Delete(lpa);
        cJSON_Delete(tops);
        cJSON_Delete(offs);
    }
    for (size_t i = 0; ok && i < n; i++) {
        const oai_token_logprob *lp = &lps[i];
        cJSON *tok = bytes_string(lp->bytes, lp->len);
        cJSON *num = lp->no_logprob ? cJSON_CreateNull() : logprob_number(lp->logprob);
        cJSON *top = lp->no_logprob ? cJSON_CreateNull() : cJSON_CreateObject();
        cJSON *off = cJSON_CreateNumber((double)lp->text_offset);
        ok = tok && num && top && off;
        if (ok) {
            cJSON_AddItemToArray(toks, tok);
            cJSON_AddItemToArray(lpa, num);
            cJSON_AddItemToArray(tops, top);
            cJSON_AddItemToArray(offs, off);
        } else {
            cJSON_Delete(tok);
            cJSON_Delete(num);
            cJSON_Delete(top);
            cJSON_Delete(off);
        }
        for (int k = 0; ok && k < lp->n_top; k++) {
            char *name = utf8_sanitize(lp->top[k].bytes, lp->top[k].len);
            ok = name && add(top, name, logprob_number(lp->top[k].logprob));
            free(name);
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *envelope(const oai_meta *m, bool chunk)
{
    cJSON *root = cJSON_CreateObject();
    const char *object = m->kind == OAI_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                             : "text_completion";
    bool ok = root && cJSON_AddStringToObject(root, "id", m->id) &&
              cJSON_AddStringToObject(root, "object", object) &&
              cJSON_AddNumberToObject(root, "created", (double)m->created) &&
              cJSON_AddStringToObject(root, "model", m->model);
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static cJSON *usage_object(const oai_usage *u)
{
    cJSON *o = cJSON_CreateObject(), *details = cJSON_CreateObject();
    bool ok = o && details &&
              cJSON_AddNumberToObject(o, "prompt_tokens", u->prompt_tokens) &&
              cJSON_AddNumberToObject(o, "completion_tokens", u->completion_tokens) &&
              cJSON_AddNumberToObject(o, "total_tokens", u->prompt_tokens + u->completion_tokens) &&
              cJSON_AddNumberToObject(details, "cached_tokens", u->cached_tokens);
    if (ok)
        ok = cJSON_AddItemToObject(o, "prompt_tokens_details", details);
    else
        cJSON_Delete(details);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* "timings": the server's clock, so a client's speed figure does not depend on how the
 * chunks were buffered on the way: tokens_per_second counts the tokens after the first
 * over the time from the first to the last. An untimed usage adds nothing. */
static bool add_timings(cJSON *root, const oai_usage *u)
{
    if (!u->timed)
        return true;
    cJSON *t = cJSON_AddObjectToObject(root, "timings");
    bool ok = t && cJSON_AddNumberToObject(t, "time_to_first_token_ms", u->ttft_ms) &&
              cJSON_AddNumberToObject(t, "generation_ms", u->generation_ms);
    if (ok && u->completion_tokens > 1 && u->generation_ms > 0)
        ok = cJSON_AddNumberToObject(t, "tokens_per_second",
                                     (u->completion_tokens - 1) / (u->generation_ms / 1e3)) != NULL;
    return ok;
}

static bool add_finish(cJSON *o, const char *finish_reason)
{
    return finish_reason ? cJSON_AddStringToObject(o, "finish_reason", finish_reason) != NULL
                         : cJSON_AddNullToObject(o, "finish_reason") != NULL;
}

/* Appends call k to obj's "tool_calls" (made on the first): {"index"? (in chunks), "id",
 * "type", "function": {"name", "arguments"}} whole, or in a chunk's head (arguments "")
 * or tail (arguments only). */
static bool add_tool_call(cJSON *obj, size_t k, const oai_tool_call *call, bool head,
                          bool tail)
{
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, "tool_calls");
    if (!arr && !add(obj, "tool_calls", arr = cJSON_CreateArray()))
        return false;
    cJSON *o = cJSON_CreateObject();
    if (!add(arr, NULL, o))
        return false;
    /* in a chunk, which call of the answer it continues */
    bool ok = (head && tail) || cJSON_AddNumberToObject(o, "index", (double)k);
    ok = ok && (!head || (cJSON_AddStringToObject(o, "id", call->id) &&
                          cJSON_AddStringToObject(o, "type", "function")));
    cJSON *fn = cJSON_CreateObject();
    if (!ok) {
        cJSON_Delete(fn);
        return false;
    }
    return add(o, "function", fn) &&
           (!head || cJSON_AddStringToObject(fn, "name", call->name)) &&
           cJSON_AddStringToObject(fn, "arguments", tail ? call->arguments : "");
}

char *oai_response_json(const oai_meta *m, const oai_choice *choices, size_t n_choices,
                        const oai_usage *usage)
{
    cJSON *root = envelope(m, false);
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "choices") : NULL;
    bool ok = arr != NULL;
    for (size_t i = 0; ok && i < n_choices; i++) {
        const oai_choice *c = &choices[i];
        cJSON *ch = cJSON_CreateObject();
        ok = ch && cJSON_AddItemToArray(arr, ch);
        if (!ok)
            cJSON_Delete(ch);
        ok = ok && cJSON_AddNumberToObject(ch, "index", (double)i);
        if (ok && m->kind == OAI_CHAT) {
            cJSON *msg = cJSON_AddObjectToObject(ch, "message");
            ok = msg && cJSON_AddStringToObject(msg, "role", "assistant") &&
                 add(msg, "content", c->n_tool_calls && !c->text_len
                                         ? cJSON_CreateNull()
                                         : bytes_string(c->text, c->text_len));
            for (size_t k = 0; ok && k < c->n_tool_calls; k++)
                ok = add_tool_call(msg, k, &c->tool_calls[k], true, true);
        } else if (ok) {
            ok = add(ch, "text", bytes_string(c->text, c->text_len));
        }
        if (ok && c->logprobs)
            ok = add(ch, "logprobs", m->kind == OAI_CHAT
                                         ? chat_logprobs(c->logprobs, c->n_logprobs)
                                         : completion_logprobs(c->logprobs, c->n_logprobs));
        else if (ok)
            ok = cJSON_AddNullToObject(ch, "logprobs") != NULL;
        ok = ok && add_finish(ch, c->finish_reason);
    }
    ok = ok && add(root, "usage", usage_object(usage)) && add_timings(root, usage);
    return finish(root, ok);
}

char *oai_chunk_json(const oai_meta *m, int index, bool with_role, const char *text,
                     size_t text_len, const char *finish_reason, const oai_token_logprob *lp)
{
    cJSON *root = envelope(m, true);
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "choices") : NULL;
    cJSON *ch = cJSON_CreateObject();
    bool ok = arr && ch && cJSON_AddItemToArray(arr, ch);
    if (!ok && !arr)
        cJSON_Delete(ch);
    ok = ok && cJSON_AddNumberToObject(ch, "index", index);
    if (ok && m->kind == OAI_CHAT) {
        cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
        ok = delta != NULL;
        if (ok && with_role)
            ok = cJSON_AddStringToObject(delta, "role", "assistant") != NULL;
        if (ok && text)
            ok = add(delta, "content", bytes_string(text, text_len));
    } else if (ok) {
        ok = add(ch, "text", bytes_string(text ? text : "", text ? text_len : 0));
    }
    if (ok && lp)
        ok = add(ch, "logprobs", m->kind == OAI_CHAT ? chat_logprobs(lp, 1)
                                                     : completion_logprobs(lp, 1));
    else if (ok)
        ok = cJSON_AddNullToObject(ch, "logprobs") != NULL;
    ok = ok && add_finish(ch, finish_reason);
    return finish(root, ok);
}

char *oai_tool_chunk_json(const oai_meta *m, int index, int k, const oai_tool_call *call,
                          bool head)
{
    cJSON *root = envelope(m, true);
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "choices") : NULL;
    cJSON *ch = cJSON_CreateObject();
    bool ok = add(arr, NULL, ch) && cJSON_AddNumberToObject(ch, "index", index);
    cJSON *delta = ok ? cJSON_AddObjectToObject(ch, "delta") : NULL;
    ok = ok && delta && add_tool_call(delta, (size_t)k, call, head, !head) &&
         cJSON_AddNullToObject(ch, "logprobs") && add_finish(ch, NULL);
    return finish(root, ok);
}

char *oai_usage_chunk_json(const oai_meta *m, const oai_usage *usage)
{
    cJSON *root = envelope(m, true);
    bool ok = root && cJSON_AddArrayToObject(root, "choices") &&
              add(root, "usage", usage_object(usage)) && add_timings(root, usage);
    return finish(root, ok);
}
